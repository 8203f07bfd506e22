//! `fieldstore extract`: values at grid points, places or boxes of the fields a request names,
//! reading only the bytes those points need where the catalogue kept how each field is packed.

use std::io::Write;
use std::ops::Range;

use anyhow::{bail, Context as _, Result};
use clap::{Args, ValueEnum};
use fieldstore::api::{extract_json, extract_selections, SelectedField, Selection};

use super::request::read_requests;
use crate::context::Session;

#[derive(Args, Debug)]
pub struct ExtractArgs {
    /// A MARS request, inline or a request file (several requests are answered in order).
    request: String,
    /// Grid points LO to HI, HI excluded (`0-10`: the first ten points), in the field's point
    /// order. Repeatable.
    #[arg(long = "range", value_name = "LO-HI", value_parser = parse_range)]
    ranges: Vec<Range<u64>>,
    /// The grid point nearest to a place, in degrees (`51.5,-0.12`). Repeatable.
    #[arg(long = "point", value_name = "LAT,LON", value_parser = parse_point, allow_hyphen_values = true)]
    points: Vec<(f64, f64)>,
    /// The grid points inside a box, in degrees north/west/south/east (`60/-10/50/2`).
    /// Repeatable.
    #[arg(long = "box", value_name = "N/W/S/E", value_parser = parse_box, allow_hyphen_values = true)]
    boxes: Vec<[f64; 4]>,
    /// Output form: JSON (one item per field, in request order), CSV (one line per point) or
    /// CoverageJSON (one point series per point and parameter).
    #[arg(long, value_enum, default_value_t = Form::Json)]
    format: Form,
    /// Same as --format json.
    #[arg(long, conflicts_with_all = ["csv", "covjson"])]
    json: bool,
    /// Same as --format csv.
    #[arg(long, conflicts_with = "covjson")]
    csv: bool,
    /// Same as --format covjson.
    #[arg(long)]
    covjson: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Form {
    Json,
    Csv,
    Covjson,
}

fn parse_range(s: &str) -> Result<Range<u64>, String> {
    let (lo, hi) = s
        .split_once('-')
        .ok_or_else(|| format!("'{s}' is not a range: LO-HI, e.g. 0-10"))?;
    let lo: u64 = lo
        .trim()
        .parse()
        .map_err(|_| format!("'{lo}' in '{s}' is not a grid point number"))?;
    let hi: u64 = hi
        .trim()
        .parse()
        .map_err(|_| format!("'{hi}' in '{s}' is not a grid point number"))?;
    if lo >= hi {
        return Err(format!(
            "range {s} is empty: LO-HI with LO < HI (HI is excluded)"
        ));
    }
    Ok(lo..hi)
}

fn degrees(s: &str, whole: &str) -> Result<f64, String> {
    s.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("'{s}' in '{whole}' is not a number of degrees"))
}

fn parse_point(s: &str) -> Result<(f64, f64), String> {
    let (lat, lon) = s
        .split_once(',')
        .ok_or_else(|| format!("'{s}' is not a point: LAT,LON in degrees, e.g. 51.5,-0.12"))?;
    let (lat, lon) = (degrees(lat, s)?, degrees(lon, s)?);
    if !(-90.0..=90.0).contains(&lat) {
        return Err(format!("latitude {lat} in '{s}' is outside -90..90"));
    }
    Ok((lat, lon))
}

fn parse_box(s: &str) -> Result<[f64; 4], String> {
    let parts: Vec<&str> = s.split('/').collect();
    let [n, w, so, e] = parts.as_slice() else {
        return Err(format!(
            "'{s}' is not a box: N/W/S/E in degrees, e.g. 60/-10/50/2"
        ));
    };
    let b = [
        degrees(n, s)?,
        degrees(w, s)?,
        degrees(so, s)?,
        degrees(e, s)?,
    ];
    if b[0] < b[2] {
        return Err(format!(
            "box '{s}': north ({}) is south of south ({}); a box is N/W/S/E",
            b[0], b[2]
        ));
    }
    Ok(b)
}

pub fn extract(args: ExtractArgs, session: &Session) -> Result<()> {
    let form = if args.csv {
        Form::Csv
    } else if args.covjson {
        Form::Covjson
    } else if args.json {
        Form::Json
    } else {
        args.format
    };
    let mut selections: Vec<Selection> = Vec::new();
    selections.extend(args.ranges.iter().cloned().map(Selection::Range));
    selections.extend(
        args.points
            .iter()
            .map(|&(lat, lon)| Selection::Point { lat, lon }),
    );
    selections.extend(args.boxes.iter().map(|b| Selection::Box {
        north: b[0],
        west: b[1],
        south: b[2],
        east: b[3],
    }));
    if selections.is_empty() {
        bail!(
            "nothing to extract: give --range LO-HI, --point LAT,LON or --box N/W/S/E (repeatable)"
        );
    }
    let fdb = session.fdb()?;
    let mut fields: Vec<SelectedField> = Vec::new();
    for req in read_requests(&args.request)? {
        let got =
            extract_selections(fdb, &req, &selections).with_context(|| format!("extract {req}"))?;
        if got.is_empty() {
            bail!("no field matches {req}");
        }
        fields.extend(got);
    }
    let described: Vec<String> = selections.iter().map(describe).collect();
    match form {
        Form::Json => outln!(
            "{}",
            serde_json::to_string(&extract_json::json_items(&fields))?
        )?,
        Form::Csv => csv(&fields, &described)?,
        Form::Covjson => outln!(
            "{}",
            serde_json::to_string(&extract_json::coverage(&fields, &selections))?
        )?,
    }
    Ok(())
}

fn describe(s: &Selection) -> String {
    match s {
        Selection::Range(r) => format!("range {}-{}", r.start, r.end),
        Selection::Point { lat, lon } => format!("point {lat},{lon}"),
        Selection::Box {
            north,
            west,
            south,
            east,
        } => format!("box {north}/{west}/{south}/{east}"),
    }
}

/// One line per field and point: the field's MARS keys, the selection, the point's index and
/// place, the value (empty where missing).
fn csv(fields: &[SelectedField], described: &[String]) -> Result<()> {
    let mut keywords: Vec<String> = Vec::new();
    for f in fields {
        for (k, _) in f.key.iter() {
            if !keywords.iter().any(|x| x == k) {
                keywords.push(k.to_string());
            }
        }
    }
    let mut out = Vec::new();
    writeln!(
        out,
        "{},selection,index,latitude,longitude,value",
        keywords.join(",")
    )?;
    for f in fields {
        let keys: Vec<String> = keywords
            .iter()
            .map(|k| quote(f.key.get(k).unwrap_or("")))
            .collect();
        for (s, what) in f.selections.iter().zip(described) {
            for (n, (&i, &v)) in s.indices.iter().zip(&s.values).enumerate() {
                let (lat, lon) = s
                    .coordinates
                    .get(n)
                    .map(|&(a, b)| (a.to_string(), b.to_string()))
                    .unwrap_or_default();
                let value = if v.is_nan() {
                    String::new()
                } else {
                    v.to_string()
                };
                writeln!(
                    out,
                    "{},{},{i},{lat},{lon},{value}",
                    keys.join(","),
                    quote(what)
                )?;
            }
        }
    }
    out!("{}", String::from_utf8_lossy(&out))?;
    Ok(())
}

fn quote(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}
