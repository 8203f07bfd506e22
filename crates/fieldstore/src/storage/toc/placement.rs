//! Which root of a space a new database goes to: the roots' tier limits (capacity, file-system
//! fill, age) rule roots out, then the space's handler picks among the rest. Only new databases
//! are placed: one that exists stays where it is, even past a limit.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::model::config::{Root, Space};
use crate::model::Key;
use crate::storage::fs::FileSystem;
use crate::storage::StorageError;

/// How long a root's measured use is trusted: a root is walked at most this often, not per field.
const USAGE_TTL: Duration = Duration::from_secs(2);

/// What a root holds: the bytes of every database directory in it, and how many databases.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RootUsage {
    pub used: u64,
    pub databases: u64,
}

/// Size and free bytes of the file system holding a path (`statvfs`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FsSpace {
    pub total: u64,
    /// Available to unprivileged users, as `df` shows.
    pub free: u64,
}

impl FsSpace {
    fn free_fraction(&self) -> f64 {
        if self.total == 0 {
            0.0
        } else {
            self.free as f64 / self.total as f64
        }
    }

    /// Percent used, as `df` rounds it (up).
    pub fn used_percent(&self) -> u64 {
        let used = self.total.saturating_sub(self.free);
        if self.total == 0 {
            100
        } else {
            (used * 100).div_ceil(self.total)
        }
    }
}

