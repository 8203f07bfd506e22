//! Moving a database between a root and a bucket (docs/lifecycle.md), atomically for readers.
//!
//! Into a bucket: the root's copy is locked for archive, every live field is copied (its CRC-32C
//! checked as it is read) into a new generation of the bucket's database and committed there as
//! **one** flush marker (all of it visible at once, or none); the new copy's entries are compared
//! with the old's; only then is the root's copy marked as being left (from which moment the
//! bucket's copy is the one readers and writers pick, see `tiered.rs`). The move returns there:
//! the marker is a state as final as any later one, so the old copy's retirement (hidden by one
//! rename of its journal once 1 s has passed since the marker, for readers that chose it just
//! before; deleted once the grace period has passed too) costs the move no time. It is done by
//! whichever comes first: `--wait`, the next move or lifecycle run (and the server's schedule),
//! a wipe of the bucket's copy, or a writer creating the database anew.
//!
//! Back to a root: the fields are copied into a hidden directory of the root, committed, compared,
//! renamed into place (the root's copy wins from then), and after a pause the bucket's copy is
//! wiped (one tombstone object; its data objects go once older than the bucket's grace).
//!
//! A killed move leaves every field readable in exactly one place; the next move of the database
//! finishes or undoes what it left ([`TieredCatalogue::recover_tier_move`]).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use super::catalogue::{Catalogue, CatalogueReader, CatalogueWriter};
use super::store::{FieldRef, ObjectReader, Store, StoreWriter};
use super::tiered::{BucketTier, TieredCatalogue};
use super::toc::relocate::{self, MoveOptions, MoveReport, LEAVING, OVERLAP};
use super::{DbRef, PosixStore, StorageError};
use crate::checksum::crc32c;
use bytes::Bytes;

fn config(detail: String) -> StorageError {
    StorageError::Config { detail }
}

/// What was copied: fields, bytes, and an order-free digest of every entry (index key, datum
/// key, length, checksum), so two catalogues' copies can be compared whatever their order.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Copied {
    pub fields: u64,
    pub bytes: u64,
    digest: u64,
}

impl Copied {
    fn add(
        &mut self,
        index: &crate::model::Key,
        datum: &crate::model::Key,
        length: u64,
        crc: Option<u32>,
    ) {
        use std::hash::{Hash, Hasher};
        // SipHash with fixed keys: the same entry digests alike in the copy and the read-back
        // (both in this process). A key's pairs are summed, so their order (which the two
        // catalogues may keep differently) does not count, and nothing is sorted or allocated
        // (this runs twice per field).
        let pairs = |key: &crate::model::Key, salt: u8| {
            key.iter().fold(0u64, |acc, kv| {
                let mut h = std::hash::DefaultHasher::new();
                (salt, kv).hash(&mut h);
                acc.wrapping_add(h.finish())
            })
        };
        let mut h = std::hash::DefaultHasher::new();
        (pairs(index, 0), pairs(datum, 1), length, crc).hash(&mut h);
        let h = h.finish();
        self.fields += 1;
        self.bytes += length;
        self.digest = self.digest.wrapping_add(h);
    }
}

/// The live entries of a database, digested.
fn digest(reader: &dyn CatalogueReader) -> Result<Copied, StorageError> {
    let mut out = Copied::default();
    for (i, ix) in reader.indexes().iter().enumerate() {
        for e in reader.entries(i, false)? {
            let e = e?;
            if !e.masked {
                out.add(&ix.index_key, &e.datum, e.field.length, e.field.checksum);
            }
        }
    }
    Ok(out)
}

/// How much of a source object one read takes: small fields lying one after another are read
/// together (one syscall or GET for hundreds of them, not one each).
const READ_WINDOW: usize = 8 << 20;

/// A window of one source object's bytes. Shared (`Bytes`): a run of fields in it goes to the
/// destination as one piece without being copied (`StoreWriter::append_shared`).
struct Window {
    object: String,
    reader: Box<dyn ObjectReader>,
    start: u64,
    buf: Bytes,
}

