//! The FDB5 schema language: which keywords name a database, an index and a datum.
//!
//! A schema is a list of three-level rules `[ db-keys [ index-keys [ datum-keys ] ] ]`. On archive
//! the first rule matching the whole key decides the split; on retrieve and list every matching rule
//! is expanded. See `docs/schema.md` for the language.

use std::collections::{BTreeSet, HashMap, HashSet};
use std::fmt;
use std::path::Path;
use std::sync::Arc;

use super::key::{Atom, Key};
use super::types::{Context, KeyType, TypeError};

/// The schema fieldstore uses when the config names none.
pub(crate) const DEFAULT_SCHEMA: &str = include_str!("default-schema");

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("{origin}:{line}:{column}: {message}\n{snippet}")]
    Parse {
        origin: String,
        line: usize,
        column: usize,
        message: String,
        snippet: String,
    },
    #[error("cannot read schema {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("no schema rule matches {key}{hint}")]
    NoRule { key: Key, hint: String },
    #[error("keywords not used by the schema rule at line {line} for {key}: {unused} (a field with keywords the schema ignores could never be retrieved by them)")]
    KeywordsNotUsed {
        key: Key,
        unused: String,
        line: usize,
    },
    #[error("keyword{s} {missing} required by the schema rule at line {line} missing from {key}", s = if missing.contains(',') { "s" } else { "" })]
    MissingKeywords {
        key: Key,
        missing: String,
        line: usize,
    },
    #[error("{keyword}={found} is not in canonical form: expecting {keyword}={expecting}")]
    NotCanonical {
        keyword: String,
        found: String,
        expecting: String,
    },
    #[error("unknown keyword{plural} in request: {names} (the schema names no such keyword)")]
    UnknownKeyword { names: String, plural: &'static str },
    #[error(transparent)]
    Type(#[from] TypeError),
}

/// How a predicate constrains its keyword.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Matcher {
    /// `kw`: required, any value.
    Any,
    /// `kw=a/b`: required, one of these values.
    Values(Vec<String>),
    /// `kw=!a/b`: required, none of these values.
    Exclude(Vec<String>),
    /// `kw?` or `kw?default`: may be absent, then takes the default (possibly empty).
    Optional(String),
    /// `kw-`: consumed but not indexed: stored with an empty value.
    Ignore,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Predicate {
    pub keyword: Atom,
    pub ty: KeyType,
    pub matcher: Matcher,
}

impl Predicate {
    /// The keyword the value is stored under (`date: Month` stores `month`).
    pub fn stored_keyword(&self) -> &str {
        self.ty.stored_keyword(&self.keyword)
    }
}

/// One path through the rule tree: the three levels FDB5 splits a key into.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RulePath {
    /// 1-based line of the database rule, for messages.
    pub line: usize,
    pub levels: [Vec<Predicate>; 3],
}

/// A field key split into its database, index and datum keys.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct SplitKey {
    pub db: Key,
    pub index: Key,
    pub datum: Key,
}

impl SplitKey {
    /// FDB5's porcelain form `{db}{index}{datum}`. Absent optional keywords (empty values) are
    /// left out, as FDB5 prints them.
    pub fn porcelain(&self) -> String {
        let mut s = String::with_capacity(160);
        for k in [&self.db, &self.index, &self.datum] {
            s.push('{');
            let mut first = true;
            for (kw, v) in k.iter() {
                if v.is_empty() {
                    continue;
                }
                if !first {
                    s.push(',');
                }
                first = false;
                s.push_str(kw);
                s.push('=');
                s.push_str(v);
            }
            s.push('}');
        }
        s
    }

    /// All three keys as one.
    pub fn combined(&self) -> Key {
        self.db.join(&self.index).join(&self.datum)
    }
}

impl fmt::Display for SplitKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.porcelain())
    }
}

/// What a request asks of one level: for each keyword of the rule, the canonical values wanted
/// (`None`: any value, only in list mode).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LevelSelection {
    pub keywords: Vec<(Atom, Option<Vec<String>>)>,
}

impl LevelSelection {
    /// [`matches`](Self::matches) for a key of this very rule (exactly its keywords): a
    /// database of another rule is not named by it, though the values it shares agree (a
    /// climatology rule without `date` would otherwise take every database of the class).
    pub fn matches_exactly(&self, key: &Key) -> bool {
        key.len() == self.keywords.len()
            && self.keywords.iter().all(|(kw, _)| key.contains(kw))
            && self.matches(key)
    }

    pub fn matches(&self, key: &Key) -> bool {
        self.keywords.iter().all(|(kw, vals)| match vals {
            None => true,
            Some(vals) => {
                let v = key.get(kw).unwrap_or("");
                vals.iter().any(|x| x == v)
            }
        })
    }

    /// How many keys [`candidates`](Self::candidates) would make (saturating), without making
    /// them; `None` when a keyword takes any value. Retrieve decides by this whether to enumerate
    /// the keys or to walk what exists, since the product of a few long lists is astronomically
    /// large while each list is small.
    pub fn count(&self) -> Option<u64> {
        self.keywords.iter().try_fold(1u64, |n, (_, vals)| {
            let len = u64::try_from(vals.as_ref()?.len()).unwrap_or(u64::MAX);
            Some(n.saturating_mul(len))
        })
    }

    /// Every key this selection names, when all values are given (retrieve); `None` otherwise.
    /// Materialises the cartesian product: callers check [`count`](Self::count) first.
    pub fn candidates(&self) -> Option<Vec<Key>> {
        let mut out = vec![Vec::<(Atom, Atom)>::new()];
        for (kw, vals) in &self.keywords {
            let vals = vals.as_ref()?;
            let mut next = Vec::with_capacity(out.len() * vals.len());
            for prefix in &out {
                for v in vals {
                    let mut p = prefix.clone();
                    p.push((kw.clone(), Atom::from(v.as_str())));
                    next.push(p);
                }
            }
            out = next;
        }
        Some(out.into_iter().map(Key::from_pairs).collect())
    }
}

/// A [`LevelSelection`] prepared for testing many existing keys: each keyword's values hashed to
/// their place in the request, so that matches can be put back in the request's order (the
/// order enumerating the candidates would give) without enumerating them.
#[derive(Debug, Clone)]
pub struct LevelMatcher {
    keywords: Vec<(Atom, Option<HashMap<String, u32>>)>,
}

