//! A native GRIB section reader: a message's sections as typed views borrowing its bytes, read
//! without ecCodes. Every read is bounds-checked and every error names the byte offset (from the
//! message start) where the message stops making sense; nothing here panics on hostile bytes.
//!
//! What it gives: the sections' offsets, lengths and bodies (GRIB2 sections 0-7, with sections
//! 2-7 repeated for multi-field messages; GRIB1 indicator, PDS, GDS, BMS, BDS), the template
//! numbers, and the grid definitions extraction and geometry need ([`GridDefinition`]). The
//! native MARS key reader ([`mars`]) reads the product definition and local sections through the
//! same views.

mod grib1;
mod grib2;
mod grid;
pub mod mars;
#[cfg(test)]
mod mars_differential;

pub use grib1::Grib1;
pub use grib2::{Grib2, Grib2Field};
pub(crate) use grid::{ibm_to_f64, ieee32_ecc};
pub use grid::{GridDefinition, GridShape, Rotation, ScanningMode};

use crate::error_kind::ErrorKind;

/// Why the bytes are not a GRIB message this reader can walk, and where.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("GRIB message at byte {offset}: {reason}")]
pub struct SectionError {
    /// Byte offset from the message start.
    pub offset: u64,
    pub reason: String,
}

impl SectionError {
    pub(crate) fn new(offset: usize, reason: impl Into<String>) -> SectionError {
        SectionError {
            offset: offset as u64,
            reason: reason.into(),
        }
    }

    pub fn kind(&self) -> ErrorKind {
        ErrorKind::BadRequest
    }
}

/// One section: its number (GRIB2: 0-8; GRIB1: 0 indicator, 1 PDS, 2 GDS, 3 BMS, 4 BDS), where
/// it starts in the message and its bytes (header included).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Section<'a> {
    pub number: u8,
    /// Byte offset of the section's first octet from the message start.
    pub offset: usize,
    /// The whole section, its length header included.
    pub bytes: &'a [u8],
}

impl<'a> Section<'a> {
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// The bytes after the section's header (5 octets in GRIB2, 3 in GRIB1, none for section 0).
    pub fn body(&self, header: usize) -> &'a [u8] {
        self.bytes.get(header..).unwrap_or(&[])
    }

    /// `n` bytes at `octet` (1-based, as the WMO tables number them).
    pub fn octets(&self, octet: usize, n: usize) -> Result<&'a [u8], SectionError> {
        let at = octet.checked_sub(1).ok_or_else(|| self.err(0, "octet 0"))?;
        at.checked_add(n)
            .and_then(|end| self.bytes.get(at..end))
            .ok_or_else(|| {
                self.err(
                    at,
                    format!(
                        "section {} of {} bytes has no octets {octet}-{}",
                        self.number,
                        self.bytes.len(),
                        octet + n.saturating_sub(1)
                    ),
                )
            })
    }

    /// Big-endian unsigned integer of `n` (<= 8) bytes at `octet` (1-based).
    pub fn uint(&self, octet: usize, n: usize) -> Result<u64, SectionError> {
        Ok(be(self.octets(octet, n)?))
    }

    /// Sign-and-magnitude integer of `n` bytes at `octet` (GRIB's signed integers: the first bit
    /// is the sign).
    pub fn int(&self, octet: usize, n: usize) -> Result<i64, SectionError> {
        Ok(sign_magnitude(self.uint(octet, n)?, n))
    }

    /// The octet at `octet` (1-based).
    pub fn u8(&self, octet: usize) -> Result<u8, SectionError> {
        Ok(self.octets(octet, 1)?[0])
    }

    /// The template number of a GRIB2 section that has one (3: octets 13-14, 4: 8-9, 5: 10-11,
    /// 6: none, its bitmap indicator is octet 6), `None` for the others.
    pub fn template_number(&self) -> Result<Option<u16>, SectionError> {
        let at = match self.number {
            3 => 13,
            4 => 8,
            5 => 10,
            _ => return Ok(None),
        };
        Ok(Some(self.uint(at, 2)? as u16))
    }

    /// An error at byte `at` of this section.
    pub fn err(&self, at: usize, reason: impl Into<String>) -> SectionError {
        SectionError::new(self.offset.saturating_add(at), reason)
    }
}

/// Big-endian unsigned integer of up to 8 bytes.
pub(crate) fn be(b: &[u8]) -> u64 {
    b.iter().fold(0u64, |acc, x| (acc << 8) | u64::from(*x))
}

