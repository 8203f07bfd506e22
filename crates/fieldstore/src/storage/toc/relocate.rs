//! Moving a whole database to another root, atomically for readers: the copy is made under a
//! hidden name, checked, renamed into place, and only then is the old copy's journal renamed
//! away (one rename: the old copy is invisible at once). Between the two renames both copies
//! hold identical bytes, and every lookup picks the new one (the old one carries a marker).
//! Readers that already opened the old copy's files keep reading them until it is deleted after
//! a grace period.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::catalogue::TocCatalogue;
use super::maintenance;
use super::placement::fs_space;
use crate::checksum::Crc32c;
use crate::model::config::Root;
use crate::storage::names::unique_name;
use crate::storage::{DbRef, StorageError};

/// In a destination root's entry name: `.NAME.moving.UNIQUE` is a copy being made.
pub const MOVING: &str = ".moving.";
/// The old copy's journal once the new copy is the one (`toc.moved.UNIQUE`).
pub const MOVED_PREFIX: &str = "toc.moved.";
/// In the old copy while both exist: names where the new copy is.
pub(crate) const LEAVING: &str = "moving-out";
/// How long both copies stay visible: a reader that listed the databases just before the new
/// copy appeared opens the old one's journal within it.
pub(crate) const OVERLAP: Duration = Duration::from_secs(1);
/// Written into the archive lock a move takes, so a lock left by a killed move is told from an
/// operator's.
pub(crate) const LOCK_TAG: &str = "move by pid ";

/// Whether this copy of a database is being left by a move (another copy is the one to use).
pub(crate) fn being_left(fs: &dyn crate::storage::fs::FileSystem, dir: &Path) -> bool {
    fs.exists(&dir.join(LEAVING))
}

/// Whether this copy was left for a bucket's (its marker names an `s3://` copy): such a copy
/// is dead for good, even once the bucket's copy is wiped, and must never come back.
pub(crate) fn left_for_bucket(dir: &Path) -> bool {
    std::fs::read(dir.join(LEAVING)).is_ok_and(|t| t.starts_with(b"s3://"))
}

/// How a move runs.
#[derive(Clone)]
pub struct MoveOptions {
    /// Report what would move and check the destination, copy nothing.
    pub dry_run: bool,
    /// Leave the old copy's files (invisible) instead of deleting them.
    pub keep: bool,
    /// How long readers that opened the old copy's files get before they are deleted.
    pub grace: Duration,
    /// Only databases whose `date` is more than this many days before today (none without a
    /// date).
    pub older_than_days: Option<u32>,
    /// Called with (bytes copied, bytes in all) as the copy goes.
    pub progress: Option<std::sync::Arc<dyn Fn(u64, u64) + Send + Sync>>,
    /// For a move into a bucket: return only once the old copy is hidden and (unless `keep`)
    /// deleted, its pause and grace waited out, rather than leaving that to a later move or
    /// lifecycle run (docs/lifecycle.md, "Retiring the old copy").
    pub wait: bool,
}

impl Default for MoveOptions {
    fn default() -> Self {
        MoveOptions {
            dry_run: false,
            keep: false,
            grace: Duration::from_secs(2),
            older_than_days: None,
            progress: None,
            wait: false,
        }
    }
}

/// What a move did (or, dry, would do).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoveReport {
    pub from: PathBuf,
    pub to: PathBuf,
    pub files: usize,
    pub bytes: u64,
    pub done: bool,
}

fn io(op: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> StorageError {
    StorageError::io(op, path.to_path_buf())
}

fn config(detail: String) -> StorageError {
    StorageError::Config { detail }
}

/// The files of a database directory with their sizes, in name order.
pub(crate) fn files_of(dir: &Path) -> Result<Vec<(String, u64)>, StorageError> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).map_err(io("list", dir))? {
        let e = e.map_err(io("list", dir))?;
        let m = e.metadata().map_err(io("stat", &e.path()))?;
        if m.is_file() {
            out.push((e.file_name().to_string_lossy().into_owned(), m.len()));
        }
    }
    out.sort();
    Ok(out)
}

pub(crate) fn sync_dir(dir: &Path) -> Result<(), StorageError> {
    std::fs::File::open(dir)
        .and_then(|f| f.sync_all())
        .map_err(io("sync", dir))
}

