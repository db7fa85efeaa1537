//! `https://` upstreams: a real TLS server started here, with a CA made here. A trusted
//! certificate works (over HTTP/2 when the server offers it, HTTP/1.1 otherwise); an unknown
//! CA and a wrong name are refused with a clear error; mutual TLS presents the client
//! certificate; a rotated CA file takes effect without a restart.

use crate::common;
use common::scripted::{Script, Scripted, open_tool};
use common::tempfile_lite::TempFile;
use common::tls_peer::{Ca, serve_tls};
use common::*;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::json;
use std::sync::Arc;

/// Serves the scripted upstream over TLS on `127.0.0.1:0`; with `client_ca`, clients must
/// present a certificate from it. Returns the port.
async fn tls_upstream(server: &Ca, alpn: &[&[u8]], client_ca: Option<&Ca>) -> (u16, Arc<Scripted>) {
    let scripted = Scripted::new(vec![open_tool("echo")]).script(
        "echo",
        Script::Result(json!({"content": [{"type": "text", "text": "over tls"}]})),
    );
    tls_serve(server, alpn, client_ca, scripted).await
}

/// [`tls_upstream`] serving `scripted`.
async fn tls_serve(
    server: &Ca,
    alpn: &[&[u8]],
    client_ca: Option<&Ca>,
    scripted: Scripted,
) -> (u16, Arc<Scripted>) {
    let (router, state) = scripted.router();
    (serve_tls(server, alpn, client_ca, router).await, state)
}

async fn call_echo(tg: &Toolgate) -> serde_json::Value {
    post(&tg.url(), None, call(1, "echo", json!({})))
        .await
        .answer()
}

fn tls_config(lines: &[String]) -> String {
    format!("[upstream_tls]\n{}\n", lines.join("\n"))
}

#[tokio::test]
async fn a_trusted_upstream_answers_over_http2_and_http1() {
    let ca = Ca::new("toolgate test CA");
    let ca_file = TempFile::new(&ca.cert_pem);
    let both: &[&[u8]] = &[b"h2", b"http/1.1"];
    let one: &[&[u8]] = &[b"http/1.1"];
    for alpn in [both, one] {
        let (port, seen) = tls_upstream(&ca, alpn, None).await;
        let config = tls_config(&[format!("ca_file = \"{}\"", ca_file.path.display())]);
        let tg = Toolgate::serve(&format!("https://localhost:{port}/mcp"), Some(&config)).await;
        for _ in 0..3 {
            let a = call_echo(&tg).await;
            assert_eq!(result_text(&a), "over tls", "{alpn:?}: {a}");
        }
        let version = seen.seen_versions.lock().unwrap()[0];
        if alpn.contains(&b"h2".as_slice()) {
            assert_eq!(version, http::Version::HTTP_2, "chosen by ALPN");
        } else {
            assert_eq!(version, http::Version::HTTP_11);
            let host = seen.seen_headers.lock().unwrap()[0]
                .get("host")
                .map(|h| h.to_str().unwrap().to_string());
            assert_eq!(host.as_deref(), Some(&*format!("localhost:{port}")));
        }
    }
}

#[tokio::test]
async fn an_unknown_ca_and_a_wrong_name_are_refused_clearly() {
    let ca = Ca::new("toolgate test CA");
    let (port, seen) = tls_upstream(&ca, &[b"http/1.1"], None).await;
    let url = format!("https://localhost:{port}/mcp");
    // Only the system's roots: the test CA is unknown.
    let tg = Toolgate::serve(&url, None).await;
    let a = call_echo(&tg).await;
    assert_eq!(a["result"]["isError"], true, "{a}");
    let text = result_text(&a);
    assert!(
        text.contains("TLS handshake with")
            && text.contains("invalid peer certificate: UnknownIssuer"),
        "{text}"
    );
    // The right CA, the wrong name.
    let ca_file = TempFile::new(&ca.cert_pem);
    let config = tls_config(&[
        format!("ca_file = \"{}\"", ca_file.path.display()),
        "only_ca_file = true".into(),
        "server_name = \"mcp.example.com\"".into(),
    ]);
    let tg = Toolgate::serve(&url, Some(&config)).await;
    let text = result_text(&call_echo(&tg).await);
    assert!(
        text.contains("certificate not valid for name \"mcp.example.com\"")
            && text.contains("retrying will not help"),
        "{text}"
    );
    assert!(
        seen.seen.lock().unwrap().is_empty(),
        "nothing was sent in clear"
    );
}

