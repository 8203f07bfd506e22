//! Flush markers and compactions never change once written, so a process keeps the ones it
//! read (by server and URI, bounded in objects and entries): a reader's open costs one LIST plus
//! GETs of new objects only.
//! Listings are never cached, so freshness is one LIST away.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, OnceLock};

use super::layout::Body;

/// Bodies kept per process; the oldest read goes first.
const KEPT: usize = 4096;

/// Entries kept per process across all bodies (a compaction of a large database holds
/// millions): about 200 bytes each in memory, so under a GiB.
const KEPT_ENTRIES: usize = 4 << 20;

#[derive(Default)]
struct Cache {
    bodies: HashMap<String, Arc<Body>>,
    order: VecDeque<String>,
    entries: usize,
}

fn entries(b: &Body) -> usize {
    b.indexes.iter().map(|i| i.entries.len()).sum()
}

fn cache() -> &'static Mutex<Cache> {
    static CACHE: OnceLock<Mutex<Cache>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(Cache::default()))
}

pub fn get(uri: &str) -> Option<Arc<Body>> {
    cache().lock().ok()?.bodies.get(uri).cloned()
}

pub fn put(uri: String, body: Arc<Body>) {
    // A poisoned cache is only a slower one.
    let Ok(mut c) = cache().lock() else {
        return;
    };
    let n = entries(&body);
    if n > KEPT_ENTRIES {
        return;
    }
    if c.bodies.insert(uri.clone(), body).is_none() {
        c.order.push_back(uri);
        c.entries += n;
    }
    while c.order.len() > KEPT || c.entries > KEPT_ENTRIES {
        let Some(old) = c.order.pop_front() else {
            break;
        };
        if let Some(b) = c.bodies.remove(&old) {
            c.entries = c.entries.saturating_sub(entries(&b));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cache_is_bounded() {
        let b = Arc::new(Body {
            format: 1,
            stamp: String::new(),
            created: 0,
            covers: vec![],
            supersedes: vec![],
            indexes: vec![],
        });
        for i in 0..KEPT + 10 {
            put(format!("test-bound://{i}"), b.clone());
        }
        assert!(get("test-bound://0").is_none());
        assert!(get(&format!("test-bound://{}", KEPT + 9)).is_some());
    }
}
