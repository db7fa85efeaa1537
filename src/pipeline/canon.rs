//! The output boundary: docs/contract.md §3. Upstreams built on different SDKs report the
//! same failure in different shapes; this rewrites them into the one the current spec asks
//! for, and leaves alone what clients must act on themselves.
//!
//! | upstream answer | becomes |
//! |---|---|
//! | `tools/call` error reporting a tool failure (`-32602` other than unknown tool, `-32603`, `0`, positive, `-32000..-32019`) | `isError` result with the upstream message; code and message under `_meta` |
//! | `tools/call` error saying the tool is unknown | `-32602 Unknown tool: <name>` |
//! | a tool failure of a task-augmented `tools/call` (SEP-1686), whose caller reads no tool result | untouched; masked, or unreadable as an error, `-32603` with the text and details in `data` |
//! | `-32042`, `-32020..-32022`, `-32601`, `-32600`, `-32700` | untouched: protocol signals |
//! | `isError` result | untouched, never output-validated |
//! | `structuredContent` against `outputSchema` (when on) | audit: logged; enforce: `isError` result |
//! | `resources/read` not found (`-32002`; `0`/`-32603`/`-32602` with a not-found message; `-32602` without `data`; an empty `contents`) | `-32602 Resource not found: <uri>`, `data.uri` |

use super::Pending;
use super::answer::Answer;
use crate::catalog::{Lookup, Schema};
use crate::config::OutputMode;
use crate::gateway::Gateway;
use crate::jsonrpc::{self, Message, footprint};
use crate::lograte::warn_at_rate;
use crate::validate;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::borrow::Cow;
use std::fmt::Write;

/// Codes the spec gives a meaning clients act on: never rewritten.
fn is_protocol_signal(code: i64) -> bool {
    matches!(code, -32042 | -32022..=-32020 | -32601 | -32600 | -32700)
}

fn is_tool_failure(code: i64) -> bool {
    matches!(code, -32602 | -32603 | 0) || code > 0 || (-32019..=-32000).contains(&code)
}

fn says_unknown_tool(message: &str, tool: &str) -> bool {
    let m = message.to_lowercase();
    m.contains(&tool.to_lowercase())
        && (m.contains("unknown tool")
            || m.contains("no such tool")
            || (m.contains("tool") && m.contains("not found")))
}

fn says_not_found(message: &str) -> bool {
    let m = message.to_lowercase();
    [
        "not found",
        "unknown resource",
        "no such",
        "does not exist",
        "doesn't exist",
    ]
    .iter()
    .any(|p| m.contains(p))
}

/// The answer to a forwarded `tools/call`.
pub fn call_answer(
    gw: &Gateway,
    pending: &Pending,
    tool: &str,
    retry: bool,
    m: &Message<'_>,
) -> Option<Answer> {
    let id = m.id?;
    match (m.error, m.result) {
        // A refused `requestState` ("integrity check failed") is the protocol's error, which
        // the spec has the client see as one; it is no tool failure to rewrite.
        (Some(_), _) if retry && m.error_code() == Some(jsonrpc::INVALID_PARAMS) => None,
        (Some(err), _) if gw.config.errors.rewrite => call_error(gw, pending, tool, id, err),
        (None, Some(result)) if pending.target.validation.output != OutputMode::Off => {
            check_output(gw, pending, tool, id, result)
        }
        _ => None,
    }
}

