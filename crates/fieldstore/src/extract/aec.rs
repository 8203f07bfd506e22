//! CCSDS (GRIB2 template 5.42) through libaec 1.1 (the `libaec-sys` crate's bundled copy,
//! linked statically): one full decode recording each reference sample interval's (RSI's) bit
//! offset, and decoding a run of samples starting at one RSI. Buffers are ours and sized before
//! libaec writes into them; every stream is ended on every path.

use libaec_sys as sys;

use super::error::ExtractError;

/// The stream parameters of a CCSDS field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct AecParams {
    pub bits_per_sample: u32,
    pub block_size: u32,
    pub rsi: u32,
    pub flags: u32,
}

impl AecParams {
    /// Bytes libaec writes per sample.
    pub fn sample_bytes(&self) -> usize {
        match self.bits_per_sample {
            0..=8 => 1,
            9..=16 => 2,
            17..=24 if self.flags & sys::AEC_DATA_3BYTE != 0 => 3,
            _ => 4,
        }
    }

    /// Samples per RSI.
    pub fn rsi_samples(&self) -> u64 {
        u64::from(self.rsi) * u64::from(self.block_size)
    }

    /// Whether libaec can be trusted with these: its decoder checks none of the block size and
    /// writes whole blocks (and sample pairs) into a buffer of one RSI, so a block size of 1
    /// wrote past its heap buffer (found by fuzzing `extract_info_decode`). CCSDS and every
    /// encoder (ecCodes', libaec's) use 8, 16, 32 or 64.
    pub fn valid(&self) -> bool {
        valid_params(self.bits_per_sample, self.block_size, self.rsi)
    }
}

/// See [`AecParams::valid`]. The same rule keeps such messages from ecCodes, whose libaec has
/// the same fault (`grib::sections`).
pub(crate) fn valid_params(bits_per_sample: u32, block_size: u32, rsi: u32) -> bool {
    crate::grib::ccsds_params_valid(bits_per_sample, block_size, rsi)
}

/// A libaec decoding stream, ended when dropped.
struct Stream {
    raw: Box<sys::aec_stream>,
}

impl Stream {
    fn new(p: AecParams, input: &[u8]) -> Result<Stream, ExtractError> {
        if !p.valid() {
            return Err(ExtractError::corrupt(
                0,
                format!(
                    "CCSDS parameters no encoder writes: {} bits per sample, block size {}, RSI {}",
                    p.bits_per_sample, p.block_size, p.rsi
                ),
            ));
        }
        // SAFETY: aec_stream is plain C data; zero is its unset state.
        let mut raw: Box<sys::aec_stream> = Box::new(unsafe { std::mem::zeroed() });
        raw.bits_per_sample = p.bits_per_sample;
        raw.block_size = p.block_size;
        raw.rsi = p.rsi;
        raw.flags = p.flags;
        raw.next_in = input.as_ptr();
        raw.avail_in = input.len();
        // SAFETY: a valid stream whose input outlives it (the borrow of `input` is the caller's,
        // and every use below is within the caller's borrow).
        let rc = unsafe { sys::aec_decode_init(raw.as_mut()) };
        check(rc, "aec_decode_init")?;
        Ok(Stream { raw })
    }

    /// Decodes into `out` (all of it if the input holds enough); returns the bytes written.
    fn decode_into(&mut self, out: &mut [u8]) -> Result<usize, ExtractError> {
        self.raw.next_out = out.as_mut_ptr();
        self.raw.avail_out = out.len();
        let before = self.raw.total_out;
        // SAFETY: the output pointer and length describe `out`, valid for this call.
        let rc = unsafe { sys::aec_decode(self.raw.as_mut(), sys::AEC_FLUSH as i32) };
        check(rc, "aec_decode")?;
        Ok(self.raw.total_out - before)
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        // SAFETY: initialised by aec_decode_init (a Stream exists only then).
        unsafe { sys::aec_decode_end(self.raw.as_mut()) };
    }
}

fn check(rc: i32, call: &'static str) -> Result<(), ExtractError> {
    if rc == sys::AEC_OK as i32 {
        Ok(())
    } else {
        Err(ExtractError::Aec { call, code: rc })
    }
}

/// Decodes all `samples` of `data` once and returns the bit offset of each RSI (the first is 0).
/// The output goes through a small buffer, so a header announcing many samples costs time, not
/// memory.
pub(crate) fn rsi_offsets(
    p: AecParams,
    data: &[u8],
    samples: u64,
) -> Result<Vec<u64>, ExtractError> {
    let mut s = Stream::new(p, data)?;
    // SAFETY: initialised stream.
    check(
        unsafe { sys::aec_decode_enable_offsets(s.raw.as_mut()) },
        "aec_decode_enable_offsets",
    )?;
    let bps = p.sample_bytes();
    let mut buf = vec![0u8; (1 << 16) / bps * bps];
    let total = samples.checked_mul(bps as u64).ok_or(ExtractError::Aec {
        call: "aec_decode",
        code: sys::AEC_DATA_ERROR,
    })?;
    let mut done = 0u64;
    while done < total {
        let want = (total - done).min(buf.len() as u64) as usize;
        let got = s.decode_into(&mut buf[..want])?;
        if got == 0 {
            return Err(ExtractError::corrupt(
                0,
                format!(
                    "the CCSDS data holds {} of {samples} samples",
                    done / bps as u64
                ),
            ));
        }
        done += got as u64;
    }
    let mut count = 0usize;
    // SAFETY: initialised stream; `count` is written.
    check(
        unsafe { sys::aec_decode_count_offsets(s.raw.as_mut(), &mut count) },
        "aec_decode_count_offsets",
    )?;
    let mut offsets = vec![0usize; count];
    // SAFETY: `offsets` holds `count` entries.
    check(
        unsafe { sys::aec_decode_get_offsets(s.raw.as_mut(), offsets.as_mut_ptr(), count) },
        "aec_decode_get_offsets",
    )?;
    Ok(offsets.into_iter().map(|o| o as u64).collect())
}

/// Decodes `out.len()` bytes of samples from an RSI that starts `bit_skip` (< 8) bits into
/// `input`; the stream may run on into the following RSIs.
pub(crate) fn decode_from_rsi(
    p: AecParams,
    input: &[u8],
    bit_skip: u8,
    out: &mut [u8],
) -> Result<(), ExtractError> {
    let mut s = Stream::new(p, input)?;
    if bit_skip > 0 {
        // SAFETY: initialised stream; libaec checks the offset against its input.
        check(
            unsafe { sys::aec_buffer_seek(s.raw.as_mut(), usize::from(bit_skip)) },
            "aec_buffer_seek",
        )?;
    }
    let got = s.decode_into(out)?;
    if got != out.len() {
        return Err(ExtractError::corrupt(
            0,
            format!(
                "the CCSDS data decodes to {got} bytes where {} were expected",
                out.len()
            ),
        ));
    }
    Ok(())
}
