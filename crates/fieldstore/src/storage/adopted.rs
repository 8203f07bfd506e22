//! Objects of an S3 bucket adopted where they lie (`fieldstore adopt s3://BUCKET/KEY`,
//! docs/adopt.md): catalogue entries point into the user's object, and no byte of it is copied.
//!
//! The user owns the object and may write it anew or delete it at any time, so what it was at
//! adoption (its size and ETag) is kept in the store's name for it, and every read of it insists
//! on that ETag (`If-Match` on each ranged GET). A conditional GET rather than a HEAD before
//! reading: the server compares and reads in one step, so no writer can slip new bytes in
//! between a check and the read, and it costs no request more than an unchecked read. Only when
//! the GET is refused is a HEAD sent, to tell the user what the object is now.
//!
//! [`AdoptingStore`] wraps whatever store a database has (a store of files, or S3): it answers
//! for adopted objects and hands every other object to the store beneath, so neither store
//! knows about adoption beyond its own files, and wipe and purge never reach the user's object.

use std::collections::HashMap;
use std::io::Read;
use std::sync::{Arc, Mutex};

use super::s3::S3Client;
use super::{DbRef, FieldRef, ObjectReader, StorageError, Store, StoreWriter};
use crate::model::config::{LocalConfig, S3Config};

/// In the store's name for an adopted object, what follows its `s3://` URI: the object's size
/// and ETag at adoption (`s3://BUCKET/KEY#adopted-s3:SIZE:ETAG`). Distinct from the mark of
/// adopted files (`#adopted:`), so neither is ever read as the other.
const MARK: &str = "#adopted-s3:";

/// GETs this large stream an object being adopted: few requests, bounded memory.
const ADOPT_CHUNK: usize = 8 << 20;

/// One object of a bucket, as adopted: where it is and what it was.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdoptedObject {
    pub bucket: String,
    pub key: String,
    pub size: u64,
    /// As the server gave it, quotes included: what `If-Match` sends back.
    pub etag: String,
}

impl AdoptedObject {
    /// `s3://BUCKET/KEY`: what users see (`list --location`, errors).
    pub fn uri(&self) -> String {
        format!("s3://{}/{}", self.bucket, self.key)
    }

    /// The store's name for it, kept in each catalogue entry.
    pub fn object_name(&self) -> String {
        format!("{}{MARK}{}:{}", self.uri(), self.size, self.etag)
    }

    /// The object a store's name stands for; `None` for any other name (a data file, an
    /// adopted file). The mark is searched from the end: keys may hold anything, ETags may not
    /// hold `#` (see [`valid_etag`]).
    pub fn parse(object: &str) -> Option<AdoptedObject> {
        let at = object.rfind(MARK)?;
        let (bucket, key) = split_uri(&object[..at])?;
        let (size_text, etag) = object[at + MARK.len()..].split_once(':')?;
        let size: u64 = size_text.parse().ok()?;
        // One spelling per object (no `+7` or `007`), so a name read back is the name written.
        if !valid_etag(etag) || size.to_string() != size_text {
            return None;
        }
        Some(AdoptedObject {
            bucket: bucket.to_string(),
            key: key.to_string(),
            size,
            etag: etag.to_string(),
        })
    }
}

/// Whether a store's name for an object is that of an adopted S3 object.
pub fn is_adopted_object(object: &str) -> bool {
    AdoptedObject::parse(object).is_some()
}

/// `(bucket, key)` of `s3://BUCKET/KEY`: a bucket name as S3 allows it (3-63 of a-z 0-9 . -)
/// and a key that is not empty and holds no control characters.
fn split_uri(uri: &str) -> Option<(&str, &str)> {
    let rest = uri.strip_prefix("s3://")?;
    let (bucket, key) = rest.split_once('/')?;
    let bucket_ok = (3..=63).contains(&bucket.len())
        && bucket
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
    let key_ok = !key.is_empty() && !key.chars().any(char::is_control);
    (bucket_ok && key_ok).then_some((bucket, key))
}

