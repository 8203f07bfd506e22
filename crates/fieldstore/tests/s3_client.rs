//! The S3 client against a real MinIO: every method, pagination, conflicts, a lost answer and a
//! server without conditional create (through a fault-injecting TCP proxy in front of MinIO),
//! refused credentials, a dead endpoint, and TLS with a private CA.

#[path = "support/minio.rs"]
mod minio;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fieldstore::error_kind::ErrorKind;
use fieldstore::model::config::S3Config;
use fieldstore::storage::s3::{Created, S3Client};
use fieldstore::storage::StorageError;

fn config(server: &minio::Minio, endpoint: &str, bucket: &str) -> S3Config {
    let mut cfg = S3Config::new(endpoint, bucket);
    cfg.access_key_id = Some(server.access_key.clone());
    cfg.secret_access_key = Some(server.secret_key.clone());
    cfg.prefix = Some("pre/".into());
    cfg
}

fn client(server: &minio::Minio, test: &str) -> S3Client {
    S3Client::connect(&config(
        server,
        &server.endpoint,
        &minio::fresh_bucket(test),
    ))
    .unwrap()
}

#[test]
fn every_method_round_trips() {
    let Some(server) = minio::Minio::shared("every_method_round_trips") else {
        return;
    };
    let c = client(server, "methods");
    assert!(
        c.describe().starts_with("s3://methods-")
            && c.describe()
                .ends_with(&format!("/pre/ at {}", server.endpoint))
    );
    assert!(c.uri("a/b").ends_with("/pre/a/b"));

    c.put("dir/one", b"hello world").unwrap();
    assert_eq!(
        c.get("dir/one").unwrap().as_deref(),
        Some(&b"hello world"[..])
    );
    assert_eq!(c.get("dir/none").unwrap(), None);
    let meta = c.head("dir/one").unwrap().unwrap();
    assert_eq!((meta.key.as_str(), meta.size), ("dir/one", 11));
    let age = std::time::SystemTime::now()
        .duration_since(meta.last_modified)
        .unwrap_or_default();
    assert!(
        age < Duration::from_secs(60),
        "last_modified {:?}",
        meta.last_modified
    );
    assert_eq!(c.head("dir/none").unwrap(), None);

    let mut buf = [0u8; 5];
    assert_eq!(c.get_range("dir/one", 6, &mut buf).unwrap(), 5);
    assert_eq!(&buf, b"world");
    assert_eq!(
        c.get_range("dir/one", 9, &mut buf).unwrap(),
        2,
        "short only at the end"
    );
    assert_eq!(&buf[..2], b"ld");
    assert_eq!(
        c.get_range("dir/one", 11, &mut buf).unwrap(),
        0,
        "past the end"
    );

    // Keys with any characters round-trip through put, get, list and delete.
    let odd = [
        "odd/a:b=c,d",
        "odd/per%cent",
        "odd/with space",
        "odd/plus+sign",
        "odd/ünï©ødé/ключ",
        "odd/amp&q?h#x",
        "odd/tilde~star*",
    ];
    for k in odd {
        c.put(k, k.as_bytes()).unwrap();
        assert_eq!(c.get(k).unwrap().as_deref(), Some(k.as_bytes()), "{k}");
    }
    let mut listed: Vec<String> = c.list("odd/").map(|m| m.unwrap().key).collect();
    let mut wanted: Vec<String> = odd.iter().map(|s| s.to_string()).collect();
    wanted.sort();
    assert_eq!(listed, wanted, "ascending key order");
    let after: Vec<String> = c
        .list_after("odd/", &wanted[2])
        .map(|m| m.unwrap().key)
        .collect();
    assert_eq!(after, wanted[3..].to_vec());

    c.put("dir/sub1/x", b"1").unwrap();
    c.put("dir/sub2/y", b"2").unwrap();
    assert_eq!(c.list_dirs("dir/").unwrap(), vec!["dir/sub1/", "dir/sub2/"]);
    assert_eq!(c.list_dirs("").unwrap(), vec!["dir/", "odd/"]);

    c.delete("dir/one").unwrap();
    c.delete("dir/one").unwrap();
    assert_eq!(c.get("dir/one").unwrap(), None);
    listed.push("never/was".into());
    c.delete_many(&listed).unwrap();
    assert_eq!(c.list("odd/").count(), 0);

    let s = c.stats();
    assert!(
        s.requests > 20 && s.bytes_up > 0 && s.bytes_down > 0,
        "{s:?}"
    );
    assert_eq!((s.retries, s.conflicts, s.self_conflicts), (0, 0, 0));
}

