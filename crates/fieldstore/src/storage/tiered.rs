//! Buckets as tiers beside a toc catalogue's roots (docs/lifecycle.md).
//!
//! A space's roots may name buckets (`path: s3://BUCKET/PREFIX`). The toc catalogue never sees
//! those; this catalogue holds it and one S3 catalogue and store per bucket, and answers for all
//! of them, so every reader and writer of the config finds a database wherever it lies. A
//! database's id tells where it is: a directory for a root, `s3://BUCKET/PREFIX/NAME/GEN` for a
//! bucket (the S3 catalogue's own id behind the bucket's URI).
//!
//! While a move between a root and a bucket runs, a database may exist in both for a moment. The
//! rule that keeps every field seen exactly once: **a root's copy wins unless it is marked as
//! being left** (by a move into a bucket, after the bucket's copy was committed whole); then the
//! bucket's copy is the one. A move back from a bucket renames its root copy into place (which
//! then wins) before the bucket's copy is wiped. A root copy left for a bucket is dead for good:
//! it stays until it is retired (`tier_move.rs`), but no reader or writer ever picks it again,
//! even once the bucket's copy is wiped.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::catalogue::{
    Catalogue, CatalogueReader, CatalogueWriter, CheckFinding, CompactReport, DbStats, EntryIter,
    IndexSummary, PurgeReport,
};
use super::history::{ChangeWaiter, Commits, HistoryMark, PollingWaiter};
use super::s3::{S3Catalogue, S3Client, S3Store};
use super::store::{ObjectReader, Store, StoreWriter};
use super::toc::TocCatalogue;
use super::{CatalogueDump, DbRef, FieldRef, StorageError};
use crate::model::config::{Root, S3Config, Space};
use crate::model::Key;

/// Whether a configured root names a bucket rather than a directory.
pub fn is_bucket_root(path: &Path) -> bool {
    path.to_str().is_some_and(|s| s.starts_with("s3://"))
}

/// `s3://BUCKET/PREFIX` as (bucket, prefix ending in `/` or empty); `None` if malformed.
pub fn parse_bucket_uri(uri: &str) -> Option<(String, String)> {
    let rest = uri.strip_prefix("s3://")?;
    let (bucket, prefix) = match rest.split_once('/') {
        Some((b, p)) => (b, p.trim_matches('/')),
        None => (rest, ""),
    };
    if bucket.is_empty() {
        return None;
    }
    let prefix = if prefix.is_empty() {
        String::new()
    } else {
        format!("{prefix}/")
    };
    Some((bucket.to_string(), prefix))
}

/// The canonical form of a bucket URI: `s3://BUCKET/` or `s3://BUCKET/PREFIX/`.
pub fn canonical_bucket_uri(uri: &str) -> Option<String> {
    parse_bucket_uri(uri).map(|(b, p)| format!("s3://{b}/{p}"))
}

/// How often a bucket's bytes are counted (one LIST of its prefix).
const USAGE_INTERVAL: Duration = Duration::from_secs(2);

/// One bucket tier: its limits (a root's keys) and its own S3 catalogue and store.
pub struct BucketTier {
    /// `s3://BUCKET/PREFIX/`, the start of every id of a database it holds.
    pub uri: String,
    pub root: Root,
    pub(crate) catalogue: S3Catalogue,
    pub(crate) store: S3Store,
    pub(crate) client: S3Client,
    usage: Mutex<Option<(Instant, u64)>>,
}

impl BucketTier {
    /// Connects to the bucket a root names, with the server and credentials of the config's
    /// `s3:` section.
    pub fn connect(root: &Root, base: &S3Config) -> Result<BucketTier, StorageError> {
        let raw = root.path.display().to_string();
        let (bucket, prefix) = parse_bucket_uri(&raw).ok_or_else(|| StorageError::Config {
            detail: format!("root {raw} is not a bucket URI like s3://BUCKET/PREFIX"),
        })?;
        let mut cfg = base.clone();
        cfg.bucket = bucket.clone();
        cfg.prefix = (!prefix.is_empty()).then(|| prefix.clone());
        let client = S3Client::connect(&cfg)?;
        Ok(BucketTier {
            uri: format!("s3://{bucket}/{prefix}"),
            root: root.clone(),
            catalogue: S3Catalogue::new(client.clone()),
            store: S3Store::new(client.clone()),
            client,
            usage: Mutex::new(None),
        })
    }

