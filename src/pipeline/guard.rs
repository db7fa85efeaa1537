//! The request side of `tools/call`: docs/contract.md §1, row by row, for any transport.
//!
//! A call is answered here when it is malformed, names an unknown or denied tool, or breaks
//! the tool's contract (in `enforce` mode); otherwise it goes upstream, as the original bytes
//! unless coercion changed the arguments. When the scope's schemas are not known yet, they are
//! listed once through the transport's [`Lister`], with a request id the client cannot have
//! used; that answer never reaches the client.

use super::Kind;
use super::answer::{Answer, Requested};
use crate::catalog::{Lookup, Page, Schema, ScopeKey, TooLarge};
use crate::config::{
    AnswerShape, Mode, OnCompileError, OnUnavailable, OutputMode, ToolSettings, Undeclared,
};
use crate::error::UpstreamError;
use crate::gateway::{Gateway, Target};
use crate::jsonrpc::arguments::Arguments;
use crate::jsonrpc::{self, ArgumentsError, CallParams, Params, footprint};
use crate::mcp::{self, Era};
use crate::policy::clients::{Limited, Rate};
use crate::text;
use crate::validate::{self, Judge, Report, Verdict, Violation};
use bytes::Bytes;
use futures_util::future::Either;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

/// How a transport sends toolgate's own `tools/list` and reads the answer to it.
pub trait Lister {
    /// A refusal to hand to the client as it came (an HTTP 404 for a gone session, a 401).
    type Relay: Send;
    /// Sends `request` (a complete JSON-RPC request with id `id`) and returns the result.
    fn list(
        &self,
        request: Bytes,
        id: &str,
    ) -> impl Future<Output = Result<Box<RawValue>, ListFailed<Self::Relay>>> + Send;
}

/// Why the scope's tools could not be listed.
pub enum ListFailed<R> {
    Relay(R),
    Unavailable(UpstreamError),
    /// The upstream answered the listing with an error or something unreadable.
    Refused(String),
}

pub enum Decision<R> {
    /// Send these bytes upstream (the original, or with corrected arguments).
    Forward(Bytes, Kind),
    /// toolgate answers the call itself.
    Answer(Answer),
    /// Hand the upstream's refusal of the listing to the client.
    Relay(R),
}

/// One `tools/call` as it arrived.
pub struct Call<'a> {
    pub target: &'a Target,
    pub key: &'a ScopeKey,
    pub era: Era,
    pub id: &'a RawValue,
    /// Taken from the message: the arguments are validated (and coerced) in place.
    pub params: Option<Params<'a>>,
    /// The whole message, forwarded as is when nothing changes.
    pub bytes: &'a Bytes,
    /// Who calls, when `[auth]` or `[clients]` says anything about it.
    pub client: Option<&'a crate::policy::clients::Client>,
    /// It carries a `requestState` (set by the guard once it has read the params).
    pub retry: bool,
    /// It asks for a task (SEP-1686; set by the guard once it has read the params): what
    /// the guard refuses of it goes as a JSON-RPC error ([`Answer::call_failed`]).
    pub task: bool,
}

impl Call<'_> {
    /// toolgate's answer to this call, refused or failed here for `text`, with `details`
    /// under `key`; `code` is the JSON-RPC error's when it asked for a task.
    fn failed(&self, code: i64, text: String, key: &str, details: Value) -> Answer {
        Answer::call_failed(self.era, self.id, self.task, code, text, key, details)
    }
}

/// What a log line shows of a tool's name: a client may send one of megabytes.
fn shown(tool: &str) -> &str {
    crate::text::clipped(tool, 200)
}

/// The metric label for tools whose names came from a client and that no server listed:
/// made-up names must not each make a series.
pub const UNLISTED: &str = "(unlisted)";

/// A `tools/call` without an id is a notification: nothing would answer it, so it could run
/// the tool with no check at all (a generic JSON-RPC server does). It never goes upstream;
/// it is counted, and the transport answers with the reason where it can.
pub fn refuse_call_notification(
    gw: &Gateway,
    target: &Target,
    m: &jsonrpc::Message<'_>,
) -> Option<&'static str> {
    if m.id.is_some() || m.method() != Some(mcp::TOOLS_CALL) {
        return None;
    }
    tracing::info!(upstream = %target.name, outcome = "refused_notification", "tools/call");
    count(gw, target, UNLISTED, "refused_notification");
    Some(
        "Invalid Request: tools/call must be a request with an id; toolgate does not forward it as a notification",
    )
}

/// The metric label for a tool decided on before its schema was looked up (denied, or not
/// checked): its name once a server listed it, else [`UNLISTED`], since it may be made up.
pub(crate) fn listed_label<'a>(gw: &Gateway, key: &ScopeKey, tool: &'a str) -> &'a str {
    match gw.catalog.lookup(key, tool) {
        Lookup::Found(_) => tool,
        Lookup::Missing { .. } => UNLISTED,
    }
}

/// toolgate's own answer to a call, marked with why (for traces).
fn answered<R>(outcome: &'static str, answer: Answer) -> Decision<R> {
    Decision::Answer(answer.because(outcome))
}

/// Counts one `tools/call` outcome. An unknown tool's name came from a client: it counts
/// under [`UNLISTED`].
fn count(gw: &Gateway, target: &Target, tool: &str, outcome: &'static str) {
    let tool = if outcome == "unknown" { UNLISTED } else { tool };
    (target.series).tool_call(&gw.metrics, tool, outcome);
}

/// Decides one `tools/call` (docs/contract.md §1), when called unless the call must wait for
/// its scope's listing or a shared rate. Not an `async fn`: that would hold the call twice
/// (as given, and as decided), and the future of every call would carry both.
pub fn tools_call<'a, L: Lister>(
    gw: &'a Gateway,
    mut call: Call<'a>,
    lister: &'a L,
) -> impl Future<Output = Decision<L::Relay>> + 'a {
    match decide(gw, &mut call, Listed::NotYet) {
        Ok(decision) => Either::Left(std::future::ready(decision)),
        // Boxed: a call that waits is rare next to one decided at once, and every call's
        // future would otherwise carry the call, a listing's and a round trip's size, and
        // copy them.
        Err(wait) => Either::Right(Box::pin(waited(gw, call, wait, lister))),
    }
}

/// What a call waits for before the guard can decide it.
enum Wait<'a> {
    /// The scope's tools are not known: list them, then decide again.
    Listing { meta: Option<&'a str> },
    /// The call goes on if the client's rate, shared with the other replicas, allows it.
    SharedRate(Admitting<'a>),
}

/// What listing the scope's tools came to, for a call that waited for it.
enum Listed<R> {
    NotYet,
    Done,
    Failed(ListFailed<R>),
}

/// Decides a call that waits: lists the scope's tools or asks the shared rate, then decides.
async fn waited<'a, L: Lister>(
    gw: &Gateway,
    mut call: Call<'a>,
    mut wait: Wait<'a>,
    lister: &L,
) -> Decision<L::Relay> {
    loop {
        let listed = match wait {
            Wait::SharedRate(admitting) => return admitting.ask(gw, &call).await,
            Wait::Listing { meta } => list(gw, call.target, call.key, meta, lister).await,
        };
        // Decided again with the listing's outcome, which never waits for another.
        wait = match decide(gw, &mut call, listed) {
            Ok(decision) => return decision,
            Err(wait) => wait,
        };
    }
}

