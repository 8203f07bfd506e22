//! The storage layer's error type: every variant names the file or database concerned.

use std::path::PathBuf;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is corrupt at offset {offset}: {detail}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        detail: String,
    },
    #[error("{path}: format version {found} is not supported (this fieldstore reads version {supported})")]
    UnsupportedVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    #[error("{detail}")]
    Config { detail: String },
    #[error("no writable roots available for database {db}. Configured roots: [{roots}]")]
    NoWritableRoot { db: String, roots: String },
    #[error("database {db} belongs to uid {owner}; uid {user} may not {action} it")]
    PermissionDenied {
        db: PathBuf,
        owner: u32,
        user: u32,
        action: &'static str,
    },
}

impl StorageError {
    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> StorageError {
        let path = path.into();
        move |source| StorageError::Io { op, path, source }
    }
}
