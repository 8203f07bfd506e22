//! §2.5: wipe deletes whole databases (a dry run deletes nothing); purge deletes masked copies
//! and keeps the live ones; stats counts both.

use crate::data::{archive_all, bytes, everything, grid, key, request, retrieve_request};
use crate::harness::Env;
use crate::ops::{kind, list, listed_keys, purge, retrieve_all, stats_counts, wipe, Kind};

crate::cases!(
    wipe_removes_a_database_and_a_dry_run_nothing,
    wipe_of_nothing_is_not_found,
    the_handle_that_wiped_a_database_can_write_it_again,
    purge_removes_masked_copies_and_keeps_live_ones,
    stats_count_fields_and_masked_copies,
);

fn db(date: &str) -> fieldstore::model::request::Request {
    request(&format!(
        "class=od,expver=0001,stream=oper,date={date},time=1200,domain=g"
    ))
}

fn wipe_removes_a_database_and_a_dry_run_nothing(env: &Env) {
    let fdb = env.handle();
    archive_all(fdb.as_ref(), &grid(), 1);
    fdb.flush().expect("flush");
    let before = listed_keys(fdb.as_ref(), &everything());
    let said = wipe(fdb.as_ref(), &db("20261122"), false).expect("dry-run wipe");
    assert!(
        !said.is_empty(),
        "a dry run says nothing of what it would wipe"
    );
    assert_eq!(
        listed_keys(env.handle().as_ref(), &everything()),
        before,
        "a dry run changed the store"
    );

    wipe(fdb.as_ref(), &db("20261122"), true).expect("wipe");
    let reader = env.handle();
    let after = listed_keys(reader.as_ref(), &everything());
    assert_eq!(after.len(), 12, "wipe removed the wrong fields: {after:?}");
    assert!(after.iter().all(|k| k.contains("date=20261123")));
    assert!(retrieve_all(
        reader.as_ref(),
        &retrieve_request("20261122", "fc", "0", "130")
    )
    .map(|b| b.is_empty())
    .unwrap_or(true));
    assert_eq!(
        retrieve_all(
            reader.as_ref(),
            &retrieve_request("20261123", "fc", "0", "130")
        )
        .expect("retrieve"),
        bytes(&key("20261123", "fc", 0, "130"), 1)
    );
    // The database can be written again (by another handle; the wiping one: see below).
    let writer = env.handle();
    let k = key("20261122", "an", 6, "131");
    writer
        .archive(Some(&k), &bytes(&k, 5))
        .expect("archive after wipe");
    writer.flush().expect("flush after wipe");
    assert_eq!(
        retrieve_all(
            env.handle().as_ref(),
            &retrieve_request("20261122", "an", "6", "131")
        )
        .expect("retrieve"),
        bytes(&k, 5)
    );
}

fn the_handle_that_wiped_a_database_can_write_it_again(env: &Env) {
    let fdb = env.handle();
    let k = key("20261122", "an", 6, "131");
    fdb.archive(Some(&k), &bytes(&k, 1)).expect("archive");
    fdb.flush().expect("flush");
    wipe(fdb.as_ref(), &db("20261122"), true).expect("wipe");
    fdb.archive(Some(&k), &bytes(&k, 2))
        .expect("archive after wipe, same handle");
    fdb.flush().expect("flush after wipe, same handle");
    assert_eq!(
        retrieve_all(
            env.handle().as_ref(),
            &retrieve_request("20261122", "an", "6", "131")
        )
        .expect("retrieve"),
        bytes(&k, 2)
    );
}

fn wipe_of_nothing_is_not_found(env: &Env) {
    let fdb = env.handle();
    let k = key("20261123", "fc", 0, "130");
    fdb.archive(Some(&k), &bytes(&k, 1)).expect("archive");
    fdb.flush().expect("flush");
    match wipe(fdb.as_ref(), &db("20261124"), true) {
        Err(e) => assert_eq!(kind(&e), Kind::NotFound, "{e}"),
        Ok(said) => assert!(
            said.is_empty(),
            "wiped something for a missing database: {said:?}"
        ),
    }
    assert_eq!(listed_keys(fdb.as_ref(), &everything()).len(), 1);
}

fn purge_removes_masked_copies_and_keeps_live_ones(env: &Env) {
    let fdb = env.handle();
    let keys = grid();
    archive_all(fdb.as_ref(), &keys, 1);
    fdb.flush().expect("flush v1");
    archive_all(fdb.as_ref(), &keys[..6], 2);
    fdb.flush().expect("flush v2");
    let masked = |f: &dyn fieldstore::api::Fdb| {
        list(f, &everything(), 3, true)
            .expect("list include_masked")
            .iter()
            .filter(|e| e.masked)
            .count()
    };
    assert_eq!(masked(fdb.as_ref()), 6);
    purge(fdb.as_ref(), &everything(), false).expect("dry-run purge");
    assert_eq!(
        masked(env.handle().as_ref()),
        6,
        "a dry-run purge removed masked copies"
    );

    purge(fdb.as_ref(), &everything(), true).expect("purge");
    let reader = env.handle();
    assert_eq!(masked(reader.as_ref()), 0, "purge left masked copies");
    assert_eq!(
        list(reader.as_ref(), &everything(), 3, true)
            .expect("list")
            .len(),
        keys.len()
    );
    let req = retrieve_request("20261122/20261123", "fc/an", "0/6/12", "130/131");
    let expected: Vec<u8> = keys
        .iter()
        .enumerate()
        .flat_map(|(i, k)| bytes(k, if i < 6 { 2 } else { 1 }))
        .collect();
    let got = retrieve_all(reader.as_ref(), &req).expect("retrieve after purge");
    assert_eq!(
        got.len(),
        expected.len(),
        "purge changed what retrieve returns"
    );
    for (i, k) in keys.iter().enumerate() {
        let step: String = k.get("step").expect("step").into();
        let one = retrieve_request(
            k.get("date").expect("date"),
            k.get("type").expect("type"),
            &step,
            k.get("param").expect("param"),
        );
        assert_eq!(
            retrieve_all(reader.as_ref(), &one).expect("retrieve"),
            bytes(k, if i < 6 { 2 } else { 1 }),
            "{k}"
        );
    }
}

fn stats_count_fields_and_masked_copies(env: &Env) {
    let fdb = env.handle();
    let keys = grid();
    archive_all(fdb.as_ref(), &keys, 1);
    fdb.flush().expect("flush");
    archive_all(fdb.as_ref(), &keys[..3], 2);
    fdb.flush().expect("flush");
    let (fields, masked) = stats_counts(env.handle().as_ref(), &everything()).expect("stats");
    assert_eq!((fields, masked), (24, 3), "stats (fields, masked)");
}
