#![no_main]
//! Any text as a MultIO plan file: loaded and built, or refused with an error, never a panic;
//! the plans that build take a field and a flush. Texts naming sinks are skipped (they would
//! write files or open stores).

use std::path::Path;

use fieldstore::pipeline::config::{load_str, Side};
use fieldstore::pipeline::{Context, Field, FlushKind, Message, Metadata, PlanSet};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.contains("sink") || text.contains("file") || text.contains("mapping") || text.contains("template") {
        return;
    }
    let Ok(cfg) = load_str(text, "fuzz", Path::new("/nonexistent"), Side::Client, &|_| None) else {
        return;
    };
    let ctx = Context {
        out: std::sync::Arc::new(std::sync::Mutex::new(std::io::sink())),
        ..Context::default()
    };
    let Ok(mut set) = PlanSet::new(&cfg, ctx) else {
        return;
    };
    let mut md = Metadata::new();
    for (k, v) in [("param", "167"), ("levtype", "sfc"), ("gridType", "regular_ll"), ("grid", "O32")] {
        md.set(k, v);
    }
    for (k, v) in [("level", 0i64), ("date", 20250101), ("time", 0), ("step", 1), ("startDate", 20250101)] {
        md.set(k, v);
    }
    let _ = set.process(Message::Field(Field::values(md, vec![1.0, -2.0])));
    let _ = set.process(Message::flush(FlushKind::LastStep));
});
