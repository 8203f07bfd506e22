//! The model-based fuzz driver: random operations (archive new and existing keys, flush,
//! compact, purge, wipe, reopen, crash and reboot, crash at a coming sync point) by three
//! writers over one simulated file system, with injected I/O errors and ENOSPC, checked against
//! an in-memory model. Decoded from bytes, so the proptest and the cargo-fuzz target share it.
//!
//! What the model promises (DESIGN.md §2):
//! - An operation that fails returns an error, never panics; with no fault armed, none fails.
//! - A flush that returned Ok is wholly visible in every database it wrote, and stays so.
//! - A flush that failed is, per database, wholly visible or wholly invisible; the model allows
//!   both. The design promises invisible when an fdatasync fails (the toc writer withdraws a
//!   journal record whose sync failed; `a_flush_whose_sync_fails_is_invisible_before_and_after_a_crash`
//!   pins it), but a flush over several databases fails if one does while the others commit, a
//!   crash in its automatic merge comes after its commit, and a withdrawal can fail as well (a
//!   full disk). A caller must treat a failed flush as "maybe": archiving the fields again is
//!   always safe (the newer copy masks the older). `FlushFailed` refuses further archives into
//!   that database on that handle, so the driver reopens the writer after one.
//! - Compact and purge never change what a reader sees; a wipe that returned Ok leaves the
//!   database empty; one that failed leaves it whole or empty.
//! - After a crash only flushed fields are there; the store reopens and keeps working.
#![allow(dead_code)]

use fieldstore::api::{ApiError, Fdb, LocalFdb};
use fieldstore::model::request::parse_request;
use fieldstore::storage::fs::sim::Op as FsOp;
use fieldstore::storage::fs::SimFs;

use crate::store_model::{key, observe, open, payload, sim, DbView, DATES, FIELDS};

const WRITERS: usize = 3;
/// More than this many possible views of one database means the model lost track (each failed
/// flush can double them); never reached by the inputs the targets generate.
const MAX_STATES: usize = 4096;
const FS_OPS: [FsOp; 12] = [
    FsOp::Open,
    FsOp::Read,
    FsOp::Write,
    FsOp::Sync,
    FsOp::SyncDir,
    FsOp::Rename,
    FsOp::Link,
    FsOp::Remove,
    FsOp::CreateDir,
    FsOp::ReadDir,
    FsOp::Metadata,
    FsOp::Lock,
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    Archive {
        w: usize,
        db: usize,
        field: usize,
    },
    Flush(usize),
    Compact(usize),
    Purge(usize),
    Wipe(usize),
    /// The writer's process restarts: what it archived and did not flush is gone.
    Reopen(usize),
    /// Power cut between operations; every process restarts.
    Crash,
    /// Power cut at the `n`-th sync point from now, inside whatever operation reaches it.
    CrashIn(u64),
    /// The `n`-th next file-system operation of a kind fails with EIO.
    Fail(FsOp, u64),
    /// ENOSPC once this many more bytes are written; `None` lifts the limit.
    Space(Option<u64>),
    /// Disarms the faults and compares what a fresh reader sees with the model.
    Check,
}

/// Two bytes a step; at most `max_steps` steps.
pub fn decode(bytes: &[u8], max_steps: usize) -> Vec<Step> {
    bytes
        .chunks_exact(2)
        .take(max_steps)
        .map(|c| {
            let (a, b) = (c[0], c[1] as usize);
            match a % 16 {
                0..=5 => Step::Archive {
                    w: b % WRITERS,
                    db: (b / WRITERS) % DATES.len(),
                    field: (b / (WRITERS * DATES.len())) % FIELDS.len(),
                },
                6 | 7 => Step::Flush(b % WRITERS),
                8 => Step::Compact(b % DATES.len()),
                9 => Step::Purge(b % DATES.len()),
                10 => Step::Wipe(b % DATES.len()),
                11 => Step::Reopen(b % WRITERS),
                12 if b % 2 == 0 => Step::Crash,
                12 => Step::CrashIn(1 + (b as u64 / 2) % 8),
                13 => Step::Fail(FS_OPS[b % FS_OPS.len()], 1 + (b / FS_OPS.len()) as u64 % 6),
                14 if b < 64 => Step::Space(None),
                14 => Step::Space(Some((b as u64 - 64) * 16)),
                _ => Step::Check,
            }
        })
        .collect()
}

