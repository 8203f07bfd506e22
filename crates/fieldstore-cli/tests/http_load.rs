//! 200 concurrent HTTP clients on one real `fieldstore server --http` with a small memory
//! budget: well-behaved ones listing, retrieving and following event streams, hostile ones
//! reading slowly or not at all, vanishing mid-request, sending garbage. The server's resident
//! memory (from /proc) stays under its budget plus the fixed cost of its connections, and every
//! well-behaved request is served (after a `Retry-After` wait when the server says busy).

mod common;
#[path = "common/server.rs"]
mod server;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const TOKEN: &str = "load-token";
const REQ: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl";
/// Every field written, named completely.
const ALL: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl,domain=g,levelist=500/850,param=130/131,step=0/to/9/by/1";
const BUDGET_MIB: u64 = 64;

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// One GET on a fresh connection: the status and the body (de-chunked or by length).
fn get(addr: &str, path: &str) -> std::io::Result<(u16, Vec<u8>)> {
    let mut s = TcpStream::connect(addr)?;
    s.set_read_timeout(Some(Duration::from_secs(120)))?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\nConnection: close\r\n\r\n"
    )?;
    let mut all = Vec::new();
    s.read_to_end(&mut all)?;
    let end = all
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .ok_or_else(|| std::io::Error::other("no head"))?;
    let head = String::from_utf8_lossy(&all[..end]).to_ascii_lowercase();
    let status = head[9..12].parse().unwrap_or(0);
    let mut body = all[end + 4..].to_vec();
    if head.contains("transfer-encoding: chunked") {
        let (mut out, mut at) = (Vec::new(), 0);
        loop {
            let line_end = at
                + body[at..]
                    .windows(2)
                    .position(|w| w == b"\r\n")
                    .ok_or_else(|| std::io::Error::other("bad chunk"))?;
            let n =
                usize::from_str_radix(std::str::from_utf8(&body[at..line_end]).unwrap_or("x"), 16)
                    .map_err(|_| std::io::Error::other("bad chunk size"))?;
            if n == 0 {
                break;
            }
            out.extend_from_slice(&body[line_end + 2..line_end + 2 + n]);
            at = line_end + 4 + n;
        }
        body = out;
    } else if let Some(l) = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length: "))
    {
        let want: usize = l.trim().parse().unwrap_or(0);
        if body.len() != want {
            return Err(std::io::Error::other(format!(
                "{} of {want} bytes",
                body.len()
            )));
        }
    }
    Ok((status, body))
}

