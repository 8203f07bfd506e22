//! `statistics`: MultIO's legacy statistics action. Windows are calendar periods; a window is
//! emitted on its last step (the step whose next one falls outside it), with the metadata of
//! that step and the window's time keys. Divergences from MultIO (docs/pipelines.md): the
//! maximum of negative values, the first sample when step 0 is not sent, `time` as HHMM, a
//! step 0 without `initial-condition-present`, and windows whose boundary step never came.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::operations::{OpKind, OpSet, Sample};
use super::window::{date_time_of, epoch_of, Period, Unit};
use crate::pipeline::config::{parse_bool, ActionConfig};
use crate::pipeline::error::PipelineError;
use crate::pipeline::message::{Field, FlushKind, Message, Payload};
use crate::pipeline::metadata::Metadata;
use crate::pipeline::node::Node;

/// Options of the action, as read from the plan.
#[derive(Debug, Clone)]
pub struct LegacyOptions {
    pub period: Period,
    pub frequency_text: String,
    pub ops: Vec<OpKind>,
    pub mapping: Vec<ParamMapping>,
    pub initial_condition_present: bool,
    pub use_current_time: bool,
    pub step_frequency: i64,
    pub time_step: i64,
    pub backward: bool,
    pub reset_every: Option<Unit>,
    pub threshold: Option<u64>,
    /// A window that got fewer samples than its length holds (`incomplete-windows`, a
    /// fieldstore option): `emit` it as MultIO does (the default) or `drop` it; either way it
    /// is reported (a warning naming the field, the window and the count).
    pub emit_incomplete: bool,
}

/// One `mapping-param` rule.
#[derive(Debug, Clone)]
pub struct ParamMapping {
    pub param: Option<String>,
    pub operation: Option<String>,
    pub frequency: Option<String>,
    pub to: String,
}

/// Reads the options shared by both statistics actions' configs.
pub(crate) fn frequency_and_ops(
    cfg: &ActionConfig,
    mtg2: bool,
) -> Result<(Period, String, Vec<OpKind>), PipelineError> {
    let n = &cfg.node;
    let f = n
        .get("output-frequency")
        .ok_or_else(|| cfg.error("output-frequency: is required"))?;
    let text = f.scalar_text().unwrap_or_default();
    let period = Period::parse(&text).ok_or_else(|| {
        cfg.error_at(
            f,
            format!("output-frequency '{text}' is not N followed by h, hour, d, day, m or month"),
        )
    })?;
    let ops_node = n
        .get("operations")
        .ok_or_else(|| cfg.error("operations: is required"))?;
    let list = ops_node
        .as_seq()
        .ok_or_else(|| cfg.error_at(ops_node, "operations: must be a list"))?;
    if list.is_empty() {
        return Err(cfg.error_at(ops_node, "operations: is empty"));
    }
    let mut ops = Vec::new();
    for o in list {
        let name = o.scalar_text().unwrap_or_default();
        let op = OpKind::parse(&name, mtg2).ok_or_else(|| {
            cfg.error_at(
                o,
                format!(
                    "unknown operation '{name}' (known: {})",
                    OpKind::names(mtg2)
                ),
            )
        })?;
        ops.push(op);
    }
    Ok((period, text, ops))
}

pub(crate) fn opt_bool(
    cfg: &ActionConfig,
    opts: Option<&Node>,
    key: &str,
    default: bool,
) -> Result<bool, PipelineError> {
    match opts.and_then(|o| o.get(key)) {
        None => Ok(default),
        Some(n) => parse_bool(n).ok_or_else(|| cfg.error_at(n, format!("{key}: must be a bool"))),
    }
}

pub(crate) fn opt_int(
    cfg: &ActionConfig,
    opts: Option<&Node>,
    key: &str,
    default: i64,
) -> Result<i64, PipelineError> {
    match opts.and_then(|o| o.get(key)) {
        None => Ok(default),
        Some(n) => n
            .scalar_text()
            .and_then(|t| t.parse().ok())
            .ok_or_else(|| cfg.error_at(n, format!("{key}: must be an integer"))),
    }
}

