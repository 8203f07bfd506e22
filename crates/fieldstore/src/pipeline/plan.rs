//! The engine: a set of plans built from a config, each an ordered chain of actions. Every
//! message goes to every plan in order (as in MultIO); an action passes on zero or more
//! messages. A failure fails that message in that plan only and is returned, never raised.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use super::config::{self, ActionConfig, PlanSetConfig, Side};
use super::context::Context;
use super::encode::Encode;
use super::error::{PipelineError, Site};
use super::message::Message;
use super::metadata::Metadata;
use super::metadata_mapping::MetadataMapping;
use super::scale::Scale;
use super::select::Matcher;
use super::sink::Sink;
use super::statistics::legacy::{Legacy, LegacyOptions};
use super::statistics::mtg2::{Mtg2, Mtg2Options};

/// Action types fieldstore runs.
pub const KNOWN_ACTIONS: &[&str] = &[
    "select",
    "statistics",
    "statistics-mtg2",
    "average-rate",
    "metadata-mapping",
    "scale",
    "encode",
    "sink",
    "print",
    "null",
    "single-field-sink",
];

/// MultIO action types refused, with the reason.
const REFUSED: &[(&str, &str)] = &[
    ("aggregate", "it assembles partial fields from MPI domain maps; send whole fields instead"),
    ("mask", "it needs masks assembled from MPI domain maps; set missingValue/bitmapPresent on the fields instead"),
    ("transport", "there are no MultIO I/O servers: plans run where the fields are"),
    ("interpolate", "regridding needs MIR, which fieldstore does not link"),
    ("interpolate-mtg2", "regridding needs MIR, which fieldstore does not link"),
    ("renumber-healpix", "it needs atlas' HEALPix cache"),
    ("encode-mtg2", "it needs metkit's mars2grib encoder; use encode with a template"),
    ("debug-sink", "MultIO's in-memory test queue; use print"),
];

enum Action {
    Select(Matcher),
    Statistics(Legacy),
    Mtg2(Mtg2),
    AverageRate,
    MetadataMapping(MetadataMapping),
    Scale(Scale),
    Encode(Encode),
    Print {
        prefix: String,
        only_fields: bool,
    },
    Sink(Sink),
    /// A file per field, `<root_path><level>::<param>::<step>`.
    SingleFieldSink(String),
    Null,
}

struct Step {
    site: Site,
    action: Action,
}

/// One plan.
pub struct Plan {
    name: String,
    steps: Vec<Step>,
}

/// The plans of a config, ready to take messages.
pub struct PlanSet {
    origin: String,
    plans: Vec<Plan>,
    ctx: Context,
}

/// The open windows of every statistics action, to save with a stream position and restore
/// into a plan set built from the same config.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PipelineState {
    /// `<plan>/<action index>` → that action's windows.
    pub actions: BTreeMap<String, serde_json::Value>,
}

impl PlanSet {
    /// Builds the plans of a loaded config.
    pub fn new(config: &PlanSetConfig, ctx: Context) -> Result<PlanSet, PipelineError> {
        let mut plans = Vec::new();
        for p in &config.plans {
            let mut steps = Vec::new();
            for (i, a) in p.actions.iter().enumerate() {
                let action = build(a, &ctx)?;
                let terminal = matches!(
                    action,
                    Action::Sink(_) | Action::SingleFieldSink(_) | Action::Null
                );
                steps.push(Step {
                    site: Site {
                        plan: p.name.clone(),
                        action: format!("{} #{}", a.type_name, i + 1),
                    },
                    action,
                });
                if terminal && i + 1 < p.actions.len() {
                    let next = &p.actions[i + 1];
                    return Err(PipelineError::Config {
                        origin: next.origin.clone(),
                        line: next.line,
                        message: format!(
                            "plan '{}': nothing runs after '{}' (it ends the plan)",
                            p.name, a.type_name
                        ),
                    });
                }
            }
            plans.push(Plan {
                name: p.name.clone(),
                steps,
            });
        }
        Ok(PlanSet {
            origin: config.origin.clone(),
            plans,
            ctx,
        })
    }

    /// Reads a plan file (the client side: `client:` or bare `plans:`).
    pub fn from_file(path: &Path, ctx: Context) -> Result<PlanSet, PipelineError> {
        let env = ctx.env.clone();
        let cfg = config::load_file(path, Side::Client, &*env)?;
        PlanSet::new(&cfg, ctx)
    }

    /// The config MultIO's environment names (`MULTIO_SERVER_CONFIG_FILE`, `MULTIO_PLANS`...).
    pub fn from_env(side: Side, ctx: Context) -> Result<PlanSet, PipelineError> {
        let env = ctx.env.clone();
        let cfg = config::from_env(side, &*env)?;
        PlanSet::new(&cfg, ctx)
    }