/// `statvfs` of the nearest existing ancestor of `path` (a root not created yet is measured on
/// the file system it will be made on). `None` where the call fails.
pub fn fs_space(path: &Path) -> Option<FsSpace> {
    use std::os::unix::ffi::OsStrExt;
    let mut p = path;
    while !p.exists() {
        p = p.parent()?;
    }
    let c = std::ffi::CString::new(p.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::zeroed();
    // SAFETY: `c` is a valid NUL-terminated path and `st` is writable memory of the right type.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it filled `st`.
    let st = unsafe { st.assume_init() };
    // The field types are u64 here but 32-bit on some targets.
    #[allow(clippy::unnecessary_cast)]
    let (frsize, blocks, avail) = (st.f_frsize as u64, st.f_blocks as u64, st.f_bavail as u64);
    Some(FsSpace {
        total: blocks.saturating_mul(frsize),
        free: avail.saturating_mul(frsize),
    })
}

/// Walks a root: every directory in it is a database (or one being moved or wiped, which takes
/// room too); only those with a journal are counted as databases.
pub fn measure_root(fs: &dyn FileSystem, root: &Path) -> RootUsage {
    let mut usage = RootUsage::default();
    let Ok(entries) = fs.read_dir(root) else {
        return usage;
    };
    for e in entries.into_iter().filter(|e| e.is_dir) {
        let Ok(files) = fs.read_dir(&e.path) else {
            continue;
        };
        let mut journal = false;
        for f in files.into_iter().filter(|f| !f.is_dir) {
            journal |= f.file_name() == "toc";
            usage.used += fs.metadata(&f.path).map(|m| m.len).unwrap_or(0);
        }
        if journal && !e.file_name().starts_with('.') {
            usage.databases += 1;
        }
    }
    usage
}

/// The age in days of a database from its `date` value (`20261122`, `2026-11-22`, or FDB5's
/// relative `0`/`-1`), relative to `today`. `None`: no date, or not one of those forms.
pub fn age_days(db: &Key, today: chrono::NaiveDate) -> Option<i64> {
    let v = db.get("date")?.trim();
    if let Ok(rel) = v.parse::<i64>() {
        if rel <= 0 {
            return Some(-rel);
        }
    }
    let date = chrono::NaiveDate::parse_from_str(v, "%Y%m%d")
        .or_else(|_| chrono::NaiveDate::parse_from_str(v, "%Y-%m-%d"))
        .ok()?;
    Some((today - date).num_days())
}

/// Root choice state kept by a catalogue: the round-robin turn, a random source and the
/// briefly cached use of each root.
#[derive(Debug, Default)]
pub struct Placement {
    usage: Mutex<HashMap<PathBuf, (Instant, RootUsage)>>,
    turn: AtomicUsize,
    seed: AtomicU64,
}

impl Placement {
    /// A root's use, measured at most every [`USAGE_TTL`].
    pub fn usage(&self, fs: &dyn FileSystem, root: &Path) -> RootUsage {
        if let Ok(cache) = self.usage.lock() {
            if let Some((at, u)) = cache.get(root) {
                if at.elapsed() < USAGE_TTL {
                    return *u;
                }
            }
        }
        let u = measure_root(fs, root);
        if let Ok(mut cache) = self.usage.lock() {
            cache.insert(root.to_path_buf(), (Instant::now(), u));
        }
        u
    }

    /// Forgets a root's measured use (a database was moved in or out).
    pub fn forget(&self, root: &Path) {
        if let Ok(mut cache) = self.usage.lock() {
            cache.remove(root);
        }
    }

    /// Why `root` may not take the new database `db`, if it may not.
    fn refusal(
        &self,
        fs: &dyn FileSystem,
        root: &Root,
        db: &Key,
        today: chrono::NaiveDate,
    ) -> Option<String> {
        if let (Some(max), Some(age)) = (root.max_age_days, age_days(db, today)) {
            if age > i64::from(max) {
                return Some(format!("date is {age} days old, max_age {max}d"));
            }
        }
        if let Some(cap) = root.capacity {
            let used = self.usage(fs, &root.path).used;
            if used >= cap {
                return Some(format!("holds {used} bytes, capacity {cap}"));
            }
        }
        if let Some(max) = root.max_fill {
            if let Some(s) = fs_space(&root.path) {
                let pct = s.used_percent();
                if pct >= u64::from(max) {
                    return Some(format!("file system {pct}% full, max_fill {max}%"));
                }
            }
        }
        None
    }

    /// The root of `space` the new database `db` goes to.
    pub fn choose<'a>(
        &self,
        fs: &dyn FileSystem,
        space: &'a Space,
        db: &Key,
        today: chrono::NaiveDate,
    ) -> Result<&'a Root, StorageError> {
        let mut refused = Vec::new();
        let mut eligible = Vec::new();
        for r in space.roots.iter().filter(|r| r.archive) {
            match self.refusal(fs, r, db, today) {
                Some(why) => refused.push(format!("{} ({why})", r.path.display())),
                None => eligible.push(r),
            }
        }
        if eligible.is_empty() {
            let mut roots: Vec<String> = space
                .roots
                .iter()
                .filter(|r| !r.archive)
                .map(|r| format!("{} (archive disabled)", r.path.display()))
                .collect();
            roots.extend(refused);
            return Err(StorageError::NoWritableRoot {
                db: db.to_string(),
                roots: roots.join(", "),
            });
        }
        let pick = match space.handler.as_str() {
            "RoundRobin" => self.turn.fetch_add(1, Ordering::Relaxed) % eligible.len(),
            "Random" | "PureRandom" => (self.random() % eligible.len() as u64) as usize,
            "LeastUsed" => best(&eligible, |r| {
                fs_space(&r.path).map_or(0.0, |s| s.free as f64)
            }),
            "LeastUsedPercent" => best(&eligible, |r| {
                fs_space(&r.path).map_or(0.0, |s| s.free_fraction())
            }),
            "WeightedRandom" => self.weighted(&eligible, |r| {
                fs_space(&r.path).map_or(0.0, |s| s.free as f64)
            }),
            "WeightedRandomPercent" => self.weighted(&eligible, |r| {
                fs_space(&r.path).map_or(0.0, |s| s.free_fraction())
            }),
            // Default, First, Fill: config order, the limits above doing the filling.
            _ => 0,
        };
        Ok(eligible[pick])
    }

    /// splitmix64 over a per-catalogue counter seeded from the clock and pid: no dependency for
    /// a choice that needs spread, not secrecy.
    fn random(&self) -> u64 {
        let mut s = self.seed.load(Ordering::Relaxed);
        if s == 0 {
            let now = SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64);
            s = now ^ (u64::from(std::process::id()) << 32) | 1;
            self.seed.store(s, Ordering::Relaxed);
        }
        let mut z = self
            .seed
            .fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed)
            .wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// An index drawn with probability proportional to `weight` (uniform if all weigh nothing).
    fn weighted(&self, roots: &[&Root], weight: impl Fn(&Root) -> f64) -> usize {
        let w: Vec<f64> = roots.iter().map(|r| weight(r).max(0.0)).collect();
        let total: f64 = w.iter().sum();
        let draw = (self.random() >> 11) as f64 / (1u64 << 53) as f64;
        if total <= 0.0 {
            return ((draw * roots.len() as f64) as usize).min(roots.len() - 1);
        }
        let mut point = draw * total;
        for (i, x) in w.iter().enumerate() {
            if point < *x {
                return i;
            }
            point -= x;
        }
        roots.len() - 1
    }
}

