//! What toolgate does with one message from a client on its way to the server, written once
//! for every mode: the guard for a `tools/call`, the era bridge, and the record of what the
//! answer will be read against ([`Pending`]). The engine (`engine::handle`) brings the
//! message parsed and what its way knows (its era, its scope, its client, how it is bridged,
//! how to list the server's tools), and turns the [`Step`] into what the front carries out.
//!
//! What stays with the fronts is what only a transport has: reading and parsing its bytes,
//! the 2026-07-28 header rules (HTTP), finding or opening the server's session, sending, and
//! mapping the server's transport signals (a 404 for a lost session, EOF, a signal).

use super::answer::Answer;
use super::bridge::{self, Bridged, Completion, Reverse};
use super::guard::{self, Call, Decision, Lister};
use super::{Kind, Pending};
use crate::catalog::ScopeKey;
use crate::config::OutputMode;
use crate::gateway::{Gateway, Target};
use crate::jsonrpc::{self, Message};
use crate::mcp::{self, Era};
use crate::policy::clients::Client;
use bytes::Bytes;
use serde_json::value::RawValue;
use std::sync::Arc;

/// How a client's messages reach its server.
#[derive(Clone, Copy)]
pub enum Bridging<'a> {
    /// As they are: the client and the server share an era.
    Direct,
    /// A 2026-07-28 client, through toolgate's handshake with a server that speaks only
    /// 2025-11-25; the server's `initialize` result.
    ToHandshake(&'a RawValue),
    /// A handshake-era client, to a server that speaks only 2026-07-28.
    ToModern(&'a Reverse),
}

impl<'a> Bridging<'a> {
    /// From what the front found: toolgate's handshake with the server, for a 2026-07-28
    /// client (its `initialize` result), or the bridge of a handshake-era client to a server
    /// that speaks only 2026-07-28.
    pub fn of(handshake: Option<&'a RawValue>, reverse: Option<&'a Reverse>) -> Bridging<'a> {
        match (handshake, reverse) {
            (Some(init), _) => Bridging::ToHandshake(init),
            (None, Some(r)) => Bridging::ToModern(r),
            (None, None) => Bridging::Direct,
        }
    }
}

/// Who sent the message, in which era, and to which target.
pub struct Sender<'a> {
    pub target: &'a Arc<Target>,
    pub key: ScopeKey,
    pub era: Era,
    pub client: Option<Client>,
}

/// What a front does with the message.
pub enum Step<R> {
    /// toolgate answers it; the answer's error code, if any, decides a 2026-07-28 status.
    Answer(Answer),
    /// The server refused toolgate's listing for a reason the client must see as it came
    /// (over HTTP: a 401, a lost session).
    Relay(R),
    /// Send `body` to the server. A request's answer is read against `pending` (whose `id`
    /// is `None` for a notification or a client's answer).
    Forward { body: Bytes, pending: Pending },
    /// Nothing goes to the server and nothing comes back: the bridge took it
    /// (`notifications/initialized` for a server without the handshake), or it is a
    /// notification no server could read ([`Message::params_are_structured`]).
    Consumed,
}

