//! A reader's view of one database: the live indexes, newest first, loaded on demand.

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

use crate::storage::fs::FileSystem;

use super::index::{IndexFile, Walk, SEP};
use super::journal::JournalState;
use crate::model::Key;
use crate::storage::catalogue::{CatalogueReader, EntryIter, EntryView, IndexSummary, ListedEntry};
use crate::storage::{DbRef, FieldRef, StorageError};

pub struct DbReader {
    fs: Arc<dyn FileSystem>,
    db: DbRef,
    owner: u32,
    /// Newest first.
    indexes: Vec<IndexSummary>,
    records: usize,
    state: JournalState,
    cache: Mutex<HashMap<String, Arc<IndexFile>>>,
}

impl DbReader {
    pub fn open(fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<DbReader, StorageError> {
        let state = JournalState::read(&**fs, &dir.join("toc"))?;
        Self::from_state(fs, dir, state)
    }

    /// A reader for the journal's current state, parsing only what was appended since this
    /// reader was opened (index files already loaded are reused: they are immutable).
    pub fn refreshed(&self) -> Result<DbReader, StorageError> {
        let mut state = self.state.clone();
        state.refresh(&*self.fs, &self.dir().join("toc"))?;
        let r = Self::from_state(&self.fs, self.dir(), state)?;
        if let (Ok(old), Ok(mut new)) = (self.cache.lock(), r.cache.lock()) {
            for ix in &r.indexes {
                if let Some(f) = old.get(&ix.name) {
                    new.insert(ix.name.clone(), f.clone());
                }
            }
        }
        Ok(r)
    }

    pub(crate) fn from_state(
        fs: &Arc<dyn FileSystem>,
        dir: &Path,
        state: JournalState,
    ) -> Result<DbReader, StorageError> {
        let toc = dir.join("toc");
        let corrupt = |detail: String| StorageError::Corrupt {
            path: toc.clone(),
            offset: 0,
            detail,
        };
        let (db_key, owner) = match (&state.init, state.bad_start) {
            (Some((db_key, uid)), false) => (
                Key::parse(db_key).map_err(|e| corrupt(e.to_string()))?,
                *uid,
            ),
            _ => {
                return Err(corrupt(
                    "the journal does not start with an Init record".into(),
                ))
            }
        };
        // Recency is journal position; a merged index takes the position of the newest index it
        // replaced (its slot).
        let indexes = state
            .live()
            .into_iter()
            .map(|l| {
                Ok(IndexSummary {
                    name: l.file.clone(),
                    index_key: Key::parse(&l.index_key).map_err(|e| corrupt(e.to_string()))?,
                    timestamp: l.timestamp,
                    entries: l.entries,
                    axes: l
                        .axes
                        .iter()
                        .map(|(k, v)| (k.clone(), v.iter().cloned().collect()))
                        .collect(),
                })
            })
            .collect::<Result<Vec<_>, StorageError>>()?;
        Ok(DbReader {
            fs: fs.clone(),
            db: DbRef {
                key: db_key,
                id: dir.display().to_string(),
            },
            owner,
            indexes,
            records: state.records,
            state,
            cache: Mutex::new(HashMap::new()),
        })
    }

    /// The journal as this reader parsed it.
    pub(crate) fn state(&self) -> &JournalState {
        &self.state
    }

    pub fn dir(&self) -> &Path {
        Path::new(&self.db.id)
    }

    pub fn db_key(&self) -> &Key {
        &self.db.key
    }

    pub fn owner(&self) -> u32 {
        self.owner
    }

    pub fn journal_records(&self) -> usize {
        self.records
    }

    /// The index file from the cache, or read without keeping it there.
    fn load_uncached(&self, index: &IndexSummary) -> Result<Arc<IndexFile>, StorageError> {
        if let Ok(c) = self.cache.lock() {
            if let Some(i) = c.get(&index.name) {
                return Ok(i.clone());
            }
        }
        Ok(Arc::new(IndexFile::read(
            &*self.fs,
            &self.dir().join(&index.name),
        )?))
    }

    pub fn load(&self, index: &IndexSummary) -> Result<Arc<IndexFile>, StorageError> {
        if let Ok(c) = self.cache.lock() {
            if let Some(i) = c.get(&index.name) {
                return Ok(i.clone());
            }
        }
        let i = Arc::new(IndexFile::read(&*self.fs, &self.dir().join(&index.name))?);
        if let Ok(mut c) = self.cache.lock() {
            c.insert(index.name.clone(), i.clone());
        }
        Ok(i)
    }

    /// The newer live indexes that can mask entries of index `i`: same index key, same datum
    /// layout. Checking an entry against them replaces remembering every key seen, so listing
    /// needs memory for indexes, not for fields.
    pub(crate) fn maskers(&self, i: usize, file: &IndexFile) -> Result<Vec<Masker>, StorageError> {
        let Some(ix) = self.indexes.get(i) else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for newer in &self.indexes[..i] {
            // A masker holds the same datum key, so it has each of the entry's values: an index
            // whose values of some keyword are all different from this one's masks nothing in
            // it (a forecast's flushes, one step each, never mask each other).
            if newer.index_key != ix.index_key || apart(&newer.axes, &ix.axes) {
                continue;
            }
            let f = self.load(newer)?;
            if f.datum_keywords == file.datum_keywords {
                out.push(Masker::new(f, &newer.axes, &ix.axes));
            }
        }
        Ok(out)
    }
}

/// A newer index that may mask entries of another, with what rules entries out cheaply: for
/// each keyword where the other index has values this one lacks, the values this one has. An
/// entry whose value is not among them is not in this index, and is not looked up.
pub(crate) struct Masker {
    file: Arc<IndexFile>,
    /// (position among the datum keywords, the masker's values), hashed: every entry of the
    /// older index goes through them.
    filters: Vec<(usize, std::collections::HashSet<String>)>,
}

impl Masker {
    fn new(
        file: Arc<IndexFile>,
        own: &HashMap<String, std::collections::BTreeSet<String>>,
        masked: &HashMap<String, std::collections::BTreeSet<String>>,
    ) -> Masker {
        let filters = file
            .datum_keywords
            .iter()
            .enumerate()
            .filter_map(|(p, k)| {
                let (mine, theirs) = (own.get(k)?, masked.get(k)?);
                (!theirs.is_subset(mine)).then(|| (p, mine.iter().cloned().collect()))
            })
            .collect();
        Masker { file, filters }
    }

