//! libfdb5.so.0d with Debian FDB5 5.10.8's ABI: the shared functions of `fieldstore-c` plus
//! the four whose signatures or answers differ from upstream's current API: a list iterator
//! made empty and filled by `fdb_list`, lines instead of split keys, and the API level.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::ffi::{c_char, c_int};

pub use fieldstore_c::*;

/// "5.10.8": the release whose API this library implements.
#[no_mangle]
pub extern "C" fn fdb_version(version: *mut *const c_char) -> c_int {
    fieldstore_c::version::version(version, fieldstore_c::version::DEBIAN_510_API_LEVEL)
}

/// An iterator listing nothing until `fdb_list` fills it.
#[no_mangle]
pub extern "C" fn fdb_new_listiterator(it: *mut *mut fdb_listiterator_t) -> c_int {
    fieldstore_c::list::new_listiterator(it)
}

/// Fills `it` with the fields `req` names (NULL: every field), every copy of each, as 5.10 does.
#[no_mangle]
pub extern "C" fn fdb_list(
    fdb: *mut fdb_handle_t,
    req: *const fdb_request_t,
    it: *mut fdb_listiterator_t,
) -> c_int {
    fieldstore_c::list::list_into(fdb, req, it)
}

/// `*exist` false at the end; otherwise `*str` is the field's `{db}{index}{datum}` line.
#[no_mangle]
pub extern "C" fn fdb_listiterator_next(
    it: *mut fdb_listiterator_t,
    exist: *mut bool,
    str: *mut *const c_char,
) -> c_int {
    fieldstore_c::list::listiterator_next_line(it, exist, str)
}