/// The rules on one call, in order; `Err` says what the call must wait for first. A call
/// given back to wait for the listing keeps its params and has been counted nowhere.
fn decide<'a, R>(
    gw: &Gateway,
    call: &mut Call<'a>,
    listed: Listed<R>,
) -> Result<Decision<R>, Wait<'a>> {
    let mut params = match read_call(call) {
        Ok(p) => p,
        Err(answer) => return Ok(answered("malformed", answer)),
    };
    call.retry = params.request_state.is_some();
    call.task = params.task.is_some();
    let tool = params.name.as_ref();
    if let Some(denied) = deny(gw, call, tool) {
        return Ok(denied);
    }
    let settings = call.target.validation.policy_for(tool);
    if settings.mode == Mode::Off {
        let label = listed_label(gw, call.key, tool);
        return admit(gw, call, tool, label, "forwarded", call.bytes.clone());
    }
    let looked = gw.catalog.lookup(call.key, tool);
    let judged = judge_flat(call, tool, &looked, &listed, params.arguments);
    if judged == Some(true) {
        return admit(gw, call, tool, tool, "forwarded", call.bytes.clone());
    }
    let mut read = read_arguments(
        params.arguments,
        params.read.take().map(|parts| *parts),
        judged == Some(false),
    );
    let as_text = matches!(read, Read::Value(Err(ArgumentsError::NotObject)));
    if as_text {
        match settings
            .coerce
            .then(|| stood_for(params.arguments))
            .flatten()
        {
            Some(object) => read = Read::Value(object),
            None => return Ok(answered("malformed", not_object(call.id, params.arguments))),
        }
    }
    let entry = match (looked, listed) {
        (_, Listed::Failed(failed)) => return Ok(listing_failed(gw, call, tool, failed)),
        (Lookup::Found(t), _) => t,
        (Lookup::Missing { relist: true }, Listed::NotYet) => {
            let meta = params.meta;
            call.params = Some(Params::Call(params));
            return Err(Wait::Listing { meta });
        }
        (Lookup::Missing { .. }, _) => return Ok(unknown_tool(gw, call, tool)),
    };
    let schema = &entry.input;
    let v = &call.target.validation;
    if schema.invalid.is_some() && v.hides_invalid(tool) {
        // Hidden from every listing: the client cannot know it, so it is unknown here too.
        return Ok(unknown_tool(gw, call, tool));
    }
    let validator = match schema.validator() {
        Ok(validator) => validator,
        Err(why) => return unusable_schema(gw, call, tool, &why.0),
    };
    if let Read::InPlace(args) = &read
        && passes_in_place(call, tool, schema, settings, args)
    {
        return admit(gw, call, tool, tool, "forwarded", call.bytes.clone());
    }
    let mut args = arguments(read, params.arguments);
    if let Ok(args) = &args
        && let Err(why) = schema.reaches(args)
    {
        return unusable_schema(gw, call, tool, &why.0);
    }
    let checking = Checking {
        call,
        tool,
        schema,
        validator,
        settings,
    };
    let (held, mut checked) = checking.repairing(&mut args);
    if as_text || held != Held::AsSent {
        // The object goes in place of what held it (`with_arguments`).
        checked.coerced.get_or_insert_with(Vec::new);
    }
    let Some(report) = checked.report else {
        let (Some(changed), Ok(args)) = (checked.coerced, &args) else {
            return admit(gw, call, tool, tool, "forwarded", call.bytes.clone());
        };
        tracing::debug!(upstream = %call.target.name, tool = shown(tool), "arguments coerced");
        let bytes =
            with_arguments(call.bytes, args, &changed, &held).unwrap_or_else(|| call.bytes.clone());
        return admit(gw, call, tool, tool, "coerced", bytes);
    };
    refuse(gw, call, tool, settings.mode, report)
}

/// What one call's arguments are checked against: for the call as it came, and again for
/// each repair of refused arguments tried.
#[derive(Clone, Copy)]
struct Checking<'c> {
    call: &'c Call<'c>,
    tool: &'c str,
    schema: &'c Schema,
    validator: &'c jsonschema::Validator,
    settings: ToolSettings,
}

/// Arguments a refused call sent otherwise than the schema asks, as the model meant them.
struct Repair {
    held: Held,
    args: Value,
    checked: Checked,
}

/// Where the text of the arguments a call goes with lies in what it sent.
#[derive(Debug, PartialEq, Eq)]
enum Held {
    /// They are the arguments it sent.
    AsSent,
    /// Under the one member the arguments were wrapped in ([`Checking::unwrapped`]).
    Within(String),
    /// Spelt by the arguments' members, one character each ([`spread`]).
    Spelt,
}

impl Checking<'_> {
    /// The arguments' check; where it refuses them in coerce mode, the first repair of them
    /// that passes ([`Checking::repaired`]) in their place, with its check.
    fn repairing(&self, args: &mut Result<Value, Misread>) -> (Held, Checked) {
        let checked = self.check(args);
        if let Some(report) = &checked.report
            && self.settings.coerce
            && let Some(mut repair) = self.repaired(args, report)
        {
            // Arguments repaired as they lie keep what the refused check converted in them,
            // and go with it written too.
            if let (Held::AsSent, Some(before)) = (&repair.held, &checked.coerced) {
                let written = repair.checked.coerced.get_or_insert_with(Vec::new);
                for place in before {
                    validate::note(written, place);
                }
            }
            *args = Ok(repair.args);
            return (repair.held, repair.checked);
        }
        (Held::AsSent, checked)
    }

    /// A refused call's arguments as the model most likely meant them, where they then pass
    /// every check: wrapped once more ([`Checking::unwrapped`]), spread from their text one
    /// character each ([`spread`]), or under declared names spelt otherwise
    /// ([`Checking::renamed`]).
    fn repaired(&self, args: &Result<Value, Misread>, report: &Report) -> Option<Repair> {
        let Ok(args) = args else {
            return None;
        };
        let repair = |held, (args, checked)| Repair {
            held,
            args,
            checked,
        };
        if let Some((member, inner)) = self.unwrapped(args, report)
            && let Some(passing) = self.passing(inner)
        {
            return Some(repair(Held::Within(member), passing));
        }
        if let Some(passing) = spread(args).and_then(|spelt| self.passing(spelt)) {
            return Some(repair(Held::Spelt, passing));
        }
        self.renamed(args)
            .map(|passing| repair(Held::AsSent, passing))
    }

    /// `args`, a repair of refused arguments, with their check, where they pass every check.
    fn passing(&self, args: Value) -> Option<(Value, Checked)> {
        self.schema.reaches(&args).ok()?;
        let mut again = Ok(args);
        let checked = self.check(&mut again);
        let args = again.ok()?;
        checked.report.is_none().then_some((args, checked))
    }

    /// What a refused call wrapped once more under one name the schema does not declare
    /// ([`Report::wraps`], [`wrapper`]), as an object or as its JSON text, and that name: the
    /// call goes with what the member holds in its place when that passes every check on
    /// its own.
    fn unwrapped(&self, args: &Value, report: &Report) -> Option<(String, Value)> {
        let members = args.as_object()?;
        let (member, held) = wrapper(members, self.tool)?;
        let held = match held {
            Value::Object(held) => held.clone(),
            Value::String(text) => object_in(text)?.ok()?,
            _ => return None,
        };
        let wraps = report.wraps(&self.schema.value, members, &held);
        wraps.then(|| (member.clone(), Value::Object(held)))
    }

    /// The arguments of a refused call with each undeclared name that is a declared one
    /// spelt with other case or separators sent under the declared name (`max_results` for
    /// `maxResults`, [`validate::Renamed`]), with their check, where they then pass every
    /// check; the places renamed are written as coerced.
    fn renamed(&self, args: &Value) -> Option<(Value, Checked)> {
        // Where undeclared names are allowed, they are the server's business.
        if self.settings.undeclared == Undeclared::Allow {
            return None;
        }
        let renames: Vec<validate::Renamed> = self.schema.shape.as_ref()?.renamed(args);
        if renames.is_empty() {
            return None;
        }
        let mut again = args.clone();
        for r in &renames {
            let object = again.pointer_mut(&r.at)?.as_object_mut()?;
            let value = object.remove(&r.from)?;
            object.insert(r.to.clone(), value);
        }
        let (again, mut checked) = self.passing(again)?;
        let written = checked.coerced.get_or_insert_with(Vec::new);
        for r in &renames {
            validate::note(written, &format!("{}/{}", r.at, text::pointer_token(&r.to)));
        }
        Some((again, checked))
    }
}