/// An ETag that can be kept in an object's name and read back unambiguously.
fn valid_etag(etag: &str) -> bool {
    !etag.is_empty() && !etag.contains('#') && !etag.chars().any(char::is_control)
}

/// Whether a command-line argument names an S3 object rather than a file.
pub fn is_s3_uri(arg: &str) -> bool {
    arg.starts_with("s3://")
}

/// An object opened for adoption: the store's name for it and its bytes, streamed.
pub struct Adoptable {
    pub object: String,
    pub uri: String,
    pub size: u64,
    /// The object's bytes from its start, read by ranged GETs of 8 MiB that each insist on the
    /// ETag recorded: an object written anew while it is adopted fails the adoption.
    pub reader: Box<dyn Read + Send>,
}

/// The S3 server adopted objects are read from, and a client per bucket (made on first use).
pub struct AdoptedS3 {
    /// Everything but the bucket: endpoint, region, credentials, CA bundle.
    template: S3Config,
    /// Where that came from, for errors about a server that cannot be reached.
    source: &'static str,
    /// The store's own bucket and prefix when the store is S3: objects there are the store's,
    /// and adopting one would let a wipe delete what a catalogue entry still names.
    own: Option<(String, String)>,
    clients: Mutex<HashMap<String, S3Client>>,
}

impl std::fmt::Debug for AdoptedS3 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AdoptedS3({} from {})",
            self.template.endpoint, self.source
        )
    }
}

impl AdoptedS3 {
    /// From a local config and the process environment; see [`AdoptedS3::from_config_with`].
    pub fn from_config(config: &LocalConfig) -> AdoptedS3 {
        Self::from_config_with(config, &|name| {
            std::env::var(name).ok().filter(|v| !v.is_empty())
        })
    }

