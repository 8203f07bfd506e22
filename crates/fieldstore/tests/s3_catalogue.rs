//! The S3 catalogue on a real MinIO, through the `Catalogue` trait: what the conformance suite
//! cannot reach from the API (concurrent creators, a wipe racing a commit, a damaged marker,
//! compaction against a slow writer's marker, the grace period).

#[path = "support/minio.rs"]
#[allow(dead_code)]
mod minio;

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use fieldstore::model::config::S3Config;
use fieldstore::model::Key;
use fieldstore::storage::s3::{S3Catalogue, S3Client};
use fieldstore::storage::{Catalogue, DbRef, FieldRef, StorageError};

fn client(m: &minio::Minio, grace: Duration) -> S3Client {
    let mut cfg = S3Config::new(m.endpoint.clone(), minio::fresh_bucket("s3cat"));
    cfg.access_key_id = Some(m.access_key.clone());
    cfg.secret_access_key = Some(m.secret_key.clone());
    cfg.prefix = Some("t/".into());
    cfg.grace = grace;
    S3Client::connect(&cfg).unwrap()
}

fn key(s: &str) -> Key {
    Key::parse(s).unwrap()
}

fn field(object: &str) -> FieldRef {
    FieldRef {
        object: object.into(),
        offset: 0,
        length: 10,
        checksum: None,
        extract: None,
    }
}

fn flush(cat: &S3Catalogue, db: &DbRef, fields: &[(&str, &str)]) -> Result<usize, StorageError> {
    let mut w = cat.writer(db)?;
    for (param, object) in fields {
        w.add(
            &key("type=an"),
            &key(&format!("param={param}")),
            field(object),
        )?;
    }
    w.commit()
}

fn get(cat: &S3Catalogue, db: &DbRef, param: &str) -> Option<String> {
    cat.reader(db)
        .unwrap()
        .lookup(&key("type=an"), &key(&format!("param={param}")))
        .unwrap()
        .map(|f| f.object)
}

fn listed(cat: &S3Catalogue, db: &DbRef, masked: bool) -> Vec<(String, bool)> {
    let r = cat.reader(db).unwrap();
    let mut out = Vec::new();
    for i in 0..r.indexes().len() {
        for e in r.entries(i, masked).unwrap() {
            let e = e.unwrap();
            out.push((e.field.object, e.masked));
        }
    }
    out.sort();
    out
}

