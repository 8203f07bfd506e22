//! `fieldstore info`: which config is in use, found where and why, and what it says.

use anyhow::Result;
use fieldstore::model::config::{describe_limits, human_bytes, FdbConfig, LocalConfig};
use fieldstore::storage::toc::placement::fs_space;
use fieldstore::storage::TocCatalogue;

use crate::context::Session;

pub fn run(session: &Session) -> Result<()> {
    outln!("fieldstore {}", env!("CARGO_PKG_VERSION"))?;
    eccodes()?;
    // Keys of the messages the native reader claims come from its tables, not from the ecCodes
    // loaded: which definitions those tables were generated from.
    outln!(
        "MARS key tables (native reader): {}",
        fieldstore::grib::native::mars::table_version()
    )?;
    let loaded = session.config()?;
    outln!("config: {}", loaded.source)?;
    outln!("how it was found:")?;
    for line in &loaded.explanation {
        outln!("  {line}")?;
    }
    outln!("frontends:")?;
    for line in loaded.config.describe().lines() {
        outln!("  {line}")?;
    }
    match session.schema_path()? {
        Some(p) => outln!("schema: {}", p.display())?,
        None => outln!("schema: built-in default")?,
    }
    let schema = session.schema()?;
    outln!("schema rules: {} paths", schema.paths().len())?;
    tiers(&loaded.config)
}

/// Which ecCodes the process would use and why. `info` loads it (that is the question asked);
/// its absence is reported, not an error: reading and listing work without it.
fn eccodes() -> Result<()> {
    match fieldstore::grib::eccodes() {
        Ok(i) => {
            outln!("ecCodes {} ({})", i.version, i.origin)?;
            outln!("  library: {}", i.path)?;
            if let Some(d) = &i.definitions {
                outln!("  definitions: {d}")?;
            }
            if let Some(s) = &i.samples {
                outln!("  samples: {s}")?;
            }
        }
        Err(e) => outln!("ecCodes: not loaded: {e}")?,
    }
    if let Some(p) = std::env::var_os("ECCODES_DEFINITION_PATH") {
        // ecCodes prepends it to its own (eccodeslib's built-in) definitions: another version's
        // tree there makes decoding fail or change keys.
        outln!(
            "  ECCODES_DEFINITION_PATH={} (prepended to the library's own)",
            p.to_string_lossy()
        )?;
    }
    Ok(())
}

/// Each space and root of every local toc config: handler, limits, use and free space, so an
/// operator sees which tier new databases go to.
fn tiers(config: &FdbConfig) -> Result<()> {
    let mut locals = Vec::new();
    collect_locals(config, &mut locals);
    let toc: Vec<&LocalConfig> = locals
        .into_iter()
        .filter(|l| matches!(l.engine.as_str(), "toc" | ""))
        .collect();
    if toc.is_empty() {
        return Ok(());
    }
    outln!("tiers:")?;
    for l in toc {
        let catalogue = TocCatalogue::new(l.spaces.clone())?;
        for (space, usage) in catalogue.root_usage() {
            outln!(
                "  space {} (regex {}, handler {})",
                space.name.as_deref().unwrap_or("-"),
                space.regex,
                space.handler
            )?;
            for (r, u) in space.roots.iter().zip(usage) {
                let free = match fs_space(&r.path) {
                    Some(f) => format!(
                        "{} free of {} ({}% used)",
                        human_bytes(f.free),
                        human_bytes(f.total),
                        f.used_percent()
                    ),
                    None => "free space unknown".into(),
                };
                let role = if r.archive { "" } else { " [no archive]" };
                outln!(
                    "    root {}{role}{}: {} databases, {} used; file system {free}",
                    r.path.display(),
                    describe_limits(r),
                    u.databases,
                    human_bytes(u.used),
                )?;
            }
        }
        records(l)?;
    }
    Ok(())
}

/// What the store's keys follow, as its records say (docs/eccodes.md, "Versions"): in the first
/// root, where writers record and check them.
fn records(l: &LocalConfig) -> Result<()> {
    use fieldstore::storage::keys_release::KeysReader;
    let Some(root) = l.spaces.iter().flat_map(|s| &s.roots).next() else {
        return Ok(());
    };
    let mut found = Vec::new();
    for reader in [KeysReader::Eccodes, KeysReader::Native] {
        let name = reader.record();
        if let Ok(text) = std::fs::read_to_string(root.path.join(name)) {
            found.push(format!("{} {} ({name})", reader.name(), text.trim()));
        }
    }
    if found.is_empty() {
        outln!(
            "  keys recorded in {}: none yet (made at the first flush)",
            root.path.display()
        )?;
    } else {
        outln!(
            "  keys recorded in {}: {}",
            root.path.display(),
            found.join(", ")
        )?;
    }
    Ok(())
}

fn collect_locals<'a>(c: &'a FdbConfig, out: &mut Vec<&'a LocalConfig>) {
    match c {
        FdbConfig::Local(l) => out.push(l),
        FdbConfig::Select { lanes, .. } => {
            lanes.iter().for_each(|l| collect_locals(&l.config, out))
        }
        FdbConfig::Dist { lanes, .. } => lanes.iter().for_each(|l| collect_locals(&l.config, out)),
        FdbConfig::Mirror { children, .. }
        | FdbConfig::Filter { children, .. }
        | FdbConfig::Diagnostics { children, .. } => {
            children.iter().for_each(|c| collect_locals(c, out))
        }
        FdbConfig::Remote { .. } => {}
    }
}
