//! The Store trait: where fields' bytes live.

use std::io::Read;

use bytes::Bytes;

use super::{DbRef, StorageError};

/// One field's bytes inside a store: an object the store names (a data file for POSIX) and a
/// byte range in it, with the CRC-32C of those bytes taken when they were stored. Catalogues keep
/// these opaque.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FieldRef {
    pub object: String,
    pub offset: u64,
    pub length: u64,
    /// Lets readers tell damaged bytes from good ones; `None` for fields a catalogue recorded
    /// before it kept checksums (they are returned unchecked).
    pub checksum: Option<u32>,
    /// How the field's values are packed (`crate::extract::ExtractInfo`, encoded), taken when
    /// it was archived: lets an extraction read only the bytes a few points need. Opaque to
    /// the storage layer; `None` where it was not taken (older catalogues, FDB5's format, not
    /// GRIB), and an extraction then reads the field's header first.
    pub extract: Option<std::sync::Arc<[u8]>>,
}

impl FieldRef {
    /// Checks the CRC-32C of bytes read back for this field against the one taken when they
    /// were stored (if any); the error names the object (`uri`) and the field (`key`, or `?`
    /// where the reader does not know it).
    pub fn verify(
        &self,
        found: u32,
        uri: impl FnOnce() -> String,
        key: impl FnOnce() -> String,
    ) -> Result<(), StorageError> {
        match self.checksum {
            Some(expected) if expected != found => Err(StorageError::FieldChecksum {
                object: uri(),
                offset: self.offset,
                length: self.length,
                key: key(),
                expected,
                found,
            }),
            _ => Ok(()),
        }
    }
}

pub trait Store: Send + Sync {
    /// `file`, `memory`, `s3`...: what `fieldstore info` prints.
    fn kind(&self) -> &'static str;

    /// A writer of its own for one database: writers never share an object, so they never contend.
    fn writer(&self, db: &DbRef) -> Result<Box<dyn StoreWriter>, StorageError>;

    /// A field's bytes.
    fn read(&self, db: &DbRef, field: &FieldRef) -> Result<Vec<u8>, StorageError>;

    /// As `read`, for a caller that only passes the bytes on (a subscription carrying fields):
    /// a store that holds fields in memory hands out the stored buffer itself, checked, not a
    /// copy of it.
    fn read_shared(&self, db: &DbRef, field: &FieldRef) -> Result<Bytes, StorageError> {
        self.read(db, field).map(Bytes::from)
    }

    /// An object opened for reads at any offset, so streaming a retrieve copies bytes once,
    /// straight into the caller's buffer.
    fn open_object(&self, db: &DbRef, object: &str) -> Result<Box<dyn ObjectReader>, StorageError>;

    /// How `list --location` names an object.
    fn uri(&self, db: &DbRef, object: &str) -> String;

    /// Deletes every object the store holds for the database (or names what would go): called
    /// by wipe once the catalogue has made the database invisible. Returns the objects' URIs.
    fn wipe(&self, db: &DbRef, doit: bool) -> Result<Vec<String>, StorageError>;

    /// Deletes objects no catalogue entry references any more (after purge).
    fn remove(&self, db: &DbRef, objects: &[String]) -> Result<(), StorageError>;

    /// Size in bytes of an object, for statistics; `None` if it is gone.
    fn object_size(&self, db: &DbRef, object: &str) -> Option<u64>;

    /// The extraction information kept beside an object for fields whose catalogue entry has
    /// none (`storage::sidecar`), by offset; empty where the store keeps none (only a
    /// directory's data files have side files).
    fn side_entries(&self, _db: &DbRef, _object: &str) -> Result<SideMap, StorageError> {
        Ok(SideMap::new())
    }

    /// Adds extraction information beside an object (`extract-index`); refused by stores that
    /// cannot keep it.
    fn add_side_entries(
        &self,
        db: &DbRef,
        object: &str,
        _entries: &[super::sidecar::SideEntry],
    ) -> Result<(), StorageError> {
        Err(StorageError::Config {
            detail: format!(
                "{} cannot keep extraction information beside its objects ({}): only databases kept in a directory can",
                self.kind(),
                self.uri(db, object)
            ),
        })
    }
}

/// A side file's entries by the offset of their field.
pub type SideMap = std::collections::HashMap<u64, super::sidecar::SideEntry>;

pub trait StoreWriter: Send {
    /// Stores the bytes; they need not be durable until `sync`. The returned reference carries
    /// the bytes' CRC-32C, computed here once, while they are in cache.
    fn append(&mut self, data: &[u8]) -> Result<FieldRef, StorageError>;

    /// As `append`, for bytes the caller owns already (a server's receive buffer): a store that
    /// keeps fields in memory keeps this buffer instead of copying it. `checksum`, when given,
    /// is the CRC-32C of `data`, taken as the bytes arrived, so it is not taken again.
    fn append_shared(
        &mut self,
        data: Bytes,
        _checksum: Option<u32>,
    ) -> Result<FieldRef, StorageError> {
        self.append(&data)
    }

    /// As `append`, for a field whose `length` bytes come from `src` (a server receiving a large
    /// field): stores that write them in pieces never hold the whole field. The default reads it
    /// whole, then appends it.
    fn append_from(&mut self, length: u64, src: &mut dyn Read) -> Result<FieldRef, StorageError> {
        let data = read_exactly(length, src)?;
        self.append(&data)
    }

    /// Makes everything appended durable: called before the catalogue commits a flush.
    fn sync(&mut self) -> Result<(), StorageError>;
}

/// Exactly `length` bytes of `src`, grown as they arrive (an announced length costs nothing).
pub(crate) fn read_exactly(length: u64, src: &mut dyn Read) -> Result<Vec<u8>, StorageError> {
    let mut data = Vec::new();
    let got = src
        .take(length)
        .read_to_end(&mut data)
        .map_err(|source| StorageError::Source {
            got: 0,
            length,
            source,
        })? as u64;
    if got < length {
        return Err(StorageError::Source {
            got,
            length,
            source: std::io::ErrorKind::UnexpectedEof.into(),
        });
    }
    Ok(data)
}

pub trait ObjectReader: Send {
    /// Reads up to `buf.len()` bytes at `offset`; fewer only at the object's end.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, StorageError>;

    /// The OS file holding the object, if it is one (see [`super::fs::FsFile::os_file`]).
    fn os_file(&self) -> Option<&std::fs::File> {
        None
    }
}
