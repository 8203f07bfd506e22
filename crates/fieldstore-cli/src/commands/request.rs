//! `fieldstore request expand`: what a MARS request means, canonical and expanded.

use anyhow::Result;
use clap::Subcommand;
use fieldstore::model::request::{parse_request, parse_requests, Request};
use fieldstore::model::schema::{ExpandMode, Schema};
use fieldstore::model::types::Context;

use crate::context::Session;

#[derive(Subcommand, Debug)]
pub enum RequestCmd {
    /// Print the canonical, expanded form of a request (inline, or a request file).
    Expand {
        /// `class=od,param=t/u,step=0/to/24/by/6`, or a file of requests.
        request: String,
        /// Also show how the schema splits it (databases / indexes / datums per rule).
        #[arg(long)]
        schema: bool,
    },
}

/// A request given on the command line: a file of requests if such a file exists, else inline.
pub fn read_requests(arg: &str) -> Result<Vec<Request>> {
    let path = std::path::Path::new(arg);
    if !arg.contains('=') && path.is_file() {
        let text = std::fs::read_to_string(path)?;
        return parse_requests(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()));
    }
    Ok(vec![parse_request(arg)?])
}

/// A request with ranges expanded and each value in its canonical form by the schema's type for
/// that keyword (the first rule naming it): `param=t` is `param=130`, `time=12` is `time=1200`.
pub fn canonical(expanded: &Request, sch: &Schema, cx: &Context) -> Result<Request> {
    let mut canonical = Request::new(expanded.verb());
    for (kw, values) in expanded.iter() {
        let ty = sch
            .paths()
            .iter()
            .flat_map(|p| p.levels.iter().flatten())
            .find(|p| p.keyword == kw)
            .map(|p| p.ty);
        let vals = match ty {
            Some(t) => values
                .iter()
                .map(|v| t.canonical(kw, v, cx))
                .collect::<Result<Vec<_>, _>>()?,
            None => values.to_vec(),
        };
        canonical.set(kw, vals);
    }
    Ok(canonical)
}

pub fn run(cmd: RequestCmd, session: &Session) -> Result<()> {
    match cmd {
        RequestCmd::Expand { request, schema } => {
            let cx = session.type_context();
            let sch = session.schema()?;
            for req in read_requests(&request)? {
                let expanded = req.expand_ranges(&cx)?;
                let canonical = canonical(&expanded, &sch, &cx)?;
                outln!("{canonical}")?;
                if schema {
                    let mode = if req.verb() == Some("retrieve") {
                        ExpandMode::Retrieve
                    } else {
                        ExpandMode::List
                    };
                    for e in sch.expand(expanded.iter(), mode, &cx)? {
                        let fmt = |l: &fieldstore::model::schema::LevelSelection| {
                            l.keywords
                                .iter()
                                .map(|(k, v)| match v {
                                    Some(v) => format!("{k}={}", v.join("/")),
                                    None => format!("{k}=*"),
                                })
                                .collect::<Vec<_>>()
                                .join(",")
                        };
                        // The number of keys, computed rather than enumerated: a request's
                        // lists multiply to more keys than memory holds.
                        let count = e
                            .levels
                            .iter()
                            .map(|l| l.count())
                            .try_fold(1u64, |n, c| Some(n.saturating_mul(c?)));
                        let names = match count {
                            Some(u64::MAX) => " (names 18446744073709551615 or more keys)".into(),
                            Some(1) => " (names 1 key)".to_string(),
                            Some(n) => format!(" (names {n} keys)"),
                            None => String::new(),
                        };
                        outln!(
                            "  rule at line {}: {{{}}}{{{}}}{{{}}}{names}",
                            e.line,
                            fmt(&e.levels[0]),
                            fmt(&e.levels[1]),
                            fmt(&e.levels[2])
                        )?;
                    }
                }
            }
        }
    }
    Ok(())
}
