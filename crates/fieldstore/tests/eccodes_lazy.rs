//! ecCodes is opened at run time, only when something needs it: listing and retrieving a store
//! map no libeccodes into the process; making (or archiving) a field does, once. One test in its
//! own binary, because the state under test is the process's.

use std::io::Read;
use std::path::Path;

use fieldstore::api::ListOptions;
use fieldstore::model::config::from_yaml_str;
use fieldstore::model::request::parse_request;

/// The libeccodes files mapped into this process (`libeccodes.so*`, not `libeccodes_memfs.so`).
fn mapped_eccodes() -> Vec<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("/proc/self/maps");
    let mut libs: Vec<String> = maps
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| {
            Path::new(p)
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n == "libeccodes.so" || n.starts_with("libeccodes.so."))
        })
        .map(str::to_string)
        .collect();
    libs.dedup();
    libs
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

#[test]
fn reading_and_listing_load_no_eccodes_and_writing_loads_one() {
    let d = tempfile::tempdir().unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/stores/v3/root");
    copy_dir(&fixture, &d.path().join("root"));
    let yaml = format!(
        "spaces: [{{roots: [{{path: {}}}]}}]",
        d.path().join("root").display()
    );
    let config = from_yaml_str(&yaml, "test").unwrap();
    let fdb = fieldstore::open(&config).unwrap();

    let all = parse_request("class=od").unwrap();
    let listed = fdb
        .list(
            &all,
            ListOptions {
                include_masked: false,
                depth: 3,
            },
        )
        .unwrap()
        .count();
    assert!(listed > 10, "the fixture lists {listed} fields");
    let one = parse_request(
        "class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl,\
         levelist=500,param=130,step=0",
    )
    .unwrap();
    let mut bytes = Vec::new();
    fdb.retrieve(&one).unwrap().read_to_end(&mut bytes).unwrap();
    assert_eq!(bytes.len(), 228);
    assert!(bytes.starts_with(b"GRIB"));

    assert_eq!(mapped_eccodes(), Vec::<String>::new());
    assert!(fieldstore::grib::eccodes_if_loaded().is_none());

    // Making a field needs ecCodes: now exactly one copy is mapped, the one `info` reports.
    let field =
        fieldstore::grib::sample::make_field(&[("param", "130"), ("levelist", "500")], 100, 1);
    match fieldstore::grib::eccodes_if_loaded() {
        Some(Ok(info)) => {
            field.expect("a field from the loaded ecCodes");
            let mapped = mapped_eccodes();
            assert_eq!(mapped.len(), 1, "{mapped:?}");
            let canonical = std::fs::canonicalize(&mapped[0]).unwrap();
            assert_eq!(canonical.display().to_string(), info.path);
        }
        // No ecCodes on this machine: the error says what to install.
        Some(Err(e)) => {
            assert!(e.to_string().contains("pip install eccodeslib"), "{e}");
            assert!(field.is_err());
        }
        None => panic!("making a field did not try to load ecCodes"),
    }
}
