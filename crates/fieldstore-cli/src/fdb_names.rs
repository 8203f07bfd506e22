//! FDB5's tool names (`fdb-list`, `fdb-write`, ...) on the `fieldstore` binary: operators' scripts
//! call those names with FDB5's flags, so a call by such a name is rewritten into the equivalent
//! `fieldstore` subcommand line(s) before clap sees it. Flags FDB5 has but fieldstore cannot honour
//! are refused by name rather than ignored, so a script never silently gets a different answer.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::Path;

/// The names `scripts/install-fdb-tools` installs, in its order.
pub const TOOLS: [&str; 17] = [
    "fdb-write",
    "fdb-read",
    "fdb-list",
    "fdb-axes",
    "fdb-where",
    "fdb-dump",
    "fdb-stats",
    "fdb-wipe",
    "fdb-purge",
    "fdb-info",
    "fdb-hammer",
    "fdb-schema",
    "fdb-server",
    "fdb-lock",
    "fdb-unlock",
    "fdb-status",
    "fdb-move",
];

#[derive(Debug, thiserror::Error, PartialEq)]
pub enum FdbNameError {
    #[error("fieldstore does not answer to the name {name}; FDB5 tool names it answers to: {}", TOOLS.join(", "))]
    UnknownTool { name: String },
    #[error("{tool}: unknown option --{flag}; accepted: {accepted}")]
    UnknownFlag {
        tool: String,
        flag: String,
        accepted: String,
    },
    #[error("{tool}: --{flag} is an FDB5 option fieldstore does not support: {why}")]
    Unsupported {
        tool: String,
        flag: String,
        why: &'static str,
    },
    #[error("{tool}: --{flag} needs a value (--{flag}=VALUE)")]
    MissingValue { tool: String, flag: String },
    #[error("{tool}: --{flag} takes no value, got --{flag}={value}")]
    UnexpectedValue {
        tool: String,
        flag: String,
        value: String,
    },
    #[error("{tool}: request {request} lacks {missing} (required keys: {required}; change them with --minimum-keys=)")]
    MissingKeys {
        tool: String,
        request: String,
        missing: String,
        required: String,
    },
    #[error("{tool}: --all takes no request, got {0}", .count)]
    AllWithRequests { tool: String, count: usize },
    #[error("{tool}: {problem}\nusage: {usage}")]
    Usage {
        tool: String,
        problem: String,
        usage: &'static str,
    },
}

/// The FDB5 tool name the binary was called by, if its file name is one of the `fdb-` kind.
pub fn tool_name(argv0: &OsStr) -> Option<String> {
    let name = Path::new(argv0).file_name()?.to_str()?;
    name.starts_with("fdb-").then(|| name.to_string())
}

/// The tools whose output takes FDB5's form (`--fdb5-output`; `fdb-axes` upstream's, 5.10 has
/// none); the others print as fieldstore's subcommands do, FDB5 having no fixed form for them.
const FDB5_FORMS: [&str; 9] = [
    "fdb-write",
    "fdb-read",
    "fdb-axes",
    "fdb-list",
    "fdb-where",
    "fdb-dump",
    "fdb-stats",
    "fdb-wipe",
    "fdb-purge",
];

/// How an FDB5 flag is taken.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Takes {
    Switch,
    Value,
}

