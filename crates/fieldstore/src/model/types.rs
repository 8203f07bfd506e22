//! Key types: how the value of a keyword is canonicalised, on archive and on retrieve, the way
//! FDB5 does it (`expver=1` is `0001`, `time=12` is `1200`, `param=t` is `130`).

use std::fmt;
use std::str::FromStr;

use chrono::{Datelike, Duration, NaiveDate, Utc};

use super::key::Atom;

/// The type names the FDB5 schema language knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeyType {
    Default,
    Param,
    ParamId,
    Step,
    Date,
    Time,
    Expver,
    Integer,
    Double,
    Grid,
    First3,
    ClimateDaily,
    ClimateMonthly,
    Month,
    MonthOfDate,
    Year,
    YearMonth,
    Ignore,
}

const ALL_TYPES: &[(&str, KeyType)] = &[
    ("Default", KeyType::Default),
    ("Param", KeyType::Param),
    ("ParamID", KeyType::ParamId),
    ("Step", KeyType::Step),
    ("Date", KeyType::Date),
    ("Time", KeyType::Time),
    ("Expver", KeyType::Expver),
    ("Integer", KeyType::Integer),
    ("Double", KeyType::Double),
    ("Grid", KeyType::Grid),
    ("First3", KeyType::First3),
    ("ClimateDaily", KeyType::ClimateDaily),
    ("ClimateMonthly", KeyType::ClimateMonthly),
    // Older schemas (and the ECMWF schema's own comments) spell it this way.
    ("ClimateMonth", KeyType::ClimateMonthly),
    ("Month", KeyType::Month),
    ("MonthOfDate", KeyType::MonthOfDate),
    ("Year", KeyType::Year),
    ("YearMonth", KeyType::YearMonth),
    ("Ignore", KeyType::Ignore),
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TypeError {
    #[error("unknown key type '{name}' (known types: {known})")]
    UnknownType { name: String, known: String },
    #[error("invalid value '{value}' for keyword '{keyword}' ({ty}): {reason}")]
    BadValue {
        keyword: String,
        value: String,
        ty: KeyType,
        reason: String,
    },
    #[error(
        "unknown parameter name '{value}' for keyword '{keyword}': ecCodes has no such shortName"
    )]
    UnknownParam { keyword: String, value: String },
}

impl FromStr for KeyType {
    type Err = TypeError;
    fn from_str(s: &str) -> Result<Self, TypeError> {
        ALL_TYPES
            .iter()
            .find(|(n, _)| *n == s)
            .map(|(_, t)| *t)
            .ok_or_else(|| TypeError::UnknownType {
                name: s.to_string(),
                known: ALL_TYPES
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

impl fmt::Display for KeyType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = ALL_TYPES
            .iter()
            .find(|(_, t)| t == self)
            .map(|(n, _)| *n)
            .unwrap_or("Default");
        f.write_str(name)
    }
}

/// Resolves a parameter short name (`t`, `2t`) to its paramId. Injected so the model layer can be
/// used with ecCodes' database (the normal case) or without it (parsers, fuzzing).
pub type ParamResolver = dyn Fn(&str) -> Option<String> + Send + Sync;

/// What canonicalisation needs besides the value: today's date for relative dates and a way to
/// resolve parameter names.
pub struct Context<'a> {
    pub today: NaiveDate,
    pub params: Option<&'a ParamResolver>,
}

impl Default for Context<'_> {
    fn default() -> Self {
        Context {
            today: Utc::now().date_naive(),
            params: None,
        }
    }
}

