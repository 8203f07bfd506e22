//! A real MinIO server for integration tests: started through `scripts/minio start` (so the tests
//! and a person at a shell start it the same way), stopped when the handle is dropped.
//!
//! The binary is built once by `scripts/minio install` (from the Go module proxy) and cached; the
//! tests never build it themselves, because that takes minutes. Without it a test is skipped,
//! except under `CI=true`, where a missing server must fail loudly rather than pass by skipping.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// A running MinIO, with its endpoint and generated root credentials.
#[allow(dead_code)]
pub struct Minio {
    /// `http://127.0.0.1:PORT`.
    pub endpoint: String,
    pub access_key: String,
    pub secret_key: String,
    pub pid: u32,
    /// `None` for the shared server, whose directory the script's watcher deletes.
    dir: Option<tempfile::TempDir>,
    path: PathBuf,
}

/// The repository's `scripts/minio`, found from this crate's manifest directory; or
/// `scripts/rgw` (a single-node Ceph RGW, same command-line and output) when
/// `FIELDSTORE_S3_SERVER=rgw`, to run the same tests once against a server whose conditional
/// writes differ (docs/s3-servers.md).
fn script() -> PathBuf {
    let name = match std::env::var("FIELDSTORE_S3_SERVER").as_deref() {
        Ok("rgw") => "rgw",
        _ => "minio",
    };
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../scripts")
        .join(name)
}

impl Minio {
    /// Starts a server in a fresh temporary directory, or returns `None` (after saying why) when
    /// MinIO is not built and this is not CI.
    #[allow(dead_code)]
    pub fn start_or_skip(test: &str) -> Option<Minio> {
        if !built(test) {
            return None;
        }
        Some(Minio::start())
    }

    /// One server for the whole test process, started on first use, for suites that need many
    /// buckets or prefixes (take one with [`fresh_bucket`] per case). Statics are never dropped,
    /// so the script's watcher stops it (and deletes its directory) when this process exits,
    /// even when killed. `None` (after saying why) as for [`Minio::start_or_skip`].
    #[allow(dead_code)]
    pub fn shared(test: &str) -> Option<&'static Minio> {
        static SHARED: OnceLock<Minio> = OnceLock::new();
        if !built(test) {
            return None;
        }
        Some(SHARED.get_or_init(|| {
            let dir = tempfile::Builder::new()
                .prefix("minio-shared")
                .tempdir()
                .expect("temp dir for MinIO")
                .keep();
            let pid = std::process::id().to_string();
            Minio::launch(None, dir, &["--watch-pid", &pid])
        }))
    }

    /// Starts a server serving https with this certificate and key (PEM), or `None` as for
    /// [`Minio::start_or_skip`].
    #[allow(dead_code)]
    pub fn start_tls_or_skip(test: &str, cert_pem: &str, key_pem: &str) -> Option<Minio> {
        if script().ends_with("rgw") {
            eprintln!("SKIP {test}: https is tested on MinIO only (scripts/rgw serves http)");
            return None;
        }
        if !built(test) {
            return None;
        }
        let dir = tempfile::tempdir().expect("temp dir for MinIO");
        let certs = dir.path().join("certs");
        std::fs::create_dir_all(&certs).expect("certs dir");
        std::fs::write(certs.join("public.crt"), cert_pem).expect("write public.crt");
        std::fs::write(certs.join("private.key"), key_pem).expect("write private.key");
        let path = dir.path().to_path_buf();
        Some(Minio::launch(Some(dir), path, &[]))
    }

    /// Starts a server; panics with the script's output when it does not come up.
    #[allow(dead_code)]
    pub fn start() -> Minio {
        let dir = tempfile::tempdir().expect("temp dir for MinIO");
        let path = dir.path().to_path_buf();
        Minio::launch(Some(dir), path, &[])
    }

    fn launch(dir: Option<tempfile::TempDir>, path: PathBuf, extra: &[&str]) -> Minio {
        let out = Command::new(script())
            .arg("start")
            .arg(&path)
            .args(extra)
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
            path,
        }
    }

    /// The directory holding the server's data, log and pid file.
    #[allow(dead_code)]
    pub fn dir(&self) -> &Path {
        &self.path
    }
}

/// Whether MinIO is built; when not, says SKIP (or panics under `CI=true`).
fn built(test: &str) -> bool {
    let built = Command::new(script())
        .arg("path")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !built {
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            panic!(
                "{test}: the S3 test server is not installed, and CI=true: run {} install",
                script().display()
            );
        }
        eprintln!(
            "SKIP {test}: the S3 test server is not installed ({} install installs it)",
            script().display()
        );
    }
    built
}

/// A bucket name no other case of this process uses: `NAME-PID-N`, cut to S3's 63 characters.
#[allow(dead_code)]
pub fn fresh_bucket(name: &str) -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let clean: String = name
        .to_ascii_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .take(40)
        .collect();
    format!(
        "{}-{}-{}",
        clean.trim_matches('-'),
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

impl Drop for Minio {
    /// Stops the server, so a failing test leaves no MinIO running behind it.
    fn drop(&mut self) {
        let _ = Command::new(script()).arg("stop").arg(&self.path).status();
    }
}
