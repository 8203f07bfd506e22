//! Which config is in use: FDB5's search order, with every step recorded so `fieldstore info` can
//! say why a config was (or was not) picked up.

use std::fmt;
use std::path::{Path, PathBuf};

use super::env::{process_env, Env};
use super::parse::{from_file_with, from_yaml_str_with};
use super::{Actions, ConfigError, FdbConfig, LocalConfig, Root, Space};

/// Where a loaded config came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigSource {
    Explicit(PathBuf),
    /// Inline YAML in the named variable.
    EnvInline(String),
    /// The file named by the variable.
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

/// The config used when none is found: a local toc store under the user's data directory with
/// the built-in schema, so `fieldstore write some.grib` just works.
pub fn embedded_default(env: Env) -> FdbConfig {
    let set = |v: &str| env(v).filter(|s| !s.is_empty());
    let dir = set("XDG_DATA_HOME")
        .map(PathBuf::from)
        // The XDG spec says to ignore relative values.
        .filter(|p| p.is_absolute())
        .or_else(|| set("HOME").map(|h| Path::new(&h).join(".local/share")))
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
            roots: vec![Root::open_at(dir)],
        }],
        writable: true,
        visitable: true,
        actions: Actions::default(),
        permissions: None,
        statistics: false,
        fdb_home: None,
        memory: None,
        spaces_source: None,
        s3: None,
        adopt_s3: None,
        pipelines: Vec::new(),
        lifecycle: None,
        creator: None,
    })
}

/// [`discover`] with the process environment.
pub fn discover_from_process(explicit: Option<&Path>) -> Result<LoadedConfig, ConfigError> {
    discover(explicit, &process_env)
}

/// The variables discovery reads, in precedence order, with what each one holds.
pub const ENV_STEPS: &[&str] = &[
    "FDB_CONFIG",
    "FDB5_CONFIG",
    "FDB_CONFIG_FILE",
    "FDB5_CONFIG_FILE",
    "FDB_HOME",
    "FDB5_HOME",
];

/// Finds the config the way FDB5 does, newest FDB's `FDB_*` names winning over `FDB5_*`:
/// explicit file, inline YAML variable, file variable, `<FDB home>/etc/fdb/config.yaml|json`,
/// else the embedded default. Unlike FDB5, a config-file variable naming a missing file is an
/// error rather than silently falling back.
pub fn discover(explicit: Option<&Path>, env: Env) -> Result<LoadedConfig, ConfigError> {
    let get = |v: &str| env(v).filter(|s| !s.is_empty());
    let mut why = Vec::new();
    // Lower-priority variables that are set, so the explanation shows what was passed over.
    let shadowed = |why: &mut Vec<String>, after: usize, winner: &str| {
        for var in ENV_STEPS.iter().skip(after) {
            let Some(val) = get(var) else { continue };
            if var.ends_with("_HOME") {
                why.push(format!(
                    "{var}={val}: its etc/fdb/config.yaml is not looked for, {winner} wins (~fdb still means it)"
                ));
            } else {
                why.push(format!(
                    "{var}={}: set but not used, {winner} wins",
                    short(&val)
                ));
            }
        }
    };

    if let Some(p) = explicit {
        why.push(format!(
            "--config {}: used (an explicit config wins over the environment)",
            p.display()
        ));
        shadowed(&mut why, 0, "--config");
        return Ok(LoadedConfig {
            config: from_file_with(p, env)?,
            source: ConfigSource::Explicit(p.to_path_buf()),
            explanation: why,
        });
    }
    why.push("--config: not given".into());

    for (i, var) in ["FDB_CONFIG", "FDB5_CONFIG"].into_iter().enumerate() {
        let Some(text) = get(var) else {
            why.push(format!("{var}: not set"));
            continue;
        };
        why.push(format!("{var}: used (inline YAML)"));
        shadowed(&mut why, i + 1, var);
        return Ok(LoadedConfig {
            config: from_yaml_str_with(&text, &format!("${var}"), None, env)?,
            source: ConfigSource::EnvInline(var.into()),
            explanation: why,
        });
    }

    for var in ["FDB_CONFIG_FILE", "FDB5_CONFIG_FILE"] {
        let Some(p) = get(var) else {
            why.push(format!("{var}: not set"));
            continue;
        };
        let path = PathBuf::from(&p);
        if !path.exists() {
            return Err(ConfigError {
                origin: format!("${var}"),
                path: String::new(),
                message: format!(
                    "no such file: {p} (FDB5 would silently use an empty config; fieldstore refuses)"
                ),
            });
        }
        why.push(format!("{var}={p}: used"));
        if var == "FDB_CONFIG_FILE" {
            if let Some(other) = get("FDB5_CONFIG_FILE") {
                why.push(format!(
                    "FDB5_CONFIG_FILE={other}: not used, FDB_CONFIG_FILE is set too and wins over FDB5_CONFIG_FILE"
                ));
            }
        }
        shadowed(&mut why, 4, var);
        return Ok(LoadedConfig {
            config: from_file_with(&path, env)?,
            source: ConfigSource::EnvFile(var.into(), path),
            explanation: why,
        });
    }

    let home = match (get("FDB_HOME"), get("FDB5_HOME")) {
        (Some(h), other) => {
            if let Some(o) = other {
                why.push(format!(
                    "FDB5_HOME={o}: not used, FDB_HOME is set too and wins"
                ));
            }
            Some(("FDB_HOME", h))
        }
        (None, Some(h)) => {
            why.push("FDB_HOME: not set".into());
            Some(("FDB5_HOME", h))
        }
        (None, None) => {
            why.push("FDB_HOME: not set".into());
            why.push("FDB5_HOME: not set".into());
            None
        }
    };
    if let Some((var, home)) = home {
        for name in ["config.yaml", "config.json"] {
            let p = Path::new(&home).join("etc/fdb").join(name);
            if p.is_file() {
                why.push(format!("{var}={home}: {} used", p.display()));
                return Ok(LoadedConfig {
                    config: from_file_with(&p, env)?,
                    source: ConfigSource::Home(p),
                    explanation: why,
                });
            }
        }
        why.push(format!(
            "{var}={home}: no etc/fdb/config.yaml or etc/fdb/config.json there"
        ));
    }

    let config = embedded_default(env);
    let root = match &config {
        FdbConfig::Local(l) => l
            .spaces
            .first()
            .and_then(|s| s.roots.first())
            .map(|r| r.path.display().to_string())
            .unwrap_or_default(),
        _ => String::new(),
    };
    why.push(format!(
        "nothing found: using the embedded default (root {root}, built-in schema)"
    ));
    Ok(LoadedConfig {
        config,
        source: ConfigSource::Default,
        explanation: why,
    })
}

