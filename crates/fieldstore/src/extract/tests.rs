//! Differential tests: every extracted value bit-identical to an ecCodes full decode (NaN where
//! ecCodes gives its missing value), on fields made with ecCodes.

use std::ops::Range;
use std::sync::OnceLock;

use proptest::prelude::*;

use super::*;
use crate::grib::handle::Handle;
use crate::grib::{Decoded, KeyValue};

/// One made field: what it is, its bytes.
pub(crate) struct Made {
    pub name: String,
    pub bytes: Vec<u8>,
}

/// Makes a field from `sample`, setting `longs` then `strings` keys, with values from `f` and
/// every `missing_every`-th point missing.
pub(crate) fn make(
    sample: &str,
    strings: &[(&str, &str)],
    longs: &[(&str, i64)],
    missing_every: Option<usize>,
    f: impl Fn(usize) -> f64,
) -> Vec<u8> {
    let mut h = Handle::from_sample(sample).unwrap();
    for (k, v) in strings {
        h.set_string(k, v).unwrap();
    }
    for (k, v) in longs {
        h.set_long(k, *v).unwrap();
    }
    // GRIB2 keeps numberOfDataPoints as coded until the values are set: count from Ni x Nj.
    let get = |k: &str| {
        longs
            .iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| *v as usize)
    };
    let n = match (get("Ni"), get("Nj")) {
        (Some(ni), Some(nj)) => ni * nj,
        _ => h.get_long("numberOfDataPoints").unwrap() as usize,
    };
    let mut values: Vec<f64> = (0..n).map(&f).collect();
    if let Some(every) = missing_every {
        h.set_double("missingValue", 9999.0).unwrap();
        h.set_long("bitmapPresent", 1).unwrap();
        for (i, v) in values.iter_mut().enumerate() {
            if (i * 7 + i / 13) % every == 0 {
                *v = 9999.0;
            }
        }
    }
    h.set_doubles("values", &values).unwrap();
    h.message().unwrap()
}

fn wave(i: usize) -> f64 {
    let x = i as f64;
    250.0 + 30.0 * (x * 0.013).sin() + 7.0 * (x * 0.71).cos() + (i % 17) as f64 * 0.37
}

