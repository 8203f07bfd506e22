//! What the maintenance operations (where, wipe, purge, stats, dump, control, compact) answer:
//! one element per database, typed, as FDB5's `WipeElement`, `StatsElement`... so a binding
//! never parses text. Printing them is the CLI's job.
//!
//! Every element names its database by key and by `location`, the string users know it by (the
//! database directory for the toc catalogue). Elements are serde types: the remote protocol
//! carries them as they are.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::operation::Operation;
use crate::model::Key;

/// A key as `[[keyword, value], ...]`, in its order (JSON objects would lose it).
mod key_pairs {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use crate::model::Key;

    pub fn serialize<S: Serializer>(k: &Key, s: S) -> Result<S::Ok, S::Error> {
        let pairs: Vec<(&str, &str)> = k.iter().collect();
        pairs.serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Key, D::Error> {
        let pairs = Vec::<(String, String)>::deserialize(d)?;
        Ok(Key::from_pairs(pairs))
    }
}

/// A database a request matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhereElement {
    #[serde(with = "key_pairs")]
    pub db: Key,
    pub location: String,
}

/// A database wiped, or that would be (`doit == false`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WipeElement {
    #[serde(with = "key_pairs")]
    pub db: Key,
    pub location: String,
    pub doit: bool,
    /// Every file or object that went (or would go) with it.
    pub removed: Vec<String>,
}

/// What purging one database removed (or would remove).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PurgeElement {
    #[serde(with = "key_pairs")]
    pub db: Key,
    pub location: String,
    pub doit: bool,
    /// Replaced fields no longer reachable once the purge is done.
    pub masked_fields: u64,
    /// Index files cleared from the journal and deleted, by full path.
    pub indexes: Vec<String>,
    /// Data objects no live index references, by URI.
    pub objects: Vec<String>,
}

/// The figures of one database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StatsElement {
    #[serde(with = "key_pairs")]
    pub db: Key,
    pub location: String,
    /// The lanes of `dist`/`select` frontends it was reached through, outermost first (the CLI
    /// shows them as `[lane] ` prefixes); empty for a single store.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lanes: Vec<String>,
    pub fields: u64,
    pub masked: u64,
    pub field_bytes: u64,
    pub masked_bytes: u64,
    pub index_files: u64,
    pub data_files: u64,
    pub data_bytes: u64,
    pub journal_records: u64,
}

/// The history of one database, one record per line as the catalogue words it (the first line
/// describes the journal itself).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DumpElement {
    #[serde(with = "key_pairs")]
    pub db: Key,
    pub location: String,
    pub records: Vec<String>,
}

/// Which operations are locked on one database, after the control action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ControlElement {
    #[serde(with = "key_pairs")]
    pub db: Key,
    pub location: String,
    /// A subset of [`Operation::CONTROLLABLE`].
    pub locked: BTreeSet<Operation>,
}

impl ControlElement {
    pub fn is_locked(&self, op: Operation) -> bool {
        self.locked.contains(&op)
    }
}

/// What compacting one database did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompactElement {
    #[serde(with = "key_pairs")]
    pub db: Key,
    pub location: String,
    pub merged_indexes: u64,
    pub new_indexes: u64,
    pub entries: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn elements_keep_their_key_order_through_json() {
        let db = Key::from_pairs([("stream", "oper"), ("class", "od")]);
        let el = ControlElement {
            db: db.clone(),
            location: "/r/od:oper".into(),
            locked: [Operation::Wipe, Operation::List].into_iter().collect(),
        };
        let json = serde_json::to_string(&el).unwrap();
        assert!(
            json.contains(r#"[["stream","oper"],["class","od"]]"#),
            "{json}"
        );
        let back: ControlElement = serde_json::from_str(&json).unwrap();
        assert_eq!(back, el);
        assert_eq!(back.db.keywords().collect::<Vec<_>>(), ["stream", "class"]);
        assert!(back.is_locked(Operation::Wipe) && !back.is_locked(Operation::Archive));
    }
}
