//! The era bridge: 2026-07-28 requests served by a server that speaks only the handshake era
//! (docs/contract.md §5, "Eras bridged").
//!
//! toolgate opens the server with `initialize` itself and keeps its answer. From that answer it
//! writes the `server/discover` result a 2026-07-28 client asks for first. Requests go to the
//! server without the 2026-07-28 keys in `_meta`, which an older server may refuse or
//! misread. Results come back with the `resultType: "complete"` that 2026-07-28 requires on
//! every result and that a handshake-era server never writes. What has no counterpart in the
//! handshake era is refused here, naming what cannot be bridged.

use super::subscriptions::{self, BadResource, Filter, Subscription};
use crate::jsonrpc::{self, footprint, splice};
use crate::locks::MutexExt;
use crate::lograte::{LogRate, warn_at_rate};
use crate::mcp;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// The `_meta` keys that make up the 2026-07-28 envelope; an older server has no use for
/// them. Every key under this prefix is reserved by the spec.
const ENVELOPE_PREFIX: &str = "io.modelcontextprotocol/";

/// What the bridge does with one request before it goes to the server.
pub enum Bridged {
    /// Send these bytes.
    Forward(Bytes),
    /// toolgate answers: `(JSON-RPC error code or none, the whole response)`.
    Answer(Option<i64>, Vec<u8>),
    /// A `subscriptions/listen` stream, which toolgate serves from its session with the
    /// server (`pipeline::subscriptions`).
    Subscribe(Box<Subscription>),
}

#[derive(Deserialize)]
struct Initialized {
    #[serde(default)]
    capabilities: Option<Box<RawValue>>,
    #[serde(default, rename = "serverInfo")]
    server_info: Option<Box<RawValue>>,
    #[serde(default)]
    instructions: Option<String>,
}

impl Initialized {
    /// A server's `initialize` result, read; empty when it is not one.
    fn of(init: &RawValue) -> Initialized {
        serde_json::from_str(init.get()).unwrap_or(Initialized {
            capabilities: None,
            server_info: None,
            instructions: None,
        })
    }
}

/// The `server/discover` result for a server whose `initialize` result is `init`.
pub fn discover_result(init: &RawValue) -> Value {
    let init = Initialized::of(init);
    let mut result = json!({
        "supportedVersions": [mcp::MODERN_VERSION],
        "capabilities": capabilities_of(init.capabilities.as_deref()),
        "resultType": "complete",
        "ttlMs": 0,
        "cacheScope": "private",
    });
    if let Some(text) = init.instructions {
        result["instructions"] = Value::String(text);
    }
    if let Some(info) = readable(init.server_info.as_deref()) {
        result["_meta"] = json!({ "io.modelcontextprotocol/serverInfo": info });
    }
    result
}

/// A member of a server's own say of itself, read into a value to be completed, unless it is
/// no JSON or would hold too much once read (a server answers its handshake once, and each
/// client's discovery would read it again).
fn readable(member: Option<&RawValue>) -> Option<Value> {
    let member = member.filter(|m| footprint::affordable(m.get()))?;
    serde_json::from_str(member.get()).ok()
}

/// A server's capabilities as a value: whole, or, where the whole would hold too much once
/// read, the features MCP names that would not (an `experimental` too costly to read is left
/// out, not the tools with it).
fn capabilities_of(capabilities: Option<&RawValue>) -> Value {
    #[derive(Deserialize)]
    struct Named<'a> {
        #[serde(borrow)]
        tools: Option<&'a RawValue>,
        #[serde(borrow)]
        resources: Option<&'a RawValue>,
        #[serde(borrow)]
        prompts: Option<&'a RawValue>,
        #[serde(borrow)]
        logging: Option<&'a RawValue>,
        #[serde(borrow)]
        completions: Option<&'a RawValue>,
        #[serde(borrow)]
        tasks: Option<&'a RawValue>,
    }
    if let Some(whole) = readable(capabilities) {
        return whole;
    }
    let Some(n) = capabilities.and_then(|c| serde_json::from_str::<Named>(c.get()).ok()) else {
        return json!({});
    };
    let named = [
        ("tools", n.tools),
        ("resources", n.resources),
        ("prompts", n.prompts),
        ("logging", n.logging),
        ("completions", n.completions),
        ("tasks", n.tasks),
    ];
    let kept = named
        .into_iter()
        .filter_map(|(name, feature)| Some((name.to_string(), readable(feature)?)));
    Value::Object(kept.collect())
}

#[derive(Deserialize)]
struct Request<'a> {
    #[serde(borrow)]
    params: Option<Envelope<'a>>,
}

#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, rename = "_meta")]
    meta: Option<EnvelopeMeta<'a>>,
}

#[derive(Deserialize)]
struct EnvelopeMeta<'a> {
    #[serde(borrow, rename = "io.modelcontextprotocol/protocolVersion")]
    version: Option<std::borrow::Cow<'a, str>>,
    #[serde(borrow, rename = "io.modelcontextprotocol/clientCapabilities")]
    capabilities: Option<&'a RawValue>,
}

/// What a 2026-07-28 server checks on every request before it dispatches: the envelope is
/// whole, and names the version it serves.
fn envelope_problem(bytes: &[u8]) -> Option<(i64, String, Option<Value>)> {
    let meta = serde_json::from_slice::<Request<'_>>(bytes)
        .ok()
        .and_then(|r| r.params?.meta);
    let invalid = |what: &str| {
        Some((
            jsonrpc::INVALID_PARAMS,
            format!("Invalid params: _meta must carry io.modelcontextprotocol/{what}"),
            None,
        ))
    };
    let Some(meta) = meta else {
        return invalid("protocolVersion");
    };
    let Some(version) = meta.version else {
        return invalid("protocolVersion");
    };
    if version != mcp::MODERN_VERSION {
        return Some((
            mcp::UNSUPPORTED_VERSION,
            format!("Unsupported protocol version: {version}"),
            Some(json!({"supported": [mcp::MODERN_VERSION], "requested": version})),
        ));
    }
    if meta.capabilities.is_none() {
        return invalid("clientCapabilities");
    }
    None
}

