//! A small synchronous S3 client: what the S3 catalogue and store need, no more.
//!
//! Why `ureq` + `rusty-s3`: fieldstore's core is synchronous threads, and no async runtime may
//! leak into its API or hide inside it. `aws-sdk-s3` and `object_store` are async and need tokio;
//! `rust-s3` is async-first too (its sync mode is a feature flag over a different HTTP stack, with
//! a large dependency tree). `ureq` 3 is a small blocking HTTP client with connection pooling on
//! the workspace's TLS stack (rustls with ring); `rusty-s3` is sans-IO: SigV4 signing, request
//! URLs and the XML of ListObjectsV2, DeleteObjects and multipart uploads, tested upstream
//! against MinIO. Requests are presigned (query-string SigV4); headers such as `If-None-Match`
//! and `Range` travel unsigned, which S3 and MinIO accept.
//!
//! Correctness rests on create-only PUTs (`If-None-Match: *`): [`S3Client::connect`] probes that
//! the server honours them and refuses one that does not (unless the config allows it).
//!
//! Additions to the interface of issue 16: [`S3Client::prefix`], [`S3Client::endpoint`],
//! [`Multipart`]'s `put_part(&self, ..) -> Part` (by shared reference, so parts can go out on
//! several threads) and `complete(self, &[Part])`, [`Part`], `S3Config::ca_bundle`.

use std::collections::{HashMap, VecDeque};
use std::io::Read;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime};

use rusty_s3::actions::{ListObjectsV2, S3Action};
use rusty_s3::{Bucket, Credentials, UrlStyle};
use ureq::http::Response;
use ureq::Body;

use super::credentials;
use crate::model::config::S3Config;
use crate::storage::StorageError;

/// How old a conditional-write probe must be before another process may take it for one a
/// killed process left (a probe lives for the milliseconds of its two PUTs).
const STALE_PROBE_AGE: Duration = Duration::from_secs(60);

/// How long a presigned request stays valid: longer than any one request with its retries.
const SIGN_FOR: Duration = Duration::from_secs(3600);

/// Capped exponential backoff for transient failures, bounded in total time so a dead server
/// is reported, not waited for.
#[derive(Debug, Clone, Copy)]
struct Backoff {
    attempts: u32,
    /// Connection refused or name not resolved: a server that is down, so fewer attempts.
    connect_attempts: u32,
    first: Duration,
    cap: Duration,
    budget: Duration,
}

const BACKOFF: Backoff = Backoff {
    attempts: 10,
    connect_attempts: 4,
    first: Duration::from_millis(50),
    cap: Duration::from_secs(2),
    budget: Duration::from_secs(30),
};

/// What [`S3Client::create`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Created {
    /// Our body is the object (perhaps through an earlier attempt whose answer was lost).
    New,
    /// Someone else's object was there: its bytes.
    Existed(Vec<u8>),
}

/// One object of a listing or a HEAD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectMeta {
    /// Relative to the client's prefix.
    pub key: String,
    pub size: u64,
    pub last_modified: SystemTime,
    /// As the server gives it, quotes included (`"9b2cf5..."`, `"...-3"` for a multipart
    /// upload): what `If-Match` compares against, so an adopted object can be told from
    /// another one written under its key (`None` when the server sent none).
    pub etag: Option<String>,
}

/// Counters since the client was connected (shared by its clones).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// HTTP requests sent, retries included.
    pub requests: u64,
    pub retries: u64,
    /// Create-only PUTs refused because another writer's object was there.
    pub conflicts: u64,
    /// Create-only PUTs refused by our own earlier attempt (a lost answer).
    pub self_conflicts: u64,
    pub bytes_up: u64,
    pub bytes_down: u64,
}

#[derive(Default)]
struct Counters {
    requests: AtomicU64,
    retries: AtomicU64,
    conflicts: AtomicU64,
    self_conflicts: AtomicU64,
    bytes_up: AtomicU64,
    bytes_down: AtomicU64,
}

impl Counters {
    fn snapshot(&self) -> ClientStats {
        ClientStats {
            requests: self.requests.load(Ordering::Relaxed),
            retries: self.retries.load(Ordering::Relaxed),
            conflicts: self.conflicts.load(Ordering::Relaxed),
            self_conflicts: self.self_conflicts.load(Ordering::Relaxed),
            bytes_up: self.bytes_up.load(Ordering::Relaxed),
            bytes_down: self.bytes_down.load(Ordering::Relaxed),
        }
    }
}

/// The counters of every client this process connected, kept after the clients are dropped, so
/// a command can report what all its requests did ([`process_stats`]).
static PROCESS: std::sync::Mutex<Vec<Arc<Counters>>> = std::sync::Mutex::new(Vec::new());

fn register() -> Arc<Counters> {
    let c = Arc::new(Counters::default());
    if let Ok(mut all) = PROCESS.lock() {
        all.push(c.clone());
    }
    c
}

/// The sum of [`S3Client::stats`] over every client this process connected.
pub fn process_stats() -> ClientStats {
    let all = PROCESS.lock().map(|a| a.clone()).unwrap_or_default();
    all.iter().fold(ClientStats::default(), |t, c| {
        let s = c.snapshot();
        ClientStats {
            requests: t.requests + s.requests,
            retries: t.retries + s.retries,
            conflicts: t.conflicts + s.conflicts,
            self_conflicts: t.self_conflicts + s.self_conflicts,
            bytes_up: t.bytes_up + s.bytes_up,
            bytes_down: t.bytes_down + s.bytes_down,
        }
    })
}

/// A connection to one bucket under one prefix. Cheap to clone; clones share the connection
/// pool and the counters.
#[derive(Clone)]
pub struct S3Client {
    inner: Arc<Inner>,
}

struct Inner {
    agent: ureq::Agent,
    bucket: Bucket,
    creds: Credentials,
    creds_source: String,
    endpoint: String,
    prefix: String,
    grace: Duration,
    backoff: Backoff,
    stats: Arc<Counters>,
}

impl std::fmt::Debug for S3Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "S3Client({})", self.describe())
    }
}

/// Why one attempt failed: worth another try, or final.
enum Fail {
    Retry {
        status: Option<u16>,
        detail: String,
        connect: bool,
    },
    Fatal(StorageError),
}

/// Where a successful probe leaves its answer for other processes (`known_conditional`):
/// beside the probes, outside every catalogue's and store's keys.
pub const PROBED_MARKER: &str = ".fieldstore-probed";

/// How long a probe's answer is trusted by other processes.
const PROBED_FOR: Duration = Duration::from_secs(24 * 3600);

/// The marker's text: the endpoint probed, then when (seconds since the epoch).
pub fn probed_marker(endpoint: &str, at: SystemTime) -> String {
    let secs = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    format!("{endpoint}\n{secs}\n")
}