/// Copies one file, synced, and checks the copy reads back with the source's size and CRC.
fn copy_checked(
    from: &Path,
    to: &Path,
    done: &mut u64,
    total: u64,
    progress: &Option<std::sync::Arc<dyn Fn(u64, u64) + Send + Sync>>,
) -> Result<(), StorageError> {
    let mut src = std::fs::File::open(from).map_err(io("open", from))?;
    let mut dst = std::fs::File::create(to).map_err(io("create", to))?;
    let mut crc = Crc32c::new();
    let mut len = 0u64;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = src.read(&mut buf).map_err(io("read", from))?;
        if n == 0 {
            break;
        }
        crc.update(&buf[..n]);
        dst.write_all(&buf[..n]).map_err(io("write", to))?;
        len += n as u64;
        *done += n as u64;
        if let Some(p) = progress {
            p(*done, total);
        }
    }
    dst.sync_all().map_err(io("sync", to))?;
    drop(dst);
    let mut back = std::fs::File::open(to).map_err(io("open", to))?;
    let mut check = Crc32c::new();
    let mut back_len = 0u64;
    loop {
        let n = back.read(&mut buf).map_err(io("read", to))?;
        if n == 0 {
            break;
        }
        check.update(&buf[..n]);
        back_len += n as u64;
    }
    if back_len != len || check.value() != crc.value() {
        return Err(config(format!(
            "copy of {} to {} does not read back as written ({len} bytes, crc {:08x}; read {back_len} bytes, crc {:08x})",
            from.display(),
            to.display(),
            crc.value(),
            check.value()
        )));
    }
    Ok(())
}

pub(crate) fn pid_alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// Whether the archive lock in `dir` was taken by a move whose process is gone.
fn stale_move_lock(dir: &Path) -> bool {
    move_pid(dir).is_some_and(|p| !pid_alive(p))
}

/// The process that holds the archive lock in `dir` for a move, if a move took it.
pub(crate) fn move_pid(dir: &Path) -> Option<u32> {
    let lock = maintenance::lock_path(dir, "archive");
    let text = std::fs::read_to_string(lock).ok()?;
    text.strip_prefix(LOCK_TAG)?.trim().parse().ok()
}

