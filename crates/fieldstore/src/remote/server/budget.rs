//! What the server may hold for its clients: a server-wide and a per-connection memory budget,
//! and a cap on each identity's requests in progress.
//!
//! A connection that would go over its budget waits before reading more of its socket, so the
//! client is held back by TCP flow control instead of the server allocating; a wait that lasts
//! too long ends the request with a `busy` error. Only buffers that grow with what clients send
//! or ask for are counted (received fields, retrieve chunks); the fixed cost of a connection
//! (its socket buffers and thread) is bounded by `--max-connections` instead.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::super::metrics::Metrics;

/// How often a waiting connection looks whether the server is stopping.
const TICK: Duration = Duration::from_millis(200);

/// Bytes the server's clients may make it hold at once, shared by every connection.
pub(crate) struct Budget {
    total: u64,
    per_connection: u64,
    wait: Duration,
    used: Mutex<u64>,
    freed: Condvar,
    metrics: Arc<Metrics>,
}

/// One connection's part of the budget (changed only under the budget's lock).
#[derive(Default)]
pub(crate) struct Share {
    used: AtomicU64,
}

/// Bytes taken from the budget, given back when dropped (on whichever thread is done with them).
pub(crate) struct Lease<'a> {
    budget: &'a Budget,
    share: &'a Share,
    bytes: u64,
}

/// Why a connection got no memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// The budget stayed full for the whole wait.
    Busy(String),
    /// The server is stopping: the request is abandoned.
    Stopping,
}

impl Budget {
    pub(super) fn new(
        total: u64,
        per_connection: u64,
        wait: Duration,
        metrics: Arc<Metrics>,
    ) -> Budget {
        let total = total.max(1);
        metrics.budget_bytes.store(total, Ordering::Relaxed);
        Budget {
            total,
            per_connection: per_connection.clamp(1, total),
            wait,
            used: Mutex::new(0),
            freed: Condvar::new(),
            metrics,
        }
    }

    fn lock(&self) -> MutexGuard<'_, u64> {
        self.used.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether one connection may hold `bytes` at once within its budget (a larger field is
    /// received in leased pieces where it can be).
    pub(crate) fn holds(&self, bytes: u64) -> bool {
        bytes <= self.per_connection
    }

    /// Takes `bytes` (at most a connection's budget: one request larger than that may still go
    /// alone), waiting while the connection or the server is over its budget.
    pub(crate) fn take<'a>(
        &'a self,
        share: &'a Share,
        bytes: u64,
        stopping: &AtomicBool,
    ) -> Result<Lease<'a>, Refusal> {
        let bytes = bytes.min(self.per_connection);
        let mut used = self.lock();
        let fits = |used: u64| {
            share.used.load(Ordering::Relaxed) + bytes <= self.per_connection
                && used + bytes <= self.total
        };
        if !fits(*used) {
            self.metrics.budget_waits.fetch_add(1, Ordering::Relaxed);
            let started = Instant::now();
            while !fits(*used) {
                if stopping.load(Ordering::SeqCst) {
                    return Err(Refusal::Stopping);
                }
                let waited = started.elapsed();
                if waited >= self.wait {
                    self.metrics.budget_refusals.fetch_add(1, Ordering::Relaxed);
                    let mine = share.used.load(Ordering::Relaxed);
                    let why = if mine + bytes > self.per_connection {
                        format!(
                            "this connection already holds {} of its {} (--connection-budget)",
                            human(mine),
                            human(self.per_connection)
                        )
                    } else {
                        format!(
                            "clients hold {} of the server's {} (--memory-budget)",
                            human(*used),
                            human(self.total)
                        )
                    };
                    return Err(Refusal::Busy(format!(
                        "the server is short of memory for this request: {why}, and none freed within {} s; try again later",
                        self.wait.as_secs()
                    )));
                }
                used = self
                    .freed
                    .wait_timeout(used, TICK.min(self.wait - waited))
                    .map(|r| r.0)
                    .unwrap_or_else(|e| e.into_inner().0);
            }
        }
        Ok(self.grant(&mut used, share, bytes))
    }

    /// Counts `bytes` as held by `share`, under the budget's lock.
    fn grant<'a>(&'a self, used: &mut u64, share: &'a Share, bytes: u64) -> Lease<'a> {
        *used += bytes;
        share.used.fetch_add(bytes, Ordering::Relaxed);
        self.metrics.budget_in_use.store(*used, Ordering::Relaxed);
        Lease {
            budget: self,
            share,
            bytes,
        }
    }

    /// Takes `bytes` now or not at all, for what the server may do without (a subscriber's
    /// field can go as a plain notice, which the client retrieves in budgeted chunks). Unlike
    /// [`Budget::take`], more than a connection's budget is never granted, the bytes being held
    /// whole; and only while the server's budget stays half free, so that subscribers which
    /// stop reading cannot leave writers without memory.
    pub(super) fn try_take<'a>(&'a self, share: &'a Share, bytes: u64) -> Option<Lease<'a>> {
        let mut used = self.lock();
        if share.used.load(Ordering::Relaxed).saturating_add(bytes) > self.per_connection
            || used.saturating_add(bytes) > self.total / 2
        {
            return None;
        }
        Some(self.grant(&mut used, share, bytes))
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        let mut used = self.budget.lock();
        *used = used.saturating_sub(self.bytes);
        self.share.used.fetch_sub(self.bytes, Ordering::Relaxed);
        self.budget
            .metrics
            .budget_in_use
            .store(*used, Ordering::Relaxed);
        drop(used);
        self.budget.freed.notify_all();
    }
}