/// Whether a marker names `endpoint` and was written less than [`PROBED_FOR`] before `now` (and
/// not in its future by more than clocks drift).
fn marker_is_fresh(marker: &[u8], endpoint: &str, now: SystemTime) -> bool {
    let Ok(text) = std::str::from_utf8(marker) else {
        return false;
    };
    let mut lines = text.lines();
    let (Some(e), Some(secs)) = (lines.next(), lines.next()) else {
        return false;
    };
    let Ok(secs) = secs.parse::<u64>() else {
        return false;
    };
    let at = SystemTime::UNIX_EPOCH + Duration::from_secs(secs);
    let age_ok = match now.duration_since(at) {
        Ok(age) => age < PROBED_FOR,
        Err(ahead) => ahead.duration() < Duration::from_secs(300),
    };
    e == endpoint && age_ok
}

/// Per process: endpoints and buckets whose conditional create was probed, and the answer.
fn probed() -> &'static Mutex<HashMap<(String, String), bool>> {
    static PROBED: OnceLock<Mutex<HashMap<(String, String), bool>>> = OnceLock::new();
    PROBED.get_or_init(Default::default)
}

impl S3Client {
    /// Resolves credentials, checks (or creates) the bucket and probes conditional create.
    pub fn connect(cfg: &S3Config) -> Result<S3Client, StorageError> {
        let keys = credentials::resolve(cfg)?;
        let client = S3Client::with_keys(cfg, keys)?;
        if client.known_conditional() {
            return Ok(client);
        }
        client.ensure_bucket(cfg.create_bucket)?;
        client.probe_conditional_create(cfg.allow_unconditional_writes)?;
        Ok(client)
    }

    /// Whether this endpoint was seen to honour create-only PUTs on this bucket recently: by
    /// this process, or by any process whose marker (written after its probe) names this
    /// endpoint and is less than a day old. One GET instead of the bucket check and the probe's
    /// five requests: a tenth of a small database's move into a bucket went there. The marker
    /// names the endpoint because the answer belongs to the path (a proxy that drops
    /// `If-None-Match` in front of a server that honours it answers otherwise).
    fn known_conditional(&self) -> bool {
        let id = (
            self.inner.endpoint.clone(),
            self.inner.bucket.name().to_string(),
        );
        if let Some(known) = probed().lock().ok().and_then(|m| m.get(&id).copied()) {
            return known;
        }
        // Any failure (no bucket yet, no permission, an old marker) means: probe.
        let fresh = self
            .get(PROBED_MARKER)
            .ok()
            .flatten()
            .is_some_and(|b| marker_is_fresh(&b, &self.inner.endpoint, SystemTime::now()));
        if fresh {
            if let Ok(mut m) = probed().lock() {
                m.insert(id, true);
            }
        }
        fresh
    }

    /// A client that only reads objects someone else owns (objects adopted where they lie,
    /// docs/adopt.md): credentials are resolved as for [`S3Client::connect`], but no request
    /// is sent. The bucket is neither checked nor created and no probe object is written,
    /// since the user's credentials may allow reading the bucket and nothing more.
    pub fn for_reading(cfg: &S3Config) -> Result<S3Client, StorageError> {
        let keys = credentials::resolve(cfg)?;
        S3Client::with_keys(cfg, keys)
    }

    fn with_keys(cfg: &S3Config, keys: credentials::Keys) -> Result<S3Client, StorageError> {
        let config_err = |detail: String| StorageError::Config { detail };
        let url = url::Url::parse(&format!("{}/", cfg.endpoint.trim_end_matches('/')))
            .map_err(|e| config_err(format!("s3.endpoint '{}': {e}", cfg.endpoint)))?;
        let region = cfg
            .region
            .clone()
            .unwrap_or_else(|| S3Config::DEFAULT_REGION.into());
        let bucket = Bucket::new(url, UrlStyle::Path, cfg.bucket.clone(), region)
            .map_err(|e| config_err(format!("s3.endpoint '{}': {e}", cfg.endpoint)))?;
        let creds = match &keys.session_token {
            Some(t) => Credentials::new_with_token(
                keys.access_key_id.clone(),
                keys.secret_access_key.clone(),
                t.clone(),
            ),
            None => Credentials::new(keys.access_key_id.clone(), keys.secret_access_key.clone()),
        };
        let agent = ureq::Agent::new_with_config(
            ureq::Agent::config_builder()
                .http_status_as_error(false)
                .timeout_connect(Some(Duration::from_secs(5)))
                .timeout_recv_response(Some(Duration::from_secs(120)))
                .timeout_per_read(Some(Duration::from_secs(120)))
                .timeout_per_write(Some(Duration::from_secs(120)))
                .max_idle_connections(32)
                .max_idle_connections_per_host(32)
                .tls_config(tls_config(cfg)?)
                .user_agent(format!("fieldstore/{}", env!("CARGO_PKG_VERSION")))
                .build(),
        );
        Ok(S3Client {
            inner: Arc::new(Inner {
                agent,
                bucket,
                creds,
                creds_source: keys.source,
                endpoint: cfg.endpoint.trim_end_matches('/').to_string(),
                prefix: cfg.prefix.clone().unwrap_or_default(),
                grace: cfg.grace,
                backoff: BACKOFF,
                stats: register(),
            }),
        })
    }

    /// `s3://bucket/prefix at http://host:port`.
    pub fn describe(&self) -> String {
        format!("{} at {}", self.uri(""), self.inner.endpoint)
    }

    /// `s3://bucket/prefix<key>`.
    pub fn uri(&self, key: &str) -> String {
        format!(
            "s3://{}/{}{key}",
            self.inner.bucket.name(),
            self.inner.prefix
        )
    }

    /// The prefix every key lives under (`ops/`, or empty).
    pub fn prefix(&self) -> &str {
        &self.inner.prefix
    }

    /// `http(s)://host:port`.
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    pub fn grace(&self) -> Duration {
        self.inner.grace
    }

    pub fn stats(&self) -> ClientStats {
        self.inner.stats.snapshot()
    }

    pub fn put(&self, key: &str, body: &[u8]) -> Result<(), StorageError> {
        let url = self.object_url(key, ObjectOp::Put)?;
        self.run("put", key, || {
            let resp = self.send(self.inner.agent.put(url.as_str()).send(body), Some(body))?;
            self.expect_ok(resp, "put", key, &[200])
        })
    }

