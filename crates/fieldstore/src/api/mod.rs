//! The Fdb interface every frontend implements, and the frontends built from a config.

pub mod archiver;
pub mod element;
pub mod error;
pub mod fdb;
pub mod frontends;
pub mod local;
#[cfg(test)]
pub(crate) mod testing;

pub use archiver::{ArchiveError, ArchiveSummary, Archiver, MessageProgress};
pub use element::{
    compare_values, sorted_axes, sorted_values, AxesMap, ControlAction, ControlIdentifier,
    ListElement, ListOptions, Location,
};
pub use error::ApiError;
pub use fdb::Fdb;
pub use local::LocalFdb;
