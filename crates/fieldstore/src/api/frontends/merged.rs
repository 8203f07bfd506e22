//! One subscription out of several children's (dist lanes, select lanes): each child's streams
//! are named under a stable prefix, so a position splits back into the children's parts.
//!
//! A thread per child moves its notices into one bounded queue: a child whose notices are not
//! taken blocks on the full queue (its own stream only), and memory stays bounded however slow
//! the caller.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::combine_errors;
use crate::api::fdb::Fdb;
use crate::api::subscribe::{Notice, Position, Start, Subscription, SubscriptionBox};
use crate::api::ApiError;
use crate::model::request::Request;
use crate::model::Key;

/// Notices queued between the children's threads and the caller.
const QUEUE: usize = 1024;
/// How long a child's thread waits for a notice, or for room in the queue, before it looks
/// whether the subscription was dropped.
const TICK: Duration = Duration::from_millis(100);

enum Msg {
    Notice(Notice),
    Failed(String, ApiError),
}

pub(crate) struct MergedSubscription {
    rx: Option<Receiver<Msg>>,
    position: Position,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// A child to follow: the prefix its streams go under, its name for errors, and the store.
pub(crate) struct Child<'a> {
    pub prefix: String,
    pub name: String,
    pub fdb: &'a dyn Fdb,
}

impl MergedSubscription {
    /// Subscribes every child (each from its own part of `start`), then follows them all.
    pub(crate) fn start(
        children: Vec<Child<'_>>,
        request: &Request,
        start: &Start,
    ) -> Result<MergedSubscription, ApiError> {
        let mut subs = Vec::new();
        let mut position = Position::default();
        for c in children {
            let child_start = match start {
                Start::At(p) => Start::At(p.under(&c.prefix)),
                other => other.clone(),
            };
            let sub = c
                .fdb
                .subscribe(request, &child_start)
                .map_err(|e| combine_errors("subscribe", vec![(c.name.clone(), e)]))?;
            position.extend_under(&c.prefix, sub.position());
            subs.push((c.prefix, c.name, sub));
        }
        let (tx, rx) = sync_channel(QUEUE);
        let stop = Arc::new(AtomicBool::new(false));
        let threads = subs
            .into_iter()
            .map(|(prefix, name, sub)| {
                let (tx, stop) = (tx.clone(), stop.clone());
                std::thread::spawn(move || follow(sub, &prefix, &name, &tx, &stop))
            })
            .collect();
        Ok(MergedSubscription {
            rx: Some(rx),
            position,
            stop,
            threads,
        })
    }
}

/// Moves one child's notices into the queue until the subscription is dropped or the child
/// fails.
fn follow(
    mut sub: SubscriptionBox,
    prefix: &str,
    name: &str,
    tx: &SyncSender<Msg>,
    stop: &AtomicBool,
) {
    while !stop.load(Ordering::Relaxed) {
        let mut msg = match sub.next_within(TICK) {
            Ok(None) => continue,
            Ok(Some(mut n)) => {
                n.stream = format!("{prefix}{}", n.stream);
                Msg::Notice(n)
            }
            Err(e) => Msg::Failed(name.to_string(), e),
        };
        let failed = matches!(msg, Msg::Failed(..));
        loop {
            match tx.try_send(msg) {
                Ok(()) => break,
                Err(TrySendError::Disconnected(_)) => return,
                Err(TrySendError::Full(m)) => {
                    if stop.load(Ordering::Relaxed) {
                        return;
                    }
                    msg = m;
                    std::thread::sleep(TICK / 10);
                }
            }
        }
        if failed {
            return;
        }
    }
}

impl Subscription for MergedSubscription {
    /// A child's error is returned once, naming the child; the others go on.
    fn next_within(&mut self, timeout: Duration) -> Result<Option<Notice>, ApiError> {
        let Some(rx) = &self.rx else {
            return Ok(None);
        };
        let got = match rx.recv_timeout(timeout) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => return Ok(None),
            // Every child failed (each error already returned): nothing more will come.
            Err(RecvTimeoutError::Disconnected) => return Ok(None),
        };
        match got {
            Msg::Notice(n) => {
                self.position.advance(&n);
                Ok(Some(n))
            }
            Msg::Failed(name, e) => Err(combine_errors("subscription", vec![(name, e)])),
        }
    }

    fn position(&self) -> Position {
        self.position.clone()
    }
}

