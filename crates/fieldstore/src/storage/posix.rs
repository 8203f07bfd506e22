//! The POSIX store: each writer appends to a data file of its own in the database's directory
//! (the catalogue's id for the database, which this store reads as a directory path).

use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::fs::{self, FileSystem, FsFile, OpenMode};
use super::names::unique_name;
use super::store::ObjectReader;
use super::{DbRef, FieldRef, StorageError, Store, StoreWriter};

/// Buffer that gathers small fields into few large writes.
const BUFFER: usize = 8 << 20;
/// A field at least this big is written straight from the caller's memory: copying it into the
/// buffer first would cost as much as the write itself and save no system call.
const STRAIGHT: usize = 256 << 10;
/// Every this many bytes, writeback of what was written is started without waiting for it, so
/// the disk works while the archive goes on and the flush's fdatasync finds little left to do.
const WRITEBACK_EVERY: u64 = 32 << 20;

/// Objects of this store, told from the catalogue's files beside them.
const SUFFIX: &str = ".data";

#[derive(Debug, Clone)]
pub struct PosixStore {
    fs: Arc<dyn FileSystem>,
}

impl Default for PosixStore {
    fn default() -> Self {
        Self::new(fs::os())
    }
}

impl PosixStore {
    pub fn new(fs: Arc<dyn FileSystem>) -> PosixStore {
        PosixStore { fs }
    }
}

fn dir(db: &DbRef) -> &Path {
    Path::new(&db.id)
}

impl Store for PosixStore {
    fn kind(&self) -> &'static str {
        "file"
    }

    fn writer(&self, db: &DbRef) -> Result<Box<dyn StoreWriter>, StorageError> {
        let object = format!("{}{SUFFIX}", unique_name());
        Ok(Box::new(PosixWriter {
            path: dir(db).join(&object),
            fs: self.fs.clone(),
            object,
            file: None,
            len: 0,
            kicked: 0,
            failed: false,
        }))
    }

    fn read(&self, db: &DbRef, field: &FieldRef) -> Result<Vec<u8>, StorageError> {
        let path = dir(db).join(&field.object);
        let f = self
            .fs
            .open(&path, OpenMode::Read)
            .map_err(StorageError::io("open", &path))?;
        let len = usize::try_from(field.length).map_err(|_| StorageError::Corrupt {
            path: path.clone(),
            offset: field.offset,
            detail: format!("field length {} does not fit in memory", field.length),
        })?;
        let mut buf = vec![0u8; len];
        let n = fs::read_full_at(&*f, &mut buf, field.offset)
            .map_err(StorageError::io("read", &path))?;
        if n < len {
            return Err(StorageError::io("read", &path)(std::io::Error::from(
                std::io::ErrorKind::UnexpectedEof,
            )));
        }
        field.verify(
            crate::checksum::crc32c(&buf),
            || self.uri(db, &field.object),
            || "?".into(),
        )?;
        Ok(buf)
    }

    fn open_object(&self, db: &DbRef, object: &str) -> Result<Box<dyn ObjectReader>, StorageError> {
        let path = dir(db).join(object);
        let file = self
            .fs
            .open(&path, OpenMode::Read)
            .map_err(StorageError::io("open", &path))?;
        Ok(Box::new(PosixObject { file, path }))
    }

    fn uri(&self, db: &DbRef, object: &str) -> String {
        format!("file://{}", dir(db).join(object).display())
    }

    /// Skips a file a writer still holds (see `PosixWriter::append`): its fields may all be
    /// masked, yet the writer appends the next batch to it.
    fn remove(&self, db: &DbRef, objects: &[String]) -> Result<(), StorageError> {
        for o in objects {
            let p = dir(db).join(o);
            let f = match self.fs.open(&p, OpenMode::Read) {
                Ok(f) => f,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(StorageError::io("open", &p)(e)),
            };
            if !f.lock(false).map_err(StorageError::io("lock", &p))? {
                continue;
            }
            fs::remove_if_exists(&*self.fs, &p).map_err(StorageError::io("remove", &p))?;
        }
        Ok(())
    }

    /// Every data file in the directory, including those of writers that crashed before any
    /// catalogue entry named them. A directory already gone holds nothing.
    fn wipe(&self, db: &DbRef, doit: bool) -> Result<Vec<String>, StorageError> {
        let d = dir(db);
        let entries = match self.fs.read_dir(d) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StorageError::io("list", d)(e)),
        };
        let mut objects: Vec<String> = entries
            .iter()
            .filter(|e| !e.is_dir)
            .map(|e| e.file_name())
            .filter(|n| n.ends_with(SUFFIX))
            .collect();
        objects.sort();
        if doit {
            // All of them, held by a writer or not: the database is going.
            for o in &objects {
                let p = d.join(o);
                fs::remove_if_exists(&*self.fs, &p).map_err(StorageError::io("remove", &p))?;
            }
        }
        Ok(objects.iter().map(|o| self.uri(db, o)).collect())
    }

    fn object_size(&self, db: &DbRef, object: &str) -> Option<u64> {
        self.fs.metadata(&dir(db).join(object)).ok().map(|m| m.len)
    }
}

