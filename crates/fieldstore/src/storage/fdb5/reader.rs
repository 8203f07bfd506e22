//! A reader of one FDB5 database: its visible indexes newest first (from the tocs), each a
//! B-tree opened on demand; fingerprints named by the rule of the database's own schema copy.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use super::btree::{FieldLoc, Tree};
use super::toc::{SeenIndex, TocView};
use crate::model::schema::{Matcher, Predicate, Schema};
use crate::model::Key;
use crate::storage::catalogue::{CatalogueReader, EntryIter, IndexSummary, ListedEntry};
use crate::storage::fs::{FileSystem, Mapped};
use crate::storage::{DbRef, FieldRef, StorageError};

/// A datum rule's keywords, in order.
type Keywords = Arc<Vec<String>>;

pub(crate) struct Fdb5Reader {
    fs: Arc<dyn FileSystem>,
    db: DbRef,
    pub(crate) view: Arc<TocView>,
    /// The visible indexes, newest first, as `view.indexes` positions.
    visible: Arc<Vec<usize>>,
    summaries: Arc<Vec<IndexSummary>>,
    schema: Option<Arc<Schema>>,
    trees: Arc<Mutex<HashMap<usize, Tree>>>,
    maps: Arc<Mutex<HashMap<PathBuf, Arc<Mapped>>>>,
    /// Datum keywords per index key, from the schema.
    rules: Arc<Mutex<HashMap<Key, Option<Keywords>>>>,
}

/// Whether a stored value fits a predicate of a rule (values compared as FDB5 stores them).
fn fits(p: &Predicate, value: Option<&str>) -> bool {
    match (&p.matcher, value) {
        (Matcher::Optional(_) | Matcher::Ignore, _) => true,
        (_, None) => false,
        (Matcher::Any, Some(_)) => true,
        (Matcher::Values(vs), Some(v)) => vs.iter().any(|x| x.eq_ignore_ascii_case(v)),
        (Matcher::Exclude(vs), Some(v)) => !vs.iter().any(|x| x.eq_ignore_ascii_case(v)),
    }
}

fn level_fits(preds: &[Predicate], key: &Key, strict: bool) -> bool {
    let used: HashSet<&str> = preds.iter().map(|p| p.stored_keyword()).collect();
    key.keywords().all(|k| used.contains(k))
        && preds.iter().all(|p| {
            let v = key.get(p.stored_keyword());
            if strict {
                fits(p, v)
            } else {
                v.is_some() || matches!(p.matcher, Matcher::Optional(_) | Matcher::Ignore)
            }
        })
}

/// The datum rule's keywords, in order, for an index of this database: the first rule whose
/// database and index levels take the keys (values checked, else keywords alone).
pub(crate) fn datum_keywords(schema: &Schema, db: &Key, index: &Key) -> Option<Vec<String>> {
    for strict in [true, false] {
        for path in schema.paths() {
            if level_fits(&path.levels[0], db, strict) && level_fits(&path.levels[1], index, strict)
            {
                return Some(
                    path.levels[2]
                        .iter()
                        .map(|p| p.stored_keyword().to_string())
                        .collect(),
                );
            }
        }
    }
    None
}

/// A datum fingerprint split back into a key. A value may hold `:` itself (FDB5's `quantile`,
/// `99:100`): the extra component is glued back onto that keyword.
pub(crate) fn datum_key(keywords: &[String], fp: &str) -> Key {
    let mut parts: Vec<&str> = fp.split(':').collect();
    let mut pairs: Vec<(&str, String)> = Vec::with_capacity(keywords.len());
    let extra = parts.len().saturating_sub(keywords.len());
    let glue = if extra > 0 {
        keywords.iter().position(|k| k == "quantile")
    } else {
        None
    };
    let mut i = 0;
    for (n, kw) in keywords.iter().enumerate() {
        let take = if Some(n) == glue { 1 + extra } else { 1 };
        let end = (i + take).min(parts.len());
        let v = parts.get(i..end).map(|s| s.join(":")).unwrap_or_default();
        pairs.push((kw, v));
        i = end;
    }
    parts.clear();
    Key::from_pairs(pairs)
}

/// A datum key's fingerprint in the rule's order.
pub(crate) fn fingerprint(keywords: &[String], datum: &Key) -> String {
    let mut s = String::new();
    for (i, kw) in keywords.iter().enumerate() {
        if i > 0 {
            s.push(':');
        }
        s.push_str(datum.get(kw).unwrap_or(""));
    }
    s
}

