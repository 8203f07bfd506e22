//! Subscriptions: the fields matching a request, as flushes make them visible
//! (docs/subscribe.md).
//!
//! A subscriber's place is a [`Position`]: one [`Cursor`] per stream (a database, prefixed by
//! the child that holds it in composed frontends). Each [`Notice`] carries its stream and the
//! cursor just after it, so a subscriber that saves [`Subscription::position`] (or the last
//! notice's cursor) resumes exactly after the last field it saw: nothing missed, nothing twice.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::element::ListElement;
use super::error::ApiError;

/// Where in one stream's history a subscriber is: after `within` fields of the commit at `at`,
/// of incarnation `epoch` (a database wiped and made again starts from its beginning).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Cursor {
    pub epoch: String,
    pub at: u64,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub within: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// A subscriber's place in every stream it follows. Streams it has no cursor for (databases
/// made after it was taken) are followed from their beginning.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Position {
    pub streams: BTreeMap<String, Cursor>,
}

impl Position {
    /// The text form users keep (`fieldstore watch --position-file`): compact JSON.
    pub fn to_token(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|_| "{\"streams\":{}}".into())
    }

    pub fn from_token(s: &str) -> Result<Position, ApiError> {
        serde_json::from_str(s.trim()).map_err(|e| {
            ApiError::Invalid(format!(
                "not a subscription position ({e}): give the text a subscription printed (e.g. `fieldstore watch --position-file`)"
            ))
        })
    }

    /// Moves the stream's cursor to just after a notice.
    pub fn advance(&mut self, notice: &Notice) {
        self.streams
            .insert(notice.stream.clone(), notice.cursor.clone());
    }

    /// The streams under `prefix` (a composed frontend's child), with the prefix taken off.
    pub fn under(&self, prefix: &str) -> Position {
        Position {
            streams: self
                .streams
                .iter()
                .filter_map(|(k, v)| k.strip_prefix(prefix).map(|k| (k.to_string(), v.clone())))
                .collect(),
        }
    }

    /// Adds a child's streams under `prefix`.
    pub fn extend_under(&mut self, prefix: &str, child: Position) {
        for (k, v) in child.streams {
            self.streams.insert(format!("{prefix}{k}"), v);
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_token())
    }
}

/// Where a subscription starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Start {
    /// Only what is flushed from now on.
    Now,
    /// Everything already there (in each database's commit order), then what follows.
    Beginning,
    /// Just after a position a subscription gave.
    At(Position),
}

/// One field made visible by a flush.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    pub element: ListElement,
    /// Which stream of the position it belongs to, and the cursor just after it.
    pub stream: String,
    pub cursor: Cursor,
    /// The field's bytes, when the subscription was asked to carry them
    /// ([`Fdb::subscribe_with_data`](super::Fdb::subscribe_with_data)) and the store could: a
    /// consumer then needs no retrieve per field. `None`: retrieve it. Shared, not owned: a
    /// memory store and a server pass the buffer the field arrived in along without copying it.
    pub data: Option<bytes::Bytes>,
    /// The CRC-32C the store recorded for `data` (which reading it checked), where it has one:
    /// a server frames the field with it instead of summing the bytes once more.
    pub checksum: Option<u32>,
}

/// The fields matching a request, in each stream's commit order (for one writer, the order it
/// flushed them), each once. A whole flush becomes visible at once: a subscriber never sees part
/// of one.
pub trait Subscription: Send {
    /// The next field, waiting up to `timeout` for one; `None` when none came in time.
    fn next_within(&mut self, timeout: Duration) -> Result<Option<Notice>, ApiError>;

    /// As [`Subscription::next_within`], with the field's bytes only where `admit(length)`
    /// allows them, so that a server reads a subscriber's field only once its memory budget
    /// has room for it. The default reads as `next_within` does and drops what is refused.
    fn next_admitted(
        &mut self,
        timeout: Duration,
        admit: &mut dyn FnMut(u64) -> bool,
    ) -> Result<Option<Notice>, ApiError> {
        let mut next = self.next_within(timeout)?;
        if let Some(n) = next.as_mut() {
            if n.data.as_ref().is_some_and(|d| !admit(d.len() as u64)) {
                n.data = None;
                n.checksum = None;
            }
        }
        Ok(next)
    }

    /// Where to resume to see exactly what this subscription has not returned yet.
    fn position(&self) -> Position;
}

/// Boxed subscriptions, as frontends return them.
pub type SubscriptionBox = Box<dyn Subscription>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_round_trip_as_text_and_split_by_prefix() {
        let mut p = Position::default();
        p.streams.insert(
            "0|class=od".into(),
            Cursor {
                epoch: "e".into(),
                at: 7,
                within: 2,
            },
        );
        p.streams.insert(
            "1|class=rd".into(),
            Cursor {
                epoch: "f".into(),
                at: 3,
                within: 0,
            },
        );
        let back = Position::from_token(&p.to_token()).unwrap();
        assert_eq!(back, p);
        assert!(!p.to_token().contains("\"within\":0"));
        let child = p.under("1|");
        assert_eq!(child.streams.len(), 1);
        assert_eq!(child.streams["class=rd"].at, 3);
        let mut joined = Position::default();
        joined.extend_under("1|", child);
        assert_eq!(joined.streams.len(), 1);
        assert!(Position::from_token("nonsense").is_err());
    }
}
