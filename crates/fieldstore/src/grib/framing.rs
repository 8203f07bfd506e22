//! Splits a byte stream into GRIB messages by their own framing (`GRIB` … `7777`, length from
//! section 0), without loading the whole input. ecCodes hands back a handle even for garbage, so
//! this check is ours.
//!
//! What lies between messages is skipped, as ecCodes' reader and FDB5's `fdb-write` skip it:
//! MARS pads GRIB1 messages with zeros after `7777` to a multiple of 120 bytes, and other tools
//! leave other bytes. A short run of zeros is padding and passes silently; anything else is
//! skipped with a warning, since it may be a message that lost its header. Each message is the
//! bytes from `GRIB` to `7777`, as FDB5 stores it. Data before the first message is refused (FDB5
//! refuses it too: such a file is most likely not GRIB), and so is a message that does not frame
//! (cut short, length past the end of the input, no `7777` where its length says).

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

/// Zero bytes after a message, fewer than this, are padding: MARS pads GRIB1 messages to a
/// multiple of 120 bytes, other writers to 4 or 8. More zeros than any padding needs may be where
/// a message should have been, so they get a warning like any other skipped data.
pub const PADDING: u64 = 120;

/// Messages are never longer than this: a corrupt length is reported rather than waited for.
const MAX_MESSAGE: u64 = 1 << 40;

/// How a message's length is coded in its section 0.
enum Length {
    Exact(u64),
    /// ECMWF's convention for GRIB1 messages over 8 MiB: the 24-bit length (top bit set) may
    /// count 120-byte blocks, corrected from section 4; see `large_grib1_length`.
    LargeGrib1(u64),
}

/// The total length announced by a section 0 (`head` holds at least 16 bytes starting at `GRIB`).
fn announced_length(
    head: &[u8],
    source: &str,
    number: usize,
    offset: u64,
) -> Result<Length, GribError> {
    let edition = head.get(7).copied().unwrap_or(0);
    match edition {
        1 => {
            let len = (u64::from(head[4]) << 16) | (u64::from(head[5]) << 8) | u64::from(head[6]);
            if len & 0x80_0000 != 0 {
                return Ok(Length::LargeGrib1(len));
            }
            Ok(Length::Exact(len))
        }
        2 => {
            let mut b = [0u8; 8];
            b.copy_from_slice(&head[8..16]);
            Ok(Length::Exact(u64::from_be_bytes(b)))
        }
        e => Err(GribError::Edition {
            source_name: source.into(),
            message: number,
            offset,
            edition: e,
        }),
    }
}

/// The length of a GRIB1 message whose 24-bit length has its top bit set, decoded as ecCodes'
/// reader (`read_GRIB` in `grib_io.c`) decodes it: when section 4's own length is below 120, it
/// is a correction, and the real length is `(coded & 0x7fffff) * 120 - correction + 4`;
/// otherwise the coded length is the length (a plain message of 8 to 16 MiB). Section 4's
/// length comes after sections 1, 2 and 3, whose presence section 1's flags say.
///
/// `Err(n)`: `prefix` (the message's first bytes) must hold at least `n` bytes to tell.
fn large_grib1_length(prefix: &[u8], coded: u64) -> Result<u64, usize> {
    let u24 = |at: usize| -> Result<u64, usize> {
        prefix
            .get(at..at + 3)
            .map(|b| (u64::from(b[0]) << 16) | (u64::from(b[1]) << 8) | u64::from(b[2]))
            .ok_or(at + 3)
    };
    // Section 1 starts at 8; its 8th byte holds the flags: 0x80 section 2, 0x40 section 3.
    let flags = *prefix.get(15).ok_or(16usize)?;
    // Lengths are 24-bit, so these sums cannot overflow; nonsense lands on no `7777`.
    let mut at = 8 + u24(8)? as usize;
    if flags & 0x80 != 0 {
        at += u24(at)? as usize;
    }
    if flags & 0x40 != 0 {
        at += u24(at)? as usize;
    }
    let sec4 = u24(at)?;
    if sec4 < 120 {
        Ok(((coded & 0x7f_ffff) * 120 + 4).saturating_sub(sec4))
    } else {
        Ok(coded)
    }
}

