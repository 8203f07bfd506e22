//! An extraction as JSON, the one form the CLI (`fieldstore extract --json`) and the HTTP API
//! (`/api/v1/extract`) give, and as CoverageJSON (https://covjson.org) in the shape covjsonkit
//! gives Polytope's answers: a point series per point and parameter (time along `t`, valid
//! times from date, time and step), a multi-point coverage per field for boxes and ranges.

use std::collections::BTreeMap;

use serde_json::{json, Map, Value};

use super::extract::{SelectedField, Selection};
use crate::model::Key;

/// `[{"key": {..}, "values": [[..] per selection], "indices": [[..]], "coordinates": [[[lat,
/// lon]..]] (when places were given), "bytes_read": n}]`, one item per field in request order;
/// values `null` where missing.
pub fn json_items(fields: &[SelectedField]) -> Value {
    Value::Array(
        fields
            .iter()
            .map(|f| {
                let mut item = Map::new();
                item.insert("key".into(), metadata(&f.key));
                item.insert(
                    "values".into(),
                    Value::Array(
                        f.selections
                            .iter()
                            .map(|s| Value::Array(s.values.iter().map(|&v| number(v)).collect()))
                            .collect(),
                    ),
                );
                item.insert(
                    "indices".into(),
                    Value::Array(f.selections.iter().map(|s| json!(s.indices)).collect()),
                );
                if f.selections.iter().any(|s| !s.coordinates.is_empty()) {
                    item.insert(
                        "coordinates".into(),
                        Value::Array(
                            f.selections
                                .iter()
                                .map(|s| {
                                    Value::Array(
                                        s.coordinates
                                            .iter()
                                            .map(|&(lat, lon)| json!([lat, lon]))
                                            .collect(),
                                    )
                                })
                                .collect(),
                        ),
                    );
                }
                item.insert("bytes_read".into(), json!(f.bytes_read));
                Value::Object(item)
            })
            .collect(),
    )
}

/// Keywords that place a field in time: series run along them.
const TIME_KEYS: [&str; 3] = ["date", "time", "step"];

/// One value of a point series: valid time, value, grid point (lat, lon).
type SeriesPoint = (String, f64, (f64, f64));

