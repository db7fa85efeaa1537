//! The JSON-RPC envelope, read over the original bytes.
//!
//! toolgate forwards what it did not change byte for byte, so the envelope borrows `id`,
//! `params`, `result` and `error` as [`RawValue`]s and never re-serializes them. Only the
//! members a rule needs are looked at; unknown members stay in the bytes. The one exception
//! is a `tools/call`'s `params`, which the guard needs typed: they are read so in the same
//! pass ([`Params::Call`]). A client's message in the plain shape of most requests is read by
//! hand (`quick`, [`parse_from_client`]); `serde_json` reads the rest, and says what is wrong
//! with what is not JSON-RPC.
//!
//! Security note: duplicate members are rejected here (each known member may appear once,
//! `null` or not), because an upstream with first-wins parsing would otherwise read a
//! different `method` or `params` than the one toolgate checked.

pub(crate) mod arguments;
pub(crate) mod footprint;
pub(crate) mod items;
mod quick;
pub(crate) mod splice;

use crate::mcp::TOOLS_CALL;
use serde::Deserialize;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::map::Entry;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use std::borrow::Cow;
use std::fmt;

pub const PARSE_ERROR: i64 = -32700;
pub const INVALID_REQUEST: i64 = -32600;
pub const METHOD_NOT_FOUND: i64 = -32601;
pub const INVALID_PARAMS: i64 = -32602;
pub const INTERNAL_ERROR: i64 = -32603;

/// The `INVALID_REQUEST` message for a request whose `params` are neither an object nor an
/// array ([`Message::params_are_structured`]).
pub(crate) const UNSTRUCTURED_PARAMS: &str =
    "Invalid Request: \"params\" must be an object or an array";

/// The `INVALID_REQUEST` message for a request under an id its session has in flight (MCP
/// asks a client never to use an id twice in a session): the first request keeps its answer.
pub(crate) const STILL_IN_FLIGHT: &str = "Invalid Request: a request with this id is still in flight in this session; send each request with an id of its own";

/// Why a message whose `method` is neither a string nor `null` is refused.
const METHOD_NOT_STRING: &str = "\"method\" must be a string";

/// One JSON-RPC message, borrowed from the body it came in.
#[derive(Debug)]
pub struct Message<'a> {
    /// `Some` even for `"id": null`, so a null id is echoed rather than dropped.
    pub id: Option<&'a RawValue>,
    pub method: Option<Cow<'a, str>>,
    pub params: Option<Params<'a>>,
    pub result: Option<&'a RawValue>,
    pub error: Option<&'a RawValue>,
}

/// `params` as the envelope read them.
#[derive(Debug)]
pub enum Params<'a> {
    /// Left as text: every method but `tools/call`, and a `tools/call` whose params came
    /// before its method or do not read in one pass (the guard then says why).
    Raw(&'a RawValue),
    /// A `tools/call`'s params, read in the same pass as the envelope: this runs on every
    /// call, and reading them as text first and typed after doubled the parsing.
    Call(CallParams<'a>),
}

/// `params` of a `tools/call`. `arguments` stay text (checked as JSON) for the guard,
/// which validates them in parts or reads them as a value (`pipeline::guard`); the parts
/// come with them when the envelope's own reader read them in its pass.
#[derive(Debug, Deserialize)]
pub struct CallParams<'a> {
    #[serde(borrow, deserialize_with = "tool_name")]
    pub name: Cow<'a, str>,
    /// `Some` even for `null`, which is no object.
    #[serde(borrow, default, deserialize_with = "present")]
    pub arguments: Option<&'a str>,
    /// The arguments in parts, when the envelope's own reader read them so in its pass
    /// (arguments that nest). Boxed: most calls have none, and every request's future holds
    /// a message in place.
    #[serde(skip)]
    pub read: Option<Box<arguments::Arguments<'a>>>,
    /// Its text, checked as JSON. Text rather than a raw value: only `serde_json` can make
    /// one, reading the text again (about 0.9k instructions for a 2026-07-28 call's).
    #[serde(borrow, default, rename = "_meta", deserialize_with = "raw_text")]
    pub meta: Option<&'a str>,
    /// The protocol version `_meta` names, as the envelope's own reader read it in its pass;
    /// `None` where it names none at its top level, or was not read so (`serde_json` read
    /// the message): [`CallParams::meta_version`] then reads `_meta`. Not told apart: every
    /// request's future holds a message in place, and the allocator serves that future on
    /// its fast path only up to 1 KiB (`edge::gate`'s test).
    #[serde(skip)]
    pub version: Option<&'a str>,
    /// A retry after an input-required result (2026-07-28) carries the server's state back.
    #[serde(borrow, default, rename = "requestState")]
    pub request_state: Option<&'a RawValue>,
    /// Task augmentation (2025-11-25, SEP-1686): the caller waits for a task, not a result.
    #[serde(borrow, default)]
    pub task: Option<&'a RawValue>,
}

impl<'a> CallParams<'a> {
    /// The protocol version `_meta` names (2026-07-28), as read in the envelope's pass, else
    /// read now ([`meta_version`]).
    pub fn meta_version(&self) -> Option<Cow<'a, str>> {
        match self.version {
            Some(read) => Some(Cow::Borrowed(read)),
            None => meta_version(self.meta?),
        }
    }
}

impl<'a> Message<'a> {
    /// An error response's code, when it has a readable one ([`integer`]).
    pub fn error_code(&self) -> Option<i64> {
        let code = ErrorMembers::read(self.error?).code?;
        integer(&serde_json::from_str(code.get()).ok()?)
    }

    pub fn is_request(&self) -> bool {
        self.method.is_some() && self.id.is_some()
    }

    pub fn method(&self) -> Option<&str> {
        self.method.as_deref()
    }

    /// Whether `params`, if present, are what JSON-RPC allows: an object or an array. `null`
    /// is let through as if the member were absent, as servers built on the Python SDK read
    /// it; a string, a number or a boolean is no request any server can read.
    pub fn params_are_structured(&self) -> bool {
        match self.params {
            Some(Params::Raw(raw)) => matches!(
                raw.get().trim_ascii_start().as_bytes().first(),
                Some(b'{' | b'[' | b'n')
            ),
            _ => true,
        }
    }

    /// The `requestId` a `notifications/cancelled` names.
    pub fn cancelled_id(&self) -> Option<&'a RawValue> {
        #[derive(serde::Deserialize)]
        struct Cancelled<'a> {
            #[serde(borrow, rename = "requestId")]
            request_id: &'a RawValue,
        }
        serde_json::from_str::<Cancelled<'a>>(self.raw_params()?.get())
            .ok()
            .map(|c| c.request_id)
    }

    /// `params` as text, when the envelope left them so.
    pub fn raw_params(&self) -> Option<&'a RawValue> {
        match self.params {
            Some(Params::Raw(raw)) => Some(raw),
            _ => None,
        }
    }

    /// Whether the body names the 2026-07-28 protocol version where a request of that era
    /// writes it (`_meta`): found in a call's `_meta` as the envelope's pass read it, else
    /// searched for in the call's `_meta`, or in params left as text, whole.
    pub fn names_version(&self) -> bool {
        let text = match &self.params {
            Some(Params::Call(call)) if call.version.is_some() => return true,
            Some(Params::Call(call)) => call.meta,
            Some(Params::Raw(raw)) => Some(raw.get()),
            None => None,
        };
        text.is_some_and(|t| crate::text::holds!(t, crate::mcp::META_PROTOCOL_VERSION))
    }

    /// The `name` in `params`, for logs and header checks.
    pub fn params_name(&self) -> Option<Cow<'a, str>> {
        #[derive(Deserialize)]
        struct Named<'a> {
            #[serde(borrow)]
            name: Cow<'a, str>,
        }
        match &self.params {
            Some(Params::Call(call)) => Some(call.name.clone()),
            Some(Params::Raw(raw)) => serde_json::from_str::<Named<'a>>(raw.get())
                .ok()
                .map(|n| n.name),
            None => None,
        }
    }

    /// Whether a `tools/call`'s `params` ask for a task (SEP-1686).
    pub fn asks_for_task(&self) -> bool {
        match &self.params {
            Some(Params::Call(call)) => call.task.is_some(),
            Some(Params::Raw(raw)) => call_params(raw.get()).is_ok_and(|p| p.task.is_some()),
            None => false,
        }
    }
}

