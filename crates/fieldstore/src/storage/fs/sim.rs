//! A simulated file system for tests (public so integration tests can use it; nothing else
//! should). It keeps everything in memory and models durability as a kernel does: a file's data
//! survives a crash only up to its last `sync_data`, a directory's entries (creations, renames,
//! removals) only as of its last `sync_dir`. [`SimFs::crash`] drops the rest, optionally
//! keeping a random prefix of unsynced appends (a torn write). Every `sync_data`, `sync_dir`
//! and `rename` is a numbered *sync point*; [`SimFs::crash_at`] crashes at one, so a test can
//! visit each in turn. Faults: the n-th operation of a kind fails with EIO, and writes fail with
//! ENOSPC once a byte budget is spent. Locks behave as `flock`: per open file, in-process.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::SystemTime;

use super::{DirEntry, FileSystem, FsFile, Mapped, Metadata, OpenMode};

/// Kinds of operation, for fault injection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    Open,
    Read,
    Write,
    Sync,
    SyncDir,
    Rename,
    Link,
    Remove,
    CreateDir,
    ReadDir,
    Metadata,
    Lock,
}

const ROOT: u64 = 1;

enum Node {
    File {
        data: Vec<u8>,
        synced: Vec<u8>,
    },
    Dir {
        entries: BTreeMap<OsString, u64>,
        durable: BTreeMap<OsString, u64>,
    },
}

struct Inode {
    node: Node,
    modified: SystemTime,
    /// The open file holding its lock.
    locked_by: Option<u64>,
}

struct State {
    inodes: HashMap<u64, Inode>,
    next_ino: u64,
    next_handle: u64,
    /// Bumped by each crash: files opened before it are dead.
    epoch: u64,
    sync_points: u64,
    crash_at: Option<u64>,
    /// Set by a crash at a sync point: every operation fails until `restart`.
    down: bool,
    /// Per kind: operations left before one fails.
    fail_in: HashMap<Op, u64>,
    space_left: Option<u64>,
    torn: Option<u64>,
}

/// See the module documentation. Cheap to clone: clones share one file system.
#[derive(Clone)]
pub struct SimFs(Arc<Shared>);

struct Shared {
    state: Mutex<State>,
    unlocked: Condvar,
}

impl std::fmt::Debug for SimFs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SimFs")
    }
}

impl Default for SimFs {
    fn default() -> Self {
        Self::new()
    }
}

fn eio(what: &str) -> io::Error {
    io::Error::other(format!("simulated I/O error ({what})"))
}

fn errno(code: i32) -> io::Error {
    io::Error::from_raw_os_error(code)
}

fn not_found() -> io::Error {
    io::Error::from(io::ErrorKind::NotFound)
}

/// The path's components below the root (`.` dropped; `..` pops).
fn components(path: &Path) -> Vec<OsString> {
    let mut out: Vec<OsString> = Vec::new();
    for c in path.components() {
        match c {
            Component::Normal(n) => out.push(n.to_os_string()),
            Component::ParentDir => {
                out.pop();
            }
            _ => {}
        }
    }
    out
}

impl State {
    fn dir_entries(&self, ino: u64) -> io::Result<&BTreeMap<OsString, u64>> {
        match self.inodes.get(&ino).map(|i| &i.node) {
            Some(Node::Dir { entries, .. }) => Ok(entries),
            Some(Node::File { .. }) => Err(errno(libc::ENOTDIR)),
            None => Err(not_found()),
        }
    }

    fn dir_entries_mut(&mut self, ino: u64) -> io::Result<&mut BTreeMap<OsString, u64>> {
        match self.inodes.get_mut(&ino).map(|i| &mut i.node) {
            Some(Node::Dir { entries, .. }) => Ok(entries),
            Some(Node::File { .. }) => Err(errno(libc::ENOTDIR)),
            None => Err(not_found()),
        }
    }

    fn lookup(&self, path: &Path) -> io::Result<u64> {
        let mut ino = ROOT;
        for c in components(path) {
            ino = *self.dir_entries(ino)?.get(&c).ok_or_else(not_found)?;
        }
        Ok(ino)
    }