#[test]
fn create_is_create_only() {
    let Some(server) = minio::Minio::shared("create_is_create_only") else {
        return;
    };
    let c = client(server, "create");
    assert_eq!(c.create("k", b"mine #1").unwrap(), Created::New);
    assert_eq!(
        c.create("k", b"theirs #2").unwrap(),
        Created::Existed(b"mine #1".to_vec())
    );
    // The same bytes again are taken for our own earlier attempt.
    assert_eq!(c.create("k", b"mine #1").unwrap(), Created::New);
    let s = c.stats();
    assert_eq!((s.conflicts, s.self_conflicts), (1, 1));
    assert_eq!(c.get("k").unwrap().as_deref(), Some(&b"mine #1"[..]));
}

#[test]
fn listing_paginates_past_1000_keys() {
    let Some(server) = minio::Minio::shared("listing_paginates_past_1000_keys") else {
        return;
    };
    let c = client(server, "pages");
    let keys: Vec<String> = (0..2500).map(|i| format!("many/{i:05}")).collect();
    std::thread::scope(|s| {
        for chunk in keys.chunks(313) {
            let c = c.clone();
            s.spawn(move || {
                for k in chunk {
                    c.put(k, k.as_bytes()).unwrap();
                }
            });
        }
    });
    c.put("other", b"x").unwrap();
    let before = c.stats().requests;
    let listed: Vec<String> = c.list("many/").map(|m| m.unwrap().key).collect();
    assert_eq!(listed, keys);
    assert_eq!(
        c.stats().requests - before,
        3,
        "three pages of at most 1000"
    );
    let after: Vec<String> = c
        .list_after("many/", "many/01499")
        .map(|m| m.unwrap().key)
        .collect();
    assert_eq!(after, keys[1500..].to_vec());
    // Lazily: taking five costs one page.
    let before = c.stats().requests;
    assert_eq!(c.list("many/").take(5).count(), 5);
    assert_eq!(c.stats().requests - before, 1);
    c.delete_many(&keys).unwrap();
    assert_eq!(c.list("many/").count(), 0);
    // "other", and the probe's answer for other processes.
    let left: Vec<String> = c.list("").map(|m| m.unwrap().key).collect();
    assert_eq!(
        left,
        [fieldstore::storage::s3::client::PROBED_MARKER, "other"]
    );
}

#[test]
fn multipart_and_stale_uploads() {
    let Some(server) = minio::Minio::shared("multipart_and_stale_uploads") else {
        return;
    };
    let c = client(server, "multipart");
    let part1 = vec![1u8; 5 << 20];
    let part2 = b"tail".to_vec();
    let up = c.multipart("big").unwrap();
    assert_eq!(up.key(), "big");
    let p2 = up.put_part(2, &part2).unwrap();
    let p1 = up.put_part(1, &part1).unwrap();
    assert_eq!(c.head("big").unwrap(), None, "invisible until complete");
    up.complete(&[p2, p1]).unwrap();
    let got = c.get("big").unwrap().unwrap();
    assert_eq!(got.len(), part1.len() + part2.len());
    assert!(got[..part1.len()] == part1[..] && got[part1.len()..] == part2[..]);

    let gaps = c.multipart("gaps").unwrap();
    let p = gaps.put_part(2, b"x").unwrap();
    assert!(
        gaps.clone().complete(&[p]).is_err(),
        "parts must start at 1"
    );
    gaps.abort().unwrap();

    // MinIO lists the uploads of one exact key only (AWS: of a prefix), so the keys are whole.
    let left = c.multipart("stale/one").unwrap();
    let _other = c.multipart("elsewhere").unwrap();
    assert_eq!(
        c.abort_stale_uploads("stale/one", Duration::from_secs(3600))
            .unwrap(),
        0,
        "too young"
    );
    std::thread::sleep(Duration::from_millis(1100));
    assert_eq!(
        c.abort_stale_uploads("stale/one", Duration::from_secs(1))
            .unwrap(),
        1
    );
    assert!(left.put_part(1, b"late").is_err(), "the upload is gone");
    assert_eq!(
        c.abort_stale_uploads("stale/one", Duration::ZERO).unwrap(),
        0,
        "gone"
    );
    assert_eq!(
        c.abort_stale_uploads("elsewhere", Duration::ZERO).unwrap(),
        1,
        "the other one"
    );
}

