//! `fieldstore adopt`: GRIB files and objects of a real MinIO's buckets indexed where they lie.
//! Read back byte for byte, no GRIB byte in the store's own files, a changed or vanished file or
//! object named on read, wipe and purge leaving the user's file or object alone; in an
//! FDB5-format store, FDB5 reads the adopted file too, and S3 objects are refused.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

#[path = "common/fdb5.rs"]
#[allow(dead_code)]
mod fdb5;
#[path = "../../fieldstore/tests/support/minio.rs"]
mod minio;
#[path = "common/skip.rs"]
mod skip;

const FS: &str = env!("CARGO_BIN_EXE_fieldstore");

fn schema() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fieldstore/tests/fixtures/ecmwf-fdb5-schema")
}

struct Store {
    _dir: tempfile::TempDir,
    dir: PathBuf,
    config: PathBuf,
}

fn store(format: &str) -> Store {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path().to_path_buf();
    let config = dir.join("config.yaml");
    std::fs::write(
        &config,
        format!(
            "type: local\nengine: toc\n{format}schema: {}\nspaces:\n- roots:\n  - path: {}\n",
            schema().display(),
            dir.join("root").display()
        ),
    )
    .unwrap();
    Store {
        _dir: d,
        dir,
        config,
    }
}

fn fs(s: &Store, args: &[&str]) -> Output {
    Command::new(FS)
        .args(args)
        .env("FDB5_CONFIG_FILE", &s.config)
        .env("FDB_DBNAMES_FILE", "/nonexistent")
        .env_remove("FDB_CONFIG_FILE")
        .env_remove("FDB_HOME")
        .output()
        .unwrap()
}

