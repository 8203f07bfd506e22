//! The real file system: thin wrappers over `std::fs`, `pread`/`write`, `flock` and `mmap`.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{FileExt, MetadataExt, OpenOptionsExt};
use std::path::Path;

use super::{DirEntry, FileSystem, FsFile, Mapped, Metadata, OpenMode};

#[derive(Debug, Default, Clone, Copy)]
pub struct OsFs;

impl FileSystem for OsFs {
    fn open(&self, path: &Path, mode: OpenMode) -> io::Result<Box<dyn FsFile>> {
        let mut o = OpenOptions::new();
        match mode {
            OpenMode::Read => o.read(true),
            OpenMode::Append => o.append(true).create(true),
            OpenMode::ReadAppend { create } => o.read(true).append(true).create(create),
            OpenMode::CreateNew => o.write(true).create_new(true),
            OpenMode::Lock => o.read(true).write(true).create(true).truncate(false),
        };
        Ok(Box::new(OsFile(o.mode(0o644).open(path)?)))
    }

    fn map(&self, path: &Path) -> io::Result<Mapped> {
        let f = File::open(path)?;
        // SAFETY: only files that are immutable once visible are mapped (index files): nobody
        // truncates or rewrites them, and unlinking leaves the mapping intact.
        Ok(Mapped::Mmap(unsafe { memmap2::Mmap::map(&f) }?))
    }

    fn map_whole(&self, path: &Path) -> io::Result<Mapped> {
        let f = File::open(path)?;
        // SAFETY: as `map`; data files are append-only, and only what was written is read.
        Ok(Mapped::Mmap(unsafe {
            memmap2::MmapOptions::new().populate().map(&f)
        }?))
    }

    fn read(&self, path: &Path) -> io::Result<Vec<u8>> {
        std::fs::read(path)
    }

    fn write(&self, path: &Path, data: &[u8]) -> io::Result<()> {
        std::fs::write(path, data)
    }

    fn rename(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::rename(from, to)
    }

    fn hard_link(&self, from: &Path, to: &Path) -> io::Result<()> {
        std::fs::hard_link(from, to)
    }

    fn remove_file(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_file(path)
    }

    fn remove_dir(&self, path: &Path) -> io::Result<()> {
        std::fs::remove_dir(path)
    }

    fn create_dir_all(&self, path: &Path) -> io::Result<()> {
        std::fs::create_dir_all(path)
    }

    fn read_dir(&self, path: &Path) -> io::Result<Vec<DirEntry>> {
        Ok(std::fs::read_dir(path)?
            .filter_map(Result::ok)
            .map(|e| DirEntry {
                is_dir: e.file_type().is_ok_and(|t| t.is_dir()),
                path: e.path(),
            })
            .collect())
    }

    fn metadata(&self, path: &Path) -> io::Result<Metadata> {
        let m = std::fs::metadata(path)?;
        Ok(Metadata {
            len: m.len(),
            is_dir: m.is_dir(),
            ino: m.ino(),
            modified: m.modified()?,
        })
    }

    fn sync_dir(&self, path: &Path) -> io::Result<()> {
        File::open(path)?.sync_all()
    }
}

struct OsFile(File);

impl FsFile for OsFile {
    fn os_file(&self) -> Option<&File> {
        Some(&self.0)
    }

    #[inline]
    fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
        self.0.read_at(buf, offset)
    }

    #[inline]
    fn append(&self, data: &[u8]) -> io::Result<()> {
        (&self.0).write_all(data)
    }

    fn len(&self) -> io::Result<u64> {
        Ok(self.0.metadata()?.len())
    }

    fn set_len(&self, len: u64) -> io::Result<()> {
        self.0.set_len(len)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.0.sync_data()
    }

    fn lock(&self, wait: bool) -> io::Result<bool> {
        let op = if wait {
            libc::LOCK_EX
        } else {
            libc::LOCK_EX | libc::LOCK_NB
        };
        loop {
            // SAFETY: flock on a descriptor we own; no memory is passed.
            if unsafe { libc::flock(self.0.as_raw_fd(), op) } == 0 {
                return Ok(true);
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EWOULDBLOCK) if !wait => return Ok(false),
                _ => return Err(e),
            }
        }
    }

    fn unlock(&self) {
        // SAFETY: as above; unlocking cannot fail in a way we could act on.
        unsafe { libc::flock(self.0.as_raw_fd(), libc::LOCK_UN) };
    }

    /// Linux `sync_file_range`: starts writeback and returns at once; failure is ignored.
    fn start_writeback(&self, offset: u64, len: u64) {
        if len == 0 {
            return;
        }
        let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
            return;
        };
        // SAFETY: a valid open descriptor and a byte range; the call reads no memory of ours.
        unsafe {
            libc::sync_file_range(self.0.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE);
        }
    }
}
