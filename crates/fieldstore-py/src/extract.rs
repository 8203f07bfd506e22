//! Extraction of ranges of grid points (issue 30): the `Extraction` result class, the ranges
//! argument, and `extract_message` (one GRIB message in memory, no store). `FDB.extract` is in
//! `fdb_extract.rs`. The `pygribjump` compatibility package (python/pygribjump-compat) is built
//! on them.

use std::ops::Range;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyString};

use fieldstore::extract::{ExtractError, ExtractInfo, RangeValues};

use crate::buffer::WritableBuffer;

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
pub(crate) fn array<'py>(
    py: Python<'py>,
    dtype: &str,
    n: usize,
    data: &[u8],
) -> PyResult<Bound<'py, PyAny>> {
    let np = py.import("numpy")?;
    let a = np.getattr("empty")?.call1((n, np.getattr(dtype)?))?;
    let mut view = WritableBuffer::get(&a)?;
    let out = view.as_mut_slice();
    if out.len() != data.len() {
        return Err(PyValueError::new_err(
            "numpy gave a buffer of the wrong size",
        ));
    }
    out.copy_from_slice(data);
    drop(view);
    Ok(a)
}

pub(crate) fn f64_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

pub(crate) fn u64_bytes(v: &[u64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

/// What `FDB.extract` gives for one field (and `extract_message` for one message): its full MARS key, and per range asked for the
/// values (float64, NaN where the field has no value) and the presence mask (uint64 words;
/// bit j of word k set when point k*64+j of the range has a value).
#[pyclass(frozen, module = "fieldstore._native")]
pub struct Extraction {
    pub(crate) key: Option<Py<PyDict>>,
    pub(crate) values: Py<PyList>,
    pub(crate) masks: Py<PyList>,
    pub(crate) grid_hash: Option<String>,
    pub(crate) bytes_read: Option<u64>,
}

#[pymethods]
impl Extraction {
    /// The field's MARS key (dict of str); None for a message extracted without a store.
    #[getter]
    fn key(&self, py: Python<'_>) -> Option<Py<PyDict>> {
        self.key.as_ref().map(|k| k.clone_ref(py))
    }

    /// The md5 of the field's grid section (ecCodes' `md5GridSection`, what GribJump checks
    /// requests against), when known.
    #[getter]
    fn grid_hash(&self) -> Option<String> {
        self.grid_hash.clone()
    }

    /// Bytes of the field read to answer (its length when it was read whole); None for
    /// `extract_message`.
    #[getter]
    fn bytes_read(&self) -> Option<u64> {
        self.bytes_read
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
        let key = match &self.key {
            Some(k) => k.bind(py).repr().map(|r| r.to_string()).unwrap_or_default(),
            None => "None".to_string(),
        };
        format!(
            "Extraction(key={key}, ranges={}, values={n})",
            self.values.bind(py).len()
        )
    }
}

pub(crate) fn arrays(py: Python<'_>, ranges: &[RangeValues]) -> PyResult<(Py<PyList>, Py<PyList>)> {
    let values = PyList::empty(py);
    let masks = PyList::empty(py);
    for r in ranges {
        values.append(array(py, "float64", r.values.len(), &f64_bytes(&r.values))?)?;
        masks.append(array(py, "uint64", r.mask.len(), &u64_bytes(&r.mask))?)?;
    }
    Ok((values.unbind(), masks.unbind()))
}

/// The values of ranges of grid points of one GRIB message in memory (bytes or any buffer,
/// from `GRIB` to `7777`), without a store: an `Extraction` with `key` None and `grid_hash` set
/// (None for a GRIB1 field on a predefined grid). Packings without a range decoder are decoded
/// whole by ecCodes.
#[pyfunction]
pub fn extract_message<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    ranges: &Bound<'py, PyAny>,
) -> PyResult<Extraction> {
    let ranges = self::ranges(ranges)?;
    // bytes are immutable, so read in place with the GIL released; anything else is copied.
    let owned;
    let bytes: &Bound<'_, PyBytes> =
        if let Ok(b) = data.cast::<PyBytes>() {
            b
        } else {
            owned =
                py.import("builtins")?
                    .getattr("bytes")?
                    .call1((data,))
                    .map_err(|_| {
                        PyTypeError::new_err(format!(
                    "extract_message needs bytes or a buffer holding one GRIB message, not {}",
                    data.get_type().name().map(|n| n.to_string()).unwrap_or_default()
                ))
                    })?
                    .cast_into::<PyBytes>()?;
            &owned
        };
    let slice = bytes.as_bytes();
    let (found, hash) = py
        .detach(|| {
            // As fieldstore::extract::extract_message, keeping the info for its grid hash.
            let info = ExtractInfo::build(slice)?;
            let len = info.total_length;
            let whole = slice
                .get(..len as usize)
                .ok_or_else(|| ExtractError::Corrupt {
                    offset: 0,
                    reason: "shorter than its announced length".into(),
                })?;
            let values = info.extract(&ranges, &[(0..len, whole)])?;
            Ok::<_, ExtractError>((values, info.md5_grid_section_hex()))
        })
        .map_err(crate::errors::to_py)?;
    let (values, masks) = arrays(py, &found)?;
    Ok(Extraction {
        key: None,
        values,
        masks,
        grid_hash: hash,
        bytes_read: None,
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Extraction>()?;
    m.add_function(wrap_pyfunction!(extract_message, m)?)
}
