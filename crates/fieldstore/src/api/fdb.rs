//! The one interface every frontend implements (local, select, dist, mirror, filter, remote...).

use std::io::Read;

use super::element::{AxesMap, ControlAction, ControlIdentifier, ListElement, ListOptions};
use super::error::ApiError;
use crate::model::request::Request;
use crate::model::Key;

pub type ListIter<'a> = Box<dyn Iterator<Item = Result<ListElement, ApiError>> + Send + 'a>;

/// A field store. Methods take `&self` so one handle can be shared between threads; `flush`
/// makes durable and visible everything archived through this handle by any thread.
pub trait Fdb: Send + Sync {
    /// A short name for messages and `fieldstore info`.
    fn name(&self) -> String;

    /// Stores one field. With a key, the bytes are stored under it (after checking it against the
    /// schema); without, the key is read from the GRIB message. Not visible until `flush`.
    fn archive(&self, key: Option<&Key>, data: &[u8]) -> Result<(), ApiError>;

    /// Stores one GRIB field whose MARS keys the caller already read with ecCodes (so decoding can
    /// run on many threads): values are canonicalised as FDB5 does, not refused for their form.
    fn archive_grib(&self, mars_key: &Key, data: &[u8]) -> Result<(), ApiError>;

    /// Makes everything archived through this handle durable and visible to every reader.
    fn flush(&self) -> Result<(), ApiError>;

    /// Every field the request names, newest copy of each, as one lazy byte stream.
    fn retrieve(&self, request: &Request) -> Result<Box<dyn Read + Send + '_>, ApiError>;

    /// Fields (or databases/indexes, by depth) matching a partial request, streamed.
    fn list(&self, request: &Request, options: ListOptions) -> Result<ListIter<'_>, ApiError>;

    /// The values present for each keyword under a partial request.
    fn axes(&self, request: &Request, depth: u8) -> Result<AxesMap, ApiError>;

    /// Locations (database directories) matching a partial request.
    fn where_(&self, request: &Request) -> Result<Vec<String>, ApiError>;

    /// Deletes whole databases; with `doit == false` only reports what would go.
    fn wipe(&self, request: &Request, doit: bool) -> Result<Vec<String>, ApiError>;

    /// Deletes masked duplicates; with `doit == false` only reports what would go.
    fn purge(&self, request: &Request, doit: bool) -> Result<Vec<String>, ApiError>;

    /// Statistics of matching databases, as printable lines.
    fn stats(&self, request: &Request) -> Result<Vec<String>, ApiError>;

    /// The journal of matching databases, as printable lines.
    fn dump(&self, request: &Request) -> Result<Vec<String>, ApiError>;

    /// Locks or unlocks actions on matching databases, or reports their status.
    fn control(
        &self,
        request: &Request,
        action: ControlAction,
        identifiers: &[ControlIdentifier],
    ) -> Result<Vec<String>, ApiError>;

    /// Merges the indexes of matching databases, so lookups stay fast however many flushes
    /// accumulated; returns what was done.
    fn compact(&self, request: &Request) -> Result<Vec<String>, ApiError>;

    /// Why a request matched nothing, in words a user can act on (which keyword or value
    /// matched nothing, and what exists instead). Frontends that cannot tell say so.
    fn explain_nothing(&self, request: &Request) -> String {
        let _ = request;
        format!("({} cannot say which keyword matched nothing)", self.name())
    }
}
