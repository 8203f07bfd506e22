//! `fieldstore server`: serves one config's store over TCP (docs/protocol.md).
//!
//! A thread per connection, blocking I/O: the `Fdb` interface is synchronous, and a thread that is
//! blocked writing to a slow client is exactly the back-pressure we want. What connections hold
//! comes from a memory budget (`budget.rs`): a request (at most 1 MiB), a small archive frame or
//! the pieces of a large one in flight (`archive.rs`), a retrieve's three chunks (one being read
//! from the store, one queued, one being written), a list's batch. A connection without budget
//! waits before reading its socket, so TCP holds its client back.
//!
//! Each archive connection gets its own `Fdb` from the factory, so a flush makes visible exactly
//! what that client archived, and a client that vanishes takes its unflushed fields with it.

use std::io::{self, BufReader, BufWriter, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use tracing::{debug, info, warn};

use super::auth::{AuthOp, Identity, TokensFile};
use super::error::RemoteError;
use super::landing::ReadUninit;
use super::metrics::Metrics;
use super::protocol::{
    self as p, kinds, ErrorReply, FrameHeader, Hello, MsgType, Query, Role, StreamEnd, Welcome,
    WireListElement,
};
use super::transport::{PeerCertificate, Socket, TlsAcceptor};
use crate::api::{ApiError, Fdb, ListOptions, Notice};
use crate::error_kind::ErrorKind;
use crate::model::request::Request;

/// Builds a fresh handle on the served store (one per archive connection).
pub type FdbFactory = dyn Fn() -> Result<Box<dyn Fdb>, ApiError> + Send + Sync;

/// As [`FdbFactory`], for a given creator: the handle records it in the databases it creates
/// (`None`: the served store as configured, recording no one).
pub type CreatorFdbFactory = dyn Fn(Option<&str>) -> Result<Box<dyn Fdb>, ApiError> + Send + Sync;

/// How often a blocked read wakes up to notice a shutdown.
const POLL: Duration = Duration::from_millis(200);
/// A client must say hello within this long after connecting.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// A subscription's batch of notices is sent once it reaches this many bytes.
const NOTICE_BATCH_BYTES: usize = 1 << 20;
/// How long a client may stop in the middle of a frame, or stop reading what it is sent, before
/// it is dropped.
pub const DEFAULT_STALL_TIMEOUT: Duration = Duration::from_secs(120);

#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// Clients must present this token; `None` accepts anyone who can connect.
    pub token: Option<String>,
    /// Identities, each with its token and grants (docs/authorization.md); takes the place of
    /// `token` when set.
    pub tokens: Option<Arc<TokensFile>>,
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
    /// Bytes all clients together may make the server hold (fields being received, retrieve
    /// chunks); beyond it connections wait, their sockets unread. Buffers of freed fields
    /// kept for new ones to land in (`super::recycle`) are bounded by as much again.
    pub memory_budget: u64,
    /// The share of `memory_budget` one connection may hold.
    pub connection_budget: u64,
    /// How long a connection waits for memory before its request ends as `busy`.
    pub budget_wait: Duration,
    /// Requests one identity may have in progress at once (an archive batch is one, from its
    /// first field to its flush); 0: no limit.
    pub max_requests_per_identity: usize,
    /// A client that stops sending in the middle of a frame, or reads nothing of what it is
    /// sent, for this long is dropped, freeing its thread and what it holds of the budget (a
    /// subscriber's client resumes from its position).
    pub stall_timeout: Duration,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            token: None,
            tokens: None,
            chunk_size: p::DEFAULT_CHUNK_SIZE,
            max_payload: p::DEFAULT_MAX_PAYLOAD,
            max_connections: 1024,
            grace: Duration::from_secs(60),
            tls: None,
            memory_budget: budget::default_memory_budget(),
            connection_budget: budget::default_connection_budget(budget::default_memory_budget()),
            budget_wait: DEFAULT_BUDGET_WAIT,
            max_requests_per_identity: DEFAULT_MAX_REQUESTS_PER_IDENTITY,
            stall_timeout: DEFAULT_STALL_TIMEOUT,
        }
    }
}

