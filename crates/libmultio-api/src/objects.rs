//! The C API's objects (configurations, handles, metadata, data buffers) and every entry point.

use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use fieldstore::pipeline::config::{self, PlanSetConfig, Side};
use fieldstore::pipeline::{Context, Field, Message, Metadata, PlanSet, Value};

use crate::errors::{run, Error, Failure, Result, SharedFailure};

pub use crate::errors::{
    multio_error_string, multio_error_string_info, multio_failure_handler_t, multio_failure_info_t,
};

/// The MultIO release whose C API this library implements (pymultio requires >= 1.9.0).
const API_LEVEL: &CStr = c"2.12.0";

/// fieldstore's own version, in place of MultIO's git sha1.
const VCS: &CStr = match CStr::from_bytes_with_nul(
    concat!("fieldstore-", env!("CARGO_PKG_VERSION"), "\0").as_bytes(),
) {
    Ok(c) => c,
    Err(_) => c"fieldstore",
};

// ---------------------------------------------------------------------------------------------
// Argument helpers

unsafe fn obj<'a, T>(p: *const T, what: &'static str) -> Result<&'a T> {
    // SAFETY: see the crate's safety contract.
    unsafe { p.as_ref() }.ok_or(Error::Null(what))
}

unsafe fn obj_mut<'a, T>(p: *mut T, what: &'static str) -> Result<&'a mut T> {
    // SAFETY: see the crate's safety contract.
    unsafe { p.as_mut() }.ok_or(Error::Null(what))
}

unsafe fn text<'a>(p: *const c_char, what: &'static str) -> Result<&'a str> {
    if p.is_null() {
        return Err(Error::Null(what));
    }
    // SAFETY: see the crate's safety contract.
    unsafe { CStr::from_ptr(p) }
        .to_str()
        .map_err(|_| Error::Utf8(what))
}

unsafe fn put<T>(p: *mut T, what: &'static str, v: T) -> Result<()> {
    if p.is_null() {
        return Err(Error::Null(what));
    }
    // SAFETY: see the crate's safety contract.
    unsafe { p.write(v) };
    Ok(())
}

/// Hands a new object to the caller; nothing is allocated when the out-pointer is NULL.
unsafe fn put_new<T>(p: *mut *mut T, what: &'static str, v: T) -> Result<()> {
    if p.is_null() {
        return Err(Error::Null(what));
    }
    // SAFETY: see the crate's safety contract.
    unsafe { p.write(Box::into_raw(Box::new(v))) };
    Ok(())
}

/// A caller's array as a slice; a negative count is refused, NULL is refused (MultIO asserts
/// on it) even with a zero count.
unsafe fn slice<'a, T>(p: *const T, n: c_int, what: &'static str) -> Result<&'a [T]> {
    if p.is_null() {
        return Err(Error::Null(what));
    }
    let n = usize::try_from(n)
        .map_err(|_| Error::Invalid(format!("{what}: the size {n} is negative")))?;
    // SAFETY: see the crate's safety contract.
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

fn failure_of<T: HasFailure>(p: *const T) -> Option<SharedFailure> {
    // SAFETY: see the crate's safety contract.
    unsafe { p.as_ref() }.and_then(HasFailure::failure)
}

trait HasFailure {
    fn failure(&self) -> Option<SharedFailure>;
}

// ---------------------------------------------------------------------------------------------
// Configurations

/// Where a configuration's plans come from, so `multio_config_set_path` can read them again
/// against another configuration directory.
enum Source {
    File(PathBuf),
    Environment,
}

#[allow(non_camel_case_types)]
pub struct multio_configuration_t {
    source: Source,
    loaded: PlanSetConfig,
    failure: SharedFailure,
}

impl HasFailure for multio_configuration_t {
    fn failure(&self) -> Option<SharedFailure> {
        Some(self.failure.clone())
    }
}

impl multio_configuration_t {
    /// The plans MultIO's environment names (section 1.1 of MULTIO.md), read now, as MultIO
    /// reads them when the configuration is made. `dir`: a configuration directory set with
    /// `multio_config_set_path`, standing for `MULTIO_SERVER_CONFIG_PATH`.
    fn from_env(dir: Option<&Path>) -> Result<multio_configuration_t> {
        let dir = dir.map(|d| d.display().to_string());
        let env = move |k: &str| match (&dir, k) {
            (Some(d), "MULTIO_SERVER_CONFIG_PATH") => Some(d.clone()),
            _ => config::process_env(k),
        };
        Ok(multio_configuration_t {
            source: Source::Environment,
            loaded: config::from_env(Side::Client, &env)?,
            failure: Failure::new(),
        })
    }

    /// A plan file, read and parsed now (MultIO reports a missing file or bad YAML here, and
    /// unknown actions when the handle is made).
    fn from_file(path: &Path, dir: Option<&Path>) -> Result<PlanSetConfig> {
        let env = |k: &str| config::process_env(k);
        match dir {
            None => Ok(config::load_file(path, Side::Client, &env)?),
            Some(dir) => {
                let origin = path.display().to_string();
                let text = std::fs::read_to_string(path)
                    .map_err(|e| Error::Invalid(format!("{origin}: cannot read: {e}")))?;
                Ok(config::load_str(&text, &origin, dir, Side::Client, &env)?)
            }
        }
    }
}