/// The fields: every packing, widths 1..24, bitmaps, constants, GRIB1 and GRIB2.
pub(crate) fn fields() -> &'static [Made] {
    static FIELDS: OnceLock<Vec<Made>> = OnceLock::new();
    FIELDS.get_or_init(|| {
        let mut out = Vec::new();
        let mut add = |name: String, bytes: Vec<u8>| out.push(Made { name, bytes });
        // A 1 degree grid is 65160 points: 16 RSIs, the last one partial.
        let grid: &[(&str, i64)] = &[
            ("Ni", 360),
            ("Nj", 181),
            ("iDirectionIncrement", 1_000_000),
            ("jDirectionIncrement", 1_000_000),
            ("latitudeOfFirstGridPoint", 90_000_000),
            ("latitudeOfLastGridPoint", -90_000_000),
            ("longitudeOfFirstGridPoint", 0),
            ("longitudeOfLastGridPoint", 359_000_000),
        ];
        for packing in ["grid_simple", "grid_ccsds"] {
            for bits in [1, 5, 8, 12, 16, 17, 20, 24] {
                for missing in [None, Some(5)] {
                    let mut longs = grid.to_vec();
                    longs.push(("bitsPerValue", bits));
                    add(
                        format!("grib2 {packing} {bits} bits missing {missing:?}"),
                        make("GRIB2", &[("packingType", packing)], &longs, missing, wave),
                    );
                }
            }
            let mut longs = grid.to_vec();
            longs.push(("decimalScaleFactor", 2));
            longs.push(("bitsPerValue", 16));
            add(
                format!("grib2 {packing} decimal scale"),
                make("GRIB2", &[("packingType", packing)], &longs, None, wave),
            );
            for missing in [None, Some(3)] {
                add(
                    format!("grib2 {packing} constant missing {missing:?}"),
                    make("GRIB2", &[("packingType", packing)], grid, missing, |_| {
                        273.25
                    }),
                );
            }
            add(
                format!("grib2 {packing} reduced gaussian"),
                make(
                    "reduced_gg_pl_32_grib2",
                    &[("packingType", packing)],
                    &[],
                    Some(4),
                    wave,
                ),
            );
        }
        for precision in [1, 2] {
            for missing in [None, Some(6)] {
                let mut longs = grid.to_vec();
                longs.push(("precision", precision));
                add(
                    format!("grib2 ieee precision {precision} missing {missing:?}"),
                    make(
                        "GRIB2",
                        &[("packingType", "grid_ieee")],
                        &longs,
                        missing,
                        wave,
                    ),
                );
            }
        }
        for bits in [3, 12, 16, 24] {
            for missing in [None, Some(4)] {
                add(
                    format!("grib1 simple {bits} bits missing {missing:?}"),
                    make("GRIB1", &[], &[("bitsPerValue", bits)], missing, wave),
                );
            }
        }
        add(
            "grib1 constant".into(),
            make("GRIB1", &[], &[], None, |_| 1.5),
        );
        add(
            "grib1 reduced gaussian".into(),
            make(
                "reduced_gg_pl_32_grib1",
                &[],
                &[("decimalScaleFactor", 1)],
                Some(5),
                wave,
            ),
        );
        add(
            "grib2 one point".into(),
            make("GRIB2", &[], &[("Ni", 1), ("Nj", 1)], None, |_| 42.125),
        );
        add(
            "grib2 one point ccsds".into(),
            make(
                "GRIB2",
                &[("packingType", "grid_ccsds")],
                &[("Ni", 1), ("Nj", 1), ("bitsPerValue", 12)],
                None,
                |_| 42.125,
            ),
        );
        add(
            "grib2 jpeg (unsupported: ecCodes fallback)".into(),
            make("reduced_gg_sfc_jpeg_grib2", &[], &[], Some(9), wave),
        );
        out
    })
}

/// ecCodes' values, decoded once per field.
fn truth() -> &'static [Vec<f64>] {
    static TRUTH: OnceLock<Vec<Vec<f64>>> = OnceLock::new();
    TRUTH.get_or_init(|| {
        fields()
            .iter()
            .map(|m| Decoded::new(&m.bytes).unwrap().values().unwrap())
            .collect()
    })
}

fn infos() -> &'static [ExtractInfo] {
    static INFOS: OnceLock<Vec<ExtractInfo>> = OnceLock::new();
    INFOS.get_or_init(|| {
        fields()
            .iter()
            .map(|m| ExtractInfo::build(&m.bytes).unwrap_or_else(|e| panic!("{}: {e}", m.name)))
            .collect()
    })
}

/// Extracts through plan + only the planned pieces, and through the encoded info.
fn check(i: usize, ranges: &[Range<u64>]) {
    let m = &fields()[i];
    let info = &infos()[i];
    let truth = &truth()[i];
    let decoded = ExtractInfo::decode(&info.encode()).unwrap();
    assert_eq!(&decoded, info, "{}: encode/decode", m.name);
    let plan = decoded.plan(ranges).unwrap();
    let pieces: Vec<Fetched<'_>> = plan
        .iter()
        .map(|r| (r.clone(), &m.bytes[r.start as usize..r.end as usize]))
        .collect();
    let got = decoded
        .extract(ranges, &pieces)
        .unwrap_or_else(|e| panic!("{}: {e}", m.name));
    assert_eq!(got.len(), ranges.len());
    for (r, g) in ranges.iter().zip(&got) {
        assert_eq!(g.values.len() as u64, r.end - r.start);
        assert_eq!(g.mask.len() as u64, (r.end - r.start).div_ceil(64));
        for (k, p) in r.clone().enumerate() {
            let want = truth[p as usize];
            let have = g.values[k];
            assert!(
                want.to_bits() == have.to_bits() || (want.is_nan() && have.is_nan()),
                "{}: point {p}: ecCodes {want:?}, extract {have:?}",
                m.name
            );
            let bit = g.mask[k / 64] >> (k % 64) & 1 == 1;
            assert_eq!(bit, !want.is_nan(), "{}: mask of point {p}", m.name);
        }
    }
}

