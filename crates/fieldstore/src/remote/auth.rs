//! Who a server's client is and what it may do: identities from a tokens file, their grants per
//! database pattern, and the FDB5 operation every protocol request counts as
//! (docs/authorization.md).

use std::collections::HashSet;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde::Deserialize;
use serde_saphyr::Spanned;
use sha2::{Digest, Sha256};

use super::protocol::MsgType;
use super::transport::PeerCertificate;
use crate::error_kind::ErrorKind;
use crate::model::request::Request;
use crate::model::Key;

/// The operations grants name, with FDB5's names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum AuthOp {
    List,
    Retrieve,
    Archive,
    Wipe,
    Control,
}

impl AuthOp {
    pub const ALL: [AuthOp; 5] = [
        AuthOp::List,
        AuthOp::Retrieve,
        AuthOp::Archive,
        AuthOp::Wipe,
        AuthOp::Control,
    ];

    pub fn name(self) -> &'static str {
        match self {
            AuthOp::List => "list",
            AuthOp::Retrieve => "retrieve",
            AuthOp::Archive => "archive",
            AuthOp::Wipe => "wipe",
            AuthOp::Control => "control",
        }
    }

    fn parse(s: &str) -> Option<AuthOp> {
        AuthOp::ALL.into_iter().find(|op| op.name() == s)
    }

    /// What a protocol request counts as; `None` for frames that are not requests. `control`
    /// with the `status` action only reads, and the server counts it as `list`.
    pub fn of(t: MsgType) -> Option<AuthOp> {
        Some(match t {
            MsgType::Axes
            | MsgType::Where
            | MsgType::Dump
            | MsgType::Stats
            | MsgType::List
            | MsgType::Explain
            | MsgType::Expand => AuthOp::List,
            MsgType::Retrieve | MsgType::Subscribe | MsgType::Extract => AuthOp::Retrieve,
            MsgType::Archive | MsgType::Flush => AuthOp::Archive,
            MsgType::Wipe | MsgType::Purge | MsgType::Compact => AuthOp::Wipe,
            MsgType::Control => AuthOp::Control,
            _ => return None,
        })
    }

    /// Operations that change or remove a database as a whole: only its creator or an
    /// operator may do them, whatever the grants say.
    pub fn needs_ownership(self) -> bool {
        matches!(self, AuthOp::Wipe | AuthOp::Control)
    }
}

impl fmt::Display for AuthOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A role: a fixed set of operations on every database.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// list and retrieve.
    Reader,
    /// list, retrieve and archive; wipe and control too, which ownership limits to the
    /// databases it created.
    Writer,
    /// Everything, on every database, whoever created it.
    Operator,
}

impl Role {
    fn parse(s: &str) -> Option<Role> {
        match s {
            "reader" => Some(Role::Reader),
            "writer" => Some(Role::Writer),
            "operator" => Some(Role::Operator),
            _ => None,
        }
    }

    fn allows(self, op: AuthOp) -> bool {
        match self {
            Role::Reader => matches!(op, AuthOp::List | AuthOp::Retrieve),
            Role::Writer => true,
            Role::Operator => true,
        }
    }
}

/// A MARS-like partial key (`class=od,expver=0001/0002`): a database matches when it has every
/// keyword named, with one of the values given. The empty pattern (`*`) matches every database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    parts: Vec<(String, Vec<String>)>,
}

impl Pattern {
    pub fn every() -> Pattern {
        Pattern { parts: Vec::new() }
    }

    pub fn parse(text: &str) -> Result<Pattern, String> {
        let text = text.trim();
        if text.is_empty() || text == "*" {
            return Ok(Pattern::every());
        }
        let mut parts: Vec<(String, Vec<String>)> = Vec::new();
        for item in text.split(',') {
            let Some((kw, values)) = item.split_once('=') else {
                return Err(format!(
                    "'{item}' is not keyword=value (patterns look like class=od,expver=0001/0002)"
                ));
            };
            let kw = kw.trim().to_ascii_lowercase();
            if kw.is_empty() || parts.iter().any(|(k, _)| *k == kw) {
                return Err(format!("keyword '{kw}' is empty or named twice"));
            }
            let values: Vec<String> = values.split('/').map(|v| v.trim().to_string()).collect();
            if values.iter().any(String::is_empty) {
                return Err(format!("an empty value for '{kw}'"));
            }
            parts.push((kw, values));
        }
        Ok(Pattern { parts })
    }

