//! Black-box tests of the validating gateway: the real binary on `127.0.0.1:0` in front of
//! the demo server (in this process), real HTTP, exact JSON-RPC asserted.
//! One test per row of docs/contract.md §1 and §2, plus streaming, paging, invalidation
//! and sessions.

use crate::common;
use common::*;
use http::Method;
use serde_json::{Value, json};
use std::time::{Duration, Instant};
use toolgate::demo::Options;

const FUTURE: &str = "01/02/2999";

fn booking(date: &str, passengers: i64) -> Value {
    json!({"origin": "LHR", "destination": "JFK", "departureDate": date, "passengers": passengers})
}

// ---- docs/contract.md §1: tools/call requests ----

#[tokio::test]
async fn valid_call_is_forwarded_as_the_original_bytes() {
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let s = open_session(&tg.url()).await;
    // Odd spacing and member order: a re-serializing proxy would change these bytes.
    let body = r#"{ "params" : {"arguments":{"b":2 , "a":40},"name":"add"}, "method":"tools/call","id":"req-7","jsonrpc":"2.0" }"#.to_string();
    let r = post(&tg.url(), Some(&s), body.clone()).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json(),
        json!({"jsonrpc":"2.0","id":"req-7","result":{"content":[{"type":"text","text":"42"}],"structuredContent":{"result":42}}})
    );
    let seen = demo
        .seen()
        .into_iter()
        .find(|s| s.body["method"] == "tools/call")
        .expect("the call reached the server");
    assert_eq!(seen.raw, body.as_bytes());
}

#[tokio::test]
async fn invalid_call_is_answered_by_toolgate_and_never_reaches_the_server() {
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let s = open_session(&tg.url()).await;
    let r = post(&tg.url(), Some(&s), call(3, "book_flight", json!({"origin": "LHR", "destination": "jfk", "departureDate": "2031-08-08", "passengers": 12, "pasengers": 1}))).await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.json(),
        json!({"jsonrpc": "2.0", "id": 3, "result": {
            "content": [{"type": "text", "text": "Invalid arguments for tool \"book_flight\" (4 problems):\n\
        - departureDate: must match the pattern ^\\d{2}/\\d{2}/\\d{4}$, got \"2031-08-08\" (parameter description: Departure date in dd/mm/yyyy format, in the future)\n\
        - destination: must match the pattern ^[A-Z]{3}$, got \"jfk\" (parameter description: IATA code of the arrival airport, e.g. JFK)\n\
        - pasengers: is not an accepted argument; did you mean \"passengers\"?\n\
        - passengers: must be at most 9, got 12 (parameter description: Number of passengers, 1 to 9)\n\
        Correct the arguments and call the tool again."}],
            "isError": true,
            "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": "book_flight", "parameter_errors": {
                "/pasengers": "is not an accepted argument; did you mean \"passengers\"?",
                "/departureDate": "must match the pattern ^\\d{2}/\\d{2}/\\d{4}$, got \"2031-08-08\"",
                "/destination": "must match the pattern ^[A-Z]{3}$, got \"jfk\"",
                "/passengers": "must be at most 9, got 12"
            }}}
        }})
    );
    assert!(demo.calls().is_empty(), "the server saw {:?}", demo.calls());
    // Logs name the tool and the keywords, never the values.
    let logs = tg
        .logs_when(|l| {
            l.contains("outcome=\"rejected_invalid\"") || l.contains("outcome=rejected_invalid")
        })
        .await;
    // The log's outcome is the metric's.
    assert!(
        logs.contains("outcome=\"rejected_invalid\"") || logs.contains("outcome=rejected_invalid"),
        "{logs}"
    );
    assert!(
        !logs.contains("2031-08-08"),
        "argument values leaked into logs: {logs}"
    );
}

#[tokio::test]
async fn nested_refs_enums_and_arrays_are_checked_with_paths() {
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let s = open_session(&tg.url()).await;
    let args = json!({"mode": "boat", "travellers": [{"name": "Ada", "age": 36}, {"name": "", "age": -1, "class": "cargo"}]});
    let a = post(&tg.url(), Some(&s), call(1, "plan_trip", args))
        .await
        .json();
    assert_eq!(a["result"]["isError"], true);
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({
            "/mode": "must be one of [\"air\",\"rail\",\"road\"], got \"boat\"",
            "/travellers/1/name": "must be at least 1 characters long, got \"\"",
            "/travellers/1/age": "must be at least 0, got -1",
            "/travellers/1/class": "must be one of [\"economy\",\"business\",\"first\"], got \"cargo\""
        })
    );
    assert!(
        result_text(&a).contains(
            "- travellers[1].age: must be at least 0, got -1 (parameter description: Age in years)"
        ),
        "{}",
        result_text(&a)
    );
    assert!(demo.calls().is_empty());
}

#[tokio::test]
async fn omitted_arguments_are_validated_as_an_empty_object() {
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let s = open_session(&tg.url()).await;
    let body =
        json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "add"}});
    let a = post(&tg.url(), Some(&s), body.to_string()).await.json();
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/a": "is required but missing", "/b": "is required but missing"})
    );
    assert!(demo.calls().is_empty());
}

