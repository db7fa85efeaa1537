//! toolgate in each of its four modes, and as a library layer in an application, driven alike,
//! so that a rule is asserted with the same expectation in every front it applies to.

use super::in_process::InProcess;
use super::stdio_gate::StdioGate;
use super::tempfile_lite::TempFile;
use super::{Toolgate, open_session, post};
use serde_json::{Value, json};

/// The 2026-07-28 envelope a client of that era puts on every request.
pub fn modern_meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
           "io.modelcontextprotocol/clientCapabilities": {}})
}

/// toolgate's four modes: which front, in front of which kind of server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    ServeUpstream,
    StdioUpstream,
    ServeCommand,
    StdioCommand,
    /// `ValidateLayer` in an application whose own service is the HTTP server.
    Layer,
}

impl Mode {
    pub const ALL: [Mode; 4] = [
        Mode::ServeUpstream,
        Mode::StdioUpstream,
        Mode::ServeCommand,
        Mode::StdioCommand,
    ];

    /// The four modes and the in-process layer: every front a rule on one message goes
    /// through.
    pub const EVERY_FRONT: [Mode; 5] = [
        Mode::ServeUpstream,
        Mode::StdioUpstream,
        Mode::ServeCommand,
        Mode::StdioCommand,
        Mode::Layer,
    ];

    /// Whether the server behind toolgate is an HTTP one.
    pub fn to_http(self) -> bool {
        matches!(
            self,
            Mode::ServeUpstream | Mode::StdioUpstream | Mode::Layer
        )
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Mode::ServeUpstream => "serve --upstream",
            Mode::StdioUpstream => "stdio --upstream",
            Mode::ServeCommand => "serve -- CMD",
            Mode::StdioCommand => "stdio -- CMD",
            Mode::Layer => "ValidateLayer",
        })
    }
}

/// A running toolgate and how its client reaches it. A handshake-era client's session (or
/// stdio handshake) is opened on its first request; a 2026-07-28 client needs none.
pub enum Front {
    /// `serve`, or the layer's application.
    Http {
        tg: HttpFront,
        session: Option<String>,
    },
    /// `stdio`, and the configuration file it was started with.
    Stdio {
        g: Box<StdioGate>,
        initialized: bool,
        _config: Option<TempFile>,
    },
}

impl Front {
    /// toolgate in `mode`, in front of the HTTP server at `url` or the stdio server
    /// `command`, as the mode says.
    pub async fn start(mode: Mode, url: &str, command: &[String]) -> Front {
        Front::start_with(mode, url, command, None).await
    }

    /// [`Front::start`] with a configuration file of `config`.
    pub async fn start_with(
        mode: Mode,
        url: &str,
        command: &[String],
        config: Option<&str>,
    ) -> Front {
        match mode {
            Mode::ServeUpstream => Front::http(Toolgate::serve(url, config).await),
            Mode::ServeCommand => Front::http(Toolgate::in_front_of(command, config).await),
            Mode::Layer => Front::Http {
                tg: HttpFront::Layer(InProcess::start(url, config).await),
                session: None,
            },
            Mode::StdioUpstream => {
                let (args, file) = stdio_args(config, &["--upstream", url]);
                Front::stdio(StdioGate::start_args(args), file)
            }
            Mode::StdioCommand => {
                let tail: Vec<&str> = std::iter::once("--")
                    .chain(command.iter().map(String::as_str))
                    .collect();
                let (args, file) = stdio_args(config, &tail);
                Front::stdio(StdioGate::start_args(args), file)
            }
        }
    }

    /// What the front's `/metrics` says (over stdio, the admin listener `--admin-listen`
    /// opens; in the application, the admin router over the layer's gateway).
    pub async fn metrics(&self) -> String {
        match self {
            Front::Http {
                tg: HttpFront::Binary(tg),
                ..
            } => tg.admin_get("/metrics").await.text(),
            Front::Http {
                tg: HttpFront::Layer(app),
                ..
            } => app.metrics().await,
            Front::Stdio { g, .. } => {
                let logs = g
                    .logs_when(|l| l.contains("admin listening on http://"))
                    .await;
                let addr = logs
                    .split("admin listening on http://")
                    .nth(1)
                    .and_then(|rest| rest.split_whitespace().next())
                    .expect("the admin address is logged");
                let url = format!("http://{addr}/metrics");
                super::request(http::Method::GET, &url, &[("host", "127.0.0.1")], "")
                    .await
                    .text()
            }
        }
    }

