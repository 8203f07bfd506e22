//! The archive pipeline shared by `fieldstore write` and the bindings' archive calls (Python's
//! `archive(bytes)`, C's `fdb_archive_multiple`): GRIB messages framed out of a buffer, a mapped
//! file or a stream, their MARS keys decoded on all cores, archived in input order through any
//! [`Fdb`].
//!
//! Nothing here flushes: what was archived becomes visible when the caller flushes the handle,
//! so a caller can make several inputs one all-or-nothing unit (the CLI flushes once, after its
//! last file) or drop everything after an error by not flushing.

use std::fs::File;
use std::io::Read;
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use super::error::ApiError;
use super::fdb::Fdb;
use crate::grib::framing::FramedSlice;
use crate::grib::{mars_keys, GribError, GribMessage, MessageReader, Skipped, SliceMessages};
use crate::model::Key;

/// Messages per batch: enough to keep every core decoding.
const BATCH: usize = 256;
/// Small enough that large fields' buffers come back to the reader soon (fresh memory costs page
/// faults and zeroing), large enough to decode several at once.
const BATCH_BYTES: usize = 16 << 20;
/// Below this many messages a batch is decoded on the calling thread: spawning costs more.
const PARALLEL_MIN: usize = 8;

/// Why an archive stopped. Messages before the failing one were archived (not flushed).
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// The input does not frame as GRIB; the error names the source, message and offset.
    #[error(transparent)]
    Framing(#[from] GribError),
    /// A message framed but its keys could not be read, or the store refused it.
    #[error("{source_name}: message {message} at offset {offset}")]
    Message {
        source_name: String,
        /// 1-based position in the input.
        message: usize,
        offset: u64,
        #[source]
        cause: Box<ApiError>,
    },
    /// The input file could not be opened, inspected or mapped.
    #[error("cannot {action} {path}")]
    Input {
        action: &'static str,
        path: String,
        #[source]
        cause: std::io::Error,
    },
    /// An S3 object could not be adopted (not found, refused, unreachable...).
    #[error("cannot adopt {uri}")]
    Adopt {
        uri: String,
        #[source]
        cause: Box<ApiError>,
    },
    /// One of the pipeline's threads died: a bug, not bad input.
    #[error("the {0} thread of the archive pipeline panicked")]
    Thread(&'static str),
}

impl ArchiveError {
    /// The kind of the error behind it: a binding maps this, not the message text.
    pub fn kind(&self) -> crate::ErrorKind {
        match self {
            ArchiveError::Framing(e) => e.kind(),
            ArchiveError::Message { cause, .. } | ArchiveError::Adopt { cause, .. } => cause.kind(),
            ArchiveError::Input { cause, .. } => match cause.kind() {
                std::io::ErrorKind::NotFound => crate::ErrorKind::NotFound,
                std::io::ErrorKind::PermissionDenied => crate::ErrorKind::Permission,
                _ => crate::ErrorKind::Io,
            },
            ArchiveError::Thread(_) => crate::ErrorKind::Internal,
        }
    }
}

/// What one archive call did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ArchiveSummary {
    pub messages: u64,
    /// Bytes of the messages archived (from `GRIB` to `7777`).
    pub bytes: u64,
    /// What framing skipped between messages (padding silently, other bytes with a warning).
    pub skipped: Skipped,
}

impl std::ops::AddAssign for ArchiveSummary {
    fn add_assign(&mut self, o: ArchiveSummary) {
        self.messages += o.messages;
        self.bytes += o.bytes;
        self.skipped.padding += o.skipped.padding;
        self.skipped.other += o.skipped.other;
        self.skipped.stretches += o.skipped.stretches;
    }
}

/// One message about to be archived, as the progress callback sees it.
#[derive(Debug, Clone, Copy)]
pub struct MessageProgress<'m> {
    /// The input's name, as errors give it.
    pub source: &'m str,
    /// 1-based position in the input.
    pub number: usize,
    pub offset: u64,
    pub length: u64,
    /// The key it is archived under: the given one, or the one read from the message.
    pub key: &'m Key,
}

