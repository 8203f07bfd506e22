//! The same GRIB series through the same plan files in MultIO's `multio-feed --decode` and in
//! `fieldstore pipeline run`: values agree to a relative 1e-12 and the outputs' metadata
//! (window, steps, operation, param) agree. Where MultIO has a known defect the series keeps
//! clear of it (docs/pipelines.md; each divergence has its own unit test).
//!
//! MultIO comes from PyPI (`multiolib`) in target/py-venv-multio, made by scripts/test;
//! without it the test is skipped, unless FIELDSTORE_NEED_MULTIO=1 (scripts/test) makes that a
//! failure.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "common/skip.rs"]
mod skip;

const FS: &str = env!("CARGO_BIN_EXE_fieldstore");

struct Multio {
    feed: PathBuf,
    libs: String,
}

fn multio() -> Option<Multio> {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/py-venv-multio/lib");
    let site = std::fs::read_dir(&venv)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.join("multiolib/bin/multio-feed").is_file())?;
    Some(Multio {
        feed: site.join("multiolib/bin/multio-feed"),
        // The wheel's run path names `atlaslib-ecmwf`, the package installs as `atlaslib_ecmwf`.
        libs: site.join("atlaslib_ecmwf/lib64").display().to_string(),
    })
}

fn multio_or_skip(test: &str) -> Option<Multio> {
    let m = multio();
    if m.is_none() {
        let need = std::env::var_os("FIELDSTORE_NEED_MULTIO").is_some();
        assert!(
            !need,
            "{test}: MultIO (PyPI multiolib in target/py-venv-multio) is required here (FIELDSTORE_NEED_MULTIO)"
        );
        skip::skip(
            test,
            "MultIO (PyPI multiolib in target/py-venv-multio, made by scripts/test)",
            false,
        );
    }
    m
}

/// Writes a series with grib_filter: one message per (step, level), values from `value`.
struct Series<'a> {
    sample: &'a str,
    edition: i64,
    param: i64,
    levtype: &'a str,
    levels: &'a [i64],
    steps: Vec<i64>,
    /// A point index whose value is missing in every message.
    missing_point: Option<usize>,
}

fn value(step: i64, level: i64, i: usize) -> f64 {
    // Positive everywhere (MultIO's maximum is wrong for negative values), varied per point.
    let base = 200.0 + (level as f64) * 0.01 + (i % 17) as f64;
    base + ((step * 7 + i as i64 * 3) % 23) as f64 * 0.37 + (step as f64) * 0.001
}

