//! `fieldstore schema check|split|show`.

use std::path::PathBuf;

use anyhow::{Context as _, Result};
use clap::Subcommand;
use fieldstore::model::schema::Schema;
use fieldstore::model::Key;

use crate::context::Session;

#[derive(Subcommand, Debug)]
pub enum SchemaCmd {
    /// Parse a schema file; exit 0 when it is valid.
    Check { file: PathBuf },
    /// Split a field key into its database, index and datum keys (FDB5 porcelain form).
    Split {
        /// Schema file (default: the schema of the config in use).
        #[arg(long)]
        schema: Option<PathBuf>,
        /// Also require canonical values, as for an explicit archive key.
        #[arg(long)]
        strict: bool,
        /// The field key: `class=od,expver=0001,...` or `{class=od,...}`.
        key: String,
    },
    /// Print the schema in use.
    Show,
}

pub fn run(cmd: SchemaCmd, session: &Session) -> Result<()> {
    match cmd {
        SchemaCmd::Check { file } => {
            let s = Schema::from_file(&file)?;
            outln!("{}: ok ({} rule paths)", file.display(), s.paths().len())?;
        }
        SchemaCmd::Split {
            schema,
            strict,
            key,
        } => {
            let schema = match schema {
                Some(p) => Schema::from_file(&p)?,
                None => session.schema()?,
            };
            let key = Key::parse(&key)?;
            let split = schema
                .split(&key, &session.type_context(), strict)
                .with_context(|| format!("cannot split {key}"))?;
            outln!("{}", split.porcelain())?;
        }
        SchemaCmd::Show => out!("{}", session.schema()?.text())?,
    }
    Ok(())
}
