//! What real SDK peers ran into through toolgate, kept fixed: coercion that rewrote the
//! arguments it did not coerce, an upstream's refusal of the request itself hidden as a tool
//! error, and `toolgate stdio` leaving its server behind on SIGTERM. The rules that hold in
//! every mode (coercion, a refused `requestState`, a task-augmented call's error) are asserted
//! with one expectation in all four.

use crate::common;
use common::modes::{Front, Mode};
use common::peers::peers;
use common::scripted::{Script, Scripted, open_tool};
use common::stdio_gate::StdioGate;
use common::*;
use serde_json::json;
use std::time::Duration;

/// The stdio fixture, whose tools the scripted HTTP servers below advertise too.
async fn stdio_fixture() -> Vec<String> {
    common::peers::stdio_fixture(&[]).await
}

/// The stdio fixture's `measure`.
fn measure_tool() -> serde_json::Value {
    json!({"name": "measure", "inputSchema": {"type": "object", "properties": {
        "a": {"type": "number", "description": "any number"},
        "b": {"type": "integer", "description": "a whole number"},
        "c": {"type": "number", "description": "a decimal"},
        "d": {"anyOf": [{"type": "integer"}, {"type": "null"}], "description": "an optional whole number"},
        "e": {"type": "array", "items": {"type": "integer"}, "description": "whole numbers"}}}})
}

/// The stdio fixture's `add`.
fn add_tool() -> serde_json::Value {
    json!({"name": "add", "inputSchema": {"type": "object", "properties": {
        "a": {"type": "integer", "description": "first"},
        "b": {"type": "integer", "description": "second"}}, "required": ["a", "b"]}})
}

/// What a scripted server received of its `tools/call`s, as bytes.
fn raw_calls(seen: &Scripted) -> Vec<String> {
    seen.seen_raw
        .lock()
        .unwrap()
        .iter()
        .map(|b| String::from_utf8_lossy(b).into_owned())
        .filter(|b| b.contains("tools/call"))
        .collect()
}

/// Each call to `measure`, and its arguments as the server must receive them: a string
/// converted, and a whole number written as a float (`3.0`) where the schema wants an
/// integer, a plain one or an optional one (`anyOf` with `null`, as Pydantic writes
/// `Optional[int]`); every other argument byte for byte, and every other value of an
/// argument that holds a converted one (an integer past 64 bits keeps its digits).
const COERCED: [(&str, &str); 5] = [
    (
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"measure","arguments":{"a":123456789012345678901234567890,"b":"1","c":1.50}}}"#,
        r#""arguments":{"a":123456789012345678901234567890,"b":1,"c":1.50}"#,
    ),
    (
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"measure","arguments":{"a":2.0,"b":3.0,"c":1.50}}}"#,
        r#""arguments":{"a":2.0,"b":3,"c":1.50}"#,
    ),
    (
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"measure","arguments":{"a":"1","c":1.50,"d":"4"}}}"#,
        r#""arguments":{"a":1,"c":1.50,"d":4}"#,
    ),
    (
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"measure","arguments":{"a":2.0,"c":1.50,"d":5.0}}}"#,
        r#""arguments":{"a":2.0,"c":1.50,"d":5}"#,
    ),
    (
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"measure","arguments":{"e":[99999999999999999999, "2", 7.0],"c":1.50}}}"#,
        r#""arguments":{"c":1.50,"e":[99999999999999999999,2,7]}"#,
    ),
];

#[tokio::test]
async fn coercion_rewrites_only_the_arguments_it_coerced() {
    let command = stdio_fixture().await;
    for (mode, (body, coerced)) in Mode::EVERY_FRONT
        .into_iter()
        .flat_map(|m| COERCED.map(|c| (m, c)))
    {
        let (up, seen) = Scripted::new(vec![measure_tool()]).spawn().await;
        let a = Front::start(mode, &up, &command).await.ask_line(body).await;
        // What the server received: the scripted HTTP server keeps it, the stdio fixture
        // answers with it.
        let received = match mode.to_http() {
            true => {
                let raw = raw_calls(&seen);
                assert_eq!(raw.len(), 1, "{mode}: {raw:?}");
                raw[0].clone()
            }
            false => result_text(&a),
        };
        assert!(
            received.contains(coerced),
            "{mode}: only b changed: {received}"
        );
    }
}

/// Arguments that are JSON and that no value holds, each with where it is, the line of the
/// report that names it, and what the model reads of it: a key named twice, half a UTF-16 pair
/// (as a model's broken emoji arrives), a number past a float's range, and nesting past the
/// parser's limit.
fn misread() -> [(String, String, String, &'static str); 4] {
    let deep = format!("{}1{}", "[".repeat(200), "]".repeat(200));
    // Past the parser's limit, at 128 levels; an answer names at most 120 characters of it.
    let at_limit = format!("{}…", &format!("/a{}", "/0".repeat(126))[..120]);
    let shown_at_limit = format!("a{}.0…", "[0]".repeat(58));
    let a = || ("/a".to_owned(), "a".to_owned());
    let with = |(at, shown): (String, String), args: String, why| (args, at, shown, why);
    [
        with(
            a(),
            r#""a":1,"b":2,"a":3"#.into(),
            "appears more than once; send each argument once",
        ),
        with(
            a(),
            r#""a":"\ud83d","b":2"#.into(),
            "holds a \\u escape that is half of a character (an unpaired surrogate); send the whole character or leave it out",
        ),
        with(
            a(),
            r#""a":1e400,"b":2"#.into(),
            "is a number too large to read (past 1.8e308); send a smaller one",
        ),
        with(
            (at_limit, shown_at_limit),
            format!(r#""a":{deep},"b":2"#),
            "nests arrays and objects more than 128 levels deep; send it less deeply nested",
        ),
    ]
}

#[tokio::test]
async fn arguments_no_value_holds_are_violations_in_every_mode() {
    let command = stdio_fixture().await;
    for mode in Mode::EVERY_FRONT {
        let (up, seen) = Scripted::new(vec![add_tool()]).spawn().await;
        let mut front = Front::start(mode, &up, &command).await;
        for (args, at, shown, why) in misread() {
            let line = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"add","arguments":{{{args}}}}}}}"#
            );
            // The argument's description goes with a place the schema declares.
            let described = if at == "/a" {
                " (parameter description: first)"
            } else {
                ""
            };
            let text = format!(
                "Invalid arguments for tool \"add\" (1 problem):\n- {shown}: {why}{described}\nCorrect the arguments and call the tool again."
            );
            let expected = json!({"jsonrpc": "2.0", "id": 1, "result": {
                "content": [{"type": "text", "text": text}],
                "isError": true,
                "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": "add",
                    "parameter_errors": {at: why}}}}});
            assert_eq!(front.ask_line(&line).await, expected, "{mode}");
        }
        assert!(
            raw_calls(&seen).is_empty(),
            "{mode}: none reached the server"
        );
    }
}

/// A server that ends each call's stream before it answers (SEP-1699): toolgate asks for the
/// stream again itself, in every mode with an HTTP server, and the answer that comes on the
/// resumed stream is coerced, masked and output-checked as any other: a stdio client cannot
/// resume a stream, and an HTTP client's own resumption would get the answer unread.
#[tokio::test]
async fn a_stream_the_server_ends_before_its_answer_is_resumed_under_the_rules() {
    const RULES: &str = "[errors]\nmask_internal = true\n[validation]\noutput = \"enforce\"\n";
    let server = common::peers::typescript_polling_server().await;
    let call = |id: i64, tool: &str, args: serde_json::Value| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}}).to_string()
    };
    let expected = [
        (
            call(1, "wait", json!({"n": "2"})),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "waited 2"}]}}),
        ),
        (
            call(2, "wait_fail", json!({})),
            json!({"jsonrpc": "2.0", "id": 2, "result": {
                "content": [{"type": "text", "text": "The tool \"wait_fail\" failed with an internal error (reference REF)."}],
                "isError": true,
                "_meta": {"toolgate/upstream_error": {"code": -32603, "reference": "REF"}}}}),
        ),
        (
            call(3, "wait_typed", json!({})),
            json!({"jsonrpc": "2.0", "id": 3, "result": {
                "content": [{"type": "text", "text": "The tool \"wait_typed\" returned a result that does not match its declared outputSchema:\n- structuredContent/n: expected an integer, got string \"many\"\nThis is a fault of the tool server, not of the call."}],
                "isError": true,
                "_meta": {"toolgate/output_validation": {"code": "invalid_output", "errors": {"/n": "expected an integer, got string \"many\""}}}}}),
        ),
    ];
    for mode in Mode::EVERY_FRONT.into_iter().filter(|m| m.to_http()) {
        let mut front = Front::start_with(mode, &server.url, &[], Some(RULES)).await;
        for (line, answer) in &expected {
            let got = front.ask_negotiated(line).await;
            assert_eq!(&common::referenced(got), answer, "{mode}");
        }
    }
}

