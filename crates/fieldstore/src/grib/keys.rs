//! MARS keys of a GRIB message, read through ecCodes exactly as FDB5 does (namespace `mars`).

use std::ffi::{CStr, CString};
use std::sync::atomic::{AtomicBool, Ordering};

use super::error::GribError;
use super::ffi;
use super::handle::Handle;
use crate::model::Key;

/// The MARS keys of one framed message, in ecCodes' order, values as strings. Never copies the
/// message; safe to call from many threads at once (ecCodes is thread-safe per handle).
///
/// The native reader answers when it is sure of ecCodes' answer (the common operational
/// messages, at a fraction of the cost); every other message goes to ecCodes.
pub fn mars_keys(message: &[u8]) -> Result<Key, GribError> {
    match super::native::mars::mars_keys(message) {
        Ok(key) => {
            KEYED_NATIVELY.store(true, Ordering::Relaxed);
            Ok(key)
        }
        Err(_) => eccodes_mars_keys(message),
    }
}

/// The MARS keys of one framed message, always through ecCodes (what the native reader is
/// compared with).
pub fn eccodes_mars_keys(message: &[u8]) -> Result<Key, GribError> {
    // ecCodes reads some of a message's lists while opening it, trusting their lengths: its
    // layout is checked from the bytes first, as for decoding.
    if let Some((_, _, first)) = super::framing::split_slice(message, "data")?.first() {
        super::sections::check_sections(first)?;
    }
    mars_keys_of(&Handle::from_message(message)?)
}

/// Set once ecCodes has read any message's MARS keys in this process: from then on, what the
/// process files depends on which ecCodes it loaded (versions disagree on a few keys), and its
/// flushes check that against the store's record (`Catalogue::check_keys_release`).
static KEYED_BY_ECCODES: AtomicBool = AtomicBool::new(false);

/// Whether ecCodes (not the native reader alone) has read MARS keys in this process.
pub fn keys_read_by_eccodes() -> bool {
    KEYED_BY_ECCODES.load(Ordering::Relaxed)
}

/// Set once the native reader has read any message's MARS keys in this process: what it files
/// then depends on the version of the tables this fieldstore carries.
static KEYED_NATIVELY: AtomicBool = AtomicBool::new(false);

/// Whether the native reader has read MARS keys in this process.
pub fn keys_read_natively() -> bool {
    KEYED_NATIVELY.load(Ordering::Relaxed)
}

/// The MARS keys of an open handle.
pub(crate) fn mars_keys_of(h: &Handle<'_>) -> Result<Key, GribError> {
    KEYED_BY_ECCODES.store(true, Ordering::Relaxed);
    check_time_unit(h)?;
    super::log::guarded(|| mars_keys_unguarded(h))
}

/// GRIB 1 units of time ecCodes can convert (WMO code table 4): 0–7, 10–15 and 254.
fn is_grib1_time_unit(unit: i64) -> bool {
    matches!(unit, 0..=7 | 10..=15 | 254)
}

/// Refuses a GRIB 1 unit of time ecCodes has no entry for: its step conversion indexes a table
/// with it, read a 0 past its end and divided by it (SIGFPE in `grib_g1_step_get_steps`,
/// killing `fieldstore write`, and a server sent the message without a key; found by fuzzing).
/// The octet itself is read as it is, without conversion.
pub(crate) fn check_time_unit(h: &Handle<'_>) -> Result<(), GribError> {
    if h.get_long("edition")? != 1 {
        return Ok(());
    }
    match h.get_long("indicatorOfUnitOfTimeRange") {
        Ok(u) if !is_grib1_time_unit(u) => Err(GribError::Decode(format!(
            "indicatorOfUnitOfTimeRange={u} is no unit of time (GRIB 1 code table 4): the \
             product definition is corrupt"
        ))),
        _ => Ok(()),
    }
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

/// The names of the keys of a namespace, in ecCodes' order.
pub(crate) fn namespace_names(h: &Handle<'_>, namespace: &str) -> Result<Vec<String>, GribError> {
    let ns = CString::new(namespace).map_err(|_| GribError::EcCodes("namespace".into()))?;
    // SAFETY: valid handle and namespace string.
    let it =
        unsafe { ffi::codes_keys_iterator_new(h.raw(), ffi::KEYS_ITERATOR_ALL_KEYS, ns.as_ptr()) };
    if it.is_null() {
        return Err(GribError::Decode(format!(
            "cannot iterate the {namespace} namespace"
        )));
    }
    let mut names = Vec::new();
    // SAFETY: `it` stays valid until deleted below.
    while unsafe { ffi::codes_keys_iterator_next(it) } != 0 {
        // SAFETY: the name pointer is valid until the next iteration.
        let name_ptr = unsafe { ffi::codes_keys_iterator_get_name(it) };
        if !name_ptr.is_null() {
            // SAFETY: non-null NUL-terminated string owned by ecCodes.
            names.push(
                unsafe { CStr::from_ptr(name_ptr) }
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
    // SAFETY: created above, deleted once.
    unsafe { ffi::codes_keys_iterator_delete(it) };
    Ok(names)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Regression: every unit of time outside the table, in a GRIB 1 message fuzzing found,
    /// is an error naming it; 21 of them died of SIGFPE before.
    #[test]
    fn a_grib1_unit_of_time_outside_the_table_is_an_error_not_sigfpe() {
        let mut m =
            include_bytes!("../../tests/data/damaged-grib/grib1-time-unit-31.grib").to_vec();
        for unit in 0..=255u8 {
            m[25] = unit;
            let r = mars_keys(&m);
            if is_grib1_time_unit(i64::from(unit)) {
                continue;
            }
            let e = r.unwrap_err().to_string();
            assert!(
                e.contains(&format!(
                    "indicatorOfUnitOfTimeRange={unit} is no unit of time"
                )),
                "{unit}: {e}"
            );
        }
    }

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