impl Fdb5Reader {
    pub fn open(fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<Fdb5Reader, StorageError> {
        let view = TocView::read(&**fs, dir)?;
        let schema = match fs.read(&dir.join("schema")) {
            Ok(text) => {
                let text = String::from_utf8_lossy(&text);
                let origin = dir.join("schema").display().to_string();
                Some(Arc::new(Schema::parse(&text, &origin).map_err(|e| {
                    StorageError::Corrupt {
                        path: dir.join("schema"),
                        offset: 0,
                        detail: format!("the database's schema copy does not parse: {e}"),
                    }
                })?))
            }
            Err(_) => None,
        };
        let visible: Vec<usize> = (0..view.indexes.len())
            .rev()
            .filter(|&i| view.indexes[i].visible)
            .collect();
        let summaries = visible
            .iter()
            .map(|&i| {
                let ix = &view.indexes[i];
                IndexSummary {
                    name: index_name(dir, ix),
                    index_key: ix.record.key.to_key(),
                    timestamp: ix.record.time.max(0) as u64,
                    entries: 0,
                    axes: ix
                        .record
                        .axes
                        .iter()
                        .map(|(k, v)| (k.clone(), v.iter().cloned().collect()))
                        .collect(),
                }
            })
            .collect();
        Ok(Fdb5Reader {
            fs: fs.clone(),
            db: DbRef {
                key: view.key.to_key(),
                id: dir.display().to_string(),
            },
            view: Arc::new(view),
            visible: Arc::new(visible),
            summaries: Arc::new(summaries),
            schema,
            trees: Default::default(),
            maps: Default::default(),
            rules: Default::default(),
        })
    }

    /// When the `pos`-th visible index (newest first) became visible, in microseconds.
    pub(crate) fn visible_at(&self, pos: usize) -> u64 {
        self.visible
            .get(pos)
            .map_or(0, |&n| self.view.indexes[n].visible_at)
    }

    pub fn dir(&self) -> &Path {
        Path::new(&self.db.id)
    }

    /// The tree of the `n`-th index record of the walk.
    pub(crate) fn tree(&self, n: usize) -> Result<Tree, StorageError> {
        if let Some(t) = self.trees.lock().ok().and_then(|c| c.get(&n).cloned()) {
            return Ok(t);
        }
        let ix = &self.view.indexes[n];
        let path = ix.index_path();
        let geo = super::btree::Geometry::of(&ix.record.index_type).ok_or_else(|| {
            StorageError::Corrupt {
                path: ix.toc.clone(),
                offset: 0,
                detail: format!(
                    "index type '{}' is not one FDB5 writes",
                    ix.record.index_type
                ),
            }
        })?;
        let cached = self.maps.lock().ok().and_then(|m| m.get(&path).cloned());
        let map = match cached {
            Some(m) if (m.len() as u64) >= ix.record.offset.max(0) as u64 + geo.page as u64 => m,
            _ => {
                let m = Arc::new(
                    self.fs
                        .map(&path)
                        .map_err(StorageError::io("open index", &path))?,
                );
                if let Ok(mut c) = self.maps.lock() {
                    c.insert(path.clone(), m.clone());
                }
                m
            }
        };
        let t = Tree::over(map, &path, ix.record.offset, geo)?;
        if let Ok(mut c) = self.trees.lock() {
            c.insert(n, t.clone());
        }
        Ok(t)
    }

    /// The datum keywords of an index key's rule, if the database's schema names one.
    fn keywords(&self, index: &Key) -> Option<Arc<Vec<String>>> {
        if let Some(k) = self.rules.lock().ok().and_then(|c| c.get(index).cloned()) {
            return k;
        }
        let found = self
            .schema
            .as_ref()
            .and_then(|s| datum_keywords(s, &self.db.key, index))
            .map(Arc::new);
        if let Ok(mut c) = self.rules.lock() {
            c.insert(index.clone(), found.clone());
        }
        found
    }

    /// The keywords of the datum rule, or else (no schema copy) the index's axes' keywords in
    /// the order of a key that names them.
    fn keywords_for(
        &self,
        n: usize,
        datum: Option<&Key>,
    ) -> Result<Arc<Vec<String>>, StorageError> {
        let ix = &self.view.indexes[n];
        if let Some(k) = self.keywords(&ix.record.key.to_key()) {
            return Ok(k);
        }
        if let Some(d) = datum {
            return Ok(Arc::new(d.keywords().map(str::to_string).collect()));
        }
        Err(StorageError::Corrupt {
            path: self.dir().join("schema"),
            offset: 0,
            detail: format!(
                "no rule of the database's schema copy takes its index {}: its fields cannot be named",
                ix.record.key.to_key()
            ),
        })
    }

    pub(crate) fn field_ref(
        &self,
        ix: &SeenIndex,
        loc: FieldLoc,
    ) -> Result<FieldRef, StorageError> {
        let Some((_, location)) = ix.record.uris.iter().find(|(id, _)| *id == loc.uri) else {
            return Err(StorageError::Corrupt {
                path: ix.index_path(),
                offset: ix.record.offset.max(0) as u64,
                detail: format!(
                    "an entry names data file id {}, which its toc record does not list",
                    loc.uri
                ),
            });
        };
        let object = self.object_name(ix, location);
        Ok(FieldRef {
            object,
            offset: loc.offset,
            length: loc.length,
            checksum: None,
            extract: None,
        })
    }

    /// A data file of an index's URI store as `FieldRef::object` names it: relative to the
    /// database when it lies there, else its path.
    fn object_name(&self, ix: &SeenIndex, location: &str) -> String {
        let path = ix.data_path(location);
        match path.strip_prefix(self.dir()) {
            Ok(rel) if rel.components().count() == 1 => rel.display().to_string(),
            _ => path.display().to_string(),
        }
    }

    /// The `pos`-th visible index (newest first) as a conversion reads it.
    pub(crate) fn raw_index(&self, pos: usize) -> Result<RawIndex, StorageError> {
        let Some(&n) = self.visible.get(pos) else {
            return Err(StorageError::Config {
                detail: format!("{} has no visible index {pos}", self.db.id),
            });
        };
        let ix = &self.view.indexes[n];
        let (ids, objects) = ix
            .record
            .uris
            .iter()
            .map(|(id, location)| (*id, self.object_name(ix, location)))
            .unzip();
        Ok(RawIndex {
            index_key: ix.record.key.to_key(),
            keywords: self.keywords_for(n, None)?,
            objects,
            ids,
            timestamp: ix.record.time.max(0) as u64,
            axes: ix.record.axes.clone(),
            tree: self.tree(n)?,
            path: ix.index_path(),
            offset: ix.record.offset.max(0) as u64,
        })
    }

    /// Whether a fingerprint is also in a newer visible index of the same index key.
    fn masked_by_newer(&self, pos: usize, fp: &str, datum: &Key) -> Result<bool, StorageError> {
        let ix = &self.summaries[pos];
        for (j, newer) in self.summaries[..pos].iter().enumerate() {
            if newer.index_key != ix.index_key
                || !datum
                    .iter()
                    .all(|(k, v)| newer.axes.get(k).is_none_or(|s| s.contains(v)))
            {
                continue;
            }
            if self.tree(self.visible[j])?.lookup(fp)?.is_some() {
                return Ok(true);
            }
        }
        Ok(false)
    }
}

/// The name `list`, `dump` and purge give an index: its file and the tree's offset.
fn index_name(dir: &Path, ix: &SeenIndex) -> String {
    let p = ix.index_path();
    let shown = p
        .strip_prefix(dir)
        .map(|r| r.display().to_string())
        .unwrap_or_else(|_| p.display().to_string());
    format!("{shown}@{}", ix.record.offset)
}

impl CatalogueReader for Fdb5Reader {
    fn db(&self) -> &DbRef {
        &self.db
    }

