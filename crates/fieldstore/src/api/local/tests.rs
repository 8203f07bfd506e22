//! LocalFdb's own tests: archive, flush, retrieve, list and their failure paths on real stores.

use super::*;
use crate::storage::ObjectReader;
use std::path::Path;
use std::sync::mpsc;
use std::time::Duration;

fn fdb(dir: &Path) -> LocalFdb {
    let yaml = format!("spaces: [{{roots: [{{path: {}}}]}}]", dir.display());
    match crate::model::config::from_yaml_str(&yaml, "test").unwrap() {
        crate::model::config::FdbConfig::Local(l) => LocalFdb::new(l).unwrap(),
        other => panic!("expected a local config, got {other:?}"),
    }
}

/// Pairs a YAML config cannot express (the parser refuses them first) are refused here
/// too, naming what is allowed; no server is contacted.
#[test]
fn s3_pairs_are_checked_before_connecting() {
    let yaml = "spaces: [{roots: [{path: /nonexistent}]}]";
    let crate::model::config::FdbConfig::Local(mut l) =
        crate::model::config::from_yaml_str(yaml, "test").unwrap()
    else {
        panic!("a local config");
    };
    l.s3 = Some(crate::model::config::S3Config::new(
        "http://127.0.0.1:1",
        "fields",
    ));
    let err = |engine: &str, store: &str| {
        let mut c = l.clone();
        c.engine = engine.into();
        c.store = store.into();
        match LocalFdb::new(c) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("{engine}/{store} opened"),
        }
    };
    let e = err("s3", "file");
    assert!(
        e.contains("engine 's3' with store 'file' is refused"),
        "{e}"
    );
    let e = err("memory", "s3");
    assert!(e.contains("s3 with s3") && e.contains("toc with s3"), "{e}");
}

/// A field stored as it arrives is the one `archive_grib` would store: same key, same
/// bytes back, visible only after the flush.
#[test]
fn a_streamed_field_is_stored_like_an_archived_one() {
    let dir = tempfile::tempdir().unwrap();
    let f = fdb(dir.path());
    let keys = [
        ("class", "od"),
        ("stream", "oper"),
        ("type", "fc"),
        ("expver", "0001"),
        ("date", "20260101"),
        ("time", "0000"),
        ("step", "6"),
        ("levtype", "sfc"),
        ("param", "167"),
    ];
    let msg = grib::sample::make_field(&keys, 5000, 1).unwrap();
    let key = grib::mars_keys(&msg).unwrap();
    f.archive_grib_from(&key, msg.len() as u64, &mut &msg[..])
        .unwrap();
    let req = crate::model::request::parse_request(
        "class=od,stream=oper,type=fc,expver=0001,date=20260101,time=0000,step=6,levtype=sfc,param=167",
    )
    .unwrap();
    assert!(f.retrieve(&req).is_err() || read_all(&f, &req).is_empty());
    f.flush().unwrap();
    assert_eq!(read_all(&f, &req), msg);
    // A source shorter than announced stores nothing, and fails the batch.
    let short = &msg[..msg.len() / 2];
    assert!(f
        .archive_grib_from(&key, msg.len() as u64, &mut &short[..])
        .is_err());
}

fn read_all(f: &LocalFdb, req: &Request) -> Vec<u8> {
    let mut out = Vec::new();
    f.retrieve(req).unwrap().read_to_end(&mut out).unwrap();
    out
}

/// Archives t/u on levels 1000/500, steps 0/6/12, members 1/2 (enfo, pf) on `date`.
fn ensemble(f: &LocalFdb, date: &str) {
    for step in ["0", "6", "12"] {
        for number in ["1", "2"] {
            for level in ["1000", "500"] {
                for param in ["130", "131"] {
                    let keys = [
                        ("class", "od"),
                        ("stream", "enfo"),
                        ("type", "pf"),
                        ("expver", "0001"),
                        ("date", date),
                        ("time", "1200"),
                        ("step", step),
                        ("levtype", "pl"),
                        ("levelist", level),
                        ("param", param),
                        ("number", number),
                    ];
                    let msg = grib::sample::make_field(&keys, 10, 1).unwrap();
                    f.archive(None, &msg).unwrap();
                }
            }
        }
    }
    f.flush().unwrap();
}

