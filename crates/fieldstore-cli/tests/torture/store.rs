//! A store directory of the torture run: its config, `fieldstore` commands against it, sample
//! fields, and the fields it is expected to hold.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::run::{run, Outcome, Tally};

/// Database of the fields the phases write and check.
pub const DB: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200";
/// Another database, for wipes and as the undamaged neighbour.
pub const OTHER: &str = "class=od,expver=0001,stream=oper,date=20261123,time=1200";

pub struct Store {
    pub dir: PathBuf,
}

impl Store {
    /// A local store in `dir` (created), config `local.yaml`, root `root`.
    pub fn new(dir: PathBuf) -> Store {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("local.yaml"),
            format!(
                "type: local\nspaces: [{{roots: [{{path: {}}}]}}]\n",
                dir.join("root").display()
            ),
        )
        .unwrap();
        Store { dir }
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// `fieldstore --config <config> args...`; `config` names a file in the store directory.
    pub fn cmd(&self, config: &str, args: &[&str]) -> Command {
        let mut c = crate::common::fieldstore();
        c.arg("--config").arg(self.path(config)).args(args);
        c
    }

    pub fn run(&self, tally: &Tally, context: &str, config: &str, args: &[&str]) -> Outcome {
        run(
            self.cmd(config, args),
            &self.dir,
            format!("fieldstore --config {config} {}", shell_words(args)),
            tally,
            context,
        )
    }

    /// A command that must work (setup, not under test): panics with its stderr otherwise.
    pub fn ok(&self, tally: &Tally, config: &str, args: &[&str]) -> Vec<u8> {
        let o = self.run(tally, "setup", config, args);
        assert!(o.ok(), "setup {args:?}: {}", o.stderr);
        o.stdout
    }

    /// Sample fields t/u on levels 1000/500 for each of `steps` (4 a step, in step order).
    pub fn sample(&self, tally: &Tally, name: &str, steps: &str, date: &str) -> PathBuf {
        let p = self.path(name);
        self.ok(
            tally,
            "local.yaml",
            &[
                "sample",
                "--out",
                p.to_str().unwrap(),
                "--steps",
                steps,
                "--params",
                "t/u",
                "--levels",
                "1000/500",
                "--date",
                date,
                "--points",
                "40",
            ],
        );
        p
    }

    /// `list <request> --porcelain`, sorted; panics on failure (setup only).
    pub fn list(&self, tally: &Tally, config: &str, request: &str) -> Vec<String> {
        lines(&self.ok(tally, config, &["list", request, "--porcelain"]))
    }
}

pub fn lines(out: &[u8]) -> Vec<String> {
    let mut v: Vec<String> = String::from_utf8_lossy(out)
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

/// The GRIB messages of a file or byte string (what `read` wrote, split back into fields).
pub fn messages(bytes: &[u8]) -> Result<Vec<Vec<u8>>, String> {
    fieldstore::grib::MessageReader::new(bytes, "torture")
        .map(|m| m.map(|m| m.bytes.to_vec()).map_err(|e| e.to_string()))
        .collect()
}

/// The step of a listed field (`... step=N,...`).
pub fn step_of(line: &str) -> Option<u64> {
    line.split("step=")
        .nth(1)?
        .split([',', '}', ' '])
        .next()?
        .parse()
        .ok()
}

/// A request naming every sample field of `db` for these steps.
pub fn fields(db: &str, steps: &str) -> String {
    format!("{db},type=fc,levtype=pl,levelist=1000/500,param=t/u,step={steps}")
}

/// Arguments as a shell would need them, for reproducers.
pub fn shell_words(args: &[&str]) -> String {
    args.iter()
        .map(|a| {
            if a.chars()
                .all(|c| c.is_ascii_alphanumeric() || "=,/._-:".contains(c))
            {
                a.to_string()
            } else {
                format!("'{}'", a.replace('\'', "'\\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every regular file under `dir`, sorted.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                out.extend(files_under(&p));
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}
