//! The 5.10 ABI from C: `tests/c/test_510.c` (every function and error path, built against our
//! header) on fieldstore's libfdb5.so.0d, and `tests/c/debian_program.c` built against Debian's
//! real libfdb5-dev and run unchanged on FDB5 and on fieldstore, with the same answers.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "../../libfdb5/tests/support/mod.rs"]
mod support;

const DEBIAN_HEADER: &str = "/usr/include/x86_64-linux-gnu/fdb5/api/fdb_c.h";
const DEBIAN_LIB_DIR: &str = "/usr/lib/x86_64-linux-gnu";
const DEBIAN_LIB: &str = "/usr/lib/x86_64-linux-gnu/libfdb5.so.0d";

fn built_lib() -> PathBuf {
    support::built_lib_dir("libfdb5_510.so").join("libfdb5_510.so")
}

/// A directory holding our library under Debian's name, as a user would put it on
/// LD_LIBRARY_PATH.
fn lib_dir(under: &Path) -> PathBuf {
    let dir = under.join("lib");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(built_lib(), dir.join("libfdb5.so.0d")).unwrap();
    dir
}

fn fields() -> Vec<Vec<u8>> {
    support::three_fields()
}

/// A store of its own under `dir`, with ECMWF's schema (FDB5 needs one named), configured
/// through the environment as a 5.10 program is.
fn store(dir: &Path, name: &str) -> (PathBuf, PathBuf) {
    let root = dir.join(name);
    std::fs::create_dir_all(&root).unwrap();
    let home = dir.join(format!("{name}-home"));
    std::fs::create_dir_all(&home).unwrap();
    let schema = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fieldstore/tests/fixtures/ecmwf-fdb5-schema");
    let config = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &config,
        format!(
            "type: local\nengine: toc\nschema: {}\nspaces:\n- handler: Default\n  roots:\n  - path: {}\n",
            schema.display(),
            root.display()
        ),
    )
    .unwrap();
    (config, home)
}

fn configured<'c>(c: &'c mut Command, config: &Path, home: &Path) -> &'c mut Command {
    c.env("FDB5_CONFIG_FILE", config)
        .env("FDB_HOME", home)
        .env_remove("FDB_CONFIG")
        .env_remove("FDB5_CONFIG")
        .env_remove("FDB_CONFIG_FILE")
        .env_remove("FDB5_HOME")
        .env_remove("LD_LIBRARY_PATH")
}

fn cc(args: &[&std::ffi::OsStr]) {
    let status = Command::new("cc")
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror"])
        .args(args)
        .status()
        .expect("run cc");
    assert!(status.success(), "cc {args:?} failed");
}

fn ok(what: &str, out: Output) -> Output {
    assert!(
        out.status.success(),
        "{what} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// Which file the dynamic loader gives `exe` for libfdb5.so.0d, by `ldd`.
fn loaded_libfdb5(exe: &Path, ld_library_path: Option<&Path>) -> String {
    let mut c = Command::new("ldd");
    c.arg(exe).env_remove("LD_LIBRARY_PATH");
    if let Some(p) = ld_library_path {
        c.env("LD_LIBRARY_PATH", p);
    }
    let out = ok("ldd", c.output().unwrap());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.contains("libfdb5.so.0d"))
        .and_then(|l| l.split("=>").nth(1))
        .and_then(|r| r.split_whitespace().next())
        .unwrap_or("(not found)")
        .to_string()
}

#[test]
fn every_510_function_and_error_path_from_c() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    let fields = fields();
    std::fs::write(p("fields.grib"), fields.concat()).unwrap();
    let mut truncated = fields[0].clone();
    truncated.extend_from_slice(&fields[1][..fields[1].len() / 2]);
    std::fs::write(p("truncated.grib"), &truncated).unwrap();
    std::fs::write(p("first2.grib"), fields[..2].concat()).unwrap();

    let lib = lib_dir(dir.path());
    let exe = p("test_510");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/test_510.c");
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
    cc(&[
        "-o".as_ref(),
        exe.as_os_str(),
        src.as_os_str(),
        "-I".as_ref(),
        include.as_os_str(),
        "-L".as_ref(),
        lib.as_os_str(),
        "-l:libfdb5.so.0d".as_ref(),
    ]);
    assert_eq!(
        loaded_libfdb5(&exe, Some(&lib)),
        lib.join("libfdb5.so.0d").display().to_string()
    );
    let (config, home) = store(dir.path(), "root");
    let out = configured(&mut Command::new(&exe), &config, &home)
        .env("LD_LIBRARY_PATH", &lib)
        .args([p("fields.grib"), p("truncated.grib"), p("first2.grib")])
        .output()
        .unwrap();
    let out = ok("test_510", out);
    assert!(out.stdout.is_empty(), "the library printed on stdout");
}

/// Says the test is skipped for lack of Debian's libfdb5-dev; fails instead under CI=true,
/// where scripts/install-deps --tests installs it.
fn skip(test: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: Debian's libfdb5-dev not found, and CI=true: scripts/install-deps --tests installs it");
    }
    let _ = writeln!(
        std::io::stderr(),
        "SKIP {test}: Debian's libfdb5-dev ({DEBIAN_HEADER}, {DEBIAN_LIB}) not found (scripts/install-deps --tests installs it)"
    );
}

