//! `list`: a lazy walk over the catalogue, with FDB5's rules for what each depth gives and
//! which locks apply.

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::sync::Arc;

use super::element::{ListElement, ListOptions};
use super::error::ApiError;
use super::local::Located;
use crate::model::schema::{Expansion, LevelMatcher, SplitKey};
use crate::model::Key;
use crate::storage::catalogue::{Catalogue, CatalogueReader, EntryIter, ListedEntry};
use crate::storage::{DbRef, StorageError, Store};

/// `list` as a lazy walk: database by database, index by index, entry by entry, so memory holds
/// one database's index summaries and the entry being yielded, never the result.
pub(super) struct Listing {
    catalogue: Arc<dyn Catalogue>,
    store: Arc<dyn Store>,
    expansions: Vec<Expansion>,
    /// Each expansion's datum level, hashed: the test every entry goes through.
    datum_matchers: Vec<LevelMatcher>,
    options: ListOptions,
    dbs: std::vec::IntoIter<Result<DbRef, StorageError>>,
    reader: Option<Box<dyn CatalogueReader>>,
    /// Expansions whose database level matches the current database.
    db_ex: Vec<usize>,
    next_index: usize,
    /// Expansions whose index level matches the current index.
    index_ex: Vec<usize>,
    index_key: Key,
    timestamp: u64,
    entries: Option<EntryIter<'static>>,
    /// Depth 2: index keys already listed for this database.
    seen_index: HashSet<Key>,
    locks: LockRule,
    /// A toc catalogue: FDB5 lists its databases at depth 1 from their directory names.
    toc: bool,
    /// The last object's URI: (database id, object, URI).
    last_uri: Option<(String, String, String)>,
    /// Hand each index to the caller ([`Step::Index`]) instead of opening its entries, so
    /// [`Listing::lines`] can have the catalogue lend them.
    views: bool,
    /// An index the walk reached, not opened yet (only with `views`).
    open_index: Option<usize>,
}

/// Whether databases locked for listing are left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LockRule {
    /// As FDB5's listing: a database locked for listing "does not exist", except at depth 1 of
    /// a toc store, which FDB5 answers from directory names before it opens (or checks) any.
    Honour,
    /// As FDB5's axes, which check no lock.
    Ignore,
}

impl Listing {
    pub(super) fn new(
        catalogue: Arc<dyn Catalogue>,
        store: Arc<dyn Store>,
        expansions: Vec<Expansion>,
        options: ListOptions,
        locks: LockRule,
    ) -> Listing {
        let toc = catalogue.kind() == "toc";
        Listing {
            dbs: catalogue.databases().into_iter(),
            catalogue,
            store,
            datum_matchers: expansions
                .iter()
                .map(|e| LevelMatcher::new(&e.levels[2]))
                .collect(),
            expansions,
            options,
            reader: None,
            db_ex: Vec::new(),
            next_index: 0,
            index_ex: Vec::new(),
            index_key: Key::new(),
            timestamp: 0,
            entries: None,
            seen_index: HashSet::new(),
            locks,
            toc,
            last_uri: None,
            views: false,
            open_index: None,
        }
    }

    fn split(&self, index: Key, datum: Key) -> SplitKey {
        SplitKey {
            db: self
                .reader
                .as_ref()
                .map(|r| r.db().key.clone())
                .unwrap_or_default(),
            index,
            datum,
        }
    }

    /// Moves to the next index of the current database that can match; `Some` when depth 2
    /// yields it as an element.
    fn next_index(&mut self) -> Option<Result<ListElement, ApiError>> {
        let reader = self.reader.as_ref()?;
        while let Some(ix) = reader.indexes().get(self.next_index) {
            let i = self.next_index;
            self.next_index += 1;
            let index_ex: Vec<usize> = self
                .db_ex
                .iter()
                .copied()
                .filter(|&e| self.expansions[e].levels[1].matches(&ix.index_key))
                .collect();
            if index_ex.is_empty() {
                continue;
            }
            if self.options.depth == 2 {
                // Each index key once, or (masked ones included) each index, as FDB5 lists
                // one element per index and deduplicates only when asked.
                let first = self.seen_index.insert(ix.index_key.clone());
                if !first && !self.options.include_masked {
                    continue;
                }
                let (key, ts) = (ix.index_key.clone(), ix.timestamp);
                return Some(Ok(ListElement {
                    key: self.split(key, Key::new()),
                    location: None,
                    timestamp: ts,
                    masked: !first,
                }));
            }
            // Skip the index without opening it when its value summary rules it out.
            let possible = index_ex.iter().any(|&e| {
                self.expansions[e].levels[2]
                    .keywords
                    .iter()
                    .all(|(k, v)| v.as_ref().is_none_or(|v| ix.may_contain(k, v)))
            });
            if !possible {
                continue;
            }
            self.index_key = ix.index_key.clone();
            self.timestamp = ix.timestamp;
            self.index_ex = index_ex;
            if self.views {
                self.open_index = Some(i);
                return None;
            }
            return self.open_entries(i).err().map(Err);
        }
        self.reader = None;
        None
    }

