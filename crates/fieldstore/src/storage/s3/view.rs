//! What a reader sees of one generation: the live flush markers and compactions merged, each
//! field's highest rank winning. Pure (bodies in, view out), so masking is tested without a
//! server.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::sync::Arc;

use super::layout::{Body, IndexBody};
use crate::model::Key;
use crate::storage::catalogue::{IndexSummary, ListedEntry};
use crate::storage::FieldRef;

/// One flush marker or compaction a reader counts.
#[derive(Clone)]
pub struct Source {
    /// Its name under the generation's prefix (`flush/<rank>`, `compact/<name>`).
    pub name: String,
    /// A flush marker's rank (its name); `None` for a compaction, whose entries carry theirs.
    pub rank: Option<String>,
    pub body: Arc<Body>,
}

/// Which of the listed sources count: compactions superseded by another are skipped, and so
/// are flush markers some counted compaction covers.
pub fn live(flushes: &[String], compactions: &[(String, Arc<Body>)]) -> (Vec<String>, Vec<String>) {
    let superseded: HashSet<&str> = compactions
        .iter()
        .flat_map(|(_, b)| b.supersedes.iter().map(String::as_str))
        .collect();
    let live_compactions: Vec<String> = compactions
        .iter()
        .filter(|(n, _)| !superseded.contains(n.as_str()))
        .map(|(n, _)| n.clone())
        .collect();
    // Covered by any compaction, superseded or not: a superseding one covers at least as much.
    let covered: HashSet<&str> = compactions
        .iter()
        .flat_map(|(_, b)| b.covers.iter().map(String::as_str))
        .collect();
    let live_flushes = flushes
        .iter()
        .filter(|f| !covered.contains(f.as_str()))
        .cloned()
        .collect();
    (live_flushes, live_compactions)
}

struct ViewEntry {
    values: Vec<String>,
    field: FieldRef,
    rank: Arc<str>,
}

struct ViewIndex {
    group: usize,
    entries: Vec<ViewEntry>,
}

/// The merged state: indexes newest first, and each field's winning copy.
#[derive(Default)]
pub struct View {
    pub summaries: Vec<IndexSummary>,
    indexes: Vec<Arc<ViewIndex>>,
    /// (index key, datum keywords) of each group.
    groups: Vec<(Key, Vec<String>)>,
    /// Per group, per values: the winning rank and copy.
    best: Vec<Winners>,
}

/// Per datum values: the winning rank and copy.
type Winners = HashMap<Vec<String>, (Arc<str>, FieldRef)>;

fn micros_to_secs(rank: &str) -> u64 {
    super::layout::rank_micros(rank).map_or(0, |m| m / 1_000_000)
}

impl View {
    pub fn build(sources: &[Source]) -> View {
        let mut v = View::default();
        let mut group_of: HashMap<(Key, Vec<String>), usize> = HashMap::new();
        // Overlapping compactions (two compactors at once) hold the same entries with the same
        // rank: each counts once.
        let mut seen: HashSet<(usize, Vec<String>, Arc<str>)> = HashSet::new();
        let mut built: Vec<(Arc<str>, IndexSummary, ViewIndex)> = Vec::new();
        for s in sources {
            let marker_rank: Option<Arc<str>> = s.rank.as_deref().map(Arc::from);
            for (n, ix) in s.body.indexes.iter().enumerate() {
                let gk = (ix.key.clone(), ix.keywords.clone());
                let group = *group_of.entry(gk.clone()).or_insert_with(|| {
                    v.groups.push(gk);
                    v.best.push(HashMap::new());
                    v.groups.len() - 1
                });
                let mut entries = Vec::with_capacity(ix.entries.len());
                let mut newest: Arc<str> = Arc::from("");
                for e in &ix.entries {
                    let rank: Arc<str> = match (&marker_rank, &e.rank) {
                        (_, Some(r)) => Arc::from(r.as_str()),
                        (Some(r), None) => r.clone(),
                        (None, None) => Arc::from(""),
                    };
                    if !seen.insert((group, e.values.clone(), rank.clone())) {
                        continue;
                    }
                    if rank > newest {
                        newest = rank.clone();
                    }
                    let field = e.field();
                    let best = &mut v.best[group];
                    match best.get(&e.values) {
                        Some((r, _)) if *r >= rank => {}
                        _ => {
                            best.insert(e.values.clone(), (rank.clone(), field.clone()));
                        }
                    }
                    entries.push(ViewEntry {
                        values: e.values.clone(),
                        field,
                        rank,
                    });
                }
                if entries.is_empty() {
                    continue;
                }
                let summary = summary(format!("{}#{n}", s.name), ix, &newest, entries.len());
                built.push((newest, summary, ViewIndex { group, entries }));
            }
        }
        built.sort_by(|a, b| b.0.cmp(&a.0));
        for (_, s, ix) in built {
            v.summaries.push(s);
            v.indexes.push(Arc::new(ix));
        }
        v
    }

