//! The fields and requests the cases use: keys under the default schema, and bytes that say
//! which key and which version they are, so a mix-up shows in the failure.

use fieldstore::model::request::{parse_request, Request};
use fieldstore::model::Key;

/// The two databases the cases spread over (the `select` backend splits on them).
pub const DATES: [&str; 2] = ["20261122", "20261123"];

/// An oper forecast/analysis field: database (date), index (type), datum (step, param).
pub fn key(date: &str, ty: &str, step: u32, param: &str) -> Key {
    Key::parse(&format!(
        "class=od,expver=0001,stream=oper,date={date},time=1200,domain=g,type={ty},levtype=pl,step={step},levelist=500,param={param}"
    ))
    .expect("a valid key")
}

/// The bytes archived as `version` of `key` (a few hundred bytes, length varies per key).
pub fn bytes(key: &Key, version: u32) -> Vec<u8> {
    let mut b = format!("field {key} version {version};").into_bytes();
    let pad = 64 + (key.to_string().len() * 7 + version as usize * 13) % 200;
    b.extend(std::iter::repeat_n(b'.', pad));
    b
}

pub fn request(text: &str) -> Request {
    parse_request(text).unwrap_or_else(|e| panic!("the suite's request `{text}` parses: {e}"))
}

/// A retrieve request for exactly the fields `key` would make, with the given value lists.
pub fn retrieve_request(dates: &str, types: &str, steps: &str, params: &str) -> Request {
    request(&format!(
        "retrieve,class=od,expver=0001,stream=oper,date={dates},time=1200,domain=g,type={types},levtype=pl,step={steps},levelist=500,param={params}"
    ))
}

/// Everything the suite's keys can be (a list request).
pub fn everything() -> Request {
    request("class=od,expver=0001,stream=oper")
}

/// Archives version `version` of every key (not flushed).
pub fn archive_all(fdb: &dyn fieldstore::api::Fdb, keys: &[Key], version: u32) {
    for k in keys {
        fdb.archive(Some(k), &bytes(k, version))
            .unwrap_or_else(|e| panic!("archive {k}: {e}"));
    }
}

/// A grid of fields: both dates, types fc and an, steps 0/6/12, params 130/131 (24 fields in
/// 2 databases, 4 indexes).
pub fn grid() -> Vec<Key> {
    let mut keys = Vec::new();
    for date in DATES {
        for ty in ["fc", "an"] {
            for step in [0, 6, 12] {
                for param in ["130", "131"] {
                    keys.push(key(date, ty, step, param));
                }
            }
        }
    }
    keys
}
