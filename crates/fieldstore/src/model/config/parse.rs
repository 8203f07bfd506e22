//! YAML text → [`FdbConfig`]. The YAML is read into a generic value first and walked by hand so
//! every error can name its path; serde derive with flatten/untagged would lose it.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

use super::env::{process_env, Env};
use super::{
    Actions, AdoptS3Config, ConfigError, DbFormat, DistHash, DistLane, FdbConfig, LocalConfig,
    MemoryConfig, RemoteTls, Root, S3Config, SelectLane, Space, SpacesSource, WhenFull, HANDLERS,
    TYPES, UNSUPPORTED_HANDLERS,
};

/// Parses config text using the process environment; relative paths are taken as they are.
pub fn from_yaml_str(text: &str, origin: &str) -> Result<FdbConfig, ConfigError> {
    from_yaml_str_with(text, origin, None, &process_env)
}

/// Reads a config file using the process environment.
pub fn from_file(path: &Path) -> Result<FdbConfig, ConfigError> {
    from_file_with(path, &process_env)
}

/// Parses config text. `base` resolves relative paths (the config file's directory); `env` is
/// consulted for `FDB_HOME`, `FDB5_HOME`, `HOME` and `FDB_SCHEMA_FILE`.
pub fn from_yaml_str_with(
    text: &str,
    origin: &str,
    base: Option<&Path>,
    env: Env,
) -> Result<FdbConfig, ConfigError> {
    let mut options = serde_saphyr::Options::default();
    // `permissions: 0644` must stay octal text, not become the decimal 644.
    options.leading_zero_numbers_as_strings = true;
    options.with_snippet = false;
    // `name: n` or `id: no` must stay text; [`Walk::boolean`] still reads yes/no/on/off.
    options.strict_booleans = true;
    let value: Value = serde_saphyr::from_str_with_options(text, options).map_err(|e| {
        ConfigError {
            origin: origin.to_string(),
            path: String::new(),
            // The library's advice is for programmers, not for whoever edits the config.
            message: format!("invalid YAML: {e}")
                .replace(", set DuplicateKeyPolicy in Options if acceptable", ""),
        }
    })?;
    let walk = Walk { origin, base, env };
    let mut config = walk.fdb(&value, "", &[])?;
    walk.default_schemas(&mut config);
    Ok(config)
}

/// Reads a config file; relative paths inside it are relative to its directory.
pub fn from_file_with(path: &Path, env: Env) -> Result<FdbConfig, ConfigError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        origin: origin.clone(),
        path: String::new(),
        message: format!("cannot read: {e}"),
    })?;
    let mut config = from_yaml_str_with(&text, &origin, path.parent(), env)?;
    let mut index = 0;
    for_each_local(&mut config, &mut |l| {
        l.spaces_source = Some(SpacesSource {
            file: path.to_path_buf(),
            local_index: index,
        });
        index += 1;
    });
    Ok(config)
}

/// The spaces of the `local_index`-th local config (depth first) of a config file, read again.
pub fn spaces_from_file(source: &SpacesSource, env: Env) -> Result<Vec<Space>, ConfigError> {
    let mut config = from_file_with(&source.file, env)?;
    let mut found = None;
    let mut index = 0;
    for_each_local(&mut config, &mut |l| {
        if index == source.local_index {
            found = Some(std::mem::take(&mut l.spaces));
        }
        index += 1;
    });
    found.ok_or_else(|| ConfigError {
        origin: source.file.display().to_string(),
        path: String::new(),
        message: format!(
            "no longer has local config number {} (its frontends changed)",
            source.local_index + 1
        ),
    })
}

/// `30d`, `2w`, `1y` (365 days) or a plain number of days.
pub fn parse_days(text: &str) -> Option<u32> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let factor = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "d" | "day" | "days" => 1,
        "w" | "week" | "weeks" => 7,
        "y" | "year" | "years" => 365,
        _ => return None,
    };
    num.parse::<u32>().ok()?.checked_mul(factor)
}

/// `90%` or `90`: a percentage from 1 to 100.
fn parse_percent(text: &str) -> Option<u8> {
    let t = text.trim();
    let n: u8 = t.strip_suffix('%').unwrap_or(t).trim().parse().ok()?;
    (1..=100).contains(&n).then_some(n)
}

/// Splits a `select`/`excludes` expression (`class=od,stream=oper/enfo`) into keyword and value
/// regexes, checking each regex compiles.
pub fn parse_selection(text: &str) -> Result<Vec<(String, Vec<String>)>, String> {
    let mut out = Vec::new();
    for item in text.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(format!(
                "empty item in '{text}' (expected keyword=regex,keyword=regex)"
            ));
        }
        let (k, v) = item
            .split_once('=')
            .ok_or_else(|| format!("'{item}' is not keyword=regex"))?;
        let k = k.trim();
        if k.is_empty() || !k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            return Err(format!("'{k}' in '{item}' is not a MARS keyword"));
        }
        let values: Vec<String> = v.split('/').map(|s| s.trim().to_string()).collect();
        for r in &values {
            regex::Regex::new(r)
                .map_err(|e| format!("invalid regular expression '{r}' for {k}: {e}"))?;
        }
        out.push((k.to_ascii_lowercase(), values));
    }
    Ok(out)
}

struct Walk<'a> {
    origin: &'a str,
    base: Option<&'a Path>,
    env: Env<'a>,
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// A YAML value as eckit prints a configuration: `{k => v , k => v}`, lists as `(a , b)`.
fn eckit_print(v: &Value) -> String {
    match v {
        Value::Null => String::new(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        Value::String(s) => s.clone(),
        Value::Array(a) => format!(
            "({})",
            a.iter().map(eckit_print).collect::<Vec<_>>().join(" , ")
        ),
        Value::Object(m) => format!(
            "{{{}}}",
            m.iter()
                .map(|(k, v)| format!("{k} => {}", eckit_print(v)))
                .collect::<Vec<_>>()
                .join(" , ")
        ),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "nothing",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
    }
}

/// Tells unnamed memory stores of separate parses apart (see [`MemoryConfig::instance`]).
fn next_instance() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// `2GiB`, `512 MB`, `1000000`: binary units (KiB, MiB, GiB, TiB; K, M, G, T too) and
/// decimal ones (KB, MB, GB, TB); `None` for zero, junk or overflow.
fn parse_size(text: &str) -> Option<u64> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let factor: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return None,
    };
    let bytes = if num.contains('.') {
        let f: f64 = num.parse().ok()?;
        let b = f * factor as f64;
        (b.is_finite() && b < u64::MAX as f64).then_some(b as u64)?
    } else {
        num.parse::<u64>().ok()?.checked_mul(factor)?
    };
    (bytes > 0).then_some(bytes)
}

/// `10m`, `600s`, `1h`, `2d`, `600` (seconds); `None` for junk or overflow. Zero is allowed: a
/// test store may delete garbage at once.
fn parse_duration(text: &str) -> Option<std::time::Duration> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let factor: u64 = match unit.trim() {
        "" | "s" => 1,
        "m" | "min" => 60,
        "h" => 3600,
        "d" => 86400,
        _ => return None,
    };
    Some(std::time::Duration::from_secs(
        num.parse::<u64>().ok()?.checked_mul(factor)?,
    ))
}

/// A wait: [`parse_duration`]'s forms plus milliseconds (`500ms`), which a producer's timeout
/// may well be.
fn parse_wait(text: &str) -> Option<std::time::Duration> {
    match text.trim().strip_suffix("ms") {
        Some(ms) if !ms.is_empty() && ms.trim().bytes().all(|b| b.is_ascii_digit()) => {
            Some(std::time::Duration::from_millis(ms.trim().parse().ok()?))
        }
        _ => parse_duration(text),
    }
}

/// Levenshtein distance, for "did you mean" hints.
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut diag = i;
        let mut left = i + 1;
        let mut next = Vec::with_capacity(row.len());
        next.push(left);
        for (j, cb) in b.iter().enumerate() {
            let up = row.get(j + 1).copied().unwrap_or(usize::MAX - 1);
            let cur = (diag + usize::from(ca != *cb)).min(left + 1).min(up + 1);
            next.push(cur);
            diag = up;
            left = cur;
        }
        row = next;
    }
    row.last().copied().unwrap_or(0)
}

/// The closest known word when it is close enough to be a plausible typo.
fn nearest<'k>(word: &str, known: &[&'k str]) -> Option<&'k str> {
    let lower = word.to_ascii_lowercase();
    known
        .iter()
        .map(|k| (distance(&lower, &k.to_ascii_lowercase()), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 3))
        .min()
        .map(|(_, k)| k)
}

fn hint(word: &str, known: &[&str]) -> String {
    nearest(word, known).map_or(String::new(), |n| format!(" (did you mean '{n}'?)"))
}

/// FDB5 keys fieldstore knowingly does not implement: refused with the reason rather than a
/// plain "unknown key", so users see it is a missing feature and not a typo.
const UNSUPPORTED: &[(&str, &str)] = &[
    (
        "catalogueRoots",
        "separate catalogue and store roots are not supported; use roots",
    ),
    (
        "storeRoots",
        "separate catalogue and store roots are not supported; use roots",
    ),
    (
        "marsDisks",
        "roots read from a marsDisks file are not supported; list them under roots",
    ),
    (
        "stores",
        "remote stores behind a local catalogue are not supported",
    ),
    (
        "fieldLocationEndpoints",
        "remote stores behind a local catalogue are not supported",
    ),
    ("daos", "the DAOS backend is not supported"),
    ("fam_roots", "the FAM backend is not supported"),
];

/// Frontend flags fieldstore honours on `type: local` only.
const FLAGS: &[&str] = &[
    "writable",
    "visitable",
    "list",
    "retrieve",
    "archive",
    "wipe",
];

