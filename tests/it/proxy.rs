//! Outbound HTTP through the forward proxy the environment names (`HTTPS_PROXY`,
//! `HTTP_PROXY`): a proxy made here, the only one that knows the server's name, in front of
//! an HTTPS MCP server whose certificate a CA made here signed for that name, or a plain
//! HTTP one. Every front that has an HTTP server behind it reaches it through the proxy
//! with the proxy's credentials (an HTTPS server through a tunnel, TLS end to end; a plain
//! one by requests sent to the proxy whole), and so does the trace exporter (a JWKS URL:
//! `auth.rs`); `/readyz` asks the same way; a proxy's refusal is an error naming its status;
//! a silent proxy holds a call only until its deadline; a loopback server is reached
//! directly; a proxy URL that cannot be used stops toolgate without showing its password.

use crate::common;
use common::connect_proxy::{Asked, ConnectProxy};
use common::scripted::{Script, Scripted, open_tool};
use common::stdio_gate::StdioGate;
use common::tempfile_lite::TempFile;
use common::tls_peer::{Ca, serve_tls, serve_tls_as};
use common::*;
use serde_json::{Value, json};
use std::sync::Arc;

const SERVER_NAME: &str = "mcp.corp.test";
const CREDENTIALS: &str = "gw-user:s3cret pass";
/// [`CREDENTIALS`] as a URL's user info.
const USER_INFO: &str = "gw-user:s3cret%20pass@";

/// An MCP server with one tool whose schema wants a string: over HTTPS as [`SERVER_NAME`]
/// with `ca`, else over plain HTTP.
async fn server(ca: Option<&Ca>) -> (u16, Arc<Scripted>) {
    let tool = json!({"name": "greet", "inputSchema": {
        "type": "object",
        "properties": {"name": {"type": "string"}},
        "required": ["name"],
    }});
    let scripted = Scripted::new(vec![tool, open_tool("echo")]).script(
        "greet",
        Script::Result(json!({"content": [{"type": "text", "text": "through the proxy"}]})),
    );
    let (router, state) = scripted.router();
    let port = match ca {
        Some(ca) => serve_tls_as(ca, SERVER_NAME, &[b"h2", b"http/1.1"], None, router).await,
        None => serve_on_loopback(router).await.port(),
    };
    (port, state)
}

fn tls_config(ca_file: &TempFile) -> String {
    format!("[upstream_tls]\nca_file = \"{}\"\n", ca_file.path.display())
}

/// A valid call answered by the server and an invalid one by toolgate, in `serve --upstream`
/// or `stdio --upstream`.
async fn calls_in(
    mode: &str,
    url: &str,
    config: &str,
    env: &[(&str, &str)],
) -> (Value, Value, String) {
    let valid = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "greet", "arguments": {"name": "Ada"}}});
    let invalid = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "greet", "arguments": {"name": true}}});
    match mode {
        "serve --upstream" => {
            let tg = Toolgate::serve_env(url, Some(config), env).await;
            let session = open_session(&tg.url()).await;
            let a = post(&tg.url(), Some(&session), valid.to_string())
                .await
                .answer();
            let b = post(&tg.url(), Some(&session), invalid.to_string())
                .await
                .answer();
            (a, b, tg.logs())
        }
        _ => {
            let config = TempFile::new(config);
            let args = [
                "stdio",
                "--config",
                &config.path.display().to_string(),
                "--upstream",
                url,
            ]
            .map(String::from)
            .to_vec();
            let mut g = StdioGate::start_args_env(args, env);
            g.initialize().await;
            let a = g.ask(valid).await;
            let b = g.ask(invalid).await;
            (a, b, g.logs())
        }
    }
}

