//! `fdb_request_t`: a MARS request built keyword by keyword, read back, and expanded.

use std::ffi::{c_char, c_int};

use fieldstore::grib::params;
use fieldstore::model::request::Request;
use fieldstore::model::types::Context;
use fieldstore::model::ModelError;

use crate::errors::{run, CError};
use crate::strings::{drop_obj, give, obj, put, text};

static RESOLVER: fn(&str) -> Option<String> = params::resolver;

/// How fieldstore canonicalises values: today (UTC) and parameter names through ecCodes.
pub fn context() -> Context<'static> {
    Context {
        params: Some(&RESOLVER),
        ..Context::default()
    }
}

#[derive(Debug, Default)]
pub struct fdb_request_t {
    pub request: Request,
}

#[no_mangle]
pub extern "C" fn fdb_new_request(req: *mut *mut fdb_request_t) -> c_int {
    run(|| give(req, "req", fdb_request_t::default()))
}

/// Each of `values` may itself hold several `/`-separated values, as in FDB5.
#[no_mangle]
pub extern "C" fn fdb_request_add(
    req: *mut fdb_request_t,
    param: *const c_char,
    values: *const *const c_char,
    num_values: c_int,
) -> c_int {
    run(|| {
        let req = obj(req, "req")?;
        let param = text(param, "param")?.trim();
        if param.is_empty() {
            return Err(CError::Invalid("empty keyword in request".into()));
        }
        let n = usize::try_from(num_values).map_err(|_| {
            CError::Invalid(format!("numValues for {param} is negative ({num_values})"))
        })?;
        if n > 0 && values.is_null() {
            return Err(CError::Null("values"));
        }
        let mut vals = Vec::with_capacity(n);
        for i in 0..n {
            // SAFETY: the caller passes an array of numValues strings.
            let v = text(unsafe { *values.add(i) }, "values[i]")?;
            vals.extend(
                v.split('/')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from),
            );
        }
        req.request.set(param, vals);
        Ok(())
    })
}

/// The values as a malloc'd array of malloc'd strings the caller frees (`free`, or `delete[]`
/// as FDB5's own tests do). A keyword not in the request gives zero values.
pub extern "C" fn fdb_request_get(
    req: *mut fdb_request_t,
    param: *const c_char,
    values: *mut *mut *mut c_char,
    num_values: *mut usize,
) -> c_int {
    run(|| {
        let req = obj(req, "req")?;
        let param = text(param, "param")?;
        if values.is_null() {
            return Err(CError::Null("values"));
        }
        if num_values.is_null() {
            return Err(CError::Null("numValues"));
        }
        let vals = req.request.get(param).unwrap_or(&[]);
        let array = malloc_array(vals)?;
        put(values, "values", array)?;
        put(num_values, "numValues", vals.len())
    })
}

fn malloc_array(vals: &[String]) -> Result<*mut *mut c_char, CError> {
    let oom = || CError::Invalid("out of memory copying request values".into());
    // SAFETY: plain allocations, filled before being handed over.
    unsafe {
        let array = libc::malloc(vals.len().max(1) * std::mem::size_of::<*mut c_char>())
            as *mut *mut c_char;
        if array.is_null() {
            return Err(oom());
        }
        for (i, v) in vals.iter().enumerate() {
            let s = libc::malloc(v.len() + 1) as *mut c_char;
            if s.is_null() {
                for j in 0..i {
                    libc::free(*array.add(j) as *mut libc::c_void);
                }
                libc::free(array as *mut libc::c_void);
                return Err(oom());
            }
            std::ptr::copy_nonoverlapping(v.as_ptr() as *const c_char, s, v.len());
            *s.add(v.len()) = 0;
            *array.add(i) = s;
        }
        Ok(array)
    }
}

/// Ranges (`a/to/b/by/n`) become their values, and values their canonical form.
pub extern "C" fn fdb_expand_request(req: *mut fdb_request_t) -> c_int {
    run(|| {
        let req = obj(req, "req")?;
        let expanded = req
            .request
            .expand_ranges(&context())
            .map_err(ModelError::from)?;
        req.request = expanded;
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn fdb_delete_request(req: *mut fdb_request_t) -> c_int {
    run(|| {
        drop_obj(req);
        Ok(())
    })
}
