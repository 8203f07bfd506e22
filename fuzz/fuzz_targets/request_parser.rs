#![no_main]
//! The MARS request parser and range expansion must never panic, and what parses must print back
//! to something that parses to the same request.

use fieldstore::model::request::{parse_request, parse_requests};
use fieldstore::model::types::Context;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = parse_requests(text);
    if let Ok(r) = parse_request(text) {
        let printed = r.to_string();
        let back = parse_request(&printed).expect("printed request must parse");
        assert_eq!(back.to_string(), printed);
        let _ = r.expand_ranges(&Context::default());
    }
});
