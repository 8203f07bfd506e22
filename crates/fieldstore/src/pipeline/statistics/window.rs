//! Calendar time for statistics: output frequencies (`6h`, `1d`, `1m`), truncation to their
//! unit and MultIO's date/time keys. Times are seconds since 1970-01-01 UTC.

use chrono::{Datelike, NaiveDate, NaiveDateTime, Timelike};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Unit {
    Hour,
    Day,
    Month,
}

/// An output frequency: `N` hours, days or months.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Period {
    pub n: u32,
    pub unit: Unit,
}

impl Period {
    /// MultIO's grammar: `^[1-9][0-9]*(h|hour|d|day|m|month)$`.
    pub fn parse(text: &str) -> Option<Period> {
        let t = text.trim();
        let split = t.find(|c: char| !c.is_ascii_digit())?;
        let (num, unit) = t.split_at(split);
        if num.starts_with('0') {
            return None;
        }
        let n: u32 = num.parse().ok().filter(|n| *n > 0 && *n <= 100_000)?;
        let unit = match unit {
            "h" | "hour" => Unit::Hour,
            "d" | "day" => Unit::Day,
            "m" | "month" => Unit::Month,
            _ => return None,
        };
        Some(Period { n, unit })
    }

    /// The start of the period containing `t` (hour, midnight or first of the month).
    pub fn truncate(&self, t: i64) -> Option<i64> {
        let d = to_datetime(t)?;
        let out = match self.unit {
            Unit::Hour => d.date().and_hms_opt(d.hour(), 0, 0)?,
            Unit::Day => d.date().and_hms_opt(0, 0, 0)?,
            Unit::Month => NaiveDate::from_ymd_opt(d.year(), d.month(), 1)?.and_hms_opt(0, 0, 0)?,
        };
        Some(out.and_utc().timestamp())
    }

    /// `t` moved on by `k` periods.
    pub fn add(&self, t: i64, k: u32) -> Option<i64> {
        let steps = i64::from(self.n) * i64::from(k);
        match self.unit {
            Unit::Hour => t.checked_add(steps.checked_mul(3600)?),
            Unit::Day => t.checked_add(steps.checked_mul(86400)?),
            Unit::Month => {
                let d = to_datetime(t)?;
                let months = i64::from(d.year()) * 12 + i64::from(d.month0()) + steps;
                let year = i32::try_from(months.div_euclid(12)).ok()?;
                let month = u32::try_from(months.rem_euclid(12)).ok()? + 1;
                let day = d.day().min(days_in_month(year, month)?);
                let nd = NaiveDate::from_ymd_opt(year, month, day)?.and_time(d.time());
                Some(nd.and_utc().timestamp())
            }
        }
    }

    /// The frequency as MultIO's `stattype` prefix names it (`da`, `mo`); others have none.
    pub fn stattype_prefix(&self) -> Option<&'static str> {
        match (self.n, self.unit) {
            (1, Unit::Day) => Some("da"),
            (1, Unit::Month) => Some("mo"),
            _ => None,
        }
    }
}

fn days_in_month(year: i32, month: u32) -> Option<u32> {
    let first = NaiveDate::from_ymd_opt(year, month, 1)?;
    let next = if month == 12 {
        NaiveDate::from_ymd_opt(year + 1, 1, 1)?
    } else {
        NaiveDate::from_ymd_opt(year, month + 1, 1)?
    };
    u32::try_from((next - first).num_days()).ok()
}

pub fn to_datetime(t: i64) -> Option<NaiveDateTime> {
    chrono::DateTime::from_timestamp(t, 0).map(|d| d.naive_utc())
}

/// A `date` (YYYYMMDD) and `time` key as seconds. `time` is HHMM as in MARS, GRIB and FDB when it
/// is at most 2359 with minutes below 60, and HHMMSS otherwise: MultIO always reads HHMMSS,
/// which turns a 12 UTC run fed from GRIB (`time=1200`) into 00:12 (docs/pipelines.md).
pub fn epoch_of(date: i64, time: i64) -> Result<i64, String> {
    let y = i32::try_from(date / 10000).map_err(|_| format!("date {date} is out of range"))?;
    let m =
        u32::try_from((date / 100) % 100).map_err(|_| format!("date {date} is not YYYYMMDD"))?;
    let d = u32::try_from(date % 100).map_err(|_| format!("date {date} is not YYYYMMDD"))?;
    let day =
        NaiveDate::from_ymd_opt(y, m, d).ok_or_else(|| format!("date {date} is not YYYYMMDD"))?;
    let (h, mi, s) =
        split_time(time).ok_or_else(|| format!("time {time} is neither HHMM nor HHMMSS"))?;
    let t = day
        .and_hms_opt(h, mi, s)
        .ok_or_else(|| format!("time {time} is neither HHMM nor HHMMSS"))?;
    Ok(t.and_utc().timestamp())
}

fn split_time(time: i64) -> Option<(u32, u32, u32)> {
    if !(0..=235959).contains(&time) {
        return None;
    }
    let t = u32::try_from(time).ok()?;
    if t <= 2359 && t % 100 < 60 {
        return Some((t / 100, t % 100, 0));
    }
    let (h, m, s) = (t / 10000, (t / 100) % 100, t % 100);
    (h < 24 && m < 60 && s < 60).then_some((h, m, s))
}

/// Seconds as MultIO's (YYYYMMDD, HHMMSS) pair.
pub fn date_time_of(t: i64) -> (i64, i64) {
    match to_datetime(t) {
        Some(d) => (
            i64::from(d.year()) * 10000 + i64::from(d.month()) * 100 + i64::from(d.day()),
            i64::from(d.hour()) * 10000 + i64::from(d.minute()) * 100 + i64::from(d.second()),
        ),
        None => (0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar() {
        assert_eq!(
            Period::parse("1d"),
            Some(Period {
                n: 1,
                unit: Unit::Day
            })
        );
        assert_eq!(
            Period::parse("12hour"),
            Some(Period {
                n: 12,
                unit: Unit::Hour
            })
        );
        assert_eq!(
            Period::parse("1month"),
            Some(Period {
                n: 1,
                unit: Unit::Month
            })
        );
        for bad in ["0d", "01d", "d", "1y", "1 d", "", "-1d", "99999999999d"] {
            assert_eq!(Period::parse(bad), None, "{bad}");
        }
    }

    #[test]
    fn calendar() {
        let t = epoch_of(20250131, 1230).unwrap();
        let m = Period::parse("1m").unwrap();
        let start = m.truncate(t).unwrap();
        assert_eq!(date_time_of(start), (20250101, 0));
        assert_eq!(date_time_of(m.add(start, 1).unwrap()), (20250201, 0));
        assert_eq!(date_time_of(m.add(start, 2).unwrap()), (20250301, 0));
        let d = Period::parse("1d").unwrap();
        assert_eq!(date_time_of(d.truncate(t).unwrap()), (20250131, 0));
        assert_eq!(
            date_time_of(Period::parse("6h").unwrap().truncate(t).unwrap()),
            (20250131, 120000)
        );
    }

    #[test]
    fn time_conventions() {
        // HHMM as MARS writes it, HHMMSS as IFS does: both mean 12 UTC.
        assert_eq!(epoch_of(20250101, 1200), epoch_of(20250101, 120000));
        assert_eq!(
            date_time_of(epoch_of(20250101, 1830).unwrap()),
            (20250101, 183000)
        );
        assert!(epoch_of(20250101, 2500).is_ok(), "00:25:00 as HHMMSS");
        assert!(epoch_of(20250101, 246000).is_err());
        assert!(epoch_of(20251301, 0).is_err());
    }
}
