//! Tests that need what a machine may lack skip loudly: a `SKIP` line on stderr naming the test
//! and what is missing. In CI (`CI=true`), where scripts/install-deps installs every tool the
//! tests use, a missing tool fails the test instead, so a comparison can't quietly stop running.

/// What a skipped test lacks.
pub enum Missing<'a> {
    /// A tool `scripts/install-deps --tests` installs: its absence fails the test in CI.
    Tool(&'a str),
    /// A privilege no installer gives (root, mounting): skipped loudly, in CI too.
    Privilege(&'a str),
}

/// Says on stderr that `test` is skipped for lack of `missing`; panics instead when `CI=true`
/// and what is missing is a tool.
pub fn skip(test: &str, missing: Missing) {
    match missing {
        Missing::Tool(tool) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!(
                "{test}: {tool} not found, and CI=true: scripts/install-deps --tests installs it"
            )
        }
        Missing::Tool(tool) => {
            eprintln!("SKIP {test}: {tool} not found (scripts/install-deps --tests installs it)")
        }
        Missing::Privilege(what) => eprintln!("SKIP {test}: {what}"),
    }
}
