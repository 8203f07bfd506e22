//! The S3 store against a real MinIO: packing, multipart batches, failed syncs, read-ahead
//! and wipe.

#[path = "support/minio.rs"]
mod minio;

use std::time::Duration;

use fieldstore::model::config::S3Config;
use fieldstore::model::Key;
use fieldstore::storage::s3::{S3Client, S3Store};
use fieldstore::storage::{DbRef, Store};

fn store(server: &minio::Minio, test: &str) -> S3Store {
    store_with_grace(server, test, Duration::ZERO)
}

/// `grace` is how old an object must be before wipe deletes it (younger ones are deferred).
fn store_with_grace(server: &minio::Minio, test: &str, grace: Duration) -> S3Store {
    let bucket = minio::fresh_bucket(test);
    let mut cfg = S3Config::new(server.endpoint.clone(), bucket);
    cfg.access_key_id = Some(server.access_key.clone());
    cfg.secret_access_key = Some(server.secret_key.clone());
    cfg.prefix = Some("ops/".into());
    cfg.grace = grace;
    S3Store::new(S3Client::connect(&cfg).unwrap())
}

fn db(id: &str) -> DbRef {
    DbRef {
        key: Key::from_pairs([("class", "od"), ("expver", "0001")]),
        id: id.into(),
    }
}

/// Bytes that differ at every offset of a field and between fields.
fn field(i: usize, len: usize) -> Vec<u8> {
    (0..len).map(|j| (i * 31 + j * 7 + j / 251) as u8).collect()
}

#[test]
fn small_fields_are_packed_in_one_object_per_batch() {
    let Some(server) = minio::Minio::shared("small_fields_are_packed_in_one_object_per_batch")
    else {
        return;
    };
    let s = store(server, "packed");
    let d = db("/data/fdb/od:0001:oper");
    let mut w = s.writer(&d).unwrap();
    let before = s.client().stats().requests;
    let refs: Vec<_> = (0..100)
        .map(|i| w.append(&field(i, 1000 + i)).unwrap())
        .collect();
    assert_eq!(s.client().stats().requests, before, "appends send nothing");
    w.sync().unwrap();
    assert_eq!(
        s.client().stats().requests - before,
        1,
        "one PUT for the batch"
    );
    w.sync().unwrap();
    assert_eq!(
        s.client().stats().requests - before,
        1,
        "an empty sync sends nothing"
    );

    let mut offset = 0;
    for (i, r) in refs.iter().enumerate() {
        assert_eq!(r.object, refs[0].object, "one object");
        assert_eq!((r.offset, r.length), (offset, 1000 + i as u64));
        offset += r.length;
        assert_eq!(s.read(&d, r).unwrap(), field(i, 1000 + i));
    }
    let objects: Vec<_> = s
        .client()
        .list(&S3Store::data_prefix(&d))
        .map(|m| m.unwrap())
        .collect();
    assert_eq!(objects.len(), 1);
    assert_eq!(
        objects[0].key,
        format!("data/data/fdb/od:0001:oper/{}", refs[0].object)
    );
    assert_eq!(s.object_size(&d, &refs[0].object), Some(offset));
    assert_eq!(s.object_size(&d, "nothing"), None);
    let uri = s.uri(&d, &refs[0].object);
    assert!(
        uri.starts_with("s3://packed-")
            && uri.ends_with(&format!(
                "/ops/data/data/fdb/od:0001:oper/{}",
                refs[0].object
            )),
        "{uri}"
    );

    let next = w.append(b"second batch").unwrap();
    assert_ne!(next.object, refs[0].object, "a new object per batch");
    assert_eq!(next.offset, 0);
    w.sync().unwrap();
    assert_eq!(s.read(&d, &next).unwrap(), b"second batch");

    // A damaged reference is caught by its checksum.
    let mut wrong = refs[3].clone();
    wrong.checksum = wrong.checksum.map(|c| c ^ 1);
    let e = s.read(&d, &wrong).unwrap_err().to_string();
    assert!(e.contains("checksum") && e.contains(&refs[3].object), "{e}");
}

