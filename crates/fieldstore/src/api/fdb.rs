//! The one interface every frontend implements (local, select, dist, mirror, filter, remote...).

use std::ops::ControlFlow;

use super::element::{AxesMap, ControlAction, ControlIdentifier, ListElement, ListOptions};
use super::error::ApiError;
use super::operation::Operation;
use super::reader::DataReader;
use super::results::{
    CheckElement, CompactElement, ControlElement, ConvertElement, DumpElement, MoveElement,
    PurgeElement, StatsElement, WhereElement, WipeElement,
};
use super::subscribe::{Start, SubscriptionBox};
use crate::model::request::Request;
use crate::model::Key;
use crate::storage::toc::relocate::MoveOptions;

/// A listing that owns what it walks: it may outlive the handle that made it.
pub type ListIter = Box<dyn Iterator<Item = Result<ListElement, ApiError>> + Send + 'static>;

/// A field store. Methods take `&self` so one handle can be shared between threads; `flush`
/// makes durable and visible everything archived through this handle by any thread.
///
/// Forwarding: a frontend that wraps one child returns it from [`Fdb::forward_to`] and writes only
/// the methods it changes; every other method goes to the child. A store that forwards nowhere
/// (`None`, the default) must implement every method, or callers get an `Unsupported` error for
/// the ones it left out: never a panic.
pub trait Fdb: Send + Sync {
    /// A short name for messages and `fieldstore info`.
    fn name(&self) -> String;

    /// The child every method not written out goes to; `None` for a store of its own.
    fn forward_to(&self) -> Option<&dyn Fdb> {
        None
    }

    /// Stores one field. With a key, the bytes are stored under it (after checking it against the
    /// schema); without, the key is read from the GRIB message. Not visible until `flush`.
    fn archive(&self, key: Option<&Key>, data: &[u8]) -> Result<(), ApiError> {
        forward(self, Operation::Archive)?.archive(key, data)
    }

    /// Stores one GRIB field whose MARS keys the caller already read with ecCodes (so decoding can
    /// run on many threads): values are canonicalised as FDB5 does, not refused for their form.
    fn archive_grib(&self, mars_key: &Key, data: &[u8]) -> Result<(), ApiError> {
        forward(self, Operation::Archive)?.archive_grib(mars_key, data)
    }

    /// Indexes one GRIB field of a file adopted where it lies (`fieldstore adopt`): the catalogue
    /// points at `offset` of the store's `object` (see [`crate::storage::adopted_object`]) and no
    /// byte is copied; `data` is the field's bytes there, for its checksum. Files: local POSIX
    /// stores; S3 objects ([`Fdb::open_adoptable`]): local stores of files or S3.
    fn adopt_grib(
        &self,
        mars_key: &Key,
        object: &str,
        offset: u64,
        data: &[u8],
    ) -> Result<(), ApiError> {
        forward(self, Operation::Archive)?.adopt_grib(mars_key, object, offset, data)
    }

    /// Opens an object of an S3 bucket (`s3://BUCKET/KEY`) to be adopted where it lies: the
    /// store's name for it (with its size and ETag, see [`crate::storage::adopted`]) and its
    /// bytes, streamed, for the archiver to frame and index through [`Fdb::adopt_grib`]. Local
    /// stores of files or S3, whose handle knows which S3 server adopted objects are read from.
    fn open_adoptable(&self, uri: &str) -> Result<crate::storage::adopted::Adoptable, ApiError> {
        forward(self, Operation::Archive)?.open_adoptable(uri)
    }

    /// As [`Fdb::archive_grib`], for a field whose `length` bytes come from `src`: a server
    /// receiving a large field stores it as it arrives instead of holding it whole. Stores that
    /// can write in pieces (local POSIX) do; the default reads the field, then archives it
    /// through `archive_grib`, so a wrapper's own `archive_grib` (a filter...) is never bypassed.
    fn archive_grib_from(
        &self,
        mars_key: &Key,
        length: u64,
        src: &mut dyn std::io::Read,
    ) -> Result<(), ApiError> {
        let data = crate::storage::read_exactly(length, src)?;
        self.archive_grib(mars_key, &data)
    }

    /// As [`Fdb::archive_grib`] (`grib`, with a key) or [`Fdb::archive`], for bytes the caller
    /// hands over (a server's receive buffer): a store that keeps fields in memory keeps this
    /// buffer instead of copying it. `checksum`, when given, is the CRC-32C of `data`, taken as
    /// it arrived. The default archives a borrow of it, so a wrapper's own `archive` is never
    /// bypassed.
    fn archive_shared(
        &self,
        key: Option<&Key>,
        grib: bool,
        data: bytes::Bytes,
        checksum: Option<u32>,
    ) -> Result<(), ApiError> {
        let _ = checksum;
        match (key, grib) {
            (Some(k), true) => self.archive_grib(k, &data),
            (k, _) => self.archive(k, &data),
        }
    }

    /// Makes everything archived through this handle durable and visible to every reader.
    fn flush(&self) -> Result<(), ApiError> {
        forward(self, Operation::Flush)?.flush()
    }

