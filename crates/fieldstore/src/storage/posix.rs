//! The POSIX store: each writer appends to a data file of its own in the database's directory.

use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::PathBuf;

use super::store::ObjectReader;
use super::toc::unique_name;
use super::{DbRef, FieldRef, StorageError, Store, StoreWriter};

/// Buffer that gathers small fields into few large writes.
const BUFFER: usize = 8 << 20;
/// A field at least this big is written straight from the caller's memory: copying it into the
/// buffer first would cost as much as the write itself and save no system call.
const STRAIGHT: usize = 256 << 10;
/// Every this many bytes, writeback of what was written is started without waiting for it, so
/// the disk works while the archive goes on and the flush's fdatasync finds little left to do.
const WRITEBACK_EVERY: u64 = 32 << 20;

#[derive(Debug, Default, Clone, Copy)]
pub struct PosixStore;

impl Store for PosixStore {
    fn kind(&self) -> &'static str {
        "file"
    }

    fn writer(&self, db: &DbRef) -> Result<Box<dyn StoreWriter>, StorageError> {
        let object = format!("{}.data", unique_name());
        Ok(Box::new(PosixWriter {
            path: db.path.join(&object),
            object,
            file: None,
            len: 0,
            kicked: 0,
            failed: false,
        }))
    }

    fn read(&self, db: &DbRef, field: &FieldRef) -> Result<Vec<u8>, StorageError> {
        let path = db.path.join(&field.object);
        let f = File::open(&path).map_err(StorageError::io("open", &path))?;
        let len = usize::try_from(field.length).map_err(|_| StorageError::Corrupt {
            path: path.clone(),
            offset: field.offset,
            detail: format!("field length {} does not fit in memory", field.length),
        })?;
        let mut buf = vec![0u8; len];
        f.read_exact_at(&mut buf, field.offset)
            .map_err(StorageError::io("read", &path))?;
        field
            .verify(crate::checksum::crc32c(&buf))
            .map_err(|(expected, found)| StorageError::FieldChecksum {
                object: self.uri(db, &field.object),
                offset: field.offset,
                length: field.length,
                key: "?".into(),
                expected,
                found,
            })?;
        Ok(buf)
    }

    fn open_object(&self, db: &DbRef, object: &str) -> Result<Box<dyn ObjectReader>, StorageError> {
        let path = db.path.join(object);
        let file = File::open(&path).map_err(StorageError::io("open", &path))?;
        Ok(Box::new(PosixObject { file, path }))
    }

    fn uri(&self, db: &DbRef, object: &str) -> String {
        format!("file://{}", db.path.join(object).display())
    }

    fn remove(&self, db: &DbRef, objects: &[String]) -> Result<(), StorageError> {
        for o in objects {
            let p = db.path.join(o);
            match std::fs::remove_file(&p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(StorageError::io("remove", &p)(e)),
            }
        }
        Ok(())
    }

    fn object_size(&self, db: &DbRef, object: &str) -> Option<u64> {
        std::fs::metadata(db.path.join(object))
            .ok()
            .map(|m| m.len())
    }
}

struct PosixObject {
    file: File,
    path: PathBuf,
}

impl ObjectReader for PosixObject {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
        let mut done = 0;
        while done < buf.len() {
            match self.file.read_at(&mut buf[done..], offset + done as u64) {
                Ok(0) => break,
                Ok(n) => done += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(StorageError::io("read", &self.path)(e)),
            }
        }
        Ok(done)
    }
}

/// Starts writeback of a byte range and returns at once (Linux `sync_file_range`); a hint only,
/// so failure is ignored: the flush's fdatasync is what guarantees durability.
fn start_writeback(f: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    if len == 0 {
        return;
    }
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return;
    };
    // SAFETY: a valid open descriptor and a byte range; the call reads no memory of ours.
    unsafe {
        libc::sync_file_range(f.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE);
    }
}

struct PosixWriter {
    path: PathBuf,
    object: String,
    file: Option<BufWriter<File>>,
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
                let f = OpenOptions::new()
                    .append(true)
                    .create(true)
                    .open(&self.path)
                    .map_err(StorageError::io("create", &self.path))?;
                self.file.insert(BufWriter::with_capacity(BUFFER, f))
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
            start_writeback(w.get_ref(), self.kicked, written - self.kicked);
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
            path: dir.path().to_path_buf(),
        };
        let fields: Vec<Vec<u8>> = [10usize, STRAIGHT, 7, STRAIGHT * 3 + 1, 1, BUFFER + 5, 3]
            .iter()
            .enumerate()
            .map(|(i, &n)| vec![i as u8 + 1; n])
            .collect();
        let mut w = PosixStore.writer(&db).unwrap();
        let refs: Vec<FieldRef> = fields.iter().map(|f| w.append(f).unwrap()).collect();
        w.sync().unwrap();
        let mut expected_offset = 0;
        for (f, r) in fields.iter().zip(&refs) {
            assert_eq!(r.offset, expected_offset);
            assert_eq!(&PosixStore.read(&db, r).unwrap(), f);
            assert_eq!(r.checksum, Some(crate::checksum::crc32c(f)));
            expected_offset += f.len() as u64;
        }
        // A flipped byte in the file is an error naming it, never wrong bytes.
        let path = dir.path().join(&refs[2].object);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[refs[2].offset as usize + 3] ^= 0x10;
        std::fs::write(&path, bytes).unwrap();
        let err = PosixStore.read(&db, &refs[2]).unwrap_err().to_string();
        assert!(
            err.contains(&refs[2].object) && err.contains("checksum"),
            "{err}"
        );
        assert_eq!(&PosixStore.read(&db, &refs[1]).unwrap(), &fields[1]);
    }
}
