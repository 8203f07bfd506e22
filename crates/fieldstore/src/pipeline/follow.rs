//! Plans on the stream of flushed fields (`fieldstore pipeline follow`): the store's
//! subscription hands each flushed field to a plan set, a store flush becomes a MultIO flush,
//! and the results go to the plans' sinks (usually back into the store).
//!
//! Exactly once across crashes: after each store flush has gone through the plans (their sinks
//! flushed), a checkpoint is written (new file, synced, renamed): the subscription position,
//! every statistics window, the length of every file sink and of the provenance log. A restart
//! (after kill -9 too) restores the windows, cuts the files back to those lengths and resumes
//! the subscription there, so the fields after the checkpoint go through the plans again and
//! give the same outputs. Outputs into a store pass a gate that skips a field the store already
//! holds with the same bytes: those re-made after the crash are not archived twice.
//!
//! Every output archived is recorded in `provenance.jsonl` beside the checkpoint: its key, the
//! plan, the plan file's hash, the window, and the request that selects its inputs.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use super::replay::ForecastTime;
use super::{feed, Context, FlushKind, Message, PipelineError, PipelineState, PlanSet};
use crate::api::{ApiError, Fdb, Position, Start};
use crate::model::request::Request;
use crate::model::Key;

/// What to follow, and where its state lives.
#[derive(Debug, Clone)]
pub struct FollowSpec {
    /// Names the state directory's contents in messages and the provenance records.
    pub name: String,
    /// The MultIO plan file.
    pub plan: PathBuf,
    /// Which flushed fields feed the plans (a partial request, as for `watch`).
    pub request: Request,
    /// Checkpoint and provenance log.
    pub state_dir: PathBuf,
    /// Without a checkpoint: start with what the store holds already (else with what is flushed
    /// from now on).
    pub from_beginning: bool,
}

/// How far a follower got.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct FollowCounts {
    /// Fields handed to the plans.
    pub fields: u64,
    /// Fields (or flushes) a plan failed on: named in the log, the others went on.
    pub failed: u64,
    /// Outputs archived into a store.
    pub outputs: u64,
    /// Outputs the store already held, byte for byte (re-made after a restart).
    pub already_stored: u64,
    /// Store flushes passed on as MultIO flushes (each followed by a checkpoint).
    pub flushes: u64,
}

/// What a checkpoint holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct Checkpoint {
    /// SHA-256 of the plan file: a checkpoint is only good for the plans that made it.
    plan_hash: String,
    position: Position,
    windows: PipelineState,
    /// File sinks' lengths, cut back to on restart.
    files: BTreeMap<PathBuf, u64>,
    /// Length of `provenance.jsonl`.
    provenance: u64,
    counts: FollowCounts,
}

const CHECKPOINT: &str = "checkpoint.json";
const PROVENANCE: &str = "provenance.jsonl";

fn state_err(what: &str, path: &Path, e: impl std::fmt::Display) -> PipelineError {
    PipelineError::State(format!("{what} {}: {e}", path.display()))
}

/// Outputs into a store pass here: skipped when the store holds them already (same key, same
/// bytes), else archived and recorded.
pub(crate) struct Gate {
    inner: Arc<dyn Fdb>,
    /// Where each output archived is recorded (none: not recorded).
    provenance: Option<Mutex<std::fs::File>>,
    plan: String,
    plan_hash: String,
    request: Request,
    outputs: AtomicU64,
    already: AtomicU64,
    /// SHA-256 of every output this gate passed: a follower never feeds its own outputs back
    /// into its plans when the stream brings them.
    own: Mutex<std::collections::HashSet<String>>,
}

impl Gate {
    pub(crate) fn new(
        inner: Arc<dyn Fdb>,
        provenance: Option<std::fs::File>,
        plan: &Path,
        plan_hash: String,
        request: Request,
    ) -> Gate {
        Gate {
            inner,
            provenance: provenance.map(Mutex::new),
            plan: plan.display().to_string(),
            plan_hash,
            request,
            outputs: AtomicU64::new(0),
            already: AtomicU64::new(0),
            own: Mutex::new(Default::default()),
        }
    }

