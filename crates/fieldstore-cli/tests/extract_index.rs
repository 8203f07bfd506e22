//! Extraction information for databases in FDB5's format, whose records cannot hold it: the
//! side files (`<datafile>.extract`) fieldstore writes as it archives into one, read back by
//! `fieldstore extract` (only a part of each field read), ignored by Debian's FDB5 5.10.8
//! (`fdb-list`, `fdb-read` unchanged); a side file damaged, stale or gone costs speed, never a
//! value; and `fieldstore extract-index` adding it to fields FDB5 wrote, resumably.

mod common;
#[allow(dead_code)] // not every helper is used here
#[path = "common/fdb5.rs"]
mod fdb5;
#[path = "common/skip.rs"]
mod skip;

use std::path::{Path, PathBuf};
use std::process::Command;

use fieldstore::grib::{Decoded, SliceMessages};
use serde_json::Value;

const DB: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g";

fn request() -> String {
    format!("{DB},type=fc,levtype=pl,levelist=500,param=t/u,step=0/6")
}

/// A store whose new databases are in FDB5's format, with the variables FDB5's tools need.
struct Store {
    config: PathBuf,
    home: PathBuf,
    root: PathBuf,
}

impl Store {
    fn new(dir: &Path) -> Store {
        Store::with_format(dir, "fdb5")
    }

    /// A store whose new databases take `format` (`fdb5` or `fieldstore`).
    fn with_format(dir: &Path, format: &str) -> Store {
        let root = dir.join("root");
        let home = dir.join("home");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&home).unwrap();
        let schema = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fieldstore/tests/fixtures/ecmwf-fdb5-schema");
        let config = dir.join("fdb5.yaml");
        std::fs::write(
            &config,
            format!(
                "type: local\nengine: toc\nformat: {format}\nschema: {}\nspaces:\n- handler: Default\n  roots:\n  - path: {}\n",
                schema.display(),
                root.display()
            ),
        )
        .unwrap();
        Store { config, home, root }
    }

    fn apply<'c>(&self, c: &'c mut Command) -> &'c mut Command {
        for v in fieldstore::model::config::ENV_STEPS {
            c.env_remove(v);
        }
        c.env_remove("FDB5_SUB_TOCS")
            .env_remove("FDB_SUB_TOCS")
            .env("FDB5_CONFIG_FILE", &self.config)
            .env("FDB_HOME", &self.home)
            .env("FDB_DBNAMES_FILE", "/nonexistent")
    }

    fn fieldstore(&self, args: &[&str]) -> String {
        let mut c = common::fieldstore();
        self.apply(&mut c);
        let o = c.args(args).output().unwrap();
        common::succeeded(&format!("fieldstore {args:?}"), &o)
    }

    fn fdb5(&self, tool: &str, args: &[&str]) -> Vec<u8> {
        let mut c = Command::new(tool);
        self.apply(&mut c);
        let o = c.args(args).output().unwrap();
        assert!(
            o.status.success(),
            "{tool} {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        o.stdout
    }

    /// The database's directory (the one directory under the root).
    fn db_dir(&self) -> PathBuf {
        let dirs: Vec<PathBuf> = std::fs::read_dir(&self.root)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.is_dir())
            .collect();
        assert_eq!(dirs.len(), 1, "one database: {dirs:?}");
        dirs[0].clone()
    }

    fn files_ending(&self, suffix: &str) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.db_dir())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.to_string_lossy().ends_with(suffix))
            .collect();
        v.sort();
        v
    }
}

/// Four fields of 65,160 points (t and u at steps 0 and 6) in simple packing, and the same in
/// CCSDS.
fn fields(dir: &Path) -> (PathBuf, PathBuf) {
    let simple = dir.join("simple.grib");
    let o = common::fieldstore()
        .args(["sample", "--out"])
        .arg(&simple)
        .args([
            "--params", "t/u", "--levels", "500", "--steps", "0/6", "--points", "65160",
        ])
        .output()
        .unwrap();
    common::succeeded("sample", &o);
    let ccsds = dir.join("ccsds.grib");
    let o = Command::new("grib_set")
        .args(["-r", "-s", "packingType=grid_ccsds"])
        .arg(&simple)
        .arg(&ccsds)
        .output()
        .expect("grib_set (libeccodes-tools) is needed: scripts/install-deps --tests");
    common::succeeded("grib_set", &o);
    (simple, ccsds)
}

/// ecCodes' values of each message, by (step, param).
fn truth(file: &Path) -> Vec<((String, String), Vec<f64>)> {
    let bytes = std::fs::read(file).unwrap();
    SliceMessages::new(&bytes, "truth")
        .map(|m| {
            let (_, _, m) = m.unwrap();
            let d = Decoded::new(m).unwrap();
            let k = d.mars_keys().unwrap();
            let key = (
                k.get("step").unwrap().to_string(),
                k.get("param").unwrap().to_string(),
            );
            (key, d.values().unwrap())
        })
        .collect()
}

