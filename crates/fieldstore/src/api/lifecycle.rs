//! Running a config's lifecycle rules (docs/lifecycle.md): which databases each rule acts on at a
//! given moment, and acting (or, dry, only saying so).
//!
//! The moment is a parameter, never read here, so tests (and `FIELDSTORE_NOW`) can run the
//! rules as of any time. A database's age is its run's: its `date` and `time` to that moment.
//! Every action is logged (target `fieldstore::lifecycle`) and returned, done or not.

use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, SystemTime};

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use serde::{Deserialize, Serialize};

use super::error::ApiError;
use super::fdb::Fdb;
use super::local::LocalFdb;
use crate::model::config::{LifecycleAction, LifecycleConfig};
use crate::model::request::{parse_request, Request};
use crate::model::Key;
use crate::storage::toc::relocate::MoveOptions;
use crate::storage::DbRef;

/// One action of a run: what a rule does (or would do) to one database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LifecycleElement {
    pub rule: String,
    /// `move` or `wipe`.
    pub action: String,
    pub db: String,
    /// Where the database was.
    pub from: String,
    /// Where it goes (moves only).
    pub to: Option<String>,
    /// Why: its age, or its place among the runs kept.
    pub reason: String,
    pub done: bool,
    /// Why the action failed; the run goes on with the others.
    pub error: Option<String>,
}

/// The moment a database's run starts (`date` + `time`); `None` without a readable `date`.
pub fn run_time(db: &Key) -> Option<NaiveDateTime> {
    let d = db.get("date")?.trim();
    let date = NaiveDate::parse_from_str(d, "%Y%m%d")
        .or_else(|_| NaiveDate::parse_from_str(d, "%Y-%m-%d"))
        .ok()?;
    let time = db
        .get("time")
        .and_then(|t| {
            let t = t.trim();
            let hhmm: u32 = t.parse().ok()?;
            let (h, m) = if t.len() <= 2 {
                (hhmm, 0)
            } else {
                (hhmm / 100, hhmm % 100)
            };
            NaiveTime::from_hms_opt(h, m, 0)
        })
        .unwrap_or(NaiveTime::MIN);
    Some(date.and_time(time))
}

/// The moment to run the rules as of: `text` (RFC 3339, or a date `2026-11-24` meaning its
/// midnight UTC) when given and not empty, else the clock.
pub fn moment(text: Option<&str>) -> Result<DateTime<Utc>, ApiError> {
    let Some(text) = text.map(str::trim).filter(|t| !t.is_empty()) else {
        return Ok(Utc::now());
    };
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map(|d| d.and_time(NaiveTime::MIN).and_utc())
        .map_err(|_| {
            ApiError::Invalid(format!(
                "'{text}' is not a moment like 2026-11-24T12:00:00Z or a date like 2026-11-24"
            ))
        })
}

/// How old the database's run is at `now`.
fn age(db: &Key, now: DateTime<Utc>) -> Option<Duration> {
    let t = run_time(db)?.and_utc();
    (now - t).to_std().ok()
}

fn human(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 86400 {
        format!("{}d{}h", s / 86400, (s % 86400) / 3600)
    } else {
        format!("{}h{}m", s / 3600, (s % 3600) / 60)
    }
}

/// The key without `date` and `time`: databases of one stream's successive runs share it.
fn stream_of(db: &Key) -> String {
    Key::from_pairs(db.iter().filter(|(k, _)| *k != "date" && *k != "time")).to_string()
}

/// A request naming exactly this database.
fn exact(db: &Key) -> Request {
    let mut r = Request::new(None);
    for (k, v) in db.iter() {
        r.set(k, vec![v.to_string()]);
    }
    r
}

/// What one rule would do at `now`, given the databases still unclaimed by earlier rules.
fn plan_rule(
    fdb: &LocalFdb,
    rule: &crate::model::config::LifecycleRule,
    dbs: Vec<DbRef>,
    now: DateTime<Utc>,
) -> Vec<(DbRef, LifecycleElement)> {
    let element = |db: &DbRef, action: &str, to: Option<String>, reason: String| LifecycleElement {
        rule: rule.name.clone(),
        action: action.into(),
        db: db.key.to_string(),
        from: db.id.clone(),
        to,
        reason,
        done: false,
        error: None,
    };
    let mut out = Vec::new();
    match &rule.action {
        LifecycleAction::Move { older_than, to } => {
            for db in dbs {
                if fdb.is_in_tier(&db, to) {
                    continue;
                }
                if let Some(a) = age(&db.key, now).filter(|a| a > older_than) {
                    let why = format!("run {} old, older than {}", human(a), human(*older_than));
                    let e = element(&db, "move", Some(to.clone()), why);
                    out.push((db, e));
                }
            }
        }
        LifecycleAction::Wipe { older_than } => {
            for db in dbs {
                if let Some(a) = age(&db.key, now).filter(|a| a > older_than) {
                    let why = format!("run {} old, older than {}", human(a), human(*older_than));
                    let e = element(&db, "wipe", None, why);
                    out.push((db, e));
                }
            }
        }
        LifecycleAction::KeepRuns { runs } => {
            let mut streams: BTreeMap<String, Vec<(NaiveDateTime, DbRef)>> = BTreeMap::new();
            for db in dbs {
                if let Some(t) = run_time(&db.key) {
                    streams.entry(stream_of(&db.key)).or_default().push((t, db));
                }
            }
            for (_, mut list) in streams {
                list.sort_by_key(|b| std::cmp::Reverse(b.0));
                let mut distinct: Vec<NaiveDateTime> = list.iter().map(|(t, _)| *t).collect();
                distinct.dedup();
                let Some(oldest_kept) = distinct.get(runs.saturating_sub(1)).copied() else {
                    continue;
                };
                for (t, db) in list {
                    if t < oldest_kept {
                        let why = format!(
                            "not among the newest {runs} runs (oldest kept: {oldest_kept})"
                        );
                        let e = element(&db, "wipe", None, why);
                        out.push((db, e));
                    }
                }
            }
        }
    }
    out
}

