//! Initialisation and the two versions: the FDB5 API level a library implements (what callers
//! such as legacy pyfdb check) and fieldstore's own. `fdb_version` itself is exported by each
//! ABI's crate, since the two report different levels.

use std::ffi::{c_char, c_int, CStr};

use crate::errors::run;
use crate::strings::put;

/// The upstream FDB5 release whose C API `libfdb5.so` implements (legacy pyfdb requires
/// >= 5.12.1).
pub const CURRENT_API_LEVEL: &CStr = fieldstore::FDB5_API_LEVEL;

/// Debian's FDB5 release whose C API `libfdb5.so.0d` implements.
pub const DEBIAN_510_API_LEVEL: &CStr = c"5.10.8";

/// fieldstore's own version.
const VCS: &CStr = match CStr::from_bytes_with_nul(
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

/// `fdb_version` of an ABI crate: hands out `level`, a static string.
pub fn version(version: *mut *const c_char, level: &'static CStr) -> c_int {
    run(|| put(version, "version", level.as_ptr()))
}

#[no_mangle]
pub extern "C" fn fdb_vcs_version(sha1: *mut *const c_char) -> c_int {
    run(|| put(sha1, "sha1", VCS.as_ptr()))
}
