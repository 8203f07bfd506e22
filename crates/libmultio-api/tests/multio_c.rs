//! tests/c/model.c, a model's output loop written against MultIO's C API, built with the
//! system's `cc` and run on fieldstore's libmultio-api.so: hourly fields of three days through a
//! plan with select, statistics (daily mean, minimum, maximum), encode raw and file sinks.
//! The outputs are checked against means computed here, and, when MultIO is installed (PyPI
//! `multiolib` in target/py-venv-multio, made by scripts/test), against MultIO's own library
//! running the same binary: values to a relative 1e-12, metadata key for key. The binary is also
//! built against the header MultIO distributes on PyPI (pymultio's `processed_multio.h`) and run
//! on both. Without MultIO those comparisons skip, unless FIELDSTORE_NEED_MULTIO is set
//! (scripts/test sets it), which makes the skip a failure.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::{Map, Value};

const DAYS: usize = 3;
const NPOINTS: usize = 48;

fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A directory holding the library cargo built, under the name programs link and load
/// (`libmultio-api.so`; cargo names it `libmultio_api.so`).
fn our_lib_dir(tmp: &Path) -> PathBuf {
    let exe = std::env::current_exe().unwrap();
    let deps = exe.parent().unwrap();
    let built = [
        deps.join("libmultio_api.so"),
        deps.parent().unwrap().join("libmultio_api.so"),
    ]
    .into_iter()
    .find(|p| p.exists())
    .expect("libmultio_api.so is built beside the test binary");
    let dir = tmp.join("ours");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(built, dir.join("libmultio-api.so")).unwrap();
    dir
}

/// MultIO from PyPI: its libraries' directories (the wheel's run paths do not find them, MULTIO.md
/// 4.4), and pymultio's header.
struct Multio {
    libs: String,
    processed_header: PathBuf,
    python: PathBuf,
}

fn multio() -> Option<Multio> {
    let venv = crate_dir().join("../../target/py-venv-multio/lib");
    let site = std::fs::read_dir(&venv)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("site-packages"))
        .find(|p| p.join("multiolib/lib64/libmultio-api.so").is_file())?;
    let mut libs: Vec<String> = std::fs::read_dir(&site)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path().join("lib64"))
        .filter(|p| p.is_dir())
        .map(|p| p.display().to_string())
        .collect();
    libs.sort();
    Some(Multio {
        libs: libs.join(":"),
        processed_header: site.join("multio/processed_multio.h"),
        python: crate_dir().join("../../target/py-venv-multio/bin/python"),
    })
}

fn multio_or_skip(test: &str) -> Option<Multio> {
    let m = multio();
    if m.is_none() {
        assert!(
            std::env::var_os("FIELDSTORE_NEED_MULTIO").is_none(),
            "{test}: MultIO (PyPI multiolib in target/py-venv-multio) is required here (FIELDSTORE_NEED_MULTIO)"
        );
        let _ = writeln!(
            std::io::stderr(),
            "SKIP {test}: MultIO (PyPI multiolib in target/py-venv-multio, made by scripts/test)"
        );
    }
    m
}

/// Builds tests/c/model.c with `cc` against the header in `include` and the library in `lib`.
fn compile(include: &Path, lib: &Path, out: &Path, defines: &[&str]) {
    let status = Command::new("cc")
        .args(["-std=c99", "-Wall", "-Wextra", "-Werror"])
        .args(defines)
        .arg("-o")
        .arg(out)
        .arg(crate_dir().join("tests/c/model.c"))
        .arg("-I")
        .arg(include)
        .arg("-L")
        .arg(lib)
        .args(["-lmultio-api", "-lm"])
        .status()
        .expect("run cc");
    assert!(status.success(), "compiling model.c failed");
}

const PLAN: &str = r#"
plans:
  - name: t2m
    actions:
      - type: select
        match:
          - paramId: [167]
      - type: statistics
        output-frequency: 1d
        operations: [average, minimum, maximum]
        options:
          initial-condition-present: true
      - type: print
        only-fields: true
      - type: encode
        format: raw
      - type: sink
        sinks:
          - type: file
            path: "{~}/out-167.raw"
            append: false
            per-server: false
  - name: d2m
    actions:
      - type: select
        match:
          - paramId: [168]
      - type: statistics
        output-frequency: 1d
        operations: [average]
        options:
          initial-condition-present: true
      - type: print
        only-fields: true
      - type: encode
        format: raw
      - type: sink
        sinks:
          - type: file
            path: "{~}/out-168.raw"
            append: false
            per-server: false
