//! Storage, as two traits (as in newer FDB5): a [`Catalogue`] knows which fields exist and where
//! their bytes are; a [`Store`] holds the bytes. A frontend holds one of each, so catalogues and
//! stores can be mixed (a toc catalogue over POSIX files today; object storage later).
//!
//! The toc catalogue keeps one directory per database on a POSIX filesystem (see
//! `docs/toc-format.md`); the POSIX store appends bytes to per-writer files in that directory.

pub mod adopted;
pub(crate) mod catalogue;
pub(crate) mod dump;
pub(crate) mod error;
pub mod fdb5;
pub mod fs;
pub mod history;
pub mod keys_release;
pub mod memory;
pub(crate) mod names;
pub(crate) mod posix;
pub mod s3;
pub mod sidecar;
pub(crate) mod store;
pub mod tier_move;
pub mod tiered;
pub mod toc;

pub use catalogue::{
    Catalogue, CatalogueReader, CatalogueWriter, CheckFinding, CompactReport, DbStats, EntryIter,
    FindingKind, IndexSummary, ListedEntry, PurgeReport,
};
pub use dump::{CatalogueDump, DumpRecord};
pub use error::StorageError;
pub use memory::{Limits as MemoryLimits, MemoryBackend, MemoryCatalogue, MemoryStore};
pub use posix::{adopted_object, PosixStore};
pub(crate) use store::read_exactly;
pub use store::{FieldRef, ObjectReader, SideMap, Store, StoreWriter};
pub use toc::TocCatalogue;

use crate::model::Key;

/// One database as the catalogue identifies it: its key, and the catalogue's own name for it.
/// The id is opaque to everyone but the catalogue (and a store that keeps its objects beside the
/// catalogue's files); it is also what users see as the database's location (the directory for
/// toc, `memory://...` for a memory catalogue).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DbRef {
    pub key: Key,
    pub id: String,
}
