//! One table of scenarios driven through every front: the four modes and `ValidateLayer` in an
//! application. Each scenario has one expected JSON-RPC answer, the same whatever the front and
//! whichever kind of server is behind it (a scripted HTTP server, or the stdio fixture, which
//! answer alike, directly or over the HTTP+SSE transport), and the calls are counted alike in every front's `/metrics` (over stdio, the
//! one `--admin-listen` opens). What differs by transport by design (a `tools/call` sent as a
//! notification: 400 over HTTP, no answer over stdio) is asserted where it is tested, in
//! `hardening.rs` and `stdio.rs`.

use crate::common;
use common::modes::{Front, Mode};
use common::referenced;
use common::scripted::{Script, Scripted, open_tool};
use serde_json::{Value, json};

const CONFIG: &str =
    "[errors]\nmask_internal = true\n[validation]\ndeny_tools = [\"book\"]\noutput = \"enforce\"\n";

/// The stdio fixture's tools, as the scripted server lists them and answers them.
fn scripted() -> Scripted {
    let add = json!({"name": "add", "description": "Add two integers.", "inputSchema": {"type": "object", "properties": {"a": {"type": "integer", "description": "first"}, "b": {"type": "integer", "description": "second"}}, "required": ["a", "b"]}});
    let weather = json!({"name": "weather", "description": "Says the temperature.", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object", "properties": {"celsius": {"type": "number"}}, "required": ["celsius"]}});
    let mut tools = vec![add];
    for name in [
        "crash", "fail", "slow", "notify", "whoami", "internal", "big", "seen", "measure", "book",
    ] {
        tools.push(open_tool(name));
    }
    tools.push(weather);
    tools.push(research());
    Scripted::new(tools)
        .script(
            "add",
            Script::Result(json!({"content": [{"type": "text", "text": "3"}]})),
        )
        .script(
            "internal",
            Script::Error(json!({"code": -32603, "message": "db password=hunter2"})),
        )
        .script("fail", Script::Error(json!({"code": 0, "message": "boom"})))
        .script(
            "notify",
            Script::Sse {
                messages: vec![
                    json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "p1", "progress": 1, "total": 2}}),
                    json!({"jsonrpc": "2.0", "id": "$id", "result": {"content": [{"type": "text", "text": "notified"}]}}),
                ],
                numbered: false,
            },
        )
        .script("crash", Script::SseThenReset(vec![]))
        .script(
            "slow",
            Script::Slow(
                std::time::Duration::from_secs(2),
                json!({"content": [{"type": "text", "text": "slow done"}]}),
            ),
        )
        .script(
            "weather",
            Script::Result(json!({"content": [{"type": "text", "text": "{\"celsius\": \"warm\"}"}], "structuredContent": {"celsius": "warm"}})),
        )
        .script("research", Script::Result(json!({"task": task()})))
        .script(
            "tasks/result",
            Script::Result(json!({"content": [{"type": "text", "text": "42"}], "structuredContent": {"answer": 42}})),
        )
}

/// A tool with an outputSchema that starts a task (2025-11-25) when asked to, as the stdio
/// fixture lists it; the scripted server answers every call of it so.
fn research() -> Value {
    json!({"name": "research", "description": "Researches, as a task when asked.", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}, "execution": {"taskSupport": "optional"}})
}

/// The task both servers say `research` started.
fn task() -> Value {
    json!({"taskId": "task-1", "status": "working", "createdAt": "2026-11-30T00:00:00Z", "lastUpdatedAt": "2026-11-30T00:00:00Z", "ttl": 60000, "pollInterval": 1000})
}

/// `text` as a JavaScript client spreads a string into an object: one member per character,
/// under its place.
fn spread(text: &str) -> Value {
    let members = (text.chars().enumerate()).map(|(i, c)| (i.to_string(), json!(c.to_string())));
    Value::Object(members.collect())
}

fn call(id: i64, tool: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}})
}

