//! Hostile schemas and bodies from upstreams and clients: toolgate stays responsive and
//! bounded, says in its logs what it refused, and answers every request.

use crate::common;
use common::modes::{Front, Mode};
use common::processes::peak_mib;
use common::scripted::{Script, Scripted, open_tool};
use common::stdio_gate::StdioGate;
use common::*;
use serde_json::{Value, json};

fn nested_schema(depth: usize) -> Value {
    let mut s = json!({"type": "string"});
    for _ in 0..depth {
        s = json!({"type": "object", "properties": {"a": s}});
    }
    s
}

#[tokio::test]
async fn hostile_schemas_are_refused_or_bounded() {
    let huge_enum: Vec<Value> = (0..100_000).map(|i| json!(format!("v{i}"))).collect();
    let big_props: serde_json::Map<String, Value> = (0..40_000)
        .map(|i| {
            (
                format!("p{i}"),
                json!({"type": "string", "description": "x".repeat(40)}),
            )
        })
        .collect();
    let tools = vec![
        // Deeper than the JSON parser's nesting limit: does not compile, forwarded by policy.
        json!({"name": "deep", "inputSchema": nested_schema(300)}),
        json!({"name": "huge_enum", "inputSchema": {"type": "object", "properties": {"v": {"enum": huge_enum}}}}),
        json!({"name": "redos", "inputSchema": {"type": "object", "properties": {"s": {"type": "string", "pattern": "^(a+)+$"}}}}),
        json!({"name": "cycle", "inputSchema": {"type": "object", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "properties": {"x": {"$ref": "#/$defs/a"}}}}),
        json!({"name": "self_ref", "inputSchema": {"type": "object", "properties": {"next": {"$ref": "#"}}, "additionalProperties": false}}),
        // Several megabytes: over max_schema_bytes, refused before any parse.
        json!({"name": "megabytes", "inputSchema": {"type": "object", "properties": big_props}}),
    ];
    let (url, state) = Scripted::new(tools).spawn().await;
    let tg = Toolgate::serve(&url, None).await;

    let a = post(&tg.url(), None, call(1, "deep", json!({"a": 1})))
        .await
        .json();
    assert_eq!(
        result_text(&a),
        "no script for deep",
        "forwarded unvalidated by the default policy"
    );

    let a = post(&tg.url(), None, call(2, "huge_enum", json!({"v": "nope"})))
        .await
        .json();
    let text = result_text(&a);
    assert!(text.contains("must be one of [\"v0\",\"v1\","), "{text}");
    assert!(text.contains("… (99988 more)]"), "{text}");
    assert!(
        text.len() < 2_000,
        "the answer stays small: {} bytes",
        text.len()
    );
    let a = post(
        &tg.url(),
        None,
        call(3, "huge_enum", json!({"v": "v99999"})),
    )
    .await
    .json();
    assert_eq!(result_text(&a), "no script for huge_enum");

    let evil = format!("{}!", "a".repeat(50_000));
    let a = post(&tg.url(), None, call(4, "redos", json!({"s": evil})))
        .await
        .json();
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"]["/s"]
            .as_str()
            .unwrap()
            .split(',')
            .next()
            .unwrap(),
        "must match the pattern ^(a+)+$"
    );

    let a = post(&tg.url(), None, call(5, "cycle", json!({"x": 1})))
        .await
        .json();
    assert_eq!(a["id"], 5);
    assert!(
        a.get("result").is_some(),
        "a $ref cycle neither hangs nor crashes: {a}"
    );
    let a = post(
        &tg.url(),
        None,
        call(
            6,
            "self_ref",
            json!({"next": {"next": {"next": {"oops": 1}}}}),
        ),
    )
    .await
    .json();
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/next/next/next/oops": "is not an accepted argument; accepted: next"}),
        "recursion through \"$ref\": \"#\" is followed"
    );

    let a = post(&tg.url(), None, call(7, "megabytes", json!({"p1": 5})))
        .await
        .json();
    assert_eq!(
        result_text(&a),
        "no script for megabytes",
        "over the size limit: forwarded unvalidated"
    );

    let refused = |logs: &str, tool: &str| {
        logs.lines()
            .any(|l| l.contains("does not compile") && l.contains(tool))
    };
    let logs = tg
        .logs_when(|l| refused(l, "deep") && refused(l, "megabytes"))
        .await;
    for tool in ["deep", "megabytes"] {
        assert!(
            logs.lines()
                .any(|l| l.contains("does not compile") && l.contains(tool)),
            "the refusal of {tool} is logged: {logs}"
        );
    }
    assert!(logs.contains("byte limit"), "{logs}");
    let calls = state
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .count();
    assert_eq!(
        calls, 4,
        "deep (unchecked), huge_enum (valid), cycle, megabytes (unchecked)"
    );
}

