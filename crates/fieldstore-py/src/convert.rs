//! Python values → the library's requests, keys and configs, and JSON values → Python objects.

use std::path::{Path, PathBuf};

use fieldstore::model::config::{self, ConfigSource, FdbConfig, LoadedConfig};
use fieldstore::model::request::{parse_request, Request};
use fieldstore::model::Key;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use serde_json::Value;

use crate::errors::{bad_request, to_py};

/// One request value as text: str, int or float (not bool: `True` is no MARS value).
fn value_text(v: &Bound<'_, PyAny>, keyword: &str) -> PyResult<String> {
    if v.is_instance_of::<PyBool>() {
        return Err(PyTypeError::new_err(format!(
            "request value for '{keyword}' must be str, int or float, not bool"
        )));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(s.to_cow()?.to_string());
    }
    if v.is_instance_of::<PyInt>() || v.is_instance_of::<PyFloat>() {
        return Ok(v.str()?.to_cow()?.to_string());
    }
    Err(PyTypeError::new_err(format!(
        "request value for '{keyword}' must be str, int or float (or a list of them), not {}",
        v.get_type().name()?
    )))
}

/// Values of one keyword: a scalar, a `/`-separated string (`"0/to/12"`), or a list/tuple.
fn values(v: &Bound<'_, PyAny>, keyword: &str) -> PyResult<Vec<String>> {
    let split = |s: String| -> Vec<String> { s.split('/').map(|p| p.trim().to_string()).collect() };
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let mut out = Vec::new();
        for item in v.try_iter()? {
            out.extend(split(value_text(&item?, keyword)?));
        }
        if out.is_empty() {
            return Err(bad_request(format!(
                "request keyword '{keyword}' has no values"
            )));
        }
        return Ok(out);
    }
    Ok(split(value_text(v, keyword)?))
}

/// A request from `None` (everything), a dict, or a MARS string (`class=od,param=t/u`).
pub fn request(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Request> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        return Ok(Request::default());
    };
    if let Ok(s) = obj.cast::<PyString>() {
        let text = s.to_cow()?;
        if text.trim().is_empty() {
            return Ok(Request::default());
        }
        return parse_request(&text).map_err(|e| to_py(fieldstore::model::ModelError::from(e)));
    }
    let Ok(d) = obj.cast::<PyDict>() else {
        return Err(PyTypeError::new_err(format!(
            "a request is a dict or a MARS string, not {}",
            obj.get_type().name()?
        )));
    };
    let mut r = Request::default();
    for (k, v) in d.iter() {
        let Ok(k) = k.cast::<PyString>() else {
            return Err(PyTypeError::new_err("request keywords must be str"));
        };
        let kw = k.to_cow()?.trim().to_string();
        if kw.is_empty() {
            return Err(bad_request("empty keyword in request"));
        }
        let vals = values(&v, &kw)?;
        r.set(&kw, vals);
    }
    Ok(r)
}

/// An archive key from a dict or `class=od,expver=0001,...`.
pub fn key(obj: &Bound<'_, PyAny>) -> PyResult<Key> {
    if let Ok(s) = obj.cast::<PyString>() {
        return Key::parse(&s.to_cow()?).map_err(|e| to_py(fieldstore::model::ModelError::from(e)));
    }
    let Ok(d) = obj.cast::<PyDict>() else {
        return Err(PyTypeError::new_err(format!(
            "a key is a dict or a 'k=v,...' string, not {}",
            obj.get_type().name()?
        )));
    };
    let mut pairs = Vec::with_capacity(d.len());
    for (k, v) in d.iter() {
        let Ok(k) = k.cast::<PyString>() else {
            return Err(PyTypeError::new_err("key keywords must be str"));
        };
        let kw = k.to_cow()?.to_string();
        pairs.push((kw.clone(), value_text(&v, &kw)?));
    }
    Ok(Key::from_pairs(pairs))
}

/// A Python value (from a config dict) as JSON; paths become strings.
pub fn to_json(v: &Bound<'_, PyAny>) -> PyResult<Value> {
    if v.is_none() {
        return Ok(Value::Null);
    }
    if let Ok(b) = v.cast::<PyBool>() {
        return Ok(Value::Bool(b.is_true()));
    }
    if v.is_instance_of::<PyInt>() {
        let i: i64 = v.extract()?;
        return Ok(Value::from(i));
    }
    if v.is_instance_of::<PyFloat>() {
        let f: f64 = v.extract()?;
        return Ok(serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number));
    }
    if let Ok(s) = v.cast::<PyString>() {
        return Ok(Value::String(s.to_cow()?.to_string()));
    }
    if let Ok(d) = v.cast::<PyDict>() {
        let mut m = serde_json::Map::new();
        for (k, val) in d.iter() {
            let k = k.str()?.to_cow()?.to_string();
            m.insert(k, to_json(&val)?);
        }
        return Ok(Value::Object(m));
    }
    if v.is_instance_of::<PyList>() || v.is_instance_of::<PyTuple>() {
        let items = v
            .try_iter()?
            .map(|i| to_json(&i?))
            .collect::<PyResult<Vec<_>>>()?;
        return Ok(Value::Array(items));
    }
    if v.hasattr("__fspath__")? {
        let p: PathBuf = v.extract()?;
        return Ok(Value::String(p.display().to_string()));
    }
    Err(PyTypeError::new_err(format!(
        "config values must be dict, list, str, int, float, bool or None, not {}",
        v.get_type().name()?
    )))
}