#[test]
fn every_field_whole_and_in_pieces_matches_eccodes() {
    for (i, m) in fields().iter().enumerate() {
        let n = infos()[i].number_of_data_points;
        assert_eq!(n as usize, truth()[i].len(), "{}", m.name);
        check(i, &[0..n]);
        let step = (n / 7).max(1);
        let ranges: Vec<_> = (0..n)
            .step_by(step as usize)
            .map(|s| s..(s + step / 2 + 1).min(n))
            .collect();
        check(i, &ranges);
    }
}

#[test]
fn packings_are_recognised_and_the_grid_hash_is_eccodes() {
    let mut unsupported = 0;
    for (i, m) in fields().iter().enumerate() {
        let info = &infos()[i];
        let d = Decoded::new(&m.bytes).unwrap();
        let kind = info.packing.name();
        let Some(KeyValue::String(eccodes)) = d.get("packingType").unwrap() else {
            panic!("{}: no packingType", m.name)
        };
        let Some(KeyValue::Long(bits)) = d.get("bitsPerValue").unwrap() else {
            panic!("{}: no bitsPerValue", m.name)
        };
        let expect = match eccodes.as_str() {
            "grid_simple" | "grid_ccsds" if bits == 0 => "constant",
            p @ ("grid_simple" | "grid_ccsds" | "grid_ieee") => p,
            _ => "unsupported",
        };
        unsupported += usize::from(expect == "unsupported");
        assert_eq!(kind, expect, "{}", m.name);
        let Some(KeyValue::String(md5)) = d.get("md5GridSection").unwrap() else {
            panic!("{}: no md5GridSection", m.name)
        };
        assert_eq!(
            info.md5_grid_section_hex().as_deref(),
            Some(md5.as_str()),
            "{}",
            m.name
        );
        if let Some(KeyValue::Long(o)) = d.get("offsetBeforeData").unwrap() {
            if info.packing != Packing::Unsupported {
                assert_eq!(info.offset_before_data, o as u64, "{}", m.name);
            }
        }
    }
    assert!(unsupported > 0, "no field exercises the ecCodes fallback");
}

#[test]
fn bad_ranges_are_bad_requests() {
    let info = &infos()[0];
    let n = info.number_of_data_points;
    for bad in [
        vec![5..5],
        vec![Range { start: 6, end: 5 }],
        vec![0..n + 1],
        vec![0..10, 5..20],
        vec![10..20, 0..5],
    ] {
        let e = info.plan(&bad).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::BadRequest, "{bad:?}: {e}");
        assert!(info.extract(&bad, &[]).is_err());
    }
    // Not fetching what the plan says is an error, not garbage.
    let e = info.extract(&[0..10], &[]).unwrap_err();
    assert!(matches!(e, ExtractError::NotFetched { .. }), "{e}");
}

#[test]
fn a_masked_extract_reads_only_the_bitmap_it_needs() {
    let (i, _) = fields()
        .iter()
        .enumerate()
        .find(|(_, m)| m.name == "grib2 grid_simple 16 bits missing Some(5)")
        .unwrap();
    let info = &infos()[i];
    let plan = info.plan(&[60_000..60_001]).unwrap();
    let total: u64 = plan.iter().map(|r| r.end - r.start).sum();
    // The whole bitmap is 8145 bytes: a checkpoint's worth (512) and the values near it.
    assert!(total < 512 + 2 * 4096 * 2 + 64, "{plan:?}");
    check(i, &[60_000..60_001]);
}

