//! Damage and naming (issue 12) with the real `fieldstore` binary: a data file with a flipped
//! byte, an index file with a flipped byte, a database whose journal was deleted, and keys that
//! differ only where older versions mangled directory names. Each is an error naming what is
//! wrong, or a correct answer; never wrong bytes and never a database that silently vanishes.

mod common;
#[path = "common/server.rs"]
mod server;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use server::Served;

const DB: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200";
const TOKEN: &str = "integrity-token";

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

    fn cmd(&self, config: &str, args: &[&str]) -> Command {
        let mut c = common::fieldstore();
        c.arg("--config").arg(self.path(config)).args(args);
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd("config.yaml", args).output().unwrap()
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

    /// Runs a command that must fail; its standard error.
    fn fails(&self, config: &str, args: &[&str]) -> String {
        let o = self.cmd(config, args).output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr).into_owned();
        assert!(!o.status.success(), "{args:?} succeeded; stderr: {err}");
        assert!(!err.contains("panicked"), "{err}");
        err
    }

    /// Sample GRIB: params t/u on levels 1000/500 for each step (4 fields per step).
    fn sample(&self, name: &str, steps: &str, date: &str) -> PathBuf {
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
            date,
            "--points",
            "300",
        ]);
        p
    }

    fn list(&self, request: &str) -> Vec<String> {
        self.ok(&["list", request, "--porcelain"])
            .lines()
            .map(str::to_string)
            .collect()
    }

    /// The database directories under the root.
    fn db_dirs(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.path("root"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        v.sort();
        v
    }

    /// Files of a database directory with this extension.
    fn files(dir: &Path, ext: &str) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == ext))
            .collect();
        v.sort();
        v
    }

    /// A server on a free port for this store, and `remote.yaml` pointing at it.
    fn serve(&self) -> Served {
        let c = self.cmd(
            "config.yaml",
            &["server", "--listen", "127.0.0.1:0", "--token", TOKEN],
        );
        server::start(c, self.dir.path(), TOKEN)
    }
}

fn flip(path: &Path, at: usize) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[at] ^= 0x04;
    std::fs::write(path, bytes).unwrap();
}

/// The request for the four fields of one step.
fn fields(date: &str, step: &str) -> String {
    format!("class=od,expver=0001,stream=oper,date={date},time=1200,type=fc,levtype=pl,step={step},levelist=1000/500,param=t/u")
}

/// Where each field of the sample is in its data file: (offset, length), from `list --location`.
fn locations(s: &Store) -> Vec<(String, u64, u64)> {
    let mut v: Vec<(String, u64, u64)> = s
        .ok(&["list", DB, "--location", "--porcelain"])
        .lines()
        .map(|l| {
            let mut w = l.rsplit(' ');
            let length = w.next().unwrap().parse().unwrap();
            let offset = w.next().unwrap().parse().unwrap();
            let uri = w.next().unwrap().trim_start_matches("file://").to_string();
            (uri, offset, length)
        })
        .collect();
    v.sort_by_key(|x| x.1);
    v
}

/// A flipped byte anywhere in a field's bytes is an error naming the data file, the offset and
/// the field's key; fields elsewhere still read back byte-identical.
#[test]
fn a_damaged_data_file_is_an_error_never_wrong_bytes() {
    let s = Store::new();
    let f = s.sample("a.grib", "0/6", "20261122");
    s.ok(&["write", f.to_str().unwrap()]);
    let original = std::fs::read(&f).unwrap();
    let fields_at = locations(&s);
    assert_eq!(fields_at.len(), 8);
    let data = PathBuf::from(&fields_at[0].0);
    let clean = std::fs::read(&data).unwrap();
    let out = s.path("out.grib");
    let all = fields("20261122", "0/6");
    // The first, a middle and the last byte of several fields (GRIB framing and values alike).
    for (i, &(_, offset, length)) in fields_at.iter().enumerate().step_by(3) {
        for at in [offset, offset + length / 2, offset + length - 1] {
            flip(&data, at as usize);
            let err = s.fails("config.yaml", &["read", &all, out.to_str().unwrap()]);
            assert!(
                err.contains(&data.display().to_string())
                    && err.contains("checksum")
                    && err.contains(&format!("offset {offset}")),
                "field {i}, byte {at}: {err}"
            );
            assert!(
                err.contains("date=20261122") && err.contains("levtype=pl"),
                "the error should name the field's key: {err}"
            );
            std::fs::write(&data, &clean).unwrap();
        }
    }
    // Undamaged, everything reads back.
    s.ok(&["read", &all, out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), original);
    s.ok(&["read", &fields("20261122", "6"), out.to_str().unwrap()]);
    let step6 = std::fs::read(&out).unwrap();
    // Damage in one field (the first archived: step 0) leaves the others readable.
    let (_, offset, length) = fields_at[0];
    flip(&data, (offset + length / 2) as usize);
    s.fails(
        "config.yaml",
        &["read", &fields("20261122", "0"), out.to_str().unwrap()],
    );
    s.ok(&["read", &fields("20261122", "6"), out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), step6);
}

