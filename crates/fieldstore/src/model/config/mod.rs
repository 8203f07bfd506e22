//! FDB5-compatible YAML configuration: the typed tree frontends are built from, and how it is found.
//!
//! Every error names the YAML path (`spaces[0].roots[1].path`) and where the text came from,
//! because FDB5 users lose hours to configs that are silently ignored or half read.

mod describe;
pub use describe::{human_bytes, limits as describe_limits};
mod discover;
mod env;
mod lifecycle;
pub use lifecycle::{LifecycleAction, LifecycleConfig, LifecycleRule};
mod parse;

use std::path::PathBuf;

pub use discover::{
    discover, discover_from_process, embedded_default, ConfigSource, LoadedConfig, ENV_STEPS,
};
pub use env::{process_env, Env};
pub use parse::{
    from_file, from_file_with, from_yaml_str, from_yaml_str_with, parse_days, parse_selection,
    spaces_from_file,
};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("config {origin}: {path}{sep}{message}", sep = if path.is_empty() { "" } else { ": " })]
pub struct ConfigError {
    /// Where the YAML came from: a file, an environment variable.
    pub origin: String,
    /// The YAML path of the offending item, empty for the whole document.
    pub path: String,
    pub message: String,
}

/// One root directory of a space. `list`..`wipe` are resolved: an explicit per-action flag, else
/// `visit` (list, retrieve) or `writable` (archive, wipe).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Root {
    pub path: PathBuf,
    pub name: Option<String>,
    pub writable: bool,
    pub visit: bool,
    pub list: bool,
    pub retrieve: bool,
    pub archive: bool,
    pub wipe: bool,
    /// Tier limits: a new database goes elsewhere once the root holds this many bytes.
    pub capacity: Option<u64>,
    /// Tier limits: ... or once its file system is this full (percent, 1..=100).
    pub max_fill: Option<u8>,
    /// Tier limits: ... or when the database's `date` is more than this many days before today.
    pub max_age_days: Option<u32>,
    /// The on-disk format of databases created in this root (`format:` on the root, else at the
    /// top of the config); `None`: fieldstore's own. Existing databases keep theirs.
    pub format: Option<DbFormat>,
}

/// How a toc database is kept on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbFormat {
    /// fieldstore's own journal and indexes (docs/toc-format.md).
    Fieldstore,
    /// FDB5's toc, sub-tocs and B-tree indexes, which FDB5's programs read (docs/fdb5-format.md).
    Fdb5,
}

impl DbFormat {
    pub fn parse(s: &str) -> Option<DbFormat> {
        match s.trim().to_ascii_lowercase().as_str() {
            "fieldstore" => Some(DbFormat::Fieldstore),
            "fdb5" => Some(DbFormat::Fdb5),
            _ => None,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            DbFormat::Fieldstore => "fieldstore",
            DbFormat::Fdb5 => "fdb5",
        }
    }
}

impl Root {
    /// A root at `path` that takes every action and has no limits: a config's default.
    pub fn open_at(path: impl Into<std::path::PathBuf>) -> Root {
        Root {
            path: path.into(),
            name: None,
            writable: true,
            visit: true,
            list: true,
            retrieve: true,
            archive: true,
            wipe: true,
            capacity: None,
            max_fill: None,
            max_age_days: None,
            format: None,
        }
    }

    /// Whether any tier limit is set (then a space without a `handler` fills roots in order).
    pub fn has_limits(&self) -> bool {
        self.capacity.is_some() || self.max_fill.is_some() || self.max_age_days.is_some()
    }
}

/// Where a local config's spaces can be read again: the file and which local config in it
/// (depth first), so a root added to the file is used by running processes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpacesSource {
    pub file: PathBuf,
    pub local_index: usize,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Space {
    pub name: Option<String>,
    /// Matched (unanchored) against the database fingerprint `v1:v2:...`.
    pub regex: String,
    /// Root-choice policy for new databases (`Default`, `RoundRobin`, `Fill`, ...).
    pub handler: String,
    pub roots: Vec<Root>,
}

/// A space's regex, ready to match fingerprints. `.*` (every default config's) matches without
/// the regex engine: compiling it costs a fresh `read` process a tenth of its CPU.
#[derive(Debug, Clone)]
pub enum SpaceMatcher {
    All,
    Regex(regex::Regex),
}

impl SpaceMatcher {
    pub fn new(text: &str) -> Result<SpaceMatcher, regex::Error> {
        if matches!(text, "" | ".*") {
            return Ok(SpaceMatcher::All);
        }
        regex::Regex::new(text).map(SpaceMatcher::Regex)
    }

