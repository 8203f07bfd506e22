//! A safe owner of an ecCodes handle.

use std::ffi::{CStr, CString};
use std::os::raw::{c_char, c_int};
use std::ptr;

use super::error::GribError;
use super::ffi;

pub(crate) fn error_text(code: c_int) -> String {
    // SAFETY: ecCodes returns a static string for any code.
    let p = unsafe { ffi::codes_get_error_message(code) };
    if p.is_null() {
        return format!("error {code}");
    }
    // SAFETY: non-null, NUL-terminated static string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// Owns a `codes_handle`; the bytes it was made from must outlive it (`'a`).
pub(crate) struct Handle<'a> {
    raw: *mut ffi::CodesHandle,
    _data: std::marker::PhantomData<&'a [u8]>,
}

// SAFETY: ecCodes handles may be used from any thread, one at a time; `Handle` is not `Sync`.
unsafe impl Send for Handle<'_> {}

impl<'a> Handle<'a> {
    /// Wraps a message without copying it. The caller has checked the framing.
    pub(crate) fn from_message(data: &'a [u8]) -> Result<Handle<'a>, GribError> {
        super::log::route()?;
        super::log::guarded(|| {
            // SAFETY: data is valid for `len` bytes for 'a, which the handle cannot outlive.
            let raw = unsafe {
                ffi::codes_handle_new_from_message(
                    ptr::null_mut(),
                    data.as_ptr().cast(),
                    data.len(),
                )
            };
            if raw.is_null() {
                return Err(GribError::Decode(
                    "ecCodes could not create a handle".into(),
                ));
            }
            Ok(Handle {
                raw,
                _data: std::marker::PhantomData,
            })
        })
    }

    /// A handle on its own copy of a message, so keys can be set (re-encoding) while the
    /// caller's bytes stay untouched.
    pub(crate) fn from_message_copy(data: &[u8]) -> Result<Handle<'static>, GribError> {
        super::log::route()?;
        super::log::guarded(|| {
            // SAFETY: data is valid for `len` bytes during the call; ecCodes copies it.
            let raw = unsafe {
                ffi::codes_handle_new_from_message_copy(
                    ptr::null_mut(),
                    data.as_ptr().cast(),
                    data.len(),
                )
            };
            if raw.is_null() {
                return Err(GribError::Decode(
                    "ecCodes could not create a handle".into(),
                ));
            }
            Ok(Handle {
                raw,
                _data: std::marker::PhantomData,
            })
        })
    }

    pub(crate) fn set_double(&mut self, key: &str, value: f64) -> Result<(), GribError> {
        let k = cstr(key)?;
        // SAFETY: valid handle and C string.
        let rc = unsafe { ffi::codes_set_double(self.raw, k.as_ptr(), value) };
        if rc != 0 {
            return Err(GribError::EcCodes(format!(
                "set {key}={value}: {}",
                error_text(rc)
            )));
        }
        Ok(())
    }