/// The first root with the highest score.
fn best(roots: &[&Root], score: impl Fn(&Root) -> f64) -> usize {
    let mut pick = 0;
    let mut top = f64::NEG_INFINITY;
    for (i, r) in roots.iter().enumerate() {
        let s = score(r);
        if s > top {
            top = s;
            pick = i;
        }
    }
    pick
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fs;

    fn root(path: &Path) -> Root {
        Root::open_at(path.to_path_buf())
    }

    fn space(handler: &str, roots: Vec<Root>) -> Space {
        Space {
            name: None,
            regex: ".*".into(),
            handler: handler.into(),
            roots,
        }
    }

    fn today() -> chrono::NaiveDate {
        chrono::NaiveDate::from_ymd_opt(2026, 11, 24).unwrap()
    }

    fn key(date: &str) -> Key {
        Key::parse(&format!("{{class=od,date={date}}}")).unwrap()
    }

    #[test]
    fn age_reads_absolute_and_relative_dates() {
        assert_eq!(age_days(&key("20261122"), today()), Some(2));
        assert_eq!(age_days(&key("2026-10-25"), today()), Some(30));
        assert_eq!(age_days(&key("-3"), today()), Some(3));
        assert_eq!(age_days(&key("0"), today()), Some(0));
        assert_eq!(age_days(&key("junk"), today()), None);
        assert_eq!(age_days(&Key::parse("{class=od}").unwrap(), today()), None);
    }

    #[test]
    fn fill_skips_full_and_too_young_roots_in_order() {
        let d = tempfile::tempdir().unwrap();
        let (a, b, c) = (d.path().join("a"), d.path().join("b"), d.path().join("c"));
        std::fs::create_dir_all(a.join("od:1")).unwrap();
        std::fs::write(a.join("od:1/toc"), vec![0u8; 2000]).unwrap();
        let mut fast = root(&a);
        fast.capacity = Some(1000);
        let mut recent = root(&b);
        recent.max_age_days = Some(7);
        let s = space("Fill", vec![fast, recent, root(&c)]);
        let p = Placement::default();
        let os = fs::os();
        assert_eq!(
            p.choose(&*os, &s, &key("20261123"), today()).unwrap().path,
            b
        );
        assert_eq!(
            p.choose(&*os, &s, &key("19790101"), today()).unwrap().path,
            c
        );
        assert_eq!(
            p.usage(&*os, &a),
            RootUsage {
                used: 2000,
                databases: 1
            }
        );
    }

    #[test]
    fn no_root_left_names_every_reason() {
        let d = tempfile::tempdir().unwrap();
        let mut full = root(d.path());
        full.max_fill = Some(1);
        std::fs::write(d.path().join("x"), b"x").unwrap();
        let mut old = root(&d.path().join("o"));
        old.max_age_days = Some(1);
        let mut ro = root(&d.path().join("r"));
        ro.archive = false;
        let s = space("Default", vec![full, old, ro]);
        let err = Placement::default()
            .choose(&*fs::os(), &s, &key("20200101"), today())
            .unwrap_err()
            .to_string();
        assert!(err.contains("archive disabled"), "{err}");
        assert!(err.contains("max_age 1d"), "{err}");
    }

    #[test]
    fn handlers_choose_as_named() {
        let d = tempfile::tempdir().unwrap();
        let roots: Vec<Root> = (0..3)
            .map(|i| root(&d.path().join(i.to_string())))
            .collect();
        let os = fs::os();
        let k = key("20261124");
        let p = Placement::default();
        let rr = space("RoundRobin", roots.clone());
        let turns: Vec<PathBuf> = (0..4)
            .map(|_| p.choose(&*os, &rr, &k, today()).unwrap().path.clone())
            .collect();
        assert_eq!(
            turns,
            vec![
                roots[0].path.clone(),
                roots[1].path.clone(),
                roots[2].path.clone(),
                roots[0].path.clone()
            ]
        );
        for h in ["Default", "First", "Fill", "LeastUsed", "LeastUsedPercent"] {
            // One file system: equal free space, so the first wins.
            let s = space(h, roots.clone());
            assert_eq!(
                p.choose(&*os, &s, &k, today()).unwrap().path,
                roots[0].path,
                "{h}"
            );
        }
        for h in [
            "Random",
            "PureRandom",
            "WeightedRandom",
            "WeightedRandomPercent",
        ] {
            let s = space(h, roots.clone());
            let mut seen = std::collections::BTreeSet::new();
            for _ in 0..200 {
                seen.insert(p.choose(&*os, &s, &k, today()).unwrap().path.clone());
            }
            assert_eq!(seen.len(), 3, "{h} reached {seen:?}");
        }
    }

    #[test]
    fn statvfs_measures_a_missing_root_on_its_parent() {
        let d = tempfile::tempdir().unwrap();
        let s = fs_space(&d.path().join("not/yet")).unwrap();
        assert!(s.total > 0 && s.free <= s.total);
    }
}
