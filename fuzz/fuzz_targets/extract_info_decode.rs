#![no_main]
//! Encoded extraction information from an untrusted source (a catalogue entry, the wire),
//! then planning and extracting against untrusted message bytes: errors, never a panic, a
//! crash in libaec or an allocation beyond what the input justifies.

use fieldstore::extract::ExtractInfo;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // First byte: how long the encoded information is; then it; then the message bytes.
    let Some((&len, rest)) = data.split_first() else {
        return;
    };
    let (encoded, message) = rest.split_at(usize::from(len).min(rest.len()));
    let Ok(info) = ExtractInfo::decode(encoded) else {
        return;
    };
    // Compared as encoded: a NaN reference value (IEEE in GRIB 2) is kept bit for bit, and
    // NaN is not equal to itself.
    let encoded = info.encode();
    assert_eq!(
        ExtractInfo::decode(&encoded).map(|i| i.encode()).as_deref(),
        Ok(&encoded[..])
    );
    let n = info.number_of_data_points.min(1 << 16);
    let ranges = [0..n.min(3), n / 2..n / 2 + 1, n.saturating_sub(2)..n];
    let ranges: Vec<_> = ranges
        .into_iter()
        .filter(|r| r.start < r.end)
        .scan(0u64, |end, r| {
            let ok = r.start >= *end;
            *end = r.end.max(*end);
            Some(ok.then_some(r))
        })
        .flatten()
        .collect();
    if let Ok(plan) = info.plan(&ranges) {
        let pieces: Vec<_> = plan
            .iter()
            .filter_map(|r| Some((r.clone(), message.get(r.start as usize..r.end as usize)?)))
            .collect();
        let _ = info.extract(&ranges, &pieces);
    }
    // The whole message as one piece, whatever the plan says.
    let _ = info.extract(&ranges, &[(0..message.len() as u64, message)]);
});
