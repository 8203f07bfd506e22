//! The Store trait: where fields' bytes live.

use super::{DbRef, StorageError};

/// One field's bytes inside a store: an object the store names (a data file for POSIX) and a
/// byte range in it. Catalogues keep these opaque.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldRef {
    pub object: String,
    pub offset: u64,
    pub length: u64,
}

pub trait Store: Send + Sync {
    /// `file`, `memory`, `s3`...: what `fieldstore info` prints.
    fn kind(&self) -> &'static str;

    /// A writer of its own for one database: writers never share an object, so they never contend.
    fn writer(&self, db: &DbRef) -> Result<Box<dyn StoreWriter>, StorageError>;

    /// A field's bytes.
    fn read(&self, db: &DbRef, field: &FieldRef) -> Result<Vec<u8>, StorageError>;

    /// An object opened for reads at any offset, so streaming a retrieve copies bytes once,
    /// straight into the caller's buffer.
    fn open_object(&self, db: &DbRef, object: &str) -> Result<Box<dyn ObjectReader>, StorageError>;

    /// How `list --location` names an object.
    fn uri(&self, db: &DbRef, object: &str) -> String;

    /// Deletes objects no catalogue entry references any more (after purge).
    fn remove(&self, db: &DbRef, objects: &[String]) -> Result<(), StorageError>;

    /// Size in bytes of an object, for statistics; `None` if it is gone.
    fn object_size(&self, db: &DbRef, object: &str) -> Option<u64>;
}

pub trait StoreWriter: Send {
    /// Stores the bytes; they need not be durable until `sync`.
    fn append(&mut self, data: &[u8]) -> Result<FieldRef, StorageError>;

    /// Makes everything appended durable: called before the catalogue commits a flush.
    fn sync(&mut self) -> Result<(), StorageError>;
}

pub trait ObjectReader: Send {
    /// Reads up to `buf.len()` bytes at `offset`; fewer only at the object's end.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, StorageError>;
}