impl Walk<'_> {
    fn err(&self, path: &str, message: impl Into<String>) -> ConfigError {
        ConfigError {
            origin: self.origin.to_string(),
            path: path.to_string(),
            message: message.into(),
        }
    }

    fn map<'v>(
        &self,
        v: &'v Value,
        path: &str,
        known: &[&str],
    ) -> Result<&'v Map<String, Value>, ConfigError> {
        let m = v
            .as_object()
            .ok_or_else(|| self.err(path, format!("expected a mapping, found {}", kind(v))))?;
        for k in m.keys() {
            if known.contains(&k.as_str()) {
                continue;
            }
            if let Some((_, why)) = UNSUPPORTED.iter().find(|(u, _)| u == k) {
                return Err(self.err(
                    path,
                    format!("'{k}' is an FDB5 setting fieldstore does not support: {why}"),
                ));
            }
            if FLAGS.contains(&k.as_str()) {
                return Err(self.err(
                    path,
                    format!(
                        "'{k}' is only supported on type local (put it on the local child configs)"
                    ),
                ));
            }
            return Err(self.err(path, format!("unknown key '{k}'{}", hint(k, known))));
        }
        Ok(m)
    }

    fn string(
        &self,
        m: &Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<Option<String>, ConfigError> {
        match m.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => Ok(Some(s.clone())),
            Some(Value::Number(n)) => Ok(Some(n.to_string())),
            Some(Value::Bool(b)) => Ok(Some(b.to_string())),
            Some(v) => Err(self.err(
                &join(path, key),
                format!("expected a string, found {}", kind(v)),
            )),
        }
    }

    fn boolean(
        &self,
        m: &Map<String, Value>,
        key: &str,
        path: &str,
        default: bool,
    ) -> Result<bool, ConfigError> {
        match m.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            // YAML 1.1 spellings, which FDB5's parser accepts.
            Some(Value::String(s))
                if matches!(s.to_ascii_lowercase().as_str(), "yes" | "y" | "true" | "on") =>
            {
                Ok(true)
            }
            Some(Value::String(s))
                if matches!(
                    s.to_ascii_lowercase().as_str(),
                    "no" | "n" | "false" | "off"
                ) =>
            {
                Ok(false)
            }
            Some(v) => Err(self.err(
                &join(path, key),
                format!("expected true or false, found {}", kind(v)),
            )),
        }
    }

    fn unsigned(
        &self,
        m: &Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<Option<u64>, ConfigError> {
        let p = join(path, key);
        match m.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Number(n)) => n
                .as_u64()
                .map(Some)
                .ok_or_else(|| self.err(&p, format!("expected a whole number >= 0, found {n}"))),
            Some(Value::String(s)) => s
                .trim()
                .parse()
                .map(Some)
                .map_err(|_| self.err(&p, format!("expected a whole number >= 0, found '{s}'"))),
            Some(v) => Err(self.err(&p, format!("expected a number, found {}", kind(v)))),
        }
    }

    fn list<'v>(
        &self,
        m: &'v Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<Option<&'v Vec<Value>>, ConfigError> {
        match m.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Array(a)) => Ok(Some(a)),
            Some(v) => Err(self.err(
                &join(path, key),
                format!("expected a list, found {}", kind(v)),
            )),
        }
    }

    /// A non-empty list of child configs.
    fn children<'v>(
        &self,
        m: &'v Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<&'v Vec<Value>, ConfigError> {
        match self.list(m, key, path)? {
            Some(l) if !l.is_empty() => Ok(l),
            Some(_) => Err(self.err(
                &join(path, key),
                "empty list: at least one child config is needed",
            )),
            None => Err(self.err(path, format!("missing required key '{key}'"))),
        }
    }

    /// A string or list of strings.
    fn strings(
        &self,
        m: &Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<Vec<String>, ConfigError> {
        let p = join(path, key);
        match m.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::String(s)) => Ok(vec![s.clone()]),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    v.as_str().map(str::to_string).ok_or_else(|| {
                        self.err(
                            &format!("{p}[{i}]"),
                            format!("expected a string, found {}", kind(v)),
                        )
                    })
                })
                .collect(),
            Some(v) => Err(self.err(&p, format!("expected a list of strings, found {}", kind(v)))),
        }
    }

    fn selection(&self, text: &str, path: &str) -> Result<(), ConfigError> {
        parse_selection(text)
            .map(|_| ())
            .map_err(|e| self.err(path, e))
    }

    fn selections(
        &self,
        m: &Map<String, Value>,
        path: &str,
    ) -> Result<(Option<String>, Vec<String>), ConfigError> {
        let select = self.string(m, "select", path)?;
        if let Some(s) = &select {
            self.selection(s, &join(path, "select"))?;
        }
        let excludes = self.strings(m, "excludes", path)?;
        for (i, e) in excludes.iter().enumerate() {
            self.selection(e, &format!("{}[{i}]", join(path, "excludes")))?;
        }
        Ok((select, excludes))
    }

    /// `~fdb` (config `fdb_home`, `$FDB_HOME`, `$FDB5_HOME`, else `/` like FDB5 installed under
    /// `/usr`), `~/` (`$HOME`), and relative paths against the config file's directory.
    fn path_value(
        &self,
        raw: &str,
        fdb_home: Option<&Path>,
        path: &str,
    ) -> Result<PathBuf, ConfigError> {
        if raw.is_empty() {
            return Err(self.err(path, "empty path"));
        }
        if raw == "~fdb" || raw.starts_with("~fdb/") {
            let rest = raw.trim_start_matches("~fdb").trim_start_matches('/');
            let home = fdb_home
                .map(Path::to_path_buf)
                .or_else(|| self.fdb_home_env())
                .unwrap_or_else(|| PathBuf::from("/"));
            return Ok(home.join(rest));
        }
        if raw == "~" || raw.starts_with("~/") {
            let rest = raw.trim_start_matches('~').trim_start_matches('/');
            let home = (self.env)("HOME")
                .filter(|h| !h.is_empty())
                .ok_or_else(|| self.err(path, format!("cannot expand '{raw}': HOME is not set")))?;
            return Ok(Path::new(&home).join(rest));
        }
        if raw.starts_with('~') {
            return Err(self.err(
                path,
                format!("cannot expand '{raw}': only ~fdb/ and ~/ are understood"),
            ));
        }
        let p = PathBuf::from(raw);
        Ok(match self.base {
            Some(b) if p.is_relative() => b.join(p),
            _ => p,
        })
    }

    fn fdb_home_env(&self) -> Option<PathBuf> {
        (self.env)("FDB_HOME")
            .filter(|h| !h.is_empty())
            .or_else(|| (self.env)("FDB5_HOME").filter(|h| !h.is_empty()))
            .map(PathBuf::from)
    }

    /// One frontend. `lane_keys` are the keys the parent reads from this mapping (`select` for a
    /// select lane, `id`/`name` for a dist lane) and so are allowed here too.
    fn fdb(&self, v: &Value, path: &str, lane_keys: &[&str]) -> Result<FdbConfig, ConfigError> {
        let obj = v
            .as_object()
            .ok_or_else(|| self.err(path, format!("expected a mapping, found {}", kind(v))))?;
        let ty = self
            .string(obj, "type", path)?
            .unwrap_or_else(|| "local".into());
        let with = |extra: &[&'static str]| -> Vec<&str> {
            ["type"]
                .iter()
                .chain(lane_keys)
                .chain(extra)
                .copied()
                .collect()
        };
        match ty.as_str() {
            "local" | "catalogue" => {
                let m = self.map(
                    v,
                    path,
                    &with(&[
                        "engine",
                        "store",
                        "schema",
                        "format",
                        "spaces",
                        "writable",
                        "visitable",
                        "list",
                        "retrieve",
                        "archive",
                        "wipe",
                        "permissions",
                        "statistics",
                        "fdb_home",
                        "memory",
                        "s3",
                        "adopt",
                        "pipelines",
                        "lifecycle",
                        // Accepted and ignored: they tune FDB5 internals with no equivalent here.
                        "tocSerialisationVersion",
                        "useSubToc",
                        "serverPort",
                    ]),
                )?;
                self.local(m, path).map(FdbConfig::Local)
            }
            "select" | "routing" => {
                let key = if ty == "routing" { "fdb" } else { "fdbs" };
                let m = self.map(v, path, &with(&["schema", key]))?;
                let schema = match self.string(m, "schema", path)? {
                    Some(s) => Some(self.path_value(&s, None, &join(path, "schema"))?),
                    None => None,
                };
                let mut lanes = Vec::new();
                for (i, lane) in self.children(m, key, path)?.iter().enumerate() {
                    let lp = format!("{}[{i}]", join(path, key));
                    let lm = lane.as_object().ok_or_else(|| {
                        self.err(&lp, format!("expected a mapping, found {}", kind(lane)))
                    })?;
                    let (select, excludes) = self.selections(lm, &lp)?;
                    let select = select.ok_or_else(|| {
                        self.err(
                            &lp,
                            "missing required key 'select' (e.g. select: class=od,stream=oper)",
                        )
                    })?;
                    let mut config = self.fdb(lane, &lp, &["select", "excludes"])?;
                    if let Some(s) = &schema {
                        inject_schema(&mut config, s);
                    }
                    lanes.push(SelectLane {
                        select,
                        excludes,
                        config,
                    });
                }
                Ok(FdbConfig::Select { schema, lanes })
            }
            "dist" => {
                let m = self.map(v, path, &with(&["lanes", "hash"]))?;
                let hash = match self.string(m, "hash", path)?.as_deref() {
                    None | Some("field") => DistHash::Field,
                    Some("database") => DistHash::Database,
                    Some(h) => {
                        return Err(self.err(
                            &join(path, "hash"),
                            format!(
                                "unknown hash '{h}' (known: field, database){}",
                                hint(h, &["field", "database"])
                            ),
                        ))
                    }
                };
                let mut lanes: Vec<DistLane> = Vec::new();
                for (i, lane) in self.children(m, "lanes", path)?.iter().enumerate() {
                    let lp = format!("{}[{i}]", join(path, "lanes"));
                    let lm = lane.as_object().ok_or_else(|| {
                        self.err(&lp, format!("expected a mapping, found {}", kind(lane)))
                    })?;
                    let id = match self.string(lm, "id", &lp)? {
                        Some(id) => id,
                        None => self
                            .string(lm, "name", &lp)?
                            .unwrap_or_else(|| i.to_string()),
                    };
                    if let Some(j) = lanes.iter().position(|l| l.id == id) {
                        return Err(
                            self.err(&lp, format!("lane id '{id}' is already used by lanes[{j}]"))
                        );
                    }
                    lanes.push(DistLane {
                        config: self.fdb(lane, &lp, &["id", "name"])?,
                        hash_id: format!("LocalConfiguration[root={}]", eckit_print(lane)),
                        id,
                    });
                }
                Ok(FdbConfig::Dist { lanes, hash })
            }
            "remote" => {
                let m = self.map(
                    v,
                    path,
                    &with(&["host", "port", "token", "tls", "engine", "store", "socket"]),
                )?;
                let socket = match self.string(m, "socket", path)? {
                    Some(s) if !s.trim().is_empty() => {
                        Some(self.path_value(&s, None, &join(path, "socket"))?)
                    }
                    _ => None,
                };
                let host = match self.string(m, "host", path)?.filter(|h| !h.trim().is_empty()) {
                    Some(h) => h,
                    None if socket.is_some() => "localhost".to_string(),
                    None => {
                        return Err(self.err(
                            path,
                            "missing required key 'host' (or 'socket', the Unix socket of a server on this host)",
                        ))
                    }
                };
                let port = match self.unsigned(m, "port", path)? {
                    None => 7654,
                    Some(p) => u16::try_from(p).ok().filter(|p| *p > 0).ok_or_else(|| {
                        self.err(&join(path, "port"), format!("port {p} is not in 1-65535"))
                    })?,
                };
                let tls = match m.get("tls") {
                    None | Some(Value::Null) | Some(Value::Bool(false)) => None,
                    Some(v) => {
                        let tp = join(path, "tls");
                        let t = self.map(v, &tp, &["ca", "server_name", "cert", "key"])?;
                        let ca = self
                            .string(t, "ca", &tp)?
                            .ok_or_else(|| self.err(&tp, "missing required key 'ca' (a PEM file of the CA that signed the server's certificate)"))?;
                        let client = match (self.string(t, "cert", &tp)?, self.string(t, "key", &tp)?) {
                            (None, None) => None,
                            (Some(c), Some(k)) => Some((
                                self.path_value(&c, None, &join(&tp, "cert"))?,
                                self.path_value(&k, None, &join(&tp, "key"))?,
                            )),
                            _ => return Err(self.err(&tp, "'cert' and 'key' go together (a client certificate and its private key, both PEM)")),
                        };
                        Some(RemoteTls {
                            ca: self.path_value(&ca, None, &join(&tp, "ca"))?,
                            server_name: self.string(t, "server_name", &tp)?,
                            client,
                        })
                    }
                };
                if socket.is_some() && tls.is_some() {
                    return Err(self.err(
                        path,
                        "'socket' and 'tls' do not go together: a Unix socket never leaves this host",
                    ));
                }
                Ok(FdbConfig::Remote {
                    host,
                    port,
                    socket,
                    token: self.string(m, "token", path)?,
                    tls,
                })
            }
            "mirror" => {
                let m = self.map(v, path, &with(&["fdbs", "quorum"]))?;
                let children = self.fdb_list(m, path)?;
                let quorum = match self.unsigned(m, "quorum", path)? {
                    None => None,
                    Some(q) if q >= 1 && usize::try_from(q).is_ok_and(|q| q <= children.len()) => {
                        usize::try_from(q).ok()
                    }
                    Some(q) => {
                        return Err(self.err(
                            &join(path, "quorum"),
                            format!(
                                "quorum {q} is not between 1 and the {} children",
                                children.len()
                            ),
                        ))
                    }
                };
                Ok(FdbConfig::Mirror { children, quorum })
            }
            "filter" => {
                let m = self.map(v, path, &with(&["select", "excludes", "fdbs"]))?;
                // As a select lane, `select`/`excludes` are the lane's; the filter then passes all.
                let (select, excludes) = if lane_keys.contains(&"select") {
                    (None, Vec::new())
                } else {
                    self.selections(m, path)?
                };
                Ok(FdbConfig::Filter {
                    select,
                    excludes,
                    children: self.fdb_list(m, path)?,
                })
            }
            "diagnostics" => {
                let m = self.map(v, path, &with(&["fdb", "fdbs", "report"]))?;
                let children = match (m.get("fdb"), m.get("fdbs")) {
                    (Some(_), Some(_)) => {
                        return Err(self.err(
                            path,
                            "give the child under 'fdb' or the children under 'fdbs', not both",
                        ))
                    }
                    // `fdb:` names the one store looked through, as a mapping.
                    (Some(one @ Value::Object(_)), None) => {
                        vec![self.fdb(one, &join(path, "fdb"), &[])?]
                    }
                    (Some(_), None) => self.fdb_list_at(m, "fdb", path)?,
                    (None, _) => self.fdb_list(m, path)?,
                };
                let report = match self.string(m, "report", path)? {
                    Some(r) => Some(self.path_value(&r, None, &join(path, "report"))?),
                    None => None,
                };
                Ok(FdbConfig::Diagnostics { report, children })
            }
            "random" | "store" => Err(self.err(
                &join(path, "type"),
                format!(
                    "type '{ty}' is an FDB5 frontend fieldstore does not implement (known: {})",
                    TYPES.join(", ")
                ),
            )),
            other => Err(self.err(
                &join(path, "type"),
                format!(
                    "unknown type '{other}' (known: {}){}",
                    TYPES.join(", "),
                    hint(other, TYPES)
                ),
            )),
        }
    }

    fn fdb_list(&self, m: &Map<String, Value>, path: &str) -> Result<Vec<FdbConfig>, ConfigError> {
        self.fdb_list_at(m, "fdbs", path)
    }

    fn fdb_list_at(
        &self,
        m: &Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<Vec<FdbConfig>, ConfigError> {
        self.children(m, key, path)?
            .iter()
            .enumerate()
            .map(|(i, c)| self.fdb(c, &format!("{}[{i}]", join(path, key)), &[]))
            .collect()
    }

    fn local(&self, m: &Map<String, Value>, path: &str) -> Result<LocalConfig, ConfigError> {
        let fdb_home = match self.string(m, "fdb_home", path)? {
            Some(h) => Some(self.path_value(&h, None, &join(path, "fdb_home"))?),
            None => None,
        };
        let writable = self.boolean(m, "writable", path, true)?;
        let visitable = self.boolean(m, "visitable", path, true)?;
        let actions = Actions {
            list: self.boolean(m, "list", path, visitable)?,
            retrieve: self.boolean(m, "retrieve", path, visitable)?,
            archive: self.boolean(m, "archive", path, writable)?,
            wipe: self.boolean(m, "wipe", path, writable)?,
        };
        let engine = self
            .string(m, "engine", path)?
            .unwrap_or_else(|| "toc".into());
        if !matches!(engine.as_str(), "toc" | "memory" | "s3") {
            return Err(self.err(
                &join(path, "engine"),
                format!("unsupported engine '{engine}' (supported: toc, memory, s3)"),
            ));
        }
        let in_memory = engine == "memory";
        let default_store = match engine.as_str() {
            "memory" => "memory",
            "s3" => "s3",
            _ => "file",
        };
        let store = self
            .string(m, "store", path)?
            .unwrap_or_else(|| default_store.into());
        // A catalogue and its store live and die together: a toc catalogue pointing into RAM
        // would outlive its bytes, a memory catalogue would forget files. A toc catalogue may
        // keep its fields' bytes in S3, since its entries name the objects.
        let wanted: &[&str] = match engine.as_str() {
            "memory" => &["memory"],
            "s3" => &["s3"],
            _ => &["file", "s3"],
        };
        if !wanted.contains(&store.as_str()) {
            return Err(self.err(
                &join(path, "store"),
                format!(
                    "unsupported store '{store}' for engine {engine} (supported: {})",
                    wanted.join(", ")
                ),
            ));
        }
        let memory = match (m.get("memory"), in_memory) {
            (None | Some(Value::Null), true) => Some(MemoryConfig {
                instance: Some(next_instance()),
                ..MemoryConfig::default()
            }),
            (Some(v), true) => Some(self.memory(v, &join(path, "memory"))?),
            (None | Some(Value::Null), false) => None,
            (Some(_), false) => {
                return Err(self.err(
                    &join(path, "memory"),
                    "a memory section needs engine: memory",
                ))
            }
        };
        let schema = match self.string(m, "schema", path)? {
            Some(s) => Some(self.path_value(&s, fdb_home.as_deref(), &join(path, "schema"))?),
            None => None,
        };
        let permissions = match self.string(m, "permissions", path)? {
            None => None,
            Some(p) => Some(
                u32::from_str_radix(p.trim(), 8)
                    .ok()
                    .filter(|m| *m <= 0o7777)
                    .ok_or_else(|| {
                        self.err(
                            &join(path, "permissions"),
                            format!("'{p}' is not an octal file mode like \"0644\""),
                        )
                    })?,
            ),
        };
        let spaces_path = join(path, "spaces");
        let spaces = match self.list(m, "spaces", path)? {
            None if in_memory || engine == "s3" => Vec::new(),
            None => {
                return Err(self.err(
                    path,
                    "missing required key 'spaces' (where the data goes: spaces: [{roots: [{path: /dir}]}])",
                ))
            }
            Some(list) if list.is_empty() => {
                return Err(self.err(
                    &spaces_path,
                    "no spaces: at least one space with one root is needed",
                ))
            }
            Some(list) => list
                .iter()
                .enumerate()
                .map(|(i, s)| self.space(s, &format!("{spaces_path}[{i}]"), fdb_home.as_deref()))
                .collect::<Result<Vec<_>, _>>()?,
        };
        let uses_s3 = engine == "s3" || store == "s3";
        // Roots naming buckets (tiers, docs/lifecycle.md) take the server from the s3: section.
        let bucket_tiers = spaces
            .iter()
            .flat_map(|s| &s.roots)
            .any(|r| r.path.to_str().is_some_and(|p| p.starts_with("s3://")));
        let s3 = match (m.get("s3"), uses_s3 || bucket_tiers) {
            (None | Some(Value::Null), true) => {
                return Err(self.err(
                    path,
                    "missing required key 's3' (engine or store s3, or a root naming a bucket, needs the server: s3: {endpoint: http://host:9000, bucket: NAME})",
                ))
            }
            (Some(v), true) => Some(self.s3(v, &join(path, "s3"), uses_s3)?),
            (None | Some(Value::Null), false) => None,
            (Some(_), false) => {
                return Err(self.err(&join(path, "s3"), "an s3 section needs engine: s3, store: s3 or a root naming a bucket (path: s3://BUCKET/PREFIX)"))
            }
        };
        let format = self.format(m, path)?;
        if format.is_some() && engine != "toc" {
            return Err(self.err(
                &join(path, "format"),
                format!("a database format is for engine toc, not {engine}"),
            ));
        }
        let mut spaces = spaces;
        for r in spaces.iter_mut().flat_map(|s| s.roots.iter_mut()) {
            if r.format.is_none() {
                r.format = format;
            }
        }
        Ok(LocalConfig {
            engine,
            store,
            schema,
            spaces,
            writable,
            visitable,
            actions,
            permissions,
            statistics: self.boolean(m, "statistics", path, false)?,
            fdb_home,
            memory,
            spaces_source: None,
            s3,
            adopt_s3: match m.get("adopt") {
                None | Some(Value::Null) => None,
                Some(v) => self.adopt(v, &join(path, "adopt"))?,
            },
            pipelines: self.pipelines(m, path)?,
            lifecycle: self.lifecycle(m, path)?,
            creator: None,
        })
    }

    /// `lifecycle: {grace: 10m, rules: [{name, request, older_than, move_to | wipe | keep_runs}]}`.
    fn lifecycle(
        &self,
        m: &Map<String, Value>,
        path: &str,
    ) -> Result<Option<super::LifecycleConfig>, ConfigError> {
        use super::{LifecycleAction, LifecycleConfig, LifecycleRule};
        let v = match m.get("lifecycle") {
            None | Some(Value::Null) => return Ok(None),
            Some(v) => v,
        };
        let path = join(path, "lifecycle");
        let lm = self.map(v, &path, &["grace", "rules", "every"])?;
        let duration = |map: &Map<String, Value>,
                        key: &str,
                        at: &str|
         -> Result<Option<std::time::Duration>, ConfigError> {
            match self.string(map, key, at)? {
                None => Ok(None),
                Some(g) => parse_duration(&g).map(Some).ok_or_else(|| {
                    self.err(
                        &join(at, key),
                        format!("'{g}' is not a duration like 36h, 2d, 10m or 600 (seconds)"),
                    )
                }),
            }
        };
        let grace = duration(lm, "grace", &path)?.unwrap_or(LifecycleConfig::DEFAULT_GRACE);
        let every = duration(lm, "every", &path)?;
        if every.is_some_and(|e| e.is_zero()) {
            return Err(self.err(
                &join(&path, "every"),
                "the schedule's interval must be more than 0 (leave every: out to run the rules only by hand)",
            ));
        }
        let mut rules = Vec::new();
        if !matches!(lm.get("rules"), None | Some(Value::Null)) {
            for (i, r) in self.children(lm, "rules", &path)?.iter().enumerate() {
                let p = format!("{}[{i}]", join(&path, "rules"));
                let e = self.map(
                    r,
                    &p,
                    &[
                        "name",
                        "request",
                        "older_than",
                        "move_to",
                        "wipe",
                        "keep_runs",
                    ],
                )?;
                let name = self
                    .string(e, "name", &p)?
                    .unwrap_or_else(|| format!("rule[{i}]"));
                let request = self.string(e, "request", &p)?.unwrap_or_default();
                let older = duration(e, "older_than", &p)?;
                let to = self.string(e, "move_to", &p)?;
                let wipe = self.boolean(e, "wipe", &p, false)?;
                let keep = match self.string(e, "keep_runs", &p)? {
                    None => None,
                    Some(k) => Some(
                        k.trim()
                            .parse::<usize>()
                            .ok()
                            .filter(|n| *n > 0)
                            .ok_or_else(|| {
                                self.err(
                                    &join(&p, "keep_runs"),
                                    format!("'{k}' is not a number of runs (1 or more)"),
                                )
                            })?,
                    ),
                };
                let action = match (to, wipe, keep, older) {
                    (Some(to), false, None, Some(older_than)) => LifecycleAction::Move { older_than, to },
                    (None, true, None, Some(older_than)) => LifecycleAction::Wipe { older_than },
                    (None, false, Some(runs), None) => LifecycleAction::KeepRuns { runs },
                    _ => {
                        return Err(self.err(
                            &p,
                            "a rule is one of: {older_than: AGE, move_to: TIER}, {older_than: AGE, wipe: true}, {keep_runs: N}",
                        ))
                    }
                };
                rules.push(LifecycleRule {
                    name,
                    request,
                    action,
                });
            }
        }
        Ok(Some(LifecycleConfig {
            grace,
            rules,
            every,
        }))
    }

    /// `pipelines: [{name, plan, request, state, from}]`.
    fn pipelines(
        &self,
        m: &Map<String, Value>,
        path: &str,
    ) -> Result<Vec<super::PipelineConfig>, ConfigError> {
        if matches!(m.get("pipelines"), None | Some(Value::Null)) {
            return Ok(Vec::new());
        }
        let mut out: Vec<super::PipelineConfig> = Vec::new();
        for (i, v) in self.children(m, "pipelines", path)?.iter().enumerate() {
            let p = format!("{}[{i}]", join(path, "pipelines"));
            let e = self.map(v, &p, &["name", "plan", "request", "state", "from"])?;
            let name = self
                .string(e, "name", &p)?
                .filter(|n| !n.trim().is_empty())
                .ok_or_else(|| self.err(&p, "a pipeline needs a name"))?;
            if name.contains('/') || name.starts_with('.') {
                return Err(self.err(
                    &join(&p, "name"),
                    format!("'{name}' names a directory: no '/', no leading '.'"),
                ));
            }
            if out.iter().any(|o| o.name == name) {
                return Err(self.err(
                    &join(&p, "name"),
                    format!("a second pipeline named '{name}'"),
                ));
            }
            let plan = match self.string(e, "plan", &p)? {
                Some(s) => self.path_value(&s, None, &join(&p, "plan"))?,
                None => return Err(self.err(&p, "a pipeline needs a plan: (a MultIO plan file)")),
            };
            let state = match self.string(e, "state", &p)? {
                Some(s) => Some(self.path_value(&s, None, &join(&p, "state"))?),
                None => None,
            };
            let from_beginning = match self.string(e, "from", &p)?.as_deref() {
                None | Some("beginning") => true,
                Some("now") => false,
                Some(other) => {
                    return Err(self.err(
                        &join(&p, "from"),
                        format!("'{other}' is not beginning or now"),
                    ))
                }
            };
            out.push(super::PipelineConfig {
                name,
                plan,
                request: self.string(e, "request", &p)?.unwrap_or_default(),
                state,
                from_beginning,
            });
        }
        Ok(out)
    }

    /// `adopt: {s3: {endpoint: http://host:9000, region: ..., profile: ...}}`: where objects
    /// adopted where they lie are read (docs/adopt.md). No bucket: each object's URI names it.
    fn adopt(&self, v: &Value, path: &str) -> Result<Option<AdoptS3Config>, ConfigError> {
        let m = self.map(v, path, &["s3"])?;
        let path = join(path, "s3");
        let s3 = match m.get("s3") {
            None | Some(Value::Null) => return Ok(None),
            Some(v) => self.map(
                v,
                &path,
                &[
                    "endpoint",
                    "region",
                    "access_key_id",
                    "secret_access_key",
                    "profile",
                    "ca_bundle",
                ],
            )?,
        };
        let opt = |key: &str| -> Result<Option<String>, ConfigError> {
            Ok(self
                .string(s3, key, &path)?
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty()))
        };
        let endpoint = opt("endpoint")?;
        if let Some(e) = &endpoint {
            let scheme_ok = ["http://", "https://"]
                .iter()
                .any(|p| e.len() > p.len() && e[..p.len()].eq_ignore_ascii_case(p));
            if !scheme_ok {
                return Err(self.err(
                    &join(&path, "endpoint"),
                    format!("'{e}' is not an http:// or https:// URL"),
                ));
            }
        }
        let (id, secret) = (opt("access_key_id")?, opt("secret_access_key")?);
        if id.is_some() != secret.is_some() {
            return Err(self.err(
                &path,
                "set both access_key_id and secret_access_key, or neither (to use the environment or ~/.aws/credentials)",
            ));
        }
        Ok(Some(AdoptS3Config {
            endpoint: endpoint.map(|e| e.trim_end_matches('/').to_string()),
            region: opt("region")?,
            access_key_id: id,
            secret_access_key: secret,
            profile: opt("profile")?,
            ca_bundle: match opt("ca_bundle")? {
                Some(p) => Some(self.path_value(&p, None, &join(&path, "ca_bundle"))?),
                None => None,
            },
        }))
    }

    /// `s3: {endpoint: http://host:9000, bucket: fdb, prefix: ops/, ...}`.
    /// `bucket` may be left out only where every bucket is named by a root (`s3://BUCKET/...`).
    fn s3(&self, v: &Value, path: &str, bucket_required: bool) -> Result<S3Config, ConfigError> {
        let m = self.map(
            v,
            path,
            &[
                "endpoint",
                "bucket",
                "region",
                "prefix",
                "access_key_id",
                "secret_access_key",
                "profile",
                "allow_unconditional_writes",
                "create_bucket",
                "grace",
                "ca_bundle",
            ],
        )?;
        let required = |key: &str, example: &str| -> Result<String, ConfigError> {
            match self.string(m, key, path)? {
                Some(s) if !s.trim().is_empty() => Ok(s.trim().to_string()),
                _ => Err(self.err(path, format!("missing required key '{key}' ({example})"))),
            }
        };
        let endpoint = required("endpoint", "the server's URL, like http://host:9000")?;
        let scheme_ok = ["http://", "https://"]
            .iter()
            .any(|p| endpoint.len() > p.len() && endpoint[..p.len()].eq_ignore_ascii_case(p));
        if !scheme_ok {
            return Err(self.err(
                &join(path, "endpoint"),
                format!("'{endpoint}' is not an http:// or https:// URL"),
            ));
        }
        let bucket = match self.string(m, "bucket", path)? {
            None if !bucket_required => "unused".to_string(),
            _ => required("bucket", "the bucket's name")?,
        };
        let valid_bucket = (3..=63).contains(&bucket.len())
            && bucket
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '.');
        if !valid_bucket {
            return Err(self.err(
                &join(path, "bucket"),
                format!("'{bucket}' is not a bucket name (3 to 63 of a-z, 0-9, '-', '.')"),
            ));
        }
        let prefix = self
            .string(m, "prefix", path)?
            .map(|p| p.trim_start_matches('/').to_string())
            .filter(|p| !p.is_empty())
            .map(|p| if p.ends_with('/') { p } else { format!("{p}/") });
        let grace = match self.string(m, "grace", path)? {
            None => S3Config::DEFAULT_GRACE,
            Some(g) => parse_duration(&g).ok_or_else(|| {
                self.err(
                    &join(path, "grace"),
                    format!("'{g}' is not a duration like 10m, 600s, 1h or 600 (seconds)"),
                )
            })?,
        };
        let ca_bundle = match self.string(m, "ca_bundle", path)? {
            Some(p) => Some(self.path_value(&p, None, &join(path, "ca_bundle"))?),
            None => None,
        };
        let opt = |key: &str| -> Result<Option<String>, ConfigError> {
            Ok(self.string(m, key, path)?.filter(|s| !s.is_empty()))
        };
        Ok(S3Config {
            endpoint: endpoint.trim_end_matches('/').to_string(),
            bucket,
            region: opt("region")?,
            prefix,
            access_key_id: opt("access_key_id")?,
            secret_access_key: opt("secret_access_key")?,
            profile: opt("profile")?,
            allow_unconditional_writes: self.boolean(
                m,
                "allow_unconditional_writes",
                path,
                false,
            )?,
            create_bucket: self.boolean(m, "create_bucket", path, true)?,
            grace,
            ca_bundle,
        })
    }

    /// `memory: {capacity: 2GiB, name: exchange, when_full: block, block_timeout: 30s,
    /// retain: {databases: 4}}`.
    fn memory(&self, v: &Value, path: &str) -> Result<MemoryConfig, ConfigError> {
        let m = self.map(
            v,
            path,
            &["capacity", "name", "when_full", "block_timeout", "retain"],
        )?;
        let capacity = match self.string(m, "capacity", path)? {
            None => MemoryConfig::DEFAULT_CAPACITY,
            Some(c) => parse_size(&c).ok_or_else(|| {
                self.err(
                    &join(path, "capacity"),
                    format!("'{c}' is not a size above zero like 512MiB, 2GiB or 1000000 (bytes)"),
                )
            })?,
        };
        let name = self.string(m, "name", path)?.filter(|n| !n.is_empty());
        let instance = name.is_none().then(next_instance);
        let timeout = match self.string(m, "block_timeout", path)? {
            None => None,
            Some(t) => Some(parse_wait(&t).ok_or_else(|| {
                self.err(
                    &join(path, "block_timeout"),
                    format!("'{t}' is not a duration like 500ms, 30s, 5m or 30 (seconds)"),
                )
            })?),
        };
        let when_full = match self.string(m, "when_full", path)?.as_deref() {
            None | Some("error") if timeout.is_some() => {
                return Err(self.err(
                    &join(path, "block_timeout"),
                    "block_timeout applies to when_full: block only; add it, or drop block_timeout",
                ))
            }
            None | Some("error") => WhenFull::Error,
            Some("block") => WhenFull::Block {
                timeout: timeout.unwrap_or(MemoryConfig::DEFAULT_BLOCK_TIMEOUT),
            },
            Some(other) => {
                return Err(self.err(
                    &join(path, "when_full"),
                    format!("'{other}' is not one of: error (fail the archive at once), block (wait for space up to block_timeout)"),
                ))
            }
        };
        let retain_databases = match m.get("retain") {
            None | Some(Value::Null) => None,
            Some(r) => {
                let rp = join(path, "retain");
                let rm = self.map(r, &rp, &["databases"])?;
                let n = self.string(rm, "databases", &rp)?.ok_or_else(|| {
                    self.err(&rp, "missing required key 'databases' (retain: {databases: N} keeps the N newest databases)")
                })?;
                Some(
                    n.trim()
                        .parse::<usize>()
                        .ok()
                        .filter(|n| *n > 0)
                        .ok_or_else(|| {
                            self.err(
                                &join(&rp, "databases"),
                                format!("'{n}' is not a whole number above zero"),
                            )
                        })?,
                )
            }
        };
        Ok(MemoryConfig {
            name,
            capacity,
            instance,
            when_full,
            retain_databases,
        })
    }

    fn space(&self, v: &Value, path: &str, fdb_home: Option<&Path>) -> Result<Space, ConfigError> {
        let m = self.map(v, path, &["name", "regex", "handler", "roots"])?;
        let regex = self
            .string(m, "regex", path)?
            .unwrap_or_else(|| ".*".into());
        if let Err(e) = super::SpaceMatcher::new(&regex) {
            return Err(self.err(
                &join(path, "regex"),
                format!("invalid regular expression: {e}"),
            ));
        }
        let handler = self.string(m, "handler", path)?;
        if let Some(h) = &handler {
            if UNSUPPORTED_HANDLERS.contains(&h.as_str()) {
                return Err(self.err(
                    &join(path, "handler"),
                    format!(
                        "handler '{h}' is an FDB5 handler fieldstore does not support (it needs FDB5's site files or environment); supported: {}",
                        HANDLERS.join(", ")
                    ),
                ));
            }
            if !HANDLERS.contains(&h.as_str()) {
                return Err(self.err(
                    &join(path, "handler"),
                    format!(
                        "unknown handler '{h}' (known: {}){}",
                        HANDLERS.join(", "),
                        hint(h, HANDLERS)
                    ),
                ));
            }
        }
        let roots_path = join(path, "roots");
        let roots = match self.list(m, "roots", path)? {
            None => return Err(self.err(path, "missing required key 'roots'")),
            Some(l) if l.is_empty() => {
                return Err(self.err(
                    &roots_path,
                    "no roots: at least one root directory is needed",
                ))
            }
            Some(l) => l
                .iter()
                .enumerate()
                .map(|(i, r)| self.root(r, &format!("{roots_path}[{i}]"), fdb_home))
                .collect::<Result<Vec<_>, _>>()?,
        };
        // Limits without a handler mean "fill the first root, then the next".
        let handler = handler.unwrap_or_else(|| {
            if roots.iter().any(Root::has_limits) {
                "Fill".into()
            } else {
                "Default".into()
            }
        });
        Ok(Space {
            name: self.string(m, "name", path)?,
            regex,
            handler,
            roots,
        })
    }

    fn root(&self, v: &Value, path: &str, fdb_home: Option<&Path>) -> Result<Root, ConfigError> {
        let m = self.map(
            v,
            path,
            &[
                "path", "name", "writable", "visit", "list", "retrieve", "archive", "wipe",
                "capacity", "max_fill", "max_age", "format",
            ],
        )?;
        let capacity = match self.string(m, "capacity", path)? {
            None => None,
            Some(c) => Some(parse_size(&c).ok_or_else(|| {
                self.err(
                    &join(path, "capacity"),
                    format!("'{c}' is not a size above zero like 500KiB, 10GiB or 1000000 (bytes)"),
                )
            })?),
        };
        let max_fill = match self.string(m, "max_fill", path)? {
            None => None,
            Some(c) => Some(parse_percent(&c).ok_or_else(|| {
                self.err(
                    &join(path, "max_fill"),
                    format!("'{c}' is not a percentage from 1 to 100 like 90%"),
                )
            })?),
        };
        let max_age_days = match self.string(m, "max_age", path)? {
            None => None,
            Some(c) => Some(parse_days(&c).ok_or_else(|| {
                self.err(
                    &join(path, "max_age"),
                    format!("'{c}' is not an age in days like 30d, 2w or 1y"),
                )
            })?),
        };
        let format = self.format(m, path)?;
        let raw = self
            .string(m, "path", path)?
            .ok_or_else(|| self.err(path, "missing required key 'path'"))?;
        let writable = self.boolean(m, "writable", path, true)?;
        let visit = self.boolean(m, "visit", path, true)?;
        let root_path = if let Some(rest) = raw.strip_prefix("s3://") {
            // A bucket tier (docs/lifecycle.md): kept as written, never a directory.
            if rest.split('/').next().is_none_or(str::is_empty) {
                return Err(self.err(
                    &join(path, "path"),
                    format!("'{raw}' names no bucket (s3://BUCKET/PREFIX)"),
                ));
            }
            PathBuf::from(raw.trim_end_matches('/'))
        } else {
            self.path_value(&raw, fdb_home, &join(path, "path"))?
        };
        Ok(Root {
            path: root_path,
            name: self.string(m, "name", path)?,
            writable,
            visit,
            list: self.boolean(m, "list", path, visit)?,
            retrieve: self.boolean(m, "retrieve", path, visit)?,
            archive: self.boolean(m, "archive", path, writable)?,
            wipe: self.boolean(m, "wipe", path, writable)?,
            capacity,
            max_fill,
            max_age_days,
            format,
        })
    }

    /// `format: fdb5 | fieldstore`: the on-disk format of new databases.
    fn format(&self, m: &Map<String, Value>, path: &str) -> Result<Option<DbFormat>, ConfigError> {
        match self.string(m, "format", path)? {
            None => Ok(None),
            Some(f) => DbFormat::parse(&f).map(Some).ok_or_else(|| {
                self.err(
                    &join(path, "format"),
                    format!("'{f}' is not a database format (fieldstore, fdb5)"),
                )
            }),
        }
    }

    /// Local configs still without a schema get `$FDB_SCHEMA_FILE`, else `~fdb/etc/fdb/schema`
    /// when an FDB home is known and the file exists, else stay `None` (the built-in schema).
    fn default_schemas(&self, config: &mut FdbConfig) {
        for_each_local(config, &mut |l| {
            if l.schema.is_some() {
                return;
            }
            if let Some(s) = (self.env)("FDB_SCHEMA_FILE").filter(|s| !s.is_empty()) {
                l.schema = Some(PathBuf::from(s));
                return;
            }
            let home = l.fdb_home.clone().or_else(|| self.fdb_home_env());
            if let Some(p) = home.map(|h| h.join("etc/fdb/schema")) {
                if p.is_file() {
                    l.schema = Some(p);
                }
            }
        });
    }
}

