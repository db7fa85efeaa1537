//! docs/contract.md §3 and the validation policies, black-box: the real binary in front of
//! a scripted upstream that answers each case exactly as some real SDK does (the Python SDK's
//! code `0`, the TypeScript SDK's `-32603`, `-32002` for a missing resource, and so on).

use crate::common;
use common::modes::{Front, Mode};
use common::scripted::{Script, Scripted, open_tool};
use common::*;
use serde_json::{Value, json};

fn read(id: i64, uri: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "resources/read", "params": {"uri": uri}})
        .to_string()
}

async fn gateway(scripted: Scripted, config: Option<&str>) -> (Toolgate, std::sync::Arc<Scripted>) {
    let (url, state) = scripted.spawn().await;
    (Toolgate::serve(&url, config).await, state)
}

#[tokio::test]
async fn tool_failures_reported_as_errors_become_tool_errors() {
    let cases = [
        (
            "pydantic",
            json!({"code": -32602, "message": "Order 7 not found"}),
        ),
        (
            "internal",
            json!({"code": -32603, "message": "database unavailable"}),
        ),
        (
            "python_zero",
            json!({"code": 0, "message": "can only concatenate str (not \"int\") to str"}),
        ),
        (
            "positive",
            json!({"code": 7, "message": "quota exceeded", "data": {"retryAfter": 30}}),
        ),
        (
            "impl_defined",
            json!({"code": -32000, "message": "backend timeout"}),
        ),
        (
            "impl_defined_top",
            json!({"code": -32019, "message": "rate limited"}),
        ),
        // Errors a client's SDK cannot read as errors: its call would never be answered.
        ("no_code", json!({"message": "disk full"})),
        (
            "text_code",
            json!({"code": "E_QUOTA", "message": "quota exceeded"}),
        ),
        ("fraction_code", json!({"code": -32603.5, "message": "odd"})),
    ];
    let mut s = Scripted::new(cases.iter().map(|(n, _)| open_tool(n)).collect());
    for (n, e) in &cases {
        s = s.script(n, Script::Error(e.clone()));
    }
    let (tg, _) = gateway(s, None).await;
    for (i, (name, e)) in cases.iter().enumerate() {
        let a = post(&tg.url(), None, call(i as i64, name, json!({}))).await;
        assert_eq!(a.status, 200);
        let mut details = json!({"code": e["code"], "message": e["message"]});
        if let Some(d) = e.get("data") {
            details["data"] = d.clone();
        }
        assert_eq!(
            a.json(),
            json!({"jsonrpc": "2.0", "id": i, "result": {
                "content": [{"type": "text", "text": e["message"]}],
                "isError": true,
                "_meta": {"toolgate/upstream_error": details}
            }}),
            "{name}"
        );
    }
}

#[tokio::test]
async fn protocol_signals_and_tool_errors_pass_untouched() {
    let signals = [
        (
            "url_elicitation",
            json!({"code": -32042, "message": "URL elicitation required", "data": {"elicitations": [{"mode": "url", "elicitationId": "e1", "url": "https://example.com/consent", "message": "Consent"}]}}),
        ),
        (
            "header_mismatch",
            json!({"code": -32020, "message": "Header mismatch"}),
        ),
        (
            "missing_capability",
            json!({"code": -32021, "message": "Missing capability", "data": {"requiredCapabilities": {}}}),
        ),
        (
            "unsupported_version",
            json!({"code": -32022, "message": "Unsupported protocol version", "data": {"supported": ["2026-07-28"], "requested": "1999-01-01"}}),
        ),
        (
            "not_found",
            json!({"code": -32601, "message": "Method not found"}),
        ),
        (
            "invalid",
            json!({"code": -32600, "message": "Invalid Request"}),
        ),
        ("parse", json!({"code": -32700, "message": "Parse error"})),
        // An integer as a float writes it (a Rust server's `f64`): the SDKs read `-32042`.
        (
            "url_elicitation_as_a_float",
            json!({"code": -32042.0, "message": "URL elicitation required", "data": {"elicitations": []}}),
        ),
        (
            "reserved",
            json!({"code": -32050, "message": "something reserved"}),
        ),
    ];
    let mut s = Scripted::new(
        signals
            .iter()
            .map(|(n, _)| open_tool(n))
            .chain([open_tool("failed")])
            .collect(),
    );
    for (n, e) in &signals {
        s = s.script(n, Script::Error(e.clone()));
    }
    let tool_error = json!({"content": [{"type": "text", "text": "MCP error -32602: Input validation error"}], "isError": true});
    s = s.script("failed", Script::Result(tool_error.clone()));
    let (tg, _) = gateway(s, None).await;
    for (i, (name, e)) in signals.iter().enumerate() {
        let a = post(&tg.url(), None, call(i as i64, name, json!({}))).await;
        assert_eq!(
            a.text(),
            json!({"jsonrpc": "2.0", "id": i, "error": e}).to_string(),
            "{name}: byte for byte"
        );
    }
    let a = post(&tg.url(), None, call(99, "failed", json!({}))).await;
    assert_eq!(
        a.text(),
        json!({"jsonrpc": "2.0", "id": 99, "result": tool_error}).to_string()
    );
}

