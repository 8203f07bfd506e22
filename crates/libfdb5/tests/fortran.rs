//! Builds the Fortran example (examples/fortran: the `fdb` module over iso_c_binding and a
//! program using it) with gfortran against the built libfdb5.so, and runs it on a temporary
//! store: it archives fields with keys, lists them and retrieves each, checking the bytes. Then
//! builds it against upstream FDB5 5.25 (PyPI `fdb5lib`, in target/py-venv-ref) and runs that
//! binary on FDB5 and, unchanged, on fieldstore's libfdb5.so.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

mod support;
use support::{upstream_fdb5, FDB5_SCHEMA};

const STEPS: [&str; 3] = ["0", "6", "12"];

fn lib_dir() -> PathBuf {
    support::built_lib_dir("libfdb5.so")
}

fn gfortran() -> Option<String> {
    let fc = std::env::var("FC").unwrap_or_else(|_| "gfortran".into());
    let found = Command::new(&fc).arg("--version").output();
    found.is_ok_and(|o| o.status.success()).then_some(fc)
}

/// Says the test is skipped for lack of `missing`; fails instead under CI=true, where
/// scripts/install-deps --tests installs it.
fn skip(test: &str, missing: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "{test}: {missing} not found, and CI=true: scripts/install-deps --tests installs it"
        );
    }
    let _ = writeln!(
        std::io::stderr(),
        "SKIP {test}: {missing} not found (scripts/install-deps --tests installs it)"
    );
}

/// Fields as the example expects them: t (130) on 850 hPa at steps 0, 6, 12, in that order,
/// each with different values so a mix-up shows in the bytes.
fn fields() -> Vec<Vec<u8>> {
    STEPS
        .iter()
        .enumerate()
        .map(|(i, step)| support::field(step, "130", 40 + 10 * i, i as u64))
        .collect()
}

/// Compiles the example into `dir`, linked with `link` (the -L/-l arguments).
fn build(fc: &str, dir: &Path, link: &[&std::ffi::OsStr]) -> PathBuf {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fortran");
    let exe = dir.join("archive_list_retrieve");
    let out = Command::new(fc)
        .args(["-std=f2008", "-Wall", "-Wextra", "-Werror", "-J"])
        .arg(dir)
        .arg("-o")
        .arg(&exe)
        .arg(examples.join("fdb.f90"))
        .arg(examples.join("archive_list_retrieve.f90"))
        .args(link)
        .output()
        .expect("run gfortran");
    assert!(
        out.status.success(),
        "building the Fortran example failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Runs the example on a new store under `dir`; its stdout, after checking it succeeded.
fn run(exe: &Path, dir: &Path, grib: &Path, env: &[(&str, &std::ffi::OsStr)]) -> String {
    let root = dir.join("root");
    std::fs::create_dir(&root).unwrap();
    let out = Command::new(exe)
        .arg(&root)
        .arg(grib)
        .envs(env.iter().copied())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Fortran example failed:\n{stdout}\n{stderr}"
    );
    stdout
}

/// The listed (step, length) pairs, in step order.
fn listed(stdout: &str) -> Vec<(String, String)> {
    let mut listed: Vec<(String, String)> = stdout
        .lines()
        .filter_map(|l| l.strip_prefix("listed step="))
        .map(|l| {
            let (step, rest) = l.split_once(" length=").unwrap();
            (
                step.to_string(),
                rest.split(' ').next().unwrap().to_string(),
            )
        })
        .collect();
    listed.sort_by_key(|(step, _)| step.parse::<u32>().unwrap());
    listed
}

/// The data files under a store root, concatenated.
fn stored_bytes(root: &Path) -> Vec<u8> {
    let mut stored = Vec::new();
    for db in std::fs::read_dir(root).unwrap() {
        for f in std::fs::read_dir(db.unwrap().path()).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|e| e == "data") {
                stored.extend(std::fs::read(p).unwrap());
            }
        }
    }
    stored
}

