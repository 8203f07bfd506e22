//! The toc backend: a directory per database holding an append-only journal (`toc`, the single
//! commit point), per-writer data files and immutable per-flush index files.

mod catalogue;
mod index;
mod journal;
pub mod maintenance;
mod reader;
mod writer;

pub use catalogue::TocCatalogue;
pub use index::{IndexEntry, IndexFile};
pub use journal::FORMAT_VERSION;
pub use reader::{datum_key_of, DbReader};
pub use writer::DbWriter;

/// A unique suffix for files this process creates: host, pid, time, counter.
pub(crate) fn unique_name() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().replace(['/', ':', '.'], "-"))
        .unwrap_or_else(|_| "host".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{host}.{}.{nanos}.{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}