impl Window {
    /// The window holding `offset..offset + len` of `object` (read with what follows them when
    /// they are not in the current one), and where in it they start.
    fn get(
        slot: &mut Option<Window>,
        src: &dyn Store,
        db: &DbRef,
        object: &str,
        offset: u64,
        len: usize,
    ) -> Result<(Bytes, usize), StorageError> {
        let fits = |w: &Window| {
            w.object == object
                && offset >= w.start
                && (offset - w.start) as usize + len <= w.buf.len()
        };
        if !slot.as_ref().is_some_and(fits) {
            let reader = match slot.take() {
                Some(w) if w.object == object => w.reader,
                _ => src.open_object(db, object)?,
            };
            let mut buf = vec![0; len.max(READ_WINDOW)];
            let got = read_some_at(&*reader, offset, &mut buf)?;
            if got < len {
                return Err(config(format!(
                    "object {} ends {} bytes before a field it holds",
                    src.uri(db, object),
                    len - got
                )));
            }
            buf.truncate(got);
            *slot = Some(Window {
                object: object.to_string(),
                reader,
                start: offset,
                buf: Bytes::from(buf),
            });
        }
        let w = slot
            .as_ref()
            .ok_or_else(|| config("no window was read".into()))?;
        let at = (offset - w.start) as usize;
        if at + len > w.buf.len() {
            return Err(config("a field outside the window read for it".into()));
        }
        Ok((w.buf.clone(), at))
    }
}

/// A run of fields lying one after another at least this long goes to the destination as one
/// piece: S3's smallest part, so a bucket's writer sends it as a part of its own, uncopied.
const SPAN: usize = 5 << 20;

/// Reads from `offset` until `buf` is full or the object ends; how many bytes were read.
fn read_some_at(r: &dyn ObjectReader, offset: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
    let mut got = 0;
    while got < buf.len() {
        let n = r.read_at(offset + got as u64, &mut buf[got..])?;
        if n == 0 {
            break;
        }
        got += n;
    }
    Ok(got)
}

fn field_len(f: &FieldRef) -> Result<usize, StorageError> {
    usize::try_from(f.length).map_err(|_| config(format!("field of {} bytes", f.length)))
}

