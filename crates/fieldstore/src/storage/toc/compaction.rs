//! Compaction: merging a database's indexes of one index key into fewer, after flushes
//! (tiered, automatic) or on request (all of them), without ever holding an index in memory.

use std::cmp::Reverse;
use std::collections::{BTreeMap, BTreeSet, BinaryHeap, HashSet};
use std::path::Path;
use std::sync::Arc;

use super::index::{EntryRef, IndexFile, IndexWriter, Walk};
use super::journal::{self, JournalState, LiveIndex, Record};
use super::maintenance::check_owner;
use super::reader::DbReader;
use super::{sync_dir, unique_name};
use crate::model::Key;
use crate::storage::catalogue::CompactReport;
use crate::storage::fs::{remove_if_exists, FileSystem, FsFile, OpenMode};
use crate::storage::StorageError;

/// File whose `flock` serialises the compactions and purges of one database (not a
/// `<action>.lock`: its existence means nothing, only the lock on it).
pub const COMPACTION_LOCK: &str = "compaction.flock";

/// Size ratio between compaction tiers: an index of `n` entries is in tier `log_TIER(n)`, and
/// `TIER` indexes of one tier (and one index key) are merged into one of a higher tier. Each
/// entry is therefore rewritten about `log_TIER(entries)` times over its life, and an index key
/// keeps fewer than `TIER` indexes per tier, `(TIER - 1) * log_TIER(entries)` in all.
const TIER: u64 = 4;