fn request(s: &str) -> Request {
    crate::model::request::parse_request(s).unwrap()
}

fn locations(f: &LocalFdb, e: &Expansion, walk: bool) -> Vec<(Key, FieldRef)> {
    let mut found = Found::default();
    if walk {
        f.retrieve_by_walk(e, u64::MAX, &mut found).unwrap();
    } else {
        f.retrieve_by_lookup(e, &mut found).unwrap();
    }
    found
        .locations
        .into_iter()
        .map(|l| (l.db.key, l.field))
        .collect()
}

const WIPED_DB: &str = "class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g";

fn wiped_db_field(step: u32) -> Key {
    Key::parse(&format!(
        "{WIPED_DB},type=an,levtype=pl,step={step},levelist=500,param=130"
    ))
    .unwrap()
}

fn fetched(f: &LocalFdb, step: u32) -> Vec<u8> {
    let r = request(&format!(
        "retrieve,{WIPED_DB},type=an,levtype=pl,step={step},levelist=500,param=130"
    ));
    let mut out = Vec::new();
    f.retrieve(&r).unwrap().read_to_end(&mut out).unwrap();
    out
}

#[test]
fn the_wiping_handle_writes_the_database_again() {
    let d = tempfile::tempdir().unwrap();
    let f = fdb(d.path());
    f.archive(Some(&wiped_db_field(0)), b"old").unwrap();
    f.flush().unwrap();
    f.wipe(&request(WIPED_DB), true).unwrap();
    f.archive(Some(&wiped_db_field(0)), b"new").unwrap();
    f.flush().unwrap();
    assert_eq!(fetched(&fdb(d.path()), 0), b"new");
}

/// Fields archived but not flushed when the database is wiped are reported by the next flush
/// (once), whichever handle wiped it; the handle then writes a new database.
#[test]
fn unflushed_fields_of_a_wiped_database_are_reported_not_lost_silently() {
    let d = tempfile::tempdir().unwrap();
    for other_handle in [false, true] {
        let f = fdb(d.path());
        f.archive(Some(&wiped_db_field(0)), b"kept").unwrap();
        f.flush().unwrap();
        f.archive(Some(&wiped_db_field(6)), b"unflushed").unwrap();
        let other = fdb(d.path());
        let wiper = if other_handle { &other } else { &f };
        wiper.wipe(&request(WIPED_DB), true).unwrap();
        let e = f.flush().unwrap_err();
        assert!(
            matches!(&e, ApiError::Wiped { .. }) && e.to_string().contains("was wiped"),
            "other handle {other_handle}: {e}"
        );
        f.flush().unwrap();
        f.archive(Some(&wiped_db_field(12)), b"after").unwrap();
        f.flush().unwrap();
        let reader = fdb(d.path());
        assert_eq!(
            fetched(&reader, 12),
            b"after",
            "other handle {other_handle}"
        );
        assert!(fetched(&reader, 0).is_empty() && fetched(&reader, 6).is_empty());
        f.wipe(&request(WIPED_DB), true).unwrap();
    }
}