/// Compaction carries each entry's checksum into the merged index: damage is still caught.
#[test]
fn checksums_survive_compaction() {
    let s = Store::new();
    let f = s.sample("a.grib", "0", "20261122");
    s.ok(&["write", f.to_str().unwrap()]);
    s.ok(&[
        "write",
        s.sample("b.grib", "6", "20261122").to_str().unwrap(),
    ]);
    let out = s.ok(&["compact", DB]);
    assert!(out.contains("merged 2 indexes into 1"), "{out}");
    let fields_at = locations(&s);
    let (data, offset, length) = fields_at
        .iter()
        .find(|x| x.0 == fields_at[0].0)
        .cloned()
        .unwrap();
    flip(Path::new(&data), (offset + length / 3) as usize);
    let o = s.path("o.grib");
    let all = fields("20261122", "0/6");
    let err = s.fails("config.yaml", &["read", &all, o.to_str().unwrap()]);
    assert!(err.contains("checksum") && err.contains(&data), "{err}");
    flip(Path::new(&data), (offset + length / 3) as usize);
    s.ok(&["read", &all, o.to_str().unwrap()]);
}

/// Through a server the damage is a wire error: the client fails with the server's reason, and
/// the server keeps serving.
#[test]
fn a_damaged_data_file_is_a_wire_error_through_a_server() {
    let s = Store::new();
    let f = s.sample("a.grib", "0", "20261122");
    s.ok(&["write", f.to_str().unwrap()]);
    let fields_at = locations(&s);
    let data = PathBuf::from(&fields_at[0].0);
    let _server = s.serve();
    let out = s.path("out.grib");
    let req = fields("20261122", "0");
    flip(&data, (fields_at[2].1 + 40) as usize);
    let err = s.fails("remote.yaml", &["read", &req, out.to_str().unwrap()]);
    assert!(
        err.contains("checksum") && err.contains(&data.display().to_string()),
        "{err}"
    );
    flip(&data, (fields_at[2].1 + 40) as usize);
    let o = s
        .cmd("remote.yaml", &["read", &req, out.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&f).unwrap());
}

/// A flipped byte in an index file (header, entries, block table or trailer) makes `list` and
/// `read` fail naming the file; other databases stay readable.
#[test]
fn a_damaged_index_file_is_named_by_list_and_read() {
    let s = Store::new();
    s.ok(&[
        "write",
        s.sample("a.grib", "0", "20261122").to_str().unwrap(),
    ]);
    s.ok(&[
        "write",
        s.sample("b.grib", "0", "20261123").to_str().unwrap(),
    ]);
    let db = s
        .db_dirs()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("20261122"))
        .unwrap();
    let idx = Store::files(&db, "idx").remove(0);
    let clean = std::fs::read(&idx).unwrap();
    let n = clean.len();
    let out = s.path("o.grib");
    for at in [1, 5, 14, n / 2, n - 30, n - 10, n - 1] {
        flip(&idx, at);
        let err = s.fails(
            "config.yaml",
            &["list", "class=od,expver=0001,date=20261122"],
        );
        assert!(err.contains(&idx.display().to_string()), "byte {at}: {err}");
        let err = s.fails(
            "config.yaml",
            &["read", &fields("20261122", "0"), out.to_str().unwrap()],
        );
        assert!(err.contains(&idx.display().to_string()), "byte {at}: {err}");
        assert_eq!(s.list("class=od,expver=0001,date=20261123").len(), 4);
        std::fs::write(&idx, &clean).unwrap();
    }
    assert_eq!(s.list("class=od,expver=0001").len(), 8);
}

