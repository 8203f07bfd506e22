//! Files in a database's directory that no journal record names, and what they say about the
//! journal.
//!
//! A flush writes its index files before the one journal append that publishes them, so a flush
//! in progress, or one cut short (a crash, a failed append), leaves index files no record names;
//! so does a writer that has stored bytes but not flushed yet, in its data file. None of that is
//! damage. But a journal cut short by more than one interrupted append (a partial restore of a
//! backup) leaves the same kind of files, and shows an older state of the database as if it were
//! current: a field archived again reads back with its old bytes.
//!
//! Every index file records how far its writer had read the journal (its `seen` mark: the end
//! of what it read and the record ending there). A journal only grows, so while the journal
//! still holds that record where it was, the file is explained by a flush in progress or cut
//! short. When it does not, the journal once held more than it does now: flushes it held are
//! lost. That is what readers and writers refuse, and what `fieldstore check` reports; the rest
//! it lists as harmless.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use super::index::IndexFile;
use super::journal::{JournalMark, JournalState};
use crate::storage::catalogue::{CheckFinding, FindingKind};
use crate::storage::fs::{FileSystem, FsFile, OpenMode};
use crate::storage::StorageError;

/// What one index file no journal record names is.
enum Unnamed {
    /// Written after the journal held more than it does now; why, in words.
    Lost(String),
    /// The journal still holds what its writer had read: a flush in progress or cut short.
    Unpublished,
    /// Written into an earlier incarnation of the database (wiped and made again meanwhile).
    Earlier,
    /// No mark (written by a version before marks), or unreadable (being written, or damaged).
    Unknown(String),
}

/// An unnamed index file: its name, the file when it could be read, and what it is.
type Judged = (String, Option<IndexFile>, Unnamed);

fn is_index(name: &str) -> bool {
    name.ends_with(".idx")
}

fn is_data(name: &str) -> bool {
    name.ends_with(".data")
}

/// A store object's file name: what a data file in the directory is called.
fn object_file(object: &str) -> &str {
    object.rsplit('/').next().unwrap_or(object)
}

/// Judges one unnamed index file against the journal as `state` parsed it.
fn judge(file: &IndexFile, state: &JournalState, toc: &dyn FsFile) -> Unnamed {
    let Some(mark) = &file.seen else {
        return Unnamed::Unknown(
            "written by a version that did not record the journal it saw".into(),
        );
    };
    if mark.incarnation != state.incarnation {
        return Unnamed::Earlier;
    }
    match state.holds(toc, mark) {
        Ok(true) => Unnamed::Unpublished,
        Ok(false) => Unnamed::Lost(lost_detail(mark, state)),
        Err(e) => Unnamed::Unknown(format!("cannot compare it with the journal: {e}")),
    }
}

fn lost_detail(mark: &JournalMark, state: &JournalState) -> String {
    if mark.end > state.end {
        format!(
            "its writer had read {} bytes of the journal, which holds {} now",
            mark.end, state.end
        )
    } else {
        format!(
            "its writer had read {} bytes of the journal, ending with a record at offset {} that \
             the journal no longer has there",
            mark.end, mark.last
        )
    }
}

/// The unnamed index files of `dir`, each with its verdict, and the names of the index files
/// the journal names that are on disk. When some are unnamed, the journal is read again (from
/// where `state` ends) before they are judged: the caller's view may predate flushes published
/// since, whose writers read further than it did.
fn unnamed_indexes(
    fs: &dyn FileSystem,
    dir: &Path,
    state: &JournalState,
) -> Result<(Vec<Judged>, Vec<String>), StorageError> {
    let entries = match fs.read_dir(dir) {
        Ok(e) => e,
        // Wiped meanwhile: nothing to say about it.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), Vec::new())),
        Err(e) => return Err(StorageError::io("list", dir)(e)),
    };
    let mut names: Vec<String> = entries
        .into_iter()
        .filter(|e| !e.is_dir)
        .map(|e| e.file_name())
        .filter(|n| is_index(n))
        .collect();
    names.sort();
    if names.iter().all(|n| state.names(n)) {
        return Ok((Vec::new(), names));
    }
    let toc_path = dir.join("toc");
    let toc = match fs.open(&toc_path, OpenMode::Read) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((Vec::new(), names)),
        Err(e) => return Err(StorageError::io("open", &toc_path)(e)),
    };
    let mut now = state.clone();
    now.refresh(fs, &toc_path)?;
    let (named, unnamed): (Vec<String>, Vec<String>) =
        names.into_iter().partition(|n| now.names(n));
    let mut out = Vec::with_capacity(unnamed.len());
    for name in unnamed {
        match IndexFile::read(fs, &dir.join(&name)) {
            Ok(file) => {
                let verdict = judge(&file, &now, &*toc);
                out.push((name, Some(file), verdict));
            }
            Err(e) => out.push((name, None, Unnamed::Unknown(format!("cannot be read: {e}")))),
        }
    }
    Ok((out, named))
}

