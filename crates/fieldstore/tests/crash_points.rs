//! Crash consistency proved, not sampled: a workload of three writers (two flushes each, new
//! keys and replacements), a compact, a purge and a wipe is run once to count its sync points,
//! then once per sync point, crashing there. After each crash the store is reopened and what a
//! reader sees must equal the model: every operation that returned Ok is wholly there, the one
//! cut short is wholly there or wholly absent (per database: a flush commits each database on
//! its own), and the store takes new flushes. Then every point again with torn writes.

#[path = "support/store_model.rs"]
mod store_model;

use fieldstore::api::{Fdb, LocalFdb};
use fieldstore::model::request::parse_request;
use fieldstore::storage::fs::SimFs;
use store_model::*;

#[derive(Debug, Clone, Copy)]
enum Op {
    /// Writer, database, type, step.
    Archive(usize, usize, &'static str, &'static str),
    Flush(usize),
    Compact(usize),
    Purge(usize),
    Wipe(usize),
}

use Op::*;

/// Databases 0 and 1 (by date); writers 0..3 as three processes would be.
const WORKLOAD: &[Op] = &[
    Archive(0, 0, "fc", "0"),
    Archive(0, 0, "fc", "6"),
    Archive(0, 0, "an", "0"),
    Archive(0, 1, "fc", "0"),
    Flush(0),
    Archive(1, 0, "fc", "0"),
    Archive(1, 0, "fc", "12"),
    Archive(1, 1, "fc", "6"),
    Flush(1),
    Archive(2, 1, "fc", "0"),
    Archive(2, 0, "an", "0"),
    Archive(2, 0, "fc", "6"),
    Flush(2),
    Archive(0, 0, "fc", "12"),
    Archive(0, 1, "an", "0"),
    Flush(0),
    Archive(1, 0, "fc", "0"),
    Archive(1, 1, "fc", "6"),
    Flush(1),
    Archive(2, 0, "fc", "6"),
    Archive(2, 0, "an", "0"),
    Archive(2, 1, "fc", "12"),
    Flush(2),
    Compact(0),
    Purge(0),
    Wipe(1),
];

fn db_request(db: usize) -> String {
    format!("class=od,expver=1,stream=oper,date={},time=12", DATES[db])
}

/// A writer's unflushed field: database, type, step, bytes.
type Archived = (usize, String, String, Vec<u8>);

/// The views after each operation, as the model says (`views[i]`: after operations `..i`).
fn model_views() -> Vec<View> {
    let empty: View = DATES
        .iter()
        .map(|d| (d.to_string(), DbView::new()))
        .collect();
    let mut views = vec![empty.clone()];
    let mut view = empty;
    let mut pending: [Vec<Archived>; 3] = Default::default();
    for (i, op) in WORKLOAD.iter().enumerate() {
        match *op {
            Archive(w, db, ty, step) => pending[w].push((
                db,
                ty.into(),
                step.into(),
                payload(DATES[db], ty, step, i as u64),
            )),
            Flush(w) => {
                for (db, ty, step, bytes) in pending[w].drain(..) {
                    view.get_mut(DATES[db])
                        .expect("known date")
                        .insert((ty, step), bytes);
                }
            }
            Compact(_) | Purge(_) => {}
            Wipe(db) => {
                view.insert(DATES[db].to_string(), DbView::new());
            }
        }
        views.push(view.clone());
    }
    views
}

fn run(handles: &[LocalFdb], op: Op, i: usize) -> Result<(), String> {
    let req = |db: usize| parse_request(&db_request(db)).map_err(|e| e.to_string());
    let r = match op {
        Archive(w, db, ty, step) => handles[w].archive(
            Some(&key(DATES[db], ty, step)),
            &payload(DATES[db], ty, step, i as u64),
        ),
        Flush(w) => handles[w].flush(),
        Compact(db) => handles[0].compact(&req(db)?).map(drop),
        Purge(db) => handles[1].purge(&req(db)?, true).map(drop),
        Wipe(db) => handles[2].wipe(&req(db)?, true).map(drop),
    };
    r.map_err(|e| format!("{op:?}: {e}"))
}

