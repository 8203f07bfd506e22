//! GRIB edition 2: section 0 (16 octets), 1, then fields of sections 2-7 (a section not repeated
//! for a later field is the previous field's), then `7777`.

use super::{be, Section, SectionError};

/// A GRIB2 message's sections.
#[derive(Debug, Clone)]
pub struct Grib2<'a> {
    /// The message, `GRIB` to `7777`.
    pub bytes: &'a [u8],
    /// Section 0 (16 octets).
    pub indicator: Section<'a>,
    /// Octet 7 of section 0.
    pub discipline: u8,
    /// Section 1.
    pub identification: Section<'a>,
    /// One entry per data section (7), in order; at least one.
    pub fields: Vec<Grib2Field<'a>>,
}

/// The sections that make one field of a GRIB2 message (each the latest one before its data
/// section).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grib2Field<'a> {
    pub local: Option<Section<'a>>,
    pub grid: Section<'a>,
    pub product: Section<'a>,
    pub representation: Section<'a>,
    pub bitmap: Section<'a>,
    pub data: Section<'a>,
}

impl<'a> Grib2<'a> {
    pub(super) fn parse(m: &'a [u8]) -> Result<Grib2<'a>, SectionError> {
        let indicator = m
            .get(..16)
            .ok_or_else(|| SectionError::new(0, "shorter than section 0 (16 octets)"))?;
        let total = be(&indicator[8..16]);
        let len = usize::try_from(total)
            .ok()
            .filter(|t| *t >= 16 + 4 && *t <= m.len())
            .ok_or_else(|| {
                SectionError::new(
                    8,
                    format!("section 0 announces {total} bytes, {} are present", m.len()),
                )
            })?;
        let m = &m[..len];
        if m.get(len - 4..) != Some(b"7777") {
            return Err(SectionError::new(
                len - 4,
                "the message does not end with '7777'",
            ));
        }
        let indicator = Section {
            number: 0,
            offset: 0,
            bytes: &m[..16],
        };
        let end = len - 4;
        let mut pos = 16;
        let mut identification = None;
        let (mut local, mut grid, mut product, mut representation, mut bitmap) =
            (None, None, None, None, None);
        let mut fields = Vec::new();
        let mut last = 0u8;
        while pos < end {
            let header = m
                .get(pos..pos + 5)
                .ok_or_else(|| SectionError::new(pos, "section header cut short"))?;
            let slen = be(&header[..4]);
            let number = header[4];
            let slen = usize::try_from(slen)
                .ok()
                .filter(|l| *l >= 5 && pos + *l <= end)
                .ok_or_else(|| {
                    SectionError::new(
                        pos,
                        format!(
                            "section {number} of length {slen} does not fit (the sections end at {end})"
                        ),
                    )
                })?;
            // Order: 1, then (2? 3 4 5 6 7) with repeats starting at 2, 3 or 4 after a 7.
            let ok = match number {
                1 => last == 0,
                2 => last == 1 || last == 7,
                3 => matches!(last, 1 | 2 | 7),
                4 => matches!(last, 3 | 7),
                5 => last == 4,
                6 => last == 5,
                7 => last == 6,
                _ => false,
            };
            if !ok {
                return Err(SectionError::new(
                    pos,
                    format!("section {number} cannot follow section {last}"),
                ));
            }
            let s = Section {
                number,
                offset: pos,
                bytes: &m[pos..pos + slen],
            };
            match number {
                1 => identification = Some(s),
                2 => local = Some(s),
                3 => grid = Some(s),
                4 => product = Some(s),
                5 => representation = Some(s),
                6 => bitmap = Some(s),
                _ => {
                    // The order check guarantees 3 (at least once), 4, 5 and 6 before a 7.
                    if let (Some(grid), Some(product), Some(representation), Some(bitmap)) =
                        (grid, product, representation, bitmap)
                    {
                        fields.push(Grib2Field {
                            local,
                            grid,
                            product,
                            representation,
                            bitmap,
                            data: s,
                        });
                    }
                }
            }
            last = number;
            pos += slen;
        }
        if last != 7 {
            return Err(SectionError::new(
                pos,
                format!("the message ends after section {last}, not after a data section (7)"),
            ));
        }
        let identification = identification.ok_or_else(|| SectionError::new(16, "no section 1"))?;
        Ok(Grib2 {
            bytes: m,
            indicator,
            discipline: m[6],
            identification,
            fields,
        })
    }
}

impl<'a> Grib2Field<'a> {
    /// Section 3's template number (octets 13-14).
    pub fn grid_template(&self) -> Result<u16, SectionError> {
        Ok(self.grid.uint(13, 2)? as u16)
    }

    /// Section 4's template number (octets 8-9).
    pub fn product_template(&self) -> Result<u16, SectionError> {
        Ok(self.product.uint(8, 2)? as u16)
    }

    /// Section 5's template number (octets 10-11).
    pub fn representation_template(&self) -> Result<u16, SectionError> {
        Ok(self.representation.uint(10, 2)? as u16)
    }

    /// Section 3's number of data points (octets 7-10).
    pub fn number_of_data_points(&self) -> Result<u64, SectionError> {
        self.grid.uint(7, 4)
    }

    /// Section 5's number of coded values (octets 6-9).
    pub fn number_of_values(&self) -> Result<u64, SectionError> {
        self.representation.uint(6, 4)
    }

    /// Section 6's bitmap indicator (octet 6): 0 a bitmap follows, 254 the previous one applies,
    /// 255 none, others predefined.
    pub fn bitmap_indicator(&self) -> Result<u8, SectionError> {
        self.bitmap.u8(6)
    }
}
