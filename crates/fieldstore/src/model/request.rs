//! The MARS request language: `retrieve,class=od,param=t/u,step=0/to/24/by/6`.
//!
//! This module knows the syntax and `to`/`by` ranges; canonical values per keyword come from the
//! schema's types (`types.rs`), because only the schema knows a keyword's type.
//!
//! Choices where MARS leaves room:
//! * a keyword given twice: the later values win and the keyword keeps its first position, as
//!   metkit does (`fdb-list 'NUMBER=1,number=2'` lists `number=2`);
//! * the verb must be one of [`VERBS`] (case-insensitive), so a typo is not read as a request
//!   with a different meaning; on the command line a request may omit it;
//! * an unquoted empty value (`expver=`) is an error; write `expver=""` for an explicit empty value;
//! * a `.` ends a request only when separated from the last value (`param=10v.` is `10v.`).

use std::fmt;

use chrono::{Datelike, NaiveDate};

use super::step;
use super::types::{parse_date, Context, KeyType};

/// Verbs a request may start with.
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

/// Ranges naming more values than this, in all the ranges of one request together, are refused:
/// they are typing mistakes (`step=0/to/999999999`), and every value costs memory in whoever
/// expands the request (a server expands its clients' requests). Per request rather than per
/// keyword so that twenty long ranges cannot add up to what one may not.
pub const MAX_RANGE: usize = 1_000_000;

/// A request that cannot be read or expanded, with where it was written. `line` is 0 for values
/// that did not come from text (set by a program).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", render(*.line, *.column, .message, .text))]
pub struct RequestError {
    pub line: usize,
    pub column: usize,
    pub message: String,
    /// The offending line, empty when unknown.
    pub text: String,
}

fn render(line: usize, column: usize, message: &str, text: &str) -> String {
    if line == 0 {
        return format!("request: {message}");
    }
    let mut s = format!("request line {line}, column {column}: {message}");
    if !text.is_empty() {
        // Tabs are kept so that the caret lines up under the column in a terminal.
        let caret: String = text
            .chars()
            .take(column.saturating_sub(1))
            .map(|c| if c == '\t' { '\t' } else { ' ' })
            .collect();
        s.push_str(&format!("\n  {text}\n  {caret}^"));
    }
    s
}

impl RequestError {
    fn keyword(kw: &Param, message: impl Into<String>) -> Self {
        RequestError {
            line: kw.line,
            column: kw.column,
            message: message.into(),
            text: String::new(),
        }
    }
}

/// One keyword of a request, its values and where it was written (line 0 when set by a program).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Param {
    pub keyword: String,
    pub values: Vec<String>,
    pub line: usize,
    pub column: usize,
}

/// A parsed request: an optional verb and keywords in the order written, each with its values.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Request {
    verb: Option<String>,
    params: Vec<Param>,
}

impl Request {
    pub fn new(verb: Option<&str>) -> Self {
        Request {
            verb: verb.map(str::to_ascii_lowercase),
            params: Vec::new(),
        }
    }

    pub fn verb(&self) -> Option<&str> {
        self.verb.as_deref()
    }

    /// Keywords are stored lower-case; lookups ignore case.
    pub fn get(&self, keyword: &str) -> Option<&[String]> {
        self.params
            .iter()
            .find(|p| p.keyword.eq_ignore_ascii_case(keyword))
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

    /// Replaces the values of a keyword in place, or appends it.
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
        self.params
            .retain(|p| !p.keyword.eq_ignore_ascii_case(keyword));
    }

    /// Turns `a/to/b[/by/c]` into explicit values, by keyword: dates by days, times by hours
    /// (default 6), steps by hours (default 12, as MARS: `step=0/to/6` is just `0`), levels and
    /// other integers by 1. `a/to/b/to/c` continues from the last value produced. Keywords
    /// without ranges are left as they are; `to` in a keyword that takes no ranges is an error.
    pub fn expand_ranges(&self, cx: &Context) -> Result<Request, RequestError> {
        let mut out = self.clone();
        // Values of earlier keywords with ranges, against the request-wide budget.
        let mut used = 0usize;
        for p in &mut out.params {
            let has = |w: &str| p.values.iter().any(|v| v.eq_ignore_ascii_case(w));
            let kind = range_kind(&p.keyword);
            if !(has("to") || (kind.is_some() && has("by"))) {
                continue;
            }
            let kind = kind.ok_or_else(|| {
                RequestError::keyword(
                    p,
                    format!(
                        "'{}' does not take ranges (a/to/b); only dates, times, steps, levels \
                         and numbers do",
                        p.keyword
                    ),
                )
            })?;
            p.values = expand_values(p, kind, used, cx)?;
            used = used.saturating_add(p.values.len());
        }
        Ok(out)
    }
}

impl fmt::Display for Request {
    /// The canonical form, `verb,k=v1/v2,...`, which `parse_request` reads back unchanged. A value
    /// holding both kinds of quote cannot be written back (the parser never produces one).
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
                    let q = if v.contains('"') { '\'' } else { '"' };
                    write!(f, "{q}{v}{q}")?;
                } else {
                    f.write_str(v)?;
                }
            }
        }
        Ok(())
    }
}

