//! JWT bearer tokens checked against an issuer's JWKS: signature, `iss`, `aud`, `exp` (and
//! `nbf` when present). Only asymmetric algorithms are accepted, and a key's own `alg`, when
//! it names one, must match the token's, so a public key can never be used as an HMAC secret.
//!
//! Keys come from a file (read at load and reload) or a URL: fetched on first use, again
//! every `refresh`, and early (at most every 30 s) when a token names a key id the set lacks,
//! which is how issuers rotate. A failed refresh keeps the keys already held. A URL's
//! certificate is checked against the system's roots and, for an issuer behind a private CA,
//! `ca_file`'s, as an upstream's is.

use super::Refusal;
use crate::config::{ConfigError, Jwt, UpstreamTls};
use crate::error::UpstreamError;
use crate::locks::RwLockExt;
use crate::net::body::{ReadError, read_limited};
use crate::net::client::{HttpClient, Wait};
use crate::net::tls::{TlsFiles, roots};
use bytes::Bytes;
use jsonwebtoken::jwk::{Jwk, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind};
use serde_json::{Map, Value};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

const ACCEPTED: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];
const APPLICATION_JSON: http::HeaderValue = http::HeaderValue::from_static("application/json");
const MAX_JWKS_BYTES: usize = 1024 * 1024;
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);
const UNKNOWN_KID_REFETCH: Duration = Duration::from_secs(30);
/// After a failed fetch, how long requests wait before asking the issuer again.
const FAILED_FETCH_PAUSE: Duration = Duration::from_secs(2);

pub struct Verifier {
    keys: Arc<Keys>,
    /// The checks, one set per accepted algorithm.
    validations: Vec<Validation>,
    identity_claim: String,
}

struct Keys {
    url: Option<http::Uri>,
    client: Option<HttpClient>,
    /// `ca_file` when the client was built.
    trust: TlsFiles,
    refresh: Duration,
    /// The key set and when it was fetched.
    held: RwLock<Option<(Arc<JwkSet>, Instant)>>,
    /// One fetch at a time.
    fetching: tokio::sync::Mutex<Fetches>,
}

#[derive(Default)]
struct Fetches {
    failed: Option<Instant>,
    unknown_key: Option<Instant>,
}

impl Verifier {
    pub fn new(
        j: &Jwt,
        audience: Vec<String>,
        previous: Option<&Verifier>,
    ) -> Result<Verifier, ConfigError> {
        if j.jwks_file.is_some() && j.ca_file.is_some() {
            return Err(ConfigError(
                "auth.jwt.ca_file is for jwks_url; jwks_file is read from disk".into(),
            ));
        }
        let keys = match (&j.jwks_file, &j.jwks_url) {
            (Some(path), None) => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| ConfigError(format!("auth.jwt.jwks_file {path}: {e}")))?;
                let set: JwkSet = serde_json::from_str(&text).map_err(|e| {
                    ConfigError(format!("auth.jwt.jwks_file {path}: not a JWKS: {e}"))
                })?;
                Arc::new(Keys {
                    url: None,
                    client: None,
                    trust: TlsFiles::now(&[None]),
                    refresh: j.refresh,
                    held: RwLock::new(Some((Arc::new(set), Instant::now()))),
                    fetching: Default::default(),
                })
            }
            (None, Some(url)) => {
                let uri = jwks_uri(url)?;
                let trust = TlsFiles::now(&[j.ca_file.as_deref()]);
                match previous.filter(|p| {
                    p.keys.url.as_ref() == Some(&uri)
                        && p.keys.refresh == j.refresh
                        && p.keys.trust == trust
                }) {
                    Some(p) => p.keys.clone(),
                    None => Arc::new(Keys {
                        client: Some(client(&uri, j.ca_file.as_deref())?),
                        url: Some(uri),
                        trust,
                        refresh: j.refresh,
                        held: RwLock::new(None),
                        fetching: Default::default(),
                    }),
                }
            }
            _ => {
                return Err(ConfigError(
                    "auth.jwt: give exactly one of jwks_file or jwks_url".into(),
                ));
            }
        };
        if j.issuer.is_empty() {
            return Err(ConfigError("auth.jwt.issuer is required".into()));
        }
        let validations = ACCEPTED
            .iter()
            .map(|alg| {
                let mut v = Validation::new(*alg);
                v.set_issuer(&[&j.issuer]);
                v.set_audience(&audience);
                v.set_required_spec_claims(&["exp", "iss", "aud"]);
                v.validate_nbf = true;
                v.leeway = j.leeway.as_secs();
                v
            })
            .collect();
        Ok(Verifier {
            keys,
            validations,
            identity_claim: j.identity_claim.clone(),
        })
    }

    pub fn identity_claim(&self) -> &str {
        &self.identity_claim
    }

    /// The client's name: the identity claim, when it is a string.
    pub fn identity<'c>(&self, claims: &'c Map<String, Value>) -> Option<&'c str> {
        claims
            .get(&self.identity_claim)?
            .as_str()
            .filter(|s| !s.is_empty())
    }

    pub async fn verify(&self, token: &str) -> Result<Map<String, Value>, Refusal> {
        let header = jsonwebtoken::decode_header(token)
            .map_err(|_| Refusal::Invalid("the token is not a readable JWT".into()))?;
        // One set of checks per accepted algorithm (the library wants every algorithm a set
        // lists in the key's family), built once: finding none is the refusal.
        let Some(validation) = self
            .validations
            .iter()
            .find(|v| v.algorithms == [header.alg])
        else {
            return Err(Refusal::Invalid(format!(
                "tokens signed with {:?} are not accepted",
                header.alg
            )));
        };
        let kid = header.kid.as_deref();
        let mut set = self.keys.current().await?;
        if find(&set, kid).is_none() && self.keys.url.is_some() {
            set = self.keys.refetch_for_unknown_key().await?;
        }
        let jwk = find(&set, kid).ok_or_else(|| {
            Refusal::Invalid("the token's signing key is not one of the issuer's keys".into())
        })?;
        if let Some(alg) = jwk.common.key_algorithm
            && format!("{alg:?}") != format!("{:?}", header.alg)
        {
            return Err(Refusal::Invalid(
                "the token's algorithm does not match its key".into(),
            ));
        }
        let key = DecodingKey::from_jwk(jwk)
            .map_err(|_| Refusal::Invalid("the token's key cannot be used".into()))?;
        jsonwebtoken::decode::<Map<String, Value>>(token, &key, validation)
            .map(|d| d.claims)
            .map_err(|e| Refusal::Invalid(describe(e.kind()).into()))
    }
}

