//! What the C and Fortran tests of both libraries share (the 5.10 crate includes this file by
//! path): where cargo put a built library, and the fields the programs archive.
#![allow(dead_code)]

use std::path::PathBuf;

use fieldstore::grib::sample::make_field;

/// The directory holding `file` (a cdylib of this workspace): target/<profile>/deps, beside the
/// test binary, or target/<profile> after a plain `cargo build`.
pub fn built_lib_dir(file: &str) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap().to_path_buf();
    if deps.join(file).exists() {
        return deps;
    }
    let dir = deps.parent().unwrap().to_path_buf();
    assert!(
        dir.join(file).exists(),
        "{file} not built in {}",
        dir.display()
    );
    dir
}

/// One field of temperature-like data on 850 hPa of the 2026-11-22 12 UTC oper forecast;
/// `seed` varies the values so that a mix-up shows in the bytes.
pub fn field(step: &str, param: &str, points: usize, seed: u64) -> Vec<u8> {
    let keys = [
        ("class", "od"),
        ("stream", "oper"),
        ("type", "fc"),
        ("expver", "0001"),
        ("date", "20261122"),
        ("time", "1200"),
        ("step", step),
        ("levtype", "pl"),
        ("levelist", "850"),
        ("param", param),
    ];
    make_field(&keys, points, seed).unwrap()
}

/// Param 130 at steps 0 and 6, param 131 at step 0.
pub fn three_fields() -> Vec<Vec<u8>> {
    [("0", "130"), ("6", "130"), ("0", "131")]
        .iter()
        .enumerate()
        .map(|(i, (step, param))| field(step, param, 50, i as u64))
        .collect()
}

/// Upstream FDB5's libraries from PyPI (`fdb5lib` and what it needs) in the reference
/// virtualenv scripts/python-test makes: the library directories, fdb5lib's first.
pub fn upstream_fdb5() -> Option<Vec<PathBuf>> {
    let venv_lib =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/py-venv-ref/lib");
    let site = std::fs::read_dir(&venv_lib)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.join("fdb5lib/lib64/libfdb5.so").exists())?;
    let mut dirs = vec![site.join("fdb5lib/lib64")];
    for e in std::fs::read_dir(&site).ok()?.filter_map(|e| e.ok()) {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if name.ends_with(".libs") {
            dirs.push(p);
        } else if name.ends_with("lib") && name != "fdb5lib" && p.join("lib64").is_dir() {
            dirs.push(p.join("lib64"));
        }
    }
    Some(dirs)
}

/// FDB5's schema as Debian's fdb5 package installs it (upstream's pip build ships none).
pub const FDB5_SCHEMA: &str = "/etc/fdb/schema";
