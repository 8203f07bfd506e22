//! libfdb5.so with upstream FDB5's current ABI (since 5.11): the shared functions of
//! `fieldstore-c` plus the three whose signatures or answers differ from 5.10's.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::ffi::{c_char, c_int};

pub use fieldstore_c::*;

/// The upstream release whose API this library implements (legacy pyfdb checks it).
#[no_mangle]
pub extern "C" fn fdb_version(version: *mut *const c_char) -> c_int {
    fieldstore_c::version::version(version, fieldstore_c::version::CURRENT_API_LEVEL)
}

/// `duplicates` lists masked (replaced) fields too (FDB5 5.11+ passes it inverted, a defect
/// not reproduced); `depth` 1 lists databases, 2 indexes, 3 fields. A NULL request lists all.
#[no_mangle]
pub extern "C" fn fdb_list(
    fdb: *mut fdb_handle_t,
    req: *const fdb_request_t,
    it: *mut *mut fdb_listiterator_t,
    duplicates: bool,
    depth: c_int,
) -> c_int {
    fieldstore_c::list::list(fdb, req, it, duplicates, depth)
}

/// FDB_SUCCESS with a current element, FDB_ITERATION_COMPLETE at the end.
#[no_mangle]
pub extern "C" fn fdb_listiterator_next(it: *mut fdb_listiterator_t) -> c_int {
    fieldstore_c::list::listiterator_next(it)
}
