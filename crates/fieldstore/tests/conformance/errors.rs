//! §2.10: bad input is an error that says what is wrong, never a panic, and changes nothing.

use fieldstore::model::Key;

use crate::data::{bytes, everything, key, request};
use crate::harness::Env;
use crate::ops::{list, listed_keys, retrieve_all, wipe};

crate::cases!(
    bad_request_values_are_errors,
    bad_archives_are_errors_and_store_nothing,
);

fn bad_request_values_are_errors(env: &Env) {
    let fdb = env.handle();
    let k = key("20261122", "fc", 0, "130");
    fdb.archive(Some(&k), &bytes(&k, 1)).expect("archive");
    fdb.flush().expect("flush");
    let base =
        "class=od,expver=0001,stream=oper,time=1200,domain=g,type=fc,levtype=pl,levelist=500";
    let mut exercised = 0;
    for (what, culprit, bad) in [
        ("a date that is no date", "20261399", format!("retrieve,{base},date=20261399,step=0,param=130")),
        ("a date that is text", "yesterday-ish", format!("retrieve,{base},date=yesterday-ish,step=0,param=130")),
        ("a step that is text", "abc", "retrieve,class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl,levelist=500,step=abc,param=130".to_string()),
        ("a level that is text", "high", "retrieve,class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl,levelist=high,step=0,param=130".to_string()),
        ("a time that is no time", "2561", format!("retrieve,{base},date=20261122,time=2561,step=0,param=130")),
    ] {
        let req = match fieldstore::model::request::parse_request(&bad) {
            Ok(req) => req,
            Err(e) => {
                // Refused by the parser already: an error, as asked, naming the culprit.
                assert!(e.to_string().contains(culprit), "the parse error for {what} does not name `{culprit}`: {e}");
                continue;
            }
        };
        exercised += 1;
        let r = retrieve_all(fdb.as_ref(), &req);
        assert!(r.is_err(), "retrieve with {what} is not an error: got {:?} bytes", r.map(|b| b.len()));
        let l = list(fdb.as_ref(), &req, 3, false);
        assert!(l.is_err(), "list with {what} is not an error: {l:?}");
        let message = r.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(
            message.contains(culprit),
            "the error for {what} does not name `{culprit}`: {message}"
        );
    }
    assert!(
        exercised >= 3,
        "only {exercised} bad requests reached the store"
    );
    assert!(
        wipe(
            fdb.as_ref(),
            &request("class=od,expver=0001,stream=oper,date=20261122,step=0"),
            false
        )
        .is_err(),
        "a wipe naming datum keywords must be refused, not widened"
    );
    assert_eq!(listed_keys(fdb.as_ref(), &everything()).len(), 1);
}

/// Refused at the archive, or (a remote store acknowledges no single field) at the flush.
fn refused(env: &Env, key: Option<&Key>, data: &[u8]) -> bool {
    let fdb = env.handle();
    fdb.archive(key, data).and_then(|()| fdb.flush()).is_err()
}

fn bad_archives_are_errors_and_store_nothing(env: &Env) {
    assert!(
        refused(env, None, b"not a GRIB message"),
        "keyless non-GRIB bytes accepted"
    );
    let incomplete = Key::parse("class=od,expver=0001,stream=oper,date=20261122").expect("a key");
    assert!(
        refused(env, Some(&incomplete), b"bytes"),
        "a key the schema cannot place accepted"
    );
    let bad_date = Key::parse(
        "class=od,expver=0001,stream=oper,date=20261340,time=1200,domain=g,type=fc,levtype=pl,step=0,levelist=500,param=130",
    )
    .expect("a key");
    assert!(
        refused(env, Some(&bad_date), b"bytes"),
        "a key with a bad date accepted"
    );
    let fdb = env.handle();
    assert!(
        listed_keys(env.handle().as_ref(), &everything()).is_empty(),
        "a refused archive became visible"
    );
    let missing = request("retrieve,class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step=0,levelist=500,param=130");
    assert!(retrieve_all(fdb.as_ref(), &missing)
        .map(|b| b.is_empty())
        .unwrap_or(true));
}
