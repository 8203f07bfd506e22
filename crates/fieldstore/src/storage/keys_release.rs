//! The store's records of what its MARS keys follow: the ecCodes release whose answers they are,
//! and the version of the native reader's tables.
//!
//! ecCodes releases disagree on a few keys (Debian's 2.28 and PyPI's 2.50 give different
//! `paramId`s for some NCEP messages), so two writers loading different releases could file one
//! field under two keys. The native key reader's answers do not depend on the ecCodes loaded but
//! on the tables embedded in fieldstore (generated from one release's definitions), which a
//! later fieldstore may carry in a newer version. So each source of keys has a record: the first
//! process whose keys that source read records its version at its first flush; a process with
//! another version is refused before its flush makes anything visible.

use std::io::ErrorKind as IoKind;
use std::path::Path;

use super::fs::FileSystem;
use super::StorageError;

/// The record of keys ecCodes read: its release (`2.28.0`). In the first root of a directory
/// store, in the prefix of a bucket.
pub const RECORD: &str = ".fieldstore-eccodes";

/// The record of keys the native reader read: its tables' version
/// (`fieldstore-mars-1+eccodes-2.28.0`). Beside [`RECORD`].
pub const TABLES_RECORD: &str = ".fieldstore-mars-tables";

/// Which reader's answers a record is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeysReader {
    /// ecCodes' `mars` namespace: the version is the ecCodes release loaded.
    Eccodes,
    /// fieldstore's native reader: the version is its embedded tables'.
    Native,
}

impl KeysReader {
    /// The record's name.
    pub fn record(self) -> &'static str {
        match self {
            KeysReader::Eccodes => RECORD,
            KeysReader::Native => TABLES_RECORD,
        }
    }

    /// The reader as a user reads it before its version (`ecCodes 2.28.0`).
    pub fn name(self) -> &'static str {
        match self {
            KeysReader::Eccodes => "ecCodes",
            KeysReader::Native => "native tables",
        }
    }
}

/// The record's text for `version` (`2.28.0`).
pub fn text(version: &str) -> String {
    format!("{version}\n")
}

/// Refuses `loaded` when the record names another version.
pub fn compare(
    reader: KeysReader,
    recorded: &[u8],
    loaded: &str,
    record: &str,
) -> Result<(), StorageError> {
    let recorded = String::from_utf8_lossy(recorded).trim().to_string();
    if recorded.is_empty() || recorded == loaded {
        return Ok(());
    }
    let (loaded, record) = (loaded.to_string(), record.to_string());
    Err(match reader {
        KeysReader::Eccodes => StorageError::EccodesMismatch {
            recorded,
            loaded,
            record,
        },
        KeysReader::Native => StorageError::TablesMismatch {
            recorded,
            loaded,
            record,
        },
    })
}

/// Checks (or makes, create-only) `reader`'s record in a directory. A record that cannot be
/// made (a read-only root) is warned of, not fatal: only a record naming another version
/// refuses.
pub fn check_in_dir(
    fs: &dyn FileSystem,
    root: &Path,
    reader: KeysReader,
    loaded: &str,
) -> Result<(), StorageError> {
    let name = reader.record();
    let record = root.join(name);
    let shown = record.display().to_string();
    match fs.read(&record) {
        Ok(b) => return compare(reader, &b, loaded, &shown),
        Err(e) if e.kind() == IoKind::NotFound => {}
        Err(e) => {
            tracing::warn!(record = %shown, error = %e, "cannot read the store's record of its keys");
            return Ok(());
        }
    }
    let tmp = root.join(format!("{name}.{}", super::names::unique_name()));
    let made = fs
        .create_dir_all(root)
        .and_then(|()| fs.write(&tmp, text(loaded).as_bytes()))
        .and_then(|()| fs.hard_link(&tmp, &record));
    let _ = fs.remove_file(&tmp);
    match made {
        Ok(()) => Ok(()),
        // Another writer recorded first: its version is the one.
        Err(e) if e.kind() == IoKind::AlreadyExists => match fs.read(&record) {
            Ok(b) => compare(reader, &b, loaded, &shown),
            Err(e) => Err(StorageError::io("read", record)(e)),
        },
        Err(e) => {
            tracing::warn!(record = %shown, error = %e, "cannot record what the store's keys follow");
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
        check_in_dir(&fs, dir.path(), KeysReader::Eccodes, "2.28.0").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(RECORD)).unwrap(),
            "2.28.0\n"
        );
        check_in_dir(&fs, dir.path(), KeysReader::Eccodes, "2.28.0").unwrap();
        let e = check_in_dir(&fs, dir.path(), KeysReader::Eccodes, "2.50.0").unwrap_err();
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
        let e = KeysReader::Eccodes;
        assert!(compare(e, b"", "2.50.0", "r").is_ok());
        assert!(compare(e, b"2.50.0\n", "2.50.0", "r").is_ok());
        assert!(compare(e, b"2.28.0", "2.50.0", "r").is_err());
    }

    /// The two records are independent: a store can follow ecCodes 2.50.0 for the messages
    /// the native reader declines and tables made from 2.28.0's definitions for the others.
    #[test]
    fn native_tables_have_a_record_of_their_own() {
        let dir = tempfile::tempdir().unwrap();
        let fs = OsFs;
        let v1 = "fieldstore-mars-1+eccodes-2.28.0";
        check_in_dir(&fs, dir.path(), KeysReader::Native, v1).unwrap();
        check_in_dir(&fs, dir.path(), KeysReader::Eccodes, "2.50.0").unwrap();
        assert_eq!(
            std::fs::read_to_string(dir.path().join(TABLES_RECORD)).unwrap(),
            format!("{v1}\n")
        );
        check_in_dir(&fs, dir.path(), KeysReader::Native, v1).unwrap();
        let e = check_in_dir(
            &fs,
            dir.path(),
            KeysReader::Native,
            "fieldstore-mars-2+eccodes-2.50.0",
        )
        .unwrap_err();
        assert_eq!(e.kind(), ErrorKind::Config);
        let msg = e.to_string();
        assert!(
            msg.contains(v1) && msg.contains("fieldstore-mars-2+eccodes-2.50.0"),
            "{msg}"
        );
        assert!(msg.contains(TABLES_RECORD), "{msg}");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 2);
    }
}
