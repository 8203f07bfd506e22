//! Archive connections: fields stored as they arrive, a flush answers for the batch.
//!
//! What a field costs the server is bounded by the memory budget, whatever size its frame
//! announces: a field of up to 16 MiB is received whole under a lease of its size, straight from
//! the socket into the buffer the store keeps (a memory store keeps that buffer as the field, and
//! the checksum taken as it arrived: nothing copies it between the socket and the subscribers it
//! is sent to); a larger one, or one larger than the connection's budget, whose key the client
//! read (what `fieldstore archive` and the bindings send) goes to the store in the pieces it
//! arrives in, each leased until written; a larger one whose key must be read from the GRIB here
//! is spooled to an unnamed temporary file (nothing is left behind, even by a kill -9), its key
//! read from a mapping of that file, and its bytes streamed into the store from it.

use std::fs::File;
use std::io::{BufRead, Seek};

use bytes::Bytes;

use super::budget::{Lease, Refusal, Share, Turn};
use super::connection::Connection;
use super::receive::BUSY;
use super::*;
use crate::checksum::Crc32c;
use crate::model::Key;
use crate::remote::landing;

/// Archive frames up to this size are received whole, metadata and field in one buffer.
const WHOLE_UP_TO: u64 = 1 << 20;
/// Larger fields are received whole up to this size, after their metadata; above it they are
/// streamed to the store (key given) or spooled to a file (key read here).
const SPOOL_ABOVE: u64 = 16 << 20;
/// The metadata before a field's bytes is a key: far below this.
const META_MAX: u64 = 1 << 20;
/// Pieces of a streamed field queued for the archiver while it writes the one before.
const QUEUED_PIECES: usize = 4;

