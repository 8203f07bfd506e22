//! `GET /api/v1/events?request=R`: fields as flushes make them visible, as Server-Sent Events.
//!
//! Each field is an `event: field` whose `data:` is the field as `list` gives it and whose `id:`
//! is the subscription position just after it ([`Position::to_token`]), so a client that
//! reconnects with `Last-Event-ID` (browsers' `EventSource` do so by themselves) resumes exactly
//! after the last field it saw: nothing missed, nothing twice. The stream starts with an
//! `event: start` carrying the position it starts from. Without `Last-Event-ID` (or the
//! `last_event_id` parameter), `start=now` (the default) or `start=beginning`.

use std::io::{self, Write};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::json;

use super::super::auth::AuthOp;
use super::super::server::Share;
use super::api::{api_error, bad_request, element_json, refusal, Handler, Outcome};
use super::response::{write_head, Chunked};
use crate::api::{Position, Start};

/// A comment goes out after this long without a field, so proxies keep the stream open and a
/// client that left is noticed.
const HEARTBEAT: Duration = Duration::from_secs(15);
/// How long one wait for the next field lasts before the server looks whether it is stopping
/// or the client left.
const WAIT: Duration = Duration::from_millis(500);

pub(super) fn stream<W: Write>(h: &Handler, w: &mut W) -> Outcome {
    match stream_inner(h, w) {
        Ok(o) => o,
        Err(r) => Outcome::Failed(r),
    }
}

fn stream_inner<W: Write>(h: &Handler, w: &mut W) -> Result<Outcome, super::response::Response> {
    let req = h.request()?;
    let everywhere = h.may_read(AuthOp::Retrieve, &req)?;
    let resume = h
        .req
        .header("last-event-id")
        .or_else(|| h.req.param("last_event_id"))
        .filter(|s| !s.trim().is_empty());
    let start = match (resume, h.req.param("start")) {
        (Some(token), _) => Start::At(Position::from_token(token).map_err(|e| api_error(&e))?),
        (None, None | Some("now")) => Start::Now,
        (None, Some("beginning")) => Start::Beginning,
        (None, Some(s)) => return Err(bad_request(format!("start={s}: now or beginning"))),
    };
    let shared = h.shared();
    let mut sub = shared
        .fdb
        .subscribe(&req, &start)
        .map_err(|e| api_error(&e))?;
    let share = Share::default();
    let _lease = shared
        .budget
        .take(&share, 64 << 10, &shared.stopping)
        .map_err(refusal)?;
    let metrics = &shared.metrics;
    metrics.subscriptions_open.fetch_add(1, Ordering::Relaxed);
    struct Open<'a>(&'a super::super::metrics::Metrics);
    impl Drop for Open<'_> {
        fn drop(&mut self) {
            self.0.subscriptions_open.fetch_sub(1, Ordering::Relaxed);
        }
    }
    let _open = Open(metrics);
    let mut position = sub.position();
    let sent = (|| -> io::Result<()> {
        write_head(
            w,
            200,
            &[("Content-Type", "text/event-stream".to_string())],
            None,
        )?;
        if h.req.is_head() {
            return w.flush();
        }
        let mut body = Chunked { w };
        let token = position.to_token();
        let first = format!(
            "retry: 2000\nid: {token}\nevent: start\ndata: {}\n\n",
            json!({ "position": token })
        );
        body.chunk(first.as_bytes())?;
        body.w.flush()?;
        let mut quiet_since = Instant::now();
        loop {
            if shared.stopping.load(Ordering::SeqCst) {
                return body.finish();
            }
            match sub.next_within(WAIT) {
                Ok(Some(n)) => {
                    position.advance(&n);
                    let seen = everywhere || h.who.may(AuthOp::Retrieve, &n.element.key.db);
                    if !seen {
                        continue;
                    }
                    let event = format!(
                        "id: {}\nevent: field\ndata: {}\n\n",
                        position.to_token(),
                        element_json(&n.element)
                    );
                    body.chunk(event.as_bytes())?;
                    body.w.flush()?;
                    quiet_since = Instant::now();
                }
                Ok(None) => {
                    if quiet_since.elapsed() >= HEARTBEAT || client_gone(h) {
                        body.chunk(b": keep-alive\n\n")?;
                        body.w.flush()?;
                        quiet_since = Instant::now();
                    }
                }
                Err(e) => {
                    let event = format!(
                        "event: error\ndata: {}\n\n",
                        json!({ "kind": e.kind().as_str(), "message": e.to_string() })
                    );
                    body.chunk(event.as_bytes())?;
                    return body.finish();
                }
            }
        }
    })();
    // An event stream ends with its connection.
    Ok(Outcome::Sent(sent.map(|()| false)))
}

/// Whether the client closed its end (it sends nothing once subscribed).
fn client_gone(h: &Handler) -> bool {
    let s = h.cx.reader.get_ref();
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