/// A session's own stream that the server ends (as a proxy closing quiet connections does)
/// is opened again by toolgate where it is the client, from the last event: what the server
/// sends there afterwards still reaches a stdio client.
#[tokio::test]
async fn a_session_stream_the_server_ends_is_opened_again() {
    let server = common::peers::typescript_polling_server().await;
    let args = ["stdio", "--upstream", &server.url];
    let mut g = StdioGate::start_args(args.map(str::to_owned).to_vec());
    g.initialize().await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "hang_up", "arguments": {}}});
    g.send(&call.to_string()).await;
    let changed = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
    let answer = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "hung up"}]}});
    let (mut answered, mut said) = (false, 0);
    while !answered || said < 2 {
        let m = g.recv().await;
        match m.get("method") {
            None => {
                assert_eq!(m, answer);
                answered = true;
            }
            Some(_) => {
                assert_eq!(m, changed);
                said += 1;
            }
        }
    }
}

/// A server whose endpoint redirects (a server mounted at `/mcp/` answers `/mcp` with 307)
/// is a configuration to fix: toolgate follows no redirection, and every mode with an HTTP
/// server, and `toolgate check`, says the URL to give instead of "not JSON-RPC: HTTP 307".
#[tokio::test]
async fn an_endpoint_that_redirects_is_said_with_the_url_to_give() {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let moved = format!("http://{}/mcp/", listener.local_addr().unwrap());
    let to = moved.clone();
    let app = axum::Router::new().fallback(move || {
        let to = to.clone();
        async move {
            (
                http::StatusCode::TEMPORARY_REDIRECT,
                [(http::header::LOCATION, to)],
            )
        }
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    let url = moved.trim_end_matches('/').to_owned();
    let why = format!(
        "the tool server's endpoint is elsewhere: it answers HTTP 307 to {moved}; toolgate follows no redirection: give that URL as the upstream"
    );
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let expected = json!({"jsonrpc": "2.0", "id": 0, "error": {"code": -32603,
        "message": format!("Upstream MCP server unavailable: {why}")}});
    for mode in Mode::EVERY_FRONT.into_iter().filter(|m| m.to_http()) {
        let answer = match Front::start(mode, &url, &[]).await {
            Front::Http { tg, .. } => post(&tg.url(), None, initialize.to_string()).await.json(),
            Front::Stdio { mut g, .. } => g.ask(initialize.clone()).await,
        };
        assert_eq!(answer, expected, "{mode}");
    }
    let (code, _, err) = run_toolgate(&["check", "--upstream", &url]).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&why), "{err}");
}

/// The first SSE event on `body` that `wanted` picks, each frame within 10 s; `None` when
/// the stream ends first. The body stays open.
async fn event_where(
    body: &mut hyper::body::Incoming,
    wanted: impl Fn(&str) -> bool,
) -> Option<String> {
    let mut text = String::new();
    loop {
        if let Some(ev) = text.split("\n\n").find(|ev| wanted(ev)) {
            return Some(ev.to_owned());
        }
        let frame = tokio::time::timeout(
            Duration::from_secs(10),
            http_body_util::BodyExt::frame(body),
        )
        .await
        .expect("a frame in time")?
        .ok()?;
        if let Ok(data) = frame.into_data() {
            text.push_str(&String::from_utf8_lossy(&data));
        }
    }
}

/// The first message event of the stream resumed from `last_id`, asked for again as a
/// client does while the server refuses (a stream still held elsewhere: 409) or ends it
/// first.
async fn resumed(
    headers: &impl Fn(http::request::Builder) -> http::request::Builder,
    url: &str,
    last_id: &str,
) -> String {
    for _ in 0..20 {
        let get = headers(http::Request::get(url))
            .header("last-event-id", last_id)
            .body(http_body_util::Full::new(bytes::Bytes::new()))
            .unwrap();
        let mut body = client().request(get).await.unwrap().into_body();
        if let Some(ev) = event_where(&mut body, |ev| ev.contains("data: {")).await {
            return ev;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    panic!("the stream resumed from {last_id} brought no message");
}

/// A client that loses a call's stream and asks the server for the rest itself (a GET with
/// `Last-Event-ID`) gets the answer there under the call's rules, as often as it asks: it
/// cannot drop its connection to read a server's internal error unmasked. Each time it gets
/// the answer as first sent, not read again under a new reference. Every front a client
/// reaches over HTTP with an HTTP server behind it.
#[tokio::test]
async fn a_client_that_resumes_a_lost_stream_gets_its_answer_under_the_rules() {
    let server = common::peers::typescript_polling_server().await;
    let rules = "[errors]\nmask_internal = true\n";
    let masked = json!({"jsonrpc": "2.0", "id": 9, "result": {
        "content": [{"type": "text", "text": "The tool \"wait_fail\" failed with an internal error (reference REF)."}],
        "isError": true,
        "_meta": {"toolgate/upstream_error": {"code": -32603, "reference": "REF"}}}});
    for mode in [Mode::ServeUpstream, Mode::Layer] {
        let Front::Http { tg, .. } = Front::start_with(mode, &server.url, &[], Some(rules)).await
        else {
            unreachable!("an HTTP front")
        };
        let url = tg.url();
        let session = open_session(&url).await;
        let headers = |req: http::request::Builder| {
            req.header("accept", ACCEPT)
                .header("mcp-session-id", &session)
                .header("mcp-protocol-version", "2025-11-25")
        };
        let call = r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"wait_fail","arguments":{}}}"#;
        let post = headers(http::Request::post(&url))
            .header("content-type", "application/json")
            .body(http_body_util::Full::new(bytes::Bytes::from(call)))
            .unwrap();
        let mut stream = client().request(post).await.unwrap().into_body();
        let first = event_where(&mut stream, |ev| ev.contains("id:"))
            .await
            .unwrap();
        let last_id = first
            .lines()
            .find_map(|l| l.strip_prefix("id: "))
            .unwrap()
            .to_owned();
        // The client's connection goes; the server answers meanwhile, and keeps the answer.
        drop(stream);
        tokio::time::sleep(Duration::from_millis(600)).await;
        let mut answers = Vec::new();
        for _ in 0..2 {
            let ev = resumed(&headers, &url, &last_id).await;
            let data = ev.lines().find_map(|l| l.strip_prefix("data: ")).unwrap();
            let answer: serde_json::Value = serde_json::from_str(data).unwrap();
            assert_eq!(referenced(answer.clone()), masked, "{mode}");
            answers.push(answer);
        }
        // Sent again as first sent: one reference, which the one log line names.
        assert_eq!(answers[0], answers[1], "{mode}");
    }
}

/// An upstream that refuses every call the way the TypeScript SDK refuses a request without a
/// valid session: HTTP 400, an error that names no request. Returns its URL and that body.
async fn refusing_upstream() -> (String, &'static str) {
    let refusal = r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}"#;
    let (up, _) = Scripted::new(vec![open_tool("echo")])
        .script(
            "echo",
            Script::Raw {
                status: 400,
                content_type: "application/json",
                body: refusal.as_bytes(),
            },
        )
        .spawn()
        .await;
    (up, refusal)
}

#[tokio::test]
async fn an_upstream_refusing_the_request_itself_is_relayed_as_it_came() {
    let (up, refusal) = refusing_upstream().await;
    let tg = Toolgate::serve(&up, None).await;
    let r = post(&tg.url(), None, call(1, "echo", json!({}))).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.text(), refusal, "not turned into a tool error");
    // The TypeScript SDK's own refusal of a request without a session (server-everything):
    // the client sees what it would see without toolgate, and can initialize.
    let everything = common::peers::server_everything_http().await;
    let tg = Toolgate::serve(&everything.url, None).await;
    let body = call(1, "get-sum", json!({"a": 1, "b": 2}));
    let direct = post(&everything.url, None, body.clone()).await;
    let through = post(&tg.url(), None, body).await;
    assert_eq!(direct.status, 400, "{}", direct.text());
    assert_eq!(
        (through.status, through.json()),
        (direct.status, direct.json())
    );
    // A 200 error that names the request is still the tool's answer, rewritten.
    let (up, _) = Scripted::new(vec![open_tool("echo")])
        .script(
            "echo",
            Script::Error(json!({"code": -32603, "message": "disk full"})),
        )
        .spawn()
        .await;
    let tg = Toolgate::serve(&up, None).await;
    let a = post(&tg.url(), None, call(2, "echo", json!({})))
        .await
        .json();
    assert_eq!(a["result"]["isError"], true, "{a}");
}

