//! The `local` frontend: a schema, a catalogue and a store on this machine (toc + POSIX files).

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Read;
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use super::element::{sorted_values, AxesMap, ControlAction, ControlIdentifier, ListOptions};
use super::error::ApiError;
use super::fdb::{Fdb, ListIter};
use super::listing::{Listing, LockRule};
use super::operation::Operation;
use super::reader::DataReader;
use super::results::{
    CheckElement, CompactElement, ControlElement, DumpElement, MoveElement, PurgeElement,
    StatsElement, WhereElement, WipeElement,
};
use crate::grib;
use crate::model::config::{LocalConfig, Space};
use crate::model::request::Request;
use crate::model::schema::{ExpandMode, Expansion, LevelMatcher, Schema};
use crate::model::types::Context;
use crate::model::{Key, ModelError};
use crate::storage::toc::placement::RootUsage;
use crate::storage::toc::relocate::MoveOptions;
use crate::storage::{
    Catalogue, CatalogueReader, CatalogueWriter, DbRef, FieldRef, PosixStore, StorageError, Store,
    StoreWriter, TocCatalogue,
};
use chrono::{NaiveDate, Utc};

mod axes;
mod stream;

use stream::FieldStream;

/// One batch of a database's fields: bytes go to the store, entries to the catalogue, and a
/// flush makes the batch durable and visible as a whole.
struct Batch {
    store: Box<dyn StoreWriter>,
    catalogue: Box<dyn CatalogueWriter>,
}

/// Today's date, asked once per request so that relative dates (`date=-1`) mean the day the
/// request is made, not the day the handle was opened. Injectable for tests.
pub type Clock = Box<dyn Fn() -> NaiveDate + Send + Sync>;

/// Retrieves naming at most this many keys (the product of the values of every keyword) look
/// each one up, as FDB5 does; larger ones walk the indexes that exist instead, so their cost is
/// bounded by what the store holds, never by the product (`number=1/to/50,levelist=1/to/1000,
/// step=0/to/3000` names 12 million keys per parameter).
const ENUMERATE_LIMIT: u64 = 100_000;

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
    /// The database was wiped and this slot taken out of the handle's map: an archive that
    /// found the slot before that looks the database up again rather than write into the old one.
    wiped: bool,
}

fn lock<T>(m: &Mutex<T>) -> Result<MutexGuard<'_, T>, ApiError> {
    m.lock().map_err(panicked)
}

fn panicked<T>(_: T) -> ApiError {
    ApiError::Invalid("a writer thread panicked".into())
}

fn flush_failed(db: &DbRef, detail: &str) -> ApiError {
    ApiError::FlushFailed {
        db: db.id.clone(),
        detail: detail.to_string(),
    }
}

pub struct LocalFdb {
    config: LocalConfig,
    schema: Schema,
    /// For archiving only: keys given to archive are absolute (a relative date is not canonical
    /// and refused), so its `today` never matters. Requests use [`LocalFdb::request_cx`].
    cx: Context<'static>,
    clock: Clock,
    /// Shared with the listings and retrieve streams this handle made, which outlive it.
    catalogue: Arc<dyn Catalogue>,
    /// The same catalogue when it is the toc one: tiers and `move` are its own.
    toc: Option<Arc<TocCatalogue>>,
    /// When the config's spaces name buckets as well as roots: the catalogue over both, whose
    /// moves between a root and a bucket are its own (docs/lifecycle.md).
    tiers: Option<Arc<crate::storage::tiered::TieredCatalogue>>,
    /// The configured store, wrapped so objects adopted from S3 buckets are read where they lie.
    store: Arc<dyn Store>,
    /// The S3 server objects adopted from buckets are read from (docs/adopt.md).
    adopted: Arc<crate::storage::adopted::AdoptedS3>,
    /// By database key, so the root is chosen once per database, not per field. The map is
    /// locked only to find or insert a database; each database has locks of its own.
    writers: RwLock<HashMap<Key, Arc<DbSlot>>>,
    /// Databases wiped while this handle had unflushed fields in them. Those fields may have
    /// come from any thread, so the next flush reports each (once): none vanish silently.
    lost: Mutex<Vec<String>>,
    /// The store's records of what its keys follow were checked (`Catalogue::check_keys_release`):
    /// each once, at the first flush after ecCodes (the first) or the native reader (the second)
    /// read keys in this process.
    keys_checked: [std::sync::atomic::AtomicBool; 2],
}

/// The S3 client of an `engine: s3` or `store: s3` config (its `s3:` section).
fn s3_client(config: &LocalConfig) -> Result<crate::storage::s3::S3Client, ApiError> {
    let s3 = config.s3.as_ref().ok_or_else(|| {
        ApiError::Config(
            "engine or store s3 needs an s3: section (s3: {endpoint: http://host:9000, bucket: NAME})"
                .into(),
        )
    })?;
    Ok(crate::storage::s3::S3Client::connect(s3)?)
}

/// Archives retry at most this often when the database they write into is wiped meanwhile.
const WIPE_RETRIES: usize = 3;

static RESOLVER: fn(&str) -> Option<String> = grib::params::resolver;

impl LocalFdb {
    pub fn new(config: LocalConfig) -> Result<LocalFdb, ApiError> {
        Self::with_fs(config, crate::storage::fs::os())
    }

