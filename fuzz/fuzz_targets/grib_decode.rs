#![no_main]
//! Decoding untrusted bytes as one GRIB message: every call fails cleanly or answers with sizes
//! that agree, never a panic or a crash inside ecCodes.

use fieldstore::grib::Decoded;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
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
        }
    }
    let _ = d.grid();
    let _ = d.get("shortName");
    let _ = d.mars_keys();
});