/// A stdio server that closes its output and runs on can never answer again: the call in
/// flight is answered as soon as the output ends, not when the process exits (a minute later
/// here), in every mode with a stdio server, and the process is stopped.
#[tokio::test]
async fn a_stdio_server_that_closes_its_output_is_answered_for_at_once() {
    use common::processes::{children_with, marker, wait_for};
    let m = marker();
    let command = common::peers::stdio_fixture(&["--mute", &m]).await;
    for mode in [Mode::ServeCommand, Mode::StdioCommand] {
        let mut front = Front::start(mode, "", &command).await;
        let line = call(1, "mute", json!({}));
        let a = tokio::time::timeout(Duration::from_secs(4), front.ask_line(&line))
            .await
            .unwrap_or_else(|_| panic!("{mode}: no answer while the server runs on"));
        let reason =
            "could not reach the tool server: the tool server closed its output before answering";
        let text = format!(
            "The tool server is unavailable: {reason}. Retrying in a moment may help if the server is restarting."
        );
        assert_eq!(
            a,
            json!({"jsonrpc": "2.0", "id": 1, "result": {
                "content": [{"type": "text", "text": text}], "isError": true,
                "_meta": {"toolgate/upstream": {"code": "upstream_unavailable", "reason": reason}}}}),
            "{mode}"
        );
        assert!(
            wait_for(|| children_with(&m) == 0).await,
            "{mode}: the server is stopped"
        );
    }
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

#[tokio::test]
async fn toolgate_stdio_stops_its_server_on_sigterm() {
    for extra in [&[][..], &["--ignore-sigterm"]] {
        let cmd = crate::common::peers::stdio_fixture(extra).await;
        let (mut g, _) = StdioGate::start(&cmd, None);
        g.initialize().await;
        let logs = g.logs_when(|l| l.contains("fixture pid")).await;
        let server: u32 = logs
            .split("fixture pid ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{logs}"));
        assert!(alive(server));
        let toolgate = g.child.id().unwrap();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(toolgate as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let status = tokio::time::timeout(Duration::from_secs(5), g.child.wait())
            .await
            .expect("toolgate ends within 5 s of SIGTERM")
            .unwrap();
        assert_eq!(status.code(), Some(0), "{extra:?}");
        for _ in 0..50 {
            if !alive(server) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(!alive(server), "{extra:?}: the server is gone too");
    }
}

/// What the official SDKs do: close stdin, then SIGTERM two seconds later. The SIGTERM cuts
/// short both the wait for what is in flight and the server's grace, even for a server that
/// ignores SIGTERM.
#[tokio::test]
async fn a_sigterm_after_stdin_closed_cuts_the_graces_short() {
    let cmd = crate::common::peers::stdio_fixture(&["--ignore-sigterm"]).await;
    let (mut g, _) = StdioGate::start(&cmd, None);
    g.initialize().await;
    let slow = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "slow", "arguments": {}}});
    g.send(&slow.to_string()).await;
    g.stdin.take();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let sent = std::time::Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(g.child.id().unwrap() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let status = tokio::time::timeout(Duration::from_secs(10), g.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let a = g.recv().await;
    assert_eq!(a["id"], 9, "the call in flight is answered: {a}");
    assert_eq!(a["result"]["isError"], true, "{a}");
    // 300 ms for stdin, 300 ms for SIGTERM, then SIGKILL; the full graces take over 4 s.
    assert!(
        sent.elapsed() < Duration::from_secs(3),
        "ended {:?} after SIGTERM",
        sent.elapsed()
    );
}

/// The same end in front of an HTTP server: on SIGTERM the call in flight still gets its
/// answer, then the session is ended with DELETE, and toolgate exits 0.
#[tokio::test]
async fn toolgate_stdio_ends_its_http_session_on_sigterm() {
    let (addr, demo) = toolgate::demo::spawn(([127, 0, 0, 1], 0).into(), Default::default())
        .await
        .unwrap();
    let mut g = StdioGate::start_args(vec![
        "stdio".into(),
        "--upstream".into(),
        format!("http://{addr}/mcp"),
    ]);
    g.initialize().await;
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "countdown", "arguments": {"steps": 1, "intervalMs": 100}}});
    g.send(&call.to_string()).await;
    // SIGTERM once the call is in flight, however long toolgate took to read it.
    let in_flight = || demo.seen().iter().any(|x| x.body["method"] == "tools/call");
    tokio::time::timeout(Duration::from_secs(10), async {
        while !in_flight() {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the call reaches the server");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(g.child.id().unwrap() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
    let answer = loop {
        let m = g.recv().await;
        if m.get("method").is_none() {
            break m;
        }
    };
    assert_eq!(answer["id"], 7, "{answer}");
    assert_eq!(
        answer["result"]["content"][0]["text"], "Lift-off!",
        "{answer}"
    );
    let status = tokio::time::timeout(Duration::from_secs(5), g.child.wait())
        .await
        .expect("toolgate ends within 5 s of SIGTERM")
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(
        demo.seen().iter().any(|x| x.http_method == "DELETE"),
        "the session is ended"
    );
    let logs = g
        .logs_when(|l| l.contains("SIGTERM: the tool server"))
        .await;
    assert!(
        logs.contains("SIGTERM: the tool server was asked to end the session (HTTP 200)"),
        "{logs}"
    );
}

#[tokio::test]
async fn a_refused_request_state_stays_a_json_rpc_error() {
    let refusal = json!({"code": -32602, "message": "requestState integrity check failed"});
    // The retry after an input-required result (SEP-2322).
    let retry = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "book", "arguments": {}, "requestState": "opaque-state"}});
    // The same error to a first call is a tool failure, rewritten for the model.
    let first = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "book", "arguments": {}}});
    let command = stdio_fixture().await;
    for mode in Mode::EVERY_FRONT {
        let (up, _) = Scripted::new(vec![open_tool("book")])
            .script("book", Script::Error(refusal.clone()))
            .spawn()
            .await;
        let mut front = Front::start(mode, &up, &command).await;
        let a = front.ask_modern(retry.clone()).await;
        // The stdio fixture speaks only the handshake, and a 2026-07-28 client is bridged to
        // it: a requestState there can only be one of toolgate's rounds, and toolgate refuses
        // one it did not issue, as the server itself would.
        let refused = match mode.to_http() {
            true => refusal.clone(),
            false => {
                json!({"code": -32602, "message": "Invalid params: requestState names no round waiting here (unknown, expired, or another client's); call the tool again without it"})
            }
        };
        assert_eq!(
            a,
            json!({"jsonrpc": "2.0", "id": 2, "error": refused}),
            "{mode}"
        );
        let a = front.ask_modern(first.clone()).await;
        assert_eq!(
            a,
            json!({"jsonrpc": "2.0", "id": 3, "result": {
                "content": [{"type": "text", "text": "requestState integrity check failed"}],
                "isError": true,
                "_meta": {"toolgate/upstream_error": refusal},
                "resultType": "complete"}}),
            "{mode}"
        );
    }
}

