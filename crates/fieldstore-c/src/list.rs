//! Listing: both ABIs' `fdb_list` and iterator (exported by the `libfdb5` and `libfdb5-510`
//! crates, since the two give the same names other signatures), split keys.

use std::ffi::{c_char, c_int, CString};

use fieldstore::api::{ListElement, ListIter, ListOptions};
use fieldstore::model::schema::SplitKey;

use crate::errors::{guard, run, CError, FDB_ITERATION_COMPLETE, FDB_SUCCESS};
use crate::handle::fdb_handle_t;
use crate::request::fdb_request_t;
use crate::strings::{drop_obj, give, obj, put, shared};

/// Upstream's `fdb_list` makes it listing; 5.10's `fdb_new_listiterator` makes it empty and
/// `fdb_list` fills it.
#[derive(Default)]
pub struct fdb_listiterator_t {
    iter: Option<ListIter>,
    current: Option<ListElement>,
    /// The current element's URI, kept for the pointer `fdb_listiterator_attrs` hands out.
    uri: CString,
    /// The current element's line for 5.10's `fdb_listiterator_next`, valid until the next call.
    line: CString,
}

/// Keyword, value and level (0 database, 1 index, 2 datum) of one listed field.
#[derive(Default)]
pub struct fdb_split_key_t {
    entries: Vec<(CString, CString, usize)>,
    next: usize,
}

