//! Where S3 credentials come from, in the order the AWS tools use, so a user's existing setup
//! works: the config's keys, then the environment, then the shared credentials file.

use std::path::PathBuf;

use crate::model::config::S3Config;
use crate::storage::StorageError;

/// An access key pair (and session token for temporary credentials), and where it was found,
/// for messages.
#[derive(Clone, PartialEq, Eq)]
pub struct Keys {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
    pub source: String,
}

impl std::fmt::Debug for Keys {
    /// Never prints the secret.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Keys({} from {})", self.access_key_id, self.source)
    }
}

/// Resolves the keys from the process environment.
pub fn resolve(cfg: &S3Config) -> Result<Keys, StorageError> {
    resolve_with(cfg, &|name| {
        std::env::var(name).ok().filter(|v| !v.is_empty())
    })
}

/// Resolves the keys with `env` standing for the environment (tests pass their own).
pub fn resolve_with(
    cfg: &S3Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Keys, StorageError> {
    match (&cfg.access_key_id, &cfg.secret_access_key) {
        (Some(id), Some(secret)) => {
            return Ok(Keys {
                access_key_id: id.clone(),
                secret_access_key: secret.clone(),
                session_token: None,
                source: "the config's s3 section".into(),
            })
        }
        (Some(_), None) | (None, Some(_)) => {
            return Err(StorageError::Config {
                detail: "the s3 section sets only one of access_key_id and secret_access_key: set both, or neither to use the environment or ~/.aws/credentials".into(),
            })
        }
        (None, None) => {}
    }
    if let (Some(id), Some(secret)) = (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
        return Ok(Keys {
            access_key_id: id,
            secret_access_key: secret,
            session_token: env("AWS_SESSION_TOKEN"),
            source: "AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY".into(),
        });
    }
    let profile = cfg
        .profile
        .clone()
        .or_else(|| env("AWS_PROFILE"))
        .unwrap_or_else(|| "default".into());
    let file = env("AWS_SHARED_CREDENTIALS_FILE")
        .map(PathBuf::from)
        .or_else(|| env("HOME").map(|h| PathBuf::from(h).join(".aws/credentials")));
    let mut looked = format!("no profile [{profile}] in the credentials file (HOME unset)");
    if let Some(file) = file {
        match std::fs::read_to_string(&file) {
            Ok(text) => {
                if let Some(keys) = from_profile(&text, &profile) {
                    return Ok(Keys {
                        source: format!("{} [{profile}]", file.display()),
                        ..keys
                    });
                }
                looked = format!(
                    "no aws_access_key_id and aws_secret_access_key in [{profile}] of {}",
                    file.display()
                );
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                looked = format!("{} does not exist", file.display());
            }
            Err(e) => {
                return Err(StorageError::Io {
                    op: "read S3 credentials file",
                    path: file,
                    source: e,
                })
            }
        }
    }
    Err(StorageError::Config {
        detail: format!(
            "no S3 credentials for {}: set access_key_id and secret_access_key in the config's s3 section, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the environment, or a profile in the shared credentials file ({looked})",
            cfg.endpoint
        ),
    })
}

/// The keys of one `[profile]` section of an AWS credentials file (INI: `key = value`,
/// `#`/`;` comments).
fn from_profile(text: &str, profile: &str) -> Option<Keys> {
    let mut in_section = false;
    let (mut id, mut secret, mut token) = (None, None, None);
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.trim();
            // The config file's spelling `[profile NAME]` is accepted here too.
            in_section =
                name == profile || name.strip_prefix("profile ").map(str::trim) == Some(profile);
            continue;
        }
        if !in_section {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = v.trim().to_string();
        match k.trim().to_ascii_lowercase().as_str() {
            "aws_access_key_id" => id = Some(v),
            "aws_secret_access_key" => secret = Some(v),
            "aws_session_token" => token = Some(v),
            _ => {}
        }
    }
    Some(Keys {
        access_key_id: id?,
        secret_access_key: secret?,
        session_token: token,
        source: String::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg() -> S3Config {
        S3Config::new("http://127.0.0.1:9000", "fdb")
    }

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn config_keys_win_over_environment() {
        let mut c = cfg();
        c.access_key_id = Some("cfg".into());
        c.secret_access_key = Some("cfgsecret".into());
        let k = resolve_with(
            &c,
            &env(&[("AWS_ACCESS_KEY_ID", "env"), ("AWS_SECRET_ACCESS_KEY", "s")]),
        )
        .unwrap();
        assert_eq!(
            (k.access_key_id.as_str(), k.secret_access_key.as_str()),
            ("cfg", "cfgsecret")
        );
        c.secret_access_key = None;
        assert!(resolve_with(&c, &env(&[]))
            .unwrap_err()
            .to_string()
            .contains("only one of"));
    }

    #[test]
    fn environment_with_session_token() {
        let k = resolve_with(
            &cfg(),
            &env(&[
                ("AWS_ACCESS_KEY_ID", "id"),
                ("AWS_SECRET_ACCESS_KEY", "topsecret"),
                ("AWS_SESSION_TOKEN", "t"),
            ]),
        )
        .unwrap();
        assert_eq!(
            (k.access_key_id.as_str(), k.session_token.as_deref()),
            ("id", Some("t"))
        );
        assert!(
            !format!("{k:?}").contains("topsecret"),
            "Debug must not print the secret"
        );
    }

    #[test]
    fn profile_from_the_credentials_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("credentials");
        std::fs::write(
            &file,
            "[default]\naws_access_key_id = d\naws_secret_access_key = ds\n\n# comment\n[work]\naws_access_key_id=w\naws_secret_access_key = ws\naws_session_token = wt\n",
        )
        .unwrap();
        let f = file.to_str().unwrap();
        let k = resolve_with(&cfg(), &env(&[("AWS_SHARED_CREDENTIALS_FILE", f)])).unwrap();
        assert_eq!(k.access_key_id, "d");
        let k = resolve_with(
            &cfg(),
            &env(&[("AWS_SHARED_CREDENTIALS_FILE", f), ("AWS_PROFILE", "work")]),
        )
        .unwrap();
        assert_eq!(
            (k.access_key_id.as_str(), k.session_token.as_deref()),
            ("w", Some("wt"))
        );
        let mut c = cfg();
        c.profile = Some("work".into());
        let k = resolve_with(
            &c,
            &env(&[
                ("AWS_SHARED_CREDENTIALS_FILE", f),
                ("AWS_PROFILE", "default"),
            ]),
        )
        .unwrap();
        assert_eq!(
            k.access_key_id, "w",
            "the config's profile wins over AWS_PROFILE"
        );
        c.profile = Some("none".into());
        let e = resolve_with(&c, &env(&[("AWS_SHARED_CREDENTIALS_FILE", f)]))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("[none]") && e.contains("AWS_ACCESS_KEY_ID") && e.contains("access_key_id"),
            "{e}"
        );
    }

    #[test]
    fn none_found_names_all_three_places() {
        let dir = tempfile::tempdir().unwrap();
        let e = resolve_with(&cfg(), &env(&[("HOME", dir.path().to_str().unwrap())])).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("s3 section")
                && msg.contains("AWS_SECRET_ACCESS_KEY")
                && msg.contains(".aws/credentials does not exist"),
            "{msg}"
        );
        assert_eq!(e.kind(), crate::error_kind::ErrorKind::Config);
    }
}