#[tokio::test]
async fn mutual_tls_presents_the_client_certificate() {
    let server_ca = Ca::new("server CA");
    let client_ca = Ca::new("client CA");
    let (port, _) = tls_upstream(&server_ca, &[b"h2", b"http/1.1"], Some(&client_ca)).await;
    let url = format!("https://localhost:{port}/mcp");
    let ca_file = TempFile::new(&server_ca.cert_pem);
    let without = tls_config(&[format!("ca_file = \"{}\"", ca_file.path.display())]);
    let tg = Toolgate::serve(&url, Some(&without)).await;
    // A refusal of toolgate's certificate is a configuration problem: retrying will not help.
    // TLS 1.3 sends it after the handshake, so the request's write may meet the closed
    // connection before the alert is read; each call here opens a new connection and runs
    // that race again, and every one must say the same.
    for _ in 0..8 {
        let a = call_echo(&tg).await;
        assert_eq!(a["result"]["isError"], true, "no client certificate: {a}");
        let text = result_text(&a);
        assert!(text.contains("retrying will not help"), "{text}");
    }
    let (chain, key) = client_ca.leaf(&["toolgate"]);
    let (chain, key) = (TempFile::new(&chain), TempFile::new(&key));
    let with = tls_config(&[
        format!("ca_file = \"{}\"", ca_file.path.display()),
        format!("client_cert_file = \"{}\"", chain.path.display()),
        format!("client_key_file = \"{}\"", key.path.display()),
    ]);
    let tg = Toolgate::serve(&url, Some(&with)).await;
    assert_eq!(result_text(&call_echo(&tg).await), "over tls");
}

#[tokio::test]
async fn a_rotated_ca_file_is_read_again_without_a_restart() {
    let old_ca = Ca::new("old CA");
    let new_ca = Ca::new("new CA");
    let (port, _) = tls_upstream(&new_ca, &[b"http/1.1"], None).await;
    let ca_file = TempFile::new(&old_ca.cert_pem);
    let config = tls_config(&[
        format!("ca_file = \"{}\"", ca_file.path.display()),
        "only_ca_file = true".into(),
    ]);
    let tg = Toolgate::serve(&format!("https://localhost:{port}/mcp"), Some(&config)).await;
    let a = call_echo(&tg).await;
    assert_eq!(
        a["result"]["isError"], true,
        "the old CA does not vouch for it: {a}"
    );
    // Rotated in place (a different size, so the change is seen whatever the clock).
    std::fs::write(&ca_file.path, format!("{}\n", new_ca.cert_pem)).unwrap();
    assert_eq!(result_text(&call_echo(&tg).await), "over tls");
}

// ---- TLS at toolgate's own listener ----

/// A TLS client's settings: trusting `ca`, optionally with a client certificate, offering
/// the protocols `alpn`.
fn client_config(ca: &Ca, client: Option<(&str, &str)>, alpn: &[&[u8]]) -> rustls::ClientConfig {
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca.cert_pem.as_bytes()).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let mut config = match client {
        Some((chain, key)) => builder
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(chain.as_bytes())
                    .collect::<Result<_, _>>()
                    .unwrap(),
                PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    config
}

async fn tls_connect(
    addr: std::net::SocketAddr,
    config: rustls::ClientConfig,
) -> Result<tokio_rustls::client::TlsStream<tokio::net::TcpStream>, String> {
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect("localhost".try_into().unwrap(), tcp)
        .await
        .map_err(|e| e.to_string())
}

/// One client connection to toolgate over TLS, trusting `ca`, optionally with a client
/// certificate; requests go one after another on it (keep-alive).
struct TlsClient {
    send: hyper::client::conn::http1::SendRequest<http_body_util::Full<bytes::Bytes>>,
}

impl TlsClient {
    async fn connect(
        addr: std::net::SocketAddr,
        ca: &Ca,
        client: Option<(&str, &str)>,
    ) -> Result<TlsClient, String> {
        let tls = tls_connect(addr, client_config(ca, client, &[b"http/1.1"])).await?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .map_err(|e| e.to_string())?;
        tokio::spawn(conn);
        Ok(TlsClient { send })
    }

