//! CORS, so that a web page at an origin the operator listed (`allowed_origins`, or any under
//! `"*"`) can use the endpoint from a browser: its preflight is answered at once, and each
//! answer it gets names it as the origin that may read it, with the headers a client must
//! read exposed (`Mcp-Session-Id` above all). Applied by [`admission`](super::admission),
//! which judges the origin in the same pass over the headers (a layer of its own looked the
//! header up again and wrapped every request's future, about 400 instructions a call); which
//! origins are shared with is [`OriginPolicy::check`](crate::policy::origin::OriginPolicy::check)'s
//! to say. A localhost origin passes that check but is shared with only when it is listed,
//! so that no page a local program serves can use the gateway by default.
//!
//! Caveats: a preflight is answered before the request id, the count and the access log (it
//! is no MCP message). An upstream's own `Access-Control-Allow-Origin` and
//! `Access-Control-Expose-Headers` are replaced on the answers of a listed origin: toolgate
//! decides which origins reach the endpoint, and two values would make a browser refuse both.

use axum::response::Response;
use http::header::{
    ACCESS_CONTROL_ALLOW_HEADERS, ACCESS_CONTROL_ALLOW_METHODS, ACCESS_CONTROL_ALLOW_ORIGIN,
    ACCESS_CONTROL_EXPOSE_HEADERS, ACCESS_CONTROL_MAX_AGE, ACCESS_CONTROL_REQUEST_HEADERS,
    ACCESS_CONTROL_REQUEST_METHOD, VARY,
};
use http::{HeaderMap, HeaderValue, Method, StatusCode};

/// What a page may read of an answer beyond the basic headers.
const EXPOSED: HeaderValue = HeaderValue::from_static(
    "mcp-session-id, mcp-protocol-version, www-authenticate, x-request-id",
);
/// The headers a preflight allows when it names none.
const ALLOWED_HEADERS: HeaderValue = HeaderValue::from_static(
    "accept, authorization, content-type, last-event-id, mcp-protocol-version, mcp-session-id",
);

/// Whether `req` is a CORS preflight: an `OPTIONS` naming the method its page means to send.
pub(super) fn is_preflight<B>(req: &http::Request<B>) -> bool {
    req.method() == Method::OPTIONS && req.headers().contains_key(ACCESS_CONTROL_REQUEST_METHOD)
}

/// A preflight's answer: the methods the endpoint has, and the headers the page asked to
/// send (any: its origin is one the operator listed).
pub(super) fn preflight(origin: HeaderValue, request: &HeaderMap) -> Response {
    let asked = request.get(ACCESS_CONTROL_REQUEST_HEADERS);
    let mut resp = Response::new(axum::body::Body::empty());
    *resp.status_mut() = StatusCode::NO_CONTENT;
    let h = resp.headers_mut();
    h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.insert(
        ACCESS_CONTROL_ALLOW_METHODS,
        HeaderValue::from_static("GET, POST, DELETE"),
    );
    h.insert(
        ACCESS_CONTROL_ALLOW_HEADERS,
        asked.cloned().unwrap_or(ALLOWED_HEADERS),
    );
    h.insert(ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("600"));
    h.insert(
        VARY,
        HeaderValue::from_static(
            "origin, access-control-request-method, access-control-request-headers",
        ),
    );
    resp
}

/// An answer, made readable by the page at `origin`.
pub(super) fn shared_with(h: &mut HeaderMap, origin: HeaderValue) {
    h.insert(ACCESS_CONTROL_ALLOW_ORIGIN, origin);
    h.insert(ACCESS_CONTROL_EXPOSE_HEADERS, EXPOSED);
    h.append(VARY, HeaderValue::from_static("origin"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::{Gateway, Live};
    use crate::transport::edge::admission::AdmissionLayer;
    use crate::transport::edge::request::{Inbound, test_config};
    use std::convert::Infallible;
    use tower::{Layer, ServiceExt};

    /// The answer to a request with `headers`, from a gateway allowing `allowed`, whose inner
    /// service answers 200 with the upstream's own `Access-Control-Allow-Origin: *`.
    async fn answer(method: Method, headers: &[(&str, &str)], allowed: &[&str]) -> Response {
        let inner = tower::service_fn(|inbound: Inbound<()>| {
            let mut resp = Response::new(axum::body::Body::empty());
            resp.headers_mut()
                .insert(ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
            std::future::ready(Ok::<_, Infallible>(inbound.answer(resp)))
        });
        let mut req = http::Request::builder()
            .method(method)
            .uri("/mcp")
            .header("host", "127.0.0.1");
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let mut config = test_config();
        config.allowed_origins = allowed.iter().map(|o| o.to_string()).collect();
        let live = Live::new(Gateway::new(config).unwrap());
        let admission = AdmissionLayer::new(live).layer(inner);
        admission.oneshot(req.body(()).unwrap()).await.unwrap()
    }

    const PAGE: &str = "https://inspector.example";

    #[tokio::test]
    async fn a_listed_origins_preflight_is_answered_here() {
        let asked = [
            ("origin", PAGE),
            ("access-control-request-method", "POST"),
            (
                "access-control-request-headers",
                "content-type, mcp-session-id",
            ),
        ];
        let r = answer(Method::OPTIONS, &asked, &[PAGE]).await;
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        let h = r.headers();
        assert_eq!(h[ACCESS_CONTROL_ALLOW_ORIGIN], PAGE);
        assert_eq!(h[ACCESS_CONTROL_ALLOW_METHODS], "GET, POST, DELETE");
        assert_eq!(
            h[ACCESS_CONTROL_ALLOW_HEADERS],
            "content-type, mcp-session-id"
        );
        let r = answer(Method::OPTIONS, &asked[..2], &["*"]).await;
        assert_eq!(r.headers()[ACCESS_CONTROL_ALLOW_HEADERS], ALLOWED_HEADERS);
    }

    #[tokio::test]
    async fn a_listed_origins_answers_name_it_alone_and_expose_the_session() {
        let r = answer(Method::POST, &[("origin", PAGE)], &[PAGE]).await;
        let h = r.headers();
        let origins: Vec<_> = h.get_all(ACCESS_CONTROL_ALLOW_ORIGIN).iter().collect();
        assert_eq!(origins, [PAGE]);
        assert!(
            h[ACCESS_CONTROL_EXPOSE_HEADERS]
                .to_str()
                .unwrap()
                .contains("mcp-session-id")
        );
        assert_eq!(h[VARY], "origin");
    }

    #[tokio::test]
    async fn other_requests_pass_as_they_are() {
        let local = [("origin", "http://localhost:3000")];
        let unlisted_preflight = [
            ("origin", "http://localhost:3000"),
            ("access-control-request-method", "POST"),
        ];
        for (method, headers) in [
            (Method::POST, &[][..]),
            (Method::POST, &local[..]),
            (Method::OPTIONS, &unlisted_preflight[..]),
        ] {
            let r = answer(method.clone(), headers, &[PAGE]).await;
            assert_eq!(r.status(), StatusCode::OK, "{method} {headers:?}");
            assert_eq!(
                r.headers()[ACCESS_CONTROL_ALLOW_ORIGIN],
                "*",
                "the upstream's"
            );
            assert!(!r.headers().contains_key(ACCESS_CONTROL_EXPOSE_HEADERS));
        }
    }
}
