//! A subscription served by a `fieldstore server`: a connection of its own (never pooled),
//! read by a thread that hands notices over one batch at a time. A lost connection is opened
//! again with back-off and the subscription resumed from what was received, so a server
//! restart costs latency, not fields; after [`RESUME_FOR`] without success the caller gets a
//! `remote` error.

use std::collections::VecDeque;

use bytes::Bytes;
use std::io::Write;
use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::client::{describe_loss, Connection, RemoteFdb};
use super::error::RemoteError;
use super::landing;
use super::protocol::{self as p, MsgType, Role, SubscribeQuery, WireNotices};
use super::recycle::Recycler;
use super::transport::Socket;
use crate::api::subscribe::{Notice, Position, Start, Subscription};
use crate::api::ApiError;
use crate::checksum::Crc32c;
use crate::model::request::Request;

/// How long a lost subscription keeps trying to reconnect before it gives up.
pub const RESUME_FOR: Duration = Duration::from_secs(60);
/// Largest notices frame accepted (the server sends batches of about 1 MiB).
const MAX_NOTICES: u64 = 64 << 20;
/// Largest frame of a subscription with data: a field as large as a server takes (its default
/// `--max-frame`), plus its notice.
const MAX_NOTICE_DATA: u64 = (1 << 30) + (1 << 20);
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

enum Msg {
    /// Notices, and the position once they are all taken when the server said it.
    Batch(Vec<Notice>, Option<Position>),
    Failed(ApiError),
}

/// Why opening a subscription failed: the connection (try again), or the server's answer.
enum OpenError {
    Lost(RemoteError),
    Refused(ApiError),
}

impl From<OpenError> for ApiError {
    fn from(e: OpenError) -> ApiError {
        match e {
            OpenError::Lost(e) => e.into(),
            OpenError::Refused(e) => e,
        }
    }
}

pub(super) struct RemoteSubscription {
    rx: Option<Receiver<Msg>>,
    ready: VecDeque<Notice>,
    /// The server's position after the notices in `ready`.
    after: Option<Position>,
    position: Position,
    stop: Arc<AtomicBool>,
    /// The connection being read, to close it when the subscription is dropped.
    socket: Arc<Mutex<Option<Socket>>>,
    endpoint: String,
}

impl RemoteSubscription {
    /// Opens the subscription (so a refused one fails here) and starts its reader.
    pub(super) fn start(
        fdb: &RemoteFdb,
        request: &Request,
        start: &Start,
        data: bool,
    ) -> Result<RemoteSubscription, ApiError> {
        let handle = fdb.detached();
        let (conn, position) = open(&handle, request, start, data)?;
        let stop = Arc::new(AtomicBool::new(false));
        let socket = Arc::new(Mutex::new(conn.reader.get_ref().try_clone().ok()));
        // One batch queued, one being read: a slow caller holds the server back through TCP.
        let (tx, rx) = sync_channel(1);
        let reader = Reader {
            handle,
            request: request.clone(),
            data,
            received: position.clone(),
            stop: stop.clone(),
            socket: socket.clone(),
            tx,
            recycler: Recycler::new(RECYCLE_LIMIT),
        };
        std::thread::spawn(move || reader.run(conn));
        Ok(RemoteSubscription {
            rx: Some(rx),
            ready: VecDeque::new(),
            after: None,
            position,
            stop,
            socket,
            endpoint: fdb.endpoint().to_string(),
        })
    }
}

