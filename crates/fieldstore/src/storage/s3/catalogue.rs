//! The S3 catalogue (`engine: s3`): databases as create-only generation objects, each flush one
//! create-only marker object, readers merging what one LIST shows (docs/s3-format.md). No object
//! is updated in place, so writers never contend.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::cache;
use super::client::{Created, ObjectMeta, S3Client};
use super::layout::{self, Body, DbObject, GenObject, Generation, FORMAT};
use super::store::S3Store;
use super::view::{self, Source, View};
use super::writer::S3CatalogueWriter;
use crate::model::Key;
use crate::storage::catalogue::{
    Catalogue, CatalogueReader, CatalogueWriter, CompactReport, DbStats, EntryIter, IndexSummary,
    PurgeReport,
};
use crate::storage::history::{ChangeWaiter, Commits, HistoryMark};
use crate::storage::{CatalogueDump, DbRef, DumpRecord, FieldRef, StorageError};

/// Live flush markers after which a writer's commit compacts (as toc merges indexes), so a
/// reader's cold open costs a bounded number of GETs.
pub const COMPACT_AFTER: usize = 64;

/// How often a reader re-lists when an object it listed was deleted under it (by a
/// compaction's clean-up after the grace period).
const RELIST: usize = 5;

/// Marker GETs a cold reader makes at once.
const PARALLEL_GETS: usize = 8;

pub struct S3Catalogue {
    pub(super) client: S3Client,
}

/// One generation of one database, as its DbRef names it.
#[derive(Debug, Clone)]
pub(super) struct Gen {
    pub(super) name: String,
    pub(super) gen: u64,
}

impl Gen {
    pub(super) fn prefix(&self) -> String {
        layout::db_prefix(&self.name, self.gen)
    }
}

/// What one LIST of a generation's prefix shows.
#[derive(Default)]
pub(super) struct Listing {
    pub(super) flushes: Vec<ObjectMeta>,
    pub(super) compactions: Vec<ObjectMeta>,
    pub(super) locks: Vec<String>,
    pub(super) all: Vec<ObjectMeta>,
}

/// The live sources of a generation and what their listing showed.
pub(super) struct Loaded {
    pub(super) listing: Listing,
    pub(super) sources: Vec<Source>,
    /// Markers that failed their checksum or did not parse: (uri, why).
    pub(super) damaged: Vec<(String, String)>,
}

pub(super) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn now_micros() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Ranks this process hands out are strictly increasing even if the clock steps back.
pub(super) fn next_micros(at_least: u64) -> u64 {
    static LAST: AtomicU64 = AtomicU64::new(0);
    let want = now_micros().max(at_least);
    let mut last = LAST.load(Ordering::SeqCst);
    loop {
        let next = want.max(last + 1);
        match LAST.compare_exchange(last, next, Ordering::SeqCst, Ordering::SeqCst) {
            Ok(_) => return next,
            Err(l) => last = l,
        }
    }
}

/// This process's writer id (part of every rank and stamp) and a nonce per body.
pub(super) fn writer_id() -> &'static str {
    static ID: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    ID.get_or_init(crate::storage::names::unique_name)
}

pub(super) fn stamp() -> String {
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{}#{}", writer_id(), N.fetch_add(1, Ordering::Relaxed))
}

pub(super) fn older_than(m: &ObjectMeta, grace: Duration) -> bool {
    SystemTime::now()
        .duration_since(m.last_modified)
        .is_ok_and(|age| age >= grace)
}

impl S3Catalogue {
    pub fn new(client: S3Client) -> S3Catalogue {
        S3Catalogue { client }
    }

    pub(super) fn corrupt(&self, key: &str, detail: impl Into<String>) -> StorageError {
        StorageError::Corrupt {
            path: PathBuf::from(self.client.uri(key)),
            offset: 0,
            detail: detail.into(),
        }
    }

    /// Bodies are cached by server and URI: two servers may have equal bucket names.
    pub(super) fn cache_key(&self, key: &str) -> String {
        format!("{} {}", self.client.describe(), key)
    }

    /// The id is `<name>/<gen>`: the S3 store keeps the generation's bytes under
    /// `data/<name>/<gen>/`, so a database made again after a wipe never meets the old bytes.
    pub(super) fn db_ref(&self, key: Key, g: &Gen) -> DbRef {
        DbRef {
            key,
            id: format!("{}/{}", g.name, layout::gen_str(g.gen)),
        }
    }