/// Copies every live field of `src_db` into the writers, checking each against its CRC-32C.
fn copy_fields(
    reader: &dyn CatalogueReader,
    src: &dyn Store,
    src_db: &DbRef,
    sw: &mut dyn StoreWriter,
    cw: &mut dyn CatalogueWriter,
    opts: &MoveOptions,
    total: u64,
) -> Result<Copied, StorageError> {
    let mut out = Copied::default();
    let mut window: Option<Window> = None;
    // In the order the bytes lie, not the catalogue's key order: small fields then come out of
    // one window read after another instead of a read each.
    let indexes = reader.indexes();
    let mut live = Vec::new();
    for (i, ix) in indexes.iter().enumerate() {
        for e in reader.entries(i, false)? {
            let e = e?;
            if !e.masked {
                live.push((ix, e));
            }
        }
    }
    // By object name's rank, not the name: comparing equal names byte by byte was most of
    // the sort.
    let mut names: Vec<&str> = live.iter().map(|(_, e)| e.field.object.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let rank: std::collections::HashMap<&str, usize> =
        names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut order: Vec<(usize, u64, usize)> = live
        .iter()
        .enumerate()
        .map(|(i, (_, e))| {
            (
                rank.get(e.field.object.as_str()).copied().unwrap_or(0),
                e.field.offset,
                i,
            )
        })
        .collect();
    order.sort_unstable();
    let mut slots: Vec<Option<_>> = live.into_iter().map(Some).collect();
    let live: Vec<_> = order
        .into_iter()
        .filter_map(|(_, _, i)| slots[i].take())
        .collect();
    let mut sides: Option<(String, super::store::SideMap)> = None;
    let mut k = 0;
    while k < live.len() {
        let first = &live[k].1.field;
        let len = field_len(first)?;
        let (buf, at) = Window::get(&mut window, src, src_db, &first.object, first.offset, len)?;
        // The fields lying one after another from here, within the window (all of a
        // database one writer wrote, but for the field cut by the window's end).
        let mut end = at + len;
        let mut j = k + 1;
        while let Some((_, e)) = live.get(j) {
            let g = &e.field;
            let next = field_len(g)?;
            if g.object != first.object
                || g.offset != first.offset + (end - at) as u64
                || end + next > buf.len()
            {
                break;
            }
            end += next;
            j += 1;
        }
        // Each field checked against its checksum as it was read.
        let mut crcs = Vec::with_capacity(j - k);
        for (_, e) in &live[k..j] {
            let f = &e.field;
            let from = at + (f.offset - first.offset) as usize;
            let bytes = &buf[from..from + f.length as usize];
            let crc = crc32c(bytes);
            f.verify(crc, || src.uri(src_db, &f.object), || e.datum.to_string())?;
            crcs.push(crc);
        }
        let span = if end - at >= SPAN {
            Some(sw.append_shared(buf.slice(at..end), None)?)
        } else {
            None
        };
        for ((ix, e), crc) in live[k..j].iter().zip(crcs) {
            let f = &e.field;
            let from = at + (f.offset - first.offset) as usize;
            let bytes = &buf[from..from + f.length as usize];
            let mut copy = match &span {
                Some(s) => FieldRef {
                    object: s.object.clone(),
                    offset: s.offset + (f.offset - first.offset),
                    length: f.length,
                    checksum: Some(crc),
                    extract: None,
                },
                None => sw.append(bytes)?,
            };
            copy.extract = match &f.extract {
                Some(info) => Some(info.clone()),
                None => extraction_info(&mut sides, src, src_db, f, bytes),
            };
            cw.add(&ix.index_key, &e.datum, copy)?;
            out.add(&ix.index_key, &e.datum, f.length, f.checksum);
            if let Some(p) = &opts.progress {
                p(out.bytes, total);
            }
        }
        k = j;
    }
    // The catalogue's flush is built while the store's last parts are in flight.
    cw.prepare()?;
    sw.sync()?;
    Ok(out)
}

/// Extraction information for a field whose catalogue entry has none: its side file's record
/// when that still describes these bytes (`extract-index`, FDB5-format databases), else built
/// from the bytes in hand, as a conversion does. A bucket keeps no side files, so without this
/// a moved field would be extracted whole from then on.
fn extraction_info(
    sides: &mut Option<(String, super::store::SideMap)>,
    src: &dyn Store,
    db: &DbRef,
    f: &FieldRef,
    bytes: &[u8],
) -> Option<std::sync::Arc<[u8]>> {
    if sides.as_ref().is_none_or(|(o, _)| *o != f.object) {
        // An unreadable side file is as good as none: the information is built instead.
        let map = src.side_entries(db, &f.object).unwrap_or_default();
        *sides = Some((f.object.clone(), map));
    }
    let head = &bytes[..bytes.len().min(super::sidecar::HEAD as usize)];
    sides
        .as_ref()
        .and_then(|(_, m)| m.get(&f.offset))
        .filter(|s| s.length == f.length && super::sidecar::head_crc(head) == s.head_crc)
        .map(|s| s.info.clone())
        .or_else(|| crate::extract::catalogue_info(bytes))
}

/// Wipes a bucket's copy of a database: its generation invisible at once, its objects deleted
/// once older than the bucket's grace (a reader may still stream them).
fn wipe_bucket_copy(b: &BucketTier, inner: &DbRef) -> Result<(), StorageError> {
    b.catalogue.wipe(inner, true)?;
    b.store.wipe(inner, true)?;
    b.catalogue.finish_wipe(inner)?;
    b.forget_usage();
    Ok(())
}

/// What the marker of a root copy left for a bucket says, and when it was written.
struct LeftCopy {
    since: SystemTime,
    grace: Duration,
    keep: bool,
}

/// The marker a move into a bucket writes into the root's copy once the bucket's is committed:
/// where the copy went, then how long its readers get and whether its files stay.
fn leaving_marker(to: &str, opts: &MoveOptions) -> String {
    format!(
        "{to}\ngrace_ms {}\n{}",
        opts.grace.as_millis(),
        if opts.keep { "keep\n" } else { "" }
    )
}

fn left_copy(dir: &Path) -> Option<LeftCopy> {
    let marker = dir.join(LEAVING);
    let text = std::fs::read_to_string(&marker).ok()?;
    if !text.starts_with("s3://") {
        return None;
    }
    let since = std::fs::metadata(&marker).and_then(|m| m.modified()).ok()?;
    let mut out = LeftCopy {
        since,
        // Markers of moves before the grace was written into them: the `move` default.
        grace: MoveOptions::default().grace,
        keep: false,
    };
    for line in text.lines().skip(1) {
        if let Some(ms) = line.strip_prefix("grace_ms ") {
            if let Ok(ms) = ms.trim().parse() {
                out.grace = Duration::from_millis(ms);
            }
        } else if line.trim() == "keep" {
            out.keep = true;
        }
    }
    Some(out)
}

/// How far a copy left for a bucket got in one call of [`TieredCatalogue::retire`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Retired {
    /// Less than 1 s since the switch: readers may still open it.
    NotYet,
    /// Hidden (no reader can find it); its files wait for the grace period, or `keep`.
    Hidden,
    /// Hidden and deleted.
    Deleted,
}

