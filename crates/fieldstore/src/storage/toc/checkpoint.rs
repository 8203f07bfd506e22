//! A snapshot of a parsed journal (`toc.checkpoint`), so that opening a database with a long
//! history costs its live indexes, not every record it ever had.
//!
//! A forecast of 10 million fields leaves thousands of journal records (a flush per step and the
//! merges that follow), nearly all of them cleared since; parsing them again in every process
//! that lists or asks for axes costs about 80 ms. The checkpoint holds the parsed state exactly
//! (the same [`JournalState`] a full replay gives, names of cleared files included, so nothing
//! that asks "does the journal name this file" gets another answer), up to a record boundary of
//! the journal; readers take it and parse only what was appended after.
//!
//! It is derived data, never a commit point: written without a sync under a temporary name and
//! renamed in, and taken only when its own checksum holds and the journal still holds the two
//! records it was cut at (the first, so another incarnation under the same name does not match;
//! and the last, unchanged at the same offset). Anything else (absent, torn, damaged, from
//! another journal, another version) means a full replay, as before it existed.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use super::journal::{JournalState, LiveIndex};
use crate::storage::fs::{read_full_at, FileSystem, FsFile, OpenMode};

pub const FILE: &str = "toc.checkpoint";
const MAGIC: &[u8; 4] = b"FSCK";
const VERSION: u32 = 1;
/// Magic, version, payload length (u64), payload checksum.
const HEADER: usize = 20;
/// Journal bytes parsed past the last checkpoint before a writer makes another: replaying that
/// much costs about a millisecond.
pub const EVERY: u64 = 64 << 10;

fn path_in(dir: &Path) -> PathBuf {
    dir.join(FILE)
}

/// Whether a file in a database directory is a checkpoint or one being written.
pub fn is_checkpoint(name: &str) -> bool {
    name.starts_with(FILE)
}

/// The checksums of the journal's first record and of the one ending at `state.end`: what a
/// checkpoint is matched against. `None` when the journal cannot be read there.
fn anchors(toc: &dyn FsFile, state: &JournalState) -> Option<(u32, u32)> {
    let head_crc = |at: u64| -> Option<(u32, u64)> {
        let mut h = [0u8; 16];
        if read_full_at(toc, &mut h, at).ok()? != 16 || &h[..4] != b"FSTC" {
            return None;
        }
        let len = u32::from_le_bytes([h[8], h[9], h[10], h[11]]) as u64;
        Some((
            u32::from_le_bytes([h[12], h[13], h[14], h[15]]),
            at + 16 + len,
        ))
    };
    let (first, _) = head_crc(0)?;
    let (last, end) = head_crc(state.last_record)?;
    (end == state.end).then_some((first, last))
}

/// Writes the checkpoint of `state` (parsed from `dir`'s journal). Best effort: a checkpoint
/// that cannot be written only leaves readers replaying more.
pub fn save(fs: &dyn FileSystem, dir: &Path, state: &JournalState) {
    if state.records == 0 || state.bad_start {
        return;
    }
    let toc = dir.join("toc");
    let Ok(f) = fs.open(&toc, OpenMode::Read) else {
        return;
    };
    let Some((first, last)) = anchors(&*f, state) else {
        return;
    };
    let payload = encode(state, first, last);
    let mut buf = Vec::with_capacity(HEADER + payload.len());
    buf.extend_from_slice(MAGIC);
    buf.extend_from_slice(&VERSION.to_le_bytes());
    buf.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    buf.extend_from_slice(&crate::checksum::crc32c(&payload).to_le_bytes());
    buf.extend_from_slice(&payload);
    let tmp = dir.join(format!("{FILE}.{}", super::unique_name()));
    let written = fs
        .write(&tmp, &buf)
        .and_then(|_| fs.rename(&tmp, &path_in(dir)));
    if let Err(e) = written {
        tracing::debug!(dir = %dir.display(), "journal checkpoint not written: {e}");
        let _ = crate::storage::fs::remove_if_exists(fs, &tmp);
    }
}

/// The state a checkpoint in `dir` holds, if there is one that matches the journal.
pub fn load(fs: &dyn FileSystem, dir: &Path) -> Option<JournalState> {
    let buf = fs.read(&path_in(dir)).ok()?;
    let (state, first, last) = decode(&buf)?;
    let toc = fs.open(&dir.join("toc"), OpenMode::Read).ok()?;
    if anchors(&*toc, &state)? != (first, last) {
        tracing::debug!(dir = %dir.display(), "journal checkpoint does not match the journal");
        return None;
    }
    Some(state)
}

