//! Authentication at the edge (`[auth]`), off unless configured.
//!
//! A request's bearer token is checked against the static tokens (in constant time) and then,
//! if it has the shape of one, as a JWT against the configured issuer's keys. What fails is
//! answered 401 (no token, or one that does not verify) or 403 (a valid token without the
//! required scopes), with a `WWW-Authenticate` that points at toolgate's RFC 9728 metadata
//! when `public_url` is set. The client's token stops here: the upstream gets the credential
//! the operator configured, or none.

#[cfg(feature = "auth")]
mod jwt;

use crate::config::{self, Config, ConfigError};
use http::header::{AUTHORIZATION, HeaderName, HeaderValue};
use http::{HeaderMap, StatusCode};
use serde_json::{Value, json};
use std::sync::Arc;

pub const METADATA_PATH: &str = "/.well-known/oauth-protected-resource";

/// The headers a client's credential travels in to a server when toolgate does not
/// authenticate it: MCP's `Authorization`, a session's `Cookie`, and the API-key headers
/// servers read. What tells two stateless clients apart (their catalogs' and bridged
/// sessions' scope), and what toolgate's own question to a server in a client's name carries.
pub static CLIENT_CREDENTIALS: [HeaderName; 4] = [
    AUTHORIZATION,
    http::header::COOKIE,
    HeaderName::from_static("x-api-key"),
    HeaderName::from_static("api-key"),
];

/// The credential a request to a server goes with, as a client's own messages carry it: the
/// client's (`CLIENT_CREDENTIALS` of `client`), or the server's (`credential`, whatever its
/// header's name) when `[auth]` replaces the client's.
pub(crate) fn carried(
    client: Option<&HeaderMap>,
    credential: Option<&UpstreamCredential>,
) -> HeaderMap {
    let mut headers = HeaderMap::new();
    if let Some(client) = client {
        for name in &CLIENT_CREDENTIALS {
            for value in client.get_all(name) {
                headers.append(name, value.clone());
            }
        }
    }
    if let Some((name, value)) = credential {
        headers.insert(name, value.clone());
    }
    headers
}

pub struct Authenticator {
    /// Token bytes and the name each stands for.
    tokens: Vec<(Box<[u8]>, Arc<str>)>,
    #[cfg(feature = "auth")]
    jwt: Option<jwt::Verifier>,
    /// The audiences were derived from `public_url`, one per endpoint: a token is then good
    /// only at the endpoint its `aud` names, not at every endpoint of the gateway.
    #[cfg(feature = "auth")]
    audience_per_endpoint: bool,
    public_url: Option<String>,
    authorization_servers: Vec<String>,
    required_scopes: Vec<String>,
}

/// Why a request is not let through.
#[derive(Debug)]
pub enum Refusal {
    /// No bearer token: 401 without an error code (RFC 6750 section 3.1).
    Missing,
    /// A token that does not verify: 401 `invalid_token`.
    Invalid(String),
    /// A valid token without the required scopes: 403 `insufficient_scope`.
    InsufficientScope,
    /// A valid token of a client whose `[clients]` rules keep it from this server (its
    /// `upstreams`): 403 `insufficient_scope`, no other token would help that client.
    NotForThisServer,
    /// The keys to check it with cannot be had: 503, the gateway's fault, not the client's.
    Unavailable(String),
}

/// A verified caller.
pub struct Identity {
    pub name: Arc<str>,
}

/// A credential toolgate sends a server in place of a client's token: the header's name and
/// its value, marked sensitive so that no log or debug output shows it.
pub(crate) type UpstreamCredential = (HeaderName, HeaderValue);

/// The credential `auth.upstream_header` gives the server on `/mcp` (its secret read now):
/// what toolgate sends in place of a client's token, and with its own requests (`toolgate
/// check`'s listing too).
pub(crate) fn upstream_credential(
    a: &config::Auth,
) -> Result<Option<UpstreamCredential>, ConfigError> {
    a.upstream_header
        .as_ref()
        .map(|h| credential("auth.upstream_header", h))
        .transpose()
}

