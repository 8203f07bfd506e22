//! 200 concurrent clients of every kind against one server: archivers, readers, listers and
//! subscribers whose results are checked, among hostile raw-frame clients (garbage, truncated
//! frames, idle connections, slowloris, absurd announcements, wrong tokens).

use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use fieldstore::api::{Fdb, ListOptions, Start};
use fieldstore::model::request::parse_request;
use fieldstore::remote::protocol::{self as p, write_frame, Hello, MsgType, Query, Role};
use fieldstore::remote::RemoteFdb;

use super::run::{Fault, Rng, Tally};
use super::store::{fields, messages, step_of, Store, DB};

const TOKEN: &str = "torture-token";
/// Steps the store holds before the clients start, and the first step an archiver writes.
const SEEDED: u64 = 10;
const FIRST: u64 = 100;

pub fn run(store: &Store, tally: &Tally, clients: usize, rng: &mut Rng, seed: u64) {
    let seeded: Vec<String> = (0..SEEDED).map(|s| s.to_string()).collect();
    let f = store.sample(tally, "seeded.grib", &seeded.join("/"), "20261122");
    store.ok(tally, "local.yaml", &["write", f.to_str().unwrap()]);
    let seeded_bytes = Arc::new(std::fs::read(&f).unwrap());
    let archivers = (0..clients).filter(|i| i % 10 < 3).count() as u64;
    let steps: Vec<String> = (FIRST..FIRST + archivers).map(|s| s.to_string()).collect();
    let pool = store.sample(tally, "archived.grib", &steps.join("/"), "20261122");
    let pool = Arc::new(messages(&std::fs::read(pool).unwrap()).unwrap());
    let server = crate::server::start(
        store.cmd(
            "local.yaml",
            &["server", "--listen", "127.0.0.1:0", "--token", TOKEN],
        ),
        &store.dir,
        TOKEN,
    );
    let port = server.port;
    let ready = Arc::new(Barrier::new(clients + 1));
    let done = Arc::new(AtomicBool::new(false));
    let context = format!("seed={seed} clients");
    let threads: Vec<_> = (0..clients)
        .map(|i| {
            let (ready, done, pool, seeded_bytes) = (
                ready.clone(),
                done.clone(),
                pool.clone(),
                seeded_bytes.clone(),
            );
            let mut rng = rng.fork();
            std::thread::spawn(move || -> Result<(), String> {
                let fdb = RemoteFdb::new("127.0.0.1", port, Some(TOKEN.into()));
                let k = (i / 10 * 3 + i % 10) as u64; // the archiver's number
                match i % 10 {
                    0..=2 => {
                        let four = &pool[k as usize * 4..k as usize * 4 + 4];
                        ready.wait();
                        archiver(&fdb, FIRST + k, four)
                    }
                    3 | 4 => {
                        ready.wait();
                        reader(&fdb, &seeded_bytes)
                    }
                    5 => {
                        ready.wait();
                        lister(&fdb, archivers)
                    }
                    6 => {
                        let all = parse_request(DB).unwrap();
                        let mut sub = fdb.subscribe(&all, &Start::Now).map_err(|e| e.to_string());
                        ready.wait();
                        subscriber(sub.as_mut().map_err(|e| e.clone())?.as_mut(), archivers)
                    }
                    _ => {
                        ready.wait();
                        hostile(port, i / 10 % 7, &mut rng, &done);
                        Ok(())
                    }
                }
            })
        })
        .collect();
    ready.wait();
    let mut failed = Vec::new();
    let mut hostile_threads = Vec::new();
    for (i, t) in threads.into_iter().enumerate() {
        if i % 10 >= 7 {
            // Hostile clients hold on until every good client is done.
            hostile_threads.push((i, t));
            continue;
        }
        match t.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => failed.push(format!("client {i}: {e}")),
            Err(_) => failed.push(format!("client {i}: the test thread panicked")),
        }
    }
    done.store(true, Ordering::Relaxed);
    for (i, t) in hostile_threads {
        if t.join().is_err() {
            failed.push(format!("hostile client {i}: the test thread panicked"));
        }
    }
    tally.add(&tally.clients, clients as u64);
    for f in failed {
        tally.fault(Fault::Violation, format!("{context}: {f}"));
    }
    let mut server = server;
    if !server.is_running() {
        tally.fault(Fault::Crash, format!("{context}: the server died"));
    }
    // After all of it, the store holds exactly the seeded and the archived fields.
    let listed = store.list(tally, "local.yaml", DB);
    let want = (SEEDED + archivers) as usize * 4;
    if listed.len() != want {
        tally.fault(
            Fault::Violation,
            format!(
                "{context}: {} fields listed after the clients, want {want}",
                listed.len()
            ),
        );
    }
    drop(server);
    let log = std::fs::read_to_string(store.path("server.log")).unwrap_or_default();
    if log.contains("panicked at") {
        tally.fault(
            Fault::Panic,
            format!("{context}: the server panicked: {log}"),
        );
    }
}

fn archiver(fdb: &RemoteFdb, step: u64, four: &[Vec<u8>]) -> Result<(), String> {
    for f in four {
        fdb.archive(None, f).map_err(|e| format!("archive: {e}"))?;
    }
    fdb.flush().map_err(|e| format!("flush: {e}"))?;
    let mut back = Vec::new();
    let req = parse_request(&fields(DB, &step.to_string())).unwrap();
    fdb.retrieve(&req)
        .map_err(|e| format!("retrieve: {e}"))?
        .read_to_end(&mut back)
        .map_err(|e| format!("retrieve: {e}"))?;
    if back != four.concat() {
        return Err(format!("step {step} read back {} other bytes", back.len()));
    }
    Ok(())
}