#[tokio::test]
async fn upstream_unknown_tool_errors_become_the_spec_shape() {
    // Listed, so toolgate forwards; the server then says it does not know it.
    let s = Scripted::new(vec![open_tool("ghost"), open_tool("ghost2")])
        .script(
            "ghost",
            Script::Error(json!({"code": 0, "message": "Unknown tool: ghost"})),
        )
        .script(
            "ghost2",
            Script::Error(
                json!({"code": -32602, "message": "MCP error -32602: Tool ghost2 not found"}),
            ),
        );
    let (tg, _) = gateway(s, None).await;
    let a = post(&tg.url(), None, call(1, "ghost", json!({})))
        .await
        .json();
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "Unknown tool: ghost", "data": {"tool": "ghost"}}})
    );
    let a = post(&tg.url(), None, call(2, "ghost2", json!({})))
        .await
        .json();
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32602, "message": "Unknown tool: ghost2", "data": {"tool": "ghost2"}}})
    );
}

#[tokio::test]
async fn errors_inside_sse_streams_are_rewritten_in_place() {
    let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": 1}});
    let failure = json!({"jsonrpc": "2.0", "id": "$id", "error": {"code": 0, "message": "boom"}});
    let s = Scripted::new(vec![open_tool("streamy")]).script(
        "streamy",
        Script::Sse {
            messages: vec![progress.clone(), failure],
            numbered: true,
        },
    );
    let (tg, _) = gateway(s, None).await;
    let r = post(&tg.url(), None, call(5, "streamy", json!({}))).await;
    let result = json!({"content": [{"type": "text", "text": "boom"}], "isError": true, "_meta": {"toolgate/upstream_error": {"code": 0, "message": "boom"}}});
    let rewritten = format!(r#"{{"jsonrpc":"2.0","id":5,"result":{result}}}"#);
    assert_eq!(
        r.text(),
        format!(
            "id: ev-0\nevent: message\ndata: {progress}\n\nid: ev-1\nevent: message\ndata: {rewritten}\n\n"
        ),
        "the progress event untouched, the error rewritten with its id: kept"
    );
}

#[tokio::test]
async fn every_resource_not_found_variant_becomes_sep_2164() {
    let s = Scripted::new(vec![])
        .script("legacy://a", Script::Error(json!({"code": -32002, "message": "Resource not found", "data": {"uri": "legacy://a"}})))
        .script("python1://b", Script::Error(json!({"code": 0, "message": "Unknown resource: python1://b"})))
        .script("kotlin://c", Script::Error(json!({"code": -32603, "message": "Resource kotlin://c not found"})))
        .script("ts://d", Script::Error(json!({"code": -32602, "message": "MCP error -32602: Resource ts://d not found"})))
        .script("fastmcp://e", Script::Error(json!({"code": -32602, "message": "Resource not found: 'fastmcp://e'", "data": {"uri": "fastmcp://e"}})))
        .script("empty://f", Script::Result(json!({"contents": []})));
    let (tg, _) = gateway(s, None).await;
    for (i, uri) in [
        "legacy://a",
        "python1://b",
        "kotlin://c",
        "ts://d",
        "fastmcp://e",
        "empty://f",
    ]
    .iter()
    .enumerate()
    {
        let a = post(&tg.url(), None, read(i as i64, uri)).await;
        assert_eq!(a.status, 200, "{uri}");
        assert_eq!(
            a.json(),
            json!({"jsonrpc": "2.0", "id": i, "error": {"code": -32602, "message": format!("Resource not found: {uri}"), "data": {"uri": uri}}}),
            "{uri}"
        );
    }
}

#[tokio::test]
async fn other_resource_answers_pass_untouched() {
    let ok = json!({"contents": [{"uri": "ok://x", "text": "hello"}]});
    let canonical = json!({"code": -32602, "message": "Resource not found: done://z", "data": {"uri": "done://z"}});
    // Another invalid request: no resource is said to be missing.
    let invalid =
        json!({"code": -32602, "message": "Invalid params: the 2026-07-28 envelope is missing"});
    let s = Scripted::new(vec![])
        .script("ok://x", Script::Result(ok.clone()))
        .script(
            "down://y",
            Script::Error(json!({"code": -32603, "message": "database unavailable"})),
        )
        .script("done://z", Script::Error(canonical.clone()))
        .script("meta://w", Script::Error(invalid.clone()));
    let (tg, _) = gateway(s, None).await;
    assert_eq!(
        post(&tg.url(), None, read(1, "ok://x")).await.text(),
        json!({"jsonrpc": "2.0", "id": 1, "result": ok}).to_string()
    );
    assert_eq!(post(&tg.url(), None, read(2, "down://y")).await.text(), json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32603, "message": "database unavailable"}}).to_string());
    assert_eq!(
        post(&tg.url(), None, read(3, "done://z")).await.text(),
        json!({"jsonrpc": "2.0", "id": 3, "error": canonical}).to_string()
    );
    assert_eq!(
        post(&tg.url(), None, read(4, "meta://w")).await.text(),
        json!({"jsonrpc": "2.0", "id": 4, "error": invalid}).to_string()
    );
}