#[tokio::test]
async fn ten_thousand_tools_are_learned_and_checked() {
    let mut tools: Vec<Value> = (0..10_000)
        .map(|i| open_tool(&format!("tool_{i}")))
        .collect();
    tools.push(json!({"name": "last", "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}}));
    let (url, _) = Scripted::new(tools).spawn().await;
    let tg = Toolgate::serve(&url, None).await;
    let r = post(
        &tg.url(),
        None,
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string(),
    )
    .await
    .json();
    assert_eq!(r["result"]["tools"].as_array().unwrap().len(), 10_001);
    let a = post(&tg.url(), None, call(2, "last", json!({})))
        .await
        .json();
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/n": "is required but missing"})
    );
    let a = post(&tg.url(), None, call(3, "tool_9999", json!({"x": 1})))
        .await
        .json();
    assert_eq!(result_text(&a), "no script for tool_9999");
}

#[tokio::test]
async fn a_client_that_gives_up_leaves_toolgate_serving() {
    let (url, _) = Scripted::new(vec![open_tool("slow")])
        .script("slow", common::scripted::Script::Hang)
        .spawn()
        .await;
    let tg = Toolgate::serve(&url, None).await;
    // The client disconnects long before the upstream would answer.
    let gave_up = tokio::time::timeout(
        std::time::Duration::from_millis(300),
        post(&tg.url(), None, call(1, "slow", json!({}))),
    )
    .await;
    assert!(gave_up.is_err());
    for id in 2..20 {
        let a = post(
            &tg.url(),
            None,
            json!({"jsonrpc": "2.0", "id": id, "method": "ping"}).to_string(),
        )
        .await
        .json();
        assert_eq!(a["id"], id);
    }
}

/// Names a client makes up cost what their length does, not its square, and a log line shows
/// only their first few hundred bytes: a 1 MB unknown tool name, and an argument named like a
/// 12,000-character property with one letter added (names over 256 characters are not
/// compared for suggestions).
#[tokio::test]
async fn made_up_names_are_compared_and_logged_within_bounds() {
    let long_property = "p".repeat(12_000);
    let tool = json!({"name": "store", "inputSchema": {"type": "object",
        "properties": {long_property.clone(): {"type": "string"}}}});
    let (up, _) = Scripted::new(vec![tool]).spawn().await;
    let tg = Toolgate::serve(&up, None).await;
    let name = "x".repeat(1 << 20);
    // A valid call of the same size first: the bound below is relative to it.
    let valid = json!({long_property.clone(): name.clone()});
    let a = post(&tg.url(), None, call(0, "store", valid)).await.json();
    assert!(
        a.get("result").is_some(),
        "a valid call of that size is forwarded"
    );
    let after_valid = peak_mib(tg.pid());
    let a = post(&tg.url(), None, call(1, &name, json!({})))
        .await
        .json();
    assert_eq!(a["error"]["code"], -32602, "answered as unknown");
    assert_eq!(a["error"]["data"]["suggestions"], json!([]));
    let after = peak_mib(tg.pid());
    assert!(
        after < after_valid + 64,
        "peak RSS {after} MiB after the made-up name, {after_valid} MiB after a valid call of the same size"
    );
    let near = format!("{long_property}q");
    let a = post(&tg.url(), None, call(2, "store", json!({near: "v"})))
        .await
        .json();
    // Not compared (no suggestion is made for names that long): the open schema takes it.
    assert!(a.get("result").is_some(), "{a}");
    let logs = tg
        .logs_when(|l| l.contains("outcome=\"unknown\"") || l.contains("outcome=unknown"))
        .await;
    assert!(
        logs.contains("outcome"),
        "{}",
        &logs[..logs.len().min(2000)]
    );
    assert!(
        !logs.contains(&"x".repeat(1000)),
        "a made-up name is not logged whole"
    );
}

/// A validator keeps each keyword's place in its schema, so a schema nested deep under long
/// names costs its depth times its size to compile and keep: sixty levels of 16 KB names, a
/// 1 MB schema, keeps 270 MB. Such a schema is not compiled (`on_compile_error`), and three of
/// them leave the peak RSS within 64 MiB of a schema of the same size laid flat.
#[tokio::test]
async fn schemas_nested_deep_under_long_names_are_not_compiled() {
    let name = |i: usize| format!("n{i}{}", "x".repeat(16_000));
    let flat: serde_json::Map<String, Value> = (0..60)
        .map(|i| (name(i), json!({"type": "integer", "format": "int32"})))
        .collect();
    let deep = |k: usize| {
        let leaf = json!({"type": "integer", "title": format!("k{k}")});
        (0..60).fold(
            leaf,
            |s, i| json!({"type": "object", "properties": {name(i): s}}),
        )
    };
    let mut tools =
        vec![json!({"name": "flat", "inputSchema": {"type": "object", "properties": flat}})];
    tools.extend((0..3).map(|k| json!({"name": format!("deep{k}"), "inputSchema": deep(k)})));
    let (up, seen) = Scripted::new(tools).spawn().await;
    let config = "[validation]\non_compile_error = \"reject\"\n";
    let tg = Toolgate::serve(&up, Some(config)).await;
    let args: serde_json::Map<String, Value> = (0..60).map(|i| (name(i), json!(1))).collect();
    let a = post(&tg.url(), None, call(0, "flat", Value::Object(args)))
        .await
        .json();
    assert!(a.get("result").is_some(), "{}", &a.to_string()[..200]);
    let after_flat = peak_mib(tg.pid());
    let why = "its subschemas are nested so deep under names so long that their places come to more than 8388608 bytes, too costly to compile and keep";
    for k in 0..3 {
        let tool = format!("deep{k}");
        let a = post(&tg.url(), None, call(1, &tool, json!({})))
            .await
            .json();
        assert_eq!(a, unusable(1, &tool, why));
    }
    assert_eq!(
        seen.tool_calls().len(),
        1,
        "only the flat call reached the server"
    );
    let after = peak_mib(tg.pid());
    assert!(
        after < after_flat + 64,
        "peak RSS {after} MiB after three deep schemas, {after_flat} MiB after a flat one of the same size"
    );
}

/// A schema's text may hold many times its size once read (each small object is a tree node
/// of about 630 bytes): an `enum` of a hundred and forty thousand `{"":0}`, a 1 MB schema,
/// holds 570 MB with its validators. Such a schema is not read; one of the same size that
/// holds what its text says is checked.
#[tokio::test]
async fn a_schema_that_holds_many_times_its_text_is_not_read() {
    let strings: Vec<String> = (0..90_000).map(|i| format!("v{i:07}")).collect();
    let objects = vec![json!({"": 0}); 140_000];
    let tool = |name: &str, options: Value| json!({"name": name, "inputSchema": {"type": "object", "properties": {"a": {"enum": options}}}});
    let tools = vec![
        tool("strings", json!(strings)),
        tool("objects", json!(objects)),
    ];
    let objects_text = tools[1]["inputSchema"].to_string().len();
    let (up, seen) = Scripted::new(tools).spawn().await;
    let config = "[validation]\non_compile_error = \"reject\"\n";
    let tg = Toolgate::serve(&up, Some(config)).await;
    let a = post(
        &tg.url(),
        None,
        call(0, "strings", json!({"a": "v0000007"})),
    )
    .await
    .json();
    assert!(a.get("result").is_some(), "{a}");
    let after_strings = peak_mib(tg.pid());
    let a = post(&tg.url(), None, call(1, "objects", json!({"a": {"": 0}})))
        .await
        .json();
    let why = format!(
        "its {objects_text} bytes of text would hold more than 33554432 bytes of memory once read, too costly to compile and keep"
    );
    assert_eq!(a, unusable(1, "objects", &why));
    assert_eq!(
        seen.tool_calls().len(),
        1,
        "only the strings call reached the server"
    );
    let after = peak_mib(tg.pid());
    assert!(
        after < after_strings + 32,
        "peak RSS {after} MiB after the objects, {after_strings} MiB after the strings"
    );
}

/// Arguments read into a value to explain why they are refused hold many times their text
/// where they are many small objects (each a tree node of about 630 bytes): a 3.9 MB call of
/// `{"":0}`s holds 960 MB, and the same objects as JSON text in a string, read to convert it,
/// 430 MB. Arguments that would hold more than 64 MiB once read are refused with one
/// violation, unread, and JSON text in a string that would is not converted.
#[tokio::test]
async fn arguments_that_would_hold_many_times_their_text_are_refused_unread() {
    let tool = json!({"name": "sum", "inputSchema": {"type": "object", "properties": {
        "a": {"type": "array", "items": {"type": "integer"}}}}});
    let (up, seen) = Scripted::new(vec![tool]).spawn().await;
    let tg = Toolgate::serve(&up, None).await;
    let items = |item: &str, n: usize| format!("[{}]", vec![item; n].join(","));
    let call_with = |id: u32, a: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"sum","arguments":{{"a":{a}}}}}}}"#
        )
    };
    let a = post(&tg.url(), None, call_with(0, &items("123456", 200_000)))
        .await
        .json();
    assert_eq!(
        a["result"]["content"][0]["text"],
        "no script for sum",
        "{}",
        &a.to_string()[..200]
    );
    let after_valid = peak_mib(tg.pid());
    let why = "would hold more than 67108864 bytes once read, too many to explain what is wrong; send fewer or smaller values";
    let a = post(&tg.url(), None, call_with(1, &items(r#"{"":0}"#, 200_000)))
        .await
        .json();
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": format!("Invalid arguments for tool \"sum\" (1 problem):\n- arguments: {why}\nCorrect the arguments and call the tool again.")}],
            "isError": true,
            "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": "sum", "parameter_errors": {"": why}}}}})
    );
    let text = Value::String(items(r#"{"":0}"#, 200_000)).to_string();
    let a = post(&tg.url(), None, call_with(2, &text)).await.json();
    let details = &a["result"]["_meta"]["toolgate/validation"]["parameter_errors"];
    let got = details["/a"].as_str().unwrap_or_else(|| panic!("{a}"));
    assert!(
        got.starts_with(r#"expected an array, got string "[{\"\":0},{\"\":0},"#),
        "read as the string it is: {got}"
    );
    assert!(
        seen.tool_calls().len() == 1,
        "only the valid call reached the server"
    );
    let after = peak_mib(tg.pid());
    assert!(
        after < after_valid + 64,
        "peak RSS {after} MiB after the objects, {after_valid} MiB after a valid call of the same size"
    );
}

/// A result checked against its output schema is read into a value: a 2.6 MB result of small
/// objects would hold over 130 MB so. One that would hold more than 64 MiB goes unchecked, as
/// it came; and a server's error whose `data` would is rewritten without it.
#[tokio::test]
async fn results_and_errors_that_would_hold_many_times_their_text_are_not_read() {
    let rows = |row: &str| vec![row; 200_000].join(",");
    let result = |id: u32, rows: &str| {
        format!(
            r#"{{"jsonrpc":"2.0","id":{id},"result":{{"content":[{{"type":"text","text":"rows"}}],"structuredContent":{{"rows":[{rows}]}}}}}}"#
        )
    };
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let raw = |body: &'static str| Script::Raw {
        status: 200,
        content_type: "application/json",
        body: body.as_bytes(),
    };
    let numbers = leak(result(0, &rows("12345678")));
    let objects = leak(result(1, &rows(r#"{"id":1}"#)));
    let error = leak(format!(
        r#"{{"jsonrpc":"2.0","id":2,"error":{{"code":-32000,"message":"boom","data":[{}]}}}}"#,
        rows(r#"{"":0}"#)
    ));
    let tool = |name: &str, items: Value| {
        json!({"name": name, "inputSchema": {"type": "object"}, "outputSchema": {"type": "object",
            "properties": {"rows": {"type": "array", "items": items}}}})
    };
    let scripted = Scripted::new(vec![
        tool("numbers", json!({"type": "integer"})),
        tool(
            "objects",
            json!({"type": "object", "properties": {"id": {"type": "integer"}}}),
        ),
        tool("fails", json!({})),
    ])
    .script("numbers", raw(numbers))
    .script("objects", raw(objects))
    .script("fails", raw(error));
    let (up, _) = scripted.spawn().await;
    let tg = Toolgate::serve(&up, Some("[validation]\noutput = \"enforce\"\n")).await;
    let r = post(&tg.url(), None, call(0, "numbers", json!({}))).await;
    assert_eq!(r.text(), numbers, "checked, and held");
    let after_numbers = peak_mib(tg.pid());
    let r = post(&tg.url(), None, call(1, "objects", json!({}))).await;
    assert_eq!(r.text(), objects, "unchecked, as it came");
    let a = post(&tg.url(), None, call(2, "fails", json!({})))
        .await
        .json();
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 2, "result": {
            "content": [{"type": "text", "text": "boom"}], "isError": true,
            "_meta": {"toolgate/upstream_error": {"code": -32000, "message": "boom"}}}})
    );
    let after = peak_mib(tg.pid());
    assert!(
        after < after_numbers + 64,
        "peak RSS {after} MiB after the objects, {after_numbers} MiB after numbers of the same size"
    );
    let logs = tg.logs_when(|l| l.contains("goes unchecked")).await;
    assert!(logs.contains("a result would hold too much once read to be checked against its outputSchema; it goes unchecked"), "{logs}");
}

/// The same bounds in every mode, in front of a server of either transport: a result whose
/// rows the output schema refuses, too costly to read to be checked, goes to the client as it
/// came (read, it would be refused as a violation); an error whose data would hold too much is
/// rewritten with its code and message only.
#[tokio::test]
async fn results_and_errors_too_costly_to_read_are_answered_alike_in_every_mode() {
    let result = json!({"content": [{"type": "text", "text": "rows"}],
        "structuredContent": {"rows": vec![json!({"id": "x"}); 200_000]}});
    let error = json!({"code": -32000, "message": "boom", "data": vec![json!({"": 0}); 200_000]});
    let rows = json!({"type": "array", "items": {"type": "object", "properties": {"id": {"type": "integer"}}}});
    let tools = vec![
        json!({"name": "rows", "inputSchema": {"type": "object"},
            "outputSchema": {"type": "object", "properties": {"rows": rows}}}),
        json!({"name": "heavy_fail", "inputSchema": {"type": "object"}}),
    ];
    let rewritten = json!({"jsonrpc": "2.0", "id": 2, "result": {
        "content": [{"type": "text", "text": "boom"}], "isError": true,
        "_meta": {"toolgate/upstream_error": {"code": -32000, "message": "boom"}}}});
    let command = common::peers::stdio_fixture(&["--heavy"]).await;
    let config = "[validation]\noutput = \"enforce\"\n";
    for mode in Mode::EVERY_FRONT {
        let scripted = Scripted::new(tools.clone())
            .script("rows", Script::Result(result.clone()))
            .script("heavy_fail", Script::Error(error.clone()));
        let (up, _) = scripted.spawn().await;
        let mut front = Front::start_with(mode, &up, &command, Some(config)).await;
        let a = front.ask_line(&call(1, "rows", json!({}))).await;
        let shown: String = a.to_string().chars().take(400).collect();
        assert!(
            a == json!({"jsonrpc": "2.0", "id": 1, "result": result}),
            "{mode}: the result as it came, not {shown}"
        );
        let a = front.ask_line(&call(2, "heavy_fail", json!({}))).await;
        assert_eq!(a, rewritten, "{mode}");
    }
}

/// An answer from a stdio server whose id is a list of 200,000 small objects (no request's id
/// can be a list) is not read for its id: the call after it is answered, and the peak memory
/// stays within 32 MiB of an answer of the same size with a plain id.
#[tokio::test]
async fn an_answer_whose_id_no_request_has_is_not_read() {
    let command = common::peers::stdio_fixture(&["--heavy"]).await;
    let mut g = StdioGate::start_args([vec!["stdio".into(), "--".into()], command].concat());
    g.initialize().await;
    let a = g
        .ask(serde_json::from_str(&call(1, "big", json!({"size": 1_800_000}))).unwrap())
        .await;
    assert_eq!(a["id"], 1, "the valid answer of the same size");
    let plain = peak_mib(g.child.id().unwrap());
    for id in 2..5 {
        let a = g
            .ask_past_notifications(serde_json::from_str(&call(id, "stray", json!({}))).unwrap())
            .await;
        assert_eq!(
            a,
            json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "stray"}]}})
        );
    }
    let stray = peak_mib(g.child.id().unwrap());
    assert!(
        stray <= plain + 32,
        "{stray} MiB after the stray answers, {plain} MiB after a plain one"
    );
}

/// A handshake-era server whose `initialize` result holds an `experimental` capability that
/// would hold many times its text once read: a 2026-07-28 client discovers it by the features
/// MCP names (its tools), without that one, in every mode.
#[tokio::test]
async fn a_handshake_too_costly_to_read_whole_is_discovered_by_the_features_mcp_names() {
    let heavy = vec![json!({"": 0}); 200_000];
    let init = json!({"protocolVersion": "2025-11-25",
        "capabilities": {"tools": {}, "experimental": {"heavy": heavy}},
        "serverInfo": {"name": "stdio-fixture", "version": "1"}});
    let command = common::peers::stdio_fixture(&["--heavy-capabilities"]).await;
    let discovered = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}},
        "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "stdio-fixture", "version": "1"}}}});
    for mode in Mode::EVERY_FRONT {
        let scripted = (Scripted::new(vec![open_tool("t")]).handshake_only())
            .script("initialize", Script::Result(init.clone()));
        let (up, _) = scripted.spawn().await;
        let mut front = Front::start(mode, &up, &command).await;
        let discover =
            json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {}});
        let a = front.ask_modern(discover).await;
        let shown: String = a.to_string().chars().take(400).collect();
        assert!(a == discovered, "{mode}: {shown}");
    }
}