/// A JSON value as the Python object `json.loads` would give.
pub fn from_json<'py>(py: Python<'py>, v: &Value) -> PyResult<Bound<'py, PyAny>> {
    Ok(match v {
        Value::Null => py.None().into_bound(py),
        Value::Bool(b) => PyBool::new(py, *b).to_owned().into_any(),
        Value::Number(n) => match (n.as_i64(), n.as_u64()) {
            (Some(i), _) => i.into_pyobject(py)?.into_any(),
            (None, Some(u)) => u.into_pyobject(py)?.into_any(),
            _ => n.as_f64().unwrap_or(f64::NAN).into_pyobject(py)?.into_any(),
        },
        Value::String(s) => PyString::new(py, s).into_any(),
        Value::Array(a) => {
            let l = PyList::empty(py);
            for x in a {
                l.append(from_json(py, x)?)?;
            }
            l.into_any()
        }
        Value::Object(o) => {
            let d = PyDict::new(py);
            for (k, x) in o {
                d.set_item(k, from_json(py, x)?)?;
            }
            d.into_any()
        }
    })
}

/// YAML text as a JSON value, for the `config` property (best effort: `Null` if it does not
/// parse, which cannot happen for a config that loaded).
fn yaml_value(text: &str) -> Value {
    serde_saphyr::from_str::<Value>(text).unwrap_or(Value::Null)
}

/// A loaded config and what the `config` property shows of it.
pub struct Opened {
    pub config: FdbConfig,
    pub shown: Value,
}

/// The config `FDB(config)` names; `None` discovers as the CLI does.
pub fn load_config(obj: Option<&Bound<'_, PyAny>>) -> PyResult<Opened> {
    let Some(obj) = obj.filter(|o| !o.is_none()) else {
        let loaded = config::discover(None, &config::process_env).map_err(to_py)?;
        let shown = discovered_value(&loaded);
        return Ok(Opened {
            config: loaded.config,
            shown,
        });
    };
    if obj.is_instance_of::<PyDict>() {
        let value = to_json(obj)?;
        // JSON is YAML: the dict goes through the same parser, errors and all.
        let text = value.to_string();
        let config = config::from_yaml_str(&text, "<dict>").map_err(to_py)?;
        return Ok(Opened {
            config,
            shown: value,
        });
    }
    if let Ok(s) = obj.cast::<PyString>() {
        let text = s.to_cow()?;
        if text.contains('\n') || text.contains(": ") {
            let config = config::from_yaml_str(&text, "<string>").map_err(to_py)?;
            return Ok(Opened {
                config,
                shown: yaml_value(&text),
            });
        }
        return from_path(Path::new(&*text));
    }
    if obj.hasattr("__fspath__")? {
        let p: PathBuf = obj.extract()?;
        return from_path(&p);
    }
    Err(PyTypeError::new_err(format!(
        "config must be None, a dict, YAML text or a path, not {}",
        obj.get_type().name()?
    )))
}

fn from_path(path: &Path) -> PyResult<Opened> {
    let config = config::from_file(path).map_err(to_py)?;
    let shown = std::fs::read_to_string(path)
        .map(|t| yaml_value(&t))
        .unwrap_or(Value::Null);
    Ok(Opened { config, shown })
}

/// What discovery found, as a dict: the file's or variable's YAML, or the embedded default.
fn discovered_value(loaded: &LoadedConfig) -> Value {
    let text = match &loaded.source {
        ConfigSource::Explicit(p) | ConfigSource::EnvFile(_, p) | ConfigSource::Home(p) => {
            std::fs::read_to_string(p).ok()
        }
        ConfigSource::EnvInline(var) => config::process_env(var),
        ConfigSource::Default => None,
    };
    match (text, &loaded.config) {
        (Some(t), _) => yaml_value(&t),
        (None, FdbConfig::Local(l)) => serde_json::json!({
            "type": "local",
            "engine": l.engine,
            "spaces": l.spaces.iter().map(|s| serde_json::json!({
                "roots": s.roots.iter().map(|r| serde_json::json!({
                    "path": r.path.display().to_string()
                })).collect::<Vec<_>>()
            })).collect::<Vec<_>>(),
        }),
        (None, _) => Value::Null,
    }
}
