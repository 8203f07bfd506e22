//! Grid geometry from the native grid section: the point an index is, the nearest point to a
//! place, and a box as grid-point ranges (one per row). Regular lat-lon and regular or global
//! reduced Gaussian grids are computed natively (Gaussian latitudes by Newton iteration on the
//! Legendre polynomial, as ecCodes does); other grids fall back to ecCodes' coordinates with a
//! linear search.

use std::ops::Range;

use super::error::ExtractError;
use crate::grib::native::{GridShape, Message};
use crate::grib::Decoded;

/// One row of points at one latitude, equally spaced in longitude.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    lat: f64,
    lon0: f64,
    dlon: f64,
    n: u64,
    /// Index of the row's first point.
    start: u64,
    /// Points scan west from the row's first one (alternate row scanning).
    reversed: bool,
}

impl Row {
    fn lon(&self, col: u64) -> f64 {
        self.lon0 + col as f64 * self.dlon
    }
    fn index(&self, col: u64) -> u64 {
        self.start + if self.reversed { self.n - 1 - col } else { col }
    }
    fn global(&self) -> bool {
        (self.n as f64 * self.dlon - 360.0).abs() < 1e-6
    }
}

/// A field's grid.
#[derive(Debug, Clone, PartialEq)]
pub struct Grid {
    kind: Kind,
}

#[derive(Debug, Clone, PartialEq)]
enum Kind {
    Rows(Vec<Row>),
    Points { lats: Vec<f64>, lons: Vec<f64> },
}

impl Grid {
    /// The grid of one message: native for regular lat-lon and regular or global reduced
    /// Gaussian grids; ecCodes' coordinates otherwise (rotated grids included: their points are
    /// then geographic). A scanning mode other than +i, -j or +j and alternate rows is refused.
    pub fn from_message(message: &[u8]) -> Result<Grid, ExtractError> {
        let parsed = Message::parse(message)?;
        let def = parsed.grid().ok();
        let rows = match def {
            Some(def) if def.rotation.is_none() => {
                let s = def.scanning;
                let native = !matches!(def.shape, GridShape::Other { .. });
                if native && (s.i_negative() || s.j_consecutive()) {
                    return Err(ExtractError::Geometry(format!(
                        "scanning mode {:#010b} (-i or j-consecutive) is not supported",
                        s.0
                    )));
                }
                rows(&def.shape, s.j_positive(), s.alternate_rows())
                    .filter(|r| r.last().map(|l| l.start + l.n) == Some(def.number_of_points))
            }
            _ => None,
        };
        if let Some(rows) = rows {
            return Ok(Grid {
                kind: Kind::Rows(rows),
            });
        }
        let d = Decoded::new(parsed.bytes())?;
        Ok(Grid {
            kind: Kind::Points {
                lats: d.latitudes()?,
                lons: d.longitudes()?,
            },
        })
    }

