//! Index files: immutable, one per (writer, index key, flush); entries sorted by datum values so a
//! lookup is a binary search.
//!
//! Version 2 groups entries in blocks of `BLOCK` entries, each with its own checksum, and ends
//! with a table of the blocks (where each starts, its checksum, its first key) under one checksum.
//! Opening an index reads the header and that table only, and a block is checked and decoded the
//! first time it is used: finding one field in a million-entry index touches one block, not the
//! whole file. Version 1 files (one checksum over everything) are still read.
//!
//! Version 3 adds to each entry the CRC-32C of the field's bytes, computed when they were
//! archived, so a retrieve can tell damaged data from good data. Version 1 and 2 entries carry
//! none (`checksum: None`): their fields are returned unchecked, as before.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::journal::JournalMark;
use crate::storage::fs::{FileSystem, FsFile, Mapped, OpenMode};
use crate::storage::StorageError;

const MAGIC: &[u8; 4] = b"FSIX";
const TRAILER_MAGIC: &[u8; 4] = b"XISF";
const VERSION: u32 = 4;

/// The version a file of these entries is written in: 3 unless an entry carries extraction
/// information, so stores without it stay readable by builds that predate version 4.
fn version_for(entries: &[IndexEntry]) -> u32 {
    if entries.iter().any(|e| e.extract.is_some()) {
        VERSION
    } else {
        3
    }
}
/// Entries per block: a lookup checks and decodes this many (about 50 KiB of small keys).
const BLOCK: usize = 1024;
/// Trailer: table offset (u64), block count (u32), checksum of header + table (u32), magic.
const TRAILER: usize = 20;
/// Separates datum values in an entry's key (a byte no MARS value contains).
pub(crate) const SEP: char = crate::storage::catalogue::EntryView::SEP;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// The datum values in the order of `IndexFile::datum_keywords`, joined by `SEP`.
    pub values: String,
    pub file: u32,
    pub offset: u64,
    pub length: u64,
    /// Replaced by a newer copy (kept by compaction so `--full` still lists it).
    pub masked: bool,
    /// CRC-32C of the field's bytes; `None` for entries from version 1 and 2 indexes, which
    /// compaction carries over without one.
    pub checksum: Option<u32>,
    /// The field's extraction information (see `FieldRef::extract`); version 4 only.
    pub extract: Option<std::sync::Arc<[u8]>>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    index_key: String,
    datum_keywords: Vec<String>,
    data_files: Vec<String>,
    count: u64,
    /// How far its writer had read the journal (absent in files from before it; older builds
    /// ignore it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    seen: Option<JournalMark>,
}

/// Where a block's entries are, and how to check them.
struct Block {
    start: usize,
    end: usize,
    /// First entry's key (in the map), so lookups pick a block without touching the others.
    first: (usize, usize),
    crc: Option<u32>,
    /// Entry starts, once the block was checked.
    starts: OnceLock<Result<Box<[u32]>, String>>,
}

/// A read index: the file is mapped, its block table checked when opened, each block checked
/// and decoded on first use; a decoded block costs 4 bytes of heap per entry.
pub struct IndexFile {
    pub index_key: String,
    pub datum_keywords: Vec<String>,
    pub data_files: Vec<String>,
    /// How far its writer had read the journal when it wrote it (`None` in older files).
    pub seen: Option<JournalMark>,
    path: PathBuf,
    map: Mapped,
    count: usize,
    blocks: Vec<Block>,
    /// The file's format version: it decides an entry's fixed part (`fixed_len`).
    version: u32,
}

/// One entry, borrowed from the mapped file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef<'a> {
    pub values: &'a str,
    pub file: u32,
    pub offset: u64,
    pub length: u64,
    pub masked: bool,
    pub checksum: Option<u32>,
    pub extract: Option<&'a [u8]>,
}

impl IndexEntry {
    pub fn as_ref(&self) -> EntryRef<'_> {
        EntryRef {
            values: &self.values,
            file: self.file,
            offset: self.offset,
            length: self.length,
            masked: self.masked,
            checksum: self.checksum,
            extract: self.extract.as_deref(),
        }
    }
}

impl EntryRef<'_> {
    pub fn to_owned(self) -> IndexEntry {
        IndexEntry {
            values: self.values.to_string(),
            file: self.file,
            offset: self.offset,
            length: self.length,
            masked: self.masked,
            checksum: self.checksum,
            extract: self.extract.map(std::sync::Arc::from),
        }
    }
}

/// Fixed part of an entry after its key: file (u32), offset (u64), length (u64), flags (u8),
/// and since version 3 the field's checksum (u32).
fn fixed_len(version: u32) -> usize {
    if version >= 3 {
        25
    } else {
        21
    }
}

/// The smallest fixed part of any version: bounds what a damaged header's count may claim.
const MIN_FIXED: usize = 21;
/// Entry flags (version 3; versions 1 and 2 only ever wrote 0 or 1, "masked").
const FLAG_MASKED: u8 = 1;
const FLAG_CHECKSUM: u8 = 2;
/// Version 4: the fixed part is followed by extraction information (u32 length, bytes).
const FLAG_EXTRACT: u8 = 4;
/// The most extraction information one entry may carry: far beyond what any field's packing
/// needs (a CCSDS field of 100 million points has 25,000 intervals), and it bounds what a
/// damaged length can make a reader skip.
pub(crate) const MAX_EXTRACT: usize = 1 << 20;

/// Bytes an entry takes after its fixed part: version 4's extraction information, if flagged.
fn extra_len(rec_tail: &[u8], version: u32, flags: u8) -> Option<usize> {
    if version >= 4 && flags & FLAG_EXTRACT != 0 {
        let n = usize::try_from(le(rec_tail.get(..4)?)).ok()?;
        (n <= MAX_EXTRACT).then_some(4 + n)
    } else {
        Some(0)
    }
}