#[tokio::test]
async fn answers_that_are_not_jsonrpc_get_a_clear_answer() {
    let s = Scripted::new(vec![open_tool("html"), open_tool("truncated")])
        .script(
            "html",
            Script::Raw {
                status: 500,
                content_type: "text/html",
                body: b"<html><pre>TypeError at line 3</pre></html>",
            },
        )
        .script(
            "truncated",
            Script::Raw {
                status: 200,
                content_type: "application/json",
                body: b"{\"jsonrpc\":\"2.0\",\"id\":1,\"res",
            },
        )
        .script(
            "html://r",
            Script::Raw {
                status: 502,
                content_type: "text/html",
                body: b"<h1>Bad Gateway</h1>",
            },
        );
    let (tg, _) = gateway(s, None).await;
    let a = post(&tg.url(), None, call(1, "html", json!({}))).await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.json(),
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "The tool server is unavailable: the tool server answered with something that is not JSON-RPC: HTTP 500 with text/html. This is a server-side fault; retrying is unlikely to help until it is fixed."}],
            "isError": true,
            "_meta": {"toolgate/upstream": {"code": "upstream_unavailable", "reason": "the tool server answered with something that is not JSON-RPC: HTTP 500 with text/html"}}
        }})
    );
    let a = post(&tg.url(), None, call(2, "truncated", json!({})))
        .await
        .json();
    assert_eq!(a["result"]["isError"], true);
    assert!(
        result_text(&a).contains("HTTP 200 with a body that is not a JSON-RPC message"),
        "{a}"
    );
    let a = post(&tg.url(), None, read(3, "html://r")).await;
    assert_eq!(a.status, 200);
    assert_eq!(
        a.json(),
        json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32603, "message": "Upstream MCP server unavailable: the tool server answered with something that is not JSON-RPC: HTTP 502 with text/html"}})
    );
    // Each call that got no usable answer is counted as an upstream error, as an
    // unreachable server's are.
    let metrics = tg.admin_get("/metrics").await.text();
    for tool in ["html", "truncated"] {
        let line = format!(
            "toolgate_tool_calls_total{{upstream=\"default\",tool=\"{tool}\",outcome=\"upstream_error\"}} 1"
        );
        assert!(metrics.contains(&line), "{line} in\n{metrics}");
    }
}

#[tokio::test]
async fn slow_and_broken_upstreams_never_hang_the_client() {
    let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": 1}});
    let s = Scripted::new(vec![open_tool("slow"), open_tool("reset")])
        .script("slow", Script::Hang)
        .script("reset", Script::SseThenReset(vec![progress.clone()]));
    let (tg, _) = gateway(s, Some("[limits]\nupstream_timeout = \"300ms\"\n")).await;
    let a = post(&tg.url(), None, call(1, "slow", json!({})))
        .await
        .json();
    assert_eq!(a["result"]["isError"], true);
    assert_eq!(
        result_text(&a),
        "The tool server is unavailable: the tool server did not answer within 300ms. It may still be working or overloaded; retrying later may help."
    );
    let r = post(&tg.url(), None, call(2, "reset", json!({}))).await;
    let msgs = r.messages();
    assert_eq!(msgs[0], progress, "what came before the break is delivered");
    assert_eq!(msgs[1]["id"], 2);
    assert_eq!(msgs[1]["result"]["isError"], true);
    assert!(
        result_text(&msgs[1]).contains("the stream broke before the answer"),
        "{}",
        msgs[1]
    );
    // Still serving.
    let a = post(
        &tg.url(),
        None,
        json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}).to_string(),
    )
    .await
    .json();
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32601, "message": "Method not found"}})
    );
}

fn typed_tool() -> Value {
    json!({"name": "weather", "inputSchema": {"type": "object"}, "outputSchema": {"type": "object", "properties": {"celsius": {"type": "number"}}, "required": ["celsius"]}})
}

#[tokio::test]
async fn output_validation_enforce_audit_and_never_on_tool_errors() {
    let bad = json!({"content": [{"type": "text", "text": "{\"celsius\":\"warm\"}"}], "structuredContent": {"celsius": "warm"}});
    let failed = json!({"content": [{"type": "text", "text": "sensor offline"}], "structuredContent": {"oops": 1}, "isError": true});
    let make = || {
        Scripted::new(vec![typed_tool(), {
            let mut t = typed_tool();
            t["name"] = json!("weather_failing");
            t
        }])
        .script("weather", Script::Result(bad.clone()))
        .script("weather_failing", Script::Result(failed.clone()))
    };
    let (tg, _) = gateway(make(), Some("[validation]\noutput = \"enforce\"\n")).await;
    let a = post(&tg.url(), None, call(1, "weather", json!({})))
        .await
        .json();
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "The tool \"weather\" returned a result that does not match its declared outputSchema:\n- structuredContent/celsius: expected a number, got string \"warm\"\nThis is a fault of the tool server, not of the call."}],
            "isError": true,
            "_meta": {"toolgate/output_validation": {"code": "invalid_output", "errors": {"/celsius": "expected a number, got string \"warm\""}}}
        }})
    );
    let a = post(&tg.url(), None, call(2, "weather_failing", json!({}))).await;
    assert_eq!(
        a.text(),
        json!({"jsonrpc": "2.0", "id": 2, "result": failed}).to_string(),
        "isError results are never output-validated"
    );

    let (tg, _) = gateway(make(), Some("[validation]\noutput = \"audit\"\n")).await;
    let a = post(&tg.url(), None, call(1, "weather", json!({}))).await;
    assert_eq!(
        a.text(),
        json!({"jsonrpc": "2.0", "id": 1, "result": bad}).to_string()
    );
    let logs = tg.logs_when(|l| l.contains("output_audited")).await;
    assert!(logs.contains("output_audited"), "{logs}");

    let (tg, _) = gateway(make(), None).await;
    let a = post(&tg.url(), None, call(1, "weather", json!({}))).await;
    assert_eq!(
        a.text(),
        json!({"jsonrpc": "2.0", "id": 1, "result": bad}).to_string(),
        "off by default"
    );
}

