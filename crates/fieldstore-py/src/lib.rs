//! The native half of the `fieldstore` Python package (`fieldstore._native`): the FDB handle,
//! listing, the retrieve reader, typed results and error mapping. The pure-Python half
//! (`python/fieldstore/`) adds the exception classes, `Field`, and the xarray and earthkit
//! plugins.

mod buffer;
mod convert;
mod errors;
mod extract;
mod fdb;
mod fdb_extract;
mod listing;
mod message;
mod pipeline;
mod reader;
mod results;
mod strings;
mod subscription;
mod sync;

use pyo3::prelude::*;
use pyo3::types::PyDict;

/// ecCodes' version, as the library linked against reports it.
#[pyfunction]
fn eccodes_version(py: Python<'_>) -> String {
    py.detach(fieldstore::grib::eccodes_version)
}

/// A realistic GRIB2 field with the given MARS keys (as `fieldstore sample` makes): for tests
/// and examples.
#[pyfunction]
#[pyo3(signature = (keys, npoints = 1000, seed = 0))]
fn make_field<'py>(
    py: Python<'py>,
    keys: &Bound<'py, PyDict>,
    npoints: usize,
    seed: u64,
) -> PyResult<Bound<'py, pyo3::types::PyBytes>> {
    let key = convert::key(keys.as_any())?;
    let pairs: Vec<(&str, &str)> = key.iter().collect();
    let bytes = py
        .detach(|| fieldstore::grib::sample::make_field(&pairs, npoints, seed))
        .map_err(errors::to_py)?;
    Ok(pyo3::types::PyBytes::new(py, &bytes))
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<fdb::Fdb>()?;
    m.add_class::<fdb::ArchiveSummary>()?;
    m.add_class::<listing::ListIterator>()?;
    m.add_class::<listing::ListElement>()?;
    m.add_class::<reader::Reader>()?;
    m.add_class::<reader::FieldInfo>()?;
    m.add_class::<reader::FieldIterator>()?;
    m.add_class::<subscription::Subscription>()?;
    m.add_class::<subscription::WaitingReader>()?;
    results::register(m)?;
    message::register(m)?;
    extract::register(m)?;
    pipeline::register(m)?;
    m.add_function(wrap_pyfunction!(eccodes_version, m)?)?;
    m.add_function(wrap_pyfunction!(make_field, m)?)?;
    Ok(())
}
