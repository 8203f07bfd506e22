//! Extraction through the api: the values at ranges of grid points of every field a request
//! names. Where the catalogue kept a field's extraction information (taken at archive time),
//! only the bytes those points need are read: a few hundred bytes of a 13 MB field for a point,
//! by ranged GETs on S3. Without it (older catalogues, FDB5's format, a field streamed in) the
//! field is read whole and decoded from memory.

use std::ops::Range;
use std::sync::Mutex;

use super::error::ApiError;
use super::local::Located;
use super::reader::DataReader;
use crate::extract::{extract_message, ExtractInfo, RangeValues};
use crate::model::Key;
use crate::storage::sidecar::{head_crc, SideEntry, HEAD};
use crate::storage::{SideMap, Store};
use std::collections::{HashMap, VecDeque};

/// One field's values: its full MARS key and, per range asked for, the values (NaN where
/// missing) and the mask of present points.
#[derive(Debug, Clone, PartialEq)]
pub struct Extraction {
    pub key: Key,
    pub ranges: Vec<RangeValues>,
    /// Bytes of the field read to answer (its length when read whole).
    pub bytes_read: u64,
    /// md5 of the field's grid section (ecCodes' `md5GridSection`): fields answer for the same
    /// points only when it is the same.
    pub grid_md5: Option<[u8; 16]>,
}

/// Fields read at once, each by its own thread: ranged reads of objects far away (S3) wait on
/// the network, not on a core.
const PARALLEL_FIELDS: usize = 16;

/// Extracts from fields located in a store, in their order.
pub(super) fn extract_located(
    store: &dyn Store,
    located: &VecDeque<Located>,
    ranges: &[Range<u64>],
) -> Result<Vec<Extraction>, ApiError> {
    check_ranges(ranges)?;
    let sides = side_entries(store, located);
    let located: Vec<(&Located, Option<&SideEntry>)> = located
        .iter()
        .zip(sides.iter().map(Option::as_ref))
        .collect();
    let threads = if store.kind() == "s3" {
        PARALLEL_FIELDS
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
    .min(located.len());
    if threads <= 1 {
        return located
            .iter()
            .map(|(l, side)| one(store, l, *side, ranges))
            .collect();
    }
    let next = std::sync::atomic::AtomicUsize::new(0);
    let results: Vec<Mutex<Option<Result<Extraction, ApiError>>>> =
        located.iter().map(|_| Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((l, side)) = located.get(i) else {
                    break;
                };
                let r = one(store, l, *side, ranges);
                if let Ok(mut slot) = results[i].lock() {
                    *slot = Some(r);
                }
            });
        }
    });
    results
        .into_iter()
        .map(|slot| {
            slot.into_inner().ok().flatten().unwrap_or_else(|| {
                Err(ApiError::Config(
                    "an extraction thread stopped without an answer".into(),
                ))
            })
        })
        .collect()
}

/// For each field whose catalogue entry has no extraction information, the side file's entry
/// for it, if any (`storage::sidecar`: FDB5's format, fields stored before information was
/// kept, `fieldstore extract-index`). Each side file is read once per call. One that cannot be
/// read is as good as missing: those fields are decoded whole, as without it.
fn side_entries(store: &dyn Store, located: &VecDeque<Located>) -> Vec<Option<SideEntry>> {
    let mut files: HashMap<(&str, &str), SideMap> = HashMap::new();
    located
        .iter()
        .map(|l| {
            if l.field.extract.is_some() {
                return None;
            }
            let map = files
                .entry((l.db.id.as_str(), l.field.object.as_str()))
                .or_insert_with(|| {
                    store
                        .side_entries(&l.db, &l.field.object)
                        .unwrap_or_default()
                });
            map.get(&l.field.offset)
                .filter(|e| e.length == l.field.length)
                .cloned()
        })
        .collect()
}

/// Bytes between two planned pieces an S3 store fetches rather than asking twice.
const S3_GAP: u64 = 64 << 10;

