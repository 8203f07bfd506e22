//! GRIB messages as `multio-feed --decode` hands them to plans: the `mars` namespace keys in
//! their native types plus the keys multio-feed adds, and the decoded values.

use std::sync::Arc;

use super::message::{Field, Message};
use super::metadata::{Metadata, Value};
use crate::grib::{Decoded, GribError, KeyValue};

fn value_of(v: KeyValue) -> Value {
    match v {
        KeyValue::Long(i) => Value::Int(i),
        KeyValue::Double(d) => Value::Double(d),
        KeyValue::String(s) => Value::String(s),
        KeyValue::Longs(l) => Value::Ints(l),
        KeyValue::Doubles(d) => Value::Doubles(d),
        KeyValue::Bytes(b) => Value::String(b.iter().map(|x| format!("{x:02x}")).collect()),
    }
}

/// The field multio-feed makes of one GRIB message. Missing points carry `missingValue`, as
/// MultIO's decoder gives them.
pub fn field_from_grib(message: &[u8]) -> Result<Field, GribError> {
    let d = Decoded::new(message)?;
    let mut md = Metadata::new();
    for name in d.namespace_keys("mars")? {
        if let Some(v) = d.get(&name)? {
            md.set(name, value_of(v));
        }
    }
    // multio-feed's `param` is text whatever type this ecCodes gives it, and the paramId for
    // GRIB1 (ecCodes before 2.3x says `167.128`).
    if let Some(p) = md.get("param").and_then(Value::scalar_text) {
        let id = match d.get("paramId")? {
            Some(KeyValue::Long(id)) if p.contains('.') => id.to_string(),
            _ => p,
        };
        md.set("param", id);
    }
    let long = |k: &str| -> Result<Option<i64>, GribError> {
        Ok(match d.get(k)? {
            Some(KeyValue::Long(v)) => Some(v),
            _ => None,
        })
    };
    for k in ["paramId", "level", "startStep", "endStep"] {
        if let Some(v) = long(k)? {
            md.set(k, v);
        }
    }
    for k in ["shortName", "name", "gridType"] {
        if let Some(KeyValue::String(s)) = d.get(k)? {
            md.set(k, s);
        }
    }
    if let Some(e) = long("edition")? {
        md.set("gribEdition", e.to_string());
    }
    let bitmap = long("bitmapPresent")?.unwrap_or(0) != 0;
    // `Decoded` marks missing points with its own sentinel in the handle; the GRIB's own
    // missing value is then ecCodes' default, which MultIO reports.
    let missing = match d.get("missingValue")? {
        Some(KeyValue::Double(m)) if m > -1.0e299 => m,
        Some(KeyValue::Long(m)) => m as f64,
        _ => 9999.0,
    };
    md.set("bitmapPresent", bitmap);
    md.set("missingValue", missing);
    let mut values = d.values()?;
    if bitmap {
        values
            .iter_mut()
            .filter(|v| v.is_nan())
            .for_each(|v| *v = missing);
    }
    md.set("step-frequency", 1i64);
    md.set("timeStep", 3600i64);
    md.set("misc-globalSize", values.len() as i64);
    let mut f = Field::values(md, values);
    f.source_grib = Some(Arc::from(d.bytes()));
    Ok(f)
}

/// A metadata map from JSON: integers stay ints, other numbers doubles, lists typed.
pub fn metadata_from_json(v: &serde_json::Value) -> Result<Metadata, String> {
    let serde_json::Value::Object(map) = v else {
        return Err("metadata must be a JSON object".into());
    };
    let mut md = Metadata::new();
    for (k, v) in map {
        md.set(k.clone(), json_value(k, v)?);
    }
    Ok(md)
}

