//! The S3 store: fields' bytes in immutable objects under `data/<db id>/` (docs/s3.md).
//!
//! S3 objects cannot be appended to, and a request costs far more than a byte, so a writer packs
//! every field of one batch (the appends between two syncs) into one object of its own: bytes
//! go out at `sync` with one PUT, or, for a batch larger than a part, as a multipart upload
//! whose parts leave while appends go on. Readers keep a read-ahead window, so reading many
//! small packed fields in object order costs few GETs.

use std::collections::VecDeque;

use bytes::Bytes;
use std::sync::Mutex;
use std::thread::JoinHandle;

use super::client::{Multipart, Part, S3Client};
use crate::storage::{DbRef, FieldRef, ObjectReader, StorageError, Store, StoreWriter};

/// Batches above this go out as multipart uploads, a part of this size at a time.
pub const DEFAULT_PART_SIZE: usize = 16 << 20;
/// S3's smallest part (but the last).
const MIN_PART_SIZE: usize = 5 << 20;
/// Parts in flight per writer: enough to keep a link busy, bounded in memory.
const PARTS_IN_FLIGHT: usize = 4;
/// The read-ahead window never grows past this: a retrieve read in small pieces holds at most
/// this much (the conformance suite bounds a streamed retrieve's heap growth); a caller asking
/// for more at once gets one GET of that size.
const MAX_READ_AHEAD: usize = 512 << 10;
/// A read this close after the window's end still counts as sequential (skipped fields).
const SEQUENTIAL_SLACK: u64 = 64 << 10;

/// Objects in one bucket under the client's prefix. Cheap to clone through its client.
#[derive(Debug, Clone)]
pub struct S3Store {
    client: S3Client,
    part_size: usize,
}

impl S3Store {
    pub fn new(client: S3Client) -> S3Store {
        S3Store {
            client,
            part_size: DEFAULT_PART_SIZE,
        }
    }

    /// A smaller or larger part size (at least 5 MiB, S3's minimum).
    pub fn with_part_size(mut self, bytes: usize) -> S3Store {
        self.part_size = bytes.max(MIN_PART_SIZE);
        self
    }

    pub fn client(&self) -> &S3Client {
        &self.client
    }

    /// `data/<db id without its leading '/'>/`: the database's objects, whatever catalogue
    /// names it.
    pub fn data_prefix(db: &DbRef) -> String {
        let id = db.id.trim_matches('/');
        format!("data/{id}/")
    }

    fn key(db: &DbRef, object: &str) -> String {
        format!("{}{object}", Self::data_prefix(db))
    }
}

impl Store for S3Store {
    fn kind(&self) -> &'static str {
        "s3"
    }

    fn writer(&self, db: &DbRef) -> Result<Box<dyn StoreWriter>, StorageError> {
        Ok(Box::new(S3Writer {
            client: self.client.clone(),
            prefix: Self::data_prefix(db),
            base: crate::storage::names::unique_name(),
            seq: 0,
            part_size: self.part_size,
            batch: Batch::default(),
        }))
    }

    fn read(&self, db: &DbRef, field: &FieldRef) -> Result<Vec<u8>, StorageError> {
        let key = Self::key(db, &field.object);
        let len = usize::try_from(field.length).map_err(|_| StorageError::S3 {
            op: "get_range",
            uri: self.client.uri(&key),
            status: None,
            detail: format!("field length {} does not fit in memory", field.length),
        })?;
        let mut buf = vec![0u8; len];
        let n = self.client.get_range(&key, field.offset, &mut buf)?;
        if n < len {
            return Err(StorageError::Corrupt {
                path: self.client.uri(&key).into(),
                offset: field.offset,
                detail: format!("object ends {} bytes into a field of {len}", n),
            });
        }
        field.verify(
            crate::checksum::crc32c(&buf),
            || self.client.uri(&key),
            || "?".into(),
        )?;
        Ok(buf)
    }

    fn open_object(&self, db: &DbRef, object: &str) -> Result<Box<dyn ObjectReader>, StorageError> {
        Ok(Box::new(S3Object {
            client: self.client.clone(),
            key: Self::key(db, object),
            if_match: None,
            window: Mutex::new(Window::default()),
        }))
    }

    fn uri(&self, db: &DbRef, object: &str) -> String {
        self.client.uri(&Self::key(db, object))
    }

    /// Objects younger than the grace period stay (a reader that opened before the wipe may
    /// still be streaming them) and are reported deferred: a later wipe or purge deletes them.
    fn wipe(&self, db: &DbRef, doit: bool) -> Result<Vec<String>, StorageError> {
        let grace = self.client.grace();
        let (mut old, mut young) = (Vec::new(), Vec::new());
        for m in self.client.list(&Self::data_prefix(db)) {
            let m = m?;
            let aged = std::time::SystemTime::now()
                .duration_since(m.last_modified)
                .is_ok_and(|age| age >= grace);
            if aged {
                old.push(m.key)
            } else {
                young.push(m.key)
            }
        }
        if doit {
            self.client.delete_many(&old)?;
        }
        old.sort();
        young.sort();
        let mut out: Vec<String> = old.iter().map(|k| self.client.uri(k)).collect();
        out.extend(young.iter().map(|k| {
            format!(
                "{} (deferred: younger than the grace period; a later wipe or purge deletes it)",
                self.client.uri(k)
            )
        }));
        Ok(out)
    }

    /// Objects are immutable and never shared between writers, so an unreferenced one can go.
    fn remove(&self, db: &DbRef, objects: &[String]) -> Result<(), StorageError> {
        let keys: Vec<String> = objects.iter().map(|o| Self::key(db, o)).collect();
        self.client.delete_many(&keys)
    }

    fn object_size(&self, db: &DbRef, object: &str) -> Option<u64> {
        self.client
            .head(&Self::key(db, object))
            .ok()
            .flatten()
            .map(|m| m.size)
    }
}