    pub(crate) fn from_sample(name: &str) -> Result<Handle<'static>, GribError> {
        super::log::route()?;
        let c = CString::new(name)
            .map_err(|_| GribError::EcCodes(format!("bad sample name {name:?}")))?;
        // SAFETY: c is a valid C string.
        let raw = unsafe { ffi::codes_grib_handle_new_from_samples(ptr::null_mut(), c.as_ptr()) };
        if raw.is_null() {
            return Err(GribError::EcCodes(format!(
                "sample '{name}' not found (is libeccodes-dev / eccodes-data installed?)"
            )));
        }
        Ok(Handle {
            raw,
            _data: std::marker::PhantomData,
        })
    }

    pub(crate) fn raw(&self) -> *mut ffi::CodesHandle {
        self.raw
    }

    /// A string value, read up to the NUL whatever length ecCodes reports.
    pub(crate) fn get_string(&self, key: &CStr) -> Result<String, c_int> {
        let mut buf = [0 as c_char; 1024];
        let mut len = buf.len();
        // SAFETY: buf is writable for len bytes; key is a C string.
        let rc =
            unsafe { ffi::codes_get_string(self.raw, key.as_ptr(), buf.as_mut_ptr(), &mut len) };
        if rc != 0 {
            return Err(rc);
        }
        let bytes: Vec<u8> = buf
            .iter()
            .take(len.min(buf.len()))
            .take_while(|c| **c != 0)
            .map(|c| *c as u8)
            .collect();
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    pub(crate) fn get_long(&self, key: &str) -> Result<i64, GribError> {
        let k = cstr(key)?;
        let mut v: std::os::raw::c_long = 0;
        // SAFETY: valid handle and C string.
        let rc = unsafe { ffi::codes_get_long(self.raw, k.as_ptr(), &mut v) };
        if rc != 0 {
            return Err(GribError::EcCodes(format!("get {key}: {}", error_text(rc))));
        }
        Ok(v)
    }

    pub(crate) fn set_long(&mut self, key: &str, value: i64) -> Result<(), GribError> {
        let k = cstr(key)?;
        // SAFETY: valid handle and C string.
        let rc = unsafe { ffi::codes_set_long(self.raw, k.as_ptr(), value as _) };
        if rc != 0 {
            return Err(GribError::EcCodes(format!(
                "set {key}={value}: {}",
                error_text(rc)
            )));
        }
        Ok(())
    }

    pub(crate) fn set_string(&mut self, key: &str, value: &str) -> Result<(), GribError> {
        let (k, v) = (cstr(key)?, cstr(value)?);
        let mut len = value.len();
        // SAFETY: valid handle and C strings.
        let rc = unsafe { ffi::codes_set_string(self.raw, k.as_ptr(), v.as_ptr(), &mut len) };
        if rc != 0 {
            return Err(GribError::EcCodes(format!(
                "set {key}={value}: {}",
                error_text(rc)
            )));
        }
        Ok(())
    }

    pub(crate) fn set_doubles(&mut self, key: &str, values: &[f64]) -> Result<(), GribError> {
        let k = cstr(key)?;
        // SAFETY: values valid for len; valid handle.
        let rc = unsafe {
            ffi::codes_set_double_array(self.raw, k.as_ptr(), values.as_ptr(), values.len())
        };
        if rc != 0 {
            return Err(GribError::EcCodes(format!("set {key}: {}", error_text(rc))));
        }
        Ok(())
    }

    /// For tests building grids (`pl` of an octahedral grid).
    #[cfg(test)]
    pub(crate) fn set_longs(&mut self, key: &str, values: &[i64]) -> Result<(), GribError> {
        let k = cstr(key)?;
        let v: Vec<std::os::raw::c_long> = values.iter().map(|x| *x as _).collect();
        // SAFETY: v valid for len; valid handle.
        let rc = unsafe { ffi::codes_set_long_array(self.raw, k.as_ptr(), v.as_ptr(), v.len()) };
        if rc != 0 {
            return Err(GribError::EcCodes(format!("set {key}: {}", error_text(rc))));
        }
        Ok(())
    }

    /// The encoded message (copied out of the handle).
    pub(crate) fn message(&self) -> Result<Vec<u8>, GribError> {
        let mut p: *const std::os::raw::c_void = ptr::null();
        let mut len = 0usize;
        // SAFETY: valid handle; p/len are out-parameters.
        let rc = unsafe { ffi::codes_get_message(self.raw, &mut p, &mut len) };
        if rc != 0 || p.is_null() {
            return Err(GribError::EcCodes(format!(
                "get message: {}",
                error_text(rc)
            )));
        }
        // SAFETY: ecCodes guarantees p is valid for len bytes while the handle lives.
        Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) }.to_vec())
    }
}

impl Drop for Handle<'_> {
    fn drop(&mut self) {
        // SAFETY: raw came from ecCodes and is deleted once.
        unsafe { ffi::codes_handle_delete(self.raw) };
    }
}

pub(crate) fn cstr(s: &str) -> Result<CString, GribError> {
    CString::new(s).map_err(|_| GribError::EcCodes(format!("string with a NUL byte: {s:?}")))
}