impl Drop for MergedSubscription {
    /// Stops the children's threads (each within a tick) and drops their subscriptions.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        self.rx = None;
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// The union of the children's wanted fields, in order, each once.
pub(crate) fn union_of_wanted(
    children: impl Iterator<Item = Result<Vec<Key>, ApiError>>,
) -> Result<Vec<Key>, ApiError> {
    let mut seen = std::collections::HashSet::new();
    let mut out = Vec::new();
    for keys in children {
        for k in keys? {
            if seen.insert(k.to_string()) {
                out.push(k);
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::LocalFdb;
    use crate::model::request::parse_request;

    fn memory() -> Arc<LocalFdb> {
        match crate::model::config::from_yaml_str("{engine: memory}", "test").unwrap() {
            crate::model::config::FdbConfig::Local(l) => Arc::new(LocalFdb::new(l).unwrap()),
            other => panic!("expected a local config, got {other:?}"),
        }
    }

    fn key(step: u32) -> Key {
        Key::parse(&format!("class=od,expver=0001,stream=oper,date=20260101,time=0000,type=fc,levtype=sfc,step={step},param=167")).unwrap()
    }

    fn put(f: &LocalFdb, steps: &[u32]) {
        for s in steps {
            f.archive_grib(&key(*s), b"GRIB....7777").unwrap();
        }
        f.flush().unwrap();
    }

    fn merged(a: &Arc<LocalFdb>, b: &Arc<LocalFdb>, start: &Start) -> MergedSubscription {
        let children = vec![
            Child {
                prefix: "a|".into(),
                name: "a".into(),
                fdb: &**a,
            },
            Child {
                prefix: "b|".into(),
                name: "b".into(),
                fdb: &**b,
            },
        ];
        MergedSubscription::start(children, &parse_request("class=od").unwrap(), start).unwrap()
    }

    /// (prefix, step) of the next `n` notices.
    fn take(s: &mut MergedSubscription, n: usize) -> Vec<(String, String)> {
        (0..n)
            .map(|_| {
                let n = s.next_within(Duration::from_secs(5)).unwrap().unwrap();
                (
                    n.stream[..2].to_string(),
                    n.element.key.datum.get("step").unwrap().to_string(),
                )
            })
            .collect()
    }

    #[test]
    fn two_lanes_merge_in_order_and_resume_by_split_position() {
        let (a, b) = (memory(), memory());
        put(&a, &[0]);
        let mut s = merged(&a, &b, &Start::Beginning);
        put(&b, &[1, 2]);
        put(&a, &[3]);
        let mut got = take(&mut s, 4);
        // Per lane, in flush order.
        let of = |p: &str| -> Vec<String> {
            got.iter()
                .filter(|(q, _)| q == p)
                .map(|(_, s)| s.clone())
                .collect()
        };
        assert_eq!(of("a|"), ["0", "3"]);
        let mut bs = of("b|");
        bs.sort();
        assert_eq!(bs, ["1", "2"]);
        assert!(s.next_within(Duration::from_millis(50)).unwrap().is_none());
        let at = s.position();
        assert_eq!(at.streams.len(), 2);
        assert!(at
            .streams
            .keys()
            .all(|k| k.starts_with("a|") || k.starts_with("b|")));
        drop(s);
        put(&a, &[4]);
        put(&b, &[5]);
        let mut again = merged(&a, &b, &Start::At(at));
        got = take(&mut again, 2);
        got.sort();
        assert_eq!(
            got,
            [
                ("a|".to_string(), "4".to_string()),
                ("b|".into(), "5".into())
            ]
        );
        assert!(again
            .next_within(Duration::from_millis(50))
            .unwrap()
            .is_none());
    }

    #[test]
    fn a_position_taken_before_any_notice_names_every_lane() {
        let (a, b) = (memory(), memory());
        put(&a, &[0]);
        put(&b, &[1]);
        let s = merged(&a, &b, &Start::Now);
        let p = s.position();
        assert_eq!(p.under("a|").streams.len(), 1);
        assert_eq!(p.under("b|").streams.len(), 1);
    }

    /// A subscription that counts itself alive while it exists.
    struct Counted(Arc<std::sync::atomic::AtomicUsize>);
    impl Subscription for Counted {
        fn next_within(&mut self, timeout: Duration) -> Result<Option<Notice>, ApiError> {
            std::thread::sleep(timeout);
            Ok(None)
        }
        fn position(&self) -> Position {
            Position::default()
        }
    }
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_sub(1, Ordering::SeqCst);
        }
    }
    struct Lane(Arc<std::sync::atomic::AtomicUsize>);
    impl Fdb for Lane {
        fn name(&self) -> String {
            "counted".into()
        }
        fn subscribe(&self, _: &Request, _: &Start) -> Result<SubscriptionBox, ApiError> {
            self.0.fetch_add(1, Ordering::SeqCst);
            Ok(Box::new(Counted(self.0.clone())))
        }
    }

    #[test]
    fn dropping_the_merge_stops_the_children() {
        let alive = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let lane = Lane(alive.clone());
        let children = (0..3)
            .map(|i| Child {
                prefix: format!("{i}|"),
                name: i.to_string(),
                fdb: &lane,
            })
            .collect();
        let r = parse_request("class=od").unwrap();
        let mut s = MergedSubscription::start(children, &r, &Start::Now).unwrap();
        assert_eq!(alive.load(Ordering::SeqCst), 3);
        assert!(s.next_within(Duration::from_millis(10)).unwrap().is_none());
        drop(s);
        assert_eq!(alive.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn a_childs_error_reaches_the_caller_naming_it() {
        let good = memory();
        let children = vec![
            Child {
                prefix: "0|".into(),
                name: "good".into(),
                fdb: &*good,
            },
            Child {
                prefix: "1|".into(),
                name: "bare".into(),
                fdb: &Bare,
            },
        ];
        let r = parse_request("class=od").unwrap();
        let e = MergedSubscription::start(children, &r, &Start::Now)
            .err()
            .unwrap();
        assert!(e.to_string().contains("[bare]"), "{e}");
    }

    struct Bare;
    impl Fdb for Bare {
        fn name(&self) -> String {
            "bare".into()
        }
    }
}
