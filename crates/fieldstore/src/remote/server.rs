//! `fieldstore server`: serves one config's store over TCP (docs/protocol.md).
//!
//! A thread per connection, blocking I/O: the `Fdb` interface is synchronous, and a thread that is
//! blocked writing to a slow client is exactly the back-pressure we want. What a connection holds
//! is bounded: one frame being received (at most `max_payload`) or, while streaming a retrieve,
//! at most three chunks (one being read from the store, one queued, one being written).
//!
//! Each archive connection gets its own `Fdb` from the factory, so a flush makes visible exactly
//! what that client archived, and a client that vanishes takes its unflushed fields with it.

use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use super::error::RemoteError;
use super::metrics::Metrics;
use super::protocol::{
    self as p, kinds, ErrorReply, FrameHeader, Hello, MsgType, Query, Role, StreamEnd, Welcome,
    WireListElement,
};
use super::transport::{Socket, TlsAcceptor};
use crate::api::{ApiError, Fdb, ListOptions, Notice};
use crate::error_kind::ErrorKind;
use crate::model::request::Request;

/// Builds a fresh handle on the served store (one per archive connection).
pub type FdbFactory = dyn Fn() -> Result<Box<dyn Fdb>, ApiError> + Send + Sync;

/// How often a blocked read wakes up to notice a shutdown.
const POLL: Duration = Duration::from_millis(200);
/// A client must say hello within this long after connecting.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A subscription's batch of notices is sent once it reaches this many bytes.
const NOTICE_BATCH_BYTES: usize = 1 << 20;
/// A client that stops in the middle of a frame for this long is dropped.
const STALL_LIMIT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Clients must present this token; `None` accepts anyone who can connect.
    pub token: Option<String>,
    /// Size of the chunks retrieve and list stream in.
    pub chunk_size: usize,
    /// The largest payload a frame may carry (the largest field a client may archive).
    pub max_payload: u64,
    /// Connections beyond this are refused with a "busy" error.
    pub max_connections: usize,
    /// How long a shutdown waits for open connections to finish what they are doing.
    pub grace: Duration,
    /// Serve TLS only (with this identity) instead of plain TCP.
    pub tls: Option<TlsAcceptor>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            token: None,
            chunk_size: p::DEFAULT_CHUNK_SIZE,
            max_payload: p::DEFAULT_MAX_PAYLOAD,
            max_connections: 1024,
            grace: Duration::from_secs(60),
            tls: None,
        }
    }
}

struct Shared {
    opts: ServerOptions,
    factory: Box<FdbFactory>,
    /// Serves every request but archive and flush.
    fdb: Box<dyn Fdb>,
    metrics: Arc<Metrics>,
    stopping: AtomicBool,
    addr: SocketAddr,
    next_conn: AtomicU64,
    /// Connections being served, and a signal when one ends.
    active: Mutex<usize>,
    ended: Condvar,
}

pub struct Server {
    listener: TcpListener,
    shared: Arc<Shared>,
}

/// Asks a running server to stop: no new connections, open ones finish the request in hand.
#[derive(Clone)]
pub struct ShutdownHandle {
    shared: Arc<Shared>,
}

