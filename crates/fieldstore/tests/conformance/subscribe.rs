//! Subscribe and retrieve-and-wait (docs/subscribe.md): a subscriber sees every matching field
//! once, as flushes make it visible and never before, whole flushes at a time; a position
//! resumes without a gap or a repeat; a wiped database made again is followed from its start.

use std::collections::BTreeSet;
use std::time::Duration;

use fieldstore::api::{Fdb, Notice, Position, RetrieveWait, Start, Subscription};
use fieldstore::model::request::Request;
use fieldstore::model::Key;
use fieldstore::ErrorKind;

use crate::data::{archive_all, bytes, everything, key, request, retrieve_request};
use crate::harness::Env;
use crate::ops::{full_key, wipe};

crate::cases!(
    from_now_sees_later_flushes_once_and_whole,
    from_the_beginning_sees_what_exists_then_what_follows,
    a_position_taken_mid_flush_resumes_without_gap_or_repeat,
    the_request_filters_what_is_delivered,
    a_wiped_database_archived_again_is_followed_from_its_start,
    retrieve_wait_gives_present_fields_then_arrivals_then_times_out,
);

/// However slow the store (an S3 catalogue delivers a flush a few seconds after it), a field
/// expected arrives within this.
const ARRIVES: Duration = Duration::from_secs(20);

/// Long enough for a field that should not come to have come.
const QUIET: Duration = Duration::from_millis(500);

/// A key's pairs sorted, so keys compare whatever their keyword order.
fn canon(text: &str) -> String {
    let mut pairs: Vec<&str> = text.split(',').filter(|p| !p.ends_with('=')).collect();
    pairs.sort_unstable();
    pairs.join(",")
}

fn of_key(k: &Key) -> String {
    canon(
        &k.iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect::<Vec<_>>()
            .join(","),
    )
}

fn of_notice(n: &Notice) -> String {
    canon(&full_key(&n.element))
}

fn subscribe(fdb: &dyn Fdb, r: &Request, start: &Start) -> Box<dyn Subscription> {
    fdb.subscribe(r, start)
        .unwrap_or_else(|e| panic!("subscribe {r}: {e}"))
}

/// The next `n` notices' keys, in arrival order; fails if one does not come.
fn take(sub: &mut dyn Subscription, n: usize) -> Vec<String> {
    (0..n)
        .map(|i| {
            let got = sub
                .next_within(ARRIVES)
                .unwrap_or_else(|e| panic!("subscription failed after {i} of {n} notices: {e}"));
            of_notice(&got.unwrap_or_else(|| {
                panic!("only {i} of {n} expected notices came within {ARRIVES:?}")
            }))
        })
        .collect()
}

/// Fails if a notice comes within [`QUIET`].
fn nothing_more(sub: &mut dyn Subscription, why: &str) {
    if let Some(n) = sub.next_within(QUIET).expect("subscription") {
        panic!("{why}: got {}", of_notice(&n));
    }
}

fn set(keys: &[String]) -> BTreeSet<String> {
    let s: BTreeSet<String> = keys.iter().cloned().collect();
    assert_eq!(s.len(), keys.len(), "a field was delivered twice: {keys:?}");
    s
}

fn keys_of(keys: &[Key]) -> BTreeSet<String> {
    keys.iter().map(of_key).collect()
}

/// Archives and flushes `keys` (version 1).
fn flushed(fdb: &dyn Fdb, keys: &[Key]) {
    archive_all(fdb, keys, 1);
    fdb.flush().expect("flush");
}

fn steps(date: &str, ty: &str, steps: &[u32], params: &[&str]) -> Vec<Key> {
    let mut out = Vec::new();
    for &s in steps {
        for p in params {
            out.push(key(date, ty, s, p));
        }
    }
    out
}