fn check_length(len: u64, source: &str, number: usize, offset: u64) -> Result<(), GribError> {
    if len < (HEADER + 4) as u64 || len > MAX_MESSAGE {
        return Err(GribError::BadEnd {
            source_name: source.into(),
            message: number,
            offset,
            length: len,
        });
    }
    Ok(())
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

fn truncated(source: &str, number: usize, offset: u64, expected: u64, got: u64) -> GribError {
    GribError::Truncated {
        source_name: source.into(),
        message: number,
        offset,
        expected,
        got,
    }
}

/// What framing skipped so far: the same for a mapped file and a stream of the same bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Skipped {
    /// Bytes of zero padding after messages (fewer than [`PADDING`] at a time), not reported.
    pub padding: u64,
    /// Other bytes after messages, skipped with a warning.
    pub other: u64,
    /// How many stretches of other bytes.
    pub stretches: u64,
}

impl Skipped {
    /// Accounts for `len` bytes at `offset` after message `after`, and warns about the first
    /// stretch that is not padding (one line, however many follow: see `finish`).
    fn note(&mut self, source: &str, offset: u64, len: u64, zeros: bool, after: usize) {
        if zeros && len < PADDING {
            self.padding += len;
            return;
        }
        self.other += len;
        self.stretches += 1;
        if self.stretches == 1 {
            let what = if zeros {
                "zero bytes"
            } else {
                "bytes of non-GRIB data"
            };
            tracing::warn!(
                "{source}: skipped {len} {what} at offset {offset}, after message {after} (ecCodes and FDB5 skip them too)"
            );
        }
    }

    /// At the end of the input: how much more was skipped after the first warning.
    fn finish(&self, source: &str) {
        if self.stretches > 1 {
            tracing::warn!(
                "{source}: skipped {} stretches of non-GRIB data between messages, {} bytes in all",
                self.stretches,
                self.other
            );
        }
    }
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
    /// Of the next byte not yet consumed.
    offset: u64,
    number: usize,
    done: bool,
    skipped: Skipped,
    /// Buffers of messages the consumer is done with: reusing them spares the page faults and
    /// zeroing of fresh memory, which cost as much as the read itself for large fields.
    spares: Option<Receiver<Vec<u8>>>,
}

fn io_error(source: &str, offset: u64, e: std::io::Error) -> GribError {
    GribError::Io {
        source_name: source.into(),
        offset,
        reason: e.to_string(),
    }
}