/// Another handle wiped the database and wrote it anew: this handle's unflushed fields
/// were in the old one and must not be published into the new one.
#[test]
fn a_database_wiped_and_recreated_by_another_handle_is_not_written_with_stale_writers() {
    let d = tempfile::tempdir().unwrap();
    let f = fdb(d.path());
    f.archive(Some(&wiped_db_field(0)), b"kept").unwrap();
    f.flush().unwrap();
    f.archive(Some(&wiped_db_field(6)), b"unflushed").unwrap();
    let other = fdb(d.path());
    other.wipe(&request(WIPED_DB), true).unwrap();
    for step in [12, 18, 24] {
        other
            .archive(Some(&wiped_db_field(step)), b"theirs")
            .unwrap();
        other.flush().unwrap();
    }
    let e = f.flush().unwrap_err();
    assert!(matches!(e, ApiError::Wiped { .. }), "{e}");
    let reader = fdb(d.path());
    assert!(fetched(&reader, 6).is_empty());
    assert_eq!(fetched(&reader, 12), b"theirs");
    f.archive(Some(&wiped_db_field(30)), b"after").unwrap();
    f.flush().unwrap();
    assert_eq!(fetched(&fdb(d.path()), 30), b"after");
}

/// Archives and flushes racing wipes on one handle: each either lands or is reported as
/// wiped, never a panic or another error, and the handle writes the database afterwards.
#[test]
fn archives_racing_wipes_on_one_handle_land_or_are_reported() {
    let d = tempfile::tempdir().unwrap();
    let f = Arc::new(fdb(d.path()));
    let writer = std::thread::spawn({
        let f = f.clone();
        move || {
            for step in 0..200 {
                // Lands, or (wiped under it more often than it retries) is reported.
                let archived = f.archive(Some(&wiped_db_field(step)), b"x");
                assert!(
                    matches!(archived, Ok(()) | Err(ApiError::Wiped { .. })),
                    "{archived:?}"
                );
                if step % 10 == 9 {
                    match f.flush() {
                        Ok(()) => {}
                        Err(e) if e.kind() == crate::ErrorKind::NotFound => {}
                        Err(e) => panic!("flush racing a wipe: {e}"),
                    }
                }
            }
        }
    });
    for _ in 0..20 {
        match f.wipe(&request(WIPED_DB), true) {
            Ok(_) | Err(ApiError::NothingMatched(_)) => {}
            Err(e) => panic!("wipe racing archives: {e}"),
        }
    }
    writer.join().unwrap();
    let _ = f.flush();
    f.archive(Some(&wiped_db_field(500)), b"last").unwrap();
    f.flush().unwrap();
    assert_eq!(fetched(&fdb(d.path()), 500), b"last");
}

/// Walking what exists finds the same fields, in the same order, as looking up every key.
#[test]
fn walking_finds_what_lookup_finds_in_its_order() {
    let d = tempfile::tempdir().unwrap();
    let f = fdb(d.path());
    ensemble(&f, "20261122");
    // Re-archive some fields: the walk must return only the newest copy, as lookup does.
    for step in ["6", "12"] {
        let keys = [
            ("class", "od"),
            ("stream", "enfo"),
            ("type", "pf"),
            ("expver", "0001"),
            ("date", "20261122"),
            ("time", "1200"),
            ("step", step),
            ("levtype", "pl"),
            ("levelist", "500"),
            ("param", "131"),
            ("number", "2"),
        ];
        f.archive(None, &grib::sample::make_field(&keys, 10, 9).unwrap())
            .unwrap();
    }
    f.flush().unwrap();
    for req in [
        "class=od,expver=1,stream=enfo,date=20261122,time=12,type=pf,levtype=pl,step=12/0/6,number=2/1,levelist=500/1000/850,param=131/130",
        "class=od,expver=1,stream=enfo,date=20261122,time=12,type=pf,levtype=pl,step=0/to/12/by/6,number=1/to/2,levelist=1000/500,param=130",
        "class=od,expver=1,stream=enfo,date=20261122,time=12,type=pf,levtype=pl,step=12,number=3,levelist=500,param=130",
    ] {
        let ex = f.expand(&request(req), ExpandMode::Retrieve).unwrap();
        assert!(!ex.is_empty());
        for e in &ex {
            let by_lookup = locations(&f, e, false);
            assert_eq!(by_lookup, locations(&f, e, true), "{req}");
        }
    }
    let ex = f
        .expand(&request("class=od,expver=1,stream=enfo,date=20261122,time=12,type=pf,levtype=pl,step=12/0/6,number=2/1,levelist=500/1000,param=131/130"), ExpandMode::Retrieve)
        .unwrap();
    let n: usize = ex.iter().map(|e| locations(&f, e, false).len()).sum();
    assert_eq!(n, 24);
}

