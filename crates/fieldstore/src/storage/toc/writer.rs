//! One writer's catalogue for one database: entries pile up in memory and, at commit, become one
//! index file per index key, made visible together by one journal append.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use super::index::{IndexEntry, IndexFile, SEP};
use super::journal::{self, JournalMark, JournalState, Record};
use super::maintenance::CLEARED_GRACE;
use super::{current_uid, sync_dir, unique_name};
use crate::model::Key;
use crate::storage::catalogue::CatalogueWriter;
use crate::storage::fs::{remove_if_exists, FileSystem, FsFile, OpenMode};
use crate::storage::{FieldRef, StorageError};

struct Pending {
    datum_keywords: Vec<String>,
    entries: Vec<IndexEntry>,
    axes: BTreeMap<String, BTreeSet<String>>,
    /// Store objects the entries point into (entry `file` numbers index this).
    objects: Vec<String>,
}

pub struct DbWriter {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    pending: BTreeMap<Key, Pending>,
    /// The journal as far as this writer has read it, kept up to date by each commit's append
    /// (which hands back what others appended meanwhile): a commit never re-parses history.
    journal: JournalState,
    /// The journal this writer read, held open so its inode cannot be reused: a commit finding
    /// another inode at `toc` (or none) knows the database was wiped, and publishes nothing
    /// into a journal that is not the one it read.
    toc_file: Box<dyn FsFile>,
    toc_ino: u64,
    /// Index files this writer's automatic compactions replaced, and when: deleted once no
    /// reader can still be about to open them ([`CLEARED_GRACE`]), so a long forecast does not
    /// leave every index it ever merged on disk until a purge.
    retired: VecDeque<(Instant, Vec<String>)>,
    /// How long replaced indexes stay ([`CLEARED_GRACE`]; tests shorten it).
    retire_after: std::time::Duration,
}

/// Journal bytes since the last checkpoint for which a writer makes one when it closes: so
/// the readers after a run start from where it ended.
const CHECKPOINT_AT_CLOSE: u64 = 4 << 10;

impl Drop for DbWriter {
    fn drop(&mut self) {
        if self.journal.end >= self.journal.checkpointed + CHECKPOINT_AT_CLOSE {
            self.journal.checkpoint(&*self.fs, &self.dir);
        }
    }
}

/// Creates the database directory if needed: `schema` copy and the journal with its Init record,
/// installed atomically so that concurrent creators agree on one.
///
/// Every step is made durable before the journal is linked in (the schema's data, the new
/// directory's entry in its parent), so a database whose `toc` survives a crash is whole.
pub(crate) fn ensure_database(
    fs: &dyn FileSystem,
    dir: &Path,
    db_key: &Key,
    schema_text: &str,
    creator: Option<&str>,
) -> Result<(), StorageError> {
    let toc = dir.join("toc");
    if fs.exists(&toc) {
        return Ok(());
    }
    fs.create_dir_all(dir)
        .map_err(StorageError::io("create directory", dir))?;
    // Even when the directory was there already: an earlier attempt may have made it and failed
    // before its entry was durable, and the `toc` about to be linked in must not outlive it.
    if let Some(parent) = dir.parent() {
        sync_dir(fs, parent)?;
    }
    let unique = unique_name();
    let schema_tmp = dir.join(format!("schema.{unique}"));
    // Synced before it is renamed in: a crash must not leave an empty `schema`.
    let f = fs
        .open(&schema_tmp, OpenMode::CreateNew)
        .map_err(StorageError::io("create", &schema_tmp))?;
    f.append(schema_text.as_bytes())
        .and_then(|()| f.sync_data())
        .map_err(StorageError::io("write", &schema_tmp))?;
    fs.rename(&schema_tmp, &dir.join("schema"))
        .map_err(StorageError::io("rename", &schema_tmp))?;
    let toc_tmp = dir.join(format!("toc.{unique}"));
    journal::append(fs, &toc_tmp, 0, &[init_record(db_key, &unique, creator)])?;
    // link() fails if `toc` exists: the first creator wins and the others use its journal.
    let linked = fs.hard_link(&toc_tmp, &toc);
    let _ = fs.remove_file(&toc_tmp);
    match linked {
        Ok(()) => sync_dir(fs, dir),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(StorageError::Io {
            op: "create",
            path: toc,
            source: e,
        }),
    }
}

fn init_record(db_key: &Key, incarnation: &str, creator: Option<&str>) -> Record {
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    Record::Init {
        db_key: db_key.to_string(),
        uid: current_uid(),
        created,
        incarnation: Some(incarnation.to_string()),
        creator: creator.map(str::to_string),
    }
}