    /// The database as this bucket's S3 catalogue names it.
    pub(crate) fn inner(&self, db: &DbRef) -> Option<DbRef> {
        db.id.strip_prefix(&self.uri).map(|id| DbRef {
            key: db.key.clone(),
            id: id.to_string(),
        })
    }

    pub(crate) fn outer(&self, db: DbRef) -> DbRef {
        DbRef {
            id: format!("{}{}", self.uri, db.id),
            key: db.key,
        }
    }

    /// Bytes of every object under the bucket's prefix, counted at most every 2 seconds.
    pub fn used_bytes(&self) -> Result<u64, StorageError> {
        if let Ok(u) = self.usage.lock() {
            if let Some((at, bytes)) = *u {
                if at.elapsed() < USAGE_INTERVAL {
                    return Ok(bytes);
                }
            }
        }
        let mut total = 0u64;
        for o in self.client.list("") {
            total += o?.size;
        }
        if let Ok(mut u) = self.usage.lock() {
            *u = Some((Instant::now(), total));
        }
        Ok(total)
    }

    pub(crate) fn forget_usage(&self) {
        if let Ok(mut u) = self.usage.lock() {
            *u = None;
        }
    }

    /// Why this bucket takes no new database `db` today, if it does not.
    fn refuses(&self, db: &Key, today: chrono::NaiveDate) -> Result<Option<String>, StorageError> {
        if !self.root.archive {
            return Ok(Some("archive disabled".into()));
        }
        if let (Some(max), Some(age)) = (
            self.root.max_age_days,
            super::toc::placement::age_days(db, today),
        ) {
            if age > i64::from(max) {
                return Ok(Some(format!("database {age} days old, max_age {max}d")));
            }
        }
        if let Some(cap) = self.root.capacity {
            let used = self.used_bytes()?;
            if used >= cap {
                return Ok(Some(format!("holds {used} bytes, capacity {cap}")));
            }
            if let Some(fill) = self.root.max_fill {
                if used.saturating_mul(100) >= cap.saturating_mul(u64::from(fill)) {
                    return Ok(Some(format!(
                        "holds {used} bytes, max_fill {fill}% of capacity {cap}"
                    )));
                }
            }
        }
        Ok(None)
    }
}

/// A space's regex and its bucket tiers, in config order.
struct BucketSpace {
    regex: crate::model::config::SpaceMatcher,
    tiers: Vec<usize>,
}

/// The toc catalogue of a config's roots, and its buckets, answering as one catalogue.
pub struct TieredCatalogue {
    pub(crate) toc: Arc<TocCatalogue>,
    pub(crate) buckets: Arc<Vec<Arc<BucketTier>>>,
    spaces: Vec<BucketSpace>,
}

impl TieredCatalogue {
    /// Connects to every bucket the spaces name (`s3` gives server and credentials).
    pub fn new(
        toc: Arc<TocCatalogue>,
        spaces: &[Space],
        s3: Option<&S3Config>,
    ) -> Result<TieredCatalogue, StorageError> {
        let mut buckets: Vec<Arc<BucketTier>> = Vec::new();
        let mut out = Vec::new();
        for s in spaces {
            let regex = crate::model::config::SpaceMatcher::new(&s.regex).map_err(|e| {
                StorageError::Config {
                    detail: format!("space regex '{}': {e}", s.regex),
                }
            })?;
            let mut tiers = Vec::new();
            for r in s.roots.iter().filter(|r| is_bucket_root(&r.path)) {
                let uri = canonical_bucket_uri(&r.path.display().to_string());
                let i = match buckets.iter().position(|b| Some(&b.uri) == uri.as_ref()) {
                    Some(i) => i,
                    None => {
                        let base = s3.ok_or_else(|| StorageError::Config {
                            detail: format!(
                                "root {} is a bucket: the config needs an s3: section naming the server (s3: {{endpoint: http://host:9000}})",
                                r.path.display()
                            ),
                        })?;
                        buckets.push(Arc::new(BucketTier::connect(r, base)?));
                        buckets.len() - 1
                    }
                };
                tiers.push(i);
            }
            out.push(BucketSpace { regex, tiers });
        }
        Ok(TieredCatalogue {
            toc,
            buckets: Arc::new(buckets),
            spaces: out,
        })
    }

    pub fn buckets(&self) -> &[Arc<BucketTier>] {
        &self.buckets
    }

    /// The bucket tier holding `db`, with its id there.
    pub(crate) fn split(&self, db: &DbRef) -> Option<(&Arc<BucketTier>, DbRef)> {
        split(&self.buckets, db)
    }