    /// A `ping` on this connection; the status, or why there is none.
    async fn ping(&mut self) -> Result<u16, String> {
        use http_body_util::BodyExt;
        let resp = self
            .send
            .send_request(ping_request("/mcp"))
            .await
            .map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        resp.into_body()
            .collect()
            .await
            .map_err(|e| e.to_string())?;
        Ok(status)
    }
}

/// A `ping` to toolgate at `uri` (over HTTP/2, one with its authority).
fn ping_request(uri: &str) -> http::Request<http_body_util::Full<bytes::Bytes>> {
    http::Request::post(uri)
        .header("host", "localhost")
        .header("content-type", "application/json")
        .header("accept", ACCEPT)
        .body(http_body_util::Full::new(bytes::Bytes::from(
            json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string(),
        )))
        .unwrap()
}

/// `[tls]` for a listener with a certificate for `localhost` from `ca`, and `extra` lines;
/// the files it names, kept while they are used.
fn listener_tls(ca: &Ca, extra: &str) -> (String, TempFile, TempFile) {
    let (chain, key) = ca.leaf(&["localhost"]);
    let (cert_file, key_file) = (TempFile::new(&chain), TempFile::new(&key));
    let config = format!(
        "[tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\n{extra}",
        cert_file.path.display(),
        key_file.path.display()
    );
    (config, cert_file, key_file)
}

async fn tls_gateway(config: &str) -> Toolgate {
    let (up, _) = Scripted::new(vec![]).spawn().await;
    Toolgate::serve(&up, Some(config)).await
}

#[tokio::test]
async fn the_listener_serves_tls_and_takes_a_rotated_certificate_without_dropping_connections() {
    let (old_ca, new_ca) = (Ca::new("old listener CA"), Ca::new("new listener CA"));
    let (config, cert_file, key_file) = listener_tls(&old_ca, "");
    let tg = tls_gateway(&config).await;
    assert!(tg.logs().contains("listening on https://"), "{}", tg.logs());
    let mut kept = TlsClient::connect(tg.addr, &old_ca, None).await.unwrap();
    assert_eq!(kept.ping().await, Ok(200));
    // Plain HTTP on the TLS port gets nothing.
    let plain = tokio::time::timeout(
        std::time::Duration::from_secs(5),
        common::client().request(
            http::Request::post(format!("http://{}/mcp", tg.addr))
                .body(http_body_util::Full::new(bytes::Bytes::from_static(b"{}")))
                .unwrap(),
        ),
    )
    .await;
    assert!(!matches!(plain, Ok(Ok(_))), "no answer in clear");

    // cert-manager writes the new pair in place.
    let (chain, key) = new_ca.leaf(&["localhost"]);
    std::fs::write(&key_file.path, &key).unwrap();
    std::fs::write(&cert_file.path, &chain).unwrap();
    let mut rotated = false;
    for _ in 0..40 {
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        if let Ok(mut c) = TlsClient::connect(tg.addr, &new_ca, None).await {
            assert_eq!(c.ping().await, Ok(200));
            rotated = true;
            break;
        }
    }
    assert!(rotated, "new connections get the new certificate");
    assert!(
        TlsClient::connect(tg.addr, &old_ca, None).await.is_err(),
        "the old certificate is gone"
    );
    assert_eq!(
        kept.ping().await,
        Ok(200),
        "the kept connection still works"
    );
    let logs = tg.logs_when(|l| l.contains("TLS files changed")).await;
    assert!(logs.contains("the listener's TLS files changed"), "{logs}");
}

