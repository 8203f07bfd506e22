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
