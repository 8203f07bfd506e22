//! The `toc` journal: checksummed records appended with one `write()` each flush.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::storage::fs::{read_full_at, FileSystem, FsFile, OpenMode};
use crate::storage::StorageError;

pub const FORMAT_VERSION: u32 = 1;
const MAGIC: &[u8; 4] = b"FSTC";
const HEADER: usize = 16;
/// Header byte 7: more records of the same append follow. An append (one flush's indexes, a
/// merge's index and its clear) is applied whole or not at all: a torn tail that kept some of
/// its records and lost the others would make a flush half-visible. Outside the checksum, as the
/// version is, so that builds from before it was set read these journals as they always did.
const MORE: u8 = 1;
/// Header byte 7 of an append's last record. Builds before it wrote 0 there, and read anything
/// but [`MORE`] as "last", so they read it as before; and one flipped bit no longer turns a
/// last record into one that says more follow (3 is no flag), which would make an acknowledged
/// flush read as an append cut short.
const END: u8 = 2;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Record {
    /// First record: which database this is and who owns it.
    Init {
        db_key: String,
        uid: u32,
        created: u64,
        /// Unique to this creation of the database (kept when a move copies the journal), so
        /// subscribers tell a database wiped and made again within the same second from the
        /// one they followed. Journals from before it have none.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        incarnation: Option<String>,
        /// The server identity that created it (docs/authorization.md); none for a database
        /// made locally, and in journals from before it (which read as before).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        creator: Option<String>,
    },
    /// Makes an index file visible.
    Index {
        file: String,
        index_key: String,
        entries: u64,
        timestamp: u64,
        /// keyword → values present in the index, so readers can skip it without opening it.
        axes: Vec<(String, Vec<String>)>,
        /// For a merged index: the file whose place in the journal it takes, so that indexes
        /// flushed while it was being merged stay newer than it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        slot: Option<String>,
    },
    /// Index files no longer live (purged or replaced).
    Clear { files: Vec<String> },
}

impl Record {
    fn kind(&self) -> u8 {
        match self {
            Record::Init { .. } => 1,
            Record::Index { .. } => 2,
            Record::Clear { .. } => 3,
        }
    }
}

/// Encodes records into one buffer, as one append writes them.
pub fn encode(records: &[Record]) -> Vec<u8> {
    encode_with_offsets(records).0
}

/// Encodes records into one buffer, with where each starts in it.
fn encode_with_offsets(records: &[Record]) -> (Vec<u8>, Vec<usize>) {
    let mut out = Vec::new();
    let mut starts = Vec::with_capacity(records.len());
    for (i, r) in records.iter().enumerate() {
        starts.push(out.len());
        let more = if i + 1 < records.len() { MORE } else { END };
        let payload = serde_json::to_vec(r).unwrap_or_default();
        let crc = record_crc(r.kind(), &payload);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(FORMAT_VERSION as u16).to_le_bytes());
        out.push(r.kind());
        out.push(more);
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&payload);
    }
    (out, starts)
}

/// A record's checksum: over its kind, its payload's length and its payload.
fn record_crc(kind: u8, payload: &[u8]) -> u32 {
    let c = crate::checksum::crc32c(&[kind]);
    let c = crate::checksum::crc32c_append(c, &(payload.len() as u32).to_le_bytes());
    crate::checksum::crc32c_append(c, payload)
}

enum Parsed {
    /// The record, its length, and whether more records of its append follow.
    Ok(Record, usize, bool),
    /// The record's bytes are not all there: a short header, or a length past the end.
    Short,
    Bad(String),
    Version(u32),
}

fn parse_at(buf: &[u8]) -> Parsed {
    if buf.len() < HEADER {
        return Parsed::Short;
    }
    if &buf[..4] != MAGIC {
        return Parsed::Bad("bad record magic".into());
    }
    let version = u16::from_le_bytes([buf[4], buf[5]]) as u32;
    let kind = buf[6];
    let len = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
    let crc = u32::from_le_bytes([buf[12], buf[13], buf[14], buf[15]]);
    let Some(payload) = buf.get(HEADER..HEADER + len) else {
        return Parsed::Short;
    };
    if record_crc(kind, payload) != crc {
        return Parsed::Bad("checksum mismatch".into());
    }
    if version != FORMAT_VERSION {
        return Parsed::Version(version);
    }
    if ![0, MORE, END].contains(&buf[7]) {
        return Parsed::Bad(format!("unknown record flags {:#04x}", buf[7]));
    }
    match decode_record(kind, payload) {
        Ok(r) => Parsed::Ok(r, HEADER + len, buf[7] == MORE),
        Err(e) => Parsed::Bad(e),
    }
}

/// Journals longer than this leave enough freed memory behind to be worth returning.
const TRIM_AFTER: u64 = 1 << 20;

