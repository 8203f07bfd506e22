//! Python strings for keywords and values, made once: listing 100,000 fields builds 100,000
//! key dicts out of a few hundred distinct strings, and reusing them (their hashes cached too)
//! makes a dict several times cheaper than building each string anew.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use fieldstore::model::Key;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

/// Beyond this many distinct strings new ones are not kept (values such as dates or steps of a
/// huge store must not grow memory without bound).
const MAX: usize = 16 * 1024;

static CACHE: OnceLock<Mutex<HashMap<String, Py<PyString>>>> = OnceLock::new();

/// The Python string for `s`, from the cache when it is there.
pub fn string<'py>(py: Python<'py>, s: &str) -> Bound<'py, PyString> {
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    // Called with the GIL held: never wait for the lock, just make the string.
    let Ok(mut map) = cache.try_lock() else {
        return PyString::new(py, s);
    };
    if let Some(p) = map.get(s) {
        return p.bind(py).clone();
    }
    let made = PyString::new(py, s);
    if map.len() < MAX {
        map.insert(s.to_string(), made.clone().unbind());
    }
    made
}

/// The keys' pairs, in order, as one dict.
pub fn dict_of<'py>(py: Python<'py>, keys: &[&Key]) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    for key in keys {
        for (k, v) in key.iter() {
            d.set_item(string(py, k), string(py, v))?;
        }
    }
    Ok(d)
}
