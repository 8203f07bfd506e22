//! Differential tests of the native MARS key reader against ecCodes: on every message of every
//! real GRIB file in the repository (and of the files under `FIELDSTORE_GRIB_CORPUS`, a
//! directory, when set), and on messages ecCodes generates for each template, local definition,
//! level type and parameter family the reader claims. For each message the native reader either
//! declines or gives exactly ecCodes' keys, in ecCodes' order.

use std::path::{Path, PathBuf};

use super::mars::{mars_keys, Decline};
use crate::grib::handle::Handle;
use crate::grib::{eccodes_mars_keys, split_slice};

/// Counts of one comparison run.
#[derive(Debug, Default)]
struct Tally {
    messages: usize,
    native: usize,
    declined: Vec<String>,
}

impl Tally {
    /// Compares one message; panics on a native answer that differs from ecCodes'.
    fn check(&mut self, what: &str, message: &[u8]) {
        self.messages += 1;
        match mars_keys(message) {
            Ok(native) => {
                let ecc = eccodes_mars_keys(message).unwrap_or_else(|e| {
                    panic!("{what}: native keys {native} where ecCodes fails: {e}")
                });
                let pairs = |k: &crate::model::Key| {
                    k.iter()
                        .map(|(a, b)| format!("{a}={b}"))
                        .collect::<Vec<_>>()
                        .join(",")
                };
                assert_eq!(pairs(&native), pairs(&ecc), "{what}: native vs ecCodes");
                self.native += 1;
            }
            Err(d) => self.declined.push(format!("{what}: {d}")),
        }
    }
}

fn grib_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            grib_files(&p, out);
        } else {
            let name = p.file_name().and_then(|n| n.to_str()).unwrap_or_default();
            if [".grib", ".grb", ".grib1", ".grib2", ".grb2", ".data"]
                .iter()
                .any(|x| name.ends_with(x))
                || name.contains(".grib")
            {
                out.push(p);
            }
        }
    }
}

/// Every message of every real file: native answers equal ecCodes'.
#[test]
fn native_keys_equal_eccodes_on_every_real_message() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = Vec::new();
    for d in [
        root.join("../../tests/data"),
        root.join("tests/data"),
        root.join("../fieldstore-cli/tests"),
        root.join("../../fuzz/regressions"),
    ] {
        grib_files(&d, &mut files);
    }
    if let Some(extra) = std::env::var_os("FIELDSTORE_GRIB_CORPUS") {
        grib_files(Path::new(&extra), &mut files);
    }
    files.sort();
    let mut t = Tally::default();
    for f in &files {
        let bytes = std::fs::read(f).unwrap();
        // The framing skips what is not a message, as the archive path does.
        let Ok(messages) = split_slice(&bytes, "data") else {
            continue;
        };
        for (i, (_, _, m)) in messages.iter().enumerate() {
            // A message ecCodes itself cannot read is not compared (the native reader may
            // decline it or not; the archive path's framing and checks refuse it first).
            t.check(&format!("{} message {}", f.display(), i + 1), m);
        }
    }
    eprintln!(
        "real files: {} files, {} messages, {} read natively (equal to ecCodes), {} declined",
        files.len(),
        t.messages,
        t.native,
        t.declined.len()
    );
    for d in t.declined.iter().take(40) {
        eprintln!("  declined: {d}");
    }
    assert!(t.messages > 500, "the real files were not found");
    // The ECMWF GRIB2 messages of the real files (hpa_and_pa, alternate-scanning,
    // t_on_different_level_types) are claimed: some must be read natively.
    assert!(t.native >= 3, "{t:?}");
}

/// A GRIB2 message with ECMWF's local definition 1, as the archive's producers write them.
fn ecmwf_grib2() -> Handle<'static> {
    let mut h = Handle::from_sample("GRIB2").unwrap();
    h.set_long("setLocalDefinition", 1).unwrap();
    h.set_long("localDefinitionNumber", 1).unwrap();
    h
}

