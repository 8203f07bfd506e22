//! `select:` / `excludes:` expressions (`class=od,stream=oper/enfo`): keyword → unanchored regexes,
//! as FDB5's select frontend reads them.

use std::collections::HashMap;

use regex::Regex;

use crate::api::ApiError;
use crate::grib;
use crate::model::config::parse_selection;
use crate::model::request::Request;
use crate::model::schema::Schema;
use crate::model::types::{Context, KeyType};
use crate::model::Key;

static RESOLVER: fn(&str) -> Option<String> = grib::params::resolver;

/// Puts keys and requests in the form the stores keep (`date=-1` → yesterday, `expver=1` →
/// `0001`, `param=t` → `130`) before they are matched against selections, which are written
/// against stored values: a literal `date=-1` would never reach a lane selecting yesterday.
#[derive(Debug, Clone)]
pub struct Canon {
    types: HashMap<String, KeyType>,
}

impl Default for Canon {
    fn default() -> Self {
        Canon::new(&Schema::default_schema())
    }
}

impl Canon {
    /// Each keyword's type as the schema declares it (the first rule naming it wins).
    pub fn new(schema: &Schema) -> Canon {
        let mut types = HashMap::new();
        for p in schema
            .paths()
            .iter()
            .flat_map(|p| p.levels.iter().flatten())
        {
            // Types that store under another keyword, or store nothing, are matched as given.
            if p.ty != KeyType::Ignore && p.stored_keyword() == &*p.keyword {
                types.entry(p.keyword.to_string()).or_insert(p.ty);
            }
        }
        Canon { types }
    }

    /// Today is asked for on every call: relative dates mean the day of the request.
    fn cx() -> Context<'static> {
        Context {
            params: Some(&RESOLVER),
            ..Context::default()
        }
    }

    /// A value the type refuses is kept as given: the store below will say what is wrong.
    fn value(&self, keyword: &str, value: &str, cx: &Context) -> String {
        self.types
            .get(keyword)
            .and_then(|t| t.canonical(keyword, value, cx).ok())
            .unwrap_or_else(|| value.to_string())
    }

    pub fn key(&self, key: &Key) -> Key {
        let cx = Self::cx();
        Key::from_pairs(key.iter().map(|(k, v)| (k, self.value(k, v, &cx))))
    }

    /// Ranges expanded (`date=-3/to/-1`), then each value canonical.
    pub fn request(&self, request: &Request) -> Request {
        let cx = Self::cx();
        let mut out = request
            .expand_ranges(&cx)
            .unwrap_or_else(|_| request.clone());
        let params: Vec<(String, Vec<String>)> = out
            .iter()
            .map(|(k, vs)| {
                (
                    k.to_string(),
                    vs.iter().map(|v| self.value(k, v, &cx)).collect(),
                )
            })
            .collect();
        for (k, vs) in params {
            out.set(&k, vs);
        }
        out
    }
}

#[derive(Debug, Clone)]
pub struct Selection {
    text: String,
    items: Vec<(String, Vec<Regex>)>,
}

impl Selection {
    pub fn parse(text: &str) -> Result<Selection, ApiError> {
        let items = parse_selection(text)
            .map_err(|e| ApiError::Config(format!("selection '{text}': {e}")))?
            .into_iter()
            .map(|(k, vs)| {
                let res = vs
                    .iter()
                    .map(|v| {
                        Regex::new(v)
                            .map_err(|e| ApiError::Config(format!("selection '{text}': {v}: {e}")))
                    })
                    .collect::<Result<Vec<_>, _>>()?;
                Ok((k, res))
            })
            .collect::<Result<Vec<_>, ApiError>>()?;
        Ok(Selection {
            text: text.to_string(),
            items,
        })
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    /// Every keyword present in the key with a value one of its regexes finds; a keyword the key
    /// lacks does not match (FDB5).
    pub fn matches_key(&self, key: &Key) -> bool {
        self.items.iter().all(|(k, res)| {
            key.get(k)
                .is_some_and(|v| res.iter().any(|r| r.is_match(v)))
        })
    }

    /// For a request: any of a keyword's values may match. A keyword the request lacks matches
    /// when `absent_matches` (list and the like: the request covers everything) and not otherwise
    /// (retrieve).
    pub fn matches_request(&self, request: &Request, absent_matches: bool) -> bool {
        self.items.iter().all(|(k, res)| match request.get(k) {
            Some(vs) => vs.iter().any(|v| res.iter().any(|r| r.is_match(v))),
            None => absent_matches,
        })
    }

    /// `excludes` for a request: excluded only when every value of every keyword matches.
    pub fn excludes_request(&self, request: &Request) -> bool {
        self.items.iter().all(|(k, res)| match request.get(k) {
            Some(vs) => vs.iter().all(|v| res.iter().any(|r| r.is_match(v))),
            None => false,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_and_requests() {
        let s = Selection::parse("class=od,stream=oper/enfo").unwrap();
        assert!(s.matches_key(&Key::parse("class=od,stream=enfo,step=0").unwrap()));
        assert!(!s.matches_key(&Key::parse("class=rd,stream=enfo").unwrap()));
        assert!(!s.matches_key(&Key::parse("class=od").unwrap()));
        let r = crate::model::request::parse_request("class=od").unwrap();
        assert!(s.matches_request(&r, true));
        assert!(!s.matches_request(&r, false));
        let r = crate::model::request::parse_request("class=od/rd,stream=oper").unwrap();
        assert!(s.matches_request(&r, false));
        assert!(!s.excludes_request(&r));
        let anchored = Selection::parse("expver=^00.1$").unwrap();
        assert!(anchored.matches_key(&Key::parse("expver=0001").unwrap()));
        assert!(!anchored.matches_key(&Key::parse("expver=00012").unwrap()));
        assert!(Selection::parse("class").is_err());
    }

    #[test]
    fn requests_and_keys_are_matched_in_stored_form() {
        let canon = Canon::default();
        let yesterday = (chrono::Utc::now().date_naive() - chrono::Days::new(1))
            .format("%Y%m%d")
            .to_string();
        let s = Selection::parse(&format!("date={yesterday},expver=0001,param=130")).unwrap();
        let r = crate::model::request::parse_request("date=-1,expver=1,param=t").unwrap();
        assert!(
            !s.matches_request(&r, false),
            "the literal request should not match"
        );
        assert!(s.matches_request(&canon.request(&r), false));
        let r = crate::model::request::parse_request("date=-2/to/-1,expver=1,param=130").unwrap();
        assert!(s.matches_request(&canon.request(&r), false));
        let k = Key::parse(&format!("date={yesterday},expver=0001,param=t")).unwrap();
        assert!(s.matches_key(&canon.key(&k)));
        assert_eq!(canon.key(&k).get("param"), Some("130"));
    }
}
