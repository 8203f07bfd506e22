//! The `local` frontend: a schema, a catalogue and a store on this machine (toc + POSIX files).

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Read;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use super::element::{
    AxesMap, ControlAction, ControlIdentifier, ListElement, ListOptions, Location,
};
use super::error::ApiError;
use super::fdb::{Fdb, ListIter};
use crate::grib;
use crate::model::config::LocalConfig;
use crate::model::request::Request;
use crate::model::schema::{ExpandMode, Expansion, Schema, SplitKey};
use crate::model::types::Context;
use crate::model::{Key, ModelError};
use crate::storage::catalogue::EntryIter;
use crate::storage::{
    Catalogue, CatalogueReader, CatalogueWriter, DbRef, FieldRef, ObjectReader, PosixStore,
    StorageError, Store, StoreWriter, TocCatalogue,
};

/// Live indexes in a database past which a flush merges them.
const AUTO_COMPACT_INDEXES: usize = 32;

/// One batch of a database's fields: bytes go to the store, entries to the catalogue, and a
/// flush makes the batch durable and visible as a whole.
struct Batch {
    store: Box<dyn StoreWriter>,
    catalogue: Box<dyn CatalogueWriter>,
}

/// This handle's writing state for one database.
///
/// A handle may be shared by many threads (pyfdb and the C API allow it), so nothing here is
/// held across slow work another thread needs: archives into different databases share only the
/// brief map lookup in [`LocalFdb::slot`], and a flush holds `open` only to swap the open batch
/// for a spare one, then syncs and commits the old batch while archives go on into the new one.
struct DbSlot {
    db: DbRef,
    /// The batch archives go into, held for one append and its catalogue entry.
    open: Mutex<Open>,
    /// Held by a flush from cutting a batch until it is committed. Batches of one database
    /// therefore commit one at a time and in order, so a newer copy of a key is always
    /// journaled after the copy it replaces, and a flush arriving meanwhile waits for the batch
    /// in flight (it may hold the caller's fields) before cutting its own. Holds the writers of
    /// the last committed batch, to become the next open one: a steady archive/flush cycle
    /// opens no writers, and uses at most two data objects per database and handle.
    commit: Mutex<Option<Batch>>,
}

struct Open {
    batch: Batch,
    /// Why a batch of this database could not be made durable or visible. Its fields were
    /// dropped unseen, possibly archived by another thread than the one whose flush failed, so
    /// every later flush reports it and archives into the database are refused: nothing is lost
    /// silently, and nothing archived after the loss can be published as if the batch were whole.
    failed: Option<String>,
}

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>, ApiError> {
    m.lock().map_err(panicked)
}

fn panicked<T>(_: T) -> ApiError {
    ApiError::Invalid("a writer thread panicked".into())
}

fn flush_failed(db: &DbRef, detail: &str) -> ApiError {
    ApiError::FlushFailed {
        db: db.path.display().to_string(),
        detail: detail.to_string(),
    }
}

pub struct LocalFdb {
    config: LocalConfig,
    schema: Schema,
    cx: Context<'static>,
    catalogue: Box<dyn Catalogue>,
    store: Box<dyn Store>,
    /// By database key, so the root is chosen once per database, not per field. The map is
    /// locked only to find or insert a database; each database has locks of its own.
    writers: RwLock<HashMap<Key, Arc<DbSlot>>>,
}

static RESOLVER: fn(&str) -> Option<String> = grib::params::resolver;

impl LocalFdb {
    pub fn new(config: LocalConfig) -> Result<LocalFdb, ApiError> {
        let schema = match &config.schema {
            Some(p) => Schema::from_file(p).map_err(ModelError::from)?,
            None => Schema::default_schema(),
        };
        let catalogue: Box<dyn Catalogue> = match config.engine.as_str() {
            "toc" | "" => Box::new(TocCatalogue::new(config.spaces.clone())?),
            other => {
                return Err(ApiError::Config(format!(
                    "engine '{other}' is not known (this version has: toc)"
                )))
            }
        };
        let store: Box<dyn Store> = match config.store.as_str() {
            "file" | "posix" | "" => Box::new(PosixStore),
            other => {
                return Err(ApiError::Config(format!(
                    "store '{other}' is not known (this version has: file)"
                )))
            }
        };
        Ok(LocalFdb {
            config,
            schema,
            cx: Context {
                params: Some(&RESOLVER),
                ..Context::default()
            },
            catalogue,
            store,
            writers: RwLock::new(HashMap::new()),
        })
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    pub fn context(&self) -> &Context<'static> {
        &self.cx
    }

    fn expand(&self, request: &Request, mode: ExpandMode) -> Result<Vec<Expansion>, ApiError> {
        let expanded = request.expand_ranges(&self.cx).map_err(ModelError::from)?;
        Ok(self
            .schema
            .expand(expanded.iter(), mode, &self.cx)
            .map_err(ModelError::from)?)
    }

