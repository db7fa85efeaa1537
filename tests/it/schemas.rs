//! What the schema lets through and what it cannot say, in front of real servers:
//! misspelt and undeclared arguments (`validation.undeclared_properties`), tools whose
//! schemas no client can use (`validation.invalid_tool_schemas`), and agreement with an SDK's
//! own check of arguments. docs/contract.md §1, §5 and §7.

use crate::common;
use common::peers::peers;
use common::scripted::{Script, Scripted, open_tool};
use common::stdio_gate::StdioGate;
use common::*;
use http::Method;
use serde_json::{Value, json};

fn tool_call(id: i64, tool: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}})
}

// ---- misspelt and undeclared arguments ----

#[tokio::test]
async fn a_misspelt_optional_argument_never_reaches_a_python_sdk_server() {
    let (_server, port) = python_http_server(0).await;
    let url = format!("http://127.0.0.1:{port}/mcp");
    for (policy, verbose_passes) in [("reject_typos", true), ("reject", false)] {
        let config = format!("[validation]\nundeclared_properties = \"{policy}\"\n");
        let tg = Toolgate::serve(&url, Some(&config)).await;
        let session = open_session(&tg.url()).await;
        let ask = |id, args: Value| {
            let (url, session) = (tg.url(), session.clone());
            async move {
                post(
                    &url,
                    Some(&session),
                    tool_call(id, "list_files", args).to_string(),
                )
                .await
                .answer()
            }
        };
        let a = ask(1, json!({"path": "/notes", "recursiv": true})).await;
        assert_eq!(a["result"]["isError"], true, "{policy}: {a}");
        assert_eq!(
            result_text(&a),
            "Invalid arguments for tool \"list_files\" (1 problem):\n- recursiv: is not a parameter of this tool; did you mean \"recursive\"? (recursive: Descend into subfolders too)\nCorrect the arguments and call the tool again."
        );
        assert_eq!(
            a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
            json!({"/recursiv": "is not a parameter of this tool; did you mean \"recursive\"? (recursive: Descend into subfolders too)"})
        );
        // The SDK would have run the tool with its default; spelt right, it is honoured.
        let a = ask(2, json!({"path": "/notes", "recursive": true})).await;
        assert_eq!(
            a["result"]["content"][0]["text"], "listed /notes recursive=True",
            "{a}"
        );
        // A name far from every parameter is the schema's business in reject_typos.
        let a = ask(3, json!({"path": "/notes", "verbose": true})).await;
        if verbose_passes {
            assert_eq!(
                a["result"]["content"][0]["text"], "listed /notes recursive=False",
                "{a}"
            );
        } else {
            assert_eq!(a["result"]["isError"], true, "{a}");
            assert!(
                result_text(&a).contains(
                    "- verbose: is not a parameter of this tool; accepted: path, recursive"
                ),
                "{}",
                result_text(&a)
            );
        }
    }
}

