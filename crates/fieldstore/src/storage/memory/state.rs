//! The memory backend's shared state: databases, their snapshots and their objects, and the
//! capacity account.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;

use super::history::{CommitLog, Notifier};
use super::{Limits, ENTRY_OVERHEAD};
use crate::model::config::WhenFull;
use crate::model::Key;
use crate::storage::catalogue::IndexSummary;
use crate::storage::{DumpRecord, FieldRef, StorageError};

pub(super) struct Shared {
    pub name: String,
    pub limits: Limits,
    used: AtomicU64,
    /// Archives waiting for space (`when_full: block`) sleep on `freed`; the mutex only orders
    /// a release's signal after the waiter's check, so no wake-up is lost.
    space: Mutex<()>,
    freed: Condvar,
    /// By the key's sorted form (keyword order does not make another database); a BTreeMap so
    /// `databases()` has a stable order.
    dbs: RwLock<BTreeMap<String, Arc<MemDb>>>,
    /// Databases a wipe made invisible whose objects the store has not yet dropped (the
    /// catalogue detaches, the store drains, as for every backend: see `Catalogue::wipe`).
    wiping: Mutex<HashMap<String, Arc<MemDb>>>,
    /// Names objects and indexes uniquely for the life of the store.
    next: AtomicU64,
    /// Wakes subscribers when a database is made, committed to or wiped.
    pub notifier: Arc<Notifier>,
}

/// A lock poisoned by a panicking thread: reported, never unwrapped.
pub(super) fn poisoned<T>(_: T) -> StorageError {
    StorageError::Config {
        detail: "memory store state is unusable: a thread panicked while changing it".into(),
    }
}

pub(super) fn db_id(key: &Key) -> String {
    key.sorted().to_string()
}

impl Shared {
    pub fn new(name: String, limits: Limits) -> Shared {
        Shared {
            name,
            limits,
            used: AtomicU64::new(0),
            space: Mutex::new(()),
            freed: Condvar::new(),
            dbs: RwLock::new(BTreeMap::new()),
            wiping: Mutex::new(HashMap::new()),
            next: AtomicU64::new(0),
            notifier: Arc::new(Notifier::default()),
        }
    }

    /// Wakes subscribers of this database.
    pub fn changed(&self, key: &Key) {
        self.notifier.changed(&super::db_ref(&self.name, key).id);
    }

    pub fn used(&self) -> u64 {
        self.used.load(Ordering::SeqCst)
    }

