//! The ecCodes C functions fieldstore needs, resolved at run time from the library
//! [`super::loader`] finds, once, on first use.
//!
//! Why not linked: a binary linked to one ecCodes installs only where that library is, and in a
//! process where pyfdb or eccodes-python has already loaded PyPI's `eccodeslib` (RTLD_GLOBAL), a
//! linked copy silently runs the other copy's code (see docs/eccodes.md). Loading at run time lets
//! fieldstore use the very copy the rest of the process uses, and lets a process that only reads
//! or lists never pay for ecCodes and its definitions at all.
//!
//! Each function keeps the C name and signature, so the callers read as plain ecCodes code. Every
//! wrapper loads the library if that has not happened yet; if it cannot be loaded, the wrapper
//! answers as ecCodes does for a failure (a null handle, an error code, a zero version) and the
//! typed reason is available from [`library`], which the handle constructors check first.

use std::os::raw::{c_char, c_int, c_long, c_ulong, c_void};
use std::sync::OnceLock;

use super::loader::{self, EccodesLoadError, Origin};

#[repr(C)]
pub struct CodesHandle {
    _private: [u8; 0],
}

#[repr(C)]
pub struct CodesKeysIterator {
    _private: [u8; 0],
}

#[repr(C)]
pub struct CodesContext {
    _private: [u8; 0],
}

/// `CODES_KEYS_ITERATOR_SKIP_DUPLICATES` etc. are not needed: the mars namespace has no duplicates.
pub const KEYS_ITERATOR_ALL_KEYS: c_ulong = 0;

/// `GRIB_NOT_FOUND`: the key does not exist in this message.
pub const NOT_FOUND: c_int = -10;

/// `GRIB_INTERNAL_ERROR`: what the wrappers answer when ecCodes could not be loaded.
const NOT_LOADED: c_int = -2;

/// `CODES_LOG_*`, the levels of ecCodes' log messages.
pub const LOG_INFO: c_int = 0;
pub const LOG_WARNING: c_int = 1;
pub const LOG_ERROR: c_int = 2;
pub const LOG_FATAL: c_int = 3;

/// `codes_log_proc`: receives each of ecCodes' log lines instead of stderr.
pub type LogProc =
    Option<extern "C" fn(c: *const CodesContext, level: c_int, message: *const c_char)>;

/// `codes_assertion_failed_proc`: called instead of `abort()` when an ecCodes assertion fails.
pub type AssertionProc = Option<extern "C" fn(message: *const c_char)>;

/// `CODES_TYPE_*`, the native types of keys.
pub const TYPE_LONG: c_int = 1;
pub const TYPE_DOUBLE: c_int = 2;
pub const TYPE_BYTES: c_int = 4;

/// The loaded library: its function table, where it came from, and the handles that keep it
/// (and the eckit libraries it needs) mapped for the life of the process.
pub(crate) struct Library {
    fns: Fns,
    /// `codes_definition_path`/`codes_samples_path`: reported by `fieldstore info`, not needed.
    definition_path: Option<unsafe extern "C" fn(*const CodesContext) -> *const c_char>,
    samples_path: Option<unsafe extern "C" fn(*const CodesContext) -> *const c_char>,
    pub(crate) path: String,
    pub(crate) origin: Origin,
    _keep: Vec<libloading::os::unix::Library>,
}

impl Library {
    /// `codes_definition_path` of the default context: `/MEMFS/definitions` for eccodeslib.
    pub(crate) fn definition_path(&self) -> Option<String> {
        self.path_of(self.definition_path)
    }

    /// `codes_samples_path` of the default context.
    pub(crate) fn samples_path(&self) -> Option<String> {
        self.path_of(self.samples_path)
    }

    fn path_of(
        &self,
        f: Option<unsafe extern "C" fn(*const CodesContext) -> *const c_char>,
    ) -> Option<String> {
        let f = f?;
        // SAFETY: both functions take a context (null means the default one) and return a
        // static string or null.
        let p = unsafe { f(std::ptr::null()) };
        if p.is_null() {
            return None;
        }
        // SAFETY: non-null, NUL-terminated, owned by ecCodes' context for the process.
        Some(
            unsafe { std::ffi::CStr::from_ptr(p) }
                .to_string_lossy()
                .into_owned(),
        )
    }