/// Messages ecCodes generates over the claimed templates (4.0, 4.1, 4.8, 4.11), level types,
/// MARS labels and a spread of parameters of every discipline the tables hold: native answers
/// equal ecCodes', and the claimed shapes are answered natively.
#[test]
fn native_keys_equal_eccodes_on_generated_messages() {
    let params = [
        130, 131, 132, 133, 135, 138, 155, 157, 129, 152, 167, 168, 165, 166, 151, 134, 235, 31,
        34, 141, 164, 186, 187, 188, 59, 228, 142, 143, 144, 169, 175, 176, 177, 178, 179, 180,
        181, 182, 205, 201, 202, 228029, 228246, 228247, 260048, 3075, 140229, 140232, 8, 9, 49,
        121, 122, 123, 246, 247, 248, 75, 76, 3031, 3062, 172, 26, 43, 160, 161, 162, 163, 228003,
        228023, 228141, 228164, 260015, 262139,
    ];
    // (PDT, typeOfFirstFixedSurface, level)
    let shapes = [
        (0, 100, 500),
        (0, 100, 1000),
        (1, 100, 850),
        (0, 105, 137),
        (1, 105, 1),
        (0, 1, 0),
        (1, 1, 0),
        (0, 103, 2),
        (0, 103, 10),
        (8, 1, 0),
        (11, 1, 0),
        (8, 100, 500),
        (11, 105, 60),
    ];
    let labels = [
        ("od", "fc", "oper", "0001"),
        ("od", "an", "oper", "0001"),
        ("od", "pf", "enfo", "0001"),
        ("od", "cf", "enfo", "0001"),
        ("rd", "fc", "oper", "abcd"),
        ("ea", "an", "enda", "0001"),
    ];
    let mut t = Tally::default();
    let mut claimed = 0;
    let mut claimed_native = 0;
    for (n, (pdt, level_type, level)) in shapes.iter().enumerate() {
        for (m, param) in params.iter().enumerate() {
            let mut h = ecmwf_grib2();
            h.set_long("productDefinitionTemplateNumber", *pdt).unwrap();
            if h.set_long("paramId", *param).is_err() {
                continue;
            }
            let _ = h.set_long("typeOfFirstFixedSurface", *level_type);
            if *level_type != 1 {
                let _ = h.set_long("level", *level);
            }
            let (class, typ, stream, expver) = labels[(n + m) % labels.len()];
            let _ = h.set_string("class", class);
            let _ = h.set_string("type", typ);
            let _ = h.set_string("stream", stream);
            let _ = h.set_string("expver", expver);
            let _ = h.set_long("dataDate", 20240229);
            let _ = h.set_long("dataTime", [0, 600, 1200, 1830][m % 4]);
            if matches!(pdt, 8 | 11) {
                let _ = h.set_long("startStep", 6 * (m as i64 % 3));
                let _ = h.set_long("endStep", 6 * (m as i64 % 3) + 24);
            } else {
                let _ = h.set_long("step", [0, 6, 90, 240][n % 4]);
            }
            if matches!(pdt, 1 | 11) {
                let _ = h.set_long("number", (m % 51) as i64);
            }
            let msg = h.message().unwrap();
            let what = format!("generated 4.{pdt} levels {level_type}/{level} paramId {param}");
            let before = t.native;
            t.check(&what, &msg);
            // The shape this reader claims for the benchmark's fields and the common ones: the
            // template ecCodes kept is one of ours and the parameter is a plain one.
            // (A perturbed forecast needs an ensemble template: 4.0 or 4.8 with `pf` is declined.)
            let pf_without_member = typ == "pf" && matches!(pdt, 0 | 8);
            if matches!(*param, 130 | 131 | 132 | 133 | 129 | 157)
                && *level_type != 1
                && !pf_without_member
            {
                claimed += 1;
                if t.native > before {
                    claimed_native += 1;
                } else {
                    eprintln!("declined a claimed shape: {}", t.declined.last().unwrap());
                }
            }
        }
    }
    eprintln!(
        "generated: {} messages, {} read natively (equal to ecCodes), {} declined",
        t.messages,
        t.native,
        t.declined.len()
    );
    let mut reasons: Vec<String> = t
        .declined
        .iter()
        .map(|d| d.split(": ").skip(1).collect::<Vec<_>>().join(": "))
        .collect();
    reasons.sort();
    reasons.dedup();
    for r in reasons.iter().take(30) {
        eprintln!("  declined for: {r}");
    }
    assert!(t.messages > 500, "{t:?}");
    assert_eq!(claimed, claimed_native, "claimed shapes declined");
    assert!(t.native * 2 > t.messages, "{} of {}", t.native, t.messages);
}

