//! The compact, versioned byte encoding of [`ExtractInfo`] (layout in `docs/extraction.md`):
//! a version byte, fixed fields, then LEB128 varints (signed ones zigzagged); checkpoints and
//! RSI offsets as deltas. Decoding checks every count against the bytes left before allocating.

use super::error::ExtractError;
use super::info::{BitmapInfo, CcsdsInfo, ExtractInfo, Packing, CHECKPOINT_INTERVAL};

/// The encoding's version (the first byte).
pub const VERSION: u8 = 1;

const FLAG_BITMAP: u8 = 1;
const FLAG_MD5: u8 = 2;

fn put(out: &mut Vec<u8>, mut v: u64) {
    loop {
        let b = (v & 0x7f) as u8;
        v >>= 7;
        if v == 0 {
            out.push(b);
            return;
        }
        out.push(b | 0x80);
    }
}

fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

impl ExtractInfo {
    /// The encoding (a few dozen bytes, plus about 2 bytes per 4096 points of a bitmap and per
    /// CCSDS RSI).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64);
        out.push(VERSION);
        out.push(self.edition);
        out.push(match &self.packing {
            Packing::Unsupported => 0,
            Packing::Simple => 1,
            Packing::Ccsds(_) => 2,
            Packing::Ieee { .. } => 3,
            Packing::Constant => 4,
        });
        out.push(self.bits_per_value);
        let flags = if self.bitmap.is_some() {
            FLAG_BITMAP
        } else {
            0
        } | if self.md5_grid_section.is_some() {
            FLAG_MD5
        } else {
            0
        };
        out.push(flags);
        out.extend_from_slice(&self.reference_value.to_bits().to_le_bytes());
        put(&mut out, zigzag(i64::from(self.binary_scale_factor)));
        put(&mut out, zigzag(i64::from(self.decimal_scale_factor)));
        for v in [
            self.offset_before_data,
            self.offset_after_data,
            self.number_of_data_points,
            self.number_of_values,
            self.total_length,
        ] {
            put(&mut out, v);
        }
        if let Some(md5) = &self.md5_grid_section {
            out.extend_from_slice(md5);
        }
        if let Some(b) = &self.bitmap {
            put(&mut out, b.offset);
            let mut prev = 0;
            for c in &b.checkpoints {
                put(&mut out, c.saturating_sub(prev));
                prev = *c;
            }
        }
        match &self.packing {
            Packing::Ccsds(c) => {
                put(&mut out, u64::from(c.flags));
                put(&mut out, u64::from(c.block_size));
                put(&mut out, u64::from(c.rsi));
                let mut prev = 0;
                for o in &c.offsets {
                    put(&mut out, o.saturating_sub(prev));
                    prev = *o;
                }
            }
            Packing::Ieee { bytes } => out.push(*bytes),
            _ => {}
        }
        out
    }

    /// Decodes [`ExtractInfo::encode`]'s bytes; hostile bytes give an error, never a panic or
    /// an allocation beyond their size.
    pub fn decode(bytes: &[u8]) -> Result<ExtractInfo, ExtractError> {
        let mut r = Reader { bytes, pos: 0 };
        let version = r.byte()?;
        if version != VERSION {
            return Err(r.err(format!("version {version}, this build reads {VERSION}")));
        }
        let edition = r.byte()?;
        if !matches!(edition, 1 | 2) {
            return Err(r.err(format!("edition {edition}")));
        }
        let tag = r.byte()?;
        let bits_per_value = r.byte()?;
        let flags = r.byte()?;
        let reference_value = f64::from_bits(u64::from_le_bytes(r.array()?));
        let binary_scale_factor = r.int32()?;
        let decimal_scale_factor = r.int32()?;
        let offset_before_data = r.varint()?;
        let offset_after_data = r.varint()?;
        let number_of_data_points = r.varint()?;
        let number_of_values = r.varint()?;
        let total_length = r.varint()?;
        if offset_before_data > offset_after_data || offset_after_data > total_length {
            return Err(r.err(format!(
                "data at {offset_before_data}..{offset_after_data} in a message of {total_length} bytes"
            )));
        }
        let md5_grid_section = if flags & FLAG_MD5 != 0 {
            Some(r.array()?)
        } else {
            None
        };
        let bitmap = if flags & FLAG_BITMAP != 0 {
            let offset = r.varint()?;
            if offset.saturating_add(number_of_data_points.div_ceil(8)) > total_length {
                return Err(r.err("the bitmap runs past the message"));
            }
            let count = number_of_data_points.div_ceil(CHECKPOINT_INTERVAL) + 1;
            let checkpoints = r.deltas(count, Some(CHECKPOINT_INTERVAL))?;
            if checkpoints.first() != Some(&0) {
                return Err(r.err("the first checkpoint is not 0"));
            }
            Some(BitmapInfo {
                offset,
                checkpoints,
            })
        } else {
            None
        };
        let packing = match tag {
            0 => Packing::Unsupported,
            1 if (1..=32).contains(&bits_per_value) => Packing::Simple,
            2 if (1..=32).contains(&bits_per_value) => {
                let flags = r.small()?;
                let block_size = r.small()?;
                let rsi = r.small()?;
                // GRIB codes the block size in an octet; libaec allows RSIs up to 4096 blocks.
                if !super::aec::valid_params(u32::from(bits_per_value), block_size, rsi) {
                    return Err(r.err(format!("CCSDS block size {block_size}, RSI {rsi}")));
                }
                let per = u64::from(block_size) * u64::from(rsi);
                let offsets = r.deltas(number_of_values.div_ceil(per), None)?;
                Packing::Ccsds(CcsdsInfo {
                    flags,
                    block_size,
                    rsi,
                    offsets,
                })
            }
            3 => match r.byte()? {
                b @ (4 | 8) => Packing::Ieee { bytes: b },
                b => return Err(r.err(format!("IEEE values of {b} bytes"))),
            },
            4 => Packing::Constant,
            t => return Err(r.err(format!("packing {t} with {bits_per_value} bits per value"))),
        };
        if r.pos != bytes.len() {
            return Err(r.err(format!("{} bytes after the end", bytes.len() - r.pos)));
        }
        Ok(ExtractInfo {
            edition,
            packing,
            reference_value,
            binary_scale_factor,
            decimal_scale_factor,
            bits_per_value,
            offset_before_data,
            offset_after_data,
            bitmap,
            number_of_data_points,
            number_of_values,
            total_length,
            md5_grid_section,
        })
    }
}

struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn err(&self, reason: impl Into<String>) -> ExtractError {
        ExtractError::Encoding {
            offset: self.pos as u64,
            reason: reason.into(),
        }
    }

    fn byte(&mut self) -> Result<u8, ExtractError> {
        let b = *self
            .bytes
            .get(self.pos)
            .ok_or_else(|| self.err("cut short"))?;
        self.pos += 1;
        Ok(b)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], ExtractError> {
        let b = self
            .bytes
            .get(self.pos..self.pos + N)
            .ok_or_else(|| self.err("cut short"))?;
        self.pos += N;
        b.try_into().map_err(|_| self.err("cut short"))
    }

    fn varint(&mut self) -> Result<u64, ExtractError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            let part = u64::from(b & 0x7f);
            if shift == 63 && part > 1 {
                return Err(self.err("varint overflows 64 bits"));
            }
            v |= part << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(self.err("varint longer than 10 bytes"))
    }

    fn int32(&mut self) -> Result<i32, ExtractError> {
        let z = self.varint()?;
        let v = ((z >> 1) as i64) ^ -((z & 1) as i64);
        i32::try_from(v).map_err(|_| self.err(format!("{v} is not a 32-bit scale factor")))
    }

    fn small(&mut self) -> Result<u32, ExtractError> {
        let v = self.varint()?;
        u32::try_from(v).map_err(|_| self.err(format!("{v} out of range")))
    }

    /// `count` running sums of deltas (each at most `max`); each delta takes at least a byte, so
    /// a count beyond the bytes left is refused before anything is allocated.
    fn deltas(&mut self, count: u64, max: Option<u64>) -> Result<Vec<u64>, ExtractError> {
        if count > (self.bytes.len() - self.pos) as u64 {
            return Err(self.err(format!("{count} entries announced, fewer bytes left")));
        }
        let mut out = Vec::with_capacity(count as usize);
        let mut sum = 0u64;
        for _ in 0..count {
            let d = self.varint()?;
            if max.is_some_and(|m| d > m) {
                return Err(self.err(format!("a checkpoint step of {d}")));
            }
            sum = sum
                .checked_add(d)
                .ok_or_else(|| self.err("offsets overflow"))?;
            out.push(sum);
        }
        Ok(out)
    }
}
