//! FDB5's index files: B+trees of fixed-size pages (eckit's `BTree`), written as native
//! little-endian structs. Keys are datum fingerprints NUL-padded to K bytes and ordered by
//! `memcmp`; values locate a field in a data file. An index file may hold several trees, one
//! per flush, each found by the offset its toc record names; page `p` of a tree based at `B` is
//! at `B + (p - 1) * S`, and the root is page 1.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::storage::fs::Mapped;
use crate::storage::StorageError;

const PAGE_HEADER: usize = 40;

/// A tree's geometry, from the index type its toc record names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Geometry {
    pub key: usize,
    pub value: usize,
    pub page: usize,
}

impl Geometry {
    pub fn of(index_type: &str) -> Option<Geometry> {
        let (key, value, page) = match index_type {
            "BTreeIndex" | "BTreeIndex_32_65536_FieldRefReduced" => (32, 24, 65536),
            "BTreeIndex64" | "BTreeIndex_64_65536_FieldRefReduced" => (64, 24, 65536),
            "PointDBIndex" | "BTreeIndex_32_65536_FieldRefFull" => (32, 128, 65536),
            "BTreeIndex4MB" | "BTreeIndex_32_4194304_FieldRefReduced" => (32, 24, 4194304),
            _ => return None,
        };
        Some(Geometry { key, value, page })
    }

    fn leaf_entry(&self) -> usize {
        self.key + self.value
    }

    fn node_entry(&self) -> usize {
        self.key + 8
    }

    /// Entries a page holds; eckit splits a page as an insertion fills it, so it stores one
    /// fewer, and so does [`build`].
    fn leaf_capacity(&self) -> usize {
        (self.page - PAGE_HEADER) / self.leaf_entry() - 1
    }

    fn node_capacity(&self) -> usize {
        (self.page - PAGE_HEADER) / self.node_entry() - 1
    }
}

/// Where a field's bytes are: the data file's id in the record's URI store, offset, length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FieldLoc {
    pub uri: u64,
    pub offset: u64,
    pub length: u64,
}

fn u64_at(b: &[u8], o: usize) -> u64 {
    let mut w = [0u8; 8];
    if let Some(s) = b.get(o..o + 8) {
        w.copy_from_slice(s);
    }
    u64::from_le_bytes(w)
}

/// The fingerprint stored in a key slot: its bytes up to the first NUL.
fn key_text(slot: &[u8]) -> String {
    let end = slot.iter().position(|&c| c == 0).unwrap_or(slot.len());
    // Fingerprints are ASCII: checked once, copied once (the lossy form only when they are not).
    match std::str::from_utf8(&slot[..end]) {
        Ok(s) => s.to_owned(),
        Err(_) => String::from_utf8_lossy(&slot[..end]).into_owned(),
    }
}

/// A fingerprint padded as a key slot; `None` if it cannot be one (too long).
fn padded(fp: &str, k: usize) -> Option<Vec<u8>> {
    let b = fp.as_bytes();
    if b.len() > k {
        return None;
    }
    let mut v = vec![0u8; k];
    v[..b.len()].copy_from_slice(b);
    Some(v)
}

/// One tree of an index file, over the file's mapped bytes.
#[derive(Clone)]
pub(crate) struct Tree {
    map: Arc<Mapped>,
    path: Arc<PathBuf>,
    base: u64,
    geo: Geometry,
}

/// A page read and checked.
struct Page<'a> {
    bytes: &'a [u8],
    count: usize,
    node: bool,
    left: u64,
    right: u64,
}

impl Tree {
    /// A tree of an index file already mapped (several trees share one file).
    pub fn over(
        map: Arc<Mapped>,
        path: &Path,
        offset: i64,
        geo: Geometry,
    ) -> Result<Tree, StorageError> {
        if offset < 0 {
            return Err(StorageError::Corrupt {
                path: path.to_path_buf(),
                offset: 0,
                detail: format!("the toc names a tree at negative offset {offset}"),
            });
        }
        let t = Tree {
            map,
            path: Arc::new(path.to_path_buf()),
            base: offset as u64,
            geo,
        };
        t.page(1)?;
        Ok(t)
    }

    fn corrupt(&self, at: u64, detail: String) -> StorageError {
        StorageError::Corrupt {
            path: self.path.to_path_buf(),
            offset: at,
            detail,
        }
    }