/// What a body turned out to be.
#[derive(Debug)]
pub enum Body<'a> {
    Single(Message<'a>),
    /// 2025-03-26 batches: the elements, each already checked as a message.
    Batch(Vec<Message<'a>>),
}

/// Why a body is not something toolgate can route. The two kinds map to the two codes the
/// spec gives: not JSON at all (`-32700`) and JSON that is not a JSON-RPC message (`-32600`).
#[derive(Debug)]
pub enum Rejection<'a> {
    /// `id`: that of the request the text began as, where its members up to the fault name
    /// one (`began_as_request`).
    Parse {
        why: String,
        id: Option<&'a RawValue>,
    },
    /// `id`: the message's own where it is a request (it names a method, and no result or
    /// error) and the id is one a request may have (a string or a number): MCP answers under
    /// it, so that a client waiting on it is not left waiting. A response's is not taken: its
    /// id is one of the server's requests, which the client may use for its own too.
    Invalid {
        why: String,
        id: Option<&'a RawValue>,
    },
    /// A batch with an item in it that is no message: refused whole, since what is sent of
    /// it could not be told from what is not, and answered as JSON-RPC answers a batch, so
    /// that no request in it is left waiting (`answer`).
    Batch {
        /// The good requests' ids, each answered that nothing was sent.
        requests: Vec<&'a RawValue>,
        /// The bad items' own errors, in the batch's order: each one's that names a request
        /// id, and the first of those that name none, prefixed with its place in the batch.
        items: Vec<Rejection<'a>>,
        /// The place (from 1) of the first bad item, named in the good requests' errors.
        first: usize,
    },
}

impl<'a> Rejection<'a> {
    fn invalid(why: impl Into<String>, id: Option<&'a RawValue>) -> Rejection<'a> {
        Rejection::Invalid {
            why: why.into(),
            id: id.filter(|id| is_request_id(id)),
        }
    }

    fn parse(why: impl Into<String>, id: Option<&'a RawValue>) -> Rejection<'a> {
        Rejection::Parse {
            why: why.into(),
            id: id.filter(|id| is_request_id(id)),
        }
    }

    fn code(&self) -> i64 {
        match self {
            Rejection::Parse { .. } => PARSE_ERROR,
            Rejection::Invalid { .. } | Rejection::Batch { .. } => INVALID_REQUEST,
        }
    }

    fn message(&self) -> String {
        match self {
            Rejection::Parse { why, .. } => format!("Parse error: {why}"),
            Rejection::Invalid { why, .. } => format!("Invalid Request: {why}"),
            Rejection::Batch { first, .. } => format!(
                "Invalid Request: item {first} of the batch is no JSON-RPC message; nothing in the batch was sent"
            ),
        }
    }

    /// The id its answer goes under: none for a batch, or a body that names no id a request
    /// may have.
    fn id(&self) -> Option<&'a RawValue> {
        match self {
            Rejection::Batch { .. } => None,
            Rejection::Parse { id, .. } | Rejection::Invalid { id, .. } => *id,
        }
    }

    /// A bad item's error where it names no request: its place in the batch is all that
    /// tells a client which item it is.
    fn at(self, place: usize) -> Rejection<'a> {
        match self {
            Rejection::Invalid { why, id: None } => Rejection::Invalid {
                why: format!("item {place} of the batch: {why}"),
                id: None,
            },
            Rejection::Parse { why, id: None } => Rejection::Parse {
                why: format!("item {place} of the batch: {why}"),
                id: None,
            },
            named => named,
        }
    }

    /// The answer: the error, under the message's id where it has one. A batch's is an array:
    /// the error of each good request under its id, then the bad items' own errors. Only the
    /// first bad item that names no request gets one: an error under no id answers no item
    /// in particular, and one for each would answer `[0,0,…]` with about ninety times its bytes.
    pub fn answer(&self) -> Vec<u8> {
        match self {
            Rejection::Batch {
                requests, items, ..
            } => {
                let why = self.message();
                let good = requests
                    .iter()
                    .map(|id| error_response(Some(id), INVALID_REQUEST, &why, None));
                let bad = items.iter().map(Rejection::answer);
                array(good.chain(bad)).expect("a refused batch has a bad item")
            }
            one => error_response(one.id(), one.code(), &one.message(), None),
        }
    }
}

/// JSON-RPC answers as the one answer to a batch; `None` for none, since an empty array may
/// not be sent.
pub fn array(answers: impl IntoIterator<Item = Vec<u8>>) -> Option<Vec<u8>> {
    let mut all = Vec::new();
    for answer in answers {
        all.push(if all.is_empty() { b'[' } else { b',' });
        all.extend(answer);
    }
    (!all.is_empty()).then(|| {
        all.push(b']');
        all
    })
}

/// The members of an envelope; unknown ones stay in the bytes, unread.
#[derive(Default, Debug)]
struct Envelope<'a> {
    /// As written: only compared with `"2.0"`.
    jsonrpc: Option<&'a str>,
    id: Option<&'a RawValue>,
    method: Option<Cow<'a, str>>,
    params: Option<Params<'a>>,
    result: Option<&'a RawValue>,
    error: Option<&'a RawValue>,
}

#[derive(Deserialize)]
#[serde(field_identifier, rename_all = "lowercase")]
enum Field {
    Jsonrpc,
    Id,
    Method,
    Params,
    Result,
    Error,
    #[serde(other)]
    Other,
}

/// A string, borrowed from the body unless it has escapes.
#[derive(Deserialize)]
#[serde(transparent)]
struct Text<'a>(#[serde(borrow)] Cow<'a, str>);

/// Reads an envelope; with `typed_call`, a `tools/call`'s params are read typed in the same
/// pass when `method` came first.
#[derive(Clone, Copy)]
struct EnvelopeSeed {
    typed_call: bool,
}

impl<'de> DeserializeSeed<'de> for EnvelopeSeed {
    type Value = Envelope<'de>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Envelope<'de>, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for EnvelopeSeed {
    type Value = Envelope<'de>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON-RPC message object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Envelope<'de>, A::Error> {
        let mut env = Envelope::default();
        // One bit per member seen: a repeated member is refused, `null` ones included.
        let mut seen = 0u8;
        let mut once = |bit: u8, name: &'static str| {
            if seen & bit != 0 {
                return Err(de::Error::duplicate_field(name));
            }
            seen |= bit;
            Ok(())
        };
        while let Some(field) = map.next_key::<Field>()? {
            match field {
                Field::Jsonrpc => {
                    once(1, "jsonrpc")?;
                    env.jsonrpc = Some(map.next_value::<&RawValue>()?.get());
                }
                Field::Id => {
                    once(2, "id")?;
                    env.id = Some(map.next_value()?);
                }
                Field::Method => {
                    once(4, "method")?;
                    // In words that name it, as for a call's `name` (`tool_name`).
                    let method = map.next_value::<Option<Text<'de>>>();
                    let method = method.map_err(|_| de::Error::custom(METHOD_NOT_STRING))?;
                    env.method = method.map(|t| t.0);
                }
                Field::Params => {
                    once(8, "params")?;
                    let call = self.typed_call && env.method.as_deref() == Some(TOOLS_CALL);
                    env.params = Some(if call {
                        Params::Call(map.next_value_seed(ObjectOnly::default())?)
                    } else {
                        Params::Raw(map.next_value()?)
                    });
                }
                Field::Result => {
                    once(16, "result")?;
                    env.result = Some(map.next_value()?);
                }
                Field::Error => {
                    once(32, "error")?;
                    env.error = Some(map.next_value()?);
                }
                Field::Other => {
                    map.next_value::<de::IgnoredAny>()?;
                }
            }
        }
        Ok(env)
    }
}

/// Reads `T` from an object only. A derived struct reader takes an array too, its members by
/// position (`["add", {...}]` as a call's params), and MCP's params are objects.
struct ObjectOnly<T>(std::marker::PhantomData<T>);