fn for_each_local(config: &mut FdbConfig, f: &mut dyn FnMut(&mut LocalConfig)) {
    match config {
        FdbConfig::Local(l) => f(l),
        FdbConfig::Select { lanes, .. } => lanes
            .iter_mut()
            .for_each(|l| for_each_local(&mut l.config, f)),
        FdbConfig::Dist { lanes, .. } => lanes
            .iter_mut()
            .for_each(|l| for_each_local(&mut l.config, f)),
        FdbConfig::Mirror { children, .. }
        | FdbConfig::Filter { children, .. }
        | FdbConfig::Diagnostics { children, .. } => {
            children.iter_mut().for_each(|c| for_each_local(c, f))
        }
        FdbConfig::Remote { .. } => {}
    }
}

/// A select's `schema` goes to every local config below it that names none (newest FDB5).
fn inject_schema(config: &mut FdbConfig, schema: &Path) {
    for_each_local(config, &mut |l| {
        if l.schema.is_none() {
            l.schema = Some(schema.to_path_buf());
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    pub(crate) fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    fn parse_env(text: &str, pairs: &[(&str, &str)]) -> Result<FdbConfig, ConfigError> {
        from_yaml_str_with(text, "t.yaml", Some(Path::new("/base")), &env_of(pairs))
    }

    fn parse(text: &str) -> Result<FdbConfig, ConfigError> {
        parse_env(text, &[("FDB_HOME", "/home/fdb"), ("HOME", "/u")])
    }

    fn local(c: FdbConfig) -> LocalConfig {
        match c {
            FdbConfig::Local(l) => l,
            other => panic!("not local: {other:?}"),
        }
    }

    #[test]
    fn bucket_roots_and_lifecycle_rules() {
        let l = local(
            parse(
                "spaces: [{roots: [{path: /fast, capacity: 1GiB}, {path: 's3://cold/ops/', max_age: 30d}]}]\n\
                 s3: {endpoint: 'http://127.0.0.1:9000'}\n\
                 lifecycle:\n  grace: 0s\n  every: 90m\n  rules:\n\
                 \x20 - {name: cool, request: 'class=od', older_than: 2d, move_to: 's3://cold/ops'}\n\
                 \x20 - {request: 'class=od', older_than: 36h, wipe: true}\n\
                 \x20 - {keep_runs: 4}\n",
            )
            .unwrap(),
        );
        assert_eq!(l.spaces[0].roots[1].path, Path::new("s3://cold/ops"));
        assert_eq!(l.spaces[0].roots[1].max_age_days, Some(30));
        assert!(l.s3.is_some());
        let lc = l.lifecycle.unwrap();
        assert_eq!(lc.grace, std::time::Duration::ZERO);
        assert_eq!(lc.every, Some(std::time::Duration::from_secs(5400)));
        assert_eq!(
            lc.rules[0].action,
            super::super::LifecycleAction::Move {
                older_than: std::time::Duration::from_secs(2 * 86400),
                to: "s3://cold/ops".into()
            }
        );
        assert_eq!(lc.rules[1].name, "rule[1]");
        assert_eq!(
            lc.rules[1].action,
            super::super::LifecycleAction::Wipe {
                older_than: std::time::Duration::from_secs(36 * 3600)
            }
        );
        assert_eq!(
            lc.rules[2].action,
            super::super::LifecycleAction::KeepRuns { runs: 4 }
        );
        for (text, wanted) in [
            (
                "spaces: [{roots: [{path: 's3://cold'}]}]\n",
                "missing required key 's3'",
            ),
            (
                "spaces: [{roots: [{path: 's3:///x'}]}]\ns3: {endpoint: 'http://h:9000'}\n",
                "names no bucket",
            ),
            (
                "spaces: [{roots: [{path: /a}]}]\nlifecycle: {rules: [{older_than: 2d}]}\n",
                "a rule is one of",
            ),
            (
                "spaces: [{roots: [{path: /a}]}]\nlifecycle: {every: 0s, rules: []}\n",
                "must be more than 0",
            ),
            (
                "spaces: [{roots: [{path: /a}]}]\nlifecycle: {rules: [{keep_runs: 0}]}\n",
                "not a number of runs",
            ),
            (
                "spaces: [{roots: [{path: /a}]}]\nlifecycle: {rules: [{older_than: soon, wipe: true}]}\n",
                "not a duration",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(wanted), "{text}: {e}");
        }
    }

    #[test]
    fn pipelines_section() {
        let base = "engine: toc\nspaces: [{roots: [{path: /a}]}]\n";
        assert!(local(parse(base).unwrap()).pipelines.is_empty());
        let l = local(
            parse(&format!(
                "{base}pipelines:\n- {{name: daily, plan: /p/daily.yaml, request: 'class=od,param=167', from: now}}\n- {{name: monthly, plan: /p/m.yaml, state: /s/m}}\n"
            ))
            .unwrap(),
        );
        assert_eq!(l.pipelines.len(), 2);
        assert_eq!(l.pipelines[0].name, "daily");
        assert_eq!(l.pipelines[0].plan, PathBuf::from("/p/daily.yaml"));
        assert_eq!(l.pipelines[0].request, "class=od,param=167");
        assert!(!l.pipelines[0].from_beginning);
        assert!(l.pipelines[1].from_beginning);
        assert_eq!(l.pipelines[1].state, Some(PathBuf::from("/s/m")));
        for (bad, says) in [
            ("pipelines: [{plan: /p}]", "needs a name"),
            ("pipelines: [{name: a}]", "needs a plan"),
            (
                "pipelines: [{name: a, plan: /p}, {name: a, plan: /q}]",
                "a second pipeline",
            ),
            ("pipelines: [{name: ../x, plan: /p}]", "names a directory"),
            (
                "pipelines: [{name: a, plan: /p, from: yesterday}]",
                "not beginning or now",
            ),
            (
                "pipelines: [{name: a, plan: /p, every: 1}]",
                "unknown key 'every'",
            ),
        ] {
            let e = parse(&format!("{base}{bad}")).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn adopt_section() {
        let base = "engine: toc\nspaces: [{roots: [{path: /a}]}]\n";
        let l = local(parse(base).unwrap());
        assert_eq!(l.adopt_s3, None);
        let l = local(
            parse(&format!(
                "{base}adopt: {{s3: {{endpoint: 'https://s3.example/', region: eu, access_key_id: AK, secret_access_key: SK, profile: p, ca_bundle: /etc/ca.pem}}}}"
            ))
            .unwrap(),
        );
        let a = l.adopt_s3.unwrap();
        assert_eq!(a.endpoint.as_deref(), Some("https://s3.example"));
        assert_eq!(
            (
                a.region.as_deref(),
                a.access_key_id.as_deref(),
                a.profile.as_deref()
            ),
            (Some("eu"), Some("AK"), Some("p"))
        );
        assert!(
            !format!("{a:?}").contains("SK"),
            "the secret is never printed"
        );
        for (bad, says) in [
            (
                "adopt: {s3: {endpoint: s3.example}}",
                "not an http:// or https:// URL",
            ),
            (
                "adopt: {s3: {access_key_id: AK}}",
                "both access_key_id and secret_access_key",
            ),
            ("adopt: {s3: {bucket: b}}", "unknown key 'bucket'"),
            ("adopt: {files: {}}", "unknown key 'files'"),
        ] {
            let e = parse(&format!("{base}{bad}")).unwrap_err().to_string();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn s3_section_with_defaults_and_every_key() {
        let l = local(
            parse("engine: s3\ns3: {endpoint: 'http://127.0.0.1:9000/', bucket: fdb}").unwrap(),
        );
        assert_eq!((l.engine.as_str(), l.store.as_str()), ("s3", "s3"));
        assert_eq!(
            l.s3.unwrap(),
            S3Config::new("http://127.0.0.1:9000", "fdb"),
            "defaults, and the trailing slash dropped"
        );
        let l = local(
            parse(
                "engine: toc\nstore: s3\nspaces: [{roots: [{path: /a}]}]\ns3: {endpoint: https://s3.example, bucket: my.bucket, region: eu-west-1, prefix: /ops, access_key_id: AK, secret_access_key: SK, profile: p, allow_unconditional_writes: yes, create_bucket: false, grace: 1h, ca_bundle: /etc/ca.pem}",
            )
            .unwrap(),
        );
        let c = l.s3.unwrap();
        assert_eq!(c.region.as_deref(), Some("eu-west-1"));
        assert_eq!(c.prefix.as_deref(), Some("ops/"));
        assert_eq!(
            (c.access_key_id.as_deref(), c.secret_access_key.as_deref()),
            (Some("AK"), Some("SK"))
        );
        assert_eq!(c.profile.as_deref(), Some("p"));
        assert!(c.allow_unconditional_writes && !c.create_bucket);
        assert_eq!(c.grace, std::time::Duration::from_secs(3600));
        assert_eq!(c.ca_bundle, Some(PathBuf::from("/etc/ca.pem")));
        let debug = format!("{c:?}");
        assert!(debug.contains("AK") && !debug.contains("SK"), "{debug}");
    }

    #[test]
    fn s3_section_errors() {
        for (text, wanted) in [
            ("engine: s3", "missing required key 's3'"),
            (
                "engine: s3\ns3: {bucket: fdb}",
                "missing required key 'endpoint'",
            ),
            (
                "engine: s3\ns3: {endpoint: 'host:9000', bucket: fdb}",
                "s3.endpoint: 'host:9000' is not an http",
            ),
            (
                "engine: s3\ns3: {endpoint: 'http://h', bucket: My_Bucket}",
                "s3.bucket: 'My_Bucket' is not a bucket name",
            ),
            (
                "engine: s3\ns3: {endpoint: 'http://h', bucket: fdb, grace: soon}",
                "s3.grace: 'soon' is not a duration",
            ),
            (
                "engine: s3\nstore: file\ns3: {endpoint: 'http://h', bucket: fdb}",
                "unsupported store 'file' for engine s3",
            ),
            (
                "engine: s3\ns3: {endpoint: 'http://h', bucket: fdb, region2: x}",
                "unknown key 'region2'",
            ),
            (
                "spaces: [{roots: [{path: /a}]}]\ns3: {endpoint: 'http://h', bucket: fdb}",
                "an s3 section needs engine: s3, store: s3 or a root naming a bucket",
            ),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(wanted), "{text}: {e}");
        }
    }

    #[test]
    fn memory_when_full_and_retention() {
        use std::time::Duration;
        let m = local(parse("engine: memory").unwrap()).memory.unwrap();
        assert_eq!((m.when_full, m.retain_databases), (WhenFull::Error, None));
        let m = local(
            parse("engine: memory\nmemory: {when_full: block, retain: {databases: 4}}").unwrap(),
        )
        .memory
        .unwrap();
        assert_eq!(
            (m.when_full, m.retain_databases),
            (
                WhenFull::Block {
                    timeout: MemoryConfig::DEFAULT_BLOCK_TIMEOUT
                },
                Some(4)
            )
        );
        let m = local(
            parse("engine: memory\nmemory: {when_full: block, block_timeout: 250ms}").unwrap(),
        )
        .memory
        .unwrap();
        assert_eq!(
            m.when_full,
            WhenFull::Block {
                timeout: Duration::from_millis(250)
            }
        );
        for (text, wanted) in [
            (
                "memory: {when_full: wait}",
                "memory.when_full: 'wait' is not one of: error",
            ),
            (
                "memory: {block_timeout: 5s}",
                "block_timeout applies to when_full: block only",
            ),
            (
                "memory: {when_full: block, block_timeout: soon}",
                "memory.block_timeout: 'soon' is not a duration",
            ),
            (
                "memory: {retain: {databases: 0}}",
                "memory.retain.databases: '0' is not a whole number above zero",
            ),
            ("memory: {retain: {}}", "missing required key 'databases'"),
            ("memory: {retain: {cycles: 2}}", "unknown key 'cycles'"),
        ] {
            let e = parse(&format!("engine: memory\n{text}"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(wanted), "{text}: {e}");
        }
    }

    #[test]
    fn durations() {
        use std::time::Duration;
        assert_eq!(parse_duration("600"), Some(Duration::from_secs(600)));
        assert_eq!(parse_duration("10m"), Some(Duration::from_secs(600)));
        assert_eq!(parse_duration(" 2d "), Some(Duration::from_secs(172800)));
        assert_eq!(parse_duration("0s"), Some(Duration::ZERO));
        assert_eq!(parse_duration("1.5h"), None);
        assert_eq!(parse_duration("99999999999999999999d"), None);
    }

    #[test]
    fn memory_engine_with_capacity_and_name() {
        let l = local(parse("engine: memory").unwrap());
        assert_eq!((l.engine.as_str(), l.store.as_str()), ("memory", "memory"));
        assert!(l.spaces.is_empty());
        let m = l.memory.unwrap();
        assert_eq!(
            (m.name.as_deref(), m.capacity),
            (None, MemoryConfig::DEFAULT_CAPACITY)
        );
        // Handles of one parse share a store; another parse has its own.
        let again = local(parse("engine: memory").unwrap()).memory.unwrap();
        assert!(m.shared_name().is_some() && m.shared_name() != again.shared_name());
        let l = local(
            parse("engine: memory\nstore: memory\nmemory: {capacity: 2GiB, name: exchange}")
                .unwrap(),
        );
        let m = l.memory.unwrap();
        assert_eq!((m.capacity, m.name.as_deref()), (2 << 30, Some("exchange")));
        assert_eq!(m.shared_name().as_deref(), Some("exchange"));
        for (size, bytes) in [("1000", 1000), ("512 MB", 512_000_000), ("1.5k", 1536)] {
            assert_eq!(parse_size(size), Some(bytes), "{size}");
        }
        for bad in ["0", "", "12 parsecs", "-1", "99999999999999999999"] {
            assert_eq!(parse_size(bad), None, "{bad}");
        }
        for (text, msg) in [
            (
                "engine: memory\nmemory: {capacity: lots}",
                "memory.capacity: 'lots' is not a size",
            ),
            (
                "engine: memory\nstore: file",
                "unsupported store 'file' for engine memory",
            ),
            (
                "memory: {capacity: 1G}\nspaces: [{roots: [{path: /a}]}]",
                "a memory section needs engine: memory",
            ),
            ("engine: memory\nmemory: {size: 1G}", "unknown key 'size'"),
        ] {
            let e = parse(text).unwrap_err().to_string();
            assert!(e.contains(msg), "{text}: {e}");
        }
    }

    #[test]
    fn minimal_local_and_defaults() {
        let l = local(parse("spaces:\n- roots:\n  - path: /data/fdb1\n").unwrap());
        assert_eq!((l.engine.as_str(), l.store.as_str()), ("toc", "file"));
        assert_eq!(l.spaces.len(), 1);
        let s = &l.spaces[0];
        assert_eq!((s.regex.as_str(), s.handler.as_str()), (".*", "Default"));
        let r = &s.roots[0];
        assert_eq!(r.path, PathBuf::from("/data/fdb1"));
        assert!(r.writable && r.visit && r.list && r.retrieve && r.archive && r.wipe);
        assert_eq!(l.actions, Actions::default());
        assert!(
            l.schema.is_none(),
            "/home/fdb/etc/fdb/schema does not exist"
        );
    }

    #[test]
    fn tier_limits_and_their_default_handler() {
        let l = local(
            parse("spaces: [{roots: [{path: /f, capacity: 10GiB, max_fill: 90%, max_age: 2w}, {path: /s}]}]")
                .unwrap(),
        );
        let s = &l.spaces[0];
        assert_eq!(s.handler, "Fill");
        let f = &s.roots[0];
        assert_eq!(
            (f.capacity, f.max_fill, f.max_age_days),
            (Some(10 << 30), Some(90), Some(14))
        );
        assert!(!s.roots[1].has_limits());
        // Given explicitly, the handler stays; without limits it is Default.
        let l = local(
            parse("spaces: [{handler: RoundRobin, roots: [{path: /f, max_age: 30}]}]").unwrap(),
        );
        assert_eq!(l.spaces[0].handler, "RoundRobin");
        assert_eq!(l.spaces[0].roots[0].max_age_days, Some(30));
        assert_eq!(
            local(parse("spaces: [{roots: [{path: /f}]}]").unwrap()).spaces[0].handler,
            "Default"
        );
        assert_eq!(parse_percent("100"), Some(100));
        assert_eq!(parse_percent("0%"), None);
        assert_eq!(parse_days("1y"), Some(365));
    }

    #[test]
    fn a_file_config_knows_where_to_read_its_spaces_again() {
        let d = tempfile::tempdir().unwrap();
        let f = d.path().join("c.yaml");
        std::fs::write(
            &f,
            "type: select
fdbs:
- {select: class=od, spaces: [{roots: [{path: /a}]}]}
- {select: class=rd, spaces: [{roots: [{path: /b}]}]}
",
        )
        .unwrap();
        let c = from_file_with(&f, &|_| None).unwrap();
        let FdbConfig::Select { lanes, .. } = c else {
            panic!("{c:?}")
        };
        let second = local(lanes[1].config.clone()).spaces_source.unwrap();
        assert_eq!(second.local_index, 1);
        std::fs::write(
            &f,
            "type: select
fdbs:
- {select: class=od, spaces: [{roots: [{path: /a}]}]}
- {select: class=rd, spaces: [{roots: [{path: /new}, {path: /b}]}]}
",
        )
        .unwrap();
        let spaces = spaces_from_file(&second, &|_| None).unwrap();
        assert_eq!(spaces[0].roots[0].path, PathBuf::from("/new"));
        std::fs::write(
            &f,
            "spaces: [{roots: [{path: /a}]}]
",
        )
        .unwrap();
        let err = spaces_from_file(&second, &|_| None)
            .unwrap_err()
            .to_string();
        assert!(err.contains("no longer has local config number 2"), "{err}");
    }

    #[test]
    fn full_local_from_the_reference() {
        let text = "type: local\nengine: toc\nstore: file\nschema: ~fdb/etc/fdb/schema\n\
            spaces:\n- name: od\n  regex: \"od:.*\"\n  handler: RoundRobin\n  roots:\n\
            \x20 - path: /data/fdb1\n    name: r1\n    writable: true\n    visit: true\n\
            \x20 - path: rel\n    writable: false\n    wipe: true\n\
            writable: no\nstatistics: true\npermissions: 0644\ntocSerialisationVersion: 3\n";
        let l = local(parse(text).unwrap());
        assert_eq!(l.schema, Some(PathBuf::from("/home/fdb/etc/fdb/schema")));
        assert_eq!(l.spaces[0].name.as_deref(), Some("od"));
        assert_eq!(l.spaces[0].handler, "RoundRobin");
        let r1 = &l.spaces[0].roots[1];
        assert_eq!(r1.path, PathBuf::from("/base/rel"));
        assert!(!r1.writable && !r1.archive && r1.wipe && r1.list);
        assert!(!l.writable && !l.actions.archive && !l.actions.wipe && l.actions.list);
        assert!(l.statistics);
        assert_eq!(l.permissions, Some(0o644));
        assert_eq!(
            local(parse("permissions: \"0640\"\nspaces: [{roots: [{path: /a}]}]").unwrap())
                .permissions,
            Some(0o640)
        );
    }

    #[test]
    fn flow_style_inline_and_json() {
        let l =
            local(parse("{type: local, schema: /s, spaces: [{roots: [{path: ~/r}]}]}").unwrap());
        assert_eq!(l.spaces[0].roots[0].path, PathBuf::from("/u/r"));
        assert_eq!(l.schema, Some(PathBuf::from("/s")));
        let j = r#"{"type": "local", "spaces": [{"roots": [{"path": "/j", "visit": false}]}]}"#;
        let l = local(parse(j).unwrap());
        assert!(!l.spaces[0].roots[0].list && l.spaces[0].roots[0].archive);
    }

    #[test]
    fn select_with_two_lanes_and_schema_injection() {
        let text = "type: select\nschema: /s\nfdbs:\n- select: class=od\n  excludes: [\"expver=0099\"]\n\
            \x20 spaces: [{roots: [{path: /a}]}]\n- select: class=rd,expver=xx.?.?\n  type: remote\n\
            \x20 host: fdb-minus\n  port: 7655\n- select: class=ea\n  schema: /own\n  spaces: [{roots: [{path: /b}]}]\n";
        let FdbConfig::Select { schema, lanes } = parse(text).unwrap() else {
            panic!()
        };
        assert_eq!(schema, Some(PathBuf::from("/s")));
        assert_eq!(lanes.len(), 3);
        assert_eq!(lanes[0].excludes, vec!["expver=0099".to_string()]);
        assert!(
            matches!(&lanes[0].config, FdbConfig::Local(l) if l.schema == Some(PathBuf::from("/s")))
        );
        assert!(
            matches!(&lanes[1].config, FdbConfig::Remote { host, port: 7655, .. } if host == "fdb-minus")
        );
        assert!(
            matches!(&lanes[2].config, FdbConfig::Local(l) if l.schema == Some(PathBuf::from("/own")))
        );
    }

    #[test]
    fn schema_injection_reaches_nested_locals_and_beats_the_env_default() {
        let text = "type: routing\nschema: /s\nfdb:\n- select: class=od\n  type: dist\n  lanes:\n  - spaces: [{roots: [{path: /a}]}]\n";
        let env = [("FDB_SCHEMA_FILE", "/env-schema")];
        let FdbConfig::Select { lanes, .. } = parse_env(text, &env).unwrap() else {
            panic!()
        };
        let FdbConfig::Dist { lanes, .. } = &lanes[0].config else {
            panic!()
        };
        assert!(
            matches!(&lanes[0].config, FdbConfig::Local(l) if l.schema == Some(PathBuf::from("/s")))
        );
        let l = local(parse_env("spaces: [{roots: [{path: /a}]}]", &env).unwrap());
        assert_eq!(l.schema, Some(PathBuf::from("/env-schema")));
    }

    #[test]
    fn schema_default_from_fdb_home_when_present() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc/fdb")).unwrap();
        std::fs::write(dir.path().join("etc/fdb/schema"), "").unwrap();
        let h = dir.path().to_str().unwrap();
        let l = local(parse_env("spaces: [{roots: [{path: /a}]}]", &[("FDB5_HOME", h)]).unwrap());
        assert_eq!(l.schema, Some(dir.path().join("etc/fdb/schema")));
        let text = format!("fdb_home: {h}\nspaces: [{{roots: [{{path: ~fdb/data}}]}}]");
        let l = local(parse_env(&text, &[("FDB_HOME", "/elsewhere")]).unwrap());
        assert_eq!(l.schema, Some(dir.path().join("etc/fdb/schema")));
        assert_eq!(l.spaces[0].roots[0].path, dir.path().join("data"));
    }

    #[test]
    fn dist_mirror_filter_remote() {
        let c = parse("type: dist\nhash: database\nlanes:\n- {type: remote, host: a}\n- {type: remote, host: b, id: x}\n- {name: n, spaces: [{roots: [{path: /c}]}]}\n").unwrap();
        let FdbConfig::Dist { lanes, hash } = c else {
            panic!()
        };
        let ids: Vec<&str> = lanes.iter().map(|l| l.id.as_str()).collect();
        assert_eq!((ids, hash), (vec!["0", "x", "n"], DistHash::Database));
        assert!(matches!(
            &lanes[0].config,
            FdbConfig::Remote {
                port: 7654,
                token: None,
                ..
            }
        ));
        let c = parse("type: remote\nhost: h\nport: \"7000\"\ntoken: s3cret").unwrap();
        assert_eq!(
            c,
            FdbConfig::Remote {
                host: "h".into(),
                port: 7000,
                socket: None,
                token: Some("s3cret".into()),
                tls: None,
            }
        );
        let c = parse("type: remote\nsocket: /run/fieldstore.sock").unwrap();
        assert!(
            matches!(c, FdbConfig::Remote { ref host, socket: Some(ref p), .. }
            if host == "localhost" && p == Path::new("/run/fieldstore.sock"))
        );
        let e = parse("type: remote\nport: 7000").unwrap_err().to_string();
        assert!(
            e.contains("missing required key 'host' (or 'socket'"),
            "{e}"
        );
        let e = parse("type: remote\nsocket: /s\ntls: {ca: /ca.pem}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'socket' and 'tls' do not go together"), "{e}");
        let c =
            parse("type: remote\nhost: h\ntls: {ca: /etc/ca.pem, server_name: store1}").unwrap();
        assert!(matches!(c, FdbConfig::Remote { tls: Some(ref t), .. }
            if t.ca == Path::new("/etc/ca.pem") && t.server_name.as_deref() == Some("store1")));
        let e = parse("type: remote\nhost: h\ntls: {server_name: x}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing required key 'ca'"), "{e}");
        let c = parse(
            "type: remote\nhost: h\ntls: {ca: /etc/ca.pem, cert: /etc/me.pem, key: /etc/me.key}",
        )
        .unwrap();
        assert!(matches!(c, FdbConfig::Remote { tls: Some(ref t), .. }
            if t.client == Some(("/etc/me.pem".into(), "/etc/me.key".into()))));
        assert_eq!(
            c.describe(),
            "remote h:7654 over TLS (CA /etc/ca.pem, client certificate /etc/me.pem)\n"
        );
        let e = parse("type: remote\nhost: h\ntls: {ca: /etc/ca.pem, cert: /etc/me.pem}")
            .unwrap_err()
            .to_string();
        assert!(e.contains("'cert' and 'key' go together"), "{e}");
        let c = parse("type: mirror\nquorum: 1\nfdbs:\n- {type: remote, host: a}\n- {type: remote, host: b}\n").unwrap();
        assert!(
            matches!(c, FdbConfig::Mirror { quorum: Some(1), ref children } if children.len() == 2)
        );
        let c = parse("type: filter\nselect: class=od\nexcludes: expver=0001\nfdbs: [{type: remote, host: a}]").unwrap();
        assert!(
            matches!(c, FdbConfig::Filter { select: Some(ref s), ref excludes, ref children }
            if s == "class=od" && excludes == &["expver=0001"] && children.len() == 1)
        );
        let c =
            parse("type: diagnostics\nreport: /tmp/r.txt\nfdb: {type: remote, host: a}").unwrap();
        assert!(
            matches!(c, FdbConfig::Diagnostics { report: Some(ref r), ref children }
            if r == Path::new("/tmp/r.txt") && children.len() == 1)
        );
        let c =
            parse("type: diagnostics\nfdbs: [{type: remote, host: a}, {type: remote, host: b}]")
                .unwrap();
        assert!(
            matches!(c, FdbConfig::Diagnostics { report: None, ref children } if children.len() == 2)
        );
        let e = parse(
            "type: diagnostics\nfdb: {type: remote, host: a}\nfdbs: [{type: remote, host: b}]",
        )
        .unwrap_err();
        assert!(e.to_string().contains("not both"), "{e}");
        let e = parse("type: diagnostics\nreprot: x\nfdb: {type: remote, host: a}").unwrap_err();
        assert!(e.to_string().contains("did you mean 'report'"), "{e}");
    }

    #[test]
    fn errors_name_the_path() {
        let cases = [
            ("spaces: [{roots: [{path: /a}, {path: /b, wrtable: true}]}]", "config t.yaml: spaces[0].roots[1]: unknown key 'wrtable' (did you mean 'writable'?)"),
            ("spaces: [{roots: [{path: /a}, {name: x}]}]", "config t.yaml: spaces[0].roots[1]: missing required key 'path'"),
            ("type: lcal\nspaces: []", "config t.yaml: type: unknown type 'lcal' (known: local, catalogue, select, routing, dist, remote, mirror, filter, diagnostics) (did you mean 'local'?)"),
            ("type: random\nfdbs: []", "config t.yaml: type: type 'random' is an FDB5 frontend fieldstore does not implement (known: local, catalogue, select, routing, dist, remote, mirror, filter, diagnostics)"),
            ("spaces: []", "config t.yaml: spaces: no spaces: at least one space with one root is needed"),
            ("spaces: [{roots: []}]", "config t.yaml: spaces[0].roots: no roots: at least one root directory is needed"),
            ("type: local", "config t.yaml: missing required key 'spaces' (where the data goes: spaces: [{roots: [{path: /dir}]}])"),
            ("spaces: [{roots: [{path: /a, writable: maybe}]}]", "config t.yaml: spaces[0].roots[0].writable: expected true or false, found a string"),
            ("spaces: [{roots: [{path: [a]}]}]", "config t.yaml: spaces[0].roots[0].path: expected a string, found a list"),
            ("spaces: [{roots: {path: /a}}]", "config t.yaml: spaces[0].roots: expected a list, found a mapping"),
            ("spaces: [{regex: '(', roots: [{path: /a}]}]", "config t.yaml: spaces[0].regex: invalid regular expression: regex parse error:\n    (\n    ^\nerror: unclosed group"),
            ("spaces: [{handler: RoundRobbin, roots: [{path: /a}]}]", "config t.yaml: spaces[0].handler: unknown handler 'RoundRobbin' (known: Default, First, Fill, LeastUsed, LeastUsedPercent, RoundRobin, Random, PureRandom, WeightedRandom, WeightedRandomPercent) (did you mean 'RoundRobin'?)"),
            ("spaces: [{catalogueRoots: [], roots: [{path: /a}]}]", "config t.yaml: spaces[0]: 'catalogueRoots' is an FDB5 setting fieldstore does not support: separate catalogue and store roots are not supported; use roots"),
            ("spaces: [{roots: [{path: ~bob/x}]}]", "config t.yaml: spaces[0].roots[0].path: cannot expand '~bob/x': only ~fdb/ and ~/ are understood"),
            ("engine: daos\nspaces: [{roots: [{path: /a}]}]", "config t.yaml: engine: unsupported engine 'daos' (supported: toc, memory, s3)"),
            ("permissions: rw\nspaces: [{roots: [{path: /a}]}]", "config t.yaml: permissions: 'rw' is not an octal file mode like \"0644\""),
            ("type: remote\nhost: h\nport: 99999", "config t.yaml: port: port 99999 is not in 1-65535"),
            ("type: remote\nport: 1", "config t.yaml: missing required key 'host' (or 'socket', the Unix socket of a server on this host)"),
            ("type: select\nfdbs: [{spaces: [{roots: [{path: /a}]}]}]", "config t.yaml: fdbs[0]: missing required key 'select' (e.g. select: class=od,stream=oper)"),
            ("type: select\nfdbs: [{select: class, type: remote, host: h}]", "config t.yaml: fdbs[0].select: 'class' is not keyword=regex"),
            ("type: select\nfdbs: [{select: class=od, excludes: [1], type: remote, host: h}]", "config t.yaml: fdbs[0].excludes[0]: expected a string, found a number"),
            ("type: select\nwritable: false\nfdbs: [{select: class=od, type: remote, host: h}]", "config t.yaml: 'writable' is only supported on type local (put it on the local child configs)"),
            ("type: select\nfdbs: [{select: class=od, type: remote, host: h, id: 3}]", "config t.yaml: fdbs[0]: unknown key 'id'"),
            ("type: select\nfdbs: []", "config t.yaml: fdbs: empty list: at least one child config is needed"),
            ("type: dist\nlanes: [{type: remote, host: a, id: x}, {type: remote, host: b, name: x}]", "config t.yaml: lanes[1]: lane id 'x' is already used by lanes[0]"),
            ("type: dist\nhash: feild\nlanes: [{type: remote, host: a}]", "config t.yaml: hash: unknown hash 'feild' (known: field, database) (did you mean 'field'?)"),
            ("type: dist\nlanes: [{type: remote, host: a, port: x}]", "config t.yaml: lanes[0].port: expected a whole number >= 0, found 'x'"),
            ("type: mirror\nquorum: 3\nfdbs: [{type: remote, host: a}]", "config t.yaml: quorum: quorum 3 is not between 1 and the 1 children"),
            ("type: filter\nselect: class=(\nfdbs: [{type: remote, host: a}]", "config t.yaml: select: invalid regular expression '(' for class: regex parse error:\n    (\n    ^\nerror: unclosed group"),
            ("select: class=od\nspaces: [{roots: [{path: /a}]}]", "config t.yaml: unknown key 'select'"),
            ("- a\n- b", "config t.yaml: expected a mapping, found a list"),
            ("", "config t.yaml: expected a mapping, found nothing"),
            ("a: [1, 2\nb: 3", "config t.yaml: invalid YAML: illegal placement of ':' indicator at line 2, column 2"),
            ("spaces: []\nspaces: []", "config t.yaml: invalid YAML: duplicate mapping key: spaces at line 2, column 1"),
        ];
        for (text, msg) in cases {
            assert_eq!(parse(text).unwrap_err().to_string(), msg, "{text}");
        }
    }

    #[test]
    fn tilde_and_relative_paths() {
        let text = "spaces: [{roots: [{path: ~fdb/a}, {path: ~/b}, {path: c/d}, {path: /e}, {path: ~fdb}]}]";
        let paths = |pairs: &[(&str, &str)]| -> Vec<PathBuf> {
            local(parse_env(text, pairs).unwrap()).spaces[0]
                .roots
                .iter()
                .map(|r| r.path.clone())
                .collect()
        };
        let p = paths(&[("FDB_HOME", "/h1"), ("FDB5_HOME", "/h5"), ("HOME", "/u")]);
        let expect = ["/h1/a", "/u/b", "/base/c/d", "/e", "/h1"];
        assert_eq!(p, expect.map(PathBuf::from));
        assert_eq!(
            paths(&[("FDB5_HOME", "/h5"), ("HOME", "/u")])[0],
            PathBuf::from("/h5/a")
        );
        // Like FDB5 installed under /usr.
        assert_eq!(paths(&[("HOME", "/u")])[0], PathBuf::from("/a"));
        let e = parse_env(text, &[]).unwrap_err().to_string();
        assert_eq!(
            e,
            "config t.yaml: spaces[0].roots[1].path: cannot expand '~/b': HOME is not set"
        );
        let l = local(
            from_yaml_str_with("spaces: [{roots: [{path: rel}]}]", "x", None, &env_of(&[]))
                .unwrap(),
        );
        assert_eq!(l.spaces[0].roots[0].path, PathBuf::from("rel"));
    }

    #[test]
    fn from_file_resolves_against_its_directory() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("config.yaml");
        std::fs::write(&f, "spaces: [{roots: [{path: data}]}]").unwrap();
        let l = local(from_file_with(&f, &env_of(&[])).unwrap());
        assert_eq!(l.spaces[0].roots[0].path, dir.path().join("data"));
        let e = from_file_with(&dir.path().join("nope.yaml"), &env_of(&[])).unwrap_err();
        assert!(e.to_string().contains("nope.yaml: cannot read:"), "{e}");
    }

    #[test]
    fn nasty_inputs_are_errors_not_panics() {
        let deep_flow = "[".repeat(100_000);
        let deep_map = "{a: ".repeat(5_000);
        let deep_block: String = (0..300).map(|i| format!("{}k:\n", " ".repeat(i))).collect();
        let laughs = "a: &a [x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c]\n";
        let nasty = [
            "{",
            ": : :",
            "[[[[",
            "!!binary x",
            "a: *b",
            "\t- x",
            "spaces: {roots: 1}",
            "spaces: [1]",
            "spaces: [[]]",
            "spaces: [{roots: [1]}]",
            "spaces: [{roots: [[]]}]",
            "type: [local]",
            "type: 1",
            "type: ~",
            "? [a]\n: b",
            "1: 2",
            "a: 1\na: 2",
            "spaces: [{roots: [{path: ''}]}]",
            "type: select\nfdbs: [1]",
            "type: dist\nlanes: [~]",
            "type: remote\nhost: h\nport: -1",
            "type: remote\nhost: h\nport: 1.5",
            "type: mirror\nquorum: -2\nfdbs: [{type: remote, host: a}]",
            "\u{feff}\u{0}",
            "permissions: 99999999999999999999\nspaces: [{roots: [{path: /a}]}]",
            "---\na: 1\n---\nb: 2",
            "%YAML 9.9\n---\n{}",
            ".nan",
            "!!str",
            "&a [*a]",
            deep_flow.as_str(),
            deep_map.as_str(),
            deep_block.as_str(),
            laughs,
        ];
        for text in nasty {
            assert!(parse(text).is_err(), "{text:.80}");
        }
    }

    proptest::proptest! {
        #[test]
        fn never_panics_on_any_text(text in "\\PC{0,200}") {
            let _ = parse(&text);
        }

        #[test]
        fn never_panics_on_yaml_token_soup(parts in proptest::collection::vec(proptest::sample::select(vec![
            "type: ", "local", "select", "dist", "remote", "mirror", "filter", "routing", "spaces:", "roots:",
            "fdbs:", "lanes:", "fdb:", "path: ", "/a", "~fdb/x", "~/y", "rel", "select: ", "class=od",
            "excludes: ", "host: h", "port: ", "7654", "quorum: ", "1", "[", "]", "{", "}", ", ", ": ",
            "- ", "\n", "  ", "&a ", "*a", "writable: ", "false", "id: ", "schema: ", "'", "\"", "#",
        ]), 0..60)) {
            let _ = parse(&parts.concat());
        }
    }

    #[test]
    fn nearest_suggests_only_close_words() {
        assert_eq!(nearest("wrtable", &["writable", "visit"]), Some("writable"));
        assert_eq!(nearest("ROOTS", &["roots"]), Some("roots"));
        assert_eq!(nearest("zzzzzz", &["roots", "path"]), None);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("", "abc"), 3);
    }

    #[test]
    fn selection_syntax() {
        assert_eq!(
            parse_selection("class=od, stream=oper/enfo").unwrap(),
            vec![
                ("class".to_string(), vec!["od".to_string()]),
                (
                    "stream".to_string(),
                    vec!["oper".to_string(), "enfo".to_string()]
                )
            ]
        );
        assert!(parse_selection("class=od,").is_err());
        assert!(parse_selection("=od").is_err());
    }
}
