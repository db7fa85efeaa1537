//! The black-box harness: the real `toolgate` binary on `127.0.0.1:0`, real HTTP, and
//! upstreams in this process or in child processes. Every process is killed on drop.
#![allow(dead_code)]

use bytes::Bytes;
use http::{HeaderMap, Method, Request};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use toolgate::demo;

pub mod connect_proxy;

/// A peer on `127.0.0.1:0` that takes every connection and never says a word, until it is
/// dropped: a collector or a proxy that hangs.
pub struct SilentPeer {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl SilentPeer {
    pub async fn start() -> SilentPeer {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let task = tokio::spawn(async move {
            let mut open = Vec::new();
            while let Ok((conn, _)) = listener.accept().await {
                open.push(conn);
            }
        });
        SilentPeer { addr, task }
    }
}

impl Drop for SilentPeer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// `cmd` without the proxy variables of the machine the tests run on: a test's servers are
/// its own, and a test that wants a proxy names one it made.
pub fn without_proxies(mut cmd: Command) -> Command {
    for name in [
        "https_proxy",
        "HTTPS_PROXY",
        "http_proxy",
        "HTTP_PROXY",
        "no_proxy",
        "NO_PROXY",
    ] {
        cmd.env_remove(name);
    }
    cmd
}

/// The binary, started by `launcher` (a program and its arguments, which run the binary
/// with the arguments that follow them; none, the binary itself), without proxies.
pub fn binary_through(launcher: &[String]) -> Command {
    let binary = env!("CARGO_BIN_EXE_toolgate").to_string();
    let mut line = launcher.iter().chain([&binary]);
    let mut cmd = without_proxies(Command::new(line.next().unwrap()));
    cmd.args(line);
    cmd
}
pub mod in_process;
pub mod modes;
pub mod peers;
pub mod processes;
pub mod scripted;
pub mod stdio_gate;
pub mod tls_peer;

pub const ACCEPT: &str = "application/json, text/event-stream";

/// A running `toolgate` process.
pub struct Toolgate {
    child: Child,
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    pub logs: Arc<Mutex<Vec<String>>>,
    _config: Option<tempfile_lite::TempFile>,
    /// Files the configuration names (secrets), removed with this toolgate.
    held: Vec<tempfile_lite::TempFile>,
}

impl Toolgate {
    /// Keeps `files` (which the configuration names) as long as this toolgate runs.
    pub fn holding(mut self, files: impl IntoIterator<Item = tempfile_lite::TempFile>) -> Toolgate {
        self.held.extend(files);
        self
    }

    /// Starts `toolgate serve --upstream URL` with an optional config file body.
    pub async fn serve(upstream: &str, config: Option<&str>) -> Toolgate {
        let mut args = vec!["serve".to_string(), "--upstream".into(), upstream.into()];
        Self::start(&mut args, config).await
    }

    /// [`Self::serve`] with these environment variables besides.
    pub async fn serve_env(upstream: &str, config: Option<&str>, env: &[(&str, &str)]) -> Toolgate {
        let mut args = vec!["serve".to_string(), "--upstream".into(), upstream.into()];
        Self::start_env(&mut args, config, env).await
    }

    pub async fn start(args: &mut Vec<String>, config: Option<&str>) -> Toolgate {
        Self::start_env(args, config, &[]).await
    }

