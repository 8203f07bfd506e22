use std::io::Read as _;

use super::*;
use crate::storage::{Catalogue, DumpRecord, Store};

fn key(s: &str) -> Key {
    Key::parse(s).unwrap()
}

struct Fixture {
    b: MemoryBackend,
    c: MemoryCatalogue,
    s: MemoryStore,
    db: DbRef,
    ik: Key,
}

fn fixture(capacity: u64) -> Fixture {
    let b = MemoryBackend::open(None, capacity).unwrap();
    let (c, s) = (b.catalogue(), b.store());
    let db = c.create(&key("{class=od,expver=0001}"), "schema").unwrap();
    Fixture {
        b,
        c,
        s,
        db,
        ik: key("{type=fc,levtype=pl}"),
    }
}

fn dk(step: &str) -> Key {
    Key::from_pairs([("step", step), ("param", "130")])
}

impl Fixture {
    fn flush(&self, fields: &[(&str, &[u8])]) {
        let mut sw = self.s.writer(&self.db).unwrap();
        let mut cw = self.c.writer(&self.db).unwrap();
        for (step, data) in fields {
            cw.add(&self.ik, &dk(step), sw.append(data).unwrap())
                .unwrap();
        }
        sw.sync().unwrap();
        cw.commit().unwrap();
    }

    fn get(&self, step: &str) -> Option<Vec<u8>> {
        let r = self.c.reader(&self.db).unwrap();
        let f = r.lookup(&self.ik, &dk(step)).unwrap()?;
        Some(self.s.read(&self.db, &f).unwrap())
    }

    /// Every listed entry, newest index first: (step, bytes, masked).
    fn listing(&self) -> Vec<(String, Vec<u8>, bool)> {
        let r = self.c.reader(&self.db).unwrap();
        let mut out = Vec::new();
        for i in 0..r.indexes().len() {
            for e in r.entries(i, true).unwrap() {
                let e = e.unwrap();
                let bytes = self.s.read(&self.db, &e.field).unwrap_or_default();
                out.push((e.datum.get("step").unwrap().to_string(), bytes, e.masked));
            }
        }
        out
    }
}

#[test]
fn archives_are_visible_only_after_commit_and_all_at_once() {
    let f = fixture(1 << 20);
    let mut sw = f.s.writer(&f.db).unwrap();
    let mut cw = f.c.writer(&f.db).unwrap();
    cw.add(&f.ik, &dk("0"), sw.append(b"zero").unwrap())
        .unwrap();
    cw.add(&f.ik, &dk("6"), sw.append(b"six").unwrap()).unwrap();
    let before = f.c.reader(&f.db).unwrap();
    assert!(f.get("0").is_none() && f.get("6").is_none());
    assert!(cw.is_dirty());
    cw.commit().unwrap();
    assert_eq!(f.get("0").unwrap(), b"zero");
    assert_eq!(f.get("6").unwrap(), b"six");
    // A reader opened earlier keeps its snapshot.
    assert!(before.lookup(&f.ik, &dk("0")).unwrap().is_none());
    assert_eq!(
        f.c.databases()
            .into_iter()
            .map(Result::unwrap)
            .collect::<Vec<_>>(),
        vec![f.db.clone()]
    );
    assert!(f.s.uri(&f.db, "obj-1").starts_with("memory://anon-"));
    // Keyword order does not make another database.
    assert_eq!(
        f.c.find(&key("{expver=0001,class=od}"))
            .unwrap()
            .unwrap()
            .key,
        f.db.key
    );
}

#[test]
fn a_newer_copy_masks_the_older_and_purge_frees_its_bytes() {
    let f = fixture(1 << 20);
    f.flush(&[("0", b"old"), ("6", b"six")]);
    f.flush(&[("0", b"newer copy")]);
    assert_eq!(f.get("0").unwrap(), b"newer copy");
    let listed = f.listing();
    let zeros: Vec<_> = listed.iter().filter(|(s, _, _)| s == "0").collect();
    assert_eq!(zeros.len(), 2, "{listed:?}");
    assert_eq!(
        (zeros[0].1.as_slice(), zeros[0].2),
        (&b"newer copy"[..], false)
    );
    assert_eq!((zeros[1].1.as_slice(), zeros[1].2), (&b"old"[..], true));
    let stats = f.c.stats(&f.db).unwrap();
    assert_eq!((stats.fields, stats.masked, stats.masked_bytes), (2, 1, 3));

    let used = f.b.used();
    let dry = f.c.purge(&f.db, false).unwrap();
    assert_eq!((dry.masked_fields, f.b.used()), (1, used));
    let r = f.c.purge(&f.db, true).unwrap();
    assert_eq!(r.masked_fields, 1);
    assert_eq!(f.b.used(), used - 3 - ENTRY_OVERHEAD);
    assert_eq!(f.listing().len(), 2);
    assert_eq!(f.get("0").unwrap(), b"newer copy");
    assert_eq!(f.get("6").unwrap(), b"six");
    assert!(f.c.dump(&f.db).unwrap().records.iter().any(|r| matches!(
        r,
        DumpRecord::Purge {
            masked_fields: 1,
            ..
        }
    )));
}

