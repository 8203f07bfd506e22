//! The conformance suite: the semantics of DESIGN.md §2, written once and run against every
//! store (`backends::ALL`). **A backend or frontend is done when it passes this suite.**
//!
//! Adding a backend is one entry in [`backends::ALL`]: a name and a function that builds the
//! store in a temporary directory and hands out handles onto it (every handle sees what any
//! other flushed). A store a config describes needs only its YAML, e.g. for the memory backend
//! `Backend { name: "memory", open: |dir| from_yaml(format!("{{engine: memory, ...}}")), .. }`
//! (handles of a store that lives in one process must share it: hand out clones of one `Arc`).
//!
//! Run: `cargo test -p fieldstore --test conformance` (debug is fine; under a minute);
//! `CONFORMANCE_BACKENDS=memory,local` runs only the backends whose names contain one of the
//! words (while working on one; CI runs them all). The S3
//! backends run on one MinIO per test process, a fresh bucket per case; without a MinIO binary
//! (`scripts/minio install`) they print `SKIP` and are left out, and under `CI=true` they fail.
//! Where a store legitimately behaves differently (a `select` retrieves lane by
//! lane), the entry names the [`backends::Quirk`] and the case checks the weaker promise
//! explicitly. A case that fails on one backend because of a real bug stays in the suite: the
//! entry lists it in `known_bugs` with the reason, and the run prints it loudly instead of
//! passing silently.
//!
//! Each `#[test]` is one case run on every backend in turn; a failure names the case and every
//! backend it failed on. Every call whose result type is still settling (wipe, purge, stats,
//! control, compact, where; the retrieve and list streams) goes through `ops.rs`, so adapting to a
//! new API is a few lines there.

mod backends;
mod control;
mod data;
mod errors;
mod harness;
mod listing;
mod masking;
#[path = "../support/minio.rs"]
mod minio;
mod ops;
mod reader;
mod retrieve;
mod streaming;
mod subscribe;
mod visibility;
mod wipe_purge;

/// The memory-bounded case measures allocations process-wide, so it holds this exclusively
/// and every other case shares it.
#[global_allocator]
static ALLOC: streaming::CountingAlloc = streaming::CountingAlloc;