    /// Opens index `i`'s entries for the walk to go through.
    fn open_entries(&mut self, i: usize) -> Result<(), ApiError> {
        if let Some(reader) = self.reader.as_ref() {
            self.entries = Some(reader.entries(i, self.options.include_masked)?);
        }
        Ok(())
    }
}

/// What [`Listing::lend`] did with an index.
enum Lent {
    Done(ControlFlow<()>),
    /// The catalogue does not lend entries.
    Unsupported,
}

/// What the walk yields: an element of depth 1 or 2, a field, or (with `views`) an index
/// whose fields the caller walks itself.
enum Step {
    Element(ListElement),
    Field(DbRef, ListedEntry),
    Index(usize),
}

impl Iterator for Listing {
    type Item = Result<ListElement, ApiError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            return Some(match self.step()? {
                Err(e) => Err(e),
                Ok(Step::Element(el)) => Ok(el),
                Ok(Step::Field(db, e)) => Ok(self.field_element(&db, e)),
                Ok(Step::Index(i)) => match self.open_entries(i) {
                    Ok(()) => continue,
                    Err(e) => Err(e),
                },
            });
        }
    }
}

impl Listing {
    fn field_element(&mut self, db: &DbRef, e: ListedEntry) -> ListElement {
        ListElement {
            location: Some(self.location(db, &e.field)),
            key: self.split(self.index_key.clone(), e.datum),
            timestamp: self.timestamp,
            masked: e.masked,
        }
    }

    /// The listing as `fieldstore list` prints it, one line each (`{db}{index}{datum}`, as
    /// [`SplitKey::porcelain`], then ` (masked)` for a replaced field when `mark_masked`, then
    /// a newline), handed to `line`. Fields of catalogues that lend their entries
    /// ([`CatalogueReader::visit_entries`]) go from the index straight into the line, with no
    /// key, location or element made for each: a listing of 10 million fields is mostly that.
    /// Errors go to `on_error`, and the walk goes on unless it or `line` breaks.
    pub(super) fn lines(
        mut self,
        mark_masked: bool,
        line: &mut dyn FnMut(&[u8]) -> ControlFlow<()>,
        on_error: &mut dyn FnMut(ApiError) -> ControlFlow<()>,
    ) {
        self.views = true;
        let mut buf: Vec<u8> = Vec::with_capacity(256);
        let element = |el: &ListElement, buf: &mut Vec<u8>| {
            buf.clear();
            buf.extend_from_slice(el.key.porcelain().as_bytes());
            if mark_masked && el.masked {
                buf.extend_from_slice(b" (masked)");
            }
            buf.push(b'\n');
        };
        while let Some(step) = self.step() {
            let flow = match step {
                Err(e) => on_error(e),
                Ok(Step::Element(el)) => {
                    element(&el, &mut buf);
                    line(&buf)
                }
                Ok(Step::Field(db, e)) => {
                    let el = self.field_element(&db, e);
                    element(&el, &mut buf);
                    line(&buf)
                }
                Ok(Step::Index(i)) => match self.lend(i, mark_masked, &mut buf, line) {
                    Ok(Lent::Done(flow)) => flow,
                    Ok(Lent::Unsupported) => match self.open_entries(i) {
                        Ok(()) => ControlFlow::Continue(()),
                        Err(e) => on_error(e),
                    },
                    Err(e) => on_error(e),
                },
            };
            if flow.is_break() {
                return;
            }
        }
    }

