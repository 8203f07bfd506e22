//! Decoding one GRIB message with ecCodes for numerical use: values (missing points as NaN), the
//! latitude and longitude of every point, any key by name, a grid summary. Values can go straight
//! into a caller's buffer so that Python fills a numpy array without a copy.
//!
//! ecCodes (Debian's build has `ECCODES_OMP_THREADS`) is thread-safe across handles; a [`Decoded`]
//! owns one handle and is `Send`, not `Sync`.

use std::ffi::CString;
use std::os::raw::{c_int, c_long};
use std::sync::Arc;

use super::error::GribError;
use super::ffi;
use super::framing::split_slice;
use super::handle::{cstr, error_text, Handle};
use super::sections::{self, check_sections};
use crate::model::Key;

/// Written by ecCodes where the bitmap (or complex packing) says a point is missing, then turned
/// into NaN. Far outside what any GRIB packing other than IEEE could encode.
const MISSING_SENTINEL: f64 = -1.0e300;

/// More points than any real field has (ECMWF's finest planned grid, O8000, has 256 million):
/// a header announcing more is corrupt, and ecCodes aborts the process when an allocation fails.
const MAX_POINTS: i64 = 1 << 28;

/// Gaussian numbers beyond any real grid: ecCodes allocates 2N latitudes before checking.
pub(super) const MAX_GAUSSIAN_N: i64 = 16_000;

/// A key's value in its native ecCodes type; arrays when ecCodes holds more than one element.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyValue {
    Long(i64),
    Double(f64),
    String(String),
    Longs(Vec<i64>),
    Doubles(Vec<f64>),
    Bytes(Vec<u8>),
}

/// Keys ecCodes computes from a Gaussian grid's pl, asserting it is not empty.
const PL_DERIVED: [&str; 3] = ["isOctahedral", "gaussianGridName", "gridName"];

/// Keys ecCodes computes by decoding the values or the bitmap: refused when the message's data
/// is damaged (see [`sections::data_fault`]).
const VALUES_DERIVED: [&str; 14] = [
    "values",
    "codedValues",
    "bitmap",
    "numberOfMissing",
    "numberOfMissingValues",
    "unpackedError",
    "packingError",
    "maximum",
    "minimum",
    "average",
    "standardDeviation",
    "skewness",
    "kurtosis",
    "isConstant",
];

/// The keys [`Decoded::grid`] reports, where the message defines them and they are not missing.
pub const GRID_KEYS: &[&str] = &[
    "gridType",
    "gridName",
    "isOctahedral",
    "numberOfDataPoints",
    "numberOfValues",
    "numberOfMissing",
    "Ni",
    "Nj",
    "N",
    "Nx",
    "Ny",
    "pl",
    "latitudeOfFirstGridPointInDegrees",
    "longitudeOfFirstGridPointInDegrees",
    "latitudeOfLastGridPointInDegrees",
    "longitudeOfLastGridPointInDegrees",
    "iDirectionIncrementInDegrees",
    "jDirectionIncrementInDegrees",
    "iScansNegatively",
    "jScansPositively",
    "jPointsAreConsecutive",
    "latitudeOfSouthernPoleInDegrees",
    "longitudeOfSouthernPoleInDegrees",
    "angleOfRotationInDegrees",
    "LaDInDegrees",
    "LoVInDegrees",
    "Latin1InDegrees",
    "Latin2InDegrees",
    "DxInMetres",
    "DyInMetres",
    "J",
    "K",
    "M",
    "shapeOfTheEarth",
    "radius",
];

/// One GRIB message opened by ecCodes, borrowing its bytes (no copy).
pub struct Decoded<'a> {
    handle: Handle<'a>,
    bytes: &'a [u8],
    /// False when ecCodes refused the sentinel: missing points are then found by `missingValue`.
    sentinel: bool,
    /// Why the values and bitmap cannot be decoded safely, found once when opened: the message's
    /// keys stay readable.
    data_fault: Option<String>,
}