    fn may_hold(&self, values: &str) -> bool {
        self.filters
            .iter()
            .all(|(p, set)| values.split(SEP).nth(*p).is_none_or(|v| set.contains(v)))
    }
}

/// Whether two indexes' value summaries share no value of some keyword both record: then no
/// field can be in both. A keyword either summary lacks (journals from before summaries) proves
/// nothing.
fn apart(
    a: &HashMap<String, std::collections::BTreeSet<String>>,
    b: &HashMap<String, std::collections::BTreeSet<String>>,
) -> bool {
    a.iter()
        .any(|(k, va)| b.get(k).is_some_and(|vb| va.is_disjoint(vb)))
}

/// Whether an entry is replaced: flagged so by compaction, or live in a newer index.
pub(crate) fn is_masked(
    values: &str,
    flagged: bool,
    maskers: &[Masker],
) -> Result<bool, StorageError> {
    if flagged {
        return Ok(true);
    }
    for m in maskers {
        if m.may_hold(values) && m.file.lookup(values)?.is_some() {
            return Ok(true);
        }
    }
    Ok(false)
}

impl CatalogueReader for DbReader {
    fn db(&self) -> &DbRef {
        &self.db
    }

    fn indexes(&self) -> &[IndexSummary] {
        &self.indexes
    }

    fn lookup(&self, index_key: &Key, datum_key: &Key) -> Result<Option<FieldRef>, StorageError> {
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
            if let Some(e) = file.lookup(&values)? {
                return Ok(Some(FieldRef {
                    object: file
                        .data_files
                        .get(e.file as usize)
                        .cloned()
                        .unwrap_or_default(),
                    offset: e.offset,
                    length: e.length,
                    checksum: e.checksum,
                    extract: e.extract.map(std::sync::Arc::from),
                }));
            }
        }
        Ok(None)
    }