#[tokio::test]
async fn strings_are_coerced_and_the_server_gets_numbers() {
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let s = open_session(&tg.url()).await;
    let a = post(
        &tg.url(),
        Some(&s),
        call(4, "add", json!({"a": "10", "b": 2})),
    )
    .await
    .json();
    assert_eq!(
        a,
        json!({"jsonrpc":"2.0","id":4,"result":{"content":[{"type":"text","text":"12"}],"structuredContent":{"result":12}}})
    );
    assert_eq!(
        demo.calls()[0]["params"]["arguments"],
        json!({"a": 10, "b": 2})
    );
    // Arguments sent as JSON text (as a model's function call comes from its provider),
    // wrapped once more, the wrapper holding that text, and spread from that text one
    // character each (as a JavaScript client spreads a string): the server gets the object,
    // as the text writes it, its members coerced too.
    let text = r#"{"a": "10", "b": 3, "big": 123456789012345678901234567890}"#;
    let members = text.chars().enumerate();
    let spread = members.map(|(i, c)| (i.to_string(), json!(c.to_string())));
    let spread = Value::Object(spread.collect());
    for (id, args) in [(5, json!(text)), (6, json!({"input": text})), (8, spread)] {
        let a = post(&tg.url(), Some(&s), call(id, "add", args))
            .await
            .json();
        assert_eq!(
            a["result"]["structuredContent"],
            json!({"result": 13}),
            "{a}"
        );
        let sent = demo.seen().pop().unwrap();
        let sent = String::from_utf8(sent.raw.to_vec()).unwrap();
        assert!(
            sent.contains(r#""arguments":{"a":10,"b":3,"big":123456789012345678901234567890}"#),
            "{sent}"
        );
    }
    let counted = tg.admin_get("/metrics").await.text();
    let line = r#"toolgate_tool_calls_total{upstream="default",tool="add",outcome="coerced"} 4"#;
    assert!(counted.contains(line), "{line} in\n{counted}");
}

/// Arguments as a model writing Python sends them (the whole as a dict's text, an option in
/// a list of one) reach the server as the object the schema asks for.
#[tokio::test]
async fn arguments_as_a_python_dict_with_an_option_in_a_list_reach_the_server_as_meant() {
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let s = open_session(&tg.url()).await;
    let dict =
        "{'travellers': [{'name': 'Ada', 'age': '36', 'class': 'First'}], 'mode': ['Rail'],}";
    let a = post(&tg.url(), Some(&s), call(3, "plan_trip", json!(dict)))
        .await
        .json();
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 3, "result": {
            "content": [{"type": "text", "text": "Planned a rail trip for 1 traveller(s)."}],
            "isError": false}})
    );
    let sent: Value = serde_json::from_slice(&demo.seen().pop().unwrap().raw).unwrap();
    assert_eq!(
        sent["params"]["arguments"],
        json!({"travellers": [{"name": "Ada", "age": 36, "class": "first"}], "mode": "rail"})
    );
}

/// A declared name spelt in snake case is sent under the name the schema declares, whatever
/// the refusal it came with would have described: here only its first violation
/// (`max_errors = 1`), the required name left out, and not the undeclared one.
#[tokio::test]
async fn a_name_spelt_otherwise_is_sent_under_the_declared_one() {
    let config = "[validation]\nmax_errors = 1\n";
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), Some(config)).await;
    let s = open_session(&tg.url()).await;
    let a = post(
        &tg.url(),
        Some(&s),
        call(7, "lookup_order", json!({"order_id": "A1"})),
    )
    .await
    .json();
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 7, "result": {
            "content": [{"type": "text", "text": "Order A1 not found"}], "isError": true,
            "_meta": {"toolgate/upstream_error": {"code": -32602, "message": "Order A1 not found"}}}})
    );
    let sent = demo.seen().pop().unwrap();
    let sent = String::from_utf8(sent.raw.to_vec()).unwrap();
    assert!(sent.contains(r#""arguments":{"orderId":"A1"}"#), "{sent}");
    // At a place whose schema refuses other names (a traveller, `additionalProperties:
    // false`): the same. What the refused call had converted beside them (`"Rail"`, the
    // class's `"First"`) goes converted too, and so where the name is at an open place
    // (`Mode`, beside an age as text).
    let cases = [
        (
            json!({"travellers": [{"Name": "Ada", "AGE": "36", "class": "First"}], "mode": "Rail"}),
            r#""arguments":{"mode":"rail","travellers":[{"class":"first","age":36,"name":"Ada"}]}"#,
        ),
        (
            json!({"travellers": [{"name": "Bo", "age": "7"}], "Mode": "Rail"}),
            r#""arguments":{"travellers":[{"age":7,"name":"Bo"}],"mode":"rail"}"#,
        ),
    ];
    for (id, (travellers, forwarded)) in (8..).zip(cases) {
        let a = post(&tg.url(), Some(&s), call(id, "plan_trip", travellers))
            .await
            .json();
        assert_eq!(
            a,
            json!({"jsonrpc": "2.0", "id": id, "result": {
                "content": [{"type": "text", "text": "Planned a rail trip for 1 traveller(s)."}],
                "isError": false}})
        );
        let sent = demo.seen().pop().unwrap();
        let sent = String::from_utf8(sent.raw.to_vec()).unwrap();
        assert!(sent.contains(forwarded), "{sent}");
    }
    let counted = tg.admin_get("/metrics").await.text();
    for (tool, n) in [("lookup_order", 1), ("plan_trip", 2)] {
        let line = format!(
            r#"toolgate_tool_calls_total{{upstream="default",tool="{tool}",outcome="coerced"}} {n}"#
        );
        assert!(counted.contains(&line), "{line} in\n{counted}");
    }
}

#[tokio::test]
async fn strict_mode_refuses_strings_for_integers() {
    let (demo, tg, _) =
        demo_behind_toolgate(Options::default(), Some("[validation]\ncoerce = false\n")).await;
    let s = open_session(&tg.url()).await;
    let a = post(
        &tg.url(),
        Some(&s),
        call(4, "add", json!({"a": "10", "b": 2})),
    )
    .await
    .json();
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/a": "expected an integer, got string \"10\""})
    );
    // Arguments sent as the JSON text of an object: said so, not read.
    let a = post(
        &tg.url(),
        Some(&s),
        call(5, "add", json!(r#"{"a": 10, "b": 2}"#)),
    )
    .await
    .json();
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 5, "error": {"code": -32602, "message": "Invalid params for tools/call: \"arguments\" must be an object, not JSON text in a string; send the object itself"}})
    );
    // Arguments that are null: said to be none as `{}`, not read so.
    let a = post(&tg.url(), Some(&s), call(8, "add", json!(null)))
        .await
        .json();
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 8, "error": {"code": -32602, "message": "Invalid params for tools/call: \"arguments\" must be an object; send {} for a call without arguments, or leave them out"}})
    );
    // Arguments wrapped once more: said so, not unwrapped.
    let a = post(
        &tg.url(),
        Some(&s),
        call(6, "add", json!({"arguments": {"a": 10, "b": 2}})),
    )
    .await
    .json();
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"]["/arguments"],
        json!("is not a parameter of this tool; send the members it holds (a, b) in its place"),
        "{a}"
    );
    // A declared name spelt otherwise: said, not renamed.
    let a = post(
        &tg.url(),
        Some(&s),
        call(7, "lookup_order", json!({"order_id": "A1"})),
    )
    .await
    .json();
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/orderId": "is required but missing", "/order_id": "is not a parameter of this tool; did you mean \"orderId\"? (orderId: The order id)"}),
        "{a}"
    );
    assert!(demo.calls().is_empty());
}