#[tokio::test]
async fn what_a_stdio_server_asks_before_the_get_stream_opens_still_reaches_the_client() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let dir = std::env::temp_dir().join(format!("toolgate-roots-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let command = [
        p.server_filesystem.display().to_string(),
        dir.display().to_string(),
    ];
    let tg = Toolgate::in_front_of(&command, None).await;
    // A client that has roots: server-filesystem asks for them right after `initialized`.
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {"roots": {"listChanged": true}},
        "clientInfo": {"name": "t", "version": "1"}}});
    let r = post(&tg.url(), None, init.to_string()).await;
    let session = r.headers["mcp-session-id"].to_str().unwrap().to_string();
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(
        post(&tg.url(), Some(&session), note.to_string())
            .await
            .status,
        202
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    // The GET stream opens only now; the request is waiting for it.
    let mut body = common::get_stream(&tg.url(), &session).await;
    let mut text = String::new();
    while !text.contains("roots/list") {
        text.push_str(&common::next_frame(&mut body, Duration::from_secs(10)).await);
    }
    let asked = sse_messages(&text)
        .into_iter()
        .find(|m| m["method"] == "roots/list")
        .unwrap();
    assert!(
        asked.get("id").is_some(),
        "a request the client must answer: {asked}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn toolgate_stdio_opens_a_new_session_when_the_server_lost_its_own() {
    let (mut server, port) = python_http_server(0).await;
    let mut g = StdioGate::start_args(vec![
        "stdio".into(),
        "--upstream".into(),
        format!("http://127.0.0.1:{port}/mcp"),
    ]);
    g.initialize().await;
    let add = |id: i64| json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "add", "arguments": {"a": id, "b": 1}}});
    let a = g.ask_past_notifications(add(1)).await;
    assert_eq!(result_text(&a), "2");
    // The server restarts: its sessions are gone, and it answers the old one with 404.
    server.kill().await.unwrap();
    let _ = server.wait().await;
    let (_server, _) = python_http_server(port).await;
    let a = g.ask_past_notifications(add(2)).await;
    assert_eq!(result_text(&a), "3", "answered in a new session: {a}");
    let a = g.ask_past_notifications(add(3)).await;
    assert_eq!(result_text(&a), "4");
    let logs = g.logs_when(|l| l.contains("a new one is open")).await;
    assert!(
        logs.contains("the server lost the session; a new one is open"),
        "{logs}"
    );
}

#[tokio::test]
async fn a_cancelled_request_ends_its_post_in_front_of_a_stdio_server() {
    let command = crate::common::peers::stdio_fixture(&[]).await;
    let tg = Toolgate::in_front_of(&command, None).await;
    let session = open_session(&tg.url()).await;
    let (url, s) = (tg.url(), session.clone());
    // `slow` answers after two seconds; the client gives up on it first.
    let waiting =
        tokio::spawn(async move { post(&url, Some(&s), call(5, "slow", json!({}))).await });
    tg.logs_when(|l| l.contains("slow call begun")).await;
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 5, "reason": "user gave up"}});
    assert_eq!(
        post(&tg.url(), Some(&session), cancel.to_string())
            .await
            .status,
        202
    );
    let r = waiting.await.unwrap();
    assert_eq!(
        r.json(),
        json!({"jsonrpc": "2.0", "id": 5, "error": {"code": -32800, "message": "Request cancelled"}}),
        "ended at once, not with the server's late answer"
    );
    // The session goes on.
    let a = post(
        &tg.url(),
        Some(&session),
        call(6, "add", json!({"a": 1, "b": 2})),
    )
    .await;
    assert_eq!(result_text(&a.answer()), "3");
}

#[tokio::test]
async fn a_2026_client_reaches_a_stdio_server_without_a_handshake_in_its_way() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let command = [
        p.python.display().to_string(),
        p.fixtures.join("py_server.py").display().to_string(),
        "stdio".into(),
    ];
    let tg = Toolgate::in_front_of(&command, None).await;
    let modern = |id: i64, a: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": "add", "arguments": {"a": a, "b": 1},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
                      "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}}})
        .to_string()
    };
    let headers = [
        ("content-type", "application/json"),
        ("accept", ACCEPT),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/call"),
        ("mcp-name", "add"),
    ];
    // A legacy stateless request first: the legacy shared child is initialized.
    let legacy = post(&tg.url(), None, call(1, "add", json!({"a": 1, "b": 1}))).await;
    assert_eq!(result_text(&legacy.answer()), "2", "{}", legacy.text());
    // A 2026-07-28 request goes to a child that never had a handshake.
    for i in 2..4 {
        let r = request(http::Method::POST, &tg.url(), &headers, modern(i, i)).await;
        let a = r.answer();
        assert_eq!(a["id"], i, "{}", r.text());
        assert!(a.get("error").is_none(), "{}", r.text());
        assert_eq!(result_text(&a), (i + 1).to_string(), "{}", r.text());
    }
}

/// A 2026-07-28 client cancels by closing its response (here an HTTP/2 stream it resets); in
/// front of a stdio server the shared child is then sent `notifications/cancelled` for the
/// request.
#[tokio::test]
async fn a_2026_client_closing_its_response_cancels_the_request_on_the_stdio_server() {
    let command = crate::common::peers::stdio_fixture(&[]).await;
    let tg = Toolgate::in_front_of(&command, None).await;
    let modern = |id: i64, tool: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {},
            "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {},
                      "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}}})
        .to_string()
    };
    let h2 = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .http2_only(true)
        .build_http::<http_body_util::Full<bytes::Bytes>>();
    let post = |tool: &'static str, id: i64| {
        http::Request::post(tg.url())
            .header("content-type", "application/json")
            .header("accept", ACCEPT)
            .header("mcp-protocol-version", "2026-07-28")
            .header("mcp-method", "tools/call")
            .header("mcp-name", tool)
            .body(http_body_util::Full::new(bytes::Bytes::from(modern(
                id, tool,
            ))))
            .unwrap()
    };
    // The slow call, given up half a second in.
    let gave_up =
        tokio::time::timeout(Duration::from_millis(500), h2.request(post("slow", 1))).await;
    assert!(gave_up.is_err(), "the slow call is still running");
    // The reset reaches toolgate beside the next request, not necessarily before it: the
    // child is asked until it has seen the cancellation (the slow call holds it for 2 s).
    let mut seen = String::new();
    for id in 2..20 {
        let r = h2.request(post("seen", id)).await.unwrap();
        let body = http_body_util::BodyExt::collect(r.into_body())
            .await
            .unwrap()
            .to_bytes();
        let a: serde_json::Value = serde_json::from_slice(&body).unwrap();
        seen = result_text(&a);
        if seen.contains("notifications/cancelled (notification)") {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("the child was never told: {seen}");
}

#[tokio::test]
async fn a_2026_client_on_stdio_reaches_an_http_server_with_the_headers_its_era_needs() {
    let (_server, port) = python_http_server(0).await;
    let mut g = StdioGate::start_args(vec![
        "stdio".into(),
        "--upstream".into(),
        format!("http://127.0.0.1:{port}/mcp"),
    ]);
    let meta = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}});
    // No initialize: a 2026-07-28 client is stateless.
    for (i, a) in [(1, 2), (2, 5)] {
        let msg = json!({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {
            "name": "add", "arguments": {"a": a, "b": 1}, "_meta": meta}});
        let r = g.ask_past_notifications(msg).await;
        assert!(r.get("error").is_none(), "{r}");
        assert_eq!(result_text(&r), (a + 1).to_string(), "{r}");
    }
    // Invalid arguments are still answered by toolgate, from a listing in the same era.
    let msg = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
        "name": "add", "arguments": {"a": "x", "b": 1}, "_meta": meta}});
    let r = g.ask_past_notifications(msg).await;
    assert_eq!(r["result"]["isError"], true, "{r}");
}

#[tokio::test]
async fn a_task_augmented_call_with_bad_arguments_gets_an_error_it_can_read() {
    let body = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "add", "arguments": {"a": 1, "b": "many"}, "task": {"ttl": 60000}}});
    let seen_calls = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
        "name": "seen", "arguments": {}}});
    let report = "Invalid arguments for tool \"add\" (1 problem):\n- b: expected an integer, got string \"many\" (parameter description: second)\nCorrect the arguments and call the tool again.";
    let expected = json!({"jsonrpc": "2.0", "id": 4, "error": {
        "code": -32602,
        "message": "Invalid arguments for tool \"add\" (1 problem):",
        "data": {"code": "invalid_arguments", "tool": "add", "text": report,
                 "parameter_errors": {"/b": "expected an integer, got string \"many\""}}}});
    let command = stdio_fixture().await;
    for mode in Mode::EVERY_FRONT {
        let (up, scripted) = Scripted::new(vec![add_tool()]).spawn().await;
        let mut front = Front::start(mode, &up, &command).await;
        // A JSON-RPC error, not a tool result, that still reads as the model's report.
        let a = front.ask(body.clone()).await;
        assert_eq!(a, expected, "{mode}");
        // Never forwarded.
        match mode.to_http() {
            true => assert!(scripted.tool_calls().is_empty(), "{mode}"),
            false => {
                let seen = result_text(&front.ask(seen_calls.clone()).await);
                assert_eq!(seen.matches("tools/call").count(), 1, "{mode}: {seen}");
            }
        }
    }
}