    /// [`Self::start`] with these environment variables besides.
    pub async fn start_env(
        args: &mut Vec<String>,
        config: Option<&str>,
        env: &[(&str, &str)],
    ) -> Toolgate {
        let file = config.map(tempfile_lite::TempFile::new);
        if let Some(f) = &file {
            args.push("--config".into());
            args.push(f.path.display().to_string());
        }
        args.extend(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"].map(String::from));
        let mut tg = Toolgate::start_raw_env(args.clone(), env).await;
        tg._config = file;
        tg
    }

    /// Starts toolgate with exactly these arguments (they must include the listen flags).
    pub async fn start_raw(args: Vec<String>) -> Toolgate {
        Toolgate::start_raw_env(args, &[]).await
    }

    /// The same, with these environment variables besides.
    pub async fn start_raw_env(args: Vec<String>, env: &[(&str, &str)]) -> Toolgate {
        Toolgate::start_raw_through(&[], args, env).await
    }

    /// The same, the binary started by `launcher` (a program and its arguments, which run
    /// the binary with the arguments that follow them); `pid` is then the launcher's.
    pub async fn start_raw_through(
        launcher: &[String],
        args: Vec<String>,
        env: &[(&str, &str)],
    ) -> Toolgate {
        let file: Option<tempfile_lite::TempFile> = None;
        let mut child = binary_through(launcher)
            .args(args.iter())
            .envs(env.iter().copied())
            .env("RUST_LOG", "toolgate=debug,info")
            .env_remove("TOOLGATE_UPSTREAM")
            // The test harness's own variables are no configuration of toolgate's.
            .env_remove("TOOLGATE_PEERS_DIR")
            .env_remove("TOOLGATE_REDIS_SERVER")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the toolgate binary starts");
        let stderr = child.stderr.take().expect("stderr is piped");
        let logs = Arc::new(Mutex::new(Vec::new()));
        let (tx, rx) = tokio::sync::oneshot::channel();
        let sink = logs.clone();
        tokio::spawn(async move {
            let (mut gateway, mut admin, mut tx) = (None, None, Some(tx));
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(rest) = line
                    .split("listening on http://")
                    .nth(1)
                    .or_else(|| line.split("listening on https://").nth(1))
                {
                    // Human lines end with the address and its path; JSON ones with a quote.
                    let addr = rest
                        .split(['/', '"'])
                        .next()
                        .unwrap_or_default()
                        .to_string();
                    if line.contains("admin listening") {
                        admin.get_or_insert(addr);
                    } else {
                        gateway.get_or_insert(addr);
                    }
                    if let (Some(g), Some(a)) = (&gateway, &admin)
                        && let Some(tx) = tx.take()
                    {
                        let _ = tx.send((g.clone(), a.clone()));
                    }
                }
                sink.lock().unwrap().push(line);
            }
        });
        let (addr, admin) = tokio::time::timeout(Duration::from_secs(20), rx)
            .await
            .unwrap_or_else(|_| panic!("toolgate did not start; logs: {:?}", logs.lock().unwrap()))
            .expect("toolgate printed its addresses");
        Toolgate {
            child,
            addr: addr.parse().expect("the address parses"),
            admin: admin.parse().expect("the admin address parses"),
            logs,
            _config: file,
            held: Vec::new(),
        }
    }

    /// Starts `toolgate serve -- COMMAND` (HTTP in front of a stdio server) with an optional
    /// config file body.
    pub async fn in_front_of(command: &[String], config: Option<&str>) -> Toolgate {
        Toolgate::in_front_of_env(command, config, &[]).await
    }

    /// [`Self::in_front_of`] with these environment variables besides.
    pub async fn in_front_of_env(
        command: &[String],
        config: Option<&str>,
        env: &[(&str, &str)],
    ) -> Toolgate {
        Toolgate::in_front_of_through(&[], command, config, env).await
    }

    /// The same, the binary started by `launcher` ([`Self::start_raw_through`]).
    pub async fn in_front_of_through(
        launcher: &[String],
        command: &[String],
        config: Option<&str>,
        env: &[(&str, &str)],
    ) -> Toolgate {
        let mut args = vec!["serve".to_string()];
        let file = config.map(tempfile_lite::TempFile::new);
        if let Some(f) = &file {
            args.extend(["--config".into(), f.path.display().to_string()]);
        }
        args.extend(
            [
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
                "--",
            ]
            .map(String::from),
        );
        args.extend(command.iter().cloned());
        let mut tg = Toolgate::start_raw_through(launcher, args, env).await;
        tg.keep(file);
        tg
    }