/// Each scenario: its name, what the client sends, and what every front gives back for it:
/// what the server sent on the way (over HTTP, on the request's stream), then the answer.
fn table() -> Vec<(&'static str, Value, Vec<Value>)> {
    let masked = |id: i64, tool: &str, code: i64| {
        json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": format!("The tool \"{tool}\" failed with an internal error (reference REF).")}],
            "isError": true,
            "_meta": {"toolgate/upstream_error": {"code": code, "reference": "REF"}}}})
    };
    let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "p1", "progress": 1, "total": 2}});
    // A call of `add` that leaves out each of `missing` (its name and description).
    let refused = |id: i64, missing: &[(&str, &str)]| {
        let lines: Vec<String> = (missing.iter())
            .map(|(name, about)| {
                format!("\n- {name}: is required but missing (parameter description: {about})")
            })
            .collect();
        let text = format!(
            "Invalid arguments for tool \"add\" ({} problems):{}\nCorrect the arguments and call the tool again.",
            missing.len(),
            lines.concat()
        );
        let errors: serde_json::Map<String, Value> = (missing.iter())
            .map(|(name, _)| (format!("/{name}"), json!("is required but missing")))
            .collect();
        json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": text}],
            "isError": true,
            "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": "add",
                "parameter_errors": errors}}}})
    };
    let report = "Invalid arguments for tool \"add\" (1 problem):\n- b: expected an integer, got string \"many\" (parameter description: second)\nCorrect the arguments and call the tool again.";
    vec![
        (
            "valid",
            call(1, "add", json!({"a": 1, "b": 2})),
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "3"}]}}),
        ),
        (
            "coerced",
            call(2, "add", json!({"a": "1", "b": 2})),
            json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "3"}]}}),
        ),
        (
            "arguments sent as JSON text, read for the object it holds",
            call(22, "add", json!(r#"{"a": "1", "b": 2}"#)),
            json!({"jsonrpc": "2.0", "id": 22, "result": {"content": [{"type": "text", "text": "3"}]}}),
        ),
        (
            "arguments sent as JSON text in a Markdown code block, read for the object it holds",
            call(29, "add", json!("```json\n{\"a\": 1, \"b\": 2}\n```")),
            json!({"jsonrpc": "2.0", "id": 29, "result": {"content": [{"type": "text", "text": "3"}]}}),
        ),
        (
            "arguments encoded as JSON text twice, read for the object they hold",
            call(36, "add", json!(json!(r#"{"a": 1, "b": "2"}"#).to_string())),
            json!({"jsonrpc": "2.0", "id": 36, "result": {"content": [{"type": "text", "text": "3"}]}}),
        ),
        (
            "arguments sent as a list of one object, read for the object",
            call(37, "add", json!([{"a": "1", "b": 2}])),
            json!({"jsonrpc": "2.0", "id": 37, "result": {"content": [{"type": "text", "text": "3"}]}}),
        ),
        (
            "arguments written as the call itself, sent as what the call's arguments hold",
            call(38, "add", json!({"name": "add", "arguments": {"a": "1", "b": 2}})),
            json!({"jsonrpc": "2.0", "id": 38, "result": {"content": [{"type": "text", "text": "3"}]}}),
        ),
        (
            "a list of one where a single value is wanted, sent as its item",
            call(30, "add", json!({"a": ["1"], "b": 2})),
            json!({"jsonrpc": "2.0", "id": 30, "result": {"content": [{"type": "text", "text": "3"}]}}),
        ),
        (
            "arguments wrapped once more, sent as what they hold",
            call(23, "add", json!({"arguments": {"a": "1", "b": 2}})),
            json!({"jsonrpc": "2.0", "id": 23, "result": {"content": [{"type": "text", "text": "3"}]}}),
        ),
        (
            "the schema echoed with the arguments in it, sent as what its properties hold",
            call(26, "add", json!({"type": "object", "properties": {"a": "1", "b": 2}, "required": ["a", "b"]})),
            json!({"jsonrpc": "2.0", "id": 26, "result": {"content": [{"type": "text", "text": "3"}]}}),
        ),
        (
            "a declared name in other case, sent under it",
            call(24, "add", json!({"A": 1, "b": 2})),
            json!({"jsonrpc": "2.0", "id": 24, "result": {"content": [{"type": "text", "text": "3"}]}}),
        ),
        (
            "arguments spread from their text one character each, sent as the object it writes",
            call(25, "add", spread(r#"{"a": "1", "b": 2}"#)),
            json!({"jsonrpc": "2.0", "id": 25, "result": {"content": [{"type": "text", "text": "3"}]}}),
        ),
        (
            "invalid",
            call(3, "add", json!({"a": 1, "b": "many"})),
            json!({"jsonrpc": "2.0", "id": 3, "result": {
                "content": [{"type": "text", "text": report}],
                "isError": true,
                "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": "add",
                    "parameter_errors": {"/b": "expected an integer, got string \"many\""}}}}}),
        ),
        (
            "arguments that are null, read as none",
            call(27, "add", json!(null)),
            refused(27, &[("a", "first"), ("b", "second")]),
        ),
        (
            "a required argument given under a near name",
            call(19, "add", json!({"a": 1, "bb": 2})),
            json!({"jsonrpc": "2.0", "id": 19, "result": {
                "content": [{"type": "text", "text": "Invalid arguments for tool \"add\" (2 problems):\n- b: is required but missing (parameter description: second)\n- bb: is not a parameter of this tool; did you mean \"b\"? (b: second)\nCorrect the arguments and call the tool again."}],
                "isError": true,
                "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": "add",
                    "parameter_errors": {"/b": "is required but missing", "/bb": "is not a parameter of this tool; did you mean \"b\"? (b: second)"}}}}}),
        ),
        (
            "unknown",
            call(4, "ad", json!({})),
            json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32602,
                "message": "Unknown tool: ad. Did you mean \"add\"?",
                "data": {"tool": "ad", "suggestions": ["add"]}}}),
        ),
        (
            "denied",
            call(5, "book", json!({})),
            json!({"jsonrpc": "2.0", "id": 5, "result": {
                "content": [{"type": "text", "text": "The tool \"book\" is not available: this gateway's policy does not allow it. Use another tool."}],
                "isError": true,
                "_meta": {"toolgate/policy": {"code": "tool_denied", "tool": "book"}}}}),
        ),
        (
            "masked internal error",
            call(6, "internal", json!({})),
            masked(6, "internal", -32603),
        ),
        (
            "masked tool failure",
            call(7, "fail", json!({})),
            masked(7, "fail", 0),
        ),
        (
            "output validation",
            call(8, "weather", json!({})),
            json!({"jsonrpc": "2.0", "id": 8, "result": {
                "content": [{"type": "text", "text": "The tool \"weather\" returned a result that does not match its declared outputSchema:\n- structuredContent/celsius: expected a number, got string \"warm\"\nThis is a fault of the tool server, not of the call."}],
                "isError": true,
                "_meta": {"toolgate/output_validation": {"code": "invalid_output", "errors": {"/celsius": "expected a number, got string \"warm\""}}}}}),
        ),
        (
            "a call that starts a task: no output of the tool yet",
            json!({"jsonrpc": "2.0", "id": 13, "method": "tools/call", "params": {"name": "research", "arguments": {}, "task": {"ttl": 60000}}}),
            json!({"jsonrpc": "2.0", "id": 13, "result": {"task": task()}}),
        ),
        (
            "the task's result, held to its tool's outputSchema",
            json!({"jsonrpc": "2.0", "id": 15, "method": "tasks/result", "params": {"taskId": "task-1"}}),
            json!({"jsonrpc": "2.0", "id": 15, "result": {
                "content": [{"type": "text", "text": "The tool \"research\" returned a result that does not match its declared outputSchema:\n- structuredContent/answer: expected a string, got integer 42\nThis is a fault of the tool server, not of the call."}],
                "isError": true,
                "_meta": {"toolgate/output_validation": {"code": "invalid_output", "errors": {"/answer": "expected a string, got integer 42"}}}}}),
        ),
        (
            "progress on the way",
            json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "notify", "arguments": {}, "_meta": {"progressToken": "p1"}}}),
            json!([progress, {"jsonrpc": "2.0", "id": 9, "result": {"content": [{"type": "text", "text": "notified"}]}}]),
        ),
        (
            "a batch holding a call",
            json!([{"jsonrpc": "2.0", "id": 10, "method": "ping"}, call(11, "add", json!({"a": 1, "b": 2}))]),
            // One answer, as JSON-RPC answers a batch: an error for each request, by its id.
            json!([[
                {"jsonrpc": "2.0", "id": 10, "error": {"code": -32600, "message": "Invalid Request: toolgate does not accept tools/call inside a batch; send each call on its own"}},
                {"jsonrpc": "2.0", "id": 11, "error": {"code": -32600, "message": "Invalid Request: toolgate does not accept tools/call inside a batch; send each call on its own"}},
            ]]),
        ),
        (
            "a batch with an item that is no message",
            json!([{"jsonrpc": "2.0", "id": 18, "method": "ping"}, 5]),
            // Refused whole; the request is answered under its id, the bad item under none.
            json!([[
                {"jsonrpc": "2.0", "id": 18, "error": {"code": -32600, "message": "Invalid Request: item 2 of the batch is no JSON-RPC message; nothing in the batch was sent"}},
                {"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request: item 2 of the batch: invalid type: integer `5`, expected a JSON-RPC message object at line 1 column 1"}},
            ]]),
        ),
        (
            "a request whose id is no string or number",
            json!({"jsonrpc": "2.0", "id": true, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}),
            json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request: a request's \"id\" must be a string or a number"}}),
        ),
        (
            "a request that is not JSON-RPC 2.0, answered under its id",
            json!({"jsonrpc": "1.0", "id": 17, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}}),
            json!({"jsonrpc": "2.0", "id": 17, "error": {"code": -32600, "message": "Invalid Request: the \"jsonrpc\" member must be \"2.0\""}}),
        ),
        (
            "a call whose params are no object",
            json!({"jsonrpc": "2.0", "id": 14, "method": "tools/call", "params": ["add", {"a": 1, "b": 2}]}),
            json!({"jsonrpc": "2.0", "id": 14, "error": {"code": -32602, "message": "Invalid params for tools/call: \"params\" must be an object"}}),
        ),
        (
            "a call that names no tool",
            json!({"jsonrpc": "2.0", "id": 27, "method": "tools/call", "params": {"arguments": {"a": 1, "b": 2}}}),
            json!({"jsonrpc": "2.0", "id": 27, "error": {"code": -32602, "message": "Invalid params for tools/call: \"name\" is missing: send the name of the tool to call"}}),
        ),
        (
            "a call whose tool name is no string",
            json!({"jsonrpc": "2.0", "id": 28, "method": "tools/call", "params": {"name": null, "arguments": {}}}),
            json!({"jsonrpc": "2.0", "id": 28, "error": {"code": -32602, "message": "Invalid params for tools/call: \"name\" must be a string: the name of the tool to call"}}),
        ),
        (
            "a request whose params no server could read",
            json!({"jsonrpc": "2.0", "id": 16, "method": "tools/list", "params": "all"}),
            json!({"jsonrpc": "2.0", "id": 16, "error": {"code": -32600, "message": "Invalid Request: \"params\" must be an object or an array"}}),
        ),
        // Last: the stdio fixture exits, and what becomes of the session then is each kind
        // of server's policy (docs/architecture.md), asserted in `recovery.rs`.
        (
            "the server gone mid-answer",
            call(12, "crash", json!({})),
            json!({"jsonrpc": "2.0", "id": 12, "result": {
                "content": [{"type": "text", "text": "The tool server is unavailable (reference REF). Retrying in a moment may help if the server is restarting."}],
                "isError": true,
                "_meta": {"toolgate/upstream": {"code": "upstream_unavailable", "reference": "REF"}}}}),
        ),
    ]
    .into_iter()
    .map(|(name, sent, expected)| match expected {
        Value::Array(all) => (name, sent, all),
        answer => (name, sent, vec![answer]),
    })
    .collect()
}

