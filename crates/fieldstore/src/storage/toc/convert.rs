//! Converting a database between fieldstore's format and FDB5's, in place and atomically for
//! readers. Both formats keep raw field bytes in data files that neither rewrites, so only the
//! catalogue is rebuilt: the new format's index files and toc are written into a hidden
//! directory beside the database (each of the old format's visible indexes becoming one of the
//! new, oldest first, so masking and `list --full` are kept), checked against the old
//! catalogue, then renamed in, the toc last (one rename: readers see the old catalogue or the
//! new one). Every field's bytes are read once for its CRC-32C, which fieldstore's format
//! records and FDB5's cannot. The old catalogue's files go after a grace period, each
//! database's counted from its switch. A conversion killed part way leaves only the hidden
//! directory, which the next one removes; databases it finished are in the new format and
//! skipped.
//!
//! From FDB5's format, indexes are converted on all cores straight from their B-trees (a tree
//! holds each fingerprint once, in order; its toc record has its axes): no key is built per
//! entry, so conversion runs at about the speed of reading the data files.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::catalogue::TocCatalogue;
use super::index::{IndexEntry, IndexFile, SEP};
use super::journal::{JournalMark, Record};
use super::maintenance;
use super::reader::DbReader;
use super::writer::{stage_database, DbWriter};
use crate::model::config::DbFormat;
use crate::storage::catalogue::{Catalogue, CatalogueReader, CatalogueWriter};
use crate::storage::fdb5::reader::{datum_key, Fdb5Reader, RawIndex};
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
    /// The old catalogue's files, unreferenced now: [`OldCatalogues`] deletes them once readers
    /// had their grace period (empty with `keep`).
    pub old_files: Vec<PathBuf>,
}

/// Deletes what conversions left of the old catalogues, each database's after its own grace
/// period, in the background: the next database converts meanwhile (unlinking a large FDB5
/// index drops its cached pages, which takes a while). `finish` waits for all.
#[derive(Default)]
pub struct OldCatalogues {
    removing: Vec<std::thread::JoinHandle<Result<(), StorageError>>>,
}

impl OldCatalogues {
    /// Removes `report`'s old files once `grace` has passed from now.
    pub fn remove_after(
        &mut self,
        fs: Arc<dyn FileSystem>,
        report: &ConvertReport,
        grace: Duration,
    ) {
        if report.old_files.is_empty() {
            return;
        }
        let files = report.old_files.clone();
        self.removing.push(std::thread::spawn(move || {
            std::thread::sleep(grace);
            remove_files(&*fs, &files)
        }));
    }

