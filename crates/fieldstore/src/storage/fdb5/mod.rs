//! FDB5's own on-disk format (a "toc" database: `toc` and sub-toc records, B-tree index files,
//! raw data files), read and written in place, so a centre's existing stores open with the
//! config FDB5 used and FDB5's programs read what fieldstore adds. `docs/fdb5-format.md` says
//! what is supported and what the format cannot hold.

pub(crate) mod btree;
pub(crate) mod dbnames;
pub(crate) mod reader;
pub(crate) mod record;
pub(crate) mod stream;
pub(crate) mod toc;

pub(crate) use reader::Fdb5Reader;
pub(crate) use toc::looks_like_fdb5;
pub(crate) mod maintenance;

/// Entry points for the fuzz targets: FDB5's files decoded from untrusted bytes.
pub mod decode {
    use std::path::Path;
    use std::sync::Arc;

    use crate::storage::fs::Mapped;
    use crate::storage::StorageError;

    /// Decodes a toc file's records; returns how many whole records it holds.
    pub fn toc_records(bytes: &[u8]) -> Result<usize, StorageError> {
        super::toc::TocFile::parse(Path::new("toc"), bytes).map(|t| t.records.len())
    }

    /// Reads the tree of an index file at `offset` (a toc's index type names its geometry):
    /// every entry in order, then one lookup. Returns the number of entries.
    pub fn index_tree(
        bytes: &[u8],
        offset: i64,
        index_type: &str,
        lookup: &str,
    ) -> Result<usize, StorageError> {
        let Some(geo) = super::btree::Geometry::of(index_type) else {
            return Ok(0);
        };
        let map = Arc::new(Mapped::Bytes(bytes.to_vec().into()));
        let tree = super::btree::Tree::over(map, Path::new("x.index"), offset, geo)?;
        let mut n = 0;
        for e in tree.entries() {
            e?;
            n += 1;
        }
        tree.lookup(lookup)?;
        Ok(n)
    }
}
pub(crate) mod history;
pub(crate) mod writer;