fn coalesce(plan: Vec<Range<u64>>, gap: u64) -> Vec<Range<u64>> {
    let mut out: Vec<Range<u64>> = Vec::with_capacity(plan.len());
    for p in plan {
        match out.last_mut() {
            Some(last) if p.start <= last.end.saturating_add(gap) => last.end = last.end.max(p.end),
            _ => out.push(p),
        }
    }
    out
}

/// One field: through its stored extraction information when there is some (in its catalogue
/// entry, else in a side file whose record still matches the field's first bytes), else whole.
fn one(
    store: &dyn Store,
    l: &Located,
    side: Option<&SideEntry>,
    ranges: &[Range<u64>],
) -> Result<Extraction, ApiError> {
    let key = full_key(l);
    let mut checked = 0;
    let (info, from_side) = match (&l.field.extract, side) {
        (Some(x), _) => (Some(ExtractInfo::decode(x).map_err(ApiError::from)?), false),
        (None, Some(e)) => {
            let (fresh, read) = side_is_fresh(store, l, e)?;
            checked = read;
            // Damaged side information is as good as none: the field is decoded whole.
            (
                fresh.then(|| ExtractInfo::decode(&e.info).ok()).flatten(),
                true,
            )
        }
        (None, None) => (None, false),
    };
    if let Some(info) = info.filter(|i| i.total_length == l.field.length) {
        match ranged(store, l, &info, ranges, &key) {
            Ok((out, read)) => {
                return Ok(Extraction {
                    key,
                    ranges: out,
                    bytes_read: checked + read,
                    grid_md5: info.md5_grid_section,
                })
            }
            // A side file is not the catalogue: information in it that does not fit the bytes
            // (a data file changed past the bytes the check covers) is no reason to fail; the
            // field is decoded whole, and a real fault of the request or the bytes shows there.
            Err(_) if from_side => {}
            Err(e) => return Err(e),
        }
    }
    let bytes = store.read(&l.db, &l.field)?;
    let (out, grid_md5) = whole(&bytes, ranges).map_err(|e| in_field(e, &key, store, l))?;
    Ok(Extraction {
        key,
        ranges: out,
        bytes_read: checked + l.field.length,
        grid_md5,
    })
}

/// A field's values at the ranges through its extraction information: only the planned pieces
/// read. Returns them with the bytes read.
fn ranged(
    store: &dyn Store,
    l: &Located,
    info: &ExtractInfo,
    ranges: &[Range<u64>],
    key: &Key,
) -> Result<(Vec<RangeValues>, u64), ApiError> {
    let named = |e: crate::extract::ExtractError| {
        ApiError::Invalid(format!(
            "{} ({}): {e}",
            key,
            store.uri(&l.db, &l.field.object)
        ))
    };
    let mut plan = info.plan(ranges).map_err(|e| in_field(e, key, store, l))?;
    if store.kind() == "s3" {
        // A GET costs a round trip: pieces closer than this are fetched as one (a box's rows).
        plan = coalesce(plan, S3_GAP);
    }
    let object = store.open_object(&l.db, &l.field.object)?;
    let mut pieces: Vec<(Range<u64>, Vec<u8>)> = Vec::with_capacity(plan.len());
    let mut bytes_read = 0;
    for p in plan {
        let len = usize::try_from(p.end - p.start).map_err(|_| named(too_large(&p)))?;
        let mut buf = vec![0u8; len];
        let n = object.read_at(l.field.offset + p.start, &mut buf)?;
        if n < len {
            return Err(ApiError::Storage(crate::storage::StorageError::Corrupt {
                path: store.uri(&l.db, &l.field.object).into(),
                offset: l.field.offset + p.start + n as u64,
                detail: format!(
                    "the field {key} ends early: {len} bytes wanted at offset {}, {n} there",
                    l.field.offset + p.start
                ),
            }));
        }
        bytes_read += len as u64;
        pieces.push((p, buf));
    }
    let fetched: Vec<crate::extract::Fetched<'_>> = pieces
        .iter()
        .map(|(r, b)| (r.clone(), b.as_slice()))
        .collect();
    let out = info
        .extract(ranges, &fetched)
        .map_err(|e| in_field(e, key, store, l))?;
    Ok((out, bytes_read))
}

