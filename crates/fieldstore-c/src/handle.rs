//! `fdb_handle_t`: one store opened from the discovered config or from YAML; archive and flush.
//! A handle may be shared between threads, as FDB5 documents.

use std::ffi::{c_char, c_int};

use fieldstore::api::{self, ArchiveError, Archiver, Fdb};
use fieldstore::grib::{mars_keys, SliceMessages};
use fieldstore::model::config::{self, FdbConfig};
use fieldstore::model::request::Request;
use fieldstore::model::schema::{Schema, SplitKey};
use fieldstore::model::Key;
use fieldstore::model::ModelError;

use crate::cube::Cube;
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

/// The store `system_config` (YAML text) describes. `user_config` (FDB5's per-user settings,
/// may be NULL) is checked by `user_config::check`.
pub extern "C" fn fdb_new_handle_from_yaml(
    fdb: *mut *mut fdb_handle_t,
    system_config: *const c_char,
    user_config: *const c_char,
) -> c_int {
    run(|| {
        if fdb.is_null() {
            return Err(CError::Null("fdb"));
        }
        if !user_config.is_null() {
            crate::user_config::check(text(user_config, "user_config")?)?;
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
/// is framed, decoded and checked against the schema (and against `req` when given: see
/// `cube`) before the first is stored.
#[no_mangle]
pub extern "C" fn fdb_archive_multiple(
    fdb: *mut fdb_handle_t,
    req: *mut fdb_request_t,
    data: *const c_char,
    length: usize,
) -> c_int {
    run(|| {
        let h = shared(fdb, "fdb")?;
        let data = bytes(data, length)?;
        // SAFETY: NULL or made by fdb_new_request.
        if let Some(req) = unsafe { req.as_ref() } {
            return archive_requested(h, &req.request, data);
        }
        let checker = h;
        let mut archiver = Archiver::new(&*h.fdb)
            .validate_first(true)
            .check(move |k| checker.check(k));
        archiver.archive_slice(data, "fdb_archive_multiple data")?;
        Ok(())
    })
}

/// `fdb_archive_multiple` with a request: the messages are framed, decoded and placed in the
/// request's cube first; only a complete, exact match is archived. Keys are decoded on this
/// thread (the request's fields are compared as they come, in order).
fn archive_requested(h: &fdb_handle_t, req: &Request, data: &[u8]) -> Result<()> {
    const SOURCE: &str = "fdb_archive_multiple data";
    let cx = context();
    let fallback;
    let schema = match &h.schema {
        Some(s) => s,
        None => {
            fallback = Schema::default_schema();
            &fallback
        }
    };
    let mut cube = Cube::new(schema, req, &cx)?;
    let messages = SliceMessages::new(data, SOURCE).collect::<std::result::Result<Vec<_>, _>>();
    let messages = messages.map_err(ArchiveError::from)?;
    let failed = |number: usize, offset: u64, cause: api::ApiError| ArchiveError::Message {
        source_name: SOURCE.to_string(),
        message: number,
        offset,
        cause: Box::new(cause),
    };
    let mut keys = Vec::with_capacity(messages.len());
    for &(number, offset, bytes) in &messages {
        let key = mars_keys(bytes).map_err(|e| failed(number, offset, e.into()))?;
        let split = match schema.split(&key, &cx, false) {
            Ok(split) => split,
            // A server checks keys against its own schema: the default one only canonicalises
            // here, and a key it cannot place is compared as the message gives it.
            Err(_) if h.schema.is_none() => SplitKey {
                db: key.clone(),
                index: Key::new(),
                datum: Key::new(),
            },
            Err(e) => return Err(failed(number, offset, ModelError::from(e).into()).into()),
        };
        cube.fill(number, &split)?;
        keys.push(key);
    }
    cube.complete()?;
    for (&(number, offset, bytes), key) in messages.iter().zip(&keys) {
        h.fdb
            .archive_grib(key, bytes)
            .map_err(|e| failed(number, offset, e))?;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use std::ffi::CString;
    use std::ptr;

    use super::*;
    use crate::key::{fdb_delete_key, fdb_key_add, fdb_new_key};
    use crate::reader::{
        fdb_datareader_read, fdb_delete_datareader, fdb_new_datareader, fdb_retrieve,
    };
    use crate::request::{fdb_delete_request, fdb_new_request, fdb_request_add};

    const KEY: [(&str, &str); 11] = [
        ("class", "od"),
        ("expver", "0001"),
        ("stream", "oper"),
        ("date", "20261122"),
        ("time", "1200"),
        ("domain", "g"),
        ("type", "fc"),
        ("levtype", "pl"),
        ("levelist", "500"),
        ("param", "130"),
        ("step", "12"),
    ];

    fn c(s: &str) -> CString {
        CString::new(s).unwrap()
    }

    /// FDB5 does not check a key against the bytes archived under it, and neither does
    /// fieldstore: a GRIB message saying step 6 is stored, and found, under the step 12 given.
    #[test]
    fn archive_stores_under_the_key_given_without_decoding() {
        let dir = std::env::temp_dir().join(format!("fieldstore-c-archive-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let schema = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fieldstore/tests/fixtures/ecmwf-fdb5-schema"
        );
        let yaml = format!(
            "type: local\nschema: {schema}\nspaces: [{{roots: [{{path: {}}}]}}]\n",
            dir.display()
        );
        let mut h = ptr::null_mut();
        assert_eq!(
            fdb_new_handle_from_yaml(&mut h, c(&yaml).as_ptr(), ptr::null()),
            0
        );

        let mut grib_keys = KEY.to_vec();
        grib_keys.retain(|(k, _)| !matches!(*k, "domain" | "step"));
        grib_keys.push(("step", "6"));
        let field = fieldstore::grib::sample::make_field(&grib_keys, 50, 1).unwrap();
        let mut key = ptr::null_mut();
        assert_eq!(fdb_new_key(&mut key), 0);
        for (k, v) in KEY {
            assert_eq!(fdb_key_add(key, c(k).as_ptr(), c(v).as_ptr()), 0);
        }
        let rc = fdb_archive(h, key, field.as_ptr() as *const c_char, field.len());
        // SAFETY: fdb_error_string gives a NUL-terminated string kept for this thread.
        let msg = unsafe { std::ffi::CStr::from_ptr(crate::errors::fdb_error_string(rc)) };
        assert_eq!(rc, 0, "{}", msg.to_string_lossy());
        assert_eq!(fdb_delete_key(key), 0);
        assert_eq!(fdb_flush(h), 0);

        let mut req = ptr::null_mut();
        assert_eq!(fdb_new_request(&mut req), 0);
        for (k, v) in KEY {
            let v = c(v);
            let vals = [v.as_ptr()];
            assert_eq!(fdb_request_add(req, c(k).as_ptr(), vals.as_ptr(), 1), 0);
        }
        let mut dr = ptr::null_mut();
        assert_eq!(fdb_new_datareader(&mut dr), 0);
        assert_eq!(fdb_retrieve(h, req, dr), 0);
        let mut buf = vec![0u8; field.len() + 16];
        let mut got = 0;
        let n = buf.len() as std::ffi::c_long;
        assert_eq!(
            fdb_datareader_read(dr, buf.as_mut_ptr().cast(), n, &mut got),
            0
        );
        assert_eq!(&buf[..got as usize], &field[..]);

        assert_eq!(fdb_delete_datareader(dr), 0);
        assert_eq!(fdb_delete_request(req), 0);
        assert_eq!(fdb_delete_handle(h), 0);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