struct PosixObject {
    file: Box<dyn FsFile>,
    path: PathBuf,
}

impl ObjectReader for PosixObject {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
        fs::read_full_at(&*self.file, buf, offset).map_err(StorageError::io("read", &self.path))
    }

    fn os_file(&self) -> Option<&std::fs::File> {
        self.file.os_file()
    }
}

/// The data file as `BufWriter` wants it: every write appends.
struct Appender(Box<dyn FsFile>);

impl Write for Appender {
    #[inline]
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.append(buf)?;
        Ok(buf.len())
    }

    #[inline]
    fn write_all(&mut self, buf: &[u8]) -> std::io::Result<()> {
        self.0.append(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

struct PosixWriter {
    fs: Arc<dyn FileSystem>,
    path: PathBuf,
    object: String,
    file: Option<BufWriter<Appender>>,
    len: u64,
    /// Bytes up to here have had writeback started.
    kicked: u64,
    /// A write failed part way: later offsets would be wrong, so this writer takes no more.
    failed: bool,
}

impl PosixWriter {
    fn poisoned(&self) -> StorageError {
        StorageError::Io {
            op: "write",
            path: self.path.clone(),
            source: std::io::Error::other("an earlier write to this file failed; flush refused"),
        }
    }
}

impl StoreWriter for PosixWriter {
    fn append(&mut self, data: &[u8]) -> Result<FieldRef, StorageError> {
        if self.failed {
            return Err(self.poisoned());
        }
        let w = match &mut self.file {
            Some(w) => w,
            None => {
                let f = self
                    .fs
                    .open(&self.path, OpenMode::Append)
                    .map_err(StorageError::io("create", &self.path))?;
                // Held while this writer lives, so a purge leaves the file alone: the writer
                // appends later batches to it after its first batch's fields may all be masked.
                // A new file (its name is unique): no one else holds it.
                f.lock(false)
                    .map_err(StorageError::io("lock", &self.path))?;
                self.file
                    .insert(BufWriter::with_capacity(BUFFER, Appender(f)))
            }
        };
        let written = if data.len() >= STRAIGHT {
            w.flush().and_then(|()| w.get_mut().write_all(data))
        } else {
            w.write_all(data)
        };
        if let Err(e) = written {
            self.failed = true;
            return Err(StorageError::io("write", &self.path)(e));
        }
        // Once, over the bytes just appended (still in cache): crc-fast runs at many GB/s, far
        // above what the write itself costs.
        let checksum = crate::checksum::crc32c(data);
        let offset = self.len;
        self.len += data.len() as u64;
        if self.len - self.kicked >= WRITEBACK_EVERY {
            // Only what has left the buffer can be handed to the kernel's writeback.
            let written = self.len - w.buffer().len() as u64;
            w.get_ref()
                .0
                .start_writeback(self.kicked, written - self.kicked);
            self.kicked = written;
        }
        Ok(FieldRef {
            object: self.object.clone(),
            offset,
            length: data.len() as u64,
            checksum: Some(checksum),
        })
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        if self.failed {
            return Err(self.poisoned());
        }
        if let Some(w) = self.file.as_mut() {
            let r = w
                .flush()
                .map_err(StorageError::io("write", &self.path))
                .and_then(|()| {
                    w.get_ref()
                        .0
                        .sync_data()
                        .map_err(StorageError::io("sync", &self.path))
                });
            if r.is_err() {
                self.failed = true;
            }
            r?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Key;

    #[test]
    fn small_fields_buffered_and_large_ones_written_straight_keep_their_order() {
        let dir = tempfile::tempdir().unwrap();
        let db = DbRef {
            key: Key::default(),
            id: dir.path().display().to_string(),
        };
        let store = PosixStore::default();
        let fields: Vec<Vec<u8>> = [10usize, STRAIGHT, 7, STRAIGHT * 3 + 1, 1, BUFFER + 5, 3]
            .iter()
            .enumerate()
            .map(|(i, &n)| vec![i as u8 + 1; n])
            .collect();
        let mut w = store.writer(&db).unwrap();
        let refs: Vec<FieldRef> = fields.iter().map(|f| w.append(f).unwrap()).collect();
        w.sync().unwrap();
        let mut expected_offset = 0;
        for (f, r) in fields.iter().zip(&refs) {
            assert_eq!(r.offset, expected_offset);
            assert_eq!(&store.read(&db, r).unwrap(), f);
            assert_eq!(r.checksum, Some(crate::checksum::crc32c(f)));
            expected_offset += f.len() as u64;
        }
        // A flipped byte in the file is an error naming it, never wrong bytes.
        let path = dir.path().join(&refs[2].object);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[refs[2].offset as usize + 3] ^= 0x10;
        std::fs::write(&path, bytes).unwrap();
        let err = store.read(&db, &refs[2]).unwrap_err().to_string();
        assert!(
            err.contains(&refs[2].object) && err.contains("checksum"),
            "{err}"
        );
        assert_eq!(&store.read(&db, &refs[1]).unwrap(), &fields[1]);
    }
}