/// As [`ensure_database`], in a new private work directory (a conversion's), and without
/// syncing anything: nothing there is read after a crash (the directory is discarded), and
/// what leaves it is made durable then: the journal by its first publish (its fdatasync covers
/// the Init record too), the index files before they are renamed out. The five syncs
/// `ensure_database` needs cost a conversion about 18 ms per database on this machine's disk.
pub(crate) fn stage_database(
    fs: &dyn FileSystem,
    dir: &Path,
    db_key: &Key,
    schema_text: &str,
    creator: Option<&str>,
) -> Result<(), StorageError> {
    fs.create_dir_all(dir)
        .map_err(StorageError::io("create directory", dir))?;
    for (name, bytes) in [
        ("schema", schema_text.as_bytes().to_vec()),
        (
            "toc",
            journal::encode(&[init_record(db_key, &unique_name(), creator)]),
        ),
    ] {
        let path = dir.join(name);
        fs.open(&path, OpenMode::CreateNew)
            .and_then(|f| f.append(&bytes))
            .map_err(StorageError::io("create", &path))?;
    }
    Ok(())
}

impl DbWriter {
    /// Creates the database if needed; tests use it to make one without a catalogue.
    #[cfg(test)]
    pub fn open(
        fs: &Arc<dyn FileSystem>,
        dir: &Path,
        db_key: &Key,
        schema_text: &str,
    ) -> Result<DbWriter, StorageError> {
        ensure_database(&**fs, dir, db_key, schema_text, None)?;
        Self::open_existing(fs, dir)
    }

    /// A writer for a database that exists; only its owner (or root) may write.
    pub fn open_existing(fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<DbWriter, StorageError> {
        let toc_path = dir.join("toc");
        let toc = fs
            .open(&toc_path, OpenMode::Read)
            .map_err(StorageError::io("open", &toc_path))?;
        let toc_ino = fs
            .metadata(&toc_path)
            .map_err(StorageError::io("stat", &toc_path))?
            .ino;
        // A damaged journal is refused here, before anything is written into the database; so
        // is one that lost flushes it once held (new flushes would go on from an older state).
        let journal = JournalState::read(&**fs, &toc_path)?;
        super::unpublished::refuse_lost(&**fs, dir, &journal)?;
        if let Some((_, uid)) = &journal.init {
            let me = current_uid();
            if *uid != me && me != 0 {
                return Err(StorageError::PermissionDenied {
                    db: dir.to_path_buf(),
                    owner: *uid,
                    user: me,
                    action: "write to",
                });
            }
        }
        Ok(DbWriter {
            fs: fs.clone(),
            dir: dir.to_path_buf(),
            pending: BTreeMap::new(),
            journal,
            toc_file: toc,
            toc_ino,
            retired: VecDeque::new(),
            retire_after: CLEARED_GRACE,
        })
    }
}

impl DbWriter {
    /// Shortens how long replaced indexes stay, for tests.
    #[cfg(test)]
    pub(crate) fn retiring_after(mut self, after: std::time::Duration) -> DbWriter {
        self.retire_after = after;
        self
    }

    /// Deletes the index files this writer's compactions cleared more than [`CLEARED_GRACE`]
    /// ago. Best effort: what is left, purge deletes.
    fn remove_retired(&mut self) {
        while let Some((at, _)) = self.retired.front() {
            if at.elapsed() < self.retire_after {
                break;
            }
            let Some((_, files)) = self.retired.pop_front() else {
                break;
            };
            for f in files {
                let p = self.dir.join(&f);
                if let Err(e) = remove_if_exists(&*self.fs, &p) {
                    tracing::debug!(file = %p.display(), "replaced index not deleted: {e}");
                }
            }
        }
    }

    /// After a failed append, clears the indexes it may have published: when the journal's
    /// fdatasync is what failed, the records are already there, and readers would see a flush
    /// reported as failed, until a crash took it back. Best effort: if this fails as well, the
    /// flush stays published or not as the disk decides (whole either way). Clearing indexes
    /// that never made it in is harmless.
    fn withdraw(&self, toc: &Path, records: &[Record]) {
        let files: Vec<String> = records
            .iter()
            .filter_map(|r| match r {
                Record::Index { file, .. } => Some(file.clone()),
                _ => None,
            })
            .collect();
        if let Err(e) =
            journal::append(&*self.fs, toc, self.journal.end, &[Record::Clear { files }])
        {
            tracing::warn!(db = %self.dir.display(), "could not withdraw the indexes of a failed flush: {e}");
        }
    }
}

impl DbWriter {
    /// What index files made for `publish` must carry as `seen` (see `commit`).
    pub(crate) fn mark(&self) -> Result<JournalMark, StorageError> {
        self.journal.mark(&*self.toc_file, &self.dir.join("toc"))
    }

