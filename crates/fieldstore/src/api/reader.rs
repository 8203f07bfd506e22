//! What a retrieve returns: a byte stream that owns what it reads from (it outlives the handle
//! that made it, as a Python iterator or a C data handle must), knows its total length before
//! the first byte, and can be positioned (pyfdb's and `fdb_c.h`'s readers have size/seek/tell).

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};

use crate::model::schema::SplitKey;

/// One field of a retrieve's result: its key and where its bytes sit in the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldSpan {
    pub key: SplitKey,
    /// From the start of the stream.
    pub offset: u64,
    pub length: u64,
    /// The CRC-32C the field was archived with, where the store keeps one: tells two copies of
    /// one key apart even when their lengths agree (a remote reader seeking back relies on it).
    pub checksum: Option<u32>,
}

/// A retrieve's answer: the fields' bytes one after the other, in the order of
/// [`DataReader::fields`]. Reading is streamed: memory holds the field list, never the bytes.
///
/// Every field whose last byte is read is checked against its checksum, whichever position the
/// reading started from (a read that starts mid-field reads the field's head too, for the
/// checksum only); a field whose end is never read is not checked.
pub trait DataReader: Read + Seek + Send {
    /// Total bytes: the sum of the fields' lengths.
    fn size(&self) -> u64;

    /// The position the next read starts at.
    fn tell(&self) -> u64;

    /// The fields in stream order, with their keys and lengths.
    fn fields(&self) -> &[FieldSpan];

    /// Moves `n` bytes forward (at most to the end); returns the new position.
    fn skip(&mut self, n: u64) -> io::Result<u64> {
        let to = self.tell().saturating_add(n).min(self.size());
        self.seek(SeekFrom::Start(to))
    }

    /// Copies everything from the current position to the end into `out` (at its current
    /// position); returns the bytes copied. Readers of local files override it to copy in the
    /// kernel, so that a retrieve into a file runs at the speed of a plain copy.
    fn copy_to_file(&mut self, out: &mut File) -> io::Result<u64> {
        copy_chunked(self, out)
    }
}

/// Copies in large pieces: `io::copy` moves 8 KiB at a time, too little for large fields and
/// for remote data frames that land straight in the caller's buffer.
pub fn copy_chunked<R: Read + ?Sized>(from: &mut R, to: &mut dyn io::Write) -> io::Result<u64> {
    copy_with(from, to, &mut vec![0u8; COPY_CHUNK])
}

/// The largest piece [`copy_chunked`] moves at once.
pub(crate) const COPY_CHUNK: usize = 16 << 20;

/// [`copy_chunked`] with the caller's buffer, for callers that copy many times.
pub(crate) fn copy_with<R: Read + ?Sized>(
    from: &mut R,
    to: &mut dyn io::Write,
    buf: &mut [u8],
) -> io::Result<u64> {
    let mut total = 0u64;
    loop {
        let n = match from.read(buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&buf[..n])?;
        total += n as u64;
    }
}

/// The absolute position a seek asks for; before the start is an error, past the end is
/// allowed (reads there return nothing), as for files.
pub fn seek_target(pos: SeekFrom, current: u64, size: u64) -> io::Result<u64> {
    let (base, delta) = match pos {
        SeekFrom::Start(n) => return Ok(n),
        SeekFrom::Current(d) => (current, d),
        SeekFrom::End(d) => (size, d),
    };
    base.checked_add_signed(delta).ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cannot seek to {delta} bytes from {base}: before the start of the data"),
        )
    })
}

/// The index of the field holding byte `pos` (fields sorted by offset, none empty in between
/// mattering); `fields.len()` at or past the end.
pub fn field_at(fields: &[FieldSpan], pos: u64) -> usize {
    // The first field ending after `pos`.
    fields.partition_point(|f| f.offset + f.length <= pos)
}

/// A result with no fields.
#[derive(Debug, Default)]
pub struct EmptyReader {
    pos: u64,
}

impl Read for EmptyReader {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        Ok(0)
    }
}

impl Seek for EmptyReader {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.pos = seek_target(pos, self.pos, 0)?;
        Ok(self.pos)
    }
}

impl DataReader for EmptyReader {
    fn size(&self) -> u64 {
        0
    }
    fn tell(&self) -> u64 {
        self.pos
    }
    fn fields(&self) -> &[FieldSpan] {
        &[]
    }
}

/// Several children's results read one after the other: sizes add up, field offsets shift,
/// and a seek lands in whichever child holds the position.
pub struct ChainReader {
    parts: Vec<Box<dyn DataReader>>,
    /// Where each part starts in the whole.
    starts: Vec<u64>,
    fields: Vec<FieldSpan>,
    size: u64,
    pos: u64,
}

impl ChainReader {
    pub fn new(parts: Vec<Box<dyn DataReader>>) -> ChainReader {
        let mut starts = Vec::with_capacity(parts.len());
        let mut fields = Vec::new();
        let mut size = 0u64;
        for p in &parts {
            starts.push(size);
            fields.extend(p.fields().iter().map(|f| FieldSpan {
                key: f.key.clone(),
                offset: f.offset + size,
                length: f.length,
                checksum: f.checksum,
            }));
            size += p.size();
        }
        ChainReader {
            parts,
            starts,
            fields,
            size,
            pos: 0,
        }
    }