    /// Keeps a temporary config file alive as long as toolgate runs.
    pub fn keep(&mut self, file: Option<tempfile_lite::TempFile>) {
        self._config = file;
    }

    pub fn pid(&self) -> u32 {
        self.child.id().expect("still running")
    }

    pub async fn wait(&mut self) -> std::process::ExitStatus {
        self.child.wait().await.expect("toolgate can be waited for")
    }

    /// GET on the admin listener.
    pub async fn admin_get(&self, path: &str) -> Reply {
        request(
            http::Method::GET,
            &format!("http://{}{path}", self.admin),
            &[],
            "",
        )
        .await
    }

    /// SIGHUP: reload the configuration.
    pub fn hup(&self) {
        let sent = std::process::Command::new("kill")
            .args(["-HUP", &self.pid().to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
    }

    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    pub fn logs(&self) -> String {
        self.logs.lock().unwrap().join("\n")
    }

    /// The logs once `ready` holds for them (see [`logs_when`]).
    pub async fn logs_when(&self, ready: impl Fn(&str) -> bool) -> String {
        logs_when(&self.logs, ready).await
    }
}

/// Serves `app` on `127.0.0.1:0` for the rest of the test; returns its address.
pub async fn serve_on_loopback(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    addr
}

/// Collected log lines once `ready` holds for them, or after 10 s (the caller's assertion then
/// says what is missing). A line reaches the test through toolgate's log thread and a pipe, a
/// moment after the answer it belongs to.
pub async fn logs_when(logs: &Mutex<Vec<String>>, ready: impl Fn(&str) -> bool) -> String {
    let text = || logs.lock().unwrap().join("\n");
    for _ in 0..200 {
        let t = text();
        if ready(&t) {
            return t;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    text()
}

impl Drop for Toolgate {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}

/// A tiny temp-file helper, so tests need no extra crate.
pub mod tempfile_lite {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU64, Ordering};

    pub struct TempFile {
        pub path: PathBuf,
    }

    impl TempFile {
        pub fn new(contents: &str) -> TempFile {
            static N: AtomicU64 = AtomicU64::new(0);
            let path = std::env::temp_dir().join(format!(
                "toolgate-test-{}-{}.toml",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::write(&path, contents).expect("temp file writes");
            TempFile { path }
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

/// An HTTP answer, read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {} {}", self.status, self.text()))
    }

    /// The JSON-RPC messages in the answer, whether it came as JSON or as SSE.
    pub fn messages(&self) -> Vec<Value> {
        let parsed = |text: &String| {
            serde_json::from_str(text)
                .unwrap_or_else(|e| panic!("not JSON ({e}): {} {text}", self.status))
        };
        self.message_texts().iter().map(parsed).collect()
    }

    /// [`Reply::messages`] as written, for messages no `Value` holds (a number past f64).
    pub fn message_texts(&self) -> Vec<String> {
        let ct = self
            .headers
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if ct.starts_with("text/event-stream") {
            sse_texts(&self.text())
        } else {
            vec![self.text()]
        }
    }

    /// The one message that answers a request (the last one).
    pub fn answer(&self) -> Value {
        self.messages()
            .pop()
            .unwrap_or_else(|| panic!("no message in {}", self.text()))
    }
}

pub fn sse_messages(text: &str) -> Vec<Value> {
    sse_texts(text)
        .iter()
        .map(|data| serde_json::from_str(data).expect("SSE data is JSON"))
        .collect()
}

/// Each SSE event's data, as written.
pub fn sse_texts(text: &str) -> Vec<String> {
    text.split("\n\n")
        .filter_map(|ev| {
            let data: Vec<&str> = ev
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(|d| d.strip_prefix(' ').unwrap_or(d))
                .collect();
            let data = data.join("\n");
            (!data.trim().is_empty()).then_some(data)
        })
        .collect()
}

pub fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build_http()
}

pub async fn request(
    method: Method,
    url: &str,
    headers: &[(&str, &str)],
    body: impl Into<Bytes>,
) -> Reply {
    let mut req = Request::builder().method(method).uri(url);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(body.into())).unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(30), client().request(req))
        .await
        .expect("an answer within 30 s")
        .expect("the request goes through");
    let (parts, body) = resp.into_parts();
    let body = body.collect().await.expect("the body reads").to_bytes();
    Reply {
        status: parts.status.as_u16(),
        headers: parts.headers,
        body,
    }
}

/// Opens a session's GET stream, where what a server sends on its own arrives.
pub async fn get_stream(url: &str, session: &str) -> hyper::body::Incoming {
    let req = Request::get(url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", session)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = client().request(req).await.unwrap();
    assert_eq!(resp.status(), 200, "the GET stream opens");
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    resp.into_body()
}

/// The text a stream's next data frame carries, within `wait`.
pub async fn next_frame(body: &mut hyper::body::Incoming, wait: Duration) -> String {
    loop {
        let frame = tokio::time::timeout(wait, body.frame())
            .await
            .expect("a frame in time")
            .expect("the stream goes on")
            .unwrap();
        if let Ok(data) = frame.into_data() {
            return String::from_utf8_lossy(&data).into_owned();
        }
    }
}

/// POSTs a JSON-RPC body the way MCP clients do.
pub async fn post(url: &str, session: Option<&str>, body: impl Into<Bytes>) -> Reply {
    let mut headers = vec![("content-type", "application/json"), ("accept", ACCEPT)];
    if let Some(s) = session {
        headers.push(("mcp-session-id", s));
    }
    request(Method::POST, url, &headers, body).await
}

/// Opens a legacy session: `initialize`, then `notifications/initialized`.
pub async fn open_session(url: &str) -> String {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "toolgate-tests", "version": "1"}}});
    let r = post(url, None, init.to_string()).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let session = r
        .headers
        .get("mcp-session-id")
        .expect("a session id")
        .to_str()
        .unwrap()
        .to_string();
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = post(url, Some(&session), note.to_string()).await;
    assert_eq!(r.status, 202, "{}", r.text());
    session
}

/// A masked answer with its reference (a fresh one per answer) written `REF`, so that answers
/// masked apart compare equal.
pub fn referenced(answer: Value) -> Value {
    let meta = &answer["result"]["_meta"];
    let reference = meta["toolgate/upstream_error"]["reference"]
        .as_str()
        .or(meta["toolgate/upstream"]["reference"].as_str())
        .or(answer["error"]["data"]["reference"].as_str())
        .map(str::to_owned);
    match reference {
        Some(r) => serde_json::from_str(&answer.to_string().replace(&r, "REF")).unwrap(),
        None => answer,
    }
}

/// POST of a 2026-07-28 message, with the headers that era asks for (no session).
pub async fn post_modern(url: &str, method: &str, body: Value) -> Reply {
    post_modern_as(url, method, body, &[]).await
}

/// [`post_modern`] with more headers (a client's credential).
pub async fn post_modern_as(url: &str, method: &str, body: Value, more: &[(&str, &str)]) -> Reply {
    post_modern_written(url, method, &body, body.to_string(), more).await
}

/// [`post_modern_as`] sending `text`, which `body` stands for in the headers: a request no
/// `Value` holds (a number past f64).
pub async fn post_modern_written(
    url: &str,
    method: &str,
    body: &Value,
    text: String,
    more: &[(&str, &str)],
) -> Reply {
    // What `Mcp-Name` mirrors: a tool's or prompt's name, a resource's URI.
    let params = &body["params"];
    let name = (params["name"].as_str())
        .or(params["uri"].as_str())
        .unwrap_or_default()
        .to_owned();
    let mut headers = vec![
        ("content-type", "application/json"),
        ("accept", ACCEPT),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", method),
    ];
    if !name.is_empty() {
        headers.push(("mcp-name", name.as_str()));
    }
    headers.extend_from_slice(more);
    request(Method::POST, url, &headers, text).await
}

/// [`post_modern`], its answer's head checked for a stream and its body left to be read as it
/// comes ([`next_frame`]).
pub async fn post_modern_stream(url: &str, method: &str, body: Value) -> hyper::body::Incoming {
    post_modern_stream_as(url, method, body, &[]).await
}

/// [`post_modern_stream`] with more headers (a client's credential).
pub async fn post_modern_stream_as(
    url: &str,
    method: &str,
    body: Value,
    headers: &[(&str, &str)],
) -> hyper::body::Incoming {
    let mut req = Request::post(url)
        .header("content-type", "application/json")
        .header("accept", ACCEPT)
        .header("mcp-protocol-version", "2026-07-28")
        .header("mcp-method", method);
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let req = req.body(Full::new(Bytes::from(body.to_string()))).unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(30), client().request(req))
        .await
        .expect("an answer within 30 s")
        .expect("the request goes through");
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    resp.into_body()
}

