//! Tests that need what a machine may lack skip loudly: a `SKIP` line on stderr naming the test
//! and what is missing. In CI (`CI=true`), where scripts/install-deps installs every tool the
//! tests use, a missing tool fails the test instead, so a comparison can't quietly stop running.

use std::io::Write as _;

/// Says on stderr that `test` is skipped for lack of `missing`. When `installable` (a tool
/// `scripts/install-deps --tests` installs) and `CI=true`, panics instead; a privilege no
/// installer gives (root, mounting) is skipped loudly in CI too.
pub fn skip(test: &str, missing: &str, installable: bool) {
    if installable && std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "{test}: {missing} not found, and CI=true: scripts/install-deps --tests installs it"
        );
    }
    let hint = if installable {
        " not found (scripts/install-deps --tests installs it)"
    } else {
        ""
    };
    // Straight to the descriptor: the test harness captures `eprintln!` of passing tests.
    let _ = writeln!(std::io::stderr(), "SKIP {test}: {missing}{hint}");
}