    /// Splits the key by the schema and hands the field to its database's writers.
    fn store(&self, key: &Key, strict: bool, data: &[u8]) -> Result<(), ApiError> {
        if !self.config.actions.archive {
            return Err(ApiError::Invalid(
                "archive is disabled by this config (archive: false / writable: false)".into(),
            ));
        }
        let split = self
            .schema
            .split(key, &self.cx, strict)
            .map_err(ModelError::from)?;
        let slot = self.slot(&split.db)?;
        let mut open = lock(&slot.open)?;
        if let Some(why) = &open.failed {
            return Err(flush_failed(&slot.db, why));
        }
        let field = open.batch.store.append(data)?;
        open.batch
            .catalogue
            .add(&split.index, &split.datum, field)?;
        Ok(())
    }

    /// The database's writing state, made on its first archive. The map is locked only to look
    /// up or insert: creating the database and opening its writers (file system work) happens
    /// outside it, so a new database never holds up archives into the others.
    fn slot(&self, db: &Key) -> Result<Arc<DbSlot>, ApiError> {
        if let Some(s) = self.writers.read().map_err(panicked)?.get(db) {
            return Ok(s.clone());
        }
        let db_ref = self.catalogue.create(db, self.schema.text())?;
        if self.catalogue.is_locked(&db_ref, "archive") {
            return Err(locked(&db_ref, "archive"));
        }
        let slot = Arc::new(DbSlot {
            open: Mutex::new(Open {
                batch: self.batch(&db_ref)?,
                failed: None,
            }),
            commit: Mutex::new(None),
            db: db_ref,
        });
        // Another thread may have made one meanwhile: the first in wins, the other was unused.
        let mut writers = self.writers.write().map_err(panicked)?;
        Ok(writers.entry(db.clone()).or_insert(slot).clone())
    }

    fn batch(&self, db: &DbRef) -> Result<Batch, ApiError> {
        Ok(Batch {
            store: self.store.writer(db)?,
            catalogue: self.catalogue.writer(db)?,
        })
    }

    /// Makes the database's open batch durable and visible, holding the archives' lock only to
    /// swap in the next batch. Returns once every batch cut before this call is committed.
    fn flush_db(&self, slot: &DbSlot) -> Result<(), ApiError> {
        let mut spare = lock(&slot.commit)?;
        {
            let open = lock(&slot.open)?;
            if let Some(why) = &open.failed {
                return Err(flush_failed(&slot.db, why));
            }
            if !open.batch.catalogue.is_dirty() {
                return Ok(());
            }
        }
        // Writers for the next batch are ready before the cut, so archives never wait for them.
        let next = match spare.take() {
            Some(b) => b,
            None => self.batch(&slot.db)?,
        };
        let mut batch = std::mem::replace(&mut lock(&slot.open)?.batch, next);
        // Bytes durable first: the catalogue's commit (one journal append) is what makes them
        // visible, all at once or not at all.
        let live = match batch.store.sync().and_then(|()| batch.catalogue.commit()) {
            Ok(live) => live,
            Err(e) => {
                // The batch's entries go down with it, never visible. Archives must learn of it
                // even if a thread panicked while holding the lock.
                let mut open = slot.open.lock().unwrap_or_else(|p| p.into_inner());
                open.failed = Some(e.to_string());
                return Err(e.into());
            }
        };
        *spare = Some(batch);
        drop(spare);
        // Merge once a database has accumulated many indexes, so listing and one-field
        // retrieves do not slow down as flushes pile up.
        if live > AUTO_COMPACT_INDEXES {
            self.catalogue.compact(&slot.db)?;
        }
        Ok(())
    }

    /// Databases whose key matches a partial request.
    fn matching_dbs(&self, request: &Request) -> Result<Vec<DbRef>, ApiError> {
        if request.is_empty() {
            return Err(ApiError::Invalid("this needs a request naming the databases (e.g. class=od,expver=0001,stream=oper,date=20261122,time=1200)".into()));
        }
        let expansions = self.expand(request, ExpandMode::List)?;
        let mut out = Vec::new();
        for db in self.catalogue.databases() {
            let db = db?;
            if expansions.iter().any(|e| e.levels[0].matches(&db.key)) {
                out.push(db);
            }
        }
        Ok(out)
    }

    fn location(&self, db: &DbRef, field: &FieldRef) -> Location {
        Location {
            uri: self.store.uri(db, &field.object),
            offset: field.offset,
            length: field.length,
        }
    }

