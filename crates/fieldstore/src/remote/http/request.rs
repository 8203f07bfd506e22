//! Reading one request head (`httparse`), its query string and its `Range` header.

use std::io::{self, BufRead};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The largest request head accepted (request line and headers): beyond it, 413.
pub(super) const MAX_HEAD: usize = 64 << 10;

pub(super) struct HttpRequest {
    pub(super) method: String,
    /// The path, as sent (ours are plain ASCII).
    pub(super) path: String,
    /// The query's pairs, percent-decoded, in order.
    pub(super) query: Vec<(String, String)>,
    /// Header names lowercased.
    pub(super) headers: Vec<(String, String)>,
    pub(super) keep_alive: bool,
}

impl HttpRequest {
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub(super) fn param(&self, name: &str) -> Option<&str> {
        self.query
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub(super) fn is_head(&self) -> bool {
        self.method == "HEAD"
    }
}

pub(super) enum ReadError {
    /// The client closed between requests, was idle too long, or the server is stopping.
    Closed,
    Io(io::Error),
    /// Not a request we can serve: the status and why.
    Bad(u16, String),
}

impl From<io::Error> for ReadError {
    fn from(e: io::Error) -> Self {
        ReadError::Io(e)
    }
}

/// Reads the next request head. Between requests the connection may idle up to `idle`; inside
/// a head, the client may stop sending for up to `stall`.
pub(super) fn read<R: BufRead>(
    r: &mut R,
    stopping: &AtomicBool,
    idle: Duration,
    stall: Duration,
) -> Result<HttpRequest, ReadError> {
    let mut head: Vec<u8> = Vec::new();
    let mut waiting_since = Instant::now();
    loop {
        let buf = match r.fill_buf() {
            Ok(b) => b,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                let waited = waiting_since.elapsed();
                if head.is_empty() && (stopping.load(Ordering::SeqCst) || waited > idle) {
                    return Err(ReadError::Closed);
                }
                if !head.is_empty() && waited > stall {
                    return Err(ReadError::Io(io::Error::new(
                        io::ErrorKind::TimedOut,
                        "the client stopped sending in the middle of a request",
                    )));
                }
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        if buf.is_empty() {
            return if head.is_empty() {
                Err(ReadError::Closed)
            } else {
                Err(ReadError::Io(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the client closed in the middle of a request",
                )))
            };
        }
        waiting_since = Instant::now();
        // Take bytes up to the end of the head only: what follows is the next request's.
        let before = head.len();
        head.extend_from_slice(buf);
        let end = find_end(&head, before.saturating_sub(3));
        let used = match end {
            Some(e) => e - before,
            None => buf.len(),
        };
        r.consume(used);
        if let Some(e) = end {
            head.truncate(e);
            if e <= MAX_HEAD {
                return parse(&head);
            }
        }
        if head.len() > MAX_HEAD {
            return Err(ReadError::Bad(
                413,
                format!("the request head is over {} KiB", MAX_HEAD >> 10),
            ));
        }
    }
}

fn find_end(buf: &[u8], from: usize) -> Option<usize> {
    buf[from..]
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|p| from + p + 4)
}

fn parse(head: &[u8]) -> Result<HttpRequest, ReadError> {
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut req = httparse::Request::new(&mut headers);
    match req.parse(head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => {
            return Err(ReadError::Bad(400, "incomplete request head".into()))
        }
        Err(httparse::Error::TooManyHeaders) => {
            return Err(ReadError::Bad(413, "more than 64 headers".into()))
        }
        Err(e) => return Err(ReadError::Bad(400, format!("not an HTTP request: {e}"))),
    }
    let method = req.method.unwrap_or("GET").to_string();
    let target = req.path.unwrap_or("/");
    let version = req.version.unwrap_or(1);
    let headers: Vec<(String, String)> = req
        .headers
        .iter()
        .map(|h| {
            (
                h.name.to_ascii_lowercase(),
                String::from_utf8_lossy(h.value).trim().to_string(),
            )
        })
        .collect();
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    // Our paths are plain ASCII: taken as sent.
    let path = path.to_string();
    let query = url::form_urlencoded::parse(query.as_bytes())
        .map(|(k, v)| (k.into_owned(), v.into_owned()))
        .collect();
    let connection = headers
        .iter()
        .find(|(n, _)| n == "connection")
        .map(|(_, v)| v.to_ascii_lowercase());
    let keep_alive = match connection.as_deref() {
        Some(c) if c.contains("close") => false,
        Some(c) if c.contains("keep-alive") => true,
        _ => version >= 1,
    };
    let has_body = headers
        .iter()
        .any(|(n, v)| (n == "content-length" && v != "0") || n == "transfer-encoding");
    if has_body {
        return Err(ReadError::Bad(
            400,
            "requests carry no body here: the API is read-only (GET and HEAD)".into(),
        ));
    }
    Ok(HttpRequest {
        method,
        path,
        query,
        headers,
        keep_alive,
    })
}

