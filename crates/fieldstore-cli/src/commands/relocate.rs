//! `fieldstore move`: whole databases to another configured root (a slower or faster tier).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use fieldstore::model::config::parse_days;
use fieldstore::model::request::Request;
use fieldstore::storage::toc::relocate::MoveOptions;
use indicatif::{ProgressBar, ProgressStyle};

use super::store::one_request;
use crate::context::Session;

#[derive(Args, Debug)]
pub struct MoveArgs {
    /// Which databases, e.g. class=od,expver=0001,stream=oper,date=20261122,time=1200 (may be
    /// partial; with --older-than it may be left out: every database that old).
    request: Option<String>,
    /// The configured root to move them to.
    #[arg(long, visible_alias = "dest", value_name = "ROOT")]
    to: PathBuf,
    /// Only databases whose `date` is more than this before today: 7d, 2w, 1y or days.
    #[arg(long, value_name = "AGE")]
    older_than: Option<String>,
    /// Show what would move and check the destination; copy nothing.
    #[arg(long)]
    dry_run: bool,
    /// Leave the old copy's files (invisible to readers) instead of deleting them.
    #[arg(long)]
    keep: bool,
    /// Seconds readers that opened the old copy get before its files are deleted.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    grace: f64,
    /// Into a bucket: return only once the old copy is deleted (1 s plus --grace after the
    /// switch), instead of leaving that to the next move or lifecycle run.
    #[arg(long)]
    wait: bool,
    /// FDB5's fdb-move: the request must name exactly one database.
    #[arg(long, hide = true)]
    single: bool,
}

/// `7d`, `2w`, `1y`, or a number of days, as the config's `max_age`.
fn days(text: &str) -> Result<u32> {
    parse_days(text)
        .ok_or_else(|| anyhow::anyhow!("--older-than {text}: expected an age like 7d, 2w or 1y"))
}

pub fn run(a: MoveArgs, session: &Session) -> Result<()> {
    let fdb = session.fdb()?;
    if !(a.grace.is_finite() && a.grace >= 0.0) {
        bail!("--grace {}: expected seconds, 0 or more", a.grace);
    }
    let older_than_days = a.older_than.as_deref().map(days).transpose()?;
    let request = match (&a.request, older_than_days) {
        (None, None) => bail!("give a request naming the databases to move, or --older-than"),
        (None, Some(_)) => Request::default(),
        (Some(r), _) => one_request(Some(r), false)?,
    };
    if a.single {
        let n = fdb.where_(&request)?.len();
        match n {
            0 => bail!("Request {request} does not match an existing database. Please specify a single database."),
            1 => {}
            _ => bail!("Request {request} matches more than one existing database. Please specify a single database."),
        }
    }
    let bar = ProgressBar::hidden();
    bar.set_style(
        ProgressStyle::with_template("{msg} {bar:30} {bytes}/{total_bytes} ({bytes_per_sec})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let shown = bar.clone();
    let progress = move |done: u64, total: u64| {
        // Only large databases are worth a bar.
        if total >= 64 << 20 && shown.is_hidden() {
            shown.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            shown.set_message("copying");
        }
        shown.set_length(total);
        shown.set_position(done);
    };
    let options = MoveOptions {
        dry_run: a.dry_run,
        keep: a.keep,
        grace: Duration::from_secs_f64(a.grace),
        older_than_days,
        progress: Some(Arc::new(progress)),
        wait: a.wait,
    };
    let moved = fdb.move_databases(&request, &a.to, &options)?;
    bar.finish_and_clear();
    if moved.is_empty() {
        eprintln!(
            "nothing to move: no database that old outside {}",
            a.to.display()
        );
    }
    for m in moved {
        let verb = if m.done { "moved" } else { "would move" };
        outln!(
            "{verb} database {} ({} files, {} bytes) from {} to {}",
            m.db,
            m.files,
            m.bytes,
            m.from,
            m.to
        )?;
    }
    if a.dry_run {
        eprintln!("(dry run: nothing was copied; run without --dry-run to move)");
    }
    Ok(())
}