/// Whether a value would not read back the same without quotes.
fn needs_quotes(v: &str) -> bool {
    v.is_empty()
        || v.trim() != v
        || v.chars().any(|c| {
            matches!(
                c,
                ',' | '/' | '=' | '"' | '\'' | '#' | '\\' | '\n' | '\r'
            )
        })
        // ` .` could be read as the end of the request.
        || v.char_indices().any(|(i, c)| {
            c == '.' && v.get(..i).is_some_and(|b| b.ends_with(char::is_whitespace))
        })
}

/// Parses one request as typed on a command line; the verb is optional.
pub fn parse_request(text: &str) -> Result<Request, RequestError> {
    let mut p = Parser::new(text);
    let mut reqs = p.parse(false)?;
    if reqs.len() > 1 {
        let at = reqs.get(1).map_or(0, |r| r.1);
        return Err(p.err(at, "expected one request, found a second one here"));
    }
    Ok(reqs.pop().map(|r| r.0).unwrap_or_default())
}

/// Parses a request file: one or more requests, each starting with a verb. A request ends at a
/// separated `.`, at the next verb, or at the end of the text.
pub fn parse_requests(text: &str) -> Result<Vec<Request>, RequestError> {
    Ok(Parser::new(text)
        .parse(true)?
        .into_iter()
        .map(|r| r.0)
        .collect())
}

/// Characters that end a bare word (a verb, keyword or unquoted value).
const KEYWORD_STOPS: &[char] = &[',', '=', '/', '"', '\''];
const VALUE_STOPS: &[char] = &[',', '/', '"', '\'', '='];

fn is_verb(word: &str) -> bool {
    VERBS.iter().any(|v| v.eq_ignore_ascii_case(word))
}

