//! The ensemble exchange benchmark's processes (bench/exchange/run.sh): N producer processes
//! each write S steps of F fields; one consumer process needs all of them.
//!
//! Modes:
//! - `files DIR`: a producer writes one file per step (the step's fields, synced), then an empty
//!   marker file; the consumer polls for each member's next marker every 10 ms and reads the
//!   step's file (the exchange fieldstore replaces);
//! - `fdb CONFIG`: producers archive each step's fields and `flush()`; the consumer
//!   subscribes with data (`subscribe_with_data`: each notice carries its field, read by the
//!   store or sent by the server with the notice). CONFIG may be a local store (toc on
//!   disk) or `type: remote` (a memory-backed `fieldstore server`).
//!
//! A producer makes all its fields before it starts (what a model hands on is in its memory
//! already): making them is not the exchange's cost, and on two cores it would take a quarter
//! of the machine from whichever exchange is measured. Producers then say `ready` and wait
//! for `go` on their standard input, which all get at once when all are ready.
//!
//! Latency is from a producer's flush (or marker) returning to the consumer holding the field's
//! bytes, on the wall clock of this machine, which every process shares. The total runs from the
//! first producer ready to write (its config read, connected) to the last field held.
//!
//! Usage:
//!   exchange run MODE TARGET MEMBERS STEPS FIELDS SIZE   (runs the processes, prints results)
//!   exchange produce MODE TARGET MEMBER STEPS FIELDS SIZE
//!   exchange consume MODE TARGET MEMBERS STEPS FIELDS SIZE
//! SIZE in bytes (suffixes K/M for KiB/MiB). EXCHANGE_DATE (default 20260101) names the cycle,
//! so runs against one server do not mix.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use fieldstore::api::{Fdb, Start};
use fieldstore::model::request::parse_request;
use fieldstore::model::Key;

type Error = Box<dyn std::error::Error>;

/// How often the file consumer looks for markers.
const POLL: Duration = Duration::from_millis(10);
/// A run that has not finished by then is reported as failed rather than hanging the bench.
const DEADLINE: Duration = Duration::from_secs(600);

#[derive(Clone, Copy)]
struct Shape {
    members: u32,
    steps: u32,
    fields: u32,
    size: usize,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let result = (|| -> Result<(), Error> {
        let [cmd, mode, target, n, steps, fields, size] = args.as_slice() else {
            return Err(
                "usage: exchange run|produce|consume MODE TARGET MEMBERS|MEMBER STEPS FIELDS SIZE"
                    .into(),
            );
        };
        let n: u32 = n.parse()?;
        let shape = Shape {
            members: n,
            steps: steps.parse()?,
            fields: fields.parse()?,
            size: parse_size(size)?,
        };
        if shape.size < 20 {
            return Err("SIZE must be at least 20 bytes".into());
        }
        match (cmd.as_str(), mode.as_str()) {
            ("run", _) => run(mode, target, shape),
            ("produce", "files") => produce_files(Path::new(target), n, shape),
            ("produce", "fdb") => produce_fdb(target, n, shape),
            ("consume", "files") => consume_files(Path::new(target), shape),
            ("consume", "fdb") => consume_fdb(target, shape),
            _ => Err(
                format!("unknown command '{cmd} {mode}' (run|produce|consume, files|fdb)").into(),
            ),
        }
    })();
    if let Err(e) = result {
        eprintln!("exchange: {e}");
        std::process::exit(1);
    }
}

fn parse_size(s: &str) -> Result<usize, Error> {
    let (num, factor) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 1 << 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 1 << 20),
        _ => (s, 1),
    };
    Ok(num.parse::<usize>()? * factor)
}

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

fn date() -> String {
    std::env::var("EXCHANGE_DATE").unwrap_or_else(|_| "20260101".into())
}

/// The cycle every field belongs to: one database in the default schema.
fn cycle() -> String {
    format!(
        "class=od,expver=0001,stream=enfo,date={},time=0000,type=pf,levtype=sfc",
        date()
    )
}