/// A listing whose entries are seven million `0`s beside one tool is taken one entry at a
/// time: the tool is learned and its calls checked, and the peak memory stays within 32 MiB of
/// a listing of the same size whose bulk is one tool's description.
#[tokio::test]
async fn a_listing_of_many_small_entries_is_taken_one_at_a_time() {
    let tool =
        r#"{"name":"t","inputSchema":{"type":"object","properties":{"n":{"type":"integer"}}}}"#;
    let zeros = "0,".repeat(7_000_000);
    let described = format!(
        r#"{{"name":"u","description":"{}","inputSchema":{{"type":"object"}}}},"#,
        "x".repeat(zeros.len())
    );
    let mut peaks = Vec::new();
    for bulk in [zeros, described] {
        let listing = format!(r#"{{"tools":[{bulk}{tool}]}}"#);
        let listing = Script::ResultText(Box::leak(listing.into_boxed_str()));
        let scripted = Scripted::new(vec![]).script("tools/list", listing);
        let (up, _) = scripted.spawn().await;
        let tg = Toolgate::serve(&up, None).await;
        let a = post(&tg.url(), None, call(1, "t", json!({"n": "x"})))
            .await
            .json();
        assert_eq!(
            a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
            json!({"/n": "expected an integer, got string \"x\""}),
            "{a}"
        );
        peaks.push(peak_mib(tg.pid()));
    }
    costs_as_text(&peaks, "the zeros");
}

/// `toolgate stdio` answers a request the server refused without naming it (HTTP 400, an
/// error with `"id": null`) on the request's id, the refusal's `data` as written: never read
/// into a value, so 200,000 `{"":0}` cost what a string of the same size costs.
#[tokio::test]
async fn a_refusal_relayed_on_a_requests_id_keeps_its_data_unread() {
    let objects = vec![r#"{"":0}"#; 200_000].join(",");
    let string = format!(r#""{}""#, "x".repeat(objects.len()));
    let mut peaks = Vec::new();
    for data in [format!("[{objects}]"), string] {
        let refusal = format!(
            r#"{{"jsonrpc":"2.0","error":{{"code":-32000,"message":"Bad Request","data":{data}}},"id":null}}"#
        );
        let script = Script::Raw {
            status: 400,
            content_type: "application/json",
            body: Box::leak(refusal.into_boxed_str()).as_bytes(),
        };
        let (up, _) = Scripted::new(vec![open_tool("echo")])
            .script("echo", script)
            .spawn()
            .await;
        let mut g = StdioGate::start_args(vec!["stdio".into(), "--upstream".into(), up]);
        g.initialize().await;
        g.send(&call(9, "echo", json!({}))).await;
        let a = g.next_line().await.expect("an answer");
        let expected = format!(
            r#"{{"jsonrpc":"2.0","id":9,"error":{{"code":-32000,"message":"Bad Request","data":{data}}}}}"#
        );
        assert!(a == expected, "{}", &a[..a.len().min(300)]);
        peaks.push(peak_mib(g.child.id().unwrap()));
    }
    costs_as_text(&peaks, "the objects");
}

/// `toolgate stdio --upstream` reads a server's `initialize` result for the version it agreed
/// alone: an `experimental` capability of 200,000 `{"":0}` reaches the client as it came, and
/// costs what a string of the same size costs.
#[tokio::test]
async fn a_handshake_reaches_a_stdio_client_read_for_its_version_alone() {
    let objects = json!(vec![json!({"": 0}); 200_000]);
    let string = json!("x".repeat(objects.to_string().len()));
    let mut peaks = Vec::new();
    for heavy in [objects, string] {
        let init = json!({"protocolVersion": "2025-11-25",
            "capabilities": {"tools": {}, "experimental": {"heavy": heavy}},
            "serverInfo": {"name": "s", "version": "1"}});
        let scripted = Scripted::new(vec![]).script("initialize", Script::Result(init.clone()));
        let (up, _) = scripted.spawn().await;
        let mut g = StdioGate::start_args(vec!["stdio".into(), "--upstream".into(), up]);
        let a = g.ask(json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})).await;
        assert!(a["result"] == init, "the result as it came");
        peaks.push(peak_mib(g.child.id().unwrap()));
    }
    costs_as_text(&peaks, "the objects");
}

/// Peaks after a heavy input, then after one of the same size whose bulk is text: the first
/// within 32 MiB of the second.
fn costs_as_text(peaks: &[u64], heavy: &str) {
    let [heavy_peak, text_peak] = peaks[..] else {
        panic!("two peaks: {peaks:?}")
    };
    assert!(
        heavy_peak <= text_peak + 32,
        "{heavy_peak} MiB for {heavy}, {text_peak} MiB for text of the same size"
    );
}

/// `check` in front of a server that lists a tool whose definition would hold many times its
/// text once read: that tool is named, unread, and the tools beside it are checked.
#[tokio::test]
async fn check_names_a_tool_too_costly_to_read_and_checks_the_others() {
    let command = common::peers::stdio_fixture(&["--heavy-tool"]).await;
    let args: Vec<&str> = ["check", "--"]
        .into_iter()
        .chain(command.iter().map(String::as_str))
        .collect();
    let (code, out, err) = run_toolgate(&args).await;
    assert_eq!(code, Some(1), "{out}{err}");
    let unread = "error    weighty: the tool's definition would hold more than 64 MiB once read: too costly to check (a client reading the listing pays as much)";
    assert!(out.contains(unread), "{out}");
    assert!(out.contains(": 12 tools, 1 error,"), "{out}");
}

/// A server may list each session its own schemas, so each session's catalog is its own: all
/// of them together are kept within `limits.max_catalog_bytes`, the least recently listed
/// dropped first, and a session whose catalog was dropped has its tools listed again.
#[tokio::test]
async fn what_tool_catalogs_hold_is_bounded_in_bytes() {
    let tools: Vec<Value> = (0..10)
        .map(|t| {
            let properties: serde_json::Map<String, Value> = (0..500)
                .map(|i| (format!("p{t}_{i}"), json!({"type": "string"})))
                .collect();
            json!({"name": format!("t{t}"), "inputSchema": {"type": "object", "properties": properties}})
        })
        .collect();
    let config = "[limits]\nmax_catalog_bytes = 67108864\n";
    let mut peaks = Vec::new();
    for per_session in [false, true] {
        let scripted = Scripted::new(tools.clone());
        let scripted = match per_session {
            true => scripted.listing_per_session(),
            false => scripted,
        };
        let (up, seen) = scripted.spawn().await;
        let tg = Toolgate::serve(&up, Some(config)).await;
        let mut sessions = Vec::new();
        for n in 0..32 {
            let session = open_session(&tg.url()).await;
            let a = post(
                &tg.url(),
                Some(&session),
                call(n, "t3", json!({"p3_7": "x"})),
            )
            .await
            .json();
            assert!(a.get("result").is_some(), "{a}");
            sessions.push(session);
        }
        let listings = seen.listings();
        let a = post(
            &tg.url(),
            Some(&sessions[0]),
            call(99, "t3", json!({"p3_7": {"k": 1}})),
        )
        .await
        .json();
        assert_eq!(
            a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
            json!({"/p3_7": "expected a string, got object {\"k\":1}"}),
            "{a}"
        );
        let relisted = seen.listings() - listings;
        assert_eq!(
            relisted,
            usize::from(per_session),
            "the first session's catalog was dropped"
        );
        let metrics = tg.admin_get("/metrics").await.text();
        let bytes: usize = (metrics.lines())
            .find_map(|l| l.strip_prefix("toolgate_catalog_bytes "))
            .and_then(|b| b.parse().ok())
            .expect("toolgate_catalog_bytes");
        assert!(bytes <= 67_108_864, "{bytes}");
        peaks.push(peak_mib(tg.pid()));
    }
    let [same, own] = peaks[..] else {
        unreachable!()
    };
    assert!(
        own < same + 48,
        "peak RSS {own} MiB with a listing per session, {same} MiB with one for all"
    );
}

/// A server's listing is as long-winded as it likes: a log line shows only the first bytes of
/// a tool name it gave (here of a tool hidden for an invalid schema, which is logged).
#[tokio::test]
async fn a_servers_long_names_are_logged_within_bounds() {
    let name = "n".repeat(1 << 20);
    let tool = json!({"name": name, "inputSchema": {"type": "array"}});
    let (up, _) = Scripted::new(vec![tool, open_tool("ok")]).spawn().await;
    let tg = Toolgate::serve(&up, None).await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let a = post(&tg.url(), None, list).await.json();
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 1, "result": {"tools": [open_tool("ok")]}}),
        "hidden"
    );
    let logs = tg
        .logs_when(|l| l.contains("input schema is invalid"))
        .await;
    let line = logs
        .lines()
        .find(|l| l.contains("input schema is invalid"))
        .unwrap_or_else(|| panic!("{}", &logs[..logs.len().min(2000)]));
    assert!(
        line.contains(&format!("tool={} ", "n".repeat(200))),
        "{line}"
    );
    assert!(line.len() < 1000, "{} bytes", line.len());
}

/// toolgate's answer to call `id` to `tool`, whose input schema is not usable for `why`
/// (`on_compile_error = "reject"`).
fn unusable(id: i64, tool: &str, why: &str) -> Value {
    let text = format!(
        "The input schema of tool \"{tool}\" is not usable ({why}), so calls to it are refused. This is a server-side problem."
    );
    json!({"jsonrpc": "2.0", "id": id, "result": {
        "content": [{"type": "text", "text": text}], "isError": true,
        "_meta": {"toolgate/validation": {"code": "schema_unusable"}}}})
}

/// The CPU seconds a process has used, from `/proc`.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let rest = stat.rsplit_once(')').unwrap().1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap();
    ticks as f64 / 100.0
}

/// Learning a listing does not compile what no call needs: 500 tools of 8 properties, each
/// with a Unicode `\w{1,64}` pattern (among the costliest to compile, a minute of CPU for
/// them all), are listed, and each is compiled on its tool's first call, which is checked as
/// any other.
#[tokio::test]
async fn learning_a_listing_compiles_only_what_calls_need() {
    let tools: Vec<Value> = (0..500)
        .map(|i| {
            let props: serde_json::Map<String, Value> = (0..8)
                .map(|p| {
                    (
                        format!("p{p}"),
                        json!({"type": "string", "pattern": "^\\w{1,64}$"}),
                    )
                })
                .collect();
            json!({"name": format!("t{i}"), "inputSchema": {"type": "object", "properties": props}})
        })
        .collect();
    let (up, _) = Scripted::new(tools).spawn().await;
    let tg = Toolgate::serve(&up, None).await;
    let before = cpu_seconds(tg.pid());
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}).to_string();
    let listed = post(&tg.url(), None, list).await.json();
    assert_eq!(
        listed["result"]["tools"].as_array().map(Vec::len),
        Some(500)
    );
    let a = post(&tg.url(), None, call(2, "t7", json!({"p0": "ok_word"})))
        .await
        .json();
    assert!(a["result"].get("isError").is_none(), "{a}");
    let a = post(&tg.url(), None, call(3, "t7", json!({"p0": "not a word!"})))
        .await
        .json();
    assert_eq!(a["result"]["isError"], true, "{a}");
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"]["/p0"]
            .as_str()
            .map(|m| m.starts_with("must match the pattern")),
        Some(true),
        "{a}"
    );
    let used = cpu_seconds(tg.pid()) - before;
    assert!(
        used < 10.0,
        "learning the listing and two calls took {used} s of CPU"
    );
}

/// An `anyOf` of 1,000 branches against a 1 MB string cannot make the validator's errors hold
/// a copy of the string per branch: the call is refused as too large to explain, within the
/// memory a valid call of the same size takes.
#[tokio::test]
async fn an_any_of_cannot_multiply_a_value() {
    let branches: Vec<Value> = (0..1000)
        .map(|i| json!({"const": format!("v{i}")}))
        .collect();
    let tools = vec![
        json!({"name": "pick", "inputSchema": {"type": "object", "properties": {"x": {"anyOf": branches}}}}),
        json!({"name": "free", "inputSchema": {"type": "object", "properties": {"x": {"type": "string"}}}}),
    ];
    let (up, _) = Scripted::new(tools).spawn().await;
    let tg = Toolgate::serve(&up, None).await;
    let big = "a".repeat(1 << 20);
    let valid = post(&tg.url(), None, call(1, "free", json!({"x": big})))
        .await
        .json();
    assert!(
        valid["result"].get("isError").is_none(),
        "a valid call of that size is forwarded"
    );
    let after_valid = peak_mib(tg.pid());
    let a = post(&tg.url(), None, call(2, "pick", json!({"x": big})))
        .await
        .json();
    assert_eq!(
        a["result"]["isError"],
        true,
        "{}",
        &a.to_string()[..300.min(a.to_string().len())]
    );
    let text = result_text(&a);
    assert!(
        text.contains("too large to explain"),
        "{}",
        &text[..text.len().min(500)]
    );
    let after = peak_mib(tg.pid());
    assert!(
        after < after_valid + 64,
        "peak RSS {after} MiB after the anyOf call, {after_valid} MiB after a valid call of the same size"
    );
}