    /// Every field the request names, newest copy of each, as one lazy byte stream that owns
    /// what it reads from (it may outlive the handle).
    fn retrieve(&self, request: &Request) -> Result<Box<dyn DataReader>, ApiError> {
        forward(self, Operation::Retrieve)?.retrieve(request)
    }

    /// The values at ranges of grid points (half-open, sorted, in the field's point order) of
    /// every field a request names, in retrieve's order (`api/extract.rs`). Frontends that
    /// keep fields where they lie override it to read only the bytes those points need; this
    /// default reads whole fields through `retrieve`.
    fn extract(
        &self,
        request: &Request,
        ranges: &[std::ops::Range<u64>],
    ) -> Result<Vec<super::extract::Extraction>, ApiError> {
        match self.forward_to() {
            Some(child) => child.extract(request, ranges),
            None => super::extract::extract_retrieved(self.retrieve(request)?, ranges),
        }
    }

    /// Adds extraction information to the fields a request names that were stored without it
    /// (`api/extract_index.rs`), where the data is: only a config whose databases are local
    /// directories can.
    fn extract_index(
        &self,
        request: &Request,
        options: &super::ExtractIndexOptions,
    ) -> Result<super::ExtractIndexReport, ApiError> {
        match self.forward_to() {
            Some(child) => child.extract_index(request, options),
            None => Err(ApiError::Invalid(format!(
                "extract-index runs on a config whose databases are local directories (point --config at one); {} is not",
                self.name()
            ))),
        }
    }

    /// Fields (or databases/indexes, by depth) matching a partial request, streamed.
    fn list(&self, request: &Request, options: ListOptions) -> Result<ListIter, ApiError> {
        forward(self, Operation::List)?.list(request, options)
    }

    /// The listing as `fieldstore list` prints it: one line per element (`{db}{index}{datum}`,
    /// [`crate::model::schema::SplitKey::porcelain`], then ` (masked)` for a replaced field
    /// when `mark_masked`, then a newline), handed to `line`; errors go to `on_error`, and the
    /// listing goes on unless either breaks. Made from [`Fdb::list`] here (so a frontend that
    /// changes `list` keeps its meaning); a local store prints straight from its index files.
    fn list_lines(
        &self,
        request: &Request,
        options: ListOptions,
        mark_masked: bool,
        line: &mut dyn FnMut(&[u8]) -> ControlFlow<()>,
        on_error: &mut dyn FnMut(ApiError) -> ControlFlow<()>,
    ) -> Result<(), ApiError> {
        let mut buf = Vec::with_capacity(256);
        for el in self.list(request, options)? {
            let flow = match el {
                Ok(el) => {
                    buf.clear();
                    buf.extend_from_slice(el.key.porcelain().as_bytes());
                    if mark_masked && el.masked {
                        buf.extend_from_slice(b" (masked)");
                    }
                    buf.push(b'\n');
                    line(&buf)
                }
                Err(e) => on_error(e),
            };
            if flow.is_break() {
                break;
            }
        }
        Ok(())
    }

    /// The fields matching a partial request as flushes make them visible, each once, whole
    /// flushes at a time, from `start` on (docs/subscribe.md).
    fn subscribe(&self, request: &Request, start: &Start) -> Result<SubscriptionBox, ApiError> {
        forward(self, Operation::Subscribe)?.subscribe(request, start)
    }

    /// As [`Fdb::subscribe`], with each notice carrying its field's bytes where the frontend can
    /// (a local store reads them from where the catalogue says; a server sends them with the
    /// notice, saving the consumer a request per field). Elsewhere `data` is `None` and the
    /// consumer retrieves; the default is plain `subscribe`, so wrappers keep their semantics.
    fn subscribe_with_data(
        &self,
        request: &Request,
        start: &Start,
    ) -> Result<SubscriptionBox, ApiError> {
        self.subscribe(request, start)
    }

    /// The full keys (canonical, as `list` shows them) of every field a retrieve of `request`
    /// names, in retrieve order: what `retrieve --wait` waits for.
    fn wanted_fields(&self, request: &Request) -> Result<Vec<Key>, ApiError> {
        forward(self, Operation::Retrieve)?.wanted_fields(request)
    }

    /// The values present for each keyword under a partial request.
    fn axes(&self, request: &Request, depth: u8) -> Result<AxesMap, ApiError> {
        forward(self, Operation::Axes)?.axes(request, depth)
    }

    /// The databases matching a partial request, and where they are.
    fn where_(&self, request: &Request) -> Result<Vec<WhereElement>, ApiError> {
        forward(self, Operation::Where)?.where_(request)
    }

    /// Deletes whole databases; with `doit == false` only reports what would go. Matching
    /// nothing is a `NothingMatched` error, so a mistyped request is never a silent success.
    fn wipe(&self, request: &Request, doit: bool) -> Result<Vec<WipeElement>, ApiError> {
        forward(self, Operation::Wipe)?.wipe(request, doit)
    }