fn param(p: u32) -> u32 {
    // Real surface parameters' numbers, so the keys look like an ensemble's.
    [167, 165, 166, 168, 134, 151, 228, 164][p as usize % 8] + 1000 * (p / 8)
}

/// A field's bytes: a GRIB-like frame naming member/step/param, so the consumer can check it got
/// the field it was told of; the rest is not compressible.
fn field(m: u32, s: u32, p: u32, size: usize) -> Vec<u8> {
    let mut v = vec![0u8; size];
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ u64::from(m << 20 | s << 8 | p);
    let mut next = || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x.to_le_bytes()
    };
    // Whole words without a length check each (a `copy_from_slice` of a variable length is a
    // call to memmove per 8 bytes: a third of the machine's time in this benchmark).
    let mut words = v.chunks_exact_mut(8);
    for chunk in &mut words {
        chunk.copy_from_slice(&next());
    }
    let tail = words.into_remainder();
    let b = next();
    let n = tail.len();
    tail.copy_from_slice(&b[..n]);
    v[..4].copy_from_slice(b"GRIB");
    v[4..8].copy_from_slice(&m.to_le_bytes());
    v[8..12].copy_from_slice(&s.to_le_bytes());
    v[12..16].copy_from_slice(&p.to_le_bytes());
    let n = v.len();
    v[n - 4..].copy_from_slice(b"7777");
    v
}

/// Which field the bytes say they are.
fn tag(b: &[u8]) -> Option<(u32, u32, u32)> {
    let word = |i: usize| Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?));
    (b.get(..4)? == b"GRIB").then_some(())?;
    Some((word(4)?, word(8)?, word(12)?))
}

/// Says `ready` and waits for `go`.
fn ready_set_go(out: &mut impl Write) -> Result<(), Error> {
    writeln!(out, "ready")?;
    out.flush()?;
    let mut line = String::new();
    std::io::stdin().read_line(&mut line)?;
    if line.trim() != "go" {
        return Err(format!("expected go, got {line:?}").into());
    }
    Ok(())
}

/// A producer's fields, step by step, made before it starts.
fn fields(m: u32, shape: Shape) -> Vec<Vec<Vec<u8>>> {
    (0..shape.steps)
        .map(|s| {
            (0..shape.fields)
                .map(|p| field(m, s, p, shape.size))
                .collect()
        })
        .collect()
}

fn produce_files(dir: &Path, m: u32, shape: Shape) -> Result<(), Error> {
    let made = fields(m, shape);
    let mut out = std::io::stdout().lock();
    ready_set_go(&mut out)?;
    writeln!(out, "started {}", now_ns())?;
    for (s, step) in made.iter().enumerate() {
        std::thread::sleep(interval());
        let data = dir.join(format!("m{m}_s{s}.grib"));
        let mut f = std::fs::File::create(&data)?;
        for field in step {
            f.write_all(field)?;
        }
        // As durable as a fieldstore flush before the marker says it is there.
        f.sync_data()?;
        drop(f);
        std::fs::File::create(dir.join(format!("m{m}_s{s}.done")))?;
        writeln!(out, "flushed {m} {s} {}", now_ns())?;
        out.flush()?;
    }
    Ok(())
}

fn consume_files(dir: &Path, shape: Shape) -> Result<(), Error> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;
    let mut next: Vec<u32> = vec![0; shape.members as usize];
    let mut left = shape.members * shape.steps;
    let start = Instant::now();
    while left > 0 {
        let mut progressed = false;
        for (m, s) in next.iter_mut().enumerate() {
            let m = m as u32;
            while *s < shape.steps && dir.join(format!("m{m}_s{s}.done")).exists() {
                let bytes = std::fs::read(dir.join(format!("m{m}_s{s}.grib")))?;
                let t = now_ns();
                for (p, f) in bytes.chunks(shape.size).enumerate() {
                    if tag(f) != Some((m, *s, p as u32)) || f.len() != shape.size {
                        return Err(format!(
                            "member {m} step {s}: field {p} is not what was written"
                        )
                        .into());
                    }
                    writeln!(out, "got {m} {s} {p} {t}")?;
                }
                *s += 1;
                left -= 1;
                progressed = true;
            }
        }
        if start.elapsed() > DEADLINE {
            return Err(format!("{left} steps never arrived").into());
        }
        if !progressed {
            std::thread::sleep(POLL);
        }
    }
    out.flush()?;
    Ok(())
}