#[test]
fn compact_keeps_what_readers_see() {
    let f = fixture(1 << 20);
    // Shrinking flushes are not merged on commit, so compaction has work.
    let steps = ["0", "3", "4", "5", "6", "7", "8", "9", "10", "11"];
    f.flush(&steps.iter().map(|s| (*s, &b"a"[..])).collect::<Vec<_>>());
    f.flush(&[("0", b"b"), ("1", b"c"), ("2", b"d")]);
    f.flush(&[("0", b"e")]);
    let before = f.listing();
    assert!(f.c.reader(&f.db).unwrap().indexes().len() > 1);
    let r = f.c.compact(&f.db).unwrap();
    assert_eq!(r.new_indexes, 1);
    assert_eq!(f.c.reader(&f.db).unwrap().indexes().len(), 1);
    let mut after = f.listing();
    let mut before_sorted = before.clone();
    after.sort();
    before_sorted.sort();
    assert_eq!(after, before_sorted);
    assert_eq!(f.get("0").unwrap(), b"e");
    // One line per committed change.
    let dump = f.c.dump(&f.db).unwrap().records;
    let count = |p: fn(&DumpRecord) -> bool| dump.iter().filter(|r| p(r)).count();
    assert_eq!(
        count(|r| matches!(r, DumpRecord::Flush { .. })),
        3,
        "{dump:?}"
    );
    assert_eq!(
        count(|r| matches!(r, DumpRecord::Compact { new_indexes: 1, .. })),
        1,
        "{dump:?}"
    );
}

#[test]
fn a_full_store_refuses_the_write_and_keeps_what_was_flushed() {
    let cap = 3 * (100 + ENTRY_OVERHEAD);
    let f = fixture(cap);
    f.flush(&[("0", &[1; 100]), ("1", &[2; 100])]);
    let mut sw = f.s.writer(&f.db).unwrap();
    let mut cw = f.c.writer(&f.db).unwrap();
    cw.add(&f.ik, &dk("2"), sw.append(&[3; 100]).unwrap())
        .unwrap();
    let err = sw.append(&[4; 100]).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, StorageError::Full { used, capacity, .. } if used == cap && capacity == cap)
    );
    assert!(
        msg.contains("is full") && msg.contains("wipe") && msg.contains("capacity"),
        "{msg}"
    );
    assert_eq!(f.b.used(), cap);
    cw.commit().unwrap();
    for (s, b) in [("0", 1), ("1", 2), ("2", 3)] {
        assert_eq!(f.get(s).unwrap(), vec![b; 100]);
    }
    assert!(f.get("3").is_none());
    // A batch dropped unflushed gives its bytes back.
    let freed = {
        f.c.wipe(&f.db, true).unwrap();
        f.s.wipe(&f.db, true).unwrap();
        f.c.finish_wipe(&f.db).unwrap();
        f.b.used()
    };
    assert_eq!(freed, 0);
    let db = f.c.create(&f.db.key, "s").unwrap();
    let mut sw = f.s.writer(&db).unwrap();
    let mut cw = f.c.writer(&db).unwrap();
    cw.add(&f.ik, &dk("9"), sw.append(&[9; 100]).unwrap())
        .unwrap();
    assert_eq!(f.b.used(), 100 + ENTRY_OVERHEAD);
    drop(cw);
    assert_eq!(f.b.used(), 0);
}