/// Sends the subscribe request on a new control connection and reads the start position.
fn open(
    fdb: &RemoteFdb,
    request: &Request,
    start: &Start,
    data: bool,
) -> Result<(Connection, Position), OpenError> {
    let mut c = fdb.connect(Role::Control).map_err(OpenError::Lost)?;
    let q = SubscribeQuery {
        request: request.into(),
        start: start.clone(),
        data,
    };
    let id = fdb.id();
    p::write_frame(
        &mut c.writer,
        c.version,
        MsgType::Subscribe,
        id,
        &[&p::to_json(&q)],
    )
    .and_then(|_| c.writer.flush())
    .map_err(|e| OpenError::Lost(fdb.lost("subscribe", e)))?;
    c.reader
        .get_ref()
        .set_read_timeout(Some(p::KEEPALIVE * 3))
        .map_err(|e| OpenError::Lost(fdb.lost("subscribe", e)))?;
    let h = p::read_frame(&mut c.reader, MAX_NOTICES, &mut c.payload)
        .map_err(|e| OpenError::Lost(fdb.lost("subscribe", describe_loss(e))))?;
    match h.kind {
        MsgType::Error => Err(OpenError::Refused(fdb.reply_error(&c.payload))),
        MsgType::Notices => {
            let first: WireNotices =
                p::from_json("notices", &c.payload).map_err(|e| OpenError::Refused(e.into()))?;
            match first.start {
                Some(position) => Ok((c, position)),
                None => Err(OpenError::Refused(protocol(fdb, "no start position"))),
            }
        }
        other => Err(OpenError::Refused(protocol(
            fdb,
            &format!("answered subscribe with a {} frame", other.op_name()),
        ))),
    }
}

fn protocol(fdb: &RemoteFdb, detail: &str) -> ApiError {
    RemoteError::Protocol {
        endpoint: fdb.endpoint().to_string(),
        detail: detail.to_string(),
    }
    .into()
}

struct Reader {
    handle: RemoteFdb,
    request: Request,
    /// Fields come with their notices.
    data: bool,
    /// Just after the last notice received (handed over or queued): where a reconnection
    /// resumes, so nothing is missed or repeated.
    received: Position,
    stop: Arc<AtomicBool>,
    socket: Arc<Mutex<Option<Socket>>>,
    tx: SyncSender<Msg>,
    /// Buffers of fields the caller dropped, for the next fields to land in.
    recycler: Arc<Recycler>,
}

/// A subscriber keeps at most this much of the fields it dropped for new ones to land in: a few
/// fields, enough that a consumer keeping up never makes the kernel fault in fresh pages.
const RECYCLE_LIMIT: u64 = 64 << 20;

impl Reader {
    fn run(mut self, first: Connection) {
        let mut conn = Some(first);
        loop {
            let c = match conn.take() {
                Some(c) => c,
                None => match self.reconnect() {
                    Some(c) => c,
                    None => return,
                },
            };
            if let Ok(s) = c.reader.get_ref().try_clone() {
                *lock(&self.socket) = Some(s);
            }
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            match self.read(c) {
                Ok(()) => return,
                Err(lost) => {
                    tracing::info!(error = %lost, "subscription connection lost; resuming");
                }
            }
        }
    }

    /// The payload of a notice with its field, in a buffer of its own (the header read).
    fn read_field_frame(
        c: &mut Connection,
        h: &p::FrameHeader,
        mut crc: Crc32c,
        recycler: &Arc<Recycler>,
    ) -> Result<Bytes, RemoteError> {
        let n = usize::try_from(h.length).map_err(|_| RemoteError::Truncated)?;
        let (payload, _) = landing::read_shared(&mut c.reader, n, &mut crc, recycler)?;
        p::read_trailer(&mut c.reader, &crc)?;
        Ok(payload)
    }

    /// A notice whose field came as a sealed memory file: the field is mapped, not copied. The
    /// file cannot change (its seals are checked), so the server's checksum of it stands.
    fn handed_over(&self, c: &Connection) -> Result<Notice, RemoteError> {
        let protocol = |detail: String| RemoteError::Protocol {
            endpoint: self.handle.endpoint().to_string(),
            detail,
        };
        let (notice, length, crc) = p::split_notice_handover(&c.payload)
            .ok_or_else(|| protocol("sent a notice-handover frame that does not parse".into()))?;
        let fd = c
            .reader
            .get_ref()
            .local()
            .and_then(|l| l.take_descriptor())
            .ok_or_else(|| {
                protocol("sent a notice-handover frame without its memory file".into())
            })?;
        let data = super::handover::take(fd, length, false)
            .map_err(|e| protocol(format!("handed over a field that cannot be taken: {e}")))?;
        let w: p::WireNotice = p::from_json("notice", notice)?;
        let mut n = Notice::from(w);
        n.data = Some(data);
        n.checksum = Some(crc);
        Ok(n)
    }

