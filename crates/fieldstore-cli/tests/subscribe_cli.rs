//! Subscriptions between real processes on a toc store, used directly and through a
//! `fieldstore server`: `fieldstore write` producers (one process per flush), `fieldstore watch`
//! subscribers and `fieldstore read --wait`. Watchers see every field once in flush order per
//! producer, a restarted watcher resumes exactly, a producer killed with SIGKILL before its flush
//! is never seen, and a waiting read returns when the last field is flushed or times out naming
//! what is missing.

mod common;
#[path = "common/server.rs"]
mod server;

use std::collections::{BTreeMap, HashSet};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

const TOKEN: &str = "subscribe-cli-token";

struct Store {
    dir: tempfile::TempDir,
    /// Set when every command goes through a server (`remote.yaml`) instead of the store.
    served: Option<server::Served>,
}

impl Store {
    fn new(through_server: bool) -> Store {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(
            dir.path().join("config.yaml"),
            format!(
                "type: local\nengine: toc\nspaces:\n  - roots:\n      - path: {}\n",
                root.display()
            ),
        )
        .unwrap();
        let mut store = Store { dir, served: None };
        if through_server {
            let mut c = common::fieldstore();
            c.arg("--config").arg(store.path("config.yaml")).args([
                "server",
                "--listen",
                "127.0.0.1:0",
                "--token",
                TOKEN,
            ]);
            store.served = Some(server::start(c, store.dir.path(), TOKEN));
        }
        store
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn cmd(&self) -> Command {
        let config = match self.served {
            Some(_) => "remote.yaml",
            None => "config.yaml",
        };
        let mut c = common::fieldstore();
        c.arg("--config").arg(self.path(config));
        c
    }

    fn ok(&self, args: &[&str]) -> Output {
        let o = self.cmd().args(args).output().unwrap();
        assert!(
            o.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        o
    }

    /// A GRIB file of `param` at `step` on two levels (two fields), made by `fieldstore sample`.
    fn sample(&self, param: &str, step: u32) -> PathBuf {
        let out = self.path(&format!("{param}-{step}.grib"));
        let o = common::fieldstore()
            .args(["sample", "--params", param, "--levels", "500/850"])
            .args(["--steps", &step.to_string(), "--points", "50", "--out"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        out
    }

    fn write(&self, file: &Path) {
        self.ok(&["write", file.to_str().unwrap()]);
    }

    /// A `watch` whose lines arrive on a channel as it prints them.
    fn watch(&self, args: &[&str]) -> Watcher {
        let mut child = self
            .cmd()
            .arg("watch")
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, lines) = mpsc::channel();
        let stdout = child.stdout.take().unwrap();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        Watcher { child, lines }
    }
}

/// Waits until a watcher has subscribed: it saves its position file right after.
fn ready(pos: &Path) {
    let t = Instant::now();
    while !pos.exists() {
        assert!(
            t.elapsed() < Duration::from_secs(30),
            "watcher never subscribed"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

struct Watcher {
    child: Child,
    lines: mpsc::Receiver<String>,
}

impl Watcher {
    /// Waits up to `within` for the next line.
    fn line(&self, within: Duration) -> Option<String> {
        self.lines.recv_timeout(within).ok()
    }

    /// Everything it printed, once it exits by itself (`--count` / `--timeout`).
    fn finish(mut self) -> Vec<String> {
        let status = self.child.wait().unwrap();
        let mut err = String::new();
        if let Some(mut e) = self.child.stderr.take() {
            std::io::Read::read_to_string(&mut e, &mut err).unwrap();
        }
        assert!(status.success(), "watch failed ({status}): {err}");
        self.lines.iter().collect()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn field(line: &str, keyword: &str) -> String {
    let pat = format!("{keyword}=");
    line.split(['{', '}', ','])
        .find_map(|kv| kv.strip_prefix(&pat))
        .unwrap_or_else(|| panic!("no {keyword} in {line}"))
        .to_string()
}

/// Every watcher gets every field exactly once, and each producer's fields in the order it
/// flushed them (3 producer processes at once, 4 flushes each, 2 watchers).
fn producers_and_watchers(through_server: bool) {
    const STEPS: u32 = 4;
    let store = Store::new(through_server);
    let params = ["t", "u", "v"];
    let files: Vec<Vec<PathBuf>> = params
        .iter()
        .map(|p| (0..STEPS).map(|s| store.sample(p, s * 6)).collect())
        .collect();
    let total = (params.len() as u32 * STEPS * 2).to_string();
    let watchers: Vec<Watcher> = (0..2)
        .map(|i| {
            let pos = store.path(&format!("w{i}.pos"));
            let w = store.watch(&[
                "class=od",
                "--count",
                &total,
                "--timeout",
                "60s",
                "--position-file",
                pos.to_str().unwrap(),
            ]);
            ready(&pos);
            w
        })
        .collect();
    thread::scope(|s| {
        for producer in &files {
            let store = &store;
            s.spawn(move || {
                for f in producer {
                    store.write(f);
                }
            });
        }
    });
    for w in watchers {
        let lines = w.finish();
        assert_eq!(lines.len(), params.len() * STEPS as usize * 2, "{lines:#?}");
        let distinct: HashSet<&String> = lines.iter().collect();
        assert_eq!(
            distinct.len(),
            lines.len(),
            "a field came twice: {lines:#?}"
        );
        let mut per_producer: BTreeMap<String, Vec<u32>> = BTreeMap::new();
        for l in &lines {
            per_producer
                .entry(field(l, "param"))
                .or_default()
                .push(field(l, "step").parse().unwrap());
        }
        assert_eq!(per_producer.len(), 3, "{per_producer:?}");
        for (param, steps) in per_producer {
            let mut sorted = steps.clone();
            sorted.sort_unstable();
            assert_eq!(steps, sorted, "param {param}: not in flush order");
        }
    }
}

/// A watcher stopped (SIGTERM) in the middle and started again with its position file: the two
/// runs together printed every field once.
fn restarted_watcher(through_server: bool) {
    let store = Store::new(through_server);
    let files: Vec<PathBuf> = (0..6).map(|s| store.sample("t", s)).collect();
    let pos = store.path("watch.pos");
    let pos_arg = pos.to_str().unwrap();
    let first = store.watch(&["class=od", "--position-file", pos_arg, "--timeout", "60s"]);
    let producer = thread::scope(|s| {
        let h = s.spawn(|| {
            for f in &files {
                store.write(f);
            }
        });
        let mut seen = Vec::new();
        while seen.len() < 3 {
            seen.push(
                first
                    .line(Duration::from_secs(30))
                    .expect("the first watcher printed nothing"),
            );
        }
        let killed = Command::new("kill")
            .arg("-TERM")
            .arg(first.child.id().to_string())
            .status()
            .unwrap();
        assert!(killed.success());
        h.join().unwrap();
        seen
    });
    let mut lines = producer;
    lines.extend(first.finish());
    assert!(lines.len() < 12, "stopped too late to test a resume");
    let rest = (12 - lines.len()).to_string();
    let second = store.watch(&[
        "class=od",
        "--position-file",
        pos_arg,
        "--count",
        &rest,
        "--timeout",
        "30s",
    ]);
    lines.extend(second.finish());
    let distinct: HashSet<&String> = lines.iter().collect();
    assert_eq!(lines.len(), 12, "{lines:#?}");
    assert_eq!(distinct.len(), 12, "a field came twice: {lines:#?}");
    // Nothing more: a third run from the saved position prints nothing.
    let third = store.watch(&["class=od", "--position-file", pos_arg, "--timeout", "1s"]);
    assert_eq!(third.finish(), Vec::<String>::new());
}

/// `write -` archives its input batch by batch and flushes at the end of it: killed
/// with SIGKILL after archiving (its `--verbose` lines say so) and before that end, its fields
/// were never flushed, and no watcher (live, or reading from the beginning later) prints them.
fn killed_producer(through_server: bool) {
    let store = Store::new(through_server);
    let (before, doomed, after) = (
        store.sample("t", 0),
        store.sample("t", 6),
        store.sample("t", 12),
    );
    let live_pos = store.path("live.pos");
    let live = store.watch(&[
        "class=od",
        "--count",
        "4",
        "--timeout",
        "60s",
        "--position-file",
        live_pos.to_str().unwrap(),
    ]);
    ready(&live_pos);
    store.write(&before);
    let mut victim = store
        .cmd()
        .args(["write", "--verbose", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = victim.stdin.take().unwrap();
    // The archiver takes its input in batches of 256 messages: more than one batch, so the
    // first is archived while it waits for the rest.
    let step = std::fs::read(&doomed).unwrap();
    for _ in 0..130 {
        stdin.write_all(&step).unwrap();
    }
    stdin.flush().unwrap();
    let mut err = BufReader::new(victim.stderr.take().unwrap());
    let mut archived = 0;
    let mut line = String::new();
    while archived < 256 {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "write - ended early");
        if line.contains("message") {
            archived += 1;
        }
    }
    victim.kill().unwrap(); // SIGKILL, its input still open: nothing flushed
    victim.wait().unwrap();
    drop(stdin);
    store.write(&after);
    let seen = live.finish();
    let steps: Vec<String> = seen.iter().map(|l| field(l, "step")).collect();
    assert_eq!(steps, ["0", "0", "12", "12"], "{seen:#?}");
    let replay = store.watch(&["class=od", "--from", "beginning", "--timeout", "1s"]);
    let steps: Vec<String> = replay.finish().iter().map(|l| field(l, "step")).collect();
    assert_eq!(steps, ["0", "0", "12", "12"]);
}

const REQUEST: &str =
    "class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl,param=t,levelist=500/850";

/// `read --wait` returns once another process flushes the last field, with every field in its
/// output; a field that never comes fails it naming that field, leaving no file (or, with
/// `--keep-partial`, what came).
fn read_wait(through_server: bool) {
    let store = Store::new(through_server);
    let (s0, s6) = (store.sample("t", 0), store.sample("t", 6));
    store.write(&s0);
    let out = store.path("out.grib");
    let request = format!("{REQUEST},step=0/6");
    let started = Instant::now();
    let reader = store
        .cmd()
        .args(["read", "--wait", "60s", &request])
        .arg(&out)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    thread::sleep(Duration::from_millis(300));
    store.write(&s6);
    let o = reader.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Long before the wait's end: it returned because the field came, not because time ran out.
    assert!(started.elapsed() < Duration::from_secs(30));
    let plain = store.path("plain.grib");
    store.ok(&["read", &request, plain.to_str().unwrap()]);
    let (got, want) = (std::fs::read(&out).unwrap(), std::fs::read(&plain).unwrap());
    assert_eq!(got.len(), want.len());

    let request = format!("{REQUEST},step=6/18");
    let missing = store.path("missing.grib");
    let o = store
        .cmd()
        .args(["read", "--wait", "1s", &request])
        .arg(&missing)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("step=18"), "{err}");
    assert!(!err.contains("step=6,"), "named a field that came: {err}");
    assert!(
        !missing.exists(),
        "a timed-out read left its partial output"
    );
    let o = store
        .cmd()
        .args(["read", "--wait", "1s", "--keep-partial", &request])
        .arg(&missing)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    let kept = std::fs::metadata(&missing).unwrap().len();
    assert_eq!(
        kept,
        want.len() as u64 / 2,
        "the two step-6 fields are kept"
    );
}

/// The line forms: JSON lines, aviso's CloudEvents notification, and `--exec` with the key in
/// the environment and the line on standard input.
fn watch_forms(through_server: bool) {
    let store = Store::new(through_server);
    store.write(&store.sample("t", 0));
    let porcelain = store.ok(&["list", "--porcelain", "class=od"]).stdout;
    let porcelain = String::from_utf8(porcelain).unwrap();
    let plain = store.watch(&["class=od", "--from", "beginning", "--count", "2"]);
    assert_eq!(plain.finish().join("\n") + "\n", porcelain);

    let json = store.watch(&["class=od", "--from", "beginning", "--count", "2", "--json"]);
    let lines = json.finish();
    let first: serde_json::Value = serde_json::from_str(&lines[0]).unwrap();
    assert_eq!(first["key"]["param"], "130");
    assert_eq!(first["key"]["step"], "0");
    assert!(first["location"]["uri"]
        .as_str()
        .unwrap()
        .starts_with("file://"));
    assert!(first["location"]["length"].as_u64().unwrap() > 0);
    assert!(first["timestamp"].as_u64().unwrap() > 1_700_000_000);
    // The position of a line resumes after it: from the first line's, the second alone.
    let token = first["position"].as_str().unwrap();
    let resumed = store.watch(&["class=od", "--from", token, "--timeout", "1s"]);
    let rest = resumed.finish();
    assert_eq!(rest, [porcelain.lines().nth(1).unwrap()]);

    let aviso = store.watch(&["class=od", "--from", "beginning", "--count", "1", "--aviso"]);
    let note: serde_json::Value = serde_json::from_str(&aviso.finish()[0]).unwrap();
    assert_eq!(note["specversion"], "1.0");
    assert_eq!(note["type"], "aviso");
    assert_eq!(note["data"]["event"], "mars");
    assert_eq!(note["data"]["request"]["levelist"], "500");
    assert!(note["data"]["location"]
        .as_str()
        .unwrap()
        .starts_with("file://"));
    assert!(note["id"].as_str().is_some_and(|s| !s.is_empty()));

    let log = store.path("exec.log");
    let cmd = format!(
        "read line; echo \"$FIELDSTORE_LEVELIST $FIELDSTORE_KEY $line\" >> {}; [ \"$FIELDSTORE_LEVELIST\" = 500 ]",
        log.display()
    );
    let exec = store
        .cmd()
        .args(["watch", "class=od", "--from", "beginning", "--count", "2"])
        .args(["--exec", &cmd])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&exec.stderr);
    assert!(exec.status.success(), "{err}");
    assert!(
        err.contains("failed") && err.contains("levelist=850"),
        "{err}"
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    let logged: Vec<&str> = logged.lines().collect();
    let keys: Vec<&str> = porcelain.lines().collect();
    assert_eq!(
        logged,
        [
            format!("500 {} {}", keys[0], keys[0]),
            format!("850 {} {}", keys[1], keys[1])
        ]
    );
    let stop = store
        .cmd()
        .args(["watch", "class=od", "--from", "beginning", "--count", "2"])
        .args(["--exec", "exit 3", "--exec-fail-stop"])
        .output()
        .unwrap();
    assert_eq!(stop.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&stop.stderr).contains("exec-fail-stop"));
}

#[test]
fn every_watcher_sees_every_flushed_field_once_in_flush_order_per_producer() {
    producers_and_watchers(false);
}

#[test]
fn every_watcher_sees_every_flushed_field_once_in_flush_order_per_producer_through_a_server() {
    producers_and_watchers(true);
}

#[test]
fn a_restarted_watcher_misses_nothing_and_repeats_nothing() {
    restarted_watcher(false);
}

#[test]
fn a_restarted_watcher_misses_nothing_and_repeats_nothing_through_a_server() {
    restarted_watcher(true);
}

#[test]
fn fields_of_a_producer_killed_before_its_flush_are_never_seen() {
    killed_producer(false);
}

#[test]
fn fields_of_a_producer_killed_before_its_flush_are_never_seen_through_a_server() {
    killed_producer(true);
}

#[test]
fn read_wait_returns_when_the_last_field_is_flushed_and_times_out_naming_the_missing() {
    read_wait(false);
}

#[test]
fn read_wait_returns_when_the_last_field_is_flushed_and_times_out_naming_the_missing_through_a_server(
) {
    read_wait(true);
}

#[test]
fn watch_prints_json_and_aviso_lines_and_runs_a_command_per_field() {
    watch_forms(false);
}

#[test]
fn watch_prints_json_and_aviso_lines_and_runs_a_command_per_field_through_a_server() {
    watch_forms(true);
}