fn call_error(
    gw: &Gateway,
    pending: &Pending,
    tool: &str,
    id: &RawValue,
    err: &RawValue,
) -> Option<Answer> {
    let e = LooseError::read(err);
    if let Some(code) = e.code {
        if is_protocol_signal(code) {
            return None;
        }
        if matches!(code, -32602 | -32603 | 0) && says_unknown_tool(&e.message, tool) {
            return unknown_tool(gw, pending, tool, id, code, &e.message);
        }
        if !is_tool_failure(code) {
            return None;
        }
    }
    let task = matches!(pending.kind, super::Kind::Call { task: true, .. });
    let masked = gw.config.errors.mask_internal && e.code != Some(jsonrpc::INVALID_PARAMS);
    // A task-augmented call's caller reads an error as one: it passes, unless its text is
    // masked or it is no error a client can read.
    if task && !masked && e.code.is_some() {
        return None;
    }
    let (text, details) = if masked {
        let reference = gw.next_id();
        // The server's text, which an operator looks up by the reference: a few KiB of it.
        let said = crate::text::clipped(&e.message, 4096);
        let tool = crate::text::clipped(tool, 200);
        tracing::warn!(upstream = %pending.target.name, tool, code = e.code, reference, upstream_message = %said, "masked an upstream error");
        (
            format!("The tool \"{tool}\" failed with an internal error (reference {reference})."),
            json!({"code": e.raw_code, "reference": reference}),
        )
    } else {
        let mut d = json!({"code": e.raw_code, "message": e.message});
        if let Some(data) = e.data {
            d["data"] = data;
        }
        let text = match e.message.trim().is_empty() {
            true => format!("The tool \"{tool}\" failed without saying why."),
            false => e.message,
        };
        (text, d)
    };
    let kind = if task {
        "task_call_error"
    } else {
        "tool_error"
    };
    tracing::info!(upstream = %pending.target.name, tool, code = e.code, kind, "rewrote an upstream error");
    gw.metrics.rewrites.inc(&[&pending.target.name, kind]);
    (pending.target.series).tool_call(&gw.metrics, tool, "rewritten");
    Some(Answer::call_failed(
        pending.era,
        id,
        task,
        jsonrpc::INTERNAL_ERROR,
        text,
        "toolgate/upstream_error",
        details,
    ))
}

/// A server's "unknown tool" in whatever words and code, as the spec's `-32602`; `None`
/// when it is already that.
fn unknown_tool(
    gw: &Gateway,
    pending: &Pending,
    tool: &str,
    id: &RawValue,
    code: i64,
    message: &str,
) -> Option<Answer> {
    let canonical = format!("Unknown tool: {tool}");
    if code == jsonrpc::INVALID_PARAMS && message == canonical {
        return None;
    }
    tracing::info!(upstream = %pending.target.name, tool, code, kind = "unknown_tool", "rewrote an upstream error");
    gw.metrics
        .rewrites
        .inc(&[&pending.target.name, "unknown_tool"]);
    Some(Answer::error(
        Some(id),
        jsonrpc::INVALID_PARAMS,
        &canonical,
        Some(&json!({"tool": tool})),
    ))
}

/// An error as the server wrote it, whatever its shape. A client's SDK drops an error whose
/// `code` is no integer (or that is no object) as unreadable, and its call would wait for an
/// answer that never comes: for a call, such an error is the tool's failure too.
struct LooseError {
    /// The code, when it is an integer (`-32042.0` too, [`jsonrpc::integer`]).
    code: Option<i64>,
    /// The code as it came, for the answer's `_meta` (`null` when there was none).
    raw_code: Value,
    /// Empty when there is none, or it is no string.
    message: String,
    data: Option<Value>,
}

impl LooseError {
    fn read(err: &RawValue) -> LooseError {
        if !footprint::affordable(err.get()) {
            return LooseError::head(err);
        }
        // JSON no value holds (a number past f64, as Python writes `10**400`) leaves its
        // code and message to be read as the members they are.
        let Ok(mut v) = serde_json::from_str::<Value>(err.get()) else {
            return LooseError::head(err);
        };
        let message = match &mut v {
            Value::String(s) => std::mem::take(s),
            v => match v.get_mut("message") {
                Some(Value::String(s)) => std::mem::take(s),
                _ => String::new(),
            },
        };
        let raw_code = v.get_mut("code").map(Value::take).unwrap_or_default();
        LooseError {
            code: raw_code.as_number().and_then(jsonrpc::integer),
            raw_code,
            message,
            data: v.get_mut("data").map(Value::take),
        }
    }

    /// Its code and message alone, for an error whose whole would hold too much once read,
    /// or cannot be read whole: its `data` is left out.
    fn head(err: &RawValue) -> LooseError {
        let head = jsonrpc::ErrorHead::read(err);
        let raw_code = head.code.map_or(Value::Null, Value::Number);
        LooseError {
            code: raw_code.as_number().and_then(jsonrpc::integer),
            raw_code,
            message: head.message.unwrap_or_default(),
            data: None,
        }
    }
}

