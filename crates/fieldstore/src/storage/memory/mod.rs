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
use crate::model::config::{MemoryConfig, WhenFull};
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
        MemoryBackend::open_with(
            name,
            Limits {
                capacity,
                when_full: WhenFull::Error,
                retain_databases: None,
            },
        )
    }

    /// The store an `engine: memory` config names, with its limits.
    pub fn from_config(m: &MemoryConfig) -> Result<MemoryBackend, StorageError> {
        MemoryBackend::open_with(
            m.shared_name().as_deref(),
            Limits {
                capacity: m.capacity,
                when_full: m.when_full,
                retain_databases: m.retain_databases,
            },
        )
    }

    /// Handles sharing a named store must agree on its limits: two configs that disagree would
    /// otherwise see a limit they did not write.
    pub fn open_with(name: Option<&str>, limits: Limits) -> Result<MemoryBackend, StorageError> {
        let Some(name) = name else {
            use std::sync::atomic::{AtomicU64, Ordering};
            static ANON: AtomicU64 = AtomicU64::new(0);
            let n = ANON.fetch_add(1, Ordering::Relaxed);
            return Ok(MemoryBackend {
                shared: Arc::new(Shared::new(format!("anon-{n}"), limits)),
            });
        };
        let mut reg = registry().lock().map_err(|_| StorageError::Config {
            detail: "the memory store registry is unusable (a thread panicked holding it)".into(),
        })?;
        if let Some(s) = reg.get(name) {
            if s.limits != limits {
                return Err(StorageError::Config {
                    detail: format!(
                        "memory store '{name}' is already open in this process with {}, not {}: give both configs the same capacity, when_full, block_timeout and retain, or another name",
                        s.limits, limits
                    ),
                });
            }
            return Ok(MemoryBackend { shared: s.clone() });
        }
        let s = Arc::new(Shared::new(name.to_string(), limits));
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
        self.shared.limits.capacity
    }
}

/// What bounds a memory store: its bytes, what an archive that does not fit does, and how many
/// databases it keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub capacity: u64,
    pub when_full: WhenFull,
    pub retain_databases: Option<usize>,
}

impl std::fmt::Display for Limits {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "capacity {} bytes", self.capacity)?;
        match self.when_full {
            WhenFull::Error => write!(f, ", when_full: error")?,
            WhenFull::Block { timeout } => {
                write!(f, ", when_full: block ({} ms)", timeout.as_millis())?
            }
        }
        match self.retain_databases {
            Some(n) => write!(f, ", retain {n} databases"),
            None => write!(f, ", no retention"),
        }
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
mod limits_tests;
#[cfg(test)]
mod tests;
