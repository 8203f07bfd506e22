//! `fieldstore_extract` (include/fieldstore/fdb_subscribe.h): values at ranges of grid points
//! of every field a request names, exported by both libraries, as GribJump's C API gives them
//! (doubles, NaN where missing, 64-bit masks).

use std::ffi::{c_char, c_int, CString};

use fieldstore::api::Extraction;

use crate::errors::{run, CError, Result};
use crate::handle::fdb_handle_t;
use crate::request::fdb_request_t;
use crate::strings::{drop_obj, give, obj, put, shared};

pub struct fieldstore_extraction_t {
    fields: Vec<Extraction>,
    /// The key handed out last, valid until the next call.
    key: CString,
}

impl fieldstore_extraction_t {
    fn range(&self, field: usize, range: usize) -> Result<&fieldstore::extract::RangeValues> {
        self.field(field)?
            .ranges
            .get(range)
            .ok_or_else(|| CError::Invalid(format!("range {range} asked for of field {field}")))
    }

    fn field(&self, i: usize) -> Result<&Extraction> {
        self.fields.get(i).ok_or_else(|| {
            CError::Invalid(format!(
                "field {i} asked for, the extraction has {}",
                self.fields.len()
            ))
        })
    }
}

/// What `fieldstore_extract_index` did, in fields of the request (as `fieldstore extract-index`
/// prints it).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy)]
pub struct fieldstore_extract_index_report_t {
    pub fields: usize,
    pub added: usize,
    pub already: usize,
    pub left: usize,
    pub bytes_read: usize,
    pub side_files: usize,
}

/// Extraction information for the fields a request names that were stored without it.
#[no_mangle]
pub extern "C" fn fieldstore_extract_index(
    fdb: *mut fdb_handle_t,
    req: *const fdb_request_t,
    dry_run: c_int,
    report: *mut fieldstore_extract_index_report_t,
) -> c_int {
    run(|| {
        let h = shared(fdb, "fdb")?;
        let req = shared(req, "req")?;
        if report.is_null() {
            return Err(CError::Null("report"));
        }
        let options = fieldstore::api::ExtractIndexOptions {
            dry_run: dry_run != 0,
            progress: None,
        };
        let r = h.fdb.extract_index(&req.request, &options)?;
        let n = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
        // SAFETY: non-NULL, and the caller's to fill.
        unsafe {
            *report = fieldstore_extract_index_report_t {
                fields: n(r.fields),
                added: n(r.added),
                already: n(r.already),
                left: n(r.left),
                bytes_read: n(r.bytes_read),
                side_files: n(r.side_files),
            };
        }
        Ok(())
    })
}

/// `ranges` holds `n` pairs `lo, hi` (half-open, sorted, apart).
#[no_mangle]
pub extern "C" fn fieldstore_extract(
    fdb: *mut fdb_handle_t,
    req: *const fdb_request_t,
    ranges: *const usize,
    n: usize,
    out: *mut *mut fieldstore_extraction_t,
) -> c_int {
    run(|| {
        let h = shared(fdb, "fdb")?;
        let req = shared(req, "req")?;
        if out.is_null() {
            return Err(CError::Null("extraction"));
        }
        if ranges.is_null() && n > 0 {
            return Err(CError::Null("ranges"));
        }
        let pairs = n
            .checked_mul(2)
            .ok_or_else(|| CError::Invalid(format!("{n} ranges")))?;
        let flat: &[usize] = if pairs == 0 {
            &[]
        } else {
            // SAFETY: non-NULL, and the caller says it holds n pairs.
            unsafe { std::slice::from_raw_parts(ranges, pairs) }
        };
        let ranges: Vec<std::ops::Range<u64>> = flat
            .chunks_exact(2)
            .map(|p| p[0] as u64..p[1] as u64)
            .collect();
        let fields = h.fdb.extract(&req.request, &ranges)?;
        give(
            out,
            "extraction",
            fieldstore_extraction_t {
                fields,
                key: CString::default(),
            },
        )
    })
}

#[no_mangle]
pub extern "C" fn fieldstore_extraction_count(
    ex: *mut fieldstore_extraction_t,
    fields: *mut usize,
) -> c_int {
    run(|| {
        let e = obj(ex, "extraction")?;
        put(fields, "fields", e.fields.len())
    })
}

#[no_mangle]
pub extern "C" fn fieldstore_extraction_key(
    ex: *mut fieldstore_extraction_t,
    field: usize,
    key: *mut *const c_char,
) -> c_int {
    run(|| {
        let e = obj(ex, "extraction")?;
        let text = e.field(field)?.key.to_string();
        e.key = CString::new(text.replace('\0', " ")).unwrap_or_default();
        put(key, "key", e.key.as_ptr())
    })
}

#[no_mangle]
pub extern "C" fn fieldstore_extraction_values(
    ex: *mut fieldstore_extraction_t,
    field: usize,
    range: usize,
    values: *mut *const f64,
    count: *mut usize,
) -> c_int {
    run(|| {
        let r = obj(ex, "extraction")?.range(field, range)?;
        put(values, "values", r.values.as_ptr())?;
        put(count, "count", r.values.len())
    })
}

#[no_mangle]
pub extern "C" fn fieldstore_extraction_mask(
    ex: *mut fieldstore_extraction_t,
    field: usize,
    range: usize,
    mask: *mut *const u64,
    words: *mut usize,
) -> c_int {
    run(|| {
        let r = obj(ex, "extraction")?.range(field, range)?;
        put(mask, "mask", r.mask.as_ptr())?;
        put(words, "words", r.mask.len())
    })
}

#[no_mangle]
pub extern "C" fn fieldstore_delete_extraction(ex: *mut fieldstore_extraction_t) -> c_int {
    run(|| {
        drop_obj(ex);
        Ok(())
    })
}
