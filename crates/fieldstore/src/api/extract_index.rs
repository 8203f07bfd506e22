//! `extract-index`: extraction information for fields stored without it (FDB5's format, which
//! has no room for it, whether FDB5 or fieldstore wrote them; fieldstore databases from before
//! it was kept; fields streamed in), so that extracting from them reads only the bytes a few
//! points need, as for fields archived since.
//!
//! Each field is read once, its information built as at archive time, and appended to the side
//! file of its data file (`storage::sidecar`), one whole record per field, checked when read:
//! what a killed run wrote is complete and kept, and the next run skips it (a field already
//! described, in its catalogue entry or by a side file record that still matches it, is not
//! read again). So the command is resumable and idempotent, and a field is extracted through its
//! new information exactly when its record is whole; until then it is decoded whole, with the
//! same values.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use super::error::ApiError;
use super::local::Located;
use crate::storage::sidecar::{head_crc, SideEntry, HEAD};
use crate::storage::{DbRef, Store};

/// Called as fields are done: (fields looked at, fields the request names).
pub type ExtractIndexProgress = Arc<dyn Fn(u64, u64) + Send + Sync>;

#[derive(Clone, Default)]
pub struct ExtractIndexOptions {
    /// Count what would be added; write nothing (fields are still read, to know).
    pub dry_run: bool,
    pub progress: Option<ExtractIndexProgress>,
}

/// What a run did, in fields of the request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtractIndexReport {
    /// Fields the request names.
    pub fields: u64,
    /// Those already described (catalogue entry or side file): not read.
    pub already: u64,
    /// Those described now (or, in a dry run, that would be).
    pub added: u64,
    /// Those left without: smaller than `extract::INFO_MIN_LENGTH` (read whole anyway) or not
    /// GRIB this reader can describe (decoded whole, as before).
    pub left: u64,
    /// Bytes of fields read.
    pub bytes_read: u64,
    /// Side files written to.
    pub side_files: u64,
}

/// Fields a record is appended after: a run killed part way loses at most this many fields'
/// work, and a side file gets few appends.
const BATCH: usize = 256;

/// Adds extraction information to the located fields that have none.
pub(super) fn run(
    store: &dyn Store,
    located: &VecDeque<Located>,
    options: &ExtractIndexOptions,
) -> Result<ExtractIndexReport, ApiError> {
    let mut report = ExtractIndexReport {
        fields: located.len() as u64,
        ..Default::default()
    };
    let total = report.fields;
    let progress = |done: u64| {
        if let Some(p) = &options.progress {
            p(done, total);
        }
    };
    // The fields without catalogue information, by database and data file, in offset order:
    // each data file is read forwards once.
    let mut by_object: BTreeMap<(&str, &str), (&DbRef, Vec<&Located>)> = BTreeMap::new();
    for l in located {
        if l.field.extract.is_some() {
            report.already += 1;
        } else {
            by_object
                .entry((l.db.id.as_str(), l.field.object.as_str()))
                .or_insert_with(|| (&l.db, Vec::new()))
                .1
                .push(l);
        }
    }
    let mut done = report.already;
    progress(done);
    for ((_, object), (db, mut fields)) in by_object {
        fields.sort_by_key(|l| l.field.offset);
        fields.dedup_by_key(|l| (l.field.offset, l.field.length));
        let existing = store.side_entries(db, object)?;
        let mut batch: Vec<SideEntry> = Vec::new();
        let mut wrote = false;
        for l in &fields {
            if let Some(e) = existing
                .get(&l.field.offset)
                .filter(|e| e.length == l.field.length)
            {
                if still_matches(store, l, e)? {
                    report.already += 1;
                    done += 1;
                    progress(done);
                    continue;
                }
            }
            let bytes = store.read(db, &l.field)?;
            report.bytes_read += bytes.len() as u64;
            match crate::extract::catalogue_info(&bytes) {
                Some(info) => {
                    report.added += 1;
                    let head = &bytes[..bytes.len().min(HEAD as usize)];
                    batch.push(SideEntry {
                        offset: l.field.offset,
                        length: l.field.length,
                        head_crc: head_crc(head),
                        info,
                    });
                }
                None => report.left += 1,
            }
            if batch.len() >= BATCH {
                wrote |= flush(store, db, object, &mut batch, options.dry_run)?;
            }
            done += 1;
            progress(done);
        }
        wrote |= flush(store, db, object, &mut batch, options.dry_run)?;
        report.side_files += u64::from(wrote);
    }
    // Duplicates of one place (the same field listed twice) count as looked at.
    progress(total);
    Ok(report)
}

