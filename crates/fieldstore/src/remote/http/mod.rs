//! HTTP beside the binary protocol (docs/http.md): the read-only JSON API under `/api/v1/`, the
//! GRIB bytes, Server-Sent Events of flushed fields, and the web view at `/`.
//!
//! Why no HTTP framework: the server is threads and blocking I/O (a thread per connection, the
//! memory budget holding clients back through TCP), and HTTP must share exactly that: the same
//! `Shared` store, identities, budget, per-identity limit, `--max-connections`, and the same
//! TLS sockets, whose verified client certificate names an identity. hyper and axum need tokio;
//! tiny_http brings its own thread pool and its own TLS (an older rustls, no client
//! certificates). So requests are parsed by `httparse` (the parser hyper and ureq use: no
//! allocation, no I/O, fuzzed upstream; already in our tree through ureq) and everything else is
//! the few hundred lines here: `request.rs` (reading a request head, its query and `Range`),
//! `response.rs` (status, headers, chunked bodies, JSON errors), `auth.rs` (who is asking),
//! `api.rs` (list, axes, where, stats, retrieve, extract, openapi), `events.rs` (SSE),
//! `map.rs` (decoded values and time series for the web view), `assets.rs` (the embedded web
//! view). Only GET and HEAD are served: the API is read-only.

use std::io::{BufReader, BufWriter};
use std::net::TcpListener;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, warn};

use super::server::{spawn_connection, Accepted, Shared};
use super::transport::{PeerCertificate, Socket};

mod api;
mod assets;
mod auth;
mod events;
mod extract;
mod map;
mod request;
mod response;

use request::{HttpRequest, ReadError};
use response::Response;

/// How often a blocked read wakes up to notice a shutdown.
const POLL: Duration = Duration::from_millis(200);
/// An idle keep-alive connection is closed after this long.
const IDLE: Duration = Duration::from_secs(30);

/// Accepts HTTP connections until the server stops, each served on a thread of its own.
pub(crate) fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    for stream in listener.incoming() {
        if shared.stopping.load(Ordering::SeqCst) {
            break;
        }
        match stream {
            Ok(s) => spawn_connection(&shared, Accepted::Tcp(s), "http", busy, serve),
            Err(e) => {
                warn!("http accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// A client refused for --max-connections gets a 503 it can read.
fn busy(w: &mut dyn std::io::Write, message: &str) {
    let _ = Response::error(503, "busy", message).write_head_only(w);
}

/// One connection: requests one after the other (keep-alive) until the client closes, an
/// error breaks the connection, or the server stops.
fn serve(socket: Socket, peer: Option<PeerCertificate>, shared: &Shared) {
    if let Err(e) = socket.set_read_timeout(Some(POLL)) {
        debug!("http: {e}");
        return;
    }
    let stall = shared.opts.stall_timeout.max(Duration::from_secs(1));
    let write_side = match socket.try_clone() {
        Ok(w) => w,
        Err(e) => {
            debug!("http: {e}");
            return;
        }
    };
    if write_side.set_write_timeout(Some(stall)).is_err() {
        return;
    }
    let mut reader = BufReader::with_capacity(16 << 10, socket);
    let mut writer = BufWriter::with_capacity(64 << 10, write_side);
    loop {
        let req = match request::read(&mut reader, &shared.stopping, IDLE, stall) {
            Ok(r) => r,
            Err(ReadError::Closed) => return,
            Err(ReadError::Io(e)) => {
                debug!("http connection closed: {e}");
                return;
            }
            Err(ReadError::Bad(status, msg)) => {
                let _ = Response::error(status, "bad-request", &msg).send(&mut writer);
                return;
            }
        };
        let keep = req.keep_alive;
        let cx = api::Cx {
            shared,
            peer: peer.as_ref(),
            reader: &reader,
        };
        match api::route(&cx, &req, &mut writer) {
            Ok(true) if keep && !shared.stopping.load(Ordering::SeqCst) => {}
            Ok(_) => return,
            Err(e) => {
                debug!("http connection closed: {e}");
                return;
            }
        }
    }
}

/// What a handler hands back: `Ok(true)` when the connection may serve another request.
type Served = std::io::Result<bool>;

/// The request as handlers see it.
type Req = HttpRequest;
