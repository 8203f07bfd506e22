//! Reading until a buffer is full, for the readers (files, pipes, sockets) that hand out less
//! than asked.

use std::io::{ErrorKind, Read, Result};

/// Reads until `buf` is full or the input ends; how many bytes it holds. Unlike `read_exact`, a
/// short input is not an error: the caller says what a short read means.
pub fn read_full<R: Read + ?Sized>(r: &mut R, buf: &mut [u8]) -> Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(n)
}
