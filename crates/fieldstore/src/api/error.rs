//! The api layer's error type.

use std::fmt;

use super::operation::Operation;
use crate::error_kind::ErrorKind;
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
    #[error(transparent)]
    Extract(#[from] crate::extract::ExtractError),
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
    /// A flush of this database failed earlier in this handle's life: the fields of that flush
    /// were dropped unseen, and whichever thread archived them learns it here.
    #[error("an earlier flush of database {db} through this handle failed ({detail}): the fields archived into it before that flush were not stored, and this handle takes no more for it (open a new handle and archive them again)")]
    FlushFailed { db: String, detail: String },
    /// The database was wiped (by this handle or another) while this handle held fields
    /// archived into it but not yet flushed: they went with it.
    #[error("database {db} was wiped while this handle had unflushed fields in it: they were not stored (archive them again to store them in the new database)")]
    Wiped { db: String },
    /// A failure talking to a fieldstore server, boxed so this layer knows nothing of the network
    /// code above it (`fieldstore::remote::RemoteError` inside).
    #[error(transparent)]
    Remote(RemoteFailure),
    /// Several children of a frontend failed; `kind` is theirs when they agree (so a lock or a
    /// missing field keeps its kind through mirror, dist and select), else the first child's.
    #[error("{summary}")]
    Children { summary: String, kind: ErrorKind },
    /// The frontend neither implements the operation nor forwards it to a child.
    #[error("{frontend} does not support {op}")]
    Unsupported { op: Operation, frontend: String },
    /// `retrieve --wait` ran out of time: which fields never came.
    #[error(
        "waited {waited}: {missing} of the {total} fields requested were not flushed: {names}"
    )]
    WaitTimedOut {
        waited: String,
        missing: usize,
        total: usize,
        names: String,
    },
    /// Moving databases between roots is a local toc store's (docs/tiers.md).
    #[error("{frontend} cannot move databases between roots: {why}")]
    MoveUnsupported { frontend: String, why: String },
    /// Converting databases between formats is a local toc store's (docs/fdb5-format.md).
    #[error("{frontend} cannot convert databases between formats: {why}")]
    ConvertUnsupported { frontend: String, why: String },
    /// `check` reads database directories: a local toc store's.
    #[error("{frontend} cannot check databases for files their journal does not name: run `fieldstore check` with a config whose databases are local toc directories (on the server's machine for a remote store)")]
    CheckUnsupported { frontend: String },
}

impl ApiError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            ApiError::Model(e) => e.kind(),
            ApiError::Storage(e) => e.kind(),
            ApiError::Grib(e) => e.kind(),
            ApiError::Extract(e) => e.kind(),
            ApiError::Config(_) | ApiError::NoWritableRoot { .. } => ErrorKind::Config,
            ApiError::NothingMatched(_) => ErrorKind::NotFound,
            ApiError::KeyMismatch { .. } | ApiError::Invalid(_) => ErrorKind::BadRequest,
            ApiError::Locked { .. } => ErrorKind::Locked,
            ApiError::FlushFailed { .. } => ErrorKind::Io,
            ApiError::Wiped { .. } => ErrorKind::NotFound,
            ApiError::Remote(r) => r.kind,
            ApiError::Unsupported { .. }
            | ApiError::MoveUnsupported { .. }
            | ApiError::ConvertUnsupported { .. } => ErrorKind::Unsupported,
            ApiError::CheckUnsupported { .. } => ErrorKind::Unsupported,
            ApiError::Children { kind, .. } => *kind,
            ApiError::WaitTimedOut { .. } => ErrorKind::Timeout,
        }
    }
}

/// A failure of the remote layer, boxed so this layer knows nothing of the network code above it
/// (`fieldstore::remote::RemoteError` inside), with the kind that error reported, which for a
/// server's answer is the kind of the server-side error.
#[derive(Debug)]
pub struct RemoteFailure {
    pub kind: ErrorKind,
    pub error: Box<dyn std::error::Error + Send + Sync>,
}

impl fmt::Display for RemoteFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for RemoteFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::request::parse_request;
    use crate::model::Key;

    /// A representative error of each layer, and the kind a caller sees.
    #[test]
    fn errors_report_their_kind() {
        let io = |k: std::io::ErrorKind| StorageError::Io {
            op: "write",
            path: "/x".into(),
            source: std::io::Error::from(k),
        };
        let table: Vec<(ApiError, ErrorKind)> = vec![
            (
                ApiError::NothingMatched("no database".into()),
                ErrorKind::NotFound,
            ),
            (ApiError::Invalid("bad".into()), ErrorKind::BadRequest),
            (
                ModelError::from(parse_request("class=").unwrap_err()).into(),
                ErrorKind::BadRequest,
            ),
            (
                ModelError::from(Key::parse("=x").unwrap_err()).into(),
                ErrorKind::BadRequest,
            ),
            (
                ModelError::from(crate::model::schema::SchemaError::Read {
                    path: "s".into(),
                    reason: "gone".into(),
                })
                .into(),
                ErrorKind::Schema,
            ),
            (
                ModelError::from(crate::model::config::ConfigError {
                    origin: "f".into(),
                    path: String::new(),
                    message: "m".into(),
                })
                .into(),
                ErrorKind::Config,
            ),
            (ApiError::Config("no roots".into()), ErrorKind::Config),
            (
                ApiError::Locked {
                    db: "d".into(),
                    action: "wipe".into(),
                },
                ErrorKind::Locked,
            ),
            (io(std::io::ErrorKind::Other).into(), ErrorKind::Io),
            (
                io(std::io::ErrorKind::PermissionDenied).into(),
                ErrorKind::Permission,
            ),
            (io(std::io::ErrorKind::StorageFull).into(), ErrorKind::Full),
            (
                StorageError::Corrupt {
                    path: "/x/toc".into(),
                    offset: 8,
                    detail: "bad".into(),
                }
                .into(),
                ErrorKind::Corrupt,
            ),
            (
                GribError::NotGrib {
                    source_name: "f".into(),
                    len: 3,
                }
                .into(),
                ErrorKind::BadRequest,
            ),
            (
                ApiError::Unsupported {
                    op: Operation::Compact,
                    frontend: "x".into(),
                },
                ErrorKind::Unsupported,
            ),
            (
                ApiError::Remote(RemoteFailure {
                    kind: ErrorKind::Locked,
                    error: "server said locked".into(),
                }),
                ErrorKind::Locked,
            ),
        ];
        for (e, kind) in table {
            assert_eq!(e.kind(), kind, "{e}");
        }
    }
}
