//! `fieldstore hammer`: the load generator. Imitates a forecast's output (members × steps × levels
//! × params) from one or many processes, in write, read and list modes, or one of the four
//! field-I/O access patterns of the DAOS assessment; reports fields/s, MiB/s and per-operation
//! latency percentiles. Works against any config: local, remote, distributed.

mod report;
mod workload;

use std::io::{IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context as _, Result};
use clap::{Args, ValueEnum};
use fieldstore::api::{Fdb, ListOptions};
use fieldstore::model::types::Context;
use indicatif::{ProgressBar, ProgressStyle};

use crate::context::Session;
use report::{Phase, Report};
use workload::{key_crc, FieldId, Payloads, Shape, Stamp};

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Mode {
    /// Archive every field, flushing as a forecast does (after each --flush-every steps).
    Write,
    /// Retrieve every field one request at a time, as post-processing does.
    Read,
    /// List each step's fields.
    List,
}

/// The access patterns of the DAOS field-I/O assessment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Pattern {
    /// Every process archives (and flushes) the same key once: contention on one field.
    #[value(name = "0A")]
    SameKey,
    /// Every process archives (and flushes) its own key once.
    #[value(name = "0B")]
    OwnKey,
    /// Every process writes its share, all wait at a barrier, then each reads its share back.
    #[value(name = "1")]
    WriteThenRead,
    /// Half the processes rewrite fields while the other half read those same fields.
    #[value(name = "2B")]
    ReadWhileWrite,
}

#[derive(Args, Debug, Clone)]
pub struct HammerArgs {
    #[arg(long, value_enum, default_value = "write")]
    mode: Mode,
    /// Run a DAOS access pattern (0A, 0B, 1, 2B) instead of --mode.
    #[arg(long, value_enum)]
    pattern: Option<Pattern>,
    /// Ensemble members (0: a deterministic forecast, stream oper).
    #[arg(long, alias = "nensembles", default_value_t = 0)]
    members: u32,
    /// The first member's number.
    #[arg(long, alias = "number", default_value_t = 1)]
    first_member: u32,
    /// Forecast steps (0, 1, 2, ... times --step-interval hours).
    #[arg(long, alias = "nsteps", default_value_t = 10)]
    steps: u32,
    /// Hours between steps.
    #[arg(long, default_value_t = 1)]
    step_interval: u32,
    /// Levels: the first N of 37 pressure levels from 1000 hPa, or model levels 1..N (ml).
    #[arg(long, alias = "nlevels", default_value_t = 10)]
    levels: u32,
    /// Parameters: the first N of 16 real ones (t, u, v, q, ...; surface: 2t, 10u, ...).
    #[arg(long, alias = "nparams", default_value_t = 10)]
    params: u32,
    /// Pressure levels, model levels or surface (one level).
    #[arg(long, default_value = "pl", value_parser = ["pl", "ml", "sfc"])]
    levtype: String,
    /// Grid points per field (about 2 bytes each: 1000 ≈ 2 KiB, 5000000 ≈ 10 MiB).
    #[arg(long, default_value_t = 1000)]
    points: usize,
    /// Processes sharing the work (each writes or reads its share of every step).
    #[arg(long, default_value_t = 1)]
    processes: usize,
    /// Flush after every N steps (0: once, at the end).
    #[arg(long, default_value_t = 1)]
    flush_every: u32,
    /// How many times patterns 0A/0B repeat, and 2B's writers rewrite their fields.
    #[arg(long, default_value_t = 1)]
    iterations: u32,
    #[arg(long, default_value = "od")]
    class: String,
    /// Experiment version (4 characters): keeps hammer data apart from real data.
    #[arg(long, default_value = "hmmr")]
    expver: String,
    /// Forecast date (default: today).
    #[arg(long)]
    date: Option<String>,
    #[arg(long, default_value = "1200")]
    time: String,
    /// Read mode: check every field read back is whole and is the field asked for.
    #[arg(long)]
    verify: bool,
    /// One JSON object instead of the table.
    #[arg(long)]
    json: bool,
    #[arg(long, hide = true)]
    worker_index: Option<usize>,
    #[arg(long, hide = true)]
    worker_dir: Option<PathBuf>,
}