    /// A toc catalogue and POSIX store over another file system than the OS's: a simulated
    /// one ([`crate::storage::fs::SimFs`]) in crash tests.
    pub fn with_fs(
        config: LocalConfig,
        fs: std::sync::Arc<dyn crate::storage::fs::FileSystem>,
    ) -> Result<LocalFdb, ApiError> {
        let schema = match &config.schema {
            Some(p) => Schema::from_file(p).map_err(ModelError::from)?,
            None => Schema::default_schema(),
        };
        let mut toc = None;
        let mut tiers = None;
        let (catalogue, store): (Arc<dyn Catalogue>, Arc<dyn Store>) =
            match (config.engine.as_str(), config.store.as_str()) {
                ("toc" | "", "file" | "posix" | "") => {
                    let t = Arc::new(
                        TocCatalogue::with_fs(config.spaces.clone(), fs.clone())?
                            .reloading_from(config.spaces_source.clone()),
                    );
                    toc = Some(t.clone());
                    let files: Arc<dyn Store> = Arc::new(PosixStore::new(fs));
                    let buckets = config.spaces.iter().flat_map(|s| &s.roots).any(|r| {
                        crate::storage::tiered::is_bucket_root(&r.path)
                    });
                    if buckets {
                        let tiered = Arc::new(crate::storage::tiered::TieredCatalogue::new(
                            t,
                            &config.spaces,
                            config.s3.as_ref(),
                        )?);
                        tiers = Some(tiered.clone());
                        let store = Arc::new(crate::storage::tiered::TieredStore::new(
                            files, &tiered,
                        ));
                        (tiered, store)
                    } else {
                        (t, files)
                    }
                }
                ("memory", "memory" | "") => {
                    let m = config.memory.clone().unwrap_or_default();
                    let backend = crate::storage::MemoryBackend::from_config(&m)?;
                    (Arc::new(backend.catalogue()), Arc::new(backend.store()))
                }
                ("s3", "s3" | "") => {
                    let client = s3_client(&config)?;
                    (
                        Arc::new(crate::storage::s3::S3Catalogue::new(client.clone())),
                        Arc::new(crate::storage::s3::S3Store::new(client)),
                    )
                }
                ("toc" | "", "s3") => (
                    Arc::new(TocCatalogue::with_fs(config.spaces.clone(), fs)?),
                    Arc::new(crate::storage::s3::S3Store::new(s3_client(&config)?)),
                ),
                ("s3", store) => {
                    return Err(ApiError::Config(format!(
                        "engine 's3' with store '{store}' is refused: an S3 catalogue's entries would outlive (or lose) bytes kept outside the bucket; use store: s3"
                    )))
                }
                (engine, store) => {
                    return Err(ApiError::Config(format!(
                        "engine '{engine}' with store '{store}' is not known (this version has: toc with file, toc with s3, s3 with s3, memory with memory)"
                    )))
                }
            };
        let adopted = Arc::new(crate::storage::adopted::AdoptedS3::from_config(&config));
        let store: Arc<dyn Store> = Arc::new(crate::storage::adopted::AdoptingStore::new(
            store,
            adopted.clone(),
        ));
        Ok(LocalFdb {
            config,
            schema,
            cx: Context {
                params: Some(&RESOLVER),
                ..Context::default()
            },
            clock: Box::new(|| Utc::now().date_naive()),
            catalogue,
            toc,
            tiers,
            store,
            adopted,
            writers: RwLock::new(HashMap::new()),
            lost: Mutex::new(Vec::new()),
            keys_checked: Default::default(),
        })
    }

