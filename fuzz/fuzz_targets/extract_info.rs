#![no_main]
//! Extraction information built from untrusted bytes: it builds or fails cleanly; when it
//! builds, extracting ranges never panics, and where ecCodes decodes the message too, every
//! value is ecCodes' (NaN where ecCodes says missing) and the mask says which are present.

use fieldstore::extract::{ExtractInfo, Packing};
use fieldstore::grib::Decoded;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // The last 8 bytes choose the ranges; the rest is the message.
    let Some(split) = data.len().checked_sub(8) else {
        return;
    };
    let (message, seed) = data.split_at(split);
    let Ok(info) = ExtractInfo::build(message) else {
        return;
    };
    // The encoding round-trips.
    // Compared as encoded: a NaN reference value (IEEE in GRIB 2) is kept bit for bit, and
    // NaN is not equal to itself.
    let encoded = info.encode();
    assert_eq!(
        ExtractInfo::decode(&encoded).map(|i| i.encode()).as_deref(),
        Ok(&encoded[..])
    );
    let n = info.number_of_data_points;
    if n == 0 || n > 1 << 20 {
        return;
    }
    let mut x = u64::from_le_bytes(seed.try_into().unwrap_or([0; 8])) | 1;
    let mut cuts: Vec<u64> = (0..6)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % (n + 1)
        })
        .collect();
    cuts.sort_unstable();
    cuts.dedup();
    let ranges: Vec<_> = cuts
        .chunks_exact(2)
        .filter(|c| c[0] < c[1])
        .map(|c| c[0]..c[1])
        .collect();
    let Ok(plan) = info.plan(&ranges) else {
        return;
    };
    let pieces: Vec<_> = plan
        .iter()
        .filter_map(|r| Some((r.clone(), message.get(r.start as usize..r.end as usize)?)))
        .collect();
    let Ok(got) = info.extract(&ranges, &pieces) else {
        return;
    };
    if info.packing == Packing::Unsupported {
        return;
    }
    let Ok(d) = Decoded::new(&message[..info.total_length as usize]) else {
        return;
    };
    let Ok(truth) = d.values() else {
        return;
    };
    if truth.len() as u64 != n {
        return;
    }
    for (r, g) in ranges.iter().zip(&got) {
        for (k, p) in r.clone().enumerate() {
            let (want, have) = (truth[p as usize], g.values[k]);
            assert!(
                want.to_bits() == have.to_bits() || (want.is_nan() && have.is_nan()),
                "point {p}: ecCodes {want:?}, extract {have:?}"
            );
            assert_eq!(g.mask[k / 64] >> (k % 64) & 1 == 1, !want.is_nan());
        }
    }
});