    /// Whether these bytes are an output of this gate's plans.
    fn is_own(&self, data: &[u8]) -> bool {
        let h = hex_sha256(data);
        self.own.lock().is_ok_and(|o| o.contains(&h))
    }

    /// (outputs archived, outputs the store held already) so far.
    pub(crate) fn counts(&self) -> (u64, u64) {
        (
            self.outputs.load(Ordering::Relaxed),
            self.already.load(Ordering::Relaxed),
        )
    }

    /// What the store holds under an output's key: nothing, these bytes, or other bytes.
    fn held(&self, key: &Key) -> Result<Option<Vec<u8>>, ApiError> {
        let request = key_request(key)?;
        let mut reader = match self.inner.retrieve(&request) {
            Ok(r) => r,
            Err(ApiError::NothingMatched(_)) => return Ok(None),
            Err(e) => return Err(e),
        };
        let mut held = Vec::new();
        std::io::Read::read_to_end(&mut reader, &mut held)
            .map_err(|e| ApiError::Invalid(format!("reading {key} back to compare it: {e}")))?;
        // A retrieve that matched nothing reads as nothing.
        Ok(Some(held).filter(|h| !h.is_empty()))
    }

    /// The provenance record of one output.
    fn record(&self, key: &Key, sha256: &str) -> serde_json::Value {
        let step = key.get("step").unwrap_or("");
        let (first, last) = step.split_once('-').unwrap_or(("0", step));
        let mut inputs = self.request.to_string();
        for kw in ["date", "time"] {
            if let Some(v) = key.get(kw) {
                inputs.push_str(&format!(",{kw}={v}"));
            }
        }
        if !step.is_empty() {
            inputs.push_str(&format!(",step={first}/to/{last}"));
        }
        serde_json::json!({
            "key": key.to_string(),
            "sha256": sha256,
            "plan": self.plan,
            "plan_sha256": self.plan_hash,
            "window": {"date": key.get("date"), "time": key.get("time"), "step": step},
            "inputs": inputs,
            "engine": format!("fieldstore {}", env!("CARGO_PKG_VERSION")),
            "written": std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        })
    }
}

/// A request naming exactly one key (`a=1,b=2`).
pub(crate) fn key_request(key: &Key) -> Result<Request, ApiError> {
    // Optional keywords a field lacks are listed empty: left out, as a request leaves them.
    let text: Vec<String> = key
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, v)| format!("{k}={v}"))
        .collect();
    crate::model::request::parse_request(&text.join(","))
        .map_err(|e| ApiError::Invalid(format!("the output's key {key} is not a request: {e}")))
}

impl Fdb for Gate {
    fn name(&self) -> String {
        format!("pipeline gate over {}", self.inner.name())
    }

    fn forward_to(&self) -> Option<&dyn Fdb> {
        Some(&*self.inner)
    }

    fn archive(&self, key: Option<&Key>, data: &[u8]) -> Result<(), ApiError> {
        let key = match key {
            Some(k) => k.clone(),
            None => crate::grib::mars_keys(data)?,
        };
        let sha256 = hex_sha256(data);
        match self.held(&key)? {
            // Made again after a restart: stored already, but its record went with the
            // cut-back log, so it is recorded again.
            Some(held) if held == data => {
                self.already.fetch_add(1, Ordering::Relaxed);
            }
            // An output must never mask a field its plans did not write: with the same key as
            // an input (a statistic that keeps the input's param, type and stream), archiving
            // it would replace that input.
            Some(held) if !self.is_own(&held) => {
                return Err(ApiError::Invalid(format!(
                    "the output {key} would replace a field of the store that this pipeline did not write (an input?): give outputs their own param, type or stream (metadata-mapping, encode's overwrite:, or statistics-mtg2's param mapping)"
                )));
            }
            _ => {
                self.inner.archive(Some(&key), data)?;
                self.outputs.fetch_add(1, Ordering::Relaxed);
            }
        }
        if let Ok(mut own) = self.own.lock() {
            own.insert(sha256.clone());
        }
        if let Some(log) = &self.provenance {
            let mut line = self.record(&key, &sha256).to_string();
            line.push('\n');
            let mut f = log
                .lock()
                .map_err(|_| ApiError::Invalid("provenance log lock poisoned".into()))?;
            f.write_all(line.as_bytes())
                .map_err(|e| ApiError::Invalid(format!("writing the provenance log: {e}")))?;
        }
        Ok(())
    }

