//! The routes: the JSON API under `/api/v1/` (list, axes, where, stats, retrieve, extract,
//! openapi), the event stream and map data (`events.rs`, `map.rs`), the web view (`assets.rs`).

use std::io::{self, BufReader, Read, Seek, SeekFrom, Write};
use std::sync::Arc;
use std::time::Instant;

use serde_json::{json, Map, Value};

use super::super::auth::{AuthOp, Identity};
use super::super::protocol::MsgType;
use super::super::server::authorize::{covered_axes, request_text, Kept};
use super::super::server::{error_chain, Refusal, Share, Shared};
use super::super::transport::{PeerCertificate, Socket};
use super::request::byte_range;
use super::response::{status_of, write_head, Chunked, Response};
use super::{assets, auth, events, map, Req, Served};
use crate::api::{ApiError, ListElement, ListOptions};
use crate::model::request::{parse_request, Request};
use crate::model::Key;

/// What a handler may use of its connection.
pub(super) struct Cx<'a> {
    pub(super) shared: &'a Shared,
    pub(super) peer: Option<&'a PeerCertificate>,
    /// The connection's read side: an event stream watches it to notice a client gone.
    pub(super) reader: &'a BufReader<Socket>,
}

/// The OpenAPI document of every route (static/openapi.json).
const OPENAPI: &str = include_str!("static/openapi.json");

pub(super) fn route<W: Write>(cx: &Cx, req: &Req, w: &mut W) -> Served {
    if req.method != "GET" && req.method != "HEAD" {
        let r = Response::error(
            405,
            "bad-request",
            &format!(
                "{} is not served: the API is read-only (GET, HEAD)",
                req.method
            ),
        )
        .header("Allow", "GET, HEAD");
        r.send(w)?;
        return Ok(true);
    }
    let path = req.path.as_str();
    if !path.starts_with("/api/") {
        return match assets::find(path) {
            Some((body, ty)) => {
                Response::new(200, ty, body.to_vec()).send_for(w, req.is_head())?;
                Ok(true)
            }
            None => no_route(req, w),
        };
    }
    if path == "/api/v1/openapi.json" {
        Response::new(200, "application/json", OPENAPI.as_bytes().to_vec())
            .send_for(w, req.is_head())?;
        return Ok(true);
    }
    let op = match path {
        "/api/v1/list" => MsgType::List,
        "/api/v1/axes" => MsgType::Axes,
        "/api/v1/where" => MsgType::Where,
        "/api/v1/stats" => MsgType::Stats,
        "/api/v1/retrieve" | "/api/v1/field" | "/api/v1/series" | "/api/v1/extract" => {
            MsgType::Retrieve
        }
        "/api/v1/events" => MsgType::Subscribe,
        _ => return no_route(req, w),
    };
    let who = match auth::identify(cx.shared, cx.peer, req) {
        Ok(w) => w,
        Err(r) => {
            r.send(w)?;
            return Ok(true);
        }
    };
    let name: Arc<str> = Arc::from(who.name.as_str());
    let _turn = match cx.shared.per_identity.enter(&name) {
        Ok(t) => t,
        Err(msg) => {
            Response::error(429, "busy", &msg).send(w)?;
            return Ok(true);
        }
    };
    let started = Instant::now();
    let h = Handler { cx, req, who: &who };
    let done = match path {
        "/api/v1/list" => h.list(w),
        "/api/v1/axes" => h.simple(w, Simple::Axes),
        "/api/v1/where" => h.simple(w, Simple::Where),
        "/api/v1/stats" => h.simple(w, Simple::Stats),
        "/api/v1/retrieve" => h.retrieve(w),
        "/api/v1/extract" => super::extract::extract(&h, w),
        "/api/v1/events" => events::stream(&h, w),
        "/api/v1/field" => map::field(&h, w),
        _ => map::series(&h, w),
    };
    let (ok, keep) = match done {
        Outcome::Sent(keep) => (true, keep?),
        Outcome::Failed(r) => {
            r.send(w)?;
            (false, true)
        }
    };
    cx.shared.metrics.record(op, started.elapsed(), ok);
    Ok(keep)
}

fn no_route<W: Write>(req: &Req, w: &mut W) -> Served {
    Response::error(
        404,
        "no-route",
        &format!(
            "no such page or API route: {} (the API is under /api/v1/, described by /api/v1/openapi.json)",
            req.path
        ),
    )
    .send(w)?;
    Ok(true)
}

/// How a handler ended: its response sent (and whether the connection may go on), or an error
/// response to send.
pub(super) enum Outcome {
    Sent(Served),
    Failed(Response),
}

