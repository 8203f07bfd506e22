//! The message's layout read from its bytes, before ecCodes is trusted with it: ecCodes believes
//! the section lengths and the counts its headers announce, and reads past its buffers (SIGSEGV)
//! when a damaged message's sections cannot hold what they announce.

use super::error::GribError;

/// CCSDS parameters libaec may be given: every encoder (ecCodes', libaec's) writes blocks of 8,
/// 16, 32 or 64 samples and RSIs of at most 4096 blocks; libaec's decoder checks neither.
pub(crate) fn ccsds_params_valid(bits_per_sample: u32, block_size: u32, rsi: u32) -> bool {
    (1..=32).contains(&bits_per_sample)
        && matches!(block_size, 8 | 16 | 32 | 64)
        && (1..=4096).contains(&rsi)
}

/// The sections must tile the message exactly: ecCodes trusts the section lengths and reads (or
/// crashes) past the end of the bytes it was given when one is corrupt.
/// Returns the offset of the first occurrence of each section.
pub(super) fn check_sections(m: &[u8]) -> Result<Vec<(u8, usize)>, GribError> {
    let bad =
        |what: String| GribError::Decode(format!("{what}: the message's sections are corrupt"));
    let end = m.len().saturating_sub(4);
    let be = |at: usize, n: usize| -> Option<usize> {
        let b = m.get(at..at + n)?;
        Some(b.iter().fold(0usize, |acc, x| (acc << 8) | usize::from(*x)))
    };
    match m.get(7) {
        Some(2) => {
            let mut pos = 16;
            let mut last = 0u8;
            let mut seen = Vec::new();
            while pos < end {
                let (Some(len), Some(&num)) = (be(pos, 4), m.get(pos + 4)) else {
                    return Err(bad(format!("section header at offset {pos} cut short")));
                };
                if !(1..=7).contains(&num) || len < 5 || pos + len > end {
                    return Err(bad(format!(
                        "section {num} at offset {pos} of length {len} (data ends at {end})"
                    )));
                }
                // CCSDS (template 5.42): libaec checks none of these and writes past its
                // buffers on a block size no encoder uses (found by fuzzing extraction).
                if num == 5 && be(pos + 9, 2) == Some(42) {
                    let (bits, block, rsi) = (
                        be(pos + 19, 1).unwrap_or(0),
                        be(pos + 22, 1).unwrap_or(0),
                        be(pos + 23, 2).unwrap_or(0),
                    );
                    if bits != 0 && !ccsds_params_valid(bits as u32, block as u32, rsi as u32) {
                        return Err(bad(format!(
                            "CCSDS block size {block}, RSI {rsi}, {bits} bits per value in section 5 at offset {pos}"
                        )));
                    }
                }
                if !seen.iter().any(|(n, _)| *n == num) {
                    seen.push((num, pos));
                }
                last = num;
                pos += len;
            }
            if last != 7 {
                return Err(bad("no data section (7) before '7777'".into()));
            }
            Ok(seen)
        }
        Some(1) => {
            // Messages over 8 MiB code their lengths in 120-byte units (see `framing`): the
            // framing has checked those.
            if m.len() >= 0x80_0000 {
                return Ok(Vec::new());
            }
            let mut pos = 8;
            let mut seen = vec![(1, pos)];
            let len1 = be(pos, 3).unwrap_or(0);
            let flags = m.get(pos + 7).copied().unwrap_or(0);
            if len1 < 28 || pos + len1 > end {
                return Err(bad(format!("section 1 of length {len1}")));
            }
            pos += len1;
            for (present, name, min) in [(flags & 0x80 != 0, 2, 32), (flags & 0x40 != 0, 3, 6)] {
                if present {
                    let len = be(pos, 3).unwrap_or(0);
                    if len < min || pos + len > end {
                        return Err(bad(format!(
                            "section {name} at offset {pos} of length {len}"
                        )));
                    }
                    if name == 2 {
                        grib1_gds_fault(&m[pos..pos + len])?;
                    }
                    seen.push((name, pos));
                    pos += len;
                }
            }
            let len4 = be(pos, 3).unwrap_or(0);
            if len4 < 11 || pos + len4 > end {
                return Err(bad(format!("section 4 at offset {pos} of length {len4}")));
            }
            seen.push((4, pos));
            Ok(seen)
        }
        _ => Err(bad("not GRIB edition 1 or 2".into())),
    }
}

