//! Taking a Rust mutex from a thread that holds the GIL without ever blocking while holding it:
//! a thread reading with the GIL released may hold the lock for a long time.

use std::sync::{Mutex, MutexGuard, TryLockError};

use pyo3::Python;

/// Locks `m`, waiting (if it must) with the GIL released. A poisoned lock is taken anyway: the
/// state behind it is a reader or an iterator, at worst positioned oddly, never unsafe.
pub fn lock<'a, T: Send>(py: Python<'_>, m: &'a Mutex<T>) -> MutexGuard<'a, T> {
    loop {
        match m.try_lock() {
            Ok(g) => return g,
            Err(TryLockError::Poisoned(p)) => return p.into_inner(),
            Err(TryLockError::WouldBlock) => py.detach(|| {
                drop(m.lock());
            }),
        }
    }
}
