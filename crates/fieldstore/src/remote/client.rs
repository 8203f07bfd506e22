//! The `remote` frontend: the `Fdb` interface, served by a `fieldstore server` over TCP.
//!
//! A handle keeps one archive connection (fields stream out unacknowledged; flush is the one
//! round trip) and a small pool of control connections for everything else, so a caller may hold
//! an unfinished retrieve or list while it asks something else. A lost connection is reported
//! naming the server, and the next call connects again.

use std::collections::VecDeque;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};

use super::transport::{Socket, TlsConnector};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use super::error::RemoteError;
use super::handover;
use super::protocol::{
    self as p, kinds, ErrorReply, FrameHeader, Hello, MsgType, Query, Role, StreamEnd, Welcome,
    WireField, WireListElement,
};
use crate::api::fdb::ListIter;
use crate::api::reader::{seek_target, DataReader, FieldSpan};
use crate::api::RemoteFailure;
use crate::api::{
    ApiError, AxesMap, CompactElement, ControlAction, ControlElement, ControlIdentifier,
    DumpElement, Fdb, ListElement, ListOptions, PurgeElement, StatsElement, WhereElement,
    WipeElement,
};
use crate::error_kind::ErrorKind;
use crate::model::request::Request;
use crate::model::Key;

const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(30);
/// Idle control connections kept for reuse.
const POOL: usize = 4;
/// Replies may carry a whole chunk of a retrieve; the server's chunk size is far below this.
const MAX_REPLY: u64 = 1 << 32;
/// A retrieve's caller reading into a buffer at least this big gets data frames written
/// straight into it.
const DIRECT_READ: usize = 1 << 20;

pub(super) struct Connection {
    pub(super) reader: BufReader<Socket>,
    pub(super) writer: BufWriter<Socket>,
    pub(super) version: u16,
    pub(super) payload: Vec<u8>,
    /// Fields may be handed over in sealed memory files (a Unix connection the server agreed
    /// to hand over on).
    pub(super) handover: bool,
}

#[derive(Default)]
struct ArchiveSession {
    conn: Option<Connection>,
    /// The connection of the last flush that succeeded, ready to take over when the next flush
    /// takes `conn` away: a steady archive/flush cycle uses two connections and opens no more.
    spare: Option<Connection>,
    /// Fields archived since the last flush.
    pending: u64,
    /// Fields lost with a connection since the last flush: the next flush must fail.
    lost: Option<String>,
}

/// How a request went wrong: the connection is either broken, or fine with an error reply.
enum CallError {
    Broken(RemoteError),
    Reply(ApiError),
}

/// A retrieve sent, its fields read: the connection waits at the first frame after them.
struct OpenedRetrieve {
    conn: Connection,
    first: FrameHeader,
    fields: Vec<FieldSpan>,
    size: u64,
}

