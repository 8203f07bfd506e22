#![no_main]
//! Index files read from disk: whatever the bytes, reading, listing and looking up return errors,
//! never panic, and never allocate what a damaged header merely announces.

use fieldstore::storage::fs::OsFs;
use fieldstore::storage::toc::IndexFile;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = std::env::temp_dir().join(format!("fuzz-index-{}.idx", std::process::id()));
    if std::fs::write(&path, data).is_err() {
        return;
    }
    if let Ok(index) = IndexFile::read(&OsFs, &path) {
        for e in index.entries().take(10_000) {
            if e.is_err() {
                break;
            }
        }
        let _ = index.lookup("0\u{1f}500\u{1f}130");
        let _ = index.lookup("");
    }
    let _ = std::fs::remove_file(&path);
});
