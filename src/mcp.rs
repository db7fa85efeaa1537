//! MCP vocabulary: method and header names, the two protocol eras, and the results toolgate
//! writes itself.

use http::HeaderName;
use serde_json::value::RawValue;
use serde_json::{Value, json};

pub const TOOLS_CALL: &str = "tools/call";
pub const TOOLS_LIST: &str = "tools/list";
pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
pub const RESOURCES_READ: &str = "resources/read";
pub const TASKS_RESULT: &str = "tasks/result";

// Header names as `HeaderName`s: looking a header up by `&str` parses the name every time.
pub const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
pub const PROTOCOL_VERSION: HeaderName = HeaderName::from_static("mcp-protocol-version");
pub const METHOD_HEADER: HeaderName = HeaderName::from_static("mcp-method");
pub const NAME_HEADER: HeaderName = HeaderName::from_static("mcp-name");

/// The first stateless revision. Versions sort as strings.
pub const MODERN_VERSION: &str = "2026-07-28";
/// The newest handshake revision, the one toolgate speaks when it initializes a server itself.
pub const LEGACY_VERSION: &str = "2025-11-25";
/// 2026-07-28: the server does not speak the requested version (`data.supported`,
/// `data.requested`, HTTP 400).
pub const UNSUPPORTED_VERSION: i64 = -32022;
pub(crate) const META_PROTOCOL_VERSION: &str = "io.modelcontextprotocol/protocolVersion";

/// Which rules a request follows; decided per request, because one endpoint serves both.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Era {
    /// 2025-11-25 and earlier: sessions, JSON-RPC errors over HTTP 200.
    Legacy,
    /// 2026-07-28: stateless, `resultType` on results, HTTP status follows the error code.
    Modern,
}

impl Era {
    /// Reads the era from the `MCP-Protocol-Version` header, or failing that from whether
    /// the body names the version in its `_meta` envelope (`jsonrpc::Message::names_version`,
    /// asked only then: it may search the body's text).
    pub fn detect(version_header: Option<&str>, body_names_version: impl FnOnce() -> bool) -> Era {
        if let Some(v) = version_header {
            return if v >= MODERN_VERSION {
                Era::Modern
            } else {
                Era::Legacy
            };
        }
        match body_names_version() {
            true => Era::Modern,
            false => Era::Legacy,
        }
    }

    /// The HTTP status for a JSON-RPC error toolgate answers with. The legacy era sends
    /// errors over 200; the modern one maps the code (spec 2026-07-28, streamable HTTP).
    pub fn status_for(self, code: i64) -> http::StatusCode {
        match (self, code) {
            (Era::Legacy, _) => http::StatusCode::OK,
            (Era::Modern, -32601) => http::StatusCode::NOT_FOUND,
            (Era::Modern, -32700 | -32600 | -32602 | -32020 | -32021 | -32022) => {
                http::StatusCode::BAD_REQUEST
            }
            (Era::Modern, _) => http::StatusCode::OK,
        }
    }
}

/// What toolgate says about itself when it opens a conversation with a server.
pub(crate) fn client_info() -> Value {
    json!({"name": "toolgate", "version": env!("CARGO_PKG_VERSION")})
}

/// The legacy handshake's first request, for a connection toolgate opens itself.
pub fn initialize_request(id: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": {
        "protocolVersion": LEGACY_VERSION, "capabilities": {}, "clientInfo": client_info()}})
}

/// `server/discover` in the 2026-07-28 envelope: the question that tells a server of that era
/// from a legacy-only one (which answers "method not found"), and that settles the era of a
/// dual-era stdio server, which takes it from the first request it reads.
pub fn discover_request(id: &str) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "server/discover", "params": {"_meta": {
        META_PROTOCOL_VERSION: MODERN_VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": client_info(),
    }}})
}

/// A `CallToolResult` reporting a failure the model should read: `isError` with one text
/// block, machine-readable details under `_meta` (never in `structuredContent`, which clients
/// check against `outputSchema`).
pub fn tool_error(era: Era, text: String, meta: Option<(&str, Value)>) -> Value {
    let mut result = json!({
        "content": [{"type": "text", "text": text}],
        "isError": true,
    });
    if let Some((key, details)) = meta {
        result["_meta"] = json!({ key: details });
    }
    if era == Era::Modern {
        result["resultType"] = json!("complete");
    }
    result
}

/// Where a message names a progress token: a request in its `_meta`, a
/// `notifications/progress` in its params.
#[derive(serde::Deserialize)]
struct Progress<'a> {
    #[serde(borrow)]
    params: Option<ProgressParams<'a>>,
}

#[derive(serde::Deserialize)]
struct ProgressParams<'a> {
    #[serde(borrow, rename = "_meta")]
    meta: Option<ProgressMeta<'a>>,
    /// A progress notification's.
    #[serde(borrow, rename = "progressToken")]
    token: Option<&'a RawValue>,
}

#[derive(serde::Deserialize)]
struct ProgressMeta<'a> {
    #[serde(borrow, rename = "progressToken")]
    token: Option<&'a RawValue>,
}

/// A request's progress token, read from its bytes: a `tools/call`'s params have been taken
/// by the guard.
pub(crate) fn progress_token(body: &[u8]) -> Option<Box<RawValue>> {
    if !crate::text::holds!(body, "progressToken") {
        return None;
    }
    serde_json::from_slice::<Progress<'_>>(body)
        .ok()
        .and_then(|p| p.params?.meta?.token.map(ToOwned::to_owned))
}

/// The token a `notifications/progress` names, read from its bytes (`None` for any other
/// message).
pub(crate) fn progress_of(notification: &[u8]) -> Option<Box<RawValue>> {
    if !crate::text::holds!(notification, "notifications/progress") {
        return None;
    }
    serde_json::from_slice::<Progress<'_>>(notification)
        .ok()
        .and_then(|p| p.params?.token.map(ToOwned::to_owned))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn era_from_header_or_meta() {
        let unasked = || unreachable!("the header decides");
        assert_eq!(Era::detect(Some("2025-11-25"), unasked), Era::Legacy);
        assert_eq!(Era::detect(Some("2026-07-28"), unasked), Era::Modern);
        assert_eq!(Era::detect(None, || true), Era::Modern);
        assert_eq!(Era::detect(None, || false), Era::Legacy);
    }

    #[test]
    fn modern_tool_errors_carry_result_type() {
        let r = tool_error(Era::Modern, "x".into(), None);
        assert_eq!(r["resultType"], "complete");
        assert_eq!(
            tool_error(Era::Legacy, "x".into(), None).get("resultType"),
            None
        );
    }
}