/// Refuses a database whose journal has lost flushes it once held (see the module's doc): an
/// error naming the directory and the index files that show it. What readers and writers of a
/// database check when they open it; costs one directory listing when nothing is unnamed.
pub(crate) fn refuse_lost(
    fs: &dyn FileSystem,
    dir: &Path,
    state: &JournalState,
) -> Result<(), StorageError> {
    let (unnamed, _) = unnamed_indexes(fs, dir, state)?;
    let mut files = Vec::new();
    let mut detail = None;
    for (name, _, verdict) in unnamed {
        if let Unnamed::Lost(why) = verdict {
            detail.get_or_insert_with(|| format!("{name}: {why}"));
            files.push(name);
        }
    }
    match detail {
        None => Ok(()),
        Some(detail) => Err(StorageError::LostFlushes {
            dir: dir.to_path_buf(),
            files,
            detail,
        }),
    }
}

/// Everything in the directory that no journal record names, each with what it is: index files
/// of lost flushes and the data files only they name (evidence that the journal lost history),
/// and what flushes in progress or cut short and writers not flushed yet leave (harmless).
pub(crate) fn survey(
    fs: &dyn FileSystem,
    dir: &Path,
    state: &JournalState,
) -> Result<Vec<CheckFinding>, StorageError> {
    let (unnamed, named) = unnamed_indexes(fs, dir, state)?;
    // Which index files name each data file: published ones (live or cleared, still on disk),
    // and the unnamed ones by verdict.
    let mut data_named_by_journal: BTreeSet<String> = BTreeSet::new();
    for name in &named {
        // A published index that cannot be read is the reader's error to report, not ours.
        if let Ok(f) = IndexFile::read(fs, &dir.join(name)) {
            data_named_by_journal.extend(f.data_files.iter().map(|o| object_file(o).to_string()));
        }
    }
    let mut data_of_lost: BTreeMap<String, String> = BTreeMap::new();
    let mut data_of_others: BTreeSet<String> = BTreeSet::new();
    let mut findings = Vec::new();
    for (name, file, verdict) in &unnamed {
        let data: Vec<String> = file
            .iter()
            .flat_map(|f| f.data_files.iter().map(|o| object_file(o).to_string()))
            .collect();
        let (kind, detail) = match verdict {
            Unnamed::Lost(why) => {
                for d in &data {
                    data_of_lost
                        .entry(d.clone())
                        .or_insert_with(|| name.clone());
                }
                (FindingKind::LostFlush, why.clone())
            }
            Unnamed::Unpublished => {
                data_of_others.extend(data);
                (
                    FindingKind::Unpublished,
                    "a flush not published yet, or cut short (a crash, a failed flush): the \
                     journal holds what its writer had read"
                        .to_string(),
                )
            }
            Unnamed::Earlier => {
                data_of_others.extend(data);
                (
                    FindingKind::EarlierIncarnation,
                    "written into an earlier incarnation of the database (wiped and made again \
                     while it was being flushed)"
                        .to_string(),
                )
            }
            Unnamed::Unknown(why) => {
                data_of_others.extend(data);
                (FindingKind::Unknown, why.clone())
            }
        };
        findings.push(CheckFinding {
            file: name.clone(),
            kind,
            detail,
        });
    }
    let entries = match fs.read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(findings),
        Err(e) => return Err(StorageError::io("list", dir)(e)),
    };
    let mut data_files: Vec<String> = entries
        .into_iter()
        .filter(|e| !e.is_dir)
        .map(|e| e.file_name())
        .filter(|n| is_data(n))
        .collect();
    data_files.sort();
    for name in data_files {
        if data_named_by_journal.contains(&name) {
            continue;
        }
        if let Some(index) = data_of_lost.get(&name) {
            findings.push(CheckFinding {
                file: name,
                kind: FindingKind::LostData,
                detail: format!("holds fields of a lost flush (named by {index})"),
            });
        } else if !data_of_others.contains(&name) {
            findings.push(CheckFinding {
                file: name,
                kind: FindingKind::UnreferencedData,
                detail: "no index file names it: a writer that has not flushed yet, or one \
                         stopped before its first flush (purge leaves it)"
                    .into(),
            });
        }
    }
    Ok(findings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Key;
    use crate::storage::catalogue::CatalogueWriter;
    use crate::storage::fs::os;
    use crate::storage::toc::writer::DbWriter;
    use crate::storage::FieldRef;

    /// One flush by a new writer (as one `fieldstore write` process): `step` in object `obj`.
    fn flush(dir: &Path, obj: &str, step: &str) {
        let mut w = DbWriter::open(&os(), dir, &Key::from_pairs([("class", "od")]), "s").unwrap();
        let f = FieldRef {
            object: obj.into(),
            offset: 0,
            length: 1,
            checksum: None,
            extract: None,
        };
        w.add(
            &Key::from_pairs([("type", "fc")]),
            &Key::from_pairs([("step", step)]),
            f,
        )
        .unwrap();
        w.commit().unwrap();
    }

    fn state(dir: &Path) -> JournalState {
        JournalState::read(&*os(), &dir.join("toc")).unwrap()
    }

    fn indexes(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| is_index(n))
            .collect();
        v.sort();
        v
    }

    fn kinds(findings: &[CheckFinding]) -> Vec<(String, FindingKind)> {
        let mut v: Vec<(String, FindingKind)> =
            findings.iter().map(|f| (f.file.clone(), f.kind)).collect();
        v.sort();
        v
    }

    /// A journal short of its last flush is a flush cut short; short of more, the later flushes'
    /// index files show the journal held more: refused, and surveyed as lost with their data.
    #[test]
    fn a_journal_short_of_more_than_its_last_flush_is_lost_history() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        flush(dir, "a.data", "0");
        let after_first = std::fs::read(dir.join("toc")).unwrap();
        let first = indexes(dir);
        flush(dir, "b.data", "0");
        let second: Vec<String> = indexes(dir)
            .into_iter()
            .filter(|n| !first.contains(n))
            .collect();
        flush(dir, "c.data", "6");
        let third: Vec<String> = indexes(dir)
            .into_iter()
            .filter(|n| !first.contains(n) && !second.contains(n))
            .collect();
        for data in ["a.data", "b.data", "c.data", "d.data"] {
            std::fs::write(dir.join(data), b"x").unwrap();
        }
        // Whole: only the data file no index names (a writer that has not flushed).
        refuse_lost(&*os(), dir, &state(dir)).unwrap();
        assert_eq!(
            kinds(&survey(&*os(), dir, &state(dir)).unwrap()),
            vec![("d.data".to_string(), FindingKind::UnreferencedData)]
        );

        std::fs::write(dir.join("toc"), &after_first).unwrap();
        let err = refuse_lost(&*os(), dir, &state(dir)).unwrap_err();
        match &err {
            StorageError::LostFlushes { dir: at, files, .. } => {
                assert_eq!(at, dir);
                assert_eq!(files, &third);
            }
            other => panic!("{other}"),
        }
        assert_eq!(err.kind(), crate::ErrorKind::Corrupt);
        let mut want = vec![
            (second[0].clone(), FindingKind::Unpublished),
            (third[0].clone(), FindingKind::LostFlush),
            ("c.data".to_string(), FindingKind::LostData),
            ("d.data".to_string(), FindingKind::UnreferencedData),
        ];
        want.sort();
        assert_eq!(kinds(&survey(&*os(), dir, &state(dir)).unwrap()), want);
        // Writers refuse it too; readers of the catalogue are checked in catalogue.rs's callers.
        assert!(matches!(
            DbWriter::open_existing(&os(), dir),
            Err(StorageError::LostFlushes { .. })
        ));
    }

    /// A reader's view may predate flushes published since, whose writers read further than it:
    /// the journal is read again before anything is called lost.
    #[test]
    fn a_view_older_than_the_files_is_not_lost_history() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        flush(dir, "a.data", "0");
        let old = state(dir);
        flush(dir, "b.data", "1");
        flush(dir, "c.data", "2");
        refuse_lost(&*os(), dir, &old).unwrap();
        assert!(survey(&*os(), dir, &old).unwrap().is_empty());
    }

    /// An index file left in the directory of a database wiped and made again (its writer was
    /// flushing meanwhile) saw another journal: not this one's lost history.
    #[test]
    fn a_file_of_an_earlier_incarnation_is_not_lost_history() {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path().join("db");
        flush(&dir, "a.data", "0");
        flush(&dir, "a.data", "1");
        let kept = d.path().join("kept");
        std::fs::create_dir(&kept).unwrap();
        let old = indexes(&dir);
        for n in &old {
            std::fs::copy(dir.join(n), kept.join(n)).unwrap();
        }
        super::super::maintenance::wipe(&os(), &dir, true).unwrap();
        super::super::maintenance::wipe_done(&*os(), &dir).unwrap();
        flush(&dir, "b.data", "0");
        for n in &old {
            std::fs::copy(kept.join(n), dir.join(n)).unwrap();
        }
        refuse_lost(&*os(), &dir, &state(&dir)).unwrap();
        let found = kinds(&survey(&*os(), &dir, &state(&dir)).unwrap());
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found
            .iter()
            .all(|(_, k)| *k == FindingKind::EarlierIncarnation));
    }
}
