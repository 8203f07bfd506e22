//! The model layer's error type. Each part reports its own detailed error (with file, line and
//! column where there is one); this enum gathers them so callers match on one type.

use super::config::ConfigError;
use super::key::KeyParseError;
use super::request::RequestError;
use super::schema::SchemaError;
use super::types::TypeError;
use crate::error_kind::ErrorKind;

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error(transparent)]
    Key(#[from] KeyParseError),
    #[error(transparent)]
    Request(#[from] RequestError),
    #[error(transparent)]
    Type(#[from] TypeError),
    #[error(transparent)]
    Schema(#[from] SchemaError),
    #[error(transparent)]
    Config(#[from] ConfigError),
}

impl ModelError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            ModelError::Key(_) | ModelError::Request(_) => ErrorKind::BadRequest,
            ModelError::Type(TypeError::UnknownType { .. }) => ErrorKind::Schema,
            ModelError::Type(_) => ErrorKind::BadRequest,
            ModelError::Schema(_) => ErrorKind::Schema,
            ModelError::Config(_) => ErrorKind::Config,
        }
    }
}
