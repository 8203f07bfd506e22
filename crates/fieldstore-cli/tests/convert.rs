//! `fieldstore convert`: a database FDB5 wrote, converted to fieldstore's format and back, in
//! place. Listings (masked copies included) and bytes read stay the same, readers listing
//! throughout see every field every time, FDB5 reads the database again once it is back in its
//! format, a killed conversion's leftovers are cleared, and a dry run changes nothing.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};

#[path = "common/fdb5.rs"]
#[allow(dead_code)]
mod fdb5;
#[path = "common/skip.rs"]
mod skip;

const FS: &str = env!("CARGO_BIN_EXE_fieldstore");
const DB: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g";
const ALL: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step=0/6/12,levelist=1000/850/500,param=t/u/v";

fn schema() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fieldstore/tests/fixtures/ecmwf-fdb5-schema")
}

/// A toc store in `dir` (its root `dir/root`) with ECMWF's FDB5 schema: its config and root.
fn store_in(dir: &Path) -> (PathBuf, PathBuf) {
    let config = dir.join("config.yaml");
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::write(
        &config,
        format!(
            "type: local\nengine: toc\nschema: {}\nspaces:\n- roots:\n  - path: {}\n",
            schema().display(),
            root.display()
        ),
    )
    .unwrap();
    (config, root)
}

/// Two `fdb-write` runs into the store: sample fields of 400 points, then of 300 points made
/// with `second` added to `fieldstore sample`'s arguments.
fn fdb5_writes(config: &Path, dir: &Path, second: &[&str]) {
    let (a, b) = (dir.join("a.grib"), dir.join("b.grib"));
    fs(
        config,
        &["sample", "--out", a.to_str().unwrap(), "--points", "400"],
    );
    let mut args = vec!["sample", "--out", b.to_str().unwrap(), "--points", "300"];
    args.extend_from_slice(second);
    fs(config, &args);
    for f in [&a, &b] {
        ok(
            "fdb-write",
            with_config(Command::new("fdb-write").arg(f), config)
                .output()
                .unwrap(),
        );
    }
}

/// Cuts the last 10 bytes off one of the database's data files (its last field then lies past
/// the end); returns its path.
fn cut_a_data_file(dir: &Path) -> PathBuf {
    let data = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "data"))
        .expect("a data file");
    let len = std::fs::metadata(&data).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(&data)
        .unwrap()
        .set_len(len - 10)
        .unwrap();
    data
}

fn with_config<'c>(c: &'c mut Command, config: &Path) -> &'c mut Command {
    c.env("FDB5_CONFIG_FILE", config)
        .env("FDB_DBNAMES_FILE", "/nonexistent")
        .env_remove("FDB_CONFIG_FILE")
        .env_remove("FDB_HOME")
}

fn ok(what: &str, o: Output) -> String {
    assert!(
        o.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn fs(config: &Path, args: &[&str]) -> String {
    ok(
        &format!("fieldstore {args:?}"),
        with_config(Command::new(FS).args(args), config)
            .output()
            .unwrap(),
    )
}

fn sorted(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text.lines().map(str::to_string).collect();
    v.sort();
    v
}

#[test]
fn an_fdb5_database_converts_both_ways_in_place() {
    if !fdb5::have_fdb5() {
        skip::skip("convert", "FDB5's fdb-write", true);
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (config, root) = store_in(d.path());
    // Two FDB5 runs, the second re-archiving a third of the first: masked copies.
    fdb5_writes(&config, d.path(), &["--steps", "6"]);
    let full = || sorted(&fs(&config, &["list", "class=od", "--full", "--porcelain"]));
    let read = |out: &Path| {
        fs(&config, &["read", ALL, out.to_str().unwrap()]);
        std::fs::read(out).unwrap()
    };
    let before = full();
    assert_eq!(before.len(), 27 + 9, "{before:?}");
    let bytes = read(&d.path().join("before.grib"));
    let axes = || fs(&config, &["axes", "class=od"]);
    let axes_before = axes();
    let format = || fs(&config, &["where", DB, "--show-format"]);
    assert!(format().trim_end().ends_with("\tfdb5"));

    // A dry run says what it would do and changes nothing.
    let dry = fs(&config, &["convert", DB, "--to", "fieldstore", "--dry-run"]);
    assert!(
        dry.contains("would convert to fieldstore format (36 entries in 2 indexes"),
        "{dry}"
    );
    assert!(format().trim_end().ends_with("\tfdb5"));

    // What a killed conversion leaves is cleared, and never listed.
    let dir = PathBuf::from(fs(&config, &["where", DB]).trim());
    let name = dir.file_name().unwrap().to_string_lossy().into_owned();
    let leftover = root.join(format!(".{name}.converting.killed"));
    std::fs::create_dir_all(&leftover).unwrap();
    std::fs::copy(dir.join("toc"), leftover.join("toc")).unwrap();
    assert_eq!(full(), before);

    // Readers listing all along see every field each time.
    let stop = AtomicBool::new(false);
    let converted = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut looks = 0;
            while !stop.load(Ordering::Relaxed) {
                let now = sorted(&fs(&config, &["list", "class=od", "--porcelain"]));
                assert_eq!(
                    now.len(),
                    27,
                    "a reader saw {} fields mid-conversion",
                    now.len()
                );
                looks += 1;
            }
            looks
        });
        let out = fs(
            &config,
            &["convert", DB, "--to", "fieldstore", "--grace", "0.5"],
        );
        stop.store(true, Ordering::Relaxed);
        let looks = reader.join().unwrap();
        assert!(looks > 0);
        out
    });
    assert!(
        converted.contains("converted to fieldstore format"),
        "{converted}"
    );
    assert!(!leftover.exists());
    assert!(format().trim_end().ends_with("\tfieldstore"));
    assert_eq!(full(), before);
    assert_eq!(axes(), axes_before);
    assert_eq!(read(&d.path().join("mid.grib")), bytes);
    // fieldstore's format checks every field now: a damaged byte is caught on read.
    let stats = fs(&config, &["stats", DB]);
    assert!(!stats.contains("FDB5 format"), "{stats}");

    // And back: FDB5 reads it as before.
    fs(&config, &["convert", DB, "--to", "fdb5", "--grace", "0"]);
    assert!(format().trim_end().ends_with("\tfdb5"));
    assert_eq!(axes(), axes_before);
    assert_eq!(read(&d.path().join("after.grib")), bytes);
    let req = d.path().join("req");
    std::fs::write(&req, format!("retrieve,{ALL}\n")).unwrap();
    let theirs = d.path().join("theirs.grib");
    ok(
        "fdb-read",
        with_config(Command::new("fdb-read").arg(&req).arg(&theirs), &config)
            .output()
            .unwrap(),
    );
    assert_eq!(std::fs::read(&theirs).unwrap(), bytes);
    let fdb_list = ok(
        "fdb-list",
        with_config(
            Command::new("fdb-list").args(["class=od,expver=0001", "--porcelain"]),
            &config,
        )
        .output()
        .unwrap(),
    );
    assert_eq!(
        sorted(&fdb_list),
        sorted(&fs(&config, &["list", "class=od", "--porcelain"]))
    );
    // Already in the format asked: said, nothing done.
    let again = fs(&config, &["convert", DB, "--to", "fdb5"]);
    assert!(again.contains("already in fdb5 format"), "{again}");
}

