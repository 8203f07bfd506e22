//! `fieldstore adopt FILE|s3://BUCKET/KEY...`: GRIB files and S3 objects indexed where they
//! lie, under their messages' MARS keys, without copying a byte (docs/adopt.md).

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;
use fieldstore::api::{ArchiveSummary, Archiver};

use super::store::{progress_bar, report};
use crate::context::Session;

#[derive(Args, Debug)]
pub struct AdoptArgs {
    /// GRIB files (regular files) or S3 objects (s3://BUCKET/KEY) to adopt; they must then
    /// stay as they are.
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
    let mut objects = 0;
    for path in &args.files {
        if let Some(uri) = path
            .to_str()
            .filter(|p| fieldstore::storage::adopted::is_s3_uri(p))
        {
            let bar = progress_bar(uri, 0, args.verbose);
            let verbose = args.verbose;
            let mut archiver = Archiver::new(fdb).on_message(|m| report(m, verbose, Some(&bar)));
            let summary = archiver.adopt_object(uri)?;
            bar.finish_and_clear();
            totals += summary;
            objects += 1;
            continue;
        }
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
    let files = args.files.len() - objects;
    let from = match (files, objects) {
        (f, 0) => format!("{f} files"),
        (0, o) => format!("{o} S3 objects"),
        (f, o) => format!("{f} files and {o} S3 objects"),
    };
    eprintln!(
        "adopted {} fields ({:.1} MiB, no bytes copied) from {from} in {:.2} s",
        totals.messages,
        totals.bytes as f64 / 1048576.0,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}