/// The request from issue 12 names 25 million keys; it finds the 16 fields that exist at
/// once, in the order a request naming just those would give.
#[test]
fn huge_requests_resolve_against_what_exists() {
    let d = tempfile::tempdir().unwrap();
    let f = fdb(d.path());
    ensemble(&f, "20261122");
    let base = "retrieve,class=od,expver=0001,stream=enfo,date=20261122,time=1200,type=pf,levtype=pl,param=t/u";
    let read = |r: &str| {
        let mut out = Vec::new();
        f.retrieve(&request(&format!("{base},{r}")))
            .unwrap()
            .read_to_end(&mut out)
            .unwrap();
        out
    };
    let started = std::time::Instant::now();
    let huge = read("step=0/to/3000,number=1/to/50,levelist=1/to/1000");
    assert!(started.elapsed().as_secs() < 20, "{:?}", started.elapsed());
    let small = read("step=0/12,number=1/2,levelist=500/1000");
    // 2 steps (6 is not in 0/to/3000 by 12) x 2 members x 2 levels x 2 params.
    assert_eq!(small.windows(4).filter(|w| w == b"GRIB").count(), 16);
    assert_eq!(huge, small);
}

/// `date=-1` means the day before the request, however long the handle has been open.
#[test]
fn relative_dates_resolve_per_request() {
    use std::sync::atomic::{AtomicI32, Ordering};
    use std::sync::Arc;
    let d = tempfile::tempdir().unwrap();
    let day = Arc::new(AtomicI32::new(0));
    let clock_day = day.clone();
    let base = NaiveDate::from_ymd_opt(2026, 11, 22).unwrap();
    let f = fdb(d.path()).with_clock(Box::new(move || {
        base + chrono::Duration::days(i64::from(clock_day.load(Ordering::SeqCst)))
    }));
    ensemble(&f, "20261122");
    let count = |r: &str| f.list(&request(r), ListOptions::default()).unwrap().count();
    let fields = |r: &str| {
        let mut out = Vec::new();
        f.retrieve(&request(r))
            .unwrap()
            .read_to_end(&mut out)
            .unwrap();
        out.len()
    };
    let one = "retrieve,class=od,expver=1,stream=enfo,time=12,type=pf,levtype=pl,step=0,number=1,levelist=500,param=t";
    // The day the data is for.
    assert_eq!(count("class=od,expver=1,date=0"), 24);
    assert!(fields(&format!("{one},date=0")) > 0);
    // A day later, the same handle: that day is yesterday.
    day.store(1, Ordering::SeqCst);
    assert_eq!(count("class=od,expver=1,date=0"), 0);
    assert_eq!(count("class=od,expver=1,date=-1"), 24);
    assert!(fields(&format!("{one},date=-1")) > 0);
    assert_eq!(fields(&format!("{one},date=0")), 0);
    // A week later.
    day.store(7, Ordering::SeqCst);
    assert_eq!(count("class=od,expver=1,date=-1"), 0);
    assert_eq!(count("class=od,expver=1,date=-7"), 24);
    assert_eq!(count("class=od,expver=1,date=-8/to/-6"), 24);
    assert!(f.context().today == base + chrono::Duration::days(7));
}

