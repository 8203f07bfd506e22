#![no_main]
//! `fieldstore sample`'s options reach ecCodes as key values: any of them, with any point count,
//! makes a field or fails cleanly.

use fieldstore::grib::sample::make_field;
use libfuzzer_sys::fuzz_target;

const KEYS: [&str; 11] = [
    "class", "stream", "type", "expver", "date", "time", "step", "levtype", "levelist", "param",
    "number",
];

fuzz_target!(|data: &[u8]| {
    let Some((&points, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let keys: Vec<(&str, &str)> = KEYS.iter().copied().zip(text.split('\u{0}')).collect();
    let _ = make_field(&keys, usize::from(points) * 7, 1);
});
