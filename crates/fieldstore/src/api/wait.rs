//! Retrieve-and-wait: every field a request names, handed over as each is flushed, built on
//! any frontend's `subscribe`, `wanted_fields` and `retrieve` (docs/subscribe.md).

use std::collections::{HashMap, HashSet};
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
    /// The keywords a fingerprint is made of (see [`identity`]).
    ident: HashSet<String>,
    order: Vec<String>,
    timeout: Duration,
    deadline: Instant,
    started: bool,
}

/// The keywords that tell the requested fields apart. A schema may offer one requested field
/// under several rules (the default schema's `domain?g` database rule and a later one without
/// `domain`): `wanted_fields` gives each alternative, and the field arrives under one of them.
/// A keyword the request does not name and some alternative lacks is such a rule's own, so it
/// is left out and the alternatives share one fingerprint.
fn identity(request: &Request, wanted: &[Key]) -> HashSet<String> {
    let named: HashSet<&str> = request.keywords().collect();
    let mut count: HashMap<&str, usize> = HashMap::new();
    for k in wanted {
        for (kw, v) in k.iter() {
            if !v.is_empty() {
                *count.entry(kw).or_default() += 1;
            }
        }
    }
    count
        .into_iter()
        .filter(|(kw, n)| named.contains(kw) || *n == wanted.len())
        .map(|(kw, _)| kw.to_string())
        .collect()
}

/// A key's identity whatever its keyword order, over the `ident` keywords.
fn fingerprint(k: &Key, ident: &HashSet<String>) -> String {
    let mut pairs: Vec<(&str, &str)> = k
        .iter()
        .filter(|(kw, v)| !v.is_empty() && ident.contains(*kw))
        .collect();
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
        let ident = identity(request, &wanted);
        let mut missing = HashMap::with_capacity(wanted.len());
        let mut order = Vec::with_capacity(wanted.len());
        for k in wanted {
            let f = fingerprint(&k, &ident);
            if missing.insert(f.clone(), k).is_none() {
                order.push(f);
            }
        }
        Ok(RetrieveWait {
            sub,
            request: request.clone(),
            missing,
            ident,
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
                if self
                    .missing
                    .remove(&fingerprint(&full, &self.ident))
                    .is_some()
                {
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
            let Some(key) = self.missing.remove(&fingerprint(&full, &self.ident)) else {
                continue;
            };
            let reader = fdb.retrieve(&request_for(&key))?;
            if reader.fields().is_empty() {
                // Wiped between its flush and this retrieve: wait for it again.
                self.missing.insert(fingerprint(&key, &self.ident), key);
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

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pairs: &[(&str, &str)]) -> Key {
        Key::from_pairs(pairs.iter().copied())
    }

    #[test]
    fn a_field_offered_under_two_rules_is_one_field_to_wait_for() {
        let mut r = Request::new(Some("retrieve"));
        r.set("step", vec!["0".into(), "6".into()]);
        r.set("levelist", vec!["500".into()]);
        let wanted = [
            key(&[("domain", "g"), ("step", "0"), ("levelist", "500")]),
            key(&[("domain", "g"), ("step", "6"), ("levelist", "500")]),
            key(&[("step", "0"), ("levelist", "500")]),
            key(&[("step", "6"), ("levelist", "500")]),
            // Another rule's field without a level: still told apart by the named keyword.
            key(&[("step", "0")]),
        ];
        let ident = identity(&r, &wanted);
        let prints: HashSet<String> = wanted.iter().map(|k| fingerprint(k, &ident)).collect();
        assert_eq!(prints.len(), 3, "{prints:?}");
        assert!(!ident.contains("domain"));
        assert!(ident.contains("levelist"));
    }
}
