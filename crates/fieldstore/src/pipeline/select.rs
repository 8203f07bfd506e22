//! `select`: MultIO's metadata matcher. Matching is type-strict: a value of another type than
//! the ones listed is an error (unless `enforce-same-key-types: false`), not a silent miss,
//! because a plan selecting `paramId: ["167"]` against int paramIds would otherwise drop every
//! field unnoticed.

use super::metadata::{Metadata, Value};
use super::node::Node;

/// A compiled `select` block.
#[derive(Debug, Clone, PartialEq)]
pub enum Matcher {
    /// `match:` and/or `ignore:`: (any match map) AND NOT (any ignore map).
    MatchIgnore {
        matched: Option<Vec<KeyMap>>,
        ignored: Option<Vec<KeyMap>>,
        strict: bool,
    },
    Any(Vec<Matcher>),
    All(Vec<Matcher>),
    Not(Box<Matcher>),
}

/// Every key present with a value in its set.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyMap(pub Vec<(String, Value)>);

impl Matcher {
    /// Compiles a block; `inherited` is the enclosing block's `enforce-same-key-types`.
    pub fn from_node(node: &Node, inherited: bool) -> Result<Matcher, (u64, String)> {
        let strict = match node.get("enforce-same-key-types") {
            None => inherited,
            Some(n) => super::config::parse_bool(n)
                .ok_or((n.line, "enforce-same-key-types: must be a bool".to_string()))?,
        };
        let (m, i) = (node.get("match"), node.get("ignore"));
        let (any, all, not) = (node.get("any"), node.get("all"), node.get("not"));
        let combinators = [any.is_some(), all.is_some(), not.is_some()]
            .iter()
            .filter(|b| **b)
            .count();
        if combinators > 1 || (combinators == 1 && (m.is_some() || i.is_some())) {
            return Err((
                node.line,
                "a select block takes match/ignore, or exactly one of any, all, not".into(),
            ));
        }
        let blocks = |n: &Node| -> Result<Vec<Matcher>, (u64, String)> {
            let list = n
                .as_seq()
                .ok_or((n.line, "any:/all: must be a list of blocks".to_string()))?;
            list.iter().map(|b| Matcher::from_node(b, strict)).collect()
        };
        if let Some(n) = any {
            return Ok(Matcher::Any(blocks(n)?));
        }
        if let Some(n) = all {
            return Ok(Matcher::All(blocks(n)?));
        }
        if let Some(n) = not {
            return Ok(Matcher::Not(Box::new(Matcher::from_node(n, strict)?)));
        }
        if m.is_none() && i.is_none() {
            return Err((
                node.line,
                "select needs one of match, ignore, any, all or not".into(),
            ));
        }
        Ok(Matcher::MatchIgnore {
            matched: m.map(key_maps).transpose()?,
            ignored: i.map(key_maps).transpose()?,
            strict,
        })
    }

    /// Whether the metadata matches; `Err` on a type mismatch under strict typing.
    pub fn matches(&self, md: &Metadata) -> Result<bool, String> {
        match self {
            Matcher::MatchIgnore {
                matched,
                ignored,
                strict,
            } => {
                if let Some(maps) = matched {
                    if !any_map(maps, md, *strict)? {
                        return Ok(false);
                    }
                }
                if let Some(maps) = ignored {
                    if any_map(maps, md, *strict)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Matcher::Any(list) => {
                for m in list {
                    if m.matches(md)? {
                        return Ok(true);
                    }
                }
                Ok(false)
            }
            Matcher::All(list) => {
                for m in list {
                    if !m.matches(md)? {
                        return Ok(false);
                    }
                }
                Ok(true)
            }
            Matcher::Not(m) => Ok(!m.matches(md)?),
        }
    }
}

fn key_maps(n: &Node) -> Result<Vec<KeyMap>, (u64, String)> {
    let one = |m: &Node| -> Result<KeyMap, (u64, String)> {
        let pairs = m.as_map().ok_or((
            m.line,
            "match:/ignore: takes a map or a list of maps".to_string(),
        ))?;
        let mut out = Vec::new();
        for (k, v) in pairs {
            let value = v.to_value().map_err(|e| (v.line, format!("{k}: {e}")))?;
            if matches!(value, Value::Map(_) | Value::Null) {
                return Err((v.line, format!("{k}: takes a value or a list of values")));
            }
            out.push((k.clone(), value));
        }
        Ok(KeyMap(out))
    };
    match n.as_seq() {
        Some(list) => list.iter().map(one).collect(),
        None => Ok(vec![one(n)?]),
    }
}

fn any_map(maps: &[KeyMap], md: &Metadata, strict: bool) -> Result<bool, String> {
    for m in maps {
        if m.matches(md, strict)? {
            return Ok(true);
        }
    }
    Ok(false)
}

impl KeyMap {
    fn matches(&self, md: &Metadata, strict: bool) -> Result<bool, String> {
        for (key, set) in &self.0 {
            let Some(v) = md.get(key) else {
                return Ok(false);
            };
            if !in_set(key, v, set, strict)? {
                return Ok(false);
            }
        }
        Ok(true)
    }
}

/// Whether `v` is one of `set`'s values; a value of another type is an error when strict.
fn in_set(key: &str, v: &Value, set: &Value, strict: bool) -> Result<bool, String> {
    let found = match (set, v) {
        (Value::Ints(s), Value::Int(x)) => s.contains(x),
        (Value::Doubles(s), Value::Double(x)) => s.contains(x),
        (Value::Strings(s), Value::String(x)) => s.contains(x),
        (Value::Bools(s), Value::Bool(x)) => s.contains(x),
        // An empty list never matches, whatever the message's type (NEMO plans rely on it).
        (Value::Ints(s), _) if s.is_empty() => return Ok(false),
        (a, b) if scalar_type(a) == Some(b.type_name()) => a == b,
        _ => {
            if strict {
                return Err(format!(
                    "select: key '{key}' is the {} {v} in the message but {} in the plan \
                     (types must be the same; set enforce-same-key-types: false to treat this as a miss)",
                    v.type_name(),
                    element_type(set)
                ));
            }
            false
        }
    };
    Ok(found)
}

fn scalar_type(v: &Value) -> Option<&'static str> {
    match v {
        Value::Int(_) | Value::Double(_) | Value::String(_) | Value::Bool(_) => Some(v.type_name()),
        _ => None,
    }
}

fn element_type(set: &Value) -> &'static str {
    match set {
        Value::Ints(_) => "int",
        Value::Doubles(_) => "double",
        Value::Strings(_) => "string",
        Value::Bools(_) => "bool",
        other => other.type_name(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::node::parse;
    use proptest::prelude::*;

    fn matcher(yaml: &str) -> Matcher {
        Matcher::from_node(&parse(yaml, "t").unwrap(), true).unwrap()
    }

    fn md(pairs: &[(&str, Value)]) -> Metadata {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.clone()))
            .collect()
    }

