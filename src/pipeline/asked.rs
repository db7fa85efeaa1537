//! Input-required rounds the other way (docs/contract.md §5, "The bridged client keeps what it
//! has"): a server that speaks only 2026-07-28 answers a handshake-era client's request with
//! an `InputRequiredResult` (SEP-2322), which that client cannot read. toolgate asks the
//! client each of its `inputRequests` as the server request it stands for
//! (`elicitation/create`, `sampling/createMessage`, `roots/list`), collects the answers, and
//! retries the server with `inputResponses` and the `requestState`, until the server answers.
//!
//! Written once for every front and every kind of server: a front puts toolgate's questions
//! on the client's way and hands back the client's answers ([`Asked`]); a server takes each
//! retry under an id of toolgate's ([`Retries`]).

use crate::error::UpstreamError;
use crate::jsonrpc::{self, Message};
use crate::locks::MutexExt;
use bytes::Bytes;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::oneshot;

/// The most rounds one request takes before toolgate gives up on the server.
const MAX_ROUNDS: usize = 8;
/// The most questions in one round.
const MAX_QUESTIONS: usize = 16;
/// How long the client has to answer a round's questions: a person may be typing.
pub(crate) const ANSWER_WAIT: Duration = Duration::from_secs(300);

/// An `InputRequiredResult`: the server's questions by key, and the state to send back.
pub(crate) struct InputRequired {
    questions: BTreeMap<String, Box<RawValue>>,
    state: Option<Box<RawValue>>,
}

/// Whether a server may answer `method` with an `InputRequiredResult`.
pub(crate) fn may_ask(method: &str) -> bool {
    matches!(method, "tools/call" | "prompts/get" | "resources/read")
}

/// The `InputRequiredResult` in a server's answer, if it is one.
pub(crate) fn input_required(answer: &[u8]) -> Option<InputRequired> {
    if !crate::text::holds!(answer, "input_required") {
        return None;
    }
    #[derive(Deserialize)]
    struct Answer {
        result: Result,
    }
    #[derive(Deserialize)]
    struct Result {
        #[serde(rename = "resultType")]
        kind: String,
        #[serde(default, rename = "inputRequests")]
        questions: BTreeMap<String, Box<RawValue>>,
        #[serde(default, rename = "requestState")]
        state: Option<Box<RawValue>>,
    }
    let a: Answer = serde_json::from_slice(answer).ok()?;
    (a.result.kind == "input_required").then_some(InputRequired {
        questions: a.result.questions,
        state: a.result.state,
    })
}

/// toolgate's questions to one client that wait for its answers, by id. The ids are
/// toolgate's own (`toolgate-ask-N`), so a client's answer to its server is never taken.
#[derive(Default)]
pub(crate) struct Asked {
    next: AtomicU64,
    waiting: Mutex<HashMap<String, oneshot::Sender<Bytes>>>,
}

const ASK_PREFIX: &str = "toolgate-ask-";
/// [`ASK_PREFIX`] as the start of an id's key (`jsonrpc::id_key`: a string keeps its quotes).
const ASK_KEY_PREFIX: &str = "\"toolgate-ask-";

fn waiting_key(id: &str) -> String {
    format!("\"{id}\"")
}