#[test]
fn concurrent_creators_agree_on_one_generation() {
    let Some(m) = minio::Minio::shared("s3_catalogue") else {
        return;
    };
    let c = client(m, Duration::from_secs(600));
    let k = key("class=od,expver=a/b,date=1");
    let ids: BTreeSet<String> = std::thread::scope(|s| {
        let hs: Vec<_> = (0..8)
            .map(|_| {
                let c = c.clone();
                let k = k.clone();
                s.spawn(move || S3Catalogue::new(c).create(&k, "schema").unwrap().id)
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(ids.len(), 1, "{ids:?}");
    let cat = S3Catalogue::new(c);
    let dbs: Vec<DbRef> = cat.databases().into_iter().map(Result::unwrap).collect();
    assert_eq!(dbs.len(), 1);
    assert_eq!(dbs[0].key, k, "the key comes back from the name alone");
    assert_eq!(cat.find(&k).unwrap().unwrap().id, dbs[0].id);
}

/// The creator is in the generation object, so another process (a fresh catalogue, no cache)
/// reads it back, and creating the database again does not change it (docs/authorization.md).
#[test]
fn a_database_keeps_the_identity_that_created_it() {
    let Some(m) = minio::Minio::shared("s3_catalogue") else {
        return;
    };
    let c = client(m, Duration::from_secs(600));
    let made = S3Catalogue::new(c.clone())
        .create_by(&key("class=od,expver=c1"), "schema", Some("ingest-oper"))
        .unwrap();
    let other = S3Catalogue::new(c.clone());
    let again = other
        .create_by(
            &key("class=od,expver=c1"),
            "schema",
            Some("ingest-research"),
        )
        .unwrap();
    assert_eq!(again.id, made.id);
    assert_eq!(
        S3Catalogue::new(c.clone())
            .creator(&made)
            .unwrap()
            .as_deref(),
        Some("ingest-oper")
    );
    let local = other.create(&key("class=od,expver=c2"), "schema").unwrap();
    assert_eq!(S3Catalogue::new(c).creator(&local).unwrap(), None);
}

#[test]
fn later_flushes_mask_and_a_wipe_hides_at_once() {
    let Some(m) = minio::Minio::shared("s3_catalogue") else {
        return;
    };
    let cat = S3Catalogue::new(client(m, Duration::from_secs(600)));
    let k = key("class=od,expver=1");
    let db = cat.create(&k, "").unwrap();
    flush(&cat, &db, &[("t", "one"), ("u", "u1")]).unwrap();
    flush(&cat, &db, &[("t", "two")]).unwrap();
    assert_eq!(get(&cat, &db, "t").as_deref(), Some("two"));
    assert_eq!(
        listed(&cat, &db, true),
        vec![
            ("one".into(), true),
            ("two".into(), false),
            ("u1".into(), false)
        ]
    );

    // A writer opened before the wipe commits after it: it is told, and nothing shows.
    let mut late = cat.writer(&db).unwrap();
    late.add(&key("type=an"), &key("param=v"), field("late"))
        .unwrap();
    let removed = cat.wipe(&db, true).unwrap();
    assert!(
        removed.iter().any(|r| r.contains("deferred")),
        "young objects are deferred: {removed:?}"
    );
    assert!(cat.find(&k).unwrap().is_none());
    assert!(cat.databases().is_empty());
    assert!(matches!(late.commit(), Err(StorageError::Wiped { .. })));

    // The next create makes a new generation with none of the old fields.
    let db2 = cat.create(&k, "").unwrap();
    assert_ne!(db2.id, db.id);
    assert!(listed(&cat, &db2, true).is_empty());
}

/// A move into a bucket checks its one commit by reading the flush object back: equal bytes and
/// no other flush in the database pass; an object changed under it, or another writer's flush
/// beside it, fail; a writer that committed nothing cannot tell (the move then reads back).
#[test]
fn a_commit_reads_back_as_written_and_alone() {
    let Some(m) = minio::Minio::shared("s3_catalogue") else {
        return;
    };
    let c = client(m, Duration::from_secs(600));
    let cat = S3Catalogue::new(c.clone());
    let db = cat.create(&key("class=od,expver=9"), "").unwrap();
    let mut w = cat.writer(&db).unwrap();
    assert_eq!(
        w.verify_last_commit().unwrap(),
        None,
        "nothing committed yet"
    );
    for p in ["t", "u"] {
        w.add(&key("type=an"), &key(&format!("param={p}")), field(p))
            .unwrap();
    }
    w.commit().unwrap();
    assert_eq!(w.verify_last_commit().unwrap(), Some(true));

    // Another writer's flush beside it: not alone any more.
    flush(&cat, &db, &[("v", "other")]).unwrap();
    assert_eq!(w.verify_last_commit().unwrap(), Some(false));

    // The object changed under it (a fresh database, so alone again first).
    let db = cat.create(&key("class=od,expver=10"), "").unwrap();
    let mut w = cat.writer(&db).unwrap();
    w.add(&key("type=an"), &key("param=t"), field("t")).unwrap();
    w.commit().unwrap();
    assert_eq!(w.verify_last_commit().unwrap(), Some(true));
    let flushes: Vec<String> = c
        .list("db/class=od,expver=10/")
        .map(|m| m.unwrap().key)
        .filter(|k| k.contains("/flush/"))
        .collect();
    assert_eq!(flushes.len(), 1, "{flushes:?}");
    let rel = flushes[0].clone();
    let mut bytes = c.get(&rel).unwrap().unwrap();
    let last = bytes.len() - 2;
    bytes[last] ^= 1;
    c.put(&rel, &bytes).unwrap();
    assert_eq!(w.verify_last_commit().unwrap(), Some(false));
}

#[test]
fn a_damaged_marker_is_named_and_the_others_stay_readable() {
    let Some(m) = minio::Minio::shared("s3_catalogue") else {
        return;
    };
    let c = client(m, Duration::from_secs(600));
    let cat = S3Catalogue::new(c.clone());
    let db = cat.create(&key("class=od,expver=2"), "").unwrap();
    flush(&cat, &db, &[("t", "good")]).unwrap();
    let bad = "db/class=od,expver=2/0000000001/flush/00000000000000001.x.0000000001";
    c.put(bad, b"{\"format\":1}\ncrc32c=00000000\n").unwrap();
    let r = cat.reader(&db).unwrap();
    assert_eq!(r.indexes().len(), 2);
    let mut errors = Vec::new();
    let mut fields = Vec::new();
    for i in 0..r.indexes().len() {
        match r.entries(i, false) {
            Ok(it) => fields.extend(it.map(|e| e.unwrap().field.object)),
            Err(e) => errors.push(e),
        }
    }
    assert_eq!(fields, vec!["good".to_string()]);
    assert_eq!(errors.len(), 1);
    let msg = errors[0].to_string();
    assert!(msg.contains(bad) && msg.contains("checksum"), "{msg}");
    assert_eq!(errors[0].kind(), fieldstore::ErrorKind::Corrupt);
}

#[test]
fn compaction_keeps_masking_exact_and_bounds_the_markers() {
    let Some(m) = minio::Minio::shared("s3_catalogue") else {
        return;
    };
    let c = client(m, Duration::ZERO);
    let cat = S3Catalogue::new(c.clone());
    let db = cat.create(&key("class=od,expver=3"), "").unwrap();
    // More flushes than the threshold: a commit compacts on its own.
    let n = fieldstore::storage::s3::COMPACT_AFTER + 5;
    let mut live = 0;
    for i in 0..n {
        live = flush(
            &cat,
            &db,
            &[("t", &format!("t{i}")), (&format!("p{i}"), "x")],
        )
        .unwrap();
    }
    assert!(live < n, "the writer compacted ({live} live markers)");
    let s = cat.stats(&db).unwrap();
    assert_eq!((s.fields, s.masked), (n as u64 + 1, n as u64 - 1));
    assert_eq!(
        get(&cat, &db, "t").as_deref(),
        Some(&*format!("t{}", n - 1))
    );

    // A slow writer's marker with a rank below the compaction's newest entry: masked by it.
    let slow = "db/class=od,expver=3/0000000001/flush/00000000000000002.slow.0000000001";
    let body = r#"{"format":1,"stamp":"slow","created":0,"indexes":[{"key":[["type","an"]],"keywords":["param"],"axes":{"param":["t","q"]},"entries":[{"values":["t"],"object":"slow","offset":0,"length":10},{"values":["q"],"object":"q","offset":0,"length":10}]}]}"#;
    let crc = fieldstore::checksum::crc32c(body.as_bytes());
    c.put(slow, format!("{body}\ncrc32c={crc:08x}\n").as_bytes())
        .unwrap();
    assert_eq!(
        get(&cat, &db, "t").as_deref(),
        Some(&*format!("t{}", n - 1))
    );
    assert_eq!(get(&cat, &db, "q").as_deref(), Some("q"));

    // Purge drops the masked copies, and names the data objects no entry references (a
    // killed writer's) once older than the grace period (none here) for the store to delete.
    let orphan = format!(
        "{}orphan.data",
        fieldstore::storage::s3::store::S3Store::data_prefix(&db)
    );
    c.put(&orphan, b"bytes of a writer killed before its flush")
        .unwrap();
    let report = cat.purge(&db, true).unwrap();
    assert_eq!(report.masked_fields, n);
    assert!(
        report.objects.contains(&"orphan.data".to_string()),
        "{:?}",
        report.objects
    );
    let s = cat.stats(&db).unwrap();
    assert_eq!((s.fields, s.masked), (n as u64 + 2, 0));
    cat.compact(&db).unwrap();
    let objects: Vec<String> = c
        .list("db/class=od,expver=3/0000000001/")
        .map(|m| m.unwrap().key)
        .collect();
    assert_eq!(objects.len(), 1, "one compaction left: {objects:?}");
    assert_eq!(get(&cat, &db, "p3").as_deref(), Some("x"));
}

#[test]
fn locks_are_objects_beside_the_markers() {
    let Some(m) = minio::Minio::shared("s3_catalogue") else {
        return;
    };
    let cat = Arc::new(S3Catalogue::new(client(m, Duration::from_secs(600))));
    let db = cat.create(&key("class=od,expver=4"), "").unwrap();
    assert!(!cat.is_locked(&db, "archive").unwrap());
    cat.set_locked(&db, "archive", true).unwrap();
    assert!(cat.is_locked(&db, "archive").unwrap());
    assert!(!cat.is_locked(&db, "list").unwrap());
    cat.set_locked(&db, "archive", false).unwrap();
    assert!(!cat.is_locked(&db, "archive").unwrap());
}

#[test]
fn concurrent_writers_lose_nothing_and_never_conflict() {
    let Some(m) = minio::Minio::shared("s3_catalogue") else {
        return;
    };
    let c = client(m, Duration::from_secs(600));
    let cat = S3Catalogue::new(c.clone());
    let db = cat.create(&key("class=od,expver=5"), "").unwrap();
    let (writers, flushes) = (8, 12);
    // Enough flushes that several writers compact at once, overlapping each other.
    assert!(writers * flushes > fieldstore::storage::s3::COMPACT_AFTER);
    let before = c.stats();
    std::thread::scope(|s| {
        for w in 0..writers {
            let cat = S3Catalogue::new(c.clone());
            let db = db.clone();
            s.spawn(move || {
                for f in 0..flushes {
                    let p = format!("w{w}f{f}");
                    flush(&cat, &db, &[(&p, &p), ("shared", &p)]).unwrap();
                }
            });
        }
    });
    let after = c.stats();
    assert_eq!(
        after.conflicts, before.conflicts,
        "no writer's create met another's"
    );
    let s = cat.stats(&db).unwrap();
    assert_eq!(s.fields, (writers * flushes + 1) as u64);
    assert_eq!(s.masked, (writers * flushes - 1) as u64);
    for w in 0..writers {
        for f in 0..flushes {
            let p = format!("w{w}f{f}");
            assert_eq!(get(&cat, &db, &p).as_deref(), Some(p.as_str()));
        }
    }
    // Every reader agrees on the winner of the field all of them wrote.
    let winner = get(&cat, &db, "shared").unwrap();
    assert_eq!(
        get(&S3Catalogue::new(c.clone()), &db, "shared"),
        Some(winner)
    );
}

#[test]
fn a_wipe_defers_young_objects_and_a_later_purge_deletes_them() {
    let Some(m) = minio::Minio::shared("s3_catalogue") else {
        return;
    };
    let grace = Duration::from_secs(2);
    let c = client(m, grace);
    let cat = S3Catalogue::new(c.clone());
    let k = key("class=od,expver=6");
    let db = cat.create(&k, "").unwrap();
    let data = fieldstore::storage::s3::store::S3Store::data_prefix(&db);
    c.put(&format!("{data}x.data"), b"bytes").unwrap();
    flush(&cat, &db, &[("t", "x.data")]).unwrap();
    let said = cat.wipe(&db, true).unwrap();
    assert!(
        said.iter()
            .any(|s| s.contains("/flush/") && s.contains("deferred")),
        "{said:?}"
    );
    let gen1 = "db/class=od,expver=6/0000000001/";
    assert_eq!(
        c.list(gen1).count(),
        1,
        "young objects stay for the grace period"
    );

    std::thread::sleep(grace + Duration::from_millis(200));
    let db2 = cat.create(&k, "").unwrap();
    cat.purge(&db2, true).unwrap();
    assert_eq!(
        c.list(gen1).count(),
        0,
        "the purge deleted the old catalogue objects"
    );
    assert_eq!(c.list(&data).count(), 0, "and the old generation's data");
}

#[test]
fn compaction_after_flushes_is_size_tiered() {
    let Some(m) = minio::Minio::shared("s3_catalogue") else {
        return;
    };
    let c = client(m, Duration::from_secs(600));
    let cat = S3Catalogue::new(c.clone());
    let db = cat.create(&key("class=od,expver=7"), "").unwrap();
    let round = fieldstore::storage::s3::COMPACT_AFTER + 1;
    let mut compactions = Vec::new();
    for i in 0..3 * round {
        let p = format!("p{i}");
        flush(&cat, &db, &[(&p, &p)]).unwrap();
        if (i + 1) % round == 0 {
            compactions.push(c.list("db/class=od,expver=7/0000000001/compact/").count());
        }
    }
    // Round 1 makes one; round 2 merges into it (equal size); round 3 leaves it and adds one.
    assert_eq!(compactions, vec![1, 1, 2]);
    assert_eq!(cat.stats(&db).unwrap().fields, 3 * round as u64);
    // An explicit compact merges everything.
    cat.compact(&db).unwrap();
    assert_eq!(c.list("db/class=od,expver=7/0000000001/").count(), 1);
    assert_eq!(get(&cat, &db, "p0").as_deref(), Some("p0"));
}

/// Commits from `from` on, once `want` of them have settled (S3 delivers a flush a few
/// seconds after its rank's time).
fn settled_commits(
    cat: &S3Catalogue,
    db: &DbRef,
    epoch: &str,
    from: u64,
    want: usize,
) -> Vec<fieldstore::storage::history::Commit> {
    use fieldstore::storage::history::Commits;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        match cat.commits(db, epoch, from, 100).unwrap() {
            Commits::Since(c) if c.len() >= want => return c,
            Commits::Since(_) => {}
            other => panic!("expected commits, got {other:?}"),
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{want} commits never settled"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Two writers' commits can become visible out of rank order: a subscriber already past the
/// later one must still get the slow one, and a compaction taking both markers' place changes
/// nothing for a cursor.
#[test]
fn subscribers_get_a_late_lower_ranked_marker_and_read_through_compactions() {
    use fieldstore::storage::history::{Commits, Wake};
    let Some(m) = minio::Minio::shared("s3_catalogue") else {
        return;
    };
    let c = client(m, Duration::from_secs(600));
    let cat = S3Catalogue::new(c.clone());
    let db = cat.create(&key("class=od,expver=sub"), "").unwrap();
    flush(&cat, &db, &[("t", "before")]).unwrap();
    let mark = cat.history_mark(&db).unwrap();
    let mut waiter = cat.change_waiter().unwrap();
    waiter.follow(&db).unwrap();
    // The slow writer takes its rank now, then the fast one commits and is seen first.
    let micros = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let slow_rank = format!("{micros:017}.slow-writer.1.2.3.0000000001");
    std::thread::sleep(Duration::from_millis(20));
    flush(&cat, &db, &[("x", "fast1"), ("u", "fast2"), ("w", "fast3")]).unwrap();
    match waiter.wait(Duration::from_secs(10)).unwrap() {
        Wake::Changed(ids) => assert_eq!(ids, vec![db.id.clone()]),
        other => panic!("expected the database changed, got {other:?}"),
    }
    let json = r#"{"format":1,"stamp":"slow#1","created":1,"indexes":[{"key":[["type","an"]],"keywords":["param"],"axes":{"param":["v"]},"entries":[{"values":["v"],"object":"slow","offset":0,"length":10}]}]}"#;
    let mut body = json.as_bytes().to_vec();
    body.extend_from_slice(
        format!(
            "\ncrc32c={:08x}\n",
            fieldstore::checksum::crc32c(json.as_bytes())
        )
        .as_bytes(),
    );
    c.create(&format!("db/{}/flush/{slow_rank}", db.id), &body)
        .unwrap();
    let got = settled_commits(&cat, &db, &mark.epoch, mark.end, 2);
    let objects: Vec<Vec<String>> = got
        .iter()
        .map(|c| c.entries.iter().map(|e| e.field.object.clone()).collect())
        .collect();
    // A flush's fields in key order, whichever object holds them (so a position inside one
    // survives a compaction).
    assert_eq!(objects, [vec!["slow"], vec!["fast2", "fast3", "fast1"]]);
    assert!(got[0].next <= got[1].at);
    // The same history after a compaction replaced the markers.
    cat.compact(&db).unwrap();
    let again = settled_commits(&cat, &db, &mark.epoch, mark.end, 2);
    assert_eq!(again, got);
    let rest = settled_commits(&cat, &db, &mark.epoch, got[0].next, 1);
    assert_eq!(rest, got[1..]);
    // A wipe: gone; made again: another epoch.
    cat.wipe(&db, true).unwrap();
    assert_eq!(cat.commits(&db, &mark.epoch, 0, 10).unwrap(), Commits::Gone);
    let db2 = cat.create(&key("class=od,expver=sub"), "").unwrap();
    // The waiter lists `dbs/`: a wipe or a new generation asks for a rescan.
    assert_eq!(waiter.wait(Duration::from_secs(10)).unwrap(), Wake::Rescan);
    match cat.commits(&db2, &mark.epoch, got[1].next, 10).unwrap() {
        Commits::Recreated(m2) => assert_ne!(m2.epoch, mark.epoch),
        other => panic!("expected another epoch, got {other:?}"),
    }
}

/// The ecCodes release a bucket's keys follow is recorded create-only by the first writer whose
/// keys ecCodes read; a writer with another release is refused (storage::keys_release).
#[test]
fn the_first_eccodes_release_is_recorded_and_another_refused() {
    let Some(m) = minio::Minio::shared("s3_catalogue") else {
        return;
    };
    let c = client(m, Duration::from_secs(600));
    let first = S3Catalogue::new(c.clone());
    first
        .check_keys_release(
            fieldstore::storage::keys_release::KeysReader::Eccodes,
            "2.28.0",
        )
        .unwrap();
    assert_eq!(
        c.get(fieldstore::storage::keys_release::RECORD)
            .unwrap()
            .as_deref(),
        Some(&b"2.28.0\n"[..])
    );
    let other = S3Catalogue::new(c.clone());
    other
        .check_keys_release(
            fieldstore::storage::keys_release::KeysReader::Eccodes,
            "2.28.0",
        )
        .unwrap();
    let e = other
        .check_keys_release(
            fieldstore::storage::keys_release::KeysReader::Eccodes,
            "2.50.0",
        )
        .unwrap_err();
    assert_eq!(e.kind(), fieldstore::error_kind::ErrorKind::Config, "{e}");
    assert!(e.to_string().contains("ecCodes 2.28.0"), "{e}");
}