    pub fn next_id(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Counts `wanted` bytes as held, or says how full the store is; never over capacity. With
    /// `when_full: block` it first waits for space; the caller holds no lock of the store then.
    pub fn reserve(&self, wanted: u64) -> Result<(), StorageError> {
        let used = match self.try_reserve(wanted) {
            Ok(()) => return Ok(()),
            Err(used) => used,
        };
        let timeout = match self.limits.when_full {
            // More than the whole store never fits: waiting would only delay the same error.
            WhenFull::Block { timeout } if wanted <= self.limits.capacity => timeout,
            _ => return Err(self.full(used, wanted, None)),
        };
        let deadline = Instant::now() + timeout;
        let mut guard = self.space.lock().map_err(poisoned)?;
        loop {
            let used = match self.try_reserve(wanted) {
                Ok(()) => return Ok(()),
                Err(used) => used,
            };
            let now = Instant::now();
            if now >= deadline {
                return Err(self.full(used, wanted, Some(timeout)));
            }
            guard = self
                .freed
                .wait_timeout(guard, deadline - now)
                .map_err(poisoned)?
                .0;
        }
    }

    /// One attempt; the bytes used when they do not fit.
    fn try_reserve(&self, wanted: u64) -> Result<(), u64> {
        let mut used = self.used.load(Ordering::SeqCst);
        loop {
            let fits = used
                .checked_add(wanted)
                .is_some_and(|total| total <= self.limits.capacity);
            if !fits {
                return Err(used);
            }
            match self.used.compare_exchange(
                used,
                used + wanted,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return Ok(()),
                Err(now) => used = now,
            }
        }
    }

    fn full(&self, used: u64, wanted: u64, waited: Option<Duration>) -> StorageError {
        let free = "free space with `fieldstore wipe` (whole databases) or `fieldstore purge --doit` (replaced copies), keep fewer cycles with `memory: {retain: {databases: N}}`, or raise `memory: {capacity: ...}` in the config";
        let hint = match waited {
            Some(t) => format!(
                "waited {} for space (when_full: block) and none was freed in time; data already flushed stays readable; {free}",
                human_duration(t)
            ),
            None if wanted > self.limits.capacity => {
                "the field is larger than the whole store; raise `memory: {capacity: ...}` in the config".to_string()
            }
            None => format!("data already flushed stays readable; {free}, or let producers wait with `memory: {{when_full: block}}`"),
        };
        StorageError::Full {
            store: format!("memory://{}", self.name),
            used,
            capacity: self.limits.capacity,
            wanted,
            hint,
        }
    }

    pub fn release(&self, n: u64) {
        // Saturating: an accounting slip must not wrap into a store that looks full forever.
        let _ = self
            .used
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |u| {
                Some(u.saturating_sub(n))
            });
        if matches!(self.limits.when_full, WhenFull::Block { .. }) {
            // Taken (and dropped) so a waiter between its check and its sleep is not missed.
            drop(self.space.lock());
            self.freed.notify_all();
        }
    }

    pub fn get(&self, key: &Key) -> Result<Option<Arc<MemDb>>, StorageError> {
        Ok(self.dbs.read().map_err(poisoned)?.get(&db_id(key)).cloned())
    }

    pub fn get_or_create(&self, key: &Key) -> Result<Arc<MemDb>, StorageError> {
        self.get_or_create_by(key, None)
    }

    pub fn get_or_create_by(
        &self,
        key: &Key,
        creator: Option<&str>,
    ) -> Result<Arc<MemDb>, StorageError> {
        if let Some(db) = self.get(key)? {
            return Ok(db);
        }
        let made = {
            let mut dbs = self.dbs.write().map_err(poisoned)?;
            if let Some(db) = dbs.get(&db_id(key)) {
                return Ok(db.clone());
            }
            let mut db = MemDb::new(key.clone(), self.next_id());
            db.creator = creator.map(str::to_string);
            let db = Arc::new(db);
            dbs.insert(db_id(key), db.clone());
            db
        };
        self.changed(key);
        self.retain()?;
        Ok(made)
    }

    /// `retain: {databases: N}`: wipes the oldest databases (by creation) beyond the N newest,
    /// as `fieldstore wipe --doit` would; their subscribers see them go.
    fn retain(&self) -> Result<(), StorageError> {
        let Some(keep) = self.limits.retain_databases else {
            return Ok(());
        };
        let old: Vec<Arc<MemDb>> = {
            let dbs = self.dbs.read().map_err(poisoned)?;
            if dbs.len() <= keep {
                return Ok(());
            }
            let mut all: Vec<Arc<MemDb>> = dbs.values().cloned().collect();
            all.sort_by_key(|d| d.seq);
            all.truncate(all.len() - keep);
            all
        };
        for db in old {
            self.detach(&db)?;
            self.drain(&db)?;
            self.forget_detached(&db.key)?;
        }
        Ok(())
    }

    pub fn all(&self) -> Result<Vec<Arc<MemDb>>, StorageError> {
        Ok(self
            .dbs
            .read()
            .map_err(poisoned)?
            .values()
            .cloned()
            .collect())
    }

