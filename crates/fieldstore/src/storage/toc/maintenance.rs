//! Whole-database operations: wipe, purge of masked duplicates, statistics, dump, and the lock
//! files that disable an action.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::compaction::{compaction_lock, COMPACTION_LOCK};
use super::journal::{self, Record};
use super::reader::{is_masked, DbReader};
use super::{current_uid, sync_dir, unique_name};
use crate::model::Key;
use crate::storage::catalogue::{CatalogueReader, DbStats, PurgeReport};
use crate::storage::fs::{remove_if_exists, FileSystem};
use crate::storage::{CatalogueDump, DumpRecord, StorageError};

pub fn lock_path(dir: &Path, action: &str) -> PathBuf {
    dir.join(format!("{action}.lock"))
}

pub fn is_locked(fs: &dyn FileSystem, dir: &Path, action: &str) -> Result<bool, StorageError> {
    let path = lock_path(dir, action);
    match fs.metadata(&path) {
        Ok(_) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(StorageError::io("check the lock", path)(e)),
    }
}

/// Refuses a change to a database another uid owns, before anything is touched: the store's
/// directories may be writable by all (a shared group, or worse), so the file system alone does
/// not keep one user from locking, purging or wiping another's data. Root may act, as in FDB5.
pub fn require_owner(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    action: &'static str,
) -> Result<(), StorageError> {
    check_owner(dir, db_owner(fs, dir)?, action)
}

/// The uid owning a database, in either format.
fn db_owner(fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<u32, StorageError> {
    if crate::storage::fdb5::toc::is_fdb5_toc(&**fs, &dir.join("toc")) {
        return crate::storage::fdb5::maintenance::owner(&**fs, dir);
    }
    Ok(DbReader::open(fs, dir)?.owner())
}

pub(super) fn check_owner(
    dir: &Path,
    owner: u32,
    action: &'static str,
) -> Result<(), StorageError> {
    let me = current_uid();
    if owner != me && me != 0 {
        return Err(StorageError::PermissionDenied {
            db: dir.to_path_buf(),
            owner,
            user: me,
            action,
        });
    }
    Ok(())
}

/// The journal's name while a wipe is under way: `toc` renamed to it is the step that makes the
/// database invisible, and its presence tells a directory being wiped from one that lost its
/// journal.
pub(crate) const WIPING_PREFIX: &str = "toc.wiping.";

/// Removes the database's catalogue files. First the journal is renamed away (and the rename made
/// durable), atomically: readers see the database whole or not at all, and the next database
/// created under the name starts afresh. Then index files, schema, lock files go. The store's
/// objects are left for the store to wipe; [`wipe_done`] removes the directory after it.
/// Returns the catalogue's files that go (or would go), with the store's objects still there
/// when this is a dry run (as before stores wiped their own).
pub fn wipe(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    doit: bool,
) -> Result<Vec<PathBuf>, StorageError> {
    // This checks it is a database (and reads its owner) before anything goes.
    let owner = db_owner(fs, dir)?;
    let mut files: Vec<PathBuf> = fs
        .read_dir(dir)
        .map_err(StorageError::io("list", dir))?
        .into_iter()
        .filter(|e| !e.is_dir)
        .map(|e| e.path)
        .collect();
    files.sort();
    let ours = |p: &PathBuf| {
        p.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| !n.ends_with(".data"))
    };
    if !doit {
        return Ok(files.into_iter().filter(ours).collect());
    }
    check_owner(dir, owner, "wipe")?;
    let toc = dir.join("toc");
    let doomed = dir.join(format!("{WIPING_PREFIX}{}", unique_name()));
    fs.rename(&toc, &doomed)
        .map_err(StorageError::io("rename", &toc))?;
    sync_dir(&**fs, dir)?;
    let mut gone = Vec::new();
    for p in files.into_iter().filter(ours) {
        // The journal goes last: while it is there the directory is known to be being wiped.
        if p == toc {
            gone.push(p);
            continue;
        }
        remove_if_exists(&**fs, &p).map_err(StorageError::io("remove", &p))?;
        gone.push(p);
    }
    Ok(gone)
}