type Callback<'a> = Box<dyn FnMut(&MessageProgress<'_>) + Send + 'a>;
type KeyCheck<'a> = Box<dyn Fn(&Key) -> Result<(), ApiError> + Send + Sync + 'a>;

/// Archives every GRIB message of an input through one handle. Reusable for several inputs.
pub struct Archiver<'a> {
    fdb: &'a dyn Fdb,
    key: Option<Key>,
    threads: usize,
    on_message: Option<Callback<'a>>,
    validate_first: bool,
    check: Option<KeyCheck<'a>>,
    /// Set while a file is adopted: the store's object naming it.
    adopting: Option<String>,
}

/// A batch of framed messages and, unless a key was given, their decoded keys.
type Framed<'m> = (Vec<FramedSlice<'m>>, Vec<Result<Key, GribError>>);

impl<'a> Archiver<'a> {
    /// Decodes keys on as many threads as the machine has cores.
    pub fn new(fdb: &'a dyn Fdb) -> Self {
        Archiver {
            fdb,
            key: None,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            on_message: None,
            validate_first: false,
            check: None,
            adopting: None,
        }
    }

    /// All or nothing for `archive_slice`: every message is framed and its keys decoded (and
    /// checked) before the first is archived, so bad input archives nothing. A binding wants
    /// this: its caller cannot tell which messages of a failed call went in.
    pub fn validate_first(mut self, on: bool) -> Self {
        self.validate_first = on;
        self
    }

    /// Run on every decoded key during the `validate_first` pass (e.g. the schema's split), so
    /// a message the store would refuse fails the whole call before anything is archived.
    pub fn check(mut self, f: impl Fn(&Key) -> Result<(), ApiError> + Send + Sync + 'a) -> Self {
        self.check = Some(Box::new(f));
        self
    }

    /// Archives every message under this key (`Fdb::archive` with a key), which must agree with
    /// what each message says of itself; without one, each message's own MARS keys are used.
    pub fn key(mut self, key: Option<Key>) -> Self {
        self.key = key;
        self
    }

