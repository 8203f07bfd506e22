//! ecCodes' own log lines (`ECCODES ERROR : concept: no match ...`) go to `tracing` at debug
//! level instead of the process's stderr: a user (or a server's client) gets fieldstore's one
//! error naming what was wrong, and an operator still finds ecCodes' detail with debug logging.

use std::ffi::CStr;
use std::os::raw::{c_char, c_int};
use std::sync::Once;

use super::ffi;

/// Routes ecCodes' default context's log to `tracing`, once per process, before the first handle.
pub(crate) fn route() {
    static ROUTED: Once = Once::new();
    ROUTED.call_once(|| {
        // SAFETY: the default context lives for the process; the procedure is a plain function
        // that ecCodes calls with a NUL-terminated message (or null).
        unsafe {
            let c = ffi::codes_context_get_default();
            if !c.is_null() {
                ffi::codes_context_set_logging_proc(c, Some(to_tracing));
            }
        }
    });
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