#[tokio::test]
async fn every_front_answers_every_scenario_alike() {
    let command = common::peers::stdio_fixture(&["--typed"]).await;
    let mut counted: Option<(Mode, Vec<String>)> = None;
    for mode in Mode::EVERY_FRONT {
        let (url, _) = scripted().spawn().await;
        let mut front = Front::start_with(mode, &url, &command, Some(CONFIG)).await;
        for (name, sent, expected) in table() {
            let got: Vec<Value> = front.exchange_line(&sent.to_string()).await;
            let got: Vec<Value> = got.into_iter().map(referenced).collect();
            assert_eq!(got, expected, "{mode}: {name}");
        }
        // Counted alike too: each call under its tool and outcome, in every front.
        let calls = tool_calls(&front.metrics().await);
        match &counted {
            None => {
                assert_eq!(calls, expected_counts(), "{mode}");
                counted = Some((mode, calls))
            }
            Some((first, expected)) => {
                assert_eq!(&calls, expected, "{mode} counts as {first} does")
            }
        }
    }
}

/// The same table through a server of the HTTP+SSE transport: the stdio fixture behind
/// `fixtures/sse_bridge.py`, in both fronts that reach an HTTP server. Such a server is
/// served as a stdio server's child is, and answers and is counted as the other fronts do.
#[tokio::test]
async fn a_server_of_the_http_and_sse_transport_answers_every_scenario_alike() {
    let command = common::peers::stdio_fixture(&["--typed"]).await;
    let mut args = vec!["--"];
    args.extend(command.iter().map(String::as_str));
    let bridge = common::peers::python_http("sse_bridge.py", &args).await;
    let url = format!("http://127.0.0.1:{}/sse", bridge.port);
    for mode in [Mode::ServeUpstream, Mode::StdioUpstream] {
        let (endpoint, got) = crate::telemetry::collector().await;
        let config = format!(
            "upstream_transport = \"sse\"\n{CONFIG}[telemetry]\notlp_endpoint = \"{endpoint}\"\n"
        );
        let mut front = Front::start_with(mode, &url, &[], Some(&config)).await;
        for (name, sent, expected) in table() {
            let got: Vec<Value> = front.exchange_line(&sent.to_string()).await;
            let got: Vec<Value> = got.into_iter().map(referenced).collect();
            assert_eq!(got, expected, "{mode}: {name}");
        }
        let calls = tool_calls(&front.metrics().await);
        assert_eq!(calls, expected_counts(), "{mode}");
        // Its hops say what the server is, and where.
        let mut hops = Vec::new();
        for _ in 0..100 {
            let all = crate::telemetry::spans(&got, 1).await;
            hops = all.into_iter().filter(|s| s.kind == 3).collect();
            if !hops.is_empty() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        assert!(!hops.is_empty(), "{mode}");
        for hop in &hops {
            let attr = |name| crate::telemetry::attr(hop, name);
            assert_eq!(
                attr("toolgate.server").as_deref(),
                Some("http+sse"),
                "{mode}"
            );
            assert_eq!(
                attr("server.address").as_deref(),
                Some("127.0.0.1"),
                "{mode}"
            );
        }
    }
}

/// The table's calls as `toolgate_tool_calls_total` counts them: once when decided, and
/// again when a failure's answer is rewritten or none came. A batch is refused before any
/// call in it is decided.
fn expected_counts() -> Vec<String> {
    [
        ("(unlisted)", "unknown", 1),
        ("add", "coerced", 11),
        ("add", "forwarded", 1),
        ("add", "rejected_invalid", 3),
        ("book", "denied", 1),
        ("crash", "forwarded", 1),
        ("crash", "upstream_error", 1),
        ("fail", "forwarded", 1),
        ("fail", "rewritten", 1),
        ("internal", "forwarded", 1),
        ("internal", "rewritten", 1),
        ("notify", "forwarded", 1),
        ("research", "forwarded", 1),
        ("weather", "forwarded", 1),
    ]
    .map(|(tool, outcome, n)| {
        format!("toolgate_tool_calls_total{{upstream=\"default\",tool=\"{tool}\",outcome=\"{outcome}\"}} {n}")
    })
    .to_vec()
}

/// The `toolgate_tool_calls_total` series, sorted.
fn tool_calls(metrics: &str) -> Vec<String> {
    let mut lines: Vec<String> = metrics
        .lines()
        .filter(|l| l.starts_with("toolgate_tool_calls_total{"))
        .map(str::to_owned)
        .collect();
    lines.sort();
    assert!(!lines.is_empty(), "{metrics}");
    lines
}

/// A message that stops being JSON before its end (a byte that is not UTF-8, more after its
/// object, the text cut off) is refused in every front as a parse error, under the id of the
/// request it began as where its members before the fault name one: over stdio nothing else
/// would answer it. The server sees none of them, and the session goes on.
#[tokio::test]
async fn a_message_that_stops_being_json_is_answered_under_the_id_it_began_with() {
    let command = common::peers::stdio_fixture(&["--typed"]).await;
    let parse_error = |id: Option<i64>, why: &str| {
        let mut e = json!({"jsonrpc": "2.0", "error": {"code": -32700, "message": format!("Parse error: {why}")}});
        if let Some(id) = id {
            e["id"] = json!(id);
        }
        e
    };
    let table: [(&str, &[u8], Value); 4] = [
        (
            "a byte that is not UTF-8 in an argument",
            b"{\"jsonrpc\":\"2.0\",\"id\":31,\"method\":\"tools/call\",\"params\":{\"name\":\"add\",\"arguments\":{\"a\":1,\"b\":2,\"note\":\"caf\xe9\"}}}",
            parse_error(Some(31), "the message is not UTF-8 (invalid utf-8 sequence of 1 bytes from index 106); send its text as UTF-8"),
        ),
        (
            "more after the object",
            br#"{"jsonrpc":"2.0","id":32,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2}}}}"#,
            parse_error(Some(32), "trailing characters at line 1 column 98"),
        ),
        (
            "cut off",
            br#"{"jsonrpc":"2.0","id":33,"method":"tools/call","params":{"name":"add","argu"#,
            parse_error(Some(33), "EOF while parsing a string at line 1 column 75"),
        ),
        (
            "the fault before the id",
            br#"{"jsonrpc":"2.0","method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2,}},"id":34}"#,
            parse_error(None, "key must be a string at line 1 column 88"),
        ),
    ];
    for mode in Mode::EVERY_FRONT {
        let (url, server) = scripted().spawn().await;
        let mut front = Front::start_with(mode, &url, &command, Some(CONFIG)).await;
        for (name, sent, expected) in &table {
            let got: Value = serde_json::from_str(&front.ask_line_text(sent).await).unwrap();
            assert_eq!(&got, expected, "{mode}: {name}");
        }
        let a = front.ask(call(35, "add", json!({"a": 1, "b": 2}))).await;
        assert_eq!(a["result"]["content"][0]["text"], "3", "{mode}: {a}");
        if mode.to_http() {
            let seen = server.seen.lock().unwrap();
            let calls: Vec<&Value> = (seen.iter())
                .filter(|m| m["method"] == "tools/call")
                .map(|m| &m["id"])
                .collect();
            assert_eq!(
                calls,
                [&json!(35)],
                "{mode}: the server had the valid call only"
            );
        }
    }
}

/// What a transport decides, asserted in one table too: a `tools/call` sent as a
/// notification (which no front forwards: over HTTP its POST is refused, over stdio nothing
/// may answer it), and a call the client cancels, whose cancellation reaches the server in
/// every front. What the client then hears of the cancelled call is its transport's: over
/// stdio nothing (the specification's word), over HTTP the POST's response ends, with what
/// the HTTP server sends or, for a stdio server, toolgate's `-32800`.
#[tokio::test]
async fn what_a_transport_decides_differs_only_by_transport() {
    let command = common::peers::stdio_fixture(&["--typed"]).await;
    let refused = json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request: tools/call must be a request with an id; toolgate does not forward it as a notification"}});
    let slow = call(20, "slow", json!({}));
    for mode in Mode::EVERY_FRONT {
        let (url, server) = scripted().spawn().await;
        let mut front = Front::start_with(mode, &url, &command, Some(CONFIG)).await;
        let sent = json!({"jsonrpc": "2.0", "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}});
        let got = front.notify_line(&sent.to_string()).await;
        let got = got.map(|(status, body)| (status, serde_json::from_str::<Value>(&body).unwrap()));
        let expected = matches!(front, Front::Http { .. }).then(|| (400, refused.clone()));
        assert_eq!(got, expected, "{mode}: a tools/call notification");

        // Cancelled once the server has the call: the HTTP server's record, or the line
        // the stdio server writes on stderr, which toolgate logs.
        let reached = |logs: &str| {
            logs.contains("slow call begun")
                || (server.seen.lock().unwrap().iter()).any(|m| m["params"]["name"] == "slow")
        };
        let got = front.exchange_cancelled(&slow, reached).await;
        let expected = match mode {
            Mode::StdioUpstream | Mode::StdioCommand => vec![],
            Mode::ServeCommand => vec![
                json!({"jsonrpc": "2.0", "id": 20, "error": {"code": -32800, "message": "Request cancelled"}}),
            ],
            Mode::ServeUpstream | Mode::Layer => vec![
                json!({"jsonrpc": "2.0", "id": 20, "result": {"content": [{"type": "text", "text": "slow done"}]}}),
            ],
        };
        assert_eq!(got, expected, "{mode}: a cancelled call");

        // The server saw the call and its cancellation, and never the notification.
        let saw: Vec<String> = if mode.to_http() {
            let seen = server.seen.lock().unwrap();
            assert!(
                seen.iter()
                    .any(|m| m["method"] == "notifications/cancelled"
                        && m["params"]["requestId"] == 20),
                "{mode}: the cancellation names the call as the server knows it"
            );
            seen.iter()
                .map(|m| m["method"].as_str().unwrap_or_default().to_owned())
                .collect()
        } else {
            let a = front.ask(call(21, "seen", json!({}))).await;
            assert_eq!(a["result"]["isError"], Value::Null, "{mode}: {a}");
            let text = a["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .to_owned();
            serde_json::from_str::<Vec<String>>(&text)
                .unwrap()
                .into_iter()
                .map(|m| m.replace(" (notification)", ""))
                .collect()
        };
        let saw: Vec<&str> = saw
            .iter()
            .map(String::as_str)
            .filter(|m| !["initialize", "notifications/initialized", "tools/list"].contains(m))
            .collect();
        let expected: &[&str] = match mode.to_http() {
            true => &["tools/call", "notifications/cancelled"],
            // The fixture lists the `seen` call that asked too.
            false => &["tools/call", "notifications/cancelled", "tools/call"],
        };
        assert_eq!(saw, expected, "{mode}");
    }
}

/// The same calls through every front leave the same spans: a server span per request,
/// named and classified alike (`error.type`, `toolgate.outcome`), with the hop to the server
/// a client span under it exactly when the call went to the server. A hop says the same of
/// the same kind of server through every front; what it says differs by kind where the
/// servers did differently (the HTTP server's crash answers a head first, the child's none).
#[tokio::test]
async fn every_front_traces_every_scenario_alike() {
    use crate::telemetry::{attr, collector, spans};
    let command = common::peers::stdio_fixture(&["--typed"]).await;
    let ids = ["1", "3", "4", "5", "6", "12"];
    let mut first: Option<(Mode, Vec<String>)> = None;
    let mut first_of_kind: Vec<(bool, Mode, Vec<String>)> = Vec::new();
    for mode in Mode::EVERY_FRONT {
        let (endpoint, got) = collector().await;
        let config = format!("{CONFIG}[telemetry]\notlp_endpoint = \"{endpoint}\"\n");
        let (url, server) = scripted().spawn().await;
        let mut front = Front::start_with(mode, &url, &command, Some(&config)).await;
        for (_, sent, _) in table().into_iter().filter(|(_, sent, _)| {
            sent["id"]
                .as_i64()
                .is_some_and(|id| ids.contains(&id.to_string().as_str()))
        }) {
            front.exchange_line(&sent.to_string()).await;
        }
        let mut summary = Vec::new();
        for _ in 0..100 {
            let all = spans(&got, 0).await;
            summary = ids
                .iter()
                .filter_map(|id| {
                    let server = all.iter().find(|s| {
                        s.kind == 2 && attr(s, "jsonrpc.request.id").as_deref() == Some(id)
                    })?;
                    let hops: Vec<String> = all
                        .iter()
                        .filter(|c| c.kind == 3 && c.parent_span_id == server.span_id)
                        .map(|c| format!("hop {:?}", attr(c, "error.type")))
                        .collect();
                    Some(format!(
                        "{id} {} error.type={:?} outcome={:?} {hops:?}",
                        server.name,
                        attr(server, "error.type"),
                        attr(server, "toolgate.outcome"),
                    ))
                })
                .collect();
            if summary.len() == ids.len() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        eprintln!("{mode}: {summary:#?}");
        // A hop says the same of the same kind of server, whichever front it came through.
        let all = spans(&got, 0).await;
        for hop in all.iter().filter(|s| s.kind == 3) {
            let kind = if mode.to_http() { "http" } else { "stdio" };
            assert_eq!(
                attr(hop, "toolgate.server").as_deref(),
                Some(kind),
                "{mode}"
            );
            let said = |name| attr(hop, name).is_some();
            // (An application's own service in process has an address and no port.)
            let http =
                said("server.address") && (said("http.response.status_code") || said("error.type"));
            assert_eq!(http, mode.to_http(), "{mode}: {hop:?}");
        }
        // An HTTP server is handed each hop's context, whichever front it came through.
        if mode.to_http() {
            let all = spans(&got, 0).await;
            let sent: Vec<String> = (server.seen_headers.lock().unwrap().iter())
                .filter_map(|h| Some(h.get("traceparent")?.to_str().ok()?.to_owned()))
                .collect();
            let hops: Vec<_> = all.iter().filter(|s| s.kind == 3).collect();
            assert!(!hops.is_empty(), "{mode}: no hop in {all:?}");
            for hop in hops {
                let id: String = hop.span_id.iter().map(|b| format!("{b:02x}")).collect();
                assert!(
                    sent.iter().any(|p| p.contains(&id)),
                    "{mode}: hop {id} in {sent:?}"
                );
            }
        }
        match first_of_kind
            .iter()
            .find(|(http, ..)| *http == mode.to_http())
        {
            None => first_of_kind.push((mode.to_http(), mode, summary.clone())),
            Some((_, m, expected)) => assert_eq!(&summary, expected, "{mode} traces as {m} does"),
        }
        // The requests' own spans, alike whatever the kind of server.
        let requests: Vec<String> = summary
            .iter()
            .map(|s| s.split(" [").next().unwrap_or(s).to_owned())
            .collect();
        match &first {
            None => first = Some((mode, requests)),
            Some((m, expected)) => assert_eq!(&requests, expected, "{mode} traces as {m} does"),
        }
    }
}