/// The credential `header` configures, named in errors by `what` (its key), never by its
/// value.
pub(crate) fn credential(
    what: &str,
    header: &config::UpstreamHeader,
) -> Result<UpstreamCredential, ConfigError> {
    let name = HeaderName::from_bytes(header.name.as_bytes())
        .map_err(|_| ConfigError(format!("{what}: {:?} is not a header name", header.name)))?;
    let value = config::secret(what, header.env.as_deref(), header.file.as_deref())?;
    let mut value = HeaderValue::from_str(&value)
        .map_err(|_| ConfigError(format!("{what}: the value is not a valid header value")))?;
    value.set_sensitive(true);
    Ok((name, value))
}

impl Authenticator {
    /// `None` when `[auth]` configures no way to authenticate. Secrets are read now, so a
    /// reload picks up rotated files; `previous` lends its fetched keys when the JWKS URL is
    /// the same.
    pub fn from_config(
        cfg: &Config,
        previous: Option<&Authenticator>,
    ) -> Result<Option<Authenticator>, ConfigError> {
        let a = &cfg.auth;
        if !a.enabled() {
            return Ok(None);
        }
        let mut tokens: Vec<(Box<[u8]>, Arc<str>)> = Vec::new();
        for t in &a.tokens {
            let what = format!("auth token {:?}", t.name);
            let value = config::secret(&what, t.env.as_deref(), t.file.as_deref())?;
            let value = value.into_bytes().into_boxed_slice();
            // A token stands for one client: which name a shared one gave would depend on
            // the order of the file.
            if let Some((_, other)) = tokens.iter().find(|(v, n)| *v == value && **n != *t.name) {
                return Err(ConfigError(format!(
                    "auth tokens {other:?} and {:?} hold the same token: each client needs its own",
                    t.name
                )));
            }
            tokens.push((value, Arc::from(t.name.as_str())));
        }
        if let Some(url) = &a.public_url {
            let ok = url
                .parse::<http::Uri>()
                .is_ok_and(|u| u.scheme().is_some() && u.host().is_some());
            if !ok {
                return Err(ConfigError(format!(
                    "auth.public_url {url:?} must be an absolute URL such as https://mcp.example.com"
                )));
            }
        }
        let public_url = a
            .public_url
            .as_ref()
            .map(|u| u.trim_end_matches('/').to_string());
        #[cfg(feature = "auth")]
        let jwt = match &a.jwt {
            Some(j) => {
                let audience = if !j.audience.is_empty() {
                    j.audience.clone()
                } else if let Some(base) = &public_url {
                    endpoint_urls(base, cfg)
                } else {
                    return Err(ConfigError(
                        "auth.jwt needs audience, or auth.public_url to derive it from".into(),
                    ));
                };
                let reuse = previous.and_then(|p| p.jwt.as_ref());
                Some(jwt::Verifier::new(j, audience, reuse)?)
            }
            None => None,
        };
        #[cfg(not(feature = "auth"))]
        if a.jwt.is_some() {
            let _ = previous;
            return Err(ConfigError(
                "auth.jwt: this toolgate was built without the `auth` feature".into(),
            ));
        }
        Ok(Some(Authenticator {
            tokens,
            #[cfg(feature = "auth")]
            audience_per_endpoint: a.jwt.as_ref().is_some_and(|j| j.audience.is_empty()),
            #[cfg(feature = "auth")]
            jwt,
            public_url,
            authorization_servers: a.authorization_servers.clone(),
            required_scopes: a.required_scopes.clone(),
        }))
    }