#[test]
fn wipe_frees_everything_and_writers_go_on_into_a_new_database() {
    let f = fixture(1 << 20);
    let mut sw = f.s.writer(&f.db).unwrap();
    let mut cw = f.c.writer(&f.db).unwrap();
    cw.add(&f.ik, &dk("0"), sw.append(b"zero").unwrap())
        .unwrap();
    cw.commit().unwrap();
    f.c.set_locked(&f.db, "retrieve", true).unwrap();
    assert!(f.c.is_locked(&f.db, "retrieve").unwrap() && !f.c.is_locked(&f.db, "list").unwrap());
    let names = f.c.wipe(&f.db, false).unwrap();
    assert!(!names.is_empty());
    assert!(f.c.find(&f.db.key).unwrap().is_some());
    f.c.wipe(&f.db, true).unwrap();
    f.s.wipe(&f.db, true).unwrap();
    f.c.finish_wipe(&f.db).unwrap();
    assert_eq!((f.b.used(), f.c.databases().len()), (0, 0));
    assert!(f.c.find(&f.db.key).unwrap().is_none());
    // The same writers, still held by a frontend, archive into a fresh database.
    cw.add(&f.ik, &dk("6"), sw.append(b"six").unwrap()).unwrap();
    cw.commit().unwrap();
    assert_eq!(f.get("6").unwrap(), b"six");
    assert!(f.get("0").is_none());
    assert!(!f.c.is_locked(&f.db, "retrieve").unwrap());
}

#[test]
fn named_stores_are_shared_in_the_process() {
    let a = MemoryBackend::open(Some("memory-test-shared"), 1 << 20).unwrap();
    let b = MemoryBackend::open(Some("memory-test-shared"), 1 << 20).unwrap();
    let db = a.catalogue().create(&key("{class=od}"), "s").unwrap();
    let mut sw = a.store().writer(&db).unwrap();
    let mut cw = a.catalogue().writer(&db).unwrap();
    cw.add(&key("{type=fc}"), &dk("0"), sw.append(b"x").unwrap())
        .unwrap();
    cw.commit().unwrap();
    assert_eq!(b.catalogue().databases().len(), 1);
    assert_eq!(b.used(), a.used());
    let err = MemoryBackend::open(Some("memory-test-shared"), 1 << 21)
        .err()
        .unwrap();
    assert!(err.to_string().contains("same capacity"), "{err}");
    let c = MemoryBackend::open(None, 1 << 20).unwrap();
    assert!(c.catalogue().databases().is_empty());
}

#[test]
fn concurrent_writers_into_one_database() {
    let f = fixture(1 << 24);
    std::thread::scope(|s| {
        for t in 0..8 {
            let f = &f;
            s.spawn(move || {
                for round in 0..3 {
                    let mut sw = f.s.writer(&f.db).unwrap();
                    let mut cw = f.c.writer(&f.db).unwrap();
                    for i in 0..20 {
                        let k =
                            Key::from_pairs([("step", t.to_string()), ("param", i.to_string())]);
                        let data = format!("{t}-{i}-{round}");
                        cw.add(&f.ik, &k, sw.append(data.as_bytes()).unwrap())
                            .unwrap();
                    }
                    cw.commit().unwrap();
                }
            });
        }
    });
    let r = f.c.reader(&f.db).unwrap();
    for t in 0..8 {
        for i in 0..20 {
            let k = Key::from_pairs([("step", t.to_string()), ("param", i.to_string())]);
            let fr = r.lookup(&f.ik, &k).unwrap().unwrap();
            assert_eq!(
                f.s.read(&f.db, &fr).unwrap(),
                format!("{t}-{i}-2").as_bytes()
            );
        }
    }
    let s = f.c.stats(&f.db).unwrap();
    assert_eq!((s.fields, s.masked), (160, 320));
    f.c.purge(&f.db, true).unwrap();
    let held: u64 = (0..8)
        .flat_map(|t| (0..20).map(move |i| format!("{t}-{i}-2").len() as u64 + ENTRY_OVERHEAD))
        .sum();
    assert_eq!(f.b.used(), held);
}

#[test]
fn object_reads_span_adjacent_fields_and_stop_at_gaps() {
    let f = fixture(1 << 20);
    let mut sw = f.s.writer(&f.db).unwrap();
    let a = sw.append(b"abc").unwrap();
    sw.append(b"def").unwrap();
    let o = f.s.open_object(&f.db, &a.object).unwrap();
    let mut buf = [0u8; 10];
    assert_eq!(o.read_at(1, &mut buf).unwrap(), 5);
    assert_eq!(&buf[..5], b"bcdef");
    // A writer that stored nothing leaves no object behind.
    let idle = f.s.writer(&f.db).unwrap();
    drop(idle);
    let d = f.b.shared.get(&f.db.key).unwrap().unwrap();
    assert_eq!(d.objects.read().unwrap().len(), 1);
    assert_eq!(human_bytes(3 << 20), "3.0 MiB");
}