/// A recursive `anyOf` meets a value again at each level it nests through it, and the
/// validator's error at each level keeps a copy of that level: 300,000 numbers sixty levels
/// down, one of them a string, would copy the numbers sixty times. Such a call is refused as
/// too large to explain, within the memory the same call valid takes; so is the value sent
/// as JSON text in a string, which coercion reads into the value it writes, and a result
/// of that shape that breaks its `outputSchema` is replaced alike.
#[tokio::test]
async fn a_recursive_any_of_cannot_copy_a_value_per_level() {
    let recursive = json!({"type": "object", "properties": {"v": {"$ref": "#/$defs/n"}},
        "$defs": {"n": {"type": "array", "items": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "integer"}]}}}});
    let nested = |first: &str| {
        let bulk = ",1".repeat(300_000);
        format!("{}[{first}{bulk}]{}", "[".repeat(60), "]".repeat(60))
    };
    let broken: Value = serde_json::from_str(&nested(r#""x""#)).unwrap();
    let tools = vec![
        json!({"name": "deep", "inputSchema": recursive}),
        json!({"name": "made", "inputSchema": {"type": "object"}, "outputSchema": recursive}),
    ];
    let result = json!({"content": [], "structuredContent": {"v": broken}});
    let (up, _) = (Scripted::new(tools).script("made", Script::Result(result)))
        .spawn()
        .await;
    let tg = Toolgate::serve(&up, Some("[validation]\noutput = \"enforce\"\n")).await;
    let ask = |v: String| {
        format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"deep","arguments":{{"v":{v}}}}}}}"#
        )
    };
    let valid = post(&tg.url(), None, ask(nested("2"))).await.json();
    assert_eq!(valid["result"]["content"][0]["text"], "no script for deep");
    let after_valid = peak_mib(tg.pid());
    let coerced = nested(r#""2""#);
    let as_text = Value::String(coerced.clone()).to_string();
    let too_large = |n: &str| {
        format!(
            "breaks the schema and is too large to explain: its errors would copy about {n} bytes of it (2 alternatives)"
        )
    };
    let refused = |n: &str| {
        let why = too_large(n);
        json!({"jsonrpc": "2.0", "id": 1, "result": {"isError": true,
            "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": "deep",
                "parameter_errors": {"": why}}},
            "content": [{"type": "text", "text": format!(
                "Invalid arguments for tool \"deep\" (1 problem):\n- arguments: {why}\nCorrect the arguments and call the tool again.")}]}})
    };
    let faulted = |n: &str| {
        let why = too_large(n);
        json!({"jsonrpc": "2.0", "id": 2, "result": {"isError": true,
            "_meta": {"toolgate/output_validation": {"code": "invalid_output", "errors": {"": why}}},
            "content": [{"type": "text", "text": format!(
                "The tool \"made\" returned a result that does not match its declared outputSchema:\n- structuredContent: {why}\nThis is a fault of the tool server, not of the call.")}]}})
    };
    let made = call(2, "made", json!({}));
    let (errors, output_errors) = (
        "/result/_meta/toolgate~1validation/parameter_errors/",
        "/result/_meta/toolgate~1output_validation/errors/",
    );
    for (what, body, at, expected) in [
        (
            "coerced",
            ask(coerced),
            errors,
            &refused as &dyn Fn(&str) -> Value,
        ),
        ("as text", ask(as_text), errors, &refused),
        ("a result", made, output_errors, &faulted),
    ] {
        let a = post(&tg.url(), None, body).await.json();
        // The count the refusal names is computed from the value; the rest is exact.
        let n = a.pointer(at).and_then(Value::as_str).and_then(copied_count);
        assert!(n.is_some_and(|n| n > 64 << 20), "{what}: {a}");
        assert_eq!(a, expected(&n.unwrap().to_string()), "{what}");
        let after = peak_mib(tg.pid());
        assert!(
            after < after_valid + 64,
            "peak RSS {after} MiB after the call ({what}), {after_valid} MiB after the same call valid"
        );
    }
}

/// The byte count in "its errors would copy about N bytes".
fn copied_count(why: &str) -> Option<u64> {
    let (_, rest) = why.split_once("would copy about ")?;
    rest.split_once(' ')?.0.parse().ok()
}

/// With a collector that never answers, the spans waiting for it hold what their clipped
/// text takes, not the names and ids clients sent: 100 calls, each with a 1 MB tool name
/// and a 1 MB id, leave the peak RSS within 64 MiB of the first call's.
#[tokio::test]
async fn spans_waiting_for_a_silent_collector_stay_small() {
    let silent = common::SilentPeer::start().await;
    let endpoint = format!("http://{}", silent.addr);
    let (up, _) = Scripted::new(vec![open_tool("echo")]).spawn().await;
    let config = format!("[telemetry]\notlp_endpoint = \"{endpoint}\"\n");
    let tg = Toolgate::serve(&up, Some(&config)).await;
    let name = "n".repeat(1 << 20);
    let id = "i".repeat(1 << 20);
    let ask = |n: usize| {
        json!({"jsonrpc": "2.0", "id": format!("{id}{n}"), "method": "tools/call",
               "params": {"name": format!("{name}{n}"), "arguments": {}}})
        .to_string()
    };
    let a = post(&tg.url(), None, ask(0)).await.json();
    assert_eq!(a["error"]["code"], -32602, "answered as unknown");
    let after_one = peak_mib(tg.pid());
    for n in 1..100 {
        let a = post(&tg.url(), None, ask(n)).await.json();
        assert_eq!(a["error"]["code"], -32602);
    }
    let after = peak_mib(tg.pid());
    assert!(
        after < after_one + 64,
        "peak RSS {after} MiB after 100 such calls, {after_one} MiB after one"
    );
}

/// A stdio server floods its stderr (each line becomes one of toolgate's log lines) while
/// toolgate's own stderr is not read: a full pipe, a stalled log collector. The lines waiting
/// to be written stay within 16 MiB however long each is, and the rest are dropped; measured
/// against the same flood with toolgate's stderr read.
#[tokio::test]
async fn a_blocked_log_holds_a_bounded_queue() {
    let python = tokio::task::spawn_blocking(common::peers::peers)
        .await
        .unwrap()
        .python
        .display()
        .to_string();
    let flood = "import sys\nline = 'x' * 16000 + '\\n'\nwhile True:\n    sys.stderr.write(line)\n";
    let peak_under = |read: bool| {
        let python = python.clone();
        async move {
            let mut toolgate = StdioGate::command(["stdio", "--", &python, "-c", flood])
                .env("RUST_LOG", "info")
                .spawn()
                .unwrap();
            // Held open either way: a closed pipe would fail toolgate's writes, not block them.
            let mut stderr = toolgate.stderr.take().unwrap();
            let (reader, _unread) = match read {
                true => (
                    Some(tokio::spawn(async move {
                        let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
                    })),
                    None,
                ),
                false => (None, Some(stderr)),
            };
            tokio::time::sleep(std::time::Duration::from_secs(3)).await;
            let peak = peak_mib(toolgate.id().unwrap());
            let _ = toolgate.kill().await;
            drop(reader);
            peak
        }
    };
    let read = peak_under(true).await;
    let blocked = peak_under(false).await;
    assert!(
        blocked <= read + 40,
        "{blocked} MiB with stderr blocked against {read} MiB with it read"
    );
}

/// A stdio client stops reading its stdout while the server floods it with log
/// notifications, 50 MB of them, in front of every kind of server (a child, a Streamable HTTP
/// server, one of the HTTP+SSE transport): what waits for the
/// client stays within a few MiB (toolgate stops reading the server, which its pipe or TCP
/// then holds back, as the client's own pipe would), measured against the same flood read as
/// it comes. Once the client reads again it gets every notification and the answer.
#[tokio::test]
async fn a_client_that_stops_reading_holds_back_the_server_not_toolgates_memory() {
    const COUNT: usize = 500;
    const SIZE: usize = 100_000;
    let note = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "x".repeat(SIZE)}});
    let mut messages = vec![note; COUNT];
    messages.push(json!({"jsonrpc": "2.0", "id": "$id", "result": {"content": [{"type": "text", "text": "flooded"}]}}));
    let (url, _server) = Scripted::new(vec![open_tool("flood")])
        .script(
            "flood",
            common::scripted::Script::Sse {
                messages,
                numbered: false,
            },
        )
        .spawn()
        .await;
    let command = common::peers::stdio_fixture(&["--flood"]).await;
    let mut bridged = vec!["--"];
    bridged.extend(command.iter().map(String::as_str));
    let bridge = common::peers::python_http("sse_bridge.py", &bridged).await;
    let sse = format!("http://127.0.0.1:{}/sse", bridge.port);
    let fronts = [
        (
            "stdio -- CMD",
            [vec!["stdio".into(), "--".into()], command].concat(),
        ),
        (
            "stdio --upstream",
            vec!["stdio".into(), "--upstream".into(), url],
        ),
        (
            "stdio --upstream, HTTP+SSE",
            ["stdio", "--upstream", &sse, "--upstream-transport", "sse"]
                .map(String::from)
                .to_vec(),
        ),
    ];
    for (front, args) in fronts {
        let (before, read) = flooded_client(args.clone(), (COUNT, SIZE), false).await;
        let (_, stalled) = flooded_client(args, (COUNT, SIZE), true).await;
        assert!(
            read.max(stalled) <= before + 24,
            "{front}: {stalled} MiB with the client's stdout unread and {read} MiB with it read, against {before} MiB before the flood"
        );
    }
}

/// toolgate's peak RSS in MiB before and while a client calls `flood`, reading its stdout at
/// once or only after a stall; every notification and the answer are checked as they arrive.
async fn flooded_client(
    args: Vec<String>,
    (count, size): (usize, usize),
    stall: bool,
) -> (u64, u64) {
    let mut g = StdioGate::start_args(args);
    g.initialize().await;
    let list = json!({"jsonrpc": "2.0", "id": 0, "method": "tools/list"});
    assert!(g.ask(list).await["result"]["tools"].is_array());
    let before = peak_mib(g.child.id().unwrap());
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "flood", "arguments": {"count": count, "size": size}}});
    g.send(&call.to_string()).await;
    if stall {
        tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    }
    let mut notes = 0;
    let answer = loop {
        let m = g.recv().await;
        match m["method"].as_str() {
            Some("notifications/message") => {
                assert_eq!(m["params"]["data"].as_str().map(str::len), Some(size));
                notes += 1;
            }
            _ => break m,
        }
    };
    let flooded = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "flooded"}]}});
    assert_eq!(answer, flooded);
    assert_eq!(notes, count, "every notification");
    (before, peak_mib(g.child.id().unwrap()))
}

