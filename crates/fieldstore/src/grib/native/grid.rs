//! Grid definitions decoded from the bytes: GRIB2 templates 3.0 (regular lat-lon), 3.1
//! (rotated lat-lon), 3.40 (Gaussian, regular or reduced), 3.41 (rotated Gaussian); GRIB1 data
//! representation types 0, 10, 4, 14. Others are [`GridShape::Other`].

use super::{Section, SectionError};

/// A decoded grid definition (angles in degrees).
#[derive(Debug, Clone, PartialEq)]
pub struct GridDefinition {
    pub shape: GridShape,
    /// The points the grid has: GRIB2 section 3's count; GRIB1 `Ni x Nj` or the sum of `pl`.
    pub number_of_points: u64,
    pub scanning: ScanningMode,
    /// The southern pole of a rotated grid.
    pub rotation: Option<Rotation>,
}

/// The grid's shape.
#[derive(Debug, Clone, PartialEq)]
pub enum GridShape {
    LatLon {
        ni: u64,
        nj: u64,
        lat_first: f64,
        lon_first: f64,
        lat_last: f64,
        lon_last: f64,
        /// `None` when coded missing.
        di: Option<f64>,
        dj: Option<f64>,
    },
    Gaussian {
        /// Parallels between a pole and the equator.
        n: u64,
        /// Points per row of a regular grid; `None` for a reduced grid.
        ni: Option<u64>,
        /// Rows.
        nj: u64,
        lat_first: f64,
        lon_first: f64,
        lat_last: f64,
        lon_last: f64,
        di: Option<f64>,
        /// Points per row of a reduced grid.
        pl: Option<Vec<u64>>,
    },
    /// A grid this reader does not decode: GRIB2 template number, GRIB1 data representation
    /// type.
    Other { template: u16 },
}

/// The rotation of a rotated grid.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rotation {
    pub south_pole_lat: f64,
    pub south_pole_lon: f64,
    pub angle: f64,
}

/// The scanning mode flags (GRIB2 flag table 3.4, GRIB1 table 8).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ScanningMode(pub u8);

impl ScanningMode {
    /// Bit 1: points scan in the -i direction (east to west).
    pub fn i_negative(self) -> bool {
        self.0 & 0x80 != 0
    }
    /// Bit 2: points scan in the +j direction (south to north).
    pub fn j_positive(self) -> bool {
        self.0 & 0x40 != 0
    }
    /// Bit 3: adjacent points in j are consecutive (column-major).
    pub fn j_consecutive(self) -> bool {
        self.0 & 0x20 != 0
    }
    /// Bit 4: alternate rows scan in opposite directions.
    pub fn alternate_rows(self) -> bool {
        self.0 & 0x10 != 0
    }
}

const MISSING4: u64 = 0xffff_ffff;

/// GRIB2 section 3.
pub(super) fn grib2_grid(s: &Section<'_>) -> Result<GridDefinition, SectionError> {
    let template = s.uint(13, 2)? as u16;
    let number_of_points = s.uint(7, 4)?;
    let other = || GridDefinition {
        shape: GridShape::Other { template },
        number_of_points,
        scanning: ScanningMode(0),
        rotation: None,
    };
    if !matches!(template, 0 | 1 | 40 | 41) {
        return Ok(other());
    }
    let basic = s.uint(39, 4)?;
    let subdivisions = s.uint(43, 4)?;
    // Angles in micro-degrees unless a basic angle and its subdivisions say otherwise.
    let angle = |octet: usize| -> Result<f64, SectionError> {
        let v = s.int(octet, 4)? as f64;
        Ok(
            if basic == 0 || basic == MISSING4 || subdivisions == 0 || subdivisions == MISSING4 {
                v / 1_000_000.0
            } else {
                v * basic as f64 / subdivisions as f64
            },
        )
    };
    let increment = |octet: usize| -> Result<Option<f64>, SectionError> {
        Ok(match s.uint(octet, 4)? {
            MISSING4 => None,
            _ => Some(angle(octet)?.abs()),
        })
    };
    let ni = s.uint(31, 4)?;
    let nj = s.uint(35, 4)?;
    let (lat_first, lon_first) = (angle(47)?, angle(51)?);
    let (lat_last, lon_last) = (angle(56)?, angle(60)?);
    let di = increment(64)?;
    let scanning = ScanningMode(s.u8(72)?);
    let rotated = matches!(template, 1 | 41);
    let rotation = if rotated {
        let raw = s.uint(81, 4)? as u32;
        Some(Rotation {
            south_pole_lat: angle(73)?,
            south_pole_lon: angle(77)?,
            angle: f64::from(f32::from_bits(raw)),
        })
    } else {
        None
    };
    let shape = if matches!(template, 0 | 1) {
        GridShape::LatLon {
            ni,
            nj,
            lat_first,
            lon_first,
            lat_last,
            lon_last,
            di,
            dj: increment(68)?,
        }
    } else {
        let n = s.uint(68, 4)?;
        let pl = if ni == MISSING4 {
            // The optional list of numbers follows the template: octet 11 its entries' width,
            // octet 12 its interpretation.
            let width = s.u8(11)? as usize;
            let start = if rotated { 85 } else { 73 };
            if !(1..=4).contains(&width) {
                return Err(s.err(10, format!("a reduced grid's pl of {width}-octet entries")));
            }
            let rows = usize::try_from(nj)
                .ok()
                .filter(|r| r.saturating_mul(width) <= s.len())
                .ok_or_else(|| {
                    s.err(
                        34,
                        format!(
                            "Nj={nj} rows of pl do not fit a section of {} bytes",
                            s.len()
                        ),
                    )
                })?;
            let mut pl = Vec::with_capacity(rows);
            for r in 0..rows {
                pl.push(s.uint(start + r * width, width)?);
            }
            Some(pl)
        } else {
            None
        };
        GridShape::Gaussian {
            n,
            ni: (ni != MISSING4).then_some(ni),
            nj,
            lat_first,
            lon_first,
            lat_last,
            lon_last,
            di,
            pl,
        }
    };
    Ok(GridDefinition {
        shape,
        number_of_points,
        scanning,
        rotation,
    })
}