    /// Waits for every removal; the first error.
    pub fn finish(self) -> Result<(), StorageError> {
        let mut first = Ok(());
        for h in self.removing {
            let r = h
                .join()
                .unwrap_or_else(|_| Err(config("a removing thread panicked".into())));
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

/// Unlinks files on up to two threads: a directory's entries change one at a time, but the
/// pages a file drops are freed by the thread that unlinks it.
fn remove_files(fs: &dyn FileSystem, files: &[PathBuf]) -> Result<(), StorageError> {
    let threads = std::thread::available_parallelism().map_or(1, |t| t.get().clamp(1, 2));
    let per = files.len().div_ceil(threads).max(1);
    std::thread::scope(|s| {
        let handles: Vec<_> = files
            .chunks(per)
            .map(|chunk| {
                s.spawn(move || {
                    for p in chunk {
                        crate::storage::fs::remove_if_exists(fs, p).map_err(io("remove", p))?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| {
            h.join()
                .unwrap_or_else(|_| Err(config("a removing thread panicked".into())))
        })
    })
}

/// Runs `convert` on every database, two at a time where the machine has the cores, giving
/// the results in the order of `dbs`. A database's conversion ends in a chain of syncs (its
/// index files, its journal, the directory twice) during which the CPU would idle; beside a
/// second conversion it does not. Each conversion locks its own database only.
pub fn each_database<T: Send>(
    dbs: &[DbRef],
    convert: impl Fn(&DbRef) -> Result<T, StorageError> + Sync,
) -> Vec<Result<T, StorageError>> {
    let threads = std::thread::available_parallelism()
        .map_or(1, |t| t.get())
        .clamp(1, 2)
        .min(dbs.len());
    if threads <= 1 {
        return dbs.iter().map(&convert).collect();
    }
    let next = AtomicUsize::new(0);
    let results: Vec<Mutex<Option<Result<T, StorageError>>>> =
        dbs.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(db) = dbs.get(i) else { break };
                let r = convert(db);
                if let Ok(mut slot) = results[i].lock() {
                    *slot = Some(r);
                }
            });
        }
    });
    results
        .into_iter()
        .map(|slot| {
            slot.into_inner().ok().flatten().unwrap_or_else(|| {
                Err(config(
                    "a conversion thread stopped without a result".into(),
                ))
            })
        })
        .collect()
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

/// The files of a directory, but side files of extraction information: `extract-index` may
/// write them meanwhile (and a conversion to FDB5's format appends to those there are), and
/// neither changes the catalogue.
fn files_in(fs: &dyn FileSystem, dir: &Path) -> Result<Vec<String>, StorageError> {
    Ok(fs
        .read_dir(dir)
        .map_err(io("list", dir))?
        .into_iter()
        .filter(|e| !e.is_dir && !e.file_name().ends_with(crate::storage::sidecar::SUFFIX))
        .map(|e| e.file_name())
        .collect())
}

/// What a conversion reads its entries from.
enum Source<'a> {
    /// FDB5's B-trees, read raw.
    Fdb5(&'a Fdb5Reader),
    /// A catalogue's entries, listed (fieldstore's format, to FDB5's).
    Listed(&'a [OldIndex]),
}

impl TocCatalogue {
    /// Converts the database `db` to `to`; a database already in that format is left alone.
    /// The old catalogue's files are left for [`OldCatalogues`].
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
        let fdb5 = (from == DbFormat::Fdb5 && to == DbFormat::Fieldstore)
            .then(|| Fdb5Reader::open(&fs, &dir))
            .transpose()?;
        let listed = match &fdb5 {
            Some(_) => Vec::new(),
            None => old_indexes(&*reader)?,
        };
        let source = match &fdb5 {
            Some(r) => Source::Fdb5(r),
            None => Source::Listed(&listed),
        };
        let entries = match source {
            Source::Fdb5(r) => {
                let mut n = 0;
                for pos in 0..r.indexes().len() {
                    n += r.raw_index(pos)?.entry_count()?;
                }
                n
            }
            Source::Listed(old) => old.iter().map(|i| i.entries.len() as u64).sum(),
        };
        let mut report = ConvertReport {
            dir: dir.clone(),
            from,
            to,
            entries,
            indexes: reader.indexes().len() as u64,
            done: false,
            old_files: Vec::new(),
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
        let result = self.convert_locked(db, &dir, &work, &*reader, source, entries, to, opts);
        let _ = std::fs::remove_dir_all(&work);
        let _ = std::fs::remove_file(&lock);
        // The reader cache must not hand out the old catalogue's reader.
        self.forget_readers(&dir);
        report.old_files = result?;
        if opts.keep {
            report.old_files.clear();
        }
        report.done = true;
        Ok(report)
    }

    /// Writes the new catalogue into `work`, checks it, renames it in; returns the old
    /// catalogue's files.
    #[allow(clippy::too_many_arguments)]
    fn convert_locked(
        &self,
        db: &DbRef,
        dir: &Path,
        work: &Path,
        old_reader: &dyn CatalogueReader,
        source: Source<'_>,
        total: u64,
        to: DbFormat,
        opts: &ConvertOptions,
    ) -> Result<Vec<PathBuf>, StorageError> {
        let fs = self.file_system();
        let schema_text = String::from_utf8_lossy(
            &fs.read(&dir.join("schema"))
                .map_err(io("read", &dir.join("schema")))?,
        )
        .into_owned();
        let before = files_in(&*fs, dir)?;
        // The new catalogue, written in the work directory; its entries name the data files
        // by their names in the database's directory, where the index files will join them.
        match (to, source) {
            (DbFormat::Fieldstore, source) => {
                stage_database(
                    &*fs,
                    work,
                    &db.key,
                    &schema_text,
                    self.creator(db)?.as_deref(),
                )?;
                let mut writer = DbWriter::open_existing(&fs, work)?;
                let seen = writer.mark()?;
                let job = Job {
                    fs: &*fs,
                    dir,
                    work,
                    seen: &seen,
                    unique: unique_name(),
                    maps: Mutex::new(HashMap::new()),
                    done: AtomicU64::new(0),
                    total,
                    progress: opts.progress.clone(),
                };
                let Source::Fdb5(r) = source else {
                    return Err(config(
                        "fieldstore's format is converted from FDB5's".into(),
                    ));
                };
                let converted = job.convert_fdb5(r)?;
                sync_together(&converted)?;
                let records = converted.iter().map(|c| c.record.clone()).collect();
                writer.publish(records)?;
                drop(writer);
                check_sample(old_reader, &DbReader::open(&fs, work)?, &converted, total)?;
            }
            (DbFormat::Fdb5, source) => {
                let Source::Listed(old) = source else {
                    return Err(config(
                        "FDB5's format is converted from entries listed".into(),
                    ));
                };
                self.to_fdb5(dir, work, db, &schema_text, old, total, opts)?;
            }
        }
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
        Ok(before
            .into_iter()
            .filter(|f| {
                let old_catalogue = match to {
                    // FDB5's index files and sub-tocs.
                    DbFormat::Fieldstore => f.ends_with(".index") || f.starts_with("toc."),
                    DbFormat::Fdb5 => f.ends_with(".idx") || f == "compaction.flock",
                };
                old_catalogue && !new_files.contains(f)
            })
            .map(|f| dir.join(f))
            .collect())
    }

    /// The FDB5-format catalogue of the listed indexes, written and checked key by key.
    #[allow(clippy::too_many_arguments)]
    fn to_fdb5(
        &self,
        dir: &Path,
        work: &Path,
        db: &DbRef,
        schema_text: &str,
        old: &[OldIndex],
        total: u64,
        opts: &ConvertOptions,
    ) -> Result<(), StorageError> {
        let fs = self.file_system();
        let mut bytes = Bytes {
            fs: &*fs,
            dir,
            maps: HashMap::new(),
        };
        create_fdb5(&*fs, work, &db.key, schema_text)?;
        // Side files of extraction information go beside the data files, which stay in `dir`.
        let mut writer = Fdb5Writer::open(&fs, work)?.with_data_dir(dir);
        let mut done = 0u64;
        for ix in old {
            for (datum, field) in &ix.entries {
                bytes.crc(field)?;
                writer.add(&ix.key, datum, field.clone())?;
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
        let new_reader = Fdb5Reader::open(&fs, work)?;
        let newest = newest_of(old);
        for ((index, datum), field) in &newest {
            let got = new_reader.lookup(index, datum)?;
            if !got.as_ref().is_some_and(|g| same_place(g, field)) {
                return Err(mismatch(
                    work,
                    &format!("{index}{datum}"),
                    &got,
                    &Some(field),
                ));
            }
        }
        Ok(())
    }
}

/// Makes the converted index files durable before the journal names them. Their writeback
/// started as each was written; the syncs run at once, so the file system can serve them with
/// one journal commit rather than one each (a few milliseconds apiece on most disks).
fn sync_together(converted: &[Converted]) -> Result<(), StorageError> {
    for batch in converted.chunks(32) {
        let results: Vec<Result<(), StorageError>> = std::thread::scope(|s| {
            let handles: Vec<_> = batch
                .iter()
                .map(|c| s.spawn(|| c.file.sync_data().map_err(io("sync", &c.path))))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(config("a sync thread panicked".into())))
                })
                .collect()
        });
        results.into_iter().collect::<Result<(), _>>()?;
    }
    Ok(())
}

fn same_place(a: &FieldRef, b: &FieldRef) -> bool {
    a.object == b.object && a.offset == b.offset && a.length == b.length
}

fn mismatch(
    work: &Path,
    what: &str,
    new: &Option<impl std::fmt::Debug>,
    old: &Option<impl std::fmt::Debug>,
) -> StorageError {
    StorageError::Corrupt {
        path: work.to_path_buf(),
        offset: 0,
        detail: format!(
            "the converted catalogue gives {what} as {new:?}, the original as {old:?}: nothing was changed"
        ),
    }
}

/// Keys of each converted index looked up through both catalogues' readers.
const SAMPLES: usize = 8;

/// What the workers converting one database's indexes share.
struct Job<'a> {
    fs: &'a dyn FileSystem,
    dir: &'a Path,
    work: &'a Path,
    seen: &'a JournalMark,
    unique: String,
    /// Data files mapped so far (fields' bytes are read for their checksums).
    maps: Mutex<HashMap<String, Arc<Mapped>>>,
    done: AtomicU64,
    total: u64,
    progress: Option<Arc<dyn Fn(u64, u64) + Send + Sync>>,
}

/// An index written: its journal record, and keys of it to look up once all are.
struct Converted {
    record: Record,
    /// The index file, written but not yet synced: synced before the record is published.
    file: Box<dyn crate::storage::fs::FsFile>,
    path: PathBuf,
    index_key: crate::model::Key,
    samples: Vec<crate::model::Key>,
}

/// A new index, ready to be written: its entries sorted, no key twice.
struct NewIndex {
    key: crate::model::Key,
    keywords: Vec<String>,
    objects: Vec<String>,
    entries: Vec<IndexEntry>,
    timestamp: u64,
    axes: Vec<(String, Vec<String>)>,
}

impl Job<'_> {
    fn map(&self, object: &str) -> Result<Arc<Mapped>, StorageError> {
        if let Some(m) = self.maps.lock().ok().and_then(|m| m.get(object).cloned()) {
            return Ok(m);
        }
        // Adopted files and overlays lie elsewhere: their path, without what adoption noted.
        let p = self
            .dir
            .join(crate::storage::posix::split_adopted(object).0);
        let m = Arc::new(self.fs.map_whole(&p).map_err(io("open", &p))?);
        if let Ok(mut maps) = self.maps.lock() {
            maps.insert(object.to_string(), m.clone());
        }
        Ok(m)
    }

    /// Fills in each entry's checksum from its field's bytes (checking one it carries).
    fn checksums(&self, ix: &mut NewIndex) -> Result<(), StorageError> {
        let maps = ix
            .objects
            .iter()
            .map(|o| self.map(o))
            .collect::<Result<Vec<_>, _>>()?;
        // In the order the fields lie in their files, not the tree's: the tree's order jumps
        // about each data file, and memory read in order runs several times faster. The
        // places are copied out so that the sort and the pass touch only contiguous memory.
        let order = file_order(&ix.entries);
        let mut crcs = vec![0u32; ix.entries.len()];
        let mut infos: Vec<Option<std::sync::Arc<[u8]>>> = vec![None; ix.entries.len()];
        for (
            n,
            &Place {
                file,
                offset,
                length,
                i,
            },
        ) in order.iter().enumerate()
        {
            let m = &maps[file as usize];
            let slice = usize::try_from(offset)
                .ok()
                .zip(usize::try_from(length).ok())
                .and_then(|(o, n)| m.get(o..o.checked_add(n)?));
            let Some(bytes) = slice else {
                let object = &ix.objects[file as usize];
                return Err(past_end(self.dir, object, offset, length, m.len()));
            };
            crcs[i] = crate::checksum::crc32c(bytes);
            // Taken while the bytes are at hand: converted fields extract as archived ones do.
            infos[i] = crate::extract::catalogue_info(bytes);
            if (n + 1) % 4096 == 0 {
                self.advance(4096);
            }
        }
        for ((e, crc), info) in ix.entries.iter_mut().zip(crcs).zip(infos) {
            if let Some(expected) = e.checksum.filter(|&c| c != crc) {
                return Err(StorageError::FieldChecksum {
                    object: self
                        .dir
                        .join(&ix.objects[e.file as usize])
                        .display()
                        .to_string(),
                    offset: e.offset,
                    length: e.length,
                    key: e.values.replace(SEP, ","),
                    expected,
                    found: crc,
                });
            }
            e.checksum = Some(crc);
            if e.extract.is_none() {
                e.extract = info;
            }
        }
        self.advance((ix.entries.len() % 4096) as u64);
        Ok(())
    }

    fn advance(&self, n: u64) {
        let done = self.done.fetch_add(n, Ordering::Relaxed) + n;
        if let Some(p) = &self.progress {
            p(done, self.total);
        }
    }

    /// Writes one index file and reads it back whole; returns its journal record.
    fn write(&self, seq: usize, mut ix: NewIndex) -> Result<Converted, StorageError> {
        self.checksums(&mut ix)?;
        // Nearly in order already (a fingerprint sorts by `:`, a key by `SEP`): a run-aware
        // sort is close to one pass.
        ix.entries.sort_by(|a, b| a.values.cmp(&b.values));
        // A key twice (a damaged tree) is refused by `write_sorted`, naming it.
        let count = ix.entries.len() as u64;
        // Checked again through the readers, after all is written (`check_sample`): every entry
        // is compared below, so these only prove the reader's path; each costs a block decode.
        let samples = ix
            .entries
            .iter()
            .step_by(ix.entries.len().div_ceil(SAMPLES).max(1))
            .map(|e| {
                crate::model::Key::from_pairs(
                    ix.keywords
                        .iter()
                        .map(String::as_str)
                        .zip(e.values.split(SEP)),
                )
            })
            .collect();
        let name = format!("{}.{}.{seq}.idx", super::disk_name(&ix.key), self.unique);
        let path = self.work.join(&name);
        let (file, written) = IndexFile::write_sorted(
            self.fs,
            &path,
            &ix.key.to_string(),
            &ix.keywords,
            &ix.objects,
            &ix.entries,
            Some(self.seen),
        )?;
        // Read back as readers will: the file must hold exactly the bytes encoded, and its
        // header and block table must say what was meant. The encoding of each entry is the
        // index format's own round trip (its property tests); here a decode of every entry cost
        // a seventh of the conversion, so entries are decoded for the samples only
        // (`check_sample`, through the catalogue's reader).
        let differs = |detail: String| StorageError::Corrupt {
            path: path.clone(),
            offset: 0,
            detail: format!(
                "the index written does not read back as converted: {detail}: nothing was changed"
            ),
        };
        let on_disk = self.fs.map_whole(&path).map_err(io("read", &path))?;
        if on_disk[..] != written[..] {
            let at = on_disk
                .iter()
                .zip(&written)
                .position(|(a, b)| a != b)
                .unwrap_or(on_disk.len().min(written.len()));
            return Err(differs(format!(
                "{} bytes on disk, {} written, first difference at byte {at}",
                on_disk.len(),
                written.len()
            )));
        }
        drop(written);
        let back = IndexFile::read(self.fs, &path)?;
        if back.len() as u64 != count || back.data_files != ix.objects {
            return Err(differs(format!(
                "{} entries and data files {:?}, meant {count} and {:?}",
                back.len(),
                back.data_files,
                ix.objects
            )));
        }
        let mut axes = ix.axes;
        for (kw, v) in ix.key.iter() {
            if !axes.iter().any(|(k, _)| k == kw) {
                axes.push((kw.to_string(), vec![v.to_string()]));
            }
        }
        Ok(Converted {
            record: Record::Index {
                file: name,
                index_key: ix.key.to_string(),
                entries: count,
                timestamp: ix.timestamp,
                axes,
                slot: None,
            },
            index_key: ix.key,
            samples,
            file,
            path,
        })
    }

    /// Every visible FDB5 index, oldest first, on all cores.
    fn convert_fdb5(&self, reader: &Fdb5Reader) -> Result<Vec<Converted>, StorageError> {
        let n = reader.indexes().len();
        self.parallel(n, |k| {
            // Oldest first: visible indexes are numbered newest first.
            let raw = reader.raw_index(n - 1 - k)?;
            self.write(k, fdb5_index(&raw)?)
        })
    }

    /// `one(k)` for k in 0..n on up to as many threads as cores, results in order; the first
    /// error stops the others.
    fn parallel(
        &self,
        n: usize,
        one: impl Fn(usize) -> Result<Converted, StorageError> + Sync,
    ) -> Result<Vec<Converted>, StorageError> {
        let threads = std::thread::available_parallelism()
            .map_or(1, |t| t.get())
            .clamp(1, 8)
            .min(n.max(1));
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let results: Vec<Mutex<Option<Result<Converted, StorageError>>>> =
            (0..n).map(|_| Mutex::new(None)).collect();
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    if k >= n || failed.load(Ordering::Relaxed) {
                        break;
                    }
                    let r = one(k);
                    if r.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    if let Ok(mut slot) = results[k].lock() {
                        *slot = Some(r);
                    }
                });
            }
        });
        let mut out = Vec::with_capacity(n);
        for (k, slot) in results.into_iter().enumerate() {
            match slot.into_inner().ok().flatten() {
                Some(r) => out.push(r?),
                None => {
                    return Err(config(format!(
                        "index {k} of {} was not converted (another failed first)",
                        self.dir.display()
                    )))
                }
            }
        }
        Ok(out)
    }
}