/// Whether a side file's record still describes the field: the CRC-32C of the field's first
/// bytes as they are now against the one recorded (a data file replaced under the same name
/// holds other fields). Returns it with the bytes read to know.
pub(super) fn side_is_fresh(
    store: &dyn Store,
    l: &Located,
    e: &SideEntry,
) -> Result<(bool, u64), ApiError> {
    let object = store.open_object(&l.db, &l.field.object)?;
    let mut head = vec![0u8; l.field.length.min(HEAD) as usize];
    let n = object.read_at(l.field.offset, &mut head)?;
    Ok((n == head.len() && head_crc(&head) == e.head_crc, n as u64))
}

/// A message in memory: its values at the ranges, and its grid's md5.
fn whole(
    bytes: &[u8],
    ranges: &[Range<u64>],
) -> Result<(Vec<RangeValues>, Option<[u8; 16]>), crate::extract::ExtractError> {
    let info = ExtractInfo::build(bytes)?;
    let md5 = info.md5_grid_section;
    Ok((extract_message(bytes, ranges)?, md5))
}

/// An extraction error of one field, naming it: bad ranges stay bad requests, damage stays
/// damage.
fn in_field(
    e: crate::extract::ExtractError,
    key: &Key,
    store: &dyn Store,
    l: &Located,
) -> ApiError {
    let message = format!(
        "field {key} ({} at offset {}): {e}",
        store.uri(&l.db, &l.field.object),
        l.field.offset
    );
    named_error(&e, message)
}

/// An extraction error under a message naming its field, keeping its kind.
fn named_error(e: &crate::extract::ExtractError, message: String) -> ApiError {
    match e.kind() {
        crate::error_kind::ErrorKind::BadRequest => ApiError::Invalid(message),
        kind => ApiError::Children {
            summary: message,
            kind,
        },
    }
}

fn too_large(p: &Range<u64>) -> crate::extract::ExtractError {
    crate::extract::ExtractError::corrupt(p.start, "a piece larger than memory can address")
}

/// Extracts from a retrieve's stream: every field read whole (frontends without a store of
/// their own: remote servers, composed frontends).
pub(super) fn extract_retrieved(
    mut reader: Box<dyn DataReader>,
    ranges: &[Range<u64>],
) -> Result<Vec<Extraction>, ApiError> {
    check_ranges(ranges)?;
    let spans = reader.fields().to_vec();
    let mut out = Vec::with_capacity(spans.len());
    for span in spans {
        let len = usize::try_from(span.length).map_err(|_| {
            ApiError::Invalid(format!(
                "field {} is larger than memory can address",
                span.key.porcelain()
            ))
        })?;
        let mut bytes = vec![0u8; len];
        std::io::Read::read_exact(&mut reader, &mut bytes).map_err(|e| {
            ApiError::Config(format!(
                "reading field {} for extraction: {e}",
                span.key.porcelain()
            ))
        })?;
        let key = joined(&span.key.db, &span.key.index, &span.key.datum);
        let (values, grid_md5) =
            whole(&bytes, ranges).map_err(|e| named_error(&e, format!("field {key}: {e}")))?;
        out.push(Extraction {
            key,
            ranges: values,
            bytes_read: span.length,
            grid_md5,
        });
    }
    Ok(out)
}