#[test]
fn explicit_keys_must_agree_with_the_grib_and_be_canonical() {
    let d = tempfile::tempdir().unwrap();
    let f = fdb(d.path());
    let keys = [
        ("class", "od"),
        ("stream", "oper"),
        ("type", "fc"),
        ("expver", "0001"),
        ("date", "20261122"),
        ("time", "1200"),
        ("step", "6"),
        ("levtype", "pl"),
        ("levelist", "500"),
        ("param", "130"),
    ];
    let msg = grib::sample::make_field(&keys, 100, 1).unwrap();
    let good = Key::parse("class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step=6,levelist=500,param=130").unwrap();
    f.archive(Some(&good), &msg).unwrap();
    let wrong = good.with("step", "12");
    let e = f.archive(Some(&wrong), &msg).unwrap_err().to_string();
    assert!(e.contains("step=12 given, the message has step=6"), "{e}");
    let e = f
        .archive(Some(&good.with("expver", "1")), &msg)
        .unwrap_err()
        .to_string();
    assert!(e.contains("expecting expver=0001"), "{e}");
    f.flush().unwrap();
    let req = crate::model::request::parse_request("class=od,expver=0001").unwrap();
    assert_eq!(f.list(&req, ListOptions::default()).unwrap().count(), 1);
}

/// What the next sync of one database's store writer does instead of syncing at once.
enum Hold {
    /// Reports that it started, then waits to be released (at most a minute, so a failing
    /// test never hangs).
    Block {
        entered: mpsc::Sender<()>,
        release: mpsc::Receiver<()>,
    },
    Fail,
}

/// The test's hand on store syncs: one armed hold, for the database of one `expver`.
#[derive(Default)]
struct Gate(Mutex<Option<(String, Hold)>>);

impl Gate {
    fn arm(&self, expver: &str, hold: Hold) {
        *self.0.lock().unwrap() = Some((expver.to_string(), hold));
    }
}

/// The POSIX store, but a sync waits or fails when the gate says so: a flush made
/// observably slow (or failing) without touching the real code paths around it.
struct GatedStore(Arc<Gate>);

struct GatedWriter {
    inner: Box<dyn StoreWriter>,
    expver: String,
    gate: Arc<Gate>,
}

impl Store for GatedStore {
    fn kind(&self) -> &'static str {
        "gated"
    }
    fn writer(&self, db: &DbRef) -> Result<Box<dyn StoreWriter>, StorageError> {
        Ok(Box::new(GatedWriter {
            inner: PosixStore::default().writer(db)?,
            expver: db.key.get("expver").unwrap_or("").to_string(),
            gate: self.0.clone(),
        }))
    }
    fn read(&self, db: &DbRef, field: &FieldRef) -> Result<Vec<u8>, StorageError> {
        PosixStore::default().read(db, field)
    }
    fn open_object(&self, db: &DbRef, object: &str) -> Result<Box<dyn ObjectReader>, StorageError> {
        PosixStore::default().open_object(db, object)
    }
    fn uri(&self, db: &DbRef, object: &str) -> String {
        PosixStore::default().uri(db, object)
    }
    fn remove(&self, db: &DbRef, objects: &[String]) -> Result<(), StorageError> {
        PosixStore::default().remove(db, objects)
    }
    fn wipe(&self, db: &DbRef, doit: bool) -> Result<Vec<String>, StorageError> {
        PosixStore::default().wipe(db, doit)
    }
    fn object_size(&self, db: &DbRef, object: &str) -> Option<u64> {
        PosixStore::default().object_size(db, object)
    }
}

impl StoreWriter for GatedWriter {
    fn append(&mut self, data: &[u8]) -> Result<FieldRef, StorageError> {
        self.inner.append(data)
    }
    fn sync(&mut self) -> Result<(), StorageError> {
        let hold = {
            let mut armed = self.gate.0.lock().unwrap();
            match armed.as_ref() {
                Some((e, _)) if *e == self.expver => armed.take().map(|(_, h)| h),
                _ => None,
            }
        };
        match hold {
            Some(Hold::Block { entered, release }) => {
                let _ = entered.send(());
                let _ = release.recv_timeout(Duration::from_secs(60));
            }
            Some(Hold::Fail) => {
                return Err(StorageError::Io {
                    op: "sync",
                    path: "gated".into(),
                    source: std::io::Error::other("injected sync failure"),
                })
            }
            None => {}
        }
        self.inner.sync()
    }
}

