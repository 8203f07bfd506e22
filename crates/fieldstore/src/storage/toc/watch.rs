//! Tells toc subscribers when a journal grew or a database appeared, without polling: inotify
//! watches on the roots (databases made, wiped, moved), on database directories still without a
//! journal (one linked in) and on each followed database's `toc` (an append).
//!
//! Through the `inotify` crate rather than `notify`: only Linux's inotify is wanted here (the
//! feed rescans every 2 s for what inotify cannot see, writes from other NFS or Lustre nodes),
//! and `inotify` is the thin, well-kept binding `notify` itself builds on, without its event
//! thread and debouncing. Where watches cannot be set (inotify's limits, a file system without
//! it, a simulated one in tests) the waiter polls the journals' sizes every [`POLL_INTERVAL`].

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use inotify::{EventMask, Inotify, WatchDescriptor, WatchMask};

use crate::storage::fs::FileSystem;
use crate::storage::history::{ChangeWaiter, Wake};
use crate::storage::{DbRef, StorageError};

/// How often the fallback looks at the followed journals' sizes and the roots.
pub const POLL_INTERVAL: Duration = Duration::from_millis(100);

/// The fallback is announced once per process, not once per subscription.
static FALLBACK_LOGGED: AtomicBool = AtomicBool::new(false);

/// What a watch is on.
#[derive(Debug, Clone)]
enum Target {
    Root,
    /// A database directory without a journal: a `toc` linked into it is a new journal.
    Dir,
    /// A database's journal.
    Toc(String),
    /// An FDB5 database's directory: its writers append to sub-tocs (`toc.*`), not the `toc`.
    SubTocs(String),
}

struct Watcher {
    inotify: Inotify,
    targets: HashMap<WatchDescriptor, Target>,
    buffer: Vec<u8>,
}

/// What the fallback saw last: each journal's (inode, length), each root's entries (hashed).
#[derive(Default)]
struct Poller {
    tocs: BTreeMap<String, Option<(u64, u64)>>,
    roots: BTreeMap<PathBuf, Option<u64>>,
}

enum Mode {
    Watching(Watcher),
    Polling(Poller),
}

pub struct TocWaiter {
    fs: Arc<dyn FileSystem>,
    roots: Vec<PathBuf>,
    followed: BTreeSet<String>,
    mode: Mode,
}

impl TocWaiter {
    pub fn new(fs: Arc<dyn FileSystem>, roots: Vec<PathBuf>) -> TocWaiter {
        let mut w = TocWaiter {
            fs,
            roots,
            followed: BTreeSet::new(),
            mode: Mode::Polling(Poller::default()),
        };
        match w.watch_roots() {
            Ok(watcher) => {
                w.mode = Mode::Watching(watcher);
                if let Err(e) = w.rearm() {
                    w.fall_back(&e);
                }
            }
            Err(e) => w.fall_back(&e),
        }
        w
    }

    fn watch_roots(&self) -> std::io::Result<Watcher> {
        // Roots the catalogue's file system has and the kernel's has not: a simulated one.
        if let Some(r) = self.roots.iter().find(|r| self.fs.is_dir(r) && !r.is_dir()) {
            return Err(std::io::Error::other(format!(
                "root {} is not on a file system the kernel can watch",
                r.display()
            )));
        }
        let inotify = Inotify::init()?;
        let mut watcher = Watcher {
            inotify,
            targets: HashMap::new(),
            buffer: vec![0; 64 * 1024],
        };
        for r in &self.roots {
            // A root not made yet holds no database; the feed's rescans find it once it is.
            if !r.is_dir() {
                continue;
            }
            let wd = watcher.inotify.watches().add(
                r,
                WatchMask::CREATE | WatchMask::MOVED_TO | WatchMask::DELETE | WatchMask::MOVED_FROM,
            )?;
            watcher.targets.insert(wd, Target::Root);
        }
        Ok(watcher)
    }