#[tokio::test]
async fn a_server_is_reached_through_the_proxy_in_every_mode() {
    let ca = Ca::new("toolgate test CA");
    let ca_file = TempFile::new(&ca.cert_pem);
    for (scheme, mode) in [
        ("https", "serve --upstream"),
        ("https", "stdio --upstream"),
        ("http", "serve --upstream"),
        ("http", "stdio --upstream"),
    ] {
        let https = scheme == "https";
        let case = format!("{scheme}, {mode}");
        let (port, seen) = server(https.then_some(&ca)).await;
        let proxy = ConnectProxy::start(SERVER_NAME, Some(CREDENTIALS)).await;
        let proxy_url = proxy.url(USER_INFO);
        let url = format!("{scheme}://{SERVER_NAME}:{port}/mcp");
        let (var, config) = if https {
            ("HTTPS_PROXY", tls_config(&ca_file))
        } else {
            ("HTTP_PROXY", String::new())
        };
        let env = [(var, proxy_url.as_str()), ("NO_PROXY", "other.corp.test")];
        let (valid, invalid, logs) = calls_in(mode, &url, &config, &env).await;

        let through = json!({"jsonrpc": "2.0", "id": 1,
            "result": {"content": [{"type": "text", "text": "through the proxy"}]}});
        assert_eq!(valid, through, "{case}");
        let problem = "expected a string, got boolean true";
        let refused = json!({"jsonrpc": "2.0", "id": 2, "result": {
            "_meta": {"toolgate/validation": {"code": "invalid_arguments",
                "parameter_errors": {"/name": problem}, "tool": "greet"}},
            "content": [{"type": "text", "text": format!("Invalid arguments for tool \"greet\" \
                (1 problem):\n- name: {problem}\nCorrect the arguments and call the tool again.")}],
            "isError": true}});
        assert_eq!(invalid, refused, "{case}");
        assert_eq!(
            seen.tool_calls().len(),
            1,
            "{case}: only the valid call reaches the server"
        );
        // A tunnel to an HTTPS server; a plain server's requests sent to the proxy whole.
        let target = if https {
            format!("{SERVER_NAME}:{port}")
        } else {
            url.clone()
        };
        let expected = Asked {
            target,
            credentials: Some(CREDENTIALS.into()),
        };
        let asked = proxy.asked();
        assert!(!asked.is_empty(), "{case}");
        assert!(asked.iter().all(|a| *a == expected), "{case}: {asked:?}");
        // Every request to a plain server went to the proxy: the client's handshake,
        // toolgate's own listing and the valid call at least.
        assert!(https || asked.len() >= 4, "{case}: {asked:?}");
        assert!(
            logs.contains("connecting through a proxy") && logs.contains(&proxy.addr.to_string()),
            "{case}: {logs}"
        );
        assert!(
            !logs.contains("s3cret"),
            "{case}: the proxy's password is never logged: {logs}"
        );
    }
}

/// A proxy that wants credentials toolgate does not have refuses the tunnel to an HTTPS
/// server, and a plain server's request sent to it: either is the way to the server
/// failing, with the proxy's status and where to give its credentials.
#[tokio::test]
async fn a_proxy_that_wants_credentials_says_so_in_the_answer() {
    let ca = Ca::new("toolgate test CA");
    let ca_file = TempFile::new(&ca.cert_pem);
    for https in [true, false] {
        let (port, seen) = server(https.then_some(&ca)).await;
        let proxy = ConnectProxy::start(SERVER_NAME, Some(CREDENTIALS)).await;
        let proxy_url = proxy.url("");
        let hint = "407 Proxy Authentication Required (give the proxy's credentials in its \
                    URL: http://user:password@host:port)";
        let (url, var, config, reason) = if https {
            (
                format!("https://{SERVER_NAME}:{port}/mcp"),
                "https_proxy",
                tls_config(&ca_file),
                format!(
                    "could not reach the tool server: connecting to {SERVER_NAME}:{port}: \
                     the proxy {} refused the tunnel: {hint}",
                    proxy.addr
                ),
            )
        } else {
            (
                format!("http://{SERVER_NAME}:{port}/mcp"),
                "http_proxy",
                String::new(),
                format!(
                    "could not reach the tool server: a proxy on the way refused the request: \
                     {hint}"
                ),
            )
        };
        let tg = Toolgate::serve_env(&url, Some(&config), &[(var, &proxy_url)]).await;
        let a = post(&tg.url(), None, call(1, "echo", json!({})))
            .await
            .answer();
        let unavailable = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "_meta": {"toolgate/upstream": {"code": "upstream_unavailable", "reason": reason}},
            "content": [{"type": "text", "text": format!("The tool server is unavailable: \
                {reason}. Retrying in a moment may help if the server is restarting.")}],
            "isError": true}});
        assert_eq!(a, unavailable, "{url}");
        assert!(
            seen.methods().is_empty(),
            "{url}: nothing reached the server"
        );
    }
}

