//! `statistics-mtg2`: the MARS-keyed statistics IFS, SEAS6 and AIFS use, with 2.12's window
//! rules: calendar windows `(start, end]`, a step on the first window's lower boundary is the
//! initial condition, a window is emitted when the first step after it arrives or on a
//! `last-step` flush, and outputs carry `timespan`, `stattype` and the mapped `param`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::legacy::{frequency_and_ops, opt_bool, opt_int, refuse_restart_files};
use super::operations::{OpKind, OpSet, Sample};
use super::tables;
use super::window::{date_time_of, epoch_of, Period};
use crate::pipeline::config::ActionConfig;
use crate::pipeline::error::PipelineError;
use crate::pipeline::message::{Field, FlushKind, Message, Payload};
use crate::pipeline::metadata::{Metadata, Value};
use crate::pipeline::node::Node;

#[derive(Debug, Clone)]
pub struct Mtg2Options {
    pub period: Period,
    pub ops: Vec<OpKind>,
    pub backward: bool,
    pub threshold: Option<u64>,
    pub strict_mapping: bool,
    pub squashing: bool,
    /// `None`: from the stream (start-of-window for clmn and clte).
    pub start_of_window: Option<bool>,
    pub emit_incomplete: bool,
    pub set_metadata: Vec<(String, String)>,
}

impl Mtg2Options {
    pub fn from_config(cfg: &ActionConfig) -> Result<Mtg2Options, PipelineError> {
        let (period, _, ops) = frequency_and_ops(cfg, true)?;
        let opts = cfg.node.get("options");
        refuse_restart_files(cfg, opts)?;
        let text = |k: &str| opts.and_then(|o| o.get(k)).and_then(Node::scalar_text);
        let backward = match text("window-type").as_deref() {
            None | Some("forward-offset") => false,
            Some("backward-offset") => true,
            Some(other) => {
                return Err(cfg.error(format!(
                    "window-type '{other}' is not forward-offset or backward-offset"
                )))
            }
        };
        let start_of_window = match text("output-time-reference").as_deref() {
            None | Some("") => None,
            Some("start-of-forecast") => Some(false),
            Some("start-of-window") => Some(true),
            Some(other) => {
                return Err(cfg.error(format!(
                    "output-time-reference '{other}' is not start-of-forecast or start-of-window"
                )))
            }
        };
        let mut set_metadata = Vec::new();
        if let Some(m) = opts.and_then(|o| o.get("set-metadata")) {
            let pairs = m
                .as_map()
                .ok_or_else(|| cfg.error_at(m, "set-metadata: must be a map"))?;
            for (k, v) in pairs {
                let t = v.scalar_text().ok_or_else(|| {
                    cfg.error_at(v, format!("set-metadata: {k} must be a scalar"))
                })?;
                set_metadata.push((k.clone(), t));
            }
        }
        let threshold = opt_int(cfg, opts, "value-count-threshold", -1)?;
        Ok(Mtg2Options {
            period,
            ops,
            backward,
            threshold: u64::try_from(threshold).ok().filter(|t| *t > 0),
            strict_mapping: !opt_bool(cfg, opts, "disable-strict-mapping", false)?,
            squashing: !opt_bool(cfg, opts, "disable-squashing", false)?,
            start_of_window,
            emit_incomplete: opt_bool(cfg, opts, "emit-incomplete-statistics", false)?,
            set_metadata,
        })
    }
}

/// One field's open window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Mtg2Window {
    /// The metadata of the field's first message, which outputs start from.
    first: Metadata,
    epoch: i64,
    start: i64,
    end: i64,
    last_time: i64,
    /// The input's own `timespan` in seconds (0 for instantaneous fields).
    timespan: i64,
    ops: OpSet,
}

pub struct Mtg2 {
    opts: Mtg2Options,
    pub(crate) windows: BTreeMap<String, Mtg2Window>,
}

