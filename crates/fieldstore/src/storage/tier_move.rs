//! Moving a database between a root and a bucket (docs/lifecycle.md), atomically for readers.
//!
//! Into a bucket: the root's copy is locked for archive, every live field is copied (its CRC-32C
//! checked as it is read) into a new generation of the bucket's database and committed there as
//! **one** flush marker (all of it visible at once, or none); the new copy's entries are compared
//! with the old's; only then is the root's copy marked as being left (from which moment the
//! bucket's copy is the one readers and writers pick, see `tiered.rs`), and after a pause hidden
//! by one rename of its journal and deleted after the grace period.
//!
//! Back to a root: the fields are copied into a hidden directory of the root, committed, compared,
//! renamed into place (the root's copy wins from then), and after a pause the bucket's copy is
//! wiped (one tombstone object; its data objects go once older than the bucket's grace).
//!
//! A killed move leaves every field readable in exactly one place; the next move of the database
//! finishes or undoes what it left ([`TieredCatalogue::recover_tier_move`]).

use std::path::{Path, PathBuf};

use super::catalogue::{Catalogue, CatalogueReader, CatalogueWriter};
use super::store::{ObjectReader, Store, StoreWriter};
use super::tiered::{BucketTier, TieredCatalogue};
use super::toc::relocate::{self, MoveOptions, MoveReport, LEAVING, OVERLAP};
use super::{DbRef, PosixStore, StorageError};
use crate::checksum::crc32c;

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
        let text = format!("{}|{}|{length}|{crc:?}", index.sorted(), datum.sorted());
        let h = u64::from(crc32c(text.as_bytes()))
            | (u64::from(crc32c(
                &text.as_bytes().iter().rev().copied().collect::<Vec<u8>>(),
            )) << 32);
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

/// Reads exactly `buf.len()` bytes at `offset`.
fn read_exact_at(
    r: &dyn ObjectReader,
    mut offset: u64,
    mut buf: &mut [u8],
) -> Result<(), StorageError> {
    while !buf.is_empty() {
        let n = r.read_at(offset, buf)?;
        if n == 0 {
            return Err(StorageError::Config {
                detail: format!("object ends {} bytes before a field it holds", buf.len()),
            });
        }
        offset += n as u64;
        buf = &mut buf[n..];
    }
    Ok(())
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
    let mut open: Option<(String, Box<dyn ObjectReader>)> = None;
    let mut buf = Vec::new();
    for (i, ix) in reader.indexes().iter().enumerate() {
        for e in reader.entries(i, false)? {
            let e = e?;
            if e.masked {
                continue;
            }
            let f = &e.field;
            let r = match &open {
                Some((name, r)) if *name == f.object => r,
                _ => {
                    let r = src.open_object(src_db, &f.object)?;
                    &open.insert((f.object.clone(), r)).1
                }
            };
            let len = usize::try_from(f.length)
                .map_err(|_| config(format!("field of {} bytes", f.length)))?;
            buf.resize(len, 0);
            read_exact_at(&**r, f.offset, &mut buf)?;
            f.verify(
                crc32c(&buf),
                || src.uri(src_db, &f.object),
                || e.datum.to_string(),
            )?;
            let mut copy = sw.append(&buf)?;
            copy.extract = f.extract.clone();
            cw.add(&ix.index_key, &e.datum, copy)?;
            out.add(&ix.index_key, &e.datum, f.length, f.checksum);
            if let Some(p) = &opts.progress {
                p(out.bytes, total);
            }
        }
    }
    sw.sync()?;
    Ok(out)
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

impl TieredCatalogue {
    /// Finishes or undoes what a killed move of the database `key` left, between its root copy
    /// and a bucket's: a root copy marked as left beside a bucket copy is hidden and deleted (the
    /// move had committed the bucket's); a bucket copy beside a root copy not being left is wiped
    /// (the move had not switched, or was a move back that had). Then the toc catalogue's own
    /// clean-up (hidden partial copies, stale locks). Refused while a move of it runs.
    pub(crate) fn recover_tier_move(&self, key: &crate::model::Key) -> Result<(), StorageError> {
        let name = crate::storage::toc::disk_name(key);
        let layout = self.toc.layout();
        for r in layout.visit_roots() {
            if let Some(pid) =
                relocate::move_pid(&r.path.join(&name)).filter(|p| relocate::pid_alive(*p))
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
            Ok(copied) => {
                report.files = copied.fields as usize;
                report.bytes = copied.bytes;
                report.done = true;
                // Switched: the bucket's copy is the one. Readers that chose the old copy
                // just before get to open it; then one rename hides it.
                std::thread::sleep(OVERLAP);
                relocate::hide(&from)?;
                if let Some(p) = from.parent() {
                    self.toc.forget_usage(p);
                }
                if !opts.keep {
                    std::thread::sleep(opts.grace);
                    relocate::remove_old_copy(&from)?;
                }
                report.to = PathBuf::from(
                    self.find_in_buckets(&db.key)?
                        .map_or(b.uri.clone(), |d| d.id),
                );
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
    ) -> Result<Copied, StorageError> {
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
        let mut sw = b.store.writer(&inner).map_err(undo)?;
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
        let there = digest(&*b.catalogue.reader(&inner).map_err(undo)?).map_err(undo)?;
        if there != copied {
            return Err(undo(config(format!(
                "the copy of {} in {} does not hold what was copied ({} fields, {} bytes; found {} fields, {} bytes)",
                db.key, b.uri, copied.fields, copied.bytes, there.fields, there.bytes
            ))));
        }
        let leaving = from.join(LEAVING);
        std::fs::write(&leaving, format!("{}{}", b.uri, inner.id))
            .map_err(|e| undo(StorageError::io("create", leaving.clone())(e)))?;
        relocate::sync_dir(from)?;
        b.forget_usage();
        Ok(copied)
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
