//! Authentication at the edge, per-client policy and rate limits, against the real binary.
//! Tokens are signed here with the test-only keys in `tests/fixtures/jwt/`; the upstream is
//! the scripted server, which records what reached it.

use crate::common;
use common::connect_proxy::ConnectProxy;
use common::scripted::{Script, Scripted, open_tool};
use common::tls_peer::{Ca, serve_tls, serve_tls_as};
use common::{ACCEPT, Reply, Toolgate, call, request, tempfile_lite::TempFile};
use http::Method;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{SystemTime, UNIX_EPOCH};

const ISSUER: &str = "https://issuer.test";
const PUBLIC: &str = "https://gw.test";
const CLIENT_TOKEN: &str = "ci-bot-secret-token-0123456789";
const UPSTREAM_CREDENTIAL: &str = "Bearer upstream-credential-42";

fn fixture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/jwt/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

struct Key {
    enc: EncodingKey,
    alg: Algorithm,
    kid: &'static str,
}

impl Key {
    fn rsa(file: &str, kid: &'static str) -> Key {
        Key {
            enc: EncodingKey::from_rsa_pem(&fixture(file)).unwrap(),
            alg: Algorithm::RS256,
            kid,
        }
    }

    fn ec(kid: &'static str) -> Key {
        Key {
            enc: EncodingKey::from_ec_pem(&fixture("issuer-ec.pem")).unwrap(),
            alg: Algorithm::ES256,
            kid,
        }
    }

    /// The public half, as an issuer publishes it.
    fn jwk(&self) -> Value {
        let mut jwk =
            serde_json::to_value(Jwk::from_encoding_key(&self.enc, self.alg).unwrap()).unwrap();
        jwk["kid"] = json!(self.kid);
        jwk
    }

    fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(self.alg);
        header.kid = Some(self.kid.into());
        jsonwebtoken::encode(&header, claims, &self.enc).unwrap()
    }
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// Claims toolgate accepts; tests spoil one at a time.
fn good_claims(sub: &str) -> Value {
    json!({"iss": ISSUER, "aud": format!("{PUBLIC}/mcp"), "sub": sub, "exp": now() + 300,
           "iat": now(), "scope": "mcp:tools profile"})
}

fn jwks(keys: &[&Key]) -> String {
    json!({"keys": keys.iter().map(|k| k.jwk()).collect::<Vec<_>>()}).to_string()
}

async fn scripted() -> (String, Arc<Scripted>) {
    Scripted::new(vec![
        open_tool("echo"),
        open_tool("secret"),
        open_tool("other"),
    ])
    .script(
        "echo",
        Script::Result(json!({"content": [{"type": "text", "text": "echoed"}]})),
    )
    .spawn()
    .await
}

/// Toolgate with static tokens, a JWT issuer (`jwks` is a file's content or a URL), an
/// upstream credential and per-client rules; the files live as long as the gateway.
async fn gateway(upstream: &str, jwks_source: &str, extra: &str) -> Toolgate {
    gateway_with_jwt(upstream, jwks_source, "", extra).await
}

/// [`gateway`] with more of `[auth.jwt]`.
async fn gateway_with_jwt(
    upstream: &str,
    jwks_source: &str,
    jwt_extra: &str,
    extra: &str,
) -> Toolgate {
    gateway_with_jwt_env(upstream, jwks_source, jwt_extra, extra, &[]).await
}

/// [`gateway_with_jwt`] with these environment variables.
async fn gateway_with_jwt_env(
    upstream: &str,
    jwks_source: &str,
    jwt_extra: &str,
    extra: &str,
    env: &[(&str, &str)],
) -> Toolgate {
    let token_file = TempFile::new(CLIENT_TOKEN);
    let cred_file = TempFile::new(UPSTREAM_CREDENTIAL);
    let (jwks_line, jwks_file) = if jwks_source.starts_with("http") {
        (format!("jwks_url = \"{jwks_source}\""), None)
    } else {
        let f = TempFile::new(jwks_source);
        (format!("jwks_file = \"{}\"", f.path.display()), Some(f))
    };
    let config = format!(
        r#"
[auth]
public_url = "{PUBLIC}"
authorization_servers = ["{ISSUER}"]
required_scopes = ["mcp:tools"]

[[auth.tokens]]
name = "ci-bot"
file = "{token}"

[auth.jwt]
{jwks_line}
issuer = "{ISSUER}"
{jwt_extra}

[auth.upstream_header]
file = "{cred}"
{extra}
"#,
        token = token_file.path.display(),
        cred = cred_file.path.display(),
    );
    // The secrets are read at load; kept, a reload reads them again.
    Toolgate::serve_env(upstream, Some(&config), env)
        .await
        .holding([token_file, cred_file].into_iter().chain(jwks_file))
}