/// Appends a batch to the side file (unless a dry run); whether anything was to be written.
fn flush(
    store: &dyn Store,
    db: &DbRef,
    object: &str,
    batch: &mut Vec<SideEntry>,
    dry_run: bool,
) -> Result<bool, ApiError> {
    if batch.is_empty() {
        return Ok(false);
    }
    if !dry_run {
        store.add_side_entries(db, object, batch)?;
    }
    batch.clear();
    Ok(true)
}

/// Whether a side file's record still describes the field (its first bytes unchanged, its
/// information readable).
fn still_matches(store: &dyn Store, l: &Located, e: &SideEntry) -> Result<bool, ApiError> {
    let (fresh, _) = super::extract::side_is_fresh(store, l, e)?;
    Ok(fresh && crate::extract::ExtractInfo::decode(&e.info).is_ok())
}

#[cfg(test)]
mod tests {
    use crate::api::testing::local;
    use crate::api::{ExtractIndexOptions, Fdb};
    use crate::grib;

    const REQ: &str =
        "class=od,stream=oper,type=fc,expver=0001,date=20260101,time=0000,step=6,levtype=sfc,param=167";

    /// A field streamed into fieldstore's own format has no information in its catalogue
    /// entry (as in databases from before it was kept): extract reads it whole until
    /// extract-index describes it in a side file, then only the point's bytes, with the same
    /// values; a second run reads nothing.
    #[test]
    fn fields_stored_without_information_get_it_beside_their_data_file() {
        let dir = tempfile::tempdir().unwrap();
        let f = local(dir.path());
        let keys = [
            ("class", "od"),
            ("stream", "oper"),
            ("type", "fc"),
            ("expver", "0001"),
            ("date", "20260101"),
            ("time", "0000"),
            ("step", "6"),
            ("levtype", "sfc"),
            ("param", "167"),
        ];
        let msg = grib::sample::make_field(&keys, 65160, 1).unwrap();
        let key = grib::mars_keys(&msg).unwrap();
        f.archive_grib_from(&key, msg.len() as u64, &mut &msg[..])
            .unwrap();
        f.flush().unwrap();
        let req = crate::model::request::parse_request(REQ).unwrap();
        let ranges = [100..101, 40000..40010];
        let before = f.extract(&req, &ranges).unwrap();
        assert_eq!(before[0].bytes_read, msg.len() as u64, "read whole");

        let dry = ExtractIndexOptions {
            dry_run: true,
            progress: None,
        };
        let r = f.extract_index(&req, &dry).unwrap();
        assert_eq!((r.fields, r.added, r.already, r.side_files), (1, 1, 0, 1));
        assert_eq!(
            f.extract(&req, &ranges).unwrap()[0].bytes_read,
            msg.len() as u64
        );

        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let s = seen.clone();
        let options = ExtractIndexOptions {
            dry_run: false,
            progress: Some(std::sync::Arc::new(move |done, total| {
                s.lock().unwrap().push((done, total))
            })),
        };
        let r = f.extract_index(&req, &options).unwrap();
        assert_eq!((r.added, r.already, r.left), (1, 0, 0));
        assert_eq!(r.bytes_read, msg.len() as u64);
        assert_eq!(seen.lock().unwrap().last(), Some(&(1, 1)));
        let after = f.extract(&req, &ranges).unwrap();
        assert_eq!(after[0].ranges, before[0].ranges);
        assert!(after[0].bytes_read < 1024, "{}", after[0].bytes_read);

        let again = f.extract_index(&req, &options).unwrap();
        assert_eq!((again.added, again.already, again.bytes_read), (0, 1, 0));
    }

    #[test]
    fn a_memory_store_refuses_naming_why() {
        let f = crate::api::testing::memory();
        let req = crate::model::request::parse_request(REQ).unwrap();
        let e = f
            .extract_index(&req, &ExtractIndexOptions::default())
            .unwrap_err()
            .to_string();
        assert!(e.contains("memory"), "{e}");
    }
}
