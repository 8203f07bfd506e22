//! GRIB: framing of byte streams into messages (ours, because ecCodes accepts garbage) and MARS key
//! extraction, decoding of values and geometry, parameter names and sample fields through ecCodes.

mod decode;
pub mod encode;
mod error;
mod ffi;
pub(crate) mod framing;
pub(crate) mod handle;
pub(crate) mod keys;
mod log;
pub mod native;
pub mod params;
pub mod sample;
mod sections;

pub use decode::{Decoded, KeyValue, OwnedDecoded, GRID_KEYS};
pub use error::GribError;
pub use framing::{split_slice, GribMessage, MessageReader, Skipped, SliceMessages, PADDING};
pub use keys::{eccodes_mars_keys, mars_keys};

/// The ecCodes version linked, e.g. `2.28.0`.
pub fn eccodes_version() -> String {
    // SAFETY: a pure function of the library.
    let v = unsafe { ffi::codes_get_api_version() };
    format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100)
}