impl KeyType {
    /// The keyword under which a value of this type is stored: FDB5's Month/Year types rename.
    pub fn stored_keyword<'a>(&self, keyword: &'a str) -> &'a str {
        match self {
            KeyType::Month | KeyType::MonthOfDate => "month",
            KeyType::Year => "year",
            _ => keyword,
        }
    }

    /// Canonical form of one value.
    /// [`canonical`](Self::canonical) as an [`Atom`], without building a `String` when the value
    /// is already in the canonical form of its common shapes (`od`, `130`, `20261122`, `1200`):
    /// archiving field by field canonicalises every keyword of every key.
    pub fn canonical_atom(
        &self,
        keyword: &str,
        value: &str,
        cx: &Context,
    ) -> Result<Atom, TypeError> {
        if self.already_canonical(value) {
            return Ok(Atom::from(value));
        }
        self.canonical(keyword, value, cx).map(Atom::from)
    }

    /// Whether [`canonical`](Self::canonical) would give `v` back unchanged, decided cheaply for
    /// the common shapes only (`false` means "not known", not "not canonical").
    fn already_canonical(&self, v: &str) -> bool {
        let b = v.as_bytes();
        let digits = !b.is_empty() && b.iter().all(u8::is_ascii_digit);
        // Digits without a leading zero, short enough for every numeric parse to keep them.
        let number = digits && (b.len() == 1 || b[0] != b'0') && b.len() <= 15;
        let num = |r: std::ops::Range<usize>| v.get(r).and_then(|s| s.parse::<u32>().ok());
        match self {
            KeyType::Default => {
                b.iter().all(|c| c.is_ascii() && !c.is_ascii_uppercase())
                    && !b.first().is_some_and(u8::is_ascii_whitespace)
                    && !b.last().is_some_and(u8::is_ascii_whitespace)
            }
            KeyType::Integer | KeyType::Param | KeyType::ParamId | KeyType::Double => number,
            KeyType::Step => number && b.len() <= 9,
            KeyType::Expver => {
                b.len() == 4
                    && b.iter()
                        .all(|c| c.is_ascii_digit() || c.is_ascii_lowercase())
            }
            KeyType::Time => {
                digits
                    && b.len() == 4
                    && num(0..2).is_some_and(|h| h < 24)
                    && num(2..4).is_some_and(|m| m < 60)
            }
            KeyType::Date => {
                digits && b.len() == 8 && {
                    let y = num(0..4).and_then(|y| i32::try_from(y).ok());
                    match (y, num(4..6), num(6..8)) {
                        (Some(y), Some(m), Some(d)) => NaiveDate::from_ymd_opt(y, m, d).is_some(),
                        _ => false,
                    }
                }
            }
            _ => false,
        }
    }

    pub fn canonical(&self, keyword: &str, value: &str, cx: &Context) -> Result<String, TypeError> {
        let bad = |reason: &str| TypeError::BadValue {
            keyword: keyword.to_string(),
            value: value.to_string(),
            ty: *self,
            reason: reason.to_string(),
        };
        let v = value.trim();
        match self {
            KeyType::Default => Ok(v.to_ascii_lowercase()),
            KeyType::Ignore => Ok(String::new()),
            KeyType::Param | KeyType::ParamId => canonical_param(keyword, v, cx),
            KeyType::Step => super::step::canonical(v).ok_or_else(|| bad("expected a step such as 6, 0-6, 30m or 12h (negative steps are not supported)")),
            KeyType::Date => parse_date(v, cx)
                .map(yyyymmdd)
                .ok_or_else(|| bad("expected a date such as 20190109, 2019-01-09, 2019-009 or a relative day 0, -1")),
            KeyType::Time => canonical_time(v).ok_or_else(|| bad("expected a time such as 12, 1200 or 12:00")),
            KeyType::Expver => {
                if v.is_empty() || v.len() > 4 || !v.chars().all(|c| c.is_ascii_alphanumeric()) {
                    return Err(bad("expected 1 to 4 letters or digits"));
                }
                Ok(format!("{:0>4}", v.to_ascii_lowercase()))
            }
            KeyType::Integer => v
                .parse::<i64>()
                .map(|n| n.to_string())
                .map_err(|_| bad("expected an integer")),
            KeyType::Double => canonical_double(v).ok_or_else(|| bad("expected a number")),
            KeyType::Grid => Ok(v.replace('/', "+").to_ascii_lowercase()),
            KeyType::First3 => Ok(v.to_ascii_lowercase().chars().take(3).collect()),
            KeyType::ClimateDaily => climate_daily(v, cx).ok_or_else(|| bad("expected a date or month-day such as 20190109 or jan-09")),
            KeyType::ClimateMonthly | KeyType::Month => month_of(v, cx)
                .map(|m| m.to_string())
                .ok_or_else(|| bad("expected a date or a month (1-12, jan)")),
            KeyType::MonthOfDate => month_of(v, cx)
                .map(|m| format!("{m:02}"))
                .ok_or_else(|| bad("expected a date or a month")),
            KeyType::Year => parse_date(v, cx)
                .map(|d| d.year().to_string())
                .or_else(|| (v.len() == 4 && v.parse::<u32>().is_ok()).then(|| v.to_string()))
                .ok_or_else(|| bad("expected a date or a year")),
            KeyType::YearMonth => parse_date(v, cx)
                .map(|d| d.format("%Y%m").to_string())
                .or_else(|| (v.len() == 6 && v.parse::<u32>().is_ok()).then(|| v.to_string()))
                .ok_or_else(|| bad("expected a date or yyyymm")),
        }
    }

    /// Whether a value given in an explicit archive key must already be canonical. FDB5 refuses
    /// `expver=1` ("expecting 0001") rather than silently storing something other than was asked.
    pub fn requires_canonical_input(&self) -> bool {
        matches!(
            self,
            KeyType::Expver | KeyType::Time | KeyType::Grid | KeyType::Integer | KeyType::Date
        )
    }
}