/// A stdio server busy with a call that reads nothing meanwhile (the fixture's `slow`, five
/// seconds, so that all 24 calls have come even on a loaded machine) while 24 calls of 1 MiB
/// each are sent to it, in both modes with a child: what waits for it stays within 16 MiB,
/// the calls past that are answered at once that it is not reading, and the rest are
/// answered by the server once it reads again. Without the bound a server that never reads
/// again would have every request sent to it kept, past its timeout, for good.
#[tokio::test]
async fn what_waits_for_a_server_that_is_not_reading_is_bounded() {
    const CALLS: i64 = 24;
    let command = common::peers::stdio_fixture(&[]).await;
    let pad = "x".repeat(1 << 20);
    let calls: Vec<String> = (1..=CALLS)
        .map(|id| call(id, "seen", json!({ "pad": pad })))
        .collect();

    let tg = Toolgate::in_front_of(&command, None).await;
    let (url, s) = (tg.url(), open_session(&tg.url()).await);
    let slow = {
        let (url, s) = (url.clone(), s.clone());
        let busy = json!({"seconds": 5});
        tokio::spawn(async move { post(&url, Some(&s), call(0, "slow", busy)).await })
    };
    tg.logs_when(|l| l.contains("slow call begun")).await;
    let answers =
        futures_util::future::join_all(calls.iter().map(|c| post(&url, Some(&s), c.clone()))).await;
    let mut answers: Vec<Value> = answers.iter().map(|a| a.json()).collect();
    answers.push(slow.await.unwrap().json());
    served_or_refused("serve -- CMD", answers, CALLS as usize);

    let mut g = StdioGate::start_args([vec!["stdio".into(), "--".into()], command].concat());
    g.initialize().await;
    g.send(&call(0, "slow", json!({"seconds": 5}))).await;
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    for c in &calls {
        g.send(c).await;
    }
    let mut answers = Vec::new();
    while answers.len() <= CALLS as usize {
        answers.push(g.recv().await);
    }
    served_or_refused("stdio -- CMD", answers, CALLS as usize);
}

/// Checks each answer whole: `slow`'s (id 0), and each call's, served by the fixture (the
/// methods it has seen) or refused at once because the server is not reading; at least 8 of
/// `calls` refused.
fn served_or_refused(front: &str, answers: Vec<Value>, calls: usize) {
    let text = |a: &Value| {
        a["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("")
            .to_owned()
    };
    let mut refused = 0;
    for a in &answers {
        let (id, t) = (a["id"].clone(), text(a));
        let expected = if id == 0 {
            json!({"jsonrpc": "2.0", "id": 0, "result": {"content": [{"type": "text", "text": "slow done"}]}})
        } else if t.starts_with('[') && t.contains("tools/call") {
            json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": t}]}})
        } else {
            refused += 1;
            let reason = a["result"]["_meta"]["toolgate/upstream"]["reason"]
                .as_str()
                .unwrap_or("");
            let waiting =
                "could not reach the tool server: the tool server is not reading what it is sent (";
            assert!(
                reason.starts_with(waiting) && reason.ends_with(" MiB wait for it)"),
                "{front}: {a}"
            );
            let said = format!("The tool server is unavailable: {reason}.");
            assert!(t.starts_with(&said), "{front}: {a}");
            json!({"jsonrpc": "2.0", "id": id, "result": {
                "content": [{"type": "text", "text": t}],
                "isError": true,
                "_meta": {"toolgate/upstream": {"code": "upstream_unavailable", "reason": reason}}}})
        };
        assert_eq!(a, &expected, "{front}");
    }
    assert_eq!(answers.len(), calls + 1, "{front}");
    assert!(refused >= 8, "{front}: {answers:?}");
}

/// A server of the HTTP+SSE transport that names an endpoint on another origin: nothing is
/// posted there (the posts would carry toolgate's credential to that host), and what waits on
/// the session is told why.
#[tokio::test]
async fn an_event_streams_endpoint_elsewhere_is_never_posted_to() {
    let posted = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = posted.clone();
    let elsewhere = axum::Router::new().fallback(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        async { axum::http::StatusCode::ACCEPTED }
    });
    let elsewhere = serve_on_loopback(elsewhere).await;
    let endpoint = format!("event: endpoint\ndata: http://{elsewhere}/messages?session_id=1\n\n");
    let up = event_stream_server(endpoint).await;
    let why = "named an endpoint that is not on its own origin";
    assert_eq!(
        initialize_through_event_stream(up, "").await,
        failed_for(why)
    );
    assert_eq!(posted.load(std::sync::atomic::Ordering::SeqCst), 0);
}

/// A server of the HTTP+SSE transport that never names its endpoint: every message would
/// wait on it, so the session gives up before their `limits.upstream_timeout` (at half of it,
/// at most 10 s) and says why.
#[tokio::test]
async fn an_event_stream_that_names_no_endpoint_is_given_up() {
    let up = event_stream_server(": a comment, and nothing more\n\n".into()).await;
    let limits = "[limits]\nupstream_timeout = \"1s\"\n";
    let answer = initialize_through_event_stream(up, limits).await;
    assert_eq!(answer, failed_for("named no endpoint within 500ms"));
}

/// An event of an HTTP+SSE server's stream that holds no message is dropped, and the log
/// says so as what it is (an event, not a line on a process's stdout), never with its text.
#[tokio::test]
async fn an_event_that_is_no_message_is_said_as_an_event() {
    let up = event_stream_server(
        "event: endpoint\ndata: /messages\n\ndata: not a message, secret\n\n".into(),
    )
    .await;
    let config = "upstream_transport = \"sse\"\n[limits]\nupstream_timeout = \"1s\"\n";
    let tg = Toolgate::serve(&format!("http://{up}/sse"), Some(config)).await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    post(&tg.url(), None, init.to_string()).await;
    let said = "the tool server sent an event whose data is not a JSON-RPC message; dropped";
    let logs = tg.logs_when(|l| l.contains(said)).await;
    assert!(logs.contains(said), "{logs}");
    assert!(
        !logs.contains("secret") && !logs.contains("stdout"),
        "{logs}"
    );
}

/// An HTTP+SSE server at `/sse` whose stream sends `first`, then stays open and silent.
async fn event_stream_server(first: String) -> std::net::SocketAddr {
    use futures_util::StreamExt;
    let stream = axum::Router::new().route(
        "/sse",
        axum::routing::get(move || {
            let first = futures_util::stream::once(std::future::ready(Ok::<_, std::io::Error>(
                bytes::Bytes::from(first.clone()),
            )));
            let body = axum::body::Body::from_stream(first.chain(futures_util::stream::pending()));
            async move {
                axum::response::Response::builder()
                    .header("content-type", "text/event-stream")
                    .body(body)
                    .unwrap()
            }
        }),
    );
    serve_on_loopback(stream).await
}

/// The answer to an `initialize` through toolgate in front of the HTTP+SSE server at `up`,
/// with `config` besides the transport.
async fn initialize_through_event_stream(up: std::net::SocketAddr, config: &str) -> Value {
    let config = format!("upstream_transport = \"sse\"\n{config}");
    let tg = Toolgate::serve(&format!("http://{up}/sse"), Some(&config)).await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    post(&tg.url(), None, init.to_string()).await.json()
}

/// toolgate's answer to an `initialize` whose HTTP+SSE session ended because the server `why`.
fn failed_for(why: &str) -> Value {
    let message = format!(
        "Upstream MCP server unavailable: could not reach the tool server: the tool server {why} before answering"
    );
    json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": message}})
}

/// A loop of references is measured whichever way its references are written: an
/// `$anchor`, an embedded resource's `$id`, `$recursiveRef` (2019-09) and `$dynamicRef`
/// (2020-12) lead round as a JSON pointer does. Sixteen branches leading round through one
/// member each way, and a value six levels deep: each answered at once, as a value deeper
/// than such a schema checks (`on_compile_error`).
#[tokio::test]
async fn every_kind_of_reference_is_measured() {
    let branches = |to: Value| -> Vec<Value> {
        (0..16)
            .map(|i| json!({"properties": {"x": to}, "required": [format!("k{i}")]}))
            .collect()
    };
    let schemas = [
        (
            "anchor",
            json!({"type": "object", "$anchor": "n", "anyOf": branches(json!({"$ref": "#n"}))}),
        ),
        (
            "id",
            json!({"type": "object", "$ref": "urn:toolgate:n", "$defs": {"n": {"$id": "urn:toolgate:n",
            "anyOf": branches(json!({"$ref": "urn:toolgate:n"}))}}}),
        ),
        (
            "recursive",
            json!({"$schema": "https://json-schema.org/draft/2019-09/schema", "type": "object",
            "$recursiveAnchor": true, "anyOf": branches(json!({"$recursiveRef": "#"}))}),
        ),
        (
            "dynamic",
            json!({"type": "object", "$dynamicAnchor": "n", "anyOf": branches(json!({"$dynamicRef": "#n"}))}),
        ),
    ];
    let tools: Vec<Value> = (schemas.iter())
        .map(|(name, schema)| json!({"name": name, "inputSchema": schema}))
        .collect();
    let (up, seen) = Scripted::new(tools).spawn().await;
    let config = "[validation]\non_compile_error = \"reject\"\n";
    let tg = Toolgate::serve(&up, Some(config)).await;
    let six = (0..6).fold(json!({}), |v, _| json!({"x": v}));
    for (id, (tool, _)) in schemas.iter().enumerate() {
        let before = cpu_seconds(tg.pid());
        let a = post(&tg.url(), None, call(id as i64, tool, six.clone()))
            .await
            .json();
        let used = cpu_seconds(tg.pid()) - before;
        let why = "for a value 6 levels deep: its references multiply the checks at each level of a value, and values up to 3 levels deep are checked";
        assert_eq!(a, unusable(id as i64, tool, why), "{tool}");
        assert!(used < 5.0, "{tool}: one call took {used} s of CPU");
    }
    assert!(seen.tool_calls().is_empty());
}

/// An operator's extra schema and a tool's output schema whose checks multiply with each
/// level of a value (16 branches leading round through one member) are bounded as a tool's
/// input schema is: a call nested deeper than the operator's schema can check is refused
/// (the rule is the operator's, and nesting must not pass it), and a result nested deeper
/// than its output schema can check goes unchecked, as under an output schema that does not
/// compile.
#[tokio::test]
async fn operator_rules_and_results_that_multiply_checks_are_bounded() {
    let branches: Vec<Value> = (0..16)
        .map(|i| json!({"properties": {"x": {"$ref": "#"}}, "required": [format!("k{i}")]}))
        .collect();
    let round = json!({"type": "object", "anyOf": branches});
    let deep = |levels: usize| (0..levels).fold(json!({}), |v, _| json!({"x": v}));
    let result = json!({"content": [], "structuredContent": deep(6)});
    let tools =
        vec![json!({"name": "plain", "inputSchema": {"type": "object"}, "outputSchema": round})];
    let (up, seen) = Scripted::new(tools)
        .script("plain", Script::Result(result.clone()))
        .spawn()
        .await;
    let config = format!(
        "[validation]\noutput = \"enforce\"\n[validation.tools.plain]\nextra_schema = '{round}'\n"
    );
    let tg = Toolgate::serve(&up, Some(&config)).await;
    let before = cpu_seconds(tg.pid());
    let refused = post(&tg.url(), None, call(1, "plain", deep(6)))
        .await
        .json();
    let why = "cannot be checked against the operator's schema for this tool (for a value 6 levels deep: its references multiply the checks at each level of a value, and values up to 3 levels deep are checked)";
    let text = format!(
        "Invalid arguments for tool \"plain\" (1 problem):\n- arguments: {why}\nCorrect the arguments and call the tool again."
    );
    assert_eq!(
        refused,
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": text}], "isError": true,
            "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": "plain",
                "parameter_errors": {"": why}}}}})
    );
    assert!(seen.tool_calls().is_empty());
    let shallow = json!({"x": {"k1": 1}, "k0": 1});
    let taken = post(&tg.url(), None, call(2, "plain", shallow))
        .await
        .json();
    assert_eq!(taken, json!({"jsonrpc": "2.0", "id": 2, "result": result}));
    let used = cpu_seconds(tg.pid()) - before;
    assert!(used < 5.0, "two calls took {used} s of CPU");
}