impl Connection<'_> {
    /// Archive frames are applied as they arrive, without replies; a flush answers for all of
    /// them. After an archive error the rest of the batch is skipped, and the flush reports the
    /// error and discards the batch, so a failed batch leaves nothing half-visible.
    ///
    /// Receiving and storing overlap: this thread reads the next frame (or piece) while an
    /// archiver thread stores the previous one. Memory for both comes from the budget: without
    /// it, this thread waits before reading on, and the client is held back by TCP.
    pub(super) fn archive_loop(&mut self) -> Result<(), Broken> {
        let shared = self.shared;
        let share = Share::default();
        let (jobs, inbox) = sync_channel::<Job>(2);
        std::thread::scope(|scope| {
            // The archiver logs under this connection's span, like the rest of it.
            let span = tracing::Span::current();
            let who = self.who.clone();
            let archiver = scope.spawn(move || {
                let _entered = span.enter();
                archiver(shared, &who, inbox)
            });
            let result = self.receive_loop(&share, &jobs);
            // No more jobs: the archiver discards what was not flushed and ends.
            drop(jobs);
            let _ = archiver.join();
            result
        })
    }

    fn receive_loop<'s>(
        &mut self,
        share: &'s Share,
        jobs: &SyncSender<Job<'s>>,
    ) -> Result<(), Broken>
    where
        Self: 's,
    {
        let shared = self.shared;
        // A batch (from its first field to its flush) is one request of the identity.
        let mut turn = None;
        loop {
            let Some((h, crc)) = self.next_header(shared.opts.max_payload)? else {
                return Ok(());
            };
            match h.kind {
                MsgType::Archive | MsgType::ArchiveHandover => {
                    if turn.is_none() {
                        match shared.per_identity.enter(&self.identity) {
                            Ok(t) => turn = Some(t),
                            Err(msg) => {
                                warn!("refused: {msg}");
                                if !self.discard(h.length, crc)? {
                                    return Ok(());
                                }
                                if h.kind == MsgType::ArchiveHandover {
                                    drop(self.take_descriptor());
                                }
                                if jobs.send(Job::Failed((BUSY, msg))).is_err() {
                                    return Ok(());
                                }
                                continue;
                            }
                        }
                    }
                    let received = if h.kind == MsgType::ArchiveHandover {
                        self.receive_handover(h, crc)?
                    } else {
                        self.receive_field(h, crc, share, jobs)?
                    };
                    let job = match received {
                        Received::Job(job) => job,
                        Received::Sent => continue,
                        Received::Stopping => return Ok(()),
                    };
                    if jobs.send(job).is_err() {
                        return Ok(());
                    }
                }
                MsgType::Flush => {
                    if !self.read_small(h, crc)? {
                        return Ok(());
                    }
                    self.flush_batch(h, jobs, &mut turn)?;
                }
                other => {
                    if !self.read_small(h, crc)? {
                        return Ok(());
                    }
                    let msg = format!(
                        "a {} frame on an archive connection (only archive and flush go here)",
                        other.op_name()
                    );
                    self.send_error(h.request, kinds::BAD_REQUEST, &msg)?;
                }
            }
        }
    }

    /// Flushes the batch and answers; the batch's turn ends before the answer goes, so the
    /// client's next request finds it free.
    fn flush_batch(
        &mut self,
        h: FrameHeader,
        jobs: &SyncSender<Job>,
        turn: &mut Option<Turn>,
    ) -> Result<(), Broken> {
        let shared = self.shared;
        let started = Instant::now();
        let (tx, rx) = sync_channel(1);
        let outcome = match jobs.send(Job::Flush(tx)) {
            Ok(()) => rx.recv().unwrap_or_else(|_| Err((0, archiver_stopped()))),
            Err(_) => Err((0, archiver_stopped())),
        };
        *turn = None;
        let sent = match &outcome {
            Ok(pending) => {
                info!(fields = pending, elapsed = ?started.elapsed(), "flushed");
                self.reply(h.request, &p::to_json(pending))
            }
            Err((pending, (kind, msg))) => {
                warn!(fields = pending, "flush failed, batch discarded: {msg}");
                let wire_kind = if *kind == BUSY {
                    kinds::BUSY
                } else {
                    kinds::FAILED
                };
                self.send_error_of(
                    h.request,
                    wire_kind,
                    &format!("{msg} (nothing archived since the last flush was stored)"),
                    *kind,
                )
            }
        };
        shared
            .metrics
            .record(h.kind, started.elapsed(), outcome.is_ok());
        sent
    }

    /// Receives one archive frame as the job that stores it, or sends the failure that stands
    /// for it.
    fn receive_field<'s>(
        &mut self,
        h: FrameHeader,
        mut crc: Crc32c,
        share: &'s Share,
        jobs: &SyncSender<Job<'s>>,
    ) -> Result<Received<'s>, Broken>
    where
        Self: 's,
    {
        if h.length <= WHOLE_UP_TO {
            return self.receive_small(h, crc, share);
        }
        // The metadata first: it says what to do with the rest.
        let mut prefix = [0u8; 4];
        if let Err(e) = p::read_piece(&mut self.reader, &mut prefix, &mut crc) {
            self.frame_failed(e)?;
            return Ok(Received::Stopping);
        }
        let meta_len = u64::from(u32::from_be_bytes(prefix));
        if meta_len > META_MAX || 4 + meta_len > h.length {
            self.frame_failed(RemoteError::payload(
                "archive",
                format!("metadata length {meta_len} runs past the payload or is not a key"),
            ))?;
            return Ok(Received::Stopping);
        }
        let mut meta = vec![0u8; meta_len as usize];
        if let Err(e) = p::read_piece(&mut self.reader, &mut meta, &mut crc) {
            self.frame_failed(e)?;
            return Ok(Received::Stopping);
        }
        let length = h.length - 4 - meta_len;
        let decoded = p::decode_archive_meta(&meta);
        let (key, grib) = match decoded {
            Ok(m) => m,
            Err(e) => {
                // Well framed, wrong inside: the batch fails, the connection goes on.
                return self.refuse_field(length, crc, (ErrorKind::BadRequest, e.to_string()));
            }
        };
        // A field whose key the client read goes to the store in leased pieces when the
        // connection's budget cannot hold it whole.
        let whole = length <= SPOOL_ABOVE;
        let streamed = grib && !(whole && self.shared.budget.holds(h.length));
        match key {
            Some(key) if streamed => {
                let (tx, rx) = sync_channel(QUEUED_PIECES);
                if jobs
                    .send(Job::Stream {
                        key,
                        length,
                        pieces: rx,
                    })
                    .is_err()
                {
                    return Ok(Received::Stopping);
                }
                if self.stream_pieces(length, crc, share, &tx)? {
                    Ok(Received::Sent)
                } else {
                    Ok(Received::Stopping)
                }
            }
            key if whole => self.receive_data(h, crc, length, key, grib, share),
            key => self.spool(length, crc, key),
        }
    }

    /// Receives a field handed over in a sealed memory file: the frame carries its metadata,
    /// the descriptor that came with it its bytes, which are mapped, not copied. The field's
    /// checksum is taken here, from the mapping, as the store records it.
    fn receive_handover<'s>(&mut self, h: FrameHeader, crc: Crc32c) -> Result<Received<'s>, Broken>
    where
        Self: 's,
    {
        if !self.read_upto(h, crc, META_MAX)? {
            return Ok(Received::Stopping);
        }
        if !self.handover {
            return Ok(Received::Job(Job::Failed((
                ErrorKind::BadRequest,
                "a hand-over frame on a connection that did not agree to hand-over (a Unix \
                 socket connection whose hello asked for it)"
                    .into(),
            ))));
        }
        let Some(fd) = self.take_descriptor() else {
            self.frame_failed(RemoteError::payload(
                "archive-handover",
                "the frame came without its memory file",
            ))?;
            return Ok(Received::Stopping);
        };
        let (key, grib, length) = match p::decode_archive_handover(&self.payload) {
            Ok(m) => m,
            Err(e) => {
                return Ok(Received::Job(Job::Failed((
                    ErrorKind::BadRequest,
                    e.to_string(),
                ))))
            }
        };
        if length > self.shared.opts.max_payload {
            return Ok(Received::Job(Job::Failed((
                ErrorKind::BadRequest,
                format!(
                    "a field of {length} bytes is larger than this server takes (--max-frame {})",
                    self.shared.opts.max_payload
                ),
            ))));
        }
        match crate::remote::handover::take(fd, length, true) {
            Ok(data) => {
                let checksum = crate::checksum::crc32c(&data);
                self.shared
                    .metrics
                    .handed_over_in
                    .fetch_add(1, Ordering::Relaxed);
                Ok(Received::Job(Job::Field {
                    key,
                    grib,
                    data,
                    checksum: Some(checksum),
                    lease: None,
                }))
            }
            Err(e) => Ok(Received::Job(Job::Failed((
                ErrorKind::BadRequest,
                format!("the handed-over field cannot be taken: {e}"),
            )))),
        }
    }

    /// Receives a small frame whole, once the budget has room for it, and decodes it.
    fn receive_small<'s>(
        &mut self,
        h: FrameHeader,
        mut crc: Crc32c,
        share: &'s Share,
    ) -> Result<Received<'s>, Broken>
    where
        Self: 's,
    {
        let shared: &'s Shared = self.shared;
        let lease = match shared.budget.take(share, h.length, &shared.stopping) {
            Ok(l) => l,
            Err(Refusal::Stopping) => return Ok(Received::Stopping),
            Err(Refusal::Busy(msg)) => return self.refuse_field(h.length, crc, (BUSY, msg)),
        };
        let read = landing::read_shared(
            &mut self.reader,
            h.length as usize,
            &mut crc,
            &shared.recycler,
        )
        .and_then(|(payload, _)| p::read_trailer(&mut self.reader, &crc).map(|()| payload));
        let payload = match read {
            Ok(b) => b,
            Err(e) => {
                self.frame_failed(e)?;
                return Ok(Received::Stopping);
            }
        };
        Ok(Received::Job(match p::decode_archive(&payload) {
            Ok((key, grib, data)) => {
                let at = payload.len() - data.len();
                Job::Field {
                    key,
                    grib,
                    data: payload.slice(at..),
                    checksum: None,
                    lease: Some(lease),
                }
            }
            // Well framed, wrong inside: the batch fails, the connection goes on.
            Err(e) => Job::Failed((ErrorKind::BadRequest, e.to_string())),
        }))
    }

    /// Receives a field's `length` bytes (its metadata read already) into the buffer the store
    /// will keep (one a freed field left, if there is one), once the budget has room for them:
    /// no copy of them on this side, and their checksum taken as they arrive is the one the
    /// store records.
    fn receive_data<'s>(
        &mut self,
        h: FrameHeader,
        mut crc: Crc32c,
        length: u64,
        key: Option<Key>,
        grib: bool,
        share: &'s Share,
    ) -> Result<Received<'s>, Broken>
    where
        Self: 's,
    {
        let shared: &'s Shared = self.shared;
        let lease = match shared.budget.take(share, h.length, &shared.stopping) {
            Ok(l) => l,
            Err(Refusal::Stopping) => return Ok(Received::Stopping),
            Err(Refusal::Busy(msg)) => return self.refuse_field(length, crc, (BUSY, msg)),
        };
        let read = landing::read_shared(
            &mut self.reader,
            length as usize,
            &mut crc,
            &shared.recycler,
        )
        .and_then(|got| p::read_trailer(&mut self.reader, &crc).map(|()| got));
        match read {
            Ok((data, checksum)) => Ok(Received::Job(Job::Field {
                key,
                grib,
                data,
                checksum: Some(checksum),
                lease: Some(lease),
            })),
            Err(e) => {
                self.frame_failed(e)?;
                Ok(Received::Stopping)
            }
        }
    }

    /// Hands a field's bytes to the archiver in the pieces they arrive in, each under a lease,
    /// then (once the frame's checksum holds) tells it the field is whole. `false`: the
    /// connection ends.
    fn stream_pieces<'s>(
        &mut self,
        length: u64,
        mut crc: Crc32c,
        share: &'s Share,
        tx: &SyncSender<Piece<'s>>,
    ) -> Result<bool, Broken>
    where
        Self: 's,
    {
        let shared: &'s Shared = self.shared;
        let mut left = length;
        // The last piece is held back until the frame's checksum holds, so the store never has
        // a whole field that arrived damaged.
        let mut held: Option<Piece<'s>> = None;
        while left > 0 {
            let available = match self.reader.fill_buf() {
                Ok([]) => return self.frame_failed(RemoteError::Truncated).map(|()| false),
                Ok(b) => b.len() as u64,
                Err(e) => return self.frame_failed(RemoteError::Io(e)).map(|()| false),
            };
            let n = available.min(left) as usize;
            let lease = match shared.budget.take(share, n as u64, &shared.stopping) {
                Ok(l) => l,
                Err(Refusal::Stopping) => return Ok(false),
                Err(Refusal::Busy(msg)) => {
                    let _ = tx.send(Piece::Failed((BUSY, msg)));
                    return self.discard(left, crc);
                }
            };
            let piece = self.reader.buffer()[..n].to_vec();
            crc.update(&piece);
            self.reader.consume(n);
            left -= n as u64;
            if let Some(previous) = held.replace(Piece::Bytes(piece, lease)) {
                if tx.send(previous).is_err() {
                    // The archiver gave up on the field: the rest is read past.
                    return self.discard(left, crc);
                }
            }
        }
        match p::read_trailer(&mut self.reader, &crc) {
            Ok(()) => {
                if let Some(last) = held {
                    let _ = tx.send(last);
                }
                let _ = tx.send(Piece::End);
                Ok(true)
            }
            // Dropping `tx` without an end tells the archiver the field is not whole.
            Err(e) => self.frame_failed(e).map(|()| false),
        }
    }

    /// Writes a field's bytes to an unnamed temporary file as they arrive; the archiver reads
    /// its key and stores it from there.
    fn spool<'s>(
        &mut self,
        length: u64,
        mut crc: Crc32c,
        key: Option<Key>,
    ) -> Result<Received<'s>, Broken> {
        let mut file = match tempfile::tempfile() {
            Ok(f) => f,
            Err(e) => {
                let why = format!(
                    "cannot make a temporary file in {} for a {length}-byte field: {e}",
                    std::env::temp_dir().display()
                );
                return self.refuse_field(length, crc, (ErrorKind::Io, why));
            }
        };
        let mut left = length;
        while left > 0 {
            let n = match self.reader.fill_buf() {
                Ok([]) => {
                    self.frame_failed(RemoteError::Truncated)?;
                    return Ok(Received::Stopping);
                }
                Ok(b) => {
                    let n = (b.len() as u64).min(left) as usize;
                    if let Err(e) = file.write_all(&b[..n]) {
                        crc.update(&b[..n]);
                        self.reader.consume(n);
                        let why = format!(
                            "cannot spool a {length}-byte field to {}: {e}",
                            std::env::temp_dir().display()
                        );
                        return self.refuse_field(left - n as u64, crc, (ErrorKind::Io, why));
                    }
                    crc.update(&b[..n]);
                    n
                }
                Err(e) => {
                    self.frame_failed(RemoteError::Io(e))?;
                    return Ok(Received::Stopping);
                }
            };
            self.reader.consume(n);
            left -= n as u64;
        }
        if let Err(e) = p::read_trailer(&mut self.reader, &crc) {
            self.frame_failed(e)?;
            return Ok(Received::Stopping);
        }
        Ok(Received::Job(Job::Spooled { key, length, file }))
    }

    /// A field that will not be stored: read past, and the batch fails with `failure`.
    fn refuse_field<'s>(
        &mut self,
        left: u64,
        crc: Crc32c,
        failure: Failure,
    ) -> Result<Received<'s>, Broken> {
        Ok(if self.discard(left, crc)? {
            Received::Job(Job::Failed(failure))
        } else {
            Received::Stopping
        })
    }
}