    /// Switches to polling, from the state the files are in now.
    fn fall_back(&mut self, why: &std::io::Error) {
        if !FALLBACK_LOGGED.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                "subscribers cannot watch the toc journals ({why}); they look every {} ms instead",
                POLL_INTERVAL.as_millis()
            );
        }
        let mut p = Poller::default();
        for r in &self.roots {
            p.roots.insert(r.clone(), self.root_state(r));
        }
        for id in &self.followed {
            p.tocs.insert(id.clone(), self.toc_state(id));
        }
        self.mode = Mode::Polling(p);
    }

    fn toc_state(&self, id: &str) -> Option<(u64, u64)> {
        let m = self.fs.metadata(&Path::new(id).join("toc")).ok()?;
        Some((m.ino, m.len))
    }

    /// The root's entries, hashed: a directory's modification time is too coarse on some file
    /// systems (and absent on others) to tell a database made within the same second.
    fn root_state(&self, root: &Path) -> Option<u64> {
        use std::hash::{Hash, Hasher};
        let mut names: Vec<String> = self
            .fs
            .read_dir(root)
            .ok()?
            .into_iter()
            .map(|e| e.file_name())
            .collect();
        names.sort_unstable();
        let mut h = std::collections::hash_map::DefaultHasher::new();
        names.hash(&mut h);
        Some(h.finish())
    }

    /// Watches a database's journal, or while it has none (being made again after a wipe)
    /// its directory, which tells when one is linked in. A database gone meanwhile is not an
    /// error: the feed learns that from its commits. (Wipes and moves rename directories in
    /// the roots, which the roots' watches see.)
    fn watch_db(w: &mut Watcher, id: &str) -> std::io::Result<()> {
        let dir = Path::new(id);
        let toc = w.inotify.watches().add(
            dir.join("toc"),
            WatchMask::MODIFY | WatchMask::MOVE_SELF | WatchMask::DELETE_SELF,
        );
        match toc {
            Ok(wd) => {
                w.targets.insert(wd, Target::Toc(id.to_string()));
                if crate::storage::fdb5::toc::is_fdb5_toc(
                    &crate::storage::fs::OsFs,
                    &dir.join("toc"),
                ) {
                    let wd = w.inotify.watches().add(dir, WatchMask::MODIFY)?;
                    w.targets.insert(wd, Target::SubTocs(id.to_string()));
                }
                return Ok(());
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e),
        }
        Self::watch_dir(w, dir)
    }

    /// Watches a database directory without a journal for one to be linked in.
    fn watch_dir(w: &mut Watcher, dir: &Path) -> std::io::Result<()> {
        match w
            .inotify
            .watches()
            .add(dir, WatchMask::CREATE | WatchMask::MOVED_TO)
        {
            Ok(wd) => {
                w.targets.insert(wd, Target::Dir);
                Ok(())
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Reads the queued events into what they mean; `None` when none were queued.
    fn drain(w: &mut Watcher) -> std::io::Result<Option<Wake>> {
        let mut changed = BTreeSet::new();
        let mut rescan = false;
        let mut any = false;
        let mut done = Vec::new();
        loop {
            let events = match w.inotify.read_events(&mut w.buffer) {
                Ok(ev) => ev,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            for ev in events {
                any = true;
                if ev.mask.contains(EventMask::Q_OVERFLOW) {
                    rescan = true;
                    continue;
                }
                let target = w.targets.get(&ev.wd).cloned();
                if ev.mask.contains(EventMask::IGNORED) {
                    w.targets.remove(&ev.wd);
                    continue;
                }
                match target {
                    Some(Target::Root) => rescan = true,
                    // Its journal is there: the journal's own watch takes over (set by the
                    // rescan this asks for), and the directory's other files are no concern.
                    Some(Target::Dir) if ev.name.is_some_and(|n| n == "toc") => {
                        rescan = true;
                        done.push(ev.wd.clone());
                    }
                    Some(Target::Dir) => {}
                    Some(Target::Toc(id)) => {
                        changed.insert(id);
                    }
                    Some(Target::SubTocs(id))
                        if ev
                            .name
                            .is_some_and(|n| n.to_string_lossy().starts_with("toc.")) =>
                    {
                        changed.insert(id);
                    }
                    Some(Target::SubTocs(_)) => {}
                    None => {}
                }
            }
        }
        for wd in done {
            if w.targets.remove(&wd).is_some() {
                // Already gone if the directory went: nothing to undo then.
                let _ = w.inotify.watches().remove(wd);
            }
        }
        if !any {
            return Ok(None);
        }
        Ok(Some(if rescan {
            Wake::Rescan
        } else if changed.is_empty() {
            Wake::Timeout
        } else {
            Wake::Changed(changed.into_iter().collect())
        }))
    }

    /// Blocks until the inotify descriptor has events or `timeout` passed.
    fn ready(w: &Watcher, timeout: Duration) -> std::io::Result<bool> {
        let mut pfd = libc::pollfd {
            fd: w.inotify.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_micros().div_ceil(1000).min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd, for the duration of the call.
        let n = unsafe { libc::poll(&mut pfd, 1, ms) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                return Ok(false);
            }
            return Err(e);
        }
        Ok(n > 0)
    }

    fn wait_watching(&mut self, deadline: Instant) -> std::io::Result<Wake> {
        loop {
            let Mode::Watching(w) = &mut self.mode else {
                return Ok(Wake::Rescan);
            };
            if let Some(wake) = Self::drain(w)? {
                if matches!(wake, Wake::Rescan) {
                    // A new database directory, or a journal linked into one (a database made
                    // again after a wipe): watch what is there now.
                    self.rearm()?;
                }
                if !matches!(wake, Wake::Timeout) {
                    return Ok(wake);
                }
                continue;
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Wake::Timeout);
            }
            Self::ready(w, deadline - now)?;
        }
    }

    /// Watches the database directories under the roots that have no journal yet (being
    /// made: the directory tells when it gets one) and every followed journal.
    fn rearm(&mut self) -> std::io::Result<()> {
        let Mode::Watching(w) = &mut self.mode else {
            return Ok(());
        };
        for r in &self.roots {
            let Ok(entries) = self.fs.read_dir(r) else {
                continue;
            };
            for e in entries {
                let name = e.file_name();
                if name.starts_with('.') || !e.is_dir {
                    continue;
                }
                if self.fs.exists(&e.path.join("toc")) {
                    continue;
                }
                Self::watch_dir(w, &e.path)?;
            }
        }
        for id in &self.followed {
            Self::watch_db(w, id)?;
        }
        Ok(())
    }

    fn wait_polling(&mut self, deadline: Instant) -> Wake {
        loop {
            let mut rescan = false;
            let mut changed = Vec::new();
            let roots: Vec<(PathBuf, Option<u64>)> = self
                .roots
                .iter()
                .map(|r| (r.clone(), self.root_state(r)))
                .collect();
            let tocs: Vec<(String, Option<(u64, u64)>)> = self
                .followed
                .iter()
                .map(|id| (id.clone(), self.toc_state(id)))
                .collect();
            let Mode::Polling(p) = &mut self.mode else {
                return Wake::Rescan;
            };
            for (r, now) in roots {
                if p.roots.insert(r, now) != Some(now) {
                    rescan = true;
                }
            }
            for (id, now) in tocs {
                if p.tocs.insert(id.clone(), now) != Some(now) {
                    changed.push(id);
                }
            }
            if rescan {
                return Wake::Rescan;
            }
            if !changed.is_empty() {
                return Wake::Changed(changed);
            }
            let now = Instant::now();
            if now >= deadline {
                return Wake::Timeout;
            }
            std::thread::sleep((deadline - now).min(POLL_INTERVAL));
        }
    }
}

impl ChangeWaiter for TocWaiter {
    fn follow(&mut self, db: &DbRef) -> Result<(), StorageError> {
        self.followed.insert(db.id.clone());
        let failed = match &mut self.mode {
            Mode::Watching(w) => Self::watch_db(w, &db.id).err(),
            Mode::Polling(_) => None,
        };
        if let Some(e) = failed {
            self.fall_back(&e);
        }
        let state = self.toc_state(&db.id);
        if let Mode::Polling(p) = &mut self.mode {
            p.tocs.insert(db.id.clone(), state);
        }
        Ok(())
    }

    fn wait(&mut self, timeout: Duration) -> Result<Wake, StorageError> {
        let deadline = Instant::now() + timeout;
        if let Mode::Watching(_) = self.mode {
            match self.wait_watching(deadline) {
                Ok(wake) => return Ok(wake),
                Err(e) => {
                    // Whatever the watches missed, the rescan below catches up with.
                    self.fall_back(&e);
                    return Ok(Wake::Rescan);
                }
            }
        }
        Ok(self.wait_polling(deadline))
    }
}