impl Asked {
    fn open(&self) -> (String, oneshot::Receiver<Bytes>) {
        let id = format!("{ASK_PREFIX}{}", self.next.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        self.waiting.locked().insert(waiting_key(&id), tx);
        (id, rx)
    }

    /// Takes the client's message when it answers one of toolgate's questions; `false`
    /// leaves it to go on as it came.
    pub(crate) fn answered(&self, m: &Message<'_>, bytes: &Bytes) -> bool {
        let Some(id) = m.id.filter(|_| m.method.is_none()) else {
            return false;
        };
        let key = jsonrpc::id_key(id.get());
        if !key.starts_with(ASK_KEY_PREFIX) {
            return false;
        }
        match self.waiting.locked().remove(key.as_ref()) {
            Some(tx) => {
                let _ = tx.send(bytes.clone());
                true
            }
            None => false,
        }
    }
}

/// A server as a round's retry reaches it.
pub(crate) trait Retries {
    /// Sends `request` (under toolgate's `id`) and reads the answer to it, whole.
    fn retry(
        &self,
        request: Bytes,
        id: &str,
    ) -> impl Future<Output = Result<Bytes, UpstreamError>> + Send;
}

/// Runs the rounds of the server's `answer` to `request` (as sent, with its envelope): each
/// question goes to the client through `ask`, its answer back to the server in a retry. The
/// server's last answer is returned under the request's own id; toolgate's own error answer
/// when the client refuses a question, leaves it unanswered, or the server keeps asking.
pub(crate) async fn answered<S: Retries>(
    request: &[u8],
    mut answer: Bytes,
    asked: &Asked,
    ask: impl Fn(Bytes),
    server: &S,
    own_id: impl Fn() -> String,
) -> Result<Bytes, UpstreamError> {
    let Ok(jsonrpc::Body::Single(m)) = jsonrpc::parse(request) else {
        return Ok(answer);
    };
    let Some(client_id) = m.id else {
        return Ok(answer);
    };
    let mut answered_as: Box<RawValue> = client_id.to_owned();
    for _ in 0..MAX_ROUNDS {
        let Some(round) = input_required(&answer) else {
            return Ok(super::bridge::under_id(answer, &answered_as, client_id));
        };
        let responses = match collect(round.questions, asked, &ask).await {
            Ok(r) => r,
            Err(why) => return Ok(refusal(client_id, &why.to_string())),
        };
        let id = own_id();
        let Some(retry) = retried(request, &id, &responses, round.state.as_deref()) else {
            return Ok(refusal(
                client_id,
                "the server's round could not be retried",
            ));
        };
        answered_as = RawValue::from_string(serde_json::to_string(&id).expect("a string"))
            .expect("a JSON string");
        answer = server.retry(retry, &id).await?;
    }
    let why = format!("the server asked for input more than {MAX_ROUNDS} times for one request");
    Ok(refusal(client_id, &why))
}

/// Why a round's questions could not be taken to the client and back: a sentence for the
/// client, in toolgate's error answer to its request.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
struct Unbridged(String);

/// Asks the client every question of one round and collects its answers by key.
async fn collect(
    questions: BTreeMap<String, Box<RawValue>>,
    asked: &Asked,
    ask: &impl Fn(Bytes),
) -> Result<BTreeMap<String, Box<RawValue>>, Unbridged> {
    if questions.is_empty() || questions.len() > MAX_QUESTIONS {
        return Err(Unbridged(format!(
            "the server asked {} questions in one round; 1 to {MAX_QUESTIONS} can be bridged",
            questions.len()
        )));
    }
    let mut waits = Vec::with_capacity(questions.len());
    for (key, question) in questions {
        let (id, rx) = asked.open();
        let Some(request) = server_request(&id, &question) else {
            asked.waiting.locked().remove(&waiting_key(&id));
            return Err(Unbridged(format!(
                "the server's question {key:?} is not a request"
            )));
        };
        ask(request);
        waits.push((key, id, rx));
    }
    // One wait for the whole round: its questions are asked at once.
    let deadline = tokio::time::Instant::now() + ANSWER_WAIT;
    let mut responses = BTreeMap::new();
    for (key, id, rx) in waits {
        let reply = tokio::time::timeout_at(deadline, rx).await;
        asked.waiting.locked().remove(&waiting_key(&id));
        let reply = reply
            .map_err(|_| {
                Unbridged(format!(
                    "the client did not answer the server's question {key:?} in time"
                ))
            })?
            .map_err(|_| Unbridged("the client is gone".into()))?;
        responses.insert(key, client_result(&reply)?);
    }
    Ok(responses)
}

/// A server request for the client, from one of `inputRequests` (`{method, params}`).
fn server_request(id: &str, question: &RawValue) -> Option<Bytes> {
    #[derive(Deserialize)]
    struct Question<'a> {
        method: &'a str,
        #[serde(borrow)]
        params: Option<&'a RawValue>,
    }
    /// The params go as the server wrote them, never read into a value: they may hold many
    /// times their text once read.
    #[derive(Serialize)]
    struct Request<'a> {
        jsonrpc: &'static str,
        id: &'a str,
        method: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        params: Option<&'a RawValue>,
    }
    let q: Question<'_> = serde_json::from_str(question.get()).ok()?;
    let out = Request {
        jsonrpc: "2.0",
        id,
        method: q.method,
        params: q.params,
    };
    serde_json::to_vec(&out).ok().map(Bytes::from)
}

