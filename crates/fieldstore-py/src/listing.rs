//! `FDB.list`: a Python iterator over the library's lazy listing, fetched in batches with the
//! GIL released; elements build their dicts only when asked.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, OnceLock};

use fieldstore::api::{self, ListIter};
use fieldstore::model::Key;
use pyo3::exceptions::PyKeyError;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use crate::errors::to_py;
use crate::results::key_dict;
use crate::strings::{add_pairs, dict_of};
use crate::sync::lock;

/// Elements fetched per release of the GIL: enough to make the release cost nothing per
/// element, few enough that the first element comes quickly.
const BATCH: usize = 512;

/// The database + index part of the last key dict built, shared by an iterator's elements:
/// consecutive fields share it, and copying a dict is cheaper than filling one.
type Prefix = Mutex<Option<(Key, Key, Py<PyDict>)>>;

struct State {
    iter: Option<ListIter>,
    buffer: VecDeque<api::ListElement>,
    /// Where the walk stopped, raised once the elements before it are handed out.
    failed: Option<api::ApiError>,
}

/// The fields (or databases, indexes at level 1, 2) a `FDB.list` call matched, streamed. It
/// owns what it walks, so it may outlive its FDB.
#[pyclass(frozen, module = "fieldstore._native")]
pub struct ListIterator {
    state: Mutex<State>,
    depth: u8,
    prefix: Arc<Prefix>,
}

impl ListIterator {
    pub fn new(iter: ListIter, depth: u8) -> Self {
        ListIterator {
            state: Mutex::new(State {
                iter: Some(iter),
                buffer: VecDeque::with_capacity(BATCH),
                failed: None,
            }),
            depth,
            prefix: Arc::new(Mutex::new(None)),
        }
    }
}

#[pymethods]
impl ListIterator {
    fn __iter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    fn __next__(&self, py: Python<'_>) -> PyResult<Option<ListElement>> {
        let mut st = lock(py, &self.state);
        if st.buffer.is_empty() {
            if let Some(e) = st.failed.take() {
                return Err(to_py(e));
            }
            let State {
                iter,
                buffer,
                failed,
            } = &mut *st;
            let Some(it) = iter.as_mut() else {
                return Ok(None);
            };
            *failed = py.detach(|| {
                for item in it.by_ref() {
                    match item {
                        Ok(e) => buffer.push_back(e),
                        Err(e) => return Some(e),
                    }
                    if buffer.len() >= BATCH {
                        return None;
                    }
                }
                None
            });
            // Exhausted (or failed): the walk's files are let go now, not when Python collects.
            if buffer.len() < BATCH || failed.is_some() {
                *iter = None;
            }
            // The elements before a failure are handed out first, then the failure.
            if buffer.is_empty() {
                if let Some(e) = failed.take() {
                    return Err(to_py(e));
                }
            }
        }
        Ok(st
            .buffer
            .pop_front()
            .map(|e| ListElement::new(e, self.depth, self.prefix.clone())))
    }
}

/// One listed field: its key (combined and split), where its bytes are, when it was flushed.
#[pyclass(frozen, module = "fieldstore._native")]
pub struct ListElement {
    inner: api::ListElement,
    depth: u8,
    key: OnceLock<Py<PyDict>>,
    prefix: Arc<Prefix>,
    /// For a subscription's element: where to resume to get the fields after it.
    position: Option<String>,
    /// For a subscription with `data=True`: the field's bytes, where the store sent them.
    data: Option<bytes::Bytes>,
}

impl ListElement {
    fn new(inner: api::ListElement, depth: u8, prefix: Arc<Prefix>) -> Self {
        ListElement {
            inner,
            depth,
            key: OnceLock::new(),
            prefix,
            position: None,
            data: None,
        }
    }

    /// A field a subscription delivered, with the position just after it.
    pub fn notice(inner: api::ListElement, position: String, data: Option<bytes::Bytes>) -> Self {
        ListElement {
            inner,
            depth: 3,
            key: OnceLock::new(),
            prefix: Arc::new(Mutex::new(None)),
            position: Some(position),
            data,
        }
    }

