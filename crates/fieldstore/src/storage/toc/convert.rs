//! Converting a database between fieldstore's format and FDB5's, in place and atomically for
//! readers. Both formats keep raw field bytes in data files that neither rewrites, so only the
//! catalogue is rebuilt: the new format's index files and toc are written into a hidden
//! directory beside the database (each of the old format's visible indexes becoming one of the
//! new, oldest first, so masking and `list --full` are kept), checked entry by entry against
//! the old catalogue, then renamed in, the toc last (one rename: readers see the old catalogue
//! or the new one). Every field's bytes are read once for its CRC-32C, which fieldstore's format
//! records and FDB5's cannot. The old catalogue's files go after a grace period. A conversion
//! killed part way leaves only the hidden directory, which the next one removes.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::catalogue::TocCatalogue;
use super::maintenance;
use super::reader::DbReader;
use super::writer::{ensure_database, DbWriter};
use crate::model::config::DbFormat;
use crate::storage::catalogue::{Catalogue, CatalogueReader, CatalogueWriter};
use crate::storage::fdb5::reader::Fdb5Reader;
use crate::storage::fdb5::writer::{create as create_fdb5, Fdb5Writer};
use crate::storage::fs::{FileSystem, Mapped};
use crate::storage::names::unique_name;
use crate::storage::{DbRef, FieldRef, StorageError};

/// In a root: `.NAME.converting.UNIQUE` is a conversion's work directory.
pub const CONVERTING: &str = ".converting.";
/// Written into the archive lock a conversion takes.
const LOCK_TAG: &str = "convert by pid ";

#[derive(Clone)]
pub struct ConvertOptions {
    pub dry_run: bool,
    /// Leave the old format's catalogue files (unreferenced) instead of deleting them.
    pub keep: bool,
    /// How long readers that opened the old catalogue get before its files are deleted.
    pub grace: Duration,
    /// Called with (fields done, fields in all).
    pub progress: Option<Arc<dyn Fn(u64, u64) + Send + Sync>>,
}

