#![no_main]
//! GRIB framing of untrusted bytes: never panics, never allocates what the bytes merely
//! announce, and framing in place (a mapped file) agrees with framing a stream, down to what
//! each skipped between messages.

use fieldstore::grib::{MessageReader, SliceMessages};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut slices = Vec::new();
    let mut slice_failed = false;
    let mut framer = SliceMessages::new(data, "fuzz");
    for m in framer.by_ref() {
        match m {
            Ok((number, offset, bytes)) => slices.push((number, offset, bytes.to_vec())),
            Err(_) => slice_failed = true,
        }
    }
    let mut streamed = Vec::new();
    let mut stream_failed = false;
    let mut reader = MessageReader::new(data, "fuzz");
    for m in reader.by_ref() {
        match m {
            Ok(m) => streamed.push((m.number, m.offset, m.bytes)),
            Err(_) => stream_failed = true,
        }
    }
    assert_eq!(slices, streamed);
    assert_eq!(slice_failed, stream_failed);
    assert_eq!(framer.skipped(), reader.skipped());
});
