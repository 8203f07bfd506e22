//! `fieldstore server` and the remote frontend with real server processes on loopback: results
//! byte-identical to local access, every operation, authentication, hostile and vanishing
//! clients, 200 concurrent clients, kill -9, SIGTERM, and a slow reader's effect on memory.

mod common;
#[path = "common/server.rs"]
mod server;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use fieldstore::api::{Fdb, ListOptions};
use fieldstore::model::request::parse_request;
use fieldstore::remote::protocol::{
    self as p, decode_archive, encode_archive_prefix, read_frame, write_frame, ErrorReply,
    FrameHeader, Hello, MsgType, Query, Role, StreamEnd,
};
use fieldstore::remote::{RemoteError, RemoteFdb};
use server::Served as Server;

const TOKEN: &str = "s3cret-token";
const ALL: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl";

/// A store directory with a local config the server serves, and a client config pointing at it.
struct Store {
    dir: tempfile::TempDir,
}

impl Server {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Resident memory of the server process, from /proc.
    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap();
        let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
        line.split_whitespace().nth(1).unwrap().parse().unwrap()
    }
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

    fn run(&self, config: &str, args: &[&str]) -> Output {
        self.command(config, args).output().unwrap()
    }

    fn ok(&self, config: &str, args: &[&str]) -> String {
        let o = self.run(config, args);
        assert!(
            o.status.success(),
            "{config} {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }

    fn fails(&self, config: &str, args: &[&str]) -> String {
        let o = self.run(config, args);
        assert!(!o.status.success(), "{config} {args:?} should fail");
        String::from_utf8_lossy(&o.stderr).into_owned()
    }

    /// Starts a server on a free port (or `port`), and writes `remote.yaml` pointing at it.
    fn serve_on(&self, port: u16, extra: &[&str]) -> Server {
        let listen = format!("127.0.0.1:{port}");
        let mut args = vec![
            "server",
            "--listen",
            &listen,
            "--token",
            TOKEN,
            "--metrics",
            "127.0.0.1:0",
        ];
        args.extend_from_slice(extra);
        server::start(self.command("local.yaml", &args), self.dir.path(), TOKEN)
    }

    fn serve(&self, extra: &[&str]) -> Server {
        self.serve_on(0, extra)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.path("server.log")).unwrap_or_default()
    }

    /// Sample GRIB: params t/u on levels 1000/500 for each step (4 fields per step).
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

    fn list(&self, config: &str, extra: &[&str]) -> Vec<String> {
        let mut args = vec!["list", "class=od,expver=0001", "--porcelain"];
        args.extend_from_slice(extra);
        let mut v: Vec<String> = self.ok(config, &args).lines().map(str::to_string).collect();
        v.sort();
        v
    }

    fn read(&self, config: &str, request: &str, out: &str) -> Vec<u8> {
        let path = self.path(out);
        self.ok(config, &["read", request, path.to_str().unwrap()]);
        std::fs::read(path).unwrap()
    }
}

fn all_fields(steps: &str) -> String {
    format!("{ALL},param=t/u,levelist=1000/500,step={steps}")
}

fn messages(path: &Path) -> Vec<Vec<u8>> {
    fieldstore::grib::MessageReader::new(std::fs::File::open(path).unwrap(), "test")
        .map(|m| m.unwrap().bytes)
        .collect()
}

/// A client speaking the protocol by hand, to misbehave in ways the real client never does.
struct RawClient {
    stream: TcpStream,
    payload: Vec<u8>,
}

impl RawClient {
    fn connect(port: u16) -> RawClient {
        let stream = TcpStream::connect(("127.0.0.1", port)).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        RawClient {
            stream,
            payload: Vec::new(),
        }
    }

    fn hello(port: u16, role: Role) -> RawClient {
        let mut c = RawClient::connect(port);
        let hello = p::to_json(&Hello {
            versions: vec![p::VERSION_MAX],
            token: Some(TOKEN.into()),
            role,
            client: "raw test client".into(),
            handover: false,
        });
        c.send(MsgType::Hello, 1, &[&hello]);
        let h = c.recv().unwrap();
        assert_eq!(h.kind, MsgType::Welcome);
        c
    }

    fn send(&mut self, kind: MsgType, id: u64, parts: &[&[u8]]) {
        write_frame(&mut self.stream, 1, kind, id, parts).unwrap();
    }

    fn recv(&mut self) -> Result<FrameHeader, RemoteError> {
        read_frame(&mut self.stream, 1 << 32, &mut self.payload)
    }