    /// The winning copy of a field.
    pub fn lookup(&self, index: &Key, datum: &Key) -> Option<FieldRef> {
        for (g, (key, keywords)) in self.groups.iter().enumerate() {
            if key != index
                || keywords.len() != datum.len()
                || !keywords.iter().all(|k| datum.contains(k))
            {
                continue;
            }
            let values: Vec<String> = keywords
                .iter()
                .map(|k| datum.get(k).unwrap_or("").to_string())
                .collect();
            if let Some((_, f)) = self.best[g].get(&values) {
                return Some(f.clone());
            }
        }
        None
    }

    /// The fields of index `i`, each flagged masked when a higher rank of it exists.
    pub fn entries(self: &Arc<Self>, i: usize, include_masked: bool) -> Entries {
        Entries {
            view: self.clone(),
            i,
            pos: 0,
            include_masked,
        }
    }

    fn is_masked(&self, ix: &ViewIndex, e: &ViewEntry) -> bool {
        self.best[ix.group]
            .get(&e.values)
            .is_some_and(|(r, _)| *r > e.rank)
    }

    /// Every entry with its rank, grouped as bodies, for a compaction to write; masked copies
    /// are left out when `drop_masked`. Returns the bodies' indexes and the masked copies.
    pub fn merged(&self, drop_masked: bool) -> (Vec<IndexBody>, Vec<FieldRef>) {
        let mut out: BTreeMap<usize, IndexBody> = BTreeMap::new();
        let mut masked = Vec::new();
        for ix in &self.indexes {
            let (key, keywords) = &self.groups[ix.group];
            let body = out.entry(ix.group).or_insert_with(|| IndexBody {
                key: key.clone(),
                keywords: keywords.clone(),
                axes: BTreeMap::new(),
                entries: Vec::new(),
            });
            for e in &ix.entries {
                if self.is_masked(ix, e) {
                    masked.push(e.field.clone());
                    if drop_masked {
                        continue;
                    }
                }
                for (k, val) in keywords.iter().zip(&e.values) {
                    body.axes.entry(k.clone()).or_default().insert(val.clone());
                }
                body.entries.push(super::layout::Entry {
                    values: e.values.clone(),
                    object: e.field.object.clone(),
                    offset: e.field.offset,
                    length: e.field.length,
                    checksum: e.field.checksum,
                    extract: e.field.extract.clone(),
                    rank: Some(e.rank.to_string()),
                });
            }
        }
        let bodies = out
            .into_values()
            .filter(|b| !b.entries.is_empty())
            .map(|mut b| {
                b.entries
                    .sort_by(|x, y| x.values.cmp(&y.values).then(y.rank.cmp(&x.rank)));
                b
            })
            .collect();
        (bodies, masked)
    }

    /// Every field with its masked flag, for statistics.
    pub fn all(&self) -> impl Iterator<Item = (&FieldRef, bool)> {
        self.indexes.iter().flat_map(move |ix| {
            ix.entries
                .iter()
                .map(move |e| (&e.field, self.is_masked(ix, e)))
        })
    }
}

fn summary(name: String, ix: &IndexBody, newest: &str, entries: usize) -> IndexSummary {
    let mut axes: HashMap<String, BTreeSet<String>> = ix
        .axes
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    for (k, v) in ix.key.iter() {
        axes.entry(k.to_string()).or_default().insert(v.to_string());
    }
    IndexSummary {
        name,
        index_key: ix.key.clone(),
        timestamp: micros_to_secs(newest),
        entries: entries as u64,
        axes,
    }
}

pub struct Entries {
    view: Arc<View>,
    i: usize,
    pos: usize,
    include_masked: bool,
}

impl Iterator for Entries {
    type Item = ListedEntry;