/// Tolerates another process having done the same step first (two sweeps at once).
fn unless_gone(r: Result<(), StorageError>, dir: &Path) -> Result<(), StorageError> {
    match r {
        Err(StorageError::Io { source, .. })
            if source.kind() == std::io::ErrorKind::NotFound || !dir.exists() =>
        {
            Ok(())
        }
        other => other,
    }
}

impl TieredCatalogue {
    /// Retires a root copy a move left for a bucket: hidden once 1 s has passed since the
    /// switch (a reader that chose it just before has opened its journal by then), deleted
    /// once the grace period has passed too (readers streaming its files are done). With
    /// `wait`, sleeps until each step is due; without, does what is due and leaves the rest to
    /// a later call.
    pub(crate) fn retire(&self, dir: &Path, wait: bool) -> Result<Retired, StorageError> {
        let Some(left) = left_copy(dir) else {
            return Ok(Retired::NotYet);
        };
        let due = |after: Duration| -> bool {
            let age = SystemTime::now()
                .duration_since(left.since)
                .unwrap_or_default();
            if age >= after {
                return true;
            }
            if wait {
                std::thread::sleep(after - age);
            }
            wait
        };
        if !due(OVERLAP) {
            return Ok(Retired::NotYet);
        }
        if dir.join("toc").exists() {
            unless_gone(relocate::hide(dir), dir)?;
            if let Some(p) = dir.parent() {
                self.toc.forget_usage(p);
            }
            tracing::info!(target: "fieldstore::lifecycle", dir = %dir.display(), "copy left for a bucket hidden");
        }
        if left.keep || !due(OVERLAP + left.grace) {
            return Ok(Retired::Hidden);
        }
        unless_gone(relocate::remove_old_copy(dir), dir)?;
        if let Some(p) = dir.parent() {
            self.toc.forget_usage(p);
        }
        tracing::info!(target: "fieldstore::lifecycle", dir = %dir.display(), "copy left for a bucket deleted");
        Ok(Retired::Deleted)
    }

    /// Retires, without waiting, every root copy moves left for buckets whose time has come;
    /// the number deleted. One that fails is logged and left for the next sweep.
    pub fn retire_left_copies(&self) -> usize {
        let mut deleted = 0;
        let layout = self.toc.layout();
        for r in layout.visit_roots() {
            let Ok(rd) = std::fs::read_dir(&r.path) else {
                continue;
            };
            for e in rd.flatten() {
                if e.file_name().to_string_lossy().starts_with('.') {
                    continue;
                }
                let dir = e.path();
                if !dir.join(LEAVING).exists() || !relocate::left_for_bucket(&dir) {
                    continue;
                }
                match self.retire(&dir, false) {
                    Ok(Retired::Deleted) => deleted += 1,
                    Ok(_) => {}
                    Err(err) => {
                        tracing::warn!(target: "fieldstore::lifecycle", dir = %dir.display(), "retiring a copy left for a bucket: {err}")
                    }
                }
            }
        }
        deleted
    }

