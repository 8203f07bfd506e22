//! Driving the real FDB5 (Debian `fdb5`, installed by scripts/install-deps) beside fieldstore, for
//! the side-by-side tests. Included with `#[path]` by the tests that compare with FDB5 only.

use std::path::Path;
use std::process::Command;

/// Whether `fdb-write` is on PATH; without it the comparisons cannot run.
pub fn have_fdb5() -> bool {
    Command::new("fdb-write").arg("--help").output().is_ok()
}

/// Runs `c`, which must succeed; its standard output.
pub fn run(c: &mut Command) -> String {
    let o = c.output().unwrap();
    assert!(
        o.status.success(),
        "{c:?}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Points `c` (an FDB5 tool or fieldstore) at the YAML `config`, with `home` as FDB_HOME and
/// none of the other config variables a developer's shell may hold.
pub fn configured<'c>(c: &'c mut Command, config: &Path, home: &Path) -> &'c mut Command {
    c.env("FDB5_CONFIG_FILE", config)
        .env("FDB_HOME", home)
        .env_remove("FDB_CONFIG")
        .env_remove("FDB5_CONFIG")
        .env_remove("FDB_CONFIG_FILE")
}

/// `fdb-list --porcelain --all` of the store `config` describes: one line per field, sorted.
pub fn fdb5_listing(config: &Path, home: &Path) -> Vec<String> {
    let mut lines: Vec<String> = run(configured(&mut Command::new("fdb-list"), config, home)
        .args(["--porcelain", "--all", "--minimum-keys="]))
    .lines()
    .filter(|l| l.starts_with('{'))
    .map(str::to_string)
    .collect();
    lines.sort();
    lines
}