    pub fn is_every(&self) -> bool {
        self.parts.is_empty()
    }

    /// Whether a key (a database's, or a field's full key) is inside the pattern. A key that
    /// lacks a keyword the pattern names is outside it.
    pub fn matches(&self, key: &Key) -> bool {
        self.parts.iter().all(|(kw, values)| {
            key.get(kw)
                .is_some_and(|v| values.iter().any(|want| want.eq_ignore_ascii_case(v)))
        })
    }

    /// Whether some database a request could name is inside the pattern (a keyword the
    /// request leaves open may take any value).
    pub fn overlaps(&self, request: &Request) -> bool {
        self.parts.iter().all(|(kw, values)| match request.get(kw) {
            None => true,
            Some(asked) => asked.iter().any(|a| {
                a.eq_ignore_ascii_case("all")
                    || values.iter().any(|want| want.eq_ignore_ascii_case(a))
            }),
        })
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.parts.is_empty() {
            return f.write_str("*");
        }
        for (i, (kw, values)) in self.parts.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{kw}={}", values.join("/"))?;
        }
        Ok(())
    }
}

/// Some operations on the databases of some patterns.
#[derive(Debug, Clone)]
struct Grant {
    ops: Vec<AuthOp>,
    databases: Vec<Pattern>,
}

/// A client the server knows, and what it may do.
#[derive(Debug)]
pub struct Identity {
    pub name: String,
    /// SHA-256 of its token: what presented tokens are compared with (`None`: it proves itself
    /// with a certificate only).
    digest: Option<[u8; 32]>,
    /// The Common Name of the client certificates that prove this identity.
    pub certificate: Option<String>,
    role: Option<Role>,
    grants: Vec<Grant>,
    /// Whether databases it creates record its name (not for `--token` or an open server,
    /// whose one identity is everyone).
    pub records_creator: bool,
}

impl Identity {
    /// The one identity of a server with `--token` (named "token") or none ("anonymous"):
    /// every right, as before identities existed.
    pub fn everyone(name: &str) -> Identity {
        Identity {
            name: name.to_string(),
            digest: None,
            certificate: None,
            role: Some(Role::Operator),
            grants: Vec::new(),
            records_creator: false,
        }
    }

    pub fn is_operator(&self) -> bool {
        self.role == Some(Role::Operator)
    }

    /// Whether it may do `op` on the database (or field) with this key.
    pub fn may(&self, op: AuthOp, key: &Key) -> bool {
        self.role.is_some_and(|r| r.allows(op))
            || self
                .grants
                .iter()
                .any(|g| g.ops.contains(&op) && g.databases.iter().any(|p| p.matches(key)))
    }

    /// Whether it may do `op` on every database: then nothing needs filtering.
    pub fn may_everywhere(&self, op: AuthOp) -> bool {
        self.role.is_some_and(|r| r.allows(op))
            || self
                .grants
                .iter()
                .any(|g| g.ops.contains(&op) && g.databases.iter().any(Pattern::is_every))
    }

    /// Whether a request could reach some database it may do `op` on.
    pub fn may_reach(&self, op: AuthOp, request: &Request) -> bool {
        self.may_everywhere(op)
            || self
                .grants
                .iter()
                .any(|g| g.ops.contains(&op) && g.databases.iter().any(|p| p.overlaps(request)))
    }

    /// What its grants for `op` cover, for refusals: what to ask for, or where to go instead.
    pub fn grants_for(&self, op: AuthOp) -> String {
        let patterns: Vec<String> = self
            .grants
            .iter()
            .filter(|g| g.ops.contains(&op))
            .flat_map(|g| g.databases.iter().map(Pattern::to_string))
            .collect();
        if patterns.is_empty() {
            format!("it has no {op} grant")
        } else {
            format!("its {op} grants: {}", patterns.join("; "))
        }
    }

