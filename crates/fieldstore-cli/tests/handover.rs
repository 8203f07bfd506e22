//! Fields handed over as sealed shared-memory files through a real `fieldstore server`'s Unix
//! socket (`--socket`, docs/protocol.md "Hand-over"): what arrives is what was archived, for
//! subscribers on the socket and over TCP and for retrieves; hostile hand-overs (unsealed files,
//! plain files, wrong lengths, frames without files, files without frames) are refused without
//! harming the server or its other clients.

mod common;
#[path = "common/server.rs"]
mod server;

use std::io::{Read, Write};
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use fieldstore::api::{Fdb, Start};
use fieldstore::model::request::parse_request;
use fieldstore::model::Key;
use fieldstore::remote::handover;
use fieldstore::remote::local_socket::LocalSocket;
use fieldstore::remote::protocol::{
    self as p, encode_archive_prefix, handover_tail, read_frame, write_frame, ErrorReply,
    FrameHeader, Hello, MsgType, Role,
};
use fieldstore::remote::RemoteError;
use server::Served;

const TOKEN: &str = "handover-test-token";
const ALL: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl";

struct Setup {
    dir: tempfile::TempDir,
    server: Served,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("memory.yaml"),
            "type: local\nengine: memory\nmemory: {capacity: 1000000000}\n",
        )
        .unwrap();
        let socket = dir.path().join("server.sock");
        std::fs::write(
            dir.path().join("local.yaml"),
            format!(
                "type: remote\nsocket: {}\ntoken: {TOKEN}\n",
                socket.display()
            ),
        )
        .unwrap();
        let mut c = common::fieldstore();
        c.arg("--config").arg(dir.path().join("memory.yaml")).args([
            "server",
            "--listen",
            "127.0.0.1:0",
            "--socket",
            socket.to_str().unwrap(),
            "--token",
            TOKEN,
            "--metrics",
            "127.0.0.1:0",
        ]);
        let server = server::start(c, dir.path(), TOKEN);
        Setup { dir, server }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The error of a second server started on `socket`, which must fail.
    fn server_refused(&self, socket: &Path, what: &str) -> String {
        let o = common::fieldstore()
            .arg("--config")
            .arg(self.path("memory.yaml"))
            .args(["server", "--socket", socket.to_str().unwrap()])
            .output()
            .unwrap();
        common::failed(what, &o)
    }

    fn open(&self, config: &str) -> Box<dyn Fdb> {
        let text = std::fs::read_to_string(self.path(config)).unwrap();
        let cfg = fieldstore::model::config::from_yaml_str(&text, config).unwrap();
        fieldstore::open(&cfg).unwrap()
    }
}

fn key(param: &str) -> Key {
    Key::parse(&format!("{ALL},levelist=500,param={param},step=0")).unwrap()
}

fn bytes(n: usize, seed: u8) -> Vec<u8> {
    let mut v: Vec<u8> = (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect();
    v[..4].copy_from_slice(b"GRIB");
    v
}

/// Fields on both sides of the hand-over threshold.
fn fields() -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("130", bytes((1 << 20) + 3, 1)),
        ("131", bytes(300_000, 2)),
        ("132", bytes(1000, 3)),
        ("133", bytes(5 << 20, 4)),
    ]
}

const HANDED_OVER: u64 = 3;

fn collect(sub: &mut dyn fieldstore::api::Subscription, n: usize) -> Vec<(String, Vec<u8>)> {
    let mut got = Vec::new();
    while got.len() < n {
        let notice = sub
            .next_within(Duration::from_secs(20))
            .unwrap()
            .expect("a notice within 20 s");
        let param = notice.element.key.datum.get("param").unwrap().to_string();
        got.push((
            param,
            notice
                .data
                .expect("the field came with its notice")
                .to_vec(),
        ));
    }
    got.sort();
    got
}