    /// Threads decoding keys (at least one).
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads.max(1);
        self
    }

    /// Called on the caller's thread just before each message is archived, in input order.
    pub fn on_message(mut self, f: impl FnMut(&MessageProgress<'_>) + Send + 'a) -> Self {
        self.on_message = Some(Box::new(f));
        self
    }

    /// Archives the messages of a buffer the caller owns, without copying them: framing and key
    /// decoding of the next batch overlap the archiving of this one.
    pub fn archive_slice(
        &mut self,
        data: &[u8],
        source: &str,
    ) -> Result<ArchiveSummary, ArchiveError> {
        let threads = self.threads;
        let decode = self.key.is_none();
        if self.validate_first {
            return self.archive_slice_validated(data, source);
        }
        let mut messages = SliceMessages::new(data, source);
        let first = next_slice_batch(&mut messages, threads, decode);
        let mut summary = ArchiveSummary::default();
        if let Some(end) = first.end {
            // All of it in one batch (a binding's single field, a small file): no thread.
            let (batch, keys) = first.framed;
            self.archive_batch(&batch, keys, source, &mut summary)?;
            end?;
            summary.skipped = messages.skipped();
            return Ok(summary);
        }
        std::thread::scope(|scope| {
            let (tx, rx) = sync_channel::<Result<Framed<'_>, GribError>>(1);
            let framer = scope.spawn(move || frame_slices(messages, threads, decode, tx));
            let (batch, keys) = first.framed;
            let result = match self.archive_batch(&batch, keys, source, &mut summary) {
                // The framer must not wait to hand over a batch nobody will take.
                Err(e) => {
                    drop(rx);
                    Err(e)
                }
                Ok(()) => rx.into_iter().try_for_each(|framed| {
                    let (batch, keys) = framed?;
                    self.archive_batch(&batch, keys, source, &mut summary)
                }),
            };
            let joined = framer.join();
            result?;
            summary.skipped = joined.map_err(|_| ArchiveError::Thread("framing"))?;
            Ok(summary)
        })
    }

    /// `archive_slice` in two passes: frame and decode everything, then archive.
    fn archive_slice_validated(
        &mut self,
        data: &[u8],
        source: &str,
    ) -> Result<ArchiveSummary, ArchiveError> {
        let mut messages = SliceMessages::new(data, source);
        let framed = messages.by_ref().collect::<Result<Vec<_>, _>>()?;
        let mut keys = Vec::with_capacity(framed.len());
        if self.key.is_none() {
            for batch in framed.chunks(BATCH) {
                keys.extend(decode_keys(batch, self.threads));
            }
        }
        let failed = |m: &FramedSlice<'_>, cause: ApiError| ArchiveError::Message {
            source_name: source.to_string(),
            message: m.0,
            offset: m.1,
            cause: Box::new(cause),
        };
        for (m, key) in framed.iter().zip(&keys) {
            let key = key.as_ref().map_err(|e| failed(m, e.clone().into()))?;
            if let Some(check) = &self.check {
                check(key).map_err(|e| failed(m, e))?;
            }
        }
        if let (Some(k), Some(check)) = (&self.key, &self.check) {
            if let Some(m) = framed.first() {
                check(k).map_err(|e| failed(m, e))?;
            }
        }
        let mut summary = ArchiveSummary::default();
        let mut keys = keys.into_iter();
        for batch in framed.chunks(BATCH) {
            let batch_keys = keys.by_ref().take(batch.len()).collect();
            self.archive_batch(batch, batch_keys, source, &mut summary)?;
        }
        summary.skipped = messages.skipped();
        Ok(summary)
    }

    /// A regular file is mapped, not read: its messages are archived (or sent to a server) from
    /// the page cache without a copy into this process first. Anything else (a FIFO, a device,
    /// an empty file) is read as a stream. Truncating a file while it is being archived kills
    /// the process with SIGBUS, as with any mapped input.
    pub fn archive_path(&mut self, path: &Path) -> Result<ArchiveSummary, ArchiveError> {
        let name = path.display().to_string();
        let failed = |action, cause| ArchiveError::Input {
            action,
            path: name.clone(),
            cause,
        };
        let file = File::open(path).map_err(|e| failed("open", e))?;
        let meta = file.metadata().map_err(|e| failed("stat", e))?;
        if !meta.is_file() || meta.len() == 0 {
            return self.archive_reader(file, &name);
        }
        // SAFETY: the map is read-only and lives only for this call; see above for truncation.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| failed("map", e))?;
        let _ = map.advise(memmap2::Advice::Sequential);
        self.archive_slice(&map, &name)
    }

    /// Indexes every message of a regular file where it lies (`fieldstore adopt`): the catalogue
    /// points into the file, which must stay as it is (its size and modification time are
    /// recorded; a read after it changed fails naming it). No byte is copied.
    pub fn adopt_path(&mut self, path: &Path) -> Result<ArchiveSummary, ArchiveError> {
        let name = path.display().to_string();
        let failed = |action, cause| ArchiveError::Input {
            action,
            path: name.clone(),
            cause,
        };
        let full = std::fs::canonicalize(path).map_err(|e| failed("open", e))?;
        let file = File::open(&full).map_err(|e| failed("open", e))?;
        let meta = file.metadata().map_err(|e| failed("stat", e))?;
        if !meta.is_file() {
            return Err(failed(
                "adopt",
                std::io::Error::other(
                    "only regular files can be adopted (copy a stream with `fieldstore write`)",
                ),
            ));
        }
        let modified = meta.modified().map_err(|e| failed("stat", e))?;
        // SAFETY: read-only and only for this call; a file truncated meanwhile is the user's
        // to keep as adopted, and its size is checked again on every read.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| failed("map", e))?;
        self.adopting = Some(crate::storage::adopted_object(&full, meta.len(), modified));
        let result = self.archive_slice(&map, &name);
        self.adopting = None;
        result
    }

    /// Indexes every message of an S3 object where it lies (`fieldstore adopt s3://BUCKET/KEY`):
    /// as [`Archiver::adopt_path`], with the object's size and ETag recorded. The object is
    /// streamed by ranged GETs (never held whole), each insisting on the ETag its HEAD gave, so
    /// an object written anew while it is being adopted fails the adoption.
    pub fn adopt_object(&mut self, uri: &str) -> Result<ArchiveSummary, ArchiveError> {
        let source = self
            .fdb
            .open_adoptable(uri)
            .map_err(|cause| ArchiveError::Adopt {
                uri: uri.to_string(),
                cause: Box::new(cause),
            })?;
        self.adopting = Some(source.object);
        let result = self.archive_reader(source.reader, &source.uri);
        self.adopting = None;
        result
    }

    /// Standard input, pipes, sockets: a thread reads the next batch while this one is
    /// archived, into the buffers of messages already archived. Memory: at most three batches.
    pub fn archive_reader<R: Read + Send>(
        &mut self,
        reader: R,
        source: &str,
    ) -> Result<ArchiveSummary, ArchiveError> {
        std::thread::scope(|scope| {
            let (tx, rx) = sync_channel::<Result<Vec<GribMessage>, GribError>>(1);
            let (spare_tx, spare_rx) = sync_channel::<Vec<u8>>(BATCH);
            let reader = scope.spawn(move || read_batches(reader, source, spare_rx, tx));
            let mut summary = ArchiveSummary::default();
            let result: Result<(), ArchiveError> = rx.into_iter().try_for_each(|batch| {
                let batch = batch?;
                let slices: Vec<FramedSlice<'_>> = batch
                    .iter()
                    .map(|m| (m.number, m.offset, m.bytes.as_slice()))
                    .collect();
                let keys = if self.key.is_none() {
                    decode_keys(&slices, self.threads)
                } else {
                    Vec::new()
                };
                self.archive_batch(&slices, keys, source, &mut summary)?;
                drop(slices);
                for msg in batch {
                    let _ = spare_tx.try_send(msg.bytes);
                }
                Ok(())
            });
            // The reader may wait to hand over a batch nobody will take now.
            drop(spare_tx);
            let joined = reader.join();
            result?;
            summary.skipped = joined.map_err(|_| ArchiveError::Thread("reading"))?;
            Ok(summary)
        })
    }

    /// Archives one batch in input order, under the given key or the keys decoded for it.
    fn archive_batch(
        &mut self,
        batch: &[FramedSlice<'_>],
        keys: Vec<Result<Key, GribError>>,
        source: &str,
        summary: &mut ArchiveSummary,
    ) -> Result<(), ArchiveError> {
        let mut keys = keys.into_iter();
        for &(number, offset, bytes) in batch {
            let failed = |cause: ApiError| ArchiveError::Message {
                source_name: source.to_string(),
                message: number,
                offset,
                cause: Box::new(cause),
            };
            let decoded;
            let key = match &self.key {
                Some(k) => k,
                None => {
                    decoded = keys
                        .next()
                        .unwrap_or_else(|| Err(GribError::Decode("no key decoded".into())))
                        .map_err(|e| failed(e.into()))?;
                    &decoded
                }
            };
            if let Some(f) = self.on_message.as_mut() {
                f(&MessageProgress {
                    source,
                    number,
                    offset,
                    length: bytes.len() as u64,
                    key,
                });
            }
            match (&self.adopting, &self.key) {
                (Some(object), _) => self.fdb.adopt_grib(key, object, offset, bytes),
                (None, Some(k)) => self.fdb.archive(Some(k), bytes),
                (None, None) => self.fdb.archive_grib(key, bytes),
            }
            .map_err(failed)?;
            summary.messages += 1;
            summary.bytes += bytes.len() as u64;
        }
        Ok(())
    }
}