    /// Hands over notices until the caller goes (`Ok`) or the connection is lost (`Err`).
    fn read(&mut self, mut c: Connection) -> Result<(), RemoteError> {
        let limit = if self.data {
            MAX_NOTICE_DATA
        } else {
            MAX_NOTICES
        };
        loop {
            let (h, crc) = p::read_header(&mut c.reader, limit)
                .map_err(|e| self.handle.lost("subscribe", describe_loss(e)))?;
            // A field lands in a buffer of its own, which the notice then hands over as it is.
            let frame = match h.kind {
                MsgType::NoticeData => Self::read_field_frame(&mut c, &h, crc, &self.recycler),
                _ => p::read_rest(&mut c.reader, &h, crc, &mut c.payload).map(|()| Bytes::new()),
            };
            let frame = frame.map_err(|e| self.handle.lost("subscribe", describe_loss(e)))?;
            match h.kind {
                MsgType::NoticeData => {
                    let parsed = p::split_notice_data(&frame).and_then(|(notice, field)| {
                        let w: p::WireNotice = p::from_json("notice", notice).ok()?;
                        let mut n = Notice::from(w);
                        n.data = Some(frame.slice(frame.len() - field.len()..));
                        Some(n)
                    });
                    let Some(n) = parsed else {
                        return Err(RemoteError::Protocol {
                            endpoint: self.handle.endpoint().to_string(),
                            detail: "sent a notice-data frame that does not parse".into(),
                        });
                    };
                    self.received.advance(&n);
                    if self.tx.send(Msg::Batch(vec![n], None)).is_err() {
                        return Ok(());
                    }
                }
                MsgType::NoticeHandover => {
                    let n = self.handed_over(&c)?;
                    self.received.advance(&n);
                    if self.tx.send(Msg::Batch(vec![n], None)).is_err() {
                        return Ok(());
                    }
                }
                MsgType::Notices => {
                    let batch: WireNotices = match p::from_json("notices", &c.payload) {
                        Ok(b) => b,
                        Err(e) => {
                            let _ = self.tx.send(Msg::Failed(e.into()));
                            return Ok(());
                        }
                    };
                    if batch.notices.is_empty() && batch.position.is_none() {
                        continue;
                    }
                    let notices: Vec<Notice> =
                        batch.notices.into_iter().map(Notice::from).collect();
                    for n in &notices {
                        self.received.advance(n);
                    }
                    if let Some(p) = &batch.position {
                        self.received = p.clone();
                    }
                    if self.tx.send(Msg::Batch(notices, batch.position)).is_err() {
                        return Ok(());
                    }
                }
                // The server's answer (a position fallen behind, a failed store): not ours to
                // retry.
                MsgType::Error => {
                    let _ = self
                        .tx
                        .send(Msg::Failed(self.handle.reply_error(&c.payload)));
                    return Ok(());
                }
                other => {
                    return Err(RemoteError::Protocol {
                        endpoint: self.handle.endpoint().to_string(),
                        detail: format!("sent a {} frame in a subscription", other.op_name()),
                    })
                }
            }
        }
    }

