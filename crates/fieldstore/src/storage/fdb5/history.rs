//! An FDB5 database's history for subscribers. FDB5's writers append to sub-tocs of their own,
//! so new indexes appear in the middle of the walk, not at its end: a cursor here is a time,
//! the microsecond at which the last delivered indexes became visible (each record carries its
//! write time), and a commit is the indexes that became visible at one instant (one record, or
//! a sub-toc of a fieldstore flush). Indexes younger than [`SETTLE`] wait, so one written just
//! before another but appended just after it is not passed over.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use super::reader::Fdb5Reader;
use super::toc::TocFile;
use crate::storage::catalogue::CatalogueReader;
use crate::storage::fs::FileSystem;
use crate::storage::history::{Commit, CommitEntry, Commits, HistoryMark};
use crate::storage::StorageError;

pub(crate) const SETTLE: Duration = Duration::from_millis(200);

/// The database's incarnation: its main toc's first record's write time (a database wiped and
/// made again has another).
fn epoch(fs: &dyn FileSystem, dir: &Path) -> Result<Option<String>, StorageError> {
    let toc = dir.join("toc");
    if !fs.exists(&toc) {
        return Ok(None);
    }
    let file = TocFile::read(fs, &toc)?;
    let (_, _, h) = file.init()?;
    Ok(Some(format!("fdb5.{}.{}", h.sec, h.usec)))
}

fn now_micros() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Visible indexes, oldest first, as (time visible, position among the reader's indexes).
fn timeline(r: &Fdb5Reader) -> Vec<(u64, usize)> {
    let mut t: Vec<(u64, usize)> = (0..r.indexes().len())
        .map(|pos| (r.visible_at(pos), pos))
        .collect();
    t.sort_by_key(|&(at, pos)| (at, std::cmp::Reverse(pos)));
    t
}

pub(crate) fn mark(fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<HistoryMark, StorageError> {
    let Some(epoch) = epoch(&**fs, dir)? else {
        return Ok(HistoryMark {
            epoch: String::new(),
            end: 0,
        });
    };
    let r = Fdb5Reader::open(fs, dir)?;
    let end = timeline(&r).last().map_or(0, |&(at, _)| at);
    Ok(HistoryMark { epoch, end })
}

pub(crate) fn commits(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    wanted: &str,
    from: u64,
    max: usize,
) -> Result<Commits, StorageError> {
    let Some(epoch) = epoch(&**fs, dir)? else {
        return Ok(Commits::Gone);
    };
    let mut r = Fdb5Reader::open(fs, dir)?;
    if epoch != wanted {
        let end = timeline(&r).last().map_or(0, |&(at, _)| at);
        return Ok(Commits::Recreated(HistoryMark { epoch, end }));
    }
    // Indexes too young to be sure nothing older is still being appended: wait until they
    // are not (at most SETTLE), then read the tocs again.
    if let Some(&(newest, _)) = timeline(&r).last() {
        let age = now_micros().saturating_sub(newest);
        if newest > from && age < SETTLE.as_micros() as u64 {
            std::thread::sleep(Duration::from_micros(SETTLE.as_micros() as u64 - age));
            r = Fdb5Reader::open(fs, dir)?;
        }
    }
    let settled = now_micros().saturating_sub(SETTLE.as_micros() as u64);
    let mut out: Vec<Commit> = Vec::new();
    let mut prev = from;
    for (at, pos) in timeline(&r) {
        if at <= from {
            continue;
        }
        if at > settled {
            break;
        }
        if out.last().is_none_or(|c| c.next != at) {
            if out.len() >= max {
                break;
            }
            out.push(Commit {
                at: prev,
                next: at,
                timestamp: at / 1_000_000,
                entries: Vec::new(),
            });
            prev = at;
        }
        let index = r.indexes()[pos].index_key.clone();
        if let Some(c) = out.last_mut() {
            for e in r.entries(pos, true)? {
                let e = e?;
                c.entries.push(CommitEntry {
                    index: index.clone(),
                    datum: e.datum,
                    field: e.field,
                });
            }
        }
    }
    Ok(Commits::Since(out))
}
