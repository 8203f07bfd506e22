//! The fields a request names, as `fdb_archive_multiple` checks its messages against them: as
//! in FDB5, every message must be one of the request's fields, each field exactly once, and
//! none missing. Values are compared in their canonical form (`param=t` names `130`).

use std::collections::HashSet;

use fieldstore::model::request::Request;
use fieldstore::model::schema::{ExpandMode, Schema, SplitKey};
use fieldstore::model::types::Context;
use fieldstore::model::ModelError;

use crate::errors::{CError, Result};

/// Examples of missing fields an error names; the rest are counted.
const SHOWN: usize = 3;

/// The cartesian product of the request's keywords and canonical values, and which of its
/// fields the messages seen so far filled.
pub struct Cube {
    request: String,
    axes: Vec<(String, Vec<String>)>,
    filled: HashSet<Vec<usize>>,
}

impl Cube {
    /// `req`'s ranges expanded and values made canonical by the schema's types. Keywords the
    /// schema stores under another name (a date kept as its month) are not axes: their values
    /// are checked by nothing, as a message carries only the stored name.
    pub fn new(schema: &Schema, req: &Request, cx: &Context) -> Result<Cube> {
        let expanded = req.expand_ranges(cx).map_err(ModelError::from)?;
        let expansions = schema
            .expand(expanded.iter(), ExpandMode::List, cx)
            .map_err(ModelError::from)?;
        if expansions.is_empty() {
            return Err(CError::Invalid(format!(
                "fdb_archive_multiple: the request {expanded} names no field the schema can hold"
            )));
        }
        let mut axes = Vec::new();
        for (kw, _) in expanded.iter() {
            let mut values: Vec<String> = Vec::new();
            let mut seen = false;
            for level in expansions.iter().flat_map(|e| e.levels.iter()) {
                for (name, vals) in &level.keywords {
                    if name.as_str() != kw {
                        continue;
                    }
                    seen = true;
                    for v in vals.iter().flatten() {
                        if !values.contains(v) {
                            values.push(v.clone());
                        }
                    }
                }
            }
            if seen {
                axes.push((kw.to_string(), values));
            }
        }
        Ok(Cube {
            request: expanded.to_string(),
            axes,
            filled: HashSet::new(),
        })
    }

    /// Fills the field of message `number` (1-based), whose key the schema split.
    pub fn fill(&mut self, number: usize, key: &SplitKey) -> Result<()> {
        let combined = key.combined();
        let mut cell = Vec::with_capacity(self.axes.len());
        for (kw, values) in &self.axes {
            let v = combined.get(kw).unwrap_or("");
            let Some(i) = values.iter().position(|x| x == v) else {
                return Err(CError::Invalid(format!(
                    "fdb_archive_multiple: message {number} {key} is not a field of the request \
                     {}: {kw}={v} is not one of {}; nothing archived",
                    self.request,
                    values.join("/")
                )));
            };
            cell.push(i);
        }
        if !self.filled.insert(cell) {
            return Err(CError::Invalid(format!(
                "fdb_archive_multiple: message {number} {key} repeats a field an earlier message \
                 gave; nothing archived"
            )));
        }
        Ok(())
    }

    /// Fails naming the request's fields no message filled.
    pub fn complete(&self) -> Result<()> {
        let total = self
            .axes
            .iter()
            .try_fold(1usize, |n, (_, v)| n.checked_mul(v.len()));
        if total == Some(self.filled.len()) {
            return Ok(());
        }
        let missing = total.map_or_else(
            || "more fields than can be counted".to_string(),
            |t| format!("{} field(s)", t - self.filled.len()),
        );
        Err(CError::Invalid(format!(
            "fdb_archive_multiple: the messages lack {missing} of the request {}, e.g. {}; \
             nothing archived",
            self.request,
            self.vacant(SHOWN).join(", ")
        )))
    }

    /// Up to `n` unfilled fields as `k=v,...`, in the request's order. Stops after at most
    /// `filled + n` fields, however large the product.
    fn vacant(&self, n: usize) -> Vec<String> {
        let mut out = Vec::new();
        if self.axes.iter().any(|(_, v)| v.is_empty()) {
            return out;
        }
        let mut cell = vec![0usize; self.axes.len()];
        loop {
            if !self.filled.contains(&cell) {
                let field: Vec<String> = self
                    .axes
                    .iter()
                    .zip(&cell)
                    .map(|((k, v), &i)| format!("{k}={}", v[i]))
                    .collect();
                out.push(field.join(","));
                if out.len() == n {
                    return out;
                }
            }
            // The next cell, last axis fastest; done when the first wraps.
            let mut axis = self.axes.len();
            loop {
                if axis == 0 {
                    return out;
                }
                axis -= 1;
                cell[axis] += 1;
                if cell[axis] < self.axes[axis].1.len() {
                    break;
                }
                cell[axis] = 0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fieldstore::model::Key;

    fn split(schema: &Schema, pairs: &[(&str, &str)]) -> SplitKey {
        schema
            .split(
                &Key::from_pairs(pairs.iter().copied()),
                &Context::default(),
                false,
            )
            .unwrap()
    }

    fn field(level: &str, param: &str) -> Vec<(&'static str, String)> {
        [
            ("class", "od"),
            ("expver", "0001"),
            ("stream", "oper"),
            ("date", "20261122"),
            ("time", "1200"),
            ("domain", "g"),
            ("type", "fc"),
            ("levtype", "pl"),
            ("step", "0"),
        ]
        .into_iter()
        .map(|(k, v)| (k, v.to_string()))
        .chain([
            ("levelist", level.to_string()),
            ("param", param.to_string()),
        ])
        .collect()
    }

    fn key(schema: &Schema, level: &str, param: &str) -> SplitKey {
        let f = field(level, param);
        let pairs: Vec<(&str, &str)> = f.iter().map(|(k, v)| (*k, v.as_str())).collect();
        split(schema, &pairs)
    }

    fn request(levels: &[&str]) -> Request {
        let mut r = Request::default();
        r.set("class", vec!["od".into()]);
        r.set("stream", vec!["oper".into()]);
        r.set("levelist", levels.iter().map(|s| s.to_string()).collect());
        r.set("param", vec!["130".into()]);
        r.set("step", vec!["0".into(), "to".into(), "0".into()]);
        r
    }

    #[test]
    fn every_field_once_and_none_missing() {
        let schema = Schema::default_schema();
        let cx = Context::default();
        let mut cube = Cube::new(&schema, &request(&["850", "500"]), &cx).unwrap();
        cube.fill(1, &key(&schema, "500", "130")).unwrap();
        let e = cube.complete().unwrap_err().to_string();
        assert!(e.contains("lack 1 field(s)"), "{e}");
        assert!(e.contains("levelist=850"), "{e}");
        let e = cube.fill(2, &key(&schema, "500", "130")).unwrap_err();
        assert!(e.to_string().contains("repeats"), "{e}");
        cube.fill(3, &key(&schema, "850", "130")).unwrap();
        cube.complete().unwrap();
    }

    #[test]
    fn a_field_outside_the_request_is_refused() {
        let schema = Schema::default_schema();
        let cx = Context::default();
        let mut cube = Cube::new(&schema, &request(&["850"]), &cx).unwrap();
        let e = cube.fill(1, &key(&schema, "300", "130")).unwrap_err();
        assert!(
            e.to_string().contains("levelist=300 is not one of 850"),
            "{e}"
        );
        let e = cube.fill(1, &key(&schema, "850", "131")).unwrap_err();
        assert!(e.to_string().contains("param=131"), "{e}");
    }
}