/// A database whose journal was deleted is an error naming its directory, in `list` and `read`;
/// the other databases stay listed through the library's per-database errors. Databases being
/// wiped and directories that are not databases are not reported.
#[test]
fn a_database_without_its_journal_is_reported() {
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
    // Not databases: another program's directory, a database being wiped, a bare file.
    std::fs::create_dir_all(root.join("notes")).unwrap();
    std::fs::write(root.join("notes/readme.txt"), "hello").unwrap();
    let wiping = root.join(".od:0001:oper:20261121:1200:g.wiping.host.1.2.3");
    std::fs::create_dir_all(&wiping).unwrap();
    std::fs::write(wiping.join("x.1.2.3.data"), "bytes").unwrap();
    std::fs::write(root.join("stray.txt"), "x").unwrap();
    assert_eq!(s.list("class=od,expver=0001").len(), 8);

    let db = s
        .db_dirs()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("20261122"))
        .unwrap();
    std::fs::remove_file(db.join("toc")).unwrap();
    let o = s.run(&["list", "class=od,expver=0001", "--porcelain"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "a database without a journal was skipped"
    );
    assert!(
        err.contains(&db.display().to_string()) && err.contains("no journal"),
        "{err}"
    );
    // The other database is still listed, before or after the error.
    let listed = String::from_utf8_lossy(&o.stdout);
    assert_eq!(listed.lines().count(), 4, "{listed}");
    assert!(
        listed.lines().all(|l| l.contains("date=20261123")),
        "{listed}"
    );
    let out = s.path("o.grib");
    let err = s.fails(
        "config.yaml",
        &["read", &fields("20261122", "0"), out.to_str().unwrap()],
    );
    assert!(
        err.contains(&db.display().to_string()) && err.contains("no journal"),
        "{err}"
    );
    // The library reports it in its place and goes on with the others.
    let config = fieldstore::model::config::from_file(&s.path("config.yaml")).unwrap();
    let fdb = fieldstore::open(&config).unwrap();
    let req = fieldstore::model::request::parse_request("class=od,expver=0001").unwrap();
    let listed: Vec<_> = fdb
        .list(&req, fieldstore::api::ListOptions::default())
        .unwrap()
        .collect();
    let errors: Vec<String> = listed
        .iter()
        .filter_map(|r| r.as_ref().err().map(|e| e.to_string()))
        .collect();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(errors[0].contains(&db.display().to_string()));
    assert_eq!(listed.iter().filter(|r| r.is_ok()).count(), 4);
}

/// Regression: a journal cut short by more than one append (a partial restore of `toc` from a
/// backup) showed the older state as current: a field archived again read back with its old
/// bytes, exit status 0. The index files of the lost flushes say how far their writers had read
/// the journal, more than it holds now: `read`, `list` and `write` refuse the database naming
/// it, `check` lists the files; once they are moved out (accepting what the journal shows), the
/// database reads and writes again. A journal short of only its last flush is what a flush cut
/// short leaves, and is not refused.
#[test]
fn a_journal_cut_short_by_more_than_one_flush_is_reported() {
    let s = Store::new();
    let first = s.sample("first.grib", "0", "20261122");
    let again = s.path("again.grib");
    s.ok(&[
        "sample",
        "--out",
        again.to_str().unwrap(),
        "--steps",
        "0",
        "--params",
        "t/u",
        "--levels",
        "1000/500",
        "--date",
        "20261122",
        "--points",
        "200",
    ]);
    let later = s.sample("later.grib", "6", "20261122");
    s.ok(&["write", first.to_str().unwrap()]);
    let db = s.db_dirs().remove(0);
    let after_first = std::fs::read(db.join("toc")).unwrap();
    s.ok(&["write", again.to_str().unwrap()]);
    let after_again = std::fs::read(db.join("toc")).unwrap();
    s.ok(&["write", later.to_str().unwrap()]);
    let out = s.path("out.grib");
    let step0 = fields("20261122", "0");
    s.ok(&["read", &step0, out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&again).unwrap());
    assert!(s.ok(&["check"]).trim_end().ends_with(": ok"));

    // Short of its last flush only: what a writer killed before its journal append leaves.
    std::fs::write(db.join("toc"), &after_again).unwrap();
    s.ok(&["read", &step0, out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&again).unwrap());
    let checked = s.ok(&["check", DB]);
    assert!(checked.contains("none from lost flushes"), "{checked}");
    assert_eq!(checked.matches("\n  unpublished ").count(), 1, "{checked}");

    // Short of the last two: the re-archived fields would read back with their old bytes.
    std::fs::write(db.join("toc"), &after_first).unwrap();
    let name = db.display().to_string();
    let _ = std::fs::remove_file(&out);
    let err = s.fails("config.yaml", &["read", &step0, out.to_str().unwrap()]);
    assert!(err.contains(&name) && err.contains("lost flushes"), "{err}");
    assert!(!out.exists(), "a refused read left a file");
    let o = s.run(&["list", DB, "--porcelain"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(err.contains(&name) && err.contains("lost flushes"), "{err}");
    let err = s.fails("config.yaml", &["write", later.to_str().unwrap()]);
    assert!(err.contains(&name) && err.contains("lost flushes"), "{err}");
    let o = s.run(&["check"]);
    assert!(!o.status.success());
    let checked = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        checked.contains(&format!("{name}: LOST FLUSHES")),
        "{checked}"
    );
    let lost: Vec<&str> = checked
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l
                .strip_prefix("lost-flush")
                .or_else(|| l.strip_prefix("lost-data"))?;
            rest.trim_start().split(": ").next()
        })
        .collect();
    // The last flush's index file and data file (the one before it looks cut short).
    assert_eq!(lost.len(), 2, "{checked}");
    assert!(lost.iter().any(|f| f.ends_with(".idx")) && lost.iter().any(|f| f.ends_with(".data")));

    // Accepting the journal's state: the files check names moved out, the database is usable
    // again and shows what the journal holds.
    let aside = s.path("aside");
    std::fs::create_dir(&aside).unwrap();
    for f in &lost {
        std::fs::rename(db.join(f), aside.join(f)).unwrap();
    }
    s.ok(&["read", &step0, out.to_str().unwrap()]);
    assert_eq!(std::fs::read(&out).unwrap(), std::fs::read(&first).unwrap());
    assert_eq!(s.list(DB).len(), 4);
    s.ok(&["write", later.to_str().unwrap()]);
    assert_eq!(s.list(DB).len(), 8);
    s.ok(&["check"]);
}

