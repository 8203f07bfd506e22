//! The S3 benchmark's own measurements (bench/s3/run.sh), on the same HTTP stack as the store:
//!
//! - `limit`: the plain PUT/GET loop, one object per field, of the fields of a GRIB file: the
//!   limit of the server that fieldstore's archive and retrieve are held to;
//! - `freshness`: a writer process (this program again) archives one field per flush; this process
//!   polls `list` and reports, per flush, the time from `flush()` returning to the field listed;
//! - `count`: the objects under a prefix (the garbage checks);
//! - `copy`: the plain copy of a directory's files to objects (what `mc cp --recursive` does: a
//!   PUT per file, a multipart upload of 16 MiB parts, 4 in flight, for larger ones), the bar
//!   `fieldstore move` of a database from a root to a bucket is held to (bench/lifecycle.sh).
//!
//! Usage:
//!   s3bench limit ENDPOINT BUCKET PREFIX GRIB [THREADS]
//!   s3bench freshness CONFIG GRIB FLUSHES
//!   s3bench count ENDPOINT BUCKET PREFIX
//!   s3bench copy ENDPOINT BUCKET PREFIX DIR
//! Credentials come from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, as for the store.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use fieldstore::api::{Archiver, Fdb, ListOptions};
use fieldstore::model::config::S3Config;
use fieldstore::model::request::parse_request;
use fieldstore::storage::s3::S3Client;

type Error = Box<dyn std::error::Error>;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = match a.as_slice() {
        ["limit", endpoint, bucket, prefix, grib] => limit(endpoint, bucket, prefix, grib, 1),
        ["limit", endpoint, bucket, prefix, grib, threads] => {
            threads.parse().map_err(Error::from).and_then(|t| limit(endpoint, bucket, prefix, grib, t))
        }
        ["freshness", config, grib, flushes] => flushes
            .parse()
            .map_err(Error::from)
            .and_then(|n| freshness(config, grib, n)),
        ["fresh-writer", config, grib, flushes] => flushes
            .parse()
            .map_err(Error::from)
            .and_then(|n| fresh_writer(config, grib, n)),
        ["count", endpoint, bucket, prefix] => count(endpoint, bucket, prefix),
        ["copy", endpoint, bucket, prefix, dir] => copy(endpoint, bucket, prefix, dir),
        _ => Err("usage: s3bench limit ENDPOINT BUCKET PREFIX GRIB [THREADS] | freshness CONFIG GRIB FLUSHES | count ENDPOINT BUCKET PREFIX | copy ENDPOINT BUCKET PREFIX DIR".into()),
    };
    if let Err(e) = result {
        eprintln!("s3bench: {e}");
        std::process::exit(1);
    }
}

fn client(endpoint: &str, bucket: &str, prefix: &str) -> Result<S3Client, Error> {
    let mut cfg = S3Config::new(endpoint, bucket);
    cfg.prefix = Some(prefix.to_string());
    Ok(S3Client::connect(&cfg)?)
}

/// The messages of a GRIB file (editions 1 and 2), each as its byte range.
fn messages(bytes: &[u8]) -> Result<Vec<&[u8]>, Error> {
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let head = bytes.get(at..at + 16).ok_or("truncated GRIB")?;
        if &head[..4] != b"GRIB" {
            return Err(format!("not GRIB at offset {at}").into());
        }
        let len = match head[7] {
            1 => u32::from_be_bytes([0, head[4], head[5], head[6]]) as usize,
            _ => u64::from_be_bytes(head[8..16].try_into()?) as usize,
        };
        out.push(bytes.get(at..at + len).ok_or("truncated GRIB")?);
        at += len;
    }
    Ok(out)
}

