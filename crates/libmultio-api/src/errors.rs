//! MultIO's error codes, the text behind them, failure handlers, and the guard every entry point
//! runs in: no panic crosses into C, and a failure is a code, a string and a handler call, as in
//! MultIO (`wrapApiFunction` in its `multio_capi.cc`).

use std::any::Any;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CString};
use std::io::Write as _;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use fieldstore::pipeline::PipelineError;

pub const MULTIO_SUCCESS: c_int = 0;
/// What MultIO returns for its own errors (eckit exceptions); fieldstore returns it for every
/// failure it reports, so a caller that tests `!= MULTIO_SUCCESS` or `== 1` behaves the same.
pub const MULTIO_ERROR_ECKIT_EXCEPTION: c_int = 1;
pub const MULTIO_ERROR_GENERAL_EXCEPTION: c_int = 2;
/// An internal error (a panic caught at the boundary): please report.
pub const MULTIO_ERROR_UNKNOWN_EXCEPTION: c_int = 3;

/// Everything an entry point can fail with.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{0} is NULL")]
    Null(&'static str),
    #[error("{0} is not valid UTF-8")]
    Utf8(&'static str),
    #[error("{0}")]
    Invalid(String),
    /// A MultIO feature that needs MPI or I/O servers.
    #[error("{0}")]
    Unsupported(String),
    #[error(transparent)]
    Pipeline(#[from] PipelineError),
    /// Several plans failed on one message: each is named.
    #[error("{} of the plans failed: {}", .0.len(), join(.0))]
    Plans(Vec<PipelineError>),
}

fn join(errors: &[PipelineError]) -> String {
    errors
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

pub type Result<T> = std::result::Result<T, Error>;

/// `multio_failure_info_t`: the text of the last failure seen by one handle or configuration,
/// handed to its failure handler (`multio_error_string_info` reads it).
#[allow(non_camel_case_types)]
pub struct multio_failure_info_t {
    last: Mutex<CString>,
}

/// `void (*)(void* usercontext, int error_code, multio_failure_info_t* info)`
#[allow(non_camel_case_types)]
pub type multio_failure_handler_t =
    Option<unsafe extern "C" fn(*mut c_void, c_int, *mut multio_failure_info_t)>;

/// A handler and its context. Shared (an `Arc`) by a configuration, the handle made from it and
/// the metadata and data objects made from that handle, so an object that outlives its handle
/// never points at freed memory (MultIO's metadata keeps a raw pointer to its handle).
pub struct Failure {
    handler: Mutex<
        Option<(
            unsafe extern "C" fn(*mut c_void, c_int, *mut multio_failure_info_t),
            usize,
        )>,
    >,
    info: multio_failure_info_t,
}

pub type SharedFailure = Arc<Failure>;

impl Failure {
    pub fn new() -> SharedFailure {
        Arc::new(Failure {
            handler: Mutex::new(None),
            info: multio_failure_info_t {
                last: Mutex::new(CString::default()),
            },
        })
    }

    pub fn set(&self, handler: multio_failure_handler_t, context: *mut c_void) -> Result<()> {
        let mut h = self
            .handler
            .lock()
            .map_err(|_| Error::Invalid("the failure handler's lock is poisoned".into()))?;
        *h = handler.map(|f| (f, context as usize));
        Ok(())
    }
}

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
}

fn to_cstring(s: &str) -> CString {
    CString::new(s.replace('\0', " ")).unwrap_or_default()
}

/// Records a failure: this thread's last error, the object's info, then its handler if one is
/// set (called with no lock held, so it may call back into the library); without a handler the
/// message goes to standard error, as MultIO prints it.
fn record(code: c_int, message: String, failure: Option<SharedFailure>) -> c_int {
    LAST.with(|l| *l.borrow_mut() = to_cstring(&message));
    let mut called = false;
    if let Some(f) = &failure {
        if let Ok(mut last) = f.info.last.lock() {
            *last = to_cstring(&message);
        }
        let handler = f.handler.lock().ok().and_then(|h| *h);
        if let Some((handler, context)) = handler {
            let info = &f.info as *const multio_failure_info_t as *mut multio_failure_info_t;
            // SAFETY: the caller registered `handler` to be called with its own context; `info`
            // lives as long as `f`, which the caller's object keeps.
            unsafe { handler(context as *mut c_void, code, info) };
            called = true;
        }
    }
    if !called {
        // Not eprintln!, which panics when standard error cannot be written.
        let _ = writeln!(std::io::stderr(), "{message}");
    }
    code
}

fn panic_message(p: &(dyn Any + Send)) -> String {
    let what = p
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown cause".to_string());
    format!("internal error in fieldstore (please report): {what}")
}

/// Runs entry point `name`: success, or the failure recorded against `failure` (the handle's or
/// configuration's handler, when the object is known).
pub fn run(name: &str, failure: Option<SharedFailure>, f: impl FnOnce() -> Result<()>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(())) => MULTIO_SUCCESS,
        Ok(Err(e)) => record(
            MULTIO_ERROR_ECKIT_EXCEPTION,
            format!("fieldstore {name}: {e}"),
            failure,
        ),
        Err(p) => record(
            MULTIO_ERROR_UNKNOWN_EXCEPTION,
            format!("fieldstore {name}: {}", panic_message(p.as_ref())),
            failure,
        ),
    }
}

