#![no_main]
//! Any text as a config file: parsed or refused with an error, never a panic.

use fieldstore::model::config::from_yaml_str;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = from_yaml_str(text, "fuzz");
});
