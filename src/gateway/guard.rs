//! The request side of `tools/call`: DESIGN.md table 1.1, row by row.
//!
//! A call is answered here when it is malformed, names an unknown tool, or breaks the tool's
//! schema (in `enforce` mode); otherwise it goes upstream, as the original bytes unless
//! coercion changed the arguments. When the scope's schemas are not known yet, they are
//! listed once, inside the client's own session, with a request id the client cannot have
//! used, and the answer is swallowed.

use super::inspect::{Kind, Pending};
use super::{Route, reply};
use crate::catalog::{Lookup, Page, Schema, ScopeKey};
use crate::config::{Mode, OnCompileError};
use crate::jsonrpc::{self, ArgumentsError, Body as Parsed, Message};
use crate::mcp::{self, Era};
use crate::sse::{self, Split, Splitter};
use crate::upstream::{self, Collected, UpstreamError};
use crate::validate::{self, Report, Verdict};
use axum::response::Response;
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use http::request::Parts;
use http::{HeaderMap, Method};
use http_body_util::BodyExt;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

#[derive(Deserialize)]
struct CallParams<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, default, deserialize_with = "jsonrpc::present")]
    arguments: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "_meta")]
    meta: Option<&'a RawValue>,
}

/// Why the scope's tools could not be listed.
enum ListFailed {
    /// The upstream refused at the HTTP level (a gone session, missing credentials): the
    /// client gets that answer as it is, so it can act on it.
    Relay(Box<Response>),
    Unavailable(UpstreamError),
    /// The upstream answered the listing with an error or with something unreadable.
    Refused(String),
}

pub async fn call(
    rt: &Route,
    parts: Parts,
    bytes: Bytes,
    m: &Message<'_>,
    key: ScopeKey,
) -> Response {
    let id = m.id.expect("a request has an id");
    let version = parts
        .headers
        .get(mcp::PROTOCOL_VERSION)
        .and_then(|v| v.to_str().ok());
    let params: CallParams<'_> = match m.params.map(|p| serde_json::from_str(p.get())) {
        Some(Ok(p)) => p,
        Some(Err(e)) => {
            let era = Era::detect(version, None);
            return reply::rpc_error(
                era,
                Some(id),
                jsonrpc::INVALID_PARAMS,
                &format!("Invalid params for tools/call: {e}"),
                None,
            );
        }
        None => {
            let era = Era::detect(version, None);
            return reply::rpc_error(
                era,
                Some(id),
                jsonrpc::INVALID_PARAMS,
                "Invalid params for tools/call: missing params with a \"name\"",
                None,
            );
        }
    };
    let era = Era::detect(version, params.meta);
    let tool = params.name.as_ref();
    let (mode, coerce) = rt.gw.config.validation.policy_for(tool);
    let pending = |kind| Pending {
        id: Some(id.to_owned()),
        kind,
        era,
        key: key.clone(),
        has_session: parts.headers.contains_key(mcp::SESSION_ID),
    };
    if mode == Mode::Off {
        return super::forward(rt, &parts, bytes, pending(Kind::Call)).await;
    }

    let args = match params.arguments {
        None => Ok(Map::new()),
        Some(raw) => jsonrpc::parse_arguments(raw),
    };
    let args = match args {
        Err(ArgumentsError::NotObject) => {
            return reply::rpc_error(
                era,
                Some(id),
                jsonrpc::INVALID_PARAMS,
                "Invalid params for tools/call: \"arguments\" must be an object",
                None,
            );
        }
        Err(ArgumentsError::Unreadable(e)) => {
            return reply::rpc_error(
                era,
                Some(id),
                jsonrpc::INVALID_REQUEST,
                &format!("Invalid Request: unreadable arguments: {e}"),
                None,
            );
        }
        other => other,
    };

    let schema = match schema_for(rt, &key, tool, &parts.headers, params.meta, era).await {
        Ok(Some(s)) => s,
        Ok(None) => return unknown_tool(rt, &key, era, id, tool),
        Err(ListFailed::Relay(resp)) => return *resp,
        Err(ListFailed::Unavailable(e)) => {
            tracing::warn!(upstream = %rt.up.name, tool, error = %e, "tools/call: could not list tools");
            return reply::upstream_failed(era, Some(id), true, &e);
        }
        Err(ListFailed::Refused(why)) => {
            tracing::warn!(upstream = %rt.up.name, tool, error = %why, "tools/call: tools/list failed");
            let text = format!(
                "The tool server did not list its tools, so the call to \"{tool}\" could not be checked: {why}"
            );
            return reply::result(
                id,
                &mcp::tool_error(
                    era,
                    text,
                    Some(("toolgate/upstream", json!({"code": "tools_list_failed"}))),
                ),
            );
        }
    };
    let validator = match &schema.validator {
        Ok(v) => v,
        Err(why) => {
            return match rt.gw.config.validation.on_compile_error {
                OnCompileError::Forward => {
                    tracing::debug!(upstream = %rt.up.name, tool, "schema does not compile: forwarded unvalidated");
                    super::forward(rt, &parts, bytes, pending(Kind::Call)).await
                }
                OnCompileError::Reject => {
                    let text = format!(
                        "The input schema of tool \"{tool}\" is not usable ({why}), so calls to it are refused. This is a server-side problem."
                    );
                    reply::result(
                        id,
                        &mcp::tool_error(
                            era,
                            text,
                            Some(("toolgate/validation", json!({"code": "schema_unusable"}))),
                        ),
                    )
                }
            };
        }
    };
    let verdict = match args {
        Ok(args) => validate::check(tool, &schema, validator, args, coerce),
        Err(ArgumentsError::Duplicate { pointer }) => {
            Verdict::Invalid(Report::duplicate_key(tool, &schema.value, pointer))
        }
        Err(_) => unreachable!("handled above"),
    };
    match verdict {
        Verdict::Valid => super::forward(rt, &parts, bytes, pending(Kind::Call)).await,
        Verdict::Coerced(args) => match with_arguments(&bytes, &args) {
            Some(body) => {
                tracing::debug!(upstream = %rt.up.name, tool, "arguments coerced");
                super::forward(rt, &parts, body, pending(Kind::Call)).await
            }
            None => super::forward(rt, &parts, bytes, pending(Kind::Call)).await,
        },
        Verdict::Invalid(report) => {
            let keywords: Vec<&str> = report.keywords().collect();
            if mode == Mode::Audit {
                tracing::info!(upstream = %rt.up.name, tool, outcome = "audited", violations = report.violations.len(), ?keywords, "tools/call");
                return super::forward(rt, &parts, bytes, pending(Kind::Call)).await;
            }
            tracing::info!(upstream = %rt.up.name, tool, outcome = "rejected", violations = report.violations.len(), ?keywords, "tools/call");
            reply::result(
                id,
                &mcp::tool_error(
                    era,
                    report.text(),
                    Some(("toolgate/validation", report.details())),
                ),
            )
        }
    }
}