    /// Takes the database away from new readers and writers and frees its bytes. Readers that
    /// hold a snapshot keep their index lists; their reads of wiped bytes fail.
    /// Makes a database invisible (the catalogue's half of a wipe); its objects stay until
    /// [`Shared::drain`] (the store's half).
    pub fn detach(&self, db: &Arc<MemDb>) -> Result<(), StorageError> {
        let id = db_id(&db.key);
        {
            let mut dbs = self.dbs.write().map_err(poisoned)?;
            if dbs.get(&id).is_some_and(|d| Arc::ptr_eq(d, db)) {
                dbs.remove(&id);
            }
        }
        // Set before draining: an append that takes an object's lock after the drain sees it.
        db.wiped.store(true, Ordering::SeqCst);
        self.wiping.lock().map_err(poisoned)?.insert(id, db.clone());
        self.changed(&db.key);
        Ok(())
    }

    /// The database a wipe detached, if its objects are not drained yet.
    pub fn detached(&self, key: &Key) -> Result<Option<Arc<MemDb>>, StorageError> {
        Ok(self
            .wiping
            .lock()
            .map_err(poisoned)?
            .get(&db_id(key))
            .cloned())
    }

    /// Forgets a detached database once the store drained it.
    pub fn forget_detached(&self, key: &Key) -> Result<(), StorageError> {
        self.wiping.lock().map_err(poisoned)?.remove(&db_id(key));
        Ok(())
    }

    /// Drops every object's bytes and gives their space back.
    pub fn drain(&self, db: &MemDb) -> Result<(), StorageError> {
        let objects: Vec<Arc<Object>> = db
            .objects
            .read()
            .map_err(poisoned)?
            .values()
            .cloned()
            .collect();
        let mut total = 0;
        for o in objects {
            let mut segs = o.segments.write().map_err(poisoned)?;
            let freed: u64 = segs.values().map(|s| s.len() as u64 + ENTRY_OVERHEAD).sum();
            segs.clear();
            self.release(freed);
            total += freed;
        }
        if total >= GIVE_BACK_AFTER {
            give_back();
        }
        Ok(())
    }

    /// Frees one field's bytes (a replaced copy, or one never committed).
    pub fn free(&self, db: &MemDb, field: &FieldRef) -> Result<(), StorageError> {
        let Some(o) = db.object(&field.object)? else {
            return Ok(());
        };
        let removed = o.segments.write().map_err(poisoned)?.remove(&field.offset);
        if let Some(s) = removed {
            self.release(s.len() as u64 + ENTRY_OVERHEAD);
        }
        Ok(())
    }
}

pub(super) struct MemDb {
    pub key: Key,
    pub created: u64,
    /// The server identity that created it (docs/authorization.md).
    pub creator: Option<String>,
    /// Creation order within the store, for retention (`created` has seconds only).
    pub seq: u64,
    pub snapshot: RwLock<Arc<Snapshot>>,
    /// Serialises changes to the snapshot (commit, compact, purge); readers never take it.
    pub change: Mutex<()>,
    pub objects: RwLock<HashMap<String, Arc<Object>>>,
    pub locks: Mutex<BTreeSet<String>>,
    pub wiped: AtomicBool,
    history: Mutex<History>,
    /// Which incarnation this is, for subscribers' cursors (docs/subscribe.md).
    pub epoch: String,
    pub log: Mutex<CommitLog>,
}

/// What `dump` shows: one record per change, the newest [`HISTORY_KEPT`] of them, so a
/// long-running server's history stays bounded.
#[derive(Default)]
struct History {
    records: std::collections::VecDeque<DumpRecord>,
    total: u64,
}

pub(super) const HISTORY_KEPT: usize = 10_000;

