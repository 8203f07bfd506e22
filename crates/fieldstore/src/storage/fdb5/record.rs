//! FDB5's toc records: a 112-byte native (little-endian) header, then an eckit Stream payload,
//! the whole rounded up to a multiple of 1024 bytes. Versions 1 and 2 (FDB5 up to 5.15) and 3
//! (5.16 on) differ only in how an index record describes its index.

use super::stream::{DecodeError, Decoded, StreamReader, StreamWriter};
use crate::model::Key;

pub(crate) const HEADER: usize = 112;
/// FDB5's `fdbRoundTocRecords` default: every record is a whole number of these.
pub(crate) const ROUND: usize = 1024;
/// FDB5 refuses payloads above this.
pub(crate) const MAX_PAYLOAD: usize = 1024 * 1024;

pub(crate) const TAG_INIT: u8 = b't';
pub(crate) const TAG_INDEX: u8 = b'i';
pub(crate) const TAG_CLEAR: u8 = b'c';
pub(crate) const TAG_SUB_TOC: u8 = b's';

/// What this crate writes as the record's FDB version: 5.25.0, the newest format it follows.
pub(crate) const FDB_VERSION: u32 = 52500;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Header {
    pub tag: u8,
    pub version: u32,
    pub fdb_version: u32,
    pub sec: i64,
    pub usec: i64,
    pub pid: i32,
    pub uid: u32,
    pub host: String,
    pub size: u64,
}

impl Header {
    /// Decodes a header from exactly [`HEADER`] bytes.
    pub fn decode(b: &[u8]) -> Option<Header> {
        let b: &[u8; HEADER] = b.get(..HEADER)?.try_into().ok()?;
        let u32_at = |o: usize| u32::from_le_bytes([b[o], b[o + 1], b[o + 2], b[o + 3]]);
        let i64_at = |o: usize| {
            let mut w = [0u8; 8];
            w.copy_from_slice(&b[o..o + 8]);
            i64::from_le_bytes(w)
        };
        let host = &b[40..104];
        let host_end = host.iter().position(|&c| c == 0).unwrap_or(host.len());
        Some(Header {
            tag: b[0],
            version: u32_at(4),
            fdb_version: u32_at(8),
            sec: i64_at(16),
            usec: i64_at(24),
            pid: u32_at(32) as i32,
            uid: u32_at(36),
            host: String::from_utf8_lossy(&host[..host_end]).into_owned(),
            size: i64_at(104) as u64,
        })
    }

    pub fn tag_name(&self) -> &'static str {
        match self.tag {
            TAG_INIT => "TOC_INIT",
            TAG_INDEX => "TOC_INDEX",
            TAG_CLEAR => "TOC_CLEAR",
            TAG_SUB_TOC => "TOC_SUB_TOC",
            _ => "unknown",
        }
    }
}

/// A key as FDB5 records it: the values (sorted by keyword) and the keywords in schema order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordKey {
    pub values: Vec<(String, String)>,
    pub order: Vec<String>,
}

impl RecordKey {
    pub fn from_key(key: &Key) -> RecordKey {
        let mut values: Vec<(String, String)> = key
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        values.sort();
        RecordKey {
            values,
            order: key.keywords().map(str::to_string).collect(),
        }
    }

    /// The key in schema order (keywords only in the value map come last, sorted).
    pub fn to_key(&self) -> Key {
        let value = |k: &str| {
            self.values
                .iter()
                .find(|(kw, _)| kw == k)
                .map_or("", |(_, v)| v.as_str())
        };
        let mut pairs: Vec<(&str, &str)> =
            self.order.iter().map(|k| (k.as_str(), value(k))).collect();
        for (k, v) in &self.values {
            if !self.order.iter().any(|o| o == k) {
                pairs.push((k, v));
            }
        }
        Key::from_pairs(pairs)
    }

