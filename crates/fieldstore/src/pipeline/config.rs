//! Finding and reading MultIO plan files: the environment look-up, `{ENV}` and `{~}`
//! substitution, the `client`/`server`/`plans` shapes, `file:` includes and `enable`. Actions are
//! kept as YAML nodes here; [`super::plan`] builds them.

use std::path::{Path, PathBuf};

use super::error::PipelineError;
use super::node::{self, Node, NodeKind};

/// Reads an environment variable; a function so tests need not touch the process environment.
pub type Env<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Which section of a config a caller runs: the model side (`client:`, or a bare `plans:`), or
/// the I/O server side (`server:`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Client,
    Server,
}

/// A loaded config: its plans, each with its actions as YAML nodes.
#[derive(Debug, Clone)]
pub struct PlanSetConfig {
    /// Where it came from (a file, an environment variable), and why that one.
    pub origin: String,
    pub plans: Vec<PlanConfig>,
}

#[derive(Debug, Clone)]
pub struct PlanConfig {
    pub name: String,
    pub origin: String,
    pub line: Option<u64>,
    pub actions: Vec<ActionConfig>,
}

/// One action's YAML, with what its files are relative to.
#[derive(Debug, Clone)]
pub struct ActionConfig {
    pub type_name: String,
    pub origin: String,
    pub line: Option<u64>,
    pub node: Node,
    /// The config's directory (`{~}`), against which relative paths are read.
    pub dir: PathBuf,
}

impl ActionConfig {
    /// A file the action reads: beside the config when it is there, else as given (relative to
    /// the working directory, as MultIO reads it; `{~}/name` always means beside the config).
    pub(crate) fn input_path(&self, name: &str) -> PathBuf {
        let beside = self.dir.join(name);
        if beside.exists() {
            beside
        } else {
            PathBuf::from(name)
        }
    }

    pub(crate) fn error(&self, message: impl Into<String>) -> PipelineError {
        PipelineError::Config {
            origin: self.origin.clone(),
            line: self.line,
            message: format!("action '{}': {}", self.type_name, message.into()),
        }
    }

    /// An option's node with the line of the option itself in errors.
    pub(crate) fn error_at(&self, at: &Node, message: impl Into<String>) -> PipelineError {
        PipelineError::Config {
            origin: self.origin.clone(),
            line: Some(at.line),
            message: format!("action '{}': {}", self.type_name, message.into()),
        }
    }
}

/// Reads a plan file, as `multio_new_configuration_from_filename` and `multio-feed --plans` do.
pub fn load_file(path: &Path, side: Side, env: Env) -> Result<PlanSetConfig, PipelineError> {
    let origin = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| PipelineError::Config {
        origin: origin.clone(),
        line: None,
        message: format!("cannot read: {e}"),
    })?;
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    load_str(&text, &origin, &dir, side, env)
}

/// Reads plan text; `dir` is the config directory (`{~}`, relative includes).
pub fn load_str(
    text: &str,
    origin: &str,
    dir: &Path,
    side: Side,
    env: Env,
) -> Result<PlanSetConfig, PipelineError> {
    // `{~}` is the directory as an absolute path: a plan named by a relative path (`sub/plan.yaml`)
    // would otherwise give `{~}/out` = `sub/out`, which joined again with the directory
    // (includes, templates, mappings) named `sub/sub/out`.
    let absolute = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
    let dir = absolute.as_path();
    let mut root = node::parse(text, origin)?;
    root.map_strings(&|s| substitute(s, dir, env));
    let reader = Reader { origin, dir, env };
    let section = match side {
        Side::Client => root
            .get("client")
            .or_else(|| root.get("plans").map(|_| &root)),
        Side::Server => root.get("server"),
    };
    let section = section.ok_or_else(|| PipelineError::Config {
        origin: origin.to_string(),
        line: Some(root.line),
        message: match side {
            Side::Client => "no 'client:' section and no top-level 'plans:'".into(),
            Side::Server => "no 'server:' section".into(),
        },
    })?;
    let plans_node = section.get("plans").ok_or_else(|| PipelineError::Config {
        origin: origin.to_string(),
        line: Some(section.line),
        message: "the section has no 'plans:' list".into(),
    })?;
    let list = plans_node
        .as_seq()
        .ok_or_else(|| reader.err(plans_node, "'plans:' must be a list"))?;
    let mut plans = Vec::new();
    for p in list {
        if let Some(plan) = reader.plan(p, 0)? {
            plans.push(plan);
        }
    }
    if side == Side::Client {
        let mut names = std::collections::HashSet::new();
        for p in &plans {
            if !names.insert(p.name.clone()) {
                return Err(PipelineError::Config {
                    origin: p.origin.clone(),
                    line: p.line,
                    message: format!(
                        "plan name '{}' is used twice (client plan names must be unique)",
                        p.name
                    ),
                });
            }
        }
    }
    Ok(PlanSetConfig {
        origin: origin.to_string(),
        plans,
    })
}

