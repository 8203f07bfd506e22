//! §2.9: a large retrieve streams; reading it a KiB at a time never holds it all.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::data::{key, retrieve_request};
use crate::harness::Env;
use crate::ops::retrieve_chunked;

/// Counts live heap bytes and their peak, process-wide.
pub struct CountingAlloc;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            let now = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) };
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }
}

/// 8 MiB in all; today the heap grows by about 20 KB reading it from a local store and 0.9 MB
/// through a server (64 KiB chunks in a bounded queue); the bound is a quarter of the result.
const FIELD: usize = 1 << 20;
const FIELDS: u32 = 8;

#[test]
fn a_large_retrieve_streams_in_bounded_memory() {
    crate::harness::run_alone("a_large_retrieve_streams_in_bounded_memory", large_retrieve);
}

fn large_retrieve(env: &Env) {
    let fdb = env.handle();
    let steps: Vec<String> = (0..FIELDS).map(|s| s.to_string()).collect();
    for s in 0..FIELDS {
        let k = key("20261122", "fc", s, "130");
        let data: Vec<u8> = (0..FIELD).map(|i| (i as u32 ^ s) as u8).collect();
        fdb.archive(Some(&k), &data).expect("archive a large field");
    }
    fdb.flush().expect("flush");
    drop(fdb);
    let fdb = env.handle();
    let req = retrieve_request("20261122", "fc", &steps.join("/"), "130");
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    // One hash per field (fields are whole multiples of the read size), compared as a set:
    // a store answering child by child may reorder them.
    let mut hashes = Vec::with_capacity(FIELDS as usize);
    let mut hash = 0u64;
    let mut in_field = 0;
    let total = retrieve_chunked(fdb.as_ref(), &req, 1024, |b| {
        hash = b
            .iter()
            .fold(hash, |c, &x| c.wrapping_mul(31).wrapping_add(u64::from(x)));
        in_field += b.len();
        if in_field >= FIELD {
            hashes.push(hash);
            (hash, in_field) = (0, 0);
        }
    })
    .expect("retrieve");
    let grew = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    assert_eq!(total, FIELD as u64 * u64::from(FIELDS), "bytes retrieved");
    let result = FIELD * FIELDS as usize;
    assert!(
        grew < result / 4,
        "reading a {result}-byte retrieve 1 KiB at a time grew the heap by {grew} bytes"
    );
    let mut expected: Vec<u64> = (0..FIELDS)
        .map(|s| {
            (0..FIELD)
                .map(|i| (i as u32 ^ s) as u8)
                .fold(0u64, |c, x| c.wrapping_mul(31).wrapping_add(u64::from(x)))
        })
        .collect();
    expected.sort_unstable();
    hashes.sort_unstable();
    assert_eq!(
        hashes, expected,
        "the streamed fields differ from those archived"
    );
}
