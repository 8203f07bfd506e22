//! `fieldstore.Message`: one GRIB message decoded by ecCodes, without a store. Values and
//! coordinates are decoded with the GIL released straight into numpy arrays Python owns.

use std::sync::{Arc, Mutex, PoisonError};

use fieldstore::grib::{Decoded, GribError, KeyValue, OwnedDecoded};
use fieldstore::ErrorKind;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyTuple};

use crate::buffer::WritableBuffer;
use crate::errors::{raise, to_py};

/// One GRIB message, decoded by ecCodes on demand.
///
/// ``Message(data)`` takes bytes (or any buffer) holding exactly one message. ``values`` and
/// ``to_numpy()`` give float64 arrays with missing points as NaN; ``latitudes``/``longitudes``
/// one coordinate per value; ``metadata(name)`` any ecCodes key; ``grid`` the geometry.
#[pyclass(frozen, module = "fieldstore._native")]
pub struct Message {
    bytes: Arc<[u8]>,
    /// One ecCodes handle kept open: opening one costs as much as decoding a small field.
    open: Mutex<OwnedDecoded>,
}

enum Coord {
    Lat,
    Lon,
}

fn bytes_of(data: &Bound<'_, PyAny>) -> PyResult<Arc<[u8]>> {
    if let Ok(b) = data.cast::<PyBytes>() {
        return Ok(Arc::from(b.as_bytes()));
    }
    if let Ok(b) = data.cast::<PyByteArray>() {
        return Ok(Arc::from(b.to_vec()));
    }
    let py = data.py();
    let view = py
        .import("builtins")?
        .getattr("memoryview")?
        .call1((data,))
        .map_err(|_| {
            let name = data
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default();
            PyTypeError::new_err(format!(
                "Message needs bytes, bytearray or a buffer holding one GRIB message, not {name}"
            ))
        })?;
    let b = view.call_method0("tobytes")?;
    let b = b.cast::<PyBytes>()?;
    Ok(Arc::from(b.as_bytes()))
}

fn empty_f64<'py>(py: Python<'py>, n: usize) -> PyResult<Bound<'py, PyAny>> {
    py.import("numpy")?
        .getattr("empty")?
        .call1((n, py.import("numpy")?.getattr("float64")?))
}

/// `f64`s over a numpy array's bytes (numpy aligns its allocations for the dtype).
fn as_f64(bytes: &mut [u8]) -> PyResult<&mut [f64]> {
    // SAFETY: every bit pattern is a valid f64; align_to_mut only takes aligned whole elements.
    let (pre, mid, post) = unsafe { bytes.align_to_mut::<f64>() };
    if !pre.is_empty() || !post.is_empty() {
        return Err(PyValueError::new_err(
            "numpy gave an unaligned float64 buffer",
        ));
    }
    Ok(mid)
}

fn to_python<'py>(py: Python<'py>, v: KeyValue, arrays: bool) -> PyResult<Bound<'py, PyAny>> {
    let np = |list: Bound<'py, PyList>, dtype: &str| -> PyResult<Bound<'py, PyAny>> {
        if !arrays {
            return Ok(list.into_any());
        }
        py.import("numpy")?.getattr("array")?.call1((list, dtype))
    };
    Ok(match v {
        KeyValue::Long(x) => x.into_pyobject(py)?.into_any(),
        KeyValue::Double(x) => x.into_pyobject(py)?.into_any(),
        KeyValue::String(s) => s.into_pyobject(py)?.into_any(),
        KeyValue::Bytes(b) => PyBytes::new(py, &b).into_any(),
        KeyValue::Longs(v) => np(PyList::new(py, v)?, "int64")?,
        KeyValue::Doubles(v) => np(PyList::new(py, v)?, "float64")?,
    })
}

impl Message {
    /// Runs `f` on the open message with the GIL released (the handle is not `Sync`: one
    /// thread at a time, waiting for it without the GIL). A poisoned lock is taken anyway:
    /// ecCodes calls do not panic, and a handle holds nothing half-written.
    fn with<R: Send>(&self, py: Python<'_>, f: impl FnOnce(&Decoded<'_>) -> R + Send) -> R {
        py.detach(|| {
            let open = self.open.lock().unwrap_or_else(PoisonError::into_inner);
            f(open.get())
        })
    }

    /// Decodes into a new numpy array with the GIL released.
    fn decode_array<'py>(
        &self,
        py: Python<'py>,
        size: impl FnOnce(&Decoded<'_>) -> Result<usize, GribError> + Send,
        fill: impl FnOnce(&Decoded<'_>, &mut [f64]) -> Result<(), GribError> + Send,
    ) -> PyResult<Bound<'py, PyAny>> {
        let n = self.with(py, size).map_err(to_py)?;
        let array = empty_f64(py, n)?;
        let mut view = WritableBuffer::get(&array)?;
        let out = as_f64(view.as_mut_slice())?;
        self.with(py, |d| fill(d, out)).map_err(to_py)?;
        drop(view);
        Ok(array)
    }

    fn coordinates<'py>(&self, py: Python<'py>, which: Coord) -> PyResult<Bound<'py, PyAny>> {
        self.decode_array(
            py,
            |d| d.number_of_points(),
            move |d, out| match which {
                Coord::Lat => d.latitudes_into(out),
                Coord::Lon => d.longitudes_into(out),
            },
        )
    }
}

