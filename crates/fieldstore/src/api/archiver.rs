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
        cause: ApiError,
    },
    /// The input file could not be opened, inspected or mapped.
    #[error("cannot {action} {path}")]
    Input {
        action: &'static str,
        path: String,
        #[source]
        cause: std::io::Error,
    },
    /// One of the pipeline's threads died: a bug, not bad input.
    #[error("the {0} thread of the archive pipeline panicked")]
    Thread(&'static str),
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

/// Archives every GRIB message of an input through one handle. Reusable for several inputs.
pub struct Archiver<'a> {
    fdb: &'a dyn Fdb,
    key: Option<Key>,
    threads: usize,
    on_message: Option<Callback<'a>>,
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
        }
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
        std::thread::scope(|scope| {
            let (tx, rx) = sync_channel::<Result<Framed<'_>, GribError>>(1);
            let framer = scope.spawn(move || frame_slices(data, source, threads, decode, tx));
            let mut summary = ArchiveSummary::default();
            let result: Result<(), ArchiveError> = rx.into_iter().try_for_each(|framed| {
                let (batch, keys) = framed?;
                self.archive_batch(&batch, keys, source, &mut summary)
            });
            let joined = framer.join();
            result?;
            summary.skipped = joined.map_err(|_| ArchiveError::Thread("framing"))?;
            Ok(summary)
        })
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
                cause,
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
            match &self.key {
                Some(k) => self.fdb.archive(Some(k), bytes),
                None => self.fdb.archive_grib(key, bytes),
            }
            .map_err(failed)?;
            summary.messages += 1;
            summary.bytes += bytes.len() as u64;
        }
        Ok(())
    }
}

/// The framing thread of `archive_slice`: frames the next batch, decodes its keys (ecCodes,
/// ~0.5 ms a message, on all cores) and maps its pages in, so the archiving thread does nothing
/// but archive. What came before a framing error is sent first, then the error.
fn frame_slices<'m>(
    data: &'m [u8],
    source: &str,
    threads: usize,
    decode: bool,
    tx: SyncSender<Result<Framed<'m>, GribError>>,
) -> Skipped {
    let mut messages = SliceMessages::new(data, source);
    loop {
        let mut batch = Vec::with_capacity(BATCH);
        let mut batch_bytes = 0usize;
        let mut failure = None;
        while batch.len() < BATCH && batch_bytes < BATCH_BYTES {
            match messages.next() {
                Some(Ok(m)) => {
                    batch_bytes += m.2.len();
                    batch.push(m);
                }
                Some(Err(e)) => {
                    failure = Some(e);
                    break;
                }
                None => break,
            }
        }
        let ended = batch.is_empty();
        if !ended {
            let keys = if decode {
                decode_keys(&batch, threads)
            } else {
                Vec::new()
            };
            for (_, _, bytes) in &batch {
                for page in bytes.iter().step_by(4096) {
                    std::hint::black_box(*page);
                }
            }
            if tx.send(Ok((batch, keys))).is_err() {
                break;
            }
        }
        if let Some(e) = failure {
            let _ = tx.send(Err(e));
            break;
        }
        if ended {
            break;
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