impl HammerArgs {
    fn shape(&self) -> Shape {
        Shape {
            class: self.class.clone(),
            expver: self.expver.clone(),
            date: self
                .date
                .clone()
                .unwrap_or_else(|| Context::default().today.format("%Y%m%d").to_string()),
            time: self.time.clone(),
            members: self.members,
            first_member: self.first_member,
            steps: self.steps,
            step_interval: self.step_interval,
            levels: if self.levtype == "sfc" {
                1
            } else {
                self.levels
            },
            levtype: self.levtype.clone(),
            params: self.params,
            points: self.points,
        }
    }

    fn what(&self) -> String {
        match self.pattern {
            Some(p) => format!(
                "pattern {}",
                p.to_possible_value()
                    .map_or("?".into(), |v| v.get_name().to_string())
            ),
            None => format!("{:?} mode", self.mode).to_lowercase(),
        }
    }
}

pub fn run(args: HammerArgs, session: &Session) -> Result<()> {
    let shape = args.shape();
    shape.check()?;
    let processes = args.processes.max(1);
    if args.pattern == Some(Pattern::ReadWhileWrite) && processes < 2 {
        bail!("pattern 2B needs at least 2 processes (half write, half read): add --processes 2");
    }
    if args.pattern == Some(Pattern::OwnKey) && shape.total() < processes as u64 {
        bail!(
            "pattern 0B needs a field per process: {} fields for {processes} processes",
            shape.total()
        );
    }
    if let Some(index) = args.worker_index {
        let dir = args
            .worker_dir
            .clone()
            .context("--worker-index needs --worker-dir")?;
        let report = Worker::new(&args, &shape, session, index, processes, &dir)?.run()?;
        let path = dir.join(format!("report-{index}.json"));
        std::fs::write(&path, report.to_json_text()?)
            .with_context(|| format!("writing {}", path.display()))?;
        return Ok(());
    }

    let dir = scratch_dir()?;
    let result = if processes == 1 {
        Worker::new(&args, &shape, session, 0, 1, &dir.0).and_then(|w| w.run())
    } else {
        run_processes(&args, processes, &dir.0)
    };
    let report = result?;
    let fdb_name = session.fdb()?.name();
    let source = session
        .config()
        .map(|c| c.source.to_string())
        .unwrap_or_default();
    let field_bytes = Payloads::new(&shape)?.len(&shape.field(0, 0));
    let title = format!(
        "fieldstore hammer: {}, {processes} process{}, {} ({source})\n\
         forecast: {} members x {} steps x {} levels ({}) x {} params = {} fields of {} bytes",
        args.what(),
        if processes == 1 { "" } else { "es" },
        fdb_name,
        shape.members,
        shape.steps,
        shape.levels,
        shape.levtype,
        shape.params,
        shape.total(),
        field_bytes,
    );
    if args.json {
        let header = serde_json::json!({
            "what": args.what(),
            "processes": processes,
            "store": fdb_name,
            "config": source,
            "members": shape.members,
            "steps": shape.steps,
            "levels": shape.levels,
            "levtype": shape.levtype,
            "params": shape.params,
            "fields": shape.total(),
            "field_bytes": field_bytes,
        });
        let mut out = std::io::stdout().lock();
        serde_json::to_writer_pretty(&mut out, &report.json(header))?;
        writeln!(out)?;
    } else {
        report.print_table(&title, &mut std::io::stdout().lock())?;
    }
    if report.errors() > 0 {
        bail!(
            "{} operations failed or read back wrong data (see the notes above)",
            report.errors()
        );
    }
    Ok(())
}