/// Extracts two ranges and a point from the four fields; checks every value against ecCodes
/// bit for bit; returns the bytes read per field.
fn extract(store: &Store, file: &Path, what: &str) -> Vec<u64> {
    let truth = truth(file);
    let out = store.fieldstore(&[
        "extract",
        &request(),
        "--range",
        "0-5",
        "--range",
        "30000-30100",
        "--point",
        "45,10",
        "--json",
    ]);
    let items: Value = serde_json::from_str(&out).unwrap();
    let items = items.as_array().unwrap();
    assert_eq!(items.len(), 4, "{what}: {out}");
    let mut read = Vec::new();
    for item in items {
        let key = (
            item["key"]["step"].as_str().unwrap().to_string(),
            item["key"]["param"].as_str().unwrap().to_string(),
        );
        let want = &truth.iter().find(|(k, _)| *k == key).unwrap().1;
        for (idx, vals) in item["indices"]
            .as_array()
            .unwrap()
            .iter()
            .zip(item["values"].as_array().unwrap())
        {
            let (idx, vals) = (idx.as_array().unwrap(), vals.as_array().unwrap());
            assert!(!idx.is_empty() && idx.len() == vals.len(), "{what}");
            for (i, v) in idx.iter().zip(vals) {
                let i = i.as_u64().unwrap() as usize;
                assert_eq!(
                    v.as_f64().unwrap().to_bits(),
                    want[i].to_bits(),
                    "{what}: {key:?} point {i}"
                );
            }
        }
        read.push(item["bytes_read"].as_u64().unwrap());
    }
    read
}

/// Each field's length in the file.
fn lengths(file: &Path) -> Vec<u64> {
    let bytes = std::fs::read(file).unwrap();
    SliceMessages::new(&bytes, "lengths")
        .map(|m| m.unwrap().2.len() as u64)
        .collect()
}

fn all_partial(read: &[u64], file: &Path, what: &str) {
    let whole = lengths(file).into_iter().min().unwrap();
    for r in read {
        assert!(
            *r < whole / 2,
            "{what}: {r} bytes read of fields of {whole}"
        );
    }
}

fn all_whole(read: &[u64], file: &Path, what: &str) {
    let whole = lengths(file).into_iter().min().unwrap();
    for r in read {
        assert!(*r >= whole, "{what}: {r} bytes read of fields of {whole}");
    }
}

/// The messages of FDB5's `fdb-read` of the request, sorted.
fn fdb5_read(store: &Store, dir: &Path) -> Vec<Vec<u8>> {
    let out = dir.join("fdb-read.grib");
    let req = dir.join("req");
    std::fs::write(&req, format!("retrieve,{}", request())).unwrap();
    store.fdb5("fdb-read", &[req.to_str().unwrap(), out.to_str().unwrap()]);
    messages(&out)
}

fn messages(file: &Path) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(file).unwrap();
    let mut v: Vec<Vec<u8>> = SliceMessages::new(&bytes, "messages")
        .map(|m| m.unwrap().2.to_vec())
        .collect();
    v.sort();
    v
}

fn missing(test: &str, what: &str) {
    skip::skip(test, what, true);
}

/// FDB5's `fdb-wipe` (5.10.8 and 5.25) refuses a database holding files it does not know:
/// fieldstore archiving into an FDB5-format database makes no side file unasked, and FDB5's
/// wipe of it goes through.
#[test]
fn fieldstore_archiving_into_an_fdb5_database_leaves_it_wipeable_by_fdb5() {
    let test = "fieldstore_archiving_into_an_fdb5_database_leaves_it_wipeable_by_fdb5";
    if !fdb5::have_fdb5() {
        return missing(test, "FDB5's tools (fdb-write, fdb-wipe)");
    }
    let d = tempfile::tempdir().unwrap();
    let (simple, ccsds) = fields(d.path());
    let store = Store::new(d.path());
    store.fdb5("fdb-write", &[simple.to_str().unwrap()]);
    store.fieldstore(&["write", ccsds.to_str().unwrap()]);
    assert!(
        store.files_ending(".extract").is_empty(),
        "no side file unasked"
    );
    store.fdb5("fdb-wipe", &["--doit", DB]);
    // Only the store's records of its keys (beside the databases, which FDB5 ignores) stay.
    let left: Vec<String> = std::fs::read_dir(&store.root)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !common::is_keys_record(n))
        .collect();
    assert!(left.is_empty(), "FDB5 wiped the database whole: {left:?}");
}