/// GRIB's signed integers: sign bit, then magnitude.
pub(crate) fn sign_magnitude(raw: u64, n: usize) -> i64 {
    let bits = (n * 8).min(64);
    if bits == 0 {
        return 0;
    }
    let sign = 1u64 << (bits - 1);
    let magnitude = (raw & (sign - 1)) as i64;
    if raw & sign != 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// A GRIB message of either edition.
#[derive(Debug, Clone)]
pub enum Message<'a> {
    Grib1(Grib1<'a>),
    Grib2(Grib2<'a>),
}

impl<'a> Message<'a> {
    /// Reads the sections of one message: `bytes` starts with `GRIB` and holds at least the
    /// message (anything after its `7777` is ignored).
    pub fn parse(bytes: &'a [u8]) -> Result<Message<'a>, SectionError> {
        if bytes.get(..4) != Some(b"GRIB") {
            return Err(SectionError::new(0, "does not start with 'GRIB'"));
        }
        match bytes.get(7) {
            Some(1) => Ok(Message::Grib1(Grib1::parse(bytes)?)),
            Some(2) => Ok(Message::Grib2(Grib2::parse(bytes)?)),
            Some(e) => Err(SectionError::new(
                7,
                format!("unsupported GRIB edition {e}"),
            )),
            None => Err(SectionError::new(
                0,
                "shorter than GRIB's indicator section",
            )),
        }
    }

    pub fn edition(&self) -> u8 {
        match self {
            Message::Grib1(_) => 1,
            Message::Grib2(_) => 2,
        }
    }

    /// The message, `GRIB` to `7777`.
    pub fn bytes(&self) -> &'a [u8] {
        match self {
            Message::Grib1(m) => m.bytes,
            Message::Grib2(m) => m.bytes,
        }
    }

    /// The section describing the grid of the (first) field: GRIB2 section 3, GRIB1 section 2
    /// (`None` for a GRIB1 field on a predefined grid).
    pub fn grid_section(&self) -> Option<Section<'a>> {
        match self {
            Message::Grib1(m) => m.gds,
            Message::Grib2(m) => m.fields.first().map(|f| f.grid),
        }
    }

    /// The (first) field's grid, decoded.
    pub fn grid(&self) -> Result<GridDefinition, SectionError> {
        match self {
            Message::Grib1(m) => m.grid(),
            Message::Grib2(m) => match m.fields.first() {
                Some(f) => grid::grib2_grid(&f.grid),
                None => Err(SectionError::new(16, "no field")),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grib::handle::Handle;
    use crate::grib::{Decoded, KeyValue};

    fn sample(name: &str) -> Vec<u8> {
        Handle::from_sample(name).unwrap().message().unwrap()
    }

    #[test]
    fn sections_are_where_eccodes_reads_them() {
        for name in [
            "GRIB2",
            "GRIB1",
            "reduced_gg_pl_32_grib2",
            "reduced_gg_pl_32_grib1",
        ] {
            let m = sample(name);
            let d = Decoded::new(&m).unwrap();
            let at = |k: &str| match d.get(k).unwrap() {
                Some(KeyValue::Long(v)) => Some(v as usize),
                _ => None,
            };
            let parsed = Message::parse(&m).unwrap();
            let grid = parsed.grid().unwrap();
            assert_eq!(
                Some(grid.number_of_points as usize),
                at("numberOfDataPoints"),
                "{name}"
            );
            match &parsed {
                Message::Grib2(g) => {
                    let f = g.fields[0];
                    assert_eq!(Some(f.grid.offset), at("offsetSection3"), "{name}");
                    assert_eq!(Some(f.representation.offset), at("offsetSection5"));
                    assert_eq!(Some(f.data.offset), at("offsetSection7"));
                    assert_eq!(
                        f.grid.template_number().unwrap(),
                        Some(f.grid_template().unwrap())
                    );
                }
                Message::Grib1(g) => {
                    assert_eq!(g.gds.map(|s| s.offset), at("offsetSection2"), "{name}");
                    assert_eq!(Some(g.bds.offset), at("offsetSection4"), "{name}");
                }
            }
            if let GridShape::Gaussian { pl: Some(pl), .. } = &grid.shape {
                let Some(KeyValue::Longs(want)) = d.get("pl").unwrap() else {
                    panic!("{name}: no pl")
                };
                assert_eq!(pl.iter().map(|p| *p as i64).collect::<Vec<_>>(), want);
            }
        }
    }

    /// Truncated and damaged messages give errors naming an offset inside them, never a panic.
    #[test]
    fn hostile_bytes_are_errors() {
        for name in ["GRIB2", "GRIB1", "reduced_gg_pl_32_grib2"] {
            let m = sample(name);
            for cut in 0..m.len() {
                if let Err(e) = Message::parse(&m[..cut]) {
                    assert!(e.offset <= m.len() as u64, "{e}");
                }
            }
            for at in 0..m.len().min(400) {
                let mut d = m.clone();
                d[at] ^= 0xa5;
                if let Ok(p) = Message::parse(&d) {
                    let _ = p.grid();
                }
            }
        }
    }
}
