//! `axes` answered from the catalogues' index summaries: as `list` would give them
//! (`fieldstore axes`), and as FDB5's `AxesVisitor` gives them (`fdb-axes`, pyfdb, GribJump).

use super::super::element::AxesMap;
use super::super::error::ApiError;
use super::LocalFdb;
use crate::model::request::Request;
use crate::model::schema::{ExpandMode, LevelMatcher};

/// Adds `v` to `kw`'s values (no allocation when it is there already: called per field).
fn add(axes: &mut AxesMap, kw: &str, v: &str) {
    if !axes.get(kw).is_some_and(|s| s.contains(v)) {
        axes.entry(kw.to_string())
            .or_default()
            .insert(v.to_string());
    }
}

impl LocalFdb {
    /// Axes of whole fields (depth 3) as `list` would give them, from each index's stored value
    /// summary where the request takes every field of the index (FDB5 answers from the same
    /// summaries); an index the request takes in part is listed. A million-field store: one
    /// read of each toc instead of every entry.
    pub(super) fn axes_from_summaries(&self, request: &Request) -> Result<AxesMap, ApiError> {
        if !self.config.actions.list {
            return Err(ApiError::Invalid("list is disabled by this config".into()));
        }
        let mut axes = AxesMap::new();
        // An absent optional keyword's empty value is no value here.
        let add = |axes: &mut AxesMap, kw: &str, v: &str| {
            if !v.is_empty() {
                add(axes, kw, v);
            }
        };
        let expansions = self.expand(request, ExpandMode::List)?;
        let matchers: Vec<LevelMatcher> = expansions
            .iter()
            .map(|e| LevelMatcher::new(&e.levels[2]))
            .collect();
        // No list lock is checked, as FDB5's axes check none.
        for db in self.catalogue.databases() {
            let db = db?;
            let db_ex: Vec<usize> = (0..expansions.len())
                .filter(|&e| expansions[e].levels[0].matches(&db.key))
                .collect();
            if db_ex.is_empty() {
                continue;
            }
            let reader = self.catalogue.reader(&db)?;
            let mut db_listed = false;
            for (i, ix) in reader.indexes().iter().enumerate() {
                let index_ex: Vec<usize> = db_ex
                    .iter()
                    .copied()
                    .filter(|&e| expansions[e].levels[1].matches(&ix.index_key))
                    .collect();
                let possible = index_ex.iter().any(|&e| {
                    expansions[e].levels[2]
                        .keywords
                        .iter()
                        .all(|(k, v)| v.as_ref().is_none_or(|v| ix.may_contain(k, v)))
                });
                if !possible {
                    continue;
                }
                // Every value the index holds of each restricted keyword is wanted: every
                // field of it is (a field's values are in its index's summary).
                let whole = !ix.axes.is_empty()
                    && index_ex.iter().any(|&e| {
                        expansions[e].levels[2]
                            .keywords
                            .iter()
                            .all(|(k, v)| match v {
                                None => true,
                                Some(wanted) => ix
                                    .axes
                                    .get(k.as_str())
                                    .is_some_and(|held| held.iter().all(|h| wanted.contains(h))),
                            })
                    });
                let mut any = false;
                if whole {
                    for (kw, values) in &ix.axes {
                        for v in values {
                            add(&mut axes, kw, v);
                        }
                    }
                    any = ix.entries > 0 || ix.axes.values().any(|v| !v.is_empty());
                } else {
                    for e in reader.entries(i, false)? {
                        let e = e?;
                        if !index_ex.iter().any(|&x| matchers[x].matches(&e.datum)) {
                            continue;
                        }
                        any = true;
                        for (kw, v) in e.datum.iter() {
                            add(&mut axes, kw, v);
                        }
                    }
                }
                if any {
                    for (kw, v) in ix.index_key.iter() {
                        add(&mut axes, kw, v);
                    }
                    db_listed = true;
                }
            }
            if db_listed {
                for (kw, v) in db.key.iter() {
                    add(&mut axes, kw, v);
                }
            }
        }
        Ok(axes)
    }

    /// FDB5's axes ([`super::element::AXES_AS_FDB5`]): its `AxesVisitor`, from the catalogues'
    /// index summaries alone.
    pub(super) fn axes_as_fdb5(&self, request: &Request, depth: u8) -> Result<AxesMap, ApiError> {
        if !self.config.actions.list {
            return Err(ApiError::Invalid("list is disabled by this config".into()));
        }
        let mut axes = AxesMap::new();
        let expansions = self.expand(request, ExpandMode::List)?;
        for db in self.catalogue.databases() {
            let db = db?;
            let db_ex: Vec<usize> = (0..expansions.len())
                .filter(|&e| expansions[e].levels[0].matches_exactly(&db.key))
                .collect();
            if db_ex.is_empty() {
                continue;
            }
            for (kw, v) in db.key.iter() {
                add(&mut axes, kw, v);
            }
            if depth <= 1 {
                continue;
            }
            let reader = self.catalogue.reader(&db)?;
            for ix in reader.indexes() {
                // FDB5's `Index::partialMatch`: the index key matches, and every datum keyword
                // the request gives has one of its values in the index's summary.
                let matches = db_ex.iter().any(|&e| {
                    expansions[e].levels[1].matches(&ix.index_key)
                        && expansions[e].levels[2]
                            .keywords
                            .iter()
                            .all(|(k, v)| v.as_ref().is_none_or(|v| ix.may_contain(k, v)))
                });
                if !matches {
                    continue;
                }
                for (kw, v) in ix.index_key.iter() {
                    add(&mut axes, kw, v);
                }
                if depth >= 3 {
                    for (kw, values) in &ix.axes {
                        for v in values {
                            add(&mut axes, kw, v);
                        }
                    }
                }
            }
        }
        Ok(axes)
    }
}
