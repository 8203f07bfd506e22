//! The MARS request language: `retrieve,class=od,param=t/u,step=0/to/24/by/6`.
//!
//! This module knows the syntax and `to`/`by` ranges; canonical values per keyword come from the
//! schema's types (`types.rs`), because only the schema knows a keyword's type.

use std::fmt;

use chrono::{Duration, NaiveDate};

use super::types::{parse_date, Context};

/// Verbs a request file may start a request with.
pub const VERBS: &[&str] = &[
    "retrieve",
    "archive",
    "list",
    "read",
    "get",
    "flush",
    "compute",
    "write",
    "pointdb",
    "disseminate",
    "wipe",
    "purge",
    "stats",
    "where",
    "axes",
    "dump",
    "inspect",
];

/// Ranges longer than this are refused: they are typing mistakes, and would exhaust memory.
const MAX_RANGE: usize = 100_000;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("request line {line}, column {column}: {message}\n  {text}\n  {caret}^")]
pub struct RequestError {
    pub line: usize,
    pub column: usize,
    pub message: String,
    /// The offending line.
    pub text: String,
    caret: String,
}

impl RequestError {
    fn at(src: &str, pos: usize, message: impl Into<String>) -> Self {
        let pos = pos.min(src.len());
        let before = src.get(..pos).unwrap_or("");
        let line = before.matches('\n').count() + 1;
        let start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before.get(start..).map_or(0, |s| s.chars().count()) + 1;
        let text = src
            .get(start..)
            .and_then(|s| s.lines().next())
            .unwrap_or("")
            .to_string();
        RequestError {
            line,
            column,
            message: message.into(),
            text,
            caret: " ".repeat(column - 1),
        }
    }

    fn keyword(kw: &Param, message: impl Into<String>) -> Self {
        RequestError {
            line: kw.line,
            column: kw.column,
            message: message.into(),
            text: String::new(),
            caret: String::new(),
        }
    }
}

/// One keyword of a request, its values and where it was written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub keyword: String,
    pub values: Vec<String>,
    pub line: usize,
    pub column: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    verb: Option<String>,
    params: Vec<Param>,
}

impl Request {
    pub fn new(verb: Option<&str>) -> Self {
        Request {
            verb: verb.map(str::to_string),
            params: Vec::new(),
        }
    }

    pub fn verb(&self) -> Option<&str> {
        self.verb.as_deref()
    }

    pub fn get(&self, keyword: &str) -> Option<&[String]> {
        self.params
            .iter()
            .find(|p| p.keyword == keyword)
            .map(|p| p.values.as_slice())
    }

    pub fn keywords(&self) -> impl Iterator<Item = &str> {
        self.params.iter().map(|p| p.keyword.as_str())
    }

    pub fn params(&self) -> &[Param] {
        &self.params
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &[String])> + Clone {
        self.params
            .iter()
            .map(|p| (p.keyword.as_str(), p.values.as_slice()))
    }

    pub fn is_empty(&self) -> bool {
        self.params.is_empty()
    }

    pub fn set(&mut self, keyword: &str, values: Vec<String>) {
        let keyword = keyword.to_ascii_lowercase();
        match self.params.iter_mut().find(|p| p.keyword == keyword) {
            Some(p) => p.values = values,
            None => self.params.push(Param {
                keyword,
                values,
                line: 0,
                column: 0,
            }),
        }
    }

    pub fn remove(&mut self, keyword: &str) {
        self.params.retain(|p| p.keyword != keyword);
    }

    /// Turns `a/to/b[/by/c]` into explicit values, by keyword: dates by days, times by hours
    /// (default 6), steps by hours (default 12, as MARS), levels and other integers by 1.
    pub fn expand_ranges(&self, cx: &Context) -> Result<Request, RequestError> {
        let mut out = self.clone();
        for p in &mut out.params {
            if !p.values.iter().any(|v| v.eq_ignore_ascii_case("to")) {
                continue;
            }
            p.values = expand_values(p, cx)?;
        }
        Ok(out)
    }
}

