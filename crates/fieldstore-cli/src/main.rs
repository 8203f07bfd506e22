//! `fieldstore`: the command-line tool (the library's [`fieldstore_cli::run`]).

use std::process::ExitCode;

fn main() -> ExitCode {
    ExitCode::from(fieldstore_cli::run(
        std::env::args_os().collect(),
        Vec::new(),
    ))
}