    #[test]
    fn match_and_ignore() {
        let m = matcher("match: [{levtype: sfc, paramId: [8, 9, 144]}]\nignore: {level: 0}");
        let a = md(&[("levtype", "sfc".into()), ("paramId", 9i64.into())]);
        assert!(m.matches(&a).unwrap());
        let mut b = a.clone();
        b.set("level", 0i64);
        assert!(!m.matches(&b).unwrap());
        let c = md(&[("levtype", "sfc".into())]);
        assert!(!m.matches(&c).unwrap(), "a missing key is no match");
        // Ignoring on a key the message lacks does not ignore it.
        let m = matcher("ignore: {foo: 1}");
        assert!(m.matches(&a).unwrap());
    }

    #[test]
    fn any_all_not() {
        let a = md(&[("x", 1i64.into())]);
        assert!(!matcher("any: []").matches(&a).unwrap());
        assert!(matcher("all: []").matches(&a).unwrap());
        assert!(matcher("not: {not: {match: {x: 1}}}").matches(&a).unwrap());
        assert!(matcher("any: [{match: {x: 2}}, {match: {x: 1}}]")
            .matches(&a)
            .unwrap());
        assert!(!matcher("all: [{match: {x: 2}}, {match: {x: 1}}]")
            .matches(&a)
            .unwrap());
    }

    #[test]
    fn types_are_strict() {
        let a = md(&[("paramId", 167i64.into())]);
        let e = matcher("match: {paramId: ['167']}")
            .matches(&a)
            .unwrap_err();
        assert!(e.contains("paramId"), "{e}");
        let loose = matcher("enforce-same-key-types: false\nmatch: {paramId: ['167']}");
        assert!(!loose.matches(&a).unwrap());
        // Inherited by nested blocks.
        let nested = matcher("enforce-same-key-types: false\nany: [{match: {paramId: '167'}}]");
        assert!(!nested.matches(&a).unwrap());
        // A value in the set matches even where other types would not.
        assert!(matcher("match: {paramId: 167}").matches(&a).unwrap());
        // An empty list never matches and is no type error.
        assert!(!matcher("match: {paramId: []}").matches(&a).unwrap());
    }

    #[test]
    fn malformed_blocks() {
        for bad in [
            "{}",
            "{any: [], all: []}",
            "{match: {a: 1}, not: {match: {a: 1}}}",
            "match: {a: [1, x]}",
        ] {
            assert!(
                Matcher::from_node(&parse(bad, "t").unwrap(), true).is_err(),
                "{bad}"
            );
        }
    }

    proptest! {
        #[test]
        fn not_negates(x in -5i64..5, set in proptest::collection::vec(-5i64..5, 0..4)) {
            let list = format!("[{}]", set.iter().map(|v| v.to_string()).collect::<Vec<_>>().join(","));
            let m = matcher(&format!("match: {{k: {list}}}"));
            let n = matcher(&format!("not: {{match: {{k: {list}}}}}"));
            let a = md(&[("k", x.into())]);
            prop_assert_eq!(m.matches(&a).unwrap(), set.contains(&x));
            prop_assert_eq!(n.matches(&a).unwrap(), !set.contains(&x));
        }
    }
}
