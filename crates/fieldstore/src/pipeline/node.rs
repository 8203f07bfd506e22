//! Plan YAML as a tree that remembers the line of every value, so an error in the tenth action of
//! an included file says which file and line. Types are kept as YAML gives them: `167` is an int,
//! `"167"` a string, which select matching depends on.

use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;

use super::error::PipelineError;
use super::metadata::{Metadata, Value};

/// One YAML value and the line it starts on.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub line: u64,
    pub kind: NodeKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum NodeKind {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    Seq(Vec<Node>),
    Map(Vec<(String, Node)>),
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        let s: Spanned<NodeKind> = Spanned::deserialize(d)?;
        Ok(Node {
            line: s.referenced.line(),
            kind: s.value,
        })
    }
}

impl<'de> Deserialize<'de> for NodeKind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<NodeKind, D::Error> {
        d.deserialize_any(KindVisitor)
    }
}

struct KindVisitor;

impl<'de> Visitor<'de> for KindVisitor {
    type Value = NodeKind;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a YAML value")
    }
    fn visit_unit<E: de::Error>(self) -> Result<NodeKind, E> {
        Ok(NodeKind::Null)
    }
    fn visit_none<E: de::Error>(self) -> Result<NodeKind, E> {
        Ok(NodeKind::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<NodeKind, D::Error> {
        NodeKind::deserialize(d)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<NodeKind, E> {
        Ok(NodeKind::Bool(v))
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<NodeKind, E> {
        Ok(NodeKind::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<NodeKind, E> {
        Ok(i64::try_from(v)
            .map(NodeKind::Int)
            .unwrap_or(NodeKind::Float(v as f64)))
    }
    fn visit_i128<E: de::Error>(self, v: i128) -> Result<NodeKind, E> {
        Ok(i64::try_from(v)
            .map(NodeKind::Int)
            .unwrap_or(NodeKind::Float(v as f64)))
    }
    fn visit_u128<E: de::Error>(self, v: u128) -> Result<NodeKind, E> {
        Ok(i64::try_from(v)
            .map(NodeKind::Int)
            .unwrap_or(NodeKind::Float(v as f64)))
    }
    fn visit_f64<E: de::Error>(self, v: f64) -> Result<NodeKind, E> {
        Ok(NodeKind::Float(v))
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<NodeKind, E> {
        Ok(NodeKind::Str(v.to_string()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<NodeKind, E> {
        Ok(NodeKind::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<NodeKind, A::Error> {
        let mut out = Vec::new();
        while let Some(n) = seq.next_element::<Node>()? {
            out.push(n);
        }
        Ok(NodeKind::Seq(out))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<NodeKind, A::Error> {
        let mut out = Vec::new();
        while let Some(k) = map.next_key::<NodeKind>()? {
            let key = match k {
                NodeKind::Str(s) => s,
                NodeKind::Int(i) => i.to_string(),
                NodeKind::Float(f) => f.to_string(),
                NodeKind::Bool(b) => b.to_string(),
                NodeKind::Null => "null".to_string(),
                _ => return Err(de::Error::custom("a map key must be a scalar")),
            };
            let v = map.next_value::<Node>()?;
            out.push((key, v));
        }
        Ok(NodeKind::Map(out))
    }
}

/// Parses YAML text into a tree; `origin` names the file in errors.
pub fn parse(text: &str, origin: &str) -> Result<Node, PipelineError> {
    let mut options = serde_saphyr::Options::default();
    options.with_snippet = false;
    options.strict_booleans = true;
    serde_saphyr::from_str_with_options::<Node>(text, options).map_err(|e| PipelineError::Config {
        origin: origin.to_string(),
        line: None,
        message: format!("invalid YAML: {e}"),
    })
}

impl Node {
    pub fn new(line: u64, kind: NodeKind) -> Node {
        Node { line, kind }
    }

    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.kind {
            NodeKind::Map(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&[(String, Node)]> {
        match &self.kind {
            NodeKind::Map(m) => Some(m),
            _ => None,
        }
    }

    pub fn as_seq(&self) -> Option<&[Node]> {
        match &self.kind {
            NodeKind::Seq(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            NodeKind::Str(s) => Some(s),
            _ => None,
        }
    }

    /// Scalars as text (`1d`, `24`), as eckit's configuration reads them.
    pub fn scalar_text(&self) -> Option<String> {
        match &self.kind {
            NodeKind::Str(s) => Some(s.clone()),
            NodeKind::Int(i) => Some(i.to_string()),
            NodeKind::Float(f) => Some(f.to_string()),
            NodeKind::Bool(b) => Some(b.to_string()),
            _ => None,
        }
    }

    pub fn type_name(&self) -> &'static str {
        match &self.kind {
            NodeKind::Null => "null",
            NodeKind::Bool(_) => "bool",
            NodeKind::Int(_) => "int",
            NodeKind::Float(_) => "double",
            NodeKind::Str(_) => "string",
            NodeKind::Seq(_) => "list",
            NodeKind::Map(_) => "map",
        }
    }

    /// Applies `f` to every string in the tree (the `{ENV}` substitution).
    pub fn map_strings(&mut self, f: &dyn Fn(&str) -> String) {
        match &mut self.kind {
            NodeKind::Str(s) => *s = f(s),
            NodeKind::Seq(v) => v.iter_mut().for_each(|n| n.map_strings(f)),
            NodeKind::Map(m) => m.iter_mut().for_each(|(_, n)| n.map_strings(f)),
            _ => {}
        }
    }

    /// The node as a metadata value; lists must be homogeneous, as MultIO requires.
    pub fn to_value(&self) -> Result<Value, String> {
        Ok(match &self.kind {
            NodeKind::Null => Value::Null,
            NodeKind::Bool(b) => Value::Bool(*b),
            NodeKind::Int(i) => Value::Int(*i),
            NodeKind::Float(f) => Value::Double(*f),
            NodeKind::Str(s) => Value::String(s.clone()),
            NodeKind::Map(m) => {
                let mut md = Metadata::new();
                for (k, v) in m {
                    md.set(k.clone(), v.to_value()?);
                }
                Value::Map(md)
            }
            NodeKind::Seq(items) => {
                let vals: Vec<Value> =
                    items.iter().map(Node::to_value).collect::<Result<_, _>>()?;
                homogeneous(vals).ok_or_else(|| {
                    "a list must hold values of one type (all int, all double, all string or all bool)"
                        .to_string()
                })?
            }
        })
    }
}

/// A list of scalars of one type as one typed list; an empty list is an (empty) int list.
fn homogeneous(vals: Vec<Value>) -> Option<Value> {
    match vals.first() {
        None => Some(Value::Ints(Vec::new())),
        Some(Value::Int(_)) => vals
            .into_iter()
            .map(|v| if let Value::Int(i) = v { Some(i) } else { None })
            .collect::<Option<Vec<_>>>()
            .map(Value::Ints),
        Some(Value::Double(_)) => vals
            .into_iter()
            .map(|v| {
                if let Value::Double(i) = v {
                    Some(i)
                } else {
                    None
                }
            })
            .collect::<Option<Vec<_>>>()
            .map(Value::Doubles),
        Some(Value::String(_)) => vals
            .into_iter()
            .map(|v| {
                if let Value::String(i) = v {
                    Some(i)
                } else {
                    None
                }
            })
            .collect::<Option<Vec<_>>>()
            .map(Value::Strings),
        Some(Value::Bool(_)) => vals
            .into_iter()
            .map(|v| {
                if let Value::Bool(i) = v {
                    Some(i)
                } else {
                    None
                }
            })
            .collect::<Option<Vec<_>>>()
            .map(Value::Bools),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_and_types() {
        let n = parse(
            "plans:\n  - name: a\n    x: 167\n    y: '167'\n    z: 1.5\n",
            "t",
        )
        .unwrap();
        let plan = &n.get("plans").unwrap().as_seq().unwrap()[0];
        assert_eq!(plan.line, 2);
        assert_eq!(plan.get("x").unwrap().kind, NodeKind::Int(167));
        assert_eq!(plan.get("x").unwrap().line, 3);
        assert_eq!(plan.get("y").unwrap().kind, NodeKind::Str("167".into()));
        assert_eq!(plan.get("z").unwrap().kind, NodeKind::Float(1.5));
    }

    #[test]
    fn mixed_lists_are_refused() {
        let n = parse("[1, 'a']", "t").unwrap();
        assert!(n.to_value().is_err());
        let n = parse("[1, 2]", "t").unwrap();
        assert_eq!(n.to_value().unwrap(), Value::Ints(vec![1, 2]));
    }

    #[test]
    fn bad_yaml_names_the_origin() {
        let e = parse("a: [", "plan.yaml").unwrap_err().to_string();
        assert!(e.starts_with("plan.yaml"), "{e}");
    }
}
