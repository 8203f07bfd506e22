//! A real `fieldstore server` under clients that try to exhaust its memory: frames announcing
//! 1 GiB and sent slowly, fields far larger than the budget, clients vanishing mid-field,
//! damaged frames, one identity holding too many requests. The server's resident memory (from
//! /proc) stays under its `--memory-budget` while a well-behaved client is served correctly.

mod common;
#[path = "common/server.rs"]
mod server;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fieldstore::api::Start;
use fieldstore::checksum::Crc32c;
use fieldstore::model::request::parse_request;
use fieldstore::model::Key;
use fieldstore::remote::protocol::{
    self as p, encode_archive_prefix, read_frame, write_frame, ErrorReply, FrameHeader, Hello,
    MsgType, Role,
};
use fieldstore::remote::RemoteError;
use server::Served;

const TOKEN: &str = "hostile-test-token";
const ALL: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl";

struct Store {
    dir: tempfile::TempDir,
}

impl Store {
    fn new() -> Store {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("local.yaml"),
            format!(
                "type: local\nspaces: [{{roots: [{{path: {}}}]}}]\n",
                dir.path().join("root").display()
            ),
        )
        .unwrap();
        std::fs::create_dir(dir.path().join("spool")).unwrap();
        Store { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn command(&self, config: &str, args: &[&str]) -> Command {
        let mut c = common::fieldstore();
        c.arg("--config").arg(self.path(config)).args(args);
        c
    }

    fn ok(&self, config: &str, args: &[&str]) -> String {
        let o = self.command(config, args).output().unwrap();
        assert!(
            o.status.success(),
            "{config} {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    /// A server whose temporary files go to `spool/`, so a test sees any it leaves.
    fn serve(&self, extra: &[&str]) -> Served {
        let mut args = vec![
            "server",
            "--listen",
            "127.0.0.1:0",
            "--token",
            TOKEN,
            "--metrics",
            "127.0.0.1:0",
        ];
        args.extend_from_slice(extra);
        let mut c = self.command("local.yaml", &args);
        c.env("TMPDIR", self.path("spool"));
        server::start(c, self.dir.path(), TOKEN)
    }

    fn sample(&self, name: &str, steps: &str, points: usize) -> PathBuf {
        let p = self.path(name);
        let points = points.to_string();
        self.ok(
            "local.yaml",
            &[
                "sample",
                "--out",
                p.to_str().unwrap(),
                "--steps",
                steps,
                "--params",
                "t/u",
                "--levels",
                "1000/500",
                "--points",
                &points,
            ],
        );
        p
    }

    fn list(&self, config: &str) -> Vec<String> {
        let mut v: Vec<String> = self
            .ok(config, &["list", "class=od,expver=0001", "--porcelain"])
            .lines()
            .map(str::to_string)
            .collect();
        v.sort();
        v
    }

    fn read(&self, config: &str, request: &str, out: &str) -> Vec<u8> {
        let path = self.path(out);
        self.ok(config, &["read", request, path.to_str().unwrap()]);
        std::fs::read(path).unwrap()
    }

    fn spooled_files(&self) -> usize {
        std::fs::read_dir(self.path("spool")).unwrap().count()
    }
}

fn metrics_text(server: &Served) -> String {
    let mut s = TcpStream::connect(server.metrics.as_deref().unwrap()).unwrap();
    s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

fn metric(server: &Served, name: &str) -> u64 {
    let text = metrics_text(server);
    let line = text
        .lines()
        .find(|l| l.starts_with(name) && l[name.len()..].starts_with(' '))
        .unwrap_or_else(|| panic!("no metric {name} in\n{text}"));
    line[name.len() + 1..].trim().parse().unwrap()
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// Samples a process's resident memory until dropped; `peak()` is the highest seen.
struct RssWatch {
    peak: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl RssWatch {
    fn start(pid: u32) -> RssWatch {
        let peak = Arc::new(AtomicU64::new(rss_kib(pid)));
        let stop = Arc::new(AtomicBool::new(false));
        let (p2, s2) = (peak.clone(), stop.clone());
        let thread = std::thread::spawn(move || {
            while !s2.load(Ordering::Relaxed) {
                p2.fetch_max(rss_kib(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        });
        RssWatch {
            peak,
            stop,
            thread: Some(thread),
        }
    }

    fn peak(&self) -> u64 {
        self.peak.load(Ordering::Relaxed)
    }
}

impl Drop for RssWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A client speaking the protocol by hand, to send what the real client never does.
struct Raw {
    stream: TcpStream,
    payload: Vec<u8>,
}

impl Raw {
    fn hello(port: u16, role: Role) -> Raw {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(60)))
            .unwrap();
        let mut c = Raw {
            stream,
            payload: Vec::new(),
        };
        let hello = p::to_json(&Hello {
            versions: vec![p::VERSION_MAX],
            token: Some(TOKEN.into()),
            role,
            client: "hostile test client".into(),
            handover: false,
        });
        write_frame(&mut c.stream, 1, MsgType::Hello, 1, &[&hello]).unwrap();
        let h = c.recv().unwrap();
        assert_eq!(h.kind, MsgType::Welcome);
        c
    }

    fn recv(&mut self) -> Result<FrameHeader, RemoteError> {
        read_frame(&mut self.stream, 1 << 32, &mut self.payload)
    }

    fn error(&self) -> ErrorReply {
        p::from_json("error", &self.payload).unwrap()
    }

    /// The start of an archive frame announcing `length` payload bytes, and its metadata.
    fn start_archive(&mut self, length: u64, key: Option<&Key>, grib: bool) -> u64 {
        let prefix = encode_archive_prefix(key, grib);
        let mut h = Vec::with_capacity(p::HEADER_LEN);
        h.extend_from_slice(&p::MAGIC);
        h.extend_from_slice(&p::VERSION_MAX.to_be_bytes());
        h.extend_from_slice(&(MsgType::Archive as u16).to_be_bytes());
        h.extend_from_slice(&7u64.to_be_bytes());
        h.extend_from_slice(&length.to_be_bytes());
        self.stream.write_all(&h).unwrap();
        self.stream.write_all(&prefix).unwrap();
        length - prefix.len() as u64
    }

    /// One whole archive frame of `data` under `key` (answered by the next flush).
    fn archive(&mut self, key: &Key, data: &[u8]) {
        let prefix = encode_archive_prefix(Some(key), true);
        let parts: [&[u8]; 2] = [&prefix, data];
        write_frame(
            &mut self.stream,
            p::VERSION_MAX,
            MsgType::Archive,
            3,
            &parts,
        )
        .unwrap();
    }

    fn flush(&mut self) -> Result<u64, ErrorReply> {
        write_frame(&mut self.stream, p::VERSION_MAX, MsgType::Flush, 9, &[]).unwrap();
        let h = self.recv().unwrap();
        match h.kind {
            MsgType::Reply => Ok(p::from_json("flush", &self.payload).unwrap()),
            MsgType::Error => Err(self.error()),
            other => panic!("unexpected {other:?}"),
        }
    }
}

fn key(param: &str, level: &str, step: &str) -> Key {
    let mut pairs: Vec<(String, String)> = ALL
        .split(',')
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap();
            (k.to_string(), v.to_string())
        })
        .collect();
    pairs.push(("levelist".into(), level.into()));
    pairs.push(("param".into(), param.into()));
    pairs.push(("step".into(), step.into()));
    Key::from_pairs(pairs)
}

/// Deterministic bytes standing for a field, made a piece at a time.
fn pattern(offset: u64, buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        let x = offset + i as u64;
        *b = (x ^ (x >> 11) ^ (x >> 23)) as u8;
    }
}

fn same_as_pattern(path: &Path, length: u64) {
    let mut f = std::fs::File::open(path).unwrap();
    assert_eq!(f.metadata().unwrap().len(), length);
    let (mut got, mut want) = (vec![0u8; 1 << 20], vec![0u8; 1 << 20]);
    let mut at = 0u64;
    while at < length {
        let n = (length - at).min(1 << 20) as usize;
        f.read_exact(&mut got[..n]).unwrap();
        pattern(at, &mut want[..n]);
        assert!(got[..n] == want[..n], "bytes differ in the MiB at {at}");
        at += n as u64;
    }
}

/// Sends `count` bytes of the pattern, a MiB at a time; `false` once the server stopped reading
/// (its budget is holding the client back) or closed.
fn send_pattern(stream: &mut TcpStream, from: u64, count: u64) -> bool {
    let mut buf = vec![0u8; 1 << 20];
    let mut at = from;
    while at < from + count {
        let n = (from + count - at).min(1 << 20) as usize;
        pattern(at, &mut buf[..n]);
        if stream.write_all(&buf[..n]).is_err() {
            return false;
        }
        at += n as u64;
    }
    true
}

#[test]
fn hostile_clients_keep_server_memory_under_its_budget_while_others_are_served() {
    let s = Store::new();
    let budget_mib = 128u64;
    let mut srv = s.serve(&[
        "--memory-budget",
        &format!("{budget_mib}MiB"),
        "--connection-budget",
        "8MiB",
    ]);
    let first = s.sample("first.grib", "0", 1000);
    s.ok("remote.yaml", &["write", first.to_str().unwrap()]);
    let request = format!("{ALL},param=t/u,levelist=1000/500,step=0/6");
    s.read("remote.yaml", &request, "warm.grib");
    let pid = srv.child.id();
    let baseline = rss_kib(pid);
    let watch = RssWatch::start(pid);

    let stop = Arc::new(AtomicBool::new(false));
    let mut hostile = Vec::new();
    // Frames announcing 1 GiB, 24 MiB sent at once (192 MiB in all, which a server holding
    // frames whole would hold), then a trickle: with their key (stored as they come) and
    // without (spooled).
    for i in 0..8u64 {
        let (port, stop) = (srv.port, stop.clone());
        hostile.push(std::thread::spawn(move || {
            let mut c = Raw::hello(port, Role::Archive);
            let k = key("t", "850", &(100 + i).to_string());
            let with_key = i < 6;
            c.start_archive(1 << 30, with_key.then_some(&k), with_key);
            let mut at = 0;
            if !send_pattern(&mut c.stream, at, 24 << 20) {
                return;
            }
            at += 24 << 20;
            while !stop.load(Ordering::Relaxed) && send_pattern(&mut c.stream, at, 4096) {
                at += 4096;
                std::thread::sleep(Duration::from_millis(50));
            }
        }));
    }
    // Small frames (received whole) half sent, idle connections, garbage.
    for i in 0..40u64 {
        let (port, stop) = (srv.port, stop.clone());
        hostile.push(std::thread::spawn(move || {
            let mut c = Raw::hello(port, Role::Archive);
            match i % 3 {
                0 => {
                    let k = key("u", "850", &i.to_string());
                    let left = c.start_archive(1 << 20, Some(&k), true);
                    send_pattern(&mut c.stream, 0, left / 2);
                }
                1 => {}
                _ => {
                    let _ = c.stream.write_all(&[0x5a; 4096]);
                }
            }
            while !stop.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(50));
            }
        }));
    }
    // Let them get going, then the well-behaved client archives, lists and reads.
    std::thread::sleep(Duration::from_millis(1500));
    let started = Instant::now();
    let second = s.sample("second.grib", "6", 1000);
    s.ok("remote.yaml", &["write", second.to_str().unwrap()]);
    assert_eq!(s.list("remote.yaml").len(), 8);
    assert_eq!(s.list("remote.yaml"), s.list("local.yaml"));
    let remote = s.read("remote.yaml", &request, "r.grib");
    assert_eq!(remote, s.read("local.yaml", &request, "l.grib"));
    let mut whole = std::fs::read(&first).unwrap();
    whole.extend(std::fs::read(&second).unwrap());
    assert_eq!(remote.len(), whole.len());
    let served_in = started.elapsed();
    std::thread::sleep(Duration::from_millis(1000));
    let peak = watch.peak();
    let in_use = metric(&srv, "fieldstore_memory_budget_in_use_bytes");
    stop.store(true, Ordering::Relaxed);
    for h in hostile {
        h.join().unwrap();
    }
    drop(watch);
    eprintln!(
        "hostile: server RSS {baseline} KiB before, peak {peak} KiB with 48 hostile clients \
         (budget {budget_mib} MiB, {} KiB of it in use at the end); the good client was served in {served_in:?}",
        in_use >> 10
    );
    assert!(
        peak < budget_mib << 10,
        "server RSS peaked at {peak} KiB, over its {budget_mib} MiB budget (baseline {baseline} KiB)"
    );
    // The hostile clients left: nothing of theirs is visible, no temporary file is left.
    assert!(srv.is_running());
    assert_eq!(s.list("remote.yaml").len(), 8);
    let waited = Instant::now();
    while s.spooled_files() > 0 && waited.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(s.spooled_files(), 0, "temporary files left behind");
    assert!(metric(&srv, "fieldstore_frame_errors_total") > 0);
}

#[test]
fn a_field_larger_than_the_budget_streams_through_byte_identical() {
    let s = Store::new();
    let srv = s.serve(&["--memory-budget", "64MiB", "--connection-budget", "16MiB"]);
    let length: u64 = 300 << 20;
    let k = key("t", "1000", "0");
    let mut c = Raw::hello(srv.port, Role::Archive);
    let pid = srv.child.id();
    let baseline = rss_kib(pid);
    let watch = RssWatch::start(pid);
    // Sent as one frame whose checksum covers it all, computed here piece by piece.
    let prefix = encode_archive_prefix(Some(&k), true);
    let payload_len = prefix.len() as u64 + length;
    let mut header = Vec::new();
    header.extend_from_slice(&p::MAGIC);
    header.extend_from_slice(&p::VERSION_MAX.to_be_bytes());
    header.extend_from_slice(&(MsgType::Archive as u16).to_be_bytes());
    header.extend_from_slice(&3u64.to_be_bytes());
    header.extend_from_slice(&payload_len.to_be_bytes());
    let mut crc = Crc32c::new();
    crc.update(&header);
    c.stream.write_all(&header).unwrap();
    crc.update(&prefix);
    c.stream.write_all(&prefix).unwrap();
    let mut buf = vec![0u8; 1 << 20];
    let mut at = 0u64;
    while at < length {
        let n = (length - at).min(1 << 20) as usize;
        pattern(at, &mut buf[..n]);
        crc.update(&buf[..n]);
        c.stream.write_all(&buf[..n]).unwrap();
        at += n as u64;
    }
    let mut trailer = crc.value().to_be_bytes().to_vec();
    trailer.extend_from_slice(&p::END_MARKER);
    c.stream.write_all(&trailer).unwrap();
    assert_eq!(c.flush(), Ok(1));
    let peak = watch.peak();
    drop(watch);
    eprintln!("a 300 MiB field: server RSS {baseline} KiB before, peak {peak} KiB");
    assert!(
        peak.saturating_sub(baseline) < 64 << 10,
        "server RSS grew by {} KiB for a 300 MiB field",
        peak.saturating_sub(baseline)
    );
    // Read back through the server and locally: the same bytes.
    let request = format!("{ALL},param=t,levelist=1000,step=0");
    for config in ["remote.yaml", "local.yaml"] {
        let out = s.path("back.bin");
        s.ok(config, &["read", &request, out.to_str().unwrap()]);
        same_as_pattern(&out, length);
    }
}

#[test]
fn a_large_grib_without_a_key_is_spooled_and_stored_identically() {
    let s = Store::new();
    let srv = s.serve(&["--memory-budget", "64MiB"]);
    // One step, four messages of about 20 MB each: over the size received whole.
    let grib = s.sample("big.grib", "0", 10_000_000);
    let messages: Vec<Vec<u8>> =
        fieldstore::grib::MessageReader::new(std::fs::File::open(&grib).unwrap(), "test")
            .map(|m| m.unwrap().bytes)
            .collect();
    assert!(messages[0].len() > 16 << 20, "{}", messages[0].len());
    let mut c = Raw::hello(srv.port, Role::Archive);
    let prefix = encode_archive_prefix(None, false);
    for m in &messages {
        write_frame(
            &mut c.stream,
            p::VERSION_MAX,
            MsgType::Archive,
            4,
            &[&prefix, m],
        )
        .unwrap();
    }
    assert_eq!(c.flush(), Ok(messages.len() as u64));
    let request = format!("{ALL},param=t/u,levelist=1000/500,step=0");
    assert_eq!(
        s.read("local.yaml", &request, "back.grib"),
        std::fs::read(&grib).unwrap()
    );
    assert_eq!(s.spooled_files(), 0);
}

#[test]
fn a_client_vanishing_mid_field_or_sending_a_damaged_one_leaves_nothing() {
    let s = Store::new();
    let mut srv = s.serve(&[]);
    let small = s.sample("small.grib", "0", 1000);
    s.ok("remote.yaml", &["write", small.to_str().unwrap()]);
    // Vanishing in the middle of a streamed and of a spooled field.
    for with_key in [true, false] {
        let mut c = Raw::hello(srv.port, Role::Archive);
        let k = key("t", "850", "12");
        let left = c.start_archive(100 << 20, with_key.then_some(&k), with_key);
        send_pattern(&mut c.stream, 0, left / 3);
        drop(c);
    }
    // A whole frame, its checksum damaged.
    let mut c = Raw::hello(srv.port, Role::Archive);
    let k = key("t", "850", "18");
    let data = vec![7u8; 20 << 20];
    let mut framed = Vec::new();
    write_frame(
        &mut framed,
        p::VERSION_MAX,
        MsgType::Archive,
        5,
        &[&encode_archive_prefix(Some(&k), true), &data],
    )
    .unwrap();
    let at = framed.len() - p::TRAILER_LEN;
    framed[at] ^= 0xff;
    c.stream.write_all(&framed).unwrap();
    let h = c.recv().unwrap();
    assert_eq!(h.kind, MsgType::Error);
    assert!(c.error().message.contains("checksum"), "{:?}", c.error());
    drop(c);
    wait_for("the connections to end", || {
        metric(&srv, "fieldstore_connections_open") == 0
    });
    // The fields the server had started storing were dropped unflushed (a spooled one never
    // reached the store).
    assert_eq!(metric(&srv, "fieldstore_discarded_fields_total"), 2);
    assert!(srv.is_running());
    assert_eq!(s.list("remote.yaml").len(), 4);
    assert_eq!(s.list("local.yaml").len(), 4);
    assert_eq!(s.spooled_files(), 0);
    // No part of the unfinished or damaged fields stays in the store's data files.
    assert_eq!(
        data_bytes(&s.path("root")),
        std::fs::metadata(&small).unwrap().len()
    );
}

/// Bytes in the data files under `dir`.
fn data_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if e.file_type().unwrap().is_dir() {
            total += data_bytes(&p);
        } else if p.extension().is_some_and(|x| x == "data") {
            total += e.metadata().unwrap().len();
        }
    }
    total
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let started = Instant::now();
    while !cond() {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Subscribers with data that stop reading: each would hold a field while the server's write to
/// it blocks. Their fields' bytes are read only with memory from the budget (at most half of
/// it), so a dozen of them hold no more than that and are sent the rest as plain notices. A
/// subscriber that reads gets every field, with its bytes or to retrieve, and writers go on.
#[test]
fn subscribers_that_stop_reading_hold_at_most_half_the_budget() {
    const FIELD: u64 = 8 << 20;
    const FIELDS: u64 = 8;
    let s = Store::new();
    let srv = s.serve(&["--memory-budget", "32MiB", "--connection-budget", "16MiB"]);
    let subscribe = |start: Start| {
        let mut c = Raw::hello(srv.port, Role::Control);
        let q = p::to_json(&p::SubscribeQuery {
            request: (&parse_request("class=od,expver=0001").unwrap()).into(),
            start,
            data: true,
        });
        write_frame(&mut c.stream, p::VERSION_MAX, MsgType::Subscribe, 2, &[&q]).unwrap();
        assert_eq!(c.recv().unwrap().kind, MsgType::Notices);
        c
    };
    let stalled: Vec<Raw> = (0..12).map(|_| subscribe(Start::Now)).collect();
    let pid = srv.child.id();
    let baseline = rss_kib(pid);
    let watch = RssWatch::start(pid);
    let mut w = Raw::hello(srv.port, Role::Archive);
    let mut data = vec![0u8; FIELD as usize];
    for step in 0..FIELDS {
        pattern(step << 32, &mut data);
        w.archive(&key("t", "1000", &step.to_string()), &data);
        assert_eq!(w.flush(), Ok(1), "step {step}");
    }
    // Until every stalled subscriber is blocked on a full socket or waits for its next field
    // (unbudgeted, the blocked sends never count as sent).
    let started = Instant::now();
    while metric(&srv, "fieldstore_notices_sent_total")
        + metric(&srv, "fieldstore_notices_without_data_total")
        < 12 * FIELDS - 2
        && started.elapsed() < Duration::from_secs(10)
    {
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_secs(1));
    let peak = watch.peak();
    drop(watch);
    let withheld = metric(&srv, "fieldstore_notices_without_data_total");
    eprintln!("12 stalled subscribers of {FIELDS} fields of 8 MiB: server RSS {baseline} KiB before, peak {peak} KiB; {withheld} notices without their field");
    // Unbudgeted, each stalled subscriber held a whole field: 12 x 8 MiB.
    assert!(
        peak.saturating_sub(baseline) < 56 << 10,
        "server RSS grew by {} KiB",
        peak.saturating_sub(baseline)
    );
    assert!(withheld > 0, "no field was withheld");
    assert!(
        metric(&srv, "fieldstore_memory_budget_in_use_bytes") <= 16 << 20,
        "subscribers hold more than half the budget"
    );
    // A subscriber that reads gets each field once: its bytes, or a notice to retrieve it.
    let mut reader = subscribe(Start::Beginning);
    let mut seen = std::collections::BTreeSet::new();
    while (seen.len() as u64) < FIELDS {
        let h = reader.recv().unwrap();
        let notices: Vec<(p::WireNotice, Option<Vec<u8>>)> = match h.kind {
            MsgType::NoticeData => {
                let (n, d) = p::split_notice_data(&reader.payload).unwrap();
                vec![(p::from_json("notice", n).unwrap(), Some(d.to_vec()))]
            }
            MsgType::Notices => {
                let ns: p::WireNotices = p::from_json("notices", &reader.payload).unwrap();
                ns.notices.into_iter().map(|n| (n, None)).collect()
            }
            other => panic!("unexpected {other:?}"),
        };
        for (n, d) in notices {
            let n = fieldstore::api::Notice::from(n);
            let step: u64 = n.element.key.datum.get("step").unwrap().parse().unwrap();
            assert!(seen.insert(step), "step {step} twice");
            let got = match d {
                Some(d) => d,
                None => s.read(
                    "remote.yaml",
                    &format!("{ALL},param=t,levelist=1000,step={step}"),
                    "withheld.bin",
                ),
            };
            pattern(step << 32, &mut data);
            assert!(got == data, "step {step}: other bytes");
        }
    }
    drop(stalled);
}

/// A stored 64 MiB field, and a raw client that asked for it and reads none of the reply.
fn retrieve_left_unread(srv: &Served) -> (Vec<u8>, String, Raw) {
    let mut data = vec![0u8; 64 << 20];
    pattern(0, &mut data);
    let mut w = Raw::hello(srv.port, Role::Archive);
    w.archive(&key("t", "1000", "0"), &data);
    assert_eq!(w.flush(), Ok(1));
    let request = format!("{ALL},param=t,levelist=1000,step=0");
    let mut c = Raw::hello(srv.port, Role::Control);
    let q = p::to_json(&p::Query::new(&parse_request(&request).unwrap()));
    write_frame(&mut c.stream, p::VERSION_MAX, MsgType::Retrieve, 2, &[&q]).unwrap();
    wait_for("the retrieve to hold memory", || {
        metric(srv, "fieldstore_memory_budget_in_use_bytes") > 0
    });
    (data, request, c)
}

/// A client gone in the middle of a large retrieve frees its connection and its chunks of the
/// budget (the connection thread used to wait forever for the store's reader thread, blocked
/// handing over its next chunk: a thread and 3 chunks lost per such client).
#[test]
fn a_client_gone_mid_retrieve_frees_what_it_held() {
    let s = Store::new();
    let srv = s.serve(&[]);
    let (_, _, c) = retrieve_left_unread(&srv);
    let open = metric(&srv, "fieldstore_connections_open");
    drop(c);
    wait_for("the connection to close and free its memory", || {
        metric(&srv, "fieldstore_connections_open") < open
            && metric(&srv, "fieldstore_memory_budget_in_use_bytes") == 0
    });
}

/// A client that stops reading its retrieve keeps the server's write blocked, holding the
/// connection's chunks of the budget; after `--stall-timeout` it is dropped and they are freed.
#[test]
fn a_client_that_stops_reading_is_dropped_after_the_stall_timeout() {
    let s = Store::new();
    let srv = s.serve(&["--stall-timeout", "2"]);
    let (data, request, c) = retrieve_left_unread(&srv);
    let in_use = || metric(&srv, "fieldstore_memory_budget_in_use_bytes");
    std::thread::sleep(Duration::from_millis(500));
    assert!(in_use() > 0, "dropped before the stall timeout");
    wait_for("the stalled client to be dropped", || in_use() == 0);
    let log = std::fs::read_to_string(s.path("server.log")).unwrap();
    assert!(
        log.contains("the client read nothing of what it was sent for 2 s (--stall-timeout)"),
        "{log}"
    );
    // Others are served meanwhile and after.
    assert!(s.read("remote.yaml", &request, "back.bin") == data);
    drop(c);
}

#[test]
fn a_client_over_the_memory_budget_waits_then_gets_busy() {
    let s = Store::new();
    let srv = s.serve(&[
        "--memory-budget",
        "4MiB",
        "--connection-budget",
        "1MiB",
        "--budget-wait",
        "1",
    ]);
    // Four clients each hold 1 MiB: a frame announced, half sent.
    let holders: Vec<Raw> = (0..4)
        .map(|i| {
            let mut c = Raw::hello(srv.port, Role::Archive);
            let k = key("u", "850", &i.to_string());
            let left = c.start_archive(1 << 20, Some(&k), true);
            send_pattern(&mut c.stream, 0, left / 2);
            c
        })
        .collect();
    wait_for("the holders' memory", || {
        metric(&srv, "fieldstore_memory_budget_in_use_bytes") >= 4 << 20
    });
    // A fifth waits, is refused, and its flush says why.
    let mut c = Raw::hello(srv.port, Role::Archive);
    let k = key("t", "850", "0");
    let data = vec![1u8; 512 << 10];
    write_frame(
        &mut c.stream,
        p::VERSION_MAX,
        MsgType::Archive,
        2,
        &[&encode_archive_prefix(Some(&k), true), &data],
    )
    .unwrap();
    let e = c.flush().unwrap_err();
    assert_eq!(e.kind, "busy", "{e:?}");
    assert!(e.message.contains("--memory-budget"), "{e:?}");
    assert!(metric(&srv, "fieldstore_memory_budget_waits_total") >= 1);
    assert_eq!(metric(&srv, "fieldstore_memory_budget_refusals_total"), 1);
    // Once memory frees, the same connection archives.
    drop(holders);
    wait_for("the holders' memory to free", || {
        metric(&srv, "fieldstore_memory_budget_in_use_bytes") == 0
    });
    write_frame(
        &mut c.stream,
        p::VERSION_MAX,
        MsgType::Archive,
        3,
        &[&encode_archive_prefix(Some(&k), true), &data],
    )
    .unwrap();
    assert_eq!(c.flush(), Ok(1));
}

#[test]
fn an_identity_over_its_request_limit_is_refused_by_name() {
    let s = Store::new();
    let srv = s.serve(&["--max-requests-per-identity", "2"]);
    let data = vec![3u8; 1000];
    let archive = |c: &mut Raw, step: &str| {
        let k = key("t", "850", step);
        let prefix = encode_archive_prefix(Some(&k), true);
        write_frame(
            &mut c.stream,
            p::VERSION_MAX,
            MsgType::Archive,
            2,
            &[&prefix, &data],
        )
        .unwrap();
    };
    // Two batches in progress (archived, not flushed) are the identity's two requests.
    let mut a = Raw::hello(srv.port, Role::Archive);
    archive(&mut a, "0");
    let mut b = Raw::hello(srv.port, Role::Archive);
    archive(&mut b, "6");
    wait_for("both fields to be stored", || {
        metric(&srv, "fieldstore_requests_total{op=\"archive\"}") == 2
    });
    let mut c = Raw::hello(srv.port, Role::Archive);
    archive(&mut c, "12");
    let e = c.flush().unwrap_err();
    assert_eq!(e.kind, "busy");
    assert!(
        e.message.contains("identity 'token'")
            && e.message.contains("--max-requests-per-identity 2"),
        "{e:?}"
    );
    // Control requests count too.
    let o = s
        .command("remote.yaml", &["list", "class=od"])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("--max-requests-per-identity 2"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(metric(&srv, "fieldstore_identity_limit_refusals_total"), 2);
    // A flush ends a batch: the identity is served again, on the refused connection too.
    assert_eq!(a.flush(), Ok(1));
    archive(&mut c, "12");
    assert_eq!(c.flush(), Ok(1));
    assert_eq!(b.flush(), Ok(1));
    assert_eq!(s.list("remote.yaml").len(), 3);
}

#[test]
fn a_request_announcing_a_huge_payload_is_refused_before_anything_is_read() {
    let s = Store::new();
    let mut srv = s.serve(&[]);
    let mut c = Raw::hello(srv.port, Role::Control);
    let mut h = Vec::new();
    h.extend_from_slice(&p::MAGIC);
    h.extend_from_slice(&p::VERSION_MAX.to_be_bytes());
    h.extend_from_slice(&(MsgType::List as u16).to_be_bytes());
    h.extend_from_slice(&2u64.to_be_bytes());
    h.extend_from_slice(&(900u64 << 20).to_be_bytes());
    c.stream.write_all(&h).unwrap();
    let r = c.recv().unwrap();
    assert_eq!(r.kind, MsgType::Error);
    let e = c.error();
    assert_eq!(e.kind, "frame", "{e:?}");
    assert!(e.message.contains("1048576"), "{e:?}");
    let mut rest = Vec::new();
    assert_eq!(c.stream.read_to_end(&mut rest).unwrap_or(0), 0, "closed");
    assert!(srv.is_running());
    assert!(s.list("remote.yaml").is_empty());
}
