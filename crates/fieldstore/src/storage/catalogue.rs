//! The Catalogue trait: which fields exist, and where the store keeps their bytes.

use std::collections::{BTreeSet, HashMap};

use super::history::{ChangeWaiter, Commits, HistoryMark, PollingWaiter};
use super::{CatalogueDump, DbRef, FieldRef, StorageError};
use crate::model::Key;

/// One live index as a reader sees it, with the per-keyword value summary that lets `list`,
/// `axes` and `retrieve` skip it without opening it.
#[derive(Debug, Clone)]
pub struct IndexSummary {
    /// The catalogue's name for it (a file name for toc).
    pub name: String,
    pub index_key: Key,
    pub timestamp: u64,
    pub entries: u64,
    pub axes: HashMap<String, BTreeSet<String>>,
}

impl IndexSummary {
    /// Whether the index may hold a field with one of these values (false: skip it).
    pub fn may_contain(&self, keyword: &str, values: &[String]) -> bool {
        match self.axes.get(keyword) {
            Some(present) => values.iter().any(|v| present.contains(v)),
            None => true,
        }
    }
}

/// One field of an index, as `list` yields it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListedEntry {
    pub datum: Key,
    pub field: FieldRef,
    /// A newer copy of the same key exists.
    pub masked: bool,
}

pub type EntryIter<'a> = Box<dyn Iterator<Item = Result<ListedEntry, StorageError>> + Send + 'a>;

/// What purge found, or removed: replaced fields, catalogue files and the store objects that only
/// they referenced (which the caller removes from the store).
#[derive(Debug, Default)]
pub struct PurgeReport {
    pub masked_fields: usize,
    pub indexes: Vec<String>,
    pub objects: Vec<String>,
}

#[derive(Debug, Default, Clone, Copy)]
pub struct DbStats {
    pub fields: u64,
    pub masked: u64,
    pub field_bytes: u64,
    pub masked_bytes: u64,
    pub index_files: u64,
    pub journal_records: u64,
}

#[derive(Debug, Default)]
pub struct CompactReport {
    pub merged_indexes: usize,
    pub new_indexes: usize,
    pub entries: usize,
    /// The index files the merges replaced (cleared in the journal, still on disk).
    pub cleared: Vec<String>,
}

/// A file in a database's directory that no journal record names, and what it is
/// (`fieldstore check`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckFinding {
    /// Its name in the database's directory.
    pub file: String,
    pub kind: FindingKind,
    /// What it is, in words.
    pub detail: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum FindingKind {
    /// An index file written after the journal held more than it does now: the journal lost
    /// flushes it once held (cut short by more than an interrupted append, or replaced).
    LostFlush,
    /// A data file only such index files name: bytes of the lost flushes.
    LostData,
    /// An index file of a flush not published yet or cut short (a crash, a failed flush): the
    /// journal still holds what its writer had read. Harmless.
    Unpublished,
    /// An index file written into an earlier incarnation of the database (wiped and made again
    /// while it was being flushed). Harmless.
    EarlierIncarnation,
    /// An index file that cannot be judged: unreadable (being written, or damaged), or from a
    /// version that did not record how far its writer had read the journal.
    Unknown,
    /// A data file no index file names: a writer that has not flushed yet, or one stopped before
    /// its first flush. Harmless (purge leaves it).
    UnreferencedData,
}

impl FindingKind {
    /// Whether it shows that the journal lost history (what makes `check` fail).
    pub fn is_lost(self) -> bool {
        matches!(self, FindingKind::LostFlush | FindingKind::LostData)
    }

    /// A short name for listings.
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::LostFlush => "lost-flush",
            FindingKind::LostData => "lost-data",
            FindingKind::Unpublished => "unpublished",
            FindingKind::EarlierIncarnation => "earlier-incarnation",
            FindingKind::Unknown => "unknown",
            FindingKind::UnreferencedData => "unreferenced-data",
        }
    }
}

pub trait Catalogue: Send + Sync {
    /// `toc`, ...: what `fieldstore info` prints.
    fn kind(&self) -> &'static str;

    /// Where users are told the database is (`where`, `wipe`, `stats`...): the directory for
    /// toc; a URI where the id alone would not say which server or bucket.
    fn location(&self, db: &DbRef) -> String {
        db.id.clone()
    }