#[tokio::test]
async fn unconvertible_strings_are_violations_in_coerce_mode() {
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let s = open_session(&tg.url()).await;
    let a = post(
        &tg.url(),
        Some(&s),
        call(4, "add", json!({"a": "abc", "b": "2"})),
    )
    .await
    .json();
    // "2" converts; "abc" cannot, so the call is refused and only "abc" is reported.
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/a": "expected an integer, got string \"abc\""})
    );
    assert!(demo.calls().is_empty());
}

#[tokio::test]
async fn unknown_tool_is_invalid_params_with_a_suggestion() {
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let s = open_session(&tg.url()).await;
    let a = post(&tg.url(), Some(&s), call(9, "book_flite", json!({})))
        .await
        .json();
    assert_eq!(
        a,
        json!({"jsonrpc":"2.0","id":9,"error":{"code":-32602,"message":"Unknown tool: book_flite. Did you mean \"book_flight\"?","data":{"tool":"book_flite","suggestions":["book_flight"]}}})
    );
    // A name given the server's name in front, as clients that gather servers name tools.
    for (id, prefixed, meant) in [
        (11, "default__book_flight", "book_flight"),
        (12, "mcp__demo__add", "add"),
        (13, "demo.add", "add"),
    ] {
        let a = post(&tg.url(), Some(&s), call(id, prefixed, json!({})))
            .await
            .json();
        assert_eq!(
            a["error"]["message"],
            format!("Unknown tool: {prefixed}. Did you mean \"{meant}\"?"),
            "{a}"
        );
        assert_eq!(a["error"]["data"]["suggestions"], json!([meant]));
    }
    let a = post(&tg.url(), Some(&s), call(10, "zzz", json!({})))
        .await
        .json();
    assert_eq!(
        a,
        json!({"jsonrpc":"2.0","id":10,"error":{"code":-32602,"message":"Unknown tool: zzz","data":{"tool":"zzz","suggestions":[]}}})
    );
    let a = post(&tg.url(), Some(&s), call(11, " ", json!({})))
        .await
        .json();
    assert_eq!(
        a,
        json!({"jsonrpc":"2.0","id":11,"error":{"code":-32602,"message":"Unknown tool:   (a name that is empty or only spaces); send the name of a listed tool","data":{"tool":" ","suggestions":[]}}})
    );
    assert!(demo.calls().is_empty());
}

#[tokio::test]
async fn malformed_tools_call_params_are_invalid_params() {
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let s = open_session(&tg.url()).await;
    let no_name =
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"arguments": {}}});
    let a = post(&tg.url(), Some(&s), no_name.to_string()).await.json();
    assert_eq!(a["error"]["code"], -32602);
    assert_eq!(a["id"], 1);
    assert!(
        a["error"]["message"].as_str().unwrap()
            == "Invalid params for tools/call: \"name\" is missing: send the name of the tool to call",
        "{a}"
    );
    let not_object = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "add", "arguments": [1, 2]}});
    let a = post(&tg.url(), Some(&s), not_object.to_string())
        .await
        .json();
    assert_eq!(
        a,
        json!({"jsonrpc":"2.0","id":2,"error":{"code":-32602,"message":"Invalid params for tools/call: \"arguments\" must be an object, not a list: send each argument under its name"}})
    );
    let no_params = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call"});
    let a = post(&tg.url(), Some(&s), no_params.to_string())
        .await
        .json();
    assert_eq!(a["error"]["code"], -32602);
    assert!(demo.calls().is_empty());
}

