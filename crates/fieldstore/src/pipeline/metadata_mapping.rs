//! `metadata-mapping`: copies keys from a record of a mapping file, the record found by a key of
//! the message (NEMO names → GRIB params, `stream lwda → mnth`).

use super::config::{parse_bool, substitute, ActionConfig, Env};
use super::error::PipelineError;
use super::message::Field;
use super::metadata::{Metadata, Value};
use super::node::{self, Node};

#[derive(Debug, Clone)]
struct Mapping {
    source_key: String,
    record_key: String,
    map: Vec<(String, String)>,
    optional: Vec<(String, String)>,
    target_path: Option<String>,
}

#[derive(Debug, Clone)]
pub struct MetadataMapping {
    records: Vec<Metadata>,
    mappings: Vec<Mapping>,
    enforce_match: bool,
    overwrite: bool,
}

impl MetadataMapping {
    pub fn from_config(cfg: &ActionConfig, env: Env) -> Result<MetadataMapping, PipelineError> {
        let m = cfg
            .node
            .get("mapping")
            .ok_or_else(|| cfg.error("mapping: (a file) is required"))?;
        let name = m
            .as_str()
            .ok_or_else(|| cfg.error_at(m, "mapping: must be a path"))?;
        let path = cfg.input_path(name);
        let origin = path.display().to_string();
        let text = std::fs::read_to_string(&path)
            .map_err(|e| cfg.error_at(m, format!("cannot read mapping file {origin}: {e}")))?;
        let dir = path.parent().map(|p| p.to_path_buf()).unwrap_or_default();
        let mut root = node::parse(&text, &origin)?;
        root.map_strings(&|s| substitute(s, &dir, env));
        let err = |n: &Node, msg: &str| PipelineError::Config {
            origin: origin.clone(),
            line: Some(n.line),
            message: msg.to_string(),
        };
        let data = root
            .get("data")
            .and_then(Node::as_seq)
            .ok_or_else(|| err(&root, "a mapping file needs a 'data:' list"))?;
        let mut records = Vec::new();
        for r in data {
            match r.to_value() {
                Ok(Value::Map(md)) => records.push(md),
                _ => return Err(err(r, "each data record must be a map")),
            }
        }
        let list = root
            .get("mappings")
            .and_then(Node::as_seq)
            .ok_or_else(|| err(&root, "a mapping file needs a 'mappings:' list"))?;
        let mut mappings = Vec::new();
        for mp in list {
            let pairs = mp.get("match").and_then(Node::as_map).ok_or_else(|| {
                err(
                    mp,
                    "each mapping needs match: {<message key>: <record key>}",
                )
            })?;
            let [(source_key, rk)] = pairs else {
                return Err(err(mp, "match: must hold exactly one pair"));
            };
            let record_key = rk
                .scalar_text()
                .ok_or_else(|| err(rk, "match: the record key must be text"))?;
            let read = |k: &str| -> Result<Vec<(String, String)>, PipelineError> {
                match mp.get(k) {
                    None => Ok(Vec::new()),
                    Some(n) => n
                        .as_map()
                        .ok_or_else(|| err(n, "map:/optional-map: must be a map"))?
                        .iter()
                        .map(|(t, r)| {
                            r.scalar_text()
                                .map(|r| (t.clone(), r))
                                .ok_or_else(|| err(r, "record keys must be text"))
                        })
                        .collect(),
                }
            };
            mappings.push(Mapping {
                source_key: source_key.clone(),
                record_key,
                map: read("map")?,
                optional: read("optional-map")?,
                target_path: mp.get("target-path").and_then(Node::scalar_text),
            });
        }
        let flag = |k: &str, d: bool| -> Result<bool, PipelineError> {
            match cfg.node.get(k) {
                None => Ok(d),
                Some(n) => {
                    parse_bool(n).ok_or_else(|| cfg.error_at(n, format!("{k}: must be a bool")))
                }
            }
        };
        Ok(MetadataMapping {
            records,
            mappings,
            enforce_match: flag("enforce-match", true)?,
            overwrite: flag("overwrite-existing", false)?,
        })
    }

    pub fn apply(&self, f: &mut Field) -> Result<(), String> {
        for m in &self.mappings {
            let Some(v) = f.metadata.get(&m.source_key).cloned() else {
                if self.enforce_match {
                    return Err(format!(
                        "missing key '{}' that the mapping matches on",
                        m.source_key
                    ));
                }
                continue;
            };
            let Some(record) = self
                .records
                .iter()
                .find(|r| r.get(&m.record_key) == Some(&v))
            else {
                if self.enforce_match {
                    return Err(format!("no mapping record has {} = {v}", m.record_key));
                }
                continue;
            };
            let mut target = match &m.target_path {
                Some(p) => match f.metadata.get(p) {
                    Some(Value::Map(inner)) => inner.clone(),
                    _ => Metadata::new(),
                },
                None => std::mem::take(&mut f.metadata),
            };
            for (to, from) in &m.map {
                let value = record
                    .get(from)
                    .ok_or_else(|| format!("the record for {v} has no key '{from}'"))?;
                if self.overwrite || !target.contains(to) {
                    target.set(to.clone(), value.clone());
                }
            }
            for (to, from) in &m.optional {
                if let Some(value) = record.get(from) {
                    if self.overwrite || !target.contains(to) {
                        target.set(to.clone(), value.clone());
                    }
                }
            }
            match &m.target_path {
                Some(p) => f.metadata.set(p.clone(), Value::Map(target)),
                None => f.metadata = target,
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::config::{load_str, Side};

    #[test]
    fn maps_by_a_record_key() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("m.yaml"),
            "data:\n  - {nemo: sst, paramId: 262101, gridType: orca}\nmappings:\n  - match: {name: nemo}\n    map: {paramId: paramId}\n    optional-map: {gridType: gridType, nothere: nothere}\n",
        )
        .unwrap();
        let plan = "plans:\n  - actions:\n      - {type: metadata-mapping, mapping: m.yaml}\n";
        let env = |_: &str| None;
        let c = load_str(plan, "p", dir.path(), Side::Client, &env).unwrap();
        let mm = MetadataMapping::from_config(&c.plans[0].actions[0], &env).unwrap();
        let mut md = Metadata::new();
        md.set("name", "sst");
        let mut f = Field::values(md, vec![]);
        mm.apply(&mut f).unwrap();
        assert_eq!(f.metadata.int("paramId").unwrap(), Some(262101));
        assert_eq!(
            f.metadata.text("gridType").unwrap().as_deref(),
            Some("orca")
        );
        let mut md = Metadata::new();
        md.set("name", "other");
        assert!(mm.apply(&mut Field::values(md, vec![])).is_err());
    }
}