impl ShutdownHandle {
    pub fn shutdown(&self) {
        if self.shared.stopping.swap(true, Ordering::SeqCst) {
            return;
        }
        info!("shutting down: finishing requests in progress");
        // Wake the accept loop, which is blocked in accept().
        let mut wake = self.shared.addr;
        if wake.ip().is_unspecified() {
            wake.set_ip(match wake {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
    }
}

impl Server {
    pub fn bind(
        listen: &str,
        factory: Box<FdbFactory>,
        opts: ServerOptions,
    ) -> Result<Server, RemoteError> {
        let fdb = factory()
            .map_err(|e| RemoteError::payload("config", format!("cannot open the store: {e}")))?;
        let listener = TcpListener::bind(listen).map_err(|e| RemoteError::Connect {
            endpoint: listen.to_string(),
            source: io::Error::new(e.kind(), format!("cannot listen on {listen}: {e}")),
        })?;
        let addr = listener.local_addr()?;
        Ok(Server {
            listener,
            shared: Arc::new(Shared {
                opts,
                factory,
                fdb,
                metrics: Arc::new(Metrics::default()),
                stopping: AtomicBool::new(false),
                addr,
                next_conn: AtomicU64::new(1),
                active: Mutex::new(0),
                ended: Condvar::new(),
            }),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.shared.addr
    }

    pub fn metrics(&self) -> Arc<Metrics> {
        self.shared.metrics.clone()
    }

    pub fn shutdown_handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            shared: self.shared.clone(),
        }
    }

    /// Serves until a shutdown is asked for, then waits (up to the grace period) for open
    /// connections to finish.
    pub fn run(self) -> Result<(), RemoteError> {
        info!(addr = %self.shared.addr, store = %self.shared.fdb.name(), token = self.shared.opts.token.is_some(), "serving");
        for stream in self.listener.incoming() {
            if self.shared.stopping.load(Ordering::SeqCst) {
                break;
            }
            let stream = match stream {
                Ok(s) => s,
                Err(e) => {
                    // Out of file descriptors and the like: let others finish, then go on.
                    warn!("accept failed: {e}");
                    std::thread::sleep(Duration::from_millis(50));
                    continue;
                }
            };
            self.spawn(stream);
        }
        drop(self.listener);
        let deadline = Instant::now() + self.shared.opts.grace;
        let mut active = self.shared.active.lock().unwrap_or_else(|e| e.into_inner());
        while *active > 0 {
            let now = Instant::now();
            if now >= deadline {
                warn!(
                    "{} connections still busy after the grace period; their unflushed fields are discarded",
                    *active
                );
                break;
            }
            active = self
                .shared
                .ended
                .wait_timeout(active, deadline - now)
                .map(|r| r.0)
                .unwrap_or_else(|e| e.into_inner().0);
        }
        info!("server stopped");
        Ok(())
    }

    fn spawn(&self, stream: TcpStream) {
        let shared = self.shared.clone();
        let peer = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "?".into());
        {
            let mut active = shared.active.lock().unwrap_or_else(|e| e.into_inner());
            if *active >= shared.opts.max_connections {
                drop(active);
                shared.metrics.refused.fetch_add(1, Ordering::Relaxed);
                warn!(%peer, "refused: {} connections already open", shared.opts.max_connections);
                let mut w = &stream;
                let _ = w.set_write_timeout(Some(Duration::from_secs(1)));
                let _ = write_error(
                    &mut w,
                    0,
                    kinds::BUSY,
                    &format!(
                        "the server already has {} connections open (its --max-connections); try again later",
                        shared.opts.max_connections
                    ),
                );
                return;
            }
            *active += 1;
        }
        let id = shared.next_conn.fetch_add(1, Ordering::Relaxed);
        shared
            .metrics
            .connections_total
            .fetch_add(1, Ordering::Relaxed);
        shared
            .metrics
            .connections_open
            .fetch_add(1, Ordering::Relaxed);
        let guard = ActiveGuard(shared.clone());
        let spawned = std::thread::Builder::new()
            .name(format!("conn-{id}"))
            .spawn(move || {
                let _guard = guard;
                let span = tracing::info_span!("conn", id, %peer);
                let _e = span.enter();
                let socket = match open_socket(stream, &_guard.0) {
                    Ok(s) => s,
                    Err(e) => {
                        _guard.0.metrics.refused.fetch_add(1, Ordering::Relaxed);
                        warn!("cannot set up the connection: {e}");
                        return;
                    }
                };
                match Connection::new(socket, &_guard.0) {
                    Ok(mut c) => c.serve(),
                    Err(e) => warn!("cannot set up the connection: {e}"),
                }
            });
        if let Err(e) = spawned {
            // The guard went down with the closure: the count is already right.
            warn!("cannot start a thread for a connection: {e}");
        }
    }
}

/// The connection's byte stream: the TCP socket itself, or, with TLS, the pump's end once the
/// handshake (bounded in time, so a silent client cannot hold a thread) succeeded.
fn open_socket(stream: TcpStream, shared: &Shared) -> io::Result<Socket> {
    stream.set_nodelay(true)?;
    match &shared.opts.tls {
        None => Ok(Socket::Tcp(stream)),
        Some(tls) => {
            stream.set_read_timeout(Some(Duration::from_secs(10)))?;
            stream.set_write_timeout(Some(Duration::from_secs(10)))?;
            let socket = tls.accept(stream)?;
            Ok(socket)
        }
    }
}

/// Counts a connection as open for exactly as long as its thread runs.
struct ActiveGuard(Arc<Shared>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0
            .metrics
            .connections_open
            .fetch_sub(1, Ordering::Relaxed);
        let mut active = self.0.active.lock().unwrap_or_else(|e| e.into_inner());
        *active = active.saturating_sub(1);
        self.0.ended.notify_all();
    }
}

/// The socket's read side: retries the periodic timeouts, and gives up at a frame boundary once
/// the server is stopping (mid-frame it keeps reading, so a request in flight is finished).
struct ConnReader<'a> {
    stream: Socket,
    stopping: &'a AtomicBool,
    at_boundary: bool,
    deadline: Option<Instant>,
    stopped: bool,
}

