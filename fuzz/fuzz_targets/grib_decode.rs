#![no_main]
//! Decoding untrusted bytes as one GRIB message: every call fails cleanly or answers with sizes
//! that agree, never a panic or a crash inside ecCodes. The calls are those the Python bindings'
//! `Message` makes: values, coordinates, the grid summary and any key by name.

use fieldstore::grib::Decoded;
use libfuzzer_sys::fuzz_target;

/// Keys whose values ecCodes computes from the data, the bitmap or the grid's rows.
const KEYS: [&str; 9] = [
    "shortName",
    "values",
    "bitmap",
    "codedValues",
    "maximum",
    "average",
    "numberOfMissing",
    "pl",
    "gridName",
];

fuzz_target!(|data: &[u8]| {
    // ecCodes' crashes kill the process past libFuzzer (Rust's SIGSEGV handler takes the
    // signal), so no input is saved: FIELDSTORE_FUZZ_LAST=FILE keeps the one being run.
    if let Some(p) = std::env::var_os("FIELDSTORE_FUZZ_LAST") {
        let _ = std::fs::write(p, data);
    }
    let Ok(d) = Decoded::new(data) else {
        return;
    };
    if let Ok(n) = d.number_of_values() {
        // Do not allocate what a corrupt header merely announces.
        if n <= 1 << 20 {
            if let Ok(v) = d.values() {
                assert_eq!(v.len(), n);
            }
        }
    }
    if let Ok(n) = d.number_of_points() {
        if n <= 1 << 20 {
            if let Ok(lat) = d.latitudes() {
                assert_eq!(lat.len(), n);
            }
            if let Ok(lon) = d.longitudes() {
                assert_eq!(lon.len(), n);
            }
        }
    }
    // The grid summary and the values-derived keys decode every point too.
    if d.number_of_values().is_ok_and(|n| n > 1 << 20) {
        return;
    }
    let _ = d.grid();
    // The first byte picks a key, so that the corpus covers each without paying for all.
    let key = KEYS[usize::from(data.get(20).copied().unwrap_or(0)) % KEYS.len()];
    let _ = d.get(key);
    let _ = d.mars_keys();
});
