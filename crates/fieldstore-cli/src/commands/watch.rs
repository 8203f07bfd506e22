//! `fieldstore watch`: one line per field as flushes make it visible (docs/subscribe.md).

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context as _, Result};
use clap::Args;
use fieldstore::api::{Notice, Position, Start};
use serde_json::{json, Map, Value};

use super::store::one_request;
use crate::context::Session;

#[derive(Args, Debug)]
pub struct WatchArgs {
    /// A partial MARS request, e.g. `class=od,expver=0001,stream=oper` (or a request file).
    request: Option<String>,
    /// Watch every field (no request needed).
    #[arg(long)]
    all: bool,
    /// One JSON object per field per line: key, location, timestamp, position.
    #[arg(long, conflicts_with = "aviso")]
    json: bool,
    /// One aviso notification per line (CloudEvents JSON, as aviso's `post` trigger sends).
    #[arg(long)]
    aviso: bool,
    /// Append the field's location (`uri offset length`) to each plain line.
    #[arg(long)]
    location: bool,
    /// Run this shell command per field: the line on its standard input, the key in
    /// FIELDSTORE_KEY and FIELDSTORE_<KEYWORD>. Failures are reported and watching goes on.
    #[arg(long, value_name = "CMD")]
    exec: Option<String>,
    /// With --exec: stop (exit 1, the field not marked seen) when the command fails.
    #[arg(long, requires = "exec")]
    exec_fail_stop: bool,
    /// Where to start: `now`, `beginning`, or a position token a watcher printed.
    #[arg(long, value_name = "WHERE", default_value = "now")]
    from: String,
    /// Resume from the position in this file if it exists (else from --from), and rewrite it
    /// after each field: a restarted watcher misses nothing and repeats nothing.
    #[arg(long, value_name = "FILE")]
    position_file: Option<PathBuf>,
    /// Exit (status 0) after this many fields.
    #[arg(long, value_name = "N")]
    count: Option<u64>,
    /// Exit (status 0) when no field came for this long: `30s`, `5m`, `1h`, `500ms`.
    #[arg(long, value_name = "DURATION")]
    timeout: Option<String>,
}

/// How long one wait lasts at most, so a SIGINT/SIGTERM is acted on between fields (never
/// between printing a field and saving the position after it).
const SLICE: Duration = Duration::from_millis(200);

/// `30s`, `5m`, `1h`, `2d`, `500ms`, or plain seconds (decimals allowed).
pub fn parse_duration(text: &str) -> Result<Duration> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let factor = match unit.trim() {
        "" | "s" => 1.0,
        "ms" => 0.001,
        "m" | "min" => 60.0,
        "h" => 3600.0,
        "d" => 86400.0,
        _ => f64::NAN,
    };
    let secs = num.parse::<f64>().map(|n| n * factor).unwrap_or(f64::NAN);
    if !(0.0..=1e9).contains(&secs) {
        bail!("{text:?}: expected a duration like 30s, 5m, 1h or 500ms");
    }
    Ok(Duration::from_secs_f64(secs))
}

fn start_from(text: &str) -> Result<Start> {
    Ok(match text.trim() {
        "now" => Start::Now,
        "beginning" => Start::Beginning,
        token => Start::At(Position::from_token(token).context("--from")?),
    })
}

/// The position saved in `path`, if the file exists.
fn saved_position(path: &Path) -> Result<Option<Position>> {
    match std::fs::read_to_string(path) {
        Ok(text) => Ok(Some(Position::from_token(&text).with_context(|| {
            format!("reading the position file {}", path.display())
        })?)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading the position file {}", path.display())),
    }
}

/// Write then rename, so a watcher killed at any moment leaves the old or the new position,
/// never a torn one.
fn save_position(path: &Path, p: &Position) -> Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    let write = || -> io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(p.to_token().as_bytes())?;
        f.write_all(b"\n")?;
        std::fs::rename(&tmp, path)
    };
    write().with_context(|| format!("saving the position to {}", path.display()))
}