/// A batch framed out of a slice, and how the input ended if it ended with this batch: `Ok` at
/// its end, or the framing error that stopped it (after the messages before it).
struct SliceBatch<'m> {
    framed: Framed<'m>,
    end: Option<Result<(), GribError>>,
}

/// Frames the next batch, decodes its keys (ecCodes, ~0.5 ms a message, on all cores) and maps
/// its pages in, so the archiving thread does nothing but archive.
fn next_slice_batch<'m>(
    messages: &mut SliceMessages<'m>,
    threads: usize,
    decode: bool,
) -> SliceBatch<'m> {
    let mut batch = Vec::with_capacity(BATCH);
    let mut batch_bytes = 0usize;
    let mut end = None;
    while batch.len() < BATCH && batch_bytes < BATCH_BYTES {
        match messages.next() {
            Some(Ok(m)) => {
                batch_bytes += m.2.len();
                batch.push(m);
            }
            Some(Err(e)) => {
                end = Some(Err(e));
                break;
            }
            None => {
                end = Some(Ok(()));
                break;
            }
        }
    }
    let keys = if decode && !batch.is_empty() {
        decode_keys(&batch, threads)
    } else {
        Vec::new()
    };
    for (_, _, bytes) in &batch {
        for page in bytes.iter().step_by(4096) {
            std::hint::black_box(*page);
        }
    }
    SliceBatch {
        framed: (batch, keys),
        end,
    }
}

