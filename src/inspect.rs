//! What a server looks like to the gateway, for tools that judge it from outside (the
//! `toolgate check` command): its tools as the gateway lists them, and what the gateway makes
//! of each schema with the settings in force.

use crate::catalog::{CompileSettings, compile};
use crate::config::Config;
use crate::jsonrpc::footprint;
use crate::jsonrpc::items;
use crate::policy::held::ByteBudget;
use crate::transport::upstream::child::{ChildProcess, Within};
use crate::transport::upstream::event_stream::{EventStreamServer, Terms};
use crate::transport::upstream::http_client::HttpUpstream;
use crate::transport::upstream::own::{self, HttpSession, OwnRequests, Unresulted};
use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, Method};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;
use std::sync::Arc;

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
pub async fn tools_at_url(url: &str, cfg: &Config) -> Result<Vec<Entry>, CannotList> {
    let uri = crate::config::parse_upstream_url(url).map_err(|e| e.0)?;
    if cfg.upstream_transport == crate::config::UpstreamTransport::Sse {
        return tools_over_event_stream(uri, cfg).await;
    }
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
    let session = HttpSession::new(&up, headers.clone(), &cfg.limits);
    let listed = match own::handshake(&session, "toolgate-check-0", None).await {
        Ok(_) => pages(&session, cfg).await,
        Err(Unresulted::Status(400 | 404 | 405))
            if speaks_http_and_sse(&up, &headers, cfg).await =>
        {
            Err(CannotList(HTTP_AND_SSE.into()))
        }
        Err(e) => Err(refused_handshake(e)),
    };
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

/// The tools of a server of the HTTP+SSE transport at `uri`, listed in one session, as the
/// gateway reaches it (a child of its own).
async fn tools_over_event_stream(uri: http::Uri, cfg: &Config) -> Result<Vec<Entry>, CannotList> {
    let credential = crate::auth::upstream_credential(&cfg.auth).map_err(|e| e.0)?;
    let terms = Terms {
        credentials: crate::auth::carried(None, credential.as_ref()),
        limits: cfg.limits.clone(),
    };
    let server = EventStreamServer::new(uri, &cfg.upstream_tls).map_err(|e| e.to_string())?;
    let bounds = (cfg.limits.max_response_bytes, &answers_alone(cfg));
    let child = ChildProcess::connect(&Arc::new(server), terms, bounds, |_| {});
    let listed = listing(&Within(&child, cfg.limits.upstream_timeout), cfg).await;
    child.shutdown(cfg.stdio.shutdown_grace).await;
    listed
}

/// The tools of a stdio server `command` launches (initialize, every page), ended after; the
/// server is given `own_env`, its own variables, as the gateway gives them.
pub async fn tools_of_command(
    command: &[String],
    own_env: &[String],
    cfg: &Config,
) -> Result<Vec<Entry>, CannotList> {
    // Nothing it sends on its own matters to a listing.
    let answers = answers_alone(cfg);
    let child = ChildProcess::spawn(command, (cfg, own_env, &answers), |_| {})
        .map_err(|e| e.to_string())?;
    let listed = listing(&Within(&child, cfg.limits.upstream_timeout), cfg).await;
    child.shutdown(cfg.stdio.shutdown_grace).await;
    listed
}

/// What a listing's answers are counted in: its own bound, as a gateway's would be.
fn answers_alone(cfg: &Config) -> Arc<ByteBudget> {
    Arc::new(ByteBudget::new(cfg.limits.request_bytes_budget()))
}

/// What `check` says of a server of the HTTP+SSE transport given as a Streamable HTTP one.
const HTTP_AND_SSE: &str = "the server speaks the HTTP+SSE transport of 2024-11-05 (an event stream at this URL names where messages go), which the protocol replaced with Streamable HTTP in 2025-03-26; give upstream_transport = \"sse\" (--upstream-transport sse), or transport = \"sse\" in its [[upstreams]] entry";

/// Whether the server at `up` answers a GET with an event stream whose first event is an
/// `endpoint`, as a server of the HTTP+SSE transport does (and asked so after its POST was
/// refused, as the protocol has a client tell the two transports apart).
async fn speaks_http_and_sse(up: &HttpUpstream, headers: &HeaderMap, cfg: &Config) -> bool {
    let mut headers = headers.clone();
    headers.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
    headers.remove(CONTENT_TYPE);
    let first_event = async {
        let resp = (up.http)
            .send(Method::GET, headers, Bytes::new(), (&cfg.limits).into())
            .await
            .ok()?;
        let mut named = None;
        let max = cfg.limits.max_sse_event_bytes;
        crate::transport::sse::each_event(resp.into_body(), max, |ev| {
            named = Some(crate::transport::sse::name(ev) == "endpoint");
            false
        })
        .await;
        named
    };
    let wait = cfg.limits.upstream_timeout;
    matches!(
        tokio::time::timeout(wait, first_event).await,
        Ok(Some(true))
    )
}

/// A server's tools, as a client of the handshake era lists them: the handshake, then every
/// page of `tools/list` (at most `limits.max_list_pages`, as the gateway).
async fn listing<S: OwnRequests>(server: &S, cfg: &Config) -> Result<Vec<Entry>, CannotList> {
    own::handshake(server, "toolgate-check-0", None)
        .await
        .map_err(refused_handshake)?;
    pages(server, cfg).await
}

/// Why the handshake failed, for the operator.
fn refused_handshake(e: Unresulted) -> CannotList {
    match e {
        Unresulted::Status(s @ (401 | 403)) => CannotList(format!(
            "initialize: the server answered HTTP {s}: it wants credentials; give toolgate's in auth.upstream_header of a --config file"
        )),
        e => CannotList(format!("initialize: {e}")),
    }
}

/// One entry of a server's listing, as `check` judges it.
pub enum Entry {
    Read(Value),
    /// Not read: it would hold more than 64 MiB once read, which no tool definition needs
    /// (a schema of that much is not compiled). Its name, when it has one.
    Unread(Option<String>),
}

/// Every page of `tools/list`, after the handshake; each entry taken on its own.
async fn pages<S: OwnRequests>(server: &S, cfg: &Config) -> Result<Vec<Entry>, CannotList> {
    #[derive(Serialize)]
    struct ListRequest<'a> {
        jsonrpc: &'static str,
        id: &'a str,
        method: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        params: Option<Cursor<'a>>,
    }
    #[derive(Serialize)]
    struct Cursor<'a> {
        cursor: &'a RawValue,
    }
    #[derive(Deserialize)]
    struct Page<'a> {
        #[serde(borrow)]
        tools: Option<&'a RawValue>,
        #[serde(borrow, rename = "nextCursor")]
        next_cursor: Option<&'a RawValue>,
    }
    let mut tools = Vec::new();
    let mut cursor: Option<Box<RawValue>> = None;
    for page in 0..cfg.limits.max_list_pages {
        let id = format!("toolgate-check-list-{page}");
        let params = cursor.as_deref().map(|cursor| Cursor { cursor });
        let request = ListRequest {
            jsonrpc: "2.0",
            id: &id,
            method: "tools/list",
            params,
        };
        let request = serde_json::to_vec(&request).expect("a request serializes");
        let result = (server.ask(Bytes::from(request), &id).await)
            .map_err(|e| CannotList(format!("tools/list: {e}")))?;
        let page: Page<'_> = serde_json::from_str(result.get())
            .map_err(|e| CannotList(format!("tools/list: {e}")))?;
        if let Some(entries) = page.tools {
            // `tools` that is no array lists nothing, as a client reads it.
            let _ = items::each(entries.get(), |t| tools.push(entry(t)));
        }
        cursor = (page.next_cursor)
            .filter(|c| c.get() != "null")
            .map(ToOwned::to_owned);
        if cursor.is_none() {
            break;
        }
    }
    Ok(tools)
}

/// A listing's entry, read into a value unless it would hold too much once read.
fn entry(t: &RawValue) -> Entry {
    #[derive(Deserialize)]
    struct Named {
        name: Option<String>,
    }
    if footprint::affordable(t.get())
        && let Ok(value) = serde_json::from_str(t.get())
    {
        return Entry::Read(value);
    }
    Entry::Unread(
        serde_json::from_str::<Named>(t.get())
            .ok()
            .and_then(|n| n.name),
    )
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
    /// For a schema whose checks multiply with each level of a value, how deep a value is
    /// checked (`validate::Doubling`).
    pub levels: Option<usize>,
    /// Where its `pattern`s are that toolgate's engine cannot run, and so does not check.
    pub unchecked_patterns: Vec<String>,
    /// Where its `multipleOf` is a decimal fraction that validators dividing in binary
    /// floating point misjudge (`validate::decimal_multiples`).
    pub decimal_multiples: Vec<String>,
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
        levels: compiled.doubling().map(|d| d.levels),
        unchecked_patterns: compiled.unchecked_patterns().to_vec(),
        decimal_multiples: crate::validate::decimal_multiples(schema),
        uncompiled,
        open_places,
    }
}
