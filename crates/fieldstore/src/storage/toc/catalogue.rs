//! The toc catalogue: databases are directories under the roots the config's `spaces` name.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant, SystemTime};

use super::maintenance;
use super::placement::{Placement, RootUsage};
use super::reader::DbReader;
use super::relocate;
use super::writer::{ensure_database, DbWriter};
use crate::model::config::{Root, Space, SpacesSource};
use crate::model::Key;
use crate::storage::catalogue::{
    Catalogue, CatalogueReader, CatalogueWriter, CheckFinding, CompactReport, DbStats, EntryIter,
    EntryView, IndexSummary, PurgeReport,
};
use crate::storage::fdb5::dbnames::DbNames;
use crate::storage::fdb5::{self as fdb5_format, Fdb5Reader};
use crate::storage::fs::{self, FileSystem};
use crate::storage::history::{ChangeWaiter, Commits, HistoryMark};
use crate::storage::{CatalogueDump, DbRef, FieldRef, StorageError};

pub struct TocCatalogue {
    fs: Arc<dyn FileSystem>,
    /// Replaced whole when the config file changes: users of the old one keep it meanwhile.
    layout: RwLock<Arc<Layout>>,
    /// The config file the spaces came from, and what it looked like when last read.
    source: Option<(SpacesSource, Mutex<FileCheck>)>,
    placement: Placement,
    /// Open readers, reused while their journal is unchanged (same file, same length): a
    /// process retrieving field after field then opens each database and index once.
    readers: Mutex<HashMap<PathBuf, (JournalId, Arc<DbReader>)>>,
    /// Open readers of FDB5-format databases, reused while none of their toc files changed.
    fdb5_readers: Mutex<HashMap<PathBuf, Fdb5Cached>>,
    /// FDB5's `dbnames` (nested directory names for FDB5's databases), read once.
    dbnames: Arc<DbNames>,
    /// Roots known to hold FDB5-format databases: new ones there take that format.
    fdb5_roots: Mutex<HashMap<PathBuf, bool>>,
    /// Each directory's database key, as its journal's Init record says, by the journal's inode
    /// (the record never changes while the file is the same): `find` checks that a directory is
    /// the key's with one stat, not a read per retrieve.
    keys: Mutex<HashMap<PathBuf, (u64, Key)>>,
}

/// The spaces, with each space's `regex` compiled once: matching per field was half the archive
/// cost.
pub(crate) struct Layout {
    pub(crate) spaces: Vec<Space>,
    regexes: Vec<crate::model::config::SpaceMatcher>,
}

