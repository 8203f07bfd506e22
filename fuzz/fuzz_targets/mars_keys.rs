#![no_main]
//! The native MARS key reader on untrusted bytes: it never panics, and when it answers, ecCodes
//! reads the same message and gives exactly the same keys (the native reader is only ever sure,
//! never a guess). Seeds: any GRIB message (tests/data/real-grib, `fieldstore sample`).

use fieldstore::grib::eccodes_mars_keys;
use fieldstore::grib::native::mars::mars_keys;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // As in grib_decode: FIELDSTORE_FUZZ_LAST=FILE keeps the input being run, should ecCodes
    // crash the process past libFuzzer.
    if let Some(p) = std::env::var_os("FIELDSTORE_FUZZ_LAST") {
        let _ = std::fs::write(p, data);
    }
    let Ok(native) = mars_keys(data) else {
        return;
    };
    match eccodes_mars_keys(data) {
        Ok(ecc) => assert_eq!(native, ecc, "native keys differ from ecCodes'"),
        Err(e) => panic!("native keys {native} where ecCodes fails: {e}"),
    }
});