impl<T> Default for ObjectOnly<T> {
    fn default() -> Self {
        ObjectOnly(std::marker::PhantomData)
    }
}

impl<'de, T: Deserialize<'de>> DeserializeSeed<'de> for ObjectOnly<T> {
    type Value = T;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<T, D::Error> {
        d.deserialize_map(self)
    }
}

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectOnly<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map))
    }
}

/// A `tools/call`'s params read from their text, when the envelope's pass left them so.
pub fn call_params(text: &str) -> Result<CallParams<'_>, UnreadableCall> {
    // A raw value's text starts at its first byte: an object's is `{`.
    if !text.starts_with('{') {
        return Err(UnreadableCall(de::Error::custom(
            "\"params\" must be an object",
        )));
    }
    serde_json::from_str(text).map_err(UnreadableCall)
}

/// Why a call's params, JSON that the envelope read, are no call's. Said without the line and
/// column `serde_json` adds, which count within the params and not within what the client sent.
#[derive(Debug)]
pub struct UnreadableCall(serde_json::Error);

impl fmt::Display for UnreadableCall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let said = self.0.to_string();
        let at = format!(" at line {} column {}", self.0.line(), self.0.column());
        let said = said.strip_suffix(&at).unwrap_or(&said);
        let no_name = <serde_json::Error as de::Error>::missing_field("name").to_string();
        match said == no_name {
            true => f.write_str("\"name\" is missing: send the name of the tool to call"),
            false => f.write_str(said),
        }
    }
}

/// A call's `name`, refused in words that name it: the derived reader's would say only that a
/// string was expected, not where.
fn tool_name<'de, D: de::Deserializer<'de>>(d: D) -> Result<Cow<'de, str>, D::Error> {
    Text::deserialize(d)
        .map(|t| t.0)
        .map_err(|_| de::Error::custom("\"name\" must be a string: the name of the tool to call"))
}

fn envelope(text: &str, typed_call: bool) -> Result<Envelope<'_>, serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    let env = EnvelopeSeed { typed_call }.deserialize(&mut de)?;
    de.end()?;
    Ok(env)
}

/// Keeps `null` as present arguments, kept as the text they were written as:
/// `Option<&RawValue>` alone would turn `"arguments": null` into no arguments.
fn present<'de, D: de::Deserializer<'de>>(d: D) -> Result<Option<&'de str>, D::Error> {
    <&RawValue>::deserialize(d).map(|raw| Some(raw.get()))
}

/// The protocol version a request's `_meta` (its text) names (2026-07-28): read by hand
/// where the object is plain (no escape in its names or in the value), as nearly every one
/// is, else by `serde_json`.
pub(crate) fn meta_version(meta: &str) -> Option<Cow<'_, str>> {
    #[derive(Deserialize)]
    struct Meta<'a> {
        #[serde(borrow, default, rename = "io.modelcontextprotocol/protocolVersion")]
        version: Option<Cow<'a, str>>,
    }
    match quick::string_member(meta, crate::mcp::META_PROTOCOL_VERSION) {
        Some(version) => version.map(Cow::Borrowed),
        None => serde_json::from_str::<Meta<'_>>(meta).ok()?.version,
    }
}

/// Whether `quick::string_member` reads what `serde_json` reads, when it reads by hand at all.
/// Taken by hand, the object names no member twice, so a map's reading is the object's. Its
/// members are kept as written: a `Value` holds no number past `f64` (`1e400`), which is
/// JSON all the same.
#[cfg(feature = "fuzzing")]
fn string_member_read_alike(text: &str, name: &str) -> bool {
    let Some(by_hand) = quick::string_member(text, name) else {
        return true;
    };
    let read = serde_json::from_str::<std::collections::HashMap<String, &RawValue>>(text).ok();
    let member = read.as_ref().map(|m| {
        m.get(name)
            .map(|raw| serde_json::from_str::<String>(raw.get()).ok())
    });
    member == Some(by_hand.map(|s| Some(s.to_owned())))
}

/// A member kept as the text it was written as, `null` read as none (an `Option`'s reading).
fn raw_text<'de, D: de::Deserializer<'de>>(d: D) -> Result<Option<&'de str>, D::Error> {
    <Option<&RawValue>>::deserialize(d).map(|raw| raw.map(RawValue::get))
}

/// Whether the envelope of `text` reads alike by hand and through `serde_json`, when the
/// hand reader takes it at all, arguments in parts included (the fuzz target's check).
#[cfg(feature = "fuzzing")]
pub(crate) fn read_alike(text: &str) -> bool {
    let Some(mut by_hand) = quick::envelope(text) else {
        return true;
    };
    // Arguments read in parts in the pass are the parts of their text read alone.
    if let Some(Params::Call(call)) = &mut by_hand.params
        && let Some(parts) = call.read.take()
    {
        let alone = call.arguments.and_then(arguments::Arguments::read);
        if format!("{:?}", Some(parts)) != format!("{alone:?}") {
            return false;
        }
    }
    // A call's `_meta` names its version alike in the pass, by hand and through
    // `serde_json`.
    if let Some(Params::Call(call)) = &mut by_hand.params {
        let in_pass = call.version.take();
        let meta = call.meta.unwrap_or("{}");
        if call.meta.and_then(meta_version).as_deref() != in_pass
            || !string_member_read_alike(meta, crate::mcp::META_PROTOCOL_VERSION)
        {
            return false;
        }
    }
    envelope(text, true)
        .or_else(|_| envelope(text, false))
        .is_ok_and(|env| format!("{env:?}") == format!("{by_hand:?}"))
}

/// `e` as the refusal of `text`: JSON of the wrong shape is an invalid request, anything
/// else a parse error, under the id of the request the text began as.
fn classify(text: &[u8], e: serde_json::Error) -> Rejection<'_> {
    match e.classify() {
        serde_json::error::Category::Data => Rejection::invalid(e.to_string(), None),
        _ => Rejection::parse(e.to_string(), began_as_request(text)),
    }
}

/// Parses a body into messages without copying any member it does not need.
pub fn parse(body: &[u8]) -> Result<Body<'_>, Rejection<'_>> {
    read(body, false)
}

/// [`parse`] for what a client sends, nearly always requests: those in the plain shapes are
/// read by hand (`quick`). Answers and toolgate's own messages are not tried that way, since
/// a response gives way to `serde_json` at its result, after the hand reader's work.
pub fn parse_from_client(body: &[u8]) -> Result<Body<'_>, Rejection<'_>> {
    read(body, true)
}

fn read(body: &[u8], by_hand: bool) -> Result<Body<'_>, Rejection<'_>> {
    // UTF-8 is checked once for the whole body; parsing from `&str` then borrows raw
    // members without validating them again.
    let text = std::str::from_utf8(body).map_err(|e| {
        Rejection::parse(
            format!("the message is not UTF-8 ({e}); send its text as UTF-8"),
            began_as_request(body),
        )
    })?;
    let first = text.bytes().find(|b| !b.is_ascii_whitespace());
    match first {
        None => Err(Rejection::parse("empty body", None)),
        Some(b'[') => {
            // Each item read as it is taken (`items`): what the batch holds is its messages.
            let (mut messages, mut bad, mut place) = (Vec::new(), Bad::default(), 0);
            items::each(text, |raw| {
                place += 1;
                match message(raw.get(), by_hand) {
                    Ok(m) => messages.push(m),
                    Err(e) => bad.add(e, place),
                }
            })
            .map_err(|e| classify(body, e))?;
            match bad.first {
                Some(first) => Err(Rejection::Batch {
                    requests: messages
                        .iter()
                        .filter(|m| m.is_request())
                        .filter_map(|m| m.id)
                        .collect(),
                    items: bad.items,
                    first,
                }),
                None if messages.is_empty() => Err(Rejection::invalid("empty batch", None)),
                None => Ok(Body::Batch(messages)),
            }
        }
        Some(_) => message(text, by_hand).map(Body::Single),
    }
}

/// A batch's items that are no message, as [`Rejection::Batch`] keeps them.
#[derive(Default)]
struct Bad<'a> {
    items: Vec<Rejection<'a>>,
    first: Option<usize>,
    unnamed: bool,
}