/// The client's result, or what its error said.
fn client_result(reply: &[u8]) -> Result<Box<RawValue>, Unbridged> {
    let Ok(jsonrpc::Body::Single(m)) = jsonrpc::parse(reply) else {
        return Err(Unbridged("the client's answer is not JSON-RPC".into()));
    };
    if let Some(r) = m.result {
        return Ok(r.to_owned());
    }
    #[derive(Deserialize)]
    struct Error {
        message: String,
    }
    let message = m
        .error
        .and_then(|e| serde_json::from_str::<Error>(e.get()).ok())
        .map_or_else(|| "no message".into(), |e| e.message);
    Err(Unbridged(format!(
        "the client refused the server's question: {message}"
    )))
}

/// The request under `id`, with the client's answers and the server's state.
fn retried(
    request: &[u8],
    id: &str,
    responses: &BTreeMap<String, Box<RawValue>>,
    state: Option<&RawValue>,
) -> Option<Bytes> {
    let id = serde_json::value::to_raw_value(id).ok()?;
    let mut out = jsonrpc::replace_at(request, &["id"], &id)?;
    let responses = serde_json::value::to_raw_value(responses).ok()?;
    out = jsonrpc::replace_at(&out, &["params", "inputResponses"], &responses)?;
    if let Some(state) = state {
        out = jsonrpc::replace_at(&out, &["params", "requestState"], state)?;
    }
    Some(Bytes::from(out))
}

