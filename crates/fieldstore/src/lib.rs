//! fieldstore: a metadata-driven object store for meteorological fields.
//!
//! Modules in layer order, each depending only on those listed before it (`docs/architecture.md`
//! walks through them):
//! - [`error_kind`]: the kind of a failure, which every layer's error reports;
//! - [`checksum`]: CRC-32C, used by the on-disk formats and the wire protocol;
//! - [`model`]: keys, MARS requests, key types, steps, the schema language and the FDB5 config;
//! - [`grib`]: GRIB framing and MARS key extraction through ecCodes (keys are `model` keys);
//! - [`extract`]: decoding any range of a field's grid points without reading the rest (GribJump's
//!   extraction), and the grid geometry that turns places into ranges;
//! - [`storage`]: the `Catalogue` and `Store` traits, the file-system seam, the toc + POSIX and
//!   memory backends;
//! - [`api`]: the `Fdb` trait, the local frontend over a catalogue and a store, the composing
//!   frontends and the library `Archiver`;
//! - [`remote`]: the wire protocol, the server (serving any `Fdb`) and the client frontend;
//! - [`open`](mod@open): builds the frontend tree a config describes;
//! - [`pipeline`]: MultIO plans (select, statistics, encode, sink) over fields, above the api.

pub mod error_kind;

pub mod checksum;
mod fill;

pub mod model;

pub mod grib;

pub mod extract;

pub mod storage;

pub mod api;

pub mod remote;

pub mod open;

pub mod pipeline;

pub use error_kind::ErrorKind;

/// The FDB5 release whose C API and tools fieldstore stands in for: what `fdb_version()` and
/// `fdb-info --version` report (legacy pyfdb requires >= 5.12.1). One constant, so the C library
/// and the tools never disagree.
pub const FDB5_API_LEVEL: &std::ffi::CStr = c"5.25.0";
pub use open::open;