impl<'a> Bad<'a> {
    fn add(&mut self, e: Rejection<'a>, place: usize) {
        self.first.get_or_insert(place);
        let named = e.id().is_some();
        if named || !std::mem::replace(&mut self.unnamed, true) {
            self.items.push(e.at(place));
        }
    }
}

/// The error of a response that names no request: `"id": null`, or no `id` at all, as the
/// TypeScript SDK's servers write their refusal of a whole HTTP request ("No valid session
/// ID provided"). A message without an `id` is not valid JSON-RPC, so [`parse`] refuses it;
/// it is read here only, where a server's refusal must reach its client.
pub fn refusal(body: &[u8]) -> Option<&RawValue> {
    #[derive(Deserialize)]
    struct Refusal<'a> {
        #[serde(borrow)]
        error: &'a RawValue,
        #[serde(default, borrow)]
        id: Option<&'a RawValue>,
        #[serde(default)]
        method: Option<serde::de::IgnoredAny>,
    }
    let r: Refusal<'_> = serde_json::from_slice(body).ok()?;
    (r.id.is_none() && r.method.is_none()).then_some(r.error)
}

fn message(text: &str, by_hand: bool) -> Result<Message<'_>, Rejection<'_>> {
    // Read by hand when it can be, else by `serde_json`. There, a `tools/call` whose params
    // do not read in one pass is read again with them as text: the guard then says what is
    // wrong with them, or the envelope's own error comes out.
    let quick = by_hand.then(|| quick::envelope(text)).flatten();
    let env = match quick.map_or_else(
        || envelope(text, true).or_else(|_| envelope(text, false)),
        Ok,
    ) {
        Ok(env) => env,
        Err(e) if e.classify() == serde_json::error::Category::Data => {
            return Err(misshapen(text, e));
        }
        Err(e) => return Err(classify(text.as_bytes(), e)),
    };
    if env.jsonrpc != Some("\"2.0\"") {
        let why = "the \"jsonrpc\" member must be \"2.0\"";
        let asked = env.method.is_some() && env.result.is_none() && env.error.is_none();
        return Err(Rejection::invalid(why, env.id.filter(|_| asked)));
    }
    let msg = Message {
        id: env.id,
        method: env.method,
        params: env.params,
        result: env.result,
        error: env.error,
    };
    let is_response = msg.result.is_some() || msg.error.is_some();
    match (&msg.method, is_response) {
        (Some(_), false) if msg.id.is_some_and(|id| !is_request_id(id)) => Err(Rejection::invalid(
            "a request's \"id\" must be a string or a number",
            None,
        )),
        (Some(_), false) => Ok(msg),
        (None, true) if msg.id.is_some() => Ok(msg),
        (Some(_), true) => Err(Rejection::invalid(
            "a message cannot carry both a method and a result or error",
            None,
        )),
        _ => Err(Rejection::invalid(
            "neither a request, a notification nor a response",
            None,
        )),
    }
}

/// Why `text`, which did not read as an envelope (`e`), is refused: valid JSON of the wrong
/// shape (a string, a number, duplicate members) is an invalid request, answered under its
/// id where it is a request; anything else is a parse error.
fn misshapen(text: &str, e: serde_json::Error) -> Rejection<'_> {
    match serde_json::from_str::<de::IgnoredAny>(text) {
        Ok(_) => Rejection::invalid(e.to_string(), began_as_request(text.as_bytes())),
        Err(e) => classify(text.as_bytes(), e),
    }
}

/// Where the first of several messages in `text` ends, when `text` holds more than one: a
/// stdio client that leaves out the newline between two messages writes them on one line,
/// and each is then read as a line of its own, so that neither is lost. `None` when `text`
/// is one value, its first is not whole JSON, or what follows it opens no object or array:
/// text such as `}` or `, "arguments": …` after an object says the object closed before its
/// writer meant it to, and the message is refused whole rather than sent without the rest.
/// Read only for a line that is refused, and only as far as its first value, so that a line
/// of many costs each no more than its own.
pub(crate) fn end_of_first_of_several(text: &[u8]) -> Option<usize> {
    let mut values = serde_json::Deserializer::from_slice(text).into_iter::<de::IgnoredAny>();
    values.next()?.ok()?;
    let end = values.byte_offset();
    let next = text[end..].iter().find(|b| !b.is_ascii_whitespace())?;
    matches!(next, b'{' | b'[').then_some(end)
}

/// The id of the request a message that is refused began as: its top-level members are read
/// in order, up to a fault where the text stops being JSON (a byte that is not UTF-8 in it,
/// the text cut off, more after its object), so that a request which names its `id` and
/// `method` first, as clients write them, is answered under its id. Over stdio nothing else
/// would answer it, and its client would wait for its own timeout. `None` unless one `id` and
/// one `method` came before the end or the fault, and no `result` or `error` did.
fn began_as_request(text: &[u8]) -> Option<&RawValue> {
    #[derive(Default)]
    struct Seen<'a> {
        id: Option<&'a RawValue>,
        ids: u8,
        methods: u8,
        answer: bool,
    }
    struct Members<'s, 'a>(&'s mut Seen<'a>);
    impl<'de> Visitor<'de> for Members<'_, 'de> {
        type Value = ();
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a JSON-RPC message object")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
            while let Some(field) = map.next_key::<Field>()? {
                match field {
                    Field::Id => {
                        self.0.ids = self.0.ids.saturating_add(1);
                        self.0.id = Some(map.next_value()?);
                    }
                    Field::Method => {
                        map.next_value::<de::IgnoredAny>()?;
                        self.0.methods = self.0.methods.saturating_add(1);
                    }
                    Field::Result | Field::Error => {
                        self.0.answer = true;
                        map.next_value::<de::IgnoredAny>()?;
                    }
                    Field::Jsonrpc | Field::Params | Field::Other => {
                        map.next_value::<de::IgnoredAny>()?;
                    }
                }
            }
            Ok(())
        }
    }
    let mut seen = Seen::default();
    let mut reader = serde_json::Deserializer::from_slice(text);
    // A fault ends the reading; what was seen before it is the answer.
    let _ = de::Deserializer::deserialize_map(&mut reader, Members(&mut seen));
    (seen.methods == 1 && !seen.answer && seen.ids == 1)
        .then_some(seen.id)
        .flatten()
}

/// MCP's request ids: a string or a number, never `null` (unlike JSON-RPC's), nor a boolean,
/// an array or an object. A response may name no request with `null`; a request must name
/// itself for its answer to find it.
fn is_request_id(id: &RawValue) -> bool {
    is_request_id_text(id.get())
}

fn is_request_id_text(id: &str) -> bool {
    matches!(id.as_bytes().first(), Some(b'"' | b'-' | b'0'..=b'9'))
}

#[derive(serde::Serialize)]
struct ErrorObject<'a, D: ?Sized> {
    code: i64,
    message: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a D>,
}

#[derive(serde::Serialize)]
struct ErrorResponse<'a, D: ?Sized> {
    jsonrpc: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    id: Option<&'a RawValue>,
    error: ErrorObject<'a, D>,
}

#[derive(serde::Serialize)]
struct ResultResponse<'a, R: serde::Serialize> {
    jsonrpc: &'static str,
    id: &'a RawValue,
    result: &'a R,
}

#[derive(serde::Serialize)]
struct Request<'a, P: serde::Serialize + ?Sized> {
    jsonrpc: &'static str,
    id: &'a str,
    method: &'a str,
    params: &'a P,
}

/// The message with the member at `path` (object keys from the top) set to `value`; every
/// other member is kept as it was written, numbers included, and where (a member that was
/// not there is put first in its object). `None` when the message or a step on the path is
/// not an object.
pub fn replace_at(bytes: &[u8], path: &[&str], value: &RawValue) -> Option<Vec<u8>> {
    fn set(object: &str, path: &[&str], value: &str) -> Option<String> {
        let (first, rest) = path.split_first()?;
        let found = splice::member(object, first)?;
        let new = match rest.is_empty() {
            true => std::borrow::Cow::Borrowed(value),
            false => set(found.map_or("{}", RawValue::get), rest, value)?.into(),
        };
        Some(match found {
            Some(old) => splice::replaced(object, old.get(), &new),
            None => {
                let name = serde_json::to_string(first).ok()?;
                splice::with_members_first(object, object, &format!("{name}:{new}"))
            }
        })
    }
    let text = std::str::from_utf8(bytes).ok()?;
    set(text, path, value.get()).map(String::into_bytes)
}