    /// Refuses a flush of fields whose keys this process's ecCodes (or native tables) read when
    /// the store's keys follow another release (or table version): `storage::keys_release`.
    /// Keys a caller gave are checked against nothing.
    fn check_keys_release(&self) -> Result<(), ApiError> {
        use crate::storage::keys_release::KeysReader;
        use std::sync::atomic::Ordering;
        let [eccodes, native] = &self.keys_checked;
        if !eccodes.load(Ordering::Relaxed) && grib::keys_read_by_eccodes() {
            let loaded = grib::eccodes()?.version;
            self.catalogue
                .check_keys_release(KeysReader::Eccodes, &loaded)?;
            eccodes.store(true, Ordering::Relaxed);
        }
        if !native.load(Ordering::Relaxed) && grib::keys_read_natively() {
            self.catalogue
                .check_keys_release(KeysReader::Native, grib::native::mars::table_version())?;
            native.store(true, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Every database readers see that `request` names; an empty request: every database.
    pub(crate) fn databases_matching(&self, request: &Request) -> Result<Vec<DbRef>, ApiError> {
        if request.is_empty() {
            return Ok(self
                .catalogue
                .databases()
                .into_iter()
                .collect::<Result<Vec<_>, _>>()?);
        }
        self.matching_dbs(request)
    }

    /// The config this handle was opened with.
    pub fn local_config(&self) -> &LocalConfig {
        &self.config
    }

    /// When the database last changed (its last commit), where the catalogue can tell.
    pub(crate) fn last_change(&self, db: &DbRef) -> Option<std::time::SystemTime> {
        if let Some(t) = &self.tiers {
            if let Some(at) = t.last_change(db) {
                return Some(at);
            }
        }
        std::fs::metadata(std::path::Path::new(&db.id).join("toc"))
            .and_then(|m| m.modified())
            .ok()
    }

    /// Retires what moves into buckets left in the roots and whose time has come (hidden, then
    /// deleted once past their grace); the number of copies deleted. Never waits.
    pub fn retire_left_copies(&self) -> usize {
        self.tiers.as_ref().map_or(0, |t| t.retire_left_copies())
    }

    /// Whether the database lies in the tier `to` (a root's path or a bucket's URI).
    pub(crate) fn is_in_tier(&self, db: &DbRef, to: &str) -> bool {
        if let Some(uri) = crate::storage::tiered::canonical_bucket_uri(to) {
            return db.id.starts_with(&uri);
        }
        self.toc
            .as_ref()
            .is_some_and(|t| t.is_in_root(db, std::path::Path::new(to)))
    }

    /// Replaces the clock that resolves relative dates (tests, or a service pinned to a day).
    pub fn with_clock(mut self, clock: Clock) -> Self {
        self.clock = clock;
        self
    }

    /// The canonicalisation context for one request: today as of now.
    fn request_cx(&self) -> Context<'static> {
        Context {
            today: (self.clock)(),
            params: Some(&RESOLVER),
        }
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    /// The context a request made now is read with.
    pub fn context(&self) -> Context<'static> {
        self.request_cx()
    }

    fn expand(&self, request: &Request, mode: ExpandMode) -> Result<Vec<Expansion>, ApiError> {
        let cx = self.request_cx();
        let expanded = request.expand_ranges(&cx).map_err(ModelError::from)?;
        Ok(self
            .schema
            .expand(expanded.iter(), mode, &cx)
            .map_err(ModelError::from)?)
    }

    /// A GRIB message carries its own keys: a key given with one must agree with them.
    fn check_given_key(&self, k: &Key, data: &[u8]) -> Result<(), ApiError> {
        if !data.starts_with(b"GRIB") {
            return Ok(());
        }
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
        Ok(())
    }

    /// Splits the key by the schema and hands the field to its database's writers.
    fn store(&self, key: &Key, strict: bool, data: &[u8]) -> Result<(), ApiError> {
        self.store_bytes(key, strict, FieldBytes::Slice(data))
    }

    fn store_bytes(&self, key: &Key, strict: bool, mut data: FieldBytes) -> Result<(), ApiError> {
        if !self.config.actions.archive {
            return Err(ApiError::Invalid(
                "archive is disabled by this config (archive: false / writable: false)".into(),
            ));
        }
        let split = self
            .schema
            .split(key, &self.cx, strict)
            .map_err(ModelError::from)?;
        // Taken before any lock: how the values are packed, so that extraction reads only the
        // bytes a few points need (a CCSDS field is decoded once here, for its intervals).
        let extract = match &data {
            FieldBytes::Slice(d) | FieldBytes::Adopted { data: d, .. } => {
                crate::extract::catalogue_info(d)
            }
            FieldBytes::Shared(d, _) => crate::extract::catalogue_info(d),
            FieldBytes::Stream(..) | FieldBytes::Consumed => None,
        };
        let mut attempts = 0;
        loop {
            let slot = match self.slot(&split.db) {
                // Wiped while its writers were being opened: made anew on the next try.
                Err(ApiError::Wiped { .. }) if attempts < WIPE_RETRIES => {
                    attempts += 1;
                    continue;
                }
                r => r?,
            };
            let mut open = lock(&slot.open)?;
            if let Some(why) = &open.failed {
                return Err(flush_failed(&slot.db, why));
            }
            // Wiped after this thread found the slot: the field goes into the new database.
            let retry = attempts < WIPE_RETRIES;
            if open.wiped && retry {
                attempts += 1;
                continue;
            }
            if open.wiped {
                return Err(ApiError::Wiped {
                    db: slot.db.id.clone(),
                });
            }
            let appended = match &mut data {
                FieldBytes::Slice(d) => open.batch.store.append(d),
                FieldBytes::Shared(d, checksum) => open.batch.store.append_shared(d.clone(), *checksum),
                FieldBytes::Adopted {
                    object,
                    offset,
                    data,
                } if crate::storage::adopted::is_adopted_object(object)
                    && self.catalogue.db_format(&slot.db) == Some("fdb5") =>
                {
                    return Err(ApiError::Invalid(format!(
                        "database {} is kept in FDB5's format, and FDB5's programs cannot read S3 objects adopted where they lie ({}): adopt them into a database in fieldstore's format (a config or root without format: fdb5), or copy them in with `fieldstore write`",
                        slot.db.id,
                        self.store.uri(&slot.db, object)
                    )));
                }
                FieldBytes::Adopted {
                    object,
                    offset,
                    data,
                } => Ok(crate::storage::FieldRef {
                    object: object.to_string(),
                    offset: *offset,
                    length: data.len() as u64,
                    checksum: Some(crate::checksum::crc32c(data)),
                    extract: None,
                }),
                FieldBytes::Stream(length, src) => {
                    let r = open.batch.store.append_from(*length, &mut **src);
                    // Its bytes are gone from the source: a retry has nothing to store.
                    data = FieldBytes::Consumed;
                    r
                }
                FieldBytes::Consumed => {
                    return Err(ApiError::Wiped {
                        db: slot.db.id.clone(),
                    })
                }
            }
            .map(|mut field| {
                field.extract = extract.clone();
                field
            })
            .map_err(ApiError::from);
            let added = appended.and_then(|field| {
                Ok(open
                    .batch
                    .catalogue
                    .add(&split.index, &split.datum, field)?)
            });
            match added {
                Ok(()) => return Ok(()),
                // Another handle wiped it: this handle's writers point into a database that is
                // gone, so they are dropped and the field goes into a new one.
                Err(e) => {
                    drop(open);
                    if !self.is_gone(&slot.db) {
                        return Err(e);
                    }
                    self.detach(&slot.db)?;
                    self.mark_wiped(&slot)?;
                    if !retry {
                        return Err(ApiError::Wiped {
                            db: slot.db.id.clone(),
                        });
                    }
                    attempts += 1;
                }
            }
        }
    }

    /// S3 objects are adopted into stores that keep entries naming them for as long as the
    /// catalogue does: files or S3, not memory (whose catalogue is gone with the process).
    fn may_adopt_objects(&self) -> Result<(), ApiError> {
        match self.store.kind() {
            "file" | "s3" => Ok(()),
            other => Err(ApiError::Invalid(format!(
                "adopting S3 objects needs a store of files or S3 (store: file or s3), not {other}"
            ))),
        }
    }

    /// Whether the database a slot writes into no longer exists (wiped, by any handle).
    /// A database caught half-wiped (its journal renamed away, its directory not yet removed)
    /// may fail to open rather than be absent: only a positive find counts as still there.
    fn is_gone(&self, db: &DbRef) -> bool {
        !matches!(self.catalogue.find(&db.key), Ok(Some(d)) if d.id == db.id)
    }

    /// Takes the database's slots out of this handle after a wipe, so the next archive
    /// creates the database anew.
    fn detach(&self, db: &DbRef) -> Result<(), ApiError> {
        let slots: Vec<Arc<DbSlot>> = {
            let mut writers = self.writers.write().map_err(panicked)?;
            let keys: Vec<Key> = writers
                .iter()
                .filter(|(k, s)| **k == db.key || s.db.id == db.id)
                .map(|(k, _)| k.clone())
                .collect();
            keys.iter().filter_map(|k| writers.remove(k)).collect()
        };
        for slot in &slots {
            self.mark_wiped(slot)?;
        }
        Ok(())
    }

    /// Archives holding the slot already either appended before (their fields are recorded as
    /// lost, for the next flush to report) or see `wiped` and look the database up again.
    /// Waits for a flush in flight on the slot; the caller must not hold its locks.
    fn mark_wiped(&self, slot: &DbSlot) -> Result<(), ApiError> {
        let _commit = slot.commit.lock().unwrap_or_else(|p| p.into_inner());
        let mut open = slot.open.lock().unwrap_or_else(|p| p.into_inner());
        if open.wiped {
            return Ok(());
        }
        open.wiped = true;
        if open.batch.catalogue.is_dirty() && open.failed.is_none() {
            lock(&self.lost)?.push(slot.db.id.clone());
        }
        Ok(())
    }

    /// A flush's error, said plainly when the database was wiped under it (by any handle): the
    /// slot is dropped, so the handle's next archive creates the database anew, and the loss is
    /// reported here, once.
    fn wiped_under(&self, slot: &DbSlot, e: ApiError) -> ApiError {
        let wiped = matches!(e, ApiError::Storage(StorageError::Wiped { .. }));
        if !wiped && !self.is_gone(&slot.db) {
            return e;
        }
        let dropped = self
            .detach(&slot.db)
            .and_then(|()| self.mark_wiped(slot))
            .and_then(|()| {
                lock(&self.lost)?.retain(|db| *db != slot.db.id);
                Ok(())
            });
        match dropped {
            Ok(()) => ApiError::Wiped {
                db: slot.db.id.clone(),
            },
            Err(e) => e,
        }
    }

    /// The database's writing state, made on its first archive. The map is locked only to look
    /// up or insert: creating the database and opening its writers (file system work) happens
    /// outside it, so a new database never holds up archives into the others.
    fn slot(&self, db: &Key) -> Result<Arc<DbSlot>, ApiError> {
        if let Some(s) = self.writers.read().map_err(panicked)?.get(db) {
            return Ok(s.clone());
        }
        // A wipe by another thread may remove the database's journal while it is being
        // created or opened: that is a retry (the caller's), not a failure.
        let db_ref =
            match self
                .catalogue
                .create_by(db, self.schema.text(), self.config.creator.as_deref())
            {
                Ok(d) => d,
                Err(StorageError::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound
                        && !matches!(self.catalogue.find(db), Ok(Some(_))) =>
                {
                    return Err(ApiError::Wiped { db: db.to_string() })
                }
                Err(e) => return Err(e.into()),
            };
        if self.catalogue.is_locked(&db_ref, "archive")? {
            return Err(locked(&db_ref, "archive"));
        }
        let batch = self.batch(&db_ref).map_err(|e| {
            if self.is_gone(&db_ref) {
                ApiError::Wiped {
                    db: db_ref.id.clone(),
                }
            } else {
                e
            }
        })?;
        let slot = Arc::new(DbSlot {
            open: Mutex::new(Open {
                batch,
                failed: None,
                wiped: false,
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
            // Detached by a wipe, which recorded its fields as lost if it had any.
            if open.wiped || !open.batch.catalogue.is_dirty() {
                return Ok(());
            }
        }
        self.check_keys_release()?;
        // Writers for the next batch are ready before the cut, so archives never wait for them.
        let next = match spare.take() {
            Some(b) => b,
            None => match self.batch(&slot.db) {
                Ok(b) => b,
                Err(e) => {
                    drop(spare);
                    return Err(self.wiped_under(slot, e));
                }
            },
        };
        let mut batch = std::mem::replace(&mut lock(&slot.open)?.batch, next);
        // Bytes durable first: the catalogue's commit (one journal append) is what makes them
        // visible, all at once or not at all.
        if let Err(e) = batch.store.sync().and_then(|()| batch.catalogue.commit()) {
            // Another handle wiped the database under this batch: said so, and the slot is
            // dropped so that this handle's next archive creates the database anew.
            if matches!(e, StorageError::Wiped { .. }) || self.is_gone(&slot.db) {
                drop(spare);
                return Err(self.wiped_under(slot, e.into()));
            }
            // The batch's entries go down with it, never visible. Archives must learn of it
            // even if a thread panicked while holding the lock.
            let mut open = slot.open.lock().unwrap_or_else(|p| p.into_inner());
            open.failed = Some(e.to_string());
            return Err(e.into());
        }
        // The toc writer merges indexes itself after committing (size-tiered, and skipped while
        // another process compacts), so listing and retrieves stay fast as flushes pile up
        // without any flush paying for the whole database.
        *spare = Some(batch);
        Ok(())
    }

    /// The fields a request names, in FDB5's retrieve order, each once.
    fn locate(&self, request: &Request) -> Result<VecDeque<Located>, ApiError> {
        let mut found = Found::default();
        for e in self.expand(request, ExpandMode::Retrieve)? {
            let (Some(ndb), Some(nix), Some(ndt)) = (
                e.levels[0].count(),
                e.levels[1].count(),
                e.levels[2].count(),
            ) else {
                continue;
            };
            if ndb.saturating_mul(nix).saturating_mul(ndt) <= ENUMERATE_LIMIT {
                self.retrieve_by_lookup(&e, &mut found)?;
            } else {
                self.retrieve_by_walk(&e, ndb, &mut found)?;
            }
        }
        Ok(found.locations)
    }

    /// A reader for a database key, once per retrieve; `None` when it does not exist.
    fn reader_for<'f>(
        &self,
        db: &Key,
        found: &'f mut Found,
    ) -> Result<Option<&'f dyn CatalogueReader>, ApiError> {
        if !found.readers.contains_key(db) {
            let r = match self.catalogue.find(db)? {
                Some(d) => {
                    if self.catalogue.is_locked(&d, "retrieve")? {
                        return Err(locked(&d, "retrieve"));
                    }
                    Some(self.catalogue.reader(&d)?)
                }
                None => None,
            };
            found.readers.insert(db.clone(), r);
        }
        Ok(found.readers.get(db).and_then(|r| r.as_deref()))
    }

    /// Looks up every key the expansion names, in FDB5's order: databases, then datums, then
    /// indexes, each in the request's order. Only for expansions naming few keys.
    fn retrieve_by_lookup(&self, e: &Expansion, found: &mut Found) -> Result<(), ApiError> {
        let (Some(dbs), Some(ixs), Some(dts)) = (
            e.levels[0].candidates(),
            e.levels[1].candidates(),
            e.levels[2].candidates(),
        ) else {
            return Ok(());
        };
        for db in &dbs {
            let Some(reader) = self.reader_for(db, found)? else {
                continue;
            };
            let mut fields = Vec::new();
            for dt in &dts {
                for ix in &ixs {
                    if let Some(field) = reader.lookup(ix, dt)? {
                        fields.push((field, ix, dt));
                    }
                }
            }
            let db = reader.db().clone();
            for (field, ix, dt) in fields {
                found.push(&db, field, ix, dt);
            }
        }
        Ok(())
    }

    /// Finds the fields an expansion names by walking what exists: the databases (or, when few,
    /// the database keys named), their indexes whose keys match, and those indexes' entries
    /// that match. Cost and memory are bounded by the store, not by the number of keys named.
    /// The result is put in the order [`retrieve_by_lookup`](Self::retrieve_by_lookup) gives.
    fn retrieve_by_walk(&self, e: &Expansion, ndb: u64, found: &mut Found) -> Result<(), ApiError> {
        let [db_m, ix_m, dt_m] = [
            LevelMatcher::new(&e.levels[0]),
            LevelMatcher::new(&e.levels[1]),
            LevelMatcher::new(&e.levels[2]),
        ];
        let db_keys: Vec<Key> = if ndb <= ENUMERATE_LIMIT {
            e.levels[0].candidates().unwrap_or_default()
        } else {
            let mut dbs = Vec::new();
            for db in self.catalogue.databases() {
                let db = db?;
                if let Some(pos) = db_m.position(&db.key) {
                    dbs.push((pos, db.key));
                }
            }
            dbs.sort_by(|a, b| a.0.cmp(&b.0));
            dbs.into_iter().map(|(_, k)| k).collect()
        };
        for db in &db_keys {
            let Some(reader) = self.reader_for(db, found)? else {
                continue;
            };
            // (datum place, index place, field, index key, datum key): sorted by the places,
            // this is the lookup order.
            let mut fields: Vec<WalkedField> = Vec::new();
            for (i, ix) in reader.indexes().iter().enumerate() {
                let Some(ipos) = ix_m.position(&ix.index_key) else {
                    continue;
                };
                let possible = e.levels[2]
                    .keywords
                    .iter()
                    .all(|(k, v)| v.as_ref().is_none_or(|v| ix.may_contain(k, v)));
                if !possible {
                    continue;
                }
                for entry in reader.entries(i, false)? {
                    let entry = entry?;
                    if let Some(dpos) = dt_m.position(&entry.datum) {
                        fields.push((
                            dpos,
                            ipos.clone(),
                            entry.field,
                            ix.index_key.clone(),
                            entry.datum,
                        ));
                    }
                }
            }
            // Stable: the same key in two indexes keeps the newest first, as lookup finds it.
            fields.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
            let db = reader.db().clone();
            let mut last: Option<(Vec<u32>, Vec<u32>)> = None;
            for (dpos, ipos, field, index, datum) in fields {
                // Only the newest copy of a key, as lookup returns.
                let key = Some((dpos, ipos));
                if key == last {
                    continue;
                }
                last = key;
                found.push(&db, field, &index, &datum);
            }
        }
        Ok(())
    }

    /// Ownership of every database a change names, checked before the first of them changes.
    fn may_change(&self, dbs: &[DbRef], action: &'static str) -> Result<(), ApiError> {
        for db in dbs {
            self.catalogue.may_change(db, action)?;
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
            if expansions
                .iter()
                .any(|e| e.levels[0].matches_exactly(&db.key))
            {
                out.push(db);
            }
        }
        Ok(out)
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
        let cx = self.request_cx();
        let expanded = request
            .expand_ranges(&cx)
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
            let missing: Vec<&str> = values
                .iter()
                .filter(|v| {
                    let c = ty
                        .and_then(|t| t.canonical(kw, v, &cx).ok())
                        .unwrap_or_else(|| v.to_string());
                    !present.contains(&c)
                })
                .map(String::as_str)
                .collect();
            if !missing.is_empty() {
                // Both lists shortened: a range may name a million values.
                lines.push(format!(
                    "{kw}={} matched nothing; present: {}",
                    abbreviated(&missing),
                    abbreviated(&sorted_values(present))
                ));
            }
        }
        if lines.is_empty() {
            // Most often a retrieve that leaves out keywords: it names single fields, so it
            // needs a value for every keyword the fields have.
            let mut unnamed: Vec<&str> = axes
                .keys()
                .map(String::as_str)
                .filter(|kw| request.get(kw).is_none())
                .collect();
            unnamed.sort_unstable();
            if unnamed.is_empty() {
                "every value exists on its own, but no field has this combination".into()
            } else {
                format!(
                    "every value exists on its own, but no field has this combination; the request names no value for {} (a retrieve needs a value for every keyword of the fields; `list` with this request shows them)",
                    unnamed.join(", ")
                )
            }
        } else {
            lines.join("\n")
        }
    }
}

/// Values joined with `/`, the first 20 only, saying how many more there are.
fn abbreviated(values: &[&str]) -> String {
    const SHOWN: usize = 20;
    let mut s = values
        .iter()
        .take(SHOWN)
        .copied()
        .collect::<Vec<_>>()
        .join("/");
    if values.len() > SHOWN {
        s.push_str(&format!("/... ({} more)", values.len() - SHOWN));
    }
    s
}

fn locked(db: &DbRef, action: &str) -> ApiError {
    ApiError::Locked {
        db: db.id.clone(),
        action: action.into(),
    }
}

/// A field a walk found: its places in the request (datum, index), where it is, and its key.
type WalkedField = (Vec<u32>, Vec<u32>, FieldRef, Key, Key);

/// What a retrieve has found so far: the fields in order, each once, and the readers opened.
#[derive(Default)]
struct Found {
    locations: VecDeque<Located>,
    /// Several rules may name the same field: it is returned once.
    seen: HashSet<(String, u64)>,
    readers: HashMap<Key, Option<Box<dyn CatalogueReader>>>,
}

impl Found {
    fn push(&mut self, db: &DbRef, field: FieldRef, index: &Key, datum: &Key) {
        if self.seen.insert((field.object.clone(), field.offset)) {
            self.locations.push_back(Located {
                db: db.clone(),
                field,
                index: index.clone(),
                datum: datum.clone(),
            });
        }
    }
}

/// A field found by a retrieve: where it is, and its key for error messages.
pub(super) struct Located {
    pub(super) db: DbRef,
    pub(super) field: FieldRef,
    pub(super) index: Key,
    pub(super) datum: Key,
}

/// A field's bytes as `store` gets them: in memory, or still arriving (a server streaming a
/// large field), which can be written only once.
enum FieldBytes<'a> {
    Slice(&'a [u8]),
    /// A buffer handed over (a server's receive buffer), and its CRC-32C if the caller took it:
    /// a memory store keeps it as it is.
    Shared(bytes::Bytes, Option<u32>),
    /// A field of an adopted file: indexed where it lies, not stored.
    Adopted {
        object: &'a str,
        offset: u64,
        data: &'a [u8],
    },
    Stream(u64, &'a mut dyn Read),
    Consumed,
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
                self.check_given_key(k, data)?;
                self.store(k, true, data)
            }
            None => self.store(&grib::mars_keys(data)?, false, data),
        }
    }

    fn archive_shared(
        &self,
        key: Option<&Key>,
        grib: bool,
        data: bytes::Bytes,
        checksum: Option<u32>,
    ) -> Result<(), ApiError> {
        match (key, grib) {
            (Some(k), true) => self.store_bytes(k, false, FieldBytes::Shared(data, checksum)),
            (Some(k), false) => {
                self.check_given_key(k, &data)?;
                self.store_bytes(k, true, FieldBytes::Shared(data, checksum))
            }
            (None, _) => {
                let found = grib::mars_keys(&data)?;
                self.store_bytes(&found, false, FieldBytes::Shared(data, checksum))
            }
        }
    }

    fn archive_grib(&self, mars_key: &Key, data: &[u8]) -> Result<(), ApiError> {
        self.store(mars_key, false, data)
    }

    fn archive_grib_from(
        &self,
        mars_key: &Key,
        length: u64,
        src: &mut dyn Read,
    ) -> Result<(), ApiError> {
        self.store_bytes(mars_key, false, FieldBytes::Stream(length, src))
    }

    fn adopt_grib(
        &self,
        mars_key: &Key,
        object: &str,
        offset: u64,
        data: &[u8],
    ) -> Result<(), ApiError> {
        if crate::storage::adopted::is_adopted_object(object) {
            self.may_adopt_objects()?;
        } else if self.store.kind() != "file" {
            return Err(ApiError::Invalid(format!(
                "adopting files needs a store of files (store: file), not {}",
                self.store.kind()
            )));
        }
        self.store_bytes(
            mars_key,
            false,
            FieldBytes::Adopted {
                object,
                offset,
                data,
            },
        )
    }

    fn open_adoptable(&self, uri: &str) -> Result<crate::storage::adopted::Adoptable, ApiError> {
        if !self.config.actions.archive {
            return Err(ApiError::Invalid(
                "archive is disabled by this config (archive: false / writable: false)".into(),
            ));
        }
        self.may_adopt_objects()?;
        Ok(self.adopted.open_for_adoption(uri)?)
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
        let mut errors: Vec<(String, ApiError)> = std::mem::take(&mut *lock(&self.lost)?)
            .into_iter()
            .map(|db| (db.clone(), ApiError::Wiped { db }))
            .collect();
        for slot in &slots {
            if let Err(e) = self.flush_db(slot) {
                errors.push((slot.db.id.clone(), e));
            }
        }
        match errors.len() {
            0 => Ok(()),
            // Kept whole, so its kind reaches exit codes and wire errors unchanged.
            1 => Err(errors.remove(0).1),
            // The first database's kind (a wipe, a full disk...) stays visible to bindings.
            n => Err(ApiError::Children {
                kind: errors[0].1.kind(),
                summary: format!(
                    "flush failed in {n} databases: {}",
                    errors
                        .iter()
                        .map(|(db, e)| format!("[{db}] {e}"))
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
            }),
        }
    }

    fn retrieve(&self, request: &Request) -> Result<Box<dyn DataReader>, ApiError> {
        if !self.config.actions.retrieve {
            return Err(ApiError::Invalid(
                "retrieve is disabled by this config".into(),
            ));
        }
        Ok(Box::new(FieldStream::new(
            self.store.clone(),
            self.locate(request)?.into(),
        )))
    }

    fn extract(
        &self,
        request: &Request,
        ranges: &[std::ops::Range<u64>],
    ) -> Result<Vec<super::extract::Extraction>, ApiError> {
        if !self.config.actions.retrieve {
            return Err(ApiError::Invalid(
                "retrieve (and so extract) is disabled by this config".into(),
            ));
        }
        super::extract::extract_located(&*self.store, &self.locate(request)?, ranges)
    }

    fn extract_index(
        &self,
        request: &Request,
        options: &super::ExtractIndexOptions,
    ) -> Result<super::ExtractIndexReport, ApiError> {
        if self.store.kind() != "file" {
            return Err(ApiError::Invalid(format!(
                "extract-index keeps extraction information beside data files in database directories; this config's store is {}, whose fields have it in their catalogue entries when archived (fields stored without it are extracted whole)",
                self.store.kind()
            )));
        }
        // Named as a listing names fields: an operator indexes `class=od,date=20261122`, a
        // whole database, without spelling out every field's keys.
        let located = self
            .walk(request, ListOptions::default(), LockRule::Honour)?
            .located()
            .collect::<Result<VecDeque<Located>, ApiError>>()?;
        if located.is_empty() {
            return Err(ApiError::NothingMatched(format!(
                "no field matches {request}"
            )));
        }
        let mut dbs: Vec<&DbRef> = located.iter().map(|l| &l.db).collect();
        dbs.dedup();
        for db in dbs {
            if self.catalogue.is_locked(db, "archive")? {
                return Err(locked(db, "archive"));
            }
        }
        super::extract_index::run(&*self.store, &located, options)
    }

    fn subscribe(
        &self,
        request: &Request,
        start: &super::subscribe::Start,
    ) -> Result<super::subscribe::SubscriptionBox, ApiError> {
        self.feed(request, start, false)
    }

    fn subscribe_with_data(
        &self,
        request: &Request,
        start: &super::subscribe::Start,
    ) -> Result<super::subscribe::SubscriptionBox, ApiError> {
        self.feed(request, start, true)
    }

    fn wanted_fields(&self, request: &Request) -> Result<Vec<Key>, ApiError> {
        /// More than a waiting retrieve should track (each is a key held in memory).
        const MOST: usize = 1_000_000;
        let mut out = Vec::new();
        for e in self.expand(request, ExpandMode::Retrieve)? {
            let (Some(dbs), Some(ixs), Some(dts)) = (
                e.levels[0].candidates(),
                e.levels[1].candidates(),
                e.levels[2].candidates(),
            ) else {
                return Err(ApiError::Invalid(format!(
                    "a retrieve that waits must name every field (line {} of the schema leaves a keyword open): give each keyword its values",
                    e.line
                )));
            };
            let n = dbs
                .len()
                .saturating_mul(ixs.len())
                .saturating_mul(dts.len());
            if out.len().saturating_add(n) > MOST {
                return Err(ApiError::Invalid(format!(
                    "the request names more than {MOST} fields: too many to wait for in one retrieve; split it"
                )));
            }
            for db in &dbs {
                for dt in &dts {
                    for ix in &ixs {
                        out.push(db.join(ix).join(dt));
                    }
                }
            }
        }
        Ok(out)
    }

    fn list(&self, request: &Request, options: ListOptions) -> Result<ListIter, ApiError> {
        self.listing(request, options, LockRule::Honour)
    }

    fn list_lines(
        &self,
        request: &Request,
        options: ListOptions,
        mark_masked: bool,
        line: &mut dyn FnMut(&[u8]) -> std::ops::ControlFlow<()>,
        on_error: &mut dyn FnMut(ApiError) -> std::ops::ControlFlow<()>,
    ) -> Result<(), ApiError> {
        if !self.config.actions.list {
            return Err(ApiError::Invalid("list is disabled by this config".into()));
        }
        self.walk(request, options, LockRule::Honour)?
            .lines(mark_masked, line, on_error);
        Ok(())
    }

    fn axes(&self, request: &Request, depth: u8) -> Result<AxesMap, ApiError> {
        if depth & super::element::AXES_AS_FDB5 != 0 {
            return self.axes_as_fdb5(request, depth & !super::element::AXES_AS_FDB5);
        }
        if depth >= 3 {
            return self.axes_from_summaries(request);
        }
        let mut axes = AxesMap::new();
        // FDB5's axes ignore list locks (only its listing checks them): as it does.
        for el in self.listing(
            request,
            ListOptions {
                include_masked: false,
                depth: depth.clamp(1, 3),
            },
            LockRule::Ignore,
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

    fn where_(&self, request: &Request) -> Result<Vec<WhereElement>, ApiError> {
        let expansions = self.expand(request, ExpandMode::List)?;
        let mut out = Vec::new();
        for db in self.catalogue.databases() {
            let db = db?;
            if expansions
                .iter()
                .any(|e| e.levels[0].matches_exactly(&db.key))
            {
                out.push(WhereElement {
                    location: self.catalogue.location(&db),
                    creator: self.catalogue.creator(&db)?,
                    format: self.catalogue.db_format(&db).map(str::to_string),
                    db: db.key,
                });
            }
        }
        Ok(out)
    }

    fn wipe(&self, request: &Request, doit: bool) -> Result<Vec<WipeElement>, ApiError> {
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
        let dbs = self.matching_dbs(request)?;
        if doit {
            self.may_change(&dbs, "wipe")?;
        }
        let mut out = Vec::new();
        for db in dbs {
            if self.catalogue.is_locked(&db, Operation::Wipe.name())? {
                return Err(locked(&db, Operation::Wipe.name()));
            }
            // The catalogue makes the database invisible first; then the store drops its
            // objects; then the catalogue removes what is left (its directory).
            let mut removed = self.catalogue.wipe(&db, doit)?;
            // Once it is invisible, this handle's writers for it go (archives meanwhile move to
            // a new database), and again at the end, in case an archive made one in between.
            if doit {
                self.detach(&db)?;
            }
            removed.extend(self.store.wipe(&db, doit)?);
            if doit {
                self.catalogue.finish_wipe(&db)?;
                self.detach(&db)?;
            }
            out.push(WipeElement {
                location: self.catalogue.location(&db),
                db: db.key,
                doit,
                removed,
            });
        }
        if out.is_empty() {
            return Err(ApiError::NothingMatched(format!(
                "no database matches {request}"
            )));
        }
        Ok(out)
    }

    fn purge(&self, request: &Request, doit: bool) -> Result<Vec<PurgeElement>, ApiError> {
        let dbs = self.matching_dbs(request)?;
        if doit {
            self.may_change(&dbs, "purge")?;
        }
        let mut out = Vec::new();
        for db in dbs {
            let r = self.catalogue.purge(&db, doit)?;
            if doit {
                self.store.remove(&db, &r.objects)?;
            }
            out.push(PurgeElement {
                location: self.catalogue.location(&db),
                doit,
                masked_fields: r.masked_fields as u64,
                indexes: r.indexes.iter().map(|f| format!("{}/{f}", db.id)).collect(),
                // Adopted files and objects are the user's: forgotten, never removed, so not
                // reported among what goes.
                objects: r
                    .objects
                    .iter()
                    .filter(|o| {
                        !crate::storage::adopted::is_adopted_object(o)
                            && crate::storage::posix::split_adopted(o).1.is_none()
                    })
                    .map(|o| self.store.uri(&db, o))
                    .collect(),
                db: db.key,
            });
        }
        Ok(out)
    }

    fn stats(&self, request: &Request) -> Result<Vec<StatsElement>, ApiError> {
        let mut out = Vec::new();
        for db in self.matching_dbs(request)? {
            let s = self.catalogue.stats(&db)?;
            let objects = self.catalogue.objects(&db)?;
            let data_bytes: u64 = objects
                .iter()
                .filter_map(|o| self.store.object_size(&db, o))
                .sum();
            let creator = self.catalogue.creator(&db)?;
            let format = self.catalogue.db_format(&db).map(str::to_string);
            out.push(StatsElement {
                location: self.catalogue.location(&db),
                db: db.key,
                lanes: Vec::new(),
                fields: s.fields,
                masked: s.masked,
                field_bytes: s.field_bytes,
                masked_bytes: s.masked_bytes,
                index_files: s.index_files,
                data_files: objects.len() as u64,
                data_bytes,
                journal_records: s.journal_records,
                creator,
                format,
            });
        }
        Ok(out)
    }

    fn dump(&self, request: &Request) -> Result<Vec<DumpElement>, ApiError> {
        let mut out = Vec::new();
        for db in self.matching_dbs(request)? {
            let d = self.catalogue.dump(&db)?;
            let creator = self.catalogue.creator(&db)?;
            out.push(DumpElement {
                location: self.catalogue.location(&db),
                db: db.key,
                journal_bytes: d.journal_bytes,
                total_records: d.total_records,
                records: d.records,
                creator,
            });
        }
        Ok(out)
    }

    fn control(
        &self,
        request: &Request,
        action: ControlAction,
        identifiers: &[ControlIdentifier],
    ) -> Result<Vec<ControlElement>, ApiError> {
        if let Some(op) = identifiers.iter().find(|op| !op.is_controllable()) {
            return Err(ApiError::Invalid(format!(
                "{op} cannot be locked: control locks {}",
                Operation::CONTROLLABLE.map(Operation::name).join(", ")
            )));
        }
        let dbs = self.matching_dbs(request)?;
        match action {
            ControlAction::Lock => self.may_change(&dbs, "lock")?,
            ControlAction::Unlock => self.may_change(&dbs, "unlock")?,
            ControlAction::Status => {}
        }
        let mut out = Vec::new();
        for db in dbs {
            for id in identifiers {
                match action {
                    ControlAction::Lock => self.catalogue.set_locked(&db, id.name(), true)?,
                    ControlAction::Unlock => self.catalogue.set_locked(&db, id.name(), false)?,
                    ControlAction::Status => {}
                }
            }
            let mut locked = std::collections::BTreeSet::new();
            for op in Operation::CONTROLLABLE {
                if self.catalogue.is_locked(&db, op.name())? {
                    locked.insert(op);
                }
            }
            out.push(ControlElement {
                location: self.catalogue.location(&db),
                db: db.key,
                locked,
            });
        }
        Ok(out)
    }

    fn compact(&self, request: &Request) -> Result<Vec<CompactElement>, ApiError> {
        let dbs = self.matching_dbs(request)?;
        self.may_change(&dbs, "compact")?;
        let mut out = Vec::new();
        for db in dbs {
            let r = self.catalogue.compact(&db)?;
            out.push(CompactElement {
                location: self.catalogue.location(&db),
                db: db.key,
                merged_indexes: r.merged_indexes as u64,
                new_indexes: r.new_indexes as u64,
                entries: r.entries as u64,
            });
        }
        Ok(out)
    }

    /// Every database for an empty request. A directory that is no readable database (its
    /// journal lost or damaged) is reported whatever the request: it cannot be matched.
    fn check(&self, request: &Request) -> Result<Vec<CheckElement>, ApiError> {
        let expansions = if request.is_empty() {
            None
        } else {
            Some(self.expand(request, ExpandMode::List)?)
        };
        let mut out = Vec::new();
        for db in self.catalogue.databases() {
            let db = match db {
                Ok(db) => db,
                Err(e) => {
                    out.push(CheckElement {
                        db: None,
                        location: String::new(),
                        findings: Vec::new(),
                        problem: Some(e.to_string()),
                    });
                    continue;
                }
            };
            if expansions
                .as_ref()
                .is_some_and(|ex| !ex.iter().any(|e| e.levels[0].matches_exactly(&db.key)))
            {
                continue;
            }
            let location = self.catalogue.location(&db);
            let (findings, problem) = match self.catalogue.check(&db) {
                Ok(f) => (f, None),
                Err(e @ StorageError::Unsupported { .. }) => return Err(e.into()),
                Err(e) => (Vec::new(), Some(e.to_string())),
            };
            out.push(CheckElement {
                db: Some(db.key),
                location,
                findings,
                problem,
            });
        }
        Ok(out)
    }

    fn move_databases(
        &self,
        request: &Request,
        dest: &std::path::Path,
        options: &MoveOptions,
    ) -> Result<Vec<MoveElement>, ApiError> {
        let Some(toc) = &self.toc else {
            return Err(ApiError::MoveUnsupported {
                frontend: self.name(),
                why: format!("its catalogue is {}, not toc", self.catalogue.kind()),
            });
        };
        if !self.config.actions.archive || !self.config.actions.wipe {
            return Err(ApiError::Invalid(
                "move needs archive and wipe enabled in this config".into(),
            ));
        }
        // With only an age, every database is a candidate.
        let candidates = if request.is_empty() && options.older_than_days.is_some() {
            self.catalogue
                .databases()
                .into_iter()
                .collect::<Result<Vec<_>, _>>()?
        } else {
            self.matching_dbs(request)?
        };
        let today = (self.clock)();
        let dbs: Vec<DbRef> = candidates
            .into_iter()
            .filter(|db| {
                options.older_than_days.is_none_or(|days| {
                    crate::storage::toc::placement::age_days(&db.key, today)
                        .is_some_and(|age| age > i64::from(days))
                })
            })
            .collect();
        // Ageing by date is a routine job: nothing old enough is nothing to do.
        if dbs.is_empty() && options.older_than_days.is_some() {
            return Ok(Vec::new());
        }
        if dbs.is_empty() {
            return Err(ApiError::NothingMatched(format!(
                "no database matches {request}"
            )));
        }
        // Those already there have nothing to do; a request naming only such is an error.
        let dest_text = dest.display().to_string();
        let to_bucket = dest_text.starts_with("s3://");
        let bucket_uri = crate::storage::tiered::canonical_bucket_uri(&dest_text);
        let (there, dbs): (Vec<DbRef>, Vec<DbRef>) = dbs.into_iter().partition(|db| {
            if to_bucket {
                bucket_uri
                    .as_ref()
                    .is_some_and(|u| db.id.starts_with(u.as_str()))
            } else {
                toc.is_in_root(db, dest)
            }
        });
        if dbs.is_empty() && options.older_than_days.is_some() {
            return Ok(Vec::new());
        }
        if dbs.is_empty() {
            return Err(ApiError::Invalid(format!(
                "every database matching {request} is already in {} ({})",
                dest.display(),
                there
                    .iter()
                    .map(|d| d.key.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            )));
        }
        if !options.dry_run {
            self.may_change(&dbs, "move")?;
            self.retire_left_copies();
        }
        let mut out = Vec::new();
        for db in dbs {
            let in_bucket = db.id.starts_with("s3://");
            let r = match (&self.tiers, to_bucket, in_bucket) {
                (None, true, _) => {
                    return Err(ApiError::Config(format!(
                        "{dest_text} is not a tier of this config: name the bucket as a root of a space (path: {dest_text}) and give the server in an s3: section"
                    )))
                }
                (Some(_), true, true) => {
                    return Err(ApiError::Invalid(format!(
                        "database {} is in a bucket ({}): move it to a root first",
                        db.key, db.id
                    )))
                }
                (Some(t), true, false) => {
                    t.move_to_bucket(&db, &dest_text, self.schema.text(), options)?
                }
                (Some(t), false, true) => t.move_to_root(&db, dest, self.schema.text(), options)?,
                _ => toc.move_database(&db, dest, options)?,
            };
            // This handle's writers for it go: the next archive opens the moved copy.
            if r.done {
                self.detach(&db)?;
            }
            out.push(MoveElement {
                db: db.key,
                from: r.from.display().to_string(),
                to: r.to.display().to_string(),
                files: r.files as u64,
                bytes: r.bytes,
                done: r.done,
            });
        }
        if !options.dry_run {
            // The earlier databases' old copies may be due by now.
            self.retire_left_copies();
        }
        Ok(out)
    }

    fn convert_databases(
        &self,
        request: &Request,
        to: crate::model::config::DbFormat,
        options: &crate::storage::toc::convert::ConvertOptions,
    ) -> Result<Vec<super::results::ConvertElement>, ApiError> {
        let Some(toc) = &self.toc else {
            return Err(ApiError::ConvertUnsupported {
                frontend: self.name(),
                why: format!("its catalogue is {}, not toc", self.catalogue.kind()),
            });
        };
        let dbs = self.matching_dbs(request)?;
        if dbs.is_empty() {
            return Err(ApiError::NothingMatched(format!(
                "no database matches {request}"
            )));
        }
        if !options.dry_run {
            self.may_change(&dbs, "convert")?;
        }
        if to == crate::model::config::DbFormat::Fdb5 {
            // FDB5's format names data by path: an S3 object adopted where it lies would be
            // written as a path no FDB5 program (nor fieldstore, reading FDB5's format) can open.
            for db in &dbs {
                let objects = self.catalogue.objects(db)?;
                if let Some(o) = objects
                    .iter()
                    .find(|o| crate::storage::adopted::is_adopted_object(o))
                {
                    return Err(ApiError::Invalid(format!(
                        "database {} holds fields of S3 objects adopted where they lie ({}), which FDB5's format cannot name: it stays in fieldstore's format",
                        db.id,
                        self.store.uri(db, o)
                    )));
                }
            }
        }
        let mut out = Vec::new();
        let fs = toc.file_system();
        // Each database's old files start going as soon as it is converted, beside the others'
        // conversions (unlinking large FDB5 indexes is a good part of the work).
        let old = std::sync::Mutex::new(crate::storage::toc::convert::OldCatalogues::default());
        let results = crate::storage::toc::convert::each_database(&dbs, |db| {
            let r = toc.convert_database(db, to, options)?;
            if let Ok(mut old) = old.lock() {
                old.remove_after(fs.clone(), &r, options.grace);
            }
            Ok(r)
        });
        let mut first_error = None;
        for (db, r) in dbs.into_iter().zip(results) {
            let r = match r {
                Ok(r) => r,
                Err(e) => {
                    // Those converted (before or beside it) are: their old files still go.
                    first_error.get_or_insert(e);
                    continue;
                }
            };
            // This handle's writers for it go: the next archive opens the new catalogue.
            if r.done {
                self.detach(&db)?;
            }
            out.push(super::results::ConvertElement {
                location: self.catalogue.location(&db),
                db: db.key,
                from: r.from.name().into(),
                to: r.to.name().into(),
                entries: r.entries,
                indexes: r.indexes,
                done: r.done,
            });
        }
        let finished = match old.into_inner() {
            Ok(old) => old.finish(),
            Err(_) => Err(crate::storage::StorageError::Config {
                detail: "a conversion thread panicked while scheduling removals".into(),
            }),
        };
        if let Some(e) = first_error {
            return Err(e.into());
        }
        finished?;
        Ok(out)
    }
}

impl LocalFdb {
    fn listing(
        &self,
        request: &Request,
        options: ListOptions,
        locks: LockRule,
    ) -> Result<ListIter, ApiError> {
        if !self.config.actions.list {
            return Err(ApiError::Invalid("list is disabled by this config".into()));
        }
        Ok(Box::new(self.walk(request, options, locks)?))
    }

    fn walk(
        &self,
        request: &Request,
        options: ListOptions,
        locks: LockRule,
    ) -> Result<Listing, ApiError> {
        let expansions = self.expand(request, ExpandMode::List)?;
        Ok(Listing::new(
            self.catalogue.clone(),
            self.store.clone(),
            expansions,
            options,
            locks,
        ))
    }

    fn feed(
        &self,
        request: &Request,
        start: &super::subscribe::Start,
        with_data: bool,
    ) -> Result<super::subscribe::SubscriptionBox, ApiError> {
        if !self.config.actions.list {
            return Err(ApiError::Invalid(
                "subscribe is disabled by this config (it lists: `list` is off)".into(),
            ));
        }
        let expansions = self.expand(request, ExpandMode::List)?;
        Ok(Box::new(super::feed::Feed::new(
            self.catalogue.clone(),
            self.store.clone(),
            expansions,
            start,
            with_data,
        )?))
    }

    /// Each space with what each of its roots holds, for a toc catalogue (`None` otherwise).
    pub fn tiers(&self) -> Option<Vec<(Space, Vec<RootUsage>)>> {
        self.toc.as_ref().map(|t| t.root_usage())
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod stream_tests;