#[tokio::test]
async fn a_loopback_server_is_reached_directly() {
    let ca = Ca::new("toolgate test CA");
    let ca_file = TempFile::new(&ca.cert_pem);
    let scripted = Scripted::new(vec![open_tool("echo")]).script(
        "echo",
        Script::Result(json!({"content": [{"type": "text", "text": "direct"}]})),
    );
    let (router, _) = scripted.router();
    let port = serve_tls(&ca, &[b"http/1.1"], None, router).await;
    let proxy = ConnectProxy::start(SERVER_NAME, None).await;
    let proxy_url = proxy.url("");
    let url = format!("https://localhost:{port}/mcp");
    let tg = Toolgate::serve_env(
        &url,
        Some(&tls_config(&ca_file)),
        &[("HTTPS_PROXY", &proxy_url)],
    )
    .await;
    let a = post(&tg.url(), None, call(1, "echo", json!({})))
        .await
        .answer();
    let direct = json!({"jsonrpc": "2.0", "id": 1,
        "result": {"content": [{"type": "text", "text": "direct"}]}});
    assert_eq!(a, direct);
    assert!(proxy.asked().is_empty(), "{:?}", proxy.asked());
}

#[tokio::test]
async fn a_proxy_url_that_cannot_be_used_stops_toolgate_without_its_password() {
    for (value, why) in [
        (
            "socks5://gw-user:s3cret@proxy.corp.test:1080",
            "only an http:// proxy is supported",
        ),
        ("http://gw-user:s3cret@proxy.corp.test:3128:9", "not a URL"),
    ] {
        let run = without_proxies(tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate")))
            .args([
                "serve",
                "--upstream",
                "https://mcp.corp.test/mcp",
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "off",
            ])
            .env("HTTPS_PROXY", value)
            .kill_on_drop(true)
            .output();
        let out = tokio::time::timeout(std::time::Duration::from_secs(20), run)
            .await
            .expect("toolgate stops")
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{value}: {stderr}");
        assert!(
            stderr.contains(&format!("HTTPS_PROXY: {why}")),
            "{value}: {stderr}"
        );
        assert!(!stderr.contains("s3cret"), "{stderr}");
    }
}

/// The trace collector is a server like any other: an `http://` one through `HTTP_PROXY`,
/// its requests sent to the proxy whole, while the loopback upstream beside it is reached
/// directly.
#[tokio::test]
async fn spans_reach_a_collector_through_the_proxy() {
    let (endpoint, got) = crate::telemetry::collector().await;
    let port = endpoint.rsplit(':').next().unwrap().to_owned();
    let collector = format!("http://collector.corp.test:{port}");
    let proxy = ConnectProxy::start("collector.corp.test", None).await;
    let proxy_url = proxy.url("");
    let (up, _) = Scripted::new(vec![open_tool("echo")]).spawn().await;
    let env = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", collector.as_str()),
        ("HTTP_PROXY", proxy_url.as_str()),
    ];
    let tg = Toolgate::serve_env(&up, None, &env).await;
    post(&tg.url(), None, call(1, "echo", json!({}))).await;
    for _ in 0..100 {
        if !got.lock().unwrap().is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        !got.lock().unwrap().is_empty(),
        "spans arrived: {}",
        tg.logs()
    );
    let asked = proxy.asked();
    assert!(
        !asked.is_empty()
            && asked
                .iter()
                .all(|a| a.target == format!("{collector}/v1/traces")),
        "{asked:?}"
    );
}

