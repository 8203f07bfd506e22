//! Key types (placeholder, being written).

#[derive(Debug, thiserror::Error)]
#[error("type error: {message}")]
pub struct TypeError {
    pub message: String,
}
