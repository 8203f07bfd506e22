//! The store's record of the ecCodes release whose answers its MARS keys follow.
//!
//! ecCodes releases disagree on a few keys (Debian's 2.28 and PyPI's 2.50 give different
//! `paramId`s for some NCEP messages), so two writers loading different releases could file one
//! field under two keys. The native key reader's answers do not depend on the release; those
//! ecCodes gives do. The first process whose keys ecCodes read records its release at its first
//! flush; a process with another release is refused before its flush makes anything visible.

use std::io::ErrorKind as IoKind;
use std::path::Path;

use super::fs::FileSystem;
use super::StorageError;

/// The record's name: in the first root of a directory store, in the prefix of a bucket.
pub const RECORD: &str = ".fieldstore-eccodes";

/// The record's text for `eccodes` (`2.28.0`).
pub fn text(eccodes: &str) -> String {
    format!("{eccodes}\n")
}

/// Refuses `loaded` when the record names another release.
pub fn compare(recorded: &[u8], loaded: &str, record: &str) -> Result<(), StorageError> {
    let recorded = String::from_utf8_lossy(recorded).trim().to_string();
    if recorded.is_empty() || recorded == loaded {
        return Ok(());
    }
    Err(StorageError::EccodesMismatch {
        recorded,
        loaded: loaded.to_string(),
        record: record.to_string(),
    })
}

/// Checks (or makes, create-only) the record in a directory. A record that cannot be made
/// (a read-only root) is warned of, not fatal: only a record naming another release refuses.
pub fn check_in_dir(fs: &dyn FileSystem, root: &Path, loaded: &str) -> Result<(), StorageError> {
    let record = root.join(RECORD);
    let shown = record.display().to_string();
    match fs.read(&record) {
        Ok(b) => return compare(&b, loaded, &shown),
        Err(e) if e.kind() == IoKind::NotFound => {}
        Err(e) => {
            tracing::warn!(record = %shown, error = %e, "cannot read the store's ecCodes record");
            return Ok(());
        }
    }
    let tmp = root.join(format!("{RECORD}.{}", super::names::unique_name()));
    let made = fs
        .create_dir_all(root)
        .and_then(|()| fs.write(&tmp, text(loaded).as_bytes()))
        .and_then(|()| fs.hard_link(&tmp, &record));
    let _ = fs.remove_file(&tmp);
    match made {
        Ok(()) => Ok(()),
        // Another writer recorded first: its release is the one.
        Err(e) if e.kind() == IoKind::AlreadyExists => match fs.read(&record) {
            Ok(b) => compare(&b, loaded, &shown),
            Err(e) => Err(StorageError::io("read", record)(e)),
        },
        Err(e) => {
            tracing::warn!(record = %shown, error = %e, "cannot record the store's ecCodes release");
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error_kind::ErrorKind;
    use crate::storage::fs::os::OsFs;

    #[test]
    fn the_first_release_is_recorded_and_another_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFs;
        check_in_dir(&fs, dir.path(), "2.28.0").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(RECORD)).unwrap(),
            "2.28.0\n"
        );
        check_in_dir(&fs, dir.path(), "2.28.0").unwrap();
        let e = check_in_dir(&fs, dir.path(), "2.50.0").unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config);
        let msg = e.to_string();
        assert!(
            msg.contains("ecCodes 2.28.0") && msg.contains("ecCodes 2.50.0"),
            "{msg}"
        );
        // No temporary files left behind.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn an_empty_record_refuses_nothing() {
        assert!(compare(b"", "2.50.0", "r").is_ok());
        assert!(compare(b"2.50.0\n", "2.50.0", "r").is_ok());
        assert!(compare(b"2.28.0", "2.50.0", "r").is_err());
    }
}