    /// The parent directory's inode and the last component.
    fn parent(&self, path: &Path) -> io::Result<(u64, OsString)> {
        let mut c = components(path);
        let name = c
            .pop()
            .ok_or_else(|| io::Error::from(io::ErrorKind::InvalidInput))?;
        let dir: PathBuf = c.iter().collect();
        Ok((self.lookup(&Path::new("/").join(dir))?, name))
    }

    fn add(&mut self, node: Node) -> u64 {
        let ino = self.next_ino;
        self.next_ino += 1;
        self.inodes.insert(
            ino,
            Inode {
                node,
                modified: SystemTime::now(),
                locked_by: None,
            },
        );
        ino
    }

    fn new_file(&mut self) -> u64 {
        self.add(Node::File {
            data: Vec::new(),
            synced: Vec::new(),
        })
    }

    /// Counts an operation: fails it if the system is down or a fault is due.
    fn op(&mut self, kind: Op) -> io::Result<()> {
        if self.down {
            return Err(eio("crashed"));
        }
        if let Some(n) = self.fail_in.get_mut(&kind) {
            *n -= 1;
            if *n == 0 {
                self.fail_in.remove(&kind);
                return Err(eio(&format!("{kind:?} fault")));
            }
        }
        Ok(())
    }

    /// A sync point: crashes instead, when it is the one asked for.
    fn sync_point(&mut self) -> io::Result<()> {
        self.sync_points += 1;
        if self.crash_at == Some(self.sync_points) {
            self.crash_at = None;
            self.crash();
            self.down = true;
            return Err(eio("crashed at a sync point"));
        }
        Ok(())
    }

    fn spend(&mut self, n: usize) -> io::Result<()> {
        if let Some(left) = &mut self.space_left {
            if (n as u64) > *left {
                return Err(errno(libc::ENOSPC));
            }
            *left -= n as u64;
        }
        Ok(())
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64: reproducible from the seed a test gave.
        let mut x = self.torn.unwrap_or(0) | 1;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.torn = Some(x);
        x
    }

    fn crash(&mut self) {
        self.epoch += 1;
        let torn = self.torn.is_some();
        let inos: Vec<u64> = self.inodes.keys().copied().collect();
        for ino in inos {
            let keep = if torn { self.next_random() } else { 0 };
            let Some(inode) = self.inodes.get_mut(&ino) else {
                continue;
            };
            inode.locked_by = None;
            match &mut inode.node {
                Node::File { data, synced } => {
                    let mut kept = synced.clone();
                    if torn && data.len() > synced.len() && data.starts_with(synced) {
                        let extra = (keep % (data.len() - synced.len() + 1) as u64) as usize;
                        kept.extend_from_slice(&data[synced.len()..synced.len() + extra]);
                    }
                    *data = kept;
                }
                Node::Dir { entries, durable } => *entries = durable.clone(),
            }
        }
        // What no durable directory reaches is gone.
        let mut reachable = HashSet::from([ROOT]);
        let mut todo = vec![ROOT];
        while let Some(ino) = todo.pop() {
            if let Some(Inode {
                node: Node::Dir { entries, .. },
                ..
            }) = self.inodes.get(&ino)
            {
                for &child in entries.values() {
                    if reachable.insert(child) {
                        todo.push(child);
                    }
                }
            }
        }
        self.inodes.retain(|ino, _| reachable.contains(ino));
    }
}