    fn error(&self) -> ErrorReply {
        p::from_json("error", &self.payload).unwrap()
    }

    /// Expects an error frame, then the server closing the connection.
    fn expect_error_and_close(&mut self, contains: &str) {
        let h = self.recv().unwrap();
        assert_eq!(h.kind, MsgType::Error);
        let e = self.error();
        assert!(e.message.contains(contains), "{e:?} lacks {contains}");
        let mut rest = Vec::new();
        assert_eq!(self.stream.read_to_end(&mut rest).unwrap_or(0), 0, "closed");
    }

    fn query(&mut self, kind: MsgType, id: u64, request: &str) {
        let q = p::to_json(&Query::new(&parse_request(request).unwrap()));
        self.send(kind, id, &[&q]);
    }
}

#[test]
fn remote_archive_list_and_read_are_byte_identical_to_local() {
    let s = Store::new();
    let _server = s.serve(&[]);
    let grib = s.sample("a.grib", "0/6/12", 500);
    s.ok("remote.yaml", &["write", grib.to_str().unwrap()]);

    let remote = s.list("remote.yaml", &[]);
    assert_eq!(remote.len(), 12);
    assert_eq!(remote, s.list("local.yaml", &[]));
    assert_eq!(
        s.list("remote.yaml", &["--location", "--full"]),
        s.list("local.yaml", &["--location", "--full"])
    );
    let r = s.read("remote.yaml", &all_fields("0/6/12"), "r.grib");
    let l = s.read("local.yaml", &all_fields("0/6/12"), "l.grib");
    assert_eq!(
        r, l,
        "remote read differs from local read of the server's store"
    );
    let mut want = messages(&grib);
    let mut got = messages(&s.path("r.grib"));
    want.sort();
    got.sort();
    assert_eq!(got, want, "every archived field reads back byte for byte");
}

