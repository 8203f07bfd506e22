//! The S3 catalogue's object names and object bodies (docs/s3-format.md is the reference):
//! pure functions, so the format is tested without a server.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use crate::model::Key;
use crate::storage::FieldRef;

/// Written into every body; a reader refuses a newer one rather than misreading it.
pub const FORMAT: u32 = 1;

/// Bytes percent-escaped in a database name: everything but these, so a name is one key
/// segment (no `/`), `,` and `=` separate pairs unambiguously, and S3 never needs to escape it.
fn plain(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~' | b':' | b'+' | b'@')
}

fn escape_into(out: &mut String, s: &str) {
    for &b in s.as_bytes() {
        if plain(b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
}

fn unescape(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else if plain(b[i]) {
            out.push(b[i]);
            i += 1;
        } else {
            return None;
        }
    }
    String::from_utf8(out).ok()
}

/// A database key as one key segment, `k=v,k=v` in the key's order with percent-escapes:
/// reversible ([`db_key`]), so listing `dbs/` yields every key without a GET.
pub fn db_name(key: &Key) -> String {
    let mut out = String::new();
    for (i, (k, v)) in key.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        escape_into(&mut out, k);
        out.push('=');
        escape_into(&mut out, v);
    }
    if out.is_empty() {
        // The empty key still needs a non-empty segment.
        out.push('=');
    }
    out
}

/// The key a [`db_name`] encodes; `None` for a name this version did not write.
pub fn db_key(name: &str) -> Option<Key> {
    if name == "=" {
        return Some(Key::new());
    }
    let mut pairs = Vec::new();
    for pair in name.split(',') {
        let (k, v) = pair.split_once('=')?;
        let k = unescape(k)?;
        if k.is_empty() {
            return None;
        }
        pairs.push((k, unescape(v)?));
    }
    let key = Key::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    (key.len() == pairs.len()).then_some(key)
}

/// Generations print with a fixed width so they list in numeric order.
pub fn gen_str(gen: u64) -> String {
    format!("{gen:010}")
}

pub const DBS: &str = "dbs/";

/// `dbs/<name>/`: the database's generation objects and tombstones.
pub fn gens_prefix(name: &str) -> String {
    format!("{DBS}{name}/")
}

/// `dbs/<name>/<gen>`: created once by whoever creates the generation.
pub fn gen_key(name: &str, gen: u64) -> String {
    format!("{DBS}{name}/{}", gen_str(gen))
}

/// `dbs/<name>/<gen>.wiped`: its presence makes the generation invisible at once.
pub fn tombstone_key(name: &str, gen: u64) -> String {
    format!("{}.wiped", gen_key(name, gen))
}

/// What one object under `dbs/<name>/` is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GenObject {
    Generation(u64),
    Tombstone(u64),
}

/// Splits a key listed under `dbs/` into the database name and what the object is.
pub fn parse_gen_key(key: &str) -> Option<(&str, GenObject)> {
    let rest = key.strip_prefix(DBS)?;
    let (name, last) = rest.split_once('/')?;
    if let Some(g) = last.strip_suffix(".wiped") {
        return Some((name, GenObject::Tombstone(parse_gen(g)?)));
    }
    Some((name, GenObject::Generation(parse_gen(last)?)))
}

fn parse_gen(s: &str) -> Option<u64> {
    if s.len() != 10 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `db/<name>/<gen>/`: everything of one generation's catalogue, in one listing.
pub fn db_prefix(name: &str, gen: u64) -> String {
    format!("db/{name}/{}/", gen_str(gen))
}

/// One object under [`db_prefix`], by its name relative to it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DbObject {
    /// `flush/<rank>`: one flush's entries; its creation is the flush's commit.
    Flush(String),
    /// `compact/<name>`: many flushes' entries, replacing them for readers.
    Compaction(String),
    /// `lock/<action>`.
    Lock(String),
}

impl DbObject {
    pub fn parse(rel: &str) -> Option<DbObject> {
        let (dir, name) = rel.split_once('/')?;
        if name.is_empty() || name.contains('/') {
            return None;
        }
        match dir {
            "flush" => Some(DbObject::Flush(name.to_string())),
            "compact" => Some(DbObject::Compaction(name.to_string())),
            "lock" => Some(DbObject::Lock(name.to_string())),
            _ => None,
        }
    }

    pub fn rel(&self) -> String {
        match self {
            DbObject::Flush(n) => format!("flush/{n}"),
            DbObject::Compaction(n) => format!("compact/{n}"),
            DbObject::Lock(n) => format!("lock/{n}"),
        }
    }
}

