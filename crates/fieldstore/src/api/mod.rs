//! The Fdb interface every frontend implements, and the frontends built from a config.

pub mod element;
pub mod error;
pub mod fdb;
pub mod frontends;
pub mod local;
pub mod operation;
pub mod reader;
pub mod results;
#[cfg(test)]
pub(crate) mod testing;

pub use element::{
    compare_values, sorted_axes, sorted_values, AxesMap, ControlAction, ControlIdentifier,
    ListElement, ListOptions, Location,
};
pub use error::{ApiError, RemoteFailure};
pub use fdb::Fdb;
pub use local::LocalFdb;
pub use operation::Operation;
pub use reader::{DataReader, FieldSpan};
pub use results::{
    CompactElement, ControlElement, DumpElement, PurgeElement, StatsElement, WhereElement,
    WipeElement,
};
