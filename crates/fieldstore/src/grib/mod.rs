//! GRIB: framing of byte streams into messages (ours, because ecCodes accepts garbage) and MARS key
//! extraction, decoding of values and geometry, parameter names and sample fields through ecCodes.

mod decode;
pub mod encode;
mod error;
mod ffi;
pub(crate) mod framing;
pub(crate) mod handle;
pub(crate) mod keys;
mod loader;
mod log;
pub mod native;
pub mod params;
pub mod sample;
mod sections;
pub(crate) use sections::ccsds_params_valid;

pub use decode::{Decoded, KeyValue, OwnedDecoded, GRID_KEYS};
pub use error::GribError;
pub use framing::{split_slice, GribMessage, MessageReader, Skipped, SliceMessages, PADDING};
pub use keys::{eccodes_mars_keys, keys_read_by_eccodes, keys_read_natively, mars_keys};
pub use loader::{prefer_eccodeslib, EccodesLoadError, Origin as EccodesOrigin, LIB_ENV};

/// Which ecCodes this process loaded, from where, and where it reads its definitions.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EccodesInfo {
    /// e.g. `2.50.0`.
    pub version: String,
    /// The library file.
    pub path: String,
    pub origin: EccodesOrigin,
    /// `codes_definition_path()`: `/MEMFS/definitions` for the eccodeslib wheel.
    pub definitions: Option<String>,
    pub samples: Option<String>,
}

impl std::fmt::Display for EccodesInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} at {} ({})", self.version, self.path, self.origin)?;
        if let Some(d) = &self.definitions {
            write!(f, ", definitions {d}")?;
        }
        Ok(())
    }
}

fn info_of(l: &ffi::Library) -> EccodesInfo {
    let v = l.api_version();
    EccodesInfo {
        version: format!("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100),
        path: l.path.clone(),
        origin: l.origin,
        definitions: l.definition_path(),
        samples: l.samples_path(),
    }
}

/// The ecCodes in use, loading it now if nothing in this process has needed it yet.
pub fn eccodes() -> Result<EccodesInfo, GribError> {
    Ok(info_of(ffi::library()?))
}

/// The ecCodes in use if this process has loaded it (or tried to), without loading it: a process
/// that only reads or lists never does.
pub fn eccodes_if_loaded() -> Option<Result<EccodesInfo, GribError>> {
    ffi::loaded().map(|r| r.map(info_of).map_err(GribError::from))
}

/// The ecCodes version in use, e.g. `2.50.0` (loading it), or why there is none.
pub fn eccodes_version() -> String {
    match eccodes() {
        Ok(i) => i.version,
        Err(e) => format!("not available: {e}"),
    }
}
