//! `fieldstore pipeline follow` and `pipeline replay`: MultIO plans over the store itself, on
//! the stream of flushed fields (exactly once across restarts) or over fields already stored.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context as _, Result};
use clap::Args;
use fieldstore::api::Fdb;
use fieldstore::model::config::FdbConfig;
use fieldstore::pipeline::follow::{FollowCounts, FollowSpec, Follower};
use fieldstore::pipeline::{replay, Context, PipelineError};

use super::store::one_request;
use crate::context::Session;

#[derive(Args, Debug)]
pub struct FollowArgs {
    /// The MultIO plan file; without it, the pipelines the config names (`pipelines:`) run,
    /// each on its own thread.
    plan: Option<PathBuf>,
    /// Which flushed fields feed the plan (a partial request, as for `watch`).
    request: Option<String>,
    /// Where the checkpoint and the provenance log are kept; a follower started again with the
    /// same directory resumes exactly where the last one stopped (or was killed).
    #[arg(long, value_name = "DIR")]
    state: Option<PathBuf>,
    /// Of the config's pipelines, only these (repeatable).
    #[arg(long, value_name = "NAME")]
    name: Vec<String>,
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

/// The followers to run: the one the command line names, or the config's.
fn specs(a: &FollowArgs, session: &Session) -> Result<Vec<FollowSpec>> {
    specs_of(a, session, true)
}

/// The config's pipelines, each following the store on a thread of its own until `stop`
/// (`fieldstore server`): none when the config names none.
pub fn spawn_config_pipelines(
    session: &Session,
    stop: &Arc<AtomicBool>,
) -> Result<Vec<std::thread::JoinHandle<()>>> {
    let a = FollowArgs {
        plan: None,
        request: None,
        state: None,
        name: Vec::new(),
        from: "beginning".into(),
        idle: None,
        quiet: true,
    };
    let specs = specs_of(&a, session, false)?;
    if specs.is_empty() {
        return Ok(Vec::new());
    }
    let store = open_store(session)?;
    let mut handles = Vec::new();
    for spec in specs {
        let name = spec.name.clone();
        let mut f = Follower::open(store.clone(), spec, context(session))
            .with_context(|| format!("pipeline {name}"))?;
        let stop = stop.clone();
        tracing::info!(pipeline = %name, resumed = f.resumed(), "pipeline following the store");
        handles.push(
            std::thread::Builder::new()
                .name(format!("pipeline {name}"))
                .spawn(move || {
                    let r = f.run(
                        &|| stop.load(Ordering::Relaxed),
                        None,
                        &mut |e: &PipelineError| tracing::warn!(pipeline = %name, "{e}"),
                        &mut |c: &FollowCounts| tracing::debug!(pipeline = %name, "{}", summary(c)),
                    );
                    match r {
                        Ok(c) => tracing::info!(pipeline = %name, "stopped: {}", summary(&c)),
                        Err(e) => tracing::error!(pipeline = %name, "stopped by an error (its checkpoint is where it resumes): {e}"),
                    }
                })?,
        );
    }
    Ok(handles)
}

fn specs_of(a: &FollowArgs, session: &Session, required: bool) -> Result<Vec<FollowSpec>> {
    let from_beginning = match a.from.as_str() {
        "beginning" => true,
        "now" => false,
        other => bail!("--from {other}: expected beginning or now"),
    };
    if let Some(plan) = &a.plan {
        let (Some(request), Some(state)) = (&a.request, &a.state) else {
            bail!("with a plan file, give the request it follows and --state DIR");
        };
        return Ok(vec![FollowSpec {
            name: plan.display().to_string(),
            plan: plan.clone(),
            request: one_request(Some(request), false)?,
            state_dir: state.clone(),
            from_beginning,
        }]);
    }
    let loaded = session.config()?;
    let FdbConfig::Local(local) = &loaded.config else {
        if !required {
            return Ok(Vec::new());
        }
        bail!(
            "{} names no pipelines (pipelines: belongs to a local store's config); or give a plan file, a request and --state",
            loaded.source
        );
    };
    let first_root = local
        .spaces
        .iter()
        .flat_map(|s| &s.roots)
        .next()
        .map(|r| r.path.clone());
    let mut out = Vec::new();
    for p in &local.pipelines {
        if !a.name.is_empty() && !a.name.contains(&p.name) {
            continue;
        }
        let state_dir = match (&p.state, &first_root) {
            (Some(s), _) => s.clone(),
            (None, Some(root)) => root.join(".pipelines").join(&p.name),
            (None, None) => bail!(
                "pipeline {}: no root to keep its state in: set state:",
                p.name
            ),
        };
        let request = if p.request.trim().is_empty() {
            one_request(None, true)?
        } else {
            one_request(Some(&p.request), false)
                .with_context(|| format!("pipeline {}: its request", p.name))?
        };
        out.push(FollowSpec {
            name: p.name.clone(),
            plan: p.plan.clone(),
            request,
            state_dir,
            from_beginning: p.from_beginning,
        });
    }
    if let Some(missing) = a.name.iter().find(|n| !out.iter().any(|s| &s.name == *n)) {
        bail!("{} names no pipeline '{missing}'", loaded.source);
    }
    if out.is_empty() && required {
        bail!(
            "{} names no pipelines: add a pipelines: section (docs/pipelines.md), or give a plan file, a request and --state",
            loaded.source
        );
    }
    Ok(out)
}

pub fn follow(a: FollowArgs, session: &Session) -> Result<()> {
    let idle = match a.idle {
        Some(s) if s.is_finite() && s >= 0.0 => Some(Duration::from_secs_f64(s)),
        Some(s) => bail!("--idle {s}: expected seconds, 0 or more"),
        None => None,
    };
    let specs = specs(&a, session)?;
    let store = open_store(session)?;
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }
    // Every follower is opened (plans loaded, checkpoints read) before any runs: a bad plan
    // stops the command before anything moved.
    let mut followers = Vec::new();
    for spec in specs {
        let name = spec.name.clone();
        let f = Follower::open(store.clone(), spec, context(session))
            .with_context(|| format!("pipeline {name}"))?;
        if !a.quiet && f.resumed() {
            eprintln!(
                "fieldstore: pipeline {name}: resuming ({})",
                summary(&f.counts())
            );
        }
        followers.push((name, f));
    }
    let quiet = a.quiet;
    let results: Vec<(String, Result<FollowCounts, PipelineError>)> = std::thread::scope(|s| {
        let handles: Vec<_> = followers
            .into_iter()
            .map(|(name, mut f)| {
                let stop = &stop;
                s.spawn(move || {
                    let r = f.run(
                        &|| stop.load(Ordering::Relaxed),
                        idle,
                        &mut |e: &PipelineError| eprintln!("fieldstore: pipeline {name}: {e}"),
                        &mut |c: &FollowCounts| {
                            if !quiet {
                                eprintln!("fieldstore: pipeline {name}: {}", summary(c));
                            }
                        },
                    );
                    // One failing follower stops the others: the command reports it.
                    if r.is_err() {
                        stop.store(true, Ordering::Relaxed);
                    }
                    (name, r)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    (
                        "?".into(),
                        Err(PipelineError::State("a follower thread panicked".into())),
                    )
                })
            })
            .collect()
    });
    let mut failed = None;
    for (name, r) in results {
        match r {
            Ok(c) => outln!("{name}: {}", summary(&c))?,
            Err(e) => {
                eprintln!("fieldstore: pipeline {name}: {e}");
                failed = Some(name);
            }
        }
    }
    if let Some(name) = failed {
        bail!("pipeline {name} stopped with an error (above); its checkpoint is where it resumes");
    }
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
