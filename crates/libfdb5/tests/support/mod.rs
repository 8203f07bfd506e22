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
