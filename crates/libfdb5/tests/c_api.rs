//! Builds the C programs in tests/c with the system compiler against the built libfdb5.so and
//! runs them on a temporary store.

use std::path::{Path, PathBuf};
use std::process::Command;

mod support;

fn lib_dir() -> PathBuf {
    support::built_lib_dir("libfdb5.so")
}

fn compile(source: &str, out: &Path, extra: &[&str]) {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let lib = lib_dir();
    assert!(
        lib.join("libfdb5.so").exists(),
        "libfdb5.so not built in {}",
        lib.display()
    );
    let status = Command::new("cc")
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(out)
        .arg(crate_dir.join("tests/c").join(source))
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg("-I")
        .arg(crate_dir.join("../fieldstore-c/include"))
        .arg("-L")
        .arg(&lib)
        .arg("-lfdb5")
        .args(extra)
        .status()
        .expect("run cc");
    assert!(status.success(), "compiling {source} failed");
}

#[test]
fn c_program_archives_lists_and_retrieves_through_the_upstream_api() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let fields = support::three_fields();
    let all: Vec<u8> = fields.concat();
    std::fs::write(dir.path().join("fields.grib"), &all).unwrap();
    let mut truncated = fields[0].clone();
    truncated.extend_from_slice(&fields[1][..fields[1].len() / 2]);
    std::fs::write(dir.path().join("truncated.grib"), &truncated).unwrap();

    std::fs::write(dir.path().join("first2.grib"), fields[..2].concat()).unwrap();

    let exe = dir.path().join("test_api");
    compile("test_api.c", &exe, &[]);
    let out = Command::new(&exe)
        .arg(&root)
        .arg(dir.path().join("fields.grib"))
        .arg(dir.path().join("truncated.grib"))
        .arg(dir.path().join("first2.grib"))
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "test_api failed:\n{stderr}");
    assert!(out.stdout.is_empty(), "the library printed on stdout");
}

#[test]
fn c_threads_archive_through_one_handle_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("test_threads");
    compile("test_threads.c", &exe, &["-pthread"]);
    let out = Command::new(&exe)
        .arg(dir.path())
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "test_threads failed:\n{stderr}");
    assert!(out.stdout.is_empty(), "the library printed on stdout");
}

#[test]
fn c_program_subscribes_and_waits_through_the_extension_header() {
    let dir = tempfile::tempdir().unwrap();
    let exe = dir.path().join("test_subscribe");
    compile("test_subscribe.c", &exe, &["-pthread"]);
    let out = Command::new(&exe)
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "test_subscribe failed:\n{stderr}");
    assert!(out.stdout.is_empty(), "the library printed on stdout");
}

/// The `fieldstore_*` extensions fieldstore/fdb_subscribe.h declares are what libfdb5.so
/// exports under that prefix.
#[test]
fn exports_the_extensions_the_extension_header_declares() {
    let header = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../fieldstore-c/include/fieldstore/fdb_subscribe.h"),
    )
    .unwrap();
    let mut declared: Vec<String> = header
        .lines()
        .filter(|l| l.starts_with("int fieldstore_") || l.starts_with("const char* fieldstore_"))
        .filter_map(|l| l.split('(').next()?.split_whitespace().last())
        .map(str::to_string)
        .collect();
    declared.sort();
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib_dir().join("libfdb5.so"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut exported: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
            [_, "T", name] if name.starts_with("fieldstore_") => Some(name.to_string()),
            _ => None,
        })
        .collect();
    exported.sort();
    assert_eq!(declared.len(), 9, "{declared:?}");
    assert_eq!(exported, declared);
}

/// The `fdb_*` functions our header declares, and those libfdb5.so exports (`nm -D`): the same
/// 47, upstream's current API, and none of 5.10's `fdb_new_listiterator`.
#[test]
fn exports_exactly_what_the_header_declares() {
    let header = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("include/fdb5/api/fdb_c.h"),
    )
    .unwrap();
    let mut declared: Vec<String> = header
        .lines()
        .filter(|l| l.starts_with("int fdb_") || l.starts_with("const char* fdb_"))
        .filter_map(|l| l.split('(').next()?.split_whitespace().last())
        .map(str::to_string)
        .collect();
    declared.sort();
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(lib_dir().join("libfdb5.so"))
        .output()
        .unwrap();
    assert!(out.status.success());
    let mut exported: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
            [_, "T", name] if name.starts_with("fdb_") => Some(name.to_string()),
            _ => None,
        })
        .collect();
    exported.sort();
    assert_eq!(declared.len(), 47, "{declared:?}");
    assert_eq!(exported, declared);
}