/// A flush's rank: `<µs since the epoch, 17 digits>.<writer>.<sequence, 10 digits>`. Ranks
/// compare as strings; the highest copy of a field wins.
pub fn rank(micros: u64, writer: &str, seq: u64) -> String {
    format!("{micros:017}.{writer}.{seq:010}")
}

/// The time part of a rank (µs), for ordering new ranks after seen ones.
pub fn rank_micros(rank: &str) -> Option<u64> {
    let t = rank.split('.').next()?;
    (t.len() == 17).then(|| t.parse().ok()).flatten()
}

/// Bytes as a hex string in a JSON body (small: a field's extraction information).
mod hex_bytes {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::sync::Arc;

    pub fn serialize<S: Serializer>(v: &Option<Arc<[u8]>>, s: S) -> Result<S::Ok, S::Error> {
        match v {
            Some(b) => s.serialize_str(&b.iter().map(|x| format!("{x:02x}")).collect::<String>()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Arc<[u8]>>, D::Error> {
        let Some(text) = Option::<String>::deserialize(d)? else {
            return Ok(None);
        };
        let t = text.as_bytes();
        if t.len() % 2 != 0 {
            return Err(serde::de::Error::custom("odd-length hex"));
        }
        let digit = |c: u8| (c as char).to_digit(16).map(|d| d as u8);
        t.chunks(2)
            .map(|p| Some(digit(p[0])? << 4 | digit(p[1])?))
            .collect::<Option<Vec<u8>>>()
            .map(|v| Some(Arc::from(v)))
            .ok_or_else(|| serde::de::Error::custom("not hex"))
    }
}

/// One field of a flush or compaction: values in the index's keyword order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub values: Vec<String>,
    pub object: String,
    pub offset: u64,
    pub length: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum: Option<u32>,
    /// The field's extraction information (`FieldRef::extract`), in hex.
    #[serde(default, skip_serializing_if = "Option::is_none", with = "hex_bytes")]
    pub extract: Option<std::sync::Arc<[u8]>>,
    /// The rank of the flush that wrote it (kept through compactions, so masking stays exact).
    /// Absent in a flush marker, whose rank is its name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rank: Option<String>,
}

impl Entry {
    pub fn field(&self) -> FieldRef {
        FieldRef {
            object: self.object.clone(),
            offset: self.offset,
            length: self.length,
            checksum: self.checksum,
            extract: self.extract.clone(),
        }
    }
}

/// One index of a body: the fields under one index key with one datum layout.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IndexBody {
    #[serde(with = "crate::storage::dump::key_pairs")]
    pub key: Key,
    pub keywords: Vec<String>,
    /// Per keyword, the values present, so readers skip indexes without reading entries.
    pub axes: BTreeMap<String, BTreeSet<String>>,
    pub entries: Vec<Entry>,
}

/// A flush marker's or a compaction's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Body {
    pub format: u32,
    /// Writer id and nonce: makes the body unique, so a create that finds equal bytes knows
    /// its own earlier attempt landed.
    pub stamp: String,
    /// Seconds since the epoch.
    pub created: u64,
    /// For a compaction: the flush markers it replaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub covers: Vec<String>,
    /// For a compaction: the compactions it replaces.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub supersedes: Vec<String>,
    pub indexes: Vec<IndexBody>,
}

const CRC_TRAILER: &str = "\ncrc32c=";

/// JSON, then `\ncrc32c=<8 hex digits>\n` over the JSON bytes.
pub fn encode(body: &Body) -> Vec<u8> {
    let mut out = serde_json::to_vec(body).unwrap_or_default();
    let crc = crate::checksum::crc32c(&out);
    out.extend_from_slice(format!("{CRC_TRAILER}{crc:08x}\n").as_bytes());
    out
}

/// The body, or why it cannot be trusted.
pub fn decode(bytes: &[u8]) -> Result<Body, String> {
    let tail = CRC_TRAILER.len() + 9;
    if bytes.len() < tail {
        return Err(format!("{} bytes: too short to hold a body", bytes.len()));
    }
    let (json, trailer) = bytes.split_at(bytes.len() - tail);
    let trailer = std::str::from_utf8(trailer).map_err(|_| "damaged checksum trailer")?;
    let hex = trailer
        .strip_prefix(CRC_TRAILER)
        .and_then(|t| t.strip_suffix('\n'))
        .ok_or("no checksum trailer (truncated?)")?;
    let want = u32::from_str_radix(hex, 16).map_err(|_| "damaged checksum trailer")?;
    let got = crate::checksum::crc32c(json);
    if want != got {
        return Err(format!(
            "checksum mismatch (written as {want:08x}, read as {got:08x})"
        ));
    }
    let body: Body = serde_json::from_slice(json).map_err(|e| format!("bad JSON: {e}"))?;
    if body.format > FORMAT {
        return Err(format!(
            "format version {} (this fieldstore reads version {FORMAT})",
            body.format
        ));
    }
    Ok(body)
}

