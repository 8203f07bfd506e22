//! FDB5 5.10's tool output, text for text, for the `fdb-*` names: operators' scripts parse it
//! (the request block before a listing, `,length=` after each key, the wipe report's sections,
//! the stats summary's `label : 1,234 (1.2 Kbytes)` lines). Only the formatting lives here; the
//! figures come from the API's elements.

use std::fmt::Write as _;

use fieldstore::api::{DumpElement, DumpRecord, Location, PurgeElement, StatsElement};
use fieldstore::model::request::Request;

/// How FDB5 prints the request a tool visits: ` -- ALL --` for `--all`, else the verb and one
/// tab-indented `keyword=values` a line, ending in a blank line.
pub fn request_block(req: Option<&Request>) -> String {
    let Some(req) = req else {
        return " -- ALL --".into();
    };
    let mut s = format!("{},", req.verb().unwrap_or("retrieve"));
    let n = req.params().len();
    for (i, (k, v)) in req.iter().enumerate() {
        let _ = write!(s, "\n\t{k}={}", v.join("/"));
        if i + 1 < n {
            s.push(',');
        }
    }
    s.push_str("\n\n");
    s
}

/// `Listing for request` and the like, with the request; what FDB5 prints before visiting it.
pub fn header(title: &str, req: Option<&Request>) -> String {
    format!("{title}\n{}\n", request_block(req))
}

/// FDB5's `TocFieldLocation[...]` for a field's location.
pub fn location(l: &Location) -> String {
    let scheme = l.uri.split_once("://").map_or("file", |(s, _)| s);
    format!(
        "TocFieldLocation[uri=URI[scheme={scheme},name={}],offset={},length={},remapKey={{}}]",
        path_of(&l.uri),
        l.offset,
        l.length
    )
}

/// A URI or path as FDB5 prints a file: the path alone for `file://`, absolute (FDB5 resolves a
/// root given as `./localroot` against the working directory; fieldstore keeps it as written).
pub fn path_of(uri: &str) -> String {
    let p = uri.strip_prefix("file://").unwrap_or(uri);
    if p.starts_with('/') || p.contains("://") {
        return p.to_string();
    }
    match std::env::current_dir() {
        Ok(cwd) => cwd
            .join(p.strip_prefix("./").unwrap_or(p))
            .display()
            .to_string(),
        Err(_) => p.to_string(),
    }
}

/// A count as eckit prints it: `1,234,567`.
pub fn big_num(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// A size as eckit's `Bytes` prints it: six significant digits of the largest unit not above it,
/// singular when that is exactly 1 (`1 Kbyte`).
pub fn human_bytes(n: u64) -> String {
    eckit_bytes(n as f64, false)
}

/// eckit's `Bytes`, as a size or (`rate`) as `... per second`.
fn eckit_bytes(x: f64, rate: bool) -> String {
    const UNITS: [&str; 9] = ["", "K", "M", "G", "T", "P", "E", "Z", "Y"];
    let sign = if x < 0.0 { "-" } else { "" };
    let mut x = x.abs();
    let mut unit = 0;
    while x >= 1024.0 && unit + 1 < UNITS.len() {
        x /= 1024.0;
        unit += 1;
    }
    format!(
        "{sign}{} {}byte{}{}",
        cpp_double(x),
        UNITS[unit],
        if x == 1.0 { "" } else { "s" },
        if rate { " per second" } else { "" }
    )
}

/// eckit's rate, `Bytes(bytes, seconds)`: 0 for no bytes, whatever the time.
fn eckit_rate(bytes: u64, secs: f64) -> String {
    let rate = if bytes == 0 {
        0.0
    } else {
        bytes as f64 / secs.max(1e-6)
    };
    eckit_bytes(rate, true)
}

/// A double as a C++ stream prints it by default (`%g`, six significant digits): trailing
/// zeros dropped, exponent form below 1e-4 and from 1e6 on (`6.4e-05`).
pub fn cpp_double(x: f64) -> String {
    if x == 0.0 || !x.is_finite() {
        return if x.is_nan() {
            "nan".into()
        } else if x.is_infinite() {
            if x > 0.0 { "inf" } else { "-inf" }.into()
        } else {
            "0".into()
        };
    }
    // The exponent after rounding to six significant digits, as %g decides on it.
    let sci = format!("{x:.5e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: &str| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s.to_string()
        }
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{}e{sign}{:02}", trim(mantissa), exp.abs());
    }
    let decimals = (5 - exp).max(0) as usize;
    trim(&format!("{x:.decimals$}"))
}

