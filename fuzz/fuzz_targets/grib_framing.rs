#![no_main]
//! GRIB framing of untrusted bytes: never panics, never allocates what the bytes merely announce.

use fieldstore::grib::{split_slice, MessageReader};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = split_slice(data, "fuzz");
    for m in MessageReader::new(data, "fuzz") {
        if m.is_err() {
            break;
        }
    }
});