    /// Opens the subscription again from what was received, with back-off; `None` when the
    /// caller went or the server stayed away too long (the caller is told).
    fn reconnect(&mut self) -> Option<Connection> {
        let since = Instant::now();
        let mut backoff = FIRST_BACKOFF;
        loop {
            if self.stop.load(Ordering::SeqCst) {
                return None;
            }
            let start = Start::At(self.received.clone());
            let last = match open(&self.handle, &self.request, &start, self.data) {
                Ok((c, _)) => return Some(c),
                Err(OpenError::Refused(e)) => {
                    let _ = self.tx.send(Msg::Failed(e));
                    return None;
                }
                Err(OpenError::Lost(e)) => e,
            };
            if since.elapsed() >= RESUME_FOR {
                let e = self.handle.lost(
                    "subscribe",
                    format!(
                        "could not resume the subscription for {} s: {last}",
                        RESUME_FOR.as_secs()
                    ),
                );
                let _ = self.tx.send(Msg::Failed(e.into()));
                return None;
            }
            let until = Instant::now() + backoff;
            while Instant::now() < until {
                if self.stop.load(Ordering::SeqCst) {
                    return None;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Subscription for RemoteSubscription {
    fn next_within(&mut self, timeout: Duration) -> Result<Option<Notice>, ApiError> {
        let deadline = Instant::now() + timeout;
        while self.ready.is_empty() {
            let Some(rx) = &self.rx else {
                return Err(self.ended());
            };
            match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
                Ok(Msg::Batch(b, after)) => {
                    self.ready.extend(b);
                    if self.ready.is_empty() {
                        // A keep-alive: nothing to hand over, but the position moves on.
                        if let Some(p) = after {
                            self.position = p;
                        }
                    } else {
                        self.after = after;
                    }
                }
                Ok(Msg::Failed(e)) => {
                    self.rx = None;
                    return Err(e);
                }
                Err(RecvTimeoutError::Timeout) => return Ok(None),
                Err(RecvTimeoutError::Disconnected) => {
                    self.rx = None;
                    return Err(self.ended());
                }
            }
        }
        let n = self.ready.pop_front();
        if let Some(n) = &n {
            self.position.advance(n);
        }
        if self.ready.is_empty() {
            if let Some(p) = self.after.take() {
                self.position = p;
            }
        }
        Ok(n)
    }

    fn position(&self) -> Position {
        self.position.clone()
    }
}

impl RemoteSubscription {
    fn ended(&self) -> ApiError {
        RemoteError::ConnectionLost {
            endpoint: self.endpoint.clone(),
            during: "subscribe",
            detail: "the subscription ended (see the error it returned before)".into(),
        }
        .into()
    }
}

impl Drop for RemoteSubscription {
    /// Closes the connection; the reader thread ends on its own at once.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.rx = None;
        if let Some(s) = lock(&self.socket).take() {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::SlowFlush;
    use crate::api::{Fdb, LocalFdb};
    use crate::model::request::parse_request;
    use crate::remote::{FdbFactory, Server, ServerOptions, ShutdownHandle};

    use crate::api::testing::{memory, sfc_key as key};

    type Serving = std::thread::JoinHandle<Result<(), RemoteError>>;

    fn serve(store: &Arc<LocalFdb>, addr: &str) -> (ShutdownHandle, Serving, u16) {
        let shared = SlowFlush::new(store.clone());
        let factory: Box<FdbFactory> =
            Box::new(move || Ok(Box::new(shared.clone()) as Box<dyn Fdb>));
        let server = Server::bind(addr, factory, ServerOptions::default()).unwrap();
        let port = server.local_addr().port();
        let stop = server.shutdown_handle();
        (stop, std::thread::spawn(move || server.run()), port)
    }

    fn steps(sub: &mut dyn Subscription, n: usize) -> Vec<String> {
        (0..n)
            .map(|_| {
                let n = sub
                    .next_within(Duration::from_secs(20))
                    .unwrap()
                    .expect("a notice in time");
                n.element.key.datum.get("step").unwrap().to_string()
            })
            .collect()
    }

    /// Each notice carries its field: read by the store's own subscription (a local store), or
    /// retrieved by the server (a wrapper whose subscription carries none).
    #[test]
    fn notices_carry_their_fields_when_asked() {
        let store = memory();
        let direct: Box<FdbFactory> = {
            let store = store.clone();
            Box::new(move || {
                Ok(Box::new(crate::api::testing::Shared(store.clone())) as Box<dyn Fdb>)
            })
        };
        let server = Server::bind("127.0.0.1:0", direct, ServerOptions::default()).unwrap();
        let direct_port = server.local_addr().port();
        let direct_stop = server.shutdown_handle();
        let direct_serving = std::thread::spawn(move || server.run());
        let (stop, serving, wrapped_port) = serve(&store, "127.0.0.1:0");
        let r = parse_request("class=od,expver=0001").unwrap();
        for port in [direct_port, wrapped_port] {
            let fdb = RemoteFdb::new("127.0.0.1", port, None);
            let mut sub = fdb.subscribe_with_data(&r, &Start::Now).unwrap();
            let mut plain = fdb.subscribe(&r, &Start::Now).unwrap();
            let body = |s: u32| format!("GRIB{port}-{s}7777").into_bytes();
            for s in [1, 2] {
                fdb.archive_grib(&key(s), &body(s)).unwrap();
            }
            fdb.flush().unwrap();
            for _ in 0..2 {
                let n = sub.next_within(Duration::from_secs(20)).unwrap().unwrap();
                let step: u32 = n.element.key.datum.get("step").unwrap().parse().unwrap();
                assert_eq!(n.data.as_deref(), Some(&body(step)[..]), "port {port}");
                let p = plain.next_within(Duration::from_secs(20)).unwrap().unwrap();
                assert_eq!(p.data, None);
            }
            // Positions move as with plain notices: a resume repeats nothing.
            let at = sub.position();
            drop(sub);
            let mut again = fdb.subscribe_with_data(&r, &Start::At(at)).unwrap();
            assert!(again
                .next_within(Duration::from_millis(300))
                .unwrap()
                .is_none());
            store.wipe(&r, true).unwrap();
        }
        stop.shutdown();
        serving.join().unwrap().unwrap();
        direct_stop.shutdown();
        direct_serving.join().unwrap().unwrap();
    }

    #[test]
    fn a_remote_subscription_resumes_across_a_server_restart() {
        let store = memory();
        let (stop, serving, port) = serve(&store, "127.0.0.1:0");
        let fdb = RemoteFdb::new("127.0.0.1", port, None);
        let r = parse_request("class=od,expver=0001").unwrap();
        fdb.archive_grib(&key(0), b"GRIB....7777").unwrap();
        fdb.flush().unwrap();
        let mut sub = fdb.subscribe(&r, &Start::Now).unwrap();
        // The start position is known before any notice.
        assert_eq!(sub.position().streams.len(), 1);
        for s in [1, 2, 3] {
            fdb.archive_grib(&key(s), b"GRIB....7777").unwrap();
            fdb.flush().unwrap();
        }
        assert_eq!(steps(&mut *sub, 2), ["1", "2"]);
        let two = parse_request("class=od,expver=0001,stream=oper,date=20260101,time=0000,type=fc,levtype=sfc,step=1/2,param=167").unwrap();
        let wanted = fdb.wanted_fields(&two).unwrap();
        assert!(!wanted.is_empty());
        assert_eq!(wanted, store.wanted_fields(&two).unwrap());

        stop.shutdown();
        serving.join().unwrap().unwrap();
        let (stop, serving, _) = serve(&store, &format!("127.0.0.1:{port}"));
        store.archive_grib(&key(4), b"GRIB....7777").unwrap();
        store.flush().unwrap();
        // Step 3 was sent before the restart or is sent again after it: once either way.
        assert_eq!(steps(&mut *sub, 2), ["3", "4"]);
        assert!(sub
            .next_within(Duration::from_millis(300))
            .unwrap()
            .is_none());
        let at = sub.position();
        drop(sub);
        store.archive_grib(&key(5), b"GRIB....7777").unwrap();
        store.flush().unwrap();
        let mut again = fdb.subscribe(&r, &Start::At(at)).unwrap();
        assert_eq!(steps(&mut *again, 1), ["5"]);
        assert!(again
            .next_within(Duration::from_millis(300))
            .unwrap()
            .is_none());
        drop(again);
        stop.shutdown();
        serving.join().unwrap().unwrap();
    }

    /// Flushes that match nothing still move a remote subscriber on (through the keep-alive),
    /// so its saved position does not point at history the server may no longer keep.
    #[test]
    fn flushes_matching_nothing_move_the_position_on() {
        let store = memory();
        let (stop, serving, port) = serve(&store, "127.0.0.1:0");
        let fdb = RemoteFdb::new("127.0.0.1", port, None);
        fdb.archive_grib(&key(0), b"GRIB....7777").unwrap();
        fdb.flush().unwrap();
        let narrow = parse_request("class=od,expver=0001,step=99").unwrap();
        let mut sub = fdb.subscribe(&narrow, &Start::Now).unwrap();
        let at_start = sub.position();
        for s in [1, 2] {
            fdb.archive_grib(&key(s), b"GRIB....7777").unwrap();
            fdb.flush().unwrap();
        }
        let deadline = Instant::now() + p::KEEPALIVE * 3;
        while sub.position() == at_start {
            assert!(Instant::now() < deadline, "the position never moved");
            assert!(sub.next_within(Duration::from_secs(1)).unwrap().is_none());
        }
        let (name, before) = at_start.streams.iter().next().unwrap();
        assert!(sub.position().streams[name].at > before.at);
        drop(sub);
        stop.shutdown();
        serving.join().unwrap().unwrap();
    }
}