impl Read for ConnReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let waiting_since = Instant::now();
        loop {
            match self.stream.read(buf) {
                Ok(n) => {
                    if n > 0 {
                        self.at_boundary = false;
                    }
                    return Ok(n);
                }
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    if self.deadline.is_some_and(|d| Instant::now() >= d) {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "no hello within 10 s of connecting",
                        ));
                    }
                    if self.at_boundary && self.stopping.load(Ordering::SeqCst) {
                        self.stopped = true;
                        return Err(io::Error::new(
                            io::ErrorKind::ConnectionAborted,
                            "server shutting down",
                        ));
                    }
                    if !self.at_boundary && waiting_since.elapsed() > STALL_LIMIT {
                        return Err(io::Error::new(
                            io::ErrorKind::TimedOut,
                            "the client stopped sending in the middle of a frame",
                        ));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

fn write_error<W: Write>(w: &mut W, request: u64, kind: &str, message: &str) -> io::Result<u64> {
    let body = p::to_json(&ErrorReply::new(kind, message, kinds::error_kind(kind)));
    let n = p::write_frame(w, p::VERSION_MIN, MsgType::Error, request, &[&body])?;
    w.flush()?;
    Ok(n)
}

/// An api error as one line with its causes, which is what the remote user will read.
fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let m = c.to_string();
        if !s.contains(&m) {
            s.push_str(": ");
            s.push_str(&m);
        }
        cause = c.source();
    }
    s
}

/// Why a connection loop stopped early (the socket is unusable; nothing to send).
type Broken = RemoteError;

struct Connection<'a> {
    shared: &'a Shared,
    reader: BufReader<ConnReader<'a>>,
    writer: BufWriter<Socket>,
    version: u16,
    payload: Vec<u8>,
}