fn add_tool() -> Value {
    json!({"name": "add", "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}, "required": ["a", "b"]}})
}

#[tokio::test]
async fn protocol_error_answer_shape_for_older_clients() {
    let (tg, state) = gateway(
        Scripted::new(vec![add_tool()]),
        Some("[validation]\nanswer = \"protocol_error\"\n"),
    )
    .await;
    let a = post(&tg.url(), None, call(1, "add", json!({"a": "x"})))
        .await
        .json();
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "Invalid arguments for tool add", "data": {
            "code": "invalid_arguments", "tool": "add",
            "parameter_errors": {"/a": "expected an integer, got string \"x\"", "/b": "is required but missing"},
            "text": "Invalid arguments for tool \"add\" (2 problems):\n- a: expected an integer, got string \"x\"\n- b: is required but missing\nCorrect the arguments and call the tool again."
        }}})
    );
    assert!(
        state
            .seen
            .lock()
            .unwrap()
            .iter()
            .all(|m| m["method"] != "tools/call")
    );
}

#[tokio::test]
async fn modes_per_upstream_and_per_tool() {
    let (strict_url, strict_seen) = Scripted::new(vec![add_tool()]).spawn().await;
    let (lax_url, lax_seen) = Scripted::new(vec![add_tool()]).spawn().await;
    let cfg = format!(
        "[validation]\ncoerce = false\n\n[[upstreams]]\nname = \"strict\"\nurl = \"{strict_url}\"\n\n[[upstreams]]\nname = \"lax\"\nurl = \"{lax_url}\"\n[upstreams.validation]\nmode = \"audit\"\n"
    );
    let tg = Toolgate::start(&mut vec!["serve".to_string()], Some(&cfg)).await;
    let base = format!("http://{}", tg.addr);
    let a = post(
        &format!("{base}/strict/mcp"),
        None,
        call(1, "add", json!({"a": "1", "b": 2})),
    )
    .await
    .json();
    assert_eq!(
        a["result"]["isError"], true,
        "strict upstream: enforce, no coercion"
    );
    assert!(
        strict_seen
            .seen
            .lock()
            .unwrap()
            .iter()
            .all(|m| m["method"] != "tools/call")
    );
    let a = post(
        &format!("{base}/lax/mcp"),
        None,
        call(2, "add", json!({"a": "1", "b": 2})),
    )
    .await
    .json();
    assert_eq!(
        result_text(&a),
        "no script for add",
        "lax upstream: audit forwards"
    );
    assert_eq!(
        lax_seen
            .seen
            .lock()
            .unwrap()
            .iter()
            .filter(|m| m["method"] == "tools/call")
            .count(),
        1
    );
    let r = post(&format!("{base}/mcp"), None, call(3, "add", json!({}))).await;
    assert_eq!(r.status, 404, "no default upstream configured");
}

fn fs_tools() -> Vec<Value> {
    vec![
        json!({"name": "read_file", "inputSchema": {"type": "object", "properties": {"path": {"type": "string", "description": "File to read"}}, "required": ["path"]}}),
        json!({"name": "delete_file", "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}}}),
        json!({"name": "write_file", "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}}}}),
    ]
}

#[tokio::test]
async fn path_confinement_and_extra_schemas() {
    let cfg = r#"
[validation.tools.read_file]
paths = [{ argument = "path", root = "/workspace" }]
extra_schema = '{"properties": {"path": {"pattern": "\\.(md|txt)$", "description": "Markdown or text files only"}}}'
"#;
    let (tg, state) = gateway(Scripted::new(fs_tools()), Some(cfg)).await;
    let a = post(
        &tg.url(),
        None,
        call(1, "read_file", json!({"path": "../../etc/passwd"})),
    )
    .await
    .json();
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/path": "must match the pattern \\.(md|txt)$, got \"../../etc/passwd\"; must stay inside /workspace, but \"../../etc/passwd\" resolves to /etc/passwd"})
    );
    assert!(result_text(&a).contains("- path: must stay inside /workspace, but \"../../etc/passwd\" resolves to /etc/passwd (parameter description: File to read)"), "{a}");
    let a = post(
        &tg.url(),
        None,
        call(2, "read_file", json!({"path": "notes/../todo.md"})),
    )
    .await
    .json();
    assert_eq!(
        result_text(&a),
        "no script for read_file",
        "inside the root: forwarded"
    );
    assert_eq!(
        state
            .seen
            .lock()
            .unwrap()
            .iter()
            .filter(|m| m["method"] == "tools/call")
            .count(),
        1
    );
}

#[tokio::test]
async fn allow_and_deny_lists_filter_listings_and_calls() {
    let cfg = "[validation]\ndeny_tools = [\"delete_file\"]\n";
    let (tg, state) = gateway(Scripted::new(fs_tools()), Some(cfg)).await;
    let r = post(
        &tg.url(),
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string(),
    )
    .await
    .json();
    let names: Vec<&str> = r["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["read_file", "write_file"]);
    let a = post(
        &tg.url(),
        None,
        call(2, "delete_file", json!({"path": "x"})),
    )
    .await
    .json();
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 2, "result": {
            "content": [{"type": "text", "text": "The tool \"delete_file\" is not available: this gateway's policy does not allow it. Use another tool."}],
            "isError": true,
            "_meta": {"toolgate/policy": {"code": "tool_denied", "tool": "delete_file"}}
        }})
    );
    let a = post(&tg.url(), None, call(3, "delete_fil", json!({})))
        .await
        .json();
    assert_eq!(
        a["error"]["code"], -32602,
        "unknown stays distinct from denied: {a}"
    );
    assert_eq!(
        a["error"]["message"], "Unknown tool: delete_fil",
        "no suggestion of a denied tool"
    );
    assert!(
        state
            .seen
            .lock()
            .unwrap()
            .iter()
            .all(|m| m["method"] != "tools/call")
    );
}

