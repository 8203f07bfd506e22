//! `select:` / `excludes:` expressions (`class=od,stream=oper/enfo`): keyword → unanchored regexes,
//! as FDB5's select frontend reads them.

use regex::Regex;

use crate::api::ApiError;
use crate::model::config::parse_selection;
use crate::model::request::Request;
use crate::model::Key;

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
}
