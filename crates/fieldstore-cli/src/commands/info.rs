//! `fieldstore info`: which config is in use, found where and why, and what it says.

use anyhow::Result;

use crate::context::Session;

pub fn run(session: &Session) -> Result<()> {
    println!("fieldstore {}", env!("CARGO_PKG_VERSION"));
    println!("ecCodes {}", fieldstore::grib::eccodes_version());
    let loaded = session.config()?;
    println!("config: {}", loaded.source);
    println!("how it was found:");
    for line in &loaded.explanation {
        println!("  {line}");
    }
    println!("frontends:");
    for line in loaded.config.describe().lines() {
        println!("  {line}");
    }
    match session.schema_path()? {
        Some(p) => println!("schema: {}", p.display()),
        None => println!("schema: built-in default"),
    }
    let schema = session.schema()?;
    println!("schema rules: {} paths", schema.paths().len());
    Ok(())
}