/// What became of an archive frame.
enum Received<'s> {
    /// The job storing it (or failing the batch for it), still to be sent.
    Job(Job<'s>),
    /// Its job was sent already (a streamed field).
    Sent,
    /// The connection ends (the client left mid-frame, the frame was damaged, or the server is
    /// stopping).
    Stopping,
}

/// What the receiving thread hands the archiver.
enum Job<'s> {
    /// One field's bytes as they arrived (the buffer the store keeps), its CRC-32C if taken
    /// already, and the memory it holds until stored.
    Field {
        key: Option<Key>,
        grib: bool,
        data: Bytes,
        checksum: Option<u32>,
        /// `None` for a field handed over: its memory is the sender's file, not the budget's.
        lease: Option<Lease<'s>>,
    },
    /// A field whose key the client read, its bytes to come as pieces.
    Stream {
        key: Key,
        length: u64,
        pieces: Receiver<Piece<'s>>,
    },
    /// A field received into a temporary file.
    Spooled {
        key: Option<Key>,
        length: u64,
        file: File,
    },
    /// A field that could not be received (no memory, a bad metadata): the batch fails.
    Failed(Failure),
    /// Make the batch durable and visible; answers with how many fields it held, or why not.
    Flush(SyncSender<Result<u64, (u64, Failure)>>),
}