/// The key a token names; without a `kid`, the set's only key.
fn find<'s>(set: &'s JwkSet, kid: Option<&str>) -> Option<&'s Jwk> {
    match kid {
        Some(k) => set.find(k),
        None if set.keys.len() == 1 => set.keys.first(),
        None => None,
    }
}

fn describe(kind: &ErrorKind) -> &'static str {
    match kind {
        ErrorKind::ExpiredSignature => "the token has expired",
        ErrorKind::ImmatureSignature => "the token is not valid yet (nbf)",
        ErrorKind::InvalidIssuer => "the token was issued by another issuer (iss)",
        ErrorKind::InvalidAudience => "the token is meant for another audience (aud)",
        ErrorKind::InvalidSignature => "the token's signature does not verify",
        ErrorKind::MissingRequiredClaim(_) => "the token lacks a required claim (exp, iss or aud)",
        ErrorKind::InvalidAlgorithm => "the token's algorithm does not match its key",
        _ => "the token is malformed",
    }
}

impl Keys {
    /// The held set, fetched first when there is none or it is older than `refresh`.
    async fn current(&self) -> Result<Arc<JwkSet>, Refusal> {
        match self.held() {
            Some((set, at)) if self.url.is_none() || at.elapsed() < self.refresh => Ok(set),
            _ => self.fetch().await,
        }
    }

    /// A token names a key id the set lacks: the issuer may have rotated. Asked at most every
    /// 30 s, so made-up key ids cannot turn into a stream of fetches.
    async fn refetch_for_unknown_key(&self) -> Result<Arc<JwkSet>, Refusal> {
        let mut fetches = self.fetching.lock().await;
        if let (Some(at), Some((set, _))) = (fetches.unknown_key, self.held())
            && at.elapsed() < UNKNOWN_KID_REFETCH
        {
            return Ok(set);
        }
        fetches.unknown_key = Some(Instant::now());
        self.download_into(&mut fetches).await
    }

    fn held(&self) -> Option<(Arc<JwkSet>, Instant)> {
        self.held.reading().clone()
    }