    pub fn origin(&self) -> &str {
        &self.origin
    }

    pub fn plan_names(&self) -> Vec<&str> {
        self.plans.iter().map(|p| p.name.as_str()).collect()
    }

    /// Runs one message through every plan. Returns the failures (one per plan and message at
    /// most); the plans go on.
    pub fn process(&mut self, msg: Message) -> Vec<PipelineError> {
        let mut failures = Vec::new();
        let last = self.plans.len().saturating_sub(1);
        let mut msg = Some(msg);
        for (i, plan) in self.plans.iter_mut().enumerate() {
            // The last plan takes the message itself: a field's values are copied only for the
            // plans before it.
            let m = if i == last { msg.take() } else { msg.clone() };
            let Some(m) = m else { break };
            let m = match m {
                Message::Flush(mut md) => {
                    md.set("clientPlanName", plan.name.as_str());
                    Message::Flush(md)
                }
                other => other,
            };
            if let Err(e) = plan.run(0, m, &self.ctx) {
                failures.push(e);
            }
        }
        failures
    }

    /// Whether any plan's selects would take a field with this metadata
    /// (`multio_field_accepted`): a plan without a select takes everything.
    pub fn field_accepted(&self, md: &Metadata) -> bool {
        self.plans.iter().any(|p| {
            p.steps.iter().all(|s| match &s.action {
                Action::Select(m) => m.matches(md).unwrap_or(false),
                _ => true,
            })
        })
    }

    /// The files the plans' sinks write.
    /// (path, appends) for each.
    pub fn sink_files(&self) -> Vec<(std::path::PathBuf, bool)> {
        let mut out = Vec::new();
        for p in &self.plans {
            for s in &p.steps {
                if let Action::Sink(sink) = &s.action {
                    out.extend(sink.files().map(|(p, a)| (p.clone(), a)));
                }
            }
        }
        out
    }

    /// The open statistics windows.
    pub fn save_state(&self) -> Result<PipelineState, PipelineError> {
        let mut state = PipelineState::default();
        for p in &self.plans {
            for (i, s) in p.steps.iter().enumerate() {
                let v = match &s.action {
                    Action::Statistics(a) => serde_json::to_value(&a.windows),
                    Action::Mtg2(a) => serde_json::to_value(&a.windows),
                    _ => continue,
                };
                let v = v.map_err(|e| PipelineError::State(format!("window state: {e}")))?;
                state.actions.insert(format!("{}/{i}", p.name), v);
            }
        }
        Ok(state)
    }

    /// Puts saved windows back; the plan set must come from the same config.
    pub fn restore_state(&mut self, state: &PipelineState) -> Result<(), PipelineError> {
        for p in &mut self.plans {
            for (i, s) in p.steps.iter_mut().enumerate() {
                let key = format!("{}/{i}", p.name);
                let Some(v) = state.actions.get(&key) else {
                    continue;
                };
                let bad =
                    |e: serde_json::Error| PipelineError::State(format!("window state {key}: {e}"));
                match &mut s.action {
                    Action::Statistics(a) => {
                        a.windows = serde_json::from_value(v.clone()).map_err(bad)?
                    }
                    Action::Mtg2(a) => {
                        a.windows = serde_json::from_value(v.clone()).map_err(bad)?
                    }
                    _ => {
                        return Err(PipelineError::State(format!(
                            "window state {key}: not a statistics action in this plan set"
                        )))
                    }
                }
            }
        }
        Ok(())
    }
}

