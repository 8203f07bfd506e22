//! The retrieve stream: the fields a retrieve found, read straight from the store and checked
//! against their checksums as they pass.

use std::io::Read;
use std::sync::Arc;

use super::Located;
use crate::api::reader::{copy_with, field_at, DataReader, FieldSpan, COPY_CHUNK};
use crate::model::schema::SplitKey;
use crate::storage::{DbRef, ObjectReader, StorageError, Store};

/// Streams the fields' bytes straight from the store into the caller's buffer: memory holds no
/// field at all, whatever the request's size, and each byte is copied once. It holds the store
/// by `Arc`, so it outlives the handle.
///
/// Each field's checksum is computed as its bytes pass and compared when its last byte is read:
/// a mismatch is an error returned instead of that read, so a damaged field never reaches the
/// caller whole (a field larger than the caller's buffer has its first parts handed out before
/// the damage can be known, but the stream then fails before the field ends). A read starting
/// mid-field (after a seek) first reads the field's head for the checksum, so the rule holds
/// whatever the position: every field whose end is read is verified.
pub(super) struct FieldStream {
    store: Arc<dyn Store>,
    located: Vec<Located>,
    spans: Vec<FieldSpan>,
    size: u64,
    pos: u64,
    /// The field being read; its position in the stream is always `pos`.
    current: Option<Reading>,
    /// The object of the last field read, kept open across fields.
    object: Option<OpenObject>,
}

struct OpenObject {
    db: DbRef,
    name: String,
    reader: Box<dyn ObjectReader>,
}

/// The field being streamed: how much of it is done and the checksum of that much.
struct Reading {
    idx: usize,
    pos: u64,
    crc: crate::checksum::Crc32c,
}

impl FieldStream {
    pub(super) fn new(store: Arc<dyn Store>, located: Vec<Located>) -> FieldStream {
        let mut size = 0u64;
        let spans = located
            .iter()
            .map(|l| {
                let s = FieldSpan {
                    key: SplitKey {
                        db: l.db.key.clone(),
                        index: l.index.clone(),
                        datum: l.datum.clone(),
                    },
                    offset: size,
                    length: l.field.length,
                    checksum: l.field.checksum,
                };
                size += l.field.length;
                s
            })
            .collect();
        FieldStream {
            store,
            located,
            spans,
            size,
            pos: 0,
            current: None,
            object: None,
        }
    }

    /// The object holding field `idx`, opened unless it is the one already open.
    fn open(&mut self, idx: usize) -> Result<&mut OpenObject, StorageError> {
        let at = &self.located[idx];
        let kept = self
            .object
            .take()
            .filter(|o| o.db == at.db && o.name == at.field.object);
        let o = match kept {
            Some(o) => o,
            None => OpenObject {
                reader: self.store.open_object(&at.db, &at.field.object)?,
                db: at.db.clone(),
                name: at.field.object.clone(),
            },
        };
        Ok(self.object.insert(o))
    }

    fn corrupt(&self, idx: usize, pos: u64, detail: String) -> StorageError {
        let at = &self.located[idx];
        StorageError::Corrupt {
            path: std::path::PathBuf::from(self.store.uri(&at.db, &at.field.object)),
            offset: at.field.offset + pos,
            detail,
        }
    }

    fn short(&self, idx: usize, pos: u64) -> StorageError {
        self.corrupt(
            idx,
            pos,
            format!(
                "the data object ends inside a field ({} of {} bytes read)",
                pos, self.located[idx].field.length
            ),
        )
    }

    fn verify(&self, idx: usize, crc: u32) -> Result<(), StorageError> {
        let at = &self.located[idx];
        let field = &at.field;
        field.verify(
            crc,
            || self.store.uri(&at.db, &field.object),
            || format!("{}{}{}", at.db.key, at.index, at.datum),
        )
    }

    /// Starts reading field `idx` at `self.pos`, hashing the field's head first if the position
    /// is inside it.
    fn start(&mut self, idx: usize) -> Result<(), StorageError> {
        let skip = self.pos - self.spans[idx].offset;
        let field = self.located[idx].field.clone();
        let mut crc = crate::checksum::Crc32c::new();
        if skip > 0 && field.checksum.is_some() {
            let mut head = vec![0u8; usize::try_from(skip.min(1 << 20)).unwrap_or(1 << 20)];
            let mut done = 0u64;
            while done < skip {
                let want = usize::try_from(skip - done)
                    .unwrap_or(usize::MAX)
                    .min(head.len());
                let n = self
                    .open(idx)?
                    .reader
                    .read_at(field.offset + done, &mut head[..want])?;
                if n == 0 {
                    return Err(self.short(idx, done));
                }
                crc.update(&head[..n]);
                done += n as u64;
            }
        }
        self.open(idx)?;
        self.current = Some(Reading {
            idx,
            pos: skip,
            crc,
        });
        Ok(())
    }

