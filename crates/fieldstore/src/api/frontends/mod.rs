//! Frontends that compose other stores: each holds children (`Arc<dyn Fdb>`, of any type) and
//! decides, from the field's or the request's metadata, which of them a call goes to.

pub mod diagnostics;
pub mod dist;
pub mod filter;
mod merged;
pub mod mirror;
pub mod select;
pub mod selection;

use super::element::AxesMap;
use super::error::ApiError;
use crate::grib;
use crate::model::Key;

pub use diagnostics::DiagnosticsFdb;
pub use dist::DistFdb;
pub use filter::FilterFdb;
pub use mirror::MirrorFdb;
pub use select::SelectFdb;
pub use selection::{Canon, Selection};

/// The field's own key: the one given, or the MARS keys of the GRIB message.
pub(crate) fn field_key(key: Option<&Key>, data: &[u8]) -> Result<Key, ApiError> {
    match key {
        Some(k) => Ok(k.clone()),
        None => Ok(grib::mars_keys(data)?),
    }
}

pub(crate) fn merge_axes(into: &mut AxesMap, from: AxesMap) {
    for (k, v) in from {
        into.entry(k).or_default().extend(v);
    }
}

/// One error out of several children's, naming each child.
pub(crate) fn combine_errors(what: &str, errors: Vec<(String, ApiError)>) -> ApiError {
    // The children's kind when they agree; otherwise the first child's says the most.
    let kind = errors
        .first()
        .map_or(crate::ErrorKind::Internal, |(_, e)| e.kind());
    ApiError::Children {
        summary: format!(
            "{what} failed on {} of the children: {}",
            errors.len(),
            errors
                .iter()
                .map(|(n, e)| format!("[{n}] {e}"))
                .collect::<Vec<_>>()
                .join("; ")
        ),
        kind,
    }
}