impl Layout {
    fn new(mut spaces: Vec<Space>) -> Result<Layout, StorageError> {
        // Roots naming buckets are the tiered catalogue's (storage/tiered.rs), never directories.
        for s in &mut spaces {
            s.roots
                .retain(|r| !crate::storage::tiered::is_bucket_root(&r.path));
        }
        let regexes = spaces
            .iter()
            .map(|s| {
                crate::model::config::SpaceMatcher::new(&s.regex).map_err(|e| {
                    StorageError::Config {
                        detail: format!("space regex '{}': {e}", s.regex),
                    }
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(Layout { spaces, regexes })
    }

    /// The first space whose regex matches the database fingerprint.
    pub(crate) fn space(&self, db: &Key) -> Option<&Space> {
        let fp = db.fingerprint();
        self.spaces
            .iter()
            .zip(&self.regexes)
            .find(|(_, re)| re.is_match(&fp))
            .map(|(s, _)| s)
    }

    pub(crate) fn visit_roots(&self) -> impl Iterator<Item = &Root> {
        self.spaces
            .iter()
            .flat_map(|s| s.roots.iter())
            .filter(|r| r.list)
    }
}

/// When the config file was last looked at, and its modification time and size then.
struct FileCheck {
    at: Option<Instant>,
    seen: Option<(SystemTime, u64)>,
}

/// The config file is looked at no more often than this.
const RELOAD_INTERVAL: Duration = Duration::from_secs(1);

/// What identifies a journal's state: the file (a wiped and recreated database has a new one)
/// and its length (every change is an append).
type JournalId = (u64, u64);

/// An FDB5 database's reader and the state of the toc files it read.
type Fdb5Cached = (Vec<JournalId>, Arc<Fdb5Reader>);

/// Databases whose readers stay open; past this the cache starts over.
const OPEN_READERS: usize = 256;

fn journal_id(fs: &dyn FileSystem, db_dir: &Path) -> Option<JournalId> {
    let m = fs.metadata(&db_dir.join("toc")).ok()?;
    Some((m.ino, m.len))
}

/// The directory the catalogue named a database by.
fn dir(db: &DbRef) -> &Path {
    Path::new(&db.id)
}

fn db_ref(key: Key, dir: &Path) -> DbRef {
    DbRef {
        key,
        id: dir.display().to_string(),
    }
}

/// A cached reader (of either format) handed out as the trait object callers expect.
struct Shared<R>(Arc<R>);

impl<R: CatalogueReader> CatalogueReader for Shared<R> {
    fn db(&self) -> &DbRef {
        self.0.db()
    }

    fn indexes(&self) -> &[IndexSummary] {
        self.0.indexes()
    }

    fn lookup(&self, index: &Key, datum: &Key) -> Result<Option<FieldRef>, StorageError> {
        self.0.lookup(index, datum)
    }

    fn entries(&self, i: usize, include_masked: bool) -> Result<EntryIter<'static>, StorageError> {
        self.0.entries(i, include_masked)
    }

    fn visit_entries(
        &self,
        i: usize,
        include_masked: bool,
        visit: &mut dyn FnMut(EntryView<'_>) -> std::ops::ControlFlow<()>,
    ) -> Result<bool, StorageError> {
        self.0.visit_entries(i, include_masked, visit)
    }
}

impl TocCatalogue {
    pub fn new(spaces: Vec<Space>) -> Result<TocCatalogue, StorageError> {
        Self::with_fs(spaces, fs::os())
    }

    /// Over another file system than the OS's (a simulated one, in crash tests).
    pub fn with_fs(
        spaces: Vec<Space>,
        fs: Arc<dyn FileSystem>,
    ) -> Result<TocCatalogue, StorageError> {
        Ok(TocCatalogue {
            fs,
            layout: RwLock::new(Arc::new(Layout::new(spaces)?)),
            source: None,
            placement: Placement::default(),
            readers: Mutex::new(HashMap::new()),
            fdb5_readers: Mutex::new(HashMap::new()),
            fdb5_roots: Mutex::new(HashMap::new()),
            dbnames: Arc::new(DbNames::load(&crate::model::config::process_env)),
            keys: Mutex::new(HashMap::new()),
        })
    }

    /// Re-reads the spaces from this file when it changes, so new databases go to roots added
    /// to it while the process runs.
    pub fn reloading_from(mut self, source: Option<SpacesSource>) -> TocCatalogue {
        self.source = source.map(|s| {
            let seen = file_state(&s.file);
            (
                s,
                Mutex::new(FileCheck {
                    at: Some(Instant::now()),
                    seen,
                }),
            )
        });
        self
    }

    /// The spaces in force.
    pub(crate) fn layout(&self) -> Arc<Layout> {
        match self.layout.read() {
            Ok(l) => l.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    /// Takes the config file's spaces if the file changed (at most one look a second). A file
    /// that no longer parses keeps the spaces in force, with a warning: a running writer must
    /// not stop over a half-saved edit.
    fn reload_if_changed(&self) {
        let Some((source, check)) = &self.source else {
            return;
        };
        let Ok(mut check) = check.lock() else {
            return;
        };
        if check.at.is_some_and(|t| t.elapsed() < RELOAD_INTERVAL) {
            return;
        }
        check.at = Some(Instant::now());
        let now = file_state(&source.file);
        if now == check.seen || now.is_none() {
            return;
        }
        match crate::model::config::spaces_from_file(source, &crate::model::config::process_env)
            .map_err(|e| e.to_string())
            .and_then(|spaces| Layout::new(spaces).map_err(|e| e.to_string()))
        {
            Ok(layout) => {
                check.seen = now;
                tracing::info!(file = %source.file.display(), "config changed: spaces re-read");
                if let Ok(mut l) = self.layout.write() {
                    *l = Arc::new(layout);
                }
            }
            Err(e) => {
                tracing::warn!(file = %source.file.display(), "config changed but is not usable, keeping the spaces in force: {e}");
            }
        }
    }

    /// Each space with what each of its roots holds (measured at most every few seconds).
    pub fn root_usage(&self) -> Vec<(Space, Vec<RootUsage>)> {
        self.layout()
            .spaces
            .iter()
            .map(|s| {
                let u = s
                    .roots
                    .iter()
                    .map(|r| self.placement.usage(&*self.fs, &r.path))
                    .collect();
                (s.clone(), u)
            })
            .collect()
    }

    pub(crate) fn forget_usage(&self, root: &Path) {
        self.placement.forget(root);
    }

    fn dir_name(db: &Key) -> String {
        super::disk_name(db)
    }

    /// The directory holding `db` under `root`, if there is one: under its name, or else under
    /// the name versions before escaping gave it. Either is accepted only if its journal names
    /// this key: an older store may hold `x/y` under `x_y:...`, the name `x_y` has now.
    fn existing(&self, root: &Path, db: &Key) -> Result<Option<PathBuf>, StorageError> {
        let name = Self::dir_name(db);
        let legacy = super::legacy_dir_name(db);
        let mut candidates = vec![root.join(&name)];
        // FDB5's name for it, where a dbnames file nests FDB5's databases.
        if let Some(nested) = self.dbnames.path_for(db) {
            candidates.push(root.join(nested));
        }
        // An old name that is not one plain component ("", ".", "..") could point outside.
        if legacy != name && !matches!(legacy.as_str(), "" | "." | "..") {
            candidates.push(root.join(legacy));
        }
        for dir in candidates {
            if self.key_of(&dir)?.is_some_and(|k| same_key(&k, db)) {
                return Ok(Some(dir));
            }
        }
        Ok(None)
    }

    /// The key of the database in `dir` (`None`: no journal there), read once per journal file.
    fn key_of(&self, dir: &Path) -> Result<Option<Key>, StorageError> {
        let toc = dir.join("toc");
        let ino = match self.fs.metadata(&toc) {
            Ok(m) if m.is_file() => m.ino,
            _ => return Ok(None),
        };
        if let Ok(cache) = self.keys.lock() {
            if let Some((i, k)) = cache.get(dir) {
                if *i == ino {
                    return Ok(Some(k.clone()));
                }
            }
        }
        let key = super::journal::read_db_key(&*self.fs, &toc)?;
        if let Ok(mut cache) = self.keys.lock() {
            if cache.len() >= OPEN_READERS * 16 {
                cache.clear();
            }
            cache.insert(dir.to_path_buf(), (ino, key.clone()));
        }
        Ok(Some(key))
    }

    /// The copy of `db` readers and writers use: the first in config order, except that a
    /// copy a move is leaving (its files are in another root too) gives way to the other.
    pub(crate) fn locate(
        &self,
        layout: &Layout,
        db: &Key,
    ) -> Result<Option<PathBuf>, StorageError> {
        let mut first = None;
        for r in layout.visit_roots() {
            if let Some(path) = self.existing(&r.path, db)? {
                if !relocate::being_left(&*self.fs, &path) {
                    return Ok(Some(path));
                }
                first.get_or_insert(path);
            }
        }
        Ok(first)
    }
}

impl TocCatalogue {
    pub(crate) fn file_system(&self) -> Arc<dyn FileSystem> {
        self.fs.clone()
    }

    /// Drops cached readers of a database whose catalogue was replaced (converted).
    pub(crate) fn forget_readers(&self, db_dir: &Path) {
        if let Ok(mut c) = self.readers.lock() {
            c.remove(db_dir);
        }
        if let Ok(mut c) = self.fdb5_readers.lock() {
            c.remove(db_dir);
        }
        if let Ok(mut c) = self.keys.lock() {
            c.remove(db_dir);
        }
    }

    /// Whether a root holds a database in FDB5's format (once seen, remembered: a database is
    /// made rarely, so a root without one is looked at again each time).
    fn holds_fdb5(&self, root: &Path) -> bool {
        if let Some(&known) = self
            .fdb5_roots
            .lock()
            .ok()
            .and_then(|m| m.get(root).copied())
            .as_ref()
        {
            return known;
        }
        let depth = self.dbnames.depth();
        let mut dirs = vec![(root.to_path_buf(), 0)];
        let mut found = false;
        while let Some((d, level)) = dirs.pop() {
            if fdb5_format::toc::is_fdb5_toc(&*self.fs, &d.join("toc")) {
                found = true;
                break;
            }
            if level < depth {
                if let Ok(rd) = self.fs.read_dir(&d) {
                    dirs.extend(
                        rd.into_iter()
                            .filter(|e| e.is_dir && !e.file_name().starts_with('.'))
                            .map(|e| (e.path, level + 1)),
                    );
                }
            }
        }
        if let (true, Ok(mut m)) = (found, self.fdb5_roots.lock()) {
            m.insert(root.to_path_buf(), true);
        }
        found
    }

    /// Whether the database is kept in FDB5's own format (by its toc's first bytes).
    pub(crate) fn is_fdb5(&self, db: &DbRef) -> bool {
        fdb5_format::toc::is_fdb5_toc(&*self.fs, &dir(db).join("toc"))
    }

    /// The state of every toc file of an FDB5 database a reader read: a writer appends to its
    /// own sub-toc, not the main toc, so the main toc alone does not say a reader is stale.
    fn fdb5_ids(&self, db_dir: &Path, r: &Fdb5Reader) -> Option<Vec<JournalId>> {
        let mut ids = vec![journal_id(&*self.fs, db_dir)?];
        for s in &r.view.sub_tocs {
            let m = self.fs.metadata(s).ok()?;
            ids.push((m.ino, m.len));
        }
        Some(ids)
    }

    fn fdb5_reader(&self, db: &DbRef) -> Result<Arc<Fdb5Reader>, StorageError> {
        let path = dir(db);
        let cached = self
            .fdb5_readers
            .lock()
            .ok()
            .and_then(|c| c.get(path).cloned());
        if let Some((ids, r)) = cached {
            if self.fdb5_ids(path, &r).as_ref() == Some(&ids) {
                check_key(db, &r.db().key)?;
                return Ok(r);
            }
        }
        let r = Arc::new(Fdb5Reader::open(&self.fs, path)?);
        check_key(db, &r.db().key)?;
        if let (Some(ids), Ok(mut cache)) = (self.fdb5_ids(path, &r), self.fdb5_readers.lock()) {
            if cache.len() >= OPEN_READERS {
                cache.clear();
            }
            cache.insert(path.to_path_buf(), (ids, r.clone()));
        }
        Ok(r)
    }
}

/// A file's modification time and size, the change check for the config file.
fn file_state(p: &Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(p).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Keys are equal whatever the order of their keywords.
fn same_key(a: &Key, b: &Key) -> bool {
    a == b || a.sorted() == b.sorted()
}

/// Refuses a reader for a directory whose journal names other keywords than the key it was asked
/// for (a second line of defence: `find` already checked the whole key). Only keywords are
/// compared here, so a value the journal's text form does not carry exactly (surrounding spaces)
/// cannot make a listed database unreadable.
fn check_key(db: &DbRef, found: &Key) -> Result<(), StorageError> {
    let keywords = |k: &Key| {
        let mut v: Vec<String> = k.keywords().map(str::to_string).collect();
        v.sort();
        v
    };
    if found == &db.key || keywords(found) == keywords(&db.key) {
        return Ok(());
    }
    Err(StorageError::NameTaken {
        dir: dir(db).to_path_buf(),
        found: found.to_string(),
        wanted: db.key.to_string(),
    })
}

/// Whether a root's entry is a database being wiped (renamed to `.NAME.wiping.*` before it is
/// deleted): neither listed nor reported.
fn being_wiped(dir: &Path) -> bool {
    dir.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with('.') && n.contains(".wiping."))
}

/// Whether a root's entry is a database's copy being made by a move (`.NAME.moving.*`), or a
/// conversion's work directory (`.NAME.converting.*`).
fn being_moved_in(dir: &Path) -> bool {
    dir.file_name().and_then(|n| n.to_str()).is_some_and(|n| {
        n.starts_with('.')
            && (n.contains(relocate::MOVING) || n.contains(super::convert::CONVERTING))
    })
}

/// A directory without a journal that holds index or data files: a database whose `toc` was
/// lost. `None` for anything else, including a directory that is gone (wiped meanwhile), one
/// whose `toc` appeared meanwhile, and one holding only a `schema` (a database being created, or
/// one whose creation was cut short before anything was stored in it).
///
/// A directory whose journal was renamed for a wipe is not one: the wipe was cut short (a crash)
/// or is under way, and the next wipe or creation under the name cleans up after it.
fn orphan(fs: &dyn FileSystem, dir: &Path) -> Option<StorageError> {
    if being_wiped(dir) || being_moved_in(dir) || !fs.is_dir(dir) {
        return None;
    }
    let mut files = 0;
    for e in fs.read_dir(dir).ok()? {
        let name = e.file_name();
        if name == "toc"
            || name.starts_with(maintenance::WIPING_PREFIX)
            || name.starts_with(relocate::MOVED_PREFIX)
        {
            return None;
        }
        if name.ends_with(".idx") || name.ends_with(".data") {
            files += 1;
        }
    }
    (files > 0).then(|| StorageError::MissingJournal {
        dir: dir.to_path_buf(),
        files,
    })
}

impl Catalogue for TocCatalogue {
    fn kind(&self) -> &'static str {
        "toc"
    }

    /// In the first listed root: every writer of this config looks there, whichever root its
    /// databases are in.
    fn check_keys_release(
        &self,
        reader: crate::storage::keys_release::KeysReader,
        version: &str,
    ) -> Result<(), StorageError> {
        let layout = self.layout();
        let first = layout.visit_roots().next().map(|r| r.path.clone());
        match first {
            Some(root) => {
                crate::storage::keys_release::check_in_dir(&*self.fs, &root, reader, version)
            }
            None => Ok(()),
        }
    }

    /// A database in two roots (a move between its two renames) is listed once, as `find`
    /// picks it.
    fn databases(&self) -> Vec<Result<DbRef, StorageError>> {
        let layout = self.layout();
        let mut found: Vec<(Key, PathBuf)> = Vec::new();
        let mut failed = Vec::new();
        for r in layout.visit_roots() {
            let Ok(rd) = self.fs.read_dir(&r.path) else {
                continue;
            };
            let mut dirs: Vec<(PathBuf, usize)> = rd
                .into_iter()
                .filter(|e| e.is_dir)
                .map(|e| (e.path, 1))
                .filter(|(p, _)| !being_wiped(p) && !being_moved_in(p))
                .collect();
            dirs.sort();
            dirs.reverse();
            // FDB5's databases may lie deeper, as its dbnames file nests them (depth-first, in
            // name order).
            let depth = self.dbnames.depth();
            while let Some((d, level)) = dirs.pop() {
                let toc = d.join("toc");
                if self.fs.is_file(&toc) {
                    match super::journal::read_db_key(&*self.fs, &toc) {
                        Ok(key) => found.push((key, d)),
                        Err(e) => failed.push(Err(e)),
                    }
                } else if let Some(e) = orphan(&*self.fs, &d) {
                    // Reported in its place: the database must not vanish without a word, and
                    // the others stay listed.
                    failed.push(Err(e));
                } else if level < depth {
                    if let Ok(sub) = self.fs.read_dir(&d) {
                        let mut sub: Vec<(PathBuf, usize)> = sub
                            .into_iter()
                            .filter(|e| e.is_dir && !e.file_name().starts_with('.'))
                            .map(|e| (e.path, level + 1))
                            .collect();
                        sub.sort();
                        sub.reverse();
                        dirs.extend(sub);
                    }
                }
            }
        }
        let mut out = Vec::with_capacity(found.len() + failed.len());
        let names: Vec<String> = found.iter().map(|(k, _)| k.sorted().to_string()).collect();
        let mut copies: HashMap<&str, usize> = HashMap::new();
        for n in &names {
            *copies.entry(n).or_default() += 1;
        }
        let mut seen = HashSet::new();
        for ((key, d), name) in found.iter().zip(&names) {
            if copies.get(name.as_str()).is_some_and(|&c| c > 1) {
                if !seen.insert(name) {
                    continue;
                }
                // The copy `find` gives.
                if let Ok(Some(p)) = self.locate(&layout, key) {
                    out.push(Ok(db_ref(key.clone(), &p)));
                    continue;
                }
            }
            out.push(Ok(db_ref(key.clone(), d)));
        }
        out.extend(failed);
        out
    }

    fn find(&self, db: &Key) -> Result<Option<DbRef>, StorageError> {
        if let Some(path) = self.locate(&self.layout(), db)? {
            return Ok(Some(db_ref(db.clone(), &path)));
        }
        // A root added to the config file meanwhile may hold it.
        self.reload_if_changed();
        let layout = self.layout();
        if let Some(path) = self.locate(&layout, db)? {
            return Ok(Some(db_ref(db.clone(), &path)));
        }
        // Not found: say so if its directory is there but lost its journal.
        let name = Self::dir_name(db);
        let orphaned = layout
            .visit_roots()
            .find_map(|r| orphan(&*self.fs, &r.path.join(&name)));
        match orphaned {
            Some(e) => Err(e),
            None => Ok(None),
        }
    }

    /// An existing copy in a visitable root of its space wins, else the space's handler picks
    /// an archive-enabled root within its limits.
    fn create_by(
        &self,
        db: &Key,
        schema_text: &str,
        creator: Option<&str>,
    ) -> Result<DbRef, StorageError> {
        self.reload_if_changed();
        let layout = self.layout();
        let name = Self::dir_name(db);
        let Some(space) = layout.space(db) else {
            return Err(StorageError::NoWritableRoot {
                db: db.to_string(),
                roots: "none: no space's regex matches this database".into(),
            });
        };
        let mut existing = None;
        for r in space.roots.iter().filter(|r| r.list) {
            existing = self.existing(&r.path, db)?;
            if existing.is_some() {
                break;
            }
        }
        let mut fdb5_new = false;
        let path = match existing {
            Some(path) => path,
            None => {
                let today = chrono::Utc::now().date_naive();
                let r = self.placement.choose(&*self.fs, space, db, today)?;
                fdb5_new = match r.format {
                    Some(f) => f == crate::model::config::DbFormat::Fdb5,
                    // A root FDB5 already writes to gets FDB5's format, so that FDB5's readers
                    // of it (which stop on a database in another format) go on working.
                    None => self.holds_fdb5(&r.path),
                };
                if !self.fs.is_dir(&r.path) {
                    self.fs
                        .create_dir_all(&r.path)
                        .map_err(|e| StorageError::Config {
                            detail: format!(
                                "root {} does not exist and cannot be created: {e}",
                                r.path.display()
                            ),
                        })?;
                }
                match self.dbnames.path_for(db).filter(|_| fdb5_new) {
                    // FDB5's programs look for it where FDB5 would have put it.
                    Some(nested) => r.path.join(nested),
                    None => r.path.join(&name),
                }
            }
        };
        if fdb5_new {
            fdb5_format::writer::create(&*self.fs, &path, db, schema_text)?;
        } else {
            ensure_database(&*self.fs, &path, db, schema_text, creator)?;
        }
        // The directory may be another key's (an older store's `x/y` under the name `x_y` has
        // now; same values with other keywords; or created meanwhile): never mix their fields.
        let found = super::journal::read_db_key(&*self.fs, &path.join("toc"))?;
        if !same_key(&found, db) {
            return Err(StorageError::NameTaken {
                dir: path,
                found: found.to_string(),
                wanted: db.to_string(),
            });
        }
        Ok(db_ref(db.clone(), &path))
    }

    fn writer(&self, db: &DbRef) -> Result<Box<dyn CatalogueWriter>, StorageError> {
        if self.is_fdb5(db) {
            return Ok(Box::new(fdb5_format::writer::Fdb5Writer::open(
                &self.fs,
                dir(db),
            )?));
        }
        Ok(Box::new(DbWriter::open_existing(&self.fs, dir(db))?))
    }

    fn reader(&self, db: &DbRef) -> Result<Box<dyn CatalogueReader>, StorageError> {
        // Identify the journal before reading it: what is read then holds at least that much,
        // and any later append changes the length, so a stale reader is never reused.
        let path = dir(db);
        if self.is_fdb5(db) {
            return self
                .fdb5_reader(db)
                .map(|r| Box::new(Shared(r)) as Box<dyn CatalogueReader>);
        }
        let id = journal_id(&*self.fs, path);
        let mut grown = None;
        if let (Some(id), Ok(cache)) = (id, self.readers.lock()) {
            if let Some((cached, r)) = cache.get(path) {
                if *cached == id {
                    check_key(db, r.db_key())?;
                    return Ok(Box::new(Shared(r.clone())));
                }
                // The same journal, appended to: what the reader parsed never changes (only a
                // torn tail after it is ever cut off), so it parses just the new records.
                if cached.0 == id.0 && r.state().end <= id.1 {
                    grown = Some(r.clone());
                }
            }
        }
        let reader = Arc::new(match grown {
            Some(r) => r.refreshed()?,
            None => DbReader::open(&self.fs, path)?,
        });
        check_key(db, reader.db_key())?;
        // A journal that lost flushes would show an older state as current: refused.
        super::unpublished::refuse_lost(&*self.fs, path, reader.state())?;
        if let (Some(id), Ok(mut cache)) = (id, self.readers.lock()) {
            if cache.len() >= OPEN_READERS {
                cache.clear();
            }
            cache.insert(path.to_path_buf(), (id, reader.clone()));
        }
        Ok(Box::new(Shared(reader)))
    }

    fn db_format(&self, db: &DbRef) -> Option<&'static str> {
        Some(if self.is_fdb5(db) {
            "fdb5"
        } else {
            "fieldstore"
        })
    }

    fn creator(&self, db: &DbRef) -> Result<Option<String>, StorageError> {
        if self.is_fdb5(db) {
            return Ok(None);
        }
        let toc = dir(db).join("toc");
        let f = self
            .fs
            .open(&toc, fs::OpenMode::Read)
            .map_err(StorageError::io("open", &toc))?;
        Ok(super::journal::read_init(&*f, &toc)?.creator)
    }

    fn is_locked(&self, db: &DbRef, action: &str) -> Result<bool, StorageError> {
        maintenance::is_locked(&*self.fs, dir(db), action)
    }

    fn may_change(&self, db: &DbRef, action: &'static str) -> Result<(), StorageError> {
        maintenance::require_owner(&self.fs, dir(db), action)
    }

    fn set_locked(&self, db: &DbRef, action: &str, locked: bool) -> Result<(), StorageError> {
        maintenance::require_owner(&self.fs, dir(db), if locked { "lock" } else { "unlock" })?;
        let p = maintenance::lock_path(dir(db), action);
        if locked {
            self.fs
                .write(&p, b"")
                .map_err(StorageError::io("create", &p))
        } else {
            fs::remove_if_exists(&*self.fs, &p).map_err(StorageError::io("remove", &p))
        }
    }

    fn wipe(&self, db: &DbRef, doit: bool) -> Result<Vec<String>, StorageError> {
        Ok(maintenance::wipe(&self.fs, dir(db), doit)?
            .into_iter()
            .map(|p| p.display().to_string())
            .collect())
    }

    fn finish_wipe(&self, db: &DbRef) -> Result<(), StorageError> {
        maintenance::wipe_done(&*self.fs, dir(db))
    }

    /// Also clears what a killed move of the database left (not while a move of it runs).
    fn purge(&self, db: &DbRef, doit: bool) -> Result<PurgeReport, StorageError> {
        if self.is_fdb5(db) {
            if doit {
                maintenance::require_owner(&self.fs, dir(db), "purge")?;
            }
            return fdb5_format::maintenance::purge(&self.fs, dir(db), doit);
        }
        if doit {
            maintenance::require_owner(&self.fs, dir(db), "purge")?;
            if let Err(e) = self.recover_moves(&Self::dir_name(&db.key)) {
                tracing::info!("purge leaves move leftovers alone: {e}");
            }
        }
        maintenance::purge(&self.fs, dir(db), doit)
    }

    fn objects(&self, db: &DbRef) -> Result<BTreeSet<String>, StorageError> {
        if self.is_fdb5(db) {
            return fdb5_format::maintenance::objects(&self.fs, dir(db));
        }
        maintenance::objects(&self.fs, dir(db))
    }

    fn stats(&self, db: &DbRef) -> Result<DbStats, StorageError> {
        if self.is_fdb5(db) {
            return fdb5_format::maintenance::stats(&self.fs, dir(db));
        }
        maintenance::stats(&self.fs, dir(db))
    }

    fn dump(&self, db: &DbRef) -> Result<CatalogueDump, StorageError> {
        if self.is_fdb5(db) {
            return fdb5_format::maintenance::dump(&*self.fs, dir(db));
        }
        maintenance::dump(&*self.fs, dir(db))
    }

    /// FDB5's databases are left as FDB5 keeps them (its `fdb-reconsolidate-toc` merges them).
    fn compact(&self, db: &DbRef) -> Result<CompactReport, StorageError> {
        if self.is_fdb5(db) {
            return Ok(CompactReport::default());
        }
        super::compaction::compact(&self.fs, dir(db))
    }

    fn check(&self, db: &DbRef) -> Result<Vec<CheckFinding>, StorageError> {
        if self.is_fdb5(db) {
            return fdb5_format::maintenance::check(&self.fs, dir(db));
        }
        let reader = DbReader::open(&self.fs, dir(db))?;
        super::unpublished::survey(&*self.fs, dir(db), reader.state())
    }

    fn history_mark(&self, db: &DbRef) -> Result<HistoryMark, StorageError> {
        if self.is_fdb5(db) {
            return fdb5_format::history::mark(&self.fs, dir(db));
        }
        let mark = super::history::mark(&*self.fs, dir(db))?;
        if !mark.epoch.is_empty() {
            return Ok(mark);
        }
        match self.find(&db.key)? {
            Some(moved) if moved.id != db.id => super::history::mark(&*self.fs, dir(&moved)),
            _ => Ok(mark),
        }
    }

    fn commits(
        &self,
        db: &DbRef,
        epoch: &str,
        from: u64,
        max: usize,
    ) -> Result<Commits, StorageError> {
        if self.is_fdb5(db) {
            return fdb5_format::history::commits(&self.fs, dir(db), epoch, from, max);
        }
        let answer = match super::history::commits(&*self.fs, dir(db), epoch, from, max) {
            // Followed from its beginning, but purge removed early flushes' index files: what
            // the database holds now, as one commit, is the history that is left.
            Err(StorageError::FellBehind { .. }) if from == 0 => {
                return super::history::snapshot(&self.fs, dir(db), epoch);
            }
            answer => answer?,
        };
        if answer != Commits::Gone {
            return Ok(answer);
        }
        // Moved to another root (the journal went along, offsets and all): read on there, so
        // a subscriber that has not rescanned yet neither stops nor starts over.
        match self.find(&db.key)? {
            Some(moved) if moved.id != db.id => {
                super::history::commits(&*self.fs, dir(&moved), epoch, from, max)
            }
            _ => Ok(Commits::Gone),
        }
    }

    fn change_waiter(&self) -> Result<Box<dyn ChangeWaiter>, StorageError> {
        let roots = self
            .layout()
            .visit_roots()
            .map(|r| r.path.clone())
            .collect();
        Ok(Box::new(super::watch::TocWaiter::new(
            self.fs.clone(),
            roots,
        )))
    }
}

/// A catalogue over one root that takes everything: what the storage tests need.
#[cfg(test)]
pub(crate) fn one_root(root: &Path) -> TocCatalogue {
    let r = Root::open_at(root.to_path_buf());
    TocCatalogue::new(vec![Space {
        name: None,
        regex: ".*".into(),
        handler: "Default".into(),
        roots: vec![r],
    }])
    .unwrap()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn catalogue(root: &Path) -> TocCatalogue {
        one_root(root)
    }

    /// Regression: a move deleted the old copy in place, so a listing could meet it holding data
    /// files and neither a journal nor its renamed journal ("... has no journal (toc)"). The
    /// old copy is now renamed to a hidden name first; such a directory is never reported.
    #[test]
    fn an_old_copy_being_deleted_after_a_move_is_not_reported() {
        let d = tempfile::tempdir().unwrap();
        let c = catalogue(d.path());
        let db = c
            .create(&Key::parse("{class=od,expver=0001}").unwrap(), "schema")
            .unwrap();
        let gone = d
            .path()
            .join(format!(".od:0001{}gone.x", super::relocate::MOVING));
        std::fs::create_dir(&gone).unwrap();
        std::fs::write(gone.join("a.data"), b"bytes").unwrap();
        std::fs::write(gone.join("b.idx"), b"index").unwrap();
        let found = c.databases();
        assert!(found.iter().all(|r| r.is_ok()), "{found:?}");
        assert_eq!(found.len(), 1);
        assert_eq!(found[0].as_ref().unwrap(), &db);
        // What the old code left for a moment: the directory under its own name.
        let visible = d.path().join("od:0002");
        std::fs::create_dir(&visible).unwrap();
        std::fs::write(visible.join("a.data"), b"bytes").unwrap();
        assert!(c.databases().iter().any(|r| r.is_err()));
    }

    #[test]
    fn a_database_keeps_the_creator_it_was_made_by() {
        let d = tempfile::tempdir().unwrap();
        let c = catalogue(d.path());
        let a = Key::parse("{class=od,expver=0001}").unwrap();
        let db = c.create_by(&a, "schema", Some("ingest")).unwrap();
        // A later creator finds it made: the first one stays.
        c.create_by(&a, "schema", Some("other")).unwrap();
        assert_eq!(c.creator(&db).unwrap().as_deref(), Some("ingest"));
        let fresh = catalogue(d.path());
        assert_eq!(fresh.creator(&db).unwrap().as_deref(), Some("ingest"));
        let local = c
            .create(&Key::parse("{class=od,expver=0002}").unwrap(), "schema")
            .unwrap();
        assert_eq!(c.creator(&local).unwrap(), None);
    }

    #[test]
    fn keys_sharing_a_name_on_disk_are_never_mixed() {
        let d = tempfile::tempdir().unwrap();
        let c = catalogue(d.path());
        let a = Key::parse("{class=od,expver=0001}").unwrap();
        let b = Key::parse("{class=od,stream=0001}").unwrap();
        let db = c.create(&a, "schema").unwrap();
        assert_eq!(db.id, d.path().join("od:0001").display().to_string());
        let err = c.create(&b, "schema").unwrap_err().to_string();
        assert!(
            err.contains(
                "od:0001 holds database {class=od,expver=0001}, not {class=od,stream=0001}"
            ),
            "{err}"
        );
        assert!(c.find(&b).unwrap().is_none());
        assert_eq!(c.find(&a).unwrap(), Some(db.clone()));
        // A reader asked for the other key there is refused too.
        let other = DbRef {
            key: b,
            id: db.id.clone(),
        };
        assert!(c.reader(&other).is_err());
        assert!(c.reader(&db).is_ok());
    }

    #[test]
    fn a_lost_journal_is_reported_and_other_directories_are_not() {
        let d = tempfile::tempdir().unwrap();
        let c = catalogue(d.path());
        let a = Key::parse("{class=od,expver=0001}").unwrap();
        let db = c.create(&a, "schema").unwrap();
        // Being created (schema only), being wiped, not ours: none is reported.
        std::fs::create_dir_all(d.path().join("od:0002")).unwrap();
        std::fs::write(d.path().join("od:0002/schema"), "s").unwrap();
        let wiping = d.path().join(".od:0003.wiping.h.1.2.3");
        std::fs::create_dir_all(&wiping).unwrap();
        std::fs::write(wiping.join("h.1.2.3.data"), "x").unwrap();
        std::fs::create_dir_all(d.path().join("other")).unwrap();
        assert_eq!(c.databases().len(), 1);
        std::fs::write(dir(&db).join("h.1.2.3.data"), "x").unwrap();
        std::fs::remove_file(dir(&db).join("toc")).unwrap();
        let dbs = c.databases();
        assert_eq!(dbs.len(), 1);
        let err = dbs[0].as_ref().unwrap_err().to_string();
        assert!(err.contains(&db.id) && err.contains("no journal"), "{err}");
        assert!(c.find(&a).is_err());
        assert!(c
            .find(&Key::parse("{class=od,expver=0002}").unwrap())
            .unwrap()
            .is_none());
    }
}
