//! A toc database's history for subscribers: a cursor is a byte offset into the journal, and a
//! commit is one journal append (one flush's Index records, or a merge, or a Clear). Reading
//! the commits after a cursor reads the journal from there only, and the index files those
//! appends published.

use std::path::Path;

use super::index::IndexFile;
use super::journal::{self, Record};
use super::reader::datum_key_of;
use crate::model::Key;
use crate::storage::fs::{FileSystem, FsFile, OpenMode};
use crate::storage::history::{Commit, CommitEntry, Commits, HistoryMark};
use crate::storage::{FieldRef, StorageError};

/// The journal, open, or `None` when the database is gone (wiped, or its directory moved).
fn open(fs: &dyn FileSystem, toc: &Path) -> Result<Option<Box<dyn FsFile>>, StorageError> {
    match fs.open(toc, OpenMode::Read) {
        Ok(f) => Ok(Some(f)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(StorageError::io("open", toc)(e)),
    }
}

/// The incarnation a journal belongs to: its Init record's unique name, which a move copies
/// with the journal and a wipe and re-creation replaces. Journals written before it existed
/// fall back to the owner and the creation second.
fn epoch(f: &dyn FsFile, toc: &Path) -> Result<String, StorageError> {
    let init = journal::read_init(f, toc)?;
    Ok(init
        .incarnation
        .unwrap_or_else(|| format!("{}.{}", init.uid, init.created)))
}

/// Where the history of the database in `dir` stands. A database gone meanwhile has an
/// empty epoch, which its next [`commits`] answers with [`Commits::Gone`].
pub fn mark(fs: &dyn FileSystem, dir: &Path) -> Result<HistoryMark, StorageError> {
    let toc = dir.join("toc");
    let Some(f) = open(fs, &toc)? else {
        return Ok(HistoryMark {
            epoch: String::new(),
            end: 0,
        });
    };
    let epoch = epoch(&*f, &toc)?;
    // Read whole once, when a subscription starts: the end of the last whole append.
    let (_, end) = journal::read_appends(&*f, &toc, 0)?;
    Ok(HistoryMark { epoch, end })
}

/// The commits of the database in `dir` from cursor `from` of incarnation `wanted` on.
pub fn commits(
    fs: &dyn FileSystem,
    dir: &Path,
    wanted: &str,
    from: u64,
    max: usize,
) -> Result<Commits, StorageError> {
    let toc = dir.join("toc");
    let Some(f) = open(fs, &toc)? else {
        return Ok(Commits::Gone);
    };
    let epoch = epoch(&*f, &toc)?;
    if epoch != wanted {
        let (_, end) = journal::read_appends(&*f, &toc, 0)?;
        return Ok(Commits::Recreated(HistoryMark { epoch, end }));
    }
    let len = f.len().map_err(StorageError::io("stat", &toc))?;
    if from > len {
        return Err(StorageError::FellBehind {
            db: dir.display().to_string(),
            cursor: from,
            detail: format!("the journal is only {len} bytes long: truncated, or not the journal this cursor was taken from"),
        });
    }
    let (appends, _) = journal::read_appends(&*f, &toc, from)?;
    let mut out = Vec::new();
    for a in appends.into_iter().take(max) {
        let mut commit = Commit {
            at: a.at,
            next: a.next,
            timestamp: 0,
            entries: Vec::new(),
        };
        for (_, r) in a.records {
            match r {
                // A flush's index: its fields are new. A merged one (`slot`) repeats fields
                // already delivered, and an Init or a Clear adds none: the cursor passes them.
                Record::Index {
                    file,
                    index_key,
                    timestamp,
                    slot: None,
                    ..
                } => {
                    commit.timestamp = commit.timestamp.max(timestamp);
                    if let Err(e) = flushed(fs, dir, &file, &index_key, a.at, &mut commit.entries) {
                        // Its index files went with the whole database (wiped meanwhile): the
                        // subscriber follows the database as it is now, not a purge.
                        if matches!(e, StorageError::FellBehind { .. }) {
                            return match open(fs, &toc)? {
                                None => Ok(Commits::Gone),
                                Some(f) => match self::epoch(&*f, &toc)? {
                                    now if now == epoch => Err(e),
                                    now => {
                                        let (_, end) = journal::read_appends(&*f, &toc, 0)?;
                                        Ok(Commits::Recreated(HistoryMark { epoch: now, end }))
                                    }
                                },
                            };
                        }
                        return Err(e);
                    }
                }
                Record::Index { .. } | Record::Init { .. } | Record::Clear { .. } => {}
            }
        }
        out.push(commit);
    }
    Ok(Commits::Since(out))
}

/// Every live field of the database in `dir` as one commit from cursor 0 to the journal's end:
/// for a subscriber from the beginning whose early flushes a purge took (their fields live on
/// in merged indexes). Oldest index first.
pub fn snapshot(
    fs: &std::sync::Arc<dyn FileSystem>,
    dir: &Path,
    wanted: &str,
) -> Result<Commits, StorageError> {
    use crate::storage::catalogue::CatalogueReader;
    let reader = super::reader::DbReader::open(fs, dir)?;
    let toc = dir.join("toc");
    let Some(f) = open(&**fs, &toc)? else {
        return Ok(Commits::Gone);
    };
    let epoch = epoch(&*f, &toc)?;
    if epoch != wanted {
        let (_, end) = journal::read_appends(&*f, &toc, 0)?;
        return Ok(Commits::Recreated(HistoryMark { epoch, end }));
    }
    let mut commit = Commit {
        at: 0,
        next: reader.state().end,
        timestamp: 0,
        entries: Vec::new(),
    };
    for (i, ix) in reader.indexes().iter().enumerate().rev() {
        commit.timestamp = commit.timestamp.max(ix.timestamp);
        for e in reader.entries(i, false)? {
            let e = e?;
            commit.entries.push(CommitEntry {
                index: ix.index_key.clone(),
                datum: e.datum,
                field: e.field,
            });
        }
    }
    Ok(Commits::Since(vec![commit]))
}

/// The fields of one flushed index file, in its order.
fn flushed(
    fs: &dyn FileSystem,
    dir: &Path,
    file: &str,
    index_key: &str,
    at: u64,
    out: &mut Vec<CommitEntry>,
) -> Result<(), StorageError> {
    let path = dir.join(file);
    let corrupt = |detail: String| StorageError::Corrupt {
        path: dir.join("toc"),
        offset: at,
        detail,
    };
    let index = Key::parse(index_key).map_err(|e| corrupt(e.to_string()))?;
    let ix = match IndexFile::read(fs, &path) {
        Ok(ix) => ix,
        Err(StorageError::Io { source, .. }) if source.kind() == std::io::ErrorKind::NotFound => {
            return Err(StorageError::FellBehind {
                db: dir.display().to_string(),
                cursor: at,
                detail: format!("index file {file}, flushed there, was removed by a purge since"),
            })
        }
        Err(e) => return Err(e),
    };
    for e in ix.entries() {
        let e = e?;
        out.push(CommitEntry {
            index: index.clone(),
            datum: datum_key_of(&ix.datum_keywords, e.values),
            field: FieldRef {
                object: ix.data_files.get(e.file as usize).cloned().ok_or_else(|| {
                    corrupt(format!(
                        "index file {file} names data file {} of {}",
                        e.file,
                        ix.data_files.len()
                    ))
                })?,
                offset: e.offset,
                length: e.length,
                checksum: e.checksum,
                extract: e.extract.map(std::sync::Arc::from),
            },
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::path::Path;
    use std::time::Duration;

    use crate::model::config::{Root, Space};
    use crate::model::Key;
    use crate::storage::catalogue::Catalogue;
    use crate::storage::history::{Commit, Commits, Wake};
    use crate::storage::toc::TocCatalogue;
    use crate::storage::{DbRef, FieldRef, StorageError};

    pub(super) fn root(path: &Path) -> Root {
        Root::open_at(path.to_path_buf())
    }

    fn catalogue(roots: &[&Path]) -> TocCatalogue {
        TocCatalogue::new(vec![Space {
            name: None,
            regex: ".*".into(),
            handler: "Default".into(),
            roots: roots.iter().map(|r| root(r)).collect(),
        }])
        .unwrap()
    }

    fn db_key() -> Key {
        Key::parse("{class=od,expver=0001,stream=oper,date=20260101,time=0000}").unwrap()
    }

    fn index() -> Key {
        Key::parse("{type=fc,levtype=sfc}").unwrap()
    }

    fn datum(step: u32) -> Key {
        Key::parse(&format!("{{step={step},param=167}}")).unwrap()
    }

    fn flush(c: &TocCatalogue, db: &DbRef, steps: &[u32]) {
        let mut w = c.writer(db).unwrap();
        for &s in steps {
            let field = FieldRef {
                object: "x.data".into(),
                offset: u64::from(s) * 10,
                length: 10,
                checksum: None,
                extract: None,
            };
            w.add(&index(), &datum(s), field).unwrap();
        }
        w.commit().unwrap();
    }

    fn since(c: &TocCatalogue, db: &DbRef, epoch: &str, from: u64) -> Vec<Commit> {
        match c.commits(db, epoch, from, 100).unwrap() {
            Commits::Since(v) => v,
            other => panic!("expected commits, got {other:?}"),
        }
    }

    fn steps(commits: &[Commit]) -> Vec<Vec<String>> {
        commits
            .iter()
            .filter(|c| !c.entries.is_empty())
            .map(|c| {
                c.entries
                    .iter()
                    .map(|e| e.datum.get("step").unwrap().to_string())
                    .collect()
            })
            .collect()
    }

    #[test]
    fn a_flush_in_another_thread_wakes_the_waiter_and_is_read_whole_from_the_cursor() {
        let d = tempfile::tempdir().unwrap();
        let c = std::sync::Arc::new(catalogue(&[d.path()]));
        let db = c.create(&db_key(), "schema").unwrap();
        flush(&c, &db, &[0]);
        let mark = c.history_mark(&db).unwrap();
        assert_eq!(steps(&since(&c, &db, &mark.epoch, 0)), [["0"]]);
        assert!(since(&c, &db, &mark.epoch, mark.end).is_empty());
        let mut waiter = c.change_waiter().unwrap();
        waiter.follow(&db).unwrap();
        let writer = {
            let (c, db) = (c.clone(), db.clone());
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(50));
                flush(&c, &db, &[6, 12]);
            })
        };
        assert_eq!(
            waiter.wait(Duration::from_secs(10)).unwrap(),
            Wake::Changed(vec![db.id.clone()])
        );
        writer.join().unwrap();
        let got = since(&c, &db, &mark.epoch, mark.end);
        assert_eq!(steps(&got), [["12", "6"]]);
        assert_eq!(got[0].at, mark.end);
        assert_eq!(got[0].next, c.history_mark(&db).unwrap().end);
        // Nothing more: the waiter times out.
        assert_eq!(
            waiter.wait(Duration::from_millis(50)).unwrap(),
            Wake::Timeout
        );
    }

    /// The producer of the test below, run in a process of its own: flushes step 6, then
    /// archives step 12 without flushing and waits to be killed.
    #[test]
    #[ignore = "the producer process of another_process_flush_wakes_the_waiter_..."]
    fn producer_process() {
        let Ok(root) = std::env::var("FIELDSTORE_TEST_PRODUCER_ROOT") else {
            return;
        };
        let c = catalogue(&[Path::new(&root)]);
        let db = c.find(&db_key()).unwrap().unwrap();
        flush(&c, &db, &[6]);
        let mut w = c.writer(&db).unwrap();
        let field = FieldRef {
            object: "y.data".into(),
            offset: 0,
            length: 10,
            checksum: None,
            extract: None,
        };
        w.add(&index(), &datum(12), field).unwrap();
        std::fs::write(Path::new(&root).join("producer.ready"), b"").unwrap();
        std::thread::sleep(Duration::from_secs(60));
    }

    #[test]
    fn another_process_flush_wakes_the_waiter_and_its_unflushed_fields_never_show() {
        let d = tempfile::tempdir().unwrap();
        let c = catalogue(&[d.path()]);
        let db = c.create(&db_key(), "schema").unwrap();
        let mark = c.history_mark(&db).unwrap();
        let mut waiter = c.change_waiter().unwrap();
        waiter.follow(&db).unwrap();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "--ignored",
                "storage::toc::history::tests::producer_process",
                "--nocapture",
            ])
            .env("FIELDSTORE_TEST_PRODUCER_ROOT", d.path())
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let ready = d.path().join("producer.ready");
        let mut woken = false;
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        while !ready.exists() {
            assert!(
                std::time::Instant::now() < deadline,
                "the producer never got ready"
            );
            if let Wake::Changed(ids) = waiter.wait(Duration::from_millis(100)).unwrap() {
                assert_eq!(ids, vec![db.id.clone()]);
                woken = true;
            }
        }
        // kill -9 with step 12 archived and not flushed.
        child.kill().unwrap();
        child.wait().unwrap();
        // A flush before the first wait is queued for the next one.
        if !woken {
            woken =
                waiter.wait(Duration::from_secs(10)).unwrap() == Wake::Changed(vec![db.id.clone()]);
        }
        assert!(woken, "the other process's flush did not wake the waiter");
        assert_eq!(steps(&since(&c, &db, &mark.epoch, mark.end)), [["6"]]);
    }

    #[test]
    fn a_new_database_wakes_a_rescan() {
        let d = tempfile::tempdir().unwrap();
        let c = catalogue(&[d.path()]);
        let mut waiter = c.change_waiter().unwrap();
        let db = c.create(&db_key(), "schema").unwrap();
        assert_eq!(waiter.wait(Duration::from_secs(10)).unwrap(), Wake::Rescan);
        waiter.follow(&db).unwrap();
        flush(&c, &db, &[0]);
        assert_eq!(
            waiter.wait(Duration::from_secs(10)).unwrap(),
            Wake::Changed(vec![db.id.clone()])
        );
    }

    #[test]
    fn a_torn_tail_is_not_yielded_and_merges_pass() {
        let d = tempfile::tempdir().unwrap();
        let c = catalogue(&[d.path()]);
        let db = c.create(&db_key(), "schema").unwrap();
        flush(&c, &db, &[0]);
        flush(&c, &db, &[6]);
        let mark = c.history_mark(&db).unwrap();
        c.compact(&db).unwrap();
        let after_merge = c.history_mark(&db).unwrap();
        assert!(after_merge.end > mark.end);
        // The merge's append is a commit without fields.
        let merged = since(&c, &db, &mark.epoch, mark.end);
        assert!(!merged.is_empty() && merged.iter().all(|m| m.entries.is_empty()));
        assert_eq!(merged.last().unwrap().next, after_merge.end);
        // Half of a flush's append written: not a commit yet.
        flush(&c, &db, &[12]);
        let toc = Path::new(&db.id).join("toc");
        let whole = std::fs::read(&toc).unwrap();
        let cut = after_merge.end as usize + (whole.len() - after_merge.end as usize) / 2;
        std::fs::write(&toc, &whole[..cut]).unwrap();
        assert!(since(&c, &db, &mark.epoch, after_merge.end).is_empty());
        assert_eq!(c.history_mark(&db).unwrap().end, after_merge.end);
        std::fs::write(&toc, &whole).unwrap();
        assert_eq!(
            steps(&since(&c, &db, &mark.epoch, after_merge.end)),
            [["12"]]
        );
        // From the start: each flush once, the merge adds nothing.
        assert_eq!(
            steps(&since(&c, &db, &mark.epoch, 0)),
            [["0"], ["6"], ["12"]]
        );
    }

    #[test]
    fn a_purged_index_is_reported_as_fallen_behind_except_from_the_beginning() {
        let d = tempfile::tempdir().unwrap();
        let c = catalogue(&[d.path()]);
        let db = c.create(&db_key(), "schema").unwrap();
        flush(&c, &db, &[0]);
        let mark = c.history_mark(&db).unwrap();
        // Where the first flush starts (after the Init record's append).
        let first_flush = since(&c, &db, &mark.epoch, 0)
            .into_iter()
            .find(|c| !c.entries.is_empty())
            .unwrap()
            .at;
        assert!(first_flush > 0);
        // The same field again: the first index holds only a replaced field, and purge removes it.
        flush(&c, &db, &[0]);
        flush(&c, &db, &[6]);
        let report = c.purge(&db, true).unwrap();
        assert_eq!(report.indexes.len(), 1, "{report:?}");
        let err = c.commits(&db, &mark.epoch, first_flush, 100).unwrap_err();
        assert!(matches!(err, StorageError::FellBehind { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("purge") && msg.contains("subscribe again"),
            "{msg}"
        );
        // A cursor past it still reads on.
        assert_eq!(
            steps(&since(&c, &db, &mark.epoch, mark.end)),
            [["0"], ["6"]]
        );
        // From the beginning: what the database holds now, as one commit up to the journal's
        // end, then on from there.
        let whole = since(&c, &db, &mark.epoch, 0);
        assert_eq!(whole.len(), 1);
        let mut got: Vec<String> = whole[0]
            .entries
            .iter()
            .map(|e| e.datum.get("step").unwrap().to_string())
            .collect();
        got.sort();
        assert_eq!(got, ["0", "6"]);
        assert_eq!(whole[0].next, c.history_mark(&db).unwrap().end);
    }

    #[test]
    fn a_wiped_and_recreated_database_is_another_epoch() {
        let d = tempfile::tempdir().unwrap();
        let c = catalogue(&[d.path()]);
        let db = c.create(&db_key(), "schema").unwrap();
        flush(&c, &db, &[0]);
        let old = c.history_mark(&db).unwrap();
        let mut waiter = c.change_waiter().unwrap();
        waiter.follow(&db).unwrap();
        c.wipe(&db, true).unwrap();
        c.finish_wipe(&db).unwrap();
        assert_ne!(waiter.wait(Duration::from_secs(10)).unwrap(), Wake::Timeout);
        assert_eq!(
            c.commits(&db, &old.epoch, old.end, 100).unwrap(),
            Commits::Gone
        );
        let again = c.create(&db_key(), "schema").unwrap();
        assert_eq!(again.id, db.id);
        flush(&c, &again, &[6]);
        let Commits::Recreated(new) = c.commits(&again, &old.epoch, old.end, 100).unwrap() else {
            panic!("expected another epoch");
        };
        assert_ne!(new.epoch, old.epoch);
        assert_eq!(new, c.history_mark(&again).unwrap());
        assert_eq!(steps(&since(&c, &again, &new.epoch, 0)), [["6"]]);
        // The new journal wakes the waiter as the old one did.
        while waiter.wait(Duration::from_millis(50)).unwrap() != Wake::Timeout {}
        flush(&c, &again, &[12]);
        assert_eq!(
            waiter.wait(Duration::from_secs(10)).unwrap(),
            Wake::Changed(vec![db.id.clone()])
        );
    }

    #[test]
    fn a_move_keeps_the_epoch_and_the_cursor() {
        let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let c = catalogue(&[a.path(), b.path()]);
        let db = c.create(&db_key(), "schema").unwrap();
        flush(&c, &db, &[0]);
        let mark = c.history_mark(&db).unwrap();
        let opts = crate::storage::toc::relocate::MoveOptions {
            grace: Duration::ZERO,
            ..Default::default()
        };
        c.move_database(&db, b.path(), &opts).unwrap();
        let moved = c.find(&db_key()).unwrap().unwrap();
        assert_ne!(moved.id, db.id);
        assert_eq!(c.history_mark(&moved).unwrap(), mark);
        flush(&c, &moved, &[6]);
        assert_eq!(steps(&since(&c, &moved, &mark.epoch, mark.end)), [["6"]]);
        // A subscriber still naming the old place reads on from the new one.
        assert_eq!(steps(&since(&c, &db, &mark.epoch, mark.end)), [["6"]]);
        c.wipe(&moved, true).unwrap();
        assert_eq!(
            c.commits(&db, &mark.epoch, mark.end, 100).unwrap(),
            Commits::Gone
        );
    }
}

/// The waiter's fallback, on a file system inotify cannot see (the simulated one).
#[cfg(test)]
mod polling_tests {
    use std::path::Path;
    use std::sync::Arc;
    use std::time::Duration;

    use crate::model::config::Space;
    use crate::model::Key;
    use crate::storage::catalogue::Catalogue;
    use crate::storage::fs::sim::SimFs;
    use crate::storage::fs::FileSystem;
    use crate::storage::history::Wake;
    use crate::storage::toc::TocCatalogue;
    use crate::storage::FieldRef;

    #[test]
    fn without_inotify_the_waiter_sees_flushes_and_new_databases_by_polling() {
        let root = Path::new("/sim/root");
        let fs = Arc::new(SimFs::new());
        fs.create_dir_all(root).unwrap();
        let space = Space {
            name: None,
            regex: ".*".into(),
            handler: "Default".into(),
            roots: vec![super::tests::root(root)],
        };
        let c = TocCatalogue::with_fs(vec![space], fs).unwrap();
        let mut waiter = c.change_waiter().unwrap();
        let db = c
            .create(&Key::parse("{class=od,expver=0001}").unwrap(), "schema")
            .unwrap();
        assert_eq!(waiter.wait(Duration::from_secs(10)).unwrap(), Wake::Rescan);
        waiter.follow(&db).unwrap();
        assert_eq!(
            waiter.wait(Duration::from_millis(300)).unwrap(),
            Wake::Timeout
        );
        let mut w = c.writer(&db).unwrap();
        let field = FieldRef {
            object: "x.data".into(),
            offset: 0,
            length: 1,
            checksum: None,
            extract: None,
        };
        w.add(
            &Key::parse("{type=fc}").unwrap(),
            &Key::parse("{step=0}").unwrap(),
            field,
        )
        .unwrap();
        w.commit().unwrap();
        assert_eq!(
            waiter.wait(Duration::from_secs(10)).unwrap(),
            Wake::Changed(vec![db.id.clone()])
        );
    }
}
