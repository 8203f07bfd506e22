//! Server counters in Prometheus text format, and a minimal HTTP/1.1 responder for `/metrics`.
//!
//! Labels come from fixed sets (operation names, and the identities of the tokens file), never
//! from keys or requests, so the number of series stays bounded whatever clients send.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::auth::AuthOp;
use super::protocol::MsgType;
use crate::api::Operation;

/// Latency histogram bounds, in seconds.
const BUCKETS: [f64; 12] = [
    0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0, 120.0,
];

#[derive(Default)]
struct OpCounters {
    requests: AtomicU64,
    errors: AtomicU64,
    /// Cumulative counts per bucket bound, then the count over every bound.
    buckets: [AtomicU64; BUCKETS.len() + 1],
    micros: AtomicU64,
}

#[derive(Default)]
pub struct Metrics {
    ops: [OpCounters; Operation::ALL.len()],
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub connections_open: AtomicI64,
    pub connections_total: AtomicU64,
    /// Handshakes refused: wrong token, unknown version, too many connections, failed TLS.
    pub refused: AtomicU64,
    /// Connections closed because what they sent was not a valid frame.
    pub frame_errors: AtomicU64,
    /// Archived fields discarded because their client vanished or a flush failed.
    pub discarded_fields: AtomicU64,
    /// Subscriptions being served now.
    pub subscriptions_open: AtomicI64,
    /// Notices sent to subscribers.
    pub notices_sent: AtomicU64,
    /// Notices of subscriptions with data sent without their field, for want of memory.
    pub notices_without_data: AtomicU64,
    /// Archived fields that arrived as sealed memory files (Unix connections).
    pub handed_over_in: AtomicU64,
    /// Fields sent to subscribers as sealed memory files (Unix connections).
    pub handed_over_out: AtomicU64,
    /// Requests refused by authorization, by identity and operation.
    refusals: Mutex<BTreeMap<(String, AuthOp), u64>>,
    /// The server-wide memory budget (`--memory-budget`), in bytes.
    pub budget_bytes: AtomicU64,
    /// Bytes of the budget clients hold now (fields being received, retrieve chunks).
    pub budget_in_use: AtomicU64,
    /// Times a connection waited for memory (not reading its socket meanwhile).
    pub budget_waits: AtomicU64,
    /// Requests ended with `busy` because memory did not free within the wait.
    pub budget_refusals: AtomicU64,
    /// Requests refused because their identity had `--max-requests-per-identity` in progress.
    pub identity_limit_refusals: AtomicU64,
    /// What the config's lifecycle schedule did (docs/lifecycle.md).
    pub lifecycle: LifecycleCounters,
}

/// The lifecycle schedule's counters: an operator alerts on failures and watches the moves and
/// wipes keep pace with what arrives.
#[derive(Default)]
pub struct LifecycleCounters {
    /// Runs of the rules finished (whatever their actions' outcome).
    pub runs: AtomicU64,
    /// Runs that could not start (a rule's request did not parse, the catalogue failed).
    pub runs_failed: AtomicU64,
    pub moved: AtomicU64,
    pub wiped: AtomicU64,
    /// Actions that failed (the run went on with the others).
    pub failed: AtomicU64,
    /// Root copies left by moves into buckets, deleted once past their grace.
    pub copies_retired: AtomicU64,
    /// Unix time the last run finished; 0 before the first.
    pub last_run_unix: AtomicU64,
}

impl Metrics {
    fn op(&self, t: MsgType) -> Option<&OpCounters> {
        t.operation().map(|op| &self.ops[op.index()])
    }

    pub fn record(&self, t: MsgType, elapsed: Duration, ok: bool) {
        let Some(c) = self.op(t) else { return };
        c.requests.fetch_add(1, Ordering::Relaxed);
        if !ok {
            c.errors.fetch_add(1, Ordering::Relaxed);
        }
        let secs = elapsed.as_secs_f64();
        let slot = BUCKETS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(BUCKETS.len());
        c.buckets[slot].fetch_add(1, Ordering::Relaxed);
        c.micros
            .fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
    }