impl LevelMatcher {
    pub fn new(selection: &LevelSelection) -> Self {
        let keywords = selection
            .keywords
            .iter()
            .map(|(kw, vals)| {
                let places = vals.as_ref().map(|vals| {
                    let mut m = HashMap::with_capacity(vals.len());
                    for (i, v) in vals.iter().enumerate() {
                        m.entry(v.clone())
                            .or_insert(u32::try_from(i).unwrap_or(u32::MAX));
                    }
                    m
                });
                (kw.clone(), places)
            })
            .collect();
        LevelMatcher { keywords }
    }

    /// [`LevelSelection::matches`] by hash rather than by scanning each keyword's values: `list`
    /// tests every entry of a database against requests of up to a million values.
    pub fn matches(&self, key: &Key) -> bool {
        self.matches_with(|kw| key.get(kw))
    }

    /// [`LevelMatcher::matches`] for a key given by how to get each keyword's value.
    pub fn matches_with<'a>(&self, get: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.keywords.iter().all(|(kw, places)| match places {
            None => true,
            Some(m) => m.contains_key(get(kw).unwrap_or("")),
        })
    }

    /// Whether every key matches (no keyword is restricted).
    pub fn matches_all(&self) -> bool {
        self.keywords.iter().all(|(_, places)| places.is_none())
    }

    /// For a key with exactly this level's keywords and a wanted value for each, the place of each
    /// value in the request (0 for wildcards); `None` when the key is not one the selection
    /// names. Exactly the keywords, as a catalogue lookup of a candidate key would: a key of
    /// another rule (another datum keyword set) is not this selection's field.
    pub fn position(&self, key: &Key) -> Option<Vec<u32>> {
        if key.len() != self.keywords.len() {
            return None;
        }
        self.keywords
            .iter()
            .map(|(kw, places)| {
                let v = key.get(kw)?;
                match places {
                    None => Some(0),
                    Some(m) => m.get(v).copied(),
                }
            })
            .collect()
    }
}

/// A request expanded against one rule path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Expansion {
    pub line: usize,
    pub levels: [LevelSelection; 3],
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExpandMode {
    /// Every non-optional keyword must be given; an absent optional keyword means its default.
    Retrieve,
    /// Absent keywords are wildcards.
    List,
}

/// A parsed schema. Cloning is cheap (the rules are shared): every catalogue, reader and
/// frontend holds one, and a fresh `read` process cloned ECMWF's rules several times.
#[derive(Debug, Clone)]
pub struct Schema {
    origin: String,
    rules: Arc<Rules>,
}

#[derive(Debug)]
struct Rules {
    text: String,
    paths: Vec<RulePath>,
    keywords: BTreeSet<String>,
    /// Each path's keywords (as named and as stored) as a bitset over `keyword_bits`, so
    /// `expand` passes over the rules that cannot take a request's keywords without walking
    /// their predicates: ECMWF's schema has hundreds of paths, and a retrieve of one field
    /// spent most of its time there.
    path_masks: Vec<Vec<u64>>,
    keyword_bits: HashMap<String, usize>,
    /// Each path's predicates (levels in order) as the bits of their keyword as named and as
    /// stored, so `expand` finds a predicate's request values by index rather than by hashing.
    path_bits: Vec<Vec<(usize, usize)>>,
}

/// Sets bit `i` of a bitset of 64-bit words.
fn set_bit(mask: &mut [u64], i: usize) {
    if let Some(w) = mask.get_mut(i / 64) {
        *w |= 1 << (i % 64);
    }
}

/// Schemas parsed in this process, by text: a database's own copy of the schema (FDB5 keeps
/// one) is usually the configured schema's text again, and parsing ECMWF's took milliseconds of
/// a one-field retrieve.
static PARSED: std::sync::Mutex<Vec<Schema>> = std::sync::Mutex::new(Vec::new());
/// How many texts are remembered.
const PARSED_KEPT: usize = 8;

impl Schema {
    pub fn parse(text: &str, origin: &str) -> Result<Schema, SchemaError> {
        if let Ok(seen) = PARSED.lock() {
            if let Some(s) = seen.iter().find(|s| s.rules.text == text) {
                let mut s = s.clone();
                s.origin = origin.to_string();
                return Ok(s);
            }
        }
        let parsed = Self::parse_text(text, origin)?;
        if let Ok(mut seen) = PARSED.lock() {
            if seen.len() >= PARSED_KEPT {
                seen.remove(0);
            }
            seen.push(parsed.clone());
        }
        Ok(parsed)
    }

    fn parse_text(text: &str, origin: &str) -> Result<Schema, SchemaError> {
        let paths = Parser::new(text, origin).parse()?;
        let keywords = paths
            .iter()
            .flat_map(|p| p.levels.iter().flatten())
            .flat_map(|p| [p.keyword.to_string(), p.stored_keyword().to_string()])
            .collect::<BTreeSet<String>>();
        let keyword_bits: HashMap<String, usize> = keywords
            .iter()
            .enumerate()
            .map(|(i, k)| (k.clone(), i))
            .collect();
        let words = keywords.len().div_ceil(64);
        let bit = |k: &str| keyword_bits.get(k).copied().unwrap_or(usize::MAX);
        let path_bits = paths
            .iter()
            .map(|path| {
                path.levels
                    .iter()
                    .flatten()
                    .map(|p| (bit(&p.keyword), bit(p.stored_keyword())))
                    .collect()
            })
            .collect();
        let path_masks = paths
            .iter()
            .map(|path| {
                let mut mask = vec![0u64; words];
                for p in path.levels.iter().flatten() {
                    for k in [p.keyword.as_str(), p.stored_keyword()] {
                        if let Some(&i) = keyword_bits.get(k) {
                            set_bit(&mut mask, i);
                        }
                    }
                }
                mask
            })
            .collect();
        Ok(Schema {
            origin: origin.to_string(),
            rules: Arc::new(Rules {
                text: text.to_string(),
                paths,
                keywords,
                path_masks,
                keyword_bits,
                path_bits,
            }),
        })
    }

    pub fn from_file(path: &Path) -> Result<Schema, SchemaError> {
        let text = std::fs::read_to_string(path).map_err(|e| SchemaError::Read {
            path: path.display().to_string(),
            reason: e.to_string(),
        })?;
        Schema::parse(&text, &path.display().to_string())
    }