    /// Why it may not do `op` on a database with this creator, if it may not: grants first,
    /// then ownership for wipe and control.
    pub fn refusal(&self, op: AuthOp, db: &Key, creator: Option<&str>) -> Option<String> {
        let what = format!("identity '{}' may not {op} {}", self.name, key_text(db));
        if !self.may(op, db) {
            return Some(format!(
                "{what}: its grants do not cover it ({})",
                self.grants_for(op)
            ));
        }
        if op.needs_ownership() && !self.is_operator() && creator != Some(self.name.as_str()) {
            let by = match creator {
                Some(c) => format!("created by '{c}'"),
                None => "created outside this server's identities".to_string(),
            };
            return Some(format!("{what}: {by}; only its creator or an operator may"));
        }
        None
    }
}

/// A key as users write it in requests: `class=od,expver=0001`.
pub fn key_text(key: &Key) -> String {
    key.iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The identities of a tokens file.
#[derive(Debug)]
pub struct Tokens {
    identities: Vec<Arc<Identity>>,
}

impl Tokens {
    /// The identity whose token this is. Every identity is compared, each in constant time,
    /// so timing says neither which nor whether one matched.
    pub fn identify(&self, token: &str) -> Option<Arc<Identity>> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        let mut found = None;
        for id in &self.identities {
            if id.digest.is_some_and(|d| same_bytes(&digest, &d)) {
                found = Some(id.clone());
            }
        }
        found
    }

    /// The identity whose `certificate:` is the certificate's Common Name.
    pub fn identify_certificate(&self, cert: &PeerCertificate) -> Option<Arc<Identity>> {
        let cn = cert.common_name.as_deref()?;
        self.identities
            .iter()
            .find(|id| id.certificate.as_deref() == Some(cn))
            .cloned()
    }

    /// Who a client is, from what it presented at the handshake: a verified certificate, a
    /// token, or both (then both must name the same identity). The error says why not, for
    /// the client, and mentions certificates only when the server asks for them.
    pub fn authenticate(
        &self,
        token: Option<&str>,
        cert: Option<&PeerCertificate>,
        certificates_asked: bool,
    ) -> Result<Arc<Identity>, String> {
        let by_token = token.map(|t| self.identify(t));
        let Some(cert) = cert else {
            return match by_token {
                Some(Some(who)) => Ok(who),
                Some(None) => Err("the token is not one of this server's identities (set `token:` in the client's remote config, or FIELDSTORE_TOKEN)".into()),
                None if certificates_asked => Err("this server requires a token or a client certificate and the client sent neither (set `token:` or `tls: {cert:, key:}` in the client's remote config, or FIELDSTORE_TOKEN)".into()),
                None => Err("this server requires a token and the client sent none (set `token:` in the client's remote config, or FIELDSTORE_TOKEN)".into()),
            };
        };
        let Some(who) = self.identify_certificate(cert) else {
            let why = match &cert.common_name {
                Some(cn) => format!("no identity has `certificate: {cn}`"),
                None => "its subject has no single Common Name (CN)".to_string(),
            };
            return Err(format!(
                "the client certificate '{}' is not one of this server's identities: {why}",
                cert.subject
            ));
        };
        match by_token {
            None => Ok(who),
            Some(Some(t)) if Arc::ptr_eq(&t, &who) => Ok(who),
            Some(Some(t)) => Err(format!(
                "ambiguous: the client certificate '{}' is identity '{}' but the token is identity '{}' (present one of them)",
                cert.subject, who.name, t.name
            )),
            Some(None) => Err(format!(
                "the client certificate '{}' is identity '{}' but the token it also sent is not one of this server's identities (drop the token or correct it)",
                cert.subject, who.name
            )),
        }
    }

    pub fn len(&self) -> usize {
        self.identities.len()
    }

    pub fn is_empty(&self) -> bool {
        self.identities.is_empty()
    }

    pub fn load(path: &Path) -> Result<Tokens, AuthError> {
        let text = std::fs::read_to_string(path).map_err(|e| AuthError {
            origin: path.display().to_string(),
            line: None,
            message: format!("cannot read: {e}"),
        })?;
        Tokens::parse(&text, &path.display().to_string())
    }

    pub fn parse(text: &str, origin: &str) -> Result<Tokens, AuthError> {
        let err = |line: Option<u64>, message: String| AuthError {
            origin: origin.to_string(),
            line,
            message,
        };
        let mut options = serde_saphyr::Options::default();
        options.with_snippet = false;
        options.strict_booleans = true;
        options.leading_zero_numbers_as_strings = true;
        let file: FileDoc = serde_saphyr::from_str_with_options(text, options)
            .map_err(|e| err(None, format!("invalid tokens file: {e}")))?;
        let mut names = HashSet::new();
        let mut digests: Vec<([u8; 32], String)> = Vec::new();
        let mut certificates: Vec<(String, String)> = Vec::new();
        let mut identities = Vec::new();
        for entry in file.identities {
            let line = Some(entry.name.referenced.line());
            let name = entry.name.value.trim().to_string();
            if name.is_empty() {
                return Err(err(line, "an identity with an empty name".into()));
            }
            if matches!(name.as_str(), "anonymous" | "token") {
                return Err(err(
                    line,
                    format!("'{name}' is reserved (it names the identity of a server without a tokens file)"),
                ));
            }
            if !names.insert(name.clone()) {
                return Err(err(line, format!("identity '{name}' is named twice")));
            }
            let digest = match (&entry.token, &entry.token_sha256) {
                (None, None) if entry.certificate.is_some() => None,
                (Some(t), None) => {
                    if t.value.len() < 8 {
                        return Err(err(
                            Some(t.referenced.line()),
                            format!("identity '{name}': token: is shorter than 8 characters"),
                        ));
                    }
                    Some(Sha256::digest(t.value.as_bytes()).into())
                }
                (None, Some(h)) => Some(parse_digest(&h.value).ok_or_else(|| {
                    err(
                        Some(h.referenced.line()),
                        format!("identity '{name}': token_sha256: is not 64 hexadecimal digits"),
                    )
                })?),
                _ => {
                    return Err(err(
                        line,
                        format!("identity '{name}' needs exactly one of token: or token_sha256: (or certificate: alone)"),
                    ))
                }
            };
            if let Some(digest) = digest {
                if let Some((_, other)) = digests.iter().find(|(d, _)| *d == digest) {
                    return Err(err(
                        line,
                        format!("identities '{other}' and '{name}' have the same token"),
                    ));
                }
                digests.push((digest, name.clone()));
            }
            let certificate = match &entry.certificate {
                None => None,
                Some(c) => {
                    let cn = c.value.trim().to_string();
                    let at = Some(c.referenced.line());
                    if cn.is_empty() {
                        return Err(err(at, format!("identity '{name}': certificate: is empty")));
                    }
                    if let Some((_, other)) = certificates.iter().find(|(c, _)| *c == cn) {
                        return Err(err(
                            at,
                            format!(
                                "identities '{other}' and '{name}' have the same certificate: {cn}"
                            ),
                        ));
                    }
                    certificates.push((cn.clone(), name.clone()));
                    Some(cn)
                }
            };
            let role = match &entry.role {
                None => None,
                Some(r) => Some(Role::parse(&r.value).ok_or_else(|| {
                    err(
                        Some(r.referenced.line()),
                        format!(
                            "identity '{name}': unknown role '{}' (reader, writer, operator)",
                            r.value
                        ),
                    )
                })?),
            };
            let mut grants = Vec::new();
            for a in entry.allow {
                let mut ops = Vec::new();
                let at = Some(a.operations.referenced.line());
                for o in a.operations.value.into_vec() {
                    let op = AuthOp::parse(o.trim()).ok_or_else(|| {
                        err(
                            at,
                            format!(
                                "identity '{name}': unknown operation '{o}' (list, retrieve, archive, wipe, control)"
                            ),
                        )
                    })?;
                    ops.push(op);
                }
                let databases = match a.databases {
                    None => vec![Pattern::every()],
                    Some(d) => {
                        let at = Some(d.referenced.line());
                        d.value
                            .into_vec()
                            .into_iter()
                            .map(|p| {
                                Pattern::parse(&p).map_err(|why| {
                                    err(
                                        at,
                                        format!("identity '{name}': database pattern '{p}': {why}"),
                                    )
                                })
                            })
                            .collect::<Result<_, _>>()?
                    }
                };
                grants.push(Grant { ops, databases });
            }
            if role.is_none() && grants.iter().all(|g| g.ops.is_empty()) {
                return Err(err(
                    line,
                    format!("identity '{name}' has neither a role: nor allow: entries, so it could do nothing"),
                ));
            }
            identities.push(Arc::new(Identity {
                name,
                digest,
                certificate,
                role,
                grants,
                records_creator: true,
            }));
        }
        if identities.is_empty() {
            return Err(err(
                None,
                "no identities: the file needs identities: [...]".into(),
            ));
        }
        Ok(Tokens { identities })
    }
}

