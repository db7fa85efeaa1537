//! Errors by their source. A tool server that gave no usable answer is classified here once,
//! and how often the log says so ([`FailureLog`]); what the client is told of it (an answer in
//! its era, a metric) is the pipeline's.

use crate::lograte::{AT_RATE, LogRate};
use std::fmt::Display;
use std::time::Duration;

/// An error and each of its causes, `: `-separated: a client library's own text often says
/// only which step failed ("client error (Connect)"), its causes why.
pub(crate) fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text.push_str(": ");
        text.push_str(&c.to_string());
        cause = c.source();
    }
    text
}

/// Why no answer came from the upstream.
#[derive(Debug, thiserror::Error)]
pub enum UpstreamError {
    #[error("could not reach the tool server: {0}")]
    Unreachable(String),
    /// The TLS handshake failed: the server's certificate is not trusted or not for its
    /// name, or it refused toolgate's. A configuration problem on one side or the other.
    #[error("could not reach the tool server securely: {0}")]
    Untrusted(String),
    #[error("the tool server did not answer within {0:?}")]
    Timeout(Duration),
    #[error("the tool server answered with something that is not JSON-RPC: {0}")]
    NotJsonRpc(String),
    /// The server's answer is larger than the gateway passes on (`limits.max_response_bytes`,
    /// `limits.max_sse_event_bytes`) to a client that cannot take it in part.
    #[error("the tool server's answer is over the gateway's limit: {0}")]
    OverLimit(String),
    /// The answer came, but the gateway held as many answers as it may for as long as the
    /// request may wait (`limits.max_request_bytes_in_flight`).
    #[error("the gateway had no room for the tool server's answer: {0}")]
    NoRoom(String),
    /// The request was not sent: toolgate holds as many connections to servers as its
    /// descriptor limit leaves them (`net::outbound`).
    #[error("the gateway {0}")]
    Busy(String),
    /// The tool server's command could not be started (a stdio server): a configuration
    /// problem of the gateway's.
    #[error("the tool server cannot be started: {0}")]
    CannotStart(String),
    /// The server answered its endpoint with a redirection (a server mounted at `/mcp/`
    /// answers `/mcp` so): a configuration problem of the gateway's, since toolgate follows
    /// none; the URL to give instead is said.
    #[error("the tool server's endpoint is elsewhere: {0}")]
    Moved(String),
}

impl UpstreamError {
    /// An answer whose head redirects the request (`status`, 3xx) to `location`, said
    /// without what may carry a credential (a user and password, a query, a fragment): the
    /// text reaches the log and the request's client.
    pub(crate) fn moved(status: http::StatusCode, location: Option<&str>) -> UpstreamError {
        let status = status.as_u16();
        UpstreamError::Moved(match location.map(credential_free) {
            Some((to, false)) => format!(
                "it answers HTTP {status} to {to}; toolgate follows no redirection: give that URL as the upstream"
            ),
            Some((to, true)) => format!(
                "it answers HTTP {status} to {to} (with more, not shown); toolgate follows no redirection: give that URL as the upstream"
            ),
            None => format!("it answers HTTP {status} with no location"),
        })
    }

    /// An answer's body that stopped before the request's answer: it `broke` (how), or an
    /// event stream ended without it. Unreachable rather than malformed: the server, or the
    /// way to it, went away mid-answer, which every front says alike.
    pub(crate) fn unanswered_stream(broke: Option<String>) -> UpstreamError {
        UpstreamError::Unreachable(match broke {
            Some(e) => format!("the stream broke before the answer: {e}"),
            None => "the stream ended without an answer".into(),
        })
    }

    /// A JSON answer over `limits.max_response_bytes` (`max`), to a client that cannot take
    /// it in part.
    pub(crate) fn answer_over(max: usize) -> UpstreamError {
        UpstreamError::OverLimit(format!("more than {max} bytes (limits.max_response_bytes)"))
    }

    /// An answer that found no room among the bytes requests hold
    /// (`limits.max_request_bytes_in_flight`) within `waited`.
    pub(crate) fn no_room(waited: Duration) -> UpstreamError {
        UpstreamError::NoRoom(format!(
            "none within {waited:?}: it holds as many answers for clients as it may (limits.max_request_bytes_in_flight)"
        ))
    }

    /// No connection to a server could be opened: `max` are open, every server's together.
    pub(crate) fn busy(max: usize) -> UpstreamError {
        UpstreamError::Busy(format!(
            "holds {max} connections to tool servers, as many as its descriptor limit leaves them; the request was not sent"
        ))
    }

    /// No stdio server could be started: `max` run, every server's together.
    pub(crate) fn too_many_servers(max: usize) -> UpstreamError {
        UpstreamError::Busy(format!(
            "runs {max} stdio servers' processes, as many as its descriptor limit leaves them; the session was not started"
        ))
    }

    /// An SSE event over `limits.max_sse_event_bytes` (`max`), to a client that cannot take
    /// it in part.
    pub(crate) fn event_over(max: usize) -> UpstreamError {
        UpstreamError::OverLimit(format!(
            "an event of more than {max} bytes (limits.max_sse_event_bytes)"
        ))
    }

    /// How toolgate's answer names the failure: the code under `_meta["toolgate/upstream"]`,
    /// and the words that lead the model's text and a `-32603`'s message. An answer too large
    /// to pass on came, so the server is not called unavailable for it.
    pub fn naming(&self) -> (&'static str, &'static str, &'static str) {
        match self {
            UpstreamError::OverLimit(_) | UpstreamError::NoRoom(_) => (
                "answer_over_limit",
                "The tool server's answer could not be passed on",
                "Upstream MCP server's answer could not be passed on",
            ),
            UpstreamError::Busy(_) => ("gateway_busy", "The gateway is busy", "Server busy"),
            _ => (
                "upstream_unavailable",
                "The tool server is unavailable",
                "Upstream MCP server unavailable",
            ),
        }
    }

