//! Reading a large payload straight into the buffer that keeps it: a field a server stores, or
//! one a subscriber is handed, lands where it will live, summed as it arrives.
//!
//! Why not `Read::read_exact` into a `vec![0; n]`: that zeroes every byte before the socket copy
//! overwrites it (a whole extra pass over memory per field), and reading into a reused buffer
//! costs a copy out of it afterwards. Here the socket copies into the vector's spare capacity.

use std::io::{self, BufRead, BufReader, Read};
use std::mem::MaybeUninit;
use std::sync::Arc;

use bytes::Bytes;

use super::error::RemoteError;
use super::recycle::Recycler;
use crate::checksum::Crc32c;

/// A byte stream that can fill memory not yet initialised (a socket: `recv` writes it).
pub(crate) trait ReadUninit: Read {
    /// Reads up to `buf.len()` bytes into `buf`; returns how many it wrote, all initialised.
    fn read_uninit(&mut self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize>;
}

/// At most this much is read (and summed) at a time, so the checksum reads bytes still in the
/// CPU's cache from the socket copy.
const PIECE: usize = 1 << 20;

/// Reserved up front at most: a larger announced length grows the buffer as bytes arrive, so a
/// header alone never makes the reader allocate more than this.
const RESERVE_UP_TO: usize = 64 << 20;

/// Reads exactly `n` bytes of `r` into a new vector of exactly that size, summing them as they
/// arrive; returns their own checksum (a stored field's) and adds them to the frame's `crc`. What `r` buffered
/// already is copied out of it; the rest goes from the socket into the vector.
pub(crate) fn read_new<R: ReadUninit>(
    r: &mut BufReader<R>,
    n: usize,
    crc: &mut Crc32c,
) -> Result<(Vec<u8>, u32), RemoteError> {
    let mut buf: Vec<u8> = Vec::new();
    let mut own = Crc32c::new();
    while buf.len() < n {
        let had = buf.len();
        if buf.capacity() == had {
            let more = if had == 0 {
                n.min(RESERVE_UP_TO)
            } else {
                (n - had).min(had)
            };
            buf.try_reserve_exact(more).map_err(|e| {
                RemoteError::Io(io::Error::new(
                    io::ErrorKind::OutOfMemory,
                    format!("no memory for a payload of {n} bytes: {e}"),
                ))
            })?;
        }
        let want = (buf.capacity() - had).min(n - had).min(PIECE);
        if r.buffer().is_empty() && want >= r.capacity() {
            let spare = &mut buf.spare_capacity_mut()[..want];
            let got = match r.get_mut().read_uninit(spare) {
                Ok(0) => return Err(RemoteError::Truncated),
                Ok(got) => got.min(want),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(RemoteError::Io(e)),
            };
            // SAFETY: `read_uninit` initialised the first `got` bytes of the spare capacity.
            unsafe { buf.set_len(had + got) };
        } else {
            let available = match r.fill_buf() {
                Ok([]) => return Err(RemoteError::Truncated),
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(RemoteError::Io(e)),
            };
            let take = available.len().min(n - had);
            buf.extend_from_slice(&available[..take]);
            r.consume(take);
        }
        own.update(&buf[had..]);
    }
    let own = own.value();
    extend(crc, own, n);
    Ok((buf, own))
}

/// Reads exactly `n` bytes of `r` as shared bytes, into a buffer `recycler` kept if it has one
/// (no page faults, no zeroing by the kernel), else into a new one; the buffer goes back to
/// `recycler` when the bytes are dropped. Also returns their checksum, as `read_new` does.
pub(crate) fn read_shared<R: ReadUninit>(
    r: &mut BufReader<R>,
    n: usize,
    crc: &mut Crc32c,
    recycler: &Arc<Recycler>,
) -> Result<(Bytes, u32), RemoteError> {
    let (buf, own) = match recycler.take(n) {
        Some(mut buf) => {
            let own = read_into(r, &mut buf[..n], crc)?;
            (buf, own)
        }
        None => read_new(r, n, crc)?,
    };
    Ok((recycler.share(buf, n), own))
}

/// Fills `buf` from `r` (straight from the socket when `r` has nothing buffered), adding the
/// bytes to `crc` as they arrive; returns their own checksum.
fn read_into<R: Read>(
    r: &mut BufReader<R>,
    buf: &mut [u8],
    crc: &mut Crc32c,
) -> Result<u32, RemoteError> {
    let mut own = Crc32c::new();
    let mut got = 0;
    while got < buf.len() {
        let upto = buf.len().min(got + PIECE);
        match r.read(&mut buf[got..upto]) {
            Ok(0) => return Err(RemoteError::Truncated),
            Ok(k) => {
                own.update(&buf[got..got + k]);
                got += k;
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(RemoteError::Io(e)),
        }
    }
    let own = own.value();
    extend(crc, own, buf.len());
    Ok(own)
}

/// Adds `n` bytes whose checksum is `own` to `crc`: the bytes are summed once, for the field,
/// and the frame's checksum is derived from that.
fn extend(crc: &mut Crc32c, own: u32, n: usize) {
    *crc = Crc32c::resume(crate::checksum::crc32c_combine(crc.value(), own, n as u64));
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Hands out its bytes a few at a time, as a socket does.
    struct Trickle(Vec<u8>, usize, usize);

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let n = buf.len().min(self.2).min(self.0.len() - self.1);
            buf[..n].copy_from_slice(&self.0[self.1..self.1 + n]);
            self.1 += n;
            Ok(n)
        }
    }

