//! fieldstore's C extensions (include/fieldstore/fdb_subscribe.h): subscriptions and
//! retrieve-and-wait, exported by both libraries under `fieldstore_*` names, so neither
//! exports a name FDB5 does not.

use std::ffi::{c_char, c_int, c_long, CString};
use std::time::Duration;

use fieldstore::api::{ListElement, Position, RetrieveWait, Start, SubscriptionBox};

use crate::errors::{run, CError, Result};
use crate::handle::fdb_handle_t;
use crate::reader::fdb_datareader_t;
use crate::request::fdb_request_t;
use crate::strings::{drop_obj, give, obj, put, shared, text};

pub struct fieldstore_subscription_t {
    sub: SubscriptionBox,
    current: Option<ListElement>,
    /// The strings handed out for the current field, valid until the next call.
    key: CString,
    value: CString,
    uri: CString,
    position: CString,
}

fn c(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

/// Milliseconds; negative waits "forever" (a century).
fn millis(ms: c_long) -> Duration {
    u64::try_from(ms).map_or(
        Duration::from_secs(100 * 365 * 86400),
        Duration::from_millis,
    )
}

fn start_from(s: Option<&str>) -> Result<Start> {
    Ok(match s.map(str::trim) {
        None | Some("now") => Start::Now,
        Some("beginning") => Start::Beginning,
        Some(token) => Start::At(Position::from_token(token)?),
    })
}

#[no_mangle]
pub extern "C" fn fieldstore_subscribe(
    fdb: *mut fdb_handle_t,
    req: *const fdb_request_t,
    start: *const c_char,
    sub: *mut *mut fieldstore_subscription_t,
) -> c_int {
    run(|| {
        let h = shared(fdb, "fdb")?;
        if sub.is_null() {
            return Err(CError::Null("sub"));
        }
        let start = if start.is_null() {
            None
        } else {
            Some(text(start, "start")?)
        };
        let start = start_from(start)?;
        let empty = fdb_request_t::default();
        // SAFETY: NULL or made by fdb_new_request.
        let req = unsafe { req.as_ref() }.unwrap_or(&empty);
        let s = h.fdb.subscribe(&req.request, &start)?;
        let position = c(&s.position().to_token());
        give(
            sub,
            "sub",
            fieldstore_subscription_t {
                sub: s,
                current: None,
                key: CString::default(),
                value: CString::default(),
                uri: CString::default(),
                position,
            },
        )
    })
}

#[no_mangle]
pub extern "C" fn fieldstore_subscription_next(
    sub: *mut fieldstore_subscription_t,
    timeout_ms: c_long,
    got: *mut c_int,
) -> c_int {
    run(|| {
        let s = obj(sub, "sub")?;
        if got.is_null() {
            return Err(CError::Null("got"));
        }
        let notice = s.sub.next_within(millis(timeout_ms))?;
        s.position = c(&s.sub.position().to_token());
        let came = notice.is_some();
        if let Some(n) = notice {
            s.key = c(&n.element.key.porcelain());
            s.uri = c(n
                .element
                .location
                .as_ref()
                .map_or("", |l| l.uri.strip_prefix("file://").unwrap_or(&l.uri)));
            s.current = Some(n.element);
        }
        put(got, "got", c_int::from(came))
    })
}

fn current(s: &fieldstore_subscription_t) -> Result<&ListElement> {
    s.current.as_ref().ok_or_else(|| {
        CError::Invalid("no current field: call fieldstore_subscription_next first".into())
    })
}

#[no_mangle]
pub extern "C" fn fieldstore_subscription_key(
    sub: *mut fieldstore_subscription_t,
    key: *mut *const c_char,
) -> c_int {
    run(|| {
        let s = obj(sub, "sub")?;
        current(s)?;
        put(key, "key", s.key.as_ptr())
    })
}

#[no_mangle]
pub extern "C" fn fieldstore_subscription_value(
    sub: *mut fieldstore_subscription_t,
    keyword: *const c_char,
    value: *mut *const c_char,
) -> c_int {
    run(|| {
        let s = obj(sub, "sub")?;
        let keyword = text(keyword, "keyword")?;
        let k = &current(s)?.key;
        let found = [&k.db, &k.index, &k.datum]
            .iter()
            .find_map(|p| p.get(keyword).filter(|v| !v.is_empty()))
            .map(c);
        let p = match found {
            Some(v) => {
                s.value = v;
                s.value.as_ptr()
            }
            None => std::ptr::null(),
        };
        put(value, "value", p)
    })
}

#[no_mangle]
pub extern "C" fn fieldstore_subscription_attrs(
    sub: *mut fieldstore_subscription_t,
    uri: *mut *const c_char,
    off: *mut usize,
    len: *mut usize,
) -> c_int {
    run(|| {
        let s = obj(sub, "sub")?;
        let (o, l) = current(s)?
            .location
            .as_ref()
            .map_or((0, 0), |l| (l.offset, l.length));
        put(uri, "uri", s.uri.as_ptr())?;
        put(off, "off", usize::try_from(o).unwrap_or(usize::MAX))?;
        put(len, "len", usize::try_from(l).unwrap_or(usize::MAX))
    })
}

#[no_mangle]
pub extern "C" fn fieldstore_subscription_position(
    sub: *mut fieldstore_subscription_t,
    position: *mut *const c_char,
) -> c_int {
    run(|| {
        let s = obj(sub, "sub")?;
        put(position, "position", s.position.as_ptr())
    })
}

#[no_mangle]
pub extern "C" fn fieldstore_delete_subscription(sub: *mut fieldstore_subscription_t) -> c_int {
    run(|| {
        drop_obj(sub);
        Ok(())
    })
}

/// Waits for every field, then retrieves them all at once: a C reader is one sized stream, so
/// it is positioned when it is complete.
#[no_mangle]
pub extern "C" fn fieldstore_retrieve_wait(
    fdb: *mut fdb_handle_t,
    req: *mut fdb_request_t,
    timeout_ms: c_long,
    dr: *mut fdb_datareader_t,
) -> c_int {
    run(|| {
        let h = shared(fdb, "fdb")?;
        let req = obj(req, "req")?;
        let dr = obj(dr, "dr")?;
        let mut wait = RetrieveWait::new(h.fdb.as_ref(), &req.request, millis(timeout_ms))?;
        while wait.next(h.fdb.as_ref())?.is_some() {}
        dr.set(h.fdb.retrieve(&req.request)?);
        Ok(())
    })
}
