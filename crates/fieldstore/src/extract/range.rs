//! Two-phase extraction: `plan` (which bytes of the message the ranges need) and `extract`
//! (decode from those bytes), so the same code serves a mapped file and ranged reads of a
//! remote object.

use std::ops::Range;

use super::aec;
use super::error::ExtractError;
use super::info::{ExtractInfo, Packing, CHECKPOINT_INTERVAL};
use super::simple::{self, Scale};
use crate::grib::Decoded;

/// The values of one requested range, as GribJump gives them: NaN where the bitmap says
/// missing; `mask` bit `j` of word `i` (least significant first) set when point `i*64 + j` of
/// the range is present.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RangeValues {
    pub values: Vec<f64>,
    pub mask: Vec<u64>,
}

/// A fetched piece of a message: its byte range (from the message start) and its bytes.
pub type Fetched<'a> = (Range<u64>, &'a [u8]);

/// Byte ranges closer than this are read as one.
const COALESCE_GAP: u64 = 4096;

/// What one requested range needs: the bitmap bytes and the coded values it may touch.
struct Need {
    /// Bitmap bytes, relative to the message.
    bitmap: Option<Range<u64>>,
    /// Bounds of the coded values (exact without a bitmap; checkpoint-bounded with one).
    coded: Range<u64>,
}

impl ExtractInfo {
    /// The byte ranges of the message (from its start, sorted, coalesced when close) that
    /// [`ExtractInfo::extract`] needs for these grid-point ranges.
    pub fn plan(&self, ranges: &[Range<u64>]) -> Result<Vec<Range<u64>>, ExtractError> {
        self.check_ranges(ranges)?;
        if self.packing == Packing::Unsupported {
            return Ok(if ranges.is_empty() {
                Vec::new()
            } else {
                vec![0..self.total_length]
            });
        }
        let mut bytes = Vec::new();
        for r in ranges {
            let need = self.need(r)?;
            bytes.extend(need.bitmap);
            if let Some(d) = self.data_bytes(&need.coded)? {
                bytes.push(d);
            }
        }
        bytes.retain(|r| r.start < r.end);
        bytes.sort_by_key(|r| r.start);
        let mut out: Vec<Range<u64>> = Vec::with_capacity(bytes.len());
        for r in bytes {
            match out.last_mut() {
                Some(last) if r.start <= last.end.saturating_add(COALESCE_GAP) => {
                    last.end = last.end.max(r.end)
                }
                _ => out.push(r),
            }
        }
        Ok(out)
    }

