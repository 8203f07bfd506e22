//! kill -9 rounds on the FDB5-format writer, with Debian's FDB5 5.10.8 reading the store after
//! each round: `fieldstore write` of one run's fields (two index keys, so each flush goes
//! through a sub-toc) into a `format: fdb5` store, killed at a random instant. Afterwards every
//! run whose write returned is listed whole by FDB5's `fdb-list`, a killed run is listed whole or
//! not at all (one flush per write), fieldstore's `fdb-list` prints FDB5's lines byte for byte,
//! and FDB5's `fdb-read` returns exactly the bytes fieldstore reads.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

#[path = "common/fdb5.rs"]
#[allow(dead_code)]
mod fdb5;
#[path = "common/skip.rs"]
mod skip;
use fdb5::{configured, have_fdb5, run};

const FS: &str = env!("CARGO_BIN_EXE_fieldstore");

fn schema() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fieldstore/tests/fixtures/ecmwf-fdb5-schema")
}

/// The fields of run `r`: step `r`, pressure levels and surface, so two indexes per flush.
fn make_run(dir: &Path, r: usize) -> PathBuf {
    let out = dir.join(format!("run{r}.grib"));
    let mut bytes = Vec::new();
    for levtype in ["pl", "sfc"] {
        let part = dir.join(format!("run{r}.{levtype}.grib"));
        run(Command::new(FS).args([
            "sample",
            "--out",
            part.to_str().unwrap(),
            "--points",
            "2000",
            "--steps",
            &r.to_string(),
            "--params",
            "t/u/v/q/w",
            "--levels",
            "1000/925/850/700/500/300",
            "--levtype",
            levtype,
        ]));
        bytes.extend(std::fs::read(&part).unwrap());
    }
    std::fs::write(&out, bytes).unwrap();
    out
}

/// `fdb-list --porcelain` lines (FDB5's, or fieldstore's under FDB5's name), sorted.
fn listing(tool: &str, config: &Path, home: &Path) -> Vec<String> {
    let mut lines: Vec<String> = run(configured(&mut Command::new(tool), config, home)
        .env("FDB_DBNAMES_FILE", "/nonexistent")
        .args(["class=od,expver=0001", "--porcelain", "--location"]))
    .lines()
    .map(str::to_string)
    .collect();
    lines.sort();
    lines
}

/// The steps present in a listing.
fn steps(lines: &[String]) -> Vec<(usize, usize)> {
    let mut per: std::collections::BTreeMap<usize, usize> = Default::default();
    for l in lines {
        if let Some(s) = l.split("step=").nth(1) {
            let n: String = s.chars().take_while(|c| c.is_ascii_digit()).collect();
            if let Ok(n) = n.parse() {
                *per.entry(n).or_default() += 1;
            }
        }
    }
    per.into_iter().collect()
}

#[test]
fn killed_fdb5_format_writers_leave_whole_flushes_that_fdb5_reads() {
    if !have_fdb5() {
        skip::skip("fdb5_kills", "FDB5's fdb-write", true);
        return;
    }
    let d = tempfile::tempdir().unwrap();
    let home = d.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let bin = d.path().join("bin");
    run(Command::new(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/install-fdb-tools"),
    )
    .arg("--bin")
    .arg(FS)
    .arg(&bin));
    let root = d.path().join("root");
    let config = d.path().join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "type: local\nengine: toc\nformat: fdb5\nschema: {}\nspaces:\n- handler: Default\n  roots:\n  - path: {}\n",
            schema().display(),
            root.display()
        ),
    )
    .unwrap();
    let rounds: usize = std::env::var("FIELDSTORE_FDB5_KILL_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(24);
    let mut done: BTreeSet<usize> = BTreeSet::new();
    let mut killed = 0;
    let mut killed_visible = 0;
    let mut seed: u64 = 0x0fdb_5c0d;
    // How long a whole write takes here: kills land anywhere in it, or just after.
    let mut span = Duration::from_millis(200);
    for r in 0..rounds {
        let input = make_run(d.path(), r);
        let started = std::time::Instant::now();
        let mut child = configured(&mut Command::new(FS), &config, &home)
            .env("FDB_DBNAMES_FILE", "/nonexistent")
            .args(["write", input.to_str().unwrap()])
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        // Round 0 runs whole, to time a write; later ones die anywhere in it, some finish.
        if r > 0 {
            let at = span.as_micros() as u64 * 5 / 4;
            std::thread::sleep(Duration::from_micros(seed % at.max(1)));
            let _ = child.kill();
        }
        let status = child.wait().unwrap();
        if r == 0 {
            span = started.elapsed();
        }
        if status.success() {
            done.insert(r);
        } else {
            killed += 1;
        }
        let fdb5 = listing("fdb-list", &config, &home);
        let ours = listing(bin.join("fdb-list").to_str().unwrap(), &config, &home);
        assert_eq!(
            ours, fdb5,
            "round {r}: fieldstore's fdb-list differs from FDB5's"
        );
        let seen = steps(&fdb5);
        let whole = seen.iter().map(|&(_, n)| n).max().unwrap_or(0);
        for &(step, n) in &seen {
            assert_eq!(
                n, whole,
                "round {r}: run {step} is visible in part ({n} of {whole} fields): {seen:?}"
            );
        }
        if !status.success() && seen.iter().any(|&(step, _)| step == r) {
            killed_visible += 1;
        }
        for s in &done {
            assert!(
                seen.iter().any(|&(step, _)| step == *s),
                "round {r}: run {s} returned Ok but FDB5 does not list it: {seen:?}"
            );
        }
        // FDB5 reads exactly what fieldstore reads.
        let req = d.path().join("req");
        std::fs::write(
            &req,
            "retrieve,class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,param=t/u/v/q/w,levelist=1000/925/850/700/500/300,step=0/to/100\n",
        )
        .unwrap();
        if !seen.is_empty() {
            let theirs = d.path().join("theirs.grib");
            let mine = d.path().join("mine.grib");
            let _ = std::fs::remove_file(&theirs);
            let o = configured(&mut Command::new("fdb-read"), &config, &home)
                .env("FDB_DBNAMES_FILE", "/nonexistent")
                .arg(&req)
                .arg(&theirs)
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "round {r}: fdb-read: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            let o = configured(&mut Command::new(bin.join("fdb-read")), &config, &home)
                .env("FDB_DBNAMES_FILE", "/nonexistent")
                .arg(&req)
                .arg(&mine)
                .output()
                .unwrap();
            assert!(
                o.status.success(),
                "round {r}: our fdb-read: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            assert!(
                std::fs::read(&theirs).unwrap() == std::fs::read(&mine).unwrap(),
                "round {r}: FDB5 and fieldstore read different bytes"
            );
        }
    }
    println!(
        "{rounds} rounds: {} writes finished, {killed} killed ({killed_visible} of them after their flush); FDB5 read the store after each",
        done.len()
    );
    assert!(killed > 0, "no round was killed: the test shows nothing");
}