fn put_u32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn put_u64(b: &mut Vec<u8>, v: u64) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn put_str(b: &mut Vec<u8>, s: &str) {
    put_u32(b, s.len() as u32);
    b.extend_from_slice(s.as_bytes());
}

fn put_opt(b: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => {
            b.push(1);
            put_str(b, s);
        }
        None => b.push(0),
    }
}

fn encode(s: &JournalState, first: u32, last: u32) -> Vec<u8> {
    let (positions, live, withdrawn) = s.parts();
    let mut b = Vec::with_capacity(64 + positions.len() * 96 + live.len() * 512);
    put_u32(&mut b, first);
    put_u32(&mut b, last);
    put_u64(&mut b, s.end);
    put_u64(&mut b, s.last_record);
    put_u64(&mut b, s.records as u64);
    match &s.init {
        Some((key, uid)) => {
            b.push(1);
            put_str(&mut b, key);
            put_u32(&mut b, *uid);
        }
        None => b.push(0),
    }
    put_opt(&mut b, s.incarnation.as_deref());
    put_u32(&mut b, positions.len() as u32);
    for (f, p) in positions {
        put_str(&mut b, f);
        put_u64(&mut b, *p);
    }
    put_u32(&mut b, withdrawn.len() as u32);
    for f in withdrawn {
        put_str(&mut b, f);
    }
    put_u32(&mut b, live.len() as u32);
    for l in live.values() {
        put_str(&mut b, &l.file);
        put_str(&mut b, &l.index_key);
        put_u64(&mut b, l.entries);
        put_u64(&mut b, l.timestamp);
        put_u64(&mut b, l.position);
        put_u64(&mut b, l.record);
        put_u32(&mut b, l.axes.len() as u32);
        for (k, vs) in &l.axes {
            put_str(&mut b, k);
            put_u32(&mut b, vs.len() as u32);
            for v in vs {
                put_str(&mut b, v);
            }
        }
    }
    b
}

/// Reads the payload; every length is checked against what is left, so damage past the
/// checksum (or a forged file) ends in `None`, never a panic or a huge allocation.
struct Cursor<'a>(&'a [u8]);

impl<'a> Cursor<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if n > self.0.len() {
            return None;
        }
        let (a, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(a)
    }
    fn u8(&mut self) -> Option<u8> {
        Some(self.take(1)?[0])
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn str(&mut self) -> Option<String> {
        let n = self.u32()? as usize;
        Some(std::str::from_utf8(self.take(n)?).ok()?.to_string())
    }
    fn opt(&mut self) -> Option<Option<String>> {
        match self.u8()? {
            0 => Some(None),
            1 => Some(Some(self.str()?)),
            _ => None,
        }
    }
    /// A count of items each at least `min` bytes long: more than the bytes left can hold is
    /// damage.
    fn count(&mut self, min: usize) -> Option<usize> {
        let n = self.u32()? as usize;
        (n.saturating_mul(min) <= self.0.len()).then_some(n)
    }
}

pub(super) fn decode_live_count(buf: &[u8]) -> Option<usize> {
    decode(buf).map(|(s, _, _)| s.live_count())
}