fn canonical_param(keyword: &str, v: &str, cx: &Context) -> Result<String, TypeError> {
    if v.is_empty() {
        return Err(TypeError::BadValue {
            keyword: keyword.to_string(),
            value: v.to_string(),
            ty: KeyType::Param,
            reason: "empty parameter".into(),
        });
    }
    if let Ok(n) = v.parse::<u64>() {
        return Ok(n.to_string());
    }
    // `130.128` (GRIB1 table notation): ecCodes (through the resolver) knows the paramId, as FDB5
    // files such fields (`112.1` is `3112`, `11.1` is `130`). Without it: ECMWF's table 128 is the
    // default; others are table * 1000 + number (`229.140` is `140229`).
    if let Some((num, table)) = v.split_once('.') {
        if let Some(id) = cx.params.and_then(|r| r(v)) {
            return Ok(id);
        }
        // GRIB1 numbers and tables are one byte each: anything larger is no parameter (and
        // `1.9223372036854775807` overflowed the arithmetic below, a panic).
        if let (Ok(num), Ok(table)) = (num.parse::<u8>(), table.parse::<u8>()) {
            let (num, table) = (u32::from(num), u32::from(table));
            return Ok(if table == 128 || table == 0 {
                num.to_string()
            } else {
                (table * 1000 + num).to_string()
            });
        }
    }
    let lower = v.to_ascii_lowercase();
    match cx.params.and_then(|r| r(&lower)) {
        Some(id) => Ok(id),
        None if cx.params.is_none() => Ok(lower),
        None => Err(TypeError::UnknownParam {
            keyword: keyword.to_string(),
            value: v.to_string(),
        }),
    }
}

/// Accepts `12`, `6`, `1200`, `0600`, `12:00`, `1:23`, `00:18:00`, `120000`; prints `HHMM`.
fn canonical_time(v: &str) -> Option<String> {
    let (h, m) = if v.contains(':') {
        let parts: Vec<&str> = v.split(':').collect();
        if parts.len() > 3
            || parts
                .iter()
                .any(|p| p.is_empty() || !p.chars().all(|c| c.is_ascii_digit()))
        {
            return None;
        }
        (
            parts[0].parse::<u32>().ok()?,
            parts.get(1).map_or(Some(0), |p| p.parse::<u32>().ok())?,
        )
    } else {
        if v.is_empty() || !v.chars().all(|c| c.is_ascii_digit()) {
            return None;
        }
        let n: u32 = v.parse().ok()?;
        match v.len() {
            1 | 2 => (n, 0),
            3 | 4 => (n / 100, n % 100),
            6 => (n / 10000, (n / 100) % 100),
            _ => return None,
        }
    };
    (h < 24 && m < 60).then(|| format!("{h:02}{m:02}"))
}

