//! Re-encoding a GRIB message with new keys and values: what a pipeline's `encode` does with a
//! template (the input field's own GRIB, or a template file).

use super::error::GribError;
use super::framing::split_slice;
use super::handle::Handle;
use super::sections::check_sections;

/// A key to set, in its type.
#[derive(Debug, Clone, PartialEq)]
pub enum SetValue {
    Long(i64),
    Double(f64),
    String(String),
}

/// Encodes `values` into a copy of `template` after setting `keys` in order. Missing points
/// (NaN, or equal to `missing`) are coded through the bitmap.
pub fn encode_with_template(
    template: &[u8],
    keys: &[(String, SetValue)],
    values: &[f64],
    missing: Option<f64>,
) -> Result<Vec<u8>, GribError> {
    let framed = split_slice(template, "template")?;
    let [(_, _, bytes)] = framed.as_slice() else {
        return Err(GribError::NotOneMessage {
            count: framed.len(),
        });
    };
    check_sections(bytes)?;
    let mut h = Handle::from_message_copy(bytes)?;
    super::log::guarded(|| {
        for (k, v) in keys {
            match v {
                SetValue::Long(x) => h.set_long(k, *x)?,
                SetValue::Double(x) => h.set_double(k, *x)?,
                SetValue::String(x) => h.set_string(k, x)?,
            }
        }
        let has_missing = values.iter().any(|v| v.is_nan() || Some(*v) == missing);
        if has_missing {
            let mv = missing.filter(|m| !m.is_nan()).unwrap_or(9999.0);
            h.set_double("missingValue", mv)?;
            h.set_long("bitmapPresent", 1)?;
            let coded: Vec<f64> = values
                .iter()
                .map(|v| if v.is_nan() { mv } else { *v })
                .collect();
            h.set_doubles("values", &coded)?;
        } else {
            h.set_doubles("values", values)?;
        }
        h.message()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grib::{sample::make_field, Decoded};

    #[test]
    fn re_encodes_keys_and_values() {
        let keys = [("param", "167"), ("levtype", "sfc"), ("step", "6")];
        let t = make_field(&keys, 4, 1).unwrap();
        let out = encode_with_template(
            &t,
            &[("step".into(), SetValue::Long(24))],
            &[1.0, f64::NAN, 3.0, 4.0],
            None,
        )
        .unwrap();
        let d = Decoded::new(&out).unwrap();
        assert_eq!(d.mars_keys().unwrap().get("step"), Some("24"));
        let v = d.values().unwrap();
        assert_eq!(v[0], 1.0);
        assert!(v[1].is_nan());
        assert!(encode_with_template(b"junk", &[], &[], None).is_err());
    }
}