#[tokio::test]
async fn duplicate_argument_keys_are_a_violation() {
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let s = open_session(&tg.url()).await;
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add","arguments":{"a":1,"b":2,"a":3}}}"#;
    let a = post(&tg.url(), Some(&s), body).await.json();
    assert_eq!(a["result"]["isError"], true);
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/a": "appears more than once; send each argument once"})
    );
    assert!(demo.calls().is_empty());
}

fn hostile_tools() -> Vec<Value> {
    vec![
        json!({"name": "remote_ref", "inputSchema": {"type": "object", "properties": {"x": {"$ref": "http://127.0.0.1:9/schema.json"}}}}),
        json!({"name": "file_ref", "inputSchema": {"type": "object", "properties": {"x": {"$ref": "file:///etc/passwd"}}}}),
        json!({"name": "lookaround", "inputSchema": {"type": "object", "properties": {"x": {"type": "string", "pattern": "^(?=a)a$"}}}}),
        json!({"name": "odd_dialect", "inputSchema": {"$schema": "https://example.com/dialect", "type": "object"}}),
        json!({"name": "draft7", "inputSchema": {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}),
    ]
}

#[tokio::test]
async fn schemas_that_do_not_compile_are_forwarded_by_default() {
    let names = json!({"name": "lookaround_names", "inputSchema": {"type": "object", "properties": {
        "env": {"type": "object", "additionalProperties": false,
            "patternProperties": {"^(?!TMP)[A-Z]+$": {"type": "string"}, "^x-": {"type": "integer"}}}}}});
    let (demo, tg, _) = demo_behind_toolgate(
        Options {
            extra_tools: [hostile_tools(), vec![names]].concat(),
            ..Options::default()
        },
        None,
    )
    .await;
    let s = open_session(&tg.url()).await;
    for tool in ["remote_ref", "file_ref", "odd_dialect"] {
        let a = post(&tg.url(), Some(&s), call(1, tool, json!({"x": "a"})))
            .await
            .json();
        assert_eq!(result_text(&a), format!("{tool} got {{\"x\":\"a\"}}"));
    }
    assert_eq!(demo.calls().len(), 3);
    // A pattern toolgate's engine cannot run goes unchecked; the rest of its schema does not.
    let a = post(
        &tg.url(),
        Some(&s),
        call(1, "lookaround", json!({"x": "b"})),
    )
    .await
    .json();
    assert_eq!(result_text(&a), "lookaround got {\"x\":\"b\"}");
    let a = post(
        &tg.url(),
        Some(&s),
        call(1, "lookaround", json!({"x": true})),
    )
    .await
    .json();
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/x": "expected a string, got boolean true"})
    );
    assert_eq!(demo.calls().len(), 4);
    // So does a member name's: its members go unchecked, not refused as undeclared; the
    // other names' are checked.
    let env = |env: Value| call(1, "lookaround_names", json!({ "env": env }));
    let a = post(&tg.url(), Some(&s), env(json!({"PATH": 1})))
        .await
        .json();
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 1, "result": {"isError": false, "content": [
            {"type": "text", "text": "lookaround_names got {\"env\":{\"PATH\":1}}"}]}})
    );
    let a = post(&tg.url(), Some(&s), env(json!({"PATH": "a", "x-n": "a"})))
        .await
        .json();
    let why = "expected an integer, got string \"a\"";
    let text = format!(
        "Invalid arguments for tool \"lookaround_names\" (1 problem):\n- env.x-n: {why}\nCorrect the arguments and call the tool again."
    );
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 1, "result": {"isError": true,
            "content": [{"type": "text", "text": text}],
            "_meta": {"toolgate/validation": {"code": "invalid_arguments",
                "tool": "lookaround_names", "parameter_errors": {"/env/x-n": why}}}}})
    );
    assert_eq!(demo.calls().len(), 5);
    // A known older dialect is honoured, not refused.
    let a = post(&tg.url(), Some(&s), call(2, "draft7", json!({})))
        .await
        .json();
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/n": "is required but missing"})
    );
}

#[tokio::test]
async fn schemas_that_do_not_compile_can_be_rejected() {
    let cfg = "[validation]\non_compile_error = \"reject\"\n";
    let (demo, tg, _) = demo_behind_toolgate(
        Options {
            extra_tools: hostile_tools(),
            ..Options::default()
        },
        Some(cfg),
    )
    .await;
    let s = open_session(&tg.url()).await;
    let a = post(
        &tg.url(),
        Some(&s),
        call(1, "remote_ref", json!({"x": "a"})),
    )
    .await
    .json();
    assert_eq!(a["result"]["isError"], true);
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["code"],
        "schema_unusable"
    );
    assert!(
        result_text(&a).starts_with("The input schema of tool \"remote_ref\" is not usable"),
        "{a}"
    );
    assert!(demo.calls().is_empty());
}

