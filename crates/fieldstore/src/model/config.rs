//! FDB5-compatible YAML configuration and its discovery (placeholder, being written).

#[derive(Debug, thiserror::Error)]
#[error("config error: {message}")]
pub struct ConfigError {
    pub message: String,
}
