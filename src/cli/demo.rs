//! The example MCP server behind `toolgate demo`: a small Streamable HTTP server (legacy
//! sessions, JSON or SSE answers) whose tools show what toolgate is for at a glance.
//!
//! The same server is the in-process upstream of the tests and the benchmark, so it can also
//! record what reached it (the tests' servers do; the commands' keep nothing) and page its
//! tool list or stream its answers on request. What a client can make it hold is bounded:
//! the requests it records, and its sessions (past `SESSIONS_KEPT`, the oldest ends).
//!
//! Tools:
//! - `book_flight`: the SEP-1303 example; `departureDate` in dd/mm/yyyy, 1 to 9 passengers.
//!   The server itself checks that the date is in the future, which a schema cannot say.
//! - `add`: two integers.
//! - `plan_trip`: `$defs`/`$ref`, `enum` and a nested array of objects.
//! - `lookup_order`: fails the way many servers do, as a raw JSON-RPC `-32602`.
//! - `countdown`: streams progress notifications over SSE, one per tick, then answers.
//! - `enable_extra`: adds `extra_tool` to the session and announces it with
//!   `notifications/tools/list_changed` on the answer's stream.

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use axum::routing::any;
use serde_json::{Value, json};
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::BuildHasher;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How the demo server behaves; the defaults suit the tests (`toolgate demo` records
/// nothing).
#[derive(Debug, Clone)]
pub struct Options {
    /// Tools per `tools/list` page; 0 lists all at once.
    pub page_size: usize,
    /// Answer every request as an SSE stream (as server-everything does).
    pub sse: bool,
    /// More tools to list, as given (tests use this for hostile or broken schemas). Calls
    /// to them answer with their arguments echoed.
    pub extra_tools: Vec<Value>,
    /// How many of the latest requests [`Demo::seen`] keeps: the tests read them, and
    /// `toolgate demo` keeps none, so that what is sent to it holds no memory.
    pub seen_kept: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            page_size: 0,
            sse: false,
            extra_tools: Vec::new(),
            seen_kept: SEEN_KEPT,
        }
    }
}

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub http_method: String,
    pub session: Option<String>,
    pub headers: HeaderMap,
    /// The body exactly as it arrived.
    pub raw: Bytes,
    pub body: Value,
}

#[derive(Default)]
pub struct Demo {
    options: Options,
    sessions: Mutex<Sessions>,
    /// The most recent requests, for tests; bounded, because the benchmark sends millions.
    seen: Mutex<VecDeque<Seen>>,
}

/// Requests kept for [`Demo::seen`] by default.
const SEEN_KEPT: usize = 10_000;

/// Sessions open at once: a new one past this many ends the oldest. Above the benchmark's
/// 10,000 sessions of its memory rows, with room for the sessions its rounds open.
const SESSIONS_KEPT: usize = 100_000;

/// The open sessions, each with the tools it was given, in the order they were opened.
#[derive(Default)]
struct Sessions {
    tools: HashMap<String, HashSet<String>>,
    /// Ids in the order they were opened; an id ended by a DELETE stays until it is passed
    /// over, or until the ids kept pass twice the open ones (and 64), when it is swept.
    opened: VecDeque<String>,
}

impl Sessions {
    fn open(&mut self, id: String) {
        while self.tools.len() >= SESSIONS_KEPT {
            let Some(oldest) = self.opened.pop_front() else {
                break;
            };
            self.tools.remove(&oldest);
        }
        if self.opened.len() >= 2 * self.tools.len().max(1) + 64 {
            let tools = &self.tools;
            self.opened.retain(|id| tools.contains_key(id));
        }
        self.opened.push_back(id.clone());
        self.tools.insert(id, HashSet::new());
    }
}

impl Demo {
    /// Every request that reached the server, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }

    /// The `tools/call` requests that reached the server.
    pub fn calls(&self) -> Vec<Value> {
        self.seen()
            .into_iter()
            .filter(|s| s.body["method"] == "tools/call")
            .map(|s| s.body)
            .collect()
    }
}

