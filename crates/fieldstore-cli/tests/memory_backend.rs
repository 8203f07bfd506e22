//! `engine: memory` end to end: a memory-backed `fieldstore server` with a small capacity,
//! written to and read from by other processes; writes beyond the capacity fail with a clear
//! error at the client, flushed data stays readable, and wipe gives the space back.

mod common;
#[path = "common/server.rs"]
mod server;

use server::Served;

use std::path::PathBuf;
use std::process::Output;

const TOKEN: &str = "memory-test-token";
const DB: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200";
/// What the store counts per field besides its bytes (`storage::memory::ENTRY_OVERHEAD`).
const OVERHEAD: u64 = fieldstore::storage::memory::ENTRY_OVERHEAD;

struct Dir(tempfile::TempDir);

impl Dir {
    fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }

    fn run(&self, config: &str, args: &[&str]) -> Output {
        common::fieldstore()
            .arg("--config")
            .arg(self.path(config))
            .args(args)
            .output()
            .unwrap()
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

    /// Four fields (t/u on 1000/500) per step.
    fn sample(&self, steps: &str) -> PathBuf {
        let p = self.path(&format!("s{}.grib", steps.replace('/', "_")));
        self.ok(
            "memory.yaml",
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
                "2000",
            ],
        );
        p
    }

    fn list(&self) -> Vec<String> {
        let mut v: Vec<String> = self
            .ok(
                "remote.yaml",
                &["list", "class=od,expver=0001", "--porcelain"],
            )
            .lines()
            .map(str::to_string)
            .collect();
        v.sort();
        v
    }

    /// A memory-backed server; `remote.yaml` points at it.
    fn serve(&self) -> Served {
        let mut c = common::fieldstore();
        c.arg("--config").arg(self.path("memory.yaml")).args([
            "server",
            "--listen",
            "127.0.0.1:0",
            "--token",
            TOKEN,
        ]);
        server::start(c, self.0.path(), TOKEN)
    }
}

fn messages(path: &std::path::Path) -> Vec<Vec<u8>> {
    fieldstore::grib::MessageReader::new(std::fs::File::open(path).unwrap(), "test")
        .map(|m| m.unwrap().bytes)
        .collect()
}

#[test]
fn a_memory_server_fills_up_clearly_and_wipe_frees_it() {
    let d = Dir(tempfile::tempdir().unwrap());
    std::fs::write(d.path("memory.yaml"), "engine: memory\n").unwrap();
    let (a, b, c) = (d.sample("0"), d.sample("6"), d.sample("12"));
    let fields: Vec<u64> = messages(&a).iter().map(|m| m.len() as u64).collect();
    assert_eq!(fields.len(), 4);
    let one_write: u64 = fields.iter().map(|n| n + OVERHEAD).sum();
    // Two writes fit; not even one field of a third.
    let capacity = 2 * one_write + fields[0] / 2;
    std::fs::write(
        d.path("memory.yaml"),
        // Unnamed: the server's per-connection handles still share the one store.
        format!("engine: memory\nmemory: {{capacity: {capacity}}}\n"),
    )
    .unwrap();
    let info = d.ok("memory.yaml", &["info"]);
    assert!(info.contains("engine memory"), "{info}");

    let _server = d.serve();
    d.ok("remote.yaml", &["write", a.to_str().unwrap()]);
    d.ok("remote.yaml", &["write", b.to_str().unwrap()]);
    assert_eq!(d.list().len(), 8);

    let e = d.fails("remote.yaml", &["write", c.to_str().unwrap()]);
    assert!(
        e.contains("is full") && e.contains("wipe") && e.contains("capacity"),
        "{e}"
    );
    // What was flushed is all there, byte for byte; nothing of the refused write is.
    assert_eq!(d.list().len(), 8);
    let out = d.path("out.grib");
    d.ok(
        "remote.yaml",
        &[
            "read",
            &format!("{DB},type=fc,levtype=pl,param=t/u,levelist=1000/500,step=0/6"),
            out.to_str().unwrap(),
        ],
    );
    let mut want = messages(&a);
    want.extend(messages(&b));
    let mut got = messages(&out);
    want.sort();
    got.sort();
    assert_eq!(got, want);
    let listed = d.ok("remote.yaml", &["list", "class=od", "--location"]);
    assert!(listed.contains("memory://unnamed-"), "{listed}");

    // Wipe frees the space: the refused write goes through now.
    d.ok("remote.yaml", &["wipe", DB, "--doit"]);
    assert!(d.list().is_empty());
    d.ok("remote.yaml", &["write", c.to_str().unwrap()]);
    let listed = d.list();
    assert_eq!(listed.len(), 4);
    assert!(listed.iter().all(|l| l.contains("step=12")), "{listed:?}");
}