impl From<io::Result<()>> for Outcome {
    fn from(r: io::Result<()>) -> Outcome {
        Outcome::Sent(r.map(|()| true))
    }
}

enum Simple {
    Axes,
    Where,
    Stats,
}

/// One authenticated request.
pub(super) struct Handler<'a> {
    pub(super) cx: &'a Cx<'a>,
    pub(super) req: &'a Req,
    pub(super) who: &'a Arc<Identity>,
}

pub(super) fn api_error(e: &ApiError) -> Response {
    Response::error(status_of(e.kind()), e.kind().as_str(), &error_chain(e))
}

pub(super) fn bad_request(msg: impl AsRef<str>) -> Response {
    Response::error(400, "bad-request", msg.as_ref())
}

pub(super) fn refusal(r: Refusal) -> Response {
    match r {
        Refusal::Busy(msg) => Response::error(503, "busy", &msg),
        Refusal::Stopping => Response::error(503, "busy", "the server is stopping"),
    }
}

impl Handler<'_> {
    pub(super) fn shared(&self) -> &Shared {
        self.cx.shared
    }

    /// The `request` parameter (none or empty: everything).
    pub(super) fn request(&self) -> Result<Request, Response> {
        match self.req.param("request").map(str::trim) {
            None | Some("") => Ok(Request::default()),
            Some(text) => parse_request(text).map_err(|e| {
                let mut e = e.to_string();
                if e.len() > 400 {
                    let cut = (0..=400)
                        .rev()
                        .find(|&i| e.is_char_boundary(i))
                        .unwrap_or(0);
                    e.truncate(cut);
                    e.push('…');
                }
                bad_request(format!("request: {e}"))
            }),
        }
    }

    /// A numeric parameter within bounds.
    pub(super) fn number(&self, name: &str, default: u64, max: u64) -> Result<u64, Response> {
        match self.req.param(name) {
            None | Some("") => Ok(default),
            Some(v) => match v.parse::<u64>() {
                Ok(n) if n <= max => Ok(n),
                _ => Err(bad_request(format!(
                    "{name}={v}: expected a whole number up to {max}"
                ))),
            },
        }
    }

    /// `Err(403)` when the identity's grants for `op` reach none of the databases named.
    pub(super) fn may_read(&self, op: AuthOp, req: &Request) -> Result<bool, Response> {
        let everywhere = self.who.may_everywhere(op);
        if everywhere || self.who.may_reach(op, req) {
            return Ok(everywhere);
        }
        self.shared().metrics.count_refusal(&self.who.name, op);
        Err(Response::error(
            403,
            "permission",
            &format!(
                "identity '{}' may not {op} {}: its grants cover none of the databases it names ({})",
                self.who.name,
                request_text(req),
                self.who.grants_for(op)
            ),
        ))
    }

    fn list<W: Write>(&self, w: &mut W) -> Outcome {
        match self.list_inner(w) {
            Ok(o) => o,
            Err(r) => Outcome::Failed(r),
        }
    }

    fn list_inner<W: Write>(&self, w: &mut W) -> Result<Outcome, Response> {
        let req = self.request()?;
        let depth = self.number("depth", 3, 3)?.max(1) as u8;
        let porcelain = match self.req.param("format") {
            None | Some("json") => false,
            Some("porcelain") => true,
            Some(f) => return Err(bad_request(format!("format={f}: json or porcelain"))),
        };
        let options = ListOptions {
            include_masked: matches!(self.req.param("full"), Some("1" | "true")),
            depth,
        };
        let everywhere = self.may_read(AuthOp::List, &req)?;
        let shared = self.shared();
        let mut iter = shared.fdb.list(&req, options).map_err(|e| api_error(&e))?;
        let who = self.who.clone();
        let mut next = move || -> Option<Result<ListElement, ApiError>> {
            loop {
                match iter.next()? {
                    Ok(el) if !everywhere && !who.may(AuthOp::List, &el.key.db) => continue,
                    other => return Some(other),
                }
            }
        };
        let first = match next() {
            Some(Ok(el)) => Some(el),
            Some(Err(e)) => return Err(api_error(&e)),
            None => None,
        };
        if first.is_none() && !porcelain {
            return Err(Response::error(
                404,
                "not-found",
                &format!("nothing matches {req}"),
            ));
        }
        let chunk = shared.opts.chunk_size.clamp(4 << 10, 1 << 20);
        let share = Share::default();
        let _lease = shared
            .budget
            .take(&share, chunk as u64 + (64 << 10), &shared.stopping)
            .map_err(refusal)?;
        let ty = if porcelain {
            "text/plain; charset=utf-8"
        } else {
            "application/json"
        };
        let sent = (|| -> io::Result<()> {
            write_head(w, 200, &[("Content-Type", ty.to_string())], None)?;
            if self.req.is_head() {
                return w.flush();
            }
            let mut body = Chunked { w };
            let mut batch: Vec<u8> = Vec::with_capacity(chunk + 1024);
            if !porcelain {
                batch.push(b'[');
            }
            let mut n = 0usize;
            let mut el = first;
            while let Some(e) = el {
                if porcelain {
                    let mut line = e.key.porcelain();
                    if depth < 3 {
                        line = line.trim_end_matches("{}").to_string();
                    }
                    batch.extend_from_slice(line.as_bytes());
                    batch.push(b'\n');
                } else {
                    if n > 0 {
                        batch.push(b',');
                    }
                    serde_json::to_writer(&mut batch, &element_json(&e))?;
                }
                n += 1;
                if batch.len() >= chunk {
                    body.chunk(&batch)?;
                    batch.clear();
                }
                el = match next() {
                    Some(Ok(e)) => Some(e),
                    // Mid-stream: the status is gone; the body ends unterminated so the client
                    // sees the failure (porcelain goes on, as the CLI does).
                    Some(Err(e)) if porcelain => {
                        tracing::warn!("http list: {e}");
                        None
                    }
                    Some(Err(e)) => {
                        return Err(io::Error::other(format!("list failed: {e}")));
                    }
                    None => None,
                };
            }
            if !porcelain {
                batch.extend_from_slice(b"]\n");
            }
            body.chunk(&batch)?;
            body.finish()
        })();
        Ok(sent.into())
    }

    fn simple<W: Write>(&self, w: &mut W, what: Simple) -> Outcome {
        let run = || -> Result<Value, Response> {
            let req = self.request()?;
            let everywhere = self.may_read(AuthOp::List, &req)?;
            let fdb = &*self.shared().fdb;
            let sees = |db: &Key| everywhere || self.who.may(AuthOp::List, db);
            let value = match what {
                Simple::Axes => {
                    let depth = self.number("depth", 3, 3)?.max(1) as u8;
                    let axes = if everywhere {
                        fdb.axes(&req, depth)
                    } else {
                        covered_axes(fdb, self.who, &req, depth)
                    }
                    .map_err(|e| api_error(&e))?;
                    if axes.values().all(|v| v.is_empty()) {
                        Value::Null
                    } else {
                        serde_json::to_value(&axes).unwrap_or(Value::Null)
                    }
                }
                Simple::Where => {
                    let mut v = fdb.where_(&req).map_err(|e| api_error(&e))?;
                    v.retain(|d| sees(&d.db));
                    array_or_null(serde_json::to_value(&v))
                }
                Simple::Stats => {
                    let mut v = fdb.stats(&req).map_err(|e| api_error(&e))?;
                    v.retain(|d| sees(&d.db));
                    array_or_null(serde_json::to_value(&v))
                }
            };
            if value.is_null() {
                return Err(Response::error(
                    404,
                    "not-found",
                    &format!("nothing matches {req}"),
                ));
            }
            Ok(value)
        };
        match run() {
            Ok(v) => Response::json(&v).send_for(w, self.req.is_head()).into(),
            Err(r) => Outcome::Failed(r),
        }
    }

    fn retrieve<W: Write>(&self, w: &mut W) -> Outcome {
        match self.retrieve_inner(w) {
            Ok(o) => o,
            Err(r) => Outcome::Failed(r),
        }
    }

    fn retrieve_inner<W: Write>(&self, w: &mut W) -> Result<Outcome, Response> {
        let req = self.request()?;
        if req.is_empty() {
            return Err(bad_request(
                "retrieve needs a request (e.g. request=class=od,expver=0001,step=0): every field of the store is not served at once",
            ));
        }
        let everywhere = self.may_read(AuthOp::Retrieve, &req)?;
        let shared = self.shared();
        let stream = shared.fdb.retrieve(&req).map_err(|e| api_error(&e))?;
        let mut stream = if everywhere {
            stream
        } else {
            let who = self.who.clone();
            let (kept, dropped) = Kept::wrap(stream, |f| who.may(AuthOp::Retrieve, &f.key.db));
            if dropped > 0 && kept.fields().is_empty() {
                shared
                    .metrics
                    .count_refusal(&self.who.name, AuthOp::Retrieve);
                return Err(Response::error(
                    403,
                    "permission",
                    &format!(
                        "identity '{}' may not retrieve {}: its grants cover none of the {dropped} fields it names ({})",
                        self.who.name,
                        request_text(&req),
                        self.who.grants_for(AuthOp::Retrieve)
                    ),
                ));
            }
            kept
        };
        let fields = stream.fields().len();
        if fields == 0 {
            return Err(Response::error(
                404,
                "not-found",
                &format!("nothing matches {req}"),
            ));
        }
        let size = stream.size();
        let mut headers = vec![
            ("Content-Type", "application/x-grib".to_string()),
            ("X-Fieldstore-Fields", fields.to_string()),
        ];
        if self.req.param("download").is_some() {
            headers.push((
                "Content-Disposition",
                format!("attachment; filename=\"{}\"", file_name(&req)),
            ));
        }
        // Ranges of one field (its full key): the bytes a client asks for, read from where
        // they are.
        let mut status = 200;
        let mut length = size;
        if fields == 1 {
            headers.push(("Accept-Ranges", "bytes".into()));
            match byte_range(self.req.header("range"), size) {
                Ok(None) => {}
                Ok(Some((first, last))) => {
                    if stream.seek(SeekFrom::Start(first)).is_ok() {
                        status = 206;
                        length = last - first + 1;
                        headers.push(("Content-Range", format!("bytes {first}-{last}/{size}")));
                    }
                }
                Err(()) => {
                    return Err(Response::error(
                        416,
                        "bad-request",
                        &format!(
                            "the range '{}' is outside the field's {size} bytes",
                            self.req.header("range").unwrap_or_default()
                        ),
                    )
                    .header("Content-Range", format!("bytes */{size}")));
                }
            }
        }
        // One buffer, held against the budget: at most 1 MiB (HTTP writes need no more), no
        // more than what is sent.
        let chunk = shared
            .opts
            .chunk_size
            .min(1 << 20)
            .min(usize::try_from(length).unwrap_or(usize::MAX))
            .max(1);
        let share = Share::default();
        let _lease = shared
            .budget
            .take(&share, chunk as u64, &shared.stopping)
            .map_err(refusal)?;
        let sent = (|| -> io::Result<()> {
            write_head(w, status, &headers, Some(length))?;
            if self.req.is_head() {
                return w.flush();
            }
            let mut buf = vec![0u8; chunk];
            let mut left = length;
            while left > 0 {
                let want = buf.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                let n = stream.read(&mut buf[..want])?;
                if n == 0 {
                    return Err(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the store's stream ended early",
                    ));
                }
                w.write_all(&buf[..n])?;
                shared
                    .metrics
                    .bytes_out
                    .fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
                left -= n as u64;
            }
            w.flush()
        })();
        Ok(sent.into())
    }
}

