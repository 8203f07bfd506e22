//! Reading a database's toc as FDB5 5.25 does: each toc file's clear records mask the
//! (file name, offset) pairs they name, or everything before them (`*`); a sub-toc's records
//! are read at the place of the record that names it, under its parent's masks too; the
//! visible indexes, newest (last read) first.

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::record::{Header, IndexRecord, Payload, RecordKey, HEADER, MAX_PAYLOAD, ROUND};
use crate::storage::fs::FileSystem;
use crate::storage::StorageError;

/// One record of a toc file, decoded.
#[derive(Debug, Clone)]
pub(crate) struct Record {
    pub header: Header,
    pub offset: u64,
    pub payload: Payload,
}

/// A toc file's records, and where its last whole record ends.
#[derive(Debug, Clone)]
pub(crate) struct TocFile {
    pub path: PathBuf,
    pub records: Vec<Record>,
    pub end: u64,
}

/// Whether these bytes start an FDB5 toc (a record header with a known tag and version), as
/// opposed to fieldstore's own journal (`FSTC`).
pub(crate) fn looks_like_fdb5(head: &[u8]) -> bool {
    head.len() >= 8
        && matches!(head[0], b't' | b'i' | b'c' | b's')
        && head[1..4] == [0, 0, 0]
        && matches!(
            u32::from_le_bytes([head[4], head[5], head[6], head[7]]),
            1..=3
        )
}

impl TocFile {
    /// Reads every record. A last record cut short (a writer that died inside its one
    /// `write()`) is left out, as if it had not been written.
    pub fn read(fs: &dyn FileSystem, path: &Path) -> Result<TocFile, StorageError> {
        let bytes = fs.read(path).map_err(StorageError::io("read", path))?;
        Self::parse(path, &bytes)
    }

    pub fn parse(path: &Path, bytes: &[u8]) -> Result<TocFile, StorageError> {
        let corrupt = |offset: usize, detail: String| StorageError::Corrupt {
            path: path.to_path_buf(),
            offset: offset as u64,
            detail,
        };
        let mut records = Vec::new();
        let mut pos = 0usize;
        while pos < bytes.len() {
            let Some(header) = bytes.get(pos..pos + HEADER).and_then(Header::decode) else {
                break;
            };
            if !(1..=3).contains(&header.version) {
                return Err(corrupt(
                    pos,
                    format!(
                        "record serialisation version {} (FDB5 writes 1 to 3)",
                        header.version
                    ),
                ));
            }
            let size = header.size;
            if size < HEADER as u64
                || size % ROUND as u64 != 0
                || size > (MAX_PAYLOAD + HEADER + ROUND) as u64
            {
                return Err(corrupt(
                    pos,
                    format!("record size {size} is not a valid one"),
                ));
            }
            if !matches!(header.tag, b't' | b'i' | b'c' | b's') {
                return Err(corrupt(
                    pos,
                    format!("unknown record tag {:#04x}", header.tag),
                ));
            }
            let size = size as usize;
            let Some(body) = bytes.get(pos + HEADER..pos + size) else {
                break;
            };
            let payload = Payload::decode(&header, body).map_err(|e| {
                corrupt(
                    pos + HEADER + e.offset,
                    format!("{} record: {}", header.tag_name(), e.detail),
                )
            })?;
            records.push(Record {
                header,
                offset: pos as u64,
                payload,
            });
            pos += size;
        }
        Ok(TocFile {
            path: path.to_path_buf(),
            records,
            end: pos as u64,
        })
    }

    pub fn dir(&self) -> &Path {
        self.path.parent().unwrap_or(Path::new("."))
    }

    /// The database key and owner: the first record's, which must be an init record.
    pub fn init(&self) -> Result<(&RecordKey, u32, &Header), StorageError> {
        match self.records.first() {
            Some(Record {
                header,
                payload: Payload::Init { key, .. },
                ..
            }) => Ok((key, header.uid, header)),
            _ => Err(StorageError::Corrupt {
                path: self.path.clone(),
                offset: 0,
                detail: "the toc does not start with a TOC_INIT record".into(),
            }),
        }
    }
}

