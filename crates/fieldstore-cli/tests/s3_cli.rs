//! `engine: s3` through the real `fieldstore` binary on a real MinIO, with the config exactly
//! in issue 16's form and credentials only from `AWS_ACCESS_KEY_ID` / `AWS_SECRET_ACCESS_KEY`:
//! write, list, read, a second write that masks the first, purge, dump, wipe.

mod common;
#[path = "../../fieldstore/tests/support/minio.rs"]
mod minio;

use std::path::{Path, PathBuf};
use std::process::Output;

const DB: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200";

struct Cli<'a> {
    config: PathBuf,
    minio: &'a minio::Minio,
}

impl Cli<'_> {
    fn run(&self, args: &[&str]) -> Output {
        common::fieldstore()
            .arg("--config")
            .arg(&self.config)
            .args(args)
            .env("AWS_ACCESS_KEY_ID", &self.minio.access_key)
            .env("AWS_SECRET_ACCESS_KEY", &self.minio.secret_key)
            .env_remove("AWS_PROFILE")
            .env("HOME", self.config.parent().unwrap())
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let o = self.run(args);
        assert!(
            o.status.success(),
            "{args:?}: {}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        String::from_utf8_lossy(&o.stdout).into_owned()
    }
}

fn sample(cli: &Cli, out: &Path, steps: &str, points: &str) {
    cli.ok(&[
        "sample",
        "--out",
        out.to_str().unwrap(),
        "--steps",
        steps,
        "--params",
        "t/u",
        "--levels",
        "1000/500",
        "--points",
        points,
    ]);
}

#[test]
fn the_cli_writes_lists_reads_purges_and_wipes_on_s3() {
    let Some(m) = minio::Minio::start_or_skip("s3_cli") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("fdb.yaml");
    std::fs::write(
        &config,
        format!(
            "type: local\nengine: s3            # catalogue on S3\nstore: s3\ns3:\n  endpoint: {}\n  bucket: fields\n  region: us-east-1   # optional\n  prefix: ops/        # optional\n",
            m.endpoint
        ),
    )
    .unwrap();
    let cli = Cli { config, minio: &m };
    let first = dir.path().join("first.grib");
    let second = dir.path().join("second.grib");
    sample(&cli, &first, "0/6", "100");
    sample(&cli, &second, "6", "200");
    cli.ok(&["write", first.to_str().unwrap()]);
    let listed = cli.ok(&["list", "class=od,expver=0001", "--porcelain"]);
    assert_eq!(listed.lines().count(), 8, "{listed}");

    // The second write replaces step 6: the listing keeps 8 fields, the read gets the new bytes.
    cli.ok(&["write", second.to_str().unwrap()]);
    let listed = cli.ok(&["list", "class=od,expver=0001", "--porcelain"]);
    assert_eq!(listed.lines().count(), 8, "{listed}");
    let out = dir.path().join("out.grib");
    let request = format!("{DB},type=fc,levtype=pl,levelist=500,param=t,step=6");
    cli.ok(&["read", &request, out.to_str().unwrap()]);
    let got = std::fs::read(&out).unwrap();
    let all_new = std::fs::read(&second).unwrap();
    assert!(
        all_new.windows(got.len()).any(|w| w == got.as_slice()),
        "read returned the replaced copy"
    );
    let full = cli.ok(&["list", "class=od,expver=0001", "--full", "--porcelain"]);
    assert_eq!(full.lines().count(), 12, "{full}");

    let dump = cli.ok(&["dump", DB]);
    assert!(dump.contains("FLUSH"), "{dump}");
    // Where the database is, as a URI naming the bucket and prefix (not the catalogue's id).
    let place = cli.ok(&["where", DB]);
    assert!(
        place.trim().starts_with("s3://fields/ops/db/") && place.trim().ends_with("/0000000001/"),
        "{place}"
    );
    let purge = cli.ok(&["purge", DB, "--doit"]);
    assert!(purge.contains('4'), "{purge}");
    let full = cli.ok(&["list", "class=od,expver=0001", "--full", "--porcelain"]);
    assert_eq!(full.lines().count(), 8, "after purge: {full}");
    cli.ok(&["read", &request, out.to_str().unwrap()]);

    let wipe = cli.ok(&["wipe", DB, "--doit"]);
    assert!(wipe.contains("s3://fields/ops/"), "{wipe}");
    let after = cli.run(&["list", "class=od,expver=0001", "--porcelain"]);
    assert_eq!(String::from_utf8_lossy(&after.stdout).lines().count(), 0);

    // Writing again makes a new generation: only the new fields are there.
    cli.ok(&["write", second.to_str().unwrap()]);
    let listed = cli.ok(&["list", "class=od,expver=0001", "--porcelain"]);
    assert_eq!(listed.lines().count(), 4, "{listed}");

    // Without credentials the error says what is missing.
    let o = common::fieldstore()
        .arg("--config")
        .arg(&cli.config)
        .args(["list", "class=od"])
        .env_remove("AWS_ACCESS_KEY_ID")
        .env_remove("AWS_SECRET_ACCESS_KEY")
        .env("HOME", dir.path())
        .output()
        .unwrap();
    assert!(!o.status.success());
}

/// Writer processes into one database at once: no lock, nothing lost, and every process's
/// fields listed by another process as soon as its write returned.
#[test]
fn writer_processes_share_a_database_on_s3() {
    let Some(m) = minio::Minio::start_or_skip("s3_cli") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("fdb.yaml");
    std::fs::write(
        &config,
        format!(
            "type: local\nengine: s3\nstore: s3\ns3: {{endpoint: '{}', bucket: shared}}\n",
            m.endpoint
        ),
    )
    .unwrap();
    let cli = Cli { config, minio: &m };
    let files: Vec<PathBuf> = (0..4)
        .map(|i| {
            let f = dir.path().join(format!("w{i}.grib"));
            sample(&cli, &f, &format!("{}/{}", i * 12, i * 12 + 6), "50");
            f
        })
        .collect();
    let writers: Vec<_> = files
        .iter()
        .map(|f| {
            common::fieldstore()
                .arg("--config")
                .arg(&cli.config)
                .args(["write", f.to_str().unwrap()])
                .env("AWS_ACCESS_KEY_ID", &m.access_key)
                .env("AWS_SECRET_ACCESS_KEY", &m.secret_key)
                .env("HOME", dir.path())
                .spawn()
                .unwrap()
        })
        .collect();
    for mut w in writers {
        assert!(w.wait().unwrap().success());
    }
    let listed = cli.ok(&["list", "class=od,expver=0001", "--porcelain"]);
    assert_eq!(listed.lines().count(), 4 * 8, "{listed}");
    let dump = cli.ok(&["dump", DB]);
    assert_eq!(
        dump.matches("FLUSH").count(),
        4,
        "one marker per writer: {dump}"
    );
}
