//! The store commands: write, read, list, axes, where.

use std::cell::RefCell;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::ops::ControlFlow;
use std::path::PathBuf;

use anyhow::{bail, Context as _, Result};
use clap::Args;
use fieldstore::api::Fdb;
use fieldstore::api::{ArchiveSummary, Archiver, ListOptions, MessageProgress, StatsElement};
use fieldstore::model::request::Request;
use indicatif::{ProgressBar, ProgressStyle};

use super::fdb5_form as fdb5;
use super::request::read_requests;
use crate::context::Session;

#[derive(Args, Debug)]
pub struct WriteArgs {
    /// GRIB files to archive (`-` or none: standard input).
    files: Vec<PathBuf>,
    /// One line per message: number, offset, key.
    #[arg(long)]
    verbose: bool,
}

pub fn write(args: WriteArgs, session: &Session) -> Result<()> {
    let fdb = session.fdb()?;
    let mut inputs = args.files;
    if inputs.is_empty() {
        inputs.push(PathBuf::from("-"));
    }
    if session.fdb5_output {
        return write_fdb5(fdb, &inputs, args.verbose);
    }
    let verbose = args.verbose;
    let mut totals = ArchiveSummary::default();
    let started = std::time::Instant::now();
    for path in &inputs {
        if path.as_os_str() == "-" {
            // The size of a stream is not known: no progress bar.
            let mut archiver = Archiver::new(fdb).on_message(|m| report(m, verbose, None));
            totals += archiver.archive_reader(io::stdin(), "<stdin>")?;
            continue;
        }
        // The archiver stats the file again and reports what fails; this is only for the bar.
        let size = std::fs::metadata(path)
            .ok()
            .filter(|m| m.is_file())
            .map_or(0, |m| m.len());
        let bar = progress_bar(&path.display().to_string(), size, verbose);
        let mut archiver = Archiver::new(fdb).on_message(|m| report(m, verbose, Some(&bar)));
        let summary = archiver.archive_path(path)?;
        bar.finish_and_clear();
        totals += summary;
    }
    fdb.flush()?;
    let secs = started.elapsed().as_secs_f64();
    eprintln!(
        "archived {} fields, {:.1} MiB in {secs:.2} s ({:.0} fields/s)",
        totals.messages,
        totals.bytes as f64 / 1048576.0,
        totals.messages as f64 / secs.max(1e-9)
    );
    Ok(())
}

/// `fdb-write`: what FDB5 5.10.8's prints, all on standard output and nothing else: per file
/// `Processing PATH` (the path as eckit tidies it), with `--verbose` `Archiving {key}` per
/// message, then `FDB archive ...` and the timer line `fdb::service::archive: ...`, as its
/// `MessageArchiver` does. The flush at the end prints nothing, as FDB5's.
fn write_fdb5(fdb: &dyn fieldstore::api::Fdb, inputs: &[PathBuf], verbose: bool) -> Result<()> {
    for path in inputs {
        outln!("Processing {}", fdb5::eckit_path(&path.to_string_lossy()))?;
        let started = std::time::Instant::now();
        let cpu = fdb5::cpu_time();
        // The first failure to print (a closed pipe) ends the command once the file is in.
        let mut print_failed: Option<io::Error> = None;
        let on_message = |m: &MessageProgress<'_>| {
            if verbose && print_failed.is_none() {
                if let Err(e) = outln!("Archiving {}", m.key) {
                    print_failed = Some(e);
                }
            }
        };
        let mut archiver = Archiver::new(fdb).on_message(on_message);
        let summary = if path.as_os_str() == "-" {
            archiver.archive_reader(io::stdin(), "<stdin>")?
        } else {
            archiver.archive_path(path)?
        };
        drop(archiver);
        if let Some(e) = print_failed {
            return Err(e.into());
        }
        let elapsed = fdb5::micros(started.elapsed());
        let cpu = fdb5::micros(fdb5::cpu_time().saturating_sub(cpu));
        outln!(
            "{}",
            fdb5::archived(summary.messages, summary.bytes, elapsed)
        )?;
        outln!("{}", fdb5::timer("fdb::service::archive", elapsed, cpu))?;
    }
    fdb.flush()?;
    Ok(())
}

/// One line per message with `--verbose`; the bar otherwise.
pub(crate) fn report(m: &MessageProgress<'_>, verbose: bool, bar: Option<&ProgressBar>) {
    if verbose {
        eprintln!(
            "{}: message {} at offset {} ({} bytes): {}",
            m.source, m.number, m.offset, m.length, m.key
        );
    }
    if let Some(bar) = bar {
        bar.set_position(m.offset + m.length);
    }
}