/// A task-augmented call that fails past the guard gets a JSON-RPC error too, in every
/// front: its server's error (here masked, `errors.mask_internal`), and no answer at all
/// (the server gone mid-call). Its caller reads only a task or an error.
#[tokio::test]
async fn a_task_augmented_call_that_fails_upstream_gets_an_error_it_can_read() {
    let task_call = |id: i64, tool: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": tool, "arguments": {}, "task": {"ttl": 60000}}})
    };
    let error = |id: i64, text: &str, details: serde_json::Value| {
        let mut data = details;
        data["text"] = json!(text);
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": text, "data": data}})
    };
    let failed = error(
        6,
        "The tool \"fail\" failed with an internal error (reference REF).",
        json!({"code": 0, "reference": "REF"}),
    );
    let gone = error(
        7,
        "The tool server is unavailable (reference REF). Retrying in a moment may help if the server is restarting.",
        json!({"code": "upstream_unavailable", "reference": "REF"}),
    );
    let command = stdio_fixture().await;
    for mode in Mode::EVERY_FRONT {
        let tools = vec![add_tool(), open_tool("fail"), open_tool("crash")];
        let (up, _) = Scripted::new(tools)
            .script("fail", Script::Error(json!({"code": 0, "message": "boom"})))
            .script("crash", Script::SseThenReset(vec![]))
            .spawn()
            .await;
        let config = "[errors]\nmask_internal = true\n";
        let mut front = Front::start_with(mode, &up, &command, Some(config)).await;
        // Last: the stdio fixture exits.
        for (sent, expected) in [
            (task_call(6, "fail"), &failed),
            (task_call(7, "crash"), &gone),
        ] {
            let got = front.exchange_line(&sent.to_string()).await;
            let got: Vec<_> = got.into_iter().map(referenced).collect();
            assert_eq!(got, std::slice::from_ref(expected), "{mode}: {sent}");
        }
    }
}

#[tokio::test]
async fn toolgate_stdio_answers_a_request_the_server_refused_without_an_id_once_and_by_its_id() {
    let (up, _) = refusing_upstream().await;
    let mut g = StdioGate::start_args(vec!["stdio".into(), "--upstream".into(), up]);
    g.initialize().await;
    g.send(&call(9, "echo", json!({}))).await;
    let a = g.recv().await;
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 9, "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"}})
    );
    // Nothing more for that request: the next line answers the next request.
    let a = g
        .ask(json!({"jsonrpc": "2.0", "id": 10, "method": "ping"}))
        .await;
    assert_eq!(a["id"], 10, "{a}");
}

/// toolgate's own session with a handshake-era server, kept for its 2026-07-28 clients: when
/// the server restarts and forgets it (server-everything then answers 400 "No valid session
/// ID provided", not the spec's 404), the request that finds out is answered with an error
/// that says to retry (it may not be safe to send twice), and the retry goes through a new
/// session. Alike over `serve --upstream`, `stdio --upstream` and in an application with
/// `ValidateLayer`.
#[tokio::test]
async fn a_lost_bridged_session_is_opened_again_for_the_retry() {
    let sum = |id: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "get-sum", "arguments": {"a": id, "b": 1}}})
    };
    let why = "could not reach the tool server: the tool server ended the session toolgate bridges this client through; retry the request";
    let retry = |id: i64| {
        json!({"jsonrpc": "2.0", "id": id, "result": {
        "content": [{"type": "text", "text": format!("The tool server is unavailable: {why}. Retrying in a moment may help if the server is restarting.")}],
        "isError": true,
        "_meta": {"toolgate/upstream": {"code": "upstream_unavailable", "reason": why}},
        "resultType": "complete"}})
    };
    for mode in [Mode::ServeUpstream, Mode::StdioUpstream, Mode::Layer] {
        let server = common::peers::server_everything_http().await;
        let (port, url) = (server.port, server.url.clone());
        let mut front = Front::start(mode, &url, &[]).await;
        let a = front.ask_modern(sum(1)).await;
        assert_eq!(result_text(&a), "The sum of 1 and 1 is 2.", "{mode}: {a}");
        server.stop().await;
        let _server = common::peers::server_everything_http_at(port).await;
        let a = front.ask_modern(sum(2)).await;
        assert_eq!(a, retry(2), "{mode}");
        let a = front.ask_modern(sum(3)).await;
        assert_eq!(result_text(&a), "The sum of 3 and 1 is 4.", "{mode}: {a}");
        // Lost again, and this time toolgate's own listing meets it first (a name it has
        // not listed, once the listing may be renewed): that call is answered the same way.
        let server = _server;
        server.stop().await;
        let _server = common::peers::server_everything_http_at(port).await;
        tokio::time::sleep(Duration::from_millis(1100)).await;
        let nope = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": "nope", "arguments": {}}});
        let a = front.ask_modern(nope).await;
        assert_eq!(a, retry(4), "{mode}");
        let a = front.ask_modern(sum(5)).await;
        assert_eq!(result_text(&a), "The sum of 5 and 1 is 6.", "{mode}: {a}");
    }
}

/// A handshake-era client's session that server-everything forgets when it restarts: it
/// says so with 400 and an error that names no request (not the spec's 404). Through
/// `serve --upstream` the client sees that refusal as it came, as it would without toolgate
/// (before, it read as a tool's "server-side fault"); through `stdio --upstream`, whose
/// session is toolgate's, the session is opened again and the call answered in it.
#[tokio::test]
async fn a_session_forgotten_with_400_reaches_its_client_or_is_opened_again() {
    let sum = |id: i64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "get-sum", "arguments": {"a": id, "b": 1}}})
    };
    let refusal = json!({"jsonrpc": "2.0", "error": {"code": -32000,
        "message": "Bad Request: No valid session ID provided"}});
    for mode in [Mode::ServeUpstream, Mode::StdioUpstream, Mode::Layer] {
        let server = common::peers::server_everything_http().await;
        let (port, url) = (server.port, server.url.clone());
        let mut front = Front::start(mode, &url, &[]).await;
        let a = front.ask(sum(1)).await;
        assert_eq!(result_text(&a), "The sum of 1 and 1 is 2.", "{mode}: {a}");
        server.stop().await;
        let _server = common::peers::server_everything_http_at(port).await;
        match &front {
            Front::Http { tg, session } => {
                let r = post(&tg.url(), session.as_deref(), sum(2).to_string()).await;
                assert_eq!((r.status, r.json()), (400, refusal.clone()), "{mode}");
            }
            Front::Stdio { .. } => {
                // A name it has not listed, once the listing may be renewed: toolgate's own
                // `tools/list` is the first to meet the lost session, and opens a new one.
                tokio::time::sleep(Duration::from_millis(1100)).await;
                let nope = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                    "params": {"name": "nope", "arguments": {}}});
                let a = front.ask(nope).await;
                assert_eq!(
                    a,
                    json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32602,
                        "message": "Unknown tool: nope",
                        "data": {"tool": "nope", "suggestions": []}}}),
                    "{mode}"
                );
                let a = front.ask(sum(3)).await;
                assert_eq!(result_text(&a), "The sum of 3 and 1 is 4.", "{mode}: {a}");
            }
        }
    }
}