/// Inline YAML can be long; the explanation only needs enough to recognise it.
fn short(v: &str) -> String {
    let one_line = v.replace('\n', " ");
    match one_line.char_indices().nth(60) {
        Some((i, _)) => format!("{}...", &one_line[..i]),
        None => one_line,
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

    struct Fixture {
        _dir: tempfile::TempDir,
        file: PathBuf,
        file5: PathBuf,
        home: PathBuf,
    }

    fn fixture() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("c.yaml");
        std::fs::write(&file, "spaces: [{roots: [{path: /from-file}]}]").unwrap();
        let file5 = dir.path().join("c5.yaml");
        std::fs::write(&file5, "spaces: [{roots: [{path: /from-file5}]}]").unwrap();
        let home = dir.path().join("home");
        std::fs::create_dir_all(home.join("etc/fdb")).unwrap();
        std::fs::write(
            home.join("etc/fdb/config.yaml"),
            "spaces: [{roots: [{path: /from-home}]}]",
        )
        .unwrap();
        Fixture {
            _dir: dir,
            file,
            file5,
            home,
        }
    }

    fn first_root(c: &FdbConfig) -> PathBuf {
        match c {
            FdbConfig::Local(l) => l.spaces[0].roots[0].path.clone(),
            other => panic!("not local: {other:?}"),
        }
    }

    const INLINE: &str = "{spaces: [{roots: [{path: /inline}]}]}";
    const INLINE5: &str = "{spaces: [{roots: [{path: /inline5}]}]}";

    #[test]
    fn precedence_table() {
        let fx = fixture();
        let (f, f5, h) = (
            fx.file.to_str().unwrap(),
            fx.file5.to_str().unwrap(),
            fx.home.to_str().unwrap(),
        );
        let all = [
            ("FDB_CONFIG", INLINE),
            ("FDB5_CONFIG", INLINE5),
            ("FDB_CONFIG_FILE", f),
            ("FDB5_CONFIG_FILE", f5),
            ("FDB_HOME", h),
            ("FDB5_HOME", h),
        ];
        // Dropping the winner each time exposes the next one down.
        let expected = [
            "/inline",
            "/inline5",
            "/from-file",
            "/from-file5",
            "/from-home",
            "/from-home",
        ];
        for (skip, want) in expected.iter().enumerate() {
            let loaded = discover(None, &env_of(&all[skip..])).unwrap();
            assert_eq!(first_root(&loaded.config), PathBuf::from(want), "{skip}");
        }
        let loaded = discover(Some(&fx.file5), &env_of(&all)).unwrap();
        assert_eq!(loaded.source, ConfigSource::Explicit(fx.file5.clone()));
        assert_eq!(first_root(&loaded.config), PathBuf::from("/from-file5"));
        assert_eq!(
            discover(None, &env_of(&all[1..])).unwrap().source,
            ConfigSource::EnvInline("FDB5_CONFIG".into())
        );
        assert_eq!(
            discover(None, &env_of(&all[2..])).unwrap().source,
            ConfigSource::EnvFile("FDB_CONFIG_FILE".into(), fx.file.clone())
        );
        assert_eq!(
            discover(None, &env_of(&all[5..])).unwrap().source,
            ConfigSource::Home(fx.home.join("etc/fdb/config.yaml"))
        );
        let d = discover(None, &env_of(&[("HOME", "/u")])).unwrap();
        assert_eq!(d.source, ConfigSource::Default);
        assert_eq!(
            first_root(&d.config),
            PathBuf::from("/u/.local/share/fieldstore")
        );
    }

    #[test]
    fn explanation_lists_every_step() {
        let fx = fixture();
        let (f, f5) = (fx.file.to_str().unwrap(), fx.file5.to_str().unwrap());
        let env = env_of(&[
            ("FDB_CONFIG_FILE", f),
            ("FDB5_CONFIG_FILE", f5),
            ("FDB_HOME", "/h"),
        ]);
        let d = discover(None, &env).unwrap();
        assert_eq!(
            d.explanation,
            vec![
                "--config: not given".to_string(),
                "FDB_CONFIG: not set".into(),
                "FDB5_CONFIG: not set".into(),
                format!("FDB_CONFIG_FILE={f}: used"),
                format!("FDB5_CONFIG_FILE={f5}: not used, FDB_CONFIG_FILE is set too and wins over FDB5_CONFIG_FILE"),
                "FDB_HOME=/h: its etc/fdb/config.yaml is not looked for, FDB_CONFIG_FILE wins (~fdb still means it)".into(),
            ]
        );
        let d = discover(
            None,
            &env_of(&[("FDB5_HOME", "/nothing-here"), ("XDG_DATA_HOME", "/x")]),
        )
        .unwrap();
        assert_eq!(
            d.explanation[3..],
            [
                "FDB_CONFIG_FILE: not set".to_string(),
                "FDB5_CONFIG_FILE: not set".into(),
                "FDB_HOME: not set".into(),
                "FDB5_HOME=/nothing-here: no etc/fdb/config.yaml or etc/fdb/config.json there"
                    .into(),
                "nothing found: using the embedded default (root /x/fieldstore, built-in schema)"
                    .into(),
            ]
        );
        let d = discover(Some(&fx.file), &env_of(&[("FDB_CONFIG", INLINE)])).unwrap();
        assert_eq!(
            d.explanation[1],
            format!("FDB_CONFIG={INLINE}: set but not used, --config wins")
        );
    }

    #[test]
    fn empty_variables_count_as_unset() {
        let fx = fixture();
        let env = env_of(&[
            ("FDB_CONFIG", ""),
            ("FDB_CONFIG_FILE", fx.file.to_str().unwrap()),
        ]);
        let d = discover(None, &env).unwrap();
        assert_eq!(
            d.source,
            ConfigSource::EnvFile("FDB_CONFIG_FILE".into(), fx.file.clone())
        );
    }

    #[test]
    fn json_in_home_and_errors() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("etc/fdb")).unwrap();
        let json = dir.path().join("etc/fdb/config.json");
        std::fs::write(&json, r#"{"spaces": [{"roots": [{"path": "data"}]}]}"#).unwrap();
        let h = dir.path().to_str().unwrap();
        let d = discover(None, &env_of(&[("FDB_HOME", h)])).unwrap();
        assert_eq!(d.source, ConfigSource::Home(json.clone()));
        assert_eq!(first_root(&d.config), dir.path().join("etc/fdb/data"));

        let e = discover(None, &env_of(&[("FDB5_CONFIG_FILE", "/no/such.yaml")])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "config $FDB5_CONFIG_FILE: no such file: /no/such.yaml (FDB5 would silently use an empty config; fieldstore refuses)"
        );
        let e = discover(None, &env_of(&[("FDB_CONFIG", "{spaces: []}")])).unwrap_err();
        assert_eq!(
            e.to_string(),
            "config $FDB_CONFIG: spaces: no spaces: at least one space with one root is needed"
        );
        std::fs::write(&json, "spaces: [{roots: [{path: /a, wrtable: 1}]}]").unwrap();
        let e = discover(None, &env_of(&[("FDB_HOME", h)])).unwrap_err();
        assert_eq!(
            e.to_string(),
            format!(
                "config {}: spaces[0].roots[0]: unknown key 'wrtable' (did you mean 'writable'?)",
                json.display()
            )
        );
        let e = discover(Some(Path::new("/no/explicit.yaml")), &env_of(&[])).unwrap_err();
        assert!(
            e.to_string()
                .starts_with("config /no/explicit.yaml: cannot read:"),
            "{e}"
        );
    }

    #[test]
    fn embedded_default_locations() {
        let root = |pairs: &[(&str, &str)]| first_root(&embedded_default(&env_of(pairs)));
        assert_eq!(
            root(&[("XDG_DATA_HOME", "/x"), ("HOME", "/u")]),
            PathBuf::from("/x/fieldstore")
        );
        assert_eq!(
            root(&[("XDG_DATA_HOME", "rel"), ("HOME", "/u")]),
            PathBuf::from("/u/.local/share/fieldstore")
        );
        assert_eq!(root(&[]), PathBuf::from("./fieldstore"));
        let FdbConfig::Local(l) = embedded_default(&env_of(&[])) else {
            panic!()
        };
        assert!(l.schema.is_none());
    }

    #[test]
    fn short_cuts_long_values() {
        assert_eq!(short("a\nb"), "a b");
        assert_eq!(short(&"x".repeat(100)), format!("{}...", "x".repeat(60)));
    }
}