pub struct RemoteFdb {
    host: String,
    port: u16,
    /// A server on this host, reached through its Unix socket instead of `host:port`.
    socket: Option<std::path::PathBuf>,
    endpoint: String,
    token: Option<String>,
    pool: Arc<Pool>,
    /// Held to send one archive frame, and by a flush only to take the connection away: the
    /// flush's round trip (the server's fsync and commit) runs without it, so other threads
    /// sharing the handle go on archiving, on another connection, into the next batch.
    archive: Mutex<ArchiveSession>,
    /// Held by a flush for its round trip: flushes go one at a time, so a flush that arrives
    /// meanwhile returns only after the batch in flight (which may hold its caller's fields),
    /// and a newer copy of a key is never made visible before the copy it replaces.
    flushing: Mutex<()>,
    next_id: AtomicU64,
    /// TLS trust and the name the server certificate must carry.
    tls: Option<(TlsConnector, String)>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic elsewhere leaves plain data behind; the connections are checked before use.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl RemoteFdb {
    /// No connection is made until the first call.
    pub fn new(host: &str, port: u16, token: Option<String>) -> RemoteFdb {
        let endpoint = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        RemoteFdb {
            host: host.to_string(),
            port,
            socket: None,
            endpoint: endpoint.clone(),
            token,
            pool: Arc::new(Pool {
                endpoint: endpoint.clone(),
                idle: Mutex::new(Vec::new()),
            }),
            archive: Mutex::new(ArchiveSession::default()),
            flushing: Mutex::new(()),
            next_id: AtomicU64::new(1),
            tls: None,
        }
    }

    /// Connects with TLS, checking the server's certificate against `connector`'s CAs and
    /// `server_name` (default: the host).
    pub fn with_tls(mut self, connector: TlsConnector, server_name: Option<String>) -> RemoteFdb {
        let name = server_name.unwrap_or_else(|| self.host.clone());
        self.tls = Some((connector, name));
        self
    }

    /// Connects through the server's Unix socket at `path` (`fieldstore server --socket`):
    /// large fields are then handed over in shared memory instead of copied through a socket.
    pub fn with_socket(mut self, path: std::path::PathBuf) -> RemoteFdb {
        self.endpoint = format!("unix:{}", path.display());
        self.pool = Arc::new(Pool {
            endpoint: self.endpoint.clone(),
            idle: Mutex::new(Vec::new()),
        });
        self.socket = Some(path);
        self
    }

    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    pub(super) fn id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    pub(super) fn lost(&self, during: &'static str, detail: impl ToString) -> RemoteError {
        self.pool.lost(during, detail)
    }

    fn connect_error(&self, source: io::Error) -> RemoteError {
        RemoteError::Connect {
            endpoint: self.endpoint.clone(),
            source: match source.kind() {
                io::ErrorKind::ConnectionRefused
                | io::ErrorKind::TimedOut
                | io::ErrorKind::NotFound => io::Error::new(
                    source.kind(),
                    format!("{source} (is `fieldstore server` running there?)"),
                ),
                _ => source,
            },
        }
    }

    pub(super) fn connect(&self, role: Role) -> Result<Connection, RemoteError> {
        let connect_err = |source: io::Error| self.connect_error(source);
        if let Some(path) = &self.socket {
            let s = std::os::unix::net::UnixStream::connect(path).map_err(connect_err)?;
            return self.handshake(
                Socket::Local(super::local_socket::LocalSocket::new(s)),
                role,
            );
        }
        let addrs = (self.host.as_str(), self.port)
            .to_socket_addrs()
            .map_err(connect_err)?;
        let mut last = io::Error::new(io::ErrorKind::NotFound, "the host name has no address");
        let mut stream = None;
        for a in addrs {
            match TcpStream::connect_timeout(&a, CONNECT_TIMEOUT) {
                Ok(s) => {
                    stream = Some(s);
                    break;
                }
                Err(e) => last = e,
            }
        }
        let stream = stream.ok_or_else(|| connect_err(last))?;
        let stream = match &self.tls {
            None => Socket::Tcp(stream),
            Some((connector, name)) => {
                let tls = || -> io::Result<Socket> {
                    stream.set_nodelay(true)?;
                    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
                    stream.set_write_timeout(Some(HANDSHAKE_TIMEOUT))?;
                    connector.connect(name, stream)
                };
                tls().map_err(connect_err)?
            }
        };
        self.handshake(stream, role)
    }

    /// Says hello on a connected socket.
    fn handshake(&self, stream: Socket, role: Role) -> Result<Connection, RemoteError> {
        let connect_err = |source: io::Error| self.connect_error(source);
        let setup = |s: &Socket| -> io::Result<Socket> {
            if let Socket::Tcp(t) = s {
                t.set_nodelay(true)?;
            }
            s.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
            s.try_clone()
        };
        let write_side = setup(&stream).map_err(connect_err)?;
        let buffer = if role == Role::Archive {
            1 << 20
        } else {
            64 << 10
        };
        let mut c = Connection {
            reader: BufReader::with_capacity(256 << 10, stream),
            writer: BufWriter::with_capacity(buffer, write_side),
            version: p::VERSION_MIN,
            payload: Vec::new(),
            handover: false,
        };
        let hello = p::to_json(&Hello {
            versions: (p::SESSION_VERSION_MIN..=p::VERSION_MAX).collect(),
            token: self.token.clone(),
            role,
            client: format!("fieldstore/{}", env!("CARGO_PKG_VERSION")),
            handover: c.reader.get_ref().local().is_some(),
        });
        let id = self.id();
        p::write_frame(&mut c.writer, p::VERSION_MIN, MsgType::Hello, id, &[&hello])
            .and_then(|_| c.writer.flush())
            .map_err(|e| self.lost("handshake", e))?;
        let h = p::read_frame(&mut c.reader, p::HANDSHAKE_MAX_PAYLOAD, &mut c.payload)
            .map_err(|e| self.handshake_error(e))?;
        match h.kind {
            MsgType::Welcome => {
                let w: Welcome = p::from_json("welcome", &c.payload)?;
                c.version = w.version;
                c.handover = w.handover && c.reader.get_ref().local().is_some();
            }
            MsgType::Error => {
                let e: ErrorReply = p::from_json("error", &c.payload)?;
                return Err(RemoteError::Refused {
                    endpoint: self.endpoint.clone(),
                    kind: e.error_kind(),
                    message: e.message,
                });
            }
            other => {
                return Err(RemoteError::Protocol {
                    endpoint: self.endpoint.clone(),
                    detail: format!("answered the hello with a {} frame", other.op_name()),
                })
            }
        }
        c.reader
            .get_ref()
            .set_read_timeout(None)
            .map_err(|e| self.lost("handshake", e))?;
        Ok(c)
    }

    fn handshake_error(&self, e: RemoteError) -> RemoteError {
        match e {
            RemoteError::Io(_) | RemoteError::Closed | RemoteError::Truncated => self.lost(
                "handshake",
                if self.tls.is_some() {
                    format!(
                        "{e} (is this port a fieldstore server, with the same protocol? if it \
                         asks for client certificates, it refused this one or its absence: \
                         see `tls: {{cert:, key:}}` and the server's log)"
                    )
                } else {
                    format!(
                        "{e} (is this port a fieldstore server, with the same protocol? if it \
                         serves TLS, this remote's config needs `tls: {{ca: FILE}}`)"
                    )
                },
            ),
            other => RemoteError::Protocol {
                endpoint: self.endpoint.clone(),
                detail: other.to_string(),
            },
        }
    }

    /// An idle control connection still open at the other end, or a new one.
    fn checkout(&self) -> Result<(Connection, bool), RemoteError> {
        loop {
            let Some(c) = lock(&self.pool.idle).pop() else {
                break;
            };
            if is_alive(&c) {
                return Ok((c, true));
            }
        }
        Ok((self.connect(Role::Control)?, false))
    }

    fn checkin(&self, c: Connection) {
        self.pool.checkin(c)
    }

    pub(super) fn reply_error(&self, payload: &[u8]) -> ApiError {
        self.pool.reply_error(payload)
    }

    /// Sends a request and reads the first frame of its answer into `c.payload`.
    fn exchange(
        &self,
        c: &mut Connection,
        kind: MsgType,
        query: &Query,
    ) -> Result<FrameHeader, CallError> {
        let id = self.id();
        let op = kind.op_name();
        p::write_frame(&mut c.writer, c.version, kind, id, &[&p::to_json(query)])
            .and_then(|_| c.writer.flush())
            .map_err(|e| CallError::Broken(self.lost(op, e)))?;
        let h = p::read_frame(&mut c.reader, MAX_REPLY, &mut c.payload)
            .map_err(|e| CallError::Broken(self.lost(op, describe_loss(e))))?;
        if h.request != id {
            return Err(CallError::Broken(RemoteError::Protocol {
                endpoint: self.endpoint.clone(),
                detail: format!(
                    "answered request {id} with a frame for request {}",
                    h.request
                ),
            }));
        }
        if h.kind == MsgType::Error {
            return Err(CallError::Reply(self.reply_error(&c.payload)));
        }
        Ok(h)
    }

    /// Runs a request on a pooled connection, returning the connection and its first frame.
    /// Requests that change nothing are tried once more on a fresh connection if a reused one
    /// turns out dead (the server restarted since it was last used).
    fn start(&self, kind: MsgType, query: &Query) -> Result<(Connection, FrameHeader), ApiError> {
        let (mut c, reused) = self.checkout()?;
        match self.exchange(&mut c, kind, query) {
            Ok(h) => Ok((c, h)),
            Err(CallError::Reply(e)) => {
                self.checkin(c);
                Err(e)
            }
            Err(CallError::Broken(e)) => {
                let read_only = !matches!(
                    kind,
                    MsgType::Wipe | MsgType::Purge | MsgType::Control | MsgType::Compact
                );
                if !(reused && read_only) {
                    return Err(e.into());
                }
                let mut c = self.connect(Role::Control)?;
                match self.exchange(&mut c, kind, query) {
                    Ok(h) => Ok((c, h)),
                    Err(CallError::Reply(e)) => {
                        self.checkin(c);
                        Err(e)
                    }
                    Err(CallError::Broken(e)) => Err(e.into()),
                }
            }
        }
    }

    fn call<T: serde::de::DeserializeOwned>(
        &self,
        kind: MsgType,
        query: &Query,
    ) -> Result<T, ApiError> {
        let (c, h) = self.start(kind, query)?;
        if h.kind != MsgType::Reply {
            return Err(RemoteError::Protocol {
                endpoint: self.endpoint.clone(),
                detail: format!(
                    "answered {} with a {} frame",
                    kind.op_name(),
                    h.kind.op_name()
                ),
            }
            .into());
        }
        let v = p::from_json(kind.op_name(), &c.payload)?;
        self.checkin(c);
        Ok(v)
    }

    /// Sends a retrieve and reads the fields it announces, up to the first frame after them.
    fn open_retrieve(&self, query: &Query) -> Result<OpenedRetrieve, ApiError> {
        let (mut c, mut h) = self.start(MsgType::Retrieve, query)?;
        let (mut fields, mut size) = (Vec::new(), 0u64);
        while h.kind == MsgType::Fields && h.request != 0 {
            let batch: Vec<WireField> = p::from_json("fields", &c.payload)?;
            for f in batch {
                let span = f.into_span(size);
                size += span.length;
                fields.push(span);
            }
            let next = p::read_frame(&mut c.reader, MAX_REPLY, &mut c.payload)
                .map_err(|e| self.lost("retrieve", describe_loss(e)))?;
            if next.request != h.request {
                return Err(RemoteError::Protocol {
                    endpoint: self.endpoint.clone(),
                    detail: format!(
                        "sent a frame for request {} during retrieve {}",
                        next.request, h.request
                    ),
                }
                .into());
            }
            h = next;
        }
        Ok(OpenedRetrieve {
            conn: c,
            first: h,
            fields,
            size,
        })
    }

    /// A handle onto the same server sharing this one's connection pool, for a stream that
    /// must send its request again after this handle is gone (it never archives).
    pub(super) fn detached(&self) -> RemoteFdb {
        RemoteFdb {
            host: self.host.clone(),
            port: self.port,
            socket: self.socket.clone(),
            endpoint: self.endpoint.clone(),
            token: self.token.clone(),
            pool: self.pool.clone(),
            archive: Mutex::new(ArchiveSession::default()),
            flushing: Mutex::new(()),
            next_id: AtomicU64::new(self.next_id.load(Ordering::Relaxed)),
            tls: self.tls.clone(),
        }
    }

    fn send_archive(&self, key: Option<&Key>, grib: bool, data: &[u8]) -> Result<(), ApiError> {
        let mut s = lock(&self.archive);
        if s.conn.is_none() {
            s.conn = Some(self.connect(Role::Archive)?);
        }
        let prefix = p::encode_archive_prefix(key, grib);
        let id = self.id();
        let sent = match s.conn.as_mut() {
            Some(c) if c.handover && data.len() >= handover::HANDOVER_FROM => {
                hand_over(c, id, &prefix, data)
            }
            Some(c) if data.len() >= p::DIRECT_FROM => p::write_frame_direct(
                &mut c.writer,
                c.version,
                MsgType::Archive,
                id,
                &[&prefix, data],
                None,
            ),
            Some(c) => p::write_frame(
                &mut c.writer,
                c.version,
                MsgType::Archive,
                id,
                &[&prefix, data],
            ),
            None => Err(io::Error::other("no connection")),
        };
        match sent {
            Ok(_) => {
                s.pending += 1;
                Ok(())
            }
            Err(e) => {
                let lost = s.pending + 1;
                s.conn = None;
                s.pending = 0;
                let detail = format!(
                    "{e}; the {lost} fields archived since the last flush were not stored: archive them again"
                );
                s.lost = Some(detail.clone());
                Err(self.lost("archive", detail).into())
            }
        }
    }
}

/// Sends an archived field as a sealed memory file: the frame carries its metadata, the
/// descriptor its bytes.
fn hand_over(c: &mut Connection, id: u64, prefix: &[u8], data: &[u8]) -> io::Result<u64> {
    c.writer.flush()?;
    let fd = handover::seal(data)?;
    let tail = p::handover_tail(data.len() as u64, None);
    let mut frame = Vec::with_capacity(p::HEADER_LEN + prefix.len() + tail.len() + p::TRAILER_LEN);
    let n = p::write_frame(
        &mut frame,
        c.version,
        MsgType::ArchiveHandover,
        id,
        &[prefix, &tail],
    )?;
    let local = c
        .writer
        .get_ref()
        .local()
        .ok_or_else(|| io::Error::other("hand-over on a connection that is not local"))?;
    local.send_with_descriptor(&[&frame], std::os::fd::AsFd::as_fd(&fd))?;
    Ok(n)
}

/// Whether a pooled connection is still open at the server's end (a restarted server closed it).
fn is_alive(c: &Connection) -> bool {
    if !c.reader.buffer().is_empty() {
        return false;
    }
    let s = c.reader.get_ref();
    if s.set_nonblocking(true).is_err() {
        return false;
    }
    let r = s.peek(&mut [0u8; 1]);
    let back = s.set_nonblocking(false).is_ok();
    back && matches!(r, Err(e) if e.kind() == io::ErrorKind::WouldBlock)
}

pub(super) fn describe_loss(e: RemoteError) -> String {
    match e {
        RemoteError::Closed => {
            "the server closed the connection (it stopped, or was restarted)".into()
        }
        other => other.to_string(),
    }
}

/// What streams need of their handle once the call returned: where connections go back, and
/// the server's name for errors. Shared by `Arc`, so a stream outlives the handle.
struct Pool {
    endpoint: String,
    idle: Mutex<Vec<Connection>>,
}

impl Pool {
    fn checkin(&self, c: Connection) {
        let mut idle = lock(&self.idle);
        if idle.len() < POOL {
            idle.push(c);
        }
    }

