//! Side files of extraction information beside data files, as GribJump keeps `<datafile>.gribjump`
//! beside FDB5's: FDB5's index records have no room for it, and fields stored before fieldstore
//! kept it in its catalogues have none there. `<datafile>.extract` holds, per field of the data
//! file, its place (offset, length), a CRC-32C of its first bytes and its encoded
//! `ExtractInfo`. FDB5's programs never open it.
//!
//! The file is only appended to, one whole record per field, each framed by a magic and a
//! CRC-32C: a reader takes the records whose frame checks and skips anything else (a record torn
//! by a crash, zeros a filesystem left after one) by searching for the next magic, so a torn
//! record loses that one field's information, never the records after it. Records are appended
//! only after the field's bytes are durable, and a reader trusts one only for the field the
//! catalogue names at that offset with that length, after checking the first bytes the record
//! summarises (`HEAD`) against the data file: a side file never answers for bytes that are not
//! there, and a stale one (the data file replaced) is ignored, the field then decoded whole.
//! Several appenders may share a file (the archiving writer, `extract-index`): the later record
//! of an offset wins, and both are right.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::fs::{FileSystem, FsFile, OpenMode};
use super::StorageError;

/// A side file's name is its data file's with this appended.
pub const SUFFIX: &str = ".extract";

/// Each record starts with this; a reader resynchronises on it after damage.
const MAGIC: &[u8; 4] = b"FSX1";

/// Bytes of a field's start a record's `head_crc` covers: GRIB's sections 0 and 1 and more
/// (reference time, parameter, step), which differ between fields a replaced file could hold
/// at the same place.
pub const HEAD: u64 = 256;

/// Frame (magic, payload length, payload CRC) and fixed payload (offset, length, head CRC).
const FRAME: usize = 4 + 4 + 4;
const FIXED: usize = 8 + 8 + 4;

/// Information larger than this is not extraction information (a 6.48 M-point CCSDS field's
/// is under 10 KiB): a length beyond it is damage, not a record.
const MAX_INFO: usize = 16 << 20;

/// One field's entry of a side file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SideEntry {
    pub offset: u64,
    pub length: u64,
    /// CRC-32C of the field's first `min(HEAD, length)` bytes.
    pub head_crc: u32,
    /// The encoded `ExtractInfo`.
    pub info: Arc<[u8]>,
}

/// The side file of a data file.
pub fn path_of(data: &Path) -> PathBuf {
    let mut p = data.as_os_str().to_owned();
    p.push(SUFFIX);
    PathBuf::from(p)
}

/// Whether an object of a directory-kept database may have a side file: a data file inside the
/// database's directory (adopted files and files elsewhere belong to others).
pub fn has_side(object: &str) -> bool {
    !object.is_empty() && !object.contains('/') && !object.contains('#')
}

/// The CRC-32C `head_crc` holds, from a field's first bytes (`min(HEAD, length)` of them).
pub fn head_crc(head: &[u8]) -> u32 {
    crate::checksum::crc32c(head)
}

