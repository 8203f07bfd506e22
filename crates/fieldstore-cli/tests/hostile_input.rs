//! Hostile input through the real binary and a real server (issue 18): a seeded sample of random
//! requests, `sample` options, configs, schemas and GRIB bytes. None may kill a process by a
//! signal, panic, or leak ecCodes' own log lines; each is a clean error or an answer, and the
//! server serves on. `FIELDSTORE_HOSTILE_INPUTS` (default 240) and `FIELDSTORE_HOSTILE_SEED` make
//! longer or other runs.

mod common;
#[path = "common/server.rs"]
mod server;

use std::path::{Path, PathBuf};
use std::process::Output;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

const TOKEN: &str = "hostile-token";

/// xorshift64*: the same inputs for the same seed, without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T: ?Sized>(&mut self, items: &[&'a T]) -> &'a T {
        items[self.below(items.len())]
    }

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    /// Printable ASCII or any char, of up to `max` chars.
    fn text(&mut self, max: usize) -> String {
        let n = self.below(max + 1);
        (0..n)
            .map(|_| {
                if self.chance(80) {
                    char::from(b' ' + self.below(95) as u8)
                } else {
                    char::from_u32(1 + self.below(0x2_FFFF) as u32).unwrap_or('\u{fffd}')
                }
            })
            .collect()
    }
}

const KEYWORDS: [&str; 20] = [
    "class",
    "expver",
    "stream",
    "date",
    "time",
    "type",
    "levtype",
    "levelist",
    "step",
    "param",
    "number",
    "domain",
    "grid",
    "hdate",
    "month",
    "year",
    "fcmonth",
    "iteration",
    "frequency",
    "direction",
];

const VALUES: [&str; 59] = [
    "é",
    "",
    " ",
    "t\u{301}",
    "0",
    "-1",
    "999999",
    "99999999999999999999",
    "-9223372036854775808",
    "9223372036854775807",
    "1e308",
    "nan",
    "inf",
    "-0",
    "0/to/999999999999/by/1",
    "1/to/10/by/0",
    "10/to/1/by/-1",
    "1/to/10/by/-1",
    "0/to/9223372036854775807/by/9223372036854775807",
    "20260101/to/99991231",
    "-99999999",
    "20190230",
    "2019-02-30",
    "12:99",
    "2400",
    "0-6",
    "6-0",
    "30m",
    "1h",
    "-6",
    "all",
    "to",
    "by",
    "/",
    "//",
    "\"",
    "'",
    "\\",
    "1.5",
    "130.128",
    "112.1",
    "1.9223372036854775807",
    "255.255",
    "300.1",
    "0.0",
    "999.999",
    "t/u/v",
    "2t",
    "avg_2t",
    "nosuchparam",
    "od",
    "0001",
    "oper",
    "fc",
    "pl",
    "sfc",
    "ml",
    "1000/500",
    "jan",
];

fn random_request(r: &mut Rng) -> String {
    let mut parts: Vec<String> = Vec::new();
    if r.chance(60) {
        parts.push(
            r.pick(&["retrieve", "list", "archive", "", "é"])
                .to_string(),
        );
    }
    for _ in 0..1 + r.below(6) {
        let kw = if r.chance(90) {
            r.pick(&KEYWORDS).to_string()
        } else {
            r.text(8)
        };
        let n = 1 + r.below(3);
        let values: Vec<String> = (0..n)
            .map(|_| {
                if r.chance(80) {
                    r.pick(&VALUES).to_string()
                } else {
                    r.text(12)
                }
            })
            .collect();
        parts.push(format!("{kw}={}", values.join("/")));
    }
    let mut s = parts.join(",");
    if r.chance(10) {
        s.push_str(&r.text(6));
    }
    s.replace('\0', "")
}

