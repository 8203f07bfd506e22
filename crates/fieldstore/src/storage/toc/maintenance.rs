//! Whole-database operations: wipe, purge of masked duplicates, statistics, dump, and the lock
//! files that disable an action.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use super::journal::{self, Record};
use super::reader::{is_masked, DbReader};
use super::unique_name;
use super::writer::current_uid;
use crate::storage::catalogue::{CatalogueReader, CompactReport, DbStats, PurgeReport};
use crate::storage::StorageError;

/// Actions a lock file can disable, by file name.
pub const LOCKABLE: [&str; 4] = ["list", "retrieve", "archive", "wipe"];

pub fn lock_path(dir: &Path, action: &str) -> PathBuf {
    dir.join(format!("{action}.lock"))
}

pub fn is_locked(dir: &Path, action: &str) -> bool {
    lock_path(dir, action).exists()
}

fn check_owner(reader: &DbReader, action: &'static str) -> Result<(), StorageError> {
    let me = current_uid();
    if reader.owner() != me && me != 0 {
        return Err(StorageError::PermissionDenied {
            db: reader.dir().to_path_buf(),
            owner: reader.owner(),
            user: me,
            action,
        });
    }
    Ok(())
}

/// Removes a whole database. The directory is first renamed away, atomically, so readers see the
/// database entirely or not at all. Returns the files that go (or would go).
pub fn wipe(dir: &Path, doit: bool) -> Result<Vec<PathBuf>, StorageError> {
    // The reader checks this is a database (and reads its owner) before anything goes.
    let reader = DbReader::open(dir)?;
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(StorageError::io("list", dir))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    if !doit {
        return Ok(files);
    }
    check_owner(&reader, "wipe")?;
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let parent = dir.parent().unwrap_or(Path::new("."));
    let doomed = parent.join(format!(".{name}.wiping.{}", unique_name()));
    std::fs::rename(dir, &doomed).map_err(StorageError::io("rename", dir))?;
    std::fs::remove_dir_all(&doomed).map_err(StorageError::io("remove", &doomed))?;
    Ok(files)
}

/// Removes masked duplicates: indexes whose every entry is replaced by a newer one are cleared in
/// the journal and deleted, with index files that compaction replaced; the report names the data
/// objects no live index references any more, for the store to delete. Objects never referenced
/// by any index (a writer still running, or one that crashed) are left alone.
pub fn purge(dir: &Path, doit: bool) -> Result<PurgeReport, StorageError> {
    let reader = DbReader::open(dir)?;
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
    let stale = cleared_files(dir, &reader)?;
    report.indexes.extend(stale.iter().cloned());
    report.objects = dead_data.difference(&live_data).cloned().collect();
    if doit {
        if !cleared.is_empty() {
            check_owner(&reader, "purge")?;
            journal::append(&dir.join("toc"), &[Record::Clear { files: cleared }])?;
        } else if !stale.is_empty() {
            check_owner(&reader, "purge")?;
        }
        for f in &report.indexes {
            let p = dir.join(f);
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StorageError::io("remove", &p)(e)),
            }
        }
    }
    Ok(report)
}

/// How long a cleared index file stays on disk: a reader that read the journal just before the
/// Clear record may still open it.
pub const CLEARED_GRACE: std::time::Duration = std::time::Duration::from_secs(60);