    /// The configured bucket tier at this URI.
    pub fn bucket(&self, uri: &str) -> Option<&Arc<BucketTier>> {
        let uri = canonical_bucket_uri(uri)?;
        self.buckets.iter().find(|b| b.uri == uri)
    }

    /// When a bucket's database last changed: its newest catalogue object. `None` for a
    /// database in a root.
    pub fn last_change(&self, db: &DbRef) -> Option<std::time::SystemTime> {
        let (b, inner) = self.split(db)?;
        b.client
            .list(&format!("db/{}/", inner.id))
            .filter_map(Result::ok)
            .map(|o| o.last_modified)
            .max()
    }

    /// The bucket tiers of the database's space (the first whose regex matches), in order.
    pub(crate) fn space_buckets(&self, db: &Key) -> Vec<&Arc<BucketTier>> {
        let fp = db.fingerprint();
        self.spaces
            .iter()
            .find(|s| s.regex.is_match(&fp))
            .map(|s| {
                s.tiers
                    .iter()
                    .filter_map(|&i| self.buckets.get(i))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// The root's copy of the database, if there is one and no move is leaving it.
    pub(crate) fn toc_wins(&self, db: &DbRef) -> bool {
        !super::toc::relocate::being_left(&*self.toc.file_system(), Path::new(&db.id))
    }

    /// The bucket copy of a database, the first bucket in config order that holds it.
    pub(crate) fn find_in_buckets(&self, key: &Key) -> Result<Option<DbRef>, StorageError> {
        for b in self.buckets.iter() {
            if let Some(inner) = b.catalogue.find(key)? {
                return Ok(Some(b.outer(inner)));
            }
        }
        Ok(None)
    }

    fn place_in_bucket(
        &self,
        db: &Key,
        schema_text: &str,
        creator: Option<&str>,
        toc_said: StorageError,
    ) -> Result<DbRef, StorageError> {
        let today = chrono::Utc::now().date_naive();
        let mut why = Vec::new();
        for b in self.space_buckets(db) {
            match b.refuses(db, today)? {
                Some(w) => why.push(format!("{} ({w})", b.uri)),
                None => {
                    let inner = b.catalogue.create_by(db, schema_text, creator)?;
                    b.forget_usage();
                    return Ok(b.outer(inner));
                }
            }
        }
        if why.is_empty() {
            return Err(toc_said);
        }
        let roots = match toc_said {
            StorageError::NoWritableRoot { roots, .. } => format!("{roots}, "),
            _ => String::new(),
        };
        Err(StorageError::NoWritableRoot {
            db: db.to_string(),
            roots: format!("{roots}{}", why.join(", ")),
        })
    }
}

fn split<'a>(buckets: &'a [Arc<BucketTier>], db: &DbRef) -> Option<(&'a Arc<BucketTier>, DbRef)> {
    if !db.id.starts_with("s3://") {
        return None;
    }
    buckets
        .iter()
        .find_map(|b| b.inner(db).map(|inner| (b, inner)))
}

/// An S3 catalogue's reader, naming the database by its id in the tiered catalogue.
struct Outer {
    db: DbRef,
    inner: Box<dyn CatalogueReader>,
}

impl CatalogueReader for Outer {
    fn db(&self) -> &DbRef {
        &self.db
    }
    fn indexes(&self) -> &[IndexSummary] {
        self.inner.indexes()
    }
    fn lookup(&self, index: &Key, datum: &Key) -> Result<Option<FieldRef>, StorageError> {
        self.inner.lookup(index, datum)
    }
    fn entries(&self, i: usize, include_masked: bool) -> Result<EntryIter<'static>, StorageError> {
        self.inner.entries(i, include_masked)
    }
}

/// Calls `$m` on the bucket's catalogue (with its own id) or on the toc catalogue.
macro_rules! dispatch {
    ($self:ident, $db:ident, $m:ident ( $($a:expr),* )) => {
        match $self.split($db) {
            Some((b, inner)) => b.catalogue.$m(&inner $(, $a)*),
            None => $self.toc.$m($db $(, $a)*),
        }
    };
}

impl Catalogue for TieredCatalogue {
    fn kind(&self) -> &'static str {
        "toc"
    }

    /// The roots' record: a config of roots and buckets has its first root.
    fn check_keys_release(
        &self,
        reader: crate::storage::keys_release::KeysReader,
        version: &str,
    ) -> Result<(), StorageError> {
        self.toc.check_keys_release(reader, version)
    }

