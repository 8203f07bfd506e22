//! What a plan set gets from whoever runs it: the store a `fdb5` sink with `config: {}` writes to
//! (this store), where `print` writes, and the environment plans read.

use std::io::Write;
use std::sync::{Arc, Mutex};

use super::node::{Node, NodeKind};
use crate::api::Fdb;

/// Reads an environment variable; shared between threads.
pub type SharedEnv = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Shared by the plans of a set.
#[derive(Clone)]
pub struct Context {
    /// The store `fdb5` sinks without a config write to; `None`: the store FDB5's environment
    /// names (`FDB5_CONFIG_FILE`...), opened on first use.
    pub fdb: Option<Arc<dyn Fdb>>,
    /// Without `fdb`: the config file to open (as `--config`), else FDB5's environment decides.
    pub fdb_config: Option<std::path::PathBuf>,
    /// Where `print` writes (standard output by default).
    pub out: Arc<Mutex<dyn Write + Send>>,
    /// Reads environment variables (`{ENV}` substitution, config look-up).
    pub env: SharedEnv,
    /// File sinks append to what is there, whatever `append:` says: a follower resuming from
    /// a checkpoint continues its files (cut back to the checkpoint).
    pub continue_files: bool,
}

impl Default for Context {
    fn default() -> Context {
        Context {
            fdb: None,
            fdb_config: None,
            out: Arc::new(Mutex::new(std::io::stdout())),
            env: Arc::new(|k: &str| std::env::var(k).ok()),
            continue_files: false,
        }
    }
}

impl Context {
    /// `<host>-<pid>`: what `per-server` file sinks put before the file name.
    pub fn server_prefix(&self) -> String {
        let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
            .map(|h| h.trim().to_string())
            .unwrap_or_else(|_| "host".into());
        format!("{host}-{}", std::process::id())
    }

    /// The store for an `fdb5` sink: its `config:` map, or this store when it is empty.
    pub fn fdb_for(&self, config: Option<&Node>) -> Result<Arc<dyn Fdb>, String> {
        let empty = match config.map(|c| &c.kind) {
            None | Some(NodeKind::Null) => true,
            Some(NodeKind::Map(m)) => m.iter().all(|(k, _)| k == "userConfig"),
            Some(_) => return Err("an fdb5 sink's config: must be a map".into()),
        };
        if empty {
            if let Some(f) = &self.fdb {
                return Ok(f.clone());
            }
            let loaded = crate::model::config::discover_from_process(self.fdb_config.as_deref())
                .map_err(|e| e.to_string())?;
            return crate::open(&loaded.config)
                .map(Arc::from)
                .map_err(|e| e.to_string());
        }
        let json = config.map(node_to_json).unwrap_or(serde_json::Value::Null);
        let text = serde_json::to_string(&json).map_err(|e| e.to_string())?;
        let parsed = crate::model::config::from_yaml_str(&text, "fdb5 sink config")
            .map_err(|e| e.to_string())?;
        crate::open(&parsed)
            .map(Arc::from)
            .map_err(|e| e.to_string())
    }
}

fn node_to_json(n: &Node) -> serde_json::Value {
    use serde_json::Value as J;
    match &n.kind {
        NodeKind::Null => J::Null,
        NodeKind::Bool(b) => J::Bool(*b),
        NodeKind::Int(i) => J::from(*i),
        NodeKind::Float(f) => J::from(*f),
        NodeKind::Str(s) => J::String(s.clone()),
        NodeKind::Seq(v) => J::Array(v.iter().map(node_to_json).collect()),
        NodeKind::Map(m) => J::Object(
            m.iter()
                .filter(|(k, _)| k != "userConfig")
                .map(|(k, v)| (k.clone(), node_to_json(v)))
                .collect(),
        ),
    }
}
