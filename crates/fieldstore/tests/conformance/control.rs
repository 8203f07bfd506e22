//! `control` locks an action on a database until unlocked; the other actions go on.

use crate::backends::Quirk;
use fieldstore::api::{ControlAction, ControlIdentifier};

use crate::data::{bytes, everything, key, request, retrieve_request};
use crate::harness::Env;
use crate::ops::{control, kind, list, listed_keys, retrieve_all, wipe, Kind};

crate::cases!(
    a_locked_archive_is_refused_until_unlocked,
    a_locked_retrieve_is_refused_until_unlocked,
    a_locked_list_is_refused_until_unlocked,
    a_locked_wipe_is_refused_until_unlocked,
);

fn db() -> fieldstore::model::request::Request {
    request("class=od,expver=0001,stream=oper,date=20261123,time=1200,domain=g")
}

/// A store with one field in the database `db()` names.
fn seeded(env: &crate::harness::Env) -> std::sync::Arc<dyn fieldstore::api::Fdb> {
    let fdb = env.handle();
    let k = key("20261123", "fc", 0, "130");
    fdb.archive(Some(&k), &bytes(&k, 1)).expect("archive");
    fdb.flush().expect("flush");
    fdb
}

fn a_locked_archive_is_refused_until_unlocked(env: &Env) {
    let fdb = seeded(env);
    control(
        fdb.as_ref(),
        &db(),
        ControlAction::Lock,
        &[ControlIdentifier::Archive],
    )
    .expect("lock archive");
    // A key the database holds (on every backend), and a new one (where a lock reaches it).
    let mut keys = vec![key("20261123", "fc", 0, "130")];
    if !env.has(Quirk::LocksWhereTheDatabaseIs) {
        keys.push(key("20261123", "fc", 6, "130"));
    }
    for k in keys {
        let writer = env.handle();
        let refused = writer
            .archive(Some(&k), &bytes(&k, 2))
            .and_then(|()| writer.flush());
        match refused {
            Err(e) => assert_eq!(kind(&e), Kind::Locked, "{e}"),
            Ok(()) => panic!("archive of {k} into a locked database succeeded"),
        }
    }
    assert_eq!(
        listed_keys(fdb.as_ref(), &everything()).len(),
        1,
        "a locked archive became visible"
    );
    // Reads go on while archive is locked.
    assert_eq!(
        retrieve_all(
            fdb.as_ref(),
            &retrieve_request("20261123", "fc", "0", "130")
        )
        .expect("retrieve")
        .len(),
        bytes(&key("20261123", "fc", 0, "130"), 1).len()
    );

    control(
        fdb.as_ref(),
        &db(),
        ControlAction::Unlock,
        &[ControlIdentifier::Archive],
    )
    .expect("unlock archive");
    let writer = env.handle();
    let k = key("20261123", "fc", 6, "130");
    writer
        .archive(Some(&k), &bytes(&k, 1))
        .expect("archive after unlock");
    writer.flush().expect("flush after unlock");
    assert_eq!(listed_keys(env.handle().as_ref(), &everything()).len(), 2);
}

fn a_locked_retrieve_is_refused_until_unlocked(env: &Env) {
    let fdb = seeded(env);
    let req = retrieve_request("20261123", "fc", "0", "130");
    control(
        fdb.as_ref(),
        &db(),
        ControlAction::Lock,
        &[ControlIdentifier::Retrieve],
    )
    .expect("lock retrieve");
    match retrieve_all(env.handle().as_ref(), &req) {
        Err(e) => assert_eq!(kind(&e), Kind::Locked, "{e}"),
        Ok(b) => panic!("retrieve from a locked database gave {} bytes", b.len()),
    }
    assert_eq!(
        listed_keys(fdb.as_ref(), &everything()).len(),
        1,
        "list must go on while retrieve is locked"
    );
    control(
        fdb.as_ref(),
        &db(),
        ControlAction::Unlock,
        &[ControlIdentifier::Retrieve],
    )
    .expect("unlock retrieve");
    assert_eq!(
        retrieve_all(env.handle().as_ref(), &req).expect("retrieve after unlock"),
        bytes(&key("20261123", "fc", 0, "130"), 1)
    );
}

fn a_locked_list_is_refused_until_unlocked(env: &Env) {
    let fdb = seeded(env);
    control(
        fdb.as_ref(),
        &db(),
        ControlAction::Lock,
        &[ControlIdentifier::List],
    )
    .expect("lock list");
    match list(env.handle().as_ref(), &everything(), 3, false) {
        Err(e) => assert_eq!(kind(&e), Kind::Locked, "{e}"),
        Ok(l) => assert!(l.is_empty(), "list of a locked database listed {l:?}"),
    }
    control(
        fdb.as_ref(),
        &db(),
        ControlAction::Unlock,
        &[ControlIdentifier::List],
    )
    .expect("unlock list");
    assert_eq!(listed_keys(env.handle().as_ref(), &everything()).len(), 1);
}

fn a_locked_wipe_is_refused_until_unlocked(env: &Env) {
    let fdb = seeded(env);
    control(
        fdb.as_ref(),
        &db(),
        ControlAction::Lock,
        &[ControlIdentifier::Wipe],
    )
    .expect("lock wipe");
    match wipe(fdb.as_ref(), &db(), true) {
        Err(e) => assert_eq!(kind(&e), Kind::Locked, "{e}"),
        Ok(said) => panic!("wipe of a locked database went ahead: {said:?}"),
    }
    assert_eq!(listed_keys(fdb.as_ref(), &everything()).len(), 1);
    control(
        fdb.as_ref(),
        &db(),
        ControlAction::Unlock,
        &[ControlIdentifier::Wipe],
    )
    .expect("unlock wipe");
    wipe(fdb.as_ref(), &db(), true).expect("wipe after unlock");
    assert!(listed_keys(env.handle().as_ref(), &everything()).is_empty());
}