#[test]
fn fields_handed_over_arrive_whole_for_every_reader() {
    let s = Setup::new();
    let local = s.open("local.yaml");
    let tcp = s.open("remote.yaml");
    let all = parse_request(ALL).unwrap();
    let mut on_socket = local.subscribe_with_data(&all, &Start::Now).unwrap();
    let mut on_tcp = tcp.subscribe_with_data(&all, &Start::Now).unwrap();
    let fields = fields();
    for (param, data) in &fields {
        local.archive_grib(&key(param), data).unwrap();
    }
    local.flush().unwrap();
    let mut want: Vec<(String, Vec<u8>)> = fields
        .iter()
        .map(|(p, d)| (p.to_string(), d.clone()))
        .collect();
    want.sort();
    assert!(
        collect(on_socket.as_mut(), 4) == want,
        "the socket's subscriber got other bytes"
    );
    assert!(
        collect(on_tcp.as_mut(), 4) == want,
        "the TCP subscriber got other bytes"
    );
    for (param, data) in &fields {
        for fdb in [&local, &tcp] {
            let req = parse_request(&format!("retrieve,{ALL},levelist=500,param={param},step=0"))
                .unwrap();
            let mut got = Vec::new();
            fdb.retrieve(&req).unwrap().read_to_end(&mut got).unwrap();
            assert!(&got == data, "retrieve of {param}: other bytes");
        }
    }
    // The CLI, through the socket.
    let out = s.path("out.grib");
    let o = common::fieldstore()
        .arg("--config")
        .arg(s.path("local.yaml"))
        .args([
            "read",
            &format!("retrieve,{ALL},levelist=500,param=133,step=0"),
            out.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    common::succeeded("read through the socket", &o);
    assert!(std::fs::read(&out).unwrap() == fields[3].1);
    assert_eq!(
        s.server.metric("fieldstore_fields_handed_over_in_total"),
        HANDED_OVER
    );
    assert_eq!(
        s.server.metric("fieldstore_fields_handed_over_out_total"),
        HANDED_OVER,
        "only the socket's subscriber takes files"
    );
}

/// A client speaking the protocol by hand on the Unix socket.
struct Raw {
    socket: LocalSocket,
    payload: Vec<u8>,
}

impl Raw {
    fn hello(path: &Path, handover: bool) -> Raw {
        let stream = UnixStream::connect(path).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        let mut c = Raw {
            socket: LocalSocket::new(stream),
            payload: Vec::new(),
        };
        let hello = p::to_json(&Hello {
            versions: vec![p::VERSION_MAX],
            token: Some(TOKEN.into()),
            role: Role::Archive,
            client: "hand-over test client".into(),
            handover,
        });
        let mut frame = Vec::new();
        write_frame(&mut frame, 1, MsgType::Hello, 1, &[&hello]).unwrap();
        c.send(&frame);
        let h = c.recv().unwrap();
        assert_eq!(h.kind, MsgType::Welcome);
        c
    }

    fn send(&self, frame: &[u8]) {
        let mut w: &UnixStream = self.socket.stream();
        w.write_all(frame).unwrap();
    }

    fn recv(&mut self) -> Result<FrameHeader, RemoteError> {
        let mut r = Reader(&self.socket);
        read_frame(&mut r, 1 << 32, &mut self.payload)
    }

    fn handover_frame(param: &str, length: u64) -> Vec<u8> {
        let prefix = encode_archive_prefix(Some(&key(param)), true);
        let tail = handover_tail(length, None);
        let mut frame = Vec::new();
        write_frame(
            &mut frame,
            p::VERSION_MAX,
            MsgType::ArchiveHandover,
            5,
            &[&prefix, &tail],
        )
        .unwrap();
        frame
    }

    fn hand_over(&self, param: &str, fd: &OwnedFd, length: u64) {
        self.socket
            .send_with_descriptor(&[&Self::handover_frame(param, length)], fd.as_fd())
            .unwrap();
    }

    fn flush(&mut self) -> Result<u64, ErrorReply> {
        let mut frame = Vec::new();
        write_frame(&mut frame, p::VERSION_MAX, MsgType::Flush, 9, &[]).unwrap();
        self.send(&frame);
        let h = self.recv().unwrap();
        match h.kind {
            MsgType::Reply => Ok(p::from_json("flush", &self.payload).unwrap()),
            MsgType::Error => Err(p::from_json("error", &self.payload).unwrap()),
            other => panic!("unexpected {other:?}"),
        }
    }
}

struct Reader<'a>(&'a LocalSocket);
impl Read for Reader<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let mut r: &UnixStream = self.0.stream();
        r.read(buf)
    }
}

fn unsealed_memfd(data: &[u8]) -> OwnedFd {
    // SAFETY: a NUL-terminated name; the result is checked.
    let raw = unsafe { libc::memfd_create(c"hostile".as_ptr(), libc::MFD_CLOEXEC) };
    assert!(raw >= 0);
    // SAFETY: just created, owned here.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let f = std::fs::File::from(fd);
    f.write_all_at(data, 0).unwrap();
    OwnedFd::from(f)
}