/// A streamed field's bytes as they arrive.
enum Piece<'s> {
    Bytes(Vec<u8>, Lease<'s>),
    /// The frame's checksum holds: the field is whole.
    End,
    /// The rest of the field will not come.
    Failed(Failure),
}

/// Why a batch failed: the kind of the first error, and its message.
type Failure = (ErrorKind, String);

fn archiver_stopped() -> Failure {
    (ErrorKind::Internal, "the archiver stopped".to_string())
}

/// A streamed field's pieces, read as one byte stream; each piece's memory is given back as
/// soon as it is read.
struct Pieces<'s> {
    rx: Receiver<Piece<'s>>,
    current: Option<(Vec<u8>, Lease<'s>)>,
    at: usize,
    /// Why the receiving side gave up, if it did.
    failure: Option<Failure>,
}

impl<'s> Pieces<'s> {
    fn new(rx: Receiver<Piece<'s>>) -> Pieces<'s> {
        Pieces {
            rx,
            current: None,
            at: 0,
            failure: None,
        }
    }

    /// Reads past whatever the store did not take, up to the end of the field; `Err` unless
    /// the frame arrived whole.
    fn finish(&mut self) -> Result<(), Failure> {
        self.current = None;
        loop {
            match self.rx.recv() {
                Ok(Piece::Bytes(..)) => {}
                Ok(Piece::End) => return Ok(()),
                Ok(Piece::Failed(f)) => {
                    self.failure = Some(f.clone());
                    return Err(f);
                }
                Err(_) => return Err(went_away()),
            }
        }
    }
}

fn went_away() -> Failure {
    (
        ErrorKind::Io,
        "the field did not arrive whole (the client went away or its frame was damaged)".into(),
    )
}

impl Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            if let Some((piece, _)) = &self.current {
                if self.at < piece.len() {
                    let n = buf.len().min(piece.len() - self.at);
                    buf[..n].copy_from_slice(&piece[self.at..self.at + n]);
                    self.at += n;
                    return Ok(n);
                }
            }
            self.current = None;
            self.at = 0;
            match self.rx.recv() {
                Ok(Piece::Bytes(piece, lease)) => self.current = Some((piece, lease)),
                // More bytes were asked for than the frame carries: cannot happen for a
                // store reading `length` bytes, but answered as a short stream.
                Ok(Piece::End) => return Ok(0),
                Ok(Piece::Failed(f)) => {
                    let msg = f.1.clone();
                    self.failure = Some(f);
                    return Err(io::Error::other(msg));
                }
                Err(_) => return Err(io::Error::other(went_away().1)),
            }
        }
    }
}

