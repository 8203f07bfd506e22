//! `type: diagnostics`: a pass-through over one child that counts, times and logs every call, so
//! a user can see what a job asked of the store and where its time went, without a profiler and
//! without changing the job: only its config.
//!
//! Every call is logged at info level (target `fieldstore::diagnostics`) with the operation, the
//! request or key, how long it took, how many bytes or fields it moved, and how it ended.
//! Streamed answers (retrieve, list) are logged and counted when the stream ends or is dropped,
//! because that is when their cost is known. When the handle is dropped a summary is logged and,
//! with `report: FILE`, appended to that file.

use std::fmt::Write as _;
use std::io::{Read, Seek, SeekFrom, Write as _};
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::api::element::{AxesMap, ControlAction, ControlIdentifier, ListElement, ListOptions};
use crate::api::fdb::{Fdb, ListIter};
use crate::api::operation::Operation;
use crate::api::reader::{DataReader, FieldSpan};
use crate::api::results::{
    CompactElement, ControlElement, DumpElement, PurgeElement, StatsElement, WhereElement,
    WipeElement,
};
use crate::api::ApiError;
use crate::model::request::Request;
use crate::model::Key;

/// What one operation cost over the handle's life.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpStats {
    pub calls: u64,
    pub errors: u64,
    pub total: Duration,
    pub max: Duration,
    /// Field bytes archived or retrieved.
    pub bytes: u64,
    /// Fields archived, list elements, or databases or axis values answered.
    pub items: u64,
}

/// How a call ended, for the log line.
enum Outcome<'e> {
    Ok,
    Failed(&'e dyn std::fmt::Display),
    /// The caller dropped a stream before its end: not an error of the store.
    Abandoned,
}

pub struct DiagnosticsFdb {
    child: Arc<dyn Fdb>,
    report: Option<PathBuf>,
    /// Shared with the streams this handle made: they record their call when they end, which
    /// may be after the handle (and its summary) is gone.
    stats: Counters,
    opened: Instant,
}

type Counters = Arc<Mutex<[OpStats; Operation::ALL.len()]>>;

fn lock_counters(c: &Counters) -> MutexGuard<'_, [OpStats; Operation::ALL.len()]> {
    // Counters are plain numbers: a panic mid-update cannot leave them unusable.
    c.lock().unwrap_or_else(|e| e.into_inner())
}

