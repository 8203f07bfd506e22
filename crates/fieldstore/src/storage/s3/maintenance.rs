//! Keeping a generation's catalogue small: compaction (size-tiered after flushes, whole on
//! request), purge's rewrite without masked copies, and deleting what compactions replaced and
//! wipes left (docs/s3-format.md, "Compaction, purge, wipe").

use std::collections::BTreeSet;

use super::catalogue::{
    next_micros, now_secs, older_than, stamp, writer_id, Gen, Listing, S3Catalogue,
};
use super::client::Created;
use super::layout::{self, Body, GenObject, FORMAT};
use super::store::S3Store;
use super::view::{Source, View};
use crate::model::Key;
use crate::storage::catalogue::CompactReport;
use crate::storage::{DbRef, StorageError};

impl S3Catalogue {
    /// Writes a compaction of the loaded sources (masked copies dropped when `purge`).
    pub(super) fn write_compaction(
        &self,
        g: &Gen,
        listing: &Listing,
        chosen: &[Source],
        view: &View,
        purge: bool,
    ) -> Result<(usize, Body), StorageError> {
        let (indexes, _) = view.merged(purge);
        // Only names still listed: what earlier compactions replaced is deleted (or will be by
        // this compaction's clean-up), so bodies stay small however many flushes there were.
        let present: BTreeSet<&str> = listing
            .flushes
            .iter()
            .chain(&listing.compactions)
            .map(|m| m.key.as_str())
            .collect();
        let mut covers = BTreeSet::new();
        let mut supersedes = Vec::new();
        for s in chosen {
            if s.rank.is_some() {
                covers.insert(s.name.clone());
            } else {
                supersedes.push(s.name.clone());
                covers.extend(
                    s.body
                        .covers
                        .iter()
                        .filter(|n| present.contains(n.as_str()))
                        .cloned(),
                );
            }
        }
        let entries = indexes.iter().map(|i| i.entries.len()).sum();
        let body = Body {
            format: FORMAT,
            stamp: stamp(),
            created: now_secs(),
            covers: covers.into_iter().collect(),
            supersedes,
            indexes,
        };
        // Named after everything it holds, so a writer ranking after it ranks after them.
        let newest = chosen
            .iter()
            .filter_map(|s| {
                s.name
                    .split_once('/')
                    .and_then(|(_, r)| layout::rank_micros(r))
            })
            .max()
            .map_or(0, |m| m + 1);
        let name = format!(
            "compact/{}",
            layout::rank(next_micros(newest), writer_id(), 0)
        );
        let key = format!("{}{name}", g.prefix());
        match self.client.create(&key, &layout::encode(&body))? {
            Created::New => Ok((entries, body)),
            Created::Existed(_) => Err(self.corrupt(
                &key,
                "a compaction of this name exists already (two processes with the same writer id?)",
            )),
        }
    }

    /// Deletes the markers and compactions that listed compactions (and `new`, just written)
    /// replaced. No grace period is needed: a reader that listed one of them before the
    /// compaction existed and finds it gone lists again, and then sees the compaction.
    pub(super) fn collect_garbage(
        &self,
        g: &Gen,
        listing: &Listing,
        new: Option<&Body>,
    ) -> Result<usize, StorageError> {
        let prefix = g.prefix();
        let mut replaced: Vec<String> = Vec::new();
        for c in &listing.compactions {
            if let Some(Ok(b)) = self.body(&format!("{prefix}{}", c.key))? {
                replaced.extend(b.covers.iter().chain(&b.supersedes).cloned());
            }
        }
        if let Some(b) = new {
            replaced.extend(b.covers.iter().chain(&b.supersedes).cloned());
        }
        let present: BTreeSet<&str> = listing
            .flushes
            .iter()
            .chain(&listing.compactions)
            .map(|m| m.key.as_str())
            .collect();
        let mut doomed: Vec<String> = replaced
            .into_iter()
            .filter(|n| present.contains(n.as_str()))
            .map(|n| format!("{prefix}{n}"))
            .collect();
        doomed.sort();
        doomed.dedup();
        if !doomed.is_empty() {
            self.client.delete_many(&doomed)?;
        }
        Ok(doomed.len())
    }

    /// Deletes what wiped generations of this database left, catalogue and S3 store objects
    /// (once older than the grace period); returns the URIs deleted and those deferred. The
    /// store's objects of generation `store_wipes` are left to the store's own wipe.
    pub(super) fn clean_wiped(
        &self,
        name: &str,
        doit: bool,
        store_wipes: Option<u64>,
    ) -> Result<(Vec<String>, Vec<String>), StorageError> {
        let mut wiped = BTreeSet::new();
        for m in self.client.list(&layout::gens_prefix(name)) {
            if let Some((_, GenObject::Tombstone(g))) = layout::parse_gen_key(&m?.key) {
                wiped.insert(g);
            }
        }
        let mut gone = Vec::new();
        let mut deferred = Vec::new();
        for gen in wiped {
            let g = Gen {
                name: name.to_string(),
                gen,
            };
            let mut doomed = Vec::new();
            // The generation's catalogue objects, and the S3 store's objects of it.
            let data = S3Store::data_prefix(&self.db_ref(Key::new(), &g));
            let data = (store_wipes != Some(gen)).then(|| self.client.list(&data));
            let listed = self
                .client
                .list(&g.prefix())
                .chain(data.into_iter().flatten());
            for m in listed {
                let m = m?;
                if older_than(&m, self.client.grace()) {
                    doomed.push(m.key);
                } else {
                    deferred.push(self.client.uri(&m.key));
                }
            }
            gone.extend(doomed.iter().map(|k| self.client.uri(k)));
            if doit && !doomed.is_empty() {
                self.client.delete_many(&doomed)?;
            }
        }
        Ok((gone, deferred))
    }

    /// Merges all live markers and compactions into one, or (`all` false, after a flush) the
    /// live markers with the smallest compactions, size-tiered: a compaction joins while it
    /// holds at most what is merged so far (as a binary counter carries). So each entry is
    /// rewritten O(log n) times however large the database grows, and O(log n) compactions
    /// stay live.
    pub(super) fn compact_some(
        &self,
        db: &DbRef,
        all: bool,
    ) -> Result<CompactReport, StorageError> {
        let g = self.gen_of(db)?;
        let loaded = self.load(&g)?;
        let size = |s: &Source| -> usize { s.body.indexes.iter().map(|i| i.entries.len()).sum() };
        let chosen: Vec<Source> = if all {
            loaded.sources.clone()
        } else {
            let mut chosen: Vec<Source> = loaded
                .sources
                .iter()
                .filter(|s| s.rank.is_some())
                .cloned()
                .collect();
            let mut merged: usize = chosen.iter().map(size).sum();
            let mut compactions: Vec<&Source> =
                loaded.sources.iter().filter(|s| s.rank.is_none()).collect();
            compactions.sort_by_key(|s| size(s));
            for c in compactions {
                if size(c) > merged.max(1) {
                    break;
                }
                merged += size(c);
                chosen.push(c.clone());
            }
            chosen
        };
        let mut report = CompactReport::default();
        let mut new = None;
        if chosen.len() > 1 {
            let view = View::build(&chosen);
            let (entries, body) =
                self.write_compaction(&g, &loaded.listing, &chosen, &view, false)?;
            report.merged_indexes = chosen.len();
            report.new_indexes = 1;
            report.entries = entries;
            new = Some(body);
        }
        self.collect_garbage(&g, &loaded.listing, new.as_ref())?;
        Ok(report)
    }
}