    fn indexes(&self) -> &[IndexSummary] {
        &self.summaries
    }

    fn lookup(&self, index: &Key, datum: &Key) -> Result<Option<FieldRef>, StorageError> {
        for (pos, s) in self.summaries.iter().enumerate() {
            if s.index_key != *index
                || !datum
                    .iter()
                    .all(|(k, v)| s.axes.get(k).is_none_or(|set| set.contains(v)))
            {
                continue;
            }
            let n = self.visible[pos];
            let keywords = self.keywords_for(n, Some(datum))?;
            if keywords.len() != datum.len() || !keywords.iter().all(|k| datum.contains(k)) {
                continue;
            }
            let fp = fingerprint(&keywords, datum);
            if let Some(loc) = self.tree(n)?.lookup(&fp)? {
                return self.field_ref(&self.view.indexes[n], loc).map(Some);
            }
        }
        Ok(None)
    }

    fn entries(&self, i: usize, include_masked: bool) -> Result<EntryIter<'static>, StorageError> {
        let Some(&n) = self.visible.get(i) else {
            return Ok(Box::new(std::iter::empty()));
        };
        let keywords = self.keywords_for(n, None)?;
        let tree = self.tree(n)?;
        // Entries of older indexes are checked against newer ones; the reader's trees are
        // shared, so the iterator holds what it needs.
        let reader = Fdb5Entries {
            me: self.snapshot(),
            pos: i,
            n,
            keywords,
            iter: tree.entries(),
            include_masked,
            failed: false,
        };
        Ok(Box::new(reader))
    }
}