/// A duration key: an int is hours; text may end in `h`, `m` (minutes) or `s`.
fn duration_seconds(md: &Metadata, key: &str) -> Result<Option<i64>, String> {
    match md.get(key) {
        None => Ok(None),
        Some(Value::Int(h)) => h
            .checked_mul(3600)
            .map(Some)
            .ok_or_else(|| format!("{key} out of range")),
        Some(Value::String(s)) => {
            let t = s.trim();
            let (num, mul) = match t.chars().last() {
                Some('h') => (&t[..t.len() - 1], 3600),
                Some('m') => (&t[..t.len() - 1], 60),
                Some('s') => (&t[..t.len() - 1], 1),
                _ => (t, 3600),
            };
            num.parse::<i64>()
                .ok()
                .and_then(|n| n.checked_mul(mul))
                .map(Some)
                .ok_or_else(|| {
                    format!("{key} '{s}' is not a duration (hours, or a number with h, m or s)")
                })
        }
        Some(other) => Err(format!(
            "{key} must be an int or a duration, it is the {} {other}",
            other.type_name()
        )),
    }
}

fn param_of(md: &Metadata) -> Result<i64, String> {
    match md.get("param") {
        Some(Value::Int(p)) => Ok(*p),
        Some(Value::String(s)) => s
            .trim()
            .parse()
            .map_err(|_| format!("param '{s}' is not a number")),
        Some(other) => Err(format!(
            "param must be an int, it is the {} {other}",
            other.type_name()
        )),
        None => md.required_int("paramId"),
    }
}

impl Mtg2 {
    pub fn new(opts: Mtg2Options) -> Mtg2 {
        Mtg2 {
            opts,
            windows: BTreeMap::new(),
        }
    }

    fn key(md: &Metadata) -> Result<String, String> {
        let param = param_of(md)?;
        let levtype = md
            .text("levtype")?
            .ok_or("missing required key 'levtype'")?;
        let level = md.text("levelist")?.unwrap_or_else(|| "0".into());
        let grid = match md.text("grid")? {
            Some(g) => g,
            None => md
                .text("truncation")?
                .ok_or("missing required key 'grid' (or 'truncation')")?,
        };
        let precision = md
            .text("misc-precision")?
            .unwrap_or_else(|| "double".into());
        Ok(format!("{param}-{level}-{levtype}-{grid}-{precision}"))
    }

    /// The window `(start, end]` a sample ending at `curr` and covering `timespan` belongs to.
    fn window_of(&self, curr: i64, timespan: i64) -> Result<(i64, i64), String> {
        let p = self.opts.period;
        let begin = if timespan > 0 {
            curr - timespan
        } else if self.opts.backward {
            curr
        } else {
            curr - 1
        };
        let start = p.truncate(begin).ok_or("time out of range")?;
        let end = p.add(start, 1).ok_or("time out of range")?;
        Ok((start, end))
    }