    /// The generation a DbRef names (made by [`S3Catalogue::db_ref`]).
    /// The database's generation object; `None` when it is gone (wiped meanwhile).
    fn generation(&self, db: &DbRef) -> Result<Option<Generation>, StorageError> {
        let g = self.gen_of(db)?;
        let gen_key = layout::gen_key(&g.name, g.gen);
        match self.client.get(&gen_key)? {
            Some(b) => serde_json::from_slice::<Generation>(&b)
                .map(Some)
                .map_err(|e| self.corrupt(&gen_key, format!("bad JSON: {e}"))),
            None => Ok(None),
        }
    }

    pub(super) fn gen_of(&self, db: &DbRef) -> Result<Gen, StorageError> {
        db.id
            .split_once('/')
            .filter(|(name, _)| layout::db_key(name).is_some())
            .and_then(|(name, g)| Some((name, g.parse::<u64>().ok()?)))
            .map(|(name, gen)| Gen {
                name: name.to_string(),
                gen,
            })
            .ok_or_else(|| StorageError::Config {
                detail: format!(
                    "database {} ({}) is not one of {}",
                    db.key,
                    db.id,
                    self.client.describe()
                ),
            })
    }

    /// The live generation of a database name (if any) and the highest generation ever made.
    pub(super) fn generations(&self, name: &str) -> Result<(Option<u64>, u64), StorageError> {
        let mut made = BTreeSet::new();
        let mut wiped = BTreeSet::new();
        for m in self.client.list(&layout::gens_prefix(name)) {
            match layout::parse_gen_key(&m?.key) {
                Some((_, GenObject::Generation(g))) => {
                    made.insert(g);
                }
                Some((_, GenObject::Tombstone(g))) => {
                    wiped.insert(g);
                }
                None => {}
            }
        }
        let max = made.iter().chain(&wiped).max().copied().unwrap_or(0);
        let live = made.iter().rev().find(|g| !wiped.contains(g)).copied();
        // Only the newest generation can be live: an older one without a tombstone is one a
        // crashed wipe left, and is superseded.
        Ok((live.filter(|&g| g == max), max))
    }

    pub(super) fn list_gen(&self, g: &Gen) -> Result<Listing, StorageError> {
        let prefix = g.prefix();
        let mut l = Listing::default();
        for m in self.client.list(&prefix) {
            let m = m?;
            let rel = m.key.strip_prefix(&prefix).unwrap_or(&m.key).to_string();
            match DbObject::parse(&rel) {
                Some(DbObject::Flush(_)) => l.flushes.push(ObjectMeta {
                    key: rel,
                    ..m.clone()
                }),
                Some(DbObject::Compaction(_)) => l.compactions.push(ObjectMeta {
                    key: rel,
                    ..m.clone()
                }),
                Some(DbObject::Lock(a)) => l.locks.push(a),
                None => {}
            }
            l.all.push(m);
        }
        Ok(l)
    }

    /// An immutable body, from the process cache or one GET; `Ok(None)` when it is gone.
    pub(super) fn body(
        &self,
        key: &str,
    ) -> Result<Option<Result<Arc<Body>, String>>, StorageError> {
        let uri = self.cache_key(key);
        if let Some(b) = cache::get(&uri) {
            return Ok(Some(Ok(b)));
        }
        let Some(bytes) = self.client.get(key)? else {
            return Ok(None);
        };
        Ok(Some(layout::decode(&bytes).map(|b| {
            let b = Arc::new(b);
            cache::put(uri, b.clone());
            b
        })))
    }