/// Methods 2026-07-28 removed: a 2026-07-28 server answers them "method not found", and so
/// does the bridge (the handshake is toolgate's, not the client's).
fn removed(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "logging/setLevel"
            | "resources/subscribe"
            | "resources/unsubscribe"
    )
}

/// The answer to a 2026-07-28 request for a method that era removed (`-32601`, naming it),
/// when `method` is one.
pub fn removed_method(method: &str, id: Option<&RawValue>) -> Option<Vec<u8>> {
    removed(method).then(|| {
        let message =
            format!("Method not found: {method} is not part of protocol version 2026-07-28");
        jsonrpc::error_response(id, jsonrpc::METHOD_NOT_FOUND, &message, None)
    })
}

/// Decides one 2026-07-28 request (`bytes`, its id `id`) for a server whose `initialize`
/// result is `init`.
pub fn request(method: &str, id: Option<&RawValue>, bytes: &[u8], init: &RawValue) -> Bridged {
    let error = |code: i64, message: &str, data: Option<&Value>| {
        Bridged::Answer(Some(code), jsonrpc::error_response(id, code, message, data))
    };
    // The method first, as a 2026-07-28 server dispatches before it reads the envelope.
    if let Some(answer) = removed_method(method, id) {
        return Bridged::Answer(Some(jsonrpc::METHOD_NOT_FOUND), answer);
    }
    if let Some((code, message, data)) = envelope_problem(bytes) {
        return error(code, &message, data.as_ref());
    }
    if method == subscriptions::LISTEN {
        let (Some(id), filter) = (id, Filter::of(bytes)) else {
            return error(
                jsonrpc::INVALID_REQUEST,
                "subscriptions/listen is a request",
                None,
            );
        };
        return match filter {
            Ok(f) => Bridged::Subscribe(Box::new(Subscription {
                id: id.to_owned(),
                filter: f.announced_by(&capabilities_of(
                    Initialized::of(init).capabilities.as_deref(),
                )),
            })),
            Err(why) => error(jsonrpc::INVALID_PARAMS, &why.to_string(), None),
        };
    }
    if method == "server/discover" {
        let result = discover_result(init);
        return match id {
            Some(id) => Bridged::Answer(None, jsonrpc::result_response(id, &result)),
            None => error(
                jsonrpc::INVALID_REQUEST,
                "server/discover is a request",
                None,
            ),
        };
    }
    Bridged::Forward(strip_envelope(Bytes::copy_from_slice(bytes)))
}

/// The request without the 2026-07-28 keys in `params._meta` (a listing toolgate sends for a
/// bridged client carries that client's `_meta`).
pub fn strip_envelope(bytes: Bytes) -> Bytes {
    without_envelope(&bytes).map_or(bytes, Bytes::from)
}

/// The request with the 2026-07-28 keys taken out of `params._meta` (and an emptied `_meta`
/// removed); `None` when there is nothing to take out.
fn without_envelope(bytes: &[u8]) -> Option<Vec<u8>> {
    #[derive(Deserialize)]
    struct Top<'a> {
        #[serde(borrow)]
        params: Option<BTreeMap<&'a str, &'a RawValue>>,
    }
    let top: Top<'_> = serde_json::from_slice(bytes).ok()?;
    let mut params = top.params?;
    let meta: BTreeMap<&str, &RawValue> = serde_json::from_str(params.get("_meta")?.get()).ok()?;
    let kept: BTreeMap<&str, &RawValue> = meta
        .into_iter()
        .filter(|(k, _)| !k.starts_with(ENVELOPE_PREFIX))
        .collect();
    let kept = serde_json::value::to_raw_value(&kept).ok()?;
    if kept.get() == "{}" {
        params.remove("_meta");
    } else {
        params.insert("_meta", &kept);
    }
    let params = serde_json::value::to_raw_value(&params).ok()?;
    jsonrpc::replace_at(bytes, &["params"], &params)
}

/// What a 2026-07-28 result must carry beyond what a handshake-era server writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// `resultType`.
    Plain,
    /// `resultType`, for a server of the 2026-07-28 era that left it out: added only where
    /// the name appears nowhere in the answer, so a conforming server's answers pass unread.
    Native,
    /// `resultType`, and the caching directives (`ttlMs`, `cacheScope`) of a cacheable result.
    Cacheable,
}

impl Completion {
    pub fn of(method: &str) -> Completion {
        match method {
            "tools/list"
            | "prompts/list"
            | "resources/list"
            | "resources/templates/list"
            | "resources/read" => Completion::Cacheable,
            _ => Completion::Plain,
        }
    }
}

/// The answer to `pending` as its client reads it: completed where it lacks what its era
/// requires ([`super::Pending::completion`]).
pub fn complete(pending: &super::Pending, answer: Bytes) -> Bytes {
    match pending.completion() {
        Some(c) => self::answer(answer, c),
        None => answer,
    }
}