#[tokio::test]
async fn internal_errors_can_be_masked_with_a_reference() {
    let s = Scripted::new(vec![open_tool("leaky"), open_tool("picky")])
        .script("leaky", Script::Error(json!({"code": -32603, "message": "psycopg2.OperationalError: password authentication failed for user admin"})))
        .script("picky", Script::Error(json!({"code": -32602, "message": "date must be in the future"})));
    let (tg, _) = gateway(s, Some("[errors]\nmask_internal = true\n")).await;
    let a = post(&tg.url(), None, call(1, "leaky", json!({})))
        .await
        .json();
    let text = result_text(&a);
    assert!(
        text.starts_with("The tool \"leaky\" failed with an internal error (reference toolgate-"),
        "{text}"
    );
    assert!(!a.to_string().contains("psycopg2"), "{a}");
    let reference = a["result"]["_meta"]["toolgate/upstream_error"]["reference"]
        .as_str()
        .unwrap()
        .to_string();
    let logged = |logs: &str| {
        logs.lines()
            .any(|l| l.contains(&reference) && l.contains("psycopg2"))
    };
    let logs = tg.logs_when(logged).await;
    assert!(
        logged(&logs),
        "the original is logged under the reference: {logs}"
    );
    let a = post(&tg.url(), None, call(2, "picky", json!({})))
        .await
        .json();
    assert_eq!(
        result_text(&a),
        "date must be in the future",
        "validation messages stay readable"
    );
}

/// The answer-side rules read alike in all four modes: an internal error is masked (its
/// text kept out of the answer, under a reference), a denied tool is hidden from the
/// listing and refused, and a tool failure reported as an error becomes a tool error.
#[tokio::test]
async fn answer_rules_hold_alike_in_every_mode() {
    let config = "[errors]\nmask_internal = true\n[validation]\ndeny_tools = [\"seen\"]\n";
    let command = common::peers::stdio_fixture(&[]).await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let mut answers = Vec::new();
    for mode in Mode::EVERY_FRONT {
        // The HTTP servers answer as the stdio fixture does.
        let (up, _) = Scripted::new(vec![
            open_tool("internal"),
            open_tool("fail"),
            open_tool("seen"),
        ])
        .script(
            "internal",
            Script::Error(json!({"code": -32603, "message": "db password=hunter2"})),
        )
        .script("fail", Script::Error(json!({"code": 0, "message": "boom"})))
        .spawn()
        .await;
        let mut front = Front::start_with(mode, &up, &command, Some(config)).await;
        let listed = front.ask(list.clone()).await;
        let names: Vec<&str> = listed["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{mode}: {listed}"))
            .iter()
            .filter_map(|t| t["name"].as_str())
            .collect();
        assert!(
            names.contains(&"internal") && !names.contains(&"seen"),
            "{mode}: {names:?}"
        );
        let internal = front.ask(call_value(2, "internal")).await;
        assert!(
            !internal.to_string().contains("hunter2"),
            "{mode}: {internal}"
        );
        let fail = front.ask(call_value(3, "fail")).await;
        let denied = front.ask(call_value(4, "seen")).await;
        answers.push((mode, [internal, fail, denied].map(referenced)));
    }
    let masked = |id: i64, tool: &str, code: i64| {
        json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": format!("The tool \"{tool}\" failed with an internal error (reference REF).")}],
            "isError": true,
            "_meta": {"toolgate/upstream_error": {"code": code, "reference": "REF"}}}})
    };
    let expected = [
        masked(2, "internal", -32603),
        masked(3, "fail", 0),
        json!({"jsonrpc": "2.0", "id": 4, "result": {
            "content": [{"type": "text", "text": "The tool \"seen\" is not available: this gateway's policy does not allow it. Use another tool."}],
            "isError": true,
            "_meta": {"toolgate/policy": {"code": "tool_denied", "tool": "seen"}}}}),
    ];
    for (mode, a) in answers {
        assert_eq!(a, expected, "{mode}");
    }
}

/// An error no client can read as one (no code), and one that says nothing: in every mode,
/// the tool's failure in words the model can read.
#[tokio::test]
async fn malformed_tool_errors_become_tool_errors_in_every_mode() {
    let command = common::peers::stdio_fixture(&["--garbled"]).await;
    let garbled = json!({"message": "boom"});
    let hushed = json!({"code": -32603, "message": ""});
    let failed = |id: i64, text: &str, details: &Value| {
        json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": text}],
            "isError": true,
            "_meta": {"toolgate/upstream_error": details}}})
    };
    for mode in Mode::EVERY_FRONT {
        // The HTTP servers answer as the stdio fixture does.
        let (up, _) = Scripted::new(vec![open_tool("garbled"), open_tool("hushed")])
            .script("garbled", Script::Error(garbled.clone()))
            .script("hushed", Script::Error(hushed.clone()))
            .spawn()
            .await;
        let mut front = Front::start(mode, &up, &command).await;
        assert_eq!(
            front.ask(call_value(1, "garbled")).await,
            failed(1, "boom", &json!({"code": null, "message": "boom"})),
            "{mode}"
        );
        let why = "The tool \"hushed\" failed without saying why.";
        assert_eq!(
            front.ask(call_value(2, "hushed")).await,
            failed(2, why, &hushed),
            "{mode}"
        );
    }
}