    /// The built-in schema's text, as `schema show` prints it: a base for tests to damage.
    pub fn default_schema_text() -> &'static str {
        DEFAULT_SCHEMA
    }

    pub fn default_schema() -> Schema {
        match Schema::parse(DEFAULT_SCHEMA, "<built-in default schema>") {
            Ok(s) => s,
            // The built-in text is tested; this is a build defect, not a user error.
            Err(e) => panic!("built-in default schema does not parse: {e}"),
        }
    }

    pub fn origin(&self) -> &str {
        &self.origin
    }

    pub fn text(&self) -> &str {
        &self.rules.text
    }

    pub fn paths(&self) -> &[RulePath] {
        &self.rules.paths
    }

    pub fn knows_keyword(&self, kw: &str) -> bool {
        self.rules.keywords.contains(kw)
    }

    /// Splits a field key for archiving: the first rule path matching the whole key wins, and every
    /// keyword of the key must be used by it. `strict` (an explicit user key) also refuses values
    /// not already in canonical form, rather than storing something other than was asked.
    pub fn split(&self, key: &Key, cx: &Context, strict: bool) -> Result<SplitKey, SchemaError> {
        match self.split_paths(key, cx, strict, true) {
            Some(r) => r,
            // Paths were passed over and none matched: which error to report depends on the type
            // errors those paths would have met first, so they are all walked again.
            None => self
                .split_paths(key, cx, strict, false)
                .unwrap_or_else(|| Err(self.no_rule(key))),
        }
    }

    fn no_rule(&self, key: &Key) -> SchemaError {
        SchemaError::NoRule {
            key: key.clone(),
            hint: self.no_rule_hint(key),
        }
    }

    /// [`split`](Self::split)'s walk. With `pass_over`, a path [`hopeless`] for the key is not
    /// walked: archiving field by field spent most of its time walking the dozen paths before
    /// the matching one. `None` when paths were passed over and none matched.
    fn split_paths(
        &self,
        key: &Key,
        cx: &Context,
        strict: bool,
        pass_over: bool,
    ) -> Option<Result<SplitKey, SchemaError>> {
        let mut passed_over = false;
        let mut first_type_error: Option<TypeError> = None;
        // The key's values by keyword bit, so each predicate finds its value by index.
        let mut values: Vec<Option<&str>> = vec![None; self.rules.keywords.len()];
        for (k, v) in key.iter() {
            if let Some(slot) = self
                .rules
                .keyword_bits
                .get(k)
                .and_then(|&i| values.get_mut(i))
            {
                slot.get_or_insert(v);
            }
        }
        let mut memo = Canonicals {
            done: vec![None; self.rules.keywords.len()],
        };
        // Reused from path to path: most paths are given up after a few keywords.
        let mut out: [Vec<(Atom, Atom)>; 3] = Default::default();
        for (path, bits) in self.rules.paths.iter().zip(&self.rules.path_bits) {
            if pass_over && hopeless(path, bits, &values, &mut memo, cx) {
                passed_over = true;
                continue;
            }
            let mut bits = bits.iter();
            out.iter_mut().for_each(Vec::clear);
            let mut ok = true;
            // Level by level, as FDB5: a value that does not fit skips the rule; a required
            // keyword missing from a level whose values all fit is an error, not a fall-through.
            'levels: for (level, preds) in path.levels.iter().enumerate() {
                let mut missing = Vec::new();
                for p in preds {
                    let bit = bits.next().map_or(usize::MAX, |b| b.0);
                    let value = values.get(bit).copied().flatten();
                    match match_archive(p, value, bit, cx, &mut memo) {
                        Ok(Match::Value(v)) => out[level].push((Atom::from(p.stored_keyword()), v)),
                        Ok(Match::Missing) => missing.push(p.keyword.as_str()),
                        Ok(Match::No) => {
                            ok = false;
                            break 'levels;
                        }
                        Err(e) => {
                            first_type_error.get_or_insert(e);
                            ok = false;
                            break 'levels;
                        }
                    }
                }
                if !missing.is_empty() {
                    return Some(Err(SchemaError::MissingKeywords {
                        key: key.clone(),
                        missing: missing.join(", "),
                        line: path.line,
                    }));
                }
            }
            if !ok {
                continue;
            }
            let used = |k: &str| path.levels.iter().flatten().any(|p| p.keyword == k);
            let unused: Vec<&str> = key.keywords().filter(|k| !used(k)).collect();
            if !unused.is_empty() {
                return Some(Err(SchemaError::KeywordsNotUsed {
                    key: key.clone(),
                    unused: format!("{{{}}}", unused.join(",")),
                    line: path.line,
                }));
            }
            if strict {
                for p in path.levels.iter().flatten() {
                    if let Some(v) = key.get(&p.keyword) {
                        if p.ty.requires_canonical_input() {
                            let c = match p.ty.canonical(&p.keyword, v, cx) {
                                Ok(c) => c,
                                Err(e) => return Some(Err(e.into())),
                            };
                            if c != v {
                                return Some(Err(SchemaError::NotCanonical {
                                    keyword: p.keyword.to_string(),
                                    found: v.to_string(),
                                    expecting: c,
                                }));
                            }
                        }
                    }
                }
            }
            let [db, index, datum] = out;
            return Some(Ok(SplitKey {
                db: Key::from_pairs(db),
                index: Key::from_pairs(index),
                datum: Key::from_pairs(datum),
            }));
        }
        if passed_over {
            return None;
        }
        Some(Err(match first_type_error {
            Some(e) => e.into(),
            None => self.no_rule(key),
        }))
    }

    /// Names what is missing for the rule that came closest, so the user can fix the key.
    fn no_rule_hint(&self, key: &Key) -> String {
        let mut best: Option<(usize, usize, Vec<String>)> = None;
        for path in &self.rules.paths {
            let mut missing = Vec::new();
            let mut matched = 0;
            for p in path.levels.iter().flatten() {
                match (&p.matcher, key.get(&p.keyword)) {
                    (Matcher::Optional(_) | Matcher::Ignore, _) => {}
                    (_, None) => missing.push(format!("'{}' missing", p.keyword)),
                    (Matcher::Values(vs), Some(v))
                        if !vs.iter().any(|x| x.eq_ignore_ascii_case(v)) =>
                    {
                        missing.push(format!("{}={} not in {}", p.keyword, v, vs.join("/")))
                    }
                    _ => matched += 1,
                }
            }
            if best.as_ref().is_none_or(|b| matched > b.1) {
                best = Some((path.line, matched, missing));
            }
        }
        match best {
            Some((line, _, missing)) if !missing.is_empty() => {
                format!(" (closest: rule at line {line}: {})", missing.join(", "))
            }
            _ => String::new(),
        }
    }

    /// Expands a request (keyword → values, as written) against every rule path. Values are
    /// canonicalised by each rule's types. A path naming fewer keywords than the request is skipped,
    /// because it could never hold a field carrying the extra keyword.
    pub fn expand<'r, I>(
        &self,
        request: I,
        mode: ExpandMode,
        cx: &Context,
    ) -> Result<Vec<Expansion>, SchemaError>
    where
        I: IntoIterator<Item = (&'r str, &'r [String])> + Clone,
    {
        let unknown: Vec<&str> = request
            .clone()
            .into_iter()
            .map(|(k, _)| k)
            .filter(|k| !self.rules.keywords.contains(*k))
            .collect();
        if !unknown.is_empty() {
            return Err(SchemaError::UnknownKeyword {
                plural: if unknown.len() > 1 { "s" } else { "" },
                names: unknown.join(", "),
            });
        }
        // The request's values by keyword bit (a keyword given twice: the last wins).
        let mut given: Vec<Option<&[String]>> = vec![None; self.rules.keywords.len()];
        let mut wanted = vec![0u64; self.rules.keywords.len().div_ceil(64)];
        for (k, vals) in request {
            if let Some(&i) = self.rules.keyword_bits.get(k) {
                given[i] = Some(vals);
                set_bit(&mut wanted, i);
            }
        }
        // Many paths share keywords and types: each keyword's values are made canonical (and
        // rid of duplicates, in order) once per call.
        let mut memo: Vec<(KeyType, usize, Vec<String>)> = Vec::new();
        let mut out: Vec<Expansion> = Vec::new();
        'paths: for ((path, names), bits) in self
            .rules
            .paths
            .iter()
            .zip(&self.rules.path_masks)
            .zip(&self.rules.path_bits)
        {
            // Every keyword of the request must be one the path names.
            if wanted.iter().zip(names).any(|(w, n)| w & !n != 0) {
                continue;
            }
            let mut levels: [LevelSelection; 3] = Default::default();
            let mut bits = bits.iter();
            for (level, preds) in path.levels.iter().enumerate() {
                for p in preds {
                    let (named, stored) = bits.next().copied().unwrap_or((usize::MAX, usize::MAX));
                    let vals = given
                        .get(named)
                        .copied()
                        .flatten()
                        .or_else(|| given.get(stored).copied().flatten());
                    let values = match vals {
                        Some(vals) if p.matcher == Matcher::Ignore => {
                            if vals.is_empty() {
                                continue 'paths;
                            }
                            Some(vec![String::new()])
                        }
                        Some(vals) => {
                            let at =
                                match memo.iter().position(|(t, b, _)| *t == p.ty && *b == named) {
                                    Some(at) => at,
                                    None => {
                                        let mut canon: Vec<String> = Vec::with_capacity(vals.len());
                                        // A set beside the list only for long lists (ranges): a
                                        // short one is searched, without allocating a set.
                                        let mut have = HashSet::new();
                                        for v in vals {
                                            let c = p.ty.canonical(&p.keyword, v, cx)?;
                                            let new = if vals.len() > 16 {
                                                have.insert(c.clone())
                                            } else {
                                                !canon.contains(&c)
                                            };
                                            if new {
                                                canon.push(c);
                                            }
                                        }
                                        memo.push((p.ty, named, canon));
                                        memo.len() - 1
                                    }
                                };
                            let canon: Vec<String> = memo[at]
                                .2
                                .iter()
                                .filter(|c| predicate_allows(p, c))
                                .cloned()
                                .collect();
                            if canon.is_empty() {
                                continue 'paths;
                            }
                            Some(canon)
                        }
                        None => match (&p.matcher, mode) {
                            (_, ExpandMode::List) => None,
                            (Matcher::Optional(d), ExpandMode::Retrieve) => {
                                let mut v = vec![d.clone()];
                                if !d.is_empty() {
                                    v.push(String::new());
                                }
                                Some(v)
                            }
                            (Matcher::Ignore, ExpandMode::Retrieve) => Some(vec![String::new()]),
                            (_, ExpandMode::Retrieve) => continue 'paths,
                        },
                    };
                    levels[level]
                        .keywords
                        .push((Atom::from(p.stored_keyword()), values));
                }
            }
            let e = Expansion {
                line: path.line,
                levels,
            };
            if !out.contains(&e) {
                out.push(e);
            }
        }
        Ok(out)
    }
}

