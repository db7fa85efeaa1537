//! An in-process MCP server that answers each tool (or resource URI) exactly as a test
//! scripts it: any JSON-RPC error or result, over JSON or SSE, an HTML page, truncated JSON,
//! silence, or a stream that breaks. It is the upstream for the rewrite table's exotic rows
//! and for fault injection.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::Response;
use axum::routing::post;
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone)]
pub enum Script {
    /// `{"jsonrpc":"2.0","id":<id>,"error":<this>}` as JSON.
    Error(Value),
    /// `{"jsonrpc":"2.0","id":<id>,"result":<this>}` as JSON.
    Result(Value),
    /// SSE: these messages as events (ids replaced: `"$id"` stands for the request's id),
    /// each event with an `id:` line when `numbered`.
    Sse {
        messages: Vec<Value>,
        numbered: bool,
    },
    /// `{"jsonrpc":"2.0","id":<id>,"result":<this text>}` as JSON, the result as written.
    ResultText(&'static str),
    /// Any HTTP answer.
    Raw {
        status: u16,
        content_type: &'static str,
        body: &'static [u8],
    },
    /// SSE that sends these messages, then breaks the connection.
    SseThenReset(Vec<Value>),
    /// JSON whose head says its whole length, then part of its body, then a broken
    /// connection.
    JsonThenReset(Value),
    /// Never answers.
    Hang,
    /// Sends its head (JSON, or SSE when `sse`), then nothing more, never ending the body.
    HeadThenStall { sse: bool },
    /// `{"jsonrpc":"2.0","id":<id>,"result":<this>}` after a pause.
    Slow(Duration, Value),
    /// Its head (JSON, no length) at once, then after a pause its body,
    /// `{"jsonrpc":"2.0","id":<id>,"result":<this>}`, as a server that answers once the tool
    /// has run.
    HeadThenLater(Duration, Value),
    /// 401 with this `WWW-Authenticate`, as a server doing its own OAuth answers.
    Unauthorized(&'static str),
}

#[derive(Default)]
pub struct Scripted {
    pub tools: Vec<Value>,
    pub scripts: HashMap<String, Script>,
    /// Every body received, in order.
    pub seen: Mutex<Vec<Value>>,
    /// The headers of every request, in order.
    pub seen_headers: Mutex<Vec<HeaderMap>>,
    /// The HTTP version of every request, in order.
    pub seen_versions: Mutex<Vec<axum::http::Version>>,
    /// Every body as it came, byte for byte.
    pub seen_raw: Mutex<Vec<Bytes>>,
    /// Members merged into every `tools/list` result (`ttlMs`, `cacheScope`).
    pub list_extra: Value,
    /// Tools per `tools/list` page (all on one page when unset).
    pub page_size: Option<usize>,
    /// Speaks only the handshake: a request outside a session (`initialize` aside) gets 400,
    /// as a 2025-11-25 server answers `server/discover`.
    pub handshake_only: bool,
    /// Answers 401 to every request without this header with this value (a credential:
    /// `authorization` with `Bearer ...`, or an API key under a header of its own).
    pub required_header: Option<(&'static str, &'static str)>,
    /// The session's own stream (GET): this message, this many times, once two tool calls
    /// wait (405 when unset).
    pub own_stream: Option<(Value, usize)>,
    /// How many of the own stream's messages were taken from it (written to its connection).
    pub own_stream_taken: std::sync::atomic::AtomicUsize,
    /// Gives each `initialize` a session of its own (`scripted-session-N`), and lists each
    /// session's tools with schemas of its own: the session's id as their `$comment`.
    pub listing_per_session: bool,
    /// Sessions given so far.
    pub sessions: std::sync::atomic::AtomicUsize,
    /// The capabilities its `initialize` result declares (`{"tools": {}}` when unset).
    pub capabilities: Option<Value>,
}

fn with_id(v: &Value, id: &Value) -> Value {
    match v {
        Value::String(s) if s == "$id" => id.clone(),
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), with_id(v, id))).collect())
        }
        Value::Array(a) => Value::Array(a.iter().map(|v| with_id(v, id)).collect()),
        other => other.clone(),
    }
}

