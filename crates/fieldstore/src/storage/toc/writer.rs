//! One writer's view of one database: appends field bytes to its own data file and, at flush,
//! writes one index file per index key and commits them with one journal append.

use std::collections::{BTreeMap, BTreeSet};
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use super::index::{IndexEntry, IndexFile, SEP};
use super::journal::{self, Record};
use super::unique_name;
use crate::model::Key;
use crate::storage::StorageError;

/// Fields at least this big are written straight through, not copied into the buffer.
const BUFFER: usize = 8 << 20;

struct Pending {
    datum_keywords: Vec<String>,
    entries: Vec<IndexEntry>,
    axes: BTreeMap<String, BTreeSet<String>>,
}

pub struct DbWriter {
    dir: PathBuf,
    data_name: String,
    data: Option<BufWriter<File>>,
    data_len: u64,
    pending: BTreeMap<Key, Pending>,
}

pub(crate) fn current_uid() -> u32 {
    // SAFETY: geteuid has no failure mode.
    unsafe { libc::geteuid() }
}

/// Creates the database directory if needed: `schema` copy and the journal with its Init record,
/// installed atomically so that concurrent creators agree on one.
pub(crate) fn ensure_database(
    dir: &Path,
    db_key: &Key,
    schema_text: &str,
) -> Result<(), StorageError> {
    let toc = dir.join("toc");
    if toc.exists() {
        return Ok(());
    }
    std::fs::create_dir_all(dir).map_err(StorageError::io("create directory", dir))?;
    let unique = unique_name();
    let schema_tmp = dir.join(format!("schema.{unique}"));
    std::fs::write(&schema_tmp, schema_text).map_err(StorageError::io("write", &schema_tmp))?;
    std::fs::rename(&schema_tmp, dir.join("schema"))
        .map_err(StorageError::io("rename", &schema_tmp))?;
    let toc_tmp = dir.join(format!("toc.{unique}"));
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    journal::append(
        &toc_tmp,
        &[Record::Init {
            db_key: db_key.to_string(),
            uid: current_uid(),
            created,
        }],
    )?;
    // link() fails if `toc` exists: the first creator wins and the others use its journal.
    let linked = std::fs::hard_link(&toc_tmp, &toc);
    let _ = std::fs::remove_file(&toc_tmp);
    match linked {
        Ok(()) => sync_dir(dir),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(StorageError::Io {
            op: "create",
            path: toc,
            source: e,
        }),
    }
}

pub(crate) fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(StorageError::io("sync directory", dir))
}

impl DbWriter {
    pub fn open(dir: &Path, db_key: &Key, schema_text: &str) -> Result<DbWriter, StorageError> {
        ensure_database(dir, db_key, schema_text)?;
        let (records, _) = journal::read_from(&dir.join("toc"), 0)?;
        if let Some(Record::Init { uid, .. }) = records.first() {
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
            dir: dir.to_path_buf(),
            data_name: format!("{}.data", unique_name()),
            data: None,
            data_len: 0,
            pending: BTreeMap::new(),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn is_dirty(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Stores the bytes; not visible until `flush`.
    pub fn archive(
        &mut self,
        index_key: &Key,
        datum_key: &Key,
        data: &[u8],
    ) -> Result<(), StorageError> {
        let path = self.dir.join(&self.data_name);
        if self.data.is_none() {
            let f = OpenOptions::new()
                .append(true)
                .create(true)
                .open(&path)
                .map_err(StorageError::io("create", &path))?;
            self.data = Some(BufWriter::with_capacity(BUFFER, f));
        }
        let w = self.data.as_mut().ok_or_else(|| StorageError::Io {
            op: "write",
            path: path.clone(),
            source: std::io::ErrorKind::Other.into(),
        })?;
        // BufWriter writes large slices straight through, so big fields are never copied.
        w.write_all(data)
            .map_err(StorageError::io("write", &path))?;
        let offset = self.data_len;
        self.data_len += data.len() as u64;
        let p = self
            .pending
            .entry(index_key.clone())
            .or_insert_with(|| Pending {
                datum_keywords: datum_key.keywords().map(str::to_string).collect(),
                entries: Vec::new(),
                axes: BTreeMap::new(),
            });
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
            file: 0,
            offset,
            length: data.len() as u64,
            masked: false,
        });
        Ok(())
    }

    /// Makes everything archived durable, then visible with one journal append.
    pub fn flush(&mut self) -> Result<(), StorageError> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let data_path = self.dir.join(&self.data_name);
        if let Some(w) = self.data.as_mut() {
            w.flush().map_err(StorageError::io("write", &data_path))?;
            w.get_ref()
                .sync_data()
                .map_err(StorageError::io("sync", &data_path))?;
        }
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        let mut records = Vec::with_capacity(self.pending.len());
        let unique = unique_name();
        for (index_key, p) in std::mem::take(&mut self.pending) {
            let name = format!("{}.{unique}.idx", index_key.fingerprint().replace('/', "_"));
            let count = p.entries.len() as u64;
            IndexFile::write(
                &self.dir.join(&name),
                &index_key.to_string(),
                &p.datum_keywords,
                std::slice::from_ref(&self.data_name),
                p.entries,
            )?;
            let mut axes: Vec<(String, Vec<String>)> = p
                .axes
                .into_iter()
                .map(|(k, v)| (k, v.into_iter().collect()))
                .collect();
            for (kw, v) in index_key.iter() {
                axes.push((kw.to_string(), vec![v.to_string()]));
            }
            records.push(Record::Index {
                file: name,
                index_key: index_key.to_string(),
                entries: count,
                timestamp,
                axes,
                slot: None,
            });
        }
        sync_dir(&self.dir)?;
        journal::append(&self.dir.join("toc"), &records)
    }
}
