//! Standard output for commands. `println!` panics when the reader has gone away
//! (`fieldstore stats | head`); these return the error instead, which `main` ends quietly on,
//! as every Unix tool does. `clippy::print_stdout` is denied in this crate so none creeps back.

/// `writeln!` to standard output, returning the `io::Result`.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        writeln!(std::io::stdout().lock(), $($arg)*)
    }};
}

/// `write!` to standard output, returning the `io::Result`.
macro_rules! out {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        write!(std::io::stdout().lock(), $($arg)*)
    }};
}
