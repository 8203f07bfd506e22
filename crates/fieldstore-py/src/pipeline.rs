//! `fieldstore._native.Pipeline`: MultIO plans run in the Python process, the engine behind the
//! `multio` module of the `fieldstore-multio` package (pymultio's shape). Metadata dicts are
//! converted here with their Python types kept exactly (a bool stays a bool, ints are 64-bit,
//! strings are Unicode), which pymultio's cffi path does not do.

use std::path::PathBuf;
use std::sync::Mutex;

use fieldstore::pipeline::config::{self, Side};
use fieldstore::pipeline::{Context, Field, Message, Metadata, PipelineError, PlanSet, Value};
use fieldstore::ErrorKind;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};

use crate::errors::raise;

struct Inner {
    plans: PlanSet,
    /// Keys every message is seen with unless it has its own (`write_parametrization`).
    parametrization: Metadata,
}

/// A set of MultIO plans fed fields, flushes and notifications.
#[pyclass(module = "fieldstore._native")]
pub struct Pipeline {
    inner: Mutex<Inner>,
}

fn pipeline_error(e: PipelineError) -> PyErr {
    raise(e.kind(), e.to_string())
}

fn failures(mut errors: Vec<PipelineError>) -> PyResult<()> {
    match errors.len() {
        0 => Ok(()),
        1 => Err(pipeline_error(errors.remove(0))),
        n => {
            let kind = errors[0].kind();
            let text: Vec<String> = errors.iter().map(ToString::to_string).collect();
            Err(raise(
                kind,
                format!("{n} of the plans failed: {}", text.join("; ")),
            ))
        }
    }
}

fn type_error(key: &str, v: &Bound<'_, PyAny>) -> PyErr {
    let t = v
        .get_type()
        .name()
        .map(|n| n.to_string())
        .unwrap_or_else(|_| "?".into());
    PyTypeError::new_err(format!(
        "metadata key '{key}': {t} is not a metadata type (bool, int, float, str, a list of one of them, or a dict)"
    ))
}

/// One Python value as a typed metadata value. `bool` is tested before `int` (it is an `int`
/// subclass); numpy scalars are taken through `.item()`.
fn to_value(key: &str, v: &Bound<'_, PyAny>) -> PyResult<Value> {
    if v.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if v.is_instance_of::<PyInt>() {
        return v.extract::<i64>().map(Value::Int).map_err(|_| {
            raise(
                ErrorKind::BadRequest,
                format!("metadata key '{key}': {v} does not fit in 64 bits"),
            )
        });
    }
    if let Ok(f) = v.cast::<PyFloat>() {
        return Ok(Value::Double(f.value()));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.to_string()));
    }
    if let Ok(d) = v.cast::<PyDict>() {
        return to_metadata(d).map(Value::Map);
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let items: Vec<Value> = v
            .try_iter()?
            .map(|x| to_value(key, &x?))
            .collect::<PyResult<_>>()?;
        return list(key, items);
    }
    // numpy scalars and arrays: their Python equivalents.
    if v.hasattr("dtype")? && v.hasattr("tolist")? {
        let plain = v.call_method0("tolist")?;
        if !plain.hasattr("dtype")? {
            return to_value(key, &plain);
        }
    }
    Err(type_error(key, v))
}

/// A homogeneous list (MultIO's lists are typed); ints in a list of floats become floats.
fn list(key: &str, items: Vec<Value>) -> PyResult<Value> {
    let bad = || {
        raise(
            ErrorKind::BadRequest,
            format!("metadata key '{key}': a list must hold one type (bool, int, float or str)"),
        )
    };
    if items.iter().all(|v| matches!(v, Value::Bool(_))) {
        return Ok(Value::Bools(
            items
                .into_iter()
                .filter_map(|v| {
                    if let Value::Bool(b) = v {
                        Some(b)
                    } else {
                        None
                    }
                })
                .collect(),
        ));
    }
    if items.iter().all(|v| matches!(v, Value::Int(_))) {
        return Ok(Value::Ints(
            items
                .into_iter()
                .filter_map(|v| if let Value::Int(i) = v { Some(i) } else { None })
                .collect(),
        ));
    }
    if items
        .iter()
        .all(|v| matches!(v, Value::Int(_) | Value::Double(_)))
    {
        return Ok(Value::Doubles(
            items
                .into_iter()
                .filter_map(|v| match v {
                    Value::Int(i) => Some(i as f64),
                    Value::Double(d) => Some(d),
                    _ => None,
                })
                .collect(),
        ));
    }
    if items.iter().all(|v| matches!(v, Value::String(_))) {
        return Ok(Value::Strings(
            items
                .into_iter()
                .filter_map(|v| {
                    if let Value::String(s) = v {
                        Some(s)
                    } else {
                        None
                    }
                })
                .collect(),
        ));
    }
    Err(bad())
}

fn to_metadata(d: &Bound<'_, PyDict>) -> PyResult<Metadata> {
    let mut md = Metadata::new();
    for (k, v) in d.iter() {
        let key: String = k
            .extract()
            .map_err(|_| PyTypeError::new_err(format!("metadata key {k} is not a str")))?;
        let value = to_value(&key, &v)?;
        md.set(key, value);
    }
    Ok(md)
}

fn with_parametrization(md: &Metadata, parametrization: &Metadata) -> Metadata {
    let mut out = md.clone();
    for (k, v) in parametrization.iter() {
        if !out.contains(k) {
            out.set(k.clone(), v.clone());
        }
    }
    out
}

