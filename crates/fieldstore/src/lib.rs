//! fieldstore: a metadata-driven object store for meteorological fields.
//!
//! Layers, each depending only on those listed before it:
//! - [`error_kind`]: the kind of a failure, which every layer's error reports;
//! - [`checksum`]: CRC-32C, used by the on-disk formats and the wire protocol;
//! - [`grib`]: GRIB framing and MARS key extraction through ecCodes;
//! - [`model`]: keys, MARS requests, key types, the schema language and the FDB5 config;
//! - `storage` and `api` build on these; [`remote`] (server and client) sits above `api`, and
//!   [`open`] builds the frontend tree a config describes.

pub mod api;
pub mod checksum;
pub mod error_kind;
mod fill;
pub mod grib;
pub mod model;
pub mod open;
pub mod remote;
pub mod storage;

pub use error_kind::ErrorKind;
pub use open::open;