fn predicate_allows(p: &Predicate, canonical: &str) -> bool {
    match &p.matcher {
        Matcher::Values(vs) => vs.iter().any(|x| x.eq_ignore_ascii_case(canonical)),
        Matcher::Exclude(vs) => !vs.iter().any(|x| x.eq_ignore_ascii_case(canonical)),
        _ => true,
    }
}

enum Match {
    Value(Atom),
    /// The keyword is required but absent.
    Missing,
    No,
}

/// One key's values made canonical, each once per [`Schema::split`]: the rule paths tried
/// before the one that matches test the same keywords again (with ECMWF's schema, a dozen
/// paths before `oper`'s), and archiving field by field paid for each of those again.
/// Whether walking `path` for an archive key would certainly give it up without an error: a
/// constrained keyword (`kw=a/b`, `kw=!a`) absent or with a value that does not fit, in a level
/// before any that lacks a required keyword. Decided from those keywords alone, building
/// nothing. (Type errors count as not fitting, as the walk skips on them too.)
fn hopeless(
    path: &RulePath,
    bits: &[(usize, usize)],
    values: &[Option<&str>],
    memo: &mut Canonicals,
    cx: &Context,
) -> bool {
    let mut bits = bits.iter();
    for preds in &path.levels {
        let mut missing = false;
        for p in preds {
            let bit = bits.next().map_or(usize::MAX, |b| b.0);
            let value = values.get(bit).copied().flatten();
            let fits = match (&p.matcher, value) {
                (Matcher::Values(_) | Matcher::Exclude(_), None) => false,
                (Matcher::Values(_) | Matcher::Exclude(_), Some(v)) => memo
                    .get(p, bit, v, cx)
                    .is_ok_and(|c| predicate_allows(p, &c)),
                (Matcher::Any, None) => {
                    missing = true;
                    true
                }
                _ => true,
            };
            if !fits {
                return true;
            }
        }
        if missing {
            return false;
        }
    }
    false
}

