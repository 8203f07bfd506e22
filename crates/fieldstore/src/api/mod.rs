//! The Fdb interface every frontend implements, and the frontends built from a config.

pub(crate) mod archiver;
pub(crate) mod element;
pub(crate) mod error;
mod extract;
mod extract_index;
pub mod extract_json;
pub(crate) mod fdb;
pub(crate) mod feed;
pub mod frontends;
pub mod lifecycle;
mod listing;
pub(crate) mod local;
pub(crate) mod operation;
pub(crate) mod reader;
pub(crate) mod results;
pub(crate) mod subscribe;
#[cfg(test)]
pub(crate) mod testing;
pub(crate) mod wait;

pub use archiver::{ArchiveError, ArchiveSummary, Archiver, MessageProgress};
pub use element::{
    compare_values, sorted_axes, sorted_values, AxesMap, ControlAction, ControlIdentifier,
    ListElement, ListOptions, Location, AXES_AS_FDB5,
};
pub use error::{ApiError, RemoteFailure};
pub use extract::{extract_selections, Extraction, SelectedField, SelectedValues, Selection};
pub use extract_index::{ExtractIndexOptions, ExtractIndexProgress, ExtractIndexReport};
pub use fdb::{Fdb, ListIter};
pub use local::{Clock, LocalFdb};
pub use operation::{Operation, UnknownOperation};
pub use reader::{DataReader, FieldSpan};
pub use results::{
    CheckElement, CompactElement, ControlElement, ConvertElement, DumpElement, DumpRecord,
    MoveElement, PurgeElement, StatsElement, WhereElement, WipeElement,
};
pub use subscribe::{Cursor, Notice, Position, Start, Subscription, SubscriptionBox};
pub use wait::RetrieveWait;