    /// Lists the generation and reads every live source; re-lists when a listed object was
    /// deleted meanwhile (a compaction's clean-up).
    pub(super) fn load(&self, g: &Gen) -> Result<Loaded, StorageError> {
        let prefix = g.prefix();
        'relist: for _ in 0..RELIST {
            let listing = self.list_gen(g)?;
            let mut damaged = Vec::new();
            let mut compactions = Vec::new();
            for c in &listing.compactions {
                match self.body(&format!("{prefix}{}", c.key))? {
                    None => continue 'relist,
                    Some(Ok(b)) => compactions.push((c.key.clone(), b)),
                    Some(Err(why)) => {
                        damaged.push((self.client.uri(&format!("{prefix}{}", c.key)), why))
                    }
                }
            }
            let flush_names: Vec<String> = listing.flushes.iter().map(|f| f.key.clone()).collect();
            let (live_flushes, live_compactions) = view::live(&flush_names, &compactions);
            let bodies = self.bodies(&prefix, &live_flushes)?;
            let mut sources = Vec::with_capacity(live_flushes.len() + live_compactions.len());
            for (c, b) in &compactions {
                if live_compactions.contains(c) {
                    sources.push(Source {
                        name: c.clone(),
                        rank: None,
                        body: b.clone(),
                    });
                }
            }
            for (name, got) in live_flushes.iter().zip(bodies) {
                match got {
                    None => continue 'relist,
                    Some(Ok(body)) => sources.push(Source {
                        name: name.clone(),
                        rank: name.strip_prefix("flush/").map(str::to_string),
                        body,
                    }),
                    Some(Err(why)) => {
                        damaged.push((self.client.uri(&format!("{prefix}{name}")), why))
                    }
                }
            }
            return Ok(Loaded {
                listing,
                sources,
                damaged,
            });
        }
        Err(StorageError::S3 {
            op: "list",
            uri: self.client.uri(&prefix),
            status: None,
            detail: format!(
                "objects listed were deleted before they could be read, {RELIST} times in a row (is a compaction with a very short grace period running?)"
            ),
        })
    }

    /// GETs several bodies at once (a cold reader's markers), in order.
    #[allow(clippy::type_complexity)]
    pub(super) fn bodies(
        &self,
        prefix: &str,
        names: &[String],
    ) -> Result<Vec<Option<Result<Arc<Body>, String>>>, StorageError> {
        let keys: Vec<String> = names.iter().map(|n| format!("{prefix}{n}")).collect();
        let missing = keys
            .iter()
            .filter(|k| cache::get(&self.cache_key(k)).is_none())
            .count();
        if missing <= 1 {
            return keys.iter().map(|k| self.body(k)).collect();
        }
        let chunk = keys.len().div_ceil(PARALLEL_GETS).max(1);
        let parts: Vec<Result<Vec<_>, StorageError>> = std::thread::scope(|s| {
            let handles: Vec<_> = keys
                .chunks(chunk)
                .map(|ks| s.spawn(move || ks.iter().map(|k| self.body(k)).collect()))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join().unwrap_or_else(|_| {
                        Err(StorageError::Config {
                            detail: "a thread reading catalogue objects panicked".into(),
                        })
                    })
                })
                .collect()
        });
        let mut out = Vec::with_capacity(keys.len());
        for p in parts {
            out.extend(p?);
        }
        Ok(out)
    }

    pub(super) fn key_of(&self, name: &str, g: u64) -> Result<Key, StorageError> {
        layout::db_key(name).ok_or_else(|| {
            self.corrupt(
                &layout::gen_key(name, g),
                "its name is not a database key this version wrote",
            )
        })
    }
}