async fn post_as(tg: &Toolgate, token: Option<&str>, body: String) -> Reply {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/json"), ("accept", ACCEPT)];
    if let Some(a) = &auth {
        headers.push(("authorization", a));
    }
    request(Method::POST, &tg.url(), &headers, body).await
}

fn list() -> String {
    json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"}).to_string()
}

fn challenge(r: &Reply) -> String {
    r.headers
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default()
}

const METADATA: &str =
    "resource_metadata=\"https://gw.test/.well-known/oauth-protected-resource/mcp\"";

#[tokio::test]
async fn static_tokens_let_in_their_client_and_the_upstream_gets_its_own_credential() {
    let (up, seen) = scripted().await;
    let rsa = Key::rsa("issuer-rsa.pem", "k1");
    let tg = gateway(&up, &jwks(&[&rsa]), "").await;

    let missing = post_as(&tg, None, list()).await;
    assert_eq!(missing.status, 401, "{}", missing.text());
    assert_eq!(
        missing.json(),
        json!({"jsonrpc": "2.0", "error": {"code": -32600,
               "message": "Unauthorized: this endpoint needs a bearer token"}})
    );
    assert_eq!(challenge(&missing), format!("Bearer {METADATA}"));

    let wrong = post_as(&tg, Some("ci-bot-secret-token-0123456788"), list()).await;
    assert_eq!(wrong.status, 401);
    assert!(
        challenge(&wrong).contains("error=\"invalid_token\""),
        "{}",
        challenge(&wrong)
    );
    assert!(
        seen.seen.lock().unwrap().is_empty(),
        "refused requests never reach the upstream"
    );

    let ok = post_as(&tg, Some(CLIENT_TOKEN), call(1, "echo", json!({}))).await;
    assert_eq!(ok.status, 200, "{}", ok.text());
    assert_eq!(ok.answer()["result"]["content"][0]["text"], "echoed");
    let headers = seen.seen_headers.lock().unwrap();
    assert!(!headers.is_empty());
    for h in headers.iter() {
        let sent: Vec<_> = h.get_all("authorization").iter().collect();
        assert_eq!(
            sent,
            vec![UPSTREAM_CREDENTIAL],
            "the client's token stays at the edge"
        );
    }
    assert!(
        !tg.logs().contains(CLIENT_TOKEN) && !tg.logs().contains("upstream-credential-42"),
        "no secret in the logs"
    );
}

#[tokio::test]
async fn jwts_are_checked_for_signature_issuer_audience_expiry_and_scope() {
    let (up, seen) = scripted().await;
    let (rsa, ec) = (Key::rsa("issuer-rsa.pem", "k1"), Key::ec("k2"));
    let tg = gateway(&up, &jwks(&[&rsa, &ec]), "").await;

    for (key, name) in [(&rsa, "RS256"), (&ec, "ES256")] {
        let r = post_as(
            &tg,
            Some(&key.sign(&good_claims("alice"))),
            call(1, "echo", json!({})),
        )
        .await;
        assert_eq!(r.status, 200, "{name}: {}", r.text());
        assert_eq!(r.answer()["result"]["content"][0]["text"], "echoed");
    }
    let calls_before = seen.seen.lock().unwrap().len();

    let spoil = |k: &str, v: Value| {
        let mut c = good_claims("alice");
        c[k] = v;
        c
    };
    let rogue = Key::rsa("rogue-rsa.pem", "k1");
    let hs = jsonwebtoken::encode(
        &Header {
            kid: Some("k1".into()),
            ..Header::new(Algorithm::HS256)
        },
        &good_claims("alice"),
        &EncodingKey::from_secret(b"guess"),
    )
    .unwrap();
    let cases = [
        (
            "expired",
            rsa.sign(&spoil("exp", json!(now() - 600))),
            "has expired",
        ),
        (
            "wrong audience",
            rsa.sign(&spoil("aud", json!("https://elsewhere.test/mcp"))),
            "another audience",
        ),
        (
            "wrong issuer",
            rsa.sign(&spoil("iss", json!("https://evil.test"))),
            "another issuer",
        ),
        (
            "bad signature",
            rogue.sign(&good_claims("alice")),
            "signature does not verify",
        ),
        ("symmetric algorithm", hs, "not accepted"),
        (
            "not yet valid",
            rsa.sign(&spoil("nbf", json!(now() + 600))),
            "not valid yet",
        ),
        ("garbage", "a.b.c".to_string(), "not a readable JWT"),
    ];
    for (case, token, says) in cases {
        let r = post_as(&tg, Some(&token), call(2, "echo", json!({}))).await;
        assert_eq!(r.status, 401, "{case}: {}", r.text());
        let c = challenge(&r);
        assert!(
            c.starts_with("Bearer ") && c.contains(METADATA),
            "{case}: {c}"
        );
        assert!(c.contains("error=\"invalid_token\""), "{case}: {c}");
        assert!(
            c.contains(says) && r.text().contains(says),
            "{case}: {c} / {}",
            r.text()
        );
        // The operator reads why too (at debug), and never the token.
        let logs = tg
            .logs_when(|l| l.contains("credentials refused") && l.contains(says))
            .await;
        assert!(
            logs.lines()
                .any(|l| l.contains("credentials refused") && l.contains(says)),
            "{case}: {logs}"
        );
        assert!(!logs.contains(&token), "{case}: no token in the logs");
    }

    let no_scope = rsa.sign(&spoil("scope", json!("profile")));
    let r = post_as(&tg, Some(&no_scope), call(3, "echo", json!({}))).await;
    assert_eq!(r.status, 403, "{}", r.text());
    let c = challenge(&r);
    assert!(
        c.contains("error=\"insufficient_scope\"") && c.contains("scope=\"mcp:tools\""),
        "{c}"
    );

    assert_eq!(
        seen.seen.lock().unwrap().len(),
        calls_before,
        "no refused token reached the upstream"
    );
    let metrics = tg.admin_get("/metrics").await.text();
    assert!(
        metrics.contains("outcome=\"unauthorized\"") && metrics.contains("outcome=\"forbidden\"")
    );
}