    /// The failure's kind, as the log tells one from another.
    pub(crate) fn kind(&self) -> &'static str {
        match self {
            UpstreamError::Unreachable(_) => "unreachable",
            UpstreamError::Untrusted(_) => "untrusted",
            UpstreamError::Timeout(_) => "timeout",
            UpstreamError::NotJsonRpc(_) => "not_jsonrpc",
            UpstreamError::OverLimit(_) => "over_limit",
            UpstreamError::NoRoom(_) => "no_room",
            UpstreamError::Busy(_) => "busy",
            UpstreamError::CannotStart(_) => CANNOT_START,
            UpstreamError::Moved(_) => MOVED,
        }
    }

    /// What the metrics and the request's span count the request as: a refusal of the
    /// gateway's own, before anything was sent, is no failure of the server's (an alert on a
    /// server's errors must not fire for it); every other failure is the server's or the way
    /// to it.
    pub(crate) fn outcome(&self) -> &'static str {
        match self {
            UpstreamError::Busy(_) => "gateway_busy",
            _ => "upstream_error",
        }
    }

    /// Whether the same request may succeed later.
    pub fn retry_hint(&self) -> &'static str {
        match self {
            UpstreamError::Timeout(_) => {
                "It may still be working or overloaded; retrying later may help."
            }
            UpstreamError::Unreachable(_) => {
                "Retrying in a moment may help if the server is restarting."
            }
            UpstreamError::Untrusted(_) => {
                "This is a TLS configuration problem between the gateway and the server; retrying will not help until it is fixed."
            }
            UpstreamError::NotJsonRpc(_) => {
                "This is a server-side fault; retrying is unlikely to help until it is fixed."
            }
            UpstreamError::OverLimit(_) => {
                "Ask for less (a narrower query, a smaller page); the same call will fail the same way."
            }
            UpstreamError::NoRoom(_) => {
                "The gateway is busy with other clients' answers; retrying later may help."
            }
            UpstreamError::Busy(_) => "Retrying in a moment may help.",
            UpstreamError::CannotStart(_) | UpstreamError::Moved(_) => {
                "This is a configuration problem of the gateway; retrying will not help until it is fixed."
            }
        }
    }
}

/// `url` without its user and password, query and fragment; and whether any was left out.
fn credential_free(url: &str) -> (String, bool) {
    let kept = url.split(['?', '#']).next().unwrap_or_default();
    let (scheme, rest) = kept.split_once("://").unwrap_or(("", kept));
    let (authority, path) = rest.split_at(rest.find('/').unwrap_or(rest.len()));
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    let shown = match scheme {
        "" => format!("{host}{path}"),
        _ => format!("{scheme}://{host}{path}"),
    };
    let cut = shown.len() != url.len();
    (shown, cut)
}

/// [`UpstreamError::CannotStart`]'s kind.
const CANNOT_START: &str = "cannot_start";
/// [`UpstreamError::Moved`]'s kind.
const MOVED: &str = "moved";

/// What the log says when requests to a server get no usable answer. A server that is down
/// fails every request sent to it, and each failure is counted anyway
/// (`toolgate_requests_total{outcome="upstream_error"}`, and a call's in
/// `toolgate_tool_calls_total`); so each kind is said at the rate of a [`LogRate`], at `WARN`
/// (`ERROR` for a server that cannot be started), and the rest at `DEBUG`.
///
/// Under `errors.mask_internal` each failure is said with the reference its client was given
/// instead (`pipeline::failed`): the reference is what an operator looks up.
#[derive(Default)]
pub struct FailureLog(LogRate);

impl FailureLog {
    /// A request to `upstream` got no usable answer, for reason `e` of `kind`
    /// ([`UpstreamError::kind`], or the listing's own).
    /// A server that cannot be started, or whose endpoint is elsewhere, is said at `ERROR`:
    /// the gateway's own configuration is wrong, and every request to it fails until that is
    /// fixed.
    pub(crate) fn failed(&self, upstream: &str, kind: &'static str, e: &dyn Display) {
        const SAID: &str = "a request got no usable answer from the tool server";
        match self.0.say(kind) {
            Some(unsaid) if kind == CANNOT_START || kind == MOVED => {
                tracing::error!(upstream = %upstream, error = %e, kind, unsaid, "{SAID} {AT_RATE}")
            }
            Some(unsaid) => {
                tracing::warn!(upstream = %upstream, error = %e, kind, unsaid, "{SAID} {AT_RATE}")
            }
            None => tracing::debug!(upstream = %upstream, error = %e, "{SAID}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_redirection_is_said_without_what_may_carry_a_credential() {
        let said = |to| UpstreamError::moved(http::StatusCode::TEMPORARY_REDIRECT, Some(to));
        let given = "; toolgate follows no redirection: give that URL as the upstream";
        for (to, shown) in [
            ("http://up:8080/mcp/", "to http://up:8080/mcp/".to_string()),
            ("/mcp/", "to /mcp/".to_string()),
            (
                "https://alice:s3cret@up/mcp?key=s3cret#s3cret",
                "to https://up/mcp (with more, not shown)".to_string(),
            ),
            (
                "/mcp/?token=s3cret",
                "to /mcp/ (with more, not shown)".to_string(),
            ),
        ] {
            let expected = format!(
                "the tool server's endpoint is elsewhere: it answers HTTP 307 {shown}{given}"
            );
            assert_eq!(said(to).to_string(), expected);
        }
    }
}
