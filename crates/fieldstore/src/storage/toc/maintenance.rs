//! Whole-database operations: wipe, purge of masked duplicates, statistics, dump, and the lock
//! files that disable an action.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use super::journal::{self, Record};
use super::reader::DbReader;
use super::unique_name;
use super::writer::current_uid;
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

/// What purge found: index files holding only masked entries and data files only they reference.
#[derive(Debug, Default)]
pub struct PurgeReport {
    pub masked_fields: usize,
    pub indexes: Vec<PathBuf>,
    pub data_files: Vec<PathBuf>,
}

/// Removes masked duplicates: indexes whose every entry is replaced by a newer one are cleared in
/// the journal, then their files and data files no live index references are deleted. Data files
/// never referenced by any index (a writer still running, or one that crashed) are left alone.
pub fn purge(dir: &Path, doit: bool) -> Result<PurgeReport, StorageError> {
    let reader = DbReader::open(dir)?;
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut report = PurgeReport::default();
    let mut live_data: BTreeSet<String> = BTreeSet::new();
    let mut dead_data: BTreeSet<String> = BTreeSet::new();
    let mut cleared = Vec::new();
    for ix in reader.indexes() {
        let file = reader.load(ix)?;
        let ik = ix.index_key.to_string();
        let mut any_live = false;
        for e in &file.entries {
            if !e.masked && seen.insert((ik.clone(), e.values.clone())) {
                any_live = true;
            } else {
                report.masked_fields += 1;
            }
        }
        if any_live {
            live_data.extend(file.data_files.iter().cloned());
        } else {
            cleared.push(ix.file.clone());
            report.indexes.push(dir.join(&ix.file));
            dead_data.extend(file.data_files.iter().cloned());
        }
    }
    report.data_files = dead_data
        .difference(&live_data)
        .map(|f| dir.join(f))
        .collect();
    if doit && !cleared.is_empty() {
        check_owner(&reader, "purge")?;
        journal::append(&dir.join("toc"), &[Record::Clear { files: cleared }])?;
        for f in report.indexes.iter().chain(&report.data_files) {
            std::fs::remove_file(f).map_err(StorageError::io("remove", f))?;
        }
    }
    Ok(report)
}

#[derive(Debug, Default, Clone, Copy)]
pub struct DbStats {
    pub fields: u64,
    pub masked: u64,
    pub field_bytes: u64,
    pub masked_bytes: u64,
    pub index_files: u64,
    pub data_files: u64,
    pub data_bytes: u64,
    pub journal_records: u64,
}

pub fn stats(dir: &Path) -> Result<DbStats, StorageError> {
    let reader = DbReader::open(dir)?;
    let mut s = DbStats {
        index_files: reader.indexes().len() as u64,
        journal_records: reader.journal_records() as u64,
        ..Default::default()
    };
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut data: BTreeSet<String> = BTreeSet::new();
    for ix in reader.indexes() {
        let file = reader.load(ix)?;
        data.extend(file.data_files.iter().cloned());
        for e in &file.entries {
            if !e.masked && seen.insert((ix.index_key.to_string(), e.values.clone())) {
                s.fields += 1;
                s.field_bytes += e.length;
            } else {
                s.masked += 1;
                s.masked_bytes += e.length;
            }
        }
    }
    s.data_files = data.len() as u64;
    s.data_bytes = data
        .iter()
        .filter_map(|f| std::fs::metadata(dir.join(f)).ok())
        .map(|m| m.len())
        .sum();
    Ok(s)
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

/// What compaction did.
#[derive(Debug, Default)]
pub struct CompactReport {
    pub merged_indexes: usize,
    pub new_indexes: usize,
    pub entries: usize,
}

/// Merges the live indexes of each index key into one, keeping replaced copies as masked entries
/// (so `--full` and purge see the same as before). Committed by one journal append: the merged
/// index takes the journal position of the newest index it replaces, so indexes that writers
/// flush meanwhile stay newer. Replaced index files are not deleted here: a reader that read the
/// journal just before may still open them.
pub fn compact(dir: &Path) -> Result<CompactReport, StorageError> {
    let reader = DbReader::open(dir)?;
    check_owner(&reader, "compact")?;
    let mut groups: Vec<(crate::model::Key, Vec<&super::reader::IndexRef>)> = Vec::new();
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
                    path: dir.join(&ix.file),
                    offset: 0,
                    detail: "datum keywords differ between indexes of one index key".into(),
                });
            }
            datum_keywords.get_or_insert_with(|| file.datum_keywords.clone());
            for (k, v) in &ix.axes {
                axes.entry(k.clone()).or_default().extend(v.iter().cloned());
            }
            for e in &file.entries {
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
                let masked = e.masked || !seen.insert(e.values.clone());
                entries.push(super::index::IndexEntry {
                    values: e.values.clone(),
                    file: id as u32,
                    offset: e.offset,
                    length: e.length,
                    masked,
                });
            }
        }
        let name = format!(
            "{}.{unique}.{}.idx",
            index_key.fingerprint().replace('/', "_"),
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
            slot: group.first().map(|g| g.file.clone()),
        });
        records.push(Record::Clear {
            files: group.iter().map(|g| g.file.clone()).collect(),
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