#[test]
fn two_hundred_clients_good_and_hostile() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("local.yaml");
    std::fs::write(
        &config,
        format!(
            "type: local\nspaces: [{{roots: [{{path: {}}}]}}]\n",
            dir.path().join("root").display()
        ),
    )
    .unwrap();
    let cli = |args: &[&str]| {
        let mut c = common::fieldstore();
        c.arg("--config").arg(&config).args(args);
        common::succeeded(&format!("{args:?}"), &c.output().unwrap())
    };
    // 40 fields of 250k points (about 0.5 MiB each, 20 MiB in all).
    let f = dir.path().join("f.grib");
    cli(&[
        "sample",
        "--out",
        f.to_str().unwrap(),
        "--params",
        "t/u",
        "--levels",
        "500/850",
        "--steps",
        "0/1/2/3/4/5/6/7/8/9",
        "--points",
        "250000",
    ]);
    cli(&["write", f.to_str().unwrap()]);
    let whole = std::fs::metadata(&f).unwrap().len() as usize;

    let mut c = common::fieldstore();
    c.arg("--config").arg(&config).args([
        "server",
        "--listen",
        "127.0.0.1:0",
        "--http",
        "127.0.0.1:0",
        "--token",
        TOKEN,
        "--memory-budget",
        &format!("{BUDGET_MIB}MiB"),
        "--connection-budget",
        "8MiB",
        "--stall-timeout",
        "4",
        "--budget-wait",
        "10",
        "--max-connections",
        "400",
        "--max-requests-per-identity",
        "0",
    ]);
    let mut served = server::start(c, dir.path(), TOKEN);
    let addr = served.http.clone().unwrap();
    let pid = served.child.id();
    std::thread::sleep(Duration::from_millis(300));
    let base_kib = rss_kib(pid);

    let stop = Arc::new(AtomicBool::new(false));
    let peak = Arc::new(AtomicU64::new(base_kib));
    let sampler = {
        let (stop, peak) = (stop.clone(), peak.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                std::thread::sleep(Duration::from_millis(20));
            }
        })
    };
    let served_ok = Arc::new(AtomicU64::new(0));
    let busy = Arc::new(AtomicU64::new(0));
    let events_seen = Arc::new(AtomicU64::new(0));
    let started = Instant::now();
    let mut clients = Vec::new();
    for i in 0..200usize {
        let addr = addr.clone();
        let (served_ok, busy, events_seen) = (served_ok.clone(), busy.clone(), events_seen.clone());
        clients.push(std::thread::spawn(move || -> Result<(), String> {
            match i % 10 {
                // Well-behaved: list, one field, everything, axes; busy answers are retried.
                0..=4 => {
                    for round in 0..4 {
                        let (path, want_len) = match (i + round) % 4 {
                            0 => (format!("/api/v1/list?request={}&format=porcelain", enc(REQ)), None),
                            1 => (format!("/api/v1/retrieve?request={}", enc(&format!("{REQ},domain=g,levelist=500,param=130,step={}", i % 10))), None),
                            2 => (format!("/api/v1/retrieve?request={}", enc(ALL)), Some(whole)),
                            _ => (format!("/api/v1/axes?request={}", enc(REQ)), None),
                        };
                        let mut tries = 0;
                        loop {
                            let (status, body) = get(&addr, &path).map_err(|e| format!("client {i}: {e}"))?;
                            if status == 503 && tries < 30 {
                                busy.fetch_add(1, Ordering::Relaxed);
                                tries += 1;
                                std::thread::sleep(Duration::from_secs(1));
                                continue;
                            }
                            if status != 200 {
                                return Err(format!("client {i}: {path}: {status} {}", String::from_utf8_lossy(&body)));
                            }
                            if (i + round) % 4 == 0 && body.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count() != 40 {
                                return Err(format!("client {i}: list gave {} bytes", body.len()));
                            }
                            if want_len.is_some_and(|w| w != body.len()) || body.is_empty() {
                                return Err(format!("client {i}: {path}: {} bytes", body.len()));
                            }
                            served_ok.fetch_add(1, Ordering::Relaxed);
                            break;
                        }
                    }
                    Ok(())
                }
                // Event streams: subscribe from the beginning, read the 40 fields, hang up.
                5 | 6 => {
                    let mut s = TcpStream::connect(&addr).map_err(|e| e.to_string())?;
                    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
                    write!(s, "GET /api/v1/events?request={}&start=beginning HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n", enc("class=od")).unwrap();
                    let mut text = String::new();
                    let mut buf = [0u8; 8192];
                    while text.matches("event: field").count() < 40 {
                        let n = s.read(&mut buf).map_err(|e| format!("events {i}: {e}"))?;
                        if n == 0 {
                            return Err(format!("events {i}: closed after {text}"));
                        }
                        text.push_str(&String::from_utf8_lossy(&buf[..n]));
                    }
                    events_seen.fetch_add(1, Ordering::Relaxed);
                    Ok(())
                }
                // Slow: ask for everything, read nothing for longer than the stall timeout.
                7 => {
                    let mut s = TcpStream::connect(&addr).map_err(|e| e.to_string())?;
                    write!(s, "GET /api/v1/retrieve?request={} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n", enc(ALL)).unwrap();
                    std::thread::sleep(Duration::from_secs(8));
                    let mut sink = Vec::new();
                    let _ = s.read_to_end(&mut sink);
                    Ok(())
                }
                // Vanishing: half a request, then gone; a request and gone before the answer.
                8 => {
                    let mut s = TcpStream::connect(&addr).map_err(|e| e.to_string())?;
                    let _ = s.write_all(b"GET /api/v1/retrieve?request=cla");
                    std::thread::sleep(Duration::from_millis(200));
                    drop(s);
                    let mut s = TcpStream::connect(&addr).map_err(|e| e.to_string())?;
                    let _ = write!(s, "GET /api/v1/retrieve?request={} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {TOKEN}\r\n\r\n", enc(ALL));
                    let _ = s.read(&mut [0u8; 100]);
                    Ok(())
                }
                // Garbage, and a head that never ends.
                _ => {
                    let mut s = TcpStream::connect(&addr).map_err(|e| e.to_string())?;
                    let _ = s.write_all(&[0x16, 3, 1, 0, 0xff, 0, 0, 13, 10, 13, 10]);
                    let mut reply = Vec::new();
                    let _ = s.read_to_end(&mut reply);
                    let mut s = TcpStream::connect(&addr).map_err(|e| e.to_string())?;
                    for _ in 0..20 {
                        if s.write_all(b"X-Filler: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\r\n").is_err() {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(100));
                    }
                    Ok(())
                }
            }
        }));
    }
    let mut failures = Vec::new();
    for c in clients {
        if let Err(e) = c.join().unwrap() {
            failures.push(e);
        }
    }
    stop.store(true, Ordering::Relaxed);
    sampler.join().unwrap();
    let elapsed = started.elapsed();
    assert!(served.is_running(), "the server died");
    let peak_mib = peak.load(Ordering::Relaxed) / 1024;
    let base_mib = base_kib / 1024;
    eprintln!(
        "200 clients in {elapsed:?}: {} well-behaved requests served ({} busy answers retried), {} event streams complete; server RSS {base_mib} MiB at rest, peak {peak_mib} MiB, budget {BUDGET_MIB} MiB",
        served_ok.load(Ordering::Relaxed),
        busy.load(Ordering::Relaxed),
        events_seen.load(Ordering::Relaxed),
    );
    assert!(
        failures.is_empty(),
        "{} clients failed: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    assert_eq!(served_ok.load(Ordering::Relaxed), 100 * 4);
    assert_eq!(events_seen.load(Ordering::Relaxed), 40);
    // What the budget does not count is the fixed cost of a connection (its thread and buffers:
    // 80 KiB of buffers each, bounded by --max-connections): 64 MiB covers 200 of them.
    assert!(
        peak_mib <= base_mib + BUDGET_MIB + 64,
        "peak RSS {peak_mib} MiB over {base_mib} MiB at rest + the {BUDGET_MIB} MiB budget + 64 MiB"
    );
    // And it still answers.
    let (status, _) = get(&addr, &format!("/api/v1/list?request={}", enc(REQ))).unwrap();
    assert_eq!(status, 200);
}