/// The member arguments may be wrapped in: their one member; the one beside the name of the
/// `tool` called (a model that writes the call itself as its arguments:
/// `{"name": "add", "arguments": {"a": 1}}`); or `properties` beside nothing but JSON
/// Schema's own words for an object (a model that echoes the tool's schema with its values
/// written in: `{"type": "object", "properties": {"a": 1}, "required": ["a"]}`).
fn wrapper<'m>(
    members: &'m serde_json::Map<String, Value>,
    tool: &str,
) -> Option<(&'m String, &'m Value)> {
    const ECHOED: [&str; 6] = [
        "$schema",
        "type",
        "required",
        "additionalProperties",
        "title",
        "description",
    ];
    if members.len() == 1 {
        return members.iter().next();
    }
    if members.len() == 2
        && let Some((name, _)) = members.iter().find(|(_, v)| v.as_str() == Some(tool))
    {
        return members.iter().find(|(k, _)| *k != name);
    }
    let echo = (members.keys()).all(|k| k == "properties" || ECHOED.contains(&k.as_str()));
    echo.then(|| members.get_key_value("properties")).flatten()
}

/// The object a client spread from its text, one member per character under its place
/// (`{"0": "{", "1": "\"", …}`: a JavaScript client that spreads a tool input its model gave
/// as text sends it so), where the text writes one. The call goes with that object, every
/// value as the text writes it, when it passes every check.
fn spread(args: &Value) -> Option<Value> {
    let text = characters(args.as_object()?)?;
    object_in(&text)?.ok().map(Value::Object)
}

/// The text `members` spell, each a string of one character under its place in it (`"0"`,
/// `"1"`, …, every place once); `None` for members of any other kind.
fn characters(members: &serde_json::Map<String, Value>) -> Option<String> {
    let mut text = vec![None; members.len()];
    for (place, v) in members {
        let digits = place.bytes().all(|b| b.is_ascii_digit());
        let at: usize =
            (digits && (place == "0" || !place.starts_with('0'))).then(|| place.parse().ok())??;
        let mut chars = v.as_str()?.chars();
        let (Some(c), None) = (chars.next(), chars.next()) else {
            return None;
        };
        *text.get_mut(at)? = Some(c);
    }
    text.into_iter().collect()
}

/// The call's params, read whole; `Err` is the `-32602` for a call without readable ones.
fn read_call<'a>(call: &mut Call<'a>) -> Result<CallParams<'a>, Answer> {
    let malformed = |why: String| {
        Answer::error(
            Some(call.id),
            jsonrpc::INVALID_PARAMS,
            &format!("Invalid params for tools/call: {why}"),
            None,
        )
    };
    match call.params.take() {
        Some(Params::Call(p)) => Ok(p),
        Some(Params::Raw(raw)) => {
            jsonrpc::call_params(raw.get()).map_err(|e| malformed(e.to_string()))
        }
        None => Err(malformed("missing params with a \"name\"".into())),
    }
}

/// The answer to a call the gateway's or the client's policy does not allow, if it is one.
fn deny<R>(gw: &Gateway, call: &Call<'_>, tool: &str) -> Option<Decision<R>> {
    let target = call.target;
    let for_client = call.client.is_some_and(|c| !c.allows(tool));
    if target.validation.allows(tool) && !for_client {
        return None;
    }
    tracing::info!(upstream = %target.name, tool = shown(tool), outcome = "denied", client = call.client.map(|c| &*c.name), "tools/call");
    count(gw, target, listed_label(gw, call.key, tool), "denied");
    let whose = if for_client {
        "this client's policy"
    } else {
        "this gateway's policy"
    };
    let text = format!(
        "The tool \"{tool}\" is not available: {whose} does not allow it. Use another tool."
    );
    Some(answered(
        "denied",
        call.failed(
            jsonrpc::INVALID_PARAMS,
            text,
            "toolgate/policy",
            json!({"code": "tool_denied", "tool": tool}),
        ),
    ))
}

/// Arguments whose text cannot be read as one value: a key named twice, or a value the
/// parser cannot hold. A violation the report names, at its place.
struct Misread(Violation);

/// A call's arguments: read in place (the common path), or as a value, whose reader also
/// says what is wrong with them.
enum Read<'a> {
    InPlace(Arguments<'a>),
    Value(Result<serde_json::Map<String, Value>, ArgumentsError>),
}

/// Whether the call is valid as its arguments' text reads, for a tool whose schema has the
/// flat shape (`validate::Flat`) and no other rule on it: `Some(true)` for the common valid
/// call, decided before its arguments are read into parts; `Some(false)` for a refused one;
/// `None` when that check cannot tell. It runs ahead of the checks that come before the
/// arguments are read (readable arguments, a known tool, a usable schema), which any call
/// it passes would pass too; a call it does not pass meets them in their order.
fn judge_flat<R>(
    call: &Call<'_>,
    tool: &str,
    looked: &Lookup,
    listed: &Listed<R>,
    text: Option<&str>,
) -> Option<bool> {
    let (Lookup::Found(entry), Listed::NotYet | Listed::Done) = (looked, listed) else {
        return None;
    };
    let schema = &entry.input;
    if schema.invalid.is_some() || call.target.rules(tool).is_some() {
        return None;
    }
    schema.in_place()?.judge_flat(text.unwrap_or("{}"))
}

/// The arguments `text`, as the envelope's reader read them (`read`) or read here: as a
/// value straight away when they are known to be `refused`, which the report reads them as.
fn read_arguments<'a>(
    text: Option<&'a str>,
    read: Option<Arguments<'a>>,
    refused: bool,
) -> Read<'a> {
    let Some(text) = text else {
        return Read::InPlace(Arguments::empty());
    };
    match (!refused)
        .then(|| read.or_else(|| Arguments::read(text)))
        .flatten()
    {
        Some(args) => Read::InPlace(args),
        None => Read::Value(jsonrpc::parse_arguments(text)),
    }
}

