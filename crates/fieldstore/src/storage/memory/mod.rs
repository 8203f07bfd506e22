//! The memory backend: a catalogue and a store in RAM, for tests, streaming consumers and a
//! server used as an in-memory exchange (`engine: memory`). Same semantics as toc; nothing
//! survives the process.
//!
//! Capacity is explicit: every stored field reserves its bytes plus [`ENTRY_OVERHEAD`] before
//! it is copied, so a write that does not fit fails at archive time with
//! [`StorageError::Full`] and nothing is half-stored. Wipe, purge and abandoned batches give the
//! bytes back.
//!
//! Readers see immutable snapshots (`Arc`s swapped on commit), so a reader never blocks a
//! writer; field bytes are copied outside every lock but one object's own.

mod catalogue;
mod history;
mod state;
mod store;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

pub use catalogue::MemoryCatalogue;
pub use store::MemoryStore;

use super::{DbRef, StorageError};
use crate::model::Key;
use state::Shared;

/// What a store holds when the config sets no `memory: {capacity: ...}`.
pub const DEFAULT_CAPACITY: u64 = crate::model::config::MemoryConfig::DEFAULT_CAPACITY;

/// Bytes counted per stored field besides its own: the catalogue entry and bookkeeping, so a
/// flood of tiny fields is bounded too.
pub const ENTRY_OVERHEAD: u64 = 128;

/// One memory store: its catalogue and its store share it, so wiping through the catalogue
/// frees the store's bytes.
#[derive(Clone)]
pub struct MemoryBackend {
    shared: Arc<Shared>,
}

/// Named stores of this process: handles opened with the same name see the same data.
fn registry() -> &'static Mutex<HashMap<String, Arc<Shared>>> {
    static REGISTRY: OnceLock<Mutex<HashMap<String, Arc<Shared>>>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(HashMap::new()))
}

impl MemoryBackend {
    /// A named store is shared by every handle of the process that names it (and lives as long
    /// as the process); an unnamed one belongs to this backend alone.
    pub fn open(name: Option<&str>, capacity: u64) -> Result<MemoryBackend, StorageError> {
        let Some(name) = name else {
            use std::sync::atomic::{AtomicU64, Ordering};
            static ANON: AtomicU64 = AtomicU64::new(0);
            let n = ANON.fetch_add(1, Ordering::Relaxed);
            return Ok(MemoryBackend {
                shared: Arc::new(Shared::new(format!("anon-{n}"), capacity)),
            });
        };
        let mut reg = registry().lock().map_err(|_| StorageError::Config {
            detail: "the memory store registry is unusable (a thread panicked holding it)".into(),
        })?;
        if let Some(s) = reg.get(name) {
            if s.capacity != capacity {
                return Err(StorageError::Config {
                    detail: format!(
                        "memory store '{name}' is already open in this process with capacity {} bytes, not {capacity}: give both configs the same capacity, or another name",
                        s.capacity
                    ),
                });
            }
            return Ok(MemoryBackend { shared: s.clone() });
        }
        let s = Arc::new(Shared::new(name.to_string(), capacity));
        reg.insert(name.to_string(), s.clone());
        Ok(MemoryBackend { shared: s })
    }

    pub fn catalogue(&self) -> MemoryCatalogue {
        MemoryCatalogue::new(self.shared.clone())
    }

    pub fn store(&self) -> MemoryStore {
        MemoryStore::new(self.shared.clone())
    }

    /// Bytes held now (fields and their overhead).
    pub fn used(&self) -> u64 {
        self.shared.used()
    }

    pub fn capacity(&self) -> u64 {
        self.shared.capacity
    }
}

/// The one place a memory database's [`DbRef`] is made: databases are identified by key alone.
fn db_ref(store_name: &str, key: &Key) -> DbRef {
    DbRef {
        key: key.clone(),
        id: format!("memory://{store_name}/{key}"),
    }
}

/// Sizes as people read them, for error messages.
pub(crate) fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

#[cfg(test)]
mod tests;
