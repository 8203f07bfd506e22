//! Writing into a database kept in FDB5's format, so FDB5's programs read what fieldstore adds.
//!
//! A flush writes one new index file per index key (one B-tree, at offset 0), synced, then makes
//! them visible with one record appended to the main toc: the index record itself when the flush
//! has one index, else a sub-toc record naming a new sub-toc (synced before it is named) that
//! holds the flush's index records. So a flush is visible whole or not at all to FDB5 and to
//! fieldstore, a crash leaves at most unreferenced files, and each writer has sub-tocs of its
//! own, as FDB5's writers do. What the format cannot hold: per-field checksums, offsets in index
//! records past 2 GiB (every tree here is at offset 0), flush times after 2038.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::btree::{build, FieldLoc, Geometry};
use super::reader::{datum_keywords, fingerprint};
use super::record::{encode_record, IndexRecord, Payload, RecordKey, Writer};
use crate::model::schema::Schema;
use crate::model::Key;
use crate::storage::catalogue::CatalogueWriter;
use crate::storage::fs::{FileSystem, OpenMode};
use crate::storage::toc::disk_name;
use crate::storage::{FieldRef, StorageError};

/// Creates an FDB5 database in `dir` if there is none: the schema copy (renamed into place),
/// then a `toc` holding its TOC_INIT record, linked into place so that of two creators the
/// first wins and the other uses its toc.
pub(crate) fn create(
    fs: &dyn FileSystem,
    dir: &Path,
    db: &Key,
    schema_text: &str,
) -> Result<(), StorageError> {
    let toc = dir.join("toc");
    if fs.exists(&toc) {
        return Ok(());
    }
    // dbnames may nest a database several directories deep: every directory made here must be
    // durable in its parent, or a crash loses the database with its first flush.
    let made: Vec<PathBuf> = dir
        .ancestors()
        .take_while(|a| !fs.is_dir(a))
        .map(Path::to_path_buf)
        .collect();
    fs.create_dir_all(dir)
        .map_err(StorageError::io("create directory", dir))?;
    let mut synced: Vec<&Path> = made.iter().filter_map(|d| d.parent()).collect();
    // Even when the directory was there already: an earlier attempt may have made it and failed
    // before its entry was durable.
    synced.extend(dir.parent());
    synced.dedup();
    for parent in synced {
        fs.sync_dir(parent)
            .map_err(StorageError::io("sync directory", parent))?;
    }
    let unique = crate::storage::names::unique_name();
    let schema_tmp = dir.join(format!("schema.{unique}"));
    write_synced(fs, &schema_tmp, schema_text.as_bytes())?;
    fs.rename(&schema_tmp, &dir.join("schema"))
        .map_err(StorageError::io("rename", &schema_tmp))?;
    let init = encode_record(
        &Payload::Init {
            key: RecordKey::from_key(db),
            sub_toc: false,
        },
        &Writer::this_process(),
    );
    let toc_tmp = dir.join(format!("toc.creating.{unique}"));
    write_synced(fs, &toc_tmp, &init)?;
    let linked = fs.hard_link(&toc_tmp, &toc);
    let _ = fs.remove_file(&toc_tmp);
    match linked {
        Ok(()) => fs
            .sync_dir(dir)
            .map_err(StorageError::io("sync directory", dir)),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(StorageError::io("create", &toc)(e)),
    }
}

fn write_synced(fs: &dyn FileSystem, path: &Path, bytes: &[u8]) -> Result<(), StorageError> {
    let f = fs
        .open(path, OpenMode::CreateNew)
        .map_err(StorageError::io("create", path))?;
    f.append(bytes)
        .and_then(|()| f.sync_data())
        .map_err(StorageError::io("write", path))
}

/// The index type FDB5 5.25 picks for a datum rule: 64-byte keys from 8 keywords on.
pub(crate) fn index_type_for(keywords: usize) -> &'static str {
    if keywords >= 8 {
        "BTreeIndex64"
    } else {
        "BTreeIndex"
    }
}

/// One index key's fields of the batch, by fingerprint (the newest of a key wins).
struct Pending {
    index: Key,
    keywords: Vec<String>,
    fields: BTreeMap<String, (Key, FieldRef)>,
}