#[derive(Deserialize)]
struct ResultView<'a> {
    #[serde(default, rename = "isError")]
    is_error: Option<bool>,
    #[serde(borrow, default, rename = "structuredContent")]
    structured: Option<&'a RawValue>,
    /// Owned when written with an escape: borrowed only, such a type would fail the whole
    /// view, and the output would go unchecked.
    #[serde(borrow, default, rename = "resultType")]
    result_type: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    task: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct TaskView<'a> {
    #[serde(borrow, rename = "taskId")]
    id: Cow<'a, str>,
}

impl ResultView<'_> {
    /// Whether this is the tool's result, not a step before it: a task the call started
    /// (2025-11-25's `task`, the 2026-07-28 extension's `resultType: "task"`) or a request
    /// for the client's input (`resultType: "input_required"`). Neither holds the tool's
    /// output yet.
    fn is_final(&self) -> bool {
        self.task.is_none() && self.result_type.as_deref().is_none_or(|t| t == "complete")
    }
}

fn check_output(
    gw: &Gateway,
    pending: &Pending,
    tool: &str,
    id: &RawValue,
    result: &RawValue,
) -> Option<Answer> {
    let r: ResultView<'_> = serde_json::from_str(result.get()).ok()?;
    if r.is_error == Some(true) {
        return None;
    }
    let Lookup::Found(t) = gw.catalog.lookup(&pending.key, tool) else {
        return None;
    };
    let out = t.output?;
    if out.invalid.is_some() && pending.target.validation.hides_invalid(tool) {
        // Left out of the listing the client saw: no contract it knows of.
        return None;
    }
    if !r.is_final() {
        // A task's output comes as the answer to `tasks/result`, checked there.
        if let Some(task) = r
            .task
            .and_then(|t| serde_json::from_str::<TaskView<'_>>(t.get()).ok())
        {
            gw.tasks.started(pending.key, &task.id, tool);
        }
        return None;
    }
    if r.structured
        .is_some_and(|s| !footprint::affordable(s.get()))
    {
        let target = &pending.target;
        warn_at_rate!(target.repeats, "output_too_large", { upstream = %target.name, tool = %crate::text::clipped(tool, 200), },
            "a result would hold too much once read to be checked against its outputSchema; it goes unchecked");
        return None;
    }
    let found = output_violations(&out, &r, pending.target.validation.max_errors)?;
    let keywords: Vec<&str> = found.list.iter().map(|v| v.keyword.as_str()).collect();
    if pending.target.validation.output == OutputMode::Audit {
        tracing::info!(upstream = %pending.target.name, tool, outcome = "output_audited", ?keywords, "tools/call");
        return None;
    }
    tracing::info!(upstream = %pending.target.name, tool, outcome = "output_rejected", ?keywords, "tools/call");
    gw.metrics
        .rewrites
        .inc(&[&pending.target.name, "invalid_output"]);
    let mut text = format!(
        "The tool \"{tool}\" returned a result that does not match its declared outputSchema:"
    );
    let mut errors = serde_json::Map::new();
    let mut shown = 0;
    for v in &found.list {
        if text.len() > validate::MAX_TEXT_BYTES {
            break;
        }
        shown += 1;
        let path = if v.pointer.is_empty() {
            "structuredContent".to_string()
        } else {
            format!("structuredContent{}", v.pointer)
        };
        let _ = write!(text, "\n- {path}: {}", v.message);
        errors.insert(v.pointer.clone(), Value::String(v.message.clone()));
    }
    let omitted = found.list.len() - shown + found.omitted;
    if omitted > 0 {
        let _ = write!(text, "\n- …and {omitted} more");
    }
    text.push_str("\nThis is a fault of the tool server, not of the call.");
    Some(Answer::tool_error(
        pending.era,
        id,
        text,
        "toolgate/output_validation",
        json!({"code": "invalid_output", "errors": errors}),
    ))
}

/// What a final result breaks of its output schema; `None` when it holds it, or when it
/// cannot be checked (a schema that does not compile, a result too deep for a schema whose
/// checks multiply with each level).
fn output_violations(
    out: &Schema,
    r: &ResultView<'_>,
    max_errors: usize,
) -> Option<validate::Found> {
    let validator = out.validator().ok()?;
    let Some(structured) = r.structured else {
        // A tool that declares an outputSchema must return structured content.
        let missing = validate::Violation {
            pointer: String::new(),
            keyword: "structuredContent".into(),
            message: "is missing, though the tool declares an outputSchema".into(),
        };
        return Some(validate::Found {
            list: vec![missing],
            omitted: 0,
        });
    };
    let content: Value = serde_json::from_str(structured.get()).ok()?;
    if out.reaches(&content).is_err() || validator.is_valid(&content) {
        return None;
    }
    Some(validate::violations(
        out.compiled(validator),
        &content,
        max_errors,
    ))
}

#[derive(Deserialize)]
struct ReadView<'a> {
    #[serde(borrow, default)]
    contents: Option<&'a RawValue>,
}

