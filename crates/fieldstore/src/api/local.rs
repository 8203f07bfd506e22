//! The `local` frontend: a schema, a set of roots and the toc backend on this machine.

use std::collections::{HashMap, HashSet, VecDeque};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::element::{
    AxesMap, ControlAction, ControlIdentifier, ListElement, ListOptions, Location,
};
use super::error::ApiError;
use super::fdb::{Fdb, ListIter};
use crate::grib;
use crate::model::config::{LocalConfig, Root};
use crate::model::request::Request;
use crate::model::schema::{ExpandMode, Expansion, Schema, SplitKey};
use crate::model::types::Context;
use crate::model::{Key, ModelError};
use crate::storage::toc::maintenance;
use crate::storage::toc::{datum_key_of, DbReader, DbWriter};

/// Live indexes in a database past which a flush merges them.
const AUTO_COMPACT_INDEXES: usize = 32;

pub struct LocalFdb {
    config: LocalConfig,
    schema: Schema,
    cx: Context<'static>,
    writers: Mutex<HashMap<PathBuf, DbWriter>>,
    /// Each space's `regex`, compiled once (the config check already validated them).
    space_regex: Vec<regex::Regex>,
}

static RESOLVER: fn(&str) -> Option<String> = grib::params::resolver;

impl LocalFdb {
    pub fn new(config: LocalConfig) -> Result<LocalFdb, ApiError> {
        let schema = match &config.schema {
            Some(p) => Schema::from_file(p).map_err(ModelError::from)?,
            None => Schema::default_schema(),
        };
        let space_regex = config
            .spaces
            .iter()
            .map(|s| {
                regex::Regex::new(&s.regex)
                    .map_err(|e| ApiError::Config(format!("space regex '{}': {e}", s.regex)))
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok(LocalFdb {
            config,
            schema,
            cx: Context {
                params: Some(&RESOLVER),
                ..Context::default()
            },
            writers: Mutex::new(HashMap::new()),
            space_regex,
        })
    }

    pub fn schema(&self) -> &Schema {
        &self.schema
    }

    pub fn context(&self) -> &Context<'static> {
        &self.cx
    }

    /// The roots of the first space whose regex matches the database fingerprint.
    fn space_roots(&self, db: &Key) -> Vec<&Root> {
        let fp = db.fingerprint();
        for (s, re) in self.config.spaces.iter().zip(&self.space_regex) {
            if re.is_match(&fp) {
                return s.roots.iter().collect();
            }
        }
        Vec::new()
    }

    fn db_dir_name(db: &Key) -> String {
        db.fingerprint().replace('/', "_")
    }

    /// Where a database lives or will be created: an existing copy in a visitable root wins,
    /// else the first archive-enabled root.
    fn dir_for_archive(&self, db: &Key) -> Result<PathBuf, ApiError> {
        let roots = self.space_roots(db);
        let name = Self::db_dir_name(db);
        if let Some(r) = roots
            .iter()
            .find(|r| r.list && r.path.join(&name).join("toc").exists())
        {
            return Ok(r.path.join(&name));
        }
        match roots.iter().find(|r| r.archive) {
            Some(r) => {
                if !r.path.is_dir() {
                    std::fs::create_dir_all(&r.path).map_err(|e| {
                        ApiError::Invalid(format!(
                            "root {} does not exist and cannot be created: {e}",
                            r.path.display()
                        ))
                    })?;
                }
                Ok(r.path.join(&name))
            }
            None => Err(ApiError::NoWritableRoot {
                db: db.to_string(),
                roots: format!(
                    "[{}]",
                    roots
                        .iter()
                        .map(|r| r.path.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }),
        }
    }

    fn visit_roots(&self) -> impl Iterator<Item = &Root> {
        self.config
            .spaces
            .iter()
            .flat_map(|s| s.roots.iter())
            .filter(|r| r.list)
    }

    /// Every database directory under the visitable roots.
    fn databases(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for r in self.visit_roots() {
            if let Ok(rd) = std::fs::read_dir(&r.path) {
                let mut dirs: Vec<PathBuf> = rd
                    .filter_map(|e| e.ok())
                    .map(|e| e.path())
                    .filter(|p| p.join("toc").is_file())
                    .collect();
                dirs.sort();
                out.extend(dirs);
            }
        }
        out
    }

    fn find_db(&self, db: &Key) -> Option<PathBuf> {
        let name = Self::db_dir_name(db);
        self.visit_roots()
            .map(|r| r.path.join(&name))
            .find(|p| p.join("toc").is_file())
    }

    fn expand(&self, request: &Request, mode: ExpandMode) -> Result<Vec<Expansion>, ApiError> {
        let expanded = request.expand_ranges(&self.cx).map_err(ModelError::from)?;
        Ok(self
            .schema
            .expand(expanded.iter(), mode, &self.cx)
            .map_err(ModelError::from)?)
    }

    /// Everything matching a partial request, database by database.
    fn list_db(
        &self,
        dir: &Path,
        expansions: &[Expansion],
        options: ListOptions,
    ) -> Result<Vec<ListElement>, ApiError> {
        if maintenance::is_locked(dir, "list") {
            return Ok(Vec::new());
        }
        let reader = DbReader::open(dir)?;
        let db = reader.db_key().clone();
        let ex: Vec<&Expansion> = expansions
            .iter()
            .filter(|e| e.levels[0].matches(&db))
            .collect();
        if ex.is_empty() {
            return Ok(Vec::new());
        }
        let empty = Key::new();
        if options.depth <= 1 {
            return Ok(vec![ListElement {
                key: SplitKey {
                    db,
                    index: empty.clone(),
                    datum: empty,
                },
                location: None,
                timestamp: 0,
                masked: false,
            }]);
        }
        let mut out = Vec::new();
        let mut seen_index = HashSet::new();
        let mut seen: HashSet<(Key, String)> = HashSet::new();
        for ix in reader.indexes() {
            let ex_ix: Vec<&&Expansion> = ex
                .iter()
                .filter(|e| e.levels[1].matches(&ix.index_key))
                .collect();
            if ex_ix.is_empty() {
                continue;
            }
            if options.depth == 2 {
                if seen_index.insert(ix.index_key.clone()) {
                    out.push(ListElement {
                        key: SplitKey {
                            db: db.clone(),
                            index: ix.index_key.clone(),
                            datum: empty.clone(),
                        },
                        location: None,
                        timestamp: ix.timestamp,
                        masked: false,
                    });
                }
                continue;
            }
            // Skip the index without opening it when its value summary rules it out.
            let possible = ex_ix.iter().any(|e| {
                e.levels[2]
                    .keywords
                    .iter()
                    .all(|(k, v)| v.as_ref().is_none_or(|v| ix.may_contain(k, v)))
            });
            if !possible {
                continue;
            }
            let file = reader.load(ix)?;
            for e in &file.entries {
                let datum = datum_key_of(&file.datum_keywords, &e.values);
                if !ex_ix.iter().any(|x| x.levels[2].matches(&datum)) {
                    continue;
                }
                let masked = e.masked || !seen.insert((ix.index_key.clone(), e.values.clone()));
                if masked && !options.include_masked {
                    continue;
                }
                let data = file
                    .data_files
                    .get(e.file as usize)
                    .map(|f| dir.join(f))
                    .unwrap_or_default();
                out.push(ListElement {
                    key: SplitKey {
                        db: db.clone(),
                        index: ix.index_key.clone(),
                        datum,
                    },
                    location: Some(Location {
                        uri: format!("file://{}", data.display()),
                        offset: e.offset,
                        length: e.length,
                    }),
                    timestamp: ix.timestamp,
                    masked,
                });
            }
        }
        Ok(out)
    }

    /// Splits the key by the schema and appends the field to its database's writer.
    fn store(&self, key: &Key, strict: bool, data: &[u8]) -> Result<(), ApiError> {
        if !self.config.actions.archive {
            return Err(ApiError::Invalid(
                "archive is disabled by this config (archive: false / writable: false)".into(),
            ));
        }
        let split = self
            .schema
            .split(key, &self.cx, strict)
            .map_err(ModelError::from)?;
        let dir = self.dir_for_archive(&split.db)?;
        if maintenance::is_locked(&dir, "archive") {
            return Err(ApiError::Locked {
                db: dir.display().to_string(),
                action: "archive".into(),
            });
        }
        let mut writers = self
            .writers
            .lock()
            .map_err(|_| ApiError::Invalid("a writer thread panicked".into()))?;
        let w = match writers.get_mut(&dir) {
            Some(w) => w,
            None => {
                let w = DbWriter::open(&dir, &split.db, self.schema.text())?;
                writers.entry(dir.clone()).or_insert(w)
            }
        };
        w.archive(&split.index, &split.datum, data)?;
        Ok(())
    }

    /// Database directories whose key matches a partial request.
    fn matching_dbs(&self, request: &Request) -> Result<Vec<PathBuf>, ApiError> {
        if request.is_empty() {
            return Err(ApiError::Invalid("this needs a request naming the databases (e.g. class=od,expver=0001,stream=oper,date=20261122,time=1200)".into()));
        }
        let expansions = self.expand(request, ExpandMode::List)?;
        let mut out = Vec::new();
        for dir in self.databases() {
            let r = DbReader::open(&dir)?;
            if expansions.iter().any(|e| e.levels[0].matches(r.db_key())) {
                out.push(dir);
            }
        }
        Ok(out)
    }

    /// Why a request found nothing: for each keyword, the values asked for that do not exist.
    fn explain_nothing_impl(&self, request: &Request) -> String {
        let mut partial = Request::new(Some("list"));
        for kw in ["class", "expver", "stream"] {
            if let Some(v) = request.get(kw) {
                partial.set(kw, v.to_vec());
            }
        }
        let axes = match self.axes(&partial, 3) {
            Ok(a) => a,
            Err(e) => return format!("(and listing to explain why failed: {e})"),
        };
        if axes.is_empty() {
            return "no data at all under class/expver/stream of the request".into();
        }
        let expanded = request
            .expand_ranges(&self.cx)
            .unwrap_or_else(|_| request.clone());
        let mut lines = Vec::new();
        for (kw, values) in expanded.iter() {
            let Some(present) = axes.get(kw) else {
                if !self.schema.knows_keyword(kw) {
                    lines.push(format!("{kw}: not a keyword of the schema"));
                }
                continue;
            };
            let ty = self
                .schema
                .paths()
                .iter()
                .flat_map(|p| p.levels.iter().flatten())
                .find(|p| p.keyword == kw)
                .map(|p| p.ty);
            let missing: Vec<String> = values
                .iter()
                .filter(|v| {
                    let c = ty
                        .and_then(|t| t.canonical(kw, v, &self.cx).ok())
                        .unwrap_or_else(|| v.to_string());
                    !present.contains(&c)
                })
                .cloned()
                .collect();
            if !missing.is_empty() {
                let have: Vec<&String> = present.iter().take(20).collect();
                let more = if present.len() > 20 { ", ..." } else { "" };
                lines.push(format!(
                    "{kw}={} matched nothing; present: {}{more}",
                    missing.join("/"),
                    have.iter()
                        .map(|s| s.as_str())
                        .collect::<Vec<_>>()
                        .join("/")
                ));
            }
        }
        if lines.is_empty() {
            "every value exists on its own, but no field has this combination".into()
        } else {
            lines.join("\n")
        }
    }
}

/// Streams fields one at a time: memory holds one field, whatever the request's size.
struct FieldStream {
    locations: VecDeque<(PathBuf, u64, u64)>,
    current: std::io::Cursor<Vec<u8>>,
}

impl Read for FieldStream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        loop {
            let n = self.current.read(buf)?;
            if n > 0 || buf.is_empty() {
                return Ok(n);
            }
            let Some((path, offset, length)) = self.locations.pop_front() else {
                return Ok(0);
            };
            let bytes = DbReader::read(&path, offset, length).map_err(std::io::Error::other)?;
            self.current = std::io::Cursor::new(bytes);
        }
    }
}

impl Fdb for LocalFdb {
    fn name(&self) -> String {
        "local".into()
    }