/// An answer that opens with a byte order mark, which the SSE standard and RFC 8259 let a
/// reader ignore, as a stream and as JSON: it is still read by the answer rules, and passed on
/// without the mark, in every mode with an HTTP server. Read as part of its first field, a
/// stream's answer would go by unread and toolgate would add one of its own; JSON would be
/// "not JSON-RPC" to toolgate, or reach a client that may refuse it.
#[tokio::test]
async fn an_answer_opening_with_a_byte_order_mark_is_read_under_the_rules() {
    const ERROR: &str = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"boom"}}"#;
    const RESULT: &str = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;
    let failed = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": "boom"}],
        "isError": true,
        "_meta": {"toolgate/upstream_error": {"code": -32603, "message": "boom"}}}});
    let answers = [
        (
            "text/event-stream",
            format!("\u{feff}data: {ERROR}\n\n"),
            &failed,
        ),
        ("application/json", format!("\u{feff}{ERROR}"), &failed),
        (
            "application/json",
            format!("\u{feff}{RESULT}"),
            &serde_json::from_str(RESULT).unwrap(),
        ),
    ];
    for mode in Mode::EVERY_FRONT.into_iter().filter(|m| m.to_http()) {
        for (content_type, body, expected) in &answers {
            let got = answered_with(mode, content_type, body.as_bytes()).await;
            assert_eq!(got, [(*expected).clone()], "{mode}: {body}");
        }
    }
}

/// An SSE answer is read as the SSE standard reads a stream, as a client's SDK would read it
/// from the server directly: a byte that is not UTF-8 in one field (an `id`, a comment) hides
/// none of the others, and a stream that ends in a lone CR ends its last event there. Either
/// way the answer is read under the rules and is the request's one answer. An event the
/// stream ends in the middle of is no answer: toolgate's own comes in its place, whole.
#[tokio::test]
async fn an_sse_answer_is_read_as_the_sse_standard_reads_it() {
    const ERROR: &str = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32603,"message":"boom"}}"#;
    let failed = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": "boom"}],
        "isError": true,
        "_meta": {"toolgate/upstream_error": {"code": -32603, "message": "boom"}}}});
    let reason = "could not reach the tool server: the stream ended without an answer";
    let text = format!(
        "The tool server is unavailable: {reason}. Retrying in a moment may help if the server is restarting."
    );
    let cut_off = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": text}], "isError": true,
        "_meta": {"toolgate/upstream": {"code": "upstream_unavailable", "reason": reason}}}});
    let mut stray = b"id: \xff\n: \xfe\ndata: ".to_vec();
    stray.extend_from_slice(format!("{ERROR}\n\n").as_bytes());
    let answers: [(Vec<u8>, &Value); 3] = [
        (stray, &failed),
        (format!("data: {ERROR}\r\r").into_bytes(), &failed),
        (br#"data: {"jsonrpc":"2.0","id":1,"res"#.to_vec(), &cut_off),
    ];
    for mode in Mode::EVERY_FRONT.into_iter().filter(|m| m.to_http()) {
        for (body, expected) in &answers {
            let got = answered_with(mode, "text/event-stream", body).await;
            let body = String::from_utf8_lossy(body);
            assert_eq!(got, [(*expected).clone()], "{mode}: {body:?}");
        }
    }
}

/// A server's answer over several lines (JSON pretty-printed, an SSE event's data in
/// several `data:` lines) reaches a stdio client as one line, the message it is, and an HTTP
/// client as it came.
#[tokio::test]
async fn an_answer_over_several_lines_reaches_a_stdio_client_as_one() {
    let result = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "a\nb"}]}});
    let pretty = serde_json::to_string_pretty(&result).unwrap();
    let events = pretty
        .lines()
        .map(|l| format!("data: {l}\n"))
        .collect::<String>()
        + "\n";
    let answers = [("application/json", pretty), ("text/event-stream", events)];
    for mode in Mode::EVERY_FRONT.into_iter().filter(|m| m.to_http()) {
        for (content_type, body) in &answers {
            let got = answered_with(mode, content_type, body.as_bytes()).await;
            assert_eq!(got, std::slice::from_ref(&result), "{mode}: {body}");
        }
    }
}

/// An HTTP server's answer that names another id than its request's: it came on the
/// request's own exchange, so it is that request's answer. An HTTP client gets it as it came;
/// a stdio client, which matches answers by id alone, under its request's id.
#[tokio::test]
async fn an_answer_under_another_id_reaches_a_stdio_client_under_its_requests() {
    let result = json!({"content": [{"type": "text", "text": "ok"}]});
    let answer = |id: Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
    let json = answer(json!("other")).to_string();
    let sse = format!("data: {}\n\n", answer(json!(7)));
    let answers = [("application/json", json), ("text/event-stream", sse)];
    for mode in Mode::EVERY_FRONT.into_iter().filter(|m| m.to_http()) {
        for (content_type, body) in &answers {
            let got = answered_with(mode, content_type, body.as_bytes()).await;
            let expected = match mode {
                Mode::StdioUpstream => answer(json!(1)),
                _ => serde_json::from_str(body.trim_start_matches("data: ")).unwrap(),
            };
            assert_eq!(got, [expected], "{mode}: {body}");
        }
    }
}

