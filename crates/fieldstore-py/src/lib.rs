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

/// ecCodes' version, as the library in use reports it (loading it), or why there is none.
#[pyfunction]
fn eccodes_version(py: Python<'_>) -> String {
    py.detach(fieldstore::grib::eccodes_version)
}

/// Which ecCodes this process uses: `version`, `path`, `origin`, `definitions`, `samples`.
/// With `load=False`, `None` while nothing has needed ecCodes (reading and listing never do).
/// Raises `ConfigError` naming what to install when there is none.
#[pyfunction]
#[pyo3(signature = (load = true))]
fn eccodes_info<'py>(py: Python<'py>, load: bool) -> PyResult<Option<Bound<'py, PyDict>>> {
    let info = if load {
        Some(py.detach(fieldstore::grib::eccodes))
    } else {
        fieldstore::grib::eccodes_if_loaded()
    };
    let Some(info) = info else {
        return Ok(None);
    };
    let info = info.map_err(errors::to_py)?;
    let d = PyDict::new(py);
    d.set_item("version", &info.version)?;
    d.set_item("path", &info.path)?;
    d.set_item("origin", info.origin.to_string())?;
    d.set_item("definitions", &info.definitions)?;
    d.set_item("samples", &info.samples)?;
    Ok(Some(d))
}

/// Registers the `eccodeslib` (and `eckitlib`) package directories `importlib` found, so that
/// ecCodes, when first needed, is opened from the same wheel pyfdb and eccodes-python use. Loads
/// nothing.
#[pyfunction]
#[pyo3(signature = (eccodeslib, eckitlib = None))]
fn _prefer_eccodeslib(eccodeslib: std::path::PathBuf, eckitlib: Option<std::path::PathBuf>) {
    fieldstore::grib::prefer_eccodeslib(eccodeslib, eckitlib);
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

/// The `fieldstore` command run inside this process (`fieldstore._cli`, the command of a build
/// from the sdist): `argv` as a program's, `program` what runs the command again. Returns the
/// exit status. Python waits outside the GIL while it runs.
#[cfg(feature = "cli")]
#[pyfunction]
fn _run_cli(py: Python<'_>, argv: Vec<Vec<u8>>, program: Vec<Vec<u8>>) -> u8 {
    use std::os::unix::ffi::OsStringExt;
    let argv = argv.into_iter().map(std::ffi::OsString::from_vec).collect();
    let program = program
        .into_iter()
        .map(std::ffi::OsString::from_vec)
        .collect();
    py.detach(|| fieldstore_cli::run(argv, program))
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
    m.add_function(wrap_pyfunction!(eccodes_info, m)?)?;
    m.add_function(wrap_pyfunction!(_prefer_eccodeslib, m)?)?;
    m.add_function(wrap_pyfunction!(make_field, m)?)?;
    #[cfg(feature = "cli")]
    m.add_function(wrap_pyfunction!(_run_cli, m)?)?;
    Ok(())
}