#[tokio::test]
async fn protected_resource_metadata_is_served_per_endpoint() {
    let (up, _) = scripted().await;
    let rsa = Key::rsa("issuer-rsa.pem", "k1");
    let tg = gateway(&up, &jwks(&[&rsa]), "").await;
    for path in [
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-protected-resource",
    ] {
        let r = request(Method::GET, &format!("http://{}{path}", tg.addr), &[], "").await;
        assert_eq!(r.status, 200, "{path}");
        assert_eq!(
            r.json(),
            json!({"resource": "https://gw.test/mcp", "authorization_servers": [ISSUER],
                   "bearer_methods_supported": ["header"], "scopes_supported": ["mcp:tools"]})
        );
    }
    let other = request(
        Method::GET,
        &format!("http://{}/.well-known/oauth-authorization-server", tg.addr),
        &[],
        "",
    )
    .await;
    assert_eq!(other.status, 404, "toolgate is not an authorization server");
}

#[tokio::test]
async fn each_client_sees_and_calls_only_its_tools_within_its_rate() {
    let (up, seen) = scripted().await;
    let rsa = Key::rsa("issuer-rsa.pem", "k1");
    let rules = r#"
[clients.ci-bot]
allow_tools = ["echo"]

[clients.alice]
deny_tools = ["secret"]
tool_rate_limits = { echo = "2/minute" }
"#;
    let tg = gateway(&up, &jwks(&[&rsa]), rules).await;
    let alice = rsa.sign(&good_claims("alice"));
    let bob = rsa.sign(&good_claims("bob"));

    let names = |r: &Reply| -> Vec<String> {
        r.answer()["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(
        names(&post_as(&tg, Some(CLIENT_TOKEN), list()).await),
        ["echo"]
    );
    assert_eq!(
        names(&post_as(&tg, Some(&alice), list()).await),
        ["echo", "other"]
    );
    assert_eq!(
        names(&post_as(&tg, Some(&bob), list()).await),
        ["echo", "secret", "other"]
    );

    // Denied for this client: a tool error that says so, not "unknown".
    let denied = post_as(&tg, Some(CLIENT_TOKEN), call(4, "secret", json!({}))).await;
    assert_eq!(
        denied.answer(),
        json!({"jsonrpc": "2.0", "id": 4, "result": {
            "content": [{"type": "text", "text": "The tool \"secret\" is not available: this client's policy does not allow it. Use another tool."}],
            "isError": true,
            "_meta": {"toolgate/policy": {"code": "tool_denied", "tool": "secret"}}}})
    );
    // Unknown is another answer; its suggestions never name a tool the client cannot see.
    let unknown = post_as(&tg, Some(&alice), call(5, "secrets", json!({}))).await;
    let a = unknown.answer();
    assert_eq!(a["error"]["code"], -32602, "{a}");
    assert_eq!(a["error"]["data"]["suggestions"], json!([]), "{a}");
    let unknown = post_as(&tg, Some(&bob), call(5, "secrets", json!({}))).await;
    assert_eq!(
        unknown.answer()["error"]["data"]["suggestions"],
        json!(["secret"])
    );
    // Bob has no rules: the same tool goes through.
    let r = post_as(&tg, Some(&bob), call(6, "secret", json!({}))).await;
    assert!(r.answer()["result"]["isError"].is_null(), "{}", r.text());

    // Alice: two calls a minute to echo, then a tool error with the wait.
    for id in [10, 11] {
        let r = post_as(&tg, Some(&alice), call(id, "echo", json!({}))).await;
        assert_eq!(common::result_text(&r.answer()), "echoed");
    }
    let limited = post_as(&tg, Some(&alice), call(12, "echo", json!({}))).await;
    assert_eq!(limited.status, 200);
    let a = limited.answer();
    // The wait depends on the clock; everything else is fixed.
    let wait = a["result"]["_meta"]["toolgate/rate_limit"]["retryAfterSeconds"]
        .as_u64()
        .unwrap_or_else(|| panic!("{a}"));
    assert!((1..=30).contains(&wait), "{a}");
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 12, "result": {
            "content": [{"type": "text", "text": format!("Rate limit reached: this client may call the tool \"echo\" 2 times per minute. Retry in {wait} s; calls before then are refused the same way.")}],
            "isError": true,
            "_meta": {"toolgate/rate_limit": {"code": "rate_limited", "tool": "echo", "retryAfterSeconds": wait, "limit": "2 times per minute"}}}})
    );
    // Other clients and other tools keep their own budgets.
    let r = post_as(&tg, Some(CLIENT_TOKEN), call(13, "echo", json!({}))).await;
    assert_eq!(common::result_text(&r.answer()), "echoed");
    let alice_echoes = seen
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m["params"]["name"] == "echo")
        .count();
    assert_eq!(
        alice_echoes, 3,
        "two from alice, one from ci-bot; the limited one stayed here"
    );
    let metrics = tg.admin_get("/metrics").await.text();
    assert!(
        metrics.contains("tool=\"echo\",outcome=\"rate_limited\"} 1"),
        "{metrics}"
    );
}

