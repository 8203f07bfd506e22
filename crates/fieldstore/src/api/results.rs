//! What the maintenance operations (where, wipe, purge, stats, dump, control, compact) answer:
//! one element per database, typed, as FDB5's `WipeElement`, `StatsElement`... so a binding
//! never parses text. Printing them is the CLI's job.
//!
//! Every element names its database by key and by `location`, the string users know it by (the
//! database directory for the toc catalogue). Elements are serde types: the remote protocol
//! carries them as they are.

use std::collections::BTreeSet;
use std::fmt;

use serde::{Deserialize, Serialize};

use super::operation::Operation;
use crate::model::Key;
use crate::storage::dump::key_pairs;
pub use crate::storage::DumpRecord;

/// A database moved to another root, or that would be (`done == false`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MoveElement {
    #[serde(with = "key_pairs")]
    pub db: Key,
    pub from: String,
    pub to: String,
    pub files: u64,
    pub bytes: u64,
    pub done: bool,
}

/// A database converted between fieldstore's format and FDB5's, or that would be.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConvertElement {
    #[serde(with = "key_pairs")]
    pub db: Key,
    pub location: String,
    pub from: String,
    pub to: String,
    /// Index entries carried over, masked ones included.
    pub entries: u64,
    pub indexes: u64,
    pub done: bool,
}

/// A database a request matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WhereElement {
    #[serde(with = "key_pairs")]
    pub db: Key,
    pub location: String,
    /// The server identity that created the database (docs/authorization.md); none for one
    /// made locally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creator: Option<String>,
    /// How it is kept on disk, where the catalogue has a choice (`fieldstore`, `fdb5`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
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
    /// The server identity that created the database (docs/authorization.md); none for one
    /// made locally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creator: Option<String>,
    /// How it is kept on disk, where the catalogue has a choice (`fieldstore`, `fdb5`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
}

/// The history of one database. Its `Display` is what `fieldstore dump` prints: a line about the
/// database, then one indented line per record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DumpElement {
    #[serde(with = "key_pairs")]
    pub db: Key,
    pub location: String,
    /// The journal's size, for a catalogue that has one (toc).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub journal_bytes: Option<u64>,
    /// How many records there were in all: more than `records.len()` when a catalogue with a
    /// bounded history (memory) dropped the oldest ones after its Init record.
    pub total_records: u64,
    /// Oldest first.
    pub records: Vec<DumpRecord>,
    /// The server identity that created the database (docs/authorization.md); none for one
    /// made locally.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub creator: Option<String>,
}

impl DumpElement {
    /// Records dropped from a bounded history.
    pub fn records_not_kept(&self) -> u64 {
        self.total_records.saturating_sub(self.records.len() as u64)
    }
}

impl fmt::Display for DumpElement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "database {} (", self.location)?;
        if let Some(bytes) = self.journal_bytes {
            write!(f, "journal {bytes} bytes, ")?;
        }
        write!(f, "{} records", self.total_records)?;
        if let Some(c) = &self.creator {
            write!(f, ", created by '{c}'")?;
        }
        write!(f, ")")?;
        for (i, r) in self.records.iter().enumerate() {
            if i == 1 && self.records_not_kept() > 0 {
                write!(
                    f,
                    "\n  ... {} older records not kept",
                    self.records_not_kept()
                )?;
            }
            write!(f, "\n  {r}")?;
        }
        Ok(())
    }
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

/// What `check` found in one database's directory: the files no journal record names, each
/// with what it is. Local only (it reads the directory), so not carried by the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckElement {
    /// `None` for a directory that cannot be read as a database (see `problem`).
    pub db: Option<Key>,
    pub location: String,
    pub findings: Vec<crate::storage::CheckFinding>,
    /// Why the database could not be checked: its journal lost or damaged (the message names
    /// the directory).
    pub problem: Option<String>,
}

impl CheckElement {
    /// Whether it shows lost history, or could not be checked.
    pub fn failed(&self) -> bool {
        self.problem.is_some() || self.findings.iter().any(|f| f.kind.is_lost())
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

    #[test]
    fn a_dump_round_trips_through_json_and_prints_its_header_and_records() {
        let el = DumpElement {
            db: Key::from_pairs([("class", "od")]),
            location: "memory://m/{class=od}".into(),
            journal_bytes: None,
            total_records: 5,
            records: vec![
                DumpRecord::Init {
                    db: Key::from_pairs([("class", "od")]),
                    owner_uid: None,
                    created: 1,
                },
                DumpRecord::Clear {
                    files: vec!["x".into()],
                },
            ],
            creator: None,
        };
        let back: DumpElement = serde_json::from_str(&serde_json::to_string(&el).unwrap()).unwrap();
        assert_eq!(back, el);
        assert_eq!(
            el.to_string(),
            "database memory://m/{class=od} (5 records)\n  INIT  {class=od} created 1\n  \
             ... 3 older records not kept\n  CLEAR x"
        );
        let toc = DumpElement {
            journal_bytes: Some(300),
            total_records: 2,
            ..el
        };
        assert!(toc
            .to_string()
            .starts_with("database memory://m/{class=od} (journal 300 bytes, 2 records)\n  INIT"));
        assert!(!toc.to_string().contains("not kept"));
        let served = DumpElement {
            creator: Some("ingest".into()),
            ..toc
        };
        let back: DumpElement =
            serde_json::from_str(&serde_json::to_string(&served).unwrap()).unwrap();
        assert_eq!(back.creator.as_deref(), Some("ingest"));
        assert!(served.to_string().starts_with(
            "database memory://m/{class=od} (journal 300 bytes, 2 records, created by 'ingest')\n"
        ));
    }
}