    /// The part holding `pos`, positioned there; `None` at the end.
    fn part_at(&mut self, pos: u64) -> io::Result<Option<usize>> {
        let Some(i) = (0..self.parts.len())
            .find(|&i| pos >= self.starts[i] && pos < self.starts[i] + self.parts[i].size())
        else {
            return Ok(None);
        };
        let inner = pos - self.starts[i];
        if self.parts[i].tell() != inner {
            self.parts[i].seek(SeekFrom::Start(inner))?;
        }
        Ok(Some(i))
    }
}

impl Read for ChainReader {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        let Some(i) = self.part_at(self.pos)? else {
            return Ok(0);
        };
        let n = self.parts[i].read(buf)?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "a child's result ended before the {} bytes it announced",
                    self.parts[i].size()
                ),
            ));
        }
        self.pos += n as u64;
        Ok(n)
    }
}

impl Seek for ChainReader {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        self.pos = seek_target(pos, self.pos, self.size)?;
        Ok(self.pos)
    }
}

impl DataReader for ChainReader {
    fn size(&self) -> u64 {
        self.size
    }
    fn tell(&self) -> u64 {
        self.pos
    }
    fn fields(&self) -> &[FieldSpan] {
        &self.fields
    }
    /// Each child copies its own way, so a local child's fast copy survives composition.
    fn copy_to_file(&mut self, out: &mut File) -> io::Result<u64> {
        let mut total = 0;
        while let Some(i) = self.part_at(self.pos)? {
            let n = self.parts[i].copy_to_file(out)?;
            if n == 0 {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "a child's result ended before the bytes it announced",
                ));
            }
            self.pos += n;
            total += n;
        }
        Ok(total)
    }
}

/// Wraps a plain stream whose fields are known, for tests and simple frontends: seeks go
/// forward only, by reading.
#[cfg(test)]
pub(crate) struct ForwardReader<R> {
    pub inner: R,
    pub fields: Vec<FieldSpan>,
    pub pos: u64,
}

#[cfg(test)]
impl<R: Read + Send> Read for ForwardReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pos += n as u64;
        Ok(n)
    }
}

#[cfg(test)]
impl<R: Read + Send> Seek for ForwardReader<R> {
    fn seek(&mut self, pos: SeekFrom) -> io::Result<u64> {
        let size = self.fields.iter().map(|f| f.length).sum();
        let to = seek_target(pos, self.pos, size)?;
        if to < self.pos {
            return Err(io::Error::new(io::ErrorKind::Unsupported, "backwards"));
        }
        io::copy(&mut (&mut self.inner).take(to - self.pos), &mut io::sink())?;
        self.pos = to;
        Ok(to)
    }
}

#[cfg(test)]
impl<R: Read + Send> DataReader for ForwardReader<R> {
    fn size(&self) -> u64 {
        self.fields.iter().map(|f| f.length).sum()
    }
    fn tell(&self) -> u64 {
        self.pos
    }
    fn fields(&self) -> &[FieldSpan] {
        &self.fields
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Key;

    fn part(bytes: &'static [u8], lengths: &[u64]) -> Box<dyn DataReader> {
        let mut off = 0;
        let fields = lengths
            .iter()
            .map(|&l| {
                let f = FieldSpan {
                    key: SplitKey {
                        db: Key::new(),
                        index: Key::new(),
                        datum: Key::new().with("n", off.to_string()),
                    },
                    offset: off,
                    length: l,
                    checksum: None,
                };
                off += l;
                f
            })
            .collect();
        Box::new(ForwardReader {
            inner: io::Cursor::new(bytes),
            fields,
            pos: 0,
        })
    }

    #[test]
    fn a_chain_adds_sizes_shifts_fields_and_seeks_across_parts() {
        let mut c = ChainReader::new(vec![
            part(b"abcdef", &[2, 4]),
            Box::new(EmptyReader::default()),
            part(b"XYZ", &[3]),
        ]);
        assert_eq!(c.size(), 9);
        let offs: Vec<u64> = c.fields().iter().map(|f| f.offset).collect();
        assert_eq!(offs, [0, 2, 6]);
        assert_eq!(field_at(c.fields(), 5), 1);
        assert_eq!(field_at(c.fields(), 9), 3);
        c.seek(SeekFrom::Start(6)).unwrap();
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        assert_eq!(s, "XYZ");
        assert_eq!(c.tell(), 9);
        assert!(c.seek(SeekFrom::Current(-10)).is_err());
        let mut c = ChainReader::new(vec![part(b"abcdef", &[2, 4]), part(b"XYZ", &[3])]);
        assert_eq!(c.skip(4).unwrap(), 4);
        let mut s = String::new();
        c.read_to_string(&mut s).unwrap();
        assert_eq!(s, "efXYZ");
    }
}