#[test]
fn refused_credentials_name_the_endpoint() {
    let Some(server) = minio::Minio::shared("refused_credentials_name_the_endpoint") else {
        return;
    };
    let mut cfg = config(server, &server.endpoint, &minio::fresh_bucket("denied"));
    cfg.secret_access_key = Some("wrong".into());
    let e = S3Client::connect(&cfg).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Permission, "{e}");
    let msg = e.to_string();
    assert!(
        msg.contains(&server.endpoint)
            && msg.contains("403")
            && msg.contains("config's s3 section"),
        "{msg}"
    );

    let mut cfg = config(server, &server.endpoint, &minio::fresh_bucket("absent"));
    cfg.create_bucket = false;
    let e = S3Client::connect(&cfg).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
    assert!(e.to_string().contains("does not exist"), "{e}");
}

#[test]
fn a_dead_endpoint_fails_quickly() {
    // A port nobody listens on: bind one, then free it.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut cfg = S3Config::new(format!("http://127.0.0.1:{port}"), "bucket");
    cfg.access_key_id = Some("a".into());
    cfg.secret_access_key = Some("b".into());
    let started = Instant::now();
    let e = S3Client::connect(&cfg).unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert!(matches!(e, StorageError::S3 { status: None, .. }), "{e:?}");
    assert!(
        e.to_string().contains(&format!("127.0.0.1:{port}")) && e.to_string().contains("attempts"),
        "{e}"
    );
}

/// What the proxy does to the traffic it relays.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Once armed, the first create-only PUT reaches MinIO but its answer does not come back:
    /// the client's connection is closed instead.
    LoseFirstCreateAnswer,
    /// `If-None-Match` never reaches MinIO: a server without conditional create.
    StripIfNoneMatch,
    /// While armed, requests are answered `503 SlowDown` (counted in `dropped`) instead of
    /// being relayed.
    SlowDown,
}

/// A TCP proxy in front of MinIO, one request per connection (it asks both sides to close).
struct Proxy {
    endpoint: String,
    armed: Arc<AtomicBool>,
    dropped: Arc<AtomicUsize>,
}

fn proxy(upstream: &str, fault: Fault) -> Proxy {
    let upstream = upstream.trim_start_matches("http://").to_string();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let armed = Arc::new(AtomicBool::new(false));
    let dropped = Arc::new(AtomicUsize::new(0));
    let (a, d) = (armed.clone(), dropped.clone());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(client) = conn else { return };
            let (upstream, a, d) = (upstream.clone(), a.clone(), d.clone());
            std::thread::spawn(move || relay(client, &upstream, fault, &a, &d));
        }
    });
    Proxy {
        endpoint,
        armed,
        dropped,
    }
}

fn relay(
    mut client: TcpStream,
    upstream: &str,
    fault: Fault,
    armed: &AtomicBool,
    dropped: &AtomicUsize,
) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match client.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let text = String::from_utf8_lossy(&head).to_string();
    let mut lines: Vec<&str> = text.split("\r\n").filter(|l| !l.is_empty()).collect();
    let is_create = lines[0].starts_with("PUT ")
        && lines
            .iter()
            .any(|l| l.to_ascii_lowercase().starts_with("if-none-match:"));
    let length: usize = lines
        .iter()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    if client.read_exact(&mut body).is_err() {
        return;
    }
    if fault == Fault::SlowDown && armed.load(Ordering::SeqCst) {
        dropped.fetch_add(1, Ordering::SeqCst);
        let body = "<Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>";
        let answer = format!(
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/xml\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = client.write_all(answer.as_bytes());
        return;
    }
    lines.retain(|l| {
        let l = l.to_ascii_lowercase();
        let stripped = fault == Fault::StripIfNoneMatch && l.starts_with("if-none-match:");
        !(l.starts_with("connection:") || stripped)
    });
    let mut out = lines.join("\r\n").into_bytes();
    out.extend_from_slice(b"\r\nConnection: close\r\n\r\n");
    out.extend_from_slice(&body);
    let Ok(mut server) = TcpStream::connect(upstream) else {
        return;
    };
    if server.write_all(&out).is_err() {
        return;
    }
    let mut answer = Vec::new();
    let _ = server.read_to_end(&mut answer);
    if fault == Fault::LoseFirstCreateAnswer && is_create && armed.swap(false, Ordering::SeqCst) {
        dropped.fetch_add(1, Ordering::SeqCst);
        return; // closes the client's connection without a word
    }
    let _ = client.write_all(&answer);
}