fn open(config: &str) -> Result<Box<dyn Fdb>, Error> {
    let text = std::fs::read_to_string(config)?;
    let cfg = fieldstore::model::config::from_yaml_str(&text, config)?;
    Ok(fieldstore::open(&cfg)?)
}

fn produce_fdb(config: &str, m: u32, shape: Shape) -> Result<(), Error> {
    let fdb = open(config)?;
    let made = fields(m, shape);
    let mut out = std::io::stdout().lock();
    let base = cycle();
    // Ready to write (config read, connected): a process's start-up is not the exchange's.
    ready_set_go(&mut out)?;
    writeln!(out, "started {}", now_ns())?;
    for (s, step) in made.iter().enumerate() {
        std::thread::sleep(interval());
        for (p, field) in step.iter().enumerate() {
            let key = Key::parse(&format!(
                "{base},number={m},step={s},param={}",
                param(p as u32)
            ))?;
            fdb.archive_grib(&key, field)?;
        }
        fdb.flush()?;
        writeln!(out, "flushed {m} {s} {}", now_ns())?;
        out.flush()?;
    }
    Ok(())
}

/// Retrieves run on [`readers`] threads, so one slow retrieve does not hold up the notices
/// behind it.
fn consume_fdb(config: &str, shape: Shape) -> Result<(), Error> {
    let fdb: std::sync::Arc<dyn Fdb> = std::sync::Arc::from(open(config)?);
    let base = cycle();
    // Notices carry their fields where the store can (a server sends each with its notice);
    // the reader threads retrieve the others.
    let mut sub = fdb.subscribe_with_data(&parse_request(&base)?, &Start::Now)?;
    let warm = std::sync::Arc::new(std::sync::Barrier::new(readers() + 1));
    let params: HashMap<String, u32> = (0..shape.fields)
        .map(|p| (param(p).to_string(), p))
        .collect();
    type Job = (String, (u32, u32, u32), u128);
    let (tx, rx) = std::sync::mpsc::channel::<Job>();
    let rx = std::sync::Arc::new(std::sync::Mutex::new(rx));
    let workers: Vec<_> = (0..readers())
        .map(|_| {
            let (fdb, rx, warm) = (fdb.clone(), rx.clone(), warm.clone());
            let nothing = format!("{base},number=0,step=0,param=1");
            std::thread::spawn(move || -> Result<(), String> {
                // Each reader's connection is open (and the schema read) before anything is timed:
                // a consumer is started before its producers.
                if let Ok(r) = parse_request(&nothing) {
                    let _ = fdb.retrieve(&r).map(|mut d| d.read_to_end(&mut Vec::new()));
                }
                warm.wait();
                let mut buf = Vec::with_capacity(shape.size);
                loop {
                    let job = rx.lock().map_err(|_| "poisoned")?.recv();
                    let Ok((request, want, told)) = job else {
                        return Ok(());
                    };
                    buf.clear();
                    let r = parse_request(&request).map_err(|e| e.to_string())?;
                    fdb.retrieve(&r)
                        .map_err(|e| e.to_string())?
                        .read_to_end(&mut buf)
                        .map_err(|e| e.to_string())?;
                    let t = now_ns();
                    if tag(&buf) != Some(want) || buf.len() != shape.size {
                        return Err(format!(
                            "{request}: the bytes retrieved are not the field archived"
                        ));
                    }
                    let mut out = std::io::stdout().lock();
                    writeln!(out, "got {} {} {} {t} {told}", want.0, want.1, want.2)
                        .and_then(|()| out.flush())
                        .map_err(|e| e.to_string())?;
                }
            })
        })
        .collect();
    warm.wait();
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "ready")?;
        out.flush()?;
    }
    let mut left = shape.members * shape.steps * shape.fields;
    let start = Instant::now();
    while left > 0 {
        let next = sub.next_within(Duration::from_secs(1))?;
        let told = now_ns();
        let Some(notice) = next else {
            if start.elapsed() > DEADLINE {
                return Err(format!("{left} fields never arrived").into());
            }
            continue;
        };
        let d = &notice.element.key.datum;
        let get = |k: &str| d.get(k).unwrap_or("").to_string();
        let (number, step, prm) = (get("number"), get("step"), get("param"));
        let want = (
            number.parse::<u32>()?,
            step.parse::<u32>()?,
            params.get(&prm).copied().unwrap_or(u32::MAX),
        );
        left -= 1;
        if let Some(bytes) = &notice.data {
            let t = now_ns();
            if tag(bytes) != Some(want) || bytes.len() != shape.size {
                return Err(format!(
                    "{number}/{step}/{prm}: the bytes notified are not the field archived"
                )
                .into());
            }
            let mut out = std::io::stdout().lock();
            writeln!(out, "got {} {} {} {t} {told}", want.0, want.1, want.2)?;
            out.flush()?;
            continue;
        }
        let request = format!("{base},number={number},step={step},param={prm}");
        tx.send((request, want, told))
            .map_err(|_| "every reader thread stopped")?;
    }
    drop(tx);
    for w in workers {
        w.join().map_err(|_| "a reader thread panicked")??;
    }
    Ok(())
}