#[tokio::test]
async fn a_misspelt_optional_argument_never_reaches_server_everything_over_stdio() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let command = vec![p.server_everything.display().to_string(), "stdio".into()];
    let (mut g, _f) = StdioGate::start(&command, None);
    g.initialize().await;
    let a = g
        .ask_past_notifications(tool_call(
            1,
            "get-annotated-message",
            json!({"messageType": "success", "includImage": true}),
        ))
        .await;
    assert_eq!(a["result"]["isError"], true, "{a}");
    let text = result_text(&a);
    assert!(
        text.contains(
            "- includImage: is not a parameter of this tool; did you mean \"includeImage\"?"
        ),
        "{text}"
    );
    let a = g
        .ask_past_notifications(tool_call(
            2,
            "get-annotated-message",
            json!({"messageType": "success", "verbose": true}),
        ))
        .await;
    assert!(a["result"]["isError"].is_null(), "the server answered: {a}");
    let a = g
        .ask_past_notifications(tool_call(
            3,
            "get-annotated-message",
            json!({"messageType": "success", "includeImage": true}),
        ))
        .await;
    let kinds: Vec<&str> = a["result"]["content"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["type"].as_str().unwrap())
        .collect();
    assert!(kinds.contains(&"image"), "the image, as asked: {a}");
    // The names spelt in snake case are the declared ones: sent under them.
    let a = g
        .ask_past_notifications(tool_call(
            8,
            "get-annotated-message",
            json!({"message_type": "success", "include_image": true}),
        ))
        .await;
    let content = a["result"]["content"].as_array().unwrap();
    assert!(
        content.iter().any(|c| c["type"] == "image"),
        "the image, as asked under the name spelt otherwise: {a}"
    );
    // Arguments that are none at all though no object (`null`, as a Go client's nil map is
    // written; `[]`, as PHP writes an empty map), which the server answers with an internal
    // error: sent as `{}`.
    for (id, none) in [(11, json!(null)), (12, json!([]))] {
        let a = g
            .ask_past_notifications(tool_call(id, "get-tiny-image", none))
            .await;
        let content = a["result"]["content"].as_array().unwrap();
        assert!(content.iter().any(|c| c["type"] == "image"), "{a}");
    }
    // A required argument under a near name: too near a short name to be a typo on its own,
    // said beside the one left out, since the call is refused for that already.
    let a = g
        .ask_past_notifications(tool_call(4, "get-sum", json!({"a": 1, "bb": 2})))
        .await;
    assert_eq!(
        result_text(&a),
        "Invalid arguments for tool \"get-sum\" (2 problems):\n- b: is required but missing (parameter description: Second number)\n- bb: is not a parameter of this tool; did you mean \"b\"? (b: Second number)\nCorrect the arguments and call the tool again."
    );
    // The arguments wrapped once more, as some agent frameworks send them (as an object or
    // as its JSON text), put in an echo of the schema, or spread from their text one character
    // each, as a JavaScript client spreads a string: sent as what they hold where that
    // passes, said otherwise.
    let spread = (r#"{"a": 1, "b": 2}"#.chars().enumerate())
        .map(|(i, c)| (i.to_string(), json!(c.to_string())))
        .collect();
    for (id, wrapped) in [
        (5, json!({"arguments": {"a": 1, "b": "2"}})),
        (6, json!({"input": "{\"a\": 1, \"b\": 2}"})),
        (9, Value::Object(spread)),
        (
            10,
            json!({"type": "object", "properties": {"a": 1, "b": 2}, "required": ["a", "b"]}),
        ),
    ] {
        let a = g
            .ask_past_notifications(tool_call(id, "get-sum", wrapped))
            .await;
        assert_eq!(result_text(&a), "The sum of 1 and 2 is 3.", "{a}");
    }
    let a = g
        .ask_past_notifications(tool_call(
            7,
            "get-sum",
            json!({"arguments": {"a": 1, "b": "two"}}),
        ))
        .await;
    assert_eq!(
        result_text(&a),
        "Invalid arguments for tool \"get-sum\" (3 problems):\n- a: is required but missing (parameter description: First number)\n- arguments: is not a parameter of this tool; send the members it holds (a, b) in its place\n- b: is required but missing (parameter description: Second number)\nCorrect the arguments and call the tool again."
    );
}

#[tokio::test]
async fn the_schema_s_own_additional_properties_wins_in_every_mode() {
    let tools = vec![
        json!({"name": "open", "inputSchema": {"type": "object", "properties": {"recursive": {"type": "boolean"}}, "additionalProperties": true}}),
        json!({"name": "closed", "inputSchema": {"type": "object", "properties": {"recursive": {"type": "boolean"}}, "additionalProperties": false}}),
    ];
    let ok = Script::Result(json!({"content": [{"type": "text", "text": "ran"}]}));
    for policy in ["reject_typos", "reject", "allow"] {
        let (up, seen) = Scripted::new(tools.clone())
            .script("open", ok.clone())
            .spawn()
            .await;
        let config = format!("[validation]\nundeclared_properties = \"{policy}\"\n");
        let tg = Toolgate::serve(&up, Some(&config)).await;
        let a = post(
            &tg.url(),
            None,
            call(1, "open", json!({"recursiv": true, "x": 1})),
        )
        .await
        .json();
        assert_eq!(result_text(&a), "ran", "{policy}: {a}");
        let a = post(
            &tg.url(),
            None,
            call(2, "closed", json!({"recursiv": true})),
        )
        .await
        .json();
        assert_eq!(
            a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
            json!({"/recursiv": "is not an accepted argument; did you mean \"recursive\"?"}),
            "{policy}: {a}"
        );
        let forwarded = seen.tool_calls().len();
        assert_eq!(forwarded, 1, "{policy}");
    }
}