impl SimFs {
    /// An empty file system: only `/`, durable.
    pub fn new() -> SimFs {
        let mut inodes = HashMap::new();
        inodes.insert(
            ROOT,
            Inode {
                node: Node::Dir {
                    entries: BTreeMap::new(),
                    durable: BTreeMap::new(),
                },
                modified: SystemTime::now(),
                locked_by: None,
            },
        );
        SimFs(Arc::new(Shared {
            state: Mutex::new(State {
                inodes,
                next_ino: ROOT + 1,
                next_handle: 1,
                epoch: 0,
                sync_points: 0,
                crash_at: None,
                down: false,
                fail_in: HashMap::new(),
                space_left: None,
                torn: None,
            }),
            unlocked: Condvar::new(),
        }))
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves the state consistent enough for a test.
        self.0.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Loses everything not durable, as a power cut would; files open before it stop working.
    pub fn crash(&self) {
        self.state().crash();
        self.0.unlocked.notify_all();
    }

    /// Sync points passed so far (every `sync_data`, `sync_dir` and `rename`, counted from 1).
    pub fn sync_points(&self) -> u64 {
        self.state().sync_points
    }

    /// Crashes when sync point `k` (as numbered by [`SimFs::sync_points`]) is reached, before
    /// it takes effect; every operation then fails until [`SimFs::restart`].
    pub fn crash_at(&self, k: u64) {
        self.state().crash_at = Some(k);
    }

    /// Whether a crash at a sync point happened and the system is still down.
    pub fn is_down(&self) -> bool {
        self.state().down
    }

    /// Comes back up after a crash at a sync point (the crash itself already happened).
    pub fn restart(&self) {
        self.state().down = false;
    }

    /// The `n`-th next operation of this kind (1: the next one) fails with an I/O error.
    pub fn fail_nth(&self, kind: Op, n: u64) {
        if n > 0 {
            self.state().fail_in.insert(kind, n);
        }
    }

    /// Disarms every fault and a pending [`SimFs::crash_at`], so a test can read what is there
    /// without its reads failing.
    pub fn clear_faults(&self) {
        let mut s = self.state();
        s.fail_in.clear();
        s.space_left = None;
        s.crash_at = None;
    }

    /// Writes fail with ENOSPC once this many more bytes have been written (`None`: no limit).
    pub fn set_space(&self, bytes: Option<u64>) {
        self.state().space_left = bytes;
    }

    /// With a seed, a crash keeps a pseudo-random prefix of each file's unsynced appends (torn
    /// writes); without, it keeps none.
    pub fn set_torn_writes(&self, seed: Option<u64>) {
        self.state().torn = seed;
    }

    /// The file's bytes as of its last sync (what a crash now would leave), for assertions.
    pub fn durable_len(&self, path: &Path) -> Option<u64> {
        let s = self.state();
        match s.lookup(path).ok().and_then(|i| s.inodes.get(&i)) {
            Some(Inode {
                node: Node::File { synced, .. },
                ..
            }) => Some(synced.len() as u64),
            _ => None,
        }
    }
}

impl FileSystem for SimFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn FsFile>> {
        let mut s = self.state();
        s.op(Op::Open)?;
        let create = matches!(
            mode,
            OpenMode::Append
                | OpenMode::CreateNew
                | OpenMode::Lock
                | OpenMode::ReadAppend { create: true }
        );
        let ino = match s.lookup(path) {
            Ok(ino) => {
                if mode == OpenMode::CreateNew {
                    return Err(io::Error::from(io::ErrorKind::AlreadyExists));
                }
                if matches!(s.inodes.get(&ino).map(|i| &i.node), Some(Node::Dir { .. })) {
                    return Err(errno(libc::EISDIR));
                }
                ino
            }
            Err(e) if e.kind() == io::ErrorKind::NotFound && create => {
                let (dir, name) = s.parent(path)?;
                let ino = s.new_file();
                s.dir_entries_mut(dir)?.insert(name, ino);
                ino
            }
            Err(e) => return Err(e),
        };
        let handle = s.next_handle;
        s.next_handle += 1;
        Ok(Box::new(SimFile {
            fs: self.clone(),
            ino,
            handle,
            epoch: s.epoch,
        }))
    }

    fn map(&self, path: &Path) -> io::Result<Mapped> {
        self.read(path).map(|d| Mapped::Bytes(d.into()))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        let mut s = self.state();
        s.op(Op::Read)?;
        let ino = s.lookup(path)?;
        match s.inodes.get(&ino).map(|i| &i.node) {
            Some(Node::File { data, .. }) => Ok(data.clone()),
            _ => Err(errno(libc::EISDIR)),
        }
    }

