//! Every call whose result type is changing (typed wipe/purge/stats/control/compact/where
//! elements; owned, seekable retrieve and list streams) goes through here, so the cases do
//! not change when the API does.

use std::io::Read;

use fieldstore::api::{
    ApiError, ControlAction, ControlIdentifier, Fdb, ListElement, ListOptions, PurgeElement,
    WhereElement, WipeElement,
};
use fieldstore::model::request::Request;
use fieldstore::ErrorKind;

/// The whole retrieve, read to the end.
pub fn retrieve_all(fdb: &dyn Fdb, request: &Request) -> Result<Vec<u8>, ApiError> {
    let mut out = Vec::new();
    fdb.retrieve(request)?
        .read_to_end(&mut out)
        .map_err(from_io)?;
    Ok(out)
}

/// The api error a stream read carried, or the I/O error itself.
fn from_io(e: std::io::Error) -> ApiError {
    if e.get_ref().is_some_and(|i| i.is::<ApiError>()) {
        if let Some(inner) = e.into_inner() {
            if let Ok(api) = inner.downcast::<ApiError>() {
                return *api;
            }
        }
        unreachable!("checked above");
    }
    ApiError::Invalid(format!("reading the retrieve stream: {e}"))
}

/// Reads a retrieve in `chunk`-byte reads, handing each to `each`; returns the total.
pub fn retrieve_chunked(
    fdb: &dyn Fdb,
    request: &Request,
    chunk: usize,
    mut each: impl FnMut(&[u8]),
) -> Result<u64, ApiError> {
    let mut stream = fdb.retrieve(request)?;
    let mut buf = vec![0u8; chunk];
    let mut total = 0u64;
    loop {
        let n = stream.read(&mut buf).map_err(from_io)?;
        if n == 0 {
            return Ok(total);
        }
        total += n as u64;
        each(&buf[..n]);
    }
}

pub fn list(
    fdb: &dyn Fdb,
    request: &Request,
    depth: u8,
    include_masked: bool,
) -> Result<Vec<ListElement>, ApiError> {
    fdb.list(
        request,
        ListOptions {
            include_masked,
            depth,
        },
    )?
    .collect()
}

/// The visible fields' keys as `db,index,datum` text, sorted.
pub fn listed_keys(fdb: &dyn Fdb, request: &Request) -> Vec<String> {
    let mut keys: Vec<String> = list(fdb, request, 3, false)
        .unwrap_or_else(|e| panic!("list {request}: {e}"))
        .iter()
        .map(full_key)
        .collect();
    keys.sort();
    keys
}

/// A listed element's whole key as one `k=v,...` text in schema order.
pub fn full_key(e: &ListElement) -> String {
    [&e.key.db, &e.key.index, &e.key.datum]
        .iter()
        .flat_map(|k| k.iter())
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The databases wiped (or that would be); an error if nothing matched.
pub fn wipe(fdb: &dyn Fdb, request: &Request, doit: bool) -> Result<Vec<WipeElement>, ApiError> {
    fdb.wipe(request, doit)
}

pub fn purge(fdb: &dyn Fdb, request: &Request, doit: bool) -> Result<Vec<PurgeElement>, ApiError> {
    fdb.purge(request, doit)
}

pub fn compact(fdb: &dyn Fdb, request: &Request) -> Result<(), ApiError> {
    fdb.compact(request).map(|_| ())
}

pub fn where_(fdb: &dyn Fdb, request: &Request) -> Result<Vec<WhereElement>, ApiError> {
    fdb.where_(request)
}

pub fn control(
    fdb: &dyn Fdb,
    request: &Request,
    action: ControlAction,
    ids: &[ControlIdentifier],
) -> Result<(), ApiError> {
    fdb.control(request, action, ids).map(|_| ())
}

/// `(fields, masked)` summed over the databases stats reports.
pub fn stats_counts(fdb: &dyn Fdb, request: &Request) -> Result<(u64, u64), ApiError> {
    Ok(fdb
        .stats(request)?
        .iter()
        .fold((0, 0), |(f, m), e| (f + e.fields, m + e.masked)))
}

/// The error kinds the cases tell apart, from the stable kind every error carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    NotFound,
    Locked,
    Other,
}

pub fn kind(e: &ApiError) -> Kind {
    match e.kind() {
        ErrorKind::NotFound => Kind::NotFound,
        ErrorKind::Locked => Kind::Locked,
        _ => Kind::Other,
    }
}
