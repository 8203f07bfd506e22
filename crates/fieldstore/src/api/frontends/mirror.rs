//! `type: mirror`: every field to every child; a flush succeeds when enough children (the
//! quorum, by default all) flushed everything; reads from the first child that answers.

use crate::api::reader::{DataReader, EmptyReader};
use std::sync::{Arc, Mutex};

use super::{combine_errors, field_key};
use crate::api::element::{AxesMap, ControlAction, ControlIdentifier, ListOptions};
use crate::api::fdb::{Fdb, ListIter};
use crate::api::results::{
    CheckElement, CompactElement, ControlElement, DumpElement, PurgeElement, StatsElement,
    WhereElement, WipeElement,
};
use crate::api::subscribe::{Notice, Position, Start, Subscription, SubscriptionBox};
use crate::api::ApiError;
use crate::error_kind::ErrorKind;
use crate::model::request::Request;
use crate::model::Key;
use std::time::Duration;

pub struct MirrorFdb {
    children: Vec<Arc<dyn Fdb>>,
    quorum: usize,
    /// Children whose archive failed since the last flush: their flush cannot count. Locked
    /// only to read or mark, never across a child's archive or flush, so threads sharing the
    /// handle archive at once and a slow flush holds up no archive.
    failed: Mutex<Vec<Option<String>>>,
}

impl MirrorFdb {
    pub fn new(children: Vec<Arc<dyn Fdb>>, quorum: Option<usize>) -> Result<MirrorFdb, ApiError> {
        if children.is_empty() {
            return Err(ApiError::Config("a mirror needs at least one child".into()));
        }
        let n = children.len();
        Ok(MirrorFdb {
            quorum: quorum.unwrap_or(n).clamp(1, n),
            failed: Mutex::new(vec![None; n]),
            children,
        })
    }

    fn failed(&self) -> Result<std::sync::MutexGuard<'_, Vec<Option<String>>>, ApiError> {
        self.failed
            .lock()
            .map_err(|_| ApiError::Invalid("a mirror thread panicked".into()))
    }

    /// A child that fails while a flush runs on another thread is marked after that flush took
    /// the marks: the field was archived concurrently with the flush, so it belongs to the next
    /// one, which then reports the child.
    fn to_all(&self, f: impl Fn(&dyn Fdb) -> Result<(), ApiError>) -> Result<(), ApiError> {
        let mut ok = 0;
        let mut errors = Vec::new();
        let skip: Vec<bool> = self.failed()?.iter().map(Option::is_some).collect();
        let mut newly = Vec::new();
        for (i, c) in self.children.iter().enumerate() {
            if skip[i] {
                continue;
            }
            match f(c.as_ref()) {
                Ok(()) => ok += 1,
                Err(e) => {
                    newly.push((i, e.to_string()));
                    errors.push((c.name(), e));
                }
            }
        }
        let mut failed = self.failed()?;
        for (i, why) in newly {
            failed[i].get_or_insert(why);
        }
        // Fail early only when the quorum can no longer be reached.
        let alive = failed.iter().filter(|f| f.is_none()).count();
        if ok == 0 || alive < self.quorum {
            return Err(combine_errors("archive to the mirror", errors));
        }
        for (n, e) in errors {
            tracing::warn!(child = %n, error = %e, "mirror child failed; continuing with the others");
        }
        Ok(())
    }

    /// The first child whose answer is not an error.
    fn first<T>(&self, f: impl Fn(&dyn Fdb) -> Result<T, ApiError>) -> Result<T, ApiError> {
        let mut errors = Vec::new();
        for c in &self.children {
            match f(c.as_ref()) {
                Ok(v) => return Ok(v),
                Err(e) => errors.push((c.name(), e)),
            }
        }
        Err(combine_errors("every mirror child", errors))
    }
}

