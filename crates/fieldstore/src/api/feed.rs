//! A local store's subscription: follows each matching database's history of commits through
//! the catalogue's cursor interface, woken by its change waiter (inotify for toc, a condition
//! variable for memory) instead of polling.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::element::{ListElement, Location};
use super::error::ApiError;
use super::subscribe::{Cursor, Notice, Position, Start, Subscription};
use crate::model::schema::{Expansion, LevelMatcher, SplitKey};
use crate::storage::history::{ChangeWaiter, Commits, Wake};
use crate::storage::{Catalogue, DbRef, FieldRef, Store};

/// Commits read from one database per look, so one busy database cannot starve the others.
const COMMITS_PER_LOOK: usize = 64;

/// However reliable the waiter, everything is looked at again this often: a missed
/// notification (a network file system's writes from another node) costs this much latency,
/// never a lost field.
const RESCAN_EVERY: Duration = Duration::from_secs(2);

/// One followed database.
struct Followed {
    db: DbRef,
    /// Expansions whose database level matches it.
    expansions: Vec<usize>,
    cursor: Cursor,
}

pub(crate) struct Feed {
    catalogue: Arc<dyn Catalogue>,
    store: Arc<dyn Store>,
    expansions: Vec<Expansion>,
    index_matchers: Vec<LevelMatcher>,
    datum_matchers: Vec<LevelMatcher>,
    waiter: Box<dyn ChangeWaiter>,
    /// By stream name (the database key, sorted: stable across moves between roots).
    followed: BTreeMap<String, Followed>,
    /// Stream names of databases by catalogue id, to map the waiter's wakes.
    by_id: HashMap<String, String>,
    /// Where a stream not yet followed starts: from the given position, else its beginning.
    start_at: Position,
    /// With where each field's bytes are, for notices that carry them.
    pending: VecDeque<(Notice, FieldRef)>,
    position: Position,
    /// Streams to read before waiting again.
    due: HashSet<String>,
    rescan_due: bool,
    last_rescan: Instant,
    /// Notices carry their field's bytes.
    with_data: bool,
}

impl Feed {
    pub(crate) fn new(
        catalogue: Arc<dyn Catalogue>,
        store: Arc<dyn Store>,
        expansions: Vec<Expansion>,
        start: &Start,
        with_data: bool,
    ) -> Result<Feed, ApiError> {
        let waiter = catalogue.change_waiter()?;
        let mut feed = Feed {
            index_matchers: expansions
                .iter()
                .map(|e| LevelMatcher::new(&e.levels[1]))
                .collect(),
            datum_matchers: expansions
                .iter()
                .map(|e| LevelMatcher::new(&e.levels[2]))
                .collect(),
            catalogue,
            store,
            expansions,
            waiter,
            followed: BTreeMap::new(),
            by_id: HashMap::new(),
            start_at: Position::default(),
            pending: VecDeque::new(),
            position: Position::default(),
            due: HashSet::new(),
            rescan_due: false,
            last_rescan: Instant::now(),
            with_data,
        };
        match start {
            Start::Beginning => {}
            Start::At(p) => feed.start_at = p.clone(),
            Start::Now => {
                // Every database there now is followed from its end; later ones from their
                // beginning (they were made after the subscription started).
                for db in feed.matching()? {
                    let mark = feed.catalogue.history_mark(&db.0)?;
                    let name = stream_name(&db.0);
                    feed.start_at.streams.insert(
                        name,
                        Cursor {
                            epoch: mark.epoch,
                            at: mark.end,
                            within: 0,
                        },
                    );
                }
            }
        }
        feed.rescan()?;
        Ok(feed)
    }

    /// Databases matching the request, with the expansions that match each.
    fn matching(&self) -> Result<Vec<(DbRef, Vec<usize>)>, ApiError> {
        let mut out = Vec::new();
        for db in self.catalogue.databases() {
            let db = db?;
            let ex: Vec<usize> = (0..self.expansions.len())
                .filter(|&e| self.expansions[e].levels[0].matches(&db.key))
                .collect();
            if !ex.is_empty() {
                out.push((db, ex));
            }
        }
        Ok(out)
    }

    /// Follows databases not followed yet, then marks every followed one due.
    fn rescan(&mut self) -> Result<(), ApiError> {
        for (db, expansions) in self.matching()? {
            let name = stream_name(&db);
            if let Some(f) = self.followed.get_mut(&name) {
                // Moved between roots, or made again after a wipe: follow its present id.
                if f.db.id != db.id {
                    self.by_id.remove(&f.db.id);
                    self.waiter.follow(&db)?;
                    self.by_id.insert(db.id.clone(), name.clone());
                    f.db = db;
                }
                continue;
            }
            // Follow before reading, so a commit landing in between still wakes us.
            self.waiter.follow(&db)?;
            let cursor = match self.start_at.streams.get(&name) {
                Some(c) => c.clone(),
                None => {
                    let mark = self.catalogue.history_mark(&db)?;
                    Cursor {
                        epoch: mark.epoch,
                        at: 0,
                        within: 0,
                    }
                }
            };
            self.position.streams.insert(name.clone(), cursor.clone());
            self.by_id.insert(db.id.clone(), name.clone());
            self.followed.insert(
                name,
                Followed {
                    db,
                    expansions,
                    cursor,
                },
            );
        }
        self.due.extend(self.followed.keys().cloned());
        self.last_rescan = Instant::now();
        self.rescan_due = false;
        Ok(())
    }

