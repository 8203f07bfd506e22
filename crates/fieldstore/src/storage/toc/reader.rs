//! A reader's view of one database: the live indexes, newest first, loaded on demand.

use std::collections::{BTreeSet, HashMap};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::index::{IndexFile, SEP};
use super::journal::{self, Record};
use crate::model::Key;
use crate::storage::StorageError;

/// One live index as the journal describes it.
#[derive(Debug, Clone)]
pub struct IndexRef {
    pub file: String,
    pub index_key: Key,
    pub timestamp: u64,
    pub entries: u64,
    pub axes: HashMap<String, BTreeSet<String>>,
}

impl IndexRef {
    /// Whether the index may hold a field with this keyword value (false means skip it).
    pub fn may_contain(&self, keyword: &str, values: &[String]) -> bool {
        match self.axes.get(keyword) {
            Some(present) => values.iter().any(|v| present.contains(v)),
            None => true,
        }
    }
}

pub struct DbReader {
    dir: PathBuf,
    db_key: Key,
    owner: u32,
    /// Newest first.
    indexes: Vec<IndexRef>,
    records: usize,
    cache: Mutex<HashMap<String, Arc<IndexFile>>>,
}

impl DbReader {
    pub fn open(dir: &Path) -> Result<DbReader, StorageError> {
        let toc = dir.join("toc");
        let (records, _) = journal::read_from(&toc, 0)?;
        let (db_key, owner) = match records.first() {
            Some(Record::Init { db_key, uid, .. }) => (
                Key::parse(db_key).map_err(|e| StorageError::Corrupt {
                    path: toc.clone(),
                    offset: 0,
                    detail: e.to_string(),
                })?,
                *uid,
            ),
            _ => {
                return Err(StorageError::Corrupt {
                    path: toc,
                    offset: 0,
                    detail: "the journal does not start with an Init record".into(),
                })
            }
        };
        let cleared: BTreeSet<&str> = records
            .iter()
            .flat_map(|r| match r {
                Record::Clear { files } => files.iter().map(String::as_str).collect::<Vec<_>>(),
                _ => Vec::new(),
            })
            .collect();
        // Recency is journal position; a merged index takes the position of the newest index it
        // replaced (its slot).
        // One pass suffices: a slot always names an earlier record, already resolved.
        let mut position: HashMap<&str, usize> = HashMap::new();
        for (i, r) in records.iter().enumerate() {
            if let Record::Index { file, slot, .. } = r {
                let pos = slot
                    .as_deref()
                    .and_then(|s| position.get(s).copied())
                    .unwrap_or(i);
                position.insert(file.as_str(), pos);
            }
        }
        let mut ordered: Vec<(usize, usize, IndexRef)> = Vec::new();
        for (i, r) in records.iter().enumerate() {
            if let Record::Index {
                file,
                index_key,
                entries,
                timestamp,
                axes,
                ..
            } = r
            {
                if cleared.contains(file.as_str()) {
                    continue;
                }
                let index_key = Key::parse(index_key).map_err(|e| StorageError::Corrupt {
                    path: dir.join("toc"),
                    offset: 0,
                    detail: e.to_string(),
                })?;
                let pos = position.get(file.as_str()).copied().unwrap_or(i);
                ordered.push((
                    pos,
                    i,
                    IndexRef {
                        file: file.clone(),
                        index_key,
                        timestamp: *timestamp,
                        entries: *entries,
                        axes: axes
                            .iter()
                            .map(|(k, v)| (k.clone(), v.iter().cloned().collect()))
                            .collect(),
                    },
                ));
            }
        }
        ordered.sort_by_key(|o| std::cmp::Reverse((o.0, o.1)));
        let indexes: Vec<IndexRef> = ordered.into_iter().map(|(_, _, ix)| ix).collect();
        Ok(DbReader {
            dir: dir.to_path_buf(),
            db_key,
            owner,
            indexes,
            records: records.len(),
            cache: Mutex::new(HashMap::new()),
        })
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn db_key(&self) -> &Key {
        &self.db_key
    }

    pub fn owner(&self) -> u32 {
        self.owner
    }

    pub fn journal_records(&self) -> usize {
        self.records
    }

    /// Live indexes, newest first.
    pub fn indexes(&self) -> &[IndexRef] {
        &self.indexes
    }

    pub fn load(&self, index: &IndexRef) -> Result<Arc<IndexFile>, StorageError> {
        if let Ok(c) = self.cache.lock() {
            if let Some(i) = c.get(&index.file) {
                return Ok(i.clone());
            }
        }
        let i = Arc::new(IndexFile::read(&self.dir.join(&index.file))?);
        if let Ok(mut c) = self.cache.lock() {
            c.insert(index.file.clone(), i.clone());
        }
        Ok(i)
    }

    /// The newest copy of a field: (data file, offset, length).
    pub fn lookup(
        &self,
        index_key: &Key,
        datum_key: &Key,
    ) -> Result<Option<(PathBuf, u64, u64)>, StorageError> {
        for ix in &self.indexes {
            if ix.index_key != *index_key
                || !datum_key
                    .iter()
                    .all(|(k, v)| ix.axes.get(k).is_none_or(|s| s.contains(v)))
            {
                continue;
            }
            let file = self.load(ix)?;
            // A key from another rule (other datum keywords) is not this index's field.
            if file.datum_keywords.len() != datum_key.len()
                || !file.datum_keywords.iter().all(|k| datum_key.contains(k))
            {
                continue;
            }
            let values = entry_values(&file.datum_keywords, datum_key);
            if let Some(e) = file.lookup(&values) {
                let data = file
                    .data_files
                    .get(e.file as usize)
                    .map(|f| self.dir.join(f))
                    .unwrap_or_default();
                return Ok(Some((data, e.offset, e.length)));
            }
        }
        Ok(None)
    }

    /// Reads a field's bytes.
    pub fn read(path: &Path, offset: u64, length: u64) -> Result<Vec<u8>, StorageError> {
        let f = File::open(path).map_err(StorageError::io("open", path))?;
        let mut buf = vec![0u8; length as usize];
        f.read_exact_at(&mut buf, offset)
            .map_err(StorageError::io("read", path))?;
        Ok(buf)
    }
}

pub(crate) fn entry_values(keywords: &[String], datum_key: &Key) -> String {
    let mut s = String::new();
    for (i, kw) in keywords.iter().enumerate() {
        if i > 0 {
            s.push(SEP);
        }
        s.push_str(datum_key.get(kw).unwrap_or(""));
    }
    s
}

/// Splits an entry's values back into a datum key.
pub fn datum_key_of(keywords: &[String], values: &str) -> Key {
    Key::from_pairs(keywords.iter().map(String::as_str).zip(values.split(SEP)))
}

#[cfg(test)]
mod tests {
    use super::super::DbWriter;
    use super::*;