    /// Retires (waiting as needed) the root copies of `key` left for a bucket: before that
    /// bucket copy is wiped (else the dead copy would be all there is of it) and before the
    /// database is created or moved anew.
    pub(crate) fn retire_copies_of(&self, key: &crate::model::Key) -> Result<(), StorageError> {
        let name = crate::storage::toc::disk_name(key);
        let layout = self.toc.layout();
        for r in layout.visit_roots() {
            let dir = r.path.join(&name);
            if relocate::left_for_bucket(&dir) {
                self.retire(&dir, true)?;
            }
        }
        Ok(())
    }

    /// Finishes or undoes what a killed move of the database `key` left, between its root copy
    /// and a bucket's: a root copy marked as left beside a bucket copy is hidden and deleted (the
    /// move had committed the bucket's); a bucket copy beside a root copy not being left is wiped
    /// (the move had not switched, or was a move back that had). Then the toc catalogue's own
    /// clean-up (hidden partial copies, stale locks). Refused while a move of it runs.
    pub(crate) fn recover_tier_move(&self, key: &crate::model::Key) -> Result<(), StorageError> {
        self.retire_copies_of(key)?;
        let name = crate::storage::toc::disk_name(key);
        let layout = self.toc.layout();
        for r in layout.visit_roots() {
            // This process's own lock is left in a copy it moved and kept (`--keep`).
            if let Some(pid) = relocate::move_pid(&r.path.join(&name))
                .filter(|p| relocate::pid_alive(*p) && *p != std::process::id())
            {
                return Err(config(format!(
                    "database {name} is being moved by process {pid}; wait for it to finish"
                )));
            }
        }
        let bucket = self.find_in_buckets(key)?;
        if let (Some(t), Some(bdb)) = (self.toc.find(key)?, &bucket) {
            let dir = PathBuf::from(&t.id);
            if self.toc_wins(&t) {
                if let Some((b, inner)) = self.split(bdb) {
                    tracing::info!(db = %key, bucket = %b.uri, "a killed move left a copy in a bucket: wiped");
                    wipe_bucket_copy(b, &inner)?;
                }
            } else {
                tracing::info!(db = %key, dir = %dir.display(), "a killed move into a bucket had committed: old copy removed");
                relocate::hide(&dir)?;
                relocate::remove_old_copy(&dir)?;
            }
        }
        self.toc.recover_moves(&name)
    }

