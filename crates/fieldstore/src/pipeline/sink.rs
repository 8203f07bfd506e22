//! `sink`: fields to files or a store. Sinks write payload bytes as they are (raw values or
//! GRIB); a flush makes what was written durable.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use super::config::{parse_bool, ActionConfig};
use super::context::Context;
use super::error::{PipelineError, Site};
use super::message::{Field, Message, Payload};
use super::node::Node;
use super::trigger::Trigger;
use crate::api::Fdb;

pub enum DataSink {
    File {
        path: PathBuf,
        file: Option<File>,
        append: bool,
        /// Written since the last flush (a flush then syncs; one per step otherwise).
        dirty: bool,
    },
    Fdb {
        name: String,
        fdb: Arc<dyn Fdb>,
    },
}

pub struct Sink {
    sinks: Vec<DataSink>,
    triggers: Vec<Trigger>,
}

impl Sink {
    pub fn from_config(cfg: &ActionConfig, ctx: &Context) -> Result<Sink, PipelineError> {
        let mut triggers = Vec::new();
        if let Some(t) = cfg.node.get("triggers") {
            let list = t
                .as_seq()
                .ok_or_else(|| cfg.error_at(t, "triggers: must be a list"))?;
            for n in list {
                triggers.push(Trigger::from_node(cfg, n)?);
            }
        }
        // MultIO also reads triggers from MULTIO_CONFIG_TRIGGERS (YAML with a triggers: list).
        if let Some(text) = (ctx.env)("MULTIO_CONFIG_TRIGGERS") {
            let root = super::node::parse(&text, "MULTIO_CONFIG_TRIGGERS")?;
            if let Some(list) = root.get("triggers").and_then(Node::as_seq) {
                for n in list {
                    triggers.push(Trigger::from_node(cfg, n)?);
                }
            }
        }
        let list = cfg
            .node
            .get("sinks")
            .and_then(Node::as_seq)
            .ok_or_else(|| cfg.error("sinks: (a list) is required"))?;
        let mut sinks = Vec::new();
        for s in list {
            if let Some(e) = s.get("enable") {
                match parse_bool(e) {
                    Some(false) => continue,
                    Some(true) => {}
                    None => return Err(cfg.error_at(e, "enable: is not a bool")),
                }
            }
            let t = s
                .get("type")
                .and_then(Node::scalar_text)
                .unwrap_or_default();
            let flag = |k: &str| -> Result<bool, PipelineError> {
                match s.get(k) {
                    None => Ok(false),
                    Some(n) => {
                        parse_bool(n).ok_or_else(|| cfg.error_at(n, format!("{k}: must be a bool")))
                    }
                }
            };
            match t.as_str() {
                "file" => {
                    let p = s
                        .get("path")
                        .and_then(Node::scalar_text)
                        .ok_or_else(|| cfg.error_at(s, "a file sink needs path:"))?;
                    // A relative path is relative to the working directory, as MultIO's file
                    // sink opens it (`{~}/...` names the plan's directory).
                    let mut path = PathBuf::from(&p);
                    if flag("per-server")? {
                        let base = path
                            .file_name()
                            .map(|b| b.to_string_lossy().into_owned())
                            .unwrap_or_default();
                        path.set_file_name(format!("{}-{}", ctx.server_prefix(), base));
                    }
                    sinks.push(DataSink::File {
                        path,
                        file: None,
                        // A follower resuming after a checkpoint continues its files.
                        append: flag("append")? || ctx.continue_files,
                        dirty: false,
                    });
                }
                "fdb5" | "fdb" => {
                    let config = s.get("config");
                    let fdb = ctx.fdb_for(config).map_err(|e| cfg.error_at(s, e))?;
                    sinks.push(DataSink::Fdb {
                        name: fdb.name(),
                        fdb,
                    });
                }
                "multio" => {
                    return Err(PipelineError::Refused {
                        origin: cfg.origin.clone(),
                        line: Some(s.line),
                        name: "sink: multio".into(),
                        reason: "nested MultIO sink lists: write the sinks into this list instead"
                            .into(),
                    })
                }
                other => {
                    return Err(cfg.error_at(
                        s,
                        format!("unknown sink type '{other}' (known: file, fdb5)"),
                    ))
                }
            }
        }
        Ok(Sink { sinks, triggers })
    }