    impl ReadUninit for Trickle {
        fn read_uninit(&mut self, buf: &mut [MaybeUninit<u8>]) -> io::Result<usize> {
            let n = buf.len().min(self.2).min(self.0.len() - self.1);
            for (d, s) in buf[..n].iter_mut().zip(&self.0[self.1..self.1 + n]) {
                d.write(*s);
            }
            self.1 += n;
            Ok(n)
        }
    }

    #[test]
    fn bytes_buffered_and_read_directly_land_whole_and_summed() {
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i * 7 % 251) as u8).collect();
        for (step, capacity) in [(1 << 20, 1024), (5000, 1 << 16), (3 << 20, 64)] {
            let mut r = BufReader::with_capacity(capacity, Trickle(data.clone(), 0, step));
            // Something buffered first, as after a frame header.
            let mut head = [0u8; 10];
            r.read_exact(&mut head).unwrap();
            let mut frame = Crc32c::new();
            let (got, own) = read_new(&mut r, data.len() - 10 - 5, &mut frame).unwrap();
            assert_eq!(got, &data[10..data.len() - 5]);
            assert_eq!(own, crate::checksum::crc32c(&got));
            assert_eq!(frame.value(), own);
            // The rest stays for the next read.
            let mut tail = Vec::new();
            r.read_to_end(&mut tail).unwrap();
            assert_eq!(tail, &data[data.len() - 5..]);
        }
    }

    #[test]
    fn a_field_lands_in_a_recycled_buffer_when_one_is_kept() {
        let data: Vec<u8> = (0..(3u32 << 20)).map(|i| (i % 253) as u8).collect();
        let recycler = Recycler::new(1 << 30);
        let mut r = BufReader::with_capacity(4096, Trickle(data.clone(), 0, 100_000));
        let (first, own) = read_shared(&mut r, 1 << 20, &mut Crc32c::new(), &recycler).unwrap();
        assert_eq!(&first[..], &data[..1 << 20]);
        assert_eq!(own, crate::checksum::crc32c(&first));
        let at = first.as_ptr();
        drop(first);
        // The same memory again, holding the next bytes (nothing of the old field shows).
        let mut frame = Crc32c::new();
        let (second, own) = read_shared(&mut r, (1 << 20) - 7, &mut frame, &recycler).unwrap();
        assert_eq!(second.as_ptr(), at);
        assert_eq!(&second[..], &data[1 << 20..(2 << 20) - 7]);
        assert_eq!(own, crate::checksum::crc32c(&second));
        assert_eq!(frame.value(), own);
    }

    #[test]
    fn a_huge_announced_length_reserves_only_what_arrives() {
        let mut r = BufReader::with_capacity(64, Trickle(vec![1; 100], 0, 7));
        let e = read_new(&mut r, 1 << 40, &mut Crc32c::new()).unwrap_err();
        assert!(matches!(e, RemoteError::Truncated), "{e}");
    }

    #[test]
    fn a_stream_that_ends_early_is_truncated() {
        let mut r = BufReader::with_capacity(64, Trickle(vec![1; 100], 0, 7));
        let e = read_new(&mut r, 101, &mut Crc32c::new()).unwrap_err();
        assert!(matches!(e, RemoteError::Truncated), "{e}");
    }
}