#[tokio::test]
async fn undeclared_arguments_in_every_answer_shape_and_in_audit() {
    let tools = vec![
        json!({"name": "find", "inputSchema": {"type": "object", "properties": {
        "query": {"type": "string"}, "maxResults": {"type": "integer", "description": "At most this many"}}}}),
    ];
    let ok = Script::Result(json!({"content": [{"type": "text", "text": "found"}]}));
    // protocol_error: -32602 with the same finding in data.
    let (up, seen) = Scripted::new(tools.clone())
        .script("find", ok.clone())
        .spawn()
        .await;
    let tg = Toolgate::serve(&up, Some("[validation]\nanswer = \"protocol_error\"\n")).await;
    let a = post(
        &tg.url(),
        None,
        call(1, "find", json!({"query": "q", "maxResult": 3})),
    )
    .await
    .json();
    assert_eq!(a["error"]["code"], -32602, "{a}");
    assert_eq!(
        a["error"]["data"]["parameter_errors"],
        json!({"/maxResult": "is not a parameter of this tool; did you mean \"maxResults\"? (maxResults: At most this many)"})
    );
    // The name spelt in snake case is the declared one: sent under it, in coerce mode.
    let a = post(
        &tg.url(),
        None,
        call(3, "find", json!({"query": "q", "max_results": 3})),
    )
    .await
    .json();
    assert_eq!(result_text(&a), "found", "{a}");
    assert_eq!(
        seen.tool_calls()[0]["params"]["arguments"],
        json!({"query": "q", "maxResults": 3})
    );
    // audit: forwarded, logged and counted under the keyword `undeclared`.
    let (up, seen) = Scripted::new(tools).script("find", ok).spawn().await;
    let tg = Toolgate::serve(&up, Some("[validation]\nmode = \"audit\"\n")).await;
    let a = post(
        &tg.url(),
        None,
        call(2, "find", json!({"query": "q", "maxResult": 3})),
    )
    .await
    .json();
    assert_eq!(result_text(&a), "found");
    assert_eq!(seen.seen.lock().unwrap().len(), 2, "listed, then forwarded");
    let logs = tg.logs_when(|l| l.contains("outcome=\"audited\"")).await;
    assert!(logs.contains("keywords=[\"undeclared\"]"), "{logs}");
    assert!(
        !logs.contains("maxResult\""),
        "argument names stay out of the logs: {logs}"
    );
    let m = tg.admin_get("/metrics").await.text();
    assert!(
        m.contains(
            r#"toolgate_violations_total{upstream="default",tool="find",keyword="undeclared"} 1"#
        ),
        "{m}"
    );
}

// ---- tools whose schema no client can use ----

fn mixed_tools() -> Vec<Value> {
    vec![
        open_tool("ok"),
        json!({"name": "broken_type", "inputSchema": {"type": "object", "properties": {"x": {"type": "strin"}}}}),
        json!({"name": "lookbehind", "inputSchema": {"type": "object", "properties": {"x": {"type": "string", "pattern": "(?<=a)b"}}}}),
        json!({"name": "not_object", "inputSchema": {"type": "array"}}),
        json!({"name": "bad_pattern", "inputSchema": {"type": "object", "properties": {"x": {"type": "string", "pattern": "(unclosed"}}}}),
        open_tool("also_ok"),
    ]
}

const HIDDEN: [&str; 3] = ["broken_type", "not_object", "bad_pattern"];

/// Every page of `tools/list`, through one `ask` per page.
async fn list_every_page(mut ask: impl AsyncFnMut(Value) -> Value) -> Vec<String> {
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    for id in 100.. {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let a = ask(json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params}))
            .await;
        for t in a["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{a}"))
        {
            names.push(t["name"].as_str().unwrap().to_string());
        }
        match a["result"]["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.to_string()),
            None => break,
        }
    }
    names
}

fn assert_hidden_and_refused(names: &[String], valid: &[&str], refusal: &Value, mode: &str) {
    for h in HIDDEN {
        assert!(
            !names.iter().any(|n| n == h),
            "{mode}: {h} listed in {names:?}"
        );
    }
    for v in valid {
        assert!(
            names.iter().any(|n| n == v),
            "{mode}: {v} missing from {names:?}"
        );
    }
    assert_eq!(refusal["error"]["code"], -32602, "{mode}: {refusal}");
    assert!(
        refusal["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Unknown tool: broken_type"),
        "{mode}: {refusal}"
    );
}

