//! A catalogue writer: entries gathered in memory, then one create-only flush marker per
//! commit (docs/s3-format.md, "Writing").

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::Arc;

use super::cache;
use super::catalogue::{next_micros, now_secs, stamp, writer_id, Gen, S3Catalogue, COMPACT_AFTER};
use super::client::Created;
use super::layout::{self, Body, DbObject, Entry, IndexBody, FORMAT};
use super::view;
use crate::model::Key;
use crate::storage::catalogue::CatalogueWriter;
use crate::storage::{DbRef, FieldRef, StorageError};

pub(super) struct Pending {
    keywords: Vec<String>,
    entries: BTreeMap<Vec<String>, FieldRef>,
    axes: BTreeMap<String, BTreeSet<String>>,
}

pub(super) struct S3CatalogueWriter {
    pub(super) cat: S3Catalogue,
    pub(super) gen: Gen,
    pub(super) db: DbRef,
    pub(super) pending: BTreeMap<Key, Pending>,
    pub(super) seq: u64,
    /// The last flush object written, and its bytes: what `verify_last_commit` reads back.
    pub(super) last_flush: Option<(String, Vec<u8>)>,
    /// The next flush object's body and its encoding, built by `prepare`.
    pub(super) prepared: Option<(Body, Vec<u8>)>,
}

/// A flush object's body of the pending entries, and its encoding.
fn build(pending: BTreeMap<Key, Pending>) -> (Body, Vec<u8>) {
    let indexes = pending
        .into_iter()
        .map(|(key, p)| IndexBody {
            key,
            keywords: p.keywords,
            axes: p.axes,
            entries: p
                .entries
                .into_iter()
                .map(|(values, f)| Entry {
                    values,
                    object: f.object,
                    offset: f.offset,
                    length: f.length,
                    checksum: f.checksum,
                    extract: f.extract,
                    rank: None,
                })
                .collect(),
        })
        .collect();
    let body = Body {
        format: FORMAT,
        stamp: stamp(),
        created: now_secs(),
        covers: Vec::new(),
        supersedes: Vec::new(),
        indexes,
    };
    let bytes = layout::encode(&body);
    (body, bytes)
}

impl CatalogueWriter for S3CatalogueWriter {
    fn add(&mut self, index: &Key, datum: &Key, field: FieldRef) -> Result<(), StorageError> {
        if self.prepared.is_some() {
            return Err(StorageError::Config {
                detail: format!(
                    "a field was added to {} after its flush was prepared",
                    self.db.id
                ),
            });
        }
        // The index key is cloned once per index, not per field.
        if !self.pending.contains_key(index) {
            self.pending.insert(
                index.clone(),
                Pending {
                    keywords: datum.keywords().map(str::to_string).collect(),
                    entries: BTreeMap::new(),
                    axes: BTreeMap::new(),
                },
            );
        }
        let Some(p) = self.pending.get_mut(index) else {
            return Err(StorageError::Config {
                detail: format!("index {index} vanished from a flush being built"),
            });
        };
        let values: Vec<String> = p
            .keywords
            .iter()
            .map(|k| datum.get(k).unwrap_or("").to_string())
            .collect();
        for (k, v) in p.keywords.iter().zip(&values) {
            if !p.axes.get(k).is_some_and(|s| s.contains(v)) {
                p.axes.entry(k.clone()).or_default().insert(v.clone());
            }
        }
        p.entries.insert(values, field);
        Ok(())
    }

    fn is_dirty(&self) -> bool {
        !self.pending.is_empty() || self.prepared.is_some()
    }

    fn prepare(&mut self) -> Result<(), StorageError> {
        if self.prepared.is_none() && !self.pending.is_empty() {
            self.prepared = Some(build(std::mem::take(&mut self.pending)));
        }
        Ok(())
    }

    /// One create-only marker: its appearance is the commit. The rank is after every marker
    /// the listing just showed, so a flush that starts after another returned masks it
    /// whatever the machines' clocks say.
    fn commit(&mut self) -> Result<usize, StorageError> {
        if self.pending.is_empty() && self.prepared.is_none() {
            return Ok(0);
        }
        let c = &self.cat;
        let prefix = self.gen.prefix();
        let listing = c.list_gen(&self.gen)?;
        let seen = listing
            .flushes
            .iter()
            .chain(&listing.compactions)
            .filter_map(|f| {
                f.key
                    .split_once('/')
                    .and_then(|(_, r)| layout::rank_micros(r))
            })
            .max()
            .map_or(0, |m| m + 1);
        let mut compactions = Vec::new();
        for m in &listing.compactions {
            if let Some(Ok(b)) = c.body(&format!("{prefix}{}", m.key))? {
                compactions.push((m.key.clone(), b));
            }
        }
        let names: Vec<String> = listing.flushes.iter().map(|f| f.key.clone()).collect();
        let (live_flushes, _) = view::live(&names, &compactions);

        // Taken only now: a failure before this point keeps the entries for the next commit.
        let (body, bytes) = match self.prepared.take() {
            Some(p) => p,
            None => build(std::mem::take(&mut self.pending)),
        };
        self.seq += 1;
        let rank = layout::rank(next_micros(seen), writer_id(), self.seq);
        let key = format!("{prefix}{}", DbObject::Flush(rank).rel());
        if let Created::Existed(_) = c.client.create(&key, &bytes)? {
            return Err(c.corrupt(&key, "a flush marker of this rank exists already (two processes with the same writer id?)"));
        }
        cache::put(c.cache_key(&key), Arc::new(body));
        self.last_flush = Some((key.clone(), bytes));
        // A wipe that came before the marker took the generation: the flush went with it.
        if c.client
            .head(&layout::tombstone_key(&self.gen.name, self.gen.gen))?
            .is_some()
        {
            return Err(StorageError::Wiped {
                db: PathBuf::from(&self.db.id),
            });
        }
        let live = live_flushes.len() + 1;
        if live > COMPACT_AFTER {
            // Compaction only makes reads cheaper: a failure leaves the flush committed.
            if let Err(e) = c.compact_some(&self.db, false) {
                tracing::warn!("compaction of {} after a flush failed: {e}", self.db.id);
            }
            return Ok(1);
        }
        Ok(live)
    }

    /// The flush object read back from the bucket (not the cache) equals the bytes written,
    /// and the database's generation holds that one flush and nothing else.
    fn verify_last_commit(&self) -> Result<Option<bool>, StorageError> {
        let Some((key, bytes)) = &self.last_flush else {
            return Ok(None);
        };
        if self.cat.client.get(key)?.as_deref() != Some(bytes.as_slice()) {
            return Ok(Some(false));
        }
        let listing = self.cat.list_gen(&self.gen)?;
        Ok(Some(
            listing.flushes.len() == 1 && listing.compactions.is_empty(),
        ))
    }
}