    /// Moves a database of a root into the bucket tier `dest`.
    pub fn move_to_bucket(
        &self,
        db: &DbRef,
        dest: &str,
        schema_text: &str,
        opts: &MoveOptions,
    ) -> Result<MoveReport, StorageError> {
        let b = self.bucket(dest).ok_or_else(|| {
            config(format!(
                "{dest} is not a bucket of this config; its buckets: {}",
                self.buckets()
                    .iter()
                    .map(|b| b.uri.clone())
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        if !self.space_buckets(&db.key).iter().any(|s| s.uri == b.uri) {
            return Err(config(format!(
                "bucket {} is not in the space of database {} (a database stays in the tiers of the first space whose regex matches it)",
                b.uri, db.key
            )));
        }
        if !b.root.archive || !b.root.list {
            return Err(config(format!(
                "bucket {} cannot take a moved database: it must be archive- and list-enabled",
                b.uri
            )));
        }
        if self.split(db).is_some() {
            return Err(config(format!(
                "database {} is already in a bucket ({})",
                db.key, db.id
            )));
        }
        let stats = self.toc.stats(db)?;
        let mut report = MoveReport {
            from: PathBuf::from(&db.id),
            to: PathBuf::from(&b.uri),
            files: stats.fields as usize,
            bytes: stats.field_bytes,
            done: false,
        };
        if opts.dry_run {
            return Ok(report);
        }
        self.toc.may_change(db, "move")?;
        self.recover_tier_move(&db.key)?;
        let db = self
            .toc
            .find(&db.key)?
            .ok_or_else(|| config(format!("database {} is gone", db.key)))?;
        let from = PathBuf::from(&db.id);
        let lock = relocate::take_move_lock(&from)?;
        let result = self.copy_to_bucket(&db, &from, b, schema_text, opts, stats.field_bytes);
        match result {
            Ok((copied, to)) => {
                report.files = copied.fields as usize;
                report.bytes = copied.bytes;
                report.done = true;
                // Switched: the bucket's copy is the one. The old copy's pause and grace run
                // from the marker, not in the move's time: retired now only when asked.
                if opts.wait {
                    self.retire(&from, true)?;
                }
                report.to = PathBuf::from(to);
                Ok(report)
            }
            Err(e) => {
                let _ = std::fs::remove_file(&lock);
                Err(e)
            }
        }
    }

    /// Copies, commits and compares; on success marks the root copy as being left. On failure
    /// the bucket's copy is wiped and nothing changed for readers.
    fn copy_to_bucket(
        &self,
        db: &DbRef,
        from: &Path,
        b: &BucketTier,
        schema_text: &str,
        opts: &MoveOptions,
        total: u64,
    ) -> Result<(Copied, String), StorageError> {
        let before = relocate::files_of(from)?;
        let creator = self.toc.creator(db)?;
        let inner = b
            .catalogue
            .create_by(&db.key, schema_text, creator.as_deref())?;
        let undo = |e: StorageError| {
            let _ = wipe_bucket_copy(b, &inner);
            e
        };
        let reader = self.toc.reader(db).map_err(undo)?;
        let files = PosixStore::new(self.toc.file_system());
        // Parts small enough that a few are in flight while the copy goes on, for a database of
        // a few parts too (the first leaves once it is full).
        let part = usize::try_from(total / 8)
            .unwrap_or(usize::MAX)
            .clamp(5 << 20, super::s3::store::DEFAULT_PART_SIZE);
        let mut sw = b
            .store
            .clone()
            .with_part_size(part)
            .writer(&inner)
            .map_err(undo)?;
        let mut cw = b.catalogue.writer(&inner).map_err(undo)?;
        let copied =
            copy_fields(&*reader, &files, db, &mut *sw, &mut *cw, opts, total).map_err(undo)?;
        if relocate::files_of(from)? != before {
            return Err(undo(config(format!(
                "{} kept changing while it was copied (a writer that opened it before the move is still archiving): stop it and move again",
                from.display()
            ))));
        }
        cw.commit().map_err(undo)?;
        // The committed catalogue object read back byte for byte (its encoding is the S3
        // catalogue's own round trip, tested there): rebuilding the bucket's catalogue view
        // and digesting it again was a quarter of a small database's move.
        match cw.verify_last_commit().map_err(undo)? {
            Some(true) => {}
            Some(false) => {
                return Err(undo(config(format!(
                    "the copy of {} in {} does not read back as written (its catalogue object differs, or the database holds another writer's)",
                    db.key, b.uri
                ))))
            }
            None => {
                let there = digest(&*b.catalogue.reader(&inner).map_err(undo)?).map_err(undo)?;
                if there != copied {
                    return Err(undo(config(format!(
                        "the copy of {} in {} does not hold what was copied ({} fields, {} bytes; found {} fields, {} bytes)",
                        db.key, b.uri, copied.fields, copied.bytes, there.fields, there.bytes
                    ))));
                }
            }
        }
        let leaving = from.join(LEAVING);
        // The bucket copy's id as the tiered catalogue names it (`find_in_buckets`).
        let to = format!("{}{}", b.uri, inner.id);
        std::fs::write(&leaving, leaving_marker(&to, opts))
            .map_err(|e| undo(StorageError::io("create", leaving.clone())(e)))?;
        relocate::sync_dir(from)?;
        b.forget_usage();
        Ok((copied, to))
    }

    /// Moves a database of a bucket into the configured root `dest`.
    pub fn move_to_root(
        &self,
        db: &DbRef,
        dest: &Path,
        schema_text: &str,
        opts: &MoveOptions,
    ) -> Result<MoveReport, StorageError> {
        let root = self.toc.configured_root(db, dest)?;
        if !opts.dry_run {
            // A killed move may have left the root a copy to finish or undo first.
            self.recover_tier_move(&db.key)?;
        }
        let db = &self
            .find_in_buckets(&db.key)?
            .ok_or_else(|| config(format!("database {} is not in a bucket", db.key)))?;
        let (b, inner) = self
            .split(db)
            .ok_or_else(|| config(format!("database {} is not in a bucket", db.key)))?;
        let name = crate::storage::toc::disk_name(&db.key);
        let to = root.path.join(&name);
        let stats = b.catalogue.stats(&inner)?;
        let mut report = MoveReport {
            from: PathBuf::from(&db.id),
            to: to.clone(),
            files: stats.fields as usize,
            bytes: stats.field_bytes,
            done: false,
        };
        if to.join("toc").exists() {
            return Err(config(format!(
                "root {} already holds a database named {name}",
                root.path.display()
            )));
        }
        if opts.dry_run {
            return Ok(report);
        }
        std::fs::create_dir_all(&root.path).map_err(|e| {
            config(format!(
                "root {} does not exist and cannot be created: {e}",
                root.path.display()
            ))
        })?;
        let partial = root.path.join(format!(
            ".{name}{}{}",
            relocate::MOVING,
            crate::storage::names::unique_name()
        ));
        let result = self.copy_to_root(
            db,
            b,
            &inner,
            &partial,
            schema_text,
            opts,
            stats.field_bytes,
        );
        let copied = match result {
            Ok(c) => c,
            Err(e) => {
                let _ = std::fs::remove_dir_all(&partial);
                return Err(e);
            }
        };
        if let Err(e) = std::fs::rename(&partial, &to) {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(StorageError::io("rename", partial)(e));
        }
        relocate::sync_dir(&root.path)?;
        self.toc.forget_usage(&root.path);
        // The root's copy is the one now; readers that chose the bucket's just before get to
        // open it before its generation ends.
        std::thread::sleep(OVERLAP);
        wipe_bucket_copy(b, &inner)?;
        report.files = copied.fields as usize;
        report.bytes = copied.bytes;
        report.done = true;
        Ok(report)
    }

    #[allow(clippy::too_many_arguments)]
    fn copy_to_root(
        &self,
        db: &DbRef,
        b: &BucketTier,
        inner: &DbRef,
        partial: &Path,
        schema_text: &str,
        opts: &MoveOptions,
        total: u64,
    ) -> Result<Copied, StorageError> {
        let fs = self.toc.file_system();
        let creator = b.catalogue.creator(inner)?;
        std::fs::create_dir(partial).map_err(StorageError::io("create", partial.to_path_buf()))?;
        crate::storage::toc::writer::ensure_database(
            &*fs,
            partial,
            &db.key,
            schema_text,
            creator.as_deref(),
        )?;
        let target = DbRef {
            key: db.key.clone(),
            id: partial.display().to_string(),
        };
        let reader = b.catalogue.reader(inner)?;
        let files = PosixStore::new(fs);
        let mut sw = files.writer(&target)?;
        let mut cw = self.toc.writer(&target)?;
        let copied = copy_fields(&*reader, &b.store, inner, &mut *sw, &mut *cw, opts, total)?;
        cw.commit()?;
        drop(cw);
        drop(sw);
        relocate::sync_dir(partial)?;
        let there = digest(&*self.toc.reader(&target)?)?;
        if there != copied {
            return Err(config(format!(
                "the copy of {} in {} does not hold what was copied ({} fields; found {})",
                db.key,
                partial.display(),
                copied.fields,
                there.fields
            )));
        }
        // A writer that flushed into the bucket's copy meanwhile: its fields would be lost.
        let now = digest(&*b.catalogue.reader(inner)?)?;
        if now != copied {
            return Err(config(format!(
                "{} kept changing while it was copied (a writer is archiving into it): stop it and move again",
                db.id
            )));
        }
        Ok(copied)
    }
}