    fn flush(&self) -> Result<(), ApiError> {
        self.inner.flush()
    }
}

/// A plan set following a store.
pub struct Follower {
    spec: FollowSpec,
    store: Arc<dyn Fdb>,
    set: PlanSet,
    gate: Arc<Gate>,
    checkpoint: Checkpoint,
    position: Position,
    files: Vec<PathBuf>,
    /// The fields of the store flush being read: (forecast time, key, bytes).
    pending: Vec<(ForecastTime, Key, Option<bytes::Bytes>)>,
    pending_bytes: usize,
    /// A checkpoint was found when opened.
    resumed: bool,
}

/// Field bytes of one flush held at most; more are read again when fed.
const PENDING_BYTES: usize = 256 << 20;

impl Follower {
    /// Loads the plans and, if there is one, the checkpoint: windows restored, file sinks and
    /// the provenance log cut back to what it recorded.
    pub fn open(
        store: Arc<dyn Fdb>,
        spec: FollowSpec,
        ctx: Context,
    ) -> Result<Follower, PipelineError> {
        let plan_text = std::fs::read(&spec.plan).map_err(|e| PipelineError::Config {
            origin: spec.plan.display().to_string(),
            line: None,
            message: format!("cannot read the plan file: {e}"),
        })?;
        let plan_hash = hex_sha256(&plan_text);
        std::fs::create_dir_all(&spec.state_dir)
            .map_err(|e| state_err("cannot create", &spec.state_dir, e))?;
        let cp_path = spec.state_dir.join(CHECKPOINT);
        let checkpoint = match std::fs::read(&cp_path) {
            Ok(bytes) => {
                let cp: Checkpoint = serde_json::from_slice(&bytes)
                    .map_err(|e| state_err("damaged checkpoint", &cp_path, e))?;
                if cp.plan_hash != plan_hash {
                    return Err(PipelineError::State(format!(
                        "{} was made by another version of {} (its windows would not fit): move {} away to start afresh",
                        cp_path.display(),
                        spec.plan.display(),
                        spec.state_dir.display()
                    )));
                }
                Some(cp)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(state_err("cannot read", &cp_path, e)),
        };
        let prov_path = spec.state_dir.join(PROVENANCE);
        let provenance = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&prov_path)
            .map_err(|e| state_err("cannot open", &prov_path, e))?;
        if let Some(cp) = &checkpoint {
            provenance
                .set_len(cp.provenance)
                .map_err(|e| state_err("cannot cut back", &prov_path, e))?;
        }
        let mut own = std::collections::HashSet::new();
        let text = std::fs::read_to_string(&prov_path)
            .map_err(|e| state_err("cannot read", &prov_path, e))?;
        for line in text.lines() {
            let rec: serde_json::Value = serde_json::from_str(line)
                .map_err(|e| state_err("damaged record in", &prov_path, e))?;
            if let Some(h) = rec.get("sha256").and_then(|h| h.as_str()) {
                own.insert(h.to_string());
            }
        }
        let gate = Arc::new(Gate::new(
            store.clone(),
            Some(provenance),
            &spec.plan,
            plan_hash.clone(),
            spec.request.clone(),
        ));
        if let Ok(mut o) = gate.own.lock() {
            *o = own;
        }
        let ctx = Context {
            fdb: Some(gate.clone() as Arc<dyn Fdb>),
            ..ctx
        };
        // File sinks are cut back before the plans open them (append). A first run empties
        // those the plan does not append to now, so that the lengths its first checkpoint
        // records are where a restart resumes them.
        let sinks = PlanSet::from_file(&spec.plan, ctx.clone())?.sink_files();
        if checkpoint.is_none() {
            for (path, append) in &sinks {
                if !append && path.exists() {
                    std::fs::File::create(path).map_err(|e| state_err("cannot empty", path, e))?;
                }
            }
        }
        let files: Vec<PathBuf> = sinks.into_iter().map(|(p, _)| p).collect();
        let ctx = Context {
            continue_files: true,
            ..ctx
        };
        if let Some(cp) = &checkpoint {
            for (path, len) in &cp.files {
                match std::fs::OpenOptions::new().write(true).open(path) {
                    Ok(f) => f
                        .set_len(*len)
                        .map_err(|e| state_err("cannot cut back", path, e))?,
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound && *len == 0 => {}
                    Err(e) => return Err(state_err("cannot open", path, e)),
                }
            }
        }
        let mut set = PlanSet::from_file(&spec.plan, ctx)?;
        let resumed = checkpoint.is_some();
        let checkpoint = match checkpoint {
            Some(cp) => {
                set.restore_state(&cp.windows)?;
                cp
            }
            None => Checkpoint {
                plan_hash,
                position: Position::default(),
                windows: PipelineState::default(),
                files: BTreeMap::new(),
                provenance: 0,
                counts: FollowCounts::default(),
            },
        };
        Ok(Follower {
            position: checkpoint.position.clone(),
            spec,
            store,
            set,
            gate,
            checkpoint,
            files,
            pending: Vec::new(),
            pending_bytes: 0,
            resumed,
        })
    }