/// The config a model gets without naming one, in MultIO's order (MULTIO.md §1.1), with
/// `MULTIO_PLANS_FILE` read as the file it names (MultIO reads its directory and hangs).
pub fn from_env(side: Side, env: Env) -> Result<PlanSetConfig, PipelineError> {
    if let Some(f) = env("MULTIO_SERVER_CONFIG_FILE") {
        let p = PathBuf::from(&f);
        if p.is_file() {
            return load_file(&p, side, env).map(|c| why(c, "MULTIO_SERVER_CONFIG_FILE"));
        }
    }
    if let Some(d) = env("MULTIO_SERVER_CONFIG_PATH") {
        let p = Path::new(&d).join("multio-server.yaml");
        if p.is_file() {
            return load_file(&p, side, env).map(|c| why(c, "MULTIO_SERVER_CONFIG_PATH"));
        }
    }
    if side == Side::Server {
        return Err(PipelineError::Config {
            origin: "environment".into(),
            line: None,
            message: "a server needs MULTIO_SERVER_CONFIG_FILE or MULTIO_SERVER_CONFIG_PATH".into(),
        });
    }
    let cwd = std::env::current_dir().unwrap_or_default();
    if let Some(text) = env("MULTIO_PLANS") {
        return load_str(&text, "MULTIO_PLANS", &cwd, side, env).map(|c| why(c, "MULTIO_PLANS"));
    }
    if let Some(f) = env("MULTIO_PLANS_FILE") {
        return load_file(Path::new(&f), side, env).map(|c| why(c, "MULTIO_PLANS_FILE"));
    }
    let sinks_text = match (env("MULTIO_CONFIG"), env("MULTIO_CONFIG_FILE")) {
        (Some(t), _) => Some((t, "MULTIO_CONFIG".to_string(), cwd.clone())),
        (None, Some(f)) => {
            let p = PathBuf::from(&f);
            let t = std::fs::read_to_string(&p).map_err(|e| PipelineError::Config {
                origin: f.clone(),
                line: None,
                message: format!("cannot read (named by MULTIO_CONFIG_FILE): {e}"),
            })?;
            Some((t, f, p.parent().map(Path::to_path_buf).unwrap_or_default()))
        }
        _ => None,
    };
    if let Some((text, origin, dir)) = sinks_text {
        let mut root = node::parse(&text, &origin)?;
        root.map_strings(&|s| substitute(s, &dir, env));
        let sinks = root
            .get("sinks")
            .cloned()
            .ok_or_else(|| PipelineError::Config {
                origin: origin.clone(),
                line: Some(root.line),
                message: "a legacy config needs a 'sinks:' list".into(),
            })?;
        return Ok(one_sink_plan(&origin, &dir, sinks));
    }
    let names = env("MULTIO_SINKS").unwrap_or_else(|| "fdb5".into());
    let sinks = Node::new(
        0,
        NodeKind::Seq(
            names
                .split(':')
                .filter(|s| !s.is_empty())
                .map(|s| {
                    Node::new(
                        0,
                        NodeKind::Map(vec![("type".into(), Node::new(0, NodeKind::Str(s.into())))]),
                    )
                })
                .collect(),
        ),
    );
    Ok(one_sink_plan("MULTIO_SINKS", &cwd, sinks))
}

fn why(mut c: PlanSetConfig, var: &str) -> PlanSetConfig {
    c.origin = format!("{} (from {var})", c.origin);
    c
}

fn one_sink_plan(origin: &str, dir: &Path, sinks: Node) -> PlanSetConfig {
    let node = Node::new(
        sinks.line,
        NodeKind::Map(vec![
            (
                "type".into(),
                Node::new(sinks.line, NodeKind::Str("sink".into())),
            ),
            ("sinks".into(), sinks),
        ]),
    );
    PlanSetConfig {
        origin: origin.to_string(),
        plans: vec![PlanConfig {
            name: "anonymous".into(),
            origin: origin.to_string(),
            line: None,
            actions: vec![ActionConfig {
                type_name: "sink".into(),
                origin: origin.to_string(),
                line: None,
                node,
                dir: dir.to_path_buf(),
            }],
        }],
    }
}

