//! Whole-database operations on an FDB5 database, changing it as FDB5 5.25 would: purge clears
//! fully masked trees with TOC_CLEAR records and deletes the files nothing visible uses;
//! statistics and dump read the tocs.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::reader::Fdb5Reader;
use super::record::{encode_record, Payload, Writer};
use super::toc::{base_name, TocFile};
use crate::storage::catalogue::{CatalogueReader, DbStats, PurgeReport};
use crate::storage::fs::{FileSystem, OpenMode};
use crate::storage::{CatalogueDump, DumpRecord, StorageError};

/// The uid owning the database: its main toc's first record's.
pub(crate) fn owner(fs: &dyn FileSystem, dir: &Path) -> Result<u32, StorageError> {
    let toc = dir.join("toc");
    let f = fs
        .open(&toc, OpenMode::Read)
        .map_err(StorageError::io("open", &toc))?;
    super::toc::read_init(&*f, &toc).map(|(_, uid)| uid)
}

/// Appends whole records to a toc in one `write()` (FDB5's writers rely on `O_APPEND` writes
/// of whole records; fieldstore's writers also take the toc's `flock`, which FDB5 ignores), then
/// syncs it. A record cut short at the end (a writer killed inside its write) is cut off first,
/// so the new records start where a reader expects one.
pub(crate) fn append(
    fs: &dyn FileSystem,
    toc: &Path,
    payloads: &[Payload],
) -> Result<(), StorageError> {
    let who = Writer::this_process();
    let mut buf = Vec::new();
    for p in payloads {
        buf.extend_from_slice(&encode_record(p, &who));
    }
    let f = fs
        .open(toc, OpenMode::ReadAppend { create: true })
        .map_err(StorageError::io("open", toc))?;
    f.lock(true).map_err(StorageError::io("lock", toc))?;
    let result = (|| {
        let len = f.len().map_err(StorageError::io("stat", toc))?;
        if len > 0 {
            let bytes = f.read_from(0).map_err(StorageError::io("read", toc))?;
            let whole = TocFile::parse(toc, &bytes)?.end;
            if whole < len {
                tracing::warn!(path = %toc.display(), offset = whole, "cutting off a torn record at the end of the toc before appending");
                f.set_len(whole)
                    .map_err(StorageError::io("truncate the torn tail of", toc))?;
            }
        }
        f.append(&buf).map_err(StorageError::io("append to", toc))
    })();
    f.unlock();
    result?;
    f.sync_data().map_err(StorageError::io("sync", toc))
}

pub(crate) fn stats(fs: &Arc<dyn FileSystem>, dir: &Path) -> Result<DbStats, StorageError> {
    let r = Fdb5Reader::open(fs, dir)?;
    let mut s = DbStats {
        index_files: r.indexes().len() as u64,
        journal_records: r.view.records as u64,
        ..Default::default()
    };
    for i in 0..r.indexes().len() {
        for e in r.entries(i, true)? {
            let e = e?;
            if e.masked {
                s.masked += 1;
                s.masked_bytes += e.field.length;
            } else {
                s.fields += 1;
                s.field_bytes += e.field.length;
            }
        }
    }
    Ok(s)
}

/// Data objects the visible indexes name.
pub(crate) fn objects(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
) -> Result<BTreeSet<String>, StorageError> {
    let r = Fdb5Reader::open(fs, dir)?;
    let mut out = BTreeSet::new();
    for ix in r.view.visible() {
        for (_, loc) in &ix.record.uris {
            out.insert(object_name(dir, &ix.data_path(loc)));
        }
    }
    Ok(out)
}

/// A data file as the POSIX store names it: a base name inside the database's directory, else
/// the whole path.
pub(crate) fn object_name(dir: &Path, path: &Path) -> String {
    match path.strip_prefix(dir) {
        Ok(rel) if rel.components().count() == 1 => rel.display().to_string(),
        _ => path.display().to_string(),
    }
}

/// Every record of the tocs in the order FDB5 reads them (a sub-toc's at the place of the record
/// naming it), masked ones included.
pub(crate) fn dump(fs: &dyn FileSystem, dir: &Path) -> Result<CatalogueDump, StorageError> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let toc = dir.join("toc");
    dump_file(fs, &toc, dir, &mut out, &mut seen)?;
    Ok(CatalogueDump {
        journal_bytes: fs.metadata(&toc).ok().map(|m| m.len),
        total_records: out.len() as u64,
        records: out,
    })
}

fn dump_file(
    fs: &dyn FileSystem,
    toc: &Path,
    dir: &Path,
    out: &mut Vec<DumpRecord>,
    seen: &mut HashSet<PathBuf>,
) -> Result<(), StorageError> {
    if !seen.insert(toc.to_path_buf()) {
        return Ok(());
    }
    let file = TocFile::read(fs, toc)?;
    let here = file.dir().to_path_buf();
    for r in &file.records {
        match &r.payload {
            Payload::Init { key, .. } => out.push(DumpRecord::Init {
                db: key.to_key(),
                owner_uid: Some(r.header.uid),
                created: r.header.sec.max(0) as u64,
            }),
            Payload::Index(ix) => out.push(DumpRecord::Index {
                file: format!("{}@{}", object_name(dir, &here.join(&ix.path)), ix.offset),
                index_key: ix.key.to_key(),
                entries: 0,
                timestamp: ix.time.max(0) as u64,
                slot: None,
            }),
            Payload::Clear { path, offset } => out.push(DumpRecord::Clear {
                files: vec![format!("{path}@{offset}")],
            }),
            Payload::SubToc { path } => {
                let sub = here.join(path);
                out.push(DumpRecord::SubToc { path: path.clone() });
                if fs.exists(&sub) {
                    dump_file(fs, &sub, dir, out, seen)?;
                }
            }
        }
    }
    Ok(())
}