/// Where the workload stopped: the operation during which the system went down, and whether
/// that operation still returned Ok (a crash in a flush's automatic merge, after its commit).
struct Stopped {
    at: Option<(usize, bool)>,
}

fn workload(fs: &SimFs) -> Stopped {
    let handles: Vec<LocalFdb> = (0..3).map(|_| open(fs).expect("open")).collect();
    for (i, op) in WORKLOAD.iter().enumerate() {
        let r = run(&handles, *op, i);
        if fs.is_down() {
            return Stopped {
                at: Some((i, r.is_ok())),
            };
        }
        r.unwrap_or_else(|e| panic!("without a crash, {e}"));
    }
    Stopped { at: None }
}

/// Reboots after a crash at sync point `k` and compares with the model; returns the differences.
fn check(fs: &SimFs, stopped: &Stopped, views: &[View], k: u64) -> Vec<String> {
    let mut diffs = Vec::new();
    fs.restart();
    let (i, ok) = stopped.at.unwrap_or((WORKLOAD.len() - 1, true));
    let f = match open(fs) {
        Ok(f) => f,
        Err(e) => return vec![format!("k={k}: the store does not reopen: {e}")],
    };
    let seen = match observe(&f) {
        Ok(v) => v,
        Err(e) => return vec![format!("k={k} (crash in {:?}): {e}", WORKLOAD[i])],
    };
    for date in DATES {
        let after = &views[i + 1][date];
        let before = &views[i][date];
        let got = &seen[date];
        if got != after && (ok || got != before) {
            diffs.push(format!(
                "k={k}, crash in op {i} {:?} (returned {}), db {date}: saw [{}], model [{}]{}",
                WORKLOAD[i],
                if ok { "Ok" } else { "Err" },
                describe(got),
                describe(after),
                if ok {
                    String::new()
                } else {
                    format!(" or [{}]", describe(before))
                }
            ));
        }
    }
    // FDB5's purge keeps a tree with any field still visible (its masked ones stay).
    if ok && matches!(WORKLOAD[i], Purge(_) | Wipe(_)) && !fdb5_format() {
        match masked_count(&f) {
            Ok(m) if m.get(DATES[0]).copied().unwrap_or(0) > 0 => diffs.push(format!(
                "k={k}: the purge returned Ok but {m:?} masked entries remain"
            )),
            Err(e) => diffs.push(format!("k={k}: {e}")),
            _ => {}
        }
    }
    // Leftovers must not break the store: replace a key in each database, add one, flush.
    let mut expected = seen.clone();
    let mut copy = 1000 + k * 10;
    for (db, ty, step) in [(0, "fc", "0"), (1, "an", "0"), (1, "fc", "18")] {
        copy += 1;
        let date = DATES[db];
        let bytes = payload(date, ty, step, copy);
        if let Err(e) = f.archive(Some(&key(date, ty, step)), &bytes) {
            diffs.push(format!("k={k}: archive after reboot: {e}"));
        }
        expected
            .get_mut(date)
            .expect("known date")
            .insert((ty.into(), step.into()), bytes);
    }
    if let Err(e) = f.flush() {
        diffs.push(format!("k={k}: flush after reboot: {e}"));
    }
    match observe(&open(fs).expect("reopen")) {
        Ok(v) if v == expected => {}
        Ok(v) => diffs.push(format!(
            "k={k}: after reboot and a new flush saw {:?}, expected {:?}",
            v.values().map(describe).collect::<Vec<_>>(),
            expected.values().map(describe).collect::<Vec<_>>()
        )),
        Err(e) => diffs.push(format!("k={k}: after reboot and a new flush: {e}")),
    }
    diffs
}

