//! The POSIX store: each writer appends to a data file of its own in the database's directory
//! (the catalogue's id for the database, which this store reads as a directory path).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use super::fs::{self, FileSystem, FsFile, OpenMode};
use super::names::unique_name;
use super::sidecar;
use super::store::ObjectReader;
use super::{DbRef, FieldRef, StorageError, Store, StoreWriter};

/// Buffer that gathers small fields into few large writes.
const BUFFER: usize = 8 << 20;
/// A field at least this big is written straight from the caller's memory: copying it into the
/// buffer first would cost as much as the write itself and save no system call.
const STRAIGHT: usize = 256 << 10;
/// The piece a streamed field is written in.
const PIECE: usize = 1 << 20;
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

/// In an object's name, what follows the path of an adopted file (`fieldstore adopt`): its
/// size and modification time (nanoseconds) when it was adopted.
const ADOPTED: &str = "#adopted:";

/// The object naming a file adopted where it lies, with what it was when adopted, so a read of
/// a file changed since fails instead of returning other bytes.
pub fn adopted_object(path: &Path, size: u64, modified: std::time::SystemTime) -> String {
    let ns = modified
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{}{ADOPTED}{size}:{ns}", path.display())
}

/// An object's path part, and the size and modification time recorded for an adopted file.
pub(crate) fn split_adopted(object: &str) -> (&str, Option<(u64, u128)>) {
    let Some(at) = object.rfind(ADOPTED) else {
        return (object, None);
    };
    let recorded = object[at + ADOPTED.len()..]
        .split_once(':')
        .and_then(|(s, m)| Some((s.parse().ok()?, m.parse().ok()?)));
    match recorded {
        Some(r) => (&object[..at], Some(r)),
        None => (object, None),
    }
}

/// The file holding an object.
fn object_path(db: &DbRef, object: &str) -> PathBuf {
    dir(db).join(split_adopted(object).0)
}

/// Refuses to read an adopted file that is not what it was when adopted.
fn check_adopted(fs: &dyn FileSystem, object: &str) -> Result<(), StorageError> {
    let (path, Some((size, ns))) = split_adopted(object) else {
        return Ok(());
    };
    let changed = |now: String| StorageError::AdoptedChanged {
        path: PathBuf::from(path),
        detail: format!(
            "adopted at {size} bytes, modified {}; now {now}",
            show_time(ns)
        ),
    };
    let m = match fs.metadata(Path::new(path)) {
        Ok(m) => m,
        Err(e) => return Err(changed(format!("it cannot be read ({e})"))),
    };
    let now_ns = m
        .modified
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    if m.len != size || now_ns != ns {
        return Err(changed(format!(
            "{} bytes, modified {}",
            m.len,
            show_time(now_ns)
        )));
    }
    Ok(())
}

