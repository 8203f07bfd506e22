//! What the CLI integration tests share: the `fieldstore` binary, run with nothing inherited from
//! the environment the tests run in that would change which store or server it talks to.

use std::process::{Command, Output};

/// Besides the config discovery variables, what a developer's or CI's shell may hold that would
/// change which server a command talks to or what it logs.
const INHERITED: [&str; 2] = ["FIELDSTORE_TOKEN", "FIELDSTORE_LOG"];

/// A `fieldstore` command with a clean environment; tests set what they need after this.
pub fn fieldstore() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fieldstore"));
    for v in fieldstore::model::config::ENV_STEPS
        .iter()
        .chain(&INHERITED)
    {
        c.env_remove(v);
    }
    c
}

/// The standard output of a command that had to succeed; else the test fails with its stderr.
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn succeeded(what: &str, o: &Output) -> String {
    assert!(
        o.status.success(),
        "{what}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// The error output of a command that had to fail.
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn failed(what: &str, o: &Output) -> String {
    assert!(!o.status.success(), "{what} should fail");
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The store's records of what its MARS keys follow (`storage::keys_release`), which a writer
/// leaves beside the databases in a root: not a database, and never a leftover.
#[allow(dead_code)] // not every test binary that includes this module uses it
pub fn is_keys_record(name: &str) -> bool {
    name == fieldstore::storage::keys_release::RECORD
        || name == fieldstore::storage::keys_release::TABLES_RECORD
}