/// Ends a wipe once the store removed its objects: the renamed journal goes, then the directory
/// if nothing else is left in it (another store's files, say).
pub fn wipe_done(fs: &dyn FileSystem, dir: &Path) -> Result<(), StorageError> {
    let entries = match fs.read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(StorageError::io("list", dir)(e)),
    };
    let mut left = 0;
    for e in entries {
        let name = e.file_name();
        if !e.is_dir
            && (name.starts_with(WIPING_PREFIX)
                || super::checkpoint::is_checkpoint(&name)
                || name.ends_with(".lock")
                || name == COMPACTION_LOCK)
        {
            remove_if_exists(fs, &e.path).map_err(StorageError::io("remove", &e.path))?;
        } else {
            left += 1;
        }
    }
    if left == 0 {
        match fs.remove_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            // Someone created something meanwhile (a new database under the name): theirs.
            Err(e) if e.raw_os_error() == Some(libc::ENOTEMPTY) => {}
            Err(e) => return Err(StorageError::io("remove", dir)(e)),
        }
    }
    Ok(())
}

/// Removes masked duplicates: indexes whose every entry is replaced by a newer one are cleared in
/// the journal and deleted, with index files that compaction replaced; the report names the data
/// objects no live index references any more, for the store to delete. Objects never referenced
/// by any index (a writer still running, or one that crashed) are left alone.
pub fn purge(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    doit: bool,
) -> Result<PurgeReport, StorageError> {
    // Another uid is refused even when there is nothing to purge: the answer must not depend on
    // the database's contents, and the lock below is a file it may not create.
    if doit {
        require_owner(fs, dir, "purge")?;
    }
    // Serialised with compactions: a compaction merging an index that purge clears would bring
    // its entries back.
    let _lock = if doit {
        compaction_lock(&**fs, dir, true)?
    } else {
        None
    };
    let reader = DbReader::open(fs, dir)?;
    if doit {
        // Deleting what the journal no longer names would destroy the lost flushes' bytes.
        super::unpublished::refuse_lost(&**fs, dir, reader.state())?;
    }
    let mut report = PurgeReport::default();
    let mut live_data: BTreeSet<String> = BTreeSet::new();
    let mut dead_data: BTreeSet<String> = BTreeSet::new();
    let mut cleared = Vec::new();
    for (i, ix) in reader.indexes().iter().enumerate() {
        let file = reader.load(ix)?;
        let maskers = reader.maskers(i, &file)?;
        let mut any_live = false;
        for e in file.entries() {
            let e = e?;
            if is_masked(e.values, e.masked, &maskers)? {
                report.masked_fields += 1;
            } else {
                any_live = true;
            }
        }
        if any_live {
            live_data.extend(file.data_files.iter().cloned());
        } else {
            cleared.push(ix.name.clone());
            dead_data.extend(file.data_files.iter().cloned());
        }
    }
    report.indexes = cleared.clone();
    // Index files cleared earlier (by compaction) whose grace period has passed.
    let stale = cleared_files(&**fs, dir, &reader)?;
    report.indexes.extend(stale.iter().cloned());
    report.objects = dead_data.difference(&live_data).cloned().collect();
    if doit {
        if !cleared.is_empty() {
            journal::append(
                &**fs,
                &dir.join("toc"),
                reader.state().end,
                &[Record::Clear { files: cleared }],
            )?;
        }
        for f in &report.indexes {
            let p = dir.join(f);
            remove_if_exists(&**fs, &p).map_err(StorageError::io("remove", &p))?;
        }
    }
    Ok(report)
}

/// How long a cleared index file stays on disk: a reader that read the journal just before the
/// Clear record may still open it.
pub const CLEARED_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Index files the journal cleared (and that are not live) older than the grace period.
fn cleared_files(
    fs: &dyn FileSystem,
    dir: &Path,
    reader: &DbReader,
) -> Result<Vec<String>, StorageError> {
    let (records, _) = journal::read_from(fs, &dir.join("toc"), 0)?;
    let live: HashSet<&str> = reader.indexes().iter().map(|i| i.name.as_str()).collect();
    let now = std::time::SystemTime::now();
    let mut out = Vec::new();
    for (_, r) in &records {
        if let Record::Clear { files } = r {
            for f in files {
                if live.contains(f.as_str()) {
                    continue;
                }
                let old_enough = fs
                    .metadata(&dir.join(f))
                    .map(|m| m.modified)
                    .ok()
                    .and_then(|t| now.duration_since(t).ok())
                    .is_some_and(|age| age >= CLEARED_GRACE);
                if old_enough {
                    out.push(f.clone());
                }
            }
        }
    }
    out.sort();
    out.dedup();
    Ok(out)
}

