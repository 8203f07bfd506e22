//! Finding and opening ecCodes at run time (see docs/eccodes.md for the user's view).
//!
//! The order, first hit wins:
//! 1. `FIELDSTORE_ECCODES_LIB`, a path to a `libeccodes.so`: the operator's explicit choice, and
//!    nothing else is tried if it fails.
//! 2. A libeccodes already mapped in this process (pyfdb, eccodes-python, earthkit loaded it): the
//!    same file again, so the process keeps one ecCodes. Two copies interpose each other's
//!    symbols and mix versions silently (EXTRACTION.md B.2).
//! 3. The `eccodeslib` wheel: the directory the Python package registered ([`prefer_eccodeslib`]),
//!    then `site-packages` of the environment this library or program sits in, `$VIRTUAL_ENV`
//!    and `$CONDA_PREFIX`. Its eckit libraries (the `eckitlib` wheel next to it) are opened first,
//!    in dependency order, because its `libeccodes.so` names them without a usable RPATH: its
//!    RPATH points at the wheel builder's `/tmp` directories, which must never be searched.
//! 4. The system's `libeccodes.so.0`/`libeccodes.so` (and `$CONDA_PREFIX/lib`), by the dynamic
//!    loader's usual search.
//!
//! Everything is opened RTLD_LOCAL: fieldstore never puts ecCodes' symbols in the process's
//! global scope, so it cannot interpose on another user of ecCodes either.

use std::ffi::CStr;
use std::os::raw::c_void;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use libloading::os::unix::{Library, RTLD_LAZY, RTLD_LOCAL};

/// The variable naming the ecCodes library to load, overriding the search.
pub const LIB_ENV: &str = "FIELDSTORE_ECCODES_LIB";

/// Where the loaded ecCodes came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `FIELDSTORE_ECCODES_LIB`.
    Explicit,
    /// Another component of the process had loaded it already.
    InProcess,
    /// PyPI's `eccodeslib` wheel.
    Wheel,
    /// The operating system's (or conda's) library.
    System,
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Origin::Explicit => "from FIELDSTORE_ECCODES_LIB",
            Origin::InProcess => "already loaded in the process",
            Origin::Wheel => "from the eccodeslib wheel",
            Origin::System => "the system's",
        })
    }
}

/// Why ecCodes is not available. Only writing, decoding and making fields need it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EccodesLoadError {
    #[error(
        "ecCodes was not found (tried {tried}): install it with `pip install eccodeslib` (in the \
         Python environment fieldstore runs from) or the system package (`apt-get install \
         libeccodes0`, `dnf install eccodes`), or set FIELDSTORE_ECCODES_LIB to a libeccodes.so"
    )]
    NotFound { tried: String },
    #[error(
        "ecCodes at {path} ({origin}) could not be loaded: {reason} (install `pip install \
         eccodeslib` or the system package `libeccodes0`, or set FIELDSTORE_ECCODES_LIB to a \
         working libeccodes.so)"
    )]
    Unloadable {
        path: String,
        origin: Origin,
        reason: String,
    },
}

/// An opened ecCodes and the eckit libraries opened for it (kept open for the process).
pub(crate) struct Opened {
    pub(crate) eccodes: Library,
    pub(crate) eckit: Vec<Library>,
    pub(crate) path: String,
    pub(crate) origin: Origin,
}

/// The `eccodeslib` and `eckitlib` package directories the embedding program found (the Python
/// package asks `importlib` for them: the only reliable way with `--target` or user-site installs).
static HINT: Mutex<Option<(PathBuf, Option<PathBuf>)>> = Mutex::new(None);

/// Registers the `eccodeslib` package directory (and `eckitlib`'s) for the search's step 3. It
/// loads nothing: ecCodes is still opened only when first needed.
pub fn prefer_eccodeslib(eccodeslib: PathBuf, eckitlib: Option<PathBuf>) {
    if let Ok(mut h) = HINT.lock() {
        *h = Some((eccodeslib, eckitlib));
    }
}

