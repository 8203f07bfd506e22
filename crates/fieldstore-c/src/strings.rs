//! C strings and output pointers from the caller, checked.

use std::ffi::{c_char, CStr};

use crate::errors::{CError, Result};

/// A caller's NUL-terminated UTF-8 string, named `what` in errors.
pub fn text<'a>(p: *const c_char, what: &'static str) -> Result<&'a str> {
    if p.is_null() {
        return Err(CError::Null(what));
    }
    // SAFETY: non-NULL, and the C API requires NUL-terminated strings.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| CError::Utf8(what))
}

/// Writes through a caller's output pointer.
pub fn put<T>(p: *mut T, what: &'static str, value: T) -> Result<()> {
    if p.is_null() {
        return Err(CError::Null(what));
    }
    // SAFETY: non-NULL and, by the API's contract, pointing at a writable T.
    unsafe { p.write(value) };
    Ok(())
}

/// A caller's object, by reference.
pub fn obj<'a, T>(p: *mut T, what: &'static str) -> Result<&'a mut T> {
    // SAFETY: the pointer came from this library's constructor (the API's contract).
    unsafe { p.as_mut() }.ok_or(CError::Null(what))
}

/// Hands a new object to C.
pub fn give<T>(out: *mut *mut T, what: &'static str, value: T) -> Result<()> {
    if out.is_null() {
        return Err(CError::Null(what));
    }
    put(out, what, Box::into_raw(Box::new(value)))
}

/// Takes back and drops an object made by `give`; NULL is accepted, as `free` does.
pub fn drop_obj<T>(p: *mut T) {
    if !p.is_null() {
        // SAFETY: made by `give`, and the caller gives it up.
        drop(unsafe { Box::from_raw(p) });
    }
}

/// A caller's object shared between threads (a handle): never borrowed mutably.
pub fn shared<'a, T>(p: *const T, what: &'static str) -> Result<&'a T> {
    // SAFETY: the pointer came from this library's constructor (the API's contract).
    unsafe { p.as_ref() }.ok_or(CError::Null(what))
}