pub(crate) struct Fdb5Writer {
    fs: Arc<dyn FileSystem>,
    dir: PathBuf,
    /// Where the fields' data files are (and their side files go): the database's directory,
    /// but for a conversion, which writes the catalogue in a work directory beside it.
    data_dir: PathBuf,
    db: Key,
    schema: Option<Schema>,
    pending: Vec<Pending>,
    /// Whether flushes add to the side files of extraction information: only once the database
    /// has some (`extract-index` made them). FDB5's own `fdb-wipe` (5.10 and 5.25) refuses a
    /// database holding files it does not know, so none are made unasked.
    side_files: bool,
}

/// Whether the directory holds side files of extraction information.
fn has_side_files(fs: &dyn FileSystem, dir: &Path) -> bool {
    fs.read_dir(dir).is_ok_and(|entries| {
        entries
            .iter()
            .any(|e| !e.is_dir && e.file_name().ends_with(crate::storage::sidecar::SUFFIX))
    })
}

impl Fdb5Writer {
    pub fn open(fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<Fdb5Writer, StorageError> {
        let toc = dir.join("toc");
        let f = fs
            .open(&toc, OpenMode::Read)
            .map_err(StorageError::io("open", &toc))?;
        let (db, _) = super::toc::read_init(&*f, &toc)?;
        let schema = fs
            .read(&dir.join("schema"))
            .ok()
            .and_then(|t| Schema::parse(&String::from_utf8_lossy(&t), "schema").ok());
        Ok(Fdb5Writer {
            fs: fs.clone(),
            dir: dir.to_path_buf(),
            data_dir: dir.to_path_buf(),
            db,
            schema,
            pending: Vec::new(),
            side_files: has_side_files(&**fs, dir),
        })
    }

    /// The fields added name data files of `dir` (a conversion's database), not of the
    /// directory the catalogue is written in.
    pub fn with_data_dir(mut self, dir: &Path) -> Fdb5Writer {
        self.data_dir = dir.to_path_buf();
        self.side_files = has_side_files(&*self.fs, dir);
        self
    }

    /// Writes one index key's tree into a new index file; returns its record.
    fn write_index(&self, p: &Pending, now: i64) -> Result<IndexRecord, StorageError> {
        let index_type = index_type_for(p.keywords.len());
        let geo = Geometry::of(index_type).ok_or_else(|| StorageError::Config {
            detail: format!("index type {index_type} unknown"),
        })?;
        let mut uris: Vec<(u64, String)> = Vec::new();
        let mut entries = Vec::with_capacity(p.fields.len());
        let mut axes: BTreeMap<&str, std::collections::BTreeSet<&str>> = BTreeMap::new();
        for kw in &p.keywords {
            axes.entry(kw.as_str()).or_default();
        }
        for (fp, (datum, field)) in &p.fields {
            // An adopted file is named by its path alone: FDB5 reads it there.
            let object = crate::storage::posix::split_adopted(&field.object).0;
            let uri = match uris.iter().find(|(_, o)| o == object) {
                Some((id, _)) => *id,
                None => {
                    let id = uris.len() as u64;
                    uris.push((id, object.to_string()));
                    id
                }
            };
            for kw in &p.keywords {
                if let Some(s) = axes.get_mut(kw.as_str()) {
                    s.insert(datum.get(kw).unwrap_or(""));
                }
            }
            entries.push((
                fp.clone(),
                FieldLoc {
                    uri,
                    offset: field.offset,
                    length: field.length,
                },
            ));
        }
        let bytes = build(geo, &entries).map_err(|detail| StorageError::Config {
            detail: format!(
                "database {} cannot hold index {} in FDB5's format: {detail}",
                self.db, p.index
            ),
        })?;
        let name = format!(
            "{}.{}.index",
            disk_name(&p.index),
            crate::storage::names::unique_name()
        );
        write_synced(&*self.fs, &self.dir.join(&name), &bytes)?;
        Ok(IndexRecord {
            path: name,
            offset: 0,
            index_type: index_type.to_string(),
            uris,
            axes: axes
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.into_iter().map(str::to_string).collect()))
                .collect(),
            key: RecordKey::from_key(&p.index),
            time: now,
        })
    }
}