/// A GRIB 1 grid description's lists (the vertical coordinates, then a reduced grid's points
/// per row) must fit in it, and a reduced Gaussian grid must be one ecCodes can count. ecCodes
/// reads `pl` and counts a Gaussian sub-area's points row by row while it opens the message,
/// before any key can be checked: a `pl` of Nj=32772 rows in a section of 160 bytes was a
/// SIGSEGV in `grib_handle_new_from_message`, and rows of 0 points made it loop forever (both
/// found by fuzzing, on the archive path too).
fn grib1_gds_fault(gds: &[u8]) -> Result<(), GribError> {
    let at = |i: usize, n: usize| be(gds, i, n).unwrap_or(0);
    let corrupt = |what: String| {
        Err(GribError::Decode(format!(
            "{what}: the grid description is corrupt"
        )))
    };
    // Octet 6: the grid type; Gaussian (regular or reduced, rotated, stretched, both).
    let gaussian = matches!(at(5, 1), 4 | 14 | 24 | 34);
    let n = at(25, 2);
    if gaussian && n > super::decode::MAX_GAUSSIAN_N as u64 {
        return corrupt(format!("N={n}: more latitudes than any real Gaussian grid"));
    }
    // Octet 5: where the lists start (1-based), 255 (or 0) when there are none.
    let start = at(4, 1) as usize;
    if start == 0 || start == 255 {
        return Ok(());
    }
    let pv = at(3, 1) * 4;
    // A quasi-regular grid codes Ni (or Nj) as missing; pl then has an entry per row (column).
    let (ni, nj) = (at(6, 2), at(8, 2));
    let rows = match (ni, nj) {
        (0xffff, rows) | (rows, 0xffff) => rows,
        _ => 0,
    };
    let pl_at = (start as u64 - 1) + pv;
    if pl_at + rows * 2 > gds.len() as u64 {
        return corrupt(format!(
            "section 2 of {} bytes holds its lists from octet {start}: {pv} bytes of pv and {} of pl (Ni={ni}, Nj={nj})",
            gds.len(),
            rows * 2
        ));
    }
    if gaussian {
        for i in 0..rows {
            let points = at((pl_at + i * 2) as usize, 2);
            if points < 2 {
                return corrupt(format!("pl[{i}]={points}"));
            }
        }
    }
    Ok(())
}

/// Why the data (values and bitmap) of a message that [`check_sections`] accepted cannot be
/// decoded safely, or `None`: the data section must hold the coded values the header announces,
/// the bitmap a bit per point, and the bitmap must set no more bits than there are coded values
/// (ecCodes reads a coded value per set bit, unchecked). `points` is ecCodes'
/// `numberOfDataPoints` (GRIB 1 derives it from the grid description), `coded` its
/// `numberOfCodedValues`. Reads no value.
pub(super) fn data_fault(
    m: &[u8],
    sections: &[(u8, usize)],
    points: Option<i64>,
    coded: Option<i64>,
) -> Option<String> {
    let at = |num: u8| sections.iter().find(|(n, _)| *n == num).map(|(_, o)| *o);
    let points = u64::try_from(points?).ok()?;
    match m.get(7) {
        Some(2) => grib2_fault(m, at(3)?, at(5)?, at(6), at(7)?, points),
        Some(1) => grib1_fault(m, at(3), points, coded.and_then(|c| u64::try_from(c).ok())),
        _ => None,
    }
}

/// Big-endian unsigned integer of `n` bytes at `at`.
fn be(m: &[u8], at: usize, n: usize) -> Option<u64> {
    let b = m.get(at..at.checked_add(n)?)?;
    Some(b.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x)))
}

/// Set bits among the first `n` bits of `bits` (which holds at least `n`).
fn set_bits(bits: &[u8], n: u64) -> u64 {
    let full = (n / 8) as usize;
    let mut count: u64 = bits[..full].iter().map(|b| u64::from(b.count_ones())).sum();
    let rest = n % 8;
    if rest > 0 {
        count += u64::from((bits[full] & (0xffu8 << (8 - rest))).count_ones());
    }
    count
}

