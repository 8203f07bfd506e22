//! The file-system calls the toc catalogue and the POSIX store make, behind one trait, so the
//! same code runs over the real OS ([`os::OsFs`], the default) or over [`sim::SimFs`], an
//! in-memory file system that can crash and fail on demand, for crash-consistency tests.

pub mod os;
pub mod sim;

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use os::OsFs;
pub use sim::SimFs;

/// How to open a file: the few combinations toc and the POSIX store use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenMode {
    Read,
    /// Appends; created if missing (mode 0644).
    Append,
    /// Reads and appends; created only when `create` (a journal is created once, then only
    /// appended to: an append must never recreate a wiped one).
    ReadAppend {
        create: bool,
    },
    /// A new file, written once; fails if it exists.
    CreateNew,
    /// Held only for its lock: created if missing, never truncated.
    Lock,
}

/// What toc and the store ask of a file's metadata.
#[derive(Debug, Clone, Copy)]
pub struct Metadata {
    pub len: u64,
    pub is_dir: bool,
    /// Tells a recreated file from the one a cache saw.
    pub ino: u64,
    pub modified: std::time::SystemTime,
}

impl Metadata {
    pub fn is_file(&self) -> bool {
        !self.is_dir
    }
}

#[derive(Debug, Clone)]
pub struct DirEntry {
    pub path: PathBuf,
    pub is_dir: bool,
}

impl DirEntry {
    pub fn file_name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// A whole file's bytes, mapped by the OS (index files are read in place) or copied by the sim.
pub enum Mapped {
    Mmap(memmap2::Mmap),
    Bytes(Arc<[u8]>),
}

impl std::ops::Deref for Mapped {
    type Target = [u8];
    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            Mapped::Mmap(m) => m,
            Mapped::Bytes(b) => b,
        }
    }
}

impl Mapped {
    /// Gives back the resident memory of `range` (rounded inwards to whole pages), which a
    /// walk through the file is past: the pages stay in the page cache, and anything reading
    /// them again faults them back in, unchanged. A copy keeps its memory.
    pub fn release(&self, range: std::ops::Range<usize>) {
        const PAGE: usize = 4096;
        let Mapped::Mmap(m) = self else {
            return;
        };
        let start = range.start.div_ceil(PAGE) * PAGE;
        let end = range.end.min(m.len()) / PAGE * PAGE;
        if end > start {
            // SAFETY: a read-only mapping of a file that is never modified (index files are
            // written once, then only unlinked): dropping its pages changes no byte it shows,
            // the next read maps the same file contents again.
            let _ = unsafe {
                m.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, start, end - start)
            };
        }
    }
}

impl AsRef<[u8]> for Mapped {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

pub trait FileSystem: Send + Sync + std::fmt::Debug {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn FsFile>>;
    /// Maps a file that is never modified again (index files).
    fn map(&self, path: &Path) -> io::Result<Mapped>;
    /// Maps a file to be read whole (a conversion's checksums): its pages are mapped at once,
    /// far cheaper than one page fault per few pages.
    fn map_whole(&self, path: &Path) -> io::Result<Mapped> {
        self.map(path)
    }
    fn read(&self, path: &Path) -> io::Result<Vec<u8>>;
    /// Creates or truncates a file and writes it, without syncing (as `std::fs::write`).
    fn write(&self, path: &Path, data: &[u8]) -> io::Result<()>;
    /// Replaces `to` if it is a file. Durable only once the directories are synced.
    fn rename(&self, from: &Path, to: &Path) -> io::Result<()>;
    /// Fails with `AlreadyExists` if `to` exists: how concurrent creators agree on one journal.
    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()>;
    fn remove_file(&self, path: &Path) -> io::Result<()>;
    /// Only an empty directory.
    fn remove_dir(&self, path: &Path) -> io::Result<()>;
    fn create_dir_all(&self, path: &Path) -> io::Result<()>;
    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>>;
    fn metadata(&self, path: &Path) -> io::Result<Metadata>;
    /// Makes the directory's entries (creations, renames, removals) durable.
    fn sync_dir(&self, path: &Path) -> io::Result<()>;

    fn exists(&self, path: &Path) -> bool {
        self.metadata(path).is_ok()
    }

    fn is_dir(&self, path: &Path) -> bool {
        self.metadata(path).is_ok_and(|m| m.is_dir)
    }

    fn is_file(&self, path: &Path) -> bool {
        self.metadata(path).is_ok_and(|m| !m.is_dir)
    }
}

/// An open file. Writes always go to its end (every file toc and the store write is append-only
/// or written once).
pub trait FsFile: Send + Sync {
    /// Reads up to `buf.len()` bytes at `offset`; fewer only at the end of the file.
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize>;
    fn append(&self, data: &[u8]) -> io::Result<()>;
    fn len(&self) -> io::Result<u64>;
    fn set_len(&self, len: u64) -> io::Result<()>;
    /// Makes the file's data durable (fdatasync).
    fn sync_data(&self) -> io::Result<()>;
    /// An exclusive lock with `flock` semantics: held per open file, released on unlock or when
    /// the file is closed. `wait: false` returns `Ok(false)` if someone else holds it.
    fn lock(&self, wait: bool) -> io::Result<bool>;
    fn unlock(&self);
    /// A hint to start writing back a range now; durability still needs `sync_data`.
    fn start_writeback(&self, _offset: u64, _len: u64) {}
    /// The OS file underneath, when there is one: lets a retrieve into a file map it and copy
    /// in one pass. Simulated files have none and take the ordinary path.
    fn os_file(&self) -> Option<&std::fs::File> {
        None
    }

    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Everything from `start` to the end.
    fn read_from(&self, start: u64) -> io::Result<Vec<u8>> {
        let len = self.len()?;
        let mut buf = vec![0u8; len.saturating_sub(start) as usize];
        let n = read_full_at(self, &mut buf, start)?;
        buf.truncate(n);
        Ok(buf)
    }
}

/// Reads until `buf` is full or the file ends; returns how much was read.
pub fn read_full_at<F: FsFile + ?Sized>(f: &F, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut done = 0;
    while done < buf.len() {
        match f.read_at(&mut buf[done..], offset + done as u64) {
            Ok(0) => break,
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(done)
}

/// The OS file system, shared: what every catalogue and store uses unless a test gives another.
pub fn os() -> Arc<dyn FileSystem> {
    Arc::new(OsFs)
}

/// `remove_file` that accepts a file already gone.
pub(crate) fn remove_if_exists(fs: &dyn FileSystem, path: &Path) -> io::Result<()> {
    match fs.remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}
