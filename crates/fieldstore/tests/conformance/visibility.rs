//! §2.2–3, 6: archived fields are invisible until flushed, then visible whole, to every handle;
//! threads may share one handle.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::backends::Quirk;
use crate::data::{archive_all, bytes, everything, grid, key, retrieve_request};
use crate::harness::Env;
use crate::ops::{list, listed_keys, retrieve_all};

crate::cases!(
    unflushed_archives_are_invisible_until_flush,
    a_flush_becomes_visible_all_at_once,
    threads_archive_through_one_handle_then_flush,
    handles_write_one_database_at_once,
);

fn unflushed_archives_are_invisible_until_flush(env: &Env) {
    let writer = env.handle();
    let reader = env.handle();
    let keys = grid();
    archive_all(writer.as_ref(), &keys, 1);
    assert!(
        listed_keys(reader.as_ref(), &everything()).is_empty(),
        "another handle lists unflushed fields"
    );
    let one = retrieve_request("20261122", "fc", "0", "130");
    assert!(
        retrieve_all(reader.as_ref(), &one)
            .map(|b| b.is_empty())
            .unwrap_or(true),
        "another handle retrieves an unflushed field"
    );
    writer.flush().expect("flush");
    assert_eq!(
        listed_keys(reader.as_ref(), &everything()).len(),
        keys.len()
    );
    assert_eq!(
        retrieve_all(reader.as_ref(), &one).expect("retrieve after flush"),
        bytes(&key("20261122", "fc", 0, "130"), 1)
    );
    // A handle opened after the flush sees it too.
    assert_eq!(
        listed_keys(env.handle().as_ref(), &everything()).len(),
        keys.len()
    );
}

/// A reader polling while a writer flushes sees none of a database's batch or all of it. (One
/// flush into several databases commits them one by one, as FDB5 does: atomicity is per
/// database.)
fn a_flush_becomes_visible_all_at_once(env: &Env) {
    let writer = env.handle();
    let reader = env.handle();
    let keys = grid();
    archive_all(writer.as_ref(), &keys, 1);
    let per_child = env.has(Quirk::FlushPerChild);
    let done = Arc::new(AtomicBool::new(false));
    let poll = std::thread::spawn({
        let done = done.clone();
        let n = keys.len();
        move || {
            let mut seen = Vec::new();
            loop {
                let finished = done.load(Ordering::SeqCst);
                let listed =
                    list(reader.as_ref(), &everything(), 3, false).expect("list while flushing");
                for date in crate::data::DATES {
                    let in_db = listed
                        .iter()
                        .filter(|e| e.key.db.get("date") == Some(date))
                        .count();
                    assert!(
                        in_db == 0 || in_db == n / 2 || per_child,
                        "a reader saw {in_db} of the {} fields one flush wrote into database date={date}",
                        n / 2
                    );
                }
                let count = listed.len();
                assert!(
                    seen.last().is_none_or(|&last| count >= last),
                    "a reader saw fields disappear during a flush: {count} after {seen:?}"
                );
                seen.push(count);
                if finished {
                    return seen;
                }
            }
        }
    });
    writer.flush().expect("flush");
    done.store(true, Ordering::SeqCst);
    let seen = poll.join().expect("the reader thread");
    assert_eq!(
        seen.last(),
        Some(&keys.len()),
        "the flush never became visible"
    );
}

fn threads_archive_through_one_handle_then_flush(env: &Env) {
    let fdb = env.handle();
    let threads: Vec<_> = (0..4u32)
        .map(|t| {
            let fdb = fdb.clone();
            std::thread::spawn(move || {
                for step in 0..20 {
                    let k = key(
                        crate::data::DATES[(t % 2) as usize],
                        "fc",
                        t * 100 + step,
                        "130",
                    );
                    fdb.archive(Some(&k), &bytes(&k, 1))
                        .expect("archive from a thread");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("an archiving thread");
    }
    fdb.flush().expect("flush");
    let reader = env.handle();
    assert_eq!(listed_keys(reader.as_ref(), &everything()).len(), 80);
    let k = key("20261123", "fc", 315, "130");
    assert_eq!(
        retrieve_all(
            reader.as_ref(),
            &retrieve_request("20261123", "fc", "315", "130")
        )
        .expect("retrieve"),
        bytes(&k, 1)
    );
}

/// §2.6: writers need no coordination; each handle's flush publishes its own fields only.
fn handles_write_one_database_at_once(env: &Env) {
    let writers: Vec<_> = (0..3u32).map(|_| env.handle()).collect();
    let threads: Vec<_> = writers
        .iter()
        .enumerate()
        .map(|(w, fdb)| {
            let fdb = fdb.clone();
            std::thread::spawn(move || {
                for step in 0..10 {
                    let k = key("20261122", "fc", w as u32 * 100 + step, "131");
                    fdb.archive(Some(&k), &bytes(&k, 1)).expect("archive");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a writer thread");
    }
    let reader = env.handle();
    writers[1].flush().expect("flush writer 1");
    let after_one = listed_keys(reader.as_ref(), &everything());
    assert_eq!(
        after_one.len(),
        10,
        "one writer's flush published: {after_one:?}"
    );
    assert!(
        after_one.iter().all(|k| k.contains("step=10")),
        "another writer's fields were published"
    );
    writers[0].flush().expect("flush writer 0");
    writers[2].flush().expect("flush writer 2");
    assert_eq!(listed_keys(reader.as_ref(), &everything()).len(), 30);
}