/// Large fields (checksummed on a second thread as they go out) and small ones, from a mapped
/// file and from stdin, mixed in one file: every byte arrives.
#[test]
fn large_and_small_fields_from_files_and_stdin_arrive_intact() {
    let s = Store::new();
    let _server = s.serve(&[]);
    let large = s.sample("large.grib", "0/6", 300_000);
    let small = s.sample("small.grib", "12", 100);
    let piped = s.sample("piped.grib", "18", 200_000);
    let sizes: Vec<usize> = messages(&large).iter().map(Vec::len).collect();
    assert!(sizes.iter().all(|&n| n > 256 << 10), "{sizes:?}");
    // large, small, large in one file.
    let mut mixed = std::fs::read(&large).unwrap();
    let cut: usize = sizes[..4].iter().sum();
    let tail = mixed.split_off(cut);
    mixed.extend(std::fs::read(&small).unwrap());
    mixed.extend(tail);
    std::fs::write(s.path("mixed.grib"), &mixed).unwrap();
    s.ok(
        "remote.yaml",
        &["write", s.path("mixed.grib").to_str().unwrap()],
    );
    let mut child = s
        .command("remote.yaml", &["write", "-"])
        .stdin(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(&std::fs::read(&piped).unwrap())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    s.read("remote.yaml", &all_fields("0/6/12/18"), "r.grib");
    let mut want = messages(&s.path("mixed.grib"));
    want.extend(messages(&piped));
    let mut got = messages(&s.path("r.grib"));
    want.sort();
    got.sort();
    assert_eq!(got.len(), 16);
    assert_eq!(got, want, "every field reads back byte for byte");
}

#[test]
fn every_operation_works_remotely() {
    let s = Store::new();
    let server = s.serve(&[]);
    let grib = s.sample("a.grib", "0/6", 100);
    s.ok("remote.yaml", &["write", grib.to_str().unwrap()]);
    let db = "class=od,expver=0001,stream=oper,date=20261122,time=1200";

    for args in [
        vec!["axes", "class=od", "--json"],
        vec!["where", "class=od"],
        vec!["stats", db],
        vec!["dump", db],
        vec!["list", "class=od", "--depth", "1"],
        vec!["list", "class=od", "--depth", "2", "--json"],
        vec!["control", "status", db],
        vec!["purge", db],
        vec!["wipe", db],
    ] {
        assert_eq!(
            s.ok("remote.yaml", &args),
            s.ok("local.yaml", &args),
            "{args:?}"
        );
    }
    // A request that matches nothing is explained by the server's store.
    let e = s.fails(
        "remote.yaml",
        &["read", &format!("{ALL},param=t,levelist=850,step=0"), "-"],
    );
    assert!(
        e.contains("levelist=850 matched nothing; present: 500/1000"),
        "{e}"
    );

    // control: a lock set remotely is seen locally, and lifted remotely.
    s.ok("remote.yaml", &["control", "lock", db, "--retrieve"]);
    let e = s.fails("local.yaml", &["read", &all_fields("0"), "-"]);
    assert!(e.contains("retrieve is locked"), "{e}");
    let e = s.fails("remote.yaml", &["read", &all_fields("0"), "-"]);
    assert!(
        e.contains("retrieve is locked") && e.contains(&server.port.to_string()),
        "{e}"
    );
    s.ok("remote.yaml", &["control", "unlock", db, "--retrieve"]);

    // Masking, purge and compact through the server.
    s.ok("remote.yaml", &["write", grib.to_str().unwrap()]);
    assert_eq!(s.list("remote.yaml", &["--full"]).len(), 16);
    let out = s.ok("remote.yaml", &["purge", db, "--doit"]);
    assert!(
        out.contains("8 masked fields; removed 1 index files and 1 data files"),
        "{out}"
    );
    assert_eq!(s.list("remote.yaml", &["--full"]).len(), 8);
    s.ok("remote.yaml", &["write", grib.to_str().unwrap()]);
    let out = s.ok("remote.yaml", &["compact", db]);
    assert!(
        out.contains("merged 2 indexes into 1 (16 entries)"),
        "{out}"
    );
    assert_eq!(s.list("local.yaml", &["--full"]).len(), 16);
    assert_eq!(
        s.read("remote.yaml", &all_fields("0/6"), "r.grib"),
        s.read("local.yaml", &all_fields("0/6"), "l.grib")
    );

    // wipe: dry run changes nothing, --doit removes the database.
    s.ok("remote.yaml", &["wipe", db]);
    assert_eq!(s.list("local.yaml", &[]).len(), 8);
    let out = s.ok("remote.yaml", &["wipe", db, "--doit"]);
    assert!(out.contains("wiped database"), "{out}");
    assert!(s.list("local.yaml", &[]).is_empty());
    let e = s.fails("remote.yaml", &["wipe", db]);
    assert!(e.contains("no database matches"), "{e}");

    // Every request was counted by operation.
    let m = |op: &str| server.metric(&format!("fieldstore_requests_total{{op=\"{op}\"}}"));
    assert_eq!(m("archive"), 24);
    assert_eq!(m("flush"), 3);
    assert_eq!(m("wipe"), 4);
    assert_eq!(m("control"), 3);
    assert_eq!(m("compact"), 1);
    assert_eq!(
        server.metric("fieldstore_request_errors_total{op=\"retrieve\"}"),
        1
    );
    assert!(
        server.metric("fieldstore_bytes_received_total")
            > std::fs::metadata(&grib).unwrap().len() * 2
    );
}

/// Regression (issue 18): a non-ASCII `param` reached ecCodes' name lookup, which crashed with
/// SIGSEGV: one remote `list param=é` killed the server and every client with it. Every crash
/// found by fuzzing that a request can reach has a line here.
#[test]
fn a_request_eccodes_would_crash_on_is_an_error_and_the_server_serves_on() {
    let s = Store::new();
    let server = s.serve(&[]);
    let grib = s.sample("a.grib", "0", 100);
    s.ok("remote.yaml", &["write", grib.to_str().unwrap()]);
    for bad in [
        "class=od,param=é",
        "class=od,param=t\u{301}",
        "class=od,param=ü/t",
        // GRIB1 table notation beyond one byte overflowed the paramId arithmetic (a panic).
        "class=od,param=1.9223372036854775807",
        "class=od,param=9223372036854775807.1/t",
    ] {
        let e = s.fails("remote.yaml", &["list", bad]);
        assert!(e.contains("unknown parameter name"), "{bad}: {e}");
    }
    // A damaged GRIB 1 message sent without its key, so the server reads the keys itself:
    // ecCodes failed an assertion on it and aborted the server (found by the torture run).
    let found = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/torture/found/sigabrt-g1forecastmonth.grib");
    let damaged = std::fs::read(found).unwrap();
    let mut w = RawClient::hello(server.port, Role::Archive);
    w.send(
        MsgType::Archive,
        2,
        &[&encode_archive_prefix(None, false), &damaged],
    );
    w.send(MsgType::Flush, 3, &[]);
    let h = w.recv().unwrap();
    assert_eq!(h.kind, MsgType::Error);
    let e = w.error().message;
    assert!(e.contains("inconsistent"), "{e}");
    // Still serving, the same store, on the same process.
    assert_eq!(s.list("remote.yaml", &[]).len(), 4);
    assert!(server.metric("fieldstore_connections_total") >= 4);
}

#[test]
fn clients_without_the_right_token_are_refused() {
    let s = Store::new();
    let server = s.serve(&[]);
    let grib = s.sample("a.grib", "0", 100);
    let port = server.port;
    std::fs::write(
        s.path("wrong.yaml"),
        format!("type: remote\nhost: 127.0.0.1\nport: {port}\ntoken: guess\n"),
    )
    .unwrap();
    std::fs::write(
        s.path("none.yaml"),
        format!("type: remote\nhost: 127.0.0.1\nport: {port}\n"),
    )
    .unwrap();
    let e = s.fails("wrong.yaml", &["write", grib.to_str().unwrap()]);
    assert!(
        e.contains(&format!(
            "server 127.0.0.1:{port} refused the connection: wrong token"
        )),
        "{e}"
    );
    let e = s.fails("none.yaml", &["list", "class=od"]);
    assert!(
        e.contains("requires a token and the client sent none"),
        "{e}"
    );
    assert!(s.list("local.yaml", &[]).is_empty());
    assert_eq!(server.metric("fieldstore_connections_refused_total"), 2);
    // The token can come from the environment instead of the config.
    let o = s
        .command("none.yaml", &["write", grib.to_str().unwrap()])
        .env("FIELDSTORE_TOKEN", TOKEN)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(s.list("local.yaml", &[]).len(), 4);
}

#[test]
fn malformed_frames_close_only_their_connection() {
    let s = Store::new();
    let server = s.serve(&[]);
    let grib = s.sample("a.grib", "0", 100);
    s.ok("remote.yaml", &["write", grib.to_str().unwrap()]);
    let rss_before = server.rss_kib();

    // Not our protocol at all.
    let mut c = RawClient::connect(server.port);
    c.stream
        .write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    c.expect_error_and_close("magic");

    // A hello announcing 2^60 bytes: refused from the header alone.
    let mut c = RawClient::connect(server.port);
    let mut header = Vec::new();
    write_frame(&mut header, 1, MsgType::Hello, 1, &[]).unwrap();
    header[16..24].copy_from_slice(&(1u64 << 60).to_be_bytes());
    c.stream.write_all(&header[..p::HEADER_LEN]).unwrap();
    c.expect_error_and_close("1152921504606846976 payload bytes");

    // After authenticating, 2^60 is still far above the frame limit.
    let mut c = RawClient::hello(server.port, Role::Control);
    header[6..8].copy_from_slice(&(MsgType::List as u16).to_be_bytes());
    c.stream.write_all(&header[..p::HEADER_LEN]).unwrap();
    c.expect_error_and_close("more than the limit");

    // A corrupted checksum, and a missing end marker.
    for (at, want) in [(p::HEADER_LEN, "checksum"), (usize::MAX, "end marker")] {
        let mut c = RawClient::hello(server.port, Role::Control);
        let mut f = Vec::new();
        let q = p::to_json(&Query::new(&parse_request("class=od").unwrap()));
        write_frame(&mut f, 1, MsgType::Axes, 2, &[&q]).unwrap();
        let at = if at == usize::MAX { f.len() - 1 } else { at };
        f[at] ^= 0x20;
        c.stream.write_all(&f).unwrap();
        c.expect_error_and_close(want);
    }

    // An unknown message type and a wrong protocol version.
    let mut c = RawClient::hello(server.port, Role::Control);
    let mut f = Vec::new();
    write_frame(&mut f, 1, MsgType::Axes, 2, &[]).unwrap();
    f[6..8].copy_from_slice(&999u16.to_be_bytes());
    c.stream.write_all(&f).unwrap();
    c.expect_error_and_close("unknown message type 999");
    let mut c = RawClient::connect(server.port);
    let hello = p::to_json(&Hello {
        versions: vec![7, 8],
        token: Some(TOKEN.into()),
        role: Role::Control,
        client: "future".into(),
        handover: false,
    });
    c.send(MsgType::Hello, 1, &[&hello]);
    c.expect_error_and_close("versions [7, 8]");

    // A bad request inside a good frame is an error reply; the connection lives on.
    let mut c = RawClient::hello(server.port, Role::Control);
    c.send(MsgType::Axes, 2, &[b"{not json"]);
    assert_eq!(c.recv().unwrap().kind, MsgType::Error);
    assert!(
        c.error().message.contains("malformed request payload"),
        "{:?}",
        c.error()
    );
    c.query(MsgType::Where, 3, "class=od");
    let h = c.recv().unwrap();
    assert_eq!((h.kind, h.request), (MsgType::Reply, 3));

    // Half a header, then nothing: the others are served meanwhile.
    let mut half = RawClient::connect(server.port);
    half.stream.write_all(&header[..10]).unwrap();
    let silent = RawClient::connect(server.port);
    assert_eq!(s.list("remote.yaml", &[]).len(), 4);
    drop((half, silent));

    assert_eq!(server.metric("fieldstore_frame_errors_total"), 6);
    assert_eq!(s.list("remote.yaml", &[]), s.list("local.yaml", &[]));
    let grown = server.rss_kib().saturating_sub(rss_before);
    assert!(grown < 64 << 10, "server memory grew by {grown} KiB");
}

#[test]
fn vanished_clients_leave_nothing_half_visible() {
    let s = Store::new();
    let server = s.serve(&["--chunk-size", "4096"]);
    let kept = s.sample("kept.grib", "0/6", 2000);
    let lost = s.sample("lost.grib", "12/18", 2000);

    // A writer that archives fields, then half of another frame, and vanishes without flushing.
    let mut w = RawClient::hello(server.port, Role::Archive);
    let fields = messages(&lost);
    for (i, f) in fields.iter().enumerate() {
        let prefix = encode_archive_prefix(None, false);
        assert_eq!(
            decode_archive(&[&prefix[..], f].concat()).unwrap().2,
            &f[..]
        );
        w.send(MsgType::Archive, i as u64 + 2, &[&prefix, f]);
    }
    let mut partial = Vec::new();
    write_frame(
        &mut partial,
        1,
        MsgType::Archive,
        99,
        &[&encode_archive_prefix(None, false), &fields[0]],
    )
    .unwrap();
    w.stream.write_all(&partial[..partial.len() / 2]).unwrap();

    // Meanwhile another client writes and flushes.
    s.ok("remote.yaml", &["write", kept.to_str().unwrap()]);
    drop(w);

    // A reader that takes one chunk of a retrieve and vanishes.
    let mut r = RawClient::hello(server.port, Role::Control);
    r.query(MsgType::Retrieve, 2, &all_fields("0/6"));
    // The fields are announced first (version 3), then the data.
    let mut first = r.recv().unwrap().kind;
    while first == MsgType::Fields {
        first = r.recv().unwrap().kind;
    }
    assert_eq!(first, MsgType::Data);
    assert_eq!(r.payload.len(), 4096);
    drop(r);

    wait_for("the vanished writer to be noticed", || {
        server.metric("fieldstore_discarded_fields_total") >= fields.len() as u64
    });
    assert_eq!(
        server.metric("fieldstore_discarded_fields_total"),
        fields.len() as u64
    );
    let listed = s.list("local.yaml", &[]);
    assert_eq!(
        listed.len(),
        8,
        "only the flushed client's fields: {listed:?}"
    );
    assert!(listed
        .iter()
        .all(|l| l.contains("step=0,") || l.contains("step=6,")));
    let mut got = messages(&{
        s.read("remote.yaml", &all_fields("0/6"), "r.grib");
        s.path("r.grib")
    });
    let mut want = messages(&kept);
    got.sort();
    want.sort();
    assert_eq!(got, want);
    wait_for("every connection to close", || {
        server.metric("fieldstore_connections_open") == 0
    });
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn two_hundred_concurrent_clients() {
    const CLIENTS: usize = 200;
    let s = Store::new();
    let server = s.serve(&[]);
    let steps: Vec<String> = (0..CLIENTS / 4).map(|i| i.to_string()).collect();
    let grib = s.sample("a.grib", &steps.join("/"), 100);
    let fields = Arc::new(messages(&grib));
    assert_eq!(fields.len(), CLIENTS);
    let connected = Arc::new(Barrier::new(CLIENTS + 1));
    let go = Arc::new(Barrier::new(CLIENTS + 1));
    let port = server.port;
    let threads: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (fields, connected, go) = (fields.clone(), connected.clone(), go.clone());
            std::thread::spawn(move || {
                let fdb = RemoteFdb::new("127.0.0.1", port, Some(TOKEN.into()));
                let all = parse_request("class=od,expver=0001").unwrap();
                let before = fdb.list(&all, ListOptions::default()).map(|l| l.count());
                connected.wait();
                go.wait();
                let before = before.map_err(|e| e.to_string())?;
                assert!(before <= CLIENTS);
                // Each client archives its own field, flushes, and reads it back.
                fdb.archive(None, &fields[i]).map_err(|e| e.to_string())?;
                fdb.flush().map_err(|e| e.to_string())?;
                let key = fieldstore::grib::mars_keys(&fields[i]).unwrap();
                let req: String = ["step", "param", "levelist"]
                    .iter()
                    .map(|k| format!(",{k}={}", key.get(k).unwrap()))
                    .collect();
                let req = parse_request(&format!("{ALL}{req}")).unwrap();
                let mut back = Vec::new();
                fdb.retrieve(&req)
                    .map_err(|e| e.to_string())?
                    .read_to_end(&mut back)
                    .map_err(|e| e.to_string())?;
                assert_eq!(back, fields[i], "client {i} read back another field");
                Ok::<(), String>(())
            })
        })
        .collect();
    connected.wait();
    // All 200 are connected at once (each keeps its control connection for reuse).
    assert!(server.metric("fieldstore_connections_open") >= CLIENTS as u64);
    go.wait();
    for t in threads {
        t.join().unwrap().unwrap();
    }
    assert_eq!(s.list("local.yaml", &[]).len(), CLIENTS);
    assert_eq!(
        server.metric("fieldstore_requests_total{op=\"flush\"}"),
        CLIENTS as u64
    );
}