impl fmt::Display for Request {
    /// The canonical form, `verb,k=v1/v2,...`, which `parse_request` reads back unchanged.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        if let Some(v) = &self.verb {
            f.write_str(v)?;
            first = false;
        }
        for p in &self.params {
            if !first {
                f.write_str(",")?;
            }
            first = false;
            write!(f, "{}=", p.keyword)?;
            for (i, v) in p.values.iter().enumerate() {
                if i > 0 {
                    f.write_str("/")?;
                }
                if needs_quotes(v) {
                    write!(f, "\"{v}\"")?;
                } else {
                    f.write_str(v)?;
                }
            }
        }
        Ok(())
    }
}

fn needs_quotes(v: &str) -> bool {
    v.is_empty()
        || v.chars()
            .any(|c| matches!(c, ',' | '/' | '=' | '"' | '\'' | '#' | '\\'))
        || v.trim() != v
        || v.contains('\n')
}

/// Parses one request as typed on a command line; the verb is optional.
pub fn parse_request(text: &str) -> Result<Request, RequestError> {
    let mut reqs = Parser::new(text).parse(false)?;
    match reqs.len() {
        0 => Ok(Request::default()),
        1 => Ok(reqs.remove(0)),
        _ => Err(RequestError::at(
            text,
            0,
            "expected one request, found several",
        )),
    }
}