    fn entries(&self, i: usize, include_masked: bool) -> Result<EntryIter<'static>, StorageError> {
        let Some(ix) = self.indexes.get(i) else {
            return Ok(Box::new(std::iter::empty()));
        };
        // Listed once, so not kept: a listing holds the index it walks (and its maskers),
        // never every index of the database.
        let file = self.load_uncached(ix)?;
        let maskers = self.maskers(i, &file)?;
        Ok(Box::new(Entries::new(file, maskers, include_masked)))
    }

    fn visit_entries(
        &self,
        i: usize,
        include_masked: bool,
        visit: &mut dyn FnMut(EntryView<'_>) -> std::ops::ControlFlow<()>,
    ) -> Result<bool, StorageError> {
        let Some(ix) = self.indexes.get(i) else {
            return Ok(true);
        };
        let file = self.load_uncached(ix)?;
        let maskers = self.maskers(i, &file)?;
        let mut walk = Walk::default();
        while let Some(e) = walk.next(&file) {
            let e = e?;
            let masked = is_masked(e.values, e.masked, &maskers)?;
            if masked && !include_masked {
                continue;
            }
            let flow = visit(EntryView {
                keywords: &file.datum_keywords,
                values: e.values,
                masked,
            });
            if flow.is_break() {
                break;
            }
        }
        Ok(true)
    }
}

/// A walk through one index's entries, block by block: it keeps one block's entry positions
/// and gives back the memory of the blocks it is past, so listing an index of any size holds
/// a few megabytes of it.
struct Entries {
    file: Arc<IndexFile>,
    maskers: Vec<Masker>,
    walk: Walk,
    include_masked: bool,
}

impl Entries {
    fn new(file: Arc<IndexFile>, maskers: Vec<Masker>, include_masked: bool) -> Self {
        Entries {
            file,
            maskers,
            walk: Walk::default(),
            include_masked,
        }
    }
}