impl Fdb5Writer {
    /// Appends the extraction information of the batch's fields to the side files of their
    /// data files (`storage::sidecar`), which FDB5's records cannot hold. The store synced the
    /// fields' bytes before this commit, so a record never names bytes that are not there; a
    /// crash after it and before the toc record leaves records no index names, which no reader
    /// asks for.
    fn write_side_files(&self, pending: &[Pending]) -> Result<(), StorageError> {
        use crate::storage::sidecar::{has_side, head_crc, read_head, SideEntry};
        if !self.side_files {
            return Ok(());
        }
        let mut by_object: BTreeMap<&str, Vec<&FieldRef>> = BTreeMap::new();
        for p in pending {
            for (_, field) in p.fields.values() {
                if field.extract.is_some() && has_side(&field.object) {
                    by_object
                        .entry(field.object.as_str())
                        .or_default()
                        .push(field);
                }
            }
        }
        for (object, fields) in by_object {
            let data = self.data_dir.join(object);
            let file = self
                .fs
                .open(&data, OpenMode::Read)
                .map_err(StorageError::io("open", &data))?;
            let mut entries = Vec::with_capacity(fields.len());
            for field in fields {
                let Some(info) = &field.extract else { continue };
                let head = read_head(&*file, &data, field.offset, field.length)?;
                entries.push(SideEntry {
                    offset: field.offset,
                    length: field.length,
                    head_crc: head_crc(&head),
                    info: info.clone(),
                });
            }
            crate::storage::sidecar::append(&*self.fs, &data, &entries)?;
        }
        Ok(())
    }
}

impl CatalogueWriter for Fdb5Writer {
    fn add(&mut self, index: &Key, datum: &Key, field: FieldRef) -> Result<(), StorageError> {
        let pos = match self.pending.iter().position(|p| p.index == *index) {
            Some(i) => i,
            None => {
                let keywords = self
                    .schema
                    .as_ref()
                    .and_then(|s| datum_keywords(s, &self.db, index))
                    .unwrap_or_else(|| datum.keywords().map(str::to_string).collect());
                self.pending.push(Pending {
                    index: index.clone(),
                    keywords,
                    fields: BTreeMap::new(),
                });
                self.pending.len() - 1
            }
        };
        let p = &mut self.pending[pos];
        let fp = fingerprint(&p.keywords, datum);
        let k = Geometry::of(index_type_for(p.keywords.len())).map_or(32, |g| g.key);
        if fp.len() > k {
            return Err(StorageError::Config {
                detail: format!(
                    "field {datum} of database {}: its fingerprint '{fp}' is longer than the {k} bytes FDB5's index keys hold",
                    self.db
                ),
            });
        }
        if !datum
            .keywords()
            .all(|kw| p.keywords.iter().any(|k| k == kw))
        {
            return Err(StorageError::Config {
                detail: format!(
                    "field {datum} does not fit the datum rule ({}) of database {}'s schema copy",
                    p.keywords.join(", "),
                    self.db
                ),
            });
        }
        p.fields.insert(fp, (datum.clone(), field));
        Ok(())
    }

    fn is_dirty(&self) -> bool {
        self.pending.iter().any(|p| !p.fields.is_empty())
    }

    fn commit(&mut self) -> Result<usize, StorageError> {
        let pending: Vec<Pending> = std::mem::take(&mut self.pending)
            .into_iter()
            .filter(|p| !p.fields.is_empty())
            .collect();
        if pending.is_empty() {
            return Ok(0);
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        self.write_side_files(&pending)?;
        let mut records = Vec::with_capacity(pending.len());
        for p in &pending {
            records.push(Payload::Index(self.write_index(p, now)?));
        }
        self.fs
            .sync_dir(&self.dir)
            .map_err(StorageError::io("sync directory", &self.dir))?;
        let toc = self.dir.join("toc");
        if records.len() == 1 {
            super::maintenance::append(&*self.fs, &toc, &records)?;
            return Ok(0);
        }
        // Several indexes: they go into a sub-toc of their own, named in one record.
        let who = Writer::this_process();
        let name = format!("toc.{}", crate::storage::names::unique_name());
        let mut bytes = encode_record(
            &Payload::Init {
                key: RecordKey::from_key(&self.db),
                sub_toc: true,
            },
            &who,
        );
        for r in &records {
            bytes.extend_from_slice(&encode_record(r, &who));
        }
        let sub = self.dir.join(&name);
        write_synced(&*self.fs, &sub, &bytes)?;
        self.fs
            .sync_dir(&self.dir)
            .map_err(StorageError::io("sync directory", &self.dir))?;
        super::maintenance::append(&*self.fs, &toc, &[Payload::SubToc { path: name }])?;
        Ok(0)
    }
}