pub fn app(options: Options) -> (Router, Arc<Demo>) {
    let demo = Arc::new(Demo {
        options,
        ..Demo::default()
    });
    let router = Router::new()
        .route("/mcp", any(handle))
        .with_state(demo.clone());
    (router, demo)
}

/// Serves the demo server on `addr` in the background.
pub async fn spawn(addr: SocketAddr, options: Options) -> std::io::Result<(SocketAddr, Arc<Demo>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let local = listener.local_addr()?;
    let (router, demo) = app(options);
    tokio::spawn(async move {
        let _ = axum::serve(listener, router).await;
    });
    Ok((local, demo))
}

fn tools() -> Vec<Value> {
    vec![
        json!({
            "name": "book_flight",
            "title": "Book a flight",
            "description": "Book a flight for up to nine passengers.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "origin": {"type": "string", "pattern": "^[A-Z]{3}$", "description": "IATA code of the departure airport, e.g. LHR"},
                    "destination": {"type": "string", "pattern": "^[A-Z]{3}$", "description": "IATA code of the arrival airport, e.g. JFK"},
                    "departureDate": {"type": "string", "pattern": "^\\d{2}/\\d{2}/\\d{4}$", "description": "Departure date in dd/mm/yyyy format, in the future"},
                    "passengers": {"type": "integer", "minimum": 1, "maximum": 9, "description": "Number of passengers, 1 to 9"}
                },
                "required": ["origin", "destination", "departureDate"],
                "additionalProperties": false
            }
        }),
        json!({
            "name": "add",
            "description": "Add two integers.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "a": {"type": "integer", "description": "First addend"},
                    "b": {"type": "integer", "description": "Second addend"}
                },
                "required": ["a", "b"]
            },
            "outputSchema": {"type": "object", "properties": {"result": {"type": "integer"}}, "required": ["result"]}
        }),
        json!({
            "name": "plan_trip",
            "description": "Plan a trip for a group.",
            "inputSchema": {
                "type": "object",
                "$defs": {
                    "traveller": {
                        "type": "object",
                        "properties": {
                            "name": {"type": "string", "minLength": 1, "description": "Full name as on the passport"},
                            "age": {"type": "integer", "minimum": 0, "description": "Age in years"},
                            "class": {"enum": ["economy", "business", "first"], "description": "Cabin class"}
                        },
                        "required": ["name", "age"],
                        "additionalProperties": false
                    }
                },
                "properties": {
                    "travellers": {"type": "array", "minItems": 1, "items": {"$ref": "#/$defs/traveller"}, "description": "Everyone travelling"},
                    "mode": {"enum": ["air", "rail", "road"], "description": "How to travel"}
                },
                "required": ["travellers", "mode"]
            }
        }),
        json!({
            "name": "lookup_order",
            "description": "Look up an order by id. Unknown ids fail as a raw JSON-RPC error.",
            "inputSchema": {"type": "object", "properties": {"orderId": {"type": "string", "description": "The order id"}}, "required": ["orderId"]}
        }),
        json!({
            "name": "countdown",
            "description": "Count down, sending one progress notification per step.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "steps": {"type": "integer", "minimum": 1, "maximum": 20, "description": "How many steps, 1 to 20"},
                    "intervalMs": {"type": "integer", "minimum": 0, "maximum": 2000, "description": "Pause between steps in milliseconds"}
                },
                "required": ["steps"]
            }
        }),
        json!({
            "name": "enable_extra",
            "description": "Add extra_tool to this session.",
            "inputSchema": {"type": "object", "additionalProperties": false}
        }),
    ]
}

fn extra_tool() -> Value {
    json!({
        "name": "extra_tool",
        "description": "Appears after enable_extra.",
        "inputSchema": {"type": "object", "properties": {"level": {"type": "integer", "maximum": 3, "description": "How loud, 0 to 3"}}, "required": ["level"]}
    })
}

fn rpc_result(id: &Value, result: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": result})
}

fn rpc_error(id: &Value, code: i64, message: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

fn text_result(text: impl Into<String>, is_error: bool) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}], "isError": is_error})
}