/// Restart directories are MultIO's; our state is saved by the engine instead.
pub(crate) fn refuse_restart_files(
    cfg: &ActionConfig,
    opts: Option<&Node>,
) -> Result<(), PipelineError> {
    for key in ["read-restart", "write-restart"] {
        if opt_bool(cfg, opts, key, false)? {
            return Err(PipelineError::Refused {
                origin: cfg.origin.clone(),
                line: opts.and_then(|o| o.get(key)).map(|n| n.line).or(cfg.line),
                name: format!("{}: {key}", cfg.type_name),
                reason: "MultIO's restart directories are not written or read; window state is \
                         saved with the engine's state (PlanSet::save_state) instead"
                    .into(),
            });
        }
    }
    Ok(())
}

impl LegacyOptions {
    pub fn from_config(cfg: &ActionConfig) -> Result<LegacyOptions, PipelineError> {
        let (period, frequency_text, ops) = frequency_and_ops(cfg, false)?;
        let opts = cfg.node.get("options");
        refuse_restart_files(cfg, opts)?;
        let mut mapping = Vec::new();
        if let Some(m) = cfg.node.get("mapping-param") {
            let list = m
                .as_seq()
                .ok_or_else(|| cfg.error_at(m, "mapping-param: must be a list"))?;
            for rule in list {
                let w = rule.get("where");
                let text = |k: &str| w.and_then(|w| w.get(k)).and_then(Node::scalar_text);
                let to = rule
                    .get("map-to-param")
                    .and_then(Node::scalar_text)
                    .ok_or_else(|| {
                        cfg.error_at(rule, "mapping-param: each rule needs map-to-param")
                    })?;
                mapping.push(ParamMapping {
                    param: text("param-is"),
                    operation: text("operation-is"),
                    frequency: text("output-frequency-is"),
                    to,
                });
            }
        }
        let window_type = opts
            .and_then(|o| o.get("window-type"))
            .and_then(Node::scalar_text)
            .unwrap_or_else(|| "forward-offset".into());
        let backward = match window_type.as_str() {
            "forward-offset" => false,
            "backward-offset" => true,
            other => {
                return Err(cfg.error(format!(
                    "window-type '{other}' is not forward-offset or backward-offset"
                )))
            }
        };
        let reset = opts
            .and_then(|o| o.get("solver-reset-accumulate-fields-every"))
            .and_then(Node::scalar_text)
            .unwrap_or_else(|| "month".into());
        let reset_every = match reset.as_str() {
            "hour" => Some(Unit::Hour),
            "day" => Some(Unit::Day),
            "month" => Some(Unit::Month),
            "year" | "never" => None,
            other => return Err(cfg.error(format!("solver-reset-accumulate-fields-every '{other}' is not hour, day, month, year or never"))),
        };
        let threshold = opt_int(cfg, opts, "value-count-threshold", -1)?;
        let emit_incomplete = match opts
            .and_then(|o| o.get("incomplete-windows"))
            .map(|n| (n, n.scalar_text()))
        {
            None => true,
            Some((_, Some(t))) if t == "emit" => true,
            Some((_, Some(t))) if t == "drop" => false,
            Some((n, _)) => return Err(cfg.error_at(n, "incomplete-windows: must be emit or drop")),
        };
        Ok(LegacyOptions {
            emit_incomplete,
            period,
            frequency_text,
            ops,
            mapping,
            initial_condition_present: opt_bool(cfg, opts, "initial-condition-present", false)?,
            use_current_time: opt_bool(cfg, opts, "use-current-time", false)?,
            step_frequency: opt_int(cfg, opts, "step-frequency", 1)?,
            time_step: opt_int(cfg, opts, "time-step", 3600)?,
            backward,
            reset_every,
            threshold: u64::try_from(threshold).ok().filter(|t| *t > 0),
        })
    }
}

/// One field's open window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LegacyWindow {
    epoch: i64,
    creation: i64,
    end: i64,
    last_time: i64,
    ops: OpSet,
}

/// The action.
pub struct Legacy {
    opts: LegacyOptions,
    pub(crate) windows: BTreeMap<String, LegacyWindow>,
}