#[pymethods]
impl Message {
    #[new]
    fn new(py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<Message> {
        let bytes = bytes_of(data)?;
        let b = bytes.clone();
        let open = py.detach(move || OwnedDecoded::new(b)).map_err(to_py)?;
        Ok(Message {
            bytes,
            open: Mutex::new(open),
        })
    }

    /// The message's bytes, ``GRIB`` to ``7777``.
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        Ok(PyBytes::new(py, &self.bytes))
    }

    /// The values as a float64 numpy array, missing points as NaN.
    fn to_numpy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.decode_array(py, |d| d.number_of_values(), |d, out| d.values_into(out))
    }

    /// The values (as ``to_numpy()``), a new array each time.
    #[getter]
    fn values<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.to_numpy(py)
    }

    /// The latitude of every point, in the order of the values. ``UnsupportedError`` for
    /// spherical harmonics and grids ecCodes has no geometry for.
    #[getter]
    fn latitudes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.coordinates(py, Coord::Lat)
    }

    /// The longitude of every point, in the order of the values.
    #[getter]
    fn longitudes<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        self.coordinates(py, Coord::Lon)
    }

    /// How many values the message holds (missing points included).
    #[getter]
    fn number_of_values(&self, py: Python<'_>) -> PyResult<usize> {
        self.with(py, |d| d.number_of_values()).map_err(to_py)
    }

    /// Any ecCodes key, in its native type (int, float, str; numpy arrays for array keys such
    /// as ``pl``). A key the message does not define gives ``default`` if one is given (``None``
    /// included), else raises ``fieldstore.NotFoundError`` (a ``KeyError``).
    #[pyo3(signature = (name, *args, **kwargs), text_signature = "(name, default=...)")]
    fn metadata<'py>(
        &self,
        py: Python<'py>,
        name: &str,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let mut default = match args.len() {
            0 => None,
            1 => Some(args.get_item(0)?),
            n => {
                return Err(PyTypeError::new_err(format!(
                    "metadata() takes a name and at most one default, not {} values",
                    n + 1
                )))
            }
        };
        if let Some(kw) = kwargs {
            for (k, v) in kw.iter() {
                if k.extract::<String>()? != "default" || default.is_some() {
                    return Err(PyTypeError::new_err(format!(
                        "metadata() got an unexpected or repeated keyword argument {k}"
                    )));
                }
                default = Some(v);
            }
        }
        let found = self.with(py, |d| d.get(name)).map_err(to_py)?;
        match (found, default) {
            (Some(v), _) => to_python(py, v, true),
            (None, Some(d)) => Ok(d),
            (None, None) => Err(raise(
                ErrorKind::NotFound,
                format!("the GRIB message has no key '{name}'"),
            )),
        }
    }

    /// The geometry: gridType, Ni, Nj, N, pl, first/last latitude and longitude, increments,
    /// scanning mode... (the keys the message defines and does not code as missing).
    #[getter]
    fn grid<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let pairs = self.with(py, |d| d.grid()).map_err(to_py)?;
        let out = PyDict::new(py);
        for (k, v) in pairs {
            out.set_item(k, to_python(py, v, false)?)?;
        }
        Ok(out)
    }

    /// The MARS keys the store files the message under, as strings.
    #[getter]
    fn mars_keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let key = self.with(py, |d| d.mars_keys()).map_err(to_py)?;
        let out = PyDict::new(py);
        for (k, v) in key.iter() {
            out.set_item(k, v)?;
        }
        Ok(out)
    }

    fn __len__(&self) -> usize {
        self.bytes.len()
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let len = self.bytes.len();
        self.with(py, |d| {
            let text = |k: &str| match d.get(k) {
                Ok(Some(KeyValue::String(s))) => s,
                Ok(Some(KeyValue::Long(n))) => n.to_string(),
                _ => "?".into(),
            };
            let n = d.number_of_values().map(|n| n.to_string());
            format!(
                "Message(shortName={}, gridType={}, values={}, bytes={len})",
                text("shortName"),
                text("gridType"),
                n.unwrap_or_else(|_| "?".into()),
            )
        })
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Message>()
}