    pub fn handle(&mut self, msg: Message, out: &mut Vec<Message>) -> Result<(), String> {
        let field = match msg {
            Message::Field(f) => f,
            Message::Flush(md) => {
                if FlushKind::of(&md)? == FlushKind::LastStep {
                    let keys: Vec<String> = self.windows.keys().cloned().collect();
                    for k in keys {
                        if let Some(w) = self.windows.remove(&k) {
                            let complete = w.last_time >= w.end;
                            if w.ops.count > 0 && (complete || self.opts.emit_incomplete) {
                                self.emit(&w, out)?;
                            }
                        }
                    }
                }
                out.push(Message::Flush(md));
                return Ok(());
            }
            other => {
                out.push(other);
                return Ok(());
            }
        };
        let Payload::Values(values) = &field.payload else {
            return Err("statistics-mtg2 needs decoded values, not encoded bytes".into());
        };
        let md = &field.metadata;
        let key = Self::key(md)?;
        let epoch = epoch_of(md.required_int("date")?, md.int("time")?.unwrap_or(0))?;
        let step = duration_seconds(md, "step")?.ok_or("missing required key 'step'")?;
        let timespan = duration_seconds(md, "timespan")?.unwrap_or(0);
        if md.contains("stattype") && md.text("stattype")?.is_none() {
            return Err("stattype must be text".into());
        }
        let curr = epoch.checked_add(step).ok_or("step out of range")?;
        let missing = field.missing_value()?;
        let sample = Sample { values, missing };
        let (start, end) = self.window_of(curr, timespan)?;
        let Some(mut w) = self.windows.remove(&key) else {
            // Step 0, or a first step on a window's lower boundary: the initial condition, not
            // a sample (MultIO 2.11 failed on it; 2.12 skips only the boundary case).
            let on_boundary = self.opts.period.truncate(curr) == Some(curr);
            if timespan == 0 && (curr == epoch || on_boundary) {
                let mut ops = OpSet::new(&self.opts.ops, values.len(), self.opts.threshold);
                ops.set_baseline(values);
                let (s, e) = if on_boundary {
                    (
                        curr,
                        self.opts.period.add(curr, 1).ok_or("time out of range")?,
                    )
                } else {
                    (start, end)
                };
                self.windows.insert(
                    key,
                    Mtg2Window {
                        first: md.clone(),
                        epoch,
                        start: s,
                        end: e,
                        last_time: curr,
                        timespan,
                        ops,
                    },
                );
                return Ok(());
            }
            let mut ops = OpSet::new(&self.opts.ops, values.len(), self.opts.threshold);
            ops.update(&sample);
            self.windows.insert(
                key,
                Mtg2Window {
                    first: md.clone(),
                    epoch,
                    start,
                    end,
                    last_time: curr,
                    timespan,
                    ops,
                },
            );
            return Ok(());
        };
        let put_back = |this: &mut Mtg2, w: Mtg2Window, e: String| {
            this.windows.insert(key.clone(), w);
            Err(e)
        };
        if values.len() != w.ops.size() {
            let n = w.ops.size();
            return put_back(
                self,
                w,
                format!("{} values, the series had {n}", values.len()),
            );
        }
        if curr <= w.last_time {
            let t = w.last_time;
            return put_back(
                self,
                w,
                format!(
                    "step goes back in time ({} s after the previous one; steps must increase)",
                    curr - t
                ),
            );
        }
        if start > w.start {
            if w.ops.count > 0 {
                if let Err(e) = self.emit(&w, out) {
                    return put_back(self, w, e);
                }
            }
            // An accumulation restarting on the new window's start has a baseline of 0.
            let reset = timespan > 0 && curr - timespan == start;
            w.ops.roll(reset);
            w.start = start;
            w.end = end;
        }
        w.ops.update(&sample);
        w.last_time = curr;
        w.timespan = timespan;
        self.windows.insert(key, w);
        Ok(())
    }

    fn emit(&self, w: &Mtg2Window, out: &mut Vec<Message>) -> Result<(), String> {
        let md = w.first.clone();
        let param = param_of(&md)?;
        let point = w.last_time.min(w.end);
        let start = w.start.max(w.epoch);
        let window_hours = (w.end - start) / 3600;
        let stream = md.text("stream")?.unwrap_or_default();
        let start_of_window = self
            .opts
            .start_of_window
            .unwrap_or(stream == "clmn" || stream == "clte");
        let results = w.ops.results((w.end - w.start) as f64);
        for (op, values) in w.ops.ops.iter().zip(results) {
            // No `operation` key: MultIO's outputs carry the statistic in `param`/`stattype`.
            let mut o = md.clone();
            if start_of_window {
                let (d, t) = date_time_of(start);
                o.set("date", d);
                o.set("time", t / 100);
                o.set("step", window_hours);
            } else {
                o.set("step", (point - w.epoch) / 3600);
            }
            let squashed = match op.kind.type_of_statistical_processing() {
                Some(tosp) => {
                    self.statistic_keys(&mut o, param, op.kind, tosp, window_hours, w.timespan)?
                }
                None => true,
            };
            // MultIO 2.12's encoding keys: the window's extent, and the spacing of the samples
            // (a squashed statistic keeps its inputs' own increment).
            o.set("misc-distanceFromPreviousStepInSeconds", w.end - w.start);
            if !squashed {
                let spacing = match md.int("misc-distanceFromPreviousStepInSeconds")? {
                    Some(d) => Some(d),
                    None => md.int("misc-outputStepInSeconds")?,
                };
                if let Some(d) = spacing {
                    o.set("misc-timeIncrementInSeconds", d);
                }
            }
            for (k, v) in &self.opts.set_metadata {
                o.set(k.clone(), v.as_str());
            }
            out.push(Message::Field(Field {
                metadata: o,
                payload: Payload::Values(values),
                source_grib: None,
            }));
        }
        Ok(())
    }