/// A stdio server whose output opens with a byte order mark (a console whose encoding writes
/// one): its first answer, to `initialize`, is read as the message it is, in every mode with a
/// stdio server, rather than dropped as a line that is no message.
#[tokio::test]
async fn a_stdio_server_whose_output_opens_with_a_byte_order_mark_is_understood() {
    let command = common::peers::stdio_fixture(&["--bom"]).await;
    for mode in [Mode::ServeCommand, Mode::StdioCommand] {
        let mut front = Front::start(mode, "", &command).await;
        let got = front
            .ask_line(&call(1, "add", json!({"a": 1, "b": 2})))
            .await;
        let three = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "3"}]}});
        assert_eq!(got, three, "{mode}");
    }
}

/// A request that opens with a byte order mark (a Windows tool's UTF-8 may: RFC 8259 lets a
/// reader ignore it): read as the message it is in every front, decided under the rules, and
/// sent on without the mark, which both servers behind (`serde_json`, Python's `json`) would
/// refuse.
#[tokio::test]
async fn a_request_opening_with_a_byte_order_mark_is_read_under_the_rules() {
    let command = common::peers::stdio_fixture(&["--typed"]).await;
    let add = json!({"name": "add", "inputSchema": {"type": "object", "properties": {"a": {"type": "integer", "description": "first"}, "b": {"type": "integer", "description": "second"}}, "required": ["a", "b"]}});
    let three =
        json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "3"}]}});
    let report = "Invalid arguments for tool \"add\" (1 problem):\n- b: expected an integer, got string \"many\" (parameter description: second)\nCorrect the arguments and call the tool again.";
    let refused = json!({"jsonrpc": "2.0", "id": 2, "result": {
        "content": [{"type": "text", "text": report}],
        "isError": true,
        "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": "add",
            "parameter_errors": {"/b": "expected an integer, got string \"many\""}}}}});
    for mode in Mode::EVERY_FRONT {
        let (up, _) = Scripted::new(vec![add.clone()])
            .script(
                "add",
                Script::Result(json!({"content": [{"type": "text", "text": "3"}]})),
            )
            .spawn()
            .await;
        let mut front = Front::start(mode, &up, &command).await;
        let valid = call(1, "add", json!({"a": 1, "b": 2}));
        assert_eq!(
            front.ask_line(&format!("\u{feff}{valid}")).await,
            three,
            "{mode}"
        );
        let invalid = call(2, "add", json!({"a": 1, "b": "many"}));
        assert_eq!(
            front.ask_line(&format!("\u{feff}{invalid}")).await,
            refused,
            "{mode}"
        );
    }
}

/// A listing the server answers with no JSON-RPC (an error page, a 405): the call that
/// needed it is answered as a forwarded call so answered is, alike in every mode with an HTTP
/// server, not with the server's page; a refusal of the request itself (a 4xx whose error
/// names no request) still reaches an HTTP client as it came.
#[tokio::test]
async fn a_listing_answered_with_no_json_rpc_fails_the_call_as_a_forwarded_one_would() {
    let unavailable = |what: &str| {
        let reason =
            format!("the tool server answered with something that is not JSON-RPC: {what}");
        let text = format!(
            "The tool server is unavailable: {reason}. This is a server-side fault; retrying is unlikely to help until it is fixed."
        );
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": text}], "isError": true,
            "_meta": {"toolgate/upstream": {"code": "upstream_unavailable", "reason": reason}}}})
    };
    let pages = [
        (
            500,
            "text/html",
            "<html>oops</html>",
            "HTTP 500 with text/html",
        ),
        (
            405,
            "text/plain",
            "Method Not Allowed",
            "HTTP 405 with text/plain (this URL takes no messages: `toolgate check` says whether the server speaks the HTTP+SSE transport of 2024-11-05)",
        ),
        (
            502,
            "application/json",
            "{}",
            "HTTP 502 with a body that is not a JSON-RPC message",
        ),
    ];
    for mode in Mode::EVERY_FRONT.into_iter().filter(|m| m.to_http()) {
        for (status, content_type, body, what) in pages {
            let script = Script::Raw {
                status,
                content_type,
                body: body.as_bytes(),
            };
            let (got, seen) = call_marked(mode, "tools/list", script).await;
            assert_eq!(got, [unavailable(what)], "{mode}: {what}");
            assert!(seen.tool_calls().is_empty(), "{mode}: unchecked, not sent");
        }
    }
}

/// What a call to the open tool `marked` brings back through `mode`, its server answering
/// `key` (the tool, or a method) with `script`; and the server, for what it was sent.
async fn call_marked(
    mode: Mode,
    key: &str,
    script: Script,
) -> (Vec<Value>, std::sync::Arc<Scripted>) {
    let (up, seen) = Scripted::new(vec![open_tool("marked")])
        .script(key, script)
        .spawn()
        .await;
    let mut front = Front::start(mode, &up, &[]).await;
    let line = call_value(1, "marked").to_string();
    (front.exchange_line(&line).await, seen)
}

/// What a call to the open tool `marked` brings back through `mode`, its server answering
/// with `body` as `content_type` (HTTP 200).
async fn answered_with(mode: Mode, content_type: &'static str, body: &[u8]) -> Vec<Value> {
    let script = Script::Raw {
        status: 200,
        content_type,
        body: body.to_vec().leak(),
    };
    call_marked(mode, "marked", script).await.0
}