    /// Counts a request authorization refused.
    pub fn count_refusal(&self, identity: &str, op: AuthOp) {
        let mut r = self.refusals.lock().unwrap_or_else(|e| e.into_inner());
        *r.entry((identity.to_string(), op)).or_default() += 1;
    }

    pub fn render(&self) -> String {
        let mut s = String::new();
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let _ = writeln!(s, "# HELP fieldstore_requests_total Requests handled, by operation (archive: fields).\n# TYPE fieldstore_requests_total counter");
        for (op, c) in Operation::ALL.iter().zip(&self.ops) {
            let _ = writeln!(
                s,
                "fieldstore_requests_total{{op=\"{}\"}} {}",
                op.name(),
                load(&c.requests)
            );
        }
        let _ = writeln!(s, "# HELP fieldstore_request_errors_total Requests that failed, by operation.\n# TYPE fieldstore_request_errors_total counter");
        for (op, c) in Operation::ALL.iter().zip(&self.ops) {
            let _ = writeln!(
                s,
                "fieldstore_request_errors_total{{op=\"{}\"}} {}",
                op.name(),
                load(&c.errors)
            );
        }
        let _ = writeln!(s, "# HELP fieldstore_request_duration_seconds Time to serve a request, including streaming its reply.\n# TYPE fieldstore_request_duration_seconds histogram");
        for (op, c) in Operation::ALL.iter().zip(&self.ops) {
            let op = op.name();
            let mut cumulative = 0;
            for (i, b) in BUCKETS.iter().enumerate() {
                cumulative += load(&c.buckets[i]);
                let _ = writeln!(s, "fieldstore_request_duration_seconds_bucket{{op=\"{op}\",le=\"{b}\"}} {cumulative}");
            }
            cumulative += load(&c.buckets[BUCKETS.len()]);
            let _ = writeln!(s, "fieldstore_request_duration_seconds_bucket{{op=\"{op}\",le=\"+Inf\"}} {cumulative}");
            let _ = writeln!(
                s,
                "fieldstore_request_duration_seconds_sum{{op=\"{op}\"}} {}",
                load(&c.micros) as f64 / 1e6
            );
            let _ = writeln!(
                s,
                "fieldstore_request_duration_seconds_count{{op=\"{op}\"}} {cumulative}"
            );
        }
        let counters = [
            (
                "fieldstore_bytes_received_total",
                "Bytes received from clients, frames included.",
                load(&self.bytes_in),
            ),
            (
                "fieldstore_bytes_sent_total",
                "Bytes sent to clients, frames included.",
                load(&self.bytes_out),
            ),
            (
                "fieldstore_connections_total",
                "Connections accepted.",
                load(&self.connections_total),
            ),
            (
                "fieldstore_connections_refused_total",
                "Handshakes refused (token, version, connection limit).",
                load(&self.refused),
            ),
            (
                "fieldstore_frame_errors_total",
                "Connections closed for sending an invalid frame.",
                load(&self.frame_errors),
            ),
            (
                "fieldstore_discarded_fields_total",
                "Archived fields discarded unflushed (client vanished, or archive error).",
                load(&self.discarded_fields),
            ),
            (
                "fieldstore_notices_sent_total",
                "Fields announced to subscribers.",
                load(&self.notices_sent),
            ),
            (
                "fieldstore_notices_without_data_total",
                "Notices of subscriptions with data sent without their field for want of memory (the client retrieves it).",
                load(&self.notices_without_data),
            ),
            (
                "fieldstore_fields_handed_over_in_total",
                "Archived fields that arrived as sealed memory files over the Unix socket (no bytes through a socket).",
                load(&self.handed_over_in),
            ),
            (
                "fieldstore_fields_handed_over_out_total",
                "Fields sent to subscribers as sealed memory files over the Unix socket.",
                load(&self.handed_over_out),
            ),
        ];
        for (name, help, v) in counters {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} counter\n{name} {v}");
        }
        let _ = writeln!(s, "# HELP fieldstore_refused_total Requests refused by authorization, by identity and operation.\n# TYPE fieldstore_refused_total counter");
        let refusals = self.refusals.lock().unwrap_or_else(|e| e.into_inner());
        for ((identity, op), n) in refusals.iter() {
            let _ = writeln!(
                s,
                "fieldstore_refused_total{{identity=\"{}\",operation=\"{op}\"}} {n}",
                label(identity)
            );
        }
        drop(refusals);
        let _ = writeln!(
            s,
            "# HELP fieldstore_connections_open Connections open now.\n# TYPE fieldstore_connections_open gauge\nfieldstore_connections_open {}",
            self.connections_open.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            s,
            "# HELP fieldstore_subscriptions_open Subscriptions served now.\n# TYPE fieldstore_subscriptions_open gauge\nfieldstore_subscriptions_open {}",
            self.subscriptions_open.load(Ordering::Relaxed)
        );
        self.render_budget(&mut s);
        self.render_lifecycle(&mut s);
        let _ = writeln!(
            s,
            "# HELP fieldstore_build_info Build of this server.\n# TYPE fieldstore_build_info gauge\nfieldstore_build_info{{version=\"{}\",protocol=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION"),
            super::protocol::VERSION_MAX
        );
        s
    }
}