#[test]
fn fieldstore_writes_side_files_fdb5_ignores_them_and_damage_costs_only_speed() {
    let test = "fieldstore_writes_side_files_fdb5_ignores_them_and_damage_costs_only_speed";
    let d = tempfile::tempdir().unwrap();
    let (_, ccsds) = fields(d.path());
    let store = Store::new(d.path());
    store.fieldstore(&["write", ccsds.to_str().unwrap()]);
    assert!(store.db_dir().join("toc").exists(), "an FDB5 database");
    // None unasked (FDB5's wipe would refuse the database): extract-index makes them, and
    // from then on every flush keeps them current.
    assert!(store.files_ending(".extract").is_empty());
    all_whole(
        &extract(&store, &ccsds, "no side file yet"),
        &ccsds,
        "no side file yet",
    );
    let out = store.fieldstore(&["extract-index", &request()]);
    assert!(out.contains("added extraction information to 4,"), "{out}");
    let sides = store.files_ending(".data.extract");
    assert_eq!(
        sides.len(),
        store.files_ending(".data").len(),
        "a side file per data file"
    );
    all_partial(&extract(&store, &ccsds, "side files"), &ccsds, "side files");

    // FDB5 itself lists and reads the database as before.
    if fdb5::have_fdb5() {
        let listing = fdb5::fdb5_listing(&store.config, &store.home);
        assert_eq!(listing.len(), 4, "{listing:?}");
        assert_eq!(fdb5_read(&store, d.path()), messages(&ccsds));
    } else {
        missing(test, "FDB5's tools (fdb-list, fdb-read)");
    }

    // Damaged side files: the same values, each field read whole.
    let saved: Vec<Vec<u8>> = sides.iter().map(|p| std::fs::read(p).unwrap()).collect();
    for p in &sides {
        let mut b = std::fs::read(p).unwrap();
        for x in b.iter_mut().skip(12) {
            *x ^= 0x5a;
        }
        std::fs::write(p, b).unwrap();
    }
    all_whole(&extract(&store, &ccsds, "damaged"), &ccsds, "damaged");

    // Stale ones (the data file changed under them: the reference minute of each field's
    // section 1, which no value depends on): read whole.
    for (p, b) in sides.iter().zip(&saved) {
        std::fs::write(p, b).unwrap();
    }
    all_partial(&extract(&store, &ccsds, "restored"), &ccsds, "restored");
    let data = store.files_ending(".data");
    let mut changed = 0;
    for p in &data {
        let mut b = std::fs::read(p).unwrap();
        let starts: Vec<usize> = b
            .windows(4)
            .enumerate()
            .filter(|(_, w)| *w == b"GRIB")
            .map(|(i, _)| i)
            .collect();
        for s in starts {
            // GRIB2 section 1 starts at 16; its octet 17 (1-based) is the minute.
            b[s + 16 + 16] ^= 1;
            changed += 1;
        }
        std::fs::write(p, b).unwrap();
    }
    assert_eq!(changed, 4);
    all_whole(&extract(&store, &ccsds, "stale"), &ccsds, "stale");
    for p in &data {
        let mut b = std::fs::read(p).unwrap();
        let starts: Vec<usize> = b
            .windows(4)
            .enumerate()
            .filter(|(_, w)| *w == b"GRIB")
            .map(|(i, _)| i)
            .collect();
        for s in starts {
            b[s + 16 + 16] ^= 1;
        }
        std::fs::write(p, b).unwrap();
    }

    // Gone: read whole; extract-index puts them back, and a second run finds nothing to do.
    for p in &sides {
        std::fs::remove_file(p).unwrap();
    }
    all_whole(
        &extract(&store, &ccsds, "no side file"),
        &ccsds,
        "no side file",
    );
    let out = store.fieldstore(&["extract-index", &request()]);
    assert!(out.contains("added extraction information to 4,"), "{out}");
    all_partial(&extract(&store, &ccsds, "re-indexed"), &ccsds, "re-indexed");
    let out = store.fieldstore(&["extract-index", &request()]);
    assert!(
        out.contains("added extraction information to 0, 4 had it already"),
        "{out}"
    );
    // A database with side files has them kept current by every flush: the fields written
    // again (a new data file) come with theirs.
    store.fieldstore(&["write", ccsds.to_str().unwrap()]);
    assert_eq!(
        store.files_ending(".data.extract").len(),
        store.files_ending(".data").len(),
        "a side file per data file"
    );
    let out = store.fieldstore(&["extract-index", &request()]);
    assert!(
        out.contains("added extraction information to 0, 4 had it already"),
        "{out}"
    );
    all_partial(
        &extract(&store, &ccsds, "written again"),
        &ccsds,
        "written again",
    );
}

