#![no_main]
//! FDB5 toc files (the `toc` of a database and its sub-tocs) from untrusted bytes: decoding
//! returns the records or a corrupt error naming an offset, never panics, and never allocates
//! what a damaged header or string length merely announces.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = fieldstore::storage::fdb5::decode::toc_records(data);
});