    /// The server, in this order: the config's `adopt: {s3: ...}` section (what it leaves unset
    /// taken from the environment); else the store's own `s3:` section when the store is S3
    /// (adopted objects usually sit beside the store); else the environment alone, as the AWS
    /// tools read it (`AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, `AWS_REGION`,
    /// `AWS_DEFAULT_REGION`; no endpoint at all means AWS's own for the region). Credentials
    /// then come as for the store (docs/s3.md, "Credentials"). Nothing is contacted here.
    pub fn from_config_with(
        config: &LocalConfig,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> AdoptedS3 {
        let own = config
            .s3
            .as_ref()
            .filter(|_| config.store == "s3")
            .map(|s| (s.bucket.clone(), s.prefix.clone().unwrap_or_default()));
        let region_env = || env("AWS_REGION").or_else(|| env("AWS_DEFAULT_REGION"));
        let endpoint_env = || env("AWS_ENDPOINT_URL_S3").or_else(|| env("AWS_ENDPOINT_URL"));
        let aws = |region: &str| format!("https://s3.{region}.amazonaws.com");
        let (template, source) = match (
            &config.adopt_s3,
            config.s3.as_ref().filter(|_| own.is_some()),
        ) {
            (Some(a), _) => {
                let region = a
                    .region
                    .clone()
                    .or_else(region_env)
                    .unwrap_or_else(|| S3Config::DEFAULT_REGION.into());
                let endpoint = a
                    .endpoint
                    .clone()
                    .or_else(endpoint_env)
                    .unwrap_or_else(|| aws(&region));
                let mut t = S3Config::new(endpoint, "");
                t.region = Some(region);
                t.access_key_id = a.access_key_id.clone();
                t.secret_access_key = a.secret_access_key.clone();
                t.profile = a.profile.clone();
                t.ca_bundle = a.ca_bundle.clone();
                (t, "the config's adopt: s3: section")
            }
            (None, Some(store)) => (store.clone(), "the store's s3: section"),
            (None, None) => {
                let region = region_env().unwrap_or_else(|| S3Config::DEFAULT_REGION.into());
                let endpoint = endpoint_env().unwrap_or_else(|| aws(&region));
                let mut t = S3Config::new(endpoint, "");
                t.region = Some(region);
                (t, "AWS_ENDPOINT_URL / AWS_REGION")
            }
        };
        let template = S3Config {
            bucket: String::new(),
            prefix: None,
            create_bucket: false,
            ..template
        };
        AdoptedS3 {
            template,
            source,
            own,
            clients: Mutex::new(HashMap::new()),
        }
    }

    /// `http(s)://host:port` adopted objects are read from.
    pub fn endpoint(&self) -> &str {
        &self.template.endpoint
    }

    fn client(&self, bucket: &str) -> Result<S3Client, StorageError> {
        let mut clients = self.clients.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(c) = clients.get(bucket) {
            return Ok(c.clone());
        }
        let cfg = S3Config {
            bucket: bucket.to_string(),
            ..self.template.clone()
        };
        let c = S3Client::for_reading(&cfg).map_err(|e| match e {
            StorageError::Config { detail } => StorageError::Config {
                detail: format!(
                    "{detail} (S3 server for adopted objects from {})",
                    self.source
                ),
            },
            e => e,
        })?;
        clients.insert(bucket.to_string(), c.clone());
        Ok(c)
    }

    /// Looks the object up (HEAD) and opens it for adoption. Refuses an object in the store's
    /// own bucket and prefix, one the server gives no ETag, and any `uri` not `s3://BUCKET/KEY`.
    pub fn open_for_adoption(&self, uri: &str) -> Result<Adoptable, StorageError> {
        let refuse = |detail: String| StorageError::Config { detail };
        let (bucket, key) = split_uri(uri).ok_or_else(|| {
            refuse("not an S3 object's URI (s3://BUCKET/KEY: a bucket of 3 to 63 of a-z, 0-9, '.', '-', and a key)".into())
        })?;
        if let Some((own_bucket, own_prefix)) = &self.own {
            if bucket == own_bucket && key.starts_with(own_prefix.as_str()) {
                return Err(refuse(format!(
                    "it lies in the store's own bucket and prefix (s3://{own_bucket}/{own_prefix}), whose objects the store deletes on wipe and purge; adopt objects kept elsewhere"
                )));
            }
        }
        let client = self.client(bucket)?;
        let meta = client.head(key)?.ok_or_else(|| StorageError::S3 {
            op: "adopt",
            uri: uri.to_string(),
            status: Some(404),
            detail: format!("no such object (endpoint {})", client.endpoint()),
        })?;
        let etag = meta.etag.filter(|e| valid_etag(e)).ok_or_else(|| {
            refuse(format!(
                "the server ({}) gives it no usable ETag, so a later change could not be told",
                client.endpoint()
            ))
        })?;
        let adopted = AdoptedObject {
            bucket: bucket.to_string(),
            key: key.to_string(),
            size: meta.size,
            etag,
        };
        Ok(Adoptable {
            object: adopted.object_name(),
            uri: adopted.uri(),
            size: adopted.size,
            reader: Box::new(Stream {
                reader: self.open(&adopted)?,
                pos: 0,
                size: adopted.size,
                buf: Vec::new(),
                at: 0,
            }),
        })
    }

    /// An adopted object opened for reads; every GET insists on the ETag recorded, and a
    /// refused one becomes [`StorageError::AdoptedObjectChanged`] saying what it is now.
    pub fn open(&self, object: &AdoptedObject) -> Result<Box<dyn ObjectReader>, StorageError> {
        let client = self.client(&object.bucket)?;
        Ok(Box::new(Checked {
            inner: super::s3::store::open_matching(client.clone(), &object.key, &object.etag),
            client,
            object: object.clone(),
        }))
    }
}

/// Reads of an adopted object, with refusals turned into an error naming it.
struct Checked {
    inner: Box<dyn ObjectReader>,
    client: S3Client,
    object: AdoptedObject,
}

impl Checked {
    /// A 412 (another ETag) or 404 (gone) from a conditional GET: what the object is now.
    fn changed(&self, e: StorageError) -> StorageError {
        let StorageError::S3 {
            status: Some(412 | 404),
            ..
        } = e
        else {
            return e;
        };
        let o = &self.object;
        let was = format!("adopted at {} bytes with ETag {}", o.size, o.etag);
        let now = match self.client.head(&o.key) {
            Ok(None) => "it does not exist".to_string(),
            Ok(Some(m)) if m.etag.as_deref() == Some(o.etag.as_str()) => return e,
            Ok(Some(m)) => format!(
                "{} bytes with ETag {}, modified {}",
                m.size,
                m.etag.as_deref().unwrap_or("(none)"),
                chrono::DateTime::<chrono::Utc>::from(m.last_modified)
                    .format("%Y-%m-%d %H:%M:%S UTC")
            ),
            Err(h) => format!("it cannot be looked at ({h})"),
        };
        StorageError::AdoptedObjectChanged {
            uri: o.uri(),
            detail: format!("{was}; now {now}"),
        }
    }
}

impl ObjectReader for Checked {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
        self.inner.read_at(offset, buf).map_err(|e| self.changed(e))
    }
}