#[tokio::test]
async fn invalid_schemas_are_hidden_over_http_on_every_page_and_in_both_eras() {
    let ok = Script::Result(json!({"content": [{"type": "text", "text": "ran"}]}));
    let (up, seen) = Scripted::new(mixed_tools())
        .pages_of(2)
        .script("ok", ok.clone())
        .script("lookbehind", ok.clone())
        .spawn()
        .await;
    let tg = Toolgate::serve(&up, None).await;
    let session = open_session(&tg.url()).await;
    let url = tg.url();
    let names =
        list_every_page(async |m: Value| post(&url, Some(&session), m.to_string()).await.answer())
            .await;
    let refusal = post(
        &url,
        Some(&session),
        call(1, "broken_type", json!({"x": "y"})),
    )
    .await
    .answer();
    assert_hidden_and_refused(
        &names,
        &["ok", "lookbehind", "also_ok"],
        &refusal,
        "serve --upstream",
    );
    // The valid ones work, the one toolgate cannot compile included (forwarded unchecked).
    for (i, t) in ["ok", "lookbehind"].iter().enumerate() {
        let a = post(
            &url,
            Some(&session),
            call(2 + i as i64, t, json!({"x": "ab"})),
        )
        .await;
        assert_eq!(result_text(&a.answer()), "ran", "{t}");
    }
    let called: Vec<Value> = seen
        .tool_calls()
        .iter()
        .map(|m| m["params"]["name"].clone())
        .collect();
    assert_eq!(
        called,
        [json!("ok"), json!("lookbehind")],
        "no hidden tool was called"
    );
    // The modern era: the same listing, stateless, with the 2026-07-28 envelope.
    let modern = |id: i64, cursor: Option<&str>| {
        let mut params =
            json!({"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}});
        if let Some(c) = cursor {
            params["cursor"] = json!(c);
        }
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/list", "params": params}).to_string()
    };
    let headers = [
        ("content-type", "application/json"),
        ("accept", ACCEPT),
        ("mcp-protocol-version", "2026-07-28"),
        ("mcp-method", "tools/list"),
    ];
    let mut names = Vec::new();
    let mut cursor: Option<String> = None;
    for id in 0..10 {
        let r = request(Method::POST, &url, &headers, modern(id, cursor.as_deref())).await;
        let a = r.answer();
        for t in a["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{a}"))
        {
            names.push(t["name"].as_str().unwrap().to_string());
        }
        match a["result"]["nextCursor"].as_str() {
            Some(c) => cursor = Some(c.into()),
            None => break,
        }
    }
    assert_eq!(names, ["ok", "lookbehind", "also_ok"]);
    // Logged once for each schema, not again for the second scope that listed it, with what
    // is wrong and where; counted. A later line says the listing's lines are all in.
    post(&url, Some(&session), call(9, "made_up", json!({}))).await;
    let logs = tg
        .logs_when(|l| l.matches("outcome=\"unknown\"").count() >= 2)
        .await;
    assert_eq!(logs.matches("input schema is invalid").count(), 3, "{logs}");
    assert!(
        logs.contains("tool=broken_type problem=at #/properties/x/type:"),
        "{logs}"
    );
    assert!(logs.contains("tool=bad_pattern problem=at #/properties/x/pattern: the pattern \"(unclosed\" is not a regular expression"), "{logs}");
    let m = tg.admin_get("/metrics").await.text();
    assert!(m.contains(r#"kind="tools_hidden_invalid_schema"}"#), "{m}");
    // "forward" lists everything, and calls go through.
    let (up, _) = Scripted::new(mixed_tools()).pages_of(2).spawn().await;
    let tg = Toolgate::serve(
        &up,
        Some("[validation]\ninvalid_tool_schemas = \"forward\"\n"),
    )
    .await;
    let url = tg.url();
    let names =
        list_every_page(async |m: Value| post(&url, None, m.to_string()).await.answer()).await;
    assert_eq!(names.len(), 6, "{names:?}");
}

/// Entries a listing holds that are no tool definition: what the stdio fixture's
/// `--malformed-tools` adds.
fn malformed_entries() -> [Value; 3] {
    [
        json!("not a tool"),
        json!({"name": 5, "inputSchema": {"type": "object"}}),
        json!({"inputSchema": {"type": "object"}}),
    ]
}

/// `shapeless`, as the stdio fixture's `--malformed-tools` lists it: an output schema that is
/// no object schema.
fn shapeless() -> Value {
    json!({"name": "shapeless", "inputSchema": {"type": "object"}, "outputSchema": {"type": "array"}})
}

/// `add` called with `b` a string, as toolgate answers it.
fn refused_add() -> Value {
    let text = "Invalid arguments for tool \"add\" (1 problem):\n- b: expected an integer, got string \"x\" (parameter description: second)\nCorrect the arguments and call the tool again.";
    json!({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": text}],
        "isError": true,
        "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": "add",
            "parameter_errors": {"/b": "expected an integer, got string \"x\""}}}}})
}