    /// `serve --upstream URL`.
    pub async fn serve_upstream(url: &str) -> Front {
        Front::start(Mode::ServeUpstream, url, &[]).await
    }

    /// `serve -- CMD`.
    pub async fn serve_command(command: &[String]) -> Front {
        Front::start(Mode::ServeCommand, "", command).await
    }

    /// `stdio --upstream URL`.
    pub fn stdio_upstream(url: &str) -> Front {
        let args = vec!["stdio".into(), "--upstream".into(), url.to_owned()];
        Front::stdio(StdioGate::start_args(args), None)
    }

    /// `stdio -- CMD`.
    pub fn stdio_command(command: &[String]) -> Front {
        let (g, file) = StdioGate::start(command, None);
        Front::stdio(g, file)
    }

    fn http(tg: Toolgate) -> Front {
        Front::Http {
            tg: HttpFront::Binary(Box::new(tg)),
            session: None,
        }
    }

    fn stdio(g: StdioGate, config: Option<TempFile>) -> Front {
        Front::Stdio {
            g: Box::new(g),
            initialized: false,
            _config: config,
        }
    }

    /// A handshake-era request's answer, `line` sent as it is written (over HTTP, in the
    /// client's session).
    pub async fn ask_line(&mut self, line: &str) -> Value {
        let mut all = self.exchange_line(line).await;
        all.pop().expect("an answer")
    }

    /// [`Front::ask_line`]'s answer as written, for answers no `Value` holds (a number past
    /// f64) and lines that are no JSON; what the server sent on the way is passed over.
    pub async fn ask_line_text(&mut self, line: impl AsRef<[u8]>) -> String {
        let line = line.as_ref();
        match self {
            Front::Http { tg, session } => {
                if session.is_none() {
                    *session = Some(open_session(&tg.url()).await);
                }
                let r = post(&tg.url(), session.as_deref(), line.to_vec()).await;
                r.message_texts().pop().expect("an answer")
            }
            Front::Stdio { g, initialized, .. } => {
                if !*initialized {
                    g.initialize().await;
                    *initialized = true;
                }
                g.send(line).await;
                loop {
                    let text = g.recv_text().await;
                    let m: std::collections::HashMap<String, Box<serde_json::value::RawValue>> =
                        serde_json::from_str(&text).expect("a JSON-RPC message");
                    if !m.contains_key("method") {
                        return text;
                    }
                }
            }
        }
    }

    /// [`Front::ask_line`] as a client that negotiated 2025-11-25 sends it: over HTTP with
    /// the `MCP-Protocol-Version` header that era asks of every request after `initialize`
    /// (a server of the TypeScript SDK numbers its streams, and may end them early, only
    /// then). Over stdio, as `ask_line`.
    pub async fn ask_negotiated(&mut self, line: &str) -> Value {
        let Front::Http { tg, session } = self else {
            return self.ask_line(line).await;
        };
        let url = tg.url();
        let session = match session {
            Some(s) => s.clone(),
            None => session.insert(open_session(&url).await).clone(),
        };
        let headers = [
            ("content-type", "application/json"),
            ("accept", super::ACCEPT),
            ("mcp-session-id", session.as_str()),
            ("mcp-protocol-version", "2025-11-25"),
        ];
        let r = super::request(http::Method::POST, &url, &headers, line.to_owned()).await;
        r.answer()
    }

