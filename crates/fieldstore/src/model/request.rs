//! The MARS request language (placeholder, being written).

#[derive(Debug, thiserror::Error)]
#[error("request error: {message}")]
pub struct RequestError {
    pub message: String,
}
