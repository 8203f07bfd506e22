//! The one list of what a store can be asked to do: diagnostics count it, metrics label it, the
//! protocol names its requests by it and `control` locks a subset of it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// An operation of the [`Fdb`](super::Fdb) interface. The order is the order summaries list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Operation {
    Archive,
    Flush,
    Retrieve,
    List,
    Axes,
    Where,
    Wipe,
    Purge,
    Stats,
    Dump,
    Control,
    Compact,
    Explain,
    Subscribe,
}

impl Operation {
    pub const ALL: [Operation; 14] = [
        Operation::Archive,
        Operation::Flush,
        Operation::Retrieve,
        Operation::List,
        Operation::Axes,
        Operation::Where,
        Operation::Wipe,
        Operation::Purge,
        Operation::Stats,
        Operation::Dump,
        Operation::Control,
        Operation::Compact,
        Operation::Explain,
        Operation::Subscribe,
    ];

    /// The operations `control` can lock on a database (FDB5's `ControlIdentifier`s).
    pub const CONTROLLABLE: [Operation; 4] = [
        Operation::List,
        Operation::Retrieve,
        Operation::Archive,
        Operation::Wipe,
    ];

    /// The stable name: command names, metric labels, log fields, lock names on disk.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Archive => "archive",
            Operation::Flush => "flush",
            Operation::Retrieve => "retrieve",
            Operation::List => "list",
            Operation::Axes => "axes",
            Operation::Where => "where",
            Operation::Wipe => "wipe",
            Operation::Purge => "purge",
            Operation::Stats => "stats",
            Operation::Dump => "dump",
            Operation::Control => "control",
            Operation::Compact => "compact",
            Operation::Explain => "explain",
            Operation::Subscribe => "subscribe",
        }
    }

    /// Its position in [`Operation::ALL`], for per-operation counters in an array.
    pub fn index(self) -> usize {
        self as usize
    }

    pub fn is_controllable(self) -> bool {
        Self::CONTROLLABLE.contains(&self)
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown operation '{0}'")]
pub struct UnknownOperation(pub String);

impl FromStr for Operation {
    type Err = UnknownOperation;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Operation::ALL
            .into_iter()
            .find(|o| o.name() == s)
            .ok_or_else(|| UnknownOperation(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_indexes_follow_all() {
        for (i, op) in Operation::ALL.into_iter().enumerate() {
            assert_eq!(op.index(), i);
            assert_eq!(op.name().parse::<Operation>(), Ok(op));
            assert_eq!(serde_json::to_string(&op).unwrap(), format!("\"{op}\""));
        }
        assert!("fetch".parse::<Operation>().is_err());
        assert!(Operation::Wipe.is_controllable() && !Operation::Flush.is_controllable());
    }
}
