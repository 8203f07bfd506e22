//! ecCodes is opened at run time and only when needed: `fieldstore list` and `read` load no
//! libeccodes (checked with the dynamic loader's own trace, `LD_DEBUG=files`), `write` loads it,
//! and a missing library is one error naming what to install, not a failure to start.

use std::path::Path;
use std::process::{Command, Output};

const FS: &str = env!("CARGO_BIN_EXE_fieldstore");

const ONE: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl,\
                   levelist=500,param=130,step=0";

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// A store at `dir/root` with its config at `dir/config.yaml`.
fn config(dir: &Path) -> std::path::PathBuf {
    let c = dir.join("config.yaml");
    std::fs::write(
        &c,
        format!(
            "type: local\nengine: toc\nspaces:\n- roots:\n  - path: {}\n",
            dir.join("root").display()
        ),
    )
    .unwrap();
    c
}

fn fs(config: &Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut c = Command::new(FS);
    c.arg("--config").arg(config);
    c.env_remove("FIELDSTORE_ECCODES_LIB");
    for (k, v) in env {
        c.env(k, v);
    }
    c.args(args).output().unwrap()
}

fn loads_eccodes(o: &Output) -> bool {
    String::from_utf8_lossy(&o.stderr)
        .lines()
        .any(|l| l.contains("file=") && l.contains("libeccodes.so"))
}

#[test]
fn list_and_read_load_no_eccodes_write_does() {
    let d = tempfile::tempdir().unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fieldstore/tests/fixtures/stores/v3/root");
    copy_dir(&fixture, &d.path().join("root"));
    let cfg = config(d.path());
    let trace = [("LD_DEBUG", "files")];

    let list = fs(&cfg, &trace, &["list", "class=od"]);
    assert!(list.status.success(), "{list:?}");
    assert!(String::from_utf8_lossy(&list.stdout).contains("param=130"));
    // The trace names every library the loader opens: the check can fail, and does for write.
    assert!(String::from_utf8_lossy(&list.stderr).contains("file="));
    assert!(!loads_eccodes(&list), "list loaded ecCodes");

    let out = d.path().join("one.grib");
    let read = fs(&cfg, &trace, &["read", ONE, out.to_str().unwrap()]);
    assert!(read.status.success(), "{read:?}");
    assert_eq!(std::fs::metadata(&out).unwrap().len(), 228);
    assert!(!loads_eccodes(&read), "read loaded ecCodes");
    // A well-known short name is resolved without ecCodes too.
    let by_name = ONE.replace("param=130", "param=t");
    let named = d.path().join("named.grib");
    let read = fs(&cfg, &trace, &["read", &by_name, named.to_str().unwrap()]);
    assert!(read.status.success(), "{read:?}");
    assert_eq!(std::fs::read(&named).unwrap(), std::fs::read(&out).unwrap());
    assert!(!loads_eccodes(&read), "read of param=t loaded ecCodes");

    // ECMWF's GRIB2: its keys are read natively, so writing it needs no ecCodes either.
    let w = tempfile::tempdir().unwrap();
    let wcfg = config(w.path());
    let write = fs(&wcfg, &trace, &["write", out.to_str().unwrap()]);
    assert!(write.status.success(), "{write:?}");
    assert!(
        !loads_eccodes(&write),
        "write of a field read natively loaded ecCodes"
    );

    // The same field as GRIB1, which the native reader leaves to ecCodes: loaded then.
    let g1 = w.path().join("one-grib1.grib");
    let made = Command::new("grib_set")
        .args(["-s", "edition=1"])
        .arg(&out)
        .arg(&g1)
        .output();
    match made {
        Ok(o) if o.status.success() => {
            let write = fs(&wcfg, &trace, &["write", g1.to_str().unwrap()]);
            assert!(write.status.success(), "{write:?}");
            assert!(loads_eccodes(&write), "write of GRIB1 did not load ecCodes");
        }
        _ => eprintln!("grib_set (libeccodes-tools) missing: the GRIB1 write is not checked"),
    }
}