/// An issuer serving its JWKS on loopback, counting fetches; its keys can be rotated.
async fn issuer(keys: String) -> (String, Arc<Mutex<String>>, Arc<AtomicUsize>) {
    let (app, doc, fetches) = issuer_app(keys);
    let url = format!("http://{}/jwks", common::serve_on_loopback(app).await);
    (url, doc, fetches)
}

/// An issuer's JWKS at `/jwks`, its document, and how many times it was fetched.
fn issuer_app(keys: String) -> (axum::Router, Arc<Mutex<String>>, Arc<AtomicUsize>) {
    let doc = Arc::new(Mutex::new(keys));
    let fetches = Arc::new(AtomicUsize::new(0));
    let (d, f) = (doc.clone(), fetches.clone());
    let app = axum::Router::new().route(
        "/jwks",
        axum::routing::get(move || {
            let (d, f) = (d.clone(), f.clone());
            async move {
                f.fetch_add(1, Ordering::SeqCst);
                d.lock().unwrap().clone()
            }
        }),
    );
    (app, doc, fetches)
}

/// An issuer behind a private CA: over HTTPS, its keys are fetched once `auth.jwt.ca_file`
/// holds that CA. While the file holds another, the handshake fails and tokens cannot be
/// checked: 503, the certificate named as the reason, to the client and in the log. A reload
/// reads the file again.
#[tokio::test]
async fn a_jwks_url_behind_a_private_ca_is_trusted_through_its_ca_file() {
    let (up, _) = scripted().await;
    let key = Key::rsa("issuer-rsa.pem", "k1");
    let (ca, other) = (Ca::new("the issuer's private CA"), Ca::new("another CA"));
    let (app, _, fetches) = issuer_app(jwks(&[&key]));
    let port = serve_tls(&ca, &[b"http/1.1"], None, app).await;
    let url = format!("https://localhost:{port}/jwks");
    let token = key.sign(&good_claims("alice"));
    let ca_file = TempFile::new(&other.cert_pem);
    let jwt_extra = format!("ca_file = \"{}\"", ca_file.path.display());
    let tg = gateway_with_jwt(&up, &url, &jwt_extra, "").await;

    let r = post_as(&tg, Some(&token), call(1, "echo", json!({}))).await;
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(
        r.text().contains("tokens cannot be checked") && r.text().contains("UnknownIssuer"),
        "{}",
        r.text()
    );
    assert_eq!(fetches.load(Ordering::SeqCst), 0, "no request got through");
    let logs = tg
        .logs_when(|l| l.contains("could not fetch the JWKS"))
        .await;
    let line = logs
        .lines()
        .find(|l| l.contains("could not fetch the JWKS"))
        .unwrap_or_else(|| panic!("{logs}"));
    assert!(
        line.contains("WARN") && line.contains("UnknownIssuer"),
        "{line}"
    );

    std::fs::write(&ca_file.path, &ca.cert_pem).unwrap();
    tg.hup();
    tg.logs_when(|l| l.contains("configuration reloaded")).await;
    for id in 2..=3 {
        let r = post_as(&tg, Some(&token), call(id, "echo", json!({}))).await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
}

/// An issuer only the proxy the environment names can reach: its keys come through the
/// tunnel, with the proxy's credentials, as an upstream's answers do.
#[tokio::test]
async fn a_jwks_url_is_fetched_through_the_environments_proxy() {
    let (up, _) = scripted().await;
    let key = Key::rsa("issuer-rsa.pem", "k1");
    let ca = Ca::new("the issuer's private CA");
    let (app, _, fetches) = issuer_app(jwks(&[&key]));
    let port = serve_tls_as(&ca, "keys.corp.test", &[b"http/1.1"], None, app).await;
    let proxy = ConnectProxy::start("keys.corp.test", Some("gw:pw")).await;
    let proxy_url = proxy.url("gw:pw@");
    let ca_file = TempFile::new(&ca.cert_pem);
    let jwt_extra = format!("ca_file = \"{}\"", ca_file.path.display());
    let url = format!("https://keys.corp.test:{port}/jwks");
    let env = [("HTTPS_PROXY", proxy_url.as_str())];
    let tg = gateway_with_jwt_env(&up, &url, &jwt_extra, "", &env).await;

    let token = key.sign(&good_claims("alice"));
    let r = post_as(&tg, Some(&token), call(1, "echo", json!({}))).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(fetches.load(Ordering::SeqCst), 1);
    let asked = proxy.asked();
    assert_eq!(asked.len(), 1, "{asked:?}");
    assert_eq!(asked[0].target, format!("keys.corp.test:{port}"));
    assert_eq!(asked[0].credentials.as_deref(), Some("gw:pw"));
}

#[tokio::test]
async fn a_jwks_url_is_fetched_once_and_again_when_the_issuer_rotates_keys() {
    let (up, _) = scripted().await;
    let (k1, k2) = (Key::rsa("issuer-rsa.pem", "k1"), Key::ec("k2"));
    let (url, doc, fetches) = issuer(jwks(&[&k1])).await;
    let tg = gateway(&up, &url, "").await;

    for id in 1..=3 {
        let r = post_as(
            &tg,
            Some(&k1.sign(&good_claims("alice"))),
            call(id, "echo", json!({})),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text());
    }
    assert_eq!(fetches.load(Ordering::SeqCst), 1, "the key set is cached");

    // Rotation: the issuer adds k2 and signs with it; toolgate fetches again on the new kid.
    *doc.lock().unwrap() = jwks(&[&k1, &k2]);
    let r = post_as(
        &tg,
        Some(&k2.sign(&good_claims("alice"))),
        call(4, "echo", json!({})),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(fetches.load(Ordering::SeqCst), 2);

    // A token naming a key nobody published: refused, and no fetch storm.
    let unknown = Key::rsa("rogue-rsa.pem", "k9");
    for id in 5..=7 {
        let r = post_as(
            &tg,
            Some(&unknown.sign(&good_claims("alice"))),
            call(id, "echo", json!({})),
        )
        .await;
        assert_eq!(r.status, 401);
        assert!(
            challenge(&r).contains("not one of the issuer's keys"),
            "{}",
            challenge(&r)
        );
    }
    assert_eq!(
        fetches.load(Ordering::SeqCst),
        2,
        "unknown key ids refetch at most every 30 s"
    );
}

#[tokio::test]
async fn without_auth_credentials_and_discovery_pass_through_untouched() {
    let (up, seen) = Scripted::new(vec![open_tool("echo"), open_tool("guarded")])
        .script(
            "guarded",
            Script::Unauthorized("Bearer resource_metadata=\"http://scripted/.well-known/oauth-protected-resource/mcp\""),
        )
        .spawn()
        .await;
    let tg = Toolgate::serve(&up, None).await;

    let r = post_as(
        &tg,
        Some("client-token-for-upstream"),
        call(1, "echo", json!({})),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    let last = seen.seen_headers.lock().unwrap().last().unwrap().clone();
    assert_eq!(last["authorization"], "Bearer client-token-for-upstream");

    let r = post_as(
        &tg,
        Some("client-token-for-upstream"),
        call(2, "guarded", json!({})),
    )
    .await;
    assert_eq!(r.status, 401, "{}", r.text());
    assert_eq!(
        challenge(&r),
        "Bearer resource_metadata=\"http://scripted/.well-known/oauth-protected-resource/mcp\""
    );

    let doc = request(
        Method::GET,
        &format!(
            "http://{}/.well-known/oauth-protected-resource/mcp",
            tg.addr
        ),
        &[],
        "",
    )
    .await;
    assert_eq!(doc.status, 200, "{}", doc.text());
    assert_eq!(doc.json()["resource"], "http://scripted/mcp");
    assert_eq!(
        doc.json()["served_path"],
        "/.well-known/oauth-protected-resource/mcp"
    );
}

#[tokio::test]
async fn rules_for_named_clients_without_authentication_are_refused_at_startup() {
    let cfg = TempFile::new("[clients.alice]\ndeny_tools = [\"x\"]\n");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["serve", "--upstream", "http://127.0.0.1:9/mcp", "--config"])
        .arg(&cfg.path)
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "off"])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no authentication is configured"), "{err}");
}

