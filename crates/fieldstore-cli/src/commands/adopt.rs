//! `fieldstore adopt FILE...`: GRIB files indexed where they lie, under their messages' MARS
//! keys, without copying a byte (docs/adopt.md).

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use fieldstore::api::{ArchiveSummary, Archiver};

use super::store::{progress_bar, report};
use crate::context::Session;

#[derive(Args, Debug)]
pub struct AdoptArgs {
    /// GRIB files to adopt (regular files; they must then stay as they are).
    #[arg(required = true)]
    files: Vec<PathBuf>,
    /// One line per message: number, offset, key.
    #[arg(long)]
    verbose: bool,
}

pub fn run(args: AdoptArgs, session: &Session) -> Result<()> {
    let fdb = session.fdb()?;
    let mut totals = ArchiveSummary::default();
    let started = std::time::Instant::now();
    for path in &args.files {
        if path.as_os_str() == "-" {
            bail!("standard input cannot be adopted: its bytes would not stay anywhere (use `fieldstore write`)");
        }
        let size = std::fs::metadata(path)
            .ok()
            .filter(|m| m.is_file())
            .map_or(0, |m| m.len());
        let bar = progress_bar(&path.display().to_string(), size, args.verbose);
        let verbose = args.verbose;
        let mut archiver = Archiver::new(fdb).on_message(|m| report(m, verbose, Some(&bar)));
        let summary = archiver.adopt_path(path)?;
        bar.finish_and_clear();
        totals += summary;
    }
    fdb.flush()?;
    eprintln!(
        "adopted {} fields ({:.1} MiB, no bytes copied) from {} files in {:.2} s",
        totals.messages,
        totals.bytes as f64 / 1048576.0,
        args.files.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
