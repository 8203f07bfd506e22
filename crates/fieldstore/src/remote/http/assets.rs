//! The web view's files (`static/`), built into the binary: plain HTML, CSS and JavaScript, no
//! build step; the map outlines from Natural Earth (public domain), made once by
//! `scripts/make-coastlines`.

/// The file at `path` and its content type.
pub(super) fn find(path: &str) -> Option<(&'static [u8], &'static str)> {
    Some(match path {
        "/" | "/index.html" => (
            include_bytes!("static/index.html").as_slice(),
            "text/html; charset=utf-8",
        ),
        "/app.js" => (
            include_bytes!("static/app.js").as_slice(),
            "text/javascript; charset=utf-8",
        ),
        "/style.css" => (
            include_bytes!("static/style.css").as_slice(),
            "text/css; charset=utf-8",
        ),
        "/coastlines.bin" => (
            include_bytes!("static/coastlines.bin").as_slice(),
            "application/octet-stream",
        ),
        "/favicon.ico" => (b"".as_slice(), "image/x-icon"),
        _ => return None,
    })
}