/// The least either budget may be: a large field in flight holds a piece (at most 256 KiB, a
/// connection's read buffer) while it takes the next.
const MIN_BUDGET: u64 = 1 << 20;
/// How long a connection waits for memory by default.
pub const DEFAULT_BUDGET_WAIT: Duration = Duration::from_secs(30);
/// Requests one identity may have in progress by default.
pub const DEFAULT_MAX_REQUESTS_PER_IDENTITY: usize = 512;

/// What every connection shares, of the binary protocol and of HTTP (`super::http`) alike:
/// the store, the identities, the memory budget and the limits.
pub(crate) struct Shared {
    pub(crate) opts: ServerOptions,
    factory: Box<CreatorFdbFactory>,
    /// Serves every request but archive and flush.
    pub(crate) fdb: Box<dyn Fdb>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) stopping: AtomicBool,
    addr: SocketAddr,
    /// The HTTP listeners' addresses, woken at shutdown as the binary one is.
    http_addrs: Mutex<Vec<SocketAddr>>,
    /// The Unix sockets served (`--socket`), woken at shutdown and removed at the end.
    local_paths: Mutex<Vec<PathBuf>>,
    next_conn: AtomicU64,
    pub(crate) budget: Budget,
    /// Buffers of freed fields, for the next fields received to land in.
    pub(crate) recycler: Arc<super::recycle::Recycler>,
    pub(crate) per_identity: PerIdentity,
    /// Connections being served, and a signal when one ends.
    active: Mutex<usize>,
    ended: Condvar,
}

