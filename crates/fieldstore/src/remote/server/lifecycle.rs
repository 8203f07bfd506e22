//! The server's lifecycle schedule (docs/lifecycle.md): the config's rules run at the server's
//! start and then every `lifecycle.every`, on a thread of their own, so a rolling hot cache needs
//! no cron. Each action is logged (by `api::lifecycle`) and counted in the server's metrics; a
//! run that fails is logged and counted, and the next one is tried on time.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

use crate::api::{lifecycle, LocalFdb};
use crate::model::config::{LifecycleConfig, LocalConfig};
use crate::remote::metrics::Metrics;

/// Starts the schedule when the config's `lifecycle:` has an `every:`; `None` when it has not.
/// The thread ends once `stop` is set (checked every 100 ms, and between runs).
pub fn spawn_lifecycle_schedule(
    config: &LocalConfig,
    metrics: Arc<Metrics>,
    stop: Arc<AtomicBool>,
) -> std::io::Result<Option<JoinHandle<()>>> {
    let Some(rules) = config.lifecycle.clone() else {
        return Ok(None);
    };
    let Some(every) = rules.every else {
        return Ok(None);
    };
    let config = config.clone();
    let handle = std::thread::Builder::new()
        .name("lifecycle".into())
        .spawn(move || {
            let fdb = match LocalFdb::new(config) {
                Ok(f) => f,
                Err(e) => {
                    tracing::error!(target: "fieldstore::lifecycle", "the lifecycle schedule cannot open the store, no rules will run: {e}");
                    metrics.lifecycle.runs_failed.fetch_add(1, Ordering::Relaxed);
                    return;
                }
            };
            tracing::info!(target: "fieldstore::lifecycle", every = ?every, rules = rules.rules.len(), "lifecycle schedule started");
            while !stop.load(Ordering::Relaxed) {
                run_once(&fdb, &rules, &metrics);
                let next = Instant::now() + every;
                while !stop.load(Ordering::Relaxed) {
                    let left = next.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        break;
                    }
                    std::thread::sleep(left.min(Duration::from_millis(100)));
                }
            }
        })?;
    Ok(Some(handle))
}

/// One run as of now (or `FIELDSTORE_NOW`, read at each run: tests and replays), with the old
/// copies moves left retired before and after it.
fn run_once(fdb: &LocalFdb, rules: &LifecycleConfig, metrics: &Metrics) {
    let counters = &metrics.lifecycle;
    let now = match lifecycle::moment(std::env::var("FIELDSTORE_NOW").ok().as_deref()) {
        Ok(n) => n,
        Err(e) => {
            tracing::error!(target: "fieldstore::lifecycle", "scheduled run not started: FIELDSTORE_NOW: {e}");
            counters.runs_failed.fetch_add(1, Ordering::Relaxed);
            return;
        }
    };
    let mut retired = fdb.retire_left_copies();
    let (mut moved, mut wiped, mut failed) = (0u64, 0u64, 0u64);
    match lifecycle::run(fdb, rules, now, false) {
        Ok(actions) => {
            for a in &actions {
                match (a.done, a.action.as_str()) {
                    (true, "move") => moved += 1,
                    (true, _) => wiped += 1,
                    (false, _) => failed += 1,
                }
            }
        }
        Err(e) => {
            tracing::error!(target: "fieldstore::lifecycle", "scheduled run failed: {e}");
            counters.runs_failed.fetch_add(1, Ordering::Relaxed);
        }
    }
    retired += fdb.retire_left_copies();
    counters.moved.fetch_add(moved, Ordering::Relaxed);
    counters.wiped.fetch_add(wiped, Ordering::Relaxed);
    counters.failed.fetch_add(failed, Ordering::Relaxed);
    counters
        .copies_retired
        .fetch_add(retired as u64, Ordering::Relaxed);
    counters.runs.fetch_add(1, Ordering::Relaxed);
    let unix = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    counters.last_run_unix.store(unix, Ordering::Relaxed);
    tracing::info!(target: "fieldstore::lifecycle", as_of = %now, moved, wiped, failed, retired, "scheduled lifecycle run finished");
}