/// What a run did, for the summaries the tests print.
#[derive(Debug, Default, Clone, Copy)]
pub struct Stats {
    pub steps: usize,
    pub errors: usize,
    pub failed_flushes: usize,
    pub crashes: usize,
    pub checks: usize,
    /// Checks that found a failed flush visible / invisible, where telling them apart mattered.
    pub failed_flush_seen: usize,
    pub failed_flush_unseen: usize,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Stats) {
        self.steps += o.steps;
        self.errors += o.errors;
        self.failed_flushes += o.failed_flushes;
        self.crashes += o.crashes;
        self.checks += o.checks;
        self.failed_flush_seen += o.failed_flush_seen;
        self.failed_flush_unseen += o.failed_flush_unseen;
    }
}

type Batch = Vec<((String, String), Vec<u8>)>;

struct Driver {
    fs: SimFs,
    handles: Vec<LocalFdb>,
    /// Per writer, per database: archived and not flushed, in order.
    pending: Vec<Vec<Batch>>,
    /// Per database: the views a reader may see (more than one after a failed operation).
    states: Vec<Vec<DbView>>,
    /// Per database: the views as they would be had no failed flush been published.
    without_failed: Vec<Vec<DbView>>,
    armed: bool,
    copy: u64,
    stats: Stats,
}

fn push_unique(v: &mut Vec<DbView>, s: DbView) {
    if !v.contains(&s) {
        v.push(s);
    }
}

fn with_batch(s: &DbView, batch: &Batch) -> DbView {
    let mut s = s.clone();
    for (k, bytes) in batch {
        s.insert(k.clone(), bytes.clone());
    }
    s
}

impl Driver {
    fn new() -> Result<Driver, String> {
        let fs = sim();
        let handles = (0..WRITERS).map(|_| open(&fs)).collect::<Result<_, _>>()?;
        Ok(Driver {
            fs,
            handles,
            pending: vec![vec![Batch::new(); DATES.len()]; WRITERS],
            states: vec![vec![DbView::new()]; DATES.len()],
            without_failed: vec![vec![DbView::new()]; DATES.len()],
            armed: false,
            copy: 0,
            stats: Stats::default(),
        })
    }

    fn reopen(&mut self, w: usize) -> Result<(), String> {
        self.pending[w] = vec![Batch::new(); DATES.len()];
        self.handles[w] = match open(&self.fs) {
            Ok(h) => h,
            // Opening may touch the file system; an armed fault may be what failed it.
            Err(_) if self.armed => {
                self.fs.clear_faults();
                self.armed = false;
                open(&self.fs)?
            }
            Err(e) => return Err(format!("reopening writer {w}: {e}")),
        };
        Ok(())
    }

    fn reboot(&mut self) -> Result<(), String> {
        self.stats.crashes += 1;
        self.fs.restart();
        for w in 0..WRITERS {
            self.reopen(w)?;
        }
        Ok(())
    }

    /// Folds a flushed batch into a database's possible views; `maybe`: it failed.
    fn publish(&mut self, db: usize, batch: &Batch, maybe: bool) -> Result<(), String> {
        let mut next = Vec::new();
        for s in &self.states[db] {
            if maybe {
                push_unique(&mut next, s.clone());
            }
            push_unique(&mut next, with_batch(s, batch));
        }
        if next.len() > MAX_STATES {
            return Err(format!(
                "the model of database {db} has {} views",
                next.len()
            ));
        }
        self.states[db] = next;
        if !maybe {
            let w: Vec<DbView> = self.without_failed[db]
                .iter()
                .map(|s| with_batch(s, batch))
                .collect();
            self.without_failed[db] = w;
        }
        Ok(())
    }

    fn request(db: usize) -> Result<fieldstore::model::request::Request, String> {
        parse_request(&format!(
            "class=od,expver=1,stream=oper,date={},time=12",
            DATES[db]
        ))
        .map_err(|e| e.to_string())
    }

    /// An error is fine when a fault was armed or the system went down, and when a wipe found
    /// nothing to wipe; otherwise it is a bug.
    fn error_ok(&mut self, step: Step, e: &ApiError) -> Result<(), String> {
        self.stats.errors += 1;
        if self.armed || self.fs.is_down() || matches!(e, ApiError::NothingMatched(_)) {
            Ok(())
        } else {
            Err(format!("{step:?} failed with no fault armed: {e}"))
        }
    }