fn ok(what: &str, o: &Output) -> String {
    assert!(
        o.status.success(),
        "{what}: {}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

const ALL: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step=0/6/12,levelist=1000/850/500,param=t/u/v";

fn sample(s: &Store) -> PathBuf {
    let user = s.dir.join("user");
    std::fs::create_dir_all(&user).unwrap();
    let file = user.join("fields.grib");
    ok(
        "sample",
        &fs(
            s,
            &["sample", "--out", file.to_str().unwrap(), "--points", "500"],
        ),
    );
    file
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn adopted_fields_read_back_from_the_users_file_and_a_change_is_named() {
    let s = store("");
    let file = sample(&s);
    let original = std::fs::read(&file).unwrap();
    let o = fs(&s, &["adopt", file.to_str().unwrap()]);
    ok("adopt", &o);
    assert!(String::from_utf8_lossy(&o.stderr).contains("adopted 27 fields"));
    // Not one GRIB byte in the store: no data file, no message in any file.
    for f in files(&s.dir.join("root")) {
        assert!(!f.to_string_lossy().ends_with(".data"), "{f:?}");
        // A message starts `GRIB`, 3 bytes, then its edition (1 or 2).
        let b = std::fs::read(&f).unwrap();
        let message = |w: &[u8]| &w[..4] == b"GRIB" && matches!(w[7], 1 | 2);
        assert!(!b.windows(8).any(message), "GRIB bytes in {f:?}");
    }
    let listed = ok("list", &fs(&s, &["list", "class=od", "--location"]));
    assert_eq!(listed.lines().count(), 27, "{listed}");
    assert!(listed
        .lines()
        .all(|l| l.contains(&format!("file://{}", file.display()))));
    // Read back in the file's order: the same bytes.
    let out = s.dir.join("out.grib");
    ok("read", &fs(&s, &["read", ALL, out.to_str().unwrap()]));
    let mut got = std::fs::read(&out).unwrap();
    let mut want = original.clone();
    got.sort();
    want.sort();
    assert_eq!(got.len(), original.len());
    assert_eq!(got, want);
    // The file changed (same size, new time): the read fails naming it, and changes nothing.
    let f = std::fs::File::options().write(true).open(&file).unwrap();
    f.set_modified(std::time::SystemTime::now() + std::time::Duration::from_secs(5))
        .unwrap();
    drop(f);
    let _ = std::fs::remove_file(&out);
    let o = fs(&s, &["read", ALL, out.to_str().unwrap()]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains(&file.display().to_string()) && err.contains("was adopted and has changed"),
        "{err}"
    );
    // Adopting it again indexes what it holds now.
    ok("adopt again", &fs(&s, &["adopt", file.to_str().unwrap()]));
    ok("read", &fs(&s, &["read", ALL, out.to_str().unwrap()]));
    // Gone: named too.
    let moved = s.dir.join("moved.grib");
    std::fs::rename(&file, &moved).unwrap();
    let o = fs(&s, &["read", ALL, out.to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains(&file.display().to_string()));
    std::fs::rename(&moved, &file).unwrap();
    // Purge and wipe forget entries; the user's file stays as it was.
    ok(
        "purge",
        &fs(
            &s,
            &[
                "purge",
                "class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g",
                "--doit",
            ],
        ),
    );
    ok(
        "wipe",
        &fs(
            &s,
            &[
                "wipe",
                "class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g",
                "--doit",
            ],
        ),
    );
    assert_eq!(std::fs::read(&file).unwrap(), original);
}

#[test]
fn adopting_what_is_not_a_regular_file_is_refused_and_changes_nothing() {
    let s = store("");
    let o = fs(&s, &["adopt", "/dev/null"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("regular files"));
    let o = fs(&s, &["adopt", s.dir.join("missing.grib").to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("missing.grib"));
    assert!(!s.dir.join("root").exists() || files(&s.dir.join("root")).is_empty());
}

#[test]
fn fdb5_reads_files_adopted_into_an_fdb5_format_store() {
    if !fdb5::have_fdb5() {
        skip::skip("adopt in FDB5 format", "FDB5's fdb-read", true);
        return;
    }
    let s = store("format: fdb5\n");
    let file = sample(&s);
    ok("adopt", &fs(&s, &["adopt", file.to_str().unwrap()]));
    let req = s.dir.join("req");
    std::fs::write(&req, format!("retrieve,{ALL}\n")).unwrap();
    let theirs = s.dir.join("theirs.grib");
    let o = Command::new("fdb-read")
        .arg(&req)
        .arg(&theirs)
        .env("FDB5_CONFIG_FILE", &s.config)
        .env("FDB_DBNAMES_FILE", "/nonexistent")
        .output()
        .unwrap();
    ok("fdb-read", &o);
    let mine = s.dir.join("mine.grib");
    ok("read", &fs(&s, &["read", ALL, mine.to_str().unwrap()]));
    assert_eq!(
        std::fs::read(&theirs).unwrap(),
        std::fs::read(&mine).unwrap()
    );
    assert_eq!(
        std::fs::read(&mine).unwrap().len(),
        std::fs::read(&file).unwrap().len()
    );
}

/// `fieldstore` with the store's config and only the S3 settings given (no inherited
/// `AWS_*`, and a `HOME` without `~/.aws`), as a user whose shell exports them.
fn fs_s3(s: &Store, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(FS);
    c.args(args)
        .env("FDB5_CONFIG_FILE", &s.config)
        .env("FDB_DBNAMES_FILE", "/nonexistent")
        .env("HOME", &s.dir)
        .env_remove("FDB_CONFIG_FILE")
        .env_remove("FDB_HOME");
    for v in [
        "AWS_ENDPOINT_URL",
        "AWS_ENDPOINT_URL_S3",
        "AWS_ACCESS_KEY_ID",
        "AWS_SECRET_ACCESS_KEY",
        "AWS_SESSION_TOKEN",
        "AWS_REGION",
        "AWS_DEFAULT_REGION",
        "AWS_PROFILE",
        "AWS_SHARED_CREDENTIALS_FILE",
    ] {
        c.env_remove(v);
    }
    c.envs(env.iter().copied()).output().unwrap()
}

fn failed(what: &str, o: &Output) -> String {
    assert!(
        !o.status.success(),
        "{what} should fail: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// A client of one bucket of the server, for the test to play the user with.
fn bucket(m: &minio::Minio, name: &str) -> fieldstore::storage::s3::S3Client {
    let mut cfg = fieldstore::model::config::S3Config::new(&m.endpoint, name);
    cfg.access_key_id = Some(m.access_key.clone());
    cfg.secret_access_key = Some(m.secret_key.clone());
    fieldstore::storage::s3::S3Client::connect(&cfg).unwrap()
}

/// The GRIB messages of a buffer, in order (edition 1: 3-byte length at 4; 2: 8 bytes at 8).
fn messages(mut b: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    while b.len() >= 16 {
        assert_eq!(&b[..4], b"GRIB", "not at a message");
        let len = match b[7] {
            1 => u64::from_be_bytes([0, 0, 0, 0, 0, b[4], b[5], b[6]]),
            _ => u64::from_be_bytes(b[8..16].try_into().unwrap()),
        } as usize;
        out.push(b[..len].to_vec());
        b = &b[len..];
    }
    assert!(b.is_empty(), "{} bytes after the last message", b.len());
    out
}

/// Whether any file under `dir` holds the start of a GRIB message.
fn grib_bytes_under(dir: &Path) -> Vec<PathBuf> {
    let message = |w: &[u8]| &w[..4] == b"GRIB" && matches!(w[7], 1 | 2);
    files(dir)
        .into_iter()
        .filter(|f| {
            f.to_string_lossy().ends_with(".data")
                || std::fs::read(f).unwrap().windows(8).any(message)
        })
        .collect()
}

const DB: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g";

/// The common case: a toc store on disk adopting an object of a bucket, the server and
/// credentials from the standard AWS variables only.
#[test]
fn adopted_s3_objects_read_back_and_a_change_or_deletion_is_named() {
    let Some(m) = minio::Minio::start_or_skip("adopt s3") else {
        return;
    };
    let s = store("");
    let file = sample(&s);
    let original = std::fs::read(&file).unwrap();
    let user = bucket(&m, "user-grib");
    user.put("era/fields.grib", &original).unwrap();
    let uri = "s3://user-grib/era/fields.grib";
    let env = [
        ("AWS_ENDPOINT_URL", m.endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", m.access_key.as_str()),
        ("AWS_SECRET_ACCESS_KEY", m.secret_key.as_str()),
    ];
    let run = |args: &[&str]| fs_s3(&s, args, &env);

    let o = run(&["adopt", uri]);
    ok("adopt", &o);
    let said = String::from_utf8_lossy(&o.stderr);
    assert!(
        said.contains("adopted 27 fields") && said.contains("1 S3 objects"),
        "{said}"
    );
    // Not one GRIB byte in the store: no data file, no message in any file.
    let holding = grib_bytes_under(&s.dir.join("root"));
    assert!(holding.is_empty(), "GRIB bytes in {holding:?}");

    // Each location is the object's URI, with the message's offset and length in it.
    let listed = ok("list", &run(&["list", "class=od", "--location"]));
    assert_eq!(listed.lines().count(), 27, "{listed}");
    let by_offset: std::collections::BTreeMap<usize, usize> = messages(&original)
        .iter()
        .scan(0, |at, msg| {
            let o = *at;
            *at += msg.len();
            Some((o, msg.len()))
        })
        .collect();
    for line in listed.lines() {
        assert!(line.contains(uri), "{line}");
        let found = by_offset
            .iter()
            .any(|(o, l)| line.contains(&format!("{o}")) && line.contains(&format!("{l}")));
        assert!(found, "no message's offset and length in {line}");
    }

    // Read back: the very messages of the object, each byte for byte.
    let out = s.dir.join("out.grib");
    ok("read", &run(&["read", ALL, out.to_str().unwrap()]));
    let mut got = messages(&std::fs::read(&out).unwrap());
    let mut want = messages(&original);
    assert_eq!(got.len(), 27);
    got.sort();
    want.sort();
    assert_eq!(got, want);

    // Written anew with other bytes: the read fails naming the object, what it was and is.
    let other = s.dir.join("other.grib");
    ok(
        "sample",
        &fs(
            &s,
            &[
                "sample",
                "--out",
                other.to_str().unwrap(),
                "--points",
                "400",
            ],
        ),
    );
    user.put("era/fields.grib", &std::fs::read(&other).unwrap())
        .unwrap();
    let _ = std::fs::remove_file(&out);
    let err = failed(
        "read of a changed object",
        &run(&["read", ALL, out.to_str().unwrap()]),
    );
    assert!(
        err.contains(uri) && err.contains("was adopted and has changed") && err.contains("ETag"),
        "{err}"
    );
    assert!(
        err.contains(&format!("adopted at {} bytes", original.len())),
        "{err}"
    );
    // Listing needs no byte of it and still works.
    assert_eq!(ok("list", &run(&["list", "class=od"])).lines().count(), 27);

    // Deleted: named as gone.
    user.delete("era/fields.grib").unwrap();
    let err = failed(
        "read of a deleted object",
        &run(&["read", ALL, out.to_str().unwrap()]),
    );
    assert!(err.contains(uri) && err.contains("does not exist"), "{err}");

    // Restored as it was (same bytes, same ETag): readable again.
    user.put("era/fields.grib", &original).unwrap();
    ok("read", &run(&["read", ALL, out.to_str().unwrap()]));
    assert_eq!(std::fs::read(&out).unwrap().len(), original.len());

    // Written anew and adopted again: the new entries mask the old; purge forgets the old ones
    // (without claiming to remove the object), wipe the rest; the object is left as it is.
    let other_bytes = std::fs::read(&other).unwrap();
    user.put("era/fields.grib", &other_bytes).unwrap();
    ok("adopt again", &run(&["adopt", uri]));
    let full = ok("list", &run(&["list", "class=od", "--full"]));
    assert_eq!(full.lines().count(), 54, "{full}");
    ok("read", &run(&["read", ALL, out.to_str().unwrap()]));
    let (mut got, mut want) = (
        messages(&std::fs::read(&out).unwrap()),
        messages(&other_bytes),
    );
    got.sort();
    want.sort();
    assert_eq!(got, want, "the newest adoption's bytes");
    let purged = ok("purge", &run(&["purge", DB, "--doit"]));
    assert!(!purged.contains(uri), "{purged}");
    assert_eq!(
        ok("list", &run(&["list", "class=od", "--full"]))
            .lines()
            .count(),
        27
    );
    let wiped = ok("wipe", &run(&["wipe", DB, "--doit"]));
    assert!(!wiped.contains(uri), "{wiped}");
    assert_eq!(ok("list", &run(&["list", "class=od"])).lines().count(), 0);
    assert_eq!(
        user.get("era/fields.grib").unwrap().as_deref(),
        Some(&other_bytes[..])
    );

    // An object that is not there, or not GRIB, is refused and makes nothing visible.
    let err = failed(
        "adopt missing",
        &run(&["adopt", "s3://user-grib/missing.grib"]),
    );
    assert!(err.contains("s3://user-grib/missing.grib"), "{err}");
    user.put("notes.txt", b"not a GRIB file at all").unwrap();
    failed("adopt text", &run(&["adopt", "s3://user-grib/notes.txt"]));
    assert_eq!(ok("list", &run(&["list", "class=od"])).lines().count(), 0);
    // Without credentials: says where it looked.
    let err = failed(
        "adopt without credentials",
        &fs_s3(
            &s,
            &["adopt", uri],
            &[("AWS_ENDPOINT_URL", m.endpoint.as_str())],
        ),
    );
    assert!(err.contains("AWS_ACCESS_KEY_ID"), "{err}");
}

/// A toc catalogue over an S3 store: objects of another bucket adopted with the store's own
/// server and credentials; the store's own objects cannot be adopted; FDB5's format refuses.
#[test]
fn an_s3_store_adopts_objects_of_other_buckets_and_never_deletes_them() {
    let Some(m) = minio::Minio::start_or_skip("adopt s3 store") else {
        return;
    };
    let s = store("");
    std::fs::write(
        &s.config,
        format!(
            "type: local\nengine: toc\nstore: s3\nschema: {}\nspaces:\n- roots:\n  - path: {}\ns3:\n  endpoint: {}\n  bucket: fields\n  prefix: ops/\n  access_key_id: {}\n  secret_access_key: {}\n  grace: 0s\n",
            schema().display(),
            s.dir.join("root").display(),
            m.endpoint,
            m.access_key,
            m.secret_key
        ),
    )
    .unwrap();
    // Larger than the 8 MiB an adoption reads at a time: messages straddle its GETs.
    let file = s.dir.join("big.grib");
    ok(
        "sample",
        &fs(
            &s,
            &[
                "sample",
                "--out",
                file.to_str().unwrap(),
                "--points",
                "250000",
            ],
        ),
    );
    let original = std::fs::read(&file).unwrap();
    assert!(original.len() > 12 << 20, "{}", original.len());
    let user = bucket(&m, "user-grib");
    user.put("a.grib", &original).unwrap();
    let run = |args: &[&str]| fs_s3(&s, args, &[]);
    ok("adopt", &run(&["adopt", "s3://user-grib/a.grib"]));
    let out = s.dir.join("out.grib");
    ok("read", &run(&["read", ALL, out.to_str().unwrap()]));
    let (mut got, mut want) = (messages(&std::fs::read(&out).unwrap()), messages(&original));
    got.sort();
    want.sort();
    assert_eq!(got, want);
    // Nothing in the store's bucket but what the store itself keeps: no GRIB byte.
    let store_bucket = bucket(&m, "fields");
    for o in store_bucket.list("") {
        let o = o.unwrap();
        let b = store_bucket.get(&o.key).unwrap().unwrap_or_default();
        assert!(
            !b.windows(4).any(|w| w == b"GRIB"),
            "GRIB bytes in {}",
            o.key
        );
    }
    assert!(grib_bytes_under(&s.dir.join("root")).is_empty());
    // The store's own objects are not the user's to adopt.
    store_bucket.put("ops/data/x.grib", &original).unwrap();
    let err = failed("adopt own", &run(&["adopt", "s3://fields/ops/data/x.grib"]));
    assert!(err.contains("store's own bucket and prefix"), "{err}");
    ok("wipe", &run(&["wipe", DB, "--doit"]));
    assert_eq!(user.get("a.grib").unwrap().as_deref(), Some(&original[..]));

    // A database kept in FDB5's format: FDB5 cannot read s3 objects, so it is refused.
    let f = store("format: fdb5\n");
    std::fs::write(
        &f.config,
        format!(
            "{}adopt:\n  s3:\n    endpoint: {}\n    access_key_id: {}\n    secret_access_key: {}\n",
            std::fs::read_to_string(&f.config).unwrap(),
            m.endpoint,
            m.access_key,
            m.secret_key
        ),
    )
    .unwrap();
    let err = failed(
        "adopt into FDB5's format",
        &fs_s3(&f, &["adopt", "s3://user-grib/a.grib"], &[]),
    );
    assert!(
        err.contains("FDB5's format") && err.contains("s3://user-grib/a.grib"),
        "{err}"
    );
    assert_eq!(
        ok("list", &fs_s3(&f, &["list", "class=od"], &[]))
            .lines()
            .count(),
        0
    );
}
