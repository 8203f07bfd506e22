//! What the crash tests and the model fuzzer share: a LocalFdb over the simulated file system,
//! a model of what readers must see, and how to read what they do see. Included by `#[path]`
//! from `tests/crash_points.rs`, `tests/model_fuzz.rs` and `fuzz/fuzz_targets/store_model.rs`,
//! so the proptest and cargo-fuzz run one driver.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use fieldstore::api::{Fdb, ListOptions, LocalFdb};
use fieldstore::model::config::{from_yaml_str, FdbConfig};
use fieldstore::model::request::parse_request;
use fieldstore::model::Key;
use fieldstore::storage::fs::{FileSystem, SimFs};

pub const ROOT: &str = "/data/root";

/// The databases (by date) and the fields (by type and step) the workloads use: few, so that
/// archives hit existing keys (masking) as often as new ones.
pub const DATES: [&str; 2] = ["20261122", "20261123"];
/// `an` and `fc` are different index keys: one flush commits several indexes at once.
pub const FIELDS: [(&str, &str); 4] = [("fc", "0"), ("fc", "6"), ("fc", "12"), ("an", "0")];

/// What a reader of one database sees: (type, step) → the bytes retrieved.
pub type DbView = BTreeMap<(String, String), Vec<u8>>;
/// What a reader sees: date → database view (absent databases are empty views).
pub type View = BTreeMap<String, DbView>;