impl DiagnosticsFdb {
    pub fn new(child: Arc<dyn Fdb>, report: Option<PathBuf>) -> DiagnosticsFdb {
        DiagnosticsFdb {
            child,
            report,
            stats: Arc::new(Mutex::new([OpStats::default(); Operation::ALL.len()])),
            opened: Instant::now(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, [OpStats; Operation::ALL.len()]> {
        lock_counters(&self.stats)
    }

    /// The counters so far for one operation.
    pub fn stats(&self, op: Operation) -> OpStats {
        self.lock()[op as usize]
    }

    fn record(
        &self,
        op: Operation,
        what: &dyn std::fmt::Display,
        took: Duration,
        bytes: u64,
        items: u64,
        outcome: Outcome<'_>,
    ) {
        record(&self.stats, op, what, took, bytes, items, outcome)
    }

    /// Times `f` and records it; `size` says what the answer moved (bytes, items).
    fn call<T>(
        &self,
        op: Operation,
        what: &dyn std::fmt::Display,
        in_bytes: u64,
        f: impl FnOnce() -> Result<T, ApiError>,
        size: impl FnOnce(&T) -> u64,
    ) -> Result<T, ApiError> {
        let t = Instant::now();
        let r = f();
        let took = t.elapsed();
        match &r {
            Ok(v) => self.record(op, what, took, in_bytes, size(v), Outcome::Ok),
            Err(e) => self.record(op, what, took, in_bytes, 0, Outcome::Failed(e)),
        }
        r
    }

    /// The summary: a comment line naming the handle, then one line per operation called,
    /// `op calls errors total_ms max_ms bytes items`.
    pub fn summary(&self) -> String {
        let all = *self.lock();
        let mut s = String::new();
        // Writing into a String cannot fail.
        let _ = writeln!(
            s,
            "# fieldstore diagnostics: {} (pid {}, open {:.3} s); columns: op calls errors total_ms max_ms bytes items",
            self.child.name(),
            std::process::id(),
            self.opened.elapsed().as_secs_f64()
        );
        for op in Operation::ALL {
            let o = &all[op as usize];
            if o.calls == 0 {
                continue;
            }
            let _ = writeln!(
                s,
                "{} {} {} {:.3} {:.3} {} {}",
                op.name(),
                o.calls,
                o.errors,
                o.total.as_secs_f64() * 1000.0,
                o.max.as_secs_f64() * 1000.0,
                o.bytes,
                o.items
            );
        }
        s
    }

    fn append_report(&self, path: &std::path::Path, text: &str) -> std::io::Result<()> {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)?;
        // One write, so concurrent jobs appending to the same report do not interleave lines.
        f.write_all(text.as_bytes())
    }
}

impl Drop for DiagnosticsFdb {
    fn drop(&mut self) {
        let text = self.summary();
        tracing::info!(target: "fieldstore::diagnostics", "summary\n{text}");
        if let Some(path) = &self.report {
            if let Err(e) = self.append_report(path, &text) {
                // Drop cannot return an error; losing the report must not go unnoticed.
                tracing::warn!(
                    target: "fieldstore::diagnostics",
                    report = %path.display(), error = %e, "cannot append the diagnostics report"
                );
            }
        }
    }
}

/// Counts one call and logs it.
fn record(
    counters: &Counters,
    op: Operation,
    what: &dyn std::fmt::Display,
    took: Duration,
    bytes: u64,
    items: u64,
    outcome: Outcome<'_>,
) {
    {
        let mut all = lock_counters(counters);

        let s = &mut all[op as usize];
        s.calls += 1;
        s.total += took;
        s.max = s.max.max(took);
        s.bytes += bytes;
        s.items += items;
        if matches!(outcome, Outcome::Failed(_)) {
            s.errors += 1;
        }
    }
    let ms = took.as_secs_f64() * 1000.0;
    let op = op.name();
    match outcome {
        Outcome::Ok => tracing::info!(
            target: "fieldstore::diagnostics",
            op, request = %what, ms, bytes, items, outcome = "ok"
        ),
        Outcome::Abandoned => tracing::info!(
            target: "fieldstore::diagnostics",
            op, request = %what, ms, bytes, items, outcome = "abandoned before the end"
        ),
        Outcome::Failed(e) => tracing::info!(
            target: "fieldstore::diagnostics",
            op, request = %what, ms, bytes, items, outcome = "error", error = %e
        ),
    }
}

/// A retrieve stream that records its call when it ends, fails or is dropped.
struct CountingRead {
    counters: Counters,
    inner: Box<dyn DataReader>,
    request: String,
    started: Instant,
    bytes: u64,
    done: bool,
}

impl CountingRead {
    fn finish(&mut self, outcome: Outcome<'_>) {
        if !self.done {
            self.done = true;
            record(
                &self.counters,
                Operation::Retrieve,
                &self.request,
                self.started.elapsed(),
                self.bytes,
                0,
                outcome,
            );
        }
    }
}

impl Read for CountingRead {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self.inner.read(buf) {
            Ok(0) if !buf.is_empty() => {
                self.finish(Outcome::Ok);
                Ok(0)
            }
            Ok(n) => {
                self.bytes += n as u64;
                Ok(n)
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => Err(e),
            Err(e) => {
                self.finish(Outcome::Failed(&e));
                Err(e)
            }
        }
    }
}

impl Seek for CountingRead {
    fn seek(&mut self, pos: SeekFrom) -> std::io::Result<u64> {
        self.inner.seek(pos)
    }
}

impl DataReader for CountingRead {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn tell(&self) -> u64 {
        self.inner.tell()
    }
    fn fields(&self) -> &[FieldSpan] {
        self.inner.fields()
    }
    fn copy_to_file(&mut self, out: &mut std::fs::File) -> std::io::Result<u64> {
        match self.inner.copy_to_file(out) {
            Ok(n) => {
                self.bytes += n;
                self.finish(Outcome::Ok);
                Ok(n)
            }
            Err(e) => {
                self.finish(Outcome::Failed(&e));
                Err(e)
            }
        }
    }
}

impl Drop for CountingRead {
    fn drop(&mut self) {
        self.finish(Outcome::Abandoned);
    }
}

/// A list stream that records its call when it ends or is dropped; an error element counts the
/// call as failed.
struct CountingList {
    counters: Counters,
    inner: ListIter,
    request: String,
    started: Instant,
    items: u64,
    error: Option<String>,
    done: bool,
}

impl CountingList {
    fn finish(&mut self, ended: bool) {
        if self.done {
            return;
        }
        self.done = true;
        let outcome = match (&self.error, ended) {
            (Some(e), _) => Outcome::Failed(e),
            (None, true) => Outcome::Ok,
            (None, false) => Outcome::Abandoned,
        };
        record(
            &self.counters,
            Operation::List,
            &self.request,
            self.started.elapsed(),
            0,
            self.items,
            outcome,
        );
    }
}

impl Iterator for CountingList {
    type Item = Result<ListElement, ApiError>;

    fn next(&mut self) -> Option<Self::Item> {
        let next = self.inner.next();
        match &next {
            None => self.finish(true),
            Some(Ok(_)) => self.items += 1,
            Some(Err(e)) => {
                if self.error.is_none() {
                    self.error = Some(e.to_string());
                }
            }
        }
        next
    }
}

impl Drop for CountingList {
    fn drop(&mut self) {
        self.finish(false);
    }
}

impl Fdb for DiagnosticsFdb {
    fn name(&self) -> String {
        format!("diagnostics({})", self.child.name())
    }

    /// Counts every operation below; an operation added later passes through uncounted until
    /// it is written here, rather than failing.
    fn forward_to(&self) -> Option<&dyn Fdb> {
        Some(&*self.child)
    }

    fn archive(&self, key: Option<&Key>, data: &[u8]) -> Result<(), ApiError> {
        let what: &dyn std::fmt::Display = match key {
            Some(k) => k,
            None => &"(key from the GRIB message)",
        };
        self.call(
            Operation::Archive,
            what,
            data.len() as u64,
            || self.child.archive(key, data),
            |_| 1,
        )
    }

    fn archive_grib(&self, mars_key: &Key, data: &[u8]) -> Result<(), ApiError> {
        self.call(
            Operation::Archive,
            mars_key,
            data.len() as u64,
            || self.child.archive_grib(mars_key, data),
            |_| 1,
        )
    }

    fn flush(&self) -> Result<(), ApiError> {
        self.call(Operation::Flush, &"", 0, || self.child.flush(), |_| 0)
    }

    fn retrieve(&self, request: &Request) -> Result<Box<dyn DataReader>, ApiError> {
        let started = Instant::now();
        match self.child.retrieve(request) {
            Ok(inner) => Ok(Box::new(CountingRead {
                counters: self.stats.clone(),
                inner,
                request: request.to_string(),
                started,
                bytes: 0,
                done: false,
            })),
            Err(e) => {
                self.record(
                    Operation::Retrieve,
                    request,
                    started.elapsed(),
                    0,
                    0,
                    Outcome::Failed(&e),
                );
                Err(e)
            }
        }
    }

    fn list(&self, request: &Request, options: ListOptions) -> Result<ListIter, ApiError> {
        let started = Instant::now();
        match self.child.list(request, options) {
            Ok(inner) => Ok(Box::new(CountingList {
                counters: self.stats.clone(),
                inner,
                request: request.to_string(),
                started,
                items: 0,
                error: None,
                done: false,
            })),
            Err(e) => {
                self.record(
                    Operation::List,
                    request,
                    started.elapsed(),
                    0,
                    0,
                    Outcome::Failed(&e),
                );
                Err(e)
            }
        }
    }

    fn axes(&self, request: &Request, depth: u8) -> Result<AxesMap, ApiError> {
        self.call(
            Operation::Axes,
            request,
            0,
            || self.child.axes(request, depth),
            |a| a.values().map(|v| v.len() as u64).sum(),
        )
    }

    fn where_(&self, request: &Request) -> Result<Vec<WhereElement>, ApiError> {
        self.call(
            Operation::Where,
            request,
            0,
            || self.child.where_(request),
            |v| v.len() as u64,
        )
    }

    /// Counts the call and how long it took to start; the notices are the caller's.
    fn subscribe(
        &self,
        request: &Request,
        start: &crate::api::subscribe::Start,
    ) -> Result<crate::api::subscribe::SubscriptionBox, ApiError> {
        self.call(
            Operation::Subscribe,
            request,
            0,
            || self.child.subscribe(request, start),
            |_| 0,
        )
    }

    fn wipe(&self, request: &Request, doit: bool) -> Result<Vec<WipeElement>, ApiError> {
        self.call(
            Operation::Wipe,
            request,
            0,
            || self.child.wipe(request, doit),
            |v| v.len() as u64,
        )
    }

    fn purge(&self, request: &Request, doit: bool) -> Result<Vec<PurgeElement>, ApiError> {
        self.call(
            Operation::Purge,
            request,
            0,
            || self.child.purge(request, doit),
            |v| v.len() as u64,
        )
    }

    fn stats(&self, request: &Request) -> Result<Vec<StatsElement>, ApiError> {
        self.call(
            Operation::Stats,
            request,
            0,
            || self.child.stats(request),
            |v| v.len() as u64,
        )
    }

    fn dump(&self, request: &Request) -> Result<Vec<DumpElement>, ApiError> {
        self.call(
            Operation::Dump,
            request,
            0,
            || self.child.dump(request),
            |v| v.len() as u64,
        )
    }

    fn control(
        &self,
        request: &Request,
        action: ControlAction,
        identifiers: &[ControlIdentifier],
    ) -> Result<Vec<ControlElement>, ApiError> {
        self.call(
            Operation::Control,
            request,
            0,
            || self.child.control(request, action, identifiers),
            |v| v.len() as u64,
        )
    }

    fn compact(&self, request: &Request) -> Result<Vec<CompactElement>, ApiError> {
        self.call(
            Operation::Compact,
            request,
            0,
            || self.child.compact(request),
            |v| v.len() as u64,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::LocalFdb;
    use crate::grib;
    use crate::model::config::{from_yaml_str, FdbConfig};
    use crate::model::request::parse_request;

    fn local(dir: &std::path::Path) -> Arc<dyn Fdb> {
        let yaml = format!("spaces: [{{roots: [{{path: {}}}]}}]", dir.display());
        match from_yaml_str(&yaml, "test").unwrap() {
            FdbConfig::Local(l) => Arc::new(LocalFdb::new(l).unwrap()),
            other => panic!("expected a local config, got {other:?}"),
        }
    }

    fn field(step: &str) -> (Key, Vec<u8>) {
        let keys = [
            ("class", "od"),
            ("stream", "oper"),
            ("type", "fc"),
            ("expver", "0001"),
            ("date", "20261122"),
            ("time", "1200"),
            ("step", step),
            ("levtype", "pl"),
            ("levelist", "500"),
            ("param", "130"),
        ];
        let msg = grib::sample::make_field(&keys, 50, 1).unwrap();
        (grib::mars_keys(&msg).unwrap(), msg)
    }

    #[test]
    fn counts_calls_bytes_and_streamed_results() {
        let d = tempfile::tempdir().unwrap();
        let report = d.path().join("report.txt");
        let f = DiagnosticsFdb::new(local(&d.path().join("root")), Some(report.clone()));
        let mut total = 0;
        for step in ["0", "6", "12"] {
            let (k, msg) = field(step);
            total += msg.len() as u64;
            f.archive_grib(&k, &msg).unwrap();
        }
        f.flush().unwrap();
        let a = f.stats(Operation::Archive);
        assert_eq!((a.calls, a.errors, a.bytes, a.items), (3, 0, total, 3));
        assert_eq!(f.stats(Operation::Flush).calls, 1);

        // A list is counted when it ends, with its elements.
        let all = parse_request("class=od,expver=0001").unwrap();
        let it = f.list(&all, ListOptions::default()).unwrap();
        assert_eq!(
            f.stats(Operation::List).calls,
            0,
            "not yet: the stream is open"
        );
        assert_eq!(it.count(), 3);
        let l = f.stats(Operation::List);
        assert_eq!((l.calls, l.errors, l.items), (1, 0, 3));

        // A retrieve is counted with the bytes actually read, also when dropped early.
        let req = parse_request(
            "class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl,levelist=500,param=130,step=0/6/12",
        )
        .unwrap();
        let mut back = Vec::new();
        f.retrieve(&req).unwrap().read_to_end(&mut back).unwrap();
        assert_eq!(back.len() as u64, total);
        let mut partial = f.retrieve(&req).unwrap();
        let mut ten = [0u8; 10];
        partial.read_exact(&mut ten).unwrap();
        drop(partial);
        let r = f.stats(Operation::Retrieve);
        assert_eq!((r.calls, r.errors, r.bytes), (2, 0, total + 10));

        drop(f);
        let text = std::fs::read_to_string(&report).unwrap();
        let rows: Vec<Vec<&str>> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.split_whitespace().collect())
            .collect();
        let row = |op: &str| {
            rows.iter()
                .find(|r| r[0] == op)
                .unwrap_or_else(|| panic!("no {op} in {text}"))
                .clone()
        };
        assert_eq!(row("archive")[1], "3");
        assert_eq!(row("archive")[2], "0");
        assert_eq!(row("archive")[5], total.to_string());
        assert_eq!(row("flush")[1], "1");
        assert_eq!(row("list")[6], "3");
        assert_eq!(row("retrieve")[1], "2");
        assert!(rows.iter().all(|r| r.len() == 7), "{text}");
        assert!(
            !text.contains("\naxes "),
            "operations never called are left out"
        );
    }

    #[test]
    fn errors_are_counted_and_passed_on() {
        let d = tempfile::tempdir().unwrap();
        let f = DiagnosticsFdb::new(local(&d.path().join("root")), None);
        let (_, msg) = field("0");
        // A key that disagrees with the message is refused by the child.
        let wrong = grib::mars_keys(&msg).unwrap().with("step", "99");
        assert!(f.archive(Some(&wrong), &msg).is_err());
        assert!(f.archive(None, b"not grib").is_err());
        let a = f.stats(Operation::Archive);
        assert_eq!((a.calls, a.errors), (2, 2));
        let req = parse_request("class=od,expver=0001").unwrap();
        let _ = f.wipe(&req, false);
        assert_eq!(f.stats(Operation::Wipe).calls, 1);
        assert!(f.summary().lines().any(|l| l.starts_with("archive 2 2 ")));
    }
}
