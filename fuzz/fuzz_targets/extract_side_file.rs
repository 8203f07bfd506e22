#![no_main]
//! A side file of extraction information from disk (`<datafile>.extract`), damaged or hostile:
//! the records read back are whole ones that encode and read back the same, never a panic or
//! an allocation beyond the input.

use fieldstore::storage::sidecar::{decode, encode};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let entries = decode(data);
    // Each record read is one a writer could have written, and reads back the same.
    let again: Vec<u8> = entries.iter().flat_map(encode).collect();
    assert_eq!(decode(&again), entries);
});