/// A duration as eckit's `Seconds` prints it: under a second `0.082738 second`, else whole
/// units (`1 second`, `2 minutes 5 seconds`), the fraction dropped.
pub fn eckit_seconds(t: f64) -> String {
    const PERIODS: [(i64, &str); 5] = [
        (7 * 24 * 3600, "week"),
        (24 * 3600, "day"),
        (3600, "hour"),
        (60, "minute"),
        (1, "second"),
    ];
    let mut n = t as i64;
    let mut parts = Vec::new();
    for (length, name) in PERIODS {
        let m = n / length;
        if m != 0 {
            parts.push(format!("{m} {name}{}", if m > 1 { "s" } else { "" }));
            n %= length;
        }
    }
    if parts.is_empty() {
        format!("{} second", cpp_double(t))
    } else {
        parts.join(" ")
    }
}

/// A time as eckit's timers take it: to the microsecond (`gettimeofday`, `clock`).
pub fn micros(d: std::time::Duration) -> f64 {
    d.as_micros() as f64 / 1e6
}

/// The CPU time this process has used so far, as eckit's timers take it (`clock()`).
pub fn cpu_time() -> std::time::Duration {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec for the call to fill.
    if unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) } != 0 {
        return std::time::Duration::ZERO;
    }
    std::time::Duration::new(
        t.tv_sec.max(0) as u64,
        t.tv_nsec.clamp(0, 999_999_999) as u32,
    )
}

/// A path as eckit's `PathName` prints it: `//` and `.` components dropped, `dir/..` folded
/// (a leading `./` and leading `..` kept), a trailing `/` kept.
pub fn eckit_path(path: &str) -> String {
    if path.is_empty() {
        return String::new();
    }
    let tokens: Vec<&str> = path.split('/').collect();
    let absolute = tokens[0].is_empty();
    let mut kept: Vec<&str> = vec![tokens[0]];
    for &t in &tokens[1..] {
        match t {
            "" | "." => {}
            ".." => match kept.last() {
                Some(&"..") => kept.push(t),
                // `/..` is `/`.
                Some(&"") => {}
                Some(&".") => {
                    kept.pop();
                    kept.push(t);
                }
                Some(_) => {
                    kept.pop();
                }
                None if !absolute => kept.push(t),
                None => {}
            },
            _ => kept.push(t),
        }
    }
    let mut out = if kept.len() == 1 && kept[0].is_empty() {
        "/".to_string()
    } else {
        kept.join("/")
    };
    if path.ends_with('/') && !out.ends_with('/') {
        out.push('/');
    }
    out
}

/// `fdb-write`'s line after each file: `FDB archive 8 messages, size 3.09375 Kbytes, in 0.12
/// second (25.17 Kbytes per second)`.
pub fn archived(messages: u64, bytes: u64, secs: f64) -> String {
    format!(
        "FDB archive {} message{}, size {}, in {} ({})",
        big_num(messages),
        if messages > 1 { "s" } else { "" },
        human_bytes(bytes),
        eckit_seconds(secs),
        eckit_rate(bytes, secs)
    )
}

/// What an eckit `Timer` prints when it ends: `fdb::service::archive: 0.0827 second elapsed,
/// 0.0602 second cpu`.
pub fn timer(name: &str, elapsed: f64, cpu: f64) -> String {
    format!(
        "{name}: {} elapsed, {} cpu",
        eckit_seconds(elapsed),
        eckit_seconds(cpu)
    )
}