#[test]
fn a_program_built_against_debians_libfdb5_runs_unchanged_on_fieldstore() {
    let test = "a_program_built_against_debians_libfdb5_runs_unchanged_on_fieldstore";
    if !Path::new(DEBIAN_HEADER).exists() || !Path::new(DEBIAN_LIB).exists() {
        return skip(test);
    }
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n);
    std::fs::write(p("fields.grib"), fields().concat()).unwrap();

    // Built the way a model developer builds against Debian's package: its header, its library.
    let exe = p("debian_program");
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/debian_program.c");
    cc(&[
        "-o".as_ref(),
        exe.as_os_str(),
        src.as_os_str(),
        "-I/usr/include/x86_64-linux-gnu".as_ref(),
        "-L".as_ref(),
        DEBIAN_LIB_DIR.as_ref(),
        "-lfdb5".as_ref(),
    ]);
    // The two headers declare the same API: each program compiles against the other's too.
    let include = Path::new(env!("CARGO_MANIFEST_DIR")).join("include");
    let ours_built = p("debian_program_ours_header");
    cc(&[
        "-o".as_ref(),
        ours_built.as_os_str(),
        src.as_os_str(),
        "-I".as_ref(),
        include.as_os_str(),
        "-L".as_ref(),
        DEBIAN_LIB_DIR.as_ref(),
        "-lfdb5".as_ref(),
    ]);
    let test_510 = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/test_510.c");
    cc(&[
        "-fsyntax-only".as_ref(),
        "-I/usr/include/x86_64-linux-gnu".as_ref(),
        test_510.as_os_str(),
    ]);
    let theirs_lib = loaded_libfdb5(&exe, None);
    assert!(
        theirs_lib.ends_with("/libfdb5.so.0d")
            && !theirs_lib.contains(&*dir.path().to_string_lossy()),
        "without LD_LIBRARY_PATH the program should load Debian's library, not {theirs_lib}"
    );
    let lib = lib_dir(dir.path());
    let ours_lib = loaded_libfdb5(&exe, Some(&lib));
    assert_eq!(ours_lib, lib.join("libfdb5.so.0d").display().to_string());

    let (config, home) = store(dir.path(), "fdb5");
    let theirs = ok(
        "debian_program on FDB5",
        configured(&mut Command::new(&exe), &config, &home)
            .args([p("fields.grib"), p("theirs.grib")])
            .output()
            .unwrap(),
    );
    let (config, home) = store(dir.path(), "fieldstore");
    let ours = ok(
        "debian_program on fieldstore",
        configured(&mut Command::new(&exe), &config, &home)
            .env("LD_LIBRARY_PATH", &lib)
            .args([p("fields.grib"), p("ours.grib")])
            .output()
            .unwrap(),
    );
    let theirs_text = String::from_utf8_lossy(&theirs.stdout);
    let ours_text = String::from_utf8_lossy(&ours.stdout);
    assert!(
        theirs_text.contains("all:\n  {class=od,"),
        "FDB5 listed nothing:\n{theirs_text}"
    );
    assert_eq!(ours_text, theirs_text, "same listing and reader positions");
    let theirs_bytes = std::fs::read(p("theirs.grib")).unwrap();
    assert!(!theirs_bytes.is_empty());
    assert!(
        std::fs::read(p("ours.grib")).unwrap() == theirs_bytes,
        "same retrieved bytes"
    );
    // fieldstore's store is its own: nothing was written into FDB5's.
    assert!(std::fs::read_dir(p("fieldstore")).unwrap().next().is_some());
}

/// The `fdb_*` functions a header declares.
fn declared(header: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(header).unwrap();
    let mut names: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("int fdb_") || l.starts_with("const char* fdb_"))
        .filter_map(|l| l.split('(').next()?.split_whitespace().last())
        .map(str::to_string)
        .collect();
    names.sort();
    names
}

/// The `fdb_*` functions a shared library exports, by `nm -D`.
fn exported(lib: &Path) -> Vec<String> {
    let out = ok(
        "nm -D",
        Command::new("nm")
            .args(["-D", "--defined-only"])
            .arg(lib)
            .output()
            .unwrap(),
    );
    let mut names: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
            [_, "T", name] if name.starts_with("fdb_") => Some(name.to_string()),
            _ => None,
        })
        .collect();
    names.sort();
    names
}

#[test]
fn exports_exactly_the_29_functions_of_debians_510_api() {
    let ours = exported(&built_lib());
    let header = declared(&Path::new(env!("CARGO_MANIFEST_DIR")).join("include/fdb5/api/fdb_c.h"));
    assert_eq!(ours.len(), 29, "{ours:?}");
    assert_eq!(ours, header, "the library exports what its header declares");
    if Path::new(DEBIAN_LIB).exists() {
        assert_eq!(
            ours,
            exported(Path::new(DEBIAN_LIB)),
            "Debian's libfdb5.so.0d"
        );
    } else {
        skip("exports_exactly_the_29_functions_of_debians_510_api (Debian comparison)");
    }
    if Path::new(DEBIAN_HEADER).exists() {
        assert_eq!(ours, declared(Path::new(DEBIAN_HEADER)), "Debian's fdb_c.h");
    }
}

/// fieldstore's own extensions (fieldstore/fdb_subscribe.h) are exported by the 5.10 library
/// too, under their `fieldstore_` names, beside Debian's 29 `fdb_` functions.
#[test]
fn exports_the_extensions_of_the_extension_header() {
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
    let out = ok(
        "nm -D",
        Command::new("nm")
            .args(["-D", "--defined-only"])
            .arg(built_lib())
            .output()
            .unwrap(),
    );
    let mut exported: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| match l.split_whitespace().collect::<Vec<_>>()[..] {
            [_, "T", name] if name.starts_with("fieldstore_") => Some(name.to_string()),
            _ => None,
        })
        .collect();
    exported.sort();
    assert_eq!(declared.len(), 16, "{declared:?}");
    assert_eq!(exported, declared);
}