/// ecCodes (through the system libaec) and our range decoder (the bundled libaec 1.1.4) in the
/// same process, interleaved: neither copy disturbs the other.
#[test]
fn eccodes_ccsds_and_our_libaec_coexist() {
    for (i, m) in fields()
        .iter()
        .enumerate()
        .filter(|(_, m)| m.name.contains("ccsds"))
    {
        for _ in 0..3 {
            let full = Decoded::new(&m.bytes).unwrap().values().unwrap();
            assert_eq!(full.len(), truth()[i].len());
            let info = ExtractInfo::build(&m.bytes).unwrap();
            let n = info.number_of_data_points;
            check(i, &[n / 3..n / 2 + 1]);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]
    #[test]
    fn random_ranges_match_eccodes(which in 0usize..1000, cuts in proptest::collection::vec(0u64..1_000_000, 1..20)) {
        let i = which % fields().len();
        let n = infos()[i].number_of_data_points;
        let mut points: Vec<u64> = cuts.iter().map(|c| c % (n + 1)).collect();
        points.sort_unstable();
        points.dedup();
        let ranges: Vec<_> = points.chunks_exact(2).filter(|c| c[0] < c[1]).map(|c| c[0]..c[1]).collect();
        check(i, &ranges);
    }
}

/// Every message of the real files (tests/data/real-grib) extracts as ecCodes decodes it, whole
/// and in ranges; the damaged ones (crates/fieldstore/tests/data/damaged-grib) fail cleanly.
#[test]
fn real_files_match_eccodes_and_damaged_ones_fail_cleanly() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut checked = 0;
    for (dir, real) in [
        (root.join("../../tests/data/real-grib"), true),
        (root.join("tests/data/damaged-grib"), false),
    ] {
        let mut paths: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "grib"))
            .collect();
        paths.sort();
        for path in paths {
            let bytes = std::fs::read(&path).unwrap();
            let Ok(messages) = crate::grib::split_slice(&bytes, "t") else {
                continue;
            };
            for (k, (_, _, m)) in messages.iter().enumerate() {
                let name = format!("{} message {k}", path.display());
                let truth = Decoded::new(m).and_then(|d| d.values());
                let info = ExtractInfo::build(m);
                let _ = Grid::from_message(m).map(|g| g.nearest(10.0, 20.0));
                let (Ok(truth), Ok(info)) = (truth, info) else {
                    continue;
                };
                let n = info.number_of_data_points;
                if truth.len() as u64 != n {
                    assert!(!real, "{name}: {n} points, ecCodes decodes {}", truth.len());
                    continue;
                }
                let step = (n / 5).max(1);
                let ranges = vec![0..n];
                let pieces: Vec<_> = (0..n)
                    .step_by(step as usize)
                    .map(|s| s..(s + step / 3 + 1).min(n))
                    .collect();
                for rs in [ranges, pieces] {
                    let got = extract_message(m, &rs).unwrap_or_else(|e| panic!("{name}: {e}"));
                    for (r, g) in rs.iter().zip(&got) {
                        for (j, p) in r.clone().enumerate() {
                            let (want, have) = (truth[p as usize], g.values[j]);
                            assert!(
                                want.to_bits() == have.to_bits()
                                    || (want.is_nan() && have.is_nan()),
                                "{name} ({}): point {p}: ecCodes {want:?}, extract {have:?}",
                                info.packing.name()
                            );
                        }
                    }
                }
                checked += usize::from(real);
            }
        }
    }
    assert!(checked >= 10, "only {checked} real messages checked");
}