/// Parses a request file: one or more requests, each starting with a verb.
pub fn parse_requests(text: &str) -> Result<Vec<Request>, RequestError> {
    Parser::new(text).parse(true)
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
}

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Self {
        Parser { src, pos: 0 }
    }

    fn peek(&self) -> Option<char> {
        self.src.get(self.pos..).and_then(|s| s.chars().next())
    }

    fn bump(&mut self) {
        if let Some(c) = self.peek() {
            self.pos += c.len_utf8();
        }
    }

    fn err(&self, pos: usize, msg: impl Into<String>) -> RequestError {
        RequestError::at(self.src, pos, msg)
    }

    /// Whitespace, comments and backslash-newline continuations.
    fn skip_ws(&mut self) {
        loop {
            match self.peek() {
                Some(c) if c.is_whitespace() => self.bump(),
                Some('#') => {
                    while !matches!(self.peek(), None | Some('\n')) {
                        self.bump();
                    }
                }
                Some('\\')
                    if self
                        .src
                        .get(self.pos + 1..)
                        .is_some_and(|s| s.starts_with('\n') || s.starts_with("\r\n")) =>
                {
                    self.bump();
                }
                _ => return,
            }
        }
    }

    /// A bare word: stops at separators; internal spaces are kept (`model levels`).
    fn word(&mut self, stops: &[char]) -> String {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if stops.contains(&c) || c == '\n' || c == '#' {
                break;
            }
            // A '.' standing alone after a value ends the request (`param=10v .`); `10v.` is a value.
            if c.is_whitespace() {
                let rest = self
                    .src
                    .get(self.pos..)
                    .unwrap_or("")
                    .trim_start_matches([' ', '\t']);
                if rest.starts_with('.') && rest[1..].chars().next().is_none_or(char::is_whitespace)
                {
                    break;
                }
            }
            if c == '\\'
                && self
                    .src
                    .get(self.pos + 1..)
                    .is_some_and(|s| s.starts_with('\n'))
            {
                break;
            }
            self.bump();
        }
        self.src
            .get(start..self.pos)
            .unwrap_or("")
            .trim()
            .to_string()
    }

    fn quoted(&mut self) -> Result<String, RequestError> {
        let start = self.pos;
        let q = self.peek().unwrap_or('"');
        self.bump();
        let body = self.pos;
        while let Some(c) = self.peek() {
            if c == q {
                let v = self.src.get(body..self.pos).unwrap_or("").to_string();
                self.bump();
                return Ok(v);
            }
            self.bump();
        }
        Err(self.err(start, format!("unterminated quoted value: no closing {q}")))
    }

    fn parse(mut self, file: bool) -> Result<Vec<Request>, RequestError> {
        let mut out = Vec::new();
        loop {
            self.skip_ws();
            if self.peek().is_none() {
                return Ok(out);
            }
            out.push(self.request(file)?);
        }
    }

    fn request(&mut self, file: bool) -> Result<Request, RequestError> {
        let start = self.pos;
        let first = self.word(&[',', '=', '/', '"', '\'']);
        self.skip_ws();
        let mut req = Request::default();
        let mut pending_keyword = None;
        if self.peek() == Some('=') {
            if file {
                return Err(self.err(
                    start,
                    format!("expected a verb (such as retrieve or list) before '{first}='"),
                ));
            }
            pending_keyword = Some((first, start));
        } else if first.is_empty() {
            let c = self
                .peek()
                .map_or("end of input".to_string(), |c| format!("'{c}'"));
            return Err(self.err(self.pos, format!("expected a verb or keyword, found {c}")));
        } else {
            let verb = first.to_ascii_lowercase();
            if verb.contains(char::is_whitespace)
                || !verb
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(self.err(
                    start,
                    format!("'{first}' is not a verb; expected keyword=value"),
                ));
            }
            req.verb = Some(verb);
            match self.peek() {
                Some(',') => self.bump(),
                None => return Ok(req),
                Some('.') => {
                    self.bump();
                    return Ok(req);
                }
                Some(c) if file && c.is_alphabetic() => return Ok(req),
                Some(c) => {
                    return Err(self.err(
                        self.pos,
                        format!("expected ',' after the verb, found '{c}'"),
                    ))
                }
            }
        }
        loop {
            self.skip_ws();
            let (kw, kw_pos) = match pending_keyword.take() {
                Some(k) => k,
                None => {
                    let p = self.pos;
                    match self.peek() {
                        None => return Ok(req),
                        Some('.') => {
                            self.bump();
                            return Ok(req);
                        }
                        _ => {}
                    }
                    (self.word(&[',', '=', '/', '"', '\'']), p)
                }
            };
            if kw.is_empty() {
                let c = self
                    .peek()
                    .map_or("end of input".into(), |c| format!("'{c}'"));
                return Err(self.err(kw_pos, format!("expected a keyword, found {c}")));
            }
            if kw.contains(char::is_whitespace) {
                return Err(self.err(
                    kw_pos,
                    format!(
                        "expected '=' after keyword '{}'",
                        kw.split_whitespace().next().unwrap_or(&kw)
                    ),
                ));
            }
            self.skip_ws();
            if self.peek() != Some('=') {
                return Err(self.err(self.pos, format!("expected '=' after keyword '{kw}'")));
            }
            self.bump();
            let keyword = kw.to_ascii_lowercase();
            let (line, column) = {
                let e = self.err(kw_pos, "");
                (e.line, e.column)
            };
            if req.params.iter().any(|p| p.keyword == keyword) {
                return Err(self.err(kw_pos, format!("keyword '{keyword}' given twice")));
            }
            let mut values = Vec::new();
            loop {
                self.skip_ws();
                let vpos = self.pos;
                let v = match self.peek() {
                    Some('"') | Some('\'') => self.quoted()?,
                    _ => {
                        let w = self.word(&[',', '/', '"', '\'', '=']);
                        if w.is_empty() {
                            return Err(self.err(vpos, format!("expected a value for '{keyword}'")));
                        }
                        w
                    }
                };
                values.push(v);
                self.skip_ws();
                if self.peek() == Some('/') {
                    self.bump();
                } else {
                    break;
                }
            }
            req.params.push(Param {
                keyword,
                values,
                line,
                column,
            });
            self.skip_ws();
            match self.peek() {
                None => return Ok(req),
                Some(',') => self.bump(),
                Some('.') => {
                    self.bump();
                    return Ok(req);
                }
                Some('=') => {
                    return Err(self.err(
                        self.pos,
                        "unexpected '=': a value cannot contain '=' unless quoted",
                    ))
                }
                Some(_) if file => return Ok(req),
                Some(c) => {
                    return Err(self.err(
                        self.pos,
                        format!("expected ',' between keywords, found '{c}'"),
                    ))
                }
            }
        }
    }
}

#[derive(Clone, Copy)]
enum RangeKind {
    Date,
    Time,
    Step,
    Float,
    Integer,
}

fn range_kind(keyword: &str) -> Option<RangeKind> {
    Some(match keyword {
        "date" | "hdate" | "refdate" => RangeKind::Date,
        "time" | "anoffset" => RangeKind::Time,
        "step" | "fcperiod" => RangeKind::Step,
        "levelist" | "latitude" | "longitude" => RangeKind::Float,
        "number" | "fcmonth" | "iteration" | "frequency" | "direction" | "channel"
        | "diagnostic" | "ident" | "instrument" | "system" | "method" | "quantile" | "param" => {
            RangeKind::Integer
        }
        _ => return None,
    })
}

