//! `FDB.extract(request, ranges)`: values of ranges of grid points of every field a request
//! names, without reading whole fields (issue 30). The `pygribjump` compatibility package
//! (python/pygribjump-compat) is built on it.

use std::ops::Range;

use fieldstore::api;
use fieldstore::model::request::Request;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use crate::buffer::WritableBuffer;
use crate::results::key_dict;

/// The library call this binding wraps: `api::Fdb::extract` (one `Extraction` per field the
/// request names, in request order; per range the values, NaN where missing, and the mask
/// words, bit j of word k set when point k*64+j of the range is present). Kept in this one
/// place so that a change of the library's signature is a change here only.
fn library_extract(
    fdb: &dyn api::Fdb,
    request: &Request,
    ranges: &[Range<u64>],
) -> Result<Vec<api::Extraction>, api::ApiError> {
    fdb.extract(request, ranges)
}

/// Half-open grid-point ranges from a list of `(lo, hi)` pairs: `lo < hi`, ascending and not
/// overlapping (what GribJump requires; said here, by index, rather than by the library).
pub fn ranges(obj: &Bound<'_, PyAny>) -> PyResult<Vec<Range<u64>>> {
    if obj.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "ranges must be a list of (lo, hi) pairs, not a str",
        ));
    }
    let mut out: Vec<Range<u64>> = Vec::new();
    for (i, item) in obj.try_iter()?.enumerate() {
        let item = item?;
        let (lo, hi): (i64, i64) = item.extract().map_err(|_| {
            PyTypeError::new_err(format!(
                "range {i} must be a pair of integers (lo, hi), not {}",
                item.repr().map(|r| r.to_string()).unwrap_or_default()
            ))
        })?;
        if lo < 0 || lo >= hi {
            return Err(PyValueError::new_err(format!(
                "range {i} ({lo}, {hi}) is invalid: expected 0 <= lo < hi for the half-open [lo, hi)"
            )));
        }
        let r = lo as u64..hi as u64;
        if let Some(prev) = out.last() {
            if r.start < prev.end {
                return Err(PyValueError::new_err(format!(
                    "range {i} ({lo}, {hi}) starts before range {} ends ({}): ranges must be ascending and not overlap",
                    i - 1,
                    prev.end
                )));
            }
        }
        out.push(r);
    }
    if out.is_empty() {
        return Err(PyValueError::new_err("extract needs at least one range"));
    }
    Ok(out)
}

/// A new 1-d numpy array of `dtype` holding `data` (bytes of native-endian elements).
fn array<'py>(py: Python<'py>, dtype: &str, n: usize, data: &[u8]) -> PyResult<Bound<'py, PyAny>> {
    let np = py.import("numpy")?;
    let a = np.getattr("empty")?.call1((n, np.getattr(dtype)?))?;
    let mut view = WritableBuffer::get(&a)?;
    let out = view.as_mut_slice();
    if out.len() != data.len() {
        return Err(PyValueError::new_err("numpy gave a buffer of the wrong size"));
    }
    out.copy_from_slice(data);
    drop(view);
    Ok(a)
}

fn f64_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn u64_bytes(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

/// What `FDB.extract` gives for one field: its full MARS key, and per range asked for the
/// values (float64, NaN where the field has no value) and the presence mask (uint64 words;
/// bit j of word k set when point k*64+j of the range has a value).
#[pyclass(frozen, module = "fieldstore._native")]
pub struct Extraction {
    key: Py<PyDict>,
    values: Py<PyList>,
    masks: Py<PyList>,
}

#[pymethods]
impl Extraction {
    /// The field's MARS key (dict of str).
    #[getter]
    fn key(&self, py: Python<'_>) -> Py<PyDict> {
        self.key.clone_ref(py)
    }

    /// One float64 numpy array per range, missing points NaN.
    #[getter]
    fn values(&self, py: Python<'_>) -> Py<PyList> {
        self.values.clone_ref(py)
    }

    /// One uint64 numpy array per range: bit j of word k set when point k*64+j is present.
    #[getter]
    fn masks(&self, py: Python<'_>) -> Py<PyList> {
        self.masks.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let n: usize = self
            .values
            .bind(py)
            .iter()
            .map(|a| a.len().unwrap_or(0))
            .sum();
        format!(
            "Extraction(key={}, ranges={}, values={n})",
            self.key.bind(py).repr().map(|r| r.to_string()).unwrap_or_default(),
            self.values.bind(py).len()
        )
    }
}

fn to_python(py: Python<'_>, e: &api::Extraction) -> PyResult<Extraction> {
    let values = PyList::empty(py);
    let masks = PyList::empty(py);
    for r in &e.ranges {
        values.append(array(py, "float64", r.values.len(), &f64_bytes(&r.values))?)?;
        masks.append(array(py, "uint64", r.mask.len(), &u64_bytes(&r.mask))?)?;
    }
    Ok(Extraction {
        key: key_dict(py, &e.key)?.unbind(),
        values: values.unbind(),
        masks: masks.unbind(),
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

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Extraction>()
}