fn decode(buf: &[u8]) -> Option<(JournalState, u32, u32)> {
    if buf.len() < HEADER || &buf[..4] != MAGIC {
        return None;
    }
    let mut h = Cursor(&buf[4..HEADER]);
    if h.u32()? != VERSION {
        return None;
    }
    let len = h.u64()?;
    let crc = h.u32()?;
    let payload = &buf[HEADER..];
    if payload.len() as u64 != len || crate::checksum::crc32c(payload) != crc {
        return None;
    }
    let mut c = Cursor(payload);
    let first = c.u32()?;
    let last = c.u32()?;
    let end = c.u64()?;
    let last_record = c.u64()?;
    let records = usize::try_from(c.u64()?).ok()?;
    let init = match c.u8()? {
        0 => None,
        1 => Some((c.str()?, c.u32()?)),
        _ => return None,
    };
    let incarnation = c.opt()?;
    let n = c.count(12)?;
    let mut positions = HashMap::with_capacity(n);
    for _ in 0..n {
        let f = c.str()?;
        positions.insert(f, c.u64()?);
    }
    let n = c.count(4)?;
    let mut withdrawn = HashSet::with_capacity(n);
    for _ in 0..n {
        withdrawn.insert(c.str()?);
    }
    let n = c.count(44)?;
    let mut live = Vec::with_capacity(n);
    for _ in 0..n {
        let file = c.str()?;
        let index_key = c.str()?;
        let entries = c.u64()?;
        let timestamp = c.u64()?;
        let position = c.u64()?;
        let record = c.u64()?;
        let na = c.count(8)?;
        let mut axes = Vec::with_capacity(na);
        for _ in 0..na {
            let k = c.str()?;
            let nv = c.count(4)?;
            let mut vs = Vec::with_capacity(nv);
            for _ in 0..nv {
                vs.push(c.str()?);
            }
            axes.push((k, vs));
        }
        live.push(LiveIndex {
            file,
            index_key,
            entries,
            timestamp,
            axes,
            position,
            record,
        });
    }
    if !c.0.is_empty() {
        return None;
    }
    let state = JournalState::from_parts(
        end,
        records,
        init,
        incarnation,
        last_record,
        positions,
        live,
        withdrawn,
    );
    Some((state, first, last))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::storage::fs::OsFs;
    use crate::storage::toc::journal::{append, encode as encode_records, Record};

    fn init(incarnation: &str) -> Record {
        Record::Init {
            db_key: "{class=od}".into(),
            uid: 0,
            created: 0,
            incarnation: Some(incarnation.into()),
            creator: None,
        }
    }

    fn index(n: u64, slot: Option<&str>) -> Record {
        Record::Index {
            file: format!("f{n}.idx"),
            index_key: format!("{{type={}}}", n % 3),
            entries: n,
            timestamp: n * 10,
            axes: vec![("step".into(), vec![n.to_string(), "0".into()])],
            slot: slot.map(str::to_string),
        }
    }

    fn journal(dir: &Path, n: u64) {
        journal_of(dir, n, "inc-1")
    }

    fn journal_of(dir: &Path, n: u64, incarnation: &str) {
        std::fs::write(dir.join("toc"), encode_records(&[init(incarnation)])).unwrap();
        let mut end = std::fs::metadata(dir.join("toc")).unwrap().len();
        for i in 1..=n {
            let mut recs = vec![index(i, None)];
            if i % 4 == 0 {
                recs = vec![
                    index(100 + i, Some(&format!("f{}.idx", i - 1))),
                    Record::Clear {
                        files: vec![format!("f{}.idx", i - 1), format!("f{}.idx", i - 2)],
                    },
                ];
            }
            if i == 7 {
                recs.push(Record::Clear {
                    files: vec!["never-named.idx".into()],
                });
            }
            end = append(&OsFs, &dir.join("toc"), end, &recs).unwrap().end;
        }
    }

    fn same(a: &JournalState, b: &JournalState) {
        assert_eq!(
            format!("{:?}", a.parts_sorted()),
            format!("{:?}", b.parts_sorted())
        );
        assert_eq!(
            (a.end, a.records, &a.init, &a.incarnation, a.last_record),
            (b.end, b.records, &b.init, &b.incarnation, b.last_record)
        );
        let live = |s: &JournalState| {
            s.live()
                .iter()
                .map(|l| (l.file.clone(), l.position))
                .collect::<Vec<_>>()
        };
        assert_eq!(live(a), live(b));
        assert_eq!(
            a.live_of("{type=1}").len(),
            b.live_of("{type=1}").len(),
            "by index key"
        );
    }

    #[test]
    fn a_checkpoint_and_the_rest_of_the_journal_give_what_a_full_replay_gives() {
        let d = tempfile::tempdir().unwrap();
        journal(d.path(), 10);
        let full = JournalState::read_all(&OsFs, &d.path().join("toc")).unwrap();
        save(&OsFs, d.path(), &full);
        let loaded = load(&OsFs, d.path()).expect("checkpoint taken");
        same(&loaded, &full);
        assert!(loaded.names("never-named.idx") && loaded.names("f5.idx"));
        // More appends after the checkpoint are replayed from its end.
        let end = full.end;
        append(
            &OsFs,
            &d.path().join("toc"),
            end,
            &[index(50, Some("f9.idx"))],
        )
        .unwrap();
        let via = JournalState::read(&OsFs, &d.path().join("toc")).unwrap();
        let all = JournalState::read_all(&OsFs, &d.path().join("toc")).unwrap();
        same(&via, &all);
        assert_eq!(via.checkpointed, end);
    }

    #[test]
    fn a_checkpoint_of_another_journal_or_a_damaged_one_is_ignored() {
        let d = tempfile::tempdir().unwrap();
        journal(d.path(), 6);
        let full = JournalState::read_all(&OsFs, &d.path().join("toc")).unwrap();
        save(&OsFs, d.path(), &full);
        let cp = std::fs::read(d.path().join(FILE)).unwrap();
        // Every single flipped byte is refused.
        for i in (0..cp.len()).step_by(7) {
            let mut bad = cp.clone();
            bad[i] ^= 0x40;
            std::fs::write(d.path().join(FILE), &bad).unwrap();
            assert!(load(&OsFs, d.path()).is_none(), "byte {i}");
        }
        // Cut short anywhere.
        for n in [0, 3, HEADER, cp.len() - 1] {
            std::fs::write(d.path().join(FILE), &cp[..n]).unwrap();
            assert!(load(&OsFs, d.path()).is_none(), "{n} bytes");
        }
        // The database wiped and made again under the same name, with the same history: only
        // the first record (another incarnation) tells them apart.
        std::fs::write(d.path().join(FILE), &cp).unwrap();
        journal_of(d.path(), 6, "inc-2");
        assert_eq!(
            std::fs::read(d.path().join("toc")).unwrap().len() as u64,
            full.end
        );
        assert!(load(&OsFs, d.path()).is_none());
        let s = JournalState::read(&OsFs, &d.path().join("toc")).unwrap();
        assert_eq!(s.incarnation.as_deref(), Some("inc-2"));
    }

    #[test]
    fn a_checkpoint_past_the_journal_end_is_ignored() {
        let d = tempfile::tempdir().unwrap();
        journal(d.path(), 6);
        let full = JournalState::read_all(&OsFs, &d.path().join("toc")).unwrap();
        save(&OsFs, d.path(), &full);
        // The journal replaced by a shorter copy of itself (a restore): the last anchor is gone.
        let toc = std::fs::read(d.path().join("toc")).unwrap();
        let cut = full.last_record as usize;
        std::fs::write(d.path().join("toc"), &toc[..cut]).unwrap();
        assert!(load(&OsFs, d.path()).is_none());
        let s = JournalState::read(&OsFs, &d.path().join("toc")).unwrap();
        assert!(s.end <= cut as u64);
    }

    /// Writers make checkpoints as the journal grows and when they close; a reader then starts
    /// from one and sees what a full replay gives.
    #[test]
    fn writers_checkpoint_as_the_journal_grows_and_when_they_close() {
        use crate::storage::catalogue::CatalogueWriter;
        use crate::storage::fs::os;
        use crate::storage::toc::writer::DbWriter;
        use crate::storage::FieldRef;
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        let key = crate::model::Key::from_pairs([("class", "od")]);
        let ik = crate::model::Key::from_pairs([("type", "fc")]);
        let toc = dir.join("toc");
        let mut w = DbWriter::open(&os(), dir, &key, "s").unwrap();
        let mut step = 0u64;
        // Flushes of one step each (one Index record of ~200 bytes), until one checkpoint.
        while !dir.join(FILE).exists() {
            let s = format!("{step}");
            let dk = crate::model::Key::from_pairs([("step", s.as_str()), ("param", "130")]);
            let f = FieldRef {
                object: "o".into(),
                offset: step,
                length: 1,
                checksum: None,
                extract: None,
            };
            w.add(&ik, &dk, f).unwrap();
            w.commit().unwrap();
            step += 1;
            assert!(step < 2000, "no checkpoint after {step} flushes");
        }
        let first = std::fs::metadata(&toc).unwrap().len();
        assert!(first >= EVERY, "checkpointed at {first} bytes");
        let loaded = load(&OsFs, dir).unwrap();
        same(&loaded, &JournalState::read_all(&OsFs, &toc).unwrap());
        // A few more flushes, then the writer closes: the checkpoint ends where the journal does.
        for s in [
            "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n",
        ] {
            let dk = crate::model::Key::from_pairs([("step", s), ("param", "130")]);
            let f = FieldRef {
                object: "o".into(),
                offset: 0,
                length: 1,
                checksum: None,
                extract: None,
            };
            w.add(&ik, &dk, f).unwrap();
            w.commit().unwrap();
        }
        drop(w);
        let loaded = load(&OsFs, dir).unwrap();
        assert_eq!(loaded.end, std::fs::metadata(&toc).unwrap().len());
        same(&loaded, &JournalState::read_all(&OsFs, &toc).unwrap());
        // Readers take it: the database reads the same with it and without it.
        let with = crate::storage::toc::reader::DbReader::open(&os(), dir).unwrap();
        std::fs::remove_file(dir.join(FILE)).unwrap();
        let without = crate::storage::toc::reader::DbReader::open(&os(), dir).unwrap();
        same(with.state(), without.state());
    }
}