    /// The files this sink writes, and whether it appends to them.
    pub fn files(&self) -> impl Iterator<Item = (&PathBuf, bool)> {
        self.sinks.iter().filter_map(|s| match s {
            DataSink::File { path, append, .. } => Some((path, *append)),
            DataSink::Fdb { .. } => None,
        })
    }

    pub fn handle(&mut self, site: &Site, msg: Message) -> Result<(), PipelineError> {
        match msg {
            Message::Field(f) => {
                for s in &mut self.sinks {
                    s.write(site, &f)?;
                }
                for t in &mut self.triggers {
                    t.field(&f).map_err(|e| site.sink_error("trigger", e))?;
                }
                Ok(())
            }
            Message::Flush(_) => {
                for s in &mut self.sinks {
                    s.flush(site)?;
                }
                Ok(())
            }
            Message::Notification(md) => {
                for t in &mut self.triggers {
                    t.notification(&md)
                        .map_err(|e| site.sink_error("trigger", e))?;
                }
                Ok(())
            }
        }
    }
}

fn raw_bytes(f: &Field) -> Vec<u8> {
    match &f.payload {
        Payload::Encoded(b) => b.clone(),
        Payload::Values(v) => {
            let single =
                matches!(f.metadata.text("misc-precision"), Ok(Some(ref p)) if p == "single");
            if single {
                v.iter().flat_map(|x| (*x as f32).to_ne_bytes()).collect()
            } else {
                v.iter().flat_map(|x| x.to_ne_bytes()).collect()
            }
        }
    }
}

impl DataSink {
    fn name(&self) -> String {
        match self {
            DataSink::File { path, .. } => format!("file {}", path.display()),
            DataSink::Fdb { name, .. } => format!("fdb5 {name}"),
        }
    }

    fn write(&mut self, site: &Site, f: &Field) -> Result<(), PipelineError> {
        let name = self.name();
        match self {
            DataSink::File {
                path,
                file,
                append,
                dirty,
            } => {
                if file.is_none() {
                    let opened = if *append {
                        OpenOptions::new().create(true).append(true).open(&*path)
                    } else {
                        File::create(&*path)
                    };
                    *file = Some(
                        opened.map_err(|e| site.sink_error(&name, format!("cannot open: {e}")))?,
                    );
                }
                if let Some(out) = file {
                    out.write_all(&raw_bytes(f))
                        .map_err(|e| site.sink_error(&name, format!("write: {e}")))?;
                    *dirty = true;
                }
                Ok(())
            }
            DataSink::Fdb { fdb, .. } => {
                let Payload::Encoded(bytes) = &f.payload else {
                    return Err(site.field_error(
                        &f.metadata.describe(),
                        "the fdb5 sink needs GRIB: put an encode action (format: grib) before it",
                    ));
                };
                fdb.archive(None, bytes)
                    .map_err(|e| site.field_error(&f.metadata.describe(), format!("archive: {e}")))
            }
        }
    }

    fn flush(&mut self, site: &Site) -> Result<(), PipelineError> {
        let name = self.name();
        match self {
            DataSink::File { file, dirty, .. } => {
                if let (Some(f), true) = (file, *dirty) {
                    f.sync_data()
                        .map_err(|e| site.sink_error(&name, format!("sync: {e}")))?;
                    *dirty = false;
                }
                Ok(())
            }
            DataSink::Fdb { fdb, .. } => fdb
                .flush()
                .map_err(|e| site.sink_error(&name, format!("flush: {e}"))),
        }
    }
}