fn refusal(id: &RawValue, why: &str) -> Bytes {
    Bytes::from(jsonrpc::error_response(
        Some(id),
        jsonrpc::INTERNAL_ERROR,
        &format!("Input required: {why}"),
        None,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    /// A server that asks once, then answers with what it was told.
    struct AsksOnce(Mutex<Vec<Bytes>>);

    impl Retries for AsksOnce {
        async fn retry(&self, request: Bytes, id: &str) -> Result<Bytes, UpstreamError> {
            self.0.locked().push(request.clone());
            let v: serde_json::Value = serde_json::from_slice(&request).unwrap();
            let name = &v["params"]["inputResponses"]["who"]["content"]["name"];
            let result = serde_json::json!({"content": [{"type": "text", "text": name}]});
            let id = RawValue::from_string(format!("{id:?}")).unwrap();
            Ok(Bytes::from(jsonrpc::result_response(&id, &result)))
        }
    }

    #[test]
    fn a_question_goes_to_the_client_with_its_params_as_written() {
        let question = r#"{"method":"sampling/createMessage","params":{"maxTokens":12345678901234567890123,"x":{"\u0041":1.50}}}"#;
        let question = RawValue::from_string(question.into()).unwrap();
        let sent = server_request("toolgate-ask-1", &question).unwrap();
        assert_eq!(
            std::str::from_utf8(&sent).unwrap(),
            r#"{"jsonrpc":"2.0","id":"toolgate-ask-1","method":"sampling/createMessage","params":{"maxTokens":12345678901234567890123,"x":{"\u0041":1.50}}}"#
        );
        let bare = RawValue::from_string(r#"{"method":"roots/list"}"#.into()).unwrap();
        let sent = server_request("toolgate-ask-2", &bare).unwrap();
        assert_eq!(
            &sent[..],
            br#"{"jsonrpc":"2.0","id":"toolgate-ask-2","method":"roots/list"}"#
        );
    }

    const ROUND: &str = r#"{"jsonrpc":"2.0","id":7,"result":{"resultType":"input_required",
        "inputRequests":{"who":{"method":"elicitation/create","params":{"message":"Name?"}}},
        "requestState":"s1"}}"#;
    const CALL: &str = r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t"}}"#;

    /// A client that answers each question with `answer` (its result or error member),
    /// through `asked`.
    fn client(asked: &Arc<Asked>, answer: serde_json::Value) -> impl Fn(Bytes) + use<> {
        let asked = asked.clone();
        move |q: Bytes| {
            let v: serde_json::Value = serde_json::from_slice(&q).unwrap();
            assert_eq!(v["method"], "elicitation/create");
            assert_eq!(v["params"]["message"], "Name?");
            let mut reply = serde_json::json!({"jsonrpc": "2.0", "id": v["id"]});
            reply
                .as_object_mut()
                .unwrap()
                .extend(answer.as_object().unwrap().clone());
            let reply = Bytes::from(reply.to_string());
            let Ok(jsonrpc::Body::Single(m)) = jsonrpc::parse(&reply) else {
                panic!()
            };
            assert!(asked.answered(&m, &reply));
        }
    }

    #[tokio::test]
    async fn a_round_is_asked_of_the_client_and_its_answer_retried() {
        let asked = Arc::new(Asked::default());
        let server = AsksOnce(Mutex::new(Vec::new()));
        let accepts =
            serde_json::json!({"result": {"action": "accept", "content": {"name": "Ada"}}});
        let ask = client(&asked, accepts);
        let own = || "toolgate-1".to_string();
        let out = answered(CALL.as_bytes(), ROUND.into(), &asked, ask, &server, own)
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["result"]["content"][0]["text"], "Ada");
        let sent: serde_json::Value = serde_json::from_slice(&server.0.locked()[0]).unwrap();
        assert_eq!(sent["id"], "toolgate-1");
        assert_eq!(sent["params"]["requestState"], "s1");
        assert!(asked.waiting.locked().is_empty());
    }

    #[tokio::test]
    async fn a_refused_question_answers_the_request_with_why() {
        let asked = Arc::new(Asked::default());
        let refuses = serde_json::json!({"error": {"code": -1, "message": "User rejected"}});
        let ask = client(&asked, refuses);
        let server = AsksOnce(Mutex::new(Vec::new()));
        let own = || "toolgate-1".to_string();
        let out = answered(CALL.as_bytes(), ROUND.into(), &asked, ask, &server, own)
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["id"], 7);
        assert_eq!(v["error"]["code"], jsonrpc::INTERNAL_ERROR);
        let message = v["error"]["message"].as_str().unwrap();
        assert!(message.contains("User rejected"), "{message}");
        assert!(server.0.locked().is_empty());
    }

    #[test]
    fn only_answers_to_toolgates_own_questions_are_taken() {
        let asked = Asked::default();
        let (id, _rx) = asked.open();
        let theirs = Bytes::from_static(br#"{"jsonrpc":"2.0","id":"s-1","result":{}}"#);
        let Ok(jsonrpc::Body::Single(m)) = jsonrpc::parse(&theirs) else {
            panic!()
        };
        assert!(!asked.answered(&m, &theirs));
        let ours = Bytes::from(format!(r#"{{"jsonrpc":"2.0","id":"{id}","result":{{}}}}"#));
        let Ok(jsonrpc::Body::Single(m)) = jsonrpc::parse(&ours) else {
            panic!()
        };
        assert!(asked.answered(&m, &ours));
        assert!(!asked.answered(&m, &ours), "each is taken once");
    }

    #[test]
    fn a_complete_answer_is_no_round() {
        let done = br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","content":[]}}"#;
        assert!(input_required(done).is_none());
        assert!(input_required(ROUND.as_bytes()).is_some());
    }
}
