//! FDB5's per-user settings (`fdb_new_handle_from_yaml`'s `user_config`), checked rather than
//! ignored: FDB5 reads three, all tuning its own TOC engine or server client, for which
//! fieldstore has no switch (its indexes are loaded on demand, each writer has its own index
//! files, and remote reads are streamed with flow control). They are accepted with their FDB5
//! types; anything else is an error naming them, so that a typo does not pass silently.

use serde_json::Value;

use crate::errors::{CError, Result};

/// FDB5's user settings and the type each takes.
const KNOWN: &[(&str, Kind)] = &[
    ("useSubToc", Kind::Bool),
    ("preloadTocBTree", Kind::Bool),
    ("limits.read", Kind::Unsigned),
];

#[derive(Clone, Copy)]
enum Kind {
    Bool,
    Unsigned,
}

fn names() -> String {
    KNOWN.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
}

fn invalid(msg: String) -> CError {
    CError::Invalid(format!("user_config: {msg}"))
}

/// Checks `yaml`: empty, a null document, or a mapping of FDB5's user settings.
pub fn check(yaml: &str) -> Result<()> {
    if yaml.trim().is_empty() {
        return Ok(());
    }
    let value: Value =
        serde_saphyr::from_str(yaml).map_err(|e| invalid(format!("invalid YAML: {e}")))?;
    match value {
        Value::Null => Ok(()),
        Value::Object(map) => walk(&map, ""),
        other => Err(invalid(format!(
            "expected a mapping of settings ({}), found {other}",
            names()
        ))),
    }
}

fn walk(map: &serde_json::Map<String, Value>, prefix: &str) -> Result<()> {
    for (k, v) in map {
        let path = format!("{prefix}{k}");
        if let Value::Object(inner) = v {
            if KNOWN
                .iter()
                .any(|(n, _)| n.starts_with(&format!("{path}.")))
            {
                walk(inner, &format!("{path}."))?;
                continue;
            }
        }
        let Some((_, kind)) = KNOWN.iter().find(|(n, _)| *n == path) else {
            return Err(invalid(format!(
                "unknown setting '{path}' (FDB5's user settings are {})",
                names()
            )));
        };
        let ok = match kind {
            Kind::Bool => v.is_boolean(),
            Kind::Unsigned => v.is_u64(),
        };
        if !ok {
            let want = match kind {
                Kind::Bool => "true or false",
                Kind::Unsigned => "a byte count (unsigned integer)",
            };
            return Err(invalid(format!("'{path}' must be {want}, not {v}")));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fdb5_settings_are_accepted_and_others_refused() {
        check("").unwrap();
        check("~").unwrap();
        check("useSubToc: true\npreloadTocBTree: false\nlimits:\n  read: 1048576\n").unwrap();
        let e = check("useSubtoc: true").unwrap_err().to_string();
        assert!(
            e.contains("unknown setting 'useSubtoc'") && e.contains("useSubToc"),
            "{e}"
        );
        let e = check("useSubToc: 3").unwrap_err().to_string();
        assert!(e.contains("true or false"), "{e}");
        let e = check("limits:\n  write: 1").unwrap_err().to_string();
        assert!(e.contains("'limits.write'"), "{e}");
        let e = check("[1, 2]").unwrap_err().to_string();
        assert!(e.contains("expected a mapping"), "{e}");
    }
}