#[tokio::test]
async fn unknown_schemas_are_listed_once_inside_the_session() {
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let s = open_session(&tg.url()).await;
    // No tools/list from the client: toolgate lists by itself, in this session.
    let a = post(
        &tg.url(),
        Some(&s),
        call(1, "add", json!({"a": 1, "b": "x"})),
    )
    .await
    .json();
    assert_eq!(a["result"]["isError"], true);
    let a = post(&tg.url(), Some(&s), call(2, "add", json!({"a": 1, "b": 1})))
        .await
        .json();
    assert_eq!(result_text(&a), "2");
    let lists: Vec<_> = demo
        .seen()
        .into_iter()
        .filter(|x| x.body["method"] == "tools/list")
        .collect();
    assert_eq!(lists.len(), 1, "one listing for two calls");
    assert_eq!(lists[0].session.as_deref(), Some(s.as_str()));
    let id = lists[0].body["id"]
        .as_str()
        .expect("toolgate's ids are strings");
    assert!(id.starts_with("toolgate-"), "{id}");
}

#[tokio::test]
async fn audit_mode_forwards_invalid_calls_and_logs_them() {
    let (demo, tg, _) =
        demo_behind_toolgate(Options::default(), Some("[validation]\nmode = \"audit\"\n")).await;
    let s = open_session(&tg.url()).await;
    let a = post(
        &tg.url(),
        Some(&s),
        call(1, "book_flight", booking("2031-08-08", 2)),
    )
    .await
    .json();
    assert_eq!(a["result"]["isError"], true);
    assert_eq!(
        result_text(&a),
        "Invalid departure date \"2031-08-08\": use dd/mm/yyyy.",
        "the server's own answer"
    );
    assert_eq!(demo.calls().len(), 1);
    let logs = tg.logs_when(|l| l.contains("audited")).await;
    assert!(logs.contains("audited"), "{logs}");
}

#[tokio::test]
async fn per_tool_mode_overrides_the_global_one() {
    let cfg = "[validation.tools.add]\nmode = \"off\"\n";
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), Some(cfg)).await;
    let s = open_session(&tg.url()).await;
    let a = post(&tg.url(), Some(&s), call(1, "add", json!({"a": "x"})))
        .await
        .json();
    assert_eq!(
        result_text(&a),
        "add needs two integers",
        "forwarded unchecked"
    );
    let a = post(&tg.url(), Some(&s), call(2, "book_flight", json!({})))
        .await
        .json();
    assert!(result_text(&a).starts_with("Invalid arguments for tool \"book_flight\""));
    assert_eq!(demo.calls().len(), 1);
}

#[tokio::test]
async fn valid_booking_gets_the_servers_own_answer() {
    let (_demo, tg, upstream) = demo_behind_toolgate(Options::default(), None).await;
    for url in [tg.url(), upstream] {
        let s = open_session(&url).await;
        let a = post(&url, Some(&s), call(1, "book_flight", booking(FUTURE, 2)))
            .await
            .json();
        assert_eq!(
            a,
            json!({"jsonrpc":"2.0","id":1,"result":{"content":[{"type":"text","text":"Booked 2 seat(s) from LHR to JFK on 01/02/2999."}],"isError":false}})
        );
    }
}

// ---- docs/contract.md §2: the transport ----

#[tokio::test]
async fn malformed_json_is_a_parse_error_under_the_id_it_began_with() {
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    for (body, id) in [
        (
            r#"{"jsonrpc":"2.0","id":99,"method":"tools/list""#,
            json!(99),
        ),
        (
            r#"{"jsonrpc":"2.0","method":"tools/list","id""#,
            Value::Null,
        ),
    ] {
        let r = post(&tg.url(), None, body).await;
        assert_eq!(r.status, 400);
        assert_eq!(r.headers["content-type"], "application/json");
        let a = r.json();
        assert_eq!(a["error"]["code"], -32700);
        assert_eq!(a["id"], id, "{a}");
        assert_eq!(a.get("id").is_some(), !id.is_null(), "{a}");
    }
    assert!(demo.seen().is_empty());
}

#[tokio::test]
async fn json_that_is_not_jsonrpc_is_an_invalid_request() {
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let version = r#"the "jsonrpc" member must be "2.0""#;
    // A request's id is its answer's, where it can be read (MCP); nothing else is.
    for (body, id, why) in [
        (r#"{"id":1,"method":"tools/list"}"#, Some(1), version),
        (
            r#"{"jsonrpc":"2.0","id":2,"method":["tools/list"]}"#,
            Some(2),
            "\"method\" must be a string at line 1 column 33",
        ),
        (
            r#""hello""#,
            None,
            r#"invalid type: string "hello", expected a JSON-RPC message object at line 1 column 7"#,
        ),
        ("[]", None, "empty batch"),
        (
            r#"{"jsonrpc":"2.0","id":1}"#,
            None,
            "neither a request, a notification nor a response",
        ),
        (r#"{"jsonrpc":"1.0","id":3,"result":{}}"#, None, version),
    ] {
        let r = post(&tg.url(), None, body).await;
        assert_eq!(r.status, 400, "{body}");
        let error = json!({"code": -32600, "message": format!("Invalid Request: {why}")});
        let expected = match id {
            Some(id) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
            None => json!({"jsonrpc": "2.0", "error": error}),
        };
        assert_eq!(r.json(), expected, "{body}");
    }
    assert!(demo.seen().is_empty());
}

#[tokio::test]
async fn oversized_bodies_get_413_with_a_jsonrpc_body() {
    let (demo, tg, _) = demo_behind_toolgate(
        Options::default(),
        Some("[limits]\nmax_body_bytes = 1000\n"),
    )
    .await;
    let big = call(1, "add", json!({"a": 1, "b": 2, "pad": "x".repeat(2000)}));
    let r = post(&tg.url(), None, big).await;
    assert_eq!(r.status, 413);
    assert_eq!(
        r.json(),
        json!({"jsonrpc":"2.0","error":{"code":-32600,"message":"Invalid Request: the body is over the 1000-byte limit"}})
    );
    assert!(demo.seen().is_empty());
}

#[tokio::test]
async fn deep_nesting_is_refused_without_crashing() {
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let s = open_session(&tg.url()).await;
    let deep = format!(
        r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"add","arguments":{{"a":{}1{}}}}}}}"#,
        "[".repeat(50_000),
        "]".repeat(50_000)
    );
    let r = post(&tg.url(), Some(&s), deep).await;
    assert_eq!(r.status, 200);
    let a = r.json();
    assert_eq!(a["id"], 1);
    let errors = &a["result"]["_meta"]["toolgate/validation"]["parameter_errors"];
    // Named by its first 120 characters.
    let pointer = format!("{}…", &format!("/a{}", "/0".repeat(126))[..120]);
    assert_eq!(
        errors[pointer.as_str()],
        "nests arrays and objects more than 128 levels deep; send it less deeply nested"
    );
    assert!(demo.calls().is_empty());
    // Still serving.
    let a = post(&tg.url(), Some(&s), call(2, "add", json!({"a": 1, "b": 1})))
        .await
        .json();
    assert_eq!(result_text(&a), "2");
}