/// Text for `err`: fixed text for success, this thread's last failure for an error code.
#[no_mangle]
pub extern "C" fn multio_error_string(err: c_int) -> *const c_char {
    match err {
        MULTIO_SUCCESS => c"Success".as_ptr(),
        MULTIO_ERROR_ECKIT_EXCEPTION
        | MULTIO_ERROR_GENERAL_EXCEPTION
        | MULTIO_ERROR_UNKNOWN_EXCEPTION => LAST.with(|l| l.borrow().as_ptr()),
        _ => c"<unknown>".as_ptr(),
    }
}

/// Text for `err` from the info a failure handler was given (NULL: as `multio_error_string`).
/// The pointer stays valid until the next failure of the same handle or configuration.
///
/// # Safety
/// `info` is NULL or the pointer a failure handler was called with, whose object still exists.
#[no_mangle]
pub unsafe extern "C" fn multio_error_string_info(
    err: c_int,
    info: *mut multio_failure_info_t,
) -> *const c_char {
    if info.is_null() {
        return multio_error_string(err);
    }
    match err {
        MULTIO_SUCCESS => c"Success".as_ptr(),
        MULTIO_ERROR_ECKIT_EXCEPTION
        | MULTIO_ERROR_GENERAL_EXCEPTION
        | MULTIO_ERROR_UNKNOWN_EXCEPTION => {
            // SAFETY: the caller passes the info its handler was given (see above).
            let info = unsafe { &*info };
            match info.last.lock() {
                Ok(l) => l.as_ptr(),
                Err(_) => c"the failure info's lock is poisoned".as_ptr(),
            }
        }
        _ => c"<unknown>".as_ptr(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn failures_and_panics_become_codes_with_messages() {
        let code = run("multio_flush", None, || Err(Error::Null("mio")));
        assert_eq!(code, MULTIO_ERROR_ECKIT_EXCEPTION);
        let msg = unsafe { CStr::from_ptr(multio_error_string(code)) };
        assert_eq!(
            msg.to_str().unwrap(),
            "fieldstore multio_flush: mio is NULL"
        );
        let code = run("multio_flush", None, || panic!("boom"));
        assert_eq!(code, MULTIO_ERROR_UNKNOWN_EXCEPTION);
        let msg = unsafe { CStr::from_ptr(multio_error_string(code)) };
        assert!(msg.to_str().unwrap().contains("boom"));
        let ok = unsafe { CStr::from_ptr(multio_error_string(MULTIO_SUCCESS)) };
        assert_eq!(ok.to_str().unwrap(), "Success");
    }

    static SEEN: Mutex<Vec<(usize, c_int, String)>> = Mutex::new(Vec::new());

    unsafe extern "C" fn handler(ctx: *mut c_void, code: c_int, info: *mut multio_failure_info_t) {
        let text = unsafe { CStr::from_ptr(multio_error_string_info(code, info)) };
        SEEN.lock()
            .unwrap()
            .push((ctx as usize, code, text.to_string_lossy().into_owned()));
    }

    #[test]
    fn the_handler_gets_its_context_the_code_and_the_text() {
        let f = Failure::new();
        f.set(Some(handler), 42 as *mut c_void).unwrap();
        let code = run("multio_notify", Some(f.clone()), || {
            Err(Error::Invalid("bad".into()))
        });
        assert_eq!(code, MULTIO_ERROR_ECKIT_EXCEPTION);
        let seen = SEEN.lock().unwrap().clone();
        assert_eq!(
            seen,
            vec![(42, 1, "fieldstore multio_notify: bad".to_string())]
        );
    }
}