#[test]
fn a_large_batch_goes_out_as_multipart() {
    let Some(server) = minio::Minio::shared("a_large_batch_goes_out_as_multipart") else {
        return;
    };
    let s = store(server, "large");
    let d = db("large");
    let mut w = s.writer(&d).unwrap();
    let mib = 1 << 20;
    let before = s.client().stats();
    let fields: Vec<Vec<u8>> = (0..100).map(|i| field(i, mib)).collect();
    let started = std::time::Instant::now();
    let refs: Vec<_> = fields.iter().map(|f| w.append(f).unwrap()).collect();
    let during = s.client().stats();
    // Requests count when answered. Six full parts were cut during the appends with at most
    // four in flight, so the create and at least two parts were answered before the last append
    // returned (more is timing; asking for more made this test flaky under load).
    assert!(
        during.requests - before.requests >= 3,
        "parts leave while appends go on: {during:?}"
    );
    w.sync().unwrap();
    let took = started.elapsed();
    eprintln!(
        "multipart: 100 MiB archived and synced in {:.2} s ({:.0} MiB/s, debug build)",
        took.as_secs_f64(),
        100.0 / took.as_secs_f64()
    );
    let after = s.client().stats();
    // Create, 7 parts of 16 MiB (the last 4 MiB), complete.
    assert_eq!(after.requests - before.requests, 9, "{after:?}");
    assert!(after.bytes_up - before.bytes_up >= 100 * mib as u64);
    assert_eq!(s.object_size(&d, &refs[0].object), Some(100 * mib as u64));

    let reader = s.open_object(&d, &refs[0].object).unwrap();
    let mut buf = vec![0u8; 3 * mib + 17];
    let mut pos = 0u64;
    let mut all = Vec::with_capacity(100 * mib);
    loop {
        let n = reader.read_at(pos, &mut buf).unwrap();
        if n == 0 {
            break;
        }
        all.extend_from_slice(&buf[..n]);
        pos += n as u64;
    }
    assert_eq!(all.len(), 100 * mib);
    for (i, r) in refs.iter().enumerate() {
        let got = &all[r.offset as usize..(r.offset + r.length) as usize];
        assert!(got == fields[i].as_slice(), "field {i} differs");
    }
}

#[test]
fn a_failed_sync_leaves_nothing_visible() {
    let Some(server) = minio::Minio::shared("a_failed_sync_leaves_nothing_visible") else {
        return;
    };
    let s = store(server, "failed").with_part_size(5 << 20);
    let d = db("failed");
    let mut w = s.writer(&d).unwrap();
    let r = w.append(&field(0, 12 << 20)).unwrap();
    let key = format!("{}{}", S3Store::data_prefix(&d), r.object);
    // Someone aborts the upload under the writer (as a cleanup of stale uploads would).
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        s.client()
            .abort_stale_uploads(&key, Duration::ZERO)
            .unwrap(),
        1
    );
    let e = w.sync().unwrap_err();
    assert!(e.to_string().contains(&r.object), "{e}");
    assert_eq!(s.client().head(&key).unwrap(), None, "no object");
    assert_eq!(
        s.client()
            .abort_stale_uploads(&key, Duration::ZERO)
            .unwrap(),
        0,
        "no upload left"
    );

    // The writer goes on with a new object.
    let next = w.append(b"after").unwrap();
    assert_ne!(next.object, r.object);
    w.sync().unwrap();
    assert_eq!(s.read(&d, &next).unwrap(), b"after");

    // Dropped before sync: its upload is aborted too.
    let mut w = s.writer(&d).unwrap();
    let r = w.append(&field(1, 6 << 20)).unwrap();
    drop(w);
    let key = format!("{}{}", S3Store::data_prefix(&d), r.object);
    assert_eq!(
        s.client()
            .abort_stale_uploads(&key, Duration::ZERO)
            .unwrap(),
        0
    );
    assert_eq!(s.client().head(&key).unwrap(), None);
}