#[tokio::test]
async fn foreign_origins_and_hosts_are_forbidden() {
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let r = request(
        Method::POST,
        &tg.url(),
        &[
            ("content-type", "application/json"),
            ("accept", ACCEPT),
            ("origin", "http://evil.example.com"),
        ],
        body.clone(),
    )
    .await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json(),
        json!({"jsonrpc":"2.0","error":{"code":-32600,"message":"Forbidden: Origin not allowed"}})
    );
    let r = request(
        Method::POST,
        &tg.url(),
        &[
            ("content-type", "application/json"),
            ("accept", ACCEPT),
            ("host", "evil.example.com"),
        ],
        body.clone(),
    )
    .await;
    assert_eq!(r.status, 403);
    assert!(demo.seen().is_empty());
    let r = request(
        Method::POST,
        &tg.url(),
        &[
            ("content-type", "application/json"),
            ("accept", ACCEPT),
            ("origin", "http://localhost:5173"),
        ],
        body,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json(), json!({"jsonrpc":"2.0","id":1,"result":{}}));
}

/// A web page at an origin the operator listed can use the endpoint from a browser, behind
/// either kind of server: its preflight is answered, and its answers name it (once, whatever
/// the server said) and expose the session id. A localhost origin that is not listed passes
/// the origin check but gets no CORS: its preflight meets the 405 of a method the endpoint
/// does not have.
#[tokio::test]
async fn a_listed_browser_origin_gets_cors_behind_either_kind_of_server() {
    const PAGE: &str = "https://inspector.example";
    let config = format!("allowed_origins = [\"{PAGE}\"]\n");
    let (_demo, by_http, _) = demo_behind_toolgate(Options::default(), Some(&config)).await;
    let command = common::peers::stdio_fixture(&[]).await;
    let by_command = Toolgate::in_front_of(&command, Some(&config)).await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "browser", "version": "1"}}})
    .to_string();
    for (front, tg) in [
        ("serve --upstream", &by_http),
        ("serve -- CMD", &by_command),
    ] {
        let preflight = |origin| {
            [
                ("origin", origin),
                ("access-control-request-method", "POST"),
                (
                    "access-control-request-headers",
                    "content-type, mcp-protocol-version",
                ),
            ]
        };
        let r = request(Method::OPTIONS, &tg.url(), &preflight(PAGE), "").await;
        assert_eq!(r.status, 204, "{front}");
        let h = &r.headers;
        assert_eq!(h["access-control-allow-origin"], PAGE, "{front}");
        assert_eq!(h["access-control-allow-methods"], "GET, POST, DELETE");
        assert_eq!(
            h["access-control-allow-headers"],
            "content-type, mcp-protocol-version"
        );

        let headers = [
            ("content-type", "application/json"),
            ("accept", ACCEPT),
            ("origin", PAGE),
        ];
        let r = request(Method::POST, &tg.url(), &headers, init.clone()).await;
        assert_eq!(r.status, 200, "{front}: {}", r.text());
        let origins: Vec<_> = r
            .headers
            .get_all("access-control-allow-origin")
            .iter()
            .collect();
        assert_eq!(origins, [PAGE], "{front}");
        let exposed = r.headers["access-control-expose-headers"].to_str().unwrap();
        assert!(exposed.contains("mcp-session-id"), "{front}: {exposed}");
        assert!(r.headers.contains_key("mcp-session-id"), "{front}");

        let local = "http://localhost:5173";
        let headers = [
            ("content-type", "application/json"),
            ("accept", ACCEPT),
            ("origin", local),
        ];
        let r = request(Method::POST, &tg.url(), &headers, init.clone()).await;
        assert_eq!(r.status, 200, "{front}");
        assert!(
            !r.headers.contains_key("access-control-allow-origin"),
            "{front}"
        );
        let r = request(Method::OPTIONS, &tg.url(), &preflight(local), "").await;
        assert_eq!(r.status, 405, "{front}");
        assert!(
            !r.headers.contains_key("access-control-allow-origin"),
            "{front}"
        );
    }
}

