//! `fieldstore.FDB`: one handle on the store a config describes, shareable between threads.
//! Every call doing I/O or ecCodes work releases the GIL.

use std::sync::Arc;

use fieldstore::api::{self, Archiver, ControlAction, ListOptions, Operation};
use fieldstore::model::request::Request;
use fieldstore::model::schema::Schema;
use fieldstore::model::types::Context;
use fieldstore::model::ModelError;
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyByteArray, PyBytes, PyDict, PyList, PyString};
use serde_json::Value;

use crate::convert::{self, from_json};
use crate::errors::{bad_request, to_py};
use crate::extract;
use crate::fdb_extract;
use crate::listing::ListIterator;
use crate::reader::Reader;
use crate::results;
use crate::subscription::{self, Subscription, WaitingReader};

static RESOLVER: fn(&str) -> Option<String> = fieldstore::grib::params::resolver;

/// A field store. `FDB()` finds the config as the `fieldstore` command does (FDB_CONFIG_FILE,
/// FDB_HOME..., else the embedded default); `FDB(dict)`, `FDB(yaml_text)` or `FDB(path)` name
/// one. Safe to share between threads; archived fields become visible on `flush()` (or when a
/// `with FDB(...) as fdb:` block ends without an exception).
#[pyclass(frozen, subclass, module = "fieldstore._native", name = "FDB")]
pub struct Fdb {
    inner: Arc<dyn api::Fdb>,
    /// The local schema to check archived keys against before anything is archived, when the
    /// config names a local store (a server checks its own).
    schema: Option<Arc<Schema>>,
    shown: Value,
}

/// `db` keys of typed results as a list of result objects.
fn list_of<'py, T, P: pyo3::PyClass + Into<pyo3::PyClassInitializer<P>>>(
    py: Python<'py>,
    items: &[T],
    f: fn(Python<'py>, &T) -> PyResult<P>,
) -> PyResult<Bound<'py, PyList>> {
    let objs = items
        .iter()
        .map(|i| Bound::new(py, f(py, i)?))
        .collect::<PyResult<Vec<_>>>()?;
    PyList::new(py, objs)
}

/// `f` over every database when the request is empty (the library wants database keywords for
/// stats, dump, purge and compact; a Python caller expects `fdb.stats()` to mean "all"), else
/// `f(request)`.
fn per_database<T>(
    fdb: &dyn api::Fdb,
    request: &Request,
    f: impl Fn(&Request) -> Result<Vec<T>, api::ApiError>,
) -> Result<Vec<T>, api::ApiError> {
    if !request.is_empty() {
        return f(request);
    }
    let mut out = Vec::new();
    for db in fdb.where_(request)? {
        let mut one = Request::default();
        for (k, v) in db.db.iter().filter(|(_, v)| !v.is_empty()) {
            one.set(k, vec![v.to_string()]);
        }
        out.extend(f(&one)?);
    }
    Ok(out)
}

fn depth(level: i64) -> PyResult<u8> {
    match level {
        1..=3 => Ok(level as u8),
        _ => Err(PyValueError::new_err(format!(
            "level must be 1 (databases), 2 (indexes) or 3 (fields), not {level}"
        ))),
    }
}

impl Fdb {
    /// `op` with the GIL released over the databases a request matches (every database without
    /// a request), each result turned into its Python class.
    fn over_databases<'py, T: Send, P: pyo3::PyClass + Into<pyo3::PyClassInitializer<P>>>(
        &self,
        py: Python<'py>,
        request: Option<&Bound<'_, PyAny>>,
        op: impl Fn(&dyn api::Fdb, &Request) -> Result<Vec<T>, api::ApiError> + Send + Sync,
        convert: fn(Python<'py>, &T) -> PyResult<P>,
    ) -> PyResult<Bound<'py, PyList>> {
        let request = convert::request(request)?;
        let fdb = &*self.inner;
        let found = py
            .detach(|| per_database(fdb, &request, |r| op(fdb, r)))
            .map_err(to_py)?;
        list_of(py, &found, convert)
    }
}