fn le(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
}

/// Encodes one entry as `version` lays it out (older versions only for tests of reading them).
fn encode_entry(buf: &mut Vec<u8>, e: EntryRef<'_>, version: u32) {
    buf.extend_from_slice(&(e.values.len() as u16).to_le_bytes());
    buf.extend_from_slice(e.values.as_bytes());
    buf.extend_from_slice(&e.file.to_le_bytes());
    buf.extend_from_slice(&e.offset.to_le_bytes());
    buf.extend_from_slice(&e.length.to_le_bytes());
    if version >= 3 {
        let flags = if e.masked { FLAG_MASKED } else { 0 }
            | if e.checksum.is_some() {
                FLAG_CHECKSUM
            } else {
                0
            };
        let extract = e.extract.filter(|x| version >= 4 && x.len() <= MAX_EXTRACT);
        buf.push(flags | if extract.is_some() { FLAG_EXTRACT } else { 0 });
        buf.extend_from_slice(&e.checksum.unwrap_or(0).to_le_bytes());
        if let Some(x) = extract {
            buf.extend_from_slice(&(x.len() as u32).to_le_bytes());
            buf.extend_from_slice(x);
        }
    } else {
        buf.push(u8::from(e.masked));
    }
}

/// Lays out a block-format file (versions 2 to 4) as its entries come, in key order: header,
/// blocks, block table, trailer. The bytes collect in `out`, which the caller may take between
/// blocks ([`Encoder::take`]), so a file of millions of entries is written in bounded memory.
struct Encoder {
    version: u32,
    out: Vec<u8>,
    /// Bytes taken out of `out` already.
    taken: u64,
    header_crc: u32,
    /// Entries the header promised.
    promised: u64,
    count: u64,
    table: Vec<u8>,
    /// Entries in the open block, where it starts in `out`, and its first key.
    in_block: usize,
    block_at: usize,
    first: Vec<u8>,
}

impl Encoder {
    fn new(header: &Header, version: u32, capacity: usize) -> Encoder {
        let json = serde_json::to_vec(header).unwrap_or_default();
        let mut out = Vec::with_capacity(capacity.max(64 + json.len()));
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&version.to_le_bytes());
        out.extend_from_slice(&(json.len() as u32).to_le_bytes());
        out.extend_from_slice(&json);
        Encoder {
            version,
            header_crc: crate::checksum::crc32c(&out),
            out,
            taken: 0,
            promised: header.count,
            count: 0,
            table: Vec::new(),
            in_block: 0,
            block_at: 0,
            first: Vec::new(),
        }
    }

    fn push(&mut self, e: EntryRef<'_>) {
        if self.in_block == 0 {
            self.block_at = self.out.len();
            self.first.clear();
            self.first.extend_from_slice(e.values.as_bytes());
        }
        encode_entry(&mut self.out, e, self.version);
        self.in_block += 1;
        self.count += 1;
        if self.in_block == BLOCK {
            self.close_block();
        }
    }

    fn close_block(&mut self) {
        if self.in_block == 0 {
            return;
        }
        let start = self.taken + self.block_at as u64;
        self.table.extend_from_slice(&start.to_le_bytes());
        self.table
            .extend_from_slice(&crate::checksum::crc32c(&self.out[self.block_at..]).to_le_bytes());
        self.table
            .extend_from_slice(&(self.first.len() as u16).to_le_bytes());
        self.table.extend_from_slice(&self.first);
        self.in_block = 0;
    }

    /// The bytes of whole blocks so far, once there are at least `at_least` of them.
    fn take(&mut self, at_least: usize) -> Option<Vec<u8>> {
        if self.in_block != 0 || self.out.len() < at_least {
            return None;
        }
        self.taken += self.out.len() as u64;
        Some(std::mem::take(&mut self.out))
    }

    /// The rest of the file; `None` when the entries pushed are not the count the header gave.
    fn finish(mut self) -> Option<Vec<u8>> {
        self.close_block();
        if self.count != self.promised {
            return None;
        }
        let table_offset = self.taken + self.out.len() as u64;
        let meta_crc = crate::checksum::crc32c_append(self.header_crc, &self.table);
        let blocks = self.count.div_ceil(BLOCK as u64) as u32;
        self.out.extend_from_slice(&self.table);
        self.out.extend_from_slice(&table_offset.to_le_bytes());
        self.out.extend_from_slice(&blocks.to_le_bytes());
        self.out.extend_from_slice(&meta_crc.to_le_bytes());
        self.out.extend_from_slice(TRAILER_MAGIC);
        Some(self.out)
    }
}

/// An index file written as its entries come, in key order (equal keys together: the live copy,
/// then masked ones), in bounded memory: a compaction's merge of millions of entries. The
/// header, written first, carries the count, so the caller knows it beforehand.
pub struct IndexWriter {
    file: Box<dyn FsFile>,
    path: PathBuf,
    enc: Encoder,
    last: Vec<u8>,
}

/// Bytes collected before they are appended to the file.
const WRITE_CHUNK: usize = 1 << 20;

impl IndexWriter {
    #[allow(clippy::too_many_arguments)]
    pub fn create(
        fs: &dyn FileSystem,
        path: &Path,
        index_key: &str,
        datum_keywords: &[String],
        data_files: &[String],
        count: u64,
        with_extract: bool,
        seen: Option<&JournalMark>,
    ) -> Result<IndexWriter, StorageError> {
        let file = fs
            .open(path, OpenMode::CreateNew)
            .map_err(StorageError::io("create", path))?;
        let header = Header {
            index_key: index_key.to_string(),
            datum_keywords: datum_keywords.to_vec(),
            data_files: data_files.to_vec(),
            count,
            seen: seen.cloned(),
        };
        let version = if with_extract { VERSION } else { 3 };
        Ok(IndexWriter {
            file,
            path: path.to_path_buf(),
            enc: Encoder::new(&header, version, WRITE_CHUNK + 64 * 1024),
            last: Vec::new(),
        })
    }

