//! The composition root: builds the frontend tree a config describes.
//!
//! It sits above every layer (local, frontends, remote client) because a frontend's children may be
//! of any type; frontends themselves only ever see `Box<dyn Fdb>`.

use crate::api::{ApiError, Fdb, LocalFdb};
use crate::model::config::FdbConfig;
use crate::remote::RemoteFdb;

/// Where a remote config without `token:` takes its token from.
pub const TOKEN_ENV: &str = "FIELDSTORE_TOKEN";

/// Builds the store a config describes, recursively for frontends with children.
pub fn open(config: &FdbConfig) -> Result<Box<dyn Fdb>, ApiError> {
    match config {
        FdbConfig::Local(l) => Ok(Box::new(LocalFdb::new(l.clone())?)),
        FdbConfig::Remote { host, port, token } => {
            let token = token
                .clone()
                .or_else(|| std::env::var(TOKEN_ENV).ok().filter(|t| !t.is_empty()));
            Ok(Box::new(RemoteFdb::new(host, *port, token)))
        }
        other => Err(ApiError::Config(format!(
            "frontend type '{}' is not supported yet by this version",
            other.type_name()
        ))),
    }
}