#[test]
fn server_killed_mid_archive_then_restarted() {
    let s = Store::new();
    let mut server = s.serve(&[]);
    let port = server.port;
    let flushed = s.sample("flushed.grib", "0", 500);
    let unflushed = s.sample("unflushed.grib", "6/12", 500);
    s.ok("remote.yaml", &["write", flushed.to_str().unwrap()]);

    let fdb = RemoteFdb::new("127.0.0.1", port, Some(TOKEN.into()));
    let all = parse_request("class=od,expver=0001").unwrap();
    assert_eq!(fdb.list(&all, ListOptions::default()).unwrap().count(), 4);
    for f in messages(&unflushed) {
        fdb.archive(None, &f).unwrap();
    }
    server.child.kill().unwrap();
    server.child.wait().unwrap();
    let e = fdb.flush().unwrap_err().to_string();
    assert!(
        e.contains(&format!(
            "connection to fieldstore server 127.0.0.1:{port} lost during flush"
        )) && e.contains("8 fields archived since the last flush may not have been stored"),
        "{e}"
    );
    let e = s.fails("remote.yaml", &["list", "class=od"]);
    assert!(
        e.contains(&format!(
            "cannot connect to fieldstore server 127.0.0.1:{port}"
        )),
        "{e}"
    );

    // Restarted on the same port: the same handle reconnects, and only flushed data is there.
    let _server = s.serve_on(port, &[]);
    let listed: Vec<_> = fdb
        .list(&all, ListOptions::default())
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(listed.len(), 4);
    assert!(listed.iter().all(|e| e.key.datum.get("step") == Some("0")));
    let mut back = Vec::new();
    fdb.retrieve(&parse_request(&all_fields("0")).unwrap())
        .unwrap()
        .read_to_end(&mut back)
        .unwrap();
    assert_eq!(back, s.read("local.yaml", &all_fields("0"), "l.grib"));
    // And archiving through it works again.
    fdb.archive(None, &messages(&unflushed)[0]).unwrap();
    fdb.flush().unwrap();
    assert_eq!(s.list("local.yaml", &[]).len(), 5);
}

