//! `type: dist`: fields spread over lanes by rendezvous hashing, as FDB5's DistFDB did, so that
//! placements agree with an existing DistFDB deployment and adding a lane moves only its share.
//!
//! The hash input is the key flattened in sorted keyword order as `/k1:v1/k2:v2...`, then `+` and
//! the lane's id; lanes are tried in ascending order of its MD5 hex digest.

use std::sync::{Arc, Mutex};

use md5::{Digest, Md5};

use super::merged::{Child, MergedSubscription};
use super::{combine_errors, field_key, merge_axes, Canon};
use crate::api::element::{AxesMap, ControlAction, ControlIdentifier, ListOptions};
use crate::api::fdb::{Fdb, ListIter};
use crate::api::reader::{ChainReader, DataReader};
use crate::api::results::{
    CheckElement, CompactElement, ControlElement, DumpElement, PurgeElement, StatsElement,
    WhereElement, WipeElement,
};
use crate::api::subscribe::{Start, SubscriptionBox};
use crate::api::ApiError;
use crate::error_kind::ErrorKind;
use crate::model::config::DistHash;
use crate::model::request::Request;
use crate::model::schema::Schema;
use crate::model::types::Context;
use crate::model::Key;

pub struct DistLane {
    pub id: String,
    /// What the hash is seeded with (FDB5: the lane's printed configuration).
    pub hash_id: String,
    pub fdb: Arc<dyn Fdb>,
}

pub struct DistFdb {
    lanes: Vec<DistLane>,
    hash: DistHash,
    /// For `hash: database`: splits a field key to find its database key.
    schema: Option<Schema>,
    cx: Context<'static>,
    /// Per lane: unflushed data from this handle, and flushes of it in progress. An archive
    /// failing on a lane with either cannot move on. Locked only to read or mark, never across
    /// a lane's archive or flush.
    dirty: Mutex<Vec<LaneState>>,
}

#[derive(Debug, Default, Clone, Copy)]
struct LaneState {
    /// Archived into since the last flush took the mark.
    dirty: bool,
    /// Flushes of the lane in progress: a flush starting meanwhile must flush the lane too, so
    /// that it returns only once the batch in flight (which may hold its caller's fields) is.
    flushing: usize,
}

impl LaneState {
    fn busy(&self) -> bool {
        self.dirty || self.flushing > 0
    }
}

/// Whether an archive failing on a lane with this kind of error moves on to the next lane:
/// only for errors about the lane's health or capacity. See docs/frontends.md.
fn fails_over(kind: ErrorKind) -> bool {
    match kind {
        ErrorKind::Io
        | ErrorKind::Remote
        | ErrorKind::Full
        | ErrorKind::Config
        | ErrorKind::Corrupt
        | ErrorKind::Unsupported
        | ErrorKind::Internal => true,
        ErrorKind::Locked
        | ErrorKind::BadRequest
        | ErrorKind::Schema
        | ErrorKind::Permission
        | ErrorKind::NotFound
        | ErrorKind::Timeout
        | ErrorKind::FellBehind => false,
    }
}

/// Elements buffered between a lane's listing thread and the consumer.
const LIST_QUEUE: usize = 4096;

/// The FDB5 hash input for a key: `/k1:v1/k2:v2...` in sorted keyword order.
pub fn flatten(key: &Key) -> String {
    let mut pairs: Vec<(&str, &str)> = key.iter().collect();
    pairs.sort();
    let mut s = String::new();
    for (k, v) in pairs {
        s.push('/');
        s.push_str(k);
        s.push(':');
        s.push_str(v);
    }
    s
}

/// Lane indexes in rendezvous order for a flattened key.
pub fn lane_order(flat: &str, ids: &[&str]) -> Vec<usize> {
    let mut scored: Vec<(String, usize)> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let mut h = Md5::new();
            h.update(flat.as_bytes());
            h.update(b"+");
            h.update(id.as_bytes());
            let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
            (hex, i)
        })
        .collect();
    scored.sort();
    scored.into_iter().map(|(_, i)| i).collect()
}