    /// Has the catalogue lend index `i`'s fields, each printed into `buf` and handed to `line`.
    fn lend(
        &self,
        i: usize,
        mark_masked: bool,
        buf: &mut Vec<u8>,
        line: &mut dyn FnMut(&[u8]) -> ControlFlow<()>,
    ) -> Result<Lent, ApiError> {
        let Some(reader) = self.reader.as_ref() else {
            return Ok(Lent::Done(ControlFlow::Continue(())));
        };
        // `{db}{index}` once for the index: the porcelain of the keys with an empty datum,
        // less its closing `{}`.
        let mut prefix = SplitKey {
            db: reader.db().key.clone(),
            index: self.index_key.clone(),
            datum: Key::new(),
        }
        .porcelain();
        prefix.truncate(prefix.len().saturating_sub(2));
        let matchers: Vec<&LevelMatcher> = self
            .index_ex
            .iter()
            .filter_map(|&x| self.datum_matchers.get(x))
            .collect();
        let every = matchers.iter().any(|m| m.matches_all());
        let mut flow = ControlFlow::Continue(());
        let lent = reader.visit_entries(i, self.options.include_masked, &mut |v| {
            if !every && !matchers.iter().any(|m| m.matches_with(|kw| v.get(kw))) {
                return ControlFlow::Continue(());
            }
            buf.clear();
            buf.extend_from_slice(prefix.as_bytes());
            buf.push(b'{');
            let mut first = true;
            for (kw, value) in v.pairs() {
                if value.is_empty() {
                    continue;
                }
                if !first {
                    buf.push(b',');
                }
                first = false;
                buf.extend_from_slice(kw.as_bytes());
                buf.push(b'=');
                buf.extend_from_slice(value.as_bytes());
            }
            buf.push(b'}');
            if mark_masked && v.masked {
                buf.extend_from_slice(b" (masked)");
            }
            buf.push(b'\n');
            flow = line(buf);
            flow
        });
        match lent {
            Ok(true) => Ok(Lent::Done(flow)),
            Ok(false) => Ok(Lent::Unsupported),
            Err(e) => Err(e.into()),
        }
    }

    /// Where a field is: its object's URI made once for the run of fields in that object
    /// (making it per field was a tenth of a large listing's time).
    fn location(&mut self, db: &DbRef, field: &crate::storage::FieldRef) -> super::Location {
        let hit = self
            .last_uri
            .as_ref()
            .is_some_and(|(d, o, _)| *d == db.id && *o == field.object);
        if !hit {
            let uri = self.store.uri(db, &field.object);
            self.last_uri = Some((db.id.clone(), field.object.clone(), uri));
        }
        super::Location {
            uri: self
                .last_uri
                .as_ref()
                .map(|(_, _, u)| u.clone())
                .unwrap_or_default(),
            offset: field.offset,
            length: field.length,
        }
    }

    /// The fields the walk finds, with their catalogue references: what a maintenance command
    /// (`extract-index`) works through, named as a listing names them (partial requests).
    pub(super) fn located(mut self) -> impl Iterator<Item = Result<Located, ApiError>> {
        std::iter::from_fn(move || loop {
            match self.step()? {
                Ok(Step::Field(db, e)) => {
                    return Some(Ok(Located {
                        db,
                        field: e.field,
                        index: self.index_key.clone(),
                        datum: e.datum,
                    }))
                }
                Ok(Step::Element(_)) => continue,
                Ok(Step::Index(i)) => {
                    if let Err(e) = self.open_entries(i) {
                        return Some(Err(e));
                    }
                }
                Err(e) => return Some(Err(e)),
            }
        })
    }

    fn step(&mut self) -> Option<Result<Step, ApiError>> {
        loop {
            if let Some(i) = self.open_index.take() {
                return Some(Ok(Step::Index(i)));
            }
            if let Some(entries) = self.entries.as_mut() {
                for e in entries.by_ref() {
                    let e = match e {
                        Ok(e) => e,
                        Err(err) => return Some(Err(err.into())),
                    };
                    if !self
                        .index_ex
                        .iter()
                        .any(|&x| self.datum_matchers[x].matches(&e.datum))
                    {
                        continue;
                    }
                    let db = self.reader.as_ref().map(|r| r.db().clone())?;
                    return Some(Ok(Step::Field(db, e)));
                }
                self.entries = None;
            }
            if self.reader.is_some() {
                if let Some(el) = self.next_index() {
                    return Some(el.map(Step::Element));
                }
                continue;
            }
            let db = match self.dbs.next()? {
                Ok(db) => db,
                Err(e) => return Some(Err(e.into())),
            };
            self.db_ex = (0..self.expansions.len())
                .filter(|&e| self.expansions[e].levels[0].matches(&db.key))
                .collect();
            if self.db_ex.is_empty() {
                continue;
            }
            let check = match self.locks {
                LockRule::Honour => !(self.toc && self.options.depth <= 1),
                LockRule::Ignore => false,
            };
            if check {
                match self.catalogue.is_locked(&db, "list") {
                    Ok(true) => continue,
                    Ok(false) => {}
                    Err(e) => return Some(Err(e.into())),
                }
            }
            if self.options.depth <= 1 {
                return Some(Ok(Step::Element(ListElement {
                    key: SplitKey {
                        db: db.key,
                        index: Key::new(),
                        datum: Key::new(),
                    },
                    location: None,
                    timestamp: 0,
                    masked: false,
                })));
            }
            match self.catalogue.reader(&db) {
                Ok(r) => {
                    self.reader = Some(r);
                    self.next_index = 0;
                    self.seen_index.clear();
                }
                Err(e) => return Some(Err(e.into())),
            }
        }
    }
}