/// A generation object's body.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Generation {
    pub format: u32,
    #[serde(with = "crate::storage::dump::key_pairs")]
    pub key: Key,
    pub schema: String,
    pub created: u64,
    pub creator: String,
    pub stamp: String,
    /// The server identity that created the database (docs/authorization.md); `creator` is
    /// the writing process. Absent in generations made locally or by older versions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub identity: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn names_are_one_readable_segment() {
        let k = Key::from_pairs([("class", "od"), ("expver", "0001"), ("date", "a/b,c=d%")]);
        let n = db_name(&k);
        assert_eq!(n, "class=od,expver=0001,date=a%2Fb%2Cc%3Dd%25");
        assert_eq!(db_key(&n), Some(k));
        assert_eq!(db_key(&db_name(&Key::new())), Some(Key::new()));
    }

    #[test]
    fn foreign_names_are_refused() {
        for bad in ["", "a", "a=1,", "=1", "a=1,a=2", "a=%zz", "a=b/c", "a=%FF"] {
            assert_eq!(db_key(bad), None, "{bad}");
        }
    }

    proptest! {
        #[test]
        fn db_names_round_trip(pairs in proptest::collection::vec(("[a-z%,=/ ]{1,6}", ".{0,8}"), 0..5)) {
            let key = Key::from_pairs(pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())));
            let n = db_name(&key);
            prop_assert!(!n.contains('/'));
            prop_assert_eq!(db_key(&n), Some(key));
        }

        #[test]
        fn ranks_order_as_their_times(a in 0u64..10u64.pow(16), b in 0u64..10u64.pow(16)) {
            let (ra, rb) = (rank(a, "w1", 3), rank(b, "w0", 9));
            if a != b {
                prop_assert_eq!(ra < rb, a < b);
            }
            prop_assert_eq!(rank_micros(&ra), Some(a));
        }
    }

    #[test]
    fn generation_keys_parse_back() {
        let n = "class=od";
        assert_eq!(
            parse_gen_key(&gen_key(n, 7)),
            Some((n, GenObject::Generation(7)))
        );
        assert_eq!(
            parse_gen_key(&tombstone_key(n, 7)),
            Some((n, GenObject::Tombstone(7)))
        );
        assert_eq!(parse_gen_key("dbs/x/12"), None);
        assert!(gen_key(n, 2) < tombstone_key(n, 2) && tombstone_key(n, 2) < gen_key(n, 10));
        assert_eq!(
            DbObject::parse("flush/r1"),
            Some(DbObject::Flush("r1".into()))
        );
        assert_eq!(DbObject::parse("flush/"), None);
        assert_eq!(DbObject::parse("other/x"), None);
    }

    fn body() -> Body {
        Body {
            format: FORMAT,
            stamp: "w.1".into(),
            created: 5,
            covers: vec![],
            supersedes: vec![],
            indexes: vec![IndexBody {
                key: Key::from_pairs([("type", "an")]),
                keywords: vec!["param".into()],
                axes: BTreeMap::from([("param".into(), BTreeSet::from(["t".into()]))]),
                entries: vec![Entry {
                    values: vec!["t".into()],
                    object: "o".into(),
                    offset: 0,
                    length: 4,
                    checksum: Some(9),
                    extract: Some(std::sync::Arc::from(&[0u8, 0x7f, 0xff][..])),
                    rank: None,
                }],
            }],
        }
    }

    #[test]
    fn bodies_round_trip_and_damage_is_caught() {
        let b = body();
        let bytes = encode(&b);
        assert_eq!(decode(&bytes).unwrap(), b);
        let mut bad = bytes.clone();
        bad[10] ^= 1;
        assert!(decode(&bad).unwrap_err().contains("checksum mismatch"));
        assert!(decode(&bytes[..bytes.len() - 3]).is_err());
        let newer = Body {
            format: FORMAT + 1,
            ..b
        };
        assert!(decode(&encode(&newer)).unwrap_err().contains("version"));
    }
}
