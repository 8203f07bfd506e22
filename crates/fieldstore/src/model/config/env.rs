//! Environment lookup, shared by config parsing (`${VAR}` in paths) and discovery (`FDB5_CONFIG`...).

/// Environment lookup, injectable so discovery is testable without touching the process.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment; an empty variable counts as unset, as in a shell `${X:-}` test.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}
