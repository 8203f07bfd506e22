#![no_main]
//! FDB5 index files (eckit B-trees of 64 KiB pages) from untrusted bytes: the tree at offset 0
//! walked entry by entry, then one lookup, return entries or a corrupt error, never panic, never
//! loop, and never allocate what a page header merely announces. The first byte chooses the
//! geometry (even: `BTreeIndex`, 32-byte keys; odd: `BTreeIndex64`, 64-byte keys); the rest is
//! the file. A page is 65,536 bytes: run with `-max_len=262145` (or more) so that inputs can hold
//! whole pages and several of them.

use fieldstore::storage::fdb5::decode::index_tree;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&first, file)) = data.split_first() else {
        return;
    };
    let index_type = if first % 2 == 0 {
        "BTreeIndex"
    } else {
        "BTreeIndex64"
    };
    let _ = index_tree(file, 0, index_type, "0:500:130");
});