    /// What a handshake-era request brings back, in order: what the server sent on the
    /// way (over HTTP, on the request's stream), then the answer.
    pub async fn exchange_line(&mut self, line: &str) -> Vec<Value> {
        match self {
            Front::Http { tg, session } => {
                if session.is_none() {
                    *session = Some(open_session(&tg.url()).await);
                }
                post(&tg.url(), session.as_deref(), line.to_owned())
                    .await
                    .messages()
            }
            Front::Stdio { g, initialized, .. } => {
                if !*initialized {
                    g.initialize().await;
                    *initialized = true;
                }
                g.send(line).await;
                let mut all = Vec::new();
                loop {
                    let m = g.recv().await;
                    let answer = m.get("method").is_none();
                    all.push(m);
                    if answer {
                        return all;
                    }
                }
            }
        }
    }

    /// What a 2026-07-28 request (`msg`, its `_meta` as the caller wrote it) brings back, in
    /// order: what the server sent on the way (over HTTP, on the request's stream; over stdio,
    /// every notification meanwhile), then the answer.
    pub async fn exchange_modern(&mut self, msg: Value) -> Vec<Value> {
        let line = msg.to_string();
        self.exchange_modern_written(&msg, line).await
    }

    /// [`Front::exchange_modern`] sending `line`, which `msg` stands for (its method, name and
    /// id): a request no `Value` holds (a number past f64).
    pub async fn exchange_modern_written(&mut self, msg: &Value, line: String) -> Vec<Value> {
        match self {
            Front::Http { tg, .. } => {
                let method = msg["method"].as_str().unwrap_or_default().to_owned();
                super::post_modern_written(&tg.url(), &method, msg, line, &[])
                    .await
                    .messages()
            }
            Front::Stdio { g, .. } => {
                g.send(&line).await;
                let mut all = Vec::new();
                loop {
                    let m = g.recv().await;
                    let answer = m.get("method").is_none() && m["id"] == msg["id"];
                    all.push(m);
                    if answer {
                        return all;
                    }
                }
            }
        }
    }

    /// What a handshake-era request brings back when the client cancels it once `reached`
    /// holds of the front's logs (the layer's application has none): everything up to its answer, or up
    /// to a few seconds of silence when none comes (which the specification allows for a
    /// cancelled request).
    pub async fn exchange_cancelled(
        &mut self,
        request: &Value,
        reached: impl Fn(&str) -> bool,
    ) -> Vec<Value> {
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": request["id"], "reason": "the user moved on"}});
        match self {
            Front::Http { tg, session } => {
                if session.is_none() {
                    *session = Some(open_session(&tg.url()).await);
                }
                let (url, sid) = (tg.url(), session.clone());
                let line = request.to_string();
                let call = tokio::spawn(async move { post(&url, sid.as_deref(), line).await });
                let logs = || match &*tg {
                    HttpFront::Binary(tg) => tg.logs(),
                    HttpFront::Layer(_) => String::new(),
                };
                until(logs, &reached).await;
                let r = post(&tg.url(), session.as_deref(), cancel.to_string()).await;
                assert_eq!(r.status, 202, "{}", r.text());
                call.await.unwrap().messages()
            }
            Front::Stdio { g, initialized, .. } => {
                if !*initialized {
                    g.initialize().await;
                    *initialized = true;
                }
                g.send(&request.to_string()).await;
                until(|| g.logs(), &reached).await;
                g.send(&cancel.to_string()).await;
                let mut all = Vec::new();
                while let Ok(Some(line)) =
                    tokio::time::timeout(std::time::Duration::from_secs(4), g.next_line()).await
                {
                    let m: Value = serde_json::from_str(&line).unwrap();
                    let answer = m.get("method").is_none();
                    all.push(m);
                    if answer {
                        break;
                    }
                }
                all
            }
        }
    }

    /// A notification, sent as it is written (over HTTP, in the client's session); what
    /// comes back over HTTP (its status and body), nothing over stdio, where nothing may.
    pub async fn notify_line(&mut self, line: &str) -> Option<(u16, String)> {
        match self {
            Front::Http { tg, session } => {
                if session.is_none() {
                    *session = Some(open_session(&tg.url()).await);
                }
                let r = post(&tg.url(), session.as_deref(), line.to_owned()).await;
                Some((r.status, r.text()))
            }
            Front::Stdio { g, initialized, .. } => {
                if !*initialized {
                    g.initialize().await;
                    *initialized = true;
                }
                g.send(line).await;
                None
            }
        }
    }

