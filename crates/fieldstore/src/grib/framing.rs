//! Splits a byte stream into GRIB messages by their own framing (`GRIB` … `7777`, length from
//! section 0), without loading the whole input. ecCodes hands back a handle even for garbage, so
//! this check is ours.

use std::io::{ErrorKind, Read};
use std::sync::mpsc::Receiver;

use super::error::GribError;
use crate::fill::read_full;

/// One framed message and where it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GribMessage {
    /// 1-based position in the input.
    pub number: usize,
    pub offset: u64,
    pub bytes: Vec<u8>,
}

const HEADER: usize = 16;

/// The total length announced by a section 0 (`head` holds at least 16 bytes starting at `GRIB`).
fn announced_length(
    head: &[u8],
    source: &str,
    number: usize,
    offset: u64,
) -> Result<u64, GribError> {
    let edition = head.get(7).copied().unwrap_or(0);
    match edition {
        1 => {
            let len = (u64::from(head[4]) << 16) | (u64::from(head[5]) << 8) | u64::from(head[6]);
            if len & 0x80_0000 != 0 {
                // ECMWF's convention for GRIB1 messages over 8 MiB needs section 4 to decode.
                return Err(GribError::Edition {
                    source_name: source.into(),
                    message: number,
                    offset,
                    edition: 1,
                });
            }
            Ok(len)
        }
        2 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&head[8..16]);
            Ok(u64::from_be_bytes(b))
        }
        e => Err(GribError::Edition {
            source_name: source.into(),
            message: number,
            offset,
            edition: e,
        }),
    }
}

fn check_message(bytes: &[u8], source: &str, number: usize, offset: u64) -> Result<(), GribError> {
    if bytes.len() < HEADER + 4 || !bytes.ends_with(b"7777") {
        return Err(GribError::BadEnd {
            source_name: source.into(),
            message: number,
            offset,
            length: bytes.len() as u64,
        });
    }
    Ok(())
}

/// A read buffer that can hold back a few bytes while reading more behind them: the search for
/// `GRIB` must see a magic that straddles two reads whole (a `BufReader` only refills when
/// empty, so 3 bytes `GRI` left at the end of its buffer could never meet their `B`).
struct Lookahead<R> {
    inner: R,
    /// Zeroed once; `pos..end` holds the bytes not yet consumed.
    buf: Vec<u8>,
    pos: usize,
    end: usize,
}

const LOOKAHEAD: usize = 1 << 20;
/// Reads at least this large skip the buffer: a large message's body lands where it belongs,
/// copied once.
const DIRECT: usize = 64 << 10;