/// The eckit libraries eccodeslib's `libeccodes.so` needs, dependencies first.
const ECKIT_ORDER: [&str; 5] = [
    "libeckit.so",
    "libeckit_maths.so",
    "libeckit_codec.so",
    "libeckit_spec.so",
    "libeckit_geo.so",
];

pub(crate) fn open() -> Result<Opened, EccodesLoadError> {
    if let Some(p) = std::env::var_os(LIB_ENV).filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        let eckit = eckit_beside(&p);
        return open_file(&p, eckit.as_deref(), Origin::Explicit);
    }
    if let Some(p) = mapped_eccodes() {
        return open_file(&p, None, Origin::InProcess);
    }
    let mut tried = Vec::new();
    for (lib, eckit) in wheel_candidates() {
        if lib.is_file() {
            return open_file(&lib, eckit.as_deref(), Origin::Wheel);
        }
        tried.push(lib.display().to_string());
    }
    let mut system: Vec<PathBuf> = Vec::new();
    if let Some(c) = std::env::var_os("CONDA_PREFIX") {
        system.push(Path::new(&c).join("lib/libeccodes.so"));
    }
    system.push("libeccodes.so.0".into());
    system.push("libeccodes.so".into());
    for name in system {
        // SAFETY: ecCodes' initialisers only set up its own state.
        match unsafe { Library::open(Some(&name), RTLD_LAZY | RTLD_LOCAL) } {
            Ok(lib) => {
                return Ok(Opened {
                    eccodes: lib,
                    eckit: Vec::new(),
                    path: name.display().to_string(),
                    origin: Origin::System,
                })
            }
            Err(e) => {
                // A library that exists but does not load is an error to report, not to skip.
                let text = e.to_string();
                if !(text.contains("No such file") || text.contains("cannot open shared object")) {
                    return Err(EccodesLoadError::Unloadable {
                        path: name.display().to_string(),
                        origin: Origin::System,
                        reason: text,
                    });
                }
                tried.push(name.display().to_string());
            }
        }
    }
    Err(EccodesLoadError::NotFound {
        tried: tried.join(", "),
    })
}

fn open_file(
    path: &Path,
    eckit_dir: Option<&Path>,
    origin: Origin,
) -> Result<Opened, EccodesLoadError> {
    let unloadable = |reason: String| EccodesLoadError::Unloadable {
        path: path.display().to_string(),
        origin,
        reason,
    };
    if !path.is_file() {
        return Err(unloadable("no such file".into()));
    }
    let mut eckit = Vec::new();
    if let Some(dir) = eckit_dir {
        for name in ECKIT_ORDER {
            let p = dir.join(name);
            if p.is_file() {
                // SAFETY: eckit's initialisers only set up its own state.
                let lib = unsafe { Library::open(Some(&p), RTLD_LAZY | RTLD_LOCAL) }
                    .map_err(|e| unloadable(format!("its eckit library {}: {e}", p.display())))?;
                eckit.push(lib);
            }
        }
    }
    // SAFETY: ecCodes' initialisers only set up its own state.
    let eccodes = unsafe { Library::open(Some(path), RTLD_LAZY | RTLD_LOCAL) }
        .map_err(|e| unloadable(e.to_string()))?;
    Ok(Opened {
        eccodes,
        eckit,
        path: path.display().to_string(),
        origin,
    })
}

/// `…/eckitlib/lib64` for a `…/eccodeslib/lib64/libeccodes.so`.
fn eckit_beside(lib: &Path) -> Option<PathBuf> {
    let pkg = lib.parent()?.parent()?;
    let dir = pkg.parent()?.join("eckitlib/lib64");
    dir.is_dir().then_some(dir)
}

/// The first libeccodes this process has mapped (`/proc/self/maps`), if any.
fn mapped_eccodes() -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .map(PathBuf::from)
        .find(|p| is_libeccodes(p))
}

/// `libeccodes.so`, `libeccodes.so.0`, `libeccodes.so.0.1` (not `libeccodes_memfs.so`).
pub(crate) fn is_libeccodes(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n == "libeccodes.so" || n.starts_with("libeccodes.so."))
}

