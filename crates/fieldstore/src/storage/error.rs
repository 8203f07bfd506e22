//! The storage layer's error type: every variant names the file or database concerned.

use std::path::PathBuf;

use crate::error_kind::ErrorKind;

#[derive(Debug, thiserror::Error)]
pub enum StorageError {
    #[error("cannot {op} {path}: {source}")]
    Io {
        op: &'static str,
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path} is corrupt at offset {offset}: {detail}")]
    Corrupt {
        path: PathBuf,
        offset: u64,
        detail: String,
    },
    #[error("{path}: format version {found} is not supported (this fieldstore reads version {supported})")]
    UnsupportedVersion {
        path: PathBuf,
        found: u32,
        supported: u32,
    },
    /// A field's bytes read back differ from what was archived (the data file is damaged).
    #[error("{object} is damaged: field {key} at offset {offset} ({length} bytes) does not match its checksum (archived as {expected:08x}, read back as {found:08x})")]
    FieldChecksum {
        /// The data file (the store's name for it, e.g. `file:///.../x.data`).
        object: String,
        offset: u64,
        length: u64,
        /// The field's key, or `?` where the reader does not know it.
        key: String,
        expected: u32,
        found: u32,
    },
    /// A directory under a root holds a database's files but no journal, so nothing in it can be
    /// read: reported so that data does not vanish from listings without a word.
    /// A file adopted where it lay changed or went since (`fieldstore adopt`).
    #[error("{path} was adopted and has changed since: {detail} (adopt it again, or restore it)")]
    AdoptedChanged { path: PathBuf, detail: String },
    /// An S3 object adopted where it lay (`fieldstore adopt s3://...`) was written anew or
    /// deleted since: its ETag no longer matches the one recorded at adoption.
    #[error("{uri} was adopted and has changed since: {detail} (adopt it again, or restore it)")]
    AdoptedObjectChanged { uri: String, detail: String },
    #[error("{dir} holds {files} fieldstore index/data files but no journal (toc): this database cannot be read (was its toc deleted?); restore the toc or remove the directory")]
    MissingJournal { dir: PathBuf, files: usize },
    /// Index files in a database's directory were written after its journal held more than it
    /// does now: the journal lost flushes it once held (cut short by more than an interrupted
    /// append, or replaced by an older copy), so it would show an older state as if current.
    #[error("{dir}: its journal (toc) has lost flushes it once held, so it would show an older state of the database: {} index file{} no journal record names {} written when the journal held more than it does now ({detail}); the toc was cut short or replaced (a partial restore?). `fieldstore check` lists the files; restore the whole toc, or move the files it lists out of the directory to accept what the journal shows", files.len(), if files.len() == 1 { "" } else { "s" }, if files.len() == 1 { "was" } else { "were" })]
    LostFlushes {
        dir: PathBuf,
        files: Vec<String>,
        /// About the first of them: how far its writer had read the journal, and how far the
        /// journal goes now.
        detail: String,
    },
    /// Two keys whose names on disk agree (same values, other keywords): the second is neither
    /// stored nor read there, so their fields never mix.
    #[error("{dir} holds database {found}, not {wanted} (their names on disk agree: same values, other keywords)")]
    NameTaken {
        dir: PathBuf,
        found: String,
        wanted: String,
    },
    /// A capacity-limited store cannot take a write: nothing of it was stored.
    #[error("{store} is full: {} of {} used, {} more wanted; {hint}", crate::storage::memory::human_bytes(*used), crate::storage::memory::human_bytes(*capacity), crate::storage::memory::human_bytes(*wanted))]
    Full {
        store: String,
        used: u64,
        capacity: u64,
        wanted: u64,
        /// What the user can do about it.
        hint: String,
    },
    /// A field streamed into a store stopped arriving (its client went away, or its frame was
    /// damaged): nothing of it is stored, and the writer takes no more fields.
    #[error("the field's bytes stopped arriving after {got} of {length}: {source}")]
    Source {
        got: u64,
        length: u64,
        #[source]
        source: std::io::Error,
    },
    #[error("{detail}")]
    Config { detail: String },
    #[error("no writable roots available for database {db}. Configured roots: [{roots}]")]
    NoWritableRoot { db: String, roots: String },
    /// The database a writer was opened on was wiped (and maybe made anew) before its commit:
    /// what it was to publish went with the old one.
    #[error("database {db} was wiped while this handle had unflushed fields in it: they were not stored (archive them again to store them in the new database)")]
    Wiped { db: PathBuf },
    /// A process whose MARS keys were read by one ecCodes writes into a store whose keys were
    /// read by another: versions file a few messages under different keys.
    #[error("this store's MARS keys were read by ecCodes {recorded} (recorded in {record}); this process loaded ecCodes {loaded}, and ecCodes versions disagree on some keys (one field could be filed under two): write with ecCodes {recorded} (`fieldstore info` says which ecCodes a process loads; FIELDSTORE_ECCODES_LIB or the eccodeslib wheel chooses it), or, once every writer of this store has moved to {loaded}, delete {record}")]
    EccodesMismatch {
        recorded: String,
        loaded: String,
        record: String,
    },
    /// The store's natively read MARS keys came from another version of the native reader's
    /// tables (another fieldstore release): they may file a message under another key.
    #[error("this store's MARS keys were read by fieldstore's native tables {recorded} (recorded in {record}); this fieldstore carries tables {loaded}, and table versions may disagree on some keys (one field could be filed under two): write with a fieldstore whose `fieldstore info` shows tables {recorded}, or, once every writer of this store carries {loaded}, delete {record}")]
    TablesMismatch {
        recorded: String,
        loaded: String,
        record: String,
    },
    /// An S3 request failed (after retries, for transient failures). `detail` carries the
    /// server's error code and message, and the endpoint.
    #[error("S3 {op} of {uri} failed{}: {detail}", status.map_or(String::new(), |s| format!(" (HTTP {s})")))]
    S3 {
        op: &'static str,
        /// `s3://bucket/prefix/key`.
        uri: String,
        /// `None`: no answer (transport error).
        status: Option<u16>,
        detail: String,
    },
    /// The S3 server lacks something fieldstore relies on for correctness.
    #[error("S3 server {endpoint} is not supported: {detail}")]
    S3Unsupported { endpoint: String, detail: String },
    #[error("database {db} belongs to uid {owner}; uid {user} may not {action} it")]
    PermissionDenied {
        db: PathBuf,
        owner: u32,
        user: u32,
        action: &'static str,
    },
    #[error("the {catalogue} catalogue cannot {what}")]
    Unsupported {
        catalogue: &'static str,
        what: &'static str,
    },
    /// A subscriber's cursor points into history that is gone (its index files purged).
    #[error("database {db}: the history after cursor {cursor} is gone ({detail}); subscribe again from now and list to catch up")]
    FellBehind {
        db: String,
        cursor: u64,
        detail: String,
    },
}