/// `shapeless`'s result held to the output schema it declares, as toolgate answers it.
fn shapeless_refused() -> Value {
    let text = "The tool \"shapeless\" returned a result that does not match its declared outputSchema:\n- structuredContent: expected an array, got object {\"a\":1}\nThis is a fault of the tool server, not of the call.";
    json!({"jsonrpc": "2.0", "id": 3, "result": {
        "content": [{"type": "text", "text": text}],
        "isError": true,
        "_meta": {"toolgate/output_validation": {"code": "invalid_output",
            "errors": {"": "expected an array, got object {\"a\":1}"}}}}})
}

/// What no client can read in a listing costs only itself: an entry that is no tool is left
/// out, a tool whose output schema is no object schema is listed without it (an SDK refuses
/// the whole listing for either), and the tools beside them are learned and checked. With
/// `invalid_tool_schemas = "forward"`, the listing goes as it came.
#[tokio::test]
async fn what_no_client_can_read_in_a_listing_costs_only_itself_in_every_mode() {
    use common::modes::{Front, Mode};
    let fixture = common::peers::stdio_fixture(&["--malformed-tools"]).await;
    let add = json!({"name": "add", "description": "Add two integers.", "inputSchema": {"type": "object", "properties": {"a": {"type": "integer", "description": "first"}, "b": {"type": "integer", "description": "second"}}, "required": ["a", "b"]}});
    let shapeless_result = json!({"content": [], "structuredContent": {"a": 1}});
    for forward in [false, true] {
        let config = match forward {
            false => "[validation]\noutput = \"enforce\"\n",
            true => "[validation]\noutput = \"enforce\"\ninvalid_tool_schemas = \"forward\"\n",
        };
        for mode in Mode::EVERY_FRONT {
            let mut tools = vec![add.clone()];
            tools.extend(malformed_entries());
            tools.push(shapeless());
            let (up, _) = Scripted::new(tools)
                .script("shapeless", Script::Result(shapeless_result.clone()))
                .spawn()
                .await;
            let mut front = Front::start_with(mode, &up, &fixture, Some(config)).await;
            // The tools beside them are learned: a bad call is refused, in words.
            let refused = front
                .ask(tool_call(1, "add", json!({"a": 1, "b": "x"})))
                .await;
            assert_eq!(refused, refused_add(), "{mode}");
            let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
            let tools = front.ask(list).await["result"]["tools"].clone();
            let tools = tools
                .as_array()
                .unwrap_or_else(|| panic!("{mode}: {tools}"));
            let malformed: Vec<&Value> = tools.iter().filter(|t| !t["name"].is_string()).collect();
            let listed = tools.iter().find(|t| t["name"] == "shapeless");
            let called = front.ask(tool_call(3, "shapeless", json!({}))).await;
            if forward {
                assert_eq!(
                    malformed,
                    malformed_entries().iter().collect::<Vec<_>>(),
                    "{mode}"
                );
                assert_eq!(listed, Some(&shapeless()), "{mode}");
                assert_eq!(called, shapeless_refused(), "{mode}");
            } else {
                assert!(malformed.is_empty(), "{mode}: {malformed:?}");
                let without_output =
                    json!({"name": "shapeless", "inputSchema": {"type": "object"}});
                assert_eq!(listed, Some(&without_output), "{mode}");
                // Its results are held to no output schema: the client knows of none.
                assert_eq!(
                    called,
                    json!({"jsonrpc": "2.0", "id": 3, "result": shapeless_result}),
                    "{mode}"
                );
            }
            assert!(
                tools.iter().any(|t| t["name"] == "add"),
                "{mode}: {tools:?}"
            );
        }
    }
}

