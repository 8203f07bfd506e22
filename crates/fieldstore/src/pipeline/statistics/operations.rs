//! The running statistics both statistics actions share. State is plain data (serde), so an
//! open window can be saved with a stream position and resumed.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum OpKind {
    Average,
    Minimum,
    Maximum,
    Accumulate,
    Instant,
    Difference,
    InverseDifference,
    DeAccumulate,
    FluxAverage,
    FixedWindowFluxAverage,
    Stddev,
}

impl OpKind {
    pub fn parse(name: &str, mtg2: bool) -> Option<OpKind> {
        Some(match name {
            "average" => OpKind::Average,
            "minimum" => OpKind::Minimum,
            "maximum" => OpKind::Maximum,
            "accumulate" => OpKind::Accumulate,
            "instant" => OpKind::Instant,
            "difference" => OpKind::Difference,
            "inverse-difference" => OpKind::InverseDifference,
            "stddev" if mtg2 => OpKind::Stddev,
            "de-accumulate" if !mtg2 => OpKind::DeAccumulate,
            "flux-average" if !mtg2 => OpKind::FluxAverage,
            "fixed-window-flux-average" if !mtg2 => OpKind::FixedWindowFluxAverage,
            _ => return None,
        })
    }

    pub fn names(mtg2: bool) -> &'static str {
        if mtg2 {
            "average, minimum, maximum, accumulate, instant, difference, inverse-difference, stddev"
        } else {
            "average, minimum, maximum, accumulate, instant, difference, inverse-difference, \
             de-accumulate, flux-average, fixed-window-flux-average"
        }
    }

    /// The name as the config says it.
    pub fn name(self) -> &'static str {
        match self {
            OpKind::Average => "average",
            OpKind::Minimum => "minimum",
            OpKind::Maximum => "maximum",
            OpKind::Accumulate => "accumulate",
            OpKind::Instant => "instant",
            OpKind::Difference => "difference",
            OpKind::InverseDifference => "inverse-difference",
            OpKind::DeAccumulate => "de-accumulate",
            OpKind::FluxAverage => "flux-average",
            OpKind::FixedWindowFluxAverage => "fixed-window-flux-average",
            OpKind::Stddev => "stddev",
        }
    }

    /// The `operation` metadata of the output (MultIO renames the flux ops and de-accumulate).
    pub fn output_name(self) -> &'static str {
        match self {
            OpKind::DeAccumulate => "accumulate",
            OpKind::FluxAverage | OpKind::FixedWindowFluxAverage => "average",
            other => other.name(),
        }
    }

    /// GRIB2 code table 4.10: what the param mapping tables are keyed by.
    pub fn type_of_statistical_processing(self) -> Option<i64> {
        match self {
            OpKind::Average | OpKind::FluxAverage | OpKind::FixedWindowFluxAverage => Some(0),
            OpKind::Accumulate | OpKind::DeAccumulate => Some(1),
            OpKind::Maximum => Some(2),
            OpKind::Minimum => Some(3),
            OpKind::Difference => Some(4),
            OpKind::Stddev => Some(6),
            OpKind::InverseDifference => Some(8),
            OpKind::Instant => None,
        }
    }

    /// Whether the op reads a baseline (the value at the window's start).
    fn uses_baseline(self) -> bool {
        matches!(
            self,
            OpKind::Difference
                | OpKind::InverseDifference
                | OpKind::DeAccumulate
                | OpKind::FixedWindowFluxAverage
        )
    }
}

/// One operation's running state over one window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpState {
    pub kind: OpKind,
    values: Vec<f64>,
    /// Welford's sum of squared deviations (stddev only).
    m2: Vec<f64>,
    /// The value at the window's start (difference-like ops only).
    baseline: Vec<f64>,
}

/// What the window knows about the sample being added.
pub struct Sample<'a> {
    pub values: &'a [f64],
    /// The missing value, where the field has a bitmap.
    pub missing: Option<f64>,
}

impl OpState {
    pub fn new(kind: OpKind, size: usize) -> OpState {
        OpState {
            kind,
            values: vec![0.0; size],
            m2: if kind == OpKind::Stddev {
                vec![0.0; size]
            } else {
                Vec::new()
            },
            baseline: if kind.uses_baseline() {
                vec![0.0; size]
            } else {
                Vec::new()
            },
        }
    }