/// Runs the workload crashing at each given point; returns (visited, differences).
fn sweep(points: &[u64], torn_seed: Option<u64>, views: &[View]) -> (usize, Vec<String>) {
    let mut diffs = Vec::new();
    for &k in points {
        let fs = sim();
        fs.set_torn_writes(torn_seed.map(|s| s ^ k.wrapping_mul(0x9e37_79b9_7f4a_7c15)));
        fs.crash_at(k);
        let stopped = workload(&fs);
        assert!(
            stopped.at.is_some(),
            "crash point {k} was never reached: the workload is not deterministic"
        );
        diffs.extend(check(&fs, &stopped, views, k));
    }
    (points.len(), diffs)
}

fn report(what: &str, visited: usize, of: usize, diffs: &[String]) -> String {
    let mut s = format!(
        "{what}: visited {visited} of {of} crash points, {} differences from the model",
        diffs.len()
    );
    for d in diffs.iter().take(12) {
        s.push_str("\n  ");
        s.push_str(d);
    }
    s
}

/// The sync points of the workload: those after the file system's own setup.
fn points() -> (Vec<u64>, Vec<View>) {
    let views = model_views();
    let fs = sim();
    let first = fs.sync_points() + 1;
    let stopped = workload(&fs);
    assert!(stopped.at.is_none());
    let end = fs.sync_points();
    // The uncrashed run matches the model too.
    let seen = observe(&open(&fs).expect("open")).expect("observe");
    assert_eq!(seen, views[WORKLOAD.len()], "the workload without a crash");
    assert!(end >= first + 20, "only {} sync points", end + 1 - first);
    ((first..=end).collect(), views)
}

#[test]
fn every_crash_point_of_the_workload_leaves_what_the_model_says() {
    let (points, views) = points();
    let (visited, diffs) = sweep(&points, None, &views);
    let line = report("crash points", visited, points.len(), &diffs);
    println!("{line}");
    assert!(visited == points.len() && diffs.is_empty(), "{line}");
}

/// A torn append that kept some of a flush's journal records and not the others made that
/// flush half-visible (found by this test): every point, with a few seeds, since which prefix
/// survives is what matters.
#[test]
fn torn_writes_at_every_crash_point_leave_what_the_model_says() {
    const SEEDS: [u64; 3] = [0x5eed_c0de, 0x0dd_ba11, 0xfee1_900d];
    let (points, views) = points();
    let mut visited = 0;
    let mut diffs = Vec::new();
    for seed in SEEDS {
        let (v, d) = sweep(&points, Some(seed), &views);
        visited += v;
        diffs.extend(d);
    }
    let line = report(
        &format!("torn writes ({} seeds)", SEEDS.len()),
        visited,
        points.len() * SEEDS.len(),
        &diffs,
    );
    println!("{line}");
    assert!(diffs.is_empty(), "{line}");
}

/// The same proof for databases kept in FDB5's format: every flush of the FDB5-format writer is
/// there whole or not at all at every crash point, and the store takes new flushes.
#[test]
fn every_crash_point_leaves_what_the_model_says_in_fdb5_format() {
    in_fdb5_format(|| {
        let (points, views) = points();
        let (visited, diffs) = sweep(&points, None, &views);
        let line = report("crash points (FDB5 format)", visited, points.len(), &diffs);
        println!("{line}");
        assert!(visited == points.len() && diffs.is_empty(), "{line}");
    })
}

#[test]
fn torn_writes_at_every_crash_point_leave_what_the_model_says_in_fdb5_format() {
    in_fdb5_format(|| {
        let (points, views) = points();
        let mut visited = 0;
        let mut diffs = Vec::new();
        for seed in [0x5eed_c0de_u64, 0x0dd_ba11] {
            let (v, d) = sweep(&points, Some(seed), &views);
            visited += v;
            diffs.extend(d);
        }
        let line = report(
            "torn writes (FDB5 format)",
            visited,
            2 * points.len(),
            &diffs,
        );
        println!("{line}");
        assert!(visited == 2 * points.len() && diffs.is_empty(), "{line}");
    })
}
