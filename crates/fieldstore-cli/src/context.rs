//! What every subcommand needs: the config (found as FDB5 finds it), the schema, a type context.

use std::cell::OnceCell;
use std::path::PathBuf;

use anyhow::{Context as _, Result};
use fieldstore::api::LocalFdb;
use fieldstore::grib::params;
use fieldstore::model::config::{self, FdbConfig, LoadedConfig};
use fieldstore::model::schema::Schema;
use fieldstore::model::types::Context;

pub struct Session {
    explicit: Option<PathBuf>,
    loaded: OnceCell<LoadedConfig>,
    fdb: OnceCell<LocalFdb>,
}

static RESOLVER: fn(&str) -> Option<String> = params::resolver;

impl Session {
    pub fn new(explicit: Option<PathBuf>) -> Self {
        Session {
            explicit,
            loaded: OnceCell::new(),
            fdb: OnceCell::new(),
        }
    }

    pub fn config(&self) -> Result<&LoadedConfig> {
        if let Some(c) = self.loaded.get() {
            return Ok(c);
        }
        let c = config::discover(self.explicit.as_deref(), &config::process_env)?;
        Ok(self.loaded.get_or_init(|| c))
    }

    /// The store the config describes.
    pub fn fdb(&self) -> Result<&dyn fieldstore::api::Fdb> {
        Ok(self.local_fdb()?)
    }

    pub fn local_fdb(&self) -> Result<&LocalFdb> {
        if let Some(f) = self.fdb.get() {
            return Ok(f);
        }
        let loaded = self.config()?;
        let fdb = match &loaded.config {
            FdbConfig::Local(l) => LocalFdb::new(l.clone())
                .with_context(|| format!("building the store from {}", loaded.source))?,
            other => anyhow::bail!(
                "config {}: frontend type '{}' is not supported yet by this version (only 'local')",
                loaded.source,
                other.type_name()
            ),
        };
        Ok(self.fdb.get_or_init(|| fdb))
    }

    /// The schema of the config in use: its `schema` file, or the built-in default.
    pub fn schema(&self) -> Result<Schema> {
        match self.schema_path()? {
            Some(p) => Schema::from_file(&p).with_context(|| {
                format!(
                    "loading the schema named by the config ({})",
                    self.config()
                        .map(|c| c.source.to_string())
                        .unwrap_or_default()
                )
            }),
            None => Ok(Schema::default_schema()),
        }
    }

    pub fn schema_path(&self) -> Result<Option<PathBuf>> {
        Ok(match &self.config()?.config {
            FdbConfig::Local(l) => l.schema.clone(),
            FdbConfig::Select { schema, .. } => schema.clone(),
            _ => None,
        })
    }

    /// Canonicalisation context: today (UTC) and parameter names through ecCodes.
    pub fn type_context(&self) -> Context<'static> {
        Context {
            params: Some(&RESOLVER),
            ..Context::default()
        }
    }
}
