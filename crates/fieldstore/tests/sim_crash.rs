//! A LocalFdb over the simulated file system: what a flush made durable survives a crash, what
//! was archived after it does not, and a wipe cut short at any sync point leaves the database
//! whole or gone.

use std::path::Path;
use std::sync::Arc;

use fieldstore::api::{Fdb, ListOptions, LocalFdb};
use fieldstore::model::config::{from_yaml_str, FdbConfig};
use fieldstore::storage::fs::{FileSystem, SimFs};

const ROOT: &str = "/data/root";

fn open(fs: &SimFs) -> LocalFdb {
    let yaml = format!("spaces: [{{roots: [{{path: {ROOT}}}]}}]");
    match from_yaml_str(&yaml, "test").unwrap() {
        FdbConfig::Local(l) => LocalFdb::with_fs(l, Arc::new(fs.clone())).unwrap(),
        other => panic!("expected a local config, got {other:?}"),
    }
}

/// A file system whose root directory exists durably.
fn sim() -> SimFs {
    let fs = SimFs::new();
    fs.create_dir_all(Path::new(ROOT)).unwrap();
    for d in ["/", "/data", ROOT] {
        fs.sync_dir(Path::new(d)).unwrap();
    }
    fs
}

fn field(step: &str) -> Vec<u8> {
    let keys = [
        ("class", "od"),
        ("stream", "oper"),
        ("type", "fc"),
        ("expver", "0001"),
        ("date", "20261122"),
        ("time", "1200"),
        ("step", step),
        ("levtype", "sfc"),
        ("param", "167"),
    ];
    fieldstore::grib::sample::make_field(&keys, 10, step.parse().unwrap()).unwrap()
}

fn steps(f: &LocalFdb) -> Vec<String> {
    let req = fieldstore::model::request::parse_request("class=od,expver=1").unwrap();
    let mut out: Vec<String> = f
        .list(&req, ListOptions::default())
        .unwrap()
        .map(|e| e.unwrap().key.datum.get("step").unwrap_or("").to_string())
        .collect();
    out.sort();
    out
}

fn archive(f: &LocalFdb, steps: &[&str]) {
    for s in steps {
        f.archive(None, &field(s)).unwrap();
    }
}

#[test]
fn flushed_fields_survive_a_crash_and_unflushed_ones_do_not() {
    let fs = sim();
    let f = open(&fs);
    archive(&f, &["0", "6"]);
    f.flush().unwrap();
    archive(&f, &["12"]);
    assert_eq!(steps(&f), ["0", "6"], "unflushed fields are invisible");
    fs.crash();
    drop(f);
    let f = open(&fs);
    assert_eq!(steps(&f), ["0", "6"]);
    let req = fieldstore::model::request::parse_request(
        "class=od,expver=1,stream=oper,type=fc,date=20261122,time=12,levtype=sfc,param=167,step=6",
    )
    .unwrap();
    let mut out = Vec::new();
    std::io::Read::read_to_end(&mut f.retrieve(&req).unwrap(), &mut out).unwrap();
    assert_eq!(out, field("6"), "the flushed bytes read back");
    // The database takes further archives after the crash.
    archive(&f, &["18"]);
    f.flush().unwrap();
    assert_eq!(steps(&f), ["0", "18", "6"]);
}

#[test]
fn a_wipe_cut_short_at_any_sync_point_leaves_the_database_whole_or_gone() {
    let wipe_req = fieldstore::model::request::parse_request(
        "class=od,expver=1,stream=oper,date=20261122,time=12",
    )
    .unwrap();
    // Count the sync points of a whole wipe first.
    let fs = sim();
    let f = open(&fs);
    archive(&f, &["0", "6"]);
    f.flush().unwrap();
    let before = fs.sync_points();
    f.wipe(&wipe_req, true).unwrap();
    let points = fs.sync_points() - before;
    assert!(points >= 2, "a wipe passes {points} sync points");
    assert!(steps(&f).is_empty());
    for k in 1..=points {
        let fs = sim();
        let f = open(&fs);
        archive(&f, &["0", "6"]);
        f.flush().unwrap();
        fs.crash_at(fs.sync_points() + k);
        assert!(f.wipe(&wipe_req, true).is_err(), "crash at sync point {k}");
        fs.restart();
        drop(f);
        let f = open(&fs);
        let found = steps(&f);
        assert!(
            found.is_empty() || found == ["0", "6"],
            "after a crash at sync point {k} of a wipe: {found:?}"
        );
        // Whatever was left, the name is usable again and a later wipe leaves nothing.
        archive(&f, &["12"]);
        f.flush().unwrap();
        assert!(steps(&f).contains(&"12".to_string()));
        f.wipe(&wipe_req, true).unwrap();
        assert!(steps(&f).is_empty());
        // The store's records of what its keys follow (storage::keys_release) are not the
        // database's: they stay.
        let left: Vec<_> = fs
            .read_dir(Path::new(ROOT))
            .unwrap()
            .into_iter()
            .map(|e| e.file_name())
            .filter(|n| {
                n != fieldstore::storage::keys_release::RECORD
                    && n != fieldstore::storage::keys_release::TABLES_RECORD
            })
            .collect();
        assert!(
            left.is_empty(),
            "leftovers after the second wipe (crash at {k}): {left:?}"
        );
    }
}

#[test]
fn a_full_disk_or_a_failed_sync_fails_the_flush_and_publishes_nothing() {
    use fieldstore::storage::fs::sim::Op;
    let fs = sim();
    let f = open(&fs);
    archive(&f, &["0"]);
    f.flush().unwrap();
    fs.set_space(Some(100));
    let _ = f.archive(None, &field("6"));
    assert!(f.flush().is_err(), "a flush with the disk full succeeded");
    fs.set_space(None);
    assert_eq!(steps(&f), ["0"]);
    drop(f);
    let f = open(&fs);
    archive(&f, &["12"]);
    fs.fail_nth(Op::Sync, 1);
    assert!(
        f.flush().is_err(),
        "a flush whose fdatasync failed succeeded"
    );
    assert_eq!(steps(&f), ["0"]);
    fs.crash();
    drop(f);
    assert_eq!(steps(&open(&fs)), ["0"]);
}