#[test]
fn a_memory_config_works_within_one_command() {
    let d = Dir(tempfile::tempdir().unwrap());
    std::fs::write(
        d.path("memory.yaml"),
        "engine: memory\nmemory: {capacity: 1KiB}\n",
    )
    .unwrap();
    let a = d.sample("0");
    // Each command is its own process, so its store starts empty; a write that does not fit
    // says so.
    let e = d.fails("memory.yaml", &["write", a.to_str().unwrap()]);
    assert!(e.contains("is full"), "{e}");
    std::fs::write(d.path("memory.yaml"), "engine: memory\n").unwrap();
    d.ok("memory.yaml", &["write", a.to_str().unwrap()]);
    assert!(d.ok("memory.yaml", &["list", "class=od"]).trim().is_empty());
}

/// The hammer's forecast: 2 members x 3 steps x 2 levels x 2 params = 24 fields.
const SHAPE: [&str; 12] = [
    "--members",
    "2",
    "--steps",
    "3",
    "--levels",
    "2",
    "--params",
    "2",
    "--processes",
    "2",
    "--date",
    "20261122",
];

impl Dir {
    /// `fieldstore hammer` against the server, from other processes (the hammer's own).
    fn hammer(&self, extra: &[&str]) -> Output {
        let mut c = common::fieldstore();
        c.arg("--config")
            .arg(self.path("remote.yaml"))
            .args(["hammer", "--json"])
            .args(SHAPE)
            .args(extra)
            .env("TMPDIR", self.0.path());
        c.output().unwrap()
    }

    fn hammer_ok(&self, extra: &[&str]) -> serde_json::Value {
        let o = self.hammer(extra);
        assert!(
            o.status.success(),
            "hammer {extra:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        serde_json::from_slice(&o.stdout).unwrap()
    }
}

fn phase<'a>(report: &'a serde_json::Value, name: &str) -> &'a serde_json::Value {
    report["phases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .unwrap_or_else(|| panic!("no phase {name} in {report}"))
}

#[test]
fn the_hammer_verifies_against_a_memory_server_and_is_refused_beyond_capacity() {
    let d = Dir(tempfile::tempdir().unwrap());
    // Room for one forecast (24 fields of about 2.2 KiB) but not two.
    let capacity: u64 = 90 * 1024;
    std::fs::write(
        d.path("memory.yaml"),
        format!("engine: memory\nmemory: {{capacity: {capacity}}}\n"),
    )
    .unwrap();
    let _server = d.serve();

    let w = d.hammer_ok(&[]);
    assert_eq!(w["fields"], 24);
    assert_eq!(w["errors"], 0);
    let used = phase(&w, "archive")["bytes"].as_u64().unwrap() + 24 * OVERHEAD;
    assert!(
        used <= capacity && 2 * used > capacity,
        "the test's capacity must fit one forecast ({used} bytes) and not two"
    );

    // Every field is read back from the server by its own request and checked by its stamp.
    let r = d.hammer_ok(&["--mode", "read", "--verify"]);
    assert_eq!(phase(&r, "retrieve")["fields"], 24);
    assert_eq!(phase(&r, "retrieve")["errors"], 0);
    let l = d.hammer_ok(&["--mode", "list"]);
    assert_eq!(phase(&l, "list")["fields"], 24);

    // A second forecast does not fit: the hammer fails, saying why, and the first stays whole.
    let o = d.hammer(&["--expver", "hmm2"]);
    let e = String::from_utf8_lossy(&o.stderr);
    assert!(
        !o.status.success(),
        "a write beyond capacity succeeded: {e}"
    );
    assert!(e.contains("is full") && e.contains("capacity"), "{e}");
    assert!(!e.contains("panicked"), "{e}");
    let r = d.hammer_ok(&["--mode", "read", "--verify"]);
    assert_eq!(phase(&r, "retrieve")["errors"], 0);
}