    /// Reads the commits after a stream's cursor into `pending`.
    fn read(&mut self, name: &str) -> Result<(), ApiError> {
        loop {
            let Some(f) = self.followed.get(name) else {
                return Ok(());
            };
            if self.catalogue.is_locked(&f.db, "list")? {
                return Ok(());
            }
            let answer =
                self.catalogue
                    .commits(&f.db, &f.cursor.epoch, f.cursor.at, COMMITS_PER_LOOK)?;
            let commits = match answer {
                Commits::Since(c) => c,
                Commits::Recreated(mark) => {
                    if let Some(f) = self.followed.get_mut(name) {
                        f.cursor = Cursor {
                            epoch: mark.epoch,
                            at: 0,
                            within: 0,
                        };
                    }
                    continue;
                }
                Commits::Gone => {
                    // Wiped: if it is made again, a rescan follows the new one from its start.
                    if let Some(f) = self.followed.remove(name) {
                        self.by_id.remove(&f.db.id);
                    }
                    self.position.streams.remove(name);
                    self.start_at.streams.remove(name);
                    return Ok(());
                }
            };
            let full = commits.len() >= COMMITS_PER_LOOK;
            let Some(f) = self.followed.get_mut(name) else {
                return Ok(());
            };
            for c in commits {
                if c.at < f.cursor.at {
                    continue;
                }
                let skip = if c.at == f.cursor.at {
                    f.cursor.within
                } else {
                    0
                };
                let total = c.entries.len() as u64;
                for (i, e) in c.entries.into_iter().enumerate() {
                    let i = i as u64;
                    if i < skip {
                        continue;
                    }
                    let matched = f.expansions.iter().any(|&x| {
                        self.index_matchers[x].matches(&e.index)
                            && self.datum_matchers[x].matches(&e.datum)
                    });
                    if !matched {
                        continue;
                    }
                    let cursor = if i + 1 == total {
                        Cursor {
                            epoch: f.cursor.epoch.clone(),
                            at: c.next,
                            within: 0,
                        }
                    } else {
                        Cursor {
                            epoch: f.cursor.epoch.clone(),
                            at: c.at,
                            within: i + 1,
                        }
                    };
                    self.pending.push_back((
                        Notice {
                            element: ListElement {
                                location: Some(Location {
                                    uri: self.store.uri(&f.db, &e.field.object),
                                    offset: e.field.offset,
                                    length: e.field.length,
                                }),
                                key: SplitKey {
                                    db: f.db.key.clone(),
                                    index: e.index,
                                    datum: e.datum,
                                },
                                timestamp: c.timestamp,
                                masked: false,
                            },
                            stream: name.to_string(),
                            cursor,
                            data: None,
                            checksum: None,
                        },
                        e.field,
                    ));
                }
                f.cursor = Cursor {
                    epoch: f.cursor.epoch.clone(),
                    at: c.next,
                    within: 0,
                };
            }
            if !full {
                return Ok(());
            }
        }
    }

    /// Reads every due stream.
    fn read_due(&mut self) -> Result<(), ApiError> {
        let due: Vec<String> = self.due.drain().collect();
        for name in due {
            if let Err(e) = self.read(&name) {
                // Look at it again next time: the error is the caller's to see now.
                self.due.insert(name);
                return Err(e);
            }
        }
        Ok(())
    }
}

impl Subscription for Feed {
    fn next_within(&mut self, timeout: Duration) -> Result<Option<Notice>, ApiError> {
        self.next(timeout, &mut |_| true)
    }

    /// Asked before the bytes are read, so a refused field costs no memory at all.
    fn next_admitted(
        &mut self,
        timeout: Duration,
        admit: &mut dyn FnMut(u64) -> bool,
    ) -> Result<Option<Notice>, ApiError> {
        self.next(timeout, admit)
    }

    fn position(&self) -> Position {
        self.position.clone()
    }
}