/// `toolgate` with `args` and `RUST_BACKTRACE=1`, run to its end: its exit status, stdout
/// and stderr.
pub async fn run_toolgate(args: &[&str]) -> (Option<i32>, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .await
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A loopback port nothing listens on: taken from the system and let go at once.
pub fn closed_port() -> u16 {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    taken.local_addr().unwrap().port()
}

pub fn call(id: i64, tool: &str, args: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}}).to_string()
}

/// The demo server in this process, and toolgate in front of it.
pub async fn demo_behind_toolgate(
    options: demo::Options,
    config: Option<&str>,
) -> (Arc<demo::Demo>, Toolgate, String) {
    let (addr, demo) = demo::spawn(SocketAddr::from(([127, 0, 0, 1], 0)), options)
        .await
        .expect("demo server starts");
    let upstream = format!("http://{addr}/mcp");
    let tg = Toolgate::serve(&upstream, config).await;
    (demo, tg, upstream)
}

/// `toolgate check`'s text output: its summary line, its error and warning lines, and the
/// tools it notes as leaving properties open.
pub fn check_output(out: &str) -> (String, Vec<String>, Vec<String>) {
    let mut lines = out.lines();
    let summary = lines.next().unwrap_or_default().to_string();
    let (notes, rest): (Vec<&str>, Vec<&str>) = lines.partition(|l| l.starts_with("note"));
    let noted = notes
        .iter()
        .map(|l| {
            let tool = l.trim_start_matches("note").trim_start();
            tool.split(": properties left open")
                .next()
                .unwrap()
                .to_string()
        })
        .collect();
    (summary, rest.into_iter().map(String::from).collect(), noted)
}

