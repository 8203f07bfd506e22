//! Real GRIB files from other centres and tools (tests/data/real-grib, see its README): every one
//! FDB5 archives, fieldstore archives, lists and reads back byte for byte, and, when FDB5 is
//! installed, lists and retrieves exactly as FDB5 does; the ones FDB5 refuses, fieldstore
//! refuses with an error naming the file and message.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

mod common;
#[path = "common/fdb5.rs"]
mod fdb5;
#[path = "common/skip.rs"]
mod skip;
use fdb5::{configured, fdb5_listing, have_fdb5, run};

/// The files FDB5 archives, with their number of messages (all distinct fields).
const ACCEPTED: [(&str, usize); 8] = [
    ("era5-levels-members.grib", 160),
    ("forecast_monthly_ukmo.grib", 168),
    ("ncep-seasonal-monthly.grib", 372),
    ("single_gridpoint.grib", 6),
    ("cams-egg4-monthly.grib", 4),
    ("alternate-scanning.grib", 1),
    ("hpa_and_pa.grib", 3),
    ("t_on_different_level_types.grib", 2),
];

/// The files FDB5 refuses too, and what fieldstore must say about each.
const REFUSED: [(&str, &str); 3] = [
    (
        "era5-levels-corrupted.grib",
        "message 1 at offset 0 does not end with '7777' (length 1588)",
    ),
    ("lambert_grid.grib", "no schema rule matches"),
    ("step_60m.grib", "no schema rule matches"),
];

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/real-grib")
        .join(name)
}

/// The messages of a file, each from `GRIB` to `7777`, found without fieldstore's framing: the
/// length from section 0 (none of these files needs GRIB1's large-message coding), whatever lies
/// between messages skipped.
fn messages(path: &Path) -> Vec<Vec<u8>> {
    let bytes = std::fs::read(path).unwrap();
    let mut out = Vec::new();
    let mut pos = 0;
    while let Some(i) = bytes[pos..].windows(4).position(|w| w == b"GRIB") {
        let m = &bytes[pos + i..];
        let len = match m[7] {
            1 => (usize::from(m[4]) << 16) | (usize::from(m[5]) << 8) | usize::from(m[6]),
            2 => u64::from_be_bytes(m[8..16].try_into().unwrap()) as usize,
            e => panic!("{}: edition {e}", path.display()),
        };
        assert!(m[..len].ends_with(b"7777"), "{}", path.display());
        out.push(m[..len].to_vec());
        pos += i + len;
    }
    out
}

fn sorted(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    v.sort();
    v
}

/// A fresh store under `dir` with ECMWF's schema: its config file.
fn new_store(dir: &Path) -> PathBuf {
    let root = dir.join("root");
    std::fs::create_dir_all(&root).unwrap();
    std::fs::create_dir_all(dir.join("home")).unwrap();
    let schema = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fieldstore/tests/fixtures/ecmwf-fdb5-schema");
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "type: local\nengine: toc\nschema: {}\nspaces:\n- handler: Default\n  roots:\n  - path: {}\n",
            schema.display(),
            root.display()
        ),
    )
    .unwrap();
    config
}

fn fieldstore(config: &Path) -> Command {
    let mut c = common::fieldstore();
    configured(&mut c, config, &config.with_file_name("home"));
    c
}

fn write(config: &Path, files: &[PathBuf]) -> Output {
    fieldstore(config)
        .arg("write")
        .args(files)
        .output()
        .unwrap()
}

fn listing(config: &Path) -> Vec<String> {
    let mut v: Vec<String> = run(fieldstore(config).args(["list", "--all", "--porcelain"]))
        .lines()
        .map(str::to_string)
        .collect();
    v.sort();
    v
}

