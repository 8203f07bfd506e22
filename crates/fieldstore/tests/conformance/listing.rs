//! list, axes and retrieve tell the same story about the same request, at every depth.

use std::collections::{BTreeMap, BTreeSet};

use crate::data::{archive_all, bytes, everything, grid, key, request, retrieve_request};
use crate::harness::Env;
use crate::ops::{compact, full_key, list, listed_keys, retrieve_all, where_};

crate::cases!(
    list_axes_and_retrieve_agree,
    list_depth_gives_databases_indexes_or_fields,
    a_partial_request_lists_only_what_it_names,
    compacting_changes_nothing_visible,
    printed_lines_are_the_listing,
);

/// `list_lines` (what `fieldstore list` prints, a local store straight from its indexes) gives
/// the listing's elements as porcelain lines, replaced copies marked
/// when asked: for whole and partial requests, with and without masked fields.
fn printed_lines_are_the_listing(env: &Env) {
    let fdb = env.handle();
    archive_all(fdb.as_ref(), &grid(), 1);
    fdb.flush().expect("flush");
    // A second version of some fields: the first copies are masked.
    let some: Vec<_> = grid()
        .into_iter()
        .filter(|k| k.get("type") == Some("fc"))
        .collect();
    archive_all(fdb.as_ref(), &some, 2);
    fdb.flush().expect("flush");
    let fdb = env.handle();
    for req in [
        everything(),
        retrieve_request("20261123", "fc/an", "0/12", "131"),
    ] {
        for masked in [false, true] {
            let expected: Vec<String> = list(fdb.as_ref(), &req, 3, masked)
                .expect("list")
                .iter()
                .map(|e| {
                    let mut l = e.key.porcelain();
                    if e.masked {
                        l.push_str(" (masked)");
                    }
                    l + "\n"
                })
                .collect();
            let mut printed = Vec::new();
            fdb.list_lines(
                &req,
                fieldstore::api::ListOptions {
                    include_masked: masked,
                    depth: 3,
                },
                true,
                &mut |l| {
                    printed.push(String::from_utf8(l.to_vec()).expect("UTF-8"));
                    std::ops::ControlFlow::Continue(())
                },
                &mut |e| panic!("list_lines {req}: {e}"),
            )
            .expect("list_lines");
            // As a set: dist merges its lanes as they answer, so its order changes from one
            // listing to the next (a local store's own order is checked by the CLI's tests).
            let sorted = |mut v: Vec<String>| {
                v.sort();
                v
            };
            assert_eq!(
                sorted(printed),
                sorted(expected.clone()),
                "{req}, masked {masked}"
            );
            assert!(!expected.is_empty());
            if masked && req.to_string() == everything().to_string() {
                assert!(expected.iter().any(|l| l.ends_with(" (masked)\n")));
            }
        }
    }
}

fn list_axes_and_retrieve_agree(env: &Env) {
    let fdb = env.handle();
    archive_all(fdb.as_ref(), &grid(), 1);
    fdb.flush().expect("flush");
    let fdb = env.handle();
    let req = retrieve_request("20261122/20261123", "fc/an", "0/6/12", "130/131");
    let listed = list(fdb.as_ref(), &req, 3, false).expect("list");
    assert_eq!(listed.len(), 24, "every field listed once");

    // Every listed field retrieves, byte-identical, as long as its location says.
    let mut total = 0;
    for e in &listed {
        let loc = e.location.as_ref().expect("a field has a location");
        let k = |kw: &str| {
            [&e.key.db, &e.key.index, &e.key.datum]
                .iter()
                .find_map(|x| x.get(kw))
                .unwrap_or_else(|| panic!("listed key without {kw}: {}", full_key(e)))
                .to_string()
        };
        let one = retrieve_request(&k("date"), &k("type"), &k("step"), &k("param"));
        let got = retrieve_all(fdb.as_ref(), &one).expect("retrieve a listed field");
        assert_eq!(got.len() as u64, loc.length, "length of {}", full_key(e));
        let step: u32 = k("step").parse().expect("a numeric step");
        assert_eq!(
            got,
            bytes(&key(&k("date"), &k("type"), step, &k("param")), 1),
            "bytes of {}",
            full_key(e)
        );
        total += loc.length;
    }
    // The whole request retrieves exactly the listed bytes.
    assert_eq!(
        retrieve_all(fdb.as_ref(), &req)
            .expect("retrieve all")
            .len() as u64,
        total
    );

    // Axes are the values the listing shows.
    let mut from_list: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in &listed {
        for k in [&e.key.db, &e.key.index, &e.key.datum] {
            for (kw, v) in k.iter().filter(|(_, v)| !v.is_empty()) {
                from_list
                    .entry(kw.to_string())
                    .or_default()
                    .insert(v.to_string());
            }
        }
    }
    let axes = fdb.axes(&req, 3).expect("axes");
    assert_eq!(axes, from_list, "axes disagree with list");
    assert_eq!(axes["step"].len(), 3);
    assert_eq!(axes["date"].len(), 2);
}

