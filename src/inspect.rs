//! What a server looks like to the gateway, for tools that judge it from outside (the
//! `toolgate check` command): its tools as the gateway lists them, and what the gateway makes
//! of each schema with the settings in force.

use crate::catalog::{CompileSettings, compile};
use crate::config::Config;
use crate::transport::upstream::child::{ChildProcess, Within};
use crate::transport::upstream::http_client::HttpUpstream;
use crate::transport::upstream::own::{self, HttpSession, OwnRequests, Unresulted};
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, Method};
use serde_json::{Value, json};

/// Why a server's tools could not be listed: a sentence for the operator.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct CannotList(String);

impl From<String> for CannotList {
    fn from(why: String) -> CannotList {
        CannotList(why)
    }
}

/// The tools of the server at `url`, listed in a handshake-era session of toolgate's own
/// (initialize, every page, then the session ended).
pub async fn tools_at_url(url: &str, cfg: &Config) -> Result<Vec<Value>, CannotList> {
    let uri = crate::config::parse_upstream_url(url).map_err(|e| e.0)?;
    let up = HttpUpstream::new(uri, &cfg.upstream_tls).map_err(|e| e.to_string())?;
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(
        ACCEPT,
        HeaderValue::from_static("application/json, text/event-stream"),
    );
    if let Some((name, value)) = crate::auth::upstream_credential(&cfg.auth).map_err(|e| e.0)? {
        headers.insert(name, value);
    }
    let session = HttpSession::new(&up, headers, &cfg.limits);
    let listed = listing(&session, cfg).await;
    let headers = session.into_headers();
    if headers.contains_key(crate::mcp::SESSION_ID) {
        let wait = (&cfg.limits).into();
        let _ = up
            .http
            .send(Method::DELETE, headers, Bytes::new(), wait)
            .await;
    }
    listed
}

/// The tools of a stdio server `command` launches (initialize, every page), ended after; the
/// server is given `own_env`, its own variables, as the gateway gives them.
pub async fn tools_of_command(
    command: &[String],
    own_env: &[String],
    cfg: &Config,
) -> Result<Vec<Value>, CannotList> {
    // Nothing it sends on its own matters to a listing.
    let child = ChildProcess::spawn(command, (cfg, own_env), |_| {}).map_err(|e| e.to_string())?;
    let listed = listing(&Within(&child, cfg.limits.upstream_timeout), cfg).await;
    child.shutdown(cfg.stdio.shutdown_grace).await;
    listed
}

/// A server's tools, as a client of the handshake era lists them: the handshake, then every
/// page of `tools/list` (at most `limits.max_list_pages`, as the gateway).
async fn listing<S: OwnRequests>(server: &S, cfg: &Config) -> Result<Vec<Value>, CannotList> {
    own::handshake(server, "toolgate-check-0", None)
        .await
        .map_err(|e| match e {
            Unresulted::Status(s @ (401 | 403)) => CannotList(format!(
                "initialize: the server answered HTTP {s}: it wants credentials; give toolgate's in auth.upstream_header of a --config file"
            )),
            e => CannotList(format!("initialize: {e}")),
        })?;
    let mut tools = Vec::new();
    let mut cursor: Option<Value> = None;
    for page in 0..cfg.limits.max_list_pages {
        let id = format!("toolgate-check-list-{page}");
        let mut req = json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"});
        if let Some(c) = &cursor {
            req["params"] = json!({"cursor": c});
        }
        let result = server
            .ask(Bytes::from(req.to_string()), &id)
            .await
            .map_err(|e| CannotList(format!("tools/list: {e}")))?;
        let result: Value = serde_json::from_str(result.get())
            .map_err(|e| CannotList(format!("tools/list: {e}")))?;
        if let Some(page) = result.get("tools").and_then(Value::as_array) {
            tools.extend(page.iter().cloned());
        }
        cursor = result.get("nextCursor").filter(|c| !c.is_null()).cloned();
        if cursor.is_none() {
            break;
        }
    }
    Ok(tools)
}

/// What the gateway makes of one schema with the settings in force.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct SchemaReading {
    /// Why it is no valid tool schema (an `inputSchema` whose root is not an object, a
    /// misspelt type): the gateway hides such a tool from `tools/list`.
    pub invalid: Option<String>,
    /// Why no validator can be made of it (a remote `$ref`, a pattern the regex engine
    /// refuses, or what makes it invalid): calls follow `validation.on_compile_error`.
    pub uncompiled: Option<String>,
    /// Where properties are left open (no `additionalProperties`), for an input schema.
    pub open_places: Vec<String>,
}

/// Reads `schema` as the gateway compiles a tool's schema.
pub fn read_schema(schema: &Value, cfg: &Config) -> SchemaReading {
    let settings = CompileSettings::from_config(&cfg.limits, &cfg.validation);
    let compiled = compile(&schema.to_string(), &settings);
    let uncompiled = compiled.validator().err().map(ToString::to_string);
    let open_places = match (&compiled.invalid, &compiled.shape) {
        (None, Some(shape)) => shape.open_places(),
        _ => Vec::new(),
    };
    SchemaReading {
        invalid: compiled.invalid.clone(),
        uncompiled,
        open_places,
    }
}
