//! What the CLI integration tests share: the `fieldstore` binary, run with nothing inherited from
//! the environment the tests run in that would change which store or server it talks to.

use std::process::Command;

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