    pub fn push(&mut self, e: EntryRef<'_>) -> Result<(), StorageError> {
        if self.enc.count > 0 && e.values.as_bytes() < self.last.as_slice() {
            return Err(StorageError::Corrupt {
                path: self.path.clone(),
                offset: 0,
                detail: format!(
                    "index entries out of order at '{}'",
                    e.values.replace(SEP, ",")
                ),
            });
        }
        self.last.clear();
        self.last.extend_from_slice(e.values.as_bytes());
        self.enc.push(e);
        if let Some(bytes) = self.enc.take(WRITE_CHUNK) {
            self.file
                .append(&bytes)
                .map_err(StorageError::io("write", &self.path))?;
            self.enc.out = bytes;
            self.enc.out.clear();
        }
        Ok(())
    }

    /// Writes the block table and trailer and syncs the file.
    pub fn finish(self) -> Result<(), StorageError> {
        let path = self.path;
        let promised = self.enc.promised;
        let count = self.enc.count;
        let rest = self.enc.finish().ok_or_else(|| StorageError::Corrupt {
            path: path.clone(),
            offset: 0,
            detail: format!("{count} entries written where the header says {promised}"),
        })?;
        self.file
            .append(&rest)
            .map_err(StorageError::io("write", &path))?;
        self.file
            .sync_data()
            .map_err(StorageError::io("sync", &path))
    }
}

