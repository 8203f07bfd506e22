//! `fieldstore pipeline replay PLAN REQUEST`: a plan over fields already stored (a new
//! statistic over a past run). The fields are fed in forecast-time order (date, time, step),
//! one MultIO flush after each step's fields, as a model would have sent them, then a
//! `last-step` flush. Outputs into a store pass the same gate as a follower's, so replaying
//! twice archives nothing the second time.

use std::path::Path;
use std::sync::Arc;

use super::follow::{hex_sha256, key_request, FollowCounts, Gate};
use super::{feed, Context, FlushKind, Message, PipelineError, PlanSet};
use crate::api::{ApiError, Fdb, ListOptions};
use crate::model::request::Request;
use crate::model::Key;

/// Orders steps by time, in minutes (`30m` before `6`, `6` before `12`; a range by its end,
/// `0-24` after `18`). Unreadable steps go last.
fn step_order(step: &str) -> (u64, u64) {
    let (a, b) = step.split_once('-').unwrap_or((step, step));
    let minutes = |s: &str| {
        let digits = s.trim_end_matches(|c: char| c.is_ascii_alphabetic());
        let n = digits.parse::<u64>().unwrap_or(u64::MAX / 60);
        match &s[digits.len()..] {
            "m" => n,
            "s" => n / 60,
            "" | "h" => n * 60,
            _ => u64::MAX,
        }
    };
    (minutes(b), minutes(a))
}

/// When a field is valid, for ordering: date, time, step (in minutes).
pub(crate) type ForecastTime = (String, String, (u64, u64));

pub(crate) fn forecast_time(k: &Key) -> ForecastTime {
    (
        k.get("date").unwrap_or("").to_string(),
        k.get("time").unwrap_or("").to_string(),
        step_order(k.get("step").unwrap_or("0")),
    )
}

/// Runs `plan` over the fields of `store` that `request` names. `failed` hears each field
/// that failed (the others go on); `progress` gets (fields done, fields in all).
pub fn replay(
    store: Arc<dyn Fdb>,
    plan: &Path,
    request: &Request,
    ctx: Context,
    failed: &mut dyn FnMut(&PipelineError),
    progress: &mut dyn FnMut(u64, u64),
) -> Result<FollowCounts, PipelineError> {
    let api = |e: ApiError| PipelineError::State(format!("reading the store: {e}"));
    let text = std::fs::read(plan).map_err(|e| PipelineError::Config {
        origin: plan.display().to_string(),
        line: None,
        message: format!("cannot read the plan file: {e}"),
    })?;
    let gate = Arc::new(Gate::new(
        store.clone(),
        None,
        plan,
        hex_sha256(&text),
        request.clone(),
    ));
    let ctx = Context {
        fdb: Some(gate.clone() as Arc<dyn Fdb>),
        ..ctx
    };
    let mut set = PlanSet::from_file(plan, ctx)?;
    let mut keys: Vec<Key> = Vec::new();
    for el in store
        .list(
            request,
            ListOptions {
                include_masked: false,
                depth: 3,
            },
        )
        .map_err(api)?
    {
        keys.push(el.map_err(api)?.key.combined());
    }
    let when = forecast_time;
    if keys.is_empty() {
        return Err(PipelineError::State(format!(
            "nothing stored matches {request}: no field to replay the plan over"
        )));
    }
    keys.sort_by_cached_key(|k| (when(k), k.to_string()));
    let total = keys.len() as u64;
    let mut counts = FollowCounts::default();
    for (i, key) in keys.iter().enumerate() {
        let mut reader = store
            .retrieve(&key_request(key).map_err(api)?)
            .map_err(api)?;
        let mut data = Vec::new();
        std::io::Read::read_to_end(&mut reader, &mut data)
            .map_err(|e| PipelineError::State(format!("reading {key}: {e}")))?;
        counts.fields += 1;
        match feed::field_from_grib(&data) {
            Ok(field) => {
                for e in set.process(Message::Field(field)) {
                    counts.failed += 1;
                    failed(&e);
                }
            }
            Err(e) => {
                counts.failed += 1;
                failed(&PipelineError::Field {
                    plan: plan.display().to_string(),
                    action: "decode".into(),
                    field: key.to_string(),
                    message: e.to_string(),
                });
            }
        }
        let step_ends = keys.get(i + 1).is_none_or(|next| when(next) != when(key));
        if step_ends {
            let kind = if i + 1 == keys.len() {
                FlushKind::LastStep
            } else {
                FlushKind::Default
            };
            for e in set.process(Message::flush(kind)) {
                counts.failed += 1;
                failed(&e);
            }
            counts.flushes += 1;
        }
        progress(i as u64 + 1, total);
    }
    (counts.outputs, counts.already_stored) = gate.counts();
    Ok(counts)
}

#[cfg(test)]
mod tests {
    use super::step_order;

    #[test]
    fn steps_sort_as_numbers_and_ranges_by_their_end() {
        let mut s = vec!["12", "6", "0-24", "18", "0", "24", "30m"];
        s.sort_by_key(|x| step_order(x));
        assert_eq!(s, vec!["0", "30m", "6", "12", "18", "0-24", "24"]);
    }
}