pub(crate) fn progress_bar(name: &str, size: u64, verbose: bool) -> ProgressBar {
    if size <= 64 << 20 || verbose {
        return ProgressBar::hidden();
    }
    let b = ProgressBar::new(size);
    b.set_style(
        ProgressStyle::with_template(
            "{msg} [{bar:30}] {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    b.set_message(name.to_string());
    b
}

#[derive(Args, Debug)]
pub struct ListArgs {
    /// A partial MARS request, e.g. `class=od,expver=0001` (or a request file); with the FDB5
    /// form, several, each listed in turn, a key listed once across them (unless --full).
    #[arg(num_args = 0..)]
    requests: Vec<String>,
    /// Include masked (replaced) entries.
    #[arg(long)]
    full: bool,
    /// Print each field's location too.
    #[arg(long)]
    location: bool,
    /// FDB5's stable form: `{db keys}{index keys}{datum keys}`, one field per line.
    #[arg(long)]
    porcelain: bool,
    /// One JSON object per field per line.
    #[arg(long)]
    json: bool,
    /// 1: databases, 2: indexes, 3: fields.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u8).range(1..=3))]
    depth: u8,
    /// List everything (no request needed).
    #[arg(long)]
    all: bool,
}

pub(crate) fn one_request(arg: Option<&str>, all: bool) -> Result<Request> {
    match arg {
        Some(a) => {
            let mut reqs = read_requests(a)?;
            if reqs.len() != 1 {
                bail!("expected one request, found {}", reqs.len());
            }
            Ok(reqs.remove(0))
        }
        None if all => Ok(Request::default()),
        None => bail!("give a request (e.g. class=od,expver=0001) or --all"),
    }
}

pub fn list(args: ListArgs, session: &Session) -> Result<()> {
    if session.fdb5_output {
        return list_fdb5(args, session);
    }
    let fdb = session.fdb()?;
    if args.requests.len() > 1 {
        bail!("expected one request, got {}", args.requests.len());
    }
    let req = one_request(args.requests.first().map(String::as_str), args.all)?;
    if args.depth == 3 && !args.json && !args.location {
        return list_lines(&args, &req, fdb);
    }
    let out = io::stdout();
    let mut out = BufWriter::new(out.lock());
    let mut n = 0usize;
    // A damaged database (or index) is reported and the listing goes on with the others, so
    // one bad directory hides nothing else; the command still fails at the end.
    let mut errors = 0usize;
    for el in fdb.list(
        &req,
        ListOptions {
            include_masked: args.full,
            depth: args.depth,
        },
    )? {
        let el = match el {
            Ok(el) => el,
            Err(e) => {
                errors += 1;
                // What was listed so far goes out before the error, in order.
                out.flush()?;
                eprintln!("fieldstore: error: {e}");
                if errors >= MAX_LIST_ERRORS {
                    bail!("listing stopped after {errors} errors");
                }
                continue;
            }
        };
        n += 1;
        if args.json {
            let mut m = serde_json::Map::new();
            for (k, v) in el.key.combined().iter() {
                if !v.is_empty() {
                    m.insert(k.to_string(), v.into());
                }
            }
            if let Some(l) = &el.location {
                m.insert("_uri".into(), l.uri.clone().into());
                m.insert("_offset".into(), l.offset.into());
                m.insert("_length".into(), l.length.into());
            }
            writeln!(out, "{}", serde_json::Value::Object(m))?;
            continue;
        }
        let mut line = el.key.porcelain();
        if args.depth < 3 {
            line = line.trim_end_matches("{}").to_string();
        }
        if args.location && !args.porcelain {
            if let Some(l) = &el.location {
                line.push_str(&format!(", {l}"));
            }
        } else if args.location {
            if let Some(l) = &el.location {
                line.push_str(&format!(" {} {} {}", l.uri, l.offset, l.length));
            }
        }
        if args.full && el.masked && !args.porcelain {
            line.push_str(" (masked)");
        }
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    out.flush()?;
    if errors > 0 {
        bail!(
            "{errors} error{} while listing (above); {n} entries listed",
            if errors == 1 { "" } else { "s" }
        );
    }
    if n == 0 && !args.porcelain && !args.json {
        eprintln!("nothing matches {req}");
    }
    Ok(())
}

/// `list` of fields printed as keys only: the store hands each line over ready (a local one
/// prints it from its index files without building a key per field).
fn list_lines(args: &ListArgs, req: &Request, fdb: &dyn Fdb) -> Result<()> {
    let out = RefCell::new(BufWriter::new(io::stdout().lock()));
    let mut n = 0usize;
    let mut errors = 0usize;
    let failed: RefCell<Option<io::Error>> = RefCell::new(None);
    fdb.list_lines(
        req,
        ListOptions {
            include_masked: args.full,
            depth: 3,
        },
        args.full && !args.porcelain,
        &mut |line| match out.borrow_mut().write_all(line) {
            Ok(()) => {
                n += 1;
                ControlFlow::Continue(())
            }
            Err(e) => {
                *failed.borrow_mut() = Some(e);
                ControlFlow::Break(())
            }
        },
        &mut |e| {
            errors += 1;
            // What was listed so far goes out before the error, in order.
            if let Err(e) = out.borrow_mut().flush() {
                *failed.borrow_mut() = Some(e);
                return ControlFlow::Break(());
            }
            eprintln!("fieldstore: error: {e}");
            if errors >= MAX_LIST_ERRORS {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        },
    )?;
    if let Some(e) = failed.into_inner() {
        return Err(e.into());
    }
    out.into_inner().flush()?;
    if errors >= MAX_LIST_ERRORS {
        bail!("listing stopped after {errors} errors");
    }
    if errors > 0 {
        bail!(
            "{errors} error{} while listing (above); {n} entries listed",
            if errors == 1 { "" } else { "s" }
        );
    }
    if n == 0 && !args.porcelain {
        eprintln!("nothing matches {req}");
    }
    Ok(())
}

/// `fdb-list`'s forms: the request block first (unless `--porcelain` or `--json`), then one key
/// a line with `,length=N`, or FDB5's location, or one JSON array of keys.
fn list_fdb5(args: ListArgs, session: &Session) -> Result<()> {
    if args.json && args.location {
        bail!("--json and --location not compatible");
    }
    let fdb = session.fdb()?;
    let reqs = if args.all || args.requests.is_empty() {
        vec![one_request(None, args.all)?]
    } else {
        args.requests
            .iter()
            .map(|r| one_request(Some(r), false))
            .collect::<Result<Vec<_>>>()?
    };
    let out = io::stdout();
    let mut out = BufWriter::new(out.lock());
    let mut items = Vec::new();
    // As FDB5: a key listed for one request is not listed again for the next (unless --full).
    // One request lists each key once by itself: only keys a later request may repeat are kept
    // (a million-field listing kept every line, a third of its time and 200 MB).
    let mut seen = Seen {
        keys: std::collections::HashSet::new(),
        check: false,
        record: false,
    };
    for (i, req) in reqs.iter().enumerate() {
        seen.check = !args.full && i > 0;
        seen.record = !args.full && i + 1 < reqs.len();
        if !args.porcelain && !args.json {
            let shown = (!args.all)
                .then(|| fdb5_request(req, session))
                .transpose()?;
            out.write_all(fdb5::header("Listing for request", shown.as_ref()).as_bytes())?;
        }
        list_fdb5_one(&args, fdb, req, &mut seen, &mut items, &mut out)?;
    }
    if args.json {
        // As FDB5 5.10: the array alone, no newline after it.
        out.write_all(serde_json::to_string(&items)?.as_bytes())?;
    }
    out.flush()?;
    Ok(())
}

/// The keys earlier requests listed, as far as later ones need them.
struct Seen {
    keys: std::collections::HashSet<String>,
    /// Skip keys already listed.
    check: bool,
    /// Remember the keys listed now.
    record: bool,
}

fn list_fdb5_one(
    args: &ListArgs,
    fdb: &dyn fieldstore::api::Fdb,
    req: &Request,
    seen: &mut Seen,
    items: &mut Vec<serde_json::Value>,
    out: &mut dyn Write,
) -> Result<()> {
    if args.porcelain
        && !args.json
        && !args.location
        && args.depth == 3
        && !seen.check
        && !seen.record
    {
        // Key lines only, nothing to deduplicate: the store hands them over ready.
        let out = RefCell::new(out);
        let failed: RefCell<Option<anyhow::Error>> = RefCell::new(None);
        let stop = |e: anyhow::Error| {
            *failed.borrow_mut() = Some(e);
            ControlFlow::Break(())
        };
        fdb.list_lines(
            req,
            ListOptions {
                include_masked: args.full,
                depth: 3,
            },
            false,
            &mut |line| match out.borrow_mut().write_all(line) {
                Ok(()) => ControlFlow::Continue(()),
                Err(e) => stop(e.into()),
            },
            &mut |e| stop(e.into()),
        )?;
        return failed.into_inner().map_or(Ok(()), Err);
    }
    for el in fdb.list(
        req,
        ListOptions {
            include_masked: args.full,
            depth: args.depth,
        },
    )? {
        let el = el?;
        if seen.check || seen.record {
            let key = el.key.porcelain();
            if seen.check && seen.keys.contains(&key) {
                continue;
            }
            if seen.record {
                seen.keys.insert(key);
            }
        }
        let length = el.location.as_ref().map_or(0, |l| l.length);
        if args.json {
            let mut m = serde_json::Map::new();
            let combined = el.key.combined();
            let mut pairs: Vec<(&str, &str)> = combined.iter().collect();
            pairs.sort();
            for (k, v) in pairs {
                if !v.is_empty() {
                    m.insert(k.to_string(), v.into());
                }
            }
            // FDB5 5.10 puts the length beside each key object, not in it.
            items.push(serde_json::Value::Object(m));
            items.push("length".into());
            items.push(length.into());
            continue;
        }
        let mut line = el.key.porcelain();
        if args.depth < 3 {
            line = line.trim_end_matches("{}").to_string();
        }
        match &el.location {
            Some(l) if args.location => {
                line.push(' ');
                line.push_str(&fdb5::location(l));
            }
            _ if !args.porcelain => line.push_str(&format!(",length={length}")),
            _ => {}
        }
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    Ok(())
}

/// A request as FDB5 shows it before visiting: ranges expanded, values canonical.
fn fdb5_request(req: &Request, session: &Session) -> Result<Request> {
    let cx = session.type_context();
    super::request::canonical(&req.expand_ranges(&cx)?, &session.schema()?, &cx)
}

/// The requests a visit tool runs: the one given, or with `--all` one per database (the
/// maintenance calls take a request naming databases, so `--all` names each in turn).
fn visit(arg: Option<&str>, all: bool, session: &Session) -> Result<Vec<Request>> {
    if !all {
        return Ok(vec![one_request(arg, false)?]);
    }
    if arg.is_some() {
        bail!("--all takes no request");
    }
    let dbs = session.fdb()?.where_(&Request::default())?;
    Ok(dbs
        .iter()
        .map(|d| {
            let mut r = Request::new(None);
            for (k, v) in d.db.iter() {
                r.set(k, vec![v.to_string()]);
            }
            r
        })
        .collect())
}

/// What FDB5 says when a visit tool finds no database (`--ignore-no-data` lets it pass).
#[derive(Debug, thiserror::Error)]
#[error("No FDB entries found for: {0}")]
pub struct NoEntries(String);

fn no_entries(req: Option<&Request>) -> anyhow::Error {
    NoEntries(req.map_or_else(|| " -- ALL --".to_string(), |r| r.to_string())).into()
}

/// Errors `list` reports before giving up: each damaged database or index is one, so more means
/// something wider is wrong (and a frontend repeating an error cannot keep it going forever).
const MAX_LIST_ERRORS: usize = 100;

#[derive(Args, Debug)]
pub struct ReadArgs {
    /// A MARS request, inline or a request file (several requests are read in order).
    request: String,
    /// Output file (`-`: standard output).
    output: PathBuf,
    /// Wait up to this long (`30s`, `5m`, `1h`) for fields not flushed yet, writing each as it
    /// arrives; on timeout, fail naming the fields still missing.
    #[arg(long, value_name = "DURATION")]
    wait: Option<String>,
    /// With --wait: keep the fields already written when the wait times out (by default a
    /// failed read leaves no file behind).
    #[arg(long, requires = "wait")]
    keep_partial: bool,
    /// With FDB5's output (`fdb-read --raw`): show each request as given, not expanded.
    #[arg(long, hide = true)]
    raw: bool,
}

pub fn read(args: ReadArgs, session: &Session) -> Result<()> {
    let fdb = session.fdb()?;
    let reqs = read_requests(&args.request)?;
    // Into a file, the reader copies itself (a local store maps its data objects and writes
    // each checked run of fields at once); to stdout, through a buffer.
    let mut file = if args.output.as_os_str() == "-" {
        None
    } else {
        Some(
            File::create(&args.output)
                .with_context(|| format!("cannot create {}", args.output.display()))?,
        )
    };
    let result = match args.wait.as_deref() {
        Some(w) => {
            let wait = super::watch::parse_duration(w).context("--wait")?;
            read_waiting(fdb, &reqs, wait, file.as_mut())
        }
        None if session.fdb5_output => read_fdb5(fdb, &reqs, args.raw, session, file.as_mut()),
        None => read_into(fdb, &reqs, file.as_mut()),
    };
    let timed_out = result
        .as_ref()
        .is_err_and(|e| crate::exit::error_kind(e) == Some(fieldstore::ErrorKind::Timeout));
    if result.is_err() && !(timed_out && args.keep_partial) {
        // A cut-short or empty GRIB file must not be mistaken for the answer: remove what this
        // run created (never a device such as /dev/null).
        if let Some(f) = file.take() {
            let regular = f.metadata().is_ok_and(|m| m.is_file());
            drop(f);
            if regular {
                let _ = std::fs::remove_file(&args.output);
            }
        }
    }
    result
}

fn read_into(
    fdb: &dyn fieldstore::api::Fdb,
    reqs: &[Request],
    mut file: Option<&mut File>,
) -> Result<()> {
    let mut stdout = file.is_none().then(|| BufWriter::new(io::stdout().lock()));
    let mut total = 0u64;
    let mut chunk = Vec::new();
    for req in reqs {
        let mut stream = fdb.retrieve(req)?;
        let copied = match (file.as_deref_mut(), stdout.as_mut()) {
            (Some(f), _) => stream.copy_to_file(f),
            (None, Some(out)) => {
                chunk.resize(COPY_CHUNK, 0);
                copy_large(&mut stream, out, &mut chunk)
            }
            (None, None) => Ok(0),
        };
        let n = copied.with_context(|| format!("reading {req}"))?;
        if n == 0 {
            let why = fdb.explain_nothing(req);
            bail!("nothing matches {req}\n{why}");
        }
        total += n;
    }
    if let Some(out) = stdout.as_mut() {
        out.flush()?;
    }
    eprintln!("read {total} bytes");
    Ok(())
}

/// `fdb-read`: what FDB5 5.10.8's prints on standard output, and nothing else: each request as
/// it retrieves it (expanded and canonical; as given with `--raw`), then, once the fields are
/// written, eckit's transfer report: the read and write rates and the `Save into` timer. Into
/// standard output (`-`, which FDB5 takes for a file name) the report goes to standard error,
/// to keep the GRIB stream clean.
fn read_fdb5(
    fdb: &dyn fieldstore::api::Fdb,
    reqs: &[Request],
    raw: bool,
    session: &Session,
    file: Option<&mut File>,
) -> Result<()> {
    let to_stdout = file.is_none();
    let say = |line: &str| -> io::Result<()> {
        if to_stdout {
            writeln!(io::stderr().lock(), "{line}")
        } else {
            outln!("{line}")
        }
    };
    for req in reqs {
        let mut shown = if raw {
            req.clone()
        } else {
            fdb5_request(req, session)?
        };
        if shown.verb().is_none() {
            let mut with_verb = Request::new(Some("retrieve"));
            for (k, v) in shown.iter() {
                with_verb.set(k, v.to_vec());
            }
            shown = with_verb;
        }
        say(&shown.to_string())?;
    }
    let started = std::time::Instant::now();
    let cpu = fdb5::cpu_time();
    let mut out: Box<dyn Write + '_> = match file {
        Some(f) => Box::new(f),
        None => Box::new(BufWriter::new(io::stdout().lock())),
    };
    let (mut total, mut reading, mut writing) =
        (0u64, std::time::Duration::ZERO, std::time::Duration::ZERO);
    let mut chunk = Vec::new();
    for req in reqs {
        for (req, mut stream) in fdb5_streams(fdb, req)? {
            let req = &req;
            // Timed apart, as eckit's transfer reports them: reading the fields, writing them out.
            let want = usize::try_from(stream.size())
                .unwrap_or(COPY_CHUNK)
                .clamp(1, COPY_CHUNK);
            if chunk.len() < want {
                chunk.resize(want, 0);
            }
            let mut n = 0u64;
            loop {
                let t = std::time::Instant::now();
                let got = match stream.read(&mut chunk) {
                    Ok(0) => break,
                    Ok(got) => got,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(anyhow::Error::from(e).context(format!("reading {req}"))),
                };
                reading += t.elapsed();
                let t = std::time::Instant::now();
                out.write_all(&chunk[..got])?;
                writing += t.elapsed();
                n += got as u64;
            }
            // FDB5 reads what there is: a request matching nothing adds nothing, and is no error.
            total += n;
        }
    }
    let t = std::time::Instant::now();
    out.flush()?;
    writing += t.elapsed();
    drop(out);
    for line in fdb5::transfer_rates(total, fdb5::micros(reading), fdb5::micros(writing)) {
        say(&line)?;
    }
    let elapsed = fdb5::micros(started.elapsed());
    let cpu = fdb5::micros(fdb5::cpu_time().saturating_sub(cpu));
    say(&fdb5::timer("Save into", elapsed, cpu))?;
    Ok(())
}

/// The streams FDB5's `fdb-read` reads for one request: all of it, or, when a database it
/// names is locked for retrieval, each other database's part, after FDB5's words for the
/// locked one on stderr. A request matching nothing gives none.
fn fdb5_streams(
    fdb: &dyn fieldstore::api::Fdb,
    req: &Request,
) -> Result<Vec<(Request, Box<dyn fieldstore::api::DataReader>)>> {
    match fdb.retrieve(req) {
        Ok(s) => Ok(vec![(req.clone(), s)]),
        Err(e) if e.kind() == fieldstore::ErrorKind::Locked => {
            let mut out = Vec::new();
            for db in fdb.where_(req)? {
                let mut part = req.clone();
                for (k, v) in db.db.iter() {
                    part.set(k, vec![v.to_string()]);
                }
                match fdb.retrieve(&part) {
                    Ok(s) => out.push((part, s)),
                    Err(e) if e.kind() == fieldstore::ErrorKind::Locked => {
                        eprintln!(
                            "Database TocCatalogueReader({}) is LOCKED for retrieval",
                            fdb5::path_of(&db.location)
                        );
                    }
                    Err(e) if e.kind() == fieldstore::ErrorKind::NotFound => {}
                    Err(e) => return Err(e.into()),
                }
            }
            Ok(out)
        }
        Err(e) if e.kind() == fieldstore::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(e.into()),
    }
}

/// `read --wait`: each request's fields as flushes make them visible, all within one deadline.
fn read_waiting(
    fdb: &dyn fieldstore::api::Fdb,
    reqs: &[Request],
    wait: std::time::Duration,
    mut file: Option<&mut File>,
) -> Result<()> {
    let deadline = std::time::Instant::now() + wait;
    let mut stdout = file.is_none().then(|| BufWriter::new(io::stdout().lock()));
    let mut total = 0u64;
    let mut chunk = Vec::new();
    for (i, req) in reqs.iter().enumerate() {
        // The first request gets the duration as given, so its timeout message says "30s".
        let left = match i {
            0 => wait,
            _ => deadline.saturating_duration_since(std::time::Instant::now()),
        };
        let mut waiting = fieldstore::api::RetrieveWait::new(fdb, req, left)
            .with_context(|| format!("waiting for {req}"))?;
        let mut n = 0u64;
        while let Some(mut stream) = waiting.next(fdb)? {
            let copied = match (file.as_deref_mut(), stdout.as_mut()) {
                (Some(f), _) => stream.copy_to_file(f),
                (None, Some(out)) => {
                    chunk.resize(COPY_CHUNK, 0);
                    // Each field reaches a pipe as it arrives, not when the buffer fills.
                    copy_large(&mut stream, out, &mut chunk).and_then(|n| out.flush().map(|()| n))
                }
                (None, None) => Ok(0),
            };
            n += copied.with_context(|| format!("reading {req}"))?;
        }
        if n == 0 {
            let why = fdb.explain_nothing(req);
            bail!("nothing matches {req}\n{why}");
        }
        total += n;
    }
    if let Some(out) = stdout.as_mut() {
        out.flush()?;
    }
    eprintln!("read {total} bytes");
    Ok(())
}

/// Retrieves are copied in chunks this big: large fields go to the output in few writes
/// (`io::copy` would move them 8 KiB at a time), and a remote store's 10 MiB data frames land
/// in it directly.
const COPY_CHUNK: usize = 16 << 20;

fn copy_large(from: &mut dyn Read, to: &mut dyn Write, chunk: &mut [u8]) -> io::Result<u64> {
    let mut total = 0u64;
    loop {
        let n = match from.read(chunk) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        to.write_all(&chunk[..n])?;
        total += n as u64;
    }
}

#[derive(Args, Debug)]
pub struct AxesArgs {
    request: Option<String>,
    #[arg(long)]
    json: bool,
    #[arg(long, default_value_t = 3)]
    level: u8,
    #[arg(long)]
    all: bool,
}

pub fn axes(args: AxesArgs, session: &Session) -> Result<()> {
    let fdb = session.fdb()?;
    let req = one_request(args.request.as_deref(), args.all)?;
    if session.fdb5_output {
        // FDB5's axes and its `IndexAxis` print: values as text, in text order, a keyword left
        // out when it has no value but the empty one.
        let axes = fdb.axes(&req, args.level.clamp(1, 3) | fieldstore::api::AXES_AS_FDB5)?;
        let axes: std::collections::BTreeMap<&String, &std::collections::BTreeSet<String>> = axes
            .iter()
            .filter(|(_, v)| v.iter().any(|x| !x.is_empty()))
            .collect();
        if args.json {
            outln!("{}", serde_json::to_string(&axes)?)?;
        } else {
            let parts: Vec<String> = axes
                .iter()
                .map(|(k, v)| format!("{k}=({})", v.iter().cloned().collect::<Vec<_>>().join(",")))
                .collect();
            outln!("IndexAxis[axis={{{}}}]", parts.join(","))?;
        }
        return Ok(());
    }
    let axes = fdb.axes(&req, args.level)?;
    // Values by their type (`1/2/10`, steps `0/6/12`), not as text, in both forms.
    let axes = fieldstore::api::sorted_axes(&axes);
    if args.json {
        outln!("{}", serde_json::to_string(&axes)?)?;
    } else {
        for (k, v) in &axes {
            outln!("{k}: {}", v.join("/"))?;
        }
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct VisitArgs {
    /// Which databases, e.g. class=od,expver=0001 (or a request file).
    request: Option<String>,
    /// Every database.
    #[arg(long)]
    all: bool,
    /// Also say how each database is kept on disk (`fieldstore` or `fdb5`), after a tab.
    #[arg(long = "show-format")]
    show_format: bool,
}

pub fn where_(a: VisitArgs, session: &Session) -> Result<()> {
    let fdb = session.fdb()?;
    // The empty request matches every database.
    let req = one_request(a.request.as_deref(), a.all)?;
    let dbs = fdb.where_(&req)?;
    if dbs.is_empty() {
        bail!("no database matches {req}");
    }
    for d in dbs {
        if session.fdb5_output {
            outln!("{}", fdb5::path_of(&d.location))?;
        } else if a.show_format {
            outln!("{}\t{}", d.location, d.format.as_deref().unwrap_or("-"))?;
        } else {
            outln!("{}", d.location)?;
        }
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct DoitArgs {
    /// Which databases, e.g. class=od,expver=0001,stream=oper,date=20261122,time=1200 (several:
    /// each in turn).
    #[arg(num_args = 0..)]
    requests: Vec<String>,
    /// Really delete; without it, only show what would go.
    #[arg(long)]
    doit: bool,
    /// Every database (each named in turn).
    #[arg(long)]
    all: bool,
    /// Only the files deleted (or that would be), one a line, as FDB5's `--porcelain`.
    #[arg(long)]
    porcelain: bool,
    /// Nothing to delete is not an error.
    #[arg(long)]
    ignore_no_data: bool,
}

impl DoitArgs {
    /// The requests given, one after the other (`None`: none given, for `--all`).
    fn given(&self) -> Vec<Option<&str>> {
        if self.requests.is_empty() {
            return vec![None];
        }
        self.requests.iter().map(|r| Some(r.as_str())).collect()
    }

    /// With `--ignore-no-data`, whether `req` names no database (and is to be passed over).
    fn nothing_there(&self, fdb: &dyn fieldstore::api::Fdb, req: &Request) -> Result<bool> {
        Ok(self.ignore_no_data && fdb.where_(req)?.is_empty())
    }
}

pub fn wipe(a: DoitArgs, session: &Session) -> Result<()> {
    let fdb = session.fdb()?;
    if session.fdb5_output {
        return wipe_fdb5(&a, session);
    }
    let mut reqs = Vec::new();
    for arg in a.given() {
        reqs.extend(visit(arg, a.all, session)?);
    }
    for req in reqs {
        if a.nothing_there(fdb, &req)? {
            continue;
        }
        for db in fdb.wipe(&req, a.doit)? {
            if a.porcelain {
                for f in fdb5::WipeFiles::sort(&db.location, &db.removed).in_order() {
                    outln!("{f}")?;
                }
                continue;
            }
            let verb = if db.doit { "wiped" } else { "would wipe" };
            outln!("{verb} database {}", db.location)?;
            for f in &db.removed {
                outln!("  {f}")?;
            }
        }
    }
    dry_run_note(a.doit);
    Ok(())
}

/// `fdb-wipe`: the request block, FDB5's report per database (the files by kind, its owner),
/// the deletions as they happen; `--porcelain`: the deleted paths alone.
fn wipe_fdb5(a: &DoitArgs, session: &Session) -> Result<()> {
    for arg in a.given() {
        wipe_fdb5_request(a, arg, session)?;
    }
    if !a.doit && !a.porcelain {
        out!("{}", fdb5::RERUN)?;
    }
    Ok(())
}

/// One request of `fdb-wipe`: its block, then each database it names.
fn wipe_fdb5_request(a: &DoitArgs, arg: Option<&str>, session: &Session) -> Result<()> {
    let fdb = session.fdb()?;
    let reqs = visit(arg, a.all, session)?;
    let shown = match (a.all, reqs.first()) {
        (false, Some(r)) => Some(fdb5_request(r, session)?),
        _ => None,
    };
    if !a.porcelain {
        out!("{}", fdb5::header("Wiping for request", shown.as_ref()))?;
    }
    let mut found = 0usize;
    for req in &reqs {
        if a.nothing_there(fdb, req)? {
            continue;
        }
        // The owner is read before the directory goes.
        let owners: Vec<(String, String)> = fdb
            .where_(req)?
            .into_iter()
            .map(|d| {
                let o = fdb5::owner(&d.location);
                (d.location, o)
            })
            .collect();
        for db in fdb.wipe(req, a.doit)? {
            found += 1;
            let files = fdb5::WipeFiles::sort(&db.location, &db.removed);
            if a.porcelain {
                for f in files.in_order() {
                    outln!("{f}")?;
                }
                continue;
            }
            let owner = owners
                .iter()
                .find(|(l, _)| *l == db.location)
                .map(|(_, o)| o.clone())
                .unwrap_or_default();
            out!("{}", files.report(&owner))?;
            if a.doit {
                out!("{}", files.unlinking())?;
            }
        }
    }
    if found == 0 && !a.ignore_no_data {
        return Err(no_entries(shown.as_ref()));
    }
    Ok(())
}

pub fn purge(a: DoitArgs, session: &Session) -> Result<()> {
    for arg in a.given() {
        purge_request(&a, arg, session)?;
    }
    if session.fdb5_output && !a.doit && !a.porcelain {
        out!("{}", fdb5::RERUN)?;
    }
    if !session.fdb5_output {
        dry_run_note(a.doit);
    }
    Ok(())
}

/// One request of `purge`: FDB5's block and report per database, or fieldstore's lines.
fn purge_request(a: &DoitArgs, arg: Option<&str>, session: &Session) -> Result<()> {
    let fdb = session.fdb()?;
    let reqs = visit(arg, a.all, session)?;
    if session.fdb5_output && !a.porcelain {
        let shown = match (a.all, reqs.first()) {
            (false, Some(r)) => Some(fdb5_request(r, session)?),
            _ => None,
        };
        out!("{}", fdb5::header("Purging for request", shown.as_ref()))?;
        for req in &reqs {
            if a.nothing_there(fdb, req)? {
                continue;
            }
            // The figures are taken before the purge changes them.
            let before: Vec<(String, fdb5::BeforePurge)> = fdb
                .stats(req)?
                .iter()
                .map(|s| {
                    let per_file = reachable_per_data_file(fdb, &s.db)?;
                    let figures = fdb5::Figures::of(s, fdb5::DbFiles::of(&s.location));
                    Ok((
                        s.location.clone(),
                        fdb5::BeforePurge {
                            figures: Some(figures),
                            reachable_per_data_file: per_file,
                        },
                    ))
                })
                .collect::<Result<_>>()?;
            for db in fdb.purge(req, a.doit)? {
                let empty = fdb5::BeforePurge::default();
                let b = before
                    .iter()
                    .find(|(l, _)| *l == db.location)
                    .map_or(&empty, |(_, b)| b);
                out!("{}", fdb5::purge_report(&db, b))?;
            }
        }
        return Ok(());
    }
    for req in &reqs {
        if a.nothing_there(fdb, req)? {
            continue;
        }
        for db in fdb.purge(req, a.doit)? {
            if a.porcelain {
                // FDB5's order: the data files, then the index files.
                for f in db.objects.iter().chain(&db.indexes) {
                    outln!("{}", fdb5::path_of(f))?;
                }
                continue;
            }
            let verb = if db.doit { "removed" } else { "would remove" };
            outln!(
                "{}: {} masked fields; {verb} {} index files and {} data files",
                db.location,
                db.masked_fields,
                db.indexes.len(),
                db.objects.len()
            )?;
            for f in db.indexes.iter().chain(&db.objects) {
                outln!("  {f}")?;
            }
        }
    }
    Ok(())
}

fn dry_run_note(doit: bool) {
    if !doit {
        eprintln!("dry run: nothing was deleted (add --doit)");
    }
}

/// How many reachable fields each data file of a database holds (zero for one only masked
/// fields are in), by path.
fn reachable_per_data_file(
    fdb: &dyn fieldstore::api::Fdb,
    db: &fieldstore::model::Key,
) -> Result<Vec<(String, u64)>> {
    let mut req = Request::new(None);
    for (k, v) in db.iter() {
        req.set(k, vec![v.to_string()]);
    }
    let mut counts = std::collections::BTreeMap::<String, u64>::new();
    let all = ListOptions {
        include_masked: true,
        depth: 3,
    };
    for el in fdb.list(&req, all)? {
        let el = el?;
        if let Some(l) = &el.location {
            *counts.entry(fdb5::path_of(&l.uri)).or_default() += u64::from(!el.masked);
        }
    }
    Ok(counts.into_iter().collect())
}

#[derive(Args, Debug)]
pub struct StatsArgs {
    /// Which databases, e.g. class=od,expver=0001 (or a request file); several are summed.
    #[arg(num_args = 0..)]
    requests: Vec<String>,
    /// Every database.
    #[arg(long)]
    all: bool,
    /// With the FDB5 form (`fdb-stats --details`): each database's report before the summary;
    /// fieldstore's own form always shows each database.
    #[arg(long, hide = true)]
    details: bool,
}

pub fn stats(a: StatsArgs, session: &Session) -> Result<()> {
    let fdb = session.fdb()?;
    let mut all = Vec::new();
    let given: Vec<Option<&str>> = if a.requests.is_empty() {
        vec![None]
    } else {
        a.requests.iter().map(|r| Some(r.as_str())).collect()
    };
    for arg in given {
        for req in visit(arg, a.all, session)? {
            all.extend(fdb.stats(&req)?);
        }
        // As FDB5: a request (the first, or any after) adding no database is an error.
        if all.is_empty() && session.fdb5_output {
            let req = arg.map(one_request_of).transpose()?;
            return Err(no_entries(req.as_ref()));
        }
    }
    if session.fdb5_output {
        let figures: Vec<fdb5::Figures> = all
            .iter()
            .map(|s| fdb5::Figures::of(s, fdb5::DbFiles::of(&s.location)))
            .collect();
        out!("{}", fdb5::stats(&figures, a.details))?;
        return Ok(());
    }
    for line in stats_lines(&all) {
        outln!("{line}")?;
    }
    Ok(())
}

fn one_request_of(arg: &str) -> Result<Request> {
    one_request(Some(arg), false)
}

/// One line per database, and a total per run of databases reached through the same lanes
/// (one total for a single store, even of no database).
fn stats_lines(all: &[StatsElement]) -> Vec<String> {
    let mut groups: Vec<&[StatsElement]> = all.chunk_by(|a, b| a.lanes == b.lanes).collect();
    if groups.is_empty() {
        groups.push(&[]);
    }
    let mut out = Vec::new();
    for group in groups {
        let prefix: String = group
            .first()
            .map(|e| e.lanes.iter().map(|l| format!("[{l}] ")).collect())
            .unwrap_or_default();
        let (mut fields, mut bytes, mut masked) = (0u64, 0u64, 0u64);
        for s in group {
            let mut creator = s
                .creator
                .as_ref()
                .map(|c| format!(", created by '{c}'"))
                .unwrap_or_default();
            // Only FDB5's format is named: fieldstore's own is what stats always described.
            if s.format.as_deref() == Some("fdb5") {
                creator.push_str(", FDB5 format");
            }
            out.push(format!(
                "{prefix}{}: fields {}, masked {}, field bytes {}, masked bytes {}, index files {}, data files {} ({} bytes), journal records {}{creator}",
                s.location, s.fields, s.masked, s.field_bytes, s.masked_bytes, s.index_files, s.data_files, s.data_bytes, s.journal_records
            ));
            fields += s.fields;
            masked += s.masked;
            bytes += s.field_bytes;
        }
        out.push(format!(
            "{prefix}total: {} databases, {fields} fields ({bytes} bytes), {masked} masked",
            group.len()
        ));
    }
    out
}

pub fn compact(request: String, session: &Session) -> Result<()> {
    let req = one_request(Some(&request), false)?;
    for db in session.fdb()?.compact(&req)? {
        outln!(
            "{}: merged {} indexes into {} ({} entries)",
            db.location,
            db.merged_indexes,
            db.new_indexes,
            db.entries
        )?;
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct CheckArgs {
    /// Which databases, e.g. class=od,expver=0001 (or a request file); none: every database.
    request: Option<String>,
    /// Only the databases with something to say, and nothing for the others.
    #[arg(long)]
    quiet: bool,
}

/// `fieldstore check`: per database, the files no journal record names and what each is; fails
/// when a journal lost flushes it once held, or a database cannot be read.
pub fn check(a: CheckArgs, session: &Session) -> Result<()> {
    let fdb = session.fdb()?;
    let req = one_request(a.request.as_deref(), true)?;
    let checked = fdb.check(&req)?;
    if checked.is_empty() {
        bail!("no database matches {req}");
    }
    let failed = checked.iter().filter(|c| c.failed()).count();
    for c in &checked {
        let name = match (&c.db, c.location.is_empty()) {
            (Some(db), true) => db.to_string(),
            (_, false) => c.location.clone(),
            (None, true) => String::new(),
        };
        if let Some(problem) = &c.problem {
            if name.is_empty() {
                outln!("cannot be checked: {problem}")?;
            } else {
                outln!("{name}: cannot be checked: {problem}")?;
            }
            continue;
        }
        let lost = c.findings.iter().filter(|f| f.kind.is_lost()).count();
        match (c.findings.len(), lost) {
            (0, _) if a.quiet => continue,
            (0, _) => outln!("{name}: ok")?,
            (n, 0) => outln!(
                "{name}: ok; {n} file{} no journal record names, none from lost flushes",
                if n == 1 { "" } else { "s" }
            )?,
            (_, n) => outln!(
                "{name}: LOST FLUSHES: the journal (toc) lacks flushes it once held ({n} file{} \
                 show{} it); restore the whole toc, or move the lost-flush and lost-data files \
                 out of the directory to accept what the journal shows",
                if n == 1 { "" } else { "s" },
                if n == 1 { "s" } else { "" }
            )?,
        }
        for f in &c.findings {
            outln!("  {:<19} {}: {}", f.kind.name(), f.file, f.detail)?;
        }
    }
    if failed > 0 {
        bail!(
            "{failed} of {} database{} failed the check (above)",
            checked.len(),
            if checked.len() == 1 { "" } else { "s" }
        );
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct DumpArgs {
    /// Which databases, e.g. class=od,expver=0001 (or a request file).
    request: Option<String>,
    /// Every database.
    #[arg(long)]
    all: bool,
    /// With the FDB5 form (`fdb-dump --simple`): one line per record; fieldstore's own form
    /// is one line per record already.
    #[arg(long, hide = true)]
    simple: bool,
}

pub fn dump(a: DumpArgs, session: &Session) -> Result<()> {
    let fdb = session.fdb()?;
    let mut found = 0usize;
    for req in visit(a.request.as_deref(), a.all, session)? {
        for db in fdb.dump(&req)? {
            found += 1;
            if session.fdb5_output {
                out!("{}", fdb5::dump(&db, &fdb5::owner(&db.location), a.simple))?;
            } else {
                outln!("{db}")?;
            }
        }
    }
    if found == 0 && session.fdb5_output {
        let req = a.request.as_deref().map(one_request_of).transpose()?;
        return Err(no_entries(req.as_ref()));
    }
    Ok(())
}

#[derive(Args, Debug)]
pub struct ControlArgs {
    /// lock, unlock or status.
    #[arg(value_parser = ["lock", "unlock", "status"])]
    action: String,
    request: String,
    #[arg(long)]
    list: bool,
    #[arg(long)]
    retrieve: bool,
    #[arg(long)]
    archive: bool,
    #[arg(long)]
    wipe: bool,
}

pub fn control(a: ControlArgs, session: &Session) -> Result<()> {
    use fieldstore::api::{ControlAction, ControlIdentifier, Operation};
    let req = one_request(Some(&a.request), false)?;
    let action = match a.action.as_str() {
        "lock" => ControlAction::Lock,
        "unlock" => ControlAction::Unlock,
        _ => ControlAction::Status,
    };
    let ids: Vec<ControlIdentifier> = [
        (a.list, ControlIdentifier::List),
        (a.retrieve, ControlIdentifier::Retrieve),
        (a.archive, ControlIdentifier::Archive),
        (a.wipe, ControlIdentifier::Wipe),
    ]
    .into_iter()
    .filter(|(on, _)| *on)
    .map(|(_, id)| id)
    .collect();
    if action != ControlAction::Status && ids.is_empty() {
        bail!(
            "say which actions to {}: --list, --retrieve, --archive, --wipe",
            a.action
        );
    }
    for db in session.fdb()?.control(&req, action, &ids)? {
        let state: Vec<String> = Operation::CONTROLLABLE
            .iter()
            .map(|op| {
                let state = if db.is_locked(*op) {
                    "LOCKED"
                } else {
                    "enabled"
                };
                format!("{op}: {state}")
            })
            .collect();
        outln!("{} {}", db.location, state.join(", "))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn db(location: &str, lanes: &[&str], fields: u64) -> StatsElement {
        StatsElement {
            db: fieldstore::model::Key::new(),
            location: location.into(),
            lanes: lanes.iter().map(|l| l.to_string()).collect(),
            fields,
            masked: 1,
            field_bytes: fields * 10,
            masked_bytes: 10,
            index_files: 2,
            data_files: 1,
            data_bytes: 99,
            journal_records: 3,
            creator: None,
            format: None,
        }
    }

    #[test]
    fn stats_print_as_before_with_a_total_per_lane() {
        assert_eq!(
            stats_lines(&[db("/r/a", &[], 4)]),
            [
                "/r/a: fields 4, masked 1, field bytes 40, masked bytes 10, index files 2, data files 1 (99 bytes), journal records 3",
                "total: 1 databases, 4 fields (40 bytes), 1 masked",
            ]
        );
        assert_eq!(
            stats_lines(&[]),
            ["total: 0 databases, 0 fields (0 bytes), 0 masked"]
        );
        let lanes = stats_lines(&[
            db("/a", &["x"], 1),
            db("/b", &["x"], 2),
            db("/c", &["y"], 3),
        ]);
        assert_eq!(lanes.len(), 5);
        assert!(lanes[0].starts_with("[x] /a: fields 1"));
        assert_eq!(
            lanes[2],
            "[x] total: 2 databases, 3 fields (30 bytes), 2 masked"
        );
        assert_eq!(
            lanes[4],
            "[y] total: 1 databases, 3 fields (30 bytes), 1 masked"
        );
    }
}
