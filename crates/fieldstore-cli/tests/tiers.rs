//! Tiered placement with real processes and files: a small fast root fills and new databases go
//! to the next; a root added to the config file while a writer runs takes its next database;
//! age placement; handlers; `move` while a reader lists and retrieves throughout; config errors.

mod common;
#[path = "common/reader.rs"]
mod reader;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Store {
    dir: tempfile::TempDir,
}

impl Store {
    fn new() -> Store {
        Store {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// Writes the config: one space, `handler` (if any) and these roots (YAML flow maps,
    /// `{root}` standing for the store's directory).
    fn config(&self, handler: Option<&str>, roots: &[&str]) {
        let base = self.dir.path().display().to_string();
        let roots: Vec<String> = roots.iter().map(|r| r.replace("{root}", &base)).collect();
        let handler = handler.map_or(String::new(), |h| format!("handler: {h}, "));
        std::fs::write(
            self.path("config.yaml"),
            format!(
                "type: local\nspaces: [{{{handler}roots: [{}]}}]\n",
                roots.join(", ")
            ),
        )
        .unwrap();
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = common::fieldstore();
        c.args(args)
            .env("FDB_CONFIG_FILE", self.path("config.yaml"));
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn fails(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(!o.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&o.stderr).into_owned()
    }

    /// GRIB for one database (`date`): `steps` steps of t/u on two levels.
    fn sample(&self, date: &str, steps: usize, points: usize) -> PathBuf {
        let p = self.path(&format!("{date}-{steps}.grib"));
        if !p.exists() {
            let steps: Vec<String> = (0..steps).map(|s| s.to_string()).collect();
            self.ok(&[
                "sample",
                "--out",
                p.to_str().unwrap(),
                "--steps",
                &steps.join("/"),
                "--params",
                "t/u",
                "--levels",
                "1000/500",
                "--date",
                date,
                "--points",
                &points.to_string(),
            ]);
        }
        p
    }

    fn write(&self, date: &str) {
        let p = self.sample(date, 2, 2000);
        self.ok(&["write", p.to_str().unwrap()]);
    }

    /// The root directory (under the store's directory) the database of `date` is in.
    fn root_of(&self, date: &str) -> Vec<String> {
        let mut found = Vec::new();
        for e in std::fs::read_dir(self.dir.path()).unwrap().flatten() {
            if !e.path().is_dir() {
                continue;
            }
            for d in std::fs::read_dir(e.path()).unwrap().flatten() {
                let n = d.file_name().to_string_lossy().into_owned();
                if n.contains(date) && d.path().join("toc").exists() {
                    found.push(e.file_name().to_string_lossy().into_owned());
                }
            }
        }
        found.sort();
        found
    }
}

/// A day (UTC) as YYYYMMDD, by `date -d`, the way an operator's script gets it.
fn day(when: &str) -> String {
    let o = Command::new("date")
        .args(["-u", "-d", when, "+%Y%m%d"])
        .output()
        .unwrap();
    String::from_utf8(o.stdout).unwrap().trim().to_string()
}

#[test]
fn a_full_fast_root_sends_new_databases_to_the_next_tier() {
    let s = Store::new();
    // One database of 8 fields of 2000 points is about 36 KiB.
    s.config(
        None,
        &[
            "{path: {root}/fast, capacity: 50KiB}",
            "{path: {root}/slow}",
        ],
    );
    for d in ["20260101", "20260102", "20260103", "20260104"] {
        s.write(d);
    }
    assert_eq!(s.root_of("20260101"), ["fast"]);
    // Under the limit after one database, so the second goes there too; then it is full.
    assert_eq!(s.root_of("20260102"), ["fast"]);
    assert_eq!(s.root_of("20260103"), ["slow"]);
    assert_eq!(s.root_of("20260104"), ["slow"]);
    // An existing database stays where it is, even past the limit.
    let more = s.sample("20260101", 3, 2000);
    s.ok(&["write", more.to_str().unwrap()]);
    assert_eq!(s.root_of("20260101"), ["fast"]);
    let list = s.ok(&["list", "class=od", "--porcelain"]);
    assert_eq!(list.lines().count(), 4 * 8 + 4, "{list}");
    let info = s.ok(&["info"]);
    assert!(info.contains("handler Fill"), "{info}");
    assert!(
        info.contains("fast (capacity 50KiB): 2 databases"),
        "{info}"
    );
    assert!(info.contains("slow: 2 databases"), "{info}");
}

#[test]
fn old_dates_skip_a_root_with_max_age() {
    let s = Store::new();
    s.config(
        None,
        &[
            "{path: {root}/recent, max_age: 30d}",
            "{path: {root}/archive}",
        ],
    );
    let t = day("today");
    let weeks = day("20 days ago");
    s.write(&t);
    s.write(&weeks);
    s.write("19900101");
    assert_eq!(s.root_of(&t), ["recent"]);
    assert_eq!(s.root_of(&weeks), ["recent"]);
    assert_eq!(s.root_of("19900101"), ["archive"]);
    // Ageing data: move what is older than a week to the slow tier.
    let archive = s.path("archive");
    let out = s.ok(&[
        "move",
        "--older-than",
        "7d",
        "--to",
        archive.to_str().unwrap(),
        "--grace",
        "0",
    ]);
    assert_eq!(out.lines().count(), 1, "{out}");
    assert!(out.contains(&weeks), "{out}");
    assert_eq!(s.root_of(&weeks), ["archive"]);
    assert_eq!(s.root_of(&t), ["recent"]);
    // Run again (a daily job): nothing left to do is no error.
    let out = s.ok(&[
        "move",
        "--older-than",
        "7d",
        "--to",
        archive.to_str().unwrap(),
    ]);
    assert!(out.is_empty(), "{out}");
}

#[test]
fn handlers_choose_as_fdb5_names_them() {
    let s = Store::new();
    s.config(
        Some("RoundRobin"),
        &["{path: {root}/a}", "{path: {root}/b}"],
    );
    for d in ["20260101", "20260102", "20260103"] {
        s.write(d);
    }
    // One process per write: each starts its turn at the first root.
    assert_eq!(s.root_of("20260101"), ["a"]);
    let s = Store::new();
    s.config(
        Some("RoundRobin"),
        &["{path: {root}/a}", "{path: {root}/b}"],
    );
    let mut all = Vec::new();
    for d in ["20260101", "20260102", "20260103"] {
        all.extend(std::fs::read(s.sample(d, 2, 500)).unwrap());
    }
    std::fs::write(s.path("all.grib"), all).unwrap();
    s.ok(&["write", s.path("all.grib").to_str().unwrap()]);
    assert_eq!(s.root_of("20260101"), ["a"]);
    assert_eq!(s.root_of("20260102"), ["b"]);
    assert_eq!(s.root_of("20260103"), ["a"]);
    // Archive disabled on the first root: Default takes the next.
    let s = Store::new();
    s.config(
        None,
        &["{path: {root}/a, archive: false}", "{path: {root}/b}"],
    );
    s.write("20260101");
    assert_eq!(s.root_of("20260101"), ["b"]);
    // LeastUsed and the random ones reach a root of the space.
    for h in ["LeastUsed", "LeastUsedPercent", "Random", "WeightedRandom"] {
        let s = Store::new();
        s.config(Some(h), &["{path: {root}/a}", "{path: {root}/b}"]);
        s.write("20260101");
        assert_eq!(s.root_of("20260101").len(), 1, "{h}");
    }
}

#[test]
fn config_errors_name_the_key_and_the_choices() {
    let s = Store::new();
    let cases = [
        (
            "handler: Fil",
            "{path: /a}",
            "unknown handler 'Fil' (known: Default, First, Fill, LeastUsed, LeastUsedPercent, RoundRobin, Random, PureRandom, WeightedRandom, WeightedRandomPercent) (did you mean 'Fill'?)",
        ),
        (
            "handler: expver",
            "{path: /a}",
            "handler 'expver' is an FDB5 handler fieldstore does not support",
        ),
        (
            "",
            "{path: /a, capacity: lots}",
            "spaces[0].roots[0].capacity: 'lots' is not a size",
        ),
        (
            "",
            "{path: /a, max_fill: 150%}",
            "spaces[0].roots[0].max_fill: '150%' is not a percentage from 1 to 100",
        ),
        (
            "",
            "{path: /a, max_age: soon}",
            "spaces[0].roots[0].max_age: 'soon' is not an age in days like 30d",
        ),
    ];
    for (handler, root, want) in cases {
        let h = if handler.is_empty() {
            String::new()
        } else {
            format!("{handler}, ")
        };
        std::fs::write(
            s.path("config.yaml"),
            format!("spaces: [{{{h}roots: [{root}]}}]\n"),
        )
        .unwrap();
        let err = s.fails(&["info"]);
        assert!(err.contains(want), "{root}: {err}");
    }
}

#[test]
fn a_root_added_while_a_writer_runs_gets_its_next_database() {
    let s = Store::new();
    s.config(None, &["{path: {root}/old}"]);
    // 64 steps x 4 = 256 messages: one archive batch, archived before more input comes.
    let first = std::fs::read(s.sample("20260101", 64, 50)).unwrap();
    let second = std::fs::read(s.sample("20260102", 64, 50)).unwrap();
    let mut writer = s
        .cmd(&["write", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = writer.stdin.take().unwrap();
    stdin.write_all(&first).unwrap();
    stdin.flush().unwrap();
    let t = Instant::now();
    while s.root_of("20260101").is_empty() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "first database never made"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(s.root_of("20260101"), ["old"]);
    // The new root comes first: new databases go there from now on.
    s.config(None, &["{path: {root}/new}", "{path: {root}/old}"]);
    std::thread::sleep(Duration::from_millis(1100));
    stdin.write_all(&second).unwrap();
    drop(stdin);
    let out = writer.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(s.root_of("20260101"), ["old"]);
    assert_eq!(s.root_of("20260102"), ["new"]);
    // Both readable, each where it is.
    let list = s.ok(&["list", "class=od", "--porcelain"]);
    assert_eq!(list.lines().count(), 512);
}

/// Lists and retrieves everything in a loop until told to stop; every answer must be whole.
fn reader_loop(s: &Store, stop: Arc<AtomicBool>, fields: usize) -> (usize, Vec<String>) {
    reader::rounds(
        |args| s.run(args),
        &stop,
        fields,
        "class=od,expver=0001,stream=oper,date=20260101/20260102,time=1200,type=fc,levtype=pl,levelist=1000/500,param=t/u,step=0/1",
        &s.path("out.grib"),
        |_| None,
    )
}

#[test]
fn move_is_atomic_for_a_reader_running_throughout() {
    let s = Store::new();
    s.config(None, &["{path: {root}/fast}", "{path: {root}/slow}"]);
    s.write("20260101");
    s.write("20260102");
    assert_eq!(s.root_of("20260101"), ["fast"]);
    let fields = s.ok(&["list", "class=od", "--porcelain"]).lines().count();
    assert_eq!(fields, 16);
    let stop = Arc::new(AtomicBool::new(false));
    let (rounds, errors) = std::thread::scope(|scope| {
        let st = stop.clone();
        let reader = scope.spawn(|| reader_loop(&s, st, fields));
        std::thread::sleep(Duration::from_millis(300));
        let slow = s.path("slow");
        let fast = s.path("fast");
        // A grace of 0 would delete files a reader may be reading: that is the option's point.
        for (to, grace) in [(&slow, "1"), (&fast, "0.5"), (&slow, "0.5")] {
            let out = s.ok(&[
                "move",
                "class=od,date=20260101",
                "--to",
                to.to_str().unwrap(),
                "--grace",
                grace,
            ]);
            assert!(out.starts_with("moved database"), "{out}");
        }
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
        reader.join().unwrap()
    });
    assert!(errors.is_empty(), "{rounds} rounds: {errors:#?}");
    assert!(rounds >= 3, "the reader ran only {rounds} rounds");
    // The data is only in the destination now, with nothing left behind.
    assert_eq!(s.root_of("20260101"), ["slow"]);
    let fast: Vec<String> = std::fs::read_dir(s.path("fast"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !common::is_keys_record(n))
        .collect();
    assert_eq!(fast, ["od:0001:oper:20260102:1200:g"]);
    let data = std::fs::read(s.path("out.grib")).unwrap();
    assert!(!data.is_empty());
}

#[test]
fn move_checks_before_copying_and_cleans_up_after_a_killed_move() {
    let s = Store::new();
    s.config(None, &["{path: {root}/fast}", "{path: {root}/slow}"]);
    s.write("20260101");
    let err = s.fails(&["move", "class=od", "--to", "/elsewhere"]);
    assert!(
        err.contains("/elsewhere is not a root of this config"),
        "{err}"
    );
    let err = s.fails(&["move", "class=od", "--to", s.path("fast").to_str().unwrap()]);
    assert!(err.contains("is already in"), "{err}");
    let slow = s.path("slow");
    let out = s.ok(&[
        "move",
        "class=od",
        "--to",
        slow.to_str().unwrap(),
        "--dry-run",
    ]);
    assert!(out.starts_with("would move database"), "{out}");
    assert_eq!(s.root_of("20260101"), ["fast"]);
    // What a move killed while copying leaves: a hidden partial copy and its lock.
    let name = "od:0001:oper:20260101:1200:g";
    let partial = slow.join(format!(".{name}.moving.dead"));
    std::fs::create_dir_all(&partial).unwrap();
    std::fs::write(partial.join("toc"), b"partial").unwrap();
    std::fs::write(
        s.path("fast").join(name).join("archive.lock"),
        "move by pid 999999999",
    )
    .unwrap();
    assert_eq!(
        s.ok(&["list", "class=od", "--porcelain"]).lines().count(),
        8
    );
    s.ok(&[
        "move",
        "class=od",
        "--to",
        slow.to_str().unwrap(),
        "--grace",
        "0",
    ]);
    assert!(!partial.exists());
    assert_eq!(s.root_of("20260101"), ["slow"]);
    // Writers may archive into it again at its new place.
    assert!(!slow.join(name).join("archive.lock").exists());
    let more = s.sample("20260101", 3, 2000);
    s.ok(&["write", more.to_str().unwrap()]);
    assert_eq!(
        s.ok(&["list", "class=od", "--porcelain"]).lines().count(),
        12
    );
    // Purge clears such leftovers too.
    let partial = s.path("fast").join(format!(".{name}.moving.dead"));
    std::fs::create_dir_all(&partial).unwrap();
    s.ok(&[
        "purge",
        "class=od,expver=0001,stream=oper,date=20260101,time=1200",
        "--doit",
    ]);
    assert!(!partial.exists());
    assert_eq!(
        s.ok(&["list", "class=od", "--porcelain"]).lines().count(),
        12
    );
    // An operator's lock is not a move's: refused, kept.
    s.ok(&["control", "lock", "class=od", "--archive"]);
    let err = s.fails(&["move", "class=od", "--to", s.path("fast").to_str().unwrap()]);
    assert!(err.contains("locked for archive"), "{err}");
    assert_eq!(s.root_of("20260101"), ["slow"]);
}

#[test]
fn fdb_move_keeps_fdb5s_rules() {
    let s = Store::new();
    s.config(None, &["{path: {root}/fast}", "{path: {root}/slow}"]);
    s.write("20260101");
    s.write("20260102");
    let bin = Path::new(env!("CARGO_BIN_EXE_fieldstore"));
    let link = s.path("fdb-move");
    std::os::unix::fs::symlink(bin, &link).unwrap();
    let run = |args: &[&str]| {
        let mut c = Command::new(&link);
        for v in fieldstore::model::config::ENV_STEPS {
            c.env_remove(v);
        }
        c.env("FDB_CONFIG_FILE", s.path("config.yaml"))
            .args(args)
            .output()
            .unwrap()
    };
    let dest = format!("--dest={}", s.path("slow").display());
    let o = run(&[&dest, "class=od"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("matches more than one existing database"));
    let o = run(&[&dest, "class=od,date=20260101/20260102"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("single value for each parameter"));
    let o = run(&["class=od,date=20260101"]);
    assert!(String::from_utf8_lossy(&o.stderr).contains("No destination root specified."));
    let o = run(&[&dest, "--delay=0", "class=od,date=20260101"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(s.root_of("20260101"), ["slow"]);
    assert_eq!(s.root_of("20260102"), ["fast"]);
}

#[test]
fn move_stays_within_the_database_space() {
    let s = Store::new();
    let base = s.dir.path().display();
    std::fs::write(
        s.path("config.yaml"),
        format!("spaces:\n- {{regex: 'rd:.*', roots: [{{path: {base}/rd}}]}}\n- {{roots: [{{path: {base}/od}}, {{path: {base}/od-slow}}]}}\n"),
    )
    .unwrap();
    s.write("20260101");
    assert_eq!(s.root_of("20260101"), ["od"]);
    let err = s.fails(&["move", "class=od", "--to", s.path("rd").to_str().unwrap()]);
    assert!(err.contains("is not in the space of database"), "{err}");
    assert!(err.contains("od-slow"), "{err}");
    s.ok(&[
        "move",
        "class=od",
        "--to",
        s.path("od-slow").to_str().unwrap(),
        "--grace",
        "0",
    ]);
    assert_eq!(s.root_of("20260101"), ["od-slow"]);
    let info = s.ok(&["info"]);
    assert!(
        info.contains("space - (regex rd:.*, handler Default)"),
        "{info}"
    );
    assert!(info.contains("od-slow: 1 databases"), "{info}");
}

#[test]
fn a_move_killed_between_its_renames_leaves_one_readable_copy() {
    let s = Store::new();
    s.config(None, &["{path: {root}/fast}", "{path: {root}/slow}"]);
    s.write("20260101");
    let name = "od:0001:oper:20260101:1200:g";
    let (old, new) = (s.path("fast").join(name), s.path("slow").join(name));
    // The state a move killed after renaming its copy into place leaves: both copies, the old
    // one marked as being left, the new one still under the dead move's lock.
    std::fs::create_dir_all(&new).unwrap();
    for f in std::fs::read_dir(&old).unwrap().flatten() {
        std::fs::copy(f.path(), new.join(f.file_name())).unwrap();
    }
    std::fs::write(new.join("archive.lock"), "move by pid 999999999").unwrap();
    std::fs::write(old.join("moving-out"), new.display().to_string()).unwrap();
    let list = s.ok(&["list", "class=od", "--porcelain"]);
    assert_eq!(list.lines().count(), 8, "{list}");
    let whereis = s.ok(&["where", "class=od"]);
    assert!(whereis.contains(&new.display().to_string()), "{whereis}");
    assert!(!whereis.contains(&old.display().to_string()), "{whereis}");
    // The next move finishes the old one's work, then does its own.
    s.ok(&[
        "move",
        "class=od",
        "--to",
        s.path("fast").to_str().unwrap(),
        "--grace",
        "0",
    ]);
    assert_eq!(s.root_of("20260101"), ["fast"]);
    assert!(!new.exists());
    assert!(!old.join("moving-out").exists() && !old.join("archive.lock").exists());
    assert_eq!(
        s.ok(&["list", "class=od", "--porcelain"]).lines().count(),
        8
    );
}

#[test]
fn move_through_a_composing_frontend_is_refused_by_name() {
    let s = Store::new();
    let base = s.dir.path().display();
    std::fs::write(
        s.path("config.yaml"),
        format!("type: select\nfdbs:\n- {{select: class=od, spaces: [{{roots: [{{path: {base}/a}}, {{path: {base}/b}}]}}]}}\n"),
    )
    .unwrap();
    s.write("20260101");
    let err = s.fails(&["move", "class=od", "--to", s.path("b").to_str().unwrap()]);
    assert!(err.contains("cannot move databases between roots"), "{err}");
    assert_eq!(s.root_of("20260101"), ["a"]);
}