#[test]
fn a_bad_target_format_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let config = d.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "spaces:\n- roots:\n  - path: {}\n",
            d.path().join("r").display()
        ),
    )
    .unwrap();
    let o = with_config(
        Command::new(FS).args(["convert", DB, "--to", "grib"]),
        &config,
    )
    .output()
    .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("expected fieldstore or fdb5"));
}

#[test]
fn a_field_past_its_data_files_end_stops_the_conversion_and_changes_nothing() {
    if !fdb5::have_fdb5() {
        skip::skip("convert", "FDB5's fdb-write", true);
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (config, root) = store_in(d.path());
    let a = d.path().join("a.grib");
    fs(
        &config,
        &["sample", "--out", a.to_str().unwrap(), "--points", "400"],
    );
    ok(
        "fdb-write",
        with_config(Command::new("fdb-write").arg(&a), &config)
            .output()
            .unwrap(),
    );
    let dir = PathBuf::from(fs(&config, &["where", DB]).trim());
    let data = cut_a_data_file(&dir);
    let toc = std::fs::read(dir.join("toc")).unwrap();
    let o = with_config(
        Command::new(env!("CARGO_BIN_EXE_fieldstore")).args(["convert", DB, "--to", "fieldstore"]),
        &config,
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("past the end of the data file"), "{err}");
    assert!(err.contains(&*data.to_string_lossy()), "{err}");
    assert_eq!(std::fs::read(dir.join("toc")).unwrap(), toc);
    assert!(fs(&config, &["where", DB, "--show-format"])
        .trim_end()
        .ends_with("\tfdb5"));
    let left: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains(".converting."))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Databases convert side by side: one that cannot be converted (a field past its data file's
/// end) fails the command and stays as it was, while the other is converted all the same, its
/// old catalogue cleared, and lists and reads as before.
#[test]
fn a_failing_database_leaves_the_others_converted() {
    if !fdb5::have_fdb5() {
        skip::skip("convert", "FDB5's fdb-write", true);
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let (config, _) = store_in(d.path());
    fdb5_writes(&config, d.path(), &["--date", "20261123"]);
    let good = DB.replace("20261122", "20261123");
    let listed = || sorted(&fs(&config, &["list", &good, "--full", "--porcelain"]));
    let before = listed();
    let read_good = |out: &Path| {
        fs(
            &config,
            &[
                "read",
                &ALL.replace("20261122", "20261123"),
                out.to_str().unwrap(),
            ],
        );
        std::fs::read(out).unwrap()
    };
    let bytes = read_good(&d.path().join("before.grib"));
    // The database of 20261122 is damaged: its data file lost its last 10 bytes.
    let bad = PathBuf::from(fs(&config, &["where", DB]).trim());
    cut_a_data_file(&bad);
    let bad_toc = std::fs::read(bad.join("toc")).unwrap();
    let o = with_config(
        Command::new(FS).args([
            "convert",
            "class=od,expver=0001",
            "--to",
            "fieldstore",
            "--grace",
            "0",
        ]),
        &config,
    )
    .output()
    .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "{err}");
    assert!(err.contains("past the end of the data file"), "{err}");
    assert_eq!(std::fs::read(bad.join("toc")).unwrap(), bad_toc);
    assert!(fs(&config, &["where", DB, "--show-format"])
        .trim_end()
        .ends_with("\tfdb5"));
    assert!(fs(&config, &["where", &good, "--show-format"])
        .trim_end()
        .ends_with("\tfieldstore"));
    assert_eq!(listed(), before);
    assert_eq!(read_good(&d.path().join("after.grib")), bytes);
    let good_dir = PathBuf::from(fs(&config, &["where", &good]).trim());
    let old: Vec<_> = std::fs::read_dir(&good_dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".index"))
        .collect();
    assert!(old.is_empty(), "FDB5's index files left: {old:?}");
}