    pub fn is_match(&self, fingerprint: &str) -> bool {
        match self {
            SpaceMatcher::All => true,
            SpaceMatcher::Regex(r) => r.is_match(fingerprint),
        }
    }
}

/// Frontend-level switches after resolving `writable`/`visitable` against per-action flags.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Actions {
    pub list: bool,
    pub retrieve: bool,
    pub archive: bool,
    pub wipe: bool,
}

impl Default for Actions {
    fn default() -> Self {
        Actions {
            list: true,
            retrieve: true,
            archive: true,
            wipe: true,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalConfig {
    pub engine: String,
    pub store: String,
    /// `None`: fieldstore's built-in default schema.
    pub schema: Option<PathBuf>,
    pub spaces: Vec<Space>,
    pub writable: bool,
    pub visitable: bool,
    pub actions: Actions,
    /// Mode for created files (`permissions: "0644"`), read as octal like FDB5.
    pub permissions: Option<u32>,
    pub statistics: bool,
    /// What `~fdb` meant for this config, when the config set it.
    pub fdb_home: Option<PathBuf>,
    /// `engine: memory` only: its `memory:` section (defaults when absent).
    pub memory: Option<MemoryConfig>,
    /// Set when the config came from a file: the toc catalogue re-reads its spaces from there.
    pub spaces_source: Option<SpacesSource>,
    /// `engine: s3` or `store: s3`: the `s3:` section (required then, refused otherwise).
    pub s3: Option<S3Config>,
    /// `adopt: {s3: {...}}`: the server objects adopted where they lie are read from, when it
    /// is not the store's own (docs/adopt.md).
    pub adopt_s3: Option<AdoptS3Config>,
    /// `pipelines:`: MultIO plans run on this store's stream of flushed fields
    /// (`fieldstore pipeline follow`, docs/pipelines.md).
    pub pipelines: Vec<PipelineConfig>,
    /// `lifecycle:`: rules moving and wiping databases as they age (docs/lifecycle.md).
    pub lifecycle: Option<LifecycleConfig>,
    /// Not read from the file: the server identity databases created through this handle are
    /// recorded as made by ([`FdbConfig::acting_for`], docs/authorization.md).
    pub creator: Option<String>,
}

/// One entry of `pipelines:`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PipelineConfig {
    /// Unique among the config's pipelines: names its state directory.
    pub name: String,
    /// The MultIO plan file (relative to the config file's directory).
    pub plan: PathBuf,
    /// Which flushed fields feed it (a partial request; empty: all).
    pub request: String,
    /// Checkpoint and provenance log; `None`: `.pipelines/NAME` in the first root.
    pub state: Option<PathBuf>,
    /// Without a checkpoint, start with the fields stored already (`from: beginning`, the
    /// default) or with those flushed from then on (`from: now`).
    pub from_beginning: bool,
}

/// The `s3:` section: where an S3 catalogue or store keeps its objects (see docs/s3.md).
#[derive(Clone, PartialEq, Eq)]
pub struct S3Config {
    /// `http(s)://host:port`.
    pub endpoint: String,
    pub bucket: String,
    /// `None`: [`S3Config::DEFAULT_REGION`].
    pub region: Option<String>,
    /// Every key lives under it (`ops/`), so one bucket can hold several stores.
    pub prefix: Option<String>,
    /// Else `AWS_ACCESS_KEY_ID`, else the credentials file's profile.
    pub access_key_id: Option<String>,
    /// Else `AWS_SECRET_ACCESS_KEY`, else the credentials file's profile.
    pub secret_access_key: Option<String>,
    /// Section of `~/.aws/credentials` (else `AWS_PROFILE`, else `default`).
    pub profile: Option<String>,
    /// A server that ignores `If-None-Match: *` on PUT is refused unless this is set, because
    /// two writers could then overwrite each other's objects unnoticed.
    pub allow_unconditional_writes: bool,
    pub create_bucket: bool,
    /// Age before garbage or wiped objects are deleted: longer than any writer may take between
    /// writing an object and committing it.
    pub grace: std::time::Duration,
    /// PEM file of extra CA certificates for an `https` endpoint with a private CA (else
    /// `AWS_CA_BUNDLE`); trusted besides the built-in roots.
    pub ca_bundle: Option<PathBuf>,
}

impl std::fmt::Debug for S3Config {
    /// Never prints the secret key: configs end up in logs and error reports.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("S3Config")
            .field("endpoint", &self.endpoint)
            .field("bucket", &self.bucket)
            .field("region", &self.region)
            .field("prefix", &self.prefix)
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "<redacted>"),
            )
            .field("profile", &self.profile)
            .field(
                "allow_unconditional_writes",
                &self.allow_unconditional_writes,
            )
            .field("create_bucket", &self.create_bucket)
            .field("grace", &self.grace)
            .field("ca_bundle", &self.ca_bundle)
            .finish()
    }
}

