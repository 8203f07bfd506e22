//! `fdb_handle_t`: one store opened from the discovered config or from YAML; archive and flush.
//! A handle may be shared between threads, as FDB5 documents.

use std::ffi::{c_char, c_int};

use fieldstore::api::{self, Archiver, Fdb};
use fieldstore::model::config::{self, FdbConfig};
use fieldstore::model::schema::Schema;
use fieldstore::model::ModelError;

use crate::errors::{run, CError, Result};
use crate::key::fdb_key_t;
use crate::request::{context, fdb_request_t};
use crate::strings::{drop_obj, give, obj, shared, text};

pub struct fdb_handle_t {
    pub fdb: Box<dyn Fdb>,
    /// The local schema archived keys are checked against before anything is stored; None
    /// when a server behind the config checks its own.
    schema: Option<Schema>,
}

impl fdb_handle_t {
    fn open(config: &FdbConfig) -> Result<fdb_handle_t> {
        let fdb = fieldstore::open(config)?;
        let schema = fieldstore::open::archive_schema(config)?;
        Ok(fdb_handle_t { fdb, schema })
    }

    fn check(&self, key: &fieldstore::model::Key) -> std::result::Result<(), api::ApiError> {
        match &self.schema {
            Some(s) => s
                .split(key, &context(), false)
                .map(|_| ())
                .map_err(|e| api::ApiError::from(ModelError::from(e))),
            None => Ok(()),
        }
    }
}

/// The store the environment names (FDB5_CONFIG_FILE, FDB_HOME...), found as the `fieldstore`
/// command finds it.
#[no_mangle]
pub extern "C" fn fdb_new_handle(fdb: *mut *mut fdb_handle_t) -> c_int {
    run(|| {
        if fdb.is_null() {
            return Err(CError::Null("fdb"));
        }
        let loaded = config::discover(None, &config::process_env).map_err(ModelError::from)?;
        give(fdb, "fdb", fdb_handle_t::open(&loaded.config)?)
    })
}

/// The store `system_config` (YAML text) describes. `user_config` (FDB5's per-user overrides)
/// is accepted and ignored: fieldstore has no per-user settings.
#[no_mangle]
pub extern "C" fn fdb_new_handle_from_yaml(
    fdb: *mut *mut fdb_handle_t,
    system_config: *const c_char,
    user_config: *const c_char,
) -> c_int {
    let _ = user_config;
    run(|| {
        if fdb.is_null() {
            return Err(CError::Null("fdb"));
        }
        let yaml = text(system_config, "system_config")?;
        let cfg =
            config::from_yaml_str(yaml, "<fdb_new_handle_from_yaml>").map_err(ModelError::from)?;
        give(fdb, "fdb", fdb_handle_t::open(&cfg)?)
    })
}

fn bytes<'a>(data: *const c_char, length: usize) -> Result<&'a [u8]> {
    if length == 0 {
        return Ok(&[]);
    }
    if data.is_null() {
        return Err(CError::Null("data"));
    }
    // SAFETY: the caller passes `length` readable bytes at `data`.
    Ok(unsafe { std::slice::from_raw_parts(data as *const u8, length) })
}

/// Stores `data` as one object under `key`, checked against the schema by the store (values
/// canonicalised as FDB5 does). The bytes are not decoded: FDB5 documents that key and data are
/// not checked for consistency, and a model archiving field by field cannot pay for a decode.
/// Visible after `fdb_flush`.
#[no_mangle]
pub extern "C" fn fdb_archive(
    fdb: *mut fdb_handle_t,
    key: *mut fdb_key_t,
    data: *const c_char,
    length: usize,
) -> c_int {
    run(|| {
        let h = shared(fdb, "fdb")?;
        let key = obj(key, "key")?.key();
        let data = bytes(data, length)?;
        if data.is_empty() {
            return Err(CError::Invalid(format!("no data to archive under {key}")));
        }
        h.fdb.archive_grib(&key, data)?;
        Ok(())
    })
}

/// Stores every GRIB message in `data` under the keys it carries. All or nothing: every message
/// is framed, decoded and checked against the schema before the first is stored. `req`, when
/// given, is accepted for FDB5's sake (FDB5 checks the messages against it; fieldstore does
/// not yet).
#[no_mangle]
pub extern "C" fn fdb_archive_multiple(
    fdb: *mut fdb_handle_t,
    req: *mut fdb_request_t,
    data: *const c_char,
    length: usize,
) -> c_int {
    let _ = req;
    run(|| {
        let h = shared(fdb, "fdb")?;
        let data = bytes(data, length)?;
        let checker = h;
        let mut archiver = Archiver::new(&*h.fdb)
            .validate_first(true)
            .check(move |k| checker.check(k));
        archiver.archive_slice(data, "fdb_archive_multiple data")?;
        Ok(())
    })
}

/// Makes everything archived through this handle durable and visible.
#[no_mangle]
pub extern "C" fn fdb_flush(fdb: *mut fdb_handle_t) -> c_int {
    run(|| {
        shared(fdb, "fdb")?.fdb.flush()?;
        Ok(())
    })
}

/// Flushes first, as FDB5's destructor does; a failed flush is reported and the handle freed.
#[no_mangle]
pub extern "C" fn fdb_delete_handle(fdb: *mut fdb_handle_t) -> c_int {
    run(|| {
        let flushed = match shared(fdb, "fdb") {
            Ok(h) => h.fdb.flush(),
            Err(_) => return Ok(()),
        };
        drop_obj(fdb);
        flushed?;
        Ok(())
    })
}
