//! S3-compatible object storage: a catalogue (`engine: s3`) and a store (`store: s3`) over one
//! bucket and prefix (docs/s3-format.md describes the catalogue's objects).

mod cache;
mod catalogue;
mod layout;
mod view;

pub use catalogue::S3Catalogue;
