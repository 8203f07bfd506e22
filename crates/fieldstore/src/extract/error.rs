//! The extraction layer's error type.

use std::ops::Range;

use crate::error_kind::ErrorKind;
use crate::grib::native::SectionError;
use crate::grib::GribError;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExtractError {
    /// The message's sections cannot be read.
    #[error(transparent)]
    Section(#[from] SectionError),
    /// The message's sections read, but do not hold what they announce.
    #[error("GRIB message at byte {offset}: {reason}")]
    Corrupt { offset: u64, reason: String },
    /// A requested range is not a sorted, non-overlapping, non-empty range of the field's points.
    #[error("range {index} ({}..{}): {reason}", range.start, range.end)]
    BadRange {
        index: usize,
        range: Range<u64>,
        reason: String,
    },
    /// `extract` was not given the bytes `plan` asked for.
    #[error("bytes {}..{} of the message were not fetched", range.start, range.end)]
    NotFetched { range: Range<u64> },
    /// Encoded extraction information that cannot be decoded.
    #[error("extraction information, byte {offset}: {reason}")]
    Encoding { offset: u64, reason: String },
    /// libaec refused the CCSDS data.
    #[error("CCSDS data: libaec {call} failed ({code})")]
    Aec { call: &'static str, code: i32 },
    /// The ecCodes fallback (full decode) failed.
    #[error(transparent)]
    EcCodes(#[from] GribError),
    /// A grid (or scanning mode) the geometry does not handle.
    #[error("geometry: {0}")]
    Geometry(String),
}

impl ExtractError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            ExtractError::Section(e) => e.kind(),
            ExtractError::Corrupt { .. }
            | ExtractError::Encoding { .. }
            | ExtractError::Aec { .. } => ErrorKind::Corrupt,
            ExtractError::BadRange { .. } | ExtractError::NotFetched { .. } => {
                ErrorKind::BadRequest
            }
            ExtractError::EcCodes(e) => e.kind(),
            ExtractError::Geometry(_) => ErrorKind::Unsupported,
        }
    }

    pub(crate) fn corrupt(offset: u64, reason: impl Into<String>) -> ExtractError {
        ExtractError::Corrupt {
            offset,
            reason: reason.into(),
        }
    }
}