/// The POSIX store, but its objects are not OS files (as an object store's are not), and
/// every read is counted.
struct CountingStore(Arc<std::sync::atomic::AtomicUsize>);

struct CountingReader(Box<dyn ObjectReader>, Arc<std::sync::atomic::AtomicUsize>);

impl ObjectReader for CountingReader {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> Result<usize, StorageError> {
        self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.0.read_at(offset, buf)
    }
}

impl Store for CountingStore {
    fn kind(&self) -> &'static str {
        "counting"
    }
    fn writer(&self, db: &DbRef) -> Result<Box<dyn StoreWriter>, StorageError> {
        PosixStore::default().writer(db)
    }
    fn read(&self, db: &DbRef, field: &FieldRef) -> Result<Vec<u8>, StorageError> {
        PosixStore::default().read(db, field)
    }
    fn open_object(&self, db: &DbRef, object: &str) -> Result<Box<dyn ObjectReader>, StorageError> {
        let inner = PosixStore::default().open_object(db, object)?;
        Ok(Box::new(CountingReader(inner, self.0.clone())))
    }
    fn uri(&self, db: &DbRef, object: &str) -> String {
        PosixStore::default().uri(db, object)
    }
    fn remove(&self, db: &DbRef, objects: &[String]) -> Result<(), StorageError> {
        PosixStore::default().remove(db, objects)
    }
    fn wipe(&self, db: &DbRef, doit: bool) -> Result<Vec<String>, StorageError> {
        PosixStore::default().wipe(db, doit)
    }
    fn object_size(&self, db: &DbRef, object: &str) -> Option<u64> {
        PosixStore::default().object_size(db, object)
    }
}

/// Regression: a retrieve into a file from a store without OS files (S3) copied through
/// `io::copy`'s 8 KiB buffer, so an object store got one request per 8 KiB of a large
/// field (a quarter of a plain GET's speed in bench/s3/run.sh).
#[test]
fn a_retrieve_into_a_file_reads_a_large_field_in_one_piece() {
    let d = tempfile::tempdir().unwrap();
    let reads = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut f = fdb(d.path());
    f.store = Arc::new(CountingStore(reads.clone()));
    let keys = [
        ("class", "od"),
        ("stream", "oper"),
        ("type", "fc"),
        ("expver", "0001"),
        ("date", "20261122"),
        ("time", "1200"),
        ("step", "6"),
        ("levtype", "sfc"),
        ("param", "167"),
    ];
    let big = grib::sample::make_field(&keys, 400_000, 1).unwrap();
    assert!(big.len() > 500_000, "{} bytes", big.len());
    f.archive(None, &big).unwrap();
    f.flush().unwrap();
    let mut reader = f
        .retrieve(&request("class=od,expver=1,stream=oper,date=20261122,time=12,type=fc,levtype=sfc,step=6,param=167"))
        .unwrap();
    let mut out = tempfile::tempfile().unwrap();
    reads.store(0, std::sync::atomic::Ordering::Relaxed);
    assert_eq!(reader.copy_to_file(&mut out).unwrap(), big.len() as u64);
    let n = reads.load(std::sync::atomic::Ordering::Relaxed);
    assert!(n <= 2, "{n} reads for one field of {} bytes", big.len());
}

fn gated(dir: &Path) -> (LocalFdb, Arc<Gate>) {
    let gate = Arc::new(Gate::default());
    let mut f = fdb(dir);
    f.store = Arc::new(GatedStore(gate.clone()));
    (f, gate)
}

fn key(expver: &str, step: usize) -> Key {
    Key::parse(&format!("class=od,expver={expver},stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step={step},levelist=500,param=130")).unwrap()
}

/// The bytes of one field, or `None` if it is not visible.
fn read(f: &LocalFdb, expver: &str, step: usize) -> Option<Vec<u8>> {
    let req = crate::model::request::parse_request(&format!("class=od,expver={expver},stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step={step},levelist=500,param=130")).unwrap();
    let mut out = Vec::new();
    f.retrieve(&req).unwrap().read_to_end(&mut out).unwrap();
    (!out.is_empty()).then_some(out)
}