/// FDB5's purge: every visible tree all of whose fields are newer elsewhere gets a TOC_CLEAR
/// (its index file's base name and the tree's offset) in the main toc; the report names the data
/// files that only such trees used (for the store to delete) and the index files none of whose
/// visible trees is left. Data files outside the database's directory (adopted, or another
/// database's through an overlay) are never deleted.
pub(crate) fn purge(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
    doit: bool,
) -> Result<PurgeReport, StorageError> {
    let r = Fdb5Reader::open(fs, dir)?;
    let mut report = PurgeReport::default();
    let mut live_data = BTreeSet::new();
    let mut dead_data = BTreeSet::new();
    let mut live_index_files = HashSet::new();
    let mut dead_index_files = BTreeSet::new();
    // Each clear goes into the toc holding the record it masks: FDB5 5.10 applies a toc's
    // masks to its own records only, so a clear in the main toc would not hide a sub-toc's
    // index from it (and it would then fail on the index file purge deletes).
    let mut clears: Vec<(PathBuf, Payload)> = Vec::new();
    let visible: Vec<_> = r.view.visible().cloned().collect();
    for (i, ix) in visible.iter().enumerate() {
        let mut any_live = false;
        for e in r.entries(i, true)? {
            if e?.masked {
                report.masked_fields += 1;
            } else {
                any_live = true;
            }
        }
        let data: Vec<PathBuf> = ix
            .record
            .uris
            .iter()
            .map(|(_, l)| ix.data_path(l))
            .collect();
        if any_live {
            live_data.extend(data);
            live_index_files.insert(ix.index_path());
        } else {
            clears.push((
                ix.toc.clone(),
                Payload::Clear {
                    path: base_name(&ix.record.path).to_string(),
                    offset: ix.record.offset,
                },
            ));
            report.indexes.push(format!(
                "{}@{}",
                object_name(dir, &ix.index_path()),
                ix.record.offset
            ));
            dead_data.extend(data);
            dead_index_files.insert(ix.index_path());
        }
    }
    report.objects = dead_data
        .difference(&live_data)
        .filter(|p| p.parent() == Some(dir))
        .map(|p| object_name(dir, p))
        .collect();
    if doit && !clears.is_empty() {
        let mut tocs: Vec<&PathBuf> = clears.iter().map(|(t, _)| t).collect();
        tocs.dedup();
        for toc in tocs {
            let these: Vec<Payload> = clears
                .iter()
                .filter(|(t, _)| t == toc)
                .map(|(_, p)| p.clone())
                .collect();
            append(&**fs, toc, &these)?;
        }
        for p in dead_index_files.difference(&live_index_files.iter().cloned().collect()) {
            if p.parent() == Some(dir) {
                crate::storage::fs::remove_if_exists(&**fs, p)
                    .map_err(StorageError::io("remove", p))?;
            }
        }
    }
    Ok(report)
}

/// Files of an FDB5 database that no toc record names: index files and sub-tocs no record
/// refers to (a writer killed before its flush was published, or FDB5's "full" index of a writer
/// killed before closing), data files no index names (a writer that has not flushed). FDB5's
/// records carry no writer position, so lost flushes cannot be told from these: each is
/// reported as what it most likely is, none as a loss.
pub(crate) fn check(
    fs: &Arc<dyn FileSystem>,
    dir: &Path,
) -> Result<Vec<crate::storage::catalogue::CheckFinding>, StorageError> {
    use crate::storage::catalogue::{CheckFinding, FindingKind};
    let r = Fdb5Reader::open(fs, dir)?;
    let mut named: HashSet<PathBuf> = HashSet::new();
    for ix in &r.view.indexes {
        named.insert(ix.index_path());
        for (_, loc) in &ix.record.uris {
            named.insert(ix.data_path(loc));
        }
    }
    named.extend(r.view.sub_tocs.iter().cloned());
    let mut out = Vec::new();
    let mut entries = fs.read_dir(dir).map_err(StorageError::io("list", dir))?;
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    for e in entries {
        let name = e.file_name();
        if e.is_dir || named.contains(&e.path) {
            continue;
        }
        let (kind, detail) = if name.ends_with(".index") {
            (
                FindingKind::Unpublished,
                "an index file no toc record names: a flush never published (its writer died), or a full index of a writer killed before closing".to_string(),
            )
        } else if name.ends_with(".data") {
            (
                FindingKind::UnreferencedData,
                "a data file no index names: a writer that has not flushed yet, or one killed before its first flush".to_string(),
            )
        } else if name.starts_with("toc.") {
            (
                FindingKind::Unpublished,
                "a sub-toc no toc record names".to_string(),
            )
        } else {
            continue;
        };
        out.push(CheckFinding {
            file: name,
            kind,
            detail,
        });
    }
    Ok(out)
}