#[pymethods]
impl Fdb {
    #[new]
    #[pyo3(signature = (config = None))]
    fn new(py: Python<'_>, config: Option<&Bound<'_, PyAny>>) -> PyResult<Self> {
        let opened = convert::load_config(config)?;
        let cfg = opened.config;
        let (inner, schema) = py
            .detach(|| {
                let fdb = fieldstore::open(&cfg)?;
                Ok::<_, api::ApiError>((
                    fdb,
                    fieldstore::open::archive_schema(&cfg).unwrap_or(None),
                ))
            })
            .map_err(to_py)?;
        Ok(Fdb {
            inner: Arc::from(inner),
            schema: schema.map(Arc::new),
            shown: opened.shown,
        })
    }

    /// The config in use, as a dict (best effort: what was given, or the file found).
    #[getter]
    fn config<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        from_json(py, &self.shown)
    }

    /// The store's short name (its frontend type).
    #[getter]
    fn name(&self) -> String {
        self.inner.name()
    }

    /// Archives GRIB bytes (one or many messages) with the keys each message carries, or, with
    /// `key` (dict or "k=v,..."), the bytes as one object under that key. All or nothing: every
    /// message is framed, decoded and checked against the schema before the first is stored;
    /// on error nothing is archived and the exception names the message and its offset.
    /// Under a key, a GRIB message must agree with it (its values in canonical form), unless
    /// `check_grib=False`: then the bytes are stored under the key as given, values
    /// canonicalised, as FDB5's `archive(key, ...)` does (pyfdb's `identifier`, the C API's
    /// `fdb_archive`). Visible after `flush()`.
    #[pyo3(signature = (data, key = None, *, check_grib = true))]
    fn archive(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        key: Option<&Bound<'_, PyAny>>,
        check_grib: bool,
    ) -> PyResult<ArchiveSummary> {
        // bytes are immutable, so they are read in place with the GIL released; a bytearray
        // or memoryview could change meanwhile, so it is copied first.
        let owned;
        let bytes: &Bound<'_, PyBytes> = if let Ok(b) = data.cast::<PyBytes>() {
            b
        } else if data.is_instance_of::<PyByteArray>()
            || data.is_instance_of::<pyo3::types::PyMemoryView>()
        {
            owned = py
                .import("builtins")?
                .getattr("bytes")?
                .call1((data,))?
                .cast_into::<PyBytes>()?;
            &owned
        } else {
            return Err(PyTypeError::new_err(format!(
                "archive data must be bytes, bytearray or memoryview, not {}",
                data.get_type().name()?
            )));
        };
        let slice = bytes.as_bytes();
        let fdb = &*self.inner;
        if let Some(k) = key.filter(|k| !k.is_none()) {
            let k = convert::key(k)?;
            py.detach(|| {
                if check_grib {
                    fdb.archive(Some(&k), slice)
                } else {
                    // As FDB5: the bytes go under the key given, whatever keys they carry.
                    fdb.archive_grib(&k, slice)
                }
            })
            .map_err(to_py)?;
            return Ok(ArchiveSummary {
                messages: 1,
                bytes: slice.len() as u64,
            });
        }
        let schema = self.schema.clone();
        let summary = py
            .detach(|| {
                let mut archiver = Archiver::new(fdb).validate_first(true);
                if let Some(schema) = schema {
                    archiver = archiver.check(move |k| {
                        let cx = Context {
                            params: Some(&RESOLVER),
                            ..Context::default()
                        };
                        schema
                            .split(k, &cx, false)
                            .map(|_| ())
                            .map_err(|e| api::ApiError::from(ModelError::from(e)))
                    });
                }
                archiver.archive_slice(slice, "archive data")
            })
            .map_err(to_py)?;
        Ok(ArchiveSummary {
            messages: summary.messages,
            bytes: summary.bytes,
        })
    }

    /// Makes everything archived through this handle (by any thread) durable and visible.
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        let fdb = &*self.inner;
        py.detach(|| fdb.flush()).map_err(to_py)
    }

    /// Fields matching a partial request (dict or MARS string; None lists everything), as an
    /// iterator of ListElement. level 1 lists databases, 2 indexes, 3 fields. Masked (replaced)
    /// fields only with include_masked=True. `keys` is accepted for pyfdb's sake: elements
    /// always carry their keys, built only when asked.
    #[pyo3(signature = (request = None, keys = true, level = 3, include_masked = false))]
    fn list(
        &self,
        py: Python<'_>,
        request: Option<&Bound<'_, PyAny>>,
        keys: bool,
        level: i64,
        include_masked: bool,
    ) -> PyResult<ListIterator> {
        let _ = keys;
        let request = convert::request(request)?;
        let depth = depth(level)?;
        let fdb = &*self.inner;
        let opts = ListOptions {
            include_masked,
            depth,
        };
        let iter = py.detach(|| fdb.list(&request, opts)).map_err(to_py)?;
        Ok(ListIterator::new(iter, depth))
    }

    /// The fields a request names, newest copy of each, as a seekable Reader (empty if nothing
    /// matches). With `wait=seconds`: a WaitingReader giving each field as it is flushed, and
    /// raising fieldstore.TimeoutError (naming the missing fields) if they do not all come.
    #[pyo3(signature = (request, wait = None))]
    fn retrieve<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'py, PyAny>,
        wait: Option<f64>,
    ) -> PyResult<Bound<'py, PyAny>> {
        if request.is_none() {
            return Err(PyTypeError::new_err(
                "retrieve needs a request (a dict or a MARS string), not None",
            ));
        }
        let request = convert::request(Some(request))?;
        let fdb = &*self.inner;
        if let Some(wait) = subscription::seconds(wait, "wait")? {
            let w = py
                .detach(|| api::RetrieveWait::new(fdb, &request, wait))
                .map_err(to_py)?;
            let r = WaitingReader::new(self.inner.clone(), w);
            return Ok(Bound::new(py, r)?.into_any());
        }
        let r = py.detach(|| fdb.retrieve(&request)).map_err(to_py)?;
        Ok(Bound::new(py, Reader::new(r))?.into_any())
    }

    /// The fields matching a partial request as flushes make them visible: a Subscription
    /// yielding ListElements (each with `.position`). `start`: "now", "beginning", or a
    /// position a subscription gave. Iteration ends when no field came within `timeout`
    /// seconds (never, if None). With `data=True` each element carries its field's bytes
    /// (`.data`) where the store can send them (a local store, a server), saving a retrieve.
    #[pyo3(signature = (request = None, start = "now", timeout = None, data = false))]
    fn subscribe(
        &self,
        py: Python<'_>,
        request: Option<&Bound<'_, PyAny>>,
        start: &str,
        timeout: Option<f64>,
        data: bool,
    ) -> PyResult<Subscription> {
        let request = convert::request(request)?;
        let start = subscription::start(start)?;
        let timeout = subscription::seconds(timeout, "timeout")?;
        let fdb = &*self.inner;
        let sub = py
            .detach(|| {
                if data {
                    fdb.subscribe_with_data(&request, &start)
                } else {
                    fdb.subscribe(&request, &start)
                }
            })
            .map_err(to_py)?;
        Ok(Subscription::new(sub, timeout))
    }

    /// The values present for each keyword under a partial request, each list in sorted order
    /// (numbers by magnitude). `as_fdb5=True`: as FDB5 (and pyfdb) give them: every index the
    /// request's index keywords match counts whole, and an optional keyword some fields lack
    /// has the value `''`.
    #[pyo3(signature = (request = None, level = 3, as_fdb5 = false))]
    fn axes<'py>(
        &self,
        py: Python<'py>,
        request: Option<&Bound<'_, PyAny>>,
        level: i64,
        as_fdb5: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        let request = convert::request(request)?;
        let depth = depth(level)? | if as_fdb5 { api::AXES_AS_FDB5 } else { 0 };
        let fdb = &*self.inner;
        let axes = py.detach(|| fdb.axes(&request, depth)).map_err(to_py)?;
        let d = PyDict::new(py);
        for (k, vals) in api::sorted_axes(&axes) {
            d.set_item(k, PyList::new(py, vals)?)?;
        }
        Ok(d)
    }

    /// The values of ranges of grid points of every field the request (dict or MARS string)
    /// names, without reading whole fields: a list with one `Extraction` per field, in request
    /// order, each with `.key` (its MARS key), `.values` (one float64 numpy array per range,
    /// NaN where missing) and `.masks` (one uint64 numpy array per range: bit j of word k set
    /// when point k*64+j of the range is present). `ranges`: (lo, hi) pairs, half-open
    /// [lo, hi) indexes into the field's grid points, ascending and not overlapping.
    fn extract<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'py, PyAny>,
        ranges: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        if request.is_none() {
            return Err(PyTypeError::new_err(
                "extract needs a request (a dict or a MARS string), not None",
            ));
        }
        let request = convert::request(Some(request))?;
        let ranges = extract::ranges(ranges)?;
        fdb_extract::extract(py, &*self.inner, request, ranges)
    }

    /// Adds extraction information to the fields a request names that were stored without it
    /// (databases FDB5 wrote, fieldstore's from before it kept it), as `fieldstore
    /// extract-index` does, so `extract` reads only the bytes asked for from them too. Runs on a
    /// local config only; resumable (fields already described are skipped). Returns a dict:
    /// `fields`, `already`, `added`, `left` (small or not describable: read whole), `bytes_read`,
    /// `side_files`. `dry_run=True` counts what would be added and writes nothing.
    #[pyo3(signature = (request, dry_run = false))]
    fn extract_index<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'py, PyAny>,
        dry_run: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        if request.is_none() {
            return Err(PyTypeError::new_err(
                "extract_index needs a request (a dict or a MARS string), not None",
            ));
        }
        let request = convert::request(Some(request))?;
        let options = api::ExtractIndexOptions {
            dry_run,
            progress: None,
        };
        let fdb = &*self.inner;
        let r = py
            .detach(|| fdb.extract_index(&request, &options))
            .map_err(to_py)?;
        let d = PyDict::new(py);
        d.set_item("fields", r.fields)?;
        d.set_item("already", r.already)?;
        d.set_item("added", r.added)?;
        d.set_item("left", r.left)?;
        d.set_item("bytes_read", r.bytes_read)?;
        d.set_item("side_files", r.side_files)?;
        Ok(d)
    }

    /// Values at places rather than grid-point numbers: `points`, (lat, lon) pairs in degrees
    /// (the nearest grid point), and `boxes`, (north, west, south, east) in degrees (every grid
    /// point inside), on the grid of the first field the request names (all must share it).
    /// A list with one dict per field: `key`, `selections` (per point then per box: numpy
    /// arrays `indices`, `latitudes`, `longitudes`, `values`, NaN where missing) and
    /// `bytes_read`. `fieldstore.extraction` turns them into xarray objects.
    #[pyo3(signature = (request, points = None, boxes = None))]
    fn extract_places<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'py, PyAny>,
        points: Option<Vec<(f64, f64)>>,
        boxes: Option<Vec<(f64, f64, f64, f64)>>,
    ) -> PyResult<Bound<'py, PyList>> {
        if request.is_none() {
            return Err(PyTypeError::new_err(
                "extract_places needs a request (a dict or a MARS string), not None",
            ));
        }
        let request = convert::request(Some(request))?;
        let mut selections: Vec<api::Selection> = points
            .unwrap_or_default()
            .into_iter()
            .map(|(lat, lon)| api::Selection::Point { lat, lon })
            .collect();
        selections.extend(boxes.unwrap_or_default().into_iter().map(
            |(north, west, south, east)| api::Selection::Box {
                north,
                west,
                south,
                east,
            },
        ));
        fdb_extract::extract_places(py, &*self.inner, request, selections)
    }

    /// The databases matching a partial request and where they are.
    #[pyo3(signature = (request = None))]
    fn r#where<'py>(
        &self,
        py: Python<'py>,
        request: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let request = convert::request(request)?;
        let fdb = &*self.inner;
        let found = py.detach(|| fdb.where_(&request)).map_err(to_py)?;
        list_of(py, &found, results::where_)
    }

    /// Statistics of each matching database (all of them without a request).
    #[pyo3(signature = (request = None))]
    fn stats<'py>(
        &self,
        py: Python<'py>,
        request: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.over_databases(py, request, |f, r| f.stats(r), results::stats)
    }

    /// The journal of each matching database (all of them without a request).
    #[pyo3(signature = (request = None))]
    fn dump<'py>(
        &self,
        py: Python<'py>,
        request: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.over_databases(py, request, |f, r| f.dump(r), results::dump)
    }

    /// Deletes whole databases matching the request; with doit=False (the default) only says
    /// what would go. A request matching nothing raises NotFoundError.
    #[pyo3(signature = (request, doit = false))]
    fn wipe<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'_, PyAny>,
        doit: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let request = convert::request(Some(request))?;
        if request.is_empty() {
            return Err(bad_request(
                "wipe needs a request naming the databases to delete (an empty one would match all)",
            ));
        }
        let fdb = &*self.inner;
        let found = py.detach(|| fdb.wipe(&request, doit)).map_err(to_py)?;
        list_of(py, &found, results::wipe)
    }

    /// Deletes masked (replaced) copies of fields in matching databases (all without a
    /// request); with doit=False only says what would go.
    #[pyo3(signature = (request = None, doit = false))]
    fn purge<'py>(
        &self,
        py: Python<'py>,
        request: Option<&Bound<'_, PyAny>>,
        doit: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        self.over_databases(py, request, |f, r| f.purge(r, doit), results::purge)
    }

    /// Locks, unlocks or reports ("lock", "unlock", "status") operations ("archive",
    /// "retrieve", "list", "wipe") on matching databases.
    fn control<'py>(
        &self,
        py: Python<'py>,
        request: &Bound<'_, PyAny>,
        action: &str,
        identifiers: &Bound<'_, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        let request = convert::request(Some(request))?;
        let action = match action.to_ascii_lowercase().as_str() {
            "lock" | "disable" => ControlAction::Lock,
            "unlock" | "enable" => ControlAction::Unlock,
            "status" | "none" => ControlAction::Status,
            other => {
                return Err(bad_request(format!(
                    "control action must be 'lock', 'unlock' or 'status', not '{other}'"
                )))
            }
        };
        let names: Vec<String> = if let Ok(s) = identifiers.cast::<PyString>() {
            vec![s.to_cow()?.to_string()]
        } else {
            identifiers
                .try_iter()?
                .map(|i| i?.extract::<String>())
                .collect::<PyResult<_>>()?
        };
        let ops = names
            .iter()
            .map(|n| {
                n.parse::<Operation>()
                    .map_err(|e| bad_request(format!("control identifier: {e}")))
            })
            .collect::<PyResult<Vec<_>>>()?;
        let fdb = &*self.inner;
        let found = py
            .detach(|| fdb.control(&request, action, &ops))
            .map_err(to_py)?;
        list_of(py, &found, results::control)
    }

    /// Merges the indexes of matching databases (all without a request) so lookups stay fast.
    #[pyo3(signature = (request = None))]
    fn compact<'py>(
        &self,
        py: Python<'py>,
        request: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        self.over_databases(py, request, |f, r| f.compact(r), results::compact)
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Flushes, unless an exception is propagating (then what was archived is dropped).
    #[pyo3(signature = (exc_type = None, exc_value = None, traceback = None))]
    fn __exit__(
        &self,
        py: Python<'_>,
        exc_type: Option<&Bound<'_, PyAny>>,
        exc_value: Option<&Bound<'_, PyAny>>,
        traceback: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<bool> {
        let _ = (exc_value, traceback);
        if exc_type.is_none_or(|t| t.is_none()) {
            self.flush(py)?;
        }
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!("FDB({})", self.inner.name())
    }
}

/// What one `FDB.archive` call stored.
#[pyclass(frozen, module = "fieldstore._native")]
pub struct ArchiveSummary {
    /// Messages (fields) archived.
    #[pyo3(get)]
    messages: u64,
    /// Bytes of those messages.
    #[pyo3(get)]
    bytes: u64,
}

#[pymethods]
impl ArchiveSummary {
    fn __repr__(&self) -> String {
        format!(
            "ArchiveSummary(messages={}, bytes={})",
            self.messages, self.bytes
        )
    }
}