impl StorageError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            StorageError::Source { .. } => ErrorKind::Io,
            StorageError::Io { source, .. } => match source.kind() {
                std::io::ErrorKind::PermissionDenied => ErrorKind::Permission,
                std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded => {
                    ErrorKind::Full
                }
                _ => ErrorKind::Io,
            },
            StorageError::Corrupt { .. }
            | StorageError::FieldChecksum { .. }
            | StorageError::MissingJournal { .. }
            | StorageError::AdoptedChanged { .. }
            | StorageError::AdoptedObjectChanged { .. }
            | StorageError::LostFlushes { .. } => ErrorKind::Corrupt,
            StorageError::UnsupportedVersion { .. } => ErrorKind::Unsupported,
            StorageError::NameTaken { .. } => ErrorKind::Config,
            StorageError::Config { .. } | StorageError::NoWritableRoot { .. } => ErrorKind::Config,
            StorageError::PermissionDenied { .. } => ErrorKind::Permission,
            StorageError::Full { .. } => ErrorKind::Full,
            StorageError::Wiped { .. } => ErrorKind::NotFound,
            StorageError::EccodesMismatch { .. } | StorageError::TablesMismatch { .. } => {
                ErrorKind::Config
            }
            StorageError::S3 { status, .. } => match status {
                Some(401 | 403) => ErrorKind::Permission,
                Some(404) => ErrorKind::NotFound,
                Some(400) => ErrorKind::Config,
                _ => ErrorKind::Io,
            },
            StorageError::S3Unsupported { .. } | StorageError::Unsupported { .. } => {
                ErrorKind::Unsupported
            }
            StorageError::FellBehind { .. } => ErrorKind::FellBehind,
        }
    }

    pub(crate) fn io(
        op: &'static str,
        path: impl Into<PathBuf>,
    ) -> impl FnOnce(std::io::Error) -> StorageError {
        let path = path.into();
        move |source| StorageError::Io { op, path, source }
    }
}