/// The server's answer as a 2026-07-28 client reads it: a result gains `resultType:
/// "complete"`, and a cacheable one `ttlMs: 0` with `cacheScope: "private"`, when it has
/// none. Nothing may be cached: a handshake-era server says that its lists changed on a
/// session's stream, which a 2026-07-28 client does not have. A result that asks for input
/// (`inputRequests`) or starts a task (`task`) without saying so is left as it is: its type
/// is not sure.
pub fn answer(bytes: Bytes, completion: Completion) -> Bytes {
    if completion == Completion::Native && crate::text::holds!(&bytes, "\"resultType\"") {
        return bytes;
    }
    let Ok(text) = std::str::from_utf8(&bytes) else {
        return bytes;
    };
    // The members read, a bit each in this order; the first three are completed, written so.
    const NAMES: [&str; 5] = ["resultType", "ttlMs", "cacheScope", "inputRequests", "task"];
    const MEMBERS: [&str; 3] = [
        r#""resultType":"complete""#,
        r#""ttlMs":0"#,
        r#""cacheScope":"private""#,
    ];
    const TYPED: u32 = 1;
    const CACHE: u32 = 2 | 4;
    const UNSURE: u32 = 8 | 16;
    let Some((result, present)) = splice::result_names(text, &NAMES) else {
        return bytes;
    };
    if present & UNSURE != 0 && present & TYPED == 0 {
        return bytes;
    }
    let wanted = match completion {
        Completion::Cacheable => TYPED | CACHE,
        _ => TYPED,
    };
    let missing: Vec<&str> = (0..MEMBERS.len())
        .filter(|i| wanted & !present & (1 << i) != 0)
        .map(|i| MEMBERS[i])
        .collect();
    if missing.is_empty() {
        return bytes;
    }
    Bytes::from(splice::with_members_first(text, result, &missing.join(",")))
}

/// The other way: a handshake-era client in front of a server that speaks only 2026-07-28.
///
/// toolgate answers the client's `initialize` from the server's `server/discover`, and puts
/// on each of the client's requests the `_meta` envelope its `initialize` said once: the
/// version, the client's capabilities and who it is, and the log level it asked for.
/// `ping` and `logging/setLevel` (removed in 2026-07-28) are answered here; resource
/// subscriptions cannot be bridged and are refused by name. Results reach the client with
/// the 2026-07-28 members (`resultType`, `ttlMs`, …), which handshake-era clients ignore.
pub struct Reverse {
    /// The envelope's members, as JSON text by key.
    envelope: std::sync::Mutex<BTreeMap<&'static str, Box<RawValue>>>,
    /// toolgate's questions to the client when the server asks for input.
    pub(crate) asked: super::asked::Asked,
    /// The resources the client subscribed to, which the stream toolgate follows the server
    /// with names (`upstream::announced`).
    followed: Followed,
}

/// The resources a handshake-era client subscribed to (`resources/subscribe`), which
/// toolgate's `subscriptions/listen` stream with the server names; each change is counted,
/// and the stream is opened again with them.
struct Followed {
    resources: std::sync::Mutex<std::collections::BTreeSet<Box<str>>>,
    changes: tokio::sync::watch::Sender<u64>,
}

/// The most bytes of a client's `capabilities` or `clientInfo` that the reverse bridge keeps
/// and sends with each of its requests.
const MAX_ENVELOPE_MEMBER: usize = 16 * 1024;

/// How often the log says that a client's handshake member was over
/// [`MAX_ENVELOPE_MEMBER`]: a client may send its handshake again and again.
static OVERSIZED_SAID: LogRate = LogRate::new();

/// What a 2026-07-28 client says of itself in its envelope, as toolgate's handshake with a
/// server of the handshake era carries it: its capabilities (what the server may ask of it,
/// which the bridge turns into input-required rounds) and its `clientInfo`. Each is kept only
/// up to [`MAX_ENVELOPE_MEMBER`] bytes.
#[derive(Default)]
pub struct Declared {
    pub capabilities: Option<Box<RawValue>>,
    pub client_info: Option<Box<RawValue>>,
}

impl Declared {
    /// From a 2026-07-28 request's envelope.
    pub fn of(m: &jsonrpc::Message<'_>) -> Declared {
        #[derive(Deserialize)]
        struct Params {
            #[serde(rename = "_meta")]
            meta: Option<Box<RawValue>>,
        }
        match &m.params {
            Some(jsonrpc::Params::Call(call)) => Declared::of_meta(call.meta),
            Some(jsonrpc::Params::Raw(params)) => {
                let meta = serde_json::from_str::<Params>(params.get())
                    .ok()
                    .and_then(|p| p.meta);
                Declared::of_meta(meta.as_deref().map(RawValue::get))
            }
            None => Declared::default(),
        }
    }

    fn of_meta(meta: Option<&str>) -> Declared {
        #[derive(Deserialize)]
        struct Meta {
            #[serde(rename = "io.modelcontextprotocol/clientCapabilities")]
            capabilities: Option<Box<RawValue>>,
            #[serde(rename = "io.modelcontextprotocol/clientInfo")]
            client_info: Option<Box<RawValue>>,
        }
        let Some(m) = meta.and_then(|m| serde_json::from_str::<Meta>(m).ok()) else {
            return Declared::default();
        };
        let small = |v: Option<Box<RawValue>>| v.filter(|v| v.get().len() <= MAX_ENVELOPE_MEMBER);
        Declared {
            capabilities: small(m.capabilities).and_then(|c| askable(&c)),
            client_info: small(m.client_info),
        }
    }

    /// The capabilities a server of the handshake era is told, as JSON text (`""`: none).
    pub fn capabilities_text(&self) -> &str {
        self.capabilities.as_deref().map_or("", RawValue::get)
    }

