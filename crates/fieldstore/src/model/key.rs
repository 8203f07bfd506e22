//! Field keys: ordered keyword/value pairs.

use std::fmt;
use std::sync::Arc;

use compact_str::CompactString;

/// A keyword or value. Inline up to 24 bytes, so cloning a key rarely allocates.
pub type Atom = CompactString;

/// An ordered set of MARS keyword/value pairs.
///
/// Order is meaningful: it is the order the schema names the keywords in, which is how FDB5 prints
/// keys and names directories. Immutable and behind an `Arc` so clones are a refcount bump, which
/// matters because keys are map keys on the archive and list hot paths.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Key {
    entries: Arc<[(Atom, Atom)]>,
}

impl Key {
    pub fn new() -> Self {
        Self::default()
    }

    /// Builds a key from pairs; a repeated keyword keeps its last value at its first position.
    pub fn from_pairs<K, V, I>(pairs: I) -> Self
    where
        K: Into<Atom>,
        V: Into<Atom>,
        I: IntoIterator<Item = (K, V)>,
    {
        let pairs = pairs.into_iter();
        let mut out: Vec<(Atom, Atom)> = Vec::with_capacity(pairs.size_hint().0);
        for (k, v) in pairs {
            let (k, v) = (k.into(), v.into());
            match out.iter_mut().find(|(ek, _)| *ek == k) {
                Some(slot) => slot.1 = v,
                None => out.push((k, v)),
            }
        }
        Key {
            entries: out.into(),
        }
    }

    pub fn get(&self, keyword: &str) -> Option<&str> {
        self.entries
            .iter()
            .find(|(k, _)| k == keyword)
            .map(|(_, v)| v.as_str())
    }

    pub fn contains(&self, keyword: &str) -> bool {
        self.entries.iter().any(|(k, _)| k == keyword)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub fn keywords(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(k, _)| k.as_str())
    }

    pub fn values(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|(_, v)| v.as_str())
    }

    /// A new key with `keyword` set (appended if new).
    pub fn with(&self, keyword: impl Into<Atom>, value: impl Into<Atom>) -> Key {
        let (k, v) = (keyword.into(), value.into());
        let mut out: Vec<(Atom, Atom)> = self.entries.to_vec();
        match out.iter_mut().find(|(ek, _)| *ek == k) {
            Some(slot) => slot.1 = v,
            None => out.push((k, v)),
        }
        Key {
            entries: out.into(),
        }
    }

    /// Concatenation; keywords of `other` override those of `self`.
    pub fn join(&self, other: &Key) -> Key {
        Key::from_pairs(self.iter().chain(other.iter()))
    }

    /// The values joined with `:`, FDB5's fingerprint (directory and index names).
    pub fn fingerprint(&self) -> String {
        let mut s = String::new();
        for (i, v) in self.values().enumerate() {
            if i > 0 {
                s.push(':');
            }
            s.push_str(v);
        }
        s
    }

    /// The same pairs sorted by keyword: an order-independent identity for a field.
    pub fn sorted(&self) -> Key {
        let mut v = self.entries.to_vec();
        v.sort();
        Key { entries: v.into() }
    }

    /// Parses `k=v,k=v` or `{k=v,k=v}`; values may be empty (`levelist=`).
    pub fn parse(text: &str) -> Result<Key, KeyParseError> {
        let t = text.trim();
        let inner = if t.starts_with('{') {
            t.strip_prefix('{')
                .and_then(|s| s.strip_suffix('}'))
                .ok_or_else(|| KeyParseError {
                    text: text.to_string(),
                    reason: "unbalanced braces".into(),
                })?
        } else {
            t
        };
        let mut pairs = Vec::new();
        if inner.trim().is_empty() {
            return Ok(Key::new());
        }
        for part in inner.split(',') {
            let (k, v) = part.split_once('=').ok_or_else(|| KeyParseError {
                text: text.to_string(),
                reason: format!("'{}' is not of the form keyword=value", part.trim()),
            })?;
            let k = k.trim();
            if k.is_empty() {
                return Err(KeyParseError {
                    text: text.to_string(),
                    reason: format!("empty keyword in '{}'", part.trim()),
                });
            }
            if pairs.iter().any(|(pk, _): &(String, String)| pk == k) {
                return Err(KeyParseError {
                    text: text.to_string(),
                    reason: format!("keyword '{k}' given twice"),
                });
            }
            pairs.push((k.to_ascii_lowercase(), v.trim().to_string()));
        }
        Ok(Key::from_pairs(pairs))
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid key '{text}': {reason}")]
pub struct KeyParseError {
    pub text: String,
    pub reason: String,
}

impl fmt::Display for Key {
    /// FDB5's canonical form: `{class=od,expver=0001}`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("{")?;
        for (i, (k, v)) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{k}={v}")?;
        }
        f.write_str("}")
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_text_round_trips() {
        let k = Key::parse("{class=od,expver=0001,stream=oper,levelist=}").unwrap();
        assert_eq!(
            k.to_string(),
            "{class=od,expver=0001,stream=oper,levelist=}"
        );
        assert_eq!(Key::parse(&k.to_string()).unwrap(), k);
        assert_eq!(k.fingerprint(), "od:0001:oper:");
    }

    #[test]
    fn parse_rejects_garbage() {
        assert!(Key::parse("class").is_err());
        assert!(Key::parse("{class=od").is_err());
        assert!(Key::parse("class=od,class=rd").is_err());
        assert!(Key::parse("=od").is_err());
    }

    #[test]
    fn with_and_join_keep_order() {
        let k = Key::from_pairs([("a", "1"), ("b", "2")]);
        assert_eq!(k.with("a", "3").to_string(), "{a=3,b=2}");
        assert_eq!(
            k.join(&Key::from_pairs([("c", "4")])).to_string(),
            "{a=1,b=2,c=4}"
        );
        assert_eq!(
            Key::from_pairs([("b", "2"), ("a", "1")])
                .sorted()
                .to_string(),
            "{a=1,b=2}"
        );
    }
}