impl S3Config {
    pub const DEFAULT_REGION: &'static str = "us-east-1";
    pub const DEFAULT_GRACE: std::time::Duration = std::time::Duration::from_secs(600);

    /// A section with the defaults for everything but where the server is.
    pub fn new(endpoint: impl Into<String>, bucket: impl Into<String>) -> S3Config {
        S3Config {
            endpoint: endpoint.into(),
            bucket: bucket.into(),
            region: None,
            prefix: None,
            access_key_id: None,
            secret_access_key: None,
            profile: None,
            allow_unconditional_writes: false,
            create_bucket: true,
            grace: Self::DEFAULT_GRACE,
            ca_bundle: None,
        }
    }
}

/// The `adopt: {s3: {...}}` section: the S3 server that `fieldstore adopt s3://BUCKET/KEY`
/// and every later read of such a field talk to. The bucket comes from each object's URI, so
/// there is none here; what is left unset comes from the environment as the AWS tools read it
/// (docs/adopt.md), so a user's existing AWS setup works without it.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct AdoptS3Config {
    /// Else `AWS_ENDPOINT_URL_S3`, else `AWS_ENDPOINT_URL`, else AWS's own for the region.
    pub endpoint: Option<String>,
    /// Else `AWS_REGION`, else `AWS_DEFAULT_REGION`, else [`S3Config::DEFAULT_REGION`].
    pub region: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    pub profile: Option<String>,
    pub ca_bundle: Option<PathBuf>,
}

impl std::fmt::Debug for AdoptS3Config {
    /// Never prints the secret key: configs end up in logs and error reports.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AdoptS3Config")
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("access_key_id", &self.access_key_id)
            .field(
                "secret_access_key",
                &self.secret_access_key.as_ref().map(|_| "<redacted>"),
            )
            .field("profile", &self.profile)
            .field("ca_bundle", &self.ca_bundle)
            .finish()
    }
}

/// The `memory:` section of an `engine: memory` config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryConfig {
    /// Handles of one process naming the same store share its data.
    pub name: Option<String>,
    /// Bytes of fields (plus a small per-field overhead) the store may hold.
    pub capacity: u64,
    /// Set by the parser for an unnamed store, unique to that parse: every handle opened from
    /// one parsed config (a server opens one per connection) shares one store, while configs
    /// parsed separately do not. `None`: each handle has a store of its own.
    pub instance: Option<u64>,
    /// What an archive that does not fit does: fail at once, or wait for space.
    pub when_full: WhenFull,
    /// `retain: {databases: N}`: keep the N newest databases, wiping the oldest when a new one
    /// is made, so an exchange of cycles runs unattended.
    pub retain_databases: Option<usize>,
}

/// `memory: {when_full: ...}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WhenFull {
    /// The archive fails with `full` (the default: a producer learns at once).
    Error,
    /// The archive waits up to `timeout` for a wipe, purge or retention to free space, then
    /// fails with `full`.
    Block { timeout: std::time::Duration },
}

impl Default for MemoryConfig {
    /// What `engine: memory` without a `memory:` section means; a store of its own per handle.
    fn default() -> MemoryConfig {
        MemoryConfig {
            name: None,
            capacity: MemoryConfig::DEFAULT_CAPACITY,
            instance: None,
            when_full: WhenFull::Error,
            retain_databases: None,
        }
    }
}

impl MemoryConfig {
    /// How long `when_full: block` waits when the config gives no `block_timeout`.
    pub const DEFAULT_BLOCK_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

    /// When the config sets no capacity: fixed rather than a share of RAM, so a store behaves
    /// the same on every machine.
    pub const DEFAULT_CAPACITY: u64 = 1 << 30;