    /// The `initialize` params of a handshake opened for this client: what it says of itself
    /// goes as kept, never read into a value (which holds no number past f64).
    pub fn initialize_params(&self) -> Box<RawValue> {
        #[derive(Serialize)]
        struct Params<'a> {
            #[serde(rename = "protocolVersion")]
            version: &'a str,
            capabilities: &'a RawValue,
            #[serde(rename = "clientInfo")]
            client_info: &'a RawValue,
        }
        let none = empty_object();
        let toolgate = written(&mcp::client_info());
        written(&Params {
            version: mcp::LEGACY_VERSION,
            capabilities: self.capabilities.as_deref().unwrap_or(&none),
            client_info: self.client_info.as_deref().unwrap_or(&toolgate),
        })
    }
}

/// Of a 2026-07-28 client's capabilities, what a server of the handshake era may be told:
/// all of them, but that its roots change with a notification, which such a client never
/// sends. A server asks for roots outside any request too (on the session's own stream, or a
/// child's stdout): the bridged call waiting then carries the question (none, when several
/// wait), and one asked while none waits goes unanswered. `None` when nothing is left.
///
/// Written one way whatever the client's spacing and order (clients that declare the same
/// capabilities share a stdio server's child), each member as a value writes it, or as it
/// came where no value holds it (a number past f64).
fn askable(capabilities: &RawValue) -> Option<Box<RawValue>> {
    type Members = BTreeMap<String, Box<RawValue>>;
    let mut caps: Members = serde_json::from_str(capabilities.get()).ok()?;
    if let Some(roots) = caps.get_mut("roots")
        && let Ok(mut members) = serde_json::from_str::<Members>(roots.get())
    {
        members.remove("listChanged");
        *roots = written(&members);
    }
    for member in caps.values_mut() {
        if let Ok(v) = serde_json::from_str::<Value>(member.get()) {
            *member = written(&v);
        }
    }
    (!caps.is_empty()).then(|| written(&caps))
}

/// `v` as JSON text.
fn written<T: Serialize + ?Sized>(v: &T) -> Box<RawValue> {
    serde_json::value::to_raw_value(v).expect("JSON values and texts serialize")
}

/// `{}`, what a client that says nothing of itself is taken to have said.
fn empty_object() -> Box<RawValue> {
    RawValue::from_string("{}".into()).expect("an object")
}

/// What a server of the handshake era may ask its client in the middle of a request, which a
/// 2026-07-28 client is asked as an input-required round (SEP-2322).
const QUESTIONS: [&str; 3] = ["elicitation/create", "sampling/createMessage", "roots/list"];

/// A server's question to its client, read from one message on a request's stream.
pub struct Question {
    pub id: Box<RawValue>,
    pub method: String,
    pub params: Option<Box<RawValue>>,
}

impl Question {
    /// The question's name in `inputRequests` and `inputResponses`: its id, as text.
    pub fn key(&self) -> String {
        Question::key_of(&self.id)
    }

    /// The name of the question whose id is `id`.
    pub fn key_of(id: &RawValue) -> String {
        serde_json::from_str::<String>(id.get()).unwrap_or_else(|_| id.get().to_owned())
    }
}

/// `data`, when it is a question of [`QUESTIONS`].
pub fn question(data: &[u8]) -> Option<Question> {
    let Ok(jsonrpc::Body::Single(m)) = jsonrpc::parse(data) else {
        return None;
    };
    let method = m.method().filter(|name| QUESTIONS.contains(name))?;
    Some(Question {
        id: m.id?.to_owned(),
        method: method.to_owned(),
        params: m.raw_params().map(ToOwned::to_owned),
    })
}

/// The answer to request `id` that asks its client `q`: an `InputRequiredResult` whose
/// `requestState` is `state`.
pub fn input_required(id: &RawValue, q: &Question, state: &str) -> Vec<u8> {
    /// The question as the server asked it: its params as they came, never read into a
    /// value (a server's params may be as large as its message).
    #[derive(Serialize)]
    struct Asked<'a> {
        method: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        params: Option<&'a RawValue>,
    }
    #[derive(Serialize)]
    struct InputRequired<'a> {
        #[serde(rename = "inputRequests")]
        input_requests: BTreeMap<String, Asked<'a>>,
        #[serde(rename = "requestState")]
        request_state: &'a str,
        #[serde(rename = "resultType")]
        result_type: &'static str,
    }
    let asked = Asked {
        method: &q.method,
        params: q.params.as_deref(),
    };
    let result = InputRequired {
        input_requests: BTreeMap::from([(q.key(), asked)]),
        request_state: state,
        result_type: "input_required",
    };
    jsonrpc::result_response(id, &result)
}

/// A 2026-07-28 client's retry of a round: the state it names, and its answers by key.
pub struct Retry {
    pub state: String,
    pub responses: BTreeMap<String, Box<RawValue>>,
}

/// The round a request retries, when it names one (`params.requestState`).
pub fn retry(request: &[u8]) -> Option<Retry> {
    if !crate::text::holds!(request, "requestState") {
        return None;
    }
    #[derive(Deserialize)]
    struct Request {
        params: Params,
    }
    #[derive(Deserialize)]
    struct Params {
        #[serde(rename = "requestState")]
        state: String,
        #[serde(default, rename = "inputResponses")]
        responses: BTreeMap<String, Box<RawValue>>,
    }
    let r: Request = serde_json::from_slice(request).ok()?;
    Some(Retry {
        state: r.params.state,
        responses: r.params.responses,
    })
}

/// The answer to the server's question `asked`: the client's `result`.
pub fn answer_to(asked: &RawValue, result: &RawValue) -> Vec<u8> {
    jsonrpc::result_response(asked, &result)
}