    /// `timespan`, `stattype` and `param` of a statistic (MULTIO.md §3.3); true when the
    /// statistic was squashed into its input's (only the timespan grew).
    fn statistic_keys(
        &self,
        o: &mut Metadata,
        param: i64,
        op: OpKind,
        tosp: i64,
        window_hours: i64,
        input_timespan: i64,
    ) -> Result<bool, String> {
        if input_timespan == 0 {
            o.set("timespan", window_hours);
            match tables::statistics_param(param, tosp) {
                Some(p) => o.set("param", p),
                None if self.opts.strict_mapping => {
                    return Err(format!(
                        "no output param for param {param} and {} (statistics_param_mappings); \
                         set disable-strict-mapping: true to keep the param",
                        op.name()
                    ))
                }
                None => {}
            }
            return Ok(false);
        }
        let own = tables::param_statistic(param);
        let composable = matches!(
            op,
            OpKind::Average | OpKind::Minimum | OpKind::Maximum | OpKind::Accumulate
        ) || (op == OpKind::Difference && own == Some(1));
        let stattype = o.text("stattype")?;
        let same = own == Some(tosp) || (op == OpKind::Difference && own == Some(1));
        if self.opts.squashing && composable && same && stattype.is_none() {
            o.set("timespan", window_hours);
            return Ok(true);
        }
        let dur = self.opts.period.stattype_prefix().ok_or_else(|| {
            "stattype exists only for 1d and 1m windows (a statistic of a statistic otherwise)"
                .to_string()
        })?;
        let code = match op {
            OpKind::Average => "av",
            OpKind::Maximum => "mx",
            OpKind::Minimum => "mn",
            OpKind::Stddev => "sd",
            other => return Err(format!("{} of a statistic has no stattype", other.name())),
        };
        let new = match stattype {
            Some(inner) if !inner.is_empty() => format!("{dur}{code}_{inner}"),
            _ => format!("{dur}{code}"),
        };
        o.set("stattype", new);
        o.set("timespan", input_timespan / 3600);
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pipeline::config::{load_str, Side};
    use std::path::Path;

    fn action(body: &str) -> Mtg2 {
        let text = format!("plans:\n  - actions:\n      - type: statistics-mtg2\n{body}");
        let c = load_str(&text, "t", Path::new("."), Side::Client, &|_| None).unwrap();
        Mtg2::new(Mtg2Options::from_config(&c.plans[0].actions[0]).unwrap())
    }

    fn msg(param: i64, date: i64, step: i64, timespan: Option<i64>, v: Vec<f64>) -> Message {
        let mut md = Metadata::new();
        md.set("param", param);
        md.set("levtype", "sfc");
        md.set("grid", "O48");
        md.set("date", date);
        md.set("time", 0i64);
        md.set("step", step);
        if let Some(t) = timespan {
            md.set("timespan", t);
        }
        Message::Field(Field::values(md, v))
    }

    fn fields(out: Vec<Message>) -> Vec<Field> {
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

    fn vals(f: &Field) -> Vec<f64> {
        match &f.payload {
            Payload::Values(v) => v.clone(),
            _ => vec![],
        }
    }

    #[test]
    fn daily_statistics_of_2t_match_multio_2_12() {
        let mut a = action("        output-frequency: 1d\n        operations: [average, minimum, maximum, stddev]\n");
        let mut out = Vec::new();
        for s in 0..=50 {
            let v = vec![250.0 + s as f64, -5.0 - s as f64, s as f64];
            a.handle(msg(167, 20250101, s, None, v), &mut out).unwrap();
        }
        a.handle(Message::flush(FlushKind::LastStep), &mut out)
            .unwrap();
        let f = fields(out);
        assert_eq!(
            f.len(),
            8,
            "days 1 and 2, four operations; day 3 incomplete"
        );
        assert_eq!(vals(&f[0]), vec![262.5, -17.499999999999996, 12.5]);
        assert_eq!(vals(&f[1])[1], -29.0);
        assert_eq!(vals(&f[2])[1], -6.0, "maximum of negative values");
        assert!((vals(&f[3])[2] - 6.922186552431729).abs() < 1e-12);
        let params: Vec<i64> = f[..4]
            .iter()
            .map(|f| f.metadata.int("param").unwrap().unwrap())
            .collect();
        assert_eq!(params, vec![228004, 238167, 237167, 239167]);
        assert_eq!(f[0].metadata.int("timespan").unwrap(), Some(24));
        assert_eq!(f[0].metadata.int("step").unwrap(), Some(24));
        assert_eq!(f[4].metadata.int("step").unwrap(), Some(48));
    }

    #[test]
    fn monthly_windows_from_21_july() {
        let mut a = action("        output-frequency: 1m\n        operations: [average]\n        options: {disable-strict-mapping: true}\n");
        let mut out = Vec::new();
        for d in 0..45 {
            a.handle(msg(130, 20200721, 24 * d, None, vec![1.0]), &mut out)
                .unwrap();
        }
        a.handle(Message::flush(FlushKind::LastStep), &mut out)
            .unwrap();
        let f = fields(out);
        let got: Vec<(i64, i64)> = f
            .iter()
            .map(|f| {
                (
                    f.metadata.int("step").unwrap().unwrap(),
                    f.metadata.int("timespan").unwrap().unwrap(),
                )
            })
            .collect();
        // July from the run's start (11 daily samples), August whole; September incomplete.
        assert_eq!(got, vec![(264, 264), (1008, 744)]);
    }

    #[test]
    fn squashing_and_stattype() {
        // Daily means of 2t (228004, timespan 24) averaged over a month: squashed.
        let mut a =
            action("        output-frequency: 1m\n        operations: [average, maximum]\n");
        let mut out = Vec::new();
        for d in 1..=31 {
            a.handle(
                msg(228004, 20251001, 24 * d, Some(24), vec![d as f64]),
                &mut out,
            )
            .unwrap();
        }
        a.handle(Message::flush(FlushKind::LastStep), &mut out)
            .unwrap();
        let f = fields(out);
        assert_eq!(f[0].metadata.int("timespan").unwrap(), Some(744));
        assert!(!f[0].metadata.contains("stattype"));
        assert!((vals(&f[0])[0] - 16.0).abs() < 1e-12);
        assert_eq!(
            f[1].metadata.text("stattype").unwrap().as_deref(),
            Some("momx")
        );
        assert_eq!(f[1].metadata.int("timespan").unwrap(), Some(24));
    }

    #[test]
    fn accumulations_are_summed_per_month() {
        let mut a = action("        output-frequency: 1m\n        operations: [accumulate]\n");
        let mut out = Vec::new();
        for s in 0..=744 {
            let ts = if s == 0 { 0 } else { 1 };
            a.handle(msg(228228, 19961001, s, Some(ts), vec![s as f64]), &mut out)
                .unwrap();
        }
        a.handle(Message::flush(FlushKind::LastStep), &mut out)
            .unwrap();
        let f = fields(out);
        assert_eq!(vals(&f[0]), vec![277140.0]);
        assert_eq!(f[0].metadata.int("timespan").unwrap(), Some(744));
        assert_eq!(f[0].metadata.int("param").unwrap(), Some(228228));
    }

    #[test]
    fn strict_mapping_fails_the_field() {
        let mut a = action("        output-frequency: 1d\n        operations: [accumulate]\n");
        let mut out = Vec::new();
        for s in 0..=24 {
            a.handle(msg(167, 20250101, s, None, vec![1.0]), &mut out)
                .unwrap();
        }
        let e = a
            .handle(msg(167, 20250101, 25, None, vec![1.0]), &mut out)
            .unwrap_err();
        assert!(e.contains("167"), "{e}");
    }
}