/// An FDB5 index's entries, straight from its tree: a fingerprint is the datum values joined
/// by `:` in the rule's order, fieldstore's key the same values joined by `SEP`.
fn fdb5_index(raw: &RawIndex) -> Result<NewIndex, StorageError> {
    let keywords: &[String] = &raw.keywords;
    let mut entries = Vec::new();
    raw.visit(|fp, loc| {
        entries.push(IndexEntry {
            values: values_of(keywords, fp),
            file: raw.object_of(&loc)?,
            offset: loc.offset,
            length: loc.length,
            masked: false,
            checksum: None,
            extract: None,
        });
        Ok(())
    })?;
    Ok(NewIndex {
        key: raw.index_key.clone(),
        keywords: keywords.to_vec(),
        objects: raw.objects.clone(),
        entries,
        timestamp: raw.timestamp,
        axes: raw.axes.clone(),
    })
}

/// A fingerprint's values joined by `SEP`, copied once. A value may hold `:` itself (FDB5's
/// `quantile`): then the fingerprint is split as the reader splits it.
fn values_of(keywords: &[String], fp: &[u8]) -> String {
    let colons = fp.iter().filter(|&&b| b == b':').count();
    if colons + 1 == keywords.len() {
        let mut b = fp.to_vec();
        for c in b.iter_mut().filter(|c| **c == b':') {
            *c = SEP as u8;
        }
        // One ASCII byte for another: UTF-8 if the fingerprint was.
        if let Ok(v) = String::from_utf8(b) {
            return v;
        }
    }
    let fp = String::from_utf8_lossy(fp);
    let key = datum_key(keywords, &fp);
    let mut v = String::with_capacity(fp.len());
    for (i, kw) in keywords.iter().enumerate() {
        if i > 0 {
            v.push(SEP);
        }
        v.push_str(key.get(kw).unwrap_or(""));
    }
    v
}