fn reader(fdb: &RemoteFdb, want: &[u8]) -> Result<(), String> {
    let steps: Vec<String> = (0..SEEDED).map(|s| s.to_string()).collect();
    let req = parse_request(&fields(DB, &steps.join("/"))).unwrap();
    for _ in 0..3 {
        let mut back = Vec::new();
        fdb.retrieve(&req)
            .map_err(|e| format!("retrieve: {e}"))?
            .read_to_end(&mut back)
            .map_err(|e| format!("retrieve: {e}"))?;
        if back != want {
            return Err(format!(
                "read {} bytes, not the {} flushed",
                back.len(),
                want.len()
            ));
        }
    }
    Ok(())
}

/// Every listing: all seeded fields, and each archiver's flush whole or absent.
fn lister(fdb: &RemoteFdb, archivers: u64) -> Result<(), String> {
    let all = parse_request(DB).unwrap();
    for _ in 0..5 {
        let mut per_step: BTreeMap<u64, usize> = BTreeMap::new();
        for e in fdb
            .list(&all, ListOptions::default())
            .map_err(|e| format!("list: {e}"))?
        {
            let e = e.map_err(|e| format!("list: {e}"))?;
            let step: u64 = e
                .key
                .datum
                .get("step")
                .and_then(|s| s.parse().ok())
                .ok_or_else(|| format!("listed field without a step: {e:?}"))?;
            *per_step.entry(step).or_default() += 1;
        }
        for (step, n) in &per_step {
            let known = *step < SEEDED || (FIRST..FIRST + archivers).contains(step);
            if !known || *n != 4 {
                return Err(format!(
                    "step {step}: {n} fields listed (half a flush, or unknown)"
                ));
            }
        }
        if (0..SEEDED).any(|s| !per_step.contains_key(&s)) {
            return Err("a seeded field is missing from a listing".into());
        }
    }
    Ok(())
}

/// Sees each archiver's four fields once, whole flushes, and nothing else.
fn subscriber(sub: &mut dyn fieldstore::api::Subscription, archivers: u64) -> Result<(), String> {
    let want = archivers as usize * 4;
    let mut seen = BTreeSet::new();
    let deadline = Instant::now() + Duration::from_secs(90);
    while seen.len() < want {
        if Instant::now() > deadline {
            return Err(format!("{} of {want} notices in 90 s", seen.len()));
        }
        if let Some(n) = sub
            .next_within(Duration::from_millis(500))
            .map_err(|e| format!("subscription: {e}"))?
        {
            let line = format!("{}", n.element.key);
            let step = step_of(&line).ok_or_else(|| format!("notice without a step: {line}"))?;
            if !(FIRST..FIRST + archivers).contains(&step) || !seen.insert(line.clone()) {
                return Err(format!(
                    "a notice for a field not archived, or twice: {line}"
                ));
            }
        }
    }
    Ok(())
}

/// One of seven ways to misbehave; returns once the server gave up on it or the run is done.
fn hostile(port: u16, how: usize, rng: &mut Rng, done: &AtomicBool) {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) else {
        return;
    };
    let _ = s.set_read_timeout(Some(Duration::from_millis(200)));
    let hello = |token: &str| {
        let mut f = Vec::new();
        let h = p::to_json(&Hello {
            versions: vec![p::VERSION_MAX],
            token: Some(token.into()),
            role: Role::Control,
            client: "torture hostile client".into(),
            handover: false,
        });
        write_frame(&mut f, 1, MsgType::Hello, 1, &[&h]).unwrap();
        f
    };
    let until_done = |s: &mut TcpStream| {
        let mut buf = [0u8; 4096];
        while !done.load(Ordering::Relaxed) {
            match s.read(&mut buf) {
                Ok(0) => return,
                Err(e)
                    if e.kind() != std::io::ErrorKind::WouldBlock
                        && e.kind() != std::io::ErrorKind::TimedOut =>
                {
                    return
                }
                _ => {}
            }
        }
    };
    match how {
        0 => {
            let n = 1 + rng.usize(4096);
            let _ = s.write_all(&rng.bytes(n));
            until_done(&mut s);
        }
        1 => {
            // Half a frame, then silence.
            let f = hello(TOKEN);
            let _ = s.write_all(&f[..rng.usize(f.len())]);
            until_done(&mut s);
        }
        2 => until_done(&mut s),
        3 => {
            // Slowloris: a valid hello a byte at a time.
            for b in hello(TOKEN) {
                if done.load(Ordering::Relaxed) || s.write_all(&[b]).is_err() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            until_done(&mut s);
        }
        4 => {
            // After a good hello, a list frame announcing far more than it sends.
            let _ = s.write_all(&hello(TOKEN));
            let mut f = Vec::new();
            let q = p::to_json(&Query::new(&parse_request("class=od").unwrap()));
            write_frame(&mut f, 1, MsgType::List, 2, &[&q]).unwrap();
            f[16..24].copy_from_slice(&(900u64 << 20).to_be_bytes());
            let _ = s.write_all(&f);
            until_done(&mut s);
        }
        5 => {
            let _ = s.write_all(&hello("not-the-token"));
            until_done(&mut s);
        }
        _ => {
            // A good hello, then frames with random kinds and payloads.
            let _ = s.write_all(&hello(TOKEN));
            for id in 2..10u64 {
                let mut f = Vec::new();
                let kinds = [
                    MsgType::List,
                    MsgType::Retrieve,
                    MsgType::Axes,
                    MsgType::Where,
                ];
                let n = rng.usize(300);
                let payload = rng.bytes(n);
                write_frame(&mut f, 1, *rng.pick(&kinds), id, &[&payload]).unwrap();
                if s.write_all(&f).is_err() {
                    return;
                }
            }
            until_done(&mut s);
        }
    }
}
