//! Tests that need what a machine may lack skip loudly: a `SKIP` line on stderr naming the test
//! and what is missing. In CI (`CI=true`), where scripts/install-deps installs every tool the
//! tests use, a missing tool fails the test instead, so a comparison can't quietly stop running.

/// Whether `CI=true`: what scripts/install-deps installs must then be there.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// Skips `test` for lack of `tool` (installed by `scripts/install-deps --tests`); fails in CI.
pub fn missing_tool(test: &str, tool: &str) {
    if in_ci() {
        panic!("{test}: {tool} not found, and CI=true: scripts/install-deps --tests installs it");
    }
    eprintln!("SKIP {test}: {tool} not found (scripts/install-deps --tests installs it)");
}

/// Skips `test` for lack of a privilege no installer gives (root, mounting): loud, also in CI.
pub fn missing_privilege(test: &str, what: &str) {
    eprintln!("SKIP {test}: {what}");
}
