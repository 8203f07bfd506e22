//! `fieldstore lifecycle run`: the config's lifecycle rules, now (or as of `FIELDSTORE_NOW`).

use anyhow::{bail, Result};
use clap::{Args, Subcommand};
use fieldstore::api::lifecycle;
use fieldstore::api::LocalFdb;
use fieldstore::model::config::FdbConfig;

use crate::context::Session;

#[derive(Subcommand, Debug)]
pub enum LifecycleCommand {
    /// Apply the config's lifecycle rules once: move and wipe the databases they name.
    Run(RunArgs),
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// Show each action the rules would take; change nothing.
    #[arg(long)]
    dry_run: bool,
}

pub fn run(c: LifecycleCommand, session: &Session) -> Result<()> {
    let LifecycleCommand::Run(a) = c;
    let FdbConfig::Local(local) = &session.config()?.config else {
        bail!(
            "lifecycle rules run on a local config (type: local) on the host that holds its roots"
        );
    };
    let Some(rules) = local.lifecycle.clone() else {
        bail!("the config has no lifecycle: section (see docs/lifecycle.md)");
    };
    let fdb = LocalFdb::new(local.clone())?;
    // Tests and replays of a past day set FIELDSTORE_NOW; ages are counted to it.
    let now = lifecycle::moment(std::env::var("FIELDSTORE_NOW").ok().as_deref())?;
    // Old copies earlier moves left in the roots, due by now, go first and last.
    let mut retired = if a.dry_run {
        0
    } else {
        fdb.retire_left_copies()
    };
    let done = lifecycle::run(&fdb, &rules, now, a.dry_run)?;
    if !a.dry_run {
        retired += fdb.retire_left_copies();
    }
    if retired > 0 {
        eprintln!("deleted {retired} old root copies of databases moved into buckets");
    }
    if done.is_empty() {
        eprintln!("nothing to do as of {now}");
    }
    let mut failed = 0;
    for e in &done {
        let verb = match (e.action.as_str(), e.done, a.dry_run) {
            ("move", _, true) => "would move",
            ("wipe", _, true) => "would wipe",
            ("move", true, _) => "moved",
            ("wipe", true, _) => "wiped",
            _ => "failed to",
        };
        let failed_verb = if e.error.is_some() {
            format!("{verb} {}", e.action)
        } else {
            verb.to_string()
        };
        let to =
            e.to.as_deref()
                .map(|t| format!(" to {t}"))
                .unwrap_or_default();
        outln!(
            "[{}] {failed_verb} database {} ({}){to}: {}",
            e.rule,
            e.db,
            e.from,
            e.reason
        )?;
        if let Some(err) = &e.error {
            failed += 1;
            eprintln!("  error: {err}");
        }
    }
    if a.dry_run {
        eprintln!("(dry run: nothing was changed; run without --dry-run to apply)");
    }
    if failed > 0 {
        bail!("{failed} lifecycle action(s) failed");
    }
    Ok(())
}