/// The answer to a forwarded `resources/read`: every "not found" becomes SEP-2164's shape.
pub fn read_answer(
    gw: &Gateway,
    pending: &Pending,
    uri: Option<&str>,
    m: &Message<'_>,
) -> Option<Answer> {
    if !gw.config.errors.rewrite {
        return None;
    }
    let (id, uri) = (m.id?, uri?);
    let canonical = format!("Resource not found: {uri}");
    let not_found = match (m.error, m.result) {
        (Some(err), _) => {
            let e = LooseError::read(err);
            let already = e.code == Some(jsonrpc::INVALID_PARAMS)
                && e.message == canonical
                && e.data.as_ref().and_then(|d| d.get("uri")) == Some(&json!(uri));
            !already
                && match e.code {
                    Some(-32002) => true,
                    // `-32602` is also every other invalid request (2026-07-28: a missing
                    // `_meta`), so it is read as "not found" only when it says so.
                    Some(0 | -32603 | -32602) => says_not_found(&e.message),
                    _ => false,
                }
        }
        (None, Some(result)) => serde_json::from_str::<ReadView<'_>>(result.get())
            .ok()
            .and_then(|r| r.contents)
            .is_some_and(|c| jsonrpc::items::is_empty(c.get())),
        _ => false,
    };
    if !not_found {
        return None;
    }
    tracing::info!(upstream = %pending.target.name, kind = "resource_not_found", "rewrote an upstream answer");
    gw.metrics
        .rewrites
        .inc(&[&pending.target.name, "resource_not_found"]);
    Some(Answer::error(
        Some(id),
        jsonrpc::INVALID_PARAMS,
        &canonical,
        Some(&json!({"uri": uri})),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{Config, Errors};
    use crate::mcp::Era;

    /// What toolgate gives a call's caller for the server's `error`, with the call's `task`
    /// and `errors.mask_internal` as given; `None` when the error passes as it came.
    fn answered(error: &str, task: bool, mask_internal: bool) -> Option<Value> {
        let errors = Errors {
            rewrite: true,
            mask_internal,
        };
        let config = Config {
            upstream: Some("http://127.0.0.1:9/mcp".into()),
            errors,
            ..Config::default()
        };
        let gw = Gateway::new(config).unwrap();
        let target = gw.targets[0].clone();
        let pending = Pending {
            id: Some(RawValue::from_string("4".into()).unwrap()),
            kind: crate::pipeline::Kind::Call {
                tool: "fail".into(),
                outcome: "forwarded",
                retry: false,
                output: false,
                task,
            },
            era: Era::Legacy,
            key: gw.scope(&target, Some(b"s"), []),
            target,
            client: None,
            bridged: None,
        };
        let body = format!(r#"{{"jsonrpc":"2.0","id":4,"error":{error}}}"#);
        let Ok(jsonrpc::Body::Single(m)) = jsonrpc::parse(body.as_bytes()) else {
            panic!("one message")
        };
        let a = call_answer(&gw, &pending, "fail", false, &m)?;
        Some(serde_json::from_slice(&a.body).unwrap())
    }

    #[test]
    fn a_task_augmented_calls_failure_stays_an_error_its_caller_reads() {
        let boom = r#"{"code":0,"message":"boom\nat line 3"}"#;
        // A plain call's caller reads the failure as the tool's result.
        let plain = answered(boom, false, false).unwrap();
        assert_eq!(plain["result"]["isError"], true, "{plain}");
        // A task's caller reads only a task or an error: the server's passes as it came.
        assert_eq!(answered(boom, true, false), None);
        // Masked, or unreadable as an error, it is toolgate's `-32603`.
        let masked = answered(boom, true, true).unwrap();
        let text = masked["error"]["data"]["text"].as_str().unwrap().to_owned();
        let reference = masked["error"]["data"]["reference"].as_str().unwrap();
        assert_eq!(
            masked,
            json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32603,
                "message": format!("The tool \"fail\" failed with an internal error (reference {reference})."),
                "data": {"code": 0, "reference": reference, "text": text}}})
        );
        assert_eq!(
            answered(r#"{"message":"boom\nat line 3"}"#, true, false).unwrap(),
            json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32603, "message": "boom",
                "data": {"code": null, "message": "boom\nat line 3", "text": "boom\nat line 3"}}})
        );
    }

    #[test]
    fn an_error_is_read_whatever_its_shape() {
        let read = |e: &str| {
            let e = LooseError::read(&RawValue::from_string(e.into()).unwrap());
            (e.code, e.raw_code, e.message, e.data)
        };
        assert_eq!(
            read(r#"{"code": 7, "message": "quota", "data": [1]}"#),
            (Some(7), json!(7), "quota".into(), Some(json!([1])))
        );
        assert_eq!(
            read(r#"{"message": "boom"}"#),
            (None, Value::Null, "boom".into(), None)
        );
        assert_eq!(
            read(r#"{"code": "E1", "message": 5}"#),
            (None, json!("E1"), String::new(), None)
        );
        assert_eq!(read(r#""boom""#), (None, Value::Null, "boom".into(), None));
        assert_eq!(
            read(r#"{"code": -32042, "message": "consent", "data": {"n": 1e400}}"#),
            (Some(-32042), json!(-32042), "consent".into(), None)
        );
        assert_eq!(read("[1]"), (None, Value::Null, String::new(), None));
        assert_eq!(
            read(r#"{"code": -32042.0, "message": "consent"}"#),
            (Some(-32042), json!(-32042.0), "consent".into(), None)
        );
    }

    #[test]
    fn only_a_complete_result_holds_the_tools_output() {
        let view = |r: &str| {
            serde_json::from_str::<ResultView<'_>>(r)
                .unwrap()
                .is_final()
        };
        assert!(view(r#"{"content":[]}"#));
        assert!(view(r#"{"content":[],"resultType":"complete"}"#));
        assert!(view(r#"{"content":[],"resultType":"compl\u0065te"}"#));
        assert!(!view(r#"{"task":{"taskId":"t1","status":"working"}}"#));
        assert!(!view(r#"{"resultType":"task","task":{"taskId":"t1"}}"#));
        assert!(!view(
            r#"{"resultType":"input_required","inputRequests":{}}"#
        ));
    }

    #[test]
    fn protocol_signals_and_failures_are_told_apart() {
        for c in [-32042, -32020, -32021, -32022, -32601, -32600, -32700] {
            assert!(is_protocol_signal(c), "{c}");
            assert!(!is_tool_failure(c), "{c}");
        }
        for c in [-32602, -32603, 0, 1, 42, -32000, -32019] {
            assert!(is_tool_failure(c), "{c}");
        }
        assert!(!is_tool_failure(-32099) && !is_tool_failure(-32050));
    }

    #[test]
    fn unknown_tool_messages_of_every_sdk() {
        for m in [
            "MCP error -32602: Tool no_such_tool not found",
            "Unknown tool: 'no_such_tool'",
            "Unknown tool: no_such_tool",
        ] {
            assert!(says_unknown_tool(m, "no_such_tool"), "{m}");
        }
        assert!(!says_unknown_tool("Order 7 not found", "lookup_order"));
        assert!(!says_unknown_tool(
            "Tool hammer not found in the shed",
            "find_tool"
        ));
    }
}