/// A label value as the text format wants it escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

impl Metrics {
    /// The lifecycle schedule's counters, actions by kind and outcome.
    fn render_lifecycle(&self, s: &mut String) {
        let l = &self.lifecycle;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let _ = writeln!(s, "# HELP fieldstore_lifecycle_actions_total Lifecycle actions the server's schedule took, by action and outcome.\n# TYPE fieldstore_lifecycle_actions_total counter");
        for (action, outcome, v) in [
            ("move", "done", load(&l.moved)),
            ("wipe", "done", load(&l.wiped)),
            ("any", "failed", load(&l.failed)),
        ] {
            let _ = writeln!(
                s,
                "fieldstore_lifecycle_actions_total{{action=\"{action}\",outcome=\"{outcome}\"}} {v}"
            );
        }
        for (name, help, kind, v) in [
            (
                "fieldstore_lifecycle_runs_total",
                "Runs of the lifecycle rules by the server's schedule.",
                "counter",
                load(&l.runs),
            ),
            (
                "fieldstore_lifecycle_runs_failed_total",
                "Scheduled runs that could not start.",
                "counter",
                load(&l.runs_failed),
            ),
            (
                "fieldstore_lifecycle_copies_retired_total",
                "Root copies left by moves into buckets, deleted after their grace period.",
                "counter",
                load(&l.copies_retired),
            ),
            (
                "fieldstore_lifecycle_last_run_timestamp_seconds",
                "When the last scheduled run finished (Unix time; 0: none yet).",
                "gauge",
                load(&l.last_run_unix),
            ),
        ] {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
        }
    }

    /// The memory budget and the per-identity limit.
    fn render_budget(&self, s: &mut String) {
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        for (name, help, kind, v) in [
            (
                "fieldstore_memory_budget_bytes",
                "The server-wide memory budget (--memory-budget).",
                "gauge",
                load(&self.budget_bytes),
            ),
            (
                "fieldstore_memory_budget_in_use_bytes",
                "Bytes of the memory budget clients hold now.",
                "gauge",
                load(&self.budget_in_use),
            ),
            (
                "fieldstore_memory_budget_waits_total",
                "Times a connection waited for memory, its socket unread meanwhile.",
                "counter",
                load(&self.budget_waits),
            ),
            (
                "fieldstore_memory_budget_refusals_total",
                "Requests refused as busy because memory did not free in time.",
                "counter",
                load(&self.budget_refusals),
            ),
            (
                "fieldstore_identity_limit_refusals_total",
                "Requests refused because their identity had --max-requests-per-identity in progress.",
                "counter",
                load(&self.identity_limit_refusals),
            ),
        ] {
            let _ = writeln!(s, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}");
        }
    }
}