    /// A handshake-era request's answer.
    pub async fn ask(&mut self, msg: Value) -> Value {
        self.ask_line(&msg.to_string()).await
    }

    /// A 2026-07-28 request's answer: `msg` gains the envelope, and over HTTP goes without
    /// a session, with the headers that era asks for.
    pub async fn ask_modern(&mut self, mut msg: Value) -> Value {
        msg["params"]["_meta"] = modern_meta();
        match self {
            Front::Http { tg, .. } => {
                let method = msg["method"].as_str().unwrap_or_default().to_owned();
                super::post_modern(&tg.url(), &method, msg).await.answer()
            }
            Front::Stdio { g, .. } => g.ask_past_notifications(msg).await,
        }
    }
}

/// What a client reaches over HTTP: the binary's `serve`, or an application with the layer.
pub enum HttpFront {
    Binary(Box<Toolgate>),
    Layer(InProcess),
}

impl HttpFront {
    pub fn url(&self) -> String {
        match self {
            HttpFront::Binary(tg) => tg.url(),
            HttpFront::Layer(app) => app.url(),
        }
    }
}

/// `toolgate stdio` with an admin listener, a configuration file of `config`, then `tail`
/// (the server); the file lives as long as the front.
fn stdio_args(config: Option<&str>, tail: &[&str]) -> (Vec<String>, Option<TempFile>) {
    let file = config.map(TempFile::new);
    let mut args = vec![
        "stdio".to_string(),
        "--admin-listen".into(),
        "127.0.0.1:0".into(),
    ];
    if let Some(f) = &file {
        args.extend(["--config".to_string(), f.path.display().to_string()]);
    }
    args.extend(tail.iter().map(|a| a.to_string()));
    (args, file)
}

/// Every front before one server, as an SDK client of its own reaches each: a URL, or
/// `stdio:` and a JSON array holding the command that launches toolgate. The fronts over
/// HTTP live as long as this; a stdio front is the client's own child.
pub struct Reached {
    pub fronts: Vec<(Mode, String)>,
    serving: (Toolgate, Toolgate, InProcess),
}

impl Reached {
    /// The fronts before the server at `url` and the same server launched by `command`.
    pub async fn start(url: &str, command: &[String]) -> Reached {
        let toolgate = env!("CARGO_BIN_EXE_toolgate");
        let serving = (
            Toolgate::serve(url, None).await,
            Toolgate::in_front_of(command, None).await,
            InProcess::start(url, None).await,
        );
        let mut launched = vec![toolgate.to_string(), "stdio".into(), "--".into()];
        launched.extend(command.iter().cloned());
        let stdio = |command: Value| format!("stdio:{command}");
        let fronts = Mode::EVERY_FRONT
            .into_iter()
            .map(|mode| {
                let target = match mode {
                    Mode::ServeUpstream => serving.0.url(),
                    Mode::ServeCommand => serving.1.url(),
                    Mode::Layer => serving.2.url(),
                    Mode::StdioUpstream => stdio(json!([toolgate, "stdio", "--upstream", url])),
                    Mode::StdioCommand => stdio(json!(launched)),
                };
                (mode, target)
            })
            .collect();
        Reached { fronts, serving }
    }

    /// Ends both toolgates as an operator does (SIGTERM), so that each stops the server it
    /// launched: one that outlives its stdin (server-everything with its timers on) would
    /// otherwise outlive the test, as it does a toolgate killed outright.
    pub async fn stop(self) {
        let (mut over_http, mut over_stdio, _) = self.serving;
        for tg in [&mut over_http, &mut over_stdio] {
            let pid = nix::unistd::Pid::from_raw(tg.pid() as i32);
            nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
            tg.wait().await;
        }
    }
}

/// Waits, a bounded time, until `reached` holds of what `logs` gives.
async fn until(logs: impl Fn() -> String, reached: &impl Fn(&str) -> bool) {
    for _ in 0..200 {
        if reached(&logs()) {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
