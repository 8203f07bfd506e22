//! `FDB.extract(request, ranges)`: values of ranges of grid points of every field a request
//! names, without reading whole fields (issue 30), through the library's `api::Fdb::extract`.

use std::ops::Range;

use fieldstore::api;
use fieldstore::model::request::Request;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::extract::{arrays, Extraction};
use crate::results::key_dict;

/// The library call this binding wraps: `api::Fdb::extract` (one `Extraction` per field the
/// request names, in retrieve's order; per range the values, NaN where missing, and the mask
/// words, bit j of word k set when point k*64+j of the range is present).
fn library_extract(
    fdb: &dyn api::Fdb,
    request: &Request,
    ranges: &[Range<u64>],
) -> Result<Vec<api::Extraction>, api::ApiError> {
    fdb.extract(request, ranges)
}

fn to_python(py: Python<'_>, e: &api::Extraction) -> PyResult<Extraction> {
    let (values, masks) = arrays(py, &e.ranges)?;
    Ok(Extraction {
        key: Some(key_dict(py, &e.key)?.unbind()),
        values,
        masks,
        grid_hash: e
            .grid_md5
            .map(|m| m.iter().map(|b| format!("{b:02x}")).collect()),
        bytes_read: Some(e.bytes_read),
    })
}

/// `FDB.extract`'s body: the request and ranges checked, the extraction with the GIL released.
pub fn extract<'py>(
    py: Python<'py>,
    fdb: &dyn api::Fdb,
    request: Request,
    ranges: Vec<Range<u64>>,
) -> PyResult<Bound<'py, PyList>> {
    let found = py
        .detach(|| library_extract(fdb, &request, &ranges))
        .map_err(crate::errors::to_py)?;
    let out = PyList::empty(py);
    for e in &found {
        out.append(Bound::new(py, to_python(py, e)?)?)?;
    }
    Ok(out)
}