/// Ranges are checked once for all fields (each field checks them against its point count).
fn check_ranges(ranges: &[Range<u64>]) -> Result<(), ApiError> {
    if ranges.is_empty() {
        return Err(ApiError::Invalid(
            "no ranges to extract: give at least one range of grid points (e.g. 0-10)".into(),
        ));
    }
    for (i, r) in ranges.iter().enumerate() {
        if r.start >= r.end {
            return Err(ApiError::Invalid(format!(
                "range {}-{} is empty: a range is LO-HI with LO < HI (HI excluded)",
                r.start, r.end
            )));
        }
        if let Some(prev) = i.checked_sub(1).and_then(|p| ranges.get(p)) {
            if r.start < prev.end {
                return Err(ApiError::Invalid(format!(
                    "ranges {}-{} and {}-{} overlap or are out of order: give them sorted and apart",
                    prev.start, prev.end, r.start, r.end
                )));
            }
        }
    }
    Ok(())
}

fn full_key(l: &Located) -> Key {
    joined(&l.db.key, &l.index, &l.datum)
}

fn joined(db: &Key, index: &Key, datum: &Key) -> Key {
    Key::from_pairs(
        db.iter()
            .chain(index.iter())
            .chain(datum.iter())
            .filter(|(_, v)| !v.is_empty()),
    )
}

/// What to extract, in the terms a user gives: grid-point ranges, or places on the grid.
#[derive(Debug, Clone, PartialEq)]
pub enum Selection {
    /// Grid points `lo..hi` (half-open, in the field's point order).
    Range(Range<u64>),
    /// The grid point nearest to a latitude and longitude (degrees).
    Point { lat: f64, lon: f64 },
    /// The grid points inside a box (degrees), one range per row.
    Box {
        north: f64,
        west: f64,
        south: f64,
        east: f64,
    },
}

/// One field's answer to selections: per selection, the points chosen and their values.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectedField {
    pub key: Key,
    pub selections: Vec<SelectedValues>,
    pub bytes_read: u64,
}

/// The points of one selection (grid indices, with their latitude and longitude where the
/// grid is known) and the field's values there (NaN where missing).
#[derive(Debug, Clone, PartialEq)]
pub struct SelectedValues {
    pub indices: Vec<u64>,
    pub coordinates: Vec<(f64, f64)>,
    pub values: Vec<f64>,
}