fn c(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

impl fdb_split_key_t {
    /// Absent optional keywords (empty values) are left out, as FDB5 leaves them out.
    fn fill(&mut self, key: &SplitKey) {
        self.entries = [&key.db, &key.index, &key.datum]
            .into_iter()
            .enumerate()
            .flat_map(|(level, k)| {
                k.iter()
                    .filter(|(_, v)| !v.is_empty())
                    .map(move |(k, v)| (c(k), c(v), level))
            })
            .collect();
        self.next = 0;
    }
}

fn start(
    fdb: *mut fdb_handle_t,
    req: *const fdb_request_t,
    include_masked: bool,
    depth: u8,
) -> Result<ListIter, CError> {
    let h = shared(fdb, "fdb")?;
    let empty = fdb_request_t::default();
    // SAFETY: NULL or made by fdb_new_request.
    let req = unsafe { req.as_ref() }.unwrap_or(&empty);
    let opts = ListOptions {
        include_masked,
        depth,
    };
    Ok(h.fdb.list(&req.request, opts)?)
}

/// The listing upstream's `fdb_list` asks for, as FDB5 (5.11 and later) reads its arguments:
/// `duplicates` goes on as `FDB::list`'s `deduplicate`, so true lists each key once (the newest
/// copy) and false lists every copy, masked ones included (as `fdb-list --full`); legacy
/// pyfdb's `list(request)` passes false, earthkit-data's `list(request, True, True)` true. A
/// depth outside 1-3 is taken as 3, as FDB5 does (which also logs a warning).
pub fn upstream_options(duplicates: bool, depth: c_int) -> (bool, u8) {
    let depth = match depth {
        1..=3 => depth as u8,
        _ => 3,
    };
    (!duplicates, depth)
}

/// Upstream's `fdb_list`: see [`upstream_options`] for what `duplicates` and `depth` mean (as
/// FDB5's library reads them, whatever their names say). A NULL request lists all.
pub fn list(
    fdb: *mut fdb_handle_t,
    req: *const fdb_request_t,
    it: *mut *mut fdb_listiterator_t,
    duplicates: bool,
    depth: c_int,
) -> c_int {
    run(|| {
        if it.is_null() {
            return Err(CError::Null("it"));
        }
        let (include_masked, depth) = upstream_options(duplicates, depth);
        let iter = start(fdb, req, include_masked, depth)?;
        give(
            it,
            "it",
            fdb_listiterator_t {
                iter: Some(iter),
                ..Default::default()
            },
        )
    })
}

/// 5.10's `fdb_new_listiterator`: an iterator listing nothing until `fdb_list` fills it.
pub fn new_listiterator(it: *mut *mut fdb_listiterator_t) -> c_int {
    run(|| give(it, "it", fdb_listiterator_t::default()))
}

/// 5.10's `fdb_list`: (re)fills `it` with the fields `req` names (NULL: all), every copy ever
/// archived of each, replaced ones included, as FDB5 5.10 lists them (it has no way to ask for
/// each key once; programs built against it count and expect the copies).
pub fn list_into(
    fdb: *mut fdb_handle_t,
    req: *const fdb_request_t,
    it: *mut fdb_listiterator_t,
) -> c_int {
    run(|| {
        let it = obj(it, "it")?;
        let iter = start(fdb, req, true, 3)?;
        *it = fdb_listiterator_t {
            iter: Some(iter),
            ..Default::default()
        };
        Ok(())
    })
}

/// What FDB5's `fdb_listiterator_attrs` hands out: the URI's name (eckit `URI::name()`), a plain
/// path for a file, which callers open as it is (legacy pyfdb's `path`).
fn uri_name(uri: &str) -> &str {
    uri.strip_prefix("file://").unwrap_or(uri)
}

/// Moves to the next element; false at the end (and for an iterator never filled).
fn advance(it: &mut fdb_listiterator_t) -> Result<bool, CError> {
    match it.iter.as_mut().and_then(Iterator::next) {
        Some(el) => {
            let el = el?;
            it.uri = c(el.location.as_ref().map_or("", |l| uri_name(&l.uri)));
            it.current = Some(el);
            Ok(true)
        }
        None => {
            it.current = None;
            Ok(false)
        }
    }
}

/// Upstream's `fdb_listiterator_next`.
pub fn listiterator_next(it: *mut fdb_listiterator_t) -> c_int {
    guard(|| {
        let it = obj(it, "it")?;
        Ok(if advance(it)? {
            FDB_SUCCESS
        } else {
            FDB_ITERATION_COMPLETE
        })
    })
}

/// 5.10's `fdb_listiterator_next`: `*exist` says whether there was another element, and `*str`
/// gets its key as FDB5 5.10 prints it, `{db}{index}{datum}` (as `fdb-list --porcelain`),
/// valid until the next call. At the end `*str` is left as it was, as in 5.10.
pub fn listiterator_next_line(
    it: *mut fdb_listiterator_t,
    exist: *mut bool,
    str: *mut *const c_char,
) -> c_int {
    run(|| {
        let it = obj(it, "it")?;
        if exist.is_null() {
            return Err(CError::Null("exist"));
        }
        if str.is_null() {
            return Err(CError::Null("str"));
        }
        let more = advance(it)?;
        if let Some(el) = &it.current {
            it.line = c(&el.key.porcelain());
            put(str, "str", it.line.as_ptr())?;
        }
        put(exist, "exist", more)
    })
}

fn current(it: &fdb_listiterator_t) -> Result<&ListElement, CError> {
    it.current.as_ref().ok_or_else(|| {
        CError::Invalid("no current list element: call fdb_listiterator_next first".into())
    })
}

/// Where the current element's bytes are (an empty URI for databases and indexes).
pub extern "C" fn fdb_listiterator_attrs(
    it: *mut fdb_listiterator_t,
    uri: *mut *const c_char,
    off: *mut usize,
    len: *mut usize,
) -> c_int {
    run(|| {
        let it = obj(it, "it")?;
        let el = current(it)?;
        let (o, l) = el
            .location
            .as_ref()
            .map_or((0, 0), |l| (l.offset, l.length));
        put(uri, "uri", it.uri.as_ptr())?;
        put(off, "off", o as usize)?;
        put(len, "len", l as usize)
    })
}

pub extern "C" fn fdb_listiterator_splitkey(
    it: *mut fdb_listiterator_t,
    key: *mut fdb_split_key_t,
) -> c_int {
    run(|| {
        let it = obj(it, "it")?;
        let key = obj(key, "key")?;
        key.fill(&current(it)?.key);
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn fdb_delete_listiterator(it: *mut fdb_listiterator_t) -> c_int {
    run(|| {
        drop_obj(it);
        Ok(())
    })
}

pub extern "C" fn fdb_new_splitkey(key: *mut *mut fdb_split_key_t) -> c_int {
    run(|| give(key, "key", fdb_split_key_t::default()))
}

pub extern "C" fn fdb_splitkey_next_metadata(
    it: *mut fdb_split_key_t,
    key: *mut *const c_char,
    value: *mut *const c_char,
    level: *mut usize,
) -> c_int {
    guard(|| {
        let sk = obj(it, "it")?;
        let Some((k, v, l)) = sk.entries.get(sk.next) else {
            return Ok(FDB_ITERATION_COMPLETE);
        };
        put(key, "key", k.as_ptr())?;
        put(value, "value", v.as_ptr())?;
        if !level.is_null() {
            put(level, "level", *l)?;
        }
        sk.next += 1;
        Ok(FDB_SUCCESS)
    })
}

pub extern "C" fn fdb_delete_splitkey(key: *mut fdb_split_key_t) -> c_int {
    run(|| {
        drop_obj(key);
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use fieldstore::model::Key;

    #[test]
    fn attrs_give_a_file_uri_as_its_path() {
        assert_eq!(uri_name("file:///r/db/x.data"), "/r/db/x.data");
        assert_eq!(
            uri_name("fdb://host:7654/r/x.data"),
            "fdb://host:7654/r/x.data"
        );
    }

    #[test]
    fn split_keys_give_levels_and_leave_out_absent_keywords() {
        let key = SplitKey {
            db: Key::from_pairs([("class", "od")]),
            index: Key::from_pairs([("type", "fc"), ("levtype", "")]),
            datum: Key::from_pairs([("step", "6")]),
        };
        let mut sk = fdb_split_key_t::default();
        sk.fill(&key);
        let got: Vec<(&str, &str, usize)> = sk
            .entries
            .iter()
            .map(|(k, v, l)| (k.to_str().unwrap(), v.to_str().unwrap(), *l))
            .collect();
        assert_eq!(
            got,
            [("class", "od", 0), ("type", "fc", 1), ("step", "6", 2)]
        );
    }
}