/// eckit's `DataHandle::saveInto` report, as `fdb-read` prints it after the fields are written:
/// the bytes over the time spent reading them, and over the time spent writing them.
pub fn transfer_rates(bytes: u64, read_secs: f64, write_secs: f64) -> [String; 2] {
    [
        format!("Read  rate: {}", eckit_rate(bytes, read_secs)),
        format!("Write rate: {}", eckit_rate(bytes, write_secs)),
    ]
}

/// `label<padding>: value` as eckit's statistics reports align them.
fn line(out: &mut String, indent: &str, label: &str, value: &str) {
    let _ = writeln!(out, "{indent}{label:<32}: {value}");
}

/// A count line; FDB5 leaves zero counts out.
fn count(out: &mut String, indent: &str, label: &str, n: u64) {
    if n != 0 {
        line(out, indent, label, &big_num(n));
    }
}

/// A size line; FDB5 leaves zero sizes out.
fn bytes(out: &mut String, indent: &str, label: &str, n: u64) {
    if n != 0 {
        line(
            out,
            indent,
            label,
            &format!("{} ({})", big_num(n), human_bytes(n)),
        );
    }
}

/// The sizes of a database's own files, which the API's figures do not carry: read from its
/// directory when it is one (the toc catalogue); zero otherwise.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct DbFiles {
    pub toc: u64,
    pub schema: u64,
    pub indexes: u64,
}

impl DbFiles {
    pub fn of(location: &str) -> DbFiles {
        let mut f = DbFiles::default();
        let Ok(dir) = std::fs::read_dir(path_of(location)) else {
            return f;
        };
        for e in dir.flatten() {
            let size = e.metadata().map(|m| m.len()).unwrap_or(0);
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name == "toc" {
                f.toc += size;
            } else if name == "schema" {
                f.schema += size;
            } else if name.ends_with(".idx") || name.ends_with(".index") {
                f.indexes += size;
            }
        }
        f
    }
}

/// One database's (or the sum's) figures in FDB5's index-then-database report order.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Figures {
    pub databases: u64,
    pub fields: u64,
    pub field_bytes: u64,
    pub masked: u64,
    pub masked_bytes: u64,
    pub journal_records: u64,
    pub data_files: u64,
    pub data_bytes: u64,
    pub index_files: u64,
    pub files: DbFiles,
}

impl Figures {
    pub fn of(s: &StatsElement, files: DbFiles) -> Figures {
        Figures {
            databases: 1,
            // FDB5 counts every entry, masked ones too, and says how many of them are reachable.
            fields: s.fields + s.masked,
            field_bytes: s.field_bytes + s.masked_bytes,
            masked: s.masked,
            masked_bytes: s.masked_bytes,
            journal_records: s.journal_records,
            data_files: s.data_files,
            data_bytes: s.data_bytes,
            index_files: s.index_files,
            files,
        }
    }

    pub fn add(&mut self, o: &Figures) {
        self.databases += o.databases;
        self.fields += o.fields;
        self.field_bytes += o.field_bytes;
        self.masked += o.masked;
        self.masked_bytes += o.masked_bytes;
        self.journal_records += o.journal_records;
        self.data_files += o.data_files;
        self.data_bytes += o.data_bytes;
        self.index_files += o.index_files;
        self.files.toc += o.files.toc;
        self.files.schema += o.files.schema;
        self.files.indexes += o.files.indexes;
    }

    /// The index statistics then the database statistics, as `fdb-stats` prints them.
    pub fn report(&self, indent: &str) -> String {
        let mut o = String::new();
        self.index_report(&mut o, indent);
        let f = &self.files;
        count(&mut o, indent, "Databases", self.databases);
        count(&mut o, indent, "TOC records", self.journal_records);
        bytes(&mut o, indent, "Size of TOC files", f.toc);
        bytes(&mut o, indent, "Size of schemas files", f.schema);
        count(&mut o, indent, "TOC records", self.journal_records);
        count(&mut o, indent, "Owned data files", self.data_files);
        bytes(&mut o, indent, "Size of owned data files", self.data_bytes);
        count(&mut o, indent, "Index files", self.index_files);
        bytes(&mut o, indent, "Size of index files", f.indexes);
        bytes(&mut o, indent, "Size of TOC files", f.toc);
        let total = f.toc + f.schema + f.indexes + self.data_bytes;
        bytes(&mut o, indent, "Total owned size", total);
        bytes(&mut o, indent, "Total size", total);
        o
    }