/// Seconds since the epoch as RFC 3339 UTC (`2026-03-02T13:34:40.245Z`).
fn rfc3339(t: SystemTime) -> String {
    let d = t.duration_since(UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs();
    let (days, rem) = (secs / 86400, secs % 86400);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60,
        d.subsec_millis()
    )
}

/// The field's keywords and values, in key order (empty optional values left out).
fn key_map(n: &Notice) -> Map<String, Value> {
    let mut m = Map::new();
    for (k, v) in n.element.key.combined().iter() {
        if !v.is_empty() {
            m.insert(k.to_string(), v.into());
        }
    }
    m
}

fn json_line(n: &Notice, position: &Position) -> String {
    let location = n.element.location.as_ref().map_or(
        Value::Null,
        |l| json!({"uri": l.uri, "offset": l.offset, "length": l.length}),
    );
    json!({
        "key": key_map(n),
        "location": location,
        "timestamp": n.element.timestamp,
        "position": position.to_token(),
    })
    .to_string()
}

/// aviso's notification (`event`, `request`, `location`) wrapped as the CloudEvent its `post`
/// trigger sends. The id is the field's place in its stream: stable, so a consumer can drop a
/// repeat.
fn aviso_line(n: &Notice) -> String {
    let location = n
        .element
        .location
        .as_ref()
        .map_or(Value::Null, |l| Value::from(l.uri.clone()));
    let c = &n.cursor;
    json!({
        "specversion": "1.0",
        "id": format!("{}@{}:{}:{}", n.stream, c.epoch, c.at, c.within),
        "source": "fieldstore",
        "type": "aviso",
        "datacontenttype": "application/json",
        "time": rfc3339(SystemTime::now()),
        "data": {
            "event": "mars",
            "request": key_map(n),
            "location": location,
        },
    })
    .to_string()
}

fn plain_line(n: &Notice, location: bool) -> String {
    let mut line = n.element.key.porcelain();
    if location {
        if let Some(l) = &n.element.location {
            line.push_str(&format!(" {} {} {}", l.uri, l.offset, l.length));
        }
    }
    line
}

/// Runs `--exec` for one field; `Err` only when it could not be started or failed.
fn run_exec(cmd: &str, line: &str, n: &Notice, position: &Position) -> Result<()> {
    let mut c = Command::new("/bin/sh");
    c.arg("-c").arg(cmd).stdin(Stdio::piped());
    c.env("FIELDSTORE_KEY", n.element.key.porcelain());
    c.env("FIELDSTORE_POSITION", position.to_token());
    for (k, v) in n.element.key.combined().iter() {
        if !v.is_empty() {
            let name: String = k
                .chars()
                .map(|ch| {
                    if ch.is_ascii_alphanumeric() {
                        ch.to_ascii_uppercase()
                    } else {
                        '_'
                    }
                })
                .collect();
            c.env(format!("FIELDSTORE_{name}"), v);
        }
    }
    if let Some(l) = &n.element.location {
        c.env("FIELDSTORE_URI", &l.uri);
        c.env("FIELDSTORE_OFFSET", l.offset.to_string());
        c.env("FIELDSTORE_LENGTH", l.length.to_string());
    }
    let mut child = c
        .spawn()
        .with_context(|| format!("cannot run --exec {cmd:?}"))?;
    if let Some(mut stdin) = child.stdin.take() {
        // A command that does not read its input is not a failure.
        let _ = stdin.write_all(line.as_bytes());
        let _ = stdin.write_all(b"\n");
    }
    let status = child
        .wait()
        .with_context(|| format!("waiting for --exec {cmd:?}"))?;
    if !status.success() {
        bail!(
            "--exec {cmd:?} failed ({status}) for {}",
            n.element.key.porcelain()
        );
    }
    Ok(())
}