fn json_response(status: StatusCode, v: &Value) -> Response {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(v.to_string()))
        .expect("valid response")
}

fn sse_response(events: Vec<(Duration, Value)>) -> Response {
    let stream = futures_util::stream::unfold(events.into_iter(), |mut it| async move {
        let (delay, msg) = it.next()?;
        if !delay.is_zero() {
            tokio::time::sleep(delay).await;
        }
        let frame = Bytes::from(format!("event: message\ndata: {msg}\n\n"));
        Some((Ok::<_, std::convert::Infallible>(frame), it))
    });
    Response::builder()
        .header(header::CONTENT_TYPE, "text/event-stream")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(stream))
        .expect("valid response")
}

async fn handle(
    State(demo): State<Arc<Demo>>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let session = headers
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let (msg, unreadable) = match serde_json::from_slice::<Value>(&body) {
        Ok(msg) => (msg, None),
        Err(e) => (Value::Null, Some(e)),
    };
    demo.record(|| Seen {
        http_method: method.to_string(),
        session: session.clone(),
        headers,
        raw: body,
        body: msg.clone(),
    });
    let empty = |status| {
        Response::builder()
            .status(status)
            .body(Body::empty())
            .expect("valid response")
    };
    match method {
        Method::DELETE => {
            let removed = session.is_some_and(|s| demo.sessions().tools.remove(&s).is_some());
            return empty(match removed {
                true => StatusCode::OK,
                false => StatusCode::NOT_FOUND,
            });
        }
        Method::POST => {}
        _ => return empty(StatusCode::METHOD_NOT_ALLOWED),
    }
    if let Some(s) = &session
        && !demo.sessions().tools.contains_key(s)
    {
        return json_response(
            StatusCode::NOT_FOUND,
            &json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": "Session not found"}}),
        );
    }
    if let Some(e) = unreadable {
        // As the SDKs' servers answer a body that is not JSON.
        return json_response(
            StatusCode::BAD_REQUEST,
            &rpc_error(&Value::Null, -32700, &format!("Parse error: {e}")),
        );
    }
    let answer = match msg {
        Value::Array(batch) => match answer_batch(&demo, &batch, session.as_deref()) {
            Some(answers) => answers,
            None => return empty(StatusCode::ACCEPTED),
        },
        msg => match request(&msg) {
            Some((method_name, id, params)) => {
                match answer(&demo, method_name, id, params, session.as_deref()) {
                    Ok(answer) => answer,
                    Err(whole) => return *whole,
                }
            }
            // A response or a notification: accepted, as servers do for client responses.
            None => return empty(StatusCode::ACCEPTED),
        },
    };
    if demo.options.sse {
        sse_response(vec![(Duration::ZERO, answer)])
    } else {
        json_response(StatusCode::OK, &answer)
    }
}

/// A request's method, id and params; `None` for a notification or a response.
fn request(msg: &Value) -> Option<(&str, &Value, &Value)> {
    let method = msg.get("method").and_then(Value::as_str)?;
    let id = msg.get("id")?;
    Some((method, id, msg.get("params").unwrap_or(&Value::Null)))
}

/// A batch's answers, one array as JSON-RPC answers a batch; `None` when it holds no request.
/// A request answered by a stream of its own (an `initialize`, `countdown`) cannot share one
/// answer, and is refused.
fn answer_batch(demo: &Demo, batch: &[Value], session: Option<&str>) -> Option<Value> {
    let answers: Vec<Value> = (batch.iter().filter_map(request))
        .map(|(method, id, params)| {
            answer(demo, method, id, params, session).unwrap_or_else(|_| {
                rpc_error(
                    id,
                    -32600,
                    &format!("Invalid Request: {method} cannot be batched"),
                )
            })
        })
        .collect();
    (!answers.is_empty()).then_some(Value::Array(answers))
}

