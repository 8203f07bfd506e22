//! Initialisation and the two versions: the FDB5 API level this library implements (what
//! callers such as legacy pyfdb check) and fieldstore's own.

use std::ffi::{c_char, c_int};

use crate::errors::run;
use crate::strings::put;

/// The FDB5 release whose C API this library implements (legacy pyfdb requires >= 5.12.1).
pub const FDB5_API_LEVEL: &std::ffi::CStr = fieldstore::FDB5_API_LEVEL;

/// fieldstore's own version.
const VCS: &std::ffi::CStr = match std::ffi::CStr::from_bytes_with_nul(
    concat!("fieldstore-", env!("CARGO_PKG_VERSION"), "\0").as_bytes(),
) {
    Ok(c) => c,
    Err(_) => c"fieldstore",
};

/// Nothing to set up: kept because FDB5 requires callers to call it first.
#[no_mangle]
pub extern "C" fn fdb_initialise() -> c_int {
    run(|| Ok(()))
}

#[no_mangle]
pub extern "C" fn fdb_version(version: *mut *const c_char) -> c_int {
    run(|| put(version, "version", FDB5_API_LEVEL.as_ptr()))
}

#[no_mangle]
pub extern "C" fn fdb_vcs_version(sha1: *mut *const c_char) -> c_int {
    run(|| put(sha1, "sha1", VCS.as_ptr()))
}
