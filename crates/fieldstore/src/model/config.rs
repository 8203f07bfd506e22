//! FDB5-compatible YAML configuration: the typed tree frontends are built from, and how it is found.
//!
//! Every error names the YAML path (`spaces[0].roots[1].path`) and where the text came from,
//! because FDB5 users lose hours to configs that are silently ignored or half read.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("config {origin}: {path}{sep}{message}", sep = if path.is_empty() { "" } else { ": " })]
pub struct ConfigError {
    /// Where the YAML came from: a file, an environment variable.
    pub origin: String,
    /// The YAML path of the offending item, empty for the whole document.
    pub path: String,
    pub message: String,
}

/// One root directory of a space.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    pub path: PathBuf,
    pub name: Option<String>,
    pub list: bool,
    pub retrieve: bool,
    pub archive: bool,
    pub wipe: bool,
}

impl Root {
    pub fn writable(&self) -> bool {
        self.archive
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Space {
    pub name: Option<String>,
    /// Matched (unanchored) against the database fingerprint `v1:v2:...`.
    pub regex: String,
    pub handler: String,
    pub roots: Vec<Root>,
}

/// Frontend-level switches (FDB5's `writable`, `visitable` and per-action flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Actions {
    pub list: bool,
    pub retrieve: bool,
    pub archive: bool,
    pub wipe: bool,
}

impl Default for Actions {
    fn default() -> Self {
        Actions {
            list: true,
            retrieve: true,
            archive: true,
            wipe: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalConfig {
    pub engine: String,
    pub store: String,
    /// `None`: fieldstore's built-in default schema.
    pub schema: Option<PathBuf>,
    pub spaces: Vec<Space>,
    pub actions: Actions,
    pub permissions: Option<String>,
    pub statistics: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectLane {
    /// `class=od,stream=oper/enfo`: values are regular expressions.
    pub select: String,
    pub excludes: Vec<String>,
    pub config: FdbConfig,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistLane {
    pub id: String,
    pub config: FdbConfig,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DistHash {
    /// FDB5's DistFDB: the full field key.
    Field,
    /// Keep each database on one lane.
    Database,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FdbConfig {
    Local(LocalConfig),
    Select {
        schema: Option<PathBuf>,
        lanes: Vec<SelectLane>,
    },
    Dist {
        lanes: Vec<DistLane>,
        hash: DistHash,
    },
    Remote {
        host: String,
        port: u16,
        token: Option<String>,
    },
    Mirror {
        children: Vec<FdbConfig>,
        quorum: Option<usize>,
    },
    Filter {
        select: Option<String>,
        excludes: Vec<String>,
        child: Box<FdbConfig>,
    },
}

const TYPES: &[&str] = &[
    "local",
    "catalogue",
    "select",
    "routing",
    "dist",
    "remote",
    "mirror",
    "filter",
];

/// Where a loaded config came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    Explicit(PathBuf),
    EnvInline(String),
    EnvFile(String, PathBuf),
    Home(PathBuf),
    Default,
}

impl fmt::Display for ConfigSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigSource::Explicit(p) => write!(f, "{} (--config)", p.display()),
            ConfigSource::EnvInline(v) => write!(f, "inline YAML in ${v}"),
            ConfigSource::EnvFile(v, p) => write!(f, "{} (from ${v})", p.display()),
            ConfigSource::Home(p) => write!(f, "{} (FDB home)", p.display()),
            ConfigSource::Default => f.write_str("embedded default (no config found)"),
        }
    }
}

#[derive(Debug, Clone)]
pub struct LoadedConfig {
    pub config: FdbConfig,
    pub source: ConfigSource,
    /// Every place looked at, in order, and why it was or was not used.
    pub explanation: Vec<String>,
}

pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Parses config text. `base` resolves relative paths (the config file's directory).
pub fn from_yaml_str(
    text: &str,
    origin: &str,
    base: Option<&Path>,
    env: Env,
) -> Result<FdbConfig, ConfigError> {
    let value: Value = serde_saphyr::from_str(text).map_err(|e| ConfigError {
        origin: origin.to_string(),
        path: String::new(),
        message: format!("invalid YAML: {e}"),
    })?;
    let cx = Walk { origin, base, env };
    cx.fdb(&value, "")
}

pub fn from_file(path: &Path, env: Env) -> Result<FdbConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
        origin: path.display().to_string(),
        path: String::new(),
        message: format!("cannot read: {e}"),
    })?;
    from_yaml_str(&text, &path.display().to_string(), path.parent(), env)
}

/// The config used when none is found: a local toc store under the user's data directory with
/// the built-in schema, so `fieldstore write some.grib` just works.
pub fn embedded_default(env: Env) -> FdbConfig {
    let dir = env("XDG_DATA_HOME")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".local/share")))
        .unwrap_or_else(|| PathBuf::from("."))
        .join("fieldstore");
    FdbConfig::Local(LocalConfig {
        engine: "toc".into(),
        store: "file".into(),
        schema: None,
        spaces: vec![Space {
            name: None,
            regex: ".*".into(),
            handler: "Default".into(),
            roots: vec![Root {
                path: dir,
                name: None,
                list: true,
                retrieve: true,
                archive: true,
                wipe: true,
            }],
        }],
        actions: Actions::default(),
        permissions: None,
        statistics: false,
    })
}