impl Fdb for MirrorFdb {
    fn name(&self) -> String {
        format!(
            "mirror({})",
            self.children
                .iter()
                .map(|c| c.name())
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    fn archive(&self, key: Option<&Key>, data: &[u8]) -> Result<(), ApiError> {
        match key {
            Some(k) => self.to_all(|f| f.archive(Some(k), data)),
            None => {
                let k = field_key(None, data)?;
                self.to_all(|f| f.archive_grib(&k, data))
            }
        }
    }

    fn archive_grib(&self, mars_key: &Key, data: &[u8]) -> Result<(), ApiError> {
        self.to_all(|f| f.archive_grib(mars_key, data))
    }

    fn flush(&self) -> Result<(), ApiError> {
        let mut failed: Vec<Option<String>> = self.failed()?.iter_mut().map(Option::take).collect();
        let mut ok = 0;
        let mut errors = Vec::new();
        for (i, c) in self.children.iter().enumerate() {
            if let Some(why) = failed[i].take() {
                errors.push((
                    c.name(),
                    ApiError::Invalid(format!("an archive failed: {why}")),
                ));
                continue;
            }
            match c.flush() {
                Ok(()) => ok += 1,
                Err(e) => errors.push((c.name(), e)),
            }
        }
        if ok >= self.quorum {
            for (n, e) in errors {
                tracing::warn!(child = %n, error = %e, "mirror child missed a flush (quorum reached)");
            }
            Ok(())
        } else {
            Err(ApiError::Invalid(format!(
                "mirror flush reached {ok} of the {} children it needs: {}",
                self.quorum,
                combine_errors("flush", errors)
            )))
        }
    }

    /// The first child with something to give: one that fails, or answers with nothing while
    /// another child may hold the fields (a lost disk, a wiped copy), gives way to the next.
    fn retrieve(&self, request: &Request) -> Result<Box<dyn DataReader>, ApiError> {
        let mut errors = Vec::new();
        for c in &self.children {
            let stream = match c.retrieve(request) {
                Ok(s) => s,
                Err(e) => {
                    errors.push((c.name(), e));
                    continue;
                }
            };
            if stream.size() > 0 {
                return Ok(stream);
            }
        }
        if errors.is_empty() {
            return Ok(Box::new(EmptyReader::default()));
        }
        Err(combine_errors("retrieve on every mirror child", errors))
    }

    fn list(&self, request: &Request, options: ListOptions) -> Result<ListIter, ApiError> {
        // A child that fails, or has nothing, gives way to the next.
        let mut errors = Vec::new();
        for c in &self.children {
            match c.list(request, options) {
                Ok(mut it) => match it.next() {
                    Some(Err(e)) => errors.push((c.name(), e)),
                    Some(Ok(first)) => {
                        return Ok(Box::new(std::iter::once(Ok(first)).chain(it)));
                    }
                    None => continue,
                },
                Err(e) => errors.push((c.name(), e)),
            }
        }
        if errors.is_empty() {
            return Ok(Box::new(std::iter::empty()));
        }
        Err(combine_errors("list on every mirror child", errors))
    }

    /// One copy at a time (every copy holds the same fields): see [`MirrorSubscription`].
    fn subscribe(&self, request: &Request, start: &Start) -> Result<SubscriptionBox, ApiError> {
        MirrorSubscription::start(self.children.clone(), request.clone(), start)
            .map(|s| Box::new(s) as SubscriptionBox)
    }

    fn wanted_fields(&self, request: &Request) -> Result<Vec<Key>, ApiError> {
        self.first(|f| f.wanted_fields(request))
    }

    fn axes(&self, request: &Request, depth: u8) -> Result<AxesMap, ApiError> {
        self.first(|f| f.axes(request, depth))
    }

    fn where_(&self, request: &Request) -> Result<Vec<WhereElement>, ApiError> {
        let mut out = Vec::new();
        for c in &self.children {
            out.extend(c.where_(request)?);
        }
        Ok(out)
    }

    fn wipe(&self, request: &Request, doit: bool) -> Result<Vec<WipeElement>, ApiError> {
        let mut out = Vec::new();
        for c in &self.children {
            out.extend(c.wipe(request, doit)?);
        }
        Ok(out)
    }

    fn purge(&self, request: &Request, doit: bool) -> Result<Vec<PurgeElement>, ApiError> {
        let mut out = Vec::new();
        for c in &self.children {
            out.extend(c.purge(request, doit)?);
        }
        Ok(out)
    }

    fn stats(&self, request: &Request) -> Result<Vec<StatsElement>, ApiError> {
        self.first(|f| f.stats(request))
    }

    fn dump(&self, request: &Request) -> Result<Vec<DumpElement>, ApiError> {
        self.first(|f| f.dump(request))
    }

    fn control(
        &self,
        request: &Request,
        action: ControlAction,
        identifiers: &[ControlIdentifier],
    ) -> Result<Vec<ControlElement>, ApiError> {
        let mut out = Vec::new();
        for c in &self.children {
            out.extend(c.control(request, action, identifiers)?);
        }
        Ok(out)
    }

    fn compact(&self, request: &Request) -> Result<Vec<CompactElement>, ApiError> {
        let mut out = Vec::new();
        for c in &self.children {
            out.extend(c.compact(request)?);
        }
        Ok(out)
    }

    /// Every copy: each is its own directory.
    fn check(&self, request: &Request) -> Result<Vec<CheckElement>, ApiError> {
        let mut out = Vec::new();
        for c in &self.children {
            out.extend(c.check(request)?);
        }
        Ok(out)
    }

    fn explain_nothing(&self, request: &Request) -> String {
        self.children[0].explain_nothing(request)
    }
}

/// Follows the first copy that accepts the subscription, its streams under `<child index>|`.
/// The position holds that copy's part only, so a resume goes back to the same copy. When the
/// copy fails (its server gone, its disk lost), the next copy takes over from `now`: copies
/// number their histories independently, so one copy's cursor means nothing on another.
/// Fields flushed between the failure and the takeover may be missed then; the takeover is
/// logged. Seeing each field once matters more here than seeing it from two places.
pub struct MirrorSubscription {
    children: Vec<Arc<dyn Fdb>>,
    request: Request,
    active: usize,
    sub: SubscriptionBox,
    /// The active copy's part.
    position: Position,
}

impl MirrorSubscription {
    fn start(
        children: Vec<Arc<dyn Fdb>>,
        request: Request,
        start: &Start,
    ) -> Result<MirrorSubscription, ApiError> {
        // A position names the copy it ran on: begin there.
        let first = match start {
            Start::At(p) => (0..children.len())
                .find(|i| !p.under(&format!("{i}|")).streams.is_empty())
                .unwrap_or(0),
            _ => 0,
        };
        let mut errors = Vec::new();
        for i in (first..children.len()).chain(0..first) {
            let child_start = match start {
                Start::At(p) => Start::At(p.under(&format!("{i}|"))),
                other => other.clone(),
            };
            match children[i].subscribe(&request, &child_start) {
                Ok(sub) => {
                    let mut s = MirrorSubscription {
                        children,
                        request,
                        active: i,
                        sub,
                        position: Position::default(),
                    };
                    s.note_child_position();
                    return Ok(s);
                }
                Err(e) => errors.push((children[i].name(), e)),
            }
        }
        Err(combine_errors("subscribe on every mirror child", errors))
    }

    fn prefix(&self) -> String {
        format!("{}|", self.active)
    }

    fn note_child_position(&mut self) {
        self.position = Position::default();
        self.position
            .extend_under(&self.prefix(), self.sub.position());
    }

    /// Moves to the next copy that accepts; `Err` when none does.
    fn fail_over(&mut self, why: ApiError) -> Result<(), ApiError> {
        let n = self.children.len();
        let mut errors = vec![(self.children[self.active].name(), why)];
        for step in 1..n {
            let i = (self.active + step) % n;
            match self.children[i].subscribe(&self.request, &Start::Now) {
                Ok(sub) => {
                    tracing::warn!(
                        from = %self.children[self.active].name(),
                        to = %self.children[i].name(),
                        error = %errors[0].1,
                        "mirror subscription moved to another copy"
                    );
                    self.active = i;
                    self.sub = sub;
                    self.note_child_position();
                    return Ok(());
                }
                Err(e) => errors.push((self.children[i].name(), e)),
            }
        }
        Err(combine_errors("subscription on every mirror child", errors))
    }
}

impl Subscription for MirrorSubscription {
    fn next_within(&mut self, timeout: Duration) -> Result<Option<Notice>, ApiError> {
        self.next_from_copy(timeout, &mut |_| true)
    }

    fn next_admitted(
        &mut self,
        timeout: Duration,
        admit: &mut dyn FnMut(u64) -> bool,
    ) -> Result<Option<Notice>, ApiError> {
        self.next_from_copy(timeout, admit)
    }

    fn position(&self) -> Position {
        self.position.clone()
    }
}

impl MirrorSubscription {
    /// The followed copy's next notice (its bytes as `admit` allows), failing over on errors.
    fn next_from_copy(
        &mut self,
        timeout: Duration,
        admit: &mut dyn FnMut(u64) -> bool,
    ) -> Result<Option<Notice>, ApiError> {
        match self.sub.next_admitted(timeout, admit) {
            Ok(Some(mut n)) => {
                n.stream = format!("{}{}", self.prefix(), n.stream);
                self.position.advance(&n);
                Ok(Some(n))
            }
            // The copy's own position may have moved past commits the request did not want.
            Ok(None) => {
                self.note_child_position();
                Ok(None)
            }
            // About the request or the position, not the copy: another copy would say the same.
            Err(e) if !matches!(e.kind(), ErrorKind::Remote | ErrorKind::Io) => Err(e),
            Err(e) => {
                self.fail_over(e)?;
                Ok(None)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::{archives_during_held_flush, local, SlowFlush};

    fn key(step: usize) -> Key {
        Key::parse(&format!("class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step={step},levelist=500,param=130")).unwrap()
    }

    #[test]
    fn archives_go_on_while_a_child_flushes_slowly() {
        let (d1, d2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let slow = Arc::new(SlowFlush::new(local(d1.path())));
        let other = local(d2.path());
        let m = Arc::new(MirrorFdb::new(vec![slow.clone(), other.clone()], None).unwrap());
        m.archive(Some(&key(0)), b"f0").unwrap();
        let went_on = archives_during_held_flush(
            &m,
            |entered, released| slow.arm(entered, released),
            |m| m.archive(Some(&key(1)), b"f1"),
        );
        assert!(went_on, "an archive waited for a child's flush");
        m.flush().unwrap();
        let all = crate::model::request::parse_request("class=od").unwrap();
        for child in [slow.inner.clone(), other] {
            assert_eq!(child.list(&all, ListOptions::default()).unwrap().count(), 2);
        }
    }

    /// A child whose subscriptions fail like a lost server once `down` is set.
    struct Flaky {
        inner: Arc<crate::api::LocalFdb>,
        down: Arc<std::sync::atomic::AtomicBool>,
    }
    struct FlakySub(SubscriptionBox, Arc<std::sync::atomic::AtomicBool>);
    impl Subscription for FlakySub {
        fn next_within(&mut self, t: Duration) -> Result<Option<Notice>, ApiError> {
            if self.1.load(std::sync::atomic::Ordering::SeqCst) {
                return Err(ApiError::Children {
                    summary: "the copy's server went away".into(),
                    kind: ErrorKind::Remote,
                });
            }
            self.0.next_within(t)
        }
        fn position(&self) -> Position {
            self.0.position()
        }
    }
    impl Fdb for Flaky {
        fn name(&self) -> String {
            "flaky".into()
        }
        fn forward_to(&self) -> Option<&dyn Fdb> {
            Some(&*self.inner)
        }
        fn subscribe(&self, r: &Request, s: &Start) -> Result<SubscriptionBox, ApiError> {
            Ok(Box::new(FlakySub(
                self.inner.subscribe(r, s)?,
                self.down.clone(),
            )))
        }
    }

    fn memory() -> Arc<crate::api::LocalFdb> {
        match crate::model::config::from_yaml_str("{engine: memory}", "test").unwrap() {
            crate::model::config::FdbConfig::Local(l) => {
                Arc::new(crate::api::LocalFdb::new(l).unwrap())
            }
            other => panic!("expected a local config, got {other:?}"),
        }
    }

    fn next_step(s: &mut dyn Subscription) -> Option<String> {
        // A failover answers `None` once; the notice follows.
        for _ in 0..3 {
            if let Some(n) = s.next_within(Duration::from_secs(5)).unwrap() {
                return Some(n.element.key.datum.get("step").unwrap().to_string());
            }
        }
        None
    }

    #[test]
    fn a_subscription_sees_each_field_once_and_moves_to_the_next_copy() {
        let down = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let first = Arc::new(Flaky {
            inner: memory(),
            down: down.clone(),
        });
        let m = MirrorFdb::new(vec![first, memory()], None).unwrap();
        let r = crate::model::request::parse_request("class=od").unwrap();
        let mut s = m.subscribe(&r, &Start::Now).unwrap();
        m.archive(Some(&key(0)), b"f0").unwrap();
        m.flush().unwrap();
        assert_eq!(next_step(&mut *s).as_deref(), Some("0"));
        // Both copies hold step 0; it came once.
        assert!(s.next_within(Duration::from_millis(100)).unwrap().is_none());
        assert!(s.position().streams.keys().all(|k| k.starts_with("0|")));
        down.store(true, std::sync::atomic::Ordering::SeqCst);
        assert!(s.next_within(Duration::from_millis(100)).unwrap().is_none());
        m.archive(Some(&key(1)), b"f1").unwrap();
        m.flush().unwrap();
        assert_eq!(next_step(&mut *s).as_deref(), Some("1"));
        assert!(s.position().streams.keys().all(|k| k.starts_with("1|")));
        // Resuming from that position goes back to the second copy.
        let at = s.position();
        drop(s);
        m.archive(Some(&key(2)), b"f2").unwrap();
        m.flush().unwrap();
        let mut again = m.subscribe(&r, &Start::At(at)).unwrap();
        assert_eq!(next_step(&mut *again).as_deref(), Some("2"));
        assert!(again
            .next_within(Duration::from_millis(100))
            .unwrap()
            .is_none());
    }
}