fn give_back_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only returns free heap pages to the system.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// A record's payload, parsed as the kind its header names. Parsing it as a `Record` would make
/// serde buffer every record into a generic tree to find its `kind` first: that was most of
/// opening a database of 10,000 flushes (the journal of a 10-million-field forecast).
fn decode_record(kind: u8, payload: &[u8]) -> Result<Record, String> {
    #[derive(Deserialize)]
    struct Init {
        kind: String,
        db_key: String,
        uid: u32,
        created: u64,
        #[serde(default)]
        incarnation: Option<String>,
        #[serde(default)]
        creator: Option<String>,
    }
    #[derive(Deserialize)]
    struct Index {
        kind: String,
        file: String,
        index_key: String,
        entries: u64,
        timestamp: u64,
        axes: Vec<(String, Vec<String>)>,
        #[serde(default)]
        slot: Option<String>,
    }
    #[derive(Deserialize)]
    struct Clear {
        kind: String,
        files: Vec<String>,
    }
    let undecodable = |e: serde_json::Error| format!("undecodable record: {e}");
    let (named, record) = match kind {
        1 => {
            let r: Init = serde_json::from_slice(payload).map_err(undecodable)?;
            (
                r.kind,
                Record::Init {
                    db_key: r.db_key,
                    uid: r.uid,
                    created: r.created,
                    incarnation: r.incarnation,
                    creator: r.creator,
                },
            )
        }
        2 => {
            let r: Index = serde_json::from_slice(payload).map_err(undecodable)?;
            (
                r.kind,
                Record::Index {
                    file: r.file,
                    index_key: r.index_key,
                    entries: r.entries,
                    timestamp: r.timestamp,
                    axes: r.axes,
                    slot: r.slot,
                },
            )
        }
        3 => {
            let r: Clear = serde_json::from_slice(payload).map_err(undecodable)?;
            (r.kind, Record::Clear { files: r.files })
        }
        other => return Err(format!("unknown record kind {other}")),
    };
    let expected = match record {
        Record::Init { .. } => "init",
        Record::Index { .. } => "index",
        Record::Clear { .. } => "clear",
    };
    if named != expected {
        return Err("record kind does not match its payload".into());
    }
    Ok(record)
}

/// Whether damage at the start of `rest` (the journal from a record boundary to its end) is a
/// torn tail: what a crash during an append leaves, or what a reader sees of an append in
/// progress. Only two shapes qualify: a record whose bytes are not all there (a short header,
/// or a length reaching past the end of the file), and a tail of zeros that starts inside the
/// record (a filesystem that extended the file but lost the data after a power cut; every
/// record ends with a JSON `}`, never a zero). A complete record with a bad magic or checksum
/// is damage to what was acknowledged, and ignoring it would silently undo a flush.
fn is_torn_tail(rest: &[u8]) -> bool {
    let zeros_from = rest.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1);
    if zeros_from == 0 {
        return true;
    }
    if rest.len() < HEADER {
        return true;
    }
    let len = u32::from_le_bytes([rest[8], rest[9], rest[10], rest[11]]) as usize;
    let record_end = HEADER.saturating_add(len);
    if &rest[..4] == MAGIC && record_end > rest.len() {
        return true;
    }
    // A zero-filled tail beginning inside this record (or inside its header when the magic
    // itself is gone).
    let extent = if &rest[..4] == MAGIC {
        record_end
    } else {
        HEADER
    };
    zeros_from < rest.len() && zeros_from < extent
}

/// Why a record whose length reaches past the end of the journal (`rest` starts at its header)
/// is damage rather than a torn tail, if it is. A torn append leaves a prefix of what it
/// wrote, so nothing complete can follow it; but a bit flipped in a length field also makes a
/// record look cut short, and taking that for a torn tail would hide every flush after it (and
/// the next append would cut them off). Two signs tell them apart: the bytes that are there
/// are the whole record with the checksum it was written with (only its length is wrong), or a
/// record header starts after this one, damaged or not: the magic followed by a control byte
/// (the version's low byte), which a JSON payload cannot hold, since JSON escapes those.
fn damaged_length(rest: &[u8]) -> Option<String> {
    if rest.len() < HEADER || &rest[..4] != MAGIC {
        return None;
    }
    let claimed = u32::from_le_bytes([rest[8], rest[9], rest[10], rest[11]]);
    let crc = u32::from_le_bytes([rest[12], rest[13], rest[14], rest[15]]);
    let there = &rest[HEADER..];
    if record_crc(rest[6], there) == crc {
        return Some(format!(
            "damaged record length: it claims {claimed} bytes, and the {} bytes after its header \
             are the whole record",
            there.len()
        ));
    }
    let header_at = rest[HEADER..]
        .windows(MAGIC.len() + 1)
        .position(|w| &w[..4] == MAGIC && w[4] < 0x20)?;
    Some(format!(
        "damaged record length: it claims {claimed} bytes, past the end of the journal, but \
         another record starts {} bytes after its start",
        HEADER + header_at
    ))
}

/// Complete records read from a journal, each with the offset it starts at.
pub type Records = Vec<(u64, Record)>;

/// Reads the complete records from byte `start` (a record boundary) to the end, reading only
/// that part of the file: a writer or reader that has parsed up to `start` before pays only
/// for what was appended since. Returns them with the offset where the good records end.
///
/// A torn tail (see [`is_torn_tail`]) is ignored with the rest of the append it cut short, and
/// the end returned excludes them. Any other
/// damage is an error naming the file and the offset.
pub fn read_from(
    fs: &dyn FileSystem,
    path: &Path,
    start: u64,
) -> Result<(Records, u64), StorageError> {
    let f = fs
        .open(path, OpenMode::Read)
        .map_err(StorageError::io("open", path))?;
    read_tail(&*f, path, start)
}

fn read_tail(f: &dyn FsFile, path: &Path, start: u64) -> Result<(Records, u64), StorageError> {
    let (appends, end) = read_appends(f, path, start)?;
    Ok((
        appends
            .into_iter()
            .flat_map(|a| a.records.into_iter())
            .collect(),
        end,
    ))
}