    /// Each database once: a root's copy unless a move is leaving it for a bucket's.
    fn databases(&self) -> Vec<Result<DbRef, StorageError>> {
        let mut out = Vec::new();
        let mut in_toc: HashMap<String, (usize, bool)> = HashMap::new();
        for r in self.toc.databases() {
            if let Ok(db) = &r {
                if !self.toc_wins(db) && super::toc::relocate::left_for_bucket(Path::new(&db.id)) {
                    continue;
                }
                in_toc.insert(db.key.sorted().to_string(), (out.len(), self.toc_wins(db)));
            }
            out.push(Some(r));
        }
        let mut seen: BTreeSet<String> = BTreeSet::new();
        for b in self.buckets.iter() {
            for r in b.catalogue.databases() {
                match r {
                    Err(e) => out.push(Some(Err(e))),
                    Ok(inner) => {
                        let name = inner.key.sorted().to_string();
                        if !seen.insert(name.clone()) {
                            continue;
                        }
                        match in_toc.get(&name) {
                            Some((_, true)) => continue,
                            Some((i, false)) => {
                                if let Some(slot) = out.get_mut(*i) {
                                    *slot = None;
                                }
                            }
                            None => {}
                        }
                        out.push(Some(Ok(b.outer(inner))));
                    }
                }
            }
        }
        out.into_iter().flatten().collect()
    }

    fn find(&self, db: &Key) -> Result<Option<DbRef>, StorageError> {
        let t = self.toc.find(db)?;
        if let Some(d) = &t {
            if self.toc_wins(d) || self.buckets.is_empty() {
                return Ok(t);
            }
        }
        match self.find_in_buckets(db)? {
            Some(b) => Ok(Some(b)),
            None => Ok(t.filter(|d| !super::toc::relocate::left_for_bucket(Path::new(&d.id)))),
        }
    }

    /// An existing copy wins (so writers go on into a database's new place after a move);
    /// else the roots, in the toc catalogue's order and limits; else the space's buckets.
    fn create_by(
        &self,
        db: &Key,
        schema_text: &str,
        creator: Option<&str>,
    ) -> Result<DbRef, StorageError> {
        match self.find(db)? {
            Some(found) if self.split(&found).is_some() => return Ok(found),
            Some(_) => {}
            // A dead copy left for a bucket whose copy is gone must not take the new fields.
            None => self.retire_copies_of(db)?,
        }
        match self.toc.create_by(db, schema_text, creator) {
            Err(e @ StorageError::NoWritableRoot { .. }) => {
                self.place_in_bucket(db, schema_text, creator, e)
            }
            other => other,
        }
    }

    fn db_format(&self, db: &DbRef) -> Option<&'static str> {
        dispatch!(self, db, db_format())
    }

    fn creator(&self, db: &DbRef) -> Result<Option<String>, StorageError> {
        dispatch!(self, db, creator())
    }

    fn writer(&self, db: &DbRef) -> Result<Box<dyn CatalogueWriter>, StorageError> {
        dispatch!(self, db, writer())
    }

    fn reader(&self, db: &DbRef) -> Result<Box<dyn CatalogueReader>, StorageError> {
        match self.split(db) {
            Some((b, inner)) => Ok(Box::new(Outer {
                db: db.clone(),
                inner: b.catalogue.reader(&inner)?,
            })),
            None => self.toc.reader(db),
        }
    }

    fn is_locked(&self, db: &DbRef, action: &str) -> Result<bool, StorageError> {
        dispatch!(self, db, is_locked(action))
    }

    fn set_locked(&self, db: &DbRef, action: &str, locked: bool) -> Result<(), StorageError> {
        dispatch!(self, db, set_locked(action, locked))
    }

    fn may_change(&self, db: &DbRef, action: &'static str) -> Result<(), StorageError> {
        dispatch!(self, db, may_change(action))
    }

    /// A bucket copy's dead root copies go first: left behind, they would be all there is of
    /// the database.
    fn wipe(&self, db: &DbRef, doit: bool) -> Result<Vec<String>, StorageError> {
        if doit && self.split(db).is_some() {
            self.retire_copies_of(&db.key)?;
        }
        dispatch!(self, db, wipe(doit))
    }

    fn finish_wipe(&self, db: &DbRef) -> Result<(), StorageError> {
        dispatch!(self, db, finish_wipe())
    }

    fn purge(&self, db: &DbRef, doit: bool) -> Result<PurgeReport, StorageError> {
        dispatch!(self, db, purge(doit))
    }

    fn objects(&self, db: &DbRef) -> Result<BTreeSet<String>, StorageError> {
        dispatch!(self, db, objects())
    }

    fn stats(&self, db: &DbRef) -> Result<DbStats, StorageError> {
        dispatch!(self, db, stats())
    }

    fn dump(&self, db: &DbRef) -> Result<CatalogueDump, StorageError> {
        dispatch!(self, db, dump())
    }

    fn compact(&self, db: &DbRef) -> Result<CompactReport, StorageError> {
        dispatch!(self, db, compact())
    }

    fn check(&self, db: &DbRef) -> Result<Vec<CheckFinding>, StorageError> {
        dispatch!(self, db, check())
    }

    fn history_mark(&self, db: &DbRef) -> Result<HistoryMark, StorageError> {
        dispatch!(self, db, history_mark())
    }

    fn commits(
        &self,
        db: &DbRef,
        epoch: &str,
        from: u64,
        max: usize,
    ) -> Result<Commits, StorageError> {
        dispatch!(self, db, commits(epoch, from, max))
    }

    /// Buckets tell nobody of changes: with any, subscribers look again every 100 ms.
    fn change_waiter(&self) -> Result<Box<dyn ChangeWaiter>, StorageError> {
        if self.buckets.is_empty() {
            return self.toc.change_waiter();
        }
        Ok(Box::new(PollingWaiter {
            interval: Duration::from_millis(100),
        }))
    }
}