    /// `codes_get_api_version`, e.g. 25000.
    pub(crate) fn api_version(&self) -> c_long {
        // SAFETY: a pure function of the library.
        unsafe { (self.fns.codes_get_api_version)() }
    }
}

static LIBRARY: OnceLock<Result<Library, EccodesLoadError>> = OnceLock::new();

/// The library, loaded now if this is the first call.
pub(crate) fn library() -> Result<&'static Library, EccodesLoadError> {
    LIBRARY.get_or_init(load).as_ref().map_err(|e| e.clone())
}

/// The library if something in this process has needed it already; never loads it.
pub(crate) fn loaded() -> Option<Result<&'static Library, EccodesLoadError>> {
    LIBRARY.get().map(|r| r.as_ref().map_err(|e| e.clone()))
}

fn load() -> Result<Library, EccodesLoadError> {
    let found = loader::open()?;
    // SAFETY: the library is ecCodes (it was found by name and exports `codes_get_api_version`);
    // each symbol is declared with the signature of ecCodes' public header, eccodes.h.
    let fns =
        unsafe { Fns::resolve(&found.eccodes) }.map_err(|reason| EccodesLoadError::Unloadable {
            path: found.path.clone(),
            origin: found.origin,
            reason,
        })?;
    // SAFETY: as above; these two are optional (reporting only).
    let (definition_path, samples_path) = unsafe {
        (
            optional(&found.eccodes, b"codes_definition_path\0"),
            optional(&found.eccodes, b"codes_samples_path\0"),
        )
    };
    let path = loader::path_of(fns.codes_get_api_version as *const c_void)
        .unwrap_or_else(|| found.path.clone());
    let mut keep = found.eckit;
    keep.push(found.eccodes);
    Ok(Library {
        fns,
        definition_path,
        samples_path,
        path,
        origin: found.origin,
        _keep: keep,
    })
}

/// A function the library may lack.
///
/// # Safety
/// `T` must be the function's true type.
unsafe fn optional<T: Copy>(lib: &libloading::os::unix::Library, name: &[u8]) -> Option<T> {
    // SAFETY: forwarded to the caller.
    unsafe { lib.get::<T>(name) }.ok().map(|s| *s)
}

/// Declares the table of ecCodes functions, its resolution from the library, and one wrapper per
/// function with the C name and signature (answering `$fallback` when ecCodes cannot be loaded).
macro_rules! eccodes_functions {
    ($( fn $name:ident($($arg:ident: $ty:ty),* $(,)?) -> $ret:ty = $fallback:expr; )*) => {
        #[allow(clippy::type_complexity)]
        struct Fns {
            $( $name: unsafe extern "C" fn($($ty),*) -> $ret, )*
        }

        impl Fns {
            /// # Safety
            /// `lib` must be ecCodes, whose functions have the declared signatures.
            unsafe fn resolve(lib: &libloading::os::unix::Library) -> Result<Fns, String> {
                Ok(Fns {
                    $( $name: unsafe {
                        *lib.get::<unsafe extern "C" fn($($ty),*) -> $ret>(
                            concat!(stringify!($name), "\0").as_bytes(),
                        )
                        .map_err(|e| format!("it has no {}: {e}", stringify!($name)))?
                    }, )*
                })
            }
        }

        $(
            /// ecCodes' function of this name (see eccodes.h), from the loaded library.
            ///
            /// # Safety
            /// As for the C function.
            #[allow(dead_code)]
            pub unsafe fn $name($($arg: $ty),*) -> $ret {
                match library() {
                    // SAFETY: forwarded to the caller; the pointer came from the library, which
                    // stays mapped for the life of the process.
                    Ok(l) => unsafe { (l.fns.$name)($($arg),*) },
                    Err(_) => $fallback,
                }
            }
        )*
    };
}