"#;

struct Run {
    printed: Vec<Map<String, Value>>,
    t2m: Vec<f64>,
    d2m: Vec<f32>,
}

/// Runs `exe` with `LD_LIBRARY_PATH=libs` in a fresh directory `dir`.
fn run_model(exe: &Path, libs: &str, dir: &Path) -> Run {
    std::fs::create_dir_all(dir).unwrap();
    let plan = dir.join("plan.yaml");
    std::fs::write(&plan, PLAN).unwrap();
    let out = Command::new(exe)
        .arg("run")
        .arg(&plan)
        .arg(DAYS.to_string())
        .env("LD_LIBRARY_PATH", libs)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "model run failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fields = 2 * (24 * DAYS + 1);
    assert!(
        stdout.contains(&format!(
            "{fields} fields written, {} skipped, 0 failures",
            fields / 2
        )),
        "{stdout}"
    );
    let bytes = |name: &str| std::fs::read(dir.join(name)).unwrap();
    Run {
        printed: printed(&stdout),
        t2m: bytes("out-167.raw")
            .chunks_exact(8)
            .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
            .collect(),
        d2m: bytes("out-168.raw")
            .chunks_exact(4)
            .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
            .collect(),
    }
}

/// The metadata of each emitted field, from the `print` lines (MultIO's and fieldstore's both
/// print `metadata={...}, payload-size`).
fn printed(text: &str) -> Vec<Map<String, Value>> {
    text.lines()
        .filter(|l| l.contains("tag=Field"))
        .map(|l| {
            let start = l.find("metadata=").expect("metadata=") + "metadata=".len();
            let end = l.rfind(", payload-size").expect("payload-size");
            let mut m = serde_json::from_str::<Value>(&l[start..end])
                .unwrap_or_else(|e| panic!("{e}: {l}"))
                .as_object()
                .cloned()
                .unwrap();
            // The payload's size too (MultIO counts a single-precision field's values as 4 bytes).
            let size: u64 = l[end + ", payload-size=".len()..]
                .trim_end_matches(')')
                .parse()
                .unwrap_or_else(|e| panic!("{e}: {l}"));
            m.insert("(payload-size)".into(), size.into());
            m
        })
        .collect()
}

/// model.c's `value()`.
fn value(param: i64, step: usize, i: usize) -> f64 {
    250.0
        + (param - 160) as f64 * 3.0
        + 10.0 * (0.37 * i as f64 + 0.26 * step as f64).sin()
        + 0.001 * step as f64
        + 0.5 * (i % 7) as f64
}

fn relative(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs().max(f64::MIN_POSITIVE)
}

