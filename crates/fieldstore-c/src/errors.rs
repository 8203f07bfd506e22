//! FDB5's error codes, the per-thread message behind them, the failure handler, and the guard
//! every entry point runs in (no panic crosses into C).

use std::any::Any;
use std::cell::RefCell;
use std::ffi::{c_char, c_int, c_void, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Mutex, OnceLock};

use fieldstore::api::{ApiError, ArchiveError};
use fieldstore::error_kind::full_message;
use fieldstore::model::ModelError;
use fieldstore::ErrorKind;

pub const FDB_SUCCESS: c_int = 0;
pub const FDB_ERROR_GENERAL_EXCEPTION: c_int = 1;
pub const FDB_ERROR_UNKNOWN_EXCEPTION: c_int = 2;
pub const FDB_ITERATION_COMPLETE: c_int = 3;

/// Everything an entry point can fail with; its message is what `fdb_error_string` returns.
#[derive(Debug, thiserror::Error)]
pub enum CError {
    #[error("{0} is NULL")]
    Null(&'static str),
    #[error("{0} is not valid UTF-8")]
    Utf8(&'static str),
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Api(#[from] ApiError),
    #[error(transparent)]
    Archive(#[from] ArchiveError),
    #[error(transparent)]
    Model(#[from] ModelError),
}

pub type Result<T> = std::result::Result<T, CError>;

impl CError {
    /// The library's kind name (`fieldstore_error_kind`): a caller's bad argument is a bad
    /// request.
    pub fn kind(&self) -> ErrorKind {
        match self {
            CError::Null(_) | CError::Utf8(_) | CError::Invalid(_) => ErrorKind::BadRequest,
            CError::Api(e) => e.kind(),
            CError::Archive(e) => e.kind(),
            CError::Model(e) => e.kind(),
        }
    }
}

/// Called on every failure with the caller's context, as FDB5 does.
pub type fdb_failure_handler_t =
    Option<unsafe extern "C" fn(context: *mut c_void, error_code: c_int)>;

struct Handler {
    f: unsafe extern "C" fn(*mut c_void, c_int),
    context: usize,
}

static HANDLER: Mutex<Option<Handler>> = Mutex::new(None);

thread_local! {
    static LAST: RefCell<CString> = RefCell::new(CString::default());
    static LAST_KIND: std::cell::Cell<Option<ErrorKind>> = const { std::cell::Cell::new(None) };
}

fn record(code: c_int, kind: ErrorKind, message: String) -> c_int {
    let c = CString::new(message.replace('\0', " ")).unwrap_or_default();
    LAST.with(|l| *l.borrow_mut() = c);
    LAST_KIND.with(|k| k.set(Some(kind)));
    let handler = HANDLER
        .lock()
        .ok()
        .and_then(|h| h.as_ref().map(|h| (h.f, h.context)));
    if let Some((f, context)) = handler {
        // SAFETY: the caller registered f to be called with its own context.
        unsafe { f(context as *mut c_void, code) };
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

/// Runs an entry point: its result as an FDB5 code, failures recorded for `fdb_error_string`.
pub fn guard(f: impl FnOnce() -> Result<c_int>) -> c_int {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(Ok(code)) => code,
        Ok(Err(e)) => record(FDB_ERROR_GENERAL_EXCEPTION, e.kind(), full_message(&e)),
        Err(p) => record(
            FDB_ERROR_UNKNOWN_EXCEPTION,
            ErrorKind::Internal,
            panic_message(p.as_ref()),
        ),
    }
}

/// `guard` for the common case of an entry point returning nothing on success.
pub fn run(f: impl FnOnce() -> Result<()>) -> c_int {
    guard(|| f().map(|()| FDB_SUCCESS))
}

/// The message for `err`: fixed text for success and end of iteration, else the full message
/// of this thread's last failure. The pointer stays valid until this thread's next failure.
#[no_mangle]
pub extern "C" fn fdb_error_string(err: c_int) -> *const c_char {
    match err {
        FDB_SUCCESS => c"Success".as_ptr(),
        FDB_ITERATION_COMPLETE => c"Iteration complete".as_ptr(),
        FDB_ERROR_GENERAL_EXCEPTION | FDB_ERROR_UNKNOWN_EXCEPTION => {
            LAST.with(|l| l.borrow().as_ptr())
        }
        _ => c"<unknown>".as_ptr(),
    }
}

/// The kind of this thread's last failure (fieldstore/fdb_subscribe.h), so a caller can tell a
/// wait that ran out (`timeout`) from a failure; "" before any.
#[no_mangle]
pub extern "C" fn fieldstore_error_kind() -> *const c_char {
    static NAMES: OnceLock<Vec<(ErrorKind, CString)>> = OnceLock::new();
    let found = catch_unwind(|| {
        let kind = LAST_KIND.with(std::cell::Cell::get)?;
        let names = NAMES.get_or_init(|| {
            ErrorKind::ALL
                .iter()
                .map(|k| (*k, CString::new(k.as_str()).unwrap_or_default()))
                .collect()
        });
        names
            .iter()
            .find(|(k, _)| *k == kind)
            .map(|(_, n)| n.as_ptr())
    });
    match found {
        Ok(Some(p)) => p,
        _ => c"".as_ptr(),
    }
}

/// Sets (or with a NULL handler, clears) the process-wide failure callback.
#[no_mangle]
pub extern "C" fn fdb_set_failure_handler(
    handler: fdb_failure_handler_t,
    context: *mut c_void,
) -> c_int {
    run(|| {
        let mut h = HANDLER
            .lock()
            .map_err(|_| CError::Invalid("the failure handler lock is poisoned".into()))?;
        *h = handler.map(|f| Handler {
            f,
            context: context as usize,
        });
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::CStr;

    #[test]
    fn failures_and_panics_become_codes_with_messages() {
        let code = run(|| Err(CError::Null("fdb")));
        assert_eq!(code, FDB_ERROR_GENERAL_EXCEPTION);
        let msg = unsafe { CStr::from_ptr(fdb_error_string(code)) };
        assert_eq!(msg.to_str().unwrap(), "fdb is NULL");
        let code = run(|| panic!("boom"));
        assert_eq!(code, FDB_ERROR_UNKNOWN_EXCEPTION);
        let msg = unsafe { CStr::from_ptr(fdb_error_string(code)) };
        assert!(msg.to_str().unwrap().contains("boom"));
        let ok = unsafe { CStr::from_ptr(fdb_error_string(FDB_SUCCESS)) };
        assert_eq!(ok.to_str().unwrap(), "Success");
    }

    /// A store's refusal of one message was reported as only "message 1 at offset 0", without
    /// the reason the CLI prints under it.
    #[test]
    fn messages_carry_their_causes() {
        let cause = ApiError::Invalid("no schema rule matches {levtype=sfc}".into());
        let code = run(|| {
            Err(CError::Archive(ArchiveError::Message {
                source_name: "data".into(),
                message: 1,
                offset: 0,
                cause: Box::new(cause),
            }))
        });
        let msg = unsafe { CStr::from_ptr(fdb_error_string(code)) };
        assert_eq!(
            msg.to_str().unwrap(),
            "data: message 1 at offset 0: no schema rule matches {levtype=sfc}"
        );
    }
}
