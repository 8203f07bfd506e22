//! `type: select` (and the paper's `type: routing`): each field goes to the first child whose
//! selection matches its key; reads go to every child the request can concern.

use std::sync::Arc;

use super::merged::{union_of_wanted, Child, MergedSubscription};
use super::{combine_errors, field_key, merge_axes, Canon, Selection};
use crate::api::element::{AxesMap, ControlAction, ControlIdentifier, ListOptions};
use crate::api::fdb::{Fdb, ListIter};
use crate::api::reader::{ChainReader, DataReader};
use crate::api::results::{
    CheckElement, CompactElement, ControlElement, DumpElement, PurgeElement, StatsElement,
    WhereElement, WipeElement,
};
use crate::api::subscribe::{Start, SubscriptionBox};
use crate::api::ApiError;
use crate::model::request::Request;
use crate::model::Key;

pub struct Lane {
    pub select: Selection,
    pub excludes: Vec<Selection>,
    pub fdb: Arc<dyn Fdb>,
}

pub struct SelectFdb {
    lanes: Vec<Lane>,
    /// Keys and requests are matched against the lanes in stored form.
    canon: Canon,
}

impl SelectFdb {
    pub fn new(lanes: Vec<Lane>) -> SelectFdb {
        SelectFdb {
            lanes,
            canon: Canon::default(),
        }
    }

    /// Canonicalises with the types of this schema instead of the default one's.
    pub fn with_schema(mut self, schema: &crate::model::schema::Schema) -> SelectFdb {
        self.canon = Canon::new(schema);
        self
    }

    fn lane_for(&self, key: &Key) -> Result<&Lane, ApiError> {
        let canonical = self.canon.key(key);
        let key = &canonical;
        self.lanes
            .iter()
            .find(|l| l.select.matches_key(key) && !l.excludes.iter().any(|x| x.matches_key(key)))
            .ok_or_else(|| {
                ApiError::Invalid(format!(
                    "no matching fdb for key {key}: the select config's lanes take {}",
                    self.lanes
                        .iter()
                        .map(|l| format!("[{}]", l.select.text()))
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })
    }

    /// The lanes a request may concern.
    fn lanes_for<'a>(
        &'a self,
        request: &'a Request,
        absent_matches: bool,
    ) -> impl Iterator<Item = &'a Lane> + 'a {
        self.lane_indexes(request, absent_matches)
            .into_iter()
            .map(move |i| &self.lanes[i])
    }

    fn lane_indexes(&self, request: &Request, absent_matches: bool) -> Vec<usize> {
        let request = &self.canon.request(request);
        (0..self.lanes.len())
            .filter(|&i| {
                let l = &self.lanes[i];
                l.select.matches_request(request, absent_matches)
                    && !l.excludes.iter().any(|x| x.excludes_request(request))
            })
            .collect()
    }

    /// Runs a query on every lane the request concerns and concatenates the answers.
    fn each<T>(
        &self,
        request: &Request,
        f: impl Fn(&dyn Fdb) -> Result<Vec<T>, ApiError>,
    ) -> Result<Vec<T>, ApiError> {
        let mut out = Vec::new();
        for l in self.lanes_for(request, true) {
            out.extend(f(l.fdb.as_ref())?);
        }
        Ok(out)
    }
}

impl Fdb for SelectFdb {
    fn name(&self) -> String {
        format!(
            "select({})",
            self.lanes
                .iter()
                .map(|l| format!("{}: {}", l.select.text(), l.fdb.name()))
                .collect::<Vec<_>>()
                .join(", ")
        )
    }

    fn archive(&self, key: Option<&Key>, data: &[u8]) -> Result<(), ApiError> {
        match key {
            Some(k) => self.lane_for(k)?.fdb.archive(Some(k), data),
            None => {
                let k = field_key(None, data)?;
                self.lane_for(&k)?.fdb.archive_grib(&k, data)
            }
        }
    }

    fn archive_grib(&self, mars_key: &Key, data: &[u8]) -> Result<(), ApiError> {
        self.lane_for(mars_key)?.fdb.archive_grib(mars_key, data)
    }

    fn flush(&self) -> Result<(), ApiError> {
        let errors: Vec<(String, ApiError)> = self
            .lanes
            .iter()
            .filter_map(|l| {
                l.fdb
                    .flush()
                    .err()
                    .map(|e| (l.select.text().to_string(), e))
            })
            .collect();
        if errors.is_empty() {
            Ok(())
        } else {
            Err(combine_errors("flush", errors))
        }
    }

    fn retrieve(&self, request: &Request) -> Result<Box<dyn DataReader>, ApiError> {
        let mut parts = Vec::new();
        for i in self.lane_indexes(request, false) {
            parts.push(self.lanes[i].fdb.retrieve(request)?);
        }
        Ok(Box::new(ChainReader::new(parts)))
    }

    fn list(&self, request: &Request, options: ListOptions) -> Result<ListIter, ApiError> {
        let mut lists = Vec::new();
        for i in self.lane_indexes(request, true) {
            lists.push(self.lanes[i].fdb.list(request, options)?);
        }
        Ok(Box::new(lists.into_iter().flatten()))
    }