impl Feed {
    fn next(
        &mut self,
        timeout: Duration,
        admit: &mut dyn FnMut(u64) -> bool,
    ) -> Result<Option<Notice>, ApiError> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some((mut n, field)) = self.pending.pop_front() {
                if self.with_data && admit(field.length) {
                    n.data = self.bytes_of(&n, &field)?;
                    n.checksum = n.data.as_ref().and(field.checksum);
                }
                self.position.advance(&n);
                if self.pending.is_empty() {
                    self.settle();
                }
                return Ok(Some(n));
            }
            if self.rescan_due || self.last_rescan.elapsed() >= RESCAN_EVERY {
                self.rescan()?;
            }
            if !self.due.is_empty() {
                self.read_due()?;
                if self.pending.is_empty() {
                    self.settle();
                }
                continue;
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(None);
            }
            let wait =
                (deadline - now).min(RESCAN_EVERY.saturating_sub(self.last_rescan.elapsed()));
            match self.waiter.wait(wait)? {
                Wake::Timeout => {}
                Wake::Changed(ids) => {
                    for id in ids {
                        match self.by_id.get(&id) {
                            Some(name) => {
                                self.due.insert(name.clone());
                            }
                            // A database not followed yet (new, or under another id).
                            None => self.rescan_due = true,
                        }
                    }
                }
                Wake::Rescan => self.rescan_due = true,
            }
        }
    }

    /// A notice's field, read from where its commit put it (checked against its checksum);
    /// `None` when it went meanwhile (wiped, purged): the consumer's retrieve then says so.
    fn bytes_of(&self, n: &Notice, field: &FieldRef) -> Result<Option<bytes::Bytes>, ApiError> {
        let Some(f) = self.followed.get(&n.stream) else {
            return Ok(None);
        };
        match self.store.read_shared(&f.db, field) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == crate::error_kind::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// With nothing pending, every stream's position is its cursor (commits whose fields all
    /// failed the request's test are passed over).
    fn settle(&mut self) {
        for (name, f) in &self.followed {
            self.position.streams.insert(name.clone(), f.cursor.clone());
        }
    }
}

/// A stream's name: the database key in sorted form, the same wherever the database lives.
fn stream_name(db: &DbRef) -> String {
    db.key.sorted().to_string()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use crate::api::subscribe::{Start, Subscription};
    use crate::api::Fdb;
    use crate::model::request::parse_request;

    use crate::api::testing::{memory, sfc_key as key};

    fn steps(sub: &mut dyn Subscription, n: usize) -> Vec<String> {
        (0..n)
            .map(|_| {
                let el = sub
                    .next_within(Duration::from_secs(5))
                    .unwrap()
                    .unwrap()
                    .element;
                el.key.datum.get("step").unwrap().to_string()
            })
            .collect()
    }

    #[test]
    fn a_subscriber_sees_each_flush_once_and_resumes_where_it_stopped() {
        let f = memory();
        f.archive_grib(&key(0), b"GRIB....7777").unwrap();
        f.flush().unwrap();
        let r = parse_request("class=od,expver=0001").unwrap();
        let mut now = f.subscribe(&r, &Start::Now).unwrap();
        let mut all = f.subscribe(&r, &Start::Beginning).unwrap();
        assert!(now
            .next_within(Duration::from_millis(50))
            .unwrap()
            .is_none());
        // Archived but not flushed: invisible.
        f.archive_grib(&key(6), b"GRIB....7777").unwrap();
        f.archive_grib(&key(12), b"GRIB....7777").unwrap();
        assert!(now
            .next_within(Duration::from_millis(50))
            .unwrap()
            .is_none());
        f.flush().unwrap();
        let mut got = steps(&mut *now, 2);
        got.sort();
        assert_eq!(got, ["12", "6"]);
        assert_eq!(steps(&mut *all, 1), ["0"]);
        // One field of the second flush seen; resume after it from its position.
        let _ = steps(&mut *all, 1);
        let at = all.position();
        drop(all);
        let mut again = f.subscribe(&r, &Start::At(at)).unwrap();
        f.archive_grib(&key(18), b"GRIB....7777").unwrap();
        f.flush().unwrap();
        assert_eq!(steps(&mut *again, 2).len(), 2);
        assert!(again
            .next_within(Duration::from_millis(50))
            .unwrap()
            .is_none());
        assert_eq!(steps(&mut *now, 1), ["18"]);
    }
}

#[cfg(test)]
mod data_tests {
    use std::time::Duration;

    use crate::api::subscribe::Start;
    use crate::api::Fdb;
    use crate::model::request::parse_request;

    #[test]
    fn notices_carry_their_fields_when_asked_and_only_then() {
        let d = tempfile::tempdir().unwrap();
        let f = crate::api::testing::local(d.path());
        let r = parse_request("class=od,expver=0001").unwrap();
        let mut with = f.subscribe_with_data(&r, &Start::Now).unwrap();
        let mut without = f.subscribe(&r, &Start::Now).unwrap();
        let key = crate::model::Key::parse("class=od,expver=0001,stream=oper,date=20260101,time=0000,type=fc,levtype=sfc,step=6,param=167").unwrap();
        f.archive_grib(&key, b"GRIB-six-7777").unwrap();
        f.flush().unwrap();
        let n = with.next_within(Duration::from_secs(5)).unwrap().unwrap();
        assert_eq!(n.data.as_deref(), Some(&b"GRIB-six-7777"[..]));
        let n = without
            .next_within(Duration::from_secs(5))
            .unwrap()
            .unwrap();
        assert_eq!(n.data, None);
    }
}
