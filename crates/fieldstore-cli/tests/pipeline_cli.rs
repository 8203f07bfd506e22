//! `fieldstore pipeline`: statistics encoded as GRIB into this store and a file; bad input
//! failing one message in one plan while the rest goes on; malformed plans named by file and
//! line. (The comparison with MultIO itself is tests/pipeline_multio.rs.)

use std::path::{Path, PathBuf};
use std::process::Command;

const FS: &str = env!("CARGO_BIN_EXE_fieldstore");

fn schema() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fieldstore/tests/fixtures/ecmwf-fdb5-schema")
}

fn run(args: &[&str], dir: &Path) -> std::process::Output {
    Command::new(FS)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

#[test]
fn daily_means_into_the_store_as_grib() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("root")).unwrap();
    let config = d.join("fdb.yaml");
    std::fs::write(
        &config,
        format!(
            "type: local\nengine: toc\nschema: {}\nspaces:\n- roots:\n  - path: {}\n",
            schema().display(),
            d.join("root").display()
        ),
    )
    .unwrap();
    let steps: Vec<String> = (0..=48).map(|s| s.to_string()).collect();
    let o = run(
        &[
            "sample",
            "--out",
            "in.grib",
            "--params",
            "167",
            "--levtype",
            "sfc",
            "--time",
            "0000",
            "--date",
            "20250101",
            "--points",
            "64",
            "--steps",
            &steps.join("/"),
        ],
        d,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    std::fs::write(
        d.join("plan.yaml"),
        "plans:\n  - name: daily\n    actions:\n      - type: statistics\n        output-frequency: 1d\n        operations: [average]\n        options: {use-current-time: true, initial-condition-present: true}\n      - {type: encode, format: grib}\n      - type: sink\n        sinks:\n          - {type: fdb5, config: {}}\n          - {type: file, path: out.grib}\n",
    )
    .unwrap();
    let cfg = config.display().to_string();
    let o = run(
        &["--config", &cfg, "pipeline", "run", "plan.yaml", "in.grib"],
        d,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(
        String::from_utf8_lossy(&o.stderr).contains("49 fields, 0 failed"),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let o = run(&["--config", &cfg, "list", "--porcelain", "class=od"], d);
    let listing = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(listing.lines().count(), 2, "{listing}");
    // ecCodes' MARS step of a 0-24 average is its end (the GRIB says stepRange=0-24, avg).
    assert!(
        listing.contains("step=24,") && listing.contains("step=48,"),
        "{listing}"
    );
    // The file sink got the same two GRIB messages.
    let bytes = std::fs::read(d.join("out.grib")).unwrap();
    let messages = bytes.windows(4).filter(|w| w == b"GRIB").count();
    assert_eq!(messages, 2);
}

#[test]
fn a_bad_message_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("plan.yaml"),
        "plans:\n  - name: strict\n    actions:\n      - {type: select, match: {paramId: ['167']}}\n      - {type: print}\n  - name: all\n    actions:\n      - {type: print}\n",
    )
    .unwrap();
    std::fs::write(
        d.join("msgs.jsonl"),
        "{\"field\": {\"metadata\": {\"paramId\": 167}, \"values\": [1.0]}}\nnot json\n{\"flush\": {\"flushKind\": \"last-step\"}}\n",
    )
    .unwrap();
    let o = run(&["pipeline", "feed", "plan.yaml", "msgs.jsonl"], d);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert!(!o.status.success());
    assert!(
        err.contains("msgs.jsonl line 1: plan 'strict', action 'select #1': field paramId=167"),
        "{err}"
    );
    assert!(err.contains("msgs.jsonl line 2: not JSON"), "{err}");
    assert!(err.contains("2 failures in 3 messages"), "{err}");
    // The other plan printed the field; both printed the flush.
    assert_eq!(out.matches("[all] Message(tag=Field").count(), 1, "{out}");
    assert_eq!(out.matches("tag=Flush").count(), 2, "{out}");
}

#[test]
fn malformed_plans_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (text, expected) in [
        ("plans:\n  - actions:\n      - type: interpolate\n", "plan.yaml:3: action 'interpolate' is not supported: regridding needs MIR"),
        ("plans:\n  - actions:\n      - type: statistics\n        output-frequency: 1w\n        operations: [average]\n", "plan.yaml:4: action 'statistics': output-frequency '1w'"),
        ("plans:\n  - actions:\n      - type: statistic\n", "plan.yaml:3: unknown action type 'statistic'"),
        ("plans: [", "plan.yaml: invalid YAML"),
    ] {
        std::fs::write(d.join("plan.yaml"), text).unwrap();
        let o = run(&["pipeline", "check", "plan.yaml"], d);
        assert!(!o.status.success());
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(err.contains(expected), "{text}: {err}");
    }
    std::fs::write(
        d.join("plan.yaml"),
        "plans:\n  - {name: a, actions: [{type: print}]}\n",
    )
    .unwrap();
    let o = run(&["pipeline", "check", "plan.yaml"], d);
    assert!(o.status.success());
    assert!(String::from_utf8_lossy(&o.stdout).contains("1 plan(s): a"));
}