/// One append, whole: the records one `write()` added, from byte `at` to byte `next`.
pub struct Append {
    pub at: u64,
    pub next: u64,
    pub records: Records,
}

/// The whole appends from byte `start` (a record boundary) to the end, and where they end;
/// an append cut short (a torn tail, or one being written) is left out, as [`read_from`] does.
pub fn read_appends(
    f: &dyn FsFile,
    path: &Path,
    start: u64,
) -> Result<(Vec<Append>, u64), StorageError> {
    let buf = f.read_from(start).map_err(StorageError::io("read", path))?;
    let mut pos = 0usize;
    let mut out = Vec::new();
    // Where the last complete append ends: records of an append cut short are not returned.
    let mut whole = 0usize;
    let mut group = Vec::new();
    while pos < buf.len() {
        let at = start + pos as u64;
        match parse_at(&buf[pos..]) {
            Parsed::Ok(r, n, more) => {
                group.push((at, r));
                pos += n;
                if !more {
                    out.push(Append {
                        at: start + whole as u64,
                        next: start + pos as u64,
                        records: std::mem::take(&mut group),
                    });
                    whole = pos;
                }
            }
            Parsed::Version(v) => {
                return Err(StorageError::UnsupportedVersion {
                    path: path.to_path_buf(),
                    found: v,
                    supported: FORMAT_VERSION,
                })
            }
            // A record cut short is a torn tail (the rest of it was never written), unless
            // what follows its header shows its length field is what was damaged.
            Parsed::Short => match damaged_length(&buf[pos..]) {
                None => break,
                Some(detail) => {
                    return Err(StorageError::Corrupt {
                        path: path.to_path_buf(),
                        offset: at,
                        detail,
                    })
                }
            },
            Parsed::Bad(_) if is_torn_tail(&buf[pos..]) => break,
            Parsed::Bad(detail) => {
                return Err(StorageError::Corrupt {
                    path: path.to_path_buf(),
                    offset: at,
                    detail,
                })
            }
        }
    }
    Ok((out, start + whole as u64))
}

/// The database key from the journal's first record, reading only that record: listing the
/// databases of a root must not read every journal whole.
pub fn read_db_key(fs: &dyn FileSystem, path: &Path) -> Result<crate::model::Key, StorageError> {
    let f = fs
        .open(path, OpenMode::Read)
        .map_err(StorageError::io("open", path))?;
    // FDB5's own toc (a database FDB5 wrote, or one kept in its format) names its key too.
    let mut head = [0u8; 8];
    if matches!(read_full_at(&*f, &mut head, 0), Ok(8))
        && crate::storage::fdb5::looks_like_fdb5(&head)
    {
        return crate::storage::fdb5::toc::read_init(&*f, path).map(|(k, _)| k);
    }
    let Init { db_key, .. } = read_init(&*f, path)?;
    crate::model::Key::parse(&db_key).map_err(|e| StorageError::Corrupt {
        path: path.to_path_buf(),
        offset: 0,
        detail: e.to_string(),
    })
}

/// The journal's Init record, reading only it.
pub struct Init {
    pub db_key: String,
    pub uid: u32,
    pub created: u64,
    pub incarnation: Option<String>,
    pub creator: Option<String>,
}

/// The journal's Init record, reading only it.
pub fn read_init(f: &dyn FsFile, path: &Path) -> Result<Init, StorageError> {
    let read_exact = |buf: &mut [u8], at: u64| match read_full_at(f, buf, at) {
        Ok(n) if n == buf.len() => Ok(()),
        Ok(_) => Err(StorageError::io("read", path)(std::io::Error::from(
            std::io::ErrorKind::UnexpectedEof,
        ))),
        Err(e) => Err(StorageError::io("read", path)(e)),
    };
    let mut head = [0u8; HEADER];
    read_exact(&mut head, 0)?;
    let len = u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as usize;
    let corrupt = |detail: String| StorageError::Corrupt {
        path: path.to_path_buf(),
        offset: 0,
        detail,
    };
    if len > 1 << 20 {
        return Err(corrupt(format!("first record claims {len} bytes")));
    }
    let mut buf = head.to_vec();
    buf.resize(HEADER + len, 0);
    read_exact(&mut buf[HEADER..], HEADER as u64)?;
    match parse_at(&buf) {
        Parsed::Ok(
            Record::Init {
                db_key,
                uid,
                created,
                incarnation,
                creator,
            },
            ..,
        ) => Ok(Init {
            db_key,
            uid,
            created,
            incarnation,
            creator,
        }),
        Parsed::Ok(..) => Err(corrupt(
            "the journal does not start with an Init record".into(),
        )),
        Parsed::Version(v) => Err(StorageError::UnsupportedVersion {
            path: path.to_path_buf(),
            found: v,
            supported: FORMAT_VERSION,
        }),
        Parsed::Short => Err(corrupt("short record".into())),
        Parsed::Bad(detail) => Err(corrupt(detail)),
    }
}

/// What an append found and did: the records others appended after the caller's `known_end`
/// (so the caller's view catches up without re-reading), and where its own records went.
pub struct Appended {
    pub others: Records,
    pub ours: Records,
    pub end: u64,
}

