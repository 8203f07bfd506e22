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
use crate::storage::{DbRef, FieldRef, StorageError};

pub struct TocCatalogue {
    spaces: Vec<Space>,
    /// Each space's `regex`, compiled once: matching per field was half the archive cost.
    regexes: Vec<regex::Regex>,
    /// Open readers, reused while their journal is unchanged (same file, same length): a
    /// process retrieving field after field then opens each database and index once.
    readers: Mutex<HashMap<PathBuf, (JournalId, Arc<DbReader>)>>,
}

/// What identifies a journal's state: the file (a wiped and recreated database has a new one)
/// and its length (every change is an append).
type JournalId = (u64, u64);

/// Databases whose readers stay open; past this the cache starts over.
const OPEN_READERS: usize = 256;

fn journal_id(db_dir: &Path) -> Option<JournalId> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(db_dir.join("toc")).ok()?;
    Some((m.ino(), m.len()))
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
        let regexes = spaces
            .iter()
            .map(|s| {
                regex::Regex::new(&s.regex).map_err(|e| StorageError::Config {
                    detail: format!("space regex '{}': {e}", s.regex),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(TocCatalogue {
            spaces,
            regexes,
            readers: Mutex::new(HashMap::new()),
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
        db.fingerprint().replace('/', "_")
    }

    fn visit_roots(&self) -> impl Iterator<Item = &Root> {
        self.spaces
            .iter()
            .flat_map(|s| s.roots.iter())
            .filter(|r| r.list)
    }
}

impl Catalogue for TocCatalogue {
    fn kind(&self) -> &'static str {
        "toc"
    }

    fn databases(&self) -> Vec<Result<DbRef, StorageError>> {
        let mut out = Vec::new();
        for r in self.visit_roots() {
            let Ok(rd) = std::fs::read_dir(&r.path) else {
                continue;
            };
            let mut dirs: Vec<PathBuf> = rd
                .filter_map(|e| e.ok())
                .map(|e| e.path())
                .filter(|p| p.join("toc").is_file())
                .collect();
            dirs.sort();
            out.extend(dirs.into_iter().map(|d| {
                super::journal::read_db_key(&d.join("toc")).map(|key| DbRef { key, path: d })
            }));
        }
        out
    }

    fn find(&self, db: &Key) -> Result<Option<DbRef>, StorageError> {
        let name = Self::dir_name(db);
        Ok(self
            .visit_roots()
            .map(|r| r.path.join(&name))
            .find(|p| p.join("toc").is_file())
            .map(|path| DbRef {
                key: db.clone(),
                path,
            }))
    }

    /// An existing copy in a visitable root wins, else the first archive-enabled root.
    fn create(&self, db: &Key, schema_text: &str) -> Result<DbRef, StorageError> {
        let roots = self.space_roots(db);
        let name = Self::dir_name(db);
        let existing = roots
            .iter()
            .find(|r| r.list && r.path.join(&name).join("toc").exists());
        let path = match (existing, roots.iter().find(|r| r.archive)) {
            (Some(r), _) => r.path.join(&name),
            (None, Some(r)) => {
                if !r.path.is_dir() {
                    std::fs::create_dir_all(&r.path).map_err(|e| StorageError::Config {
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
        ensure_database(&path, db, schema_text)?;
        Ok(DbRef {
            key: db.clone(),
            path,
        })
    }

    fn writer(&self, db: &DbRef) -> Result<Box<dyn CatalogueWriter>, StorageError> {
        Ok(Box::new(DbWriter::open_existing(&db.path)?))
    }

    fn reader(&self, db: &DbRef) -> Result<Box<dyn CatalogueReader>, StorageError> {
        // Identify the journal before reading it: what is read then holds at least that much,
        // and any later append changes the length, so a stale reader is never reused.
        let id = journal_id(&db.path);
        let mut grown = None;
        if let (Some(id), Ok(cache)) = (id, self.readers.lock()) {
            if let Some((cached, r)) = cache.get(&db.path) {
                if *cached == id {
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
            None => DbReader::open(&db.path)?,
        });
        if let (Some(id), Ok(mut cache)) = (id, self.readers.lock()) {
            if cache.len() >= OPEN_READERS {
                cache.clear();
            }
            cache.insert(db.path.clone(), (id, reader.clone()));
        }
        Ok(Box::new(SharedReader(reader)))
    }

    fn is_locked(&self, db: &DbRef, action: &str) -> bool {
        maintenance::is_locked(&db.path, action)
    }

    fn set_locked(&self, db: &DbRef, action: &str, locked: bool) -> Result<(), StorageError> {
        let p = maintenance::lock_path(&db.path, action);
        if locked {
            std::fs::write(&p, b"").map_err(StorageError::io("create", &p))
        } else {
            match std::fs::remove_file(&p) {
                Ok(()) => Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
                Err(e) => Err(StorageError::io("remove", &p)(e)),
            }
        }
    }

    fn wipe(&self, db: &DbRef, doit: bool) -> Result<Vec<String>, StorageError> {
        Ok(maintenance::wipe(&db.path, doit)?
            .into_iter()
            .map(|p| p.display().to_string())
            .collect())
    }

    fn purge(&self, db: &DbRef, doit: bool) -> Result<PurgeReport, StorageError> {
        maintenance::purge(&db.path, doit)
    }

    fn objects(&self, db: &DbRef) -> Result<BTreeSet<String>, StorageError> {
        maintenance::objects(&db.path)
    }

    fn stats(&self, db: &DbRef) -> Result<DbStats, StorageError> {
        maintenance::stats(&db.path)
    }

    fn dump(&self, db: &DbRef) -> Result<Vec<String>, StorageError> {
        maintenance::dump(&db.path)
    }

    fn compact(&self, db: &DbRef) -> Result<CompactReport, StorageError> {
        maintenance::compact(&db.path)
    }
}