    fn explain_nothing(&self, request: &Request) -> String {
        self.explain_nothing_impl(request)
    }

    fn archive(&self, key: Option<&Key>, data: &[u8]) -> Result<(), ApiError> {
        match key {
            Some(k) => {
                // A GRIB message carries its own keys: a given key must agree with them.
                if data.starts_with(b"GRIB") {
                    let found = grib::mars_keys(data)?;
                    for (kw, given) in k.iter() {
                        let Some(theirs) = found.get(kw) else {
                            continue;
                        };
                        let ty = self
                            .schema
                            .paths()
                            .iter()
                            .flat_map(|p| p.levels.iter().flatten())
                            .find(|p| p.keyword == kw)
                            .map(|p| p.ty);
                        let canon = |v: &str| {
                            ty.and_then(|t| t.canonical(kw, v, &self.cx).ok())
                                .unwrap_or_else(|| v.to_ascii_lowercase())
                        };
                        if canon(given) != canon(theirs) {
                            return Err(ApiError::KeyMismatch {
                                message: 1,
                                keyword: kw.to_string(),
                                given: given.to_string(),
                                found: theirs.to_string(),
                            });
                        }
                    }
                }
                self.store(k, true, data)
            }
            None => self.store(&grib::mars_keys(data)?, false, data),
        }
    }