/// The CoverageJSON of an extraction.
pub fn coverage(fields: &[SelectedField], selections: &[Selection]) -> Value {
    let mut coverages = Vec::new();
    let mut parameters = Map::new();
    let point_series = selections
        .iter()
        .all(|s| matches!(s, Selection::Point { .. }));
    for f in fields {
        let param = f.key.get("param").unwrap_or("value").to_string();
        parameters.entry(param.clone()).or_insert_with(|| {
            json!({"type": "Parameter", "observedProperty": {"id": param, "label": {"en": param}}})
        });
    }
    if point_series {
        // One series per (point, field keys other than time): values in valid-time order.
        for (n, _) in selections.iter().enumerate() {
            let mut series: BTreeMap<String, (Key, Vec<SeriesPoint>)> = BTreeMap::new();
            for f in fields {
                let Some(s) = f.selections.get(n) else {
                    continue;
                };
                let (Some(&v), Some(&place)) = (s.values.first(), s.coordinates.first()) else {
                    continue;
                };
                let rest = Key::from_pairs(f.key.iter().filter(|(k, _)| !TIME_KEYS.contains(k)));
                let entry = series
                    .entry(rest.to_string())
                    .or_insert_with(|| (rest.clone(), Vec::new()));
                entry.1.push((valid_time(&f.key), v, place));
            }
            for (_, (rest, mut points)) in series {
                points.sort_by(|a, b| a.0.cmp(&b.0));
                let Some(&(_, _, (lat, lon))) = points.first() else {
                    continue;
                };
                let param = rest.get("param").unwrap_or("value").to_string();
                let mut ranges = Map::new();
                ranges.insert(
                    param,
                    json!({
                        "type": "NdArray",
                        "dataType": "float",
                        "shape": [points.len()],
                        "axisNames": ["t"],
                        "values": points.iter().map(|p| number(p.1)).collect::<Vec<_>>(),
                    }),
                );
                coverages.push(json!({
                    "type": "Coverage",
                    "mars:metadata": metadata(&rest),
                    "domain": {
                        "type": "Domain",
                        "axes": {
                            "latitude": {"values": [lat]},
                            "longitude": {"values": [lon]},
                            "t": {"values": points.iter().map(|p| p.0.clone()).collect::<Vec<_>>()},
                        }
                    },
                    "ranges": ranges,
                }));
            }
        }
    } else {
        for f in fields {
            let param = f.key.get("param").unwrap_or("value").to_string();
            let mut places = Vec::new();
            let mut values = Vec::new();
            for s in &f.selections {
                for (n, &v) in s.values.iter().enumerate() {
                    let (lat, lon) = s
                        .coordinates
                        .get(n)
                        .copied()
                        .unwrap_or((f64::NAN, f64::NAN));
                    places.push(json!([number(lat), number(lon)]));
                    values.push(number(v));
                }
            }
            let mut ranges = Map::new();
            ranges.insert(
                param,
                json!({
                    "type": "NdArray",
                    "dataType": "float",
                    "shape": [values.len()],
                    "axisNames": ["composite"],
                    "values": values,
                }),
            );
            coverages.push(json!({
                "type": "Coverage",
                "mars:metadata": metadata(&f.key),
                "domain": {
                    "type": "Domain",
                    "axes": {
                        "t": {"values": [valid_time(&f.key)]},
                        "composite": {
                            "dataType": "tuple",
                            "coordinates": ["latitude", "longitude"],
                            "values": places,
                        }
                    }
                },
                "ranges": ranges,
            }));
        }
    }
    json!({
        "type": "CoverageCollection",
        "domainType": if point_series { "PointSeries" } else { "MultiPoint" },
        "coverages": coverages,
        "referencing": [{
            "coordinates": ["latitude", "longitude"],
            "system": {"type": "GeographicCRS", "id": "http://www.opengis.net/def/crs/OGC/1.3/CRS84"},
        }],
        "parameters": parameters,
    })
}

fn number(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else {
        Value::Null
    }
}

fn metadata(key: &Key) -> Value {
    Value::Object(
        key.iter()
            .map(|(k, v)| (k.to_string(), Value::String(v.to_string())))
            .collect(),
    )
}

/// `YYYY-MM-DDTHH:MM:SSZ` from date, time and step (hours, or the end of a range); the date
/// alone, or an empty string, where those keys are not all there or not numbers.
fn valid_time(key: &Key) -> String {
    let (Some(date), time) = (key.get("date"), key.get("time").unwrap_or("0000")) else {
        return String::new();
    };
    let (Ok(d), Ok(t)) = (date.parse::<i64>(), time.parse::<i64>()) else {
        return date.to_string();
    };
    let step_hours = key
        .get("step")
        .and_then(|s| s.rsplit('-').next())
        .and_then(|s| s.trim_end_matches('h').parse::<i64>().ok())
        .unwrap_or(0);
    let (y, m, day) = (d / 10000, (d / 100) % 100, d % 100);
    let minutes = days_from_civil(y, m, day) * 1440 + (t / 100) * 60 + t % 100 + step_hours * 60;
    let (days, rem) = (minutes.div_euclid(1440), minutes.rem_euclid(1440));
    let (y, m, d) = civil_from_days(days);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:00Z", rem / 60, rem % 60)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146097 + doe - 719468
}

fn civil_from_days(z: i64) -> (i64, i64, i64) {
    let z = z + 719468;
    let era = z.div_euclid(146097);
    let doe = z - era * 146097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_times_add_the_step_across_month_ends() {
        let k = Key::from_pairs([("date", "20240229"), ("time", "1800"), ("step", "12")]);
        assert_eq!(valid_time(&k), "2024-03-01T06:00:00Z");
        let k = Key::from_pairs([("date", "20231231"), ("time", "0000"), ("step", "0-24")]);
        assert_eq!(valid_time(&k), "2024-01-01T00:00:00Z");
        for days in [-1000, 0, 19000, 60000] {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }
}
