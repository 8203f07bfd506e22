//! The FDB5 schema language (placeholder, being written).

#[derive(Debug, thiserror::Error)]
#[error("schema error: {message}")]
pub struct SchemaError {
    pub message: String,
}
