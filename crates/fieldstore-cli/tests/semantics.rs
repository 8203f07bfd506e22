//! DESIGN.md §2 semantics with real processes: many writers, readers during writes, kill -9,
//! masking, and bad input that must change nothing.

mod common;
#[path = "common/skip.rs"]
mod skip;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

struct Store {
    dir: tempfile::TempDir,
}

impl Store {
    fn new() -> Store {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("config.yaml"),
            format!(
                "type: local\nspaces: [{{roots: [{{path: {}}}]}}]\n",
                dir.path().join("root").display()
            ),
        )
        .unwrap();
        Store { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
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

    /// Sample GRIB: `steps` and params t/u on two levels (4 fields per step).
    fn sample(&self, name: &str, steps: &str, seed_date: &str) -> PathBuf {
        let p = self.path(name);
        self.ok(&[
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
            seed_date,
            "--points",
            "200",
        ]);
        p
    }

    fn list(&self, extra: &[&str]) -> Vec<String> {
        let mut args = vec!["list", "class=od,expver=0001", "--porcelain"];
        args.extend_from_slice(extra);
        self.ok(&args).lines().map(str::to_string).collect()
    }
}

fn spawn(c: &mut Command) -> Child {
    c.stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

#[test]
fn sixteen_writer_processes_into_one_database() {
    let s = Store::new();
    let files: Vec<PathBuf> = (0..16)
        .map(|i| s.sample(&format!("w{i}.grib"), &i.to_string(), "20261122"))
        .collect();
    let mut children: Vec<Child> = files
        .iter()
        .map(|f| spawn(&mut s.cmd(&["write", f.to_str().unwrap()])))
        .collect();
    for c in &mut children {
        assert!(c.wait().unwrap().success());
    }
    let listed = s.list(&[]);
    assert_eq!(listed.len(), 16 * 4, "{listed:?}");
    assert_eq!(
        s.ok(&["where", "class=od,expver=0001"]).lines().count(),
        1,
        "one database"
    );
    // Every field reads back byte-identical, in request order (step, level, param).
    let all: Vec<u8> = files
        .iter()
        .flat_map(|f| std::fs::read(f).unwrap())
        .collect();
    let out = s.path("out.grib");
    s.ok(&["read", "class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl,step=0/to/15/by/1,levelist=1000/500,param=t/u", out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), all);
}

#[test]
fn readers_see_only_whole_flushes() {
    let s = Store::new();
    let files: Vec<PathBuf> = (0..6)
        .map(|i| {
            s.sample(
                &format!("w{i}.grib"),
                &format!("{}/{}", 2 * i, 2 * i + 1),
                "20261122",
            )
        })
        .collect();
    let mut writers: Vec<Child> = files
        .iter()
        .map(|f| spawn(&mut s.cmd(&["write", f.to_str().unwrap()])))
        .collect();
    let mut observations = Vec::new();
    loop {
        let done = writers.iter_mut().all(|w| w.try_wait().unwrap().is_some());
        let n = s.list(&[]).len();
        observations.push(n);
        if done {
            break;
        }
    }
    for w in &mut writers {
        assert!(w.wait().unwrap().success());
    }
    // Each writer flushes its 8 fields at once: a reader sees multiples of 8, never a part.
    assert!(observations.iter().all(|n| n % 8 == 0), "{observations:?}");
    assert_eq!(*observations.last().unwrap(), 48);
}

#[test]
fn kill_nine_never_leaves_half_visible_data() {
    let rounds: usize = std::env::var("FIELDSTORE_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20);
    let s = Store::new();
    let mut outcomes = Vec::new();
    for round in 0..rounds {
        // Each round's fields are distinct (own step), 4 fields x 5 steps = 20 per writer.
        let steps = (0..5)
            .map(|k| (round * 5 + k).to_string())
            .collect::<Vec<_>>()
            .join("/");
        let f = s.sample(&format!("r{round}.grib"), &steps, "20261122");
        let mut child = spawn(&mut s.cmd(&["write", f.to_str().unwrap()]));
        // Kill at a pseudo-random moment: before, during or after the flush.
        let delay = (round * 7919 % 160) as u64;
        std::thread::sleep(std::time::Duration::from_millis(delay));
        let _ = child.kill(); // SIGKILL
        let status = child.wait().unwrap();
        outcomes.push((round, steps, status.success()));
    }
    // The store opens, and each round is all there (byte-identical) or not at all.
    let listed = s.list(&[]);
    let (mut whole, mut none) = (0, 0);
    for (round, steps, finished) in &outcomes {
        let first_step = steps.split('/').next().unwrap();
        let last_step = steps.split('/').next_back().unwrap();
        let n = listed
            .iter()
            .filter(|l| {
                let step: usize = l
                    .split("step=")
                    .nth(1)
                    .and_then(|r| r.split(',').next())
                    .and_then(|v| v.parse().ok())
                    .unwrap();
                step >= first_step.parse().unwrap() && step <= last_step.parse().unwrap()
            })
            .count();
        assert!(n == 0 || n == 20, "round {round}: {n} of 20 fields visible");
        if *finished {
            assert_eq!(
                n, 20,
                "round {round} exited 0 but its fields are not all visible"
            );
        }
        if n == 20 {
            whole += 1;
            let out = s.path("check.grib");
            let req = format!("class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl,step={steps},levelist=1000/500,param=t/u");
            s.ok(&["read", &req, out.to_str().unwrap()]);
            assert_eq!(
                std::fs::read(&out).unwrap(),
                std::fs::read(s.path(&format!("r{round}.grib"))).unwrap(),
                "round {round}"
            );
        } else {
            none += 1;
        }
    }
    eprintln!("{rounds} rounds: {whole} complete, {none} killed before their flush");
}

#[test]
fn replace_masks_and_full_lists_both() {
    let s = Store::new();
    let f = s.sample("a.grib", "0", "20261122");
    s.ok(&["write", f.to_str().unwrap()]);
    s.ok(&["write", f.to_str().unwrap()]);
    assert_eq!(s.list(&[]).len(), 4);
    assert_eq!(s.list(&["--full"]).len(), 8);
}

fn assert_changes_nothing(s: &Store, input: &Path, needle: &str) {
    let before = s.list(&[]);
    let o = s.run(&["write", input.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "accepted {}", input.display());
    assert!(err.contains(needle), "expected '{needle}' in: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(s.list(&[]), before, "a failed write changed the store");
}

#[test]
fn bad_input_is_refused_and_changes_nothing() {
    let s = Store::new();
    let good = s.sample("good.grib", "0/6", "20261122");
    s.ok(&["write", good.to_str().unwrap()]);
    let bytes = std::fs::read(&good).unwrap();
    let one = bytes.len() / 8;

    let truncated = s.path("truncated.grib");
    std::fs::write(&truncated, &bytes[..bytes.len() - 100]).unwrap();
    assert_changes_nothing(&s, &truncated, "message 8 at offset");

    let bad_end = s.path("bad-end.grib");
    let mut b = bytes.clone();
    b[2 * one - 1] = b'8';
    std::fs::write(&bad_end, &b).unwrap();
    assert_changes_nothing(&s, &bad_end, "message 2 at offset");

    let leading = s.path("leading.grib");
    let mut l = b"this is not grib".to_vec();
    l.extend_from_slice(&bytes);
    std::fs::write(&leading, &l).unwrap();
    assert_changes_nothing(&s, &leading, "16 bytes of non-GRIB data at offset 0");

    let text = s.path("notes.txt");
    std::fs::write(&text, "hello, this is plain text\n").unwrap();
    assert_changes_nothing(&s, &text, "no GRIB message found");

    // Bytes between messages are skipped, as ecCodes and FDB5 skip them, with a warning unless
    // they are zero padding.
    let junk = s.path("junk.grib");
    let mut j = bytes[..one].to_vec();
    j.extend_from_slice(b"this is not grib");
    j.extend_from_slice(&bytes[one..]);
    std::fs::write(&junk, &j).unwrap();
    let before = s.list(&[]);
    let o = s.run(&["write", junk.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    assert!(
        err.contains(&format!(
            "skipped 16 bytes of non-GRIB data at offset {one}, after message 1"
        )),
        "{err}"
    );
    assert_eq!(s.list(&[]), before);

    // Good fields first, then a refusal: none of the good ones may become visible either.
    let fresh = Store::new();
    let o = fresh.run(&["write", truncated.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        fresh.list(&[]).is_empty(),
        "fields before the bad message became visible"
    );

    let o = s.run(&["list", "class=od,expver=0001,foo=bar"]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("unknown keyword in request: foo"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = s.run(&["read", "class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl,step=0,levelist=1000,param=2t", s.path("x").to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("param=2t matched nothing; present: 130/131"),
        "{err}"
    );
}

/// Keys the config's schema cannot place: no rule matches (enfo under an oper-only schema), or a
/// rule needs a keyword the GRIB lacks. Each is refused with the reason, and nothing is stored.
#[test]
fn keys_the_schema_cannot_place_are_refused() {
    let s = Store::new();
    let cases = [
        (
            "[ class, expver, stream=oper, date, time, domain?\n  [ type, levtype\n    [ step, levelist?, param ]]]\n",
            "message 2 at offset",
            "no schema rule matches",
        ),
        (
            "[ class, expver, stream, date, time, domain?\n  [ type, levtype\n    [ step, levelist?, param, frequency ]]]\n",
            "message 1 at offset 0",
            "keyword frequency required by the schema rule at line 1 missing",
        ),
    ];
    let f = s.path("e.grib");
    s.ok(&[
        "sample",
        "--out",
        f.to_str().unwrap(),
        "--members",
        "2",
        "--steps",
        "0",
        "--params",
        "t",
        "--levels",
        "500",
    ]);
    for (i, (schema, at, why)) in cases.iter().enumerate() {
        let sp = s.path(&format!("s{i}.schema"));
        std::fs::write(&sp, schema).unwrap();
        std::fs::write(
            s.path("config.yaml"),
            format!(
                "type: local\nschema: {}\nspaces: [{{roots: [{{path: {}}}]}}]\n",
                sp.display(),
                s.path("root").display()
            ),
        )
        .unwrap();
        assert_changes_nothing(&s, &f, at);
        assert_changes_nothing(&s, &f, why);
    }
    // The database the first (good) message opened may exist, but holds no index.
    let out = Command::new("find")
        .arg(s.path("root"))
        .args(["-name", "*.idx"])
        .output()
        .unwrap();
    assert!(
        out.stdout.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn unwritable_root_is_a_clear_error() {
    let s = Store::new();
    std::fs::write(
        s.path("config.yaml"),
        format!(
            "spaces: [{{roots: [{{path: {}, writable: false}}]}}]\n",
            s.path("root").display()
        ),
    )
    .unwrap();
    let f = s.sample("a.grib", "0", "20261122");
    let o = s.run(&["write", f.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("no writable roots available"), "{err}");
    assert!(!s.path("root").exists());
}

const DB: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200";

#[test]
fn purge_removes_masked_and_keeps_the_newest() {
    let s = Store::new();
    let f = s.sample("a.grib", "0", "20261122");
    s.ok(&["write", f.to_str().unwrap()]);
    s.ok(&["write", f.to_str().unwrap()]);
    assert_eq!(s.list(&["--full"]).len(), 8);
    let dry = s.ok(&["purge", DB]);
    assert!(
        dry.contains("4 masked fields; would remove 1 index files and 1 data files"),
        "{dry}"
    );
    assert_eq!(s.list(&["--full"]).len(), 8, "dry run changed something");
    s.ok(&["purge", DB, "--doit"]);
    assert_eq!(s.list(&["--full"]).len(), 4);
    let out = s.path("out.grib");
    s.ok(&[
        "read",
        &format!("{DB},type=fc,levtype=pl,step=0,levelist=1000/500,param=t/u"),
        out.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&f).unwrap());
    let stats = s.ok(&["stats", DB]);
    assert!(stats.contains("fields 4, masked 0"), "{stats}");
    let dump = s.ok(&["dump", DB]);
    assert!(dump.contains("INIT") && dump.contains("CLEAR"), "{dump}");
}

#[test]
fn wipe_is_a_dry_run_unless_told() {
    let s = Store::new();
    let f = s.sample("a.grib", "0", "20261122");
    s.ok(&["write", f.to_str().unwrap()]);
    let dry = s.ok(&["wipe", DB]);
    assert!(
        dry.contains("would wipe database") && dry.contains("toc"),
        "{dry}"
    );
    assert_eq!(s.list(&[]).len(), 4);
    let o = s.run(&["wipe", &format!("{DB},type=fc"), "--doit"]);
    assert!(!o.status.success(), "over-specified wipe accepted");
    assert_eq!(s.list(&[]).len(), 4);
    s.ok(&["wipe", DB, "--doit"]);
    assert!(s.list(&[]).is_empty());
    assert!(
        std::fs::read_dir(s.path("root"))
            .unwrap()
            .flatten()
            .all(|e| common::is_keys_record(&e.file_name().to_string_lossy())),
        "database directory left behind"
    );
}

#[test]
fn locks_disable_actions() {
    let s = Store::new();
    let f = s.sample("a.grib", "0", "20261122");
    s.ok(&["write", f.to_str().unwrap()]);
    s.ok(&["control", "lock", DB, "--list", "--archive"]);
    assert!(s.list(&[]).is_empty());
    let st = s.ok(&["control", "status", DB]);
    assert!(
        st.contains("list: LOCKED")
            && st.contains("archive: LOCKED")
            && st.contains("retrieve: enabled"),
        "{st}"
    );
    let o = s.run(&["write", f.to_str().unwrap()]);
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("archive is locked"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    s.ok(&["control", "unlock", DB, "--list", "--archive"]);
    assert_eq!(s.list(&[]).len(), 4);
}

#[test]
fn corrupted_index_is_named_and_the_rest_stays_readable() {
    let s = Store::new();
    s.ok(&[
        "write",
        s.sample("a.grib", "0", "20261122").to_str().unwrap(),
    ]);
    s.ok(&[
        "write",
        s.sample("b.grib", "0", "20261123").to_str().unwrap(),
    ]);
    let root = s.path("root");
    let db = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().contains("20261122"))
        .unwrap();
    let idx = std::fs::read_dir(&db)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|e| e == "idx"))
        .unwrap();
    let mut bytes = std::fs::read(&idx).unwrap();
    let n = bytes.len();
    bytes[n / 2] ^= 0xff;
    std::fs::write(&idx, bytes).unwrap();
    let o = s.run(&["list", "class=od,expver=0001,date=20261122"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains(&idx.display().to_string()) && err.contains("checksum"),
        "{err}"
    );
    assert_eq!(
        s.ok(&["list", "class=od,expver=0001,date=20261123", "--porcelain"])
            .lines()
            .count(),
        4
    );
}

#[test]
fn compaction_keeps_answers_and_bounds_indexes() {
    let s = Store::new();
    let f = s.sample("a.grib", "0", "20261122");
    let g = s.sample("g.grib", "6", "20261122");
    // 10 flushes of the same 4 fields, 1 of 4 others: 11 indexes under one index key.
    for _ in 0..10 {
        s.ok(&["write", f.to_str().unwrap()]);
    }
    s.ok(&["write", g.to_str().unwrap()]);
    let before_full = s.list(&["--full"]).len();
    assert_eq!(before_full, 44);
    let out = s.ok(&["compact", DB]);
    // Automatic (tiered) compaction merged some of the 11 flushes already; every copy is kept.
    assert!(out.contains("into 1 (44 entries)"), "{out}");
    assert_eq!(s.list(&[]).len(), 8);
    assert_eq!(s.list(&["--full"]).len(), before_full);
    // A flush after compaction is newer than the merged index.
    s.ok(&["write", f.to_str().unwrap()]);
    assert_eq!(s.list(&["--full"]).len(), 48);
    let o = s.path("o.grib");
    s.ok(&[
        "read",
        &format!("{DB},type=fc,levtype=pl,step=0/6,levelist=1000/500,param=t/u"),
        o.to_str().unwrap(),
    ]);
    let mut want = std::fs::read(&f).unwrap();
    want.extend(std::fs::read(&g).unwrap());
    assert_eq!(std::fs::read(&o).unwrap(), want);
    // Purge after compaction: masked copies are counted, and the newest still reads back.
    let p = s.ok(&["purge", DB]);
    assert!(p.contains("40 masked fields"), "{p}");
    // Automatic compaction: flushes merge indexes size-tiered, so 40 flushes leave few.
    for _ in 0..40 {
        s.ok(&["write", g.to_str().unwrap()]);
    }
    let stats = s.ok(&["stats", DB]);
    let n: usize = stats
        .split("index files ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    assert!(n <= 33, "{n} live indexes after 52 flushes: {stats}");
    assert_eq!(s.list(&[]).len(), 8);
}

/// Index files replaced by compaction stay while a reader may still open them, and purge
/// deletes them once they are older than the grace period.
#[test]
fn compacted_index_files_are_deleted_after_the_grace_period() {
    let s = Store::new();
    let f = s.sample("a.grib", "0", "20261122");
    // 3 flushes: fewer than a tier (4) holds, so no automatic compaction merges them first.
    for _ in 0..3 {
        s.ok(&["write", f.to_str().unwrap()]);
    }
    let idx_files = || -> Vec<PathBuf> {
        let root = s.path("root");
        let db = std::fs::read_dir(&root)
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        std::fs::read_dir(db)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "idx"))
            .collect()
    };
    assert_eq!(idx_files().len(), 3);
    s.ok(&["compact", DB]);
    assert_eq!(idx_files().len(), 4, "replaced files are kept for readers");
    // The 3 replaced files are fresh: purge leaves them.
    s.ok(&["purge", DB, "--doit"]);
    assert_eq!(idx_files().len(), 4);
    // Age them past the grace period (60 s); the merged index stays live.
    for p in idx_files() {
        let st = Command::new("touch")
            .args(["-d", "2 minutes ago"])
            .arg(&p)
            .status()
            .unwrap();
        assert!(st.success());
    }
    let dry = s.ok(&["purge", DB]);
    assert!(dry.contains("would remove 3 index files"), "{dry}");
    assert_eq!(idx_files().len(), 4, "a dry run deleted files");
    s.ok(&["purge", DB, "--doit"]);
    assert_eq!(idx_files().len(), 1);
    assert_eq!(s.list(&[]).len(), 4);
    assert_eq!(s.list(&["--full"]).len(), 12);
    let o = s.path("o.grib");
    s.ok(&[
        "read",
        &format!("{DB},type=fc,levtype=pl,step=0,levelist=1000/500,param=t/u"),
        o.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read(&o).unwrap(), std::fs::read(&f).unwrap());
}

/// The one database's directory.
fn db_dir(s: &Store) -> PathBuf {
    std::fs::read_dir(s.path("root"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.join("toc").is_file())
        .unwrap()
}

/// `stats` figures for DB: (fields, masked, live index files).
fn stats_of(s: &Store) -> (u64, u64, u64) {
    let out = s.ok(&["stats", DB]);
    let num = |label: &str| -> u64 {
        out.split(label)
            .nth(1)
            .and_then(|r| r.split([',', ' ', '\n']).find(|t| !t.is_empty()))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no '{label}' in: {out}"))
    };
    (num("fields "), num("masked "), num("index files "))
}

/// Live index files per `dump` (made visible and not cleared), with the entries each holds.
fn live_indexes(s: &Store) -> Vec<(String, u64)> {
    let dump = s.ok(&["dump", DB]);
    let mut live: Vec<(String, u64)> = Vec::new();
    for line in dump.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("INDEX ") {
            let entries: u64 = rest
                .split(" entries in ")
                .next()
                .and_then(|r| r.rsplit(' ').next())
                .and_then(|v| v.parse().ok())
                .unwrap();
            let file = rest
                .split(" entries in ")
                .nth(1)
                .and_then(|r| r.split(" at ").next())
                .unwrap();
            live.push((file.to_string(), entries));
        } else if let Some(rest) = line.strip_prefix("CLEAR ") {
            let cleared: Vec<&str> = rest.split(' ').collect();
            live.retain(|(f, _)| !cleared.contains(&f.as_str()));
        }
    }
    live
}

/// Issue 12: rounds of 100+ concurrent writer processes into one database, past the automatic
/// compaction threshold. Concurrent compactions once each merged the same indexes, so merged
/// indexes held every entry several times and the copies multiplied round after round.
#[test]
fn concurrent_writers_past_the_compaction_threshold_keep_one_copy_of_each_entry() {
    const WRITERS: usize = 104;
    const ROUNDS: usize = 3;
    let s = Store::new();
    let mut expected = 0u64;
    for round in 0..ROUNDS {
        // 2 fields per writer (t at two levels); every step (so every key) unique. One sample
        // run per round, split into the writers' files.
        let all = s.path(&format!("r{round}.grib"));
        let steps: Vec<String> = (0..WRITERS)
            .map(|i| (round * WRITERS + i).to_string())
            .collect();
        s.ok(&[
            "sample",
            "--out",
            all.to_str().unwrap(),
            "--steps",
            &steps.join("/"),
            "--params",
            "t",
            "--levels",
            "1000/500",
            "--points",
            "16",
        ]);
        let messages = split_grib(&std::fs::read(&all).unwrap());
        assert_eq!(messages.len(), 2 * WRITERS);
        let files: Vec<PathBuf> = messages
            .chunks(2)
            .enumerate()
            .map(|(i, pair)| {
                let p = s.path(&format!("r{round}w{i}.grib"));
                std::fs::write(&p, pair.concat()).unwrap();
                p
            })
            .collect();
        let children: Vec<Child> = files
            .iter()
            .map(|f| spawn(&mut s.cmd(&["write", f.to_str().unwrap()])))
            .collect();
        for c in children {
            let o = c.wait_with_output().unwrap();
            assert!(
                o.status.success(),
                "a writer failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        expected += 2 * WRITERS as u64;
        let (fields, masked, index_files) = stats_of(&s);
        assert_eq!(fields, expected, "round {round}");
        assert_eq!(masked, 0, "round {round}: nothing was replaced");
        // Tiers of 4: a few indexes per tier, not one per flush.
        assert!(
            index_files <= 40,
            "round {round}: {index_files} live indexes"
        );
    }
    assert_eq!(s.list(&[]).len() as u64, expected);
    // The live indexes hold each entry once, and their bytes are proportional to the entries.
    let live = live_indexes(&s);
    let live_entries: u64 = live.iter().map(|(_, n)| n).sum();
    assert_eq!(live_entries, expected, "{live:?}");
    let dir = db_dir(&s);
    let live_bytes: u64 = live
        .iter()
        .map(|(f, _)| std::fs::metadata(dir.join(f)).unwrap().len())
        .sum();
    assert!(
        live_bytes <= 64 * expected + 1024 * live.len() as u64,
        "{live_bytes} bytes of live indexes for {expected} entries"
    );
    // Every index file written, including those merged away: each entry is rewritten a
    // logarithmic number of times, not once per flush.
    let all_bytes: u64 = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "idx"))
        .map(|p| std::fs::metadata(p).unwrap().len())
        .sum();
    assert!(
        all_bytes <= 64 * 8 * expected + 1024 * (ROUNDS * WRITERS * 2) as u64,
        "{all_bytes} bytes of index files for {expected} entries"
    );
    // An explicit compaction after all that merges into one index, still without copies.
    s.ok(&["compact", DB]);
    assert_eq!(stats_of(&s), (expected, 0, 1));
}

/// Splits GRIB (editions 1 and 2) into its messages.
fn split_grib(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos + 16 <= bytes.len() {
        assert_eq!(&bytes[pos..pos + 4], b"GRIB", "at {pos}");
        let len = match bytes[pos + 7] {
            1 => u32::from_be_bytes([0, bytes[pos + 4], bytes[pos + 5], bytes[pos + 6]]) as usize,
            _ => u64::from_be_bytes(bytes[pos + 8..pos + 16].try_into().unwrap()) as usize,
        };
        out.push(bytes[pos..pos + len].to_vec());
        pos += len;
    }
    out
}

/// Sample fields under `DB`'s keys (step, levels 1000/500, t/u) with `points` values, so two
/// samples of one step have the same keys and different bytes.
fn sample_points(s: &Store, name: &str, step: &str, points: &str) -> PathBuf {
    let p = s.path(name);
    s.ok(&[
        "sample",
        "--out",
        p.to_str().unwrap(),
        "--steps",
        step,
        "--params",
        "t/u",
        "--levels",
        "1000/500",
        "--date",
        "20261122",
        "--points",
        points,
    ]);
    p
}

fn read_step(s: &Store, step: &str) -> Output {
    let out = s.path("out.grib");
    let _ = std::fs::remove_file(&out);
    s.run(&[
        "read",
        &format!("{DB},type=fc,levtype=pl,step={step},levelist=1000/500,param=t/u"),
        out.to_str().unwrap(),
    ])
}

/// Every file of the database with its bytes.
fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut v: Vec<(PathBuf, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .map(|p| {
            let b = std::fs::read(&p).unwrap();
            (p, b)
        })
        .collect();
    v.sort();
    v
}

/// Issue 12: a damaged complete record at the journal's end is corruption, not a torn tail: it
/// used to be ignored, silently bringing back the field the last flush replaced. A writer
/// refuses such a database and leaves it as it was.
#[test]
fn damage_in_the_last_journal_record_is_an_error_and_writers_refuse_it() {
    let s = Store::new();
    let old = sample_points(&s, "old.grib", "0", "200");
    let new = sample_points(&s, "new.grib", "0", "300");
    s.ok(&["write", old.to_str().unwrap()]);
    s.ok(&["write", new.to_str().unwrap()]);
    let toc = db_dir(&s).join("toc");
    let mut bytes = std::fs::read(&toc).unwrap();
    let n = bytes.len();
    // Inside the last record's JSON payload.
    bytes[n - 10] ^= 0x01;
    std::fs::write(&toc, &bytes).unwrap();

    let o = read_step(&s, "0");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "read succeeded on a damaged journal");
    assert!(
        err.contains(&toc.display().to_string()) && err.contains("corrupt at offset"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");

    let before = snapshot(&db_dir(&s));
    let other = sample_points(&s, "other.grib", "6", "200");
    let o = s.run(&["write", other.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "a write into a damaged database succeeded"
    );
    assert!(
        err.contains(&toc.display().to_string()) && err.contains("corrupt at offset"),
        "{err}"
    );
    assert_eq!(
        snapshot(&db_dir(&s)),
        before,
        "a refused write changed the database"
    );
}

/// Issue 12: a genuine torn tail (a record cut short, or zeros a crashed filesystem left) is
/// ignored by readers, and the next write cuts it off instead of appending after it (which
/// made the journal unreadable).
#[test]
fn torn_journal_tail_is_ignored_and_the_next_write_repairs_it() {
    let s = Store::new();
    let a = sample_points(&s, "a.grib", "0", "200");
    s.ok(&["write", a.to_str().unwrap()]);
    let toc = db_dir(&s).join("toc");
    for i in 0..3 {
        let mut torn = std::fs::read(&toc).unwrap();
        let tail = match i {
            // A record cut short: the last record again, less its last 7 bytes.
            0 => {
                let start = torn.windows(4).rposition(|w| w == b"FSTC").unwrap();
                torn[start..torn.len() - 7].to_vec()
            }
            // A short header.
            1 => b"FSTC\x01\x00".to_vec(),
            // Zeros, as a filesystem leaves them when a crash lost an append's data.
            _ => vec![0u8; 300],
        };
        let clean_len = torn.len();
        torn.extend_from_slice(&tail);
        std::fs::write(&toc, &torn).unwrap();
        let o = read_step(&s, "0");
        assert!(
            o.status.success(),
            "case {i}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(
            std::fs::read(s.path("out.grib")).unwrap(),
            std::fs::read(&a).unwrap()
        );
        assert_eq!(s.list(&[]).len(), 4 * (i + 1), "case {i}");

        // The next write cuts the torn tail off and appends after the last good record.
        let step = (6 * (i + 1)).to_string();
        let b = sample_points(&s, &format!("b{i}.grib"), &step, "200");
        s.ok(&["write", b.to_str().unwrap()]);
        let now = std::fs::read(&toc).unwrap();
        assert_eq!(&now[..clean_len], &torn[..clean_len], "case {i}");
        assert!(now[clean_len..].starts_with(b"FSTC"), "case {i}");
        assert_eq!(s.list(&[]).len(), 4 * (i + 2), "case {i}");
        let o = read_step(&s, &step);
        assert!(
            o.status.success(),
            "case {i}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(
            std::fs::read(s.path("out.grib")).unwrap(),
            std::fs::read(&b).unwrap()
        );
    }
}

/// A full disk: a 1 MiB tmpfs root (needs root to mount; skipped with a message otherwise).
#[test]
fn full_disk_is_a_clear_error_and_changes_nothing() {
    let s = Store::new();
    let root = s.path("root");
    std::fs::create_dir_all(&root).unwrap();
    let mounted = Command::new("mount")
        .args([
            "-t",
            "tmpfs",
            "-o",
            "size=1m",
            "tmpfs",
            root.to_str().unwrap(),
        ])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !mounted {
        return skip::skip(
            "full_disk_is_a_clear_error_and_changes_nothing",
            "cannot mount a tmpfs (not root?)",
            false,
        );
    }
    struct Unmount(PathBuf);
    impl Drop for Unmount {
        fn drop(&mut self) {
            let _ = Command::new("umount").arg(&self.0).status();
        }
    }
    let _guard = Unmount(root.clone());
    let small = s.sample("small.grib", "0", "20261122");
    s.ok(&["write", small.to_str().unwrap()]);
    // About 2 MiB of fields into what is left of 1 MiB.
    let big = s.path("big.grib");
    s.ok(&[
        "sample",
        "--out",
        big.to_str().unwrap(),
        "--steps",
        "6/12",
        "--params",
        "t/u",
        "--levels",
        "1000/500",
        "--points",
        "150000",
    ]);
    let o = s.run(&["write", big.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains("No space left on device"), "{err}");
    assert!(
        err.contains(root.to_str().unwrap()),
        "the error should name the file: {err}"
    );
    assert_eq!(
        s.list(&[]).len(),
        4,
        "a failed write changed what is visible"
    );
    let out = s.path("o.grib");
    s.ok(&[
        "read",
        &format!("{DB},type=fc,levtype=pl,step=0,levelist=1000/500,param=t/u"),
        out.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&small).unwrap());
}

/// Semantic 8: only the owner replaces or wipes data (runs as two unprivileged uids via setpriv;
/// skipped with a message when not root).
#[test]
fn only_the_owner_writes_or_wipes() {
    let as_uid = |uid: &str, c: &mut Command| -> Output {
        let prog = c.get_program().to_owned();
        let args: Vec<_> = c.get_args().map(|a| a.to_owned()).collect();
        let mut s = Command::new("setpriv");
        s.args(["--reuid", uid, "--regid", uid, "--clear-groups", "--"])
            .arg(prog)
            .args(args);
        for (k, v) in c.get_envs() {
            match v {
                Some(v) => s.env(k, v),
                None => s.env_remove(k),
            };
        }
        s.output().unwrap()
    };
    // SAFETY: geteuid cannot fail.
    if unsafe { libc_geteuid() } != 0 || Command::new("setpriv").arg("--help").output().is_err() {
        return skip::skip(
            "only_the_owner_writes_or_wipes",
            "not root, or no setpriv",
            false,
        );
    }
    let s = Store::new();
    let root = s.path("root");
    std::fs::create_dir_all(&root).unwrap();
    let open = |p: &Path| {
        let _ = Command::new("chmod")
            .args(["-R", "a+rwX", p.to_str().unwrap()])
            .status();
    };
    open(s.dir.path());
    let f = s.sample("a.grib", "0", "20261122");
    open(s.dir.path());
    let o = as_uid("65534", &mut s.cmd(&["write", f.to_str().unwrap()]));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = as_uid("65533", &mut s.cmd(&["write", f.to_str().unwrap()]));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(
        err.contains("belongs to uid 65534; uid 65533 may not write to it"),
        "{err}"
    );
    let o = as_uid("65533", &mut s.cmd(&["wipe", DB, "--doit"]));
    assert!(!o.status.success());
    assert_eq!(s.list(&[]).len(), 4);
}

extern "C" {
    #[link_name = "geteuid"]
    fn libc_geteuid() -> u32;
}