fn random_sample_args(r: &mut Rng, out: &Path) -> Vec<String> {
    let mut args = vec!["sample".into(), "--out".into(), out.display().to_string()];
    for _ in 0..1 + r.below(3) {
        let opt = r.pick(&[
            "--params",
            "--points",
            "--date",
            "--time",
            "--steps",
            "--levels",
            "--class",
            "--expver",
            "--members",
            "--levtype",
        ]);
        let v = match opt {
            "--points" => r
                .pick(&["0", "1", "7", "16777217", "100000000000", "-1", "1e9", "x"])
                .to_string(),
            "--members" => r.pick(&["0", "1", "300", "4294967296", "-2"]).to_string(),
            _ if r.chance(85) => r.pick(&VALUES).to_string(),
            _ => r.text(10),
        };
        // `--opt=value`: values starting with '-' are values, not options.
        args.push(format!("{opt}={v}"));
    }
    if !args.iter().any(|a| a.starts_with("--points")) {
        args.push("--points=10".into());
    }
    args.into_iter().map(|a| a.replace('\0', "")).collect()
}

/// Random damage to a text: deleted, duplicated, replaced spans and inserted fragments.
fn mutate_text(r: &mut Rng, base: &str, fragments: &[&str]) -> String {
    let mut chars: Vec<char> = base.chars().collect();
    for _ in 0..1 + r.below(4) {
        let at = r.below(chars.len() + 1);
        match r.below(4) {
            0 => {
                let end = (at + r.below(20)).min(chars.len());
                chars.drain(at..end);
            }
            1 => {
                let f: Vec<char> = r.pick(fragments).chars().collect();
                chars.splice(at..at, f);
            }
            2 => {
                let f: Vec<char> = r.text(8).chars().collect();
                chars.splice(at..at, f);
            }
            _ => {
                let end = (at + r.below(40)).min(chars.len());
                let span: Vec<char> = chars[at..end].to_vec();
                chars.splice(at..at, span);
            }
        }
    }
    chars.into_iter().filter(|c| *c != '\0').collect()
}

const CONFIG_FRAGMENTS: [&str; 16] = [
    "\n",
    ": ",
    "- ",
    "[",
    "]",
    "{",
    "}",
    "type: remote\n",
    "type: select\n",
    "spaces: []\n",
    "roots: [{path: /}]\n",
    "capacity: 99999999999999999999\n",
    "max_fill: 300\n",
    "&a [*a]\n",
    "!!binary x\n",
    "port: 70000\n",
];

const SCHEMA_FRAGMENTS: [&str; 14] = [
    "[",
    "]",
    ",",
    "?",
    "-",
    "=",
    "\n",
    "[ class, expver [ date [ param ]]]\n",
    "step:Step;\n",
    "param:Param;\n",
    "x:NoSuchType;\n",
    "[ a [ b [ c",
    "levelist:Double;",
    "[ class=od/rd, expver?1 ]",
];

/// Damage to GRIB bytes: truncation, bit flips, a length claiming gigabytes, editions swapped,
/// messages spliced.
fn mutate_grib(r: &mut Rng, grib2: &[u8], grib1: &[u8]) -> Vec<u8> {
    let mut b = match r.below(4) {
        0 => grib1.to_vec(),
        1 => [grib1, grib2].concat(),
        _ => grib2.to_vec(),
    };
    for _ in 0..1 + r.below(3) {
        match r.below(6) {
            0 => {
                let n = r.below(b.len() + 1);
                b.truncate(n);
            }
            1 => {
                for _ in 0..1 + r.below(16) {
                    if !b.is_empty() {
                        let at = r.below(b.len());
                        b[at] ^= 1 << r.below(8);
                    }
                }
            }
            2 if b.len() >= 16 => {
                // The total length: 3 bytes at 4 (edition 1), 8 bytes at 8 (edition 2).
                if b[7] == 2 {
                    b[8..16].copy_from_slice(&(u64::MAX >> r.below(40)).to_be_bytes());
                } else {
                    b[4..7].copy_from_slice(&[0xff, 0xff, r.below(256) as u8]);
                }
            }
            3 if b.len() >= 8 => b[7] = r.pick(&[&0u8, &1, &2, &3, &255]).to_owned(),
            4 => {
                let at = r.below(b.len() + 1);
                let from = r.below(b.len() + 1);
                let piece: Vec<u8> = b[from..(from + r.below(64)).min(b.len())].to_vec();
                b.splice(at..at, piece);
            }
            _ => {
                let at = r.below(b.len() + 1);
                let end = (at + r.below(200)).min(b.len());
                let junk: Vec<u8> = (at..end).map(|_| r.next() as u8).collect();
                b.splice(at..end, junk);
            }
        }
    }
    b
}