impl<'a> Decoded<'a> {
    /// Opens exactly one GRIB message (zero padding after it is allowed). The framing is checked
    /// first, because ecCodes hands back a handle for garbage.
    pub fn new(data: &'a [u8]) -> Result<Decoded<'a>, GribError> {
        let framed = split_slice(data, "data")?;
        let bytes = match framed.as_slice() {
            [(_, _, m)] => *m,
            other => return Err(GribError::NotOneMessage { count: other.len() }),
        };
        let sections = check_sections(bytes)?;
        let handle = Handle::from_message(bytes)?;
        // `missingValue` is transient: setting it never writes into the borrowed bytes.
        let key = cstr("missingValue")?;
        // SAFETY: valid handle and C string.
        let rc = unsafe { ffi::codes_set_double(handle.raw(), key.as_ptr(), MISSING_SENTINEL) };
        let mut d = Decoded {
            handle,
            bytes,
            sentinel: false,
            data_fault: None,
        };
        d.sentinel = rc == 0 && d.double("missingValue").ok() == Some(MISSING_SENTINEL);
        // Touch a key every message has, so a header ecCodes cannot parse fails here.
        d.string("gridType")?;
        // A section shorter than its template makes ecCodes read its fields from the next
        // sections (and crash in its iterators): its layout must be the bytes' layout.
        for &(num, offset) in &sections {
            if let Some(at) = d.present_long(&format!("offsetSection{num}")) {
                if at as u64 != offset as u64 {
                    return Err(GribError::Decode(format!(
                        "section {num} is at offset {offset}, ecCodes reads it at {at}: the message's sections are corrupt"
                    )));
                }
            }
        }
        d.check_counts()?;
        super::keys::check_time_unit(&d.handle)?;
        let points = d.present_long("numberOfDataPoints");
        // A packing ecCodes cannot name (a damaged template number) still gets a decoder,
        // which read past the message (SIGSEGV, a bi-Fourier field's values).
        let packing = d.string("packingType").unwrap_or_default();
        let unknown_packing = (packing == "unknown").then(|| {
            format!(
                "ecCodes does not know the packing (template {:?})",
                d.present_long("dataRepresentationTemplateNumber")
            )
        });
        d.data_fault = unknown_packing.or_else(|| d.spectral_fault()).or_else(|| {
            // ecCodes decodes the values-derived keys into arrays of that many points, and goes
            // on (SIGSEGV) when the allocation fails.
            if let Some(p) = points.filter(|p| !(0..=MAX_POINTS).contains(p)) {
                return Some(format!("{p} points announced: more than any real field"));
            }
            sections::data_fault(
                bytes,
                &sections,
                points,
                d.present_long("numberOfCodedValues"),
            )
        });
        // What the checks above cannot see from the bytes (a GRIB 1 field on a predefined grid,
        // without section 2, whose bitmap ecCodes sizes from the header): ecCodes' own count of
        // values must be the point count, or its bitmap decoding writes past its array (heap
        // corruption, found by fuzzing).
        if d.data_fault.is_none() {
            if let (Some(p), Ok(v)) = (points, d.size("values")) {
                if v as u64 != p as u64 {
                    d.data_fault =
                        Some(format!("ecCodes counts {} values for {p} points", v as i64));
                }
            }
        }
        Ok(d)
    }

    /// The message's bytes, `GRIB` to `7777`.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The MARS keys, as the store files the message.
    pub fn mars_keys(&self) -> Result<Key, GribError> {
        super::keys::mars_keys_of(&self.handle)
    }

    /// How many values `values` gives: every point of the grid, missing ones included (for
    /// spherical harmonics, the coefficients).
    pub fn number_of_values(&self) -> Result<usize, GribError> {
        super::log::guarded(|| self.number_of_values_unguarded())
    }

    fn number_of_values_unguarded(&self) -> Result<usize, GribError> {
        self.data_sound()?;
        let n = self.size("values")?;
        // ecCodes allocates the coded values before unpacking them, and aborts when that fails:
        // a damaged header announced 4261501702 of them for 88838 points.
        if let Some(coded) = self.present_long("numberOfCodedValues") {
            if !(0..=MAX_POINTS).contains(&coded) {
                return Err(GribError::Decode(format!(
                    "{coded} coded values announced: more than any real field, the header is corrupt"
                )));
            }
        }
        if n as u64 > MAX_POINTS as u64 {
            return Err(GribError::Decode(format!(
                "{n} values announced: more than any real field, the header is corrupt"
            )));
        }
        Ok(n)
    }

    /// The values, missing points as NaN.
    pub fn values(&self) -> Result<Vec<f64>, GribError> {
        let mut v = zeroed(self.number_of_values()?)?;
        self.values_into(&mut v)?;
        Ok(v)
    }

    /// Decodes into `out`, which must hold exactly [`Self::number_of_values`] values.
    pub fn values_into(&self, out: &mut [f64]) -> Result<(), GribError> {
        super::log::guarded(|| self.values_into_unguarded(out))
    }

    fn values_into_unguarded(&self, out: &mut [f64]) -> Result<(), GribError> {
        let n = self.number_of_values()?;
        self.doubles_into("values", n, out)?;
        let marker = if self.sentinel {
            Some(MISSING_SENTINEL)
        } else if self.long("bitmapPresent").unwrap_or(0) != 0 {
            self.double("missingValue").ok()
        } else {
            None
        };
        if let Some(m) = marker {
            for v in out.iter_mut().filter(|v| **v == m) {
                *v = f64::NAN;
            }
        }
        Ok(())
    }

    /// How many points `latitudes`/`longitudes` give, or why the grid has none.
    pub fn number_of_points(&self) -> Result<usize, GribError> {
        super::log::guarded(|| self.number_of_points_unguarded())
    }

    fn number_of_points_unguarded(&self) -> Result<usize, GribError> {
        // ecCodes' iterators decode the values too (a SIGSEGV in them, from `latitudes`).
        self.data_sound()?;
        self.check_geometry()?;
        self.size("latitudes").map_err(|e| self.no_geometry(e))
    }

    /// The latitude of every point, in the order of the values.
    pub fn latitudes(&self) -> Result<Vec<f64>, GribError> {
        let mut v = zeroed(self.number_of_points()?)?;
        self.latitudes_into(&mut v)?;
        Ok(v)
    }

    /// The longitude of every point, in the order of the values.
    pub fn longitudes(&self) -> Result<Vec<f64>, GribError> {
        let mut v = zeroed(self.number_of_points()?)?;
        self.longitudes_into(&mut v)?;
        Ok(v)
    }

    /// Fills `out` (exactly [`Self::number_of_points`] long) with latitudes.
    pub fn latitudes_into(&self, out: &mut [f64]) -> Result<(), GribError> {
        self.coordinates_into(out, true)
    }

    /// Fills `out` (exactly [`Self::number_of_points`] long) with longitudes.
    pub fn longitudes_into(&self, out: &mut [f64]) -> Result<(), GribError> {
        self.coordinates_into(out, false)
    }

    fn coordinates_into(&self, out: &mut [f64], latitudes: bool) -> Result<(), GribError> {
        super::log::guarded(|| self.coordinates_into_unguarded(out, latitudes))
    }

    fn coordinates_into_unguarded(
        &self,
        out: &mut [f64],
        latitudes: bool,
    ) -> Result<(), GribError> {
        let n = self.number_of_points()?;
        let key = if latitudes { "latitudes" } else { "longitudes" };
        self.doubles_into(key, n, out)
            .map_err(|e| self.no_geometry(e))?;
        if let Some(pole) = self.rotation_left_to_us()? {
            let other = if latitudes { "longitudes" } else { "latitudes" };
            let mut o = zeroed(n)?;
            self.doubles_into(other, n, &mut o)
                .map_err(|e| self.no_geometry(e))?;
            for (x, y) in out.iter_mut().zip(&o) {
                let (lat, lon) = if latitudes { (*x, *y) } else { (*y, *x) };
                let (lat, lon) = unrotate(lat, lon, pole);
                *x = if latitudes { lat } else { lon };
            }
        }
        Ok(())
    }

    /// The rotation (south pole latitude, longitude, angle) when ecCodes gives rotated
    /// coordinates: its reduced Gaussian iterator unrotates only from 2.35 (ECC-1781).
    fn rotation_left_to_us(&self) -> Result<Option<(f64, f64, f64)>, GribError> {
        // SAFETY: a pure function of the library.
        if unsafe { ffi::codes_get_api_version() } >= 23500
            || self.string("gridType")? != "reduced_rotated_gg"
        {
            return Ok(None);
        }
        Ok(Some((
            self.double("latitudeOfSouthernPoleInDegrees")?,
            self.double("longitudeOfSouthernPoleInDegrees")?,
            self.double("angleOfRotationInDegrees").unwrap_or(0.0),
        )))
    }

    /// Any key by name, in its native type; `None` when the message does not define it. A key
    /// coded as missing gives what ecCodes gives for it (e.g. `Ni` of a reduced grid is
    /// 2147483647), as the `eccodes` Python package does.
    pub fn get(&self, key: &str) -> Result<Option<KeyValue>, GribError> {
        super::log::guarded(|| self.get_unguarded(key))
    }

    fn get_unguarded(&self, key: &str) -> Result<Option<KeyValue>, GribError> {
        let k = cstr(key)?;
        // Decoding a damaged message's values or bitmap reads past its sections (SIGSEGV).
        if VALUES_DERIVED.contains(&key) {
            self.data_sound()?;
        }
        // ecCodes 2.28 derives these from pl and asserts (aborts) when a Gaussian grid's pl is
        // there but empty (Nj=0 in a damaged header).
        if PL_DERIVED.contains(&key) && self.defines("pl") && self.size("pl").unwrap_or(0) == 0 {
            return Err(GribError::Decode(format!(
                "{key}: the grid has a pl of no rows: the grid description is corrupt"
            )));
        }
        // SAFETY: valid handle and C string.
        if unsafe { ffi::codes_is_defined(self.handle.raw(), k.as_ptr()) } == 0 {
            return Ok(None);
        }
        let mut t: c_int = 0;
        // SAFETY: valid handle, C string and out-parameter.
        let rc = unsafe { ffi::codes_get_native_type(self.handle.raw(), k.as_ptr(), &mut t) };
        if rc == ffi::NOT_FOUND {
            return Ok(None);
        }
        if rc != 0 {
            return Err(key_error(key, rc));
        }
        let size = self.size(key).unwrap_or(1);
        let value = match t {
            ffi::TYPE_LONG if size > 1 => KeyValue::Longs(self.longs(&k, key, size)?),
            ffi::TYPE_LONG => KeyValue::Long(self.long(key)?),
            ffi::TYPE_DOUBLE if size > 1 => {
                let mut v = zeroed(size)?;
                self.doubles_into(key, size, &mut v)?;
                KeyValue::Doubles(v)
            }
            ffi::TYPE_DOUBLE => KeyValue::Double(self.double(key)?),
            ffi::TYPE_BYTES => KeyValue::Bytes(self.bytes_of(&k, key)?),
            _ => KeyValue::String(self.string(key)?),
        };
        Ok(Some(value))
    }

    /// The names of the keys in an ecCodes namespace (`mars`, `parameter`...), in ecCodes'
    /// order; read each with [`Self::get`] for its native type.
    pub fn namespace_keys(&self, namespace: &str) -> Result<Vec<String>, GribError> {
        super::keys::check_time_unit(&self.handle)?;
        super::log::guarded(|| super::keys::namespace_names(&self.handle, namespace))
    }

    /// The geometry in a few keys ([`GRID_KEYS`] that the message defines and does not code as
    /// missing), in that order.
    pub fn grid(&self) -> Result<Vec<(&'static str, KeyValue)>, GribError> {
        super::log::guarded(|| self.grid_unguarded())
    }

    fn grid_unguarded(&self) -> Result<Vec<(&'static str, KeyValue)>, GribError> {
        let mut out = Vec::new();
        for key in GRID_KEYS {
            let k = cstr(key)?;
            let mut err: c_int = 0;
            // SAFETY: valid handle, C string and out-parameter.
            let missing = unsafe { ffi::codes_is_missing(self.handle.raw(), k.as_ptr(), &mut err) };
            if err == 0 && missing == 1 {
                continue;
            }
            if let Some(v) = self.get(key)? {
                out.push((*key, v));
            }
        }
        Ok(out)
    }

    /// Refuses what ecCodes has no points for, and dimensions a corrupt header may announce that
    /// would make ecCodes' iterators allocate (and abort on failure) before checking them.
    fn check_geometry(&self) -> Result<(), GribError> {
        let grid_type = self.string("gridType")?;
        if grid_type == "sh" {
            return Err(GribError::NoGeometry {
                grid_type,
                reason: "spherical harmonics are coefficients, not grid points".into(),
            });
        }
        // A grid ecCodes cannot name (`unknown`, `unknown_PLPresent`: a damaged flags octet) may
        // still get an iterator, but none of the checks below know what it reads: it aborted on
        // rows of 0 points.
        if grid_type.starts_with("unknown") {
            return Err(GribError::NoGeometry {
                grid_type,
                reason: "ecCodes does not recognise the grid description".into(),
            });
        }
        let points = self.long("numberOfDataPoints")?;
        let corrupt =
            |what: String| GribError::Decode(format!("{what}: the grid description is corrupt"));
        if !(0..=MAX_POINTS).contains(&points) {
            return Err(corrupt(format!("numberOfDataPoints={points}")));
        }
        // ecCodes' iterators check this too, but 2.28 can crash on the next call after failing.
        let values = self.size("values")?;
        if values as u64 != points as u64 {
            return Err(corrupt(format!("{values} values for {points} points")));
        }
        for key in [
            "latitudeOfFirstGridPointInDegrees",
            "latitudeOfLastGridPointInDegrees",
        ] {
            if let Some(KeyValue::Double(lat)) = self.get(key)? {
                if !(-90.000_001..=90.000_001).contains(&lat) {
                    return Err(corrupt(format!("{key}={lat}")));
                }
            }
        }
        // ecCodes 2.28 crashes on a regular grid of 0 rows, among others.
        for (a, b) in [("Ni", "Nj"), ("Nx", "Ny")] {
            let (x, y) = (self.present_long(a), self.present_long(b));
            for (key, v) in [(a, x), (b, y)] {
                if let Some(v) = v {
                    if !(1..=points).contains(&v) {
                        return Err(corrupt(format!("{key}={v} for {points} points")));
                    }
                }
            }
            if let (Some(x), Some(y)) = (x, y) {
                if x * y != points {
                    return Err(corrupt(format!("{a}={x} by {b}={y} for {points} points")));
                }
            }
        }
        if let Some(n) = self.present_long("N") {
            if !(1..=MAX_GAUSSIAN_N).contains(&n) {
                return Err(corrupt(format!("N={n}")));
            }
            // A Gaussian grid has 2N latitudes: ecCodes indexes them by Nj unchecked.
            if let Some(nj) = self
                .present_long("Nj")
                .filter(|_| grid_type.contains("_gg"))
            {
                if nj > 2 * n {
                    return Err(corrupt(format!("Nj={nj} rows for N={n}")));
                }
                if !grid_type.starts_with("reduced_") {
                    self.check_gaussian_rows(n, nj)?;
                }
            }
        }
        // GRIB2 angles in other units than micro-degrees: a corrupt basic angle overflows the
        // fractions of ecCodes' reduced iterator, which then asserts (and aborts).
        if let Some(basic) = self.present_long("basicAngleOfTheInitialProductionDomain") {
            let sub = self.present_long("subdivisionsOfBasicAngle");
            if basic != 0 && (basic > 360 || !matches!(sub, Some(1..=1_000_000_000))) {
                return Err(corrupt(format!(
                    "basicAngleOfTheInitialProductionDomain={basic}, subdivisionsOfBasicAngle={sub:?}"
                )));
            }
        }
        // Reduced grids' iterators read pl unchecked: it must be there, one entry a row; and
        // reduced_ll's writes sum(pl) points into an array of numberOfDataPoints.
        if grid_type.starts_with("reduced_") {
            let pl = match self.get("pl")? {
                Some(KeyValue::Longs(pl)) => pl,
                Some(KeyValue::Long(p)) => vec![p],
                _ => return Err(corrupt("a reduced grid without pl".into())),
            };
            if self.present_long("Nj") != Some(pl.len() as i64) {
                return Err(corrupt(format!(
                    "{} pl entries for Nj={:?}",
                    pl.len(),
                    self.present_long("Nj")
                )));
            }
            let sum: i64 = pl.iter().map(|p| (*p).clamp(-1, MAX_POINTS)).sum();
            if pl.iter().any(|p| *p < 0) || (grid_type == "reduced_ll" && sum != points) {
                return Err(corrupt(format!("pl adds up to {sum} for {points} points")));
            }
        }
        // A Gaussian row of fewer than 2 points makes ecCodes' reduced iterator assert (and abort);
        // checked whatever the grid type says when there is a pl.
        if grid_type.contains("_gg") || !grid_type.contains("_ll") {
            if let Some(KeyValue::Longs(pl)) = self.get("pl")? {
                if let Some(i) = pl.iter().position(|p| *p < 2) {
                    return Err(corrupt(format!("pl[{i}]={}", pl[i])));
                }
                if let Some(nj) = self.present_long("Nj") {
                    if nj as u64 != pl.len() as u64 {
                        return Err(corrupt(format!("{} pl entries for Nj={nj}", pl.len())));
                    }
                }
            }
        }
        Ok(())
    }

    /// ecCodes' regular Gaussian iterator reads Nj latitudes from the one nearest the first
    /// grid point's, unchecked: the first and last must be Nj rows apart.
    fn check_gaussian_rows(&self, n: i64, nj: i64) -> Result<(), GribError> {
        let mut lats = zeroed(2 * n as usize)?;
        // SAFETY: lats holds 2N doubles, as ecCodes writes for truncation N.
        let rc = unsafe { ffi::codes_get_gaussian_latitudes(n as c_long, lats.as_mut_ptr()) };
        if rc != 0 {
            return Err(key_error("gaussian latitudes", rc));
        }
        let nearest = |lat: f64| {
            lats.iter()
                .enumerate()
                .min_by(|a, b| (a.1 - lat).abs().total_cmp(&(b.1 - lat).abs()))
                .map(|(i, _)| i as i64)
                .unwrap_or(0)
        };
        let first = self.double("latitudeOfFirstGridPointInDegrees")?;
        let last = self.double("latitudeOfLastGridPointInDegrees")?;
        let (i, j) = (nearest(first), nearest(last));
        // ecCodes matches latitudes within 1e-3 degrees (GRIB1 codes millidegrees).
        let off = |lat: f64, k: i64| (lats[k as usize] - lat).abs() > 1.0e-3;
        if off(first, i) || off(last, j) {
            return Err(GribError::Decode(format!(
                "latitudes {first} to {last} are not rows of the N{n} Gaussian grid: the grid description is corrupt"
            )));
        }
        let rows = (i - j).abs() + 1;
        if rows != nj {
            return Err(GribError::Decode(format!(
                "latitudes {first} to {last} span {rows} rows of the N{n} Gaussian grid, Nj={nj}: the grid description is corrupt"
            )));
        }
        Ok(())
    }

    /// The counts ecCodes sizes the grid description's arrays by (`pl[Nj]`, `pv[NV]`) before it
    /// reads them, checked when the message is opened because every geometry key (even
    /// `numberOfDataPoints`) reads `pl`: a GRIB 1 `Nj` of -2 (sign and magnitude) made it
    /// allocate (size_t)-16 bytes, fail, and go on without the array (SIGSEGV); a count the
    /// section cannot hold is read past the message.
    fn check_counts(&self) -> Result<(), GribError> {
        let corrupt =
            |what: String| GribError::Decode(format!("{what}: the grid description is corrupt"));
        for key in ["Ni", "Nj", "Nx", "Ny", "N", "NV"] {
            if let Some(v) = self.present_long(key).filter(|v| *v < 0) {
                return Err(corrupt(format!("{key}={v}")));
            }
        }
        // ecCodes computes a Gaussian grid's 2N latitudes (in time growing as N squared) for
        // numberOfDataPoints of a sub-area: N=35327 took minutes.
        if let Some(n) = self.present_long("N").filter(|n| *n > MAX_GAUSSIAN_N) {
            return Err(corrupt(format!(
                "N={n}: more latitudes than any real Gaussian grid"
            )));
        }
        let edition = self.long("edition")?;
        // A GRIB 1 binary scale factor coded as missing (-32767) makes ecCodes read the data as
        // its "dummy field", whose count of values is the number of points, which it computes
        // from the count of values: numberOfDataPoints recursed until the stack overflowed
        // (SIGSEGV, found by fuzzing). No real field is scaled by 2^-32767.
        if edition == 1 && self.long("binaryScaleFactor").ok() == Some(-32767) {
            return Err(GribError::Decode(
                "binaryScaleFactor coded as missing (-32767): the data section is corrupt".into(),
            ));
        }
        let flag = |key: &str| self.present_long(key).unwrap_or(0) != 0;
        // GRIB 1 holds both lists in section 2; GRIB 2 pl in section 3, pv in section 4.
        let (pl_section, pv_section) = if edition == 1 { (2, 2) } else { (3, 4) };
        let length = |num: i64| {
            self.present_long(&format!("section{num}Length"))
                .unwrap_or(0)
        };
        let mut lists = Vec::new();
        if flag("PLPresent") {
            let width = if edition == 1 {
                2
            } else {
                self.present_long("numberOfOctectsForNumberOfPoints")
                    .unwrap_or(0)
            };
            // Nj coded as missing is still the count ecCodes uses.
            lists.push(("pl", "Nj", self.long("Nj").unwrap_or(0), width, pl_section));
        }
        if flag("PVPresent") {
            lists.push(("pv", "NV", self.long("NV").unwrap_or(0), 4, pv_section));
        }
        for (name, count_key, count, width, section) in &lists {
            let bytes = i128::from(*count) * i128::from(*width);
            let held = i128::from(length(*section));
            if *count < 0 || bytes > held {
                return Err(corrupt(format!(
                    "{name} of {count_key}={count} entries of {width} bytes in section {section} of {held} bytes"
                )));
            }
        }
        // ecCodes counts a Gaussian sub-area's points row by row from pl, asserting rows of at
        // least 2 points and going on (it never returned) past rows of 0 or 1.
        if lists.iter().any(|l| l.0 == "pl") && !self.string("gridType")?.contains("_ll") {
            let k = cstr("pl")?;
            let n = self.size("pl")?;
            let pl = self.longs(&k, "pl", n)?;
            if let Some(i) = pl.iter().position(|p| *p < 2) {
                return Err(corrupt(format!("pl[{i}]={}", pl[i])));
            }
        }
        Ok(())
    }

    /// ecCodes' spectral unpacking sizes its work by the truncation J, K, M, not by the count of
    /// values: only triangular truncations decode (others assert), and a damaged J of 620757055
    /// over 4160 values made it allocate gigabytes.
    fn spectral_fault(&self) -> Option<String> {
        if self.string("gridType").ok()? != "sh" {
            return None;
        }
        let jkm = ["J", "K", "M"].map(|k| self.present_long(k));
        let Some(j) = jkm[0].filter(|_| jkm.iter().all(|v| *v == jkm[0])) else {
            return Some(format!(
                "spectral truncation J, K, M = {jkm:?}: only triangular truncations decode"
            ));
        };
        let values = self.present_long("numberOfValues");
        let expected = (i128::from(j) + 1) * (i128::from(j) + 2);
        if values.map(i128::from) != Some(expected) {
            return Some(format!(
                "spectral truncation T{j} has {expected} coefficients, the header announces {values:?} values"
            ));
        }
        // Complex packing also unpacks a subset JS, KS, MS of the truncation, unpacked.
        let subset = ["JS", "KS", "MS"].map(|k| self.present_long(k));
        if let Some(js) = subset[0] {
            if subset.iter().any(|v| *v != subset[0]) || !(0..=j).contains(&js) {
                return Some(format!(
                    "spectral subset JS, KS, MS = {subset:?} of truncation T{j}"
                ));
            }
        }
        None
    }

    /// Refuses what ecCodes cannot decode safely: see [`sections::data_fault`].
    fn data_sound(&self) -> Result<(), GribError> {
        match &self.data_fault {
            Some(fault) => Err(GribError::Decode(format!(
                "{fault}: the message's data is corrupt"
            ))),
            None => Ok(()),
        }
    }

    fn defines(&self, key: &str) -> bool {
        // SAFETY: valid handle and C string.
        cstr(key)
            .is_ok_and(|k| unsafe { ffi::codes_is_defined(self.handle.raw(), k.as_ptr()) } != 0)
    }

    /// A long key the message defines and does not code as missing.
    fn present_long(&self, key: &str) -> Option<i64> {
        let k = cstr(key).ok()?;
        let mut err: c_int = 0;
        // SAFETY: valid handle, C string and out-parameter.
        let defined = unsafe { ffi::codes_is_defined(self.handle.raw(), k.as_ptr()) } != 0;
        // SAFETY: as above.
        let missing = defined
            && unsafe { ffi::codes_is_missing(self.handle.raw(), k.as_ptr(), &mut err) } == 1;
        if !defined || missing {
            return None;
        }
        self.long(key).ok()
    }

    fn no_geometry(&self, e: GribError) -> GribError {
        match e {
            GribError::Decode(reason) => GribError::NoGeometry {
                grid_type: self.string("gridType").unwrap_or_default(),
                reason,
            },
            e => e,
        }
    }

    fn size(&self, key: &str) -> Result<usize, GribError> {
        let k = cstr(key)?;
        let mut n = 0usize;
        // SAFETY: valid handle, C string and out-parameter.
        let rc = unsafe { ffi::codes_get_size(self.handle.raw(), k.as_ptr(), &mut n) };
        if rc != 0 {
            return Err(key_error(key, rc));
        }
        Ok(n)
    }

    fn doubles_into(&self, key: &str, n: usize, out: &mut [f64]) -> Result<(), GribError> {
        if out.len() != n {
            return Err(GribError::BufferSize {
                what: if key == "values" {
                    "values"
                } else {
                    "coordinates"
                },
                expected: n,
                got: out.len(),
            });
        }
        let k = cstr(key)?;
        let mut len = out.len();
        // SAFETY: out is writable for len doubles; ecCodes writes at most len.
        let rc = unsafe {
            ffi::codes_get_double_array(self.handle.raw(), k.as_ptr(), out.as_mut_ptr(), &mut len)
        };
        if rc != 0 {
            return Err(key_error(key, rc));
        }
        if len != n {
            return Err(GribError::Decode(format!(
                "{key}: ecCodes gave {len} values of the {n} announced"
            )));
        }
        Ok(())
    }

    #[allow(clippy::useless_conversion)] // c_long is i32 on Windows
    fn longs(&self, k: &CString, key: &str, n: usize) -> Result<Vec<i64>, GribError> {
        let mut v: Vec<c_long> = Vec::new();
        v.try_reserve_exact(n).map_err(|_| {
            GribError::Decode(format!(
                "{key}: cannot allocate {n} values: not enough memory"
            ))
        })?;
        v.resize(n, 0);
        let mut len = n;
        // SAFETY: v is writable for len longs.
        let rc = unsafe {
            ffi::codes_get_long_array(self.handle.raw(), k.as_ptr(), v.as_mut_ptr(), &mut len)
        };
        if rc != 0 {
            return Err(key_error(key, rc));
        }
        v.truncate(len);
        Ok(v.into_iter().map(i64::from).collect())
    }

    fn bytes_of(&self, k: &CString, key: &str) -> Result<Vec<u8>, GribError> {
        let mut n = 0usize;
        // SAFETY: valid handle, C string and out-parameter.
        let rc = unsafe { ffi::codes_get_length(self.handle.raw(), k.as_ptr(), &mut n) };
        if rc != 0 {
            return Err(key_error(key, rc));
        }
        let mut v = vec![0u8; n.max(1)];
        let mut len = v.len();
        // SAFETY: v is writable for len bytes.
        let rc = unsafe {
            ffi::codes_get_bytes(self.handle.raw(), k.as_ptr(), v.as_mut_ptr(), &mut len)
        };
        if rc != 0 {
            return Err(key_error(key, rc));
        }
        v.truncate(len);
        Ok(v)
    }

    #[allow(clippy::useless_conversion)] // c_long is i32 on Windows
    fn long(&self, key: &str) -> Result<i64, GribError> {
        let k = cstr(key)?;
        let mut v: c_long = 0;
        // SAFETY: valid handle, C string and out-parameter.
        let rc = unsafe { ffi::codes_get_long(self.handle.raw(), k.as_ptr(), &mut v) };
        if rc != 0 {
            return Err(key_error(key, rc));
        }
        Ok(i64::from(v))
    }

    fn double(&self, key: &str) -> Result<f64, GribError> {
        let k = cstr(key)?;
        let mut v = 0.0;
        // SAFETY: valid handle, C string and out-parameter.
        let rc = unsafe { ffi::codes_get_double(self.handle.raw(), k.as_ptr(), &mut v) };
        if rc != 0 {
            return Err(key_error(key, rc));
        }
        Ok(v)
    }

    /// A string of any length (`Handle::get_string` stops at 1 KiB).
    fn string(&self, key: &str) -> Result<String, GribError> {
        let k = cstr(key)?;
        let mut n = 0usize;
        // SAFETY: valid handle, C string and out-parameter.
        let rc = unsafe { ffi::codes_get_length(self.handle.raw(), k.as_ptr(), &mut n) };
        if rc != 0 {
            return Err(key_error(key, rc));
        }
        let mut buf = vec![0u8; n.max(64) + 1];
        let mut len = buf.len();
        // SAFETY: buf is writable for len bytes.
        let rc = unsafe {
            ffi::codes_get_string(
                self.handle.raw(),
                k.as_ptr(),
                buf.as_mut_ptr().cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return Err(key_error(key, rc));
        }
        buf.truncate(len.min(buf.len()));
        if let Some(nul) = buf.iter().position(|b| *b == 0) {
            buf.truncate(nul);
        }
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }
}

/// A [`Decoded`] that owns its bytes, for bindings that keep a message open across calls: opening
/// a handle costs about as much as decoding a small field, so it is done once.
pub struct OwnedDecoded {
    // Declared first, so dropped before the bytes its handle reads.
    decoded: Decoded<'static>,
    _bytes: Arc<[u8]>,
}

impl OwnedDecoded {
    /// Opens exactly one message, as [`Decoded::new`].
    pub fn new(bytes: Arc<[u8]>) -> Result<OwnedDecoded, GribError> {
        // SAFETY: the slice points into the Arc's allocation, which never moves and is freed only
        // after `decoded` (field order above; no method hands out the 'static lifetime).
        let view: &'static [u8] =
            unsafe { std::slice::from_raw_parts(bytes.as_ptr(), bytes.len()) };
        Ok(OwnedDecoded {
            decoded: Decoded::new(view)?,
            _bytes: bytes,
        })
    }

    /// The open message, borrowed no longer than `self`.
    pub fn get(&self) -> &Decoded<'_> {
        &self.decoded
    }
}

/// `n` zeros, or an error rather than an abort when memory is short.
fn zeroed(n: usize) -> Result<Vec<f64>, GribError> {
    let mut v = Vec::new();
    v.try_reserve_exact(n)
        .map_err(|_| GribError::Decode(format!("cannot allocate {n} values: not enough memory")))?;
    v.resize(n, 0.0);
    Ok(v)
}

/// Rotated to geographic coordinates, as ecCodes' `unrotate` computes them (down to its rounding
/// to 6 decimals in single precision), so results match newer ecCodes.
fn unrotate(lat: f64, lon: f64, (pole_lat, pole_lon, angle): (f64, f64, f64)) -> (f64, f64) {
    let (latr, lonr) = (lat.to_radians(), lon.to_radians());
    let (xd, yd, zd) = (lonr.cos() * latr.cos(), lonr.sin() * latr.cos(), latr.sin());
    let t = (-(90.0 + pole_lat)).to_radians();
    let o = (-pole_lon).to_radians();
    let (sin_t, cos_t, sin_o, cos_o) = (t.sin(), t.cos(), o.sin(), o.cos());
    let x = cos_t * cos_o * xd + sin_o * yd + sin_t * cos_o * zd;
    let y = -cos_t * sin_o * xd + cos_o * yd - sin_t * sin_o * zd;
    let z = (-sin_t * xd + cos_t * zd).clamp(-1.0, 1.0);
    let round6 = |v: f64| f64::from(((v * 1_000_000.0) as f32).round()) / 1_000_000.0;
    (
        round6(z.asin().to_degrees()),
        round6(y.atan2(x).to_degrees()) - angle,
    )
}

fn key_error(key: &str, rc: c_int) -> GribError {
    GribError::Decode(format!("key '{key}': {}", error_text(rc)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::process::Command;

    fn sample(name: &str) -> Handle<'static> {
        Handle::from_sample(name).unwrap()
    }

    /// `(lat, lon, value-or-None)` per point, as `grib_get_data` (libeccodes-tools) prints them.
    fn grib_get_data(msg: &[u8]) -> Vec<(f64, f64, Option<f64>)> {
        let mut f = tempfile::NamedTempFile::new().unwrap();
        f.write_all(msg).unwrap();
        let out = Command::new("grib_get_data")
            .args(["-m", "missing", "-L", "%.9f %.9f", "-F", "%.12g"])
            .arg(f.path())
            .output()
            .expect("grib_get_data (libeccodes-tools) runs");
        assert!(out.status.success(), "{out:?}");
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .skip(1)
            .map(|l| {
                let w: Vec<&str> = l.split_whitespace().collect();
                (
                    w[0].parse().unwrap(),
                    w[1].parse().unwrap(),
                    w[2].parse().ok(),
                )
            })
            .collect()
    }

    fn ramp(n: usize) -> Vec<f64> {
        (0..n).map(|i| 250.0 + (i % 97) as f64 * 0.5).collect()
    }

    /// A sample with known values set (16-bit packing keeps them within 0.01).
    fn with_values(name: &str) -> (Vec<u8>, Vec<f64>) {
        with_values_and(name, &[])
    }

    fn with_values_and(name: &str, keys: &[(&str, i64)]) -> (Vec<u8>, Vec<f64>) {
        let mut h = sample(name);
        for (k, v) in keys {
            h.set_long(k, *v).unwrap();
        }
        h.set_long("bitsPerValue", 16).unwrap();
        let n = h.get_long("numberOfDataPoints").unwrap() as usize;
        let v = ramp(n);
        h.set_doubles("values", &v).unwrap();
        (h.message().unwrap(), v)
    }

    fn assert_close(a: &[f64], b: &[f64], tol: f64, what: &str) {
        assert_eq!(a.len(), b.len(), "{what}: lengths");
        for (i, (x, y)) in a.iter().zip(b).enumerate() {
            assert!((x - y).abs() <= tol, "{what}[{i}]: {x} vs {y}");
        }
    }

    /// Values, latitudes and longitudes agree with `grib_get_data` point by point.
    fn agrees_with_grib_get_data(msg: &[u8], expect_values: Option<&[f64]>) {
        let d = Decoded::new(msg).unwrap();
        let (lat, lon, val) = (
            d.latitudes().unwrap(),
            d.longitudes().unwrap(),
            d.values().unwrap(),
        );
        let reference = grib_get_data(msg);
        assert_eq!(lat.len(), reference.len());
        assert_eq!(d.number_of_points().unwrap(), reference.len());
        let rlat: Vec<f64> = reference.iter().map(|r| r.0).collect();
        let rlon: Vec<f64> = reference.iter().map(|r| r.1).collect();
        assert_close(&lat, &rlat, 1e-8, "latitudes");
        assert_close(&lon, &rlon, 1e-8, "longitudes");
        for (i, (v, r)) in val.iter().zip(&reference).enumerate() {
            match r.2 {
                Some(r) => assert!(
                    (v - r).abs() <= 1e-6 * r.abs().max(1.0),
                    "value {i}: {v} vs {r}"
                ),
                None => assert!(v.is_nan(), "value {i} should be missing"),
            }
        }
        if let Some(e) = expect_values {
            assert_close(&val, e, 0.01, "values");
        }
    }

    #[test]
    fn regular_ll_values_and_points() {
        let (msg, v) = with_values("regular_ll_sfc_grib2");
        agrees_with_grib_get_data(&msg, Some(&v));
        let d = Decoded::new(&msg).unwrap();
        let (lat, lon) = (d.latitudes().unwrap(), d.longitudes().unwrap());
        // 16 x 31 from (60N, 0E), 2 degrees apart, rows north to south.
        assert_eq!(lat.len(), 16 * 31);
        assert_eq!((lat[0], lon[0]), (60.0, 0.0));
        assert_eq!((lat[1], lon[1]), (60.0, 2.0));
        assert_eq!((lat[16], lon[16]), (58.0, 0.0));
        let grid = d.grid().unwrap();
        let get = |k: &str| grid.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone());
        assert_eq!(get("gridType"), Some(KeyValue::String("regular_ll".into())));
        assert_eq!(get("Ni"), Some(KeyValue::Long(16)));
        assert_eq!(get("Nj"), Some(KeyValue::Long(31)));
        assert_eq!(
            get("iDirectionIncrementInDegrees"),
            Some(KeyValue::Double(2.0))
        );
        assert_eq!(get("pl"), None);
    }

    #[test]
    fn other_grids_agree_with_eccodes_tools() {
        for name in [
            "GRIB1",
            "regular_gg_sfc_grib2",
            "reduced_gg_pl_96_grib2",
            "rotated_ll_pl_grib1",
            "reduced_ll_sfc_grib2",
            "rotated_ll_sfc_grib2",
        ] {
            let (msg, v) = with_values(name);
            agrees_with_grib_get_data(&msg, Some(&v));
        }
        // As for lambert, rows south to north (see `lambert_conformal`).
        let (msg, v) = with_values_and("polar_stereographic_sfc_grib2", &[("jScansPositively", 1)]);
        agrees_with_grib_get_data(&msg, Some(&v));
        // ecCodes loses the values set on its GRIB1 Gaussian samples: these as they come.
        for name in ["regular_gg_pl_grib1", "reduced_gg_pl_32_grib1"] {
            agrees_with_grib_get_data(&sample(name).message().unwrap(), None);
        }
    }

    #[test]
    fn reduced_gaussian_has_pl_and_its_points() {
        let (msg, _) = with_values("reduced_gg_pl_32_grib2");
        let d = Decoded::new(&msg).unwrap();
        let Some(KeyValue::Longs(pl)) = d.get("pl").unwrap() else {
            panic!("pl is an array of longs")
        };
        assert_eq!(pl.len(), 64);
        let total: i64 = pl.iter().sum();
        assert_eq!(d.number_of_values().unwrap() as i64, total);
        let lon = d.longitudes().unwrap();
        // The first row has pl[0] points, 360/pl[0] degrees apart.
        assert!((lon[1] - 360.0 / pl[0] as f64).abs() < 1e-9);
        let grid = d.grid().unwrap();
        assert!(
            grid.iter().all(|(k, _)| *k != "Ni"),
            "Ni is missing: {grid:?}"
        );
        assert!(grid
            .iter()
            .any(|(k, v)| *k == "N" && *v == KeyValue::Long(32)));
    }

    #[test]
    fn octahedral_grid() {
        let n = 32i64;
        let half: Vec<i64> = (0..n).map(|i| 20 + 4 * i).collect();
        let pl: Vec<i64> = half.iter().chain(half.iter().rev()).copied().collect();
        let total: i64 = pl.iter().sum();
        let mut h = sample("reduced_gg_pl_32_grib2");
        h.set_longs("pl", &pl).unwrap();
        h.set_long("numberOfDataPoints", total).unwrap();
        h.set_long("bitsPerValue", 16).unwrap();
        let v = ramp(total as usize);
        h.set_doubles("values", &v).unwrap();
        let msg = h.message().unwrap();
        let d = Decoded::new(&msg).unwrap();
        assert_eq!(d.get("isOctahedral").unwrap(), Some(KeyValue::Long(1)));
        assert_eq!(d.number_of_points().unwrap(), total as usize);
        agrees_with_grib_get_data(&msg, Some(&v));
        let lon = d.longitudes().unwrap();
        assert!(
            (lon[1] - 18.0).abs() < 1e-9,
            "O32's first row has 20 points"
        );
    }

    #[test]
    fn lambert_conformal() {
        let mut h = sample("GRIB2");
        h.set_long("gridDefinitionTemplateNumber", 30).unwrap();
        // South to north, as limited-area models write it: ecCodes 2.28's lambert iterator
        // pairs points and values wrongly when rows run north to south (fixed in later versions).
        h.set_long("jScansPositively", 1).unwrap();
        for (k, v) in [
            ("Nx", 20),
            ("Ny", 15),
            ("DxInMetres", 20000),
            ("DyInMetres", 20000),
        ] {
            h.set_long(k, v).unwrap();
        }
        h.set_long("latitudeOfFirstGridPoint", 40_000_000).unwrap();
        h.set_long("longitudeOfFirstGridPoint", 350_000_000)
            .unwrap();
        h.set_long("LaD", 50_000_000).unwrap();
        h.set_long("LoV", 10_000_000).unwrap();
        h.set_long("Latin1", 50_000_000).unwrap();
        h.set_long("Latin2", 50_000_000).unwrap();
        h.set_long("bitsPerValue", 16).unwrap();
        let v = ramp(300);
        h.set_doubles("values", &v).unwrap();
        let msg = h.message().unwrap();
        let d = Decoded::new(&msg).unwrap();
        assert_eq!(
            d.get("gridType").unwrap(),
            Some(KeyValue::String("lambert".into()))
        );
        agrees_with_grib_get_data(&msg, Some(&v));
        let lat = d.latitudes().unwrap();
        assert!((lat[0] - 40.0).abs() < 1e-6, "{}", lat[0]);
    }

    /// ecCodes 2.35 and later unrotate reduced rotated Gaussian grids; Debian's 2.28 does not,
    /// so we do. Reference: ecCodes 2.50 (pip `eccodes`) on this sample.
    #[test]
    fn reduced_rotated_gaussian_is_unrotated() {
        let msg = sample("reduced_rotated_gg_sfc_grib2").message().unwrap();
        let d = Decoded::new(&msg).unwrap();
        let (lat, lon) = (d.latitudes().unwrap(), d.longitudes().unwrap());
        assert_eq!(lat.len(), 6114);
        for (i, la, lo) in [(0, 2.136201, 180.0), (1, 2.031603, 179.3396)] {
            assert!((lat[i] - la).abs() < 1e-6, "{i}: {}", lat[i]);
            assert!((lon[i] - lo).abs() < 1e-4, "{i}: {}", lon[i]);
        }
        // The identity rotation leaves points where they are.
        assert_eq!(unrotate(12.5, 33.0, (-90.0, 0.0, 0.0)), (12.5, 33.0));
    }

    #[test]
    fn missing_points_are_nan() {
        let mut h = sample("regular_ll_sfc_grib2");
        h.set_long("bitmapPresent", 1).unwrap();
        h.set_long("bitsPerValue", 16).unwrap();
        let mut v = ramp(496);
        for i in [0, 7, 100, 495] {
            v[i] = 9999.0;
        }
        h.set_doubles("values", &v).unwrap();
        let msg = h.message().unwrap();
        let d = Decoded::new(&msg).unwrap();
        let got = d.values().unwrap();
        for (i, (g, e)) in got.iter().zip(&v).enumerate() {
            if *e == 9999.0 {
                assert!(g.is_nan(), "{i}");
            } else {
                assert!((g - e).abs() < 0.01, "{i}: {g} vs {e}");
            }
        }
        assert_eq!(d.get("numberOfMissing").unwrap(), Some(KeyValue::Long(4)));
        agrees_with_grib_get_data(&msg, None);
    }

    #[test]
    fn values_into_a_callers_buffer() {
        let (msg, v) = with_values("regular_gg_sfc_grib2");
        let d = Decoded::new(&msg).unwrap();
        let mut buf = vec![f64::NAN; d.number_of_values().unwrap()];
        d.values_into(&mut buf).unwrap();
        assert_close(&buf, &v, 0.01, "values");
        let mut short = vec![0.0; 10];
        let e = d.values_into(&mut short).unwrap_err();
        assert!(matches!(e, GribError::BufferSize { got: 10, .. }), "{e}");
        let e = d.latitudes_into(&mut short).unwrap_err();
        assert!(matches!(e, GribError::BufferSize { got: 10, .. }), "{e}");
    }

    #[test]
    fn spherical_harmonics_have_values_but_no_points() {
        let msg = sample("sh_sfc_grib2").message().unwrap();
        let d = Decoded::new(&msg).unwrap();
        assert_eq!(d.number_of_values().unwrap(), 4160);
        assert_eq!(d.values().unwrap().len(), 4160);
        let e = d.latitudes().unwrap_err();
        assert!(matches!(e, GribError::NoGeometry { ref grid_type, .. } if grid_type == "sh"));
        assert_eq!(e.kind(), crate::error_kind::ErrorKind::Unsupported);
        assert!(d.grid().unwrap().iter().any(|(k, _)| *k == "J"));
        // Bi-Fourier limited-area fields: ecCodes has no iterator either.
        let msg = sample("lambert_bf_grib2").message().unwrap();
        let d = Decoded::new(&msg).unwrap();
        assert!(matches!(
            d.longitudes().unwrap_err(),
            GribError::NoGeometry { .. }
        ));
    }

    #[test]
    fn keys_in_their_native_types() {
        let (msg, _) = with_values("regular_ll_sfc_grib2");
        let d = Decoded::new(&msg).unwrap();
        assert_eq!(d.get("Ni").unwrap(), Some(KeyValue::Long(16)));
        assert_eq!(
            d.get("latitudeOfFirstGridPointInDegrees").unwrap(),
            Some(KeyValue::Double(60.0))
        );
        assert_eq!(
            d.get("shortName").unwrap(),
            Some(KeyValue::String("t".into()))
        );
        assert_eq!(d.get("noSuchKey").unwrap(), None);
        assert_eq!(d.get("pl").unwrap(), None);
        assert!(
            matches!(d.get("md5Section3").unwrap(), Some(KeyValue::String(s)) if s.len() == 32)
        );
        assert!(matches!(d.get("values").unwrap(), Some(KeyValue::Doubles(v)) if v.len() == 496));
        assert_eq!(d.bytes(), &msg[..]);
    }

    #[test]
    fn mars_keys_of_a_decoded_field() {
        let keys = [
            ("class", "od"),
            ("stream", "oper"),
            ("type", "fc"),
            ("expver", "0001"),
            ("date", "20261122"),
            ("time", "1200"),
            ("step", "6"),
            ("levtype", "pl"),
            ("levelist", "500"),
            ("param", "130"),
        ];
        let msg = super::super::sample::make_field(&keys, 100, 1).unwrap();
        let d = Decoded::new(&msg).unwrap();
        assert_eq!(
            d.mars_keys().unwrap(),
            super::super::mars_keys(&msg).unwrap()
        );
        assert_eq!(d.mars_keys().unwrap().get("param"), Some("130"));
    }

    #[test]
    fn garbage_is_refused_without_crashing() {
        let (msg, _) = with_values("regular_ll_sfc_grib2");
        assert!(Decoded::new(b"").is_err());
        assert!(Decoded::new(b"not grib at all").is_err());
        assert!(Decoded::new(&msg[..msg.len() - 10]).is_err());
        let two = [msg.clone(), msg.clone()].concat();
        assert!(matches!(
            Decoded::new(&two),
            Err(GribError::NotOneMessage { count: 2 })
        ));
        let mut padded = msg.clone();
        padded.extend_from_slice(&[0; 8]);
        assert_eq!(Decoded::new(&padded).unwrap().bytes(), &msg[..]);
        // Well framed, garbage inside: ecCodes opens it; every call must fail or answer, not crash.
        for fill in [0x00u8, 0xff, 0x5a] {
            let mut g = msg.clone();
            for b in &mut g[16..msg.len() - 4] {
                *b = fill;
            }
            if let Ok(d) = Decoded::new(&g) {
                let _ = d.values();
                let _ = d.latitudes();
                let _ = d.grid();
                let _ = d.mars_keys();
            };
        }
    }

    #[test]
    fn owned_messages_stay_open() {
        let (msg, v) = with_values("regular_ll_sfc_grib2");
        let owned = OwnedDecoded::new(Arc::from(msg.as_slice())).unwrap();
        drop(msg);
        let moved = std::thread::spawn(move || owned).join().unwrap();
        assert_close(&moved.get().values().unwrap(), &v, 0.01, "values");
        assert!(OwnedDecoded::new(Arc::from(&b"GRIB"[..])).is_err());
    }

    /// Real messages with a few bytes changed (framing kept): ecCodes must fail or answer, and
    /// sizes must agree with what it announced.
    #[test]
    fn corrupted_messages_fail_cleanly() {
        let mut x = 0xD1B5_4A32_D192_ED03u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        // Also passed 1000 mutations each of the polar_stereographic, reduced_ll and regular_gg
        // samples; mutated spectral (sh) fields still reach ecCodes 2.28's assertions.
        for name in [
            "regular_ll_sfc_grib2",
            "reduced_gg_pl_32_grib2",
            "GRIB1",
            "reduced_ll_sfc_grib2",
            "regular_gg_sfc_grib2",
        ] {
            let (msg, _) = with_values(name);
            for _ in 0..300 {
                let mut m = msg.clone();
                for _ in 0..1 + next() % 4 {
                    // Header sections only (the first 200 bytes after section 0): where the
                    // geometry and packing are described.
                    let i = 16 + (next() as usize) % (m.len().min(216) - 20);
                    m[i] = next() as u8;
                }
                let Ok(d) = Decoded::new(&m) else { continue };
                let small = |n: usize| n <= 1 << 22;
                if let Ok(n) = d.number_of_values() {
                    if small(n) {
                        if let Ok(v) = d.values() {
                            assert_eq!(v.len(), n);
                        }
                    }
                }
                if let Ok(n) = d.number_of_points() {
                    if small(n) {
                        if let Ok(v) = d.longitudes() {
                            assert_eq!(v.len(), n);
                        }
                    }
                }
                let _ = d.grid();
                let _ = d.mars_keys();
            }
        }
    }

    /// Regression (found by fuzzing `grib_decode`): ecCodes 2.28's reduced Gaussian iterator
    /// asserted (`bottom != 0` in grib_gaussian_reduced.c, an abort) on this damaged N128
    /// field, whose header fieldstore's checks let through.
    #[test]
    fn a_damaged_reduced_gaussian_grid_is_an_error_not_an_abort() {
        let msg = sample("reduced_gg_pl_128_grib2").message().unwrap();
        assert_eq!(msg.len(), 708, "the ecCodes sample changed");
        let mut m = msg.clone();
        for (at, b) in [
            (103, 115),
            (104, 116),
            (105, 114),
            (106, 101),
            (107, 97),
            (108, 109),
            (339, 16),
            (456, 4),
            (457, 0),
            (458, 0),
            (459, 0),
            (460, 0),
            (461, 0),
            (462, 0),
            (463, 0),
        ] {
            m[at] = b;
        }
        // Rows of 0 points are refused when the message is opened (a sub-area's
        // numberOfDataPoints never returned on them), whether or not ecCodes names the grid.
        for flags in [m[108], 0] {
            m[108] = flags;
            let e = Decoded::new(&m)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(e.contains("pl[166]=0"), "{e}");
        }
    }

    /// Regression (found by fuzzing `grib_decode`): `isOctahedral` and `gridName` of a
    /// reduced Gaussian field whose header says Nj=0 (so pl is empty) made ecCodes assert
    /// (`plsize`, an abort) in `grid()` and `get()`.
    #[test]
    fn a_gaussian_grid_of_no_rows_has_no_grid_name_and_does_not_abort() {
        let mut h = sample("reduced_gg_pl_128_grib2");
        h.set_long("Nj", 0).unwrap();
        let msg = h.message().unwrap();
        let d = Decoded::new(&msg).unwrap();
        assert_eq!(d.get("Nj").unwrap(), Some(KeyValue::Long(0)));
        for key in PL_DERIVED {
            let e = d.get(key).unwrap_err().to_string();
            assert!(e.contains("pl of no rows"), "{key}: {e}");
        }
        assert!(d.grid().is_err());
        assert!(d.latitudes().is_err());
        assert_eq!(
            d.get("gridType").unwrap(),
            Some(KeyValue::String("reduced_gg".into()))
        );
    }

    /// Regression (found by fuzzing `grib_decode`): a GRIB1 field whose section 1 flags lost the
    /// grid section, with 4096 coded values for a 4186-point grid: `numberOfMissing` (asked by
    /// `grid()`) overflowed ecCodes' array (SIGSEGV), `unpackedError` aborted.
    #[test]
    fn values_derived_keys_of_a_message_short_of_values_are_errors() {
        let msg = sample("GRIB1").message().unwrap();
        assert_eq!(msg.len(), 107, "the ecCodes sample changed");
        let mut m = msg.clone();
        for (at, b) in [
            (11, 98),
            (12, 107),
            (13, 0),
            (14, 64),
            (15, 0),
            (66, 115),
            (69, 0),
            (70, 0),
            (71, 0),
            (72, 0),
            (76, 0),
            (77, 0),
            (78, 0),
            (79, 0),
            (80, 0),
            (81, 0),
            (82, 1),
            (83, 1),
            (84, 2),
            (85, 4),
            (86, 1),
            (87, 48),
            (88, 48),
            (89, 48),
            (90, 49),
        ] {
            m[at] = b;
        }
        let d = Decoded::new(&m).unwrap();
        for key in VALUES_DERIVED {
            let e = d.get(key).unwrap_err().to_string();
            assert!(
                e.contains("the data section codes 4096 values for 4186 points and no bitmap"),
                "{key}: {e}"
            );
        }
        assert!(d.grid().is_err());
        // Also found: a bitmap indicator saying a bitmap follows, over a section holding none
        // (88838 points): read past its end (SIGSEGV).
        let mut g2 = sample("reduced_gg_pl_128_grib2").message().unwrap();
        assert_eq!(g2[698], 255, "the ecCodes sample changed");
        g2[698] = 0;
        let d2 = Decoded::new(&g2).unwrap();
        for key in VALUES_DERIVED {
            let e = d2.get(key).unwrap_err().to_string();
            assert!(
                e.contains("the bitmap holds 0 bits for 88838 points"),
                "{key}: {e}"
            );
        }
        assert!(d2.grid().is_err());
        let e = d2.values().unwrap_err().to_string();
        assert!(
            e.contains("the bitmap holds 0 bits for 88838 points"),
            "{e}"
        );
        // Sound messages still answer, with a bitmap too.
        let d = Decoded::new(&msg).unwrap();
        assert_eq!(d.get("numberOfMissing").unwrap(), Some(KeyValue::Long(0)));
        let mut h = sample("regular_ll_sfc_grib2");
        h.set_long("bitmapPresent", 1).unwrap();
        let bm = h.message().unwrap();
        let d = Decoded::new(&bm).unwrap();
        assert!(matches!(
            d.get("numberOfMissing").unwrap(),
            Some(KeyValue::Long(_))
        ));
        assert!(d.grid().is_ok());
    }

    /// Regression (found by fuzzing `grib_decode`): a damaged N128 field announcing 4261501702
    /// coded values made ecCodes' allocation for them fail, and it aborts on that.
    #[test]
    fn billions_of_coded_values_are_an_error_not_an_abort() {
        let mut m = sample("reduced_gg_pl_128_grib2").message().unwrap();
        assert_eq!(m.len(), 708, "the ecCodes sample changed");
        for (at, b) in [
            (67, 0),
            (68, 0),
            (69, 71),
            (70, 82),
            (71, 73),
            (72, 66),
            (73, 0),
            (74, 0),
            (75, 75),
            (118, 0),
            (119, 0),
            (120, 0),
            (124, 0),
            (125, 15),
            (225, 0),
            (226, 0),
            (227, 0),
            (228, 0),
            (229, 0),
            (230, 0),
            (231, 0),
            (232, 176),
            (300, 4),
            (301, 0),
            (302, 0),
            (303, 0),
            (304, 0),
            (305, 0),
            (306, 0),
            (307, 0),
            (466, 3),
            (627, 51),
            (677, 254),
            (698, 0),
        ] {
            m[at] = b;
        }
        let d = Decoded::new(&m).unwrap();
        // Found first now: section 5 codes more values than there are points.
        let e = d.values().unwrap_err().to_string();
        assert!(
            e.contains("section 5 announces 4261501702 coded values"),
            "{e}"
        );
        assert!(d.number_of_values().is_err());
    }

    /// The checks before decoding refuse no sound message: every message of the real files
    /// other centres wrote, and every GRIB sample ecCodes ships, decodes as ecCodes decodes it.
    #[test]
    fn sound_messages_pass_the_checks() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/real-grib");
        let mut checked = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if !name.ends_with(".grib") || name.contains("corrupted") {
                continue;
            }
            let data = std::fs::read(&path).unwrap();
            for (_, _, m) in split_slice(&data, &name).unwrap() {
                let d = Decoded::new(m).unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(d.data_fault, None, "{name}");
                let v = d.values().unwrap_or_else(|e| panic!("{name}: {e}"));
                assert_eq!(v.len(), d.number_of_values().unwrap(), "{name}");
                checked += 1;
            }
        }
        assert!(checked > 700, "{checked} messages");
        for name in [
            "GRIB1",
            "GRIB2",
            "gg_sfc_grib1",
            "gg_sfc_grib2",
            "reduced_gg_pl_1280_grib2",
            "reduced_ll_sfc_grib1",
            "regular_ll_pl_grib1",
            "sh_ml_grib1",
            "sh_ml_grib2",
            "sh_sfc_grib1",
            "polar_stereographic_pl_grib1",
            "lambert_bf_grib2",
            "ccsds_grib2",
        ] {
            let msg = sample(name).message().unwrap();
            let d = Decoded::new(&msg).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(d.data_fault, None, "{name}");
        }
    }

    /// Regressions (found by fuzzing `grib_decode`; each crashed or exhausted memory before the
    /// checks of `sections.rs`, `check_counts` and `spectral_fault`): every way a Python user
    /// reads a damaged message gives an error naming what is damaged, and the process lives on.
    #[test]
    fn damaged_messages_are_errors_not_crashes() {
        macro_rules! damaged {
            ($name:literal) => {
                (
                    $name,
                    &include_bytes!(concat!("../../tests/data/damaged-grib/", $name))[..],
                )
            };
        }
        for ((name, bytes), (at_open, why)) in [
            // GRIB 1 Nj of -2 (sign and magnitude): SIGSEGV in numberOfDataPoints.
            (damaged!("grib1-nj-minus-2.grib"), (true, "Nj=-2")),
            // 1493192704 values of 24 bits announced over a data section of a few bytes.
            (
                damaged!("grib2-data-section-short.grib"),
                (
                    false,
                    "section 5 announces 1493192704 coded values for 9 points",
                ),
            ),
            // 721426402 coded values, no bitmap, 6114 points, and a Gaussian N of 16711680.
            (
                damaged!("grib2-values-not-points.grib"),
                (true, "N=16711680"),
            ),
            // 1919509093 points over a bitmap of a few bytes, and a pl whose entries are
            // announced 120 bytes wide: read past section 3 first.
            (
                damaged!("grib2-bitmap-short.grib"),
                (
                    true,
                    "pl of Nj=64 entries of 120 bytes in section 3 of 212 bytes",
                ),
            ),
            // A constant polar stereographic field of 349407948 points in 258 bytes.
            (
                damaged!("grib1-349-million-points.grib"),
                (false, "349407948 points announced"),
            ),
            // A sub-area of a Gaussian grid of N=35327: numberOfDataPoints computed for minutes.
            (
                damaged!("grib1-gaussian-n-35327.grib"),
                (true, "N=35327: more latitudes"),
            ),
            // A Gaussian sub-area with rows of no points: numberOfDataPoints never returned.
            (damaged!("grib1-gaussian-rows-of-0.grib"), (true, "pl[")),
            // 822083584 coded values of 0 bits (a constant) behind a bitmap of 11 points.
            (
                damaged!("grib2-bitmap-over-millions-of-values.grib"),
                (false, "822083584 coded values for 11 points"),
            ),
            // 268435456 coded values of 24 bits behind a bitmap of 2664 points: SIGSEGV in the
            // coordinates' iterator, which decodes the values.
            (
                damaged!("grib2-coordinates-over-damaged-data.grib"),
                (false, "268435456 coded values for 2664 points"),
            ),
            // 773849088 coded values for 8192 points, and no section 6.
            (
                damaged!("grib2-predefined-bitmap-over-millions-of-values.grib"),
                (false, "773849088 coded values for 8192 points"),
            ),
            // A bi-Fourier field whose packing ecCodes cannot name: SIGSEGV in its values.
            (
                damaged!("grib2-unknown-packing.grib"),
                (false, "ecCodes does not know the packing"),
            ),
            // A GRIB 1 field on a predefined grid (no section 2) whose bitmap ecCodes sizes
            // from a damaged header: its bitmap and numberOfMissing corrupted the heap.
            (
                damaged!("grib1-predefined-grid-bitmap.grib"),
                (false, "values for 1369 points"),
            ),
            // A reduced Gaussian pl of Nj=32772 rows in a section 2 of 160 bytes: SIGSEGV in
            // grib_handle_new_from_message, before any key (the archive path too).
            (
                damaged!("grib1-pl-rows-beyond-section-2.grib"),
                (true, "section 2 of 160 bytes holds its lists from octet 33"),
            ),
            // A reduced Gaussian pl of 4 rows of 0 points: ecCodes counted the sub-area's
            // points forever while opening the message (the mars keys too).
            (
                damaged!("grib1-pl-rows-of-0-at-open.grib"),
                (true, "pl[0]=0"),
            ),
            // A GRIB 1 unit of time of 31: SIGFPE converting its step (the mars keys too).
            (
                damaged!("grib1-time-unit-31.grib"),
                (true, "indicatorOfUnitOfTimeRange=31 is no unit of time"),
            ),
            // A GRIB 1 binary scale factor coded as missing: ecCodes' numberOfDataPoints
            // recursed until the stack overflowed, twice found. The first also has a pl
            // reaching 8 bytes past its section, now refused before ecCodes opens it.
            (
                damaged!("grib1-binary-scale-missing.grib"),
                (true, "0 bytes of pv and 136 of pl (Ni=65535, Nj=68)"),
            ),
            (
                damaged!("grib1-binary-scale-missing-2.grib"),
                (true, "binaryScaleFactor coded as missing"),
            ),
            // J=620757055 over 4160 values of a T63 field.
            (
                damaged!("grib2-spectral-j-damaged.grib"),
                (false, "spectral truncation J, K, M"),
            ),
        ] {
            let d = match Decoded::new(bytes) {
                Err(e) => {
                    assert!(at_open, "{name}: {e}");
                    assert!(e.to_string().contains(why), "{name}: {e}");
                    continue;
                }
                Ok(d) => d,
            };
            assert!(!at_open, "{name} opened");
            let e = d.values().unwrap_err().to_string();
            assert!(e.contains(why), "{name}: {e}");
            assert!(e.contains("the message's data is corrupt"), "{name}: {e}");
            for key in VALUES_DERIVED {
                let e = d.get(key).unwrap_err().to_string();
                assert!(e.contains(why), "{name} {key}: {e}");
            }
            assert!(d.grid().is_err(), "{name}");
            assert!(d.number_of_values().is_err(), "{name}");
            for e in [d.latitudes().map(|_| ()), d.longitudes().map(|_| ())] {
                let e = e.unwrap_err().to_string();
                assert!(e.contains(why), "{name}: {e}");
            }
            // The header stays readable.
            assert!(d.get("edition").unwrap().is_some(), "{name}");
        }
    }

    /// Where section 5 starts in a sound message.
    fn section_5(m: &[u8]) -> usize {
        let sections = check_sections(m).unwrap();
        sections.iter().find(|(n, _)| *n == 5).unwrap().1
    }

    /// Without a bitmap, section 5 must code a value for every point: ecCodes writes what it
    /// decodes into an array of the points.
    #[test]
    fn fewer_coded_values_than_points_without_a_bitmap_are_an_error() {
        let mut m = sample("regular_ll_sfc_grib2").message().unwrap();
        let s5 = section_5(&m);
        m[s5 + 5..s5 + 9].copy_from_slice(&100u32.to_be_bytes());
        let d = Decoded::new(&m).unwrap();
        let e = d.values().unwrap_err().to_string();
        assert!(
            e.contains("100 coded values for 496 points and no bitmap"),
            "{e}"
        );
        assert!(d.get("maximum").is_err());
        assert_eq!(d.get("Ni").unwrap(), Some(KeyValue::Long(16)));
        // The data section must hold the values: 496 of 16 bits, announced as 32.
        let (mut m, _) = with_values("regular_ll_sfc_grib2");
        let s5 = section_5(&m);
        assert_eq!(m[s5 + 19], 16, "the sample changed");
        m[s5 + 19] = 32;
        let e = Decoded::new(&m).unwrap().values().unwrap_err().to_string();
        assert!(
            e.contains(
                "the data section holds 992 bytes, the header announces 496 values of 32 bits"
            ),
            "{e}"
        );
    }

    #[test]
    fn decodes_concurrently() {
        let (msg, v) = with_values("reduced_gg_pl_32_grib2");
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..20 {
                        let d = Decoded::new(&msg).unwrap();
                        assert_close(&d.values().unwrap(), &v, 0.01, "values");
                        assert_eq!(d.latitudes().unwrap().len(), v.len());
                    }
                });
            }
        });
    }
}