impl TocCatalogue {
    /// The configured root at `dest` (as written in the config, or the same directory), of the
    /// database's space: writers look for an existing database only in its space's roots.
    pub(crate) fn configured_root(&self, db: &DbRef, dest: &Path) -> Result<Root, StorageError> {
        let layout = self.layout();
        let all: Vec<&Root> = layout.spaces.iter().flat_map(|s| &s.roots).collect();
        let root = all
            .iter()
            .find(|r| same_dir(&r.path, dest))
            .ok_or_else(|| {
                config(format!(
                    "{} is not a root of this config; its roots: {}",
                    dest.display(),
                    all.iter()
                        .map(|r| r.path.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            })?;
        let space = layout.space(&db.key);
        if !space.is_some_and(|s| s.roots.iter().any(|r| same_dir(&r.path, dest))) {
            return Err(config(format!(
                "root {} is not in the space of database {} (a database stays in the roots of the first space whose regex matches it{})",
                root.path.display(),
                db.key,
                space.map_or(String::new(), |s| format!(
                    ": {}",
                    s.roots
                        .iter()
                        .map(|r| r.path.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ))
            )));
        }
        if !root.archive || !root.list {
            return Err(config(format!(
                "root {} cannot take a moved database: it must be archive- and list-enabled in the config (archive: {}, list: {})",
                root.path.display(),
                root.archive,
                root.list
            )));
        }
        Ok((*root).clone())
    }

    /// Finishes or undoes what a killed move of the database named `name` left in any root:
    /// hidden partial copies, an old copy still marked as being left, a lock of a dead move.
    ///
    /// Refused while a move of it runs (on this host): its partial copy is not a leftover.
    pub(crate) fn recover_moves(&self, name: &str) -> Result<(), StorageError> {
        let layout = self.layout();
        let roots: Vec<PathBuf> = layout.visit_roots().map(|r| r.path.clone()).collect();
        if let Some(pid) = roots
            .iter()
            .find_map(|r| move_pid(&r.join(name)).filter(|p| pid_alive(*p)))
        {
            return Err(config(format!(
                "database {name} is being moved by process {pid}; wait for it to finish"
            )));
        }
        let partial = format!(".{name}{MOVING}");
        for root in &roots {
            if let Ok(rd) = std::fs::read_dir(root) {
                for e in rd.flatten() {
                    if e.file_name().to_string_lossy().starts_with(&partial) {
                        let p = e.path();
                        std::fs::remove_dir_all(&p).map_err(io("remove", &p))?;
                    }
                }
            }
        }
        let copies: Vec<PathBuf> = roots
            .iter()
            .map(|r| r.join(name))
            .filter(|p| p.join("toc").is_file())
            .collect();
        for p in roots.iter().map(|r| r.join(name)) {
            let leaving = p.join(LEAVING);
            if leaving.exists() {
                let other = copies.iter().any(|c| c != &p && !c.join(LEAVING).exists());
                // A marker naming a bucket is written only once the bucket's copy was
                // committed whole: that copy is the one, never this.
                if other || left_for_bucket(&p) {
                    hide(&p)?;
                } else {
                    std::fs::remove_file(&leaving).map_err(io("remove", &leaving))?;
                }
            }
            // An old copy whose journal was renamed away: only its files are left.
            if p.is_dir() && !p.join("toc").exists() {
                let moved = files_of(&p)?
                    .iter()
                    .any(|(f, _)| f.starts_with(MOVED_PREFIX));
                if moved {
                    remove_old_copy(&p)?;
                    continue;
                }
            }
            if stale_move_lock(&p) {
                let l = maintenance::lock_path(&p, "archive");
                std::fs::remove_file(&l).map_err(io("remove", &l))?;
            }
        }
        Ok(())
    }

    /// Whether the database's directory is directly under `root`.
    pub fn is_in_root(&self, db: &DbRef, root: &Path) -> bool {
        Path::new(&db.id)
            .parent()
            .is_some_and(|p| same_dir(p, root))
    }

    /// Moves the database `db` into the configured root `dest`.
    pub fn move_database(
        &self,
        db: &DbRef,
        dest: &Path,
        opts: &MoveOptions,
    ) -> Result<MoveReport, StorageError> {
        let from = PathBuf::from(&db.id);
        let name = from
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| config(format!("{} is not a database directory", db.id)))?;
        let root = self.configured_root(db, dest)?;
        if !opts.dry_run {
            crate::storage::catalogue::Catalogue::may_change(self, db, "move")?;
        }
        if from.parent().is_some_and(|p| same_dir(p, &root.path)) {
            return Err(config(format!(
                "database {} is already in root {}",
                db.key,
                root.path.display()
            )));
        }
        let to = root.path.join(&name);
        if !opts.dry_run {
            self.recover_moves(&name)?;
        }
        if to.join("toc").exists() {
            return Err(config(format!(
                "root {} already holds a database named {name}",
                root.path.display()
            )));
        }
        let files = files_of(&from)?;
        let bytes: u64 = files.iter().map(|(_, n)| n).sum();
        // Checked before anything is copied: a full destination must not be found half way.
        if let Some(space) = fs_space(&root.path) {
            let margin = 1 << 20;
            if space.free < bytes + margin {
                return Err(config(format!(
                    "root {} has {} bytes free; database {} needs {bytes} (plus 1 MiB margin)",
                    root.path.display(),
                    space.free,
                    db.key
                )));
            }
        }
        std::fs::create_dir_all(&root.path).map_err(|e| {
            config(format!(
                "root {} does not exist and cannot be created: {e}",
                root.path.display()
            ))
        })?;
        let partial = root.path.join(format!(".{name}{MOVING}{}", unique_name()));
        std::fs::create_dir(&partial)
            .map_err(|e| config(format!("root {} is not writable: {e}", root.path.display())))?;
        let report = MoveReport {
            from: from.clone(),
            to: to.clone(),
            files: files.len(),
            bytes,
            done: !opts.dry_run,
        };
        if opts.dry_run {
            std::fs::remove_dir(&partial).map_err(io("remove", &partial))?;
            return Ok(report);
        }
        let result = self.move_locked(&from, &partial, &to, &root.path, opts);
        if result.is_err() {
            let _ = std::fs::remove_dir_all(&partial);
        }
        result.map(|_| report)
    }

    fn move_locked(
        &self,
        from: &Path,
        partial: &Path,
        to: &Path,
        dest_root: &Path,
        opts: &MoveOptions,
    ) -> Result<(), StorageError> {
        let lock = maintenance::lock_path(from, "archive");
        if lock.exists() {
            return Err(StorageError::Config {
                detail: format!(
                    "{} is locked for archive (another move, or an operator's lock: `fieldstore control --unlock --archive`)",
                    from.display()
                ),
            });
        }
        std::fs::write(&lock, format!("{LOCK_TAG}{}", std::process::id()))
            .map_err(io("create", &lock))?;
        let copied = self.copy_settled(from, partial, opts);
        if let Err(e) = copied {
            let _ = std::fs::remove_file(&lock);
            return Err(e);
        }
        // From here the old copy gives way to the new one wherever both are seen.
        let leaving = from.join(LEAVING);
        std::fs::write(&leaving, to.display().to_string()).map_err(io("create", &leaving))?;
        sync_dir(from)?;
        std::fs::rename(partial, to).map_err(io("rename", partial))?;
        sync_dir(dest_root)?;
        self.forget_usage(dest_root);
        if let Some(p) = from.parent() {
            self.forget_usage(p);
        }
        // A reader that chose the old copy just before the new one appeared gets to open it.
        std::thread::sleep(OVERLAP);
        hide(from)?;
        let dest_lock = maintenance::lock_path(to, "archive");
        std::fs::remove_file(&dest_lock).map_err(io("remove", &dest_lock))?;
        if !opts.keep {
            std::thread::sleep(opts.grace);
            remove_old_copy(from)?;
        }
        Ok(())
    }

    /// Copies every file, again while a writer that had the database open before the lock
    /// still changes it (bounded), so the copy equals the source when it is renamed in.
    fn copy_settled(
        &self,
        from: &Path,
        partial: &Path,
        opts: &MoveOptions,
    ) -> Result<(), StorageError> {
        for _ in 0..5 {
            let before = files_of(from)?;
            let total: u64 = before.iter().map(|(_, n)| n).sum();
            let mut done = 0;
            for (f, _) in &before {
                copy_checked(
                    &from.join(f),
                    &partial.join(f),
                    &mut done,
                    total,
                    &opts.progress,
                )?;
            }
            sync_dir(partial)?;
            if files_of(from)? == before && files_of(partial)? == before {
                return Ok(());
            }
            for (f, _) in files_of(partial)? {
                let p = partial.join(f);
                std::fs::remove_file(&p).map_err(io("remove", &p))?;
            }
        }
        Err(config(format!(
            "{} kept changing while it was copied (a writer that opened it before the move is still archiving): stop it and move again",
            from.display()
        )))
    }
}

/// The same directory, as written or once links are resolved.
fn same_dir(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// Deletes an old copy whose journal was renamed away. Deleted in place, it would for a moment
/// hold data files and no renamed journal, which listings report as a database that lost its
/// `toc`; renamed first to a hidden `.NAME.moving.*` name, no listing ever sees it.
pub(crate) fn remove_old_copy(dir: &Path) -> Result<(), StorageError> {
    let name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let gone = dir.with_file_name(format!(".{name}{MOVING}gone.{}", unique_name()));
    std::fs::rename(dir, &gone).map_err(io("rename", dir))?;
    std::fs::remove_dir_all(&gone).map_err(io("remove", &gone))
}

/// Makes an old copy invisible in one rename of its journal; its files stay for readers.
pub(crate) fn hide(dir: &Path) -> Result<(), StorageError> {
    let toc = dir.join("toc");
    let moved = dir.join(format!("{MOVED_PREFIX}{}", unique_name()));
    std::fs::rename(&toc, &moved).map_err(io("rename", &toc))?;
    sync_dir(dir)
}

/// Takes the archive lock of the database in `dir` for a move by this process (writers opening
/// it get `locked`); refused when any lock is there. Returns the lock file.
pub(crate) fn take_move_lock(dir: &Path) -> Result<PathBuf, StorageError> {
    let lock = maintenance::lock_path(dir, "archive");
    if lock.exists() {
        return Err(StorageError::Config {
            detail: format!(
                "{} is locked for archive (another move, or an operator's lock: `fieldstore control --unlock --archive`)",
                dir.display()
            ),
        });
    }
    std::fs::write(&lock, format!("{LOCK_TAG}{}", std::process::id()))
        .map_err(io("create", &lock))?;
    Ok(lock)
}