/// Where an entry's field lies, and the entry's position in its index.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Place {
    file: u32,
    offset: u64,
    length: u64,
    i: usize,
}

/// The places of `entries` in the order their fields lie in the data files. Sorted as one word
/// per entry (file and offset packed) where they fit, several times faster than tuples, and
/// carrying what the pass over the fields needs: reading it from the entries in this order
/// missed the cache once per field.
fn file_order(entries: &[IndexEntry]) -> Vec<Place> {
    const OFFSET_BITS: u32 = 44;
    let packable = entries
        .iter()
        .all(|e| e.file < (1 << (64 - OFFSET_BITS)) && e.offset < (1 << OFFSET_BITS));
    let mut places: Vec<Place> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| Place {
            file: e.file,
            offset: e.offset,
            length: e.length,
            i,
        })
        .collect();
    if packable {
        places.sort_unstable_by_key(|p| (u64::from(p.file) << OFFSET_BITS) | p.offset);
    } else {
        places.sort_unstable_by_key(|p| (p.file, p.offset));
    }
    places
}

/// The new catalogue, through the reader every command uses, against the old one: as many
/// indexes and entries, and a spread of keys (the first of each index and up to `SAMPLES`
/// evenly spaced after it) resolved to the same field as the old catalogue resolves them.
fn check_sample(
    old: &dyn CatalogueReader,
    new: &DbReader,
    converted: &[Converted],
    total: u64,
) -> Result<(), StorageError> {
    let dir = Path::new(&new.db().id);
    if new.indexes().len() != old.indexes().len() {
        return Err(mismatch(
            dir,
            "the number of indexes",
            &Some(new.indexes().len()),
            &Some(old.indexes().len()),
        ));
    }
    let count: u64 = new.indexes().iter().map(|s| s.entries).sum();
    if count != total {
        return Err(mismatch(
            dir,
            "the number of entries",
            &Some(count),
            &Some(total),
        ));
    }
    for c in converted {
        for datum in &c.samples {
            let key = &c.index_key;
            let (got, want) = (new.lookup(key, datum)?, old.lookup(key, datum)?);
            let same = match (&got, &want) {
                (Some(g), Some(w)) => same_place(g, w),
                _ => false,
            };
            if !same {
                return Err(mismatch(dir, &format!("{key}{datum}"), &got, &want));
            }
        }
    }
    Ok(())
}