/// The Python SDK's high-level server (`fixtures/py_server.py mcpserver`) over HTTP on `port`
/// (0: a free one); killed on drop. Returns it and its port.
pub async fn python_http_server(port: u16) -> (Child, u16) {
    let p = tokio::task::spawn_blocking(peers::peers).await.unwrap();
    let mut child = Command::new(&p.python)
        .arg(p.fixtures.join("py_server.py"))
        .args(["mcpserver", "--port", &port.to_string()])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let port = port_line(&mut child).await;
    (child, port)
}

/// The port a fixture prints on the first line of its stdout (piped), within 60 s.
pub async fn port_line(child: &mut Child) -> u16 {
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    tokio::time::timeout(Duration::from_secs(60), lines.next_line())
        .await
        .expect("the fixture prints its port")
        .unwrap()
        .expect("a port line")
        .trim()
        .parse()
        .unwrap()
}

/// The text of a tool result's first content block.
pub fn result_text(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text in {answer}"))
        .to_string()
}

/// A small deterministic generator (xorshift), so that a failure names a case that fails
/// again.
pub struct Gen(pub u64);

impl Gen {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    /// A number below `n`.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    pub fn pick<'a>(&mut self, from: &[&'a str]) -> &'a str {
        from[self.below(from.len())]
    }
}