impl DistFdb {
    pub fn new(
        lanes: Vec<DistLane>,
        hash: DistHash,
        schema: Option<Schema>,
        cx: Context<'static>,
    ) -> Result<DistFdb, ApiError> {
        if lanes.is_empty() {
            return Err(ApiError::Config(
                "a dist config needs at least one lane".into(),
            ));
        }
        if hash == DistHash::Database && schema.is_none() {
            return Err(ApiError::Config(
                "hash: database needs a schema to find each field's database".into(),
            ));
        }
        let n = lanes.len();
        Ok(DistFdb {
            lanes,
            hash,
            schema,
            cx,
            dirty: Mutex::new(vec![LaneState::default(); n]),
        })
    }

    fn order(&self, key: &Key) -> Result<Vec<usize>, ApiError> {
        let hashed = match (&self.hash, &self.schema) {
            (DistHash::Database, Some(schema)) => {
                schema
                    .split(key, &self.cx, false)
                    .map_err(crate::model::ModelError::from)?
                    .db
            }
            // In stored form, so `param=t` and `param=130` land on the same lane; a canonical
            // key (what FDB5 hashes) is unchanged, so placements still agree with it.
            _ => Canon::default().key(key),
        };
        let ids: Vec<&str> = self.lanes.iter().map(|l| l.hash_id.as_str()).collect();
        let flat = flatten(&hashed);
        let order = lane_order(&flat, &ids);
        tracing::debug!(key = %flat, first = %self.lanes[order[0]].id, "dist placement");
        Ok(order)
    }

    fn place(
        &self,
        key: &Key,
        store: impl Fn(&dyn Fdb) -> Result<(), ApiError>,
    ) -> Result<(), ApiError> {
        let mut failures = Vec::new();
        for i in self.order(key)? {
            let lane = &self.lanes[i];
            match store(lane.fdb.as_ref()) {
                Ok(()) => {
                    if let Ok(mut d) = self.dirty.lock() {
                        d[i].dirty = true;
                    }
                    return Ok(());
                }
                // About the field or its database, not the lane: the next lane would say the
                // same, or (a lock) would take what the lock is there to refuse.
                Err(e) if !fails_over(e.kind()) => return Err(e),
                Err(e) => {
                    let dirty = self.dirty.lock().map(|d| d[i].busy()).unwrap_or(true);
                    if dirty {
                        // Moving on would split this handle's unflushed data over two lanes.
                        return Err(ApiError::Invalid(format!(
                            "archive on lane '{}' failed and it holds unflushed data: {e}",
                            lane.id
                        )));
                    }
                    tracing::warn!(lane = %lane.id, error = %e, "archive failed on a lane; trying the next");
                    failures.push((lane.id.clone(), e));
                }
            }
        }
        Err(combine_errors(&format!("archive of {key}"), failures))
    }

    /// Runs `f` on every lane at once and collects the answers in lane order.
    fn fan_out<T: Send>(
        &self,
        f: impl Fn(&dyn Fdb) -> Result<T, ApiError> + Sync,
    ) -> Result<Vec<T>, ApiError> {
        let results: Vec<Result<T, ApiError>> = std::thread::scope(|s| {
            let handles: Vec<_> = self
                .lanes
                .iter()
                .map(|l| {
                    let f = &f;
                    s.spawn(move || f(l.fdb.as_ref()))
                })
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err(ApiError::Invalid("a lane thread panicked".into())))
                })
                .collect()
        });
        let mut out = Vec::new();
        let mut errors = Vec::new();
        for (r, l) in results.into_iter().zip(&self.lanes) {
            match r {
                Ok(v) => out.push(v),
                Err(e) => errors.push((l.id.clone(), e)),
            }
        }
        if errors.is_empty() {
            Ok(out)
        } else {
            Err(combine_errors("a dist query", errors))
        }
    }

    fn concat<T: Send>(
        &self,
        f: impl Fn(&dyn Fdb) -> Result<Vec<T>, ApiError> + Sync,
    ) -> Result<Vec<T>, ApiError> {
        Ok(self.fan_out(f)?.into_iter().flatten().collect())
    }
}

