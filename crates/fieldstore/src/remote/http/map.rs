//! What the web view draws: one field's decoded values with their coordinates, thinned for
//! large grids (`/api/v1/field`), and one point's values across several fields
//! (`/api/v1/series`). Decoding is ecCodes' (`grib::decode::Decoded`), so the values shown are
//! ecCodes' values.
//!
//! `/api/v1/field` answers `application/octet-stream`: a little-endian u32 length, that many
//! bytes of JSON metadata (padded with spaces to a multiple of 4), then three f32 arrays of
//! `n` each: latitudes, longitudes, values (NaN where missing). The points come row by row
//! (`rows` in the metadata: `[count, dlat, dlon]` per row, the spacing in degrees that each
//! drawn point covers), so the page draws the grid as it is: regular, Gaussian, reduced,
//! rotated. With `sizes: true` (rotated grids, whose rows are curves on the map) two more f32
//! arrays follow: each point's box width and height in degrees. A grid over `max_points` keeps
//! every k-th row and every k-th point of a row.

use std::io::{Read, Write};

use serde_json::{json, Value};

use super::super::auth::AuthOp;
use super::super::server::{Lease, Share, Shared};
use super::api::{api_error, bad_request, key_json, key_request, refusal, Handler, Outcome};
use super::response::Response;
use crate::api::ListOptions;
use crate::grib::{Decoded, KeyValue};
use crate::model::request::Request;
use crate::model::Key;

/// Points drawn by default, and at most.
const DEFAULT_POINTS: u64 = 300_000;
const MAX_POINTS: u64 = 4_000_000;
/// Fields one series may read.
const MAX_SERIES: usize = 400;

pub(super) fn field<W: Write>(h: &Handler, w: &mut W) -> Outcome {
    match field_inner(h) {
        Ok(r) => r.send_for(w, h.req.is_head()).into(),
        Err(r) => Outcome::Failed(r),
    }
}

pub(super) fn series<W: Write>(h: &Handler, w: &mut W) -> Outcome {
    match series_inner(h) {
        Ok(v) => Response::json(&v).send_for(w, h.req.is_head()).into(),
        Err(r) => Outcome::Failed(r),
    }
}

/// The fields a request matches (it may leave keywords out, as `list` allows), by full key.
fn matching(h: &Handler, max: usize) -> Result<Vec<Key>, Response> {
    let req = h.request()?;
    if req.is_empty() {
        return Err(bad_request("give a request naming the field(s)"));
    }
    let everywhere = h.may_read(AuthOp::Retrieve, &req)?;
    let options = ListOptions {
        include_masked: false,
        depth: 3,
    };
    let mut keys = Vec::new();
    for el in h
        .shared()
        .fdb
        .list(&req, options)
        .map_err(|e| api_error(&e))?
    {
        let el = el.map_err(|e| api_error(&e))?;
        if !everywhere && !h.who.may(AuthOp::Retrieve, &el.key.db) {
            continue;
        }
        keys.push(el.key.combined());
        if keys.len() > max {
            return Err(Response::error(
                413,
                "too-large",
                &format!("the request names more than {max} fields; give more of their keys"),
            ));
        }
    }
    if keys.is_empty() {
        return Err(Response::error(
            404,
            "not-found",
            &format!("nothing matches {req}"),
        ));
    }
    Ok(keys)
}

/// One field's bytes by its full key, held against the budget.
fn read_field<'a>(
    h: &'a Handler,
    share: &'a Share,
    key: &Key,
) -> Result<(Vec<u8>, Lease<'a>), Response> {
    let shared: &Shared = h.shared();
    let mut r = Request::new(Some("retrieve"));
    for (kw, v) in key.iter().filter(|(_, v)| !v.is_empty()) {
        r.set(kw, vec![v.to_string()]);
    }
    let mut stream = shared.fdb.retrieve(&r).map_err(|e| api_error(&e))?;
    let length = match stream.fields() {
        [f] => f.length,
        _ => {
            return Err(Response::error(
                404,
                "not-found",
                &format!("the field {} is gone", key_request(key)),
            ))
        }
    };
    let lease = shared
        .budget
        .take(share, length, &shared.stopping)
        .map_err(refusal)?;
    let len = usize::try_from(length).map_err(|_| bad_request("field too large"))?;
    let mut buf = vec![0u8; len];
    stream
        .read_exact(&mut buf)
        .map_err(|e| Response::error(500, "io", &format!("reading the field: {e}")))?;
    Ok((buf, lease))
}

fn grib_error(e: impl std::fmt::Display) -> Response {
    Response::error(400, "bad-request", &format!("cannot decode the field: {e}"))
}