/// One retrieve request per listed field: `{a=1,b=2}{c=3}{d=4}` is `retrieve,a=1,b=2,c=3,d=4`.
fn requests(listing: &[String], path: &Path) -> PathBuf {
    let text: String = listing
        .iter()
        .map(|l| {
            let keys = l.trim_start_matches('{').trim_end_matches('}');
            format!("retrieve,{}\n", keys.replace("}{", ","))
        })
        .collect();
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

fn accepted() -> (Vec<PathBuf>, Vec<Vec<u8>>) {
    let files: Vec<PathBuf> = ACCEPTED.iter().map(|(f, _)| data(f)).collect();
    let mut all = Vec::new();
    for (path, (name, n)) in files.iter().zip(ACCEPTED) {
        let m = messages(path);
        assert_eq!(m.len(), n, "{name}");
        all.extend(m);
    }
    (files, sorted(all))
}

#[test]
fn real_files_are_archived_listed_and_read_back_as_they_were() {
    let d = tempfile::tempdir().unwrap();
    let (files, originals) = accepted();
    let config = new_store(&d.path().join("mapped"));
    let o = write(&config, &files);
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(o.status.success(), "{err}");
    // Zero padding is skipped silently: nothing to warn about in these files.
    assert!(!err.contains("skipped"), "{err}");
    let ours = listing(&config);
    assert_eq!(ours.len(), originals.len(), "one field per message");

    let req = requests(&ours, &d.path().join("requests"));
    let out = d.path().join("ours.grib");
    run(fieldstore(&config).arg("read").args([&req, &out]));
    // What is read back is each message from GRIB to 7777, without its padding.
    let total: usize = originals.iter().map(Vec::len).sum();
    assert_eq!(std::fs::metadata(&out).unwrap().len() as usize, total);
    assert!(
        sorted(messages(&out)) == originals,
        "fields read back differ from the messages archived"
    );

    // Streamed (standard input) framing agrees with framing the mapped files.
    let piped = new_store(&d.path().join("piped"));
    let mut child = fieldstore(&piped)
        .args(["write", "-"])
        .stdin(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        let mut stdin = child.stdin.take().unwrap();
        for f in &files {
            std::io::copy(&mut std::fs::File::open(f).unwrap(), &mut stdin).unwrap();
        }
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert_eq!(
        listing(&piped),
        ours,
        "stdin and mapped files list differently"
    );
}

#[test]
fn real_files_fdb5_refuses_are_refused_clearly() {
    let d = tempfile::tempdir().unwrap();
    let config = new_store(d.path());
    for (name, why) in REFUSED {
        let path = data(name);
        let o = write(&config, std::slice::from_ref(&path));
        let err = String::from_utf8_lossy(&o.stderr);
        assert!(!o.status.success(), "{name} was accepted");
        assert!(
            err.contains(&format!("{}: message 1 at offset 0", path.display())),
            "{name}: {err}"
        );
        assert!(err.contains(why), "{name}: expected '{why}' in {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(listing(&config).is_empty(), "{name} left fields behind");
    }
}

#[test]
fn real_files_list_and_read_as_in_fdb5() {
    if !have_fdb5() {
        return skip::skip(
            "real_files_list_and_read_as_in_fdb5",
            "FDB5's fdb-write",
            true,
        );
    }
    let d = tempfile::tempdir().unwrap();
    let (files, originals) = accepted();

    let theirs_config = new_store(&d.path().join("fdb5"));
    let home = d.path().join("fdb5/home");
    run(configured(&mut Command::new("fdb-write"), &theirs_config, &home).args(&files));
    let theirs = fdb5_listing(&theirs_config, &home);

    let config = new_store(&d.path().join("fieldstore"));
    let o = write(&config, &files);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ours = listing(&config);
    assert_eq!(ours, theirs, "listings differ from FDB5's");

    let req = requests(&theirs, &d.path().join("requests"));
    let (a, b) = (d.path().join("ours.grib"), d.path().join("theirs.grib"));
    run(fieldstore(&config).arg("read").args([&req, &a]));
    // Raw: the listed keys as they are; metkit 1.9 cannot expand `param` for every class here
    // (e.g. ERA5 `class=ea,stream=enda`).
    run(
        configured(&mut Command::new("fdb-read"), &theirs_config, &home)
            .arg("--raw")
            .args([&req, &b]),
    );
    let theirs_bytes = sorted(messages(&b));
    assert_eq!(theirs_bytes.len(), originals.len());
    assert!(
        theirs_bytes == originals,
        "FDB5 does not store GRIB..7777 as this test assumes"
    );
    assert!(
        sorted(messages(&a)) == theirs_bytes,
        "retrieved fields differ from FDB5's"
    );

    // What FDB5 refuses, it refuses whole (fieldstore's side: the test above).
    for (name, _) in REFUSED {
        let o = configured(&mut Command::new("fdb-write"), &theirs_config, &home)
            .arg(data(name))
            .output()
            .unwrap();
        assert!(!o.status.success(), "FDB5 now archives {name}");
    }
}