/// Holds `flock(LOCK_EX)` on the journal while alive; closing the descriptor releases it.
struct JournalLock<'a>(&'a dyn FsFile);

impl<'a> JournalLock<'a> {
    fn take(f: &'a dyn FsFile, path: &Path) -> Result<JournalLock<'a>, StorageError> {
        f.lock(true).map_err(StorageError::io("lock", path))?;
        Ok(JournalLock(f))
    }
}

impl Drop for JournalLock<'_> {
    fn drop(&mut self) {
        self.0.unlock();
    }
}

/// Appends records in one `write()` on an `O_APPEND` descriptor, then makes them durable.
///
/// `known_end` is where the caller's view of the journal ends (a record boundary it parsed
/// up to; 0 for a new journal). The `write()` happens under an exclusive `flock` on the
/// journal, which every appender takes, so under it nobody is mid-write: the records after
/// `known_end` are read (they are returned, so the caller's view catches up for free), and if
/// they end before the file does, what follows is a torn tail (a crash during an earlier
/// append) and is cut off, so the new records follow the last good one instead of making the
/// journal unreadable. Damage that is not a torn tail fails the append: nothing is written
/// into a journal that cannot be read. The fdatasync happens after the lock is released, so
/// appenders wait for each other's `write()` only, not for each other's disk flushes.
///
/// Only a new journal (`known_end` 0) is created: appending to one that was wiped meanwhile
/// fails instead of starting a journal without its Init record.
pub fn append(
    fs: &dyn FileSystem,
    path: &Path,
    known_end: u64,
    records: &[Record],
) -> Result<Appended, StorageError> {
    let (buf, starts) = encode_with_offsets(records);
    let f = fs
        .open(
            path,
            OpenMode::ReadAppend {
                create: known_end == 0,
            },
        )
        .map_err(StorageError::io("open", path))?;
    let appended = {
        let _lock = JournalLock::take(&*f, path)?;
        let len = f.len().map_err(StorageError::io("stat", path))?;
        if len < known_end {
            return Err(StorageError::Corrupt {
                path: path.to_path_buf(),
                offset: len,
                detail: format!(
                    "the journal is shorter ({len} bytes) than already read ({known_end}): replaced or truncated"
                ),
            });
        }
        let (others, end) = read_tail(&*f, path, known_end)?;
        if end < len {
            tracing::warn!(path = %path.display(), offset = end, "cutting off a torn record at the end of the journal before appending");
            f.set_len(end)
                .map_err(StorageError::io("truncate the torn tail of", path))?;
        }
        f.append(&buf)
            .map_err(StorageError::io("append to", path))?;
        let ours = starts
            .into_iter()
            .zip(records.iter().cloned())
            .map(|(s, r)| (end + s as u64, r))
            .collect();
        Appended {
            others,
            ours,
            end: end + buf.len() as u64,
        }
    };
    f.sync_data().map_err(StorageError::io("sync", path))?;
    Ok(appended)
}

/// How far a writer had read the journal when it wrote an index file: the end of what it had
/// read, and the record that ended there (where it starts, its checksum), in the journal of which
/// incarnation of the database. Kept in the index file's header (`seen`), it tells an index file
/// of a flush not published yet, or cut short, which the journal still explains, from one
/// written after the journal held more than it does now (cut short by more than one append, or
/// replaced by an older copy): proof that flushes it once held are lost.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalMark {
    pub end: u64,
    pub last: u64,
    pub crc: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub incarnation: Option<String>,
}

/// One live index as the journal describes it.
#[derive(Debug, Clone)]
pub struct LiveIndex {
    pub file: String,
    pub index_key: String,
    pub entries: u64,
    pub timestamp: u64,
    pub axes: Vec<(String, Vec<String>)>,
    /// Recency: the offset of the record whose place it takes (its own, or its slot's).
    pub position: u64,
    /// The offset of its own record, breaking ties between a merged index and its slot.
    pub record: u64,
}

/// A journal folded into what readers and writers need: the owner, the live indexes in
/// recency order. Built incrementally: [`JournalState::refresh`] parses only what was appended
/// since the last call, so a writer that commits again and again, or a reader that reopens a
/// grown journal, never re-parses its history.
#[derive(Debug, Clone, Default)]
pub struct JournalState {
    /// Where the parsed records end (a record boundary).
    pub end: u64,
    /// Complete records parsed.
    pub records: usize,
    /// The first record, when it is an Init: (database key, owner uid).
    pub init: Option<(String, u32)>,
    /// Set when the first record is not an Init.
    pub bad_start: bool,
    /// The Init record's incarnation (none in journals from before it).
    pub incarnation: Option<String>,
    /// Where the last complete record parsed starts.
    pub last_record: u64,
    /// Every index file ever made visible, with its recency, so a merged index's slot resolves
    /// even when the slot was cleared before the merged index's record (an older journal).
    positions: HashMap<String, u64>,
    live: HashMap<String, LiveIndex>,
    /// Live index files by index key, so looking at one key costs its indexes, not the
    /// database's.
    by_key: HashMap<String, Vec<String>>,
    /// Files a Clear record names that no Index record did (a failed flush withdrawn).
    withdrawn: HashSet<String>,
    /// Where the newest checkpoint this state knows of ends (0: none), so a writer knows when
    /// the journal has grown enough past it to make another.
    pub checkpointed: u64,
}

