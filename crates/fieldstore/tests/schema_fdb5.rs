//! The ECMWF operational schema parses, and splits keys exactly as FDB5 5.10.8 does.
//! Expected splits were produced by the real FDB5 (`tests/fdb5/gen-schema-splits.sh`).

use std::path::PathBuf;

use fieldstore::model::schema::Schema;
use fieldstore::model::types::Context;
use fieldstore::model::Key;

fn shared_schema() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../shared/testdata/ecmwf-fdb5-schema");
    p.exists().then_some(p)
}

fn fixture_schema() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/ecmwf-fdb5-schema")
}

#[test]
fn ecmwf_schema_parses() {
    let path = shared_schema().unwrap_or_else(fixture_schema);
    let s = Schema::from_file(&path).unwrap();
    assert!(s.paths().len() > 100, "{} rule paths", s.paths().len());
}

#[test]
fn splits_equal_fdb5() {
    let fixture =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fdb5-schema-splits.tsv");
    let text = std::fs::read_to_string(&fixture).unwrap();
    let schema = Schema::from_file(&shared_schema().unwrap_or_else(fixture_schema)).unwrap();
    let cx = Context::default();
    let (mut ok, mut bad) = (0, Vec::new());
    for (n, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let (key, expected) = line.split_once('\t').unwrap();
        let key = Key::parse(key).unwrap();
        let got = match schema.split(&key, &cx, false) {
            Ok(s) => s.porcelain(),
            Err(e) => format!("ERROR {e}"),
        };
        let same = if let Some(msg) = expected.strip_prefix("ERROR") {
            let _ = msg;
            got.starts_with("ERROR")
        } else {
            got == expected
        };
        if same {
            ok += 1;
        } else {
            bad.push(format!(
                "line {}: {key}\n  fdb5: {expected}\n  ours: {got}",
                n + 1
            ));
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} differ:\n{}",
        bad.len(),
        ok + bad.len(),
        bad.join("\n")
    );
    assert!(ok >= 40, "only {ok} cases");
}