/// Through the frontend: handles opened from one parsed config share the store, another parse
/// has its own, and a handle goes on archiving after a wipe.
#[test]
fn local_handles_of_one_config_share_and_survive_a_wipe() {
    use crate::api::{Fdb, ListOptions, LocalFdb};
    use crate::model::config::{from_yaml_str, FdbConfig};
    use crate::model::request::parse_request;

    let open = |c: &FdbConfig| match c {
        FdbConfig::Local(l) => LocalFdb::new(l.clone()).unwrap(),
        other => panic!("{other:?}"),
    };
    let config = from_yaml_str("engine: memory\nmemory: {capacity: 1MiB}", "t.yaml").unwrap();
    let (a, b) = (open(&config), open(&config));
    let other = open(&from_yaml_str("engine: memory", "t.yaml").unwrap());
    let field = |step: &str, seed: u64| {
        let keys = [
            ("class", "od"),
            ("stream", "oper"),
            ("type", "fc"),
            ("expver", "0001"),
            ("date", "20261122"),
            ("time", "1200"),
            ("step", step),
            ("levtype", "pl"),
            ("levelist", "500"),
            ("param", "130"),
        ];
        crate::grib::sample::make_field(&keys, 10, seed).unwrap()
    };
    let all = parse_request("class=od,expver=0001").unwrap();
    let listed = |f: &LocalFdb, include_masked: bool| -> Vec<(String, bool)> {
        f.list(
            &all,
            ListOptions {
                include_masked,
                ..ListOptions::default()
            },
        )
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            (e.key.datum.get("step").unwrap().to_string(), e.masked)
        })
        .collect()
    };
    a.archive(None, &field("0", 1)).unwrap();
    assert!(listed(&b, false).is_empty());
    a.flush().unwrap();
    a.archive(None, &field("0", 2)).unwrap();
    a.flush().unwrap();
    assert_eq!(
        listed(&b, true),
        vec![("0".to_string(), false), ("0".to_string(), true)]
    );
    assert!(listed(&other, true).is_empty());
    let mut got = Vec::new();
    b.retrieve(&parse_request("class=od,expver=0001,stream=oper,date=20261122,time=1200,type=fc,levtype=pl,step=0,levelist=500,param=130").unwrap())
        .unwrap()
        .read_to_end(&mut got)
        .unwrap();
    assert_eq!(got, field("0", 2));

    b.wipe(
        &parse_request("class=od,expver=0001,stream=oper,date=20261122,time=1200").unwrap(),
        true,
    )
    .unwrap();
    assert!(listed(&a, true).is_empty());
    a.archive(None, &field("6", 3)).unwrap();
    a.flush().unwrap();
    assert_eq!(listed(&b, true), vec![("6".to_string(), false)]);
}

#[test]
fn dump_keeps_a_bounded_history() {
    let f = fixture(1 << 20);
    let d = f.b.shared.get(&f.db.key).unwrap().unwrap();
    let clear = |i: usize| DumpRecord::Clear {
        files: vec![format!("f{i}")],
    };
    for i in 0..state::HISTORY_KEPT + 2 {
        d.publish(state::Snapshot::default(), clear(i)).unwrap();
    }
    let dump = f.c.dump(&f.db).unwrap();
    assert_eq!(dump.records.len(), 1 + state::HISTORY_KEPT);
    assert_eq!(dump.total_records, state::HISTORY_KEPT as u64 + 3);
    assert!(matches!(dump.records[0], DumpRecord::Init { .. }));
    assert_eq!(dump.records[1], clear(2));
}

#[test]
fn a_database_keeps_the_creator_it_was_made_by() {
    let b = MemoryBackend::open(None, 1 << 20).unwrap();
    let c = b.catalogue();
    let db = c
        .create_by(&key("{class=od}"), "s", Some("ingest"))
        .unwrap();
    c.create_by(&key("{class=od}"), "s", Some("other")).unwrap();
    assert_eq!(c.creator(&db).unwrap().as_deref(), Some("ingest"));
    let local = c.create(&key("{class=rd}"), "s").unwrap();
    assert_eq!(c.creator(&local).unwrap(), None);
}