/// Checks `n` entries from `pos` (bounds, UTF-8, data file, order) and returns where each starts.
fn scan(
    body: &[u8],
    mut pos: usize,
    n: usize,
    data_files: usize,
    version: u32,
) -> Result<(Vec<u32>, usize), (usize, &'static str)> {
    let fixed = fixed_len(version);
    let mut starts = Vec::with_capacity(n);
    let mut previous: Option<&[u8]> = None;
    for _ in 0..n {
        let at = pos;
        let len = body
            .get(pos..pos + 2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
            .ok_or((at, "truncated entry"))?;
        let rec = body
            .get(pos + 2..pos + 2 + len + fixed)
            .ok_or((at, "truncated entry"))?;
        let values = &rec[..len];
        std::str::from_utf8(values).map_err(|_| (at, "entry key is not UTF-8"))?;
        if le(&rec[len..len + 4]) as usize >= data_files {
            return Err((at, "entry names a data file the index does not list"));
        }
        if previous.is_some_and(|p| p > values) {
            return Err((at, "entries out of order"));
        }
        let extra = extra_len(
            body.get(pos + 2 + len + fixed..).unwrap_or_default(),
            version,
            rec[len + 20],
        )
        .ok_or((at, "entry's extraction information truncated or too long"))?;
        if body.len() < pos + 2 + len + fixed + extra {
            return Err((at, "truncated entry"));
        }
        previous = Some(values);
        starts.push(u32::try_from(at).map_err(|_| (at, "entry beyond 4 GiB"))?);
        pos += 2 + len + fixed + extra;
    }
    Ok((starts, pos))
}

impl IndexFile {
    /// Writes and syncs the file. Later entries with the same values replace earlier ones.
    /// `seen`: how far the writer had read the journal (see [`JournalMark`]).
    pub fn write(
        fs: &dyn FileSystem,
        path: &Path,
        index_key: &str,
        datum_keywords: &[String],
        data_files: &[String],
        entries: Vec<IndexEntry>,
        seen: Option<&JournalMark>,
    ) -> Result<(), StorageError> {
        let version = version_for(&entries);
        let buf = Self::encode(
            index_key,
            datum_keywords,
            data_files,
            entries,
            version,
            seen,
        );
        write_new(fs, path, &buf)
    }

    /// The file's bytes in block format `version` (2 to 4; 2 only for tests that older files
    /// still read).
    fn encode(
        index_key: &str,
        datum_keywords: &[String],
        data_files: &[String],
        mut entries: Vec<IndexEntry>,
        version: u32,
        seen: Option<&JournalMark>,
    ) -> Vec<u8> {
        // Stable sort keeps archive order among equal keys; of live copies keep the last,
        // then masked copies (from compaction) after it.
        entries.sort_by(|a, b| a.values.cmp(&b.values).then(a.masked.cmp(&b.masked)));
        let mut dedup: Vec<IndexEntry> = Vec::with_capacity(entries.len());
        for e in entries {
            match dedup.last_mut() {
                Some(last) if last.values == e.values && !last.masked && !e.masked => *last = e,
                _ => dedup.push(e),
            }
        }
        Self::encode_sorted(index_key, datum_keywords, data_files, &dedup, version, seen)
    }

    /// Writes entries already in index order, no key twice (a conversion's): nothing is
    /// sorted or copied. Out of order entries are refused. The file is not yet durable: its
    /// writeback has started, and the caller must `sync_data` the file returned before any
    /// journal record names it (a conversion writes many, then syncs them together, so the
    /// disk works while the CPU makes the next). The bytes written are returned for the caller
    /// to compare with what reads back.
    pub fn write_sorted(
        fs: &dyn FileSystem,
        path: &Path,
        index_key: &str,
        datum_keywords: &[String],
        data_files: &[String],
        entries: &[IndexEntry],
        seen: Option<&JournalMark>,
    ) -> Result<(Box<dyn FsFile>, Vec<u8>), StorageError> {
        if let Some(w) = entries.windows(2).find(|w| w[0].values >= w[1].values) {
            return Err(StorageError::Corrupt {
                path: path.to_path_buf(),
                offset: 0,
                detail: format!(
                    "index entries out of order or repeated at '{}'",
                    w[1].values.replace(SEP, ",")
                ),
            });
        }
        let buf = Self::encode_sorted(
            index_key,
            datum_keywords,
            data_files,
            entries,
            version_for(entries),
            seen,
        );
        let f = fs
            .open(path, OpenMode::CreateNew)
            .map_err(StorageError::io("create", path))?;
        f.append(&buf).map_err(StorageError::io("write", path))?;
        f.start_writeback(0, buf.len() as u64);
        Ok((f, buf))
    }

    fn encode_sorted(
        index_key: &str,
        datum_keywords: &[String],
        data_files: &[String],
        dedup: &[IndexEntry],
        version: u32,
        seen: Option<&JournalMark>,
    ) -> Vec<u8> {
        let header = Header {
            index_key: index_key.to_string(),
            datum_keywords: datum_keywords.to_vec(),
            data_files: data_files.to_vec(),
            count: dedup.len() as u64,
            seen: seen.cloned(),
        };
        let mut enc = Encoder::new(&header, version, 64 + dedup.len() * 48);
        for e in dedup {
            enc.push(e.as_ref());
        }
        enc.finish().unwrap_or_default()
    }

    /// Maps the file: index files are immutable once their journal record exists (purge and
    /// wipe unlink them, which leaves a mapping intact).
    pub fn read(fs: &dyn FileSystem, path: &Path) -> Result<IndexFile, StorageError> {
        let map = fs.map(path).map_err(StorageError::io("open", path))?;
        let buf: &[u8] = &map;
        let corrupt = |offset: usize, detail: &str| StorageError::Corrupt {
            path: path.to_path_buf(),
            offset: offset as u64,
            detail: detail.to_string(),
        };
        if buf.len() < 16 || &buf[..4] != MAGIC {
            return Err(corrupt(0, "not a fieldstore index file"));
        }
        if buf.len() > u32::MAX as usize {
            return Err(corrupt(0, "index file larger than 4 GiB"));
        }
        let version = le(&buf[4..8]) as u32;
        let hlen = le(&buf[8..12]) as usize;
        // Version 2 keeps the header outside the blocks' checksums, so check it before parsing.
        let (header, header_end, tail) = match version {
            1 => {
                let (body, tail) = buf.split_at(buf.len() - 4);
                if crate::checksum::crc32c(body) != le(tail) as u32 {
                    return Err(corrupt(buf.len() - 4, "checksum mismatch"));
                }
                (body.get(12..12 + hlen), 12 + hlen, None)
            }
            2..=4 => {
                if buf.len() < 12 + TRAILER || &buf[buf.len() - 4..] != TRAILER_MAGIC {
                    return Err(corrupt(buf.len(), "truncated: no trailer"));
                }
                let t = &buf[buf.len() - TRAILER..];
                let table_offset = le(&t[..8]) as usize;
                let blocks = le(&t[8..12]) as usize;
                let table_end = buf.len() - TRAILER;
                if table_offset < 12 + hlen || table_offset > table_end {
                    return Err(corrupt(buf.len() - TRAILER, "block table out of bounds"));
                }
                let meta = crate::checksum::crc32c_append(
                    crate::checksum::crc32c(&buf[..12 + hlen]),
                    &buf[table_offset..table_end],
                );
                if meta != le(&t[12..16]) as u32 {
                    return Err(corrupt(
                        table_offset,
                        "checksum mismatch (header or block table)",
                    ));
                }
                (
                    buf.get(12..12 + hlen),
                    12 + hlen,
                    Some((table_offset, table_end, blocks)),
                )
            }
            found => {
                return Err(StorageError::UnsupportedVersion {
                    path: path.to_path_buf(),
                    found,
                    supported: VERSION,
                })
            }
        };
        let hbytes = header.ok_or_else(|| corrupt(12, "header past the end"))?;
        let header: Header =
            serde_json::from_slice(hbytes).map_err(|e| corrupt(12, &format!("bad header: {e}")))?;
        let count = usize::try_from(header.count).unwrap_or(usize::MAX);
        // Every entry takes at least MIN_FIXED + 2 bytes: a count claiming more is corrupt, and
        // refusing it first keeps a damaged header from reserving gigabytes.
        if count > buf.len() / (MIN_FIXED + 2) {
            return Err(corrupt(12, "entry count larger than the file"));
        }
        let nfiles = header.data_files.len();
        let blocks = match tail {
            None => {
                // Version 1: checked as a whole above; decode it all now.
                let (starts, _) = scan(&buf[..buf.len() - 4], header_end, count, nfiles, version)
                    .map_err(|(at, d)| corrupt(at, d))?;
                let mut blocks = Vec::new();
                for chunk in starts.chunks(BLOCK) {
                    let first = chunk[0] as usize;
                    let klen = le(&buf[first..first + 2]) as usize;
                    let cell = OnceLock::new();
                    let _ = cell.set(Ok(chunk.to_vec().into_boxed_slice()));
                    blocks.push(Block {
                        start: first,
                        end: buf.len() - 4,
                        first: (first + 2, first + 2 + klen),
                        crc: None,
                        starts: cell,
                    });
                }
                blocks
            }
            Some((table_offset, table_end, n)) => {
                if n != count.div_ceil(BLOCK) {
                    return Err(corrupt(table_offset, "block count does not match entries"));
                }
                let table = &buf[table_offset..table_end];
                let mut blocks: Vec<Block> = Vec::with_capacity(n);
                let mut pos = 0;
                for _ in 0..n {
                    let at = table_offset + pos;
                    let rec = table
                        .get(pos..pos + 14)
                        .ok_or_else(|| corrupt(at, "block table truncated"))?;
                    let start = le(&rec[..8]) as usize;
                    let crc = le(&rec[8..12]) as u32;
                    let klen = le(&rec[12..14]) as usize;
                    let key = (table_offset + pos + 14, table_offset + pos + 14 + klen);
                    if key.1 > table_end || std::str::from_utf8(&buf[key.0..key.1]).is_err() {
                        return Err(corrupt(at, "block table truncated"));
                    }
                    let floor = blocks.last().map_or(header_end, |b| b.start + 1);
                    if start < floor || start >= table_offset {
                        return Err(corrupt(at, "block out of order or out of bounds"));
                    }
                    if let Some(last) = blocks.last_mut() {
                        last.end = start;
                    }
                    blocks.push(Block {
                        start,
                        end: table_offset,
                        first: key,
                        crc: Some(crc),
                        starts: OnceLock::new(),
                    });
                    pos += 14 + klen;
                }
                if blocks.first().is_some_and(|b| b.start != header_end) {
                    return Err(corrupt(
                        header_end,
                        "first block does not follow the header",
                    ));
                }
                blocks
            }
        };
        Ok(IndexFile {
            index_key: header.index_key,
            datum_keywords: header.datum_keywords,
            data_files: header.data_files,
            seen: header.seen,
            path: path.to_path_buf(),
            map,
            count,
            blocks,
            version,
        })
    }

    pub fn len(&self) -> usize {
        self.count
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Where block `b`'s entries start, checking and decoding it the first time.
    fn block(&self, b: usize) -> Result<&[u32], StorageError> {
        let block = &self.blocks[b];
        let n = if b + 1 == self.blocks.len() {
            self.count - b * BLOCK
        } else {
            BLOCK
        };
        let decoded = block.starts.get_or_init(|| {
            let bytes = &self.map[..block.end];
            if let Some(crc) = block.crc {
                if crate::checksum::crc32c(&bytes[block.start..]) != crc {
                    return Err(format!(
                        "block {b} at offset {}: checksum mismatch",
                        block.start
                    ));
                }
            }
            match scan(bytes, block.start, n, self.data_files.len(), self.version) {
                Ok((starts, end)) if end == block.end || block.crc.is_none() => {
                    Ok(starts.into_boxed_slice())
                }
                Ok(_) => Err(format!("block {b}: entries do not fill it")),
                Err((at, d)) => Err(format!("offset {at}: {d}")),
            }
        });
        decoded.as_deref().map_err(|detail| StorageError::Corrupt {
            path: self.path.clone(),
            offset: block.start as u64,
            detail: detail.clone(),
        })
    }

    fn decode(&self, at: usize) -> Option<EntryRef<'_>> {
        let b: &[u8] = &self.map;
        let len = usize::from(u16::from_le_bytes([*b.get(at)?, *b.get(at + 1)?]));
        let rec = b.get(at + 2..at + 2 + len + fixed_len(self.version))?;
        let flags = rec[len + 20];
        let (masked, checksum) = if self.version >= 3 {
            let crc = le(&rec[len + 21..len + 25]) as u32;
            (
                flags & FLAG_MASKED != 0,
                (flags & FLAG_CHECKSUM != 0).then_some(crc),
            )
        } else {
            (flags != 0, None)
        };
        let tail = at + 2 + len + fixed_len(self.version);
        let extract = match extra_len(b.get(tail..)?, self.version, flags)? {
            0 => None,
            n => Some(b.get(tail + 4..tail + n)?),
        };
        Some(EntryRef {
            values: std::str::from_utf8(&rec[..len]).ok()?,
            file: le(&rec[len..len + 4]) as u32,
            offset: le(&rec[len + 4..len + 12]),
            length: le(&rec[len + 12..len + 20]),
            masked,
            checksum,
            extract,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn block_count(&self) -> usize {
        self.blocks.len()
    }

    /// The positions of block `b`'s entries, checked, into `out`, without keeping them: what a
    /// walk through every entry needs, once each (a listing of a 10-million-field index would
    /// otherwise hold 40 MB of them).
    pub fn block_starts_into(&self, b: usize, out: &mut Vec<u32>) -> Result<(), StorageError> {
        out.clear();
        let Some(block) = self.blocks.get(b) else {
            return Ok(());
        };
        if block.starts.get().is_some() {
            out.extend_from_slice(self.block(b)?);
            return Ok(());
        }
        let n = if b + 1 == self.blocks.len() {
            self.count - b * BLOCK
        } else {
            BLOCK
        };
        let corrupt = |detail: String| StorageError::Corrupt {
            path: self.path.clone(),
            offset: block.start as u64,
            detail,
        };
        let bytes = self
            .map
            .get(..block.end)
            .ok_or_else(|| corrupt(format!("block {b} runs past the file")))?;
        if let Some(crc) = block.crc {
            if crate::checksum::crc32c(&bytes[block.start..]) != crc {
                return Err(corrupt(format!(
                    "block {b} at offset {}: checksum mismatch",
                    block.start
                )));
            }
        }
        match scan(bytes, block.start, n, self.data_files.len(), self.version) {
            Ok((starts, end)) if end == block.end || block.crc.is_none() => {
                out.extend_from_slice(&starts);
                Ok(())
            }
            Ok(_) => Err(corrupt(format!("block {b}: entries do not fill it"))),
            Err((at, d)) => Err(corrupt(format!("offset {at}: {d}"))),
        }
    }

    /// The entry at a position `block_starts_into` gave.
    pub fn entry_at(&self, at: u32) -> Option<EntryRef<'_>> {
        self.decode(at as usize)
    }

    /// Gives back the resident memory of the blocks before `b`, which a walk is past.
    pub fn release_before(&self, b: usize) {
        if let Some(block) = self.blocks.get(b) {
            let from = self.blocks.first().map_or(0, |f| f.start);
            self.map.release(from..block.start);
        }
    }

    /// Entry `i` (in key order); `None` past the end.
    /// (A walk through them all: [`Walk`].)
    pub fn entry(&self, i: usize) -> Result<Option<EntryRef<'_>>, StorageError> {
        if i >= self.count {
            return Ok(None);
        }
        let starts = self.block(i / BLOCK)?;
        let at = starts.get(i % BLOCK).copied().unwrap_or(u32::MAX) as usize;
        // Bounds and UTF-8 were checked when the block was decoded.
        Ok(self.decode(at))
    }

    pub fn entries(&self) -> impl Iterator<Item = Result<EntryRef<'_>, StorageError>> + '_ {
        (0..self.len()).filter_map(move |i| self.entry(i).transpose())
    }

    fn first_key(&self, b: usize) -> &[u8] {
        let (s, e) = self.blocks[b].first;
        &self.map[s..e]
    }

    /// The live entry for these values (live copies sort before masked ones). Checks and
    /// decodes at most two blocks.
    pub fn lookup(&self, values: &str) -> Result<Option<EntryRef<'_>>, StorageError> {
        let v = values.as_bytes();
        // The last block whose first key is below `values`: equal keys may start the next one.
        let (mut lo, mut hi) = (0, self.blocks.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.first_key(mid) < v {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        let b = lo.saturating_sub(1);
        for b in b..(b + 2).min(self.blocks.len()) {
            let starts = self.block(b)?;
            let idx = starts.partition_point(|&at| {
                self.decode(at as usize)
                    .is_some_and(|e| e.values.as_bytes() < v)
            });
            if let Some(&at) = starts.get(idx) {
                return Ok(self
                    .decode(at as usize)
                    .filter(|e| e.values == values && !e.masked));
            }
        }
        Ok(None)
    }
}

/// A new index file with these bytes, synced: it must not exist yet.
fn write_new(fs: &dyn FileSystem, path: &Path, buf: &[u8]) -> Result<(), StorageError> {
    let f = fs
        .open(path, OpenMode::CreateNew)
        .map_err(StorageError::io("create", path))?;
    f.append(buf).map_err(StorageError::io("write", path))?;
    f.sync_data().map_err(StorageError::io("sync", path))?;
    Ok(())
}

/// Where a walk through an index's entries is, in key order: it keeps one block of entry
/// positions and gives back the mapped pages behind it, so walking an index of millions of
/// entries costs a few megabytes. Holds no borrow, so it can sit beside the file it walks.
#[derive(Default)]
pub struct Walk {
    /// The next block to read.
    block: usize,
    starts: Vec<u32>,
    /// The next entry of `starts`.
    at: usize,
}

/// Blocks walked between two releases of the mapped bytes behind (about 3 MB).
const RELEASE_EVERY: usize = 64;

impl Walk {
    /// The next entry of `file` (always the same file); after an error, the walk ends.
    pub fn next<'a>(&mut self, file: &'a IndexFile) -> Option<Result<EntryRef<'a>, StorageError>> {
        while self.at >= self.starts.len() {
            if self.block >= file.block_count() {
                return None;
            }
            if self.block > 0 && self.block.is_multiple_of(RELEASE_EVERY) {
                file.release_before(self.block);
            }
            if let Err(err) = file.block_starts_into(self.block, &mut self.starts) {
                // The rest of this index cannot be trusted.
                self.block = usize::MAX;
                self.starts.clear();
                return Some(Err(err));
            }
            self.block += 1;
            self.at = 0;
        }
        let at = self.starts[self.at];
        self.at += 1;
        match file.entry_at(at) {
            Some(e) => Some(Ok(e)),
            None => {
                self.block = usize::MAX;
                self.starts.clear();
                Some(Err(StorageError::Corrupt {
                    path: file.path().to_path_buf(),
                    offset: u64::from(at),
                    detail: "an entry does not decode".into(),
                }))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fs::OsFs;

    fn e(v: &str, o: u64) -> IndexEntry {
        IndexEntry {
            values: v.into(),
            file: 0,
            offset: o,
            length: 10,
            masked: false,
            checksum: Some(o as u32 ^ 0xdead_beef),
            extract: None,
        }
    }

    fn write(p: &Path, entries: Vec<IndexEntry>) {
        IndexFile::write(
            &OsFs,
            p,
            "{type=fc}",
            &["step".into()],
            &["a.data".into()],
            entries,
            None,
        )
        .unwrap();
    }

    #[test]
    fn extraction_information_rides_in_version_4_entries_only_when_present() {
        let d = tempfile::tempdir().unwrap();
        let plain = d.path().join("plain.idx");
        write(
            &plain,
            (0..3000).map(|i| e(&format!("{i:05}"), i)).collect(),
        );
        let i = IndexFile::read(&OsFs, &plain).unwrap();
        assert_eq!(i.version, 3, "no entry carries extraction information");
        assert!(i.entries().all(|e| e.unwrap().extract.is_none()));

        let with = d.path().join("with.idx");
        let info = |n: u64| -> Option<std::sync::Arc<[u8]>> {
            // Some entries carry none; sizes vary across block boundaries.
            (!n.is_multiple_of(3)).then(|| (0..(n % 700) as u8).collect::<Vec<u8>>().into())
        };
        let entries: Vec<IndexEntry> = (0..3000)
            .map(|n| IndexEntry {
                extract: info(n),
                ..e(&format!("{n:05}"), n)
            })
            .collect();
        write(&with, entries.clone());
        let i = IndexFile::read(&OsFs, &with).unwrap();
        assert_eq!(i.version, 4);
        for (got, want) in i.entries().zip(&entries) {
            let got = got.unwrap();
            assert_eq!(got.extract, want.extract.as_deref(), "{}", want.values);
            assert_eq!((got.offset, got.checksum), (want.offset, want.checksum));
        }
        let hit = i.lookup("02999").unwrap().unwrap();
        assert_eq!(hit.extract, info(2999).as_deref());

        // A damaged length is an error naming the block, never a read past the entry.
        let mut bytes = std::fs::read(&with).unwrap();
        let at = bytes.windows(5).position(|w| w == b"00001").unwrap();
        // key length u16 precedes the key; the fixed part (25 bytes) follows it.
        let len_at = at + 5 + 25;
        bytes[len_at..len_at + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        let bad = d.path().join("bad.idx");
        std::fs::write(&bad, &bytes).unwrap();
        let refused = IndexFile::read(&OsFs, &bad)
            .map(|i| i.entries().any(|e| e.is_err()))
            .unwrap_or(true);
        assert!(refused, "a damaged extraction length must be refused");
    }

    #[test]
    fn write_read_lookup_and_corruption() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("i.idx");
        write(&p, vec![e("6", 0), e("0", 10), e("6", 20)]);
        let i = IndexFile::read(&OsFs, &p).unwrap();
        assert_eq!(i.len(), 2);
        assert_eq!(i.lookup("6").unwrap().unwrap().offset, 20);
        assert!(i.lookup("12").unwrap().is_none());
        assert!(i.lookup("").unwrap().is_none());
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[20] ^= 0xff;
        std::fs::write(&p, &bytes).unwrap();
        let err = IndexFile::read(&OsFs, &p).err().unwrap().to_string();
        assert!(
            err.contains("i.idx is corrupt") && err.contains("checksum"),
            "{err}"
        );
    }

    fn key(n: usize) -> String {
        format!("{n:06}")
    }

    #[test]
    fn lookups_across_many_blocks_touch_only_the_blocks_they_need() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("big.idx");
        let n = 3 * BLOCK + 17;
        write(&p, (0..n).map(|k| e(&key(k * 2), k as u64)).collect());
        let i = IndexFile::read(&OsFs, &p).unwrap();
        assert_eq!(i.len(), n);
        assert_eq!(i.blocks.len(), 4);
        assert!(i.blocks.iter().all(|b| b.starts.get().is_none()));
        assert_eq!(i.lookup(&key(2 * 2000)).unwrap().unwrap().offset, 2000);
        let decoded = i.blocks.iter().filter(|b| b.starts.get().is_some()).count();
        assert!(decoded <= 2, "{decoded} blocks decoded for one lookup");
        for k in 0..n {
            assert_eq!(i.lookup(&key(k * 2)).unwrap().unwrap().offset, k as u64);
            assert!(i.lookup(&key(k * 2 + 1)).unwrap().is_none());
        }
        let all: Vec<_> = i.entries().map(|x| x.unwrap().offset).collect();
        assert_eq!(all, (0..n as u64).collect::<Vec<_>>());
    }

    #[test]
    fn masked_copies_at_a_block_boundary_do_not_hide_the_live_one() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("m.idx");
        // The live copy of "k" is the last entry of block 0, its masked copies open block 1.
        let mut entries: Vec<IndexEntry> = (0..BLOCK - 1).map(|k| e(&key(k), 1)).collect();
        entries.push(e("k", 7));
        for o in 0..3 {
            entries.push(IndexEntry {
                masked: true,
                ..e("k", 100 + o)
            });
        }
        entries.push(e("z", 9));
        write(&p, entries);
        let i = IndexFile::read(&OsFs, &p).unwrap();
        assert_eq!(i.lookup("k").unwrap().unwrap().offset, 7);
        assert_eq!(i.lookup("z").unwrap().unwrap().offset, 9);
        assert_eq!(
            i.entries().filter(|x| x.as_ref().unwrap().masked).count(),
            3
        );
    }

    #[test]
    fn a_damaged_block_is_named_and_the_others_still_answer() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("d.idx");
        let n = 2 * BLOCK;
        write(&p, (0..n).map(|k| e(&key(k), k as u64)).collect());
        let second = IndexFile::read(&OsFs, &p).unwrap().blocks[1].start;
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[second + 40] ^= 0x01;
        std::fs::write(&p, &bytes).unwrap();
        let i = IndexFile::read(&OsFs, &p).unwrap();
        assert_eq!(i.lookup(&key(5)).unwrap().unwrap().offset, 5);
        let err = i.lookup(&key(BLOCK + 5)).err().unwrap().to_string();
        assert!(
            err.contains("d.idx is corrupt") && err.contains("block 1"),
            "{err}"
        );
        assert!(i.entries().any(|x| x.is_err()));
    }

    /// A version 1 file, as fieldstore wrote before blocks: one checksum over everything.
    fn write_v1(p: &Path, entries: &[IndexEntry]) {
        let header = serde_json::to_vec(&Header {
            index_key: "{type=fc}".into(),
            datum_keywords: vec!["step".into()],
            data_files: vec!["a.data".into()],
            count: entries.len() as u64,
            seen: None,
        })
        .unwrap();
        let mut buf = Vec::new();
        buf.extend_from_slice(MAGIC);
        buf.extend_from_slice(&1u32.to_le_bytes());
        buf.extend_from_slice(&(header.len() as u32).to_le_bytes());
        buf.extend_from_slice(&header);
        for x in entries {
            encode_entry(&mut buf, x.as_ref(), 1);
        }
        let crc = crate::checksum::crc32c(&buf);
        buf.extend_from_slice(&crc.to_le_bytes());
        std::fs::write(p, buf).unwrap();
    }

    #[test]
    fn version_1_files_are_still_read() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("v1.idx");
        let n = BLOCK + 3;
        let entries: Vec<IndexEntry> = (0..n).map(|k| e(&key(k), k as u64)).collect();
        write_v1(&p, &entries);
        let i = IndexFile::read(&OsFs, &p).unwrap();
        assert_eq!(i.len(), n);
        for k in [0, BLOCK - 1, BLOCK, n - 1] {
            assert_eq!(i.lookup(&key(k)).unwrap().unwrap().offset, k as u64);
        }
        assert_eq!(i.entries().count(), n);
        assert!(i.entries().all(|x| x.unwrap().checksum.is_none()));
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[40] ^= 0x01;
        std::fs::write(&p, &bytes).unwrap();
        assert!(IndexFile::read(&OsFs, &p).is_err());
    }

    #[test]
    fn checksums_are_kept_per_entry_and_absent_ones_stay_absent() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("c.idx");
        let n = BLOCK + 5;
        let mut entries: Vec<IndexEntry> = (0..n).map(|k| e(&key(k), k as u64)).collect();
        // A version 2 entry carried over by compaction has no checksum to keep.
        entries[7].checksum = None;
        entries[BLOCK + 1].masked = true;
        write(&p, entries);
        let i = IndexFile::read(&OsFs, &p).unwrap();
        let all: Vec<EntryRef> = i.entries().map(Result::unwrap).collect();
        assert_eq!(all.len(), n);
        for (k, x) in all.iter().enumerate() {
            let want = (k != 7).then_some(k as u32 ^ 0xdead_beef);
            assert_eq!(x.checksum, want, "entry {k}");
            assert_eq!(x.masked, k == BLOCK + 1, "entry {k}");
        }
        assert_eq!(
            i.lookup(&key(3)).unwrap().unwrap().checksum,
            Some(3 ^ 0xdead_beef)
        );
        assert_eq!(i.lookup(&key(7)).unwrap().unwrap().checksum, None);
    }

    #[test]
    fn version_2_files_are_still_read_without_checksums() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("v2.idx");
        let n = 2 * BLOCK + 3;
        let mut entries: Vec<IndexEntry> = (0..n).map(|k| e(&key(k), k as u64)).collect();
        entries[5].masked = true;
        let bytes = IndexFile::encode(
            "{type=fc}",
            &["step".into()],
            &["a.data".into()],
            entries,
            2,
            None,
        );
        assert_eq!(le(&bytes[4..8]), 2);
        std::fs::write(&p, bytes).unwrap();
        let i = IndexFile::read(&OsFs, &p).unwrap();
        assert_eq!(i.len(), n);
        for k in [0, 6, BLOCK, n - 1] {
            let x = i.lookup(&key(k)).unwrap().unwrap();
            assert_eq!((x.offset, x.checksum), (k as u64, None));
        }
        assert!(i.lookup(&key(5)).unwrap().is_none(), "masked in version 2");
        assert_eq!(
            i.entries().filter(|x| x.as_ref().unwrap().masked).count(),
            1
        );
    }

    proptest::proptest! {
        #[test]
        fn lookup_agrees_with_a_sorted_map(keys in proptest::collection::btree_set("[a-z]{1,4}", 0..3000usize), probe in "[a-z]{1,4}") {
            let d = tempfile::tempdir().unwrap();
            let p = d.path().join("p.idx");
            let entries: Vec<IndexEntry> = keys.iter().enumerate().map(|(o, k)| e(k, o as u64)).collect();
            write(&p, entries);
            let i = IndexFile::read(&OsFs, &p).unwrap();
            let want = keys.iter().position(|k| *k == probe).map(|o| o as u64);
            proptest::prop_assert_eq!(i.lookup(&probe).unwrap().map(|x| x.offset), want);
        }

        /// A conversion checks the bytes it wrote, not each entry decoded: this is what makes
        /// that enough (every field of every entry survives the encoding, across blocks).
        #[test]
        fn sorted_entries_read_back_as_written(
            fields in proptest::collection::btree_map(
                "[a-z0-9\\x{1f}\\x{e9}:.-]{0,12}",
                (0u32..3, proptest::num::u64::ANY, proptest::num::u64::ANY,
                 proptest::option::of(proptest::num::u32::ANY),
                 proptest::option::of(proptest::collection::vec(proptest::num::u8::ANY, 1..40))),
                0..(2 * BLOCK + 5),
            ),
        ) {
            let d = tempfile::tempdir().unwrap();
            let p = d.path().join("s.idx");
            let files: Vec<String> = vec!["a.data".into(), "b.data".into(), "c.data".into()];
            let entries: Vec<IndexEntry> = fields
                .into_iter()
                .map(|(values, (file, offset, length, checksum, extract))| IndexEntry {
                    values,
                    file,
                    offset,
                    length,
                    masked: false,
                    checksum,
                    extract: extract.map(std::sync::Arc::from),
                })
                .collect();
            let (_f, written) = IndexFile::write_sorted(
                &OsFs, &p, "{type=fc}", &["step".into(), "param".into()], &files, &entries, None,
            ).unwrap();
            proptest::prop_assert_eq!(std::fs::read(&p).unwrap(), written);
            let i = IndexFile::read(&OsFs, &p).unwrap();
            proptest::prop_assert_eq!(i.len(), entries.len());
            proptest::prop_assert_eq!(&i.data_files, &files);
            let back: Vec<IndexEntry> = i.entries().map(|x| x.unwrap().to_owned()).collect();
            proptest::prop_assert_eq!(back, entries);
        }
    }
}
