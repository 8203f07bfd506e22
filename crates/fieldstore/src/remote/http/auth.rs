//! Who an HTTP request comes from: the same identities as the binary protocol's handshake
//! (docs/authorization.md). A token comes as `Authorization: Bearer TOKEN`, or, for the web
//! view (whose `EventSource` cannot set headers), as the cookie `fieldstore_token` the page sets
//! when its user types the token; a certificate is the TLS connection's verified client one.

use std::sync::Arc;

use super::super::auth::{same_bytes, Identity};
use super::super::server::Shared;
use super::super::transport::PeerCertificate;
use super::response::Response;
use super::Req;

/// The identity the request proves, or the 401 to send.
pub(super) fn identify(
    shared: &Shared,
    peer: Option<&PeerCertificate>,
    req: &Req,
) -> Result<Arc<Identity>, Response> {
    let token = token_of(req);
    if let Some(tokens) = &shared.opts.tokens {
        let asks = shared
            .opts
            .tls
            .as_ref()
            .is_some_and(|t| t.asks_for_client_certificates());
        return tokens
            .current()
            .authenticate(token.as_deref(), peer, asks)
            .map_err(|why| refused(shared, &why));
    }
    if let Some(want) = &shared.opts.token {
        return match token {
            Some(t) if same_bytes(t.as_bytes(), want.as_bytes()) => {
                Ok(Arc::new(Identity::everyone("token")))
            }
            Some(_) => Err(refused(shared, "wrong token (send `Authorization: Bearer TOKEN`)")),
            None => Err(refused(
                shared,
                "this server requires a token and the request has none (send `Authorization: Bearer TOKEN`)",
            )),
        };
    }
    Ok(Arc::new(Identity::everyone("anonymous")))
}

fn refused(shared: &Shared, why: &str) -> Response {
    shared
        .metrics
        .refused
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    tracing::warn!("http: refused: {why}");
    Response::error(401, "auth", why)
}

fn token_of(req: &Req) -> Option<String> {
    if let Some(h) = req.header("authorization") {
        let (scheme, rest) = h.split_once(' ').unwrap_or((h, ""));
        if scheme.eq_ignore_ascii_case("bearer") {
            return Some(rest.trim().to_string());
        }
    }
    let cookies = req.header("cookie")?;
    cookies.split(';').find_map(|c| {
        let (n, v) = c.trim().split_once('=')?;
        (n == "fieldstore_token").then(|| {
            url::form_urlencoded::parse(format!("v={v}").as_bytes())
                .next()
                .map(|(_, v)| v.into_owned())
                .unwrap_or_default()
        })
    })
}