    /// The name handles share the store under, if they share it.
    pub fn shared_name(&self) -> Option<String> {
        match (&self.name, self.instance) {
            (Some(n), _) => Some(n.clone()),
            (None, Some(i)) => Some(format!("unnamed-{i}")),
            (None, None) => None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SelectLane {
    /// `class=od,stream=oper/enfo`: values are unanchored regular expressions.
    pub select: String,
    pub excludes: Vec<String>,
    pub config: FdbConfig,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DistLane {
    /// From `id:` or `name:`, else the lane's index: how messages name the lane.
    pub id: String,
    /// What the rendezvous hash is seeded with: the lane's YAML printed as FDB5 (eckit) prints a
    /// configuration, because DistFDB seeds with that, so placements agree with FDB5's.
    pub hash_id: String,
    pub config: FdbConfig,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DistHash {
    /// FDB5's DistFDB: the full field key.
    Field,
    /// Keep each database on one lane.
    Database,
}

/// `tls:` of a remote config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteTls {
    /// PEM file of the CA certificate(s) that signed the server's certificate.
    pub ca: PathBuf,
    /// The name the server's certificate must carry (default: `host`).
    pub server_name: Option<String>,
    /// A client certificate (PEM chain) and its key, presented when the server asks: for
    /// servers that identify clients by certificate (docs/authorization.md).
    pub client: Option<(PathBuf, PathBuf)>,
}

// A config is parsed once per handle, so the size of its largest variant costs nothing, while
// boxing `Local` would burden every user of the tree.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FdbConfig {
    Local(LocalConfig),
    /// `type: select` (children under `fdbs:`) and `type: routing` (under `fdb:`).
    Select {
        schema: Option<PathBuf>,
        lanes: Vec<SelectLane>,
    },
    Dist {
        lanes: Vec<DistLane>,
        hash: DistHash,
    },
    Remote {
        host: String,
        port: u16,
        /// A server on this host, through its Unix socket (`fieldstore server --socket`):
        /// taken instead of `host:port`, and large fields are handed over in shared memory.
        socket: Option<PathBuf>,
        token: Option<String>,
        /// Connect with TLS, trusting these CA certificates.
        tls: Option<RemoteTls>,
    },
    /// Writes go to every child; `quorum` children must succeed (`None`: all).
    Mirror {
        children: Vec<FdbConfig>,
        quorum: Option<usize>,
    },
    /// Only keys matching `select` and no `excludes` expression reach the children.
    Filter {
        select: Option<String>,
        excludes: Vec<String>,
        children: Vec<FdbConfig>,
    },
    /// Every call to the children is counted, timed and logged; `report` is a file the summary
    /// is appended to when the store is closed.
    Diagnostics {
        report: Option<PathBuf>,
        children: Vec<FdbConfig>,
    },
}

impl FdbConfig {
    /// The same config, with every local store in it recording `creator` in the databases it
    /// creates: what a server with identities archives through.
    pub fn acting_for(&self, creator: &str) -> FdbConfig {
        let mut c = self.clone();
        c.set_creator(creator);
        c
    }

    fn set_creator(&mut self, creator: &str) {
        match self {
            FdbConfig::Local(l) => l.creator = Some(creator.to_string()),
            FdbConfig::Select { lanes, .. } => {
                lanes.iter_mut().for_each(|l| l.config.set_creator(creator))
            }
            FdbConfig::Dist { lanes, .. } => {
                lanes.iter_mut().for_each(|l| l.config.set_creator(creator))
            }
            // Another server records its own client's identity, not ours.
            FdbConfig::Remote { .. } => {}
            FdbConfig::Mirror { children, .. }
            | FdbConfig::Filter { children, .. }
            | FdbConfig::Diagnostics { children, .. } => {
                children.iter_mut().for_each(|c| c.set_creator(creator))
            }
        }
    }
}

/// `type:` values understood, in the order error messages list them.
pub(crate) const TYPES: &[&str] = &[
    "local",
    "catalogue",
    "select",
    "routing",
    "dist",
    "remote",
    "mirror",
    "filter",
    "diagnostics",
];

/// Root-choice handlers (FDB5's, plus `Fill`), so a typo is caught when the config is read.
pub const HANDLERS: &[&str] = &[
    "Default",
    "First",
    "Fill",
    "LeastUsed",
    "LeastUsedPercent",
    "RoundRobin",
    "Random",
    "PureRandom",
    "WeightedRandom",
    "WeightedRandomPercent",
];

/// FDB5 handlers fieldstore refuses by name (they need FDB5's site files or environment).
pub(crate) const UNSUPPORTED_HANDLERS: &[&str] = &["expver", "envvar"];

#[cfg(test)]
mod tests {
    use super::SpaceMatcher;

    #[test]
    fn a_space_regex_matches_as_the_regex_would() {
        for (re, fp, want) in [
            (".*", "od:0001:oper", true),
            ("", "od:0001:oper", true),
            ("od:.*", "od:0001:oper", true),
            ("od:.*", "rd:0001:oper", false),
            ("^rd", "od:rd", false),
            ("rd", "od:rd", true),
        ] {
            let m = SpaceMatcher::new(re).unwrap();
            assert_eq!(m.is_match(fp), want, "{re} on {fp}");
            assert_eq!(
                regex::Regex::new(re).unwrap().is_match(fp),
                want,
                "{re} on {fp}"
            );
        }
        assert!(matches!(SpaceMatcher::new(".*"), Ok(SpaceMatcher::All)));
        assert!(SpaceMatcher::new("(").is_err());
    }
}