#[test]
fn archives_go_on_while_another_database_is_being_flushed() {
    let d = tempfile::tempdir().unwrap();
    let (f, gate) = gated(d.path());
    let f = Arc::new(f);
    f.archive(Some(&key("0001", 0)), b"a0").unwrap();
    let went_on = crate::api::testing::archives_during_held_flush(
        &f,
        |entered, released| {
            gate.arm(
                "0001",
                Hold::Block {
                    entered,
                    release: released,
                },
            )
        },
        |f| {
            for step in 0..20 {
                f.archive(Some(&key("0002", step)), format!("b{step}").as_bytes())?;
            }
            // The same database as the flush: this goes into the next batch.
            f.archive(Some(&key("0001", 1)), b"a1")
        },
    );
    assert!(
        went_on,
        "archives into database B (and into A's next batch) waited for A's flush"
    );
    // The flush covered what was archived before it.
    assert_eq!(read(&f, "0001", 0).as_deref(), Some(&b"a0"[..]));
    f.flush().unwrap();
    assert_eq!(read(&f, "0001", 1).as_deref(), Some(&b"a1"[..]));
    for step in 0..20 {
        assert_eq!(
            read(&f, "0002", step),
            Some(format!("b{step}").into_bytes())
        );
    }
}

#[test]
fn a_failed_flush_publishes_nothing_of_its_batch_and_every_later_flush_says_so() {
    let d = tempfile::tempdir().unwrap();
    let (f, gate) = gated(d.path());
    f.archive(Some(&key("0001", 0)), b"a0").unwrap();
    f.archive(Some(&key("0001", 1)), b"a1").unwrap();
    f.archive(Some(&key("0002", 0)), b"b0").unwrap();
    gate.arm("0001", Hold::Fail);
    let e = f.flush().unwrap_err().to_string();
    assert!(e.contains("injected sync failure"), "{e}");
    assert_eq!(read(&f, "0001", 0), None);
    assert_eq!(read(&f, "0001", 1), None);
    // The other database was flushed all the same.
    assert_eq!(read(&f, "0002", 0).as_deref(), Some(&b"b0"[..]));
    // Another thread may have archived into the lost batch: it learns of it at its flush,
    // and nothing more goes into that database through this handle.
    let e = f.flush().unwrap_err().to_string();
    assert!(
        e.contains("earlier flush") && e.contains("injected sync failure"),
        "{e}"
    );
    let e = f
        .archive(Some(&key("0001", 2)), b"a2")
        .unwrap_err()
        .to_string();
    assert!(e.contains("earlier flush"), "{e}");
    f.archive(Some(&key("0002", 1)), b"b1").unwrap();
    assert!(f.flush().is_err());
    assert_eq!(read(&f, "0002", 1).as_deref(), Some(&b"b1"[..]));
    assert_eq!(read(&f, "0001", 2), None);
}

