//! Builds the C programs in tests/c with the system compiler against the built libfdb5.so and
//! runs them on a temporary store.

use std::io::Write as _;
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

/// Regression: fdb_list took `duplicates` at its word ("list masked copies too"), but FDB5's
/// library (5.11 and later) passes it on as `deduplicate`: true lists each key once, false every
/// copy. So legacy pyfdb's `list(request, True, True)` (earthkit-data's call) showed a replaced
/// field twice on fieldstore and once on FDB5. The same program, built against each library,
/// prints the same counts.
#[test]
fn fdb_list_duplicates_is_fdb5s_deduplicate() {
    let dir = tempfile::tempdir().unwrap();
    let grib = dir.path().join("t850.grib");
    std::fs::write(&grib, support::field("0", "130", 50, 7)).unwrap();
    let exe = dir.path().join("list_duplicates");
    compile("list_duplicates.c", &exe, &[]);
    let run = |exe: &Path, root: &str, env: &[(&str, &std::ffi::OsStr)]| -> String {
        let root = dir.path().join(root);
        std::fs::create_dir(&root).unwrap();
        let out = Command::new(exe)
            .arg(&root)
            .arg(&grib)
            .envs(env.iter().copied())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(
            out.status.success(),
            "list_duplicates failed:\n{stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        stdout
    };
    let len = std::fs::metadata(&grib).unwrap().len();
    let ours = run(&exe, "ours", &[("LD_LIBRARY_PATH", lib_dir().as_os_str())]);
    assert_eq!(
        ours,
        format!(
            "depth=3 duplicates=true: 1 listed, {len} bytes\n\
             depth=3 duplicates=false: 2 listed, {} bytes\n\
             depth=2 duplicates=true: 1 listed\n\
             depth=1 duplicates=true: 1 listed\n\
             OK\n",
            2 * len
        )
    );
    // The same source against upstream FDB5 5.25 (PyPI fdb5lib, made by scripts/python-test).
    let Some(upstream) = support::upstream_fdb5() else {
        let _ = writeln!(
            std::io::stderr(),
            "SKIP fdb_list_duplicates_is_fdb5s_deduplicate against FDB5: upstream FDB5 (PyPI \
             fdb5lib in target/py-venv-ref, made by scripts/python-test) not found"
        );
        return;
    };
    if !Path::new(support::FDB5_SCHEMA).exists() {
        let _ = writeln!(
            std::io::stderr(),
            "SKIP fdb_list_duplicates_is_fdb5s_deduplicate against FDB5: no {}",
            support::FDB5_SCHEMA
        );
        return;
    }
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join("etc/fdb")).unwrap();
    std::fs::copy(support::FDB5_SCHEMA, home.join("etc/fdb/schema")).unwrap();
    let theirs_exe = dir.path().join("list_duplicates_fdb5");
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let status = Command::new("cc")
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&theirs_exe)
        .arg(crate_dir.join("tests/c/list_duplicates.c"))
        .arg("-I")
        .arg(crate_dir.join("include"))
        .arg("-L")
        .arg(&upstream[0])
        .args(["-lfdb5", "-Wl,--allow-shlib-undefined"])
        .status()
        .expect("run cc");
    assert!(status.success(), "compiling against upstream FDB5 failed");
    let path = std::env::join_paths(&upstream).unwrap();
    let theirs = run(
        &theirs_exe,
        "fdb5",
        &[
            ("LD_LIBRARY_PATH", path.as_os_str()),
            ("FDB_HOME", home.as_os_str()),
        ],
    );
    assert_eq!(ours, theirs);
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

#[test]
fn c_program_extracts_values_equal_to_eccodes_through_the_extension_header() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let fields = support::three_fields();
    std::fs::write(dir.path().join("fields.grib"), fields.concat()).unwrap();
    let exe = dir.path().join("test_extract");
    compile("test_extract.c", &exe, &[]);
    let out = Command::new(&exe)
        .arg(&root)
        .arg(dir.path().join("fields.grib"))
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "test_extract failed:\n{stderr}");
    // Each field's values, as ecCodes decodes them, by (step, param).
    let truth: Vec<(String, String, Vec<f64>)> = fields
        .iter()
        .map(|m| {
            let d = fieldstore::grib::Decoded::new(m).unwrap();
            let k = d.mars_keys().unwrap();
            (
                k.get("step").unwrap().to_string(),
                k.get("param").unwrap().to_string(),
                d.values().unwrap(),
            )
        })
        .collect();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let mut current: Option<&Vec<f64>> = None;
    let mut checked = 0;
    for line in stdout.lines() {
        if let Some(key) = line.strip_prefix("field ") {
            let get = |kw: &str| {
                key.trim_matches(|c| c == '{' || c == '}')
                    .split(',')
                    .find_map(|p| p.strip_prefix(&format!("{kw}=")).map(str::to_string))
                    .unwrap()
            };
            let (step, param) = (get("step"), get("param"));
            current = truth
                .iter()
                .find(|(s, p, _)| *s == step && *p == param)
                .map(|t| &t.2);
            assert!(current.is_some(), "no such field: {key}");
            continue;
        }
        let (i, hex) = line.split_once(' ').unwrap();
        let i: usize = i.parse().unwrap();
        let want = current.unwrap()[i];
        assert_eq!(hex, hex_float(want), "point {i}");
        checked += 1;
    }
    assert_eq!(checked, 3 * 13, "{stdout}");
}

/// C's `%a` form of a double, as glibc prints it.
fn hex_float(v: f64) -> String {
    if v == 0.0 {
        return if v.is_sign_negative() {
            "-0x0p+0"
        } else {
            "0x0p+0"
        }
        .into();
    }
    let bits = v.to_bits();
    let sign = if bits >> 63 == 1 { "-" } else { "" };
    let exp = ((bits >> 52) & 0x7ff) as i64;
    let mant = bits & ((1u64 << 52) - 1);
    let mut digits = format!("{mant:013x}");
    while digits.ends_with('0') {
        digits.pop();
    }
    let frac = if digits.is_empty() {
        String::new()
    } else {
        format!(".{digits}")
    };
    format!("{sign}0x1{frac}p{:+}", exp - 1023)
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
    assert_eq!(declared.len(), 16, "{declared:?}");
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