fn write_series(dir: &Path, name: &str, s: &Series) -> PathBuf {
    let sample = Path::new("/usr/share/eccodes/samples").join(s.sample);
    let out = dir.join(format!("{name}.grib"));
    let n: usize = {
        let o = Command::new("grib_get")
            .args(["-p", "numberOfValues"])
            .arg(&sample)
            .output()
            .expect("grib_get (libeccodes-tools)");
        String::from_utf8_lossy(&o.stdout)
            .trim()
            .parse()
            .expect("numberOfValues")
    };
    let mut rules = String::new();
    for step in &s.steps {
        for level in s.levels {
            rules.push_str(&format!(
                "set edition={};\nset centre=98;\nset setLocalDefinition=1;\nset localDefinitionNumber=1;\nset class=\"od\";\nset stream=\"oper\";\nset type=\"fc\";\nset expver=\"0001\";\nset date=20250101;\nset time=0;\nset paramId={};\n",
                s.edition, s.param
            ));
            if s.levtype == "pl" {
                rules.push_str(&format!(
                    "set typeOfLevel=\"isobaricInhPa\";\nset level={level};\n"
                ));
            }
            rules.push_str(&format!(
                "set step={step};\nset bitsPerValue=0;\nset packingType=\"grid_ieee\";\n"
            ));
            let vals: Vec<String> = (0..n)
                .map(|i| {
                    if Some(i) == s.missing_point {
                        "9999".to_string()
                    } else {
                        format!("{}", value(*step, *level, i))
                    }
                })
                .collect();
            if s.missing_point.is_some() {
                rules.push_str("set bitmapPresent=1;\nset missingValue=9999;\n");
            }
            rules.push_str(&format!(
                "set values={{{}}};\nappend \"{}\";\n",
                vals.join(","),
                out.display()
            ));
        }
    }
    let rf = dir.join(format!("{name}.rules"));
    std::fs::write(&rf, rules).unwrap();
    let o = Command::new("grib_filter")
        .arg(&rf)
        .arg(&sample)
        .output()
        .expect("grib_filter (libeccodes-tools)");
    assert!(
        o.status.success(),
        "grib_filter: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// The metadata of each emitted field, from `print` lines (both print `metadata={...}, payload-size`).
fn printed(text: &str) -> Vec<serde_json::Map<String, serde_json::Value>> {
    text.lines()
        .filter(|l| l.contains("tag=Field"))
        .filter_map(|l| {
            let start = l.find("metadata=")? + "metadata=".len();
            let end = l.rfind(", payload-size")?;
            serde_json::from_str::<serde_json::Value>(&l[start..end])
                .ok()?
                .as_object()
                .cloned()
        })
        .collect()
}

fn doubles(path: &Path) -> Vec<f64> {
    let b = std::fs::read(path).unwrap_or_default();
    b.chunks_exact(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

const KEYS: &[&str] = &[
    "operation",
    "operation-frequency",
    "startStepInHours",
    "endStepInHours",
    "previousDate",
    "previousTime",
    "currentDate",
    "currentTime",
    "startDate",
    "startTime",
    "step",
    "step-frequency",
    "param",
    "paramId",
    "levtype",
    "level",
    "date",
    "time",
    "gridType",
    "misc-globalSize",
    "bitmapPresent",
    "missingValue",
];

/// Runs `plan` over `grib` in both; compares the raw outputs named `outputs` and the printed
/// metadata. Returns (fields compared, values compared, largest relative difference).
fn compare(
    m: &Multio,
    dir: &Path,
    plan: &str,
    grib: &Path,
    outputs: &[&str],
) -> (usize, usize, f64) {
    let plan = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/pipelines")
        .join(plan);
    let (a, b) = (dir.join("multio"), dir.join("fieldstore"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let mo = Command::new(&m.feed)
        .arg(grib)
        .arg("--decode")
        .arg(format!("--plans={}", plan.display()))
        .env("LD_LIBRARY_PATH", &m.libs)
        .env("OUT_DIR", &a)
        .output()
        .unwrap();
    let mtext =
        String::from_utf8_lossy(&mo.stdout).to_string() + &String::from_utf8_lossy(&mo.stderr);
    assert!(mo.status.success(), "multio-feed failed: {mtext}");
    let fo = Command::new(FS)
        .args(["pipeline", "run", "-q"])
        .arg(&plan)
        .arg(grib)
        .env("OUT_DIR", &b)
        .output()
        .unwrap();
    let ftext = String::from_utf8_lossy(&fo.stdout).to_string();
    assert!(
        fo.status.success(),
        "fieldstore pipeline run failed: {}",
        String::from_utf8_lossy(&fo.stderr)
    );
    let (pm, pf) = (printed(&mtext), printed(&ftext));
    assert!(!pm.is_empty(), "MultIO printed no fields: {mtext}");
    assert_eq!(pm.len(), pf.len(), "number of outputs");
    for (i, (x, y)) in pm.iter().zip(&pf).enumerate() {
        for k in KEYS {
            assert_eq!(
                x.get(*k),
                y.get(*k),
                "output {i}, key {k}:\nmultio {x:?}\nfieldstore {y:?}"
            );
        }
    }
    let (mut values, mut worst) = (0, 0.0f64);
    for name in outputs {
        let (va, vb) = (doubles(&a.join(name)), doubles(&b.join(name)));
        assert!(!va.is_empty(), "{name}: MultIO wrote nothing");
        assert_eq!(va.len(), vb.len(), "{name}: number of values");
        for (i, (x, y)) in va.iter().zip(&vb).enumerate() {
            let rel = (x - y).abs() / x.abs().max(1e-300);
            worst = worst.max(rel);
            assert!(rel <= 1e-12, "{name} value {i}: MultIO {x}, fieldstore {y}");
        }
        values += va.len();
    }
    (pm.len(), values, worst)
}

#[test]
fn same_outputs_as_multio() {
    let Some(m) = multio_or_skip("same_outputs_as_multio") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        // Hourly 2t over 3 days, GRIB2 regular lat-lon, one point missing throughout.
        (
            "daily-sfc.yaml",
            &["daily.raw"][..],
            Series {
                sample: "regular_ll_sfc_grib2.tmpl",
                edition: 2,
                param: 167,
                levtype: "sfc",
                levels: &[0],
                steps: (0..=72).collect(),
                missing_point: Some(5),
            },
        ),
        // Hourly 2t, GRIB1 reduced Gaussian, over 3 days.
        (
            "daily-sfc.yaml",
            &["daily.raw"][..],
            Series {
                sample: "reduced_gg_sfc_grib1.tmpl",
                edition: 1,
                param: 167,
                levtype: "sfc",
                levels: &[0],
                steps: (0..=72).collect(),
                missing_point: None,
            },
        ),
        // 6-hourly temperature on three pressure levels over 6 days, GRIB2 reduced Gaussian.
        (
            "levels.yaml",
            &["levels.raw", "levels2.raw"][..],
            Series {
                sample: "reduced_gg_pl_32_grib2.tmpl",
                edition: 2,
                param: 130,
                levtype: "pl",
                levels: &[500, 850, 1000],
                steps: (0..=144).step_by(6).collect(),
                missing_point: None,
            },
        ),
    ];
    for (i, (plan, outputs, series)) in cases.iter().enumerate() {
        let case = dir.path().join(format!("case{i}"));
        std::fs::create_dir_all(&case).unwrap();
        let grib = write_series(&case, "series", series);
        let (fields, values, worst) = compare(&m, &case, plan, &grib, outputs);
        eprintln!(
            "case {i} ({plan}, GRIB{} {}): {fields} outputs, {values} values, largest relative difference {worst:e}",
            series.edition, series.sample
        );
    }
}