#[tokio::test]
async fn invalid_schemas_are_hidden_in_front_of_stdio_servers() {
    let fixture =
        crate::common::peers::stdio_fixture(&["--invalid-tools", "--page-size", "3"]).await;
    // stdio -- CMD.
    let (mut g, _) = StdioGate::start(&fixture, None);
    g.initialize().await;
    let names = list_every_page(async |m| g.ask(m).await).await;
    let refusal = g.ask(tool_call(1, "broken_type", json!({"x": "y"}))).await;
    assert_hidden_and_refused(
        &names,
        &["add", "seen", "lookbehind"],
        &refusal,
        "stdio -- CMD",
    );
    let a = g.ask(tool_call(2, "lookbehind", json!({"x": "ab"}))).await;
    assert_eq!(result_text(&a), "called lookbehind");
    let a = g.ask(tool_call(3, "seen", json!({}))).await;
    assert!(!result_text(&a).contains("broken"), "{a}");
    let seen: Vec<String> = serde_json::from_str(&result_text(&a)).unwrap();
    assert_eq!(
        seen.iter().filter(|m| *m == "tools/call").count(),
        2,
        "only lookbehind and seen were called: {seen:?}"
    );

    // serve -- CMD.
    let tg = Toolgate::in_front_of(&fixture, None).await;
    let session = open_session(&tg.url()).await;
    let url = tg.url();
    let names =
        list_every_page(async |m: Value| post(&url, Some(&session), m.to_string()).await.answer())
            .await;
    let refusal = post(&url, Some(&session), call(1, "broken_type", json!({})))
        .await
        .answer();
    assert_hidden_and_refused(
        &names,
        &["add", "seen", "lookbehind"],
        &refusal,
        "serve -- CMD",
    );

    // "forward" lists every tool.
    let (mut g, _f) = StdioGate::start(
        &fixture,
        Some("[validation]\ninvalid_tool_schemas = \"forward\"\n"),
    );
    g.initialize().await;
    let count = list_every_page(async |m| g.ask(m).await).await.len();
    assert_eq!(count, 15);
}

// ---- agreement with an SDK's own check ----

/// Candidate values for each argument of the fixture's tools (JSON text, as a model might
/// write it): what each schema takes, and what it does not, on every side. Values where JSON
/// Schema validators are known to part (a `multipleOf` of a decimal fraction, a pattern's
/// `\d` against other scripts' digits or its `$` before a final line break, docs/contract.md
/// §7) are left out: this is about everything else.
type Candidates = Vec<(
    &'static str,
    &'static [&'static str],
    &'static [&'static str],
)>;