#[tokio::test]
async fn batches_pass_through_but_not_with_tool_calls() {
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let r = post(
        &tg.url(),
        None,
        format!("[{}]", call(1, "add", json!({"a": 1, "b": 2}))),
    )
    .await;
    // Answered as a batch is: an array, the call's error under its id.
    let refused = json!([{"jsonrpc": "2.0", "id": 1, "error": {"code": -32600,
        "message": "Invalid Request: toolgate does not accept tools/call inside a batch; send each call on its own"}}]);
    assert_eq!((r.status, r.json()), (400, refused));
    assert!(demo.seen().is_empty());
    let batch = r#"[{"jsonrpc":"2.0","method":"notifications/initialized"}]"#;
    let r = post(&tg.url(), None, batch).await;
    assert_eq!(r.status, 202);
    assert_eq!(demo.seen()[0].raw, batch.as_bytes());
    // Requests in a batch go as it came, and its one answer comes back whole.
    let batch = r#"[{"jsonrpc":"2.0","id":"a","method":"ping"},{"jsonrpc":"2.0","method":"notifications/initialized"},{"jsonrpc":"2.0","id":2,"method":"resources/list"}]"#;
    let r = post(&tg.url(), None, batch).await;
    let answered = json!([{"jsonrpc": "2.0", "id": "a", "result": {}},
        {"jsonrpc": "2.0", "id": 2, "result": {"resources": [{"uri": "demo://greeting", "name": "greeting", "mimeType": "text/plain"}]}}]);
    assert_eq!((r.status, r.json()), (200, answered));
    assert_eq!(demo.seen()[1].raw, batch.as_bytes());
}

// ---- pass-through, streaming, catalogs, sessions ----

#[tokio::test]
async fn unknown_methods_and_discover_probes_pass_through_byte_for_byte() {
    let (demo, tg, upstream) = demo_behind_toolgate(Options::default(), None).await;
    let probe = r#"{"jsonrpc":"2.0","id":"d1","method":"server/discover","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}},"x-vendor":{"keep":true}}"#;
    // A modern body travels with the modern headers; without them toolgate refuses it
    // (see `hardening.rs`).
    let headers = [
        ("content-type", "application/json"),
        ("accept", ACCEPT),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "server/discover"),
    ];
    let through = request(Method::POST, &tg.url(), &headers, probe).await;
    let direct = request(Method::POST, &upstream, &headers, probe).await;
    assert_eq!(through.status, direct.status);
    assert_eq!(through.body, direct.body);
    assert_eq!(
        through.json(),
        json!({"jsonrpc":"2.0","id":"d1","error":{"code":-32601,"message":"Method not found"}})
    );
    // Before the client's, toolgate asked the server's era once with a probe of its own
    // (docs/contract.md §5); the client's went as it came.
    let seen = demo.seen();
    assert_eq!(
        seen.len(),
        3,
        "an era probe, the client's request, the same sent directly"
    );
    assert_eq!(seen[0].body["method"], "server/discover");
    assert_ne!(seen[0].body["id"], "d1");
    assert_eq!(seen[1].raw, probe.as_bytes());
}

#[tokio::test]
async fn end_to_end_headers_pass_and_hop_by_hop_ones_do_not() {
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string();
    let r = request(
        Method::POST,
        &tg.url(),
        &[
            ("content-type", "application/json"),
            ("accept", ACCEPT),
            ("authorization", "Bearer secret-token"),
            ("mcp-protocol-version", "2025-11-25"),
            ("last-event-id", "41"),
            ("x-custom", "kept"),
            ("mcp-param-region", "eu"),
            ("connection", "keep-alive, x-hop"),
            ("x-hop", "dropped"),
        ],
        body,
    )
    .await;
    assert_eq!(r.status, 200);
    let seen = &demo.seen()[0];
    for (k, v) in [
        ("authorization", "Bearer secret-token"),
        ("mcp-protocol-version", "2025-11-25"),
        ("last-event-id", "41"),
        ("x-custom", "kept"),
        ("mcp-param-region", "eu"),
    ] {
        assert_eq!(
            seen.headers.get(k).map(|v| v.to_str().unwrap()),
            Some(v),
            "{k}"
        );
    }
    assert!(seen.headers.get("x-hop").is_none());
    assert!(!tg.logs().contains("secret-token"));
}

#[tokio::test]
async fn progress_notifications_stream_through_as_they_are_sent() {
    let (_demo, tg, upstream) = demo_behind_toolgate(Options::default(), None).await;
    let s = open_session(&tg.url()).await;
    let body = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "countdown", "arguments": {"steps": 3, "intervalMs": 400}, "_meta": {"progressToken": "p"}}}).to_string();
    let req = http::Request::post(tg.url())
        .header("content-type", "application/json")
        .header("accept", ACCEPT)
        .header("mcp-session-id", &s)
        .body(http_body_util::Full::new(bytes::Bytes::from(body)))
        .unwrap();
    let resp = client().request(req).await.unwrap();
    assert_eq!(resp.headers()["content-type"], "text/event-stream");
    let start = Instant::now();
    let mut body = resp.into_body();
    let mut text = String::new();
    let mut arrivals = Vec::new();
    use http_body_util::BodyExt;
    while let Some(frame) = body.frame().await {
        if let Ok(d) = frame.unwrap().into_data() {
            text.push_str(std::str::from_utf8(&d).unwrap());
            let n = sse_messages(&text).len();
            while arrivals.len() < n {
                arrivals.push(start.elapsed());
            }
        }
    }
    let msgs = sse_messages(&text);
    let progress: Vec<_> = msgs
        .iter()
        .filter(|m| m["method"] == "notifications/progress")
        .map(|m| m["params"]["progress"].clone())
        .collect();
    assert_eq!(progress, vec![json!(1), json!(2), json!(3)], "in order");
    assert_eq!(msgs.last().unwrap()["id"], 8, "the answer comes last");
    // The server spaces the events 400 ms apart; a buffering proxy would deliver them together.
    assert!(
        arrivals[3] - arrivals[0] >= Duration::from_millis(800),
        "arrivals {arrivals:?}"
    );
    // Byte for byte the same as calling the server directly (no delays this time).
    let quick = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "countdown", "arguments": {"steps": 2, "intervalMs": 0}, "_meta": {"progressToken": 1}}}).to_string();
    let through = post(&tg.url(), Some(&s), quick.clone()).await;
    let s2 = open_session(&upstream).await;
    let direct = post(&upstream, Some(&s2), quick).await;
    assert_eq!(through.body, direct.body);
}

