//! libfdb5.so with upstream FDB5's current ABI (since 5.11): the 25 functions `fieldstore-c`
//! exports for both ABIs, plus those whose signatures or answers differ from 5.10's and those
//! 5.10 lacks (split keys, wipe, purge, ...), exported here so that the 5.10 build does not.
#![allow(clippy::not_unsafe_ptr_arg_deref)]

use std::ffi::{c_char, c_int, c_long};

pub use fieldstore_c::*;

/// The upstream release whose API this library implements (legacy pyfdb checks it).
#[no_mangle]
pub extern "C" fn fdb_version(version: *mut *const c_char) -> c_int {
    fieldstore_c::version::version(version, fieldstore_c::version::CURRENT_API_LEVEL)
}

/// As FDB5 5.11 and later read them: `duplicates` is passed on as `deduplicate`, so true lists
/// each key once and false every copy, masked (replaced) ones included; `depth` 1 lists
/// databases, 2 indexes, 3 fields (anything else: 3). A NULL request lists all.
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

#[no_mangle]
pub extern "C" fn fdb_new_handle_from_yaml(
    fdb: *mut *mut fdb_handle_t,
    system_config: *const c_char,
    user_config: *const c_char,
) -> c_int {
    fieldstore_c::fdb_new_handle_from_yaml(fdb, system_config, user_config)
}

#[no_mangle]
pub extern "C" fn fdb_request_get(
    req: *mut fdb_request_t,
    param: *const c_char,
    values: *mut *mut *mut c_char,
    num_values: *mut usize,
) -> c_int {
    fieldstore_c::fdb_request_get(req, param, values, num_values)
}

#[no_mangle]
pub extern "C" fn fdb_expand_request(req: *mut fdb_request_t) -> c_int {
    fieldstore_c::fdb_expand_request(req)
}

#[no_mangle]
pub extern "C" fn fdb_datareader_size(dr: *mut fdb_datareader_t, size: *mut c_long) -> c_int {
    fieldstore_c::fdb_datareader_size(dr, size)
}

#[no_mangle]
pub extern "C" fn fdb_listiterator_attrs(
    it: *mut fdb_listiterator_t,
    uri: *mut *const c_char,
    off: *mut usize,
    len: *mut usize,
) -> c_int {
    fieldstore_c::fdb_listiterator_attrs(it, uri, off, len)
}

#[no_mangle]
pub extern "C" fn fdb_listiterator_splitkey(
    it: *mut fdb_listiterator_t,
    key: *mut fdb_split_key_t,
) -> c_int {
    fieldstore_c::fdb_listiterator_splitkey(it, key)
}

#[no_mangle]
pub extern "C" fn fdb_new_splitkey(key: *mut *mut fdb_split_key_t) -> c_int {
    fieldstore_c::fdb_new_splitkey(key)
}

#[no_mangle]
pub extern "C" fn fdb_splitkey_next_metadata(
    it: *mut fdb_split_key_t,
    key: *mut *const c_char,
    value: *mut *const c_char,
    level: *mut usize,
) -> c_int {
    fieldstore_c::fdb_splitkey_next_metadata(it, key, value, level)
}

#[no_mangle]
pub extern "C" fn fdb_delete_splitkey(key: *mut fdb_split_key_t) -> c_int {
    fieldstore_c::fdb_delete_splitkey(key)
}

#[no_mangle]
pub extern "C" fn fdb_wipe(
    fdb: *mut fdb_handle_t,
    req: *mut fdb_request_t,
    doit: bool,
    porcelain: bool,
    unsafe_wipe_all: bool,
    it: *mut *mut fdb_wipe_iterator_t,
) -> c_int {
    fieldstore_c::fdb_wipe(fdb, req, doit, porcelain, unsafe_wipe_all, it)
}

#[no_mangle]
pub extern "C" fn fdb_wipe_iterator_next(
    it: *mut fdb_wipe_iterator_t,
    element: *mut *mut fdb_wipe_element_t,
) -> c_int {
    fieldstore_c::fdb_wipe_iterator_next(it, element)
}

#[no_mangle]
pub extern "C" fn fdb_wipe_element_string(
    element: *mut fdb_wipe_element_t,
    str: *mut *const c_char,
) -> c_int {
    fieldstore_c::fdb_wipe_element_string(element, str)
}

#[no_mangle]
pub extern "C" fn fdb_delete_wipe_element(element: *mut fdb_wipe_element_t) -> c_int {
    fieldstore_c::fdb_delete_wipe_element(element)
}

#[no_mangle]
pub extern "C" fn fdb_delete_wipe_iterator(it: *mut fdb_wipe_iterator_t) -> c_int {
    fieldstore_c::fdb_delete_wipe_iterator(it)
}

#[no_mangle]
pub extern "C" fn fdb_purge(
    fdb: *mut fdb_handle_t,
    req: *mut fdb_request_t,
    doit: bool,
    porcelain: bool,
    it: *mut *mut fdb_purge_iterator_t,
) -> c_int {
    fieldstore_c::fdb_purge(fdb, req, doit, porcelain, it)
}

#[no_mangle]
pub extern "C" fn fdb_purge_iterator_next(
    it: *mut fdb_purge_iterator_t,
    element: *mut *mut fdb_purge_element_t,
) -> c_int {
    fieldstore_c::fdb_purge_iterator_next(it, element)
}

#[no_mangle]
pub extern "C" fn fdb_purge_element_string(
    element: *mut fdb_purge_element_t,
    str: *mut *const c_char,
) -> c_int {
    fieldstore_c::fdb_purge_element_string(element, str)
}

#[no_mangle]
pub extern "C" fn fdb_delete_purge_element(element: *mut fdb_purge_element_t) -> c_int {
    fieldstore_c::fdb_delete_purge_element(element)
}

#[no_mangle]
pub extern "C" fn fdb_delete_purge_iterator(it: *mut fdb_purge_iterator_t) -> c_int {
    fieldstore_c::fdb_delete_purge_iterator(it)
}