/// The framing thread of `archive_slice`, one batch ahead of the archiving thread. What came
/// before a framing error is sent first, then the error.
fn frame_slices<'m>(
    mut messages: SliceMessages<'m>,
    threads: usize,
    decode: bool,
    tx: SyncSender<Result<Framed<'m>, GribError>>,
) -> Skipped {
    loop {
        let SliceBatch { framed, end } = next_slice_batch(&mut messages, threads, decode);
        if !framed.0.is_empty() && tx.send(Ok(framed)).is_err() {
            break;
        }
        match end {
            Some(Err(e)) => {
                let _ = tx.send(Err(e));
                break;
            }
            Some(Ok(())) => break,
            None => {}
        }
    }
    messages.skipped()
}

/// The reading thread of `archive_reader`: batches of messages, each read into a spare buffer
/// when one came back. What came before a framing error is sent first, then the error.
fn read_batches<R: Read>(
    reader: R,
    source: &str,
    spares: Receiver<Vec<u8>>,
    tx: SyncSender<Result<Vec<GribMessage>, GribError>>,
) -> Skipped {
    let mut messages = MessageReader::new(reader, source).recycling(spares);
    loop {
        let mut batch = Vec::with_capacity(BATCH);
        let mut batch_bytes = 0usize;
        while batch.len() < BATCH && batch_bytes < BATCH_BYTES {
            match messages.next() {
                Some(Ok(m)) => {
                    batch_bytes += m.bytes.len();
                    batch.push(m);
                }
                Some(Err(e)) => {
                    let _ = tx.send(Ok(batch));
                    let _ = tx.send(Err(e));
                    return messages.skipped();
                }
                None => break,
            }
        }
        if batch.is_empty() || tx.send(Ok(batch)).is_err() {
            return messages.skipped();
        }
    }
}