impl<R: Read> Lookahead<R> {
    /// At least `n` buffered bytes, fewer only at the end of the input.
    fn fill_at_least(&mut self, n: usize) -> std::io::Result<&[u8]> {
        if self.end - self.pos < n {
            self.buf.copy_within(self.pos..self.end, 0);
            self.end -= self.pos;
            self.pos = 0;
            if self.buf.len() < LOOKAHEAD.max(n) {
                self.buf.resize(LOOKAHEAD.max(n), 0);
            }
            while self.end < n {
                match self.inner.read(&mut self.buf[self.end..]) {
                    Ok(0) => break,
                    Ok(k) => self.end += k,
                    Err(e) if e.kind() == ErrorKind::Interrupted => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(&self.buf[self.pos..self.end])
    }

    fn consume(&mut self, n: usize) {
        self.pos = (self.pos + n).min(self.end);
    }
}

impl<R: Read> Read for Lookahead<R> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.pos == self.end {
            self.pos = 0;
            self.end = 0;
            if out.len() >= DIRECT {
                return self.inner.read(out);
            }
            self.fill_at_least(1)?;
        }
        let n = out.len().min(self.end - self.pos);
        out[..n].copy_from_slice(&self.buf[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Messages are read into buffers grown this much at a time, so a corrupt length cannot make us
/// allocate terabytes before the input runs out.
const GROW: usize = 64 << 20;

/// Reads messages one at a time from any reader (file, stdin): memory is one message.
pub struct MessageReader<R: Read> {
    inner: Lookahead<R>,
    source: String,
    offset: u64,
    number: usize,
    done: bool,
    /// Buffers of messages the consumer is done with: reusing them spares the page faults and
    /// zeroing of fresh memory, which cost as much as the read itself for large fields.
    spares: Option<Receiver<Vec<u8>>>,
}

impl<R: Read> MessageReader<R> {
    pub fn new(reader: R, source_name: impl Into<String>) -> Self {
        MessageReader {
            inner: Lookahead {
                inner: reader,
                buf: Vec::new(),
                pos: 0,
                end: 0,
            },
            source: source_name.into(),
            offset: 0,
            number: 0,
            done: false,
            spares: None,
        }
    }

    /// Reads later messages into the buffers that arrive on `spares` (when one is waiting).
    pub fn recycling(mut self, spares: Receiver<Vec<u8>>) -> Self {
        self.spares = Some(spares);
        self
    }

    fn io(&self, e: std::io::Error) -> GribError {
        GribError::Io {
            source_name: self.source.clone(),
            offset: self.offset,
            reason: e.to_string(),
        }
    }

    /// Skips to the next `GRIB`; returns how many bytes were skipped and whether one was found.
    fn seek_magic(&mut self) -> Result<(u64, bool), GribError> {
        let mut skipped = 0u64;
        loop {
            let buf = match self.inner.fill_at_least(4) {
                Ok(b) => b,
                Err(e) => return Err(self.io(e)),
            };
            if buf.is_empty() {
                return Ok((skipped, false));
            }
            if let Some(i) = buf.windows(4).position(|w| w == b"GRIB") {
                self.inner.consume(i);
                return Ok((skipped + i as u64, true));
            }
            if buf.len() < 4 {
                // The end of the input, too short to hold a magic.
                let n = buf.len();
                self.inner.consume(n);
                return Ok((skipped + n as u64, false));
            }
            // Keep the last 3 bytes: the magic may straddle this read and the next.
            let n = buf.len() - 3;
            self.inner.consume(n);
            skipped += n as u64;
        }
    }

    fn read_message(&mut self) -> Result<Option<GribMessage>, GribError> {
        let (skipped, found) = self.seek_magic()?;
        let number = self.number + 1;
        if skipped > 0 || !found {
            if !found && skipped == 0 {
                if self.number == 0 {
                    return Err(GribError::NotGrib {
                        source_name: self.source.clone(),
                        len: 0,
                    });
                }
                return Ok(None);
            }
            if self.number == 0 && !found {
                return Err(GribError::NotGrib {
                    source_name: self.source.clone(),
                    len: skipped,
                });
            }
            return Err(GribError::Junk {
                source_name: self.source.clone(),
                message: number,
                offset: self.offset,
                len: skipped,
            });
        }
        let offset = self.offset;
        let mut head = [0u8; HEADER];
        let got = read_full(&mut self.inner, &mut head).map_err(|e| self.io(e))?;
        if got < HEADER {
            return Err(GribError::Truncated {
                source_name: self.source.clone(),
                message: number,
                offset,
                expected: HEADER as u64,
                got: got as u64,
            });
        }
        let len = announced_length(&head, &self.source, number, offset)?;
        if len < (HEADER + 4) as u64 || len > (1 << 40) {
            return Err(GribError::BadEnd {
                source_name: self.source.clone(),
                message: number,
                offset,
                length: len,
            });
        }
        let mut bytes = self
            .spares
            .as_ref()
            .and_then(|r| r.try_recv().ok())
            .unwrap_or_default();
        // A recycled buffer is resized without being cleared: only growth is zeroed.
        let mut have = HEADER;
        let mut complete = true;
        while (have as u64) < len {
            let upto = (have + GROW).min(len as usize);
            bytes.resize(upto, 0);
            let got = read_full(&mut self.inner, &mut bytes[have..upto]).map_err(|e| self.io(e))?;
            have += got;
            if have < upto {
                complete = false;
                break;
            }
        }
        bytes.truncate(have);
        bytes[..HEADER].copy_from_slice(&head);
        if !complete {
            return Err(GribError::Truncated {
                source_name: self.source.clone(),
                message: number,
                offset,
                expected: len,
                got: have as u64,
            });
        }
        check_message(&bytes, &self.source, number, offset)?;
        self.offset += len;
        self.number = number;
        Ok(Some(GribMessage {
            number,
            offset,
            bytes,
        }))
    }
}

impl<R: Read> Iterator for MessageReader<R> {
    type Item = Result<GribMessage, GribError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.read_message() {
            Ok(Some(m)) => Some(Ok(m)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// (number, offset, bytes) of one message in a buffer.
pub type FramedSlice<'a> = (usize, u64, &'a [u8]);

/// Zero-copy framing of an in-memory buffer (a memory-mapped file, Python bytes): yields
/// (number, offset, message bytes) one at a time, then stops after the first error.
pub struct SliceMessages<'a> {
    data: &'a [u8],
    source: String,
    pos: usize,
    number: usize,
    done: bool,
}

impl<'a> SliceMessages<'a> {
    pub fn new(data: &'a [u8], source: impl Into<String>) -> Self {
        SliceMessages {
            data,
            source: source.into(),
            pos: 0,
            number: 0,
            done: false,
        }
    }

    fn next_message(&mut self) -> Result<Option<FramedSlice<'a>>, GribError> {
        let (pos, source) = (self.pos, self.source.as_str());
        let number = self.number + 1;
        let rest = &self.data[pos..];
        if rest.is_empty() {
            if self.number == 0 {
                return Err(GribError::NotGrib {
                    source_name: source.into(),
                    len: 0,
                });
            }
            return Ok(None);
        }
        match rest.windows(4).position(|w| w == b"GRIB") {
            None if self.number == 0 => {
                return Err(GribError::NotGrib {
                    source_name: source.into(),
                    len: rest.len() as u64,
                })
            }
            Some(0) => {}
            found => {
                return Err(GribError::Junk {
                    source_name: source.into(),
                    message: number,
                    offset: pos as u64,
                    len: found.unwrap_or(rest.len()) as u64,
                })
            }
        }
        if rest.len() < HEADER {
            return Err(GribError::Truncated {
                source_name: source.into(),
                message: number,
                offset: pos as u64,
                expected: HEADER as u64,
                got: rest.len() as u64,
            });
        }
        let len = announced_length(rest, source, number, pos as u64)?;
        if (rest.len() as u64) < len {
            return Err(GribError::Truncated {
                source_name: source.into(),
                message: number,
                offset: pos as u64,
                expected: len,
                got: rest.len() as u64,
            });
        }
        let msg = &rest[..len as usize];
        check_message(msg, source, number, pos as u64)?;
        self.pos += msg.len();
        self.number = number;
        Ok(Some((number, pos as u64, msg)))
    }
}

impl<'a> Iterator for SliceMessages<'a> {
    type Item = Result<FramedSlice<'a>, GribError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        let r = self.next_message().transpose();
        if !matches!(r, Some(Ok(_))) {
            self.done = true;
        }
        r
    }
}

/// Every message of an in-memory buffer, or the first framing error.
pub fn split_slice<'a>(data: &'a [u8], source: &str) -> Result<Vec<FramedSlice<'a>>, GribError> {
    SliceMessages::new(data, source).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal well-framed GRIB2 message (framing only; not decodable by ecCodes).
    fn fake2(body: usize) -> Vec<u8> {
        let len = (HEADER + body + 4) as u64;
        let mut v = b"GRIB\0\0\0\x02".to_vec();
        v.extend_from_slice(&len.to_be_bytes());
        v.extend(std::iter::repeat_n(0xAB, body));
        v.extend_from_slice(b"7777");
        v
    }

    /// Hands out at most `step` bytes per read, as a pipe does.
    struct Trickle<'a> {
        data: &'a [u8],
        pos: usize,
        step: usize,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
            let n = out.len().min(self.step).min(self.data.len() - self.pos);
            out[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
            self.pos += n;
            Ok(n)
        }
    }

    #[test]
    fn a_magic_straddling_the_read_buffer_is_found() {
        // The second message's `GRIB` starts 0..6 bytes before the 1 MiB boundary of the
        // reader's buffer: once it was skipped as junk when 1-3 bytes of it fell before.
        for before in 0..=6usize {
            let mut data = fake2(LOOKAHEAD - HEADER - 4 - before);
            data.extend(fake2(10));
            data.extend(fake2(3 << 20));
            data.extend(fake2(10));
            let got = read_all(&data).unwrap();
            assert_eq!(got.len(), 4, "magic {before} bytes before the boundary");
            assert_eq!(got[1].offset as usize, LOOKAHEAD - before);
        }
    }

    #[test]
    fn any_read_sizes_give_the_same_messages() {
        let mut data = Vec::new();
        for (i, body) in [10usize, 300, 5, 70_000, 1, 2 << 20, 17].iter().enumerate() {
            if i == 3 {
                data.extend_from_slice(b"GRI"); // a false start is junk, not a message
            }
            data.extend(fake2(*body));
        }
        for step in [1, 2, 3, 4, 5, 7, 4096, 1 << 20, usize::MAX] {
            let r = Trickle {
                data: &data,
                pos: 0,
                step,
            };
            let msgs: Vec<_> = MessageReader::new(r, "t").collect();
            // The junk `GRI` stops the stream where it is, after three messages.
            assert_eq!(msgs.len(), 4, "step {step}");
            assert!(msgs[..3].iter().all(|m| m.is_ok()));
            assert!(msgs[3]
                .as_ref()
                .unwrap_err()
                .to_string()
                .contains("3 bytes of non-GRIB"));
        }
    }

    #[test]
    fn recycled_buffers_hold_exactly_the_next_message() {
        // Spare buffers longer and shorter than the messages, full of stale bytes.
        let sizes = [3usize << 20, 10, 1 << 20, 70_000, 5 << 20, 1];
        let mut data = Vec::new();
        let mut want = Vec::new();
        for (i, &body) in sizes.iter().enumerate() {
            let mut m = fake2(body);
            m[HEADER..HEADER + body].fill(i as u8);
            data.extend_from_slice(&m);
            want.push(m);
        }
        let (tx, rx) = std::sync::mpsc::sync_channel(8);
        for n in [4 << 20, 5, 2 << 20, 100, 6 << 20, 64] {
            tx.send(vec![0xEE; n]).unwrap();
        }
        let r = Trickle {
            data: &data,
            pos: 0,
            step: 100_000,
        };
        let got: Vec<_> = MessageReader::new(r, "t")
            .recycling(rx)
            .map(|m| m.unwrap().bytes)
            .collect();
        assert_eq!(got, want);

        // A message cut short is an error even in a long recycled buffer.
        let mut cut = fake2(2 << 20);
        cut.truncate(1 << 20);
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        tx.send(vec![0u8; 4 << 20]).unwrap();
        let e = MessageReader::new(&cut[..], "t")
            .recycling(rx)
            .next()
            .unwrap()
            .unwrap_err()
            .to_string();
        assert!(e.contains("1048576"), "{e}");
    }

    proptest::proptest! {
        /// Framing a mapped file and framing a stream agree on every input: the same messages,
        /// then the same error (or none).
        #[test]
        fn slices_and_streams_frame_alike(
            parts in proptest::collection::vec((0usize..3, 0usize..3000), 0..8),
            step in 1usize..5000,
        ) {
            let mut data = Vec::new();
            for (kind, n) in parts {
                match kind {
                    0 => data.extend(fake2(n)),
                    1 => data.extend(std::iter::repeat_n(b'x', n % 7)),
                    _ => {
                        let mut m = fake2(n);
                        m.truncate(m.len() / 2);
                        data.extend(m);
                    }
                }
            }
            let stream: Vec<_> = MessageReader::new(Trickle { data: &data, pos: 0, step }, "t")
                .map(|m| m.map(|m| (m.number, m.offset, m.bytes)).map_err(|e| e.to_string()))
                .collect();
            let slices: Vec<_> = SliceMessages::new(&data, "t")
                .map(|m| m.map(|(n, o, b)| (n, o, b.to_vec())).map_err(|e| e.to_string()))
                .collect();
            type Framed = Result<(usize, u64, Vec<u8>), String>;
            let ok = |v: &[Framed]| v.iter().filter(|m| m.is_ok()).cloned().collect::<Vec<_>>();
            proptest::prop_assert_eq!(ok(&stream), ok(&slices));
            proptest::prop_assert_eq!(
                stream.iter().any(|m| m.is_err()),
                slices.iter().any(|m| m.is_err())
            );
        }
    }

    fn fake1(body: usize) -> Vec<u8> {
        let len = (8 + 8 + body + 4) as u32;
        let mut v = b"GRIB".to_vec();
        v.extend_from_slice(&len.to_be_bytes()[1..]);
        v.push(1);
        v.extend(std::iter::repeat_n(0u8, 8 + body));
        v.extend_from_slice(b"7777");
        v
    }

    fn read_all(data: &[u8]) -> Result<Vec<GribMessage>, GribError> {
        MessageReader::new(data, "t").collect()
    }

    #[test]
    fn splits_concatenated_messages() {
        let mut data = fake2(10);
        data.extend(fake1(5));
        data.extend(fake2(1000));
        let ms = read_all(&data).unwrap();
        assert_eq!(ms.len(), 3);
        assert_eq!(ms[1].offset, 30);
        assert_eq!(ms[2].bytes.len(), 1020);
        let sl = split_slice(&data, "t").unwrap();
        assert_eq!(sl.len(), 3);
        assert_eq!(sl[2].2, &ms[2].bytes[..]);
    }

    #[test]
    fn errors_say_where() {
        let mut data = fake2(10);
        data.extend_from_slice(b"junkjunk");
        data.extend(fake2(10));
        let e = read_all(&data).unwrap_err();
        assert_eq!(
            e.to_string(),
            "t: 8 bytes of non-GRIB data at offset 30, before message 2"
        );
        assert_eq!(split_slice(&data, "t").unwrap_err(), e);

        let whole = fake2(100);
        let e = read_all(&whole[..50]).unwrap_err();
        assert!(
            matches!(
                e,
                GribError::Truncated {
                    message: 1,
                    expected: 120,
                    got: 50,
                    ..
                }
            ),
            "{e}"
        );
        assert!(matches!(
            split_slice(&whole[..50], "t").unwrap_err(),
            GribError::Truncated { .. }
        ));

        let mut bad = fake2(10);
        let n = bad.len();
        bad[n - 1] = b'8';
        assert!(matches!(
            read_all(&bad).unwrap_err(),
            GribError::BadEnd { .. }
        ));
        assert!(matches!(
            read_all(b"hello world, not grib").unwrap_err(),
            GribError::NotGrib { len: 21, .. }
        ));
        assert!(matches!(
            read_all(b"").unwrap_err(),
            GribError::NotGrib { len: 0, .. }
        ));
        let mut e3 = fake2(10);
        e3[7] = 3;
        assert!(matches!(
            read_all(&e3).unwrap_err(),
            GribError::Edition { edition: 3, .. }
        ));
        let mut trailing = fake2(10);
        trailing.extend_from_slice(b"xx");
        assert!(matches!(
            read_all(&trailing).unwrap_err(),
            GribError::Junk {
                message: 2,
                len: 2,
                ..
            }
        ));
    }

    #[test]
    fn reader_survives_arbitrary_bytes() {
        use proptest::prelude::*;
        proptest!(|(data in proptest::collection::vec(any::<u8>(), 0..200))| {
            let _ = read_all(&data);
            let _ = split_slice(&data, "t");
        });
    }
}
