//! What the hammer measured: per phase, operations, fields, bytes, wall time and a latency
//! histogram, merged over processes and printed as a table or JSON.

use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, Context as _, Result};
use hdrhistogram::serialization::{Deserializer, Serializer, V2Serializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// One phase of one process (or, merged, of all).
pub struct Phase {
    pub name: String,
    pub ops: u64,
    pub fields: u64,
    pub bytes: u64,
    pub errors: u64,
    /// Wall-clock bounds (Unix ns), so phases of different processes merge into one span.
    pub start_ns: u128,
    pub end_ns: u128,
    /// Whether fields/s and MiB/s mean something for this phase (not for flush).
    pub throughput: bool,
    /// Per-operation latency, nanoseconds.
    pub latency: Histogram<u64>,
}

fn unix_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

fn histogram() -> Histogram<u64> {
    // 1 ns to 1 hour at 3 significant digits: a few tens of KiB.
    Histogram::new_with_bounds(1, 3_600_000_000_000, 3).expect("constant, valid bounds")
}

impl Phase {
    pub fn new(name: &str, throughput: bool) -> Phase {
        Phase {
            name: name.to_string(),
            ops: 0,
            fields: 0,
            bytes: 0,
            errors: 0,
            start_ns: 0,
            end_ns: 0,
            throughput,
            latency: histogram(),
        }
    }

    pub fn begin(&mut self) {
        self.start_ns = unix_ns();
    }

    pub fn end(&mut self) {
        self.end_ns = unix_ns();
    }

    /// Counts one operation that started at `t0`.
    pub fn record(&mut self, t0: Instant, fields: u64, bytes: u64) -> Duration {
        let d = t0.elapsed();
        self.ops += 1;
        self.fields += fields;
        self.bytes += bytes;
        self.latency
            .saturating_record(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1));
        d
    }

    pub fn wall(&self) -> f64 {
        self.end_ns.saturating_sub(self.start_ns) as f64 / 1e9
    }

    pub fn merge(&mut self, other: &Phase) {
        self.start_ns = if self.ops == 0 && self.start_ns == 0 {
            other.start_ns
        } else {
            self.start_ns.min(other.start_ns)
        };
        self.end_ns = self.end_ns.max(other.end_ns);
        self.ops += other.ops;
        self.fields += other.fields;
        self.bytes += other.bytes;
        self.errors += other.errors;
        // Same bounds on both sides: adding cannot fail.
        let _ = self.latency.add(&other.latency);
    }

    fn to_wire(&self) -> Result<WirePhase> {
        let mut hist = Vec::new();
        V2Serializer::new()
            .serialize(&self.latency, &mut hist)
            .map_err(|e| anyhow!("serialising a latency histogram: {e:?}"))?;
        Ok(WirePhase {
            name: self.name.clone(),
            ops: self.ops,
            fields: self.fields,
            bytes: self.bytes,
            errors: self.errors,
            start_ns: self.start_ns.to_string(),
            end_ns: self.end_ns.to_string(),
            throughput: self.throughput,
            histogram: hist.iter().map(|b| format!("{b:02x}")).collect(),
        })
    }

    fn from_wire(w: WirePhase) -> Result<Phase> {
        let bytes = (0..w.histogram.len() / 2)
            .map(|i| u8::from_str_radix(&w.histogram[2 * i..2 * i + 2], 16))
            .collect::<Result<Vec<u8>, _>>()
            .context("a worker's histogram is not hex")?;
        let latency: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| anyhow!("reading a worker's latency histogram: {e:?}"))?;
        let mut merged = histogram();
        let _ = merged.add(&latency);
        Ok(Phase {
            name: w.name,
            ops: w.ops,
            fields: w.fields,
            bytes: w.bytes,
            errors: w.errors,
            start_ns: w.start_ns.parse().unwrap_or(0),
            end_ns: w.end_ns.parse().unwrap_or(0),
            throughput: w.throughput,
            latency: merged,
        })
    }

    fn percentile_us(&self, q: f64) -> f64 {
        self.latency.value_at_quantile(q) as f64 / 1000.0
    }

    fn json(&self) -> serde_json::Value {
        let wall = self.wall();
        let rate = |n: f64| {
            if self.throughput && wall > 0.0 {
                serde_json::json!(n / wall)
            } else {
                serde_json::Value::Null
            }
        };
        serde_json::json!({
            "name": self.name,
            "ops": self.ops,
            "fields": self.fields,
            "bytes": self.bytes,
            "errors": self.errors,
            "wall_s": wall,
            "fields_per_s": rate(self.fields as f64),
            "mib_per_s": rate(self.bytes as f64 / 1048576.0),
            "latency_us": {
                "p50": self.percentile_us(0.5),
                "p90": self.percentile_us(0.9),
                "p99": self.percentile_us(0.99),
                "max": self.latency.max() as f64 / 1000.0,
                "mean": self.latency.mean() / 1000.0,
            },
        })
    }
}