#[tokio::test]
async fn discovery_documents_go_to_the_upstream_whose_endpoint_they_name() {
    let (a, _) = Scripted::new(vec![open_tool("echo")]).spawn().await;
    let (b, _) = Scripted::new(vec![open_tool("echo")]).spawn().await;
    let config = format!("[[upstreams]]\nname = \"b\"\nurl = \"{b}\"\n");
    let tg = Toolgate::serve(&a, Some(&config)).await;
    let host = |url: &str| {
        url.trim_start_matches("http://")
            .trim_end_matches("/mcp")
            .to_string()
    };
    for (path, upstream) in [("/mcp", &a), ("/b/mcp", &b)] {
        let doc = request(
            Method::GET,
            &format!(
                "http://{}/.well-known/oauth-protected-resource{path}",
                tg.addr
            ),
            &[],
            "",
        )
        .await;
        assert_eq!(doc.status, 200, "{path}: {}", doc.text());
        assert_eq!(doc.json()["served_by"], host(upstream), "{path}");
        assert_eq!(
            doc.json()["served_path"],
            "/.well-known/oauth-protected-resource/mcp"
        );
    }
}

#[tokio::test]
async fn a_jwt_for_one_endpoint_is_refused_at_another() {
    let (up, seen) = scripted().await;
    let rsa = Key::rsa("issuer-rsa.pem", "k1");
    let second = format!("\n[[upstreams]]\nname = \"b\"\nurl = \"{up}\"\n");
    let tg = gateway(&up, &jwks(&[&rsa]), &second).await;
    let for_b = {
        let mut c = good_claims("alice");
        c["aud"] = json!(format!("{PUBLIC}/b/mcp"));
        rsa.sign(&c)
    };
    let headers = |token: &str| {
        vec![
            ("content-type", "application/json".to_string()),
            ("accept", ACCEPT.to_string()),
            ("authorization", format!("Bearer {token}")),
        ]
    };
    let at = |path: &str, token: &str| {
        let url = format!("http://{}{path}", tg.addr);
        let h = headers(token);
        async move {
            let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
            request(Method::POST, &url, &h, call(1, "echo", json!({}))).await
        }
    };
    let r = at("/mcp", &for_b).await;
    assert_eq!(r.status, 401, "{}", r.text());
    assert!(
        challenge(&r).contains("error=\"invalid_token\""),
        "{}",
        challenge(&r)
    );
    assert!(seen.seen.lock().unwrap().is_empty(), "nothing forwarded");
    let r = at("/b/mcp", &for_b).await;
    assert_eq!(r.status, 200, "{}", r.text());
    // A token naming both endpoints is good at both.
    let mut c = good_claims("alice");
    c["aud"] = json!([format!("{PUBLIC}/mcp"), format!("{PUBLIC}/b/mcp")]);
    let both = rsa.sign(&c);
    assert_eq!(at("/mcp", &both).await.status, 200);
    assert_eq!(at("/b/mcp", &both).await.status, 200);
}