    /// Checks the request's credentials for the endpoint at `path` (`/mcp`, `/name/mcp`).
    pub async fn authenticate(&self, headers: &HeaderMap, path: &str) -> Result<Identity, Refusal> {
        #[cfg(not(feature = "auth"))]
        let _ = path;
        let token = bearer(headers).ok_or(Refusal::Missing)?;
        if let Some(name) = self.static_token(token.as_bytes()) {
            return Ok(Identity { name });
        }
        #[cfg(feature = "auth")]
        if let Some(v) = &self.jwt
            && token.bytes().filter(|b| *b == b'.').count() == 2
        {
            let claims = v.verify(token).await?;
            if self.audience_per_endpoint
                && let Some(base) = &self.public_url
                && !audiences(&claims).any(|a| a.strip_prefix(base.as_str()) == Some(path))
            {
                return Err(Refusal::Invalid(
                    "the token is meant for another endpoint of this gateway (aud)".into(),
                ));
            }
            if !self.required_scopes.is_empty() {
                let granted = scopes(&claims);
                if !self
                    .required_scopes
                    .iter()
                    .all(|s| granted.contains(&s.as_str()))
                {
                    return Err(Refusal::InsufficientScope);
                }
            }
            let name = v.identity(&claims).ok_or_else(|| {
                Refusal::Invalid(format!("the token has no \"{}\" claim", v.identity_claim()))
            })?;
            return Ok(Identity { name: name.into() });
        }
        Err(Refusal::Invalid("the token is not valid here".into()))
    }

    /// Compares the presented token with every configured one, each byte of each, so the
    /// time taken says nothing about how much of a token matched.
    fn static_token(&self, presented: &[u8]) -> Option<Arc<str>> {
        let mut found = None;
        for (token, name) in &self.tokens {
            let len = token.len().max(presented.len());
            let mut diff = u8::from(token.len() != presented.len());
            for i in 0..len {
                diff |= token.get(i).copied().unwrap_or(0) ^ presented.get(i).copied().unwrap_or(0);
            }
            if std::hint::black_box(diff) == 0 {
                found = Some(name.clone());
            }
        }
        found
    }

    /// The client's credentials stay here; the server gets its own, `credential`, if any.
    pub fn to_upstream(&self, headers: &mut HeaderMap, credential: Option<&UpstreamCredential>) {
        headers.remove(AUTHORIZATION);
        if let Some((name, value)) = credential {
            headers.insert(name.clone(), value.clone());
        }
    }

    /// The status and `WWW-Authenticate` value for a refusal at the endpoint at `path`.
    pub fn challenge(&self, refusal: &Refusal, path: &str) -> (StatusCode, String, String) {
        let mut params = Vec::new();
        if let Some(base) = &self.public_url {
            params.push(format!("resource_metadata=\"{base}{METADATA_PATH}{path}\""));
        }
        let (status, message) = match refusal {
            Refusal::Missing => (
                StatusCode::UNAUTHORIZED,
                "Unauthorized: this endpoint needs a bearer token".to_string(),
            ),
            Refusal::Invalid(why) => {
                params.push("error=\"invalid_token\"".into());
                params.push(format!("error_description=\"{}\"", quoted(why)));
                (StatusCode::UNAUTHORIZED, format!("Unauthorized: {why}"))
            }
            Refusal::InsufficientScope => {
                params.push("error=\"insufficient_scope\"".into());
                params.push(format!("scope=\"{}\"", self.required_scopes.join(" ")));
                (
                    StatusCode::FORBIDDEN,
                    format!(
                        "Forbidden: the token lacks the scopes {}",
                        self.required_scopes.join(" ")
                    ),
                )
            }
            Refusal::NotForThisServer => {
                let why = "this client may not use the server at this endpoint";
                params.push("error=\"insufficient_scope\"".into());
                params.push(format!("error_description=\"{why}\""));
                (StatusCode::FORBIDDEN, format!("Forbidden: {why}"))
            }
            Refusal::Unavailable(why) => (
                StatusCode::SERVICE_UNAVAILABLE,
                format!("Service unavailable: tokens cannot be checked now: {why}"),
            ),
        };
        let header = if params.is_empty() {
            "Bearer".to_string()
        } else {
            format!("Bearer {}", params.join(", "))
        };
        (status, header, message)
    }

    /// The RFC 9728 document for the endpoint at `path`, when `public_url` says where it is.
    pub fn metadata(&self, path: &str) -> Option<Value> {
        let base = self.public_url.as_ref()?;
        let mut doc = json!({
            "resource": format!("{base}{path}"),
            "authorization_servers": self.authorization_servers,
            "bearer_methods_supported": ["header"],
        });
        if !self.required_scopes.is_empty() {
            doc["scopes_supported"] = json!(self.required_scopes);
        }
        Some(doc)
    }
}