    fn archive_grib(&self, mars_key: &Key, data: &[u8]) -> Result<(), ApiError> {
        self.store(mars_key, false, data)
    }

    fn flush(&self) -> Result<(), ApiError> {
        let mut writers = self
            .writers
            .lock()
            .map_err(|_| ApiError::Invalid("a writer thread panicked".into()))?;
        for w in writers.values_mut() {
            let dirty = w.is_dirty();
            w.flush()?;
            if !dirty {
                continue;
            }
            // Merge once a database has accumulated many indexes, so listing and one-field
            // retrieves do not slow down as flushes pile up.
            let live = DbReader::open(w.dir())?.indexes().len();
            if live > AUTO_COMPACT_INDEXES {
                maintenance::compact(w.dir())?;
            }
        }
        Ok(())
    }

    fn retrieve(&self, request: &Request) -> Result<Box<dyn Read + Send + '_>, ApiError> {
        if !self.config.actions.retrieve {
            return Err(ApiError::Invalid(
                "retrieve is disabled by this config".into(),
            ));
        }
        let mut locations = VecDeque::new();
        let mut readers: HashMap<Key, Option<DbReader>> = HashMap::new();
        let mut seen = HashSet::new();
        for e in self.expand(request, ExpandMode::Retrieve)? {
            let (Some(dbs), Some(ixs), Some(dts)) = (
                e.levels[0].candidates(),
                e.levels[1].candidates(),
                e.levels[2].candidates(),
            ) else {
                continue;
            };
            for db in &dbs {
                let reader = readers
                    .entry(db.clone())
                    .or_insert_with(|| self.find_db(db).and_then(|d| DbReader::open(&d).ok()));
                let Some(reader) = reader else { continue };
                if maintenance::is_locked(reader.dir(), "retrieve") {
                    return Err(ApiError::Locked {
                        db: reader.dir().display().to_string(),
                        action: "retrieve".into(),
                    });
                }
                for dt in &dts {
                    for ix in &ixs {
                        if let Some(loc) = reader.lookup(ix, dt)? {
                            // Several rules may name the same field: return it once.
                            if seen.insert((loc.0.clone(), loc.1)) {
                                locations.push_back(loc);
                            }
                        }
                    }
                }
            }
        }
        Ok(Box::new(FieldStream {
            locations,
            current: std::io::Cursor::new(Vec::new()),
        }))
    }