/// An adopted object's bytes in order, a chunk at a time, for framing its messages.
struct Stream {
    reader: Box<dyn ObjectReader>,
    pos: u64,
    size: u64,
    buf: Vec<u8>,
    at: usize,
}

impl Read for Stream {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.at == self.buf.len() {
            if self.pos >= self.size || out.is_empty() {
                return Ok(0);
            }
            let want = usize::try_from(self.size - self.pos)
                .unwrap_or(ADOPT_CHUNK)
                .min(ADOPT_CHUNK);
            self.buf.resize(want, 0);
            let n = self
                .reader
                .read_at(self.pos, &mut self.buf)
                .map_err(std::io::Error::other)?;
            if n < want {
                // Shorter than its HEAD said, under the same ETag: only a server bug does this.
                return Err(std::io::Error::other(format!(
                    "the object ends at {} bytes, {} were announced",
                    self.pos + n as u64,
                    self.size
                )));
            }
            self.buf.truncate(n);
            self.at = 0;
            self.pos += n as u64;
        }
        let n = (self.buf.len() - self.at).min(out.len());
        out[..n].copy_from_slice(&self.buf[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

/// A database's store, plus the objects adopted into it from S3 buckets.
pub struct AdoptingStore {
    inner: Arc<dyn Store>,
    s3: Arc<AdoptedS3>,
}

impl AdoptingStore {
    pub fn new(inner: Arc<dyn Store>, s3: Arc<AdoptedS3>) -> AdoptingStore {
        AdoptingStore { inner, s3 }
    }
}

impl Store for AdoptingStore {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn writer(&self, db: &DbRef) -> Result<Box<dyn StoreWriter>, StorageError> {
        self.inner.writer(db)
    }

    fn read(&self, db: &DbRef, field: &FieldRef) -> Result<Vec<u8>, StorageError> {
        let Some(o) = AdoptedObject::parse(&field.object) else {
            return self.inner.read(db, field);
        };
        let len = usize::try_from(field.length).map_err(|_| StorageError::Corrupt {
            path: o.uri().into(),
            offset: field.offset,
            detail: format!("field length {} does not fit in memory", field.length),
        })?;
        let mut buf = vec![0u8; len];
        let n = self.s3.open(&o)?.read_at(field.offset, &mut buf)?;
        if n < len {
            return Err(StorageError::Corrupt {
                path: o.uri().into(),
                offset: field.offset,
                detail: format!("the object ends {n} bytes into a field of {len}"),
            });
        }
        field.verify(crate::checksum::crc32c(&buf), || o.uri(), || "?".into())?;
        Ok(buf)
    }

    /// The store beneath's own buffer for its fields (a memory store's is the stored one).
    fn read_shared(&self, db: &DbRef, field: &FieldRef) -> Result<bytes::Bytes, StorageError> {
        if AdoptedObject::parse(&field.object).is_none() {
            return self.inner.read_shared(db, field);
        }
        self.read(db, field).map(bytes::Bytes::from)
    }

    fn open_object(&self, db: &DbRef, object: &str) -> Result<Box<dyn ObjectReader>, StorageError> {
        match AdoptedObject::parse(object) {
            Some(o) => self.s3.open(&o),
            None => self.inner.open_object(db, object),
        }
    }

    fn uri(&self, db: &DbRef, object: &str) -> String {
        match AdoptedObject::parse(object) {
            Some(o) => o.uri(),
            None => self.inner.uri(db, object),
        }
    }

    /// The store beneath deletes only objects under its own directory or prefix, where no
    /// adopted object lies ([`AdoptedS3::open_for_adoption`] refuses those).
    fn wipe(&self, db: &DbRef, doit: bool) -> Result<Vec<String>, StorageError> {
        self.inner.wipe(db, doit)
    }

    /// Adopted objects are the user's: purge forgets their entries and never deletes them.
    fn remove(&self, db: &DbRef, objects: &[String]) -> Result<(), StorageError> {
        let own: Vec<String> = objects
            .iter()
            .filter(|o| !is_adopted_object(o))
            .cloned()
            .collect();
        self.inner.remove(db, &own)
    }

    fn object_size(&self, db: &DbRef, object: &str) -> Option<u64> {
        match AdoptedObject::parse(object) {
            Some(o) => self
                .s3
                .client(&o.bucket)
                .ok()?
                .head(&o.key)
                .ok()
                .flatten()
                .map(|m| m.size),
            None => self.inner.object_size(db, object),
        }
    }

    fn side_entries(
        &self,
        db: &DbRef,
        object: &str,
    ) -> Result<super::store::SideMap, StorageError> {
        self.inner.side_entries(db, object)
    }

    fn add_side_entries(
        &self,
        db: &DbRef,
        object: &str,
        entries: &[super::sidecar::SideEntry],
    ) -> Result<(), StorageError> {
        self.inner.add_side_entries(db, object, entries)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn object(key: &str, etag: &str) -> AdoptedObject {
        AdoptedObject {
            bucket: "user-data".into(),
            key: key.into(),
            size: 123_456,
            etag: etag.into(),
        }
    }

    #[test]
    fn names_hold_the_uri_size_and_etag() {
        let o = object("era5/2026/t.grib", "\"9b2cf535f27731c974343645a3985328\"");
        assert_eq!(
            o.object_name(),
            "s3://user-data/era5/2026/t.grib#adopted-s3:123456:\"9b2cf535f27731c974343645a3985328\""
        );
        assert_eq!(o.uri(), "s3://user-data/era5/2026/t.grib");
        assert_eq!(AdoptedObject::parse(&o.object_name()), Some(o));
        // Keys may hold the mark, colons and '#': the last mark is the one.
        let odd = object("a#adopted-s3:1:x/b:c#d", "\"abc-3\"");
        assert_eq!(AdoptedObject::parse(&odd.object_name()), Some(odd));
    }

    #[test]
    fn other_names_are_not_adopted_objects() {
        for name in [
            "host.1.2.3.data",
            "/home/u/f.grib#adopted:10:1700000000000000000",
            "s3://user-data/k",
            "s3://user-data/k#adopted-s3:12",
            "s3://user-data/k#adopted-s3:x:\"e\"",
            "s3://user-data/k#adopted-s3:12:",
            "s3://user-data/#adopted-s3:12:\"e\"",
            "s3://UPPER/k#adopted-s3:12:\"e\"",
            "s3://ab/k#adopted-s3:12:\"e\"",
            "s3:/user-data/k#adopted-s3:12:\"e\"",
            "file:///x#adopted-s3:12:\"e\"",
        ] {
            assert_eq!(AdoptedObject::parse(name), None, "{name}");
            assert!(!is_adopted_object(name), "{name}");
        }
        // An adopted file's name is never taken for an object's, nor the reverse.
        let file = super::super::posix::split_adopted(&object("k", "\"e\"").object_name()).1;
        assert_eq!(file, None);
    }

    #[test]
    fn uris() {
        assert_eq!(split_uri("s3://bucket/a/b"), Some(("bucket", "a/b")));
        for bad in [
            "s3://bucket",
            "s3://bucket/",
            "s3://b/k",
            "http://bucket/k",
            "s3://bu_cket/k",
            "s3://bucket/a\nb",
        ] {
            assert_eq!(split_uri(bad), None, "{bad:?}");
        }
        assert!(is_s3_uri("s3://b/k") && !is_s3_uri("/tmp/s3://x"));
    }

    fn local(extra: &str) -> LocalConfig {
        match crate::model::config::from_yaml_str_with(
            &format!("type: local\nengine: toc\nspaces: [{{roots: [{{path: /r}}]}}]\n{extra}"),
            "t.yaml",
            None,
            &|_| None,
        )
        .unwrap()
        {
            crate::model::config::FdbConfig::Local(l) => l,
            other => panic!("not local: {other:?}"),
        }
    }

    #[test]
    fn the_server_comes_from_the_adopt_section_then_the_store_then_the_environment() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let none = local("");
        let a = AdoptedS3::from_config_with(&none, &env(&[]));
        assert_eq!(a.endpoint(), "https://s3.us-east-1.amazonaws.com");
        let a = AdoptedS3::from_config_with(&none, &env(&[("AWS_REGION", "eu-west-2")]));
        assert_eq!(a.endpoint(), "https://s3.eu-west-2.amazonaws.com");
        let a = AdoptedS3::from_config_with(
            &none,
            &env(&[
                ("AWS_ENDPOINT_URL", "http://general:9000"),
                ("AWS_ENDPOINT_URL_S3", "http://s3only:9000"),
            ]),
        );
        assert_eq!(a.endpoint(), "http://s3only:9000");
        assert_eq!(a.own, None);

        let section =
            local("adopt:\n  s3: {endpoint: 'http://minio:9000/', region: r1, profile: p}\n");
        let a = AdoptedS3::from_config_with(
            &section,
            &env(&[("AWS_ENDPOINT_URL", "http://general:9000")]),
        );
        assert_eq!(a.endpoint(), "http://minio:9000");
        assert_eq!(a.template.region.as_deref(), Some("r1"));
        assert_eq!(a.template.profile.as_deref(), Some("p"));
        assert!(!a.template.create_bucket);

        let store =
            local("store: s3\ns3: {endpoint: http://store:9000, bucket: fields, prefix: ops}\n");
        let a = AdoptedS3::from_config_with(
            &store,
            &env(&[("AWS_ENDPOINT_URL", "http://general:9000")]),
        );
        assert_eq!(a.endpoint(), "http://store:9000");
        assert_eq!(a.own, Some(("fields".into(), "ops/".into())));
        assert_eq!(a.template.prefix, None, "keys are the bucket's own");
        // The store's own objects are never adopted (a wipe would delete them).
        let e = a
            .open_for_adoption("s3://fields/ops/data/x.data")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("store's own bucket and prefix"), "{e}");
        let e = a
            .open_for_adoption("s3:/fields")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(e.contains("not an S3 object's URI"), "{e}");
    }

    proptest! {
        #[test]
        fn names_round_trip(
            bucket in "[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]",
            key in "[^\\p{Cc}]{1,200}",
            size in any::<u64>(),
            etag in "\"?[^#\\p{Cc}]{1,70}\"?",
        ) {
            let o = AdoptedObject { bucket, key, size, etag };
            prop_assert_eq!(AdoptedObject::parse(&o.object_name()), Some(o));
        }

        #[test]
        fn any_name_parses_without_panic(name in "\\PC{0,120}") {
            if let Some(o) = AdoptedObject::parse(&name) {
                prop_assert_eq!(o.object_name(), name);
            }
        }
    }
}
