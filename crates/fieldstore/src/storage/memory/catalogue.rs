//! The memory catalogue: per database, an immutable list of indexes swapped whole on commit.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::sync::Arc;

use super::db_ref;
use super::state::{
    datum_of, entry_values, is_masked, merge, now, poisoned, MemDb, MemEntry, MemIndex, Shared,
    Snapshot,
};
use crate::model::Key;
use crate::storage::catalogue::{
    Catalogue, CatalogueReader, CatalogueWriter, CompactReport, DbStats, EntryIter, IndexSummary,
    ListedEntry, PurgeReport,
};
use crate::storage::history::{ChangeWaiter, Commit, CommitEntry, Commits, HistoryMark};
use crate::storage::{CatalogueDump, DbRef, DumpRecord, FieldRef, StorageError};

pub struct MemoryCatalogue {
    shared: Arc<Shared>,
}

impl MemoryCatalogue {
    pub(super) fn new(shared: Arc<Shared>) -> MemoryCatalogue {
        MemoryCatalogue { shared }
    }

    fn db(&self, db: &DbRef) -> Result<Arc<MemDb>, StorageError> {
        self.shared
            .get(&db.key)?
            .ok_or_else(|| StorageError::Config {
                detail: format!(
                    "database {} is not in memory store '{}' (wiped?)",
                    db.key, self.shared.name
                ),
            })
    }

    fn index_name(&self, index_key: &Key) -> String {
        format!("{index_key}#{}", self.shared.next_id())
    }
}

/// Merges the newest indexes of a group while the newer is at least half the older's size, so
/// each entry is copied O(log n) times and a group keeps O(log n) indexes.
fn auto_merge(
    shared: &Shared,
    mut indexes: Vec<Arc<MemIndex>>,
    index_key: &Key,
    keywords: &[String],
) -> Vec<Arc<MemIndex>> {
    loop {
        let pos: Vec<usize> = indexes
            .iter()
            .enumerate()
            .filter(|(_, i)| i.summary.index_key == *index_key && i.keywords == keywords)
            .map(|(p, _)| p)
            .take(2)
            .collect();
        let [a, b] = pos[..] else {
            return indexes;
        };
        if indexes[a].entries.len() * 2 < indexes[b].entries.len() {
            return indexes;
        }
        let name = format!("{index_key}#{}", shared.next_id());
        let m = Arc::new(merge(name, &[indexes[a].clone(), indexes[b].clone()]));
        indexes.remove(b);
        indexes[a] = m;
    }
}

impl Catalogue for MemoryCatalogue {
    fn history_mark(&self, db: &DbRef) -> Result<HistoryMark, StorageError> {
        let d = self.db(db)?;
        let end = d.log.lock().map_err(poisoned)?.end();
        Ok(HistoryMark {
            epoch: d.epoch.clone(),
            end,
        })
    }

    fn commits(
        &self,
        db: &DbRef,
        epoch: &str,
        from: u64,
        max: usize,
    ) -> Result<Commits, StorageError> {
        let Some(d) = self.shared.get(&db.key)? else {
            return Ok(Commits::Gone);
        };
        let log = d.log.lock().map_err(poisoned)?;
        if d.epoch != epoch {
            return Ok(Commits::Recreated(HistoryMark {
                epoch: d.epoch.clone(),
                end: log.end(),
            }));
        }
        if from < log.first {
            return Err(StorageError::FellBehind {
                db: db.id.clone(),
                cursor: from,
                detail: format!(
                    "the memory store keeps the last {} commits or {} fields of a database, and {} commits went by since",
                    super::history::COMMITS_KEPT,
                    super::history::ENTRIES_KEPT,
                    log.end() - from
                ),
            });
        }
        let skip = usize::try_from(from - log.first).unwrap_or(usize::MAX);
        Ok(Commits::Since(
            log.commits
                .iter()
                .skip(skip)
                .take(max)
                .map(|c| Commit::clone(c))
                .collect(),
        ))
    }

    fn change_waiter(&self) -> Result<Box<dyn ChangeWaiter>, StorageError> {
        Ok(Box::new(super::history::MemWaiter::new(
            self.shared.notifier.clone(),
        )))
    }