pub struct Server {
    /// `None`: HTTP only ([`Server::bind_http_only`]).
    listener: Option<TcpListener>,
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
        // Wake the accept loops, which are blocked in accept().
        let mut addrs = vec![self.shared.addr];
        addrs.extend(
            self.shared
                .http_addrs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter(),
        );
        for mut wake in addrs {
            if wake.ip().is_unspecified() {
                wake.set_ip(match wake {
                    SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                    SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
                });
            }
            let _ = TcpStream::connect_timeout(&wake, Duration::from_secs(1));
        }
        for path in lock(&self.shared.local_paths).iter() {
            let _ = UnixStream::connect(path);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Server {
    pub fn bind(
        listen: &str,
        factory: Box<FdbFactory>,
        opts: ServerOptions,
    ) -> Result<Server, RemoteError> {
        Server::bind_recording_creators(listen, Box::new(move |_| factory()), opts)
    }

    /// As [`Server::bind`], with a factory that records the archiving identity in the databases
    /// its handles create (what a server with a tokens file needs).
    pub fn bind_recording_creators(
        listen: &str,
        factory: Box<CreatorFdbFactory>,
        opts: ServerOptions,
    ) -> Result<Server, RemoteError> {
        let listener = listen_on(listen)?;
        Server::build(Some(listener), factory, opts)
    }

    /// A server of HTTP only (`fieldstore server --http` without `--listen`): its address is
    /// the HTTP one, served once [`Server::run`] is called.
    pub fn bind_http_only(
        http: &str,
        factory: Box<CreatorFdbFactory>,
        opts: ServerOptions,
    ) -> Result<Server, RemoteError> {
        let listener = listen_on(http)?;
        let server = Server::build(None, factory, opts)?;
        server.serve_http(listener)?;
        Ok(server)
    }

    /// A server on a Unix socket only (`fieldstore server --socket` without `--listen` or
    /// `--http`): for the programs of this host alone.
    pub fn bind_local_only(
        path: &Path,
        factory: Box<CreatorFdbFactory>,
        opts: ServerOptions,
    ) -> Result<Server, RemoteError> {
        let server = Server::build(None, factory, opts)?;
        server.serve_local(path)?;
        Ok(server)
    }

    /// Serves the binary protocol on a Unix socket at `path` too (`fieldstore server
    /// --socket`): clients on this host connect there with `socket:` in their remote config,
    /// and large fields then travel as sealed memory files (docs/protocol.md, "Hand-over").
    /// A socket file left by a server that is gone is replaced; one a running server answers
    /// on is not.
    pub fn serve_local(&self, path: &Path) -> Result<(), RemoteError> {
        let listener = bind_local(path)?;
        lock(&self.shared.local_paths).push(path.to_path_buf());
        let shared = self.shared.clone();
        std::thread::Builder::new()
            .name("local-accept".into())
            .spawn(move || {
                for stream in listener.incoming() {
                    if shared.stopping.load(Ordering::SeqCst) {
                        break;
                    }
                    match stream {
                        Ok(s) => spawn_connection(
                            &shared,
                            Accepted::Local(s),
                            "local",
                            busy_frame,
                            serve_binary,
                        ),
                        Err(e) => {
                            warn!("accept on the Unix socket failed: {e}");
                            std::thread::sleep(Duration::from_millis(50));
                        }
                    }
                }
            })?;
        Ok(())
    }

    /// Serves HTTP (`super::http`, docs/http.md) on `listener` beside the binary protocol,
    /// with the same store, identities, budget and limits; returns the address.
    pub fn serve_http(&self, listener: TcpListener) -> Result<SocketAddr, RemoteError> {
        let addr = listener.local_addr()?;
        self.shared
            .http_addrs
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(addr);
        let shared = self.shared.clone();
        std::thread::Builder::new()
            .name("http-accept".into())
            .spawn(move || super::http::accept_loop(shared, listener))?;
        Ok(addr)
    }

    fn build(
        listener: Option<TcpListener>,
        factory: Box<CreatorFdbFactory>,
        opts: ServerOptions,
    ) -> Result<Server, RemoteError> {
        let fdb = factory(None)
            .map_err(|e| RemoteError::payload("config", format!("cannot open the store: {e}")))?;
        let addr = match &listener {
            Some(l) => l.local_addr()?,
            None => SocketAddr::from(([127, 0, 0, 1], 0)),
        };
        let metrics = Arc::new(Metrics::default());
        Ok(Server {
            listener,
            shared: Arc::new(Shared {
                budget: Budget::new(
                    opts.memory_budget.max(MIN_BUDGET),
                    opts.connection_budget.max(MIN_BUDGET),
                    opts.budget_wait,
                    metrics.clone(),
                ),
                recycler: super::recycle::Recycler::new(opts.memory_budget.max(MIN_BUDGET)),
                per_identity: PerIdentity::new(opts.max_requests_per_identity, metrics.clone()),
                opts,
                factory,
                fdb,
                metrics,
                stopping: AtomicBool::new(false),
                addr,
                http_addrs: Mutex::new(Vec::new()),
                local_paths: Mutex::new(Vec::new()),
                next_conn: AtomicU64::new(1),
                active: Mutex::new(0),
                ended: Condvar::new(),
            }),
        })
    }

    /// The binary protocol's address; for an HTTP-only server, the HTTP one.
    pub fn local_addr(&self) -> SocketAddr {
        if self.listener.is_none() {
            if let Some(a) = self
                .shared
                .http_addrs
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .first()
            {
                return *a;
            }
        }
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
        let identities = self.shared.opts.tokens.as_ref().map(|t| t.current().len());
        info!(addr = %self.shared.addr, store = %self.shared.fdb.name(), token = self.shared.opts.token.is_some(), ?identities, "serving");
        let o = &self.shared.opts;
        info!(
            memory_budget = o.memory_budget,
            connection_budget = o.connection_budget,
            max_requests_per_identity = o.max_requests_per_identity,
            "limits"
        );
        match &self.listener {
            Some(listener) => {
                for stream in listener.incoming() {
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
                    spawn_connection(
                        &self.shared,
                        Accepted::Tcp(stream),
                        "conn",
                        busy_frame,
                        serve_binary,
                    );
                }
            }
            None => {
                while !self.shared.stopping.load(Ordering::SeqCst) {
                    std::thread::sleep(POLL);
                }
            }
        }
        drop(self.listener);
        for path in lock(&self.shared.local_paths).iter() {
            let _ = std::fs::remove_file(path);
        }
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
}

/// A connection accepted on one of the server's listeners.
pub(crate) enum Accepted {
    Tcp(TcpStream),
    /// On the Unix socket (`--socket`): a client on this host.
    Local(UnixStream),
}

impl Accepted {
    fn peer(&self) -> String {
        match self {
            Accepted::Tcp(s) => s
                .peer_addr()
                .map(|a| a.to_string())
                .unwrap_or_else(|_| "?".into()),
            Accepted::Local(_) => "local".into(),
        }
    }

    /// Tells a client refused for --max-connections why, if it listens within a second.
    fn refuse(&self, busy: fn(&mut dyn Write, &str), message: &str) {
        match self {
            Accepted::Tcp(s) => {
                let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
                busy(&mut &*s, message);
            }
            Accepted::Local(s) => {
                let _ = s.set_write_timeout(Some(Duration::from_secs(1)));
                busy(&mut &*s, message);
            }
        }
    }
}

/// Serves one accepted connection on a thread of its own, counted against --max-connections
/// (refused as busy beyond it) and in the connections a shutdown waits for.
pub(crate) fn spawn_connection(
    shared: &Arc<Shared>,
    stream: Accepted,
    name: &str,
    busy: fn(&mut dyn Write, &str),
    serve: impl FnOnce(Socket, Option<PeerCertificate>, &Shared) + Send + 'static,
) {
    let shared = shared.clone();
    let peer = stream.peer();
    {
        let mut active = shared.active.lock().unwrap_or_else(|e| e.into_inner());
        if *active >= shared.opts.max_connections {
            drop(active);
            shared.metrics.refused.fetch_add(1, Ordering::Relaxed);
            warn!(%peer, "refused: {} connections already open", shared.opts.max_connections);
            stream.refuse(
                busy,
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
        .name(format!("{name}-{id}"))
        .spawn(move || {
            let _guard = guard;
            let span = tracing::info_span!("conn", id, %peer);
            let _e = span.enter();
            let (socket, peer) = match open_socket(stream, &_guard.0) {
                Ok(s) => s,
                Err(e) => {
                    _guard.0.metrics.refused.fetch_add(1, Ordering::Relaxed);
                    warn!("cannot set up the connection: {e}");
                    return;
                }
            };
            serve(socket, peer, &_guard.0);
        });
    if let Err(e) = spawned {
        // The guard went down with the closure: the count is already right.
        warn!("cannot start a thread for a connection: {e}");
    }
}

/// The connection's byte stream: the TCP socket itself, or, with TLS, the pump's end once the
/// handshake (bounded in time, so a silent client cannot hold a thread) succeeded; a Unix
/// connection as it is (TLS protects what crosses a network, which it does not).
/// Also the client certificate, when TLS asked for one and the client presented it.
fn open_socket(stream: Accepted, shared: &Shared) -> io::Result<(Socket, Option<PeerCertificate>)> {
    let stream = match stream {
        Accepted::Tcp(s) => s,
        Accepted::Local(s) => {
            return Ok((
                Socket::Local(super::local_socket::LocalSocket::new(s)),
                None,
            ))
        }
    };
    stream.set_nodelay(true)?;
    match &shared.opts.tls {
        None => Ok((Socket::Tcp(stream), None)),
        Some(tls) => {
            stream.set_read_timeout(Some(Duration::from_secs(10)))?;
            stream.set_write_timeout(Some(Duration::from_secs(10)))?;
            tls.accept(stream)
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
    /// How long the client may stop in the middle of a frame.
    stall: Duration,
    at_boundary: bool,
    deadline: Option<Instant>,
    stopped: bool,
}

impl Read for ConnReader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.waiting(|s| s.read(buf))
    }
}

impl ReadUninit for ConnReader<'_> {
    fn read_uninit(&mut self, buf: &mut [std::mem::MaybeUninit<u8>]) -> io::Result<usize> {
        self.waiting(|s| s.read_uninit(buf))
    }
}

impl ConnReader<'_> {
    /// Retries `read` through the socket's read timeouts until bytes come, the server stops
    /// (between frames) or the client stalls (within one).
    fn waiting(
        &mut self,
        mut read: impl FnMut(&mut Socket) -> io::Result<usize>,
    ) -> io::Result<usize> {
        let waiting_since = Instant::now();
        loop {
            match read(&mut self.stream) {
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
                    if !self.at_boundary && waiting_since.elapsed() > self.stall {
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

/// The socket's write side, whose timeout is the stall timeout: a write that makes no progress
/// for that long is a client that reads nothing, and ends the connection.
struct ConnWriter {
    stream: Socket,
    stall: Duration,
}

impl Write for ConnWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.stalling(|s| s.write(buf))
    }

    /// A frame's header, payload and trailer in one system call (a notice with its field).
    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.stalling(|s| s.write_vectored(bufs))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.stream.flush()
    }
}

impl ConnWriter {
    /// A write that made no progress within the stall timeout is a client that reads nothing.
    fn stalling(
        &mut self,
        mut write: impl FnMut(&mut Socket) -> io::Result<usize>,
    ) -> io::Result<usize> {
        loop {
            match write(&mut self.stream) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "the client read nothing of what it was sent for {} s (--stall-timeout)",
                            self.stall.as_secs()
                        ),
                    ));
                }
                r => return r,
            }
        }
    }
}

fn write_error<W: Write + ?Sized>(
    w: &mut W,
    request: u64,
    kind: &str,
    message: &str,
) -> io::Result<u64> {
    let body = p::to_json(&ErrorReply::new(kind, message, kinds::error_kind(kind)));
    let n = p::write_frame(w, p::VERSION_MIN, MsgType::Error, request, &[&body])?;
    w.flush()?;
    Ok(n)
}

/// An api error as one line with its causes, which is what the remote user will read.
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
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

/// Serves one binary-protocol connection, TCP or Unix, on its own thread.
fn serve_binary(socket: Socket, peer: Option<PeerCertificate>, shared: &Shared) {
    match Connection::new(socket, peer, shared) {
        Ok(mut c) => c.serve(),
        Err(e) => warn!("cannot set up the connection: {e}"),
    }
}

/// Tells a binary-protocol client refused for --max-connections why.
fn busy_frame(w: &mut dyn Write, message: &str) {
    let _ = write_error(w, 0, kinds::BUSY, message);
}

/// Binds the Unix socket at `path`, replacing a socket file no server answers on.
fn bind_local(path: &Path) -> Result<UnixListener, RemoteError> {
    let failed = |e: io::Error| RemoteError::Listen {
        endpoint: format!("unix:{}", path.display()),
        source: e,
    };
    use std::os::unix::fs::FileTypeExt;
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if !meta.file_type().is_socket() {
            return Err(failed(io::Error::new(
                io::ErrorKind::AlreadyExists,
                "the path exists and is not a socket",
            )));
        }
        if UnixStream::connect(path).is_ok() {
            return Err(failed(io::Error::new(
                io::ErrorKind::AddrInUse,
                "a server is already listening there",
            )));
        }
        std::fs::remove_file(path).map_err(failed)?;
    }
    UnixListener::bind(path).map_err(failed)
}

/// Binds a listening socket, the error naming the address.
fn listen_on(listen: &str) -> Result<TcpListener, RemoteError> {
    TcpListener::bind(listen).map_err(|source| RemoteError::Listen {
        endpoint: listen.to_string(),
        source,
    })
}

/// Why a connection loop stopped early (the socket is unusable; nothing to send).
type Broken = RemoteError;

mod archive;
pub(crate) mod authorize;
mod budget;
mod connection;
mod lifecycle;
mod receive;
mod streams;

pub use budget::{default_connection_budget, default_memory_budget, parse_size};
pub(crate) use budget::{Budget, Lease, PerIdentity, Refusal, Share};
use connection::Connection;
pub use lifecycle::spawn_lifecycle_schedule;