/// The keys that give a server a credential of toolgate's, as errors name them.
pub(crate) fn credential_keys(cfg: &Config) -> impl Iterator<Item = String> + '_ {
    let default = cfg
        .auth
        .upstream_header
        .as_ref()
        .map(|_| "auth.upstream_header".to_string());
    let named = (cfg.upstreams.iter())
        .filter(|u| u.upstream_header.is_some())
        .map(|u| format!("upstreams {:?}: upstream_header", u.name));
    default.into_iter().chain(named)
}

/// Each endpoint's public URL: the audience a JWT must name when none is configured.
#[cfg(feature = "auth")]
fn endpoint_urls(base: &str, cfg: &Config) -> Vec<String> {
    let mut paths = Vec::new();
    if cfg.upstream.is_some() || !cfg.command.is_empty() {
        paths.push("/mcp".to_string());
    }
    paths.extend(cfg.upstreams.iter().map(|u| format!("/{}/mcp", u.name)));
    paths.into_iter().map(|p| format!("{base}{p}")).collect()
}

/// The token's `aud`: one string or a list of them.
#[cfg(feature = "auth")]
fn audiences(claims: &serde_json::Map<String, serde_json::Value>) -> impl Iterator<Item = &str> {
    use serde_json::Value;
    let (one, many) = match claims.get("aud") {
        Some(Value::String(s)) => (Some(s.as_str()), None),
        Some(Value::Array(a)) => (None, Some(a.iter().filter_map(Value::as_str))),
        _ => (None, None),
    };
    one.into_iter().chain(many.into_iter().flatten())
}

fn bearer(headers: &HeaderMap) -> Option<&str> {
    let v = headers.get(AUTHORIZATION)?.to_str().ok()?;
    let (scheme, token) = v.split_once(' ')?;
    let token = token.trim();
    (scheme.eq_ignore_ascii_case("bearer") && !token.is_empty()).then_some(token)
}

/// The scopes a JWT grants: `scope` (space-separated, RFC 8693) or `scp` (a list or a string).
#[cfg(feature = "auth")]
fn scopes(claims: &serde_json::Map<String, Value>) -> Vec<&str> {
    let mut out = Vec::new();
    for key in ["scope", "scp"] {
        match claims.get(key) {
            Some(Value::String(s)) => out.extend(s.split_whitespace()),
            Some(Value::Array(a)) => out.extend(a.iter().filter_map(Value::as_str)),
            _ => {}
        }
    }
    out
}

/// Text safe inside a quoted-string of a header.
fn quoted(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_ascii() && !c.is_ascii_control())
        .map(|c| if c == '"' || c == '\\' { '\'' } else { c })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_tokens(tokens: &[(&str, &str)]) -> Authenticator {
        Authenticator {
            tokens: tokens
                .iter()
                .map(|(t, n)| (t.as_bytes().into(), Arc::from(*n)))
                .collect(),
            #[cfg(feature = "auth")]
            jwt: None,
            #[cfg(feature = "auth")]
            audience_per_endpoint: false,
            public_url: None,
            authorization_servers: Vec::new(),
            required_scopes: Vec::new(),
        }
    }

    #[test]
    fn static_tokens_match_whole_and_only_whole() {
        let a = with_tokens(&[("s3cret-one", "ci"), ("another-token", "ops")]);
        assert_eq!(a.static_token(b"s3cret-one").as_deref(), Some("ci"));
        assert_eq!(a.static_token(b"another-token").as_deref(), Some("ops"));
        assert!(a.static_token(b"s3cret-on").is_none());
        assert!(a.static_token(b"s3cret-one ").is_none());
        assert!(a.static_token(b"").is_none());
    }

    #[test]
    fn bearer_scheme_is_case_insensitive_and_needs_a_token() {
        let mut h = HeaderMap::new();
        h.insert(AUTHORIZATION, "bearer abc".parse().unwrap());
        assert_eq!(bearer(&h), Some("abc"));
        h.insert(AUTHORIZATION, "Basic abc".parse().unwrap());
        assert_eq!(bearer(&h), None);
        h.insert(AUTHORIZATION, "Bearer ".parse().unwrap());
        assert_eq!(bearer(&h), None);
    }
}
