//! The api layer's error type.

use crate::grib::GribError;
use crate::model::ModelError;
use crate::storage::StorageError;

#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(transparent)]
    Model(#[from] ModelError),
    #[error(transparent)]
    Storage(#[from] StorageError),
    #[error(transparent)]
    Grib(#[from] GribError),
    #[error("{0}")]
    Config(String),
    #[error("no writable roots available for database {db}. Configured roots: {roots}")]
    NoWritableRoot { db: String, roots: String },
    #[error("{0}")]
    NothingMatched(String),
    #[error("the key given for message {message} disagrees with the GRIB: {keyword}={given} given, the message has {keyword}={found}")]
    KeyMismatch {
        message: usize,
        keyword: String,
        given: String,
        found: String,
    },
    #[error("{action} is locked on database {db} (remove with `fieldstore control unlock`)")]
    Locked { db: String, action: String },
    #[error("{0}")]
    Invalid(String),
    /// A failure talking to a fieldstore server, boxed so this layer knows nothing of the network
    /// code above it (`fieldstore::remote::RemoteError` inside).
    #[error(transparent)]
    Remote(Box<dyn std::error::Error + Send + Sync>),
}
