//! MARS keys of a GRIB message, read through ecCodes exactly as FDB5 does (namespace `mars`).

use std::ffi::{CStr, CString};

use super::error::GribError;
use super::ffi;
use super::handle::Handle;
use crate::model::Key;

/// The MARS keys of one framed message, in ecCodes' order, values as strings. Never copies the
/// message; safe to call from many threads at once (ecCodes is thread-safe per handle).
pub fn mars_keys(message: &[u8]) -> Result<Key, GribError> {
    mars_keys_of(&Handle::from_message(message)?)
}

/// The MARS keys of an open handle.
pub(crate) fn mars_keys_of(h: &Handle<'_>) -> Result<Key, GribError> {
    super::log::guarded(|| mars_keys_unguarded(h))
}

fn mars_keys_unguarded(h: &Handle<'_>) -> Result<Key, GribError> {
    let ns = CString::new("mars").map_err(|_| GribError::EcCodes("namespace".into()))?;
    // SAFETY: valid handle and namespace string.
    let it =
        unsafe { ffi::codes_keys_iterator_new(h.raw(), ffi::KEYS_ITERATOR_ALL_KEYS, ns.as_ptr()) };
    if it.is_null() {
        return Err(GribError::Decode(
            "cannot iterate the mars namespace".into(),
        ));
    }
    let mut pairs = Vec::with_capacity(16);
    let mut failure = None;
    // SAFETY: `it` stays valid until deleted below.
    while unsafe { ffi::codes_keys_iterator_next(it) } != 0 {
        // SAFETY: the name pointer is valid until the next iteration.
        let name_ptr = unsafe { ffi::codes_keys_iterator_get_name(it) };
        if name_ptr.is_null() {
            continue;
        }
        // SAFETY: non-null NUL-terminated string owned by ecCodes.
        let name = unsafe { CStr::from_ptr(name_ptr) };
        let key = name.to_string_lossy().into_owned();
        match h.get_string(name) {
            Ok(v) => {
                // FDB5 drops `stepunits`; steps in other units are not supported by our key yet.
                if key != "stepunits" {
                    pairs.push((key, v));
                }
            }
            Err(rc) => {
                failure = Some(format!(
                    "cannot read mars key '{key}': {}",
                    super::handle::error_text(rc)
                ));
                break;
            }
        }
    }
    // SAFETY: created above, deleted once.
    unsafe { ffi::codes_keys_iterator_delete(it) };
    if let Some(f) = failure {
        return Err(GribError::Decode(f));
    }
    if pairs.is_empty() {
        return Err(GribError::Decode("the message has no MARS keys".into()));
    }
    // GRIB1 parameters of tables other than ECMWF's 128 come as `number.table` (`112.1`). FDB5
    // (metkit) files them under their paramId, which only ecCodes' tables give: WMO table 1's
    // 112 is 3112 and its 11 is 130 (no arithmetic on `number.table` gets both right).
    if let Some((_, v)) = pairs.iter_mut().find(|(k, _)| k == "param") {
        if v.parse::<u64>().is_err() && v.contains('.') {
            if let Ok(id) = h.get_long("paramId") {
                *v = id.to_string();
            }
        }
    }
    Ok(Key::from_pairs(pairs))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The paramIds FDB5 5.10.8 lists for GRIB1 fields of these tables (archived with
    /// `fdb-write`): the same as ecCodes' paramId, not `table * 1000 + number`.
    #[test]
    fn grib1_table_params_are_filed_under_their_param_id() {
        for (table, number, fdb5) in [
            (1, 112, "3112"),
            (2, 112, "3112"),
            (3, 112, "3112"),
            (1, 11, "130"),
            (128, 130, "130"),
            (140, 229, "140229"),
            (129, 130, "129130"),
            (160, 130, "130"),
            (171, 130, "171130"),
            (228, 1, "228001"),
        ] {
            let mut h = Handle::from_sample("GRIB1").unwrap();
            h.set_long("table2Version", table).unwrap();
            h.set_long("indicatorOfParameter", number).unwrap();
            let msg = h.message().unwrap();
            let key = mars_keys(&msg).unwrap();
            assert_eq!(key.get("param"), Some(fdb5), "{number}.{table}");
        }
    }
}

#[cfg(test)]
mod assertion_tests {
    use super::*;

    /// Found by the torture run: a damaged GRIB 1 message whose dates disagree made ecCodes
    /// `abort()` (assertion `gribForecastMonth == fcmonth`) while its mars keys were read, which
    /// killed `fieldstore write` and a server archiving it. It is an error naming the assertion.
    #[test]
    fn an_eccodes_assertion_is_an_error_not_an_abort() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fieldstore-cli/tests/torture/found/sigabrt-g1forecastmonth.grib"
        );
        let msg = std::fs::read(path).unwrap();
        let e = mars_keys(&msg).unwrap_err().to_string();
        assert!(
            e.contains("inconsistent") && e.contains("forecastmonth"),
            "{e}"
        );
        // The thread's record is cleared: the next message is judged on its own.
        assert!(super::super::log::take_assertion().is_none());
    }
}