fn from_now_sees_later_flushes_once_and_whole(env: &Env) {
    let writer = env.handle();
    let reader = env.handle();
    flushed(writer.as_ref(), &steps("20261122", "fc", &[0], &["130"]));
    let mut sub = subscribe(reader.as_ref(), &everything(), &Start::Now);
    nothing_more(
        &mut *sub,
        "a subscription from now delivered a field flushed before it",
    );
    // Archived but not flushed: never seen.
    let first = steps("20261122", "fc", &[6, 12], &["130", "131"]);
    archive_all(writer.as_ref(), &first, 1);
    nothing_more(&mut *sub, "an unflushed field was delivered");
    writer.flush().expect("flush");
    // The whole flush, without another flush to push it along.
    assert_eq!(set(&take(&mut *sub, first.len())), keys_of(&first));
    nothing_more(
        &mut *sub,
        "a flush's field came twice, or an extra one came",
    );
    // A second flush, into both databases.
    let mut second = steps("20261122", "an", &[0], &["130"]);
    second.extend(steps("20261123", "fc", &[18], &["131"]));
    flushed(writer.as_ref(), &second);
    assert_eq!(set(&take(&mut *sub, second.len())), keys_of(&second));
    nothing_more(&mut *sub, "an extra field came after the second flush");
    // Another subscriber from now, started after all that, sees none of it.
    let mut late = subscribe(reader.as_ref(), &everything(), &Start::Now);
    nothing_more(&mut *late, "a subscription from now delivered old fields");
}

fn from_the_beginning_sees_what_exists_then_what_follows(env: &Env) {
    let writer = env.handle();
    let before = steps("20261122", "fc", &[0, 6], &["130"]);
    flushed(writer.as_ref(), &before);
    let mut sub = subscribe(env.handle().as_ref(), &everything(), &Start::Beginning);
    assert_eq!(set(&take(&mut *sub, before.len())), keys_of(&before));
    nothing_more(&mut *sub, "more than what existed came");
    let after = steps("20261123", "an", &[0], &["130", "131"]);
    flushed(writer.as_ref(), &after);
    assert_eq!(set(&take(&mut *sub, after.len())), keys_of(&after));
    nothing_more(&mut *sub, "an extra field came");
}

fn a_position_taken_mid_flush_resumes_without_gap_or_repeat(env: &Env) {
    let writer = env.handle();
    let one = steps("20261122", "fc", &[0, 6, 12], &["130", "131"]);
    flushed(writer.as_ref(), &one);
    let reader = env.handle();
    let mut sub = subscribe(reader.as_ref(), &everything(), &Start::Beginning);
    let seen = take(&mut *sub, 2);
    // As a subscriber that stopped would keep it: in text.
    let token = sub.position().to_token();
    drop(sub);
    let two = steps("20261123", "fc", &[0], &["130", "131"]);
    flushed(writer.as_ref(), &two);
    let at = Position::from_token(&token).expect("a position's token reads back");
    let mut again = subscribe(reader.as_ref(), &everything(), &Start::At(at));
    let rest = take(&mut *again, one.len() - 2 + two.len());
    nothing_more(&mut *again, "a resumed subscription repeated a field");
    let mut all = seen.clone();
    all.extend(rest);
    let mut want = keys_of(&one);
    want.extend(keys_of(&two));
    assert_eq!(set(&all), want, "resumed after {seen:?}");
    // Resuming from the end position delivers only what comes later.
    let end = again.position();
    drop(again);
    let three = steps("20261123", "an", &[6], &["130"]);
    flushed(writer.as_ref(), &three);
    let mut last = subscribe(reader.as_ref(), &everything(), &Start::At(end));
    assert_eq!(set(&take(&mut *last, 1)), keys_of(&three));
    nothing_more(
        &mut *last,
        "a subscription resumed at the end repeated a field",
    );
}