pub fn json_response(status: u16, body: String) -> Response {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(body))
        .unwrap()
}

async fn handle(
    State(s): State<Arc<Scripted>>,
    version: axum::http::Version,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let session_id: Option<String> = (headers.get("mcp-session-id"))
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let outside_session = session_id.is_none();
    s.seen.lock().unwrap().push(msg.clone());
    s.seen_versions.lock().unwrap().push(version);
    s.seen_raw.lock().unwrap().push(body.clone());
    let authorized = s
        .required_header
        .is_none_or(|(name, value)| headers.get(name).is_some_and(|v| v == value));
    s.seen_headers.lock().unwrap().push(headers);
    if !authorized {
        return Response::builder()
            .status(StatusCode::UNAUTHORIZED)
            .header("www-authenticate", "Bearer")
            .body(Body::empty())
            .unwrap();
    }
    if s.handshake_only && outside_session && msg["method"] != "initialize" {
        return json_response(
            400,
            json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"}}).to_string(),
        );
    }
    let Some(id) = msg.get("id").cloned() else {
        return Response::builder()
            .status(StatusCode::ACCEPTED)
            .body(Body::empty())
            .unwrap();
    };
    let method = msg["method"].as_str().unwrap_or("");
    let key = match method {
        "initialize" if !s.scripts.contains_key("initialize") => {
            let capabilities = s.capabilities.clone().unwrap_or(json!({"tools": {}}));
            let r = json!({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": "2025-11-25", "capabilities": capabilities, "serverInfo": {"name": "scripted", "version": "1"}}});
            let mut resp = json_response(200, r.to_string());
            let session = match s.listing_per_session {
                true => format!("scripted-session-{}", s.sessions.fetch_add(1, Ordering::Relaxed)),
                false => "scripted-session".into(),
            };
            resp.headers_mut().insert("mcp-session-id", session.parse().unwrap());
            return resp;
        }
        "tools/list" if s.scripts.contains_key("tools/list") => method.to_string(),
        "tools/list" => {
            let start: usize = msg["params"]["cursor"]
                .as_str()
                .and_then(|c| c.parse().ok())
                .unwrap_or(0);
            let size = s.page_size.unwrap_or(s.tools.len().max(1));
            let mut page: Vec<Value> = s.tools.iter().skip(start).take(size).cloned().collect();
            if s.listing_per_session {
                for tool in &mut page {
                    tool["inputSchema"]["$comment"] = json!(session_id);
                }
            }
            let mut result = json!({"tools": page});
            if start + size < s.tools.len() {
                result["nextCursor"] = json!((start + size).to_string());
            }
            if let (Some(r), Some(extra)) = (result.as_object_mut(), s.list_extra.as_object()) {
                r.extend(extra.clone());
            }
            return json_response(200, json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string());
        }
        "initialize" => method.to_string(),
        // A response to a question the server asked.
        "" if s.scripts.contains_key("$response") => "$response".to_string(),
        "tools/call" => msg["params"]["name"].as_str().unwrap_or("").to_string(),
        "resources/read" => msg["params"]["uri"].as_str().unwrap_or("").to_string(),
        "prompts/get" => format!("prompt {}", msg["params"]["name"].as_str().unwrap_or("")),
        // Scripted as `resources/subscribe URI`; agreed to (a result) unless scripted.
        "resources/subscribe" | "resources/unsubscribe" => {
            format!("{method} {}", msg["params"]["uri"].as_str().unwrap_or(""))
        }
        "tasks/result" => method.to_string(),
        _ => return json_response(200, json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}}).to_string()),
    };
    let Some(script) = s.scripts.get(&key).cloned() else {
        return json_response(200, json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": format!("no script for {key}")}]}}).to_string());
    };
    match script {
        Script::Error(e) => json_response(
            200,
            json!({"jsonrpc": "2.0", "id": id, "error": e}).to_string(),
        ),
        Script::Result(r) => json_response(
            200,
            json!({"jsonrpc": "2.0", "id": id, "result": r}).to_string(),
        ),
        Script::Sse { messages, numbered } => {
            let mut text = String::new();
            for (i, m) in messages.iter().enumerate() {
                if numbered {
                    text.push_str(&format!("id: ev-{i}\n"));
                }
                text.push_str(&format!("event: message\ndata: {}\n\n", with_id(m, &id)));
            }
            Response::builder()
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(Body::from(text))
                .unwrap()
        }
        Script::ResultText(result) => json_response(
            200,
            format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#),
        ),
        Script::Raw {
            status,
            content_type,
            body,
        } => Response::builder()
            .status(status)
            .header(header::CONTENT_TYPE, content_type)
            .body(Body::from(body))
            .unwrap(),
        Script::SseThenReset(messages) => {
            let events: Vec<Bytes> = messages
                .iter()
                .map(|m| Bytes::from(format!("event: message\ndata: {}\n\n", with_id(m, &id))))
                .collect();
            // The events go out first; the break comes after a pause, mid-stream.
            let stream = futures_util::stream::unfold(
                (events.into_iter(), false),
                |(mut it, broke)| async move {
                    match it.next() {
                        Some(b) => Some((Ok(b), (it, broke))),
                        None if !broke => {
                            tokio::time::sleep(Duration::from_millis(100)).await;
                            Some((Err(std::io::Error::other("reset")), (it, true)))
                        }
                        None => None,
                    }
                },
            );
            Response::builder()
                .header(header::CONTENT_TYPE, "text/event-stream")
                .body(Body::from_stream(stream))
                .unwrap()
        }
        Script::JsonThenReset(r) => {
            let body = json!({"jsonrpc": "2.0", "id": id, "result": r}).to_string();
            let (length, half) = (body.len(), Bytes::from(body[..body.len() / 2].to_owned()));
            // The break comes after a pause, once the head and the half have gone out.
            let stream = futures_util::stream::unfold(Some(half), |half| async move {
                match half {
                    Some(b) => Some((Ok(b), None)),
                    None => {
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        Some((Err(std::io::Error::other("reset")), None))
                    }
                }
            });
            Response::builder()
                .header(header::CONTENT_TYPE, "application/json")
                .header(header::CONTENT_LENGTH, length)
                .body(Body::from_stream(stream))
                .unwrap()
        }
        Script::Hang => {
            tokio::time::sleep(Duration::from_secs(3600)).await;
            json_response(200, "{}".into())
        }
        Script::HeadThenStall { sse } => {
            let first = if sse {
                Bytes::from(": the answer follows\n\n")
            } else {
                Bytes::from(format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},"))
            };
            let stream = futures_util::stream::unfold(Some(first), |first| async move {
                match first {
                    Some(b) => Some((Ok::<_, std::io::Error>(b), None)),
                    None => {
                        tokio::time::sleep(Duration::from_secs(3600)).await;
                        None
                    }
                }
            });
            Response::builder()
                .header(
                    header::CONTENT_TYPE,
                    if sse {
                        "text/event-stream"
                    } else {
                        "application/json"
                    },
                )
                .body(Body::from_stream(stream))
                .unwrap()
        }
        Script::HeadThenLater(pause, r) => {
            let body = json!({"jsonrpc": "2.0", "id": id, "result": r}).to_string();
            let later = futures_util::stream::once(async move {
                tokio::time::sleep(pause).await;
                Ok::<_, std::io::Error>(Bytes::from(body))
            });
            Response::builder()
                .header(header::CONTENT_TYPE, "application/json")
                .body(Body::from_stream(later))
                .unwrap()
        }
        Script::Slow(pause, r) => {
            tokio::time::sleep(pause).await;
            json_response(
                200,
                json!({"jsonrpc": "2.0", "id": id, "result": r}).to_string(),
            )
        }
        Script::Unauthorized(challenge) => Response::builder()
            .status(401)
            .header(header::WWW_AUTHENTICATE, challenge)
            .header(header::CONTENT_TYPE, "application/json")
            .body(Body::from(r#"{"error":"invalid_token"}"#))
            .unwrap(),
    }
}

/// The session's own stream, when scripted: its messages go out once two tool calls wait,
/// each counted as it is taken.
async fn own_stream(State(s): State<Arc<Scripted>>) -> Response {
    let Some((message, count)) = s.own_stream.clone() else {
        return Response::builder()
            .status(StatusCode::METHOD_NOT_ALLOWED)
            .body(Body::empty())
            .unwrap();
    };
    let event = Bytes::from(format!("event: message\ndata: {message}\n\n"));
    let stream = futures_util::stream::unfold(0, move |sent| {
        let (s, event) = (s.clone(), event.clone());
        async move {
            while s.tool_calls().len() < 2 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            if sent == count {
                return None;
            }
            s.own_stream_taken
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            Some((Ok::<_, std::io::Error>(event), sent + 1))
        }
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

/// The upstream's own RFC 9728 document, for pass-through tests.
async fn metadata(uri: axum::http::Uri, headers: HeaderMap) -> Response {
    let host = headers
        .get(header::HOST)
        .and_then(|h| h.to_str().ok())
        .unwrap_or("");
    json_response(
        200,
        json!({"resource": "http://scripted/mcp", "authorization_servers": ["http://as.scripted"],
               "served_path": uri.path(), "served_by": host})
        .to_string(),
    )
}

impl Scripted {
    pub fn new(tools: Vec<Value>) -> Scripted {
        Scripted {
            tools,
            ..Default::default()
        }
    }

    pub fn capabilities(mut self, capabilities: Value) -> Scripted {
        self.capabilities = Some(capabilities);
        self
    }

    pub fn handshake_only(mut self) -> Scripted {
        self.handshake_only = true;
        self
    }

    pub fn listing_per_session(mut self) -> Scripted {
        self.listing_per_session = true;
        self
    }

    pub fn pages_of(mut self, size: usize) -> Scripted {
        self.page_size = Some(size);
        self
    }

    pub fn list_extra(mut self, extra: Value) -> Scripted {
        self.list_extra = extra;
        self
    }

    /// The `tools/call` requests that arrived, in order.
    pub fn tool_calls(&self) -> Vec<Value> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|m| m["method"] == "tools/call")
            .cloned()
            .collect()
    }

    /// The method of every message that arrived, in order.
    pub fn methods(&self) -> Vec<String> {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter_map(|m| m["method"].as_str().map(str::to_owned))
            .collect()
    }

    /// How many `tools/list` requests arrived.
    pub fn listings(&self) -> usize {
        self.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|m| m["method"] == "tools/list")
            .count()
    }

    /// Scripts the answer to the tool (or resource URI) `key`, or to `initialize`,
    /// `tools/list` or `tasks/result` when `key` names the method, or to the client's
    /// responses to the server's questions when `key` is `$response`.
    pub fn script(mut self, key: &str, s: Script) -> Scripted {
        self.scripts.insert(key.to_string(), s);
        self
    }

    /// Sends `message` `count` times on the session's own stream once two tool calls wait.
    pub fn own_stream(mut self, message: Value, count: usize) -> Scripted {
        self.own_stream = Some((message, count));
        self
    }

    /// The server as a router, for a test that serves it itself (over TLS, say).
    pub fn router(self) -> (Router, Arc<Scripted>) {
        let state = Arc::new(self);
        let app = Router::new()
            .route("/mcp", post(handle).get(own_stream))
            .route(
                "/.well-known/oauth-protected-resource/mcp",
                axum::routing::get(metadata),
            )
            .with_state(state.clone());
        (app, state)
    }

    /// Serves on `127.0.0.1:0`; returns the MCP URL.
    pub async fn spawn(self) -> (String, Arc<Scripted>) {
        let (app, state) = self.router();
        let addr = super::serve_on_loopback(app).await;
        (format!("http://{addr}/mcp"), state)
    }
}

/// A tool with an open schema: any arguments pass, so calls reach the script.
pub fn open_tool(name: &str) -> Value {
    json!({"name": name, "inputSchema": {"type": "object"}})
}
