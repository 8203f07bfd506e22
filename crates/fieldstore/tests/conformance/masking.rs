//! §2.4–5: archiving an existing key again replaces it, once flushed; the old copy stays
//! listable as masked.

use crate::data::{bytes, everything, key, retrieve_request};
use crate::harness::Env;
use crate::ops::{list, listed_keys, retrieve_all};

crate::cases!(
    a_rearchive_masks_the_old_copy_once_flushed,
    the_newest_archive_in_one_flush_wins,
);

fn a_rearchive_masks_the_old_copy_once_flushed(env: &Env) {
    let writer = env.handle();
    let reader = env.handle();
    let k = key("20261122", "fc", 6, "130");
    let req = retrieve_request("20261122", "fc", "6", "130");
    writer.archive(Some(&k), &bytes(&k, 1)).expect("archive v1");
    writer.flush().expect("flush v1");
    writer.archive(Some(&k), &bytes(&k, 2)).expect("archive v2");
    assert_eq!(
        retrieve_all(reader.as_ref(), &req).expect("retrieve"),
        bytes(&k, 1),
        "the old copy must stay visible until the new one is flushed"
    );
    writer.flush().expect("flush v2");
    assert_eq!(
        retrieve_all(reader.as_ref(), &req).expect("retrieve"),
        bytes(&k, 2)
    );
    assert_eq!(
        listed_keys(reader.as_ref(), &everything()).len(),
        1,
        "list shows the newest only"
    );

    let all = list(reader.as_ref(), &everything(), 3, true).expect("list include_masked");
    assert_eq!(all.len(), 2, "include_masked lists both copies: {all:?}");
    assert_eq!(
        all.iter().filter(|e| e.masked).count(),
        1,
        "exactly one masked: {all:?}"
    );
    let live = all.iter().find(|e| !e.masked).expect("a live copy");
    let masked = all.iter().find(|e| e.masked).expect("a masked copy");
    let (live, masked) = (
        live.location.as_ref().expect("location"),
        masked.location.as_ref().expect("location"),
    );
    assert_eq!(
        live.length,
        bytes(&k, 2).len() as u64,
        "the live copy is v2"
    );
    assert_eq!(
        masked.length,
        bytes(&k, 1).len() as u64,
        "the masked copy is v1"
    );
}

fn the_newest_archive_in_one_flush_wins(env: &Env) {
    let fdb = env.handle();
    let k = key("20261123", "an", 0, "131");
    for v in 1..=3 {
        fdb.archive(Some(&k), &bytes(&k, v)).expect("archive");
    }
    fdb.flush().expect("flush");
    let reader = env.handle();
    assert_eq!(
        retrieve_all(
            reader.as_ref(),
            &retrieve_request("20261123", "an", "0", "131")
        )
        .expect("retrieve"),
        bytes(&k, 3)
    );
    assert_eq!(listed_keys(reader.as_ref(), &everything()).len(), 1);
}