    fn lost(&self, during: &'static str, detail: impl ToString) -> RemoteError {
        RemoteError::ConnectionLost {
            endpoint: self.endpoint.clone(),
            during,
            detail: detail.to_string(),
        }
    }

    fn reply_error(&self, payload: &[u8]) -> ApiError {
        match p::from_json::<ErrorReply>("error", payload) {
            Ok(e) if e.kind == kinds::NOTHING_MATCHED => ApiError::NothingMatched(e.message),
            Ok(e) => RemoteError::Server {
                endpoint: self.endpoint.clone(),
                kind: e.error_kind(),
                message: e.message,
            }
            .into(),
            Err(e) => e.into(),
        }
    }
}

/// The fields of a retrieve as they stream in, one chunk in memory at a time. The server
/// announces the fields before the bytes, so the size is known at once. A forward seek reads and
/// drops the bytes between; a backward seek (beyond the chunk in memory) sends the same retrieve
/// again and skips to the target, after checking that the new answer announces the same fields
/// (keys and lengths): if a flush changed the answer meanwhile, the seek fails with a `Corrupt`
/// error (this stream can no longer give consistent bytes; retrieve again from the start) and
/// the reader stays where it was.
struct RemoteRead {
    pool: Arc<Pool>,
    conn: Option<Connection>,
    request: u64,
    chunk: Vec<u8>,
    pos: usize,
    received: u64,
    done: bool,
    fields: Vec<FieldSpan>,
    size: u64,
    /// Bytes handed to the caller (or skipped).
    delivered: u64,
    /// Sends the retrieve again for a backward seek; shares the pool, so it outlives the handle.
    source: Arc<RemoteFdb>,
    query: Query,
}

impl RemoteRead {
    /// Takes in the frame now in `conn.payload`; `Ok(false)` at the end of the stream.
    fn take_frame(&mut self, h: FrameHeader) -> io::Result<bool> {
        let fdb = &*self.pool;
        let Some(c) = self.conn.as_mut() else {
            return Ok(false);
        };
        if h.request != self.request {
            self.done = true;
            self.conn = None;
            return Err(io::Error::other(ApiError::from(RemoteError::Protocol {
                endpoint: fdb.endpoint.clone(),
                detail: format!(
                    "sent a frame for request {} during retrieve {}",
                    h.request, self.request
                ),
            })));
        }
        match h.kind {
            MsgType::Data => {
                std::mem::swap(&mut self.chunk, &mut c.payload);
                self.pos = 0;
                self.received += self.chunk.len() as u64;
                Ok(true)
            }
            MsgType::End => {
                self.done = true;
                let end: StreamEnd = p::from_json("end", &c.payload).map_err(io::Error::other)?;
                if end.bytes != self.received {
                    self.conn = None;
                    return Err(io::Error::other(ApiError::from(fdb.lost(
                        "retrieve",
                        format!(
                            "the server sent {} bytes but says it sent {}",
                            self.received, end.bytes
                        ),
                    ))));
                }
                if let Some(c) = self.conn.take() {
                    fdb.checkin(c);
                }
                Ok(false)
            }
            MsgType::Error => {
                self.done = true;
                let e = fdb.reply_error(&c.payload);
                if let Some(c) = self.conn.take() {
                    fdb.checkin(c);
                }
                Err(io::Error::other(e))
            }
            other => {
                self.done = true;
                self.conn = None;
                Err(io::Error::other(ApiError::from(RemoteError::Protocol {
                    endpoint: fdb.endpoint.clone(),
                    detail: format!("sent a {} frame during a retrieve", other.op_name()),
                })))
            }
        }
    }
}

impl Read for RemoteRead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.read_wire(buf)?;
        self.delivered += n as u64;
        Ok(n)
    }
}