/// Whether the call is valid as its arguments lie in the request, and no rule is left that
/// must read them as a value: then it goes upstream as it came. Without the schema's closed
/// form, a call whose undeclared arguments are judged is read as a value for the walk.
fn passes_in_place(
    call: &Call<'_>,
    tool: &str,
    schema: &Schema,
    settings: ToolSettings,
    args: &Arguments<'_>,
) -> bool {
    let Some(check) = schema.in_place() else {
        return false;
    };
    let walked = schema.shape.as_ref().is_some_and(validate::Shape::judges)
        && !matches!(settings.undeclared, Undeclared::Allow);
    // A whole number written as a float is coerced where the schema wants an integer.
    (check.closed || !walked)
        && call.target.rules(tool).is_none()
        && !(settings.coerce && args.has_whole_float())
        && check.validator.is_valid(args.root())
}

/// The object arguments that are no object (`text`) stand for, as coercion reads them, or
/// what is wrong with it: the one whose JSON text they hold in a string ([`held_object`]),
/// the one a list of one holds ([`only_object`]), or none at all where they are `null`,
/// `[]` or `""` ([`none_at_all`]).
fn stood_for(text: Option<&str>) -> Option<Result<serde_json::Map<String, Value>, ArgumentsError>> {
    if text.is_some_and(none_at_all) {
        return Some(Ok(serde_json::Map::new()));
    }
    match text.and_then(only_object) {
        Some(object) => Some(jsonrpc::parse_arguments(object)),
        None => held_object(text),
    }
}

/// The JSON text of the one object the list `text` holds: a framework that sends a call's
/// arguments as the list of what it was given, one object, sends them so.
fn only_object(text: &str) -> Option<&str> {
    if !text.trim_start().starts_with('[') {
        return None;
    }
    let items: Vec<&RawValue> = serde_json::from_str(text).ok()?;
    match items[..] {
        [item] if item.get().starts_with('{') => Some(item.get()),
        _ => None,
    }
}

/// Whether arguments written as `text` are none at all, though no object: `null` (a Go
/// client's nil map; the Python SDK reads it as no arguments, the TypeScript SDK answers it
/// with an internal error), `[]` (PHP writes an empty map so) or `""` (a model provider's
/// arguments for a function without parameters).
fn none_at_all(text: &str) -> bool {
    let text = text.trim();
    let empty_list = (text.strip_prefix('[').and_then(|t| t.strip_suffix(']')))
        .is_some_and(|within| within.trim().is_empty());
    text == "null" || text == "\"\"" || empty_list
}

/// The object that JSON text in the string `text` holds, or what is wrong with it (a key
/// twice, a number no value holds); `None` when the string holds no object's text. Model
/// providers give a function call's arguments as such a string, and some clients send it
/// on as the call's arguments.
fn held_object(
    text: Option<&str>,
) -> Option<Result<serde_json::Map<String, Value>, ArgumentsError>> {
    object_in(&held_text(text?)?)
}

/// The most times arguments are read as a string that holds JSON text: a framework that
/// encodes as JSON what it was given as JSON text encodes it twice.
const MAX_ENCODINGS: usize = 3;

/// The text the JSON string `raw` holds, read again while that is itself a string's JSON
/// text, up to [`MAX_ENCODINGS`] times.
fn held_text(raw: &str) -> Option<String> {
    let mut held = serde_json::from_str::<String>(raw).ok()?;
    for _ in 1..MAX_ENCODINGS {
        if !held.trim_start().starts_with('"') {
            break;
        }
        match serde_json::from_str::<String>(&held) {
            Ok(inner) => held = inner,
            Err(_) => break,
        }
    }
    Some(held)
}

/// The object the JSON text `text` holds, or what is wrong with it; `None` when it is not
/// an object's text. The text may be in a Markdown code block, as a model writes JSON for a
/// reader, and it may be a Python dict's or a JavaScript object's, as a model writing either
/// sends it (`validate::literal::as_json`); what is wrong is said of it as JSON.
fn object_in(text: &str) -> Option<Result<serde_json::Map<String, Value>, ArgumentsError>> {
    let text = text::unfenced(text).unwrap_or(text);
    if !text.trim_start().starts_with('{') {
        return None;
    }
    let read = jsonrpc::parse_arguments(text);
    let literal = || jsonrpc::parse_arguments(&validate::literal::as_json(text)?).ok();
    match read {
        Err(ArgumentsError::Unreadable { .. }) => Some(literal().map_or(read, Ok)),
        read => Some(read),
    }
}

/// The `-32602` for arguments that are no object: a malformed call, not a violation.
fn not_object(id: &RawValue, text: Option<&str>) -> Answer {
    let message = match held_object(text) {
        Some(_) => {
            "Invalid params for tools/call: \"arguments\" must be an object, not JSON text in a string; send the object itself"
        }
        None if text.is_some_and(none_at_all) => {
            "Invalid params for tools/call: \"arguments\" must be an object; send {} for a call without arguments, or leave them out"
        }
        None if text.and_then(only_object).is_some() => {
            "Invalid params for tools/call: \"arguments\" must be an object, not a list of one; send the object itself"
        }
        None if text.is_some_and(|t| t.trim_start().starts_with('[')) => {
            "Invalid params for tools/call: \"arguments\" must be an object, not a list: send each argument under its name"
        }
        None => "Invalid params for tools/call: \"arguments\" must be an object",
    };
    Answer::error(Some(id), jsonrpc::INVALID_PARAMS, message, None)
}

/// The call's arguments as an object, or what could not be read of them: arguments read in
/// place that would hold too much as a value are not read so.
fn arguments(read: Read<'_>, text: Option<&str>) -> Result<Value, Misread> {
    let read = match read {
        Read::InPlace(_) if text.is_some_and(|t| !footprint::affordable(t)) => {
            Read::Value(Err(ArgumentsError::too_large()))
        }
        read => read,
    };
    match read {
        Read::InPlace(args) => Ok(Value::Object(args.to_map())),
        Read::Value(Ok(map)) => Ok(Value::Object(map)),
        Read::Value(Err(ArgumentsError::Duplicate { pointer })) => Err(Misread(Violation {
            pointer,
            keyword: "duplicateKey".into(),
            message: "appears more than once; send each argument once".into(),
        })),
        Read::Value(Err(ArgumentsError::Unreadable { pointer, why })) => Err(Misread(Violation {
            pointer,
            keyword: "unreadable".into(),
            message: why.to_string(),
        })),
        // Answered before the arguments are read as an object (`not_object`).
        Read::Value(Err(ArgumentsError::NotObject)) => Ok(Value::Object(Default::default())),
    }
}

/// The answer to a call whose tool's schema could not be had from its server.
fn listing_failed<R>(
    gw: &Gateway,
    call: &Call<'_>,
    tool: &str,
    failed: ListFailed<R>,
) -> Decision<R> {
    let target = call.target;
    let (answer, outcome) = match failed {
        ListFailed::Relay(r) => return Decision::Relay(r),
        ListFailed::Unavailable(e) => {
            let requested = Requested::call(call.task);
            let answer = super::failed(gw, target, call.era, Some(call.id), requested, &e);
            (answer, e.outcome())
        }
        ListFailed::Refused(why) => {
            let said = format_args!("the tools/list it needed was refused: {why}");
            target
                .failures
                .failed(&target.name, "tools_list_refused", &said);
            let text = format!(
                "The tool server did not list its tools, so the call to \"{tool}\" could not be checked: {why}"
            );
            let answer = call.failed(
                jsonrpc::INTERNAL_ERROR,
                text,
                "toolgate/upstream",
                json!({"code": "tools_list_failed"}),
            );
            (answer, "upstream_error")
        }
    };
    // No listing named the tool: its name is the client's.
    count(gw, target, UNLISTED, outcome);
    answered(outcome, answer)
}