    /// The lanes the request can concern, each one's streams under `<lane index>|`.
    fn subscribe(&self, request: &Request, start: &Start) -> Result<SubscriptionBox, ApiError> {
        let children = self
            .lane_indexes(request, true)
            .into_iter()
            .map(|i| Child {
                prefix: format!("{i}|"),
                name: self.lanes[i].select.text().to_string(),
                fdb: self.lanes[i].fdb.as_ref(),
            })
            .collect();
        Ok(Box::new(MergedSubscription::start(
            children, request, start,
        )?))
    }

    /// A field no lane takes can never arrive: it is not waited for.
    fn wanted_fields(&self, request: &Request) -> Result<Vec<Key>, ApiError> {
        let mut keys = union_of_wanted(
            self.lane_indexes(request, false)
                .into_iter()
                .map(|i| self.lanes[i].fdb.wanted_fields(request)),
        )?;
        keys.retain(|k| self.lane_for(k).is_ok());
        Ok(keys)
    }

    fn axes(&self, request: &Request, depth: u8) -> Result<AxesMap, ApiError> {
        let mut axes = AxesMap::new();
        for l in self.lanes_for(request, true) {
            merge_axes(&mut axes, l.fdb.axes(request, depth)?);
        }
        Ok(axes)
    }

    fn where_(&self, request: &Request) -> Result<Vec<WhereElement>, ApiError> {
        self.each(request, |f| f.where_(request))
    }

    fn wipe(&self, request: &Request, doit: bool) -> Result<Vec<WipeElement>, ApiError> {
        let mut out = Vec::new();
        let mut nothing = 0;
        for l in self.lanes_for(request, true) {
            match l.fdb.wipe(request, doit) {
                Ok(v) => out.extend(v),
                Err(ApiError::NothingMatched(_)) => nothing += 1,
                Err(e) => return Err(e),
            }
        }
        if out.is_empty() && nothing > 0 {
            return Err(ApiError::NothingMatched(format!(
                "no database matches {request}"
            )));
        }
        Ok(out)
    }

    fn purge(&self, request: &Request, doit: bool) -> Result<Vec<PurgeElement>, ApiError> {
        self.each(request, |f| f.purge(request, doit))
    }

    fn stats(&self, request: &Request) -> Result<Vec<StatsElement>, ApiError> {
        self.each(request, |f| f.stats(request))
    }

    fn dump(&self, request: &Request) -> Result<Vec<DumpElement>, ApiError> {
        self.each(request, |f| f.dump(request))
    }

    fn control(
        &self,
        request: &Request,
        action: ControlAction,
        identifiers: &[ControlIdentifier],
    ) -> Result<Vec<ControlElement>, ApiError> {
        self.each(request, |f| f.control(request, action, identifiers))
    }

    fn compact(&self, request: &Request) -> Result<Vec<CompactElement>, ApiError> {
        self.each(request, |f| f.compact(request))
    }

    fn check(&self, request: &Request) -> Result<Vec<CheckElement>, ApiError> {
        self.each(request, |f| f.check(request))
    }

    fn explain_nothing(&self, request: &Request) -> String {
        let lanes: Vec<&Lane> = self.lanes_for(request, false).collect();
        if lanes.is_empty() {
            return format!(
                "no lane of the select config takes this request (lanes: {})",
                self.lanes
                    .iter()
                    .map(|l| format!("[{}]", l.select.text()))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        lanes
            .iter()
            .map(|l| l.fdb.explain_nothing(request))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::testing::local;

    #[test]
    fn lanes_are_chosen_by_canonical_values() {
        let d = tempfile::tempdir().unwrap();
        let yesterday = (chrono::Utc::now().date_naive() - chrono::Days::new(1))
            .format("%Y%m%d")
            .to_string();
        let lane = |select: &str| Lane {
            select: Selection::parse(select).unwrap(),
            excludes: Vec::new(),
            fdb: local(d.path()),
        };
        let select = SelectFdb::new(vec![
            lane("date=20000101"),
            lane(&format!("date={yesterday},expver=0001")),
        ]);
        let r = crate::model::request::parse_request("date=-1,expver=1").unwrap();
        assert_eq!(select.lane_indexes(&r, false), vec![1]);
        let k = Key::parse(&format!("date={yesterday},expver=1,param=t")).unwrap();
        assert!(std::ptr::eq(select.lane_for(&k).unwrap(), &select.lanes[1]));
    }

    #[test]
    fn fields_no_lane_takes_are_not_waited_for() {
        let d = tempfile::tempdir().unwrap();
        let select = SelectFdb::new(vec![Lane {
            select: Selection::parse("step=0").unwrap(),
            excludes: Vec::new(),
            fdb: local(d.path()),
        }]);
        let r = crate::model::request::parse_request("class=od,expver=0001,stream=oper,date=20260101,time=0000,domain=g,type=fc,levtype=pl,levelist=500,param=130,step=0/6").unwrap();
        let keys = select.wanted_fields(&r).unwrap();
        assert!(!keys.is_empty());
        assert!(keys.iter().all(|k| k.get("step") == Some("0")), "{keys:?}");
    }
}
