//! The messages toolgate writes itself, as complete JSON-RPC bytes. Transports decide only
//! how to carry them (an HTTP status, an SSE event, a line).

use crate::error::UpstreamError;
use crate::jsonrpc;
use crate::mcp::{self, Era};
use serde_json::value::RawValue;
use serde_json::{Value, json};

/// What a request toolgate answers for its server was, which sets the answer's shape: a
/// `tools/call` gets a tool result the model reads, unless it asked for a task (SEP-1686),
/// whose caller reads only a `CreateTaskResult` or a JSON-RPC error; any other request gets
/// a JSON-RPC error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Requested {
    Call,
    TaskCall,
    Other,
}

impl Requested {
    /// A `tools/call`, task-augmented or not.
    pub fn call(task: bool) -> Requested {
        if task {
            Requested::TaskCall
        } else {
            Requested::Call
        }
    }

    /// For a `tools/call`, whether it asked for a task; `None` for any other request.
    fn call_task(self) -> Option<bool> {
        match self {
            Requested::Call => Some(false),
            Requested::TaskCall => Some(true),
            Requested::Other => None,
        }
    }
}

#[derive(Debug)]
pub struct Answer {
    pub body: Vec<u8>,
    /// The JSON-RPC error code, when the answer is an error (the modern era maps it to an
    /// HTTP status).
    pub error_code: Option<i64>,
    /// Why the guard answered a call itself (`rejected_invalid`, `unknown`, `denied`, …), for
    /// traces; `None` for other answers.
    pub outcome: Option<&'static str>,
}

impl Answer {
    /// The same answer, marked with the guard's outcome.
    pub fn because(mut self, outcome: &'static str) -> Answer {
        self.outcome = Some(outcome);
        self
    }

    pub fn error(id: Option<&RawValue>, code: i64, message: &str, data: Option<&Value>) -> Answer {
        Answer {
            body: jsonrpc::error_response(id, code, message, data),
            error_code: Some(code),
            outcome: None,
        }
    }

    pub fn result(id: &RawValue, result: &Value) -> Answer {
        Answer {
            body: jsonrpc::result_response(id, result),
            error_code: None,
            outcome: None,
        }
    }

    /// An `isError` result: the model reads `text`; `details` go under `_meta[key]`.
    pub fn tool_error(era: Era, id: &RawValue, text: String, key: &str, details: Value) -> Answer {
        Answer::result(id, &mcp::tool_error(era, text, Some((key, details))))
    }

    /// toolgate's answer to a call that failed: the [`Answer::tool_error`] the model reads,
    /// or for a task-augmented call the JSON-RPC error `code`, with the text's first line
    /// for its message and the details and the whole text for its data.
    pub fn call_failed(
        era: Era,
        id: &RawValue,
        task: bool,
        code: i64,
        text: String,
        key: &str,
        details: Value,
    ) -> Answer {
        if !task {
            return Answer::tool_error(era, id, text, key, details);
        }
        let message = text.lines().next().unwrap_or_default().to_owned();
        Answer::error_with_text(id, code, &message, details, text)
    }

    /// The JSON-RPC error `code` in place of a tool error the model would have read: its
    /// `details` and its whole `text` in `data`.
    pub fn error_with_text(
        id: &RawValue,
        code: i64,
        message: &str,
        details: Value,
        text: String,
    ) -> Answer {
        let mut data = match details {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        data.insert("text".into(), Value::String(text));
        Answer::error(Some(id), code, message, Some(&Value::Object(data)))
    }

    /// No usable answer came from the upstream. A `tools/call` gets a tool error the model
    /// can act on (`-32603` when it asked for a task); any other request gets `-32603`. With
    /// a `reference` (`errors.mask_internal`), the reason, which may name addresses and
    /// paths, is left out and the reference, under which it is logged, stands for it.
    pub fn upstream_failed(
        era: Era,
        id: Option<&RawValue>,
        requested: Requested,
        e: &UpstreamError,
        reference: Option<&str>,
    ) -> Answer {
        let (code, lead, message) = e.naming();
        let (why, data) = match reference {
            None => (
                format!(": {e}"),
                json!({"code": code, "reason": e.to_string()}),
            ),
            Some(reference) => (
                format!(" (reference {reference})"),
                json!({"code": code, "reference": reference}),
            ),
        };
        match (id, requested.call_task()) {
            (Some(id), Some(task)) => {
                let text = format!("{lead}{why}. {}", e.retry_hint());
                Answer::call_failed(
                    era,
                    id,
                    task,
                    jsonrpc::INTERNAL_ERROR,
                    text,
                    "toolgate/upstream",
                    data,
                )
            }
            _ => Answer::error(
                id,
                jsonrpc::INTERNAL_ERROR,
                &format!("{message}{why}"),
                None,
            ),
        }
    }
}