#[test]
fn sigterm_finishes_the_flush_in_flight() {
    let s = Store::new();
    let mut server = s.serve(&[]);
    let grib = s.sample("a.grib", "0/6/12/18/24/30", 20000);
    let fields = messages(&grib);
    let mut w = RawClient::hello(server.port, Role::Archive);
    for (i, f) in fields.iter().enumerate() {
        w.send(
            MsgType::Archive,
            i as u64 + 2,
            &[&encode_archive_prefix(None, false), f],
        );
    }
    w.send(MsgType::Flush, 100, &[]);
    let status = Command::new("kill")
        .args(["-TERM", &server.pid().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let h = w.recv().unwrap();
    assert_eq!(
        (h.kind, h.request),
        (MsgType::Reply, 100),
        "{:?}",
        String::from_utf8_lossy(&w.payload)
    );
    let flushed: u64 = p::from_json("reply", &w.payload).unwrap();
    assert_eq!(flushed, fields.len() as u64);
    let deadline = Instant::now() + Duration::from_secs(10);
    let code = loop {
        if let Some(st) = server.child.try_wait().unwrap() {
            break st;
        }
        assert!(Instant::now() < deadline, "server did not stop");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(code.success(), "exit status {code:?}");
    assert!(s.log().contains("server stopped"));
    assert_eq!(s.list("local.yaml", &[]).len(), fields.len());
}

#[test]
fn a_slow_reader_does_not_grow_server_memory() {
    let s = Store::new();
    let chunk = 1usize << 20;
    let server = s.serve(&["--chunk-size", &chunk.to_string()]);
    // 40 fields of about 2 MiB: 80 MiB, far more than the bound checked below.
    let steps: Vec<String> = (0..10).map(|i| (i * 6).to_string()).collect();
    let steps = steps.join("/");
    let grib = s.sample("big.grib", &steps, 1_000_000);
    let total = std::fs::metadata(&grib).unwrap().len();
    assert!(total > 70 << 20, "{total}");
    s.ok("remote.yaml", &["write", grib.to_str().unwrap()]);
    // A first retrieve loads what every later one shares (ecCodes definitions for parameter names).
    s.read("remote.yaml", &all_fields("0"), "warm.grib");
    let baseline = server.rss_kib();

    let mut r = RawClient::hello(server.port, Role::Control);
    r.stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    r.query(MsgType::Retrieve, 2, &all_fields(&steps));
    // Read slowly for two seconds, watching the server's resident memory.
    let mut received = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    let mut peak = baseline;
    let started = Instant::now();
    while started.elapsed() < Duration::from_secs(2) {
        let n = r.stream.read(&mut buf).unwrap();
        received.extend_from_slice(&buf[..n]);
        peak = peak.max(server.rss_kib());
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        (received.len() as u64) < total / 4,
        "the reader was not slow"
    );
    // Others are served meanwhile.
    assert_eq!(s.list("remote.yaml", &[]).len(), 40);
    let grown = peak.saturating_sub(baseline);
    // Three chunks and one field in flight, plus slack; buffering the reply would be 80 MiB.
    assert!(
        grown < 24 << 10,
        "server memory grew by {grown} KiB while a client read slowly"
    );

    // What arrived so far is well-formed frames; then a full read matches a local read.
    let mut stream = &received[..];
    let mut data = Vec::new();
    let mut payload = Vec::new();
    let rest_is_missing = loop {
        match read_frame(&mut stream, 1 << 32, &mut payload) {
            Ok(h) if h.kind == MsgType::Fields => {}
            Ok(h) if h.kind == MsgType::Data => data.extend_from_slice(&payload),
            Ok(h) if h.kind == MsgType::End => break false,
            Ok(h) => panic!("unexpected {h:?}"),
            Err(_) => break true,
        }
    };
    assert!(
        rest_is_missing,
        "the slow phase cannot have received everything"
    );
    drop(r);
    let mut c = RawClient::hello(server.port, Role::Control);
    c.query(MsgType::Retrieve, 5, &all_fields(&steps));
    let mut all = Vec::new();
    loop {
        let h = c.recv().unwrap();
        match h.kind {
            MsgType::Fields => {}
            MsgType::Data => {
                assert!(c.payload.len() <= chunk);
                all.extend_from_slice(&c.payload);
            }
            MsgType::End => {
                let end: StreamEnd = p::from_json("end", &c.payload).unwrap();
                assert_eq!(end.bytes, all.len() as u64);
                break;
            }
            other => panic!("unexpected {other:?}: {:?}", c.error()),
        }
    }
    assert!(all.starts_with(&data));
    assert_eq!(all, s.read("local.yaml", &all_fields(&steps), "l.grib"));
}

#[test]
fn the_hammer_runs_unchanged_against_a_server() {
    let store = Store::new();
    let _server = store.serve(&[]);
    let shape = [
        "hammer",
        "--json",
        "--members",
        "2",
        "--steps",
        "3",
        "--levels",
        "4",
        "--params",
        "3",
        "--processes",
        "2",
    ];
    let w: serde_json::Value = serde_json::from_str(&store.ok("remote.yaml", &shape)).unwrap();
    assert!(w["store"]
        .as_str()
        .unwrap()
        .starts_with("remote 127.0.0.1:"));
    assert_eq!(w["errors"], 0);
    let mut read = shape.to_vec();
    read.extend(["--mode", "read", "--verify"]);
    let r: serde_json::Value = serde_json::from_str(&store.ok("remote.yaml", &read)).unwrap();
    assert_eq!(r["errors"], 0);
    assert_eq!(r["phases"][0]["fields"], 72);
    // The server's own store holds them.
    let listed = store.ok(
        "local.yaml",
        &["list", "class=od,expver=hmmr", "--porcelain"],
    );
    assert_eq!(listed.lines().count(), 72);
}

/// A CA, and a server certificate for `localhost` it signed; PEM files in the store directory.
/// Also a second, unrelated CA a client must not accept the server with.
fn make_certificates(store: &Store) {
    use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&server_key, &ca)
        .unwrap();
    std::fs::write(store.path("ca.pem"), ca.pem()).unwrap();
    std::fs::write(store.path("server.pem"), server.pem()).unwrap();
    std::fs::write(store.path("server.key"), server_key.serialize_pem()).unwrap();
    let mut other = CertificateParams::new(Vec::<String>::new()).unwrap();
    other.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let other = CertifiedIssuer::self_signed(other, KeyPair::generate().unwrap()).unwrap();
    std::fs::write(store.path("other-ca.pem"), other.pem()).unwrap();
}

#[test]
fn tls_serves_the_same_bytes_and_refuses_plain_and_untrusted_clients() {
    let store = Store::new();
    make_certificates(&store);
    let (cert, key) = (store.path("server.pem"), store.path("server.key"));
    let server = store.serve(&[
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let tls = |ca: &str, name: &str| {
        format!(
            "type: remote\nhost: 127.0.0.1\nport: {}\ntoken: {TOKEN}\ntls: {{ca: {}, server_name: {name}}}\n",
            server.port,
            store.path(ca).display()
        )
    };
    std::fs::write(store.path("tls.yaml"), tls("ca.pem", "localhost")).unwrap();
    let grib = store.sample("in.grib", "0/6/12", 5000);
    store.ok("tls.yaml", &["write", grib.to_str().unwrap()]);
    let req = store.path("all.req");
    std::fs::write(
        &req,
        format!("retrieve,{ALL},step=0/6/12,levelist=1000/500,param=130/131"),
    )
    .unwrap();
    let out = store.path("out.grib");
    store.ok(
        "tls.yaml",
        &["read", req.to_str().unwrap(), out.to_str().unwrap()],
    );
    let local = store.path("local.grib");
    store.ok(
        "local.yaml",
        &["read", req.to_str().unwrap(), local.to_str().unwrap()],
    );
    let got = std::fs::read(&out).unwrap();
    assert_eq!(got.len(), std::fs::read(&grib).unwrap().len());
    assert_eq!(got, std::fs::read(&local).unwrap());
    let listed = store.ok("tls.yaml", &["list", ALL, "--porcelain"]);
    assert_eq!(listed.lines().count(), 12);
    // The hammer, with several processes and verification, through TLS.
    let h = store.ok(
        "tls.yaml",
        &["hammer", "--steps", "3", "--processes", "2", "--json"],
    );
    assert!(h.contains("\"errors\": 0"), "{h}");
    let h = store.ok(
        "tls.yaml",
        &[
            "hammer", "--steps", "3", "--mode", "read", "--verify", "--json",
        ],
    );
    assert!(h.contains("\"errors\": 0"), "{h}");

    // A plain client gets no service from a TLS server.
    let o = store.run("remote.yaml", &["list", ALL]);
    assert!(!o.status.success());
    // A client that does not trust the server's CA, or expects another name, refuses it.
    std::fs::write(
        store.path("wrong-ca.yaml"),
        tls("other-ca.pem", "localhost"),
    )
    .unwrap();
    let e = store.fails("wrong-ca.yaml", &["list", ALL]);
    assert!(e.contains("certificate"), "{e}");
    std::fs::write(store.path("wrong-name.yaml"), tls("ca.pem", "store9")).unwrap();
    let e = store.fails("wrong-name.yaml", &["list", ALL]);
    assert!(e.contains("certificate"), "{e}");
    // A missing CA file is a config error naming it.
    std::fs::write(store.path("no-ca.yaml"), tls("nope.pem", "localhost")).unwrap();
    let e = store.fails("no-ca.yaml", &["list", ALL]);
    assert!(e.contains("nope.pem"), "{e}");
}