/// The benchmark's and the sample command's fields (4.0 and 4.1 on pressure levels) are read
/// natively, with ecCodes' answer.
#[test]
fn sample_fields_are_read_natively() {
    for keys in [
        vec![("param", "130"), ("levelist", "500"), ("step", "6")],
        vec![
            ("param", "131"),
            ("levelist", "850"),
            ("type", "pf"),
            ("stream", "enfo"),
            ("number", "7"),
        ],
    ] {
        let msg = crate::grib::sample::make_field(&keys, 100, 1).unwrap();
        let native = mars_keys(&msg).unwrap();
        assert_eq!(native, eccodes_mars_keys(&msg).unwrap());
    }
}

/// What is not claimed is declined, never guessed: GRIB 1, other local definitions, other
/// templates, steps in minutes, a level in Pa.
#[test]
fn unclaimed_messages_are_declined() {
    let g1 = Handle::from_sample("GRIB1").unwrap().message().unwrap();
    assert_eq!(mars_keys(&g1), Err(Decline::Edition(1)));
    let plain = Handle::from_sample("GRIB2").unwrap().message().unwrap();
    assert_eq!(mars_keys(&plain), Err(Decline::NoLocalSection));
    let mut h = ecmwf_grib2();
    h.set_long("productDefinitionTemplateNumber", 2).unwrap();
    assert_eq!(
        mars_keys(&h.message().unwrap()),
        Err(Decline::ProductTemplate(2))
    );
    let mut h = ecmwf_grib2();
    h.set_long("indicatorOfUnitOfTimeRange", 0).unwrap();
    assert_eq!(mars_keys(&h.message().unwrap()), Err(Decline::TimeUnit(0)));
    let mut h = ecmwf_grib2();
    h.set_long("typeOfFirstFixedSurface", 100).unwrap();
    h.set_long("scaledValueOfFirstFixedSurface", 10).unwrap();
    h.set_long("scaleFactorOfFirstFixedSurface", 0).unwrap();
    assert!(matches!(
        mars_keys(&h.message().unwrap()),
        Err(Decline::LevelValue(_))
    ));
    let mut h = ecmwf_grib2();
    h.set_long("localDefinitionNumber", 15).unwrap();
    assert_eq!(
        mars_keys(&h.message().unwrap()),
        Err(Decline::LocalDefinition(15))
    );
    // Trailing garbage after the message is ecCodes' (and the framing's) to judge.
    let mut m = ecmwf_grib2().message().unwrap();
    assert!(mars_keys(&m).is_ok());
    m.extend_from_slice(b"junk");
    assert_eq!(mars_keys(&m), Err(Decline::TrailingBytes));
}

/// Hostile bytes: cutting or flipping any byte of a claimed message is a decline or ecCodes'
/// answer, never a panic or a different answer.
#[test]
fn damaged_claimed_messages_are_declined_or_equal() {
    let m =
        crate::grib::sample::make_field(&[("param", "130"), ("levelist", "500")], 16, 3).unwrap();
    let mut t = Tally::default();
    for cut in 0..m.len() {
        assert!(mars_keys(&m[..cut]).is_err());
    }
    // Header octets only (the data section's values do not reach the keys).
    for at in 0..m.len().min(200) {
        for x in [0x01u8, 0x80, 0xff] {
            let mut d = m.clone();
            d[at] ^= x;
            if mars_keys(&d).is_ok() && eccodes_mars_keys(&d).is_ok() {
                t.check(&format!("byte {at} ^ {x:#x}"), &d);
            }
        }
    }
    assert!(t.native > 0);
}