    /// Fetches, unless another request refreshed the set while this one waited, or a fetch
    /// failed moments ago (then what is held, if anything, stands).
    async fn fetch(&self) -> Result<Arc<JwkSet>, Refusal> {
        let mut fetches = self.fetching.lock().await;
        let failed_recently = fetches
            .failed
            .is_some_and(|t| t.elapsed() < FAILED_FETCH_PAUSE);
        match self.held() {
            Some((set, at)) if at.elapsed() < self.refresh || failed_recently => Ok(set),
            None if failed_recently => Err(Refusal::Unavailable(
                "the issuer's key set could not be fetched; retrying shortly".into(),
            )),
            _ => self.download_into(&mut fetches).await,
        }
    }

    /// A failure keeps what is held, and is an error only when nothing is.
    async fn download_into(&self, fetches: &mut Fetches) -> Result<Arc<JwkSet>, Refusal> {
        match self.download().await {
            Ok(set) => {
                fetches.failed = None;
                let set = Arc::new(set);
                *self.held.writing() = Some((set.clone(), Instant::now()));
                Ok(set)
            }
            Err(e) => {
                fetches.failed = Some(Instant::now());
                tracing::warn!(error = %e, "auth: could not fetch the JWKS");
                self.held()
                    .map(|(s, _)| s)
                    .ok_or(Refusal::Unavailable(e.to_string()))
            }
        }
    }

    async fn download(&self) -> Result<JwkSet, Unfetched> {
        let (Some(uri), Some(client)) = (&self.url, &self.client) else {
            return Err(Unfetched("no JWKS URL".into()));
        };
        let mut headers = http::HeaderMap::new();
        headers.insert(http::header::ACCEPT, APPLICATION_JSON);
        let wait = Wait {
            answer: FETCH_TIMEOUT,
            stream_gap: FETCH_TIMEOUT,
        };
        let resp = client
            .send(http::Method::GET, headers, Bytes::new(), wait)
            .await
            .map_err(|e| format!("{uri}: {}", unfetched(e)))?;
        if !resp.status().is_success() {
            return Err(Unfetched(format!("{uri} answered {}", resp.status())));
        }
        let body = tokio::time::timeout(
            FETCH_TIMEOUT,
            read_limited(resp.into_body(), MAX_JWKS_BYTES),
        )
        .await
        .map_err(|_| format!("{uri}: the key set did not arrive within {FETCH_TIMEOUT:?}"))?
        .map_err(|e| match e {
            // Nothing counts the key set's bytes: never `NoRoom`.
            ReadError::TooLarge | ReadError::NoRoom => {
                format!("{uri}: the key set is over {MAX_JWKS_BYTES} bytes")
            }
            ReadError::Broken(why) => format!("{uri}: {why}"),
        })?;
        serde_json::from_slice(&body).map_err(|e| Unfetched(format!("{uri}: not a JWKS: {e}")))
    }
}

/// Why the key set could not be had: a sentence naming where it was asked for.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Unfetched(String);

impl From<String> for Unfetched {
    fn from(why: String) -> Unfetched {
        Unfetched(why)
    }
}

/// HTTPS, or plain HTTP to a loopback address (a local issuer, tests): keys fetched in the
/// clear from elsewhere could be swapped on the way.
fn jwks_uri(url: &str) -> Result<http::Uri, ConfigError> {
    let uri: http::Uri = url
        .parse()
        .map_err(|e| ConfigError(format!("auth.jwt.jwks_url {url:?}: {e}")))?;
    let host = uri.host().unwrap_or("");
    let loopback = host == "localhost"
        || host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    match uri.scheme_str() {
        Some("https") => Ok(uri),
        Some("http") if loopback => Ok(uri),
        _ => Err(ConfigError(format!(
            "auth.jwt.jwks_url {url:?} must be https (plain http only to a loopback address)"
        ))),
    }
}

/// The JWKS client: the system's roots and `ca_file`'s, and the environment's proxy, as an
/// upstream's. The CA file is read here first so that a problem with it names this key.
fn client(uri: &http::Uri, ca_file: Option<&str>) -> Result<HttpClient, ConfigError> {
    roots(ca_file, false, "auth.jwt.ca_file").map_err(|e| ConfigError(e.to_string()))?;
    let tls = UpstreamTls {
        ca_file: ca_file.map(str::to_owned),
        ..UpstreamTls::default()
    };
    HttpClient::new(uri.clone(), &tls).map_err(|e| ConfigError(format!("auth.jwt.jwks_url: {e}")))
}

/// Why no key set came, in words of the issuer rather than of a tool server.
fn unfetched(e: UpstreamError) -> String {
    match e {
        UpstreamError::Unreachable(why) | UpstreamError::Untrusted(why) => why,
        UpstreamError::Timeout(d) => format!("no answer within {d:?}"),
        other => other.to_string(),
    }
}
