//! An S3 database's history for subscribers (docs/s3-format.md, "Subscribing"): each flush
//! is one commit, placed by its rank's time, and delivered only once it is older than
//! [`SETTLE`], so a marker that becomes visible late with a lower rank (two writers racing)
//! is never passed over. S3 has no change notifications: the waiter lists instead.

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant, SystemTime};

use super::catalogue::{Gen, S3Catalogue};
use super::client::S3Client;
use super::layout;
use crate::model::Key;
use crate::storage::history::{ChangeWaiter, Commit, CommitEntry, Commits, HistoryMark, Wake};
use crate::storage::{DbRef, StorageError};

/// How long after its rank's time a flush is delivered: longer than a writer takes from its
/// pre-commit LIST to its marker's PUT, plus the clock difference between hosts. A flush
/// that takes longer may be missed by subscribers that were already past its time.
pub const SETTLE: Duration = Duration::from_secs(3);

/// How often the waiter lists the followed databases' markers and `dbs/`.
pub const POLL_INTERVAL: Duration = Duration::from_millis(200);

/// Cursor positions per microsecond of rank time: the low bits spread flushes of the same
/// microsecond (by a hash of their rank, so a position never depends on other flushes).
const SLOTS: u64 = 1024;

/// A flush's position: its rank's time, then a hash of the rank.
fn position(rank: &str) -> u64 {
    let micros = layout::rank_micros(rank).unwrap_or(0);
    let slot = u64::from(crate::checksum::crc32c(rank.as_bytes())) % SLOTS;
    micros.saturating_mul(SLOTS).saturating_add(slot)
}

/// Positions below this have settled: every flush there will ever be is visible.
fn settled_below(now: SystemTime) -> u64 {
    let micros = now
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64);
    micros
        .saturating_sub(SETTLE.as_micros() as u64)
        .saturating_mul(SLOTS)
}

impl S3Catalogue {
    /// Whether the generation a DbRef names is still the database's live one.
    fn is_live(&self, g: &Gen) -> Result<bool, StorageError> {
        Ok(self.generations(&g.name)?.0 == Some(g.gen))
    }

    pub(super) fn s3_history_mark(&self, db: &DbRef) -> Result<HistoryMark, StorageError> {
        let g = self.gen_of(db)?;
        if !self.is_live(&g)? {
            return Ok(HistoryMark {
                epoch: String::new(),
                end: 0,
            });
        }
        // After everything visible now, settled or not: "from now" means after the flushes
        // a reader sees when it starts.
        let below = settled_below(SystemTime::now());
        let loaded = self.load(&g)?;
        let newest = loaded
            .sources
            .iter()
            .flat_map(|s| {
                let marker = s.rank.as_deref();
                s.body.indexes.iter().flat_map(move |ix| {
                    ix.entries
                        .iter()
                        .filter_map(move |e| e.rank.as_deref().or(marker))
                })
            })
            .map(|r| position(r) + 1)
            .max()
            .unwrap_or(0);
        Ok(HistoryMark {
            epoch: layout::gen_str(g.gen),
            end: below.max(newest),
        })
    }

    pub(super) fn s3_commits(
        &self,
        db: &DbRef,
        epoch: &str,
        from: u64,
        max: usize,
    ) -> Result<Commits, StorageError> {
        let g = self.gen_of(db)?;
        // Taken before the listing: what settled by then is all in it.
        let below = settled_below(SystemTime::now());
        if !self.is_live(&g)? {
            return Ok(Commits::Gone);
        }
        let gen = layout::gen_str(g.gen);
        if gen != epoch {
            return Ok(Commits::Recreated(HistoryMark {
                epoch: gen,
                end: below,
            }));
        }
        let loaded = self.load(&g)?;
        if let Some((uri, why)) = loaded.damaged.first() {
            return Err(StorageError::Corrupt {
                path: uri.into(),
                offset: 0,
                detail: format!("{why}; subscribers stop here rather than skip its fields"),
            });
        }
        // Each flush's entries by rank, from its marker or from the compaction that took its
        // place (whose entries keep their rank); overlapping compactions count once. In key
        // order, the same whichever object holds them, so a position inside a flush stays valid
        // when a compaction replaces its marker.
        let mut by_rank: BTreeMap<String, BTreeMap<(String, String), CommitEntry>> =
            BTreeMap::new();
        for s in &loaded.sources {
            for ix in &s.body.indexes {
                let index = ix.key.to_string();
                for e in &ix.entries {
                    let Some(rank) = e.rank.as_ref().or(s.rank.as_ref()) else {
                        continue;
                    };
                    let p = position(rank);
                    if p < from || p >= below {
                        continue;
                    }
                    let datum = Key::from_pairs(
                        ix.keywords
                            .iter()
                            .map(String::as_str)
                            .zip(e.values.iter().map(String::as_str)),
                    );
                    by_rank
                        .entry(rank.clone())
                        .or_default()
                        .entry((index.clone(), datum.to_string()))
                        .or_insert_with(|| CommitEntry {
                            index: ix.key.clone(),
                            datum,
                            field: e.field(),
                        });
                }
            }
        }
        // Flushes sharing a position (same microsecond and hash) make one commit, in rank order.
        let mut by_position: BTreeMap<u64, Commit> = BTreeMap::new();
        for (rank, entries) in by_rank {
            let at = position(&rank);
            let c = by_position.entry(at).or_insert_with(|| Commit {
                at,
                next: at + 1,
                timestamp: layout::rank_micros(&rank).unwrap_or(0) / 1_000_000,
                entries: Vec::new(),
            });
            c.entries.extend(entries.into_values());
        }
        Ok(Commits::Since(
            by_position.into_values().take(max).collect(),
        ))
    }
}

