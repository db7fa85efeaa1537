//! The 2026-07-28 header rules, for modern requests over HTTP: `MCP-Protocol-Version`,
//! `Mcp-Method` and `Mcp-Name` mirror the body and must match it (HTTP 400, `-32020`). An
//! intermediary that routes or filters on headers must not trust them unchecked; toolgate
//! decides on the body, and refuses a request whose headers say something else.

use crate::jsonrpc::{self, Message, Params};
use crate::mcp;
use http::{HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;

pub const HEADER_MISMATCH: i64 = -32020;

#[derive(Deserialize, Default)]
struct Named<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    uri: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "_meta")]
    meta: Option<&'a RawValue>,
}

/// Sets the headers a 2026-07-28 request mirrors from its body, for a message toolgate
/// sends upstream itself (from a stdio client, which has no headers): the version, the method
/// and, for the methods that name something, that name.
pub fn mirror(headers: &mut HeaderMap, m: &Message<'_>) {
    let mut set = |name: http::HeaderName, value: &str| {
        if let Ok(v) = HeaderValue::from_str(&encode(value)) {
            headers.insert(name, v);
        }
    };
    set(mcp::PROTOCOL_VERSION, mcp::MODERN_VERSION);
    let Some(method) = m.method() else { return };
    set(mcp::METHOD_HEADER, method);
    let params = match &m.params {
        Some(Params::Call(call)) => Named {
            name: Some(call.name.clone()),
            ..Named::default()
        },
        Some(Params::Raw(raw)) => serde_json::from_str(raw.get()).unwrap_or_default(),
        None => Named::default(),
    };
    let named = match method {
        "tools/call" | "prompts/get" => params.name.as_deref(),
        "resources/read" => params.uri.as_deref(),
        _ => None,
    };
    if let Some(n) = named {
        set(mcp::NAME_HEADER, n);
    }
}

/// Which header does not say what a 2026-07-28 body says, for the `-32020` message.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum Mismatch {
    #[error("MCP-Protocol-Version header {header:?} does not match _meta protocolVersion {body:?}")]
    Version { header: String, body: String },
    #[error("the MCP-Protocol-Version header is missing")]
    NoVersion,
    #[error("the Mcp-Method header is missing")]
    NoMethod,
    #[error("Mcp-Method header {header:?} does not match the method {method:?}")]
    Method { header: String, method: String },
    #[error("the Mcp-Name header is missing for {0}")]
    NoName(String),
    #[error("Mcp-Name header {header:?} does not match {body:?}")]
    Name { header: String, body: String },
    /// Two values of one mirrored header: a hop that reads the last, or joins them, would
    /// see another value than the one checked.
    #[error("the {0} header appears more than once")]
    Repeated(&'static str),
}

/// `Err` says which header does not match.
pub fn check(headers: &HeaderMap, m: &Message<'_>) -> Result<(), Mismatch> {
    let header = |name: http::HeaderName, shown: &'static str| {
        let mut values = headers.get_all(name).iter();
        let first = values.next();
        match values.next() {
            Some(_) => Err(Mismatch::Repeated(shown)),
            None => Ok(first.and_then(|v| v.to_str().ok()).map(decoded)),
        }
    };
    let (params, version) = match &m.params {
        Some(Params::Call(call)) => {
            let name = Some(call.name.clone());
            let named = Named {
                name,
                ..Named::default()
            };
            (named, call.meta_version())
        }
        Some(Params::Raw(raw)) => {
            let named: Named = serde_json::from_str(raw.get()).unwrap_or_default();
            let version = named.meta.and_then(|m| jsonrpc::meta_version(m.get()));
            (named, version)
        }
        None => (Named::default(), None),
    };
    match (
        header(mcp::PROTOCOL_VERSION, "MCP-Protocol-Version")?,
        version.as_deref(),
    ) {
        (Some(h), Some(b)) if h != b => {
            return Err(Mismatch::Version {
                header: h.into_owned(),
                body: b.to_owned(),
            });
        }
        (None, Some(_)) => return Err(Mismatch::NoVersion),
        _ => {}
    }
    let Some(method) = m.method() else {
        return Ok(());
    };
    match header(mcp::METHOD_HEADER, "Mcp-Method")? {
        None => return Err(Mismatch::NoMethod),
        Some(h) if h != method => {
            return Err(Mismatch::Method {
                header: h.into_owned(),
                method: method.to_owned(),
            });
        }
        Some(_) => {}
    }
    let named = match method {
        "tools/call" | "prompts/get" => params.name.as_deref(),
        "resources/read" => params.uri.as_deref(),
        _ => return Ok(()),
    };
    match (header(mcp::NAME_HEADER, "Mcp-Name")?, named) {
        (None, _) => Err(Mismatch::NoName(method.to_owned())),
        (Some(h), Some(b)) if h != b => Err(Mismatch::Name {
            header: h.into_owned(),
            body: b.to_owned(),
        }),
        _ => Ok(()),
    }
}