/// The last component of a path as FDB5 5.25 compares masks: by base name.
pub(crate) fn base_name(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

type Mask = HashSet<(String, i64)>;

fn masks_of(file: &TocFile) -> Mask {
    let mut masked = Mask::new();
    for (i, r) in file.records.iter().enumerate() {
        if let Payload::Clear { path, offset } = &r.payload {
            if path == "*" {
                for earlier in &file.records[..i] {
                    match &earlier.payload {
                        Payload::Index(ix) => {
                            masked.insert((base_name(&ix.path).to_string(), ix.offset));
                        }
                        Payload::SubToc { path } => {
                            masked.insert((base_name(path).to_string(), 0));
                        }
                        _ => {}
                    }
                }
            } else {
                masked.insert((base_name(path).to_string(), *offset));
            }
        }
    }
    masked
}

/// An index record as a reader sees it, with the directory its relative names start from.
#[derive(Debug, Clone)]
pub(crate) struct SeenIndex {
    pub record: IndexRecord,
    /// The directory of the toc file holding the record.
    pub dir: PathBuf,
    /// The toc file holding the record.
    pub toc: PathBuf,
    pub visible: bool,
    /// When it became visible (microseconds since the epoch): its record's write time, or the
    /// time of the record naming its sub-toc if that is later (the sub-toc was written first).
    pub visible_at: u64,
}

impl SeenIndex {
    /// The index file.
    pub fn index_path(&self) -> PathBuf {
        self.dir.join(&self.record.path)
    }

    /// A data file named in the record's URI store, as a path.
    pub fn data_path(&self, location: &str) -> PathBuf {
        let loc = location.strip_prefix("file://").unwrap_or(location);
        self.dir.join(loc)
    }
}

/// The database as its tocs describe it.
#[derive(Debug, Clone)]
pub(crate) struct TocView {
    pub key: RecordKey,
    /// Every index record met in walk order (masked ones flagged), oldest first.
    pub indexes: Vec<SeenIndex>,
    /// The sub-tocs read (visible ones).
    pub sub_tocs: Vec<PathBuf>,
    pub records: usize,
}

impl TocView {
    /// Visible indexes, newest first.
    pub fn visible(&self) -> impl Iterator<Item = &SeenIndex> {
        self.indexes.iter().rev().filter(|i| i.visible)
    }

    pub fn read(fs: &dyn FileSystem, dir: &Path) -> Result<TocView, StorageError> {
        let main = TocFile::read(fs, &dir.join("toc"))?;
        let (key, _, _) = main.init()?;
        let mut view = TocView {
            key: key.clone(),
            indexes: Vec::new(),
            sub_tocs: Vec::new(),
            records: 0,
        };
        let mut open = vec![main.path.clone()];
        walk(fs, &main, &Mask::new(), 0, &mut view, &mut open)?;
        Ok(view)
    }
}

/// Where an absolute sub-toc path that no longer exists went when the store was moved or
/// copied (5.10 wrote absolute paths): beside this toc (a writer's sub-toc), or in the sibling
/// database of the same name (an overlay of another database of the root).
fn moved_sub_toc(fs: &dyn FileSystem, file: &TocFile, path: &str) -> Option<PathBuf> {
    let base = base_name(path);
    let beside = file.dir().join(base);
    if beside != file.path && fs.exists(&beside) {
        return Some(beside);
    }
    let db_name = Path::new(path).parent()?.file_name()?;
    let sibling = file.dir().parent()?.join(db_name).join(base);
    (sibling != file.path && fs.exists(&sibling)).then_some(sibling)
}

/// A record's write time in microseconds since the epoch.
pub(crate) fn micros(h: &Header) -> u64 {
    (h.sec.max(0) as u64)
        .saturating_mul(1_000_000)
        .saturating_add(h.usec.clamp(0, 999_999) as u64)
}

/// Nested sub-tocs deeper than this are refused (they would be a loop of overlays).
const MAX_DEPTH: usize = 16;

fn walk(
    fs: &dyn FileSystem,
    file: &TocFile,
    parent: &Mask,
    named_at: u64,
    view: &mut TocView,
    open: &mut Vec<PathBuf>,
) -> Result<(), StorageError> {
    let mut masks = masks_of(file);
    masks.extend(parent.iter().cloned());
    view.records += file.records.len();
    for r in &file.records {
        match &r.payload {
            Payload::Index(ix) => {
                let visible = !masks.contains(&(base_name(&ix.path).to_string(), ix.offset));
                view.indexes.push(SeenIndex {
                    record: ix.clone(),
                    dir: file.dir().to_path_buf(),
                    toc: file.path.clone(),
                    visible,
                    visible_at: micros(&r.header).max(named_at),
                });
            }
            Payload::SubToc { path } => {
                if masks.contains(&(base_name(path).to_string(), 0)) {
                    continue;
                }
                let mut sub = file.dir().join(path);
                if Path::new(path).is_absolute() && !fs.exists(&sub) {
                    sub = moved_sub_toc(fs, file, path).ok_or_else(|| StorageError::Corrupt {
                        path: file.path.clone(),
                        offset: r.offset,
                        detail: format!(
                            "the sub-toc this record names, {path}, is missing (neither there nor beside the database)"
                        ),
                    })?;
                }
                if open.len() >= MAX_DEPTH || open.contains(&sub) {
                    return Err(StorageError::Corrupt {
                        path: file.path.clone(),
                        offset: r.offset,
                        detail: format!("sub-toc {} is read again inside itself", sub.display()),
                    });
                }
                let child = TocFile::read(fs, &sub)?;
                child.init()?;
                view.sub_tocs.push(sub.clone());
                open.push(sub);
                walk(
                    fs,
                    &child,
                    &masks,
                    micros(&r.header).max(named_at),
                    view,
                    open,
                )?;
                open.pop();
            }
            Payload::Init { .. } | Payload::Clear { .. } => {}
        }
    }
    Ok(())
}

/// Whether the toc file at `path` is FDB5's (by its first bytes); false if it cannot be read.
pub(crate) fn is_fdb5_toc(fs: &dyn FileSystem, path: &Path) -> bool {
    let Ok(f) = fs.open(path, crate::storage::fs::OpenMode::Read) else {
        return false;
    };
    let mut head = [0u8; 8];
    matches!(crate::storage::fs::read_full_at(&*f, &mut head, 0), Ok(8)) && looks_like_fdb5(&head)
}

/// The database key and owner uid of an FDB5 toc, from its first record alone.
pub(crate) fn read_init(
    f: &dyn crate::storage::fs::FsFile,
    path: &Path,
) -> Result<(crate::model::Key, u32), StorageError> {
    let corrupt = |detail: String| StorageError::Corrupt {
        path: path.to_path_buf(),
        offset: 0,
        detail,
    };
    let mut head = [0u8; HEADER];
    let n = crate::storage::fs::read_full_at(f, &mut head, 0)
        .map_err(StorageError::io("read", path))?;
    let header = Header::decode(&head[..n])
        .ok_or_else(|| corrupt("the toc ends inside its first record's header".into()))?;
    let size = header.size as usize;
    if !(HEADER..=MAX_PAYLOAD + HEADER + ROUND).contains(&size) {
        return Err(corrupt(format!("record size {size} is not a valid one")));
    }
    let mut body = vec![0u8; size - HEADER];
    let got = crate::storage::fs::read_full_at(f, &mut body, HEADER as u64)
        .map_err(StorageError::io("read", path))?;
    if got < body.len() {
        return Err(corrupt("the toc ends inside its first record".into()));
    }
    match Payload::decode(&header, &body) {
        Ok(Payload::Init { key, .. }) => Ok((key.to_key(), header.uid)),
        Ok(_) => Err(corrupt(
            "the toc does not start with a TOC_INIT record".into(),
        )),
        Err(e) => Err(StorageError::Corrupt {
            path: path.to_path_buf(),
            offset: (HEADER + e.offset) as u64,
            detail: format!("TOC_INIT record: {}", e.detail),
        }),
    }
}