    pub fn index_report(&self, o: &mut String, indent: &str) {
        count(o, indent, "Fields", self.fields);
        bytes(o, indent, "Size of fields", self.field_bytes);
        count(o, indent, "Duplicated fields", self.masked);
        bytes(o, indent, "Size of duplicates", self.masked_bytes);
        count(o, indent, "Reacheable fields", self.fields - self.masked);
        bytes(
            o,
            indent,
            "Reachable size",
            self.field_bytes - self.masked_bytes,
        );
    }
}

/// `fdb-stats`: with `details`, each database's report; then the summary (nothing when no
/// database was visited: the caller reports that as FDB5 does, as an error).
pub fn stats(dbs: &[Figures], details: bool) -> String {
    let mut o = String::new();
    let mut total = Figures::default();
    for db in dbs {
        if details {
            let _ = write!(o, "\n{}\n", db.report(""));
        }
        total.add(db);
    }
    if !dbs.is_empty() {
        o.push_str("\nSummary:\n========\n\n");
        count(&mut o, "", "Number of databases", dbs.len() as u64);
        o.push_str(&total.report(""));
        o.push('\n');
    }
    o
}

/// The owner FDB5 names in a wipe report: the user owning the database directory.
pub fn owner(location: &str) -> String {
    use std::os::unix::fs::MetadataExt as _;
    let Ok(meta) = std::fs::metadata(path_of(location)) else {
        return String::new();
    };
    let uid = meta.uid();
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    passwd
        .lines()
        .filter_map(|l| {
            let mut f = l.split(':');
            let name = f.next()?;
            let id: u32 = f.nth(1)?.parse().ok()?;
            (id == uid).then(|| name.to_string())
        })
        .next()
        .unwrap_or_else(|| uid.to_string())
}

/// The files of a wiped database by FDB5's categories, each in the order FDB5 deletes them.
#[derive(Debug, Default, PartialEq)]
pub struct WipeFiles {
    pub toc: Vec<String>,
    pub control: Vec<String>,
    pub indexes: Vec<String>,
    pub data: Vec<String>,
    pub directory: String,
}

impl WipeFiles {
    pub fn sort(location: &str, removed: &[String]) -> WipeFiles {
        let dir = path_of(location).trim_end_matches('/').to_string();
        let mut w = WipeFiles {
            directory: dir.clone(),
            ..WipeFiles::default()
        };
        for f in removed {
            let p = path_of(f);
            if p == dir {
                continue;
            }
            let name = p.rsplit('/').next().unwrap_or(&p);
            if name == "toc" || name.starts_with("toc.") {
                w.toc.push(p);
            } else if name == "schema" || name.ends_with(".lock") || name.ends_with(".flock") {
                w.control.push(p);
            } else if name.ends_with(".idx") || name.ends_with(".index") {
                w.indexes.push(p);
            } else {
                w.data.push(p);
            }
        }
        w
    }

    /// In deletion order: data, indexes, control files, journal, then the directory.
    pub fn in_order(&self) -> Vec<&str> {
        let ctl = |f: &&String| f.ends_with("/schema");
        self.data
            .iter()
            .chain(&self.indexes)
            .chain(self.control.iter().filter(ctl))
            .chain(&self.toc)
            .chain(self.control.iter().filter(|f| !ctl(f)))
            .map(String::as_str)
            .chain(std::iter::once(self.directory.as_str()))
            .collect()
    }

