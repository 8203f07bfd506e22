//! What the CLI integration tests share: the `fieldstore` binary, run with nothing inherited from
//! the environment the tests run in that would change which store or server it talks to.

use std::process::Command;

/// Variables a developer's or CI's shell may hold that would redirect a command.
const INHERITED: [&str; 8] = [
    "FDB_CONFIG",
    "FDB5_CONFIG",
    "FDB_CONFIG_FILE",
    "FDB5_CONFIG_FILE",
    "FDB_HOME",
    "FDB5_HOME",
    "FIELDSTORE_TOKEN",
    "FIELDSTORE_LOG",
];

/// A `fieldstore` command with a clean environment; tests set what they need after this.
pub fn fieldstore() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_fieldstore"));
    for v in INHERITED {
        c.env_remove(v);
    }
    c
}
