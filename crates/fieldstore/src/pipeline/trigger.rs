//! A sink's `triggers:`: events for downstream jobs, as MultIO sends them. `MetadataChange`
//! announces a value of a key (e.g. `step`) as complete once fields have moved past it;
//! `NotifyMetadata` announces what a notification carries. Each event is one JSON object
//! `{"type", "info": {"app": "multio", ...}, "metadata": {key: value}}`, sent over TCP and/or
//! appended to a file as a line.

use std::collections::BTreeMap;
use std::io::Write;
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

use super::config::{parse_bool, ActionConfig};
use super::error::PipelineError;
use super::message::{Field, Payload};
use super::metadata::Metadata;
use super::node::Node;

/// Where events go.
#[derive(Debug, Clone)]
struct Destination {
    file: Option<std::path::PathBuf>,
    host: Option<String>,
    port: u16,
    retries: u32,
    timeout: Duration,
    fail_on_retry: bool,
    info: BTreeMap<String, String>,
}

#[derive(Debug)]
enum Kind {
    /// `values` in order; `seen`: index of the last value seen; `issued`: last announced.
    MetadataChange {
        key: String,
        values: Vec<String>,
        seen: Option<usize>,
        issued: Option<usize>,
    },
    NotifyMetadata {
        key: String,
    },
}

#[derive(Debug)]
pub struct Trigger {
    kind: Kind,
    to: Destination,
}

impl Trigger {
    pub fn from_node(cfg: &ActionConfig, n: &Node) -> Result<Trigger, PipelineError> {
        let text = |k: &str| n.get(k).and_then(Node::scalar_text);
        let int = |k: &str, d: i64| -> Result<i64, PipelineError> {
            match n.get(k) {
                None => Ok(d),
                Some(v) => v
                    .scalar_text()
                    .and_then(|t| t.parse().ok())
                    .ok_or_else(|| cfg.error_at(v, format!("trigger {k}: must be an integer"))),
            }
        };
        let key = text("key").ok_or_else(|| cfg.error_at(n, "a trigger needs key:"))?;
        let mut info = BTreeMap::new();
        info.insert("app".to_string(), "multio".to_string());
        if let Some(i) = n.get("info") {
            let pairs = i
                .as_map()
                .ok_or_else(|| cfg.error_at(i, "trigger info: must be a map"))?;
            for (k, v) in pairs {
                info.insert(k.clone(), v.scalar_text().unwrap_or_default());
            }
        }
        let port = u16::try_from(int("port", 10000)?)
            .map_err(|_| cfg.error_at(n, "trigger port: out of range"))?;
        let to = Destination {
            file: text("file").map(std::path::PathBuf::from),
            host: text("host"),
            port,
            retries: u32::try_from(int("retries", 5)?.max(0)).unwrap_or(5),
            timeout: Duration::from_secs(u64::try_from(int("timeout", 60)?.max(1)).unwrap_or(60)),
            fail_on_retry: n.get("failOnRetry").and_then(parse_bool).unwrap_or(false),
            info,
        };
        let kind = match text("type").as_deref() {
            Some("MetadataChange") => {
                let values = n
                    .get("values")
                    .and_then(Node::as_seq)
                    .ok_or_else(|| {
                        cfg.error_at(n, "a MetadataChange trigger needs values: (a list)")
                    })?
                    .iter()
                    .map(|v| v.scalar_text().unwrap_or_default())
                    .collect();
                Kind::MetadataChange {
                    key,
                    values,
                    seen: None,
                    issued: None,
                }
            }
            Some("NotifyMetadata") => Kind::NotifyMetadata { key },
            other => {
                return Err(cfg.error_at(
                    n,
                    format!(
                        "unknown trigger type '{}' (MetadataChange, NotifyMetadata)",
                        other.unwrap_or_default()
                    ),
                ))
            }
        };
        Ok(Trigger { kind, to })
    }

    /// A field was written: a `MetadataChange` trigger may announce the values it moved past.
    pub fn field(&mut self, f: &Field) -> Result<(), String> {
        let Kind::MetadataChange {
            key, values, seen, ..
        } = &mut self.kind
        else {
            return Ok(());
        };
        let current = match f.metadata.text(key)? {
            Some(v) => Some(v),
            None => grib_key(f, key),
        };
        let now = current.and_then(|c| values.iter().position(|v| *v == c));
        if seen.is_none() && now.is_some() {
            *seen = now;
        }
        if *seen == now {
            return Ok(());
        }
        self.issue_up_to_seen()?;
        if let (Some(n), Kind::MetadataChange { seen, .. }) = (now, &mut self.kind) {
            *seen = Some(n);
        }
        Ok(())
    }

    /// A notification (`trigger: <key>` and that key) reached the sink.
    pub fn notification(&mut self, md: &Metadata) -> Result<(), String> {
        let Kind::NotifyMetadata { key } = &self.kind else {
            return Ok(());
        };
        let Some(name) = md.text("trigger")? else {
            return Ok(());
        };
        if name != *key {
            return Ok(());
        }
        if let Some(v) = md.text(&name)? {
            let event = event("NotifyMetadata", &self.to.info, key, &v);
            self.to.send(&event)?;
        }
        Ok(())
    }