fn past_end(dir: &Path, object: &str, offset: u64, length: u64, size: usize) -> StorageError {
    StorageError::Corrupt {
        path: dir.join(object),
        offset,
        detail: format!(
            "a field of {length} bytes at offset {offset} lies past the end of the data file ({size} bytes)"
        ),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn kws(k: &[&str]) -> Vec<String> {
        k.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn fingerprints_become_keys_also_when_a_value_holds_a_colon() {
        let k = kws(&["step", "levelist", "param"]);
        assert_eq!(values_of(&k, b"12:500:130"), "12\u{1f}500\u{1f}130");
        // FDB5's quantile values hold `:` themselves.
        let k = kws(&["step", "quantile", "param"]);
        let v = values_of(&k, b"12:99:100:130");
        assert_eq!(v.split(SEP).collect::<Vec<_>>(), ["12", "99:100", "130"]);
    }

    fn positions(entries: &[IndexEntry]) -> Vec<usize> {
        file_order(entries).iter().map(|p| p.i).collect()
    }

    fn entry(file: u32, offset: u64) -> IndexEntry {
        IndexEntry {
            values: String::new(),
            file,
            offset,
            length: 1,
            masked: false,
            checksum: None,
            extract: None,
        }
    }

    #[test]
    fn fields_are_visited_in_file_order_whether_or_not_places_pack_into_a_word() {
        let small = [entry(1, 5), entry(0, 9), entry(1, 0), entry(0, 2)];
        assert_eq!(positions(&small), [3, 1, 2, 0]);
        // An offset past 2^44 cannot be packed: the tuple sort gives the same order.
        let large = [
            entry(1, 1 << 50),
            entry(0, 9),
            entry(1, 0),
            entry(0, 1 << 45),
        ];
        assert_eq!(positions(&large), [1, 3, 2, 0]);
    }
}