/// The times of one message.
struct When {
    epoch: i64,
    curr: i64,
    next: i64,
    step_seconds: i64,
}

impl Legacy {
    pub fn new(opts: LegacyOptions) -> Legacy {
        Legacy {
            opts,
            windows: BTreeMap::new(),
        }
    }

    fn key(md: &Metadata) -> Result<String, String> {
        let pick = |a: &str, b: &str| -> Result<String, String> {
            match md.text(a)? {
                Some(v) => Ok(v),
                None => md
                    .text(b)?
                    .ok_or_else(|| format!("missing required key '{a}' (or '{b}')")),
            }
        };
        let param = pick("param", "paramId")?;
        let level = pick("level", "levelist")?;
        let levtype = pick("levtype", "category")?;
        let grid = md
            .text("gridType")?
            .ok_or("missing required key 'gridType'")?;
        let precision = md
            .text("misc-precision")?
            .unwrap_or_else(|| "double".into());
        Ok(format!("{param}-{level}-{levtype}-{grid}-{precision}"))
    }

    fn when(&self, md: &Metadata) -> Result<When, String> {
        let (dk, tk) = if self.opts.use_current_time {
            ("date", "time")
        } else {
            ("startDate", "startTime")
        };
        let date = md.required_int(dk)?;
        let time = md.int(tk)?.unwrap_or(0);
        let epoch = epoch_of(date, time)?;
        let step = match md.int("endStep")? {
            Some(s) => s,
            None => md.required_int("step")?,
        };
        let ts = md.int("timeStep")?.unwrap_or(self.opts.time_step);
        let sf = md
            .int("step-frequency")?
            .unwrap_or(self.opts.step_frequency);
        if ts <= 0 || sf <= 0 {
            return Err(format!(
                "timeStep {ts} and step-frequency {sf} must be positive"
            ));
        }
        let curr = step
            .checked_mul(ts)
            .and_then(|s| epoch.checked_add(s))
            .ok_or("step out of range")?;
        let step_seconds = sf * ts;
        Ok(When {
            epoch,
            curr,
            next: curr + step_seconds,
            step_seconds,
        })
    }

    fn window_end(&self, creation: i64) -> Result<i64, String> {
        let p = self.opts.period;
        p.truncate(creation)
            .and_then(|s| p.add(s, 1))
            .ok_or_else(|| "window time out of range".to_string())
    }

    /// Whether `t` lies after the window ending at `end`.
    fn after(&self, t: i64, end: i64) -> bool {
        if self.opts.backward {
            t >= end
        } else {
            t > end
        }
    }

    /// Whether the model's accumulations restart at `t` (`solver-reset-accumulate-fields-every`).
    fn resets_at(&self, t: i64) -> bool {
        match self.opts.reset_every {
            None => false,
            Some(unit) => Period { n: 1, unit }.truncate(t) == Some(t),
        }
    }

    pub fn handle(&mut self, msg: Message, out: &mut Vec<Message>) -> Result<(), String> {
        let field = match msg {
            Message::Field(f) => f,
            Message::Flush(md) => {
                // Read both forms; MultIO aborts the process on an int flushKind here.
                FlushKind::of(&md)?;
                out.push(Message::Flush(md));
                return Ok(());
            }
            other => {
                out.push(other);
                return Ok(());
            }
        };
        let Payload::Values(values) = &field.payload else {
            return Err(
                "statistics needs decoded values, not encoded bytes (put statistics before encode)"
                    .into(),
            );
        };
        let key = Self::key(&field.metadata)?;
        let when = self.when(&field.metadata)?;
        let missing = field.missing_value()?;
        let sample = Sample { values, missing };
        let Some(mut w) = self.windows.remove(&key) else {
            return self.first(key, &field, when, &sample, out);
        };
        if values.len() != w.ops.size() {
            let n = w.ops.size();
            self.windows.insert(key, w);
            return Err(format!("{} values, the series had {n}", values.len()));
        }
        if when.curr <= w.last_time {
            let t = w.last_time;
            self.windows.insert(key, w);
            if self.opts.initial_condition_present && when.curr == t {
                return Ok(());
            }
            return Err(format!(
                "step goes back in time ({} s after the previous one's time; steps must increase)",
                when.curr - t
            ));
        }
        // A window whose last step never came is emitted before the next one starts.
        while self.after(when.curr, w.end) {
            if w.ops.count > 0 {
                self.emit(&w, &field, out);
            }
            if let Err(e) = self.roll(&mut w) {
                self.windows.insert(key, w);
                return Err(e);
            }
        }
        w.ops.update(&sample);
        w.last_time = when.curr;
        if self.after(when.next, w.end) {
            self.emit(&w, &field, out);
            if let Err(e) = self.roll(&mut w) {
                self.windows.insert(key, w);
                return Err(e);
            }
        }
        self.windows.insert(key, w);
        Ok(())
    }