/// The demo server's answer to request `method`, or a whole response where it makes one
/// itself (an `initialize`'s, with its session; a call's stream).
fn answer(
    demo: &Demo,
    method: &str,
    id: &Value,
    params: &Value,
    session: Option<&str>,
) -> Result<Value, Box<Response>> {
    Ok(match method {
        "initialize" => return Err(Box::new(initialize(demo, id, params))),
        "ping" => rpc_result(id, json!({})),
        "tools/list" => list_tools(demo, id, params, session),
        "tools/call" => call_tool(demo, id, params, session)?,
        "resources/list" => rpc_result(
            id,
            json!({"resources": [{"uri": "demo://greeting", "name": "greeting", "mimeType": "text/plain"}]}),
        ),
        "resources/read" => read_resource(id, params),
        _ => rpc_error(id, -32601, "Method not found"),
    })
}

impl Demo {
    /// Keeps one request for the tests to read, dropping the oldest past
    /// [`Options::seen_kept`].
    fn record(&self, seen: impl FnOnce() -> Seen) {
        let kept_at_most = self.options.seen_kept;
        if kept_at_most == 0 {
            return;
        }
        let mut kept = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        if kept.len() >= kept_at_most {
            kept.pop_front();
        }
        kept.push_back(seen());
    }

    fn sessions(&self) -> std::sync::MutexGuard<'_, Sessions> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `session` was given the extra tool (`enable_extra`).
    fn has_extra(&self, session: Option<&str>) -> bool {
        session.is_some_and(|s| {
            self.sessions()
                .tools
                .get(s)
                .is_some_and(|t| t.contains("extra_tool"))
        })
    }
}

/// A new session, in the protocol version the client asked for.
fn initialize(demo: &Demo, id: &Value, params: &Value) -> Response {
    let rs = std::collections::hash_map::RandomState::new();
    let sid = format!("{:016x}{:016x}", rs.hash_one(1u8), rs.hash_one(2u8));
    demo.sessions().open(sid.clone());
    let version = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or("2025-11-25");
    let result = json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": true}, "resources": {}},
        "serverInfo": {"name": "toolgate-demo", "version": env!("CARGO_PKG_VERSION")}
    });
    let mut r = json_response(StatusCode::OK, &rpc_result(id, result));
    r.headers_mut().insert(
        "mcp-session-id",
        sid.parse().expect("hex is a valid header"),
    );
    r
}

/// One page of the tools, `page_size` at a time.
fn list_tools(demo: &Demo, id: &Value, params: &Value, session: Option<&str>) -> Value {
    let mut all = tools();
    all.extend(demo.options.extra_tools.iter().cloned());
    if demo.has_extra(session) {
        all.push(extra_tool());
    }
    let start: usize = params
        .get("cursor")
        .and_then(Value::as_str)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let size = if demo.options.page_size == 0 {
        all.len()
    } else {
        demo.options.page_size
    };
    let page: Vec<Value> = all.iter().skip(start).take(size).cloned().collect();
    let mut result = json!({"tools": page});
    if start + size < all.len() {
        result["nextCursor"] = json!((start + size).to_string());
    }
    rpc_result(id, result)
}

/// A tool's answer; `Err` is one answered as a stream (progress, a list change first).
fn call_tool(
    demo: &Demo,
    id: &Value,
    params: &Value,
    session: Option<&str>,
) -> Result<Value, Box<Response>> {
    let name = params.get("name").and_then(Value::as_str).unwrap_or("");
    let args = params.get("arguments").cloned().unwrap_or(json!({}));
    Ok(match name {
        "add" => match (args["a"].as_i64(), args["b"].as_i64()) {
            (Some(a), Some(b)) => {
                let sum = a + b;
                rpc_result(
                    id,
                    json!({"content": [{"type": "text", "text": sum.to_string()}], "structuredContent": {"result": sum}}),
                )
            }
            _ => rpc_result(id, text_result("add needs two integers", true)),
        },
        "book_flight" => rpc_result(id, book(&args)),
        "plan_trip" => {
            let n = args["travellers"].as_array().map_or(0, Vec::len);
            let mode = args["mode"].as_str().unwrap_or("?");
            let text = format!("Planned a {mode} trip for {n} traveller(s).");
            rpc_result(id, text_result(text, false))
        }
        "lookup_order" => {
            let order = args["orderId"].as_str().unwrap_or("?");
            rpc_error(id, -32602, &format!("Order {order} not found"))
        }
        "countdown" => return Err(Box::new(countdown(id, params, &args))),
        "enable_extra" => {
            if let Some(s) = session
                && let Some(t) = demo.sessions().tools.get_mut(s)
            {
                t.insert("extra_tool".into());
            }
            let note = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
            let done = rpc_result(id, text_result("extra_tool is now available.", false));
            return Err(Box::new(sse_response(vec![
                (Duration::ZERO, note),
                (Duration::ZERO, done),
            ])));
        }
        n if demo.options.extra_tools.iter().any(|t| t["name"] == n) => {
            rpc_result(id, text_result(format!("{n} got {args}"), false))
        }
        "extra_tool" if demo.has_extra(session) => {
            rpc_result(id, text_result(format!("level {}", args["level"]), false))
        }
        _ => rpc_result(id, text_result(format!("Unknown tool: {name}"), true)),
    })
}