/// A TypeScript server declares its tools with zod, and the SDK writes the schemas: a
/// discriminated union becomes a `oneOf` of objects told apart by a `const` member, a
/// date-time a `format` with zod's own expression as a `pattern` beside it. A refusal says
/// what the form the call names lacks, the forms there are when it names none, and a
/// date-time's format without the expression; what the server takes goes to it, coerced as
/// the form it names wants, a time with another offset than the `Z` zod's expression takes
/// goes as the same instant in UTC, a form named in other case as that form, and a `null` or
/// an empty string for an optional argument zod refuses is left out; a name spelt otherwise
/// at a strict object, which zod refuses as written, goes under the name declared. In every
/// mode, in front of the real server.
#[tokio::test]
async fn a_zod_servers_forms_are_explained_by_the_form_named_in_every_mode() {
    let (http, command) = (
        common::peers::typescript_zod_http().await,
        common::peers::typescript_zod_stdio().await,
    );
    let ship = |item: serde_json::Value, when: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "ship", "arguments": {"item": item, "when": when}}})
        .to_string()
    };
    let label = |arguments: serde_json::Value| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "label", "arguments": arguments}})
        .to_string()
    };
    let at = "2026-11-30T10:00:00Z";
    let cases = [
        (
            ship(json!({"kind": "letter", "weight": 2}), at),
            refused_arguments("ship", &[("/item/pages", "is required but missing")]),
        ),
        (
            ship(json!({"kind": "parcel"}), "2026-11-30"),
            refused_arguments(
                "ship",
                &[
                    (
                        "/item/kind",
                        "must be one of [\"box\",\"letter\"], got \"parcel\"",
                    ),
                    ("/when", "must be a valid date-time, got \"2026-11-30\""),
                ],
            ),
        ),
        (
            ship(json!({"kind": "letter", "pages": "3"}), at),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text",
                "text": format!(r#"{{"item":{{"kind":"letter","pages":3}},"when":"{at}"}}"#)}]}}),
        ),
        // A local time, which zod's pattern refuses: said as the offset it lacks.
        (
            ship(json!({"kind": "box", "weight": 2}), "2026-11-30T10:00:00"),
            refused_arguments(
                "ship",
                &[(
                    "/when",
                    "must be a date-time with its offset, as this tool takes it (such as \"2026-11-30T10:00:00Z\"), got \"2026-11-30T10:00:00\"",
                )],
            ),
        ),
        // A time with another offset, which zod's pattern refuses: the same instant in UTC.
        (
            ship(
                json!({"kind": "box", "weight": 2}),
                "2026-11-30T11:30:00+01:30",
            ),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text",
                "text": format!(r#"{{"item":{{"kind":"box","weight":2}},"when":"{at}"}}"#)}]}}),
        ),
        // The same without its seconds: written with them, then in UTC.
        (
            ship(
                json!({"kind": "box", "weight": 2}),
                "2026-11-30T11:30+01:30",
            ),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text",
                "text": format!(r#"{{"item":{{"kind":"box","weight":2}},"when":"{at}"}}"#)}]}}),
        ),
        // A null for the optional note, which zod refuses: left out, as if not given.
        (
            ship(json!({"kind": "box", "weight": 2}), at)
                .replace(r#""when""#, r#""note":null,"when""#),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text",
                "text": format!(r#"{{"item":{{"kind":"box","weight":2}},"when":"{at}"}}"#)}]}}),
        ),
        // A form named in other case: sent as the form it names.
        (
            ship(json!({"kind": "Box", "weight": 2}), at),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text",
                "text": format!(r#"{{"item":{{"kind":"box","weight":2}},"when":"{at}"}}"#)}]}}),
        ),
        // Names spelt in other case (`When`, an item's `Weight`): sent under the names the
        // schema declares, which zod would otherwise strip or miss.
        (
            ship(json!({"kind": "box", "Weight": 2}), at).replace(r#""when""#, r#""When""#),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text",
                "text": format!(r#"{{"item":{{"kind":"box","weight":2}},"when":"{at}"}}"#)}]}}),
        ),
        // The item as a Python dict's text (a model that writes its calls as Python): the
        // object it means.
        (
            ship(json!("{'kind': 'box', 'weight': 2}"), at),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text",
                "text": format!(r#"{{"item":{{"kind":"box","weight":2}},"when":"{at}"}}"#)}]}}),
        ),
        // An empty string for the optional duration, which its pattern refuses: the same.
        (
            ship(json!({"kind": "box", "weight": 2}), at)
                .replace(r#""when""#, r#""every":"","when""#),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text",
                "text": format!(r#"{{"item":{{"kind":"box","weight":2}},"when":"{at}"}}"#)}]}}),
        ),
        // Names spelt otherwise at strict objects (`additionalProperties: false`), which zod
        // refuses as written: sent under the names declared.
        (
            label(
                json!({"order_id": "A7", "address": {"street_name": "High St", "PostCode": "N1"}}),
            ),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text",
                "text": r#"{"orderId":"A7","address":{"streetName":"High St","postCode":"N1"}}"#}]}}),
        ),
        // An option written as words: the option it spells.
        (
            label(
                json!({"orderId": "A7", "address": {"streetName": "High St"}, "status": "On Hold"}),
            ),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text",
                "text": r#"{"orderId":"A7","address":{"streetName":"High St"},"status":"on_hold"}"#}]}}),
        ),
        // A name only near a declared one is said, as the schema refuses it.
        (
            label(json!({"orderId": "A7", "address": {"streetNam": "High St"}})),
            refused_arguments(
                "label",
                &[
                    (
                        "/address/streetNam",
                        "is not an accepted argument; did you mean \"streetName\"?",
                    ),
                    ("/address/streetName", "is required but missing"),
                ],
            ),
        ),
    ];
    // A filter of filters: checked as deep as its bound (15 levels), forwarded past it. The
    // server echoes it with each form's members in the order its schema declares them.
    let find = |levels: usize, value: serde_json::Value| {
        let (mut filter, mut echoed) = (
            json!({"op": "eq", "field": "a", "value": value}),
            format!(r#"{{"op":"eq","field":"a","value":{value}}}"#),
        );
        for i in 0..levels {
            let op = if i % 2 == 0 { "and" } else { "or" };
            filter = json!({"op": op, "all": [filter]});
            echoed = format!(r#"{{"op":"{op}","all":[{echoed}]}}"#);
        }
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "find", "arguments": {"filter": filter}}});
        (call.to_string(), format!(r#"{{"filter":{echoed}}}"#))
    };
    let filter_refused = refused_arguments(
        "find",
        &[(
            "/filter/all/0/all/0/value",
            "expected a string, got boolean true",
        )],
    );
    let (deep, echoed) = find(20, json!("b"));
    let deep_taken = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": echoed}]}});
    for mode in Mode::EVERY_FRONT {
        let mut front = Front::start(mode, &http.url, &command).await;
        for (call, expected) in &cases {
            assert_eq!(&front.ask_line(call).await, expected, "{mode}: {call}");
        }
        assert_eq!(
            front.ask_line(&find(2, json!(true)).0).await,
            filter_refused,
            "{mode}"
        );
        assert_eq!(front.ask_line(&deep).await, deep_taken, "{mode}");
    }
}

/// The Python SDK's `MCPServer` declares a naive `datetime` as `"format": "date-time"` and a
/// `time` as `"format": "time"`, and writes and reads them without an offset. A call with a
/// local time reaches it, and its result, the same local times, passes output validation;
/// one without its seconds (which Pydantic takes) goes with them; what is no date-time at all
/// is still refused, a number as it was sent. A `timedelta` as Pydantic writes it, with a
/// fraction of a second or a sign, is a `duration` on the way in and out. In every mode, in
/// front of the real server.
#[tokio::test]
async fn a_local_time_is_a_date_time_as_python_servers_write_it_in_every_mode() {
    const RULES: &str = "[validation]\noutput = \"enforce\"\n";
    let (http, command) = common::peers::python_clock().await;
    let schedule_at = |when: &str, at: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "schedule", "arguments": {"when": when, "at": at}}})
        .to_string()
    };
    let schedule = |when: &str| schedule_at(when, "09:30:00");
    let slot = json!({"when": "2026-11-30T10:00:00", "at": "09:30:00"});
    let taken = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": "{\n  \"when\": \"2026-11-30T10:00:00\",\n  \"at\": \"09:30:00\"\n}"}],
        "structuredContent": slot, "isError": false}});
    let refused = refused_arguments(
        "schedule",
        &[("/when", "must be a valid date-time, got \"2026-11-30\"")],
    );
    for mode in Mode::EVERY_FRONT {
        let mut front = Front::start_with(mode, &http.url, &command, Some(RULES)).await;
        let local = front.ask_line(&schedule("2026-11-30T10:00:00")).await;
        assert_eq!(local, taken, "{mode}");
        let spaced = front.ask_line(&schedule("2026-11-30 10:00:00")).await;
        assert_eq!(spaced, taken, "{mode}: a space for the T");
        let date = front.ask_line(&schedule("2026-11-30")).await;
        assert_eq!(date, refused, "{mode}");
        // Without their seconds, as a model writes them: written with them.
        let short = front
            .ask_line(&schedule_at("2026-11-30 10:00", "09:30"))
            .await;
        assert_eq!(short, taken, "{mode}: without seconds");
        // Durations as Pydantic writes them, with a fraction of a second or a sign: taken on
        // the way in and out.
        for (span, twice) in [
            ("PT1.5S", "PT3S"),
            ("-PT0.25S", "-PT0.5S"),
            ("P1DT0.000001S", "P2DT0.000002S"),
        ] {
            let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                "params": {"name": "pause", "arguments": {"span": span}}});
            let text = format!("{{\n  \"span\": \"{span}\",\n  \"twice\": \"{twice}\"\n}}");
            let paused = json!({"jsonrpc": "2.0", "id": 1, "result": {
                "content": [{"type": "text", "text": text}],
                "structuredContent": {"span": span, "twice": twice}, "isError": false}});
            assert_eq!(front.ask_line(&call.to_string()).await, paused, "{mode}");
        }
        // A number for a date-time is refused as sent, not as the digits it was tried as.
        let number = schedule("").replace(r#""when":"""#, r#""when":1764496800"#);
        assert_eq!(
            front.ask_line(&number).await,
            refused_arguments(
                "schedule",
                &[("/when", "expected a string, got integer 1764496800")]
            ),
            "{mode}"
        );
    }
}

/// A model writes a URL with a space in its query, or a letter outside ASCII in its path, and
/// a UUID without its hyphens; Pydantic's `AnyUrl` (as zod's `url()`) takes the URL and
/// percent-encodes it, and its `UUID` reads the digits, where the `uri` and `uuid` formats
/// refuse them. With coercion on they go as the formats write them, as the server would read
/// them; in strict mode the refusal names that; a host outside ASCII is not encoded. In every
/// mode, in front of the real server.
#[tokio::test]
async fn a_value_as_its_format_writes_it_goes_so_in_every_mode() {
    let (http, command) = common::peers::python_clock().await;
    let visit = |url: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "visit", "arguments": {"url": url, "order": "1b4e28ba2fa111d2883f0016d3cca427"}}})
        .to_string()
    };
    let given = "https://x.example/ünï?q=rust tokio";
    let encoded = "https://x.example/%C3%BCn%C3%AF?q=rust%20tokio";
    let read = format!("{encoded} 1b4e28ba-2fa1-11d2-883f-0016d3cca427");
    let taken = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": read}],
        "structuredContent": {"result": read}, "isError": false}});
    let strict = refused_arguments(
        "visit",
        &[
            (
                "/order",
                "must be a valid uuid, got \"1b4e28ba2fa111d2883f0016d3cca427\"; did you mean \"1b4e28ba-2fa1-11d2-883f-0016d3cca427\"?",
            ),
            (
                "/url",
                &format!("must be a valid uri, got \"{given}\"; did you mean \"{encoded}\"?"),
            ),
        ],
    );
    let host = refused_arguments(
        "visit",
        &[("/url", "must be a valid uri, got \"https://ü.example/a b\"")],
    );
    for mode in Mode::EVERY_FRONT {
        let mut front = Front::start(mode, &http.url, &command).await;
        assert_eq!(front.ask_line(&visit(given)).await, taken, "{mode}");
        let far = front.ask_line(&visit("https://ü.example/a b")).await;
        assert_eq!(far, host, "{mode}");
        let rules = Some("[validation]\ncoerce = false\n");
        let mut front = Front::start_with(mode, &http.url, &command, rules).await;
        assert_eq!(front.ask_line(&visit(given)).await, strict, "{mode}");
    }
}