fn candidates(tool: usize) -> Candidates {
    const ANY: &[&str] = &["null", "true", "7", "12.5", "\"x\"", "[]", "{}"];
    match tool {
        0 => vec![
            (
                "code",
                &["\"LHR\"", "\"JFK\""],
                &["\"lhr\"", "\"LH\"", "\"LHRX\"", "5"],
            ),
            (
                "name",
                &["\"ab\"", "\"abcde\"", "\"😀😀\"", "\"ÅÄÖ\""],
                &["\"a\"", "\"abcdef\"", "\"😀😀😀😀😀😀\"", "12", "true"],
            ),
            (
                "count",
                &["0", "5", "100", "1.0", "3e1", "\"10\""],
                &["101", "-1", "1.5", "\"abc\"", "null"],
            ),
            (
                "ratio",
                &["0.5", "1.5", "2", "1e1", "\"1.5\""],
                &["0.3", "0", "-0.5"],
            ),
            (
                "flag",
                &["true", "false", "\"true\""],
                &["\"maybe\"", "1", "null"],
            ),
            (
                "day",
                &["\"2024-02-29\"", "\"2031-12-31\""],
                &[
                    "\"2023-02-29\"",
                    "\"2024-13-01\"",
                    "\"2024-1-01\"",
                    "\"2024-01-01T10:00:00Z\"",
                    "\"tomorrow\"",
                ],
            ),
            ("kind", &["\"a\"", "1", "1.0", "null"], &["\"c\"", "true"]),
            (
                "fixed",
                &["{\"k\":[1,2]}", "{\"k\":[1.0,2]}"],
                &["{\"k\":[2,1]}", "[1,2]"],
            ),
            ("extra", &[], ANY),
        ],
        1 => vec![
            (
                "point",
                &["{\"x\":1}", "{\"x\":1,\"y\":2}", "{\"x\":\"1\"}"],
                &["{}", "{\"x\":1,\"z\":0}", "{\"x\":1.5}"],
            ),
            (
                "tags",
                &["[\"a\"]", "[\"a-b\",\"c\"]", "\"a\""],
                &[
                    "[]",
                    "[\"a\",\"a\"]",
                    "[\"a--b\"]",
                    "[\"A\"]",
                    "[\"a\",\"b\",\"c\",\"d\"]",
                    "[1]",
                ],
            ),
            (
                "pair",
                &["[1,\"a\"]", "[1]", "[1.0,\"b\"]", "[]"],
                &["[1,\"a\",2]", "[\"a\",1]"],
            ),
            ("maybe", &["null", "\"x\""], &["[1]", "{}"]),
            ("other", ANY, &[]),
        ],
        2 => vec![
            ("either", &["1", "null", "\"1\""], &["\"x\"", "1.5"]),
            (
                "one",
                &["\"a\"", "\"abcd\""],
                &["\"ab\"", "\"abc\"", "\"\"", "[]"],
            ),
            ("both", &["5", "5.5", "\"6\""], &["4", "null"]),
            ("no", &["1", "null", "[]"], &["\"x\""]),
            ("cond", &["10", "\"x\"", "12.0"], &["5", "true"]),
            ("free", &["\"x\"", "\"\""], &["1", "true", "null"]),
        ],
        3 => vec![
            ("x_1", &["1", "\"1\"", "-4"], &["\"a\"", "1.5", "null"]),
            ("x_long_name", &[], &["1"]),
            ("a", &["1", "\"a\""], &[]),
            ("b", &["null", "2"], &[]),
            ("c", ANY, &[]),
            ("d", ANY, &[]),
        ],
        _ => vec![
            (
                "list",
                &["[1,2]", "[1.0,2.0]", "[1,2,\"a\"]"],
                &["[1,\"a\"]", "[]", "[\"1\",\"2\"]", "1"],
            ),
            (
                "address",
                &["\"1.2.3.4\"", "\"10.0.0.1\""],
                &["\"01.2.3.4\"", "\"256.1.1.1\"", "\"1.2.3\"", "\"::1\""],
            ),
            (
                "small",
                &["3", "9", "30", "9.0", "\"6\"", "-3"],
                &["33", "4"],
            ),
        ],
    }
}

/// The text of one call's arguments for tool `t{tool}`: each argument present three times in
/// four, with a value its schema takes four times in five.
fn arguments(tool: usize, draws: &mut Gen) -> String {
    let mut members = Vec::new();
    for (name, takes, refuses) in candidates(tool) {
        if draws.below(4) == 0 {
            continue;
        }
        let pool = match draws.below(5) {
            0 if !refuses.is_empty() => refuses,
            _ if takes.is_empty() => refuses,
            _ => takes,
        };
        members.push(format!("\"{name}\":{}", pool[draws.below(pool.len())]));
    }
    format!("{{{}}}", members.join(","))
}

