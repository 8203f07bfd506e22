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

    // Purge drops the masked copies; with no grace the replaced markers go at once.
    let report = cat.purge(&db, true).unwrap();
    assert_eq!(report.masked_fields, n);
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
    assert!(!cat.is_locked(&db, "archive"));
    cat.set_locked(&db, "archive", true).unwrap();
    assert!(cat.is_locked(&db, "archive"));
    assert!(!cat.is_locked(&db, "list"));
    cat.set_locked(&db, "archive", false).unwrap();
    assert!(!cat.is_locked(&db, "archive"));
}
