//! `fieldstore extract-index`: extraction information for fields stored without it (FDB5's
//! format, databases from before it was kept), so `extract` reads only the bytes a few points
//! need from them too. Resumable: run it again after an interruption, it skips what is done.

use std::sync::Arc;

use anyhow::Result;
use clap::Args;
use fieldstore::api::ExtractIndexOptions;
use indicatif::{ProgressBar, ProgressStyle};

use super::store::one_request;
use crate::context::Session;

#[derive(Args, Debug)]
pub struct ExtractIndexArgs {
    /// Which fields, as for list (may be partial): e.g. class=od,date=20261122 for every field
    /// of that day, or class=od,expver=0001,stream=oper,date=20261122,time=0000,param=167.
    request: String,
    /// Count what would be added; write nothing.
    #[arg(long)]
    dry_run: bool,
}

pub fn run(a: ExtractIndexArgs, session: &Session) -> Result<()> {
    let fdb = session.fdb()?;
    let request = one_request(Some(&a.request), false)?;
    // Drawn only when standard error is a terminal.
    let bar = ProgressBar::with_draw_target(None, indicatif::ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("indexing {bar:30} {pos}/{len} fields ({per_sec}, {eta})")
            .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    let shown = bar.clone();
    let options = ExtractIndexOptions {
        dry_run: a.dry_run,
        progress: Some(Arc::new(move |done: u64, total: u64| {
            shown.set_length(total);
            shown.set_position(done);
        })),
    };
    let r = fdb.extract_index(&request, &options)?;
    bar.finish_and_clear();
    let verb = if a.dry_run { "would add" } else { "added" };
    outln!(
        "{} fields: {verb} extraction information to {}, {} had it already, {} left without (small or not describable: read whole); {} bytes read, {} side files",
        r.fields,
        r.added,
        r.already,
        r.left,
        r.bytes_read,
        r.side_files
    )?;
    if a.dry_run {
        eprintln!("(dry run: nothing was written; run without --dry-run to add it)");
    }
    Ok(())
}