    /// Number of points.
    pub fn len(&self) -> u64 {
        match &self.kind {
            Kind::Rows(rows) => rows.last().map_or(0, |r| r.start + r.n),
            Kind::Points { lats, .. } => lats.len() as u64,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The (latitude, longitude) of point `index`.
    pub fn point(&self, index: u64) -> Option<(f64, f64)> {
        match &self.kind {
            Kind::Rows(rows) => {
                let j = rows.partition_point(|r| r.start + r.n <= index);
                let r = rows.get(j)?;
                let k = index - r.start;
                let col = if r.reversed { r.n - 1 - k } else { k };
                Some((r.lat, r.lon(col)))
            }
            Kind::Points { lats, lons } => {
                Some((*lats.get(index as usize)?, *lons.get(index as usize)?))
            }
        }
    }

    /// The index of the point nearest (great circle) to (`lat`, `lon`).
    pub fn nearest(&self, lat: f64, lon: f64) -> Option<u64> {
        if !lat.is_finite() || !lon.is_finite() {
            return None;
        }
        let mut best: Option<(f64, u64)> = None;
        let mut consider = |plat: f64, plon: f64, index: u64| {
            let d = haversine(lat, lon, plat, plon);
            if best.is_none_or(|(b, i)| d < b || (d == b && index < i)) {
                best = Some((d, index));
            }
        };
        match &self.kind {
            Kind::Rows(rows) => {
                // The rows on either side of the latitude (rows run north-south or south-north).
                let descending = rows.first().map(|r| r.lat) > rows.last().map(|r| r.lat);
                let j = if descending {
                    rows.partition_point(|r| r.lat > lat)
                } else {
                    rows.partition_point(|r| r.lat < lat)
                };
                for r in [j.checked_sub(1), Some(j)]
                    .into_iter()
                    .flatten()
                    .filter_map(|j| rows.get(j))
                {
                    let t = (lon - r.lon0).rem_euclid(360.0) / r.dlon;
                    let mut cols = vec![t.floor() as u64, t.ceil() as u64, 0, r.n - 1];
                    if r.global() {
                        cols.iter_mut().for_each(|c| *c %= r.n);
                    }
                    for c in cols.into_iter().filter(|c| *c < r.n) {
                        consider(r.lat, r.lon(c), r.index(c));
                    }
                }
            }
            Kind::Points { lats, lons } => {
                for (i, (a, b)) in lats.iter().zip(lons).enumerate() {
                    consider(*a, *b, i as u64);
                }
            }
        }
        best.map(|(_, i)| i)
    }

    /// The points inside a box (degrees; `west` to `east` eastwards, wrapping), as sorted,
    /// non-overlapping grid-point ranges: one per row (two where the box wraps past a row's
    /// end), adjacent ones merged.
    pub fn box_ranges(&self, north: f64, west: f64, south: f64, east: f64) -> Vec<Range<u64>> {
        let eps = 1e-9;
        let width = if east - west >= 360.0 {
            360.0
        } else {
            (east - west).rem_euclid(360.0)
        };
        let in_lon = |lon: f64| (lon - west).rem_euclid(360.0) <= width + eps;
        let mut out: Vec<Range<u64>> = Vec::new();
        match &self.kind {
            Kind::Rows(rows) => {
                for r in rows
                    .iter()
                    .filter(|r| r.lat <= north + eps && r.lat >= south - eps)
                {
                    let a = (west - r.lon0).rem_euclid(360.0) / r.dlon;
                    let first = (a - eps).ceil() as i64;
                    let last = ((a * r.dlon + width) / r.dlon + eps).floor() as i64;
                    let period = (360.0 / r.dlon).round() as i64;
                    for shift in [0, period, -period] {
                        let lo = (first - shift).max(0);
                        let hi = (last - shift).min(r.n as i64 - 1);
                        if lo <= hi {
                            let (x, y) = (r.index(lo as u64), r.index(hi as u64));
                            out.push(x.min(y)..x.max(y) + 1);
                        }
                    }
                }
            }
            Kind::Points { lats, lons } => {
                for (i, (a, b)) in lats.iter().zip(lons).enumerate() {
                    if *a <= north + eps && *a >= south - eps && in_lon(*b) {
                        out.push(i as u64..i as u64 + 1);
                    }
                }
            }
        }
        out.sort_by_key(|r| r.start);
        let mut merged: Vec<Range<u64>> = Vec::with_capacity(out.len());
        for r in out {
            match merged.last_mut() {
                Some(l) if r.start <= l.end => l.end = l.end.max(r.end),
                _ => merged.push(r),
            }
        }
        merged
    }
}

fn haversine(lat1: f64, lon1: f64, lat2: f64, lon2: f64) -> f64 {
    let (p1, p2) = (lat1.to_radians(), lat2.to_radians());
    let dp = p2 - p1;
    let dl = (lon2 - lon1).to_radians();
    let h = (dp / 2.0).sin().powi(2) + p1.cos() * p2.cos() * (dl / 2.0).sin().powi(2);
    2.0 * h.sqrt().min(1.0).asin()
}

/// The rows of a native grid, or `None` when it is not one computed here.
fn rows(shape: &GridShape, j_positive: bool, alternate: bool) -> Option<Vec<Row>> {
    let mut rows = Vec::new();
    let mut start = 0u64;
    let mut push = |lat: f64, lon0: f64, dlon: f64, n: u64| {
        let reversed = alternate && rows.len() % 2 == 1;
        rows.push(Row {
            lat,
            lon0,
            dlon,
            n,
            start,
            reversed,
        });
        start += n;
    };
    match shape {
        GridShape::LatLon {
            ni,
            nj,
            lat_first,
            lon_first,
            lat_last,
            lon_last,
            di,
            dj,
        } => {
            if *ni == 0 || *nj == 0 || *ni > 1 << 24 || *nj > 1 << 24 {
                return None;
            }
            // From the corners when there are two points or more: the coded increments are
            // rounded (GRIB1 millidegrees), the corners are what ecCodes spaces the points by.
            let dlon = if *ni > 1 {
                (lon_last - lon_first).rem_euclid(360.0) / (*ni as f64 - 1.0)
            } else {
                di.unwrap_or(0.0)
            };
            let dlat = if *nj > 1 {
                (lat_last - lat_first).abs() / (*nj as f64 - 1.0)
            } else {
                dj.unwrap_or(0.0)
            };
            let sign = if j_positive { 1.0 } else { -1.0 };
            for j in 0..*nj {
                push(lat_first + sign * j as f64 * dlat, *lon_first, dlon, *ni);
            }
        }
        GridShape::Gaussian {
            n,
            ni,
            nj,
            lat_first,
            lon_first,
            lat_last,
            lon_last,
            di,
            pl,
        } => {
            if *n == 0 || *n > 8000 {
                return None;
            }
            let lats = gaussian_latitudes(*n as usize);
            let (hi, lo) = (lat_first.max(*lat_last), lat_first.min(*lat_last));
            let mut chosen: Vec<f64> = lats
                .into_iter()
                .filter(|l| *l <= hi + 1e-3 && *l >= lo - 1e-3)
                .collect();
            if j_positive {
                chosen.reverse();
            }
            if chosen.len() as u64 != *nj {
                return None;
            }
            match (ni, pl) {
                (Some(ni), _) if *ni > 0 && *ni <= 1 << 24 => {
                    let dlon = if *ni > 1 {
                        (lon_last - lon_first).rem_euclid(360.0) / (*ni as f64 - 1.0)
                    } else {
                        di.unwrap_or(360.0)
                    };
                    for lat in chosen {
                        push(lat, *lon_first, dlon, *ni);
                    }
                }
                (None, Some(pl)) => {
                    // Reduced: only global grids (each row spans 360 degrees).
                    if *nj != 2 * n || *lon_first != 0.0 || pl.len() != chosen.len() {
                        return None;
                    }
                    for (lat, p) in chosen.into_iter().zip(pl) {
                        if *p == 0 {
                            return None;
                        }
                        push(lat, 0.0, 360.0 / *p as f64, *p);
                    }
                }
                _ => return None,
            }
        }
        GridShape::Other { .. } => return None,
    }
    Some(rows)
}

/// The 2N Gaussian latitudes (degrees, north to south): the roots of the Legendre polynomial
/// of degree 2N, by Newton iteration from the usual first guesses (as ecCodes'
/// `grib_get_gaussian_latitudes`).
pub(crate) fn gaussian_latitudes(n: usize) -> Vec<f64> {
    let nlat = 2 * n;
    let mut out = vec![0.0; nlat];
    for i in 0..n {
        let mut z = (std::f64::consts::PI * (i as f64 + 0.75) / (nlat as f64 + 0.5)).cos();
        for _ in 0..100 {
            // P_nlat(z) and its derivative by the three-term recurrence.
            let (mut p0, mut p1) = (1.0f64, z);
            for k in 2..=nlat {
                let p2 = ((2 * k - 1) as f64 * z * p1 - (k - 1) as f64 * p0) / k as f64;
                p0 = p1;
                p1 = p2;
            }
            let dp = nlat as f64 * (p0 - z * p1) / (1.0 - z * z);
            let dz = p1 / dp;
            z -= dz;
            if dz.abs() < 1e-16 {
                break;
            }
        }
        let lat = z.asin().to_degrees();
        out[i] = lat;
        out[nlat - 1 - i] = -lat;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::extract::tests::make;

    fn check_against_eccodes(m: &[u8]) {
        let g = Grid::from_message(m).unwrap();
        assert!(matches!(g.kind, Kind::Rows(_)), "native geometry expected");
        let d = Decoded::new(m).unwrap();
        let (lats, lons) = (d.latitudes().unwrap(), d.longitudes().unwrap());
        assert_eq!(g.len() as usize, lats.len());
        for i in (0..lats.len()).step_by(7) {
            let (a, b) = g.point(i as u64).unwrap();
            assert!((a - lats[i]).abs() < 1e-6, "lat of {i}: {a} vs {}", lats[i]);
            let dl = (b - lons[i]).rem_euclid(360.0);
            assert!(
                !(1e-6..=360.0 - 1e-6).contains(&dl),
                "lon of {i}: {b} vs {}",
                lons[i]
            );
            // A point is its own nearest point.
            let near = g.nearest(lats[i], lons[i]).unwrap();
            let (c, e) = g.point(near).unwrap();
            assert!(
                (c - lats[i]).abs() < 1e-6
                    && ((e - lons[i]).rem_euclid(360.0) < 1e-6
                        || (e - lons[i]).rem_euclid(360.0) > 360.0 - 1e-6),
                "nearest of {i} is {near}"
            );
        }
        // A box: every point inside, none outside.
        let ranges = g.box_ranges(40.0, 350.0, -10.0, 20.0);
        let mut inside = vec![false; lats.len()];
        for r in &ranges {
            for i in r.clone() {
                inside[i as usize] = true;
            }
        }
        for i in 0..lats.len() {
            let want = lats[i] <= 40.0 + 1e-9
                && lats[i] >= -10.0 - 1e-9
                && (lons[i] - 350.0).rem_euclid(360.0) <= 30.0 + 1e-9;
            assert_eq!(inside[i], want, "point {i} at {} {}", lats[i], lons[i]);
        }
        assert!(ranges.windows(2).all(|w| w[0].end < w[1].start));
    }

    #[test]
    fn regular_latlon_and_gaussian_grids_match_eccodes() {
        let ll: &[(&str, i64)] = &[
            ("Ni", 360),
            ("Nj", 181),
            ("iDirectionIncrement", 1_000_000),
            ("jDirectionIncrement", 1_000_000),
            ("latitudeOfFirstGridPoint", 90_000_000),
            ("latitudeOfLastGridPoint", -90_000_000),
            ("longitudeOfFirstGridPoint", 0),
            ("longitudeOfLastGridPoint", 359_000_000),
        ];
        check_against_eccodes(&make("GRIB2", &[], ll, None, |i| i as f64));
        check_against_eccodes(&make("GRIB1", &[], &[], None, |i| i as f64));
        check_against_eccodes(&make("reduced_gg_pl_32_grib2", &[], &[], None, |i| {
            i as f64
        }));
        check_against_eccodes(&make("reduced_gg_pl_48_grib1", &[], &[], None, |i| {
            i as f64
        }));
        check_against_eccodes(&make("regular_gg_pl_grib1", &[], &[], None, |i| i as f64));
    }

    /// Alternate row scanning: odd rows run east to west. ecCodes' `longitudes` (2.28 and 2.50
    /// alike) ignore the flag and give every row west to east, though its `values` are in the
    /// message's order: the values prove the order (row 1's first value continues row 0's
    /// last one), so the native geometry mirrors ecCodes' longitudes on odd rows.
    #[test]
    fn alternate_row_scanning_reverses_odd_rows() {
        let path = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/data/real-grib/alternate-scanning.grib"
        );
        let bytes = std::fs::read(path).unwrap();
        let (_, _, m) = crate::grib::split_slice(&bytes, "t").unwrap()[0];
        let g = Grid::from_message(m).unwrap();
        let d = Decoded::new(m).unwrap();
        let (lats, lons, values) = (
            d.latitudes().unwrap(),
            d.longitudes().unwrap(),
            d.values().unwrap(),
        );
        let ni = 291usize;
        for (i, lat) in lats.iter().enumerate() {
            let (row, k) = (i / ni, i % ni);
            let mirrored = if row % 2 == 1 {
                row * ni + ni - 1 - k
            } else {
                i
            };
            let (a, b) = g.point(i as u64).unwrap();
            assert!((a - lat).abs() < 1e-6, "lat of {i}");
            let dl = (b - lons[mirrored]).rem_euclid(360.0);
            assert!(
                !(1e-6..=360.0 - 1e-6).contains(&dl),
                "lon of {i}: {b} vs {}",
                lons[mirrored]
            );
        }
        // The field is smooth across the turn at the end of row 0.
        assert!((values[ni] - values[ni - 1]).abs() < (values[ni] - values[0]).abs());
        assert_eq!(g.nearest(50.9, 19.0), Some(ni as u64));
        assert_eq!(g.nearest(50.9, -10.0), Some(2 * ni as u64 - 1));
    }

    #[test]
    fn gaussian_latitudes_are_eccodes() {
        let m = make("reduced_gg_pl_80_grib2", &[], &[], None, |i| i as f64);
        let d = Decoded::new(&m).unwrap();
        let lats = d.latitudes().unwrap();
        let mut rows: Vec<f64> = lats.clone();
        rows.dedup();
        let ours = gaussian_latitudes(80);
        assert_eq!(rows.len(), ours.len());
        for (a, b) in rows.iter().zip(&ours) {
            assert!((a - b).abs() < 1e-9, "{a} vs {b}");
        }
    }

    #[test]
    fn unsupported_scanning_is_refused() {
        let m = make("GRIB2", &[], &[("iScansNegatively", 1)], None, |i| i as f64);
        let e = Grid::from_message(&m).unwrap_err();
        assert_eq!(e.kind(), crate::ErrorKind::Unsupported, "{e}");
    }
}
