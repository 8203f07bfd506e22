//! `fdb-info` in FDB5's form: scripts read one bare value per flag (`fdb-info --schema` is a
//! path), where `fieldstore info` explains itself over many lines.

use anyhow::Result;
use fieldstore::model::config::ConfigSource;

use crate::context::Session;
use crate::fdb_names::InfoItem;

/// Prints the `items` asked for, one value a line; none asked: all of them, labelled, as
/// FDB5's `fdb-info --all` does.
pub fn run(items: &[InfoItem], session: &Session) -> Result<()> {
    let all = [
        InfoItem::Version,
        InfoItem::Home,
        InfoItem::Schema,
        InfoItem::ConfigFile,
    ];
    let labelled = items.is_empty();
    for item in if labelled { &all[..] } else { items } {
        let (label, value) = match item {
            // fieldstore's own version: the FDB5 API level belongs to the C library.
            InfoItem::Version => ("Version", env!("CARGO_PKG_VERSION").to_string()),
            InfoItem::Home => ("Home", home()),
            InfoItem::Schema => (
                "Schema",
                // Resolved as FDB5 prints it (`a/../b` is `b`).
                session.schema_path()?.map_or_else(
                    || "(built-in default)".into(),
                    |p| std::fs::canonicalize(&p).unwrap_or(p).display().to_string(),
                ),
            ),
            InfoItem::ConfigFile => ("Config", config_file(&session.config()?.source)),
        };
        if labelled {
            outln!("{label}: {value}")?;
        } else {
            outln!("{value}")?;
        }
    }
    Ok(())
}

/// FDB_HOME (or FDB5_HOME) with FDB5's trailing slash; empty when neither is set.
fn home() -> String {
    ["FDB_HOME", "FDB5_HOME"]
        .iter()
        .find_map(|v| std::env::var(v).ok().filter(|h| !h.is_empty()))
        .map(|h| if h.ends_with('/') { h } else { format!("{h}/") })
        .unwrap_or_default()
}

/// The config file in use; empty when the config is not a file (inline YAML, the default).
fn config_file(source: &ConfigSource) -> String {
    match source {
        ConfigSource::Explicit(p) | ConfigSource::EnvFile(_, p) | ConfigSource::Home(p) => {
            p.display().to_string()
        }
        ConfigSource::EnvInline(_) | ConfigSource::Default => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    #[test]
    fn config_file_is_a_path_or_nothing() {
        let p = PathBuf::from("/etc/fdb/config.yaml");
        assert_eq!(
            config_file(&ConfigSource::EnvFile("FDB5_CONFIG_FILE".into(), p.clone())),
            "/etc/fdb/config.yaml"
        );
        assert_eq!(config_file(&ConfigSource::Home(p)), "/etc/fdb/config.yaml");
        assert_eq!(config_file(&ConfigSource::Default), "");
        assert_eq!(
            config_file(&ConfigSource::EnvInline("FDB_CONFIG".into())),
            ""
        );
    }
}