/// What the outputs must be, from the inputs: per day the mean, minimum and maximum of steps
/// 24d-23..24d (step 0 is the initial condition), and the windows' metadata.
fn check_against_inputs(run: &Run) {
    assert_eq!(run.t2m.len(), DAYS * 3 * NPOINTS);
    assert_eq!(run.d2m.len(), DAYS * NPOINTS);
    for day in 1..=DAYS {
        let steps = 24 * day - 23..=24 * day;
        for i in 0..NPOINTS {
            let xs: Vec<f64> = steps.clone().map(|s| value(167, s, i)).collect();
            let mean = xs.iter().sum::<f64>() / xs.len() as f64;
            let min = xs.iter().cloned().fold(f64::INFINITY, f64::min);
            let max = xs.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let base = (day - 1) * 3 * NPOINTS;
            for (k, want) in [mean, min, max].into_iter().enumerate() {
                let got = run.t2m[base + k * NPOINTS + i];
                assert!(
                    relative(got, want) < 1e-12,
                    "day {day} op {k} point {i}: {got} != {want}"
                );
            }
            // Floats in, the mean of the float values rounded to float out.
            let xs: Vec<f64> = steps
                .clone()
                .map(|s| value(168, s, i) as f32 as f64)
                .collect();
            let mean = (xs.iter().sum::<f64>() / xs.len() as f64) as f32;
            let got = run.d2m[(day - 1) * NPOINTS + i];
            assert!(
                relative(got as f64, mean as f64) <= f32::EPSILON as f64,
                "2d day {day} point {i}: {got} != {mean}"
            );
        }
    }
    let t2m: Vec<&Map<String, Value>> =
        run.printed.iter().filter(|m| m["paramId"] == 167).collect();
    assert_eq!(t2m.len(), DAYS * 3);
    for (n, m) in t2m.iter().enumerate() {
        let day = (n / 3 + 1) as i64;
        let op = ["average", "minimum", "maximum"][n % 3];
        assert_eq!(m["operation"], op, "{m:?}");
        assert_eq!(m["step"], 24 * day, "{m:?}");
        assert_eq!(m["startStepInHours"], 24 * (day - 1), "{m:?}");
        assert_eq!(m["endStepInHours"], 24 * day, "{m:?}");
        assert_eq!(m["previousDate"], 20250100 + day, "{m:?}");
        assert_eq!(m["currentDate"], 20250101 + day, "{m:?}");
        assert_eq!(m["misc-precision"], "double", "{m:?}");
        assert_eq!(m["(payload-size)"], NPOINTS * 8, "{m:?}");
    }
    let d2m: Vec<_> = run.printed.iter().filter(|m| m["paramId"] == 168).collect();
    assert_eq!(d2m.len(), DAYS);
    for m in d2m {
        assert_eq!(m["misc-precision"], "single", "{m:?}");
        assert_eq!(m["(payload-size)"], NPOINTS * 4, "{m:?}");
    }
}

#[test]
fn c_model_writes_daily_statistics_through_a_plan() {
    let tmp = tempfile::tempdir().unwrap();
    let ours = our_lib_dir(tmp.path());
    let exe = tmp.path().join("model");
    compile(&crate_dir().join("include"), &ours, &exe, &[]);
    let run = run_model(&exe, &ours.display().to_string(), &tmp.path().join("run"));
    check_against_inputs(&run);
}

/// MultIO's header on PyPI is pymultio's preprocessed cffi declarations, without includes.
fn pymultio_header_dir(m: &Multio, tmp: &Path) -> PathBuf {
    let dir = tmp.join("pymultio-include");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(
        dir.join("multio_c.h"),
        format!(
            "#include <stdbool.h>\n#include <stdint.h>\n#include \"{}\"\n",
            m.processed_header.display()
        ),
    )
    .unwrap();
    dir
}

fn compare(ours: &Run, theirs: &Run, what: &str) {
    assert_eq!(ours.t2m.len(), theirs.t2m.len(), "{what}");
    let worst = ours
        .t2m
        .iter()
        .zip(&theirs.t2m)
        .map(|(a, b)| relative(*a, *b))
        .fold(0.0, f64::max);
    assert!(
        worst <= 1e-12,
        "{what}: doubles differ by {worst:e} (relative)"
    );
    // MultIO keeps single-precision statistics in float; fieldstore in double, rounded once
    // (check_against_inputs holds it to one float epsilon of the exact mean). The two agree to
    // float precision.
    let worst32 = ours
        .d2m
        .iter()
        .zip(&theirs.d2m)
        .map(|(a, b)| relative(*a as f64, *b as f64))
        .fold(0.0, f64::max);
    assert!(
        worst32 <= 1e-6,
        "{what}: floats differ by {worst32:e} (relative)"
    );
    assert_eq!(
        ours.printed, theirs.printed,
        "{what}: output metadata differ"
    );
    let _ = writeln!(
        std::io::stderr(),
        "{what}: {} double and {} float values, worst relative differences {worst:e} and {worst32:e}; metadata of {} outputs equal",
        ours.t2m.len(),
        ours.d2m.len(),
        ours.printed.len()
    );
}