/// A call to a tool whose schema does not compile, as `on_compile_error` says.
fn unusable_schema<'a, R>(
    gw: &Gateway,
    call: &Call<'a>,
    tool: &str,
    why: &str,
) -> Result<Decision<R>, Wait<'a>> {
    let target = call.target;
    match target.validation.on_compile_error {
        OnCompileError::Forward => {
            tracing::debug!(upstream = %target.name, tool = shown(tool), why, "schema not usable for the call: forwarded unvalidated");
            admit(gw, call, tool, tool, "forwarded", call.bytes.clone())
        }
        OnCompileError::Reject => {
            count(gw, target, tool, "schema_unusable");
            let text = format!(
                "The input schema of tool \"{tool}\" is not usable ({why}), so calls to it are refused. This is a server-side problem."
            );
            Ok(answered(
                "schema_unusable",
                call.failed(
                    jsonrpc::INVALID_PARAMS,
                    text,
                    "toolgate/validation",
                    json!({"code": "schema_unusable"}),
                ),
            ))
        }
    }
}

/// What the checks found: what breaks the contract, or the arguments coercion changed.
struct Checked {
    report: Option<Report>,
    coerced: Option<Vec<String>>,
}

impl Checking<'_> {
    /// The arguments against the schema, then undeclared arguments, then the operator's rules
    /// (docs/contract.md §1): every violation in one report.
    fn check(&self, args: &mut Result<Value, Misread>) -> Checked {
        let Checking {
            call,
            tool,
            schema,
            validator,
            settings,
        } = *self;
        let v = &call.target.validation;
        let mut checked = Checked {
            report: None,
            coerced: None,
        };
        match args {
            Err(Misread(violation)) => {
                let violation = std::mem::take(violation);
                checked.report = Some(Report::misread(
                    tool,
                    &schema.value,
                    violation,
                    v.max_errors,
                ))
            }
            Ok(args) => match validate::check(
                tool,
                schema.compiled(validator),
                args,
                settings.coerce,
                v.max_errors,
            ) {
                Verdict::Valid => {}
                Verdict::Coerced { changed } => checked.coerced = Some(changed),
                Verdict::Invalid { report, changed } => {
                    checked.report = Some(report);
                    checked.coerced = (!changed.is_empty()).then_some(changed);
                }
            },
        }
        let Ok(args) = args else {
            return checked;
        };
        let empty =
            || Report::from_violations(tool, &schema.value, Default::default(), v.max_errors);
        let judge = match settings.undeclared {
            Undeclared::RejectTypos => Some(Judge::Typos),
            Undeclared::Reject => Some(Judge::All),
            Undeclared::Allow => None,
        };
        if let (Some(shape), Some(judge)) = (&schema.shape, judge)
            && shape.judges()
        {
            let missing = checked
                .report
                .as_ref()
                .map(Report::missing)
                .unwrap_or_default();
            let found = shape.undeclared(args, judge, v.max_errors, &missing);
            if !found.list.is_empty() || found.omitted > 0 {
                let report = checked.report.get_or_insert_with(empty);
                report.extend(&schema.value, found);
            }
        }
        if let Some(rules) = call.target.rules(tool) {
            if let Some(extra) = &rules.extra
                && let Ok(ev) = extra.validator()
                && let Some(found) = extra_violations(extra, ev, args, v.max_errors)
            {
                let report = checked.report.get_or_insert_with(empty);
                report.extend(&extra.value, found);
            }
            let more = rules.path_violations(args);
            if !more.is_empty() {
                let found = validate::Found {
                    list: more,
                    omitted: 0,
                };
                let report = checked.report.get_or_insert_with(empty);
                report.extend(&schema.value, found);
            }
        }
        checked
    }
}

/// What the operator's extra schema finds wrong with `args`. Arguments too deep for it to
/// check within its bound (`Schema::reaches`) are refused: the rule is the operator's, and
/// a call must not pass it by nesting.
fn extra_violations(
    extra: &Schema,
    validator: &jsonschema::Validator,
    args: &Value,
    max_errors: usize,
) -> Option<validate::Found> {
    if let Err(why) = extra.reaches(args) {
        let list = vec![validate::Violation {
            pointer: String::new(),
            keyword: "schema".into(),
            message: format!(
                "cannot be checked against the operator's schema for this tool ({why})"
            ),
        }];
        return Some(validate::Found { list, omitted: 0 });
    }
    (!validator.is_valid(args))
        .then(|| validate::violations(extra.compiled(validator), args, max_errors))
}

/// A call that breaks the contract: counted by keyword, then forwarded in `audit` mode or
/// answered in the shape `validation.answer` asks for.
fn refuse<'a, R>(
    gw: &Gateway,
    call: &Call<'a>,
    tool: &str,
    mode: Mode,
    report: Report,
) -> Result<Decision<R>, Wait<'a>> {
    let target = call.target;
    let keywords: Vec<&str> = report.keywords().collect();
    for k in &keywords {
        gw.metrics.violations.inc(&[&target.name, tool, k]);
    }
    if mode == Mode::Audit {
        tracing::info!(upstream = %target.name, tool = shown(tool), outcome = "audited", violations = report.problems(), ?keywords, "tools/call");
        return admit(gw, call, tool, tool, "audited", call.bytes.clone());
    }
    tracing::info!(upstream = %target.name, tool = shown(tool), outcome = "rejected_invalid", violations = report.problems(), ?keywords, "tools/call");
    count(gw, target, tool, "rejected_invalid");
    Ok(answered(
        "rejected_invalid",
        match target.validation.answer {
            AnswerShape::ToolError => call.failed(
                jsonrpc::INVALID_PARAMS,
                report.text(),
                "toolgate/validation",
                report.details(),
            ),
            AnswerShape::ProtocolError => Answer::error_with_text(
                call.id,
                jsonrpc::INVALID_PARAMS,
                &format!("Invalid arguments for tool {tool}"),
                report.details(),
                report.text(),
            ),
        },
    ))
}

/// The last gate before a call goes upstream: the client's rate for the tool. Calls toolgate
/// answers itself (invalid, unknown, denied) never count against it. `label` names the tool
/// in metrics (see [`UNLISTED`]). A rate the replicas share is asked for after `Err`.
fn admit<'a, R>(
    gw: &Gateway,
    call: &Call<'a>,
    tool: &str,
    label: &str,
    outcome: &'static str,
    bytes: Bytes,
) -> Result<Decision<R>, Wait<'a>> {
    let rated = call
        .client
        .and_then(|client| Some((client, client.rules.as_ref()?.rate_for(tool)?)));
    let verdict = match rated {
        None => None,
        Some((client, rate)) => match &gw.shared {
            // The bucket is named by `label`: a name no server listed (under `mode = "off"`
            // nothing else stops it) shares one bucket with every other, rather than making
            // one of its own.
            None => Some(Ok(gw.limiter.admit(
                &client.name,
                &call.target.name,
                label,
                rate,
            ))),
            Some(_) => {
                return Err(Wait::SharedRate(Admitting {
                    client,
                    rate,
                    tool: tool.into(),
                    label: label.into(),
                    outcome,
                    bytes,
                }));
            }
        },
    };
    Ok(admitted(gw, call, tool, label, outcome, bytes, verdict))
}