fn canonical_double(v: &str) -> Option<String> {
    let x: f64 = v.parse().ok()?;
    if !x.is_finite() {
        return None;
    }
    if x.fract() == 0.0 && x.abs() < 1e15 {
        Some(format!("{}", x as i64))
    } else {
        Some(format!("{x}"))
    }
}

/// `yyyymmdd`, `yyyy-mm-dd`, `yyyy-ddd` and relative days (`0` today, `-1` yesterday).
/// `%Y%m%d` without chrono's format machinery: every archived key and retrieve request has a date,
/// and formatting one through `format` cost more than the rest of its canonicalisation.
fn yyyymmdd(d: NaiveDate) -> String {
    let y = d.year();
    if (0..=9999).contains(&y) {
        format!("{y:04}{:02}{:02}", d.month(), d.day())
    } else {
        d.format("%Y%m%d").to_string()
    }
}

pub(crate) fn parse_date(v: &str, cx: &Context) -> Option<NaiveDate> {
    if let Some(rel) = v.strip_prefix('-') {
        if !rel.is_empty() && rel.len() <= 5 && rel.chars().all(|c| c.is_ascii_digit()) {
            return cx
                .today
                .checked_sub_signed(Duration::days(rel.parse().ok()?));
        }
        return None;
    }
    if v == "0" {
        return Some(cx.today);
    }
    if v.len() == 8 && v.chars().all(|c| c.is_ascii_digit()) {
        let num = |r: std::ops::Range<usize>| v.get(r).and_then(|s| s.parse::<u32>().ok());
        let y = i32::try_from(num(0..4)?).ok()?;
        return NaiveDate::from_ymd_opt(y, num(4..6)?, num(6..8)?);
    }
    if v.len() == 10 {
        return NaiveDate::parse_from_str(v, "%Y-%m-%d").ok();
    }
    if v.len() == 8 && v.as_bytes().get(4) == Some(&b'-') {
        let (y, d) = (v.get(..4)?.parse().ok()?, v.get(5..)?.parse().ok()?);
        return NaiveDate::from_yo_opt(y, d);
    }
    None
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

fn month_of(v: &str, cx: &Context) -> Option<u32> {
    if let Some(d) = parse_date(v, cx) {
        return Some(d.month());
    }
    let lower = v.to_ascii_lowercase();
    if let Some(i) = MONTHS.iter().position(|m| lower.starts_with(m)) {
        return Some(i as u32 + 1);
    }
    let n: u32 = v.parse().ok()?;
    (1..=12).contains(&n).then_some(n)
}

fn climate_daily(v: &str, cx: &Context) -> Option<String> {
    if let Some(d) = parse_date(v, cx) {
        return Some(format!("{:02}{:02}", d.month(), d.day()));
    }
    let lower = v.to_ascii_lowercase();
    let (m, d) = lower.split_once('-')?;
    let month = MONTHS
        .iter()
        .position(|x| m.starts_with(x))
        .map(|i| i as u32 + 1)
        .or_else(|| m.parse().ok())?;
    let day: u32 = d.parse().ok()?;
    ((1..=12).contains(&month) && (1..=31).contains(&day)).then(|| format!("{month:02}{day:02}"))
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

    fn canon(t: KeyType, v: &str) -> String {
        t.canonical("k", v, &cx()).unwrap()
    }

    #[test]
    fn times() {
        for (i, o) in [
            ("12", "1200"),
            ("6", "0600"),
            ("1200", "1200"),
            ("12:00", "1200"),
            ("1:23", "0123"),
            ("00:18:00", "0018"),
            ("0", "0000"),
            ("600", "0600"),
            ("120000", "1200"),
        ] {
            assert_eq!(canon(KeyType::Time, i), o, "{i}");
        }
        for bad in ["12:99", "7700", "12am", "", "24"] {
            assert!(
                KeyType::Time.canonical("time", bad, &cx()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn steps() {
        for (i, o) in [
            ("00", "0"),
            ("6", "6"),
            ("60m", "1"),
            ("30m", "30m"),
            ("30m-60m", "30m-1"),
            ("02-12", "2-12"),
            ("12h", "12"),
            ("0-6", "0-6"),
        ] {
            assert_eq!(canon(KeyType::Step, i), o, "{i}");
        }
        assert!(KeyType::Step.canonical("step", "-12", &cx()).is_err());
        assert!(KeyType::Step.canonical("step", "x", &cx()).is_err());
    }

    #[test]
    fn dates_and_climatology() {
        assert_eq!(canon(KeyType::Date, "20190109"), "20190109");
        assert_eq!(canon(KeyType::Date, "2019-01-09"), "20190109");
        assert_eq!(canon(KeyType::Date, "2019-009"), "20190109");
        assert_eq!(canon(KeyType::Date, "0"), "20261122");
        assert_eq!(canon(KeyType::Date, "-1"), "20261121");
        assert!(KeyType::Date.canonical("date", "20191340", &cx()).is_err());
        assert!(KeyType::Date.canonical("date", "20190229", &cx()).is_err());
        assert_eq!(canon(KeyType::Date, "20200229"), "20200229");
        assert_eq!(canon(KeyType::Date, "09990101"), "09990101");
        assert_eq!(canon(KeyType::Date, "-40000"), "19170518");
        assert_eq!(canon(KeyType::ClimateDaily, "20190427"), "0427");
        assert_eq!(canon(KeyType::ClimateDaily, "apr-27"), "0427");
        assert_eq!(canon(KeyType::ClimateMonthly, "20190427"), "4");
        assert_eq!(canon(KeyType::ClimateMonthly, "jan"), "1");
        assert_eq!(canon(KeyType::MonthOfDate, "20190427"), "04");
        assert_eq!(canon(KeyType::Year, "20190427"), "2019");
        assert_eq!(canon(KeyType::YearMonth, "20190427"), "201904");
        assert_eq!(KeyType::Month.stored_keyword("date"), "month");
    }

    /// The shortcut gives what the full canonicalisation gives, for every type and shape.
    #[test]
    fn canonical_atom_agrees_with_canonical() {
        let values = [
            "",
            "0",
            "00",
            "007",
            "1",
            "6",
            "12",
            "130",
            "500",
            "1000",
            "0001",
            "999999999",
            "1000000000",
            "999999999999999",
            "9999999999999999",
            "99999999999999999999",
            "20190109",
            "20190229",
            "20200229",
            "00000101",
            "99991231",
            "2019-01-09",
            "1200",
            "0000",
            "2359",
            "2400",
            "1260",
            "12:00",
            "6",
            "od",
            "OD",
            " od",
            "od ",
            "o d",
            "xxxx",
            "XXXX",
            "abcde",
            "ifsxyz",
            "é",
            "t",
            "2t",
            "130.128",
            "1.5",
            "-1",
            "0-6",
            "30m",
            "o1280",
            "1/1",
        ];
        for (_, ty) in ALL_TYPES {
            for v in values {
                let full = ty.canonical("k", v, &cx()).map(Atom::from);
                assert_eq!(ty.canonical_atom("k", v, &cx()), full, "{ty:?} {v:?}");
            }
        }
    }

    #[test]
    fn others() {
        assert_eq!(canon(KeyType::Expver, "1"), "0001");
        assert_eq!(canon(KeyType::Expver, "XXXX"), "xxxx");
        assert!(KeyType::Expver.canonical("expver", "12345", &cx()).is_err());
        assert_eq!(canon(KeyType::Double, "500.0"), "500");
        assert_eq!(canon(KeyType::Double, "0.5"), "0.5");
        assert_eq!(canon(KeyType::Integer, "01"), "1");
        assert_eq!(canon(KeyType::Grid, "O1280"), "o1280");
        assert_eq!(canon(KeyType::Grid, "1/1"), "1+1");
        assert_eq!(canon(KeyType::First3, "ifsxyz"), "ifs");
        assert_eq!(canon(KeyType::Default, "OD"), "od");
        assert_eq!(canon(KeyType::Ignore, "o1280"), "");
        assert_eq!(canon(KeyType::Param, "130.128"), "130");
        assert_eq!(canon(KeyType::Param, "229.140"), "140229");
        assert_eq!(canon(KeyType::Param, "130"), "130");
    }

    #[test]
    fn param_names_use_the_resolver() {
        let r = |n: &str| match n {
            "t" => Some("130".to_string()),
            "112.1" => Some("3112".to_string()),
            _ => None,
        };
        let cx = Context {
            today: cx().today,
            params: Some(&r),
        };
        assert_eq!(KeyType::Param.canonical("param", "T", &cx).unwrap(), "130");
        // GRIB1 table notation: the resolver's paramId first, arithmetic only without one.
        assert_eq!(
            KeyType::Param.canonical("param", "112.1", &cx).unwrap(),
            "3112"
        );
        assert_eq!(
            KeyType::Param.canonical("param", "229.140", &cx).unwrap(),
            "140229"
        );
        assert!(matches!(
            KeyType::Param.canonical("param", "nosuch", &cx),
            Err(TypeError::UnknownParam { .. })
        ));
    }

    /// Regression (found by random requests): `param=1.9223372036854775807` overflowed
    /// `table * 1000 + number`, a panic (a wrong paramId in a release build).
    #[test]
    fn table_notation_beyond_one_byte_is_no_parameter() {
        let r = |_: &str| None;
        let cx = Context {
            today: cx().today,
            params: Some(&r),
        };
        for v in [
            "1.9223372036854775807",
            "9223372036854775807.1",
            "18446744073709551615.18446744073709551615",
            "256.1",
            "1.256",
        ] {
            assert!(
                matches!(
                    KeyType::Param.canonical("param", v, &cx),
                    Err(TypeError::UnknownParam { .. })
                ),
                "{v}"
            );
        }
        assert_eq!(
            KeyType::Param.canonical("param", "255.255", &cx).unwrap(),
            "255255"
        );
        assert_eq!(
            KeyType::Param
                .canonical("param", "1.9223372036854775807", &Context::default())
                .unwrap(),
            "1.9223372036854775807"
        );
    }

    #[test]
    fn unknown_type_is_named() {
        let e = "Foo".parse::<KeyType>().unwrap_err().to_string();
        assert!(e.contains("unknown key type 'Foo'"), "{e}");
    }

    proptest! {
        #[test]
        fn canonical_atom_is_canonical(v in "[0-9a-zA-Z :]{0,10}", t in 0usize..ALL_TYPES.len()) {
            let ty = ALL_TYPES[t].1;
            let full = ty.canonical("k", &v, &cx()).map(Atom::from);
            prop_assert_eq!(ty.canonical_atom("k", &v, &cx()), full);
        }

        #[test]
        fn canonicalisation_is_idempotent(v in "[0-9a-zA-Z:./-]{0,12}", t in 0usize..ALL_TYPES.len()) {
            let ty = ALL_TYPES[t].1;
            if let Ok(once) = ty.canonical("k", &v, &cx()) {
                // Climatological and renaming types map dates to something that is not a date.
                if !matches!(ty, KeyType::ClimateDaily | KeyType::First3) {
                    let twice = ty.canonical("k", &once, &cx());
                    if !once.is_empty() || ty == KeyType::Ignore {
                        prop_assert_eq!(twice.ok(), Some(once));
                    }
                }
            }
        }
    }
}