#[test]
fn fortran_example_archives_lists_and_retrieves() {
    let Some(fc) = gfortran() else {
        skip("fortran_example_archives_lists_and_retrieves", "gfortran");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let fields = fields();
    let grib = dir.path().join("t850.grib");
    std::fs::write(&grib, fields.concat()).unwrap();

    let lib = lib_dir();
    let exe = build(
        &fc,
        dir.path(),
        &["-L".as_ref(), lib.as_os_str(), "-lfdb5".as_ref()],
    );
    let stdout = run(
        &exe,
        dir.path(),
        &grib,
        &[("LD_LIBRARY_PATH", lib.as_os_str())],
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("library: FDB5 API 5.") && lines[0].contains("(fieldstore-"),
        "{stdout}"
    );
    assert_eq!(lines[1], "archived 3 fields");
    let expected: Vec<(String, String)> = STEPS
        .iter()
        .zip(&fields)
        .map(|(s, f)| (s.to_string(), f.len().to_string()))
        .collect();
    assert_eq!(listed(&stdout), expected, "{stdout}");
    for (step, field) in STEPS.iter().zip(&fields) {
        let line = format!("retrieved step={step}: {} bytes, as archived", field.len());
        assert!(lines.contains(&line.as_str()), "no '{line}' in:\n{stdout}");
    }
    assert!(
        stdout.contains("incomplete key refused: ") && stdout.contains("missing"),
        "{stdout}"
    );
    assert_eq!(lines.last(), Some(&"OK"));
    // The store holds what the program archived.
    let stored = stored_bytes(&dir.path().join("root"));
    for field in &fields {
        assert!(
            stored.windows(field.len()).any(|w| w == field.as_slice()),
            "a field's bytes are not in the store"
        );
    }
}

#[test]
fn fortran_example_built_against_upstream_fdb5_runs_unchanged_on_fieldstore() {
    let test = "fortran_example_built_against_upstream_fdb5_runs_unchanged_on_fieldstore";
    let Some(fc) = gfortran() else {
        skip(test, "gfortran");
        return;
    };
    let Some(upstream) = upstream_fdb5() else {
        // Made by scripts/python-test, which scripts/test runs after the cargo tests, then
        // runs this test again with FIELDSTORE_NEED_FDB5LIB=1: absent then is a failure.
        assert!(
            std::env::var_os("FIELDSTORE_NEED_FDB5LIB").is_none(),
            "{test}: FIELDSTORE_NEED_FDB5LIB is set but target/py-venv-ref has no fdb5lib"
        );
        let _ = writeln!(
            std::io::stderr(),
            "SKIP {test}: upstream FDB5 (PyPI fdb5lib in target/py-venv-ref, made by scripts/python-test) not found"
        );
        return;
    };
    if !Path::new(FDB5_SCHEMA).exists() {
        skip(test, "FDB5's schema /etc/fdb/schema (Debian's fdb5)");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let fields = fields();
    let grib = dir.path().join("t850.grib");
    std::fs::write(&grib, fields.concat()).unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join("etc/fdb")).unwrap();
    std::fs::copy(FDB5_SCHEMA, home.join("etc/fdb/schema")).unwrap();

    // Linked against upstream's libfdb5.so only; its own needs (eckit, metkit) are found at
    // run time.
    let build_dir = dir.path().join("build");
    std::fs::create_dir(&build_dir).unwrap();
    let exe = build(
        &fc,
        &build_dir,
        &[
            "-L".as_ref(),
            upstream[0].as_os_str(),
            "-lfdb5".as_ref(),
            "-Wl,--allow-shlib-undefined".as_ref(),
        ],
    );
    let upstream_path = std::env::join_paths(&upstream).unwrap();
    let on_fdb5_dir = dir.path().join("fdb5");
    std::fs::create_dir(&on_fdb5_dir).unwrap();
    let on_fdb5 = run(
        &exe,
        &on_fdb5_dir,
        &grib,
        &[
            ("LD_LIBRARY_PATH", upstream_path.as_os_str()),
            ("FDB_HOME", home.as_os_str()),
        ],
    );

    let lib = lib_dir();
    let ldd = Command::new("ldd")
        .arg(&exe)
        .env("LD_LIBRARY_PATH", &lib)
        .output()
        .unwrap();
    let ldd = String::from_utf8_lossy(&ldd.stdout);
    let resolved = ldd.lines().find(|l| l.contains("libfdb5.so")).unwrap_or("");
    assert!(
        resolved.contains(&*lib.to_string_lossy()),
        "libfdb5.so not resolved to fieldstore's: {resolved}"
    );
    let on_fieldstore_dir = dir.path().join("fieldstore");
    std::fs::create_dir(&on_fieldstore_dir).unwrap();
    let on_fieldstore = run(
        &exe,
        &on_fieldstore_dir,
        &grib,
        &[("LD_LIBRARY_PATH", lib.as_os_str())],
    );

    assert!(on_fdb5
        .lines()
        .next()
        .unwrap()
        .starts_with("library: FDB5 API 5."));
    assert!(on_fieldstore.contains("(fieldstore-"), "{on_fieldstore}");
    // Same fields listed with the same lengths, the same bytes retrieved; file names differ.
    assert_eq!(listed(&on_fdb5), listed(&on_fieldstore));
    assert_eq!(listed(&on_fieldstore).len(), fields.len());
    let retrieved = |out: &str| -> Vec<String> {
        out.lines()
            .filter(|l| l.starts_with("retrieved "))
            .map(String::from)
            .collect()
    };
    assert_eq!(retrieved(&on_fdb5), retrieved(&on_fieldstore));
    assert!(on_fdb5.ends_with("OK\n") && on_fieldstore.ends_with("OK\n"));
}
