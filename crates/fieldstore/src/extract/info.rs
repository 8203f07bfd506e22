//! What extracting from one message needs, read once from its bytes: GribJump's JumpInfo plus
//! bitmap checkpoints (so a masked field's extract reads only the bitmap bytes it needs) and
//! IEEE packing.

use md5::{Digest, Md5};

use super::aec::{self, AecParams};
use super::error::ExtractError;
use crate::grib::native::{Grib1, Grib2, Message, Section};
use crate::grib::Decoded;

/// Points between two bitmap checkpoints.
pub const CHECKPOINT_INTERVAL: u64 = 4096;

/// How the field's values are packed, as far as extraction cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Packing {
    /// `grid_simple` (GRIB2 template 5.0, GRIB1 simple grid-point packing), 1 to 32 bits.
    Simple,
    /// `grid_ccsds` (GRIB2 template 5.42).
    Ccsds(CcsdsInfo),
    /// `grid_ieee` (GRIB2 template 5.4): 4 or 8 bytes a value.
    Ieee { bytes: u8 },
    /// Every coded value is the reference value (bits per value 0).
    Constant,
    /// Anything else: extraction decodes the whole field through ecCodes.
    Unsupported,
}

impl Packing {
    /// The name ecCodes gives the packing (`packingType`), or `unsupported`.
    pub fn name(&self) -> &'static str {
        match self {
            Packing::Simple => "grid_simple",
            Packing::Ccsds(_) => "grid_ccsds",
            Packing::Ieee { .. } => "grid_ieee",
            Packing::Constant => "constant",
            Packing::Unsupported => "unsupported",
        }
    }
}

/// A CCSDS field's stream parameters and the bit offset of each reference sample interval
/// (RSI) from the start of the data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CcsdsInfo {
    pub flags: u32,
    pub block_size: u32,
    pub rsi: u32,
    /// One bit offset per RSI, `ceil(number_of_values / (rsi * block_size))` of them.
    pub offsets: Vec<u64>,
}

impl CcsdsInfo {
    pub(crate) fn params(&self, bits_per_value: u8) -> AecParams {
        AecParams {
            bits_per_sample: u32::from(bits_per_value),
            block_size: self.block_size,
            rsi: self.rsi,
            flags: self.flags,
        }
    }
}

/// Where a field's bitmap is and how many points are present before every
/// [`CHECKPOINT_INTERVAL`]-th point.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BitmapInfo {
    /// Byte offset of the bitmap's first byte from the message start.
    pub offset: u64,
    /// `checkpoints[k]`: set bits among points `0..k*4096`; `ceil(points/4096) + 1` entries, the
    /// last the total.
    pub checkpoints: Vec<u64>,
}

/// What decoding any range of one message's grid points needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ExtractInfo {
    pub edition: u8,
    pub packing: Packing,
    /// R, exactly as ecCodes decodes it.
    pub reference_value: f64,
    /// E.
    pub binary_scale_factor: i32,
    /// D.
    pub decimal_scale_factor: i32,
    pub bits_per_value: u8,
    /// Byte offset of the first packed value from the message start (ecCodes'
    /// `offsetBeforeData`).
    pub offset_before_data: u64,
    /// Byte offset just after the data section (ecCodes' `offsetAfterData`).
    pub offset_after_data: u64,
    pub bitmap: Option<BitmapInfo>,
    /// Grid points, bitmap positions included.
    pub number_of_data_points: u64,
    /// Coded values (fewer than the points when a bitmap is present).
    pub number_of_values: u64,
    /// The message's length in bytes.
    pub total_length: u64,
    /// md5 of the grid section's bytes (ecCodes' `md5GridSection`); `None` for a GRIB1 field on
    /// a predefined grid.
    pub md5_grid_section: Option<[u8; 16]>,
}

impl ExtractInfo {
    /// Reads what extraction needs from one message (`GRIB` to `7777`; anything after is
    /// ignored). A CCSDS field is decoded once, for its RSI offsets; a packing without a range
    /// decoder is [`Packing::Unsupported`] (counts from ecCodes).
    pub fn build(message: &[u8]) -> Result<ExtractInfo, ExtractError> {
        let parsed = Message::parse(message)?;
        let md5_grid_section = parsed.grid_section().map(|s| {
            let mut h = Md5::new();
            h.update(s.bytes);
            h.finalize().into()
        });
        let mut info = match &parsed {
            Message::Grib2(m) => grib2(m)?,
            Message::Grib1(m) => grib1(m)?,
        };
        info.md5_grid_section = md5_grid_section;
        info.total_length = parsed.bytes().len() as u64;
        if info.packing == Packing::Unsupported {
            // The counts as ecCodes sees them: extraction will decode through it.
            let d = Decoded::new(parsed.bytes())?;
            let points = match d.get("numberOfDataPoints")? {
                Some(crate::grib::KeyValue::Long(p)) => u64::try_from(p).unwrap_or(0),
                _ => d.number_of_values()? as u64,
            };
            info.number_of_data_points = points;
            info.number_of_values = match d.get("numberOfValues")? {
                Some(crate::grib::KeyValue::Long(p)) => u64::try_from(p).unwrap_or(0),
                _ => points,
            };
            info.bitmap = None;
        }
        Ok(info)
    }