    /// The combined key as a new dict, starting from a copy of the shared prefix when the
    /// database and index keys are the last ones seen.
    fn build_key<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let k = &self.inner.key;
        // Never wait for the lock with the GIL held: without it, build the whole dict.
        let Ok(mut prefix) = self.prefix.try_lock() else {
            return dict_of(py, &[&k.db, &k.index, &k.datum]);
        };
        let base = match &*prefix {
            Some((db, index, d)) if *db == k.db && *index == k.index => d.bind(py).copy()?,
            _ => {
                let d = dict_of(py, &[&k.db, &k.index])?;
                let copy = d.copy()?;
                *prefix = Some((k.db.clone(), k.index.clone(), d.unbind()));
                copy
            }
        };
        drop(prefix);
        add_pairs(py, &base, &k.datum)?;
        Ok(base)
    }
}

#[pymethods]
impl ListElement {
    /// The whole key, keywords in schema order (database, index, then field keywords).
    #[getter]
    fn key(&self, py: Python<'_>) -> PyResult<Py<PyDict>> {
        if let Some(k) = self.key.get() {
            return Ok(k.clone_ref(py));
        }
        let d = self.build_key(py)?.unbind();
        Ok(self.key.get_or_init(|| d).clone_ref(py))
    }

    /// (database, index, field) keys; only the first one or two at level 1 or 2.
    #[getter]
    fn split_keys<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let k = &self.inner.key;
        let parts = [&k.db, &k.index, &k.datum];
        let n = usize::from(self.depth.clamp(1, 3));
        let dicts = parts[..n]
            .iter()
            .map(|p| key_dict(py, p))
            .collect::<PyResult<Vec<_>>>()?;
        PyTuple::new(py, dicts)
    }

    /// The URI of the field's bytes (`file:///...`); None at level 1 and 2.
    #[getter]
    fn uri(&self) -> Option<String> {
        self.inner.location.as_ref().map(|l| l.uri.clone())
    }

    /// The file holding the field when it is a local file, else the URI; None at level 1, 2.
    #[getter]
    fn path(&self) -> Option<String> {
        self.inner
            .location
            .as_ref()
            .map(|l| l.uri.strip_prefix("file://").unwrap_or(&l.uri).to_string())
    }

    #[getter]
    fn offset(&self) -> Option<u64> {
        self.inner.location.as_ref().map(|l| l.offset)
    }

    #[getter]
    fn length(&self) -> Option<u64> {
        self.inner.location.as_ref().map(|l| l.length)
    }

    /// Seconds since the epoch when the index holding the entry was flushed.
    #[getter]
    fn timestamp(&self) -> u64 {
        self.inner.timestamp
    }

    /// From `FDB.subscribe`: the position just after this field (resume there to get the
    /// fields after it); None for listed elements.
    #[getter]
    fn position(&self) -> Option<String> {
        self.position.clone()
    }

    /// From `FDB.subscribe(..., data=True)`: the field's bytes where the store sent them with
    /// the notice; None otherwise (read it with `FDB.retrieve`).
    #[getter]
    fn data<'py>(&self, py: Python<'py>) -> Option<Bound<'py, pyo3::types::PyBytes>> {
        self.data
            .as_deref()
            .map(|d| pyo3::types::PyBytes::new(py, d))
    }

    /// True for an older copy replaced by a newer archive (listed with include_masked=True).
    #[getter]
    fn masked(&self) -> bool {
        self.inner.masked
    }

    fn __getitem__(&self, keyword: &str) -> PyResult<String> {
        let k = &self.inner.key;
        [&k.db, &k.index, &k.datum]
            .iter()
            .find_map(|p| p.get(keyword))
            .map(str::to_string)
            .ok_or_else(|| PyKeyError::new_err(keyword.to_string()))
    }

    fn __contains__(&self, keyword: &str) -> bool {
        let k = &self.inner.key;
        [&k.db, &k.index, &k.datum]
            .iter()
            .any(|p| p.contains(keyword))
    }

    fn __eq__(&self, other: &Bound<'_, PyAny>) -> bool {
        other
            .cast::<ListElement>()
            .is_ok_and(|o| o.get().inner == self.inner)
    }

    fn __repr__(&self) -> String {
        let mut s = format!("ListElement({}", self.inner.key.porcelain());
        if let Some(l) = &self.inner.location {
            s.push_str(&format!(", {l}"));
        }
        if self.inner.masked {
            s.push_str(", masked");
        }
        s.push(')');
        s
    }
}