/// The appends since the last sync.
#[derive(Default)]
struct Batch {
    /// Bytes not yet handed to an upload.
    buf: Vec<u8>,
    /// Bytes already handed to parts.
    sent: u64,
    upload: Option<Upload>,
    fields: usize,
}

struct Upload {
    multipart: Multipart,
    next_part: u16,
    in_flight: VecDeque<JoinHandle<Result<Part, StorageError>>>,
    done: Vec<Part>,
    /// The first part that failed: reported at sync.
    failed: Option<StorageError>,
}

impl Upload {
    /// Waits for the oldest part in flight.
    fn join_one(&mut self) {
        let Some(h) = self.in_flight.pop_front() else {
            return;
        };
        let result = h.join().unwrap_or_else(|_| {
            Err(StorageError::S3 {
                op: "put_part",
                uri: self.multipart.uri(),
                status: None,
                detail: "the upload thread panicked".into(),
            })
        });
        match result {
            Ok(p) => self.done.push(p),
            Err(e) => {
                if self.failed.is_none() {
                    self.failed = Some(e);
                }
            }
        }
    }

    fn join_all(&mut self) {
        while !self.in_flight.is_empty() {
            self.join_one();
        }
    }

    /// Sends one part on a thread of its own, after waiting when too many are out.
    fn send(&mut self, bytes: Bytes) {
        while self.in_flight.len() >= PARTS_IN_FLIGHT {
            self.join_one();
        }
        let number = self.next_part;
        self.next_part += 1;
        let mp = self.multipart.clone();
        self.in_flight
            .push_back(std::thread::spawn(move || mp.put_part(number, &bytes)));
    }
}

/// Writes one object per batch: `<host>.<pid>.<time>.<n>.<seq>.data`.
struct S3Writer {
    client: S3Client,
    prefix: String,
    base: String,
    seq: u64,
    part_size: usize,
    batch: Batch,
}

impl S3Writer {
    fn object(&self) -> String {
        format!("{}.{}.data", self.base, self.seq)
    }

    /// The batch's multipart upload, begun on its first part.
    fn start_upload(&mut self, object: &str) -> Result<(), StorageError> {
        if self.batch.upload.is_none() {
            let key = format!("{}{object}", self.prefix);
            self.batch.upload = Some(Upload {
                multipart: self.client.multipart(&key)?,
                next_part: 1,
                in_flight: VecDeque::new(),
                done: Vec::new(),
                failed: None,
            });
        }
        Ok(())
    }

    /// Ends the batch, whatever happened to it: the next appends go to a new object.
    fn next_batch(&mut self) -> Batch {
        self.seq += 1;
        std::mem::take(&mut self.batch)
    }