/// A private directory for barriers and worker reports, removed when dropped.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn scratch_dir() -> Result<Scratch> {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    let dir =
        std::env::temp_dir().join(format!("fieldstore-hammer-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(Scratch(dir))
}

/// Starts `n` copies of this command as workers, waits for all, merges their reports. If one
/// fails the others are stopped, since they would wait for it at the next barrier.
fn run_processes(args: &HammerArgs, n: usize, dir: &Path) -> Result<Report> {
    let (exe, before) = crate::program().context("finding this program to start workers")?;
    let argv = crate::arguments();
    let mut children: Vec<Option<Child>> = Vec::new();
    for i in 0..n {
        let child = Command::new(&exe)
            .args(&before)
            .args(&argv)
            .arg("--worker-index")
            .arg(i.to_string())
            .arg("--worker-dir")
            .arg(dir)
            .stdout(Stdio::null())
            .stdin(Stdio::null())
            .spawn()
            .with_context(|| format!("starting hammer process {i}"))?;
        children.push(Some(child));
    }
    let bar = if std::io::stderr().is_terminal() && !args.json {
        let b = ProgressBar::new_spinner();
        b.set_message(format!("{n} processes running"));
        b.enable_steady_tick(Duration::from_millis(200));
        b
    } else {
        ProgressBar::hidden()
    };
    let mut failure = None;
    while children.iter().any(Option::is_some) {
        for (i, slot) in children.iter_mut().enumerate() {
            let Some(child) = slot else { continue };
            if let Some(status) = child.try_wait()? {
                *slot = None;
                if !status.success() && failure.is_none() {
                    failure = Some(format!("hammer process {i} failed ({status})"));
                }
            }
        }
        if failure.is_some() {
            for child in children.iter_mut().flatten() {
                let _ = child.kill();
                let _ = child.wait();
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    bar.finish_and_clear();
    if let Some(f) = failure {
        bail!("{f}: its error is above; the other processes were stopped");
    }
    let mut merged = Report::default();
    for i in 0..n {
        let path = dir.join(format!("report-{i}.json"));
        let text = std::fs::read_to_string(&path)
            .with_context(|| format!("hammer process {i} left no report ({})", path.display()))?;
        merged.merge(Report::from_json_text(&text)?);
    }
    Ok(merged)
}

/// Waits until all `of` processes reached the barrier `name`.
fn barrier(dir: &Path, name: &str, index: usize, of: usize) -> Result<()> {
    if of <= 1 {
        return Ok(());
    }
    let mine = dir.join(format!("{name}.{index}"));
    std::fs::write(&mine, b"").with_context(|| format!("writing {}", mine.display()))?;
    let deadline = Instant::now() + Duration::from_secs(1800);
    loop {
        let arrived = (0..of)
            .filter(|i| dir.join(format!("{name}.{i}")).exists())
            .count();
        if arrived == of {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("waited 30 minutes at barrier '{name}' for the other hammer processes");
        }
        std::thread::sleep(Duration::from_micros(500));
    }
}

struct Worker<'a> {
    args: &'a HammerArgs,
    shape: &'a Shape,
    fdb: &'a dyn Fdb,
    payloads: Payloads,
    index: usize,
    of: usize,
    dir: &'a Path,
    bar: ProgressBar,
}

impl<'a> Worker<'a> {
    fn new(
        args: &'a HammerArgs,
        shape: &'a Shape,
        session: &'a Session,
        index: usize,
        of: usize,
        dir: &'a Path,
    ) -> Result<Worker<'a>> {
        let bar = if of == 1 && std::io::stderr().is_terminal() && !args.json {
            let b = ProgressBar::new(0);
            b.set_style(
                ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {per_sec} eta {eta}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            b
        } else {
            ProgressBar::hidden()
        };
        Ok(Worker {
            args,
            shape,
            fdb: session.fdb()?,
            payloads: Payloads::new(shape)?,
            index,
            of,
            dir,
            bar,
        })
    }

    fn run(&self) -> Result<Report> {
        let mut report = Report::default();
        // Everyone starts together, after opening the store and making templates.
        barrier(self.dir, "start", self.index, self.of)?;
        match self.args.pattern {
            None => match self.args.mode {
                Mode::Write => self.write(&mut report, self.index, self.of, 0)?,
                Mode::Read => {
                    let fields = self.my_fields(self.index, self.of);
                    report
                        .phases
                        .push(self.read(&fields, &mut report.notes, |_| Ok(()))?);
                }
                Mode::List => self.list(&mut report)?,
            },
            Some(Pattern::SameKey) => self.single_key(&mut report, self.shape.field(0, 0))?,
            Some(Pattern::OwnKey) => {
                let f = self
                    .shape
                    .all()
                    .nth(self.index)
                    .context("no field for this process")?;
                self.single_key(&mut report, f)?;
            }
            Some(Pattern::WriteThenRead) => {
                self.write(&mut report, self.index, self.of, 0)?;
                barrier(self.dir, "written", self.index, self.of)?;
                let fields = self.my_fields(self.index, self.of);
                let me = self.index as u32;
                let phase = self.read(&fields, &mut report.notes, |s| {
                    if s.writer == me && s.version == 0 {
                        Ok(())
                    } else {
                        Err(format!("expected my own copy, got {s:?}"))
                    }
                })?;
                report.phases.push(phase);
            }
            Some(Pattern::ReadWhileWrite) => self.read_while_write(&mut report)?,
        }
        self.bar.finish_and_clear();
        Ok(report)
    }

    fn my_fields(&self, index: usize, of: usize) -> Vec<FieldId> {
        (0..self.shape.steps)
            .flat_map(|s| self.shape.share(s, index, of))
            .collect()
    }

    fn stamp(&self, f: &FieldId, version: u64) -> Stamp {
        Stamp {
            key_crc: key_crc(self.shape, f),
            writer: self.index as u32,
            version,
        }
    }

    /// Archives share `index` of `of` of every step, flushing every --flush-every steps.
    fn write(&self, report: &mut Report, index: usize, of: usize, version: u64) -> Result<()> {
        let mut archive = Phase::new("archive", true);
        let mut flush = Phase::new("flush", false);
        let mut buf = Vec::new();
        let every = self.args.flush_every;
        self.bar
            .set_length(self.shape.per_step() * u64::from(self.shape.steps) / of as u64);
        self.bar.set_message("write");
        archive.begin();
        flush.begin();
        for step in 0..self.shape.steps {
            for f in self.shape.share(step, index, of) {
                let key = self.shape.key(&f);
                self.payloads.fill(&f, self.stamp(&f, version), &mut buf)?;
                let t0 = Instant::now();
                // The message was made with these keys: like an I/O server, hand both over
                // rather than have the store decode the header again.
                self.fdb
                    .archive_grib(&key, &buf)
                    .with_context(|| format!("archiving {key}"))?;
                archive.record(t0, 1, buf.len() as u64);
                self.bar.inc(1);
            }
            let last = step + 1 == self.shape.steps;
            if last || (every > 0 && (step + 1) % every == 0) {
                let t0 = Instant::now();
                self.fdb
                    .flush()
                    .with_context(|| format!("flushing after step {step}"))?;
                flush.record(t0, 0, 0);
            }
        }
        archive.end();
        flush.end();
        merge_phase(report, archive);
        merge_phase(report, flush);
        Ok(())
    }

    /// Retrieves each field with its own request; `accept` judges the stamp read back.
    fn read(
        &self,
        fields: &[FieldId],
        notes: &mut Vec<String>,
        accept: impl Fn(&Stamp) -> std::result::Result<(), String>,
    ) -> Result<Phase> {
        let mut phase = Phase::new("retrieve", true);
        let mut buf = Vec::new();
        self.bar.set_length(fields.len() as u64);
        self.bar.set_position(0);
        self.bar.set_message("read");
        let verify = self.args.verify || self.args.pattern.is_some();
        phase.begin();
        for f in fields {
            let req = self.shape.request(f)?;
            buf.clear();
            let t0 = Instant::now();
            let got = self
                .fdb
                .retrieve(&req)
                .map_err(anyhow::Error::from)
                .and_then(|mut r| Ok(r.read_to_end(&mut buf)?));
            phase.record(t0, 1, buf.len() as u64);
            self.bar.inc(1);
            let problem = match got {
                Err(e) => Some(format!("{e:#}")),
                Ok(_) if buf.is_empty() => Some("not found".into()),
                Ok(_) if !verify => None,
                Ok(_) => match self.payloads.check(f, &buf) {
                    Err(e) => Some(e),
                    Ok(s) if s.key_crc != key_crc(self.shape, f) => {
                        Some("holds another field's data".into())
                    }
                    Ok(s) => accept(&s).err(),
                },
            };
            if let Some(p) = problem {
                phase.errors += 1;
                if phase.errors <= 3 {
                    notes.push(format!("retrieve {}: {p}", self.shape.key_text(f)));
                }
            }
        }
        phase.end();
        Ok(phase)
    }

    /// Lists steps index, index+of, ...: each a request for all of a step's fields.
    fn list(&self, report: &mut Report) -> Result<()> {
        let mut phase = Phase::new("list", true);
        let steps: Vec<u32> = (0..self.shape.steps)
            .filter(|s| *s as usize % self.of == self.index)
            .collect();
        self.bar.set_length(steps.len() as u64);
        self.bar.set_message("list");
        phase.begin();
        for step in steps {
            let req = self.shape.step_request(step)?;
            let t0 = Instant::now();
            let mut n = 0u64;
            let mut failed = None;
            for el in self.fdb.list(&req, ListOptions::default())? {
                match el {
                    Ok(_) => n += 1,
                    Err(e) => failed = Some(e.to_string()),
                }
            }
            phase.record(t0, n, 0);
            self.bar.inc(1);
            let expected = self.shape.per_step();
            let problem = failed.or_else(|| {
                (n != expected).then(|| format!("{n} fields listed, {expected} expected"))
            });
            if let Some(p) = problem {
                phase.errors += 1;
                if phase.errors <= 3 {
                    report.notes.push(format!("list of step {step}: {p}"));
                }
            }
        }
        phase.end();
        report.phases.push(phase);
        Ok(())
    }

    /// Patterns 0A and 0B: archive + flush of one field, timed together, --iterations times;
    /// then every process reads the field back.
    fn single_key(&self, report: &mut Report, f: FieldId) -> Result<()> {
        let mut phase = Phase::new("archive+flush", true);
        let key = self.shape.key(&f);
        let mut buf = Vec::new();
        phase.begin();
        for it in 0..self.args.iterations {
            self.payloads
                .fill(&f, self.stamp(&f, u64::from(it)), &mut buf)?;
            let t0 = Instant::now();
            self.fdb
                .archive_grib(&key, &buf)
                .with_context(|| format!("archiving {key}"))?;
            self.fdb.flush().context("flushing")?;
            phase.record(t0, 1, buf.len() as u64);
        }
        phase.end();
        report.phases.push(phase);
        barrier(self.dir, "written", self.index, self.of)?;
        let (me, last) = (self.index as u32, u64::from(self.args.iterations) - 1);
        let same_key = self.args.pattern == Some(Pattern::SameKey);
        let of = self.of as u32;
        let phase = self.read(&[f], &mut report.notes, |s| {
            // 0A: the last copy of whichever process flushed last; 0B: our own last copy.
            let writer_ok = if same_key {
                s.writer < of
            } else {
                s.writer == me
            };
            if writer_ok && s.version == last {
                Ok(())
            } else {
                Err(format!("unexpected copy {s:?}"))
            }
        })?;
        report.phases.push(phase);
        Ok(())
    }

    /// Pattern 2B: the first half of the processes write (version 0 first, untimed apart), then
    /// rewrite their fields --iterations times; the second half read the same fields over and
    /// over until the writers are done. Every read must be a whole copy of the right field.
    fn read_while_write(&self, report: &mut Report) -> Result<()> {
        let writers = self.of / 2;
        let readers = self.of - writers;
        if self.index < writers {
            let mut populate = Report::default();
            self.write(&mut populate, self.index, writers, 0)?;
            barrier(self.dir, "populated", self.index, self.of)?;
            for v in 1..=u64::from(self.args.iterations) {
                self.write(report, self.index, writers, v)?;
            }
            let done = self.dir.join(format!("writer-done.{}", self.index));
            std::fs::write(&done, b"").with_context(|| format!("writing {}", done.display()))?;
        } else {
            barrier(self.dir, "populated", self.index, self.of)?;
            let r = self.index - writers;
            let writer = (r % writers) as u32;
            let fields = self.my_fields(r % writers, writers);
            let newest = u64::from(self.args.iterations);
            let seen = std::cell::Cell::new((u64::MAX, 0u64));
            let mut total = Phase::new("retrieve", true);
            loop {
                let writers_done =
                    (0..writers).all(|w| self.dir.join(format!("writer-done.{w}")).exists());
                let pass = self.read(&fields, &mut report.notes, |s| {
                    let (lo, hi) = seen.get();
                    seen.set((lo.min(s.version), hi.max(s.version)));
                    if s.writer == writer && s.version <= newest {
                        Ok(())
                    } else {
                        Err(format!("unexpected copy {s:?}"))
                    }
                })?;
                total.merge(&pass);
                if writers_done {
                    break;
                }
            }
            let (lo, hi) = seen.get();
            report.notes.push(format!(
                "2B: {readers} readers saw versions {lo}..={hi} while {writers} writers rewrote {} times",
                self.args.iterations
            ));
            report.phases.push(total);
        }
        Ok(())
    }
}

fn merge_phase(report: &mut Report, phase: Phase) {
    match report.phases.iter_mut().find(|p| p.name == phase.name) {
        Some(p) => p.merge(&phase),
        None => report.phases.push(phase),
    }
}