    #[test]
    fn visible_only_after_flush_and_newest_wins() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("db");
        let db = Key::parse("{class=od,expver=0001}").unwrap();
        let ik = Key::parse("{type=fc,levtype=pl}").unwrap();
        let dk = Key::parse("{step=6,levelist=500,param=130}").unwrap();
        let mut w = DbWriter::open(&dir, &db, "schema").unwrap();
        w.archive(&ik, &dk, b"first").unwrap();
        assert!(DbReader::open(&dir)
            .unwrap()
            .lookup(&ik, &dk)
            .unwrap()
            .is_none());
        w.flush().unwrap();
        let r = DbReader::open(&dir).unwrap();
        let (p, o, l) = r.lookup(&ik, &dk).unwrap().unwrap();
        assert_eq!(DbReader::read(&p, o, l).unwrap(), b"first");
        let mut w2 = DbWriter::open(&dir, &db, "schema").unwrap();
        w2.archive(&ik, &dk, b"second").unwrap();
        w2.flush().unwrap();
        let r = DbReader::open(&dir).unwrap();
        assert_eq!(r.indexes().len(), 2);
        let (p, o, l) = r.lookup(&ik, &dk).unwrap().unwrap();
        assert_eq!(DbReader::read(&p, o, l).unwrap(), b"second");
        assert_eq!(r.db_key(), &db);
        assert_eq!(
            datum_key_of(&["a".into(), "b".into()], "1\u{1f}"),
            Key::parse("{a=1,b=}").unwrap()
        );
    }

    #[test]
    fn many_writer_threads_into_one_database() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("db");
        let db = Key::parse("{class=od}").unwrap();
        std::thread::scope(|s| {
            for t in 0..8 {
                let (dir, db) = (&dir, &db);
                s.spawn(move || {
                    let mut w = DbWriter::open(dir, db, "schema").unwrap();
                    for i in 0..50 {
                        let ik = Key::from_pairs([("type", "fc")]);
                        let dk =
                            Key::from_pairs([("step", t.to_string()), ("param", i.to_string())]);
                        w.archive(&ik, &dk, format!("{t}-{i}").as_bytes()).unwrap();
                    }
                    w.flush().unwrap();
                });
            }
        });
        let r = DbReader::open(&dir).unwrap();
        for t in 0..8 {
            for i in 0..50 {
                let dk = Key::from_pairs([("step", t.to_string()), ("param", i.to_string())]);
                let (p, o, l) = r
                    .lookup(&Key::from_pairs([("type", "fc")]), &dk)
                    .unwrap()
                    .unwrap();
                assert_eq!(
                    DbReader::read(&p, o, l).unwrap(),
                    format!("{t}-{i}").as_bytes()
                );
            }
        }
    }
}
