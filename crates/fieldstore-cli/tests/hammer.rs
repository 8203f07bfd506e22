//! `fieldstore hammer` through the real binary, with real worker processes: what it writes is in
//! the store, read-back verification catches missing fields, and the DAOS patterns run clean.

mod common;

use std::path::PathBuf;
use std::process::Output;

struct Store {
    dir: tempfile::TempDir,
    config: PathBuf,
}

impl Store {
    fn new() -> Store {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("root");
        std::fs::create_dir(&root).unwrap();
        let config = dir.path().join("config.yaml");
        std::fs::write(
            &config,
            format!(
                "type: local\nengine: toc\nspaces: [{{handler: Default, roots: [{{path: {}}}]}}]\n",
                root.display()
            ),
        )
        .unwrap();
        Store { dir, config }
    }

    fn run(&self, args: &[&str]) -> Output {
        let mut c = common::fieldstore();
        c.arg("--config").arg(&self.config).args(args);
        c.env("TMPDIR", self.dir.path());
        c.output().unwrap()
    }

    /// Runs the hammer with --json and returns its report.
    fn hammer(&self, args: &[&str]) -> serde_json::Value {
        let mut all = vec!["hammer", "--json", "--date", "20261122"];
        all.extend_from_slice(args);
        let o = self.run(&all);
        assert!(
            o.status.success(),
            "{all:?}: {}\n{}",
            String::from_utf8_lossy(&o.stderr),
            String::from_utf8_lossy(&o.stdout)
        );
        serde_json::from_slice(&o.stdout).unwrap()
    }

    fn count(&self, request: &str) -> usize {
        let o = self.run(&["list", request, "--porcelain"]);
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).lines().count()
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

const SHAPE: [&str; 8] = [
    "--members",
    "3",
    "--steps",
    "4",
    "--levels",
    "5",
    "--params",
    "3",
];

#[test]
fn write_read_and_list_a_forecast_from_several_processes() {
    let s = Store::new();
    let mut args = SHAPE.to_vec();
    args.extend(["--processes", "3", "--flush-every", "2"]);
    let w = s.hammer(&args);
    assert_eq!(w["fields"], 180);
    assert_eq!(phase(&w, "archive")["fields"], 180);
    // Each of 3 processes flushes after steps 2 and 4.
    assert_eq!(phase(&w, "flush")["ops"], 6);
    assert_eq!(w["errors"], 0);
    for q in ["p50", "p90", "p99", "max"] {
        assert!(phase(&w, "archive")["latency_us"][q].as_f64().unwrap() > 0.0);
    }
    // What the hammer reports is in the store, with the keys it names.
    assert_eq!(
        s.count("class=od,expver=hmmr,stream=enfo,date=20261122"),
        180
    );
    assert_eq!(
        s.count("class=od,expver=hmmr,stream=enfo,date=20261122,number=2,step=3,param=131"),
        5
    );

    let mut read = args.clone();
    read.extend(["--mode", "read", "--verify"]);
    let r = s.hammer(&read);
    assert_eq!(phase(&r, "retrieve")["fields"], 180);
    assert_eq!(phase(&r, "retrieve")["errors"], 0);
    assert!(phase(&r, "retrieve")["bytes"].as_u64().unwrap() > 180 * 2000);

    let mut list = args.clone();
    list.extend(["--mode", "list"]);
    let l = s.hammer(&list);
    assert_eq!(phase(&l, "list")["ops"], 4);
    assert_eq!(phase(&l, "list")["fields"], 180);
}

#[test]
fn verified_reads_fail_on_fields_that_are_not_there() {
    let s = Store::new();
    s.hammer(&SHAPE);
    // Ask for one more step than was written: 45 fields are missing.
    let o = s.run(&[
        "hammer",
        "--date",
        "20261122",
        "--members",
        "3",
        "--steps",
        "5",
        "--levels",
        "5",
        "--params",
        "3",
        "--mode",
        "read",
        "--verify",
    ]);
    assert!(!o.status.success());
    let out = String::from_utf8_lossy(&o.stdout);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(out.contains("step=4") && out.contains("not found"), "{out}");
    assert!(err.contains("45 operations failed"), "{err}");
}

#[test]
fn daos_patterns_run_clean_with_real_processes() {
    let s = Store::new();
    let a = s.hammer(&["--pattern", "0A", "--processes", "4", "--iterations", "2"]);
    assert_eq!(phase(&a, "archive+flush")["ops"], 8);
    assert_eq!(phase(&a, "retrieve")["errors"], 0);

    let b = s.hammer(&["--pattern", "0B", "--processes", "4", "--expver", "hmm2"]);
    assert_eq!(phase(&b, "archive+flush")["ops"], 4);
    assert_eq!(s.count("class=od,expver=hmm2"), 4);

    let mut one = SHAPE.to_vec();
    one.extend(["--pattern", "1", "--processes", "2", "--expver", "hmm3"]);
    let p1 = s.hammer(&one);
    assert_eq!(phase(&p1, "archive")["fields"], 180);
    assert_eq!(phase(&p1, "retrieve")["fields"], 180);
    assert_eq!(p1["errors"], 0);

    let mut two = SHAPE.to_vec();
    two.extend([
        "--pattern",
        "2B",
        "--processes",
        "4",
        "--iterations",
        "3",
        "--expver",
        "hmm4",
    ]);
    let p2 = s.hammer(&two);
    // Two writers rewrite all 180 fields three times while two readers read them.
    assert_eq!(phase(&p2, "archive")["fields"], 540);
    assert!(phase(&p2, "retrieve")["fields"].as_u64().unwrap() >= 180);
    assert_eq!(p2["errors"], 0);
    assert!(p2["notes"]
        .to_string()
        .contains("2B: 2 readers saw versions"));

    let o = s.run(&["hammer", "--pattern", "2B"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("at least 2 processes"));
}

#[test]
fn the_hammer_runs_unchanged_through_a_dist_config() {
    let s = Store::new();
    let (a, b) = (s.dir.path().join("a"), s.dir.path().join("b"));
    std::fs::write(
        &s.config,
        format!(
            "type: dist\nlanes:\n- {{id: a, type: local, spaces: [{{roots: [{{path: {}}}]}}]}}\n- {{id: b, type: local, spaces: [{{roots: [{{path: {}}}]}}]}}\n",
            a.display(),
            b.display()
        ),
    )
    .unwrap();
    let mut args = SHAPE.to_vec();
    args.extend(["--processes", "2"]);
    assert_eq!(s.hammer(&args)["errors"], 0);
    let mut read = SHAPE.to_vec();
    read.extend(["--mode", "read", "--verify"]);
    assert_eq!(phase(&s.hammer(&read), "retrieve")["fields"], 180);
    let mut list = SHAPE.to_vec();
    list.extend(["--mode", "list"]);
    assert_eq!(phase(&s.hammer(&list), "list")["fields"], 180);
    // Each lane holds part of the forecast, together all of it.
    let mut total = 0;
    for lane in [&a, &b] {
        let config = lane.with_extension("yaml");
        std::fs::write(
            &config,
            format!(
                "type: local\nspaces: [{{roots: [{{path: {}}}]}}]\n",
                lane.display()
            ),
        )
        .unwrap();
        let o = common::fieldstore()
            .arg("--config")
            .arg(&config)
            .args(["list", "--all", "--porcelain"])
            .output()
            .unwrap();
        let n = String::from_utf8_lossy(&o.stdout).lines().count();
        assert!(n > 30, "lane {} holds {n} fields", lane.display());
        total += n;
    }
    assert_eq!(total, 180);
}