impl io::Seek for RemoteRead {
    fn seek(&mut self, pos: io::SeekFrom) -> io::Result<u64> {
        let to = seek_target(pos, self.delivered, self.size)?;
        if to < self.delivered {
            // Still in the chunk in memory (a header read, then a step back): no new retrieve.
            let chunk_start = self.received - self.chunk.len() as u64;
            if to >= chunk_start && self.delivered == chunk_start + self.pos as u64 {
                self.pos = (to - chunk_start) as usize;
                self.delivered = to;
                return Ok(to);
            }
            self.restart()?;
        }
        self.skip_to(to)
    }
}

impl DataReader for RemoteRead {
    fn size(&self) -> u64 {
        self.size
    }
    fn tell(&self) -> u64 {
        self.delivered
    }
    fn fields(&self) -> &[FieldSpan] {
        &self.fields
    }
}

impl RemoteRead {
    /// Reads and drops the bytes up to `to` (one scratch buffer of at most 1 MiB).
    fn skip_to(&mut self, to: u64) -> io::Result<u64> {
        let end = to.min(self.size);
        let mut scratch = vec![0u8; end.saturating_sub(self.delivered).min(1 << 20) as usize];
        while self.delivered < end {
            let want = usize::try_from(end - self.delivered)
                .unwrap_or(usize::MAX)
                .min(scratch.len());
            if self.read(&mut scratch[..want])? == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "the retrieve from {} ended at byte {} of the {} announced",
                        self.pool.endpoint, self.delivered, self.size
                    ),
                ));
            }
        }
        // Past the end, as for files: reads there return nothing.
        self.delivered = self.delivered.max(to);
        Ok(to)
    }

    /// Sends the retrieve again and takes its stream, positioned at 0, if it announces the
    /// fields this one did; otherwise leaves this stream as it was.
    fn restart(&mut self) -> io::Result<()> {
        let (opened, now) = match self.source.open_retrieve(&self.query) {
            Ok(o) => {
                let differ = fields_differ(&self.fields, &o.fields);
                (Some(o), differ)
            }
            // Wiped meanwhile: the answer changed too.
            Err(ApiError::NothingMatched(_)) if !self.fields.is_empty() => {
                (None, fields_differ(&self.fields, &[]))
            }
            Err(e) => return Err(io::Error::other(e)),
        };
        let opened = match (opened, now) {
            (Some(o), None) => o,
            (_, detail) => {
                let detail = detail.unwrap_or_else(|| "nothing matches now".into());
                return Err(io::Error::other(ApiError::from(RemoteError::Server {
                    endpoint: self.pool.endpoint.clone(),
                    kind: ErrorKind::Corrupt,
                    message: format!(
                        "cannot seek back from byte {}: the retrieve was sent again to re-read \
                         from the start, but its answer changed since this stream began \
                         ({detail}; a flush or wipe came in between): retrieve again from the \
                         start",
                        self.delivered
                    ),
                })));
            }
        };
        // The old stream is dropped unfinished: its connection cannot be reused.
        self.conn = Some(opened.conn);
        self.request = opened.first.request;
        self.chunk.clear();
        self.pos = 0;
        self.received = 0;
        self.done = false;
        self.delivered = 0;
        self.take_frame(opened.first)?;
        Ok(())
    }
}

