//! Index files: immutable, one per (writer, index key, flush); entries sorted by datum values so a
//! lookup is a binary search. Checksummed as a whole.

use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::storage::StorageError;

const MAGIC: &[u8; 4] = b"FSIX";
const VERSION: u32 = 1;
/// Separates datum values in an entry's key (a byte no MARS value contains).
pub(crate) const SEP: char = '\u{1f}';

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// The datum values in the order of `IndexFile::datum_keywords`, joined by `SEP`.
    pub values: String,
    pub file: u32,
    pub offset: u64,
    pub length: u64,
    /// Replaced by a newer copy (kept by compaction so `--full` still lists it).
    pub masked: bool,
}

#[derive(Debug, Serialize, Deserialize)]
struct Header {
    index_key: String,
    datum_keywords: Vec<String>,
    data_files: Vec<String>,
    count: u64,
}

/// A read index: the file is mapped, checked once, and entries are decoded on demand, so opening an
/// index costs 4 bytes of heap per entry however long its keys.
pub struct IndexFile {
    pub index_key: String,
    pub datum_keywords: Vec<String>,
    pub data_files: Vec<String>,
    map: memmap2::Mmap,
    /// Where each entry starts in `map`, in key order.
    starts: Vec<u32>,
}

/// One entry, borrowed from the mapped file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EntryRef<'a> {
    pub values: &'a str,
    pub file: u32,
    pub offset: u64,
    pub length: u64,
    pub masked: bool,
}

impl EntryRef<'_> {
    pub fn to_owned(self) -> IndexEntry {
        IndexEntry {
            values: self.values.to_string(),
            file: self.file,
            offset: self.offset,
            length: self.length,
            masked: self.masked,
        }
    }
}

/// Fixed part of an entry after its key: file (u32), offset (u64), length (u64), flags (u8).
const FIXED: usize = 21;

fn le(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
}

impl IndexFile {
    /// Writes and syncs the file. Later entries with the same values replace earlier ones.
    pub fn write(
        path: &Path,
        index_key: &str,
        datum_keywords: &[String],
        data_files: &[String],
        mut entries: Vec<IndexEntry>,
    ) -> Result<(), StorageError> {
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
        let header = serde_json::to_vec(&Header {
            index_key: index_key.to_string(),
            datum_keywords: datum_keywords.to_vec(),
            data_files: data_files.to_vec(),
            count: dedup.len() as u64,
        })
        .unwrap_or_default();
        let mut buf = Vec::with_capacity(64 + header.len() + dedup.len() * 48);
        buf.extend_from_slice(MAGIC);
        buf.extend_from_slice(&VERSION.to_le_bytes());
        buf.extend_from_slice(&(header.len() as u32).to_le_bytes());
        buf.extend_from_slice(&header);
        for e in &dedup {
            buf.extend_from_slice(&(e.values.len() as u16).to_le_bytes());
            buf.extend_from_slice(e.values.as_bytes());
            buf.extend_from_slice(&e.file.to_le_bytes());
            buf.extend_from_slice(&e.offset.to_le_bytes());
            buf.extend_from_slice(&e.length.to_le_bytes());
            buf.push(u8::from(e.masked));
        }
        let crc = crc32c::crc32c(&buf);
        buf.extend_from_slice(&crc.to_le_bytes());
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(StorageError::io("create", path))?;
        f.write_all(&buf).map_err(StorageError::io("write", path))?;
        f.sync_all().map_err(StorageError::io("sync", path))?;
        Ok(())
    }