fn long(d: &Decoded, key: &str) -> Option<i64> {
    match d.get(key).ok()?? {
        KeyValue::Long(v) => Some(v),
        KeyValue::Double(v) => Some(v as i64),
        _ => None,
    }
}

fn double(d: &Decoded, key: &str) -> Option<f64> {
    match d.get(key).ok()?? {
        KeyValue::Double(v) => Some(v),
        KeyValue::Long(v) => Some(v as f64),
        _ => None,
    }
}

fn string(d: &Decoded, key: &str) -> Option<String> {
    match d.get(key).ok()?? {
        KeyValue::String(s) => Some(s),
        KeyValue::Long(v) => Some(v.to_string()),
        _ => None,
    }
}

/// A field's points: coordinates and values, with its row lengths.
struct Grid {
    lat: Vec<f64>,
    lon: Vec<f64>,
    values: Vec<f64>,
    rows: Vec<usize>,
    grid_type: String,
}

const MISSING_LONG: i64 = 2147483647;

/// Row lengths from the grid's keys: `Ni` of a rectangular grid, `pl` of a reduced one.
fn key_rows(d: &Decoded, n: usize) -> Option<Vec<usize>> {
    let ni = long(d, "Ni").filter(|&v| v > 0 && v != MISSING_LONG);
    let nj = long(d, "Nj").filter(|&v| v > 0 && v != MISSING_LONG);
    if let (Some(ni), Some(nj)) = (ni, nj) {
        if (ni * nj) as usize == n && long(d, "jPointsAreConsecutive").unwrap_or(0) == 0 {
            return Some(vec![ni as usize; nj as usize]);
        }
    }
    if let Ok(Some(KeyValue::Longs(pl))) = d.get("pl") {
        let rows: Vec<usize> = pl
            .iter()
            .map(|&v| v.max(0) as usize)
            .filter(|&v| v > 0)
            .collect();
        if rows.iter().sum::<usize>() == n {
            return Some(rows);
        }
    }
    None
}

/// Rows found by where the latitude changes (any grid whose rows share a latitude).
fn lat_rows(lat: &[f64]) -> Vec<usize> {
    let mut rows = Vec::new();
    let mut start = 0;
    for i in 1..=lat.len() {
        if i == lat.len() || (lat[i] - lat[start]).abs() > 1e-9 {
            rows.push(i - start);
            start = i;
        }
    }
    rows
}

/// Decodes the values and coordinates; a regular lat/lon grid's coordinates are computed from
/// its corners and increments (as ecCodes' iterator does), which is much faster on 0.1° grids.
fn decode(d: &Decoded) -> Result<Grid, Response> {
    let values = d.values().map_err(grib_error)?;
    let n = values.len();
    let grid_type = string(d, "gridType").unwrap_or_default();
    if grid_type == "regular_ll" {
        if let Some(g) = regular_ll(d, n) {
            return Ok(Grid {
                values,
                grid_type,
                ..g
            });
        }
    }
    let lat = d.latitudes().map_err(grib_error)?;
    let lon = d.longitudes().map_err(grib_error)?;
    if lat.len() != n || lon.len() != n {
        return Err(grib_error(format!("{} values but {} points", n, lat.len())));
    }
    let rows = key_rows(d, n).unwrap_or_else(|| lat_rows(&lat));
    Ok(Grid {
        lat,
        lon,
        values,
        rows,
        grid_type,
    })
}

fn regular_ll(d: &Decoded, n: usize) -> Option<Grid> {
    let ni = long(d, "Ni").filter(|&v| v > 0 && v != MISSING_LONG)? as usize;
    let nj = long(d, "Nj").filter(|&v| v > 0 && v != MISSING_LONG)? as usize;
    if ni * nj != n
        || long(d, "jPointsAreConsecutive").unwrap_or(0) != 0
        || long(d, "alternativeRowScanning").unwrap_or(0) != 0
    {
        return None;
    }
    let lat1 = double(d, "latitudeOfFirstGridPointInDegrees")?;
    let lat2 = double(d, "latitudeOfLastGridPointInDegrees")?;
    let lon1 = double(d, "longitudeOfFirstGridPointInDegrees")?;
    let lon2 = double(d, "longitudeOfLastGridPointInDegrees")?;
    let i_neg = long(d, "iScansNegatively").unwrap_or(0) != 0;
    let dj = if nj > 1 {
        (lat2 - lat1) / (nj - 1) as f64
    } else {
        0.0
    };
    let mut span = if i_neg { lon1 - lon2 } else { lon2 - lon1 };
    if span < 0.0 {
        span += 360.0;
    }
    let di = if ni > 1 { span / (ni - 1) as f64 } else { 0.0 };
    let di = if i_neg { -di } else { di };
    let mut lat = Vec::with_capacity(n);
    let mut lon = Vec::with_capacity(n);
    let row_lon: Vec<f64> = (0..ni).map(|i| lon1 + i as f64 * di).collect();
    for j in 0..nj {
        let la = lat1 + j as f64 * dj;
        lat.extend(std::iter::repeat_n(la, ni));
        lon.extend_from_slice(&row_lon);
    }
    Some(Grid {
        lat,
        lon,
        values: Vec::new(),
        rows: vec![ni; nj],
        grid_type: String::new(),
    })
}