/// MARS keys of each message, decoded on `threads` threads, in input order.
fn decode_keys(batch: &[FramedSlice<'_>], threads: usize) -> Vec<Result<Key, GribError>> {
    if threads <= 1 || batch.len() < PARALLEL_MIN {
        return batch.iter().map(|m| mars_keys(m.2)).collect();
    }
    let chunk = batch.len().div_ceil(threads);
    std::thread::scope(|s| {
        let handles: Vec<_> = batch
            .chunks(chunk)
            .map(|c| {
                (
                    c.len(),
                    s.spawn(move || c.iter().map(|m| mars_keys(m.2)).collect::<Vec<_>>()),
                )
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|(len, h)| {
                // Keep one result per message even if a thread died, so none is skipped.
                h.join().unwrap_or_else(|_| {
                    (0..len)
                        .map(|_| Err(GribError::Decode("a decoding thread panicked".into())))
                        .collect()
                })
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::local;
    use crate::api::ListOptions;
    use crate::grib::sample::make_field;
    use crate::model::request::Request;

    fn field(step: usize) -> Vec<u8> {
        let step = step.to_string();
        let keys = [
            ("class", "od"),
            ("expver", "0001"),
            ("stream", "oper"),
            ("date", "20261122"),
            ("time", "1200"),
            ("type", "fc"),
            ("levtype", "pl"),
            ("step", step.as_str()),
            ("levelist", "500"),
            ("param", "130"),
        ];
        make_field(&keys, 10, step.len() as u64).unwrap()
    }

    fn listed(fdb: &dyn Fdb) -> usize {
        let opts = ListOptions {
            include_masked: false,
            depth: 3,
        };
        fdb.list(&Request::default(), opts).unwrap().count()
    }

    /// (number, offset, length, step) of each message the callback saw.
    type Seen = Vec<(usize, u64, u64, String)>;

    fn recording<'s>(seen: &'s mut Seen) -> impl FnMut(&MessageProgress<'_>) + Send + 's {
        |m| {
            let step = m.key.get("step").unwrap_or("").to_string();
            seen.push((m.number, m.offset, m.length, step));
        }
    }

    #[test]
    fn a_slice_with_junk_between_messages_archives_every_message_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let fdb = local(dir.path());
        let (a, b, c) = (field(0), field(6), field(12));
        let mut data = a.clone();
        data.extend_from_slice(b"this is not grib");
        data.extend_from_slice(&b);
        data.extend_from_slice(&[0; 8]);
        data.extend_from_slice(&c);
        let mut seen = Seen::new();
        let summary = Archiver::new(&*fdb)
            .on_message(recording(&mut seen))
            .archive_slice(&data, "buf")
            .unwrap();
        let (la, lb) = (a.len() as u64, b.len() as u64);
        assert_eq!(
            seen,
            vec![
                (1, 0, la, "0".into()),
                (2, la + 16, lb, "6".into()),
                (3, la + 16 + lb + 8, c.len() as u64, "12".into()),
            ]
        );
        assert_eq!(summary.messages, 3);
        assert_eq!(summary.bytes, la + lb + c.len() as u64);
        assert_eq!(
            summary.skipped,
            Skipped {
                padding: 8,
                other: 16,
                stretches: 1
            }
        );
        // Nothing is visible until the caller flushes.
        assert_eq!(listed(&*fdb), 0);
        fdb.flush().unwrap();
        assert_eq!(listed(&*fdb), 3);
    }

    #[test]
    fn a_given_key_applies_to_every_message_and_must_agree_with_each() {
        let dir = tempfile::tempdir().unwrap();
        let fdb = local(dir.path());
        let key = Key::parse("class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step=6,levelist=500,param=130").unwrap();
        let mut data = field(6);
        data.extend_from_slice(&field(6));
        data.extend_from_slice(&field(12));
        let mut seen = Seen::new();
        let e = Archiver::new(&*fdb)
            .key(Some(key))
            .on_message(recording(&mut seen))
            .archive_slice(&data, "buf")
            .unwrap_err();
        let offset = 2 * field(6).len() as u64;
        match &e {
            ArchiveError::Message {
                message: 3,
                offset: o,
                cause,
                ..
            } if *o == offset
                && matches!(&**cause, ApiError::KeyMismatch { keyword, .. } if keyword == "step") =>
                {}
            other => panic!("{other:?}"),
        }
        assert_eq!(e.to_string(), format!("buf: message 3 at offset {offset}"));
        // The callback sees the given key, also for the message that disagrees.
        assert_eq!(
            seen.iter().map(|s| s.3.as_str()).collect::<Vec<_>>(),
            ["6"; 3]
        );
    }

    #[test]
    fn a_message_cut_short_mid_buffer_is_named_after_the_ones_before_are_archived() {
        let dir = tempfile::tempdir().unwrap();
        let fdb = local(dir.path());
        let mut data: Vec<u8> = [0, 6, 12].iter().flat_map(|&s| field(s)).collect();
        let third = (data.len() - field(12).len()) as u64;
        data.truncate(data.len() - 10);
        for threads in [1, 2] {
            let mut seen = Seen::new();
            let e = Archiver::new(&*fdb)
                .threads(threads)
                .on_message(recording(&mut seen))
                .archive_slice(&data, "buf")
                .unwrap_err();
            match e {
                ArchiveError::Framing(GribError::Truncated {
                    message: 3, offset, ..
                }) if offset == third => {}
                other => panic!("{other:?}"),
            }
            assert_eq!(seen.len(), 2);
        }
        // The same from a stream.
        let e = Archiver::new(&*fdb)
            .archive_reader(&data[..], "pipe")
            .unwrap_err();
        assert!(
            e.to_string()
                .starts_with(&format!("pipe: message 3 at offset {third} is truncated")),
            "{e}"
        );
    }

    #[test]
    fn a_message_that_frames_but_does_not_decode_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let fdb = local(dir.path());
        let mut data = field(0);
        let at = data.len() as u64;
        // Framed GRIB2 (length, 7777) whose sections are nonsense.
        let len = 16u64 + 8 + 4;
        data.extend_from_slice(b"GRIB\0\0\0\x02");
        data.extend_from_slice(&len.to_be_bytes());
        data.extend_from_slice(&[0xAB; 8]);
        data.extend_from_slice(b"7777");
        let e = Archiver::new(&*fdb)
            .archive_slice(&data, "buf")
            .unwrap_err();
        match e {
            ArchiveError::Message {
                message: 2,
                offset,
                cause,
                ..
            } if offset == at && matches!(*cause, ApiError::Grib(_)) => {}
            other => panic!("{other:?}"),
        }
    }

    /// Hands out at most `step` bytes per read, as a pipe does.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = out.len().min(self.step).min(self.data.len());
            out[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn a_reader_gives_what_the_same_bytes_in_a_slice_give() {
        let dir = tempfile::tempdir().unwrap();
        let fdb = local(dir.path());
        let mut data = Vec::new();
        for s in 0..20 {
            data.extend_from_slice(&field(s));
            data.extend_from_slice(if s % 2 == 0 { &b"junk"[..] } else { &[0; 4] });
        }
        let (mut from_slice, mut from_reader) = (Seen::new(), Seen::new());
        let a = Archiver::new(&*fdb)
            .on_message(recording(&mut from_slice))
            .archive_slice(&data, "x")
            .unwrap();
        let b = Archiver::new(&*fdb)
            .on_message(recording(&mut from_reader))
            .archive_reader(
                Trickle {
                    data: &data,
                    step: 333,
                },
                "x",
            )
            .unwrap();
        assert_eq!(a, b);
        assert_eq!(a.messages, 20);
        assert_eq!(from_slice, from_reader);
        fdb.flush().unwrap();
        assert_eq!(listed(&*fdb), 20);
    }

    #[test]
    fn many_threads_and_batches_keep_input_order() {
        let dir = tempfile::tempdir().unwrap();
        let fdb = local(dir.path());
        let n = BATCH + 50;
        let data: Vec<u8> = (0..n).flat_map(field).collect();
        let mut runs = Vec::new();
        for threads in [1, 3, 8] {
            let mut seen = Seen::new();
            let summary = Archiver::new(&*fdb)
                .threads(threads)
                .on_message(recording(&mut seen))
                .archive_slice(&data, "x")
                .unwrap();
            assert_eq!(summary.messages, n as u64);
            let steps: Vec<String> = (0..n).map(|s| s.to_string()).collect();
            assert_eq!(
                seen.iter().map(|s| &s.3).collect::<Vec<_>>(),
                steps.iter().collect::<Vec<_>>()
            );
            runs.push(seen);
        }
        assert!(runs.windows(2).all(|w| w[0] == w[1]));
        fdb.flush().unwrap();
        assert_eq!(listed(&*fdb), n);
    }

    /// Inputs longer than a batch go through the framing thread: errors in the first batch (the
    /// thread must not be left waiting) and in a later one are named as in a short input.
    #[test]
    fn errors_in_a_long_input_are_named_and_nothing_hangs() {
        let dir = tempfile::tempdir().unwrap();
        let fdb = local(dir.path());
        let n = BATCH + 20;
        let mut data: Vec<u8> = (0..n).flat_map(|s| field(s % 4)).collect();
        let key = Key::parse("class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step=0,levelist=500,param=130").unwrap();
        let e = Archiver::new(&*fdb)
            .key(Some(key))
            .archive_slice(&data, "long")
            .unwrap_err();
        assert!(
            matches!(e, ArchiveError::Message { message: 2, .. }),
            "{e:?}"
        );
        let last = (data.len() - field((n - 1) % 4).len()) as u64;
        data.truncate(data.len() - 1);
        let mut seen = Seen::new();
        let e = Archiver::new(&*fdb)
            .on_message(recording(&mut seen))
            .archive_slice(&data, "long")
            .unwrap_err();
        match e {
            ArchiveError::Framing(GribError::Truncated {
                message, offset, ..
            }) if message == n && offset == last => {}
            other => panic!("{other:?}"),
        }
        assert_eq!(seen.len(), n - 1);
    }

    #[test]
    fn validate_first_archives_nothing_when_any_message_is_bad() {
        let dir = tempfile::tempdir().unwrap();
        let fdb = local(dir.path());
        let good: Vec<u8> = (0..BATCH + 3).flat_map(field).collect();
        // Truncated last message: the earlier ones are framed fine but none goes in.
        let mut cut = good.clone();
        cut.truncate(cut.len() - 5);
        let e = Archiver::new(&*fdb)
            .validate_first(true)
            .archive_slice(&cut, "buf")
            .unwrap_err();
        assert!(
            matches!(e, ArchiveError::Framing(GribError::Truncated { .. })),
            "{e:?}"
        );
        // A check refusing the 5th message.
        let e = Archiver::new(&*fdb)
            .validate_first(true)
            .check(|k| match k.get("step") {
                Some("4") => Err(ApiError::Invalid("no step 4".into())),
                _ => Ok(()),
            })
            .archive_slice(&good, "buf")
            .unwrap_err();
        assert!(
            matches!(e, ArchiveError::Message { message: 5, .. }),
            "{e:?}"
        );
        fdb.flush().unwrap();
        assert_eq!(listed(&*fdb), 0);
        let summary = Archiver::new(&*fdb)
            .validate_first(true)
            .archive_slice(&good, "buf")
            .unwrap();
        assert_eq!(summary.messages, (BATCH + 3) as u64);
        fdb.flush().unwrap();
        assert_eq!(listed(&*fdb), BATCH + 3);
    }

    #[test]
    fn a_file_is_mapped_and_a_missing_one_named() {
        let dir = tempfile::tempdir().unwrap();
        let fdb = local(&dir.path().join("root"));
        let path = dir.path().join("in.grib");
        std::fs::write(&path, [field(0), field(6)].concat()).unwrap();
        let mut archiver = Archiver::new(&*fdb);
        assert_eq!(archiver.archive_path(&path).unwrap().messages, 2);
        let missing = dir.path().join("missing.grib");
        match archiver.archive_path(&missing).unwrap_err() {
            ArchiveError::Input {
                action: "open",
                path,
                ..
            } => assert_eq!(path, missing.display().to_string()),
            other => panic!("{other:?}"),
        }
        // An empty file is read as a stream, and refused as no GRIB.
        let empty = dir.path().join("empty.grib");
        std::fs::write(&empty, b"").unwrap();
        assert!(matches!(
            archiver.archive_path(&empty),
            Err(ArchiveError::Framing(GribError::NotGrib { len: 0, .. }))
        ));
    }
}