/// `n` as an integer, also where it is written with a fraction of zero (`-32042.0`): JSON
/// Schema's `integer` takes it, and so do the SDKs reading an error's `code`.
pub(crate) fn integer(n: &serde_json::Number) -> Option<i64> {
    n.as_i64().or_else(|| arguments::whole_float(n))
}

/// An error object's members, its `data` as written: read so, an error costs its text, where
/// a `data` read into a value may hold many times it. `None` where a member is missing or not
/// of its type (a `code` that is no number, a `message` that is no string).
pub(crate) struct ErrorHead<'a> {
    pub(crate) code: Option<serde_json::Number>,
    pub(crate) message: Option<String>,
    pub(crate) data: Option<&'a RawValue>,
}

impl ErrorHead<'_> {
    /// `err`'s members; all `None` when it is no object.
    pub(crate) fn read(err: &RawValue) -> ErrorHead<'_> {
        let m = ErrorMembers::read(err);
        fn read<T: serde::de::DeserializeOwned>(member: Option<&RawValue>) -> Option<T> {
            member.and_then(|v| serde_json::from_str(v.get()).ok())
        }
        ErrorHead {
            code: read(m.code),
            message: read(m.message),
            data: m.data,
        }
    }
}

/// An error object's members as written. A member written twice is read as its last, as a
/// value read whole reads it: an error is the server's word to its client, whichever way
/// toolgate reads it, and a derived reader would refuse the whole object for it.
#[derive(Default)]
struct ErrorMembers<'a> {
    code: Option<&'a RawValue>,
    message: Option<&'a RawValue>,
    data: Option<&'a RawValue>,
}

impl<'a> ErrorMembers<'a> {
    /// All `None` when `err` is no object.
    fn read(err: &'a RawValue) -> ErrorMembers<'a> {
        serde_json::from_str(err.get()).unwrap_or_default()
    }
}

impl<'de> Deserialize<'de> for ErrorMembers<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Members;
        impl<'de> Visitor<'de> for Members {
            type Value = ErrorMembers<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an error object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                let mut m = ErrorMembers::default();
                while let Some(key) = map.next_key::<Cow<'de, str>>()? {
                    let slot = match &*key {
                        "code" => &mut m.code,
                        "message" => &mut m.message,
                        "data" => &mut m.data,
                        _ => {
                            map.next_value::<de::IgnoredAny>()?;
                            continue;
                        }
                    };
                    *slot = Some(map.next_value()?);
                }
                Ok(m)
            }
        }
        d.deserialize_map(Members)
    }
}

/// An error response. Without an id the member is left out, as the spec asks for errors
/// about messages whose id could not be read (`"id": null` fails the 2026-07-28 schema).
pub fn error_response(
    id: Option<&RawValue>,
    code: i64,
    message: &str,
    data: Option<&Value>,
) -> Vec<u8> {
    error_with(id, code, message, data)
}

/// [`error_response`] with `data` as it was written: another's error relayed, its `data`
/// never read into a value (it may hold many times its text once read).
pub fn error_response_as_written(
    id: Option<&RawValue>,
    code: i64,
    message: &str,
    data: Option<&RawValue>,
) -> Vec<u8> {
    error_with(id, code, message, data)
}

fn error_with<D: serde::Serialize + ?Sized>(
    id: Option<&RawValue>,
    code: i64,
    message: &str,
    data: Option<&D>,
) -> Vec<u8> {
    serde_json::to_vec(&ErrorResponse {
        jsonrpc: "2.0",
        id,
        error: ErrorObject {
            code,
            message,
            data,
        },
    })
    .expect("serializing an error response cannot fail")
}

pub fn result_response<R: serde::Serialize>(id: &RawValue, result: &R) -> Vec<u8> {
    serde_json::to_vec(&ResultResponse {
        jsonrpc: "2.0",
        id,
        result,
    })
    .expect("serializing a result response cannot fail")
}

/// A request of toolgate's own, under an id it minted. What `params` holds of a peer's is best
/// kept as a `RawValue`, written as it came: `json!` would read it into a `Value`, which holds
/// no number past `f64` (`1e400`, JSON all the same) and would fail.
pub fn request<P: serde::Serialize + ?Sized>(id: &str, method: &str, params: &P) -> Vec<u8> {
    serde_json::to_vec(&Request {
        jsonrpc: "2.0",
        id,
        method,
        params,
    })
    .expect("serializing a request cannot fail")
}

/// An id's value, spelled one way: the key under which a request waits for its answer.
///
/// A peer may re-serialise the id it echoes (`"\u0037"` comes back as `"7"`, `7E0` as `7.0`),
/// and an answer matched by spelling would then match nothing and escape the answer-side
/// rules. Strings compare by their decoded text, numbers by value. The common spellings (a
/// plain string, a plain integer) are their own key and cost one copy.
pub fn id_key(raw: &str) -> Cow<'_, str> {
    let plain_string = raw.len() >= 2
        && raw.starts_with('"')
        && raw.ends_with('"')
        && !raw[1..raw.len() - 1].contains(['\\', '"']);
    let plain_integer = {
        let digits = raw.strip_prefix('-').unwrap_or(raw);
        !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'))
            && raw != "-0"
    };
    // What no request's id can be (an array, an object) matches nothing, and is not read.
    if plain_string || plain_integer || !is_request_id_text(raw) {
        return Cow::Borrowed(raw);
    }
    match serde_json::from_str::<Value>(raw) {
        Ok(Value::String(s)) => Cow::Owned(Value::String(s).to_string()),
        Ok(Value::Number(n)) => match n.as_f64() {
            Some(f) if f.fract() == 0.0 && f.abs() < 9.0e15 => Cow::Owned((f as i64).to_string()),
            Some(f) => Cow::Owned(format!("{f:e}")),
            None => Cow::Owned(n.to_string()),
        },
        _ => Cow::Borrowed(raw),
    }
}

/// Why an `arguments` object could not be read.
#[derive(Debug, PartialEq, Eq)]
pub enum ArgumentsError {
    /// `arguments` is JSON but not an object: a malformed `tools/call`.
    NotObject,
    /// The same key twice at the given JSON pointer.
    Duplicate { pointer: String },
    /// JSON text no value can be read from at the given JSON pointer: a problem in the
    /// arguments a model can correct, so it is reported as a violation, like a duplicate.
    Unreadable { pointer: String, why: Unreadable },
}

impl ArgumentsError {
    /// Arguments too costly to read into a value ([`Unreadable::TooLarge`]).
    pub fn too_large() -> ArgumentsError {
        ArgumentsError::Unreadable {
            pointer: String::new(),
            why: Unreadable::TooLarge,
        }
    }
}

/// What the parser could not read of a value in a call's arguments. The text is JSON (the
/// envelope's reader checked it); these are what JSON allows and no value can hold, or none
/// toolgate will hold.
#[derive(Debug, PartialEq, Eq)]
pub enum Unreadable {
    /// Text that would hold more than `footprint::MAX_READ_BYTES` once read.
    TooLarge,
    /// Arrays and objects nested past the parser's limit (128 levels).
    TooDeep,
    /// A number past a 64-bit float's range (`1e400`).
    OutOfRange,
    /// A `\u` escape of half a UTF-16 pair: no Unicode text holds it.
    HalfCharacter,
    /// Anything else the parser refused, in its words.
    Other(String),
}

impl Unreadable {
    /// Told from `serde_json`'s own words, the only thing its error type carries through a
    /// visitor: a wording it changes falls to [`Unreadable::Other`], still a violation.
    fn from_parser(msg: &str) -> Unreadable {
        let msg = msg.split(" at line ").next().unwrap_or(msg);
        match msg {
            "recursion limit exceeded" => Unreadable::TooDeep,
            "number out of range" => Unreadable::OutOfRange,
            "lone leading surrogate in hex escape"
            | "unexpected end of hex escape"
            | "invalid unicode code point" => Unreadable::HalfCharacter,
            other => Unreadable::Other(other.to_string()),
        }
    }
}