impl Fdb for DistFdb {
    fn name(&self) -> String {
        format!(
            "dist({})",
            self.lanes
                .iter()
                .map(|l| format!("{}: {}", l.id, l.fdb.name()))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    fn archive(&self, key: Option<&Key>, data: &[u8]) -> Result<(), ApiError> {
        match key {
            Some(k) => self.place(k, |f| f.archive(Some(k), data)),
            None => {
                let k = field_key(None, data)?;
                self.place(&k, |f| f.archive_grib(&k, data))
            }
        }
    }

    fn archive_grib(&self, mars_key: &Key, data: &[u8]) -> Result<(), ApiError> {
        self.place(mars_key, |f| f.archive_grib(mars_key, data))
    }

    /// The marks are taken when the flush starts, not cleared when it ends: a lane archived
    /// into while its flush runs stays marked for the next flush.
    fn flush(&self) -> Result<(), ApiError> {
        // The marks are plain data: a thread that panicked holding them left them usable.
        let todo: Vec<bool> = self
            .dirty
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter_mut()
            .map(|l| {
                let busy = l.busy();
                if busy {
                    l.dirty = false;
                    l.flushing += 1;
                }
                busy
            })
            .collect();
        let mut errors = Vec::new();
        for (i, l) in self.lanes.iter().enumerate() {
            if !todo[i] {
                continue;
            }
            let flushed = l.fdb.flush();
            {
                let mut d = self.dirty.lock().unwrap_or_else(|e| e.into_inner());
                d[i].flushing -= 1;
                if flushed.is_err() {
                    d[i].dirty = true;
                }
            }
            if let Err(e) = flushed {
                errors.push((l.id.clone(), e));
            }
        }
        if errors.is_empty() {
            Ok(())
        } else {
            Err(combine_errors("flush", errors))
        }
    }

    fn retrieve(&self, request: &Request) -> Result<Box<dyn DataReader>, ApiError> {
        let mut parts = Vec::new();
        for l in &self.lanes {
            parts.push(l.fdb.retrieve(request)?);
        }
        Ok(Box::new(ChainReader::new(parts)))
    }

    /// Every lane lists on a thread of its own into a bounded queue: the answer streams, and a
    /// slow consumer throttles the lanes instead of filling memory.
    fn list(&self, request: &Request, options: ListOptions) -> Result<ListIter, ApiError> {
        let (tx, rx) = std::sync::mpsc::sync_channel(LIST_QUEUE);
        for l in &self.lanes {
            let (fdb, tx, request, id) = (l.fdb.clone(), tx.clone(), request.clone(), l.id.clone());
            std::thread::spawn(move || match fdb.list(&request, options) {
                Ok(it) => {
                    for el in it {
                        if tx.send(el).is_err() {
                            return;
                        }
                    }
                }
                Err(e) => {
                    let _ = tx.send(Err(ApiError::Invalid(format!("lane '{id}': {e}"))));
                }
            });
        }
        Ok(Box::new(rx.into_iter()))
    }

    /// Every lane, its streams under `<lane id>|`.
    fn subscribe(&self, request: &Request, start: &Start) -> Result<SubscriptionBox, ApiError> {
        let children = self
            .lanes
            .iter()
            .map(|l| Child {
                prefix: format!("{}|", l.id),
                name: l.id.clone(),
                fdb: l.fdb.as_ref(),
            })
            .collect();
        Ok(Box::new(MergedSubscription::start(
            children, request, start,
        )?))
    }

    /// The lanes share one schema, so the first lane that answers names the fields.
    fn wanted_fields(&self, request: &Request) -> Result<Vec<Key>, ApiError> {
        let mut errors = Vec::new();
        for l in &self.lanes {
            match l.fdb.wanted_fields(request) {
                Ok(k) => return Ok(k),
                Err(e) => errors.push((l.id.clone(), e)),
            }
        }
        Err(combine_errors("wanted fields", errors))
    }

    fn axes(&self, request: &Request, depth: u8) -> Result<AxesMap, ApiError> {
        let mut axes = AxesMap::new();
        for a in self.fan_out(|f| f.axes(request, depth))? {
            merge_axes(&mut axes, a);
        }
        Ok(axes)
    }

    fn where_(&self, request: &Request) -> Result<Vec<WhereElement>, ApiError> {
        self.concat(|f| f.where_(request))
    }

    fn wipe(&self, request: &Request, doit: bool) -> Result<Vec<WipeElement>, ApiError> {
        let out: Vec<WipeElement> = self
            .fan_out(|f| match f.wipe(request, doit) {
                Err(ApiError::NothingMatched(_)) => Ok(Vec::new()),
                other => other,
            })?
            .into_iter()
            .flatten()
            .collect();
        if out.is_empty() {
            return Err(ApiError::NothingMatched(format!(
                "no database matches {request} on any lane"
            )));
        }
        Ok(out)
    }

    fn purge(&self, request: &Request, doit: bool) -> Result<Vec<PurgeElement>, ApiError> {
        self.concat(|f| f.purge(request, doit))
    }

    fn stats(&self, request: &Request) -> Result<Vec<StatsElement>, ApiError> {
        let per_lane = self.fan_out(|f| f.stats(request))?;
        Ok(per_lane
            .into_iter()
            .zip(&self.lanes)
            .flat_map(|(elements, l)| {
                elements.into_iter().map(move |mut e| {
                    e.lanes.insert(0, l.id.clone());
                    e
                })
            })
            .collect())
    }

    fn dump(&self, request: &Request) -> Result<Vec<DumpElement>, ApiError> {
        self.concat(|f| f.dump(request))
    }

    fn control(
        &self,
        request: &Request,
        action: ControlAction,
        identifiers: &[ControlIdentifier],
    ) -> Result<Vec<ControlElement>, ApiError> {
        self.concat(|f| f.control(request, action, identifiers))
    }

    fn compact(&self, request: &Request) -> Result<Vec<CompactElement>, ApiError> {
        self.concat(|f| f.compact(request))
    }

    fn check(&self, request: &Request) -> Result<Vec<CheckElement>, ApiError> {
        self.concat(|f| f.check(request))
    }

    fn explain_nothing(&self, request: &Request) -> String {
        self.lanes
            .iter()
            .map(|l| format!("[{}] {}", l.id, l.fdb.explain_nothing(request)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flattening_and_rendezvous_order() {
        let k = Key::parse("step=6,class=od,param=130").unwrap();
        assert_eq!(flatten(&k), "/class:od/param:130/step:6");
        // MD5("/class:od/param:130/step:6+a") etc., computed independently with md5sum.
        let order = lane_order(&flatten(&k), &["a", "b", "c"]);
        assert_eq!(order.len(), 3);
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(sorted, vec![0, 1, 2]);
    }

    #[test]
    fn adding_a_lane_moves_about_its_share() {
        let ids4 = ["0", "1", "2", "3"];
        let ids5 = ["0", "1", "2", "3", "4"];
        let n = 20_000;
        let mut moved = 0;
        let mut per_lane = [0usize; 4];
        for i in 0..n {
            let flat = format!("/param:{}/step:{}", i % 97, i);
            let a = lane_order(&flat, &ids4)[0];
            let b = lane_order(&flat, &ids5)[0];
            per_lane[a] += 1;
            if a != b {
                assert_eq!(b, 4, "a key moved between old lanes");
                moved += 1;
            }
        }
        let share = moved as f64 / n as f64;
        assert!((share - 0.2).abs() < 0.02, "moved {share}");
        for c in per_lane {
            assert!((c as f64 / n as f64 - 0.25).abs() < 0.02, "{per_lane:?}");
        }
    }

    #[test]
    fn a_lane_archived_into_during_its_flush_is_flushed_by_the_next_flush() {
        use crate::api::testing::{local, SlowFlush};
        use std::sync::mpsc;
        use std::time::Duration;
        let d = tempfile::tempdir().unwrap();
        let slow = SlowFlush::new(local(d.path()));
        let lane = DistLane {
            id: "a".into(),
            hash_id: "a".into(),
            fdb: Arc::new(slow.clone()),
        };
        let dist =
            Arc::new(DistFdb::new(vec![lane], DistHash::Field, None, Context::default()).unwrap());
        let key = |step: usize| {
            Key::parse(&format!("class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step={step},levelist=500,param=130")).unwrap()
        };
        dist.archive(Some(&key(0)), b"f0").unwrap();
        let (entered, started) = mpsc::channel();
        let (release, released) = mpsc::channel();
        // Held once the lane's own flush is done: what comes now is the lane's next batch.
        slow.arm_after(entered, released);
        let flusher = std::thread::spawn({
            let dist = dist.clone();
            move || dist.flush()
        });
        started.recv_timeout(Duration::from_secs(30)).unwrap();
        let archived = dist.archive(Some(&key(1)), b"f1");
        let _ = release.send(());
        flusher.join().unwrap().unwrap();
        archived.unwrap();
        dist.flush().unwrap();
        let all = crate::model::request::parse_request("class=od").unwrap();
        assert_eq!(
            slow.inner
                .list(&all, ListOptions::default())
                .unwrap()
                .count(),
            2,
            "the field archived during the first flush was left unflushed by the second"
        );
    }

    /// Stats name the lane each database was found in, so the CLI can say which lane it is in.
    #[test]
    fn stats_carry_the_lane() {
        use crate::api::testing::local;
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let lanes = [("a", &a), ("b", &b)]
            .into_iter()
            .map(|(id, d)| DistLane {
                id: id.into(),
                hash_id: id.into(),
                fdb: local(d.path()),
            })
            .collect();
        let dist = DistFdb::new(lanes, DistHash::Field, None, Context::default()).unwrap();
        for step in 0..8 {
            let k = Key::parse(&format!("class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step={step},levelist=500,param=130")).unwrap();
            dist.archive(Some(&k), b"f").unwrap();
        }
        dist.flush().unwrap();
        let all = crate::model::request::parse_request("class=od").unwrap();
        let stats = dist.stats(&all).unwrap();
        assert!(!stats.is_empty());
        for s in &stats {
            assert_eq!(s.lanes.len(), 1);
            let dir = if s.lanes[0] == "a" {
                a.path()
            } else {
                b.path()
            };
            assert!(s.location.starts_with(&dir.display().to_string()), "{s:?}");
        }
        assert_eq!(stats.iter().map(|s| s.fields).sum::<u64>(), 8);
    }

    /// A lane whose archives fail with a set error, counting them.
    struct Refusing {
        error: fn() -> ApiError,
        tried: std::sync::atomic::AtomicUsize,
    }

    impl Fdb for Refusing {
        fn name(&self) -> String {
            "refusing".into()
        }
        fn archive(&self, _: Option<&Key>, _: &[u8]) -> Result<(), ApiError> {
            self.tried.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Err((self.error)())
        }
    }

    /// Two lanes failing with `error`; how many archives each was asked for, and the answer.
    fn archive_on_two_failing_lanes(error: fn() -> ApiError) -> (usize, ApiError) {
        let lanes: Vec<Arc<Refusing>> = (0..2)
            .map(|_| {
                Arc::new(Refusing {
                    error,
                    tried: Default::default(),
                })
            })
            .collect();
        let dist = DistFdb::new(
            lanes
                .iter()
                .enumerate()
                .map(|(i, l)| DistLane {
                    id: i.to_string(),
                    hash_id: i.to_string(),
                    fdb: l.clone(),
                })
                .collect(),
            DistHash::Field,
            None,
            Context::default(),
        )
        .unwrap();
        let k = Key::parse("class=od,step=0,param=130").unwrap();
        let e = dist.archive(Some(&k), b"f").unwrap_err();
        let tried = lanes
            .iter()
            .map(|l| l.tried.load(std::sync::atomic::Ordering::SeqCst))
            .sum();
        (tried, e)
    }

    #[test]
    fn a_lock_is_returned_not_failed_over() {
        let (tried, e) = archive_on_two_failing_lanes(|| ApiError::Locked {
            db: "db".into(),
            action: "archive".into(),
        });
        assert_eq!(tried, 1, "a locked archive was tried on the next lane");
        assert_eq!(e.kind(), ErrorKind::Locked, "{e}");
        let (tried, e) = archive_on_two_failing_lanes(|| ApiError::Invalid("bad".into()));
        assert_eq!((tried, e.kind()), (1, ErrorKind::BadRequest));
    }

    #[test]
    fn a_field_goes_to_one_lane_whatever_the_form_of_its_key() {
        let lanes = ["a", "b", "c", "d"]
            .into_iter()
            .map(|id| DistLane {
                id: id.into(),
                hash_id: id.into(),
                fdb: Arc::new(Refusing {
                    error: || ApiError::Invalid("unused".into()),
                    tried: Default::default(),
                }),
            })
            .collect();
        let dist = DistFdb::new(lanes, DistHash::Field, None, Context::default()).unwrap();
        for step in 0..16 {
            let k =
                |param: &str| Key::parse(&format!("class=od,step={step},param={param}")).unwrap();
            assert_eq!(dist.order(&k("t")).unwrap(), dist.order(&k("130")).unwrap());
        }
    }

    #[test]
    fn a_lane_failure_is_failed_over() {
        let (tried, _) = archive_on_two_failing_lanes(|| ApiError::Config("no root".into()));
        assert_eq!(
            tried, 2,
            "a lane's failure did not move on to the next lane"
        );
    }
}