#[tokio::test]
async fn sse_answers_teach_the_catalog_too() {
    let (demo, tg, _) = demo_behind_toolgate(
        Options {
            sse: true,
            ..Options::default()
        },
        None,
    )
    .await;
    let s = open_session(&tg.url()).await;
    let r = post(
        &tg.url(),
        Some(&s),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string(),
    )
    .await;
    assert_eq!(r.answer()["result"]["tools"].as_array().unwrap().len(), 6);
    let a = post(&tg.url(), Some(&s), call(2, "add", json!({"a": 1})))
        .await
        .json();
    assert_eq!(a["result"]["isError"], true);
    let lists = demo
        .seen()
        .into_iter()
        .filter(|x| x.body["method"] == "tools/list")
        .count();
    assert_eq!(lists, 1, "learned from the client's own listing");
}

#[tokio::test]
async fn every_page_of_tools_list_is_learned() {
    let (demo, tg, _) = demo_behind_toolgate(
        Options {
            page_size: 2,
            ..Options::default()
        },
        None,
    )
    .await;
    let s = open_session(&tg.url()).await;
    // The client reads only the first page; countdown is on the third.
    let r = post(
        &tg.url(),
        Some(&s),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string(),
    )
    .await;
    assert_eq!(r.json()["result"]["nextCursor"], "2");
    let a = post(
        &tg.url(),
        Some(&s),
        call(2, "countdown", json!({"steps": 99})),
    )
    .await
    .json();
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/steps": "must be at most 20, got 99"})
    );
    let own: Vec<_> = demo
        .seen()
        .into_iter()
        .filter(|x| x.body["method"] == "tools/list" && x.body["id"].is_string())
        .map(|x| x.body["params"]["cursor"].clone())
        .collect();
    assert_eq!(
        own,
        vec![Value::Null, json!("2"), json!("4")],
        "toolgate read all three pages"
    );
}

#[tokio::test]
async fn list_changed_drops_the_catalog() {
    let (_demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let s = open_session(&tg.url()).await;
    post(
        &tg.url(),
        Some(&s),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string(),
    )
    .await;
    // The answer's stream carries notifications/tools/list_changed, then the result.
    let r = post(&tg.url(), Some(&s), call(2, "enable_extra", json!({}))).await;
    assert_eq!(
        r.messages()[0]["method"],
        "notifications/tools/list_changed"
    );
    // Without invalidation, the fresh complete catalog would call extra_tool unknown.
    let a = post(
        &tg.url(),
        Some(&s),
        call(3, "extra_tool", json!({"level": 9})),
    )
    .await
    .json();
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/level": "must be at most 3, got 9"})
    );
}

#[tokio::test]
async fn ending_a_session_drops_its_catalog() {
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let s = open_session(&tg.url()).await;
    post(
        &tg.url(),
        Some(&s),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string(),
    )
    .await;
    let r = request(Method::DELETE, &tg.url(), &[("mcp-session-id", &s)], "").await;
    assert_eq!(r.status, 200);
    assert!(demo.seen().iter().any(|x| x.http_method == "DELETE"));
    // With the catalog kept, toolgate would answer this itself; without it, it must ask the
    // server, which says the session is gone, and the client gets that 404 to re-initialize.
    let r = post(&tg.url(), Some(&s), call(2, "add", json!({"a": "x"}))).await;
    assert_eq!(r.status, 404);
    assert_eq!(r.json()["error"]["message"], "Session not found");
}

#[tokio::test]
async fn an_unreachable_upstream_gets_a_clear_answer() {
    let port = closed_port();
    let tg = Toolgate::serve(&format!("http://127.0.0.1:{port}/mcp"), None).await;
    let a = post(&tg.url(), None, call(1, "add", json!({"a": 1, "b": 2}))).await;
    assert_eq!(a.status, 200);
    let a = a.json();
    assert_eq!(a["result"]["isError"], true);
    assert!(
        result_text(&a)
            .starts_with("The tool server is unavailable: could not reach the tool server"),
        "{a}"
    );
    let r = post(
        &tg.url(),
        None,
        json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string(),
    )
    .await;
    assert_eq!(r.status, 200);
    let a = r.json();
    assert_eq!(a["error"]["code"], -32603);
    assert_eq!(a["id"], 2);
    let r = post(
        &tg.url(),
        None,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string(),
    )
    .await;
    assert_eq!(r.status, 502);
    assert_eq!(r.json()["error"]["code"], -32603);
}