eccodes_functions! {
    fn codes_handle_new_from_message(c: *mut CodesContext, data: *const c_void, len: usize)
        -> *mut CodesHandle = std::ptr::null_mut();
    fn codes_handle_new_from_message_copy(c: *mut CodesContext, data: *const c_void, len: usize)
        -> *mut CodesHandle = std::ptr::null_mut();
    fn codes_grib_handle_new_from_samples(c: *mut CodesContext, sample: *const c_char)
        -> *mut CodesHandle = std::ptr::null_mut();
    fn codes_handle_delete(h: *mut CodesHandle) -> c_int = NOT_LOADED;
    fn codes_keys_iterator_new(h: *mut CodesHandle, flags: c_ulong, ns: *const c_char)
        -> *mut CodesKeysIterator = std::ptr::null_mut();
    fn codes_keys_iterator_next(it: *mut CodesKeysIterator) -> c_int = 0;
    fn codes_keys_iterator_get_name(it: *const CodesKeysIterator) -> *const c_char
        = std::ptr::null();
    fn codes_keys_iterator_delete(it: *mut CodesKeysIterator) -> c_int = NOT_LOADED;
    fn codes_get_string(h: *const CodesHandle, key: *const c_char, out: *mut c_char,
        len: *mut usize) -> c_int = NOT_LOADED;
    fn codes_get_long(h: *const CodesHandle, key: *const c_char, out: *mut c_long)
        -> c_int = NOT_LOADED;
    fn codes_set_long(h: *mut CodesHandle, key: *const c_char, val: c_long) -> c_int = NOT_LOADED;
    fn codes_set_string(h: *mut CodesHandle, key: *const c_char, val: *const c_char,
        len: *mut usize) -> c_int = NOT_LOADED;
    fn codes_set_double_array(h: *mut CodesHandle, key: *const c_char, vals: *const f64,
        len: usize) -> c_int = NOT_LOADED;
    fn codes_get_message(h: *const CodesHandle, msg: *mut *const c_void, len: *mut usize)
        -> c_int = NOT_LOADED;
    fn codes_set_long_array(h: *mut CodesHandle, key: *const c_char, vals: *const c_long,
        len: usize) -> c_int = NOT_LOADED;
    fn codes_get_size(h: *const CodesHandle, key: *const c_char, size: *mut usize)
        -> c_int = NOT_LOADED;
    fn codes_get_length(h: *const CodesHandle, key: *const c_char, len: *mut usize)
        -> c_int = NOT_LOADED;
    fn codes_get_double(h: *const CodesHandle, key: *const c_char, out: *mut f64)
        -> c_int = NOT_LOADED;
    fn codes_set_double(h: *mut CodesHandle, key: *const c_char, val: f64) -> c_int = NOT_LOADED;
    fn codes_get_double_array(h: *const CodesHandle, key: *const c_char, vals: *mut f64,
        len: *mut usize) -> c_int = NOT_LOADED;
    fn codes_get_long_array(h: *const CodesHandle, key: *const c_char, vals: *mut c_long,
        len: *mut usize) -> c_int = NOT_LOADED;
    fn codes_get_bytes(h: *const CodesHandle, key: *const c_char, bytes: *mut u8,
        len: *mut usize) -> c_int = NOT_LOADED;
    fn codes_get_native_type(h: *const CodesHandle, key: *const c_char, t: *mut c_int)
        -> c_int = NOT_LOADED;
    fn codes_is_defined(h: *const CodesHandle, key: *const c_char) -> c_int = 0;
    fn codes_is_missing(h: *const CodesHandle, key: *const c_char, err: *mut c_int)
        -> c_int = 0;
    // Fills `latitudes` (2 * truncation of them) north to south.
    fn codes_get_gaussian_latitudes(truncation: c_long, latitudes: *mut f64)
        -> c_int = NOT_LOADED;
    fn codes_get_api_version() -> c_long = 0;
    fn codes_context_get_default() -> *mut CodesContext = std::ptr::null_mut();
    fn codes_context_set_logging_proc(c: *mut CodesContext, proc_: LogProc) -> () = ();
    fn codes_set_codes_assertion_failed_proc(proc_: AssertionProc) -> () = ();
    fn codes_get_error_message(code: c_int) -> *const c_char = std::ptr::null();
}