    /// The report FDB5 prints per database before (or instead of) deleting.
    pub fn report(&self, owner: &str) -> String {
        let mut o = format!("FDB owner: {owner}\n\n");
        let section = |o: &mut String, title: &str, files: &[String]| {
            let _ = writeln!(o, "{title}");
            if files.is_empty() {
                o.push_str(" - NONE -\n");
            }
            for f in files {
                let _ = writeln!(o, "    {f}");
            }
            o.push('\n');
        };
        section(&mut o, "Toc files to delete:", &self.toc);
        section(&mut o, "Control files to delete:", &self.control);
        section(&mut o, "Index files to delete: ", &self.indexes);
        section(&mut o, "Data files to delete: ", &self.data);
        o.push_str("Protected files (explicitly untouched):\n - NONE - \n\n");
        o
    }

    /// What FDB5 prints as it deletes, one line a file.
    pub fn unlinking(&self) -> String {
        let mut o = String::new();
        for f in self.in_order() {
            if f == self.directory {
                let _ = writeln!(o, "rmdir: {f}");
            } else {
                let _ = writeln!(o, "Unlinking: {f}");
            }
        }
        o
    }
}

/// FDB5's closing line of a dry run.
pub const RERUN: &str = "\nRerun command with --doit flag to delete unused files\n\n";

/// What a database held before a purge, for its report: its figures and, per data file (by
/// path, sorted), how many of its fields are reachable.
#[derive(Debug, Default)]
pub struct BeforePurge {
    pub figures: Option<Figures>,
    pub reachable_per_data_file: Vec<(String, u64)>,
}

/// A purge's report for one database in FDB5's sections. fieldstore's indexes are not kept
/// apart in its figures, so the "Index Report" is the database's as one block, and the
/// reachable fields are given per data file only.
pub fn purge_report(p: &PurgeElement, before: &BeforePurge) -> String {
    let mut o = String::from("\nIndex Report:\n");
    let indent = "          ";
    match &before.figures {
        Some(f) => f.index_report(&mut o, indent),
        None => count(&mut o, indent, "Duplicated fields", p.masked_fields),
    }
    o.push_str("\nNumber of reachable fields per data file:\n");
    if before.reachable_per_data_file.is_empty() {
        o.push_str("    - NONE -\n");
    }
    for (f, n) in &before.reachable_per_data_file {
        let _ = writeln!(o, "    {f}: {n}");
    }
    o.push_str("\nUnreferenced owned data files:\n");
    list(&mut o, p.objects.iter().map(|u| path_of(u)));
    o.push_str("\nUnreferenced adopted data files:\n    - NONE -\n");
    o.push_str("\nIndex files to be deleted:\n");
    list(&mut o, p.indexes.iter().map(|u| path_of(u)));
    o.push('\n');
    if p.doit {
        for f in p.objects.iter().chain(&p.indexes) {
            let _ = writeln!(o, "Unlinking: {}", path_of(f));
        }
    }
    o
}

fn list(o: &mut String, files: impl Iterator<Item = String>) {
    let mut any = false;
    for f in files {
        any = true;
        let _ = writeln!(o, "    {f}");
    }
    if !any {
        o.push_str("    - NONE -\n");
    }
}

/// `fdb-dump`: one entry per journal record, FDB5's record names; `simple` puts each on one line.
pub fn dump(db: &DumpElement, owner: &str, simple: bool) -> String {
    let mut o = String::new();
    for r in &db.records {
        let (name, when, details): (&str, u64, Vec<String>) = match r {
            DumpRecord::Init { db, created, .. } => (
                "TOC_INIT ",
                *created,
                vec![format!("Key: {db}, sub-toc: no")],
            ),
            DumpRecord::Index {
                file,
                index_key,
                entries,
                timestamp,
                ..
            } => (
                "TOC_INDEX",
                *timestamp,
                vec![
                    format!("Path: {file}, offset: 0, type: fieldstore"),
                    format!("Key: {index_key}"),
                    format!("Entries: {entries}"),
                ],
            ),
            DumpRecord::Clear { files } => (
                "TOC_CLEAR",
                0,
                files
                    .iter()
                    .map(|f| format!("Path: {f}, offset: 0"))
                    .collect(),
            ),
            other => ("TOC_OTHER", 0, vec![other.to_string()]),
        };
        let head = format!("{name} {}, uid: {owner}", timestamp(when));
        if simple {
            // FDB5's one-line form leaves out what follows the key (its files and axes).
            let short: Vec<&str> = details
                .iter()
                .map(String::as_str)
                .filter(|d| !d.starts_with("Entries: "))
                .collect();
            let _ = writeln!(o, "{head}  {}", short.join("  "));
        } else {
            let _ = writeln!(o, "{head}");
            for d in details {
                let _ = writeln!(o, "  {d}");
            }
            o.push('\n');
        }
    }
    o
}

