//! `FDB.retrieve`: a seekable byte stream over the matched fields (an `io.RawIOBase` duck type),
//! readable field by field. Reads allocate the exact result and fill it with the GIL released.

use std::io::{Seek, SeekFrom};
use std::sync::Mutex;

use fieldstore::api::{DataReader, FieldSpan};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict};

use crate::buffer::WritableBuffer;
use crate::errors::io_to_py;
use crate::strings::dict_of;
use crate::sync::lock;

/// The fields a retrieve matched, as one stream: `read`, `readinto`, `seek`, `tell`, `len`,
/// iteration field by field. It owns what it reads, so it may outlive its FDB. A request that
/// matches nothing gives an empty reader (length 0), as the CLI's `read` writes nothing.
#[pyclass(frozen, module = "fieldstore._native")]
pub struct Reader {
    inner: Mutex<Option<Box<dyn DataReader>>>,
    fields: Vec<FieldSpan>,
    size: u64,
}

impl Reader {
    pub fn new(inner: Box<dyn DataReader>) -> Reader {
        Reader {
            fields: inner.fields().to_vec(),
            size: inner.size(),
            inner: Mutex::new(Some(inner)),
        }
    }
}

fn closed() -> PyErr {
    PyValueError::new_err("I/O operation on closed Reader")
}

/// Fills `buf` completely from `r` (the caller sized it to what is left).
fn fill(r: &mut dyn DataReader, buf: &mut [u8]) -> std::io::Result<()> {
    r.read_exact(buf)
}

#[pymethods]
impl Reader {
    /// Reads up to `n` bytes (all that is left if `n` is negative or omitted); `b""` at the end.
    #[pyo3(signature = (n = -1))]
    fn read<'py>(&self, py: Python<'py>, n: Option<i64>) -> PyResult<Bound<'py, PyBytes>> {
        let mut guard = lock(py, &self.inner);
        let r = guard.as_mut().ok_or_else(closed)?;
        let left = self.size.saturating_sub(r.tell());
        let want = match n {
            Some(n) if n >= 0 => left.min(n as u64),
            _ => left,
        };
        let want = usize::try_from(want)
            .map_err(|_| PyValueError::new_err("read size does not fit in memory"))?;
        let r: &mut Box<dyn DataReader> = r;
        PyBytes::new_with(py, want, |buf| {
            py.detach(|| fill(r.as_mut(), buf)).map_err(io_to_py)
        })
    }

    /// Everything from the current position to the end.
    fn readall<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyBytes>> {
        self.read(py, None)
    }

    /// Reads into a writable buffer (bytearray, memoryview, numpy array) in place; returns the
    /// number of bytes read, 0 at the end.
    fn readinto(&self, py: Python<'_>, buffer: &Bound<'_, PyAny>) -> PyResult<usize> {
        let mut view = WritableBuffer::get(buffer)?;
        let mut guard = lock(py, &self.inner);
        let r = guard.as_mut().ok_or_else(closed)?;
        let left = self.size.saturating_sub(r.tell());
        let out = view.as_mut_slice();
        let n = out.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        let r: &mut Box<dyn DataReader> = r;
        let out = &mut out[..n];
        py.detach(|| fill(r.as_mut(), out)).map_err(io_to_py)?;
        drop(guard);
        drop(view);
        Ok(n)
    }

    /// Moves the position: whence 0 from the start, 1 from here, 2 from the end. Returns it.
    #[pyo3(signature = (offset, whence = 0))]
    fn seek(&self, py: Python<'_>, offset: i64, whence: i32) -> PyResult<u64> {
        let pos = match whence {
            0 => SeekFrom::Start(
                u64::try_from(offset)
                    .map_err(|_| PyValueError::new_err("negative seek position"))?,
            ),
            1 => SeekFrom::Current(offset),
            2 => SeekFrom::End(offset),
            w => {
                return Err(PyValueError::new_err(format!(
                    "invalid whence ({w}, should be 0, 1 or 2)"
                )))
            }
        };
        let mut guard = lock(py, &self.inner);
        let r: &mut Box<dyn DataReader> = guard.as_mut().ok_or_else(closed)?;
        py.detach(|| r.seek(pos)).map_err(io_to_py)
    }

    fn tell(&self, py: Python<'_>) -> PyResult<u64> {
        let guard = lock(py, &self.inner);
        Ok(guard.as_ref().ok_or_else(closed)?.tell())
    }

    /// Total bytes of all matched fields.
    #[getter]
    fn size(&self) -> u64 {
        self.size
    }

    fn __len__(&self) -> usize {
        usize::try_from(self.size).unwrap_or(usize::MAX)
    }

    /// The matched fields in stream order: key, offset in the stream, length.
    #[getter]
    fn fields(&self, py: Python<'_>) -> PyResult<Vec<FieldInfo>> {
        self.fields
            .iter()
            .map(|f| {
                Ok(FieldInfo {
                    key: dict_of(py, &[&f.key.db, &f.key.index, &f.key.datum])?.unbind(),
                    offset: f.offset,
                    length: f.length,
                })
            })
            .collect()
    }

    fn readable(&self) -> bool {
        true
    }
    fn seekable(&self) -> bool {
        true
    }
    fn writable(&self) -> bool {
        false
    }

    /// Lets go of the files; later reads raise ValueError. Closing twice is fine.
    fn close(&self, py: Python<'_>) {
        let taken = lock(py, &self.inner).take();
        py.detach(|| drop(taken));
    }

    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        lock(py, &self.inner).is_none()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_args))]
    fn __exit__(&self, py: Python<'_>, _args: &Bound<'_, pyo3::types::PyTuple>) -> bool {
        self.close(py);
        false
    }

    /// Field by field from the start, as `fieldstore.Field` objects (key, offset, length, data).
    fn __iter__(slf: Py<Self>) -> FieldIterator {
        FieldIterator {
            reader: slf,
            next: Mutex::new(0),
        }
    }

    /// Values of every field decoded by ecCodes, shape (fields, points), float64, missing
    /// values NaN. ValueError if the fields have different numbers of points.
    fn to_numpy<'py>(slf: &Bound<'py, Self>) -> PyResult<Bound<'py, PyAny>> {
        slf.py()
            .import("fieldstore._field")?
            .getattr("_reader_to_numpy")?
            .call1((slf,))
    }

    fn __repr__(&self) -> String {
        format!("Reader(fields={}, size={})", self.fields.len(), self.size)
    }
}