fn list_depth_gives_databases_indexes_or_fields(env: &Env) {
    let fdb = env.handle();
    archive_all(fdb.as_ref(), &grid(), 1);
    fdb.flush().expect("flush");
    let fdb = env.handle();
    let distinct = |depth: u8| -> BTreeSet<String> {
        list(fdb.as_ref(), &everything(), depth, false)
            .unwrap_or_else(|e| panic!("list depth {depth}: {e}"))
            .iter()
            .map(|e| {
                if depth < 3 {
                    assert!(
                        e.location.is_none(),
                        "depth {depth} element with a location"
                    );
                }
                full_key(e)
            })
            .collect()
    };
    assert_eq!(
        distinct(1).len(),
        2,
        "depth 1: the two databases: {:?}",
        distinct(1)
    );
    assert_eq!(
        distinct(2).len(),
        4,
        "depth 2: two indexes each: {:?}",
        distinct(2)
    );
    assert_eq!(distinct(3).len(), 24, "depth 3: every field");
    for db in distinct(1) {
        assert!(
            !db.contains("step="),
            "a database element names a datum keyword: {db}"
        );
    }
    let shallow = fdb.axes(&everything(), 1).expect("axes depth 1");
    assert!(
        shallow.contains_key("date"),
        "axes depth 1 without the database keywords: {shallow:?}"
    );
    assert!(
        !shallow.contains_key("step") && !shallow.contains_key("type"),
        "axes depth 1 went below the databases: {shallow:?}"
    );
    assert!(
        distinct(2).iter().all(|i| i.contains("type=")),
        "an index element without its index keys"
    );
}

fn a_partial_request_lists_only_what_it_names(env: &Env) {
    let fdb = env.handle();
    archive_all(fdb.as_ref(), &grid(), 1);
    fdb.flush().expect("flush");
    let fdb = env.handle();
    let one_db = listed_keys(
        fdb.as_ref(),
        &request("class=od,expver=0001,stream=oper,date=20261123"),
    );
    assert_eq!(one_db.len(), 12);
    assert!(one_db.iter().all(|k| k.contains("date=20261123")));
    let one_param = listed_keys(
        fdb.as_ref(),
        &request("class=od,date=20261122,type=an,param=131"),
    );
    assert_eq!(one_param.len(), 3, "{one_param:?}");
    assert!(listed_keys(fdb.as_ref(), &request("class=od,date=20261124")).is_empty());
    assert!(
        !where_(
            fdb.as_ref(),
            &request("class=od,expver=0001,stream=oper,date=20261123")
        )
        .expect("where")
        .is_empty(),
        "where names no location for an existing database"
    );
}

fn compacting_changes_nothing_visible(env: &Env) {
    let fdb = env.handle();
    for (i, k) in grid().iter().enumerate() {
        fdb.archive(Some(k), &bytes(k, 1)).expect("archive");
        if i % 5 == 4 {
            fdb.flush().expect("flush");
        }
    }
    fdb.flush().expect("flush");
    let req = retrieve_request("20261122/20261123", "fc/an", "0/6/12", "130/131");
    let before = (
        listed_keys(fdb.as_ref(), &everything()),
        retrieve_all(fdb.as_ref(), &req).expect("retrieve"),
    );
    compact(fdb.as_ref(), &everything()).expect("compact");
    let fdb = env.handle();
    let after = (
        listed_keys(fdb.as_ref(), &everything()),
        retrieve_all(fdb.as_ref(), &req).expect("retrieve"),
    );
    assert_eq!(before.0, after.0, "list changed by compaction");
    assert!(before.1 == after.1, "retrieve changed by compaction");
}