#[no_mangle]
pub unsafe extern "C" fn multio_new_configuration(cc: *mut *mut multio_configuration_t) -> c_int {
    run("multio_new_configuration", None, || {
        let c = multio_configuration_t::from_env(None)?;
        unsafe { put_new(cc, "cc", c) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_new_configuration_from_filename(
    cc: *mut *mut multio_configuration_t,
    configuration_file_name: *const c_char,
) -> c_int {
    run("multio_new_configuration_from_filename", None, || {
        if cc.is_null() {
            return Err(Error::Null("cc"));
        }
        let path =
            PathBuf::from(unsafe { text(configuration_file_name, "configuration_file_name") }?);
        let loaded = multio_configuration_t::from_file(&path, None)?;
        let c = multio_configuration_t {
            source: Source::File(path),
            loaded,
            failure: Failure::new(),
        };
        unsafe { put_new(cc, "cc", c) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_delete_configuration(cc: *mut multio_configuration_t) -> c_int {
    run("multio_delete_configuration", None, || {
        if cc.is_null() {
            return Err(Error::Null("cc"));
        }
        // SAFETY: cc came from Box::into_raw in this library (crate safety contract).
        drop(unsafe { Box::from_raw(cc) });
        Ok(())
    })
}

/// Sets the configuration directory (`{~}` in plan strings, and relative paths) and reads the
/// plans again against it; for a configuration from the environment it stands for
/// `MULTIO_SERVER_CONFIG_PATH`. NULL changes nothing, as in MultIO.
#[no_mangle]
pub unsafe extern "C" fn multio_config_set_path(
    cc: *mut multio_configuration_t,
    configuration_path: *const c_char,
) -> c_int {
    run("multio_config_set_path", failure_of(cc), || {
        let c = unsafe { obj_mut(cc, "cc") }?;
        if configuration_path.is_null() {
            return Ok(());
        }
        let dir = PathBuf::from(unsafe { text(configuration_path, "configuration_path") }?);
        match &c.source {
            Source::File(path) => c.loaded = multio_configuration_t::from_file(path, Some(&dir))?,
            Source::Environment => {
                let fresh = multio_configuration_t::from_env(Some(&dir))?;
                c.loaded = fresh.loaded;
            }
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_config_set_failure_handler(
    cc: *mut multio_configuration_t,
    handler: multio_failure_handler_t,
    usercontext: *mut c_void,
) -> c_int {
    run("multio_config_set_failure_handler", failure_of(cc), || {
        unsafe { obj(cc, "cc") }?.failure.set(handler, usercontext)
    })
}

/// MPI options are accepted and have no effect: no plan here uses MPI (a `transport` action is
/// refused when the handle is made), so there is no communicator to split or return, which is
/// also what MultIO does with them when its plans have no MPI transport.
#[no_mangle]
pub unsafe extern "C" fn multio_mpi_allow_world_default_comm(
    cc: *mut multio_configuration_t,
    // A byte, not `bool`: any value a caller passes is defined behaviour.
    _allow: u8,
) -> c_int {
    run(
        "multio_mpi_allow_world_default_comm",
        failure_of(cc),
        || unsafe { obj(cc, "cc") }.map(|_| ()),
    )
}

#[no_mangle]
pub unsafe extern "C" fn multio_mpi_parent_comm(
    cc: *mut multio_configuration_t,
    _parent_comm: c_int,
) -> c_int {
    run("multio_mpi_parent_comm", failure_of(cc), || {
        unsafe { obj(cc, "cc") }.map(|_| ())
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_mpi_return_client_comm(
    cc: *mut multio_configuration_t,
    _return_client_comm: *mut c_int,
) -> c_int {
    run("multio_mpi_return_client_comm", failure_of(cc), || {
        unsafe { obj(cc, "cc") }.map(|_| ())
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_mpi_return_server_comm(
    cc: *mut multio_configuration_t,
    _return_server_comm: *mut c_int,
) -> c_int {
    run("multio_mpi_return_server_comm", failure_of(cc), || {
        unsafe { obj(cc, "cc") }.map(|_| ())
    })
}

// ---------------------------------------------------------------------------------------------
// Handles

struct State {
    plans: PlanSet,
    /// `multio_write_parametrization*`: keys every message is seen with unless it has its own
    /// (MultIO's lookup falls back to them). Per handle here; process-wide in MultIO.
    parametrization: Metadata,
}

#[allow(non_camel_case_types)]
pub struct multio_handle_t {
    state: Mutex<State>,
    failure: SharedFailure,
}

impl HasFailure for multio_handle_t {
    fn failure(&self) -> Option<SharedFailure> {
        Some(self.failure.clone())
    }
}

impl multio_handle_t {
    fn new(c: &multio_configuration_t) -> Result<multio_handle_t> {
        let plans = PlanSet::new(&c.loaded, Context::default())?;
        Ok(multio_handle_t {
            state: Mutex::new(State {
                plans,
                parametrization: Metadata::new(),
            }),
            failure: c.failure.clone(),
        })
    }

    fn state(&self) -> Result<std::sync::MutexGuard<'_, State>> {
        self.state.lock().map_err(|_| {
            Error::Invalid(
                "the handle is unusable after an internal error in an earlier call".into(),
            )
        })
    }

    /// Runs one message through every plan, its metadata completed with the parametrization;
    /// each plan that failed is named in the error, the others went on.
    fn send(&self, make: impl FnOnce(&Metadata) -> Message) -> Result<()> {
        let mut st = self.state()?;
        let msg = make(&st.parametrization);
        let mut failures = st.plans.process(msg);
        match failures.len() {
            0 => Ok(()),
            1 => Err(Error::Pipeline(failures.remove(0))),
            _ => Err(Error::Plans(failures)),
        }
    }
}

/// `md` with the parametrization's keys it lacks.
fn with_parametrization(md: &Metadata, parametrization: &Metadata) -> Metadata {
    let mut out = md.clone();
    for (k, v) in parametrization.iter() {
        if !out.contains(k) {
            out.set(k.clone(), v.clone());
        }
    }
    out
}

#[no_mangle]
pub unsafe extern "C" fn multio_new_handle_default(mio: *mut *mut multio_handle_t) -> c_int {
    run("multio_new_handle_default", None, || {
        if mio.is_null() {
            return Err(Error::Null("mio"));
        }
        let h = multio_handle_t::new(&multio_configuration_t::from_env(None)?)?;
        unsafe { put_new(mio, "mio", h) }
    })
}

/// Builds the plans (unknown and refused actions are reported here, as MultIO reports them).
/// The configuration stays the caller's to delete; the handle shares its failure handler. A NULL
/// configuration means the default one, as the header documents (MultIO asserts instead).
#[no_mangle]
pub unsafe extern "C" fn multio_new_handle(
    mio: *mut *mut multio_handle_t,
    cc: *mut multio_configuration_t,
) -> c_int {
    run("multio_new_handle", failure_of(cc), || {
        if mio.is_null() {
            return Err(Error::Null("mio"));
        }
        let h = match unsafe { cc.as_ref() } {
            Some(c) => multio_handle_t::new(c)?,
            None => multio_handle_t::new(&multio_configuration_t::from_env(None)?)?,
        };
        unsafe { put_new(mio, "mio", h) }
    })
}

/// Frees the handle. As in MultIO, open statistics windows are not flushed: send a `last-step`
/// flush first.
#[no_mangle]
pub unsafe extern "C" fn multio_delete_handle(mio: *mut multio_handle_t) -> c_int {
    run("multio_delete_handle", None, || {
        if mio.is_null() {
            return Err(Error::Null("mio"));
        }
        // SAFETY: mio came from Box::into_raw in this library (crate safety contract).
        drop(unsafe { Box::from_raw(mio) });
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_handle_set_failure_handler(
    mio: *mut multio_handle_t,
    handler: multio_failure_handler_t,
    usercontext: *mut c_void,
) -> c_int {
    run("multio_handle_set_failure_handler", failure_of(mio), || {
        unsafe { obj(mio, "mio") }?
            .failure
            .set(handler, usercontext)
    })
}

/// Nothing to open: there are no I/O servers.
#[no_mangle]
pub unsafe extern "C" fn multio_open_connections(mio: *mut multio_handle_t) -> c_int {
    run("multio_open_connections", failure_of(mio), || {
        unsafe { obj(mio, "mio") }.map(|_| ())
    })
}

/// Sends the `close-connection` flush MultIO sends (with `toAllServers` and `domain: global`)
/// through the plans; there is nothing else to close.
#[no_mangle]
pub unsafe extern "C" fn multio_close_connections(mio: *mut multio_handle_t) -> c_int {
    run("multio_close_connections", failure_of(mio), || {
        let h = unsafe { obj(mio, "mio") }?;
        h.send(|param| {
            let mut md = Metadata::new();
            md.set("flushKind", "close-connection");
            md.set("toAllServers", true);
            md.set("domain", "global");
            Message::Flush(with_parametrization(&md, param))
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_start_server(cc: *mut multio_configuration_t) -> c_int {
    run("multio_start_server", failure_of(cc), || {
        unsafe { obj(cc, "cc") }?;
        Err(Error::Unsupported(
            "there are no MultIO I/O servers in fieldstore: plans run in the process that writes \
             the fields (multio_new_handle), or in the store"
                .into(),
        ))
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_flush(
    mio: *mut multio_handle_t,
    md: *mut multio_metadata_t,
) -> c_int {
    run("multio_flush", failure_of(mio), || {
        let h = unsafe { obj(mio, "mio") }?;
        let m = unsafe { obj(md, "md") }?;
        h.send(|param| Message::Flush(with_parametrization(&m.md, param)))
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_notify(
    mio: *mut multio_handle_t,
    md: *mut multio_metadata_t,
) -> c_int {
    run("multio_notify", failure_of(mio), || {
        let h = unsafe { obj(mio, "mio") }?;
        let m = unsafe { obj(md, "md") }?;
        h.send(|param| Message::Notification(with_parametrization(&m.md, param)))
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_synchronize(
    mio: *mut multio_handle_t,
    _md: *mut multio_metadata_t,
) -> c_int {
    run("multio_synchronize", failure_of(mio), || {
        unsafe { obj(mio, "mio") }?;
        Err(Error::Unsupported(
            "multio_synchronize is an MPI barrier with MultIO's I/O servers; fieldstore has \
             neither (nothing was sent)"
                .into(),
        ))
    })
}

fn mpi_only(what: &str) -> Error {
    Error::Unsupported(format!(
        "{what} need MPI domain maps, which fieldstore does not assemble: write whole fields \
         (and set missingValue/bitmapPresent on them instead of masks); the aggregate and mask \
         actions are refused for the same reason"
    ))
}

#[no_mangle]
pub unsafe extern "C" fn multio_write_domain(
    mio: *mut multio_handle_t,
    _md: *mut multio_metadata_t,
    _data: *mut c_int,
    _size: c_int,
) -> c_int {
    run("multio_write_domain", failure_of(mio), || {
        unsafe { obj(mio, "mio") }?;
        Err(mpi_only("domains (partial fields)"))
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_write_mask_float(
    mio: *mut multio_handle_t,
    _md: *mut multio_metadata_t,
    _data: *const f32,
    _size: c_int,
) -> c_int {
    run("multio_write_mask_float", failure_of(mio), || {
        unsafe { obj(mio, "mio") }?;
        Err(mpi_only("masks"))
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_write_mask_double(
    mio: *mut multio_handle_t,
    _md: *mut multio_metadata_t,
    _data: *const f64,
    _size: c_int,
) -> c_int {
    run("multio_write_mask_double", failure_of(mio), || {
        unsafe { obj(mio, "mio") }?;
        Err(mpi_only("masks"))
    })
}

// ---------------------------------------------------------------------------------------------
// Parametrization

/// Adds keys to the handle's parametrization. As in MultIO a key is written once: the same value
/// again is accepted, a different one is an error (naming the key and both values) and changes
/// nothing.
fn parametrize(h: &multio_handle_t, keys: Vec<(String, Value)>) -> Result<()> {
    let mut st = h.state()?;
    for (k, v) in &keys {
        if let Some(old) = st.parametrization.get(k) {
            if old != v {
                return Err(Error::Invalid(format!(
                    "parametrization key '{k}' already has a different value: {old} != {v}"
                )));
            }
        }
    }
    for (k, v) in keys {
        st.parametrization.set(k, v);
    }
    Ok(())
}

/// Static metadata every later message is seen with (where it lacks the key). MultIO also passes
/// the message through the plans, where only `print` shows it; fieldstore does not.
#[no_mangle]
pub unsafe extern "C" fn multio_write_parametrization(
    mio: *mut multio_handle_t,
    md: *mut multio_metadata_t,
) -> c_int {
    run("multio_write_parametrization", failure_of(mio), || {
        let h = unsafe { obj(mio, "mio") }?;
        let m = unsafe { obj(md, "md") }?;
        parametrize(
            h,
            m.md.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        )
    })
}

unsafe fn parametrize_array<T: Copy>(
    name: &str,
    mio: *mut multio_handle_t,
    key: *const c_char,
    data: *const T,
    size: c_int,
    convert: impl Fn(&[T]) -> Value,
) -> c_int {
    run(name, failure_of(mio), || {
        let h = unsafe { obj(mio, "mio") }?;
        let key = unsafe { text(key, "key") }?;
        let values = unsafe { slice(data, size, "data") }?;
        if values.is_empty() {
            return Err(Error::Invalid(format!(
                "parametrization key '{key}': the array is empty"
            )));
        }
        parametrize(h, vec![(key.to_string(), convert(values))])
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_write_parametrization_array_byte(
    mio: *mut multio_handle_t,
    key: *const c_char,
    data: *const u8,
    size: c_int,
) -> c_int {
    unsafe {
        parametrize_array(
            "multio_write_parametrization_array_byte",
            mio,
            key,
            data,
            size,
            |v| Value::Ints(v.iter().map(|&x| i64::from(x)).collect()),
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn multio_write_parametrization_array_int32(
    mio: *mut multio_handle_t,
    key: *const c_char,
    data: *const i32,
    size: c_int,
) -> c_int {
    unsafe {
        parametrize_array(
            "multio_write_parametrization_array_int32",
            mio,
            key,
            data,
            size,
            |v| Value::Ints(v.iter().map(|&x| i64::from(x)).collect()),
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn multio_write_parametrization_array_int64(
    mio: *mut multio_handle_t,
    key: *const c_char,
    data: *const i64,
    size: c_int,
) -> c_int {
    unsafe {
        parametrize_array(
            "multio_write_parametrization_array_int64",
            mio,
            key,
            data,
            size,
            |v| Value::Ints(v.to_vec()),
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn multio_write_parametrization_array_real32(
    mio: *mut multio_handle_t,
    key: *const c_char,
    data: *const f32,
    size: c_int,
) -> c_int {
    unsafe {
        parametrize_array(
            "multio_write_parametrization_array_real32",
            mio,
            key,
            data,
            size,
            |v| Value::Doubles(v.iter().map(|&x| f64::from(x)).collect()),
        )
    }
}

#[no_mangle]
pub unsafe extern "C" fn multio_write_parametrization_array_real64(
    mio: *mut multio_handle_t,
    key: *const c_char,
    data: *const f64,
    size: c_int,
) -> c_int {
    unsafe {
        parametrize_array(
            "multio_write_parametrization_array_real64",
            mio,
            key,
            data,
            size,
            |v| Value::Doubles(v.to_vec()),
        )
    }
}

// ---------------------------------------------------------------------------------------------
// Fields

/// Sends values as a field. As MultIO does, `misc-precision` and `misc-format: raw` are set on
/// the caller's metadata object itself (a later flush or `field_accepted` with it sees them).
fn write_values(
    h: &multio_handle_t,
    m: &mut multio_metadata_t,
    precision: &str,
    values: Vec<f64>,
) -> Result<()> {
    m.md.set("misc-precision", precision);
    m.md.set("misc-format", "raw");
    h.send(|param| Message::Field(Field::values(with_parametrization(&m.md, param), values)))
}

#[no_mangle]
pub unsafe extern "C" fn multio_write_field_float(
    mio: *mut multio_handle_t,
    md: *mut multio_metadata_t,
    data: *const f32,
    size: c_int,
) -> c_int {
    run("multio_write_field_float", failure_of(mio), || {
        let h = unsafe { obj(mio, "mio") }?;
        let m = unsafe { obj_mut(md, "md") }?;
        let values = unsafe { slice(data, size, "data") }?;
        write_values(
            h,
            m,
            "single",
            values.iter().map(|&x| f64::from(x)).collect(),
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_write_field_double(
    mio: *mut multio_handle_t,
    md: *mut multio_metadata_t,
    data: *const f64,
    size: c_int,
) -> c_int {
    run("multio_write_field_double", failure_of(mio), || {
        let h = unsafe { obj(mio, "mio") }?;
        let m = unsafe { obj_mut(md, "md") }?;
        let values = unsafe { slice(data, size, "data") }?;
        write_values(h, m, "double", values.to_vec())
    })
}

/// A field from a data buffer of `byte_size` 4 (float) or 8 (double) values. Unlike MultIO,
/// which moves the buffer's contents into the message, the buffer keeps its values.
#[no_mangle]
pub unsafe extern "C" fn multio_write_field_buffer(
    mio: *mut multio_handle_t,
    md: *mut multio_metadata_t,
    d: *mut multio_data_t,
    byte_size: c_int,
) -> c_int {
    run("multio_write_field_buffer", failure_of(mio), || {
        let h = unsafe { obj(mio, "mio") }?;
        let m = unsafe { obj_mut(md, "md") }?;
        let d = unsafe { obj(d, "d") }?;
        let width = match byte_size {
            4 | 8 => byte_size as usize,
            other => {
                return Err(Error::Invalid(format!(
                    "byte_size must be 4 (float) or 8 (double), not {other}"
                )))
            }
        };
        if !d.bytes.len().is_multiple_of(width) {
            return Err(Error::Invalid(format!(
                "the buffer holds {} bytes, not a whole number of {width}-byte values",
                d.bytes.len()
            )));
        }
        let chunks = d.bytes.chunks_exact(width);
        let (precision, values): (&str, Vec<f64>) = if width == 4 {
            let v = chunks
                .map(|c| f64::from(f32::from_ne_bytes([c[0], c[1], c[2], c[3]])))
                .collect();
            ("single", v)
        } else {
            let v = chunks
                .map(|c| f64::from_ne_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
                .collect();
            ("double", v)
        };
        write_values(h, m, precision, values)
    })
}

/// A GRIB message as is (metadata `misc-format: grib` only, as in MultIO): plans that select on
/// GRIB keys do not see them; `select → sink` passes it through.
#[no_mangle]
pub unsafe extern "C" fn multio_write_grib_encoded(
    mio: *mut multio_handle_t,
    gribdata: *mut c_void,
    gribsize: c_int,
) -> c_int {
    run("multio_write_grib_encoded", failure_of(mio), || {
        let h = unsafe { obj(mio, "mio") }?;
        let bytes = unsafe { slice(gribdata as *const u8, gribsize, "gribdata") }?.to_vec();
        h.send(|param| {
            let mut f = Field::grib(bytes);
            f.metadata = with_parametrization(&f.metadata, param);
            Message::Field(f)
        })
    })
}

/// Whether any plan would take a field with this metadata (its selects match).
#[no_mangle]
pub unsafe extern "C" fn multio_field_accepted(
    mio: *mut multio_handle_t,
    md: *const multio_metadata_t,
    accepted: *mut bool,
) -> c_int {
    run("multio_field_accepted", failure_of(mio), || {
        let h = unsafe { obj(mio, "mio") }?;
        let m = unsafe { obj(md, "md") }?;
        if accepted.is_null() {
            return Err(Error::Null("accepted"));
        }
        let st = h.state()?;
        let ok = st
            .plans
            .field_accepted(&with_parametrization(&m.md, &st.parametrization));
        unsafe { put(accepted, "accepted", ok) }
    })
}

// ---------------------------------------------------------------------------------------------
// Metadata

#[allow(non_camel_case_types)]
pub struct multio_metadata_t {
    md: Metadata,
    /// The handle's failure handler (shared, so it stays valid after the handle is deleted).
    failure: Option<SharedFailure>,
}

impl HasFailure for multio_metadata_t {
    fn failure(&self) -> Option<SharedFailure> {
        self.failure.clone()
    }
}

/// A new, empty metadata object; `mio` (may be NULL) lends it its failure handler.
#[no_mangle]
pub unsafe extern "C" fn multio_new_metadata(
    md: *mut *mut multio_metadata_t,
    mio: *mut multio_handle_t,
) -> c_int {
    let failure = failure_of(mio);
    run("multio_new_metadata", failure.clone(), || {
        let m = multio_metadata_t {
            md: Metadata::new(),
            failure: failure.clone(),
        };
        unsafe { put_new(md, "md", m) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_copy_metadata(
    md: *mut *mut multio_metadata_t,
    md_from: *mut multio_metadata_t,
) -> c_int {
    run("multio_copy_metadata", failure_of(md_from), || {
        let from = unsafe { obj(md_from, "mdFrom") }?;
        let m = multio_metadata_t {
            md: from.md.clone(),
            failure: from.failure.clone(),
        };
        unsafe { put_new(md, "md", m) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_delete_metadata(md: *mut multio_metadata_t) -> c_int {
    run("multio_delete_metadata", None, || {
        if md.is_null() {
            return Err(Error::Null("md"));
        }
        // SAFETY: md came from Box::into_raw in this library (crate safety contract).
        drop(unsafe { Box::from_raw(md) });
        Ok(())
    })
}

unsafe fn set(
    name: &str,
    md: *mut multio_metadata_t,
    key: *const c_char,
    value: impl FnOnce() -> Result<Value>,
) -> c_int {
    run(name, failure_of(md), || {
        let m = unsafe { obj_mut(md, "md") }?;
        let key = unsafe { text(key, "key") }?;
        let value = value()?;
        m.md.set(key, value);
        Ok(())
    })
}

/// An int (64 bits). A program built against pymultio's `processed_multio.h`, which declares
/// the value `int`, passes only 32 valid bits (negative values arrive as large positive ones),
/// with MultIO's library as with this one.
#[no_mangle]
pub unsafe extern "C" fn multio_metadata_set_int(
    md: *mut multio_metadata_t,
    key: *const c_char,
    value: std::ffi::c_longlong,
) -> c_int {
    unsafe { set("multio_metadata_set_int", md, key, || Ok(Value::Int(value))) }
}

#[no_mangle]
pub unsafe extern "C" fn multio_metadata_set_string(
    md: *mut multio_metadata_t,
    key: *const c_char,
    value: *const c_char,
) -> c_int {
    unsafe {
        set("multio_metadata_set_string", md, key, || {
            Ok(Value::String(text(value, "value")?.to_string()))
        })
    }
}

/// A bool. Taken as a byte so a Fortran logical or a C int that is neither 0 nor 1 is read as
/// true rather than being undefined behaviour.
#[no_mangle]
pub unsafe extern "C" fn multio_metadata_set_bool(
    md: *mut multio_metadata_t,
    key: *const c_char,
    value: u8,
) -> c_int {
    unsafe {
        set("multio_metadata_set_bool", md, key, || {
            Ok(Value::Bool(value != 0))
        })
    }
}

#[no_mangle]
pub unsafe extern "C" fn multio_metadata_set_double(
    md: *mut multio_metadata_t,
    key: *const c_char,
    value: f64,
) -> c_int {
    unsafe {
        set("multio_metadata_set_double", md, key, || {
            Ok(Value::Double(value))
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Data buffers (`multio_data_t`, an eckit::Buffer in MultIO): sizes and positions as MultIO's,
// bytes for the buffer, elements for positions; every write is bounds-checked.

#[allow(non_camel_case_types)]
pub struct multio_data_t {
    bytes: Vec<u8>,
    failure: Option<SharedFailure>,
}

impl HasFailure for multio_data_t {
    fn failure(&self) -> Option<SharedFailure> {
        self.failure.clone()
    }
}

#[no_mangle]
pub unsafe extern "C" fn multio_data_new(
    d: *mut *mut multio_data_t,
    mio: *mut multio_handle_t,
) -> c_int {
    let failure = failure_of(mio);
    run("multio_data_new", failure.clone(), || {
        let data = multio_data_t {
            bytes: Vec::new(),
            failure: failure.clone(),
        };
        unsafe { put_new(d, "d", data) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_data_delete(d: *mut multio_data_t) -> c_int {
    run("multio_data_delete", None, || {
        if d.is_null() {
            return Err(Error::Null("d"));
        }
        // SAFETY: d came from Box::into_raw in this library (crate safety contract).
        drop(unsafe { Box::from_raw(d) });
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_data_zero(d: *mut multio_data_t) -> c_int {
    run("multio_data_zero", failure_of(d), || {
        unsafe { obj_mut(d, "d") }?.bytes.fill(0);
        Ok(())
    })
}

/// Resizes to `new_size` bytes; what fits is kept, new bytes are zero.
#[no_mangle]
pub unsafe extern "C" fn multio_data_resize(d: *mut multio_data_t, new_size: c_int) -> c_int {
    run("multio_data_resize", failure_of(d), || {
        let data = unsafe { obj_mut(d, "d") }?;
        let n = usize::try_from(new_size)
            .map_err(|_| Error::Invalid(format!("the size {new_size} is negative")))?;
        data.bytes.resize(n, 0);
        Ok(())
    })
}

/// The size in bytes.
#[no_mangle]
pub unsafe extern "C" fn multio_data_size(d: *mut multio_data_t, size: *mut c_int) -> c_int {
    run("multio_data_size", failure_of(d), || {
        let data = unsafe { obj(d, "d") }?;
        let n = c_int::try_from(data.bytes.len())
            .map_err(|_| Error::Invalid("the buffer is larger than an int can say".into()))?;
        unsafe { put(size, "size", n) }
    })
}

fn set_chunk(data: &mut multio_data_t, width: usize, pos: c_int, bytes: &[u8]) -> Result<()> {
    let pos =
        usize::try_from(pos).map_err(|_| Error::Invalid(format!("position {pos} is negative")))?;
    let start = pos * width;
    let end = start + bytes.len();
    if end > data.bytes.len() {
        return Err(Error::Invalid(format!(
            "values {pos}..{} do not fit in a buffer of {} bytes ({} values of {width} bytes)",
            pos + bytes.len() / width,
            data.bytes.len(),
            data.bytes.len() / width
        )));
    }
    data.bytes[start..end].copy_from_slice(bytes);
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn multio_data_set_float_chunk(
    d: *mut multio_data_t,
    value: *mut f32,
    pos: c_int,
    size: c_int,
) -> c_int {
    run("multio_data_set_float_chunk", failure_of(d), || {
        let data = unsafe { obj_mut(d, "d") }?;
        let v = unsafe { slice(value as *const f32, size, "value") }?;
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
        set_chunk(data, 4, pos, &bytes)
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_data_set_double_chunk(
    d: *mut multio_data_t,
    value: *mut f64,
    pos: c_int,
    size: c_int,
) -> c_int {
    run("multio_data_set_double_chunk", failure_of(d), || {
        let data = unsafe { obj_mut(d, "d") }?;
        let v = unsafe { slice(value as *const f64, size, "value") }?;
        let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_ne_bytes()).collect();
        set_chunk(data, 8, pos, &bytes)
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_data_set_float_scalar(
    d: *mut multio_data_t,
    value: *mut f32,
    pos: c_int,
) -> c_int {
    unsafe { multio_data_set_float_chunk(d, value, pos, 1) }
}

#[no_mangle]
pub unsafe extern "C" fn multio_data_set_double_scalar(
    d: *mut multio_data_t,
    value: *mut f64,
    pos: c_int,
) -> c_int {
    unsafe { multio_data_set_double_chunk(d, value, pos, 1) }
}

// ---------------------------------------------------------------------------------------------
// Initialisation and versions

/// Nothing to set up (MultIO initialises eckit here); calling it again is harmless.
#[no_mangle]
pub extern "C" fn multio_initialise() -> c_int {
    run("multio_initialise", None, || Ok(()))
}

#[no_mangle]
pub unsafe extern "C" fn multio_version(version: *mut *const c_char) -> c_int {
    run("multio_version", None, || unsafe {
        put(version, "version", API_LEVEL.as_ptr())
    })
}

#[no_mangle]
pub unsafe extern "C" fn multio_vcs_version(sha1: *mut *const c_char) -> c_int {
    run("multio_vcs_version", None, || unsafe {
        put(sha1, "sha1", VCS.as_ptr())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::errors::{MULTIO_ERROR_ECKIT_EXCEPTION, MULTIO_SUCCESS};
    use std::ffi::CString;
    use std::ptr::null_mut;

    fn last() -> String {
        unsafe { CStr::from_ptr(multio_error_string(MULTIO_ERROR_ECKIT_EXCEPTION)) }
            .to_string_lossy()
            .into_owned()
    }

    /// A handle on a plan writing every field raw to `out`.
    fn handle(dir: &Path, plan_extra: &str) -> (*mut multio_handle_t, *mut multio_configuration_t) {
        let out = dir.join("out.raw");
        let plan = dir.join("plan.yaml");
        std::fs::write(
            &plan,
            format!(
                "plans:\n  - name: p\n    actions:\n{plan_extra}      - type: encode\n        format: raw\n      - type: sink\n        sinks: [{{type: file, path: \"{}\", append: true, per-server: false}}]\n",
                out.display()
            ),
        )
        .unwrap();
        let path = CString::new(plan.to_str().unwrap()).unwrap();
        let mut cc = null_mut();
        let mut mio = null_mut();
        unsafe {
            assert_eq!(
                multio_new_configuration_from_filename(&mut cc, path.as_ptr()),
                0
            );
            assert_eq!(multio_new_handle(&mut mio, cc), 0);
        }
        (mio, cc)
    }

    #[test]
    fn null_out_pointers_and_objects_are_errors() {
        unsafe {
            assert_eq!(multio_new_metadata(null_mut(), null_mut()), 1);
            assert_eq!(last(), "fieldstore multio_new_metadata: md is NULL");
            assert_eq!(multio_metadata_set_int(null_mut(), c"k".as_ptr(), 1), 1);
            let mut md = null_mut();
            assert_eq!(multio_new_metadata(&mut md, null_mut()), 0);
            assert_eq!(multio_metadata_set_int(md, std::ptr::null(), 1), 1);
            assert_eq!(last(), "fieldstore multio_metadata_set_int: key is NULL");
            let bad = [0xffu8, 0];
            assert_eq!(
                multio_metadata_set_string(md, c"k".as_ptr(), bad.as_ptr().cast()),
                1
            );
            assert_eq!(
                last(),
                "fieldstore multio_metadata_set_string: value is not valid UTF-8"
            );
            assert_eq!(multio_delete_metadata(md), 0);
            let text = CStr::from_ptr(multio_error_string_info(1, null_mut()));
            assert!(text.to_string_lossy().contains("value is not valid UTF-8"));
        }
    }

    #[test]
    fn buffers_are_bounds_checked_and_written_as_fields() {
        let dir = tempfile::tempdir().unwrap();
        let (mio, cc) = handle(dir.path(), "");
        unsafe {
            let mut d = null_mut();
            assert_eq!(multio_data_new(&mut d, mio), 0);
            assert_eq!(multio_data_resize(d, 12), 0);
            let mut v = [1.5f32, 2.5, 3.5];
            assert_eq!(multio_data_set_float_chunk(d, v.as_mut_ptr(), 1, 3), 1);
            assert!(last().contains("values 1..4 do not fit in a buffer of 12 bytes"));
            assert_eq!(multio_data_set_float_chunk(d, v.as_mut_ptr(), 0, 3), 0);
            let mut size = 0;
            assert_eq!(multio_data_size(d, &mut size), 0);
            assert_eq!(size, 12);
            let mut md = null_mut();
            assert_eq!(multio_new_metadata(&mut md, mio), 0);
            assert_eq!(multio_write_field_buffer(mio, md, d, 4), MULTIO_SUCCESS);
            // The buffer keeps its values (MultIO's is emptied).
            assert_eq!(multio_write_field_buffer(mio, md, d, 8), 1);
            assert!(last().contains("12 bytes, not a whole number of 8-byte values"));
            assert_eq!(multio_data_delete(d), 0);
            assert_eq!(multio_delete_metadata(md), 0);
            assert_eq!(multio_delete_handle(mio), 0);
            assert_eq!(multio_delete_configuration(cc), 0);
        }
        let raw = std::fs::read(dir.path().join("out.raw")).unwrap();
        let got: Vec<f32> = raw
            .chunks_exact(4)
            .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, [1.5, 2.5, 3.5]);
    }

    #[test]
    fn parametrization_completes_messages_and_is_written_once() {
        let dir = tempfile::tempdir().unwrap();
        let select = "      - type: select\n        match: [{experiment: [hindcast]}]\n";
        let (mio, cc) = handle(dir.path(), select);
        unsafe {
            let mut md = null_mut();
            assert_eq!(multio_new_metadata(&mut md, mio), 0);
            let mut ok = true;
            assert_eq!(multio_field_accepted(mio, md, &mut ok), 0);
            assert!(!ok);
            let mut p = null_mut();
            assert_eq!(multio_new_metadata(&mut p, mio), 0);
            assert_eq!(
                multio_metadata_set_string(p, c"experiment".as_ptr(), c"hindcast".as_ptr()),
                0
            );
            assert_eq!(multio_write_parametrization(mio, p), 0);
            assert_eq!(
                multio_write_parametrization(mio, p),
                0,
                "the same value again"
            );
            let levels = [1i32, 2];
            assert_eq!(
                multio_write_parametrization_array_int32(
                    mio,
                    c"levels".as_ptr(),
                    levels.as_ptr(),
                    2
                ),
                0
            );
            assert_eq!(multio_field_accepted(mio, md, &mut ok), 0);
            assert!(ok, "selects see parametrization keys");
            assert_eq!(
                multio_metadata_set_string(p, c"experiment".as_ptr(), c"forecast".as_ptr()),
                0
            );
            assert_eq!(multio_write_parametrization(mio, p), 1);
            assert!(
                last().contains("'experiment' already has a different value"),
                "{}",
                last()
            );
            let v = [4.0f64];
            assert_eq!(multio_write_field_double(mio, md, v.as_ptr(), 1), 0);
            for k in [p, md] {
                assert_eq!(multio_delete_metadata(k), 0);
            }
            assert_eq!(multio_delete_handle(mio), 0);
            assert_eq!(multio_delete_configuration(cc), 0);
        }
        assert_eq!(
            std::fs::read(dir.path().join("out.raw")).unwrap(),
            4.0f64.to_ne_bytes()
        );
    }
}
