//! `encode`: fields of values become GRIB (the input field's own GRIB or a template file as
//! template), or stay raw values (`format: raw`, what a file sink then writes as is).

use std::sync::Arc;

use super::config::ActionConfig;
use super::error::PipelineError;
use super::message::{Field, Payload};
use super::metadata::{Metadata, Value};
use super::node::Node;
use crate::grib::encode::{encode_with_template, SetValue};

#[derive(Debug, Clone)]
pub struct Encode {
    raw: bool,
    template: Option<Arc<[u8]>>,
    overwrite: Vec<(String, SetValue)>,
    additional: Metadata,
}

fn set_value(v: &Value) -> Option<SetValue> {
    match v {
        Value::Int(i) => Some(SetValue::Long(*i)),
        Value::Bool(b) => Some(SetValue::Long(i64::from(*b))),
        Value::Double(d) => Some(SetValue::Double(*d)),
        Value::String(s) => Some(SetValue::String(s.clone())),
        _ => None,
    }
}

impl Encode {
    pub fn from_config(cfg: &ActionConfig) -> Result<Encode, PipelineError> {
        // Options may also be nested under `encoding:`.
        let n: &Node = cfg.node.get("encoding").unwrap_or(&cfg.node);
        let format = n
            .get("format")
            .and_then(Node::scalar_text)
            .ok_or_else(|| cfg.error("format: (grib or raw) is required"))?;
        let raw = match format.as_str() {
            "raw" => true,
            "grib" => false,
            other => return Err(cfg.error(format!("format '{other}' is not grib or raw"))),
        };
        let template = match n.get("template") {
            None => None,
            Some(t) => {
                let name = t
                    .as_str()
                    .ok_or_else(|| cfg.error_at(t, "template: must be a path"))?;
                let path = cfg.input_path(name);
                let bytes = std::fs::read(&path).map_err(|e| {
                    cfg.error_at(t, format!("cannot read template {}: {e}", path.display()))
                })?;
                Some(Arc::from(bytes))
            }
        };
        let mut overwrite = Vec::new();
        if let Some(o) = n.get("overwrite") {
            let maps: Vec<&Node> = match o.as_seq() {
                Some(list) => list.iter().collect(),
                None => vec![o],
            };
            for m in maps {
                let pairs = m
                    .as_map()
                    .ok_or_else(|| cfg.error_at(m, "overwrite: must be a map or a list of maps"))?;
                for (k, v) in pairs {
                    let sv = v
                        .to_value()
                        .ok()
                        .as_ref()
                        .and_then(set_value)
                        .ok_or_else(|| {
                            cfg.error_at(v, format!("overwrite: {k} must be a scalar"))
                        })?;
                    overwrite.push((k.clone(), sv));
                }
            }
        }
        let mut additional = Metadata::new();
        if let Some(a) = n.get("additional-metadata").or_else(|| n.get("run")) {
            match a.to_value() {
                Ok(Value::Map(m)) => additional = m,
                _ => return Err(cfg.error_at(a, "additional-metadata: must be a map")),
            }
        }
        for key in ["atlas-named-grid", "unstructured-grid-type"] {
            if let Some(k) = n.get(key) {
                return Err(PipelineError::Refused {
                    origin: cfg.origin.clone(),
                    line: Some(k.line),
                    name: format!("encode: {key}"),
                    reason: "rewriting a template's geometry needs atlas grids, which fieldstore does not have".into(),
                });
            }
        }
        Ok(Encode {
            raw,
            template,
            overwrite,
            additional,
        })
    }

    pub fn apply(&self, f: &mut Field) -> Result<(), String> {
        f.metadata.merge(&self.additional);
        if self.raw {
            return Ok(());
        }
        let Payload::Values(values) = &f.payload else {
            // Already encoded: passes on.
            return Ok(());
        };
        let template = self
            .template
            .clone()
            .or_else(|| f.source_grib.clone())
            .ok_or("no template: name one (template:) or feed fields decoded from GRIB")?;
        let mut keys = self.overwrite.clone();
        keys.extend(grib_keys(&f.metadata, template_edition(&template))?);
        if let Some(Value::Map(m)) = f.metadata.get("encoder-overwrites") {
            keys.extend(
                m.iter()
                    .filter_map(|(k, v)| set_value(v).map(|s| (k.clone(), s))),
            );
        }
        let missing = f.missing_value()?;
        let bytes = encode_with_template(&template, &keys, values, missing)
            .map_err(|e| format!("GRIB encoding: {e}"))?;
        f.payload = Payload::Encoded(bytes);
        f.metadata.set("misc-format", "grib");
        Ok(())
    }
}

fn template_edition(t: &[u8]) -> i64 {
    t.get(7).map(|b| i64::from(*b)).unwrap_or(2)
}