fn show_time(ns: u128) -> String {
    let secs = (ns / 1_000_000_000) as i64;
    chrono::DateTime::from_timestamp(secs, (ns % 1_000_000_000) as u32).map_or_else(
        || format!("{secs} s"),
        |t| t.format("%Y-%m-%d %H:%M:%S%.9f UTC").to_string(),
    )
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
            buf: Vec::new(),
            writing: None,
            len: 0,
            kicked: 0,
            failed: false,
        }))
    }

    fn read(&self, db: &DbRef, field: &FieldRef) -> Result<Vec<u8>, StorageError> {
        check_adopted(&*self.fs, &field.object)?;
        let path = object_path(db, &field.object);
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
        check_adopted(&*self.fs, object)?;
        let path = object_path(db, object);
        let file = self
            .fs
            .open(&path, OpenMode::Read)
            .map_err(StorageError::io("open", &path))?;
        Ok(Box::new(PosixObject { file, path }))
    }

    fn uri(&self, db: &DbRef, object: &str) -> String {
        format!("file://{}", object_path(db, object).display())
    }

    /// Skips a file a writer still holds (see `PosixWriter::append`): its fields may all be
    /// masked, yet the writer appends the next batch to it.
    fn remove(&self, db: &DbRef, objects: &[String]) -> Result<(), StorageError> {
        for o in objects {
            // The user's own files, adopted where they lie, are never deleted.
            if split_adopted(o).1.is_some() {
                continue;
            }
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
            let side = sidecar::path_of(&p);
            fs::remove_if_exists(&*self.fs, &side).map_err(StorageError::io("remove", &side))?;
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
            // Side files of extraction information, including those of data files gone before.
            for e in &entries {
                let name = e.file_name();
                if !e.is_dir && name.ends_with(&format!("{SUFFIX}{}", sidecar::SUFFIX)) {
                    let p = d.join(&name);
                    fs::remove_if_exists(&*self.fs, &p).map_err(StorageError::io("remove", &p))?;
                }
            }
        }
        Ok(objects.iter().map(|o| self.uri(db, o)).collect())
    }

    fn object_size(&self, db: &DbRef, object: &str) -> Option<u64> {
        self.fs
            .metadata(&object_path(db, object))
            .ok()
            .map(|m| m.len)
    }

    fn side_entries(
        &self,
        db: &DbRef,
        object: &str,
    ) -> Result<super::store::SideMap, StorageError> {
        if !sidecar::has_side(object) {
            return Ok(super::store::SideMap::new());
        }
        sidecar::read(&*self.fs, &dir(db).join(object))
    }

    fn add_side_entries(
        &self,
        db: &DbRef,
        object: &str,
        entries: &[sidecar::SideEntry],
    ) -> Result<(), StorageError> {
        if !sidecar::has_side(object) {
            return Err(StorageError::Config {
                detail: format!(
                    "{object} is not a data file of database {}: its extraction information is not kept beside it",
                    db.id
                ),
            });
        }
        sidecar::append(&*self.fs, &dir(db).join(object), entries)
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

/// A full buffer written on a thread of its own; hands the buffer back for reuse.
type Writing = JoinHandle<(Vec<u8>, std::io::Result<()>)>;

struct PosixWriter {
    fs: Arc<dyn FileSystem>,
    path: PathBuf,
    object: String,
    file: Option<Arc<dyn FsFile>>,
    /// Small fields gathered into one large write.
    buf: Vec<u8>,
    /// The previous buffer, being written while the caller archives into `buf`: the kernel's
    /// copy into fresh page-cache pages was a third to half of archiving small fields, and it
    /// overlaps with the caller's work this way. One at a time, joined before the next starts,
    /// so the file's bytes land in order.
    writing: Option<Writing>,
    /// Bytes appended, buffered ones included: the next field's offset.
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

    fn file(&mut self) -> Result<Arc<dyn FsFile>, StorageError> {
        if let Some(f) = &self.file {
            return Ok(f.clone());
        }
        let f = self
            .fs
            .open(&self.path, OpenMode::Append)
            .map_err(StorageError::io("create", &self.path))?;
        // Held while this writer lives, so a purge leaves the file alone: the writer appends
        // later batches to it after its first batch's fields may all be masked. A new file (its
        // name is unique): no one else holds it.
        f.lock(false)
            .map_err(StorageError::io("lock", &self.path))?;
        let f: Arc<dyn FsFile> = Arc::from(f);
        self.file = Some(f.clone());
        Ok(f)
    }

    /// Waits for the buffer being written; returns it, emptied, for reuse.
    fn join(&mut self) -> std::io::Result<Option<Vec<u8>>> {
        let Some(w) = self.writing.take() else {
            return Ok(None);
        };
        let (mut buf, r) = w
            .join()
            .map_err(|_| std::io::Error::other("the thread writing the data file panicked"))?;
        r?;
        buf.clear();
        Ok(Some(buf))
    }

    /// The writeback range to start once everything up to `end` is written, if due.
    fn due(&mut self, end: u64) -> Option<(u64, u64)> {
        if end - self.kicked < WRITEBACK_EVERY {
            return None;
        }
        let range = (self.kicked, end - self.kicked);
        self.kicked = end;
        Some(range)
    }

    /// Starts writing the full buffer on a thread, after the previous one is written.
    fn hand_off(&mut self, file: &Arc<dyn FsFile>) -> std::io::Result<()> {
        let spare = self.join()?;
        let kick = self.due(self.len);
        let (tx, rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let f = file.clone();
        let spawned = std::thread::Builder::new()
            .name("fieldstore-data".into())
            .spawn(move || {
                let Ok(full) = rx.recv() else {
                    return (Vec::new(), Ok(()));
                };
                let r = f.append(&full);
                if let (Ok(()), Some((offset, len))) = (&r, kick) {
                    f.start_writeback(offset, len);
                }
                (full, r)
            });
        let spare = spare.unwrap_or_else(|| Vec::with_capacity(BUFFER));
        match spawned {
            Ok(h) => {
                let full = std::mem::replace(&mut self.buf, spare);
                self.writing = Some(h);
                // The thread only ends before receiving if it panicked: written here instead.
                if let Err(std::sync::mpsc::SendError(full)) = tx.send(full) {
                    self.join()?;
                    write_now(file, &full, kick)?;
                }
            }
            // No thread to be had (the process is at its limit): written here.
            Err(_) => {
                write_now(file, &self.buf, kick)?;
                self.buf.clear();
            }
        }
        Ok(())
    }

    /// Everything appended is in the file (not yet durable).
    /// Removes the part of a streamed field written so far (`written` bytes past `self.len`).
    fn cut_back(&mut self, file: &Arc<dyn FsFile>, written: u64) {
        if written > 0 && file.set_len(self.len).is_err() {
            self.failed = true;
        }
    }

    fn drain(&mut self, file: &Arc<dyn FsFile>) -> std::io::Result<()> {
        if let Some(spare) = self.join()? {
            if self.buf.capacity() == 0 {
                self.buf = spare;
            }
        }
        if !self.buf.is_empty() {
            file.append(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }
}

/// The synchronous fallback of [`PosixWriter::hand_off`].
fn write_now(file: &Arc<dyn FsFile>, buf: &[u8], kick: Option<(u64, u64)>) -> std::io::Result<()> {
    file.append(buf)?;
    if let Some((offset, len)) = kick {
        file.start_writeback(offset, len);
    }
    Ok(())
}

impl Drop for PosixWriter {
    /// The file is not closed (nor its lock released) under a write still running.
    fn drop(&mut self) {
        let _ = self.join();
    }
}

impl StoreWriter for PosixWriter {
    fn append(&mut self, data: &[u8]) -> Result<FieldRef, StorageError> {
        if self.failed {
            return Err(self.poisoned());
        }
        let file = self.file()?;
        let written = if data.len() >= STRAIGHT {
            self.drain(&file).and_then(|()| file.append(data))
        } else if self.buf.len() + data.len() > BUFFER && !self.buf.is_empty() {
            self.hand_off(&file)
        } else {
            Ok(())
        };
        if let Err(e) = written {
            self.failed = true;
            return Err(StorageError::io("write", &self.path)(e));
        }
        if data.len() < STRAIGHT {
            if self.buf.capacity() == 0 {
                self.buf.reserve_exact(BUFFER.max(data.len()));
            }
            self.buf.extend_from_slice(data);
        }
        // Once, over the bytes just appended (still in cache): crc-fast runs at many GB/s, far
        // above what the write itself costs.
        let checksum = crate::checksum::crc32c(data);
        let offset = self.len;
        self.len += data.len() as u64;
        if data.len() >= STRAIGHT {
            // Everything is in the file: the whole range can be handed to the kernel's writeback.
            if let Some((offset, len)) = self.due(self.len) {
                file.start_writeback(offset, len);
            }
        }
        Ok(FieldRef {
            object: self.object.clone(),
            offset,
            length: data.len() as u64,
            checksum: Some(checksum),
            extract: None,
        })
    }

    /// Written through in pieces after whatever is buffered, so the file holds the field's
    /// bytes in order and the writer never holds more than a piece. A source that fails midway
    /// (a client gone, a damaged frame) leaves nothing: the file is cut back to where the field
    /// began, or, if that fails, the writer is poisoned so no later field is recorded at a
    /// wrong offset.
    fn append_from(&mut self, length: u64, src: &mut dyn Read) -> Result<FieldRef, StorageError> {
        if self.failed {
            return Err(self.poisoned());
        }
        let file = self.file()?;
        if let Err(e) = self.drain(&file) {
            self.failed = true;
            return Err(StorageError::io("write", &self.path)(e));
        }
        let mut piece = vec![0u8; PIECE.min(usize::try_from(length).unwrap_or(PIECE)).max(1)];
        let mut crc = crate::checksum::Crc32c::new();
        let mut got = 0u64;
        while got < length {
            let want = piece
                .len()
                .min(usize::try_from(length - got).unwrap_or(usize::MAX));
            let n = match src.read(&mut piece[..want]) {
                Ok(0) => Err(std::io::Error::from(std::io::ErrorKind::UnexpectedEof)),
                Ok(n) => Ok(n),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => Err(e),
            };
            let n = match n {
                Ok(n) => n,
                Err(source) => {
                    self.cut_back(&file, got);
                    return Err(StorageError::Source {
                        got,
                        length,
                        source,
                    });
                }
            };
            if let Err(e) = file.append(&piece[..n]) {
                self.cut_back(&file, got + n as u64);
                return Err(StorageError::io("write", &self.path)(e));
            }
            crc.update(&piece[..n]);
            got += n as u64;
        }
        let offset = self.len;
        self.len += length;
        if let Some((offset, len)) = self.due(self.len) {
            file.start_writeback(offset, len);
        }
        Ok(FieldRef {
            object: self.object.clone(),
            offset,
            length,
            checksum: Some(crc.value()),
            extract: None,
        })
    }

    fn sync(&mut self) -> Result<(), StorageError> {
        if self.failed {
            return Err(self.poisoned());
        }
        let Some(file) = self.file.clone() else {
            return Ok(());
        };
        let r = self
            .drain(&file)
            .map_err(StorageError::io("write", &self.path))
            .and_then(|()| {
                file.sync_data()
                    .map_err(StorageError::io("sync", &self.path))
            });
        if r.is_err() {
            self.failed = true;
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Key;

    /// Reads in small, uneven pieces, as a socket delivers them; fails after `fail_at` bytes.
    struct Trickle {
        data: Vec<u8>,
        at: usize,
        fail_at: Option<usize>,
    }

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.fail_at.is_some_and(|f| self.at >= f) {
                return Err(std::io::Error::other("client went away"));
            }
            let n = buf
                .len()
                .min(self.data.len() - self.at)
                .min(7919 + self.at % 3);
            buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
            self.at += n;
            Ok(n)
        }
    }

    #[test]
    fn streamed_fields_land_like_appended_ones_between_buffered_ones() {
        let dir = tempfile::tempdir().unwrap();
        let db = DbRef {
            key: Key::default(),
            id: dir.path().display().to_string(),
        };
        let store = PosixStore::default();
        let mut w = store.writer(&db).unwrap();
        let small = vec![1u8; 1000];
        let big: Vec<u8> = (0..3 * PIECE + 5).map(|i| (i * 7 % 253) as u8).collect();
        let a = w.append(&small).unwrap();
        let mut src = Trickle {
            data: big.clone(),
            at: 0,
            fail_at: None,
        };
        let b = w.append_from(big.len() as u64, &mut src).unwrap();
        let c = w.append(&small).unwrap();
        w.sync().unwrap();
        assert_eq!(
            (a.offset, b.offset, c.offset),
            (0, 1000, 1000 + big.len() as u64)
        );
        assert_eq!(b.checksum, Some(crate::checksum::crc32c(&big)));
        assert_eq!(store.read(&db, &b).unwrap(), big);
        assert_eq!(store.read(&db, &c).unwrap(), small);
    }

    #[test]
    fn a_source_failing_midway_leaves_nothing_of_its_field() {
        let dir = tempfile::tempdir().unwrap();
        let db = DbRef {
            key: Key::default(),
            id: dir.path().display().to_string(),
        };
        let store = PosixStore::default();
        let mut w = store.writer(&db).unwrap();
        let mut src = Trickle {
            data: vec![9u8; 2 * PIECE],
            at: 0,
            fail_at: Some(PIECE + 17),
        };
        let before = w.append(&[5u8; 300_000]).unwrap();
        let e = w.append_from(2 * PIECE as u64, &mut src).unwrap_err();
        assert!(matches!(e, StorageError::Source { .. }), "{e}");
        assert!(e.to_string().contains("client went away"), "{e}");
        // The file holds what came before, and the next field goes where the failed one began.
        let path = dir.path().join(&before.object);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 300_000);
        let next = w.append(&[1, 2, 3]).unwrap();
        assert_eq!(next.offset, 300_000);
        w.sync().unwrap();
        assert_eq!(store.read(&db, &next).unwrap(), [1, 2, 3]);
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 300_003);
    }

    /// Buffers handed to the writing thread, a straight write between them and the tail left at
    /// sync must land in the order appended.
    #[test]
    fn fields_filling_several_buffers_land_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let db = DbRef {
            key: Key::default(),
            id: dir.path().display().to_string(),
        };
        let store = PosixStore::default();
        let small = STRAIGHT - 1;
        let count = 3 * BUFFER / small + 7;
        let mut fields: Vec<Vec<u8>> = (0..count)
            .map(|i| {
                let mut f = vec![(i % 251) as u8; small - (i % 13)];
                f[0] = (i >> 8) as u8;
                f
            })
            .collect();
        fields.insert(count / 2, vec![0xAB; STRAIGHT + 3]);
        let mut w = store.writer(&db).unwrap();
        let refs: Vec<FieldRef> = fields.iter().map(|f| w.append(f).unwrap()).collect();
        w.sync().unwrap();
        // More appended after a sync go on from where it left off.
        let last = vec![7u8; 100];
        let last_ref = w.append(&last).unwrap();
        w.sync().unwrap();
        drop(w);
        let mut expected_offset = 0;
        for (f, r) in fields.iter().zip(&refs) {
            assert_eq!(r.offset, expected_offset);
            assert_eq!(&store.read(&db, r).unwrap(), f);
            expected_offset += f.len() as u64;
        }
        assert_eq!(last_ref.offset, expected_offset);
        assert_eq!(store.read(&db, &last_ref).unwrap(), last);
        let size = std::fs::metadata(dir.path().join(&last_ref.object))
            .unwrap()
            .len();
        assert_eq!(size, expected_offset + 100);
    }

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