impl fmt::Display for Unreadable {
    /// What the model reads after the argument's path.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreadable::TooDeep => f.write_str(
                "nests arrays and objects more than 128 levels deep; send it less deeply nested",
            ),
            Unreadable::OutOfRange => {
                f.write_str("is a number too large to read (past 1.8e308); send a smaller one")
            }
            Unreadable::HalfCharacter => f.write_str(
                "holds a \\u escape that is half of a character (an unpaired surrogate); send the whole character or leave it out",
            ),
            Unreadable::Other(why) => write!(f, "cannot be read: {why}"),
            Unreadable::TooLarge => write!(
                f,
                "would hold more than {} bytes once read, too many to explain what is wrong; send fewer or smaller values",
                footprint::MAX_READ_BYTES
            ),
        }
    }
}

/// Parses `arguments` and refuses duplicate keys at any depth. `serde_json::Value` keeps the
/// last of two equal keys while some servers keep the first, so validating a parsed value with
/// duplicates would let the server act on a value nobody checked.
///
/// The hot path keeps no path bookkeeping: the JSON pointer of a duplicate or of a value
/// that cannot be read is assembled only on the way out of the error, each enclosing object
/// or array prefixing its own segment.
pub fn parse_arguments(text: &str) -> Result<Map<String, Value>, ArgumentsError> {
    if !footprint::affordable(text) {
        return Err(ArgumentsError::too_large());
    }
    let mut de = serde_json::Deserializer::from_str(text);
    let value = Strict.deserialize(&mut de).map_err(|e| {
        let msg = e.to_string();
        let (why, pointer) = match msg.strip_prefix(MARK) {
            Some(rest) => split_mark(rest),
            None => (msg.as_str(), ""),
        };
        let pointer = pointer.to_string();
        match why {
            DUPLICATE => ArgumentsError::Duplicate { pointer },
            why => ArgumentsError::Unreadable {
                pointer,
                why: Unreadable::from_parser(why),
            },
        }
    })?;
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(ArgumentsError::NotObject),
    }
}

/// Starts an error's text once it says where in the arguments it is: then
/// `{why}{WHY_END}{pointer}{POINTER_END}`, and serde_json's position after it.
const MARK: &str = "toolgate:argument:";
const WHY_END: char = '\u{2}';
const POINTER_END: char = '\u{1}';
/// The `why` of a key named twice.
const DUPLICATE: &str = "duplicate key";

/// The why and the pointer of a marked error's text, past the mark.
fn split_mark(rest: &str) -> (&str, &str) {
    let (why, at) = rest.split_once(WHY_END).unwrap_or((rest, ""));
    (why, at.split(POINTER_END).next().unwrap_or(at))
}

/// A child's error with this level's segment in front of its pointer; an error of the
/// parser's own (a value it could not read) is marked here, where it is first seen.
fn prefixed<E: de::Error>(e: E, segment: &str) -> E {
    let msg = e.to_string();
    let (why, inner) = match msg.strip_prefix(MARK) {
        Some(rest) => split_mark(rest),
        None => (msg.split(" at line ").next().unwrap_or(&msg), ""),
    };
    let seg = crate::text::pointer_token(segment);
    E::custom(format_args!(
        "{MARK}{why}{WHY_END}/{seg}{inner}{POINTER_END}"
    ))
}

#[derive(Clone, Copy)]
struct Strict;

