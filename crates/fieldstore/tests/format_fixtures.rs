//! Backward compatibility: stores written by earlier builds, kept under `tests/fixtures/stores/`,
//! must open with this build and show exactly what they showed when written.
//!
//! Each `vN/` holds `root/` (a toc store: several databases, several flushes, a masked field,
//! a compacted database, GRIB and keyed fields) and `expected.txt` (what list, axes and retrieve
//! showed, with a checksum of every field's bytes). The check opens a **copy** (reading must not
//! need to write, and must not change the fixture). Fixtures are never regenerated: a new
//! format gets a new directory, written by the build that introduced it with
//! `cargo test -p fieldstore --test format_fixtures -- --ignored write_fixture` (it refuses to
//! overwrite an existing one), and the old ones stay.

use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};

use fieldstore::api::{Fdb, ListOptions};
use fieldstore::grib::sample::make_field;
use fieldstore::model::config::{from_yaml_str, FdbConfig};
use fieldstore::model::request::{parse_request, Request};
use fieldstore::model::Key;

/// The fixture today's build writes.
const CURRENT: &str = "v3";

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stores")
}

fn open_local(root: &Path) -> Box<dyn Fdb> {
    let yaml = format!("spaces: [{{roots: [{{path: {}}}]}}]", root.display());
    let config = from_yaml_str(&yaml, "fixture").expect("a local config");
    assert!(matches!(config, FdbConfig::Local(_)));
    fieldstore::open(&config).expect("open the store")
}

fn request(text: &str) -> Request {
    parse_request(text).expect("a valid request")
}