impl MemDb {
    fn new(key: Key, unique: u64) -> MemDb {
        let created = now();
        MemDb {
            key,
            created,
            creator: None,
            // The process too: a server restarted within the second numbers its databases
            // from 1 again, and a subscriber resuming must see a new incarnation.
            seq: unique,
            epoch: format!("{created}.{}.{unique}", std::process::id()),
            log: Mutex::new(CommitLog::default()),
            snapshot: RwLock::new(Arc::new(Snapshot::default())),
            change: Mutex::new(()),
            objects: RwLock::new(HashMap::new()),
            locks: Mutex::new(BTreeSet::new()),
            wiped: AtomicBool::new(false),
            history: Mutex::new(History::default()),
        }
    }

    pub fn object(&self, name: &str) -> Result<Option<Arc<Object>>, StorageError> {
        Ok(self.objects.read().map_err(poisoned)?.get(name).cloned())
    }

    pub fn snapshot(&self) -> Result<Arc<Snapshot>, StorageError> {
        Ok(self.snapshot.read().map_err(poisoned)?.clone())
    }

    /// Makes `s` what readers see and records the change; callers hold `change`.
    pub fn publish(&self, s: Snapshot, what: DumpRecord) -> Result<(), StorageError> {
        *self.snapshot.write().map_err(poisoned)? = Arc::new(s);
        let mut h = self.history.lock().map_err(poisoned)?;
        if h.records.len() >= HISTORY_KEPT {
            h.records.pop_front();
        }
        h.records.push_back(what);
        h.total += 1;
        Ok(())
    }

    /// The kept history and how many changes there were in all.
    pub fn history(&self) -> Result<(Vec<DumpRecord>, u64), StorageError> {
        let h = self.history.lock().map_err(poisoned)?;
        Ok((h.records.iter().cloned().collect(), h.total))
    }
}

/// A wipe freeing at least this much hands the memory back to the system, so a server's
/// resident size follows its capacity rather than its largest past cycle.
const GIVE_BACK_AFTER: u64 = 64 << 20;

/// glibc keeps freed memory in its arenas (a server has one per few connection threads); a wiped
/// cycle's gigabytes would stay resident until reused.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn give_back() {
    // SAFETY: malloc_trim only releases free memory of the allocator's own arenas.
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn give_back() {}

fn human_duration(d: Duration) -> String {
    if d.subsec_millis() != 0 || d.as_secs() == 0 {
        format!("{} ms", d.as_millis())
    } else {
        format!("{} s", d.as_secs())
    }
}

pub(super) fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// One writer's bytes: each field a segment of its own, so a replaced copy frees exactly its
/// bytes.
#[derive(Default)]
pub(super) struct Object {
    /// Each the buffer the field arrived in (a server's receive buffer, or a copy of the
    /// caller's slice), shared with whoever reads it.
    pub segments: RwLock<BTreeMap<u64, Bytes>>,
    /// A writer still appends to it: purge must not drop it even when empty.
    pub open: AtomicBool,
}

impl Object {
    pub fn held(&self) -> u64 {
        self.segments
            .read()
            .map(|s| s.values().map(|v| v.len() as u64).sum())
            .unwrap_or(0)
    }

    /// The segment starting at `offset`, if one does.
    pub fn segment(&self, offset: u64) -> Result<Option<Bytes>, StorageError> {
        Ok(self
            .segments
            .read()
            .map_err(poisoned)?
            .get(&offset)
            .cloned())
    }

    /// Copies from `offset` on, across adjacent segments; fewer bytes at a gap or the end.
    pub fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
        let segs = self.segments.read().map_err(poisoned)?;
        let mut done = 0usize;
        while done < buf.len() {
            let at = offset + done as u64;
            let Some((start, seg)) = segs.range(..=at).next_back() else {
                break;
            };
            let skip = at - start;
            if skip >= seg.len() as u64 {
                break;
            }
            let src = &seg[skip as usize..];
            let n = src.len().min(buf.len() - done);
            buf[done..done + n].copy_from_slice(&src[..n]);
            done += n;
        }
        Ok(done)
    }
}