/// The listener speaks the HTTP a TLS client negotiates: HTTP/2 for `h2`, HTTP/1.1 for
/// `http/1.1` or for a client that offers nothing.
#[tokio::test]
async fn the_listener_speaks_the_http_that_alpn_settles() {
    let ca = Ca::new("listener CA");
    let (config, _cert, _key) = listener_tls(&ca, "");
    let tg = tls_gateway(&config).await;
    let tls = tls_connect(tg.addr, client_config(&ca, None, &[b"h2", b"http/1.1"]))
        .await
        .unwrap();
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let (mut send, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
            .await
            .unwrap();
    tokio::spawn(conn);
    let resp = send.send_request(ping_request("https://localhost/mcp"));
    let resp = resp.await.unwrap();
    assert_eq!(
        (resp.status().as_u16(), resp.version()),
        (200, http::Version::HTTP_2)
    );
    assert_eq!(answer_of(resp).await, not_found());
    for alpn in [&[b"http/1.1".as_slice()][..], &[]] {
        let tls = tls_connect(tg.addr, client_config(&ca, None, alpn))
            .await
            .unwrap();
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(conn);
        let resp = send.send_request(ping_request("/mcp")).await.unwrap();
        assert_eq!(
            (resp.status().as_u16(), resp.version()),
            (200, http::Version::HTTP_11),
            "{alpn:?}"
        );
        assert_eq!(answer_of(resp).await, not_found(), "{alpn:?}");
    }
}

/// The JSON-RPC message a response carries.
async fn answer_of(resp: http::Response<hyper::body::Incoming>) -> serde_json::Value {
    use http_body_util::BodyExt;
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&body).unwrap()
}

/// The scripted server's answer to `ping`, passed through as it came.
fn not_found() -> serde_json::Value {
    json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "Method not found"}})
}

#[tokio::test]
async fn the_listener_can_require_client_certificates() {
    let (server_ca, client_ca) = (Ca::new("listener CA"), Ca::new("clients' CA"));
    let client_ca_file = TempFile::new(&client_ca.cert_pem);
    let extra = format!("client_ca_file = \"{}\"\n", client_ca_file.path.display());
    let (config, _cert, _key) = listener_tls(&server_ca, &extra);
    let tg = tls_gateway(&config).await;
    let refused = match TlsClient::connect(tg.addr, &server_ca, None).await {
        Err(_) => true,
        Ok(mut c) => c.ping().await.is_err(),
    };
    assert!(refused, "no client certificate, no request");
    let (chain, key) = client_ca.leaf(&["ci-bot"]);
    let mut c = TlsClient::connect(tg.addr, &server_ca, Some((&chain, &key)))
        .await
        .unwrap();
    assert_eq!(c.ping().await, Ok(200));
}

/// Clients that ask for large streamed answers and stop reading cannot stall the other
/// clients' calls on the HTTP/2 connection to the server that they all share.
#[tokio::test]
async fn slow_readers_do_not_starve_a_shared_http2_upstream() {
    use tokio::io::AsyncWriteExt;
    let ca = Ca::new("toolgate test CA");
    let ca_file = TempFile::new(&ca.cert_pem);
    let big = json!({"jsonrpc": "2.0", "id": "$id", "result": {"content": [{"type": "text", "text": "x".repeat(24 << 20)}]}});
    let scripted = Scripted::new(vec![open_tool("echo"), open_tool("big")])
        .script(
            "echo",
            Script::Result(json!({"content": [{"type": "text", "text": "over tls"}]})),
        )
        .script(
            "big",
            Script::Sse {
                messages: vec![big],
                numbered: false,
            },
        );
    let (port, seen) = tls_serve(&ca, &[b"h2"], None, scripted).await;
    let config = tls_config(&[format!("ca_file = \"{}\"", ca_file.path.display())]);
    let tg = Toolgate::serve(&format!("https://localhost:{port}/mcp"), Some(&config)).await;
    assert_eq!(result_text(&call_echo(&tg).await), "over tls");
    let mut held = Vec::new();
    for id in 0..3 {
        let body = call(10 + id, "big", json!({}));
        let mut s = tokio::net::TcpStream::connect(tg.addr).await.unwrap();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nAccept: {ACCEPT}\r\nContent-Length: {}\r\n\r\n",
            body.len()
        );
        s.write_all(head.as_bytes()).await.unwrap();
        s.write_all(body.as_bytes()).await.unwrap();
        // Never read: the answer backs up into toolgate, and toolgate's stream upstream.
        held.push(s);
    }
    // Past the moment the three answers have filled what the sockets buffer.
    for _ in 0..100 {
        if seen.tool_calls().len() == 4 {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
    let a = tokio::time::timeout(std::time::Duration::from_secs(10), call_echo(&tg))
        .await
        .expect("another client's call is answered while three readers stall");
    assert_eq!(result_text(&a), "over tls");
    assert_eq!(seen.seen_versions.lock().unwrap()[0], http::Version::HTTP_2);
    drop(held);
}
