//! The toc catalogue: databases are directories under the roots the config's `spaces` name.

use std::collections::{BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::maintenance;
use super::reader::DbReader;
use super::writer::{ensure_database, DbWriter};
use crate::model::config::{Root, Space};
use crate::model::Key;
use crate::storage::catalogue::{
    Catalogue, CatalogueReader, CatalogueWriter, CompactReport, DbStats, EntryIter, IndexSummary,
    PurgeReport,
};
use crate::storage::fs::{self, FileSystem};
use crate::storage::{CatalogueDump, DbRef, FieldRef, StorageError};

pub struct TocCatalogue {
    fs: Arc<dyn FileSystem>,
    spaces: Vec<Space>,
    /// Each space's `regex`, compiled once: matching per field was half the archive cost.
    regexes: Vec<regex::Regex>,
    /// Open readers, reused while their journal is unchanged (same file, same length): a
    /// process retrieving field after field then opens each database and index once.
    readers: Mutex<HashMap<PathBuf, (JournalId, Arc<DbReader>)>>,
    /// Each directory's database key, as its journal's Init record says, by the journal's inode
    /// (the record never changes while the file is the same): `find` checks that a directory is
    /// the key's with one stat, not a read per retrieve.
    keys: Mutex<HashMap<PathBuf, (u64, Key)>>,
}

/// What identifies a journal's state: the file (a wiped and recreated database has a new one)
/// and its length (every change is an append).
type JournalId = (u64, u64);

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

/// A cached reader handed out as the trait object callers expect.
struct SharedReader(Arc<DbReader>);

impl CatalogueReader for SharedReader {
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
        let regexes = spaces
            .iter()
            .map(|s| {
                regex::Regex::new(&s.regex).map_err(|e| StorageError::Config {
                    detail: format!("space regex '{}': {e}", s.regex),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TocCatalogue {
            fs,
            spaces,
            regexes,
            readers: Mutex::new(HashMap::new()),
            keys: Mutex::new(HashMap::new()),
        })
    }

    /// The roots of the first space whose regex matches the database fingerprint.
    fn space_roots(&self, db: &Key) -> Vec<&Root> {
        let fp = db.fingerprint();
        for (s, re) in self.spaces.iter().zip(&self.regexes) {
            if re.is_match(&fp) {
                return s.roots.iter().collect();
            }
        }
        Vec::new()
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

    fn visit_roots(&self) -> impl Iterator<Item = &Root> {
        self.spaces
            .iter()
            .flat_map(|s| s.roots.iter())
            .filter(|r| r.list)
    }
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

/// A directory without a journal that holds index or data files: a database whose `toc` was
/// lost. `None` for anything else, including a directory that is gone (wiped meanwhile), one
/// whose `toc` appeared meanwhile, and one holding only a `schema` (a database being created, or
/// one whose creation was cut short before anything was stored in it).
///
/// A directory whose journal was renamed for a wipe is not one: the wipe was cut short (a crash)
/// or is under way, and the next wipe or creation under the name cleans up after it.
fn orphan(fs: &dyn FileSystem, dir: &Path) -> Option<StorageError> {
    if being_wiped(dir) || !fs.is_dir(dir) {
        return None;
    }
    let mut files = 0;
    for e in fs.read_dir(dir).ok()? {
        let name = e.file_name();
        if name == "toc" || name.starts_with(maintenance::WIPING_PREFIX) {
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

    fn databases(&self) -> Vec<Result<DbRef, StorageError>> {
        let mut out = Vec::new();
        for r in self.visit_roots() {
            let Ok(rd) = self.fs.read_dir(&r.path) else {
                continue;
            };
            let mut dirs: Vec<PathBuf> = rd
                .into_iter()
                .map(|e| e.path)
                .filter(|p| !being_wiped(p))
                .collect();
            dirs.sort();
            for d in dirs {
                let toc = d.join("toc");
                if self.fs.is_file(&toc) {
                    out.push(
                        super::journal::read_db_key(&*self.fs, &toc).map(|key| db_ref(key, &d)),
                    );
                } else if let Some(e) = orphan(&*self.fs, &d) {
                    // Reported in its place: the database must not vanish without a word, and
                    // the others stay listed.
                    out.push(Err(e));
                }
            }
        }
        out
    }

    fn find(&self, db: &Key) -> Result<Option<DbRef>, StorageError> {
        for r in self.visit_roots() {
            if let Some(path) = self.existing(&r.path, db)? {
                return Ok(Some(db_ref(db.clone(), &path)));
            }
        }
        // Not found: say so if its directory is there but lost its journal.
        let name = Self::dir_name(db);
        match self
            .visit_roots()
            .find_map(|r| orphan(&*self.fs, &r.path.join(&name)))
        {
            Some(e) => Err(e),
            None => Ok(None),
        }
    }

    /// An existing copy in a visitable root wins, else the first archive-enabled root.
    fn create(&self, db: &Key, schema_text: &str) -> Result<DbRef, StorageError> {
        let roots = self.space_roots(db);
        let name = Self::dir_name(db);
        let mut existing = None;
        for r in roots.iter().filter(|r| r.list) {
            existing = self.existing(&r.path, db)?;
            if existing.is_some() {
                break;
            }
        }
        let path = match (existing, roots.iter().find(|r| r.archive)) {
            (Some(path), _) => path,
            (None, Some(r)) => {
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
                r.path.join(&name)
            }
            (None, None) => {
                return Err(StorageError::NoWritableRoot {
                    db: db.to_string(),
                    roots: roots
                        .iter()
                        .map(|r| r.path.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                })
            }
        };
        ensure_database(&*self.fs, &path, db, schema_text)?;
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
        Ok(Box::new(DbWriter::open_existing(&self.fs, dir(db))?))
    }

    fn reader(&self, db: &DbRef) -> Result<Box<dyn CatalogueReader>, StorageError> {
        // Identify the journal before reading it: what is read then holds at least that much,
        // and any later append changes the length, so a stale reader is never reused.
        let path = dir(db);
        let id = journal_id(&*self.fs, path);
        let mut grown = None;
        if let (Some(id), Ok(cache)) = (id, self.readers.lock()) {
            if let Some((cached, r)) = cache.get(path) {
                if *cached == id {
                    check_key(db, r.db_key())?;
                    return Ok(Box::new(SharedReader(r.clone())));
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
        if let (Some(id), Ok(mut cache)) = (id, self.readers.lock()) {
            if cache.len() >= OPEN_READERS {
                cache.clear();
            }
            cache.insert(path.to_path_buf(), (id, reader.clone()));
        }
        Ok(Box::new(SharedReader(reader)))
    }

    fn is_locked(&self, db: &DbRef, action: &str) -> bool {
        maintenance::is_locked(&*self.fs, dir(db), action)
    }

    fn set_locked(&self, db: &DbRef, action: &str, locked: bool) -> Result<(), StorageError> {
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

    fn purge(&self, db: &DbRef, doit: bool) -> Result<PurgeReport, StorageError> {
        maintenance::purge(&self.fs, dir(db), doit)
    }

    fn objects(&self, db: &DbRef) -> Result<BTreeSet<String>, StorageError> {
        maintenance::objects(&self.fs, dir(db))
    }

    fn stats(&self, db: &DbRef) -> Result<DbStats, StorageError> {
        maintenance::stats(&self.fs, dir(db))
    }

    fn dump(&self, db: &DbRef) -> Result<CatalogueDump, StorageError> {
        maintenance::dump(&*self.fs, dir(db))
    }

    fn compact(&self, db: &DbRef) -> Result<CompactReport, StorageError> {
        maintenance::compact(&self.fs, dir(db))
    }
}

/// A catalogue over one root that takes everything: what the storage tests need.
#[cfg(test)]
pub(crate) fn one_root(root: &Path) -> TocCatalogue {
    let r = Root {
        path: root.to_path_buf(),
        name: None,
        writable: true,
        visit: true,
        list: true,
        retrieve: true,
        archive: true,
        wipe: true,
    };
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