    fn finish(&self, mut batch: Batch, key: &str) -> Result<(), StorageError> {
        let Some(mut up) = batch.upload.take() else {
            return self.client.put(key, &batch.buf);
        };
        if !batch.buf.is_empty() && up.failed.is_none() {
            up.send(Bytes::from(std::mem::take(&mut batch.buf)));
        }
        up.join_all();
        if let Some(e) = up.failed.take() {
            let _ = up.multipart.abort();
            return Err(e);
        }
        let parts = std::mem::take(&mut up.done);
        let mp = up.multipart.clone();
        if let Err(e) = mp.complete(&parts) {
            let _ = up.multipart.abort();
            return Err(e);
        }
        Ok(())
    }
}

impl StoreWriter for S3Writer {
    fn append(&mut self, data: &[u8]) -> Result<FieldRef, StorageError> {
        let checksum = crate::checksum::crc32c(data);
        let offset = self.batch.sent + self.batch.buf.len() as u64;
        if self.batch.buf.capacity() == 0 {
            // A part's worth at once (address space only until written): growing by doubling
            // copied each part about twice more and faulted in twice its pages.
            self.batch.buf.reserve(self.part_size.max(data.len()));
        }
        self.batch.buf.extend_from_slice(data);
        self.batch.fields += 1;
        let object = self.object();
        while self.batch.buf.len() >= self.part_size {
            self.start_upload(&object)?;
            let mut rest =
                Vec::with_capacity(self.part_size.max(self.batch.buf.len() - self.part_size));
            rest.extend_from_slice(&self.batch.buf[self.part_size..]);
            self.batch.buf.truncate(self.part_size);
            let part = std::mem::replace(&mut self.batch.buf, rest);
            self.batch.sent += part.len() as u64;
            if let Some(up) = self.batch.upload.as_mut() {
                up.send(Bytes::from(part));
            }
        }
        Ok(FieldRef {
            object,
            offset,
            length: data.len() as u64,
            checksum: Some(checksum),
            extract: None,
        })
    }

    /// Bytes of a part's size or more with nothing waiting before them (a move's run of
    /// fields) go as a part of their own, uncopied; anything else is appended as `append` does.
    fn append_shared(
        &mut self,
        data: Bytes,
        checksum: Option<u32>,
    ) -> Result<FieldRef, StorageError> {
        if !self.batch.buf.is_empty() || data.len() < MIN_PART_SIZE {
            let mut r = self.append(&data)?;
            if checksum.is_some() {
                r.checksum = checksum;
            }
            return Ok(r);
        }
        let checksum = checksum.unwrap_or_else(|| crate::checksum::crc32c(&data));
        let object = self.object();
        self.start_upload(&object)?;
        let offset = self.batch.sent;
        let length = data.len() as u64;
        self.batch.sent += length;
        self.batch.fields += 1;
        if let Some(up) = self.batch.upload.as_mut() {
            up.send(data);
        }
        Ok(FieldRef {
            object,
            offset,
            length,
            checksum: Some(checksum),
            extract: None,
        })
    }

    /// Returns once the object is durable (the PUT or Complete answered). A failed sync aborts
    /// the multipart upload, so no part of the batch becomes visible.
    fn sync(&mut self) -> Result<(), StorageError> {
        if self.batch.fields == 0 {
            return Ok(());
        }
        let key = format!("{}{}", self.prefix, self.object());
        let batch = self.next_batch();
        self.finish(batch, &key)
    }
}

impl Drop for S3Writer {
    /// A writer dropped without sync leaves no upload behind.
    fn drop(&mut self) {
        if let Some(mut up) = self.batch.upload.take() {
            up.join_all();
            let _ = up.multipart.abort();
        }
    }
}

/// The bytes of the last GET, and how large the next one may be.
#[derive(Default)]
struct Window {
    start: u64,
    data: Vec<u8>,
    /// Where the object ends, once a GET came back short.
    end: Option<u64>,
    /// Size of the last GET.
    last: usize,
}

