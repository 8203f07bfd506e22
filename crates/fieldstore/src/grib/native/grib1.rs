//! GRIB edition 1: indicator (8 octets), PDS, optional GDS and BMS (flagged in the PDS), BDS,
//! `7777`. Section lengths are 3 octets; ECMWF's large messages (over 8 MiB) code the total
//! length in 120-byte units, and then the BDS runs to the `7777`.

use super::grid::{grib1_grid, GridDefinition};
use super::{be, Section, SectionError};

/// A GRIB1 message's sections.
#[derive(Debug, Clone)]
pub struct Grib1<'a> {
    /// The message, `GRIB` to `7777`.
    pub bytes: &'a [u8],
    /// The indicator section (8 octets).
    pub indicator: Section<'a>,
    /// Section 1, the product definition.
    pub pds: Section<'a>,
    /// Section 2, the grid description (absent: a predefined grid).
    pub gds: Option<Section<'a>>,
    /// Section 3, the bitmap.
    pub bms: Option<Section<'a>>,
    /// Section 4, the binary data.
    pub bds: Section<'a>,
}

impl<'a> Grib1<'a> {
    pub(super) fn parse(m: &'a [u8]) -> Result<Grib1<'a>, SectionError> {
        let head = m
            .get(..8)
            .ok_or_else(|| SectionError::new(0, "shorter than the indicator section"))?;
        let coded = be(&head[4..7]) as usize;
        let large = coded & 0x80_0000 != 0;
        let len = if large {
            // The framing's job is finding the true end; here the given bytes are the message.
            let l = m.len();
            if m.get(l.saturating_sub(4)..) != Some(b"7777") || l < 8 + 28 + 11 + 4 {
                return Err(SectionError::new(
                    4,
                    "large GRIB1 message: the bytes given do not end with '7777'",
                ));
            }
            l
        } else {
            if coded < 8 + 28 + 11 + 4 || coded > m.len() {
                return Err(SectionError::new(
                    4,
                    format!(
                        "the indicator announces {coded} bytes, {} are present",
                        m.len()
                    ),
                ));
            }
            if m.get(coded - 4..coded) != Some(b"7777") {
                return Err(SectionError::new(
                    coded - 4,
                    "the message does not end with '7777'",
                ));
            }
            coded
        };
        let m = &m[..len];
        let end = len - 4;
        let section = |number: u8, pos: usize, min: usize| -> Result<Section<'a>, SectionError> {
            let l = m
                .get(pos..pos + 3)
                .map(be)
                .ok_or_else(|| SectionError::new(pos, format!("section {number} cut short")))?
                as usize;
            if l < min || pos + l > end {
                return Err(SectionError::new(
                    pos,
                    format!(
                        "section {number} of length {l} does not fit (at least {min}; the sections end at {end})"
                    ),
                ));
            }
            Ok(Section {
                number,
                offset: pos,
                bytes: &m[pos..pos + l],
            })
        };
        let pds = section(1, 8, 28)?;
        let flags = pds.u8(8)?;
        let mut pos = pds.offset + pds.len();
        let gds = if flags & 0x80 != 0 {
            let s = section(2, pos, 32)?;
            pos += s.len();
            Some(s)
        } else {
            None
        };
        let bms = if flags & 0x40 != 0 {
            let s = section(3, pos, 6)?;
            pos += s.len();
            Some(s)
        } else {
            None
        };
        let bds = if large {
            if pos + 11 > end {
                return Err(SectionError::new(pos, "section 4 cut short"));
            }
            Section {
                number: 4,
                offset: pos,
                bytes: &m[pos..end],
            }
        } else {
            section(4, pos, 11)?
        };
        Ok(Grib1 {
            bytes: m,
            indicator: Section {
                number: 0,
                offset: 0,
                bytes: &m[..8],
            },
            pds,
            gds,
            bms,
            bds,
        })
    }

    /// The grid description, decoded (an error for a predefined grid: no section 2).
    pub fn grid(&self) -> Result<GridDefinition, SectionError> {
        match &self.gds {
            Some(gds) => grib1_grid(gds),
            None => Err(SectionError::new(
                self.pds.offset + 7,
                "no grid description (a predefined grid)",
            )),
        }
    }

    /// The PDS's decimal scale factor D (octets 27-28, signed).
    pub fn decimal_scale_factor(&self) -> Result<i64, SectionError> {
        self.pds.int(27, 2)
    }
}