/// Whether a batch (2025-03-26) goes to the server as it came; if not, toolgate's answer to
/// it. One holding a `tools/call` cannot be part-answered by toolgate and part-forwarded
/// without reordering it, and one sent as a notification must not go at all. Only an HTTP
/// server behind the HTTP front (`whole`) takes a batch and answers it in one piece; over
/// stdio each line is one message, and a batch's answer would be one no pending request
/// could take.
pub fn batch(msgs: &[Message<'_>], whole: bool) -> Result<(), Vec<u8>> {
    let why = if msgs.iter().any(|m| m.method() == Some(mcp::TOOLS_CALL)) {
        "Invalid Request: toolgate does not accept tools/call inside a batch; send each call on its own"
    } else if whole {
        return Ok(());
    } else {
        "Invalid Request: batches are not supported over stdio or in front of a stdio server; send one message at a time"
    };
    Err(refused_batch(msgs, why))
}

/// A refused batch answered as JSON-RPC answers a batch: an array of an error for each
/// request in it, under the request's id, so that a client waiting on any of them is
/// answered. A batch of no request (notifications, a client's answers) gets one error with
/// no id, since an empty array may not be sent. An error is at most 4.6 times the bytes of
/// the shortest request, so the answer stays within a few times the batch.
fn refused_batch(msgs: &[Message<'_>], why: &str) -> Vec<u8> {
    let error = |id| jsonrpc::error_response(id, jsonrpc::INVALID_REQUEST, why, None);
    let ids = msgs.iter().filter(|m| m.is_request()).filter_map(|m| m.id);
    jsonrpc::array(ids.map(|id| error(Some(id)))).unwrap_or_else(|| error(None))
}

/// Decides one message. `bytes` is the message as it came, `m` its parse (the guard takes its
/// params). A block, not an `async fn`, which would hold each argument twice (as given, and
/// as its body binds it) while the guard decides.
#[expect(
    clippy::manual_async_fn,
    reason = "an `async fn` keeps its arguments apart from what its body moves them into"
)]
pub fn decide<'a, L: Lister>(
    gw: &'a Gateway,
    sender: Sender<'a>,
    m: &'a mut Message<'_>,
    bytes: &'a Bytes,
    bridging: Bridging<'a>,
    lister: &'a L,
) -> impl Future<Output = Step<L::Relay>> + 'a {
    async move {
        // The client's answer to a question toolgate asked it for its server (`asked`).
        if let Bridging::ToModern(reverse) = bridging
            && m.method.is_none()
            && reverse.asked.answered(m, bytes)
        {
            return Step::Consumed;
        }
        let id = m.id.filter(|_| m.is_request());
        let (body, kind) = match id {
            Some(id) if m.method() == Some(mcp::TOOLS_CALL) => {
                let call = Call {
                    target: sender.target,
                    key: &sender.key,
                    era: sender.era,
                    id,
                    params: m.params.take(),
                    bytes,
                    client: sender.client.as_ref(),
                    retry: false,
                    task: false,
                };
                match guard::tools_call(gw, call, lister).await {
                    Decision::Forward(body, kind) => (body, kind),
                    Decision::Answer(a) => return Step::Answer(a),
                    Decision::Relay(r) => return Step::Relay(r),
                }
            }
            // A call's params are the guard's (`-32602`); any other message's reach a server
            // as they came, unless no server could read them.
            _ if !m.params_are_structured() => return unstructured(id),
            _ => {
                let follows_tasks = sender.target.validation.output != OutputMode::Off;
                (bytes.clone(), super::classify(m, follows_tasks))
            }
        };
        let method = m.method().unwrap_or("");
        // Only requests cross to a handshake server through the bridge; notifications and the
        // client's answers go as they are.
        let bridging = match (bridging, id) {
            (Bridging::ToHandshake(_), None) => Bridging::Direct,
            (b, _) => b,
        };
        let bridged = match bridging {
            Bridging::Direct => Some(Bridged::Forward(body)),
            Bridging::ToHandshake(init) => Some(bridge::request(method, id, &body, init)),
            Bridging::ToModern(reverse) => reverse.request(method, id, &body),
        };
        let (body, kind) = match bridged {
            Some(Bridged::Forward(b)) => (b, kind),
            // Not sent as it came: its way serves it.
            Some(Bridged::Subscribe(s)) => (Bytes::new(), Kind::Subscription(s)),
            Some(Bridged::Answer(error_code, body)) => {
                return Step::Answer(Answer {
                    body,
                    error_code,
                    outcome: None,
                });
            }
            None => return Step::Consumed,
        };
        let pending = Pending {
            id: id.map(RawValue::to_owned),
            kind,
            era: sender.era,
            key: sender.key,
            target: sender.target.clone(),
            client: sender.client,
            bridged: match bridging {
                Bridging::ToHandshake(_) => Some(Completion::of(method)),
                _ => None,
            },
        };
        Step::Forward { body, pending }
    }
}