/// Several servers behind one gateway, each with its own credential or none: each gets only
/// its own, under its own header's name, with every request toolgate sends it: a client's
/// call, toolgate's own listing, and for a 2026-07-28 client in front of a handshake-only
/// server the era question and the session toolgate bridges it through.
#[tokio::test]
async fn each_server_gets_its_own_credential_and_no_other() {
    let (main, main_seen) = scripted().await;
    let (plain, plain_seen) = scripted().await;
    let mut billing = Scripted::new(vec![open_tool("echo")])
        .handshake_only()
        .script(
            "echo",
            Script::Result(json!({"content": [{"type": "text", "text": "billed"}]})),
        );
    billing.required_header = Some(("x-api-key", "billing-key-7"));
    let (billing, billing_seen) = billing.spawn().await;
    let token = TempFile::new(CLIENT_TOKEN);
    let main_credential = TempFile::new(UPSTREAM_CREDENTIAL);
    let billing_credential = TempFile::new("billing-key-7");
    let config = format!(
        r#"
[[auth.tokens]]
name = "ci-bot"
file = "{}"

[auth.upstream_header]
file = "{}"

[[upstreams]]
name = "billing"
url = "{billing}"

[upstreams.upstream_header]
name = "x-api-key"
file = "{}"

[[upstreams]]
name = "plain"
url = "{plain}"
"#,
        token.path.display(),
        main_credential.path.display(),
        billing_credential.path.display(),
    );
    let tg = Toolgate::serve(&main, Some(&config)).await.holding([
        token,
        main_credential,
        billing_credential,
    ]);
    let bearer = format!("Bearer {CLIENT_TOKEN}");
    let legacy = [
        ("content-type", "application/json"),
        ("accept", ACCEPT),
        ("authorization", bearer.as_str()),
    ];
    for path in ["/mcp", "/plain/mcp"] {
        let url = format!("http://{}{path}", tg.addr);
        let r = request(Method::POST, &url, &legacy, call(1, "echo", json!({}))).await;
        assert_eq!(
            r.answer(),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "echoed"}]}}),
            "{path}"
        );
    }
    let modern = [
        legacy.as_slice(),
        &[
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "echo"),
        ],
    ]
    .concat();
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "echo", "arguments": {}, "_meta": common::modes::modern_meta()}});
    let url = format!("http://{}/billing/mcp", tg.addr);
    let r = request(Method::POST, &url, &modern, call.to_string()).await;
    assert_eq!(
        r.answer(),
        json!({"jsonrpc": "2.0", "id": 2, "result": {
            "content": [{"type": "text", "text": "billed"}], "resultType": "complete"}})
    );
    assert_eq!(
        billing_seen.methods(),
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call"
        ],
        "asked its era, then bridged"
    );

    let credentials = |seen: &Scripted| -> Vec<(Option<String>, Option<String>)> {
        let text =
            |h: &http::HeaderMap, name: &str| h.get(name).map(|v| v.to_str().unwrap().to_string());
        let headers = seen.seen_headers.lock().unwrap();
        assert!(!headers.is_empty());
        let mut each: Vec<_> = headers
            .iter()
            .map(|h| (text(h, "authorization"), text(h, "x-api-key")))
            .collect();
        each.dedup();
        each
    };
    assert_eq!(
        credentials(&main_seen),
        [(Some(UPSTREAM_CREDENTIAL.to_string()), None)]
    );
    assert_eq!(
        credentials(&billing_seen),
        [(None, Some("billing-key-7".to_string()))]
    );
    assert_eq!(credentials(&plain_seen), [(None, None)]);
    let logs = tg.logs();
    for secret in [CLIENT_TOKEN, "upstream-credential-42", "billing-key-7"] {
        assert!(!logs.contains(secret), "no secret in the logs");
    }
}