/// Holds an exclusive `flock` on [`COMPACTION_LOCK`]; released when dropped (or when the
/// process dies, so a killed compactor never blocks the next).
pub(crate) struct CompactionLock(#[allow(dead_code)] Box<dyn FsFile>);

/// Takes the compaction lock, waiting for it when `wait`, else `None` if someone holds it.
pub(super) fn compaction_lock(
    fs: &dyn FileSystem,
    dir: &Path,
    wait: bool,
) -> Result<Option<CompactionLock>, StorageError> {
    let path = dir.join(COMPACTION_LOCK);
    let f = fs
        .open(&path, OpenMode::Lock)
        .map_err(StorageError::io("open", &path))?;
    if f.lock(wait).map_err(StorageError::io("lock", &path))? {
        Ok(Some(CompactionLock(f)))
    } else {
        Ok(None)
    }
}

/// A compaction tier: `floor(log_TIER(entries))`.
fn tier(entries: u64) -> u32 {
    entries.max(1).ilog(TIER)
}

/// The indexes (positions in `group`, newest first) the tiered policy merges next: every index
/// of the lowest tier that holds `TIER` or more. `None` when no tier is full.
fn tier_to_merge(group: &[LiveIndex]) -> Option<Vec<usize>> {
    let mut counts: std::collections::BTreeMap<u32, usize> = std::collections::BTreeMap::new();
    for ix in group {
        *counts.entry(tier(ix.entries)).or_default() += 1;
    }
    let (&t, _) = counts.iter().find(|(_, &n)| n as u64 >= TIER)?;
    Some(
        group
            .iter()
            .enumerate()
            .filter(|(_, ix)| tier(ix.entries) == t)
            .map(|(i, _)| i)
            .collect(),
    )
}

/// Merges after a flush, if one of the index keys it wrote has a full tier. Skipped, not
/// waited for, while another process compacts this database: that one merges what is there.
/// The work is proportional to the indexes merged, never to the size of the database: the
/// journal is caught up from `state`'s end, and only the index keys the flush touched are looked
/// at.
pub(crate) fn auto_compact(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    state: &mut JournalState,
    touched: &[String],
) -> Result<CompactReport, StorageError> {
    let mut report = CompactReport::default();
    if !touched
        .iter()
        .any(|k| tier_to_merge(&owned(state.live_of(k))).is_some())
    {
        return Ok(report);
    }
    let Some(_lock) = compaction_lock(&**fs, dir, false)? else {
        return Ok(report);
    };
    // Whatever another compactor did before we got the lock is in the journal: merge from that.
    state.refresh(&**fs, &dir.join("toc"))?;
    let unique = unique_name();
    let mut keys: Vec<&String> = touched.iter().collect();
    keys.sort();
    keys.dedup();
    for key in keys {
        // Each merge moves entries to a higher tier, which may fill it in turn.
        loop {
            let group = owned(state.live_of(key));
            let Some(members) = tier_to_merge(&group) else {
                break;
            };
            if !merge(fs, dir, state, &group, &members, &unique, &mut report)? {
                break;
            }
        }
    }
    Ok(report)
}

pub(super) fn owned(v: Vec<&LiveIndex>) -> Vec<LiveIndex> {
    v.into_iter().cloned().collect()
}

/// Merges the live indexes of each index key into one, keeping replaced copies as masked entries
/// (so `--full` and purge see the same as before). Waits for any compaction in progress, then
/// works from the journal as it is once it holds the lock, so two compactions never merge the
/// same indexes. Replaced index files are not deleted here: a reader that read the journal just
/// before may still open them; purge deletes them after `CLEARED_GRACE`.
pub fn compact(fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<CompactReport, StorageError> {
    let reader = DbReader::open(fs, dir)?;
    check_owner(dir, reader.owner(), "compact")?;
    let _lock = compaction_lock(&**fs, dir, true)?;
    let mut state = reader.state().clone();
    state.refresh(&**fs, &dir.join("toc"))?;
    let mut keys: Vec<String> = Vec::new();
    for ix in state.live() {
        if !keys.contains(&ix.index_key) {
            keys.push(ix.index_key.clone());
        }
    }
    let mut report = CompactReport::default();
    let unique = unique_name();
    for key in keys {
        let group = owned(state.live_of(&key));
        if group.len() > 1 {
            let all: Vec<usize> = (0..group.len()).collect();
            merge(fs, dir, &mut state, &group, &all, &unique, &mut report)?;
        }
    }
    state.checkpoint_if_due(&**fs, dir);
    Ok(report)
}

/// Where a merged copy is: (number of its data file in the merged index, offset, length).
type Location = (u32, u64, u64);

/// Walks several indexes (newest first) in key order at once, handing out each key's entries
/// from all of them together: a k-way merge, so merging indexes of millions of entries holds one
/// key's copies, not the indexes.
struct KeyMerge<'a> {
    files: Vec<&'a IndexFile>,
    walks: Vec<Walk>,
    heads: Vec<Option<EntryRef<'a>>>,
    /// (head key, member), smallest first; members in order among equal keys.
    heap: BinaryHeap<Reverse<(&'a str, usize)>>,
}

impl<'a> KeyMerge<'a> {
    fn new(files: Vec<&'a IndexFile>) -> Result<KeyMerge<'a>, StorageError> {
        let n = files.len();
        let mut m = KeyMerge {
            files,
            walks: (0..n).map(|_| Walk::default()).collect(),
            heads: vec![None; n],
            heap: BinaryHeap::with_capacity(n),
        };
        for i in 0..n {
            m.advance(i)?;
        }
        Ok(m)
    }

    fn advance(&mut self, i: usize) -> Result<(), StorageError> {
        let next = self.walks[i].next(self.files[i]).transpose()?;
        if let Some(e) = next {
            self.heap.push(Reverse((e.values, i)));
        }
        self.heads[i] = next;
        Ok(())
    }

    /// The next key's entries into `out` as (member, entry): members in order, each member's
    /// copies in its file's order. `false` when every index is walked.
    fn next_key(&mut self, out: &mut Vec<(usize, EntryRef<'a>)>) -> Result<bool, StorageError> {
        out.clear();
        let Some(&Reverse((key, _))) = self.heap.peek() else {
            return Ok(false);
        };
        while let Some(&Reverse((k, i))) = self.heap.peek() {
            if k != key {
                break;
            }
            self.heap.pop();
            while let Some(e) = self.heads[i].filter(|e| e.values == key) {
                out.push((i, e));
                let next = self.walks[i].next(self.files[i]).transpose()?;
                self.heads[i] = next;
            }
            if let Some(e) = self.heads[i] {
                self.heap.push(Reverse((e.values, i)));
            }
        }
        Ok(true)
    }
}

/// One key's copies as the merged index keeps them, in place in `group`: copies at a location
/// already kept are dropped; the first copy that is live in its member and not replaced by a
/// newer member or by a `masker` of its member stays live, every other is flagged masked; the
/// live copy comes first. Without maskers (counting) the flags are not worked out.
fn settle<'a>(
    group: &mut Vec<(usize, EntryRef<'a>)>,
    remap: &[Vec<u32>],
    maskers: Option<&[Vec<&IndexFile>]>,
    copies: &mut Vec<Location>,
) -> Result<(), StorageError> {
    copies.clear();
    let mut has_live = false;
    let mut kept = 0;
    for j in 0..group.len() {
        let (m, mut e) = group[j];
        e.file = remap[m].get(e.file as usize).copied().unwrap_or(u32::MAX);
        let location = (e.file, e.offset, e.length);
        if copies.contains(&location) {
            continue;
        }
        copies.push(location);
        if let Some(maskers) = maskers {
            // Only a live copy masks: a member ordered newer may hold this key flagged masked
            // (replaced by an index its own merge skipped), and this copy may be that index's.
            let mut masked = e.masked || has_live;
            if !masked {
                for f in &maskers[m] {
                    if f.lookup(e.values)?.is_some() {
                        masked = true;
                        break;
                    }
                }
            }
            e.masked = masked;
            has_live |= !masked;
        }
        group[kept] = (m, e);
        kept += 1;
    }
    group.truncate(kept);
    if let Some(live) = group.iter().position(|(_, e)| !e.masked) {
        group[..=live].rotate_right(1);
    }
    Ok(())
}

/// Merges `members` (positions in `group`, the live indexes of one index key, newest first)
/// into one index, committed by one journal append of its Index record and a Clear of the
/// members. The merged index takes the journal position of the newest member (its `slot`), so
/// indexes flushed meanwhile stay newer than it.
///
/// An entry is kept masked when it was masked already, when a newer member holds its key, or
/// when an index that is not merged but sits between it and the slot holds its key live (that
/// index ends up older than the merged one, so the flag is what keeps the newest copy winning).
/// An entry at the same location as one already kept (the same field, copied twice by an older
/// version's racing compactions) is dropped: it is not a replaced field, only a duplicate.
///
/// The members are walked together in key order twice, once to count what the merged index
/// keeps (its header says how many) and once to write it, so memory stays bounded by a few
/// blocks per member whatever their size: a forecast's ten-million-entry merge takes seconds
/// and megabytes, not minutes and gigabytes.
///
/// Members whose datum layout differs from the newest member's stay unmerged. Returns whether
/// anything was merged.
pub(super) fn merge(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    state: &mut JournalState,
    group: &[LiveIndex],
    members: &[usize],
    unique: &str,
    report: &mut CompactReport,
) -> Result<bool, StorageError> {
    let Some(&newest) = members.first() else {
        return Ok(false);
    };
    let load = |ix: &LiveIndex| -> Result<IndexFile, StorageError> {
        IndexFile::read(&**fs, &dir.join(&ix.file))
    };
    let layout = load(&group[newest])?.datum_keywords;
    let mut merged: Vec<(usize, IndexFile)> = Vec::with_capacity(members.len());
    for &m in members {
        let f = load(&group[m])?;
        if f.datum_keywords == layout {
            merged.push((m, f));
        }
    }
    if merged.len() < 2 {
        return Ok(false);
    }
    let is_member: HashSet<usize> = merged.iter().map(|(m, _)| *m).collect();
    // Non-members between the slot and the oldest member, with their position in `group`.
    let oldest = merged.last().map_or(newest, |(m, _)| *m);
    let mut between: Vec<(usize, IndexFile)> = Vec::new();
    for (i, ix) in group.iter().enumerate().take(oldest).skip(newest + 1) {
        if !is_member.contains(&i) {
            let f = load(ix)?;
            if f.datum_keywords == layout {
                between.push((i, f));
            }
        }
    }
    // Each member's maskers: the indexes between that are newer than it.
    let maskers: Vec<Vec<&IndexFile>> = merged
        .iter()
        .map(|(m, _)| {
            between
                .iter()
                .filter(|(i, _)| i < m)
                .map(|(_, f)| f)
                .collect()
        })
        .collect();
    let mut data_files: Vec<String> = Vec::new();
    let remap: Vec<Vec<u32>> = merged
        .iter()
        .map(|(_, f)| {
            f.data_files
                .iter()
                .map(|name| match data_files.iter().position(|d| d == name) {
                    Some(i) => i as u32,
                    None => {
                        data_files.push(name.clone());
                        (data_files.len() - 1) as u32
                    }
                })
                .collect()
        })
        .collect();
    let mut axes: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (m, _) in &merged {
        for (k, v) in &group[*m].axes {
            axes.entry(k.clone()).or_default().extend(v.iter().cloned());
        }
    }
    let files = || merged.iter().map(|(_, f)| f).collect::<Vec<&IndexFile>>();
    let mut key_copies: Vec<(usize, EntryRef<'_>)> = Vec::new();
    let mut copies: Vec<Location> = Vec::new();

    // Pass 1: how many entries the merged index keeps, and whether any carries extraction
    // information (the file's version).
    let (mut count, mut with_extract) = (0u64, false);
    let mut keys = KeyMerge::new(files())?;
    while keys.next_key(&mut key_copies)? {
        settle(&mut key_copies, &remap, None, &mut copies)?;
        count += key_copies.len() as u64;
        with_extract |= key_copies.iter().any(|(_, e)| e.extract.is_some());
    }
    drop(keys);

    let slot = &group[newest];
    let name = format!(
        "{}.{unique}.{}.idx",
        Key::parse(&slot.index_key)
            .map(|k| super::disk_name(&k))
            .unwrap_or_default(),
        report.new_indexes
    );
    let toc = dir.join("toc");
    let journal = fs
        .open(&toc, OpenMode::Read)
        .map_err(StorageError::io("open", &toc))?;
    let seen = state.mark(&*journal, &toc)?;
    let path = dir.join(&name);
    let written = (|| {
        let mut out = IndexWriter::create(
            &**fs,
            &path,
            &slot.index_key,
            &layout,
            &data_files,
            count,
            with_extract,
            Some(&seen),
        )?;
        // Pass 2: the entries, flagged.
        let mut keys = KeyMerge::new(files())?;
        while keys.next_key(&mut key_copies)? {
            settle(&mut key_copies, &remap, Some(&maskers), &mut copies)?;
            for (_, e) in &key_copies {
                out.push(*e)?;
            }
        }
        out.finish()
    })();
    if let Err(e) = written {
        let _ = remove_if_exists(&**fs, &path);
        return Err(e);
    }
    let merged_names: Vec<String> = merged.iter().map(|(m, _)| group[*m].file.clone()).collect();
    let merged_names_copy = merged_names.clone();
    let records = vec![
        Record::Index {
            file: name,
            index_key: slot.index_key.clone(),
            entries: count,
            timestamp: merged
                .iter()
                .map(|(m, _)| group[*m].timestamp)
                .max()
                .unwrap_or(0),
            axes: axes
                .into_iter()
                .map(|(k, v)| (k, v.into_iter().collect()))
                .collect(),
            slot: Some(slot.file.clone()),
        },
        Record::Clear {
            files: merged_names,
        },
    ];
    sync_dir(&**fs, dir)?;
    let end = state.end;
    let appended = journal::append(&**fs, &dir.join("toc"), end, &records)?;
    state.apply(appended.others, end);
    state.apply(appended.ours, appended.end);
    report.entries += count as usize;
    report.merged_indexes += merged.len();
    report.cleared.extend(merged_names_copy);
    report.new_indexes += 1;
    Ok(true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::catalogue::{CatalogueReader, CatalogueWriter};
    use crate::storage::fs::os;
    use crate::storage::toc::writer::DbWriter;
    use crate::storage::FieldRef;
    use std::collections::HashMap;

    fn writer(dir: &Path) -> DbWriter {
        DbWriter::open(&os(), dir, &Key::from_pairs([("class", "od")]), "s").unwrap()
    }

    fn field(object: &str, offset: u64) -> FieldRef {
        FieldRef {
            object: object.into(),
            offset,
            length: 1,
            checksum: Some(offset as u32),
            extract: None,
        }
    }

    /// Indexes of thousands of entries (several blocks each) with overlapping keys merge into
    /// one that holds the newest copy of each key live and the others masked, block boundaries
    /// and all, as a sorted map of the flushes says.
    #[test]
    fn merging_indexes_of_many_blocks_keeps_the_newest_copy_of_each_key() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        let ik = Key::from_pairs([("type", "fc")]);
        let mut newest: HashMap<String, (String, u64)> = HashMap::new();
        let mut copies = 0usize;
        for flush in 0..3u64 {
            let mut w = writer(dir);
            let object = format!("o{flush}");
            // Flush n holds every key k with k % (n + 2) == 0 of 0..6000: overlapping sets.
            for (i, k) in (0..6000u64).filter(|k| k % (flush + 2) == 0).enumerate() {
                let step = format!("{k:05}");
                w.add(
                    &ik,
                    &Key::from_pairs([("step", step.as_str())]),
                    field(&object, i as u64),
                )
                .unwrap();
                newest.insert(step, (object.clone(), i as u64));
                copies += 1;
            }
            w.commit().unwrap();
        }
        let report = compact(&os(), dir).unwrap();
        assert_eq!((report.merged_indexes, report.new_indexes), (3, 1));
        assert_eq!(report.entries, copies);
        assert_eq!(report.cleared.len(), 3);
        let r = DbReader::open(&os(), dir).unwrap();
        assert_eq!(r.indexes().len(), 1);
        let mut live = 0;
        let mut masked = 0;
        let mut previous = String::new();
        for e in r.entries(0, true).unwrap() {
            let e = e.unwrap();
            let step = e.datum.get("step").unwrap().to_string();
            assert!(step >= previous, "in key order");
            if e.masked {
                masked += 1;
                assert_ne!(
                    Some(&(e.field.object.clone(), e.field.offset)),
                    newest.get(&step)
                );
            } else {
                live += 1;
                assert_eq!(
                    Some(&(e.field.object.clone(), e.field.offset)),
                    newest.get(&step),
                    "{step}"
                );
                assert_eq!(e.field.checksum, Some(e.field.offset as u32));
            }
            previous = step;
        }
        assert_eq!((live, masked), (newest.len(), copies - newest.len()));
        for (step, (object, offset)) in &newest {
            let f = r
                .lookup(&ik, &Key::from_pairs([("step", step.as_str())]))
                .unwrap()
                .unwrap();
            assert_eq!((&f.object, f.offset), (object, *offset));
        }
    }

    /// A writer deletes the index files its automatic merges replaced once the grace has
    /// passed, and only those: live indexes and the data stay.
    #[test]
    fn a_writer_deletes_the_indexes_its_merges_replaced_after_the_grace() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        let ik = Key::from_pairs([("type", "fc")]);
        let idx = |dir: &Path| -> usize {
            std::fs::read_dir(dir)
                .unwrap()
                .filter(|e| {
                    e.as_ref()
                        .unwrap()
                        .file_name()
                        .to_string_lossy()
                        .ends_with(".idx")
                })
                .count()
        };
        // Four flushes of one field each: the fourth fills tier 0, and the four are merged.
        let four_flushes = |mut w: DbWriter| {
            for step in 0..4u64 {
                let s = step.to_string();
                w.add(
                    &ik,
                    &Key::from_pairs([("step", s.as_str())]),
                    field("o", step),
                )
                .unwrap();
                w.commit().unwrap();
            }
        };
        four_flushes(writer(dir).retiring_after(std::time::Duration::ZERO));
        // The fourth flush merged the four (tier 0) and deleted them: only the merged one is left.
        assert_eq!(idx(dir), 1);
        let r = DbReader::open(&os(), dir).unwrap();
        assert_eq!(r.indexes().len(), 1);
        for step in 0..4u64 {
            let s = step.to_string();
            assert!(r
                .lookup(&ik, &Key::from_pairs([("step", s.as_str())]))
                .unwrap()
                .is_some());
        }
        // With the usual grace, they stay for readers that may be about to open them.
        let d2 = tempfile::tempdir().unwrap();
        four_flushes(writer(d2.path()));
        assert_eq!(idx(d2.path()), 5);
    }
}