/// The GRIB keys a field's metadata sets, in the order ecCodes needs them.
fn grib_keys(md: &Metadata, edition: i64) -> Result<Vec<(String, SetValue)>, String> {
    let mut keys = Vec::new();
    // `param` first: statistics map it and may leave a stale `paramId` (MultIO does).
    let param = match md.text("param")? {
        Some(p) if p.trim().parse::<i64>().is_ok() => Some(p),
        _ => md.text("paramId")?,
    };
    for k in ["class", "stream", "type", "expver"] {
        if let Some(v) = md.text(k)? {
            keys.push((k.to_string(), SetValue::String(v)));
        }
    }
    if let Some(v) = md.int("levelist")?.or(md.int("level")?) {
        keys.push(("level".into(), SetValue::Long(v)));
    }
    let date = md.int("startDate")?.or(md.int("date")?);
    let time = md.int("startTime")?.map(|t| t / 100).or(md.int("time")?);
    if let Some(d) = date {
        keys.push(("dataDate".into(), SetValue::Long(d)));
    }
    if let Some(t) = time {
        keys.push(("dataTime".into(), SetValue::Long(t)));
    }
    // statistics-mtg2 outputs name their statistic through the param they map to.
    // The param before the time range: setting a paramId resets the product template.
    if let Some(p) = &param {
        keys.push(("paramId".into(), SetValue::String(p.clone())));
    }
    let statistic = match md.text("operation")? {
        Some(o) => Some(o).filter(|o| o != "instant"),
        None if md.contains("timespan") => param
            .as_deref()
            .and_then(|p| p.trim().parse::<i64>().ok())
            .and_then(crate::pipeline::statistics::tables::param_statistic)
            .and_then(|t| match t {
                0 => Some("average"),
                1 => Some("accumulate"),
                2 => Some("maximum"),
                3 => Some("minimum"),
                4 => Some("difference"),
                6 => Some("stddev"),
                8 => Some("inverse-difference"),
                _ => None,
            })
            .map(str::to_string),
        None => None,
    };
    let range = match (md.int("startStepInHours")?, md.int("endStepInHours")?) {
        (Some(a), Some(b)) => Some((a, b)),
        _ => match (md.int("timespan")?, md.int("step")?) {
            (Some(ts), Some(s)) if statistic.is_some() => Some((s - ts, s)),
            _ => None,
        },
    };
    match (statistic, range, edition) {
        (Some(op), Some((a, b)), 2) => {
            let tosp = match op.as_str() {
                "average" => 0,
                "accumulate" => 1,
                "maximum" => 2,
                "minimum" => 3,
                "difference" => 4,
                "stddev" => 6,
                "inverse-difference" => 8,
                other => {
                    return Err(format!(
                        "operation '{other}' has no GRIB2 statistical processing"
                    ))
                }
            };
            keys.push(("productDefinitionTemplateNumber".into(), SetValue::Long(8)));
            keys.push(("typeOfStatisticalProcessing".into(), SetValue::Long(tosp)));
            keys.push(("stepRange".into(), SetValue::String(format!("{a}-{b}"))));
        }
        _ => {
            if let Some(s) = md.int("step")? {
                keys.push(("step".into(), SetValue::Long(s)));
            }
        }
    }
    Ok(keys)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grib::{sample::make_field, Decoded};
    use crate::pipeline::config::{load_str, Side};
    use std::path::Path;

    fn encoder() -> Encode {
        let plan = "plans:\n  - actions:\n      - {type: encode, format: grib}\n";
        let c = load_str(plan, "t", Path::new("."), Side::Client, &|_| None).unwrap();
        Encode::from_config(&c.plans[0].actions[0]).unwrap()
    }

    fn field(md: &[(&str, Value)]) -> Field {
        let keys = [
            ("param", "167"),
            ("levtype", "sfc"),
            ("step", "24"),
            ("date", "20250101"),
            ("time", "0"),
        ];
        let mut f = Field::values(
            md.iter().map(|(k, v)| (k.to_string(), v.clone())).collect(),
            vec![1.0, 2.0, 3.0, 4.0],
        );
        f.source_grib = Some(Arc::from(make_field(&keys, 4, 1).unwrap()));
        f
    }

    fn key(f: &Field, k: &str) -> String {
        let Payload::Encoded(b) = &f.payload else {
            return String::new();
        };
        match Decoded::new(b).unwrap().get(k).unwrap() {
            Some(crate::grib::KeyValue::String(s)) => s,
            Some(crate::grib::KeyValue::Long(l)) => l.to_string(),
            other => format!("{other:?}"),
        }
    }

    #[test]
    fn legacy_statistics_get_a_time_range() {
        let mut f = field(&[
            ("operation", "maximum".into()),
            ("startStepInHours", 0i64.into()),
            ("endStepInHours", 24i64.into()),
            ("step", 24i64.into()),
            ("param", "167".into()),
        ]);
        encoder().apply(&mut f).unwrap();
        assert_eq!(key(&f, "stepRange"), "0-24");
        assert_eq!(key(&f, "typeOfStatisticalProcessing"), "2");
    }

    #[test]
    fn mtg2_statistics_by_param_and_timespan() {
        let mut f = field(&[
            ("param", 228004i64.into()),
            ("timespan", 24i64.into()),
            ("step", 48i64.into()),
        ]);
        encoder().apply(&mut f).unwrap();
        assert_eq!(key(&f, "stepRange"), "24-48");
        assert_eq!(key(&f, "paramId"), "228004");
    }

    #[test]
    fn without_a_template_the_field_fails() {
        let mut f = Field::values(Metadata::new(), vec![1.0]);
        assert!(encoder().apply(&mut f).unwrap_err().contains("template"));
    }
}
