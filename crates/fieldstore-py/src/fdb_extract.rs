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

/// `FDB.extract_places`' body: points (nearest grid point) and boxes on the grid of the first
/// field the request names, with the GIL released; per field a dict `{key, selections,
/// bytes_read}`, each selection `{indices, latitudes, longitudes, values}` as numpy arrays.
pub fn extract_places<'py>(
    py: Python<'py>,
    fdb: &dyn api::Fdb,
    request: Request,
    selections: Vec<api::Selection>,
) -> PyResult<Bound<'py, PyList>> {
    let found = py
        .detach(|| api::extract_selections(fdb, &request, &selections))
        .map_err(crate::errors::to_py)?;
    let out = PyList::empty(py);
    for f in &found {
        let d = pyo3::types::PyDict::new(py);
        d.set_item("key", key_dict(py, &f.key)?)?;
        let sels = PyList::empty(py);
        for s in &f.selections {
            let one = pyo3::types::PyDict::new(py);
            let n = s.indices.len();
            one.set_item(
                "indices",
                crate::extract::array(py, "uint64", n, &crate::extract::u64_bytes(&s.indices))?,
            )?;
            let lats: Vec<f64> = s.coordinates.iter().map(|c| c.0).collect();
            let lons: Vec<f64> = s.coordinates.iter().map(|c| c.1).collect();
            one.set_item(
                "latitudes",
                crate::extract::array(
                    py,
                    "float64",
                    lats.len(),
                    &crate::extract::f64_bytes(&lats),
                )?,
            )?;
            one.set_item(
                "longitudes",
                crate::extract::array(
                    py,
                    "float64",
                    lons.len(),
                    &crate::extract::f64_bytes(&lons),
                )?,
            )?;
            one.set_item(
                "values",
                crate::extract::array(
                    py,
                    "float64",
                    s.values.len(),
                    &crate::extract::f64_bytes(&s.values),
                )?,
            )?;
            sels.append(one)?;
        }
        d.set_item("selections", sels)?;
        d.set_item("bytes_read", f.bytes_read)?;
        out.append(d)?;
    }
    Ok(out)
}