pub fn stats(fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<DbStats, StorageError> {
    let reader = DbReader::open(fs, dir)?;
    let mut s = DbStats {
        index_files: reader.indexes().len() as u64,
        journal_records: reader.journal_records() as u64,
        ..Default::default()
    };
    for (i, ix) in reader.indexes().iter().enumerate() {
        let file = reader.load(ix)?;
        let maskers = reader.maskers(i, &file)?;
        for e in file.entries() {
            let e = e?;
            if is_masked(e.values, e.masked, &maskers)? {
                s.masked += 1;
                s.masked_bytes += e.length;
            } else {
                s.fields += 1;
                s.field_bytes += e.length;
            }
        }
    }
    Ok(s)
}

/// Data objects the live indexes reference.
pub fn objects(fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<BTreeSet<String>, StorageError> {
    let reader = DbReader::open(fs, dir)?;
    let mut data = BTreeSet::new();
    for ix in reader.indexes() {
        data.extend(reader.load(ix)?.data_files.iter().cloned());
    }
    Ok(data)
}

/// The journal's records, typed, for `fieldstore dump`.
pub fn dump(fs: &dyn FileSystem, dir: &Path) -> Result<CatalogueDump, StorageError> {
    let path = dir.join("toc");
    let (records, end) = journal::read_from(fs, &path, 0)?;
    let key = |at: u64, text: &str| {
        Key::parse(text).map_err(|e| StorageError::Corrupt {
            path: path.clone(),
            offset: at,
            detail: e.to_string(),
        })
    };
    let mut out = Vec::with_capacity(records.len());
    for (at, r) in records {
        out.push(match r {
            Record::Init {
                db_key,
                uid,
                created,
                ..
            } => DumpRecord::Init {
                db: key(at, &db_key)?,
                owner_uid: Some(uid),
                created,
            },
            Record::Index {
                file,
                index_key,
                entries,
                timestamp,
                slot,
                ..
            } => DumpRecord::Index {
                file,
                index_key: key(at, &index_key)?,
                entries,
                timestamp,
                slot,
            },
            Record::Clear { files } => DumpRecord::Clear { files },
        });
    }
    Ok(CatalogueDump {
        journal_bytes: Some(end),
        total_records: out.len() as u64,
        records: out,
    })
}

#[cfg(test)]
mod tests {
    use super::super::compaction::{compact, merge, owned};
    use super::super::journal::JournalState;
    use super::*;
    use crate::storage::catalogue::CompactReport;
    use crate::storage::catalogue::{CatalogueWriter, ListedEntry};
    use crate::storage::fs::{os, OsFs};
    use crate::storage::toc::writer::DbWriter;
    use crate::storage::FieldRef;
    use std::collections::HashMap;

    fn ik() -> Key {
        Key::from_pairs([("type", "fc")])
    }

    /// Regression: a lock whose file could not be checked was taken as absent, so an I/O error
    /// unlocked the database.
    #[test]
    fn a_lock_that_cannot_be_checked_is_an_error_not_unlocked() {
        use crate::storage::fs::sim::{Op, SimFs};
        let fs = SimFs::new();
        let dir = Path::new("/db");
        fs.create_dir_all(dir).unwrap();
        assert!(!is_locked(&fs, dir, "archive").unwrap());
        fs.write(&lock_path(dir, "archive"), b"").unwrap();
        assert!(is_locked(&fs, dir, "archive").unwrap());
        fs.fail_nth(Op::Metadata, 1);
        let e = is_locked(&fs, dir, "archive").unwrap_err().to_string();
        assert!(e.contains("archive.lock"), "{e}");
    }

    fn dk(step: &str) -> Key {
        Key::from_pairs([("step", step)])
    }

    /// One flush of `steps`, each at its own location in object `obj`.
    fn flush(dir: &Path, obj: &str, steps: &[&str]) {
        let mut w = DbWriter::open(&os(), dir, &Key::from_pairs([("class", "od")]), "s").unwrap();
        for (i, s) in steps.iter().enumerate() {
            let f = FieldRef {
                object: obj.into(),
                offset: i as u64,
                length: 1,
                checksum: None,
                extract: None,
            };
            w.add(&ik(), &dk(s), f).unwrap();
        }
        w.commit().unwrap();
    }

    fn found(dir: &Path, step: &str) -> Option<FieldRef> {
        DbReader::open(&os(), dir)
            .unwrap()
            .lookup(&ik(), &dk(step))
            .unwrap()
    }

    /// Tiered merges skip indexes of other tiers; an entry a skipped index replaced stays
    /// replaced, though the merged index now sits after it.
    #[test]
    fn a_tier_merge_keeps_replacements_by_indexes_it_skips() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        flush(dir, "a", &["x", "a1", "a2", "a3"]);
        flush(dir, "b", &["x"]);
        flush(dir, "c", &["c1", "c2", "c3", "c4"]);
        flush(dir, "d", &["d1", "d2", "d3", "d4"]);
        assert_eq!(DbReader::open(&os(), dir).unwrap().indexes().len(), 4);
        // The fourth index of tier 1: a, c, d, e merge; b (tier 0) stays between.
        flush(dir, "e", &["e1", "e2", "e3", "e4"]);
        let r = DbReader::open(&os(), dir).unwrap();
        assert_eq!(r.indexes().len(), 2);
        assert_eq!(found(dir, "x").map(|f| f.object), Some("b".to_string()));
        let s = stats(&os(), dir).unwrap();
        assert_eq!((s.fields, s.masked), (16, 1));
        // Merging the merged index (newer in the journal, holding x flagged masked) with b: b's
        // copy of x is the live one and must stay so (a flagged copy masks nothing).
        compact(&os(), dir).unwrap();
        assert_eq!(found(dir, "x").map(|f| f.object), Some("b".to_string()));
        let s = stats(&os(), dir).unwrap();
        assert_eq!((s.fields, s.masked, s.index_files), (16, 1, 1));
    }

    /// The journal's records come back typed: the owner, each index with its key and entries, a
    /// merge's slot and the clear of what it merged.
    #[test]
    fn dump_types_every_journal_record() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        flush(dir, "a", &["1", "2"]);
        flush(dir, "b", &["3"]);
        compact(&os(), dir).unwrap();
        let out = dump(&OsFs, dir).unwrap();
        assert_eq!(
            out.journal_bytes,
            Some(std::fs::metadata(dir.join("toc")).unwrap().len())
        );
        assert_eq!(out.total_records, out.records.len() as u64);
        let r = &out.records;
        assert!(matches!(
            &r[0],
            DumpRecord::Init { db, owner_uid: Some(uid), .. }
                if *db == Key::from_pairs([("class", "od")]) && *uid == current_uid()
        ));
        let indexes: Vec<(&Key, u64, &Option<String>)> = r
            .iter()
            .filter_map(|x| match x {
                DumpRecord::Index {
                    index_key,
                    entries,
                    slot,
                    ..
                } => Some((index_key, *entries, slot)),
                _ => None,
            })
            .collect();
        assert_eq!(indexes.len(), 3, "{r:?}");
        assert_eq!((indexes[0].0, indexes[0].1), (&ik(), 2));
        assert_eq!(indexes[1].1, 1);
        assert_eq!(indexes[2].1, 3);
        assert!(indexes[2].2.is_some(), "the merged index takes a slot");
        assert!(matches!(r.last(), Some(DumpRecord::Clear { files }) if files.len() == 2));
    }

    /// What racing compactions of an older version left (two merged indexes each holding every
    /// entry) is healed by the next compaction: copies at one location are one field.
    #[test]
    fn copies_at_one_location_are_dropped() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        flush(dir, "a", &["1", "2"]);
        flush(dir, "b", &["3"]);
        let snapshot = JournalState::read(&OsFs, &dir.join("toc")).unwrap();
        let group = owned(snapshot.live_of(&ik().to_string()));
        for n in 0..2 {
            let mut state = snapshot.clone();
            let mut report = CompactReport::default();
            assert!(merge(
                &os(),
                dir,
                &mut state,
                &group,
                &[0, 1],
                &format!("race{n}"),
                &mut report
            )
            .unwrap());
        }
        let s = stats(&os(), dir).unwrap();
        assert_eq!((s.fields, s.masked, s.index_files), (3, 3, 2));
        compact(&os(), dir).unwrap();
        let s = stats(&os(), dir).unwrap();
        assert_eq!((s.fields, s.masked, s.index_files), (3, 0, 1));
    }

    #[test]
    fn concurrent_compactions_merge_each_index_once() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        for i in 0..3 {
            let steps: Vec<String> = (0..i + 1).map(|k| format!("{i}-{k}")).collect();
            let steps: Vec<&str> = steps.iter().map(String::as_str).collect();
            flush(dir, &format!("o{i}"), &steps);
        }
        std::thread::scope(|s| {
            for _ in 0..8 {
                s.spawn(|| compact(&os(), dir).unwrap());
            }
        });
        let s = stats(&os(), dir).unwrap();
        assert_eq!((s.fields, s.masked, s.index_files), (6, 0, 1));
    }

    /// One step of the model-based test: a writer flush (which may compact automatically), a
    /// merge of some of the live indexes, or a full compaction.
    #[derive(Debug, Clone)]
    enum Op {
        /// A datum layout (0: step, 1: step and param) and (index key, step, object) triples,
        /// archived in order by one writer, each at a new location.
        Flush(u8, Vec<(u8, u8, u8)>),
        /// An index key and a bit mask over its live indexes, newest first (an empty pick
        /// takes one).
        Merge(u8, u32),
        Compact,
        /// Purge: indexes with no live entry go, with their masked copies.
        Purge,
    }

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::prelude::*;
        prop_oneof![
            4 => (0u8..2, proptest::collection::vec((0u8..2, 0u8..4, 0u8..2), 1..9))
                .prop_map(|(l, f)| Op::Flush(l, f)),
            2 => (0u8..2, any::<u32>()).prop_map(|(k, m)| Op::Merge(k, m)),
            1 => Just(Op::Compact),
            1 => Just(Op::Purge),
        ]
    }

    /// Where the model says a field is: (object, offset).
    type Loc = (String, u64);

    fn loc(f: &FieldRef) -> Loc {
        (f.object.clone(), f.offset)
    }

    /// A field of the model: (index key `type`, layout, step).
    type Field = (String, u8, String);

    fn model_keys((ty, layout, step): &Field) -> (Key, Key) {
        let dk = if *layout == 0 {
            dk(step)
        } else {
            Key::from_pairs([("step", step.as_str()), ("param", "130")])
        };
        (Key::from_pairs([("type", ty.as_str())]), dk)
    }

    fn index_type(k: u8) -> String {
        ["fc", "an"][k as usize % 2].to_string()
    }

    /// Runs `ops` against a fresh database, checking it against the model after each one.
    fn check_model(ops: &[Op]) -> Result<(), proptest::test_runner::TestCaseError> {
        use proptest::{prop_assert, prop_assert_eq};
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        // Newest copy of each step, and every location an index file keeps (a flush keeps only
        // its last copy of a step; merges keep replaced copies, masked, until purge).
        let mut newest: HashMap<Field, Loc> = HashMap::new();
        let mut kept: HashSet<Loc> = HashSet::new();
        let mut next_offset = 0u64;
        for (n, op) in ops.iter().enumerate() {
            match op {
                Op::Flush(layout, fields) => {
                    let mut w =
                        DbWriter::open(&os(), dir, &Key::from_pairs([("class", "od")]), "s")
                            .unwrap();
                    let mut last: HashMap<Field, Loc> = HashMap::new();
                    for (k, step, obj) in fields {
                        let field = (index_type(*k), *layout, step.to_string());
                        let f = FieldRef {
                            object: format!("o{obj}"),
                            offset: next_offset,
                            length: 1,
                            checksum: None,
                            extract: None,
                        };
                        next_offset += 1;
                        newest.insert(field.clone(), loc(&f));
                        last.insert(field.clone(), loc(&f));
                        let (ik, dk) = model_keys(&field);
                        w.add(&ik, &dk, f).unwrap();
                    }
                    w.commit().unwrap();
                    kept.extend(last.into_values());
                }
                Op::Merge(k, mask) => {
                    if !dir.join("toc").exists() {
                        continue;
                    }
                    let mut state = JournalState::read(&OsFs, &dir.join("toc")).unwrap();
                    let ik = Key::from_pairs([("type", index_type(*k))]);
                    let group = owned(state.live_of(&ik.to_string()));
                    if group.is_empty() {
                        continue;
                    }
                    let mut members: Vec<usize> = (0..group.len().min(32))
                        .filter(|i| mask >> i & 1 == 1)
                        .collect();
                    if members.is_empty() {
                        members.push(*mask as usize % group.len());
                    }
                    let mut report = CompactReport::default();
                    let merged = merge(
                        &os(),
                        dir,
                        &mut state,
                        &group,
                        &members,
                        &unique_name(),
                        &mut report,
                    )
                    .unwrap();
                    // Members of another datum layout than the newest's stay out.
                    prop_assert!(!merged || members.len() > 1);
                }
                Op::Compact => {
                    if dir.join("toc").exists() {
                        compact(&os(), dir).unwrap();
                    }
                }
                Op::Purge => {
                    if !dir.join("toc").exists() {
                        continue;
                    }
                    // The copies in indexes with nothing live go.
                    let r = DbReader::open(&os(), dir).unwrap();
                    for i in 0..r.indexes().len() {
                        let copies: Vec<ListedEntry> =
                            r.entries(i, true).unwrap().map(Result::unwrap).collect();
                        if copies.iter().all(|e| e.masked) {
                            for e in &copies {
                                kept.remove(&loc(&e.field));
                            }
                        }
                    }
                    purge(&os(), dir, true).unwrap();
                }
            }
            if !dir.join("toc").exists() {
                continue;
            }
            let r = DbReader::open(&os(), dir).unwrap();
            for k in 0..2 {
                for layout in 0..2 {
                    for step in 0..4u8 {
                        let field = (index_type(k), layout, step.to_string());
                        let (ik, dk) = model_keys(&field);
                        prop_assert_eq!(
                            r.lookup(&ik, &dk).unwrap().as_ref().map(loc),
                            newest.get(&field).cloned(),
                            "lookup of {:?} after op {}: {:?}",
                            field,
                            n,
                            op
                        );
                    }
                }
            }
            let s = stats(&os(), dir).unwrap();
            prop_assert_eq!(s.fields as usize, newest.len(), "fields after op {}", n);
            prop_assert_eq!(
                (s.fields + s.masked) as usize,
                kept.len(),
                "fields + masked after op {}",
                n
            );
            // Listing: each step once, at its newest location; with masked copies, every kept
            // location once.
            let mut live: HashMap<Field, Loc> = HashMap::new();
            let mut all: Vec<Loc> = Vec::new();
            for i in 0..r.indexes().len() {
                let ty = r.indexes()[i]
                    .index_key
                    .get("type")
                    .unwrap_or_default()
                    .to_string();
                for e in r.entries(i, true).unwrap() {
                    let e = e.unwrap();
                    all.push(loc(&e.field));
                    if !e.masked {
                        let field = (
                            ty.clone(),
                            u8::from(e.datum.get("param").is_some()),
                            e.datum.get("step").unwrap_or_default().to_string(),
                        );
                        let again = live.insert(field.clone(), loc(&e.field));
                        prop_assert!(again.is_none(), "{:?} listed twice after op {}", field, n);
                    }
                }
            }
            prop_assert_eq!(&live, &newest, "listing after op {}", n);
            let distinct: HashSet<Loc> = all.iter().cloned().collect();
            prop_assert_eq!(
                distinct.len(),
                all.len(),
                "a location listed twice after op {}",
                n
            );
            prop_assert_eq!(&distinct, &kept, "locations after op {}", n);
        }
        Ok(())
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config {
            cases: 128,
            ..Default::default()
        })]
        /// Any sequence of flushes (compacting automatically), partial merges, compactions
        /// and purges keeps lookups, listings and statistics equal to the model's.
        #[test]
        fn flushes_merges_and_compactions_match_the_model(
            ops in proptest::collection::vec(op(), 1..16)
        ) {
            check_model(&ops)?;
        }
    }
}