/// `{NAME}` → the variable's value, `{~}` → the config directory; an unknown name keeps its
/// braces, as MultIO does.
pub fn substitute(s: &str, dir: &Path, env: Env) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        match after.find(['}', '{']) {
            Some(close) if after.as_bytes()[close] == b'}' && close > 0 => {
                let name = &after[..close];
                if name == "~" {
                    out.push_str(&dir.display().to_string());
                } else if let Some(v) = env(name) {
                    out.push_str(&v);
                } else {
                    out.push('{');
                    out.push_str(name);
                    out.push('}');
                }
                rest = &after[close + 1..];
            }
            _ => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// eckit's translation of text to a bool.
pub(crate) fn parse_bool(node: &Node) -> Option<bool> {
    match &node.kind {
        NodeKind::Bool(b) => Some(*b),
        NodeKind::Int(0) => Some(false),
        NodeKind::Int(1) => Some(true),
        NodeKind::Str(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" | "on" | "t" | "y" => Some(true),
            "false" | "0" | "no" | "off" | "f" | "n" | "" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

struct Reader<'a> {
    origin: &'a str,
    dir: &'a Path,
    env: Env<'a>,
}

impl Reader<'_> {
    fn err(&self, at: &Node, message: impl Into<String>) -> PipelineError {
        PipelineError::Config {
            origin: self.origin.to_string(),
            line: Some(at.line),
            message: message.into(),
        }
    }

    /// One plan entry; `None` when it is disabled.
    fn plan(&self, p: &Node, depth: u32) -> Result<Option<PlanConfig>, PipelineError> {
        if p.as_map().is_none() {
            return Err(self.err(p, format!("a plan must be a map, not a {}", p.type_name())));
        }
        if let Some(e) = p.get("enable") {
            match parse_bool(e) {
                Some(true) => {}
                Some(false) => return Ok(None),
                None => {
                    return Err(self.err(
                        e,
                        format!(
                            "enable: '{}' is not a bool (an unset variable?)",
                            e.scalar_text().unwrap_or_default()
                        ),
                    ))
                }
            }
        }
        if let Some(f) = p.get("file") {
            if depth > 0 {
                return Err(self.err(
                    f,
                    "an included plan file may not include another (one level only, as in MultIO)",
                ));
            }
            let name = f
                .as_str()
                .ok_or_else(|| self.err(f, "file: must be a path"))?;
            let path = self.dir.join(name);
            let origin = path.display().to_string();
            let text = std::fs::read_to_string(&path)
                .map_err(|e| self.err(f, format!("cannot read included plan {origin}: {e}")))?;
            let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
            let mut root = node::parse(&text, &origin)?;
            root.map_strings(&|s| substitute(s, &dir, self.env));
            let inner = Reader {
                origin: &origin,
                dir: &dir,
                env: self.env,
            };
            let mut plan = match inner.plan(&root, depth + 1)? {
                Some(p) => p,
                None => return Ok(None),
            };
            if root.get("name").is_none() {
                plan.name = format!("file::{origin}");
            }
            return Ok(Some(plan));
        }
        if p.get("dissemination").is_some() {
            return Err(PipelineError::Refused {
                origin: self.origin.to_string(),
                line: Some(p.line),
                name: "dissemination".into(),
                reason: "plans generated from MARS request files need interpolation (MIR), which fieldstore does not do".into(),
            });
        }
        let name = match p.get("name") {
            None => "anonymous".to_string(),
            Some(n) => n
                .scalar_text()
                .ok_or_else(|| self.err(n, "name: must be text"))?,
        };
        let actions_node = p
            .get("actions")
            .ok_or_else(|| self.err(p, format!("plan '{name}' must define at least one action")))?;
        let list = actions_node.as_seq().ok_or_else(|| {
            self.err(
                actions_node,
                format!("plan '{name}': actions: must be a list"),
            )
        })?;
        if list.is_empty() {
            return Err(self.err(
                actions_node,
                format!("plan '{name}' must define at least one action"),
            ));
        }
        let mut actions = Vec::new();
        for a in list {
            let t = a
                .get("type")
                .ok_or_else(|| self.err(a, format!("plan '{name}': an action without 'type:'")))?;
            let type_name = match &t.kind {
                NodeKind::Str(s) => s.clone(),
                // `type: null` is YAML's null: MultIO fails with "Cannot convert (nil)".
                NodeKind::Null => "null".to_string(),
                _ => return Err(self.err(t, "type: must be text")),
            };
            actions.push(ActionConfig {
                type_name,
                origin: self.origin.to_string(),
                line: Some(a.line),
                node: a.clone(),
                dir: self.dir.to_path_buf(),
            });
        }
        Ok(Some(PlanConfig {
            name,
            origin: self.origin.to_string(),
            line: Some(p.line),
            actions,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of(pairs: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
        move |k| {
            pairs
                .iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn substitution() {
        let env = env_of(&[("A", "x"), ("B", "")]);
        let d = Path::new("/cfg");
        assert_eq!(substitute("{A}/{B}y/{C}/{~}/{", d, &env), "x/y/{C}//cfg/{");
        assert_eq!(substitute("{{A}}", d, &env), "{x}");
        assert_eq!(substitute("{}", d, &env), "{}");
    }

    #[test]
    fn shapes_enable_and_names() {
        let env = env_of(&[("ON", "0")]);
        let text = "client:\n  plans:\n    - name: a\n      actions: [{type: print}]\n    - name: b\n      enable: '{ON}'\n      actions: [{type: print}]\n";
        let c = load_str(text, "t.yaml", Path::new("."), Side::Client, &env).unwrap();
        assert_eq!(c.plans.len(), 1);
        assert_eq!(c.plans[0].actions[0].line, Some(4));
        let bare = "plans:\n  - actions: [{type: 'null'}]\n";
        let c = load_str(bare, "t", Path::new("."), Side::Client, &env).unwrap();
        assert_eq!(c.plans[0].name, "anonymous");
        let e = load_str(bare, "t", Path::new("."), Side::Server, &env).unwrap_err();
        assert!(e.to_string().contains("server"), "{e}");
    }

    #[test]
    fn errors_name_file_and_line() {
        let env = env_of(&[]);
        let text = "plans:\n  - name: a\n    actions: []\n";
        let e = load_str(text, "p.yaml", Path::new("."), Side::Client, &env).unwrap_err();
        assert_eq!(
            e.to_string(),
            "p.yaml:3: plan 'a' must define at least one action"
        );
        let text = "plans:\n  - name: a\n    enable: '{UNSET}'\n    actions: [{type: print}]\n";
        let e = load_str(text, "p.yaml", Path::new("."), Side::Client, &env).unwrap_err();
        assert!(e.to_string().starts_with("p.yaml:3:"), "{e}");
        let text = "plans:\n  - {name: a, actions: [{type: print}]}\n  - {name: a, actions: [{type: print}]}\n";
        assert!(load_str(text, "p", Path::new("."), Side::Client, &env).is_err());
    }

    #[test]
    fn includes_one_level() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("inner.yaml"), "actions:\n  - type: print\n").unwrap();
        let main = dir.path().join("main.yaml");
        std::fs::write(&main, "plans:\n  - file: inner.yaml\n").unwrap();
        let env = env_of(&[]);
        let c = load_file(&main, Side::Client, &env).unwrap();
        assert!(c.plans[0].name.starts_with("file::"), "{}", c.plans[0].name);
        assert!(c.plans[0].actions[0].origin.ends_with("inner.yaml"));
    }

    #[test]
    fn environment_order() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("plans.yaml");
        std::fs::write(
            &f,
            "plans:\n  - {name: fromfile, actions: [{type: print}]}\n",
        )
        .unwrap();
        let fs = f.display().to_string();
        let leaked: &'static str = Box::leak(fs.into_boxed_str());
        let pairs: &'static [(&'static str, &'static str)] =
            Box::leak(vec![("MULTIO_PLANS_FILE", leaked)].into_boxed_slice());
        let c = from_env(Side::Client, &env_of(pairs)).unwrap();
        assert_eq!(c.plans[0].name, "fromfile");
        let c = from_env(Side::Client, &env_of(&[("MULTIO_SINKS", "file:fdb5")])).unwrap();
        assert_eq!(c.plans[0].actions[0].type_name, "sink");
        let sinks = c.plans[0].actions[0]
            .node
            .get("sinks")
            .unwrap()
            .as_seq()
            .unwrap()
            .len();
        assert_eq!(sinks, 2);
    }

    proptest::proptest! {
        /// Any text (YAML-ish tokens or arbitrary characters): loaded or refused, no panic, and
        /// a refusal names the origin.
        #[test]
        fn never_panics(parts in proptest::collection::vec(proptest::prop_oneof![
            proptest::strategy::Just("plans:\n".to_string()),
            proptest::strategy::Just("  - ".to_string()),
            proptest::strategy::Just("actions: ".to_string()),
            proptest::strategy::Just("{type: select, match: {a: [1, 2]}}".to_string()),
            proptest::strategy::Just("enable: '{X}'\n".to_string()),
            proptest::strategy::Just("client:\n".to_string()),
            proptest::strategy::Just("[".to_string()),
            proptest::strategy::Just("name: {~}\n".to_string()),
            "\\PC{0,8}",
        ], 0..12)) {
            let text: String = parts.concat();
            let env = |k: &str| (k == "X").then(|| "1".to_string());
            if let Err(e) = load_str(&text, "fuzz.yaml", Path::new("."), Side::Client, &env) {
                proptest::prop_assert!(e.to_string().starts_with("fuzz.yaml"), "{}", e);
            }
        }
    }
}