/// Indexed by keyword bit; a rule giving the keyword another type than the first asked for is
/// not remembered.
struct Canonicals {
    done: Vec<Option<(KeyType, Result<Atom, TypeError>)>>,
}

impl Canonicals {
    fn get(
        &mut self,
        p: &Predicate,
        bit: usize,
        value: &str,
        cx: &Context,
    ) -> Result<Atom, TypeError> {
        let slot = self.done.get_mut(bit);
        if let Some(Some((ty, r))) = &slot {
            if *ty == p.ty {
                return r.clone();
            }
        }
        let r = p.ty.canonical_atom(&p.keyword, value, cx);
        if let Some(slot @ None) = slot {
            *slot = Some((p.ty, r.clone()));
        }
        r
    }
}

/// The stored value of a predicate for an archive key, given the key's value for its keyword
/// (`bit` in the schema's keyword bitsets).
fn match_archive(
    p: &Predicate,
    value: Option<&str>,
    bit: usize,
    cx: &Context,
    memo: &mut Canonicals,
) -> Result<Match, TypeError> {
    match value {
        Some(_) if p.matcher == Matcher::Ignore => Ok(Match::Value(Atom::default())),
        Some(v) => {
            let c = memo.get(p, bit, v, cx)?;
            Ok(if predicate_allows(p, &c) {
                Match::Value(c)
            } else {
                Match::No
            })
        }
        None => Ok(match &p.matcher {
            Matcher::Optional(d) => Match::Value(Atom::from(d.as_str())),
            Matcher::Ignore => Match::Value(Atom::default()),
            Matcher::Values(_) | Matcher::Exclude(_) => Match::No,
            Matcher::Any => Match::Missing,
        }),
    }
}

/// A rule as parsed, before it is flattened into paths.
struct RawRule {
    line: usize,
    column: usize,
    predicates: Vec<(Atom, Option<KeyType>, Matcher)>,
    children: Vec<RawRule>,
}

struct Parser<'a> {
    text: &'a str,
    origin: &'a str,
    pos: usize,
    globals: HashMap<String, KeyType>,
    /// The last position a line number was asked for, and its line: rules are numbered in
    /// order, so counting on from there keeps parsing linear (counting from the start for each
    /// rule was a quarter of a one-field retrieve's time with ECMWF's schema).
    lines_seen: std::cell::Cell<(usize, usize)>,
}

const STOP: &[char] = &['/', '=', ',', ';', ':', '[', ']', '?', '#'];

impl<'a> Parser<'a> {
    fn new(text: &'a str, origin: &'a str) -> Self {
        Parser {
            text,
            origin,
            pos: 0,
            globals: HashMap::new(),
            lines_seen: std::cell::Cell::new((0, 1)),
        }
    }

    fn error_at(&self, pos: usize, message: impl Into<String>) -> SchemaError {
        let pos = pos.min(self.text.len());
        let before = &self.text[..pos];
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        let column = before[line_start..].chars().count() + 1;
        let line_text = self.text[line_start..].lines().next().unwrap_or("");
        SchemaError::Parse {
            origin: self.origin.to_string(),
            line,
            column,
            message: message.into(),
            snippet: format!("  {}\n  {}^", line_text, " ".repeat(column - 1)),
        }
    }

    fn line_col(&self, pos: usize) -> (usize, usize) {
        let pos = pos.min(self.text.len());
        let (from, line) = match self.lines_seen.get() {
            (seen, line) if seen <= pos => (seen, line),
            _ => (0, 1),
        };
        let Some(between) = self.text.get(from..pos) else {
            return match self.error_at(pos, "") {
                SchemaError::Parse { line, column, .. } => (line, column),
                _ => (0, 0),
            };
        };
        let line = line + between.matches('\n').count();
        self.lines_seen.set((pos, line));
        let before = &self.text[..pos];
        let line_start = before.rfind('\n').map_or(0, |i| i + 1);
        (line, before[line_start..].chars().count() + 1)
    }

    fn peek(&self) -> Option<char> {
        self.text[self.pos..].chars().next()
    }

    fn bump(&mut self) {
        if let Some(c) = self.peek() {
            self.pos += c.len_utf8();
        }
    }

