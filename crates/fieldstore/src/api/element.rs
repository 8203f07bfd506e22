//! What the Fdb interface yields.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::model::schema::SplitKey;

/// Where a field's bytes are: a URI (`file:///path`) and a byte range in it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Location {
    pub uri: String,
    pub offset: u64,
    pub length: u64,
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}, offset={}, length={}",
            self.uri, self.offset, self.length
        )
    }
}

/// One listed field (depth 3) or database / index (depth 1 / 2, then `location` is `None`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListElement {
    pub key: SplitKey,
    pub location: Option<Location>,
    /// Seconds since the epoch when the index holding the entry was flushed.
    pub timestamp: u64,
    /// Replaced by a newer archive of the same key (only listed with `include_masked`).
    pub masked: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListOptions {
    pub include_masked: bool,
    /// 1: databases, 2: databases and indexes, 3: fields.
    pub depth: u8,
}

impl Default for ListOptions {
    fn default() -> Self {
        ListOptions {
            include_masked: false,
            depth: 3,
        }
    }
}

/// Keyword → values present, as `fieldstore axes` prints them.
pub type AxesMap = BTreeMap<String, BTreeSet<String>>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlAction {
    Lock,
    Unlock,
    Status,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ControlIdentifier {
    List,
    Retrieve,
    Archive,
    Wipe,
}

impl ControlIdentifier {
    pub const ALL: [ControlIdentifier; 4] = [Self::List, Self::Retrieve, Self::Archive, Self::Wipe];

    pub fn name(&self) -> &'static str {
        match self {
            Self::List => "list",
            Self::Retrieve => "retrieve",
            Self::Archive => "archive",
            Self::Wipe => "wipe",
        }
    }
}
