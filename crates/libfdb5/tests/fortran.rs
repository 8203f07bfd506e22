//! Builds the Fortran example (examples/fortran: the `fdb` module over iso_c_binding and a
//! program using it) with gfortran against the built libfdb5.so, and runs it on a temporary
//! store: it archives fields with keys, lists them and retrieves each, checking the bytes.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;

use fieldstore::grib::sample::make_field;

const STEPS: [&str; 3] = ["0", "6", "12"];

/// Where cargo put libfdb5.so for this test: target/<profile>/deps, beside the test binary
/// (target/<profile> after a plain `cargo build`).
fn lib_dir() -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    if deps.join("libfdb5.so").exists() {
        return deps;
    }
    deps.parent().unwrap().to_path_buf()
}

fn gfortran() -> Option<String> {
    let fc = std::env::var("FC").unwrap_or_else(|_| "gfortran".into());
    let found = Command::new(&fc).arg("--version").output();
    found.is_ok_and(|o| o.status.success()).then_some(fc)
}

/// Says the test is skipped for lack of gfortran; fails instead under CI=true, where
/// scripts/install-deps --tests installs it.
fn skip(test: &str) {
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("{test}: gfortran not found, and CI=true: scripts/install-deps --tests installs it");
    }
    let _ = writeln!(
        std::io::stderr(),
        "SKIP {test}: gfortran not found (scripts/install-deps --tests installs it)"
    );
}

/// Fields as the example expects them: t (130) on 850 hPa at steps 0, 6, 12, in that order,
/// each with different values so a mix-up shows in the bytes.
fn fields() -> Vec<Vec<u8>> {
    STEPS
        .iter()
        .enumerate()
        .map(|(i, step)| {
            let keys = [
                ("class", "od"),
                ("stream", "oper"),
                ("type", "fc"),
                ("expver", "0001"),
                ("date", "20261122"),
                ("time", "1200"),
                ("step", *step),
                ("levtype", "pl"),
                ("levelist", "850"),
                ("param", "130"),
            ];
            make_field(&keys, 40 + 10 * i, i as u64).unwrap()
        })
        .collect()
}

fn build(fc: &str, dir: &Path) -> PathBuf {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/fortran");
    let exe = dir.join("archive_list_retrieve");
    let out = Command::new(fc)
        .args(["-std=f2008", "-Wall", "-Wextra", "-Werror", "-J"])
        .arg(dir)
        .arg("-o")
        .arg(&exe)
        .arg(examples.join("fdb.f90"))
        .arg(examples.join("archive_list_retrieve.f90"))
        .arg("-L")
        .arg(lib_dir())
        .arg("-lfdb5")
        .output()
        .expect("run gfortran");
    assert!(
        out.status.success(),
        "building the Fortran example failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

#[test]
fn fortran_example_archives_lists_and_retrieves() {
    let Some(fc) = gfortran() else {
        skip("fortran_example_archives_lists_and_retrieves");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("root");
    std::fs::create_dir(&root).unwrap();
    let fields = fields();
    let grib = dir.path().join("t850.grib");
    std::fs::write(&grib, fields.concat()).unwrap();

    let exe = build(&fc, dir.path());
    let out = Command::new(&exe)
        .arg(&root)
        .arg(&grib)
        .env("LD_LIBRARY_PATH", lib_dir())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Fortran example failed:\n{stdout}\n{stderr}"
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(
        lines[0].starts_with("library: FDB5 API 5.") && lines[0].contains("(fieldstore-"),
        "{stdout}"
    );
    assert_eq!(lines[1], "archived 3 fields");
    let mut listed: Vec<(String, String)> = lines
        .iter()
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
    let expected: Vec<(String, String)> = STEPS
        .iter()
        .zip(&fields)
        .map(|(s, f)| (s.to_string(), f.len().to_string()))
        .collect();
    assert_eq!(listed, expected, "{stdout}");
    for (step, field) in STEPS.iter().zip(&fields) {
        let line = format!("retrieved step={step}: {} bytes, as archived", field.len());
        assert!(lines.contains(&line.as_str()), "no '{line}' in:\n{stdout}");
    }
    assert!(
        stdout.contains("incomplete key refused: ") && stdout.contains("missing"),
        "{stdout}"
    );
    assert_eq!(lines.last(), Some(&"OK"));
    // The store holds what the program archived: the data files under the root hold every
    // field's bytes.
    let mut stored = Vec::new();
    for db in std::fs::read_dir(&root).unwrap() {
        for f in std::fs::read_dir(db.unwrap().path()).unwrap() {
            let p = f.unwrap().path();
            if p.extension().is_some_and(|e| e == "data") {
                stored.extend(std::fs::read(p).unwrap());
            }
        }
    }
    for field in &fields {
        assert!(
            stored.windows(field.len()).any(|w| w == field.as_slice()),
            "a field's bytes are not in the store"
        );
    }
}