    fn fill(&mut self, buf: &mut [u8]) -> Result<usize, StorageError> {
        let mut done = 0;
        while done < buf.len() {
            let idx = match &self.current {
                Some(r) if r.pos < self.located[r.idx].field.length => r.idx,
                _ => {
                    let i = field_at(&self.spans, self.pos);
                    if i >= self.spans.len() {
                        break;
                    }
                    self.start(i)?;
                    continue;
                }
            };
            let field = self.located[idx].field.clone();
            let Some(cur_pos) = self.current.as_ref().map(|r| r.pos) else {
                break;
            };
            let want = usize::try_from(field.length - cur_pos)
                .unwrap_or(usize::MAX)
                .min(buf.len() - done);
            let n = self
                .open(idx)?
                .reader
                .read_at(field.offset + cur_pos, &mut buf[done..done + want])?;
            if n == 0 {
                return Err(self.short(idx, cur_pos));
            }
            let Some(cur) = self.current.as_mut() else {
                break;
            };
            if field.checksum.is_some() {
                cur.crc.update(&buf[done..done + n]);
            }
            cur.pos += n as u64;
            let finished = (cur.pos == field.length).then(|| cur.crc.value());
            done += n;
            self.pos += n as u64;
            if let Some(crc) = finished {
                self.verify(idx, crc)?;
            }
        }
        Ok(done)
    }

    /// Copies whole fields from the current position (a field start) straight from a map of
    /// their object: each is checksummed in the map, then runs of fields adjacent in one object
    /// go out in one write. `Ok(false)` when the fast path does not apply (no OS file, or not at
    /// a field start): the caller falls back to reading.
    fn copy_mapped(&mut self, out: &mut std::fs::File) -> std::io::Result<bool> {
        use std::io::Write;
        let idx = field_at(&self.spans, self.pos);
        if idx >= self.spans.len() || self.spans[idx].offset != self.pos {
            return Ok(idx >= self.spans.len());
        }
        self.open(idx).map_err(std::io::Error::other)?;
        let Some((o, file)) = self
            .object
            .as_ref()
            .and_then(|o| o.reader.os_file().map(|f| (o, f)))
        else {
            return Ok(false);
        };
        let object_len = file.metadata()?.len();
        // The run: fields from `idx` on, each right after the previous in the same object.
        let first = &self.located[idx].field;
        let (mut end, mut run_end) = (idx, first.offset);
        while let Some(at) = self.located.get(end) {
            let contiguous = o.db == at.db
                && o.name == at.field.object
                && at.field.offset == run_end
                && run_end + at.field.length <= object_len;
            if !contiguous || (end > idx && run_end - first.offset >= 64 << 20) {
                break;
            }
            run_end += at.field.length;
            end += 1;
        }
        let run_len = usize::try_from(run_end - first.offset).unwrap_or(0);
        if end == idx || run_len == 0 {
            // A field past the object's end: the ordinary path reports it.
            return Ok(false);
        }
        // Mapped with its pages populated up front (far cheaper than faulting them in one by
        // one), checksummed, then written out from the map: one pass over the bytes.
        // SAFETY: data objects are append-only and never rewritten; the range is below the
        // object's length, so its bytes stay what was checksummed until written out.
        let map = unsafe {
            memmap2::MmapOptions::new()
                .offset(first.offset)
                .len(run_len)
                .populate()
                .map(file)
        }?;
        let base = first.offset;
        for i in idx..end {
            let f = &self.located[i].field;
            if f.checksum.is_some() {
                let a = (f.offset - base) as usize;
                let b = a + f.length as usize;
                self.verify(i, crate::checksum::crc32c(&map[a..b]))
                    .map_err(std::io::Error::other)?;
            }
        }
        out.write_all(&map)?;
        self.pos += run_len as u64;
        self.current = None;
        Ok(true)
    }
}

impl Read for FieldStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.fill(buf).map_err(std::io::Error::other)
    }
}

impl std::io::Seek for FieldStream {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        let to = crate::api::reader::seek_target(to, self.pos, self.size)?;
        if to != self.pos {
            self.pos = to;
            // The checksum so far belongs to the old position.
            self.current = None;
        }
        Ok(to)
    }
}

impl DataReader for FieldStream {
    fn size(&self) -> u64 {
        self.size
    }

    fn tell(&self) -> u64 {
        self.pos
    }

    fn fields(&self) -> &[FieldSpan] {
        &self.spans
    }

    fn copy_to_file(&mut self, out: &mut std::fs::File) -> std::io::Result<u64> {
        let from = self.pos;
        let mut buf = Vec::new();
        while self.pos < self.size {
            if !self.copy_mapped(out)? {
                // Not at a field start, or no OS file: the ordinary path to the next field end.
                let i = field_at(&self.spans, self.pos);
                let Some(span_end) = self.spans.get(i).map(|s| s.offset + s.length) else {
                    break;
                };
                let left = span_end - self.pos;
                // Large pieces: `io::copy`'s 8 KiB reads would cost an object store one
                // request per few KiB of a large field.
                if buf.is_empty() {
                    let rest = usize::try_from(self.size - self.pos).unwrap_or(usize::MAX);
                    buf = vec![0u8; rest.min(COPY_CHUNK)];
                }
                let n = copy_with(&mut self.by_ref().take(left), out, &mut buf)?;
                if n < left {
                    let at = self.pos - self.spans[i].offset;
                    return Err(std::io::Error::other(self.short(i, at)));
                }
            }
        }
        Ok(self.pos - from)
    }
}