    /// `md5GridSection` as ecCodes prints it (32 lowercase hex digits).
    pub fn md5_grid_section_hex(&self) -> Option<String> {
        self.md5_grid_section
            .map(|m| m.iter().map(|b| format!("{b:02x}")).collect())
    }
}

fn unsupported(edition: u8) -> ExtractInfo {
    ExtractInfo {
        edition,
        packing: Packing::Unsupported,
        reference_value: 0.0,
        binary_scale_factor: 0,
        decimal_scale_factor: 0,
        bits_per_value: 0,
        offset_before_data: 0,
        offset_after_data: 0,
        bitmap: None,
        number_of_data_points: 0,
        number_of_values: 0,
        total_length: 0,
        md5_grid_section: None,
    }
}

fn grib2(m: &Grib2<'_>) -> Result<ExtractInfo, ExtractError> {
    let f = m
        .fields
        .first()
        .ok_or_else(|| ExtractError::corrupt(16, "no field"))?;
    let points = f.number_of_data_points()?;
    let values = f.number_of_values()?;
    let template = f.representation_template()?;
    let s5 = &f.representation;
    let data = &f.data;
    let mut info = unsupported(2);
    info.offset_before_data = data.offset as u64 + 5;
    info.offset_after_data = (data.offset + data.len()) as u64;
    info.number_of_data_points = points;
    info.number_of_values = values;
    let bitmap = match f.bitmap_indicator()? {
        255 => None,
        0 => Some(checkpoints(&f.bitmap, 6, points, m.bytes)?),
        _ => return Ok(info),
    };
    if values > points {
        return Err(s5
            .err(5, format!("{values} coded values for {points} points"))
            .into());
    }
    match &bitmap {
        Some(b) if b.checkpoints.last().copied().unwrap_or(0) > values => {
            return Err(f
                .bitmap
                .err(
                    5,
                    format!(
                    "the bitmap marks {} points present, section 5 announces {values} coded values",
                    b.checkpoints.last().copied().unwrap_or(0)
                ),
                )
                .into())
        }
        None if values != points => {
            return Err(s5
                .err(
                    5,
                    format!("{values} coded values for {points} points and no bitmap"),
                )
                .into())
        }
        _ => {}
    }
    let body = data.body(5);
    match template {
        0 | 42 => {
            info.reference_value = crate::grib::native::ieee32_ecc(s5.uint(12, 4)? as u32);
            info.binary_scale_factor = s5.int(16, 2)? as i32;
            info.decimal_scale_factor = s5.int(18, 2)? as i32;
            info.bits_per_value = s5.u8(20)?;
            info.bitmap = bitmap;
            if info.bits_per_value == 0 {
                info.packing = Packing::Constant;
                return Ok(info);
            }
            if info.bits_per_value > 32 {
                return Ok(info);
            }
            if template == 0 {
                let need = (u128::from(values) * u128::from(info.bits_per_value)).div_ceil(8);
                if (body.len() as u128) < need {
                    return Err(data
                        .err(
                            0,
                            format!(
                                "the data section holds {} bytes, {values} values of {} bits need {need}",
                                body.len(),
                                info.bits_per_value
                            ),
                        )
                        .into());
                }
                info.packing = Packing::Simple;
                return Ok(info);
            }
            let flags = u32::from(s5.u8(22)?);
            let block_size = u32::from(s5.u8(23)?);
            let rsi = s5.uint(24, 2)? as u32;
            let bpv = info.bits_per_value;
            // What ecCodes decodes as we do: big-endian unsigned samples of whole bytes.
            let msb = flags & libaec_sys::AEC_DATA_MSB != 0;
            let signed = flags & libaec_sys::AEC_DATA_SIGNED != 0;
            let three = flags & libaec_sys::AEC_DATA_3BYTE != 0;
            if !aec::valid_params(u32::from(bpv), block_size, rsi) {
                // Not handed to ecCodes either (its libaec writes past its buffers on these).
                return Err(s5
                    .err(
                        23,
                        format!(
                            "CCSDS block size {block_size}, RSI {rsi}: no encoder writes these"
                        ),
                    )
                    .into());
            }
            if !msb || signed || ((17..=24).contains(&bpv) && !three) {
                return Ok(info);
            }
            let mut ccsds = CcsdsInfo {
                flags,
                block_size,
                rsi,
                offsets: Vec::new(),
            };
            let p = ccsds.params(bpv);
            // A header may announce more values than any real field: decoding them would only
            // take time.
            if values > 1 << 28 {
                return Err(s5
                    .err(
                        5,
                        format!("{values} coded values: more than any real field"),
                    )
                    .into());
            }
            ccsds.offsets = aec::rsi_offsets(p, body, values).map_err(|e| at(e, data.offset))?;
            let expected = values.div_ceil(p.rsi_samples());
            if ccsds.offsets.len() as u64 != expected {
                return Err(ExtractError::corrupt(
                    data.offset as u64,
                    format!(
                        "{} RSIs in the CCSDS data, {values} values make {expected}",
                        ccsds.offsets.len()
                    ),
                ));
            }
            info.packing = Packing::Ccsds(ccsds);
            Ok(info)
        }
        4 => {
            let bytes: u8 = match s5.u8(12)? {
                1 => 4,
                2 => 8,
                _ => return Ok(info),
            };
            let need = u128::from(values) * u128::from(bytes);
            if (body.len() as u128) < need {
                return Err(data
                    .err(
                        0,
                        format!(
                            "the data section holds {} bytes, {values} IEEE values need {need}",
                            body.len()
                        ),
                    )
                    .into());
            }
            info.bits_per_value = bytes * 8;
            info.bitmap = bitmap;
            info.packing = Packing::Ieee { bytes };
            Ok(info)
        }
        _ => Ok(info),
    }
}