/// `k=v,...` without empty values: our own text, so a change in how the library prints keys
/// does not look like a change in what the store holds.
fn text(key: &Key) -> String {
    key.iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// FNV-1a: defined here so the expected checksums never depend on the library under test.
fn fnv(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

fn retrieve(fdb: &dyn Fdb, r: &Request) -> Vec<u8> {
    let mut out = Vec::new();
    fdb.retrieve(r)
        .unwrap_or_else(|e| panic!("retrieve {r}: {e}"))
        .read_to_end(&mut out)
        .unwrap_or_else(|e| panic!("read retrieve {r}: {e}"));
    out
}

/// Everything a user can see of the store, as sorted text (no paths, no timestamps).
fn describe(fdb: &dyn Fdb) -> String {
    let all = request("class=od");
    let mut out = String::new();
    for (depth, masked) in [(1u8, false), (2, false), (3, false), (3, true)] {
        let _ = writeln!(out, "# list depth={depth} include_masked={masked}");
        let mut lines: Vec<String> = fdb
            .list(
                &all,
                ListOptions {
                    include_masked: masked,
                    depth,
                },
            )
            .expect("list")
            .map(|e| {
                let e = e.expect("a list element");
                let keys = [&e.key.db, &e.key.index, &e.key.datum]
                    .iter()
                    .map(|k| text(k))
                    .filter(|t| !t.is_empty())
                    .collect::<Vec<_>>()
                    .join(" | ");
                match &e.location {
                    Some(l) => format!("{keys} length={} masked={}", l.length, e.masked),
                    None => keys,
                }
            })
            .collect();
        lines.sort();
        lines.dedup();
        for l in lines {
            let _ = writeln!(out, "{l}");
        }
    }
    let _ = writeln!(out, "# axes class=od");
    for (k, v) in fdb.axes(&all, 3).expect("axes") {
        let _ = writeln!(out, "{k}={}", v.into_iter().collect::<Vec<_>>().join("/"));
    }
    // Every visible field on its own, by its full key.
    let _ = writeln!(out, "# retrieve each listed field: bytes fnv1a64");
    let mut fields: Vec<String> = fdb
        .list(&all, ListOptions::default())
        .expect("list")
        .map(|e| {
            let e = e.expect("a list element");
            let mut r = Request::new(Some("retrieve"));
            for k in [&e.key.db, &e.key.index, &e.key.datum] {
                for (kw, v) in k.iter().filter(|(_, v)| !v.is_empty()) {
                    r.set(kw, vec![v.to_string()]);
                }
            }
            let b = retrieve(fdb, &r);
            let keys = [&e.key.db, &e.key.index, &e.key.datum].map(text).join(",");
            format!("{keys} {} {:016x}", b.len(), fnv(&b))
        })
        .collect();
    fields.sort();
    for f in fields {
        let _ = writeln!(out, "{f}");
    }
    for r in REQUESTS {
        let b = retrieve(fdb, &request(r));
        let _ = writeln!(out, "# retrieve {r}\n{} {:016x}", b.len(), fnv(&b));
    }
    out
}

/// Multi-field retrieves whose order and content the fixture pins.
const REQUESTS: &[&str] = &[
    "retrieve,class=od,expver=1,stream=oper,date=20261122,time=12,type=fc,levtype=pl,levelist=850/500,step=6/0,param=t/u",
    "retrieve,class=od,expver=1,stream=oper,date=20261123,time=12,type=an,levtype=pl,levelist=500,step=0/to/18/by/6,param=130",
    "retrieve,class=od,expver=1,stream=enfo,date=20261122,time=12,type=pf,levtype=pl,levelist=500,step=0,number=2/1,param=130",
];

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create the copy");
    for entry in std::fs::read_dir(from).expect("read the fixture") {
        let entry = entry.expect("a directory entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("a file type").is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).expect("copy a fixture file");
        }
    }
}

#[test]
fn stores_written_by_earlier_builds_read_the_same() {
    let mut checked = 0;
    for entry in std::fs::read_dir(fixtures()).expect("tests/fixtures/stores") {
        let dir = entry.expect("an entry").path();
        if !dir.join("expected.txt").is_file() {
            continue;
        }
        let copy = tempfile::tempdir().expect("a temporary directory");
        copy_dir(&dir.join("root"), &copy.path().join("root"));
        let fdb = open_local(&copy.path().join("root"));
        let expected = std::fs::read_to_string(dir.join("expected.txt")).expect("expected.txt");
        let seen = describe(fdb.as_ref());
        if let Some((n, (want, got))) = expected
            .lines()
            .chain(std::iter::repeat(""))
            .zip(seen.lines().chain(std::iter::repeat("")))
            .take(expected.lines().count().max(seen.lines().count()))
            .enumerate()
            .find(|(_, (a, b))| a != b)
        {
            panic!(
                "the store in {} no longer reads as it did when written: expected.txt line {}:\n  expected: {want}\n  seen:     {got}\nall seen:\n{seen}",
                dir.display(),
                n + 1
            );
        }
        checked += 1;
    }
    assert!(
        checked >= 1,
        "no fixture store found under {}",
        fixtures().display()
    );
}

fn grib(keys: &[(&str, &str)], seed: u64) -> Vec<u8> {
    make_field(keys, 16, seed).expect("a GRIB field")
}

/// Writes the current format's fixture (run once, when a format version is introduced).
#[test]
#[ignore = "writes tests/fixtures/stores/<CURRENT>; run by hand when a new format version is introduced"]
fn write_fixture() {
    let dir = fixtures().join(CURRENT);
    assert!(
        !dir.exists(),
        "{} exists: fixtures are never rewritten",
        dir.display()
    );
    let root = dir.join("root");
    std::fs::create_dir_all(&root).expect("create the fixture root");
    let fdb = open_local(&root);

    // oper 20261122: GRIB fields over two flushes, then one re-archived (masked).
    let oper = |level: &str, step: &str, param: &str| {
        [
            ("class", "od"),
            ("stream", "oper"),
            ("type", "fc"),
            ("expver", "0001"),
            ("date", "20261122"),
            ("time", "1200"),
            ("step", step),
            ("levtype", "pl"),
            ("levelist", level),
            ("param", param),
        ]
        .map(|(k, v)| (k.to_string(), v.to_string()))
    };
    for step in ["0", "6"] {
        for level in ["500", "850"] {
            for param in ["130", "131"] {
                let keys = oper(level, step, param);
                let keys: Vec<(&str, &str)> =
                    keys.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                fdb.archive(
                    None,
                    &grib(
                        &keys,
                        step.len() as u64 * 7 + level.len() as u64 + param.len() as u64,
                    ),
                )
                .expect("archive");
            }
        }
        fdb.flush().expect("flush");
    }
    let keys = oper("500", "0", "130");
    let keys: Vec<(&str, &str)> = keys.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    fdb.archive(None, &grib(&keys, 99)).expect("re-archive");
    fdb.flush().expect("flush");

    // oper 20261123, analyses: keyed bytes over three flushes, one re-archived, then compacted.
    let an = |step: u32| {
        Key::parse(&format!("class=od,expver=0001,stream=oper,date=20261123,time=1200,domain=g,type=an,levtype=pl,step={step},levelist=500,param=130")).expect("a key")
    };
    for flush in 0..3u32 {
        for step in [0, 6, 12, 18]
            .into_iter()
            .filter(|s| s / 6 % 3 == flush || flush == 2 && *s == 18)
        {
            fdb.archive(
                Some(&an(step)),
                format!("analysis step {step} flush {flush}").as_bytes(),
            )
            .expect("archive");
        }
        fdb.flush().expect("flush");
    }
    fdb.archive(Some(&an(6)), b"analysis step 6, replaced")
        .expect("archive");
    fdb.flush().expect("flush");
    fdb.compact(&request(
        "class=od,expver=0001,stream=oper,date=20261123,time=1200,domain=g",
    ))
    .expect("compact");

    // enfo 20261122: ensemble members, one flush.
    for number in ["1", "2"] {
        let keys = [
            ("class", "od"),
            ("stream", "enfo"),
            ("type", "pf"),
            ("expver", "0001"),
            ("date", "20261122"),
            ("time", "1200"),
            ("step", "0"),
            ("levtype", "pl"),
            ("levelist", "500"),
            ("param", "130"),
            ("number", number),
        ];
        fdb.archive(None, &grib(&keys, number.len() as u64 + 40))
            .expect("archive");
    }
    fdb.flush().expect("flush");
    drop(fdb);

    let fdb = open_local(&root);
    std::fs::write(dir.join("expected.txt"), describe(fdb.as_ref())).expect("write expected.txt");
}