/// How a retrieve's new field list differs from the first one, if it does.
fn fields_differ(was: &[FieldSpan], now: &[FieldSpan]) -> Option<String> {
    if was.len() != now.len() {
        return Some(format!("{} fields before, {} now", was.len(), now.len()));
    }
    let (i, (a, b)) =
        was.iter().zip(now).enumerate().find(|(_, (a, b))| {
            a.key != b.key || a.length != b.length || a.checksum != b.checksum
        })?;
    Some(if a.key != b.key {
        format!(
            "field {i} was {}, is now {}",
            a.key.porcelain(),
            b.key.porcelain()
        )
    } else if a.length != b.length {
        format!(
            "field {i} {} was {} bytes, is now {}",
            a.key.porcelain(),
            a.length,
            b.length
        )
    } else {
        format!(
            "field {i} {} was archived again with other bytes of the same length",
            a.key.porcelain()
        )
    })
}

impl RemoteRead {
    fn read_wire(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.delivered >= self.size && self.done {
            return Ok(0);
        }
        loop {
            if self.pos < self.chunk.len() {
                let n = buf.len().min(self.chunk.len() - self.pos);
                buf[..n].copy_from_slice(&self.chunk[self.pos..self.pos + n]);
                self.pos += n;
                return Ok(n);
            }
            if self.done || buf.is_empty() {
                return Ok(0);
            }
            let Some(c) = self.conn.as_mut() else {
                return Ok(0);
            };
            // A caller reading in large pieces gets data frames straight into its buffer.
            let direct: &mut [u8] = if buf.len() >= DIRECT_READ {
                buf
            } else {
                &mut []
            };
            match p::read_frame_to(&mut c.reader, MAX_REPLY, direct, &mut c.payload) {
                Ok((h, true)) if h.kind == MsgType::Data && h.request == self.request => {
                    // The chunk in memory no longer ends at `received`.
                    self.chunk.clear();
                    self.pos = 0;
                    self.received += h.length;
                    return Ok(h.length as usize);
                }
                Ok((h, landed_direct)) => {
                    if landed_direct {
                        c.payload.clear();
                        c.payload.extend_from_slice(&buf[..h.length as usize]);
                    }
                    if !self.take_frame(h)? {
                        return Ok(0);
                    }
                }
                Err(e) => {
                    self.done = true;
                    self.conn = None;
                    let detail = format!("{} after {} bytes", describe_loss(e), self.received);
                    return Err(io::Error::other(ApiError::from(
                        self.pool.lost("retrieve", detail),
                    )));
                }
            }
        }
    }
}

/// Listed elements as they stream in, one chunk decoded at a time.
struct RemoteList {
    pool: Arc<Pool>,
    conn: Option<Connection>,
    request: u64,
    ready: VecDeque<ListElement>,
    first: Option<FrameHeader>,
    received: u64,
}

impl RemoteList {
    /// Handles the frame in `conn.payload`; `None` when the stream ended cleanly.
    fn take_frame(&mut self, h: FrameHeader) -> Option<Result<(), ApiError>> {
        let fdb = &*self.pool;
        let c = self.conn.as_mut()?;
        if h.request != self.request {
            self.conn = None;
            return Some(Err(RemoteError::Protocol {
                endpoint: fdb.endpoint.clone(),
                detail: format!(
                    "sent a frame for request {} during list {}",
                    h.request, self.request
                ),
            }
            .into()));
        }
        match h.kind {
            MsgType::Entries => match p::from_json::<Vec<WireListElement>>("list", &c.payload) {
                Ok(v) => {
                    self.received += v.len() as u64;
                    self.ready.extend(v.into_iter().map(ListElement::from));
                    Some(Ok(()))
                }
                Err(e) => {
                    self.conn = None;
                    Some(Err(e.into()))
                }
            },
            MsgType::End => {
                let end = p::from_json::<StreamEnd>("end", &c.payload);
                let c = self.conn.take()?;
                match end {
                    Ok(end) if end.items == self.received => {
                        fdb.checkin(c);
                        None
                    }
                    Ok(end) => Some(Err(fdb
                        .lost(
                            "list",
                            format!(
                                "received {} entries, the server says it sent {}",
                                self.received, end.items
                            ),
                        )
                        .into())),
                    Err(e) => Some(Err(e.into())),
                }
            }
            MsgType::Error => {
                let e = fdb.reply_error(&c.payload);
                if let Some(c) = self.conn.take() {
                    fdb.checkin(c);
                }
                Some(Err(e))
            }
            other => {
                self.conn = None;
                Some(Err(RemoteError::Protocol {
                    endpoint: fdb.endpoint.clone(),
                    detail: format!("sent a {} frame during a list", other.op_name()),
                }
                .into()))
            }
        }
    }
}

impl Iterator for RemoteList {
    type Item = Result<ListElement, ApiError>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Some(Ok(e));
            }
            let h = match self.first.take() {
                Some(h) => h,
                None => {
                    let c = self.conn.as_mut()?;
                    match p::read_frame(&mut c.reader, MAX_REPLY, &mut c.payload) {
                        Ok(h) => h,
                        Err(e) => {
                            self.conn = None;
                            let detail =
                                format!("{} after {} entries", describe_loss(e), self.received);
                            return Some(Err(self.pool.lost("list", detail).into()));
                        }
                    }
                }
            };
            match self.take_frame(h)? {
                Ok(()) => {}
                Err(e) => {
                    self.conn = None;
                    return Some(Err(e));
                }
            }
        }
    }
}

impl Fdb for RemoteFdb {
    fn name(&self) -> String {
        format!("remote {}", self.endpoint)
    }

    fn archive(&self, key: Option<&Key>, data: &[u8]) -> Result<(), ApiError> {
        self.send_archive(key, false, data)
    }

    fn archive_grib(&self, mars_key: &Key, data: &[u8]) -> Result<(), ApiError> {
        self.send_archive(Some(mars_key), true, data)
    }