/// Moves an error's offset (relative to the data) to the message.
fn at(e: ExtractError, base: usize) -> ExtractError {
    match e {
        ExtractError::Corrupt { offset, reason } => ExtractError::Corrupt {
            offset: offset + base as u64,
            reason,
        },
        other => other,
    }
}

fn grib1(m: &Grib1<'_>) -> Result<ExtractInfo, ExtractError> {
    let bds = &m.bds;
    let mut info = unsupported(1);
    info.offset_before_data = bds.offset as u64 + 11;
    info.offset_after_data = (bds.offset + bds.len()) as u64;
    let octet4 = bds.u8(4)?;
    let (flags, unused) = (octet4 >> 4, u64::from(octet4 & 0x0f));
    // Spherical harmonics (8), second-order/complex (4), additional flags (1): not simple.
    let Some(gds) = m.gds else {
        return Ok(info);
    };
    if flags & 0b1101 != 0 {
        return Ok(info);
    }
    let grid = m.grid()?;
    let points = grid.number_of_points;
    info.number_of_data_points = points;
    info.reference_value = crate::grib::native::ibm_to_f64(bds.uint(7, 4)? as u32);
    info.binary_scale_factor = bds.int(5, 2)? as i32;
    info.decimal_scale_factor = m.decimal_scale_factor()? as i32;
    info.bits_per_value = bds.u8(11)?;
    let bitmap = match &m.bms {
        None => None,
        Some(bms) if bms.uint(5, 2)? == 0 => {
            let unused_bms = u64::from(bms.u8(4)?);
            let bits = (bms.len() as u64 - 6) * 8 - unused_bms.min((bms.len() as u64 - 6) * 8);
            if bits < points {
                return Err(bms
                    .err(
                        0,
                        format!("the bitmap holds {bits} bits for {points} points"),
                    )
                    .into());
            }
            Some(checkpoints(bms, 6, points, m.bytes)?)
        }
        // A predefined bitmap.
        Some(_) => return Ok(info),
    };
    let _ = gds;
    let used = bitmap
        .as_ref()
        .map(|b| b.checkpoints.last().copied().unwrap_or(0))
        .unwrap_or(points);
    info.number_of_values = used;
    info.bitmap = bitmap;
    if info.bits_per_value == 0 {
        info.packing = Packing::Constant;
        return Ok(info);
    }
    if info.bits_per_value > 32 {
        info.bitmap = None;
        return Ok(info);
    }
    let coded =
        ((bds.len() as u64 - 11) * 8).saturating_sub(unused) / u64::from(info.bits_per_value);
    if coded < used {
        return Err(bds
            .err(
                0,
                format!("the data section codes {coded} values, {used} are needed"),
            )
            .into());
    }
    info.packing = Packing::Simple;
    Ok(info)
}

/// The bitmap that starts `header` bytes into `section`, with its checkpoints over `points`.
fn checkpoints(
    section: &Section<'_>,
    header: usize,
    points: u64,
    message: &[u8],
) -> Result<BitmapInfo, ExtractError> {
    let bits = section.body(header);
    let need = points.div_ceil(8);
    if (bits.len() as u64) < need {
        return Err(section
            .err(
                header,
                format!(
                    "the bitmap holds {} bits for {points} points",
                    bits.len() * 8
                ),
            )
            .into());
    }
    let offset = (section.offset + header) as u64;
    debug_assert!(offset as usize + need as usize <= message.len());
    let mut checkpoints = Vec::with_capacity((points.div_ceil(CHECKPOINT_INTERVAL) + 1) as usize);
    let mut total = 0u64;
    checkpoints.push(0);
    let per = (CHECKPOINT_INTERVAL / 8) as usize;
    let mut done = 0u64;
    for chunk in bits[..need as usize].chunks(per) {
        let n = (points - done).min(CHECKPOINT_INTERVAL);
        total += super::simple::set_bits(chunk, 0, n);
        done += n;
        checkpoints.push(total);
    }
    Ok(BitmapInfo {
        offset,
        checkpoints,
    })
}