    /// Decodes the ranges from the fetched pieces of the message (each range the plan asked for
    /// must lie within one piece).
    pub fn extract(
        &self,
        ranges: &[Range<u64>],
        fetched: &[Fetched<'_>],
    ) -> Result<Vec<RangeValues>, ExtractError> {
        self.check_ranges(ranges)?;
        if self.packing == Packing::Unsupported {
            if ranges.is_empty() {
                return Ok(Vec::new());
            }
            let message = piece(fetched, 0..self.total_length)?;
            return full_decode(message, ranges);
        }
        let scale = Scale::new(
            self.reference_value,
            self.binary_scale_factor,
            self.decimal_scale_factor,
        );
        let mut out = Vec::with_capacity(ranges.len());
        for r in ranges {
            let need = self.need(r)?;
            let n = (r.end - r.start) as usize;
            // The range's bitmap bits (from the checkpoint before it) and its first coded value.
            let (bits, first, base) = match (&self.bitmap, &need.bitmap) {
                (Some(b), Some(bytes)) => {
                    let k = r.start / CHECKPOINT_INTERVAL;
                    let bits = piece(fetched, bytes.clone())?;
                    let base = k * CHECKPOINT_INTERVAL;
                    let before = simple::set_bits(bits, 0, r.start - base);
                    (Some(bits), b.checkpoints[k as usize] + before, base)
                }
                _ => (None, r.start, 0),
            };
            let present = match bits {
                Some(bits) => simple::set_bits(bits, r.start - base, n as u64),
                None => n as u64,
            };
            let coded = first..first.saturating_add(present);
            if coded.end > need.coded.end || coded.end > self.number_of_values {
                return Err(ExtractError::corrupt(
                    self.bitmap.as_ref().map_or(0, |b| b.offset),
                    format!(
                        "the bitmap marks more points present than the {} coded values",
                        self.number_of_values
                    ),
                ));
            }
            let packed = self.decode_coded(&coded, &scale, fetched)?;
            let mut values = Vec::with_capacity(n);
            let mut mask = vec![0u64; n.div_ceil(64)];
            let mut next = packed.into_iter();
            for i in 0..n {
                let here = match bits {
                    Some(bits) => simple::bit(bits, r.start - base + i as u64),
                    None => true,
                };
                if here {
                    let v = next.next().unwrap_or(f64::NAN);
                    values.push(v);
                    // A coded value can decode to NaN (a hostile scale: 0 x 2^4102): missing,
                    // as ecCodes' decode of it reads.
                    if !v.is_nan() {
                        mask[i / 64] |= 1u64 << (i % 64);
                    }
                } else {
                    values.push(f64::NAN);
                }
            }
            out.push(RangeValues { values, mask });
        }
        Ok(out)
    }

    /// Ranges must be non-empty, sorted, non-overlapping and within the field's points.
    fn check_ranges(&self, ranges: &[Range<u64>]) -> Result<(), ExtractError> {
        let mut prev_end = 0u64;
        for (index, r) in ranges.iter().enumerate() {
            let bad = |reason: String| ExtractError::BadRange {
                index,
                range: r.clone(),
                reason,
            };
            if r.start >= r.end {
                return Err(bad(
                    "empty or reversed: a range is lo..hi with lo < hi".into()
                ));
            }
            if r.end > self.number_of_data_points {
                return Err(bad(format!(
                    "beyond the field's {} points",
                    self.number_of_data_points
                )));
            }
            if index > 0 && r.start < prev_end {
                return Err(bad(format!(
                    "ranges must be sorted and must not overlap: the previous one ends at {prev_end}"
                )));
            }
            prev_end = r.end;
        }
        Ok(())
    }

    fn need(&self, r: &Range<u64>) -> Result<Need, ExtractError> {
        let Some(b) = &self.bitmap else {
            return Ok(Need {
                bitmap: None,
                coded: r.clone(),
            });
        };
        let k0 = r.start / CHECKPOINT_INTERVAL;
        let k1 = r.end.div_ceil(CHECKPOINT_INTERVAL);
        let cp = |k: u64| {
            b.checkpoints.get(k as usize).copied().ok_or_else(|| {
                ExtractError::corrupt(b.offset, "the bitmap checkpoints do not cover the points")
            })
        };
        let coded = cp(k0)?..cp(k1)?;
        let bitmap = b.offset + k0 * CHECKPOINT_INTERVAL / 8..b.offset + r.end.div_ceil(8);
        Ok(Need {
            bitmap: Some(bitmap),
            coded,
        })
    }

    /// The bytes (from the message start) holding coded values `coded`, `None` when none.
    fn data_bytes(&self, coded: &Range<u64>) -> Result<Option<Range<u64>>, ExtractError> {
        if coded.start >= coded.end {
            return Ok(None);
        }
        let d = self.offset_before_data;
        // Saturating: decoded information may announce anything; the check below refuses it.
        let r = match &self.packing {
            Packing::Constant | Packing::Unsupported => return Ok(None),
            Packing::Simple => {
                let bits = u64::from(self.bits_per_value);
                d.saturating_add(coded.start.saturating_mul(bits) / 8)
                    ..d.saturating_add(coded.end.saturating_mul(bits).div_ceil(8))
            }
            Packing::Ieee { bytes } => {
                let w = u64::from(*bytes);
                d.saturating_add(coded.start.saturating_mul(w))
                    ..d.saturating_add(coded.end.saturating_mul(w))
            }
            Packing::Ccsds(c) => {
                let per = c.params(self.bits_per_value).rsi_samples().max(1);
                let first = coded.start / per;
                let next = coded.end.div_ceil(per);
                let start = usize::try_from(first)
                    .ok()
                    .and_then(|f| c.offsets.get(f).copied())
                    .ok_or_else(|| {
                        ExtractError::corrupt(d, "the RSI offsets do not cover the values")
                    })?;
                let end = match usize::try_from(next).ok().and_then(|n| c.offsets.get(n)) {
                    Some(o) => d.saturating_add(o.div_ceil(8)),
                    None => self.offset_after_data,
                };
                d.saturating_add(start / 8)..end
            }
        };
        if r.end > self.offset_after_data || r.start > r.end {
            return Err(ExtractError::corrupt(
                d,
                format!(
                    "coded values {}..{} lie beyond the data section (ends at byte {})",
                    coded.start, coded.end, self.offset_after_data
                ),
            ));
        }
        Ok(Some(r))
    }

    /// Decodes coded values `coded` from the fetched pieces.
    fn decode_coded(
        &self,
        coded: &Range<u64>,
        scale: &Scale,
        fetched: &[Fetched<'_>],
    ) -> Result<Vec<f64>, ExtractError> {
        let n = (coded.end - coded.start) as usize;
        let mut out = Vec::with_capacity(n);
        if n == 0 {
            return Ok(out);
        }
        if self.packing == Packing::Constant {
            out.resize(n, self.reference_value);
            return Ok(out);
        }
        let Some(bytes_range) = self.data_bytes(coded)? else {
            return Ok(out);
        };
        let bytes = piece(fetched, bytes_range.clone())?;
        match &self.packing {
            Packing::Simple => {
                let skip = coded.start * u64::from(self.bits_per_value) % 8;
                simple::unpack(bytes, skip, self.bits_per_value, n, scale, &mut out)
            }
            Packing::Ieee { bytes: w } => simple::ieee(bytes, usize::from(*w), n, &mut out),
            Packing::Ccsds(c) => {
                let p = c.params(self.bits_per_value);
                let per = p.rsi_samples();
                let first = coded.start / per;
                let skip_bits = (c.offsets[first as usize] % 8) as u8;
                let width = p.sample_bytes();
                let from = (coded.start - first * per) as usize;
                let mut raw = vec![0u8; (from + n) * width];
                aec::decode_from_rsi(p, bytes, skip_bits, &mut raw)
                    .map_err(|e| with_offset(e, bytes_range.start))?;
                simple::samples(&raw[from * width..], width, n, scale, &mut out);
            }
            Packing::Constant | Packing::Unsupported => {}
        }
        if out.len() != n {
            return Err(ExtractError::corrupt(
                bytes_range.start,
                format!("{} of {n} values decoded", out.len()),
            ));
        }
        Ok(out)
    }
}

fn with_offset(e: ExtractError, base: u64) -> ExtractError {
    match e {
        ExtractError::Corrupt { offset, reason } => ExtractError::Corrupt {
            offset: offset + base,
            reason,
        },
        other => other,
    }
}

/// The bytes `want` (from the message start) out of the fetched piece that holds them.
fn piece<'a>(fetched: &[Fetched<'a>], want: Range<u64>) -> Result<&'a [u8], ExtractError> {
    for (r, bytes) in fetched {
        if r.start <= want.start && want.end <= r.end && (r.end - r.start) as usize == bytes.len() {
            let from = (want.start - r.start) as usize;
            let to = (want.end - r.start) as usize;
            if let Some(b) = bytes.get(from..to) {
                return Ok(b);
            }
        }
    }
    Err(ExtractError::NotFetched { range: want })
}