/// The store of a tiered catalogue: the roots' files, or a bucket's objects, by database.
pub struct TieredStore {
    files: Arc<dyn Store>,
    buckets: Arc<Vec<Arc<BucketTier>>>,
}

impl TieredStore {
    pub fn new(files: Arc<dyn Store>, catalogue: &TieredCatalogue) -> TieredStore {
        TieredStore {
            files,
            buckets: catalogue.buckets.clone(),
        }
    }
}

macro_rules! on_store {
    ($self:ident, $db:ident, $m:ident ( $($a:expr),* )) => {
        match split(&$self.buckets, $db) {
            Some((b, inner)) => b.store.$m(&inner $(, $a)*),
            None => $self.files.$m($db $(, $a)*),
        }
    };
}

impl Store for TieredStore {
    fn kind(&self) -> &'static str {
        self.files.kind()
    }
    fn writer(&self, db: &DbRef) -> Result<Box<dyn StoreWriter>, StorageError> {
        on_store!(self, db, writer())
    }
    fn read(&self, db: &DbRef, field: &FieldRef) -> Result<Vec<u8>, StorageError> {
        on_store!(self, db, read(field))
    }
    fn open_object(&self, db: &DbRef, object: &str) -> Result<Box<dyn ObjectReader>, StorageError> {
        on_store!(self, db, open_object(object))
    }
    fn uri(&self, db: &DbRef, object: &str) -> String {
        on_store!(self, db, uri(object))
    }
    fn wipe(&self, db: &DbRef, doit: bool) -> Result<Vec<String>, StorageError> {
        on_store!(self, db, wipe(doit))
    }
    fn remove(&self, db: &DbRef, objects: &[String]) -> Result<(), StorageError> {
        on_store!(self, db, remove(objects))
    }
    fn object_size(&self, db: &DbRef, object: &str) -> Option<u64> {
        on_store!(self, db, object_size(object))
    }
    fn side_entries(
        &self,
        db: &DbRef,
        object: &str,
    ) -> Result<super::store::SideMap, StorageError> {
        on_store!(self, db, side_entries(object))
    }
    fn add_side_entries(
        &self,
        db: &DbRef,
        object: &str,
        entries: &[super::sidecar::SideEntry],
    ) -> Result<(), StorageError> {
        on_store!(self, db, add_side_entries(object, entries))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_uris_are_read_and_made_canonical() {
        assert_eq!(
            parse_bucket_uri("s3://b1/a/b/"),
            Some(("b1".into(), "a/b/".into()))
        );
        assert_eq!(
            parse_bucket_uri("s3://b1"),
            Some(("b1".into(), String::new()))
        );
        assert_eq!(parse_bucket_uri("s3:///x"), None);
        assert_eq!(parse_bucket_uri("/data"), None);
        assert_eq!(
            canonical_bucket_uri("s3://b1/p").as_deref(),
            Some("s3://b1/p/")
        );
        assert!(is_bucket_root(Path::new("s3://b1/p")));
        assert!(!is_bucket_root(Path::new("/s3/b1")));
    }
}