    fn step(&mut self, step: Step) -> Result<(), String> {
        self.stats.steps += 1;
        match step {
            Step::Archive { w, db, field } => {
                self.copy += 1;
                let (ty, st) = FIELDS[field];
                let bytes = payload(DATES[db], ty, st, self.copy);
                match self.handles[w].archive(Some(&key(DATES[db], ty, st)), &bytes) {
                    Ok(()) => self.pending[w][db].push(((ty.into(), st.into()), bytes)),
                    Err(e) => self.error_ok(step, &e)?,
                }
            }
            Step::Flush(w) => {
                let r = self.handles[w].flush();
                let batches =
                    std::mem::replace(&mut self.pending[w], vec![Batch::new(); DATES.len()]);
                let failed = r.is_err();
                if let Err(e) = &r {
                    self.stats.failed_flushes += 1;
                    self.error_ok(step, e)?;
                }
                for (db, batch) in batches.iter().enumerate() {
                    if !batch.is_empty() {
                        self.publish(db, batch, failed)?;
                    }
                }
                if failed {
                    // The handle refuses its failed databases from now on, as a process that
                    // saw its flush fail would restart.
                    self.reopen(w)?;
                }
            }
            Step::Compact(db) => {
                if let Err(e) = Self::request(db)
                    .and_then(|r| self.handles[0].compact(&r).map_err(|e| e.to_string()))
                {
                    self.stats.errors += 1;
                    if !self.armed && !self.fs.is_down() {
                        return Err(format!("{step:?} failed with no fault armed: {e}"));
                    }
                }
            }
            Step::Purge(db) => {
                let r = Self::request(db)?;
                if let Err(e) = self.handles[1].purge(&r, true) {
                    self.error_ok(step, &e)?;
                }
            }
            Step::Wipe(db) => {
                let r = Self::request(db)?;
                match self.handles[2].wipe(&r, true) {
                    Ok(_) => {
                        self.states[db] = vec![DbView::new()];
                        self.without_failed[db] = vec![DbView::new()];
                    }
                    Err(e) => {
                        self.error_ok(step, &e)?;
                        push_unique(&mut self.states[db], DbView::new());
                        push_unique(&mut self.without_failed[db], DbView::new());
                    }
                }
                // Writers holding the wiped database open restart (writing into a database
                // wiped under an open writer is not what this models).
                for w in 0..WRITERS {
                    self.reopen(w)?;
                }
            }
            Step::Reopen(w) => self.reopen(w)?,
            Step::Crash => {
                self.fs.crash();
                self.reboot()?;
            }
            Step::CrashIn(n) => {
                self.fs.crash_at(self.fs.sync_points() + n);
                self.armed = true;
            }
            Step::Fail(kind, n) => {
                self.fs.fail_nth(kind, n);
                self.armed = true;
            }
            Step::Space(limit) => {
                self.fs.set_space(limit);
                self.armed = limit.is_some() || self.armed;
            }
            Step::Check => self.check()?,
        }
        if self.fs.is_down() {
            self.reboot()?;
        }
        Ok(())
    }

    fn check(&mut self) -> Result<(), String> {
        self.stats.checks += 1;
        self.fs.clear_faults();
        self.armed = false;
        let f = open(&self.fs)?;
        let seen = observe(&f)?;
        for (db, date) in DATES.iter().enumerate() {
            let got = seen.get(*date).cloned().unwrap_or_default();
            if !self.states[db].contains(&got) {
                return Err(format!(
                    "database {date}: saw [{}], the model allows {}",
                    crate::store_model::describe(&got),
                    self.states[db]
                        .iter()
                        .map(|s| format!("[{}]", crate::store_model::describe(s)))
                        .collect::<Vec<_>>()
                        .join(" or ")
                ));
            }
            if self.states[db].len() > 1 {
                if self.without_failed[db].contains(&got) {
                    self.stats.failed_flush_unseen += 1;
                } else {
                    self.stats.failed_flush_seen += 1;
                }
            }
        }
        Ok(())
    }
}

/// Runs the steps, then a final check and a flush that must work; the error names the step.
pub fn run(steps: &[Step]) -> Result<Stats, String> {
    let mut d = Driver::new()?;
    for (i, s) in steps.iter().enumerate() {
        d.step(*s)
            .map_err(|e| format!("step {i} {s:?}: {e}\n  steps: {steps:?}"))?;
    }
    d.check()
        .map_err(|e| format!("final check: {e}\n  steps: {steps:?}"))?;
    // The store stays usable whatever happened: a new copy of every field flushes and shows.
    d.step(Step::Archive {
        w: 0,
        db: 0,
        field: 0,
    })?;
    d.step(Step::Archive {
        w: 0,
        db: 1,
        field: 3,
    })?;
    d.step(Step::Flush(0))?;
    d.check()
        .map_err(|e| format!("after a last flush: {e}\n  steps: {steps:?}"))?;
    Ok(d.stats)
}