/// `class=x/y` and `class=x_y` were one directory (`/` became `_`): now each key has its own,
/// both are listed and read back, and a store made by the old naming is still found.
#[test]
fn keys_that_old_names_confused_are_separate_databases() {
    let s = Store::new();
    let key = |class: &str| {
        fieldstore::model::Key::parse(&format!(
            "class={class},expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step=0,levelist=500,param=130"
        ))
        .unwrap()
    };
    let classes = ["x/y", "x_y", "x:y", "..", "x%2fy"];
    {
        let config = fieldstore::model::config::from_file(&s.path("config.yaml")).unwrap();
        let fdb = fieldstore::open(&config).unwrap();
        for c in classes {
            fdb.archive(Some(&key(c)), format!("field of {c}").as_bytes())
                .unwrap();
        }
        fdb.flush().unwrap();
    }
    let dirs = s.db_dirs();
    assert_eq!(dirs.len(), classes.len(), "{dirs:?}");
    for d in &dirs {
        assert_eq!(d.parent().unwrap(), s.path("root"));
    }
    let quoted = |c: &str| format!("class=\"{c}\",expver=0001");
    let read = |c: &str| {
        let out = s.path("o.bin");
        s.ok(&[
            "read",
            &format!("{},stream=oper,date=20261122,time=1200,type=fc,levtype=pl,step=0,levelist=500,param=130", quoted(c)),
            out.to_str().unwrap(),
        ]);
        String::from_utf8(std::fs::read(out).unwrap()).unwrap()
    };
    for c in classes {
        let listed = s.list(&quoted(c));
        assert_eq!(listed.len(), 1, "{c}: {listed:?}");
        assert!(
            listed[0].starts_with(&format!("{{class={c},")),
            "{listed:?}"
        );
        assert_eq!(read(c), format!("field of {c}"));
    }
    assert_eq!(s.list("class=od/x_y").len(), 1);

    // A database of `x/y` as older versions named it (`x_y:...`, the name `x_y` now has) is
    // still found, and archives go on into it; `x_y` is not mistaken for it.
    let new_xy = s.path("root").join("x%2Fy:0001:oper:20261122:1200:g");
    let old_xy = s
        .path("root")
        .join("old")
        .join("x_y:0001:oper:20261122:1200:g");
    std::fs::create_dir_all(old_xy.parent().unwrap()).unwrap();
    std::fs::rename(&new_xy, &old_xy).unwrap();
    std::fs::write(
        s.path("config.yaml"),
        format!(
            "type: local\nspaces: [{{roots: [{{path: {}}}, {{path: {}}}]}}]\n",
            s.path("root").join("old").display(),
            s.path("root").display(),
        ),
    )
    .unwrap();
    assert_eq!(read("x/y"), "field of x/y");
    assert_eq!(read("x_y"), "field of x_y");
    {
        let config = fieldstore::model::config::from_file(&s.path("config.yaml")).unwrap();
        let fdb = fieldstore::open(&config).unwrap();
        fdb.archive(Some(&key("x/y")), b"newer field of x/y")
            .unwrap();
        fdb.flush().unwrap();
    }
    assert!(!new_xy.exists(), "a second database was made for x/y");
    // `x_y` goes on into its own database, not into the old root's `x_y:...` (which is x/y's).
    {
        let config = fieldstore::model::config::from_file(&s.path("config.yaml")).unwrap();
        let fdb = fieldstore::open(&config).unwrap();
        fdb.archive(Some(&key("x_y")), b"newer field of x_y")
            .unwrap();
        fdb.flush().unwrap();
    }
    assert_eq!(read("x_y"), "newer field of x_y");
    assert_eq!(read("x/y"), "newer field of x/y");
    assert_eq!(s.list(&quoted("x/y")).len(), 1);
    assert_eq!(s.list(&quoted("x_y")).len(), 1);
}