impl<'a> Connection<'a> {
    fn new(stream: Socket, shared: &'a Shared) -> io::Result<Connection<'a>> {
        stream.set_read_timeout(Some(POLL))?;
        let write_side = stream.try_clone()?;
        Ok(Connection {
            shared,
            reader: BufReader::with_capacity(
                256 << 10,
                ConnReader {
                    stream,
                    stopping: &shared.stopping,
                    at_boundary: true,
                    deadline: None,
                    stopped: false,
                },
            ),
            writer: BufWriter::with_capacity(256 << 10, write_side),
            version: p::VERSION_MIN,
            payload: Vec::new(),
        })
    }

    fn serve(&mut self) {
        let role = match self.handshake() {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => {
                debug!("handshake failed: {e}");
                return;
            }
        };
        info!(?role, version = self.version, "client connected");
        let end = match role {
            Role::Control => self.control_loop(),
            Role::Archive => self.archive_loop(),
        };
        match end {
            Ok(()) => info!("client disconnected"),
            Err(e) => info!("connection closed: {e}"),
        }
    }

    /// The next request; `None` when the client closed between frames or the server is stopping.
    /// A frame that cannot be decoded gets an error frame and closes the connection.
    fn next_frame(&mut self, max: u64) -> Result<Option<FrameHeader>, Broken> {
        if self.reader.buffer().is_empty() {
            self.reader.get_mut().at_boundary = true;
        }
        match p::read_frame(&mut self.reader, max, &mut self.payload) {
            Ok(h) => {
                self.shared
                    .metrics
                    .bytes_in
                    .fetch_add(h.length + p::FRAME_OVERHEAD, Ordering::Relaxed);
                Ok(Some(h))
            }
            Err(RemoteError::Closed) => Ok(None),
            Err(_) if self.reader.get_ref().stopped => Ok(None),
            Err(e @ RemoteError::Io(_)) | Err(e @ RemoteError::Truncated) => Err(e),
            Err(e) => {
                self.shared
                    .metrics
                    .frame_errors
                    .fetch_add(1, Ordering::Relaxed);
                warn!("invalid frame, closing the connection: {e}");
                let _ = write_error(&mut self.writer, 0, kinds::FRAME, &e.to_string());
                Err(e)
            }
        }
    }

    fn send(&mut self, kind: MsgType, request: u64, parts: &[&[u8]]) -> Result<(), Broken> {
        let n = p::write_frame(&mut self.writer, self.version, kind, request, parts)?;
        self.shared
            .metrics
            .bytes_out
            .fetch_add(n, Ordering::Relaxed);
        Ok(())
    }

    fn reply(&mut self, request: u64, body: &[u8]) -> Result<(), Broken> {
        self.send(MsgType::Reply, request, &[body])?;
        Ok(self.writer.flush()?)
    }

    fn send_error(&mut self, request: u64, kind: &str, message: &str) -> Result<(), Broken> {
        self.send_error_of(request, kind, message, kinds::error_kind(kind))
    }

    fn send_error_of(
        &mut self,
        request: u64,
        kind: &str,
        message: &str,
        error_kind: ErrorKind,
    ) -> Result<(), Broken> {
        let body = p::to_json(&ErrorReply::new(kind, message, error_kind));
        self.send(MsgType::Error, request, &[&body])?;
        Ok(self.writer.flush()?)
    }

    fn send_api_error(&mut self, request: u64, e: &ApiError) -> Result<(), Broken> {
        let kind = match e {
            ApiError::NothingMatched(_) => kinds::NOTHING_MATCHED,
            _ => kinds::FAILED,
        };
        self.send_error_of(request, kind, &error_chain(e), e.kind())
    }

    fn handshake(&mut self) -> Result<Option<Role>, Broken> {
        self.reader.get_mut().deadline = Some(Instant::now() + HANDSHAKE_TIMEOUT);
        let Some(h) = self.next_frame(p::HANDSHAKE_MAX_PAYLOAD)? else {
            return Ok(None);
        };
        self.reader.get_mut().deadline = None;
        let refuse = |c: &mut Self, kind: &str, msg: &str| -> Result<Option<Role>, Broken> {
            c.shared.metrics.refused.fetch_add(1, Ordering::Relaxed);
            warn!("refused: {msg}");
            c.send_error(h.request, kind, msg)?;
            Ok(None)
        };
        if h.kind != MsgType::Hello {
            return refuse(
                self,
                kinds::BAD_REQUEST,
                &format!("expected a hello frame first, got {}", h.kind.op_name()),
            );
        }
        let hello: Hello = match p::from_json("hello", &self.payload) {
            Ok(h) => h,
            Err(e) => return refuse(self, kinds::BAD_REQUEST, &e.to_string()),
        };
        let Some(version) = hello
            .versions
            .iter()
            .copied()
            .filter(|v| (p::SESSION_VERSION_MIN..=p::VERSION_MAX).contains(v))
            .max()
        else {
            return refuse(
                self,
                kinds::VERSION,
                &format!(
                    "the client speaks protocol versions {:?}, this server {}..={}: upgrade the older side",
                    hello.versions,
                    p::SESSION_VERSION_MIN,
                    p::VERSION_MAX
                ),
            );
        };
        if let Some(want) = &self.shared.opts.token {
            let ok = hello.token.as_deref().is_some_and(|t| same_secret(t, want));
            if !ok {
                let what = if hello.token.is_some() {
                    "wrong token"
                } else {
                    "this server requires a token and the client sent none"
                };
                return refuse(
                    self,
                    kinds::AUTH,
                    &format!(
                        "{what} (set `token:` in the client's remote config, or FIELDSTORE_TOKEN)"
                    ),
                );
            }
        }
        self.version = version;
        let body = p::to_json(&Welcome {
            version,
            server: format!("fieldstore/{}", env!("CARGO_PKG_VERSION")),
            chunk_size: self.shared.opts.chunk_size as u64,
        });
        self.send(MsgType::Welcome, h.request, &[&body])?;
        self.writer.flush()?;
        debug!(client = %hello.client, "handshake done");
        Ok(Some(hello.role))
    }

    fn control_loop(&mut self) -> Result<(), Broken> {
        let max = self.shared.opts.max_payload;
        while let Some(h) = self.next_frame(max)? {
            let started = Instant::now();
            let ok = match h.kind {
                MsgType::Retrieve => self.retrieve(h.request)?,
                MsgType::List => self.list(h.request)?,
                MsgType::Axes
                | MsgType::Where
                | MsgType::Dump
                | MsgType::Stats
                | MsgType::Wipe
                | MsgType::Purge
                | MsgType::Control
                | MsgType::Compact
                | MsgType::Explain => self.simple(h)?,
                MsgType::Expand => self.expand(h.request)?,
                MsgType::Subscribe => self.subscribe(h.request)?,
                MsgType::Archive | MsgType::Flush => {
                    self.send_error(h.request, kinds::BAD_REQUEST, "archive and flush go on an archive connection (role \"archive\" in the hello)")?;
                    false
                }
                other => {
                    self.send_error(
                        h.request,
                        kinds::BAD_REQUEST,
                        &format!("a {} frame is not a request", other.op_name()),
                    )?;
                    false
                }
            };
            debug!(op = h.kind.op_name(), ok, elapsed = ?started.elapsed(), "request");
            self.shared.metrics.record(h.kind, started.elapsed(), ok);
        }
        Ok(())
    }

    /// Decodes a request payload; a malformed one gets an error frame and `None`.
    fn query(&mut self, request: u64) -> Result<Option<Query>, Broken> {
        match p::from_json::<Query>("request", &self.payload) {
            Ok(q) => Ok(Some(q)),
            Err(e) => {
                self.send_error(request, kinds::BAD_REQUEST, &e.to_string())?;
                Ok(None)
            }
        }
    }

    /// Requests with one reply.
    fn simple(&mut self, h: FrameHeader) -> Result<bool, Broken> {
        let Some(q) = self.query(h.request)? else {
            return Ok(false);
        };
        let req = q.request.to_request();
        let fdb = &*self.shared.fdb;
        let result: Result<Vec<u8>, ApiError> = match h.kind {
            MsgType::Axes => fdb.axes(&req, q.depth).map(|a| p::to_json(&a)),
            MsgType::Where => fdb.where_(&req).map(|v| p::to_json(&v)),
            MsgType::Dump => fdb.dump(&req).map(|v| p::to_json(&v)),
            MsgType::Stats => fdb.stats(&req).map(|v| p::to_json(&v)),
            MsgType::Wipe => fdb.wipe(&req, q.doit).map(|v| p::to_json(&v)),
            MsgType::Purge => fdb.purge(&req, q.doit).map(|v| p::to_json(&v)),
            MsgType::Compact => fdb.compact(&req).map(|v| p::to_json(&v)),
            MsgType::Explain => Ok(p::to_json(&fdb.explain_nothing(&req))),
            _ => {
                let action = q.action.as_deref().and_then(p::parse_action);
                let ids: Option<Vec<_>> = q
                    .identifiers
                    .iter()
                    .map(|s| p::parse_identifier(s))
                    .collect();
                let (Some(action), Some(ids)) = (action, ids) else {
                    self.send_error(
                        h.request,
                        kinds::BAD_REQUEST,
                        &format!(
                            "control needs an action (lock, unlock, status) and identifiers among list, retrieve, archive, wipe; got {:?} {:?}",
                            q.action, q.identifiers
                        ),
                    )?;
                    return Ok(false);
                };
                fdb.control(&req, action, &ids).map(|v| p::to_json(&v))
            }
        };
        match result {
            Ok(body) => {
                self.reply(h.request, &body)?;
                Ok(true)
            }
            Err(e) => {
                self.send_api_error(h.request, &e)?;
                Ok(false)
            }
        }
    }

    /// The full keys a retrieve names, as a JSON array of key pairs.
    fn expand(&mut self, request: u64) -> Result<bool, Broken> {
        let Some(q) = self.query(request)? else {
            return Ok(false);
        };
        match self.shared.fdb.wanted_fields(&q.request.to_request()) {
            Ok(keys) => {
                let pairs: Vec<_> = keys.iter().map(p::key_pairs).collect();
                self.reply(request, &p::to_json(&pairs))?;
                Ok(true)
            }
            Err(e) => {
                self.send_api_error(request, &e)?;
                Ok(false)
            }
        }
    }

    /// Serves a subscription on this connection until the client goes, the subscription fails
    /// or the server stops (the client then resumes elsewhere from its position). Writes block:
    /// a slow subscriber is held back by TCP flow control, holding one batch here, and slows
    /// nobody else. A keep-alive every few seconds finds a vanished client and tells the client
    /// where it stands (commits that matched nothing move it on too).
    fn subscribe(&mut self, request: u64) -> Result<bool, Broken> {
        let q = match p::from_json::<p::SubscribeQuery>("subscribe", &self.payload) {
            Ok(q) => q,
            Err(e) => {
                self.send_error(request, kinds::BAD_REQUEST, &e.to_string())?;
                return Ok(false);
            }
        };
        let shared = self.shared;
        let subscribed = if q.data {
            shared
                .fdb
                .subscribe_with_data(&q.request.to_request(), &q.start)
        } else {
            shared.fdb.subscribe(&q.request.to_request(), &q.start)
        };
        let mut sub = match subscribed {
            Ok(s) => s,
            Err(e) => {
                self.send_api_error(request, &e)?;
                return Ok(false);
            }
        };
        let metrics = &shared.metrics;
        metrics.subscriptions_open.fetch_add(1, Ordering::Relaxed);
        struct Open<'a>(&'a Metrics);
        impl Drop for Open<'_> {
            fn drop(&mut self) {
                self.0.subscriptions_open.fetch_sub(1, Ordering::Relaxed);
            }
        }
        let _open = Open(metrics);
        let first = p::WireNotices {
            start: Some(sub.position()),
            ..p::WireNotices::default()
        };
        self.send(MsgType::Notices, request, &[&p::to_json(&first)])?;
        self.writer.flush()?;
        let chunk = shared.opts.chunk_size.clamp(1, NOTICE_BATCH_BYTES);
        let mut last_sent = Instant::now();
        loop {
            if shared.stopping.load(Ordering::SeqCst) {
                return Ok(true);
            }
            let mut batch = Vec::with_capacity(1024);
            let mut count = 0u64;
            let mut wait = POLL;
            loop {
                match sub.next_within(wait) {
                    Ok(Some(n)) if q.data => {
                        self.send_notice_data(request, n)?;
                        last_sent = Instant::now();
                        wait = Duration::ZERO;
                    }
                    Ok(Some(n)) => {
                        batch.push(if count == 0 { b'[' } else { b',' });
                        batch.extend_from_slice(&p::to_json(&p::WireNotice::from(&n)));
                        count += 1;
                        // Take what is ready now, up to a batch.
                        wait = Duration::ZERO;
                        if batch.len() >= chunk {
                            break;
                        }
                    }
                    Ok(None) => break,
                    Err(e) => {
                        // The notices already taken go first: they are the client's.
                        if count > 0 {
                            self.send_notices(request, &mut batch, count)?;
                        }
                        self.send_api_error(request, &e)?;
                        return Ok(false);
                    }
                }
            }
            if count > 0 {
                self.send_notices(request, &mut batch, count)?;
                last_sent = Instant::now();
            } else if self.client_closed() {
                // Its subscription ended: free what it holds now, not at the next keep-alive.
                return Ok(true);
            } else if last_sent.elapsed() >= p::KEEPALIVE {
                // Everything taken was sent: this is where the client stands once it read it.
                let alive = p::WireNotices {
                    position: Some(sub.position()),
                    ..p::WireNotices::default()
                };
                self.send(MsgType::Notices, request, &[&p::to_json(&alive)])?;
                self.writer.flush()?;
                last_sent = Instant::now();
            }
        }
    }

    /// One notice with its field's bytes: those the subscription read, else retrieved here (a
    /// composed store's subscription carries none). A field gone meanwhile goes as a plain
    /// notice: the client's own retrieve then says what happened to it.
    fn send_notice_data(&mut self, request: u64, mut n: Notice) -> Result<(), Broken> {
        let data = match n.data.take() {
            Some(d) => Some(d),
            None => self.retrieve_noticed(&n),
        };
        let notice = p::to_json(&p::WireNotice::from(&n));
        match data {
            Some(d) => {
                let len = (notice.len() as u32).to_be_bytes();
                self.send(MsgType::NoticeData, request, &[&len, &notice, &d])?;
                self.writer.flush()?;
                self.shared
                    .metrics
                    .notices_sent
                    .fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            None => {
                let mut batch = vec![b'['];
                batch.extend_from_slice(&notice);
                self.send_notices(request, &mut batch, 1)
            }
        }
    }

    fn retrieve_noticed(&self, n: &Notice) -> Option<Vec<u8>> {
        let mut r = Request::new(Some("retrieve"));
        let k = &n.element.key;
        for (kw, v) in k.db.iter().chain(k.index.iter()).chain(k.datum.iter()) {
            if !v.is_empty() {
                r.set(kw, vec![v.to_string()]);
            }
        }
        let mut reader = self.shared.fdb.retrieve(&r).ok()?;
        let want = n.element.location.as_ref().map(|l| l.length);
        let fields = reader.fields();
        if fields.len() != 1 || want.is_some_and(|w| fields[0].length != w) {
            return None;
        }
        let mut buf = Vec::with_capacity(usize::try_from(fields[0].length).ok()?);
        reader.read_to_end(&mut buf).ok()?;
        Some(buf)
    }

    /// Whether the client closed its end (a subscriber's client sends nothing once subscribed).
    fn client_closed(&self) -> bool {
        let s = &self.reader.get_ref().stream;
        if s.set_nonblocking(true).is_err() {
            return false;
        }
        let r = s.peek(&mut [0u8; 1]);
        let _ = s.set_nonblocking(false);
        match r {
            Ok(0) => true,
            Ok(_) => false,
            Err(e) => !matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
            ),
        }
    }

    fn send_notices(
        &mut self,
        request: u64,
        batch: &mut Vec<u8>,
        count: u64,
    ) -> Result<(), Broken> {
        batch.push(b']');
        let mut body = Vec::with_capacity(batch.len() + 16);
        body.extend_from_slice(b"{\"notices\":");
        body.extend_from_slice(batch);
        body.push(b'}');
        self.send(MsgType::Notices, request, &[&body])?;
        self.writer.flush()?;
        self.shared
            .metrics
            .notices_sent
            .fetch_add(count, Ordering::Relaxed);
        Ok(())
    }

    /// Streams the fields in `Data` frames. A reader thread fills chunks from the store while
    /// this one writes the previous chunk: a channel of one chunk, and two spare buffers cycling
    /// back, bound the memory to three chunks however slow the client.
    fn retrieve(&mut self, request: u64) -> Result<bool, Broken> {
        let Some(q) = self.query(request)? else {
            return Ok(false);
        };
        let shared = self.shared;
        let stream = match shared.fdb.retrieve(&q.request.to_request()) {
            Ok(s) => s,
            Err(e) => {
                self.send_api_error(request, &e)?;
                return Ok(false);
            }
        };
        let chunk = shared.opts.chunk_size.max(1);
        // The fields first, in frames of about a chunk: the client's reader has its size and
        // field boundaries before the first byte.
        let mut batch = Vec::with_capacity(chunk.min(1 << 20) + 1024);
        let fields = stream.fields();
        for (i, f) in fields.iter().enumerate() {
            batch.push(if batch.is_empty() { b'[' } else { b',' });
            // Serialising strings and numbers cannot fail.
            let _ = serde_json::to_writer(&mut batch, &p::WireField::from_span(f));
            if batch.len() >= chunk || i + 1 == fields.len() {
                batch.push(b']');
                self.send(MsgType::Fields, request, &[&batch])?;
                batch.clear();
            }
        }
        let (full_tx, full_rx) = sync_channel::<io::Result<Vec<u8>>>(1);
        let (empty_tx, empty_rx) = sync_channel::<Vec<u8>>(2);
        std::thread::scope(|s| {
            s.spawn(move || produce(stream, chunk, full_tx, empty_rx));
            let (mut bytes, mut items) = (0u64, 0u64);
            for filled in full_rx.iter() {
                match filled {
                    Ok(buf) => {
                        // A write error ends the scope; dropping the receiver stops the reader.
                        self.send(MsgType::Data, request, &[&buf])?;
                        bytes += buf.len() as u64;
                        items += 1;
                        let _ = empty_tx.try_send(buf);
                    }
                    Err(e) => {
                        let msg =
                            format!("retrieve failed after {bytes} bytes: {}", error_chain(&e));
                        // The store's error travels inside the I/O error of its stream.
                        let kind = e
                            .get_ref()
                            .and_then(|inner| inner.downcast_ref::<ApiError>())
                            .map_or(ErrorKind::Io, ApiError::kind);
                        self.send_error_of(request, kinds::FAILED, &msg, kind)?;
                        return Ok(false);
                    }
                }
            }
            let end = p::to_json(&StreamEnd { bytes, items });
            self.send(MsgType::End, request, &[&end])?;
            self.writer.flush()?;
            Ok(true)
        })
    }

    fn list(&mut self, request: u64) -> Result<bool, Broken> {
        let Some(q) = self.query(request)? else {
            return Ok(false);
        };
        let options = ListOptions {
            include_masked: q.include_masked,
            depth: if q.depth == 0 { 3 } else { q.depth.clamp(1, 3) },
        };
        let shared = self.shared;
        let iter = match shared.fdb.list(&q.request.to_request(), options) {
            Ok(i) => i,
            Err(e) => {
                self.send_api_error(request, &e)?;
                return Ok(false);
            }
        };
        let chunk = shared.opts.chunk_size.max(1);
        let mut batch = Vec::with_capacity(chunk.min(1 << 20) + 1024);
        let (mut in_batch, mut items, mut bytes) = (0u64, 0u64, 0u64);
        for el in iter {
            let el = match el {
                Ok(el) => el,
                Err(e) => {
                    self.send_api_error(request, &e)?;
                    return Ok(false);
                }
            };
            batch.push(if in_batch == 0 { b'[' } else { b',' });
            batch.extend_from_slice(&p::to_json(&WireListElement::from(&el)));
            in_batch += 1;
            items += 1;
            if batch.len() >= chunk {
                batch.push(b']');
                self.send(MsgType::Entries, request, &[&batch])?;
                bytes += batch.len() as u64;
                batch.clear();
                in_batch = 0;
            }
        }
        if in_batch > 0 {
            batch.push(b']');
            self.send(MsgType::Entries, request, &[&batch])?;
            bytes += batch.len() as u64;
        }
        let end = p::to_json(&StreamEnd { bytes, items });
        self.send(MsgType::End, request, &[&end])?;
        self.writer.flush()?;
        Ok(true)
    }

    /// Archive frames are applied as they arrive, without replies; a flush answers for all of
    /// them. After an archive error the rest of the batch is skipped, and the flush reports the
    /// error and discards the batch, so a failed batch leaves nothing half-visible.
    ///
    /// Receiving and storing overlap: this thread reads the next frame while an archiver thread
    /// stores the previous one (at most two fields in flight, buffers recycled), so a large
    /// field's copy off the socket and its write to the store do not wait for each other.
    fn archive_loop(&mut self) -> Result<(), Broken> {
        let shared = self.shared;
        let max = shared.opts.max_payload;
        let (jobs, inbox) = sync_channel::<Job>(2);
        let (recycle, spare) = sync_channel::<Vec<u8>>(4);
        std::thread::scope(|scope| {
            // The archiver logs under this connection's span, like the rest of it.
            let span = tracing::Span::current();
            let archiver = scope.spawn(move || {
                let _entered = span.enter();
                archiver(shared, inbox, recycle)
            });
            let result = loop {
                let h = match self.next_frame(max) {
                    Ok(Some(h)) => h,
                    Ok(None) => break Ok(()),
                    Err(e) => break Err(e),
                };
                match h.kind {
                    MsgType::Archive => {
                        let next = spare.try_recv().unwrap_or_default();
                        let field = std::mem::replace(&mut self.payload, next);
                        if jobs.send(Job::Field(field)).is_err() {
                            break Ok(());
                        }
                    }
                    MsgType::Flush => {
                        let started = Instant::now();
                        let (tx, rx) = sync_channel(1);
                        let outcome = match jobs.send(Job::Flush(tx)) {
                            Ok(()) => rx.recv().unwrap_or_else(|_| Err((0, archiver_stopped()))),
                            Err(_) => Err((0, archiver_stopped())),
                        };
                        let sent = match &outcome {
                            Ok(pending) => {
                                info!(fields = pending, elapsed = ?started.elapsed(), "flushed");
                                self.reply(h.request, &p::to_json(pending))
                            }
                            Err((pending, (kind, msg))) => {
                                warn!(fields = pending, "flush failed, batch discarded: {msg}");
                                self.send_error_of(
                                    h.request,
                                    kinds::FAILED,
                                    &format!(
                                        "{msg} (nothing archived since the last flush was stored)"
                                    ),
                                    *kind,
                                )
                            }
                        };
                        shared
                            .metrics
                            .record(h.kind, started.elapsed(), outcome.is_ok());
                        if let Err(e) = sent {
                            break Err(e);
                        }
                    }
                    other => {
                        let msg = format!(
                            "a {} frame on an archive connection (only archive and flush go here)",
                            other.op_name()
                        );
                        if let Err(e) = self.send_error(h.request, kinds::BAD_REQUEST, &msg) {
                            break Err(e);
                        }
                    }
                }
            };
            // No more jobs: the archiver discards what was not flushed and ends.
            drop(jobs);
            let _ = archiver.join();
            result
        })
    }
}