    /// Create-only PUT (`If-None-Match: *`). On 412 it GETs the object: equal bytes mean our own
    /// earlier attempt landed (a retried request whose answer was lost), so [`Created::New`];
    /// else [`Created::Existed`] with the object's bytes. Callers make bodies unique (a stamp:
    /// writer id + nonce) so that check is sound.
    pub fn create(&self, key: &str, body: &[u8]) -> Result<Created, StorageError> {
        // An object seen by the 412 but gone by the GET (deleted in between): try again, a few
        // times, rather than report a conflict with nothing.
        for _ in 0..3 {
            if self.put_if_absent("create", key, body)? {
                return Ok(Created::New);
            }
            match self.get(key)? {
                Some(found) if found == body => {
                    self.inner
                        .stats
                        .self_conflicts
                        .fetch_add(1, Ordering::Relaxed);
                    return Ok(Created::New);
                }
                Some(found) => {
                    self.inner.stats.conflicts.fetch_add(1, Ordering::Relaxed);
                    return Ok(Created::Existed(found));
                }
                None => continue,
            }
        }
        Err(self.error(
            "create",
            key,
            Some(412),
            "the object exists at each try but is gone when read (another writer keeps creating and deleting it)".into(),
        ))
    }

    /// One create-only PUT: `true` when it made the object, `false` on 412.
    fn put_if_absent(
        &self,
        op: &'static str,
        key: &str,
        body: &[u8],
    ) -> Result<bool, StorageError> {
        let url = self.object_url(key, ObjectOp::Put)?;
        self.run(op, key, || {
            let req = self
                .inner
                .agent
                .put(url.as_str())
                .header("If-None-Match", "*");
            let resp = self.send(req.send(body), Some(body))?;
            match resp.status().as_u16() {
                412 => {
                    drain(resp);
                    Ok(false)
                }
                // MinIO: two conditional writes of one key racing; the loser may retry.
                409 => Err(self.retry_with_body(resp)),
                _ => self.expect_ok(resp, op, key, &[200]).map(|()| true),
            }
        })
    }

    /// The whole object; `None` when there is none.
    pub fn get(&self, key: &str) -> Result<Option<Vec<u8>>, StorageError> {
        let url = self.object_url(key, ObjectOp::Get)?;
        self.run("get", key, || {
            let resp = self.send(self.inner.agent.get(url.as_str()).call(), None)?;
            match resp.status().as_u16() {
                404 => {
                    drain(resp);
                    Ok(None)
                }
                200 => self.read_body(resp).map(Some),
                _ => Err(self.fatal(resp, "get", key)),
            }
        })
    }

    /// Reads up to `buf.len()` bytes at `offset`; fewer only at the object's end (0 past it).
    pub fn get_range(&self, key: &str, offset: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
        self.get_range_matching(key, offset, buf, None)
    }

    /// As [`S3Client::get_range`], but only from the object whose ETag is `if_match` (sent as
    /// `If-Match`): the server compares and reads in one step, so the bytes can never come from
    /// another object written under the key meanwhile. Another ETag is an error with status
    /// 412, no object one with status 404.
    pub fn get_range_matching(
        &self,
        key: &str,
        offset: u64,
        buf: &mut [u8],
        if_match: Option<&str>,
    ) -> Result<usize, StorageError> {
        if buf.is_empty() {
            return Ok(0);
        }
        let url = self.object_url(key, ObjectOp::Get)?;
        let last = offset.saturating_add(buf.len() as u64 - 1);
        self.run("get_range", key, || {
            let mut req = self
                .inner
                .agent
                .get(url.as_str())
                .header("Range", format!("bytes={offset}-{last}"));
            if let Some(etag) = if_match {
                req = req.header("If-Match", etag);
            }
            let resp = self.send(req.call(), None)?;
            match resp.status().as_u16() {
                416 => {
                    drain(resp);
                    Ok(0)
                }
                206 => self.read_into(resp, buf),
                // A server that ignores Range sends the whole object: take our part of it.
                200 => {
                    let all = self.read_body(resp)?;
                    let start = usize::try_from(offset).unwrap_or(usize::MAX).min(all.len());
                    let n = (all.len() - start).min(buf.len());
                    buf[..n].copy_from_slice(&all[start..start + n]);
                    Ok(n)
                }
                _ => Err(self.fatal(resp, "get_range", key)),
            }
        })
    }

    pub fn head(&self, key: &str) -> Result<Option<ObjectMeta>, StorageError> {
        let url = self.object_url(key, ObjectOp::Head)?;
        self.run("head", key, || {
            let resp = self.send(self.inner.agent.head(url.as_str()).call(), None)?;
            match resp.status().as_u16() {
                404 => Ok(None),
                200 => {
                    let size = header(&resp, "content-length")
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    let last_modified = header(&resp, "last-modified")
                        .and_then(|v| parse_http_date(&v))
                        .unwrap_or(SystemTime::UNIX_EPOCH);
                    Ok(Some(ObjectMeta {
                        key: key.to_string(),
                        size,
                        last_modified,
                        etag: header(&resp, "etag"),
                    }))
                }
                _ => Err(self.fatal(resp, "head", key)),
            }
        })
    }

    /// Objects whose keys start with `prefix`, in ascending key order, fetched a page (1000)
    /// at a time as the iterator is consumed.
    pub fn list(&self, prefix: &str) -> ObjectList {
        ObjectList::new(self.clone(), prefix, None)
    }

    /// As [`S3Client::list`], from the first key after `start_after`.
    pub fn list_after(&self, prefix: &str, start_after: &str) -> ObjectList {
        ObjectList::new(self.clone(), prefix, Some(start_after))
    }