#[test]
fn c_model_gives_multios_outputs() {
    let Some(m) = multio_or_skip("c_model_gives_multios_outputs") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let ours = our_lib_dir(tmp.path()).display().to_string();
    let exe = tmp.path().join("model");
    compile(&crate_dir().join("include"), Path::new(&ours), &exe, &[]);
    let on_ours = run_model(&exe, &ours, &tmp.path().join("ours-run"));
    check_against_inputs(&on_ours);
    // The same binary, on MultIO's library.
    let on_multio = run_model(&exe, &m.libs, &tmp.path().join("multio-run"));
    compare(&on_ours, &on_multio, "built against fieldstore's header");

    // Built against the header MultIO ships, on both libraries.
    let exe2 = tmp.path().join("model-pymultio-header");
    compile(
        &pymultio_header_dir(&m, tmp.path()),
        Path::new(&ours),
        &exe2,
        &["-DPYMULTIO_HEADER"],
    );
    let a = run_model(&exe2, &ours, &tmp.path().join("ours-run2"));
    let b = run_model(&exe2, &m.libs, &tmp.path().join("multio-run2"));
    compare(&a, &b, "built against pymultio's processed_multio.h");
}

fn run_errors(exe: &Path, libs: &str, dir: &Path) -> Output {
    Command::new(exe)
        .arg("errors")
        .arg(dir)
        .env("LD_LIBRARY_PATH", libs)
        .output()
        .unwrap()
}

/// Bad plan files, unknown and refused actions, mistyped and missing metadata, bad arguments and
/// MPI-only calls: each a code and a message naming the file, action, field or argument; the
/// handle goes on working afterwards, and the failure handler gets the same text.
#[test]
fn c_failures_are_codes_and_messages_never_crashes() {
    let tmp = tempfile::tempdir().unwrap();
    let ours = our_lib_dir(tmp.path());
    let exe = tmp.path().join("model");
    compile(&crate_dir().join("include"), &ours, &exe, &[]);
    let dir = tmp.path().join("errors");
    std::fs::create_dir_all(&dir).unwrap();
    let out = run_errors(&exe, &ours.display().to_string(), &dir);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "{stdout}\n{stderr}");
    let line = |case: &str| -> String {
        stdout
            .lines()
            .find(|l| l.starts_with(&format!("{case}: ")))
            .unwrap_or_else(|| panic!("no '{case}' line in:\n{stdout}"))
            .to_string()
    };
    let d = dir.display().to_string();
    for (case, wants) in [
        (
            "missing file",
            vec![
                "multio_new_configuration_from_filename",
                "/nonexistent/plan.yaml",
                "No such file",
            ],
        ),
        ("bad yaml", vec![&*format!("{d}/bad-yaml.yaml"), "line 3"]),
        (
            "unknown action",
            vec![
                "multio_new_handle",
                &*format!("{d}/unknown-action.yaml:6"),
                "'statistix'",
                "known: select",
            ],
        ),
        (
            "refused action",
            vec![
                &*format!("{d}/refused-action.yaml:4"),
                "'aggregate' is not supported",
                "MPI",
            ],
        ),
        ("null handle", vec!["multio_flush", "mio is NULL"]),
        ("null config", vec!["multio_config_set_path", "cc is NULL"]),
        (
            "string step",
            vec![
                "plan 'daily'",
                "statistics",
                "step=one",
                "key 'step' must be an int",
            ],
        ),
        (
            "missing keys",
            vec!["plan 'daily'", "missing required key 'level'"],
        ),
        ("negative size", vec!["size -1 is negative"]),
        ("null values", vec!["data is NULL"]),
        ("domain", vec!["multio_write_domain", "MPI domain maps"]),
        ("mask", vec!["multio_write_mask_double", "MPI domain maps"]),
        (
            "server",
            vec!["multio_start_server", "no MultIO I/O servers"],
        ),
        (
            "buffer overflow",
            vec![
                "multio_data_set_double_chunk",
                "values 2..5 do not fit",
                "32 bytes",
            ],
        ),
        (
            "buffer width",
            vec![
                "multio_write_field_buffer",
                "byte_size must be 4 (float) or 8 (double), not 2",
            ],
        ),
        ("handler", vec!["plan 'daily'", "missing required key"]),
    ] {
        let l = line(case);
        assert!(l.starts_with(&format!("{case}: 1: fieldstore ")), "{l}");
        for w in wants {
            assert!(l.contains(w), "'{case}' should name '{w}': {l}");
        }
    }
    // The handler was called once (the last case) with the same text; before it was set,
    // failures went to stderr.
    assert!(stdout.contains("handler calls: 1"), "{stdout}");
    let handler_text = line("handler").splitn(3, ": ").nth(2).unwrap().to_string();
    assert!(
        stderr.contains(&format!("failure handler: code 1: {handler_text}")),
        "{stderr}"
    );
    assert!(
        stderr.contains("fieldstore multio_flush: mio is NULL"),
        "{stderr}"
    );
    // After all that, day 1 of the good plan gave its one daily mean of 1.0 (the running mean
    // of MultIO's `average` drifts by an ulp or two: 0.9999999999999997).
    assert!(
        stdout.contains(&format!("output bytes: {}", NPOINTS * 8)),
        "{stdout}"
    );
    let mean: Vec<f64> = std::fs::read(dir.join("out.raw"))
        .unwrap()
        .chunks_exact(8)
        .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert!(mean.iter().all(|&v| relative(v, 1.0) < 1e-12), "{mean:?}");
}

