//! `fdb_wipe` and `fdb_purge`: their reports as iterators of text lines, as FDB5 gives them.

use std::ffi::{c_char, c_int, CString};

use fieldstore::api::{PurgeElement, WipeElement};

use crate::errors::{guard, run, CError, FDB_ITERATION_COMPLETE, FDB_SUCCESS};
use crate::handle::fdb_handle_t;
use crate::request::fdb_request_t;
use crate::strings::{drop_obj, give, obj, put, shared};

/// The report's lines, handed out one element at a time.
pub struct Lines {
    lines: std::vec::IntoIter<String>,
}

pub struct Line {
    text: CString,
}

pub type fdb_wipe_iterator_t = Lines;
pub type fdb_wipe_element_t = Line;
pub type fdb_purge_iterator_t = Lines;
pub type fdb_purge_element_t = Line;

/// Porcelain: the files alone, one a line. Otherwise a line per database, then its files.
fn wipe_lines(found: &[WipeElement], porcelain: bool) -> Vec<String> {
    let mut out = Vec::new();
    for db in found {
        if !porcelain {
            let verb = if db.doit { "Wiped" } else { "Would wipe" };
            out.push(format!("{verb} database {} at {}", db.db, db.location));
        }
        out.extend(db.removed.iter().cloned());
    }
    out
}

fn purge_lines(found: &[PurgeElement], porcelain: bool) -> Vec<String> {
    let mut out = Vec::new();
    for db in found {
        if !porcelain {
            let verb = if db.doit { "removed" } else { "would remove" };
            out.push(format!(
                "{} at {}: {} masked fields; {verb} {} index files and {} data files",
                db.db,
                db.location,
                db.masked_fields,
                db.indexes.len(),
                db.objects.len()
            ));
        }
        out.extend(db.indexes.iter().chain(&db.objects).cloned());
    }
    out
}

fn request<'a>(req: *mut fdb_request_t, op: &str, all: bool) -> Result<&'a fdb_request_t, CError> {
    let r = obj(req, "req")?;
    if r.request.is_empty() && !all {
        return Err(CError::Invalid(format!(
            "{op} needs a request naming the databases (an empty one would match them all)"
        )));
    }
    Ok(r)
}

/// Deletes the databases `req` matches, only with `doit` (else reports what would go). An
/// empty request is refused unless `unsafeWipeAll`.
pub extern "C" fn fdb_wipe(
    fdb: *mut fdb_handle_t,
    req: *mut fdb_request_t,
    doit: bool,
    porcelain: bool,
    unsafe_wipe_all: bool,
    it: *mut *mut fdb_wipe_iterator_t,
) -> c_int {
    run(|| {
        let h = shared(fdb, "fdb")?;
        let r = request(req, "fdb_wipe", unsafe_wipe_all)?;
        if it.is_null() {
            return Err(CError::Null("it"));
        }
        let found = h.fdb.wipe(&r.request, doit)?;
        give(it, "it", Lines::new(wipe_lines(&found, porcelain)))
    })
}

/// Removes replaced (masked) fields and files nothing references any more, only with `doit`.
pub extern "C" fn fdb_purge(
    fdb: *mut fdb_handle_t,
    req: *mut fdb_request_t,
    doit: bool,
    porcelain: bool,
    it: *mut *mut fdb_purge_iterator_t,
) -> c_int {
    run(|| {
        let h = shared(fdb, "fdb")?;
        let r = request(req, "fdb_purge", false)?;
        if it.is_null() {
            return Err(CError::Null("it"));
        }
        let found = h.fdb.purge(&r.request, doit)?;
        give(it, "it", Lines::new(purge_lines(&found, porcelain)))
    })
}

impl Lines {
    fn new(lines: Vec<String>) -> Lines {
        Lines {
            lines: lines.into_iter(),
        }
    }
}

/// The next line as a new element the caller deletes; at the end, FDB_ITERATION_COMPLETE and
/// a NULL element (deleting it is harmless).
fn next(it: *mut Lines, element: *mut *mut Line) -> c_int {
    guard(|| {
        let it = obj(it, "it")?;
        if element.is_null() {
            return Err(CError::Null("element"));
        }
        match it.lines.next() {
            Some(l) => {
                let text = CString::new(l.replace('\0', " ")).unwrap_or_default();
                give(element, "element", Line { text })?;
                Ok(FDB_SUCCESS)
            }
            None => {
                put(element, "element", std::ptr::null_mut())?;
                Ok(FDB_ITERATION_COMPLETE)
            }
        }
    })
}

fn text(element: *mut Line, str: *mut *const c_char) -> c_int {
    run(|| {
        let e = obj(element, "element")?;
        put(str, "str", e.text.as_ptr())
    })
}

fn delete<T>(p: *mut T) -> c_int {
    run(|| {
        drop_obj(p);
        Ok(())
    })
}

pub extern "C" fn fdb_wipe_iterator_next(
    it: *mut fdb_wipe_iterator_t,
    element: *mut *mut fdb_wipe_element_t,
) -> c_int {
    next(it, element)
}

pub extern "C" fn fdb_wipe_element_string(
    element: *mut fdb_wipe_element_t,
    str: *mut *const c_char,
) -> c_int {
    text(element, str)
}

pub extern "C" fn fdb_delete_wipe_element(element: *mut fdb_wipe_element_t) -> c_int {
    delete(element)
}

pub extern "C" fn fdb_delete_wipe_iterator(it: *mut fdb_wipe_iterator_t) -> c_int {
    delete(it)
}

pub extern "C" fn fdb_purge_iterator_next(
    it: *mut fdb_purge_iterator_t,
    element: *mut *mut fdb_purge_element_t,
) -> c_int {
    next(it, element)
}

pub extern "C" fn fdb_purge_element_string(
    element: *mut fdb_purge_element_t,
    str: *mut *const c_char,
) -> c_int {
    text(element, str)
}

pub extern "C" fn fdb_delete_purge_element(element: *mut fdb_purge_element_t) -> c_int {
    delete(element)
}

pub extern "C" fn fdb_delete_purge_iterator(it: *mut fdb_purge_iterator_t) -> c_int {
    delete(it)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fieldstore::model::Key;

    #[test]
    fn porcelain_wipe_reports_only_the_files() {
        let found = [WipeElement {
            db: Key::from_pairs([("class", "od")]),
            location: "/r/od".into(),
            doit: false,
            removed: vec!["/r/od/toc".into(), "/r/od/a.data".into()],
        }];
        assert_eq!(wipe_lines(&found, true), ["/r/od/toc", "/r/od/a.data"]);
        let full = wipe_lines(&found, false);
        assert_eq!(full.len(), 3);
        assert!(full[0].starts_with("Would wipe database"), "{}", full[0]);
    }
}
