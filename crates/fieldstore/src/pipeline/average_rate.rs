//! `average-rate`: an accumulation over `timespan` becomes a mean rate (228228 total
//! precipitation → 235055 mean precipitation rate), values divided by the timespan in seconds.

use super::message::{Field, Payload};
use super::metadata::Value;
use super::statistics::tables;

pub fn apply(f: &mut Field) -> Result<(), String> {
    let md = &f.metadata;
    if md.contains("stattype") {
        return Err("average-rate of a field that already has a stattype".into());
    }
    let param: i64 = match md.get("param") {
        Some(Value::Int(p)) => *p,
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map_err(|_| format!("param '{s}' is not a number"))?,
        Some(other) => {
            return Err(format!(
                "param must be an int, it is the {} {other}",
                other.type_name()
            ))
        }
        None => return Err("missing required key 'param'".into()),
    };
    let seconds = match md.get("timespan") {
        Some(Value::Int(h)) => *h * 3600,
        Some(Value::String(s)) => {
            let t = s.trim();
            if let Some(n) = t.strip_suffix('s') {
                n.parse()
                    .map_err(|_| format!("timespan '{s}' is not a duration"))?
            } else {
                t.trim_end_matches('h')
                    .parse::<i64>()
                    .map_err(|_| format!("timespan '{s}' is not a duration"))?
                    * 3600
            }
        }
        Some(other) => {
            return Err(format!(
                "timespan must be an int, it is the {} {other}",
                other.type_name()
            ))
        }
        None => return Err("missing required key 'timespan'".into()),
    };
    if seconds <= 0 {
        return Err(format!("timespan of {seconds} s cannot make a rate"));
    }
    let out = tables::average_rate_param(param).ok_or_else(|| {
        format!("no average-rate param for param {param} (average_rate_param_mappings)")
    })?;
    let missing = f.missing_value()?;
    let Payload::Values(v) = &mut f.payload else {
        return Err("average-rate needs decoded values".into());
    };
    for x in v.iter_mut() {
        if Some(*x) != missing && !x.is_nan() {
            *x /= seconds as f64;
        }
    }
    f.metadata.set("param", out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::metadata::Metadata;

    #[test]
    fn precipitation_rate() {
        let mut md = Metadata::new();
        md.set("param", 228228i64);
        md.set("timespan", 1i64);
        let mut f = Field::values(md, vec![3.6, 7.2]);
        apply(&mut f).unwrap();
        assert_eq!(f.metadata.int("param").unwrap(), Some(235055));
        assert_eq!(f.payload, Payload::Values(vec![0.001, 0.002]));
        let mut g = Field::values(Metadata::new(), vec![1.0]);
        assert!(apply(&mut g).unwrap_err().contains("param"));
    }
}