/// Runs the rules as of `now`: each in config order, each database acted on by the first rule
/// that acts on it. Databases changed within the grace period are left for a later run. A
/// failed action is reported in its element and the run goes on.
pub fn run(
    fdb: &LocalFdb,
    config: &LifecycleConfig,
    now: DateTime<Utc>,
    dry_run: bool,
) -> Result<Vec<LifecycleElement>, ApiError> {
    let mut claimed: HashSet<String> = HashSet::new();
    let mut out = Vec::new();
    let wall = SystemTime::now();
    for rule in &config.rules {
        let request = if rule.request.trim().is_empty() {
            Request::default()
        } else {
            parse_request(&rule.request).map_err(|e| {
                ApiError::Invalid(format!(
                    "lifecycle rule {}: request {}: {e}",
                    rule.name, rule.request
                ))
            })?
        };
        let dbs: Vec<DbRef> = fdb
            .databases_matching(&request)?
            .into_iter()
            .filter(|d| !claimed.contains(&d.key.sorted().to_string()))
            .filter(|d| {
                // In use: its writers (and the readers following them) are still at work.
                let busy = fdb
                    .last_change(d)
                    .and_then(|t| wall.duration_since(t).ok())
                    .is_some_and(|since| since < config.grace);
                if busy {
                    tracing::info!(target: "fieldstore::lifecycle", rule = %rule.name, db = %d.key, "changed within the grace period: left for a later run");
                }
                !busy
            })
            .collect();
        for (db, mut e) in plan_rule(fdb, rule, dbs, now) {
            claimed.insert(db.key.sorted().to_string());
            if !dry_run {
                let result = match &e.to {
                    Some(to) => fdb
                        .move_databases(
                            &exact(&db.key),
                            std::path::Path::new(to),
                            &MoveOptions::default(),
                        )
                        .map(|m| {
                            if let Some(m) = m.first() {
                                e.to = Some(m.to.clone());
                            }
                        }),
                    None => fdb.wipe(&exact(&db.key), true).map(|_| ()),
                };
                match result {
                    Ok(()) => e.done = true,
                    Err(err) => e.error = Some(err.to_string()),
                }
            }
            tracing::info!(
                target: "fieldstore::lifecycle",
                rule = %e.rule, action = %e.action, db = %e.db, from = %e.from,
                to = e.to.as_deref().unwrap_or(""), reason = %e.reason, done = e.done,
                error = e.error.as_deref().unwrap_or(""),
                "lifecycle action"
            );
            out.push(e);
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(text: &str) -> Key {
        Key::from_pairs(text.split(',').filter_map(|p| p.split_once('=')))
    }

    #[test]
    fn a_run_starts_at_its_date_and_time() {
        let t = run_time(&key("class=od,date=20261122,time=1200")).map(|t| t.to_string());
        assert_eq!(t.as_deref(), Some("2026-11-22 12:00:00"));
        let t = run_time(&key("class=od,date=20261122")).map(|t| t.to_string());
        assert_eq!(t.as_deref(), Some("2026-11-22 00:00:00"));
        assert_eq!(run_time(&key("class=od")), None);
        assert_eq!(run_time(&key("date=-1")), None);
    }

    #[test]
    fn streams_group_runs_by_everything_but_date_and_time() {
        assert_eq!(
            stream_of(&key("class=od,stream=oper,date=20261122,time=1200")),
            stream_of(&key("class=od,stream=oper,date=20261123,time=0000"))
        );
        assert_ne!(
            stream_of(&key("class=od,stream=oper,date=20261122")),
            stream_of(&key("class=od,stream=enfo,date=20261122"))
        );
    }

    #[test]
    fn ages_count_from_the_run() {
        let now = DateTime::parse_from_rfc3339("2026-11-24T12:00:00Z")
            .map(|t| t.with_timezone(&Utc))
            .ok();
        let a = now.and_then(|n| age(&key("date=20261122,time=1200"), n));
        assert_eq!(a, Some(Duration::from_secs(2 * 86400)));
        let future = now.and_then(|n| age(&key("date=20261125,time=0000"), n));
        assert_eq!(future, None);
    }
}
