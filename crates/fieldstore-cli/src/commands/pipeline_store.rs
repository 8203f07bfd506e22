//! `fieldstore pipeline follow` and `pipeline replay`: MultIO plans over the store itself, on
//! the stream of flushed fields (exactly once across restarts) or over fields already stored.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use clap::Args;
use fieldstore::api::Fdb;
use fieldstore::pipeline::follow::{FollowCounts, FollowSpec, Follower};
use fieldstore::pipeline::{replay, Context, PipelineError};

use super::store::one_request;
use crate::context::Session;

#[derive(Args, Debug)]
pub struct FollowArgs {
    /// The MultIO plan file.
    plan: PathBuf,
    /// Which flushed fields feed the plan (a partial request, as for `watch`).
    request: String,
    /// Where the checkpoint and the provenance log are kept; a follower started again with the
    /// same directory resumes exactly where the last one stopped (or was killed).
    #[arg(long, value_name = "DIR")]
    state: PathBuf,
    /// Without a checkpoint: `beginning` (the fields stored already, then new ones) or `now`.
    #[arg(long, default_value = "beginning")]
    from: String,
    /// Exit (status 0) when no field came for this many seconds; default: follow until
    /// SIGINT/SIGTERM.
    #[arg(long, value_name = "SECONDS")]
    idle: Option<f64>,
    /// No progress lines on standard error.
    #[arg(long, short)]
    quiet: bool,
}

#[derive(Args, Debug)]
pub struct ReplayArgs {
    /// The MultIO plan file.
    plan: PathBuf,
    /// The stored fields to run it over.
    request: String,
    /// No progress line on standard error.
    #[arg(long, short)]
    quiet: bool,
}

fn open_store(session: &Session) -> Result<Arc<dyn Fdb>> {
    let loaded = session.config()?;
    let fdb = fieldstore::open(&loaded.config)
        .with_context(|| format!("building the store from {}", loaded.source))?;
    Ok(Arc::from(fdb))
}

fn context(session: &Session) -> Context {
    Context {
        fdb_config: session.explicit_config(),
        ..Context::default()
    }
}

fn summary(c: &FollowCounts) -> String {
    format!(
        "{} fields, {} flushes, {} outputs archived, {} already stored, {} failed",
        c.fields, c.flushes, c.outputs, c.already_stored, c.failed
    )
}

pub fn follow(a: FollowArgs, session: &Session) -> Result<()> {
    let from_beginning = match a.from.as_str() {
        "beginning" => true,
        "now" => false,
        other => bail!("--from {other}: expected beginning or now"),
    };
    let idle = match a.idle {
        Some(s) if s.is_finite() && s >= 0.0 => Some(Duration::from_secs_f64(s)),
        Some(s) => bail!("--idle {s}: expected seconds, 0 or more"),
        None => None,
    };
    let request = one_request(Some(&a.request), false)?;
    let store = open_store(session)?;
    let spec = FollowSpec {
        name: a.plan.display().to_string(),
        plan: a.plan.clone(),
        request,
        state_dir: a.state.clone(),
        from_beginning,
    };
    let mut follower = Follower::open(store, spec, context(session))?;
    if !a.quiet && follower.resumed() {
        eprintln!(
            "fieldstore: pipeline: resuming from {} ({})",
            a.state.display(),
            summary(&follower.counts())
        );
    }
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }
    let quiet = a.quiet;
    let counts = follower.run(
        &|| stop.load(Ordering::Relaxed),
        idle,
        &mut |e: &PipelineError| eprintln!("fieldstore: pipeline: {e}"),
        &mut |c: &FollowCounts| {
            if !quiet {
                eprintln!("fieldstore: pipeline: {}", summary(c));
            }
        },
    )?;
    outln!("{}", summary(&counts))?;
    Ok(())
}

pub fn replay(a: ReplayArgs, session: &Session) -> Result<()> {
    let request = one_request(Some(&a.request), false)?;
    let store = open_store(session)?;
    let quiet = a.quiet;
    let counts = replay::replay(
        store,
        &a.plan,
        &request,
        context(session),
        &mut |e: &PipelineError| eprintln!("fieldstore: pipeline: {e}"),
        &mut |done, total| {
            if !quiet && (done % 100 == 0 || done == total) {
                eprint!("\rfieldstore: pipeline: {done}/{total} fields");
                if done == total {
                    eprintln!();
                }
            }
        },
    )?;
    outln!("{}", summary(&counts))?;
    if counts.failed > 0 {
        bail!(
            "{} fields or flushes failed (each named above)",
            counts.failed
        );
    }
    Ok(())
}