/// The tokens file a server was started with, re-read on demand (SIGHUP): connections made
/// after a reload use the new identities; open ones keep the identity they proved.
#[derive(Debug)]
pub struct TokensFile {
    path: PathBuf,
    current: RwLock<Arc<Tokens>>,
}

impl TokensFile {
    pub fn load(path: &Path) -> Result<TokensFile, AuthError> {
        Ok(TokensFile {
            path: path.to_path_buf(),
            current: RwLock::new(Arc::new(Tokens::load(path)?)),
        })
    }

    pub fn current(&self) -> Arc<Tokens> {
        self.current
            .read()
            .map_or_else(|e| e.into_inner().clone(), |t| t.clone())
    }

    /// Reads the file again; a file that became invalid leaves the identities as they were.
    /// Returns how many identities there are now.
    pub fn reload(&self) -> Result<usize, AuthError> {
        let fresh = Arc::new(Tokens::load(&self.path)?);
        let n = fresh.len();
        match self.current.write() {
            Ok(mut t) => *t = fresh,
            Err(e) => *e.into_inner() = fresh,
        }
        Ok(n)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// A tokens file that cannot be used, and where.
#[derive(Debug, thiserror::Error)]
#[error("{origin}{}: {message}", line.map(|l| format!(" line {l}")).unwrap_or_default())]
pub struct AuthError {
    pub origin: String,
    pub line: Option<u64>,
    pub message: String,
}

impl AuthError {
    pub fn kind(&self) -> ErrorKind {
        ErrorKind::Config
    }
}

fn parse_digest(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.is_ascii() {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, b) in out.iter_mut().enumerate() {
        *b = u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(out)
}

/// Compares without stopping at the first difference, so timing does not reveal the secret.
pub fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The SHA-256 of a token as the tokens file's `token_sha256:` takes it.
pub fn token_sha256(token: &str) -> String {
    Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileDoc {
    identities: Vec<IdentityDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct IdentityDoc {
    name: Spanned<String>,
    token: Option<Spanned<String>>,
    token_sha256: Option<Spanned<String>>,
    /// The Common Name of the client certificates that are this identity.
    certificate: Option<Spanned<String>>,
    role: Option<Spanned<String>>,
    #[serde(default)]
    allow: Vec<AllowDoc>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AllowDoc {
    /// Spanned outside: inside an untagged enum the positions are lost.
    operations: Spanned<OneOrMany>,
    databases: Option<Spanned<OneOrMany>>,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum OneOrMany {
    One(String),
    Many(Vec<String>),
}

impl OneOrMany {
    fn into_vec(self) -> Vec<String> {
        match self {
            OneOrMany::One(s) => vec![s],
            OneOrMany::Many(v) => v,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::request::parse_request;
    use proptest::prelude::*;

    const FILE: &str = "\
identities:
  - name: consumer
    token_sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
    role: reader
  - name: ingest
    token: ingest-secret
    role: writer
  - name: research
    token: research-secret
    allow:
      - operations: [list, retrieve, archive, wipe]
        databases: class=rd
      - operations: list
        databases: [\"class=od,expver=0001/0002\"]
  - name: ops
    token: ops-secret-1
    role: operator
";

    fn db(text: &str) -> Key {
        Key::parse(text).unwrap()
    }

    #[test]
    fn a_tokens_file_gives_each_token_its_identity_and_grants() {
        let t = Tokens::parse(FILE, "tokens.yaml").unwrap();
        assert_eq!(t.len(), 4);
        // sha256("test")
        assert_eq!(t.identify("test").unwrap().name, "consumer");
        assert!(t.identify("wrong").is_none());
        let research = t.identify("research-secret").unwrap();
        let rd = db("{class=rd,expver=0001}");
        let od1 = db("{class=od,expver=0001}");
        let od3 = db("{class=od,expver=0003}");
        assert!(research.may(AuthOp::Archive, &rd));
        assert!(research.may(AuthOp::List, &od1));
        assert!(!research.may(AuthOp::List, &od3));
        assert!(!research.may(AuthOp::Retrieve, &od1));
        assert!(!research.may_everywhere(AuthOp::List));
        let consumer = t.identify("test").unwrap();
        assert!(consumer.may_everywhere(AuthOp::Retrieve));
        assert!(!consumer.may(AuthOp::Archive, &rd));
        let ingest = t.identify("ingest-secret").unwrap();
        assert!(ingest.may(AuthOp::Archive, &od3));
        // A writer wipes only what it created.
        assert!(ingest.refusal(AuthOp::Wipe, &od3, Some("ingest")).is_none());
        assert!(ingest.refusal(AuthOp::Wipe, &od3, Some("ops")).is_some());
        assert!(!consumer.may(AuthOp::Wipe, &od3));
        let ops = t.identify("ops-secret-1").unwrap();
        assert!(ops.is_operator());
        assert_eq!(ops.refusal(AuthOp::Wipe, &od3, Some("ingest")), None);
    }

    /// The example in docs/authorization.md is a valid file, with the grants it describes.
    #[test]
    fn the_documented_example_parses() {
        let doc = include_str!("../../../../docs/authorization.md");
        let yaml = doc
            .split("```yaml\n")
            .nth(1)
            .and_then(|rest| rest.split("```").next())
            .unwrap();
        let t = Tokens::parse(yaml, "docs/authorization.md").unwrap();
        assert_eq!(t.len(), 4);
        let research = t.identify("a-long-random-secret-for-research").unwrap();
        let x001 = db("{class=od,expver=x001}");
        assert!(research.may(AuthOp::Archive, &x001));
        assert!(!research.may(AuthOp::Archive, &db("{class=od,expver=0001}")));
        assert!(research.may_everywhere(AuthOp::Retrieve));
        assert_eq!(t.identify("test").unwrap().name, "dashboards");
        assert_eq!(t.identify("foo").unwrap().name, "ops-team");
    }

    #[test]
    fn wipe_and_control_need_the_creator_or_an_operator() {
        let t = Tokens::parse(FILE, "tokens.yaml").unwrap();
        let research = t.identify("research-secret").unwrap();
        let rd = db("{class=rd,expver=0001}");
        assert_eq!(
            research.refusal(AuthOp::Wipe, &rd, Some("ops-team")).unwrap(),
            "identity 'research' may not wipe class=rd,expver=0001: created by 'ops-team'; only its creator or an operator may"
        );
        assert!(research
            .refusal(AuthOp::Wipe, &rd, None)
            .unwrap()
            .contains("created outside"));
        assert_eq!(research.refusal(AuthOp::Wipe, &rd, Some("research")), None);
        let od = db("{class=od,expver=0001}");
        assert!(research
            .refusal(AuthOp::Wipe, &od, Some("research"))
            .unwrap()
            .ends_with("its grants do not cover it (its wipe grants: class=rd)"));
        let consumer = t.identify("test").unwrap();
        assert!(consumer
            .refusal(AuthOp::Archive, &od, None)
            .unwrap()
            .ends_with("(it has no archive grant)"));
        assert!(research
            .refusal(AuthOp::Control, &rd, Some("research"))
            .is_some());
    }

    #[test]
    fn bad_files_are_refused_naming_the_line() {
        let cases = [
            (
                "identities:\n  - name: a\n    token: aaaaaaaa1\n    role: reader\n  - name: a\n    token: bbbbbbbb2\n    role: reader\n",
                "tokens.yaml line 5: identity 'a' is named twice",
            ),
            (
                "identities:\n  - name: a\n    token: aaaaaaaa1\n    role: reader\n  - name: b\n    token: aaaaaaaa1\n    role: reader\n",
                "tokens.yaml line 5: identities 'a' and 'b' have the same token",
            ),
            (
                "identities:\n  - name: a\n    token: aaaaaaaa1\n    role: admin\n",
                "tokens.yaml line 4: identity 'a': unknown role 'admin' (reader, writer, operator)",
            ),
            (
                "identities:\n  - name: a\n    token: aaaaaaaa1\n    allow:\n      - operations: [list, move]\n",
                "tokens.yaml line 5: identity 'a': unknown operation 'move'",
            ),
            (
                "identities:\n  - name: a\n    token_sha256: abc\n    role: reader\n",
                "tokens.yaml line 3: identity 'a': token_sha256: is not 64 hexadecimal digits",
            ),
            (
                "identities:\n  - name: a\n    role: reader\n",
                "tokens.yaml line 2: identity 'a' needs exactly one of token: or token_sha256:",
            ),
            (
                "identities:\n  - name: a\n    token: aaaaaaaa1\n    allow:\n      - operations: list\n        databases: class\n",
                "tokens.yaml line 6: identity 'a': database pattern 'class'",
            ),
            ("identities: []\n", "no identities"),
        ];
        for (text, want) in cases {
            let e = Tokens::parse(text, "tokens.yaml").unwrap_err().to_string();
            assert!(
                e.starts_with(want) || e.contains(want),
                "{e}\nwanted: {want}"
            );
        }
        let e =
            Tokens::parse("identities:\n  - name: a\n    tokn: x\n", "tokens.yaml").unwrap_err();
        assert!(e.to_string().contains("tokn"), "{e}");
    }

    fn peer(subject: &str, cn: Option<&str>) -> PeerCertificate {
        PeerCertificate {
            subject: subject.to_string(),
            common_name: cn.map(str::to_string),
        }
    }

    #[test]
    fn a_certificate_is_the_identity_naming_its_common_name() {
        let t = Tokens::parse(
            "identities:
  - name: reader
    certificate: reader-1
    role: reader
  - name: ops
    token: ops-secret-1
    certificate: ops-1
    role: operator
  - name: tokens-only
    token: only-a-token
    role: writer
",
            "tokens.yaml",
        )
        .unwrap();
        let reader = peer("CN=reader-1, O=X", Some("reader-1"));
        assert_eq!(
            t.authenticate(None, Some(&reader), true).unwrap().name,
            "reader"
        );
        // Common Names compare exactly: no case folding, no partial match.
        let e = t
            .authenticate(None, Some(&peer("CN=Reader-1", Some("Reader-1"))), true)
            .unwrap_err();
        assert_eq!(e, "the client certificate 'CN=Reader-1' is not one of this server's identities: no identity has `certificate: Reader-1`");
        let e = t
            .authenticate(None, Some(&peer("O=X", None)), true)
            .unwrap_err();
        assert!(
            e.ends_with("its subject has no single Common Name (CN)"),
            "{e}"
        );
        // A certificate and a token: the same identity, or refused.
        let ops = peer("CN=ops-1", Some("ops-1"));
        assert_eq!(
            t.authenticate(Some("ops-secret-1"), Some(&ops), true)
                .unwrap()
                .name,
            "ops"
        );
        let e = t
            .authenticate(Some("ops-secret-1"), Some(&reader), true)
            .unwrap_err();
        assert!(e.starts_with("ambiguous: the client certificate 'CN=reader-1, O=X' is identity 'reader' but the token is identity 'ops'"), "{e}");
        let e = t
            .authenticate(Some("wrong-token"), Some(&reader), true)
            .unwrap_err();
        assert!(e.contains("the token it also sent is not one"), "{e}");
        // A certificate that is nobody's is refused even with a valid token.
        assert!(t
            .authenticate(Some("ops-secret-1"), Some(&peer("CN=x", Some("x"))), true)
            .is_err());
        // Without a certificate, tokens work as before; an identity without one has none.
        assert_eq!(
            t.authenticate(Some("only-a-token"), None, true)
                .unwrap()
                .name,
            "tokens-only"
        );
        assert!(t
            .authenticate(None, None, true)
            .unwrap_err()
            .contains("sent neither"));
        assert!(t.identify("").is_none());
    }

    #[test]
    fn certificate_entries_are_checked_at_startup() {
        let cases = [
            (
                "identities:\n  - name: a\n    certificate: c1\n    role: reader\n  - name: b\n    certificate: c1\n    role: reader\n",
                "tokens.yaml line 6: identities 'a' and 'b' have the same certificate: c1",
            ),
            (
                "identities:\n  - name: a\n    certificate: \" \"\n    role: reader\n",
                "tokens.yaml line 3: identity 'a': certificate: is empty",
            ),
            (
                "identities:\n  - name: a\n    certificate: c1\n    token: aaaaaaaa1\n    token_sha256: 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\n    role: reader\n",
                "identity 'a' needs exactly one of token: or token_sha256:",
            ),
            (
                "identities:\n  - name: a\n    certificates: c1\n    role: reader\n",
                "certificates",
            ),
        ];
        for (text, want) in cases {
            let e = Tokens::parse(text, "tokens.yaml").unwrap_err().to_string();
            assert!(e.contains(want), "{e}\nwanted: {want}");
        }
    }

    #[test]
    fn every_request_counts_as_an_fdb5_operation() {
        assert_eq!(AuthOp::of(MsgType::Axes), Some(AuthOp::List));
        assert_eq!(AuthOp::of(MsgType::Subscribe), Some(AuthOp::Retrieve));
        assert_eq!(AuthOp::of(MsgType::Flush), Some(AuthOp::Archive));
        assert_eq!(AuthOp::of(MsgType::Purge), Some(AuthOp::Wipe));
        assert_eq!(AuthOp::of(MsgType::Compact), Some(AuthOp::Wipe));
        assert_eq!(AuthOp::of(MsgType::Control), Some(AuthOp::Control));
        assert_eq!(AuthOp::of(MsgType::Reply), None);
        assert_eq!(
            token_sha256("test"),
            "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
        );
    }

    #[test]
    fn patterns_match_every_keyword_they_name() {
        let p = Pattern::parse("class=od, expver=0001/0002").unwrap();
        assert_eq!(p.to_string(), "class=od,expver=0001/0002");
        assert!(p.matches(&db("{class=od,expver=0002,stream=oper}")));
        assert!(p.matches(&db("{class=OD,expver=0001}")));
        assert!(!p.matches(&db("{class=od}")));
        assert!(!p.matches(&db("{class=rd,expver=0001}")));
        assert!(Pattern::parse("*").unwrap().matches(&db("{class=rd}")));
        assert!(p.overlaps(&parse_request("retrieve,class=od/rd").unwrap()));
        assert!(p.overlaps(&parse_request("retrieve,stream=oper").unwrap()));
        assert!(!p.overlaps(&parse_request("retrieve,class=rd").unwrap()));
        assert!(!p.overlaps(&parse_request("retrieve,class=od,expver=0003").unwrap()));
    }

    proptest! {
        /// A key matches when and only when each keyword the pattern names is in the key with
        /// one of its values; a pattern with an extra keyword never matches more.
        #[test]
        fn pattern_matching_agrees_with_its_definition(
            key in proptest::collection::btree_map("[a-d]", "[x-z]{1,2}", 0..4),
            pat in proptest::collection::btree_map("[a-d]", proptest::collection::vec("[x-z]{1,2}", 1..3), 0..3),
        ) {
            let k = Key::from_pairs(key.iter().map(|(a, b)| (a.as_str(), b.as_str())));
            let text = pat.iter().map(|(kw, vs)| format!("{kw}={}", vs.join("/"))).collect::<Vec<_>>().join(",");
            let p = Pattern::parse(&text).unwrap();
            let expected = pat.iter().all(|(kw, vs)| key.get(kw).is_some_and(|v| vs.contains(v)));
            prop_assert_eq!(p.matches(&k), expected);
            prop_assert_eq!(Pattern::parse(&p.to_string()).unwrap(), p.clone());
            if expected {
                let mut r = Request::new(Some("list"));
                for (kw, v) in &key {
                    r.set(kw, vec![v.clone()]);
                }
                prop_assert!(p.overlaps(&r), "a request naming a matching key overlaps");
            }
        }
    }
}
