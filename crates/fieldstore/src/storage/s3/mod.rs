//! S3 object storage (see docs/s3.md): a synchronous client, and a store keeping fields' bytes
//! in objects.

pub mod client;
pub mod credentials;
pub mod store;

pub use client::{ClientStats, Created, Multipart, ObjectList, ObjectMeta, Part, S3Client};
pub use store::S3Store;