/// What readers see of one database: immutable, replaced whole on each change.
#[derive(Default)]
pub(super) struct Snapshot {
    /// Newest first.
    pub indexes: Vec<Arc<MemIndex>>,
    /// The summaries of `indexes`, in the same order (what `CatalogueReader::indexes` lends).
    pub summaries: Vec<IndexSummary>,
}

impl Snapshot {
    pub fn with(indexes: Vec<Arc<MemIndex>>) -> Snapshot {
        Snapshot {
            summaries: indexes.iter().map(|i| i.summary.clone()).collect(),
            indexes,
        }
    }

    /// The newer indexes that can mask entries of index `i`: same index key and datum layout.
    pub fn maskers(&self, i: usize) -> Vec<Arc<MemIndex>> {
        let Some(ix) = self.indexes.get(i) else {
            return Vec::new();
        };
        self.indexes[..i]
            .iter()
            .filter(|n| n.summary.index_key == ix.summary.index_key && n.keywords == ix.keywords)
            .cloned()
            .collect()
    }
}

pub(super) struct MemIndex {
    pub summary: IndexSummary,
    pub keywords: Vec<String>,
    /// Sorted by values; copies of one key newest first, all but the first flagged masked.
    pub entries: Vec<MemEntry>,
}

#[derive(Clone)]
pub(super) struct MemEntry {
    pub values: String,
    pub field: FieldRef,
    pub masked: bool,
}

impl MemIndex {
    /// The newest copy of the key with these values.
    pub fn lookup(&self, values: &str) -> Option<&MemEntry> {
        let i = self.entries.partition_point(|e| e.values.as_str() < values);
        self.entries.get(i).filter(|e| e.values == values)
    }
}

/// Separates values in an entry's key: a control character no value holds.
const SEP: char = '\u{1f}';

pub(super) fn entry_values(keywords: &[String], datum: &Key) -> String {
    let mut s = String::new();
    for (i, kw) in keywords.iter().enumerate() {
        if i > 0 {
            s.push(SEP);
        }
        s.push_str(datum.get(kw).unwrap_or(""));
    }
    s
}

pub(super) fn datum_of(keywords: &[String], values: &str) -> Key {
    Key::from_pairs(keywords.iter().map(String::as_str).zip(values.split(SEP)))
}

pub(super) fn is_masked(e: &MemEntry, maskers: &[Arc<MemIndex>]) -> bool {
    e.masked || maskers.iter().any(|m| m.lookup(&e.values).is_some())
}

/// One index from several of the same group, given newest first: copies of a key keep their
/// age order, older ones flagged masked; a copy at the location of a newer one is dropped.
pub(super) fn merge(name: String, group: &[Arc<MemIndex>]) -> MemIndex {
    let mut entries: Vec<MemEntry> = group.iter().flat_map(|i| i.entries.clone()).collect();
    // Stable: for equal values, newer indexes (earlier in `group`) come first.
    entries.sort_by(|a, b| a.values.cmp(&b.values));
    let mut out: Vec<MemEntry> = Vec::with_capacity(entries.len());
    let mut first_of_key = 0;
    for mut e in entries {
        if out.last().is_some_and(|l| l.values == e.values) {
            if out[first_of_key..]
                .iter()
                .any(|o| o.field.object == e.field.object && o.field.offset == e.field.offset)
            {
                continue;
            }
            e.masked = true;
        } else {
            first_of_key = out.len();
        }
        out.push(e);
    }
    let mut axes = group[0].summary.axes.clone();
    for g in &group[1..] {
        for (k, v) in &g.summary.axes {
            axes.entry(k.clone()).or_default().extend(v.iter().cloned());
        }
    }
    MemIndex {
        summary: IndexSummary {
            name,
            index_key: group[0].summary.index_key.clone(),
            timestamp: group.iter().map(|g| g.summary.timestamp).max().unwrap_or(0),
            entries: out.len() as u64,
            axes,
        },
        keywords: group[0].keywords.clone(),
        entries: out,
    }
}