/// A phase as a worker process hands it to the parent (JSON; the histogram in hdr's V2 form).
#[derive(Serialize, Deserialize)]
struct WirePhase {
    name: String,
    ops: u64,
    fields: u64,
    bytes: u64,
    errors: u64,
    start_ns: String,
    end_ns: String,
    throughput: bool,
    histogram: String,
}

#[derive(Serialize, Deserialize)]
struct WireReport {
    phases: Vec<WirePhase>,
    notes: Vec<String>,
}

/// Everything one process measured, plus remarks (verification failures, versions seen).
#[derive(Default)]
pub struct Report {
    pub phases: Vec<Phase>,
    pub notes: Vec<String>,
}

impl Report {
    pub fn to_json_text(&self) -> Result<String> {
        let wire = WireReport {
            phases: self
                .phases
                .iter()
                .map(Phase::to_wire)
                .collect::<Result<_>>()?,
            notes: self.notes.clone(),
        };
        Ok(serde_json::to_string(&wire)?)
    }

    pub fn from_json_text(text: &str) -> Result<Report> {
        let wire: WireReport = serde_json::from_str(text).context("a worker's report")?;
        Ok(Report {
            phases: wire
                .phases
                .into_iter()
                .map(Phase::from_wire)
                .collect::<Result<_>>()?,
            notes: wire.notes,
        })
    }

    /// Adds another process's phases to the same-named ones here.
    pub fn merge(&mut self, other: Report) {
        for p in other.phases {
            match self.phases.iter_mut().find(|q| q.name == p.name) {
                Some(q) => q.merge(&p),
                None => self.phases.push(p),
            }
        }
        for n in other.notes {
            if !self.notes.contains(&n) {
                self.notes.push(n);
            }
        }
    }

    pub fn errors(&self) -> u64 {
        self.phases.iter().map(|p| p.errors).sum()
    }

    pub fn print_table(&self, title: &str, out: &mut dyn std::io::Write) -> std::io::Result<()> {
        writeln!(out, "{title}")?;
        writeln!(
            out,
            "{:<14} {:>9} {:>9} {:>9} {:>11} {:>9} {:>10} {:>10} {:>10} {:>10} {:>6}",
            "phase",
            "ops",
            "fields",
            "wall s",
            "fields/s",
            "MiB/s",
            "p50",
            "p90",
            "p99",
            "max",
            "errors"
        )?;
        for p in &self.phases {
            let wall = p.wall();
            let (fps, mibs) = if p.throughput && wall > 0.0 {
                (
                    format!("{:.0}", p.fields as f64 / wall),
                    format!("{:.1}", p.bytes as f64 / 1048576.0 / wall),
                )
            } else {
                ("-".into(), "-".into())
            };
            writeln!(
                out,
                "{:<14} {:>9} {:>9} {:>9.3} {:>11} {:>9} {:>10} {:>10} {:>10} {:>10} {:>6}",
                p.name,
                p.ops,
                p.fields,
                wall,
                fps,
                mibs,
                human(p.percentile_us(0.5)),
                human(p.percentile_us(0.9)),
                human(p.percentile_us(0.99)),
                human(p.latency.max() as f64 / 1000.0),
                p.errors
            )?;
        }
        for n in &self.notes {
            writeln!(out, "note: {n}")?;
        }
        Ok(())
    }

    pub fn json(&self, header: serde_json::Value) -> serde_json::Value {
        let mut v = header;
        v["phases"] = serde_json::Value::Array(self.phases.iter().map(Phase::json).collect());
        v["notes"] = serde_json::json!(self.notes);
        v["errors"] = serde_json::json!(self.errors());
        v
    }
}

/// A latency in the unit that keeps it short.
fn human(us: f64) -> String {
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 1_000_000.0 {
        format!("{:.2} ms", us / 1000.0)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reports_survive_the_trip_between_processes_and_merge() {
        let mut a = Report::default();
        let mut p = Phase::new("archive", true);
        p.begin();
        for _ in 0..100 {
            let t0 = Instant::now();
            p.record(t0, 1, 2048);
        }
        p.end();
        a.phases.push(p);
        a.notes.push("x".into());
        let text = a.to_json_text().unwrap();
        let b = Report::from_json_text(&text).unwrap();
        assert_eq!(b.phases[0].ops, 100);
        assert_eq!(b.phases[0].latency.len(), 100);
        let mut merged = Report::from_json_text(&text).unwrap();
        merged.merge(b);
        assert_eq!(merged.phases.len(), 1);
        assert_eq!(merged.phases[0].ops, 200);
        assert_eq!(merged.phases[0].bytes, 200 * 2048);
        assert_eq!(merged.phases[0].latency.len(), 200);
        assert_eq!(merged.notes, vec!["x".to_string()]);
    }

    #[test]
    fn latencies_print_in_a_readable_unit() {
        assert_eq!(human(12.0), "12 µs");
        assert_eq!(human(1500.0), "1.50 ms");
        assert_eq!(human(2_500_000.0), "2.50 s");
    }
}