/// `data` with its id `from` made `to`, when it is the answer under `from`: a round's retry
/// is answered by what the server says to the first request.
pub fn renumbered(data: &[u8], from: &RawValue, to: &RawValue) -> Option<Bytes> {
    let Ok(jsonrpc::Body::Single(m)) = jsonrpc::parse(data) else {
        return None;
    };
    if m.method().is_some() || m.id.map(RawValue::get) != Some(from.get()) {
        return None;
    }
    jsonrpc::replace_at(data, &["id"], to).map(Bytes::from)
}

/// The server's `answer`, which came under toolgate's id `from`, under the client's `to`
/// (as it came when they are one).
pub fn under_id(answer: Bytes, from: &RawValue, to: &RawValue) -> Bytes {
    match from.get() == to.get() {
        true => answer,
        false => jsonrpc::replace_at(&answer, &["id"], to).map_or(answer, Bytes::from),
    }
}

/// Handshake-era versions a client may have asked for; another gets the newest.
const HANDSHAKE_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

#[derive(Deserialize)]
struct InitializeParams {
    #[serde(default, rename = "protocolVersion")]
    version: Option<String>,
    #[serde(default)]
    capabilities: Option<Box<RawValue>>,
    #[serde(default, rename = "clientInfo")]
    client_info: Option<Box<RawValue>>,
}

#[derive(Deserialize)]
struct Discovered {
    #[serde(default)]
    capabilities: Option<Box<RawValue>>,
    #[serde(default)]
    instructions: Option<String>,
    #[serde(default, rename = "_meta")]
    meta: Option<DiscoveredMeta>,
}

#[derive(Deserialize)]
struct DiscoveredMeta {
    #[serde(default, rename = "io.modelcontextprotocol/serverInfo")]
    server_info: Option<Box<RawValue>>,
}

impl Reverse {
    /// From the client's `initialize` params (raw JSON).
    pub fn new(initialize_params: Option<&RawValue>) -> Reverse {
        let p: Option<InitializeParams> =
            initialize_params.and_then(|p| serde_json::from_str(p.get()).ok());
        let mut envelope = BTreeMap::new();
        envelope.insert(
            "io.modelcontextprotocol/protocolVersion",
            RawValue::from_string(format!("\"{}\"", mcp::MODERN_VERSION)).expect("a string"),
        );
        let (caps, info) = match p {
            Some(p) => (p.capabilities, p.client_info),
            None => (None, None),
        };
        // Kept for the session and written into every request: a client's own say of what it
        // can do is small, and a larger one is not carried (nor its cost paid per request).
        let kept = |what: &str, v: Option<Box<RawValue>>| match v {
            Some(v) if v.get().len() > MAX_ENVELOPE_MEMBER => {
                let bytes = v.get().len();
                let said = format_args!(
                    "a handshake-era client's {what} is over {MAX_ENVELOPE_MEMBER} bytes; it is not bridged"
                );
                warn_at_rate!(OVERSIZED_SAID, "client_member_over", { bytes, }, said);
                None
            }
            v => v,
        };
        let (caps, info) = (kept("capabilities", caps), kept("clientInfo", info));
        envelope.insert(
            "io.modelcontextprotocol/clientCapabilities",
            caps.unwrap_or_else(empty_object),
        );
        if let Some(info) = info {
            envelope.insert("io.modelcontextprotocol/clientInfo", info);
        }
        Reverse {
            envelope: std::sync::Mutex::new(envelope),
            asked: Default::default(),
            followed: Followed {
                resources: Default::default(),
                changes: tokio::sync::watch::Sender::new(0),
            },
        }
    }