/// ECMWF's pymultio, unmodified, loads a library found by findlibs (pointed here at ours) and
/// drives it through cffi with its own header: the model loop of model.c, from Python.
const PYMULTIO_SCRIPT: &str = r#"
import sys
import findlibs
lib_path, plan, days, n = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
findlibs.find = lambda *args, **kwargs: lib_path
import numpy as np
import multio
mio = multio.Multio(config_path=plan)
assert mio.__version__() == "2.12.0", mio.__version__()
i = np.arange(n)
def values(param, step):
    return 250.0 + (param - 160) * 3.0 + 10.0 * np.sin(0.37 * i + 0.26 * step) + 0.001 * step + 0.5 * (i % 7)
written = skipped = 0
for step in range(24 * days + 1):
    md = {"levtype": "sfc", "level": 0, "gridType": "regular_ll", "startDate": 20250101,
          "startTime": 0, "date": 20250101, "time": 0, "step": step, "timeStep": 3600,
          "step-frequency": 1, "misc-globalSize": n}
    for param, dtype in ((167, np.float64), (168, np.float32), (165, np.float64)):
        md["param"], md["paramId"] = str(param), param
        if mio.field_accepted(md):
            mio.write_field(md, values(param, step).astype(dtype))
            written += 1
        else:
            skipped += 1
    mio.flush({"flushKind": "default", "step": step})
mio.flush({"flushKind": "last-step"})
mio.close_connections()
try:
    mio.write_field({"paramId": 167, "param": "167", "step": "x"}, np.zeros(n))
    raise SystemExit("a mistyped step was accepted")
except multio.MultioException as e:
    assert "key 'step' must be an int" in str(e) or "missing required key" in str(e), e
print(f"model: version 2.12.0, {written} fields written, {skipped} skipped, 0 failures")
"#;

#[test]
fn pymultio_unmodified_runs_on_fieldstores_library() {
    let Some(m) = multio_or_skip("pymultio_unmodified_runs_on_fieldstores_library") else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let ours = our_lib_dir(tmp.path());
    let dir = tmp.path().join("run");
    std::fs::create_dir_all(&dir).unwrap();
    let plan = dir.join("plan.yaml");
    std::fs::write(&plan, PLAN).unwrap();
    let script = tmp.path().join("pymultio_model.py");
    std::fs::write(&script, PYMULTIO_SCRIPT).unwrap();
    let out = Command::new(&m.python)
        .arg(&script)
        .arg(ours.join("libmultio-api.so"))
        .arg(&plan)
        .arg(DAYS.to_string())
        .arg(NPOINTS.to_string())
        // Only fieldstore's library: MultIO's must not be loadable in this process.
        .env_remove("LD_LIBRARY_PATH")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let fields = 2 * (24 * DAYS + 1);
    assert!(
        stdout.contains(&format!("{fields} fields written, {} skipped", fields / 2)),
        "{stdout}"
    );
    let bytes = |name: &str| std::fs::read(dir.join(name)).unwrap();
    let run = Run {
        printed: printed(&stdout),
        t2m: bytes("out-167.raw")
            .chunks_exact(8)
            .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
            .collect(),
        d2m: bytes("out-168.raw")
            .chunks_exact(4)
            .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
            .collect(),
    };
    check_against_inputs(&run);
}