/// What is before the first message, or an input without one: refused (see the module doc).
fn leading_data(source: &str, skipped: u64, found: bool) -> GribError {
    if found {
        GribError::Junk {
            source_name: source.into(),
            message: 1,
            offset: 0,
            len: skipped,
        }
    } else {
        GribError::NotGrib {
            source_name: source.into(),
            len: skipped,
        }
    }
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
            skipped: Skipped::default(),
            spares: None,
        }
    }

    /// Reads later messages into the buffers that arrive on `spares` (when one is waiting).
    pub fn recycling(mut self, spares: Receiver<Vec<u8>>) -> Self {
        self.spares = Some(spares);
        self
    }

    /// What was skipped between and after the messages read so far.
    pub fn skipped(&self) -> Skipped {
        self.skipped
    }

    /// Skips to the next `GRIB`; returns how many bytes were skipped, whether they were all
    /// zeros, and whether a magic was found.
    fn seek_magic(&mut self) -> Result<(u64, bool, bool), GribError> {
        let mut skipped = 0u64;
        let mut zeros = true;
        loop {
            let buf = match self.inner.fill_at_least(4) {
                Ok(b) => b,
                Err(e) => return Err(io_error(&self.source, self.offset + skipped, e)),
            };
            if buf.is_empty() {
                return Ok((skipped, zeros, false));
            }
            if let Some(i) = buf.windows(4).position(|w| w == b"GRIB") {
                zeros &= buf[..i].iter().all(|&b| b == 0);
                self.inner.consume(i);
                return Ok((skipped + i as u64, zeros, true));
            }
            // Keep the last 3 bytes (the magic may straddle this read and the next), unless this
            // is the end of the input, too short to hold a magic.
            let n = if buf.len() < 4 {
                buf.len()
            } else {
                buf.len() - 3
            };
            zeros &= buf[..n].iter().all(|&b| b == 0);
            self.inner.consume(n);
            skipped += n as u64;
        }
    }

    /// The length of the message starting at the buffer's front, read without consuming it.
    fn peek_length(&mut self, number: usize) -> Result<u64, GribError> {
        let offset = self.offset;
        let source = self.source.as_str();
        let head = self
            .inner
            .fill_at_least(HEADER)
            .map_err(|e| io_error(source, offset, e))?;
        if head.len() < HEADER {
            return Err(truncated(
                source,
                number,
                offset,
                HEADER as u64,
                head.len() as u64,
            ));
        }
        match announced_length(head, source, number, offset)? {
            Length::Exact(len) => Ok(len),
            Length::LargeGrib1(coded) => {
                let mut need = HEADER;
                loop {
                    let prefix = self
                        .inner
                        .fill_at_least(need)
                        .map_err(|e| io_error(source, offset, e))?;
                    match large_grib1_length(prefix, coded) {
                        Ok(len) => return Ok(len),
                        Err(n) if n > prefix.len() && prefix.len() >= need => need = n,
                        Err(n) => {
                            return Err(truncated(
                                source,
                                number,
                                offset,
                                n as u64,
                                prefix.len() as u64,
                            ))
                        }
                    }
                }
            }
        }
    }

    fn read_message(&mut self) -> Result<Option<GribMessage>, GribError> {
        let (skipped, zeros, found) = self.seek_magic()?;
        if self.number == 0 && (skipped > 0 || !found) {
            return Err(leading_data(&self.source, skipped, found));
        }
        if skipped > 0 {
            self.skipped
                .note(&self.source, self.offset, skipped, zeros, self.number);
            self.offset += skipped;
        }
        if !found {
            self.skipped.finish(&self.source);
            return Ok(None);
        }
        let number = self.number + 1;
        let offset = self.offset;
        let len = self.peek_length(number)?;
        check_length(len, &self.source, number, offset)?;
        let mut bytes = self
            .spares
            .as_ref()
            .and_then(|r| r.try_recv().ok())
            .unwrap_or_default();
        // A recycled buffer is resized without being cleared: only growth is zeroed.
        let mut have = 0usize;
        let mut complete = true;
        while (have as u64) < len {
            let upto = (have + GROW).min(len as usize);
            bytes.resize(upto, 0);
            let got = read_full(&mut self.inner, &mut bytes[have..upto])
                .map_err(|e| io_error(&self.source, offset + have as u64, e))?;
            have += got;
            if have < upto {
                complete = false;
                break;
            }
        }
        bytes.truncate(have);
        if !complete {
            return Err(truncated(&self.source, number, offset, len, have as u64));
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
    skipped: Skipped,
}

impl<'a> SliceMessages<'a> {
    pub fn new(data: &'a [u8], source: impl Into<String>) -> Self {
        SliceMessages {
            data,
            source: source.into(),
            pos: 0,
            number: 0,
            done: false,
            skipped: Skipped::default(),
        }
    }

    /// What was skipped between and after the messages framed so far.
    pub fn skipped(&self) -> Skipped {
        self.skipped
    }

    fn next_message(&mut self) -> Result<Option<FramedSlice<'a>>, GribError> {
        let data = self.data;
        let rest = &data[self.pos..];
        let found = rest.windows(4).position(|w| w == b"GRIB");
        let skipped = found.unwrap_or(rest.len());
        if self.number == 0 && (skipped > 0 || found.is_none()) {
            return Err(leading_data(&self.source, skipped as u64, found.is_some()));
        }
        if skipped > 0 {
            let zeros = rest[..skipped].iter().all(|&b| b == 0);
            self.skipped.note(
                &self.source,
                self.pos as u64,
                skipped as u64,
                zeros,
                self.number,
            );
            self.pos += skipped;
        }
        if found.is_none() {
            self.skipped.finish(&self.source);
            return Ok(None);
        }
        let (pos, source) = (self.pos, self.source.as_str());
        let number = self.number + 1;
        let rest = &data[pos..];
        if rest.len() < HEADER {
            return Err(truncated(
                source,
                number,
                pos as u64,
                HEADER as u64,
                rest.len() as u64,
            ));
        }
        let len = match announced_length(rest, source, number, pos as u64)? {
            Length::Exact(len) => len,
            Length::LargeGrib1(coded) => large_grib1_length(rest, coded)
                .map_err(|n| truncated(source, number, pos as u64, n as u64, rest.len() as u64))?,
        };
        check_length(len, source, number, pos as u64)?;
        if (rest.len() as u64) < len {
            return Err(truncated(
                source,
                number,
                pos as u64,
                len,
                rest.len() as u64,
            ));
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
            let mut reader = MessageReader::new(r, "t");
            let msgs: Vec<_> = reader.by_ref().collect();
            // The false start `GRI` is skipped like any other bytes between messages.
            assert_eq!(msgs.len(), 7, "step {step}");
            assert!(msgs.iter().all(|m| m.is_ok()));
            // 30 + 320 + 25 bytes of messages, then the 3 skipped.
            assert_eq!(msgs[3].as_ref().unwrap().offset, 378);
            assert_eq!(
                reader.skipped(),
                Skipped {
                    padding: 0,
                    other: 3,
                    stretches: 1
                }
            );
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
            parts in proptest::collection::vec((0usize..6, 0usize..3000), 0..8),
            step in 1usize..5000,
        ) {
            let mut data = Vec::new();
            for (kind, n) in parts {
                match kind {
                    0 => data.extend(fake2(n)),
                    1 => data.extend(std::iter::repeat_n(b'x', n % 7)),
                    2 => data.extend(std::iter::repeat_n(0u8, n % 250)),
                    3 => data.extend(padded(fake1(n))),
                    4 => data.extend_from_slice(&b"GRIB\0\0"[..n % 7]),
                    _ => {
                        let mut m = fake2(n);
                        m.truncate(m.len() / 2);
                        data.extend(m);
                    }
                }
            }
            let mut reader = MessageReader::new(Trickle { data: &data, pos: 0, step }, "t");
            let stream: Vec<_> = reader
                .by_ref()
                .map(|m| m.map(|m| (m.number, m.offset, m.bytes)).map_err(|e| e.to_string()))
                .collect();
            let mut framer = SliceMessages::new(&data, "t");
            let slices: Vec<_> = framer
                .by_ref()
                .map(|m| m.map(|(n, o, b)| (n, o, b.to_vec())).map_err(|e| e.to_string()))
                .collect();
            proptest::prop_assert_eq!(stream, slices);
            proptest::prop_assert_eq!(reader.skipped(), framer.skipped());
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

    /// Both framings of `data`: the messages (or the error) and what was skipped; they must agree.
    fn frame_both(data: &[u8]) -> (Result<Vec<GribMessage>, GribError>, Skipped) {
        let mut framer = SliceMessages::new(data, "t");
        let slices: Result<Vec<_>, _> = framer
            .by_ref()
            .map(|m| {
                m.map(|(number, offset, b)| GribMessage {
                    number,
                    offset,
                    bytes: b.to_vec(),
                })
            })
            .collect();
        for step in [1, 7, 4096, usize::MAX] {
            let mut reader = MessageReader::new(Trickle { data, pos: 0, step }, "t");
            let streamed: Result<Vec<_>, _> = reader.by_ref().collect();
            assert_eq!(streamed, slices, "read {step} bytes at a time");
            assert_eq!(reader.skipped(), framer.skipped(), "read {step} at a time");
        }
        (slices, framer.skipped())
    }

    /// `msg` followed by zeros up to a multiple of 120 bytes, as MARS writes GRIB1.
    fn padded(mut msg: Vec<u8>) -> Vec<u8> {
        msg.resize(msg.len().next_multiple_of(120), 0);
        msg
    }

    #[test]
    fn zero_padding_after_messages_is_skipped_silently() {
        let (a, b, c) = (fake1(5), fake1(1000), fake2(77));
        let mut data = padded(a.clone());
        data.extend(padded(b.clone()));
        data.extend(c.clone());
        data.extend([0u8; 3]);
        let (msgs, skipped) = frame_both(&data);
        let msgs = msgs.unwrap();
        // Each message is GRIB..7777, as FDB5 stores it: the padding is not part of it.
        let bytes: Vec<_> = msgs.iter().map(|m| m.bytes.clone()).collect();
        assert_eq!(bytes, [a, b, c]);
        assert_eq!(
            msgs.iter().map(|m| m.offset).collect::<Vec<_>>(),
            [0, 120, 1200]
        );
        assert_eq!(
            skipped,
            Skipped {
                padding: 95 + 60 + 3,
                other: 0,
                stretches: 0
            }
        );
    }

    #[test]
    fn other_bytes_between_messages_are_skipped_and_counted() {
        let mut data = fake2(10);
        data.extend_from_slice(b"junkjunk");
        data.extend(fake2(20));
        // More zeros than any padding: maybe a lost message, so counted with the junk.
        data.extend([0u8; 500]);
        data.extend(fake1(30));
        data.extend_from_slice(b"GRI\n");
        let (msgs, skipped) = frame_both(&data);
        let msgs = msgs.unwrap();
        assert_eq!(
            msgs.iter()
                .map(|m| (m.number, m.offset))
                .collect::<Vec<_>>(),
            [(1, 0), (2, 38), (3, 578)]
        );
        assert_eq!(
            skipped,
            Skipped {
                padding: 0,
                other: 8 + 500 + 4,
                stretches: 3
            }
        );
    }

    #[test]
    fn damage_after_padding_is_still_refused() {
        // A message cut short after a padded one: where and how much.
        let first = padded(fake1(5));
        let mut data = first.clone();
        let second = fake1(1000);
        data.extend_from_slice(&second[..500]);
        let (r, _) = frame_both(&data);
        assert_eq!(
            r.unwrap_err(),
            GribError::Truncated {
                source_name: "t".into(),
                message: 2,
                offset: 120,
                expected: 1020,
                got: 500
            }
        );
        // Only a header's first bytes before the end.
        let mut data = first.clone();
        data.extend_from_slice(b"GRIB\0\0");
        let (r, _) = frame_both(&data);
        assert!(
            matches!(
                r,
                Err(GribError::Truncated {
                    message: 2,
                    offset: 120,
                    expected: 16,
                    got: 6,
                    ..
                })
            ),
            "{r:?}"
        );
        // The length does not lead to `7777`.
        let mut data = first.clone();
        let mut bad = fake1(40);
        let n = bad.len();
        bad[n - 2] = b'0';
        data.extend(padded(bad));
        let (r, _) = frame_both(&data);
        assert_eq!(
            r.unwrap_err().to_string(),
            "t: message 2 at offset 120 does not end with '7777' (length 60): corrupt or not GRIB"
        );
        // A `GRIB` in the junk that does not frame is refused, not skipped (as ecCodes does).
        let mut data = first;
        data.extend_from_slice(b"GRIBxxxxxxxxxxxxxxxxx");
        data.extend(fake1(5));
        let (r, _) = frame_both(&data);
        assert!(
            matches!(
                r,
                Err(GribError::Edition {
                    message: 2,
                    offset: 120,
                    ..
                })
            ),
            "{r:?}"
        );
    }

    /// A GRIB1 message in ECMWF's large-message coding: section 0 says `blocks` 120-byte blocks
    /// with the top bit set, section 4's length field holds the correction.
    fn fake1_large(len: usize, with_section2: bool) -> Vec<u8> {
        let blocks = len.div_ceil(120);
        let correction = blocks * 120 - len + 4;
        assert!(correction < 120);
        let mut v = vec![0u8; len];
        v[..4].copy_from_slice(b"GRIB");
        v[4..7].copy_from_slice(&((blocks as u32) | 0x80_0000).to_be_bytes()[1..]);
        v[7] = 1;
        // Section 1: 28 bytes, flags at its 8th byte.
        v[8..11].copy_from_slice(&28u32.to_be_bytes()[1..]);
        let mut at = 8 + 28;
        if with_section2 {
            v[15] = 0x80;
            v[at..at + 3].copy_from_slice(&32u32.to_be_bytes()[1..]);
            at += 32;
        }
        v[at..at + 3].copy_from_slice(&(correction as u32).to_be_bytes()[1..]);
        v[len - 4..].copy_from_slice(b"7777");
        v
    }

    #[test]
    fn large_grib1_messages_are_framed_as_eccodes_frames_them() {
        let big = fake1_large((9 << 20) + 13, true);
        let small = fake1(3);
        let mut data = padded(small.clone());
        data.extend(padded(big.clone()));
        data.extend(fake1_large((8 << 20) + 500, false));
        let (msgs, skipped) = frame_both(&data);
        let msgs = msgs.unwrap();
        assert_eq!(msgs.len(), 3);
        assert_eq!(msgs[1].bytes, big);
        assert_eq!(msgs[2].bytes.len(), (8 << 20) + 500);
        assert_eq!(skipped.other, 0);

        // Cut inside sections 1-4, the length cannot be told: truncated, not misread.
        for cut in [10, 20, 40, 70] {
            let (r, _) = frame_both(&big[..cut]);
            assert!(
                matches!(r, Err(GribError::Truncated { message: 1, got, .. }) if got == cut as u64),
                "cut at {cut}: {r:?}"
            );
        }
        // Cut in the data: the decoded length is what is expected.
        let (r, _) = frame_both(&big[..1 << 20]);
        assert!(
            matches!(r, Err(GribError::Truncated { expected, .. }) if expected == big.len() as u64),
            "{r:?}"
        );
    }

    #[test]
    fn eccodes_large_grib1_encoding_is_framed() {
        // ecCodes itself encodes a GRIB1 field over 8 MiB: 3 million 24-bit values.
        let mut h = super::super::handle::Handle::from_sample("GRIB1").unwrap();
        h.set_long("Ni", 2000).unwrap();
        h.set_long("Nj", 1500).unwrap();
        h.set_long("bitsPerValue", 24).unwrap();
        let values: Vec<f64> = (0..3_000_000).map(|i| f64::from(i % 1000)).collect();
        h.set_doubles("values", &values).unwrap();
        let msg = h.message().unwrap();
        assert!(msg.len() > 8 << 20);
        assert_ne!(msg[4] & 0x80, 0, "not in the large-message coding");
        let mut data = padded(msg.clone());
        data.extend(padded(fake1(5)));
        let (msgs, _) = frame_both(&data);
        let msgs = msgs.unwrap();
        assert_eq!(msgs.len(), 2);
        assert_eq!(msgs[0].bytes, msg);
        assert!(crate::grib::mars_keys(&msgs[0].bytes).is_ok());
    }

    #[test]
    fn errors_say_where() {
        // Data before the first message is refused, as FDB5 refuses it.
        let mut data = b"junkjunk".to_vec();
        data.extend(fake2(10));
        let e = read_all(&data).unwrap_err();
        assert_eq!(
            e.to_string(),
            "t: 8 bytes of non-GRIB data at offset 0, before message 1"
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
