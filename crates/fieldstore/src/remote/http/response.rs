//! Writing responses: a status line and headers, then a body whole, streamed with a known
//! length, or chunked; errors as JSON `{"kind", "message", "status"}`.

use std::io::{self, Write};

use crate::error_kind::ErrorKind;

pub(super) struct Response {
    pub(super) status: u16,
    pub(super) headers: Vec<(&'static str, String)>,
    pub(super) body: Vec<u8>,
}

pub(super) fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        206 => "Partial Content",
        304 => "Not Modified",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        409 => "Conflict",
        413 => "Content Too Large",
        416 => "Range Not Satisfiable",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        507 => "Insufficient Storage",
        _ => "Status",
    }
}

/// The HTTP status of an error of the given kind (docs/http.md lists them).
pub(super) fn status_of(kind: ErrorKind) -> u16 {
    match kind {
        ErrorKind::NotFound => 404,
        ErrorKind::BadRequest | ErrorKind::Schema => 400,
        ErrorKind::Permission => 403,
        ErrorKind::Locked => 409,
        ErrorKind::Unsupported => 501,
        ErrorKind::Remote => 502,
        ErrorKind::Timeout => 504,
        ErrorKind::Full => 507,
        ErrorKind::FellBehind => 410,
        _ => 500,
    }
}

impl Response {
    pub(super) fn new(status: u16, content_type: &str, body: Vec<u8>) -> Response {
        Response {
            status,
            headers: vec![("Content-Type", content_type.to_string())],
            body,
        }
    }

    pub(super) fn json(value: &serde_json::Value) -> Response {
        let mut body = serde_json::to_vec(value).unwrap_or_default();
        body.push(b'\n');
        Response::new(200, "application/json", body)
    }

    /// An error: `kind` is an [`ErrorKind`] name, or one of the HTTP layer's own (`auth`,
    /// `busy`, `too-large`, `no-route`, `method`).
    pub(super) fn error(status: u16, kind: &str, message: &str) -> Response {
        let body = serde_json::json!({ "kind": kind, "message": message, "status": status });
        let mut r = Response::json(&body);
        r.status = status;
        if status == 401 {
            r.headers
                .push(("WWW-Authenticate", "Bearer realm=\"fieldstore\"".into()));
        }
        if status == 503 || status == 429 {
            r.headers.push(("Retry-After", "1".into()));
        }
        r
    }

    pub(super) fn header(mut self, name: &'static str, value: impl Into<String>) -> Response {
        self.headers.push((name, value.into()));
        self
    }

    /// Writes the response with its body.
    pub(super) fn send<W: Write>(&self, w: &mut W) -> io::Result<()> {
        self.send_for(w, false)
    }

    /// Writes it, without the body for a HEAD request.
    pub(super) fn send_for<W: Write>(&self, w: &mut W, head: bool) -> io::Result<()> {
        write_head(w, self.status, &self.headers, Some(self.body.len() as u64))?;
        if !head {
            w.write_all(&self.body)?;
        }
        w.flush()
    }

    /// For a connection refused before it is served: the whole response, closing.
    pub(super) fn write_head_only<W: Write + ?Sized>(&self, w: &mut W) -> io::Result<()> {
        let mut h = self.headers.clone();
        h.push(("Connection", "close".into()));
        write_head(w, self.status, &h, Some(self.body.len() as u64))?;
        w.write_all(&self.body)?;
        w.flush()
    }
}

/// The status line and headers; `length: None` means a chunked body follows.
pub(super) fn write_head<W: Write + ?Sized>(
    w: &mut W,
    status: u16,
    headers: &[(&'static str, String)],
    length: Option<u64>,
) -> io::Result<()> {
    let mut h = format!("HTTP/1.1 {status} {}\r\n", reason(status));
    h.push_str("Server: fieldstore\r\n");
    h.push_str("Cache-Control: no-store\r\n");
    h.push_str("X-Content-Type-Options: nosniff\r\n");
    for (n, v) in headers {
        h.push_str(n);
        h.push_str(": ");
        h.push_str(v);
        h.push_str("\r\n");
    }
    match length {
        Some(n) => h.push_str(&format!("Content-Length: {n}\r\n")),
        None => h.push_str("Transfer-Encoding: chunked\r\n"),
    }
    h.push_str("\r\n");
    w.write_all(h.as_bytes())
}

/// A chunked body: each `write_all` of `Chunked` becomes one chunk; `finish` ends the body.
pub(super) struct Chunked<'a, W: Write> {
    pub(super) w: &'a mut W,
}

impl<W: Write> Chunked<'_, W> {
    pub(super) fn chunk(&mut self, data: &[u8]) -> io::Result<()> {
        if data.is_empty() {
            return Ok(());
        }
        write!(self.w, "{:x}\r\n", data.len())?;
        self.w.write_all(data)?;
        self.w.write_all(b"\r\n")
    }

    pub(super) fn finish(self) -> io::Result<()> {
        self.w.write_all(b"0\r\n\r\n")?;
        self.w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_json_with_kind_and_status() {
        let mut out = Vec::new();
        Response::error(404, "not-found", "nothing matches class=xx")
            .send(&mut out)
            .unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.starts_with("HTTP/1.1 404 Not Found\r\n"), "{text}");
        let body = text.split("\r\n\r\n").nth(1).unwrap();
        let v: serde_json::Value = serde_json::from_str(body).unwrap();
        assert_eq!(v["kind"], "not-found");
        assert_eq!(v["status"], 404);
    }

    #[test]
    fn chunks_frame_their_lengths() {
        let mut out = Vec::new();
        let mut c = Chunked { w: &mut out };
        c.chunk(b"hello world").unwrap();
        c.chunk(b"").unwrap();
        c.finish().unwrap();
        assert_eq!(out, b"b\r\nhello world\r\n0\r\n\r\n");
    }
}
