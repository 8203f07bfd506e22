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

#[derive(Debug)]
pub struct IndexFile {
    pub index_key: String,
    pub datum_keywords: Vec<String>,
    pub data_files: Vec<String>,
    pub entries: Vec<IndexEntry>,
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
        let buf = std::fs::read(path).map_err(StorageError::io("read", path))?;
        let corrupt = |offset: usize, detail: &str| StorageError::Corrupt {
            path: path.to_path_buf(),
            offset: offset as u64,
            detail: detail.to_string(),
        };
        if buf.len() < 16 || &buf[..4] != MAGIC {
            return Err(corrupt(0, "not a fieldstore index file"));
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
        let mut entries = Vec::with_capacity(header.count as usize);
        for _ in 0..header.count {
            let at = pos;
            let len = body
                .get(pos..pos + 2)
                .map(|b| u16::from_le_bytes([b[0], b[1]]) as usize)
                .ok_or_else(|| corrupt(at, "truncated entry"))?;
            pos += 2;
            let rec = body
                .get(pos..pos + len + 21)
                .ok_or_else(|| corrupt(at, "truncated entry"))?;
            let values = std::str::from_utf8(&rec[..len])
                .map_err(|_| corrupt(at, "entry key is not UTF-8"))?
                .to_string();
            let n = |i: usize, w: usize| {
                rec[len + i..len + i + w]
                    .iter()
                    .rev()
                    .fold(0u64, |acc, b| (acc << 8) | u64::from(*b))
            };
            let file = n(0, 4) as u32;
            if file as usize >= header.data_files.len() {
                return Err(corrupt(
                    at,
                    "entry names a data file the index does not list",
                ));
            }
            entries.push(IndexEntry {
                values,
                file,
                offset: n(4, 8),
                length: n(12, 8),
                masked: rec[len + 20] != 0,
            });
            pos += len + 21;
        }
        Ok(IndexFile {
            index_key: header.index_key,
            datum_keywords: header.datum_keywords,
            data_files: header.data_files,
            entries,
        })
    }

    /// The live entry for these values (live copies sort before masked ones).
    pub fn lookup(&self, values: &str) -> Option<&IndexEntry> {
        let i = self.entries.partition_point(|e| e.values.as_str() < values);
        self.entries
            .get(i)
            .filter(|e| e.values == values && !e.masked)
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
        assert_eq!(i.entries.len(), 2);
        assert_eq!(i.lookup("6").unwrap().offset, 20);
        assert!(i.lookup("12").is_none());
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[20] ^= 0xff;
        std::fs::write(&p, &bytes).unwrap();
        let err = IndexFile::read(&p).unwrap_err().to_string();
        assert!(
            err.contains("i.idx is corrupt") && err.contains("checksum"),
            "{err}"
        );
    }
}
