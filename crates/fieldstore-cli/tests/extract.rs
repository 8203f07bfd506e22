//! `fieldstore extract` end to end: fields made with ecCodes (simple, CCSDS, GRIB1), archived
//! by the real binary into a local store, a server and S3 (MinIO); every value equal to an
//! ecCodes full decode of the same message, and only a small part of each field read.

mod common;
#[path = "../../fieldstore/tests/support/minio.rs"]
mod minio;
#[path = "common/server.rs"]
mod server;

use std::path::{Path, PathBuf};
use std::process::Command;

use fieldstore::grib::{Decoded, SliceMessages};
use serde_json::Value;

const DB: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200";
const TOKEN: &str = "extract-token";

fn run(config: &Path, args: &[&str]) -> String {
    run_with(config, args, &[])
}

fn run_with(config: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    let o = common::fieldstore()
        .envs(env.iter().copied())
        .arg("--config")
        .arg(config)
        .args(args)
        .output()
        .unwrap();
    common::succeeded(&format!("{args:?}"), &o)
}

/// The sample fields (1 degree, 65,160 points, 4 steps x 2 params) in simple packing, the same
/// in CCSDS (`grib_set -r`), and in GRIB1.
fn fields(dir: &Path) -> Vec<(String, PathBuf)> {
    let simple = dir.join("simple.grib");
    let o = common::fieldstore()
        .args(["sample", "--out"])
        .arg(&simple)
        .args([
            "--params",
            "t/u",
            "--levels",
            "500",
            "--steps",
            "0/6/12/18",
            "--points",
            "65160",
        ])
        .output()
        .unwrap();
    common::succeeded("sample", &o);
    let mut out = vec![("simple".to_string(), simple.clone())];
    for (name, set) in [("ccsds", "packingType=grid_ccsds"), ("grib1", "edition=1")] {
        let p = dir.join(format!("{name}.grib"));
        let o = Command::new("grib_set")
            .args(["-r", "-s", set])
            .arg(&simple)
            .arg(&p)
            .output()
            .expect("grib_set (libeccodes-tools) is needed: scripts/install-deps --tests");
        common::succeeded(&format!("grib_set {set}"), &o);
        out.push((name.to_string(), p));
    }
    out
}

/// ecCodes' values of each message of a file, keyed by step and param.
fn truth(file: &Path) -> Vec<(String, String, Vec<f64>)> {
    let bytes = std::fs::read(file).unwrap();
    SliceMessages::new(&bytes, "truth")
        .map(|m| {
            let (_, _, m) = m.unwrap();
            let d = Decoded::new(m).unwrap();
            let keys = d.mars_keys().unwrap();
            let values = d.values().unwrap();
            (
                keys.get("step").unwrap().to_string(),
                keys.get("param").unwrap().to_string(),
                values,
            )
        })
        .collect()
}

/// Runs an extraction and checks every value against ecCodes; returns the bytes read per field.
fn check(config: &Path, file: &Path, what: &str, env: &[(&str, &str)]) -> Vec<u64> {
    let truth = truth(file);
    let request = format!("{DB},type=fc,levtype=pl,levelist=500,param=t/u,step=0/6/12/18");
    let out = run_with(
        config,
        &[
            "extract",
            &request,
            "--range",
            "0-5",
            "--range",
            "4090-4110",
            "--range",
            "65150-65160",
            "--point",
            "45,10",
            "--box",
            "50/-5/48/5",
            "--json",
        ],
        env,
    );
    let items: Value = serde_json::from_str(&out).unwrap();
    let items = items.as_array().unwrap();
    assert_eq!(items.len(), 8, "{what}: one item per field: {out}");
    let mut read = Vec::new();
    for item in items {
        let step = item["key"]["step"].as_str().unwrap();
        let param = item["key"]["param"].as_str().unwrap();
        let (_, _, want) = truth
            .iter()
            .find(|(s, p, _)| s == step && p == param)
            .unwrap_or_else(|| panic!("{what}: no message for step {step} param {param}"));
        let indices = item["indices"].as_array().unwrap();
        let values = item["values"].as_array().unwrap();
        assert_eq!(values.len(), 5, "{what}: one list per selection");
        for (idx, vals) in indices.iter().zip(values) {
            let idx = idx.as_array().unwrap();
            let vals = vals.as_array().unwrap();
            assert_eq!(idx.len(), vals.len(), "{what}");
            assert!(!idx.is_empty(), "{what}: empty selection");
            for (i, v) in idx.iter().zip(vals) {
                let i = i.as_u64().unwrap() as usize;
                assert_eq!(
                    v.as_f64().unwrap().to_bits(),
                    want[i].to_bits(),
                    "{what}: step {step} param {param} point {i}"
                );
            }
        }
        read.push(item["bytes_read"].as_u64().unwrap());
    }
    read
}

fn local_config(dir: &Path, name: &str) -> PathBuf {
    let root = dir.join(format!("{name}-root"));
    std::fs::create_dir_all(&root).unwrap();
    let config = dir.join(format!("{name}.yaml"));
    std::fs::write(
        &config,
        format!(
            "type: local\nengine: toc\nspaces:\n- handler: Default\n  roots:\n  - path: {}\n",
            root.display()
        ),
    )
    .unwrap();
    config
}