/// One PUT per field, then one GET per field, on `threads` threads (each its share, in order).
fn limit(
    endpoint: &str,
    bucket: &str,
    prefix: &str,
    grib: &str,
    threads: usize,
) -> Result<(), Error> {
    let c = client(endpoint, bucket, prefix)?;
    let bytes = std::fs::read(grib)?;
    let msgs = messages(&bytes)?;
    let total: usize = msgs.iter().map(|m| m.len()).sum();
    let threads = threads.max(1);
    let run = |get: bool| -> Result<f64, Error> {
        let t = Instant::now();
        std::thread::scope(|s| -> Result<(), Error> {
            let handles: Vec<_> = (0..threads)
                .map(|w| {
                    let (c, msgs) = (&c, &msgs);
                    s.spawn(move || -> Result<(), String> {
                        for (i, m) in msgs.iter().enumerate().skip(w).step_by(threads) {
                            let key = format!("limit/{i:08}");
                            if get {
                                let back = c.get(&key).map_err(|e| e.to_string())?;
                                if back.as_deref() != Some(*m) {
                                    return Err(format!("{key}: GET returned other bytes"));
                                }
                            } else {
                                c.put(&key, m).map_err(|e| e.to_string())?;
                            }
                        }
                        Ok(())
                    })
                })
                .collect();
            for h in handles {
                h.join().map_err(|_| "a thread panicked")??;
            }
            Ok(())
        })?;
        Ok(t.elapsed().as_secs_f64())
    };
    let put = run(false)?;
    let get = run(true)?;
    let keys: Vec<String> = (0..msgs.len()).map(|i| format!("limit/{i:08}")).collect();
    c.delete_many(&keys)?;
    let mib = total as f64 / 1048576.0;
    for (op, secs) in [("put", put), ("get", get)] {
        println!(
            "limit {op}: {} fields, {:.1} MiB, {threads} thread(s), {secs:.3} s, {:.0} fields/s, {:.1} MiB/s",
            msgs.len(),
            mib,
            msgs.len() as f64 / secs,
            mib / secs
        );
    }
    Ok(())
}

fn open(config: &str) -> Result<Box<dyn Fdb>, Error> {
    let text = std::fs::read_to_string(config)?;
    let cfg = fieldstore::model::config::from_yaml_str(&text, config)?;
    Ok(fieldstore::open(&cfg)?)
}