    fn kind(&self) -> &'static str {
        "memory"
    }

    fn databases(&self) -> Vec<Result<DbRef, StorageError>> {
        match self.shared.all() {
            Ok(dbs) => dbs
                .iter()
                .map(|d| Ok(db_ref(&self.shared.name, &d.key)))
                .collect(),
            Err(e) => vec![Err(e)],
        }
    }

    fn find(&self, db: &Key) -> Result<Option<DbRef>, StorageError> {
        Ok(self
            .shared
            .get(db)?
            .map(|d| db_ref(&self.shared.name, &d.key)))
    }

    fn create_by(
        &self,
        db: &Key,
        _schema_text: &str,
        creator: Option<&str>,
    ) -> Result<DbRef, StorageError> {
        let d = self.shared.get_or_create_by(db, creator)?;
        Ok(db_ref(&self.shared.name, &d.key))
    }

    fn creator(&self, db: &DbRef) -> Result<Option<String>, StorageError> {
        Ok(self.shared.get(&db.key)?.and_then(|d| d.creator.clone()))
    }

    fn writer(&self, db: &DbRef) -> Result<Box<dyn CatalogueWriter>, StorageError> {
        Ok(Box::new(MemCatalogueWriter {
            shared: self.shared.clone(),
            key: db.key.clone(),
            pending: BTreeMap::new(),
        }))
    }

    fn reader(&self, db: &DbRef) -> Result<Box<dyn CatalogueReader>, StorageError> {
        let snapshot = self.db(db)?.snapshot()?;
        Ok(Box::new(MemReader {
            db: db.clone(),
            snapshot,
        }))
    }

    fn is_locked(&self, db: &DbRef, action: &str) -> Result<bool, StorageError> {
        // A database no longer here has no locks (what was asked of it fails on its own).
        Ok(self.db(db).ok().is_some_and(|d| {
            d.locks
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .contains(action)
        }))
    }

    fn set_locked(&self, db: &DbRef, action: &str, locked: bool) -> Result<(), StorageError> {
        let d = self.db(db)?;
        let mut l = d.locks.lock().map_err(poisoned)?;
        if locked {
            l.insert(action.to_string());
        } else {
            l.remove(action);
        }
        Ok(())
    }

    /// Detaches the database (readers stop seeing it at once); the store drains its objects.
    fn wipe(&self, db: &DbRef, doit: bool) -> Result<Vec<String>, StorageError> {
        let d = self.db(db)?;
        let names: Vec<String> = d
            .snapshot()?
            .indexes
            .iter()
            .map(|i| i.summary.name.clone())
            .collect();
        if doit {
            self.shared.detach(&d)?;
        }
        Ok(names)
    }

    fn finish_wipe(&self, db: &DbRef) -> Result<(), StorageError> {
        self.shared.forget_detached(&db.key)
    }

    /// Drops masked copies and frees their bytes at once (no reader can be handed them
    /// afterwards: readers holding an older snapshot get a clear error if they read one).
    fn purge(&self, db: &DbRef, doit: bool) -> Result<PurgeReport, StorageError> {
        let d = self.db(db)?;
        let _change = d.change.lock().map_err(poisoned)?;
        let snap = d.snapshot()?;
        let mut report = PurgeReport::default();
        let mut kept = Vec::with_capacity(snap.indexes.len());
        let mut doomed: Vec<FieldRef> = Vec::new();
        let mut live: HashSet<(String, u64)> = HashSet::new();
        let mut live_objects = BTreeSet::new();
        let mut dead_objects = BTreeSet::new();
        for (i, ix) in snap.indexes.iter().enumerate() {
            let maskers = snap.maskers(i);
            let mut entries = Vec::with_capacity(ix.entries.len());
            for e in &ix.entries {
                if is_masked(e, &maskers) {
                    report.masked_fields += 1;
                    doomed.push(e.field.clone());
                    dead_objects.insert(e.field.object.clone());
                } else {
                    live.insert((e.field.object.clone(), e.field.offset));
                    live_objects.insert(e.field.object.clone());
                    entries.push(e.clone());
                }
            }
            if entries.is_empty() {
                report.indexes.push(ix.summary.name.clone());
            } else if entries.len() == ix.entries.len() {
                kept.push(ix.clone());
            } else {
                let mut summary = ix.summary.clone();
                summary.entries = entries.len() as u64;
                kept.push(Arc::new(MemIndex {
                    summary,
                    keywords: ix.keywords.clone(),
                    entries,
                }));
            }
        }
        report.objects = dead_objects.difference(&live_objects).cloned().collect();
        if doit && report.masked_fields > 0 {
            d.publish(
                Snapshot::with(kept),
                DumpRecord::Purge {
                    masked_fields: report.masked_fields as u64,
                    indexes: report.indexes.len() as u64,
                    timestamp: now(),
                },
            )?;
            for f in doomed {
                if !live.contains(&(f.object.clone(), f.offset)) {
                    self.shared.free(&d, &f)?;
                }
            }
        }
        Ok(report)
    }

    fn objects(&self, db: &DbRef) -> Result<BTreeSet<String>, StorageError> {
        Ok(self
            .db(db)?
            .snapshot()?
            .indexes
            .iter()
            .flat_map(|i| i.entries.iter().map(|e| e.field.object.clone()))
            .collect())
    }

    fn stats(&self, db: &DbRef) -> Result<DbStats, StorageError> {
        let d = self.db(db)?;
        let snap = d.snapshot()?;
        let mut s = DbStats {
            index_files: snap.indexes.len() as u64,
            journal_records: d.history()?.1 + 1,
            ..Default::default()
        };
        for (i, ix) in snap.indexes.iter().enumerate() {
            let maskers = snap.maskers(i);
            for e in &ix.entries {
                if is_masked(e, &maskers) {
                    s.masked += 1;
                    s.masked_bytes += e.field.length;
                } else {
                    s.fields += 1;
                    s.field_bytes += e.field.length;
                }
            }
        }
        Ok(s)
    }

    fn dump(&self, db: &DbRef) -> Result<CatalogueDump, StorageError> {
        let d = self.db(db)?;
        let (kept, total) = d.history()?;
        let mut records = Vec::with_capacity(kept.len() + 1);
        records.push(DumpRecord::Init {
            db: d.key.clone(),
            owner_uid: None,
            created: d.created,
        });
        records.extend(kept);
        Ok(CatalogueDump {
            journal_bytes: None,
            total_records: total + 1,
            records,
        })
    }

    /// Merges each group of indexes (same index key and datum layout) into one.
    fn compact(&self, db: &DbRef) -> Result<CompactReport, StorageError> {
        let d = self.db(db)?;
        let _change = d.change.lock().map_err(poisoned)?;
        let snap = d.snapshot()?;
        let mut report = CompactReport::default();
        let mut out: Vec<Arc<MemIndex>> = Vec::with_capacity(snap.indexes.len());
        let mut done: Vec<bool> = vec![false; snap.indexes.len()];
        for i in 0..snap.indexes.len() {
            if done[i] {
                continue;
            }
            let ix = &snap.indexes[i];
            let group: Vec<usize> = (i..snap.indexes.len())
                .filter(|&j| {
                    !done[j]
                        && snap.indexes[j].summary.index_key == ix.summary.index_key
                        && snap.indexes[j].keywords == ix.keywords
                })
                .collect();
            for &j in &group {
                done[j] = true;
            }
            if group.len() == 1 {
                out.push(ix.clone());
                continue;
            }
            let members: Vec<Arc<MemIndex>> =
                group.iter().map(|&j| snap.indexes[j].clone()).collect();
            let m = merge(self.index_name(&ix.summary.index_key), &members);
            report.merged_indexes += group.len();
            report.new_indexes += 1;
            report.entries += m.entries.len();
            out.push(Arc::new(m));
        }
        if report.new_indexes > 0 {
            d.publish(
                Snapshot::with(out),
                DumpRecord::Compact {
                    merged_indexes: report.merged_indexes as u64,
                    new_indexes: report.new_indexes as u64,
                    timestamp: now(),
                },
            )?;
        }
        Ok(report)
    }
}