#[test]
fn small_buffer_reads_cost_few_gets() {
    let Some(server) = minio::Minio::shared("small_buffer_reads_cost_few_gets") else {
        return;
    };
    let s = store(server, "readahead");
    let d = db("readahead");
    let mut w = s.writer(&d).unwrap();
    let refs: Vec<_> = (0..1000)
        .map(|i| w.append(&field(i, 3000 + i % 7)).unwrap())
        .collect();
    w.sync().unwrap();

    let reader = s.open_object(&d, &refs[0].object).unwrap();
    let before = s.client().stats().requests;
    let mut buf = [0u8; 4096];
    for (i, r) in refs.iter().enumerate() {
        // The caller copies each field through a 4 KiB buffer.
        let mut got = Vec::new();
        while (got.len() as u64) < r.length {
            let want = (r.length as usize - got.len()).min(buf.len());
            let n = reader
                .read_at(r.offset + got.len() as u64, &mut buf[..want])
                .unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        assert_eq!(got, field(i, 3000 + i % 7), "field {i}");
    }
    let gets = s.client().stats().requests - before;
    eprintln!("read-ahead: {gets} GETs for 1000 fields (3 MB) read through a 4 KiB buffer");
    assert!(
        // Doubling from 4 KiB to the 512 KiB cap, then 512 KiB GETs: 14 for 3 MB.
        gets <= 16,
        "{gets} GETs for 1000 fields of 3 MB in object order"
    );

    // A read elsewhere starts small again: one GET of about what was asked.
    let down = s.client().stats().bytes_down;
    let r = &refs[10];
    let n = reader
        .read_at(r.offset, &mut buf[..r.length as usize])
        .unwrap();
    assert_eq!(&buf[..n], field(10, r.length as usize).as_slice());
    assert_eq!(s.client().stats().bytes_down - down, r.length);
    // Past the end: nothing, and short at the end.
    let total = refs.last().map(|r| r.offset + r.length).unwrap();
    assert_eq!(reader.read_at(total, &mut buf).unwrap(), 0);
    assert_eq!(reader.read_at(total - 5, &mut buf).unwrap(), 5);
}

#[test]
fn wipe_and_remove() {
    let Some(server) = minio::Minio::shared("wipe_and_remove") else {
        return;
    };
    let s = store(server, "wipe");
    let (a, b) = (db("/root/a"), db("/root/ab"));
    let mut refs = Vec::new();
    for d in [&a, &b] {
        let mut w = s.writer(d).unwrap();
        for i in 0..3 {
            refs.push(w.append(&field(i, 10)).unwrap());
            w.sync().unwrap();
        }
    }
    let listed = s.wipe(&a, false).unwrap();
    assert_eq!(listed.len(), 3);
    assert!(
        listed.iter().all(|u| u.contains("/ops/data/root/a/")),
        "{listed:?}"
    );
    assert_eq!(
        s.wipe(&a, false).unwrap().len(),
        3,
        "a dry run deletes nothing"
    );
    assert_eq!(s.wipe(&a, true).unwrap().len(), 3);
    assert!(s.wipe(&a, false).unwrap().is_empty());
    assert_eq!(
        s.wipe(&b, false).unwrap().len(),
        3,
        "a database whose name extends a's is kept"
    );

    s.remove(&b, &[refs[3].object.clone(), "never-was".into()])
        .unwrap();
    assert_eq!(s.object_size(&b, &refs[3].object), None);
    assert_eq!(s.read(&b, &refs[4]).unwrap(), field(1, 10));
    assert_eq!(s.kind(), "s3");

    // Objects younger than the grace period are reported deferred and kept.
    let s = store_with_grace(server, "wipe-grace", Duration::from_secs(600));
    let mut w = s.writer(&a).unwrap();
    let r = w.append(&field(0, 10)).unwrap();
    w.sync().unwrap();
    let said = s.wipe(&a, true).unwrap();
    assert!(said.len() == 1 && said[0].contains("deferred"), "{said:?}");
    assert_eq!(s.read(&a, &r).unwrap(), field(0, 10));
}

/// A large read goes straight into the caller's buffer (no read-ahead copy), as a few ranged
/// GETs in flight together, fetching nothing twice and nothing past the object's end.
#[test]
fn a_large_read_is_a_few_parallel_gets_into_the_callers_buffer() {
    let Some(server) =
        minio::Minio::shared("a_large_read_is_a_few_parallel_gets_into_the_callers_buffer")
    else {
        return;
    };
    let s = store(server, "largeread");
    let d = db("largeread");
    let mut w = s.writer(&d).unwrap();
    let big = field(3, 10_000_000);
    let r = w.append(&big).unwrap();
    w.sync().unwrap();

    let reader = s.open_object(&d, &r.object).unwrap();
    let (before, down) = (s.client().stats().requests, s.client().stats().bytes_down);
    let mut buf = vec![0u8; 16 << 20];
    let n = reader.read_at(r.offset, &mut buf).unwrap();
    assert_eq!(n, big.len());
    assert!(buf[..n] == big[..], "bytes differ");
    let after = s.client().stats();
    let gets = after.requests - before;
    assert!((1..=4).contains(&gets), "{gets} GETs for one 10 MB read");
    assert_eq!(after.bytes_down - down, big.len() as u64, "bytes fetched");
}
