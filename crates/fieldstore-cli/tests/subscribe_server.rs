//! Subscriptions through real `fieldstore server` processes (toc and `engine: memory`):
//! producers flushing through remote clients, subscribers each seeing every field once in flush
//! order per producer, a subscriber resumed from its position, a server killed and restarted
//! under a live subscription, and a slow subscriber that must hold back nobody.

mod common;
#[path = "common/server.rs"]
mod server;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use fieldstore::api::{Fdb, Notice, Position, Start, Subscription};
use fieldstore::model::request::parse_request;
use fieldstore::model::Key;
use fieldstore::remote::RemoteFdb;
use server::Served;

const TOKEN: &str = "subscribe-token";
const REQUEST: &str = "class=od,expver=0001";

/// Which catalogue the server runs on.
#[derive(Clone, Copy, Debug)]
enum Engine {
    Toc,
    Memory,
}

struct Site {
    dir: tempfile::TempDir,
}

impl Site {
    fn new(engine: Engine) -> Site {
        let dir = tempfile::tempdir().unwrap();
        let yaml = match engine {
            Engine::Toc => format!(
                "type: local\nspaces: [{{roots: [{{path: {}}}]}}]\n",
                dir.path().join("root").display()
            ),
            Engine::Memory => "engine: memory\n".to_string(),
        };
        std::fs::write(dir.path().join("server.yaml"), yaml).unwrap();
        Site { dir }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A server on `port` (0: a free one), with its metrics endpoint.
    fn serve_on(&self, port: u16) -> Served {
        let mut c = common::fieldstore();
        c.arg("--config").arg(self.path("server.yaml")).args([
            "server",
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--token",
            TOKEN,
            "--metrics",
            "127.0.0.1:0",
        ]);
        server::start(c, self.dir.path(), TOKEN)
    }
}

fn client(port: u16) -> RemoteFdb {
    RemoteFdb::new("127.0.0.1", port, Some(TOKEN.to_string()))
}

/// Producer `p`'s `i`-th field: its producer is the date, its order the step.
fn key(p: u32, i: u32) -> Key {
    Key::parse(&format!("class=od,expver=0001,stream=oper,date=2026110{},time=1200,domain=g,type=fc,levtype=pl,levelist=500,param=130,step={i}", p + 1)).unwrap()
}

fn who(n: &Notice) -> (u32, u32) {
    let date: u32 = n.element.key.db.get("date").unwrap().parse().unwrap();
    let step: u32 = n.element.key.datum.get("step").unwrap().parse().unwrap();
    (date - 20261101, step)
}

/// `flushes` flushes of `per` fields of `size` bytes each, through a remote client.
fn produce(port: u16, p: u32, from: u32, flushes: u32, per: u32, size: usize) {
    let fdb = client(port);
    let data = vec![p as u8; size];
    for f in 0..flushes {
        for j in 0..per {
            fdb.archive(Some(&key(p, from + f * per + j)), &data)
                .unwrap();
        }
        fdb.flush().unwrap();
    }
}

fn subscribe(port: u16, start: &Start) -> Box<dyn Subscription> {
    client(port)
        .subscribe(&parse_request(REQUEST).unwrap(), start)
        .unwrap()
}

/// The next `n` notices as (producer, step), failing after `within`.
fn take(sub: &mut dyn Subscription, n: usize, within: Duration) -> Vec<(u32, u32)> {
    let deadline = Instant::now() + within;
    let mut got = Vec::new();
    while got.len() < n {
        assert!(
            Instant::now() < deadline,
            "{} of {n} notices in {within:?}",
            got.len()
        );
        if let Some(note) = sub.next_within(Duration::from_millis(500)).unwrap() {
            got.push(who(&note));
        }
    }
    got
}

fn nothing_more(sub: &mut dyn Subscription) {
    let extra = sub.next_within(Duration::from_millis(700)).unwrap();
    assert!(extra.is_none(), "a notice too many: {extra:?}");
}

/// Every (producer, step) of `expected` exactly once, and per producer in flush order: a
/// field of flush `k` never before one of flush `k - 1` (`per` fields a flush).
fn check_once_in_order(got: &[(u32, u32)], expected: &BTreeSet<(u32, u32)>, per: u32) {
    let seen: BTreeSet<(u32, u32)> = got.iter().copied().collect();
    assert_eq!(seen.len(), got.len(), "a field seen twice: {got:?}");
    assert_eq!(&seen, expected);
    let mut last: BTreeMap<u32, u32> = BTreeMap::new();
    for (p, step) in got {
        let flush = step / per;
        let before = last.insert(*p, flush).unwrap_or(0);
        assert!(
            flush >= before,
            "producer {p}: flush {flush} after {before}"
        );
    }
}

fn all(producers: u32, steps: std::ops::Range<u32>) -> BTreeSet<(u32, u32)> {
    (0..producers)
        .flat_map(|p| steps.clone().map(move |s| (p, s)))
        .collect()
}

fn two_producers_two_subscribers_and_a_resume(engine: Engine) {
    let site = Site::new(engine);
    let served = site.serve_on(0);
    let port = served.port;
    let (flushes, per) = (12, 3);
    let mut a = subscribe(port, &Start::Now);
    let mut b = subscribe(port, &Start::Now);
    let producers: Vec<_> = (0..2)
        .map(|p| std::thread::spawn(move || produce(port, p, 0, flushes, per, 64)))
        .collect();
    // `a` stops part way and resumes from its position, in a new connection.
    let first = take(&mut *a, 25, Duration::from_secs(60));
    let at: Position = Position::from_token(&a.position().to_token()).unwrap();
    drop(a);
    let mut a = subscribe(port, &Start::At(at));
    let total = (2 * flushes * per) as usize;
    let mut rest = take(&mut *a, total - 25, Duration::from_secs(60));
    let of_b = take(&mut *b, total, Duration::from_secs(60));
    for p in producers {
        p.join().unwrap();
    }
    let expected = all(2, 0..flushes * per);
    let mut of_a = first;
    of_a.append(&mut rest);
    check_once_in_order(&of_a, &expected, per);
    check_once_in_order(&of_b, &expected, per);
    nothing_more(&mut *a);
    nothing_more(&mut *b);
    // A subscriber from the beginning gets the same, then nothing.
    let mut c = subscribe(port, &Start::Beginning);
    check_once_in_order(
        &take(&mut *c, total, Duration::from_secs(60)),
        &expected,
        per,
    );
    nothing_more(&mut *c);
}

#[test]
fn subscribers_see_every_field_once_in_flush_order_toc() {
    two_producers_two_subscribers_and_a_resume(Engine::Toc);
}

#[test]
fn subscribers_see_every_field_once_in_flush_order_memory() {
    two_producers_two_subscribers_and_a_resume(Engine::Memory);
}

fn kill9(served: &mut Served) {
    served.child.kill().unwrap();
    served.child.wait().unwrap();
}

/// The server is killed under a live subscription and started again on the same port: the
/// subscription resumes by itself and misses nothing, repeats nothing.
fn restart_under_a_live_subscription(engine: Engine) {
    let site = Site::new(engine);
    let mut served = site.serve_on(0);
    let port = served.port;
    let per = 2;
    let mut sub = subscribe(port, &Start::Now);
    produce(port, 0, 0, 3, per, 128);
    let before = take(&mut *sub, 6, Duration::from_secs(30));
    kill9(&mut served);
    let served = site.serve_on(port);
    assert_eq!(served.port, port);
    produce(port, 0, 6, 3, per, 128);
    let after = take(&mut *sub, 6, Duration::from_secs(60));
    nothing_more(&mut *sub);
    let mut got = before;
    got.extend(after);
    check_once_in_order(&got, &all(1, 0..12), per);
    drop(served);
}

#[test]
fn a_server_restart_under_a_live_subscription_loses_nothing_toc() {
    restart_under_a_live_subscription(Engine::Toc);
}

#[test]
fn a_server_restart_under_a_live_subscription_loses_nothing_memory() {
    restart_under_a_live_subscription(Engine::Memory);
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn metric(served: &Served, name: &str) -> u64 {
    served.metric(name)
}

/// Producers write 320 MiB while one subscriber takes a notice a second: the other keeps up,
/// and the server's memory stays far below what went through it.
#[test]
fn a_slow_subscriber_holds_back_nobody() {
    let site = Site::new(Engine::Toc);
    let served = site.serve_on(0);
    let port = served.port;
    let mut slow = subscribe(port, &Start::Now);
    let mut fast = subscribe(port, &Start::Now);
    assert_eq!(metric(&served, "fieldstore_subscriptions_open"), 2);
    let baseline = rss_kib(served.child.id());
    let (flushes, per, size) = (40, 4, 1 << 20);
    let producers: Vec<_> = (0..2)
        .map(|p| std::thread::spawn(move || produce(port, p, 0, flushes, per, size)))
        .collect();
    let slow_reader = std::thread::spawn(move || {
        let mut got = Vec::new();
        for _ in 0..3 {
            got.extend(take(&mut *slow, 1, Duration::from_secs(60)));
            std::thread::sleep(Duration::from_secs(1));
        }
        (got, slow)
    });
    let total = (2 * flushes * per) as usize;
    let of_fast = take(&mut *fast, total, Duration::from_secs(120));
    for p in producers {
        p.join().unwrap();
    }
    check_once_in_order(&of_fast, &all(2, 0..flushes * per), per);
    let peak = rss_kib(served.child.id());
    let (of_slow, mut slow) = slow_reader.join().unwrap();
    assert_eq!(of_slow.len(), 3);
    // 320 MiB went through; the server holds a few batches and buffers, not the data.
    let grown = peak.saturating_sub(baseline);
    eprintln!("server RSS {baseline} KiB before, {peak} KiB after 320 MiB with a slow subscriber");
    assert!(
        grown < 96 * 1024,
        "server RSS grew by {grown} KiB (from {baseline})"
    );
    // The slow one still gets everything, once, in order.
    let mut rest = take(&mut *slow, total - 3, Duration::from_secs(60));
    let mut all_slow = of_slow;
    all_slow.append(&mut rest);
    check_once_in_order(&all_slow, &all(2, 0..flushes * per), per);
    assert!(metric(&served, "fieldstore_notices_sent_total") >= 2 * total as u64);
    drop(slow);
    drop(fast);
    // The server sees its subscribers go at once, not at the next keep-alive.
    let deadline = Instant::now() + Duration::from_secs(3);
    while metric(&served, "fieldstore_subscriptions_open") > 0 {
        assert!(
            Instant::now() < deadline,
            "subscriptions still open on the server"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Far more notices than socket buffers hold: the server stops sending to the subscriber that
/// does not read (TCP holds it back) while the other gets every one.
#[test]
fn tcp_holds_back_a_subscriber_that_does_not_read() {
    let site = Site::new(Engine::Memory);
    let served = site.serve_on(0);
    let port = served.port;
    let stalled = subscribe(port, &Start::Now);
    let mut fast = subscribe(port, &Start::Now);
    let (flushes, per) = (40, 500);
    let producers: Vec<_> = (0..2)
        .map(|p| std::thread::spawn(move || produce(port, p, 0, flushes, per, 8)))
        .collect();
    let total = (2 * flushes * per) as usize;
    let of_fast = take(&mut *fast, total, Duration::from_secs(120));
    for p in producers {
        p.join().unwrap();
    }
    check_once_in_order(&of_fast, &all(2, 0..flushes * per), per);
    let sent = metric(&served, "fieldstore_notices_sent_total");
    eprintln!(
        "{total} notices to the reader, {} to the stalled one",
        sent - total as u64
    );
    assert!(
        sent < 2 * total as u64,
        "the server sent all {total} notices to a subscriber that read none"
    );
    drop(stalled);
}

/// (stream, producer, step) of the next `n` notices.
fn take_streams(sub: &mut dyn Subscription, n: usize) -> Vec<(String, u32, u32)> {
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut got = Vec::new();
    while got.len() < n {
        assert!(Instant::now() < deadline, "{} of {n} notices", got.len());
        if let Some(note) = sub.next_within(Duration::from_millis(500)).unwrap() {
            let (p, s) = who(&note);
            got.push((note.stream.clone(), p, s));
        }
    }
    got
}

/// A `dist` config over two servers: a subscriber through it sees every field once, in flush
/// order per stream (a lane's database), and keeps going while one lane's server is killed
/// and restarted.
#[test]
fn a_dist_over_two_servers_subscribes_every_lane_and_survives_a_lane_restart() {
    let lanes = [Site::new(Engine::Toc), Site::new(Engine::Toc)];
    let mut served: Vec<Served> = lanes.iter().map(|l| l.serve_on(0)).collect();
    let ports: Vec<u16> = served.iter().map(|s| s.port).collect();
    let yaml = format!(
        "type: dist\nlanes:\n- {{id: n1, type: remote, host: 127.0.0.1, port: {}, token: {TOKEN}}}\n- {{id: n2, type: remote, host: 127.0.0.1, port: {}, token: {TOKEN}}}\n",
        ports[0], ports[1]
    );
    let config = fieldstore::model::config::from_yaml_str(&yaml, "test").unwrap();
    let open = || fieldstore::open(&config).unwrap();
    let per = 4;
    let write = |fdb: &dyn Fdb, from: u32, flushes: u32| {
        for f in 0..flushes {
            for j in 0..per {
                fdb.archive(Some(&key(0, from + f * per + j)), b"field")
                    .unwrap();
            }
            fdb.flush().unwrap();
        }
    };
    let dist = open();
    let mut sub = dist
        .subscribe(&parse_request(REQUEST).unwrap(), &Start::Now)
        .unwrap();
    write(&*dist, 0, 5);
    let mut got = take_streams(&mut *sub, 20);
    let lanes_used: BTreeSet<&str> = got.iter().map(|(s, _, _)| &s[..3]).collect();
    assert_eq!(lanes_used.len(), 2, "fields on one lane only: {got:?}");
    // Lane n2's server is killed and started again on its port.
    kill9(&mut served[1]);
    served[1] = lanes[1].serve_on(ports[1]);
    let dist = open();
    write(&*dist, 20, 5);
    got.extend(take_streams(&mut *sub, 20));
    nothing_more(&mut *sub);
    let steps: BTreeSet<u32> = got.iter().map(|(_, _, s)| *s).collect();
    assert_eq!(steps.len(), got.len(), "a field seen twice");
    assert_eq!(steps, (0..40).collect());
    let mut last: BTreeMap<&str, u32> = BTreeMap::new();
    for (stream, _, step) in &got {
        let before = last.insert(stream, step / per).unwrap_or(0);
        assert!(
            step / per >= before,
            "{stream}: flush order broken in {got:?}"
        );
    }
}

/// Field `j` of cycle `c`: bytes no other field of the test has, at every offset.
fn cycle_field(c: u32, j: u32, size: usize) -> Vec<u8> {
    (0..size)
        .map(|i| (i as u32).wrapping_mul(31).wrapping_add(c * 17 + j * 5) as u8)
        .collect()
}

/// A memory server keeps a field in the buffer it arrived in, and once retention wipes a cycle
/// its buffers take the next cycle's fields: each notice must carry exactly its own field's
/// bytes, never what a recycled buffer held before (large fields land past the read buffer,
/// small ones through it).
#[test]
fn fields_in_recycled_buffers_reach_subscribers_as_archived() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("server.yaml"),
        "engine: memory\nmemory: {retain: {databases: 1}}\n",
    )
    .unwrap();
    let site = Site { dir };
    let served = site.serve_on(0);
    let mut sub = client(served.port)
        .subscribe_with_data(&parse_request(REQUEST).unwrap(), &Start::Now)
        .unwrap();
    let sizes = [2 << 20, (2 << 20) - 3, 100_000, 3 << 20];
    for c in 0..4u32 {
        let fdb = client(served.port);
        for (j, size) in sizes.iter().enumerate() {
            let data = cycle_field(c, j as u32, *size);
            fdb.archive(Some(&key(c, j as u32)), &data).unwrap();
        }
        fdb.flush().unwrap();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut got = 0;
        while got < sizes.len() {
            assert!(Instant::now() < deadline, "cycle {c}: {got} notices");
            let Some(n) = sub.next_within(Duration::from_millis(500)).unwrap() else {
                continue;
            };
            let (p, j) = who(&n);
            assert_eq!(p, c, "a notice of another cycle");
            let data = n.data.as_ref().expect("the field comes with its notice");
            assert!(
                data[..] == cycle_field(c, j, sizes[j as usize])[..],
                "cycle {c}, field {j}: the bytes notified are not the field archived"
            );
            got += 1;
        }
    }
}