fn array_or_null(v: Result<Value, serde_json::Error>) -> Value {
    match v {
        Ok(Value::Array(a)) if !a.is_empty() => Value::Array(a),
        _ => Value::Null,
    }
}

/// A download's file name from its request's values.
fn file_name(req: &Request) -> String {
    let mut s: String = req
        .iter()
        .flat_map(|(_, v)| v.iter())
        .map(|v| v.as_str())
        .collect::<Vec<_>>()
        .join("_")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(120)
        .collect();
    if s.is_empty() {
        s.push_str("fields");
    }
    s + ".grib"
}

/// A key as a JSON object (empty values left out).
pub(super) fn key_json(k: &Key) -> Value {
    let mut m = Map::new();
    for (kw, v) in k.iter() {
        if !v.is_empty() {
            m.insert(kw.to_string(), v.into());
        }
    }
    Value::Object(m)
}

/// The request that names exactly one field: its full key as `k=v,k=v`.
pub(super) fn key_request(k: &Key) -> String {
    k.iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(kw, v)| format!("{kw}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// A listed field as the API gives it.
pub(super) fn element_json(el: &ListElement) -> Value {
    let combined = el.key.combined();
    let mut v = json!({
        "key": key_json(&combined),
        "db": key_json(&el.key.db),
        "index": key_json(&el.key.index),
        "datum": key_json(&el.key.datum),
        "request": key_request(&combined),
        "timestamp": el.timestamp,
    });
    if let Some(l) = &el.location {
        v["location"] = json!({ "uri": l.uri, "offset": l.offset, "length": l.length });
    }
    if el.masked {
        v["masked"] = Value::Bool(true);
    }
    v
}
