//! One table of scenarios driven through every front: the four modes and `ValidateLayer` in
//! an application. Each scenario has one expected JSON-RPC answer, the same whatever the
//! front and whichever kind of server is behind it (a scripted HTTP server, or the stdio
//! fixture, which answer alike), and the calls are counted alike in every front's
//! `/metrics` (over stdio, the one `--admin-listen` opens). What differs by transport by design (a `tools/call` sent as
//! a notification: 400 over HTTP, no answer over stdio) is asserted where it is tested, in
//! `hardening.rs` and `stdio.rs`.

use crate::common;
use common::modes::{Front, Mode};
use common::referenced;
use common::scripted::{Script, Scripted, open_tool};
use serde_json::{Value, json};

const CONFIG: &str =
    "[errors]\nmask_internal = true\n[validation]\ndeny_tools = [\"seen\"]\noutput = \"enforce\"\n";

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
            "weather",
            Script::Result(json!({"content": [{"type": "text", "text": "{\"celsius\": \"warm\"}"}], "structuredContent": {"celsius": "warm"}})),
        )
}

fn call(id: i64, tool: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}})
}

/// Each scenario: its name, what the client sends, and the one answer every front gives.
fn table() -> Vec<(&'static str, Value, Value)> {
    let masked = |id: i64, tool: &str, code: i64| {
        json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": format!("The tool \"{tool}\" failed with an internal error (reference REF).")}],
            "isError": true,
            "_meta": {"toolgate/upstream_error": {"code": code, "reference": "REF"}}}})
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
            "invalid",
            call(3, "add", json!({"a": 1, "b": "many"})),
            json!({"jsonrpc": "2.0", "id": 3, "result": {
                "content": [{"type": "text", "text": report}],
                "isError": true,
                "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": "add",
                    "parameter_errors": {"/b": "expected an integer, got string \"many\""}}}}}),
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
            call(5, "seen", json!({})),
            json!({"jsonrpc": "2.0", "id": 5, "result": {
                "content": [{"type": "text", "text": "The tool \"seen\" is not available: this gateway's policy does not allow it. Use another tool."}],
                "isError": true,
                "_meta": {"toolgate/policy": {"code": "tool_denied", "tool": "seen"}}}}),
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
    ]
}

#[tokio::test]
async fn every_front_answers_every_scenario_alike() {
    let command = common::peers::stdio_fixture(&["--typed"]).await;
    let mut counted: Option<(Mode, Vec<String>)> = None;
    for mode in Mode::EVERY_FRONT {
        let (url, _) = scripted().spawn().await;
        let mut front = Front::start_with(mode, &url, &command, Some(CONFIG)).await;
        for (name, sent, expected) in table() {
            let got = referenced(front.ask(sent).await);
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

/// The table's calls as `toolgate_tool_calls_total` counts them: once when decided, and
/// again when a failure's answer is rewritten.
fn expected_counts() -> Vec<String> {
    [
        ("(unlisted)", "unknown"),
        ("add", "coerced"),
        ("add", "forwarded"),
        ("add", "rejected_invalid"),
        ("fail", "forwarded"),
        ("fail", "rewritten"),
        ("internal", "forwarded"),
        ("internal", "rewritten"),
        ("seen", "denied"),
        ("weather", "forwarded"),
    ]
    .map(|(tool, outcome)| {
        format!("toolgate_tool_calls_total{{upstream=\"default\",tool=\"{tool}\",outcome=\"{outcome}\"}} 1")
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