    /// Makes index files already written into the database's directory visible, in this order
    /// (oldest first), with one journal append and no compaction: a conversion's catalogue,
    /// made whole elsewhere.
    pub(crate) fn publish(&mut self, records: Vec<Record>) -> Result<(), StorageError> {
        let toc = self.dir.join("toc");
        sync_dir(&*self.fs, &self.dir)?;
        let appended = journal::append(&*self.fs, &toc, self.journal.end, &records)?;
        self.journal.apply(appended.others, self.journal.end);
        self.journal.apply(appended.ours, appended.end);
        Ok(())
    }
}

impl CatalogueWriter for DbWriter {
    fn is_dirty(&self) -> bool {
        !self.pending.is_empty()
    }

    fn add(
        &mut self,
        index_key: &Key,
        datum_key: &Key,
        field: FieldRef,
    ) -> Result<(), StorageError> {
        let p = self
            .pending
            .entry(index_key.clone())
            .or_insert_with(|| Pending {
                datum_keywords: datum_key.keywords().map(str::to_string).collect(),
                entries: Vec::new(),
                axes: BTreeMap::new(),
                objects: Vec::new(),
            });
        let file = match p.objects.iter().rposition(|o| *o == field.object) {
            Some(i) => i,
            None => {
                p.objects.push(field.object);
                p.objects.len() - 1
            }
        } as u32;
        let mut values = String::new();
        for (i, kw) in p.datum_keywords.iter().enumerate() {
            if i > 0 {
                values.push(SEP);
            }
            values.push_str(datum_key.get(kw).unwrap_or(""));
        }
        for (kw, v) in datum_key.iter() {
            if !p.axes.get(kw).is_some_and(|s| s.contains(v)) {
                p.axes
                    .entry(kw.to_string())
                    .or_default()
                    .insert(v.to_string());
            }
        }
        p.entries.push(IndexEntry {
            values,
            file,
            offset: field.offset,
            length: field.length,
            masked: false,
            checksum: field.checksum,
            extract: field.extract,
        });
        Ok(())
    }

    /// Writes the index files, then makes them visible with one journal append.
    fn commit(&mut self) -> Result<usize, StorageError> {
        if self.pending.is_empty() {
            return Ok(0);
        }
        if self
            .fs
            .metadata(&self.dir.join("toc"))
            .map_or(true, |m| m.ino != self.toc_ino)
        {
            self.pending.clear();
            return Err(StorageError::Wiped {
                db: self.dir.clone(),
            });
        }
        let toc = self.dir.join("toc");
        // What this writer has read of the journal, made durable: each index file carries it,
        // so that one the journal never names tells a flush cut short (the journal still holds
        // what its writer saw) from lost history (it does not: docs/toc-format.md).
        let seen = self.journal.mark(&*self.toc_file, &toc)?;
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut records = Vec::with_capacity(self.pending.len());
        let mut touched = Vec::with_capacity(self.pending.len());
        let unique = unique_name();
        for (index_key, p) in std::mem::take(&mut self.pending) {
            // Escaped: a value holding `/` or `..` must not name a file outside the database.
            let name = format!("{}.{unique}.idx", super::disk_name(&index_key));
            let count = p.entries.len() as u64;
            IndexFile::write(
                &*self.fs,
                &self.dir.join(&name),
                &index_key.to_string(),
                &p.datum_keywords,
                &p.objects,
                p.entries,
                Some(&seen),
            )?;
            let mut axes: Vec<(String, Vec<String>)> = p
                .axes
                .into_iter()
                .map(|(k, v)| (k, v.into_iter().collect()))
                .collect();
            for (kw, v) in index_key.iter() {
                axes.push((kw.to_string(), vec![v.to_string()]));
            }
            touched.push(index_key.to_string());
            records.push(Record::Index {
                file: name,
                index_key: index_key.to_string(),
                entries: count,
                timestamp,
                axes,
                slot: None,
            });
        }
        sync_dir(&*self.fs, &self.dir)?;
        let appended = match journal::append(&*self.fs, &toc, self.journal.end, &records) {
            Ok(a) => a,
            Err(e) => {
                self.withdraw(&toc, &records);
                return Err(e);
            }
        };
        self.journal.apply(appended.others, self.journal.end);
        self.journal.apply(appended.ours, appended.end);
        // Committed and visible: a failed merge afterwards loses nothing, so it is a warning,
        // not a failed flush.
        match super::compaction::auto_compact(&self.fs, &self.dir, &mut self.journal, &touched) {
            Ok(report) if !report.cleared.is_empty() => {
                self.retired.push_back((Instant::now(), report.cleared));
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(db = %self.dir.display(), "automatic compaction failed: {e}"),
        }
        self.remove_retired();
        self.journal.checkpoint_if_due(&*self.fs, &self.dir);
        Ok(self.journal.live_count())
    }
}