    fn roll(&self, w: &mut LegacyWindow) -> Result<(), String> {
        let reset = self.resets_at(w.end);
        w.creation = w.end;
        w.end = self
            .opts
            .period
            .add(w.end, 1)
            .ok_or("window time out of range")?;
        w.ops.roll(reset);
        Ok(())
    }

    fn first(
        &mut self,
        key: String,
        field: &Field,
        when: When,
        sample: &Sample<'_>,
        out: &mut Vec<Message>,
    ) -> Result<(), String> {
        let mut ops = OpSet::new(&self.opts.ops, sample.values.len(), self.opts.threshold);
        // Step 0 is the initial condition: it starts the window and gives difference-like ops
        // their baseline, and is not a sample. Any other first step is a sample (MultIO drops
        // it when initial-condition-present is set, and fails on step 0 when it is not).
        if when.curr == when.epoch {
            ops.set_baseline(sample.values);
            let end = self.window_end(when.curr)?;
            self.windows.insert(
                key,
                LegacyWindow {
                    epoch: when.epoch,
                    creation: when.curr,
                    end,
                    last_time: when.curr,
                    ops,
                },
            );
            return Ok(());
        }
        let creation = when.curr - when.step_seconds;
        let end = self.window_end(creation)?;
        let mut w = LegacyWindow {
            epoch: when.epoch,
            creation,
            end,
            last_time: when.curr,
            ops,
        };
        w.ops.update(sample);
        if self.after(when.next, w.end) {
            self.emit(&w, field, out);
            self.roll(&mut w)?;
        }
        self.windows.insert(key, w);
        Ok(())
    }

    fn emit(&self, w: &LegacyWindow, trigger: &Field, out: &mut Vec<Message>) {
        let seconds = (w.end - w.creation) as f64;
        // Samples come every `step_seconds` after the window's start, the last at its end.
        let ts = trigger
            .metadata
            .int("timeStep")
            .ok()
            .flatten()
            .unwrap_or(self.opts.time_step);
        let sf = trigger
            .metadata
            .int("step-frequency")
            .ok()
            .flatten()
            .unwrap_or(self.opts.step_frequency);
        let step_seconds = ts.saturating_mul(sf).max(1);
        let expected = u64::try_from((w.end - w.creation) / step_seconds).unwrap_or(0);
        if w.ops.count < expected {
            let (sd, st) = date_time_of(w.creation);
            let (ed, et) = date_time_of(w.end);
            tracing::warn!(
                field = %trigger.metadata.describe(),
                "statistics window {sd} {st:06} to {ed} {et:06} got {} of its {expected} samples: {}",
                w.ops.count,
                if self.opts.emit_incomplete { "emitted (incomplete-windows: emit)" } else { "dropped (incomplete-windows: drop)" }
            );
            if !self.opts.emit_incomplete {
                return;
            }
        }
        let results = w.ops.results(seconds);
        let ts = trigger
            .metadata
            .int("timeStep")
            .ok()
            .flatten()
            .unwrap_or(self.opts.time_step)
            .max(1);
        for (op, values) in w.ops.ops.iter().zip(results) {
            let mut md = trigger.metadata.clone();
            md.set("operation", op.kind.output_name());
            md.set("operation-frequency", self.opts.frequency_text.as_str());
            let (sd, st) = date_time_of(w.epoch);
            let (pd, pt) = date_time_of(w.creation);
            let (cd, ct) = date_time_of(w.end);
            md.set("startDate", sd);
            md.set("startTime", st);
            md.set("previousDate", pd);
            md.set("previousTime", pt);
            md.set("currentDate", cd);
            md.set("currentTime", ct);
            md.set("startStepInHours", (w.creation - w.epoch) / 3600);
            md.set("endStepInHours", (w.end - w.epoch) / 3600);
            md.set("step-frequency", (w.end - w.creation) / ts);
            md.set("sampleIntervalInSeconds", ts);
            if let Some(to) = self.mapped_param(&trigger.metadata, op.kind) {
                md.set("param", to);
            }
            out.push(Message::Field(Field {
                metadata: md,
                payload: Payload::Values(values),
                source_grib: trigger.source_grib.clone(),
            }));
        }
    }