impl Catalogue for S3Catalogue {
    fn kind(&self) -> &'static str {
        "s3"
    }

    /// In the bucket's prefix, made create-only: the first writer's release is the one.
    fn check_keys_release(
        &self,
        reader: crate::storage::keys_release::KeysReader,
        version: &str,
    ) -> Result<(), StorageError> {
        use crate::storage::keys_release::{compare, text};
        let record = reader.record();
        let shown = self.client.uri(record);
        let recorded = match self.client.get(record)? {
            Some(b) => b,
            None => match self.client.create(record, text(version).as_bytes())? {
                super::client::Created::New => return Ok(()),
                super::client::Created::Existed(b) => b,
            },
        };
        compare(reader, &recorded, version, &shown)
    }

    fn databases(&self) -> Vec<Result<DbRef, StorageError>> {
        let mut by_name: BTreeMap<String, (BTreeSet<u64>, BTreeSet<u64>)> = BTreeMap::new();
        for m in self.client.list(layout::DBS) {
            let m = match m {
                Ok(m) => m,
                Err(e) => return vec![Err(e)],
            };
            if let Some((name, what)) = layout::parse_gen_key(&m.key) {
                let e = by_name.entry(name.to_string()).or_default();
                match what {
                    GenObject::Generation(g) => e.0.insert(g),
                    GenObject::Tombstone(g) => e.1.insert(g),
                };
            }
        }
        let mut out = Vec::new();
        for (name, (made, wiped)) in by_name {
            let max = made.iter().chain(&wiped).max().copied().unwrap_or(0);
            if !made.contains(&max) || wiped.contains(&max) {
                continue;
            }
            out.push(
                self.key_of(&name, max)
                    .map(|k| self.db_ref(k, &Gen { name, gen: max })),
            );
        }
        out
    }

    fn find(&self, db: &Key) -> Result<Option<DbRef>, StorageError> {
        let name = layout::db_name(db);
        let (live, _) = self.generations(&name)?;
        Ok(live.map(|gen| self.db_ref(db.clone(), &Gen { name, gen })))
    }

    /// Concurrent creators agree: the first create-only PUT of the next generation wins and
    /// the others use it.
    fn create_by(
        &self,
        db: &Key,
        schema_text: &str,
        identity: Option<&str>,
    ) -> Result<DbRef, StorageError> {
        let name = layout::db_name(db);
        for _ in 0..8 {
            let (live, max) = self.generations(&name)?;
            if let Some(gen) = live {
                return Ok(self.db_ref(db.clone(), &Gen { name, gen }));
            }
            let gen = max + 1;
            let body = Generation {
                format: FORMAT,
                key: db.clone(),
                schema: schema_text.to_string(),
                created: now_secs(),
                creator: writer_id().to_string(),
                stamp: stamp(),
                identity: identity.map(str::to_string),
            };
            let bytes = serde_json::to_vec_pretty(&body).map_err(|e| StorageError::Config {
                detail: format!("cannot encode the generation object of {db}: {e}"),
            })?;
            // Created or not, the next round finds the generation live (unless a wipe came
            // in between, when it makes the next one).
            if let Created::New = self.client.create(&layout::gen_key(&name, gen), &bytes)? {
                return Ok(self.db_ref(db.clone(), &Gen { name, gen }));
            }
        }
        Err(StorageError::S3 {
            op: "create",
            uri: self.client.uri(&layout::gens_prefix(&name)),
            status: None,
            detail: format!("database {db} was wiped each time it was created, 8 times in a row"),
        })
    }

    fn writer(&self, db: &DbRef) -> Result<Box<dyn CatalogueWriter>, StorageError> {
        Ok(Box::new(S3CatalogueWriter {
            cat: S3Catalogue {
                client: self.client.clone(),
            },
            gen: self.gen_of(db)?,
            db: db.clone(),
            pending: BTreeMap::new(),
            seq: 0,
            last_flush: None,
            prepared: None,
        }))
    }

    fn reader(&self, db: &DbRef) -> Result<Box<dyn CatalogueReader>, StorageError> {
        let g = self.gen_of(db)?;
        let loaded = self.load(&g)?;
        let view = View::build(&loaded.sources);
        let mut summaries = view.summaries.clone();
        for (uri, _) in &loaded.damaged {
            summaries.push(IndexSummary {
                name: uri.clone(),
                index_key: Key::new(),
                timestamp: 0,
                entries: 0,
                axes: HashMap::new(),
            });
        }
        Ok(Box::new(S3Reader {
            db: db.clone(),
            view: Arc::new(view),
            summaries,
            damaged: loaded.damaged,
        }))
    }

    /// `s3://bucket/prefix/db/<name>/<gen>/`: the id names neither the server nor the bucket.
    fn location(&self, db: &DbRef) -> String {
        match self.gen_of(db) {
            Ok(g) => self.client.uri(&g.prefix()),
            Err(_) => db.id.clone(),
        }
    }

    fn is_locked(&self, db: &DbRef, action: &str) -> Result<bool, StorageError> {
        let g = self.gen_of(db)?;
        let lock = format!("{}{}", g.prefix(), DbObject::Lock(action.into()).rel());
        Ok(self.client.head(&lock)?.is_some())
    }

    fn set_locked(&self, db: &DbRef, action: &str, locked: bool) -> Result<(), StorageError> {
        let g = self.gen_of(db)?;
        let key = format!("{}{}", g.prefix(), DbObject::Lock(action.into()).rel());
        if locked {
            self.client.put(&key, stamp().as_bytes())
        } else {
            self.client.delete(&key)
        }
    }

    /// The tombstone hides the generation at once; its catalogue objects older than the grace
    /// period go now, younger ones (an in-flight writer's or reader's) are reported deferred
    /// and go with a later wipe or purge of the database.
    fn wipe(&self, db: &DbRef, doit: bool) -> Result<Vec<String>, StorageError> {
        let g = self.gen_of(db)?;
        let tomb = layout::tombstone_key(&g.name, g.gen);
        let mut out = vec![self.client.uri(&layout::gen_key(&g.name, g.gen))];
        if doit {
            self.client.create(&tomb, stamp().as_bytes())?;
        }
        let (gone, deferred) = if doit {
            self.clean_wiped(&g.name, true, Some(g.gen))?
        } else {
            let names = self
                .client
                .list(&g.prefix())
                .map(|m| m.map(|m| self.client.uri(&m.key)))
                .collect::<Result<Vec<_>, _>>()?;
            (names, Vec::new())
        };
        out.extend(gone);
        out.extend(deferred.into_iter().map(|u| {
            format!(
                "{u} (deferred: younger than the grace period; a later wipe or purge deletes it)"
            )
        }));
        Ok(out)
    }

    /// Drops masked copies by writing a compaction without them; the objects only they used
    /// go to the store to delete. Also deletes what replaced markers and wiped generations
    /// left, once older than the grace period.
    fn purge(&self, db: &DbRef, doit: bool) -> Result<PurgeReport, StorageError> {
        if doit {
            self.client.purge_probes();
        }
        let g = self.gen_of(db)?;
        let loaded = self.load(&g)?;
        let view = View::build(&loaded.sources);
        let mut report = PurgeReport::default();
        let live: BTreeSet<&str> = view
            .all()
            .filter(|(_, masked)| !masked)
            .map(|(f, _)| f.object.as_str())
            .collect();
        let mut dead = BTreeSet::new();
        for (f, masked) in view.all() {
            if masked {
                report.masked_fields += 1;
                if !live.contains(f.object.as_str()) {
                    dead.insert(f.object.clone());
                }
            }
        }
        // Data objects no entry references (a killed writer's, or a flush that failed), once
        // older than the grace period: younger ones may belong to a flush still committing.
        // Skipped while a marker is unreadable, since its references are unknown.
        let data = S3Store::data_prefix(db);
        let grace = self.client.grace();
        if loaded.damaged.is_empty() {
            let referenced: BTreeSet<&str> = view.all().map(|(f, _)| f.object.as_str()).collect();
            for m in self.client.list(&data) {
                let m = m?;
                let rel = m.key.strip_prefix(&data).unwrap_or(&m.key);
                if !referenced.contains(rel) && older_than(&m, grace) {
                    dead.insert(rel.to_string());
                }
            }
        }
        report.objects = dead.into_iter().collect();
        if report.masked_fields > 0 {
            report.indexes = loaded.sources.iter().map(|s| s.name.clone()).collect();
        }
        if doit {
            let new = if report.masked_fields > 0 {
                Some(
                    self.write_compaction(&g, &loaded.listing, &loaded.sources, &view, true)?
                        .1,
                )
            } else {
                None
            };
            self.collect_garbage(&g, &loaded.listing, new.as_ref())?;
            self.clean_wiped(&g.name, true, None)?;
            self.client.abort_stale_uploads(&data, grace)?;
        }
        Ok(report)
    }

    fn objects(&self, db: &DbRef) -> Result<BTreeSet<String>, StorageError> {
        let loaded = self.load(&self.gen_of(db)?)?;
        Ok(View::build(&loaded.sources)
            .all()
            .map(|(f, _)| f.object.clone())
            .collect())
    }

    fn stats(&self, db: &DbRef) -> Result<DbStats, StorageError> {
        let loaded = self.load(&self.gen_of(db)?)?;
        let view = View::build(&loaded.sources);
        let mut s = DbStats {
            index_files: loaded.sources.len() as u64,
            journal_records: loaded.listing.flushes.len() as u64
                + loaded.listing.compactions.len() as u64,
            ..Default::default()
        };
        for (f, masked) in view.all() {
            if masked {
                s.masked += 1;
                s.masked_bytes += f.length;
            } else {
                s.fields += 1;
                s.field_bytes += f.length;
            }
        }
        Ok(s)
    }

    fn creator(&self, db: &DbRef) -> Result<Option<String>, StorageError> {
        Ok(self.generation(db)?.and_then(|g| g.identity))
    }

    /// One record per object: the generation, then each flush marker and compaction listed,
    /// in name order (flushes by rank).
    fn dump(&self, db: &DbRef) -> Result<CatalogueDump, StorageError> {
        let g = self.gen_of(db)?;
        let created = self.generation(db)?.map_or(0, |g| g.created);
        let listing = self.list_gen(&g)?;
        let mut records = vec![DumpRecord::Init {
            db: db.key.clone(),
            owner_uid: None,
            created,
        }];
        let prefix = g.prefix();
        for m in listing.flushes.iter().chain(&listing.compactions) {
            let key = format!("{prefix}{}", m.key);
            let Some(body) = self.body(&key)? else {
                continue;
            };
            let body = body.map_err(|why| self.corrupt(&key, why))?;
            let entries = body.indexes.iter().map(|i| i.entries.len() as u64).sum();
            let timestamp = body.created;
            records.push(
                if body.covers.is_empty()
                    && body.supersedes.is_empty()
                    && m.key.starts_with("flush/")
                {
                    DumpRecord::Flush {
                        entries,
                        indexes: body
                            .indexes
                            .iter()
                            .map(|i| format!("{}:{}", m.key, i.key))
                            .collect(),
                        timestamp,
                    }
                } else {
                    DumpRecord::Compact {
                        merged_indexes: (body.covers.len() + body.supersedes.len()) as u64,
                        new_indexes: body.indexes.len() as u64,
                        timestamp,
                    }
                },
            );
        }
        Ok(CatalogueDump {
            journal_bytes: Some(listing.all.iter().map(|m| m.size).sum()),
            total_records: records.len() as u64,
            records,
        })
    }

    fn compact(&self, db: &DbRef) -> Result<CompactReport, StorageError> {
        self.compact_some(db, true)
    }

    fn history_mark(&self, db: &DbRef) -> Result<HistoryMark, StorageError> {
        self.s3_history_mark(db)
    }

    fn commits(
        &self,
        db: &DbRef,
        epoch: &str,
        from: u64,
        max: usize,
    ) -> Result<Commits, StorageError> {
        self.s3_commits(db, epoch, from, max)
    }

    /// S3 has no portable change notifications: the waiter lists (docs/s3-format.md).
    fn change_waiter(&self) -> Result<Box<dyn ChangeWaiter>, StorageError> {
        Ok(Box::new(super::history::S3Waiter::new(
            self.client.clone(),
        )?))
    }
}