    /// Counts each change of the resources its client subscribed to.
    pub fn changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.followed.changes.subscribe()
    }

    /// toolgate's `subscriptions/listen` request (under `id`) for everything the server
    /// announces that its client takes: every list's changes, and the resources it
    /// subscribed to.
    pub fn listen_request(&self, id: &str) -> Bytes {
        let resources = self.followed.resources.locked().iter().cloned().collect();
        let filter = Filter {
            tools: true,
            prompts: true,
            resources: true,
            uris: resources,
        };
        self.with_envelope(Bytes::from(subscriptions::listen_request(id, &filter)))
    }

    /// A client's `resources/subscribe` or `resources/unsubscribe` (`bytes`), kept for the
    /// stream that follows the server.
    fn follow(&self, subscribe: bool, bytes: &[u8]) -> Result<(), BadResource> {
        let f = &self.followed;
        let uri = BadResource::uri_of(bytes)?;
        let mut resources = f.resources.locked();
        let changed = match subscribe {
            true if resources.len() >= subscriptions::MAX_RESOURCES => {
                return Err(BadResource::TooMany);
            }
            true => resources.insert(uri),
            false => resources.remove(&uri),
        };
        drop(resources);
        if changed {
            f.changes.send_modify(|n| *n += 1);
        }
        Ok(())
    }

    /// The `initialize` result for a client that asked with `params`, from the server's
    /// `server/discover` result: its change notifications and subscriptions too, which reach
    /// the client through the stream toolgate follows the server with.
    pub fn initialize_result(discover: &RawValue, params: Option<&RawValue>) -> Value {
        let d: Option<Discovered> = serde_json::from_str(discover.get()).ok();
        let asked = params
            .and_then(|p| serde_json::from_str::<InitializeParams>(p.get()).ok())
            .and_then(|p| p.version);
        let version = asked
            .filter(|v| HANDSHAKE_VERSIONS.contains(&v.as_str()))
            .unwrap_or_else(|| mcp::LEGACY_VERSION.into());
        let raw = |r: Option<Box<RawValue>>, default| readable(r.as_deref()).unwrap_or(default);
        let (caps, instructions, info) = match d {
            Some(d) => (
                d.capabilities,
                d.instructions,
                d.meta.and_then(|m| m.server_info),
            ),
            None => (None, None, None),
        };
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": capabilities_of(caps.as_deref()),
            "serverInfo": raw(info, json!({"name": "unknown", "version": ""})),
        });
        if let Some(text) = instructions {
            result["instructions"] = Value::String(text);
        }
        result
    }

    /// Decides one message of the client's (`bytes`, its id `id`); `None` for a notification
    /// the server has no use for, which goes no further.
    pub fn request(&self, method: &str, id: Option<&RawValue>, bytes: &[u8]) -> Option<Bridged> {
        let empty = || id.map(|id| Bridged::Answer(None, jsonrpc::result_response(id, &json!({}))));
        match method {
            // The handshake's end is toolgate's; the server had none.
            "notifications/initialized" => return None,
            "ping" => return empty(),
            "logging/setLevel" => {
                #[derive(Deserialize)]
                struct Level<'a> {
                    #[serde(borrow)]
                    params: Option<LevelParams<'a>>,
                }
                #[derive(Deserialize)]
                struct LevelParams<'a> {
                    #[serde(borrow)]
                    level: Option<&'a RawValue>,
                }
                if let Some(level) = serde_json::from_slice::<Level<'_>>(bytes)
                    .ok()
                    .and_then(|l| l.params?.level)
                {
                    self.envelope
                        .locked()
                        .insert("io.modelcontextprotocol/logLevel", level.to_owned());
                }
                return empty();
            }
            "resources/subscribe" | "resources/unsubscribe" => {
                let subscribe = method == "resources/subscribe";
                return Some(match self.follow(subscribe, bytes) {
                    Ok(()) => return empty(),
                    Err(why) => Bridged::Answer(
                        Some(jsonrpc::INVALID_PARAMS),
                        jsonrpc::error_response(
                            id,
                            jsonrpc::INVALID_PARAMS,
                            &why.to_string(),
                            None,
                        ),
                    ),
                });
            }
            _ => {}
        }
        let bytes = Bytes::copy_from_slice(bytes);
        Some(Bridged::Forward(match id {
            Some(_) => self.with_envelope(bytes),
            None => bytes,
        }))
    }

    /// The request with the envelope in `params._meta` (a listing toolgate sends for the
    /// client, too).
    pub fn with_envelope(&self, bytes: Bytes) -> Bytes {
        let envelope = self.envelope.locked().clone();
        let mut out = bytes;
        for (key, value) in &envelope {
            if let Some(b) = jsonrpc::replace_at(&out, &["params", "_meta", key], value) {
                out = Bytes::from(b);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bridged_handshake_offers_what_the_server_announces() {
        let discover = raw(
            r#"{"capabilities": {"tools": {"listChanged": true}, "prompts": {"listChanged": true},
                "resources": {"listChanged": true, "subscribe": true}, "logging": {}},
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "s", "version": "1"}}}"#,
        );
        let r = Reverse::initialize_result(&discover, None);
        assert_eq!(
            r["capabilities"],
            json!({"tools": {"listChanged": true}, "prompts": {"listChanged": true},
                   "resources": {"listChanged": true, "subscribe": true}, "logging": {}})
        );
    }

    #[test]
    fn a_followed_clients_subscriptions_open_the_servers_stream_again() {
        let r = Reverse::new(None);
        let mut changes = r.changes();
        let ask = |method: &str, uri: &str| {
            let m = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"uri": uri}});
            match r.request(method, Some(&raw("1")), m.to_string().as_bytes()) {
                Some(Bridged::Answer(code, _)) => code,
                _ => panic!("{method} not answered"),
            }
        };
        assert_eq!(ask("resources/subscribe", "a://1"), None);
        assert!(changes.has_changed().unwrap());
        changes.borrow_and_update();
        assert_eq!(ask("resources/subscribe", "a://1"), None);
        assert!(!changes.has_changed().unwrap(), "nothing changed");
        let listen: Value = serde_json::from_slice(&r.listen_request("t-1")).unwrap();
        assert_eq!(listen["id"], "t-1");
        assert_eq!(
            listen["params"]["notifications"],
            json!({"toolsListChanged": true, "promptsListChanged": true,
                   "resourcesListChanged": true, "resourceSubscriptions": ["a://1"]})
        );
        assert_eq!(
            listen["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
            "2026-07-28"
        );
        assert_eq!(ask("resources/unsubscribe", "a://1"), None);
        assert!(changes.has_changed().unwrap());
        changes.borrow_and_update();
        let m = br#"{"jsonrpc":"2.0","id":1,"method":"resources/subscribe","params":{}}"#;
        let Some(Bridged::Answer(code, _)) = r.request("resources/subscribe", Some(&raw("1")), m)
        else {
            panic!("not answered")
        };
        assert_eq!(code, Some(jsonrpc::INVALID_PARAMS));
        let long = "a".repeat(4096);
        assert_eq!(
            ask("resources/subscribe", &long),
            Some(jsonrpc::INVALID_PARAMS)
        );
        assert!(
            !changes.has_changed().unwrap(),
            "a refused one changes nothing"
        );
    }

    #[test]
    fn an_oversized_client_envelope_is_not_carried_into_every_request() {
        let big = format!(
            r#"{{"capabilities": {{"x": "{}"}}, "clientInfo": {{"name": "c", "version": "1"}}}}"#,
            "a".repeat(2_000_000)
        );
        let params = raw(&big);
        let r = Reverse::new(Some(&params));
        let call = Bytes::from_static(
            br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t"}}"#,
        );
        let sent = r.with_envelope(call);
        assert!(sent.len() < 1024, "{} bytes", sent.len());
        let sent: Value = serde_json::from_slice(&sent).unwrap();
        let meta = &sent["params"]["_meta"];
        assert_eq!(
            meta["io.modelcontextprotocol/clientCapabilities"],
            json!({})
        );
        assert_eq!(meta["io.modelcontextprotocol/clientInfo"]["name"], "c");
    }

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.into()).unwrap()
    }

    #[test]
    fn a_native_result_gains_only_a_result_type_it_surely_has() {
        let native = |s: &str| {
            let out = answer(Bytes::from(s.to_owned()), Completion::Native);
            serde_json::from_slice::<Value>(&out).unwrap()["result"].clone()
        };
        let bare = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[]}}"#;
        assert_eq!(
            native(bare),
            json!({"content": [], "resultType": "complete"})
        );
        // Asks for input without saying so: its type is not sure.
        let asks = r#"{"jsonrpc":"2.0","id":1,"result":{"inputRequests":{}}}"#;
        assert_eq!(native(asks), json!({"inputRequests": {}}));
        // Starts a task (2025-11-25) without saying so: not complete either.
        let task = r#"{"jsonrpc":"2.0","id":1,"result":{"task":{"taskId":"t1"}}}"#;
        assert_eq!(native(task), json!({"task": {"taskId": "t1"}}));
        let typed = r#"{"jsonrpc":"2.0","id":1,"result":{"content":[],"resultType":"complete"}}"#;
        assert_eq!(native(typed)["resultType"], "complete");
        let error = r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"no"}}"#;
        assert_eq!(
            answer(Bytes::from(error), Completion::Native),
            error.as_bytes()
        );
    }

    #[test]
    fn a_clients_say_of_itself_goes_as_written_where_no_value_holds_it() {
        let meta = r#"{"io.modelcontextprotocol/clientCapabilities": {"sampling": { }, "roots": {"listChanged": true}, "experimental": {"n": 1e400}}, "io.modelcontextprotocol/clientInfo": {"name": "big", "n": 1e400}}"#;
        let d = Declared::of_meta(Some(meta));
        let capabilities = r#"{"experimental":{"n": 1e400},"roots":{},"sampling":{}}"#;
        assert_eq!(d.capabilities_text(), capabilities);
        assert_eq!(
            d.initialize_params().get(),
            format!(
                r#"{{"protocolVersion":"{}","capabilities":{capabilities},"clientInfo":{{"name": "big", "n": 1e400}}}}"#,
                mcp::LEGACY_VERSION
            )
        );
        // Spaced and ordered otherwise, the same capabilities are written the same.
        let spaced = r#"{"io.modelcontextprotocol/clientCapabilities": {"sampling": {}, "experimental": {"n": 1e400}, "roots": { "listChanged" : false }}}"#;
        assert_eq!(
            Declared::of_meta(Some(spaced)).capabilities_text(),
            capabilities
        );
        let none = Declared::default().initialize_params();
        let none: Value = serde_json::from_str(none.get()).unwrap();
        assert_eq!(
            none,
            json!({"protocolVersion": mcp::LEGACY_VERSION, "capabilities": {}, "clientInfo": mcp::client_info()})
        );
    }

    #[test]
    fn discover_is_written_from_the_handshake() {
        let init = raw(
            r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true}},"serverInfo":{"name":"s","version":"1"},"instructions":"be nice"}"#,
        );
        let r = discover_result(&init);
        assert_eq!(r["supportedVersions"], json!(["2026-07-28"]));
        assert_eq!(r["capabilities"], json!({"tools": {"listChanged": true}}));
        assert_eq!(r["instructions"], "be nice");
        assert_eq!(
            r["_meta"]["io.modelcontextprotocol/serverInfo"]["name"],
            "s"
        );
        assert_eq!(r["resultType"], "complete");
    }

    #[test]
    fn capabilities_too_costly_to_read_whole_keep_the_features_mcp_names() {
        let heavy = vec![r#"{"":0}"#; 200_000].join(",");
        let caps = format!(
            r#"{{"tools":{{"listChanged":true}},"logging":{{}},"experimental":{{"x":[{heavy}]}}}}"#
        );
        assert_eq!(
            capabilities_of(Some(&raw(&caps))),
            json!({"tools": {"listChanged": true}, "logging": {}})
        );
        let whole = r#"{"tools":{},"experimental":{"x":[1]}}"#;
        assert_eq!(
            capabilities_of(Some(&raw(whole))),
            json!({"tools": {}, "experimental": {"x": [1]}})
        );
        assert_eq!(capabilities_of(Some(&raw("[1]"))), json!([1]));
        assert_eq!(capabilities_of(None), json!({}));
    }

    #[test]
    fn the_envelope_stays_behind_and_everything_else_goes() {
        let req = br#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"add","arguments":{"a":123456789012345678901234567890},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{},"progressToken":"p"}}}"#;
        let Bridged::Forward(out) = request("tools/call", Some(&raw("3")), req, &raw("{}")) else {
            panic!("forwarded")
        };
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["params"]["_meta"], json!({"progressToken": "p"}));
        assert!(
            std::str::from_utf8(&out)
                .unwrap()
                .contains("123456789012345678901234567890")
        );
        let bare = br#"{"jsonrpc":"2.0","id":4,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
        let Bridged::Forward(out) = request("tools/list", Some(&raw("4")), bare, &raw("{}")) else {
            panic!("forwarded")
        };
        assert_eq!(
            serde_json::from_slice::<Value>(&out).unwrap()["params"],
            json!({})
        );
    }

    #[test]
    fn a_broken_envelope_is_answered_as_a_2026_server_would() {
        let asks = |meta: &str| {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{{"_meta":{meta}}}}}"#
            );
            match request("tools/list", Some(&raw("1")), body.as_bytes(), &raw("{}")) {
                Bridged::Answer(code, body) => (code, String::from_utf8(body).unwrap()),
                Bridged::Forward(_) | Bridged::Subscribe(_) => (None, "forwarded".into()),
            }
        };
        let (code, body) = asks(r#"{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}"#);
        assert_eq!(code, Some(jsonrpc::INVALID_PARAMS));
        assert!(body.contains("clientCapabilities"), "{body}");
        let (code, body) = asks(
            r#"{"io.modelcontextprotocol/protocolVersion":"2099-01-01","io.modelcontextprotocol/clientCapabilities":{}}"#,
        );
        assert_eq!(code, Some(mcp::UNSUPPORTED_VERSION));
        assert!(body.contains(r#""supported":["2026-07-28"]"#), "{body}");
    }

    #[test]
    fn capabilities_delivered_through_subscriptions_are_offered() {
        let caps = json!({"tools": {"listChanged": true},
            "resources": {"subscribe": true, "listChanged": true}, "logging": {}});
        let init = raw(&json!({ "capabilities": caps }).to_string());
        assert_eq!(discover_result(&init)["capabilities"], caps);
    }

    #[test]
    fn a_listen_request_is_a_subscription_to_what_the_server_announces() {
        let init = raw(r#"{"capabilities":{"tools":{"listChanged":true}}}"#);
        let envelope = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}});
        let listen = |notifications: Value| {
            json!({"jsonrpc": "2.0", "id": 4, "method": "subscriptions/listen",
                "params": {"notifications": notifications, "_meta": envelope}})
            .to_string()
        };
        let asked = listen(json!({"toolsListChanged": true, "promptsListChanged": true}));
        let Bridged::Subscribe(s) = request(
            "subscriptions/listen",
            Some(&raw("4")),
            asked.as_bytes(),
            &init,
        ) else {
            panic!("not a subscription")
        };
        assert_eq!(s.id.get(), "4");
        assert_eq!(
            s.filter,
            Filter {
                tools: true,
                ..Filter::default()
            }
        );
        let bad = listen(json!(true));
        let Bridged::Answer(Some(code), _) = request(
            "subscriptions/listen",
            Some(&raw("4")),
            bad.as_bytes(),
            &init,
        ) else {
            panic!("a malformed filter was taken")
        };
        assert_eq!(code, jsonrpc::INVALID_PARAMS);
    }

    #[test]
    fn what_has_no_counterpart_is_refused_by_name() {
        for m in ["ping", "initialize"] {
            let Bridged::Answer(Some(code), body) = request(m, Some(&raw("1")), b"{}", &raw("{}"))
            else {
                panic!("{m} answered")
            };
            assert_eq!(code, jsonrpc::METHOD_NOT_FOUND);
            assert!(String::from_utf8(body).unwrap().contains(m));
        }
    }

    #[test]
    fn results_gain_what_the_era_requires() {
        let listed = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#);
        let v: Value =
            serde_json::from_slice(&answer(listed.clone(), Completion::of("tools/list"))).unwrap();
        assert_eq!(
            v["result"],
            json!({"tools": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private"})
        );
        let v: Value =
            serde_json::from_slice(&answer(listed, Completion::of("tools/call"))).unwrap();
        assert_eq!(v["result"], json!({"tools": [], "resultType": "complete"}));
        let e =
            Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":"x"}}"#);
        assert_eq!(answer(e.clone(), Completion::Plain), e);
        let done =
            Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}"#);
        assert_eq!(answer(done.clone(), Completion::Plain), done);
    }

    #[test]
    fn a_legacy_client_is_answered_from_discover_and_its_requests_carry_the_envelope() {
        let params = raw(
            r#"{"protocolVersion":"2025-06-18","capabilities":{"roots":{}},"clientInfo":{"name":"c","version":"1"}}"#,
        );
        let discover = raw(
            r#"{"supportedVersions":["2026-07-28"],"capabilities":{"tools":{}},"resultType":"complete","_meta":{"io.modelcontextprotocol/serverInfo":{"name":"s","version":"2"}}}"#,
        );
        let init = Reverse::initialize_result(&discover, Some(&params));
        assert_eq!(
            init,
            json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                   "serverInfo": {"name": "s", "version": "2"}})
        );
        let r = Reverse::new(Some(&params));
        let Some(Bridged::Answer(None, _)) = r.request(
            "logging/setLevel",
            Some(&raw("5")),
            br#"{"jsonrpc":"2.0","id":5,"method":"logging/setLevel","params":{"level":"debug"}}"#,
        ) else {
            panic!("answered here")
        };
        let Some(Bridged::Forward(out)) = r.request(
            "tools/list",
            Some(&raw("6")),
            br#"{"jsonrpc":"2.0","id":6,"method":"tools/list"}"#,
        ) else {
            panic!("forwarded")
        };
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v["params"]["_meta"],
            json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                   "io.modelcontextprotocol/clientCapabilities": {"roots": {}},
                   "io.modelcontextprotocol/clientInfo": {"name": "c", "version": "1"},
                   "io.modelcontextprotocol/logLevel": "debug"})
        );
        assert!(
            r.request("notifications/initialized", None, b"{}")
                .is_none()
        );
        // A subscription without its resource.
        let Some(Bridged::Answer(Some(code), _)) =
            r.request("resources/subscribe", Some(&raw("7")), b"{}")
        else {
            panic!("refused")
        };
        assert_eq!(code, jsonrpc::INVALID_PARAMS);
    }
}
