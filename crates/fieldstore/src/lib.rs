//! fieldstore: a metadata-driven object store for meteorological fields.
//!
//! Layers, each depending only on those listed before it:
//! - [`grib`]: GRIB framing and MARS key extraction through ecCodes;
//! - [`model`]: keys, MARS requests, key types, the schema language and the FDB5 config;
//! - storage and api layers build on these.

pub mod api;
pub mod grib;
pub mod model;
pub mod open;
pub mod storage;

pub use open::open;
