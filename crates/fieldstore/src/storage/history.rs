//! A database's history of commits, as subscribers follow it (docs/subscribe.md): each commit
//! (one flush) is a numbered step, so a subscriber holds a cursor into it and asks only for
//! what came after, and a waiter tells it when to ask again instead of polling.

use std::time::Duration;

use super::{FieldRef, StorageError};
use crate::model::Key;

/// Where a database's history stands now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryMark {
    /// Which incarnation of the database: one wiped and made again is another, and cursors
    /// into the old one start the new one from its beginning.
    pub epoch: String,
    /// The cursor after the last commit.
    pub end: u64,
}

/// One field a commit made visible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitEntry {
    pub index: Key,
    pub datum: Key,
    pub field: FieldRef,
}

/// One commit (one flush of one writer), whole: subscribers see all of it or none of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Commit {
    /// This commit's cursor, and the cursor of the one after it.
    pub at: u64,
    pub next: u64,
    /// Seconds since the epoch, as `list` shows for its index.
    pub timestamp: u64,
    /// In the order the writer added them.
    pub entries: Vec<CommitEntry>,
}

/// What a catalogue answers a subscriber asking for the commits after its cursor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Commits {
    /// The commits at or after the cursor, oldest first (possibly none, possibly fewer than
    /// exist: ask again from the last one's `next`).
    Since(Vec<Commit>),
    /// The database is another incarnation than the cursor's: start again from `mark.epoch`,
    /// cursor 0.
    Recreated(HistoryMark),
    /// The database no longer exists.
    Gone,
}

/// What a wait saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wake {
    /// Nothing changed within the timeout.
    Timeout,
    /// These databases (by [`super::DbRef::id`]) may have new commits.
    Changed(Vec<String>),
    /// Anything may have changed, new databases included: look at everything again.
    Rescan,
}

/// Tells a subscriber when a catalogue may have changed, so it need not poll. Events between
/// [`ChangeWaiter::follow`] and the next wait are never lost: callers follow a database, then
/// read its commits, then wait.
pub trait ChangeWaiter: Send {
    /// Also wakes for commits to this database.
    fn follow(&mut self, db: &super::DbRef) -> Result<(), StorageError>;

    /// Blocks until something may have changed, or `timeout` passed.
    fn wait(&mut self, timeout: Duration) -> Result<Wake, StorageError>;
}

/// For catalogues that cannot be told of changes: looks again every `interval`.
pub struct PollingWaiter {
    pub interval: Duration,
}

impl ChangeWaiter for PollingWaiter {
    fn follow(&mut self, _: &super::DbRef) -> Result<(), StorageError> {
        Ok(())
    }

    fn wait(&mut self, timeout: Duration) -> Result<Wake, StorageError> {
        if timeout < self.interval {
            std::thread::sleep(timeout);
            return Ok(Wake::Timeout);
        }
        std::thread::sleep(self.interval);
        Ok(Wake::Rescan)
    }
}
