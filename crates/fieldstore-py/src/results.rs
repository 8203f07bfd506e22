//! The typed answers of where/wipe/purge/stats/dump/control/compact as read-only Python
//! objects: attributes named as in the library, `db` a dict in schema order, a repr that shows
//! them and `str()` the CLI's one-line form.

use fieldstore::api;
use fieldstore::model::Key;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::convert::from_json;

/// A key as a dict, keywords in schema order.
pub fn key_dict<'py>(py: Python<'py>, key: &Key) -> PyResult<Bound<'py, PyDict>> {
    crate::strings::dict_of(py, &[key])
}

fn key_text(key: &Key) -> String {
    key.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// One database and where it is (`FDB.where`).
#[pyclass(frozen, module = "fieldstore._native")]
pub struct WhereElement {
    /// The database key, schema order.
    #[pyo3(get)]
    db: Py<PyDict>,
    /// Where the database is (its directory, or `memory://...`).
    #[pyo3(get)]
    location: String,
    /// The server identity that created the database (docs/authorization.md); None for one
    /// made locally.
    #[pyo3(get)]
    creator: Option<String>,
    /// How the database is kept on disk (`fieldstore` or `fdb5`; None where there is no choice).
    #[pyo3(get)]
    format: Option<String>,
    text: String,
}

/// A database wiped, or that would be with `doit=True` (`FDB.wipe`).
#[pyclass(frozen, module = "fieldstore._native")]
pub struct WipeElement {
    #[pyo3(get)]
    db: Py<PyDict>,
    #[pyo3(get)]
    location: String,
    /// False for a dry run: nothing was deleted.
    #[pyo3(get)]
    doit: bool,
    /// Files or objects deleted (or that would be).
    #[pyo3(get)]
    removed: Vec<String>,
    text: String,
}

/// Masked duplicates purged from one database, or that would be (`FDB.purge`).
#[pyclass(frozen, module = "fieldstore._native")]
pub struct PurgeElement {
    #[pyo3(get)]
    db: Py<PyDict>,
    #[pyo3(get)]
    location: String,
    #[pyo3(get)]
    doit: bool,
    #[pyo3(get)]
    masked_fields: u64,
    #[pyo3(get)]
    indexes: Vec<String>,
    #[pyo3(get)]
    objects: Vec<String>,
    text: String,
}

/// Statistics of one database (`FDB.stats`).
#[pyclass(frozen, module = "fieldstore._native")]
pub struct StatsElement {
    #[pyo3(get)]
    db: Py<PyDict>,
    #[pyo3(get)]
    location: String,
    /// The lanes (dist/select children) the database was found in.
    #[pyo3(get)]
    lanes: Vec<String>,
    #[pyo3(get)]
    fields: u64,
    #[pyo3(get)]
    masked: u64,
    #[pyo3(get)]
    field_bytes: u64,
    #[pyo3(get)]
    masked_bytes: u64,
    #[pyo3(get)]
    index_files: u64,
    #[pyo3(get)]
    data_files: u64,
    #[pyo3(get)]
    data_bytes: u64,
    #[pyo3(get)]
    journal_records: u64,
    /// The server identity that created the database (docs/authorization.md); None for one
    /// made locally.
    #[pyo3(get)]
    creator: Option<String>,
    /// How the database is kept on disk (`fieldstore` or `fdb5`; None where there is no choice).
    #[pyo3(get)]
    format: Option<String>,
    text: String,
}

/// The journal of one database (`FDB.dump`): records as dicts, newest kept ones.
#[pyclass(frozen, module = "fieldstore._native")]
pub struct DumpElement {
    #[pyo3(get)]
    db: Py<PyDict>,
    #[pyo3(get)]
    location: String,
    #[pyo3(get)]
    journal_bytes: Option<u64>,
    #[pyo3(get)]
    total_records: u64,
    #[pyo3(get)]
    records: Py<PyAny>,
    /// The server identity that created the database (docs/authorization.md); None for one
    /// made locally.
    #[pyo3(get)]
    creator: Option<String>,
    text: String,
}

/// Which operations are locked on one database after `FDB.control`.
#[pyclass(frozen, module = "fieldstore._native")]
pub struct ControlElement {
    #[pyo3(get)]
    db: Py<PyDict>,
    #[pyo3(get)]
    location: String,
    /// Names of the locked operations ("archive", "retrieve", "list", "wipe").
    #[pyo3(get)]
    locked: Vec<String>,
    text: String,
}

/// What compacting one database did (`FDB.compact`).
#[pyclass(frozen, module = "fieldstore._native")]
pub struct CompactElement {
    #[pyo3(get)]
    db: Py<PyDict>,
    #[pyo3(get)]
    location: String,
    #[pyo3(get)]
    merged_indexes: u64,
    #[pyo3(get)]
    new_indexes: u64,
    #[pyo3(get)]
    entries: u64,
    text: String,
}

/// `__repr__` and `__str__` for each result class: the repr names the class and its database.
macro_rules! common {
    ($($t:ident),*) => {$(
        #[pymethods]
        impl $t {
            fn __repr__(&self) -> String {
                self.text.clone()
            }
            fn __str__(&self) -> String {
                self.text.clone()
            }
        }
    )*};
}
common!(
    WhereElement,
    WipeElement,
    PurgeElement,
    StatsElement,
    DumpElement,
    ControlElement,
    CompactElement
);

pub fn where_(py: Python<'_>, e: &api::WhereElement) -> PyResult<WhereElement> {
    Ok(WhereElement {
        db: key_dict(py, &e.db)?.unbind(),
        location: e.location.clone(),
        creator: e.creator.clone(),
        format: e.format.clone(),
        text: format!(
            "WhereElement({{{}}}, location={:?})",
            key_text(&e.db),
            e.location
        ),
    })
}

pub fn wipe(py: Python<'_>, e: &api::WipeElement) -> PyResult<WipeElement> {
    Ok(WipeElement {
        db: key_dict(py, &e.db)?.unbind(),
        location: e.location.clone(),
        doit: e.doit,
        removed: e.removed.clone(),
        text: format!(
            "WipeElement({{{}}}, location={:?}, doit={}, removed={})",
            key_text(&e.db),
            e.location,
            if e.doit { "True" } else { "False" },
            e.removed.len()
        ),
    })
}

pub fn purge(py: Python<'_>, e: &api::PurgeElement) -> PyResult<PurgeElement> {
    Ok(PurgeElement {
        db: key_dict(py, &e.db)?.unbind(),
        location: e.location.clone(),
        doit: e.doit,
        masked_fields: e.masked_fields,
        indexes: e.indexes.clone(),
        objects: e.objects.clone(),
        text: format!(
            "PurgeElement({{{}}}, location={:?}, doit={}, masked_fields={})",
            key_text(&e.db),
            e.location,
            if e.doit { "True" } else { "False" },
            e.masked_fields
        ),
    })
}

pub fn stats(py: Python<'_>, e: &api::StatsElement) -> PyResult<StatsElement> {
    Ok(StatsElement {
        db: key_dict(py, &e.db)?.unbind(),
        location: e.location.clone(),
        lanes: e.lanes.clone(),
        fields: e.fields,
        masked: e.masked,
        field_bytes: e.field_bytes,
        masked_bytes: e.masked_bytes,
        index_files: e.index_files,
        data_files: e.data_files,
        data_bytes: e.data_bytes,
        journal_records: e.journal_records,
        creator: e.creator.clone(),
        format: e.format.clone(),
        text: format!(
            "StatsElement({{{}}}, location={:?}, fields={}, masked={}, field_bytes={})",
            key_text(&e.db),
            e.location,
            e.fields,
            e.masked,
            e.field_bytes
        ),
    })
}

pub fn dump(py: Python<'_>, e: &api::DumpElement) -> PyResult<DumpElement> {
    let records = serde_json::to_value(&e.records).unwrap_or(serde_json::Value::Null);
    Ok(DumpElement {
        db: key_dict(py, &e.db)?.unbind(),
        location: e.location.clone(),
        journal_bytes: e.journal_bytes,
        total_records: e.total_records,
        records: from_json(py, &records)?.unbind(),
        creator: e.creator.clone(),
        text: e.to_string(),
    })
}

pub fn control(py: Python<'_>, e: &api::ControlElement) -> PyResult<ControlElement> {
    let locked: Vec<String> = e.locked.iter().map(|o| o.name().to_string()).collect();
    Ok(ControlElement {
        db: key_dict(py, &e.db)?.unbind(),
        location: e.location.clone(),
        text: format!(
            "ControlElement({{{}}}, location={:?}, locked={:?})",
            key_text(&e.db),
            e.location,
            locked
        ),
        locked,
    })
}

pub fn compact(py: Python<'_>, e: &api::CompactElement) -> PyResult<CompactElement> {
    Ok(CompactElement {
        db: key_dict(py, &e.db)?.unbind(),
        location: e.location.clone(),
        merged_indexes: e.merged_indexes,
        new_indexes: e.new_indexes,
        entries: e.entries,
        text: format!(
            "CompactElement({{{}}}, location={:?}, merged_indexes={}, new_indexes={}, entries={})",
            key_text(&e.db),
            e.location,
            e.merged_indexes,
            e.new_indexes,
            e.entries
        ),
    })
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<WhereElement>()?;
    m.add_class::<WipeElement>()?;
    m.add_class::<PurgeElement>()?;
    m.add_class::<StatsElement>()?;
    m.add_class::<DumpElement>()?;
    m.add_class::<ControlElement>()?;
    m.add_class::<CompactElement>()?;
    Ok(())
}
