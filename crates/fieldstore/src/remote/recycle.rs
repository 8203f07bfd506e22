//! Field buffers kept for the next field to land in once their field is freed (wiped, purged,
//! or stored elsewhere), instead of handed back to the kernel.
//!
//! Why: a server receiving into fresh memory pays a page fault and the kernel's zeroing for
//! every 4 KiB of every field. Measured on the bench machine (docs/exchange-performance.md),
//! receiving into fresh pages ran at a third of the socket copy's speed: most of an exchange
//! server's time. A memory store frees whole cycles at once (retention), just before the next
//! cycle's fields arrive: exactly the buffers those need.
//!
//! Bounded: the buffers kept add up to at most `limit` bytes; a buffer freed when they are at
//! the limit replaces the ones kept longest (so a server whose fields change size does not keep
//! buffers of the old size for ever), and one larger than the limit goes back to the allocator.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;

/// Freed field buffers by their initialised length.
pub(crate) struct Recycler {
    limit: u64,
    shelf: Mutex<Shelf>,
}

#[derive(Default)]
struct Shelf {
    held: u64,
    /// Each with the order it was given in (oldest first within a length).
    by_len: BTreeMap<usize, Vec<(u64, Vec<u8>)>>,
    given: u64,
}

impl Shelf {
    /// Drops the buffer kept longest.
    fn evict_oldest(&mut self) {
        let oldest = self
            .by_len
            .iter()
            .filter_map(|(len, list)| list.first().map(|(seq, _)| (*seq, *len)))
            .min();
        let Some((_, len)) = oldest else {
            return;
        };
        if let Some(list) = self.by_len.get_mut(&len) {
            let (_, buf) = list.remove(0);
            self.held -= buf.capacity() as u64;
            if list.is_empty() {
                self.by_len.remove(&len);
            }
        }
    }
}

impl Recycler {
    pub(crate) fn new(limit: u64) -> Arc<Recycler> {
        Arc::new(Recycler {
            limit,
            shelf: Mutex::new(Shelf::default()),
        })
    }

    /// A kept buffer with at least `n` initialised bytes and at most twice that (so a small
    /// field does not pin a large buffer), if there is one.
    pub(crate) fn take(&self, n: usize) -> Option<Vec<u8>> {
        let mut shelf = self.shelf.lock().ok()?;
        let (&len, _) = shelf.by_len.range(n..=n.saturating_mul(2)).next()?;
        let list = shelf.by_len.get_mut(&len)?;
        let (_, buf) = list.pop()?;
        if list.is_empty() {
            shelf.by_len.remove(&len);
        }
        shelf.held -= buf.capacity() as u64;
        Some(buf)
    }

    fn give(&self, buf: Vec<u8>) {
        let Ok(mut shelf) = self.shelf.lock() else {
            return;
        };
        let size = buf.capacity() as u64;
        if buf.is_empty() || size > self.limit {
            return;
        }
        while shelf.held + size > self.limit && shelf.held > 0 {
            shelf.evict_oldest();
        }
        shelf.held += size;
        shelf.given += 1;
        let seq = shelf.given;
        shelf.by_len.entry(buf.len()).or_default().push((seq, buf));
    }

    /// Bytes kept for reuse now.
    #[cfg(test)]
    pub(crate) fn held(&self) -> u64 {
        self.shelf.lock().map(|s| s.held).unwrap_or(0)
    }

    /// `buf[..len]` as shared bytes; `buf` comes back here when the last of them is dropped.
    pub(crate) fn share(self: &Arc<Self>, buf: Vec<u8>, len: usize) -> Bytes {
        let len = len.min(buf.len());
        Bytes::from_owner(Lent {
            buf,
            len,
            home: self.clone(),
        })
    }
}

/// A buffer lent out as a field's bytes.
struct Lent {
    buf: Vec<u8>,
    len: usize,
    home: Arc<Recycler>,
}

impl AsRef<[u8]> for Lent {
    fn as_ref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl Drop for Lent {
    fn drop(&mut self) {
        self.home.give(std::mem::take(&mut self.buf));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freed_field_buffer_is_lent_again_within_the_limit() {
        let r = Recycler::new(3 << 20);
        let a = r.share(vec![7u8; 2 << 20], 2 << 20);
        let b = r.share(vec![8u8; 2 << 20], 1000);
        assert_eq!(b.len(), 1000);
        assert_eq!(r.held(), 0);
        drop(a);
        assert_eq!(r.held(), 2 << 20);
        // Too small, or more than twice as large as asked for: not lent.
        assert!(r.take((2 << 20) + 1).is_none());
        assert!(r.take(1 << 19).is_none());
        let again = r.take(1 << 20).unwrap();
        assert_eq!(again.len(), 2 << 20);
        assert_eq!(r.held(), 0);
        // Larger than the whole limit: handed back to the allocator.
        drop(r.share(vec![1u8; 4 << 20], 10));
        assert_eq!(r.held(), 0);
        drop(b);
    }

    #[test]
    fn at_the_limit_the_buffers_kept_longest_make_room() {
        let r = Recycler::new(3 << 20);
        let old: Vec<Bytes> = (0..3)
            .map(|_| r.share(vec![1u8; 1 << 20], 1 << 20))
            .collect();
        drop(old);
        assert_eq!(r.held(), 3 << 20);
        // Fields change size: the new size's buffers replace the old ones.
        drop(r.share(vec![2u8; 2 << 20], 2 << 20));
        assert_eq!(r.held(), 3 << 20);
        assert_eq!(r.take(2 << 20).map(|b| b[0]), Some(2));
        assert!(r.take(1 << 20).is_some());
        assert!(r.take(1 << 20).is_none());
    }

    #[test]
    fn a_slice_keeps_the_buffer_lent_until_it_goes_too() {
        let r = Recycler::new(1 << 30);
        let whole = r.share(vec![1u8; 4096], 4096);
        let part = whole.slice(10..20);
        drop(whole);
        assert_eq!(r.held(), 0);
        assert_eq!(&part[..], &[1u8; 10]);
        drop(part);
        assert_eq!(r.held(), 4096);
    }
}