/// A server's credential is refused at startup where it cannot be what it says: with no
/// authentication in front of it (any client would borrow it), or given to a server that is
/// not there.
#[tokio::test]
async fn a_server_credential_that_cannot_apply_is_refused_at_startup() {
    let key = TempFile::new("k");
    let token = TempFile::new(CLIENT_TOKEN);
    let (key, token_file) = (key.path.display(), token.path.display());
    let cases = [
        (
            format!(
                "[[upstreams]]\nname = \"billing\"\nurl = \"http://127.0.0.1:9/mcp\"\n[upstreams.upstream_header]\nfile = \"{key}\"\n"
            ),
            true,
            "upstreams \"billing\": upstream_header replaces the client's token, so it needs auth.tokens or auth.jwt",
        ),
        (
            format!(
                "[[auth.tokens]]\nname = \"ci-bot\"\nfile = \"{token_file}\"\n[auth.upstream_header]\nfile = \"{key}\"\n[[upstreams]]\nname = \"billing\"\nurl = \"http://127.0.0.1:9/mcp\"\n"
            ),
            false,
            "auth.upstream_header is the credential of the HTTP server on /mcp (upstream), and there is none; give each of [[upstreams]] its own upstream_header",
        ),
    ];
    for (config, with_upstream, says) in cases {
        let cfg = TempFile::new(&config);
        let mut args = vec!["serve"];
        if with_upstream {
            args.extend(["--upstream", "http://127.0.0.1:9/mcp"]);
        }
        let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(args)
            .arg("--config")
            .arg(&cfg.path)
            .args(["--listen", "127.0.0.1:0", "--admin-listen", "off"])
            .output()
            .await
            .unwrap();
        assert!(!out.status.success(), "{config}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{err}");
    }
}