impl JournalState {
    /// The journal at `path` parsed: from its checkpoint where one matches, then what was
    /// appended after it.
    pub fn read(fs: &dyn FileSystem, path: &Path) -> Result<JournalState, StorageError> {
        let loaded = path
            .parent()
            .and_then(|dir| super::checkpoint::load(fs, dir));
        Self::read_from_state(fs, path, loaded)
    }

    /// The journal at `path` parsed from its first record.
    #[cfg(test)]
    pub fn read_all(fs: &dyn FileSystem, path: &Path) -> Result<JournalState, StorageError> {
        Self::read_from_state(fs, path, None)
    }

    fn read_from_state(
        fs: &dyn FileSystem,
        path: &Path,
        start: Option<JournalState>,
    ) -> Result<JournalState, StorageError> {
        let mut s = start.unwrap_or_default();
        s.refresh(fs, path)?;
        // A long journal (a forecast of 10,000 flushes and their merges) leaves tens of
        // megabytes of parsed, then dropped, records in the allocator: give them back, so a
        // listing or a reader of such a database stays small.
        if s.end > TRIM_AFTER {
            give_back_freed_memory();
        }
        Ok(s)
    }

    /// Parses what was appended since the last refresh.
    pub fn refresh(&mut self, fs: &dyn FileSystem, path: &Path) -> Result<(), StorageError> {
        let (records, end) = read_from(fs, path, self.end)?;
        self.apply(records, end);
        Ok(())
    }

    /// Folds in records that follow the parsed ones, ending at `end`.
    pub fn apply(&mut self, records: Records, end: u64) {
        for (at, r) in records {
            if self.records == 0 {
                match &r {
                    Record::Init {
                        db_key,
                        uid,
                        incarnation,
                        ..
                    } => {
                        self.init = Some((db_key.clone(), *uid));
                        self.incarnation = incarnation.clone();
                    }
                    _ => self.bad_start = true,
                }
            }
            self.records += 1;
            self.last_record = at;
            match r {
                Record::Init { .. } => {}
                Record::Index {
                    file,
                    index_key,
                    entries,
                    timestamp,
                    axes,
                    slot,
                } => {
                    let position = slot
                        .as_deref()
                        .and_then(|s| self.positions.get(s).copied())
                        .unwrap_or(at);
                    self.positions.insert(file.clone(), position);
                    self.by_key
                        .entry(index_key.clone())
                        .or_default()
                        .push(file.clone());
                    self.live.insert(
                        file.clone(),
                        LiveIndex {
                            file,
                            index_key,
                            entries,
                            timestamp,
                            axes,
                            position,
                            record: at,
                        },
                    );
                }
                Record::Clear { files } => {
                    for f in files {
                        if !self.positions.contains_key(&f) {
                            self.withdrawn.insert(f.clone());
                        }
                        let Some(gone) = self.live.remove(&f) else {
                            continue;
                        };
                        if let Some(v) = self.by_key.get_mut(&gone.index_key) {
                            v.retain(|x| *x != f);
                            if v.is_empty() {
                                self.by_key.remove(&gone.index_key);
                            }
                        }
                    }
                }
            }
        }
        self.end = self.end.max(end);
    }

    pub fn live_count(&self) -> usize {
        self.live.len()
    }

    /// What a checkpoint keeps besides the counters: every file ever named with its recency,
    /// the live indexes, the files withdrawn.
    pub(super) fn parts(
        &self,
    ) -> (
        &HashMap<String, u64>,
        &HashMap<String, LiveIndex>,
        &HashSet<String>,
    ) {
        (&self.positions, &self.live, &self.withdrawn)
    }