struct PendingIndex {
    keywords: Vec<String>,
    entries: BTreeMap<String, FieldRef>,
    axes: BTreeMap<String, BTreeSet<String>>,
}

struct MemCatalogueWriter {
    shared: Arc<Shared>,
    key: Key,
    pending: BTreeMap<Key, PendingIndex>,
}

impl MemCatalogueWriter {
    /// Gives back the bytes of entries that will never be visible.
    fn free_pending(&mut self) {
        let Ok(Some(db)) = self.shared.get(&self.key) else {
            return;
        };
        for p in std::mem::take(&mut self.pending).into_values() {
            for f in p.entries.values() {
                let _ = self.shared.free(&db, f);
            }
        }
    }
}

impl CatalogueWriter for MemCatalogueWriter {
    fn add(&mut self, index: &Key, datum: &Key, field: FieldRef) -> Result<(), StorageError> {
        let p = self
            .pending
            .entry(index.clone())
            .or_insert_with(|| PendingIndex {
                keywords: datum.keywords().map(str::to_string).collect(),
                entries: BTreeMap::new(),
                axes: BTreeMap::new(),
            });
        for (k, v) in datum.iter() {
            if !p.axes.get(k).is_some_and(|s| s.contains(v)) {
                p.axes
                    .entry(k.to_string())
                    .or_default()
                    .insert(v.to_string());
            }
        }
        let values = entry_values(&p.keywords, datum);
        if let Some(old) = p.entries.insert(values, field) {
            // Replaced before anyone could see it: its bytes go now.
            if let Some(db) = self.shared.get(&self.key)? {
                self.shared.free(&db, &old)?;
            }
        }
        Ok(())
    }

    fn is_dirty(&self) -> bool {
        !self.pending.is_empty()
    }