fn unknown_tool(rt: &Route, key: &ScopeKey, era: Era, id: &RawValue, tool: &str) -> Response {
    let names = rt.gw.catalog.tool_names(key);
    let mut message = format!("Unknown tool: {tool}");
    let close = crate::validate::closest(tool, &names);
    if let Some(c) = close {
        message.push_str(&format!(". Did you mean \"{c}\"?"));
    }
    tracing::info!(upstream = %rt.up.name, tool, outcome = "unknown", "tools/call");
    let data = json!({"tool": tool, "suggestions": close.into_iter().collect::<Vec<_>>()});
    reply::rpc_error(
        era,
        Some(id),
        jsonrpc::INVALID_PARAMS,
        &message,
        Some(&data),
    )
}

/// The schema for a tool, listing the scope's tools first when they are not known.
async fn schema_for(
    rt: &Route,
    key: &ScopeKey,
    tool: &str,
    headers: &HeaderMap,
    meta: Option<&RawValue>,
    era: Era,
) -> Result<Option<Arc<Schema>>, ListFailed> {
    match rt.gw.catalog.lookup(key, tool) {
        Lookup::Found(s) => return Ok(Some(s)),
        Lookup::Missing { relist: false } => return Ok(None),
        Lookup::Missing { relist: true } => {}
    }
    let asked = Instant::now();
    let lock = rt.gw.catalog.refresh_lock(key);
    let _one_listing_at_a_time = lock.lock().await;
    if !rt.gw.catalog.listed_since(key, asked) {
        list_all(rt, key, headers, meta, era).await?;
    }
    Ok(match rt.gw.catalog.lookup(key, tool) {
        Lookup::Found(s) => Some(s),
        Lookup::Missing { .. } => None,
    })
}