    /// A state as a checkpoint kept it, ending at `end` (which is where it was checkpointed).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn from_parts(
        end: u64,
        records: usize,
        init: Option<(String, u32)>,
        incarnation: Option<String>,
        last_record: u64,
        positions: HashMap<String, u64>,
        live: Vec<LiveIndex>,
        withdrawn: HashSet<String>,
    ) -> JournalState {
        let mut by_key: HashMap<String, Vec<String>> = HashMap::new();
        let mut live_map = HashMap::with_capacity(live.len());
        for l in live {
            by_key
                .entry(l.index_key.clone())
                .or_default()
                .push(l.file.clone());
            live_map.insert(l.file.clone(), l);
        }
        JournalState {
            end,
            records,
            init,
            bad_start: false,
            incarnation,
            last_record,
            positions,
            live: live_map,
            by_key,
            withdrawn,
            checkpointed: end,
        }
    }

    /// Makes a checkpoint of this state (parsed from the journal in `dir`) when the journal has
    /// grown [`super::checkpoint::EVERY`] past the last one. Best effort.
    pub fn checkpoint_if_due(&mut self, fs: &dyn FileSystem, dir: &Path) {
        if self.end >= self.checkpointed + super::checkpoint::EVERY {
            self.checkpoint(fs, dir);
        }
    }

    /// Makes a checkpoint of this state now. Best effort.
    pub fn checkpoint(&mut self, fs: &dyn FileSystem, dir: &Path) {
        super::checkpoint::save(fs, dir, self);
        self.checkpointed = self.end;
    }

    /// Everything but the counters, sorted (tests compare states with it).
    #[cfg(test)]
    pub(super) fn parts_sorted(&self) -> impl std::fmt::Debug {
        let mut positions: Vec<_> = self.positions.iter().collect();
        positions.sort();
        let mut live: Vec<_> = self
            .live
            .values()
            .map(|l| {
                (
                    &l.file,
                    &l.index_key,
                    l.entries,
                    l.timestamp,
                    &l.axes,
                    l.position,
                    l.record,
                )
            })
            .collect();
        live.sort();
        let mut withdrawn: Vec<_> = self.withdrawn.iter().collect();
        withdrawn.sort();
        let mut by_key: Vec<(&String, Vec<&String>)> = self
            .by_key
            .iter()
            .map(|(k, v)| {
                let mut v: Vec<&String> = v.iter().collect();
                v.sort();
                (k, v)
            })
            .collect();
        by_key.sort();
        format!("{positions:?} {live:?} {withdrawn:?} {by_key:?}")
    }

    /// Whether a record of the journal names this index file (made it visible, or cleared it).
    pub fn names(&self, file: &str) -> bool {
        self.positions.contains_key(file) || self.withdrawn.contains(file)
    }

    /// This view of the journal, for an index file written now to carry (`seen` in its
    /// header): while the journal holds it, the file can only be a flush not published yet or
    /// one cut short. First `toc` (the open journal, at `path`) is made durable, so that what
    /// this view holds of other writers' appends still in flight survives a power cut: the mark
    /// must never claim more than a crash can leave.
    pub fn mark(&self, toc: &dyn FsFile, path: &Path) -> Result<JournalMark, StorageError> {
        toc.sync_data().map_err(StorageError::io("sync", path))?;
        let mut head = [0u8; HEADER];
        match read_full_at(toc, &mut head, self.last_record) {
            Ok(HEADER) => {}
            Ok(_) => {
                return Err(StorageError::Corrupt {
                    path: path.to_path_buf(),
                    offset: self.last_record,
                    detail: "the journal is shorter than already read".into(),
                })
            }
            Err(e) => return Err(StorageError::io("read", path)(e)),
        }
        Ok(JournalMark {
            end: self.end,
            last: self.last_record,
            crc: u32::from_le_bytes([head[12], head[13], head[14], head[15]]),
            incarnation: self.incarnation.clone(),
        })
    }

    /// Whether the journal (open as `toc`, parsed into this state) still holds what `mark` saw:
    /// the record that ended it, unchanged, where it was. A journal only grows, so this holds
    /// for every index file written while it was (a flush in progress, or one cut short); a
    /// journal cut short or replaced since loses it.
    pub fn holds(&self, toc: &dyn FsFile, mark: &JournalMark) -> io::Result<bool> {
        if mark.end > self.end || mark.last >= mark.end {
            return Ok(false);
        }
        let mut head = [0u8; HEADER];
        if read_full_at(toc, &mut head, mark.last)? != HEADER || &head[..4] != MAGIC {
            return Ok(false);
        }
        let len = u32::from_le_bytes([head[8], head[9], head[10], head[11]]) as u64;
        let crc = u32::from_le_bytes([head[12], head[13], head[14], head[15]]);
        Ok(mark.last + HEADER as u64 + len == mark.end && crc == mark.crc)
    }

    /// Live indexes, newest first.
    pub fn live(&self) -> Vec<&LiveIndex> {
        let mut v: Vec<&LiveIndex> = self.live.values().collect();
        v.sort_by_key(|l| std::cmp::Reverse((l.position, l.record)));
        v
    }

    /// Live indexes of one index key, newest first.
    pub fn live_of(&self, index_key: &str) -> Vec<&LiveIndex> {
        let mut v: Vec<&LiveIndex> = self
            .by_key
            .get(index_key)
            .into_iter()
            .flatten()
            .filter_map(|f| self.live.get(f))
            .collect();
        v.sort_by_key(|l| std::cmp::Reverse((l.position, l.record)));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fs::OsFs;

    fn idx(n: u64) -> Record {
        Record::Index {
            file: format!("f{n}"),
            index_key: "{a=1}".into(),
            entries: n,
            timestamp: 0,
            axes: vec![],
            slot: None,
        }
    }

    fn init() -> Record {
        Record::Init {
            db_key: "{a=1}".into(),
            uid: 0,
            created: 1,
            incarnation: None,
            creator: None,
        }
    }

    fn raw_append(p: &Path, bytes: &[u8]) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(p).unwrap();
        f.write_all(bytes).unwrap();
    }

    #[test]
    fn init_records_carry_their_creator_and_older_ones_read_as_none() {
        let old: Record = serde_json::from_str(
            r#"{"kind":"init","db_key":"{a=1}","uid":0,"created":1,"incarnation":"x"}"#,
        )
        .unwrap();
        assert!(matches!(old, Record::Init { creator: None, .. }));
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("toc");
        let made = Record::Init {
            db_key: "{a=1}".into(),
            uid: 0,
            created: 1,
            incarnation: None,
            creator: Some("ingest".into()),
        };
        std::fs::write(&p, encode(&[made])).unwrap();
        let f = crate::storage::fs::os().open(&p, OpenMode::Read).unwrap();
        assert_eq!(
            read_init(&*f, &p).unwrap().creator.as_deref(),
            Some("ingest")
        );
        // Without a creator the record is byte for byte what older versions wrote.
        let plain = String::from_utf8(encode(&[init()])).unwrap_or_default();
        assert!(!plain.contains("creator"));
    }

    #[test]
    fn round_trip_and_torn_tail() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("toc");
        append(&OsFs, &p, 0, &[init()]).unwrap();
        let a = append(&OsFs, &p, 0, &[idx(1), idx(2)]).unwrap();
        assert_eq!(a.others.len(), 1, "the Init record, read under the lock");
        assert_eq!(a.ours.len(), 2);
        let (rs, end) = read_from(&OsFs, &p, 0).unwrap();
        assert_eq!(rs.len(), 3);
        assert_eq!(rs[1], a.ours[0]);
        assert_eq!(end, std::fs::metadata(&p).unwrap().len());
        assert_eq!(end, a.end);
        // A torn record at the tail is ignored.
        let whole = encode(&[idx(3)]);
        raw_append(&p, &whole[..whole.len() - 5]);
        let (rs, torn_end) = read_from(&OsFs, &p, 0).unwrap();
        assert_eq!(rs.len(), 3);
        assert_eq!(torn_end, end);
        // Damage followed by a valid record is corruption, named with its offset.
        raw_append(&p, &encode(&[idx(4)]));
        let e = read_from(&OsFs, &p, 0).unwrap_err().to_string();
        assert!(e.contains("is corrupt at offset"), "{e}");
    }

    #[test]
    fn an_append_cut_short_after_some_of_its_records_is_ignored_whole() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("toc");
        append(&OsFs, &p, 0, &[init()]).unwrap();
        let good = std::fs::metadata(&p).unwrap().len();
        let a = append(&OsFs, &p, good, &[idx(1), idx(2), idx(3)]).unwrap();
        let whole = std::fs::read(&p).unwrap();
        assert_eq!(read_from(&OsFs, &p, 0).unwrap().0.len(), 4);
        // Cut inside the last record, and exactly after the second: the first two are complete
        // records, but of an append that is not.
        let second_end = a.ours[2].0 as usize;
        for cut in [whole.len() - 7, second_end, a.ours[1].0 as usize] {
            std::fs::write(&p, &whole[..cut]).unwrap();
            let (rs, end) = read_from(&OsFs, &p, 0).unwrap();
            assert_eq!((rs.len(), end), (1, good), "cut at {cut}");
        }
        // The next append cuts the partial one off; then everything reads.
        let b = append(&OsFs, &p, good, &[idx(4)]).unwrap();
        assert_eq!(b.ours[0].0, good);
        let (rs, _) = read_from(&OsFs, &p, 0).unwrap();
        assert_eq!(
            rs.iter().map(|r| r.1.clone()).collect::<Vec<_>>(),
            [init(), idx(4)]
        );
    }

    #[test]
    fn a_damaged_last_record_is_corruption_not_a_torn_tail() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("toc");
        append(&OsFs, &p, 0, &[init()]).unwrap();
        let a = append(&OsFs, &p, 0, &[idx(1)]).unwrap();
        let mut bytes = std::fs::read(&p).unwrap();
        let n = bytes.len();
        bytes[n - 3] ^= 0x20;
        std::fs::write(&p, &bytes).unwrap();
        let e = read_from(&OsFs, &p, 0).unwrap_err().to_string();
        assert!(
            e.contains(&p.display().to_string())
                && e.contains(&format!("corrupt at offset {}", a.ours[0].0)),
            "{e}"
        );
        // And nothing is appended after it.
        let e = append(&OsFs, &p, 0, &[idx(2)]).err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("checksum")));
        assert_eq!(std::fs::read(&p).unwrap(), bytes);
        // A damaged magic is corruption too.
        bytes[n - 3] ^= 0x20;
        let start = a.ours[0].0 as usize;
        bytes[start] = b'X';
        std::fs::write(&p, &bytes).unwrap();
        assert!(read_from(&OsFs, &p, 0).is_err());
    }

    /// Regression (torture seed 1795543877184929749): a bit flipped in a length field made
    /// the record look cut short, so readers took it and every flush after it for a torn tail,
    /// and the next append cut them off.
    #[test]
    fn a_damaged_length_is_corruption_not_a_torn_tail() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("toc");
        append(&OsFs, &p, 0, &[init()]).unwrap();
        let mut ends = Vec::new();
        for n in 1..=3 {
            ends.push(append(&OsFs, &p, 0, &[idx(n)]).unwrap().ours[0].0 as usize);
        }
        let pristine = std::fs::read(&p).unwrap();
        // In the middle (flushes follow) and in the last record (nothing follows); past the end
        // of the journal (bits 10 and up), or not (a checksum mismatch, as before). The last
        // case (torture seed 10890124493299931533) also damages the payloads of the records
        // after it, so none of them is whole.
        let (p2, p3) = (ends[1] + HEADER + 5, ends[2] + HEADER + 5);
        for (start, bit, others) in [
            (ends[0], 12, vec![]),
            (ends[0], 30, vec![]),
            (ends[2], 10, vec![]),
            (ends[2], 20, vec![]),
            (ends[0], 3, vec![]),
            (ends[0], 11, vec![p2, p3]),
        ] {
            let mut bytes = pristine.clone();
            bytes[start + 8 + bit / 8] ^= 1 << (bit % 8);
            for at in others {
                bytes[at] ^= 0x10;
            }
            std::fs::write(&p, &bytes).unwrap();
            let e = read_from(&OsFs, &p, 0).unwrap_err().to_string();
            assert!(
                e.contains(&format!("corrupt at offset {start}"))
                    && e.contains(if bit >= 10 { "length" } else { "checksum" }),
                "{start}/{bit}: {e}"
            );
            let e = append(&OsFs, &p, 0, &[idx(9)]).err().map(|e| e.to_string());
            assert!(e.is_some_and(|e| e.contains("corrupt")), "{start}/{bit}");
            assert_eq!(
                std::fs::read(&p).unwrap(),
                bytes,
                "nothing cut off or added"
            );
        }
        // Unknown flags are damage too; so is the last record's "last" with a bit flipped, which
        // would otherwise read as "more follow" and hide the flush.
        for (start, bit) in [(ends[1], 6), (ends[2], 0), (ends[2], 2)] {
            let mut bytes = pristine.clone();
            bytes[start + 7] ^= 1 << bit;
            std::fs::write(&p, &bytes).unwrap();
            let e = read_from(&OsFs, &p, 0).unwrap_err().to_string();
            assert!(
                e.contains("flags") && e.contains(&format!("offset {start}")),
                "{start}/{bit}: {e}"
            );
        }
        // Journals of builds that wrote 0 for "last" read as before.
        let mut bytes = pristine.clone();
        for &start in &ends {
            bytes[start + 7] = 0;
        }
        std::fs::write(&p, &bytes).unwrap();
        assert_eq!(read_from(&OsFs, &p, 0).unwrap().0.len(), 4);
    }

    #[test]
    fn zeros_and_short_headers_at_the_end_are_torn_tails() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("toc");
        append(&OsFs, &p, 0, &[init(), idx(1)]).unwrap();
        let good = std::fs::metadata(&p).unwrap().len();
        raw_append(&p, &[0u8; 100]);
        assert_eq!(
            read_from(&OsFs, &p, 0).unwrap(),
            (read_from(&OsFs, &p, 0).unwrap().0, good)
        );
        // A record whose end the filesystem left as zeros.
        let whole = encode(&[idx(2)]);
        let mut zeroed = whole.clone();
        let len = zeroed.len();
        zeroed[len - 30..].fill(0);
        std::fs::write(
            &p,
            [std::fs::read(&p).unwrap()[..good as usize].to_vec(), zeroed].concat(),
        )
        .unwrap();
        let (rs, end) = read_from(&OsFs, &p, 0).unwrap();
        assert_eq!((rs.len(), end), (2, good));
        std::fs::write(
            &p,
            [
                std::fs::read(&p).unwrap()[..good as usize].to_vec(),
                whole[..9].to_vec(),
            ]
            .concat(),
        )
        .unwrap();
        assert_eq!(read_from(&OsFs, &p, 0).unwrap().1, good);
        // The next append cuts the torn tail off.
        let a = append(&OsFs, &p, good, &[idx(3)]).unwrap();
        assert!(a.others.is_empty());
        assert_eq!(a.ours[0].0, good);
        let (rs, end) = read_from(&OsFs, &p, 0).unwrap();
        assert_eq!(rs.len(), 3);
        assert_eq!(end, std::fs::metadata(&p).unwrap().len());
    }

    #[test]
    fn reading_from_an_offset_reads_only_from_there() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("toc");
        append(&OsFs, &p, 0, &[init()]).unwrap();
        let first_end = std::fs::metadata(&p).unwrap().len();
        append(&OsFs, &p, first_end, &[idx(1), idx(2)]).unwrap();
        // Damage before `start` is not read.
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[20] ^= 0xff;
        std::fs::write(&p, &bytes).unwrap();
        let (rs, _) = read_from(&OsFs, &p, first_end).unwrap();
        assert_eq!(rs.len(), 2);
        assert_eq!(rs[0].0, first_end);
        assert!(read_from(&OsFs, &p, 0).is_err());
    }

    #[test]
    fn journal_state_follows_appends_incrementally() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("toc");
        append(&OsFs, &p, 0, &[init(), idx(1), idx(2)]).unwrap();
        let mut s = JournalState::read(&OsFs, &p).unwrap();
        assert_eq!((s.records, s.live_count()), (3, 2));
        assert_eq!(s.init, Some(("{a=1}".into(), 0)));
        // Merge f1+f2 into m (slot f2); f3 flushed before the merge's record stays newer.
        append(&OsFs, &p, 0, &[idx(3)]).unwrap();
        let merged = Record::Index {
            file: "m".into(),
            index_key: "{a=1}".into(),
            entries: 3,
            timestamp: 0,
            axes: vec![],
            slot: Some("f2".into()),
        };
        let a = append(
            &OsFs,
            &p,
            s.end,
            &[
                merged,
                Record::Clear {
                    files: vec!["f1".into(), "f2".into()],
                },
            ],
        )
        .unwrap();
        assert_eq!(a.others.len(), 1);
        let before = s.end;
        s.apply(a.others, before);
        s.apply(a.ours, a.end);
        let names: Vec<&str> = s.live_of("{a=1}").iter().map(|l| l.file.as_str()).collect();
        assert_eq!(names, ["f3", "m"]);
        assert_eq!(s.records, 6);
        let fresh = JournalState::read(&OsFs, &p).unwrap();
        assert_eq!(fresh.end, s.end);
        let names: Vec<&str> = fresh.live().iter().map(|l| l.file.as_str()).collect();
        assert_eq!(names, ["f3", "m"]);
        // A refresh with nothing new reads nothing.
        s.refresh(&OsFs, &p).unwrap();
        assert_eq!(s.records, 6);
    }
}
