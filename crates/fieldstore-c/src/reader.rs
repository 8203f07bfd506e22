//! `fdb_retrieve` and the data reader over its answer.

use std::ffi::{c_int, c_long, c_void};
use std::io::{Read, Seek, SeekFrom};

use fieldstore::api::DataReader;

use crate::errors::{run, CError, Result};
use crate::handle::fdb_handle_t;
use crate::request::fdb_request_t;
use crate::strings::{drop_obj, give, obj, put, shared};

/// Empty until `fdb_retrieve` positions it; reusable for another retrieve.
#[derive(Default)]
pub struct fdb_datareader_t {
    reader: Option<Box<dyn DataReader>>,
    /// Closed by `fdb_datareader_close` until `fdb_datareader_open` reopens it, as FDB5's
    /// DataHandle: reading a closed reader is an error, not a silent read.
    closed: bool,
}

impl fdb_datareader_t {
    /// Positions it on a retrieve's answer, open (`fdb_retrieve` and its waiting variant).
    pub(crate) fn set(&mut self, reader: Box<dyn DataReader>) {
        self.reader = Some(reader);
        self.closed = false;
    }

    /// The open reader.
    fn reader(&mut self) -> Result<&mut Box<dyn DataReader>> {
        if self.closed {
            return Err(CError::Invalid(
                "the data reader is closed: fdb_datareader_open reopens it".into(),
            ));
        }
        self.any()
    }

    /// The reader, open or closed.
    fn any(&mut self) -> Result<&mut Box<dyn DataReader>> {
        self.reader.as_mut().ok_or_else(|| {
            CError::Invalid("the data reader holds nothing: pass it to fdb_retrieve first".into())
        })
    }
}

fn io(what: &str, e: std::io::Error) -> CError {
    CError::Invalid(format!("{what} failed: {e}"))
}

fn long(v: u64) -> c_long {
    c_long::try_from(v).unwrap_or(c_long::MAX)
}

fn offset(v: c_long, what: &str) -> Result<u64> {
    u64::try_from(v).map_err(|_| CError::Invalid(format!("{what} must not be negative ({v})")))
}

/// The fields `req` names, newest copy of each; nothing matching gives an empty reader.
#[no_mangle]
pub extern "C" fn fdb_retrieve(
    fdb: *mut fdb_handle_t,
    req: *mut fdb_request_t,
    dr: *mut fdb_datareader_t,
) -> c_int {
    run(|| {
        let h = shared(fdb, "fdb")?;
        let req = obj(req, "req")?;
        let dr = obj(dr, "dr")?;
        dr.reader = Some(h.fdb.retrieve(&req.request)?);
        dr.closed = false;
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn fdb_new_datareader(dr: *mut *mut fdb_datareader_t) -> c_int {
    run(|| give(dr, "dr", fdb_datareader_t::default()))
}

/// Opens (or reopens after `fdb_datareader_close`) at the start; `size` (may be NULL) gets
/// the total bytes.
#[no_mangle]
pub extern "C" fn fdb_datareader_open(dr: *mut fdb_datareader_t, size: *mut c_long) -> c_int {
    run(|| {
        let dr = obj(dr, "dr")?;
        let r = dr.any()?;
        r.seek(SeekFrom::Start(0)).map_err(|e| io("open", e))?;
        if !size.is_null() {
            put(size, "size", long(r.size()))?;
        }
        dr.closed = false;
        Ok(())
    })
}

/// Ends reading: later reads, seeks and tells fail until `fdb_datareader_open` reopens it.
/// Closing a reader twice, or one holding nothing, is not an error (FDB5's close is idempotent).
#[no_mangle]
pub extern "C" fn fdb_datareader_close(dr: *mut fdb_datareader_t) -> c_int {
    run(|| {
        let dr = obj(dr, "dr")?;
        if let Some(r) = dr.reader.as_mut() {
            // Back to the start drops the field being read, so a reopen starts afresh.
            r.seek(SeekFrom::Start(0)).map_err(|e| io("close", e))?;
        }
        dr.closed = true;
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn fdb_datareader_tell(dr: *mut fdb_datareader_t, pos: *mut c_long) -> c_int {
    run(|| {
        let r = obj(dr, "dr")?.reader()?;
        put(pos, "pos", long(r.tell()))
    })
}

#[no_mangle]
pub extern "C" fn fdb_datareader_seek(dr: *mut fdb_datareader_t, pos: c_long) -> c_int {
    run(|| {
        let r = obj(dr, "dr")?.reader()?;
        let to = offset(pos, "pos")?;
        if to > r.size() {
            return Err(CError::Invalid(format!(
                "seek to {to} is past the end of the data ({} bytes)",
                r.size()
            )));
        }
        r.seek(SeekFrom::Start(to)).map_err(|e| io("seek", e))?;
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn fdb_datareader_skip(dr: *mut fdb_datareader_t, count: c_long) -> c_int {
    run(|| {
        let r = obj(dr, "dr")?.reader()?;
        let n = offset(count, "count")?;
        r.skip(n).map_err(|e| io("skip", e))?;
        Ok(())
    })
}

pub extern "C" fn fdb_datareader_size(dr: *mut fdb_datareader_t, size: *mut c_long) -> c_int {
    run(|| {
        let r = obj(dr, "dr")?.any()?;
        put(size, "size", long(r.size()))
    })
}

/// Fills `buf` with up to `count` bytes (fewer only at the end); `*read` 0 means the end.
#[no_mangle]
pub extern "C" fn fdb_datareader_read(
    dr: *mut fdb_datareader_t,
    buf: *mut c_void,
    count: c_long,
    read: *mut c_long,
) -> c_int {
    run(|| {
        let r = obj(dr, "dr")?.reader()?;
        let n = offset(count, "count")? as usize;
        if read.is_null() {
            return Err(CError::Null("read"));
        }
        if n > 0 && buf.is_null() {
            return Err(CError::Null("buf"));
        }
        let mut done = 0;
        if n > 0 {
            // SAFETY: the caller passes `count` writable bytes at `buf`.
            let out = unsafe { std::slice::from_raw_parts_mut(buf as *mut u8, n) };
            while done < n {
                match r.read(&mut out[done..]) {
                    Ok(0) => break,
                    Ok(k) => done += k,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(io("read", e)),
                }
            }
        }
        put(read, "read", done as c_long)
    })
}

#[no_mangle]
pub extern "C" fn fdb_delete_datareader(dr: *mut fdb_datareader_t) -> c_int {
    run(|| {
        drop_obj(dr);
        Ok(())
    })
}