    /// The "directories" right under `prefix` (common prefixes with delimiter `/`), each
    /// relative to the client's prefix and ending in `/`.
    pub fn list_dirs(&self, prefix: &str) -> Result<Vec<String>, StorageError> {
        let mut dirs = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = self.list_page(prefix, None, token.as_deref(), Some("/"))?;
            for p in page.common_prefixes {
                dirs.push(self.relative(&p.prefix)?);
            }
            match page.next_continuation_token {
                Some(t) if !t.is_empty() => token = Some(t),
                _ => return Ok(dirs),
            }
        }
    }

    fn list_page(
        &self,
        prefix: &str,
        start_after: Option<&str>,
        token: Option<&str>,
        delimiter: Option<&str>,
    ) -> Result<rusty_s3::actions::ListObjectsV2Response, StorageError> {
        let full_prefix = format!("{}{prefix}", self.inner.prefix);
        let full_start = start_after.map(|s| format!("{}{s}", self.inner.prefix));
        let mut action = ListObjectsV2::new(&self.inner.bucket, Some(&self.inner.creds));
        // Plain keys in the XML: the url encoding would have to be undone, and its spelling of
        // spaces differs between servers.
        action.query_mut().remove("encoding-type");
        action.with_prefix(full_prefix.as_str());
        if let Some(s) = &full_start {
            action.with_start_after(s.as_str());
        }
        if let Some(t) = token {
            action.with_continuation_token(t);
        }
        if let Some(d) = delimiter {
            action.with_delimiter(d);
        }
        action.with_max_keys(1000);
        let url = action.sign(SIGN_FOR);
        self.run("list", prefix, || {
            let resp = self.send(self.inner.agent.get(url.as_str()).call(), None)?;
            if resp.status().as_u16() != 200 {
                return Err(self.fatal(resp, "list", prefix));
            }
            let body = self.read_body(resp)?;
            ListObjectsV2::parse_response(&body).map_err(|e| {
                Fail::Fatal(self.error(
                    "list",
                    prefix,
                    Some(200),
                    format!("unreadable ListObjectsV2 answer: {e}"),
                ))
            })
        })
    }

    /// Deletes an object; one that is not there is fine.
    pub fn delete(&self, key: &str) -> Result<(), StorageError> {
        let url = self.object_url(key, ObjectOp::Delete)?;
        self.run("delete", key, || {
            let resp = self.send(self.inner.agent.delete(url.as_str()).call(), None)?;
            self.expect_ok(resp, "delete", key, &[200, 204, 404])
        })
    }

    /// Deletes objects with DeleteObjects, 1000 a request; absent ones are fine.
    pub fn delete_many(&self, keys: &[String]) -> Result<(), StorageError> {
        for chunk in keys.chunks(1000) {
            let ids: Vec<rusty_s3::actions::ObjectIdentifier> = chunk
                .iter()
                .map(|k| {
                    self.full_key(k)
                        .map(rusty_s3::actions::ObjectIdentifier::new)
                })
                .collect::<Result<_, _>>()?;
            let mut action = self
                .inner
                .bucket
                .delete_objects(Some(&self.inner.creds), ids.iter());
            action.set_quiet(true);
            let url = action.sign(SIGN_FOR);
            let (body, md5) = action.body_with_md5();
            let what = chunk.first().map_or("", |k| k.as_str());
            self.run("delete_many", what, || {
                let req = self
                    .inner
                    .agent
                    .post(url.as_str())
                    .header("Content-MD5", md5.as_str());
                let resp = self.send(req.send(body.as_bytes()), Some(body.as_bytes()))?;
                if resp.status().as_u16() != 200 {
                    return Err(self.fatal(resp, "delete_many", what));
                }
                let answer = self.read_body(resp)?;
                let parsed =
                    rusty_s3::actions::DeleteObjectsResponse::parse(&answer).map_err(|e| {
                        Fail::Fatal(self.error(
                            "delete_many",
                            what,
                            Some(200),
                            format!("unreadable DeleteObjects answer: {e}"),
                        ))
                    })?;
                match parsed.errors.iter().find(|e| e.code != "NoSuchKey") {
                    Some(e) => Err(Fail::Fatal(StorageError::S3 {
                        op: "delete_many",
                        uri: format!("s3://{}/{}", self.inner.bucket.name(), e.key),
                        status: Some(200),
                        detail: format!(
                            "{}: {} ({} of {} keys not deleted; endpoint {})",
                            e.code,
                            e.message,
                            parsed.errors.len(),
                            chunk.len(),
                            self.inner.endpoint
                        ),
                    })),
                    None => Ok(()),
                }
            })?;
        }
        Ok(())
    }

    /// Starts a multipart upload of `key`; see [`Multipart`].
    pub fn multipart(&self, key: &str) -> Result<Multipart, StorageError> {
        let full = self.full_key(key)?;
        let url = self
            .inner
            .bucket
            .create_multipart_upload(Some(&self.inner.creds), &full)
            .sign(SIGN_FOR);
        let upload_id = self.run("multipart", key, || {
            let resp = self.send(self.inner.agent.post(url.as_str()).send(&[]), Some(&[]))?;
            if resp.status().as_u16() != 200 {
                return Err(self.fatal(resp, "multipart", key));
            }
            let body = self.read_body(resp)?;
            rusty_s3::actions::CreateMultipartUpload::parse_response(&body)
                .map(|r| r.upload_id().to_string())
                .map_err(|e| {
                    Fail::Fatal(self.error(
                        "multipart",
                        key,
                        Some(200),
                        format!("unreadable CreateMultipartUpload answer: {e}"),
                    ))
                })
        })?;
        Ok(Multipart {
            client: self.clone(),
            key: key.to_string(),
            full,
            upload_id,
        })
    }

    /// Aborts multipart uploads under `prefix` started more than `older_than` ago (writers that
    /// died mid-upload leave them, and their parts cost storage). Returns how many.
    pub fn abort_stale_uploads(
        &self,
        prefix: &str,
        older_than: Duration,
    ) -> Result<usize, StorageError> {
        let cutoff = SystemTime::now()
            .checked_sub(older_than)
            .unwrap_or(SystemTime::UNIX_EPOCH);
        let full_prefix = format!("{}{prefix}", self.inner.prefix);
        let (mut key_marker, mut id_marker) = (String::new(), String::new());
        let mut aborted = 0;
        loop {
            let mut query = vec![("prefix", full_prefix.as_str()), ("uploads", "")];
            if !key_marker.is_empty() {
                query.push(("key-marker", key_marker.as_str()));
                query.push(("upload-id-marker", id_marker.as_str()));
            }
            query.sort();
            let c = &self.inner.creds;
            let url = rusty_s3::signing::sign(
                &jiff::Timestamp::now(),
                rusty_s3::Method::Get,
                self.inner.bucket.base_url().clone(),
                c.key(),
                c.secret(),
                c.token(),
                self.inner.bucket.region(),
                SIGN_FOR.as_secs(),
                query.iter().copied(),
                std::iter::empty(),
            );
            let page: ListUploads = self.run("list_uploads", prefix, || {
                let resp = self.send(self.inner.agent.get(url.as_str()).call(), None)?;
                if resp.status().as_u16() != 200 {
                    return Err(self.fatal(resp, "list_uploads", prefix));
                }
                let body = self.read_body(resp)?;
                quick_xml::de::from_reader(body.as_slice()).map_err(|e| {
                    Fail::Fatal(self.error(
                        "list_uploads",
                        prefix,
                        Some(200),
                        format!("unreadable ListMultipartUploads answer: {e}"),
                    ))
                })
            })?;
            for u in &page.uploads {
                let started = u
                    .initiated
                    .parse::<jiff::Timestamp>()
                    .map(SystemTime::from)
                    .unwrap_or(SystemTime::now());
                if started <= cutoff {
                    let key = self.relative(&u.key)?;
                    Multipart {
                        client: self.clone(),
                        full: u.key.clone(),
                        key,
                        upload_id: u.upload_id.clone(),
                    }
                    .abort()?;
                    aborted += 1;
                }
            }
            if !page.is_truncated {
                return Ok(aborted);
            }
            key_marker = page.next_key_marker.unwrap_or_default();
            id_marker = page.next_upload_id_marker.unwrap_or_default();
            if key_marker.is_empty() {
                return Ok(aborted);
            }
        }
    }

    /// Checks the bucket, creating it when allowed.
    fn ensure_bucket(&self, create: bool) -> Result<(), StorageError> {
        let url = self
            .inner
            .bucket
            .head_bucket(Some(&self.inner.creds))
            .sign(SIGN_FOR);
        let exists = self.run("check bucket", "", || {
            let resp = self.send(self.inner.agent.head(url.as_str()).call(), None)?;
            match resp.status().as_u16() {
                200 => Ok(true),
                404 => Ok(false),
                _ => Err(self.fatal(resp, "check bucket", "")),
            }
        })?;
        if exists {
            return Ok(());
        }
        if !create {
            return Err(StorageError::Config {
                detail: format!(
                    "bucket {} does not exist at {} (create it, or set s3.create_bucket: true)",
                    self.inner.bucket.name(),
                    self.inner.endpoint
                ),
            });
        }
        let url = self
            .inner
            .bucket
            .create_bucket(&self.inner.creds)
            .sign(SIGN_FOR);
        self.run("create bucket", "", || {
            let resp = self.send(self.inner.agent.put(url.as_str()).send(&[]), Some(&[]))?;
            match resp.status().as_u16() {
                // Another process created it meanwhile: as good.
                409 => {
                    drain(resp);
                    Ok(())
                }
                _ => self.expect_ok(resp, "create bucket", "", &[200]),
            }
        })
    }

    /// Probes of processes killed between their PUT and DELETE: nothing else would ever delete
    /// them. Best effort, once per process: a failure here changes nothing the caller asked for.
    ///
    /// Only probes a minute old or more: with a short grace (a test's, or an operator's), one
    /// process deleted another's probe between its two PUTs, whose second then succeeded, and
    /// that process refused a server that has conditional writes (seen in the lifecycle tests).
    fn delete_stale_probes(&self) {
        self.delete_probes_older_than(self.inner.grace.max(STALE_PROBE_AGE));
    }

    /// A purge (the operator's collection of garbage) takes the probes the grace allows, as it
    /// does data objects.
    pub(crate) fn purge_probes(&self) {
        self.delete_probes_older_than(self.inner.grace);
    }

    fn delete_probes_older_than(&self, min_age: Duration) {
        let now = SystemTime::now();
        let stale: Vec<String> = self
            .list(".fieldstore-probe/")
            .filter_map(Result::ok)
            .filter(|m| {
                now.duration_since(m.last_modified)
                    .is_ok_and(|age| age >= min_age)
            })
            .map(|m| m.key)
            .collect();
        if !stale.is_empty() {
            let _ = self.delete_many(&stale);
        }
    }

    /// Two create-only PUTs of one fresh key: the second must be refused (412), or the server
    /// ignores `If-None-Match` and concurrent writers could overwrite each other unnoticed.
    fn probe_conditional_create(&self, allow_unconditional: bool) -> Result<(), StorageError> {
        let id = (
            self.inner.endpoint.clone(),
            self.inner.bucket.name().to_string(),
        );
        let known = probed().lock().map(|m| m.get(&id).copied()).unwrap_or(None);
        let supported = match known {
            Some(s) => s,
            None => {
                let key = format!(".fieldstore-probe/{}", crate::storage::names::unique_name());
                // The first may meet its own lost attempt (412); only the second tells.
                self.put_if_absent("probe conditional create", &key, b"probe")?;
                let second = self.put_if_absent("probe conditional create", &key, b"probe")?;
                self.delete(&key)?;
                self.delete_stale_probes();
                let supported = !second;
                if supported {
                    // Best effort: without it the next process probes, as before.
                    let _ = self.put(
                        PROBED_MARKER,
                        probed_marker(&self.inner.endpoint, SystemTime::now()).as_bytes(),
                    );
                }
                if let Ok(mut m) = probed().lock() {
                    m.insert(id, supported);
                }
                supported
            }
        };
        if supported {
            return Ok(());
        }
        if allow_unconditional {
            tracing::warn!(
                endpoint = %self.inner.endpoint,
                "S3 server ignores If-None-Match on PUT; continuing because allow_unconditional_writes is set: concurrent writers may overwrite each other's objects unnoticed"
            );
            return Ok(());
        }
        Err(StorageError::S3Unsupported {
            endpoint: self.inner.endpoint.clone(),
            detail: "it ignores If-None-Match: * on PUT (a second create-only PUT of one key succeeded), so concurrent writers could overwrite each other unnoticed; use a server with conditional writes (AWS S3, MinIO), or set s3.allow_unconditional_writes: true if only one writer ever writes".into(),
        })
    }

    /// The key with the client's prefix; refuses keys a URL would rewrite.
    /// The presigned URL of one request on one object (its key checked and put under the
    /// prefix).
    fn object_url(&self, key: &str, op: ObjectOp) -> Result<url::Url, StorageError> {
        let full = self.full_key(key)?;
        let (bucket, creds) = (&self.inner.bucket, Some(&self.inner.creds));
        Ok(match op {
            ObjectOp::Put => bucket.put_object(creds, &full).sign(SIGN_FOR),
            ObjectOp::Get => bucket.get_object(creds, &full).sign(SIGN_FOR),
            ObjectOp::Head => bucket.head_object(creds, &full).sign(SIGN_FOR),
            ObjectOp::Delete => bucket.delete_object(creds, &full).sign(SIGN_FOR),
        })
    }

    fn full_key(&self, key: &str) -> Result<String, StorageError> {
        let bad = key.starts_with('/')
            || key.split('/').any(|seg| seg == "." || seg == "..")
            || key.chars().any(|c| c.is_control());
        if bad {
            return Err(self.error(
                "name",
                key,
                None,
                "keys may not start with '/', hold '.' or '..' segments, or control characters"
                    .into(),
            ));
        }
        Ok(format!("{}{key}", self.inner.prefix))
    }

    /// A key from the server, relative to the client's prefix.
    fn relative(&self, full: &str) -> Result<String, StorageError> {
        full.strip_prefix(self.inner.prefix.as_str())
            .map(str::to_string)
            .ok_or_else(|| {
                self.error(
                    "list",
                    full,
                    None,
                    format!(
                        "the server answered with a key outside the prefix '{}'",
                        self.inner.prefix
                    ),
                )
            })
    }

    /// Runs one request with retries for transient failures.
    fn run<T>(
        &self,
        op: &'static str,
        key: &str,
        mut attempt: impl FnMut() -> Result<T, Fail>,
    ) -> Result<T, StorageError> {
        let b = self.inner.backoff;
        let started = Instant::now();
        let mut delay = b.first;
        let mut tries = 0;
        loop {
            tries += 1;
            match attempt() {
                Ok(v) => return Ok(v),
                Err(Fail::Fatal(e)) => return Err(e),
                Err(Fail::Retry {
                    status,
                    detail,
                    connect,
                }) => {
                    let limit = if connect {
                        b.connect_attempts
                    } else {
                        b.attempts
                    };
                    if tries >= limit || started.elapsed() + delay > b.budget {
                        return Err(self.error(
                            op,
                            key,
                            status,
                            format!(
                                "{detail} (gave up after {tries} attempts in {:.1} s)",
                                started.elapsed().as_secs_f64()
                            ),
                        ));
                    }
                    tracing::debug!(op, key, ?status, %detail, "S3 request failed, retrying");
                    self.inner.stats.retries.fetch_add(1, Ordering::Relaxed);
                    std::thread::sleep(delay);
                    delay = (delay * 2).min(b.cap);
                }
            }
        }
    }

    /// Sends a request; transport failures and throttling/5xx answers become [`Fail::Retry`].
    fn send(
        &self,
        result: Result<Response<Body>, ureq::Error>,
        body: Option<&[u8]>,
    ) -> Result<Response<Body>, Fail> {
        self.inner.stats.requests.fetch_add(1, Ordering::Relaxed);
        let resp = match result {
            Ok(r) => r,
            Err(e) => {
                let connect = matches!(
                    e,
                    ureq::Error::ConnectionFailed | ureq::Error::HostNotFound
                ) || matches!(&e, ureq::Error::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused);
                return Err(Fail::Retry {
                    status: None,
                    detail: format!("{e} (endpoint {})", self.inner.endpoint),
                    connect,
                });
            }
        };
        if let Some(b) = body {
            self.inner
                .stats
                .bytes_up
                .fetch_add(b.len() as u64, Ordering::Relaxed);
        }
        match resp.status().as_u16() {
            429 | 500 | 502 | 503 | 504 => Err(self.retry_with_body(resp)),
            _ => Ok(resp),
        }
    }

    fn retry_with_body(&self, resp: Response<Body>) -> Fail {
        let status = resp.status().as_u16();
        let detail = self.error_detail(resp);
        Fail::Retry {
            status: Some(status),
            detail,
            connect: false,
        }
    }

    fn expect_ok(
        &self,
        resp: Response<Body>,
        op: &'static str,
        key: &str,
        ok: &[u16],
    ) -> Result<(), Fail> {
        if ok.contains(&resp.status().as_u16()) {
            drain(resp);
            Ok(())
        } else {
            Err(self.fatal(resp, op, key))
        }
    }

    fn fatal(&self, resp: Response<Body>, op: &'static str, key: &str) -> Fail {
        let status = resp.status().as_u16();
        let detail = self.error_detail(resp);
        Fail::Fatal(self.error(op, key, Some(status), detail))
    }

    fn error(
        &self,
        op: &'static str,
        key: &str,
        status: Option<u16>,
        detail: String,
    ) -> StorageError {
        StorageError::S3 {
            op,
            uri: self.uri(key),
            status,
            detail,
        }
    }

    /// The server's `<Code>: <Message>` (HEAD answers have no body: the status then), with the
    /// endpoint, and for refusals where the credentials came from.
    fn error_detail(&self, mut resp: Response<Body>) -> String {
        let status = resp.status();
        let body = resp
            .body_mut()
            .with_config()
            .limit(64 * 1024)
            .read_to_vec()
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&body);
        let code = xml_text(&text, "Code");
        let message = xml_text(&text, "Message");
        let what = match (code, message) {
            (Some(c), Some(m)) => format!("{c}: {m}"),
            (Some(c), None) => c,
            (None, _) => status
                .canonical_reason()
                .unwrap_or("unexpected answer")
                .to_string(),
        };
        let creds = if matches!(status.as_u16(), 401 | 403) {
            format!(", credentials from {}", self.inner.creds_source)
        } else {
            String::new()
        };
        format!("{what} (endpoint {}{creds})", self.inner.endpoint)
    }

    fn read_body(&self, mut resp: Response<Body>) -> Result<Vec<u8>, Fail> {
        let body = resp
            .body_mut()
            .with_config()
            .limit(u64::MAX)
            .read_to_vec()
            .map_err(|e| Fail::Retry {
                status: None,
                detail: format!("reading the answer: {e} (endpoint {})", self.inner.endpoint),
                connect: false,
            })?;
        self.inner
            .stats
            .bytes_down
            .fetch_add(body.len() as u64, Ordering::Relaxed);
        Ok(body)
    }

    fn read_into(&self, mut resp: Response<Body>, buf: &mut [u8]) -> Result<usize, Fail> {
        let mut reader = resp.body_mut().with_config().limit(u64::MAX).reader();
        let mut n = 0;
        while n < buf.len() {
            match reader.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    return Err(Fail::Retry {
                        status: None,
                        detail: format!(
                            "reading the answer: {e} (endpoint {})",
                            self.inner.endpoint
                        ),
                        connect: false,
                    })
                }
            }
        }
        self.inner
            .stats
            .bytes_down
            .fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// Reads what is left of an answer so its connection goes back to the pool.