    pub fn read(path: &Path) -> Result<IndexFile, StorageError> {
        let f = std::fs::File::open(path).map_err(StorageError::io("open", path))?;
        // SAFETY: index files are immutable once their journal record exists: nobody truncates
        // or rewrites them (purge and wipe unlink, which leaves this mapping intact).
        let map = unsafe { memmap2::Mmap::map(&f) }.map_err(StorageError::io("map", path))?;
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
        let (body, tail) = buf.split_at(buf.len() - 4);
        if crc32c::crc32c(body) != u32::from_le_bytes([tail[0], tail[1], tail[2], tail[3]]) {
            return Err(corrupt(buf.len() - 4, "checksum mismatch"));
        }
        let version = u32::from_le_bytes([body[4], body[5], body[6], body[7]]);
        if version != VERSION {
            return Err(StorageError::UnsupportedVersion {
                path: path.to_path_buf(),
                found: version,
                supported: VERSION,
            });
        }
        let hlen = u32::from_le_bytes([body[8], body[9], body[10], body[11]]) as usize;
        let hbytes = body
            .get(12..12 + hlen)
            .ok_or_else(|| corrupt(12, "header past the end"))?;
        let header: Header =
            serde_json::from_slice(hbytes).map_err(|e| corrupt(12, &format!("bad header: {e}")))?;
        let mut pos = 12 + hlen;
        let count = usize::try_from(header.count).unwrap_or(usize::MAX);
        // Every entry takes at least FIXED + 2 bytes: a count claiming more is corrupt, and
        // refusing it first keeps a damaged header from reserving gigabytes.
        if count > body.len() / (FIXED + 2) {
            return Err(corrupt(12, "entry count larger than the file"));
        }
        let mut starts = Vec::with_capacity(count);
        let mut previous: Option<&[u8]> = None;
        for _ in 0..count {
            let at = pos;
            let len = body
                .get(pos..pos + 2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
                .ok_or_else(|| corrupt(at, "truncated entry"))?;
            let rec = body
                .get(pos + 2..pos + 2 + len + FIXED)
                .ok_or_else(|| corrupt(at, "truncated entry"))?;
            let values = &rec[..len];
            std::str::from_utf8(values).map_err(|_| corrupt(at, "entry key is not UTF-8"))?;
            if le(&rec[len..len + 4]) as usize >= header.data_files.len() {
                return Err(corrupt(
                    at,
                    "entry names a data file the index does not list",
                ));
            }
            if previous.is_some_and(|p| p > values) {
                return Err(corrupt(at, "entries out of order"));
            }
            previous = Some(values);
            starts.push(at as u32);
            pos += 2 + len + FIXED;
        }
        Ok(IndexFile {
            index_key: header.index_key,
            datum_keywords: header.datum_keywords,
            data_files: header.data_files,
            map,
            starts,
        })
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Entry `i` (in key order). Bounds and UTF-8 were checked when the file was read.
    pub fn entry(&self, i: usize) -> Option<EntryRef<'_>> {
        let at = *self.starts.get(i)? as usize;
        let b: &[u8] = &self.map;
        let len = usize::from(u16::from_le_bytes([*b.get(at)?, *b.get(at + 1)?]));
        let rec = b.get(at + 2..at + 2 + len + FIXED)?;
        Some(EntryRef {
            values: std::str::from_utf8(&rec[..len]).ok()?,
            file: le(&rec[len..len + 4]) as u32,
            offset: le(&rec[len + 4..len + 12]),
            length: le(&rec[len + 12..len + 20]),
            masked: rec[len + 20] != 0,
        })
    }

    pub fn entries(&self) -> impl Iterator<Item = EntryRef<'_>> + '_ {
        (0..self.len()).filter_map(move |i| self.entry(i))
    }

    /// The live entry for these values (live copies sort before masked ones).
    pub fn lookup(&self, values: &str) -> Option<EntryRef<'_>> {
        let (mut lo, mut hi) = (0, self.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.entry(mid)?.values < values {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        self.entry(lo).filter(|e| e.values == values && !e.masked)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn write_read_lookup_and_corruption() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("i.idx");
        let e = |v: &str, o: u64| IndexEntry {
            values: v.into(),
            file: 0,
            offset: o,
            length: 10,
            masked: false,
        };
        IndexFile::write(
            &p,
            "{type=fc}",
            &["step".into()],
            &["a.data".into()],
            vec![e("6", 0), e("0", 10), e("6", 20)],
        )
        .unwrap();
        let i = IndexFile::read(&p).unwrap();
        assert_eq!(i.len(), 2);
        assert_eq!(i.lookup("6").unwrap().offset, 20);
        assert!(i.lookup("12").is_none());
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[20] ^= 0xff;
        std::fs::write(&p, &bytes).unwrap();
        let err = IndexFile::read(&p).err().unwrap().to_string();
        assert!(
            err.contains("i.idx is corrupt") && err.contains("checksum"),
            "{err}"
        );
    }
}
