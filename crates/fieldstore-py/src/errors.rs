//! Rust errors → the exception classes of `fieldstore.errors`, chosen by `ErrorKind` only (never
//! by a layer's variants), with the whole cause chain in the message.

use std::error::Error as StdError;

use fieldstore::api::{ApiError, ArchiveError};
use fieldstore::error_kind::full_message;
use fieldstore::grib::GribError;
use fieldstore::model::config::ConfigError;
use fieldstore::model::ModelError;
use fieldstore::remote::RemoteError;
use fieldstore::storage::StorageError;
use fieldstore::ErrorKind;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;

/// An error that knows its kind: every layer's error of the library.
pub trait Kinded: StdError {
    fn error_kind(&self) -> ErrorKind;
}

impl Kinded for ApiError {
    fn error_kind(&self) -> ErrorKind {
        self.kind()
    }
}
impl Kinded for ArchiveError {
    fn error_kind(&self) -> ErrorKind {
        self.kind()
    }
}
impl Kinded for ModelError {
    fn error_kind(&self) -> ErrorKind {
        self.kind()
    }
}
impl Kinded for GribError {
    fn error_kind(&self) -> ErrorKind {
        self.kind()
    }
}
impl Kinded for fieldstore::extract::ExtractError {
    fn error_kind(&self) -> ErrorKind {
        self.kind()
    }
}
impl Kinded for ConfigError {
    fn error_kind(&self) -> ErrorKind {
        ErrorKind::Config
    }
}

/// The exception for an error of a given kind, built by `fieldstore.errors._from_kind`.
pub fn raise(kind: ErrorKind, message: String) -> PyErr {
    Python::attach(|py| {
        let made = py
            .import("fieldstore.errors")
            .and_then(|m| m.getattr("_from_kind"))
            .and_then(|f| f.call1((kind.as_str(), message.as_str())));
        match made {
            Ok(exc) => PyErr::from_value(exc),
            // The package is broken (errors.py missing): still say what went wrong.
            Err(_) => PyRuntimeError::new_err(format!("[{}] {message}", kind.as_str())),
        }
    })
}

/// `map_err(to_py)` for any library error.
pub fn to_py<E: Kinded>(e: E) -> PyErr {
    raise(e.error_kind(), full_message(&e))
}

/// An I/O error from a reader: a library error inside keeps its kind (a corrupt field stays
/// `CorruptError`), the rest are mapped as Python maps `OSError`s.
pub fn io_to_py(e: std::io::Error) -> PyErr {
    let kind = e
        .get_ref()
        .and_then(library_kind)
        .unwrap_or_else(|| io_kind(&e));
    raise(kind, full_message(&e))
}

/// The kind of a library error carried inside an `io::Error` (readers report through `Read`).
fn library_kind(inner: &(dyn StdError + Send + Sync + 'static)) -> Option<ErrorKind> {
    if let Some(e) = inner.downcast_ref::<ApiError>() {
        return Some(e.kind());
    }
    if let Some(e) = inner.downcast_ref::<StorageError>() {
        return Some(e.kind());
    }
    if let Some(e) = inner.downcast_ref::<RemoteError>() {
        return Some(e.kind());
    }
    if let Some(e) = inner.downcast_ref::<GribError>() {
        return Some(e.kind());
    }
    inner.downcast_ref::<ModelError>().map(ModelError::kind)
}

fn io_kind(e: &std::io::Error) -> ErrorKind {
    match e.kind() {
        std::io::ErrorKind::NotFound => ErrorKind::NotFound,
        std::io::ErrorKind::PermissionDenied => ErrorKind::Permission,
        std::io::ErrorKind::InvalidData => ErrorKind::Corrupt,
        std::io::ErrorKind::InvalidInput => ErrorKind::BadRequest,
        _ => ErrorKind::Io,
    }
}

/// A bad argument the library would call a bad request.
pub fn bad_request(message: impl Into<String>) -> PyErr {
    raise(ErrorKind::BadRequest, message.into())
}
