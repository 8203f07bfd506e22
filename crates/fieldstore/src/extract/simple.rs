//! Fixed-width values: simple packing's bit fields and IEEE floats, scaled exactly as ecCodes
//! does (`grib_decode_double_array`: `((x * 2^E) + R) * 10^-D`, in that order, with ecCodes'
//! `grib_power`).

/// `base^exponent` as ecCodes' `grib_power` computes it: repeated multiplication or division,
/// whose rounding the decoded values inherit.
pub(crate) fn grib_power(exponent: i64, base: f64) -> f64 {
    if exponent == 0 {
        return 1.0;
    }
    if exponent == 1 {
        return base;
    }
    let mut v = 1.0;
    // Bounded: beyond these the result is 0 or infinite anyway.
    let e = exponent.clamp(-2000, 2000);
    if e < 0 {
        for _ in 0..-e {
            v /= base;
        }
    } else {
        for _ in 0..e {
            v *= base;
        }
    }
    v
}

/// The scaling of one field.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Scale {
    pub reference: f64,
    pub binary: f64,
    pub decimal: f64,
}

impl Scale {
    pub fn new(reference: f64, e: i32, d: i32) -> Scale {
        Scale {
            reference,
            binary: grib_power(i64::from(e), 2.0),
            decimal: grib_power(-i64::from(d), 10.0),
        }
    }

    #[inline]
    pub fn apply(&self, x: u64) -> f64 {
        ((x as f64 * self.binary) + self.reference) * self.decimal
    }
}

/// Unpacks `n` values of `bits` (1..=32) bits starting `skip` bits into `bytes` (big-endian
/// bit order) into `out`. The caller checked `bytes` holds them.
pub(crate) fn unpack(
    bytes: &[u8],
    skip: u64,
    bits: u8,
    n: usize,
    scale: &Scale,
    out: &mut Vec<f64>,
) {
    let bits = u64::from(bits);
    let mask = (1u64 << bits) - 1;
    let mut pos = skip;
    for _ in 0..n {
        let byte = (pos / 8) as usize;
        let shift = pos % 8;
        // Up to 5 bytes hold 32 bits at any bit offset.
        let mut acc = 0u64;
        for k in 0..5 {
            acc = (acc << 8) | u64::from(bytes.get(byte + k).copied().unwrap_or(0));
        }
        let x = (acc >> (40 - shift - bits)) & mask;
        out.push(scale.apply(x));
        pos += bits;
    }
}

/// Reads `n` big-endian samples of `width` bytes (1 to 4) and scales them.
pub(crate) fn samples(bytes: &[u8], width: usize, n: usize, scale: &Scale, out: &mut Vec<f64>) {
    for s in bytes.chunks_exact(width).take(n) {
        let x = s.iter().fold(0u64, |acc, b| (acc << 8) | u64::from(*b));
        out.push(scale.apply(x));
    }
}

/// Reads `n` big-endian IEEE floats of `width` (4 or 8) bytes.
pub(crate) fn ieee(bytes: &[u8], width: usize, n: usize, out: &mut Vec<f64>) {
    for s in bytes.chunks_exact(width).take(n) {
        let v = match s.try_into() {
            Ok(b4) if width == 4 => f64::from(f32::from_be_bytes(b4)),
            _ => match <[u8; 8]>::try_from(s) {
                Ok(b8) => f64::from_be_bytes(b8),
                Err(_) => f64::NAN,
            },
        };
        out.push(v);
    }
}

/// Whether bit `i` (big-endian bit order) of `bits` is set; bits beyond the slice are clear.
#[inline]
pub(crate) fn bit(bits: &[u8], i: u64) -> bool {
    bits.get((i / 8) as usize)
        .is_some_and(|b| b & (0x80 >> (i % 8)) != 0)
}

/// Set bits among bits `from..from + n` of `bits`.
pub(crate) fn set_bits(bits: &[u8], from: u64, n: u64) -> u64 {
    let mut count = 0u64;
    let mut i = from;
    let end = from + n;
    // Leading bits to a byte boundary, whole bytes, trailing bits.
    while i < end && !i.is_multiple_of(8) {
        count += u64::from(bit(bits, i));
        i += 1;
    }
    while i + 64 <= end {
        let at = (i / 8) as usize;
        if let Some(w) = bits.get(at..at + 8) {
            count += u64::from(u64::from_be_bytes(w.try_into().unwrap_or([0; 8])).count_ones());
        }
        i += 64;
    }
    while i + 8 <= end {
        count += u64::from(bits.get((i / 8) as usize).map_or(0, |b| b.count_ones()));
        i += 8;
    }
    while i < end {
        count += u64::from(bit(bits, i));
        i += 1;
    }
    count
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grib_power_is_eccodes_loop() {
        assert_eq!(grib_power(0, 10.0), 1.0);
        assert_eq!(grib_power(-2, 10.0), (1.0 / 10.0) / 10.0);
        assert_eq!(grib_power(3, 2.0), 8.0);
        assert_eq!(grib_power(-3, 2.0), 0.125);
    }

    #[test]
    fn unpacks_any_width_at_any_offset() {
        let s = Scale::new(0.0, 0, 0);
        for bits in 1..=32u8 {
            let vals: Vec<u64> = (0..50u64)
                .map(|i| (i * 2654435761) & ((1u64 << bits) - 1))
                .collect();
            let mut packed = vec![0u8; 50 * 4 + 8];
            let mut pos = 3u64;
            for v in &vals {
                for b in (0..bits).rev() {
                    if v >> b & 1 == 1 {
                        packed[(pos / 8) as usize] |= 0x80 >> (pos % 8);
                    }
                    pos += 1;
                }
            }
            let mut out = Vec::new();
            unpack(&packed, 3, bits, 50, &s, &mut out);
            let got: Vec<u64> = out.iter().map(|v| *v as u64).collect();
            assert_eq!(got, vals, "{bits} bits");
        }
        assert_eq!(set_bits(&[0xff, 0x0f, 0xff], 4, 16), 12);
        assert_eq!(set_bits(&[0xff; 20], 3, 150), 150);
    }
}
