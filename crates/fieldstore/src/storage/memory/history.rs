//! The memory backend's history for subscribers: each database keeps its recent commits, and
//! the store wakes waiting subscribers through a condition variable when any database changes.

use std::collections::VecDeque;
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::state::poisoned;
use crate::storage::history::{ChangeWaiter, Commit, Wake};
use crate::storage::{DbRef, StorageError};

/// Commits a database keeps for subscribers, and fields across them: a subscriber further
/// behind than that is told it fell behind, so a slow one never grows the store's memory.
pub const COMMITS_KEPT: usize = 4096;
pub const ENTRIES_KEPT: usize = 200_000;

/// One database's recent commits; cursors are commit numbers.
#[derive(Default)]
pub(super) struct CommitLog {
    /// The number of `commits[0]`.
    pub first: u64,
    pub commits: VecDeque<Arc<Commit>>,
    entries: usize,
}

impl CommitLog {
    pub fn end(&self) -> u64 {
        self.first + self.commits.len() as u64
    }

    /// Appends a commit whose `at`/`next` the log sets.
    pub fn push(&mut self, mut c: Commit) {
        c.at = self.end();
        c.next = c.at + 1;
        self.entries += c.entries.len();
        self.commits.push_back(Arc::new(c));
        while self.commits.len() > 1
            && (self.commits.len() > COMMITS_KEPT || self.entries > ENTRIES_KEPT)
        {
            if let Some(old) = self.commits.pop_front() {
                self.entries -= old.entries.len();
                self.first += 1;
            }
        }
    }
}

/// Changes across the store: a counter, and which database each recent change was in.
#[derive(Default)]
pub(super) struct Changes {
    generation: u64,
    /// `(generation, database id)`, the newest [`RECENT`].
    recent: VecDeque<(u64, String)>,
}

const RECENT: usize = 4096;

#[derive(Default)]
pub(super) struct Notifier {
    changes: Mutex<Changes>,
    bell: Condvar,
}

impl Notifier {
    /// Records a change to a database (a commit, its creation or its wipe) and wakes waiters.
    pub fn changed(&self, db_id: &str) {
        if let Ok(mut c) = self.changes.lock() {
            c.generation += 1;
            let g = c.generation;
            c.recent.push_back((g, db_id.to_string()));
            if c.recent.len() > RECENT {
                c.recent.pop_front();
            }
        }
        self.bell.notify_all();
    }

    fn generation(&self) -> u64 {
        self.changes.lock().map(|c| c.generation).unwrap_or(0)
    }
}

pub(super) struct MemWaiter {
    notifier: Arc<Notifier>,
    seen: u64,
}

impl MemWaiter {
    pub fn new(notifier: Arc<Notifier>) -> MemWaiter {
        let seen = notifier.generation();
        MemWaiter { notifier, seen }
    }
}

impl ChangeWaiter for MemWaiter {
    fn follow(&mut self, _: &DbRef) -> Result<(), StorageError> {
        Ok(())
    }

    fn wait(&mut self, timeout: Duration) -> Result<Wake, StorageError> {
        let deadline = Instant::now() + timeout;
        let mut c = self.notifier.changes.lock().map_err(poisoned)?;
        loop {
            if c.generation > self.seen {
                let oldest = c.recent.front().map_or(u64::MAX, |(g, _)| *g);
                let wake = if oldest > self.seen + 1 {
                    // Changes went by that the ring no longer names.
                    Wake::Rescan
                } else {
                    let mut ids: Vec<String> = c
                        .recent
                        .iter()
                        .filter(|(g, _)| *g > self.seen)
                        .map(|(_, id)| id.clone())
                        .collect();
                    ids.sort();
                    ids.dedup();
                    Wake::Changed(ids)
                };
                self.seen = c.generation;
                return Ok(wake);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Wake::Timeout);
            }
            c = self
                .notifier
                .bell
                .wait_timeout(c, deadline - now)
                .map_err(poisoned)?
                .0;
        }
    }
}
