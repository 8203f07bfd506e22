//! `fieldstore pipeline run PLAN FILE...`: what `multio-feed FILE --decode --plans=PLAN` does:
//! each GRIB message decoded into a field with multio-feed's metadata, a flush after each, a
//! `last-step` flush at the end, the plan's sinks written. A field that fails is reported and
//! counted; the run goes on and fails at the end.

use std::path::PathBuf;

use anyhow::{bail, Context as _, Result};
use clap::{Args, Subcommand};
use fieldstore::grib::SliceMessages;
use fieldstore::pipeline::{feed, Context, FlushKind, Message, PlanSet};

use crate::context::Session;

#[derive(Subcommand, Debug)]
pub enum PipelineCmd {
    /// Run a MultIO plan file over GRIB files, as `multio-feed FILE --decode --plans=PLAN` does.
    Run(RunArgs),
    /// Load a plan file and list its plans and actions (checks it without running it).
    Check { plan: PathBuf },
    /// Run a plan on the store's stream of flushed fields, writing its outputs back, exactly
    /// once across restarts (`--state DIR` keeps where it is).
    Follow(super::pipeline_store::FollowArgs),
    /// Run a plan over fields already stored (a new statistic over a past run).
    Replay(super::pipeline_store::ReplayArgs),
    /// Run a plan file over messages given as JSON lines (`{"field": {"metadata": {...},
    /// "values": [...]}}`, `{"flush": {...}}`, `{"notification": {...}}`; `-`: standard input):
    /// what a model sends through MultIO's API, replayed.
    Feed { plan: PathBuf, messages: PathBuf },
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The MultIO plan file (`client:` section, or a top-level `plans:`).
    plan: PathBuf,
    /// GRIB files, fed message by message in order.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// No progress line on standard error.
    #[arg(long, short)]
    quiet: bool,
}

pub fn run(cmd: PipelineCmd, session: &Session) -> Result<()> {
    match cmd {
        PipelineCmd::Run(a) => run_plan(a, session),
        PipelineCmd::Follow(a) => super::pipeline_store::follow(a, session),
        PipelineCmd::Replay(a) => super::pipeline_store::replay(a, session),
        PipelineCmd::Feed { plan, messages } => feed_json(&plan, &messages, session),
        PipelineCmd::Check { plan } => {
            let set = PlanSet::from_file(&plan, context(session))?;
            outln!(
                "{}: {} plan(s): {}",
                set.origin(),
                set.plan_names().len(),
                set.plan_names().join(", ")
            )?;
            Ok(())
        }
    }
}

fn context(session: &Session) -> Context {
    Context {
        fdb_config: session.explicit_config(),
        ..Context::default()
    }
}

/// How much of a mapped input is fed before its pages are dropped.
const RELEASE_EVERY: usize = 32 << 20;

fn run_plan(a: RunArgs, session: &Session) -> Result<()> {
    // Every field allocates and frees arrays of its size.
    crate::memory::keep_freed_memory();
    let mut set = PlanSet::from_file(&a.plan, context(session))?;
    let (mut fields, mut failed) = (0usize, 0usize);
    let report = |errors: Vec<fieldstore::pipeline::PipelineError>, failed: &mut usize| {
        for e in errors {
            *failed += 1;
            eprintln!("fieldstore: pipeline: {e}");
        }
    };
    for path in &a.files {
        let file =
            std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        // SAFETY: the mapping is read only; a file truncated meanwhile gives SIGBUS, as for
        // `fieldstore write`.
        let map = unsafe { memmap2::Mmap::map(&file) }
            .with_context(|| format!("cannot map {}", path.display()))?;
        // Pages of messages already fed are dropped from the process (they stay in the page
        // cache), so memory is the open windows, not the size of the input.
        let mut released = 0usize;
        for framed in SliceMessages::new(&map, path.display().to_string()) {
            let (number, offset, bytes) = framed?;
            let start = usize::try_from(offset).unwrap_or(usize::MAX);
            if start >= released + RELEASE_EVERY && start <= map.len() {
                // SAFETY: the mapping is a read-only map of a file: MADV_DONTNEED drops its
                // pages, a later access reads them from the file again; no slice of the range
                // is in use (fields copy what they keep).
                let _ = unsafe {
                    map.unchecked_advise_range(
                        memmap2::UncheckedAdvice::DontNeed,
                        released,
                        start - released,
                    )
                };
                released = start;
            }
            fields += 1;
            let field = match feed::field_from_grib(bytes) {
                Ok(f) => f,
                Err(e) => {
                    failed += 1;
                    eprintln!(
                        "fieldstore: pipeline: {} message {number} (offset {offset}): {e}",
                        path.display()
                    );
                    continue;
                }
            };
            report(set.process(Message::Field(field)), &mut failed);
            report(set.process(Message::flush(FlushKind::Default)), &mut failed);
            if !a.quiet && fields % 100 == 0 {
                eprint!("\rfieldstore: pipeline: {fields} fields, {failed} failed");
            }
        }
    }
    report(
        set.process(Message::flush(FlushKind::LastStep)),
        &mut failed,
    );
    if !a.quiet {
        eprintln!("\rfieldstore: pipeline: {fields} fields, {failed} failed");
    }
    if failed > 0 {
        bail!("{failed} of {fields} fields failed (each named above)");
    }
    Ok(())
}

fn feed_json(plan: &std::path::Path, messages: &std::path::Path, session: &Session) -> Result<()> {
    use std::io::BufRead as _;
    // Every field allocates and frees arrays of its size.
    crate::memory::keep_freed_memory();
    let mut set = PlanSet::from_file(plan, context(session))?;
    let input: Box<dyn std::io::BufRead> = if messages.as_os_str() == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        let f = std::fs::File::open(messages)
            .with_context(|| format!("cannot open {}", messages.display()))?;
        Box::new(std::io::BufReader::new(f))
    };
    let (mut count, mut failed) = (0usize, 0usize);
    for (i, line) in input.lines().enumerate() {
        let line = line.with_context(|| format!("cannot read {}", messages.display()))?;
        if line.trim().is_empty() {
            continue;
        }
        count += 1;
        let msg = match feed::message_from_json(&line) {
            Ok(m) => m,
            Err(e) => {
                failed += 1;
                eprintln!(
                    "fieldstore: pipeline: {} line {}: {e}",
                    messages.display(),
                    i + 1
                );
                continue;
            }
        };
        for e in set.process(msg) {
            failed += 1;
            eprintln!(
                "fieldstore: pipeline: {} line {}: {e}",
                messages.display(),
                i + 1
            );
        }
    }
    if failed > 0 {
        bail!("{failed} failures in {count} messages (each named above)");
    }
    Ok(())
}
