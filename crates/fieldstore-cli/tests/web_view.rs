//! The web view (docs/http.md) in a real browser: Debian's Chromium driven headlessly by
//! Selenium (`tests/web/browser.py`), against a real `fieldstore server --http` with a token:
//! sign in, browse by facets, plot (screenshots with coloured pixels), hover, click for the
//! value and time series (equal to `grib_get -l`), the keyboard, the download, regular,
//! Gaussian, reduced and rotated grids, and a field appearing live after another process
//! writes.
//!
//! Chromium, its driver and Selenium come from `scripts/browser-install` (apt and PyPI), which
//! this test runs. Where they cannot be installed the test is skipped, unless
//! FIELDSTORE_NEED_BROWSER=1 (scripts/test sets it): then it fails.

mod common;
#[path = "common/server.rs"]
mod server;

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The Python with Selenium, installed (with Chromium) by scripts/browser-install; `None`
/// when it cannot be, and the browser is not required.
pub fn browser_python() -> Option<PathBuf> {
    let need = std::env::var("FIELDSTORE_NEED_BROWSER").is_ok_and(|v| v == "1");
    let out = Command::new(repo().join("scripts/browser-install")).output();
    match out {
        Ok(o) if o.status.success() => {
            let text = String::from_utf8_lossy(&o.stdout);
            Some(PathBuf::from(
                text.lines().last().unwrap_or_default().trim(),
            ))
        }
        other => {
            let why = match other {
                Ok(o) => String::from_utf8_lossy(&o.stderr).into_owned(),
                Err(e) => e.to_string(),
            };
            assert!(
                !need,
                "FIELDSTORE_NEED_BROWSER=1 but the browser cannot be installed: {why}"
            );
            eprintln!("skipped: no browser (scripts/browser-install failed: {why})");
            None
        }
    }
}

#[test]
fn the_web_view_in_chromium() {
    let Some(python) = browser_python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let path = |n: &str| dir.path().join(n);
    let config = path("local.yaml");
    std::fs::write(
        &config,
        format!(
            "type: local\nspaces: [{{roots: [{{path: {}}}]}}]\n",
            path("root").display()
        ),
    )
    .unwrap();
    let cli = |args: &[&str]| {
        let mut c = common::fieldstore();
        c.arg("--config").arg(&config).args(args);
        common::succeeded(&format!("{args:?}"), &c.output().unwrap())
    };
    let file = |n: &str| path(n).to_str().unwrap().to_string();
    cli(&[
        "sample",
        "--out",
        &file("t.grib"),
        "--params",
        "t/u",
        "--levels",
        "500/850",
        "--steps",
        "0/6/12",
        "--points",
        "65000",
    ]);
    cli(&["write", &file("t.grib")]);
    // Reduced and regular Gaussian, rotated lat/lon: made from ecCodes' samples.
    let made = Command::new("python3")
        .arg(repo().join("crates/fieldstore-cli/tests/web/make_grids.py"))
        .arg(path("grids.grib"))
        .arg(dir.path())
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "make_grids: {}",
        String::from_utf8_lossy(&made.stderr)
    );
    cli(&["write", &file("grids.grib")]);
    // What the other process writes while the page is open.
    cli(&[
        "sample",
        "--out",
        &file("later.grib"),
        "--params",
        "t",
        "--levels",
        "500",
        "--steps",
        "18",
        "--points",
        "65000",
    ]);

    let mut server = common::fieldstore();
    server.arg("--config").arg(&config).args([
        "server",
        "--listen",
        "127.0.0.1:0",
        "--http",
        "127.0.0.1:0",
        "--token",
        "web-token-7",
    ]);
    let served = server::start(server, dir.path(), "web-token-7");
    let url = format!("http://{}/", served.http.clone().unwrap());
    let write_cmd = serde_json::json!([
        env!("CARGO_BIN_EXE_fieldstore"),
        "--config",
        config.to_str().unwrap(),
        "write",
        file("later.grib")
    ]);
    let shots = repo().join("target/web-view");
    let out = Command::new(&python)
        .arg(repo().join("crates/fieldstore-cli/tests/web/browser.py"))
        .args([
            "--url",
            &url,
            "--token",
            "web-token-7",
            "--grib",
            &file("t.grib"),
        ])
        .args(["--fieldstore", env!("CARGO_BIN_EXE_fieldstore")])
        .args(["--config", config.to_str().unwrap()])
        .args(["--write-cmd", &write_cmd.to_string()])
        .arg("--out")
        .arg(&shots)
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "browser test failed (screenshots in {}):\n{}\n{}\nserver log:\n{}",
        shots.display(),
        stdout,
        String::from_utf8_lossy(&out.stderr),
        std::fs::read_to_string(path("server.log")).unwrap_or_default()
    );
    eprintln!("web view: {stdout}");
}