/// A `Range: bytes=...` header against a body of `size` bytes: the first and last byte
/// wanted, `Ok(None)` to send the whole body (no header, or several ranges), `Err` when
/// nothing of it can be satisfied (416).
pub(super) fn byte_range(header: Option<&str>, size: u64) -> Result<Option<(u64, u64)>, ()> {
    let Some(h) = header else { return Ok(None) };
    let Some(spec) = h.trim().strip_prefix("bytes=") else {
        return Ok(None);
    };
    if spec.contains(',') {
        return Ok(None);
    }
    let (a, b) = spec.split_once('-').ok_or(())?;
    let (a, b) = (a.trim(), b.trim());
    let (first, last) = if a.is_empty() {
        let n: u64 = b.parse().map_err(|_| ())?;
        if n == 0 || size == 0 {
            return Err(());
        }
        (size.saturating_sub(n), size - 1)
    } else {
        let first: u64 = a.parse().map_err(|_| ())?;
        let last = if b.is_empty() {
            size.saturating_sub(1)
        } else {
            b.parse::<u64>()
                .map_err(|_| ())?
                .min(size.saturating_sub(1))
        };
        (first, last)
    };
    if first >= size || last < first {
        return Err(());
    }
    Ok(Some((first, last)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn one(text: &str) -> Result<HttpRequest, ReadError> {
        let stop = AtomicBool::new(false);
        read(
            &mut io::BufReader::new(Cursor::new(text.as_bytes().to_vec())),
            &stop,
            Duration::from_secs(1),
            Duration::from_secs(1),
        )
    }

    #[test]
    fn a_head_parses_with_its_query_decoded() {
        let r = one("GET /api/v1/list?request=class%3Dod%2Cstep%3D0%2F6&format=porcelain HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer abc\r\n\r\n").ok().unwrap();
        assert_eq!(r.path, "/api/v1/list");
        assert_eq!(r.param("request"), Some("class=od,step=0/6"));
        assert_eq!(r.param("format"), Some("porcelain"));
        assert_eq!(r.header("authorization"), Some("Bearer abc"));
        assert!(r.keep_alive);
    }

    #[test]
    fn garbage_and_bodies_are_bad_requests() {
        assert!(matches!(
            one("\x01\x02 nonsense\r\n\r\n"),
            Err(ReadError::Bad(400, _))
        ));
        assert!(matches!(
            one("POST /api/v1/list HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc"),
            Err(ReadError::Bad(400, _))
        ));
        let long = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_HEAD + 10));
        assert!(matches!(one(&long), Err(ReadError::Bad(413, _))));
        assert!(matches!(one(""), Err(ReadError::Closed)));
    }

    #[test]
    fn ranges_are_clamped_or_refused() {
        assert_eq!(byte_range(None, 10), Ok(None));
        assert_eq!(byte_range(Some("bytes=0-3"), 10), Ok(Some((0, 3))));
        assert_eq!(byte_range(Some("bytes=4-"), 10), Ok(Some((4, 9))));
        assert_eq!(byte_range(Some("bytes=-3"), 10), Ok(Some((7, 9))));
        assert_eq!(byte_range(Some("bytes=5-100"), 10), Ok(Some((5, 9))));
        assert_eq!(byte_range(Some("bytes=10-"), 10), Err(()));
        assert_eq!(byte_range(Some("bytes=x-"), 10), Err(()));
        assert_eq!(byte_range(Some("bytes=0-1,3-4"), 10), Ok(None));
    }
}