#[test]
fn a_lost_create_answer_is_recognised_as_ours() {
    let Some(server) = minio::Minio::shared("a_lost_create_answer_is_recognised_as_ours") else {
        return;
    };
    let p = proxy(&server.endpoint, Fault::LoseFirstCreateAnswer);
    let c = S3Client::connect(&config(server, &p.endpoint, &minio::fresh_bucket("lost"))).unwrap();
    p.armed.store(true, Ordering::SeqCst);
    assert_eq!(
        c.create("stamped", b"writer-1 nonce-42").unwrap(),
        Created::New
    );
    assert_eq!(
        p.dropped.load(Ordering::SeqCst),
        1,
        "the proxy dropped an answer"
    );
    let s = c.stats();
    assert_eq!((s.self_conflicts, s.conflicts), (1, 0), "{s:?}");
    assert!(s.retries >= 1, "{s:?}");
    assert_eq!(
        c.get("stamped").unwrap().as_deref(),
        Some(&b"writer-1 nonce-42"[..])
    );
}

#[test]
fn a_server_without_conditional_create_is_refused() {
    let Some(server) = minio::Minio::shared("a_server_without_conditional_create_is_refused")
    else {
        return;
    };
    let p = proxy(&server.endpoint, Fault::StripIfNoneMatch);
    let mut cfg = config(server, &p.endpoint, &minio::fresh_bucket("uncond"));
    let e = S3Client::connect(&cfg).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
    assert!(matches!(e, StorageError::S3Unsupported { .. }), "{e:?}");
    assert!(
        e.to_string().contains("If-None-Match")
            && e.to_string().contains("allow_unconditional_writes"),
        "{e}"
    );
    cfg.allow_unconditional_writes = true;
    let c = S3Client::connect(&cfg).unwrap();
    c.put("k", b"v").unwrap();
    assert_eq!(c.get("k").unwrap().as_deref(), Some(&b"v"[..]));
    // The same server straight, not through the proxy, passes the probe.
    cfg.allow_unconditional_writes = false;
    cfg.endpoint = server.endpoint.clone();
    S3Client::connect(&cfg).unwrap();
}

/// A successful probe leaves its answer in the bucket, naming the endpoint it went through;
/// another process trusts it for a day on that endpoint only, and skips the bucket check and
/// the probe's five requests (a tenth of a small database's move into a bucket).
#[test]
fn a_probe_answer_is_trusted_for_a_day_on_its_endpoint_only() {
    use fieldstore::storage::s3::client::{probed_marker, PROBED_MARKER};
    let Some(server) = minio::Minio::shared("a_probe_answer_is_trusted") else {
        return;
    };
    let p = proxy(&server.endpoint, Fault::StripIfNoneMatch);
    let direct =
        |bucket: &str| S3Client::connect(&config(server, &server.endpoint, bucket)).unwrap();
    let via_proxy = |bucket: &str| S3Client::connect(&config(server, &p.endpoint, bucket));

    let bucket = minio::fresh_bucket("marker");
    let c = direct(&bucket);
    let marker = String::from_utf8(c.get(PROBED_MARKER).unwrap().unwrap()).unwrap();
    assert!(
        marker.starts_with(&format!("{}\n", server.endpoint)),
        "{marker}"
    );
    // The direct path's answer says nothing of a proxy that drops If-None-Match: probed, refused.
    let e = via_proxy(&bucket).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");

    // A fresh answer naming the proxy is taken as given: no probe (which would refuse it).
    let trusted = minio::fresh_bucket("marker");
    direct(&trusted)
        .put(
            PROBED_MARKER,
            probed_marker(&p.endpoint, std::time::SystemTime::now()).as_bytes(),
        )
        .unwrap();
    via_proxy(&trusted).unwrap();
    // A day old, it is not.
    let old = minio::fresh_bucket("marker");
    let day = Duration::from_secs(24 * 3600 + 60);
    direct(&old)
        .put(
            PROBED_MARKER,
            probed_marker(&p.endpoint, std::time::SystemTime::now() - day).as_bytes(),
        )
        .unwrap();
    let e = via_proxy(&old).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Unsupported, "{e}");
}

#[test]
fn throttling_is_retried_with_bounded_backoff() {
    let Some(server) = minio::Minio::shared("throttling_is_retried_with_bounded_backoff") else {
        return;
    };
    let p = proxy(&server.endpoint, Fault::SlowDown);
    let c = S3Client::connect(&config(server, &p.endpoint, &minio::fresh_bucket("slow"))).unwrap();
    // Three refusals, then MinIO again.
    let disarm = {
        let (armed, dropped) = (p.armed.clone(), p.dropped.clone());
        armed.store(true, Ordering::SeqCst);
        std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(20);
            while dropped.load(Ordering::SeqCst) < 3 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(5));
            }
            armed.store(false, Ordering::SeqCst);
        })
    };
    c.put("k", b"v").unwrap();
    disarm.join().unwrap();
    assert_eq!(c.stats().retries, 3, "{:?}", c.stats());
    assert_eq!(c.get("k").unwrap().as_deref(), Some(&b"v"[..]));

    // Refused for good: reported with the server's code, after bounded attempts.
    p.armed.store(true, Ordering::SeqCst);
    let started = Instant::now();
    let e = c.get("k").unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(31),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert!(
        matches!(
            e,
            StorageError::S3 {
                status: Some(503),
                ..
            }
        ),
        "{e:?}"
    );
    let msg = e.to_string();
    assert!(
        msg.contains("SlowDown") && msg.contains("10 attempts"),
        "{msg}"
    );
}