/// A schema generator writes a language's integer types as `format`s (schemars, behind
/// `rmcp`'s tools, writes a `u32` as `"format": "uint32", "minimum": 0` and an `i32` as
/// `"format": "int32"`), which JSON Schema checks only on strings: a number past the type's
/// range is refused as out of it, as the server's own types would refuse it, and a number
/// within reaches the server. In every mode, in front of the real server.
#[tokio::test]
async fn an_integer_format_bounds_its_numbers_in_every_mode() {
    let (http, command) = common::peers::python_clock().await;
    let page = |number: serde_json::Value, shift: i64| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "page", "arguments": {"number": number, "shift": shift}}})
        .to_string()
    };
    let refused = refused_arguments(
        "page",
        &[
            ("/number", "must be at most 4294967295, got 4294967296"),
            ("/shift", "must be at least -2147483648, got -3000000000"),
        ],
    );
    let taken = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": "page 4294967295 shifted -2147483648"}],
        "structuredContent": {"result": "page 4294967295 shifted -2147483648"}, "isError": false}});
    for mode in Mode::EVERY_FRONT {
        let mut front = Front::start(mode, &http.url, &command).await;
        let past = front
            .ask_line(&page(json!(4294967296u64), -3000000000))
            .await;
        assert_eq!(past, refused, "{mode}");
        let within = front
            .ask_line(&page(json!(4294967295u64), -2147483648))
            .await;
        assert_eq!(within, taken, "{mode}");
    }
}

/// A model sends `"a"` for a list of one, and `12345` for a string of digits; a Python
/// server (Pydantic) refuses both. With coercion on they go as `["a"]` and `"12345"`, every
/// other argument as it came; an array's JSON text cut off is refused as it was sent. What
/// Pydantic's lax mode takes and JSON Schema does not (`"3.0"` for an integer, `"Yes"` for a
/// boolean) goes as the value it reads, and so does a list written as Python writes it
/// (`"['a', \"b's\"]"`), which Pydantic refuses, and a null's word (`"None"`, `"null"`).
#[tokio::test]
async fn a_lone_value_is_a_list_of_one_in_every_mode() {
    let (http, command) = common::peers::python_clock().await;
    let label = |arguments: serde_json::Value| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "label", "arguments": arguments}})
        .to_string()
    };
    let taken = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": "a:3"}],
        "structuredContent": {"result": "a:3"}, "isError": false}});
    let refused = refused_arguments(
        "label",
        &[
            ("/counts", "expected an array or null, got integer 3"),
            ("/names", "expected an array, got string \"[\\\"a\\\"\""),
        ],
    );
    for mode in Mode::EVERY_FRONT {
        let mut front = Front::start(mode, &http.url, &command).await;
        let lone = front
            .ask_line(&label(json!({"names": "a", "counts": 3})))
            .await;
        assert_eq!(lone, taken, "{mode}");
        let text = front
            .ask_line(&label(json!({"names": "a", "counts": "3"})))
            .await;
        assert_eq!(text, taken, "{mode}: a lone string read as the item it is");
        let digits = front
            .ask_line(&label(json!({"names": [12345, "a"], "counts": [2]})))
            .await;
        let joined = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "12345|a:2"}],
            "structuredContent": {"result": "12345|a:2"}, "isError": false}});
        assert_eq!(
            digits, joined,
            "{mode}: an integer where a string is wanted"
        );
        // As Pydantic's lax mode reads them: the server would take them as they are.
        let lax = front
            .ask_line(&label(
                json!({"names": ["a"], "counts": ["3.0"], "upper": "Yes"}),
            ))
            .await;
        let upper = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "A:3"}],
            "structuredContent": {"result": "A:3"}, "isError": false}});
        assert_eq!(lax, upper, "{mode}: \"3.0\" and \"Yes\"");
        // A list of one where the server takes one value, as if a parameter took several.
        let one = front
            .ask_line(&label(json!({"names": "a", "counts": 3, "upper": ["Yes"]})))
            .await;
        assert_eq!(one, upper, "{mode}: a list of one for a boolean");
        // A list as Python writes it (its `repr`), as a model that writes Python sends it.
        let python = front
            .ask_line(&label(
                json!({"names": "['a', \"b's\"]", "counts": "[3, 4,]"}),
            ))
            .await;
        let both = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "a|b's:3,4"}],
            "structuredContent": {"result": "a|b's:3,4"}, "isError": false}});
        assert_eq!(python, both, "{mode}: a Python list's text");
        // The same lists in Markdown code blocks, as a model writes JSON for a reader.
        let fenced = front
            .ask_line(&label(json!({
                "names": "```python\n['a', \"b's\"]\n```",
                "counts": "```json\n[3, 4]\n```"
            })))
            .await;
        assert_eq!(fenced, both, "{mode}: lists in code blocks");
        // The whole arguments as a Python dict's text.
        let dict = front
            .ask_line(&label(json!("{'names': ['a'], 'counts': [3, 4],}")))
            .await;
        let counts = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "a:3,4"}],
            "structuredContent": {"result": "a:3,4"}, "isError": false}});
        assert_eq!(dict, counts, "{mode}: the arguments as a Python dict");
        // And as a JavaScript object literal, its names bare, as Node's `util.inspect`
        // writes one.
        let object = front
            .ask_line(&label(json!(
                "{ names: [ 'a' ], counts: [ 3, 4 ], upper: false }"
            )))
            .await;
        assert_eq!(
            object, counts,
            "{mode}: the arguments as a JavaScript object"
        );
        // JSON text with a line break typed into a string, as a model writing text into
        // JSON does: JSON's reader refuses it bare.
        let typed = front
            .ask_line(&label(json!("{\"names\": [\"a\nb\"], \"counts\": [3, 4]}")))
            .await;
        let broken = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "a\nb:3,4"}],
            "structuredContent": {"result": "a\nb:3,4"}, "isError": false}});
        assert_eq!(typed, broken, "{mode}: a line break typed into a string");
        // Lists sent as objects named by their items' places: a JavaScript client's
        // `{...list}`, and PHP's encoding of a list that lost an item.
        let spread = front
            .ask_line(&label(
                json!({"names": {"0": "a", "1": "b"}, "counts": {"0": 3, "2": 4}}),
            ))
            .await;
        let two = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "a|b:3,4"}],
            "structuredContent": {"result": "a|b:3,4"}, "isError": false}});
        assert_eq!(spread, two, "{mode}: lists as objects named by places");
        // Integers listed with commas in one string; a name with a comma in it is one name.
        let listed = front
            .ask_line(&label(json!({"names": "a, b", "counts": "3, 4"})))
            .await;
        let one_name = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "a, b:3,4"}],
            "structuredContent": {"result": "a, b:3,4"}, "isError": false}});
        assert_eq!(listed, one_name, "{mode}: integers listed with commas");
        // A null's word in a string, which Pydantic refuses for a list or a boolean: a null
        // for the optional list, the boolean left out for its default.
        let none = front
            .ask_line(&label(
                json!({"names": ["a"], "counts": "None", "upper": "null"}),
            ))
            .await;
        let bare = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "a:"}],
            "structuredContent": {"result": "a:"}, "isError": false}});
        assert_eq!(none, bare, "{mode}: \"None\" and \"null\"");
        let cut = front
            .ask_line(&label(json!({"names": "[\"a\"", "counts": 3})))
            .await;
        assert_eq!(cut, refused, "{mode}");
    }
}

