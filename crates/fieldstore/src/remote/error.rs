//! The remote layer's error type: every variant says which peer and what to do about it.

use crate::api::{ApiError, RemoteFailure};
use crate::error_kind::ErrorKind;

#[derive(Debug, thiserror::Error)]
pub enum RemoteError {
    #[error("cannot connect to fieldstore server {endpoint}: {source}")]
    Connect {
        endpoint: String,
        #[source]
        source: std::io::Error,
    },
    /// The server cannot take the address it was told to serve on.
    #[error("cannot listen on {endpoint}: {source}")]
    Listen {
        endpoint: String,
        #[source]
        source: std::io::Error,
    },
    #[error("connection to fieldstore server {endpoint} lost during {during}: {detail}")]
    ConnectionLost {
        endpoint: String,
        during: &'static str,
        detail: String,
    },
    #[error("fieldstore server {endpoint} refused the connection: {message}")]
    Refused {
        endpoint: String,
        message: String,
        kind: ErrorKind,
    },
    #[error("fieldstore server {endpoint}: {message}")]
    Server {
        endpoint: String,
        message: String,
        /// The kind of the server-side error.
        kind: ErrorKind,
    },
    #[error("fieldstore server {endpoint} broke the protocol: {detail}")]
    Protocol { endpoint: String, detail: String },

    // Frame decoding: what a peer sent cannot be a frame. The connection is closed.
    #[error("not a fieldstore frame: magic {found:02x?} (expected \"FSTO\"; is this port a fieldstore server?)")]
    BadMagic { found: [u8; 4] },
    #[error("protocol version {found} is not supported (this side speaks {min}..={max})")]
    UnsupportedVersion { found: u16, min: u16, max: u16 },
    #[error("unknown message type {0}")]
    UnknownType(u16),
    #[error("frame announces {length} payload bytes, more than the limit of {max}")]
    TooLarge { length: u64, max: u64 },
    #[error("frame checksum mismatch: computed {computed:08x}, frame says {found:08x}")]
    Checksum { computed: u32, found: u32 },
    #[error("frame end marker missing: found {found:02x?}")]
    BadEndMarker { found: [u8; 4] },
    #[error("the connection closed in the middle of a frame")]
    Truncated,
    #[error("the peer closed the connection")]
    Closed,
    #[error("malformed {what} payload: {detail}")]
    Payload { what: &'static str, detail: String },
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

impl RemoteError {
    pub(crate) fn payload(what: &'static str, detail: impl ToString) -> RemoteError {
        RemoteError::Payload {
            what,
            detail: detail.to_string(),
        }
    }

    pub fn kind(&self) -> ErrorKind {
        match self {
            RemoteError::Server { kind, .. } | RemoteError::Refused { kind, .. } => *kind,
            RemoteError::Listen { .. } => ErrorKind::Config,
            RemoteError::Connect { .. }
            | RemoteError::ConnectionLost { .. }
            | RemoteError::Truncated
            | RemoteError::Closed
            | RemoteError::Io(_) => ErrorKind::Remote,
            RemoteError::UnsupportedVersion { .. } => ErrorKind::Unsupported,
            RemoteError::TooLarge { .. } => ErrorKind::BadRequest,
            RemoteError::Protocol { .. }
            | RemoteError::BadMagic { .. }
            | RemoteError::UnknownType(_)
            | RemoteError::Checksum { .. }
            | RemoteError::BadEndMarker { .. }
            | RemoteError::Payload { .. } => ErrorKind::Remote,
        }
    }

    /// Whether the frame stream itself is broken (nothing more can be read from it).
    pub fn is_fatal_to_connection(&self) -> bool {
        !matches!(
            self,
            RemoteError::Payload { .. } | RemoteError::Server { .. }
        )
    }
}

/// Remote failures reach callers of the `Fdb` trait as `ApiError::Remote`, so the api layer needs no
/// knowledge of the network; "nothing matched" keeps its own variant so callers can tell it apart.
/// The kind goes along, so callers learn it without knowing this type.
impl From<RemoteError> for ApiError {
    fn from(e: RemoteError) -> ApiError {
        ApiError::Remote(RemoteFailure {
            kind: e.kind(),
            error: Box::new(e),
        })
    }
}