/// Index files the journal cleared (and that are not live) older than the grace period.
fn cleared_files(dir: &Path, reader: &DbReader) -> Result<Vec<String>, StorageError> {
    let (records, _) = journal::read_from(&dir.join("toc"), 0)?;
    let live: HashSet<&str> = reader.indexes().iter().map(|i| i.name.as_str()).collect();
    let now = std::time::SystemTime::now();
    let mut out = Vec::new();
    for r in &records {
        if let Record::Clear { files } = r {
            for f in files {
                if live.contains(f.as_str()) {
                    continue;
                }
                let old_enough = std::fs::metadata(dir.join(f))
                    .and_then(|m| m.modified())
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

pub fn stats(dir: &Path) -> Result<DbStats, StorageError> {
    let reader = DbReader::open(dir)?;
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
pub fn objects(dir: &Path) -> Result<BTreeSet<String>, StorageError> {
    let reader = DbReader::open(dir)?;
    let mut data = BTreeSet::new();
    for ix in reader.indexes() {
        data.extend(reader.load(ix)?.data_files.iter().cloned());
    }
    Ok(data)
}

/// The journal, one line per record, for `fieldstore dump`.
pub fn dump(dir: &Path) -> Result<Vec<String>, StorageError> {
    let (records, end) = journal::read_from(&dir.join("toc"), 0)?;
    let mut out = vec![format!(
        "database {} (journal {end} bytes, {} records)",
        dir.display(),
        records.len()
    )];
    for r in records {
        out.push(match r {
            Record::Init {
                db_key,
                uid,
                created,
            } => format!("  INIT  {db_key} owner uid {uid} created {created}"),
            Record::Index {
                file,
                index_key,
                entries,
                timestamp,
                ..
            } => format!("  INDEX {index_key} {entries} entries in {file} at {timestamp}"),
            Record::Clear { files } => format!("  CLEAR {}", files.join(" ")),
        });
    }
    Ok(out)
}

/// Merges the live indexes of each index key into one, keeping replaced copies as masked entries
/// (so `--full` and purge see the same as before). Committed by one journal append: the merged
/// index takes the journal position of the newest index it replaces, so indexes that writers
/// flush meanwhile stay newer. Replaced index files are not deleted here: a reader that read the
/// journal just before may still open them; purge deletes them after `CLEARED_GRACE`.
pub fn compact(dir: &Path) -> Result<CompactReport, StorageError> {
    let reader = DbReader::open(dir)?;
    check_owner(&reader, "compact")?;
    let mut groups: Vec<(crate::model::Key, Vec<&crate::storage::IndexSummary>)> = Vec::new();
    for ix in reader.indexes() {
        match groups.iter_mut().find(|(k, _)| *k == ix.index_key) {
            Some((_, v)) => v.push(ix),
            None => groups.push((ix.index_key.clone(), vec![ix])),
        }
    }
    let mut report = CompactReport::default();
    let mut records = Vec::new();
    let unique = unique_name();
    for (index_key, group) in groups.into_iter().filter(|(_, g)| g.len() > 1) {
        let mut data_files: Vec<String> = Vec::new();
        let mut entries = Vec::new();
        let mut seen: HashSet<String> = HashSet::new();
        let mut datum_keywords: Option<Vec<String>> = None;
        let mut axes: std::collections::BTreeMap<String, BTreeSet<String>> =
            std::collections::BTreeMap::new();
        // Newest first: the first copy of a key is live, later ones are masked.
        for ix in &group {
            let file = reader.load(ix)?;
            if datum_keywords
                .as_ref()
                .is_some_and(|d| *d != file.datum_keywords)
            {
                // Different datum layouts under one index key cannot share an index.
                return Err(StorageError::Corrupt {
                    path: dir.join(&ix.name),
                    offset: 0,
                    detail: "datum keywords differ between indexes of one index key".into(),
                });
            }
            datum_keywords.get_or_insert_with(|| file.datum_keywords.clone());
            for (k, v) in &ix.axes {
                axes.entry(k.clone()).or_default().extend(v.iter().cloned());
            }
            for e in file.entries() {
                let e = e?;
                let name = file
                    .data_files
                    .get(e.file as usize)
                    .cloned()
                    .unwrap_or_default();
                let id = match data_files.iter().position(|f| *f == name) {
                    Some(i) => i,
                    None => {
                        data_files.push(name);
                        data_files.len() - 1
                    }
                };
                let masked = e.masked || !seen.insert(e.values.to_string());
                entries.push(super::index::IndexEntry {
                    values: e.values.to_string(),
                    file: id as u32,
                    offset: e.offset,
                    length: e.length,
                    masked,
                    checksum: e.checksum,
                });
            }
        }
        let name = format!(
            "{}.{unique}.{}.idx",
            super::disk_name(&index_key),
            report.new_indexes
        );
        report.entries += entries.len();
        let count = entries.len() as u64;
        super::index::IndexFile::write(
            &dir.join(&name),
            &index_key.to_string(),
            datum_keywords.as_deref().unwrap_or(&[]),
            &data_files,
            entries,
        )?;
        let timestamp = group.iter().map(|g| g.timestamp).max().unwrap_or(0);
        records.push(Record::Index {
            file: name,
            index_key: index_key.to_string(),
            entries: count,
            timestamp,
            axes: axes
                .into_iter()
                .map(|(k, v)| (k, v.into_iter().collect()))
                .collect(),
            slot: group.first().map(|g| g.name.clone()),
        });
        records.push(Record::Clear {
            files: group.iter().map(|g| g.name.clone()).collect(),
        });
        report.merged_indexes += group.len();
        report.new_indexes += 1;
    }
    if !records.is_empty() {
        super::writer::sync_dir(dir)?;
        journal::append(&dir.join("toc"), &records)?;
    }
    Ok(report)
}