/// Requests in progress per identity, so one client (or one leaked token) cannot take every
/// thread and budget of the server from the others.
pub(crate) struct PerIdentity {
    max: usize,
    busy: Mutex<HashMap<Arc<str>, usize>>,
    metrics: Arc<Metrics>,
}

/// One request of an identity in progress, until dropped.
pub(crate) struct Turn<'a> {
    of: &'a PerIdentity,
    identity: Arc<str>,
}

impl PerIdentity {
    /// `max == 0`: no limit.
    pub(super) fn new(max: usize, metrics: Arc<Metrics>) -> PerIdentity {
        PerIdentity {
            max,
            busy: Mutex::new(HashMap::new()),
            metrics,
        }
    }

    /// A turn for one more request of `identity`, or the error to send it.
    pub(crate) fn enter(&self, identity: &Arc<str>) -> Result<Turn<'_>, String> {
        let mut busy = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        let n = busy.entry(identity.clone()).or_insert(0);
        if self.max > 0 && *n >= self.max {
            self.metrics
                .identity_limit_refusals
                .fetch_add(1, Ordering::Relaxed);
            return Err(format!(
                "identity '{identity}' already has {n} requests in progress, its limit (--max-requests-per-identity {}); wait for one to end",
                self.max
            ));
        }
        *n += 1;
        Ok(Turn {
            of: self,
            identity: identity.clone(),
        })
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut busy = self.of.busy.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = busy.get_mut(&self.identity) {
            *n -= 1;
            if *n == 0 {
                busy.remove(&self.identity);
            }
        }
    }
}

/// The default server-wide budget: a quarter of the machine's memory, between 256 MiB and 8 GiB.
pub fn default_memory_budget() -> u64 {
    let total = machine_memory().unwrap_or(4 << 30);
    (total / 4).clamp(256 << 20, 8 << 30)
}

/// The default per-connection budget: 64 MiB, or an eighth of the server's if that is less.
pub fn default_connection_budget(memory_budget: u64) -> u64 {
    (memory_budget / 8).clamp(1 << 20, 64 << 20)
}

fn machine_memory() -> Option<u64> {
    let info = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = info.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// Parses a size such as `512MiB`, `64M`, `2GiB`, `1048576` (binary units; `k`/`m`/`g` too).
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !c.is_ascii_digit() && c != '.')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let value: f64 = num
        .parse()
        .map_err(|_| format!("'{s}' is not a size (say 512MiB, 64M, 2GiB or a byte count)"))?;
    let scale: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        other => {
            return Err(format!(
                "'{s}': unknown unit '{other}' (use B, KiB, MiB, GiB or TiB)"
            ))
        }
    };
    let bytes = value * scale as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 {
        return Err(format!("'{s}' is not a usable size"));
    }
    Ok(bytes as u64)
}