impl Pipeline {
    fn send(&self, py: Python<'_>, make: impl FnOnce(&Metadata) -> Message + Send) -> PyResult<()> {
        let errors = py.detach(|| {
            let mut inner = self
                .inner
                .lock()
                .map_err(|_| "the pipeline is unusable after an internal error".to_string())?;
            let msg = make(&inner.parametrization);
            Ok::<_, String>(inner.plans.process(msg))
        });
        match errors {
            Ok(e) => failures(e),
            Err(m) => Err(raise(ErrorKind::Internal, m)),
        }
    }
}

#[pymethods]
impl Pipeline {
    /// The plans of `config_path` (a MultIO config: `client:` or bare `plans:`), or, without
    /// one, of MultIO's environment (`MULTIO_SERVER_CONFIG_FILE`, `MULTIO_PLANS`...).
    /// `config_dir` replaces the file's directory for `{~}` and relative paths.
    #[new]
    #[pyo3(signature = (config_path = None, config_dir = None))]
    fn new(
        py: Python<'_>,
        config_path: Option<PathBuf>,
        config_dir: Option<PathBuf>,
    ) -> PyResult<Pipeline> {
        let plans = py
            .detach(|| {
                let env = |k: &str| config::process_env(k);
                let loaded = match (&config_path, &config_dir) {
                    (Some(p), None) => config::load_file(p, Side::Client, &env)?,
                    (Some(p), Some(dir)) => {
                        let origin = p.display().to_string();
                        let text =
                            std::fs::read_to_string(p).map_err(|e| PipelineError::Config {
                                origin: origin.clone(),
                                line: None,
                                message: format!("cannot read: {e}"),
                            })?;
                        config::load_str(&text, &origin, dir, Side::Client, &env)?
                    }
                    (None, _) => config::from_env(Side::Client, &env)?,
                };
                PlanSet::new(&loaded, Context::default())
            })
            .map_err(pipeline_error)?;
        Ok(Pipeline {
            inner: Mutex::new(Inner {
                plans,
                parametrization: Metadata::new(),
            }),
        })
    }

    /// The names of the plans, in order.
    fn plan_names(&self) -> PyResult<Vec<String>> {
        let inner = self
            .inner
            .lock()
            .map_err(|_| raise(ErrorKind::Internal, "the pipeline is unusable".into()))?;
        Ok(inner
            .plans
            .plan_names()
            .iter()
            .map(|s| s.to_string())
            .collect())
    }

    /// A field of values: `data` holds native-endian floats (`precision="single"`) or doubles
    /// (`"double"`). `misc-precision` and `misc-format: raw` are set as MultIO sets them.
    fn write_field(
        &self,
        py: Python<'_>,
        metadata: &Bound<'_, PyDict>,
        data: &[u8],
        precision: &str,
    ) -> PyResult<()> {
        let mut md = to_metadata(metadata)?;
        let values: Vec<f64> = match precision {
            "single" if data.len().is_multiple_of(4) => data
                .chunks_exact(4)
                .map(|c| f64::from(f32::from_ne_bytes([c[0], c[1], c[2], c[3]])))
                .collect(),
            "double" if data.len().is_multiple_of(8) => data
                .chunks_exact(8)
                .map(|c| f64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect(),
            _ => {
                return Err(raise(
                    ErrorKind::BadRequest,
                    format!(
                    "{} bytes are not a whole number of '{precision}' values (single or double)",
                    data.len()
                ),
                ))
            }
        };
        md.set("misc-precision", precision);
        md.set("misc-format", "raw");
        self.send(py, move |param| {
            Message::Field(Field::values(with_parametrization(&md, param), values))
        })
    }

    /// A GRIB message as is (`misc-format: grib`).
    fn write_grib(&self, py: Python<'_>, data: &[u8]) -> PyResult<()> {
        let bytes = data.to_vec();
        self.send(py, move |param| {
            let mut f = Field::grib(bytes);
            f.metadata = with_parametrization(&f.metadata, param);
            Message::Field(f)
        })
    }

    fn flush(&self, py: Python<'_>, metadata: &Bound<'_, PyDict>) -> PyResult<()> {
        let md = to_metadata(metadata)?;
        self.send(py, move |param| {
            Message::Flush(with_parametrization(&md, param))
        })
    }

    fn notify(&self, py: Python<'_>, metadata: &Bound<'_, PyDict>) -> PyResult<()> {
        let md = to_metadata(metadata)?;
        self.send(py, move |param| {
            Message::Notification(with_parametrization(&md, param))
        })
    }

    /// Whether any plan's selects take a field with this metadata.
    fn field_accepted(&self, metadata: &Bound<'_, PyDict>) -> PyResult<bool> {
        let md = to_metadata(metadata)?;
        let inner = self
            .inner
            .lock()
            .map_err(|_| raise(ErrorKind::Internal, "the pipeline is unusable".into()))?;
        Ok(inner
            .plans
            .field_accepted(&with_parametrization(&md, &inner.parametrization)))
    }

    /// Static keys every later message is seen with. A key is written once, as in MultIO: the
    /// same value again is accepted, a different one raises and changes nothing.
    fn write_parametrization(&self, metadata: &Bound<'_, PyDict>) -> PyResult<()> {
        let md = to_metadata(metadata)?;
        let mut inner = self
            .inner
            .lock()
            .map_err(|_| raise(ErrorKind::Internal, "the pipeline is unusable".into()))?;
        for (k, v) in md.iter() {
            if let Some(old) = inner.parametrization.get(k) {
                if old != v {
                    return Err(raise(
                        ErrorKind::BadRequest,
                        format!(
                            "parametrization key '{k}' already has a different value: {old} != {v}"
                        ),
                    ));
                }
            }
        }
        inner.parametrization.merge(&md);
        Ok(())
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<Pipeline>()
}