fn call_value(id: i64, tool: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": {}}})
}

/// A stdio server that cannot be started for a session-less call: the call gets toolgate's
/// answer in its era and is counted as an upstream error under the name its server listed,
/// as a forwarded call without a usable answer is; a notification gets 502.
#[tokio::test]
async fn a_server_that_cannot_start_is_answered_and_counted_as_any_failure() {
    let command = ["/nonexistent/toolgate-test-server".to_string()];
    let tg = Toolgate::in_front_of(&command, None).await;
    // Said at start, before any session needs it.
    let logs = tg
        .logs_when(|l| l.contains("its sessions are refused"))
        .await;
    assert!(
        logs.lines().any(|l| l.contains("ERROR")
            && l.contains("upstream=default")
            && l.contains("cannot find the program \"/nonexistent/toolgate-test-server\"")),
        "{logs}"
    );
    let mut call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "add", "arguments": {}}});
    call["params"]["_meta"] = common::modes::modern_meta();
    let r = post_modern(&tg.url(), "tools/call", call).await;
    let a = r.json();
    assert_eq!(a["id"], 1, "{a}");
    assert_eq!(a["result"]["isError"], true, "{a}");
    assert!(
        result_text(&a).contains("cannot start"),
        "the answer says why: {a}"
    );
    assert!(
        result_text(&a).contains("configuration problem") && !result_text(&a).contains("Retrying"),
        "and that retrying will not help: {a}"
    );
    let logs = tg
        .logs_when(|l| l.contains("error=the tool server cannot be started"))
        .await;
    assert!(
        logs.lines().any(|l| l.contains("ERROR")
            && l.contains("the tool server cannot be started")
            && l.contains("upstream=default")),
        "{logs}"
    );
    let metrics = tg.admin_get("/metrics").await.text();
    let line = r#"toolgate_tool_calls_total{upstream="default",tool="(unlisted)",outcome="upstream_error"} 1"#;
    assert!(metrics.contains(line), "{line} in\n{metrics}");
    // Never forwarded, so not timed upstream.
    assert!(
        !metrics.contains("toolgate_upstream_latency_seconds_count{upstream=\"default\"}"),
        "{metrics}"
    );
    let mut note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
        "params": {"requestId": 1}});
    note["params"]["_meta"] = common::modes::modern_meta();
    let r = post_modern(&tg.url(), "notifications/cancelled", note).await;
    assert_eq!(r.status, 502, "{}", r.text());
    assert_eq!(r.json()["error"]["code"], -32603, "{}", r.text());

    // A file that may not be run is found out as `exec` finds it: said at start and by
    // `/readyz`, and each session's start says why.
    let file = common::tempfile_lite::TempFile::new("#!/bin/sh\n");
    let program = file.path.display().to_string();
    let tg = Toolgate::in_front_of(std::slice::from_ref(&program), None).await;
    let denied = format!("cannot run the program {program:?}: Permission denied (os error 13)");
    let logs = tg
        .logs_when(|l| l.contains("its sessions are refused"))
        .await;
    assert!(logs.contains(&denied), "{logs}");
    let ready = tg.admin_get("/readyz?upstream=default").await;
    assert_eq!(ready.status, 503);
    assert_eq!(
        ready.json()["upstreams"]["default"],
        json!({"ready": false, "error": denied})
    );
    let a = post(&tg.url(), None, call_value(2, "add").to_string())
        .await
        .json();
    let reason = format!(
        "the tool server cannot be started: cannot start {program:?}: Permission denied (os error 13)"
    );
    let text = format!(
        "The tool server is unavailable: {reason}. This is a configuration problem of the \
         gateway; retrying will not help until it is fixed."
    );
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 2, "result": {
            "content": [{"type": "text", "text": text}],
            "isError": true,
            "_meta": {"toolgate/upstream": {"code": "upstream_unavailable", "reason": reason}}}})
    );
}

/// With `errors.mask_internal`, toolgate's own word on an upstream it could not reach does not
/// name the upstream's address either: a reference stands for it, as for an upstream's error.
#[tokio::test]
async fn masking_covers_toolgates_own_errors() {
    let port = common::closed_port();
    let url = format!("http://127.0.0.1:{port}/mcp");
    let tg = Toolgate::serve(&url, Some("[errors]\nmask_internal = true\n")).await;
    let a = post(&tg.url(), None, call(1, "anything", json!({})))
        .await
        .json();
    let text = result_text(&a);
    let reference = a["result"]["_meta"]["toolgate/upstream"]["reference"]
        .as_str()
        .unwrap_or_else(|| panic!("{a}"))
        .to_owned();
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": text}],
            "isError": true,
            "_meta": {"toolgate/upstream": {"code": "upstream_unavailable", "reference": reference}}}})
    );
    assert!(!text.contains(&port.to_string()), "{text}");
    assert!(text.contains(&reference), "{text}");
    let a = post(
        &tg.url(),
        None,
        json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string(),
    )
    .await
    .json();
    let message = a["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.starts_with("Upstream MCP server unavailable (reference ")
            && !message.contains(&port.to_string()),
        "{a}"
    );
    let logs = tg
        .logs_when(|l| l.contains("masked toolgate's own error"))
        .await;
    assert!(
        logs.contains(&reference),
        "the reason is logged under the reference"
    );
}