impl Reader {
    /// The bytes of field `i`, read from its offset (the stream position moves past it).
    fn field_bytes<'py>(&self, py: Python<'py>, i: usize) -> PyResult<Bound<'py, PyBytes>> {
        let f = &self.fields[i];
        let len = usize::try_from(f.length)
            .map_err(|_| PyValueError::new_err("field does not fit in memory"))?;
        let mut guard = lock(py, &self.inner);
        let r: &mut Box<dyn DataReader> = guard.as_mut().ok_or_else(closed)?;
        let at = f.offset;
        PyBytes::new_with(py, len, |buf| {
            py.detach(|| {
                r.seek(SeekFrom::Start(at))?;
                fill(r.as_mut(), buf)
            })
            .map_err(io_to_py)
        })
    }
}

/// Yields `fieldstore.Field` objects of a Reader in order.
#[pyclass(frozen, module = "fieldstore._native")]
pub struct FieldIterator {
    reader: Py<Reader>,
    next: Mutex<usize>,
}

#[pymethods]
impl FieldIterator {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyAny>>> {
        let i = {
            let mut n = lock(py, &self.next);
            let i = *n;
            *n += 1;
            i
        };
        let reader = self.reader.get();
        let Some(f) = reader.fields.get(i) else {
            return Ok(None);
        };
        let data = reader.field_bytes(py, i)?;
        let key = dict_of(py, &[&f.key.db, &f.key.index, &f.key.datum])?;
        let field = py
            .import("fieldstore._field")?
            .getattr("Field")?
            .call1((key, f.offset, f.length, data))?;
        Ok(Some(field))
    }
}

/// One matched field of a Reader: its key, offset in the stream and length.
#[pyclass(frozen, module = "fieldstore._native")]
pub struct FieldInfo {
    #[pyo3(get)]
    key: Py<PyDict>,
    #[pyo3(get)]
    offset: u64,
    #[pyo3(get)]
    length: u64,
}

#[pymethods]
impl FieldInfo {
    fn __repr__(&self, py: Python<'_>) -> String {
        let key = self
            .key
            .bind(py)
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_default();
        format!(
            "FieldInfo(key={key}, offset={}, length={})",
            self.offset, self.length
        )
    }
}