    fn commit(&mut self) -> Result<usize, StorageError> {
        if self.pending.is_empty() {
            return Ok(0);
        }
        // Entries whose bytes a wipe took are dropped with them; the rest go into the database
        // live now (a new one after a wipe).
        let db = self.shared.get_or_create(&self.key)?;
        let _change = db.change.lock().map_err(poisoned)?;
        let objects = db.objects.read().map_err(poisoned)?;
        let snap = db.snapshot()?;
        let timestamp = now();
        let mut fresh: Vec<Arc<MemIndex>> = Vec::new();
        let mut total = 0usize;
        for (index_key, p) in &self.pending {
            let entries: Vec<MemEntry> = p
                .entries
                .iter()
                .filter(|(_, f)| objects.contains_key(&f.object))
                .map(|(v, f)| MemEntry {
                    values: v.clone(),
                    field: f.clone(),
                    masked: false,
                })
                .collect();
            if entries.is_empty() {
                continue;
            }
            total += entries.len();
            let mut axes: std::collections::HashMap<String, BTreeSet<String>> =
                p.axes.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            for (k, v) in index_key.iter() {
                axes.entry(k.to_string()).or_default().insert(v.to_string());
            }
            fresh.push(Arc::new(MemIndex {
                summary: IndexSummary {
                    name: format!("{index_key}#{}", self.shared.next_id()),
                    index_key: index_key.clone(),
                    timestamp,
                    entries: entries.len() as u64,
                    axes,
                },
                keywords: p.keywords.clone(),
                entries,
            }));
        }
        let what = DumpRecord::Flush {
            entries: total as u64,
            indexes: fresh.iter().map(|i| i.summary.name.clone()).collect(),
            timestamp,
        };
        let mut indexes: Vec<Arc<MemIndex>> = fresh.clone();
        indexes.extend(snap.indexes.iter().cloned());
        for f in &fresh {
            indexes = auto_merge(&self.shared, indexes, &f.summary.index_key, &f.keywords);
        }
        let live = indexes.len();
        let commit = Commit {
            at: 0,
            next: 0,
            timestamp,
            entries: fresh
                .iter()
                .flat_map(|ix| {
                    ix.entries.iter().map(|e| CommitEntry {
                        index: ix.summary.index_key.clone(),
                        datum: datum_of(&ix.keywords, &e.values),
                        field: e.field.clone(),
                    })
                })
                .collect(),
        };
        // Under the same lock as the snapshot: subscribers see commits in publication order.
        let mut log = db.log.lock().map_err(poisoned)?;
        db.publish(Snapshot::with(indexes), what)?;
        log.push(commit);
        drop(log);
        self.pending.clear();
        self.shared.changed(&db.key);
        Ok(live)
    }
}

impl Drop for MemCatalogueWriter {
    fn drop(&mut self) {
        self.free_pending();
    }
}

struct MemReader {
    db: DbRef,
    snapshot: Arc<Snapshot>,
}

impl CatalogueReader for MemReader {
    fn db(&self) -> &DbRef {
        &self.db
    }

    fn indexes(&self) -> &[IndexSummary] {
        &self.snapshot.summaries
    }

    fn lookup(&self, index: &Key, datum: &Key) -> Result<Option<FieldRef>, StorageError> {
        for ix in &self.snapshot.indexes {
            if ix.summary.index_key != *index
                || ix.keywords.len() != datum.len()
                || !ix.keywords.iter().all(|k| datum.contains(k))
                || !datum
                    .iter()
                    .all(|(k, v)| ix.summary.axes.get(k).is_none_or(|s| s.contains(v)))
            {
                continue;
            }
            if let Some(e) = ix.lookup(&entry_values(&ix.keywords, datum)) {
                return Ok(Some(e.field.clone()));
            }
        }
        Ok(None)
    }

    fn entries(&self, i: usize, include_masked: bool) -> Result<EntryIter<'static>, StorageError> {
        let Some(ix) = self.snapshot.indexes.get(i).cloned() else {
            return Ok(Box::new(std::iter::empty()));
        };
        let maskers = self.snapshot.maskers(i);
        Ok(Box::new(Entries {
            ix,
            maskers,
            pos: 0,
            include_masked,
        }))
    }
}

struct Entries {
    ix: Arc<MemIndex>,
    maskers: Vec<Arc<MemIndex>>,
    pos: usize,
    include_masked: bool,
}

impl Iterator for Entries {
    type Item = Result<ListedEntry, StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let e = self.ix.entries.get(self.pos)?;
            self.pos += 1;
            let masked = is_masked(e, &self.maskers);
            if masked && !self.include_masked {
                continue;
            }
            return Some(Ok(ListedEntry {
                datum: datum_of(&self.ix.keywords, &e.values),
                field: e.field.clone(),
                masked,
            }));
        }
    }
}