    fn page(&self, id: u64) -> Result<Page<'_>, StorageError> {
        let at = id
            .checked_sub(1)
            .and_then(|p| p.checked_mul(self.geo.page as u64))
            .and_then(|o| o.checked_add(self.base))
            .ok_or_else(|| self.corrupt(self.base, format!("page id {id} is out of range")))?;
        let start = usize::try_from(at).unwrap_or(usize::MAX);
        let Some(bytes) = start
            .checked_add(self.geo.page)
            .and_then(|end| self.map.get(start..end))
        else {
            return Err(self.corrupt(
                at,
                format!(
                    "page {id} of the tree at {} lies past the end of the file ({} bytes)",
                    self.base,
                    self.map.len()
                ),
            ));
        };
        let found = u64_at(bytes, 0);
        if found != id {
            return Err(self.corrupt(at, format!("page {id} says it is page {found}")));
        }
        let count = u64_at(bytes, 8);
        let node = u64_at(bytes, 16) != 0;
        let entry = if node {
            self.geo.node_entry()
        } else {
            self.geo.leaf_entry()
        };
        if count > ((self.geo.page - PAGE_HEADER) / entry) as u64 {
            return Err(self.corrupt(
                at,
                format!("page {id} claims {count} entries, more than a page holds"),
            ));
        }
        Ok(Page {
            bytes,
            count: count as usize,
            node,
            left: u64_at(bytes, 24),
            right: u64_at(bytes, 32),
        })
    }

    fn slot<'p>(&self, page: &Page<'p>, i: usize) -> &'p [u8] {
        let size = if page.node {
            self.geo.node_entry()
        } else {
            self.geo.leaf_entry()
        };
        let o = PAGE_HEADER + i * size;
        &page.bytes[o..o + size]
    }

    fn leaf_value(&self, slot: &[u8]) -> FieldLoc {
        let k = self.geo.key;
        FieldLoc {
            uri: u64_at(slot, k),
            offset: u64_at(slot, k + 8),
            length: u64_at(slot, k + 16),
        }
    }

    /// Most pages a walk may visit: more would mean the links loop.
    fn page_limit(&self) -> u64 {
        (self.map.len() as u64).saturating_sub(self.base) / self.geo.page as u64 + 1
    }

    /// The field stored under a fingerprint.
    pub fn lookup(&self, fp: &str) -> Result<Option<FieldLoc>, StorageError> {
        let Some(key) = padded(fp, self.geo.key) else {
            return Ok(None);
        };
        let k = self.geo.key;
        let mut id = 1;
        for _ in 0..self.page_limit() {
            let page = self.page(id)?;
            if !page.node {
                let (mut lo, mut hi) = (0, page.count);
                while lo < hi {
                    let mid = (lo + hi) / 2;
                    let s = self.slot(&page, mid);
                    match s[..k].cmp(&key[..]) {
                        std::cmp::Ordering::Less => lo = mid + 1,
                        std::cmp::Ordering::Greater => hi = mid,
                        std::cmp::Ordering::Equal => return Ok(Some(self.leaf_value(s))),
                    }
                }
                return Ok(None);
            }
            // The last entry whose key is <= the fingerprint, else the left child.
            let (mut lo, mut hi) = (0, page.count);
            while lo < hi {
                let mid = (lo + hi) / 2;
                if self.slot(&page, mid)[..k] <= key[..] {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            id = if lo == 0 {
                page.left
            } else {
                u64_at(self.slot(&page, lo - 1), k)
            };
        }
        Err(self.corrupt(self.base, "the tree's pages loop".into()))
    }

    /// How many entries the tree holds: its leaves' counts, no entry decoded.
    pub fn entry_count(&self) -> Result<u64, StorageError> {
        let mut n = 0u64;
        self.walk_leaves(|page| {
            n += page.count as u64;
            Ok(())
        })?;
        Ok(n)
    }

    /// Every entry in key order, a leaf at a time.
    pub fn entries(&self) -> TreeEntries {
        TreeEntries {
            tree: self.clone(),
            leaf: None,
            pos: 0,
            visited: std::collections::HashSet::new(),
            done: false,
        }
    }

    /// Every entry in key order as stored: the fingerprint's bytes (up to the first NUL) and
    /// where its field is. Nothing is copied, for readers of whole trees (conversion).
    pub fn visit(
        &self,
        mut f: impl FnMut(&[u8], FieldLoc) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let k = self.geo.key;
        self.walk_leaves(|page| {
            for i in 0..page.count {
                let s = self.slot(page, i);
                let key = &s[..k];
                let end = key.iter().position(|&c| c == 0).unwrap_or(k);
                f(&key[..end], self.leaf_value(s))?;
            }
            Ok(())
        })
    }

    /// The leaves from the leftmost rightwards; a link to a node page or back to a leaf
    /// already seen is an error, reported before any entry repeats.
    fn walk_leaves(
        &self,
        mut f: impl FnMut(&Page<'_>) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let mut id = self.leftmost_leaf()?;
        let mut visited = std::collections::HashSet::new();
        loop {
            let page = self.page(id)?;
            if page.node {
                return Err(self.corrupt(self.base, format!("leaf link leads to node page {id}")));
            }
            if !visited.insert(id) {
                return Err(self.corrupt(
                    self.base,
                    format!("the tree's leaf links loop back to page {id}"),
                ));
            }
            f(&page)?;
            if page.right == 0 {
                return Ok(());
            }
            id = page.right;
        }
    }

    fn leftmost_leaf(&self) -> Result<u64, StorageError> {
        let mut id = 1;
        for _ in 0..self.page_limit() {
            let page = self.page(id)?;
            if !page.node {
                return Ok(id);
            }
            id = page.left;
        }
        Err(self.corrupt(self.base, "the tree's pages loop".into()))
    }
}

pub(crate) struct TreeEntries {
    tree: Tree,
    leaf: Option<u64>,
    pos: usize,
    /// Leaves read so far: a link back to one is a loop, reported before any entry repeats.
    visited: std::collections::HashSet<u64>,
    done: bool,
}

impl TreeEntries {
    fn step(&mut self) -> Result<Option<(String, FieldLoc)>, StorageError> {
        loop {
            let id = match self.leaf {
                Some(id) => id,
                None => {
                    let id = self.tree.leftmost_leaf()?;
                    self.leaf = Some(id);
                    id
                }
            };
            let page = self.tree.page(id)?;
            if page.node {
                return Err(self
                    .tree
                    .corrupt(self.tree.base, format!("leaf link leads to node page {id}")));
            }
            if self.pos == 0 && !self.visited.insert(id) {
                return Err(self.tree.corrupt(
                    self.tree.base,
                    format!("the tree's leaf links loop back to page {id}"),
                ));
            }
            if self.pos < page.count {
                let s = self.tree.slot(&page, self.pos);
                self.pos += 1;
                return Ok(Some((
                    key_text(&s[..self.tree.geo.key]),
                    self.tree.leaf_value(s),
                )));
            }
            if page.right == 0 {
                return Ok(None);
            }
            self.leaf = Some(page.right);
            self.pos = 0;
        }
    }
}

impl Iterator for TreeEntries {
    type Item = Result<(String, FieldLoc), StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.step() {
            Ok(Some(e)) => Some(Ok(e)),
            Ok(None) => {
                self.done = true;
                None
            }
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// A tree holding these entries (sorted by fingerprint, no two alike), as bytes to be written
/// at some offset of an index file: leaves linked both ways, node levels above them, the root
/// page 1. FDB5 readers only follow page ids, so a tree built whole reads as one built by
/// insertion.
pub(crate) fn build(geo: Geometry, entries: &[(String, FieldLoc)]) -> Result<Vec<u8>, String> {
    let k = geo.key;
    for w in entries.windows(2) {
        if w[0].0.as_bytes() >= w[1].0.as_bytes() {
            return Err(format!("entries out of order at '{}'", w[1].0));
        }
    }
    if let Some((fp, _)) = entries.iter().find(|(fp, _)| fp.len() > k) {
        return Err(format!(
            "fingerprint '{fp}' is longer than the index type's {k}-byte keys"
        ));
    }
    let leaves: Vec<&[(String, FieldLoc)]> = if entries.is_empty() {
        vec![&[]]
    } else {
        entries.chunks(geo.leaf_capacity()).collect()
    };
    // Levels of (first key, page id) from the leaves up; the root is page 1 whatever its level.
    let single = leaves.len() == 1;
    let mut pages: Vec<Vec<u8>> = Vec::new();
    let mut next_id = if single { 1 } else { 2 };
    let leaf_ids: Vec<u64> = (0..leaves.len()).map(|i| next_id + i as u64).collect();
    next_id += leaves.len() as u64;
    for (i, chunk) in leaves.iter().enumerate() {
        let mut p = vec![0u8; geo.page];
        p[0..8].copy_from_slice(&leaf_ids[i].to_le_bytes());
        p[8..16].copy_from_slice(&(chunk.len() as u64).to_le_bytes());
        let left = if i > 0 { leaf_ids[i - 1] } else { 0 };
        let right = leaf_ids.get(i + 1).copied().unwrap_or(0);
        p[24..32].copy_from_slice(&left.to_le_bytes());
        p[32..40].copy_from_slice(&right.to_le_bytes());
        for (j, (fp, loc)) in chunk.iter().enumerate() {
            let o = PAGE_HEADER + j * geo.leaf_entry();
            p[o..o + fp.len()].copy_from_slice(fp.as_bytes());
            p[o + k..o + k + 8].copy_from_slice(&loc.uri.to_le_bytes());
            p[o + k + 8..o + k + 16].copy_from_slice(&loc.offset.to_le_bytes());
            p[o + k + 16..o + k + 24].copy_from_slice(&loc.length.to_le_bytes());
        }
        pages.push(p);
    }
    let mut level: Vec<(&str, u64)> = leaves
        .iter()
        .zip(&leaf_ids)
        .map(|(c, id)| (c.first().map_or("", |e| e.0.as_str()), *id))
        .collect();
    let mut root = None;
    while level.len() > 1 {
        // A node holds a left child and up to capacity keyed children.
        let groups: Vec<&[(&str, u64)]> = level.chunks(geo.node_capacity() + 1).collect();
        let top = groups.len() == 1;
        let mut up = Vec::with_capacity(groups.len());
        for g in groups {
            let id = if top {
                1
            } else {
                let id = next_id;
                next_id += 1;
                id
            };
            let mut p = vec![0u8; geo.page];
            p[0..8].copy_from_slice(&id.to_le_bytes());
            p[8..16].copy_from_slice(&((g.len() - 1) as u64).to_le_bytes());
            p[16..24].copy_from_slice(&1u64.to_le_bytes());
            p[24..32].copy_from_slice(&g[0].1.to_le_bytes());
            for (j, (fp, child)) in g[1..].iter().enumerate() {
                let o = PAGE_HEADER + j * geo.node_entry();
                p[o..o + fp.len()].copy_from_slice(fp.as_bytes());
                p[o + k..o + k + 8].copy_from_slice(&child.to_le_bytes());
            }
            if top {
                root = Some(p);
            } else {
                pages.push(p);
            }
            up.push((g[0].0, id));
        }
        level = up;
    }
    // Lay the pages out by id.
    let total = if single { 1 } else { next_id - 1 } as usize;
    let mut out = vec![0u8; total * geo.page];
    let mut place = |p: &[u8]| {
        let id = u64_at(p, 0) as usize;
        let o = (id - 1) * geo.page;
        out[o..o + geo.page].copy_from_slice(p);
    };
    if let Some(r) = &root {
        place(r);
    }
    for p in &pages {
        place(p);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree_of(bytes: Vec<u8>, geo: Geometry) -> Tree {
        let map = Arc::new(Mapped::Bytes(bytes.into()));
        Tree::over(map, Path::new("t.index"), 0, geo).unwrap()
    }

    #[test]
    fn built_trees_are_read_back_in_order_and_looked_up() {
        let geo = Geometry::of("BTreeIndex").unwrap();
        for n in [0usize, 1, 3, 1168, 1169, 5000, 40000] {
            let mut entries: Vec<(String, FieldLoc)> = (0..n)
                .map(|i| {
                    (
                        format!("{}:{}:130", i % 97, i),
                        FieldLoc {
                            uri: (i % 3) as u64,
                            offset: i as u64 * 10,
                            length: 10,
                        },
                    )
                })
                .collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            let t = tree_of(build(geo, &entries).unwrap(), geo);
            let got: Vec<_> = t.entries().map(Result::unwrap).collect();
            assert_eq!(got, entries, "n={n}");
            // The copy-free walk sees the same entries, and the counts agree.
            let mut visited = Vec::new();
            t.visit(|fp, loc| {
                visited.push((String::from_utf8(fp.to_vec()).unwrap(), loc));
                Ok(())
            })
            .unwrap();
            assert_eq!(visited, entries, "n={n}");
            assert_eq!(t.entry_count().unwrap(), n as u64);
            for (fp, loc) in entries.iter().step_by(7) {
                assert_eq!(t.lookup(fp).unwrap(), Some(*loc), "n={n} {fp}");
            }
            assert_eq!(t.lookup("nope").unwrap(), None);
            assert_eq!(t.lookup("").unwrap(), None);
        }
    }

    #[test]
    fn damaged_pages_are_errors_not_panics() {
        let geo = Geometry::of("BTreeIndex").unwrap();
        let e = vec![(
            "0:500:130".to_string(),
            FieldLoc {
                uri: 0,
                offset: 0,
                length: 1,
            },
        )];
        let mut b = build(geo, &e).unwrap();
        b[0] = 7;
        let map = Arc::new(Mapped::Bytes(b.clone().into()));
        assert!(Tree::over(map, Path::new("x"), 0, geo).is_err());
        b[0] = 1;
        b[8] = 0xff;
        b[9] = 0xff;
        let map = Arc::new(Mapped::Bytes(b.clone().into()));
        let e = Tree::over(map, Path::new("x"), 0, geo)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("claims 65535 entries"), "{e}");
        let map = Arc::new(Mapped::Bytes(b[..100].to_vec().into()));
        assert!(Tree::over(map, Path::new("x"), 0, geo).is_err());
    }
}