/// GribJump itself (`extract_from_paths` after `gribjump-scan-files`) on the same messages
/// and ranges: the same values and masks. Runs when FIELDSTORE_GRIBJUMP_PYTHON names a python
/// with pygribjump and gribjumplib (`scripts/gribjump-install` prints one).
#[test]
fn gribjump_gives_the_same_values_and_masks() {
    let Some(python) = std::env::var_os("FIELDSTORE_GRIBJUMP_PYTHON") else {
        eprintln!("skipped: FIELDSTORE_GRIBJUMP_PYTHON is not set (scripts/gribjump-install)");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fields.grib");
    let mut file = Vec::new();
    let mut requests = Vec::new();
    let mut which = Vec::new();
    for (i, m) in fields().iter().enumerate() {
        let info = &infos()[i];
        // GribJump extracts only simple and CCSDS packing; on a constant field with a bitmap it
        // returns the reference value at missing points, where ecCodes (and we) say missing.
        let constant_masked = info.packing == Packing::Constant && info.bitmap.is_some();
        // GribJump's CCSDS decoder scales by (-10)^D where ecCodes scales by 10^-D
        // (`codes_power<double>(decimal_scale_factor_, -10)`, compressors/Ccsds.cc at
        // e35e735a): 100x for D=2, where ecCodes 2.28 and 2.50 and we agree.
        let ccsds_decimal =
            matches!(info.packing, Packing::Ccsds(_)) && info.decimal_scale_factor != 0;
        if !matches!(
            info.packing,
            Packing::Simple | Packing::Ccsds(_) | Packing::Constant
        ) || constant_masked
            || ccsds_decimal
        {
            continue;
        }
        let n = info.number_of_data_points;
        let step = (n / 6).max(1);
        let ranges: Vec<Range<u64>> = (0..n)
            .step_by(step as usize)
            .map(|s| s..(s + step / 2 + 1).min(n))
            .collect();
        requests.push(serde_json::json!({
            "offset": file.len(),
            "ranges": ranges.iter().map(|r| [r.start, r.end]).collect::<Vec<_>>(),
        }));
        file.extend_from_slice(&m.bytes);
        which.push((i, ranges));
    }
    std::fs::write(&path, &file).unwrap();
    let req_path = dir.path().join("requests.json");
    std::fs::write(&req_path, serde_json::to_vec(&requests).unwrap()).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/extract/gribjump_reference.py"
    );
    let out = std::process::Command::new(&python)
        .arg(script)
        .arg(&path)
        .arg(&req_path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "gribjump: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    // GribJump logs to standard output too: the answer is the last line.
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.lines().rfind(|l| l.starts_with('[')).unwrap_or("");
    let answer: Vec<Vec<serde_json::Value>> =
        serde_json::from_str(last).unwrap_or_else(|e| panic!("gribjump's answer: {e}: {stdout}"));
    assert_eq!(answer.len(), which.len());
    for ((i, ranges), theirs) in which.iter().zip(&answer) {
        let m = &fields()[*i];
        let ours = extract_message(&m.bytes, ranges).unwrap();
        assert_eq!(ours.len(), theirs.len(), "{}", m.name);
        for (o, t) in ours.iter().zip(theirs) {
            let values: Vec<u64> = serde_json::from_value(t["values"].clone()).unwrap();
            let mask: Vec<u64> = serde_json::from_value(t["mask"].clone()).unwrap();
            assert_eq!(o.mask, mask, "{}: masks", m.name);
            assert_eq!(values.len(), o.values.len(), "{}", m.name);
            for (k, (a, b)) in o.values.iter().zip(&values).enumerate() {
                let b = f64::from_bits(*b);
                assert!(
                    a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                    "{}: value {k}: ours {a:?}, GribJump {b:?}",
                    m.name
                );
            }
        }
    }
    eprintln!("GribJump agreed on {} fields", which.len());
}

/// The encoding stays small: a few dozen bytes, plus about 2 bytes per 4096 points of a bitmap
/// and per CCSDS RSI; and every truncation of it is refused.
#[test]
fn encodings_are_small_and_truncations_are_refused() {
    for (i, m) in fields().iter().enumerate() {
        let info = &infos()[i];
        let e = info.encode();
        let rsis = match &info.packing {
            Packing::Ccsds(c) => c.offsets.len(),
            _ => 0,
        };
        let checkpoints = info.bitmap.as_ref().map_or(0, |b| b.checkpoints.len());
        assert!(
            e.len() <= 64 + 2 * checkpoints + 4 * rsis,
            "{}: {} bytes",
            m.name,
            e.len()
        );
        for cut in 0..e.len() {
            assert!(
                ExtractInfo::decode(&e[..cut]).is_err(),
                "{}: cut at {cut}",
                m.name
            );
        }
        let mut longer = e.clone();
        longer.push(0);
        assert!(ExtractInfo::decode(&longer).is_err());
        if m.name == "grib2 grid_ccsds 16 bits missing Some(5)"
            || m.name == "grib2 grid_simple 16 bits missing None"
        {
            eprintln!("{}: {} bytes", m.name, e.len());
        }
    }
}

/// Inputs the fuzz target `extract_info` found (`fuzz/regressions/extract_info/`, the message
/// then 8 bytes choosing ranges): each either fails cleanly or extracts ecCodes' values, with
/// the mask saying present exactly where ecCodes has a value.
#[test]
fn fuzz_regressions_extract_as_eccodes_decodes() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/regressions/extract_info");
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let message = &data[..data.len() - 8];
        let Ok(info) = ExtractInfo::build(message) else {
            continue;
        };
        let n = info.number_of_data_points;
        let ranges = [0..n];
        let Ok(plan) = info.plan(&ranges) else {
            continue;
        };
        let pieces: Vec<_> = plan
            .iter()
            .filter_map(|r| Some((r.clone(), message.get(r.start as usize..r.end as usize)?)))
            .collect();
        let Ok(got) = info.extract(&ranges, &pieces) else {
            continue;
        };
        let Ok(truth) =
            Decoded::new(&message[..info.total_length as usize]).and_then(|d| d.values())
        else {
            continue;
        };
        for (p, want) in truth.iter().enumerate() {
            let have = got[0].values[p];
            let present = got[0].mask[p / 64] >> (p % 64) & 1 == 1;
            assert!(
                want.to_bits() == have.to_bits() || (want.is_nan() && have.is_nan()),
                "{}: point {p}: ecCodes {want:?}, extract {have:?}",
                path.display()
            );
            assert_eq!(
                present,
                !want.is_nan(),
                "{}: point {p} ({want:?})",
                path.display()
            );
        }
    }
}