    fn skip_ws(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_whitespace() {
                self.bump();
            } else if c == '#' {
                while let Some(c) = self.peek() {
                    if c == '\n' {
                        break;
                    }
                    self.bump();
                }
            } else {
                break;
            }
        }
    }

    /// Reads a word; `dash_stops` for keywords, where `-` marks an ignored keyword.
    fn word(&mut self, dash_stops: bool) -> &'a str {
        let start = self.pos;
        while let Some(c) = self.peek() {
            if c.is_whitespace() || STOP.contains(&c) || (dash_stops && c == '-') {
                break;
            }
            self.bump();
        }
        &self.text[start..self.pos]
    }

    fn expect(&mut self, ch: char, what: &str) -> Result<(), SchemaError> {
        self.skip_ws();
        if self.peek() == Some(ch) {
            self.bump();
            Ok(())
        } else {
            Err(self.error_at(self.pos, format!("expected '{ch}' {what}")))
        }
    }

    fn type_name(&mut self) -> Result<KeyType, SchemaError> {
        self.skip_ws();
        let at = self.pos;
        let name = self.word(false);
        if name.is_empty() {
            return Err(self.error_at(at, "expected a type name after ':'"));
        }
        name.parse::<KeyType>()
            .map_err(|e| self.error_at(at, e.to_string()))
    }

    fn parse(mut self) -> Result<Vec<RulePath>, SchemaError> {
        let mut rules = Vec::new();
        loop {
            self.skip_ws();
            match self.peek() {
                None => break,
                Some('[') => rules.push(self.rule()?),
                Some(c) if !STOP.contains(&c) && c != '-' => {
                    let at = self.pos;
                    let kw = self.word(true).to_ascii_lowercase();
                    self.expect(
                        ':',
                        &format!("after '{kw}' in a type declaration (keyword: Type;)"),
                    )?;
                    let ty = self.type_name()?;
                    self.expect(';', "at the end of a type declaration")?;
                    if self.globals.insert(kw.clone(), ty).is_some() {
                        return Err(self.error_at(at, format!("type of '{kw}' declared twice")));
                    }
                }
                Some(c) => {
                    return Err(self.error_at(
                        self.pos,
                        format!("unexpected '{c}': expected '[' or a type declaration"),
                    ))
                }
            }
        }
        if rules.is_empty() {
            return Err(self.error_at(self.pos, "the schema has no rules"));
        }
        let mut paths = Vec::new();
        for db in &rules {
            self.flatten(db, &mut paths)?;
        }
        Ok(paths)
    }

    fn rule(&mut self) -> Result<RawRule, SchemaError> {
        let open = self.pos;
        let (line, column) = self.line_col(open);
        self.bump(); // '['
        let mut rule = RawRule {
            line,
            column,
            predicates: Vec::new(),
            children: Vec::new(),
        };
        loop {
            self.skip_ws();
            match self.peek() {
                None => return Err(self.error_at(open, "unclosed '[': no matching ']'")),
                Some(']') => {
                    self.bump();
                    return Ok(rule);
                }
                Some('[') => rule.children.push(self.rule()?),
                Some(',') => self.bump(),
                Some(_) => {
                    let p = self.predicate()?;
                    if rule.predicates.iter().any(|(k, _, _)| *k == p.0) {
                        return Err(self.error_at(
                            self.pos,
                            format!("keyword '{}' appears twice in one rule", p.0),
                        ));
                    }
                    rule.predicates.push(p);
                }
            }
        }
    }

    fn predicate(&mut self) -> Result<(Atom, Option<KeyType>, Matcher), SchemaError> {
        let at = self.pos;
        let kw = self.word(true);
        if kw.is_empty() {
            let c = self.peek().unwrap_or(' ');
            return Err(self.error_at(at, format!("unexpected '{c}': expected a keyword")));
        }
        let kw = Atom::from(kw.to_ascii_lowercase());
        self.skip_ws();
        let mut ty = None;
        if self.peek() == Some(':') {
            self.bump();
            ty = Some(self.type_name()?);
            self.skip_ws();
        }
        let matcher = match self.peek() {
            Some('=') => {
                self.bump();
                self.skip_ws();
                let exclude = self.peek() == Some('!');
                if exclude {
                    self.bump();
                }
                let mut values = Vec::new();
                loop {
                    self.skip_ws();
                    let vat = self.pos;
                    let v = self.word(false);
                    if v.is_empty() {
                        return Err(self.error_at(vat, format!("expected a value for '{kw}'")));
                    }
                    values.push(v.to_string());
                    self.skip_ws();
                    if self.peek() == Some('/') {
                        self.bump();
                    } else {
                        break;
                    }
                }
                if exclude {
                    Matcher::Exclude(values)
                } else {
                    Matcher::Values(values)
                }
            }
            Some('?') => {
                self.bump();
                Matcher::Optional(self.word(false).to_string())
            }
            Some('-') => {
                self.bump();
                // An ignored keyword may carry a default; it is never stored either way.
                let _ = self.word(false);
                Matcher::Ignore
            }
            _ => Matcher::Any,
        };
        let ty = match (&matcher, ty) {
            (Matcher::Ignore, None) => Some(KeyType::Ignore),
            (_, t) => t,
        };
        Ok((kw, ty, matcher))
    }

    fn flatten(&self, db: &RawRule, out: &mut Vec<RulePath>) -> Result<(), SchemaError> {
        if db.children.is_empty() {
            return Err(self.rule_error(db, "database rule has no index rules: expected [ db-keys [ index-keys [ datum-keys ] ] ]"));
        }
        for index in &db.children {
            let datum = match index.children.as_slice() {
                [d] => d,
                [] => {
                    return Err(self.rule_error(
                        index,
                        "index rule has no datum rule: expected [ index-keys [ datum-keys ] ]",
                    ))
                }
                [_, second, ..] => {
                    return Err(
                        self.rule_error(second, "an index rule takes exactly one datum rule")
                    )
                }
            };
            if let Some(extra) = datum.children.first() {
                return Err(self.rule_error(extra, "rules nest at most three levels deep"));
            }
            let scopes = [db, index, datum];
            let mut levels: [Vec<Predicate>; 3] = Default::default();
            for (level, rule) in scopes.iter().enumerate() {
                for (kw, ty, matcher) in &rule.predicates {
                    // Inline types apply to their rule and its children, then global, then Default.
                    let resolved = ty
                        .or_else(|| {
                            scopes[..level].iter().rev().find_map(|r| {
                                r.predicates.iter().find(|p| p.0 == *kw).and_then(|p| p.1)
                            })
                        })
                        .or_else(|| self.globals.get(kw.as_str()).copied())
                        .unwrap_or(KeyType::Default);
                    levels[level].push(Predicate {
                        keyword: kw.clone(),
                        ty: resolved,
                        matcher: matcher.clone(),
                    });
                }
            }
            out.push(RulePath {
                line: db.line,
                levels,
            });
        }
        Ok(())
    }

    fn rule_error(&self, rule: &RawRule, msg: &str) -> SchemaError {
        let mut pos = 0;
        for (i, l) in self.text.split_inclusive('\n').enumerate() {
            if i + 1 == rule.line {
                pos += l.char_indices().nth(rule.column - 1).map_or(0, |(b, _)| b);
                break;
            }
            pos += l.len();
        }
        self.error_at(pos, msg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_database_of_another_rule_is_not_matched_exactly() {
        let db = Key::from_pairs([
            ("class", "od"),
            ("expver", "0001"),
            ("stream", "oper"),
            ("date", "20261123"),
        ]);
        let sel = |kws: &[(&str, Option<&str>)]| LevelSelection {
            keywords: kws
                .iter()
                .map(|(k, v)| (Atom::from(*k), v.map(|v| vec![v.to_string()])))
                .collect(),
        };
        let dated = sel(&[
            ("class", Some("od")),
            ("expver", None),
            ("stream", None),
            ("date", Some("20261123")),
        ]);
        assert!(dated.matches_exactly(&db));
        let other_day = sel(&[
            ("class", Some("od")),
            ("expver", None),
            ("stream", None),
            ("date", Some("20261122")),
        ]);
        assert!(!other_day.matches_exactly(&db));
        // A rule with `refdate` where this database has `date`: same length, not its rule.
        let refdate = sel(&[
            ("class", Some("od")),
            ("expver", None),
            ("stream", None),
            ("refdate", None),
        ]);
        assert!(refdate.matches(&db) && !refdate.matches_exactly(&db));
        let shorter = sel(&[("class", Some("od")), ("expver", None), ("stream", None)]);
        assert!(shorter.matches(&db) && !shorter.matches_exactly(&db));
    }

    const SMALL: &str = "
param: Param; step: Step; expver: Expver; time: Time; levelist: Double; date: Date;
# comment
[ class, expver, stream=oper/dcda, date, time, domain?g
    [ type=4i, levtype [ step, iteration, levelist, param ]]
    [ type, levtype [ step, levelist?, param ]]
]
[ class, expver, stream=supd, date, time, domain
    [ type, levtype, grid- [ step, levelist?, param ]]]
[ class, expver, stream=mnth, domain
    [ type=cl, levtype [ date: ClimateMonthly, time, levelist?, param ]]]
";

    fn cx() -> Context<'static> {
        Context::default()
    }

    fn split(s: &Schema, k: &str) -> Result<String, SchemaError> {
        s.split(&Key::parse(k).unwrap(), &cx(), false)
            .map(|k| k.porcelain())
    }

    #[test]
    fn splits_like_fdb5() {
        let s = Schema::parse(SMALL, "t").unwrap();
        assert_eq!(
            split(&s, "class=od,expver=0001,stream=oper,date=20190109,time=1200,domain=g,type=fc,levtype=pl,levelist=500,param=130,step=6").unwrap(),
            "{class=od,expver=0001,stream=oper,date=20190109,time=1200,domain=g}{type=fc,levtype=pl}{step=6,levelist=500,param=130}"
        );
        // domain absent: default g; levelist absent: left out.
        assert_eq!(
            split(&s, "class=od,expver=0001,stream=oper,date=20190109,time=1200,type=fc,levtype=sfc,param=167.128,step=0").unwrap(),
            "{class=od,expver=0001,stream=oper,date=20190109,time=1200,domain=g}{type=fc,levtype=sfc}{step=0,param=167}"
        );
        assert_eq!(
            split(&s, "class=od,expver=0001,stream=mnth,domain=g,type=cl,levtype=sfc,date=20190409,time=0000,param=167").unwrap(),
            "{class=od,expver=0001,stream=mnth,domain=g}{type=cl,levtype=sfc}{date=4,time=0000,param=167}"
        );
        let g = s
            .split(&Key::parse("class=ea,expver=0001,stream=supd,date=20190109,time=1200,domain=g,type=an,levtype=sfc,grid=o1280,param=167,step=0").unwrap(), &cx(), false)
            .unwrap();
        assert_eq!(g.index.get("grid"), Some(""));
    }

    #[test]
    fn archive_errors_name_the_problem() {
        let s = Schema::parse(SMALL, "t").unwrap();
        let e = split(&s, "class=od,expver=0001,stream=oper,date=20190109,time=1200,type=fc,levtype=sfc,param=167,step=0,foo=1").unwrap_err();
        assert!(e.to_string().contains("{foo}"), "{e}");
        let e = split(&s, "class=od,expver=0001,stream=zzzz,date=20190109,time=1200,type=fc,levtype=sfc,param=167,step=0").unwrap_err();
        assert!(matches!(e, SchemaError::NoRule { .. }), "{e}");
        let e = s
            .split(&Key::parse("class=od,expver=1,stream=oper,date=20190109,time=1200,type=fc,levtype=sfc,param=167,step=0").unwrap(), &cx(), true)
            .unwrap_err();
        assert_eq!(
            e.to_string(),
            "expver=1 is not in canonical form: expecting expver=0001"
        );
    }

    #[test]
    fn expansion_retrieve_and_list() {
        let s = Schema::parse(SMALL, "t").unwrap();
        let v = |x: &[&str]| x.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let req = vec![
            ("class", v(&["od"])),
            ("expver", v(&["1"])),
            ("stream", v(&["oper"])),
            ("date", v(&["20190109"])),
            ("time", v(&["12"])),
            ("type", v(&["fc"])),
            ("levtype", v(&["pl"])),
            ("step", v(&["6"])),
            ("levelist", v(&["500.0"])),
            ("param", v(&["130", "131"])),
        ];
        let it = req.iter().map(|(k, v)| (*k, v.as_slice()));
        let e = s.expand(it.clone(), ExpandMode::Retrieve, &cx()).unwrap();
        assert_eq!(e.len(), 1, "{e:?}");
        let db = e[0].levels[0].candidates().unwrap();
        assert_eq!(db.len(), 2); // domain g and empty
        assert_eq!(
            db[0].to_string(),
            "{class=od,expver=0001,stream=oper,date=20190109,time=1200,domain=g}"
        );
        assert_eq!(e[0].levels[2].candidates().unwrap().len(), 2);
        let part = [("class", v(&["od"])), ("expver", v(&["0001"]))];
        let e = s
            .expand(
                part.iter().map(|(k, v)| (*k, v.as_slice())),
                ExpandMode::List,
                &cx(),
            )
            .unwrap();
        assert_eq!(e.len(), 4);
        let e = s
            .expand([("foo", v(&["1"]).as_slice())], ExpandMode::List, &cx())
            .unwrap_err();
        assert!(e.to_string().contains("foo"));
    }

    #[test]
    fn parse_errors_have_positions() {
        for (text, needle) in [
            ("[ a, b [ c [ d ]]", "unclosed"),
            ("[ a [ b [ c ]]] x", "expected ':'"),
            ("a: Nope; [ a [ b [ c ]]]", "unknown key type 'Nope'"),
            ("[ a ]", "no index rules"),
            ("[ a [ b ]]", "no datum rule"),
            ("[ a [ b [ c [ d ]]]]", "three levels"),
            ("[ a=, b [ c [ d ]]]", "expected a value"),
            ("", "no rules"),
            ("[ a, a [ b [ c ]]]", "twice"),
        ] {
            let e = Schema::parse(text, "f").unwrap_err().to_string();
            assert!(e.contains(needle), "{text:?}: {e}");
            assert!(e.starts_with("f:"), "{e}");
        }
        let e = Schema::parse("\n\n  [ a [ b [ c ]] ] ]", "f")
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("f:3:20"), "{e}");
    }

    #[test]
    fn counts_without_enumerating() {
        let s = Schema::default_schema();
        let req = crate::model::request::parse_request(
            "class=od,expver=1,stream=enfo,date=20261122,time=12,type=pf,levtype=pl,param=130/131,step=0/to/3000,number=1/to/50,levelist=1/to/1000",
        )
        .unwrap()
        .expand_ranges(&cx())
        .unwrap();
        let e = s.expand(req.iter(), ExpandMode::Retrieve, &cx()).unwrap();
        let datum = e[0].levels[2].count();
        assert_eq!(datum, Some(251 * 50 * 1000 * 2));
        let m = LevelMatcher::new(&e[0].levels[2]);
        let key = Key::parse("step=24,number=2,levelist=500,param=131").unwrap();
        assert_eq!(m.position(&key), Some(vec![2, 1, 499, 1]));
        // Another rule's key (more keywords), or a value not asked for, is not matched.
        let other = Key::parse("step=24,number=2,levelist=500,param=131,iteration=1").unwrap();
        assert_eq!(m.position(&other), None);
        let not = Key::parse("step=6,number=2,levelist=500,param=131").unwrap();
        assert_eq!(m.position(&not), None);
        for k in [&key, &other, &not] {
            assert_eq!(m.matches(k), e[0].levels[2].matches(k), "{k}");
        }
        let wild = LevelSelection {
            keywords: vec![(Atom::from("step"), None)],
        };
        assert_eq!(wild.count(), None);
        let many = LevelSelection {
            keywords: (0..5)
                .map(|i| {
                    (
                        Atom::from(format!("k{i}")),
                        Some(vec![String::new(); 100_000]),
                    )
                })
                .collect(),
        };
        assert_eq!(many.count(), Some(u64::MAX));
    }

    proptest::proptest! {
        /// Any request, however large its lists and ranges, expands (or is refused) without
        /// panicking, and its size is computed without enumerating it.
        #[test]
        fn expansion_never_panics(
            params in proptest::collection::vec(
                (
                    proptest::sample::select(vec![
                        "class", "expver", "stream", "date", "time", "type", "levtype",
                        "step", "number", "levelist", "param", "domain", "hdate", "iteration",
                    ]),
                    proptest::collection::vec(
                        proptest::prop_oneof![
                            proptest::strategy::Just("to".to_string()),
                            proptest::strategy::Just("by".to_string()),
                            proptest::strategy::Just("all".to_string()),
                            "-?[0-9]{1,10}",
                            "[0-9]{1,3}[mhd]?",
                            "[a-z0-9.:-]{0,6}",
                        ],
                        1..6,
                    ),
                ),
                0..10,
            ),
            list in proptest::bool::ANY,
        ) {
            let s = Schema::default_schema();
            let mut r = crate::model::request::Request::new(Some("retrieve"));
            for (k, vs) in params {
                r.set(k, vs);
            }
            let Ok(x) = r.expand_ranges(&cx()) else { return Ok(()) };
            let mode = if list { ExpandMode::List } else { ExpandMode::Retrieve };
            if let Ok(es) = s.expand(x.iter(), mode, &cx()) {
                for e in &es {
                    for l in &e.levels {
                        let n = l.count();
                        if n.is_some_and(|n| n <= 10_000) {
                            proptest::prop_assert_eq!(
                                l.candidates().map(|c| c.len() as u64),
                                n
                            );
                        }
                        let _ = LevelMatcher::new(l).position(&Key::new());
                    }
                }
            }
        }
    }

    /// Passing over hopeless paths is only a shortcut: every key splits, or fails with the same
    /// error, as walking every path does.
    #[test]
    fn passing_over_paths_changes_no_split() {
        let ecmwf = include_str!("../../tests/fixtures/ecmwf-fdb5-schema");
        let schemas = [
            Schema::parse(SMALL, "t").unwrap(),
            Schema::parse(ecmwf, "ecmwf").unwrap(),
            Schema::default_schema(),
        ];
        let bases = [
            "class=od,expver=0001,stream=oper,date=20190109,time=1200,domain=g,type=fc,levtype=pl,levelist=500,param=130,step=6",
            "class=od,expver=1,stream=enfo,date=20190109,time=12,domain=g,type=pf,levtype=pl,levelist=500,param=t,step=6,number=3",
            "class=od,expver=0001,stream=oper,date=20190109,time=1200,type=4i,levtype=ml,levelist=1,param=130,step=0,iteration=2",
            "class=ti,expver=0001,stream=oper,date=20190109,time=1200,model=x,origin=ecmf,type=cf,levtype=sfc,param=167,step=6",
            "class=od,expver=0001,stream=mnth,domain=g,type=cl,levtype=sfc,date=20190409,time=0000,param=167",
            "class=od,expver=0001,stream=wave,date=20190109,time=1200,domain=g,type=fc,levtype=sfc,param=140229,step=6,frequency=1,direction=2",
        ];
        let edits: &[(&str, Option<&str>)] = &[
            ("stream", Some("supd")),
            ("stream", Some("xxxx")),
            ("stream", Some("OPER")),
            ("type", Some("im")),
            ("type", Some("4i")),
            ("date", Some("2019x")),
            ("step", Some("-1")),
            ("levelist", Some("abc")),
            ("param", Some("")),
            ("expver", Some("12345")),
            ("grid", Some("o1280")),
            ("foo", Some("bar")),
            ("domain", None),
            ("levtype", None),
            ("class", None),
            ("step", None),
            ("date", None),
        ];
        let mut keys = Vec::new();
        for b in bases {
            let base = Key::parse(b).unwrap();
            keys.push(base.clone());
            for (i, (kw, v)) in edits.iter().enumerate() {
                let pairs = |skip: &str| {
                    base.iter()
                        .filter(|(k, _)| *k != skip)
                        .map(|(k, v)| (k.to_string(), v.to_string()))
                        .collect::<Vec<_>>()
                };
                let mut one = pairs(kw);
                if let Some(v) = v {
                    one.push((kw.to_string(), v.to_string()));
                }
                keys.push(Key::from_pairs(one.clone()));
                // And two edits at once.
                let (kw2, v2) = edits[(i * 7 + 3) % edits.len()];
                one.retain(|(k, _)| k != kw2);
                if let Some(v2) = v2 {
                    one.push((kw2.to_string(), v2.to_string()));
                }
                keys.push(Key::from_pairs(one));
            }
        }
        let mut compared = 0;
        for s in &schemas {
            for k in &keys {
                for strict in [false, true] {
                    let walked = s
                        .split_paths(k, &cx(), strict, false)
                        .expect("a full walk decides");
                    assert_eq!(s.split(k, &cx(), strict), walked, "{k} (strict {strict})");
                    compared += 1;
                }
            }
        }
        assert!(compared > 600);
    }

    #[test]
    fn default_schema_parses() {
        let s = Schema::default_schema();
        assert!(s.paths().len() > 5);
    }
}
