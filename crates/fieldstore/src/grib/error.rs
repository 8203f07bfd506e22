//! The GRIB layer's error type: every variant says which message and where.

use crate::error_kind::ErrorKind;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GribError {
    #[error("{source_name}: no GRIB message found ({len} bytes of other data)")]
    NotGrib { source_name: String, len: u64 },
    /// Data before the first message (FDB5 refuses such input too); data between messages is
    /// skipped, see `framing`.
    #[error(
        "{source_name}: {len} bytes of non-GRIB data at offset {offset}, before message {message}"
    )]
    Junk {
        source_name: String,
        message: usize,
        offset: u64,
        len: u64,
    },
    #[error("{source_name}: message {message} at offset {offset} is truncated: {expected} bytes announced, {got} present")]
    Truncated {
        source_name: String,
        message: usize,
        offset: u64,
        expected: u64,
        got: u64,
    },
    #[error("{source_name}: message {message} at offset {offset} does not end with '7777' (length {length}): corrupt or not GRIB")]
    BadEnd {
        source_name: String,
        message: usize,
        offset: u64,
        length: u64,
    },
    #[error("{source_name}: message {message} at offset {offset} has unsupported GRIB edition {edition}")]
    Edition {
        source_name: String,
        message: usize,
        offset: u64,
        edition: u8,
    },
    #[error("{source_name}: read error at offset {offset}: {reason}")]
    Io {
        source_name: String,
        offset: u64,
        reason: String,
    },
    #[error("expected one GRIB message, found {count}")]
    NotOneMessage { count: usize },
    /// Spherical harmonics and grids ecCodes has no geometry for have values but no points.
    #[error("no latitudes/longitudes for gridType '{grid_type}': {reason}")]
    NoGeometry { grid_type: String, reason: String },
    #[error("{what}: the buffer holds {got} values, the message has {expected}")]
    BufferSize {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    #[error("{asked} grid points per field is more than fieldstore makes (at most {max})")]
    TooManyPoints { asked: usize, max: usize },
    #[error("ecCodes cannot decode the message: {0}")]
    Decode(String),
    #[error("ecCodes: {0}")]
    EcCodes(String),
    /// ecCodes is loaded at run time, when first needed (writing, decoding, making fields).
    #[error(transparent)]
    NoEccodes(#[from] super::loader::EccodesLoadError),
}

impl GribError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            GribError::Io { .. } => ErrorKind::Io,
            GribError::EcCodes(_) => ErrorKind::Internal,
            // An installation to complete (the message names the package), like a config error.
            GribError::NoEccodes(_) => ErrorKind::Config,
            GribError::NoGeometry { .. } => ErrorKind::Unsupported,
            _ => ErrorKind::BadRequest,
        }
    }
}
