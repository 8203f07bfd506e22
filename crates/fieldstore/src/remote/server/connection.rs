//! One client connection: the handshake, the control loop and the requests with one reply.

use super::*;
use crate::api::ControlAction;
use crate::model::Key;

pub(super) struct Connection<'a> {
    pub(super) shared: &'a Shared,
    pub(super) reader: BufReader<ConnReader<'a>>,
    pub(super) writer: BufWriter<ConnWriter>,
    pub(super) version: u16,
    pub(super) payload: Vec<u8>,
    /// Who the client proved to be at the handshake: the name authorization, limits and logs
    /// use ("anonymous" on a server without tokens).
    pub(super) identity: Arc<str>,
    /// What that identity may do (everything, without a tokens file).
    pub(super) who: Arc<Identity>,
    /// The client's verified TLS certificate, if the server asked for one and got it.
    pub(super) peer: Option<PeerCertificate>,
    /// Fields travel as sealed memory files on this connection (a Unix one whose client
    /// asked for it).
    pub(super) handover: bool,
}

impl<'a> Connection<'a> {
    pub(super) fn new(
        stream: Socket,
        peer: Option<PeerCertificate>,
        shared: &'a Shared,
    ) -> io::Result<Connection<'a>> {
        stream.set_read_timeout(Some(POLL))?;
        let stall = shared.opts.stall_timeout.max(Duration::from_secs(1));
        let write_side = stream.try_clone()?;
        write_side.set_write_timeout(Some(stall))?;
        Ok(Connection {
            shared,
            reader: BufReader::with_capacity(
                256 << 10,
                ConnReader {
                    stream,
                    stopping: &shared.stopping,
                    stall,
                    at_boundary: true,
                    deadline: None,
                    stopped: false,
                },
            ),
            writer: BufWriter::with_capacity(
                256 << 10,
                ConnWriter {
                    stream: write_side,
                    stall,
                },
            ),
            version: p::VERSION_MIN,
            payload: Vec::new(),
            identity: Arc::from("anonymous"),
            who: Arc::new(Identity::everyone("anonymous")),
            peer,
            handover: false,
        })
    }

    pub(super) fn serve(&mut self) {
        let role = match self.handshake() {
            Ok(Some(r)) => r,
            Ok(None) => return,
            Err(e) => {
                debug!("handshake failed: {e}");
                return;
            }
        };
        let certificate = self.peer.as_ref().map(|c| c.subject.as_str());
        info!(?role, version = self.version, identity = %self.identity, certificate, "client connected");
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
    pub(super) fn next_frame(&mut self, max: u64) -> Result<Option<FrameHeader>, Broken> {
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

    pub(super) fn send(
        &mut self,
        kind: MsgType,
        request: u64,
        parts: &[&[u8]],
    ) -> Result<(), Broken> {
        self.send_summed(kind, request, parts, None)
    }

    /// As `send`; with `last_crc`, the CRC-32C of the last part (a stored field's), which is
    /// then not summed again.
    pub(super) fn send_summed(
        &mut self,
        kind: MsgType,
        request: u64,
        parts: &[&[u8]],
        last_crc: Option<u32>,
    ) -> Result<(), Broken> {
        let length: usize = parts.iter().map(|p| p.len()).sum();
        let n = if length >= p::DIRECT_FROM {
            p::write_frame_direct(
                &mut self.writer,
                self.version,
                kind,
                request,
                parts,
                last_crc,
            )?
        } else {
            p::write_frame(&mut self.writer, self.version, kind, request, parts)?
        };
        self.shared
            .metrics
            .bytes_out
            .fetch_add(n, Ordering::Relaxed);
        Ok(())
    }

    pub(super) fn reply(&mut self, request: u64, body: &[u8]) -> Result<(), Broken> {
        self.send(MsgType::Reply, request, &[body])?;
        Ok(self.writer.flush()?)
    }

    pub(super) fn send_error(
        &mut self,
        request: u64,
        kind: &str,
        message: &str,
    ) -> Result<(), Broken> {
        self.send_error_of(request, kind, message, kinds::error_kind(kind))
    }

    pub(super) fn send_error_of(
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

    pub(super) fn send_api_error(&mut self, request: u64, e: &ApiError) -> Result<(), Broken> {
        let kind = match e {
            ApiError::NothingMatched(_) => kinds::NOTHING_MATCHED,
            _ => kinds::FAILED,
        };
        self.send_error_of(request, kind, &error_chain(e), e.kind())
    }

    pub(super) fn handshake(&mut self) -> Result<Option<Role>, Broken> {
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
        if let Some(tokens) = &self.shared.opts.tokens {
            let found = tokens.current().authenticate(
                hello.token.as_deref(),
                self.peer.as_ref(),
                self.shared
                    .opts
                    .tls
                    .as_ref()
                    .is_some_and(|t| t.asks_for_client_certificates()),
            );
            let who = match found {
                Ok(who) => who,
                Err(why) => return refuse(self, kinds::AUTH, &why),
            };
            self.identity = Arc::from(who.name.as_str());
            self.who = who;
        } else if let Some(want) = &self.shared.opts.token {
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
            self.identity = Arc::from("token");
            self.who = Arc::new(Identity::everyone("token"));
        }
        self.version = version;
        self.handover = hello.handover && self.reader.get_ref().stream.local().is_some();
        let body = p::to_json(&Welcome {
            version,
            server: format!("fieldstore/{}", env!("CARGO_PKG_VERSION")),
            chunk_size: self.shared.opts.chunk_size as u64,
            handover: self.handover,
        });
        self.send(MsgType::Welcome, h.request, &[&body])?;
        self.writer.flush()?;
        debug!(client = %hello.client, "handshake done");
        Ok(Some(hello.role))
    }

    pub(super) fn control_loop(&mut self) -> Result<(), Broken> {
        let share = super::budget::Share::default();
        while let Some((h, _request_memory)) = self.next_request(&share)? {
            let started = Instant::now();
            let shared = self.shared;
            let _turn = match shared.per_identity.enter(&self.identity) {
                Ok(t) => t,
                Err(msg) => {
                    warn!("refused: {msg}");
                    self.send_error(h.request, kinds::BUSY, &msg)?;
                    continue;
                }
            };
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
                MsgType::Extract => self.extract(h.request)?,
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
    pub(super) fn query(&mut self, request: u64) -> Result<Option<Query>, Broken> {
        match p::from_json::<Query>("request", &self.payload) {
            Ok(q) => Ok(Some(q)),
            Err(e) => {
                self.send_error(request, kinds::BAD_REQUEST, &e.to_string())?;
                Ok(None)
            }
        }
    }

    /// Requests with one reply.
    pub(super) fn simple(&mut self, h: FrameHeader) -> Result<bool, Broken> {
        let Some(q) = self.query(h.request)? else {
            return Ok(false);
        };
        let req = q.request.to_request();
        let Some(op) = AuthOp::of(h.kind) else {
            let msg = format!("a {} frame is not a request", h.kind.op_name());
            self.send_error(h.request, kinds::BAD_REQUEST, &msg)?;
            return Ok(false);
        };
        let status = h.kind == MsgType::Control
            && q.action.as_deref().and_then(p::parse_action) == Some(ControlAction::Status);
        // Control's status only reads: it counts as list.
        let op = if status { AuthOp::List } else { op };
        let everywhere = self.who.may_everywhere(op);
        if op == AuthOp::List && !everywhere && !self.may_read(h.request, op, &req)? {
            return Ok(false);
        }
        if matches!(op, AuthOp::Wipe | AuthOp::Control) && !self.may_change(h.request, op, &req)? {
            return Ok(false);
        }
        let sees = |db: &Key| everywhere || self.who.may(op, db);
        let fdb = &*self.shared.fdb;
        let result: Result<Vec<u8>, ApiError> = match h.kind {
            MsgType::Axes if everywhere => fdb.axes(&req, q.depth).map(|a| p::to_json(&a)),
            MsgType::Axes => self.covered_axes(&req, q.depth).map(|a| p::to_json(&a)),
            MsgType::Where => fdb.where_(&req).map(|mut v| {
                v.retain(|d| sees(&d.db));
                p::to_json(&v)
            }),
            MsgType::Dump => fdb.dump(&req).map(|mut v| {
                v.retain(|d| sees(&d.db));
                p::to_json(&v)
            }),
            MsgType::Stats => fdb.stats(&req).map(|mut v| {
                v.retain(|d| sees(&d.db));
                p::to_json(&v)
            }),
            MsgType::Wipe => fdb.wipe(&req, q.doit).map(|v| p::to_json(&v)),
            MsgType::Purge => fdb.purge(&req, q.doit).map(|v| p::to_json(&v)),
            MsgType::Compact => fdb.compact(&req).map(|v| p::to_json(&v)),
            // What exists instead is for those who may see everything.
            MsgType::Explain if !everywhere => Ok(p::to_json(&format!(
                "(identity '{}' may not list every database: no explanation given)",
                self.who.name
            ))),
            MsgType::Explain => Ok(p::to_json(&fdb.explain_nothing(&req))),
            _ if status && !everywhere => {
                fdb.control(&req, ControlAction::Status, &[]).map(|mut v| {
                    v.retain(|d| sees(&d.db));
                    p::to_json(&v)
                })
            }
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
    pub(super) fn expand(&mut self, request: u64) -> Result<bool, Broken> {
        let Some(q) = self.query(request)? else {
            return Ok(false);
        };
        let req = q.request.to_request();
        let everywhere = self.who.may_everywhere(AuthOp::List);
        if !everywhere && !self.may_read(request, AuthOp::List, &req)? {
            return Ok(false);
        }
        match self.shared.fdb.wanted_fields(&req) {
            Ok(mut keys) => {
                if !everywhere {
                    keys.retain(|k| self.who.may(AuthOp::List, k));
                }
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
}

/// Compares without stopping at the first difference, so timing does not reveal the token.
fn same_secret(a: &str, b: &str) -> bool {
    super::super::auth::same_bytes(a.as_bytes(), b.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    pub(super) fn secrets_compare_whole() {
        assert!(same_secret("s3cret", "s3cret"));
        assert!(!same_secret("s3cret", "s3creT"));
        assert!(!same_secret("s3cret", "s3cre"));
        assert!(!same_secret("", "x"));
    }
}
