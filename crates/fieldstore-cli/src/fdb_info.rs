//! `fdb-info` in FDB5's form: scripts read one bare value per flag (`fdb-info --schema` is a
//! path), where `fieldstore info` explains itself over many lines.

use anyhow::Result;
use fieldstore::model::config::ConfigSource;

use crate::context::Session;
use crate::fdb_names::InfoItem;

/// Prints the `items` asked for, one value a line; `all`: every one, labelled, as FDB5's
/// `fdb-info --all` does. Nothing asked, nothing printed (FDB5's own test checks that).
pub fn run(items: &[InfoItem], all_items: bool, session: &Session) -> Result<()> {
    let all = [
        InfoItem::Version,
        InfoItem::Home,
        InfoItem::Schema,
        InfoItem::ConfigFile,
    ];
    let labelled = all_items;
    for item in if labelled { &all[..] } else { items } {
        let (label, value) = match item {
            // The FDB5 level fieldstore stands in for, as the C library's fdb_version().
            InfoItem::Version => (
                "Version",
                fieldstore::FDB5_API_LEVEL.to_string_lossy().into_owned(),
            ),
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
    if labelled {
        // FDB5 built without Lustre support says so; fieldstore has none either.
        outln!("Lustre-API: disabled")?;
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