    /// Why a request found nothing: for each keyword, the values asked for that do not exist.
    fn explain_nothing_impl(&self, request: &Request) -> String {
        let mut partial = Request::new(Some("list"));
        for kw in ["class", "expver", "stream"] {
            if let Some(v) = request.get(kw) {
                partial.set(kw, v.to_vec());
            }
        }
        let axes = match self.axes(&partial, 3) {
            Ok(a) => a,
            Err(e) => return format!("(and listing to explain why failed: {e})"),
        };
        if axes.is_empty() {
            return "no data at all under class/expver/stream of the request".into();
        }
        let expanded = request
            .expand_ranges(&self.cx)
            .unwrap_or_else(|_| request.clone());
        let mut lines = Vec::new();
        for (kw, values) in expanded.iter() {
            let Some(present) = axes.get(kw) else {
                if !self.schema.knows_keyword(kw) {
                    lines.push(format!("{kw}: not a keyword of the schema"));
                }
                continue;
            };
            let ty = self
                .schema
                .paths()
                .iter()
                .flat_map(|p| p.levels.iter().flatten())
                .find(|p| p.keyword == kw)
                .map(|p| p.ty);
            let missing: Vec<String> = values
                .iter()
                .filter(|v| {
                    let c = ty
                        .and_then(|t| t.canonical(kw, v, &self.cx).ok())
                        .unwrap_or_else(|| v.to_string());
                    !present.contains(&c)
                })
                .cloned()
                .collect();
            if !missing.is_empty() {
                let have: Vec<&String> = present.iter().take(20).collect();
                let more = if present.len() > 20 { ", ..." } else { "" };
                lines.push(format!(
                    "{kw}={} matched nothing; present: {}{more}",
                    missing.join("/"),
                    have.iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join("/")
                ));
            }
        }
        if lines.is_empty() {
            "every value exists on its own, but no field has this combination".into()
        } else {
            lines.join("\n")
        }
    }
}

fn locked(db: &DbRef, action: &str) -> ApiError {
    ApiError::Locked {
        db: db.path.display().to_string(),
        action: action.into(),
    }
}

/// Streams the fields' bytes straight from the store into the caller's buffer: memory holds no
/// field at all, whatever the request's size, and each byte is copied once.
struct FieldStream<'a> {
    store: &'a dyn Store,
    locations: VecDeque<(DbRef, FieldRef)>,
    /// The field being read, how much of it is done, and its object, kept open across fields.
    current: Option<(FieldRef, u64)>,
    object: Option<(DbRef, String, Box<dyn ObjectReader>)>,
}

impl FieldStream<'_> {
    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, StorageError> {
        let mut done = 0;
        while done < buf.len() {
            let (field, pos) = match &mut self.current {
                Some((f, pos)) if *pos < f.length => (f.clone(), pos),
                _ => {
                    let Some((db, field)) = self.locations.pop_front() else {
                        break;
                    };
                    let same = self
                        .object
                        .as_ref()
                        .is_some_and(|(d, o, _)| *d == db && *o == field.object);
                    if !same {
                        let r = self.store.open_object(&db, &field.object)?;
                        self.object = Some((db, field.object.clone(), r));
                    }
                    self.current = Some((field, 0));
                    continue;
                }
            };
            let Some((_, _, reader)) = self.object.as_ref() else {
                break;
            };
            let want = usize::try_from(field.length - *pos)
                .unwrap_or(usize::MAX)
                .min(buf.len() - done);
            let n = reader.read_at(field.offset + *pos, &mut buf[done..done + want])?;
            if n == 0 {
                return Err(StorageError::Corrupt {
                    path: std::path::PathBuf::from(&field.object),
                    offset: field.offset + *pos,
                    detail: format!(
                        "the data object ends inside a field ({} of {} bytes read)",
                        *pos, field.length
                    ),
                });
            }
            *pos += n as u64;
            done += n;
        }
        Ok(done)
    }
}

impl Read for FieldStream<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.fill(buf).map_err(std::io::Error::other)
    }
}

/// `list` as a lazy walk: database by database, index by index, entry by entry, so memory holds
/// one database's index summaries and the entry being yielded, never the result.
struct Listing<'a> {
    fdb: &'a LocalFdb,
    expansions: Vec<Expansion>,
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
}

impl Listing<'_> {
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
                if !self.seen_index.insert(ix.index_key.clone()) {
                    continue;
                }
                let (key, ts) = (ix.index_key.clone(), ix.timestamp);
                return Some(Ok(ListElement {
                    key: self.split(key, Key::new()),
                    location: None,
                    timestamp: ts,
                    masked: false,
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
            match reader.entries(i, self.options.include_masked) {
                Ok(it) => {
                    self.entries = Some(it);
                    self.index_ex = index_ex;
                    return None;
                }
                Err(e) => return Some(Err(e.into())),
            }
        }
        self.reader = None;
        None
    }
}