fn drain(mut resp: Response<Body>) {
    let _ = resp.body_mut().with_config().limit(1 << 20).read_to_vec();
}

fn header(resp: &Response<Body>, name: &str) -> Option<String> {
    resp.headers()
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
}

/// `<Tag>text</Tag>` in an S3 error document (unescaping the five XML entities).
fn xml_text(doc: &str, tag: &str) -> Option<String> {
    let open = format!("<{tag}>");
    let start = doc.find(&open)? + open.len();
    let end = doc[start..].find(&format!("</{tag}>"))? + start;
    Some(
        doc[start..end]
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
            .replace("&apos;", "'")
            .replace("&amp;", "&"),
    )
}

/// `Tue, 24 Nov 2026 07:53:49 GMT`.
fn parse_http_date(text: &str) -> Option<SystemTime> {
    jiff::fmt::rfc2822::DateTimeParser::new()
        .parse_timestamp(text)
        .ok()
        .map(SystemTime::from)
}

/// TLS roots: the built-in web PKI roots, plus the CA certificates of `ca_bundle` (else
/// `AWS_CA_BUNDLE`) for servers with a private CA.
fn tls_config(cfg: &S3Config) -> Result<ureq::tls::TlsConfig, StorageError> {
    let bundle = cfg.ca_bundle.clone().or_else(|| {
        std::env::var_os("AWS_CA_BUNDLE")
            .filter(|v| !v.is_empty())
            .map(Into::into)
    });
    let builder = ureq::tls::TlsConfig::builder();
    let Some(path) = bundle else {
        return Ok(builder.build());
    };
    let pem = std::fs::read(&path).map_err(StorageError::io("read the S3 CA bundle", &path))?;
    let mut roots: Vec<ureq::tls::Certificate<'static>> = webpki_root_certs::TLS_SERVER_ROOT_CERTS
        .iter()
        .map(|c| ureq::tls::Certificate::from_der(c.as_ref()).to_owned())
        .collect();
    let builtin = roots.len();
    for item in ureq::tls::parse_pem(&pem) {
        match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => roots.push(c),
            Ok(_) => {}
            Err(e) => {
                return Err(StorageError::Config {
                    detail: format!("S3 CA bundle {}: {e}", path.display()),
                })
            }
        }
    }
    if roots.len() == builtin {
        return Err(StorageError::Config {
            detail: format!("S3 CA bundle {} holds no PEM certificate", path.display()),
        });
    }
    Ok(builder
        .root_certs(ureq::tls::RootCerts::Specific(Arc::new(roots)))
        .build())
}

