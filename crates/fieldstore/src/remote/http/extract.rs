//! `GET /api/v1/extract`: values at grid points, places or boxes of the fields a request names,
//! extracted where the data is (only the planned bytes read), as JSON or CoverageJSON.
//! Selections are query parameters, answered in the order given: `range=LO-HI` (grid points
//! LO..HI-1), `point=LAT,LON`, `box=N/W/S/E`; `format=json` (the default, the CLI's `--json`)
//! or `format=covjson`.

use std::io::Write;

use crate::api::{extract_json, extract_selections, Selection};
use crate::remote::auth::AuthOp;

use super::api::{api_error, bad_request, Handler, Outcome};
use super::response::Response;

/// At most this many selections in one request (each may be a box of many points).
const MAX_SELECTIONS: usize = 1000;

pub(super) fn extract<W: Write>(h: &Handler, w: &mut W) -> Outcome {
    match inner(h) {
        Ok(v) => Response::json(&v).send_for(w, h.req.is_head()).into(),
        Err(r) => Outcome::Failed(r),
    }
}

fn inner(h: &Handler) -> Result<serde_json::Value, Response> {
    let req = h.request()?;
    if req.is_empty() {
        return Err(bad_request(
            "give a request naming the fields (request=class=od,...)",
        ));
    }
    let everywhere = h.may_read(AuthOp::Retrieve, &req)?;
    let mut selections = Vec::new();
    for (name, value) in &h.req.query {
        let s = match name.as_str() {
            "range" => Selection::Range(range(value)?),
            "point" => {
                let [lat, lon] = numbers::<2>(value, "point", "LAT,LON", ',')?;
                Selection::Point { lat, lon }
            }
            "box" => {
                let [north, west, south, east] = numbers::<4>(value, "box", "N/W/S/E", '/')?;
                Selection::Box {
                    north,
                    west,
                    south,
                    east,
                }
            }
            _ => continue,
        };
        selections.push(s);
        if selections.len() > MAX_SELECTIONS {
            return Err(Response::error(
                413,
                "too-large",
                &format!("more than {MAX_SELECTIONS} selections in one request"),
            ));
        }
    }
    if selections.is_empty() {
        return Err(bad_request(
            "nothing to extract: give range=LO-HI, point=LAT,LON or box=N/W/S/E (repeatable)",
        ));
    }
    let mut fields =
        extract_selections(&*h.shared().fdb, &req, &selections).map_err(|e| api_error(&e))?;
    if !everywhere {
        // A grant names database keywords, which every field's full key holds.
        fields.retain(|f| h.who.may(AuthOp::Retrieve, &f.key));
    }
    if fields.is_empty() {
        return Err(Response::error(
            404,
            "not-found",
            &format!("no field this identity may read matches {req}"),
        ));
    }
    Ok(match h.req.param("format").unwrap_or("json") {
        "covjson" => extract_json::coverage(&fields, &selections),
        "json" | "" => extract_json::json_items(&fields),
        other => return Err(bad_request(format!("format={other}: json or covjson"))),
    })
}

fn range(v: &str) -> Result<std::ops::Range<u64>, Response> {
    let bad = || bad_request(format!("range={v}: LO-HI, grid point numbers with LO < HI"));
    let (lo, hi) = v.split_once('-').ok_or_else(bad)?;
    let (lo, hi) = (
        lo.trim().parse::<u64>().map_err(|_| bad())?,
        hi.trim().parse::<u64>().map_err(|_| bad())?,
    );
    if lo >= hi {
        return Err(bad());
    }
    Ok(lo..hi)
}

fn numbers<const N: usize>(
    v: &str,
    name: &str,
    form: &str,
    sep: char,
) -> Result<[f64; N], Response> {
    let bad = || bad_request(format!("{name}={v}: {form} in degrees"));
    let parts: Vec<f64> = v
        .split(sep)
        .map(|p| p.trim().parse::<f64>().ok().filter(|x| x.is_finite()))
        .collect::<Option<Vec<f64>>>()
        .ok_or_else(bad)?;
    parts.try_into().map_err(|_| bad())
}