    fn decode(r: &mut StreamReader) -> Decoded<RecordKey> {
        let n = r.count(10)?;
        let mut values = Vec::with_capacity(n);
        for _ in 0..n {
            let k = r.string()?;
            let v = r.string()?;
            values.push((k, v));
        }
        let m = r.count(10)?;
        let mut order = Vec::with_capacity(m);
        for _ in 0..m {
            order.push(r.string()?);
            let _type_name = r.string()?;
        }
        Ok(RecordKey { values, order })
    }

    /// Types are written empty, as FDB5 5.16 on does; every version ignores them.
    fn encode(&self, w: &mut StreamWriter) {
        w.ulong(self.values.len() as u64);
        for (k, v) in &self.values {
            w.string(k);
            w.string(v);
        }
        w.ulong(self.order.len() as u64);
        for k in &self.order {
            w.string(k);
            w.string("");
        }
    }
}

/// An index record: one B-tree of an index file made visible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexRecord {
    /// The index file, relative to the directory of the toc holding the record (or absolute).
    pub path: String,
    pub offset: i64,
    pub index_type: String,
    /// Data files by id: base names relative to the toc's directory, absolute paths, or URIs.
    pub uris: Vec<(u64, String)>,
    /// Datum keyword → values present, sorted by keyword.
    pub axes: Vec<(String, Vec<String>)>,
    pub key: RecordKey,
    /// Flush time (seconds); 0 in records before version 3.
    pub time: i64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Payload {
    Init { key: RecordKey, sub_toc: bool },
    Index(IndexRecord),
    Clear { path: String, offset: i64 },
    SubToc { path: String },
}

fn decode_axes_body(r: &mut StreamReader, n: usize) -> Decoded<Vec<(String, Vec<String>)>> {
    let mut axes = Vec::with_capacity(n);
    for _ in 0..n {
        let kw = r.string()?;
        let c = r.count(5)?;
        let mut vals = Vec::with_capacity(c);
        for _ in 0..c {
            vals.push(r.string()?);
        }
        axes.push((kw, vals));
    }
    Ok(axes)
}

fn decode_index(r: &mut StreamReader, version: u32) -> Decoded<IndexRecord> {
    let path = r.string()?;
    let offset = r.long()?;
    let index_type = r.string()?;
    let n = r.count(10)?;
    let mut uris = Vec::with_capacity(n);
    for _ in 0..n {
        let id = r.ulong()?;
        uris.push((id, r.string()?));
    }
    if version < 3 {
        let n = r.count(10)?;
        let axes = decode_axes_body(r, n)?;
        let key = RecordKey::decode(r)?;
        let _fingerprint = r.string()?;
        let _type_again = r.string()?;
        return Ok(IndexRecord {
            path,
            offset,
            index_type,
            uris,
            axes,
            key,
            time: 0,
        });
    }
    r.start_object()?;
    let mut n = 0;
    let mut axes = None;
    while !r.end_object() {
        let at = r.position();
        match r.string()?.as_str() {
            "size" => n = r.count(10)?,
            "axes" => axes = Some(decode_axes_body(r, n)?),
            other => {
                return Err(DecodeError {
                    offset: at,
                    detail: format!("unknown field '{other}' in an index's axes"),
                })
            }
        }
    }
    r.start_object()?;
    let (mut key, mut ty, mut time) = (None, None, None);
    while !r.end_object() {
        let at = r.position();
        match r.string()?.as_str() {
            "key" => key = Some(RecordKey::decode(r)?),
            "type" => ty = Some(r.string()?),
            "time" => time = Some(r.long()?),
            other => {
                return Err(DecodeError {
                    offset: at,
                    detail: format!("unknown field '{other}' in an index description"),
                })
            }
        }
    }
    let missing = |what: &str| DecodeError {
        offset: r.position(),
        detail: format!("the index description has no {what}"),
    };
    let _ = ty.ok_or_else(|| missing("type"))?;
    Ok(IndexRecord {
        path,
        offset,
        index_type,
        uris,
        axes: axes.unwrap_or_default(),
        key: key.ok_or_else(|| missing("key"))?,
        time: time.unwrap_or(0),
    })
}