/// ListMultipartUploads' answer, the parts used.
#[derive(serde::Deserialize)]
struct ListUploads {
    #[serde(rename = "Upload", default)]
    uploads: Vec<Upload>,
    #[serde(rename = "IsTruncated", default)]
    is_truncated: bool,
    #[serde(rename = "NextKeyMarker")]
    next_key_marker: Option<String>,
    #[serde(rename = "NextUploadIdMarker")]
    next_upload_id_marker: Option<String>,
}

#[derive(serde::Deserialize)]
struct Upload {
    #[serde(rename = "Key")]
    key: String,
    #[serde(rename = "UploadId")]
    upload_id: String,
    #[serde(rename = "Initiated")]
    initiated: String,
}

/// Lazily paginated listing: see [`S3Client::list`].
pub struct ObjectList {
    client: S3Client,
    prefix: String,
    start_after: Option<String>,
    token: Option<String>,
    page: VecDeque<ObjectMeta>,
    done: bool,
}

impl ObjectList {
    fn new(client: S3Client, prefix: &str, start_after: Option<&str>) -> ObjectList {
        ObjectList {
            client,
            prefix: prefix.to_string(),
            start_after: start_after.map(str::to_string),
            token: None,
            page: VecDeque::new(),
            done: false,
        }
    }