/// An object opened for reads, with a read-ahead window: the first GET asks for what the
/// caller wants, each read that follows on grows the next GET (doubling, up to 512 KiB), and a
/// read elsewhere starts small again.
struct S3Object {
    client: S3Client,
    key: String,
    /// The ETag every GET must find (an object adopted where it lies): a read of an object
    /// written anew under the key fails instead of mixing its bytes with the old one's.
    if_match: Option<String>,
    window: Mutex<Window>,
}

/// `key` of `client`'s bucket opened for reads with the store's read-ahead, every GET sent
/// with `If-Match: etag` (see [`S3Client::get_range_matching`]): how objects adopted where they
/// lie are read, with the same request pattern as the store's own.
pub(crate) fn open_matching(client: S3Client, key: &str, etag: &str) -> Box<dyn ObjectReader> {
    Box::new(S3Object {
        client,
        key: key.to_string(),
        if_match: Some(etag.to_string()),
        window: Mutex::new(Window::default()),
    })
}

/// A read at least this large is split into ranged GETs in flight together: one HTTP stream
/// leaves most of a server's (and a link's) bandwidth unused.
const PARALLEL_READ: usize = 4 << 20;
/// The smallest range a split read asks for.
const MIN_RANGE: usize = 2 << 20;

impl S3Object {
    fn get_range(&self, pos: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
        self.client
            .get_range_matching(&self.key, pos, buf, self.if_match.as_deref())
    }

    /// Fills `buf` from `pos` with up to [`PARTS_IN_FLIGHT`] GETs at once, each into its own
    /// part of the caller's buffer; short only at the object's end.
    fn get_parallel(&self, pos: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
        if buf.len() < PARALLEL_READ {
            return self.get_range(pos, buf);
        }
        let range = buf.len().div_ceil(PARTS_IN_FLIGHT).max(MIN_RANGE);
        let results: Vec<(usize, Result<usize, StorageError>)> = std::thread::scope(|s| {
            let handles: Vec<_> = buf
                .chunks_mut(range)
                .enumerate()
                .map(|(i, chunk)| {
                    let len = chunk.len();
                    let at = pos + (i * range) as u64;
                    (len, s.spawn(move || self.get_range(at, chunk)))
                })
                .collect();
            handles
                .into_iter()
                .map(|(len, h)| {
                    let r = h.join().unwrap_or_else(|_| {
                        Err(StorageError::S3 {
                            op: "GET",
                            uri: self.client.uri(&self.key),
                            status: None,
                            detail: "a ranged read's thread panicked".into(),
                        })
                    });
                    (len, r)
                })
                .collect()
        });
        let mut filled = 0;
        for (len, r) in results {
            let n = r?;
            filled += n;
            if n < len {
                // The object ends here; later ranges found nothing.
                break;
            }
        }
        Ok(filled)
    }
}

impl ObjectReader for S3Object {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
        let mut w = self.window.lock().unwrap_or_else(|p| p.into_inner());
        let mut filled = 0;
        while filled < buf.len() {
            let pos = offset + filled as u64;
            let w_end = w.start + w.data.len() as u64;
            if pos >= w.start && pos < w_end {
                let from = (pos - w.start) as usize;
                let n = (w.data.len() - from).min(buf.len() - filled);
                buf[filled..filled + n].copy_from_slice(&w.data[from..from + n]);
                filled += n;
                continue;
            }
            if w.end.is_some_and(|e| pos >= e) {
                break;
            }
            let want = buf.len() - filled;
            if want >= MAX_READ_AHEAD {
                // A read this large needs no read-ahead: the bytes go straight into the
                // caller's buffer, one GET, no copy.
                let n = self.get_parallel(pos, &mut buf[filled..])?;
                filled += n;
                if n < want {
                    w.end = Some(pos + n as u64);
                    break;
                }
                continue;
            }
            let sequential = w.last > 0 && pos >= w.start && pos <= w_end + SEQUENTIAL_SLACK;
            let size = if sequential {
                (w.last * 2).max(want).min(MAX_READ_AHEAD.max(want))
            } else {
                want
            };
            // The old window goes first, so only one is held at a time.
            w.data = Vec::new();
            let mut data = vec![0u8; size];
            let n = self.get_range(pos, &mut data)?;
            data.truncate(n);
            if n < size {
                w.end = Some(pos + n as u64);
            }
            w.start = pos;
            w.data = data;
            w.last = size;
            if n == 0 {
                break;
            }
        }
        Ok(filled)
    }
}