    fn next(&mut self) -> Option<ListedEntry> {
        let ix = self.view.indexes.get(self.i)?.clone();
        loop {
            let e = ix.entries.get(self.pos)?;
            self.pos += 1;
            let masked = self.view.is_masked(&ix, e);
            if masked && !self.include_masked {
                continue;
            }
            let keywords = &self.view.groups[ix.group].1;
            return Some(ListedEntry {
                datum: Key::from_pairs(
                    keywords
                        .iter()
                        .map(String::as_str)
                        .zip(e.values.iter().map(String::as_str)),
                ),
                field: e.field.clone(),
                masked,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::layout::{rank, Entry, FORMAT};
    use super::*;

    fn ix(values: &[(&str, &str, Option<&str>)]) -> IndexBody {
        IndexBody {
            key: Key::from_pairs([("type", "an")]),
            keywords: vec!["param".into()],
            axes: BTreeMap::new(),
            entries: values
                .iter()
                .map(|(v, o, r)| Entry {
                    values: vec![v.to_string()],
                    object: o.to_string(),
                    offset: 0,
                    length: 1,
                    checksum: None,
                    extract: None,
                    rank: r.map(str::to_string),
                })
                .collect(),
        }
    }

    fn body(indexes: Vec<IndexBody>, covers: &[&str], supersedes: &[&str]) -> Arc<Body> {
        Arc::new(Body {
            format: FORMAT,
            stamp: "s".into(),
            created: 0,
            covers: covers.iter().map(|s| s.to_string()).collect(),
            supersedes: supersedes.iter().map(|s| s.to_string()).collect(),
            indexes,
        })
    }

    fn flush(r: &str, values: &[(&str, &str)]) -> Source {
        let v: Vec<_> = values.iter().map(|(a, b)| (*a, *b, None)).collect();
        Source {
            name: format!("flush/{r}"),
            rank: Some(r.into()),
            body: body(vec![ix(&v)], &[], &[]),
        }
    }

    fn get(v: &View, p: &str) -> Option<String> {
        v.lookup(
            &Key::from_pairs([("type", "an")]),
            &Key::from_pairs([("param", p)]),
        )
        .map(|f| f.object)
    }

    #[test]
    fn the_highest_rank_wins_whatever_the_order_seen() {
        let (r1, r2) = (rank(10, "a", 0), rank(20, "b", 0));
        let a = flush(&r1, &[("t", "old"), ("u", "u1")]);
        let b = flush(&r2, &[("t", "new")]);
        for sources in [vec![a.clone(), b.clone()], vec![b, a]] {
            let v = Arc::new(View::build(&sources));
            assert_eq!(get(&v, "t").as_deref(), Some("new"));
            assert_eq!(get(&v, "u").as_deref(), Some("u1"));
            assert_eq!(v.summaries[0].name, format!("flush/{r2}#0"));
            let older: Vec<_> = v.entries(1, true).collect();
            assert_eq!(older.len(), 2);
            assert!(older.iter().any(|e| e.masked && e.field.object == "old"));
            assert_eq!(v.entries(1, false).count(), 1);
        }
    }

    #[test]
    fn compactions_keep_ranks_against_later_lower_markers() {
        let (r1, r2, r3) = (rank(10, "a", 0), rank(20, "b", 0), rank(15, "c", 0));
        let v = View::build(&[flush(&r1, &[("t", "one")]), flush(&r2, &[("t", "two")])]);
        let (ixs, masked) = v.merged(false);
        assert_eq!(masked.len(), 1);
        let c = Source {
            name: "compact/x".into(),
            rank: None,
            body: body(ixs, &[], &[]),
        };
        // A marker that appears after the compaction, with a rank between the two it covers.
        let v = View::build(&[c.clone(), flush(&r3, &[("t", "three")])]);
        assert_eq!(get(&v, "t").as_deref(), Some("two"));
        // Dropping masked copies keeps the winner only.
        let (ixs, masked) = v.merged(true);
        assert_eq!(masked.len(), 2);
        assert_eq!(ixs[0].entries.len(), 1);
        // Two overlapping compactions count each entry once.
        let v = Arc::new(View::build(&[c.clone(), c]));
        assert_eq!(v.entries(0, true).count(), 2);
    }

    #[test]
    fn covered_markers_and_superseded_compactions_are_skipped() {
        let flushes = vec!["flush/a".to_string(), "flush/b".into(), "flush/c".into()];
        let c1 = ("compact/1".to_string(), body(vec![], &["flush/a"], &[]));
        let c2 = (
            "compact/2".to_string(),
            body(vec![], &["flush/b"], &["compact/1"]),
        );
        let (f, c) = live(&flushes, &[c1, c2]);
        assert_eq!(f, vec!["flush/c".to_string()]);
        assert_eq!(c, vec!["compact/2".to_string()]);
    }
}