/// The ecCodes fallback: decode everything, cut out the ranges.
fn full_decode(message: &[u8], ranges: &[Range<u64>]) -> Result<Vec<RangeValues>, ExtractError> {
    let values = Decoded::new(message)?.values()?;
    ranges
        .iter()
        .enumerate()
        .map(|(index, r)| {
            let v = values
                .get(r.start as usize..r.end as usize)
                .ok_or_else(|| ExtractError::BadRange {
                    index,
                    range: r.clone(),
                    reason: format!("beyond the {} values ecCodes decodes", values.len()),
                })?;
            let mut mask = vec![0u64; v.len().div_ceil(64)];
            for (i, x) in v.iter().enumerate() {
                if !x.is_nan() {
                    mask[i / 64] |= 1 << (i % 64);
                }
            }
            Ok(RangeValues {
                values: v.to_vec(),
                mask,
            })
        })
        .collect()
}

/// Extracts the ranges from one message in memory (the ecCodes full decode for packings
/// without a range decoder).
pub fn extract_message(
    message: &[u8],
    ranges: &[Range<u64>],
) -> Result<Vec<RangeValues>, ExtractError> {
    let info = ExtractInfo::build(message)?;
    let len = info.total_length;
    let whole = message
        .get(..len as usize)
        .ok_or_else(|| ExtractError::corrupt(0, "shorter than its announced length"))?;
    info.extract(ranges, &[(0..len, whole)])
}
