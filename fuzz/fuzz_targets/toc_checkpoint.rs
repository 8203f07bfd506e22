#![no_main]
//! Journal checkpoints read from disk: whatever the bytes, decoding refuses or succeeds, never
//! panics, and never allocates what a damaged count merely announces. The input is tried as a
//! whole file and as a payload framed with a matching checksum, so the fuzzer reaches the
//! payload's decoder instead of stopping at the checksum.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = fieldstore::storage::toc::decode_checkpoint(data);
    let mut framed = Vec::with_capacity(20 + data.len());
    framed.extend_from_slice(b"FSCK");
    framed.extend_from_slice(&1u32.to_le_bytes());
    framed.extend_from_slice(&(data.len() as u64).to_le_bytes());
    framed.extend_from_slice(&fieldstore::checksum::crc32c(data).to_le_bytes());
    framed.extend_from_slice(data);
    let _ = fieldstore::storage::toc::decode_checkpoint(&framed);
});
