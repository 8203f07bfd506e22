//! Extraction: decoding any range of a field's grid points without reading (or fetching) the
//! rest, as GribJump does for Polytope (`docs/extraction.md`).
//!
//! - [`ExtractInfo`] (`info.rs`): what one message's extraction needs, built once from its
//!   bytes (one full CCSDS decode for the RSI offsets), with a compact versioned encoding
//!   (`encoding.rs`) for catalogue entries and the wire;
//! - two phases (`range.rs`): [`ExtractInfo::plan`] says which byte ranges of the message a set
//!   of grid-point ranges needs, [`ExtractInfo::extract`] decodes them from those bytes;
//!   [`extract_message`] does both on a message in memory;
//! - the range decoders: simple packing and IEEE (`simple.rs`), CCSDS through libaec's range
//!   API (`aec.rs`), constant fields; any other packing through an ecCodes full decode;
//! - [`Grid`] (`geometry.rs`): points, nearest points and boxes as grid-point ranges.

// Lists of one grid-point range are the normal case here, not a mistaken `vec![0..n]`.
#![allow(clippy::single_range_in_vec_init)]

mod aec;
mod encoding;
mod error;
mod geometry;
mod info;
mod range;
mod simple;
#[cfg(test)]
mod tests;

pub use error::ExtractError;
pub use geometry::Grid;
pub use info::{BitmapInfo, CcsdsInfo, ExtractInfo, Packing, CHECKPOINT_INTERVAL};
pub use range::{extract_message, Fetched, RangeValues};

/// Fields smaller than this are read whole to extract from them: one small read costs no more
/// than reading their extraction information first, and catalogues stay small.
pub const INFO_MIN_LENGTH: usize = 16 << 10;

/// The extraction information a catalogue keeps for a field (encoded), taken when it is
/// archived or converted; `None` for small fields (`INFO_MIN_LENGTH`), what is not GRIB, and
/// messages it cannot read (those are still stored, and extracted whole).
pub fn catalogue_info(message: &[u8]) -> Option<std::sync::Arc<[u8]>> {
    if message.len() < INFO_MIN_LENGTH || !message.starts_with(b"GRIB") {
        return None;
    }
    ExtractInfo::build(message)
        .ok()
        .map(|i| std::sync::Arc::from(i.encode()))
}
