//! scripts/build-c: builds both libraries and installs them with their headers under
//! target/fdb5 and target/fdb5-5.10 (and MultIO's C API under target/multio), with the sonames
//! programs record, and prints lines that build and run a program against each.

use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn soname(lib: &Path) -> String {
    let out = Command::new("readelf").arg("-d").arg(lib).output().unwrap();
    assert!(out.status.success(), "readelf {}", lib.display());
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .find(|l| l.contains("(SONAME)"))
        .and_then(|l| l.split('[').nth(1))
        .map(|s| s.trim_end_matches(']').to_string())
        .unwrap_or_default()
}

/// The value after `label` on the printed line starting with it, under the heading `heading`.
fn printed<'a>(stdout: &'a str, heading: &str, label: &str) -> &'a str {
    let section = stdout
        .split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("no '{heading}' in:\n{stdout}"));
    section
        .lines()
        .map(str::trim_start)
        .find_map(|l| l.strip_prefix(label))
        .unwrap_or_else(|| panic!("no '{label}' line under '{heading}' in:\n{stdout}"))
        .trim()
}

const PROGRAM: &str = r#"
#include <stdio.h>
#include "fdb5/api/fdb_c.h"
int main(void) {
    const char* v = NULL;
    if (fdb_initialise() != FDB_SUCCESS || fdb_version(&v) != FDB_SUCCESS) return 1;
    printf("%s\n", v);
    return 0;
}
"#;

#[test]
fn build_c_installs_both_libraries_and_prints_how_to_use_them() {
    // Same profile as this test, so the script reuses what cargo just built.
    let debug = cfg!(debug_assertions);
    let mut cmd = Command::new(workspace().join("scripts/build-c"));
    // Not the variables cargo sets for this test: build scripts that watch them (ring's watches
    // CARGO_MANIFEST_DIR) would see a change and rebuild half the tree here, and again when
    // the script runs from a shell (70 s each in CI).
    for (name, _) in std::env::vars_os() {
        let name = name.to_string_lossy();
        if name.starts_with("CARGO_MANIFEST")
            || name.starts_with("CARGO_PKG_")
            || name == "CARGO_CRATE_NAME"
            || name == "CARGO_PRIMARY_PACKAGE"
            || name == "OUT_DIR"
        {
            cmd.env_remove(&*name);
        }
    }
    if debug {
        cmd.arg("--debug");
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "scripts/build-c failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let up = workspace().join("target/fdb5");
    let old = workspace().join("target/fdb5-5.10");
    assert_eq!(soname(&up.join("lib/libfdb5.so")), "libfdb5.so");
    assert_eq!(soname(&old.join("lib/libfdb5.so.0d")), "libfdb5.so.0d");
    assert_eq!(
        std::fs::read_link(old.join("lib/libfdb5.so")).unwrap(),
        Path::new("libfdb5.so.0d")
    );
    for (prefix, header) in [
        (&up, "crates/libfdb5/include/fdb5/api/fdb_c.h"),
        (&old, "crates/libfdb5-510/include/fdb5/api/fdb_c.h"),
    ] {
        assert_eq!(
            std::fs::read(prefix.join("include/fdb5/api/fdb_c.h")).unwrap(),
            std::fs::read(workspace().join(header)).unwrap(),
            "installed header differs from {header}"
        );
    }

    for prefix in [&up, &old] {
        assert_eq!(
            std::fs::read(prefix.join("include/fieldstore/fdb_subscribe.h")).unwrap(),
            std::fs::read(
                workspace().join("crates/fieldstore-c/include/fieldstore/fdb_subscribe.h")
            )
            .unwrap(),
            "the extension header is not installed under {}",
            prefix.display()
        );
    }

    // MultIO's C API (crates/libmultio-api), installed beside them.
    let mio = workspace().join("target/multio");
    assert_eq!(
        soname(&mio.join("lib/libmultio-api.so")),
        "libmultio-api.so"
    );
    assert_eq!(
        std::fs::read(mio.join("include/multio_c.h")).unwrap(),
        std::fs::read(workspace().join("crates/libmultio-api/include/multio_c.h")).unwrap(),
        "the installed multio_c.h differs from crates/libmultio-api/include/multio_c.h"
    );

    // The printed lines build and run a program against each library, as printed.
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("prog.c"), PROGRAM).unwrap();
    for (heading, version) in [
        ("Upstream FDB5's C API", "5.25.0"),
        ("Debian's FDB5 5.10 C API", "5.10.8"),
    ] {
        let build = printed(&stdout, heading, "build");
        let status = Command::new("sh")
            .arg("-c")
            .arg(format!("{build} -o prog"))
            .current_dir(dir.path())
            .status()
            .unwrap();
        assert!(status.success(), "{build}");
        let run = printed(&stdout, heading, "run");
        let run = run.split("  ").next().unwrap();
        let out = Command::new("sh")
            .arg("-c")
            .arg(run)
            .current_dir(dir.path())
            .output()
            .unwrap();
        assert!(out.status.success(), "{run}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            version,
            "{run}"
        );
    }
    std::fs::write(dir.path().join("prog.c"), MULTIO_PROGRAM).unwrap();
    let heading = "MultIO's C API for fields";
    let build = printed(&stdout, heading, "build");
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("{build} -o prog"))
        .current_dir(dir.path())
        .status()
        .unwrap();
    assert!(status.success(), "{build}");
    let run = printed(&stdout, heading, "run");
    let run = run.split("  ").next().unwrap();
    let out = Command::new("sh")
        .arg("-c")
        .arg(run)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{run}");
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "2.12.0",
        "{run}"
    );
}

const MULTIO_PROGRAM: &str = r#"
#include <stdio.h>
#include "multio_c.h"
int main(void) {
    const char* v = NULL;
    if (multio_initialise() != MULTIO_SUCCESS || multio_version(&v) != MULTIO_SUCCESS) return 1;
    printf("%s\n", v);
    return 0;
}
"#;