#[test]
fn extract_index_adds_information_to_fields_fdb5_wrote_resumably() {
    let test = "extract_index_adds_information_to_fields_fdb5_wrote_resumably";
    if !fdb5::have_fdb5() {
        return missing(test, "FDB5's tools (fdb-write)");
    }
    let d = tempfile::tempdir().unwrap();
    let (simple, _) = fields(d.path());
    let store = Store::new(d.path());
    store.fdb5("fdb-write", &[simple.to_str().unwrap()]);
    let listing = fdb5::fdb5_listing(&store.config, &store.home);
    assert_eq!(listing.len(), 4, "{listing:?}");
    assert!(store.files_ending(".extract").is_empty());
    // Written by FDB5: no information, each field read whole.
    all_whole(&extract(&store, &simple, "by FDB5"), &simple, "by FDB5");

    let out = store.fieldstore(&["extract-index", &request(), "--dry-run"]);
    assert!(
        out.contains("would add extraction information to 4,"),
        "{out}"
    );
    assert!(
        store.files_ending(".extract").is_empty(),
        "a dry run writes nothing"
    );

    let out = store.fieldstore(&["extract-index", &request()]);
    assert!(out.contains("added extraction information to 4,"), "{out}");
    all_partial(&extract(&store, &simple, "indexed"), &simple, "indexed");
    // FDB5 lists and reads it as before.
    assert_eq!(fdb5::fdb5_listing(&store.config, &store.home), listing);
    assert_eq!(fdb5_read(&store, d.path()), messages(&simple));

    // A run killed part way leaves whole records and at most a torn last one (cut here in
    // the middle of the last record): those fields are read whole, the others still through
    // their information, and the next run adds only what is missing.
    let sides = store.files_ending(".extract");
    assert_eq!(sides.len(), 1, "FDB5 wrote one data file");
    let b = std::fs::read(&sides[0]).unwrap();
    let last = b.windows(4).rposition(|w| w == b"FSX1").unwrap();
    std::fs::write(&sides[0], &b[..last + 30]).unwrap();
    let read = extract(&store, &simple, "torn");
    let whole = lengths(&simple).into_iter().min().unwrap();
    assert_eq!(
        read.iter().filter(|r| **r >= whole).count(),
        1,
        "only the torn record's field is read whole: {read:?}"
    );
    let out = store.fieldstore(&["extract-index", &request()]);
    assert!(
        out.contains("added extraction information to 1, 3 had it already"),
        "{out}"
    );
    all_partial(&extract(&store, &simple, "resumed"), &simple, "resumed");
    assert_eq!(fdb5_read(&store, d.path()), messages(&simple));

    // fieldstore's wipe takes the side files with the data files.
    store.fieldstore(&["wipe", DB, "--doit"]);
    assert!(
        std::fs::read_dir(&store.root).unwrap().next().is_none(),
        "the database's directory is gone"
    );
}

/// A fieldstore database converted to FDB5's format: FDB5 reads the result; its fields'
/// extraction information goes into side files beside the data files once `extract-index`
/// is asked.
#[test]
fn conversion_to_fdb5s_format_then_extract_index_makes_side_files() {
    let test = "conversion_to_fdb5s_format_then_extract_index_makes_side_files";
    let d = tempfile::tempdir().unwrap();
    let (_, ccsds) = fields(d.path());
    let store = Store::with_format(d.path(), "fieldstore");
    store.fieldstore(&["write", ccsds.to_str().unwrap()]);
    assert!(
        store.files_ending(".extract").is_empty(),
        "kept in the catalogue"
    );
    all_partial(
        &extract(&store, &ccsds, "fieldstore's format"),
        &ccsds,
        "fieldstore's format",
    );
    store.fieldstore(&["convert", DB, "--to", "fdb5", "--grace", "0"]);
    // FDB5's format for FDB5's programs: no side file unasked (its wipe would refuse the
    // database); extract-index adds them.
    assert!(store.files_ending(".extract").is_empty());
    all_whole(&extract(&store, &ccsds, "converted"), &ccsds, "converted");
    store.fieldstore(&["extract-index", &request()]);
    assert_eq!(
        store.files_ending(".data.extract").len(),
        store.files_ending(".data").len()
    );
    all_partial(&extract(&store, &ccsds, "indexed"), &ccsds, "indexed");
    if fdb5::have_fdb5() {
        assert_eq!(fdb5::fdb5_listing(&store.config, &store.home).len(), 4);
        assert_eq!(fdb5_read(&store, d.path()), messages(&ccsds));
    } else {
        missing(test, "FDB5's tools (fdb-list, fdb-read)");
    }
}