/// What the fuzz target `extract_info_decode` found: information with a NaN reference value
/// (a GRIB 2 message may carry one) decodes, and encodes back bit for bit.
#[test]
fn a_nan_reference_value_round_trips_bit_for_bit() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/regressions/extract_info_decode/nan-reference");
    let data = std::fs::read(path).unwrap();
    let (&len, rest) = data.split_first().unwrap();
    let encoded = &rest[..usize::from(len).min(rest.len())];
    let info = ExtractInfo::decode(encoded).unwrap();
    assert!(info.reference_value.is_nan());
    let again = info.encode();
    assert_eq!(ExtractInfo::decode(&again).unwrap().encode(), again);
}

/// libaec's decoder checks no block size and wrote past its heap buffer (one RSI) on a block
/// of 1 sample (found by fuzzing `extract_info_decode`; valgrind: invalid writes in
/// `put_sample`): such parameters are refused in stored information, by the builder, and before
/// ecCodes (whose libaec has the same fault) decodes the message.
#[test]
fn ccsds_parameters_no_encoder_writes_never_reach_libaec() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/regressions/extract_info_decode/aec-block-size-1");
    let data = std::fs::read(path).unwrap();
    let (&len, rest) = data.split_first().unwrap();
    let e = ExtractInfo::decode(&rest[..usize::from(len).min(rest.len())]).unwrap_err();
    assert!(e.to_string().contains("CCSDS block size"), "{e}");

    let good = make(
        "GRIB2",
        &[("packingType", "grid_ccsds")],
        &[("Ni", 40), ("Nj", 20), ("bitsPerValue", 16)],
        None,
        wave,
    );
    ExtractInfo::build(&good).unwrap();
    // Section 5's octet 23 (1-based) is the block size.
    let mut s5 = 16;
    while good[s5 + 4] != 5 {
        s5 += u32::from_be_bytes(good[s5..s5 + 4].try_into().unwrap()) as usize;
    }
    for block in [0u8, 1, 7, 24, 128] {
        let mut bad = good.clone();
        bad[s5 + 22] = block;
        let e = ExtractInfo::build(&bad).unwrap_err();
        assert!(e.to_string().contains("CCSDS block size"), "{block}: {e}");
        let e = Decoded::new(&bad).and_then(|d| d.values()).unwrap_err();
        assert!(e.to_string().contains("CCSDS block size"), "{block}: {e}");
    }
}
