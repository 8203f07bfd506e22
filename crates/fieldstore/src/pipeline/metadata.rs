//! Typed metadata, as MultIO keeps it: a string `"167"` and an int `167` are different values,
//! because select matching and the statistics keys depend on the difference.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// One metadata value. Lists are homogeneous, as MultIO's are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Double(f64),
    String(String),
    Ints(Vec<i64>),
    Doubles(Vec<f64>),
    Strings(Vec<String>),
    Bools(Vec<bool>),
    Map(Metadata),
}

impl Value {
    /// The type's name as errors and select's type check say it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Double(_) => "double",
            Value::String(_) => "string",
            Value::Ints(_) => "int list",
            Value::Doubles(_) => "double list",
            Value::Strings(_) => "string list",
            Value::Bools(_) => "bool list",
            Value::Map(_) => "map",
        }
    }

    /// The value as text where it is a scalar (a statistics key, a trigger value).
    pub fn scalar_text(&self) -> Option<String> {
        match self {
            Value::Bool(b) => Some(b.to_string()),
            Value::Int(i) => Some(i.to_string()),
            Value::Double(d) => Some(d.to_string()),
            Value::String(s) => Some(s.clone()),
            _ => None,
        }
    }
}

impl fmt::Display for Value {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fn list<T: fmt::Display>(f: &mut fmt::Formatter<'_>, v: &[T]) -> fmt::Result {
            write!(f, "[")?;
            for (i, x) in v.iter().enumerate() {
                if i > 0 {
                    write!(f, ",")?;
                }
                write!(f, "{x}")?;
            }
            write!(f, "]")
        }
        match self {
            Value::Null => write!(f, "null"),
            Value::Bool(b) => write!(f, "{b}"),
            Value::Int(i) => write!(f, "{i}"),
            Value::Double(d) => write!(f, "{d}"),
            Value::String(s) => write!(f, "{s:?}"),
            Value::Ints(v) => list(f, v),
            Value::Doubles(v) => list(f, v),
            Value::Strings(v) => {
                let q: Vec<String> = v.iter().map(|s| format!("{s:?}")).collect();
                list(f, &q)
            }
            Value::Bools(v) => list(f, v),
            Value::Map(m) => write!(f, "{m}"),
        }
    }
}

impl From<i64> for Value {
    fn from(v: i64) -> Value {
        Value::Int(v)
    }
}
impl From<f64> for Value {
    fn from(v: f64) -> Value {
        Value::Double(v)
    }
}
impl From<bool> for Value {
    fn from(v: bool) -> Value {
        Value::Bool(v)
    }
}
impl From<&str> for Value {
    fn from(v: &str) -> Value {
        Value::String(v.to_string())
    }
}
impl From<String> for Value {
    fn from(v: String) -> Value {
        Value::String(v)
    }
}

/// A message's metadata: keys in sorted order, so printing and hashing are deterministic.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Metadata(BTreeMap<String, Value>);

impl Metadata {
    pub fn new() -> Metadata {
        Metadata::default()
    }

    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    pub fn contains(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    pub fn set(&mut self, key: impl Into<String>, value: impl Into<Value>) {
        self.0.insert(key.into(), value.into());
    }

    pub fn remove(&mut self, key: &str) -> Option<Value> {
        self.0.remove(key)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.0.iter()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// An integer key. A double with an integral value is accepted (C callers set steps with
    /// `set_double` too); a string is refused, naming the key and what it holds.
    pub fn int(&self, key: &str) -> Result<Option<i64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Int(i)) => Ok(Some(*i)),
            Some(Value::Double(d)) if d.fract() == 0.0 && d.abs() < 9.0e15 => Ok(Some(*d as i64)),
            Some(other) => Err(format!(
                "key '{key}' must be an int, it is the {} {other}",
                other.type_name()
            )),
        }
    }

    /// An integer key that must be there.
    pub fn required_int(&self, key: &str) -> Result<i64, String> {
        self.int(key)?
            .ok_or_else(|| format!("missing required key '{key}'"))
    }

    /// A number key (int or double).
    pub fn number(&self, key: &str) -> Result<Option<f64>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Int(i)) => Ok(Some(*i as f64)),
            Some(Value::Double(d)) => Ok(Some(*d)),
            Some(other) => Err(format!(
                "key '{key}' must be a number, it is the {} {other}",
                other.type_name()
            )),
        }
    }

    /// A boolean key; ints 0/1 are accepted because pymultio sends Python bools as ints.
    pub fn boolean(&self, key: &str) -> Result<Option<bool>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(Value::Int(0)) => Ok(Some(false)),
            Some(Value::Int(1)) => Ok(Some(true)),
            Some(Value::String(s)) if s == "true" || s == "1" => Ok(Some(true)),
            Some(Value::String(s)) if s == "false" || s == "0" => Ok(Some(false)),
            Some(other) => Err(format!(
                "key '{key}' must be a bool, it is the {} {other}",
                other.type_name()
            )),
        }
    }

    /// A scalar key as text, whatever its type (ints and strings name the same param).
    pub fn text(&self, key: &str) -> Result<Option<String>, String> {
        match self.get(key) {
            None => Ok(None),
            Some(v) => v.scalar_text().map(Some).ok_or_else(|| {
                format!(
                    "key '{key}' must be a scalar, it is the {} {v}",
                    v.type_name()
                )
            }),
        }
    }

    /// A few identifying keys, to name a field in errors and logs.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        for k in [
            "name", "param", "paramId", "levtype", "level", "levelist", "date", "time", "step",
        ] {
            if let Some(v) = self.get(k) {
                parts.push(format!(
                    "{k}={}",
                    v.scalar_text().unwrap_or_else(|| v.to_string())
                ));
            }
        }
        if parts.is_empty() {
            "(no identifying keys)".to_string()
        } else {
            parts.join(",")
        }
    }

    /// Copies every key of `other` over this one.
    pub fn merge(&mut self, other: &Metadata) {
        for (k, v) in other.iter() {
            self.0.insert(k.clone(), v.clone());
        }
    }
}

impl fmt::Display for Metadata {
    /// JSON-like, as MultIO's `print` shows metadata.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{{")?;
        for (i, (k, v)) in self.0.iter().enumerate() {
            if i > 0 {
                write!(f, ",")?;
            }
            write!(f, "{k:?}:{v}")?;
        }
        write!(f, "}}")
    }
}

impl FromIterator<(String, Value)> for Metadata {
    fn from_iter<I: IntoIterator<Item = (String, Value)>>(iter: I) -> Metadata {
        Metadata(iter.into_iter().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn types_stay_apart() {
        let mut m = Metadata::new();
        m.set("param", "167");
        m.set("paramId", 167i64);
        assert_ne!(m.get("param"), m.get("paramId"));
        assert_eq!(m.text("param").unwrap(), m.text("paramId").unwrap());
        assert!(m.int("param").is_err());
        assert_eq!(m.int("paramId").unwrap(), Some(167));
    }

    #[test]
    fn serde_round_trip_keeps_types() {
        let mut m = Metadata::new();
        m.set("a", 1i64);
        m.set("b", 1.0);
        m.set("c", "1");
        m.set("d", Value::Ints(vec![1, 2]));
        let text = serde_json::to_string(&m).unwrap();
        let back: Metadata = serde_json::from_str(&text).unwrap();
        assert_eq!(back, m);
    }

    #[test]
    fn describe_names_the_field() {
        let mut m = Metadata::new();
        m.set("param", "167");
        m.set("step", 6i64);
        assert_eq!(m.describe(), "param=167,step=6");
    }
}