    /// The batch is the archive connection's: the flush takes the connection out of the
    /// session (the spare, if any, takes its place) and waits for the server's answer on it
    /// without holding the archive lock.
    fn flush(&self) -> Result<(), ApiError> {
        let _turn = lock(&self.flushing);
        let (mut conn, pending) = {
            let mut s = lock(&self.archive);
            if let Some(lost) = s.lost.take() {
                // Flushing what came after would make part of a batch visible: drop it too.
                s.conn = None;
                s.pending = 0;
                return Err(self.lost("archive", lost).into());
            }
            if s.pending == 0 {
                return Ok(());
            }
            let pending = s.pending;
            s.pending = 0;
            let Some(c) = s.conn.take() else {
                return Ok(());
            };
            s.conn = s.spare.take();
            (c, pending)
        };
        let c = &mut conn;
        let id = self.id();
        let result = p::write_frame(&mut c.writer, c.version, MsgType::Flush, id, &[])
            .map_err(RemoteError::from)
            .and_then(|_| c.writer.flush().map_err(RemoteError::from))
            .and_then(|_| p::read_frame(&mut c.reader, MAX_REPLY, &mut c.payload));
        // The connection lives on after an answer, even an error (the server discarded that
        // batch and starts a new one); it goes back for the next batch, or as the spare.
        let give_back = |conn: Connection| {
            let mut s = lock(&self.archive);
            if s.conn.is_none() {
                s.conn = Some(conn);
            } else {
                s.spare = Some(conn);
            }
        };
        match result {
            Ok(h) if h.kind == MsgType::Reply && h.request == id => {
                give_back(conn);
                Ok(())
            }
            Ok(h) if h.kind == MsgType::Error => {
                let e = self.reply_error(&conn.payload);
                give_back(conn);
                Err(e)
            }
            Ok(h) => Err(RemoteError::Protocol {
                endpoint: self.endpoint.clone(),
                detail: format!(
                    "answered flush {id} with a {} frame for request {}",
                    h.kind.op_name(),
                    h.request
                ),
            }
            .into()),
            Err(e) => {
                drop(conn);
                Err(self
                    .lost(
                        "flush",
                        format!(
                            "{}; the {pending} fields archived since the last flush may not have been stored: archive them again",
                            describe_loss(e)
                        ),
                    )
                    .into())
            }
        }
    }

    fn retrieve(&self, request: &Request) -> Result<Box<dyn DataReader>, ApiError> {
        let query = Query::new(request);
        let opened = self.open_retrieve(&query)?;
        let mut r = RemoteRead {
            pool: self.pool.clone(),
            conn: Some(opened.conn),
            request: opened.first.request,
            chunk: Vec::new(),
            pos: 0,
            received: 0,
            done: false,
            fields: opened.fields,
            size: opened.size,
            delivered: 0,
            source: Arc::new(self.detached()),
            query,
        };
        r.take_frame(opened.first)
            .map_err(|e| match e.into_inner() {
                Some(inner) => match inner.downcast::<ApiError>() {
                    Ok(api) => *api,
                    Err(other) => match other.downcast::<RemoteError>() {
                        Ok(remote) => (*remote).into(),
                        Err(other) => ApiError::Remote(RemoteFailure {
                            kind: ErrorKind::Remote,
                            error: other,
                        }),
                    },
                },
                None => ApiError::Invalid("retrieve failed".into()),
            })?;
        Ok(Box::new(r))
    }

    fn list(&self, request: &Request, options: ListOptions) -> Result<ListIter, ApiError> {
        let mut q = Query::new(request);
        q.depth = options.depth;
        q.include_masked = options.include_masked;
        let (c, h) = self.start(MsgType::List, &q)?;
        Ok(Box::new(RemoteList {
            pool: self.pool.clone(),
            conn: Some(c),
            request: h.request,
            ready: VecDeque::new(),
            first: Some(h),
            received: 0,
        }))
    }

    /// On a connection of its own, resumed across reconnections (remote/subscription.rs).
    fn subscribe(
        &self,
        request: &Request,
        start: &crate::api::subscribe::Start,
    ) -> Result<crate::api::subscribe::SubscriptionBox, ApiError> {
        Ok(Box::new(super::subscription::RemoteSubscription::start(
            self, request, start, false,
        )?))
    }

    /// The server sends each field with its notice (`NoticeData`): no request per field.
    fn subscribe_with_data(
        &self,
        request: &Request,
        start: &crate::api::subscribe::Start,
    ) -> Result<crate::api::subscribe::SubscriptionBox, ApiError> {
        Ok(Box::new(super::subscription::RemoteSubscription::start(
            self, request, start, true,
        )?))
    }

    fn wanted_fields(&self, request: &Request) -> Result<Vec<Key>, ApiError> {
        let pairs: Vec<Vec<(String, String)>> = self.call(MsgType::Expand, &Query::new(request))?;
        Ok(pairs.into_iter().map(Key::from_pairs).collect())
    }

    /// Extracted by the server, where the data is: only the values come back.
    fn extract(
        &self,
        request: &Request,
        ranges: &[std::ops::Range<u64>],
    ) -> Result<Vec<crate::api::Extraction>, ApiError> {
        let mut q = Query::new(request);
        q.ranges = ranges.iter().map(|r| (r.start, r.end)).collect();
        let wire: Vec<crate::remote::protocol::WireExtraction> = self.call(MsgType::Extract, &q)?;
        Ok(wire.into_iter().map(|w| w.into_api()).collect())
    }

    fn axes(&self, request: &Request, depth: u8) -> Result<AxesMap, ApiError> {
        let mut q = Query::new(request);
        q.depth = depth;
        self.call(MsgType::Axes, &q)
    }

    fn where_(&self, request: &Request) -> Result<Vec<WhereElement>, ApiError> {
        self.call(MsgType::Where, &Query::new(request))
    }

    fn wipe(&self, request: &Request, doit: bool) -> Result<Vec<WipeElement>, ApiError> {
        let mut q = Query::new(request);
        q.doit = doit;
        self.call(MsgType::Wipe, &q)
    }

    fn purge(&self, request: &Request, doit: bool) -> Result<Vec<PurgeElement>, ApiError> {
        let mut q = Query::new(request);
        q.doit = doit;
        self.call(MsgType::Purge, &q)
    }