/// Extracts selections from every field a request names. Places are turned into grid points
/// on the grid of the first field (read whole once); every field must be on that grid (the
/// same `md5GridSection`), as GribJump requires of one request.
pub fn extract_selections(
    fdb: &dyn super::Fdb,
    request: &crate::model::request::Request,
    selections: &[Selection],
) -> Result<Vec<SelectedField>, ApiError> {
    if selections.is_empty() {
        return Err(ApiError::Invalid(
            "nothing to extract: give --range LO-HI, --point LAT,LON or --box N/W/S/E".into(),
        ));
    }
    // Places are checked before anything is read.
    for s in selections {
        match s {
            Selection::Range(r) if r.start >= r.end => {
                return Err(ApiError::Invalid(format!(
                    "range {}-{} is empty: a range is LO-HI with LO < HI (HI excluded)",
                    r.start, r.end
                )))
            }
            Selection::Point { lat, lon } => check_place(*lat, *lon)?,
            Selection::Box {
                north,
                west,
                south,
                east,
            } => {
                check_place(*north, *west)?;
                check_place(*south, *east)?;
                if north < south {
                    return Err(ApiError::Invalid(format!(
                        "box {north}/{west}/{south}/{east}: north ({north}) is south of south ({south}); a box is N/W/S/E"
                    )));
                }
            }
            Selection::Range(_) => {}
        }
    }
    let places = selections.iter().any(|s| !matches!(s, Selection::Range(_)));
    let (grid, grid_md5) = if places {
        let (g, m) = first_grid(fdb, request)?;
        (Some(g), m)
    } else {
        (None, None)
    };
    // Each selection as ranges, then all of them merged into the sorted, disjoint ranges one
    // extraction takes.
    let mut wanted: Vec<Vec<Range<u64>>> = Vec::with_capacity(selections.len());
    for s in selections {
        wanted.push(match (s, &grid) {
            (Selection::Range(r), _) => vec![r.clone()],
            (Selection::Point { lat, lon }, Some(g)) => {
                let i = g
                    .nearest(*lat, *lon)
                    .ok_or_else(|| ApiError::Invalid(format!("no grid point near {lat},{lon}")))?;
                std::iter::once(i..i + 1).collect()
            }
            (
                Selection::Box {
                    north,
                    west,
                    south,
                    east,
                },
                Some(g),
            ) => {
                let rows = g.box_ranges(*north, *west, *south, *east);
                if rows.is_empty() {
                    return Err(ApiError::Invalid(format!(
                        "box {north}/{west}/{south}/{east} holds no grid point"
                    )));
                }
                rows
            }
            (_, None) => Vec::new(),
        });
    }
    let mut merged: Vec<Range<u64>> = wanted.iter().flatten().cloned().collect();
    merged.sort_by_key(|r| (r.start, r.end));
    let mut disjoint: Vec<Range<u64>> = Vec::with_capacity(merged.len());
    for r in merged {
        match disjoint.last_mut() {
            Some(last) if r.start <= last.end => last.end = last.end.max(r.end),
            _ => disjoint.push(r),
        }
    }
    let fields = fdb.extract(request, &disjoint)?;
    let mut out = Vec::with_capacity(fields.len());
    for f in fields {
        if let (Some(first), Some(this)) = (grid_md5, f.grid_md5) {
            if first != this {
                return Err(ApiError::Invalid(format!(
                    "field {} is on another grid than the first field the request names (md5GridSection {} against {}): extract fields of each grid separately",
                    f.key,
                    hex(&this),
                    hex(&first)
                )));
            }
        }
        let mut sels = Vec::with_capacity(wanted.len());
        for ranges in &wanted {
            let mut v = SelectedValues {
                indices: Vec::new(),
                coordinates: Vec::new(),
                values: Vec::new(),
            };
            for r in ranges {
                // Where this range lies in the merged ranges (it lies inside one).
                let k = disjoint.partition_point(|d| d.end <= r.start);
                let (Some(d), Some(got)) = (disjoint.get(k), f.ranges.get(k)) else {
                    continue;
                };
                let from = (r.start - d.start) as usize;
                let to = (r.end - d.start) as usize;
                if let Some(vals) = got.values.get(from..to) {
                    v.values.extend_from_slice(vals);
                }
                for i in r.clone() {
                    v.indices.push(i);
                    if let Some(p) = grid.as_ref().and_then(|g| g.point(i)) {
                        v.coordinates.push(p);
                    }
                }
            }
            sels.push(v);
        }
        out.push(SelectedField {
            key: f.key,
            selections: sels,
            bytes_read: f.bytes_read,
        });
    }
    Ok(out)
}

fn check_place(lat: f64, lon: f64) -> Result<(), ApiError> {
    if !lat.is_finite() || !lon.is_finite() || !(-90.0..=90.0).contains(&lat) {
        return Err(ApiError::Invalid(format!(
            "{lat},{lon} is not a place: latitude within -90..90 and a finite longitude"
        )));
    }
    Ok(())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The grid of the first field a request names (read whole, once).
fn first_grid(
    fdb: &dyn super::Fdb,
    request: &crate::model::request::Request,
) -> Result<(crate::extract::Grid, Option<[u8; 16]>), ApiError> {
    let mut reader = fdb.retrieve(request)?;
    let Some(first) = reader.fields().first().cloned() else {
        return Err(ApiError::NothingMatched(format!(
            "no field matches {request}"
        )));
    };
    let len = usize::try_from(first.length)
        .map_err(|_| ApiError::Invalid("a field larger than memory can address".into()))?;
    let mut bytes = vec![0u8; len];
    std::io::Read::read_exact(&mut reader, &mut bytes).map_err(|e| {
        ApiError::Config(format!(
            "reading field {} for its grid: {e}",
            first.key.porcelain()
        ))
    })?;
    let grid = crate::extract::Grid::from_message(&bytes)?;
    let md5 = ExtractInfo::build(&bytes)
        .ok()
        .and_then(|i| i.md5_grid_section);
    Ok((grid, md5))
}
