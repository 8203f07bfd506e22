//! `type: filter`: only fields matching `select` and no `excludes` reach the child, so a
//! forecast's output can be trimmed by configuration alone. Reads and subscriptions pass
//! through (nothing else was stored).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::{field_key, Canon, Selection};
use crate::api::fdb::Fdb;
use crate::api::ApiError;
use crate::model::request::Request;
use crate::model::Key;

pub struct FilterFdb {
    select: Option<Selection>,
    excludes: Vec<Selection>,
    child: Arc<dyn Fdb>,
    dropped: AtomicU64,
    /// Keys are matched in stored form (`param=t` as 130).
    canon: Canon,
}

impl FilterFdb {
    pub fn new(select: Option<Selection>, excludes: Vec<Selection>, child: Arc<dyn Fdb>) -> Self {
        FilterFdb {
            select,
            excludes,
            child,
            dropped: AtomicU64::new(0),
            canon: Canon::default(),
        }
    }

    /// Canonicalises with the types of this schema instead of the default one's.
    pub fn with_schema(mut self, schema: &crate::model::schema::Schema) -> Self {
        self.canon = Canon::new(schema);
        self
    }

    fn keeps(&self, key: &Key) -> bool {
        let key = &self.canon.key(key);
        self.select.as_ref().is_none_or(|s| s.matches_key(key))
            && !self.excludes.iter().any(|x| x.matches_key(key))
    }

    /// Fields dropped since this handle was made.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    fn drop_one(&self, key: &Key) {
        self.dropped.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(%key, "filtered out");
    }
}

impl Fdb for FilterFdb {
    fn name(&self) -> String {
        format!("filter({})", self.child.name())
    }

    /// Reads, maintenance and explanations pass through untouched.
    fn forward_to(&self) -> Option<&dyn Fdb> {
        Some(&*self.child)
    }

    fn archive(&self, key: Option<&Key>, data: &[u8]) -> Result<(), ApiError> {
        let k = field_key(key, data)?;
        if !self.keeps(&k) {
            self.drop_one(&k);
            return Ok(());
        }
        match key {
            Some(given) => self.child.archive(Some(given), data),
            None => self.child.archive_grib(&k, data),
        }
    }

    fn archive_grib(&self, mars_key: &Key, data: &[u8]) -> Result<(), ApiError> {
        if !self.keeps(mars_key) {
            self.drop_one(mars_key);
            return Ok(());
        }
        self.child.archive_grib(mars_key, data)
    }

    /// Only the fields this filter lets through can ever arrive: waiting for the others would
    /// only end in a timeout.
    fn wanted_fields(&self, request: &Request) -> Result<Vec<Key>, ApiError> {
        Ok(self
            .child
            .wanted_fields(request)?
            .into_iter()
            .filter(|k| self.keeps(k))
            .collect())
    }

    fn flush(&self) -> Result<(), ApiError> {
        let dropped = self.dropped.swap(0, Ordering::Relaxed);
        if dropped > 0 {
            tracing::info!(dropped, "filter dropped fields since the last flush");
        }
        self.child.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_fields_let_through_are_waited_for() {
        let d = tempfile::tempdir().unwrap();
        let f = FilterFdb::new(
            Some(Selection::parse("param=130").unwrap()),
            Vec::new(),
            crate::api::testing::local(d.path()),
        );
        let r = crate::model::request::parse_request("class=od,expver=0001,stream=oper,date=20260101,time=0000,domain=g,type=fc,levtype=pl,levelist=500,step=0,param=130/131").unwrap();
        let all = f.child.wanted_fields(&r).unwrap();
        let kept = f.wanted_fields(&r).unwrap();
        assert!(all.len() > kept.len(), "{all:?}");
        assert!(!kept.is_empty());
        assert!(kept.iter().all(|k| k.get("param") == Some("130")));
    }
}