/// A call that goes upstream if the client's rate allows it (`verdict`, `None` when the
/// client has none for the tool); `Err` in it is toolgate's answer.
fn admitted<R>(
    gw: &Gateway,
    call: &Call<'_>,
    tool: &str,
    label: &str,
    outcome: &'static str,
    bytes: Bytes,
    verdict: Option<Result<Result<(), Limited>, Answer>>,
) -> Decision<R> {
    match verdict {
        Some(Err(refusal)) => return answered("rate_limited", refusal),
        Some(Ok(Err(limited))) => {
            let client = call.client.map_or("", |c| &*c.name);
            return rate_limited(gw, call, tool, label, client, limited);
        }
        Some(Ok(Ok(()))) | None => {}
    }
    count(gw, call.target, label, outcome);
    Decision::Forward(
        bytes,
        Kind::Call {
            tool: label.into(),
            outcome,
            retry: call.retry,
            output: checks_output(gw, call, tool),
            task: call.task,
        },
    )
}

/// Whether the answer to a call of `tool` is checked against its `outputSchema`: only under
/// `validation.output`, and only for a tool that declares one, whose answers alone are then
/// read in full (the others pass as they come).
fn checks_output(gw: &Gateway, call: &Call<'_>, tool: &str) -> bool {
    call.target.validation.output != OutputMode::Off
        && matches!(gw.catalog.lookup(call.key, tool), Lookup::Found(t) if t.output.is_some())
}

/// A call admitted but for its client's rate, which the replicas share.
struct Admitting<'a> {
    client: &'a crate::policy::clients::Client,
    rate: Rate,
    tool: Box<str>,
    label: Box<str>,
    outcome: &'static str,
    bytes: Bytes,
}

impl Admitting<'_> {
    /// Asks the shared bucket, and this replica's own when policy says so and the shared one
    /// cannot be read.
    async fn ask<R>(self, gw: &Gateway, call: &Call<'_>) -> Decision<R> {
        let verdict = shared_verdict(gw, call, &self.client.name, &self.label, self.rate).await;
        let Admitting {
            tool,
            label,
            outcome,
            bytes,
            ..
        } = self;
        admitted(gw, call, &tool, &label, outcome, bytes, Some(verdict))
    }
}

/// The shared bucket's verdict (this replica's when none is configured); when it cannot be
/// read, as `shared_state.on_unavailable` says: this replica's, or toolgate's refusal (`Err`).
async fn shared_verdict(
    gw: &Gateway,
    call: &Call<'_>,
    client: &Arc<str>,
    tool: &str,
    rate: Rate,
) -> Result<Result<(), Limited>, Answer> {
    let target = &call.target.name;
    let Some(shared) = &gw.shared else {
        return Ok(gw.limiter.admit(client, target, tool, rate));
    };
    match shared.admit(client, target, tool, rate).await {
        Ok(verdict) => Ok(verdict),
        Err(why) => {
            let policy = gw.config.shared_state.on_unavailable;
            let decided = match policy {
                OnUnavailable::Local => "local",
                OnUnavailable::Deny => "deny",
            };
            gw.metrics.shared_state_unavailable.inc(&[decided]);
            // The limiter logs when Redis stops and starts answering; a call is counted.
            tracing::debug!(upstream = %target, tool = shown(tool), error = %why, decided, "decided without the shared rate limits");
            match policy {
                OnUnavailable::Local => Ok(gw.limiter.admit(client, target, tool, rate)),
                OnUnavailable::Deny => {
                    count(gw, call.target, tool, "rate_limited");
                    let text = format!(
                        "The call to \"{tool}\" was not made: its rate limit cannot be checked right now. Retry in a few seconds."
                    );
                    Err(call.failed(
                        jsonrpc::INVALID_PARAMS,
                        text,
                        "toolgate/rate_limit",
                        json!({"code": "rate_limit_unavailable", "tool": tool, "retryAfterSeconds": 5}),
                    ))
                }
            }
        }
    }
}

fn rate_limited<R>(
    gw: &Gateway,
    call: &Call<'_>,
    tool: &str,
    label: &str,
    client: &str,
    limited: Limited,
) -> Decision<R> {
    {
        count(gw, call.target, label, "rate_limited");
        tracing::info!(upstream = %call.target.name, tool = shown(tool), outcome = "rate_limited", client, "tools/call");
        let secs = limited.retry_after.as_secs_f64().ceil().max(1.0) as u64;
        let text = format!(
            "Rate limit reached: this client may call the tool \"{tool}\" {}. Retry in {secs} s; calls before then are refused the same way.",
            limited.rate
        );
        answered(
            "rate_limited",
            call.failed(
                jsonrpc::INVALID_PARAMS,
                text,
                "toolgate/rate_limit",
                json!({"code": "rate_limited", "tool": tool, "retryAfterSeconds": secs, "limit": limited.rate}),
            ),
        )
    }
}

fn unknown_tool<R>(gw: &Gateway, call: &Call<'_>, tool: &str) -> Decision<R> {
    let (target, id) = (call.target, call.id);
    let v = &target.validation;
    let names: Vec<String> = gw.catalog.tool_names(call.key, |n, t| {
        v.allows(n)
            && call.client.is_none_or(|c| c.allows(n))
            && !(t.input.invalid.is_some() && v.hides_invalid(n))
    });
    let mut message = format!("Unknown tool: {tool}");
    let close = validate::closest(tool, &names).or_else(|| unprefixed(tool, &names));
    if let Some(c) = close {
        message.push_str(&format!(". Did you mean \"{c}\"?"));
    } else if tool.trim().is_empty() {
        // Said, or the message would end at its colon.
        message.push_str(" (a name that is empty or only spaces); send the name of a listed tool");
    }
    tracing::info!(upstream = %target.name, tool = shown(tool), outcome = "unknown", "tools/call");
    count(gw, target, tool, "unknown");
    let data = json!({"tool": tool, "suggestions": close.into_iter().collect::<Vec<_>>()});
    answered(
        "unknown",
        Answer::error(Some(id), jsonrpc::INVALID_PARAMS, &message, Some(&data)),
    )
}

/// The listed name `tool` ends with after a separator, the longest: clients that gather
/// several servers' tools name each after its server (`files__read`, `files.read`,
/// `mcp__files__read`), and one that sends that name on means the tool.
fn unprefixed<'a>(tool: &str, names: &'a [String]) -> Option<&'a str> {
    let prefixed = |name: &&String| {
        let Some(prefix) = tool.strip_suffix(name.as_str()) else {
            return false;
        };
        prefix.ends_with(['_', '.', '/', ':', '-'])
    };
    names
        .iter()
        .filter(prefixed)
        .max_by_key(|n| n.len())
        .map(String::as_str)
}

/// Lists the scope's tools for a call that found them unknown, unless another call listed
/// them while this one waited its turn.
async fn list<L: Lister>(
    gw: &Gateway,
    target: &Target,
    key: &ScopeKey,
    meta: Option<&str>,
    lister: &L,
) -> Listed<L::Relay> {
    let asked = Instant::now();
    let lock = gw.catalog.refresh_lock(key);
    let _one_listing_at_a_time = lock.lock().await;
    if gw.catalog.listed_since(key, asked) {
        return Listed::Done;
    }
    match list_all(gw, target, key, meta, lister).await {
        Ok(()) => Listed::Done,
        Err(failed) => Listed::Failed(failed),
    }
}

