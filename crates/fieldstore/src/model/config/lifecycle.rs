//! The `lifecycle:` section of a local config: rules that move and wipe whole databases as they
//! age (docs/lifecycle.md). Only what the rules say; running them is `api::lifecycle`'s job.

use std::time::Duration;

/// `lifecycle: {grace: 10m, rules: [...]}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifecycleConfig {
    /// A database changed (flushed into) less than this long ago is left alone by every rule:
    /// its writers and the readers that follow them are still at work.
    pub grace: Duration,
    /// In config order; each database is acted on by the first rule that acts on it in a run.
    pub rules: Vec<LifecycleRule>,
    /// `every: 1h`: `fieldstore server` runs the rules at its start and then this often, so a
    /// hot cache keeps rolling without cron. `None`: only `fieldstore lifecycle run` does.
    pub every: Option<Duration>,
}

impl LifecycleConfig {
    pub const DEFAULT_GRACE: Duration = Duration::from_secs(600);
}

/// One rule: which databases (a request naming database keys) and what to do with them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LifecycleRule {
    /// Names the rule in logs and reports (`rule[2]` when not given).
    pub name: String,
    /// A MARS request over database keys (`class=od,stream=oper`); empty: every database.
    pub request: String,
    pub action: LifecycleAction,
}

/// What a rule does. Ages are counted from a database's run (its `date` and `time`) to now.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LifecycleAction {
    /// `older_than: 2d, move_to: s3://cold/ops`: move databases older than this to a tier
    /// (a root's path or a bucket's URI).
    Move { older_than: Duration, to: String },
    /// `older_than: 30d, wipe: true`: wipe databases older than this.
    Wipe { older_than: Duration },
    /// `keep_runs: 4`: of the databases matching the request, keep those of the newest N runs
    /// (distinct `date`+`time`) of each stream (the key without `date` and `time`), wipe the
    /// rest.
    KeepRuns { runs: usize },
}