#[test]
fn values_equal_eccodes_and_only_a_part_of_each_field_is_read() {
    let dir = tempfile::tempdir().unwrap();
    for (name, file) in fields(dir.path()) {
        let config = local_config(dir.path(), &name);
        run(&config, &["write", file.to_str().unwrap()]);
        let read = check(&config, &file, &name, &[]);
        // CCSDS reads whole intervals of 4096 values: the selections touch 5 of 16.
        let whole = std::fs::metadata(&file).unwrap().len() / 8;
        let most = if name == "ccsds" {
            whole / 2
        } else {
            whole / 10
        };
        for r in read {
            assert!(
                r < most,
                "{name}: {r} bytes read of a field of about {whole}: extraction read too much"
            );
        }
    }
}

#[test]
fn bad_selections_are_refused_with_a_reason() {
    let dir = tempfile::tempdir().unwrap();
    let (_, file) = fields(dir.path()).remove(0);
    let config = local_config(dir.path(), "bad");
    run(&config, &["write", file.to_str().unwrap()]);
    let request = format!("{DB},type=fc,levtype=pl,levelist=500,param=t,step=0");
    for (args, says) in [
        (vec!["--range", "5-5"], "empty"),
        (vec!["--range", "65000-70000"], "beyond the field's"),
        (vec!["--point", "95,0"], "latitude"),
        (vec![], "nothing to extract"),
    ] {
        let o = common::fieldstore()
            .arg("--config")
            .arg(&config)
            .args(["extract", &request])
            .args(&args)
            .output()
            .unwrap();
        let err = common::failed(&format!("extract {args:?}"), &o);
        assert!(err.contains(says), "{args:?}: {err}");
    }
    let o = common::fieldstore()
        .arg("--config")
        .arg(&config)
        .args([
            "extract",
            &format!("{DB},type=fc,levtype=pl,levelist=500,param=t,step=99"),
            "--range",
            "0-1",
        ])
        .output()
        .unwrap();
    let err = common::failed("extract of nothing", &o);
    assert!(err.contains("no field matches"), "{err}");
}

#[test]
fn through_a_server_the_values_are_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let (_, file) = fields(dir.path()).remove(1);
    let config = local_config(dir.path(), "served");
    run(&config, &["write", file.to_str().unwrap()]);
    let mut c = common::fieldstore();
    c.arg("--config")
        .arg(&config)
        .args(["server", "--listen", "127.0.0.1:0", "--token", TOKEN]);
    let _served = server::start(c, dir.path(), TOKEN);
    let read = check(
        &dir.path().join("remote.yaml"),
        &file,
        "ccsds through a server",
        &[],
    );
    // Extracted by the server: it read a part of each field, and only values came back.
    let whole = std::fs::metadata(&file).unwrap().len() / 8;
    for r in read {
        assert!(
            r < whole / 2,
            "the server read {r} bytes of a field of about {whole}"
        );
    }
}

#[test]
fn on_s3_only_the_needed_bytes_are_fetched() {
    let Some(m) = minio::Minio::start_or_skip("extract") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let (_, file) = fields(dir.path()).remove(1);
    let config = dir.path().join("s3.yaml");
    std::fs::write(
        &config,
        format!(
            "type: local\nengine: s3\nstore: s3\ns3:\n  endpoint: {}\n  bucket: extract\n  region: us-east-1\n",
            m.endpoint
        ),
    )
    .unwrap();
    let env = |c: &mut Command| {
        c.env("AWS_ACCESS_KEY_ID", &m.access_key)
            .env("AWS_SECRET_ACCESS_KEY", &m.secret_key);
    };
    let mut w = common::fieldstore();
    env(&mut w);
    let o = w
        .arg("--config")
        .arg(&config)
        .args(["write", file.to_str().unwrap()])
        .output()
        .unwrap();
    common::succeeded("write to s3", &o);
    let creds = [
        ("AWS_ACCESS_KEY_ID", m.access_key.as_str()),
        ("AWS_SECRET_ACCESS_KEY", m.secret_key.as_str()),
    ];
    check(&config, &file, "ccsds on s3", &creds);
    // Nearby pieces are fetched as one GET on S3 (a round trip costs more than a few KiB), so
    // the bytes are counted on one range: one interval of 4096 values of each field.
    let request = format!("{DB},type=fc,levtype=pl,levelist=500,param=t/u,step=0/6/12/18");
    let out = run_with(
        &config,
        &["extract", &request, "--range", "0-5", "--json"],
        &creds,
    );
    let items: Value = serde_json::from_str(&out).unwrap();
    let read: Vec<u64> = items
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["bytes_read"].as_u64().unwrap())
        .collect();
    assert_eq!(read.len(), 8);
    let whole = std::fs::metadata(&file).unwrap().len() / 8;
    for r in read {
        assert!(
            r < whole / 2,
            "{r} bytes fetched of a field of about {whole}"
        );
    }
}