/// What the receiving thread hands the archiver.
enum Job {
    /// One archive frame's payload.
    Field(Vec<u8>),
    /// Make the batch durable and visible; answers with how many fields it held, or why not.
    Flush(SyncSender<Result<u64, (u64, Failure)>>),
}

/// Why a batch failed: the kind of the first error, and its message.
type Failure = (ErrorKind, String);

fn archiver_stopped() -> Failure {
    (ErrorKind::Internal, "the archiver stopped".to_string())
}

/// Stores the fields of one archive connection in order and answers its flushes. When the jobs
/// end without a flush (the client went away), the batch is dropped unflushed: never visible.
fn archiver(shared: &Shared, inbox: Receiver<Job>, recycle: SyncSender<Vec<u8>>) {
    let mut fdb: Option<Box<dyn Fdb>> = None;
    let mut pending = 0u64;
    let mut failed: Option<Failure> = None;
    for job in inbox {
        match job {
            Job::Field(payload) => {
                let started = Instant::now();
                pending += 1;
                if failed.is_none() {
                    if let Err((kind, e)) = archive_one(shared, &mut fdb, &payload) {
                        failed = Some((kind, format!("field {pending} since the last flush: {e}")));
                    }
                }
                shared
                    .metrics
                    .record(MsgType::Archive, started.elapsed(), failed.is_none());
                let _ = recycle.try_send(payload);
            }
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
            }
        }
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

fn archive_one(
    shared: &Shared,
    fdb: &mut Option<Box<dyn Fdb>>,
    payload: &[u8],
) -> Result<(), Failure> {
    let (key, grib, data) =
        p::decode_archive(payload).map_err(|e| (ErrorKind::BadRequest, e.to_string()))?;
    let f = match fdb {
        Some(f) => f,
        None => fdb.insert((shared.factory)().map_err(|e| (e.kind(), error_chain(&e)))?),
    };
    let r = match (key, grib) {
        (Some(k), true) => f.archive_grib(&k, data),
        (k, _) => f.archive(k.as_ref(), data),
    };
    r.map_err(|e| (e.kind(), error_chain(&e)))
}

/// Fills chunks from the store's stream until it ends or the writer goes away.
fn produce(
    mut stream: Box<dyn crate::api::DataReader>,
    chunk: usize,
    full: SyncSender<io::Result<Vec<u8>>>,
    empty: Receiver<Vec<u8>>,
) {
    loop {
        // A recycled buffer is resized, not cleared: only growth is zeroed.
        let mut buf = empty.try_recv().unwrap_or_default();
        buf.resize(chunk, 0);
        match crate::fill::read_full(&mut *stream, &mut buf) {
            Ok(0) => return,
            Ok(n) => {
                buf.truncate(n);
                if full.send(Ok(buf)).is_err() {
                    return;
                }
            }
            Err(e) => {
                let _ = full.send(Err(e));
                return;
            }
        }
    }
}

/// Compares without stopping at the first difference, so timing does not reveal the token.
fn same_secret(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_compare_whole() {
        assert!(same_secret("s3cret", "s3cret"));
        assert!(!same_secret("s3cret", "s3creT"));
        assert!(!same_secret("s3cret", "s3cre"));
        assert!(!same_secret("", "x"));
    }
}