    /// Announces every value from the last announced one up to the last seen, in list order
    /// (MultIO loops past the list's end when values go backwards; this stops).
    fn issue_up_to_seen(&mut self) -> Result<(), String> {
        let Kind::MetadataChange {
            key,
            values,
            seen,
            issued,
        } = &mut self.kind
        else {
            return Ok(());
        };
        let Some(last) = *seen else {
            return Ok(());
        };
        let mut next = issued.map_or(0, |i| i + 1);
        while next <= last {
            let event = event("MetadataChange", &self.to.info, key, &values[next]);
            *issued = Some(next);
            self.to.send(&event)?;
            next += 1;
        }
        Ok(())
    }
}

impl Drop for Trigger {
    /// The last value seen is complete when the sink goes away, as in MultIO.
    fn drop(&mut self) {
        if let Err(e) = self.issue_up_to_seen() {
            tracing::warn!("trigger at the end: {e}");
        }
    }
}

fn grib_key(f: &Field, key: &str) -> Option<String> {
    let Payload::Encoded(bytes) = &f.payload else {
        return None;
    };
    let d = crate::grib::Decoded::new(bytes).ok()?;
    match d.get(key).ok()?? {
        crate::grib::KeyValue::Long(l) => Some(l.to_string()),
        crate::grib::KeyValue::Double(x) => Some(x.to_string()),
        crate::grib::KeyValue::String(s) => Some(s),
        _ => None,
    }
}

fn event(kind: &str, info: &BTreeMap<String, String>, key: &str, value: &str) -> String {
    let mut md = serde_json::Map::new();
    md.insert(
        key.to_string(),
        serde_json::Value::String(value.to_string()),
    );
    serde_json::json!({"type": kind, "info": info, "metadata": md}).to_string()
}

impl Destination {
    fn send(&self, event: &str) -> Result<(), String> {
        if let Some(host) = &self.host {
            if let Err(e) = self.send_tcp(host, event) {
                if self.fail_on_retry {
                    return Err(format!("event to {host}:{}: {e}", self.port));
                }
                tracing::warn!("trigger event to {host}:{} not sent: {e}", self.port);
            }
        }
        if let Some(file) = &self.file {
            let mut f = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(file)
                .map_err(|e| format!("trigger file {}: {e}", file.display()))?;
            writeln!(f, "{event}").map_err(|e| format!("trigger file {}: {e}", file.display()))?;
        }
        Ok(())
    }

    fn send_tcp(&self, host: &str, event: &str) -> Result<(), String> {
        let mut last = String::new();
        for attempt in 0..=self.retries {
            if attempt > 0 {
                std::thread::sleep(Duration::from_millis(200));
            }
            let addrs = (host, self.port)
                .to_socket_addrs()
                .map_err(|e| e.to_string())?;
            for a in addrs {
                match TcpStream::connect_timeout(&a, self.timeout) {
                    Ok(mut s) => return s.write_all(event.as_bytes()).map_err(|e| e.to_string()),
                    Err(e) => last = e.to_string(),
                }
            }
        }
        Err(format!(
            "no connection after {} retries: {last}",
            self.retries
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::config::{load_str, Side};
    use std::io::Read;

    fn trigger(dir: &std::path::Path, yaml: &str) -> Trigger {
        let plan = format!("plans:\n  - actions:\n      - type: sink\n        sinks: []\n        triggers:\n          - {yaml}\n");
        let c = load_str(&plan, "t", dir, Side::Client, &|_| None).unwrap();
        let a = &c.plans[0].actions[0];
        let n = &a.node.get("triggers").unwrap().as_seq().unwrap()[0];
        Trigger::from_node(a, n).unwrap()
    }

    fn step(s: &str) -> Field {
        let mut md = Metadata::new();
        md.set("step", s);
        Field::values(md, vec![])
    }

    fn lines(p: &std::path::Path) -> Vec<String> {
        std::fs::read_to_string(p)
            .unwrap_or_default()
            .lines()
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn metadata_change_announces_completed_values() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = trigger(dir.path(), "{type: MetadataChange, key: step, values: ['0', '6', '12'], file: '{~}/ev.log', info: {run: x}}");
        for s in ["0", "0", "6", "12", "12"] {
            t.field(&step(s)).unwrap();
        }
        let log = dir.path().join("ev.log");
        assert_eq!(lines(&log).len(), 2);
        assert_eq!(
            lines(&log)[0],
            r#"{"type":"MetadataChange","info":{"app":"multio","run":"x"},"metadata":{"step":"0"}}"#
        );
        drop(t);
        assert_eq!(lines(&log).len(), 3, "the last value at the end");
        assert!(lines(&log)[2].contains(r#""step":"12""#));
    }

    #[test]
    fn values_going_back_stop() {
        let dir = tempfile::tempdir().unwrap();
        let mut t = trigger(
            dir.path(),
            "{type: MetadataChange, key: step, values: ['0', '6'], file: '{~}/ev.log'}",
        );
        for s in ["6", "0", "6"] {
            t.field(&step(s)).unwrap();
        }
        drop(t);
        assert_eq!(lines(&dir.path().join("ev.log")).len(), 2);
    }

    #[test]
    fn notify_over_tcp() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let dir = tempfile::tempdir().unwrap();
        let mut t = trigger(
            dir.path(),
            &format!("{{type: NotifyMetadata, key: step, host: 127.0.0.1, port: {port}}}"),
        );
        let mut md = Metadata::new();
        md.set("trigger", "step");
        md.set("step", "24");
        t.notification(&md).unwrap();
        let (mut c, _) = listener.accept().unwrap();
        let mut got = String::new();
        c.read_to_string(&mut got).unwrap();
        assert_eq!(
            got,
            r#"{"type":"NotifyMetadata","info":{"app":"multio"},"metadata":{"step":"24"}}"#
        );
    }
}