/// Where the eccodeslib wheel may be, most specific first: `(libeccodes.so, eckitlib/lib64)`.
fn wheel_candidates() -> Vec<(PathBuf, Option<PathBuf>)> {
    let mut out = Vec::new();
    if let Some((ecc, eckit)) = HINT.lock().ok().and_then(|h| h.clone()) {
        out.push((
            ecc.join("lib64/libeccodes.so"),
            eckit.map(|e| e.join("lib64")),
        ));
    }
    let mut bases: Vec<PathBuf> = Vec::new();
    // This library's own file (the Python extension sits in site-packages/fieldstore/), then the
    // program (a venv's bin/fieldstore or bin/python).
    if let Some(p) = path_of(open as *const c_void) {
        bases.extend(
            Path::new(&p)
                .ancestors()
                .skip(1)
                .take(3)
                .map(Path::to_path_buf),
        );
    }
    if let Ok(exe) = std::env::current_exe() {
        bases.extend(exe.ancestors().skip(1).take(2).map(Path::to_path_buf));
    }
    for var in ["VIRTUAL_ENV", "CONDA_PREFIX"] {
        if let Some(v) = std::env::var_os(var).filter(|v| !v.is_empty()) {
            bases.push(PathBuf::from(v));
        }
    }
    for base in bases {
        for site in site_packages(&base) {
            let lib = site.join("eccodeslib/lib64/libeccodes.so");
            if !out.iter().any(|(l, _)| *l == lib) {
                let eckit = site.join("eckitlib/lib64");
                out.push((lib, eckit.is_dir().then_some(eckit)));
            }
        }
    }
    out
}

/// `base` itself if it holds packages, and `base/lib{,64}/python3.*/site-packages`.
fn site_packages(base: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if base.join("eccodeslib").is_dir() {
        out.push(base.to_path_buf());
    }
    for lib in ["lib", "lib64"] {
        let Ok(entries) = std::fs::read_dir(base.join(lib)) else {
            continue;
        };
        let mut found: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
            .map(|e| e.path().join("site-packages"))
            .filter(|p| p.join("eccodeslib").is_dir())
            .collect();
        found.sort();
        out.extend(found);
    }
    out
}

/// The file of the shared object holding `addr` (`dladdr`).
pub(crate) fn path_of(addr: *const c_void) -> Option<String> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only reads the loader's tables and fills `info`.
    let rc = unsafe { libc::dladdr(addr, info.as_mut_ptr()) };
    if rc == 0 {
        return None;
    }
    // SAFETY: dladdr succeeded, so `info` is filled.
    let info = unsafe { info.assume_init() };
    if info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated path owned by the loader.
    let p = unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy();
    std::fs::canonicalize(&*p)
        .map(|c| c.display().to_string())
        .ok()
        .or_else(|| Some(p.into_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_of_libeccodes() {
        assert!(is_libeccodes(Path::new("/usr/lib/libeccodes.so.0")));
        assert!(is_libeccodes(Path::new(
            "/v/eccodeslib/lib64/libeccodes.so"
        )));
        assert!(!is_libeccodes(Path::new(
            "/v/eccodeslib/lib64/libeccodes_memfs.so"
        )));
        assert!(!is_libeccodes(Path::new("/usr/lib/libeccodes_f90.so.0")));
    }

    #[test]
    fn eckit_is_found_beside_the_wheel() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("eccodeslib/lib64")).unwrap();
        std::fs::create_dir_all(d.path().join("eckitlib/lib64")).unwrap();
        let lib = d.path().join("eccodeslib/lib64/libeccodes.so");
        assert_eq!(eckit_beside(&lib), Some(d.path().join("eckitlib/lib64")));
        let venv = d.path().join("venv");
        let site = venv.join("lib/python3.11/site-packages");
        std::fs::create_dir_all(site.join("eccodeslib")).unwrap();
        assert_eq!(site_packages(&venv), vec![site]);
    }
}