/// A byte count for messages.
fn human(bytes: u64) -> String {
    if bytes >= 1 << 30 {
        format!("{:.1} GiB", bytes as f64 / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", bytes as f64 / (1u64 << 20) as f64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(total: u64, per: u64, wait_ms: u64) -> Budget {
        Budget::new(
            total,
            per,
            Duration::from_millis(wait_ms),
            Arc::new(Metrics::default()),
        )
    }

    #[test]
    fn try_take_grants_only_what_fits_now_and_never_beyond_a_share() {
        let b = budget(200, 40, 10_000);
        let (s1, s2, s3) = (Share::default(), Share::default(), Share::default());
        assert!(b.try_take(&s1, 41).is_none(), "more than a share");
        let a = b.try_take(&s1, 40).unwrap();
        assert!(b.try_take(&s1, 1).is_none(), "its share is spent");
        let c = b.try_take(&s2, 40).unwrap();
        assert!(
            b.try_take(&s3, 21).is_none(),
            "half the server's budget is spent"
        );
        let d = b.try_take(&s3, 20).unwrap();
        assert_eq!(b.metrics.budget_in_use.load(Ordering::Relaxed), 100);
        let s4 = Share::default();
        let archive = b.take(&s4, 40, &AtomicBool::new(false)).unwrap();
        assert_eq!(
            b.metrics.budget_in_use.load(Ordering::Relaxed),
            140,
            "the other half is there"
        );
        drop((a, c, d, archive));
        assert_eq!(b.metrics.budget_in_use.load(Ordering::Relaxed), 0);
        assert!(b.try_take(&s1, 40).is_some());
        assert_eq!(
            b.metrics.budget_waits.load(Ordering::Relaxed),
            0,
            "it never waits"
        );
    }

    #[test]
    fn a_connection_over_its_share_waits_then_gets_busy() {
        let b = budget(100, 40, 300);
        let (a, other) = (Share::default(), Share::default());
        let no = AtomicBool::new(false);
        let held = b.take(&a, 30, &no).unwrap();
        // Over this connection's 40, not over the server's 100.
        match b.take(&a, 20, &no) {
            Err(Refusal::Busy(msg)) => assert!(msg.contains("--connection-budget"), "{msg}"),
            _ => panic!("expected busy"),
        }
        assert!(b.take(&other, 20, &no).is_ok());
        assert_eq!(b.metrics.budget_waits.load(Ordering::Relaxed), 1);
        assert_eq!(b.metrics.budget_refusals.load(Ordering::Relaxed), 1);
        drop(held);
        assert!(b.take(&a, 40, &no).is_ok());
    }

    #[test]
    fn a_wait_ends_as_soon_as_memory_frees() {
        let b = budget(50, 50, 10_000);
        let (a, other) = (Share::default(), Share::default());
        let no = AtomicBool::new(false);
        let held = b.take(&a, 50, &no).unwrap();
        std::thread::scope(|s| {
            let waiter = s.spawn(|| {
                let started = Instant::now();
                let got = b.take(&other, 10, &no).map(|_| ());
                (got, started.elapsed())
            });
            std::thread::sleep(Duration::from_millis(100));
            drop(held);
            let (got, waited) = waiter.join().unwrap();
            assert!(got.is_ok());
            assert!(waited < Duration::from_secs(5), "{waited:?}");
        });
        assert_eq!(b.metrics.budget_in_use.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_stopping_server_ends_waits() {
        let b = budget(10, 10, 10_000);
        let (a, other) = (Share::default(), Share::default());
        let _held = b.take(&a, 10, &AtomicBool::new(false)).unwrap();
        let stop = AtomicBool::new(true);
        assert_eq!(b.take(&other, 1, &stop).err(), Some(Refusal::Stopping));
    }

    #[test]
    fn one_request_larger_than_a_share_goes_alone() {
        let b = budget(100, 10, 100);
        let a = Share::default();
        let no = AtomicBool::new(false);
        let l = b.take(&a, 1 << 30, &no).unwrap();
        assert_eq!(l.bytes, 10);
    }

    #[test]
    fn identities_are_limited_each_on_their_own() {
        let m = Arc::new(Metrics::default());
        let p = PerIdentity::new(2, m.clone());
        let (alice, bob): (Arc<str>, Arc<str>) = (Arc::from("alice"), Arc::from("bob"));
        let t1 = p.enter(&alice).unwrap();
        let _t2 = p.enter(&alice).unwrap();
        let e = p.enter(&alice).err().unwrap();
        assert!(
            e.contains("'alice'") && e.contains("--max-requests-per-identity 2"),
            "{e}"
        );
        assert!(p.enter(&bob).is_ok());
        drop(t1);
        assert!(p.enter(&alice).is_ok());
        assert_eq!(m.identity_limit_refusals.load(Ordering::Relaxed), 1);
        let unlimited = PerIdentity::new(0, m);
        let turns: Vec<_> = (0..100).map(|_| unlimited.enter(&alice).unwrap()).collect();
        assert_eq!(turns.len(), 100);
    }

    #[test]
    fn sizes_parse_in_binary_units() {
        assert_eq!(parse_size("512MiB"), Ok(512 << 20));
        assert_eq!(parse_size("64M"), Ok(64 << 20));
        assert_eq!(parse_size("2GiB"), Ok(2 << 30));
        assert_eq!(parse_size("1.5k"), Ok(1536));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("5 parsecs").is_err());
        assert!(parse_size("0").is_err());
    }

    #[test]
    fn defaults_follow_the_machine_within_bounds() {
        let m = default_memory_budget();
        assert!((256 << 20..=8 << 30).contains(&m));
        assert_eq!(default_connection_budget(512 << 20), 64 << 20);
        assert_eq!(default_connection_budget(256 << 20), 32 << 20);
    }
}