    /// Whether a checkpoint was found (the run resumes rather than starts).
    pub fn resumed(&self) -> bool {
        self.resumed
    }

    pub fn counts(&self) -> FollowCounts {
        let mut c = self.checkpoint.counts.clone();
        c.outputs += self.gate.outputs.load(Ordering::Relaxed);
        c.already_stored += self.gate.already.load(Ordering::Relaxed);
        c
    }

    /// Follows until `stop()` says so (checked between fields and at least every `poll`), or,
    /// with `idle`, until no field came for that long. `progress` is called after each
    /// checkpoint. Field failures are logged through `failed` and counted; store errors end it.
    pub fn run(
        &mut self,
        stop: &dyn Fn() -> bool,
        idle: Option<Duration>,
        failed: &mut dyn FnMut(&PipelineError),
        progress: &mut dyn FnMut(&FollowCounts),
    ) -> Result<FollowCounts, PipelineError> {
        let start = if self.resumed() {
            Start::At(self.position.clone())
        } else if self.spec.from_beginning {
            Start::Beginning
        } else {
            Start::Now
        };
        let api = |e: ApiError| PipelineError::State(format!("following the store: {e}"));
        let mut sub = self
            .store
            .subscribe_with_data(&self.spec.request, &start)
            .map_err(api)?;
        // The first checkpoint, before any field: where `now` was, and the files' lengths, so
        // a follower killed before its first flush resumes from there too.
        if !self.resumed {
            self.position = sub.position();
            self.save()?;
            self.resumed = true;
        }
        let poll = Duration::from_millis(200);
        // The flush (stream and journal record) the fields since the last checkpoint came with.
        let mut batch: Option<(String, u64)> = None;
        let mut last_field = Instant::now();
        loop {
            if stop() {
                break;
            }
            let notice = sub.next_within(poll).map_err(api)?;
            let Some(notice) = notice else {
                if batch.take().is_some() {
                    self.end_flush(failed)?;
                    progress(&self.counts());
                }
                if idle.is_some_and(|d| last_field.elapsed() >= d) {
                    break;
                }
                continue;
            };
            last_field = Instant::now();
            let this = (notice.stream.clone(), notice.cursor.at);
            // Another stream's flush (databases interleave): the one read so far is whole.
            if batch.as_ref().is_some_and(|b| b.0 != this.0) {
                self.end_flush(failed)?;
                progress(&self.counts());
            }
            // The last field of a flush carries the cursor of the next one's start.
            let last_of_flush = notice.cursor.within == 0;
            batch = Some(this);
            self.position.advance(&notice);
            // Kept while the flush's bytes fit the budget; beyond it, read again when fed.
            let data = notice.data.filter(|d| {
                self.pending_bytes += d.len();
                self.pending_bytes <= PENDING_BYTES
            });
            let key = notice.element.key.combined();
            let when = super::replay::forecast_time(&key);
            self.pending.push((when, key, data));
            if last_of_flush {
                batch = None;
                self.end_flush(failed)?;
                progress(&self.counts());
            }
        }
        if batch.is_some() {
            self.end_flush(failed)?;
            progress(&self.counts());
        }
        Ok(self.counts())
    }

