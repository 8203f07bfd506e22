//! Parameter short names (`t`, `2t`, `10v`) to paramIds, through ecCodes' own parameter database
//! rather than a hand-copied table.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use super::error::GribError;
use super::handle::Handle;

fn cache() -> &'static Mutex<HashMap<String, Option<String>>> {
    static CACHE: OnceLock<Mutex<HashMap<String, Option<String>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The paramId of a short name, `None` when ecCodes knows no such name. Tries GRIB2 with ECMWF's
/// local definition first, then GRIB1 (some ECMWF parameters exist only there).
///
/// `number.table` (GRIB1 notation, `112.1`) gives the paramId ecCodes assigns that GRIB1 parameter,
/// as archived fields get it (see `keys::mars_keys`).
pub fn param_id(name: &str) -> Result<Option<String>, GribError> {
    if !plausible(name) {
        return Ok(None);
    }
    let name = name.to_ascii_lowercase();
    if let Some(id) = well_known(&name) {
        return Ok(Some(id.to_string()));
    }
    if let Ok(c) = cache().lock() {
        if let Some(hit) = c.get(&name) {
            return Ok(hit.clone());
        }
    }
    let mut found = None;
    if let Some((number, table)) = name.split_once('.') {
        // One byte each in GRIB1; ecCodes answers paramId 0 for a pair it does not know.
        if let (Ok(number), Ok(table)) = (number.parse::<u8>(), table.parse::<u8>()) {
            let mut h = Handle::from_sample("GRIB1")?;
            if h.set_long("table2Version", i64::from(table)).is_ok()
                && h.set_long("indicatorOfParameter", i64::from(number))
                    .is_ok()
            {
                let id = h.get_long("paramId")?;
                found = (id > 0).then(|| id.to_string());
            }
        }
    }
    for sample in ["GRIB2", "GRIB1"] {
        if found.is_some() {
            break;
        }
        let mut h = Handle::from_sample(sample)?;
        if sample == "GRIB2" {
            // ECMWF's local parameters need the local section.
            let _ = h.set_long("setLocalDefinition", 1);
        }
        if h.set_string("shortName", &name).is_err() {
            continue;
        }
        let id = h.get_long("paramId")?;
        // ecCodes falls back to "unknown" (paramId 0) rather than failing for some names.
        if id > 0
            && h.get_string(c"shortName")
                .is_ok_and(|s| s.eq_ignore_ascii_case(&name))
        {
            found = Some(id.to_string());
            break;
        }
    }
    if let Ok(mut c) = cache().lock() {
        c.insert(name, found.clone());
    }
    Ok(found)
}

/// Whether a name may be one of ecCodes' short names (`2t`, `10fg6`, `avg_2t`, `112.1`): short
/// ASCII words. Nothing else reaches ecCodes: it crashes (SIGSEGV in its name lookup) on some
/// strings, non-ASCII ones among them, and a request's values come from anyone.
fn plausible(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
}

/// A resolver for [`crate::model::types::Context`].
/// The most used ECMWF parameters, whose paramIds every ecCodes version gives alike (the test
/// below checks each against the ecCodes loaded; 2.28 and 2.50 checked by hand with grib_set):
/// a request naming them (`param=t`) is resolved without opening ecCodes, so that reading and
/// listing never need it (docs/eccodes.md). Not `vo`, `gh` or `tp`: ecCodes' GRIB2 lookup, the
/// one `param_id` uses, gives 262503, 228002 and none for them.
const WELL_KNOWN: [(&str, u32); 16] = [
    ("z", 129),
    ("t", 130),
    ("u", 131),
    ("v", 132),
    ("q", 133),
    ("sp", 134),
    ("w", 135),
    ("msl", 151),
    ("d", 155),
    ("r", 157),
    ("tcc", 164),
    ("10u", 165),
    ("10v", 166),
    ("2t", 167),
    ("2d", 168),
    ("lsm", 172),
];

fn well_known(name: &str) -> Option<u32> {
    WELL_KNOWN
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, id)| *id)
}

pub fn resolver(name: &str) -> Option<String> {
    param_id(name).ok().flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The built-in names agree with ecCodes' own lookup (the path every other name takes).
    #[test]
    fn well_known_names_are_what_eccodes_says() {
        let mut wrong = Vec::new();
        for (name, id) in WELL_KNOWN {
            let mut h = Handle::from_sample("GRIB2").unwrap();
            let _ = h.set_long("setLocalDefinition", 1);
            h.set_string("shortName", name).unwrap();
            let got = h.get_long("paramId").unwrap();
            if got != i64::from(id) {
                wrong.push(format!("{name}: table {id}, ecCodes {got}"));
            }
        }
        assert!(wrong.is_empty(), "{wrong:?}");
        assert_eq!(param_id("T").unwrap(), Some("130".into()));
    }

    /// Regression: `param=é` (and other non-ASCII names) crashed the process with SIGSEGV inside
    /// ecCodes' short-name lookup; such names are unknown without asking ecCodes.
    #[test]
    fn names_eccodes_cannot_hold_are_unknown_without_asking_it() {
        for name in ["é", "ü", "2t\u{301}", "", "a b", "t;u", &"x".repeat(65)] {
            assert_eq!(param_id(name).unwrap(), None, "{name:?}");
        }
        assert_eq!(param_id("2t").unwrap().as_deref(), Some("167"));
    }

    #[test]
    fn names_resolve_through_eccodes() {
        for (n, id) in [
            ("t", "130"),
            ("2t", "167"),
            ("10v", "166"),
            ("msl", "151"),
            ("swh", "140229"),
            ("T", "130"),
        ] {
            assert_eq!(param_id(n).unwrap().as_deref(), Some(id), "{n}");
        }
        assert_eq!(param_id("nosuchparam").unwrap(), None);
        // Regression: pairs ecCodes does not know were paramId 0, a parameter that is none.
        for n in ["0.0", "255.255", "1.9223372036854775807", "300.1"] {
            assert_eq!(param_id(n).unwrap(), None, "{n}");
        }
        for (n, id) in [("112.1", "3112"), ("11.2", "130"), ("229.140", "140229")] {
            assert_eq!(param_id(n).unwrap().as_deref(), Some(id), "{n}");
        }
    }
}