    fn stats(&self, request: &Request) -> Result<Vec<StatsElement>, ApiError> {
        self.call(MsgType::Stats, &Query::new(request))
    }

    fn dump(&self, request: &Request) -> Result<Vec<DumpElement>, ApiError> {
        self.call(MsgType::Dump, &Query::new(request))
    }

    fn control(
        &self,
        request: &Request,
        action: ControlAction,
        identifiers: &[ControlIdentifier],
    ) -> Result<Vec<ControlElement>, ApiError> {
        let mut q = Query::new(request);
        q.action = Some(p::action_name(action).into());
        q.identifiers = identifiers.iter().map(|i| i.name().to_string()).collect();
        self.call(MsgType::Control, &q)
    }

    fn compact(&self, request: &Request) -> Result<Vec<CompactElement>, ApiError> {
        self.call(MsgType::Compact, &Query::new(request))
    }

    fn explain_nothing(&self, request: &Request) -> String {
        match self.call::<String>(MsgType::Explain, &Query::new(request)) {
            Ok(s) => s,
            Err(e) => format!("(asking {} why failed: {e})", self.endpoint),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::{archives_during_held_flush, local, SlowFlush};
    use crate::remote::{FdbFactory, Server, ServerOptions};
    use std::sync::Arc;

    fn key(step: usize) -> Key {
        Key::parse(&format!("class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step={step},levelist=500,param=130")).unwrap()
    }

    /// A flush waits for the server's fsync and commit; threads sharing the handle must go on
    /// archiving meanwhile.
    #[test]
    fn archives_go_on_while_a_flush_waits_for_the_server() {
        let d = tempfile::tempdir().unwrap();
        let slow = SlowFlush::new(local(d.path()));
        let factory: Box<FdbFactory> = Box::new({
            let slow = slow.clone();
            move || Ok(Box::new(slow.clone()) as Box<dyn Fdb>)
        });
        let server = Server::bind("127.0.0.1:0", factory, ServerOptions::default()).unwrap();
        let port = server.local_addr().port();
        let stop = server.shutdown_handle();
        let serving = std::thread::spawn(move || server.run());

        let fdb = Arc::new(RemoteFdb::new("127.0.0.1", port, None));
        fdb.archive(Some(&key(0)), b"f0").unwrap();
        let went_on = archives_during_held_flush(
            &fdb,
            |entered, released| slow.arm(entered, released),
            |fdb| fdb.archive(Some(&key(1)), b"f1"),
        );
        assert!(went_on, "an archive waited for another thread's flush");
        let all = crate::model::request::parse_request("class=od").unwrap();
        assert_eq!(fdb.list(&all, ListOptions::default()).unwrap().count(), 1);
        fdb.flush().unwrap();
        assert_eq!(fdb.list(&all, ListOptions::default()).unwrap().count(), 2);
        // A third batch goes through the connection the first flush gave back.
        fdb.archive(Some(&key(2)), b"f2").unwrap();
        fdb.flush().unwrap();
        assert_eq!(fdb.list(&all, ListOptions::default()).unwrap().count(), 3);
        stop.shutdown();
        serving.join().unwrap().unwrap();
    }

    /// A server over a local store in `dir`, holding the fields of steps 0, 6 and 12 with
    /// bytes of different lengths (the middle one spanning several data frames).
    fn serve_three(
        dir: &std::path::Path,
    ) -> (
        crate::remote::ShutdownHandle,
        std::thread::JoinHandle<Result<(), RemoteError>>,
        RemoteFdb,
        Vec<u8>,
    ) {
        let slow = SlowFlush::new(local(dir));
        let factory: Box<FdbFactory> = Box::new(move || Ok(Box::new(slow.clone()) as Box<dyn Fdb>));
        let opts = ServerOptions {
            chunk_size: 64 << 10,
            ..ServerOptions::default()
        };
        let server = Server::bind("127.0.0.1:0", factory, opts).unwrap();
        let port = server.local_addr().port();
        let stop = server.shutdown_handle();
        let serving = std::thread::spawn(move || server.run());
        let fdb = RemoteFdb::new("127.0.0.1", port, None);
        let mut whole = Vec::new();
        for (step, len) in [(0, 5usize), (6, 300_000), (12, 7)] {
            let data: Vec<u8> = (0..len).map(|i| (i % 251) as u8 ^ step as u8).collect();
            fdb.archive(Some(&key(step)), &data).unwrap();
            whole.extend_from_slice(&data);
        }
        fdb.flush().unwrap();
        (stop, serving, fdb, whole)
    }

    fn three() -> Request {
        crate::model::request::parse_request("class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step=0/6/12,levelist=500,param=130").unwrap()
    }

    /// Seeking back sends the retrieve again; every field boundary, a point inside a field and
    /// a step back within the chunk in memory read the right bytes.
    #[test]
    fn a_retrieve_seeks_back_to_every_field_boundary() {
        let d = tempfile::tempdir().unwrap();
        let (stop, serving, fdb, whole) = serve_three(d.path());
        let mut r = fdb.retrieve(&three()).unwrap();
        assert_eq!(r.size(), whole.len() as u64);
        let mut got = Vec::new();
        r.read_to_end(&mut got).unwrap();
        assert!(got == whole);
        let mut targets: Vec<u64> = r.fields().iter().map(|f| f.offset).collect();
        targets.extend([r.size(), 100_000]);
        for &to in targets.iter().rev() {
            assert_eq!(r.seek(io::SeekFrom::Start(to)).unwrap(), to);
            assert_eq!(r.tell(), to);
            let mut rest = Vec::new();
            r.read_to_end(&mut rest).unwrap();
            assert!(rest == whole[to as usize..], "the bytes from {to}");
        }
        for f in r.fields().to_vec() {
            r.seek(io::SeekFrom::Start(f.offset)).unwrap();
            let mut one = vec![0u8; f.length as usize];
            r.read_exact(&mut one).unwrap();
            assert!(one == whole[f.offset as usize..(f.offset + f.length) as usize]);
        }
        // A step back within the chunk in memory, then a rewind after the handle is gone.
        r.seek(io::SeekFrom::Start(1)).unwrap();
        let mut two = [0u8; 2];
        r.read_exact(&mut two).unwrap();
        r.seek(io::SeekFrom::Current(-2)).unwrap();
        r.read_exact(&mut two).unwrap();
        assert_eq!(two, whole[1..3]);
        drop(fdb);
        r.rewind().unwrap();
        let mut again = Vec::new();
        r.read_to_end(&mut again).unwrap();
        assert!(again == whole);
        stop.shutdown();
        serving.join().unwrap().unwrap();
    }

    /// A flush that changes the answer between the first read and a seek back: the seek fails
    /// naming it, and the reader goes on where it was with the bytes of its first answer.
    #[test]
    fn a_seek_back_after_the_answer_changed_is_an_error_never_other_bytes() {
        let d = tempfile::tempdir().unwrap();
        let (stop, serving, fdb, whole) = serve_three(d.path());
        let mut r = fdb.retrieve(&three()).unwrap();
        // Past the chunk in memory, so that going back needs the retrieve again.
        let mut head = vec![0u8; 200_000];
        r.read_exact(&mut head).unwrap();
        fdb.archive(Some(&key(6)), b"a shorter field").unwrap();
        fdb.flush().unwrap();
        let e = r.seek(io::SeekFrom::Start(0)).unwrap_err();
        let api = e
            .get_ref()
            .and_then(|i| i.downcast_ref::<ApiError>())
            .unwrap();
        assert_eq!(api.kind(), ErrorKind::Corrupt, "{e}");
        let msg = e.to_string();
        assert!(
            msg.contains("answer changed") && msg.contains("step=6"),
            "{msg}"
        );
        assert_eq!(r.tell(), 200_000);
        let mut rest = Vec::new();
        r.read_to_end(&mut rest).unwrap();
        assert!(rest == whole[200_000..], "the rest of the first answer");
        // Other bytes of the same length change it too: the announced checksums tell.
        fdb.archive(Some(&key(6)), &whole[5..300_005]).unwrap();
        fdb.flush().unwrap();
        let mut r = fdb.retrieve(&three()).unwrap();
        r.read_exact(&mut head).unwrap();
        let mut same_length = whole[5..300_005].to_vec();
        same_length[1000] ^= 0xff;
        fdb.archive(Some(&key(6)), &same_length).unwrap();
        fdb.flush().unwrap();
        let e = r.seek(io::SeekFrom::Start(0)).unwrap_err();
        assert!(
            e.to_string().contains("other bytes of the same length"),
            "{e}"
        );
        // A wipe changes the answer too.
        let db = crate::model::request::parse_request(
            "class=od,expver=0001,stream=oper,date=20261122,time=1200",
        )
        .unwrap();
        fdb.archive(Some(&key(6)), &whole[5..300_005]).unwrap();
        fdb.flush().unwrap();
        let mut r = fdb.retrieve(&three()).unwrap();
        r.read_exact(&mut head).unwrap();
        fdb.wipe(&db, true).unwrap();
        let e = r.seek(io::SeekFrom::Start(0)).unwrap_err();
        assert!(e.to_string().contains("answer changed"), "{e}");
        stop.shutdown();
        serving.join().unwrap().unwrap();
    }

    /// Maintenance answers arrive as the same typed elements the server's store made, and a
    /// failure as an error of the same kind.
    #[test]
    fn elements_and_error_kinds_survive_the_wire() {
        let d = tempfile::tempdir().unwrap();
        let slow = SlowFlush::new(local(d.path()));
        let store = slow.inner.clone();
        let factory: Box<FdbFactory> = Box::new({
            let slow = slow.clone();
            move || Ok(Box::new(slow.clone()) as Box<dyn Fdb>)
        });
        let server = Server::bind("127.0.0.1:0", factory, ServerOptions::default()).unwrap();
        let port = server.local_addr().port();
        let stop = server.shutdown_handle();
        let serving = std::thread::spawn(move || server.run());
        let fdb = RemoteFdb::new("127.0.0.1", port, None);
        fdb.archive(Some(&key(0)), b"f0").unwrap();
        fdb.flush().unwrap();

        let parse = crate::model::request::parse_request;
        let db = parse("class=od,expver=0001,stream=oper,date=20261122,time=1200").unwrap();
        assert_eq!(fdb.where_(&db).unwrap(), store.where_(&db).unwrap());
        assert_eq!(fdb.stats(&db).unwrap(), store.stats(&db).unwrap());
        assert_eq!(fdb.dump(&db).unwrap(), store.dump(&db).unwrap());
        assert_eq!(fdb.stats(&db).unwrap()[0].fields, 1);
        let locked = fdb
            .control(&db, ControlAction::Lock, &[ControlIdentifier::Wipe])
            .unwrap();
        assert!(locked[0].is_locked(ControlIdentifier::Wipe));
        assert_eq!(locked[0].db, store.where_(&db).unwrap()[0].db);

        let remote = fdb.wipe(&db, true).unwrap_err();
        let here = store.wipe(&db, true).unwrap_err();
        assert_eq!(here.kind(), ErrorKind::Locked);
        assert_eq!(remote.kind(), here.kind(), "{remote}");
        let nothing = parse("class=rd,expver=0001,stream=oper,date=20261122,time=1200").unwrap();
        assert_eq!(
            fdb.wipe(&nothing, false).unwrap_err().kind(),
            ErrorKind::NotFound
        );
        // A request the server cannot read is the client's mistake, wherever it is found.
        let bad = parse("class=od,date=notadate").unwrap();
        let (remote, here) = (
            fdb.where_(&bad).unwrap_err(),
            store.where_(&bad).unwrap_err(),
        );
        assert_eq!(remote.kind(), here.kind(), "{remote} / {here}");
        // A batch the server refuses fails its flush with the kind of the first refusal.
        let partial = Key::parse("class=od,expver=0001").unwrap();
        fdb.archive(Some(&partial), b"f").unwrap();
        let remote = fdb.flush().unwrap_err();
        let here = store.archive(Some(&partial), b"f").unwrap_err();
        assert_ne!(here.kind(), ErrorKind::Remote);
        assert_eq!(remote.kind(), here.kind(), "{remote} / {here}");
        let unlocked = fdb
            .control(&db, ControlAction::Unlock, &[ControlIdentifier::Wipe])
            .unwrap();
        assert!(unlocked[0].locked.is_empty());
        stop.shutdown();
        serving.join().unwrap().unwrap();
        // A server that is gone is a remote failure.
        assert_eq!(fdb.stats(&db).unwrap_err().kind(), ErrorKind::Remote);
    }
}
