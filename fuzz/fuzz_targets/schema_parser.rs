#![no_main]
//! The schema parser must never panic, whatever the bytes; when a schema parses, splitting and
//! expanding keys with it must not panic either.

use fieldstore::model::schema::{ExpandMode, Schema};
use fieldstore::model::types::Context;
use fieldstore::model::Key;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(schema) = Schema::parse(text, "fuzz") {
        let cx = Context::default();
        let key = Key::from_pairs([
            ("class", "od"),
            ("expver", "0001"),
            ("stream", "oper"),
            ("date", "20190109"),
            ("time", "1200"),
            ("type", "fc"),
            ("levtype", "pl"),
            ("step", "6"),
            ("levelist", "500"),
            ("param", "130"),
        ]);
        let _ = schema.split(&key, &cx, false);
        let _ = schema.split(&key, &cx, true);
        let vals = vec!["od".to_string()];
        let _ = schema.expand([("class", vals.as_slice())], ExpandMode::List, &cx);
    }
});