/// Longitude difference in [0, 180].
fn dlon(a: f64, b: f64) -> f64 {
    let d = (a - b).abs() % 360.0;
    d.min(360.0 - d)
}

fn field_inner(h: &Handler) -> Result<Response, Response> {
    let max = h
        .number("max_points", DEFAULT_POINTS, MAX_POINTS)?
        .max(1000);
    let keys = matching(h, 1).map_err(|r| {
        if r.status == 413 {
            bad_request("the request names several fields; the map shows one: give its full key (the `request` of a listed field)")
        } else {
            r
        }
    })?;
    let shared = h.shared();
    let share = Share::default();
    let started = std::time::Instant::now();
    let (bytes, _lease) = read_field(h, &share, &keys[0])?;
    let d = Decoded::new(&bytes).map_err(grib_error)?;
    let n = d.number_of_values().map_err(grib_error)?;
    // Values and coordinates in f64, and what is sent: a share of its own, so a field and its
    // decoding may each take up to a connection's budget (a 0.1° field is 18.5 MiB of GRIB and
    // 155 MiB decoded); the server's budget bounds them all.
    let decoding = Share::default();
    let _decoding = shared
        .budget
        .take(&decoding, n as u64 * 24, &shared.stopping)
        .map_err(refusal)?;
    let g = decode(&d)?;
    let decoded_ms = started.elapsed().as_secs_f64() * 1000.0;
    let k = ((n as f64 / max as f64).sqrt().ceil() as usize).max(1);
    let mut lat = Vec::new();
    let mut lon = Vec::new();
    let mut val = Vec::new();
    let mut rows = Vec::new();
    let starts: Vec<usize> = g
        .rows
        .iter()
        .scan(0, |s, &len| {
            let at = *s;
            *s += len;
            Some(at)
        })
        .collect();
    let (mut lo, mut hi) = (f64::INFINITY, f64::NEG_INFINITY);
    // Rotated grids' rows are curves on the map: each point gets its own box, spanning its
    // neighbours along the row and down the column (`sizes` in the metadata).
    let rectangular = g.rows.windows(2).all(|w| w[0] == w[1]);
    let per_point = g.grid_type.contains("rotated") && rectangular;
    let (mut widths, mut heights) = (Vec::new(), Vec::new());
    for r in (0..g.rows.len()).step_by(k) {
        let (s, len) = (starts[r], g.rows[r]);
        // The spacing a drawn point covers: to the next kept row and the next kept point.
        let other = if r + k < g.rows.len() {
            starts[r + k]
        } else if r >= k {
            starts[r - k]
        } else {
            s
        };
        let dlat = (g.lat[other] - g.lat[s])
            .abs()
            .max(if other == s { 1.0 } else { 0.0 });
        let step = if len > 1 {
            dlon(g.lon[s + 1], g.lon[s])
        } else {
            360.0
        };
        let kk = k.min(len.max(1));
        let mut count = 0;
        for j in (0..len).step_by(kk) {
            let i = s + j;
            if per_point {
                let along = if j + 1 < len {
                    i + 1
                } else {
                    i.saturating_sub(1).max(s)
                };
                let down = other - s + i;
                let w = dlon(g.lon[along], g.lon[i]) * kk as f64;
                let h = (g.lat[along] - g.lat[i]).abs() * kk as f64;
                let w2 = dlon(g.lon[down], g.lon[i]);
                let h2 = (g.lat[down] - g.lat[i]).abs();
                // A skewed cell's box spans both of its edges.
                widths.push((w + w2) as f32);
                heights.push((h + h2) as f32);
            }
            lat.push(g.lat[i] as f32);
            let mut x = g.lon[i];
            if x > 180.0 {
                x -= 360.0;
            }
            lon.push(x as f32);
            let v = g.values[i];
            if v.is_finite() {
                lo = lo.min(v);
                hi = hi.max(v);
            }
            val.push(v as f32);
            count += 1;
        }
        rows.push(json!([count, dlat, step * kk as f64]));
    }
    let key = &keys[0];
    let meta = json!({
        "key": key_json(key),
        "request": key_request(key),
        "gridType": g.grid_type,
        "name": string(&d, "name"),
        "shortName": string(&d, "shortName"),
        "units": string(&d, "units"),
        "n": lat.len(),
        "total": n,
        "stride": k,
        "min": if lo.is_finite() { json!(lo) } else { Value::Null },
        "max": if hi.is_finite() { json!(hi) } else { Value::Null },
        "rows": rows,
        "sizes": per_point,
        "decode_ms": decoded_ms,
    });
    let mut m = serde_json::to_vec(&meta).unwrap_or_default();
    while !m.len().is_multiple_of(4) {
        m.push(b' ');
    }
    let mut body = Vec::with_capacity(4 + m.len() + lat.len() * 12);
    body.extend_from_slice(&(m.len() as u32).to_le_bytes());
    body.extend_from_slice(&m);
    for a in [&lat, &lon, &val, &widths, &heights] {
        for x in a.iter() {
            body.extend_from_slice(&x.to_le_bytes());
        }
    }
    Ok(Response::new(200, "application/octet-stream", body))
}