/// Arguments that would hold more than 64 MiB once read into a value (110,000 `{"":0}`,
/// 770 KB) are refused unread with one violation, and the same objects as JSON text in a
/// string are not read to convert them, alike in every mode.
#[tokio::test]
async fn arguments_too_costly_to_read_are_refused_alike_in_every_mode() {
    let (http, command) = common::peers::python_clock().await;
    let objects = format!("[{}]", vec![r#"{"":0}"#; 110_000].join(","));
    let label = |names: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"label","arguments":{{"names":{names}}}}}}}"#
        )
    };
    let why = "would hold more than 67108864 bytes once read, too many to explain what is wrong; send fewer or smaller values";
    let unread = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": format!("Invalid arguments for tool \"label\" (1 problem):\n- arguments: {why}\nCorrect the arguments and call the tool again.")}],
        "isError": true,
        "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": "label",
            "parameter_errors": {"": why}}}}});
    let as_text = serde_json::Value::String(objects.clone()).to_string();
    let mut first_text_answer = None;
    for mode in Mode::EVERY_FRONT {
        let mut front = Front::start(mode, &http.url, &command).await;
        assert_eq!(front.ask_line(&label(&objects)).await, unread, "{mode}");
        let text = front.ask_line(&label(&as_text)).await;
        let said = &text["result"]["_meta"]["toolgate/validation"]["parameter_errors"]["/names"];
        assert!(
            said.as_str()
                .is_some_and(|s| s.starts_with(r#"expected an array, got string "[{\"\":0},"#)),
            "{mode}: {text}"
        );
        let first = first_text_answer.get_or_insert_with(|| text.clone());
        assert_eq!(&text, first, "{mode}");
    }
}

/// Pydantic writes a discriminated union whose forms hold it again (`Add(left: Expr, right:
/// Expr)`, `Mul(left: Expr, right: Expr)`) so that both forms lead round through `left`: the
/// checks of a refused value double with each level. Such a schema is checked as deep as
/// that stays bounded (here 12 levels), in every mode: a refusal within it names the place
/// (and, for a form misspelt, the form meant; one in other case goes as that form), and a
/// value deeper is forwarded unchecked (`on_compile_error = "forward"`), the server's own
/// answer back at once.
#[tokio::test]
async fn an_expression_tree_is_checked_as_deep_as_its_bound_in_every_mode() {
    let (http, command) = common::peers::python_clock().await;
    let chain = |levels: usize, leaf: serde_json::Value| {
        let expr = (0..levels).fold(json!({"kind": "num", "value": leaf}), |e, i| {
            let kind = if i % 2 == 0 { "add" } else { "mul" };
            json!({"kind": kind, "left": e, "right": {"kind": "num", "value": 2}})
        });
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "evaluate", "arguments": {"expr": expr}}})
        .to_string()
    };
    let refused = refused_arguments(
        "evaluate",
        &[(
            "/expr/left/left/left/value",
            "expected a number, got string \"x\"",
        )],
    );
    let slipped = refused_arguments(
        "evaluate",
        &[(
            "/expr/kind",
            r#"must be one of ["num","add","mul"], got "ad"; did you mean "add"?"#,
        )],
    );
    let evaluated = |v: f64| {
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": format!("{v:?}")}],
            "structuredContent": {"result": v}, "isError": false}})
    };
    // ((1 + 2) × 2 + 2) × 2 …: thirty levels.
    let deep = (0..30).fold(1.0, |v, i| if i % 2 == 0 { v + 2.0 } else { v * 2.0 });
    let taken = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": format!("{deep:?}")}],
        "structuredContent": {"result": deep}, "isError": false}});
    for mode in Mode::EVERY_FRONT {
        let mut front = Front::start(mode, &http.url, &command).await;
        assert_eq!(
            front.ask_line(&chain(3, json!("x"))).await,
            refused,
            "{mode}"
        );
        assert_eq!(front.ask_line(&chain(30, json!(1))).await, taken, "{mode}");
        // A form named in the wrong case goes as the form it names in other case; one
        // misspelt is refused, with the form meant named.
        let add = chain(1, json!(1)).replace(r#""add""#, r#""Add""#);
        assert_eq!(front.ask_line(&add).await, evaluated(3.0), "{mode}");
        let add = chain(1, json!(1)).replace(r#""add""#, r#""ad""#);
        assert_eq!(front.ask_line(&add).await, slipped, "{mode}");
        let server = front.ask_line(&chain(30, json!("x"))).await;
        let said = server["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        assert!(
            server["result"]["isError"] == true
                && said.starts_with("Error executing tool evaluate"),
            "{mode}: {server}"
        );
        // As JSON text, read as a value only within the bound: past it, refused as sent.
        let text = front.ask_line(&as_text(&chain(30, json!("x")))).await;
        let sent = r#"expected an object, got string "{\"kind\":\"mul\",\"left\":{\"kind\":\"add\",\"left\":{\"ki…"#;
        assert_eq!(
            text,
            refused_arguments("evaluate", &[("/expr", sent)]),
            "{mode}"
        );
        let three = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "8.0"}],
            "structuredContent": {"result": 8.0}, "isError": false}});
        assert_eq!(
            front.ask_line(&as_text(&chain(3, json!(1)))).await,
            three,
            "{mode}"
        );
    }
}

/// A `tools/call` with its `expr` argument written as JSON text.
fn as_text(call: &str) -> String {
    let mut call: serde_json::Value = serde_json::from_str(call).unwrap();
    let expr = call["params"]["arguments"]["expr"].to_string();
    call["params"]["arguments"]["expr"] = json!(expr);
    call.to_string()
}

/// toolgate's refusal of a call's arguments with id 1, as a tool error: each problem as its
/// place (a JSON pointer) and what is wrong, in the order the report gives them.
fn refused_arguments(tool: &str, problems: &[(&str, &str)]) -> serde_json::Value {
    let place = |pointer: &str| {
        let mut shown = String::new();
        for part in pointer.split('/').skip(1) {
            match part.parse::<usize>() {
                Ok(i) => shown.push_str(&format!("[{i}]")),
                Err(_) if shown.is_empty() => shown.push_str(part),
                Err(_) => shown.push_str(&format!(".{part}")),
            }
        }
        shown
    };
    let lines: Vec<String> = (problems.iter())
        .map(|(at, why)| format!("- {}: {why}", place(at)))
        .collect();
    let text = format!(
        "Invalid arguments for tool \"{tool}\" ({} problem{}):\n{}\nCorrect the arguments and call the tool again.",
        lines.len(),
        if lines.len() == 1 { "" } else { "s" },
        lines.join("\n")
    );
    let errors: serde_json::Map<String, serde_json::Value> = (problems.iter())
        .map(|(at, why)| ((*at).to_owned(), json!(why)))
        .collect();
    json!({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": text}], "isError": true,
        "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": tool,
            "parameter_errors": errors}}}})
}