/// Finds the config the way FDB5 does (newest FDB's `FDB_*` names winning over `FDB5_*`):
/// explicit file, inline YAML variable, file variable, FDB home, embedded default.
pub fn discover(explicit: Option<&Path>, env: Env) -> Result<LoadedConfig, ConfigError> {
    let mut why = Vec::new();
    if let Some(p) = explicit {
        why.push(format!(
            "--config {}: used (an explicit config wins over the environment)",
            p.display()
        ));
        return Ok(LoadedConfig {
            config: from_file(p, env)?,
            source: ConfigSource::Explicit(p.to_path_buf()),
            explanation: why,
        });
    }
    why.push("--config: not given".into());
    for var in ["FDB_CONFIG", "FDB5_CONFIG"] {
        match env(var) {
            Some(text) => {
                why.push(format!("{var}: set, used (inline YAML)"));
                let origin = format!("${var}");
                return Ok(LoadedConfig {
                    config: from_yaml_str(&text, &origin, None, env)?,
                    source: ConfigSource::EnvInline(var.into()),
                    explanation: why,
                });
            }
            None => why.push(format!("{var}: not set")),
        }
    }
    for var in ["FDB_CONFIG_FILE", "FDB5_CONFIG_FILE"] {
        match env(var) {
            Some(p) => {
                let path = PathBuf::from(&p);
                if !path.exists() {
                    return Err(ConfigError {
                        origin: format!("${var}"),
                        path: String::new(),
                        message: format!("{var}={p}: no such file (FDB5 would silently ignore this; fieldstore refuses)"),
                    });
                }
                why.push(format!("{var}={p}: used"));
                if var == "FDB_CONFIG_FILE" && env("FDB5_CONFIG_FILE").is_some() {
                    why.push("FDB5_CONFIG_FILE is set too; FDB_CONFIG_FILE wins".into());
                }
                return Ok(LoadedConfig {
                    config: from_file(&path, env)?,
                    source: ConfigSource::EnvFile(var.into(), path),
                    explanation: why,
                });
            }
            None => why.push(format!("{var}: not set")),
        }
    }
    for var in ["FDB_HOME", "FDB5_HOME"] {
        match env(var) {
            Some(home) => {
                for name in ["config.yaml", "config.json"] {
                    let p = Path::new(&home).join("etc/fdb").join(name);
                    if p.exists() {
                        why.push(format!("{var}={home}: {} used", p.display()));
                        return Ok(LoadedConfig {
                            config: from_file(&p, env)?,
                            source: ConfigSource::Home(p),
                            explanation: why,
                        });
                    }
                }
                why.push(format!(
                    "{var}={home}: no etc/fdb/config.yaml or config.json there"
                ));
                break;
            }
            None => why.push(format!("{var}: not set")),
        }
    }
    why.push("nothing found: using the embedded default".into());
    Ok(LoadedConfig {
        config: embedded_default(env),
        source: ConfigSource::Default,
        explanation: why,
    })
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

/// The closest known key, for "did you mean" hints.
fn nearest<'k>(word: &str, known: &[&'k str]) -> Option<&'k str> {
    fn dist(a: &str, b: &str) -> usize {
        let b: Vec<char> = b.chars().collect();
        let mut row: Vec<usize> = (0..=b.len()).collect();
        for (i, ca) in a.chars().enumerate() {
            let mut prev = row[0];
            row[0] = i + 1;
            for (j, cb) in b.iter().enumerate() {
                let cur = row[j + 1];
                row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
                prev = cur;
            }
        }
        row[b.len()]
    }
    known
        .iter()
        .map(|k| (dist(word, k), *k))
        .filter(|(d, k)| *d <= 2.max(k.len() / 3))
        .min()
        .map(|(_, k)| k)
}

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
    ) -> Result<&'v serde_json::Map<String, Value>, ConfigError> {
        let m = v
            .as_object()
            .ok_or_else(|| self.err(path, format!("expected a mapping, found {}", kind(v))))?;
        for k in m.keys() {
            if !known.contains(&k.as_str()) {
                let hint =
                    nearest(k, known).map_or(String::new(), |n| format!(" (did you mean '{n}'?)"));
                return Err(self.err(path, format!("unknown key '{k}'{hint}")));
            }
        }
        Ok(m)
    }

    fn string(
        &self,
        m: &serde_json::Map<String, Value>,
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
        m: &serde_json::Map<String, Value>,
        key: &str,
        path: &str,
        default: bool,
    ) -> Result<bool, ConfigError> {
        match m.get(key) {
            None | Some(Value::Null) => Ok(default),
            Some(Value::Bool(b)) => Ok(*b),
            Some(Value::String(s)) if matches!(s.as_str(), "yes" | "true" | "on") => Ok(true),
            Some(Value::String(s)) if matches!(s.as_str(), "no" | "false" | "off") => Ok(false),
            Some(v) => Err(self.err(
                &join(path, key),
                format!("expected true or false, found {}", kind(v)),
            )),
        }
    }

    fn list<'v>(
        &self,
        m: &'v serde_json::Map<String, Value>,
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

    fn path_value(&self, raw: &str, fdb_home: Option<&str>) -> PathBuf {
        let home = fdb_home
            .map(str::to_string)
            .or_else(|| (self.env)("FDB_HOME"))
            .or_else(|| (self.env)("FDB5_HOME"));
        if let Some(rest) = raw.strip_prefix("~fdb") {
            if let Some(h) = home {
                return PathBuf::from(format!("{h}{rest}"));
            }
        }
        if let Some(rest) = raw.strip_prefix("~/") {
            if let Some(h) = (self.env)("HOME") {
                return Path::new(&h).join(rest);
            }
        }
        let p = PathBuf::from(raw);
        match self.base {
            Some(b) if p.is_relative() => b.join(p),
            _ => p,
        }
    }

    fn fdb(&self, v: &Value, path: &str) -> Result<FdbConfig, ConfigError> {
        let obj = v
            .as_object()
            .ok_or_else(|| self.err(path, format!("expected a mapping, found {}", kind(v))))?;
        let ty = self
            .string(obj, "type", path)?
            .unwrap_or_else(|| "local".into());
        const COMMON: &[&str] = &[
            "type",
            "name",
            "id",
            "select",
            "excludes",
            "writable",
            "visitable",
            "list",
            "retrieve",
            "archive",
            "wipe",
            "fdb_home",
            "statistics",
        ];
        let with =
            |extra: &[&'static str]| -> Vec<&str> { COMMON.iter().chain(extra).copied().collect() };
        match ty.as_str() {
            "local" | "catalogue" => {
                let m = self.map(
                    v,
                    path,
                    &with(&[
                        "engine",
                        "store",
                        "schema",
                        "spaces",
                        "permissions",
                        "tocSerialisationVersion",
                        "useSubToc",
                        "serverPort",
                    ]),
                )?;
                let fdb_home = self.string(m, "fdb_home", path)?;
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
                if engine != "toc" {
                    return Err(self.err(
                        &join(path, "engine"),
                        format!("unsupported engine '{engine}' (supported: toc)"),
                    ));
                }
                let store = self
                    .string(m, "store", path)?
                    .unwrap_or_else(|| "file".into());
                if store != "file" {
                    return Err(self.err(
                        &join(path, "store"),
                        format!("unsupported store '{store}' (supported: file)"),
                    ));
                }
                let schema = match self.string(m, "schema", path)? {
                    Some(s) => Some(self.path_value(&s, fdb_home.as_deref())),
                    None => (self.env)("FDB_SCHEMA_FILE").map(PathBuf::from),
                };
                let spaces_path = join(path, "spaces");
                let spaces = match self.list(m, "spaces", path)? {
                    None => return Err(self.err(path, "missing required key 'spaces' (where the data goes: spaces: [{roots: [{path: /dir}]}])")),
                    Some(list) if list.is_empty() => return Err(self.err(&spaces_path, "no spaces: at least one space with one root is needed")),
                    Some(list) => list
                        .iter()
                        .enumerate()
                        .map(|(i, s)| self.space(s, &format!("{spaces_path}[{i}]"), fdb_home.as_deref()))
                        .collect::<Result<Vec<_>, _>>()?,
                };
                Ok(FdbConfig::Local(LocalConfig {
                    engine,
                    store,
                    schema,
                    spaces,
                    actions,
                    permissions: self.string(m, "permissions", path)?,
                    statistics: self.boolean(m, "statistics", path, false)?,
                }))
            }
            "select" | "routing" => {
                let key = if ty == "routing" { "fdb" } else { "fdbs" };
                let m = self.map(v, path, &with(&["schema", key]))?;
                let schema = self
                    .string(m, "schema", path)?
                    .map(|s| self.path_value(&s, None));
                let lanes = self.children(m, key, path)?;
                let mut out = Vec::new();
                for (i, lane) in lanes.iter().enumerate() {
                    let lp = format!("{}[{i}]", join(path, key));
                    let lm = lane
                        .as_object()
                        .ok_or_else(|| self.err(&lp, "expected a mapping"))?;
                    let select = self.string(lm, "select", &lp)?.ok_or_else(|| {
                        self.err(
                            &lp,
                            "missing required key 'select' (e.g. select: class=od,stream=oper)",
                        )
                    })?;
                    let mut config = self.fdb(lane, &lp)?;
                    if let (FdbConfig::Local(l), Some(s)) = (&mut config, &schema) {
                        if l.schema.is_none() {
                            l.schema = Some(s.clone());
                        }
                    }
                    out.push(SelectLane {
                        select,
                        excludes: self.strings(lm, "excludes", &lp)?,
                        config,
                    });
                }
                Ok(FdbConfig::Select { schema, lanes: out })
            }
            "dist" => {
                let m = self.map(v, path, &with(&["lanes", "hash"]))?;
                let hash = match self.string(m, "hash", path)?.as_deref() {
                    None | Some("field") => DistHash::Field,
                    Some("database") => DistHash::Database,
                    Some(h) => {
                        return Err(self.err(
                            &join(path, "hash"),
                            format!("unknown hash '{h}' (known: field, database)"),
                        ))
                    }
                };
                let lanes = self.children(m, "lanes", path)?;
                let mut out = Vec::new();
                for (i, lane) in lanes.iter().enumerate() {
                    let lp = format!("{}[{i}]", join(path, "lanes"));
                    let lm = lane
                        .as_object()
                        .ok_or_else(|| self.err(&lp, "expected a mapping"))?;
                    let id = self
                        .string(lm, "id", &lp)?
                        .or(self.string(lm, "name", &lp)?)
                        .unwrap_or_else(|| i.to_string());
                    out.push(DistLane {
                        id,
                        config: self.fdb(lane, &lp)?,
                    });
                }
                Ok(FdbConfig::Dist { lanes: out, hash })
            }
            "remote" => {
                let m = self.map(
                    v,
                    path,
                    &with(&["host", "port", "token", "engine", "store"]),
                )?;
                let host = self
                    .string(m, "host", path)?
                    .ok_or_else(|| self.err(path, "missing required key 'host'"))?;
                let port = match m.get("port") {
                    None => 7654,
                    Some(Value::Number(n)) => n
                        .as_u64()
                        .and_then(|p| u16::try_from(p).ok())
                        .ok_or_else(|| {
                            self.err(&join(path, "port"), format!("port {n} is not in 0-65535"))
                        })?,
                    Some(v) => {
                        return Err(self.err(
                            &join(path, "port"),
                            format!("expected a port number, found {}", kind(v)),
                        ))
                    }
                };
                Ok(FdbConfig::Remote {
                    host,
                    port,
                    token: self.string(m, "token", path)?,
                })
            }
            "mirror" => {
                let m = self.map(v, path, &with(&["fdbs", "quorum"]))?;
                let children = self.children(m, "fdbs", path)?;
                let children = children
                    .iter()
                    .enumerate()
                    .map(|(i, c)| self.fdb(c, &format!("{}[{i}]", join(path, "fdbs"))))
                    .collect::<Result<Vec<_>, _>>()?;
                let quorum = match m.get("quorum") {
                    None => None,
                    Some(Value::Number(n)) => Some(n.as_u64().ok_or_else(|| {
                        self.err(&join(path, "quorum"), "expected a positive integer")
                    })? as usize),
                    Some(v) => {
                        return Err(self.err(
                            &join(path, "quorum"),
                            format!("expected a number, found {}", kind(v)),
                        ))
                    }
                };
                Ok(FdbConfig::Mirror { children, quorum })
            }
            "filter" => {
                let m = self.map(v, path, &with(&["fdb"]))?;
                let child = m.get("fdb").ok_or_else(|| {
                    self.err(
                        path,
                        "missing required key 'fdb' (the config the filter forwards to)",
                    )
                })?;
                Ok(FdbConfig::Filter {
                    select: self.string(m, "select", path)?,
                    excludes: self.strings(m, "excludes", path)?,
                    child: Box::new(self.fdb(child, &join(path, "fdb"))?),
                })
            }
            other => Err(self.err(
                &join(path, "type"),
                format!("unknown type '{other}' (known: {})", TYPES.join(", ")),
            )),
        }
    }

    fn children<'v>(
        &self,
        m: &'v serde_json::Map<String, Value>,
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

    fn strings(
        &self,
        m: &serde_json::Map<String, Value>,
        key: &str,
        path: &str,
    ) -> Result<Vec<String>, ConfigError> {
        match m.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::String(s)) => Ok(vec![s.clone()]),
            Some(Value::Array(a)) => a
                .iter()
                .enumerate()
                .map(|(i, v)| {
                    v.as_str().map(str::to_string).ok_or_else(|| {
                        self.err(&format!("{}[{i}]", join(path, key)), "expected a string")
                    })
                })
                .collect(),
            Some(v) => Err(self.err(
                &join(path, key),
                format!("expected a list of strings, found {}", kind(v)),
            )),
        }
    }

    fn space(&self, v: &Value, path: &str, fdb_home: Option<&str>) -> Result<Space, ConfigError> {
        let m = self.map(v, path, &["name", "regex", "handler", "roots"])?;
        let regex = self
            .string(m, "regex", path)?
            .unwrap_or_else(|| ".*".into());
        if let Err(e) = regex::Regex::new(&regex) {
            return Err(self.err(
                &join(path, "regex"),
                format!("invalid regular expression: {e}"),
            ));
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
        Ok(Space {
            name: self.string(m, "name", path)?,
            regex,
            handler: self
                .string(m, "handler", path)?
                .unwrap_or_else(|| "Default".into()),
            roots,
        })
    }

    fn root(&self, v: &Value, path: &str, fdb_home: Option<&str>) -> Result<Root, ConfigError> {
        let m = self.map(
            v,
            path,
            &[
                "path", "name", "writable", "visit", "list", "retrieve", "archive", "wipe",
            ],
        )?;
        let raw = self
            .string(m, "path", path)?
            .ok_or_else(|| self.err(path, "missing required key 'path'"))?;
        let writable = self.boolean(m, "writable", path, true)?;
        let visit = self.boolean(m, "visit", path, true)?;
        Ok(Root {
            path: self.path_value(&raw, fdb_home),
            name: self.string(m, "name", path)?,
            list: self.boolean(m, "list", path, visit)?,
            retrieve: self.boolean(m, "retrieve", path, visit)?,
            archive: self.boolean(m, "archive", path, writable)?,
            wipe: self.boolean(m, "wipe", path, writable)?,
        })
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

impl FdbConfig {
    /// A readable outline of the frontend tree, for `fieldstore info`.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        self.describe_into(&mut s, 0);
        s
    }

    fn describe_into(&self, s: &mut String, depth: usize) {
        let pad = "  ".repeat(depth);
        match self {
            FdbConfig::Local(l) => {
                let schema = l
                    .schema
                    .as_ref()
                    .map_or("built-in default".to_string(), |p| p.display().to_string());
                s.push_str(&format!(
                    "{pad}local (engine {}, store {}), schema: {schema}\n",
                    l.engine, l.store
                ));
                for sp in &l.spaces {
                    s.push_str(&format!(
                        "{pad}  space {} (regex {}, handler {})\n",
                        sp.name.as_deref().unwrap_or("-"),
                        sp.regex,
                        sp.handler
                    ));
                    for r in &sp.roots {
                        let flags: Vec<&str> = [
                            ("list", r.list),
                            ("retrieve", r.retrieve),
                            ("archive", r.archive),
                            ("wipe", r.wipe),
                        ]
                        .iter()
                        .filter(|(_, on)| *on)
                        .map(|(n, _)| *n)
                        .collect();
                        s.push_str(&format!(
                            "{pad}    root {} [{}]\n",
                            r.path.display(),
                            flags.join(",")
                        ));
                    }
                }
            }
            FdbConfig::Select { lanes, .. } => {
                s.push_str(&format!("{pad}select ({} lanes)\n", lanes.len()));
                for l in lanes {
                    s.push_str(&format!("{pad}  when {}:\n", l.select));
                    l.config.describe_into(s, depth + 2);
                }
            }
            FdbConfig::Dist { lanes, hash } => {
                s.push_str(&format!(
                    "{pad}dist ({} lanes, hash by {hash:?})\n",
                    lanes.len()
                ));
                for l in lanes {
                    s.push_str(&format!("{pad}  lane {}:\n", l.id));
                    l.config.describe_into(s, depth + 2);
                }
            }
            FdbConfig::Remote { host, port, token } => {
                s.push_str(&format!(
                    "{pad}remote {host}:{port}{}\n",
                    if token.is_some() { " (token)" } else { "" }
                ));
            }
            FdbConfig::Mirror { children, quorum } => {
                s.push_str(&format!(
                    "{pad}mirror ({} children, quorum {})\n",
                    children.len(),
                    quorum.map_or("all".into(), |q| q.to_string())
                ));
                for c in children {
                    c.describe_into(s, depth + 1);
                }
            }
            FdbConfig::Filter {
                select,
                excludes,
                child,
            } => {
                s.push_str(&format!(
                    "{pad}filter select={} excludes={:?}\n",
                    select.as_deref().unwrap_or("*"),
                    excludes
                ));
                child.describe_into(s, depth + 1);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    fn parse(text: &str) -> Result<FdbConfig, ConfigError> {
        from_yaml_str(
            text,
            "t.yaml",
            Some(Path::new("/base")),
            &env_of(&[("FDB_HOME", "/home/fdb"), ("HOME", "/u")]),
        )
    }

    #[test]
    fn fdb5_examples() {
        let c = parse("type: local\nengine: toc\nschema: ~fdb/etc/fdb/schema\nspaces:\n- handler: Default\n  roots:\n  - path: /data/fdb1\n  - path: rel\n    writable: false\n").unwrap();
        let FdbConfig::Local(l) = c else { panic!() };
        assert_eq!(l.schema.unwrap(), PathBuf::from("/home/fdb/etc/fdb/schema"));
        assert_eq!(l.spaces[0].roots[0].path, PathBuf::from("/data/fdb1"));
        assert_eq!(l.spaces[0].roots[1].path, PathBuf::from("/base/rel"));
        assert!(!l.spaces[0].roots[1].archive && l.spaces[0].roots[1].list);
        // Flow style, as in FDB_CONFIG.
        let c = parse("{type: local, schema: /s, spaces: [{roots: [{path: ~/r}]}]}").unwrap();
        let FdbConfig::Local(l) = c else { panic!() };
        assert_eq!(l.spaces[0].roots[0].path, PathBuf::from("/u/r"));
        let c = parse("type: select\nschema: /s\nfdbs:\n- select: class=od\n  spaces: [{roots: [{path: /a}]}]\n- select: class=rd,expver=xx.?.?\n  type: remote\n  host: h\n  port: 7655\n").unwrap();
        let FdbConfig::Select { lanes, .. } = c else {
            panic!()
        };
        assert_eq!(lanes.len(), 2);
        assert!(
            matches!(&lanes[0].config, FdbConfig::Local(l) if l.schema == Some(PathBuf::from("/s")))
        );
        assert!(matches!(
            &lanes[1].config,
            FdbConfig::Remote { port: 7655, .. }
        ));
        let c = parse(
            "type: dist\nlanes:\n- {type: remote, host: a}\n- {type: remote, host: b, id: x}\n",
        )
        .unwrap();
        let FdbConfig::Dist { lanes, hash } = c else {
            panic!()
        };
        assert_eq!(
            (lanes[0].id.as_str(), lanes[1].id.as_str(), hash),
            ("0", "x", DistHash::Field)
        );
    }

    #[test]
    fn errors_name_the_path() {
        let cases = [
            ("spaces: [{roots: [{path: /a}, {path: /b, wrtable: true}]}]", "config t.yaml: spaces[0].roots[1]: unknown key 'wrtable' (did you mean 'writable'?)"),
            ("spaces: [{roots: [{name: x}]}]", "config t.yaml: spaces[0].roots[0]: missing required key 'path'"),
            ("type: lcal\nspaces: []", "config t.yaml: type: unknown type 'lcal' (known: local, catalogue, select, routing, dist, remote, mirror, filter)"),
            ("spaces: []", "config t.yaml: spaces: no spaces: at least one space with one root is needed"),
            ("type: local", "config t.yaml: missing required key 'spaces' (where the data goes: spaces: [{roots: [{path: /dir}]}])"),
            ("spaces: [{roots: [{path: /a, writable: maybe}]}]", "config t.yaml: spaces[0].roots[0].writable: expected true or false, found a string"),
            ("type: remote\nhost: h\nport: 99999", "config t.yaml: port: port 99999 is not in 0-65535"),
            ("type: select\nfdbs: [{spaces: [{roots: [{path: /a}]}]}]", "config t.yaml: fdbs[0]: missing required key 'select' (e.g. select: class=od,stream=oper)"),
            ("- a\n- b", "config t.yaml: expected a mapping, found a list"),
        ];
        for (text, msg) in cases {
            assert_eq!(parse(text).unwrap_err().to_string(), msg, "{text}");
        }
        for nasty in [
            "",
            "{",
            ": : :",
            "[[[[",
            "!!binary x",
            "a: *b",
            "\t- x",
            "spaces: {roots: 1}",
        ] {
            assert!(parse(nasty).is_err(), "{nasty}");
        }
    }

    #[test]
    fn discovery_precedence() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.yaml");
        std::fs::write(&file, "spaces: [{roots: [{path: /from-file}]}]").unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join("etc/fdb")).unwrap();
        std::fs::write(
            home.join("etc/fdb/config.yaml"),
            "spaces: [{roots: [{path: /from-home}]}]",
        )
        .unwrap();
        let f = file.to_str().unwrap();
        let h = home.to_str().unwrap();
        let inline = "{spaces: [{roots: [{path: /inline}]}]}";
        let inline5 = "{spaces: [{roots: [{path: /inline5}]}]}";
        let src = |pairs: &[(&str, &str)]| discover(None, &env_of(pairs)).unwrap().source;
        assert_eq!(
            src(&[
                ("FDB_CONFIG", inline),
                ("FDB5_CONFIG", inline5),
                ("FDB_CONFIG_FILE", f)
            ]),
            ConfigSource::EnvInline("FDB_CONFIG".into())
        );
        assert_eq!(
            src(&[("FDB5_CONFIG", inline5), ("FDB_CONFIG_FILE", f)]),
            ConfigSource::EnvInline("FDB5_CONFIG".into())
        );
        assert_eq!(
            src(&[
                ("FDB5_CONFIG_FILE", "/nope"),
                ("FDB_CONFIG_FILE", f),
                ("FDB_HOME", h)
            ]),
            ConfigSource::EnvFile("FDB_CONFIG_FILE".into(), file.clone())
        );
        assert_eq!(
            src(&[("FDB5_HOME", h)]),
            ConfigSource::Home(home.join("etc/fdb/config.yaml"))
        );
        assert_eq!(src(&[("HOME", "/u")]), ConfigSource::Default);
        let explicit = discover(Some(&file), &env_of(&[("FDB_CONFIG", inline)])).unwrap();
        assert_eq!(explicit.source, ConfigSource::Explicit(file.clone()));
        let e = discover(None, &env_of(&[("FDB_CONFIG_FILE", "/no/such.yaml")])).unwrap_err();
        assert!(
            e.to_string()
                .contains("FDB_CONFIG_FILE=/no/such.yaml: no such file"),
            "{e}"
        );
        let d = discover(None, &env_of(&[("XDG_DATA_HOME", "/x")])).unwrap();
        assert!(d.explanation.iter().any(|l| l == "FDB_CONFIG: not set"));
        let FdbConfig::Local(l) = d.config else {
            panic!()
        };
        assert_eq!(l.spaces[0].roots[0].path, PathBuf::from("/x/fieldstore"));
        assert!(l.schema.is_none());
    }
}