    /// Every database readers may visit, in a stable order; a damaged one is an error in its
    /// place, so the others stay readable.
    fn databases(&self) -> Vec<Result<DbRef, StorageError>>;

    /// The database with this key that readers see, if it exists.
    fn find(&self, db: &Key) -> Result<Option<DbRef>, StorageError>;

    /// Where archives of this key go: the existing database, or a new one, created (with the
    /// schema text recorded beside it, as FDB5 does).
    fn create(&self, db: &Key, schema_text: &str) -> Result<DbRef, StorageError> {
        self.create_by(db, schema_text, None)
    }

    /// As [`Catalogue::create`], recording in a database it makes the server identity that made
    /// it (docs/authorization.md), so that every server on the store, now or after a restart or
    /// a move, knows who may wipe it. An existing database keeps its creator.
    fn create_by(
        &self,
        db: &Key,
        schema_text: &str,
        creator: Option<&str>,
    ) -> Result<DbRef, StorageError>;

    /// How the database is kept on disk, for catalogues that keep more than one format (toc:
    /// `fieldstore` or `fdb5`).
    fn db_format(&self, _db: &DbRef) -> Option<&'static str> {
        None
    }

    /// The server identity that created the database; `None` for one made locally (outside a
    /// server with identities) or by a version from before creators were recorded.
    fn creator(&self, _db: &DbRef) -> Result<Option<String>, StorageError> {
        Ok(None)
    }

    /// A writer of its own: entries added are invisible until `commit`.
    fn writer(&self, db: &DbRef) -> Result<Box<dyn CatalogueWriter>, StorageError>;

    /// A consistent snapshot of one database.
    fn reader(&self, db: &DbRef) -> Result<Box<dyn CatalogueReader>, StorageError>;

    /// Whether an action (`list`, `retrieve`, `archive`, `wipe`) is locked on the database. A
    /// lock that cannot be read is an error, not taken as absent: a lock fails closed.
    fn is_locked(&self, db: &DbRef, action: &str) -> Result<bool, StorageError>;

    fn set_locked(&self, db: &DbRef, action: &str, locked: bool) -> Result<(), StorageError>;

    /// Records, or checks against the record, the version of `reader` whose answers this
    /// store's MARS keys follow (`storage::keys_release`: the ecCodes release, `2.28.0`, or the
    /// native tables', `fieldstore-mars-1+eccodes-2.28.0`): called before the first flush of a
    /// process in which that reader read keys; another version is refused. Stores that live in
    /// one process (memory) keep no record.
    fn check_keys_release(
        &self,
        _reader: crate::storage::keys_release::KeysReader,
        _version: &str,
    ) -> Result<(), StorageError> {
        Ok(())
    }

    /// Refuses `action` (`wipe`, `purge`, `lock`...) on a database this process may not change,
    /// so a request naming several databases is refused before any of them changes. Catalogues
    /// without owners (memory: one process; S3: the bucket policy decides) accept.
    fn may_change(&self, _db: &DbRef, _action: &'static str) -> Result<(), StorageError> {
        Ok(())
    }

    /// Makes the whole database invisible to readers at once, then removes the catalogue's own
    /// files (or reports what would go); returns their names. The store's objects are the
    /// store's to wipe next, then [`Catalogue::finish_wipe`] removes what is left.
    fn wipe(&self, db: &DbRef, doit: bool) -> Result<Vec<String>, StorageError>;

    /// Removes what a wipe left of the catalogue's (the database's directory, say) once the
    /// store has wiped its objects.
    fn finish_wipe(&self, _db: &DbRef) -> Result<(), StorageError> {
        Ok(())
    }

    /// Forgets replaced fields; the caller removes the returned objects from the store.
    fn purge(&self, db: &DbRef, doit: bool) -> Result<PurgeReport, StorageError>;

    /// Objects the catalogue references, for statistics.
    fn objects(&self, db: &DbRef) -> Result<BTreeSet<String>, StorageError>;

    fn stats(&self, db: &DbRef) -> Result<DbStats, StorageError>;

    /// The database's history, one record per change.
    fn dump(&self, db: &DbRef) -> Result<CatalogueDump, StorageError>;

    /// Merges indexes so lookups stay fast however many flushes accumulated.
    fn compact(&self, db: &DbRef) -> Result<CompactReport, StorageError>;

    /// The files of the database that no journal record names, and what each is.
    fn check(&self, _db: &DbRef) -> Result<Vec<CheckFinding>, StorageError> {
        Err(StorageError::Unsupported {
            catalogue: self.kind(),
            what: "be checked for files its journal does not name",
        })
    }

    /// Where the database's history of commits stands now (docs/subscribe.md).
    fn history_mark(&self, _db: &DbRef) -> Result<HistoryMark, StorageError> {
        Err(StorageError::Unsupported {
            catalogue: self.kind(),
            what: "be subscribed to",
        })
    }

    /// The commits of `db` from cursor `from` of incarnation `epoch` on, at most `max` of them.
    /// A cursor into history that is gone is [`StorageError::FellBehind`].
    fn commits(
        &self,
        _db: &DbRef,
        _epoch: &str,
        _from: u64,
        _max: usize,
    ) -> Result<Commits, StorageError> {
        Err(StorageError::Unsupported {
            catalogue: self.kind(),
            what: "be subscribed to",
        })
    }

    /// What tells a subscriber that databases or commits may have appeared. The default looks
    /// again every 100 ms.
    fn change_waiter(&self) -> Result<Box<dyn ChangeWaiter>, StorageError> {
        Ok(Box::new(PollingWaiter {
            interval: std::time::Duration::from_millis(100),
        }))
    }
}