/// What a tool accepts: `(flag, takes)`, and for visit tools the default minimum keys.
struct Spec {
    flags: Vec<(&'static str, Takes)>,
    minimum_keys: &'static str,
}

const VISIT: [(&str, Takes); 4] = [
    ("raw", Takes::Switch),
    ("ignore-errors", Takes::Switch),
    ("all", Takes::Switch),
    ("minimum-keys", Takes::Value),
];

fn spec(tool: &str) -> Option<Spec> {
    use Takes::{Switch as S, Value as V};
    let (own, visit, minimum_keys): (&[(&'static str, Takes)], bool, &'static str) = match tool {
        "fdb-write" => (
            &[
                ("verbose", S),
                ("statistics", S),
                ("include-filter", V),
                ("exclude-filter", V),
                ("filter-include", V),
                ("filter-exclude", V),
                ("modifiers", V),
            ],
            false,
            "",
        ),
        "fdb-read" => (&[("raw", S), ("extract", S), ("statistics", S)], false, ""),
        "fdb-list" => (
            &[
                ("location", S),
                ("full", S),
                ("porcelain", S),
                ("json", S),
                ("depth", V),
                ("timestamp", S),
                ("length", S),
                ("only-duplicates", S),
                ("compact", S),
            ],
            true,
            "class,expver",
        ),
        "fdb-axes" => (&[("json", S), ("level", V)], true, "class,expver"),
        "fdb-where" => (&[("porcelain", S)], true, "class,expver"),
        "fdb-dump" => (&[("simple", S)], true, ""),
        "fdb-stats" => (&[("details", S)], true, "class,expver"),
        "fdb-status" => (&[], true, "class,expver"),
        "fdb-wipe" => (
            &[
                ("doit", S),
                ("porcelain", S),
                ("ignore-no-data", S),
                ("unsafe-wipe-all", S),
            ],
            true,
            "class,expver,stream,date,time",
        ),
        "fdb-purge" => (
            &[("doit", S), ("porcelain", S), ("ignore-no-data", S)],
            true,
            "class,expver,stream,date,time",
        ),
        "fdb-lock" | "fdb-unlock" => (
            &[("list", S), ("retrieve", S), ("archive", S), ("wipe", S)],
            true,
            "class,expver,stream,date,time",
        ),
        "fdb-info" => (
            &[
                ("all", S),
                ("version", S),
                ("home", S),
                ("schema", S),
                ("config-file", S),
            ],
            false,
            "",
        ),
        "fdb-hammer" => (
            &[
                ("expver", V),
                ("class", V),
                ("statistics", S),
                ("read", S),
                ("nsteps", V),
                ("nensembles", V),
                ("number", V),
                ("nlevels", V),
                ("nparams", V),
                ("verbose", S),
            ],
            false,
            "",
        ),
        "fdb-schema" | "fdb-server" => (&[], false, ""),
        "fdb-move" => (
            &[
                ("dest", V),
                ("keep", S),
                ("delay", V),
                ("transport", V),
                ("threads", V),
            ],
            false,
            "",
        ),
        _ => return None,
    };
    let mut flags = vec![("config", V)];
    flags.extend_from_slice(own);
    if visit {
        flags.extend_from_slice(&VISIT);
    }
    Some(Spec {
        flags,
        minimum_keys,
    })
}

/// An FDB5 command line split into its options and positional arguments.
struct Parsed {
    tool: String,
    flags: BTreeMap<&'static str, Option<String>>,
    args: Vec<String>,
}

impl Parsed {
    fn on(&self, f: &str) -> bool {
        self.flags.contains_key(f)
    }
    fn value(&self, f: &str) -> Option<&str> {
        self.flags.get(f).and_then(|v| v.as_deref())
    }
    fn unsupported(&self, flag: &str, why: &'static str) -> Result<(), FdbNameError> {
        if self.on(flag) {
            return Err(FdbNameError::Unsupported {
                tool: self.tool.clone(),
                flag: flag.into(),
                why,
            });
        }
        Ok(())
    }
    fn usage(&self, problem: String, usage: &'static str) -> FdbNameError {
        FdbNameError::Usage {
            tool: self.tool.clone(),
            problem,
            usage,
        }
    }
}

fn parse(tool: &str, spec: &Spec, argv: &[String]) -> Result<Parsed, FdbNameError> {
    let mut p = Parsed {
        tool: tool.into(),
        flags: BTreeMap::new(),
        args: Vec::new(),
    };
    for a in argv {
        let Some(opt) = a.strip_prefix("--") else {
            p.args.push(a.clone());
            continue;
        };
        let (name, value) = match opt.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (opt, None),
        };
        let Some(&(flag, takes)) = spec.flags.iter().find(|(f, _)| *f == name) else {
            let accepted: Vec<String> = spec.flags.iter().map(|(f, _)| format!("--{f}")).collect();
            return Err(FdbNameError::UnknownFlag {
                tool: tool.into(),
                flag: name.into(),
                accepted: accepted.join(" "),
            });
        };
        match (takes, &value) {
            (Takes::Value, None) => {
                return Err(FdbNameError::MissingValue {
                    tool: tool.into(),
                    flag: flag.into(),
                })
            }
            (Takes::Switch, Some(v)) => {
                return Err(FdbNameError::UnexpectedValue {
                    tool: tool.into(),
                    flag: flag.into(),
                    value: v.clone(),
                })
            }
            _ => {}
        }
        p.flags.insert(flag, value);
    }
    Ok(p)
}

/// The keywords of an inline request (`class=od,expver=0001`), for the minimum-keys check; a
/// request file is not checked (FDB5's visit tools take inline requests only).
fn keywords(request: &str) -> Option<Vec<String>> {
    if !request.contains('=') {
        return None;
    }
    Some(
        request
            .split(',')
            .filter_map(|part| part.split_once('='))
            .map(|(k, _)| k.trim().to_ascii_lowercase())
            .collect(),
    )
}

/// The requests of a visit tool: each one checked for the minimum keys; `--all` stands for the
/// empty request (everything).
fn visit_requests(p: &Parsed, spec: &Spec) -> Result<Vec<String>, FdbNameError> {
    if p.on("all") {
        if !p.args.is_empty() {
            return Err(FdbNameError::AllWithRequests {
                tool: p.tool.clone(),
                count: p.args.len(),
            });
        }
        return Ok(vec![String::new()]);
    }
    let required = p.value("minimum-keys").unwrap_or(spec.minimum_keys);
    for r in &p.args {
        let Some(have) = keywords(r) else { continue };
        let missing: Vec<&str> = required
            .split(',')
            .map(str::trim)
            .filter(|k| !k.is_empty() && !have.iter().any(|h| h == k))
            .collect();
        if !missing.is_empty() {
            return Err(FdbNameError::MissingKeys {
                tool: p.tool.clone(),
                request: r.clone(),
                missing: missing.join(","),
                required: required.into(),
            });
        }
    }
    Ok(p.args.clone())
}

/// What an FDB5 tool call stands for.
#[derive(Debug, Default, PartialEq)]
pub struct Plan {
    /// `fieldstore` command lines (program name first), run in order.
    pub lines: Vec<Vec<String>>,
    /// `--ignore-no-data`: a line failing because nothing matches is not a failure.
    pub ignore_not_found: bool,
    /// `--ignore-errors`: a failing line is reported and the others still run; the call succeeds.
    pub ignore_errors: bool,
    /// `fdb-info`: what to print, in FDB5's one-value-per-line form (see `fdb_info`).
    pub info: Option<InfoQuery>,
}

/// `fdb-info`'s question: the config to use and the items asked for (none: all).
#[derive(Debug, PartialEq)]
pub struct InfoQuery {
    pub config: Option<String>,
    pub items: Vec<InfoItem>,
    /// `--all`: every item, labelled.
    pub all: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum InfoItem {
    Version,
    Home,
    Schema,
    ConfigFile,
}

/// The plan for an FDB5 tool call; `--help` goes to the matching subcommand's help.
pub fn plan(tool: &str, argv: &[String]) -> Result<Plan, FdbNameError> {
    let lines = translate(tool, argv)?;
    let flag = |f: &str| argv.iter().any(|a| a.strip_prefix("--") == Some(f));
    let mut plan = Plan {
        ignore_not_found: flag("ignore-no-data"),
        ignore_errors: flag("ignore-errors"),
        ..Plan::default()
    };
    if tool == "fdb-info" && !lines.iter().flatten().any(|a| a == "--help") {
        let config = argv
            .iter()
            .find_map(|a| a.strip_prefix("--config="))
            .map(str::to_string);
        let mut items: Vec<InfoItem> = [
            ("version", InfoItem::Version),
            ("home", InfoItem::Home),
            ("schema", InfoItem::Schema),
            ("config-file", InfoItem::ConfigFile),
        ]
        .into_iter()
        .filter(|(f, _)| flag(f))
        .map(|(_, i)| i)
        .collect();
        let all = flag("all");
        if all {
            items.clear();
        }
        plan.info = Some(InfoQuery { config, items, all });
        return Ok(plan);
    }
    plan.lines = lines;
    Ok(plan)
}

const MOVE_USAGE: &str = "fdb-move --dest=ROOT [--keep] [--delay=SECONDS] [--threads=N] request";

/// The `fieldstore` command lines (program name first) an FDB5 tool call stands for.
fn translate(tool: &str, argv: &[String]) -> Result<Vec<Vec<String>>, FdbNameError> {
    let spec = spec(tool).ok_or_else(|| FdbNameError::UnknownTool { name: tool.into() })?;
    let sub = subcommand(tool);
    if argv.iter().any(|a| a == "--help" || a == "-h") {
        let mut line = vec!["fieldstore".to_string()];
        line.extend(sub.iter().map(|s| s.to_string()));
        line.push("--help".into());
        return Ok(vec![line]);
    }
    let p = parse(tool, &spec, argv)?;
    let mut head = vec!["fieldstore".to_string()];
    if let Some(c) = p.value("config") {
        head.push(format!("--config={c}"));
    }
    if FDB5_FORMS.contains(&tool) {
        head.push("--fdb5-output".into());
    }
    head.extend(sub.iter().map(|s| s.to_string()));
    let line = |rest: Vec<String>| {
        let mut l = head.clone();
        l.extend(rest);
        l
    };
    let switches = |pairs: &[(&str, &str)]| -> Vec<String> {
        pairs
            .iter()
            .filter(|(fdb, _)| p.on(fdb))
            .map(|(_, ours)| ours.to_string())
            .collect()
    };
    let per_request = |extra: Vec<String>| -> Result<Vec<Vec<String>>, FdbNameError> {
        let reqs = visit_requests(&p, &spec)?;
        if reqs.is_empty() {
            return Err(p.usage(
                "give a request (e.g. class=od,expver=0001) or --all".into(),
                "fdb-TOOL [options] [request1] [request2] ...",
            ));
        }
        Ok(reqs
            .into_iter()
            .map(|r| {
                // The control tools take the empty request for everything; the others `--all`.
                let all = r.is_empty() && !matches!(tool, "fdb-status" | "fdb-lock" | "fdb-unlock");
                let mut rest = vec![if all { "--all".to_string() } else { r }];
                rest.extend(extra.iter().cloned());
                line(rest)
            })
            .collect())
    };
    // Several requests on one line, for the tools FDB5 runs as one pass over them (a key listed
    // once, one stats summary, one dry-run note).
    let together = |lines: Vec<Vec<String>>, extra: Vec<String>| {
        if lines.len() < 2 {
            return Ok(lines);
        }
        let mut rest = visit_requests(&p, &spec)?;
        rest.extend(extra);
        Ok(vec![line(rest)])
    };
    match tool {
        "fdb-write" => {
            for f in [
                "include-filter",
                "exclude-filter",
                "filter-include",
                "filter-exclude",
            ] {
                p.unsupported(
                    f,
                    "select the messages before archiving them (e.g. grib_copy -w)",
                )?;
            }
            p.unsupported(
                "modifiers",
                "change the messages before archiving them (e.g. grib_set)",
            )?;
            if p.args.is_empty() {
                return Err(p.usage(
                    "expected at least one GRIB file".into(),
                    "fdb-write [--verbose] [--statistics] <path1> [path2] ...",
                ));
            }
            let mut rest = switches(&[("verbose", "--verbose")]);
            rest.push("--".into());
            rest.extend(p.args.iter().cloned());
            Ok(vec![line(rest)])
        }
        "fdb-read" => {
            p.unsupported(
                "extract",
                "derive the request from the GRIB file with grib_ls and give it inline",
            )?;
            if p.args.len() != 2 {
                return Err(p.usage(
                    format!("expected 2 arguments, got {}", p.args.len()),
                    "fdb-read [--raw] request.mars target.grib",
                ));
            }
            // --raw changes only how the request is shown: fieldstore reads the same fields.
            let mut rest = switches(&[("raw", "--raw")]);
            rest.extend(p.args.iter().cloned());
            Ok(vec![line(rest)])
        }
        "fdb-list" => {
            for f in ["timestamp", "length", "only-duplicates", "compact"] {
                p.unsupported(f, "not implemented by fieldstore's list yet")?;
            }
            let mut extra = switches(&[
                ("location", "--location"),
                ("full", "--full"),
                ("porcelain", "--porcelain"),
                ("json", "--json"),
            ]);
            if let Some(d) = p.value("depth") {
                extra.push(format!("--depth={d}"));
            }
            together(per_request(extra.clone())?, extra)
        }
        "fdb-axes" => {
            let mut extra = switches(&[("json", "--json")]);
            if let Some(l) = p.value("level") {
                extra.push(format!("--level={l}"));
            }
            per_request(extra)
        }
        "fdb-where" => per_request(vec![]),
        "fdb-dump" => per_request(switches(&[("simple", "--simple")])),
        "fdb-stats" => {
            let extra = switches(&[("details", "--details")]);
            together(per_request(extra.clone())?, extra)
        }
        "fdb-status" => per_request(vec![]),
        "fdb-lock" | "fdb-unlock" => per_request(switches(&[
            ("list", "--list"),
            ("retrieve", "--retrieve"),
            ("archive", "--archive"),
            ("wipe", "--wipe"),
        ])),
        "fdb-wipe" | "fdb-purge" => {
            p.unsupported(
                "unsafe-wipe-all",
                "fieldstore's databases hold only files it owns",
            )?;
            // As FDB5: deleting everything needs the minimum keys switched off explicitly.
            if p.on("all") && p.value("minimum-keys").is_none_or(|k| !k.is_empty()) {
                return Err(p.usage(
                    "--all can only be used with no minimum keys (--minimum-keys=)".into(),
                    "fdb-wipe|fdb-purge --all --minimum-keys= [--doit] [--porcelain]",
                ));
            }
            let extra = switches(&[
                ("doit", "--doit"),
                ("porcelain", "--porcelain"),
                ("ignore-no-data", "--ignore-no-data"),
            ]);
            together(per_request(extra.clone())?, extra)
        }
        "fdb-info" => Ok(vec![line(vec![])]),
        "fdb-move" => {
            p.unsupported(
                "transport",
                "fieldstore moves in one process (no MPI transport)",
            )?;
            if let Some(t) = p.value("threads") {
                // As FDB5 checks it; the copy itself is one stream per database.
                if !t.parse::<u32>().is_ok_and(|n| (1..=256).contains(&n)) {
                    return Err(p.usage(
                        "Unsupported number of threads. please specify a value between 1 and 256"
                            .into(),
                        MOVE_USAGE,
                    ));
                }
            }
            let Some(dest) = p.value("dest").filter(|d| !d.is_empty()) else {
                return Err(p.usage("No destination root specified.".into(), MOVE_USAGE));
            };
            if p.on("all") || p.args.len() != 1 {
                return Err(p.usage(
                    "give exactly one request naming a single database (Move ALL not supported)"
                        .into(),
                    MOVE_USAGE,
                ));
            }
            let request = &p.args[0];
            if let Some((k, v)) = request
                .split(',')
                .filter_map(|kv| kv.split_once('='))
                .find(|(_, v)| v.contains('/'))
            {
                return Err(p.usage(
                    format!("Move requires a single value for each parameter in the request. Parameter {k}={v} not supported."),
                    MOVE_USAGE,
                ));
            }
            let mut rest = vec![request.clone(), format!("--to={dest}"), "--single".into()];
            if p.on("keep") {
                rest.push("--keep".into());
            }
            if let Some(d) = p.value("delay") {
                rest.push(format!("--grace={d}"));
            }
            Ok(vec![line(rest)])
        }
        "fdb-hammer" => {
            let mut rest = Vec::new();
            for (fdb, ours) in [
                ("nsteps", "--steps"),
                ("nensembles", "--members"),
                ("number", "--first-member"),
                ("nlevels", "--levels"),
                ("nparams", "--params"),
                ("expver", "--expver"),
                ("class", "--class"),
            ] {
                if let Some(v) = p.value(fdb) {
                    rest.push(format!("{ours}={v}"));
                }
            }
            if p.on("read") {
                rest.push("--mode=read".into());
            }
            // FDB5's GRIB template argument is not needed: the hammer makes its own fields.
            Ok(vec![line(rest)])
        }
        "fdb-schema" => {
            if p.args.is_empty() {
                return Ok(vec![line(vec!["show".into()])]);
            }
            Ok(p.args
                .iter()
                .map(|f| line(vec!["check".into(), f.clone()]))
                .collect())
        }
        _ => Ok(vec![line(vec![])]),
    }
}

/// The `fieldstore` subcommand an FDB5 tool maps to.
fn subcommand(tool: &str) -> &'static [&'static str] {
    match tool {
        "fdb-write" => &["write"],
        "fdb-read" => &["read"],
        "fdb-list" => &["list"],
        "fdb-axes" => &["axes"],
        "fdb-where" => &["where"],
        "fdb-dump" => &["dump"],
        "fdb-stats" => &["stats"],
        "fdb-wipe" => &["wipe"],
        "fdb-purge" => &["purge"],
        "fdb-info" => &["info"],
        "fdb-hammer" => &["hammer"],
        "fdb-schema" => &["schema"],
        "fdb-server" => &["server"],
        "fdb-lock" => &["control", "lock"],
        "fdb-unlock" => &["control", "unlock"],
        "fdb-status" => &["control", "status"],
        "fdb-move" => &["move"],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(tool: &str, args: &[&str]) -> Result<Vec<Vec<String>>, FdbNameError> {
        let args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
        translate(tool, &args)
    }

    fn one(tool: &str, args: &[&str]) -> String {
        let lines = t(tool, args).unwrap();
        assert_eq!(lines.len(), 1, "{lines:?}");
        lines[0].join(" ")
    }

    #[test]
    fn names_are_taken_from_the_basename() {
        assert_eq!(
            tool_name(OsStr::new("/opt/fdb/bin/fdb-list")).as_deref(),
            Some("fdb-list")
        );
        assert_eq!(tool_name(OsStr::new("fieldstore")), None);
        assert!(matches!(
            t("fdb-copy", &[]),
            Err(FdbNameError::UnknownTool { .. })
        ));
    }

    #[test]
    fn every_installed_name_translates() {
        for tool in TOOLS {
            assert!(spec(tool).is_some(), "{tool}");
            assert!(!subcommand(tool).is_empty(), "{tool}");
        }
    }

    #[test]
    fn list_flags_and_requests() {
        assert_eq!(
            one(
                "fdb-list",
                &[
                    "--config=/c.yaml",
                    "--porcelain",
                    "--all",
                    "--minimum-keys="
                ]
            ),
            "fieldstore --config=/c.yaml --fdb5-output list --all --porcelain"
        );
        let lines = t(
            "fdb-list",
            &["--location", "class=od,expver=0001", "class=rd,expver=xxxx"],
        )
        .unwrap();
        assert_eq!(
            lines,
            [[
                "fieldstore",
                "--fdb5-output",
                "list",
                "class=od,expver=0001",
                "class=rd,expver=xxxx",
                "--location"
            ]]
        );
    }

    #[test]
    fn minimum_keys_are_enforced_and_overridable() {
        let e = t("fdb-list", &["class=od"]).unwrap_err();
        assert!(e.to_string().contains("lacks expver"), "{e}");
        assert!(t("fdb-list", &["--minimum-keys=class", "class=od"]).is_ok());
        let e = t("fdb-wipe", &["class=od,expver=0001", "--doit"]).unwrap_err();
        assert!(e.to_string().contains("stream,date,time"), "{e}");
    }

    #[test]
    fn unknown_and_unsupported_flags_are_named() {
        let e = t("fdb-list", &["--bogus", "class=od,expver=1"]).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("--bogus") || msg.contains("bogus"), "{msg}");
        assert!(
            msg.contains("--porcelain") && msg.contains("--config"),
            "{msg}"
        );
        let e = t("fdb-write", &["--modifiers=expver=0042", "a.grib"]).unwrap_err();
        assert!(e.to_string().contains("does not support"), "{e}");
        assert!(matches!(
            t("fdb-list", &["--depth", "x"]),
            Err(FdbNameError::MissingValue { .. })
        ));
        assert!(matches!(
            t("fdb-list", &["--all=1"]),
            Err(FdbNameError::UnexpectedValue { .. })
        ));
    }

    #[test]
    fn read_write_wipe_shapes() {
        assert_eq!(
            one("fdb-read", &["req", "out.grib"]),
            "fieldstore --fdb5-output read req out.grib"
        );
        assert_eq!(
            one("fdb-read", &["--raw", "req", "out.grib"]),
            "fieldstore --fdb5-output read --raw req out.grib"
        );
        assert!(matches!(
            t("fdb-read", &["req"]),
            Err(FdbNameError::Usage { .. })
        ));
        assert_eq!(
            one("fdb-write", &["--verbose", "a.grib", "b.grib"]),
            "fieldstore --fdb5-output write --verbose -- a.grib b.grib"
        );
        assert!(t("fdb-write", &[]).is_err());
        let db = "class=od,expver=0001,stream=oper,date=20261122,time=1200";
        assert_eq!(
            one("fdb-wipe", &["--doit", db]),
            format!("fieldstore --fdb5-output wipe {db} --doit")
        );
        // Several databases: one pass, as FDB5 (one dry-run note at the end).
        let other = "class=od,expver=0001,stream=oper,date=20261123,time=1200";
        assert_eq!(
            one("fdb-wipe", &[db, other, "--porcelain"]),
            format!("fieldstore --fdb5-output wipe {db} {other} --porcelain")
        );
        // As FDB5: wiping everything needs the minimum keys switched off.
        assert!(t("fdb-wipe", &["--all"]).is_err());
        assert_eq!(
            one("fdb-wipe", &["--all", "--minimum-keys=", "--porcelain"]),
            "fieldstore --fdb5-output wipe --all --porcelain"
        );
        assert_eq!(
            one("fdb-lock", &["--archive", db]),
            format!("fieldstore control lock {db} --archive")
        );
    }

    #[test]
    fn visit_all_is_the_empty_request_and_takes_no_requests() {
        assert_eq!(
            one("fdb-where", &["--all"]),
            "fieldstore --fdb5-output where --all"
        );
        assert_eq!(
            one("fdb-stats", &["--all", "--details"]),
            "fieldstore --fdb5-output stats --all --details"
        );
        assert!(matches!(
            t("fdb-where", &["--all", "class=od,expver=1"]),
            Err(FdbNameError::AllWithRequests { .. })
        ));
    }

    #[test]
    fn hammer_and_help() {
        assert_eq!(
            one(
                "fdb-hammer",
                &["--nsteps=2", "--nlevels=3", "--read", "template.grib"]
            ),
            "fieldstore hammer --steps=2 --levels=3 --mode=read"
        );
        assert_eq!(one("fdb-list", &["--help"]), "fieldstore list --help");
        assert_eq!(one("fdb-schema", &[]), "fieldstore schema show");
    }

    #[test]
    fn plans_carry_the_tolerances_and_info_questions() {
        let db = "class=od,expver=0001,stream=oper,date=20261122,time=1200";
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let p = plan(
            "fdb-wipe",
            &args(&["--ignore-no-data", "--ignore-errors", db]),
        )
        .unwrap();
        assert!(p.ignore_not_found && p.ignore_errors);
        assert_eq!(p.lines.len(), 1);
        let p = plan("fdb-info", &args(&["--schema", "--home", "--config=/c"])).unwrap();
        assert!(p.lines.is_empty());
        assert_eq!(
            p.info,
            Some(InfoQuery {
                config: Some("/c".into()),
                items: vec![InfoItem::Home, InfoItem::Schema],
                all: false,
            })
        );
        let p = plan("fdb-info", &args(&["--all", "--version"])).unwrap();
        assert_eq!(p.info.map(|i| (i.items, i.all)), Some((vec![], true)));
        assert!(plan("fdb-info", &args(&["--lustre-api"])).is_err());
    }
}
