//! Issue 33 through the real `fieldstore` binary on a real MinIO: a root filling up and new
//! databases going to a bucket; `move` from a root to a bucket and back; lifecycle rules run
//! with an injected clock (`FIELDSTORE_NOW`); a reader listing and retrieving throughout sees
//! every field exactly once; `kill -9` during moves, in rounds (`FIELDSTORE_KILL_ROUNDS`, default
//! 8; the proof is 50): nothing lost, nothing twice, leftovers cleaned up; a server
//! running the rules on its schedule, counting them in its metrics.

mod common;
#[path = "../../fieldstore/tests/support/minio.rs"]
mod minio;
#[path = "common/reader.rs"]
mod reader;
#[path = "common/server.rs"]
mod server;

use std::path::PathBuf;
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

const DATES: [&str; 4] = ["20261120", "20261121", "20261122", "20261123"];
/// Fields per database (`sample` defaults: t/u/v x 3 levels x 3 steps).
const PER_DB: usize = 27;

struct Store<'a> {
    dir: tempfile::TempDir,
    minio: &'a minio::Minio,
    bucket: String,
}

impl<'a> Store<'a> {
    /// A root of `capacity` bytes, then a bucket; `extra` is appended to the config.
    fn new(minio: &'a minio::Minio, capacity: &str, extra: &str) -> Store<'a> {
        let dir = tempfile::tempdir().unwrap();
        let bucket = minio::fresh_bucket("lifecycle");
        let s = Store { dir, minio, bucket };
        std::fs::create_dir_all(s.path("fast")).unwrap();
        std::fs::write(
            s.path("fdb.yaml"),
            format!(
                "type: local\nspaces:\n- roots:\n  - {{path: {}, capacity: {capacity}}}\n  - {{path: \"{}\"}}\ns3: {{endpoint: {}, grace: 0s}}\n{extra}",
                s.path("fast").display(),
                s.bucket_uri(),
                minio.endpoint
            ),
        )
        .unwrap();
        s
    }

    fn bucket_uri(&self) -> String {
        format!("s3://{}/cold", self.bucket)
    }

    fn path(&self, p: &str) -> PathBuf {
        self.dir.path().join(p)
    }

    fn command(&self, args: &[&str]) -> std::process::Command {
        let mut c = common::fieldstore();
        c.arg("--config")
            .arg(self.path("fdb.yaml"))
            .args(args)
            .env("AWS_ACCESS_KEY_ID", &self.minio.access_key)
            .env("AWS_SECRET_ACCESS_KEY", &self.minio.secret_key)
            .env_remove("AWS_PROFILE")
            .env("HOME", self.dir.path());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        common::succeeded(&format!("{args:?}"), &self.run(args))
    }

    fn write(&self, date: &str) {
        let file = self.path(&format!("{date}.grib"));
        self.ok(&[
            "sample",
            "--out",
            file.to_str().unwrap(),
            "--date",
            date,
            "--points",
            "2000",
        ]);
        self.ok(&["write", file.to_str().unwrap()]);
    }

    /// Global grids of `grid` (NIxNJ) points for `date`, `params` x `levels` x `steps`,
    /// written once per `times`; the file's path.
    fn write_grid(
        &self,
        date: &str,
        grid: &str,
        [params, levels, steps]: [&str; 3],
        times: usize,
    ) -> PathBuf {
        let file = self.path(&format!("grid-{date}.grib"));
        let f = file.to_str().unwrap();
        self.ok(&[
            "sample", "--out", f, "--date", date, "--grid", grid, "--params", params, "--levels",
            levels, "--steps", steps,
        ]);
        for _ in 0..times {
            self.ok(&["write", f]);
        }
        file
    }

    /// Moves `date`'s databases into the bucket, waiting for the old copy to go.
    fn move_to_bucket(&self, date: &str) {
        self.ok(&[
            "move",
            &format!("class=od,date={date}"),
            "--to",
            &self.bucket_uri(),
            "--grace",
            "0",
            "--wait",
        ]);
        assert_eq!(self.place_of(date), "bucket");
    }

    /// Where each database of `class=od` is, by date: `root` or `bucket`.
    fn places(&self) -> Vec<(String, &'static str)> {
        let out = self.ok(&["where", "class=od"]);
        let mut v: Vec<(String, &'static str)> = out
            .lines()
            .map(|l| {
                let date = DATES
                    .iter()
                    .find(|d| l.contains(*d))
                    .map_or("?".to_string(), |d| d.to_string());
                let place = if l.starts_with("s3://") {
                    "bucket"
                } else {
                    "root"
                };
                (date, place)
            })
            .collect();
        v.sort();
        v
    }

    fn place_of(&self, date: &str) -> &'static str {
        self.places()
            .into_iter()
            .find(|(d, _)| d == date)
            .map_or("none", |(_, p)| p)
    }

    /// The fields listed, checked to be each listed once.
    fn fields(&self) -> usize {
        let out = self.ok(&["list", "class=od", "--porcelain"]);
        let mut lines: Vec<&str> = out.lines().collect();
        let n = lines.len();
        lines.sort();
        lines.dedup();
        assert_eq!(n, lines.len(), "a field listed twice: {out}");
        n
    }

    /// Hidden copies, renamed-away journals and lock files left in the root.
    fn root_leftovers(&self) -> Vec<String> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(self.path("fast")).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') && !common::is_keys_record(&name) {
                out.push(name.clone());
            }
            if e.path().is_dir() {
                for f in std::fs::read_dir(e.path()).unwrap().flatten() {
                    let f = f.file_name().to_string_lossy().into_owned();
                    if f.starts_with("toc.moved") || f == "archive.lock" || f == "moving-out" {
                        out.push(format!("{name}/{f}"));
                    }
                }
            }
        }
        out
    }

    fn read_back(&self, date: &str) -> Vec<u8> {
        let out = self.path(&format!("out-{date}.grib"));
        self.ok(&[
            "read",
            &format!("class=od,expver=0001,stream=oper,date={date},time=1200,type=fc,levtype=pl,levelist=1000/850/500,param=t/u/v,step=0/6/12"),
            out.to_str().unwrap(),
        ]);
        std::fs::read(out).unwrap()
    }
}