fn describe(c: Option<char>) -> String {
    match c {
        None => "end of input".into(),
        Some('\n') => "end of line".into(),
        Some(c) => format!("'{c}'"),
    }
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    /// Byte offsets where lines start, for line/column of any position without rescanning.
    line_starts: Vec<usize>,
}

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Self {
        let line_starts = std::iter::once(0)
            .chain(src.match_indices('\n').map(|(i, _)| i + 1))
            .collect();
        Parser {
            src,
            pos: 0,
            line_starts,
        }
    }

    fn rest(&self) -> &'a str {
        self.src.get(self.pos..).unwrap_or("")
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn bump(&mut self) {
        if let Some(c) = self.peek() {
            self.pos += c.len_utf8();
        }
    }

    /// Line, column (both from 1), and the line's start offset.
    fn locate(&self, pos: usize) -> (usize, usize, usize) {
        let mut pos = pos.min(self.src.len());
        while !self.src.is_char_boundary(pos) {
            pos -= 1;
        }
        let line = self.line_starts.partition_point(|&s| s <= pos).max(1);
        let start = self.line_starts.get(line - 1).copied().unwrap_or(0);
        let column = self.src.get(start..pos).map_or(0, |s| s.chars().count()) + 1;
        (line, column, start)
    }

    fn err(&self, pos: usize, message: impl Into<String>) -> RequestError {
        let (line, column, start) = self.locate(pos);
        let text = self
            .src
            .get(start..)
            .and_then(|s| s.lines().next())
            .unwrap_or("")
            .to_string();
        RequestError {
            line,
            column,
            message: message.into(),
            text,
        }
    }

    /// At a backslash that continues the line (`\` then newline)?
    fn at_continuation(&self) -> bool {
        let r = self.rest();
        r.starts_with("\\\n") || r.starts_with("\\\r\n")
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
                Some('\\') if self.at_continuation() => self.bump(),
                _ => return,
            }
        }
    }

    /// A bare word, trimmed, and where it starts. Internal spaces are kept (`model levels`); a
    /// line end, comment or continuation ends it, and so does a `.` standing alone after it.
    fn word(&mut self, stops: &[char]) -> (String, usize) {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if stops.contains(&c) || c == '\n' || c == '#' || (c == '\\' && self.at_continuation())
            {
                break;
            }
            if c.is_whitespace() {
                let after = self.rest().trim_start_matches([' ', '\t', '\r']);
                if let Some(tail) = after.strip_prefix('.') {
                    if tail.chars().next().is_none_or(char::is_whitespace) {
                        break;
                    }
                }
            }
            self.bump();
        }
        let raw = self.src.get(start..self.pos).unwrap_or("");
        let lead = raw.len() - raw.trim_start().len();
        (raw.trim().to_string(), start + lead)
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
        Err(self.err(
            start,
            format!("unterminated quoted value: no closing {q} before the end of the input"),
        ))
    }

    /// Requests with the offset each starts at.
    fn parse(&mut self, file: bool) -> Result<Vec<(Request, usize)>, RequestError> {
        let mut out = Vec::new();
        loop {
            self.skip_ws();
            if self.peek().is_none() {
                return Ok(out);
            }
            let start = self.pos;
            let req = self.request(file, !out.is_empty())?;
            out.push((req, start));
        }
    }

    fn request(&mut self, file: bool, after_another: bool) -> Result<Request, RequestError> {
        let (first, start) = self.word(KEYWORD_STOPS);
        self.skip_ws();
        let mut req = Request::default();
        let mut pending_keyword = None;
        if self.peek() == Some('=') {
            if file {
                let (name, _) = first
                    .split_once(char::is_whitespace)
                    .unwrap_or((&first, ""));
                let hint = if is_verb(name) {
                    format!("; is a ',' missing after '{name}'?")
                } else if after_another {
                    "; is a ',' missing at the end of the previous line?".to_string()
                } else {
                    String::new()
                };
                return Err(self.err(
                    start,
                    format!("expected a verb (such as retrieve or list) before '{first}='{hint}"),
                ));
            }
            pending_keyword = Some((first, start));
        } else if first.is_empty() {
            return Err(self.err(
                self.pos,
                format!(
                    "expected a verb or keyword, found {}",
                    describe(self.peek())
                ),
            ));
        } else if !is_verb(&first) {
            let name = first.split_whitespace().next().unwrap_or(&first);
            // A word then ',' stands where a verb goes.
            if file || is_verb(name) || self.peek() == Some(',') {
                return Err(self.err(
                    start,
                    format!(
                        "unknown verb '{name}' (expected one of: {})",
                        VERBS.join(", ")
                    ),
                ));
            }
            let found = match first.split_once(char::is_whitespace) {
                Some((_, rest)) => format!("'{}'", rest.trim_start()),
                None => describe(self.peek()),
            };
            return Err(self.err(
                start,
                format!("expected '=' after keyword '{name}', found {found}"),
            ));
        } else {
            req.verb = Some(first.to_ascii_lowercase());
            match self.peek() {
                Some(',') => self.bump(),
                None => return Ok(req),
                Some('.') => {
                    self.bump();
                    return Ok(req);
                }
                // A verb alone, then the next request.
                Some(c) if file && c.is_alphabetic() => return Ok(req),
                c => {
                    return Err(self.err(
                        self.pos,
                        format!("expected ',' after the verb, found {}", describe(c)),
                    ))
                }
            }
        }
        loop {
            self.skip_ws();
            let (kw, kw_pos) = match pending_keyword.take() {
                Some(k) => k,
                None => {
                    match self.peek() {
                        None if req.verb.is_some() => return Ok(req),
                        Some('.') => {
                            self.bump();
                            return Ok(req);
                        }
                        _ => {}
                    }
                    self.word(KEYWORD_STOPS)
                }
            };
            if kw.is_empty() {
                return Err(self.err(
                    self.pos,
                    format!("expected a keyword, found {}", describe(self.peek())),
                ));
            }
            if let Some((name, rest)) = kw.split_once(char::is_whitespace) {
                let found = rest.trim_start();
                if req.params.is_empty() && req.verb.is_none() && is_verb(name) {
                    return Err(self.err(
                        kw_pos + name.len(),
                        format!("expected ',' after the verb '{name}'"),
                    ));
                }
                return Err(self.err(
                    kw_pos,
                    format!("expected '=' after keyword '{name}', found '{found}'"),
                ));
            }
            self.skip_ws();
            if self.peek() != Some('=') {
                return Err(self.err(
                    self.pos,
                    format!(
                        "expected '=' after keyword '{kw}', found {}",
                        describe(self.peek())
                    ),
                ));
            }
            self.bump();
            let keyword = kw.to_ascii_lowercase();
            let (line, column, _) = self.locate(kw_pos);
            let mut values = Vec::new();
            loop {
                self.skip_ws();
                let v = match self.peek() {
                    Some('"') | Some('\'') => self.quoted()?,
                    _ => {
                        let (w, _) = self.word(VALUE_STOPS);
                        if w.is_empty() {
                            return Err(self.err(
                                self.pos,
                                format!(
                                    "expected a value for '{keyword}', found {}",
                                    describe(self.peek())
                                ),
                            ));
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
            let param = Param {
                keyword,
                values,
                line,
                column,
            };
            // As metkit: the later values win, the keyword keeps its first place.
            match req.params.iter_mut().find(|p| p.keyword == param.keyword) {
                Some(p) => *p = param,
                None => req.params.push(param),
            }
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
                Some(c) if file && c.is_alphabetic() => return Ok(req),
                c => {
                    return Err(self.err(
                        self.pos,
                        format!("expected ',' between keywords, found {}", describe(c)),
                    ))
                }
            }
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
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
        | "diagnostic" | "ident" | "instrument" | "system" | "method" | "param" => {
            RangeKind::Integer
        }
        _ => return None,
    })
}

fn is_word(v: &str, w: &str) -> bool {
    v.eq_ignore_ascii_case(w)
}

/// `used`: values earlier keywords' ranges already made, which count against [`MAX_RANGE`].
fn expand_values(
    p: &Param,
    kind: RangeKind,
    used: usize,
    cx: &Context,
) -> Result<Vec<String>, RequestError> {
    let kw = &p.keyword;
    let fail = |m: String| RequestError::keyword(p, format!("'{kw}': {m}"));
    let vals = &p.values;
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    while let Some(v) = vals.get(i) {
        if is_word(v, "by") {
            return Err(fail("'by' without a range (a/to/b) before it".into()));
        }
        if !is_word(v, "to") {
            out.push(v.clone());
            i += 1;
            continue;
        }
        // The range starts at the value before `to`, which may end a previous range.
        let from = out
            .pop()
            .ok_or_else(|| fail("'to' without a value before it".into()))?;
        let to = vals
            .get(i + 1)
            .filter(|t| !is_word(t, "to") && !is_word(t, "by"))
            .ok_or_else(|| fail(format!("range '{from}/to' has no end")))?;
        i += 2;
        let mut by = None;
        if vals.get(i).is_some_and(|t| is_word(t, "by")) {
            let b = vals
                .get(i + 1)
                .filter(|t| !is_word(t, "to") && !is_word(t, "by"))
                .ok_or_else(|| fail(format!("'{from}/to/{to}/by' has no step")))?;
            by = Some(b.as_str());
            i += 2;
        }
        let before = used.saturating_add(out.len());
        expand_one(kind, &from, to, by, before, cx, &mut out).map_err(|e| {
            fail(match e {
                WalkError::Invalid(m) => m,
                WalkError::TooMany(count) => {
                    let by = by.map(|b| format!("/by/{b}")).unwrap_or_default();
                    let before = if before > 0 {
                        format!(" (with the {before} values before it)")
                    } else {
                        String::new()
                    };
                    format!(
                        "range {from}/to/{to}{by} names {count} values, more than the \
                         {MAX_RANGE} values a request may name{before}; narrow the range or \
                         give a larger 'by'"
                    )
                }
            })
        })?;
    }
    Ok(out)
}

/// Why a range cannot be expanded.
#[derive(Debug)]
enum WalkError {
    Invalid(String),
    /// It names this many values, more than the request may.
    TooMany(i128),
}

impl From<String> for WalkError {
    fn from(m: String) -> Self {
        WalkError::Invalid(m)
    }
}

/// Walks from `a` towards `b` by `|by|`, whichever direction `b` lies in (MARS allows descending
/// ranges with a positive step). Refuses, before making any, more values than the request has
/// left once `used` are spent.
fn walk(a: i64, b: i64, by: i64, used: usize) -> Result<Vec<i64>, WalkError> {
    if by == 0 {
        return Err(WalkError::Invalid("'by' must not be 0".into()));
    }
    let step = i128::from(by).abs();
    let (a, b) = (i128::from(a), i128::from(b));
    let count = (b - a).abs() / step + 1;
    let budget = MAX_RANGE.saturating_sub(used);
    if count > budget as i128 {
        return Err(WalkError::TooMany(count));
    }
    let dir = if b < a { -step } else { step };
    (0..count)
        .map(|k| {
            i64::try_from(a + k * dir)
                .map_err(|_| WalkError::Invalid("range out of bounds".to_string()))
        })
        .collect()
}

fn expand_one(
    kind: RangeKind,
    from: &str,
    to: &str,
    by: Option<&str>,
    used: usize,
    cx: &Context,
    out: &mut Vec<String>,
) -> Result<(), WalkError> {
    match kind {
        RangeKind::Date => {
            let day = |s: &str| {
                parse_date(s, cx)
                    .map(|d| i64::from(d.num_days_from_ce()))
                    .ok_or_else(|| format!("'{s}' is not a date (yyyymmdd, yyyy-mm-dd, 0, -1)"))
            };
            let by = match by {
                None => 1,
                Some(s) => s
                    .parse::<i64>()
                    .map_err(|_| format!("'by' {s} is not a number of days"))?,
            };
            for d in walk(day(from)?, day(to)?, by, used)? {
                let date = i32::try_from(d)
                    .ok()
                    .and_then(NaiveDate::from_num_days_from_ce_opt)
                    .ok_or_else(|| "date out of range".to_string())?;
                out.push(date.format("%Y%m%d").to_string());
            }
        }
        RangeKind::Time => {
            let mins = |s: &str| -> Result<i64, String> {
                let t = KeyType::Time
                    .canonical("time", s, cx)
                    .map_err(|_| format!("'{s}' is not a time (HH, HHMM, HH:MM)"))?;
                let n: i64 = t.parse().map_err(|_| format!("'{s}' is not a time"))?;
                Ok(n / 100 * 60 + n % 100)
            };
            let by = match by {
                None => 360,
                Some(s) if s.starts_with('-') => {
                    return Err(format!("negative 'by' {s} is not allowed for times").into())
                }
                // Up to two digits are hours; longer or with ':' it is HHMM.
                Some(s) if s.len() <= 2 && !s.contains(':') => {
                    s.parse::<i64>()
                        .map_err(|_| format!("'by' {s} is not a number of hours"))?
                        * 60
                }
                Some(s) => mins(s)?,
            };
            for m in walk(mins(from)?, mins(to)?, by, used)? {
                out.push(format!("{:02}{:02}", m / 60, m % 60));
            }
        }
        RangeKind::Step => {
            let parse = |s: &str| step::minutes(s, true);
            let a = parse(from).ok_or_else(|| format!("'{from}' is not a step"))?;
            let b = parse(to).ok_or_else(|| format!("'{to}' is not a step"))?;
            let by = match by {
                None => 720,
                Some(s) => parse(s).ok_or_else(|| format!("'by' {s} is not a step"))?,
            };
            for m in walk(a, b, by, used)? {
                out.push(step::print(m));
            }
        }
        RangeKind::Integer => {
            let n = |s: &str| {
                s.parse::<i64>()
                    .map_err(|_| format!("'{s}' is not an integer"))
            };
            let by = by.map_or(Ok(1), n)?;
            for x in walk(n(from)?, n(to)?, by, used)? {
                out.push(x.to_string());
            }
        }
        RangeKind::Float => {
            // Exact decimal arithmetic: `0.1` steps must not drift.
            let dec = |s: &str| Decimal::parse(s).ok_or_else(|| format!("'{s}' is not a number"));
            let (a, b) = (dec(from)?, dec(to)?);
            let by = by.map_or(
                Ok(Decimal {
                    units: 1,
                    places: 0,
                }),
                dec,
            )?;
            let places = a.places.max(b.places).max(by.places);
            let scaled = |d: Decimal| d.at(places).ok_or_else(|| "number too large".to_string());
            for x in walk(scaled(a)?, scaled(b)?, scaled(by)?, used)? {
                out.push(Decimal { units: x, places }.to_string());
            }
        }
    }
    Ok(())
}

/// A decimal number as `units / 10^places`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Decimal {
    units: i64,
    places: u32,
}

impl Decimal {
    /// Plain decimals only (`-12.50`, `.5`, `3`); at most 9 places.
    fn parse(s: &str) -> Option<Decimal> {
        let (neg, body) = match s.strip_prefix('-') {
            Some(b) => (true, b),
            None => (false, s.strip_prefix('+').unwrap_or(s)),
        };
        let (int, frac) = body.split_once('.').unwrap_or((body, ""));
        if int.is_empty() && frac.is_empty()
            || !int.bytes().chain(frac.bytes()).all(|c| c.is_ascii_digit())
        {
            return None;
        }
        let frac = frac.trim_end_matches('0');
        let places = u32::try_from(frac.len()).ok().filter(|&p| p <= 9)?;
        let digits = format!("{int}{frac}");
        let units: i64 = if digits.is_empty() {
            0
        } else {
            digits.parse().ok()?
        };
        Some(Decimal {
            units: if neg { -units } else { units },
            places,
        })
    }

    fn at(self, places: u32) -> Option<i64> {
        self.units
            .checked_mul(10i64.checked_pow(places.checked_sub(self.places)?)?)
    }
}

impl fmt::Display for Decimal {
    /// Integers without `.0`; otherwise no trailing zeros (`0.5`, `-1.25`).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let sign = if self.units < 0 { "-" } else { "" };
        let abs = self.units.unsigned_abs();
        let scale = 10u64.pow(self.places);
        let (int, frac) = (abs / scale, abs % scale);
        if frac == 0 {
            return write!(f, "{sign}{int}");
        }
        let digits = format!("{frac:0width$}", width = self.places as usize);
        write!(f, "{sign}{int}.{}", digits.trim_end_matches('0'))
    }
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

    fn expand_err(s: &str) -> RequestError {
        parse_request(s).unwrap().expand_ranges(&cx()).unwrap_err()
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
        assert_eq!(
            r.keywords().collect::<Vec<_>>(),
            ["class", "expver", "param", "levtype"]
        );
        assert_eq!(r.params()[1].column, 11);
        let r = parse_request("RETRIEVE,CLASS=OD,LEVELIST=500/400").unwrap();
        assert_eq!(r.verb(), Some("retrieve"));
        assert_eq!(r.get("class").unwrap(), &["OD"]);
        assert_eq!(r.get("CLASS").unwrap(), &["OD"]);
        assert_eq!(r.to_string(), "retrieve,class=OD,levelist=500/400");
        assert_eq!(parse_request("list").unwrap().verb(), Some("list"));
        assert_eq!(parse_request("  ").unwrap(), Request::default());
        assert_eq!(parse_request("list,").unwrap().to_string(), "list");
    }

    #[test]
    fn trailing_dot() {
        let param = |s: &str| parse_request(s).unwrap().get("param").unwrap().to_vec();
        assert_eq!(param("list,param=10v."), ["10v."]);
        assert_eq!(param("list,param=10v ."), ["10v"]);
        assert_eq!(param("list,param=10v\n."), ["10v"]);
        assert_eq!(param("param=1.5/.5"), ["1.5", ".5"]);
        let rs = parse_requests("list,class=od .\nlist,class=rd.\n").unwrap();
        assert_eq!(rs[1].get("class").unwrap(), &["rd."]);
    }

    #[test]
    fn quotes_are_verbatim() {
        let r = parse_request("x=\"a,b/c\",y=' two  words ',z=\"it's\",w=\"\"").unwrap();
        assert_eq!(r.get("x").unwrap(), &["a,b/c"]);
        assert_eq!(r.get("y").unwrap(), &[" two  words "]);
        assert_eq!(r.get("z").unwrap(), &["it's"]);
        assert_eq!(r.get("w").unwrap(), &[""]);
        assert_eq!(
            r.to_string(),
            "x=\"a,b/c\",y=\" two  words \",z=\"it's\",w=\"\""
        );
        let r = parse_request("q='say \"hi\"'").unwrap();
        assert_eq!(r.to_string(), "q='say \"hi\"'");
        assert_eq!(parse_request(&r.to_string()).unwrap(), r);
        let r = parse_request("q=\"a .\"").unwrap();
        assert_eq!(
            parse_request(&r.to_string()).unwrap().get("q").unwrap(),
            &["a ."]
        );
    }

    #[test]
    fn later_keyword_wins_in_first_place() {
        let r = parse_request("class=od,NUMBER=1,expver=1,number = 2/3").unwrap();
        assert_eq!(r.to_string(), "class=od,number=2/3,expver=1");
        assert_eq!(r.params()[1].column, 28);
    }

    #[test]
    fn set_and_remove() {
        let mut r = parse_request("retrieve,class=od,param=t").unwrap();
        r.set("PARAM", vec!["u".into()]);
        r.set("step", vec!["0".into(), "6".into()]);
        r.remove("CLASS");
        assert_eq!(r.to_string(), "retrieve,param=u,step=0/6");
        assert!(r.get("class").is_none());
        assert_eq!(
            r.iter().map(|(k, v)| (k, v.len())).collect::<Vec<_>>(),
            [("param", 1), ("step", 2)]
        );
    }

    #[test]
    fn request_files() {
        let text = "# two requests\nretrieve,\n  class=od,  # a comment\n  param=t/\\\n  u,\n  step=0/to/12/by/6\nLIST, class=rd,\n expver=xxxx\n";
        let rs = parse_requests(text).unwrap();
        assert_eq!(rs.len(), 2);
        assert_eq!(
            rs[0].to_string(),
            "retrieve,class=od,param=t/u,step=0/to/12/by/6"
        );
        assert_eq!(rs[1].to_string(), "list,class=rd,expver=xxxx");
        assert_eq!((rs[1].params()[1].line, rs[1].params()[1].column), (8, 2));
        // CRLF line ends, continuation inside a value list, `.` terminators, a bare verb.
        let text = "retrieve,class=od,\r\n param=t/\\\r\n u .\r\nflush\nlist,class=rd.";
        let rs = parse_requests(text).unwrap();
        assert_eq!(
            rs.iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["retrieve,class=od,param=t/u", "flush", "list,class=rd."]
        );
        assert!(parse_requests("# nothing\n\n").unwrap().is_empty());
    }

    /// Each error: the text, where it must point, and part of the message.
    #[test]
    fn errors_point_at_the_problem() {
        #[rustfmt::skip]
        let cases: &[(&str, usize, usize, &str)] = &[
            ("class=od,\nparam 130", 2, 1, "expected '=' after keyword 'param', found '130'"),
            ("param 130", 1, 1, "expected '=' after keyword 'param', found '130'"),
            ("class", 1, 1, "expected '=' after keyword 'class', found end of input"),
            ("class=od,step,x=1", 1, 14, "expected '=' after keyword 'step', found ','"),
            ("class=", 1, 7, "expected a value for 'class', found end of input"),
            ("class=od,\n  expver=,x=1", 2, 10, "expected a value for 'expver', found ','"),
            ("class=od,\n  expver=\n", 3, 1, "expected a value for 'expver', found end of input"),
            ("class=a/", 1, 9, "expected a value for 'class'"),
            ("class=od,,", 1, 10, "expected a keyword, found ','"),
            ("class=od,", 1, 10, "expected a keyword, found end of input"),
            ("=od", 1, 1, "expected a keyword, found '='"),
            (" ,x=1", 1, 2, "expected a verb or keyword, found ','"),
            ("class=\"od", 1, 7, "unterminated quoted value"),
            ("class=od=x", 1, 9, "unexpected '='"),
            ("class=od \"x\"", 1, 10, "expected ',' between keywords, found '\"'"),
            ("retrieve class=od", 1, 9, "expected ',' after the verb 'retrieve'"),
            ("retrieve/x", 1, 9, "expected ',' after the verb, found '/'"),
            ("retreive,class=od", 1, 1, "unknown verb 'retreive'"),
            ("list,a=1 .\nlist,b=2", 2, 1, "expected one request, found a second one here"),
        ];
        for &(text, line, column, msg) in cases {
            let e = parse_request(text).unwrap_err();
            assert_eq!((e.line, e.column), (line, column), "{text:?}: {e}");
            assert!(e.message.contains(msg), "{text:?}: {e}");
        }
        #[rustfmt::skip]
        let file_cases: &[(&str, usize, usize, &str)] = &[
            ("class=od", 1, 1, "expected a verb (such as retrieve or list) before 'class='"),
            ("list,class=od\nexpver=1", 2, 1, "missing at the end of the previous line"),
            ("list\n\tclass=od", 2, 2, "missing at the end of the previous line"),
            ("  retrieve class=od", 1, 3, "is a ',' missing after 'retrieve'"),
            ("foo,class=od", 1, 1, "unknown verb 'foo'"),
        ];
        for &(text, line, column, msg) in file_cases {
            let e = parse_requests(text).unwrap_err();
            assert_eq!((e.line, e.column), (line, column), "{text:?}: {e}");
            assert!(e.message.contains(msg), "{text:?}: {e}");
        }
    }

    #[test]
    fn error_rendering_shows_the_line_and_a_caret() {
        let e = parse_request("class=od,\nparam 130").unwrap_err();
        assert_eq!(
            e.to_string(),
            "request line 2, column 1: expected '=' after keyword 'param', found '130'\n  param 130\n  ^"
        );
        let e = parse_request("class=od,\n\tstep=0/,x=1").unwrap_err();
        assert_eq!(
            e.to_string(),
            "request line 2, column 9: expected a value for 'step', found ','\n  \tstep=0/,x=1\n  \t       ^"
        );
        // Expansion errors know the keyword's place but not the text.
        let e = expand_err("class=od,\n  step=0/to/6/by/0");
        assert_eq!(
            e.to_string(),
            "request line 2, column 3: 'step': 'by' must not be 0"
        );
        let mut r = Request::new(None);
        r.set("number", vec!["1".into(), "to".into()]);
        assert_eq!(
            r.expand_ranges(&cx()).unwrap_err().to_string(),
            "request: 'number': range '1/to' has no end"
        );
    }

    #[test]
    fn ranges() {
        for (input, output) in [
            ("step=0/to/24/by/6", "step=0/6/12/18/24"),
            ("step=0/to/6", "step=0"),
            ("step=0/to/48/by/12h", "step=0/12/24/36/48"),
            ("step=0/to/2/by/30m", "step=0/30m/1/90m/2"),
            ("step=0/to/1d/by/1d", "step=0/24"),
            ("STEP=0/TO/12/BY/6", "step=0/6/12"),
            (
                "date=20190130/to/20190202",
                "date=20190130/20190131/20190201/20190202",
            ),
            (
                "date=2019-12-30/to/2020-01-01",
                "date=20191230/20191231/20200101",
            ),
            ("date=-2/to/0", "date=20261120/20261121/20261122"),
            (
                "date=20190210/to/20190201/by/4",
                "date=20190210/20190206/20190202",
            ),
            ("hdate=20190101/to/20190102", "hdate=20190101/20190102"),
            ("time=0/to/18", "time=0000/0600/1200/1800"),
            ("time=0000/to/1200/by/3", "time=0000/0300/0600/0900/1200"),
            ("time=00:00/to/0100/by/0030", "time=0000/0030/0100"),
            ("time=12/to/0", "time=1200/0600/0000"),
            ("levelist=1000/to/850/by/50", "levelist=1000/950/900/850"),
            (
                "levelist=0.5/to/2/by/0.25",
                "levelist=0.5/0.75/1/1.25/1.5/1.75/2",
            ),
            ("levelist=0.1/to/0.3/by/0.1", "levelist=0.1/0.2/0.3"),
            ("levelist=-1/to/1", "levelist=-1/0/1"),
            ("levelist=500.0/to/700/by/100", "levelist=500/600/700"),
            ("number=1/to/5", "number=1/2/3/4/5"),
            ("number=5/to/1/by/2", "number=5/3/1"),
            ("number=1/to/3/7/10/to/11", "number=1/2/3/7/10/11"),
            ("number=1/to/3/to/5", "number=1/2/3/4/5"),
            ("number=1/to/4/by/2/6", "number=1/3/6"),
            ("fcmonth=1/to/3", "fcmonth=1/2/3"),
            ("param=t/u,step=all", "param=t/u,step=all"),
        ] {
            assert_eq!(expand(input), output, "{input}");
        }
        // Only keywords with ranges change; positions survive.
        let r = parse_request("class=od,\nstep=0/to/12")
            .unwrap()
            .expand_ranges(&cx())
            .unwrap();
        assert_eq!((r.params()[1].line, r.params()[1].column), (2, 1));
    }

    #[test]
    fn range_errors() {
        for (input, msg) in [
            ("step=0/to/6/by/0", "'step': 'by' must not be 0"),
            ("number=1/to/5/by/0", "'number': 'by' must not be 0"),
            ("class=od/to/rd", "'class' does not take ranges"),
            ("time=0/to/12/by/-6", "negative 'by' -6 is not allowed"),
            ("number=1/to/1000000", "1/to/1000000"),
            (
                "number=1/to/1000001",
                "range 1/to/1000001 names 1000001 values, more than the 1000000 values",
            ),
            (
                "number=1/to/600000/700000/to/1200000",
                "range 700000/to/1200000 names 500001 values, more than the 1000000 values a request may name (with the 600000 values before it)",
            ),
            (
                "step=0/to/999999999",
                "'step': range 0/to/999999999 names 83333334 values, more than the 1000000",
            ),
            (
                "number=1/to/600000,levelist=1/to/600000",
                "'levelist': range 1/to/600000 names 600000 values, more than the 1000000 values a request may name (with the 600000 values before it)",
            ),
            ("date=19000101/to/99991231", "more than the 1000000 values"),
            ("step=0/to", "range '0/to' has no end"),
            ("step=to/6", "'to' without a value before it"),
            ("step=0/by/6", "'by' without a range"),
            ("step=0/to/6/by", "has no step"),
            ("step=0/to/to", "has no end"),
            ("date=20190230/to/20190301", "'20190230' is not a date"),
            ("date=1/to/3", "'1' is not a date"),
            ("time=0/to/2400", "'2400' is not a time"),
            ("step=x/to/6", "'x' is not a step"),
            ("levelist=a/to/3", "'a' is not a number"),
            ("levelist=1/to/3/by/0.0000000001", "is not a number"),
            ("number=1.5/to/3", "'1.5' is not an integer"),
            (
                "number=-9223372036854775808/to/9223372036854775807",
                "names 18446744073709551616 values",
            ),
            ("step=999999999999999999/to/1", "is not a step"),
        ] {
            let r = parse_request(input).unwrap().expand_ranges(&cx());
            if msg == "1/to/1000000" {
                assert_eq!(r.unwrap().get("number").unwrap().len(), 1_000_000);
                continue;
            }
            let e = r.unwrap_err();
            assert!(e.message.contains(msg), "{input}: {e}");
            // The error points at the keyword whose range fails (the last one here).
            let column = input.rfind(',').map_or(1, |i| i + 2);
            assert_eq!((e.line, e.column), (1, column), "{input}");
        }
    }

    #[test]
    fn decimals() {
        for (s, units, places, back) in [
            ("12.50", 125, 1, "12.5"),
            (".5", 5, 1, "0.5"),
            ("-0.25", -25, 2, "-0.25"),
            ("3", 3, 0, "3"),
            ("+7.0", 7, 0, "7"),
        ] {
            let d = Decimal::parse(s).unwrap();
            assert_eq!((d.units, d.places), (units, places), "{s}");
            assert_eq!(d.to_string(), back);
        }
        for bad in ["", ".", "-", "1e3", "1.2.3", "nan", "1.0000000001"] {
            assert!(Decimal::parse(bad).is_none(), "{bad}");
        }
    }

    fn canonical_request() -> impl Strategy<Value = Request> {
        let word = "[a-z][a-z0-9_]{0,7}";
        let value = prop_oneof![
            "[a-z0-9.]{1,8}",
            "[a-zA-Z0-9 ,/=.#']{0,8}",
            "[a-z0-9 \"\\\\.\n]{0,8}",
        ];
        (
            proptest::option::of(prop::sample::select(VERBS)),
            prop::collection::vec((word, prop::collection::vec(value, 1..4)), 0..6),
        )
            .prop_map(|(verb, params)| {
                let mut r = Request::new(verb);
                for (k, vs) in params {
                    if is_verb(&k) {
                        continue;
                    }
                    r.set(&k, vs);
                }
                r
            })
    }

    /// Text near the request syntax, so that the parser's branches are reached often.
    fn requestish() -> impl Strategy<Value = String> {
        let token = prop_oneof![
            Just("retrieve".to_string()),
            Just("list".to_string()),
            Just("class".to_string()),
            Just("step".to_string()),
            Just("to".to_string()),
            Just("by".to_string()),
            "[,=/.#\"' \t\n\\\\]",
            "-?[0-9]{1,20}",
            "[0-9]{1,3}\\.[0-9]{0,12}",
            "[a-z]{1,4}",
            "\\PC",
        ];
        prop::collection::vec(token, 0..30).prop_map(|t| t.concat())
    }

    proptest! {
        #[test]
        fn print_parse_is_identity(r in canonical_request()) {
            let text = r.to_string();
            let back = parse_request(&text).map_err(|e| TestCaseError::fail(format!("{text}: {e}")))?;
            prop_assert_eq!(&back.to_string(), &text);
            prop_assert_eq!(back.verb(), r.verb());
            prop_assert_eq!(back.iter().collect::<Vec<_>>(), r.iter().collect::<Vec<_>>());
        }

        #[test]
        fn parser_never_panics(s in "\\PC{0,60}") {
            let _ = parse_requests(&s);
            if let Ok(r) = parse_request(&s) {
                let _ = r.expand_ranges(&cx());
            }
        }

        #[test]
        fn near_requests_never_panic_and_reprint(s in requestish()) {
            let _ = parse_requests(&s);
            if let Ok(r) = parse_request(&s) {
                let printed = r.to_string();
                let back = parse_request(&printed).map_err(|e| TestCaseError::fail(format!("{printed}: {e}")))?;
                prop_assert_eq!(back.to_string(), printed);
                let _ = r.expand_ranges(&cx());
            }
        }

        #[test]
        fn numeric_ranges_never_panic(a in any::<i64>(), b in any::<i64>(), by in any::<i64>(),
                                      kw in prop::sample::select(vec!["number", "step", "levelist", "date", "time"])) {
            let mut r = Request::new(None);
            r.set(kw, vec![a.to_string(), "to".into(), b.to_string(), "by".into(), by.to_string()]);
            if let Ok(x) = r.expand_ranges(&cx()) {
                prop_assert!(x.get(kw).unwrap().len() <= MAX_RANGE);
            }
        }
    }
}