/// One record's bytes.
pub fn encode(e: &SideEntry) -> Vec<u8> {
    let mut payload = Vec::with_capacity(FIXED + e.info.len());
    payload.extend_from_slice(&e.offset.to_le_bytes());
    payload.extend_from_slice(&e.length.to_le_bytes());
    payload.extend_from_slice(&e.head_crc.to_le_bytes());
    payload.extend_from_slice(&e.info);
    let mut out = Vec::with_capacity(FRAME + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crate::checksum::crc32c(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    out
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// The record at `at`, if a whole, intact one starts there; with where the next one starts.
fn record_at(b: &[u8], at: usize) -> Option<(SideEntry, usize)> {
    if b.get(at..at + 4)? != MAGIC {
        return None;
    }
    let len = u32_at(b, at + 4)? as usize;
    if !(FIXED..=FIXED + MAX_INFO).contains(&len) {
        return None;
    }
    let crc = u32_at(b, at + 8)?;
    let payload = b.get(at + FRAME..(at + FRAME).checked_add(len)?)?;
    if crate::checksum::crc32c(payload) != crc {
        return None;
    }
    let entry = SideEntry {
        offset: u64_at(payload, 0)?,
        length: u64_at(payload, 8)?,
        head_crc: u32_at(payload, 16)?,
        info: Arc::from(payload.get(FIXED..)?),
    };
    Some((entry, at + FRAME + len))
}

/// Every intact record of a side file's bytes, in file order; damaged stretches are skipped.
pub fn decode(b: &[u8]) -> Vec<SideEntry> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < b.len() {
        match record_at(b, at) {
            Some((e, next)) => {
                out.push(e);
                at = next;
            }
            None => {
                // Resynchronise on the next magic after this byte.
                let rest = b.get(at + 1..).unwrap_or_default();
                match rest.windows(MAGIC.len()).position(|w| w == MAGIC) {
                    Some(i) => at += 1 + i,
                    None => break,
                }
            }
        }
    }
    out
}

/// A side file's entries by offset (the last record of an offset wins); empty when there is
/// no side file.
pub fn read(fs: &dyn FileSystem, data: &Path) -> Result<HashMap<u64, SideEntry>, StorageError> {
    let path = path_of(data);
    let bytes = match fs.read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(HashMap::new()),
        Err(e) => return Err(StorageError::io("read", &path)(e)),
    };
    Ok(decode(&bytes).into_iter().map(|e| (e.offset, e)).collect())
}

/// Appends records to a data file's side file (created if missing), in one write, synced: the
/// caller has made the fields' bytes durable first.
pub fn append(fs: &dyn FileSystem, data: &Path, entries: &[SideEntry]) -> Result<(), StorageError> {
    if entries.is_empty() {
        return Ok(());
    }
    let path = path_of(data);
    let mut bytes = Vec::new();
    for e in entries {
        bytes.extend_from_slice(&encode(e));
    }
    let existed = fs.exists(&path);
    let f = fs
        .open(&path, OpenMode::Append)
        .map_err(StorageError::io("open", &path))?;
    f.append(&bytes)
        .and_then(|()| f.sync_data())
        .map_err(StorageError::io("write", &path))?;
    if !existed {
        if let Some(dir) = path.parent() {
            fs.sync_dir(dir)
                .map_err(StorageError::io("sync directory", dir))?;
        }
    }
    Ok(())
}

/// Reads the first `min(HEAD, length)` bytes of a field from its open data file (`data` names
/// it in errors), for `head_crc`.
pub fn read_head(
    file: &dyn FsFile,
    data: &Path,
    offset: u64,
    length: u64,
) -> Result<Vec<u8>, StorageError> {
    let mut buf = vec![0u8; length.min(HEAD) as usize];
    let n =
        super::fs::read_full_at(file, &mut buf, offset).map_err(StorageError::io("read", data))?;
    if n < buf.len() {
        return Err(StorageError::Corrupt {
            path: data.to_path_buf(),
            offset: offset + n as u64,
            detail: format!("a field of {length} bytes at offset {offset} ends early"),
        });
    }
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(offset: u64, info: &[u8]) -> SideEntry {
        SideEntry {
            offset,
            length: 100 + offset,
            head_crc: 7,
            info: Arc::from(info),
        }
    }

    #[test]
    fn records_round_trip_in_order() {
        let es = [entry(0, b"abc"), entry(500, b""), entry(9, &[0u8; 300])];
        let bytes: Vec<u8> = es.iter().flat_map(encode).collect();
        assert_eq!(decode(&bytes), es);
    }

    /// A record torn by a crash, or zeros left after one, costs that record only: the records
    /// after it are found again by their magic.
    #[test]
    fn damage_loses_only_the_damaged_record() {
        let (a, b, c) = (entry(0, b"one"), entry(1, b"two"), entry(2, b"three"));
        let mut bytes = encode(&a);
        let torn = encode(&b);
        bytes.extend_from_slice(&torn[..torn.len() - 2]);
        bytes.extend_from_slice(&[0u8; 37]);
        bytes.extend_from_slice(&encode(&c));
        assert_eq!(decode(&bytes), vec![a.clone(), c.clone()]);
        // A flipped bit in a payload: that record is refused, its neighbours kept.
        let mut bytes: Vec<u8> = [&a, &b, &c].iter().flat_map(|e| encode(e)).collect();
        let at = encode(&a).len() + FRAME + 3;
        bytes[at] ^= 1;
        assert_eq!(decode(&bytes), vec![a, c]);
        // Nothing but damage: nothing.
        assert!(decode(&[0u8; 64]).is_empty());
        assert!(decode(b"FSX1\xff\xff\xff\xff").is_empty());
    }

    #[test]
    fn append_then_read_and_the_later_record_of_an_offset_wins() {
        let d = tempfile::tempdir().unwrap();
        let fs = crate::storage::fs::os();
        let data = d.path().join("x.data");
        assert!(
            read(&*fs, &data).unwrap().is_empty(),
            "no side file, nothing"
        );
        append(&*fs, &data, &[entry(0, b"old"), entry(5, b"five")]).unwrap();
        append(&*fs, &data, &[entry(0, b"new")]).unwrap();
        let got = read(&*fs, &data).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(&*got[&0].info, b"new");
        assert_eq!(&*got[&5].info, b"five");
        assert!(path_of(&data).ends_with("x.data.extract"));
    }

    #[test]
    fn only_files_inside_the_database_have_side_files() {
        assert!(has_side("fc:sfc.20261127.host.1.data"));
        assert!(!has_side("/elsewhere/a.grib"));
        assert!(!has_side("/a.grib#adopted:10:20"));
        assert!(!has_side(""));
    }
}