/// Stores the fields of one archive connection in order and answers its flushes. When the jobs
/// end without a flush (the client went away), the batch is dropped unflushed: never visible.
fn archiver(shared: &Shared, who: &Identity, inbox: Receiver<Job>) {
    let mut fdb: Option<Box<dyn Fdb>> = None;
    let mut pending = 0u64;
    let mut failed: Option<Failure> = None;
    for job in inbox {
        let started = Instant::now();
        let stored = match job {
            Job::Flush(answer) => {
                let outcome = match failed.take() {
                    Some(msg) => Err(msg),
                    None => match &fdb {
                        Some(f) => f.flush().map_err(|e| (e.kind(), error_chain(&e))),
                        None => Ok(()),
                    },
                };
                let outcome = match outcome {
                    Ok(()) => Ok(pending),
                    Err(msg) => {
                        // Whatever state the handle is in, the batch must not become visible.
                        fdb = None;
                        shared
                            .metrics
                            .discarded_fields
                            .fetch_add(pending, Ordering::Relaxed);
                        Err((pending, msg))
                    }
                };
                pending = 0;
                let _ = answer.send(outcome);
                continue;
            }
            Job::Field {
                key,
                grib,
                data,
                checksum,
                lease,
            } => {
                let r = if failed.is_none() {
                    archive_one(shared, who, &mut fdb, key, grib, data, checksum)
                } else {
                    Ok(())
                };
                drop(lease);
                r
            }
            Job::Stream {
                key,
                length,
                pieces,
            } => {
                let mut src = Pieces::new(pieces);
                let r = if failed.is_none() {
                    super::authorize::may_archive(shared, who, Some(&key))
                        .and_then(|()| handle(shared, who, &mut fdb))
                        .and_then(|f| {
                            f.archive_grib_from(&key, length, &mut src)
                                .map_err(|e| (e.kind(), error_chain(&e)))
                        })
                } else {
                    Ok(())
                };
                let whole = src.finish();
                // The receiving side's reason comes first: the store's error only echoes it.
                match (src.failure.take(), r, whole) {
                    (Some(f), _, _) => Err(f),
                    (None, Err(e), _) | (None, Ok(()), Err(e)) => Err(e),
                    (None, Ok(()), Ok(())) => Ok(()),
                }
            }
            Job::Spooled { key, length, file } => {
                if failed.is_none() {
                    archive_spooled(shared, who, &mut fdb, key, length, file)
                } else {
                    Ok(())
                }
            }
            Job::Failed(f) => Err(f),
        };
        pending += 1;
        if let (Err((kind, e)), None) = (stored, &failed) {
            failed = Some((kind, format!("field {pending} since the last flush: {e}")));
        }
        shared
            .metrics
            .record(MsgType::Archive, started.elapsed(), failed.is_none());
    }
    if pending > 0 {
        shared
            .metrics
            .discarded_fields
            .fetch_add(pending, Ordering::Relaxed);
        warn!(
            fields = pending,
            "client went away without flushing; its unflushed fields are discarded"
        );
    }
}