fn sorted_fields(bytes: &[u8]) -> Vec<Vec<u8>> {
    // GRIB messages start with "GRIB"; compare them as a set (a read returns request order).
    let mut out = Vec::new();
    let mut starts: Vec<usize> = bytes
        .windows(4)
        .enumerate()
        .filter(|(_, w)| *w == b"GRIB")
        .map(|(i, _)| i)
        .collect();
    starts.push(bytes.len());
    for w in starts.windows(2) {
        out.push(bytes[w[0]..w[1]].to_vec());
    }
    out.sort();
    out
}

#[test]
fn a_full_root_sends_new_databases_to_a_bucket_and_moves_go_both_ways() {
    let Some(m) = minio::Minio::shared("lifecycle") else {
        return;
    };
    // One database of 27 fields of 2000 points is about 110 KiB: the root takes two.
    let s = Store::new(m, "150KiB", "");
    for d in DATES {
        s.write(d);
    }
    assert_eq!(
        s.places(),
        [
            ("20261120".to_string(), "root"),
            ("20261121".to_string(), "root"),
            ("20261122".to_string(), "bucket"),
            ("20261123".to_string(), "bucket"),
        ]
    );
    assert_eq!(s.fields(), 4 * PER_DB);
    let original = sorted_fields(&std::fs::read(s.path("20261120.grib")).unwrap());

    // Dry run: says what, changes nothing.
    let dry = s.ok(&[
        "move",
        "class=od,date=20261120",
        "--to",
        &s.bucket_uri(),
        "--dry-run",
    ]);
    assert!(dry.starts_with("would move database"), "{dry}");
    assert_eq!(s.place_of("20261120"), "root");

    let out = s.ok(&[
        "move",
        "class=od,date=20261120",
        "--to",
        &s.bucket_uri(),
        "--grace",
        "0",
        "--wait",
    ]);
    assert!(out.starts_with("moved database"), "{out}");
    assert!(out.contains(&format!("to {}/", s.bucket_uri())), "{out}");
    assert_eq!(s.place_of("20261120"), "bucket");
    assert_eq!(s.fields(), 4 * PER_DB);
    assert_eq!(sorted_fields(&s.read_back("20261120")), original);
    assert!(s.root_leftovers().is_empty(), "{:?}", s.root_leftovers());

    // Already there: an error naming it.
    let again = s.run(&["move", "class=od,date=20261120", "--to", &s.bucket_uri()]);
    assert!(!again.status.success());

    // Back to the root: the same bytes.
    let fast = s.path("fast");
    let out = s.ok(&[
        "move",
        "class=od,date=20261120",
        "--to",
        fast.to_str().unwrap(),
    ]);
    assert!(out.starts_with("moved database"), "{out}");
    assert_eq!(s.place_of("20261120"), "root");
    assert_eq!(sorted_fields(&s.read_back("20261120")), original);
    assert_eq!(s.fields(), 4 * PER_DB);

    // A writer after a move goes on into the database's new place.
    s.ok(&[
        "move",
        "class=od,date=20261121",
        "--to",
        &s.bucket_uri(),
        "--grace",
        "0",
    ]);
    // Without --wait the old root copy stays (seen by nobody) until it is retired.
    let left = s.root_leftovers();
    assert!(
        left.iter().any(|l| l.ends_with("/moving-out")),
        "the old copy went before its pause: {left:?}"
    );
    assert_eq!(s.fields(), 4 * PER_DB);
    s.ok(&["write", s.path("20261121.grib").to_str().unwrap()]);
    assert_eq!(s.place_of("20261121"), "bucket");
    assert_eq!(s.fields(), 4 * PER_DB);
    let full = s.ok(&["list", "class=od,date=20261121", "--full", "--porcelain"]);
    assert_eq!(
        full.lines().count(),
        2 * PER_DB,
        "the rewrite masks the moved copy"
    );
    // A bucket not in the config is refused by name.
    let o = s.run(&["move", "class=od,date=20261120", "--to", "s3://elsewhere/x"]);
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("not a bucket of this config"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );

    // Retired by a later move, 1 s after its switch (and its grace, 0 here).
    std::thread::sleep(Duration::from_millis(1100));
    s.ok(&[
        "move",
        "class=od,date=20261120",
        "--to",
        &s.bucket_uri(),
        "--grace",
        "0",
        "--wait",
    ]);
    assert!(s.root_leftovers().is_empty(), "{:?}", s.root_leftovers());
    assert_eq!(s.fields(), 4 * PER_DB);
}