fn json_value(key: &str, v: &serde_json::Value) -> Result<Value, String> {
    use serde_json::Value as J;
    Ok(match v {
        J::Null => Value::Null,
        J::Bool(b) => Value::Bool(*b),
        J::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Double(
                n.as_f64()
                    .ok_or_else(|| format!("{key}: number out of range"))?,
            ),
        },
        J::String(s) => Value::String(s.clone()),
        J::Object(_) => Value::Map(metadata_from_json(v)?),
        J::Array(items) => {
            if items.iter().all(|x| x.as_i64().is_some()) {
                Value::Ints(items.iter().filter_map(|x| x.as_i64()).collect())
            } else if items.iter().all(J::is_number) {
                Value::Doubles(items.iter().filter_map(|x| x.as_f64()).collect())
            } else if items.iter().all(J::is_string) {
                Value::Strings(
                    items
                        .iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect(),
                )
            } else if items.iter().all(J::is_boolean) {
                Value::Bools(items.iter().filter_map(J::as_bool).collect())
            } else {
                return Err(format!("{key}: a list must hold values of one type"));
            }
        }
    })
}

/// One message as a JSON line: `{"field": {"metadata": {...}, "values": [...]}}`,
/// `{"flush": {...}}` or `{"notification": {...}}`; what the model API calls would send, for
/// replaying a model's output through plans.
pub fn message_from_json(line: &str) -> Result<Message, String> {
    let v: serde_json::Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
    let obj = v.as_object().ok_or("a message must be a JSON object")?;
    let [(kind, body)] = obj.iter().collect::<Vec<_>>()[..] else {
        return Err("a message has exactly one of field, flush, notification".into());
    };
    match kind.as_str() {
        "field" => {
            let md = metadata_from_json(body.get("metadata").ok_or("a field needs metadata")?)?;
            let values = body
                .get("values")
                .and_then(|v| v.as_array())
                .ok_or("a field needs values (a list of numbers)")?
                .iter()
                .map(|x| x.as_f64().ok_or("values must be numbers"))
                .collect::<Result<Vec<f64>, _>>()?;
            Ok(Message::Field(Field::values(md, values)))
        }
        "flush" => Ok(Message::Flush(metadata_from_json(body)?)),
        "notification" => Ok(Message::Notification(metadata_from_json(body)?)),
        other => Err(format!(
            "unknown message kind '{other}' (field, flush, notification)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grib::sample::make_field;

    #[test]
    fn metadata_as_multio_feed_builds_it() {
        let keys = [
            ("class", "od"),
            ("param", "167"),
            ("levtype", "sfc"),
            ("step", "6"),
            ("date", "20250101"),
            ("time", "0"),
        ];
        let g = make_field(&keys, 4, 1).unwrap();
        let f = field_from_grib(&g).unwrap();
        let md = &f.metadata;
        let id = md.int("paramId").unwrap().unwrap();
        assert_eq!(md.text("param").unwrap(), Some(id.to_string()));
        assert_eq!(md.get("step"), Some(&Value::Int(6)));
        assert_eq!(md.get("gribEdition"), Some(&Value::String("2".into())));
        assert_eq!(
            md.get("misc-precision"),
            Some(&Value::String("double".into()))
        );
        assert_eq!(md.get("timeStep"), Some(&Value::Int(3600)));
        assert!(f.source_grib.is_some());
    }

    #[test]
    fn json_messages() {
        let m = message_from_json(r#"{"field": {"metadata": {"param": 167, "x": 1.5, "s": "a", "l": [1, 2]}, "values": [1, 2.5]}}"#).unwrap();
        let Message::Field(f) = m else {
            panic!("not a field")
        };
        assert_eq!(f.metadata.get("param"), Some(&Value::Int(167)));
        assert_eq!(f.metadata.get("x"), Some(&Value::Double(1.5)));
        assert_eq!(f.metadata.get("l"), Some(&Value::Ints(vec![1, 2])));
        assert_eq!(
            f.payload,
            crate::pipeline::message::Payload::Values(vec![1.0, 2.5])
        );
        assert!(matches!(
            message_from_json(r#"{"flush": {"flushKind": "last-step"}}"#),
            Ok(Message::Flush(_))
        ));
        for bad in [
            "[]",
            "{}",
            r#"{"field": {}}"#,
            r#"{"flush": 1}"#,
            r#"{"x": {}}"#,
            "nope",
        ] {
            assert!(message_from_json(bad).is_err(), "{bad}");
        }
    }
}