/// A listing request's params: the client's `_meta` and the server's cursor, each as written.
#[derive(serde::Serialize)]
struct ListParams<'a> {
    #[serde(rename = "_meta", skip_serializing_if = "Option::is_none")]
    meta: Option<&'a RawValue>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cursor: Option<&'a RawValue>,
}

/// Lists every page of the scope's tools and replaces its catalog. The client's `_meta`
/// (protocol version, capabilities in the modern era) goes with each page request.
pub async fn list_all<L: Lister>(
    gw: &Gateway,
    target: &Target,
    key: &ScopeKey,
    meta: Option<&str>,
    lister: &L,
) -> Result<(), ListFailed<L::Relay>> {
    // A raw value again for the listing's request: the envelope's pass checked it as JSON.
    let meta = meta.and_then(|m| serde_json::from_str::<&RawValue>(m).ok());
    let mut cursor: Option<Box<RawValue>> = None;
    let mut tools = Vec::new();
    let (mut ttl, mut public, mut text) = (None, false, 0usize);
    for _ in 0..gw.config.limits.max_list_pages {
        let id = gw.next_id();
        let params = ListParams {
            meta,
            cursor: cursor.as_deref(),
        };
        let body = Bytes::from(jsonrpc::request(&id, mcp::TOOLS_LIST, &params));
        let result = lister.list(body, &id).await?;
        let page = Page::parse(&result)
            .map_err(|e| ListFailed::Refused(format!("tools/list result: {e}")))?;
        super::learn::say_malformed(target, page.malformed);
        text = (page.tools.iter()).fold(text, |n, t| n.saturating_add(t.text_bytes()));
        if text > gw.config.limits.max_catalog_bytes {
            let too_large = TooLarge(gw.config.limits.max_catalog_bytes);
            return Err(ListFailed::Refused(too_large.to_string()));
        }
        tools.extend(page.tools);
        ttl = match (ttl, page.ttl) {
            (Some(a), Some(b)) => Some(std::cmp::min(a, b)),
            (a, b) => a.or(b),
        };
        public = page.public;
        cursor = page.next_cursor;
        if cursor.is_none() {
            break;
        }
    }
    tracing::debug!(
        upstream = %target.name,
        tools = tools.len(),
        "listed tools for a scope"
    );
    (gw.catalog.learn_all(key, tools, ttl, public))
        .map_err(|too_large| ListFailed::Refused(too_large.to_string()))
}

/// A server answered one of toolgate's own requests with a JSON-RPC error: its message.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct ErrorAnswer(pub String);

/// The answer to request `id` in one message, if it is one: its result, or its error.
pub fn match_answer(bytes: &[u8], id: &str) -> Option<Result<Box<RawValue>, ErrorAnswer>> {
    let Ok(jsonrpc::Body::Single(m)) = jsonrpc::parse(bytes) else {
        return None;
    };
    let theirs: String = m.id.and_then(|i| serde_json::from_str(i.get()).ok())?;
    if m.method.is_some() || theirs != id {
        return None;
    }
    if let Some(r) = m.result {
        return Some(Ok(r.to_owned()));
    }
    /// Its message alone: the rest (a `data` as large as the answer) is passed over unread.
    #[derive(Deserialize)]
    struct Said {
        message: Option<String>,
    }
    let message = m
        .error
        .and_then(|e| serde_json::from_str::<Said>(e.get()).ok())
        .and_then(|e| e.message)
        .unwrap_or_else(|| "an error without a message".into());
    Some(Err(ErrorAnswer(message)))
}

/// The original message with the values at the `changed` places of its arguments replaced
/// by their coerced values (or left out, where coercion left them out); every other value,
/// of the arguments and of the message, goes as it came (a number too large for a float
/// keeps its digits, `validate::spliced`). Only coerced calls pay for this.
fn with_arguments(bytes: &[u8], args: &Value, changed: &[String], held: &Held) -> Option<Bytes> {
    let mut top: BTreeMap<String, Box<RawValue>> = serde_json::from_slice(bytes).ok()?;
    let mut params: BTreeMap<String, Box<RawValue>> =
        serde_json::from_str(top.get("params")?.get()).ok()?;
    let raw_args = (params.get("arguments").map(|a| a.get()))
        .filter(|a| !none_at_all(a))
        .unwrap_or("{}");
    let raw_args = text_of(raw_args)?;
    // Arguments wrapped once more are written as what their one member holds, and arguments
    // spread one character each as the text they spell.
    let member: Box<RawValue>;
    let raw_args = match held {
        Held::AsSent => raw_args,
        Held::Within(name) => {
            let mut members: BTreeMap<String, Box<RawValue>> =
                serde_json::from_str(&raw_args).ok()?;
            member = members.remove(name)?;
            text_of(member.get())?
        }
        Held::Spelt => Cow::Owned(characters(&serde_json::from_str(&raw_args).ok()?)?),
    };
    let written = validate::spliced(&raw_args, args, changed);
    params.insert("arguments".into(), RawValue::from_string(written).ok()?);
    top.insert(
        "params".into(),
        serde_json::value::to_raw_value(&params).ok()?,
    );
    serde_json::to_vec(&top).ok().map(Bytes::from)
}