#[derive(Default)]
struct Figures {
    inputs: AtomicUsize,
    errors: AtomicUsize,
    answers: AtomicUsize,
    crashes: Mutex<Vec<String>>,
}

impl Figures {
    /// Judges one run of the binary on one input.
    fn judge(&self, what: &str, input: &str, o: &Output) {
        self.inputs.fetch_add(1, Ordering::Relaxed);
        let err = String::from_utf8_lossy(&o.stderr);
        let fault = match o.status.code() {
            None => Some(format!("killed by a signal ({:?})", o.status)),
            Some(101) => Some("exit 101 (panic)".to_string()),
            _ if err.contains("panicked at") => Some("panicked".to_string()),
            _ if err.contains("ECCODES ") => Some("ecCodes wrote to stderr".to_string()),
            Some(0) => None,
            // Clean errors: fieldstore's own line, or clap's usage error.
            Some(_) if err.contains("fieldstore: error:") || err.starts_with("error:") => None,
            Some(c) => Some(format!("exit {c} without a clean error")),
        };
        if let Some(f) = fault {
            let first: String = err.lines().take(6).collect::<Vec<_>>().join(" | ");
            self.crashes
                .lock()
                .unwrap()
                .push(format!("{what} {input:?}: {f}: {first}"));
        } else if o.status.success() {
            self.answers.fetch_add(1, Ordering::Relaxed);
        } else {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

struct Env {
    dir: tempfile::TempDir,
    grib2: Vec<u8>,
    grib1: Vec<u8>,
}

impl Env {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn run(&self, config: &Path, args: &[String]) -> Output {
        common::fieldstore()
            .args(args)
            .env("FDB_CONFIG_FILE", config)
            .output()
            .unwrap()
    }

    fn local(&self) -> PathBuf {
        self.path("local.yaml")
    }

    fn remote(&self) -> PathBuf {
        self.path("remote.yaml")
    }
}

/// One input, chosen and made by `seed`, run and judged.
fn one(env: &Env, figures: &Figures, seed: u64, i: usize) {
    let mut r = Rng(seed
        .wrapping_add(i as u64)
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        | 1);
    let s = |v: &[&str]| v.iter().map(|a| a.to_string()).collect::<Vec<String>>();
    match i % 12 {
        // Requests, locally and through the server.
        0..=4 => {
            let req = random_request(&mut r);
            let out = env.path(&format!("out{i}.grib")).display().to_string();
            let (cmd, config) = match r.below(6) {
                0 => (s(&["request", "expand", &req]), env.local()),
                1 => (s(&["request", "expand", "--schema", &req]), env.local()),
                2 => (s(&["list", &req]), env.local()),
                3 => (s(&["list", &req]), env.remote()),
                4 => (s(&["read", &req, &out]), env.remote()),
                _ => (s(&["axes", &req]), env.remote()),
            };
            figures.judge(&cmd[0], &req, &env.run(&config, &cmd));
        }
        5 | 6 => {
            let out = env.path(&format!("sample{i}.grib"));
            let args = random_sample_args(&mut r, &out);
            figures.judge(
                "sample",
                &args[3..].join(" "),
                &env.run(&env.local(), &args),
            );
            let _ = std::fs::remove_file(out);
        }
        7 => {
            let base = std::fs::read_to_string(env.local()).unwrap();
            let text = mutate_text(&mut r, &base, &CONFIG_FRAGMENTS);
            let p = env.path(&format!("config{i}.yaml"));
            std::fs::write(&p, &text).unwrap();
            let req = "class=od,expver=0001".to_string();
            figures.judge("config", &text, &env.run(&p, &["list".into(), req]));
        }
        8 => {
            let base = fieldstore::model::schema::Schema::default_schema_text();
            let text = mutate_text(&mut r, base, &SCHEMA_FRAGMENTS);
            let p = env.path(&format!("schema{i}"));
            std::fs::write(&p, &text).unwrap();
            let cmd = if r.chance(50) {
                s(&["schema", "check", &p.display().to_string()])
            } else {
                let c = env.path(&format!("schema{i}.yaml"));
                std::fs::write(
                    &c,
                    format!(
                        "type: local\nschema: {}\nspaces: [{{roots: [{{path: {}}}]}}]\n",
                        p.display(),
                        env.path("schema-root").display()
                    ),
                )
                .unwrap();
                let out = env.run(
                    &c,
                    &s(&["write", &env.path("a.grib").display().to_string()]),
                );
                figures.judge("schema+write", &text, &out);
                return;
            };
            figures.judge("schema", &text, &env.run(&env.local(), &cmd));
        }
        _ => {
            let bytes = mutate_grib(&mut r, &env.grib2, &env.grib1);
            let p = env.path(&format!("bad{i}.grib"));
            std::fs::write(&p, &bytes).unwrap();
            let config = if i.is_multiple_of(2) {
                env.local()
            } else {
                env.remote()
            };
            let cmd = s(&["write", &p.display().to_string()]);
            figures.judge(
                "write",
                &format!("{} bytes", bytes.len()),
                &env.run(&config, &cmd),
            );
            let _ = std::fs::remove_file(p);
        }
    }
}

#[test]
fn hostile_input_never_crashes_the_cli_or_the_server() {
    let inputs: usize = std::env::var("FIELDSTORE_HOSTILE_INPUTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(240);
    let seed: u64 = std::env::var("FIELDSTORE_HOSTILE_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(18);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("local.yaml"),
        format!(
            "type: local\nspaces: [{{roots: [{{path: {}}}]}}]\n",
            dir.path().join("root").display()
        ),
    )
    .unwrap();
    let grib1 = std::fs::read("/usr/share/eccodes/samples/GRIB1.tmpl")
        .or_else(|_| std::fs::read("/usr/local/share/eccodes/samples/GRIB1.tmpl"))
        .unwrap_or_default();
    let mut env = Env {
        dir,
        grib2: Vec::new(),
        grib1,
    };
    let a = env.path("a.grib");
    let o = env.run(
        &env.local(),
        &[
            "sample",
            "--out",
            a.to_str().unwrap(),
            "--steps",
            "0",
            "--params",
            "t/u",
            "--levels",
            "1000/500",
            "--points",
            "50",
        ]
        .map(String::from),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    env.grib2 = std::fs::read(&a).unwrap();
    // One message of the four is enough to damage.
    let first = u64::from_be_bytes(env.grib2[8..16].try_into().unwrap()) as usize;
    env.grib2.truncate(first);
    if env.grib1.is_empty() {
        env.grib1 = env.grib2.clone();
    }
    let mut server = server::start(
        {
            let mut c = common::fieldstore();
            c.args(["server", "--listen", "127.0.0.1:0", "--token", TOKEN])
                .env("FDB_CONFIG_FILE", env.local());
            c
        },
        env.dir.path(),
        TOKEN,
    );
    let write_a = ["write".to_string(), a.display().to_string()];
    assert!(env.run(&env.remote(), &write_a).status.success());

    // ecCodes' own log lines stay off stderr: one clean error of fieldstore's.
    let none = env.path("none.grib").display().to_string();
    let o = env.run(
        &env.local(),
        &["sample", "--out", &none, "--params", "999999"].map(String::from),
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("fieldstore: error:") && err.contains("paramId=999999"),
        "{err}"
    );

    let figures = Figures::default();
    let next = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= inputs {
                    break;
                }
                one(&env, &figures, seed, i);
            });
        }
    });

    // The server is the same process and still answers; the store still reads.
    assert!(server.is_running(), "the server died");
    let list = |config: &Path| {
        let o = env.run(
            config,
            &[
                "list".into(),
                "class=od,expver=0001".into(),
                "--porcelain".into(),
            ],
        );
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).lines().count()
    };
    assert!(list(&env.remote()) >= 4);
    assert!(list(&env.local()) >= 4);
    let log = std::fs::read_to_string(env.path("server.log")).unwrap_or_default();
    assert!(!log.contains("panicked at"), "{log}");
    let crashes = figures.crashes.lock().unwrap();
    println!(
        "hostile input: seed {seed}, inputs {}, errors {}, answers {}, crashes={}",
        figures.inputs.load(Ordering::Relaxed),
        figures.errors.load(Ordering::Relaxed),
        figures.answers.load(Ordering::Relaxed),
        crashes.len()
    );
    assert!(crashes.is_empty(), "{}", crashes.join("\n"));
    assert_eq!(figures.inputs.load(Ordering::Relaxed), inputs);
}