#[test]
fn a_missing_eccodes_is_one_error_naming_what_to_install() {
    let d = tempfile::tempdir().unwrap();
    let fixture =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../fieldstore/tests/fixtures/stores/v3/root");
    copy_dir(&fixture, &d.path().join("root"));
    let cfg = config(d.path());
    let none = [("FIELDSTORE_ECCODES_LIB", "/nonexistent/libeccodes.so")];

    // Reading needs no ecCodes, so a missing one does not matter.
    let out = d.path().join("one.grib");
    let read = fs(&cfg, &none, &["read", ONE, out.to_str().unwrap()]);
    assert!(read.status.success(), "{read:?}");

    let info = fs(&cfg, &none, &["info"]);
    assert!(info.status.success(), "{info:?}");
    let text = String::from_utf8_lossy(&info.stdout);
    assert!(text.contains("ecCodes: not loaded"), "{text}");

    // A field whose keys need ecCodes (GRIB1: the native reader leaves it) fails to write,
    // naming what to install.
    let w = tempfile::tempdir().unwrap();
    let g1 = w.path().join("one-grib1.grib");
    let made = Command::new("grib_set")
        .args(["-s", "edition=1"])
        .arg(&out)
        .arg(&g1)
        .output();
    if !made.is_ok_and(|o| o.status.success()) {
        eprintln!("grib_set (libeccodes-tools) missing: the failing write is not checked");
        return;
    }
    let write = fs(&config(w.path()), &none, &["write", g1.to_str().unwrap()]);
    assert!(!write.status.success());
    let err = String::from_utf8_lossy(&write.stderr);
    assert!(err.contains("/nonexistent/libeccodes.so"), "{err}");
    assert!(err.contains("pip install eccodeslib"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn info_names_the_loaded_eccodes() {
    let d = tempfile::tempdir().unwrap();
    let info = fs(&config(d.path()), &[], &["info"]);
    assert!(info.status.success(), "{info:?}");
    let text = String::from_utf8_lossy(&info.stdout);
    let line = text.lines().nth(1).unwrap_or_default();
    // e.g. "ecCodes 2.28.0 (the system's)", then the library's path.
    assert!(line.starts_with("ecCodes 2."), "{text}");
    assert!(
        text.contains("  library: /") && text.contains("libeccodes.so"),
        "{text}"
    );
}

/// Another ecCodes release than the system's: the eccodeslib wheel's library in a virtualenv
/// the suite made (`FIELDSTORE_TEST_ECCODESLIB` names one explicitly).
fn other_eccodes() -> Option<std::path::PathBuf> {
    if let Some(p) = std::env::var_os("FIELDSTORE_TEST_ECCODESLIB") {
        return Some(p.into());
    }
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target");
    let mut found: Vec<_> = std::fs::read_dir(&target)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("py-venv"))
        .filter_map(|e| std::fs::read_dir(e.path().join("lib")).ok())
        .flatten()
        .flatten()
        .map(|py| {
            py.path()
                .join("site-packages/eccodeslib/lib64/libeccodes.so")
        })
        .filter(|p| p.exists())
        .collect();
    found.sort();
    found.pop()
}

fn version_of(config: &Path, env: &[(&str, &str)]) -> String {
    let info = fs(config, env, &["info"]);
    let text = String::from_utf8_lossy(&info.stdout).into_owned();
    text.lines()
        .nth(1)
        .and_then(|l| l.split_whitespace().nth(1))
        .unwrap_or_default()
        .to_string()
}

/// ecCodes releases file a few messages under different keys, so a store records the release
/// its writers' ecCodes keys follow, and a writer that loaded another is refused before its
/// flush makes anything visible. Fields whose keys the native reader read (GRIB 2 as ECMWF
/// writes it) do not depend on the release and are not refused.
#[test]
fn writers_with_another_eccodes_release_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let c = config(d.path());
    let record = d.path().join("root/.fieldstore-eccodes");
    let grib1 = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/real-grib/era5-levels-members.grib");
    let grib1 = grib1.to_str().unwrap();
    let system = version_of(&c, &[]);
    assert!(system.starts_with("2."), "{system}");

    // GRIB 1: keys by ecCodes; the first writer records its release.
    let w = fs(&c, &[], &["write", grib1]);
    assert!(w.status.success(), "{w:?}");
    assert_eq!(
        std::fs::read_to_string(&record).unwrap(),
        format!("{system}\n")
    );
    let listed = |c: &Path| {
        let o = fs(c, &[], &["list", "class=ea", "--porcelain"]);
        String::from_utf8_lossy(&o.stdout).lines().count()
    };
    let before = listed(&c);
    assert!(before > 0);

    // Another release: a real one when the suite installed the eccodeslib wheel, else a
    // record as another release's writer would have left it.
    let other = other_eccodes();
    let env: Vec<(&str, String)> = match &other {
        Some(lib) => vec![("FIELDSTORE_ECCODES_LIB", lib.display().to_string())],
        None => Vec::new(),
    };
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let loaded = version_of(&c, &env);
    if other.is_none() || loaded == system {
        std::fs::write(&record, "1.0.0\n").unwrap();
    }
    let recorded = std::fs::read_to_string(&record).unwrap().trim().to_string();
    assert_ne!(recorded, loaded);
    let w = fs(&c, &env, &["write", grib1]);
    assert!(!w.status.success(), "{w:?}");
    let err = String::from_utf8_lossy(&w.stderr);
    assert!(
        err.contains(&format!("read by ecCodes {recorded}"))
            && err.contains(&format!("loaded ecCodes {loaded}"))
            && err.contains(".fieldstore-eccodes"),
        "{err}"
    );
    assert_eq!(listed(&c), before, "a refused flush made fields visible");

    // GRIB 2 whose keys the native reader reads: not refused, whatever the release.
    let g2 = d.path().join("g2.grib");
    let s = fs(&c, &[], &["sample", "--out", g2.to_str().unwrap()]);
    assert!(s.status.success(), "{s:?}");
    let w = fs(&c, &env, &["write", g2.to_str().unwrap()]);
    assert!(w.status.success(), "{w:?}");

    // Once every writer has moved, the operator deletes the record: the next writer records.
    std::fs::remove_file(&record).unwrap();
    let w = fs(&c, &env, &["write", grib1]);
    assert!(w.status.success(), "{w:?}");
    assert_eq!(
        std::fs::read_to_string(&record).unwrap(),
        format!("{loaded}\n")
    );
}

/// The native reader's answers follow the tables this fieldstore carries, so a store records
/// their version too: a writer carrying other tables (another fieldstore release) is refused
/// before its flush makes anything visible; keys ecCodes read are checked against the ecCodes
/// record only.
#[test]
fn writers_with_other_native_tables_are_refused() {
    let d = tempfile::tempdir().unwrap();
    let c = config(d.path());
    let record = d.path().join("root/.fieldstore-mars-tables");
    let info = fs(&c, &[], &["info"]);
    let info = String::from_utf8_lossy(&info.stdout).into_owned();
    let tables = info
        .lines()
        .find_map(|l| l.strip_prefix("MARS key tables (native reader): "))
        .unwrap_or_else(|| panic!("{info}"))
        .to_string();
    assert!(tables.starts_with("fieldstore-mars-"), "{tables}");

    let g2 = d.path().join("g2.grib");
    let s = fs(&c, &[], &["sample", "--out", g2.to_str().unwrap()]);
    assert!(s.status.success(), "{s:?}");
    let g2 = g2.to_str().unwrap();
    let w = fs(&c, &[], &["write", g2]);
    assert!(w.status.success(), "{w:?}");
    assert_eq!(
        std::fs::read_to_string(&record).unwrap(),
        format!("{tables}\n")
    );
    // Only the native reader read keys: no ecCodes record.
    assert!(!d.path().join("root/.fieldstore-eccodes").exists());
    // `info` shows what the store recorded.
    let info = fs(&c, &[], &["info"]);
    let info = String::from_utf8_lossy(&info.stdout).into_owned();
    assert!(
        info.contains(&format!(
            ": native tables {tables} (.fieldstore-mars-tables)"
        )),
        "{info}"
    );
    let listed = |step: &str| {
        let o = fs(
            &c,
            &[],
            &["list", &format!("class=od,step={step}"), "--porcelain"],
        );
        String::from_utf8_lossy(&o.stdout).lines().count()
    };
    let before = listed("0");
    assert!(before > 0);

    // As an older fieldstore would have left it.
    let older = "fieldstore-mars-0+eccodes-2.20.0";
    std::fs::write(&record, format!("{older}\n")).unwrap();
    let w = fs(&c, &[], &["write", g2]);
    assert!(!w.status.success(), "{w:?}");
    let err = String::from_utf8_lossy(&w.stderr);
    assert!(
        err.contains(&format!("native tables {older}"))
            && err.contains(&format!("carries tables {tables}"))
            && err.contains(".fieldstore-mars-tables"),
        "{err}"
    );
    assert_eq!(listed("0"), before, "a refused flush made fields visible");

    // GRIB 1 (keys by ecCodes) is not judged by the tables' record.
    let grib1 = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/data/real-grib/era5-levels-members.grib");
    let w = fs(&c, &[], &["write", grib1.to_str().unwrap()]);
    assert!(w.status.success(), "{w:?}");

    // Deleted once every writer carries the new tables: the next writer records them.
    std::fs::remove_file(&record).unwrap();
    let w = fs(&c, &[], &["write", g2]);
    assert!(w.status.success(), "{w:?}");
    assert_eq!(
        std::fs::read_to_string(&record).unwrap(),
        format!("{tables}\n")
    );
}
