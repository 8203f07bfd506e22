#![no_main]
//! Any string as a parameter name reaches ecCodes' parameter lookup only if it could be a short
//! name, and never crashes it: the answer is a paramId (digits) or unknown.

use fieldstore::grib::params::param_id;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(name) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(Some(id)) = param_id(name) {
        assert!(
            !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()),
            "{name:?} -> {id:?}"
        );
    }
});