fn expand_values(p: &Param, cx: &Context) -> Result<Vec<String>, RequestError> {
    let kind = range_kind(&p.keyword).ok_or_else(|| {
        RequestError::keyword(p, format!("'{}' does not take ranges (a/to/b)", p.keyword))
    })?;
    let v = &p.values;
    let mut out = Vec::new();
    let mut i = 0;
    while i < v.len() {
        let is_range = v.get(i + 1).is_some_and(|t| t.eq_ignore_ascii_case("to"));
        if !is_range {
            if v[i].eq_ignore_ascii_case("to") || v[i].eq_ignore_ascii_case("by") {
                return Err(RequestError::keyword(
                    p,
                    format!("'{}' without a value before it in '{}'", v[i], p.keyword),
                ));
            }
            out.push(v[i].clone());
            i += 1;
            continue;
        }
        let from = &v[i];
        let to = v.get(i + 2).ok_or_else(|| {
            RequestError::keyword(p, format!("'{}': range '{from}/to' has no end", p.keyword))
        })?;
        let mut by = None;
        i += 3;
        if v.get(i).is_some_and(|t| t.eq_ignore_ascii_case("by")) {
            by = Some(
                v.get(i + 1)
                    .ok_or_else(|| {
                        RequestError::keyword(p, format!("'{}': 'by' has no step", p.keyword))
                    })?
                    .as_str(),
            );
            i += 2;
        }
        expand_one(p, kind, from, to, by, cx, &mut out)?;
        if out.len() > MAX_RANGE {
            return Err(RequestError::keyword(
                p,
                format!(
                    "'{}': range expands to more than {MAX_RANGE} values",
                    p.keyword
                ),
            ));
        }
    }
    Ok(out)
}

/// Walks from `a` towards `b` by `|by|`, whichever direction `b` lies in (MARS allows descending
/// ranges with a positive step).
fn walk(a: i64, b: i64, by: i64, out: &mut Vec<i64>) -> Result<(), String> {
    if by == 0 {
        return Err("'by' must not be 0".into());
    }
    let step = by.abs();
    if (b - a).unsigned_abs() / step.unsigned_abs() > MAX_RANGE as u64 {
        return Err(format!("range expands to more than {MAX_RANGE} values"));
    }
    let mut x = a;
    if a <= b {
        while x <= b {
            out.push(x);
            x += step;
        }
    } else {
        while x >= b {
            out.push(x);
            x -= step;
        }
    }
    Ok(())
}