fn grib2_fault(
    m: &[u8],
    s3: usize,
    s5: usize,
    s6: Option<usize>,
    s7: usize,
    points: u64,
) -> Option<String> {
    if be(m, s3 + 6, 4) != Some(points) {
        return Some(format!(
            "section 3 announces {:?} points, ecCodes counts {points}",
            be(m, s3 + 6, 4)
        ));
    }
    let values = be(m, s5 + 5, 4)?;
    let template = be(m, s5 + 9, 2)?;
    // ecCodes allocates the coded values first, whatever the bitmap: 822083584 of them for 11
    // points behind a bitmap, 773849088 for 8192 behind a predefined one.
    if values > points {
        return Some(format!(
            "section 5 announces {values} coded values for {points} points"
        ));
    }
    let Some(s6) = s6 else {
        return Some("no bitmap section (6)".into());
    };
    let len6 = be(m, s6, 4)? as usize;
    match m.get(s6 + 5).copied()? {
        0 => {
            let bits = m.get(s6 + 6..s6 + len6.max(6))?;
            if (bits.len() as u64) * 8 < points {
                return Some(format!(
                    "the bitmap holds {} bits for {points} points",
                    bits.len() * 8
                ));
            }
            // ecCodes reads a coded value per set bit, unchecked; fewer set bits only leave
            // values unused (ecCodes itself writes a bitmap of no set bits over coded values
            // when a bitmap is asked for before the values are set).
            let set = set_bits(bits, points);
            if set > values {
                return Some(format!(
                    "the bitmap marks {set} points present, section 5 announces {values} coded values"
                ));
            }
        }
        255 if values != points => {
            return Some(format!(
                "{values} coded values for {points} points and no bitmap"
            ));
        }
        _ => {}
    }
    // Packings that store each value in a fixed number of bits, uncompressed: simple (0), with
    // logarithmic preprocessing (61), IEEE (4), spectral simple (50, the first coefficient in
    // section 5).
    let bits_per_value = match template {
        0 | 50 | 61 => u64::from(*m.get(s5 + 19)?),
        4 => match m.get(s5 + 11)? {
            1 => 32,
            2 => 64,
            _ => 128,
        },
        _ => return None,
    };
    let stored = if template == 50 {
        values.saturating_sub(1)
    } else {
        values
    };
    let data = (be(m, s7, 4)?).saturating_sub(5);
    let needed = u128::from(stored) * u128::from(bits_per_value);
    if u128::from(data) * 8 < needed {
        return Some(format!(
            "the data section holds {data} bytes, the header announces {stored} values of {bits_per_value} bits"
        ));
    }
    None
}

/// GRIB 1 codes no count of values: ecCodes derives it (`coded`, its `numberOfCodedValues`) from
/// the data section's length and packing, and decodes that many.
fn grib1_fault(m: &[u8], s3: Option<usize>, points: u64, coded: Option<u64>) -> Option<String> {
    let Some(s3) = s3 else {
        return match coded {
            Some(c) if c != points => Some(format!(
                "the data section codes {c} values for {points} points and no bitmap"
            )),
            _ => None,
        };
    };
    let len3 = be(m, s3, 3)? as usize;
    // A table reference other than 0 names a predefined bitmap: none follows.
    if be(m, s3 + 4, 2)? != 0 {
        return None;
    }
    let bits = m.get(s3 + 6..s3 + len3.max(6))?;
    let usable = (bits.len() as u64 * 8).saturating_sub(u64::from(*m.get(s3 + 3)?));
    if usable < points {
        return Some(format!(
            "the bitmap holds {usable} bits for {points} points"
        ));
    }
    let set = set_bits(bits, points);
    // Encoders pad the data section to an even length, so it may code a value or two more than
    // the bitmap uses: only fewer is damage.
    match coded {
        Some(c) if c < set => Some(format!(
            "the bitmap marks {set} points present, the data section codes {c} values"
        )),
        _ => None,
    }
}
