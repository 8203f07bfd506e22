//! `fieldstore info`: which config is in use, found where and why, and what it says.

use anyhow::Result;

use crate::context::Session;

pub fn run(session: &Session) -> Result<()> {
    outln!("fieldstore {}", env!("CARGO_PKG_VERSION"))?;
    outln!("ecCodes {}", fieldstore::grib::eccodes_version())?;
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
    Ok(())
}
