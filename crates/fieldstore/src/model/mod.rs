//! The model layer: what a field key, a request, a schema and a config mean.
//! Knows nothing about storage.

pub mod config;
pub(crate) mod error;
pub(crate) mod key;
pub mod request;
pub mod schema;
pub(crate) mod step;
pub mod types;

pub use error::ModelError;
pub use key::{Atom, Key, KeyParseError};