thread_local! {
    /// Whether `open` makes new databases in FDB5's format (per test thread).
    static FDB5_FORMAT: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with the stores `open` makes writing FDB5's format.
pub fn in_fdb5_format<T>(f: impl FnOnce() -> T) -> T {
    FDB5_FORMAT.with(|c| c.set(true));
    let r = f();
    FDB5_FORMAT.with(|c| c.set(false));
    r
}

pub fn fdb5_format() -> bool {
    FDB5_FORMAT.with(|c| c.get())
}

pub fn open(fs: &SimFs) -> Result<LocalFdb, String> {
    let format = if fdb5_format() { "format: fdb5, " } else { "" };
    let yaml = format!("{{{format}spaces: [{{roots: [{{path: {ROOT}}}]}}]}}");
    match from_yaml_str(&yaml, "test").map_err(|e| e.to_string())? {
        FdbConfig::Local(l) => {
            LocalFdb::with_fs(l, Arc::new(fs.clone())).map_err(|e| e.to_string())
        }
        other => Err(format!("expected a local config, got {other:?}")),
    }
}

/// A file system whose root directory exists durably.
pub fn sim() -> SimFs {
    let fs = SimFs::new();
    fs.create_dir_all(Path::new(ROOT)).expect("sim root");
    for d in ["/", "/data", ROOT] {
        fs.sync_dir(Path::new(d)).expect("sim root sync");
    }
    fs
}

pub fn key(date: &str, ty: &str, step: &str) -> Key {
    Key::from_pairs([
        ("class", "od"),
        ("expver", "0001"),
        ("stream", "oper"),
        ("date", date),
        ("time", "1200"),
        ("domain", "g"),
        ("type", ty),
        ("levtype", "sfc"),
        ("step", step),
        ("param", "167"),
    ])
}

/// A field's bytes: distinct per copy, so a reader returning an older copy (or another key's)
/// is caught; lengths vary so offsets do too.
pub fn payload(date: &str, ty: &str, step: &str, copy: u64) -> Vec<u8> {
    let head = format!("date={date} type={ty} step={step} copy={copy};");
    let mut out = head.repeat(1 + (copy % 5) as usize).into_bytes();
    out.extend((0..(copy % 97) as u8).map(|b| b.wrapping_mul(31)));
    out
}

fn all_request() -> String {
    "class=od,expver=1,stream=oper,time=12".to_string()
}

fn field_request(date: &str, ty: &str, step: &str) -> String {
    format!(
        "class=od,expver=1,stream=oper,date={date},time=12,domain=g,type={ty},levtype=sfc,step={step},param=167"
    )
}

pub fn retrieve(f: &LocalFdb, date: &str, ty: &str, step: &str) -> Result<Vec<u8>, String> {
    let req = parse_request(&field_request(date, ty, step)).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    f.retrieve(&req)
        .map_err(|e| format!("retrieve {date}/{ty}/{step}: {e}"))?
        .read_to_end(&mut out)
        .map_err(|e| format!("reading {date}/{ty}/{step}: {e}"))?;
    Ok(out)
}

/// What a reader sees, read three ways that must agree: list gives the keys (each once),
/// retrieve the bytes of each (checksums are verified on the way), axes the values. Keys the
/// model knows of but list does not show must retrieve nothing. Errors name the disagreement.
pub fn observe(f: &LocalFdb) -> Result<View, String> {
    let req = parse_request(&all_request()).map_err(|e| e.to_string())?;
    let mut listed: BTreeSet<(String, String, String)> = BTreeSet::new();
    for e in f
        .list(&req, ListOptions::default())
        .map_err(|e| format!("list: {e}"))?
    {
        let e = e.map_err(|e| format!("list: {e}"))?;
        let get = |k: &Key, kw: &str| k.get(kw).unwrap_or("").to_string();
        let id = (
            get(&e.key.db, "date"),
            get(&e.key.index, "type"),
            get(&e.key.datum, "step"),
        );
        if e.masked {
            return Err(format!(
                "list shows a masked entry without include_masked: {id:?}"
            ));
        }
        if !listed.insert(id.clone()) {
            return Err(format!("list shows {id:?} twice"));
        }
    }
    let mut view = View::new();
    for date in DATES {
        view.insert(date.to_string(), DbView::new());
    }
    for (date, ty, step) in &listed {
        let bytes = retrieve(f, date, ty, step)?;
        if bytes.is_empty() {
            return Err(format!(
                "{date}/{ty}/{step} is listed but retrieves nothing"
            ));
        }
        view.entry(date.clone())
            .or_default()
            .insert((ty.clone(), step.clone()), bytes);
    }
    for date in DATES {
        for (ty, step) in FIELDS {
            let id = (date.to_string(), ty.to_string(), step.to_string());
            if !listed.contains(&id) {
                let bytes = retrieve(f, date, ty, step)?;
                if !bytes.is_empty() {
                    return Err(format!(
                        "{id:?} retrieves {} bytes but is not listed",
                        bytes.len()
                    ));
                }
            }
        }
    }
    let axes = f.axes(&req, 3).map_err(|e| format!("axes: {e}"))?;
    let axis = |kw: &str| axes.get(kw).cloned().unwrap_or_default();
    let want = |pick: fn(&(String, String, String)) -> &String| -> BTreeSet<String> {
        listed.iter().map(|id| pick(id).clone()).collect()
    };
    for (kw, expected) in [
        ("date", want(|id| &id.0)),
        ("type", want(|id| &id.1)),
        ("step", want(|id| &id.2)),
    ] {
        if axis(kw) != expected {
            return Err(format!(
                "axes {kw} = {:?} but list shows {expected:?}",
                axis(kw)
            ));
        }
    }
    Ok(view)
}

/// Masked entries a full listing shows, per database date.
pub fn masked_count(f: &LocalFdb) -> Result<BTreeMap<String, usize>, String> {
    let req = parse_request(&all_request()).map_err(|e| e.to_string())?;
    let mut out = BTreeMap::new();
    for e in f
        .list(
            &req,
            ListOptions {
                include_masked: true,
                depth: 3,
            },
        )
        .map_err(|e| format!("list --full: {e}"))?
    {
        let e = e.map_err(|e| format!("list --full: {e}"))?;
        if e.masked {
            *out.entry(e.key.db.get("date").unwrap_or("").to_string())
                .or_insert(0) += 1;
        }
    }
    Ok(out)
}

/// A short description of a database view for messages: `fc/0#3 an/0#1` (copy numbers).
pub fn describe(v: &DbView) -> String {
    v.iter()
        .map(|((ty, step), bytes)| {
            let s = String::from_utf8_lossy(&bytes[..bytes.len().min(60)]).into_owned();
            let copy = s
                .split("copy=")
                .nth(1)
                .and_then(|c| c.split(';').next())
                .unwrap_or("?")
                .to_string();
            format!("{ty}/{step}#{copy}")
        })
        .collect::<Vec<_>>()
        .join(" ")
}
