//! Retrieve-and-wait: every field a request names, handed over as each is flushed, built on
//! any frontend's `subscribe`, `wanted_fields` and `retrieve` (docs/subscribe.md).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::error::ApiError;
use super::fdb::Fdb;
use super::reader::DataReader;
use super::subscribe::{Start, SubscriptionBox};
use crate::model::request::Request;
use crate::model::Key;

/// How many missing fields a timeout error names before it only counts the rest.
const NAMED: usize = 10;

/// A retrieve that waits: [`RetrieveWait::next`] gives what is there now, then each field as a
/// flush makes it visible, until every field the request names was given or the time is up.
pub struct RetrieveWait {
    sub: SubscriptionBox,
    request: Request,
    /// Not given yet, by fingerprint; `order` keeps the request's order for messages.
    missing: HashMap<String, Key>,
    order: Vec<String>,
    timeout: Duration,
    deadline: Instant,
    started: bool,
}

/// A key's identity whatever its keyword order (absent optional keywords are left out).
fn fingerprint(k: &Key) -> String {
    let mut pairs: Vec<(&str, &str)> = k.iter().filter(|(_, v)| !v.is_empty()).collect();
    pairs.sort_unstable();
    let mut s = String::new();
    for (k, v) in pairs {
        s.push_str(k);
        s.push('=');
        s.push_str(v);
        s.push(',');
    }
    s
}

/// A request naming exactly one field.
fn request_for(key: &Key) -> Request {
    let mut r = Request::new(Some("retrieve"));
    for (k, v) in key.iter() {
        if !v.is_empty() {
            r.set(k, vec![v.to_string()]);
        }
    }
    r
}

impl RetrieveWait {
    /// Subscribes before looking at what exists, so nothing flushed in between is missed.
    pub fn new(
        fdb: &dyn Fdb,
        request: &Request,
        timeout: Duration,
    ) -> Result<RetrieveWait, ApiError> {
        let wanted = fdb.wanted_fields(request)?;
        let sub = fdb.subscribe(request, &Start::Now)?;
        let mut missing = HashMap::with_capacity(wanted.len());
        let mut order = Vec::with_capacity(wanted.len());
        for k in wanted {
            let f = fingerprint(&k);
            if missing.insert(f.clone(), k).is_none() {
                order.push(f);
            }
        }
        Ok(RetrieveWait {
            sub,
            request: request.clone(),
            missing,
            order,
            timeout,
            deadline: Instant::now() + timeout,
            started: false,
        })
    }

    /// Fields the request names that were not given yet, in request order.
    pub fn missing(&self) -> Vec<Key> {
        self.order
            .iter()
            .filter_map(|f| self.missing.get(f).cloned())
            .collect()
    }

    /// The next fields: first everything already there (one reader, request order), then one
    /// reader per field as it arrives. `None` once every field was given; a `timeout` error
    /// naming the fields still missing when the time is up.
    pub fn next(&mut self, fdb: &dyn Fdb) -> Result<Option<Box<dyn DataReader>>, ApiError> {
        if !self.started {
            self.started = true;
            let reader = fdb.retrieve(&self.request)?;
            let mut given = 0;
            for span in reader.fields() {
                let full = span.key.db.join(&span.key.index).join(&span.key.datum);
                if self.missing.remove(&fingerprint(&full)).is_some() {
                    given += 1;
                }
            }
            if given > 0 {
                return Ok(Some(reader));
            }
        }
        while !self.missing.is_empty() {
            let left = self.deadline.saturating_duration_since(Instant::now());
            let Some(notice) = self.sub.next_within(left)? else {
                return Err(self.timed_out());
            };
            let k = &notice.element.key;
            let full = k.db.join(&k.index).join(&k.datum);
            let Some(key) = self.missing.remove(&fingerprint(&full)) else {
                continue;
            };
            let reader = fdb.retrieve(&request_for(&key))?;
            if reader.fields().is_empty() {
                // Wiped between its flush and this retrieve: wait for it again.
                self.missing.insert(fingerprint(&key), key);
                continue;
            }
            return Ok(Some(reader));
        }
        Ok(None)
    }

    fn timed_out(&self) -> ApiError {
        let missing = self.missing();
        let mut named: Vec<String> = missing.iter().take(NAMED).map(|k| k.to_string()).collect();
        if missing.len() > NAMED {
            named.push(format!("and {} more", missing.len() - NAMED));
        }
        ApiError::WaitTimedOut {
            waited: format!("{:?}", self.timeout),
            missing: missing.len(),
            total: self.order.len(),
            names: named.join("; "),
        }
    }
}