/// Threads sharing one handle archive into several databases, replace some of their own
/// fields and flush at will; after each flush what the thread archived is visible, and at
/// the end every field reads back as its newest copy.
#[test]
fn threads_sharing_a_handle_lose_nothing_and_see_their_flushes() {
    const THREADS: usize = 4;
    const DBS: usize = 3;
    const FIELDS: usize = 150;
    let d = tempfile::tempdir().unwrap();
    let f = fdb(d.path());
    let expver = |i: usize| format!("{:04}", (i % DBS) + 1);
    let data =
        |t: usize, i: usize, v: usize| format!("thread {t} field {i} copy {v}").repeat(1 + i % 5);
    let expected: Vec<HashMap<usize, Vec<u8>>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..THREADS)
            .map(|t| {
                let f = &f;
                s.spawn(move || {
                    let mut copies: HashMap<usize, usize> = HashMap::new();
                    for i in 0..FIELDS {
                        let step = t * 1000 + i;
                        f.archive(Some(&key(&expver(t + i), step)), data(t, i, 0).as_bytes())
                            .unwrap();
                        copies.insert(i, 0);
                        if i % 7 == 0 {
                            // A newer copy of an earlier field: it must win.
                            let j = i / 2;
                            let v = copies[&j] + 1;
                            f.archive(
                                Some(&key(&expver(t + j), t * 1000 + j)),
                                data(t, j, v).as_bytes(),
                            )
                            .unwrap();
                            copies.insert(j, v);
                        }
                        if i % 10 == 9 {
                            f.flush().unwrap();
                            let want = data(t, i, copies[&i]).into_bytes();
                            assert_eq!(
                                read(f, &expver(t + i), step),
                                Some(want),
                                "thread {t}: field {i} not visible after its flush"
                            );
                        }
                    }
                    f.flush().unwrap();
                    copies
                        .into_iter()
                        .map(|(i, v)| (i, data(t, i, v).into_bytes()))
                        .collect()
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap()).collect()
    });
    for (t, fields) in expected.iter().enumerate() {
        for (&i, want) in fields {
            let got = read(&f, &expver(t + i), t * 1000 + i);
            assert_eq!(got.as_ref(), Some(want), "thread {t} field {i}");
        }
    }
    let all = crate::model::request::parse_request("class=od").unwrap();
    let listed = f.list(&all, ListOptions::default()).unwrap().count();
    assert_eq!(listed, THREADS * FIELDS);
}

/// What `fieldstore list` prints (`list_lines`, straight from the index files) is the listing,
/// line for line in its order: newest index first, replaced copies only with `--full` and
/// marked when asked, a partial request's fields only.
#[test]
fn printed_lines_are_the_listing_in_its_order() {
    let d = tempfile::tempdir().unwrap();
    let f = fdb(d.path());
    let key = |step: u32, param: &str| {
        Key::parse(&format!(
            "{{class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step={step},levelist=500,param={param}}}"
        ))
        .unwrap()
    };
    for round in 0..3u32 {
        for step in 0..(4 + round) {
            for param in ["130", "131"] {
                f.archive(
                    Some(&key(step, param)),
                    format!("{round}{step}{param}").as_bytes(),
                )
                .unwrap();
            }
        }
        f.flush().unwrap();
    }
    let mut requests = vec![crate::model::request::parse_request("class=od,expver=0001").unwrap()];
    requests.push(
        crate::model::request::parse_request("class=od,expver=0001,step=1/5,param=131").unwrap(),
    );
    for req in &requests {
        for (masked, mark) in [(false, false), (true, true), (true, false)] {
            let options = ListOptions {
                include_masked: masked,
                depth: 3,
            };
            let expected: Vec<String> = f
                .list(req, options)
                .unwrap()
                .map(|e| {
                    let e = e.unwrap();
                    let mut l = e.key.porcelain();
                    if mark && e.masked {
                        l.push_str(" (masked)");
                    }
                    l + "\n"
                })
                .collect();
            let mut printed = Vec::new();
            f.list_lines(
                req,
                options,
                mark,
                &mut |l| {
                    printed.push(String::from_utf8(l.to_vec()).unwrap());
                    std::ops::ControlFlow::Continue(())
                },
                &mut |e| panic!("{e}"),
            )
            .unwrap();
            assert!(!expected.is_empty());
            assert_eq!(printed, expected, "{req} masked={masked} mark={mark}");
        }
    }
    // A line handler that breaks stops the listing there.
    let mut n = 0;
    f.list_lines(
        &requests[0],
        ListOptions {
            include_masked: false,
            depth: 3,
        },
        false,
        &mut |_| {
            n += 1;
            if n == 3 {
                std::ops::ControlFlow::Break(())
            } else {
                std::ops::ControlFlow::Continue(())
            }
        },
        &mut |e| panic!("{e}"),
    )
    .unwrap();
    assert_eq!(n, 3);
}