impl Iterator for Listing<'_> {
    type Item = Result<ListElement, ApiError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(entries) = self.entries.as_mut() {
                for e in entries.by_ref() {
                    let e = match e {
                        Ok(e) => e,
                        Err(err) => return Some(Err(err.into())),
                    };
                    if !self
                        .index_ex
                        .iter()
                        .any(|&x| self.expansions[x].levels[2].matches(&e.datum))
                    {
                        continue;
                    }
                    let db = self.reader.as_ref().map(|r| r.db().clone())?;
                    return Some(Ok(ListElement {
                        location: Some(self.fdb.location(&db, &e.field)),
                        key: self.split(self.index_key.clone(), e.datum),
                        timestamp: self.timestamp,
                        masked: e.masked,
                    }));
                }
                self.entries = None;
            }
            if self.reader.is_some() {
                if let Some(el) = self.next_index() {
                    return Some(el);
                }
                continue;
            }
            let db = match self.dbs.next()? {
                Ok(db) => db,
                Err(e) => return Some(Err(e.into())),
            };
            if self.fdb.catalogue.is_locked(&db, "list") {
                continue;
            }
            self.db_ex = (0..self.expansions.len())
                .filter(|&e| self.expansions[e].levels[0].matches(&db.key))
                .collect();
            if self.db_ex.is_empty() {
                continue;
            }
            if self.options.depth <= 1 {
                return Some(Ok(ListElement {
                    key: SplitKey {
                        db: db.key,
                        index: Key::new(),
                        datum: Key::new(),
                    },
                    location: None,
                    timestamp: 0,
                    masked: false,
                }));
            }
            match self.fdb.catalogue.reader(&db) {
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

impl Fdb for LocalFdb {
    fn name(&self) -> String {
        "local".into()
    }

    fn explain_nothing(&self, request: &Request) -> String {
        self.explain_nothing_impl(request)
    }

    fn archive(&self, key: Option<&Key>, data: &[u8]) -> Result<(), ApiError> {
        match key {
            Some(k) => {
                // A GRIB message carries its own keys: a given key must agree with them.
                if data.starts_with(b"GRIB") {
                    let found = grib::mars_keys(data)?;
                    for (kw, given) in k.iter() {
                        let Some(theirs) = found.get(kw) else {
                            continue;
                        };
                        let ty = self
                            .schema
                            .paths()
                            .iter()
                            .flat_map(|p| p.levels.iter().flatten())
                            .find(|p| p.keyword == kw)
                            .map(|p| p.ty);
                        let canon = |v: &str| {
                            ty.and_then(|t| t.canonical(kw, v, &self.cx).ok())
                                .unwrap_or_else(|| v.to_ascii_lowercase())
                        };
                        if canon(given) != canon(theirs) {
                            return Err(ApiError::KeyMismatch {
                                message: 1,
                                keyword: kw.to_string(),
                                given: given.to_string(),
                                found: theirs.to_string(),
                            });
                        }
                    }
                }
                self.store(k, true, data)
            }
            None => self.store(&grib::mars_keys(data)?, false, data),
        }
    }

    fn archive_grib(&self, mars_key: &Key, data: &[u8]) -> Result<(), ApiError> {
        self.store(mars_key, false, data)
    }

    /// Database by database, each on its own locks (see [`DbSlot`]): archives go on meanwhile,
    /// into the next batch. One database failing does not keep the others unflushed.
    fn flush(&self) -> Result<(), ApiError> {
        let slots: Vec<Arc<DbSlot>> = self
            .writers
            .read()
            .map_err(panicked)?
            .values()
            .cloned()
            .collect();
        let mut errors: Vec<(String, ApiError)> = Vec::new();
        for slot in &slots {
            if let Err(e) = self.flush_db(slot) {
                errors.push((slot.db.path.display().to_string(), e));
            }
        }
        match errors.len() {
            0 => Ok(()),
            // Kept whole, so its kind reaches exit codes and wire errors unchanged.
            1 => Err(errors.remove(0).1),
            n => Err(ApiError::Invalid(format!(
                "flush failed in {n} databases: {}",
                errors
                    .iter()
                    .map(|(db, e)| format!("[{db}] {e}"))
                    .collect::<Vec<_>>()
                    .join("; ")
            ))),
        }
    }

    fn retrieve(&self, request: &Request) -> Result<Box<dyn Read + Send + '_>, ApiError> {
        if !self.config.actions.retrieve {
            return Err(ApiError::Invalid(
                "retrieve is disabled by this config".into(),
            ));
        }
        let mut locations = VecDeque::new();
        let mut readers: HashMap<Key, Option<Box<dyn CatalogueReader>>> = HashMap::new();
        let mut seen = HashSet::new();
        for e in self.expand(request, ExpandMode::Retrieve)? {
            let (Some(dbs), Some(ixs), Some(dts)) = (
                e.levels[0].candidates(),
                e.levels[1].candidates(),
                e.levels[2].candidates(),
            ) else {
                continue;
            };
            for db in &dbs {
                if !readers.contains_key(db) {
                    let r = match self.catalogue.find(db)? {
                        Some(d) => {
                            if self.catalogue.is_locked(&d, "retrieve") {
                                return Err(locked(&d, "retrieve"));
                            }
                            Some(self.catalogue.reader(&d)?)
                        }
                        None => None,
                    };
                    readers.insert(db.clone(), r);
                }
                let Some(Some(reader)) = readers.get(db) else {
                    continue;
                };
                for dt in &dts {
                    for ix in &ixs {
                        if let Some(field) = reader.lookup(ix, dt)? {
                            // Several rules may name the same field: return it once.
                            if seen.insert((field.object.clone(), field.offset)) {
                                locations.push_back((reader.db().clone(), field));
                            }
                        }
                    }
                }
            }
        }
        Ok(Box::new(FieldStream {
            store: self.store.as_ref(),
            locations,
            current: None,
            object: None,
        }))
    }

    fn list(&self, request: &Request, options: ListOptions) -> Result<ListIter<'_>, ApiError> {
        if !self.config.actions.list {
            return Err(ApiError::Invalid("list is disabled by this config".into()));
        }
        let expansions = self.expand(request, ExpandMode::List)?;
        Ok(Box::new(Listing {
            fdb: self,
            expansions,
            options,
            dbs: self.catalogue.databases().into_iter(),
            reader: None,
            db_ex: Vec::new(),
            next_index: 0,
            index_ex: Vec::new(),
            index_key: Key::new(),
            timestamp: 0,
            entries: None,
            seen_index: HashSet::new(),
        }))
    }

    fn axes(&self, request: &Request, depth: u8) -> Result<AxesMap, ApiError> {
        let mut axes = AxesMap::new();
        for el in self.list(
            request,
            ListOptions {
                include_masked: false,
                depth: depth.clamp(1, 3),
            },
        )? {
            let el = el?;
            for k in [&el.key.db, &el.key.index, &el.key.datum] {
                for (kw, v) in k.iter() {
                    if !v.is_empty() && !axes.get(kw).is_some_and(|s| s.contains(v)) {
                        axes.entry(kw.to_string())
                            .or_default()
                            .insert(v.to_string());
                    }
                }
            }
        }
        Ok(axes)
    }

    fn where_(&self, request: &Request) -> Result<Vec<String>, ApiError> {
        let expansions = self.expand(request, ExpandMode::List)?;
        let mut out = Vec::new();
        for db in self.catalogue.databases() {
            let db = db?;
            if expansions.iter().any(|e| e.levels[0].matches(&db.key)) {
                out.push(db.path.display().to_string());
            }
        }
        Ok(out)
    }

    fn wipe(&self, request: &Request, doit: bool) -> Result<Vec<String>, ApiError> {
        if !self.config.actions.wipe {
            return Err(ApiError::Invalid("wipe is disabled by this config".into()));
        }
        // Only whole databases: a request naming index or datum keywords would wipe more than asked.
        let db_keywords: HashSet<&str> = self
            .schema
            .paths()
            .iter()
            .flat_map(|p| p.levels[0].iter().map(|x| x.stored_keyword()))
            .collect();
        let extra: Vec<&str> = request
            .keywords()
            .filter(|k| !db_keywords.contains(k))
            .collect();
        if !extra.is_empty() {
            return Err(ApiError::Invalid(format!("wipe removes whole databases; the request also names {} (remove them, or use purge for replaced fields)", extra.join(", "))));
        }
        let mut out = Vec::new();
        for db in self.matching_dbs(request)? {
            if self.catalogue.is_locked(&db, "wipe") {
                return Err(locked(&db, "wipe"));
            }
            out.push(format!(
                "{} database {}",
                if doit { "wiped" } else { "would wipe" },
                db.path.display()
            ));
            for f in self.catalogue.wipe(&db, doit)? {
                out.push(format!("  {f}"));
            }
        }
        if out.is_empty() {
            return Err(ApiError::NothingMatched(format!(
                "no database matches {request}"
            )));
        }
        Ok(out)
    }

    fn purge(&self, request: &Request, doit: bool) -> Result<Vec<String>, ApiError> {
        let mut out = Vec::new();
        for db in self.matching_dbs(request)? {
            let r = self.catalogue.purge(&db, doit)?;
            if doit {
                self.store.remove(&db, &r.objects)?;
            }
            let verb = if doit { "removed" } else { "would remove" };
            out.push(format!(
                "{}: {} masked fields; {verb} {} index files and {} data files",
                db.path.display(),
                r.masked_fields,
                r.indexes.len(),
                r.objects.len()
            ));
            for f in &r.indexes {
                out.push(format!("  {}", db.path.join(f).display()));
            }
            for o in &r.objects {
                out.push(format!("  {}", self.store.uri(&db, o)));
            }
        }
        Ok(out)
    }

    fn stats(&self, request: &Request) -> Result<Vec<String>, ApiError> {
        let mut out = Vec::new();
        let (mut fields, mut bytes, mut masked) = (0u64, 0u64, 0u64);
        for db in self.matching_dbs(request)? {
            let s = self.catalogue.stats(&db)?;
            let objects = self.catalogue.objects(&db)?;
            let data_bytes: u64 = objects
                .iter()
                .filter_map(|o| self.store.object_size(&db, o))
                .sum();
            out.push(format!(
                "{}: fields {}, masked {}, field bytes {}, masked bytes {}, index files {}, data files {} ({} bytes), journal records {}",
                db.path.display(), s.fields, s.masked, s.field_bytes, s.masked_bytes, s.index_files, objects.len(), data_bytes, s.journal_records
            ));
            fields += s.fields;
            masked += s.masked;
            bytes += s.field_bytes;
        }
        out.push(format!(
            "total: {} databases, {fields} fields ({bytes} bytes), {masked} masked",
            out.len(),
        ));
        Ok(out)
    }

    fn dump(&self, request: &Request) -> Result<Vec<String>, ApiError> {
        let mut out = Vec::new();
        for db in self.matching_dbs(request)? {
            out.extend(self.catalogue.dump(&db)?);
        }
        Ok(out)
    }

    fn control(
        &self,
        request: &Request,
        action: ControlAction,
        identifiers: &[ControlIdentifier],
    ) -> Result<Vec<String>, ApiError> {
        let mut out = Vec::new();
        for db in self.matching_dbs(request)? {
            for id in identifiers {
                match action {
                    ControlAction::Lock => self.catalogue.set_locked(&db, id.name(), true)?,
                    ControlAction::Unlock => self.catalogue.set_locked(&db, id.name(), false)?,
                    ControlAction::Status => {}
                }
            }
            let state: Vec<String> = ControlIdentifier::ALL
                .iter()
                .map(|id| {
                    format!(
                        "{}: {}",
                        id.name(),
                        if self.catalogue.is_locked(&db, id.name()) {
                            "LOCKED"
                        } else {
                            "enabled"
                        }
                    )
                })
                .collect();
            out.push(format!("{} {}", db.path.display(), state.join(", ")));
        }
        Ok(out)
    }

    fn compact(&self, request: &Request) -> Result<Vec<String>, ApiError> {
        let mut out = Vec::new();
        for db in self.matching_dbs(request)? {
            let r = self.catalogue.compact(&db)?;
            out.push(format!(
                "{}: merged {} indexes into {} ({} entries)",
                db.path.display(),
                r.merged_indexes,
                r.new_indexes,
                r.entries
            ));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;
    use std::sync::mpsc;
    use std::time::Duration;

    fn fdb(dir: &Path) -> LocalFdb {
        let yaml = format!("spaces: [{{roots: [{{path: {}}}]}}]", dir.display());
        match crate::model::config::from_yaml_str(&yaml, "test").unwrap() {
            crate::model::config::FdbConfig::Local(l) => LocalFdb::new(l).unwrap(),
            other => panic!("expected a local config, got {other:?}"),
        }
    }

    #[test]
    fn explicit_keys_must_agree_with_the_grib_and_be_canonical() {
        let d = tempfile::tempdir().unwrap();
        let f = fdb(d.path());
        let keys = [
            ("class", "od"),
            ("stream", "oper"),
            ("type", "fc"),
            ("expver", "0001"),
            ("date", "20261122"),
            ("time", "1200"),
            ("step", "6"),
            ("levtype", "pl"),
            ("levelist", "500"),
            ("param", "130"),
        ];
        let msg = grib::sample::make_field(&keys, 100, 1).unwrap();
        let good = Key::parse("class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step=6,levelist=500,param=130").unwrap();
        f.archive(Some(&good), &msg).unwrap();
        let wrong = good.with("step", "12");
        let e = f.archive(Some(&wrong), &msg).unwrap_err().to_string();
        assert!(e.contains("step=12 given, the message has step=6"), "{e}");
        let e = f
            .archive(Some(&good.with("expver", "1")), &msg)
            .unwrap_err()
            .to_string();
        assert!(e.contains("expecting expver=0001"), "{e}");
        f.flush().unwrap();
        let req = crate::model::request::parse_request("class=od,expver=0001").unwrap();
        assert_eq!(f.list(&req, ListOptions::default()).unwrap().count(), 1);
    }

    /// What the next sync of one database's store writer does instead of syncing at once.
    enum Hold {
        /// Reports that it started, then waits to be released (at most a minute, so a failing
        /// test never hangs).
        Block {
            entered: mpsc::Sender<()>,
            release: mpsc::Receiver<()>,
        },
        Fail,
    }

    /// The test's hand on store syncs: one armed hold, for the database of one `expver`.
    #[derive(Default)]
    struct Gate(Mutex<Option<(String, Hold)>>);

    impl Gate {
        fn arm(&self, expver: &str, hold: Hold) {
            *self.0.lock().unwrap() = Some((expver.to_string(), hold));
        }
    }

    /// The POSIX store, but a sync waits or fails when the gate says so: a flush made
    /// observably slow (or failing) without touching the real code paths around it.
    struct GatedStore(Arc<Gate>);

    struct GatedWriter {
        inner: Box<dyn StoreWriter>,
        expver: String,
        gate: Arc<Gate>,
    }

    impl Store for GatedStore {
        fn kind(&self) -> &'static str {
            "gated"
        }
        fn writer(&self, db: &DbRef) -> Result<Box<dyn StoreWriter>, StorageError> {
            Ok(Box::new(GatedWriter {
                inner: PosixStore.writer(db)?,
                expver: db.key.get("expver").unwrap_or("").to_string(),
                gate: self.0.clone(),
            }))
        }
        fn read(&self, db: &DbRef, field: &FieldRef) -> Result<Vec<u8>, StorageError> {
            PosixStore.read(db, field)
        }
        fn open_object(
            &self,
            db: &DbRef,
            object: &str,
        ) -> Result<Box<dyn ObjectReader>, StorageError> {
            PosixStore.open_object(db, object)
        }
        fn uri(&self, db: &DbRef, object: &str) -> String {
            PosixStore.uri(db, object)
        }
        fn remove(&self, db: &DbRef, objects: &[String]) -> Result<(), StorageError> {
            PosixStore.remove(db, objects)
        }
        fn object_size(&self, db: &DbRef, object: &str) -> Option<u64> {
            PosixStore.object_size(db, object)
        }
    }

    impl StoreWriter for GatedWriter {
        fn append(&mut self, data: &[u8]) -> Result<FieldRef, StorageError> {
            self.inner.append(data)
        }
        fn sync(&mut self) -> Result<(), StorageError> {
            let hold = {
                let mut armed = self.gate.0.lock().unwrap();
                match armed.as_ref() {
                    Some((e, _)) if *e == self.expver => armed.take().map(|(_, h)| h),
                    _ => None,
                }
            };
            match hold {
                Some(Hold::Block { entered, release }) => {
                    let _ = entered.send(());
                    let _ = release.recv_timeout(Duration::from_secs(60));
                }
                Some(Hold::Fail) => {
                    return Err(StorageError::Io {
                        op: "sync",
                        path: "gated".into(),
                        source: std::io::Error::other("injected sync failure"),
                    })
                }
                None => {}
            }
            self.inner.sync()
        }
    }

    fn gated(dir: &Path) -> (LocalFdb, Arc<Gate>) {
        let gate = Arc::new(Gate::default());
        let mut f = fdb(dir);
        f.store = Box::new(GatedStore(gate.clone()));
        (f, gate)
    }

    fn key(expver: &str, step: usize) -> Key {
        Key::parse(&format!("class=od,expver={expver},stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step={step},levelist=500,param=130")).unwrap()
    }

    /// The bytes of one field, or `None` if it is not visible.
    fn read(f: &LocalFdb, expver: &str, step: usize) -> Option<Vec<u8>> {
        let req = crate::model::request::parse_request(&format!("class=od,expver={expver},stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step={step},levelist=500,param=130")).unwrap();
        let mut out = Vec::new();
        f.retrieve(&req).unwrap().read_to_end(&mut out).unwrap();
        (!out.is_empty()).then_some(out)
    }

    #[test]
    fn archives_go_on_while_another_database_is_being_flushed() {
        let d = tempfile::tempdir().unwrap();
        let (f, gate) = gated(d.path());
        let f = Arc::new(f);
        f.archive(Some(&key("0001", 0)), b"a0").unwrap();
        let (entered, started) = mpsc::channel();
        let (release, released) = mpsc::channel();
        gate.arm(
            "0001",
            Hold::Block {
                entered,
                release: released,
            },
        );
        let flusher = std::thread::spawn({
            let f = f.clone();
            move || f.flush()
        });
        started
            .recv_timeout(Duration::from_secs(30))
            .expect("the flush of database A reached its store sync");
        let (done, finished) = mpsc::channel();
        let archiver = std::thread::spawn({
            let f = f.clone();
            move || -> Result<(), ApiError> {
                for step in 0..20 {
                    f.archive(Some(&key("0002", step)), format!("b{step}").as_bytes())?;
                }
                // The same database as the flush: this goes into the next batch.
                f.archive(Some(&key("0001", 1)), b"a1")?;
                let _ = done.send(());
                Ok(())
            }
        });
        // Whatever happened, the flush is then let go: the test fails, it never hangs.
        let went_on = finished.recv_timeout(Duration::from_secs(15));
        let _ = release.send(());
        flusher.join().unwrap().unwrap();
        archiver.join().unwrap().unwrap();
        assert!(
            went_on.is_ok(),
            "archives into database B (and into A's next batch) waited for A's flush"
        );
        // The flush covered what was archived before it.
        assert_eq!(read(&f, "0001", 0).as_deref(), Some(&b"a0"[..]));
        f.flush().unwrap();
        assert_eq!(read(&f, "0001", 1).as_deref(), Some(&b"a1"[..]));
        for step in 0..20 {
            assert_eq!(
                read(&f, "0002", step),
                Some(format!("b{step}").into_bytes())
            );
        }
    }

    #[test]
    fn a_failed_flush_publishes_nothing_of_its_batch_and_every_later_flush_says_so() {
        let d = tempfile::tempdir().unwrap();
        let (f, gate) = gated(d.path());
        f.archive(Some(&key("0001", 0)), b"a0").unwrap();
        f.archive(Some(&key("0001", 1)), b"a1").unwrap();
        f.archive(Some(&key("0002", 0)), b"b0").unwrap();
        gate.arm("0001", Hold::Fail);
        let e = f.flush().unwrap_err().to_string();
        assert!(e.contains("injected sync failure"), "{e}");
        assert_eq!(read(&f, "0001", 0), None);
        assert_eq!(read(&f, "0001", 1), None);
        // The other database was flushed all the same.
        assert_eq!(read(&f, "0002", 0).as_deref(), Some(&b"b0"[..]));
        // Another thread may have archived into the lost batch: it learns of it at its flush,
        // and nothing more goes into that database through this handle.
        let e = f.flush().unwrap_err().to_string();
        assert!(
            e.contains("earlier flush") && e.contains("injected sync failure"),
            "{e}"
        );
        let e = f
            .archive(Some(&key("0001", 2)), b"a2")
            .unwrap_err()
            .to_string();
        assert!(e.contains("earlier flush"), "{e}");
        f.archive(Some(&key("0002", 1)), b"b1").unwrap();
        assert!(f.flush().is_err());
        assert_eq!(read(&f, "0002", 1).as_deref(), Some(&b"b1"[..]));
        assert_eq!(read(&f, "0001", 2), None);
    }

    /// Threads sharing one handle archive into several databases, replace some of their own
    /// fields and flush at will; after each flush what the thread archived is visible, and at
    /// the end every field reads back as its newest copy.
    #[test]
    fn threads_sharing_a_handle_lose_nothing_and_see_their_flushes() {
        const THREADS: usize = 4;
        const DBS: usize = 3;
        const FIELDS: usize = 150;
        let d = tempfile::tempdir().unwrap();
        let f = fdb(d.path());
        let expver = |i: usize| format!("{:04}", (i % DBS) + 1);
        let data = |t: usize, i: usize, v: usize| {
            format!("thread {t} field {i} copy {v}").repeat(1 + i % 5)
        };
        let expected: Vec<HashMap<usize, Vec<u8>>> = std::thread::scope(|s| {
            let workers: Vec<_> = (0..THREADS)
                .map(|t| {
                    let f = &f;
                    s.spawn(move || {
                        let mut copies: HashMap<usize, usize> = HashMap::new();
                        for i in 0..FIELDS {
                            let step = t * 1000 + i;
                            f.archive(Some(&key(&expver(t + i), step)), data(t, i, 0).as_bytes())
                                .unwrap();
                            copies.insert(i, 0);
                            if i % 7 == 0 {
                                // A newer copy of an earlier field: it must win.
                                let j = i / 2;
                                let v = copies[&j] + 1;
                                f.archive(
                                    Some(&key(&expver(t + j), t * 1000 + j)),
                                    data(t, j, v).as_bytes(),
                                )
                                .unwrap();
                                copies.insert(j, v);
                            }
                            if i % 10 == 9 {
                                f.flush().unwrap();
                                let want = data(t, i, copies[&i]).into_bytes();
                                assert_eq!(
                                    read(f, &expver(t + i), step),
                                    Some(want),
                                    "thread {t}: field {i} not visible after its flush"
                                );
                            }
                        }
                        f.flush().unwrap();
                        copies
                            .into_iter()
                            .map(|(i, v)| (i, data(t, i, v).into_bytes()))
                            .collect()
                    })
                })
                .collect();
            workers.into_iter().map(|w| w.join().unwrap()).collect()
        });
        for (t, fields) in expected.iter().enumerate() {
            for (&i, want) in fields {
                let got = read(&f, &expver(t + i), t * 1000 + i);
                assert_eq!(got.as_ref(), Some(want), "thread {t} field {i}");
            }
        }
        let all = crate::model::request::parse_request("class=od").unwrap();
        let listed = f.list(&all, ListOptions::default()).unwrap().count();
        assert_eq!(listed, THREADS * FIELDS);
    }
}
