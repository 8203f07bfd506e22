//! `fieldstore convert`: whole databases between fieldstore's on-disk format and FDB5's, in
//! place, atomically for readers (docs/fdb5-format.md).

use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Result};
use clap::Args;
use fieldstore::model::config::DbFormat;
use fieldstore::storage::toc::convert::ConvertOptions;
use indicatif::{ProgressBar, ProgressStyle};

use super::store::one_request;
use crate::context::Session;

#[derive(Args, Debug)]
pub struct ConvertArgs {
    /// Which databases, e.g. class=od,expver=0001,stream=oper,date=20261122,time=1200.
    request: String,
    /// The format to convert them to: `fieldstore` (fieldstore's own) or `fdb5` (FDB5's toc
    /// format, which FDB5's programs read).
    #[arg(long, value_name = "FORMAT")]
    to: String,
    /// Show what would be converted; change nothing.
    #[arg(long)]
    dry_run: bool,
    /// Leave the old format's catalogue files (unreferenced) instead of deleting them.
    #[arg(long)]
    keep: bool,
    /// Seconds readers that opened the old catalogue get before its files are deleted.
    #[arg(long, value_name = "SECONDS", default_value_t = 2.0)]
    grace: f64,
}

pub fn run(a: ConvertArgs, session: &Session) -> Result<()> {
    // Each index converted allocates and frees buffers of several MiB on each thread.
    crate::memory::keep_freed_memory();
    let fdb = session.fdb()?;
    let Some(to) = DbFormat::parse(&a.to) else {
        bail!("--to {}: expected fieldstore or fdb5", a.to);
    };
    if !(a.grace.is_finite() && a.grace >= 0.0) {
        bail!("--grace {}: expected seconds, 0 or more", a.grace);
    }
    let request = one_request(Some(&a.request), false)?;
    let bar = ProgressBar::hidden();
    bar.set_style(
        ProgressStyle::with_template("{msg} {bar:30} {pos}/{len} fields ({per_sec})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let shown = bar.clone();
    let progress = move |done: u64, total: u64| {
        if total >= 100_000 && shown.is_hidden() {
            shown.set_draw_target(indicatif::ProgressDrawTarget::stderr());
            shown.set_message("converting");
        }
        shown.set_length(total);
        shown.set_position(done);
    };
    let options = ConvertOptions {
        dry_run: a.dry_run,
        keep: a.keep,
        grace: Duration::from_secs_f64(a.grace),
        progress: Some(Arc::new(progress)),
    };
    let converted = fdb.convert_databases(&request, to, &options)?;
    bar.finish_and_clear();
    for c in converted {
        let verb = match (c.done, c.from == c.to) {
            (_, true) => "already in",
            (true, false) => "converted to",
            (false, false) => "would convert to",
        };
        outln!(
            "{} {verb} {} format ({} entries in {} indexes, from {} format)",
            c.location,
            c.to,
            c.entries,
            c.indexes,
            c.from
        )?;
    }
    if a.dry_run {
        eprintln!("(dry run: nothing was changed; run without --dry-run to convert)");
    }
    Ok(())
}