    fn fetch(&mut self) -> Result<(), StorageError> {
        let page = self.client.list_page(
            &self.prefix,
            self.start_after.as_deref(),
            self.token.as_deref(),
            None,
        )?;
        for c in page.contents {
            let last_modified = c
                .last_modified
                .parse::<jiff::Timestamp>()
                .map(SystemTime::from)
                .unwrap_or(SystemTime::UNIX_EPOCH);
            self.page.push_back(ObjectMeta {
                key: self.client.relative(&c.key)?,
                size: c.size,
                last_modified,
                etag: Some(c.etag).filter(|e| !e.is_empty()),
            });
        }
        match page.next_continuation_token {
            Some(t) if !t.is_empty() => self.token = Some(t),
            _ => self.done = true,
        }
        Ok(())
    }
}

impl Iterator for ObjectList {
    type Item = Result<ObjectMeta, StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.page.is_empty() && !self.done {
            if let Err(e) = self.fetch() {
                self.done = true;
                return Some(Err(e));
            }
        }
        self.page.pop_front().map(Ok)
    }
}

/// One uploaded part: its number (from 1) and the ETag the server gave it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    pub number: u16,
    pub etag: String,
}

/// A multipart upload in progress. Parts (1..=10000, each but the last at least 5 MiB) may go
/// out in any order and from several threads (`put_part` takes `&self`; the value is `Clone`);
/// `complete` makes the object visible at once, `abort` drops the parts. An upload neither
/// completed nor aborted is invisible and is cleaned up by [`S3Client::abort_stale_uploads`].
#[derive(Debug, Clone)]
pub struct Multipart {
    client: S3Client,
    key: String,
    full: String,
    upload_id: String,
}

impl Multipart {
    pub fn key(&self) -> &str {
        &self.key
    }

    pub fn upload_id(&self) -> &str {
        &self.upload_id
    }

    /// `s3://bucket/prefix<key>`.
    pub fn uri(&self) -> String {
        self.client.uri(&self.key)
    }

    pub fn put_part(&self, number: u16, body: &[u8]) -> Result<Part, StorageError> {
        let c = &self.client;
        if !(1..=10000).contains(&number) {
            return Err(c.error(
                "put_part",
                &self.key,
                None,
                format!("part number {number} is outside 1..=10000"),
            ));
        }
        let url = c
            .inner
            .bucket
            .upload_part(Some(&c.inner.creds), &self.full, number, &self.upload_id)
            .sign(SIGN_FOR);
        c.run("put_part", &self.key, || {
            let resp = c.send(c.inner.agent.put(url.as_str()).send(body), Some(body))?;
            if resp.status().as_u16() != 200 {
                return Err(c.fatal(resp, "put_part", &self.key));
            }
            let etag = header(&resp, "etag").ok_or_else(|| {
                Fail::Fatal(c.error(
                    "put_part",
                    &self.key,
                    Some(200),
                    "the server gave the part no ETag".into(),
                ))
            })?;
            drain(resp);
            Ok(Part { number, etag })
        })
    }