/// A schema of nested choices (nine levels of `anyOf` of 16 branches, each a `$ref` to the
/// next, a few hundred bytes) would have a call that every branch refuses checked against
/// 16⁹ subschemas: it is taken as a schema that does not compile (`on_compile_error`), said
/// in the log. One whose 16 branches each lead round to it through the same member would
/// have a value nested six levels deep checked against 16⁶: a value is checked against it
/// only three levels deep, and a deeper one follows `on_compile_error`. Each call is answered
/// at once, within the CPU a valid call takes.
#[tokio::test]
async fn nested_choices_cannot_make_a_call_cost_a_power_of_their_branches() {
    let mut defs = serde_json::Map::new();
    for level in 0..9 {
        let next = json!({"$ref": format!("#/$defs/d{}", level + 1)});
        defs.insert(format!("d{level}"), json!({"anyOf": vec![next; 16]}));
    }
    defs.insert("d9".into(), json!({"type": "object", "required": ["q"]}));
    let nested = json!({"type": "object", "$defs": defs, "allOf": [{"$ref": "#/$defs/d0"}]});
    let branches: Vec<Value> = (0..16)
        .map(|i| json!({"properties": {"x": {"$ref": "#"}}, "required": [format!("k{i}")]}))
        .collect();
    let round = json!({"type": "object", "anyOf": branches});
    let deep = |levels: usize| (0..levels).fold(json!({}), |v, _| json!({"x": v}));
    let tools = vec![
        json!({"name": "nested", "inputSchema": nested}),
        json!({"name": "round", "inputSchema": round}),
    ];
    let (up, seen) = Scripted::new(tools).spawn().await;
    let config = "[validation]\non_compile_error = \"reject\"\n";
    let tg = Toolgate::serve(&up, Some(config)).await;
    let unusable = |tool: &str, why: &str| unusable(0, tool, why)["result"].clone();
    let never = "its references and choices unfold into more than 1000000 subschemas, too many to check a call against";
    let six = "for a value 6 levels deep: its references multiply the checks at each level of a value, and values up to 3 levels deep are checked";
    let cases = [
        ("nested", json!({"a": 1}), unusable("nested", never)),
        ("round", deep(6), unusable("round", six)),
    ];
    for (id, (tool, args, result)) in cases.into_iter().enumerate() {
        let before = cpu_seconds(tg.pid());
        let a = post(&tg.url(), None, call(id as i64, tool, args))
            .await
            .json();
        let used = cpu_seconds(tg.pid()) - before;
        assert_eq!(a, json!({"jsonrpc": "2.0", "id": id, "result": result}));
        assert!(used < 5.0, "{tool}: one call took {used} s of CPU");
    }
    // Three levels deep, a value is checked: each level lacks a `k` member.
    let before = cpu_seconds(tg.pid());
    let a = post(&tg.url(), None, call(2, "round", deep(3)))
        .await
        .json();
    let used = cpu_seconds(tg.pid()) - before;
    let why = r#"does not match any of the accepted forms, got {"x":{"x":{"x":{}}}}"#;
    let text = format!(
        "Invalid arguments for tool \"round\" (1 problem):\n- arguments: {why}\nCorrect the arguments and call the tool again."
    );
    let refused = json!({"jsonrpc": "2.0", "id": 2, "result": {
        "content": [{"type": "text", "text": text}], "isError": true,
        "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": "round",
            "parameter_errors": {"": why}}}}});
    assert_eq!(a, refused);
    assert!(
        used < 5.0,
        "round, three levels: one call took {used} s of CPU"
    );
    assert!(seen.tool_calls().is_empty());
    let said = "unfold into more than 1000000 subschemas";
    assert!(tg.logs_when(|l| l.contains(said)).await.contains(said));
}

/// The bytes toolgate holds for requests, of their bodies (`part` `body`) or of the answers
/// it read whole (`answer`), read from its gauge.
async fn request_bytes_held(tg: &Toolgate, part: &str) -> u64 {
    gauge(tg, &held_series(part)).await
}

/// The series of [`request_bytes_held`].
fn held_series(part: &str) -> String {
    format!("toolgate_request_bytes_held{{part=\"{part}\"}}")
}

/// A gauge read every 50 ms until `done` holds for its value, for at most 5 s; its last value.
async fn gauge_until(tg: &Toolgate, series: &str, done: impl Fn(u64) -> bool) -> u64 {
    let mut value = gauge(tg, series).await;
    for _ in 0..100 {
        if done(value) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        value = gauge(tg, series).await;
    }
    value
}

/// The answers waiting for room to be held.
const WAITING: &str = "toolgate_answers_waiting_for_room";

/// A gauge's value, by its series as `/metrics` writes it.
async fn gauge(tg: &Toolgate, series: &str) -> u64 {
    let metrics = tg.admin_get("/metrics").await.text();
    let series = format!("{series} ");
    (metrics.lines())
        .find_map(|l| l.strip_prefix(series.as_str()))
        .and_then(|b| b.parse().ok())
        .unwrap_or_else(|| panic!("{series}in /metrics"))
}

/// A request body that comes as the test sends it.
type Streamed = http_body_util::StreamBody<
    futures_util::stream::BoxStream<
        'static,
        Result<http_body::Frame<bytes::Bytes>, std::convert::Infallible>,
    >,
>;

/// A request on one HTTP/2 stream whose body comes as the test sends it, `declared` long when
/// given; the status of its answer once it comes.
fn streamed_post(
    send: &hyper::client::conn::http2::SendRequest<Streamed>,
    url: &str,
    declared: Option<usize>,
) -> Open {
    use futures_util::StreamExt;
    let (tx, rx) = tokio::sync::mpsc::channel::<bytes::Bytes>(4);
    let frames = futures_util::stream::unfold(rx, |mut rx| async move {
        let data = rx.recv().await?;
        Some((Ok(http_body::Frame::data(data)), rx))
    })
    .boxed();
    let mut req = http::Request::post(url)
        .header("content-type", "application/json")
        .header("accept", ACCEPT);
    if let Some(n) = declared {
        req = req.header("content-length", n);
    }
    let req = req.body(http_body_util::StreamBody::new(frames)).unwrap();
    let mut send = send.clone();
    let answer = tokio::spawn(async move {
        match send.send_request(req).await {
            Ok(resp) => resp.status().as_u16(),
            Err(_) => 0,
        }
    });
    (tx, answer)
}

/// A request on an HTTP/2 stream, its body still to send, and its answer's status.
type Open = (
    tokio::sync::mpsc::Sender<bytes::Bytes>,
    tokio::task::JoinHandle<u16>,
);