/// Serves `GET /metrics` on `listener`, one short connection at a time, until the process ends.
pub fn serve_metrics(listener: TcpListener, metrics: Arc<Metrics>) {
    for conn in listener.incoming() {
        let Ok(mut conn) = conn else { continue };
        // A scraper that stalls must not hold the endpoint for long.
        let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
        let _ = conn.set_write_timeout(Some(Duration::from_secs(5)));
        let mut req = Vec::with_capacity(1024);
        let mut buf = [0u8; 1024];
        while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 8192 {
            match conn.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => req.extend_from_slice(&buf[..n]),
            }
        }
        let line = req.split(|b| *b == b'\n').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line);
        let mut words = line.split_whitespace();
        let (method, path) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        let (status, ctype, body) =
            if method == "GET" && (path == "/metrics" || path.starts_with("/metrics?")) {
                (
                    "200 OK",
                    "text/plain; version=0.0.4; charset=utf-8",
                    metrics.render(),
                )
            } else {
                (
                    "404 Not Found",
                    "text/plain; charset=utf-8",
                    "only GET /metrics is served here\n".to_string(),
                )
            };
        let head = format!(
            "HTTP/1.1 {status}\r\nContent-Type: {ctype}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            body.len()
        );
        let _ = conn
            .write_all(head.as_bytes())
            .and_then(|_| conn.write_all(body.as_bytes()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_is_cumulative_and_labels_are_fixed() {
        let m = Metrics::default();
        m.record(MsgType::List, Duration::from_micros(50), true);
        m.record(MsgType::List, Duration::from_millis(3), false);
        m.record(MsgType::List, Duration::from_secs(500), true);
        m.record(MsgType::Reply, Duration::from_secs(1), true);
        let text = m.render();
        for line in [
            "fieldstore_requests_total{op=\"list\"} 3",
            "fieldstore_request_errors_total{op=\"list\"} 1",
            "fieldstore_request_duration_seconds_bucket{op=\"list\",le=\"0.0001\"} 1",
            "fieldstore_request_duration_seconds_bucket{op=\"list\",le=\"0.005\"} 2",
            "fieldstore_request_duration_seconds_bucket{op=\"list\",le=\"120\"} 2",
            "fieldstore_request_duration_seconds_bucket{op=\"list\",le=\"+Inf\"} 3",
            "fieldstore_request_duration_seconds_count{op=\"list\"} 3",
        ] {
            assert!(text.contains(line), "missing {line}");
        }
        assert!(!text.contains("op=\"reply\""));
        m.subscriptions_open.fetch_add(2, Ordering::Relaxed);
        m.notices_sent.fetch_add(7, Ordering::Relaxed);
        m.notices_without_data.fetch_add(3, Ordering::Relaxed);
        let text = m.render();
        assert!(text.contains("fieldstore_subscriptions_open 2\n"));
        assert!(text.contains("fieldstore_notices_sent_total 7\n"));
        assert!(text.contains("fieldstore_notices_without_data_total 3\n"));
        m.count_refusal("ingest", AuthOp::Wipe);
        m.count_refusal("ingest", AuthOp::Wipe);
        m.count_refusal("a\"b", AuthOp::Archive);
        let text = m.render();
        assert!(
            text.contains("fieldstore_refused_total{identity=\"ingest\",operation=\"wipe\"} 2\n")
        );
        assert!(text
            .contains("fieldstore_refused_total{identity=\"a\\\"b\",operation=\"archive\"} 1\n"));
    }

    #[test]
    fn budget_figures_are_rendered() {
        let m = Metrics::default();
        m.budget_bytes.store(512 << 20, Ordering::Relaxed);
        m.budget_in_use.store(3 << 20, Ordering::Relaxed);
        m.budget_waits.fetch_add(4, Ordering::Relaxed);
        m.budget_refusals.fetch_add(1, Ordering::Relaxed);
        m.identity_limit_refusals.fetch_add(2, Ordering::Relaxed);
        let text = m.render();
        for line in [
            "fieldstore_memory_budget_bytes 536870912\n",
            "# TYPE fieldstore_memory_budget_in_use_bytes gauge\nfieldstore_memory_budget_in_use_bytes 3145728\n",
            "fieldstore_memory_budget_waits_total 4\n",
            "fieldstore_memory_budget_refusals_total 1\n",
            "fieldstore_identity_limit_refusals_total 2\n",
        ] {
            assert!(text.contains(line), "missing {line}");
        }
    }
}