pub fn run(a: WatchArgs, session: &Session) -> Result<()> {
    let fdb = session.fdb()?;
    let request = one_request(a.request.as_deref(), a.all)?;
    let idle = a.timeout.as_deref().map(parse_duration).transpose()?;
    let saved = match &a.position_file {
        Some(p) => saved_position(p)?,
        None => None,
    };
    let start = match saved {
        Some(p) => Start::At(p),
        None => start_from(&a.from)?,
    };
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [
        signal_hook::consts::SIGINT,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGHUP,
    ] {
        signal_hook::flag::register(sig, Arc::clone(&stop))
            .context("installing signal handlers")?;
    }
    let mut sub = fdb
        .subscribe(&request, &start)
        .with_context(|| format!("subscribing to {request}"))?;
    // Saved at once: a watcher stopped before its first field resumes from here, not from a
    // later `now` that would skip what was flushed in between.
    if let Some(p) = &a.position_file {
        save_position(p, &sub.position())?;
    }
    let mut seen = 0u64;
    let mut last = Instant::now();
    let mut exec_failures = 0u64;
    while a.count.is_none_or(|c| seen < c) && !stop.load(Ordering::Relaxed) {
        let slice = match idle {
            Some(i) => {
                let left = i.saturating_sub(last.elapsed());
                if left.is_zero() {
                    break;
                }
                left.min(SLICE)
            }
            None => SLICE,
        };
        let Some(n) = sub.next_within(slice)? else {
            continue;
        };
        let position = sub.position();
        let line = if a.aviso {
            aviso_line(&n)
        } else if a.json {
            json_line(&n, &position)
        } else {
            plain_line(&n, a.location)
        };
        match &a.exec {
            Some(cmd) => {
                if let Err(e) = run_exec(cmd, &line, &n, &position) {
                    if a.exec_fail_stop {
                        return Err(e.context("stopping (--exec-fail-stop); the position file still names this field as not seen"));
                    }
                    exec_failures += 1;
                    eprintln!("fieldstore: warning: {e:#}");
                }
            }
            None => {
                // Flushed per field: a pipe's reader sees each line at once.
                let mut out = io::stdout().lock();
                writeln!(out, "{line}")?;
                out.flush()?;
            }
        }
        if let Some(p) = &a.position_file {
            save_position(p, &position)?;
        }
        seen += 1;
        last = Instant::now();
    }
    if exec_failures > 0 {
        eprintln!("fieldstore: {exec_failures} of {seen} --exec runs failed (above)");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units_and_refuse_junk() {
        assert_eq!(parse_duration("30s").unwrap(), Duration::from_secs(30));
        assert_eq!(parse_duration("5m").unwrap(), Duration::from_secs(300));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5").unwrap(), Duration::from_millis(1500));
        for bad in ["", "s", "5x", "-1s", "1e400"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn timestamps_are_rfc3339_utc() {
        let t = UNIX_EPOCH + Duration::from_millis(1_583_156_080_245);
        assert_eq!(rfc3339(t), "2020-03-02T13:34:40.245Z");
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(rfc3339(leap), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn starts_parse_and_a_bad_token_says_what_to_give() {
        assert_eq!(start_from("now").unwrap(), Start::Now);
        assert_eq!(start_from("beginning").unwrap(), Start::Beginning);
        assert!(matches!(
            start_from("{\"streams\":{}}").unwrap(),
            Start::At(_)
        ));
        let e = format!("{:#}", start_from("later").unwrap_err());
        assert!(e.contains("not a subscription position"), "{e}");
    }

    #[test]
    fn positions_are_saved_whole_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("pos");
        assert_eq!(saved_position(&f).unwrap(), None);
        let mut p = Position::default();
        p.streams.insert(
            "class=od".into(),
            fieldstore::api::Cursor {
                epoch: "e".into(),
                at: 42,
                within: 1,
            },
        );
        save_position(&f, &p).unwrap();
        assert_eq!(saved_position(&f).unwrap(), Some(p));
        assert!(!dir.path().join("pos.tmp").exists());
        std::fs::write(&f, "junk").unwrap();
        assert!(saved_position(&f).is_err());
    }
}
