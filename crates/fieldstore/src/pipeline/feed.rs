//! GRIB messages as `multio-feed --decode` hands them to plans: the `mars` namespace keys in
//! their native types plus the keys multio-feed adds, and the decoded values.

use std::sync::Arc;

use super::message::Field;
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
}
