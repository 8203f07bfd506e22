//! `scale`: unit conversions that come with a param change (local ECMWF units to WMO's).

use super::config::ActionConfig;
use super::error::PipelineError;
use super::message::{Field, Payload};
use super::metadata::Value;
use super::statistics::tables;

#[derive(Debug, Clone)]
pub struct Scale {
    /// (param in, param out, factor), first match wins.
    rules: Vec<(i64, i64, f64)>,
}

impl Scale {
    pub fn from_config(cfg: &ActionConfig) -> Result<Scale, PipelineError> {
        let mut rules = Vec::new();
        if let Some(p) = cfg.node.get("preset-mappings") {
            let name = p.scalar_text().unwrap_or_default();
            let table = tables::local_to_wmo();
            match name.as_str() {
                // MultIO's local-to-wmo case falls through into the reverse one (a missing
                // `break`); we install the forward mappings only.
                "local-to-wmo" => rules.extend(table),
                "wmo-to-local" => rules.extend(table.iter().map(|(a, b, f)| (*b, *a, 1.0 / f))),
                other => {
                    return Err(cfg.error_at(
                        p,
                        format!("preset-mappings '{other}' is not local-to-wmo or wmo-to-local"),
                    ))
                }
            }
        }
        if let Some(c) = cfg.node.get("custom-mappings") {
            let list = c
                .as_seq()
                .ok_or_else(|| cfg.error_at(c, "custom-mappings: must be a list"))?;
            for m in list {
                let num = |k: &str| {
                    m.get(k)
                        .and_then(|n| n.scalar_text())
                        .and_then(|t| t.parse::<f64>().ok())
                };
                let (Some(a), Some(b), Some(f)) =
                    (num("param-in"), num("param-out"), num("scaling"))
                else {
                    return Err(cfg.error_at(
                        m,
                        "each custom mapping needs param-in, param-out and scaling",
                    ));
                };
                rules.push((a as i64, b as i64, f));
            }
        }
        if rules.is_empty() {
            return Err(cfg.error("needs preset-mappings or custom-mappings"));
        }
        Ok(Scale { rules })
    }

    pub fn apply(&self, f: &mut Field) -> Result<(), String> {
        let param = match f.metadata.text("param")? {
            Some(p) => p,
            None => match f.metadata.text("paramId")? {
                Some(p) => p,
                None => return Ok(()),
            },
        };
        let Ok(p) = param.trim().parse::<i64>() else {
            return Ok(());
        };
        let Some((_, out, factor)) = self.rules.iter().find(|r| r.0 == p) else {
            return Ok(());
        };
        let missing = f.missing_value()?;
        let Payload::Values(v) = &mut f.payload else {
            return Err("scale needs decoded values".into());
        };
        for x in v.iter_mut() {
            if Some(*x) != missing && !x.is_nan() {
                *x *= factor;
            }
        }
        // Keep the key's type: a string param stays a string.
        let new = match f.metadata.get("param") {
            Some(Value::String(_)) => Value::String(out.to_string()),
            _ => Value::Int(*out),
        };
        f.metadata.set("param", new);
        if f.metadata.contains("paramId") {
            f.metadata.set("paramId", *out);
        }
        Ok(())
    }
}