fn the_request_filters_what_is_delivered(env: &Env) {
    let writer = env.handle();
    let r = request("class=od,expver=0001,stream=oper,date=20261122,type=fc,step=6/12,param=131");
    let mut sub = subscribe(env.handle().as_ref(), &r, &Start::Now);
    let mut all = steps("20261122", "fc", &[0, 6, 12], &["130", "131"]);
    all.extend(steps("20261122", "an", &[6], &["131"]));
    all.extend(steps("20261123", "fc", &[6], &["131"]));
    flushed(writer.as_ref(), &all);
    let want = steps("20261122", "fc", &[6, 12], &["131"]);
    assert_eq!(set(&take(&mut *sub, want.len())), keys_of(&want));
    nothing_more(&mut *sub, "a field the request does not name was delivered");
}

fn a_wiped_database_archived_again_is_followed_from_its_start(env: &Env) {
    let writer = env.handle();
    let mut sub = subscribe(env.handle().as_ref(), &everything(), &Start::Now);
    let first = steps("20261122", "fc", &[0, 6], &["130"]);
    flushed(writer.as_ref(), &first);
    assert_eq!(set(&take(&mut *sub, first.len())), keys_of(&first));
    wipe(
        writer.as_ref(),
        &request("class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g"),
        true,
    )
    .expect("wipe");
    // The same keys again, and one more: the new database's fields, each once.
    let mut again = first.clone();
    again.push(key("20261122", "fc", 12, "130"));
    let w2 = env.handle();
    for k in &again {
        w2.archive(Some(k), &bytes(k, 2)).expect("archive");
    }
    w2.flush().expect("flush");
    assert_eq!(set(&take(&mut *sub, again.len())), keys_of(&again));
    nothing_more(&mut *sub, "a field of the wiped database came again");
}

fn retrieve_wait_gives_present_fields_then_arrivals_then_times_out(env: &Env) {
    let writer = env.handle();
    let present = steps("20261122", "fc", &[0], &["130", "131"]);
    flushed(writer.as_ref(), &present);
    let reader = env.handle();
    let r = retrieve_request("20261122", "fc", "0/6", "130/131");
    let mut wait = RetrieveWait::new(reader.as_ref(), &r, ARRIVES).expect("a retrieve that waits");
    let mut got = BTreeSet::new();
    let first = wait
        .next(reader.as_ref())
        .expect("next")
        .expect("the present fields");
    for f in first.fields() {
        got.insert(of_key(&f.key.db.join(&f.key.index).join(&f.key.datum)));
    }
    assert_eq!(got, keys_of(&present), "first: what was there");
    assert_eq!(wait.missing().len(), 2);
    let later = steps("20261122", "fc", &[6], &["130", "131"]);
    // One of them now, the other in a second flush.
    flushed(writer.as_ref(), &later[..1]);
    let mut reader1 = wait
        .next(reader.as_ref())
        .expect("next")
        .expect("an arrival");
    let mut data = Vec::new();
    std::io::Read::read_to_end(&mut reader1, &mut data).expect("read");
    assert_eq!(data, bytes(&later[0], 1));
    flushed(writer.as_ref(), &later[1..]);
    let reader2 = wait
        .next(reader.as_ref())
        .expect("next")
        .expect("the other arrival");
    assert_eq!(reader2.fields().len(), 1);
    assert!(wait.next(reader.as_ref()).expect("done").is_none());
    // A field that never comes: a timeout naming it.
    let never = retrieve_request("20261122", "fc", "0/24", "130");
    let mut wait = RetrieveWait::new(reader.as_ref(), &never, Duration::from_millis(300))
        .expect("a retrieve that waits");
    assert!(wait.next(reader.as_ref()).expect("present").is_some());
    let err = match wait.next(reader.as_ref()) {
        Err(e) => e,
        Ok(r) => panic!("expected a timeout, got {:?}", r.map(|r| r.fields().len())),
    };
    assert_eq!(err.kind(), ErrorKind::Timeout, "{err}");
    assert!(err.to_string().contains("step=24"), "{err}");
}
