//! What every subcommand needs: the config (found as FDB5 finds it), the schema, a type context.

use std::cell::OnceCell;
use std::path::PathBuf;

use anyhow::{Context as _, Result};
use fieldstore::api::Fdb;
use fieldstore::grib::params;
use fieldstore::model::config::{self, LoadedConfig};
use fieldstore::model::schema::Schema;
use fieldstore::model::types::Context;

pub struct Session {
    explicit: Option<PathBuf>,
    loaded: OnceCell<LoadedConfig>,
    fdb: OnceCell<Box<dyn Fdb>>,
    /// Print as FDB5 5.10's tools do (the `fdb-*` names), not fieldstore's own forms.
    pub fdb5_output: bool,
}

static RESOLVER: fn(&str) -> Option<String> = params::resolver;

impl Session {
    pub fn new(explicit: Option<PathBuf>) -> Self {
        Session {
            explicit,
            loaded: OnceCell::new(),
            fdb: OnceCell::new(),
            fdb5_output: false,
        }
    }

    /// The `--config` file, if one was named.
    pub fn explicit_config(&self) -> Option<PathBuf> {
        self.explicit.clone()
    }

    pub fn config(&self) -> Result<&LoadedConfig> {
        if let Some(c) = self.loaded.get() {
            return Ok(c);
        }
        let c = config::discover(self.explicit.as_deref(), &config::process_env)?;
        Ok(self.loaded.get_or_init(|| c))
    }

    /// The store the config describes.
    pub fn fdb(&self) -> Result<&dyn Fdb> {
        if let Some(f) = self.fdb.get() {
            return Ok(f.as_ref());
        }
        let loaded = self.config()?;
        let fdb = fieldstore::open(&loaded.config)
            .with_context(|| format!("building the store from {}", loaded.source))?;
        Ok(self.fdb.get_or_init(|| fdb).as_ref())
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
        Ok(fieldstore::open::schema_of(&self.config()?.config))
    }

    /// Canonicalisation context: today (UTC) and parameter names through ecCodes.
    pub fn type_context(&self) -> Context<'static> {
        Context {
            params: Some(&RESOLVER),
            ..Context::default()
        }
    }
}
