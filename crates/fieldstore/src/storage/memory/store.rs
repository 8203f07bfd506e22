//! The memory store: each writer appends to an object of its own, one segment per field.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;

use super::state::{poisoned, MemDb, Object, Shared};
use super::ENTRY_OVERHEAD;
use crate::model::Key;
use crate::storage::{DbRef, FieldRef, ObjectReader, StorageError, Store, StoreWriter};

pub struct MemoryStore {
    shared: Arc<Shared>,
}

impl MemoryStore {
    pub(super) fn new(shared: Arc<Shared>) -> MemoryStore {
        MemoryStore { shared }
    }

    fn gone(&self, db: &DbRef, object: &str) -> StorageError {
        StorageError::Io {
            op: "read",
            path: self.uri(db, object).into(),
            source: std::io::Error::new(
                std::io::ErrorKind::NotFound,
                "no such object in the memory store (wiped or purged)",
            ),
        }
    }

    /// The segment holding exactly this field, if one does (every field archived here).
    fn whole_segment(
        &self,
        o: &Object,
        field: &FieldRef,
        len: usize,
    ) -> Result<Option<Bytes>, StorageError> {
        Ok(o.segment(field.offset)?.filter(|s| s.len() == len))
    }

    fn verify(&self, db: &DbRef, field: &FieldRef, bytes: &[u8]) -> Result<(), StorageError> {
        field.verify(
            crate::checksum::crc32c(bytes),
            || self.uri(db, &field.object),
            || "?".into(),
        )
    }

    fn object(&self, db: &DbRef, object: &str) -> Result<Arc<Object>, StorageError> {
        match self.shared.get(&db.key)? {
            Some(d) => d.object(object)?.ok_or_else(|| self.gone(db, object)),
            None => Err(self.gone(db, object)),
        }
    }
}

/// A new object in the database, registered so wipe finds it.
fn new_object(shared: &Shared, db: &MemDb) -> Result<(String, Arc<Object>), StorageError> {
    let name = format!("obj-{}", shared.next_id());
    let o = Arc::new(Object::default());
    o.open.store(true, Ordering::SeqCst);
    db.objects
        .write()
        .map_err(poisoned)?
        .insert(name.clone(), o.clone());
    Ok((name, o))
}

impl Store for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn writer(&self, db: &DbRef) -> Result<Box<dyn StoreWriter>, StorageError> {
        let d = self.shared.get_or_create(&db.key)?;
        let (name, object) = new_object(&self.shared, &d)?;
        Ok(Box::new(MemStoreWriter {
            shared: self.shared.clone(),
            key: db.key.clone(),
            db: d,
            name,
            object,
            len: 0,
        }))
    }

    fn read(&self, db: &DbRef, field: &FieldRef) -> Result<Vec<u8>, StorageError> {
        let o = self.object(db, &field.object)?;
        let len = usize::try_from(field.length).map_err(|_| self.gone(db, &field.object))?;
        // A field is a segment of its own: copied in one pass, without zeroing a buffer first.
        let buf = match self.whole_segment(&o, field, len)? {
            Some(b) => b.to_vec(),
            None => {
                let mut buf = vec![0u8; len];
                if o.read_at(field.offset, &mut buf)? != len {
                    return Err(self.gone(db, &field.object));
                }
                buf
            }
        };
        self.verify(db, field, &buf)?;
        Ok(buf)
    }

    /// The stored buffer itself, checked: a subscription with data sends every field from
    /// here, so the server copies no field's bytes between receiving and sending them.
    fn read_shared(&self, db: &DbRef, field: &FieldRef) -> Result<Bytes, StorageError> {
        let o = self.object(db, &field.object)?;
        let len = usize::try_from(field.length).map_err(|_| self.gone(db, &field.object))?;
        match self.whole_segment(&o, field, len)? {
            Some(b) => {
                self.verify(db, field, &b)?;
                Ok(b)
            }
            None => self.read(db, field).map(Bytes::from),
        }
    }

    fn open_object(&self, db: &DbRef, object: &str) -> Result<Box<dyn ObjectReader>, StorageError> {
        Ok(Box::new(MemObjectReader(self.object(db, object)?)))
    }

    fn uri(&self, db: &DbRef, object: &str) -> String {
        format!("memory://{}/{}/{object}", self.shared.name, db.key)
    }

    /// The objects of a database a wipe detached (or, on a dry run, of the live one).
    fn wipe(&self, db: &DbRef, doit: bool) -> Result<Vec<String>, StorageError> {
        let d = match self.shared.detached(&db.key)? {
            Some(d) => d,
            None => match self.shared.get(&db.key)? {
                Some(d) if !doit => d,
                _ => return Ok(Vec::new()),
            },
        };
        let mut names: Vec<String> = d
            .objects
            .read()
            .map_err(poisoned)?
            .keys()
            .map(|o| self.uri(db, o))
            .collect();
        names.sort();
        if doit {
            self.shared.drain(&d)?;
        }
        Ok(names)
    }

    /// Drops objects purge emptied; one a writer still appends to stays.
    fn remove(&self, db: &DbRef, objects: &[String]) -> Result<(), StorageError> {
        let Some(d) = self.shared.get(&db.key)? else {
            return Ok(());
        };
        let mut map = d.objects.write().map_err(poisoned)?;
        for name in objects {
            if let Some(o) = map.get(name) {
                if !o.open.load(Ordering::SeqCst) && o.held() == 0 {
                    map.remove(name);
                }
            }
        }
        Ok(())
    }

    fn object_size(&self, db: &DbRef, object: &str) -> Option<u64> {
        self.object(db, object).ok().map(|o| o.held())
    }
}

