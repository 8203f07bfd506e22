//! `when_full: block` and `retain: {databases: N}`.

use std::sync::mpsc;
use std::time::Duration;

use super::*;
use crate::storage::history::Commits;
use crate::storage::{Catalogue, Store};

fn key(s: &str) -> Key {
    Key::parse(s).unwrap()
}

fn backend(capacity: u64, when_full: WhenFull, retain: Option<usize>) -> MemoryBackend {
    MemoryBackend::open_with(
        None,
        Limits {
            capacity,
            when_full,
            retain_databases: retain,
        },
    )
    .unwrap()
}

/// Archives and flushes one field into database `db`.
fn flush(b: &MemoryBackend, db: &str, data: &[u8]) -> Result<DbRef, StorageError> {
    let (c, s) = (b.catalogue(), b.store());
    let db = c.create(&key(db), "schema")?;
    let mut sw = s.writer(&db)?;
    let mut cw = c.writer(&db)?;
    let ik = key("{type=fc}");
    cw.add(&ik, &key("{step=0}"), sw.append(data)?)?;
    sw.sync()?;
    cw.commit()?;
    Ok(db)
}

fn wipe(b: &MemoryBackend, db: &DbRef) {
    let (c, s) = (b.catalogue(), b.store());
    c.wipe(db, true).unwrap();
    s.wipe(db, true).unwrap();
    c.finish_wipe(db).unwrap();
}

const FIELD: usize = 1000;
const HELD: u64 = FIELD as u64 + ENTRY_OVERHEAD;

#[test]
fn a_blocked_archive_goes_on_when_a_wipe_frees_space() {
    let b = backend(
        2 * HELD,
        WhenFull::Block {
            timeout: Duration::from_secs(20),
        },
        None,
    );
    let first = flush(&b, "{class=od,date=1}", &[1; FIELD]).unwrap();
    flush(&b, "{class=od,date=2}", &[2; FIELD]).unwrap();
    let (tx, rx) = mpsc::channel();
    let producer = {
        let b = b.clone();
        std::thread::spawn(move || tx.send(flush(&b, "{class=od,date=3}", &[3; FIELD])))
    };
    // Still waiting: nothing was freed.
    assert!(rx.recv_timeout(Duration::from_millis(300)).is_err());
    // Readers are not held up by the waiting writer.
    let c = b.catalogue();
    assert!(c.find(&key("{class=od,date=2}")).unwrap().is_some());
    wipe(&b, &first);
    let third = rx.recv_timeout(Duration::from_secs(10)).unwrap().unwrap();
    producer.join().unwrap().unwrap();
    assert_eq!(b.used(), 2 * HELD);
    let f = c
        .reader(&third)
        .unwrap()
        .lookup(&key("{type=fc}"), &key("{step=0}"))
        .unwrap()
        .unwrap();
    assert_eq!(b.store().read(&third, &f).unwrap(), vec![3; FIELD]);
}

#[test]
fn a_blocked_archive_fails_with_full_after_its_timeout() {
    let b = backend(
        HELD,
        WhenFull::Block {
            timeout: Duration::from_millis(50),
        },
        None,
    );
    flush(&b, "{class=od,date=1}", &[1; FIELD]).unwrap();
    let e = flush(&b, "{class=od,date=2}", &[2; FIELD]).unwrap_err();
    assert_eq!(e.kind(), crate::ErrorKind::Full);
    assert!(
        e.to_string()
            .contains("waited 50 ms for space (when_full: block)"),
        "{e}"
    );
    assert_eq!(b.used(), HELD);
}

#[test]
fn a_field_larger_than_the_store_fails_at_once_even_when_blocking() {
    let b = backend(
        HELD,
        WhenFull::Block {
            timeout: Duration::from_secs(60),
        },
        None,
    );
    let e = flush(&b, "{class=od,date=1}", &[1; 2 * FIELD]).unwrap_err();
    assert!(e.to_string().contains("larger than the whole store"), "{e}");
}

#[test]
fn without_block_a_full_store_says_how_to_wait() {
    let b = backend(HELD, WhenFull::Error, None);
    flush(&b, "{class=od,date=1}", &[1; FIELD]).unwrap();
    let e = flush(&b, "{class=od,date=2}", &[2; FIELD]).unwrap_err();
    assert!(e.to_string().contains("when_full: block"), "{e}");
}

#[test]
fn retention_keeps_the_newest_databases_and_frees_the_rest() {
    let b = backend(1 << 20, WhenFull::Error, Some(2));
    let c = b.catalogue();
    let first = flush(&b, "{class=od,date=1}", &[1; FIELD]).unwrap();
    let mark = c.history_mark(&first).unwrap();
    flush(&b, "{class=od,date=2}", &[2; FIELD]).unwrap();
    assert_eq!(b.used(), 2 * HELD);
    flush(&b, "{class=od,date=3}", &[3; FIELD]).unwrap();
    let mut left: Vec<String> = c
        .databases()
        .into_iter()
        .map(|d| d.unwrap().key.to_string())
        .collect();
    left.sort();
    assert_eq!(left, ["{class=od,date=2}", "{class=od,date=3}"]);
    assert_eq!(b.used(), 2 * HELD);
    // A subscriber of the wiped database is told it went.
    assert!(matches!(
        c.commits(&first, &mark.epoch, 0, 10).unwrap(),
        Commits::Gone
    ));
    // A writer opened on it before goes on into a new incarnation, which counts as the newest.
    flush(&b, "{class=od,date=1}", &[4; FIELD]).unwrap();
    assert!(c.find(&key("{class=od,date=2}")).unwrap().is_none());
    assert_eq!(b.used(), 2 * HELD);
}

#[test]
fn handles_sharing_a_store_must_agree_on_its_limits() {
    let limits = Limits {
        capacity: 1 << 20,
        when_full: WhenFull::Error,
        retain_databases: Some(3),
    };
    MemoryBackend::open_with(Some("memory-test-limits"), limits).unwrap();
    MemoryBackend::open_with(Some("memory-test-limits"), limits).unwrap();
    let e = MemoryBackend::open_with(
        Some("memory-test-limits"),
        Limits {
            retain_databases: None,
            ..limits
        },
    )
    .err()
    .unwrap();
    assert!(e.to_string().contains("retain 3 databases"), "{e}");
}
