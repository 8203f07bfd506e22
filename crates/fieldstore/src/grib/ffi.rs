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

/// `GRIB_NOT_FOUND`: the key does not exist in this message.
pub const NOT_FOUND: c_int = -10;

/// `CODES_LOG_*`, the levels of ecCodes' log messages.
pub const LOG_INFO: c_int = 0;
pub const LOG_WARNING: c_int = 1;
pub const LOG_ERROR: c_int = 2;
pub const LOG_FATAL: c_int = 3;

/// `codes_log_proc`: receives each of ecCodes' log lines instead of stderr.
pub type LogProc =
    Option<extern "C" fn(c: *const CodesContext, level: c_int, message: *const c_char)>;

/// `codes_assertion_failed_proc`: called instead of `abort()` when an ecCodes assertion fails.
pub type AssertionProc = Option<extern "C" fn(message: *const c_char)>;

/// `CODES_TYPE_*`, the native types of keys.
pub const TYPE_LONG: c_int = 1;
pub const TYPE_DOUBLE: c_int = 2;
pub const TYPE_BYTES: c_int = 4;

extern "C" {
    pub fn codes_handle_new_from_message(
        c: *mut CodesContext,
        data: *const c_void,
        len: usize,
    ) -> *mut CodesHandle;
    pub fn codes_handle_new_from_message_copy(
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
    #[cfg(test)]
    pub fn codes_set_long_array(
        h: *mut CodesHandle,
        key: *const c_char,
        vals: *const c_long,
        len: usize,
    ) -> c_int;
    pub fn codes_get_size(h: *const CodesHandle, key: *const c_char, size: *mut usize) -> c_int;
    pub fn codes_get_length(h: *const CodesHandle, key: *const c_char, len: *mut usize) -> c_int;
    pub fn codes_get_double(h: *const CodesHandle, key: *const c_char, out: *mut f64) -> c_int;
    pub fn codes_set_double(h: *mut CodesHandle, key: *const c_char, val: f64) -> c_int;
    pub fn codes_get_double_array(
        h: *const CodesHandle,
        key: *const c_char,
        vals: *mut f64,
        len: *mut usize,
    ) -> c_int;
    pub fn codes_get_long_array(
        h: *const CodesHandle,
        key: *const c_char,
        vals: *mut c_long,
        len: *mut usize,
    ) -> c_int;
    pub fn codes_get_bytes(
        h: *const CodesHandle,
        key: *const c_char,
        bytes: *mut u8,
        len: *mut usize,
    ) -> c_int;
    pub fn codes_get_native_type(h: *const CodesHandle, key: *const c_char, t: *mut c_int)
        -> c_int;
    pub fn codes_is_defined(h: *const CodesHandle, key: *const c_char) -> c_int;
    pub fn codes_is_missing(h: *const CodesHandle, key: *const c_char, err: *mut c_int) -> c_int;
    /// Fills `latitudes` (2 * truncation of them) north to south.
    pub fn codes_get_gaussian_latitudes(truncation: c_long, latitudes: *mut f64) -> c_int;
    pub fn codes_get_api_version() -> c_long;
    pub fn codes_context_get_default() -> *mut CodesContext;
    pub fn codes_context_set_logging_proc(c: *mut CodesContext, proc_: LogProc);
    pub fn codes_set_codes_assertion_failed_proc(proc_: AssertionProc);
    pub fn codes_get_error_message(code: c_int) -> *const c_char;
}