    pub fn len(&self) -> usize {
        self.values.len()
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// Sets the baseline (a step-0 field, or the boundary value at a window's roll).
    pub fn set_baseline(&mut self, values: &[f64]) {
        if self.kind.uses_baseline() {
            self.baseline.clear();
            self.baseline.extend_from_slice(values);
        }
    }

    /// At a window's roll: difference-like ops start from the last value (the boundary), or
    /// from 0 where the model's accumulation restarts there.
    pub fn roll(&mut self, reset: bool) {
        if self.kind.uses_baseline() {
            if reset {
                self.baseline.iter_mut().for_each(|b| *b = 0.0);
            } else {
                self.baseline.clone_from(&self.values);
            }
        }
        self.values.iter_mut().for_each(|v| *v = 0.0);
        self.m2.iter_mut().for_each(|v| *v = 0.0);
    }

    /// Adds point `i`'s `n`-th valid sample `x`.
    pub fn update_point(&mut self, i: usize, x: f64, n: u64) {
        let v = &mut self.values[i];
        match self.kind {
            OpKind::Average => {
                // MultIO's form (v·(n−1)/n + x/n), so results agree to the last bits.
                let c2 = 1.0 / n as f64;
                let c1 = (n as f64 - 1.0) * c2;
                *v = *v * c1 + x * c2;
            }
            // The first sample starts both: MultIO's maximum starts from DBL_MIN, so a point
            // whose values are all negative came out as 2.2e-308.
            OpKind::Minimum => *v = if n == 1 { x } else { v.min(x) },
            OpKind::Maximum => *v = if n == 1 { x } else { v.max(x) },
            OpKind::Accumulate => *v += x,
            OpKind::Instant
            | OpKind::Difference
            | OpKind::InverseDifference
            | OpKind::DeAccumulate
            | OpKind::FluxAverage
            | OpKind::FixedWindowFluxAverage => *v = x,
            OpKind::Stddev => {
                let delta = x - *v;
                *v += delta / n as f64;
                self.m2[i] += delta * (x - *v);
            }
        }
    }

    /// Adds a sample to every point, each point's `n`-th: `update_point` over the field.
    fn update_all(&mut self, xs: &[f64], n: u64) {
        match self.kind {
            OpKind::Average => {
                let c2 = 1.0 / n as f64;
                let c1 = (n as f64 - 1.0) * c2;
                for (v, &x) in self.values.iter_mut().zip(xs) {
                    *v = *v * c1 + x * c2;
                }
            }
            OpKind::Minimum if n > 1 => {
                for (v, &x) in self.values.iter_mut().zip(xs) {
                    *v = v.min(x);
                }
            }
            OpKind::Maximum if n > 1 => {
                for (v, &x) in self.values.iter_mut().zip(xs) {
                    *v = v.max(x);
                }
            }
            OpKind::Accumulate => {
                for (v, &x) in self.values.iter_mut().zip(xs) {
                    *v += x;
                }
            }
            _ => {
                for (i, &x) in xs.iter().enumerate() {
                    self.update_point(i, x, n);
                }
            }
        }
    }

    /// The statistic of point `i` after `n` samples; `seconds` is the sampled span (for the
    /// flux averages).
    pub fn result(&self, i: usize, n: u64, seconds: f64) -> f64 {
        let v = self.values[i];
        match self.kind {
            OpKind::Difference | OpKind::DeAccumulate => v - self.baseline[i],
            OpKind::InverseDifference => self.baseline[i] - v,
            OpKind::FluxAverage => v / seconds,
            OpKind::FixedWindowFluxAverage => (v - self.baseline[i]) / seconds,
            OpKind::Stddev => {
                if n == 0 {
                    0.0
                } else {
                    (self.m2[i] / n as f64).sqrt()
                }
            }
            _ => v,
        }
    }
}

/// The operations of one window and the per-point bookkeeping of missing values.
/// Whether a sample has a missing point (the missing value, or NaN).
fn any_missing(xs: &[f64], missing: Option<f64>) -> bool {
    // Chunks without an early exit inside, so the test is vectorised.
    match missing {
        None => xs
            .chunks(256)
            .any(|c| c.iter().fold(false, |a, x| a | x.is_nan())),
        Some(m) => xs
            .chunks(256)
            .any(|c| c.iter().fold(false, |a, &x| a | (x == m) | x.is_nan())),
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OpSet {
    pub ops: Vec<OpState>,
    /// Samples added in this window.
    pub count: u64,
    /// Valid samples per point (where the field has missing values).
    counts: Vec<u64>,
    /// Samples every point had that `counts` does not hold yet (each point's count is
    /// `counts[i] + counts_lag`): the whole-field path counts them once, not per point.
    #[serde(default)]
    counts_lag: u64,
    /// Points that had a missing sample in this window (sticky without a threshold).
    missing: Vec<bool>,
    /// The missing value of the last sample that had one.
    missing_value: Option<f64>,
    /// `value-count-threshold` (> 0: missing samples are skipped, points with fewer valid
    /// samples are emitted missing).
    threshold: Option<u64>,
}

impl OpSet {
    pub fn new(kinds: &[OpKind], size: usize, threshold: Option<u64>) -> OpSet {
        OpSet {
            ops: kinds.iter().map(|k| OpState::new(*k, size)).collect(),
            count: 0,
            counts: vec![0; size],
            counts_lag: 0,
            missing: vec![false; size],
            missing_value: None,
            threshold,
        }
    }

    pub fn size(&self) -> usize {
        self.counts.len()
    }

    pub fn set_baseline(&mut self, values: &[f64]) {
        self.ops.iter_mut().for_each(|o| o.set_baseline(values));
    }

    /// Adds one sample; the caller has checked its size.
    pub fn update(&mut self, s: &Sample<'_>) {
        self.count += 1;
        if s.missing.is_some() {
            self.missing_value = s.missing;
        }
        // Every point has had every sample of the window and has one now: each point's count
        // is the window's, and each operation runs over the whole field with that count (the
        // same arithmetic as point by point, in loops the compiler vectorises).
        if self.threshold.is_none()
            && s.values.len() == self.counts.len()
            && !self
                .missing
                .chunks(1024)
                .any(|c| c.iter().fold(false, |a, &m| a | m))
            && !any_missing(s.values, s.missing)
        {
            self.counts_lag += 1;
            let n = self.count;
            for op in &mut self.ops {
                op.update_all(s.values, n);
            }
            return;
        }
        if self.counts_lag > 0 {
            let lag = std::mem::take(&mut self.counts_lag);
            self.counts.iter_mut().for_each(|c| *c += lag);
        }
        for (i, &x) in s.values.iter().enumerate() {
            let is_missing = s.missing == Some(x) || x.is_nan();
            if is_missing {
                self.missing[i] = true;
                continue;
            }
            if self.missing[i] && self.threshold.is_none() {
                continue;
            }
            self.counts[i] += 1;
            let n = self.counts[i];
            for op in &mut self.ops {
                op.update_point(i, x, n);
            }
        }
    }

    /// Each operation's values; points without a valid result get the missing value (NaN when
    /// the field named none).
    pub fn results(&self, seconds: f64) -> Vec<Vec<f64>> {
        let mv = self.missing_value.unwrap_or(f64::NAN);
        self.ops
            .iter()
            .map(|op| {
                (0..self.size())
                    .map(|i| {
                        let n = self.counts[i] + self.counts_lag;
                        let bad = match self.threshold {
                            Some(t) => n < t,
                            None => self.missing[i] || n == 0,
                        };
                        if bad {
                            mv
                        } else {
                            op.result(i, n, seconds)
                        }
                    })
                    .collect()
            })
            .collect()
    }

    /// Starts the next window.
    pub fn roll(&mut self, reset: bool) {
        self.count = 0;
        self.counts.iter_mut().for_each(|c| *c = 0);
        self.counts_lag = 0;
        self.missing.iter_mut().for_each(|m| *m = false);
        self.ops.iter_mut().for_each(|o| o.roll(reset));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(kind: OpKind, samples: &[f64]) -> f64 {
        let mut s = OpSet::new(&[kind], 1, None);
        for x in samples {
            s.update(&Sample {
                values: &[*x],
                missing: None,
            });
        }
        s.results(samples.len() as f64 * 3600.0)[0][0]
    }

    #[test]
    fn operations() {
        let xs = [1.0, 4.0, -2.0, 5.0];
        assert_eq!(run(OpKind::Average, &xs), 2.0);
        assert_eq!(run(OpKind::Minimum, &xs), -2.0);
        assert_eq!(run(OpKind::Maximum, &xs), 5.0);
        assert_eq!(run(OpKind::Accumulate, &xs), 8.0);
        assert_eq!(run(OpKind::Instant, &xs), 5.0);
        assert_eq!(run(OpKind::Difference, &xs), 5.0);
        assert_eq!(run(OpKind::InverseDifference, &xs), -5.0);
        let sd = run(OpKind::Stddev, &xs);
        assert!((sd - 2.7386127875258306).abs() < 1e-12, "{sd}");
    }

    /// MultIO's legacy maximum starts from DBL_MIN and returns 2.2e-308 here.
    /// Whole-field samples (counted once, `counts_lag`) then a sample with a missing point:
    /// the same results as point by point, also across a save and restore of the state.
    #[test]
    fn whole_field_samples_then_a_missing_point() {
        let mv = 9999.0;
        let kinds = [OpKind::Average, OpKind::Minimum, OpKind::Stddev];
        let samples = [[1.0, 2.0], [3.0, 4.0], [5.0, mv], [7.0, 8.0]];
        let mut s = OpSet::new(&kinds, 2, None);
        for (k, v) in samples.iter().enumerate() {
            s.update(&Sample {
                values: v,
                missing: Some(mv),
            });
            if k == 1 {
                assert_eq!(s.counts_lag, 2);
                let text = serde_json::to_string(&s).unwrap();
                s = serde_json::from_str(&text).unwrap();
            }
        }
        let r = s.results(1.0);
        assert_eq!(r[0], vec![4.0, mv]);
        assert_eq!(r[1], vec![1.0, mv]);
        assert!((r[2][0] - 5.0f64.sqrt()).abs() < 1e-12, "{}", r[2][0]);
        // complete fields only: every count is the window's
        let mut s = OpSet::new(&kinds, 2, None);
        for v in [[1.0, 2.0], [3.0, 4.0]] {
            s.update(&Sample {
                values: &v,
                missing: None,
            });
        }
        assert_eq!(s.results(1.0)[0], vec![2.0, 3.0]);
        s.roll(false);
        assert_eq!(s.counts_lag, 0);
        s.update(&Sample {
            values: &[5.0, 6.0],
            missing: None,
        });
        assert_eq!(s.results(1.0)[0], vec![5.0, 6.0]);
    }

    #[test]
    fn maximum_of_negative_values() {
        assert_eq!(run(OpKind::Maximum, &[-6.0, -29.0, -7.5]), -6.0);
    }

    #[test]
    fn stddev_of_a_ramp_is_the_population_one() {
        let ramp: Vec<f64> = (1..=24).map(f64::from).collect();
        assert!((run(OpKind::Stddev, &ramp) - 6.922186552431729).abs() < 1e-12);
    }

    #[test]
    fn missing_values() {
        let mv = 9999.0;
        let mut s = OpSet::new(&[OpKind::Average], 2, None);
        for v in [[1.0, mv], [3.0, 2.0]] {
            s.update(&Sample {
                values: &v,
                missing: Some(mv),
            });
        }
        assert_eq!(
            s.results(1.0)[0],
            vec![2.0, mv],
            "a missing sample makes the point missing"
        );
        let mut s = OpSet::new(&[OpKind::Average], 2, Some(2));
        for v in [[1.0, mv], [3.0, 2.0], [5.0, 4.0]] {
            s.update(&Sample {
                values: &v,
                missing: Some(mv),
            });
        }
        assert_eq!(
            s.results(1.0)[0],
            vec![3.0, 3.0],
            "skipped with a threshold"
        );
    }

    /// MultIO counts a valid sample once per operation under a threshold (258.67 beside a
    /// minimum instead of 262.5); the counts here are the window's, once per sample.
    #[test]
    fn thresholded_mean_beside_other_operations() {
        let mut s = OpSet::new(&[OpKind::Average, OpKind::Minimum], 1, Some(20));
        for x in 1..=24 {
            s.update(&Sample {
                values: &[250.0 + f64::from(x)],
                missing: Some(9999.0),
            });
        }
        let r = s.results(1.0);
        assert!((r[0][0] - 262.5).abs() < 1e-9, "{}", r[0][0]);
        assert_eq!(r[1][0], 251.0);
    }

    #[test]
    fn baselines_roll() {
        let mut s = OpSet::new(&[OpKind::Difference], 1, None);
        s.set_baseline(&[10.0]);
        s.update(&Sample {
            values: &[15.0],
            missing: None,
        });
        assert_eq!(s.results(1.0)[0][0], 5.0);
        s.roll(false);
        s.update(&Sample {
            values: &[22.0],
            missing: None,
        });
        assert_eq!(s.results(1.0)[0][0], 7.0);
        s.roll(true);
        s.update(&Sample {
            values: &[3.0],
            missing: None,
        });
        assert_eq!(s.results(1.0)[0][0], 3.0);
    }
}