/// A message whose `params` no server could read, kept from the server: a request answered
/// `-32600` under its id, a notification dropped, as JSON-RPC answers none (over HTTP its POST
/// is accepted, as any notification's).
fn unstructured<R>(id: Option<&RawValue>) -> Step<R> {
    match id {
        Some(id) => Step::Answer(Answer::error(
            Some(id),
            jsonrpc::INVALID_REQUEST,
            jsonrpc::UNSTRUCTURED_PARAMS,
            None,
        )),
        None => Step::Consumed,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::jsonrpc::Body as Parsed;
    use crate::pipeline::Kind;
    use crate::pipeline::guard::ListFailed;
    use serde_json::{Value, json};

    /// The server's tools: `add(a: integer, b: integer)`.
    struct OneTool;

    impl Lister for OneTool {
        type Relay = std::convert::Infallible;

        async fn list(
            &self,
            _: Bytes,
            _: &str,
        ) -> Result<Box<RawValue>, ListFailed<std::convert::Infallible>> {
            let tools = json!({"tools": [{"name": "add", "inputSchema": {"type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"]}}]});
            Ok(serde_json::value::to_raw_value(&tools).unwrap())
        }
    }

    /// Decides `msg` from a client of `era`, bridged as `bridging`.
    async fn decide_one(
        era: Era,
        msg: Value,
        bridging: Bridging<'_>,
    ) -> Step<std::convert::Infallible> {
        let gw = Gateway::new(Config {
            upstream: Some("http://127.0.0.1:9/mcp".into()),
            ..Config::default()
        })
        .unwrap();
        let bytes = Bytes::from(msg.to_string());
        let Ok(Parsed::Single(mut m)) = jsonrpc::parse(&bytes) else {
            panic!("one message")
        };
        let target = &gw.targets[0];
        let sender = Sender {
            target,
            key: gw.scope(target, Some(b"s"), []),
            era,
            client: None,
        };
        decide(&gw, sender, &mut m, &bytes, bridging, &OneTool).await
    }

    fn call(args: Value) -> Value {
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
               "params": {"name": "add", "arguments": args}})
    }

    fn text(body: &[u8]) -> Value {
        serde_json::from_slice(body).unwrap()
    }

    #[tokio::test]
    async fn a_valid_call_goes_up_as_it_came_and_its_answer_is_expected() {
        let msg = call(json!({"a": 1, "b": 2}));
        let Step::Forward { body, pending } =
            decide_one(Era::Legacy, msg.clone(), Bridging::Direct).await
        else {
            panic!("forwarded")
        };
        assert_eq!(text(&body), msg);
        assert_eq!(pending.id.as_deref().map(RawValue::get), Some("7"));
        assert!(matches!(pending.kind, Kind::Call { .. }));
        assert!(pending.completion().is_none());
    }

    #[tokio::test]
    async fn an_invalid_call_is_answered_here() {
        let msg = call(json!({"a": 1, "b": "two"}));
        let Step::Answer(a) = decide_one(Era::Legacy, msg, Bridging::Direct).await else {
            panic!("answered")
        };
        let a = text(&a.body);
        assert_eq!(a["id"], 7);
        assert_eq!(a["result"]["isError"], true, "{a}");
    }

    /// No server can read `params` that are a string, a number or a boolean: a request is
    /// answered under its id, a notification goes nowhere. An array and `null` go as they
    /// came, as JSON-RPC and the Python SDK allow.
    #[tokio::test]
    async fn params_no_server_could_read_stay_here() {
        for params in [json!("x"), json!(3), json!(true)] {
            let msg = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": params});
            let Step::Answer(a) = decide_one(Era::Legacy, msg, Bridging::Direct).await else {
                panic!("answered")
            };
            assert_eq!(
                text(&a.body),
                json!({"jsonrpc": "2.0", "id": 4, "error": {"code": -32600,
                       "message": "Invalid Request: \"params\" must be an object or an array"}})
            );
            let note = json!({"jsonrpc": "2.0", "method": "notifications/x", "params": params});
            let step = decide_one(Era::Legacy, note, Bridging::Direct).await;
            assert!(matches!(step, Step::Consumed), "{params}");
        }
        for params in [json!([1]), Value::Null, json!({})] {
            let msg = json!({"jsonrpc": "2.0", "id": 4, "method": "x/y", "params": params});
            let step = decide_one(Era::Legacy, msg, Bridging::Direct).await;
            assert!(matches!(step, Step::Forward { .. }), "{params}");
        }
    }

    #[tokio::test]
    async fn a_bridged_2026_client_is_answered_discover_and_its_calls_lose_the_envelope() {
        let init = RawValue::from_string(
            r#"{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}"#.into(),
        )
        .unwrap();
        let bridging = Bridging::ToHandshake(&init);
        let envelope = json!({"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                              "io.modelcontextprotocol/clientCapabilities": {}});
        let discover = json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover",
                              "params": {"_meta": envelope}});
        let Step::Answer(a) = decide_one(Era::Modern, discover, bridging).await else {
            panic!("answered")
        };
        let info = &text(&a.body)["result"]["_meta"]["io.modelcontextprotocol/serverInfo"];
        assert_eq!(info["name"], "s");
        assert_eq!(text(&a.body)["result"]["resultType"], "complete");
        let mut msg = call(json!({"a": 1, "b": 2}));
        msg["params"]["_meta"] = envelope;
        let Step::Forward { body, pending } = decide_one(Era::Modern, msg, bridging).await else {
            panic!("forwarded")
        };
        assert_eq!(text(&body)["params"].get("_meta"), None);
        assert!(pending.completion().is_some());
        // A notification is not a request: it goes as it is.
        let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": 3}});
        let Step::Forward { pending, .. } = decide_one(Era::Modern, note, bridging).await else {
            panic!("forwarded")
        };
        assert!(pending.id.is_none());
    }

    #[tokio::test]
    async fn a_handshake_client_bridged_to_a_2026_server_ends_its_handshake_here() {
        let reverse = Reverse::new(None);
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let step = decide_one(Era::Legacy, initialized, Bridging::ToModern(&reverse)).await;
        assert!(matches!(step, Step::Consumed));
        let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
        let Step::Answer(a) = decide_one(Era::Legacy, ping, Bridging::ToModern(&reverse)).await
        else {
            panic!("answered")
        };
        assert_eq!(
            text(&a.body),
            json!({"jsonrpc": "2.0", "id": 2, "result": {}})
        );
    }

    #[test]
    fn a_refused_batch_answers_each_request_under_its_id() {
        let answer = |sent: &str, whole| {
            let Ok(Parsed::Batch(msgs)) = jsonrpc::parse(sent.as_bytes()) else {
                panic!("a batch: {sent}")
            };
            batch(&msgs, whole).err().map(|a| text(&a))
        };
        let error = |id: Value, why: &str| json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32600, "message": why}});
        let no_batch = "Invalid Request: batches are not supported over stdio or in front of a stdio server; send one message at a time";
        let no_call = "Invalid Request: toolgate does not accept tools/call inside a batch; send each call on its own";
        // Requests by their ids, as written; a notification and a client's answer, none.
        let batch = r#"[{"jsonrpc":"2.0","id":"a","method":"ping"},
            {"jsonrpc":"2.0","method":"notifications/initialized"},
            {"jsonrpc":"2.0","id":7,"result":{}},
            {"jsonrpc":"2.0","id":-1.5,"method":"tools/list"}]"#;
        assert_eq!(
            answer(batch, false),
            Some(json!([
                error(json!("a"), no_batch),
                error(json!(-1.5), no_batch)
            ]))
        );
        assert_eq!(answer(batch, true), None, "an HTTP server takes it whole");
        let call = r#"[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"add"}}]"#;
        assert_eq!(answer(call, true), Some(json!([error(json!(1), no_call)])));
        // No request: one error, under no id.
        let notes = r#"[{"jsonrpc":"2.0","method":"tools/call","params":{"name":"add"}}]"#;
        assert_eq!(
            answer(notes, true),
            Some(json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": no_call}}))
        );
    }
}