    /// Deletes masked duplicates; with `doit == false` only reports what would go.
    fn purge(&self, request: &Request, doit: bool) -> Result<Vec<PurgeElement>, ApiError> {
        forward(self, Operation::Purge)?.purge(request, doit)
    }

    /// Statistics of matching databases.
    fn stats(&self, request: &Request) -> Result<Vec<StatsElement>, ApiError> {
        forward(self, Operation::Stats)?.stats(request)
    }

    /// The journal of matching databases.
    fn dump(&self, request: &Request) -> Result<Vec<DumpElement>, ApiError> {
        forward(self, Operation::Dump)?.dump(request)
    }

    /// Locks or unlocks operations (among [`Operation::CONTROLLABLE`]) on matching databases,
    /// or with `Status` only reports which are locked.
    fn control(
        &self,
        request: &Request,
        action: ControlAction,
        identifiers: &[ControlIdentifier],
    ) -> Result<Vec<ControlElement>, ApiError> {
        forward(self, Operation::Control)?.control(request, action, identifiers)
    }

    /// Merges the indexes of matching databases, so lookups stay fast however many flushes
    /// accumulated; returns what was done.
    fn compact(&self, request: &Request) -> Result<Vec<CompactElement>, ApiError> {
        forward(self, Operation::Compact)?.compact(request)
    }

    /// Why a request matched nothing, in words a user can act on (which keyword or value
    /// matched nothing, and what exists instead). Frontends that cannot tell say so.
    /// Converts whole databases matching `request` between fieldstore's on-disk format and
    /// FDB5's, in place (docs/fdb5-format.md).
    fn convert_databases(
        &self,
        request: &Request,
        to: crate::model::config::DbFormat,
        options: &crate::storage::toc::convert::ConvertOptions,
    ) -> Result<Vec<ConvertElement>, ApiError> {
        match self.forward_to() {
            Some(child) => child.convert_databases(request, to, options),
            None => Err(ApiError::ConvertUnsupported {
                frontend: self.name(),
                why: "convert runs on a config whose databases are local toc directories (point --config at one)".into(),
            }),
        }
    }

    /// Moves whole databases matching `request` to the configured root `dest` (docs/tiers.md).
    fn move_databases(
        &self,
        request: &Request,
        dest: &std::path::Path,
        options: &MoveOptions,
    ) -> Result<Vec<MoveElement>, ApiError> {
        match self.forward_to() {
            Some(child) => child.move_databases(request, dest, options),
            None => Err(ApiError::MoveUnsupported {
                frontend: self.name(),
                why: "move runs on a config whose databases are local toc directories (point --config at one)".into(),
            }),
        }
    }

    /// The files of matching databases (all, for an empty request) that no journal record
    /// names, and what each is: index files showing that a journal lost flushes it once held,
    /// and what flushes in progress or cut short leave (`fieldstore check`, docs/toc-format.md).
    fn check(&self, request: &Request) -> Result<Vec<CheckElement>, ApiError> {
        match self.forward_to() {
            Some(child) => child.check(request),
            None => Err(ApiError::CheckUnsupported {
                frontend: self.name(),
            }),
        }
    }

    fn explain_nothing(&self, request: &Request) -> String {
        match self.forward_to() {
            Some(child) => child.explain_nothing(request),
            None => format!("({} cannot say which keyword matched nothing)", self.name()),
        }
    }
}

/// The child an operation goes to, or why there is none.
fn forward<F: Fdb + ?Sized>(fdb: &F, op: Operation) -> Result<&dyn Fdb, ApiError> {
    fdb.forward_to().ok_or_else(|| ApiError::Unsupported {
        op,
        frontend: fdb.name(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_kind::ErrorKind;
    use crate::model::request::parse_request;

    /// Implements nothing and forwards nowhere.
    struct Bare;
    impl Fdb for Bare {
        fn name(&self) -> String {
            "bare".into()
        }
    }

    /// Forwards everything but `where_`.
    struct Wrapper(Bare);
    impl Fdb for Wrapper {
        fn name(&self) -> String {
            "wrapper".into()
        }
        fn forward_to(&self) -> Option<&dyn Fdb> {
            Some(&self.0)
        }
        fn where_(&self, _: &Request) -> Result<Vec<WhereElement>, ApiError> {
            Ok(vec![WhereElement {
                db: Key::new(),
                location: "here".into(),
                creator: None,
                format: None,
            }])
        }
    }

    #[test]
    fn unwritten_methods_forward_or_say_unsupported() {
        let r = parse_request("class=od").unwrap();
        let e = Bare.flush().unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Unsupported);
        assert_eq!(e.to_string(), "bare does not support flush");
        assert_eq!(Wrapper(Bare).where_(&r).unwrap()[0].location, "here");
        // Forwarded to the bare store, which names itself.
        let e = Wrapper(Bare).stats(&r).unwrap_err();
        assert_eq!(e.to_string(), "bare does not support stats");
        assert!(Wrapper(Bare)
            .explain_nothing(&r)
            .contains("bare cannot say"));
    }
}