/// A client's `upstreams` keeps it to the servers named there: at another server's endpoint
/// its good token is refused, 403, and nothing reaches that server; a client without the rule
/// reaches every server. The names are checked at start, and the rule needs clients told
/// apart.
#[tokio::test]
async fn a_client_reaches_only_the_servers_its_rules_name() {
    let (main, main_seen) = scripted().await;
    let (billing, billing_seen) = scripted().await;
    let (alice, bob) = (
        "alice-token-0123456789abcdef",
        "bob-token-0123456789abcdef01",
    );
    let files = [TempFile::new(alice), TempFile::new(bob)];
    let tokens = format!(
        "[[auth.tokens]]\nname = \"alice\"\nfile = \"{}\"\n\n[[auth.tokens]]\nname = \"bob\"\nfile = \"{}\"\n\n",
        files[0].path.display(),
        files[1].path.display()
    );
    let billing_server = format!("[[upstreams]]\nname = \"billing\"\nurl = \"{billing}\"\n\n");
    let config = format!("{tokens}{billing_server}[clients.bob]\nupstreams = [\"default\"]\n");
    let tg = Toolgate::serve(&main, Some(&config)).await.holding(files);
    let at = |path: &str, token: &str| {
        let (url, bearer) = (
            format!("http://{}{path}", tg.addr),
            format!("Bearer {token}"),
        );
        async move {
            let headers = [
                ("content-type", "application/json"),
                ("accept", ACCEPT),
                ("authorization", bearer.as_str()),
            ];
            request(Method::POST, &url, &headers, call(1, "echo", json!({}))).await
        }
    };

    let refused = at("/billing/mcp", bob).await;
    assert_eq!(refused.status, 403, "{}", refused.text());
    assert_eq!(
        refused.json(),
        json!({"jsonrpc": "2.0", "error": {"code": -32600,
               "message": "Forbidden: this client may not use the server at this endpoint"}})
    );
    assert_eq!(
        challenge(&refused),
        "Bearer error=\"insufficient_scope\", error_description=\"this client may not use the server at this endpoint\""
    );
    assert!(billing_seen.seen.lock().unwrap().is_empty());
    let metrics = tg.admin_get("/metrics").await.text();
    let counted =
        "toolgate_requests_total{upstream=\"billing\",method=\"-\",outcome=\"forbidden\"} 1";
    assert!(metrics.contains(counted), "{metrics}");
    let echoed = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "echoed"}]}});
    assert_eq!(at("/mcp", bob).await.answer(), echoed);
    assert_eq!(at("/billing/mcp", alice).await.answer(), echoed);
    let calls = |seen: &Scripted| {
        let seen = seen.seen.lock().unwrap();
        seen.iter().filter(|m| m["method"] == "tools/call").count()
    };
    assert_eq!((calls(&main_seen), calls(&billing_seen)), (1, 1));

    let refusals = [
        (
            format!("{tokens}[clients.bob]\nupstreams = [\"billing\"]\n"),
            "clients.\"bob\".upstreams: no server is named \"billing\" (the servers: default)",
        ),
        (
            "[clients.\"*\"]\nupstreams = [\"default\"]\n".to_string(),
            "clients.\"*\".upstreams needs auth.tokens or auth.jwt: which servers a client reaches is decided where it is authenticated",
        ),
    ];
    for (config, says) in refusals {
        let file = TempFile::new(&config);
        let path = file.path.display().to_string();
        let (code, _, err) = common::run_toolgate(&["config", "check", &path]).await;
        assert_eq!(code, Some(1), "{err}");
        assert!(err.contains(says), "{err}");
    }
}