#[test]
fn tls_with_a_private_ca() {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "fieldstore test CA");
    let ca = rcgen::CertifiedIssuer::self_signed(ca_params, ca_key).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf =
        rcgen::CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
            .unwrap()
            .signed_by(&leaf_key, &ca)
            .unwrap();
    let Some(server) = minio::Minio::start_tls_or_skip(
        "tls_with_a_private_ca",
        &leaf.pem(),
        &leaf_key.serialize_pem(),
    ) else {
        return;
    };
    assert!(
        server.endpoint.starts_with("https://"),
        "{}",
        server.endpoint
    );
    let dir = tempfile::tempdir().unwrap();
    let ca_file = dir.path().join("ca.pem");
    std::fs::write(&ca_file, ca.pem()).unwrap();

    let mut cfg = config(&server, &server.endpoint, "tls");
    let e = S3Client::connect(&cfg).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Io, "{e}");
    assert!(
        e.to_string().to_ascii_lowercase().contains("certificate"),
        "{e}"
    );

    cfg.ca_bundle = Some(ca_file);
    let c = S3Client::connect(&cfg).unwrap();
    c.put("secure", b"bytes").unwrap();
    assert_eq!(c.get("secure").unwrap().as_deref(), Some(&b"bytes"[..]));

    let not_pem = dir.path().join("junk.pem");
    std::fs::write(&not_pem, "no certificate here").unwrap();
    cfg.ca_bundle = Some(not_pem);
    let e = S3Client::connect(&cfg).unwrap_err();
    assert_eq!(e.kind(), ErrorKind::Config, "{e}");
}

#[test]
fn a_watched_server_stops_when_its_owner_exits() {
    if minio::Minio::shared("a_watched_server_stops_when_its_owner_exits").is_none() {
        return;
    }
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/minio");
    let mut owner = std::process::Command::new("sleep")
        .arg("60")
        .spawn()
        .unwrap();
    let dir = tempfile::tempdir().unwrap().keep();
    let out = std::process::Command::new(&script)
        .arg("start")
        .arg(&dir)
        .args(["--watch-pid", &owner.id().to_string()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let pid: i32 = stdout
        .lines()
        .find_map(|l| l.strip_prefix("pid="))
        .unwrap()
        .parse()
        .unwrap();
    let alive = |pid: i32| unsafe { libc::kill(pid, 0) } == 0;
    assert!(alive(pid));
    owner.kill().unwrap();
    owner.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while (alive(pid) || dir.exists()) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(!alive(pid), "MinIO {pid} outlived the process it watched");
    assert!(!dir.exists(), "{} was not deleted", dir.display());
}

/// Another process's conditional-write probe, made a moment ago, is not taken for one a killed
/// process left, even with a grace of 0: deleting it between that process's two create-only
/// PUTs let the second succeed, and that process then refused MinIO as a server without
/// conditional writes (seen as a flaky lifecycle test).
#[test]
fn a_fresh_probe_of_another_process_is_left_alone() {
    let Some(server) = minio::Minio::shared("a_fresh_probe_of_another_process_is_left_alone")
    else {
        return;
    };
    let bucket = minio::fresh_bucket("probes");
    let first = S3Client::connect(&config(server, &server.endpoint, &bucket)).unwrap();
    first
        .put(".fieldstore-probe/another-process", b"probe")
        .unwrap();
    // The probe runs once per endpoint and bucket in a process: another spelling of the
    // endpoint makes this client probe (and clear stale probes) again.
    let other = server.endpoint.replace("127.0.0.1", "localhost");
    assert_ne!(other, server.endpoint, "{}", server.endpoint);
    let mut cfg = config(server, &other, &bucket);
    cfg.grace = Duration::ZERO;
    S3Client::connect(&cfg).unwrap();
    assert!(
        first
            .head(".fieldstore-probe/another-process")
            .unwrap()
            .is_some(),
        "a probe made a moment ago was deleted as stale"
    );
}
