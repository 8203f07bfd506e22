//! A `fieldstore server` started by a test: on a free port, its stderr in `server.log` beside the
//! test's configs, and `remote.yaml` written to point at it. Killed when dropped.

// Each test binary that includes this uses its own part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

pub struct Served {
    pub child: Child,
    pub port: u16,
    /// `host:port` of the metrics endpoint, when the server was asked for one.
    pub metrics: Option<String>,
    /// `host:port` of the HTTP endpoint (`--http`), when the server was asked for one.
    pub http: Option<String>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    /// A counter or gauge from the server's `--metrics` endpoint.
    pub fn metric(&self, name: &str) -> u64 {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(self.metrics.as_deref().unwrap()).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
            .unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        let line = text
            .lines()
            .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
            .unwrap_or_else(|| panic!("no metric {name} in\n{text}"));
        line[name.len() + 1..].trim().parse().unwrap()
    }
}

/// Starts `server` (a `fieldstore ... server ...` command, `--token token` among its arguments)
/// and waits for its `listening on` line; `dir` gets `server.log` (appended to) and `remote.yaml`.
pub fn start(server: Command, dir: &Path, token: &str) -> Served {
    start_until(server, dir, token, "listening on ")
}

/// As [`start`], for a server of HTTP only (`--http` without `--listen`): waits for its
/// `http on` line (`port` is then the HTTP one).
pub fn start_http_only(server: Command, dir: &Path, token: &str) -> Served {
    start_until(server, dir, token, "http on ")
}

fn start_until(mut server: Command, dir: &Path, token: &str, last: &str) -> Served {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("server.log"))
        .unwrap();
    let mut child = server.stdout(Stdio::piped()).stderr(log).spawn().unwrap();
    let (mut port, mut metrics, mut http) = (0u16, None, None);
    for line in BufReader::new(child.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(m) = line.strip_prefix("metrics on http://") {
            metrics = Some(m.trim_end_matches("/metrics").to_string());
        }
        if let Some(h) = line
            .strip_prefix("http on http://")
            .or_else(|| line.strip_prefix("http on https://"))
        {
            http = Some(h.trim_end_matches('/').to_string());
        }
        if let Some(a) = line.strip_prefix(last) {
            let a = a.trim_end_matches('/');
            port = a.rsplit(':').next().unwrap().parse().unwrap();
            break;
        }
    }
    let served = Served {
        child,
        port,
        metrics,
        http,
    };
    assert!(
        port > 0,
        "server did not start: {}",
        std::fs::read_to_string(dir.join("server.log")).unwrap_or_default()
    );
    std::fs::write(
        dir.join("remote.yaml"),
        format!("type: remote\nhost: 127.0.0.1\nport: {port}\ntoken: {token}\n"),
    )
    .unwrap();
    served
}
