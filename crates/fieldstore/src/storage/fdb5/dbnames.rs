//! FDB5's `dbnames` file: how a database key becomes a directory path under a root, possibly
//! nested (`{class}:{expver}/{date}:{time}:{domain}/{stream}`, as Debian's `/etc/fdb/dbnames`
//! says). Each line is `keyword[=regex],keyword... format`; the first line whose keywords are
//! exactly the key's, and whose regexes match its values, names the database.

use std::path::{Path, PathBuf};

use crate::model::Key;

#[derive(Debug, Clone)]
struct Line {
    keywords: Vec<(String, Option<regex::Regex>)>,
    format: String,
}

#[derive(Debug, Clone, Default)]
pub struct DbNames {
    lines: Vec<Line>,
}

/// eckit's regexes are POSIX basic ones (`\(a\|b\)`): the same in Rust's syntax.
fn from_basic(re: &str) -> String {
    let mut out = String::with_capacity(re.len());
    let mut chars = re.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(m @ ('(' | ')' | '|' | '{' | '}' | '+' | '?')) => out.push(m),
                Some(other) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push_str("\\\\"),
            },
            '(' | ')' | '|' | '{' | '}' | '+' | '?' => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    out
}

impl DbNames {
    pub fn parse(text: &str) -> Result<DbNames, String> {
        let mut lines = Vec::new();
        for (n, raw) in text.lines().enumerate() {
            let line = raw.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut parts = line.split_whitespace();
            let (Some(keys), Some(format)) = (parts.next(), parts.next()) else {
                return Err(format!("line {}: expected 'keywords format'", n + 1));
            };
            let mut keywords = Vec::new();
            for k in keys.split(',').filter(|k| !k.is_empty()) {
                match k.split_once('=') {
                    Some((kw, re)) => {
                        let re = regex::Regex::new(&from_basic(re))
                            .map_err(|e| format!("line {}: regex '{re}': {e}", n + 1))?;
                        keywords.push((kw.to_string(), Some(re)));
                    }
                    None => keywords.push((k.to_string(), None)),
                }
            }
            lines.push(Line {
                keywords,
                format: format.to_string(),
            });
        }
        Ok(DbNames { lines })
    }

    /// The file FDB5 reads: `FDB_DBNAMES_FILE`, else `<FDB home>/etc/fdb/dbnames`, else Debian's
    /// `/etc/fdb/dbnames`. A file that is absent or does not parse names nothing (a warning for
    /// the latter).
    pub fn load(env: &dyn Fn(&str) -> Option<String>) -> DbNames {
        let get = |v: &str| env(v).filter(|s| !s.is_empty());
        let path = match get("FDB_DBNAMES_FILE") {
            Some(p) => PathBuf::from(p),
            None => match get("FDB_HOME").or_else(|| get("FDB5_HOME")) {
                Some(home) => Path::new(&home).join("etc/fdb/dbnames"),
                None => PathBuf::from("/etc/fdb/dbnames"),
            },
        };
        let Ok(text) = std::fs::read_to_string(&path) else {
            return DbNames::default();
        };
        match DbNames::parse(&text) {
            Ok(d) => d,
            Err(e) => {
                tracing::warn!(file = %path.display(), "dbnames file not used: {e}");
                DbNames::default()
            }
        }
    }

    /// The path under a root FDB5 gives this database, if a line names it (`None`: the default
    /// name, the values joined by `:`).
    pub fn path_for(&self, key: &Key) -> Option<String> {
        'lines: for l in &self.lines {
            if l.keywords.len() != key.len() {
                continue;
            }
            for (kw, re) in &l.keywords {
                let Some(v) = key.get(kw) else {
                    continue 'lines;
                };
                if re.as_ref().is_some_and(|re| !re.is_match(v)) {
                    continue 'lines;
                }
            }
            let mut out = l.format.clone();
            for (kw, v) in key.iter() {
                out = out.replace(&format!("{{{kw}}}"), v);
            }
            // A value must not climb out of the root.
            if out
                .split('/')
                .any(|c| c.is_empty() || c == "." || c == "..")
            {
                return None;
            }
            return Some(out);
        }
        None
    }

    /// How many directory levels a database may be below a root (1: directly in it).
    pub fn depth(&self) -> usize {
        self.lines
            .iter()
            .map(|l| l.format.matches('/').count() + 1)
            .max()
            .unwrap_or(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN: &str = "# regex     dbnamer\n\n# class=rd,expver=00**,stream=\\(enfo\\|efov\\),domain,number ...\n\nclass,expver,stream,date,time,domain,number          {class}:{expver}/{date}:{time}:{domain}/{stream}:{number}\n\nclass,expver,stream,date,time,domain                 {class}:{expver}/{date}:{time}:{domain}/{stream}\n";

    #[test]
    fn debians_file_nests_databases() {
        let d = DbNames::parse(DEBIAN).unwrap();
        let k = Key::parse("{class=od,expver=0001,stream=oper,date=20240101,time=1200,domain=g}")
            .unwrap();
        assert_eq!(
            d.path_for(&k).as_deref(),
            Some("od:0001/20240101:1200:g/oper")
        );
        assert_eq!(d.depth(), 3);
        let other = Key::parse("{class=od,expver=0001}").unwrap();
        assert_eq!(d.path_for(&other), None);
        let up = Key::parse("{class=od,expver=0001,stream=..,date=x,time=y,domain=}").unwrap();
        assert_eq!(d.path_for(&up), None);
    }

    #[test]
    fn regexes_select_lines() {
        let d = DbNames::parse(
            "class,stream=\\(enfo\\|efov\\)  {class}/{stream}\nclass,stream {class}-{stream}\n",
        )
        .unwrap();
        let k = |s: &str| Key::parse(s).unwrap();
        assert_eq!(
            d.path_for(&k("{class=od,stream=enfo}")).as_deref(),
            Some("od/enfo")
        );
        assert_eq!(
            d.path_for(&k("{class=od,stream=oper}")).as_deref(),
            Some("od-oper")
        );
    }
}