struct MemStoreWriter {
    shared: Arc<Shared>,
    key: Key,
    db: Arc<MemDb>,
    name: String,
    object: Arc<Object>,
    len: u64,
}

impl MemStoreWriter {
    /// After a wipe, archives go on into a new database of the same key, as they would after
    /// a wipe between two processes' writes.
    fn reattach(&mut self) -> Result<(), StorageError> {
        self.object.open.store(false, Ordering::SeqCst);
        self.db = self.shared.get_or_create(&self.key)?;
        let (name, object) = new_object(&self.shared, &self.db)?;
        self.name = name;
        self.object = object;
        self.len = 0;
        Ok(())
    }
}

impl StoreWriter for MemStoreWriter {
    fn append(&mut self, data: &[u8]) -> Result<FieldRef, StorageError> {
        self.shared.reserve(data.len() as u64 + ENTRY_OVERHEAD)?;
        // Copied (and summed) once there is room, before any lock is taken.
        self.insert_reserved(Bytes::copy_from_slice(data), None)
    }

    fn append_shared(
        &mut self,
        data: Bytes,
        checksum: Option<u32>,
    ) -> Result<FieldRef, StorageError> {
        self.shared.reserve(data.len() as u64 + ENTRY_OVERHEAD)?;
        self.insert_reserved(data, checksum)
    }

    /// Memory is as durable as it gets here.
    fn sync(&mut self) -> Result<(), StorageError> {
        Ok(())
    }
}

impl MemStoreWriter {
    /// Keeps `seg` as the field (no copy), its CRC-32C taken here unless the caller has it;
    /// its room is reserved already, and given back if it cannot be stored.
    fn insert_reserved(
        &mut self,
        seg: Bytes,
        checksum: Option<u32>,
    ) -> Result<FieldRef, StorageError> {
        let length = seg.len() as u64;
        let wanted = length + ENTRY_OVERHEAD;
        let checksum = checksum.unwrap_or_else(|| crate::checksum::crc32c(&seg));
        for _ in 0..2 {
            if self.db.wiped.load(Ordering::SeqCst) {
                if let Err(e) = self.reattach() {
                    self.shared.release(wanted);
                    return Err(e);
                }
            }
            let mut segs = match self.object.segments.write() {
                Ok(s) => s,
                Err(e) => {
                    self.shared.release(wanted);
                    return Err(poisoned(e));
                }
            };
            // Checked under the object's lock: a wipe sets the flag before draining objects.
            if self.db.wiped.load(Ordering::SeqCst) {
                continue;
            }
            let offset = self.len;
            segs.insert(offset, seg);
            self.len += length;
            return Ok(FieldRef {
                object: self.name.clone(),
                offset,
                length,
                checksum: Some(checksum),
                extract: None,
            });
        }
        self.shared.release(wanted);
        Err(StorageError::Config {
            detail: format!(
                "database {} was wiped repeatedly while archiving into it; archive again",
                self.key
            ),
        })
    }
}

impl Drop for MemStoreWriter {
    /// An object left empty goes, so handles opened and dropped (a server's connections) leave
    /// nothing behind.
    fn drop(&mut self) {
        self.object.open.store(false, Ordering::SeqCst);
        if let Ok(mut map) = self.db.objects.write() {
            if self.object.held() == 0 {
                map.remove(&self.name);
            }
        }
    }
}

struct MemObjectReader(Arc<Object>);

impl ObjectReader for MemObjectReader {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
        self.0.read_at(offset, buf)
    }
}