/// The connection's store handle, opened at its first field.
/// Databases it creates record the identity as their creator (with a tokens file).
fn handle<'f>(
    shared: &Shared,
    who: &Identity,
    fdb: &'f mut Option<Box<dyn Fdb>>,
) -> Result<&'f dyn Fdb, Failure> {
    match fdb {
        Some(f) => Ok(&**f),
        None => Ok(&**fdb.insert(
            (shared.factory)(who.records_creator.then_some(who.name.as_str()))
                .map_err(|e| (e.kind(), error_chain(&e)))?,
        )),
    }
}

/// Archives a field's buffer as it is: a memory store keeps it without a copy.
fn archive_one(
    shared: &Shared,
    who: &Identity,
    fdb: &mut Option<Box<dyn Fdb>>,
    key: Option<Key>,
    grib: bool,
    data: Bytes,
    checksum: Option<u32>,
) -> Result<(), Failure> {
    super::authorize::may_archive(shared, who, key.as_ref())?;
    let f = handle(shared, who, fdb)?;
    f.archive_shared(key.as_ref(), grib, data, checksum)
        .map_err(|e| (e.kind(), error_chain(&e)))
}

/// A spooled field: without a key, its key is read from a mapping of the file (ecCodes reads
/// only the message's headers) and its bytes streamed from the file; with a key to check
/// against the message, it is archived from the mapping.
fn archive_spooled(
    shared: &Shared,
    who: &Identity,
    fdb: &mut Option<Box<dyn Fdb>>,
    key: Option<Key>,
    length: u64,
    mut file: File,
) -> Result<(), Failure> {
    super::authorize::may_archive(shared, who, key.as_ref())?;
    let f = handle(shared, who, fdb)?;
    let io_failure = |e: io::Error| (ErrorKind::Io, format!("cannot read the spooled field: {e}"));
    // SAFETY: the file has no name and no other handle: nothing else can change it while
    // mapped.
    let map = unsafe { memmap2::Mmap::map(&file) }.map_err(io_failure)?;
    let r = match key {
        Some(k) => f.archive(Some(&k), &map),
        None => {
            let found = crate::grib::mars_keys(&map).map_err(|e| {
                let e = ApiError::from(e);
                (e.kind(), error_chain(&e))
            })?;
            drop(map);
            file.rewind().map_err(io_failure)?;
            f.archive_grib_from(&found, length, &mut file)
        }
    };
    r.map_err(|e| (e.kind(), error_chain(&e)))
}
