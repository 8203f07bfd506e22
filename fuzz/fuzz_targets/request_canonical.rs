#![no_main]
//! A request as a client sends it, through everything a server does before it reads a byte:
//! ranges expanded, each value canonicalised by the default schema's type for its keyword (param
//! names through ecCodes), and the schema's expansion. Errors are fine; panics and crashes not.

use fieldstore::grib::params::resolver;
use fieldstore::model::request::parse_request;
use fieldstore::model::schema::{ExpandMode, Schema};
use fieldstore::model::types::Context;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(r) = parse_request(text) else {
        return;
    };
    let cx = Context {
        params: Some(&resolver),
        ..Context::default()
    };
    let Ok(expanded) = r.expand_ranges(&cx) else {
        return;
    };
    let schema = Schema::default_schema();
    for (kw, values) in expanded.iter() {
        let ty = schema
            .paths()
            .iter()
            .flat_map(|p| p.levels.iter().flatten())
            .find(|p| p.keyword == kw)
            .map(|p| p.ty);
        if let Some(t) = ty {
            for v in values {
                let _ = t.canonical(kw, v, &cx);
            }
        }
    }
    for mode in [ExpandMode::List, ExpandMode::Retrieve] {
        let _ = schema.expand(expanded.iter(), mode, &cx);
    }
});