    fn list(&self, request: &Request, options: ListOptions) -> Result<ListIter<'_>, ApiError> {
        if !self.config.actions.list {
            return Err(ApiError::Invalid("list is disabled by this config".into()));
        }
        let expansions = self.expand(request, ExpandMode::List)?;
        let dbs = self.databases();
        let iter =
            dbs.into_iter()
                .flat_map(move |dir| match self.list_db(&dir, &expansions, options) {
                    Ok(v) => v.into_iter().map(Ok).collect::<Vec<_>>(),
                    Err(e) => vec![Err(e)],
                });
        Ok(Box::new(iter))
    }

    fn axes(&self, request: &Request, depth: u8) -> Result<AxesMap, ApiError> {
        let mut axes = AxesMap::new();
        for el in self.list(
            request,
            ListOptions {
                include_masked: false,
                depth: depth.clamp(1, 3),
            },
        )? {
            let el = el?;
            for k in [&el.key.db, &el.key.index, &el.key.datum] {
                for (kw, v) in k.iter() {
                    if !v.is_empty() {
                        axes.entry(kw.to_string())
                            .or_default()
                            .insert(v.to_string());
                    }
                }
            }
        }
        Ok(axes)
    }

    fn where_(&self, request: &Request) -> Result<Vec<String>, ApiError> {
        let expansions = self.expand(request, ExpandMode::List)?;
        let mut out = Vec::new();
        for dir in self.databases() {
            let r = DbReader::open(&dir)?;
            if expansions.iter().any(|e| e.levels[0].matches(r.db_key())) {
                out.push(dir.display().to_string());
            }
        }
        Ok(out)
    }

    fn wipe(&self, request: &Request, doit: bool) -> Result<Vec<String>, ApiError> {
        if !self.config.actions.wipe {
            return Err(ApiError::Invalid("wipe is disabled by this config".into()));
        }
        // Only whole databases: a request naming index or datum keywords would wipe more than asked.
        let db_keywords: HashSet<&str> = self
            .schema
            .paths()
            .iter()
            .flat_map(|p| p.levels[0].iter().map(|x| x.stored_keyword()))
            .collect();
        let extra: Vec<&str> = request
            .keywords()
            .filter(|k| !db_keywords.contains(k))
            .collect();
        if !extra.is_empty() {
            return Err(ApiError::Invalid(format!("wipe removes whole databases; the request also names {} (remove them, or use purge for replaced fields)", extra.join(", "))));
        }
        let mut out = Vec::new();
        for dir in self.matching_dbs(request)? {
            if maintenance::is_locked(&dir, "wipe") {
                return Err(ApiError::Locked {
                    db: dir.display().to_string(),
                    action: "wipe".into(),
                });
            }
            out.push(format!(
                "{} database {}",
                if doit { "wiped" } else { "would wipe" },
                dir.display()
            ));
            for f in maintenance::wipe(&dir, doit)? {
                out.push(format!("  {}", f.display()));
            }
        }
        if out.is_empty() {
            return Err(ApiError::NothingMatched(format!(
                "no database matches {request}"
            )));
        }
        Ok(out)
    }

    fn purge(&self, request: &Request, doit: bool) -> Result<Vec<String>, ApiError> {
        let mut out = Vec::new();
        for dir in self.matching_dbs(request)? {
            let r = maintenance::purge(&dir, doit)?;
            let verb = if doit { "removed" } else { "would remove" };
            out.push(format!(
                "{}: {} masked fields; {verb} {} index files and {} data files",
                dir.display(),
                r.masked_fields,
                r.indexes.len(),
                r.data_files.len()
            ));
            for f in r.indexes.iter().chain(&r.data_files) {
                out.push(format!("  {}", f.display()));
            }
        }
        Ok(out)
    }

    fn stats(&self, request: &Request) -> Result<Vec<String>, ApiError> {
        let mut out = Vec::new();
        let mut total = maintenance::DbStats::default();
        for dir in self.matching_dbs(request)? {
            let s = maintenance::stats(&dir)?;
            out.push(format!(
                "{}: fields {}, masked {}, field bytes {}, masked bytes {}, index files {}, data files {} ({} bytes), journal records {}",
                dir.display(), s.fields, s.masked, s.field_bytes, s.masked_bytes, s.index_files, s.data_files, s.data_bytes, s.journal_records
            ));
            total.fields += s.fields;
            total.masked += s.masked;
            total.field_bytes += s.field_bytes;
        }
        out.push(format!(
            "total: {} databases, {} fields ({} bytes), {} masked",
            out.len(),
            total.fields,
            total.field_bytes,
            total.masked
        ));
        Ok(out)
    }

    fn dump(&self, request: &Request) -> Result<Vec<String>, ApiError> {
        let mut out = Vec::new();
        for dir in self.matching_dbs(request)? {
            out.extend(maintenance::dump(&dir)?);
        }
        Ok(out)
    }

    fn control(
        &self,
        request: &Request,
        action: ControlAction,
        identifiers: &[ControlIdentifier],
    ) -> Result<Vec<String>, ApiError> {
        let mut out = Vec::new();
        for dir in self.matching_dbs(request)? {
            for id in identifiers {
                let p = maintenance::lock_path(&dir, id.name());
                match action {
                    ControlAction::Lock => std::fs::write(&p, b"").map_err(|e| {
                        ApiError::Invalid(format!("cannot create {}: {e}", p.display()))
                    })?,
                    ControlAction::Unlock if p.exists() => {
                        std::fs::remove_file(&p).map_err(|e| {
                            ApiError::Invalid(format!("cannot remove {}: {e}", p.display()))
                        })?
                    }
                    _ => {}
                }
            }
            let state: Vec<String> = ControlIdentifier::ALL
                .iter()
                .map(|id| {
                    format!(
                        "{}: {}",
                        id.name(),
                        if maintenance::is_locked(&dir, id.name()) {
                            "LOCKED"
                        } else {
                            "enabled"
                        }
                    )
                })
                .collect();
            out.push(format!("{} {}", dir.display(), state.join(", ")));
        }
        Ok(out)
    }

    fn compact(&self, request: &Request) -> Result<Vec<String>, ApiError> {
        let mut out = Vec::new();
        for dir in self.matching_dbs(request)? {
            let r = maintenance::compact(&dir)?;
            out.push(format!(
                "{}: merged {} indexes into {} ({} entries)",
                dir.display(),
                r.merged_indexes,
                r.new_indexes,
                r.entries
            ));
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fdb(dir: &Path) -> LocalFdb {
        let yaml = format!("spaces: [{{roots: [{{path: {}}}]}}]", dir.display());
        match crate::model::config::from_yaml_str(&yaml, "test").unwrap() {
            crate::model::config::FdbConfig::Local(l) => LocalFdb::new(l).unwrap(),
            other => panic!("expected a local config, got {other:?}"),
        }
    }

    #[test]
    fn explicit_keys_must_agree_with_the_grib_and_be_canonical() {
        let d = tempfile::tempdir().unwrap();
        let f = fdb(d.path());
        let keys = [
            ("class", "od"),
            ("stream", "oper"),
            ("type", "fc"),
            ("expver", "0001"),
            ("date", "20261122"),
            ("time", "1200"),
            ("step", "6"),
            ("levtype", "pl"),
            ("levelist", "500"),
            ("param", "130"),
        ];
        let msg = grib::sample::make_field(&keys, 100, 1).unwrap();
        let good = Key::parse("class=od,expver=0001,stream=oper,date=20261122,time=1200,domain=g,type=fc,levtype=pl,step=6,levelist=500,param=130").unwrap();
        f.archive(Some(&good), &msg).unwrap();
        let wrong = good.with("step", "12");
        let e = f.archive(Some(&wrong), &msg).unwrap_err().to_string();
        assert!(e.contains("step=12 given, the message has step=6"), "{e}");
        let e = f
            .archive(Some(&good.with("expver", "1")), &msg)
            .unwrap_err()
            .to_string();
        assert!(e.contains("expecting expver=0001"), "{e}");
        f.flush().unwrap();
        let req = crate::model::request::parse_request("class=od,expver=0001").unwrap();
        assert_eq!(f.list(&req, ListOptions::default()).unwrap().count(), 1);
    }
}