/// What the waiter saw of one database: its flush markers' names, and how many had settled.
#[derive(PartialEq, Eq)]
struct Seen {
    markers: BTreeSet<String>,
    settled: usize,
}

pub(super) struct S3Waiter {
    client: S3Client,
    /// What `dbs/` held.
    dbs: BTreeSet<String>,
    followed: BTreeMap<String, (Gen, Seen)>,
    next_poll: Instant,
}

impl S3Waiter {
    pub(super) fn new(client: S3Client) -> Result<S3Waiter, StorageError> {
        let mut w = S3Waiter {
            client,
            dbs: BTreeSet::new(),
            followed: BTreeMap::new(),
            next_poll: Instant::now() + POLL_INTERVAL,
        };
        w.dbs = w.list_dbs()?;
        Ok(w)
    }

    fn list_dbs(&self) -> Result<BTreeSet<String>, StorageError> {
        self.client
            .list(layout::DBS)
            .map(|m| m.map(|m| m.key))
            .collect()
    }

    fn seen(&self, g: &Gen) -> Result<Seen, StorageError> {
        let prefix = format!("{}flush/", g.prefix());
        let below = settled_below(SystemTime::now());
        let mut markers = BTreeSet::new();
        for m in self.client.list(&prefix) {
            let m = m?;
            if let Some(rank) = m.key.strip_prefix(&prefix) {
                markers.insert(rank.to_string());
            }
        }
        let settled = markers.iter().filter(|r| position(r) < below).count();
        Ok(Seen { markers, settled })
    }

    /// One look at everything: new databases, new or newly settled markers.
    fn poll(&mut self) -> Result<Option<Wake>, StorageError> {
        let dbs = self.list_dbs()?;
        if dbs != self.dbs {
            self.dbs = dbs;
            return Ok(Some(Wake::Rescan));
        }
        let mut changed = Vec::new();
        let ids: Vec<String> = self.followed.keys().cloned().collect();
        for id in ids {
            let Some((g, _)) = self.followed.get(&id) else {
                continue;
            };
            let now = self.seen(g)?;
            if let Some((_, before)) = self.followed.get_mut(&id) {
                if *before != now {
                    *before = now;
                    changed.push(id);
                }
            }
        }
        Ok((!changed.is_empty()).then_some(Wake::Changed(changed)))
    }
}

impl ChangeWaiter for S3Waiter {
    fn follow(&mut self, db: &DbRef) -> Result<(), StorageError> {
        let cat = S3Catalogue::new(self.client.clone());
        let g = cat.gen_of(db)?;
        let seen = self.seen(&g)?;
        self.followed.insert(db.id.clone(), (g, seen));
        Ok(())
    }

    fn wait(&mut self, timeout: Duration) -> Result<Wake, StorageError> {
        let deadline = Instant::now() + timeout;
        loop {
            let now = Instant::now();
            if now >= self.next_poll {
                self.next_poll = now + POLL_INTERVAL;
                if let Some(wake) = self.poll()? {
                    return Ok(wake);
                }
                continue;
            }
            if now >= deadline {
                return Ok(Wake::Timeout);
            }
            std::thread::sleep(self.next_poll.min(deadline) - now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_follow_rank_time_and_do_not_depend_on_other_flushes() {
        let a = layout::rank(1_000, "w1", 1);
        let b = layout::rank(1_001, "w0", 1);
        assert!(position(&a) < position(&b));
        assert_eq!(position(&a) / SLOTS, 1_000);
        // Same microsecond, other writers: both within that microsecond's positions.
        let c = layout::rank(1_000, "w2", 7);
        assert_eq!(position(&c) / SLOTS, 1_000);
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        let edge = settled_below(now);
        let settled = layout::rank(100_000_000 - SETTLE.as_micros() as u64 - 1, "w", 0);
        let fresh = layout::rank(100_000_000 - SETTLE.as_micros() as u64, "w", 0);
        assert!(position(&settled) < edge && position(&fresh) >= edge);
    }
}
