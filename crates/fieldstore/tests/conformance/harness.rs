//! Runs one case on every backend and reports which failed.

use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, RwLock};

use fieldstore::api::Fdb;

use crate::backends::{Backend, Instance, Quirk, ALL};

/// Cases share it; a case measuring the whole process's memory takes it alone.
static EXCLUSIVE: RwLock<()> = RwLock::new(());

/// What a case gets: one freshly built store of one backend.
pub struct Env {
    pub backend: &'static Backend,
    instance: Instance,
    // Dropped last, after the instance (which may be a server using it).
    _dir: tempfile::TempDir,
}

impl Env {
    /// A new handle onto this case's store; two handles share only what was flushed.
    pub fn handle(&self) -> Arc<dyn Fdb> {
        self.instance.handle()
    }

    pub fn has(&self, quirk: Quirk) -> bool {
        self.backend.quirks.contains(&quirk)
    }
}

/// Whether `CONFORMANCE_BACKENDS` (comma-separated words, unset: all) names the backend.
fn chosen(backend: &Backend) -> bool {
    match std::env::var("CONFORMANCE_BACKENDS") {
        Ok(words) if !words.trim().is_empty() => words
            .split(',')
            .any(|w| !w.trim().is_empty() && backend.name.contains(w.trim())),
        _ => true,
    }
}

/// Runs `case` on every backend (each in a new temporary directory), then fails naming the
/// case and each backend it failed on.
pub fn run(case: &str, f: fn(&Env)) {
    run_with(case, f, false)
}

/// As [`run`], with no other case running meanwhile (for process-wide measurements).
pub fn run_alone(case: &str, f: fn(&Env)) {
    run_with(case, f, true)
}

fn run_with(case: &str, f: fn(&Env), alone: bool) {
    let mut failures = Vec::new();
    for backend in ALL {
        if let Some((_, why)) = backend.known_bugs.iter().find(|(c, _)| *c == case) {
            // Straight to stderr, past the test harness's capture: a known bug is never quiet.
            let _ = writeln!(
                std::io::stderr(),
                "KNOWN BUG, not run: case `{case}` on backend `{}`: {why}",
                backend.name
            );
            continue;
        }
        if !(backend.available)() || !chosen(backend) {
            continue;
        }
        let outcome = {
            let _shared;
            let _alone;
            if alone {
                _alone = EXCLUSIVE.write().unwrap_or_else(|e| e.into_inner());
            } else {
                _shared = EXCLUSIVE.read().unwrap_or_else(|e| e.into_inner());
            }
            catch_unwind(AssertUnwindSafe(|| {
                let dir = tempfile::tempdir().expect("a temporary directory");
                let env = Env {
                    backend,
                    instance: (backend.open)(dir.path()),
                    _dir: dir,
                };
                f(&env);
            }))
        };
        if let Err(panic) = outcome {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failures.push(format!("  [{}] {msg}", backend.name));
        }
    }
    assert!(
        failures.is_empty(),
        "conformance case `{case}` failed on {} backend(s):\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// Declares one `#[test]` per case, each run on every backend.
#[macro_export]
macro_rules! cases {
    ($($name:ident),* $(,)?) => {
        mod on_every_backend {
            $(
                #[test]
                fn $name() {
                    $crate::harness::run(stringify!($name), super::$name);
                }
            )*
        }
    };
}
