//! `fieldstore install-fdb-tools [DIR]`: FDB5's tool names (`fdb-list`, `fdb-write`, ...) as
//! symlinks to this binary, which answers to the name it is called by. What
//! `scripts/install-fdb-tools` does for a source checkout, for a `pip install`ed command: by
//! default into the directory the command itself is in (the virtualenv's `bin`), so the names are
//! on PATH wherever `fieldstore` is.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::fdb_names::TOOLS;

#[derive(Args, Debug)]
pub struct InstallFdbToolsArgs {
    /// Where to put the names (default: the directory this fieldstore command is in).
    dir: Option<PathBuf>,
}

pub fn run(a: InstallFdbToolsArgs) -> Result<()> {
    let (exe, before) = crate::program()?;
    if !before.is_empty() {
        anyhow::bail!(
            "FDB5's tool names link to a fieldstore program; run install-fdb-tools as `fieldstore install-fdb-tools`, not through `python -m fieldstore`"
        );
    }
    let exe = exe.canonicalize().unwrap_or(exe);
    let dir = match a.dir {
        Some(d) => d,
        None => exe
            .parent()
            .map(Path::to_path_buf)
            .context("this fieldstore command is in no directory")?,
    };
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut skipped = Vec::new();
    for t in TOOLS {
        let link = dir.join(t);
        match std::fs::symlink_metadata(&link) {
            // A real FDB5 tool (or anything else that is not our link) is never overwritten.
            Ok(m) if !m.file_type().is_symlink() => {
                eprintln!(
                    "skipped {}: a file that is not a symlink is there (not overwritten)",
                    link.display()
                );
                skipped.push(t);
                continue;
            }
            Ok(_) => std::fs::remove_file(&link)
                .with_context(|| format!("cannot replace {}", link.display()))?,
            Err(_) => {}
        }
        std::os::unix::fs::symlink(&exe, &link)
            .with_context(|| format!("cannot link {}", link.display()))?;
        outln!("{} -> {}", link.display(), exe.display())?;
    }
    eprintln!(
        "installed {} FDB5 tool names in {}; put it first on PATH if it is not: export PATH={}:$PATH",
        TOOLS.len() - skipped.len(),
        dir.display(),
        dir.display()
    );
    if !skipped.is_empty() {
        bail!(
            "{} left as they are (not symlinks): {}",
            skipped.len(),
            skipped.join(", ")
        );
    }
    Ok(())
}
