//! A real MinIO server for integration tests: started through `scripts/minio start` (so the tests
//! and a person at a shell start it the same way), stopped when the handle is dropped.
//!
//! The binary is built once by `scripts/minio install` (from the Go module proxy) and cached; the
//! tests never build it themselves, because that takes minutes. Without it a test is skipped,
//! except under `CI=true`, where a missing server must fail loudly rather than pass by skipping.

use std::path::{Path, PathBuf};
use std::process::Command;

/// A running MinIO, with its endpoint and generated root credentials.
pub struct Minio {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    pub access_key: String,
    pub secret_key: String,
    pub pid: u32,
    dir: tempfile::TempDir,
}

/// The repository's `scripts/minio`, found from this crate's manifest directory.
fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/minio")
}

impl Minio {
    /// Starts a server in a fresh temporary directory, or returns `None` (after saying why) when
    /// MinIO is not built and this is not CI.
    pub fn start_or_skip(test: &str) -> Option<Minio> {
        let built = Command::new(script())
            .arg("path")
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false);
        if !built {
            if std::env::var("CI").is_ok_and(|v| v == "true") {
                panic!("{test}: MinIO is not built, and CI=true: run scripts/minio install");
            }
            eprintln!("SKIP {test}: MinIO is not built (scripts/minio install builds it)");
            return None;
        }
        Some(Minio::start())
    }

    /// Starts a server; panics with the script's output when it does not come up.
    pub fn start() -> Minio {
        let dir = tempfile::tempdir().expect("temp dir for MinIO");
        let out = Command::new(script())
            .arg("start")
            .arg(dir.path())
            .output()
            .expect("run scripts/minio start");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "scripts/minio start failed: {stdout}{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let field = |name: &str| -> String {
            stdout
                .lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix('='))
                .unwrap_or_else(|| panic!("no {name}= in scripts/minio start output: {stdout}"))
                .to_string()
        };
        Minio {
            endpoint: field("endpoint"),
            access_key: field("access_key"),
            secret_key: field("secret_key"),
            pid: field("pid").parse().expect("pid is a number"),
            dir,
        }
    }

    /// The directory holding the server's data, log and pid file.
    #[allow(dead_code)]
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Minio {
    /// Stops the server, so a failing test leaves no MinIO running behind it.
    fn drop(&mut self) {
        let _ = Command::new(script())
            .arg("stop")
            .arg(self.dir.path())
            .status();
    }
}