fn series_inner(h: &Handler) -> Result<Value, Response> {
    let coord = |name: &str, lim: f64| -> Result<f64, Response> {
        let v = h
            .req
            .param(name)
            .ok_or_else(|| bad_request(format!("{name}= is needed (degrees)")))?;
        match v.parse::<f64>() {
            Ok(x) if x.is_finite() && x.abs() <= lim => Ok(x),
            _ => Err(bad_request(format!("{name}={v}: degrees within ±{lim}"))),
        }
    };
    let (lat0, lon0) = (coord("lat", 90.0)?, coord("lon", 360.0)?);
    let keys = matching(h, MAX_SERIES)?;
    let share = Share::default();
    let mut nearest: Option<(usize, usize, f64, f64)> = None; // (points, index, lat, lon)
    let mut points = Vec::new();
    let (mut units, mut name) = (None, None);
    for key in &keys {
        let (bytes, _lease) = read_field(h, &share, key)?;
        let d = Decoded::new(&bytes).map_err(grib_error)?;
        let values = d.values().map_err(grib_error)?;
        let n = values.len();
        let found = match nearest {
            Some(found) if found.0 == n => found,
            _ => {
                let g = decode(&d)?;
                let c = lat0.to_radians().cos();
                let (mut best, mut bd) = (0, f64::INFINITY);
                for i in 0..n {
                    let dy = g.lat[i] - lat0;
                    let dx = dlon(g.lon[i], lon0) * c;
                    let dd = dx * dx + dy * dy;
                    if dd < bd {
                        bd = dd;
                        best = i;
                    }
                }
                let mut x = g.lon[best];
                if x > 180.0 {
                    x -= 360.0;
                }
                (n, best, g.lat[best], x)
            }
        };
        nearest = Some(found);
        units = units.or_else(|| string(&d, "units"));
        name = name.or_else(|| string(&d, "name"));
        let v = values[found.1];
        points.push(json!({
            "key": key_json(key),
            "request": key_request(key),
            "value": if v.is_finite() { json!(v) } else { Value::Null },
        }));
    }
    let (_, index, lat, lon) = nearest.unwrap_or((0, 0, lat0, lon0));
    Ok(json!({
        "lat": lat,
        "lon": lon,
        "index": index,
        "units": units,
        "name": name,
        "points": points,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grib::sample::{make_field, make_global_field};

    /// The regular grid's coordinates computed from its keys are ecCodes' own.
    #[test]
    fn regular_coordinates_are_ecodes_coordinates() {
        for bytes in [
            make_field(&[("param", "130")], 5000, 1).unwrap(),
            make_global_field(&[("param", "130")], 36, 19, 2).unwrap(),
        ] {
            let d = Decoded::new(&bytes).unwrap();
            let n = d.number_of_values().unwrap();
            let fast = regular_ll(&d, n).expect("a regular grid");
            let (lat, lon) = (d.latitudes().unwrap(), d.longitudes().unwrap());
            assert_eq!(fast.lat.len(), lat.len());
            for i in 0..n {
                assert!(
                    (fast.lat[i] - lat[i]).abs() < 1e-6,
                    "lat {i}: {} vs {}",
                    fast.lat[i],
                    lat[i]
                );
                assert!(
                    dlon(fast.lon[i], lon[i]) < 1e-6,
                    "lon {i}: {} vs {}",
                    fast.lon[i],
                    lon[i]
                );
            }
            assert_eq!(fast.rows, key_rows(&d, n).unwrap());
        }
    }

    #[test]
    fn rows_follow_the_latitudes() {
        assert_eq!(lat_rows(&[10.0, 10.0, 10.0, 5.0, 5.0, 0.0]), [3, 2, 1]);
        assert_eq!(lat_rows(&[]), Vec::<usize>::new());
        assert_eq!(dlon(359.0, 1.0), 2.0);
        assert_eq!(dlon(-170.0, 170.0), 20.0);
    }
}