impl Fdb5Reader {
    /// A copy sharing the decoded tocs and open trees, for iterators that outlive `&self`.
    fn snapshot(&self) -> Arc<Fdb5Reader> {
        Arc::new(Fdb5Reader {
            fs: self.fs.clone(),
            db: self.db.clone(),
            view: self.view.clone(),
            visible: self.visible.clone(),
            summaries: self.summaries.clone(),
            schema: self.schema.clone(),
            trees: self.trees.clone(),
            maps: self.maps.clone(),
            rules: self.rules.clone(),
        })
    }
}

struct Fdb5Entries {
    me: Arc<Fdb5Reader>,
    pos: usize,
    n: usize,
    keywords: Arc<Vec<String>>,
    iter: super::btree::TreeEntries,
    include_masked: bool,
    /// After an error the rest of the index is not read: the error would repeat per entry.
    failed: bool,
}

impl Fdb5Entries {
    fn step(&mut self, fp: String, loc: FieldLoc) -> Result<Option<ListedEntry>, StorageError> {
        let datum = datum_key(&self.keywords, &fp);
        let masked = self.me.masked_by_newer(self.pos, &fp, &datum)?;
        if masked && !self.include_masked {
            return Ok(None);
        }
        let field = self.me.field_ref(&self.me.view.indexes[self.n], loc)?;
        Ok(Some(ListedEntry {
            datum,
            field,
            masked,
        }))
    }
}

impl Iterator for Fdb5Entries {
    type Item = Result<ListedEntry, StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        loop {
            let r = match self.iter.next()? {
                Ok((fp, loc)) => self.step(fp, loc),
                Err(e) => Err(e),
            };
            match r {
                Ok(Some(e)) => return Some(Ok(e)),
                Ok(None) => continue,
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

/// One visible index of an FDB5 database, read raw: its tree's fingerprints are not split into
/// keys nor its locations into `FieldRef`s, so a conversion walks a million entries in a
/// fraction of what `entries` takes. An FDB5 tree holds each fingerprint once, sorted.
pub(crate) struct RawIndex {
    pub index_key: Key,
    /// The datum rule's keywords, in the fingerprints' order.
    pub keywords: Keywords,
    /// The data files the entries name (`FieldRef::object`), in URI-store order.
    pub objects: Vec<String>,
    /// The URI-store ids, parallel to `objects`.
    ids: Vec<u64>,
    /// The toc record's time (seconds).
    pub timestamp: u64,
    /// The toc record's axes: keyword → values of its entries.
    pub axes: Vec<(String, Vec<String>)>,
    tree: Tree,
    path: PathBuf,
    offset: u64,
}

impl RawIndex {
    /// Each entry's fingerprint bytes and location, in fingerprint order, nothing copied.
    pub fn visit(
        &self,
        f: impl FnMut(&[u8], FieldLoc) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        self.tree.visit(f)
    }

    /// How many entries it holds.
    pub fn entry_count(&self) -> Result<u64, StorageError> {
        self.tree.entry_count()
    }

    /// The position in `objects` of the data file an entry names.
    pub fn object_of(&self, loc: &FieldLoc) -> Result<u32, StorageError> {
        match self.ids.iter().position(|&id| id == loc.uri) {
            Some(i) => Ok(i as u32),
            None => Err(StorageError::Corrupt {
                path: self.path.clone(),
                offset: self.offset,
                detail: format!(
                    "an entry names data file id {}, which its toc record does not list",
                    loc.uri
                ),
            }),
        }
    }
}