/// The `bytes_read` of each field an extraction of one point of `date`'s fields reports, and
/// their values.
fn extract_point(s: &Store, date: &str) -> (Vec<u64>, Vec<String>) {
    let out = s.ok(&[
        "extract",
        &format!("class=od,expver=0001,stream=oper,date={date},time=1200,type=fc,levtype=pl,levelist=500,param=t,step=0/6"),
        "--point",
        "10,10",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    let fields = v.as_array().unwrap();
    assert_eq!(fields.len(), 2, "{out}");
    (
        fields
            .iter()
            .map(|f| f["bytes_read"].as_u64().unwrap())
            .collect(),
        fields.iter().map(|f| f["values"].to_string()).collect(),
    )
}

/// A field whose extraction information is in a side file (an FDB5-format database after
/// `extract-index`) keeps it when moved into a bucket, which has no side files: its catalogue
/// entry there carries it. Before, such fields were read whole from the bucket from then on.
#[test]
fn a_move_into_a_bucket_keeps_side_file_extraction_information() {
    let Some(m) = minio::Minio::shared("lifecycle") else {
        return;
    };
    let s = Store::new(m, "1GiB", "format: fdb5\n");
    let date = DATES[0];
    s.write_grid(date, "360x181", ["t", "500", "0/6"], 1);
    assert_eq!(s.place_of(date), "root");
    let (whole, values) = extract_point(&s, date);
    // A partial request names the whole database, as a listing does.
    let out = s.ok(&["extract-index", &format!("class=od,date={date}")]);
    assert!(out.contains("added extraction information to 2,"), "{out}");
    let (indexed, after) = extract_point(&s, date);
    assert_eq!(after, values);
    s.move_to_bucket(date);
    let (moved, after) = extract_point(&s, date);
    assert_eq!(after, values);
    for ((w, i), m) in whole.iter().zip(&indexed).zip(&moved) {
        // A field's 65,160 values are ~130 KB; one point needs a few bytes (the side file's
        // check reads 256 more).
        assert!(
            *i < 1024 && *m < 1024 && *w > 100_000,
            "whole {w}, indexed {i}, moved {m}"
        );
    }
}

/// A database larger than an S3 part moves its runs of fields as whole parts, uncopied
/// (`StoreWriter::append_shared`); written twice, so the first copy's fields are masked and
/// lie before the live ones. Every field reads back byte for byte from the bucket, at the
/// offsets its entry gives.
#[test]
fn a_database_larger_than_a_part_moves_byte_for_byte() {
    let Some(m) = minio::Minio::shared("lifecycle") else {
        return;
    };
    let s = Store::new(m, "1GiB", "");
    let date = DATES[1];
    // 12 fields of 721 x 1440 points, ~2 MiB each: 25 MiB, several windows and parts.
    let file = s.write_grid(date, "1440x721", ["t/u", "1000/850/500", "0/6"], 2);
    let request = format!(
        "class=od,expver=0001,stream=oper,date={date},time=1200,type=fc,levtype=pl,levelist=1000/850/500,param=t/u,step=0/6"
    );
    let read = |name: &str| {
        let out = s.path(name);
        s.ok(&["read", &request, out.to_str().unwrap()]);
        sorted_fields(&std::fs::read(out).unwrap())
    };
    let before = read("before.grib");
    assert_eq!(before.len(), 12);
    assert_eq!(before, sorted_fields(&std::fs::read(&file).unwrap()));
    s.move_to_bucket(date);
    assert_eq!(read("after.grib"), before);
}

#[test]
fn rules_move_and_wipe_as_of_an_injected_clock() {
    let Some(m) = minio::Minio::shared("lifecycle") else {
        return;
    };
    let bucket = minio::fresh_bucket("rules");
    let rules = format!(
        "lifecycle:\n  grace: 0s\n  rules:\n  - {{name: cool, request: \"class=od\", older_than: 2d, move_to: \"s3://{bucket}/cold\"}}\n  - {{name: expire, request: \"class=od\", older_than: 4d, wipe: true}}\n"
    );
    let s = Store::new(m, "10MiB", &rules);
    // The rules name the store's bucket.
    let config = std::fs::read_to_string(s.path("fdb.yaml"))
        .unwrap()
        .replace(&bucket, &s.bucket);
    std::fs::write(s.path("fdb.yaml"), config).unwrap();
    for d in DATES {
        s.write(d);
    }
    assert!(s.places().iter().all(|(_, p)| *p == "root"));
    let run = |now: &str, dry: bool| {
        let mut args = vec!["lifecycle", "run"];
        if dry {
            args.push("--dry-run");
        }
        let o = s
            .command(&args)
            .env("FIELDSTORE_NOW", now)
            .output()
            .unwrap();
        common::succeeded(&format!("lifecycle run at {now}"), &o)
    };
    // As of the 22nd 11:00 nothing is over 2 days old (runs are at 12:00).
    assert_eq!(run("2026-11-22T11:00:00Z", false), "");
    // As of the 23rd 13:00: the 20th and 21st are over 2 days old; dry run first.
    let dry = run("2026-11-23T13:00:00Z", true);
    assert_eq!(dry.lines().count(), 2, "{dry}");
    assert!(
        dry.lines().all(|l| l.starts_with("[cool] would move")),
        "{dry}"
    );
    assert!(
        s.places().iter().all(|(_, p)| *p == "root"),
        "dry run moved"
    );
    let done = run("2026-11-23T13:00:00Z", false);
    assert_eq!(done.lines().count(), 2, "{done}");
    assert_eq!(s.place_of("20261120"), "bucket");
    assert_eq!(s.place_of("20261121"), "bucket");
    assert_eq!(s.place_of("20261122"), "root");
    assert_eq!(s.fields(), 4 * PER_DB);
    // Two days later: the 20th and 21st are over 4 days old (wiped), the 22nd and 23rd move.
    let done = run("2026-11-25T13:00:00Z", false);
    assert_eq!(done.lines().count(), 4, "{done}");
    assert!(
        done.contains("[expire] wiped database {class=od,expver=0001,stream=oper,date=20261120"),
        "{done}"
    );
    assert!(
        done.contains("[expire] wiped database {class=od,expver=0001,stream=oper,date=20261121"),
        "{done}"
    );
    assert!(
        done.contains("[cool] moved database {class=od,expver=0001,stream=oper,date=20261122"),
        "{done}"
    );
    assert!(
        done.contains("[cool] moved database {class=od,expver=0001,stream=oper,date=20261123"),
        "{done}"
    );
    assert_eq!(
        s.places(),
        [
            ("20261122".to_string(), "bucket"),
            ("20261123".to_string(), "bucket")
        ]
    );
    assert_eq!(s.fields(), 2 * PER_DB);
    // Run again at the same moment: nothing left to do.
    assert_eq!(run("2026-11-25T13:00:00Z", false), "");
}

#[test]
fn keep_runs_wipes_all_but_the_newest_runs_of_each_stream() {
    let Some(m) = minio::Minio::shared("lifecycle") else {
        return;
    };
    let s = Store::new(
        m,
        "10MiB",
        "lifecycle:\n  grace: 0s\n  rules:\n  - {name: rolling, request: \"class=od,stream=oper\", keep_runs: 2}\n",
    );
    for d in DATES {
        s.write(d);
    }
    s.ok(&[
        "move",
        "class=od,date=20261121",
        "--to",
        &s.bucket_uri(),
        "--grace",
        "0",
    ]);
    let dry = s.ok(&["lifecycle", "run", "--dry-run"]);
    assert_eq!(dry.lines().count(), 2, "{dry}");
    assert!(
        dry.lines().all(|l| l.starts_with("[rolling] would wipe")),
        "{dry}"
    );
    s.ok(&["lifecycle", "run"]);
    let left: Vec<String> = s.places().into_iter().map(|(d, _)| d).collect();
    assert_eq!(left, ["20261122", "20261123"]);
    assert_eq!(s.fields(), 2 * PER_DB);
}

/// Lists and retrieves in a loop until told to stop; every answer must hold each field once.
fn reader_loop(s: &Store, stop: Arc<AtomicBool>, fields: usize) -> (usize, Vec<String>) {
    reader::rounds(
        |args| s.run(args),
        &stop,
        fields,
        "class=od,expver=0001,stream=oper,date=20261120/20261121,time=1200,type=fc,levtype=pl,levelist=1000/850/500,param=t/u/v,step=0/6/12",
        &s.path("reader.grib"),
        |target| {
            let got = std::fs::read(target)
                .map(|b| sorted_fields(&b).len())
                .unwrap_or(0);
            (got != 2 * PER_DB).then(|| format!("{got} fields"))
        },
    )
}

#[test]
fn a_reader_sees_every_field_exactly_once_throughout_moves() {
    let Some(m) = minio::Minio::shared("lifecycle") else {
        return;
    };
    let s = Store::new(m, "10MiB", "");
    s.write("20261120");
    s.write("20261121");
    let fields = s.fields();
    assert_eq!(fields, 2 * PER_DB);
    let stop = Arc::new(AtomicBool::new(false));
    let fast = s.path("fast");
    let (rounds, errors) = std::thread::scope(|scope| {
        let st = stop.clone();
        let reader = scope.spawn(|| reader_loop(&s, st, fields));
        std::thread::sleep(Duration::from_millis(300));
        let bucket = s.bucket_uri();
        for to in [bucket.as_str(), fast.to_str().unwrap(), bucket.as_str()] {
            let out = s.ok(&["move", "class=od,date=20261120", "--to", to, "--grace", "1"]);
            assert!(out.starts_with("moved database"), "{out}");
        }
        std::thread::sleep(Duration::from_millis(300));
        stop.store(true, Ordering::Relaxed);
        reader.join().unwrap()
    });
    assert!(errors.is_empty(), "{rounds} rounds: {errors:#?}");
    assert!(rounds >= 3, "the reader ran only {rounds} rounds");
    assert_eq!(s.place_of("20261120"), "bucket");
}

#[test]
fn kill_9_during_moves_loses_nothing_and_repeats_nothing() {
    let Some(m) = minio::Minio::shared("lifecycle") else {
        return;
    };
    let rounds: usize = std::env::var("FIELDSTORE_KILL_ROUNDS")
        .ok()
        .and_then(|r| r.parse().ok())
        .unwrap_or(8);
    let s = Store::new(m, "10MiB", "");
    s.write("20261120");
    s.write("20261121");
    let original = sorted_fields(&std::fs::read(s.path("20261120.grib")).unwrap());
    let fast = s.path("fast");
    let bucket = s.bucket_uri();
    let mut killed = 0;
    for round in 0..rounds {
        let to = if s.place_of("20261120") == "root" {
            bucket.clone()
        } else {
            fast.display().to_string()
        };
        let mut child = s
            .command(&[
                "move",
                "class=od,date=20261120",
                "--to",
                &to,
                "--grace",
                "0.3",
            ])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        // Spread over the copy, the commit, the switch and the pauses (about 1.5 s in all).
        let wait = Duration::from_millis(((round * 211) % 1700) as u64);
        std::thread::sleep(wait);
        if child.try_wait().unwrap().is_none() {
            let _ = child.kill();
            killed += 1;
        }
        let _ = child.wait();
        // Straight after the kill, before any clean-up: every field once.
        assert_eq!(
            s.fields(),
            2 * PER_DB,
            "round {round}, killed after {wait:?}"
        );
        assert_eq!(
            sorted_fields(&s.read_back("20261120")),
            original,
            "round {round}"
        );
    }
    // One more move of it finishes or undoes what the kills left.
    let place = s.place_of("20261120");
    let to = if place == "root" {
        bucket.clone()
    } else {
        fast.display().to_string()
    };
    s.ok(&[
        "move",
        "class=od,date=20261120",
        "--to",
        &to,
        "--grace",
        "0",
        "--wait",
    ]);
    assert_eq!(s.fields(), 2 * PER_DB);
    assert_eq!(sorted_fields(&s.read_back("20261120")), original);
    let leftovers = s.root_leftovers();
    assert!(leftovers.is_empty(), "after {killed} kills: {leftovers:?}");
    assert!(killed > 0 || rounds == 0, "no move was killed");
    eprintln!("{rounds} rounds, {killed} moves killed mid-way");
}

#[test]
fn a_full_bucket_turns_new_databases_away_naming_why() {
    let Some(m) = minio::Minio::shared("lifecycle") else {
        return;
    };
    let s = Store::new(m, "150KiB", "");
    // The bucket takes one database of about 110 KiB, then is over its capacity.
    let config = std::fs::read_to_string(s.path("fdb.yaml"))
        .unwrap()
        .replace(
            &format!("{{path: \"{}\"}}", s.bucket_uri()),
            &format!("{{path: \"{}\", capacity: 100KiB}}", s.bucket_uri()),
        );
    std::fs::write(s.path("fdb.yaml"), config).unwrap();
    for d in &DATES[..3] {
        s.write(d);
    }
    assert_eq!(s.place_of("20261122"), "bucket");
    let file = s.path("20261123.grib");
    s.ok(&[
        "sample",
        "--out",
        file.to_str().unwrap(),
        "--date",
        "20261123",
        "--points",
        "2000",
    ]);
    let o = s.run(&["write", file.to_str().unwrap()]);
    let err = common::failed("write into full tiers", &o);
    assert!(err.contains(&s.bucket_uri()), "{err}");
    assert!(err.contains("capacity 102400"), "{err}");
    // Nothing of the refused write is visible; the rest is intact.
    assert_eq!(s.fields(), 3 * PER_DB);
}

/// The metrics text of a server started with `--metrics`.
fn metrics(addr: &str) -> String {
    use std::io::{Read, Write};
    let mut c = std::net::TcpStream::connect(addr).unwrap();
    c.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut text = String::new();
    c.read_to_string(&mut text).unwrap();
    text
}

/// The value of one series in a metrics text (0 when absent).
fn series(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn a_server_runs_the_rules_on_its_schedule_and_counts_them() {
    let Some(m) = minio::Minio::shared("lifecycle") else {
        return;
    };
    let bucket = minio::fresh_bucket("sched");
    let rules = format!(
        "lifecycle:\n  grace: 0s\n  every: 1s\n  rules:\n  - {{name: cool, request: \"class=od\", older_than: 2d, move_to: \"s3://{bucket}/cold\"}}\n  - {{name: expire, request: \"class=od\", older_than: 4d, wipe: true}}\n"
    );
    let s = Store::new(m, "10MiB", &rules);
    let config = std::fs::read_to_string(s.path("fdb.yaml"))
        .unwrap()
        .replace(&bucket, &s.bucket);
    std::fs::write(s.path("fdb.yaml"), config).unwrap();
    for d in DATES {
        s.write(d);
    }
    // As of the 24th 13:00 (injected): the first run moves the 20th-22nd (over 2 days old);
    // the next finds the 20th in the bucket and over 4 days old, and wipes it.
    let mut cmd = s.command(&[
        "server",
        "--listen",
        "127.0.0.1:0",
        "--metrics",
        "127.0.0.1:0",
        "--token",
        "t",
    ]);
    cmd.env("FIELDSTORE_NOW", "2026-11-24T13:00:00Z")
        .env("FIELDSTORE_LOG", "fieldstore::lifecycle=info");
    let served = server::start(cmd, s.dir.path(), "t");
    let addr = served.metrics.clone().expect("metrics address");
    let wipes = "fieldstore_lifecycle_actions_total{action=\"wipe\",outcome=\"done\"}";
    let retired = "fieldstore_lifecycle_copies_retired_total";
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut text = metrics(&addr);
    // The old root copies of the 21st and 22nd go once past their pause and grace (3 s).
    while (series(&text, wipes) < 1 || series(&text, retired) < 2)
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(200));
        text = metrics(&addr);
    }
    let moves = "fieldstore_lifecycle_actions_total{action=\"move\",outcome=\"done\"}";
    assert_eq!(series(&text, moves), 3, "{text}");
    assert_eq!(series(&text, wipes), 1, "{text}");
    assert_eq!(series(&text, retired), 2, "{text}");
    assert_eq!(
        series(
            &text,
            "fieldstore_lifecycle_actions_total{action=\"any\",outcome=\"failed\"}"
        ),
        0,
        "{text}"
    );
    assert_eq!(
        series(&text, "fieldstore_lifecycle_runs_failed_total"),
        0,
        "{text}"
    );
    assert!(
        series(&text, "fieldstore_lifecycle_runs_total") >= 2,
        "{text}"
    );
    assert_eq!(
        s.places(),
        [
            ("20261121".to_string(), "bucket"),
            ("20261122".to_string(), "bucket"),
            ("20261123".to_string(), "root"),
        ]
    );
    assert_eq!(s.fields(), 3 * PER_DB);
    assert!(s.root_leftovers().is_empty(), "{:?}", s.root_leftovers());
    drop(served);
    // Every action is logged.
    let log = std::fs::read_to_string(s.path("server.log")).unwrap();
    assert_eq!(
        log.matches("lifecycle action").count(),
        4,
        "moves and wipes logged: {log}"
    );
}