    /// Makes the object from `parts` (any order; numbers must run 1..=n without gaps).
    pub fn complete(self, parts: &[Part]) -> Result<(), StorageError> {
        let c = &self.client;
        let mut sorted: Vec<&Part> = parts.iter().collect();
        sorted.sort_by_key(|p| p.number);
        if sorted.is_empty()
            || sorted
                .iter()
                .enumerate()
                .any(|(i, p)| usize::from(p.number) != i + 1)
        {
            return Err(c.error(
                "complete",
                &self.key,
                None,
                "parts must be numbered 1..=n without gaps".into(),
            ));
        }
        let action = c.inner.bucket.complete_multipart_upload(
            Some(&c.inner.creds),
            &self.full,
            &self.upload_id,
            sorted.iter().map(|p| p.etag.as_str()),
        );
        let url = action.sign(SIGN_FOR);
        let body = action.body();
        let mut attempts = 0;
        c.run("complete", &self.key, || {
            attempts += 1;
            let resp = c.send(
                c.inner.agent.post(url.as_str()).send(body.as_bytes()),
                Some(body.as_bytes()),
            )?;
            match resp.status().as_u16() {
                // An earlier attempt completed it but its answer was lost.
                404 if attempts > 1 => {
                    drain(resp);
                    match c.head(&self.key) {
                        Ok(Some(_)) => Ok(()),
                        Ok(None) => Err(Fail::Fatal(c.error(
                            "complete",
                            &self.key,
                            Some(404),
                            "the upload is gone and no object was made".into(),
                        ))),
                        Err(e) => Err(Fail::Fatal(e)),
                    }
                }
                200 => {
                    // Errors after the 200 header arrive in the body.
                    let answer = c.read_body(resp)?;
                    let text = String::from_utf8_lossy(&answer);
                    if text.contains("<Error>") {
                        let detail = format!(
                            "{}: {} (endpoint {})",
                            xml_text(&text, "Code").unwrap_or_default(),
                            xml_text(&text, "Message").unwrap_or_default(),
                            c.inner.endpoint
                        );
                        return Err(Fail::Retry {
                            status: Some(200),
                            detail,
                            connect: false,
                        });
                    }
                    Ok(())
                }
                _ => Err(c.fatal(resp, "complete", &self.key)),
            }
        })
    }

    /// Drops the upload and its parts; one already gone is fine.
    pub fn abort(self) -> Result<(), StorageError> {
        let c = &self.client;
        let url = c
            .inner
            .bucket
            .abort_multipart_upload(Some(&c.inner.creds), &self.full, &self.upload_id)
            .sign(SIGN_FOR);
        c.run("abort", &self.key, || {
            let resp = c.send(c.inner.agent.delete(url.as_str()).call(), None)?;
            c.expect_ok(resp, "abort", &self.key, &[200, 204, 404])
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_marker_is_trusted_for_its_endpoint_for_a_day() {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let m = probed_marker("http://127.0.0.1:9000", at);
        let e = "http://127.0.0.1:9000";
        assert!(marker_is_fresh(m.as_bytes(), e, at));
        assert!(marker_is_fresh(
            m.as_bytes(),
            e,
            at + PROBED_FOR - Duration::from_secs(1)
        ));
        assert!(!marker_is_fresh(m.as_bytes(), e, at + PROBED_FOR));
        // Another path to the server may not honour what this one does.
        assert!(!marker_is_fresh(m.as_bytes(), "http://localhost:9000", at));
        // Written in the future: clocks drift a little, not hours.
        assert!(marker_is_fresh(
            m.as_bytes(),
            e,
            at - Duration::from_secs(60)
        ));
        assert!(!marker_is_fresh(
            m.as_bytes(),
            e,
            at - Duration::from_secs(3600)
        ));
        for bad in [
            &b""[..],
            b"http://127.0.0.1:9000",
            b"http://127.0.0.1:9000\nsoon\n",
            b"\xff\n1\n",
        ] {
            assert!(!marker_is_fresh(bad, e, at), "{bad:?}");
        }
    }

    #[test]
    fn error_documents() {
        let doc = "<?xml version=\"1.0\"?><Error><Code>AccessDenied</Code><Message>Access &amp; more</Message></Error>";
        assert_eq!(xml_text(doc, "Code").as_deref(), Some("AccessDenied"));
        assert_eq!(xml_text(doc, "Message").as_deref(), Some("Access & more"));
        assert_eq!(xml_text(doc, "Resource"), None);
    }

    #[test]
    fn http_dates() {
        let t = parse_http_date("Tue, 24 Nov 2026 07:53:49 GMT").unwrap();
        let iso: jiff::Timestamp = "2026-11-24T07:53:49Z".parse().unwrap();
        assert_eq!(t, SystemTime::from(iso));
        assert_eq!(parse_http_date("yesterday"), None);
    }

    fn client(prefix: Option<&str>) -> S3Client {
        let mut cfg = S3Config::new("http://127.0.0.1:9", "bucket");
        cfg.prefix = prefix.map(str::to_string);
        let keys = credentials::Keys {
            access_key_id: "a".into(),
            secret_access_key: "s".into(),
            session_token: None,
            source: "test".into(),
        };
        S3Client::with_keys(&cfg, keys).unwrap()
    }

    #[test]
    fn clients_are_shared_between_threads() {
        fn shareable<T: Clone + Send + Sync + 'static>() {}
        shareable::<S3Client>();
        shareable::<Multipart>();
    }

    #[test]
    fn names() {
        let c = client(Some("ops/"));
        assert_eq!(c.uri("a/b"), "s3://bucket/ops/a/b");
        assert_eq!(c.describe(), "s3://bucket/ops/ at http://127.0.0.1:9");
        assert_eq!(c.full_key("x y:z").unwrap(), "ops/x y:z");
        for bad in ["/abs", "a/../b", "./a", "a\nb"] {
            assert!(c.full_key(bad).is_err(), "{bad:?}");
        }
        assert_eq!(c.relative("ops/k").unwrap(), "k");
        assert!(c.relative("other/k").is_err());
    }

    #[test]
    fn list_uploads_answer() {
        let xml = r#"<?xml version="1.0" encoding="UTF-8"?>
<ListMultipartUploadsResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Bucket>b</Bucket><KeyMarker></KeyMarker><UploadIdMarker></UploadIdMarker><NextKeyMarker>k2</NextKeyMarker><NextUploadIdMarker>u2</NextUploadIdMarker><Prefix>p</Prefix><MaxUploads>1000</MaxUploads><IsTruncated>true</IsTruncated><Upload><Key>k1</Key><UploadId>u1</UploadId><Initiated>2026-11-24T07:53:49.000Z</Initiated></Upload><Upload><Key>k2</Key><UploadId>u2</UploadId><Initiated>2026-11-24T07:53:50.000Z</Initiated></Upload></ListMultipartUploadsResult>"#;
        let l: ListUploads = quick_xml::de::from_str(xml).unwrap();
        assert_eq!(l.uploads.len(), 2);
        assert_eq!(
            (l.uploads[1].key.as_str(), l.uploads[1].upload_id.as_str()),
            ("k2", "u2")
        );
        assert!(l.is_truncated);
        assert_eq!(l.next_key_marker.as_deref(), Some("k2"));
        assert!(l.uploads[0].initiated.parse::<jiff::Timestamp>().is_ok());
        let empty: ListUploads = quick_xml::de::from_str("<ListMultipartUploadsResult><IsTruncated>false</IsTruncated></ListMultipartUploadsResult>").unwrap();
        assert!(empty.uploads.is_empty() && !empty.is_truncated);
    }
}

/// The requests on one object that [`S3Client::object_url`] signs.
#[derive(Clone, Copy)]
enum ObjectOp {
    Put,
    Get,
    Head,
    Delete,
}
