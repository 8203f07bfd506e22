//! Storage: where fields' bytes and their index live. The toc backend keeps one directory per
//! database on a POSIX filesystem (see `docs/toc-format.md`).

pub mod error;
pub mod toc;

pub use error::StorageError;
