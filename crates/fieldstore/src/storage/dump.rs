//! A database's history as typed records, so `dump` is data a binding reads, not text it parses.
//! `Display` words each record as `fieldstore dump` has always printed it.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::model::Key;

/// A key as `[[keyword, value], ...]`, in its order (JSON objects would lose it).
pub(crate) mod key_pairs {
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

/// One change in a database's history. The toc journal holds Init, Index and Clear records; the
/// memory catalogue keeps Init and one Flush, Purge or Compact per change it published.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
#[non_exhaustive]
pub enum DumpRecord {
    /// The database was created.
    Init {
        #[serde(with = "key_pairs")]
        db: Key,
        /// The uid that owns it (toc only: a memory database has no owner).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        owner_uid: Option<u32>,
        /// Seconds since the epoch.
        created: u64,
    },
    /// An index file became visible (a flush's, or a compaction's merged one).
    Index {
        file: String,
        #[serde(with = "key_pairs")]
        index_key: Key,
        entries: u64,
        timestamp: u64,
        /// For a merged index: the file whose place in the journal it takes.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        slot: Option<String>,
    },
    /// Index files no longer live (purged or merged).
    Clear { files: Vec<String> },
    /// A flush published these indexes (memory).
    Flush {
        entries: u64,
        indexes: Vec<String>,
        timestamp: u64,
    },
    /// A purge forgot masked fields (memory).
    Purge {
        masked_fields: u64,
        indexes: u64,
        timestamp: u64,
    },
    /// An FDB5 toc continues in this sub-toc (its records follow).
    SubToc { path: String },
    /// A compaction merged indexes (memory).
    Compact {
        merged_indexes: u64,
        new_indexes: u64,
        timestamp: u64,
    },
}

impl fmt::Display for DumpRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DumpRecord::Init {
                db,
                owner_uid: Some(uid),
                created,
            } => write!(f, "INIT  {db} owner uid {uid} created {created}"),
            DumpRecord::Init {
                db,
                owner_uid: None,
                created,
            } => write!(f, "INIT  {db} created {created}"),
            DumpRecord::Index {
                file,
                index_key,
                entries,
                timestamp,
                ..
            } => write!(
                f,
                "INDEX {index_key} {entries} entries in {file} at {timestamp}"
            ),
            DumpRecord::Clear { files } => write!(f, "CLEAR {}", files.join(" ")),
            DumpRecord::SubToc { path } => write!(f, "SUBTOC {path}"),
            DumpRecord::Flush {
                entries,
                indexes,
                timestamp,
            } => write!(
                f,
                "FLUSH {entries} entries in {} indexes ({}) at {timestamp}",
                indexes.len(),
                indexes.join(" ")
            ),
            DumpRecord::Purge {
                masked_fields,
                indexes,
                timestamp,
            } => write!(
                f,
                "PURGE {masked_fields} masked fields, {indexes} indexes at {timestamp}"
            ),
            DumpRecord::Compact {
                merged_indexes,
                new_indexes,
                timestamp,
            } => write!(
                f,
                "COMPACT {merged_indexes} indexes into {new_indexes} at {timestamp}"
            ),
        }
    }
}

/// What a catalogue answers to `dump`: its records, oldest first, and how many there were.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CatalogueDump {
    /// The journal's size, for a catalogue that has one.
    pub journal_bytes: Option<u64>,
    /// Every record there ever was; more than `records.len()` when the oldest changes after the
    /// Init record were not kept.
    pub total_records: u64,
    pub records: Vec<DumpRecord>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> Key {
        Key::parse(s).unwrap()
    }

    fn every_kind() -> Vec<DumpRecord> {
        vec![
            DumpRecord::Init {
                db: key("{class=od,expver=0001}"),
                owner_uid: Some(1000),
                created: 7,
            },
            DumpRecord::Init {
                db: key("{class=od}"),
                owner_uid: None,
                created: 7,
            },
            DumpRecord::Index {
                file: "i.1.index".into(),
                index_key: key("{type=an,levtype=sfc}"),
                entries: 3,
                timestamp: 9,
                slot: Some("i.0.index".into()),
            },
            DumpRecord::Clear {
                files: vec!["a".into(), "b".into()],
            },
            DumpRecord::Flush {
                entries: 4,
                indexes: vec!["{a=1}#1".into(), "{a=2}#2".into()],
                timestamp: 5,
            },
            DumpRecord::Purge {
                masked_fields: 2,
                indexes: 1,
                timestamp: 6,
            },
            DumpRecord::Compact {
                merged_indexes: 4,
                new_indexes: 1,
                timestamp: 8,
            },
        ]
    }

    #[test]
    fn records_round_trip_through_json_tagged_by_kind() {
        for r in every_kind() {
            let json = serde_json::to_string(&r).unwrap();
            assert_eq!(
                serde_json::from_str::<DumpRecord>(&json).unwrap(),
                r,
                "{json}"
            );
        }
        let json = serde_json::to_value(&every_kind()[2]).unwrap();
        assert_eq!(json["kind"], "index");
        assert_eq!(
            json["index_key"],
            serde_json::json!([["type", "an"], ["levtype", "sfc"]])
        );
    }

    #[test]
    fn records_print_as_dump_always_has() {
        let lines: Vec<String> = every_kind().iter().map(|r| r.to_string()).collect();
        assert_eq!(
            lines,
            [
                "INIT  {class=od,expver=0001} owner uid 1000 created 7",
                "INIT  {class=od} created 7",
                "INDEX {type=an,levtype=sfc} 3 entries in i.1.index at 9",
                "CLEAR a b",
                "FLUSH 4 entries in 2 indexes ({a=1}#1 {a=2}#2) at 5",
                "PURGE 2 masked fields, 1 indexes at 6",
                "COMPACT 4 indexes into 1 at 8",
            ]
        );
    }
}