impl Default for ConvertOptions {
    fn default() -> Self {
        ConvertOptions {
            dry_run: false,
            keep: false,
            grace: Duration::from_secs(2),
            progress: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConvertReport {
    pub dir: PathBuf,
    pub from: DbFormat,
    pub to: DbFormat,
    /// Index entries carried over (masked ones included).
    pub entries: u64,
    pub indexes: u64,
    pub done: bool,
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StorageError {
    StorageError::io(op, path.to_path_buf())
}

fn config(detail: String) -> StorageError {
    StorageError::Config { detail }
}

/// One visible index of the old catalogue, oldest first: its key and entries.
struct OldIndex {
    key: crate::model::Key,
    entries: Vec<(crate::model::Key, FieldRef)>,
}

/// The old catalogue's visible indexes, oldest first; within one index a key is kept once (the
/// copy a compaction did not flag as replaced).
fn old_indexes(reader: &dyn CatalogueReader) -> Result<Vec<OldIndex>, StorageError> {
    let mut out = Vec::new();
    for i in (0..reader.indexes().len()).rev() {
        let key = reader.indexes()[i].index_key.clone();
        let mut seen: HashMap<crate::model::Key, (usize, bool)> = HashMap::new();
        let mut entries: Vec<(crate::model::Key, FieldRef)> = Vec::new();
        for e in reader.entries(i, true)? {
            let e = e?;
            match seen.get(&e.datum).copied() {
                Some((at, masked)) if masked && !e.masked => {
                    entries[at] = (e.datum.clone(), e.field);
                    seen.insert(e.datum, (at, false));
                }
                Some(_) => {}
                None => {
                    seen.insert(e.datum.clone(), (entries.len(), e.masked));
                    entries.push((e.datum, e.field));
                }
            }
        }
        out.push(OldIndex { key, entries });
    }
    Ok(out)
}

/// Reads fields' bytes from the database's data files (mapped once each) for their checksums.
struct Bytes<'a> {
    fs: &'a dyn FileSystem,
    dir: &'a Path,
    maps: HashMap<String, Mapped>,
}

impl Bytes<'_> {
    fn crc(&mut self, f: &FieldRef) -> Result<u32, StorageError> {
        if !self.maps.contains_key(&f.object) {
            // Adopted files and overlays lie elsewhere: their path, without what adoption noted.
            let p = self
                .dir
                .join(crate::storage::posix::split_adopted(&f.object).0);
            let m = self.fs.map(&p).map_err(io("open", &p))?;
            self.maps.insert(f.object.clone(), m);
        }
        let m = &self.maps[&f.object];
        let slice = usize::try_from(f.offset)
            .ok()
            .zip(usize::try_from(f.length).ok())
            .and_then(|(o, n)| m.get(o..o.checked_add(n)?));
        let Some(bytes) = slice else {
            return Err(StorageError::Corrupt {
                path: self.dir.join(&f.object),
                offset: f.offset,
                detail: format!(
                    "a field of {} bytes at offset {} lies past the end of the data file ({} bytes)",
                    f.length,
                    f.offset,
                    m.len()
                ),
            });
        };
        let crc = crate::checksum::crc32c(bytes);
        f.verify(
            crc,
            || self.dir.join(&f.object).display().to_string(),
            || "?".into(),
        )?;
        Ok(crc)
    }
}

fn files_in(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<String>, StorageError> {
    Ok(fs
        .read_dir(dir)
        .map_err(io("list", dir))?
        .into_iter()
        .filter(|e| !e.is_dir)
        .map(|e| e.file_name())
        .collect())
}

impl TocCatalogue {
    /// Converts the database `db` to `to`; a database already in that format is left alone.
    pub fn convert_database(
        &self,
        db: &DbRef,
        to: DbFormat,
        opts: &ConvertOptions,
    ) -> Result<ConvertReport, StorageError> {
        let fs = self.file_system();
        let dir = PathBuf::from(&db.id);
        let from = if self.is_fdb5(db) {
            DbFormat::Fdb5
        } else {
            DbFormat::Fieldstore
        };
        let reader: Box<dyn CatalogueReader> = match from {
            DbFormat::Fdb5 => Box::new(Fdb5Reader::open(&fs, &dir)?),
            DbFormat::Fieldstore => Box::new(DbReader::open(&fs, &dir)?),
        };
        let old = old_indexes(&*reader)?;
        let mut report = ConvertReport {
            dir: dir.clone(),
            from,
            to,
            entries: old.iter().map(|i| i.entries.len() as u64).sum(),
            indexes: old.len() as u64,
            done: false,
        };
        if from == to || opts.dry_run {
            return Ok(report);
        }
        self.may_change(db, "convert")?;
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| config(format!("{} is not a database directory", db.id)))?;
        let parent = dir.parent().unwrap_or(Path::new("/")).to_path_buf();
        // What a killed conversion left.
        let prefix = format!(".{name}{CONVERTING}");
        for e in fs.read_dir(&parent).map_err(io("list", &parent))? {
            if e.is_dir && e.file_name().starts_with(&prefix) {
                std::fs::remove_dir_all(&e.path).map_err(io("remove", &e.path))?;
            }
        }
        let lock = maintenance::lock_path(&dir, "archive");
        match std::fs::read_to_string(&lock) {
            Ok(text) if !text.starts_with(LOCK_TAG) => {
                return Err(config(format!(
                    "{} is locked for archive (an operator's lock: `fieldstore control --unlock --archive`)",
                    dir.display()
                )))
            }
            _ => {}
        }
        std::fs::write(&lock, format!("{LOCK_TAG}{}", std::process::id()))
            .map_err(io("create", &lock))?;
        let work = parent.join(format!("{prefix}{}", unique_name()));
        let result = self.convert_locked(db, &dir, &work, &old, to, opts);
        let _ = std::fs::remove_dir_all(&work);
        let _ = std::fs::remove_file(&lock);
        // The reader cache must not hand out the old catalogue's reader.
        self.forget_readers(&dir);
        result?;
        report.done = true;
        Ok(report)
    }

    fn convert_locked(
        &self,
        db: &DbRef,
        dir: &Path,
        work: &Path,
        old: &[OldIndex],
        to: DbFormat,
        opts: &ConvertOptions,
    ) -> Result<(), StorageError> {
        let fs = self.file_system();
        let schema_text = String::from_utf8_lossy(
            &fs.read(&dir.join("schema"))
                .map_err(io("read", &dir.join("schema")))?,
        )
        .into_owned();
        let before = files_in(&*fs, dir)?;
        let total: u64 = old.iter().map(|i| i.entries.len() as u64).sum();
        let mut done = 0u64;
        let mut bytes = Bytes {
            fs: &*fs,
            dir,
            maps: HashMap::new(),
        };
        // The new catalogue, written in the work directory; its entries name the data files
        // by their names in the database's directory, where the index files will join them.
        let mut writer: Box<dyn CatalogueWriter> = match to {
            DbFormat::Fieldstore => {
                ensure_database(
                    &*fs,
                    work,
                    &db.key,
                    &schema_text,
                    self.creator(db)?.as_deref(),
                )?;
                Box::new(DbWriter::open_existing(&fs, work)?)
            }
            DbFormat::Fdb5 => {
                create_fdb5(&*fs, work, &db.key, &schema_text)?;
                Box::new(Fdb5Writer::open(&fs, work)?)
            }
        };
        for ix in old {
            for (datum, field) in &ix.entries {
                let mut f = field.clone();
                let crc = bytes.crc(field)?;
                if to == DbFormat::Fieldstore {
                    f.checksum = Some(crc);
                }
                writer.add(&ix.key, datum, f)?;
                done += 1;
                if let Some(p) = &opts.progress {
                    if done.is_multiple_of(4096) || done == total {
                        p(done, total);
                    }
                }
            }
            writer.commit()?;
        }
        drop(writer);
        // Checked entry by entry before anything is renamed in.
        let new_reader: Box<dyn CatalogueReader> = match to {
            DbFormat::Fdb5 => Box::new(Fdb5Reader::open(&fs, work)?),
            DbFormat::Fieldstore => Box::new(DbReader::open(&fs, work)?),
        };
        let newest = newest_of(old);
        for ((index, datum), field) in &newest {
            let got = new_reader.lookup(index, datum)?;
            let same = got.as_ref().is_some_and(|g| {
                g.object == field.object && g.offset == field.offset && g.length == field.length
            });
            if !same {
                return Err(StorageError::Corrupt {
                    path: work.to_path_buf(),
                    offset: 0,
                    detail: format!(
                        "the converted catalogue gives {index}{datum} as {got:?}, the original as {field:?}: nothing was changed"
                    ),
                });
            }
        }
        drop(new_reader);
        if files_in(&*fs, dir)? != before {
            return Err(config(format!(
                "{} changed while it was converted (a writer that opened it before the conversion is still archiving): stop it and convert again",
                dir.display()
            )));
        }
        // The new index files join the data files; then the toc, in one rename.
        let new_files: Vec<String> = files_in(&*fs, work)?
            .into_iter()
            .filter(|f| f != "toc" && f != "schema" && !f.ends_with(".lock"))
            .collect();
        for f in &new_files {
            fs.rename(&work.join(f), &dir.join(f))
                .map_err(io("rename", &work.join(f)))?;
        }
        fs.sync_dir(dir).map_err(io("sync directory", dir))?;
        fs.rename(&work.join("toc"), &dir.join("toc"))
            .map_err(io("rename", &work.join("toc")))?;
        fs.sync_dir(dir).map_err(io("sync directory", dir))?;
        if !opts.keep {
            std::thread::sleep(opts.grace);
            for f in before {
                let old_catalogue = match to {
                    // FDB5's index files and sub-tocs.
                    DbFormat::Fieldstore => f.ends_with(".index") || f.starts_with("toc."),
                    DbFormat::Fdb5 => f.ends_with(".idx") || f == "compaction.flock",
                };
                if old_catalogue && !new_files.contains(&f) {
                    let p = dir.join(&f);
                    crate::storage::fs::remove_if_exists(&*fs, &p).map_err(io("remove", &p))?;
                }
            }
        }
        Ok(())
    }
}

/// The field each key of the old catalogue resolves to (newest index wins).
fn newest_of(old: &[OldIndex]) -> HashMap<(crate::model::Key, crate::model::Key), FieldRef> {
    let mut out = HashMap::new();
    for ix in old {
        for (datum, field) in &ix.entries {
            out.insert((ix.key.clone(), datum.clone()), field.clone());
        }
    }
    out
}
