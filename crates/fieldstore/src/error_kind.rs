//! The kind of a failure, shared by every layer's error, so exit codes, wire errors and the
//! errors of bindings (Python exception classes, C error codes) map from one small, stable set
//! instead of from each layer's variants.

use std::error::Error as StdError;
use std::fmt;
use std::str::FromStr;

/// The error's text followed by each cause not already part of it (`transparent` wrappers
/// repeat their cause's text): bindings hand callers one string, which must say as much as the
/// CLI's chain of causes does.
pub fn full_message(e: &dyn StdError) -> String {
    let mut msg = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !msg.contains(&text) {
            msg.push_str(": ");
            msg.push_str(&text);
        }
        cause = c.source();
    }
    msg
}

/// What went wrong, as a caller decides what to do about it. New kinds may be added, so match
/// with a wildcard arm; the names (`as_str`) never change meaning.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ErrorKind {
    /// Nothing matches the request (no database, no field).
    NotFound,
    /// The request or input is malformed or not allowed (bad keyword, bad value, bad GRIB).
    BadRequest,
    /// A schema does not parse, or a key does not fit it.
    Schema,
    /// The configuration is wrong or incomplete.
    Config,
    /// The operating system or the store's owner refuses the action.
    Permission,
    /// The action is locked on the database (`fieldstore control`).
    Locked,
    /// Stored data fails its checks: needs repair, not retry.
    Corrupt,
    /// An I/O failure of the local system: may succeed on retry.
    Io,
    /// A failure talking to a fieldstore server.
    Remote,
    /// The store has no room left.
    Full,
    /// The frontend or backend does not offer this operation.
    Unsupported,
    /// A defect of fieldstore itself.
    Internal,
    /// A wait ended before what it waited for arrived (`retrieve --wait`).
    Timeout,
    /// A subscriber resumed from a position whose history is gone (purged, or a server's
    /// bounded history moved on): resubscribe and list to catch up.
    FellBehind,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 14] = [
        ErrorKind::NotFound,
        ErrorKind::BadRequest,
        ErrorKind::Schema,
        ErrorKind::Config,
        ErrorKind::Permission,
        ErrorKind::Locked,
        ErrorKind::Corrupt,
        ErrorKind::Io,
        ErrorKind::Remote,
        ErrorKind::Full,
        ErrorKind::Unsupported,
        ErrorKind::Internal,
        ErrorKind::Timeout,
        ErrorKind::FellBehind,
    ];

    /// The stable name carried on the wire and shown to programs.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::NotFound => "not-found",
            ErrorKind::BadRequest => "bad-request",
            ErrorKind::Schema => "schema",
            ErrorKind::Config => "config",
            ErrorKind::Permission => "permission",
            ErrorKind::Locked => "locked",
            ErrorKind::Corrupt => "corrupt",
            ErrorKind::Io => "io",
            ErrorKind::Remote => "remote",
            ErrorKind::Full => "full",
            ErrorKind::Unsupported => "unsupported",
            ErrorKind::Internal => "internal",
            ErrorKind::Timeout => "timeout",
            ErrorKind::FellBehind => "fell-behind",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name this build does not know (a newer peer's kind).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown error kind '{0}'")]
pub struct UnknownErrorKind(pub String);

impl FromStr for ErrorKind {
    type Err = UnknownErrorKind;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ErrorKind::ALL
            .into_iter()
            .find(|k| k.as_str() == s)
            .ok_or_else(|| UnknownErrorKind(s.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_distinct() {
        let mut seen = std::collections::HashSet::new();
        for k in ErrorKind::ALL {
            assert!(seen.insert(k.as_str()), "{k} twice");
            assert_eq!(k.as_str().parse::<ErrorKind>(), Ok(k));
        }
        assert!("nonsense".parse::<ErrorKind>().is_err());
        assert_eq!(ErrorKind::NotFound.to_string(), "not-found");
    }
}
