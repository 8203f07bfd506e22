//! S3-compatible object storage (see docs/s3.md): a synchronous client, a catalogue
//! (`engine: s3`, docs/s3-format.md) and a store keeping fields' bytes in objects.

mod cache;
mod catalogue;
pub mod client;
pub mod credentials;
mod history;
mod layout;
mod maintenance;
pub mod store;
mod view;
mod writer;

pub use catalogue::{S3Catalogue, COMPACT_AFTER};
pub use client::{
    process_stats, ClientStats, Created, Multipart, ObjectList, ObjectMeta, Part, S3Client,
};
pub use store::S3Store;