pub trait CatalogueWriter: Send {
    fn add(&mut self, index: &Key, datum: &Key, field: FieldRef) -> Result<(), StorageError>;

    fn is_dirty(&self) -> bool;

    /// Makes every added entry visible at once. The store's bytes must already be durable.
    /// Returns the number of live indexes after it, so the caller can decide to compact.
    fn commit(&mut self) -> Result<usize, StorageError>;

    /// Builds what the next `commit` writes, ahead of it, so that the work overlaps the store's
    /// sync (a move's last parts in flight). No `add` may follow before the commit.
    fn prepare(&mut self) -> Result<(), StorageError> {
        Ok(())
    }

    /// For a copy into a new database (`move`): whether what the last `commit` wrote reads back
    /// from the storage (not a cache) exactly as written, and is all the database holds.
    /// `None` where a catalogue cannot tell so cheaply: the caller reads the catalogue back.
    fn verify_last_commit(&self) -> Result<Option<bool>, StorageError> {
        Ok(None)
    }
}

pub trait CatalogueReader: Send + Sync {
    fn db(&self) -> &DbRef;

    /// Live indexes, newest first.
    fn indexes(&self) -> &[IndexSummary];

    /// The newest copy of a field.
    fn lookup(&self, index: &Key, datum: &Key) -> Result<Option<FieldRef>, StorageError>;

    /// The fields of the `i`-th live index, one at a time; masked ones only if asked.
    fn entries(&self, i: usize, include_masked: bool) -> Result<EntryIter<'static>, StorageError>;

    /// As [`CatalogueReader::entries`], each field lent to `visit` as it is in the index (no
    /// key or location is built): what a listing that only prints keys needs, ten million
    /// times. `visit` breaking ends the walk. `Ok(false)` when this catalogue cannot (the
    /// caller uses `entries`).
    fn visit_entries(
        &self,
        _i: usize,
        _include_masked: bool,
        _visit: &mut dyn FnMut(EntryView<'_>) -> std::ops::ControlFlow<()>,
    ) -> Result<bool, StorageError> {
        Ok(false)
    }
}

/// A field of an index as [`CatalogueReader::visit_entries`] lends it: the index's datum
/// keywords and the field's values in their order.
#[derive(Debug, Clone, Copy)]
pub struct EntryView<'a> {
    pub keywords: &'a [String],
    /// The values joined by [`EntryView::SEP`].
    pub values: &'a str,
    pub masked: bool,
}

impl<'a> EntryView<'a> {
    pub const SEP: char = '\u{1f}';

    /// (keyword, value) in the index's keyword order.
    pub fn pairs(&self) -> impl Iterator<Item = (&'a str, &'a str)> {
        self.keywords
            .iter()
            .map(String::as_str)
            .zip(self.values.split(Self::SEP))
    }

    /// The value of `keyword`.
    pub fn get(&self, keyword: &str) -> Option<&'a str> {
        let p = self.keywords.iter().position(|k| k == keyword)?;
        self.values.split(Self::SEP).nth(p)
    }
}