/// Lists every page of the scope's tools and replaces its catalog.
async fn list_all(
    rt: &Route,
    key: &ScopeKey,
    client_headers: &HeaderMap,
    meta: Option<&RawValue>,
    era: Era,
) -> Result<(), ListFailed> {
    let mut headers = client_headers.clone();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(
        ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    headers.remove(mcp::NAME_HEADER);
    if era == Era::Modern {
        headers.insert(
            mcp::METHOD_HEADER,
            HeaderValue::from_static(mcp::TOOLS_LIST),
        );
    } else {
        headers.remove(mcp::METHOD_HEADER);
    }
    let mut cursor: Option<Box<RawValue>> = None;
    let mut tools = Vec::new();
    for _ in 0..rt.gw.config.limits.max_list_pages.max(1) {
        let id = rt.gw.next_request_id();
        let mut params = BTreeMap::new();
        if let Some(c) = &cursor {
            params.insert("cursor", c.as_ref());
        }
        if let Some(m) = meta {
            params.insert("_meta", m);
        }
        let body = json!({"jsonrpc": "2.0", "id": id, "method": mcp::TOOLS_LIST, "params": params});
        let body = Bytes::from(serde_json::to_vec(&body).expect("a listing request serializes"));
        let resp = rt
            .up
            .send(Method::POST, &headers, body)
            .await
            .map_err(ListFailed::Unavailable)?;
        if !resp.status().is_success() {
            let (mut parts, body) = resp.into_parts();
            parts.headers = upstream::end_to_end(&parts.headers);
            return Err(ListFailed::Relay(Box::new(Response::from_parts(
                parts,
                axum::body::Body::new(body),
            ))));
        }
        let result = answer(rt, resp, &id).await?;
        let page = Page::parse(&result).map_err(ListFailed::Refused)?;
        tools.extend(page.tools);
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    tracing::debug!(upstream = %rt.up.name, tools = tools.len(), "listed tools for a scope");
    rt.gw.catalog.learn_all(key, tools);
    Ok(())
}

/// Reads the answer to toolgate's own request from a JSON body or an SSE stream.
async fn answer(
    rt: &Route,
    resp: http::Response<hyper::body::Incoming>,
    id: &str,
) -> Result<Box<RawValue>, ListFailed> {
    let is_sse = resp
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("text/event-stream"));
    let limits = &rt.gw.config.limits;
    let broke = |e: hyper::Error| {
        ListFailed::Unavailable(UpstreamError::Unreachable(format!(
            "the answer broke off: {e}"
        )))
    };
    let mut body = resp.into_body();
    if !is_sse {
        return match upstream::collect_upstream(body, limits.max_response_bytes)
            .await
            .map_err(broke)?
        {
            Collected::Whole(bytes) => match_answer(&bytes, id).unwrap_or_else(|| {
                Err(ListFailed::Refused(
                    "the answer is not a JSON-RPC response to the listing".into(),
                ))
            }),
            Collected::TooLarge(_) => Err(ListFailed::Refused(
                "the tools/list answer is over max_response_bytes".into(),
            )),
        };
    }
    let mut splitter = Splitter::new(limits.max_sse_event_bytes);
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(broke)?.into_data() else {
            continue;
        };
        splitter.push(&data);
        while let Some(split) = splitter.next_event() {
            let Split::Event(ev) = split else {
                return Err(ListFailed::Refused(
                    "an SSE event of the tools/list answer is over max_sse_event_bytes".into(),
                ));
            };
            if let Some(found) = sse::data(&ev).and_then(|d| match_answer(d.as_bytes(), id)) {
                return found;
            }
        }
    }
    Err(ListFailed::Unavailable(UpstreamError::Unreachable(
        "the stream ended without answering tools/list".into(),
    )))
}

/// `Some` when the message answers request `id`.
fn match_answer(bytes: &[u8], id: &str) -> Option<Result<Box<RawValue>, ListFailed>> {
    let Ok(Parsed::Single(m)) = jsonrpc::parse(bytes) else {
        return None;
    };
    let theirs: String = m.id.and_then(|i| serde_json::from_str(i.get()).ok())?;
    if m.method.is_some() || theirs != id {
        return None;
    }
    if let Some(r) = m.result {
        return Some(Ok(r.to_owned()));
    }
    let message = m
        .error
        .and_then(|e| serde_json::from_str::<Value>(e.get()).ok())
        .and_then(|e| e.get("message").and_then(Value::as_str).map(str::to_owned))
        .unwrap_or_else(|| "an error without a message".into());
    Some(Err(ListFailed::Refused(message)))
}

/// The original message with `params.arguments` replaced. Only coerced calls pay for this.
fn with_arguments(bytes: &[u8], args: &Value) -> Option<Bytes> {
    let mut top: BTreeMap<String, Box<RawValue>> = serde_json::from_slice(bytes).ok()?;
    let mut params: BTreeMap<String, Box<RawValue>> =
        serde_json::from_str(top.get("params")?.get()).ok()?;
    params.insert(
        "arguments".into(),
        serde_json::value::to_raw_value(args).ok()?,
    );
    top.insert(
        "params".into(),
        serde_json::value::to_raw_value(&params).ok()?,
    );
    serde_json::to_vec(&top).ok().map(Bytes::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coerced_arguments_replace_only_arguments() {
        let body = br#"{"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{"name":"add","arguments":{"a":"10","b":2},"_meta":{"progressToken":5}}}"#;
        let out = with_arguments(body, &json!({"a": 10, "b": 2})).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            json!({"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{"name":"add","arguments":{"a":10,"b":2},"_meta":{"progressToken":5}}})
        );
    }

    #[test]
    fn only_our_answer_matches() {
        assert!(
            match_answer(
                br#"{"jsonrpc":"2.0","id":"ours","result":{"tools":[]}}"#,
                "ours"
            )
            .is_some()
        );
        assert!(match_answer(br#"{"jsonrpc":"2.0","id":"theirs","result":{}}"#, "ours").is_none());
        assert!(
            match_answer(
                br#"{"jsonrpc":"2.0","method":"notifications/progress"}"#,
                "ours"
            )
            .is_none()
        );
    }
}
