//! Listing: upstream's `fdb_list` and iterator (exported by the `libfdb5` crate, since the 5.10
//! ABI gives the same names other signatures), split keys.

use std::ffi::{c_char, c_int, CString};

use fieldstore::api::{ListElement, ListIter, ListOptions};
use fieldstore::model::schema::SplitKey;

use crate::errors::{guard, run, CError, FDB_ITERATION_COMPLETE, FDB_SUCCESS};
use crate::handle::fdb_handle_t;
use crate::request::fdb_request_t;
use crate::strings::{drop_obj, give, obj, put, shared};

pub struct fdb_listiterator_t {
    iter: ListIter,
    current: Option<ListElement>,
    /// The current element's URI, kept for the pointer `fdb_listiterator_attrs` hands out.
    uri: CString,
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

/// `duplicates` lists masked (replaced) fields too (FDB5 5.11+ passes it inverted, a defect
/// not reproduced); `depth` 1 lists databases, 2 indexes, 3 fields. A NULL request lists all.
pub fn list(
    fdb: *mut fdb_handle_t,
    req: *const fdb_request_t,
    it: *mut *mut fdb_listiterator_t,
    duplicates: bool,
    depth: c_int,
) -> c_int {
    run(|| {
        let h = shared(fdb, "fdb")?;
        if it.is_null() {
            return Err(CError::Null("it"));
        }
        let depth = match depth {
            1..=3 => depth as u8,
            _ => {
                return Err(CError::Invalid(format!(
                    "depth must be 1 (databases), 2 (indexes) or 3 (fields), not {depth}"
                )))
            }
        };
        let empty = fdb_request_t::default();
        // SAFETY: NULL or made by fdb_new_request.
        let req = unsafe { req.as_ref() }.unwrap_or(&empty);
        let opts = ListOptions {
            include_masked: duplicates,
            depth,
        };
        let iter = h.fdb.list(&req.request, opts)?;
        give(
            it,
            "it",
            fdb_listiterator_t {
                iter,
                current: None,
                uri: CString::default(),
            },
        )
    })
}

pub fn listiterator_next(it: *mut fdb_listiterator_t) -> c_int {
    guard(|| {
        let it = obj(it, "it")?;
        match it.iter.next() {
            Some(el) => {
                let el = el?;
                it.uri = c(el.location.as_ref().map_or("", |l| l.uri.as_str()));
                it.current = Some(el);
                Ok(FDB_SUCCESS)
            }
            None => {
                it.current = None;
                Ok(FDB_ITERATION_COMPLETE)
            }
        }
    })
}

fn current(it: &fdb_listiterator_t) -> Result<&ListElement, CError> {
    it.current.as_ref().ok_or_else(|| {
        CError::Invalid("no current list element: call fdb_listiterator_next first".into())
    })
}

/// Where the current element's bytes are (an empty URI for databases and indexes).
#[no_mangle]
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

#[no_mangle]
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

#[no_mangle]
pub extern "C" fn fdb_new_splitkey(key: *mut *mut fdb_split_key_t) -> c_int {
    run(|| give(key, "key", fdb_split_key_t::default()))
}

#[no_mangle]
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

#[no_mangle]
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