/// toolgate and the Python SDK's own check (`jsonschema`, as its 1.x servers run it before a
/// tool) agree on random arguments for schemas of every kind of keyword, in front of that
/// SDK's own server: what toolgate forwards (coerced or not), the SDK takes, and what
/// toolgate refuses, `jsonschema` refuses too, formats asserted. Both modes with a stdio
/// server: the check is the engine's, alike in every mode (the parity suite).
#[tokio::test]
async fn toolgate_and_the_python_sdks_own_check_agree_on_random_arguments() {
    use common::modes::{Front, Mode};
    let command = common::peers::python_1_stdio("py_validating_server.py").await;
    for mode in [Mode::ServeCommand, Mode::StdioCommand] {
        let mut front = Front::start(mode, "", &command).await;
        // `t5` is for the keywords where validators part (the test after this one).
        let mut draws = Gen(0x9E37_79B9_7F4A_7C15);
        let (mut forwarded, mut refused, mut parted) = (0, 0, Vec::new());
        for id in 0..400 {
            let tool = id % 5;
            let args = arguments(tool, &mut draws);
            let call = format!(
                r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"t{tool}","arguments":{args}}}}}"#
            );
            let a = front.ask_line(&call).await;
            if a["result"]["_meta"]["toolgate/validation"]["code"] == "invalid_arguments" {
                refused += 1;
                let judge = format!(
                    r#"{{"jsonrpc":"2.0","id":"judge-{id}","method":"tools/call","params":{{"name":"judge","arguments":{{"tool":"t{tool}","arguments":{args}}}}}}}"#
                );
                let verdict = result_text(&front.ask_line(&judge).await);
                if verdict == "accepted" {
                    parted.push(format!(
                        "t{tool} {args}: refused by toolgate ({a}), taken by jsonschema"
                    ));
                }
            } else if a["result"]["content"][0]["text"] == "accepted" {
                forwarded += 1;
            } else {
                parted.push(format!(
                    "t{tool} {args}: passed by toolgate, the SDK answered {a}"
                ));
            }
        }
        assert!(
            parted.is_empty(),
            "{mode}: {} disagreements:\n{}",
            parted.len(),
            parted.join("\n")
        );
        assert!(
            forwarded > 100 && refused > 100,
            "{mode}: {forwarded} forwarded, {refused} refused"
        );
    }
}

/// A lone string that lists strings of a pattern with commas reaches the SDK's own check as
/// the list of them, and one whose pieces the pattern refuses is refused as sent, in both
/// modes with a stdio server.
#[tokio::test]
async fn a_string_listing_values_reaches_the_python_sdks_check_as_their_list() {
    use common::modes::{Front, Mode};
    let command = common::peers::python_1_stdio("py_validating_server.py").await;
    let call = |tags: &str| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "t1", "arguments": {"point": {"x": 1}, "tags": tags}}})
        .to_string()
    };
    for mode in [Mode::ServeCommand, Mode::StdioCommand] {
        let mut front = Front::start(mode, "", &command).await;
        let a = front.ask_line(&call("red, dark-blue")).await;
        let accepted = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "accepted"}], "isError": false}});
        assert_eq!(a, accepted, "{mode}");
        let a = front.ask_line(&call("red, Blue")).await;
        let why = "expected an array, got string \"red, Blue\"";
        let refused = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": format!(
                "Invalid arguments for tool \"t1\" (1 problem):\n- tags: {why}\nCorrect the arguments and call the tool again."
            )}],
            "isError": true,
            "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": "t1",
                "parameter_errors": {"/tags": why}}}}});
        assert_eq!(a, refused, "{mode}");
    }
}

/// Where validators part (docs/contract.md §7), toolgate reads JSON Schema as it is written:
/// `19.99` is a multiple of `0.01` (the SDK's check, dividing in floating point, refuses it,
/// in its own words), and a pattern's `\d` and `$` are ECMA-262's, as JavaScript's (the SDK's
/// check, with Python's `re`, takes other scripts' digits and a final line break).
#[tokio::test]
async fn where_validators_part_toolgate_reads_json_schema_as_written() {
    use common::modes::Front;
    let command = common::peers::python_1_stdio("py_validating_server.py").await;
    let mut front = Front::serve_command(&command).await;
    let a = front.ask(tool_call(1, "t5", json!({"price": 19.99}))).await;
    assert_eq!(
        a["result"],
        json!({"content": [{"type": "text", "text": "Input validation error: 19.99 is not a multiple of 0.01"}], "isError": true})
    );
    let refused = [
        (
            json!({"digits": "١٢٣"}),
            "/digits",
            "must match the pattern ^\\d+$, got \"١٢٣\"",
        ),
        (
            json!({"code": "LHR\n"}),
            "/code",
            "must match the pattern ^[A-Z]{3}$, got \"LHR\\n\"",
        ),
    ];
    for (id, (args, at, message)) in (2..).zip(refused) {
        let a = front.ask(tool_call(id, "t5", args.clone())).await;
        let errors = &a["result"]["_meta"]["toolgate/validation"]["parameter_errors"];
        assert_eq!(errors, &json!({at: message}), "{a}");
        let judged = front
            .ask(tool_call(
                id + 10,
                "judge",
                json!({"tool": "t5", "arguments": args}),
            ))
            .await;
        assert_eq!(result_text(&judged), "accepted");
    }
}