#[test]
fn hostile_hand_overs_are_refused_and_others_are_served() {
    let s = Setup::new();
    let path = s.path("server.sock");
    let data = bytes(400_000, 9);

    // Files the sender could still change or resize: the batch fails, naming why.
    let mut c = Raw::hello(&path, true);
    c.hand_over("130", &unsealed_memfd(&data), data.len() as u64);
    let e = c.flush().expect_err("an unsealed file");
    assert!(
        e.message.contains("not sealed against writing"),
        "{}",
        e.message
    );
    let plain = tempfile::tempfile().unwrap();
    plain.write_all_at(&data, 0).unwrap();
    c.hand_over("130", &OwnedFd::from(plain), data.len() as u64);
    let e = c.flush().expect_err("a plain file");
    assert!(
        e.message.contains("not a sealed memory file"),
        "{}",
        e.message
    );
    // A length the file does not have (reading past it would fault the server).
    let sealed = handover::seal(&data).unwrap();
    c.hand_over("130", &sealed, data.len() as u64 + 4096);
    let e = c.flush().expect_err("a wrong length");
    assert!(e.message.contains("holds 400000 bytes"), "{}", e.message);
    // The same connection then hands over a good field.
    c.hand_over("131", &sealed, data.len() as u64);
    assert_eq!(c.flush().unwrap(), 1);

    // A connection that did not ask for hand-over may not use it.
    let mut c = Raw::hello(&path, false);
    c.hand_over("132", &sealed, data.len() as u64);
    let e = c.flush().expect_err("not agreed");
    assert!(
        e.message.contains("did not agree to hand-over"),
        "{}",
        e.message
    );

    // A frame without its file is a broken frame: the connection is closed.
    let mut c = Raw::hello(&path, true);
    c.send(&Raw::handover_frame("133", data.len() as u64));
    match c.recv() {
        Ok(h) => {
            assert_eq!(h.kind, MsgType::Error);
            let e: ErrorReply = p::from_json("error", &c.payload).unwrap();
            assert!(
                e.message.contains("without its memory file"),
                "{}",
                e.message
            );
        }
        Err(e) => panic!("expected an error frame, got {e}"),
    }

    // Files no frame claims: the connection is cut, the server keeps none of them.
    let c = Raw::hello(&path, true);
    for _ in 0..40 {
        if c.socket
            .send_with_descriptor(&[b"x"], sealed.as_fd())
            .is_err()
        {
            break;
        }
    }
    let mut buf = [0u8; 64];
    let mut r = Reader(&c.socket);
    let mut closed = false;
    for _ in 0..10 {
        match r.read(&mut buf) {
            Ok(0) | Err(_) => {
                closed = true;
                break;
            }
            Ok(_) => {}
        }
    }
    assert!(
        closed,
        "the server kept a connection sending unclaimed files"
    );

    // Through all of it, the server serves others, and only the good field is stored.
    let local = s.open("local.yaml");
    local.archive_grib(&key("134"), &data).unwrap();
    local.flush().unwrap();
    let listed = local
        .list(
            &parse_request(ALL).unwrap(),
            fieldstore::api::ListOptions::default(),
        )
        .unwrap()
        .count();
    assert_eq!(listed, 2, "the good hand-over and the client's field");
    assert_eq!(s.server.metric("fieldstore_fields_handed_over_in_total"), 2);
}

#[test]
fn a_stale_socket_file_is_replaced_and_a_live_one_is_not() {
    let s = Setup::new();
    let path = s.path("server.sock");
    // A second server on the same socket is refused while the first answers there.
    let err = s.server_refused(&path, "a second server on a live socket");
    assert!(err.contains("a server is already listening there"), "{err}");
    assert!(
        err.contains(&format!("cannot listen on unix:{}", path.display())),
        "{err}"
    );
    assert!(
        !err.contains("cannot connect"),
        "a server that cannot listen connects nowhere: {err}"
    );
    // A path that is not a socket is left alone.
    let plain = s.path("plain-file");
    std::fs::write(&plain, b"keep me").unwrap();
    let err = s.server_refused(&plain, "a server on a plain file");
    assert!(err.contains("the path exists and is not a socket"), "{err}");
    assert_eq!(std::fs::read(&plain).unwrap(), b"keep me");
    // A socket file left behind by a server killed with -9 is replaced.
    let mut s = s;
    s.server.child.kill().unwrap();
    s.server.child.wait().unwrap();
    assert!(path.exists(), "kill -9 leaves the socket file");
    let mut c = common::fieldstore();
    c.arg("--config").arg(s.path("memory.yaml")).args([
        "server",
        "--listen",
        "127.0.0.1:0",
        "--socket",
        path.to_str().unwrap(),
        "--token",
        TOKEN,
    ]);
    let _again = server::start(c, s.dir.path(), TOKEN);
    let local = s.open("local.yaml");
    local.archive_grib(&key("130"), &bytes(300_000, 5)).unwrap();
    local.flush().unwrap();
}