/// The JSON text `raw` is, or the text it holds where it is a string: arguments come as
/// the text of an object in a string too, and in a string's text in a string
/// ([`held_text`]); where it is a list of one object, that object's ([`only_object`]).
fn text_of(raw: &str) -> Option<Cow<'_, str>> {
    if let Some(object) = only_object(raw) {
        return Some(Cow::Borrowed(object));
    }
    let held = match raw.starts_with('"') {
        true => held_text(raw)?,
        false => return Some(Cow::Borrowed(raw)),
    };
    // In a Markdown code block, the text it holds (`object_in`).
    let inner = text::unfenced(&held).map(str::to_owned);
    Some(Cow::Owned(inner.unwrap_or(held)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coerced_arguments_replace_only_arguments() {
        let body = br#"{"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{"name":"add","arguments":{"a":"10","b":2},"_meta":{"progressToken":5}}}"#;
        let out = with_arguments(
            body,
            &json!({"a": 10, "b": 2}),
            &["/a".into()],
            &Held::AsSent,
        )
        .unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(
            v,
            json!({"jsonrpc":"2.0","id":"x-1","method":"tools/call","params":{"name":"add","arguments":{"a":10,"b":2},"_meta":{"progressToken":5}}})
        );
    }

    #[test]
    fn arguments_sent_as_json_text_go_as_the_object_it_holds() {
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":"{\"a\": \"1\", \"n\": 1e400, \"s\": \"\\u00e9\"}"}}"#;
        let now = json!({"a": 1, "n": 0, "s": "é"});
        let out = with_arguments(body, &now, &["/a".into()], &Held::AsSent).unwrap();
        let out = std::str::from_utf8(&out).unwrap();
        assert!(
            out.contains(r#""arguments":{"a":1,"n":1e400,"s":"\u00e9"}"#),
            "{out}"
        );
    }

    #[test]
    fn arguments_encoded_as_json_text_more_than_once_go_as_the_object_they_hold() {
        let encoded = |times: usize| {
            let mut text = json!({"a": "1"}).to_string();
            for _ in 0..times {
                text = Value::from(text).to_string();
            }
            text
        };
        let object = json!({"a": "1"}).as_object().cloned();
        for times in 1..=MAX_ENCODINGS {
            let text = encoded(times);
            assert_eq!(
                held_object(Some(&text)).map(Result::ok),
                Some(object.clone())
            );
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{text}}}}}"#
            );
            let out = with_arguments(
                body.as_bytes(),
                &json!({"a": 1}),
                &["/a".into()],
                &Held::AsSent,
            );
            let out = String::from_utf8(out.unwrap().to_vec()).unwrap();
            assert!(out.contains(r#""arguments":{"a":1}"#), "{times}: {out}");
        }
        let past = encoded(MAX_ENCODINGS + 1);
        assert_eq!(held_object(Some(&past)).map(Result::ok), None);
        assert_eq!(
            held_object(Some(r#""\"a\"""#)).map(Result::ok),
            None,
            "a string's text"
        );
    }

    #[test]
    fn arguments_sent_as_a_list_of_one_object_go_as_the_object() {
        assert_eq!(only_object(r#" [ {"a": 1} ] "#), Some(r#"{"a": 1}"#));
        for not in [
            r#"[{"a": 1}, {"b": 2}]"#,
            "[1]",
            "[[{}]]",
            "[]",
            r#"{"a": 1}"#,
            "[{]",
        ] {
            assert_eq!(only_object(not), None, "{not}");
        }
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":[{"a":"1","n":1e400}]}}"#;
        let out = with_arguments(
            body,
            &json!({"a": 1, "n": 0}),
            &["/a".into()],
            &Held::AsSent,
        );
        let out = String::from_utf8(out.unwrap().to_vec()).unwrap();
        assert!(out.contains(r#""arguments":{"a":1,"n":1e400}"#), "{out}");
    }

    #[test]
    fn arguments_in_a_code_block_or_as_a_literal_are_the_object_they_write() {
        let object = |text: &str| object_in(text).map(|read| read.ok());
        let written = Some(Some(json!({"a": 1, "b": "x"}).as_object().unwrap().clone()));
        for text in [
            r#"```json
{"a": 1, "b": "x"}
```"#,
            "{'a': 1, 'b': 'x',}",
            "```python\n{'a': 1, \"b\": 'x'}\n```",
            "{ a: 1, b: 'x' }",
            "```js\n{a: 1, \"b\": \"x\"}\n```",
        ] {
            assert_eq!(object(text), written, "{text}");
        }
        // Text that is neither is said as JSON: a key twice, and Python's is no better.
        for text in [
            r#"{"a": 1, "a": 2}"#,
            "{'a': 1, 'a': 2}",
            "{'a': f(1)}",
            "{a: 1, a: 2}",
            "{'a': 1",
        ] {
            assert_eq!(object(text), Some(None), "{text}");
        }
        assert_eq!(object("['a']"), None);
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":"```json\n{\"n\": 1e400}\n```"}}"#;
        let out = with_arguments(body, &json!({"n": 0}), &[], &Held::AsSent).unwrap();
        let out = std::str::from_utf8(&out).unwrap();
        assert!(
            out.contains(r#""arguments":{"n":1e400}"#),
            "as written in the block: {out}"
        );
    }

    #[test]
    fn arguments_that_are_none_at_all_go_as_an_empty_object() {
        for none in ["null", "[]", "[ \n]", r#""""#] {
            assert!(none_at_all(none), "{none}");
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{none}}}}}"#
            );
            let out = with_arguments(body.as_bytes(), &json!({}), &[], &Held::AsSent).unwrap();
            let out = std::str::from_utf8(&out).unwrap();
            assert!(out.contains(r#""arguments":{}"#), "{out}");
        }
        for some in ["[1]", r#"" ""#, "0", "false", r#""null""#] {
            assert!(!none_at_all(some), "{some}");
        }
    }

    #[test]
    fn arguments_wrapped_once_more_go_as_what_they_hold() {
        for wrapped in [
            r#"{"input":{"a":"1","big":123456789012345678901234567890}}"#,
            r#"{"input":"{\"a\":\"1\",\"big\":123456789012345678901234567890}"}"#,
        ] {
            let body = format!(
                r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"t","arguments":{wrapped}}}}}"#
            );
            let now = json!({"a": 1, "big": 1.2345678901234568e29});
            let out = with_arguments(
                body.as_bytes(),
                &now,
                &["/a".into()],
                &Held::Within("input".into()),
            );
            let out = String::from_utf8(out.unwrap().to_vec()).unwrap();
            assert!(
                out.contains(r#""arguments":{"a":1,"big":123456789012345678901234567890}"#),
                "{out}"
            );
        }
    }

    #[test]
    fn the_member_beside_the_tools_own_name_is_what_the_arguments_are_wrapped_in() {
        let members = |v: Value| v.as_object().unwrap().clone();
        let call = members(json!({"name": "add", "arguments": {"a": 1}}));
        assert_eq!(
            wrapper(&call, "add"),
            Some((&"arguments".to_owned(), &json!({"a": 1})))
        );
        let tool = members(json!({"tool": "add", "input": "{\"a\": 1}"}));
        assert_eq!(
            wrapper(&tool, "add").map(|(k, _)| k.as_str()),
            Some("input")
        );
        for not in [
            json!({"name": "sub", "arguments": {"a": 1}}),
            json!({"name": "add", "arguments": {"a": 1}, "id": 1}),
            json!({"a": 1, "b": 2}),
        ] {
            assert_eq!(wrapper(&members(not.clone()), "add"), None, "{not}");
        }
    }

    #[test]
    fn members_one_character_each_spell_their_text() {
        let spread = |text: &str| -> serde_json::Map<String, Value> {
            (text.chars().enumerate())
                .map(|(i, c)| (i.to_string(), Value::String(c.into())))
                .collect()
        };
        assert_eq!(
            characters(&spread(r#"{"city": "Zürich"}"#)).as_deref(),
            Some(r#"{"city": "Zürich"}"#)
        );
        let mut gap = spread("{}");
        gap.insert("3".into(), json!("x"));
        for members in [
            gap,
            serde_json::Map::from_iter([("0".into(), json!("{")), ("01".into(), json!("}"))]),
            serde_json::Map::from_iter([("0".into(), json!("{")), ("+1".into(), json!("}"))]),
            serde_json::Map::from_iter([("0".into(), json!("{}")), ("1".into(), json!(""))]),
            serde_json::Map::from_iter([("0".into(), json!("{")), ("1".into(), json!(7))]),
        ] {
            assert_eq!(characters(&members), None, "{members:?}");
        }
    }

    #[test]
    fn an_argument_coercion_left_out_goes_out() {
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":1,"b":null}}}"#;
        let out = with_arguments(body, &json!({"a": 1}), &["/b".into()], &Held::AsSent).unwrap();
        let v: Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["params"]["arguments"], json!({"a": 1}));
    }

    #[test]
    fn only_coerced_arguments_are_written_again() {
        let body = br#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":123456789012345678901234567890,"b":"1","c":1.50}}}"#;
        let out = with_arguments(
            body,
            &json!({"a": 1.2345678901234568e29, "b": 1, "c": 1.5}),
            &["/b".into()],
            &Held::AsSent,
        )
        .unwrap();
        let text = String::from_utf8(out.to_vec()).unwrap();
        assert!(
            text.contains(r#""arguments":{"a":123456789012345678901234567890,"b":1,"c":1.50}"#),
            "{text}"
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
        assert_eq!(
            match_answer(
                br#"{"jsonrpc":"2.0","id":"ours","error":{"code":-32601,"message":"nope"}}"#,
                "ours"
            )
            .unwrap()
            .unwrap_err()
            .0,
            "nope"
        );
    }
}
