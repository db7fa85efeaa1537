//! toolgate's own requests to a server, written once for every kind of server: the handshake
//! that opens a session (for the era bridge, for a stdio child, for a stdio client whose
//! session was lost, for `toolgate check`) and the era question (`server/discover`), over
//! [`OwnRequests`], which a stdio child (`child::Within`) and an HTTP server in a session
//! toolgate holds ([`HttpSession`]) implement.
//!
//! What differs by kind of server stays below the trait: a child matches answers by id on
//! its stdout; an HTTP server answers each POST, and the session it opens is named in the
//! answer's `Mcp-Session-Id`, which the next request must carry.

use super::http_client::{HttpUpstream, exchange};
use crate::config::Limits;
use crate::error::UpstreamError;
use crate::jsonrpc;
use crate::locks::MutexExt;
use crate::mcp;
use crate::pipeline::guard::{self, ListFailed};
use bytes::Bytes;
use http::HeaderMap;
use serde_json::value::RawValue;
use std::future::Future;
use std::sync::Mutex;
use std::time::Duration;

/// Why one of toolgate's own requests got no result.
#[derive(Debug, thiserror::Error)]
pub enum Unresulted {
    #[error("{0}")]
    Unavailable(#[from] UpstreamError),
    #[error("{0}")]
    Refused(#[from] guard::ErrorAnswer),
    /// An HTTP server refused the POST itself (a 4xx or 5xx without a JSON-RPC answer).
    #[error("the server answered HTTP {0}")]
    Status(u16),
    #[error("the answer is not a JSON-RPC response")]
    NotAnswer,
}

/// A server as toolgate's own requests see it.
pub(crate) trait OwnRequests {
    /// Sends a request toolgate wrote (its `id`, a string) and reads its result.
    fn ask(
        &self,
        request: Bytes,
        id: &str,
    ) -> impl Future<Output = Result<Box<RawValue>, Unresulted>> + Send;

    /// Sends a notification in the same session; what becomes of it is not awaited further.
    fn tell(&self, notification: Bytes) -> impl Future<Output = ()> + Send;

    /// How long one of its requests may wait for an answer: several asked together wait
    /// no longer between them (`subscribers::subscribe`).
    fn timeout(&self) -> Duration;
}

/// `notifications/initialized`, which ends the handshake.
const INITIALIZED: &str = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;

/// Opens a session with the handshake (2025-11-25): `initialize` with `params` (a client's
/// own, or toolgate's when `None`), then `notifications/initialized`. Returns the server's
/// `initialize` result.
pub(crate) async fn handshake<S: OwnRequests>(
    server: &S,
    id: &str,
    params: Option<&RawValue>,
) -> Result<Box<RawValue>, Unresulted> {
    let request = match params {
        Some(p) => jsonrpc::request(id, "initialize", p),
        None => mcp::initialize_request(id).to_string().into_bytes(),
    };
    let result = server.ask(Bytes::from(request), id).await?;
    server
        .tell(Bytes::from_static(INITIALIZED.as_bytes()))
        .await;
    Ok(result)
}

/// Asks `server/discover` (in the 2026-07-28 envelope): a result means the server speaks
/// 2026-07-28. What a refusal means is each kind of server's to read: an HTTP server refuses
/// a request outside a session with a status (`HttpBridge`), a stdio child with a JSON-RPC
/// error (`ChildProcess::settle_era`).
pub(crate) async fn discover<S: OwnRequests>(
    server: &S,
    id: &str,
) -> Result<Box<RawValue>, Unresulted> {
    let request = Bytes::from(mcp::discover_request(id).to_string());
    server.ask(request, id).await
}

/// An HTTP server, in the session its answers name: each request goes with `headers`, which
/// take the `Mcp-Session-Id` an answer gives.
pub(crate) struct HttpSession<'a> {
    up: &'a HttpUpstream,
    headers: Mutex<HeaderMap>,
    limits: &'a Limits,
}

impl<'a> HttpSession<'a> {
    pub(crate) fn new(up: &'a HttpUpstream, headers: HeaderMap, limits: &'a Limits) -> Self {
        HttpSession {
            up,
            headers: Mutex::new(headers),
            limits,
        }
    }

    /// What an answer settles for the requests after it: the session it names, and the
    /// protocol version an `initialize` result agrees.
    fn adopt(&self, answer: &HeaderMap, result: &RawValue) {
        #[derive(serde::Deserialize)]
        struct Agreed {
            #[serde(rename = "protocolVersion")]
            version: String,
        }
        let mut headers = self.headers.locked();
        if let Some(sid) = answer.get(mcp::SESSION_ID) {
            headers.insert(mcp::SESSION_ID, sid.clone());
        }
        if let Ok(a) = serde_json::from_str::<Agreed>(result.get())
            && let Ok(v) = http::HeaderValue::from_str(&a.version)
        {
            headers.insert(mcp::PROTOCOL_VERSION, v);
        }
    }

    /// The headers requests in the session go with (its `Mcp-Session-Id` and protocol
    /// version, once given).
    pub(crate) fn into_headers(self) -> HeaderMap {
        self.headers.into_inner().unwrap_or_else(|e| e.into_inner())
    }
}

impl OwnRequests for HttpSession<'_> {
    async fn ask(&self, request: Bytes, id: &str) -> Result<Box<RawValue>, Unresulted> {
        let headers = self.headers.locked().clone();
        match exchange(self.up, &headers, request, id, self.limits).await {
            Ok((answer, result)) => {
                self.adopt(&answer, &result);
                Ok(result)
            }
            Err(ListFailed::Relay(r)) => Err(Unresulted::Status(r.status().as_u16())),
            Err(ListFailed::Refused(why)) => Err(guard::ErrorAnswer(why).into()),
            Err(ListFailed::Unavailable(e)) => Err(e.into()),
        }
    }

    async fn tell(&self, notification: Bytes) {
        let mut headers = self.headers.locked().clone();
        headers.remove(mcp::METHOD_HEADER);
        let wait = self.limits.into();
        let _ = self
            .up
            .http
            .send(http::Method::POST, headers, notification, wait)
            .await;
    }

    fn timeout(&self) -> Duration {
        self.limits.upstream_timeout
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A server that keeps what it is sent.
    #[derive(Default)]
    struct Kept(Mutex<Vec<Bytes>>);

    impl OwnRequests for Kept {
        async fn ask(&self, request: Bytes, _id: &str) -> Result<Box<RawValue>, Unresulted> {
            self.0.locked().push(request);
            Ok(RawValue::from_string("{}".into()).unwrap())
        }

        async fn tell(&self, notification: Bytes) {
            self.0.locked().push(notification);
        }

        fn timeout(&self) -> Duration {
            Duration::from_secs(1)
        }
    }

    #[tokio::test]
    async fn a_handshakes_params_go_as_written() {
        // JSON, though no `Value` holds `1e400`.
        let params = r#"{"protocolVersion":"2025-11-25","capabilities":{"x":1e400}}"#;
        let params = RawValue::from_string(params.into()).unwrap();
        let server = Kept::default();
        handshake(&server, "t-1", Some(&params)).await.unwrap();
        let sent = server.0.locked().clone();
        assert_eq!(
            sent,
            [
                Bytes::from(format!(
                    r#"{{"jsonrpc":"2.0","id":"t-1","method":"initialize","params":{}}}"#,
                    params.get()
                )),
                Bytes::from_static(INITIALIZED.as_bytes()),
            ]
        );
    }
}
