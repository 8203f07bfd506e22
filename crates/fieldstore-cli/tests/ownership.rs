//! Local ownership (issue 18): with the store's directories writable by everyone, so that only
//! fieldstore's own check protects, another Unix user cannot lock, unlock, purge (with or without
//! anything to purge), wipe, compact, move or replace anything in a database it does not own, by
//! `fieldstore` commands or FDB5's tool names, and each refusal leaves the database's files
//! byte-identical. The owner may do all of it, and so may root (as FDB5).
//! Real processes as two unprivileged uids via `setpriv`; needs root (SKIP otherwise).

mod common;
#[path = "common/skip.rs"]
mod skip;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const OWNER: &str = "65534";
const OTHER: &str = "65533";
const DB: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200";

struct Store {
    dir: tempfile::TempDir,
}

impl Store {
    fn new() -> Store {
        let dir = tempfile::tempdir().unwrap();
        let base = dir.path().display();
        std::fs::write(
            dir.path().join("config.yaml"),
            format!("type: local\nspaces: [{{roots: [{{path: {base}/root}}, {{path: {base}/slow}}]}}]\n"),
        )
        .unwrap();
        std::fs::create_dir_all(dir.path().join("root")).unwrap();
        std::fs::create_dir_all(dir.path().join("slow")).unwrap();
        Store { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Everything under the store writable by everyone: the file system stops no one.
    fn open_up(&self) {
        let s = Command::new("chmod")
            .args(["-R", "a+rwX", self.dir.path().to_str().unwrap()])
            .status()
            .unwrap();
        assert!(s.success());
    }

    /// `fieldstore ARGS` (or the FDB5 tool `name` when given) as `uid`, or as root for `None`.
    fn run_as(&self, uid: Option<&str>, tool: Option<&str>, args: &[&str]) -> Output {
        let exe = match tool {
            Some(name) => {
                let p = self.path(name);
                if !p.exists() {
                    std::os::unix::fs::symlink(env!("CARGO_BIN_EXE_fieldstore"), &p).unwrap();
                }
                p
            }
            None => PathBuf::from(env!("CARGO_BIN_EXE_fieldstore")),
        };
        let mut c = match uid {
            Some(uid) => {
                let mut c = Command::new("setpriv");
                c.args(["--reuid", uid, "--regid", uid, "--clear-groups", "--"])
                    .arg(exe);
                c
            }
            None => Command::new(exe),
        };
        // What `common::fieldstore()` keeps out of the environment.
        for (k, v) in common::fieldstore().get_envs() {
            if v.is_none() {
                c.env_remove(k);
            }
        }
        c.args(args)
            .env("FDB_CONFIG_FILE", self.path("config.yaml"))
            .current_dir(self.dir.path());
        c.output().unwrap()
    }

    fn ok_as(&self, uid: Option<&str>, args: &[&str]) -> String {
        let o = self.run_as(uid, None, args);
        assert!(
            o.status.success(),
            "{args:?} as {uid:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// Every file under both roots with its bytes.
    fn snapshot(&self) -> BTreeMap<PathBuf, Vec<u8>> {
        fn walk(p: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
            for e in std::fs::read_dir(p).unwrap() {
                let e = e.unwrap();
                if e.file_type().unwrap().is_dir() {
                    out.insert(e.path(), Vec::new());
                    walk(&e.path(), out);
                } else {
                    out.insert(e.path(), std::fs::read(e.path()).unwrap());
                }
            }
        }
        let mut out = BTreeMap::new();
        walk(&self.path("root"), &mut out);
        walk(&self.path("slow"), &mut out);
        out
    }

    /// `args` run by the other user is refused for `action`, naming the database, the owner and
    /// the acting uid, and changes no byte of the store.
    fn refused(&self, tool: Option<&str>, args: &[&str], action: &str) {
        let before = self.snapshot();
        let o = self.run_as(Some(OTHER), tool, args);
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{tool:?} {args:?} was accepted");
        assert!(
            err.contains(&format!(
                "belongs to uid {OWNER}; uid {OTHER} may not {action} it"
            )) && err.contains(&self.path("root").display().to_string()),
            "{tool:?} {args:?}: {err}"
        );
        assert!(
            self.snapshot() == before,
            "{tool:?} {args:?} changed the store although refused"
        );
    }
}

fn usable() -> bool {
    // SAFETY: geteuid cannot fail.
    let root = unsafe { geteuid() } == 0;
    root && Command::new("setpriv").arg("--help").output().is_ok()
}

extern "C" {
    fn geteuid() -> u32;
}

#[test]
fn another_user_changes_nothing_in_a_database_it_does_not_own() {
    if !usable() {
        return skip::skip(
            "another_user_changes_nothing_in_a_database_it_does_not_own",
            "not root, or no setpriv",
            false,
        );
    }
    let s = Store::new();
    let grib = s.path("a.grib");
    s.ok_as(
        None,
        &[
            "sample",
            "--out",
            grib.to_str().unwrap(),
            "--steps",
            "0",
            "--params",
            "t/u",
            "--levels",
            "1000/500",
            "--points",
            "20",
        ],
    );
    s.open_up();
    s.ok_as(Some(OWNER), &["write", grib.to_str().unwrap()]);
    s.open_up();
    let slow = s.path("slow").display().to_string();

    // Nothing to purge yet: still refused (it was accepted before).
    s.refused(None, &["purge", DB, "--doit"], "purge");
    s.refused(Some("fdb-purge"), &["--doit", DB], "purge");
    s.refused(
        None,
        &["control", "lock", DB, "--archive", "--retrieve"],
        "lock",
    );
    s.refused(Some("fdb-lock"), &["--archive", DB], "lock");
    s.refused(None, &["wipe", DB, "--doit"], "wipe");
    s.refused(Some("fdb-wipe"), &["--doit", DB], "wipe");
    s.refused(None, &["compact", DB], "compact");
    s.refused(None, &["move", DB, "--to", &slow], "move");
    s.refused(Some("fdb-move"), &[&format!("--dest={slow}"), DB], "move");
    s.refused(None, &["write", grib.to_str().unwrap()], "write to");

    // Replaced fields, so there is something to purge; and a lock the owner set.
    s.ok_as(Some(OWNER), &["write", grib.to_str().unwrap()]);
    s.ok_as(Some(OWNER), &["control", "lock", DB, "--wipe"]);
    s.open_up();
    s.refused(None, &["purge", DB, "--doit"], "purge");
    s.refused(None, &["control", "unlock", DB, "--wipe"], "unlock");
    s.refused(Some("fdb-unlock"), &["--wipe", DB], "unlock");
    s.refused(None, &["compact", DB], "compact");

    // A request naming the other's own database as well as the owner's: refused before either
    // changes (the other's database comes first).
    let mine = s.path("mine.grib");
    s.ok_as(
        None,
        &[
            "sample",
            "--out",
            mine.to_str().unwrap(),
            "--date",
            "20261121",
            "--steps",
            "0",
            "--params",
            "t",
            "--points",
            "20",
        ],
    );
    s.open_up();
    s.ok_as(Some(OTHER), &["write", mine.to_str().unwrap()]);
    s.open_up();
    let both = "class=od,expver=0001,stream=oper,date=20261121/20261122,time=1200";
    s.refused(None, &["control", "lock", both, "--archive"], "lock");
    s.refused(None, &["purge", both, "--doit"], "purge");
    s.refused(None, &["compact", both], "compact");
    s.refused(None, &["wipe", both, "--doit"], "wipe");
    s.ok_as(
        Some(OTHER),
        &[
            "wipe",
            "class=od,expver=0001,stream=oper,date=20261121,time=1200",
            "--doit",
        ],
    );

    // Reading and dry runs stay open to all.
    let o = s.run_as(Some(OTHER), None, &["list", DB, "--porcelain"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(String::from_utf8_lossy(&o.stdout).lines().count(), 4);
    s.ok_as(Some(OTHER), &["purge", DB]);
    s.ok_as(Some(OTHER), &["control", "status", DB]);

    // The owner may do what the other was refused; root too.
    s.ok_as(Some(OWNER), &["control", "unlock", DB, "--wipe"]);
    s.ok_as(Some(OWNER), &["compact", DB]);
    let purged = s.ok_as(Some(OWNER), &["purge", DB, "--doit"]);
    assert!(purged.contains("4 masked fields"), "{purged}");
    s.ok_as(None, &["control", "lock", DB, "--archive"]);
    s.ok_as(None, &["control", "unlock", DB, "--archive"]);
    s.ok_as(Some(OWNER), &["wipe", DB, "--doit"]);
    assert!(s.ok_as(None, &["list", DB, "--porcelain"]).is_empty());
}