    /// A store flush's fields went through: a MultIO flush (sinks make their outputs durable),
    /// then the checkpoint.
    fn end_flush(&mut self, failed: &mut dyn FnMut(&PipelineError)) -> Result<(), PipelineError> {
        // A flush's fields come in key order; plans need them in forecast-time order.
        let mut pending = std::mem::take(&mut self.pending);
        self.pending_bytes = 0;
        pending.sort_by(|a, b| (&a.0, a.1.to_string()).cmp(&(&b.0, b.1.to_string())));
        for (_, key, data) in pending {
            let data = match data {
                Some(d) => d,
                None => {
                    let api = |e: ApiError| PipelineError::State(format!("reading {key}: {e}"));
                    let mut r = self
                        .store
                        .retrieve(&key_request(&key).map_err(api)?)
                        .map_err(api)?;
                    let mut d = Vec::new();
                    std::io::Read::read_to_end(&mut r, &mut d)
                        .map_err(|e| PipelineError::State(format!("reading {key}: {e}")))?;
                    bytes::Bytes::from(d)
                }
            };
            if self.gate.is_own(&data) {
                continue;
            }
            self.checkpoint.counts.fields += 1;
            match feed::field_from_grib(&data) {
                Ok(field) => {
                    for e in self.set.process(Message::Field(field)) {
                        self.checkpoint.counts.failed += 1;
                        failed(&e);
                    }
                }
                Err(e) => {
                    self.checkpoint.counts.failed += 1;
                    failed(&PipelineError::Field {
                        plan: self.spec.name.clone(),
                        action: "decode".into(),
                        field: key.to_string(),
                        message: e.to_string(),
                    });
                }
            }
        }
        for e in self.set.process(Message::flush(FlushKind::Default)) {
            self.checkpoint.counts.failed += 1;
            failed(&e);
        }
        self.checkpoint.counts.flushes += 1;
        self.save()
    }

    fn save(&mut self) -> Result<(), PipelineError> {
        let prov_path = self.spec.state_dir.join(PROVENANCE);
        let prov_len = match &self.gate.provenance {
            Some(log) => {
                let f = log
                    .lock()
                    .map_err(|_| PipelineError::State("provenance log lock poisoned".into()))?;
                f.sync_data()
                    .map_err(|e| state_err("cannot sync", &prov_path, e))?;
                f.metadata()
                    .map_err(|e| state_err("cannot stat", &prov_path, e))?
                    .len()
            }
            None => 0,
        };
        let mut files = BTreeMap::new();
        for p in &self.files {
            let len = std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
            if let Ok(f) = std::fs::File::open(p) {
                f.sync_data().map_err(|e| state_err("cannot sync", p, e))?;
            }
            files.insert(p.clone(), len);
        }
        let mut counts = self.checkpoint.counts.clone();
        counts.outputs += self.gate.outputs.swap(0, Ordering::Relaxed);
        counts.already_stored += self.gate.already.swap(0, Ordering::Relaxed);
        let cp = Checkpoint {
            plan_hash: self.checkpoint.plan_hash.clone(),
            position: self.position.clone(),
            windows: self.set.save_state()?,
            files,
            provenance: prov_len,
            counts,
        };
        let path = self.spec.state_dir.join(CHECKPOINT);
        let tmp = self.spec.state_dir.join(format!("{CHECKPOINT}.new"));
        let bytes = serde_json::to_vec(&cp).map_err(|e| state_err("cannot encode", &path, e))?;
        let mut f = std::fs::File::create(&tmp).map_err(|e| state_err("cannot create", &tmp, e))?;
        f.write_all(&bytes)
            .and_then(|_| f.sync_all())
            .map_err(|e| state_err("cannot write", &tmp, e))?;
        std::fs::rename(&tmp, &path).map_err(|e| state_err("cannot rename", &tmp, e))?;
        if let Ok(d) = std::fs::File::open(&self.spec.state_dir) {
            let _ = d.sync_all();
        }
        self.checkpoint = cp;
        Ok(())
    }
}

pub(crate) fn hex_sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}