/// Archives the first `flushes` messages of `grib`, one per flush, printing each one's number
/// the moment its flush returned.
fn fresh_writer(config: &str, grib: &str, flushes: usize) -> Result<(), Error> {
    let fdb = open(config)?;
    let bytes = std::fs::read(grib)?;
    let msgs = messages(&bytes)?;
    let mut out = std::io::stdout().lock();
    for (k, m) in msgs.iter().take(flushes).enumerate() {
        Archiver::new(&*fdb).archive_slice(m, grib)?;
        fdb.flush()?;
        writeln!(out, "{k}")?;
        out.flush()?;
        // Flushes a little apart, as a forecast's steps are: each is measured on its own.
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

/// The writer is another process; this one lists in a loop. `grib` must hold one field per step
/// (steps 0, 1, ...) of expver `frsh`, stream oper.
fn freshness(config: &str, grib: &str, flushes: usize) -> Result<(), Error> {
    let reader = open(config)?;
    let request = parse_request("class=od,expver=frsh,stream=oper")?;
    let stop = Arc::new(AtomicBool::new(false));
    let (tx, rx) = mpsc::channel::<(String, Instant)>();
    let poller = {
        let stop = stop.clone();
        std::thread::spawn(move || -> Result<u64, String> {
            let mut seen = std::collections::BTreeSet::new();
            let mut polls = 0;
            while !stop.load(Ordering::Relaxed) {
                polls += 1;
                for e in reader
                    .list(&request, ListOptions::default())
                    .map_err(|e| e.to_string())?
                {
                    let key = e.map_err(|e| e.to_string())?.key.porcelain();
                    if seen.insert(key.clone()) {
                        let _ = tx.send((key, Instant::now()));
                    }
                }
            }
            Ok(polls)
        })
    };
    let mut writer = Command::new(std::env::current_exe()?)
        .args(["fresh-writer", config, grib, &flushes.to_string()])
        .stdout(Stdio::piped())
        .spawn()?;
    let mut flushed = Vec::new();
    for line in BufReader::new(writer.stdout.take().ok_or("no writer stdout")?).lines() {
        line?;
        flushed.push(Instant::now());
    }
    if !writer.wait()?.success() {
        return Err("the writer failed".into());
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = std::collections::BTreeMap::new();
    while seen.len() < flushed.len() && Instant::now() < deadline {
        if let Ok((key, t)) = rx.recv_timeout(Duration::from_millis(100)) {
            let step: usize = key
                .split(['{', '}', ','])
                .find_map(|kv| kv.strip_prefix("step="))
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("no step in {key}"))?;
            seen.insert(step, t);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let polls = poller.join().map_err(|_| "the reader panicked")??;
    if seen.len() < flushed.len() {
        return Err(format!(
            "{} of {} flushes never listed",
            flushed.len() - seen.len(),
            flushed.len()
        )
        .into());
    }
    let mut lat: Vec<f64> = flushed
        .iter()
        .enumerate()
        .map(|(k, f)| seen[&k].saturating_duration_since(*f).as_secs_f64() * 1e3)
        .collect();
    lat.sort_by(f64::total_cmp);
    let pct = |p: usize| lat[(lat.len() * p / 100).min(lat.len() - 1)];
    println!(
        "freshness: {} flushes, {polls} list polls: p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
        lat.len(),
        pct(50),
        pct(99),
        lat[lat.len() - 1]
    );
    Ok(())
}

fn count(endpoint: &str, bucket: &str, prefix: &str) -> Result<(), Error> {
    let c = client(endpoint, bucket, prefix)?;
    let (mut n, mut bytes) = (0u64, 0u64);
    for o in c.list("") {
        let o = o?;
        n += 1;
        bytes += o.size;
    }
    println!("{n} objects, {bytes} bytes");
    Ok(())
}

/// Uploads every file of `dir` as `PREFIX/NAME`: one PUT up to 16 MiB, else a multipart upload
/// of 16 MiB parts with 4 in flight; prints the bytes and seconds.
fn copy(endpoint: &str, bucket: &str, prefix: &str, dir: &str) -> Result<(), Error> {
    const PART: usize = 16 << 20;
    let c = client(endpoint, bucket, prefix)?;
    let t = Instant::now();
    let mut total = 0u64;
    let mut files = 0;
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        if !e.file_type()?.is_file() {
            continue;
        }
        let bytes = std::fs::read(e.path())?;
        let key = e.file_name().to_string_lossy().into_owned();
        total += bytes.len() as u64;
        files += 1;
        if bytes.len() <= PART {
            c.put(&key, &bytes)?;
            continue;
        }
        let upload = c.multipart(&key)?;
        let chunks: Vec<(u16, &[u8])> = bytes
            .chunks(PART)
            .enumerate()
            .map(|(i, b)| (i as u16 + 1, b))
            .collect();
        let mut parts = Vec::new();
        for group in chunks.chunks(4) {
            let got: Vec<Result<fieldstore::storage::s3::Part, String>> = std::thread::scope(|s| {
                let hs: Vec<_> = group
                    .iter()
                    .map(|(n, b)| {
                        let upload = &upload;
                        s.spawn(move || upload.put_part(*n, b).map_err(|e| e.to_string()))
                    })
                    .collect();
                hs.into_iter()
                    .map(|h| h.join().unwrap_or_else(|_| Err("a thread panicked".into())))
                    .collect()
            });
            for p in got {
                parts.push(p?);
            }
        }
        upload.complete(&parts)?;
    }
    let secs = t.elapsed().as_secs_f64();
    println!(
        "copy: {files} files, {total} bytes, {secs:.3} s, {:.1} MiB/s",
        total as f64 / 1048576.0 / secs
    );
    Ok(())
}