/// Sends each stream's body up to near its `len`, one stream after another, and keeps in
/// `held` those whose bytes toolgate counted (`toolgate_request_bytes_held`); the count of
/// the others, each refused with 503 once toolgate had no room for what it read of them.
/// (What the test has sent runs ahead of what toolgate has read by the buffers between.)
async fn hold_or_refuse(
    tg: &Toolgate,
    streams: Vec<Open>,
    len: usize,
    held: &mut Vec<Open>,
) -> usize {
    use std::time::Duration;
    let chunk = bytes::Bytes::from(vec![b' '; 62_500]);
    let near = len - 10 * chunk.len();
    let mut refused = 0;
    for (tx, answer) in streams {
        let mut sent = 0;
        while sent < near && !answer.is_finished() {
            match tokio::time::timeout(Duration::from_secs(2), tx.send(chunk.clone())).await {
                Ok(Ok(())) => sent += chunk.len(),
                _ => break,
            }
        }
        let counted = (held.len() + 1) * near;
        let mut is_held = false;
        for _ in 0..500 {
            if answer.is_finished() {
                break;
            }
            if request_bytes_held(tg, "body").await >= counted as u64 {
                is_held = true;
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        if is_held {
            held.push((tx, answer));
            continue;
        }
        let status = tokio::time::timeout(Duration::from_secs(10), answer).await;
        assert_eq!(status.expect("an answer").unwrap(), 503);
        refused += 1;
    }
    refused
}

/// A client can send many bodies at once (one HTTP/2 connection, 200 streams) and each is
/// held from its first byte until its request is answered: toolgate holds at most
/// `limits.max_request_bytes_in_flight` of them together, counted as they come (bodies that
/// declare their length and send nothing hold nothing), refuses the others with 503 (at once,
/// unread, one that declares more than the room left), keeps serving calls that fit, and
/// gives the bytes back when their requests go.
#[tokio::test]
async fn request_bodies_held_at_once_are_bounded() {
    let (up, _) = Scripted::new(vec![open_tool("echo")]).spawn().await;
    // Room for four bodies of 4 MB.
    let config = "[limits]\nmax_request_bytes_in_flight = 16777216\n";
    let tg = Toolgate::serve(&up, Some(config)).await;
    let before = peak_mib(tg.pid());
    let stream = tokio::net::TcpStream::connect(tg.addr).await.unwrap();
    let (send, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(stream),
    )
    .await
    .unwrap();
    let conn = tokio::spawn(conn);
    let url = tg.url();
    // With room, a call of no declared length is served.
    let (tx, answer) = streamed_post(&send, &url, None);
    tx.send(call(1, "echo", json!({})).into()).await.unwrap();
    drop(tx);
    assert_eq!(answer.await.unwrap(), 200);
    const BODY: usize = 4_000_000;
    // 48 bodies that declare their length and never end, then (once those are held or
    // refused) 4 that declare none.
    let mut held = Vec::new();
    let declared: Vec<_> = (0..48)
        .map(|_| streamed_post(&send, &url, Some(BODY)))
        .collect();
    // Their heads alone hold nothing: another client is served.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(request_bytes_held(&tg, "body").await, 0);
    let a = post(&url, None, call(2, "echo", json!({}))).await.json();
    let echoed = json!({"content": [{"type": "text", "text": "no script for echo"}]});
    assert_eq!(a, json!({"jsonrpc": "2.0", "id": 2, "result": echoed}));
    let mut refused = hold_or_refuse(&tg, declared, BODY, &mut held).await;
    let undeclared = (0..4).map(|_| streamed_post(&send, &url, None));
    refused += hold_or_refuse(&tg, undeclared.collect(), BODY, &mut held).await;
    assert_eq!(
        (held.len(), refused),
        (4, 48),
        "four bodies held, the rest refused"
    );
    // What was read of them, nearly all they declared, within the budget.
    let read = request_bytes_held(&tg, "body").await;
    assert!(
        (13_500_000..=16_777_216).contains(&read),
        "{read} bytes held"
    );
    let grown = peak_mib(tg.pid()) - before;
    assert!(
        grown < 64,
        "peak RSS grew {grown} MiB for 16 MB of bodies held"
    );

    // Over HTTP/1.1 alike: a body that declares more than the room left is refused before
    // it is sent (only its head is).
    let mut h1 = tokio::net::TcpStream::connect(tg.addr).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\naccept: {ACCEPT}\r\ncontent-length: {BODY}\r\n\r\n",
        tg.addr
    );
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    h1.write_all(head.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let read = h1.read_to_end(&mut answer);
    tokio::time::timeout(std::time::Duration::from_secs(10), read)
        .await
        .expect("answered before the body")
        .unwrap();
    let answer = String::from_utf8(answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 503"), "{head}");
    assert!(head.to_lowercase().contains("retry-after: 1"), "{head}");
    assert_eq!(
        serde_json::from_str::<Value>(body).unwrap(),
        json!({"jsonrpc": "2.0", "error": {"code": -32603, "message": "Server busy: toolgate holds as many bytes of requests as it may at once; try again shortly"}})
    );
    // A call that fits is served.
    let a = post(&url, None, call(1, "echo", json!({}))).await.json();
    assert_eq!(a, json!({"jsonrpc": "2.0", "id": 1, "result": echoed}));

    drop(held);
    conn.abort();
    let left = gauge_until(&tg, &held_series("body"), |held| held == 0).await;
    assert_eq!(left, 0, "the bytes are given back when their requests go");
}

/// Where an answer of 2 MB comes from, and how its client asks for it.
#[derive(Clone, Copy, Debug)]
enum AnswerFrom {
    /// An HTTP server (`serve --upstream`): its answer is read whole for the rules.
    HttpServer,
    /// A stdio server's child for the client's session (`serve -- CMD`), answering on one
    /// line; `streamed`: the call asks for its progress, and is answered as an SSE stream.
    SessionChild { streamed: bool },
    /// The child `serve -- CMD` shares among 2026-07-28 clients, under toolgate's ids.
    SharedChild { streamed: bool },
}

impl AnswerFrom {
    const ALL: [AnswerFrom; 5] = [
        AnswerFrom::HttpServer,
        AnswerFrom::SessionChild { streamed: false },
        AnswerFrom::SessionChild { streamed: true },
        AnswerFrom::SharedChild { streamed: false },
        AnswerFrom::SharedChild { streamed: true },
    ];

    /// toolgate in front of a server whose `big` answers 2 MB, with `config`; the headers
    /// of its calls.
    async fn start(self, config: &str) -> (Toolgate, Vec<(String, String)>) {
        let mut headers = vec![
            ("content-type".into(), "application/json".into()),
            ("accept".into(), ACCEPT.into()),
        ];
        if let AnswerFrom::HttpServer = self {
            let text = "x".repeat(2_000_000);
            let (up, _) = Scripted::new(vec![open_tool("big")])
                .script(
                    "big",
                    Script::Result(json!({"content": [{"type": "text", "text": text}]})),
                )
                .spawn()
                .await;
            return (Toolgate::serve(&up, Some(config)).await, headers);
        }
        let command = peers::stdio_fixture(&[]).await;
        let tg = Toolgate::in_front_of(&command, Some(config)).await;
        match self {
            AnswerFrom::SessionChild { .. } => {
                headers.push(("mcp-session-id".into(), open_session(&tg.url()).await));
                headers.push(("mcp-protocol-version".into(), "2025-11-25".into()));
            }
            _ => headers.extend([
                ("mcp-protocol-version".into(), "2026-07-28".into()),
                ("mcp-method".into(), "tools/call".into()),
                ("mcp-name".into(), "big".into()),
            ]),
        }
        (tg, headers)
    }

    /// A call for 2 MB under `id`.
    fn call(self, id: i64) -> String {
        self.call_for(id, 2_000_000)
    }

    /// A call for `size` bytes (a stdio server's; an HTTP server's answer is 2 MB).
    fn call_for(self, id: i64, size: usize) -> String {
        let mut params = json!({"name": "big", "arguments": {"size": size}});
        let mut meta = match self {
            AnswerFrom::SharedChild { .. } => common::modes::modern_meta(),
            _ => json!({}),
        };
        if let AnswerFrom::SessionChild { streamed: true }
        | AnswerFrom::SharedChild { streamed: true } = self
        {
            meta["progressToken"] = json!(id);
        }
        params["_meta"] = meta;
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string()
    }
}

/// A client that asks for many large answers and reads none of them holds only its share of
/// what toolgate may hold, whatever kind of server answers: each answer is counted until it
/// has gone to its client, and a child's output waits in its pipe meanwhile. Another
/// client's answer waits for room, up to the time a server may take to answer, then is
/// answered as one that could not be passed on; once the first client goes, answers come
/// whole again.
#[tokio::test]
async fn answers_a_client_does_not_read_hold_at_most_the_budget() {
    // Room for four answers of 2 MB.
    let config = "[limits]\nmax_response_bytes = 4194304\nmax_request_bytes_in_flight = 8388608\nupstream_timeout = \"3s\"\n";
    for from in AnswerFrom::ALL {
        let (tg, headers) = from.start(config).await;
        unread_answers_hold_at_most_the_budget(&tg, &headers, from).await;
    }
}

async fn unread_answers_hold_at_most_the_budget(
    tg: &Toolgate,
    headers: &[(String, String)],
    from: AnswerFrom,
) {
    let before = peak_mib(tg.pid());
    let (send, conn) = http2_giving_no_window(tg).await;
    let url = tg.url();
    // 20 calls whose answers are never read.
    let mut unread = Vec::new();
    for id in 1..=20 {
        let mut req = http::Request::post(&url);
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let body = http_body_util::Full::new(bytes::Bytes::from(from.call(id)));
        let req = req.body(body).unwrap();
        let mut send = send.clone();
        unread.push(tokio::spawn(async move { send.send_request(req).await }));
    }
    let held = gauge_until(tg, &held_series("answer"), |held| held >= 8_000_000).await;
    assert!(
        (8_000_000..=8_388_608).contains(&held),
        "{from:?}: {held} bytes held"
    );
    let waiting = tokio::spawn({
        let (url, body) = (url.clone(), from.call(99));
        let headers = headers.to_vec();
        async move {
            let headers: Vec<_> = (headers.iter().map(|(k, v)| (k.as_str(), v.as_str()))).collect();
            request(http::Method::POST, &url, &headers, body)
                .await
                .answer()
        }
    });
    let answers_waiting = gauge_until(tg, WAITING, |waiting| waiting >= 1).await;
    assert!(
        !waiting.is_finished(),
        "{from:?}: the answer waits for room"
    );
    assert!(request_bytes_held(tg, "answer").await <= 8_388_608);
    assert!(
        answers_waiting >= 1,
        "{from:?}: {answers_waiting} said waiting"
    );
    let grown = peak_mib(tg.pid()) - before;
    assert!(
        grown < 48,
        "{from:?}: peak RSS grew {grown} MiB for 8 MB of answers held"
    );

    // Past the time a server may take to answer, the call is answered without it.
    let no_room = tokio::time::timeout(std::time::Duration::from_secs(30), waiting)
        .await
        .expect("an answer within the upstream timeout")
        .unwrap();
    let reason = "the gateway had no room for the tool server's answer: none within 3s: it holds as many answers for clients as it may (limits.max_request_bytes_in_flight)";
    let text = format!(
        "The tool server's answer could not be passed on: {reason}. The gateway is busy with other clients' answers; retrying later may help."
    );
    let mut expected = json!({"jsonrpc": "2.0", "id": 99, "result": {
        "_meta": {"toolgate/upstream": {"code": "answer_over_limit", "reason": reason}},
        "content": [{"type": "text", "text": text}], "isError": true}});
    if let AnswerFrom::SharedChild { .. } = from {
        expected["result"]["resultType"] = json!("complete");
    }
    assert_eq!(no_room, expected, "{from:?}");
    assert!(tg.logs().contains("kind=\"no_room\""), "{from:?}");

    // The client that read nothing goes: its answers' room is given back.
    conn.abort();
    drop(unread);
    let headers: Vec<_> = (headers.iter().map(|(k, v)| (k.as_str(), v.as_str()))).collect();
    let a = request(http::Method::POST, &url, &headers, from.call(100))
        .await
        .answer();
    let mut whole = json!({"jsonrpc": "2.0", "id": 100,
        "result": {"content": [{"type": "text", "text": "x".repeat(2_000_000)}]}});
    if let AnswerFrom::SharedChild { .. } = from {
        whole["result"]["resultType"] = json!("complete");
    }
    assert!(a == whole, "{from:?}: the answer whole, under its own id");
    let answers_waiting = gauge_until(tg, WAITING, |waiting| waiting == 0).await;
    assert_eq!(
        answers_waiting, 0,
        "{from:?}: none waits once the room is given back"
    );
}

/// A client that takes nothing of its answers is closed `limits.send_timeout` after it
/// stopped (at most twice that), and the room its answers held is given back, without the
/// client going: over HTTP/2, a client that reads its connection but opens no window for
/// its answers; over HTTP/1.1, one that reads nothing. Another client is then answered whole.
#[tokio::test]
async fn a_client_that_takes_nothing_is_closed_and_its_answers_room_given_back() {
    let config = "[limits]\nmax_response_bytes = 8388608\nmax_request_bytes_in_flight = 16777216\nsend_timeout = \"1s\"\n";
    for from in [
        AnswerFrom::HttpServer,
        AnswerFrom::SessionChild { streamed: false },
        AnswerFrom::SessionChild { streamed: true },
    ] {
        let (tg, headers) = from.start(config).await;
        let started = std::time::Instant::now();
        let conn = http2_client_taking_nothing(&tg, &headers, from).await;
        let given_back = answers_room_given_back(&tg, 2_000_000).await;
        assert!(given_back, "{from:?}: over HTTP/2");
        let after = started.elapsed();
        assert!(
            after >= std::time::Duration::from_secs(1),
            "{from:?}: {after:?}"
        );
        let closed = tokio::time::timeout(std::time::Duration::from_secs(10), conn).await;
        assert!(closed.is_ok(), "{from:?}: toolgate closed the connection");
        answered_whole(&tg, &headers, from).await;
    }
    // Over HTTP/1.1 an answer must outgrow the system's socket buffers to wait in toolgate.
    let size = past_socket_buffers();
    let line = (size + 1_000_000).next_power_of_two();
    let config = format!(
        "[limits]\nmax_response_bytes = {line}\nmax_request_bytes_in_flight = {}\nsend_timeout = \"1s\"\n",
        2 * line
    );
    let from = AnswerFrom::SessionChild { streamed: false };
    let (tg, headers) = from.start(&config).await;
    let mut socket = http1_client_taking_nothing(&tg, &headers, from.call_for(1, size)).await;
    let given_back = answers_room_given_back(&tg, size as u64).await;
    assert!(given_back, "over HTTP/1.1, {size} bytes");
    let mut rest = Vec::new();
    let read = tokio::io::AsyncReadExt::read_to_end(&mut socket, &mut rest);
    let ended = tokio::time::timeout(std::time::Duration::from_secs(10), read).await;
    assert!(ended.is_ok(), "toolgate closed the connection");
    assert!(
        rest.len() < size,
        "the answer was cut: {} bytes",
        rest.len()
    );
    answered_whole(&tg, &headers, from).await;
}

/// More than the system lets a socket hold for sending (`tcp_wmem`'s largest), so that an
/// answer to a client that reads nothing waits in toolgate, not in the system.
fn past_socket_buffers() -> usize {
    let wmem = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_wmem").unwrap_or_default();
    let largest = wmem.split_whitespace().nth(2).and_then(|m| m.parse().ok());
    largest.unwrap_or(4 << 20) + 2_000_000
}

/// An HTTP/2 connection whose client opens no window for answers it does not read (64 KiB
/// a stream, 1 MiB in all): its sender, and its connection's task.
async fn http2_giving_no_window(
    tg: &Toolgate,
) -> (
    hyper::client::conn::http2::SendRequest<http_body_util::Full<bytes::Bytes>>,
    tokio::task::JoinHandle<Result<(), hyper::Error>>,
) {
    let stream = tokio::net::TcpStream::connect(tg.addr).await.unwrap();
    let (send, conn) =
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .initial_stream_window_size(65_535)
            .initial_connection_window_size(1 << 20)
            .handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    (send, tokio::spawn(conn))
}

/// Four calls on one HTTP/2 connection whose answers get no window; the connection's task.
async fn http2_client_taking_nothing(
    tg: &Toolgate,
    headers: &[(String, String)],
    from: AnswerFrom,
) -> tokio::task::JoinHandle<Result<(), hyper::Error>> {
    let (send, conn) = http2_giving_no_window(tg).await;
    for id in 1..=4 {
        let mut req = http::Request::post(tg.url());
        for (k, v) in headers {
            req = req.header(k, v);
        }
        let body = http_body_util::Full::new(bytes::Bytes::from(from.call(id)));
        let mut send = send.clone();
        let req = req.body(body).unwrap();
        // The answers' bodies are never read.
        tokio::spawn(async move {
            let answer = send.send_request(req).await;
            std::future::pending::<()>().await;
            drop(answer);
        });
    }
    conn
}

/// A call over HTTP/1.1 from a socket that reads nothing (and takes little into its buffer).
async fn http1_client_taking_nothing(
    tg: &Toolgate,
    headers: &[(String, String)],
    call: String,
) -> tokio::net::TcpStream {
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(tg.addr).await.unwrap();
    let mut head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\ncontent-length: {}\r\n",
        tg.addr,
        call.len()
    );
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    let request = format!("{head}\r\n{call}");
    tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes())
        .await
        .unwrap();
    stream
}

/// Whether the answers' room, once at least `held` bytes, is all given back within 30 s.
async fn answers_room_given_back(tg: &Toolgate, held: u64) -> bool {
    let mut seen = Vec::new();
    for _ in 0..600 {
        let now = request_bytes_held(tg, "answer").await;
        if seen.last() != Some(&now) {
            seen.push(now);
        }
        if now == 0 && seen.iter().any(|&h| h >= held) {
            return true;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    eprintln!("answer bytes held, as they changed: {seen:?}");
    false
}

/// Another client's call is answered whole, under its own id.
async fn answered_whole(tg: &Toolgate, headers: &[(String, String)], from: AnswerFrom) {
    let headers: Vec<_> = (headers.iter().map(|(k, v)| (k.as_str(), v.as_str()))).collect();
    let reply = request(http::Method::POST, &tg.url(), &headers, from.call(100)).await;
    let whole = json!({"jsonrpc": "2.0", "id": 100,
        "result": {"content": [{"type": "text", "text": "x".repeat(2_000_000)}]}});
    let text = reply.text();
    let start: String = text.chars().take(300).collect();
    assert!(
        reply.answer() == whole,
        "{from:?}: the answer whole, under its own id; came {} {} bytes: {start}",
        reply.status,
        text.len()
    );
}

/// Request bodies and answers are counted apart: requests whose bodies fill the budget still
/// get their answers, which never wait for room their own bodies hold.
#[tokio::test]
async fn answers_never_wait_for_room_their_requests_hold() {
    let (up, _) = Scripted::new(vec![open_tool("upload")])
        .script("upload", Script::Result(json!({"content": []})))
        .spawn()
        .await;
    // Room for two bodies of the largest size (1 MiB), and a short wait for an answer's room.
    let config = "[limits]\nmax_body_bytes = 1048576\nmax_response_bytes = 1048576\nmax_request_bytes_in_flight = 2097152\nupstream_timeout = \"3s\"\n";
    let tg = Toolgate::serve(&up, Some(config)).await;
    let url = tg.url();
    let full = |id: i64| {
        let head = format!(
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"upload","arguments":{{}}}}"#
        );
        let pad = 1024 * 1024 - head.len() - 1;
        format!("{head}{}}}", " ".repeat(pad))
    };
    let (a, b) = tokio::join!(post(&url, None, full(1)), post(&url, None, full(2)));
    for (id, a) in [(1, a.json()), (2, b.json())] {
        assert_eq!(
            a,
            json!({"jsonrpc": "2.0", "id": id, "result": {"content": []}})
        );
    }
}

/// An answer whose server sends its head long before its body (it answers once the tool has
/// run) holds none of the room for answers while it waits: with room for two answers of
/// unknown length and four such answers on their way, another call is answered at once,
/// before any of them. Through every front to an HTTP server.
#[tokio::test]
async fn an_answer_whose_body_comes_late_holds_no_room_meanwhile() {
    let late = json!({"content": [{"type": "text", "text": "late"}]});
    let quick = json!({"content": [{"type": "text", "text": "quick"}]});
    let (up, server) = Scripted::new(vec![open_tool("late"), open_tool("quick")])
        .script(
            "late",
            Script::HeadThenLater(std::time::Duration::from_secs(5), late.clone()),
        )
        .script("quick", Script::Result(quick.clone()))
        .spawn()
        .await;
    let config = "[limits]\nmax_response_bytes = 1048576\nmax_request_bytes_in_flight = 2097152\n";
    for mode in [Mode::ServeUpstream, Mode::StdioUpstream, Mode::Layer] {
        let front = Front::start_with(mode, &up, &[], Some(config)).await;
        let started = server.tool_calls().len();
        let heads_sent = || async {
            while server.tool_calls().len() < started + 4 {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        };
        let answered =
            |id: i64, result: &Value| json!({"jsonrpc": "2.0", "id": id, "result": result});
        match front {
            Front::Http { tg, .. } => {
                let url = tg.url();
                let lates: Vec<_> = (1..=4)
                    .map(|id| tokio::spawn(post_owned(url.clone(), call(id, "late", json!({})))))
                    .collect();
                heads_sent().await;
                let first = post(&url, None, call(9, "quick", json!({}))).await.json();
                assert_eq!(first, answered(9, &quick), "{mode}");
                assert!(
                    lates.iter().all(|l| !l.is_finished()),
                    "{mode}: quick first"
                );
                for (id, l) in (1..=4).zip(lates) {
                    assert_eq!(l.await.unwrap(), answered(id, &late), "{mode}");
                }
            }
            Front::Stdio { mut g, .. } => {
                g.initialize().await;
                for id in 1..=4 {
                    g.send(&call(id, "late", json!({}))).await;
                }
                heads_sent().await;
                g.send(&call(9, "quick", json!({}))).await;
                assert_eq!(g.recv().await, answered(9, &quick), "{mode}: quick first");
                let mut rest: Vec<Value> = Vec::new();
                for _ in 1..=4 {
                    rest.push(g.recv().await);
                }
                rest.sort_by_key(|a| a["id"].as_i64());
                let expected: Vec<Value> = (1..=4).map(|id| answered(id, &late)).collect();
                assert_eq!(rest, expected, "{mode}");
            }
        }
    }
}

async fn post_owned(url: String, body: String) -> Value {
    post(&url, None, body).await.json()
}

/// Over HTTP/2 one client connection carries up to 200 calls at once, each of which needs a
/// connection of its own to an HTTP/1 server: calls past what a quarter of toolgate's
/// descriptor limit allows are refused unsent (`gateway_busy`), so that the rest stays for
/// the admin listener's probes and new clients, which are answered at once.
#[tokio::test]
async fn calls_at_once_over_http2_cannot_take_the_descriptors_probes_need() {
    const SLOW: std::time::Duration = std::time::Duration::from_secs(3);
    let (up, server) = Scripted::new(vec![open_tool("slow"), open_tool("quick")])
        .script("slow", Script::Slow(SLOW, json!({"content": []})))
        .script("quick", Script::Result(json!({"content": []})))
        .spawn()
        .await;
    // Soft and hard alike: toolgate's own raise leaves 256.
    let launcher: Vec<String> = ["sh", "-c", "ulimit -n 256 && exec \"$0\" \"$@\""]
        .map(String::from)
        .into();
    let args = ["serve", "--upstream", &up, "--listen", "127.0.0.1:0"]
        .into_iter()
        .chain(["--admin-listen", "127.0.0.1:0"])
        .map(String::from)
        .collect();
    let tg = Toolgate::start_raw_through(&launcher, args, &[]).await;
    const PLACES: usize = 256 / 4;
    const CALLS: i64 = 380;
    let mut sends = Vec::new();
    for _ in 0..2 {
        let stream = tokio::net::TcpStream::connect(tg.addr).await.unwrap();
        let io = hyper_util::rt::TokioIo::new(stream);
        let exec = hyper_util::rt::TokioExecutor::new();
        let (send, conn) = hyper::client::conn::http2::handshake(exec, io)
            .await
            .unwrap();
        tokio::spawn(conn);
        sends.push(send);
    }
    let calls: Vec<_> = (0..CALLS)
        .map(|id| {
            let mut send = sends[id as usize % 2].clone();
            let req = http::Request::post(tg.url())
                .header("content-type", "application/json")
                .header("accept", ACCEPT)
                .body(http_body_util::Full::new(bytes::Bytes::from(call(
                    id,
                    "slow",
                    json!({}),
                ))))
                .unwrap();
            tokio::spawn(async move {
                use http_body_util::BodyExt;
                let answer = send.send_request(req).await.unwrap();
                let body = answer.into_body().collect().await.unwrap().to_bytes();
                serde_json::from_slice::<Value>(&body).unwrap()
            })
        })
        .collect();
    let taken = || server.tool_calls().len() == PLACES;
    assert!(common::processes::wait_for(taken).await);

    // Meanwhile: the probes and a new client are answered, the call refused unsent.
    let descriptors = std::fs::read_dir(format!("/proc/{}/fd", tg.pid()))
        .unwrap()
        .count();
    assert!(descriptors < 128, "{descriptors} descriptors held");
    assert_eq!(tg.admin_get("/healthz").await.status, 200);
    let m = tg.admin_get("/metrics").await.text();
    for line in [
        format!("toolgate_upstream_connections {PLACES}\n"),
        format!("toolgate_upstream_connections_max {PLACES}\n"),
    ] {
        assert!(m.contains(&line), "{line} in\n{m}");
    }
    let busy = |id: i64| {
        let reason = format!(
            "the gateway holds {PLACES} connections to tool servers, as many as its \
             descriptor limit leaves them; the request was not sent"
        );
        json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text":
                format!("The gateway is busy: {reason}. Retrying in a moment may help.")}],
            "isError": true,
            "_meta": {"toolgate/upstream": {"code": "gateway_busy", "reason": reason}}}})
    };
    let a = post(&tg.url(), None, call(CALLS, "quick", json!({}))).await;
    assert_eq!(a.json(), busy(CALLS));

    let mut answered = 0;
    for (id, c) in calls.into_iter().enumerate() {
        let a = c.await.unwrap();
        if a["result"] == json!({"content": []}) {
            answered += 1;
        } else {
            assert_eq!(a, busy(id as i64));
        }
    }
    assert_eq!(answered, PLACES, "each place carried one call");
    assert_eq!(
        server.tool_calls().len(),
        PLACES,
        "no refused call was sent"
    );
    // Their places given back, a call is served again.
    let a = post(&tg.url(), None, call(CALLS + 1, "quick", json!({}))).await;
    assert_eq!(a.json()["result"], json!({"content": []}), "{}", a.text());
    // Counted as the gateway's own refusals, each one and the new client's: none is the
    // server's failure.
    let refused = CALLS as usize - PLACES;
    let lines = [
        format!(
            "toolgate_tool_calls_total{{upstream=\"default\",tool=\"slow\",outcome=\"gateway_busy\"}} {refused}"
        ),
        "toolgate_tool_calls_total{upstream=\"default\",tool=\"quick\",outcome=\"gateway_busy\"} 1"
            .to_string(),
        format!(
            "toolgate_requests_total{{upstream=\"default\",method=\"tools/call\",outcome=\"gateway_busy\"}} {}",
            refused + 1
        ),
    ];
    // A request is counted once its answer has gone out, which a client on a loaded machine
    // may have read first.
    let mut m = String::new();
    for _ in 0..100 {
        m = tg.admin_get("/metrics").await.text();
        if lines.iter().all(|line| m.contains(&format!("{line}\n"))) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    for line in lines {
        assert!(m.contains(&format!("{line}\n")), "{line} in\n{m}");
    }
    assert!(
        !m.contains("upstream_error"),
        "no failure of the server's in\n{m}"
    );

    // The stdio front to the same server holds to the same bound: one client's lines in
    // flight at once (up to `stdio.max_in_flight`) each need a connection too.
    let args = ["stdio", "--upstream", &up].map(String::from).into();
    let mut g = StdioGate::start_through(&launcher, args, &[]);
    g.initialize().await;
    let sent_before = server.tool_calls().len();
    const LINES: i64 = 100;
    for id in 0..LINES {
        g.send(&call(id, "slow", json!({}))).await;
    }
    let mut served = 0;
    for _ in 0..LINES {
        let a = g.recv().await;
        let id = a["id"].as_i64().unwrap();
        if a["result"] == json!({"content": []}) {
            served += 1;
        } else {
            assert_eq!(a, busy(id));
        }
    }
    assert_eq!(served, PLACES, "each place carried one call");
    assert_eq!(
        server.tool_calls().len() - sent_before,
        served,
        "the rest unsent"
    );
}