impl<'de> DeserializeSeed<'de> for Strict {
    type Value = Value;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict {
    type Value = Value;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(serde_json::Number::from_f64(v).map_or(Value::Null, Value::Number))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_owned()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut out = Vec::new();
        loop {
            match seq.next_element_seed(self) {
                Ok(Some(v)) => out.push(v),
                Ok(None) => return Ok(Value::Array(out)),
                Err(e) => return Err(prefixed(e, &out.len().to_string())),
            }
        }
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut out = Map::new();
        while let Some(key) = map.next_key::<String>()? {
            // One search of the map per key: the slot found is the one filled.
            let slot = match out.entry(key) {
                Entry::Vacant(slot) => slot,
                Entry::Occupied(seen) => {
                    let seg = crate::text::pointer_token(seen.key());
                    return Err(de::Error::custom(format_args!(
                        "{MARK}{DUPLICATE}{WHY_END}/{seg}{POINTER_END}"
                    )));
                }
            };
            match map.next_value_seed(self) {
                Ok(v) => {
                    slot.insert(v);
                }
                Err(e) => return Err(prefixed(e, slot.key())),
            }
        }
        Ok(Value::Object(out))
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn the_first_of_several_values_on_a_line_is_found_where_it_ends() {
        let several = |t: &str| super::end_of_first_of_several(t.as_bytes());
        assert_eq!(several(r#"{"id":1}{"id":2}"#), Some(8));
        assert_eq!(several(r#"{"id":1} {"id":2}"#), Some(8));
        assert_eq!(several(r#"{"id":1}[{"id":2}]"#), Some(8));
        assert_eq!(several(r#"{"id":1}}"#), None, "an object closed early");
        assert_eq!(several(r#"{"id":1}, "params": {}}"#), None);
        assert_eq!(several("[1] x"), None);
        assert_eq!(several(r#"{"id":1}  "#), None, "one value and spaces");
        assert_eq!(several(r#"{"id":1"#), None, "cut off");
        assert_eq!(several(r#"{"id":}{"id":2}"#), None, "the first no JSON");
        assert_eq!(several(""), None);
    }

    #[test]
    fn an_error_member_written_twice_is_read_as_its_last() {
        let error =
            r#"{"code":"x","message":1,"code":-32602,"data":[1],"message":"bad","data":{"a":1}}"#;
        let body = format!(r#"{{"jsonrpc":"2.0","id":1,"error":{error}}}"#);
        let Ok(Body::Single(m)) = parse(body.as_bytes()) else {
            panic!("{body}")
        };
        assert_eq!(m.error_code(), Some(INVALID_PARAMS));
        let head = ErrorHead::read(m.error.unwrap());
        assert_eq!(head.code.and_then(|c| integer(&c)), Some(INVALID_PARAMS));
        assert_eq!(head.message.as_deref(), Some("bad"));
        assert_eq!(head.data.map(RawValue::get), Some(r#"{"a":1}"#));
        for not_an_object in ["-32602", r#""code""#, "[1]", "null"] {
            let raw = RawValue::from_string(not_an_object.into()).unwrap();
            let head = ErrorHead::read(&raw);
            assert!(head.code.is_none() && head.message.is_none() && head.data.is_none());
        }
    }

    #[test]
    fn a_refusal_names_no_request() {
        let error = r#"{"code":-32000,"message":"Bad Request: No valid session ID provided"}"#;
        for body in [
            format!(r#"{{"jsonrpc":"2.0","error":{error},"id":null}}"#),
            // As the TypeScript SDK's servers write it: no id at all.
            format!(r#"{{"jsonrpc":"2.0","error":{error}}}"#),
        ] {
            assert_eq!(refusal(body.as_bytes()).map(RawValue::get), Some(error));
            assert!(parse(body.as_bytes()).is_err() || body.contains("null"));
        }
        for not in [
            format!(r#"{{"jsonrpc":"2.0","error":{error},"id":7}}"#),
            format!(r#"{{"jsonrpc":"2.0","method":"x","error":{error}}}"#),
            r#"{"jsonrpc":"2.0","result":{}}"#.to_string(),
            "<html>".to_string(),
        ] {
            assert_eq!(refusal(not.as_bytes()).map(RawValue::get), None, "{not}");
        }
    }

    #[test]
    fn replace_at_keeps_every_other_member_as_written() {
        let v = RawValue::from_string("\"t-9\"".into()).unwrap();
        let out = replace_at(
            br#"{"jsonrpc":"2.0","id":1,"params":{"a":123456789012345678901234567890,"_meta":{"progressToken":5}}}"#,
            &["params", "_meta", "progressToken"],
            &v,
        )
        .unwrap();
        assert_eq!(
            std::str::from_utf8(&out).unwrap(),
            r#"{"jsonrpc":"2.0","id":1,"params":{"a":123456789012345678901234567890,"_meta":{"progressToken":"t-9"}}}"#
        );
        let made = replace_at(br#"{"id":1}"#, &["params", "_meta", "x"], &v).unwrap();
        assert_eq!(
            std::str::from_utf8(&made).unwrap(),
            r#"{"params":{"_meta":{"x":"t-9"}},"id":1}"#
        );
        assert!(replace_at(br#"[1]"#, &["id"], &v).is_none());
    }

    #[test]
    fn ids_match_by_value_not_spelling() {
        for (a, b) in [
            (r#""\u0037""#, r#""7""#),
            ("7E0", "7"),
            ("7.0", "7"),
            ("-0", "0"),
            ("7e0", "7.0"),
            (r#""a\/b""#, r#""a/b""#),
        ] {
            assert_eq!(id_key(a), id_key(b), "{a} ~ {b}");
        }
        for (a, b) in [
            (r#""7""#, "7"),
            ("7", "8"),
            ("7.5", "7"),
            ("null", r#""null""#),
        ] {
            assert_ne!(id_key(a), id_key(b), "{a} !~ {b}");
        }
        // No request's id: kept as written, never read.
        for id in [r#"[{"":0},{"":0}]"#, r#"{"a":[1]}"#, "true"] {
            assert!(matches!(id_key(id), Cow::Borrowed(b) if b == id), "{id}");
        }
    }

    use super::*;

    fn single(body: &str) -> Result<Message<'_>, Rejection<'_>> {
        match parse(body.as_bytes())? {
            Body::Single(m) => Ok(m),
            Body::Batch(_) => panic!("not a batch"),
        }
    }

    #[test]
    fn request_keeps_raw_members() {
        let m =
            single(r#"{"jsonrpc":"2.0","id":7,"method":"x/y","params":{"a" : 1},"x":[]}"#).unwrap();
        assert!(m.is_request());
        assert_eq!(m.id.unwrap().get(), "7");
        assert_eq!(m.raw_params().unwrap().get(), r#"{"a" : 1}"#);
    }

    #[test]
    fn call_params_are_read_in_the_same_pass() {
        let m = single(
            r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t\u0041","arguments":{"n":1},"_meta":{"k":2}}}"#,
        )
        .unwrap();
        let Some(Params::Call(call)) = &m.params else {
            panic!("not read typed: {:?}", m.params)
        };
        assert_eq!(call.name, "tA");
        assert_eq!(call.arguments.unwrap(), r#"{"n":1}"#);
        assert_eq!(call.meta, Some(r#"{"k":2}"#));
        assert!(!m.names_version());
        assert_eq!(m.params_name().as_deref(), Some("tA"));
        // Arguments stay text for the guard, which finds a duplicate key in them.
        let m = single(
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1,"a":2}}}"#,
        )
        .unwrap();
        assert!(matches!(m.params, Some(Params::Call(_))));
    }

    #[test]
    fn call_params_left_as_text_when_they_come_first_or_do_not_read() {
        for body in [
            // Params before the method: the method is not known yet.
            r#"{"jsonrpc":"2.0","id":1,"params":{"name":"t"},"method":"tools/call"}"#,
            // No name: the guard reads them again to say what is wrong.
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#,
        ] {
            let m = single(body).unwrap();
            assert!(m.raw_params().is_some(), "{body}");
        }
    }

    #[test]
    fn envelope_members_are_refused_twice_even_when_null() {
        for body in [
            r#"{"jsonrpc":"2.0","id":1,"method":null,"method":"tools/call"}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"a"},"params":{"name":"b"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"ping"}"#,
        ] {
            assert_eq!(single(body).unwrap_err().code(), INVALID_REQUEST, "{body}");
        }
        // A null method is no method: with a result, a response.
        let m = single(r#"{"jsonrpc":"2.0","id":1,"method":null,"result":{}}"#).unwrap();
        assert!(m.method.is_none());
    }

    #[test]
    fn an_array_is_not_an_envelope() {
        let r = single(r#"[["2.0", 1, "ping"]]"#);
        assert!(matches!(r, Err(Rejection::Batch { .. })), "{r:?}");
    }

    #[test]
    fn a_request_id_is_a_string_or_a_number() {
        for id in ["1", "-7", "1.5", "2e3", r#""a""#] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
            assert_eq!(single(&body).unwrap().id.unwrap().get(), id);
        }
        for id in ["null", "true", "false", "[1]", r#"{"a":1}"#] {
            let body = format!(r#"{{"jsonrpc":"2.0","id":{id},"method":"ping"}}"#);
            assert_eq!(single(&body).unwrap_err().code(), INVALID_REQUEST, "{id}");
        }
        // A response that names no request keeps its `null`.
        let m = single(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}}"#);
        assert_eq!(m.unwrap().id.unwrap().get(), "null");
    }

    #[test]
    fn unreadable_params_say_which_member_without_a_place_in_them() {
        let said = |text: &str| call_params(text).unwrap_err().to_string();
        assert_eq!(said("[]"), "\"params\" must be an object");
        let no_name = "\"name\" is missing: send the name of the tool to call";
        assert_eq!(said(r#"{"arguments": {}}"#), no_name);
        let not_text = "\"name\" must be a string: the name of the tool to call";
        for name in ["null", "5", r#"["add"]"#, r#"{"add":1}"#] {
            assert_eq!(said(&format!(r#"{{"name": {name}}}"#)), not_text, "{name}");
        }
        assert_eq!(said(r#"{"name":"a","name":"b"}"#), "duplicate field `name`");
        // The envelope's own `method` alike, where the place counts within the message.
        let body = r#"{"jsonrpc":"2.0","id":1,"method":5}"#;
        let why = single(body).unwrap_err().message();
        assert_eq!(
            why,
            "Invalid Request: \"method\" must be a string at line 1 column 35"
        );
    }

    #[test]
    fn a_calls_params_are_an_object() {
        let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":["add",{"a":1}]}"#;
        let m = single(body).unwrap();
        let Some(Params::Raw(raw)) = m.params else {
            panic!("read typed: {:?}", m.params)
        };
        assert!(call_params(raw.get()).is_err());
        assert_eq!(call_params(r#"{"name":"add"}"#).unwrap().name, "add");
    }

    #[test]
    fn text_that_stops_being_json_is_answered_under_the_id_it_began_with() {
        let refused = |body: &[u8]| {
            let r = parse(body).unwrap_err();
            assert_eq!(r.code(), PARSE_ERROR, "{}", String::from_utf8_lossy(body));
            r.id().map(|id| id.get().to_owned())
        };
        let not_utf8 = b"{\"jsonrpc\":\"2.0\",\"id\":\"q-1\",\"method\":\"tools/call\",\"params\":{\"name\":\"echo\",\"arguments\":{\"text\":\"caf\xe9\"}}}";
        for (body, named) in [
            (&not_utf8[..], Some(r#""q-1""#)),
            (br#"{"jsonrpc":"2.0","id":10,"method":"x""#, Some("10")),
            (br#"{"jsonrpc":"2.0","id":11,"method":"x"}}"#, Some("11")),
            (
                br#"{"jsonrpc":"2.0","id":12,"method":"x"} {"jsonrpc":"2.0"}"#,
                Some("12"),
            ),
            (
                br#"{"jsonrpc":"2.0","id":13,"method":"x","params":{"a":tru}}"#,
                Some("13"),
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":16,\"method\":\"\xff\"}",
                Some("16"),
            ),
            // The fault before the id or the method, or in the id.
            (
                br#"{"jsonrpc":"2.0","method":"x","params":{"a":tru},"id":14}"#,
                None,
            ),
            (
                br#"{"jsonrpc":"2.0","id":15,"params":{"a":tru},"method":"x"}"#,
                None,
            ),
            (
                b"{\"jsonrpc\":\"2.0\",\"id\":\"\xff\",\"method\":\"x\"}",
                None,
            ),
            // No id a request may have, or not one reading of it.
            (br#"{"jsonrpc":"2.0","id":null,"method":"x""#, None),
            (br#"{"jsonrpc":"2.0","id":17,"id":18,"method":"x""#, None),
            (br#"{"jsonrpc":"2.0","id":19,"method":7,"#, Some("19")),
            (
                br#"{"jsonrpc":"2.0","id":19,"method":"x","method":"y""#,
                None,
            ),
            // Not a request: a response's id is one of the server's.
            (br#"{"jsonrpc":"2.0","id":20,"result":{"#, None),
            (br#"{"jsonrpc":"2.0","id":21,"error":{},"method":"x""#, None),
            // A batch is answered as one: no item's id.
            (br#"[{"jsonrpc":"2.0","id":22,"method":"x"}"#, None),
            (b"", None),
        ] {
            assert_eq!(
                refused(body).as_deref(),
                named,
                "{}",
                String::from_utf8_lossy(body)
            );
        }
        assert_eq!(
            String::from_utf8(parse(not_utf8).unwrap_err().answer()).unwrap(),
            r#"{"jsonrpc":"2.0","id":"q-1","error":{"code":-32700,"message":"Parse error: the message is not UTF-8 (invalid utf-8 sequence of 1 bytes from index 98); send its text as UTF-8"}}"#
        );
    }

    #[test]
    fn truncated_json_is_a_parse_error() {
        let r = single(r#"{"jsonrpc":"2.0","id":99,"method":"tools/list""#).unwrap_err();
        assert_eq!(r.code(), PARSE_ERROR);
    }

    #[test]
    fn json_that_is_not_jsonrpc_is_invalid() {
        for body in [
            r#""hello""#,
            "42",
            r#"{"id":1,"method":"x"}"#,
            r#"{"jsonrpc":"1.0","id":1,"method":"x"}"#,
            r#"{"jsonrpc":"2.0","id":1}"#,
            "[]",
        ] {
            assert_eq!(
                parse(body.as_bytes()).unwrap_err().code(),
                INVALID_REQUEST,
                "{body}"
            );
        }
    }

    #[test]
    fn an_invalid_request_is_answered_under_its_id() {
        fn id(body: &str) -> Option<&str> {
            parse(body.as_bytes()).unwrap_err().id().map(RawValue::get)
        }
        for (body, named) in [
            (r#"{"id":1,"method":"x"}"#, Some("1")),
            (r#"{"jsonrpc":"1.0","id":"a","method":"x"}"#, Some(r#""a""#)),
            (r#"{"jsonrpc":"2.0","id":2,"method":7}"#, Some("2")),
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"x","params":7,"params":8}"#,
                Some("3"),
            ),
            // No id a request may have, or no one reading of the message.
            (
                r#"{"jsonrpc":"2.0","id":3,"method":"x","method":"y"}"#,
                None,
            ),
            (r#"{"jsonrpc":"1.0","id":null,"method":"x"}"#, None),
            (r#"{"jsonrpc":"2.0","id":true,"method":"x"}"#, None),
            (r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#, None),
            // Not a request: a response's id is one of the server's requests.
            (r#"{"jsonrpc":"1.0","id":4,"result":{}}"#, None),
            (r#"{"jsonrpc":"2.0","id":5,"method":"x","result":{}}"#, None),
            (r#"{"jsonrpc":"2.0","id":6}"#, None),
            (r#"{"jsonrpc":"2.0","id":7,"error":{},"error":{}}"#, None),
        ] {
            assert_eq!(id(body), named, "{body}");
        }
        let answer = parse(br#"{"id":1,"method":"x"}"#).unwrap_err().answer();
        assert_eq!(
            String::from_utf8(answer).unwrap(),
            r#"{"jsonrpc":"2.0","id":1,"error":{"code":-32600,"message":"Invalid Request: the \"jsonrpc\" member must be \"2.0\""}}"#
        );
    }

    #[test]
    fn a_batch_with_an_item_that_is_no_message_answers_each_request() {
        let answer = |body: &str| {
            let answer = parse(body.as_bytes()).unwrap_err().answer();
            serde_json::from_slice::<Value>(&answer).unwrap()
        };
        let error = |id: Option<Value>, why: &str| {
            let mut e = serde_json::json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": format!("Invalid Request: {why}")}});
            if let Some(id) = id {
                e["id"] = id;
            }
            e
        };
        let nothing_sent =
            "item 2 of the batch is no JSON-RPC message; nothing in the batch was sent";
        let version = r#"the "jsonrpc" member must be "2.0""#;
        // Each good request is answered under its id, a bad one that names a request under
        // its own, and of the bad ones that name none only the first, by its place.
        assert_eq!(
            answer(
                r#"[{"jsonrpc":"2.0","id":1,"method":"x"},5,{"id":"b","method":"y"},{"jsonrpc":"2.0","method":"n"},"s",{"jsonrpc":"2.0","id":3,"result":{}},{"jsonrpc":"2.0","id":4.5,"method":"z"}]"#
            ),
            serde_json::json!([
                error(Some(1.into()), nothing_sent),
                error(Some(4.5.into()), nothing_sent),
                error(
                    None,
                    "item 2 of the batch: invalid type: integer `5`, expected a JSON-RPC message object at line 1 column 1"
                ),
                error(Some("b".into()), version),
            ])
        );
        // A batch of nothing but bad items still gets an array: it answers each item that
        // names a request.
        assert_eq!(
            answer(r#"[{"id":7,"method":"x"},[]]"#),
            serde_json::json!([
                error(Some(7.into()), version),
                error(
                    None,
                    "item 2 of the batch: invalid type: sequence, expected a JSON-RPC message object at line 1 column 0"
                ),
            ])
        );
    }

    #[test]
    fn duplicate_method_is_invalid() {
        let r = single(r#"{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"}"#)
            .unwrap_err();
        assert_eq!(r.code(), INVALID_REQUEST);
    }

    #[test]
    fn deep_nesting_is_refused_without_overflow() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","id":1,"method":"x","params":{}{}}}"#,
            "[".repeat(100_000),
            "]".repeat(100_000)
        );
        let m = single(&deep).unwrap();
        let args = RawValue::from_string(m.raw_params().unwrap().get().to_string()).unwrap();
        let Err(ArgumentsError::Unreadable { pointer, why }) = parse_arguments(args.get()) else {
            panic!("refused as too deep");
        };
        assert_eq!(why, Unreadable::TooDeep);
        assert_eq!(pointer, "/0".repeat(127));
    }

    /// Each thing JSON allows and no value holds is told by its kind, at its place; these
    /// pin `serde_json`'s wording, which is all its error carries.
    #[test]
    fn what_the_parser_cannot_read_is_found_with_its_path() {
        for (args, at, kind) in [
            (r#"{"s":"\ud800"}"#, "/s", Unreadable::HalfCharacter),
            (r#"{"s":"\ud800x"}"#, "/s", Unreadable::HalfCharacter),
            (r#"{"s":"\udc00"}"#, "/s", Unreadable::HalfCharacter),
            (r#"{"a":[1,{"n":1e400}]}"#, "/a/1/n", Unreadable::OutOfRange),
            (r#"{"a":{"\ud800":1}}"#, "/a", Unreadable::HalfCharacter),
            (r#"{"\ud800":1}"#, "", Unreadable::HalfCharacter),
        ] {
            assert_eq!(
                parse_arguments(args),
                Err(ArgumentsError::Unreadable {
                    pointer: at.into(),
                    why: kind
                }),
                "{args}"
            );
        }
        let pair = r#"{"s":"\ud83d\ude00"}"#;
        assert_eq!(parse_arguments(pair).unwrap()["s"], "\u{1F600}");
    }

    #[test]
    fn duplicate_argument_keys_are_found_with_their_path() {
        let raw = RawValue::from_string(r#"{"a":{"list":[{"p":1,"p":2}]}}"#.into()).unwrap();
        assert_eq!(
            parse_arguments(raw.get()),
            Err(ArgumentsError::Duplicate {
                pointer: "/a/list/0/p".into()
            })
        );
    }

    #[test]
    fn error_without_id_has_no_id_member() {
        let body = error_response(None, PARSE_ERROR, "Parse error", None);
        assert_eq!(
            body,
            br#"{"jsonrpc":"2.0","error":{"code":-32700,"message":"Parse error"}}"#
        );
    }
}