struct S3Reader {
    db: DbRef,
    view: Arc<View>,
    summaries: Vec<IndexSummary>,
    damaged: Vec<(String, String)>,
}

impl CatalogueReader for S3Reader {
    fn db(&self) -> &DbRef {
        &self.db
    }

    fn indexes(&self) -> &[IndexSummary] {
        &self.summaries
    }

    fn lookup(&self, index: &Key, datum: &Key) -> Result<Option<FieldRef>, StorageError> {
        if let Some((uri, why)) = self.damaged.first() {
            if self.view.lookup(index, datum).is_none() {
                return Err(StorageError::Corrupt {
                    path: PathBuf::from(uri),
                    offset: 0,
                    detail: why.clone(),
                });
            }
        }
        Ok(self.view.lookup(index, datum))
    }

    fn entries(&self, i: usize, include_masked: bool) -> Result<EntryIter<'static>, StorageError> {
        let n = self.view.summaries.len();
        if i >= n {
            return match self.damaged.get(i - n) {
                Some((uri, why)) => Err(StorageError::Corrupt {
                    path: PathBuf::from(uri),
                    offset: 0,
                    detail: why.clone(),
                }),
                None => Ok(Box::new(std::iter::empty())),
            };
        }
        Ok(Box::new(self.view.entries(i, include_masked).map(Ok)))
    }
}
