//! The interop table (docs/testing.md): the official SDK clients (Python 2.3 in its three
//! connect modes, Python 1.30, TypeScript 1.32, Rust's rmcp 3.11 opened with the handshake and
//! with discovery first) × toolgate's four modes and `ValidateLayer` ×
//! three kinds of server (server-everything, of the handshake era only; the Python SDK 2.3
//! server, of both eras; the same server speaking only 2026-07-28). Each client, through
//! toolgate, must see the same tools and get the same answers as a direct connection of its
//! own era: itself, where it can reach the server directly, else a client of the server's
//! era. The answers include an elicitation, a sampling request and `roots/list`, which each
//! client answers with its own callbacks through whatever bridge toolgate puts between them.

use crate::common;
use common::modes::{Mode, Reached};
use common::peers::{
    HttpPeer, peers, python_1_client, python_client_answering, python_http, rmcp_client,
    server_everything_http, typescript_client_answering,
};
use serde_json::{Value, json};

/// An official SDK client, with callbacks that answer elicitation (as Ada), sampling ("hi from
/// the model") and roots (file:///work/ada).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Client {
    /// The Python SDK 2.3 in a connect mode: `legacy`, `auto` or `2026-07-28`.
    Python(&'static str),
    Python1,
    TypeScript,
    /// rmcp opened as `initialize` or `auto` says (`server/discover` first).
    Rust(&'static str),
}

impl Client {
    const ALL: [Client; 7] = [
        Client::Python("legacy"),
        Client::Python("auto"),
        Client::Python("2026-07-28"),
        Client::Python1,
        Client::TypeScript,
        Client::Rust("initialize"),
        Client::Rust("auto"),
    ];

    async fn run(self, server: &str, calls: &[(&str, Value)]) -> Value {
        match self {
            Client::Python(mode) => python_client_answering(server, mode, calls).await,
            Client::Python1 => python_1_client(server, calls).await,
            Client::TypeScript => typescript_client_answering(server, calls).await,
            Client::Rust(lifecycle) => rmcp_client(lifecycle, server, calls).await,
        }
    }

    /// Whether it reaches `server` directly: a client of one era only, a server of that era.
    fn reaches(self, server: Server) -> bool {
        match (self, server) {
            (Client::Python("auto") | Client::Rust("auto"), _) | (_, Server::DualEra) => true,
            (Client::Python("2026-07-28"), s) => s == Server::ModernOnly,
            (_, s) => s == Server::HandshakeOnly,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Server {
    HandshakeOnly,
    DualEra,
    ModernOnly,
}

impl Server {
    const ALL: [Server; 3] = [Server::HandshakeOnly, Server::DualEra, Server::ModernOnly];

    /// A client of the server's own era, whose direct answers stand for every client's.
    fn own_client(self) -> Client {
        match self {
            Server::ModernOnly => Client::Python("2026-07-28"),
            _ => Client::Python("legacy"),
        }
    }

    fn calls(self) -> Vec<(&'static str, Value)> {
        match self {
            Server::HandshakeOnly => vec![
                ("echo", json!({"message": "across the table"})),
                ("trigger-elicitation-request", json!({})),
                ("trigger-sampling-request", json!({"prompt": "Say hi"})),
                ("get-roots-list", json!({})),
            ],
            Server::DualEra | Server::ModernOnly => vec![
                ("greet", json!({"name": "Ada"})),
                ("ask_first", json!({})),
                ("where_am_i", json!({})),
            ],
        }
    }

    /// The server running over HTTP, and its command over stdio.
    async fn start(self) -> (HttpPeer, String, Vec<String>) {
        let p = tokio::task::spawn_blocking(peers).await.unwrap();
        let python = p.python.display().to_string();
        let fixture = p
            .fixtures
            .join("conformance_server.py")
            .display()
            .to_string();
        match self {
            Server::HandshakeOnly => {
                let http = server_everything_http().await;
                let url = http.url.clone();
                let stdio = vec![p.server_everything.display().to_string(), "stdio".into()];
                (http, url, stdio)
            }
            Server::DualEra | Server::ModernOnly => {
                let flavour = match self {
                    Server::DualEra => "http",
                    _ => "modern-http",
                };
                let http = python_http("conformance_server.py", &[flavour]).await;
                let url = http.url.clone();
                let mut stdio = vec![python.clone()];
                if self == Server::ModernOnly {
                    let wrapper = p.fixtures.join("modern_only.py").display().to_string();
                    stdio.extend([wrapper, python]);
                }
                stdio.extend([fixture, "stdio".into()]);
                (http, url, stdio)
            }
        }
    }
}

/// What a client's report says that must be the same through toolgate: the tools, and each
/// call's content and whether it is an error (the 2026-07-28 members and `_meta` aside).
fn compared(out: &Value) -> Value {
    let calls: Vec<Value> = out["calls"]
        .as_array()
        .unwrap_or_else(|| panic!("a report: {out}"))
        .iter()
        .map(|c| json!({"isError": c["isError"].as_bool().unwrap_or(false), "content": c["content"]}))
        .collect();
    json!({"tools": out["tools"], "calls": calls})
}

/// The direct answers every client is held to: no call failed, and the questions were
/// answered by the client's own callbacks.
fn assert_answered(server: Server, own: &Value) {
    let said = own["calls"].to_string();
    assert!(!said.contains("\"isError\":true"), "{server:?}: {own}");
    for answer in ["Ada", "hi from the model", "file:///work/ada"] {
        assert!(said.contains(answer), "{server:?}: {own}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_sdk_client_through_every_mode_is_answered_as_directly() {
    let mut failures = Vec::new();
    let mut runs = 0;
    for server in Server::ALL {
        let (_running, url, command) = server.start().await;
        let calls = server.calls();
        let direct = |client: Client| {
            let (url, calls) = (url.clone(), calls.clone());
            async move { (client, compared(&client.run(&url, &calls).await)) }
        };
        let own = direct(server.own_client()).await.1;
        assert_answered(server, &own);
        let reachable = Client::ALL.into_iter().filter(|c| c.reaches(server));
        let mut expected: Vec<(Client, Value)> =
            futures_util::future::join_all(reachable.map(direct)).await;
        for client in Client::ALL {
            if !client.reaches(server) {
                expected.push((client, own.clone()));
            }
        }
        let reached = Reached::start(&url, &command).await;
        for (mode, at) in &reached.fronts {
            let answers = expected.iter().map(|(client, want)| {
                let (at, calls) = (at.clone(), calls.clone());
                async move {
                    let got = compared(&client.run(&at, &calls).await);
                    (client, want, got)
                }
            });
            // Over stdio each client has a toolgate of its own; an HTTP front is shared, and
            // clients of one era and capability set share a bridged session or child, where
            // a question asked outside a call's stream cannot be told apart between two calls
            // at once (docs/contract.md §5): they go in turn.
            let answers = match mode {
                Mode::StdioUpstream | Mode::StdioCommand => {
                    futures_util::future::join_all(answers).await
                }
                _ => {
                    let mut done = Vec::new();
                    for answer in answers {
                        done.push(answer.await);
                    }
                    done
                }
            };
            for (client, want, got) in answers {
                runs += 1;
                if &got != want {
                    failures.push(format!(
                        "{client:?} through {mode} to {server:?}:\n  got  {got}\n  want {want}"
                    ));
                }
            }
        }
    }
    assert_eq!(
        runs,
        Server::ALL.len() * Mode::EVERY_FRONT.len() * Client::ALL.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {runs} runs differ from a direct connection:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
