//! The part of eckit's `Stream` encoding FDB5's toc payloads use: a one-byte tag before every
//! item, big-endian 32-bit bodies. `long` and `unsigned long` are only 32 bits on the wire (FDB5
//! truncates wider values when it writes them), so offsets past 2 GiB cannot be recorded.

use std::fmt;

pub(crate) const TAG_END_STREAM: u8 = 0;
pub(crate) const TAG_START_OBJECT: u8 = 1;
pub(crate) const TAG_END_OBJECT: u8 = 2;
pub(crate) const TAG_INT: u8 = 5;
pub(crate) const TAG_LONG: u8 = 9;
pub(crate) const TAG_ULONG: u8 = 10;
pub(crate) const TAG_STRING: u8 = 15;

/// Why a payload could not be decoded, with the offset inside the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DecodeError {
    pub offset: usize,
    pub detail: String,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (payload byte {})", self.detail, self.offset)
    }
}

pub(crate) type Decoded<T> = Result<T, DecodeError>;

/// Reads items from one record's payload.
pub(crate) struct StreamReader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> StreamReader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        StreamReader { buf, pos: 0 }
    }

    pub fn position(&self) -> usize {
        self.pos
    }

    fn fail<T>(&self, at: usize, detail: impl Into<String>) -> Decoded<T> {
        Err(DecodeError {
            offset: at,
            detail: detail.into(),
        })
    }

    fn byte(&mut self) -> Decoded<u8> {
        match self.buf.get(self.pos) {
            Some(&b) => {
                self.pos += 1;
                Ok(b)
            }
            None => self.fail(self.pos, "the payload ends inside an item"),
        }
    }

    fn word(&mut self) -> Decoded<u32> {
        let Some(b) = self.buf.get(self.pos..self.pos + 4) else {
            return self.fail(self.pos, "the payload ends inside an item");
        };
        self.pos += 4;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// The next tag, with the end-of-object tags eckit lets linger before an item skipped.
    fn expect(&mut self, want: u8, what: &str) -> Decoded<()> {
        loop {
            let at = self.pos;
            let t = self.byte()?;
            if t == TAG_END_OBJECT && want != TAG_END_OBJECT {
                continue;
            }
            if t != want {
                return self.fail(at, format!("expected {what} (tag {want}), found tag {t}"));
            }
            return Ok(());
        }
    }

    pub fn string(&mut self) -> Decoded<String> {
        self.expect(TAG_STRING, "a string")?;
        let at = self.pos;
        let n = self.word()? as usize;
        let Some(b) = self.buf.get(self.pos..self.pos.saturating_add(n)) else {
            return self.fail(at, format!("a string of {n} bytes runs past the payload"));
        };
        self.pos += n;
        // FDB5 writes paths and MARS values: bytes that are not UTF-8 are kept visible.
        Ok(String::from_utf8_lossy(b).into_owned())
    }

    pub fn ulong(&mut self) -> Decoded<u64> {
        self.expect(TAG_ULONG, "an unsigned long")?;
        Ok(u64::from(self.word()?))
    }

    /// A `long`: the low 32 bits, sign-extended.
    pub fn long(&mut self) -> Decoded<i64> {
        self.expect(TAG_LONG, "a long")?;
        Ok(i64::from(self.word()? as i32))
    }

    pub fn int(&mut self) -> Decoded<i32> {
        self.expect(TAG_INT, "an int")?;
        Ok(self.word()? as i32)
    }

    pub fn start_object(&mut self) -> Decoded<()> {
        self.expect(TAG_START_OBJECT, "the start of an object")
    }

    /// Whether the next tag ends an object (or the stream); it is consumed if so.
    pub fn end_object(&mut self) -> bool {
        match self.buf.get(self.pos) {
            Some(&t) if t == TAG_END_OBJECT || t == TAG_END_STREAM => {
                self.pos += 1;
                true
            }
            None => true,
            _ => false,
        }
    }

    /// The next tag without taking it (`None` at the end of the payload).
    pub fn peek(&self) -> Option<u8> {
        self.buf.get(self.pos).copied()
    }

    /// A count of items that follow, bounded by what the payload could possibly hold, so a
    /// damaged count cannot make a reader reserve gigabytes.
    pub fn count(&mut self, item_bytes: usize) -> Decoded<usize> {
        let at = self.pos;
        let n = self.ulong()? as usize;
        let left = self.buf.len().saturating_sub(self.pos);
        if n.saturating_mul(item_bytes) > left {
            return self.fail(
                at,
                format!("a count of {n} items cannot fit in the payload"),
            );
        }
        Ok(n)
    }
}

/// Builds a payload.
#[derive(Default)]
pub(crate) struct StreamWriter {
    pub buf: Vec<u8>,
}

impl StreamWriter {
    fn word(&mut self, tag: u8, w: u32) {
        self.buf.push(tag);
        self.buf.extend_from_slice(&w.to_be_bytes());
    }

    pub fn string(&mut self, s: &str) {
        self.word(TAG_STRING, s.len() as u32);
        self.buf.extend_from_slice(s.as_bytes());
    }

    pub fn ulong(&mut self, v: u64) {
        self.word(TAG_ULONG, v as u32);
    }

    pub fn long(&mut self, v: i64) {
        self.word(TAG_LONG, v as u32);
    }

    pub fn int(&mut self, v: i32) {
        self.word(TAG_INT, v as u32);
    }

    pub fn start_object(&mut self) {
        self.buf.push(TAG_START_OBJECT);
    }

    pub fn end_object(&mut self) {
        self.buf.push(TAG_END_OBJECT);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn items_round_trip_and_lingering_object_ends_are_skipped() {
        let mut w = StreamWriter::default();
        w.string("fc:pl");
        w.long(-2);
        w.ulong(65536);
        w.int(1);
        w.end_object();
        w.string("x");
        let mut r = StreamReader::new(&w.buf);
        assert_eq!(r.string().unwrap(), "fc:pl");
        assert_eq!(r.long().unwrap(), -2);
        assert_eq!(r.ulong().unwrap(), 65536);
        assert_eq!(r.int().unwrap(), 1);
        assert_eq!(r.string().unwrap(), "x");
        assert!(r.end_object());
    }

    #[test]
    fn damage_is_an_error_at_its_offset() {
        let mut r = StreamReader::new(&[15, 0, 0, 1, 0, b'a']);
        let e = r.string().unwrap_err();
        assert_eq!(e.offset, 1);
        let mut r = StreamReader::new(&[9, 0]);
        assert!(r.long().is_err());
        let mut r = StreamReader::new(&[10, 0xff, 0xff, 0xff, 0xff]);
        assert!(r.count(1).is_err());
        let mut r = StreamReader::new(&[5, 0, 0, 0, 0]);
        assert!(r.string().unwrap_err().detail.contains("found tag 5"));
    }
}
