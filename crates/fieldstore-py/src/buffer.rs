//! A writable view of any Python buffer (bytearray, memoryview, numpy array) for
//! `Reader.readinto`, so bytes land in the caller's memory without a copy.
//!
//! The abi3-py39 limited API has no `Py_buffer` (it joined the stable ABI in 3.11), so pyo3 does
//! not expose it there. `PyObject_GetBuffer`/`PyBuffer_Release` are exported by every CPython
//! since 3.0 and `Py_buffer`'s layout has not changed since 3.3, so they are declared here;
//! the alternative, a copy through `bytes`, would cost what `readinto` exists to save.

use std::os::raw::{c_char, c_int, c_void};

use pyo3::exceptions::PyTypeError;
use pyo3::ffi;
use pyo3::prelude::*;

#[repr(C)]
struct RawBuffer {
    buf: *mut c_void,
    obj: *mut ffi::PyObject,
    len: ffi::Py_ssize_t,
    itemsize: ffi::Py_ssize_t,
    readonly: c_int,
    ndim: c_int,
    format: *mut c_char,
    shape: *mut ffi::Py_ssize_t,
    strides: *mut ffi::Py_ssize_t,
    suboffsets: *mut ffi::Py_ssize_t,
    internal: *mut c_void,
}

extern "C" {
    fn PyObject_GetBuffer(obj: *mut ffi::PyObject, view: *mut RawBuffer, flags: c_int) -> c_int;
    fn PyBuffer_Release(view: *mut RawBuffer);
}

/// `PyBUF_WRITABLE` (with `PyBUF_SIMPLE`, 0): one contiguous run of writable bytes.
const PYBUF_WRITABLE: c_int = 0x0001;

/// An exported buffer, released on drop. While it lives the exporter cannot resize or free
/// the memory (a bytearray refuses to resize while exported).
pub struct WritableBuffer {
    view: RawBuffer,
}

// SAFETY: the memory stays valid until `PyBuffer_Release`, whichever thread writes to it; the
// release itself happens with the GIL held (in `Drop`, which reattaches).
unsafe impl Send for WritableBuffer {}

impl WritableBuffer {
    pub fn get(obj: &Bound<'_, PyAny>) -> PyResult<WritableBuffer> {
        let mut view = std::mem::MaybeUninit::<RawBuffer>::zeroed();
        // SAFETY: `view` is a correctly laid out Py_buffer; the GIL is held (we have `obj`).
        let rc = unsafe { PyObject_GetBuffer(obj.as_ptr(), view.as_mut_ptr(), PYBUF_WRITABLE) };
        if rc != 0 {
            let err = PyErr::take(obj.py());
            return Err(PyTypeError::new_err(format!(
                "readinto needs a writable contiguous buffer (bytearray, memoryview, numpy array), not {}{}",
                obj.get_type().name()?,
                err.map(|e| format!(" ({e})")).unwrap_or_default()
            )));
        }
        // SAFETY: a successful GetBuffer filled it in.
        let view = unsafe { view.assume_init() };
        Ok(WritableBuffer { view })
    }

    /// The bytes, to be filled (from any thread while `self` lives).
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        let len = usize::try_from(self.view.len).unwrap_or(0);
        if len == 0 || self.view.buf.is_null() {
            return &mut [];
        }
        // SAFETY: the exporter guarantees `len` writable contiguous bytes at `buf` (we asked
        // for PyBUF_WRITABLE) until release.
        unsafe { std::slice::from_raw_parts_mut(self.view.buf.cast::<u8>(), len) }
    }
}

impl Drop for WritableBuffer {
    fn drop(&mut self) {
        Python::attach(|_| {
            // SAFETY: the view came from a successful PyObject_GetBuffer, released once.
            unsafe { PyBuffer_Release(&mut self.view) }
        });
    }
}
