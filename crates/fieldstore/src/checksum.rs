//! CRC-32C (Castagnoli), the checksum of the on-disk formats and of every wire frame.
//!
//! Backed by `crc-fast`, which folds with VPCLMULQDQ/AVX-512 where the CPU has it: on data
//! already in cache it runs about 4x faster than SSE4.2's crc32 instruction, and the archive
//! path checksums every byte on both ends of a connection.

use crc_fast::{CrcAlgorithm, Digest};

/// The checksum of `data`.
pub fn crc32c(data: &[u8]) -> u32 {
    crc_fast::crc32_iscsi(data)
}

/// The checksum of the bytes `crc` covered followed by `data`.
pub(crate) fn crc32c_append(crc: u32, data: &[u8]) -> u32 {
    let mut d = Crc32c::resume(crc);
    d.update(data);
    d.value()
}

/// The checksum of the bytes `crc` covered followed by `len2` bytes whose checksum is `crc2`,
/// without reading them again: a frame around a field whose checksum is known is summed over
/// its few other bytes only.
pub(crate) fn crc32c_combine(crc: u32, crc2: u32, len2: u64) -> u32 {
    crc_fast::checksum_combine(
        CrcAlgorithm::Crc32Iscsi,
        u64::from(crc),
        u64::from(crc2),
        len2,
    ) as u32
}

/// A checksum fed piece by piece, as bytes arrive.
#[derive(Clone)]
pub struct Crc32c(Digest);

impl Crc32c {
    pub fn new() -> Crc32c {
        Crc32c(Digest::new(CrcAlgorithm::Crc32Iscsi))
    }

    /// Continues from the checksum of what came before.
    pub fn resume(crc: u32) -> Crc32c {
        // The digest's state is the register before the final inversion.
        Crc32c(Digest::new_with_init_state(
            CrcAlgorithm::Crc32Iscsi,
            u64::from(crc ^ 0xFFFF_FFFF),
        ))
    }

    pub fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    pub fn value(&self) -> u32 {
        self.0.finalize() as u32
    }
}

impl Default for Crc32c {
    fn default() -> Self {
        Crc32c::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_standard_check_value() {
        // CRC-32/ISCSI's catalogued check value.
        assert_eq!(crc32c(b"123456789"), 0xe306_9283);
        assert_eq!(crc32c(b""), 0);
    }

    proptest::proptest! {
        #[test]
        fn pieces_resumes_and_whole_agree(data in proptest::collection::vec(0u8..=255, 0..5000), cut in 0usize..5000, cut2 in 0usize..5000) {
            let a = cut.min(data.len());
            let b = cut2.min(data.len()).max(a);
            let whole = crc32c(&data);
            proptest::prop_assert_eq!(crc32c_append(crc32c(&data[..a]), &data[a..]), whole);
            let rest = (data.len() - a) as u64;
            proptest::prop_assert_eq!(crc32c_combine(crc32c(&data[..a]), crc32c(&data[a..]), rest), whole);
            let mut d = Crc32c::new();
            d.update(&data[..a]);
            d.update(&data[a..b]);
            let mut resumed = Crc32c::resume(d.value());
            resumed.update(&data[b..]);
            d.update(&data[b..]);
            proptest::prop_assert_eq!(d.value(), whole);
            proptest::prop_assert_eq!(resumed.value(), whole);
        }
    }
}
