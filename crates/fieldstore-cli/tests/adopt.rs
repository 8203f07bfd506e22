//! `fieldstore adopt`: GRIB files indexed where they lie. Read back byte for byte, no GRIB byte
//! in the store's own files, a changed or vanished file named on read, wipe and purge leaving
//! the user's file alone; in an FDB5-format store, FDB5 reads the adopted file too.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "common/fdb5.rs"]
#[allow(dead_code)]
mod fdb5;
#[path = "common/skip.rs"]
mod skip;

const FS: &str = env!("CARGO_BIN_EXE_fieldstore");

fn schema() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fieldstore/tests/fixtures/ecmwf-fdb5-schema")
}

struct Store {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    config: PathBuf,
}

fn store(format: &str) -> Store {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_path_buf();
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "type: local\nengine: toc\n{format}schema: {}\nspaces:\n- roots:\n  - path: {}\n",
            schema().display(),
            dir.join("root").display()
        ),
    )
    .unwrap();
    Store {
        _dir: d,
        dir,
        config,
    }
}

fn fs(s: &Store, args: &[&str]) -> Output {
    Command::new(FS)
        .args(args)
        .env("FDB5_CONFIG_FILE", &s.config)
        .env("FDB_DBNAMES_FILE", "/nonexistent")
        .env_remove("FDB_CONFIG_FILE")
        .env_remove("FDB_HOME")
        .output()
        .unwrap()
}

fn ok(what: &str, o: &Output) -> String {
    assert!(
        o.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const ALL: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step=0/6/12,levelist=1000/850/500,param=t/u/v";

fn sample(s: &Store) -> PathBuf {
    let user = s.dir.join("user");
    std::fs::create_dir_all(&user).unwrap();
    let file = user.join("fields.grib");
    ok(
        "sample",
        &fs(
            s,
            &["sample", "--out", file.to_str().unwrap(), "--points", "500"],
        ),
    );
    file
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn adopted_fields_read_back_from_the_users_file_and_a_change_is_named() {
    let s = store("");
    let file = sample(&s);
    let original = std::fs::read(&file).unwrap();
    let o = fs(&s, &["adopt", file.to_str().unwrap()]);
    ok("adopt", &o);
    assert!(String::from_utf8_lossy(&o.stderr).contains("adopted 27 fields"));
    // Not one GRIB byte in the store: no data file, no message in any file.
    for f in files(&s.dir.join("root")) {
        assert!(!f.to_string_lossy().ends_with(".data"), "{f:?}");
        // A message starts `GRIB`, 3 bytes, then its edition (1 or 2).
        let b = std::fs::read(&f).unwrap();
        let message = |w: &[u8]| &w[..4] == b"GRIB" && matches!(w[7], 1 | 2);
        assert!(!b.windows(8).any(message), "GRIB bytes in {f:?}");
    }
    let listed = ok("list", &fs(&s, &["list", "class=od", "--location"]));
    assert_eq!(listed.lines().count(), 27, "{listed}");
    assert!(listed
        .lines()
        .all(|l| l.contains(&format!("file://{}", file.display()))));
    // Read back in the file's order: the same bytes.
    let out = s.dir.join("out.grib");
    ok("read", &fs(&s, &["read", ALL, out.to_str().unwrap()]));
    let mut got = std::fs::read(&out).unwrap();
    let mut want = original.clone();
    got.sort();
    want.sort();
    assert_eq!(got.len(), original.len());
    assert_eq!(got, want);
    // The file changed (same size, new time): the read fails naming it, and changes nothing.
    let f = std::fs::File::options().write(true).open(&file).unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
        .unwrap();
    drop(f);
    let _ = std::fs::remove_file(&out);
    let o = fs(&s, &["read", ALL, out.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&file.display().to_string()) && err.contains("was adopted and has changed"),
        "{err}"
    );
    // Adopting it again indexes what it holds now.
    ok("adopt again", &fs(&s, &["adopt", file.to_str().unwrap()]));
    ok("read", &fs(&s, &["read", ALL, out.to_str().unwrap()]));
    // Gone: named too.
    let moved = s.dir.join("moved.grib");
    std::fs::rename(&file, &moved).unwrap();
    let o = fs(&s, &["read", ALL, out.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains(&file.display().to_string()));
    std::fs::rename(&moved, &file).unwrap();
    // Purge and wipe forget entries; the user's file stays as it was.
    ok(
        "purge",
        &fs(
            &s,
            &[
                "purge",
                "class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g",
                "--doit",
            ],
        ),
    );
    ok(
        "wipe",
        &fs(
            &s,
            &[
                "wipe",
                "class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g",
                "--doit",
            ],
        ),
    );
    assert_eq!(std::fs::read(&file).unwrap(), original);
}

#[test]
fn adopting_what_is_not_a_regular_file_is_refused_and_changes_nothing() {
    let s = store("");
    let o = fs(&s, &["adopt", "/dev/null"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("regular files"));
    let o = fs(&s, &["adopt", s.dir.join("missing.grib").to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.grib"));
    assert!(!s.dir.join("root").exists() || files(&s.dir.join("root")).is_empty());
}

#[test]
fn fdb5_reads_files_adopted_into_an_fdb5_format_store() {
    if !fdb5::have_fdb5() {
        skip::skip("adopt in FDB5 format", "FDB5's fdb-read", true);
        return;
    }
    let s = store("format: fdb5\n");
    let file = sample(&s);
    ok("adopt", &fs(&s, &["adopt", file.to_str().unwrap()]));
    let req = s.dir.join("req");
    std::fs::write(&req, format!("retrieve,{ALL}\n")).unwrap();
    let theirs = s.dir.join("theirs.grib");
    let o = Command::new("fdb-read")
        .arg(&req)
        .arg(&theirs)
        .env("FDB5_CONFIG_FILE", &s.config)
        .env("FDB_DBNAMES_FILE", "/nonexistent")
        .output()
        .unwrap();
    ok("fdb-read", &o);
    let mine = s.dir.join("mine.grib");
    ok("read", &fs(&s, &["read", ALL, mine.to_str().unwrap()]));
    assert_eq!(
        std::fs::read(&theirs).unwrap(),
        std::fs::read(&mine).unwrap()
    );
    assert_eq!(
        std::fs::read(&mine).unwrap().len(),
        std::fs::read(&file).unwrap().len()
    );
}
