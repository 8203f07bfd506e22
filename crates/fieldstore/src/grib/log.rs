//! ecCodes' own log lines (`ECCODES ERROR : concept: no match ...`) go to `tracing` at debug
//! level instead of the process's stderr: a user (or a server's client) gets fieldstore's one
//! error naming what was wrong, and an operator still finds ecCodes' detail with debug logging.
//!
//! ecCodes' failed assertions would `abort()` the process (a server with every client on it);
//! damaged messages reach some of them (`gribForecastMonth == fcmonth` for a GRIB 1 message
//! whose dates disagree). They are recorded instead, and the call that met one fails with an
//! error naming it: ecCodes goes on past the check as with its own `ECCODES_NO_ABORT`, and what
//! it computed after it is never used.

use std::cell::RefCell;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::sync::Once;

use super::error::GribError;
use super::ffi;

/// Loads ecCodes if this is the process's first use of it (a typed error naming what to install
/// if it cannot be), and routes its default context's log to `tracing`, once per process, before
/// the first handle.
pub(crate) fn route() -> Result<(), GribError> {
    ffi::library()?;
    static ROUTED: Once = Once::new();
    ROUTED.call_once(|| {
        // SAFETY: the default context lives for the process; the procedure is a plain function
        // that ecCodes calls with a NUL-terminated message (or null).
        unsafe {
            let c = ffi::codes_context_get_default();
            if !c.is_null() {
                ffi::codes_context_set_logging_proc(c, Some(to_tracing));
            }
            ffi::codes_set_codes_assertion_failed_proc(Some(on_assertion));
        }
    });
    Ok(())
}

thread_local! {
    /// The first ecCodes assertion that failed on this thread since the last `take_assertion`.
    static ASSERTION: RefCell<Option<String>> = const { RefCell::new(None) };
}

extern "C" fn on_assertion(message: *const c_char) {
    let text = if message.is_null() {
        "an ecCodes assertion failed".to_string()
    } else {
        // SAFETY: ecCodes passes a NUL-terminated string valid for the call.
        unsafe { CStr::from_ptr(message) }
            .to_string_lossy()
            .trim_end()
            .to_string()
    };
    tracing::debug!(target: "eccodes", "{text}");
    // Nothing may unwind into C: `try_with` fails quietly while the thread is ending.
    let _ = ASSERTION.try_with(|a| {
        if let Ok(mut a) = a.try_borrow_mut() {
            a.get_or_insert(text);
        }
    });
}

/// The assertion ecCodes failed on this thread since the last call, if one did.
pub(crate) fn take_assertion() -> Option<String> {
    ASSERTION
        .try_with(|a| a.try_borrow_mut().ok().and_then(|mut a| a.take()))
        .ok()
        .flatten()
}

/// `f()`, unless ecCodes failed an assertion while computing it: see [`checked`].
pub(crate) fn guarded<T>(f: impl FnOnce() -> Result<T, GribError>) -> Result<T, GribError> {
    let _stale = take_assertion();
    checked(f())
}

/// `r`, unless ecCodes failed an assertion while computing it: then the message is damaged in a
/// way ecCodes does not check for, and nothing it answered can be trusted.
pub(crate) fn checked<T>(r: Result<T, GribError>) -> Result<T, GribError> {
    match take_assertion() {
        Some(a) => Err(GribError::Decode(format!(
            "the message is inconsistent ({a})"
        ))),
        None => r,
    }
}

extern "C" fn to_tracing(_c: *const ffi::CodesContext, level: c_int, message: *const c_char) {
    if message.is_null() {
        return;
    }
    // SAFETY: ecCodes passes a NUL-terminated string valid for the call.
    let text = unsafe { CStr::from_ptr(message) }.to_string_lossy();
    let level = match level {
        ffi::LOG_INFO => "info",
        ffi::LOG_WARNING => "warning",
        ffi::LOG_ERROR => "error",
        ffi::LOG_FATAL => "fatal",
        _ => "debug",
    };
    tracing::debug!(target: "eccodes", "ecCodes {level}: {}", text.trim_end());
}
