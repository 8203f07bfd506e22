//! The toc backend: a directory per database holding an append-only journal (`toc`, the single
//! commit point), per-writer data files and immutable per-flush index files.

mod catalogue;
mod checkpoint;
pub(crate) mod compaction;
pub mod convert;
mod history;
mod index;
mod journal;
pub(crate) mod maintenance;
pub mod placement;
mod reader;
pub mod relocate;
mod unpublished;
mod watch;
pub(crate) mod writer;

pub use catalogue::TocCatalogue;
pub use index::IndexFile;

/// Decodes a journal checkpoint's bytes (as `toc.checkpoint` holds them), for the fuzz target:
/// the number of live indexes it holds, `None` when it is refused.
#[doc(hidden)]
pub fn decode_checkpoint(bytes: &[u8]) -> Option<usize> {
    checkpoint::decode_live_count(bytes)
}

/// A key's name on disk (a database directory, the start of an index file name): its values
/// joined by `:`, as FDB5 names them, so ordinary names read `od:0001:oper:20261122:1200:g`.
///
/// Each value is escaped so that different values give different names and no name can leave
/// its directory: `%`, `/`, `:` and control characters become `%XX` (hex), as does a `.` that
/// would start the name (no hidden names, no `..`; wiping renames a database to a dot name). A
/// key with no value at all is `%`, which no escape produces. So two keys with the same
/// keywords get the same name only if their values are equal.
pub(crate) fn disk_name(key: &crate::model::Key) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(64);
    for (i, v) in key.values().enumerate() {
        if i > 0 {
            s.push(':');
        }
        for c in v.chars() {
            match c {
                '%' | '/' | ':' | '\0'..='\x1f' | '\x7f' => {
                    let _ = write!(s, "%{:02X}", c as u32);
                }
                '.' if s.is_empty() => s.push_str("%2E"),
                c => s.push(c),
            }
        }
    }
    if s.is_empty() {
        s.push('%');
    }
    s
}

/// The name versions before escaping gave a database directory: `/` became `_`, so `x/y` and
/// `x_y` shared one. Still looked up (checking the journal's key) so older stores are found.
pub(crate) fn legacy_dir_name(key: &crate::model::Key) -> String {
    key.fingerprint().replace('/', "_")
}

pub(crate) use crate::storage::names::unique_name;

/// Who owns a database (its Init record), as FDB5: only the owner (or root) wipes or purges it.
pub(crate) fn current_uid() -> u32 {
    // SAFETY: geteuid has no failure mode.
    unsafe { libc::geteuid() }
}

pub(crate) fn sync_dir(
    fs: &dyn crate::storage::fs::FileSystem,
    dir: &std::path::Path,
) -> Result<(), crate::storage::StorageError> {
    fs.sync_dir(dir)
        .map_err(crate::storage::StorageError::io("sync directory", dir))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Key;

    fn name(pairs: &[(&str, &str)]) -> String {
        disk_name(&Key::from_pairs(pairs.iter().copied()))
    }

    #[test]
    fn ordinary_names_are_fdb5_fingerprints() {
        let k = [
            ("class", "od"),
            ("expver", "0001"),
            ("stream", "oper"),
            ("date", "20261122"),
            ("time", "1200"),
            ("domain", "g"),
        ];
        assert_eq!(name(&k), "od:0001:oper:20261122:1200:g");
        assert_eq!(name(&[("class", "x_y"), ("a", "b.c-d")]), "x_y:b.c-d");
        assert_eq!(name(&[("class", "\u{e9}t\u{e9}")]), "\u{e9}t\u{e9}");
    }

    #[test]
    fn unsafe_and_ambiguous_values_are_escaped() {
        assert_eq!(name(&[("class", "x/y")]), "x%2Fy");
        assert_eq!(name(&[("class", "x:y")]), "x%3Ay");
        assert_eq!(name(&[("class", "x%2Fy")]), "x%252Fy");
        assert_eq!(name(&[("class", ".."), ("b", "..")]), "%2E.:..");
        assert_eq!(name(&[("class", ".hidden")]), "%2Ehidden");
        assert_eq!(name(&[("class", ""), ("b", ".x")]), ":.x");
        assert_eq!(name(&[("class", "a\0b\n")]), "a%00b%0A");
        assert_eq!(name(&[]), "%");
        assert_eq!(name(&[("class", "")]), "%");
        assert_eq!(name(&[("class", "/../../etc")]), "%2F..%2F..%2Fetc");
    }

    proptest::proptest! {
        /// Same keywords, different values: different names, each one safe path component.
        #[test]
        fn names_are_injective_and_safe(a in proptest::collection::vec("[a-z%/:._\\x00\\n]{0,4}", 1..4), b in proptest::collection::vec("[a-z%/:._\\x00\\n]{0,4}", 1..4)) {
            proptest::prop_assume!(a.len() == b.len());
            let key = |v: &Vec<String>| Key::from_pairs(v.iter().enumerate().map(|(i, x)| (format!("k{i}"), x.clone())));
            let (na, nb) = (disk_name(&key(&a)), disk_name(&key(&b)));
            proptest::prop_assert_eq!(na == nb, a == b);
            for n in [&na, &nb] {
                proptest::prop_assert!(!n.is_empty() && !n.starts_with('.'));
                proptest::prop_assert!(!n.contains('/') && !n.contains('\0'));
            }
        }
    }
}