    fn write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        let mut s = self.state();
        s.op(Op::Write)?;
        s.spend(data.len())?;
        let ino = match s.lookup(path) {
            Ok(ino) => ino,
            Err(_) => {
                let (dir, name) = s.parent(path)?;
                let ino = s.new_file();
                s.dir_entries_mut(dir)?.insert(name, ino);
                ino
            }
        };
        match s.inodes.get_mut(&ino) {
            Some(Inode {
                node: Node::File { data: d, .. },
                modified,
                ..
            }) => {
                *d = data.to_vec();
                *modified = SystemTime::now();
                Ok(())
            }
            _ => Err(errno(libc::EISDIR)),
        }
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.state();
        s.op(Op::Rename)?;
        s.sync_point()?;
        let (from_dir, from_name) = s.parent(from)?;
        let ino = *s
            .dir_entries(from_dir)?
            .get(&from_name)
            .ok_or_else(not_found)?;
        let (to_dir, to_name) = s.parent(to)?;
        if let Some(&old) = s.dir_entries(to_dir)?.get(&to_name) {
            if let Some(Node::Dir { entries, .. }) = s.inodes.get(&old).map(|i| &i.node) {
                if !entries.is_empty() {
                    return Err(errno(libc::ENOTEMPTY));
                }
            }
        }
        s.dir_entries_mut(from_dir)?.remove(&from_name);
        s.dir_entries_mut(to_dir)?.insert(to_name, ino);
        Ok(())
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        let mut s = self.state();
        s.op(Op::Link)?;
        let ino = s.lookup(from)?;
        let (dir, name) = s.parent(to)?;
        let entries = s.dir_entries_mut(dir)?;
        if entries.contains_key(&name) {
            return Err(io::Error::from(io::ErrorKind::AlreadyExists));
        }
        entries.insert(name, ino);
        Ok(())
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        let mut s = self.state();
        s.op(Op::Remove)?;
        let (dir, name) = s.parent(path)?;
        let ino = *s.dir_entries(dir)?.get(&name).ok_or_else(not_found)?;
        if matches!(s.inodes.get(&ino).map(|i| &i.node), Some(Node::Dir { .. })) {
            return Err(errno(libc::EISDIR));
        }
        s.dir_entries_mut(dir)?.remove(&name);
        Ok(())
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        let mut s = self.state();
        s.op(Op::Remove)?;
        let (dir, name) = s.parent(path)?;
        let ino = *s.dir_entries(dir)?.get(&name).ok_or_else(not_found)?;
        if !s.dir_entries(ino)?.is_empty() {
            return Err(errno(libc::ENOTEMPTY));
        }
        s.dir_entries_mut(dir)?.remove(&name);
        Ok(())
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        let mut s = self.state();
        s.op(Op::CreateDir)?;
        let mut ino = ROOT;
        for c in components(path) {
            ino = match s.dir_entries(ino)?.get(&c) {
                Some(&child) => child,
                None => {
                    let child = s.add(Node::Dir {
                        entries: BTreeMap::new(),
                        durable: BTreeMap::new(),
                    });
                    s.dir_entries_mut(ino)?.insert(c, child);
                    child
                }
            };
        }
        s.dir_entries(ino).map(|_| ())
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        let mut s = self.state();
        s.op(Op::ReadDir)?;
        let ino = s.lookup(path)?;
        Ok(s.dir_entries(ino)?
            .iter()
            .map(|(name, child)| DirEntry {
                path: path.join(name),
                is_dir: matches!(s.inodes.get(child).map(|i| &i.node), Some(Node::Dir { .. })),
            })
            .collect())
    }

    fn metadata(&self, path: &Path) -> io::Result<Metadata> {
        let mut s = self.state();
        s.op(Op::Metadata)?;
        let ino = s.lookup(path)?;
        let i = s.inodes.get(&ino).ok_or_else(not_found)?;
        Ok(match &i.node {
            Node::File { data, .. } => Metadata {
                len: data.len() as u64,
                is_dir: false,
                ino,
                modified: i.modified,
            },
            Node::Dir { .. } => Metadata {
                len: 0,
                is_dir: true,
                ino,
                modified: i.modified,
            },
        })
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        let mut s = self.state();
        s.op(Op::SyncDir)?;
        s.sync_point()?;
        let ino = s.lookup(path)?;
        match s.inodes.get_mut(&ino).map(|i| &mut i.node) {
            Some(Node::Dir { entries, durable }) => {
                *durable = entries.clone();
                Ok(())
            }
            _ => Err(errno(libc::ENOTDIR)),
        }
    }
}

struct SimFile {
    fs: SimFs,
    ino: u64,
    handle: u64,
    epoch: u64,
}

