//! The same GRIB series through the same plan files in MultIO's `multio-feed --decode` and in
//! `fieldstore pipeline run`: values agree to a relative 1e-12 and the outputs' metadata
//! (window, steps, operation, param) agree. Where MultIO has a known defect the series keeps
//! clear of it (docs/pipelines.md; each divergence has its own unit test).
//!
//! MultIO comes from PyPI (`multiolib`) in target/py-venv-multio, made by scripts/multio-install (run by scripts/test);
//! without it the test is skipped, unless FIELDSTORE_NEED_MULTIO=1 (scripts/test) makes that a
//! failure.

use std::path::{Path, PathBuf};
use std::process::Command;

#[path = "common/skip.rs"]
mod skip;

const FS: &str = env!("CARGO_BIN_EXE_fieldstore");

struct Multio {
    feed: PathBuf,
    python: PathBuf,
    libs: String,
}

/// What both sides are fed: GRIB (multio-feed, `pipeline run`) or JSON-lines messages (pymultio,
/// `pipeline feed`).
enum Input<'a> {
    Grib(&'a Path),
    Json(&'a Path),
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
        python: venv.join("../bin/python"),
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
            "MultIO (PyPI multiolib in target/py-venv-multio, made by scripts/multio-install)",
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
    /// The run's time (HHMM, as GRIB has it).
    time: i64,
    /// The value of a point at a step and level.
    value: fn(i64, i64, usize) -> f64,
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
    // grib_filter's parser runs out of memory on long rule files: a run per 100 messages.
    let mut chunks = vec![String::new()];
    for (k, step) in s.steps.iter().enumerate() {
        if k > 0 && k % 100 == 0 {
            chunks.push(String::new());
        }
        let Some(rules) = chunks.last_mut() else {
            continue;
        };
        for level in s.levels {
            rules.push_str(&format!(
                "set edition={};\nset centre=98;\nset setLocalDefinition=1;\nset localDefinitionNumber=1;\nset class=\"od\";\nset stream=\"oper\";\nset type=\"fc\";\nset expver=\"0001\";\nset date=20250101;\nset time={};\nset paramId={};\n",
                s.edition, s.time, s.param
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
                        format!("{}", (s.value)(*step, *level, i))
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
    for (k, rules) in chunks.iter().enumerate() {
        let rf = dir.join(format!("{name}.{k}.rules"));
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
    }
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

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pipelines")
}

const KEYS: &[&str] = &[
    "timespan",
    "stattype",
    "grid",
    "misc-timeIncrementInSeconds",
    "misc-distanceFromPreviousStepInSeconds",
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
    input: Input,
    outputs: &[&str],
) -> (usize, usize, f64) {
    let plan = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/pipelines")
        .join(plan);
    let (a, b) = (dir.join("multio"), dir.join("fieldstore"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let mut reference = match input {
        Input::Grib(grib) => {
            let mut c = Command::new(&m.feed);
            c.arg(grib)
                .arg("--decode")
                .arg(format!("--plans={}", plan.display()));
            c
        }
        Input::Json(messages) => {
            let mut c = Command::new(&m.python);
            c.arg(fixtures().join("pymultio_feed.py"))
                .arg(&plan)
                .arg(messages);
            c
        }
    };
    let mo = reference
        .env("LD_LIBRARY_PATH", &m.libs)
        .env("OUT_DIR", &a)
        .output()
        .unwrap();
    let mtext =
        String::from_utf8_lossy(&mo.stdout).to_string() + &String::from_utf8_lossy(&mo.stderr);
    assert!(mo.status.success(), "MultIO failed: {mtext}");
    let mut ours = Command::new(FS);
    match input {
        Input::Grib(grib) => ours.args(["pipeline", "run", "-q"]).arg(&plan).arg(grib),
        Input::Json(messages) => ours.args(["pipeline", "feed"]).arg(&plan).arg(messages),
    };
    let fo = ours.env("OUT_DIR", &b).output().unwrap();
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
            &["daily.raw", "thresholded.raw"][..],
            Series {
                sample: "regular_ll_sfc_grib2.tmpl",
                edition: 2,
                param: 167,
                levtype: "sfc",
                levels: &[0],
                steps: (0..=72).collect(),
                missing_point: Some(5),
                time: 0,
                value,
            },
        ),
        // Hourly 2t, GRIB1 reduced Gaussian, over 3 days.
        (
            "daily-sfc.yaml",
            &["daily.raw", "thresholded.raw"][..],
            Series {
                sample: "reduced_gg_sfc_grib1.tmpl",
                edition: 1,
                param: 167,
                levtype: "sfc",
                levels: &[0],
                steps: (0..=72).collect(),
                missing_point: None,
                time: 0,
                value,
            },
        ),
        // Hourly 2t over 40 days (January whole, February begun), GRIB2 regular lat-lon.
        (
            "long.yaml",
            &["monthly.raw", "six-hourly.raw"][..],
            Series {
                sample: "regular_ll_sfc_grib2.tmpl",
                edition: 2,
                param: 167,
                levtype: "sfc",
                levels: &[0],
                steps: (0..=40 * 24).collect(),
                missing_point: None,
                time: 0,
                value,
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
                time: 0,
                value,
            },
        ),
    ];
    for (i, (plan, outputs, series)) in cases.iter().enumerate() {
        let case = dir.path().join(format!("case{i}"));
        std::fs::create_dir_all(&case).unwrap();
        let grib = write_series(&case, "series", series);
        let (fields, values, worst) = compare(&m, &case, plan, Input::Grib(&grib), outputs);
        eprintln!(
            "case {i} ({plan}, GRIB{} {}): {fields} outputs, {values} values, largest relative difference {worst:e}",
            series.edition, series.sample
        );
    }
}

/// Hourly 2t and hourly precipitation accumulations over 40 days, as a model sends them
/// through MultIO's API (MARS keys, 2.12's misc keys, a first-step flush, a flush per step).
fn mtg2_messages(path: &Path) {
    let misc = r#""misc-outputStepInSeconds": 3600, "misc-integrationStepInSeconds": 3600, "misc-distanceFromPreviousStepInSeconds": 3600"#;
    let mars = r#""class": "od", "stream": "oper", "type": "fc", "expver": "0001", "levtype": "sfc", "grid": "180/90", "date": 20250101, "time": 0"#;
    let mut out = String::from("{\"flush\": {\"flushKind\": \"first-step\", \"date\": 20250101, \"time\": 0, \"step\": 0}}\n");
    for s in 0..=(40 * 24) {
        let t: Vec<String> = (0..6)
            .map(|i| {
                format!(
                    "{}",
                    250.0 + ((s * 7 + i * 5) % 31) as f64 * 0.7 - (i as f64) * 40.0
                        + (s as f64) * 0.01
                )
            })
            .collect();
        out.push_str(&format!(
            "{{\"field\": {{\"metadata\": {{\"param\": 167, \"step\": {s}, {mars}, {misc}}}, \"values\": [{}]}}}}\n",
            t.join(",")
        ));
        if s > 0 {
            let tp: Vec<String> = (0..6)
                .map(|i| format!("{}", ((s * 3 + i) % 11) as f64 * 0.0005))
                .collect();
            out.push_str(&format!(
                "{{\"field\": {{\"metadata\": {{\"param\": 228228, \"timespan\": 1, \"misc-timeIncrementInSeconds\": 3600, \"step\": {s}, {mars}, {misc}}}, \"values\": [{}]}}}}\n",
                tp.join(",")
            ));
        }
        out.push_str(&format!(
            "{{\"flush\": {{\"flushKind\": \"default\", \"step\": {s}}}}}\n"
        ));
    }
    out.push_str("{\"flush\": {\"flushKind\": \"last-step\"}}\n");
    std::fs::write(path, out).unwrap();
}

#[test]
fn same_statistics_mtg2_as_multio() {
    let Some(m) = multio_or_skip("same_statistics_mtg2_as_multio") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let messages = dir.path().join("messages.jsonl");
    mtg2_messages(&messages);
    let (fields, values, worst) = compare(
        &m,
        dir.path(),
        "mtg2.yaml",
        Input::Json(&messages),
        &["daily.raw", "monthly.raw", "rates.raw"],
    );
    eprintln!("statistics-mtg2 (mtg2.yaml, 40 days hourly): {fields} outputs, {values} values, largest relative difference {worst:e}");
}

/// The value fields of `name` in `dir`.
fn run_both(
    m: &Multio,
    dir: &Path,
    plan: &str,
    series: &Series,
) -> (Vec<f64>, Vec<f64>, String, String) {
    let grib = write_series(dir, "series", series);
    let plan = fixtures().join(plan);
    let (a, b) = (dir.join("multio"), dir.join("fieldstore"));
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    let mo = Command::new(&m.feed)
        .arg(&grib)
        .arg("--decode")
        .arg(format!("--plans={}", plan.display()))
        .env("LD_LIBRARY_PATH", &m.libs)
        .env("OUT_DIR", &a)
        .output()
        .unwrap();
    assert!(
        mo.status.success(),
        "multio-feed: {}",
        String::from_utf8_lossy(&mo.stderr)
    );
    let fo = Command::new(FS)
        .args(["pipeline", "run", "-q"])
        .arg(&plan)
        .arg(&grib)
        .env("OUT_DIR", &b)
        .output()
        .unwrap();
    assert!(
        fo.status.success(),
        "fieldstore: {}",
        String::from_utf8_lossy(&fo.stderr)
    );
    (
        doubles(&a.join("out.raw")),
        doubles(&b.join("out.raw")),
        String::from_utf8_lossy(&mo.stdout).into_owned(),
        String::from_utf8_lossy(&fo.stdout).into_owned(),
    )
}

/// MultIO's known defects, observed on the real MultIO next to fieldstore's answers
/// (docs/pipelines.md, "Where fieldstore differs"): if MultIO fixes one, this test says so.
#[test]
fn multio_defects_and_our_answers() {
    let Some(m) = multio_or_skip("multio_defects_and_our_answers") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let ramp = |step: i64, _: i64, i: usize| {
        if i == 0 {
            -5.0 - step as f64
        } else {
            250.0 + step as f64
        }
    };
    let series = |steps: Vec<i64>, time: i64| Series {
        sample: "regular_ll_sfc_grib2.tmpl",
        edition: 2,
        param: 167,
        levtype: "sfc",
        levels: &[0],
        steps,
        missing_point: None,
        time,
        value: ramp,
    };
    // 1. The maximum of negative values: DBL_MIN in MultIO.
    let d = dir.path().join("max");
    std::fs::create_dir_all(&d).unwrap();
    let (mv, fv, _, _) = run_both(&m, &d, "defects.yaml", &series((0..=24).collect(), 0));
    // Outputs: the maximum of every point, then the mean; point 0 is negative.
    eprintln!(
        "maximum of -6..-29: MultIO {:e}, fieldstore {}",
        mv[0], fv[0]
    );
    assert_eq!(
        mv[0],
        f64::MIN_POSITIVE,
        "MultIO's maximum defect is gone: update docs/pipelines.md"
    );
    assert_eq!(fv[0], -6.0);
    // 2. The first sample dropped when step 0 is not sent: 263.0 instead of 262.5.
    let d = dir.path().join("first");
    std::fs::create_dir_all(&d).unwrap();
    let (mv, fv, _, _) = run_both(&m, &d, "defects.yaml", &series((1..=24).collect(), 0));
    let mean1 = mv.len() / 2 + 1;
    eprintln!(
        "day-1 mean without step 0: MultIO {}, fieldstore {}",
        mv[mean1], fv[mean1]
    );
    assert!(
        (mv[mean1] - 263.0).abs() < 1e-9,
        "MultIO's first-sample defect is gone: update docs/pipelines.md"
    );
    assert!((fv[mean1] - 262.5).abs() < 1e-9);
    // 3. A 12 UTC run: MultIO reads time=1200 as 00:12 and cuts days at steps 23, 47.
    let d = dir.path().join("noon");
    std::fs::create_dir_all(&d).unwrap();
    let (_, _, mt, ft) = run_both(&m, &d, "defects.yaml", &series((0..=48).collect(), 1200));
    let steps = |t: &str| -> Vec<serde_json::Value> {
        printed(t)
            .iter()
            .filter(|x| x.get("operation").and_then(|o| o.as_str()) == Some("average"))
            .filter_map(|x| x.get("step").cloned())
            .collect()
    };
    eprintln!(
        "12 UTC run, days end at steps: MultIO {:?}, fieldstore {:?}",
        steps(&mt),
        steps(&ft)
    );
    assert_eq!(
        steps(&mt),
        vec![serde_json::json!(23), serde_json::json!(47)],
        "MultIO's HHMMSS defect is gone: update docs/pipelines.md"
    );
    assert_eq!(
        steps(&ft),
        vec![serde_json::json!(12), serde_json::json!(36)]
    );
    // 4. value-count-threshold with several operations: MultIO counts each valid sample once
    // per operation, so the mean beside a minimum is not the mean alone.
    let d = dir.path().join("threshold");
    std::fs::create_dir_all(&d).unwrap();
    let mut with_missing = series((0..=24).collect(), 0);
    with_missing.missing_point = Some(3);
    let grib = write_series(&d, "series", &with_missing);
    let plan = fixtures().join("threshold.yaml");
    for (who, out) in [("multio", d.join("m")), ("fieldstore", d.join("f"))] {
        std::fs::create_dir_all(&out).unwrap();
        let o = if who == "multio" {
            Command::new(&m.feed)
                .arg(&grib)
                .arg("--decode")
                .arg(format!("--plans={}", plan.display()))
                .env("LD_LIBRARY_PATH", &m.libs)
                .env("OUT_DIR", &out)
                .output()
                .unwrap()
        } else {
            Command::new(FS)
                .args(["pipeline", "run", "-q"])
                .arg(&plan)
                .arg(&grib)
                .env("OUT_DIR", &out)
                .output()
                .unwrap()
        };
        assert!(
            o.status.success(),
            "{who}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    let (m1, m2) = (doubles(&d.join("m/one.raw")), doubles(&d.join("m/two.raw")));
    let (f1, f2) = (doubles(&d.join("f/one.raw")), doubles(&d.join("f/two.raw")));
    eprintln!(
        "thresholded mean alone / beside a minimum: MultIO {} / {}, fieldstore {} / {}",
        m1[1], m2[1], f1[1], f2[1]
    );
    assert_ne!(
        m1[1], m2[1],
        "MultIO's threshold-count defect is gone: update docs/pipelines.md"
    );
    assert_eq!(f1[1], m1[1]);
    assert_eq!(f2[1], m1[1]);
}