/// GRIB1 section 2 (GDS).
pub(super) fn grib1_grid(s: &Section<'_>) -> Result<GridDefinition, SectionError> {
    let kind = s.u8(6)?;
    let template = u16::from(kind);
    let nv = s.u8(4)? as usize;
    let pvl = s.u8(5)? as usize;
    let ni = s.uint(7, 2)?;
    let nj = s.uint(9, 2)?;
    let reduced = ni == 0xffff;
    let pl = if reduced {
        if pvl == 0 || pvl == 255 {
            return Err(s.err(4, "a reduced grid without a pl list"));
        }
        let start = pvl + nv * 4;
        let rows = nj as usize;
        if start + rows * 2 > s.len() + 1 {
            return Err(s.err(
                4,
                format!(
                    "pl of {rows} rows from octet {start} does not fit {} bytes",
                    s.len()
                ),
            ));
        }
        let mut pl = Vec::with_capacity(rows);
        for r in 0..rows {
            pl.push(s.uint(start + r * 2, 2)?);
        }
        Some(pl)
    } else {
        None
    };
    let number_of_points = match &pl {
        Some(pl) => pl.iter().sum(),
        None => ni * nj,
    };
    if !matches!(kind, 0 | 10 | 4 | 14) {
        return Ok(GridDefinition {
            shape: GridShape::Other { template },
            number_of_points,
            scanning: ScanningMode(0),
            rotation: None,
        });
    }
    let milli =
        |octet: usize| -> Result<f64, SectionError> { Ok(s.int(octet, 3)? as f64 / 1000.0) };
    let (lat_first, lon_first, lat_last, lon_last) =
        (milli(11)?, milli(14)?, milli(18)?, milli(21)?);
    let di = match s.uint(24, 2)? {
        0xffff => None,
        v => Some(v as f64 / 1000.0),
    };
    let j_or_n = s.uint(26, 2)?;
    let scanning = ScanningMode(s.u8(28)?);
    let rotation = if matches!(kind, 10 | 14) {
        let raw = s.uint(39, 4)?;
        Some(Rotation {
            south_pole_lat: milli(33)?,
            south_pole_lon: milli(36)?,
            angle: ibm_to_f64(raw as u32),
        })
    } else {
        None
    };
    let shape = if matches!(kind, 0 | 10) {
        GridShape::LatLon {
            ni,
            nj,
            lat_first,
            lon_first,
            lat_last,
            lon_last,
            di,
            dj: (j_or_n != 0xffff).then_some(j_or_n as f64 / 1000.0),
        }
    } else {
        GridShape::Gaussian {
            n: j_or_n,
            ni: (!reduced).then_some(ni),
            nj,
            lat_first,
            lon_first,
            lat_last,
            lon_last,
            di,
            pl,
        }
    };
    Ok(GridDefinition {
        shape,
        number_of_points,
        scanning,
        rotation,
    })
}

/// An IBM single-precision float, as ecCodes decodes it (`grib_long_to_ibm`): exact.
pub(crate) fn ibm_to_f64(x: u32) -> f64 {
    let sign = x & 0x8000_0000 != 0;
    let c = ((x & 0x7f00_0000) >> 24) as i32;
    let m = x & 0x00ff_ffff;
    if c == 0 && m <= 1 {
        return 0.0;
    }
    // 16^(c - 70), a power of two.
    let v = f64::from(m) * 2f64.powi(4 * (c - 70));
    if sign {
        -v
    } else {
        v
    }
}

/// An IEEE single-precision float as ecCodes decodes it (`grib_long_to_ieee`): `m x 2^(c-150)`
/// with the hidden bit always set (subnormals decode as if of exponent 1); exponent 255 gives 0.
pub(crate) fn ieee32_ecc(x: u32) -> f64 {
    let sign = x & 0x8000_0000 != 0;
    let c = ((x & 0x7f80_0000) >> 23) as i32;
    let m = x & 0x007f_ffff;
    if c == 0 && m == 0 {
        return 0.0;
    }
    let (m, c) = (m | 0x80_0000, c.max(1));
    let v = if c == 255 {
        0.0
    } else {
        f64::from(m) * 2f64.powi(c - 150)
    };
    if sign {
        -v
    } else {
        v
    }
}