impl Payload {
    pub fn decode(header: &Header, payload: &[u8]) -> Decoded<Payload> {
        let mut r = StreamReader::new(payload);
        Ok(match header.tag {
            TAG_INIT => {
                let key = RecordKey::decode(&mut r)?;
                // Only very old writers left the flag out.
                let sub_toc = matches!(r.peek(), Some(5)) && r.int()? != 0;
                Payload::Init { key, sub_toc }
            }
            TAG_INDEX => Payload::Index(decode_index(&mut r, header.version)?),
            TAG_CLEAR => Payload::Clear {
                path: r.string()?,
                offset: r.long()?,
            },
            TAG_SUB_TOC => Payload::SubToc { path: r.string()? },
            t => {
                return Err(DecodeError {
                    offset: 0,
                    detail: format!("unknown record tag {t:#04x}"),
                })
            }
        })
    }

    pub fn tag(&self) -> u8 {
        match self {
            Payload::Init { .. } => TAG_INIT,
            Payload::Index(_) => TAG_INDEX,
            Payload::Clear { .. } => TAG_CLEAR,
            Payload::SubToc { .. } => TAG_SUB_TOC,
        }
    }

    /// The payload as a version 3 record holds it (readable by FDB5 5.7.1 and later, 5.10.8
    /// included).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = StreamWriter::default();
        match self {
            Payload::Init { key, sub_toc } => {
                key.encode(&mut w);
                w.int(i32::from(*sub_toc));
            }
            Payload::Index(ix) => {
                w.string(&ix.path);
                w.long(ix.offset);
                w.string(&ix.index_type);
                w.ulong(ix.uris.len() as u64);
                for (id, loc) in &ix.uris {
                    w.ulong(*id);
                    w.string(loc);
                }
                w.start_object();
                w.string("size");
                w.ulong(ix.axes.len() as u64);
                w.string("axes");
                for (kw, vals) in &ix.axes {
                    w.string(kw);
                    w.ulong(vals.len() as u64);
                    for v in vals {
                        w.string(v);
                    }
                }
                w.end_object();
                w.start_object();
                w.string("key");
                ix.key.encode(&mut w);
                w.string("type");
                w.string(&ix.index_type);
                w.string("time");
                w.long(ix.time);
                w.end_object();
            }
            Payload::Clear { path, offset } => {
                w.string(path);
                w.long(*offset);
            }
            Payload::SubToc { path } => {
                w.string(path);
                w.long(0);
            }
        }
        w.buf
    }
}

/// Who writes a record, as its header says.
pub(crate) struct Writer {
    pub pid: i32,
    pub uid: u32,
    pub host: String,
}

impl Writer {
    pub fn this_process() -> Writer {
        let host = crate::storage::names::host_name();
        Writer {
            pid: std::process::id() as i32,
            uid: crate::storage::toc::current_uid(),
            host: host.split('.').next().unwrap_or("").to_string(),
        }
    }
}

/// One whole record (header, payload, zero padding to a multiple of 1024), version 3.
pub(crate) fn encode_record(payload: &Payload, who: &Writer) -> Vec<u8> {
    let body = payload.encode();
    let size = (HEADER + body.len()).div_ceil(ROUND) * ROUND;
    let mut out = vec![0u8; size];
    out[0] = payload.tag();
    out[4..8].copy_from_slice(&3u32.to_le_bytes());
    out[8..12].copy_from_slice(&FDB_VERSION.to_le_bytes());
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    out[16..24].copy_from_slice(&(now.as_secs() as i64).to_le_bytes());
    out[24..32].copy_from_slice(&i64::from(now.subsec_micros()).to_le_bytes());
    out[32..36].copy_from_slice(&who.pid.to_le_bytes());
    out[36..40].copy_from_slice(&who.uid.to_le_bytes());
    let host = who.host.as_bytes();
    let n = host.len().min(63);
    out[40..40 + n].copy_from_slice(&host[..n]);
    out[104..112].copy_from_slice(&(size as u64).to_le_bytes());
    out[HEADER..HEADER + body.len()].copy_from_slice(&body);
    out
}