/// Reader threads of the fdb consumer (EXCHANGE_READERS, default 2).
fn readers() -> usize {
    std::env::var("EXCHANGE_READERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .filter(|n| *n > 0)
        .unwrap_or(2)
}

/// Time a producer spends "computing" between steps (EXCHANGE_INTERVAL_MS, default 0: steps
/// back to back, the exchange saturated).
fn interval() -> Duration {
    Duration::from_millis(
        std::env::var("EXCHANGE_INTERVAL_MS")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0),
    )
}

fn spawn(args: &[String]) -> Result<Child, Error> {
    Ok(Command::new(std::env::current_exe()?)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()?)
}

/// A producer's stdout: its `ready` read, the rest collected as it comes.
fn lines(mut c: Child) -> Result<(Child, std::thread::JoinHandle<Vec<String>>), Error> {
    let mut out = BufReader::new(c.stdout.take().ok_or("no producer stdout")?);
    let mut line = String::new();
    out.read_line(&mut line)?;
    if line.trim() != "ready" {
        let _ = c.kill();
        return Err(format!("a producer did not get ready: {line:?}").into());
    }
    let h = std::thread::spawn(move || out.lines().map_while(Result::ok).collect());
    Ok((c, h))
}

fn run(mode: &str, target: &str, shape: Shape) -> Result<(), Error> {
    if mode == "files" {
        std::fs::create_dir_all(target)?;
    }
    let arg = |what: &str, n: u32| -> Vec<String> {
        [what, mode, target]
            .iter()
            .map(|s| s.to_string())
            .chain([
                n.to_string(),
                shape.steps.to_string(),
                shape.fields.to_string(),
                shape.size.to_string(),
            ])
            .collect()
    };
    let mut consumer = spawn(&arg("consume", shape.members))?;
    let mut cout = BufReader::new(consumer.stdout.take().ok_or("no consumer stdout")?);
    let mut line = String::new();
    cout.read_line(&mut line)?;
    if line.trim() != "ready" {
        let _ = consumer.kill();
        return Err(format!("the consumer did not start: {line:?}").into());
    }
    let t0 = now_ns();
    let producers: Vec<_> = (0..shape.members)
        .map(|m| spawn(&arg("produce", m)))
        .collect::<Result<_, _>>()?;
    let mut producers: Vec<_> = producers.into_iter().map(lines).collect::<Result<_, _>>()?;
    for (c, _) in &mut producers {
        let mut go = c.stdin.take().ok_or("no producer stdin")?;
        go.write_all(b"go\n")?;
    }
    let got =
        std::thread::spawn(move || -> Vec<String> { cout.lines().map_while(Result::ok).collect() });
    let mut flushed: HashMap<(u32, u32), u128> = HashMap::new();
    let mut producers_done = t0;
    // The exchange starts when the first producer is ready to write.
    let mut started = u128::MAX;
    for (mut c, h) in producers {
        let status = c.wait()?;
        if !status.success() {
            let _ = consumer.kill();
            return Err(format!("a producer failed: {status}").into());
        }
        for l in h.join().map_err(|_| "a reader thread panicked")? {
            let w: Vec<&str> = l.split_whitespace().collect();
            if let ["started", t] = w.as_slice() {
                started = started.min(t.parse()?);
            }
            if let ["flushed", m, s, t] = w.as_slice() {
                let t: u128 = t.parse()?;
                producers_done = producers_done.max(t);
                flushed.insert((m.parse()?, s.parse()?), t);
            }
        }
    }
    let cstatus = consumer.wait()?;
    let got = got.join().map_err(|_| "a reader thread panicked")?;
    if !cstatus.success() {
        return Err(format!("the consumer failed: {cstatus}").into());
    }
    let mut lat_ms: Vec<f64> = Vec::new();
    // When the subscriber was told (fdb modes): the rest of the latency is the retrieve.
    let mut notice_ms: Vec<f64> = Vec::new();
    let mut last = t0;
    for l in &got {
        let w: Vec<&str> = l.split_whitespace().collect();
        let (m, s, t, told) = match w.as_slice() {
            ["got", m, s, _, t] => (m, s, t, None),
            ["got", m, s, _, t, told] => (m, s, t, Some(told.parse::<u128>()?)),
            _ => continue,
        };
        let t: u128 = t.parse()?;
        last = last.max(t);
        let f = *flushed
            .get(&(m.parse()?, s.parse()?))
            .ok_or_else(|| format!("member {m} step {s} received but never flushed"))?;
        lat_ms.push((t as f64 - f as f64) / 1e6);
        if let Some(told) = told {
            notice_ms.push((told as f64 - f as f64) / 1e6);
        }
    }
    let want = (shape.members * shape.steps * shape.fields) as usize;
    if lat_ms.len() != want {
        return Err(format!("the consumer got {} fields of {want}", lat_ms.len()).into());
    }
    lat_ms.sort_by(f64::total_cmp);
    notice_ms.sort_by(f64::total_cmp);
    let pct_of = |v: &[f64], q: f64| {
        v.get(((v.len().max(1) - 1) as f64 * q).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    let pct = |q: f64| pct_of(&lat_ms, q);
    let t0 = if started == u128::MAX { t0 } else { started };
    let total = (last.saturating_sub(t0)) as f64 / 1e9;
    let bytes = want as f64 * shape.size as f64;
    println!(
        "mode={mode} members={} steps={} fields={} size={} total_s={total:.3} producers_s={:.3} MiB_s={:.1} Gbit_s={:.2} p50_ms={:.2} p99_ms={:.2} max_ms={:.2} told_p50_ms={:.2} told_p99_ms={:.2}",
        shape.members,
        shape.steps,
        shape.fields,
        shape.size,
        producers_done.saturating_sub(t0) as f64 / 1e9,
        bytes / total / (1 << 20) as f64,
        bytes * 8.0 / total / 1e9,
        pct(0.5),
        pct(0.99),
        lat_ms[lat_ms.len() - 1],
        pct_of(&notice_ms, 0.5),
        pct_of(&notice_ms, 0.99),
    );
    Ok(())
}