/// A proxy that takes the connection and never answers `CONNECT` holds a call no longer than
/// its deadline (`limits.upstream_timeout`).
#[tokio::test]
async fn a_silent_proxy_holds_a_call_no_longer_than_its_deadline() {
    let silent = SilentPeer::start().await;
    let proxy_url = format!("http://{}", silent.addr);
    let config = "[limits]\nupstream_timeout = \"1s\"\n";
    let url = format!("https://{SERVER_NAME}/mcp");
    let tg = Toolgate::serve_env(&url, Some(config), &[("HTTPS_PROXY", &proxy_url)]).await;
    let a = post(&tg.url(), None, call(1, "echo", json!({})))
        .await
        .answer();
    let reason = "the tool server did not answer within 1s";
    let unavailable = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "_meta": {"toolgate/upstream": {"code": "upstream_unavailable", "reason": reason}},
        "content": [{"type": "text", "text": format!("The tool server is unavailable: \
            {reason}. It may still be working or overloaded; retrying later may help.")}],
        "isError": true}});
    assert_eq!(a, unavailable);
}

/// `/readyz` asks for a server the way its requests go: through the proxy's tunnel for an
/// HTTPS server (on 443 when its URL names no port), to the proxy for a plain one, never
/// straight to a name only the proxy knows.
#[tokio::test]
async fn readiness_goes_the_way_requests_go() {
    let ca = Ca::new("toolgate test CA");
    let ca_file = TempFile::new(&ca.cert_pem);
    let ready = json!({"ready": true, "upstreams": {"default": {"ready": true}}});
    for https in [true, false] {
        let (port, _) = server(https.then_some(&ca)).await;
        let proxy = ConnectProxy::start(SERVER_NAME, Some(CREDENTIALS)).await;
        let proxy_url = proxy.url(USER_INFO);
        let (url, var, config) = if https {
            (
                format!("https://{SERVER_NAME}:{port}/mcp"),
                "HTTPS_PROXY",
                tls_config(&ca_file),
            )
        } else {
            (
                format!("http://{SERVER_NAME}:{port}/mcp"),
                "HTTP_PROXY",
                String::new(),
            )
        };
        let tg = Toolgate::serve_env(&url, Some(&config), &[(var, &proxy_url)]).await;
        let r = tg.admin_get("/readyz?upstream=default").await;
        assert_eq!((r.status, r.json()), (200, ready.clone()), "{url}");
        if https {
            let tunnel = Asked {
                target: format!("{SERVER_NAME}:{port}"),
                credentials: Some(CREDENTIALS.into()),
            };
            assert_eq!(proxy.asked(), vec![tunnel], "{url}");
        } else {
            assert!(proxy.asked().is_empty(), "{url}: {:?}", proxy.asked());
        }
    }

    let proxy = ConnectProxy::start(SERVER_NAME, Some(CREDENTIALS)).await;
    let proxy_url = proxy.url(USER_INFO);
    let url = format!("https://{SERVER_NAME}/mcp");
    let config = tls_config(&ca_file);
    let tg = Toolgate::serve_env(&url, Some(&config), &[("HTTPS_PROXY", &proxy_url)]).await;
    let r = tg.admin_get("/readyz?upstream=default").await;
    assert_eq!(r.status, 503, "{}", r.text());
    let tunnel = Asked {
        target: format!("{SERVER_NAME}:443"),
        credentials: Some(CREDENTIALS.into()),
    };
    assert_eq!(proxy.asked(), vec![tunnel]);
}
