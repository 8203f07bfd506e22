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
    /// The keywords the request gives: what tells its fields apart.
    named: Vec<String>,
    /// Not given yet, by fingerprint; `order` keeps the request's order for messages.
    missing: HashMap<String, Key>,
    order: Vec<String>,
    timeout: Duration,
    deadline: Instant,
    started: bool,
}

/// A field's identity as the request names it: the values of the keywords the request gives,
/// whatever their order. Keywords it leaves to the schema (a default `domain`, an absent
/// optional one) differ between the schema's alternatives for one field, so they are left out.
fn fingerprint(k: &Key, named: &[String]) -> String {
    let mut pairs: Vec<(&str, &str)> = k
        .iter()
        .filter(|(kw, v)| !v.is_empty() && named.iter().any(|n| n == kw))
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

/// The request, narrowed to the one field with these values of the keywords it gives.
fn narrowed(request: &Request, key: &Key) -> Request {
    let mut r = request.clone();
    for (k, v) in key.iter() {
        if !v.is_empty() && request.get(k).is_some() {
            r.set(k, vec![v.to_string()]);
        }
    }
    r
}

/// A key as messages show it: without the empty values of absent optional keywords.
fn shown(k: &Key) -> String {
    k.iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

impl RetrieveWait {
    /// Subscribes before looking at what exists, so nothing flushed in between is missed.
    pub fn new(
        fdb: &dyn Fdb,
        request: &Request,
        timeout: Duration,
    ) -> Result<RetrieveWait, ApiError> {
        let wanted = fdb.wanted_fields(request)?;
        if wanted.is_empty() {
            // Else the wait would end at once, having waited for nothing.
            return Err(ApiError::Invalid(format!(
                "{request} names no field the schema can hold, so there is nothing to wait for: a keyword a schema rule needs is missing (`fieldstore schema` shows the rules; `fieldstore list` the keys stored)"
            )));
        }
        let sub = fdb.subscribe(request, &Start::Now)?;
        let named: Vec<String> = request.keywords().map(str::to_string).collect();
        let mut missing = HashMap::with_capacity(wanted.len());
        let mut order = Vec::with_capacity(wanted.len());
        for k in wanted {
            let f = fingerprint(&k, &named);
            if missing.insert(f.clone(), k).is_none() {
                order.push(f);
            }
        }
        Ok(RetrieveWait {
            sub,
            request: request.clone(),
            named,
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
            // Nothing there yet is what waiting is for, not an error.
            let reader = match fdb.retrieve(&self.request) {
                Ok(r) => Some(r),
                Err(e) if e.kind() == crate::error_kind::ErrorKind::NotFound => None,
                Err(e) => return Err(e),
            };
            if let Some(reader) = reader {
                if let Some(r) = self.take_present(reader) {
                    return Ok(Some(r));
                }
            }
        }
        self.arrivals(fdb)
    }

    /// The fields of the first retrieve this wait still wanted, marked given; `None` if none.
    fn take_present(&mut self, reader: Box<dyn DataReader>) -> Option<Box<dyn DataReader>> {
        let mut given = 0;
        for span in reader.fields() {
            let full = span.key.db.join(&span.key.index).join(&span.key.datum);
            if self
                .missing
                .remove(&fingerprint(&full, &self.named))
                .is_some()
            {
                given += 1;
            }
        }
        (given > 0).then_some(reader)
    }

    fn arrivals(&mut self, fdb: &dyn Fdb) -> Result<Option<Box<dyn DataReader>>, ApiError> {
        while !self.missing.is_empty() {
            let left = self.deadline.saturating_duration_since(Instant::now());
            let Some(notice) = self.sub.next_within(left)? else {
                return Err(self.timed_out());
            };
            let k = &notice.element.key;
            let full = k.db.join(&k.index).join(&k.datum);
            let Some(key) = self.missing.remove(&fingerprint(&full, &self.named)) else {
                continue;
            };
            let reader = fdb.retrieve(&narrowed(&self.request, &full))?;
            if reader.fields().is_empty() {
                // Wiped between its flush and this retrieve: wait for it again.
                self.missing.insert(fingerprint(&key, &self.named), key);
                continue;
            }
            return Ok(Some(reader));
        }
        Ok(None)
    }

    fn timed_out(&self) -> ApiError {
        let missing = self.missing();
        let mut named: Vec<String> = missing.iter().take(NAMED).map(shown).collect();
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
    use std::io::Read;
    use std::time::Duration;

    use super::RetrieveWait;
    use crate::api::Fdb;
    use crate::error_kind::ErrorKind;
    use crate::model::request::parse_request;

    use crate::api::testing::{memory, sfc_key as key};

    fn body(step: u32) -> Vec<u8> {
        format!("GRIB{step:04}7777").into_bytes()
    }

    const REQUEST: &str = "retrieve,class=od,expver=0001,stream=oper,date=20260101,time=0000,type=fc,levtype=sfc,step=0/6/12,param=2t";

    #[test]
    fn gives_what_is_there_then_each_field_as_it_is_flushed() {
        let f = memory();
        f.archive_grib(&key(0), &body(0)).unwrap();
        f.flush().unwrap();
        let r = parse_request(REQUEST).unwrap();
        let mut w = RetrieveWait::new(&*f, &r, Duration::from_secs(10)).unwrap();
        let mut first = w.next(&*f).unwrap().unwrap();
        let mut got = Vec::new();
        first.read_to_end(&mut got).unwrap();
        assert_eq!(got, body(0));
        assert_eq!(w.missing().len(), 2);
        let producer = {
            let f = f.clone();
            std::thread::spawn(move || {
                for step in [12, 6] {
                    std::thread::sleep(Duration::from_millis(30));
                    f.archive_grib(&key(step), &body(step)).unwrap();
                    f.flush().unwrap();
                }
            })
        };
        let mut order = Vec::new();
        while let Some(mut r) = w.next(&*f).unwrap() {
            let mut b = Vec::new();
            r.read_to_end(&mut b).unwrap();
            order.push(b);
        }
        producer.join().unwrap();
        assert_eq!(order, [body(12), body(6)]);
    }

    #[test]
    fn a_timeout_names_the_fields_never_flushed() {
        let f = memory();
        f.archive_grib(&key(6), &body(6)).unwrap();
        f.flush().unwrap();
        let r = parse_request(REQUEST).unwrap();
        let mut w = RetrieveWait::new(&*f, &r, Duration::from_millis(100)).unwrap();
        assert!(w.next(&*f).unwrap().is_some());
        let e = w.next(&*f).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::Timeout);
        let msg = e.to_string();
        assert!(msg.contains("2 of the 3 fields"), "{msg}");
        assert!(msg.contains("step=0") && msg.contains("step=12"), "{msg}");
        assert!(!msg.contains("step=6"), "{msg}");
    }
}

#[cfg(test)]
mod nothing_yet_tests {
    use std::io::Read;
    use std::time::Duration;

    use super::RetrieveWait;
    use crate::api::Fdb;
    use crate::error_kind::ErrorKind;
    use crate::model::request::parse_request;
    use crate::model::Key;

    /// A wait for fields none of which exist yet waits for them; a request naming no field of
    /// the schema (a rule's keyword missing) is refused instead of ending at once.
    #[test]
    fn a_wait_for_fields_not_there_at_all_waits_for_them() {
        let d = tempfile::tempdir().unwrap();
        let f = crate::api::testing::local(d.path());
        let r = parse_request("retrieve,class=od,expver=0001,stream=oper,date=20260101,time=0000,type=fc,levtype=sfc,step=6,param=2t").unwrap();
        let mut w = RetrieveWait::new(&*f, &r, Duration::from_millis(200)).unwrap();
        let e = w.next(&*f).err().unwrap();
        assert_eq!(e.kind(), ErrorKind::Timeout, "{e}");
        let no_step = parse_request("retrieve,class=od,expver=0001,stream=oper,date=20260101,time=0000,type=fc,levtype=sfc,param=2t").unwrap();
        let e = RetrieveWait::new(&*f, &no_step, Duration::from_secs(1))
            .err()
            .unwrap();
        assert_eq!(e.kind(), ErrorKind::BadRequest, "{e}");
        assert!(e.to_string().contains("nothing to wait for"), "{e}");
        let mut w = RetrieveWait::new(&*f, &r, Duration::from_secs(10)).unwrap();
        let producer = {
            let f = f.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                let k = Key::parse("class=od,expver=0001,stream=oper,date=20260101,time=0000,type=fc,levtype=sfc,step=6,param=167").unwrap();
                f.archive_grib(&k, b"GRIB-six-7777").unwrap();
                f.flush().unwrap();
            })
        };
        let mut got = Vec::new();
        w.next(&*f).unwrap().unwrap().read_to_end(&mut got).unwrap();
        assert_eq!(got, b"GRIB-six-7777");
        assert!(w.next(&*f).unwrap().is_none());
        producer.join().unwrap();
    }
}
