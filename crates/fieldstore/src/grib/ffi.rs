//! The dozen ecCodes C functions fieldstore needs, declared by hand: the crates.io wrappers misread
//! strings and need a newer ecCodes than distributions ship.

use std::os::raw::{c_char, c_int, c_long, c_ulong, c_void};

#[repr(C)]
pub struct CodesHandle {
    _private: [u8; 0],
}

#[repr(C)]
pub struct CodesKeysIterator {
    _private: [u8; 0],
}

#[repr(C)]
pub struct CodesContext {
    _private: [u8; 0],
}

/// `CODES_KEYS_ITERATOR_SKIP_DUPLICATES` etc. are not needed: the mars namespace has no duplicates.
pub const KEYS_ITERATOR_ALL_KEYS: c_ulong = 0;

extern "C" {
    pub fn codes_handle_new_from_message(
        c: *mut CodesContext,
        data: *const c_void,
        len: usize,
    ) -> *mut CodesHandle;
    pub fn codes_grib_handle_new_from_samples(
        c: *mut CodesContext,
        sample: *const c_char,
    ) -> *mut CodesHandle;
    pub fn codes_handle_delete(h: *mut CodesHandle) -> c_int;
    pub fn codes_keys_iterator_new(
        h: *mut CodesHandle,
        flags: c_ulong,
        ns: *const c_char,
    ) -> *mut CodesKeysIterator;
    pub fn codes_keys_iterator_next(it: *mut CodesKeysIterator) -> c_int;
    pub fn codes_keys_iterator_get_name(it: *const CodesKeysIterator) -> *const c_char;
    pub fn codes_keys_iterator_delete(it: *mut CodesKeysIterator) -> c_int;
    pub fn codes_get_string(
        h: *const CodesHandle,
        key: *const c_char,
        out: *mut c_char,
        len: *mut usize,
    ) -> c_int;
    pub fn codes_get_long(h: *const CodesHandle, key: *const c_char, out: *mut c_long) -> c_int;
    pub fn codes_set_long(h: *mut CodesHandle, key: *const c_char, val: c_long) -> c_int;
    pub fn codes_set_string(
        h: *mut CodesHandle,
        key: *const c_char,
        val: *const c_char,
        len: *mut usize,
    ) -> c_int;
    pub fn codes_set_double_array(
        h: *mut CodesHandle,
        key: *const c_char,
        vals: *const f64,
        len: usize,
    ) -> c_int;
    pub fn codes_get_message(
        h: *const CodesHandle,
        msg: *mut *const c_void,
        len: *mut usize,
    ) -> c_int;
    pub fn codes_get_api_version() -> c_long;
    pub fn codes_get_error_message(code: c_int) -> *const c_char;
}