impl Plan {
    /// Runs `msg` from step `at` to the end of the chain.
    fn run(&mut self, at: usize, msg: Message, ctx: &Context) -> Result<(), PipelineError> {
        let Some(step) = self.steps.get_mut(at) else {
            return Ok(());
        };
        let mut out = Vec::new();
        step.handle(msg, ctx, &mut out)?;
        let mut first_error = None;
        for m in out {
            if let Err(e) = self.run(at + 1, m, ctx) {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Step {
    fn handle(
        &mut self,
        msg: Message,
        ctx: &Context,
        out: &mut Vec<Message>,
    ) -> Result<(), PipelineError> {
        let site = &self.site;
        let name = msg.metadata().describe();
        let field_err = |e: String| site.field_error(&name, e);
        match &mut self.action {
            Action::Select(m) => {
                let pass = match &msg {
                    Message::Field(f) => m.matches(&f.metadata).map_err(field_err)?,
                    _ => true,
                };
                if pass {
                    out.push(msg);
                }
            }
            Action::Statistics(a) => a.handle(msg, out).map_err(field_err)?,
            Action::Mtg2(a) => a.handle(msg, out).map_err(field_err)?,
            Action::AverageRate
            | Action::MetadataMapping(_)
            | Action::Scale(_)
            | Action::Encode(_) => {
                let Message::Field(mut f) = msg else {
                    out.push(msg);
                    return Ok(());
                };
                match &self.action {
                    Action::AverageRate => super::average_rate::apply(&mut f),
                    Action::MetadataMapping(m) => m.apply(&mut f),
                    Action::Scale(s) => s.apply(&mut f),
                    Action::Encode(e) => e.apply(&mut f),
                    _ => Ok(()),
                }
                .map_err(field_err)?;
                out.push(Message::Field(f));
            }
            Action::Print {
                prefix,
                only_fields,
            } => {
                if !*only_fields || matches!(msg, Message::Field(_)) {
                    let size = match &msg {
                        // As MultIO counts it: the bytes of the values in the field's
                        // precision (values are kept as doubles here either way).
                        Message::Field(f) => match &f.payload {
                            super::message::Payload::Values(v) => {
                                let single = matches!(
                                    f.metadata.get("misc-precision"),
                                    Some(super::metadata::Value::String(p)) if p == "single"
                                );
                                v.len() * if single { 4 } else { 8 }
                            }
                            super::message::Payload::Encoded(b) => b.len(),
                        },
                        _ => 0,
                    };
                    let label = if prefix.is_empty() {
                        site.plan.clone()
                    } else {
                        format!("{}/{prefix}", site.plan)
                    };
                    if let Ok(mut w) = ctx.out.lock() {
                        // A closed output does not fail the plan.
                        let _ = writeln!(
                            w,
                            "[fieldstore::print][{label}] Message(tag={}, metadata={}, payload-size={size})",
                            msg.tag(),
                            msg.metadata()
                        );
                    }
                }
                out.push(msg);
            }
            Action::Sink(s) => s.handle(site, msg)?,
            Action::SingleFieldSink(root) => {
                if let Message::Field(f) = &msg {
                    let md = &f.metadata;
                    let part = |keys: &[&str]| {
                        keys.iter()
                            .find_map(|k| md.text(k).ok().flatten())
                            .unwrap_or_default()
                    };
                    let path = format!(
                        "{root}{}::{}::{}",
                        part(&["level", "levelist"]),
                        part(&["param", "paramId"]),
                        part(&["step"])
                    );
                    let bytes = match &f.payload {
                        super::message::Payload::Encoded(b) => b.clone(),
                        super::message::Payload::Values(v) => {
                            v.iter().flat_map(|x| x.to_ne_bytes()).collect()
                        }
                    };
                    std::fs::write(&path, bytes)
                        .map_err(|e| site.sink_error(&path, format!("write: {e}")))?;
                }
            }
            Action::Null => {}
        }
        Ok(())
    }
}

fn build(a: &ActionConfig, ctx: &Context) -> Result<Action, PipelineError> {
    let env = ctx.env.clone();
    Ok(match a.type_name.as_str() {
        "select" => Action::Select(Matcher::from_node(&a.node, true).map_err(|(line, m)| {
            PipelineError::Config {
                origin: a.origin.clone(),
                line: Some(line),
                message: format!("action 'select': {m}"),
            }
        })?),
        "statistics" => Action::Statistics(Legacy::new(LegacyOptions::from_config(a)?)),
        "statistics-mtg2" => Action::Mtg2(Mtg2::new(Mtg2Options::from_config(a)?)),
        "average-rate" => Action::AverageRate,
        "metadata-mapping" => Action::MetadataMapping(MetadataMapping::from_config(a, &*env)?),
        "scale" => Action::Scale(Scale::from_config(a)?),
        "encode" => Action::Encode(Encode::from_config(a)?),
        "print" => Action::Print {
            prefix: a
                .node
                .get("prefix")
                .and_then(|n| n.scalar_text())
                .unwrap_or_default(),
            only_fields: a
                .node
                .get("only-fields")
                .and_then(config::parse_bool)
                .unwrap_or(false),
        },
        "sink" => Action::Sink(Sink::from_config(a, ctx)?),
        "null" => Action::Null,
        "single-field-sink" => {
            let root = a
                .node
                .get("root_path")
                .and_then(|n| n.scalar_text())
                .unwrap_or_default();
            // Output paths are relative to the working directory, as in MultIO.
            Action::SingleFieldSink(root)
        }
        other => {
            if let Some((_, reason)) = REFUSED.iter().find(|(n, _)| *n == other) {
                return Err(PipelineError::Refused {
                    origin: a.origin.clone(),
                    line: a.line,
                    name: other.to_string(),
                    reason: reason.to_string(),
                });
            }
            return Err(PipelineError::UnknownAction {
                origin: a.origin.clone(),
                line: a.line,
                name: other.to_string(),
                known: KNOWN_ACTIONS.join(", "),
            });
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    struct Buf(Arc<Mutex<Vec<u8>>>);
    impl std::io::Write for Buf {
        fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
            self.0.lock().map(|mut v| v.extend_from_slice(b)).ok();
            Ok(b.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    fn set(yaml: &str) -> (Result<PlanSet, PipelineError>, Arc<Mutex<Vec<u8>>>) {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let ctx = Context {
            out: Arc::new(Mutex::new(Buf(buf.clone()))),
            env: Arc::new(|_: &str| None),
            ..Context::default()
        };
        let cfg = config::load_str(yaml, "p.yaml", Path::new("."), Side::Client, &|_| None);
        (cfg.and_then(|c| PlanSet::new(&c, ctx)), buf)
    }

    #[test]
    fn refused_and_unknown_actions_are_named() {
        let (r, _) = set("plans:\n  - actions:\n      - type: aggregate\n");
        let e = r.err().unwrap().to_string();
        assert!(
            e.starts_with("p.yaml:3:") && e.contains("aggregate") && e.contains("MPI"),
            "{e}"
        );
        let (r, _) = set("plans:\n  - actions:\n      - type: frobnicate\n");
        let e = r.err().unwrap().to_string();
        assert!(
            e.contains("unknown action type 'frobnicate'") && e.contains("statistics-mtg2"),
            "{e}"
        );
        let (r, _) = set("plans:\n  - actions:\n      - type: 'null'\n      - type: print\n");
        assert!(r.is_err());
    }

    #[test]
    fn a_bad_field_fails_alone() {
        let yaml = "plans:\n  - name: strict\n    actions:\n      - {type: select, match: {paramId: ['167']}}\n      - {type: print}\n  - name: loose\n    actions:\n      - {type: print}\n";
        let (r, buf) = set(yaml);
        let mut s = r.unwrap();
        let mut md = Metadata::new();
        md.set("paramId", 167i64);
        let errors = s.process(Message::Field(super::super::message::Field::values(
            md,
            vec![1.0],
        )));
        assert_eq!(errors.len(), 1);
        let e = errors[0].to_string();
        assert!(
            e.contains("plan 'strict'") && e.contains("select #1") && e.contains("paramId=167"),
            "{e}"
        );
        // The other plan still got the field, and the next message goes through both.
        let text = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
        assert_eq!(text.matches("tag=Field").count(), 1);
        assert!(s
            .process(Message::flush(super::super::message::FlushKind::Default))
            .is_empty());
        let text = String::from_utf8(buf.lock().unwrap().clone()).unwrap();
        assert_eq!(text.matches("tag=Flush").count(), 2);
        assert!(text.contains("\"clientPlanName\":\"strict\""), "{text}");
    }

    #[test]
    fn state_saves_and_restores() {
        let yaml = "plans:\n  - name: p\n    actions:\n      - {type: statistics, output-frequency: 1d, operations: [average], options: {use-current-time: true}}\n      - {type: print}\n";
        let field = |s: i64| {
            let mut md = Metadata::new();
            for (k, v) in [
                ("param", "167"),
                ("levtype", "sfc"),
                ("gridType", "regular_ll"),
            ] {
                md.set(k, v);
            }
            md.set("level", 0i64);
            md.set("date", 20250101i64);
            md.set("step", s);
            Message::Field(super::super::message::Field::values(md, vec![s as f64]))
        };
        let (a, buf_a) = set(yaml);
        let mut a = a.unwrap();
        for s in 1..=10 {
            assert!(a.process(field(s)).is_empty());
        }
        let state = a.save_state().unwrap();
        let text = serde_json::to_string(&state).unwrap();
        let (b, buf_b) = set(yaml);
        let mut b = b.unwrap();
        b.restore_state(&serde_json::from_str(&text).unwrap())
            .unwrap();
        for s in 11..=24 {
            a.process(field(s));
            b.process(field(s));
        }
        let (ta, tb) = (buf_a.lock().unwrap().clone(), buf_b.lock().unwrap().clone());
        assert_eq!(ta, tb);
        assert_eq!(
            String::from_utf8(tb)
                .unwrap()
                .matches("\"operation\":\"average\"")
                .count(),
            1
        );
    }

    #[test]
    fn single_field_sink_writes_a_file_per_field() {
        let dir = tempfile::tempdir().unwrap();
        let yaml = "plans:\n  - actions:\n      - {type: single-field-sink, root_path: '{~}/f-'}\n";
        let cfg = config::load_str(yaml, "p", dir.path(), Side::Client, &|_| None).unwrap();
        let mut s = PlanSet::new(&cfg, Context::default()).unwrap();
        let mut md = Metadata::new();
        md.set("level", 500i64);
        md.set("param", "130");
        md.set("step", 6i64);
        assert!(s
            .process(Message::Field(super::super::message::Field::values(
                md,
                vec![1.5]
            )))
            .is_empty());
        let bytes = std::fs::read(dir.path().join("f-500::130::6")).unwrap();
        assert_eq!(bytes, 1.5f64.to_ne_bytes());
    }
}