impl SimFile {
    /// The state, if this file survived every crash since it was opened.
    fn live(&self, kind: Op) -> io::Result<MutexGuard<'_, State>> {
        let mut s = self.fs.state();
        s.op(kind)?;
        if s.epoch != self.epoch {
            return Err(eio("file opened before a crash"));
        }
        Ok(s)
    }

    fn data(s: &mut State, ino: u64) -> io::Result<(&mut Vec<u8>, &mut Vec<u8>)> {
        match s.inodes.get_mut(&ino).map(|i| &mut i.node) {
            Some(Node::File { data, synced }) => Ok((data, synced)),
            _ => Err(eio("file vanished")),
        }
    }
}

impl FsFile for SimFile {
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        let mut s = self.live(Op::Read)?;
        let (data, _) = Self::data(&mut s, self.ino)?;
        let start = (offset as usize).min(data.len());
        let n = buf.len().min(data.len() - start);
        buf[..n].copy_from_slice(&data[start..start + n]);
        Ok(n)
    }

    fn append(&self, bytes: &[u8]) -> io::Result<()> {
        let mut s = self.live(Op::Write)?;
        s.spend(bytes.len())?;
        let (data, _) = Self::data(&mut s, self.ino)?;
        data.extend_from_slice(bytes);
        if let Some(i) = s.inodes.get_mut(&self.ino) {
            i.modified = SystemTime::now();
        }
        Ok(())
    }

    fn len(&self) -> io::Result<u64> {
        let mut s = self.live(Op::Metadata)?;
        Ok(Self::data(&mut s, self.ino)?.0.len() as u64)
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        let mut s = self.live(Op::Write)?;
        let (data, _) = Self::data(&mut s, self.ino)?;
        data.resize(len as usize, 0);
        Ok(())
    }

    fn sync_data(&self) -> io::Result<()> {
        let mut s = self.live(Op::Sync)?;
        s.sync_point()?;
        let (data, synced) = Self::data(&mut s, self.ino)?;
        *synced = data.clone();
        Ok(())
    }

    fn lock(&self, wait: bool) -> io::Result<bool> {
        let mut s = self.live(Op::Lock)?;
        loop {
            if s.epoch != self.epoch {
                return Err(eio("file opened before a crash"));
            }
            let inode = s
                .inodes
                .get_mut(&self.ino)
                .ok_or_else(|| eio("file vanished"))?;
            match inode.locked_by {
                None => {
                    inode.locked_by = Some(self.handle);
                    return Ok(true);
                }
                Some(h) if h == self.handle => return Ok(true),
                Some(_) if !wait => return Ok(false),
                Some(_) => {
                    s = self
                        .fs
                        .0
                        .unlocked
                        .wait(s)
                        .unwrap_or_else(|e| e.into_inner());
                }
            }
        }
    }

    fn unlock(&self) {
        let mut s = self.fs.state();
        if let Some(i) = s.inodes.get_mut(&self.ino) {
            if i.locked_by == Some(self.handle) {
                i.locked_by = None;
            }
        }
        drop(s);
        self.fs.0.unlocked.notify_all();
    }
}

