#![no_main]
//! Wire frames from untrusted peers: the decoder never panics, and never allocates what a header
//! merely announces (lengths up to 2^64 are tried under a generous limit).

use fieldstore::remote::protocol::{
    decode_archive, decode_archive_handover, decode_frame, from_json, read_frame, read_frame_to,
    split_notice_handover, Hello, Query, WireListElement,
};
use libfuzzer_sys::fuzz_target;

fn payloads(payload: &[u8]) {
    let _ = decode_archive(payload);
    let _ = decode_archive_handover(payload);
    let _ = split_notice_handover(payload);
    let _ = from_json::<Hello>("hello", payload);
    let _ = from_json::<Query>("query", payload).map(|q| q.request.to_request());
    let _ = from_json::<Vec<WireListElement>>("list", payload);
}

fuzz_target!(|data: &[u8]| {
    // The payload decoders directly: random bytes rarely get past a frame's checksum.
    payloads(data);
    let _ = decode_frame(data, 1 << 20);
    let mut r = data;
    let mut payload = Vec::new();
    while let Ok(h) = read_frame(&mut r, u64::MAX, &mut payload) {
        assert_eq!(payload.len() as u64, h.length);
        payloads(&payload);
    }
    assert!(payload.capacity() <= data.len().max(16 << 20));
    // Payloads that fit land in the caller's buffer instead, checked the same way.
    let mut r = data;
    let mut direct = [0u8; 4096];
    while let Ok((h, landed)) = read_frame_to(&mut r, u64::MAX, &mut direct, &mut payload) {
        let body = if landed {
            &direct[..h.length as usize]
        } else {
            &payload[..]
        };
        assert_eq!(body.len() as u64, h.length);
        payloads(body);
    }
});