/// Seconds since the epoch as FDB5 stamps journal records (UTC), `2026-11-24 04:28:02.000000`.
pub fn timestamp(secs: u64) -> String {
    let days = (secs / 86400) as i64;
    let rem = secs % 86400;
    // Days to a civil date (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02}.000000",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use fieldstore::model::request::parse_request;

    #[test]
    fn request_blocks_are_fdb5s() {
        let r = parse_request("class=od,expver=0001").unwrap();
        assert_eq!(
            header("Listing for request", Some(&r)),
            "Listing for request\nretrieve,\n\tclass=od,\n\texpver=0001\n\n\n"
        );
        assert_eq!(
            header("Listing for request", None),
            "Listing for request\n -- ALL --\n"
        );
    }

    #[test]
    fn sizes_and_counts_read_as_eckits() {
        assert_eq!(big_num(3168), "3,168");
        assert_eq!(big_num(438954), "438,954");
        assert_eq!(big_num(308), "308");
        assert_eq!(human_bytes(3168), "3.09375 Kbytes");
        assert_eq!(human_bytes(2048), "2 Kbytes");
        assert_eq!(human_bytes(153275), "149.683 Kbytes");
        assert_eq!(human_bytes(16987), "16.5889 Kbytes");
        assert_eq!(human_bytes(308), "308 bytes");
        assert_eq!(human_bytes(438954), "428.666 Kbytes");
        assert_eq!(human_bytes(393216), "384 Kbytes");
        assert_eq!(
            archived(8, 3168, 0.122909),
            "FDB archive 8 messages, size 3.09375 Kbytes, in 0.122909 second (25.1711 Kbytes per second)"
        );
        assert!(archived(1, 308, 0.5).starts_with("FDB archive 1 message, size 308 bytes"));
        // The forms FDB5 5.10.8 prints (eckit's Plural, Bytes and Seconds); its rate comes from
        // a second look at the timer, a few microseconds later than the time shown.
        assert_eq!(
            archived(2, 392, 0.082696),
            "FDB archive 2 messages, size 392 bytes, in 0.082696 second (4.62915 Kbytes per second)"
        );
        assert_eq!(
            archived(1, 196, 0.001094),
            "FDB archive 1 message, size 196 bytes, in 0.001094 second (174.96 Kbytes per second)"
        );
        assert_eq!(
            archived(0, 0, 0.00002),
            "FDB archive 0 message, size 0 bytes, in 2e-05 second (0 bytes per second)"
        );
        assert_eq!(
            archived(1234, 1 << 20, 65.5),
            "FDB archive 1,234 messages, size 1 Mbyte, in 1 minute 5 seconds (15.6336 Kbytes per second)"
        );
        assert_eq!(human_bytes(1024), "1 Kbyte");
        assert_eq!(human_bytes(1), "1 byte");
        assert_eq!(
            timer("Save into", 0.000064, 0.000063),
            "Save into: 6.4e-05 second elapsed, 6.3e-05 second cpu"
        );
        assert_eq!(
            timer("fdb::service::archive", 0.082738, 0.060265),
            "fdb::service::archive: 0.082738 second elapsed, 0.060265 second cpu"
        );
        assert_eq!(
            transfer_rates(392, 0.000011, 0.000015),
            [
                "Read  rate: 33.9855 Mbytes per second".to_string(),
                "Write rate: 24.9227 Mbytes per second".to_string()
            ]
        );
        assert_eq!(
            transfer_rates(0, 0.0, 0.0),
            [
                "Read  rate: 0 bytes per second".to_string(),
                "Write rate: 0 bytes per second".to_string()
            ]
        );
        for (x, s) in [
            (0.0001, "0.0001"),
            (0.00001234567, "1.23457e-05"),
            (123456.4, "123456"),
            (1234567.0, "1.23457e+06"),
            (999999.6, "1e+06"),
            (4.0, "4"),
            (2.5, "2.5"),
        ] {
            assert_eq!(cpp_double(x), s, "{x}");
        }
        assert_eq!(eckit_seconds(1.5), "1 second");
        for (given, shown) in [
            ("in.grib", "in.grib"),
            ("./x.grib", "./x.grib"),
            ("../f5//x.grib", "../f5/x.grib"),
            ("/tmp/f5/../f5/x.grib", "/tmp/f5/x.grib"),
            ("a/./b/", "a/b/"),
            ("/..", "/"),
            ("../../a", "../../a"),
            ("a/../../b", "../b"),
        ] {
            assert_eq!(eckit_path(given), shown, "{given}");
        }
        assert_eq!(eckit_seconds(7200.0), "2 hours");
        assert_eq!(eckit_seconds(3661.0), "1 hour 1 minute 1 second");
    }

    #[test]
    fn stats_summary_has_fdb5s_lines_and_skips_zeros() {
        let db = Figures {
            databases: 1,
            fields: 17,
            field_bytes: 6644,
            masked: 8,
            masked_bytes: 3168,
            journal_records: 5,
            data_files: 3,
            data_bytes: 6644,
            index_files: 3,
            files: DbFiles {
                toc: 5120,
                schema: 33974,
                indexes: 393216,
            },
        };
        let s = stats(&[db], false);
        assert!(s.starts_with("\nSummary:\n========\n\nNumber of databases             : 1\nFields                          : 17\nSize of fields                  : 6,644 (6.48828 Kbytes)\nDuplicated fields               : 8\n"), "{s}");
        assert!(s.ends_with("Total size                      : 438,954 (428.666 Kbytes)\n\n"));
        let clean = Figures {
            masked: 0,
            masked_bytes: 0,
            ..db
        };
        assert!(!stats(&[clean], true).contains("Duplicated"));
        assert_eq!(stats(&[], false), "");
    }

    #[test]
    fn wipe_files_sort_into_fdb5s_sections_and_order() {
        let w = WipeFiles::sort(
            "/r/db",
            &[
                "/r/db/a.idx".into(),
                "/r/db/schema".into(),
                "/r/db/toc".into(),
                "file:///r/db/x.data".into(),
            ],
        );
        assert_eq!(
            w.in_order(),
            [
                "/r/db/x.data",
                "/r/db/a.idx",
                "/r/db/schema",
                "/r/db/toc",
                "/r/db"
            ]
        );
        let r = w.report("root");
        assert!(r.starts_with("FDB owner: root\n\nToc files to delete:\n    /r/db/toc\n\nControl files to delete:\n    /r/db/schema\n\nIndex files to delete: \n    /r/db/a.idx\n\n"), "{r}");
        assert!(r.ends_with("Protected files (explicitly untouched):\n - NONE - \n\n"));
        assert!(w
            .unlinking()
            .ends_with("Unlinking: /r/db/toc\nrmdir: /r/db\n"));
    }

    #[test]
    fn locations_and_timestamps() {
        let l = Location {
            uri: "file:///r/db/x.data".into(),
            offset: 396,
            length: 396,
        };
        assert_eq!(
            location(&l),
            "TocFieldLocation[uri=URI[scheme=file,name=/r/db/x.data],offset=396,length=396,remapKey={}]"
        );
        assert_eq!(timestamp(0), "1970-01-01 00:00:00.000000");
        assert_eq!(timestamp(1795494544), "2026-11-24 04:29:04.000000");
    }
}