/// `countdown`: a progress notification per step when the call asked for them, then the
/// answer, as one stream.
fn countdown(id: &Value, params: &Value, args: &Value) -> Response {
    let steps = args["steps"].as_u64().unwrap_or(1);
    let interval = Duration::from_millis(args["intervalMs"].as_u64().unwrap_or(100));
    let token = params.pointer("/_meta/progressToken").cloned();
    let mut events = Vec::new();
    for i in 1..=steps {
        if let Some(t) = &token {
            let note = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": t, "progress": i, "total": steps}});
            events.push((if i == 1 { Duration::ZERO } else { interval }, note));
        }
    }
    events.push((interval, rpc_result(id, text_result("Lift-off!", false))));
    sse_response(events)
}

fn read_resource(id: &Value, params: &Value) -> Value {
    match params.get("uri").and_then(Value::as_str) {
        Some("demo://greeting") => rpc_result(
            id,
            json!({"contents": [{"uri": "demo://greeting", "mimeType": "text/plain", "text": "Hello from the demo server"}]}),
        ),
        Some(uri) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32002, "message": "Resource not found", "data": {"uri": uri}}})
        }
        None => rpc_error(id, -32602, "uri is required"),
    }
}

/// The server-side rule a schema cannot express: the date must be in the future.
fn book(args: &Value) -> Value {
    let date = args["departureDate"].as_str().unwrap_or("");
    let parts: Vec<u32> = date.split('/').filter_map(|p| p.parse().ok()).collect();
    let [d, m, y] = parts[..] else {
        return text_result(
            format!("Invalid departure date {date:?}: use dd/mm/yyyy."),
            true,
        );
    };
    let today = days_since_epoch(std::time::SystemTime::now());
    let Some(when) = civil_to_days(y, m, d) else {
        return text_result(
            format!("Invalid departure date {date:?}: no such day."),
            true,
        );
    };
    if when <= today {
        return text_result(
            format!("Invalid departure date: must be in the future. {date} has passed."),
            true,
        );
    }
    // Read as a Rust server reads an integer: `2.0` is not one.
    let n = match &args["passengers"] {
        Value::Null => 1,
        v => match v.as_u64() {
            Some(n) => n,
            None => return text_result(format!("Invalid passengers {v}: not an integer."), true),
        },
    };
    text_result(
        format!(
            "Booked {n} seat(s) from {} to {} on {date}.",
            args["origin"].as_str().unwrap_or("?"),
            args["destination"].as_str().unwrap_or("?")
        ),
        false,
    )
}

fn days_since_epoch(t: std::time::SystemTime) -> i64 {
    (t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
        / 86_400) as i64
}

/// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
fn civil_to_days(y: u32, m: u32, d: u32) -> Option<i64> {
    if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
        return None;
    }
    let (y, m, d) = (i64::from(y), i64::from(m), i64::from(d));
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    Some(era * 146_097 + doe - 719_468)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_in_the_past_are_refused_by_the_server() {
        assert_eq!(civil_to_days(1970, 1, 1), Some(0));
        let r =
            book(&json!({"origin": "LHR", "destination": "JFK", "departureDate": "01/01/2000"}));
        assert_eq!(r["isError"], true);
        let r = book(
            &json!({"origin": "LHR", "destination": "JFK", "departureDate": "01/01/2999", "passengers": 2}),
        );
        assert_eq!(r["isError"], false);
    }

    #[tokio::test]
    async fn a_body_that_is_not_json_gets_a_parse_error() {
        use tower::ServiceExt;
        let (app, _) = app(Options::default());
        let req = http::Request::post("/mcp")
            .header("content-type", "application/json")
            .body(Body::from(r#"{"jsonrpc":"2.0","id":1"#))
            .unwrap();
        let resp = app.oneshot(req).await.unwrap();
        assert_eq!(resp.status(), StatusCode::BAD_REQUEST);
        let body = axum::body::to_bytes(resp.into_body(), 1 << 16)
            .await
            .unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(
            (v["id"].clone(), v["error"]["code"].clone()),
            (Value::Null, json!(-32700))
        );
    }

    /// An `initialize` through the server's router, for its session id.
    async fn open_session(app: &Router) -> String {
        use tower::ServiceExt;
        let req = http::Request::post("/mcp")
            .header("content-type", "application/json")
            .body(Body::from(
                r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}"#,
            ))
            .unwrap();
        let resp = app.clone().oneshot(req).await.unwrap();
        resp.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_owned()
    }

    #[tokio::test]
    async fn the_commands_server_keeps_no_request() {
        let (server, demo) = app(Options {
            seen_kept: 0,
            ..Options::default()
        });
        open_session(&server).await;
        assert!(demo.seen().is_empty());
        let (server, demo) = app(Options::default());
        open_session(&server).await;
        assert_eq!(demo.seen().len(), 1);
    }

    /// Sessions opened without end hold no more than [`SESSIONS_KEPT`]: the oldest ends,
    /// the newest stays, and ids ended by a DELETE do not pile up behind them.
    #[tokio::test]
    async fn sessions_past_the_bound_end_the_oldest() {
        let (server, demo) = app(Options::default());
        let first = open_session(&server).await;
        let second = open_session(&server).await;
        demo.sessions().tools.remove(&second);
        for n in 0..SESSIONS_KEPT + 1 {
            demo.sessions().open(format!("s{n}"));
        }
        let sessions = demo.sessions();
        assert_eq!(sessions.tools.len(), SESSIONS_KEPT);
        assert!(!sessions.tools.contains_key(&first));
        assert!(!sessions.tools.contains_key("s0"));
        assert!(sessions.tools.contains_key(&format!("s{SESSIONS_KEPT}")));
        assert!(sessions.opened.len() <= 2 * SESSIONS_KEPT + 64);
    }

    #[test]
    fn ended_sessions_are_swept_from_the_order() {
        let mut sessions = Sessions::default();
        for n in 0..10_000 {
            sessions.open(format!("s{n}"));
            sessions.tools.remove(&format!("s{n}"));
        }
        assert!(sessions.tools.is_empty());
        assert!(
            sessions.opened.len() <= 66,
            "{} ids kept",
            sessions.opened.len()
        );
    }

    #[test]
    fn passengers_are_read_as_a_rust_server_reads_an_integer() {
        let trip = |passengers: Value| {
            book(
                &json!({"origin": "LHR", "destination": "JFK", "departureDate": "01/01/2999", "passengers": passengers}),
            )
        };
        assert_eq!(
            trip(json!(2))["content"][0]["text"],
            "Booked 2 seat(s) from LHR to JFK on 01/01/2999."
        );
        assert_eq!(
            trip(Value::Null)["content"][0]["text"],
            "Booked 1 seat(s) from LHR to JFK on 01/01/2999."
        );
        let r = trip(json!(2.0));
        assert_eq!(r["isError"], true);
        assert_eq!(
            r["content"][0]["text"],
            "Invalid passengers 2.0: not an integer."
        );
    }
}