    fn mapped_param(&self, md: &Metadata, op: OpKind) -> Option<String> {
        let param = md
            .text("param")
            .ok()
            .flatten()
            .or_else(|| md.text("paramId").ok().flatten())?;
        self.opts
            .mapping
            .iter()
            .find(|m| {
                m.param.as_deref().is_none_or(|p| p == param)
                    && m.operation
                        .as_deref()
                        .is_none_or(|o| o == op.output_name() || o == op.name())
                    && m.frequency
                        .as_deref()
                        .is_none_or(|f| f == self.opts.frequency_text)
            })
            .map(|m| m.to.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::config::{load_str, ActionConfig, Side};
    use std::path::Path;

    fn action(yaml_options: &str) -> Legacy {
        let text = format!("plans:\n  - actions:\n      - type: statistics\n{yaml_options}");
        let c = load_str(&text, "t", Path::new("."), Side::Client, &|_| None).unwrap();
        let cfg: &ActionConfig = &c.plans[0].actions[0];
        Legacy::new(LegacyOptions::from_config(cfg).unwrap())
    }

    fn field(step: i64, time: i64, values: Vec<f64>) -> Message {
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
        md.set("time", time);
        md.set("step", step);
        Message::Field(Field::values(md, values))
    }

    fn ramp(steps: std::ops::RangeInclusive<i64>, a: &mut Legacy, time: i64) -> Vec<Field> {
        let mut out = Vec::new();
        for s in steps {
            let v = vec![
                250.0 + s as f64,
                260.0 + 0.5 * s as f64,
                -5.0 - s as f64,
                (s % 24) as f64,
            ];
            a.handle(field(s, time, v), &mut out).unwrap();
        }
        out.into_iter()
            .filter_map(|m| {
                if let Message::Field(f) = m {
                    Some(f)
                } else {
                    None
                }
            })
            .collect()
    }

    fn vals(f: &Field) -> &[f64] {
        match &f.payload {
            Payload::Values(v) => v,
            _ => &[],
        }
    }

    const DAILY: &str = "        output-frequency: 1d\n        operations: [average, maximum]\n        options: {use-current-time: true, initial-condition-present: true}\n";

    #[test]
    fn daily_mean_and_max_match_multio_figures() {
        let mut a = action(DAILY);
        let out = ramp(0..=72, &mut a, 0);
        assert_eq!(out.len(), 6);
        // MultIO's running mean gives the same -17.499999999999996 (observed).
        assert_eq!(
            vals(&out[0]),
            &[262.5, 266.25, -17.499999999999996, 11.5][..]
        );
        // MultIO gives 2.2250738585072014e-308 for the third point (docs/pipelines.md).
        assert_eq!(vals(&out[1]), &[274.0, 272.0, -6.0, 23.0][..]);
        let md = &out[0].metadata;
        assert_eq!(md.int("startStepInHours").unwrap(), Some(0));
        assert_eq!(md.int("endStepInHours").unwrap(), Some(24));
        assert_eq!(md.int("previousDate").unwrap(), Some(20250101));
        assert_eq!(md.int("currentDate").unwrap(), Some(20250102));
        assert_eq!(md.int("step-frequency").unwrap(), Some(24));
        assert_eq!(md.int("step").unwrap(), Some(24));
    }

    /// A day missing an hour is emitted as MultIO does (and reported), or dropped on request.
    #[test]
    fn a_window_missing_inputs_is_emitted_or_dropped_as_the_plan_says() {
        let steps = || (0..=48).filter(|s| *s != 30);
        let run = |a: &mut Legacy| {
            let mut out = Vec::new();
            for s in steps() {
                a.handle(field(s, 0, vec![250.0 + s as f64]), &mut out)
                    .unwrap();
            }
            out.into_iter()
                .filter(|m| matches!(m, Message::Field(_)))
                .count()
        };
        assert_eq!(run(&mut action(DAILY)), 4, "two days, two operations");
        let dropping = DAILY.replace(
            "initial-condition-present: true}",
            "initial-condition-present: true, incomplete-windows: drop}",
        );
        assert_eq!(run(&mut action(&dropping)), 2, "the second day is dropped");
        let text = format!(
            "plans:\n  - actions:\n      - type: statistics\n{}",
            DAILY.replace(
                "use-current-time: true",
                "use-current-time: true, incomplete-windows: sometimes"
            )
        );
        let c = load_str(&text, "t", Path::new("."), Side::Client, &|_| None).unwrap();
        let e = LegacyOptions::from_config(&c.plans[0].actions[0]).unwrap_err();
        assert!(
            e.to_string()
                .contains("incomplete-windows: must be emit or drop"),
            "{e}"
        );
    }

    /// MultIO drops the first sample when step 0 is not sent (263.0 instead of 262.5).
    #[test]
    fn first_sample_is_kept_without_step_zero() {
        let mut a = action(DAILY);
        let out = ramp(1..=24, &mut a, 0);
        assert_eq!(vals(&out[0])[0], 262.5);
    }

    /// MultIO reads time=1200 as 00:12 and cuts 12 UTC runs' days at steps 23, 47.
    #[test]
    fn twelve_utc_runs_cut_days_at_midnight() {
        let mut a = action(DAILY);
        let out = ramp(0..=36, &mut a, 1200);
        let ends: Vec<i64> = out
            .iter()
            .map(|f| f.metadata.int("step").unwrap().unwrap())
            .collect();
        assert_eq!(ends, vec![12, 12, 36, 36]);
        assert_eq!(out[0].metadata.int("startTime").unwrap(), Some(120000));
        assert_eq!(out[0].metadata.int("endStepInHours").unwrap(), Some(12));
    }

    #[test]
    fn bad_metadata_fails_the_field_only() {
        let mut a = action(DAILY);
        let mut out = Vec::new();
        let mut md = Metadata::new();
        md.set("param", 167i64);
        let e = a
            .handle(Message::Field(Field::values(md, vec![1.0])), &mut out)
            .unwrap_err();
        assert!(e.contains("level"), "{e}");
        // An int param (MultIO aborts) is read as the same param.
        let ok = ramp(0..=24, &mut a, 0);
        assert_eq!(ok.len(), 2);
    }

    #[test]
    fn state_round_trips() {
        let mut a = action(DAILY);
        ramp(0..=30, &mut a, 0);
        let text = serde_json::to_string(&a.windows).unwrap();
        let mut b = action(DAILY);
        b.windows = serde_json::from_str(&text).unwrap();
        let rest_a = ramp(31..=48, &mut a, 0);
        let rest_b = ramp(31..=48, &mut b, 0);
        assert_eq!(rest_a, rest_b);
        assert_eq!(rest_a.len(), 2);
    }

    #[test]
    fn param_mapping() {
        let mut a = action("        output-frequency: 1d\n        operations: [average]\n        mapping-param:\n          - {where: {param-is: '167', operation-is: average}, map-to-param: '228004'}\n        options: {use-current-time: true}\n");
        let out = ramp(1..=24, &mut a, 0);
        assert_eq!(
            out[0].metadata.text("param").unwrap().as_deref(),
            Some("228004")
        );
    }
}