/// Header values that are not plain visible ASCII travel as `=?base64?...?=` (2026-07-28);
/// any other is what it says, compared where it lies.
fn decoded(v: &str) -> Cow<'_, str> {
    match v
        .strip_prefix("=?base64?")
        .and_then(|r| r.strip_suffix("?="))
    {
        Some(b64) => base64_decode(b64)
            .and_then(|b| String::from_utf8(b).ok())
            .map_or(Cow::Borrowed(v), Cow::Owned),
        None => Cow::Borrowed(v),
    }
}

/// A header value as 2026-07-28 carries it: as it is when it is plain visible ASCII,
/// `=?base64?…?=` otherwise, and when it starts or ends with a space (which HTTP trims).
fn encode(v: &str) -> String {
    let visible = v.bytes().all(|b| b.is_ascii_graphic() || b == b' ');
    let trimmed = !v.starts_with(' ') && !v.ends_with(' ');
    if visible && trimmed && !v.starts_with("=?base64?") {
        return v.to_owned();
    }
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::from("=?base64?");
    for chunk in v.as_bytes().chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out.push_str("?=");
    out
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => Some(c - b'A'),
        b'a'..=b'z' => Some(c - b'a' + 26),
        b'0'..=b'9' => Some(c - b'0' + 52),
        b'+' | b'-' => Some(62),
        b'/' | b'_' => Some(63),
        _ => None,
    };
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    let (mut acc, mut bits) = (0u32, 0);
    for c in s.bytes().filter(|c| *c != b'=') {
        acc = (acc << 6) | u32::from(val(c)?);
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {

    #[test]
    fn values_that_are_not_plain_ascii_travel_in_base64() {
        for v in [
            "weather",
            "café ☕",
            "a\nb",
            "=?base64?x?=",
            " padded ",
            "a b",
        ] {
            assert_eq!(decoded(&encode(v)), v, "{v}");
        }
        assert_eq!(encode("a b"), "a b");
        assert!(encode(" padded").starts_with("=?base64?"));
        assert!(encode("padded ").starts_with("=?base64?"));
        assert_eq!(encode("weather"), "weather");
        assert_eq!(encode("é"), "=?base64?w6k=?=");
    }
    use super::*;
    use crate::jsonrpc::{Body, parse};

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    const CALL: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"café","arguments":{},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;

    #[test]
    fn headers_must_mirror_the_body() {
        let Ok(Body::Single(m)) = parse(CALL.as_bytes()) else {
            panic!()
        };
        let ok = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?Y2Fmw6k=?="),
        ];
        assert_eq!(check(&headers(&ok), &m), Ok(()));
        let wrong_name = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "cafe"),
        ];
        assert!(
            check(&headers(&wrong_name), &m)
                .unwrap_err()
                .to_string()
                .contains("Mcp-Name")
        );
        let wrong_method = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/list"),
            ("mcp-name", "=?base64?Y2Fmw6k=?="),
        ];
        assert!(
            check(&headers(&wrong_method), &m)
                .unwrap_err()
                .to_string()
                .contains("Mcp-Method")
        );
        let wrong_version = [
            ("mcp-protocol-version", "2026-08-01"),
            ("mcp-method", "tools/call"),
        ];
        assert!(
            check(&headers(&wrong_version), &m)
                .unwrap_err()
                .to_string()
                .contains("MCP-Protocol-Version")
        );
        assert!(
            check(&headers(&[("mcp-protocol-version", "2026-07-28")]), &m)
                .unwrap_err()
                .to_string()
                .contains("missing")
        );
        for name in ["mcp-protocol-version", "mcp-method", "mcp-name"] {
            let mut twice = headers(&ok);
            twice.append(
                http::HeaderName::from_static(name),
                HeaderValue::from_static("other"),
            );
            let e = check(&twice, &m).unwrap_err();
            assert!(matches!(e, Mismatch::Repeated(_)), "{name}: {e}");
            assert!(
                e.to_string().ends_with("header appears more than once"),
                "{e}"
            );
        }
    }

    #[test]
    fn base64_decodes() {
        assert_eq!(base64_decode("aGVsbG8gd29ybGQ=").unwrap(), b"hello world");
        assert_eq!(decoded("plain"), "plain");
    }
}