impl Drop for SimFile {
    fn drop(&mut self) {
        self.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> &Path {
        Path::new(s)
    }

    fn setup() -> SimFs {
        let fs = SimFs::new();
        fs.create_dir_all(p("/r/db")).unwrap();
        fs.sync_dir(p("/")).unwrap();
        fs.sync_dir(p("/r")).unwrap();
        fs.sync_dir(p("/r/db")).unwrap();
        fs
    }

    #[test]
    fn unsynced_data_is_lost_and_synced_data_kept() {
        let fs = setup();
        let f = fs.open(p("/r/db/a"), OpenMode::Append).unwrap();
        f.append(b"durable").unwrap();
        f.sync_data().unwrap();
        fs.sync_dir(p("/r/db")).unwrap();
        f.append(b" lost").unwrap();
        assert_eq!(fs.read(p("/r/db/a")).unwrap(), b"durable lost");
        fs.crash();
        assert_eq!(fs.read(p("/r/db/a")).unwrap(), b"durable");
        assert!(
            f.append(b"x").is_err(),
            "a file opened before the crash still works"
        );
    }

    #[test]
    fn a_new_file_needs_its_directory_synced() {
        let fs = setup();
        let f = fs.open(p("/r/db/a"), OpenMode::Append).unwrap();
        f.append(b"x").unwrap();
        f.sync_data().unwrap();
        fs.crash();
        assert!(!fs.exists(p("/r/db/a")));
    }

    #[test]
    fn a_rename_is_durable_only_after_the_directory_sync() {
        let fs = setup();
        fs.write(p("/r/db/t"), b"v").unwrap();
        fs.open(p("/r/db/t"), OpenMode::Read)
            .unwrap()
            .sync_data()
            .unwrap();
        fs.sync_dir(p("/r/db")).unwrap();
        fs.rename(p("/r/db/t"), p("/r/db/u")).unwrap();
        fs.crash();
        assert!(fs.exists(p("/r/db/t")) && !fs.exists(p("/r/db/u")));
        fs.rename(p("/r/db/t"), p("/r/db/u")).unwrap();
        fs.sync_dir(p("/r/db")).unwrap();
        fs.crash();
        assert_eq!(fs.read(p("/r/db/u")).unwrap(), b"v");
        assert!(!fs.exists(p("/r/db/t")));
    }

    #[test]
    fn a_directory_not_synced_into_its_parent_loses_its_files() {
        let fs = setup();
        fs.create_dir_all(p("/r/new")).unwrap();
        fs.write(p("/r/new/f"), b"x").unwrap();
        fs.open(p("/r/new/f"), OpenMode::Read)
            .unwrap()
            .sync_data()
            .unwrap();
        fs.sync_dir(p("/r/new")).unwrap();
        fs.crash();
        assert!(!fs.exists(p("/r/new")));
    }

    #[test]
    fn torn_writes_keep_a_prefix_of_unsynced_appends() {
        let fs = setup();
        fs.set_torn_writes(Some(7));
        let f = fs.open(p("/r/db/a"), OpenMode::Append).unwrap();
        f.append(b"base").unwrap();
        f.sync_data().unwrap();
        fs.sync_dir(p("/r/db")).unwrap();
        f.append(&[9u8; 1000]).unwrap();
        fs.crash();
        let d = fs.read(p("/r/db/a")).unwrap();
        assert!(d.starts_with(b"base") && d.len() <= 1004);
        assert!(d[4..].iter().all(|&b| b == 9));
    }

    #[test]
    fn enospc_after_the_byte_budget_and_eio_on_the_nth_operation() {
        let fs = setup();
        fs.set_space(Some(10));
        let f = fs.open(p("/r/db/a"), OpenMode::Append).unwrap();
        f.append(&[1; 8]).unwrap();
        let e = f.append(&[1; 8]).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::ENOSPC));
        assert_eq!(f.len().unwrap(), 8);
        fs.set_space(None);
        fs.fail_nth(Op::Sync, 2);
        f.sync_data().unwrap();
        assert!(f.sync_data().is_err());
        f.sync_data().unwrap();
        fs.fail_nth(Op::Sync, 1);
        fs.set_space(Some(0));
        fs.crash_at(fs.sync_points() + 1);
        fs.clear_faults();
        f.append(b"x").unwrap();
        f.sync_data().unwrap();
        assert!(!fs.is_down());
    }

    #[test]
    fn crash_at_a_sync_point_stops_everything_until_restart() {
        let fs = setup();
        let before = fs.sync_points();
        fs.crash_at(before + 2);
        let f = fs.open(p("/r/db/a"), OpenMode::Append).unwrap();
        f.append(b"one").unwrap();
        f.sync_data().unwrap();
        fs.sync_dir(p("/r/db")).unwrap_err();
        assert!(fs.is_down());
        assert!(fs.read(p("/r/db/a")).is_err());
        fs.restart();
        assert!(
            !fs.exists(p("/r/db/a")),
            "the directory sync never happened"
        );
        assert_eq!(fs.sync_points(), before + 2);
    }

    #[test]
    fn locks_are_per_open_file() {
        let fs = setup();
        let a = fs.open(p("/r/db/l"), OpenMode::Lock).unwrap();
        let b = fs.open(p("/r/db/l"), OpenMode::Lock).unwrap();
        assert!(a.lock(false).unwrap());
        assert!(!b.lock(false).unwrap());
        drop(a);
        assert!(b.lock(false).unwrap());
    }
}