fn expand_one(
    p: &Param,
    kind: RangeKind,
    from: &str,
    to: &str,
    by: Option<&str>,
    cx: &Context,
    out: &mut Vec<String>,
) -> Result<(), RequestError> {
    let bad =
        |what: &str, v: &str| RequestError::keyword(p, format!("'{}': {what} '{v}'", p.keyword));
    let wrap = |e: String| RequestError::keyword(p, format!("'{}': {e}", p.keyword));
    let mut xs = Vec::new();
    match kind {
        RangeKind::Date => {
            let a = parse_date(from, cx).ok_or_else(|| bad("not a date", from))?;
            let b = parse_date(to, cx).ok_or_else(|| bad("not a date", to))?;
            let by: i64 = by
                .map_or(Ok(1), |s| s.parse())
                .map_err(|_| bad("not a number of days", by.unwrap_or("")))?;
            let epoch = NaiveDate::default();
            walk((a - epoch).num_days(), (b - epoch).num_days(), by, &mut xs).map_err(wrap)?;
            out.extend(
                xs.into_iter()
                    .map(|d| (epoch + Duration::days(d)).format("%Y%m%d").to_string()),
            );
        }
        RangeKind::Time => {
            let mins = |s: &str| -> Option<i64> {
                let t = super::types::KeyType::Time.canonical("time", s, cx).ok()?;
                let n: i64 = t.parse().ok()?;
                Some(n / 100 * 60 + n % 100)
            };
            let a = mins(from).ok_or_else(|| bad("not a time", from))?;
            let b = mins(to).ok_or_else(|| bad("not a time", to))?;
            let by = match by {
                None => 360,
                Some(s) if s.starts_with('-') => {
                    return Err(bad("negative 'by' is not allowed for", s))
                }
                Some(s) if s.len() >= 3 => mins(s).ok_or_else(|| bad("not a time step", s))?,
                Some(s) => {
                    s.parse::<i64>()
                        .map_err(|_| bad("not a number of hours", s))?
                        * 60
                }
            };
            walk(a, b, by, &mut xs).map_err(wrap)?;
            out.extend(
                xs.into_iter()
                    .map(|m| format!("{:02}{:02}", m / 60, m % 60)),
            );
        }
        RangeKind::Step => {
            let mins = |s: &str| -> Option<i64> {
                let s = s.to_ascii_lowercase();
                if let Some(n) = s.strip_suffix('m') {
                    n.parse::<i64>().ok()
                } else {
                    s.strip_suffix('h')
                        .unwrap_or(&s)
                        .parse::<i64>()
                        .ok()
                        .map(|h| h * 60)
                }
            };
            let a = mins(from).ok_or_else(|| bad("not a step", from))?;
            let b = mins(to).ok_or_else(|| bad("not a step", to))?;
            let by = by
                .map_or(Some(720), mins)
                .ok_or_else(|| bad("not a step", by.unwrap_or("")))?;
            walk(a, b, by, &mut xs).map_err(wrap)?;
            out.extend(xs.into_iter().map(|m| {
                if m % 60 == 0 {
                    (m / 60).to_string()
                } else {
                    format!("{m}m")
                }
            }));
        }
        RangeKind::Integer => {
            let n = |s: &str| s.parse::<i64>().map_err(|_| bad("not an integer", s));
            let by = by.map_or(Ok(1), n)?;
            walk(n(from)?, n(to)?, by, &mut xs).map_err(wrap)?;
            out.extend(xs.into_iter().map(|x| x.to_string()));
        }
        RangeKind::Float => {
            // Scaled to integers so that 0.1 steps do not drift.
            let f = |s: &str| {
                s.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite())
                    .ok_or_else(|| bad("not a number", s))
            };
            let (a, b) = (f(from)?, f(to)?);
            let by = by.map_or(Ok(1.0), f)?;
            let scale = 1000.0;
            walk(
                (a * scale).round() as i64,
                (b * scale).round() as i64,
                (by * scale).round() as i64,
                &mut xs,
            )
            .map_err(wrap)?;
            out.extend(xs.into_iter().map(|x| {
                let v = x as f64 / scale;
                if v.fract() == 0.0 {
                    format!("{}", v as i64)
                } else {
                    format!("{v}")
                }
            }));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn cx() -> Context<'static> {
        Context {
            today: NaiveDate::from_ymd_opt(2026, 11, 22).unwrap(),
            params: None,
        }
    }

    fn expand(s: &str) -> String {
        parse_request(s)
            .unwrap()
            .expand_ranges(&cx())
            .unwrap()
            .to_string()
    }

    #[test]
    fn command_line_requests() {
        let r = parse_request("class=od, expver=1,param=t/u ,levtype = model levels").unwrap();
        assert_eq!(r.verb(), None);
        assert_eq!(r.get("param").unwrap(), &["t", "u"]);
        assert_eq!(r.get("levtype").unwrap(), &["model levels"]);
        assert_eq!(
            r.to_string(),
            "class=od,expver=1,param=t/u,levtype=model levels"
        );
        let r = parse_request("RETRIEVE,CLASS=OD,LEVELIST=500/400").unwrap();
        assert_eq!(r.verb(), Some("retrieve"));
        assert_eq!(r.get("class").unwrap(), &["OD"]);
        assert_eq!(
            parse_request("list,param=10v.")
                .unwrap()
                .get("param")
                .unwrap(),
            &["10v."]
        );
        assert_eq!(
            parse_request("list,param=10v .")
                .unwrap()
                .get("param")
                .unwrap(),
            &["10v"]
        );
        assert_eq!(
            parse_request("x=\"a,b/c\"").unwrap().get("x").unwrap(),
            &["a,b/c"]
        );
    }

    #[test]
    fn request_files() {
        let text = "# two requests\nretrieve,\n  class=od,  # a comment\n  param=t/\\\n  u,\n  step=0/to/12/by/6\nlist, class=rd,\n expver=xxxx\n";
        let rs = parse_requests(text).unwrap();
        assert_eq!(rs.len(), 2);
        assert_eq!(
            rs[0].to_string(),
            "retrieve,class=od,param=t/u,step=0/to/12/by/6"
        );
        assert_eq!(rs[1].to_string(), "list,class=rd,expver=xxxx");
        assert_eq!(rs[1].params()[1].line, 8);
    }

    #[test]
    fn errors_point_at_the_problem() {
        let e = parse_request("class=od,\nparam 130").unwrap_err();
        assert_eq!((e.line, e.column), (2, 1), "{e}");
        assert!(
            e.to_string().contains("expected '=' after keyword 'param'"),
            "{e}"
        );
        assert!(e.to_string().contains("  param 130\n  ^"), "{e}");
        for bad in [
            "class=",
            "class=od,,",
            "=od",
            "class=od,class=rd",
            "class=\"od",
            "class=od=x",
            "class=a/",
        ] {
            assert!(parse_request(bad).is_err(), "{bad}");
        }
        let e = parse_requests("class=od").unwrap_err();
        assert!(e.message.contains("expected a verb"), "{e}");
    }

    #[test]
    fn ranges() {
        assert_eq!(expand("step=0/to/24/by/6"), "step=0/6/12/18/24");
        assert_eq!(expand("step=0/to/6"), "step=0");
        assert_eq!(expand("step=0/to/2/by/30m"), "step=0/30m/1/90m/2");
        assert_eq!(
            expand("date=20190130/to/20190202"),
            "date=20190130/20190131/20190201/20190202"
        );
        assert_eq!(expand("date=-2/to/0"), "date=20261120/20261121/20261122");
        assert_eq!(expand("time=0/to/18"), "time=0000/0600/1200/1800");
        assert_eq!(
            expand("time=0000/to/1200/by/3"),
            "time=0000/0300/0600/0900/1200"
        );
        assert_eq!(
            expand("levelist=1000/to/850/by/50"),
            "levelist=1000/950/900/850"
        );
        assert_eq!(expand("levelist=0.5/to/1.5/by/0.5"), "levelist=0.5/1/1.5");
        assert_eq!(expand("number=1/to/5"), "number=1/2/3/4/5");
        assert_eq!(expand("number=1/to/3/7/10/to/11"), "number=1/2/3/7/10/11");
        assert_eq!(expand("param=t/u"), "param=t/u");
        let err = |s: &str| {
            parse_request(s)
                .unwrap()
                .expand_ranges(&cx())
                .unwrap_err()
                .message
        };
        assert!(err("step=0/to/6/by/0").contains("must not be 0"));
        assert!(err("class=od/to/rd").contains("does not take ranges"));
        assert!(err("time=0/to/12/by/-6").contains("negative"));
        assert!(err("number=1/to/100000000").contains("more than"));
        assert!(err("step=0/to").contains("no end"));
    }

    fn canonical_request() -> impl Strategy<Value = Request> {
        let word = "[a-z][a-z0-9]{0,7}";
        let value = prop_oneof!["[a-z0-9]{1,8}", "[a-z0-9 ,/=]{0,8}"];
        (
            proptest::option::of(prop::sample::select(VERBS)),
            prop::collection::btree_map(word, prop::collection::vec(value, 1..4), 0..6),
        )
            .prop_map(|(verb, params)| {
                let mut r = Request::new(verb);
                for (k, vs) in params {
                    if VERBS.contains(&k.as_str()) {
                        continue;
                    }
                    r.set(&k, vs);
                }
                r
            })
    }

    proptest! {
        #[test]
        fn print_parse_is_identity(r in canonical_request()) {
            let text = r.to_string();
            let back = parse_request(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
            prop_assert_eq!(back.to_string(), text);
        }

        #[test]
        fn parser_never_panics(s in "\\PC{0,60}") {
            let _ = parse_request(&s);
            let _ = parse_requests(&s);
            if let Ok(r) = parse_request(&s) {
                let _ = r.expand_ranges(&cx());
            }
        }
    }
}
