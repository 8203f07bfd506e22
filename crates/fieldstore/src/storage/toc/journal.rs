//! The `toc` journal: checksummed records appended with one `write()` each flush.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::storage::StorageError;

pub const FORMAT_VERSION: u32 = 1;
const MAGIC: &[u8; 4] = b"FSTC";
const HEADER: usize = 16;

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Record {
    /// First record: which database this is and who owns it.
    Init {
        db_key: String,
        uid: u32,
        created: u64,
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

/// Encodes records into one buffer, to be appended with a single write.
pub fn encode(records: &[Record]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        let payload = serde_json::to_vec(r).unwrap_or_default();
        let mut crc = crate::checksum::crc32c(&[r.kind()]);
        crc = crate::checksum::crc32c_append(crc, &(payload.len() as u32).to_le_bytes());
        crc = crate::checksum::crc32c_append(crc, &payload);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&(FORMAT_VERSION as u16).to_le_bytes());
        out.push(r.kind());
        out.push(0);
        out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&payload);
    }
    out
}

enum Parsed {
    Ok(Record, usize),
    Bad(String),
    Version(u32),
}

fn parse_at(buf: &[u8]) -> Parsed {
    if buf.len() < HEADER {
        return Parsed::Bad("short record header".into());
    }
    if &buf[..4] != MAGIC {
        return Parsed::Bad("bad record magic".into());
    }
    let version = u16::from_le_bytes([buf[4], buf[5]]) as u32;
    let kind = buf[6];
    let len = u32::from_le_bytes([buf[8], buf[9], buf[10], buf[11]]) as usize;
    let crc = u32::from_le_bytes([buf[12], buf[13], buf[14], buf[15]]);
    let Some(payload) = buf.get(HEADER..HEADER + len) else {
        return Parsed::Bad("record extends past the end of the file".into());
    };
    let mut c = crate::checksum::crc32c(&[kind]);
    c = crate::checksum::crc32c_append(c, &(len as u32).to_le_bytes());
    c = crate::checksum::crc32c_append(c, payload);
    if c != crc {
        return Parsed::Bad("checksum mismatch".into());
    }
    if version != FORMAT_VERSION {
        return Parsed::Version(version);
    }
    match serde_json::from_slice::<Record>(payload) {
        Ok(r) if r.kind() == kind => Parsed::Ok(r, HEADER + len),
        Ok(_) => Parsed::Bad("record kind does not match its payload".into()),
        Err(e) => Parsed::Bad(format!("undecodable record: {e}")),
    }
}

/// Reads every complete record from `start`. A damaged record followed by nothing valid is a
/// torn tail (a crash mid-flush, or a flush in progress) and is ignored; damage followed by valid
/// records is corruption and an error naming the offset.
pub fn read_from(path: &Path, start: u64) -> Result<(Vec<Record>, u64), StorageError> {
    let mut f = File::open(path).map_err(StorageError::io("open", path))?;
    let mut buf = Vec::new();
    f.read_to_end(&mut buf)
        .map_err(StorageError::io("read", path))?;
    let mut pos = start as usize;
    let mut out = Vec::new();
    while pos < buf.len() {
        match parse_at(&buf[pos..]) {
            Parsed::Ok(r, n) => {
                out.push(r);
                pos += n;
            }
            Parsed::Version(v) => {
                return Err(StorageError::UnsupportedVersion {
                    path: path.to_path_buf(),
                    found: v,
                    supported: FORMAT_VERSION,
                })
            }
            Parsed::Bad(detail) => {
                let later_valid = (pos + 1..buf.len().saturating_sub(HEADER - 1))
                    .filter(|&i| buf[i..].starts_with(MAGIC))
                    .any(|i| matches!(parse_at(&buf[i..]), Parsed::Ok(..)));
                if later_valid {
                    return Err(StorageError::Corrupt {
                        path: path.to_path_buf(),
                        offset: pos as u64,
                        detail,
                    });
                }
                tracing::warn!(path = %path.display(), offset = pos, "ignoring torn record at the end of the journal ({detail})");
                break;
            }
        }
    }
    Ok((out, pos as u64))
}

/// The database key from the journal's first record, reading only that record: listing the
/// databases of a root must not read every journal whole.
pub fn read_db_key(path: &Path) -> Result<crate::model::Key, StorageError> {
    let mut f = File::open(path).map_err(StorageError::io("open", path))?;
    let mut head = [0u8; HEADER];
    f.read_exact(&mut head)
        .map_err(StorageError::io("read", path))?;
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
    f.read_exact(&mut buf[HEADER..])
        .map_err(StorageError::io("read", path))?;
    match parse_at(&buf) {
        Parsed::Ok(Record::Init { db_key, .. }, _) => {
            crate::model::Key::parse(&db_key).map_err(|e| corrupt(e.to_string()))
        }
        Parsed::Ok(..) => Err(corrupt(
            "the journal does not start with an Init record".into(),
        )),
        Parsed::Version(v) => Err(StorageError::UnsupportedVersion {
            path: path.to_path_buf(),
            found: v,
            supported: FORMAT_VERSION,
        }),
        Parsed::Bad(detail) => Err(corrupt(detail)),
    }
}

/// Appends records in one `write()` on an `O_APPEND` descriptor, then makes them durable.
pub fn append(path: &Path, records: &[Record]) -> Result<(), StorageError> {
    let buf = encode(records);
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o644)
        .open(path)
        .map_err(StorageError::io("open", path))?;
    f.write_all(&buf)
        .map_err(StorageError::io("append to", path))?;
    f.sync_data().map_err(StorageError::io("sync", path))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

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

    #[test]
    fn round_trip_and_torn_tail() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("toc");
        append(
            &p,
            &[Record::Init {
                db_key: "{a=1}".into(),
                uid: 0,
                created: 1,
            }],
        )
        .unwrap();
        append(&p, &[idx(1), idx(2)]).unwrap();
        let (rs, end) = read_from(&p, 0).unwrap();
        assert_eq!(rs.len(), 3);
        assert_eq!(end, std::fs::metadata(&p).unwrap().len());
        // A torn record at the tail is ignored.
        let whole = encode(&[idx(3)]);
        let mut f = OpenOptions::new().append(true).open(&p).unwrap();
        f.write_all(&whole[..whole.len() - 5]).unwrap();
        let (rs, _) = read_from(&p, 0).unwrap();
        assert_eq!(rs.len(), 3);
        // Damage followed by a valid record is corruption, named with its offset.
        f.write_all(&encode(&[idx(4)])).unwrap();
        let e = read_from(&p, 0).unwrap_err().to_string();
        assert!(e.contains("is corrupt at offset"), "{e}");
    }
}
