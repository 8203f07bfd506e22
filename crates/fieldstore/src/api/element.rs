//! What the Fdb interface yields.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use super::operation::Operation;
use crate::model::schema::SplitKey;
use crate::model::step;

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

/// Keyword → values present. The sets are for membership; show values to users in
/// [`sorted_values`] order, not the sets' text order (which puts `10` before `2`).
pub type AxesMap = BTreeMap<String, BTreeSet<String>>;

/// Or'ed into `Fdb::axes`'s depth: the axes as FDB5 gives them (its `fdb-axes`, pyfdb's
/// `axes`), for programs written against it. Every index whose own key the request matches
/// counts whole, whatever the request says of datum keywords (`step=0` still shows every step
/// of the index), an optional keyword a field lacks has the value `""`, and a matching
/// database's own values count even when none of its indexes does. Without the flag, axes are
/// those of the fields the request names. A server that predates the flag answers as without it.
pub const AXES_AS_FDB5: u8 = 0x80;

/// A value's place in the order users see: numbers (integers, decimals, dates as `yyyymmdd`,
/// times as `HHMM`, steps with units and step ranges such as `0-6`) by magnitude, before any
/// text, which sorts as text.
#[derive(Debug, PartialEq, PartialOrd)]
enum SortKey {
    /// The start and end of a step range, in hours; a single value has both equal.
    Number(f64, f64),
    Text,
}

/// A plain decimal number (`-1`, `0.5`, `20190109`).
fn decimal(s: &str) -> Option<f64> {
    let digits = s.strip_prefix('-').unwrap_or(s);
    let (int, frac) = digits.split_once('.').unwrap_or((digits, ""));
    if int.is_empty() || !int.bytes().chain(frac.bytes()).all(|c| c.is_ascii_digit()) {
        return None;
    }
    s.parse::<f64>().ok()
}

fn sort_key(s: &str) -> SortKey {
    if let Some(x) = decimal(s) {
        return SortKey::Number(x, x);
    }
    match step::range_minutes(s, true) {
        Some((a, b)) => SortKey::Number(a as f64 / 60.0, b as f64 / 60.0),
        None => SortKey::Text,
    }
}

/// How two values of one keyword compare for display: numerically when both are numbers (or
/// steps), text otherwise, numbers first. Equal magnitudes (`1` and `01`) fall back to text so
/// the order is total.
pub fn compare_values(a: &str, b: &str) -> std::cmp::Ordering {
    sort_key(a)
        .partial_cmp(&sort_key(b))
        .unwrap_or(std::cmp::Ordering::Equal)
        .then_with(|| a.cmp(b))
}

/// The values in the order users see them (`axes`, hints in error messages).
pub fn sorted_values<'a>(values: impl IntoIterator<Item = &'a String>) -> Vec<&'a str> {
    let mut v: Vec<&str> = values.into_iter().map(String::as_str).collect();
    v.sort_by(|a, b| compare_values(a, b));
    v
}

/// An axes map with each keyword's values in display order, for printing and JSON.
pub fn sorted_axes(axes: &AxesMap) -> BTreeMap<&str, Vec<&str>> {
    axes.iter()
        .map(|(k, v)| (k.as_str(), sorted_values(v)))
        .collect()
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ControlAction {
    Lock,
    Unlock,
    Status,
}

/// An operation `control` locks or unlocks: one of [`Operation::CONTROLLABLE`] (FDB5's
/// `ControlIdentifier`); the others are refused.
pub type ControlIdentifier = Operation;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sorted(vals: &[&str]) -> Vec<String> {
        let owned: Vec<String> = vals.iter().map(|s| s.to_string()).collect();
        sorted_values(&owned)
            .into_iter()
            .map(String::from)
            .collect()
    }

    #[test]
    fn values_sort_by_their_type() {
        assert_eq!(sorted(&["1", "10", "2", "3"]), ["1", "2", "3", "10"]);
        assert_eq!(sorted(&["0", "12", "24", "6"]), ["0", "6", "12", "24"]);
        assert_eq!(
            sorted(&["12-24", "0-6", "6", "30m", "0", "6-12", "1d"]),
            ["0", "0-6", "30m", "6", "6-12", "12-24", "1d"]
        );
        assert_eq!(
            sorted(&["20190110", "20181231", "20190109"]),
            ["20181231", "20190109", "20190110"]
        );
        assert_eq!(
            sorted(&["1000", "500", "0.5", "-1"]),
            ["-1", "0.5", "500", "1000"]
        );
        assert_eq!(
            sorted(&["xxxx", "0001", "0010", "0002"]),
            ["0001", "0002", "0010", "xxxx"]
        );
        assert_eq!(sorted(&["oper", "enfo", "dcda"]), ["dcda", "enfo", "oper"]);
        assert_eq!(sorted(&["01", "1"]), ["01", "1"]);
    }

    proptest! {
        /// A total order: sorting never panics and is the same whatever the input order.
        #[test]
        fn order_is_total(mut v in prop::collection::vec("-?[0-9a-z.-]{0,6}", 0..12)) {
            let a = sorted(&v.iter().map(String::as_str).collect::<Vec<_>>());
            v.reverse();
            let b = sorted(&v.iter().map(String::as_str).collect::<Vec<_>>());
            prop_assert_eq!(a, b);
        }
    }
}