impl Iterator for Entries {
    type Item = Result<ListedEntry, StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let e = match self.walk.next(&self.file)? {
                Ok(e) => e,
                Err(err) => return Some(Err(err)),
            };
            let masked = match is_masked(e.values, e.masked, &self.maskers) {
                Ok(m) => m,
                Err(err) => return Some(Err(err)),
            };
            if masked && !self.include_masked {
                continue;
            }
            return Some(Ok(ListedEntry {
                datum: datum_key_of(&self.file.datum_keywords, e.values),
                field: FieldRef {
                    object: self
                        .file
                        .data_files
                        .get(e.file as usize)
                        .cloned()
                        .unwrap_or_default(),
                    offset: e.offset,
                    length: e.length,
                    checksum: e.checksum,
                    extract: e.extract.map(std::sync::Arc::from),
                },
                masked,
            }));
        }
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
    use super::*;
    use crate::storage::{Catalogue, PosixStore, Store, TocCatalogue};

    fn catalogue(root: &Path) -> TocCatalogue {
        super::super::catalogue::one_root(root)
    }

    /// Archives through a catalogue writer and a store writer, as a frontend does.
    fn write(c: &TocCatalogue, db: &DbRef, fields: &[(&Key, &Key, &[u8])]) {
        let mut sw = PosixStore::default().writer(db).unwrap();
        let mut cw = c.writer(db).unwrap();
        for (ik, dk, data) in fields {
            let f = sw.append(data).unwrap();
            cw.add(ik, dk, f).unwrap();
        }
        sw.sync().unwrap();
        cw.commit().unwrap();
    }

    #[test]
    fn visible_only_after_commit_newest_wins_and_masked_listed_on_request() {
        let d = tempfile::tempdir().unwrap();
        let c = catalogue(d.path());
        let db = c
            .create(&Key::parse("{class=od,expver=0001}").unwrap(), "schema")
            .unwrap();
        assert_eq!(c.find(&db.key).unwrap(), Some(db.clone()));
        let ik = Key::parse("{type=fc,levtype=pl}").unwrap();
        let dk = Key::parse("{step=6,levelist=500,param=130}").unwrap();
        let other = Key::parse("{step=0,levelist=500,param=130}").unwrap();
        let mut sw = PosixStore::default().writer(&db).unwrap();
        let mut cw = c.writer(&db).unwrap();
        let f = sw.append(b"first").unwrap();
        cw.add(&ik, &dk, f).unwrap();
        assert!(c.reader(&db).unwrap().lookup(&ik, &dk).unwrap().is_none());
        sw.sync().unwrap();
        assert_eq!(cw.commit().unwrap(), 1);
        let r = c.reader(&db).unwrap();
        let f = r.lookup(&ik, &dk).unwrap().unwrap();
        assert_eq!(PosixStore::default().read(&db, &f).unwrap(), b"first");

        write(&c, &db, &[(&ik, &dk, b"second"), (&ik, &other, b"zero")]);
        let r = c.reader(&db).unwrap();
        assert_eq!(r.indexes().len(), 2);
        let f = r.lookup(&ik, &dk).unwrap().unwrap();
        assert_eq!(PosixStore::default().read(&db, &f).unwrap(), b"second");
        // The older index's only entry is masked by the newer index.
        let older: Vec<_> = r.entries(1, true).unwrap().map(Result::unwrap).collect();
        assert_eq!(older.len(), 1);
        assert!(older[0].masked);
        assert_eq!(r.entries(1, false).unwrap().count(), 0);
        let newer: Vec<_> = r.entries(0, false).unwrap().map(Result::unwrap).collect();
        assert_eq!(newer.len(), 2);
        assert!(newer.iter().all(|e| !e.masked));
        // A reader refreshed from where it stopped sees what a fresh one sees.
        let r1 = DbReader::open(&crate::storage::fs::os(), Path::new(&db.id)).unwrap();
        write(&c, &db, &[(&ik, &other, b"one")]);
        let fresh = DbReader::open(&crate::storage::fs::os(), Path::new(&db.id)).unwrap();
        let refreshed = r1.refreshed().unwrap();
        let names =
            |r: &DbReader| -> Vec<String> { r.indexes().iter().map(|i| i.name.clone()).collect() };
        assert_eq!(names(&refreshed), names(&fresh));
        assert_eq!(refreshed.journal_records(), fresh.journal_records());
        assert_eq!(names(&refreshed).len(), 3);
        let dbs: Vec<DbRef> = c.databases().into_iter().map(Result::unwrap).collect();
        assert_eq!(dbs, vec![db]);
        assert_eq!(
            datum_key_of(&["a".into(), "b".into()], "1\u{1f}"),
            Key::parse("{a=1,b=}").unwrap()
        );
    }

    #[test]
    fn only_indexes_that_can_hold_an_entry_are_asked_whether_they_mask_it() {
        let d = tempfile::tempdir().unwrap();
        let c = catalogue(d.path());
        let db = c.create(&Key::parse("{class=od}").unwrap(), "s").unwrap();
        let ik = Key::parse("{type=fc,levtype=pl}").unwrap();
        let k = |step: &str, number: &str| {
            Key::parse(&format!("{{step={step},number={number},param=130}}")).unwrap()
        };
        // Oldest first: steps 0-1 of members 1-2; then step 2 of member 1 (apart: no step in
        // common); then fields sharing a step and a member with the first, but no field; then
        // member 2 of step 1 again (the one field that is replaced).
        write(
            &c,
            &db,
            &[
                (&ik, &k("0", "1"), b"a"),
                (&ik, &k("1", "1"), b"b"),
                (&ik, &k("0", "2"), b"c"),
                (&ik, &k("1", "2"), b"d"),
            ],
        );
        write(&c, &db, &[(&ik, &k("2", "1"), b"e")]);
        write(
            &c,
            &db,
            &[(&ik, &k("0", "3"), b"f"), (&ik, &k("2", "2"), b"g")],
        );
        write(&c, &db, &[(&ik, &k("1", "2"), b"h")]);
        let r = DbReader::open(&crate::storage::fs::os(), Path::new(&db.id)).unwrap();
        assert_eq!(r.indexes().len(), 4);
        // Newest first: all but the flush of step 2 may mask entries of the first.
        let file = r.load(&r.indexes()[3]).unwrap();
        let maskers = r.maskers(3, &file).unwrap();
        assert_eq!(maskers.len(), 2, "step 2 alone is apart from steps 0-1");
        // The third flush rules out, before any lookup, the fields whose step or member it
        // lacks.
        let values = |step, number| entry_values(&file.datum_keywords, &k(step, number));
        assert!(maskers
            .iter()
            .any(|m| !m.may_hold(&values("0", "1")) && m.may_hold(&values("0", "2"))));
        assert!(maskers.iter().any(|m| m.may_hold(&values("1", "2"))));
        let oldest: Vec<_> = r.entries(3, true).unwrap().map(Result::unwrap).collect();
        let masked: Vec<String> = oldest
            .iter()
            .filter(|e| e.masked)
            .map(|e| e.datum.to_string())
            .collect();
        assert_eq!(oldest.len(), 4);
        assert_eq!(masked, vec![k("1", "2").to_string()]);
        assert_eq!(r.entries(3, false).unwrap().count(), 3);
    }

    #[test]
    fn a_walk_through_many_blocks_gives_every_entry_once() {
        let d = tempfile::tempdir().unwrap();
        let c = catalogue(d.path());
        let db = c.create(&Key::parse("{class=od}").unwrap(), "s").unwrap();
        let ik = Key::parse("{type=fc,levtype=pl}").unwrap();
        // More than RELEASE_EVERY blocks of 1024 entries, so pages behind are released while
        // the walk goes on.
        let keys: Vec<Key> = (0..70_000)
            .map(|i| Key::parse(&format!("{{step={},param={}}}", i / 100, i % 100)).unwrap())
            .collect();
        let fields: Vec<(&Key, &Key, &[u8])> = keys.iter().map(|k| (&ik, k, &b"x"[..])).collect();
        write(&c, &db, &fields);
        let r = c.reader(&db).unwrap();
        let mut seen = std::collections::HashSet::new();
        for e in r.entries(0, false).unwrap() {
            assert!(seen.insert(e.unwrap().datum.to_string()));
        }
        assert_eq!(seen.len(), keys.len());
    }

    #[test]
    fn many_writer_threads_into_one_database() {
        let d = tempfile::tempdir().unwrap();
        let c = catalogue(d.path());
        let db = c.create(&Key::parse("{class=od}").unwrap(), "s").unwrap();
        std::thread::scope(|s| {
            for t in 0..8 {
                let (c, db) = (&c, &db);
                s.spawn(move || {
                    let ik = Key::from_pairs([("type", "fc")]);
                    let keys: Vec<(Key, Vec<u8>)> = (0..50)
                        .map(|i| {
                            (
                                Key::from_pairs([
                                    ("step", t.to_string()),
                                    ("param", i.to_string()),
                                ]),
                                format!("{t}-{i}").into_bytes(),
                            )
                        })
                        .collect();
                    let fields: Vec<(&Key, &Key, &[u8])> =
                        keys.iter().map(|(k, v)| (&ik, k, v.as_slice())).collect();
                    write(c, db, &fields);
                });
            }
        });
        let r = c.reader(&db).unwrap();
        for t in 0..8 {
            for i in 0..50 {
                let dk = Key::from_pairs([("step", t.to_string()), ("param", i.to_string())]);
                let f = r
                    .lookup(&Key::from_pairs([("type", "fc")]), &dk)
                    .unwrap()
                    .unwrap();
                assert_eq!(
                    PosixStore::default().read(&db, &f).unwrap(),
                    format!("{t}-{i}").as_bytes()
                );
            }
        }
    }
}
