//! What one request on the HTTP edge is served with and carries along: its route (the
//! gateway in force, its target, where its messages go), what its headers say, and its note
//! on the way in and out of the stack. Shared by the edge's handlers, so none of them
//! imports another for its types.

use crate::auth::CLIENT_CREDENTIALS;
use crate::gateway::{Gateway, Target};
use crate::mcp::{self, Era};
use crate::policy::clients::Client;
use crate::transport::exchange::Note;
use crate::transport::exchange::to_children::ToChildren;
use crate::transport::exchange::to_http::ToHttp;
use crate::transport::upstream::children::StdioPool;
use crate::transport::upstream::http_client::HttpUpstream;
use crate::transport::upstream::multiplex::Owner;
use axum::response::Response;
use http::request::Parts;
use http::{HeaderMap, HeaderValue};
use std::sync::Arc;

/// What one request is served with: the gateway in force when it arrived, its upstream's
/// target in that gateway, and where its messages go.
///
/// Borrowed for the request's lifetime: cloning three `Arc`s per request would move their
/// counts' cache lines between the worker threads on every call.
pub(super) struct Route<'a> {
    pub(super) gw: &'a Arc<Gateway>,
    pub(super) target: &'a Arc<Target>,
    pub(super) server: &'a Server,
    /// The client's address, for limits per client when it has no authenticated name.
    pub(super) peer: std::net::IpAddr,
}

impl<'a> Route<'a> {
    /// How this route's messages reach its HTTP server `up`.
    pub(super) fn to_http(&self, up: &'a Arc<HttpUpstream>) -> ToHttp<'a> {
        ToHttp {
            gw: self.gw,
            target: self.target,
            up,
        }
    }

    /// How this route's messages reach the children of its stdio server, `pool`.
    pub(super) fn to_children(&self, pool: &'a Arc<StdioPool>) -> ToChildren<'a> {
        ToChildren {
            gw: self.gw,
            target: self.target,
            pool,
        }
    }
}

/// One upstream's endpoint. It names its target by position: a reload rebuilds the targets'
/// rules, never the set of upstreams, so positions are stable while connections and stdio
/// children live on.
pub(super) struct Endpoint {
    pub(super) path: String,
    pub(super) index: usize,
    pub(super) server: Server,
}

/// The server behind an endpoint: an HTTP server (its client, its bridge), or a stdio
/// server's children.
#[derive(Clone)]
pub(super) enum Server {
    Http(Arc<HttpUpstream>),
    Stdio(Arc<StdioPool>),
}

/// A request inside the edge's stack, with what the outer layers settled: the gateway in force
/// when it arrived (loaded once, by `admission`: every load writes a count all threads share)
/// and the note they read back when the answer comes out.
pub(crate) struct Inbound<B> {
    /// The request's head, boxed as the note is: it moves into every layer and on with the
    /// message to its server, and a pointer moves cheaply where its 224 bytes would not.
    pub(crate) head: Box<Parts>,
    pub(crate) body: B,
    pub(crate) gw: Arc<Gateway>,
    /// Boxed: the note moves with the request into every layer and back out with its
    /// answer, and one allocation costs less than moving its 152 bytes at each of them.
    pub(crate) note: Box<Note>,
}

/// A request past `routes`: the target it is for. Endpoint `i` serves target `i`.
pub(crate) struct Routed<B> {
    pub(crate) inbound: Inbound<B>,
    pub(crate) target: usize,
}

/// An answer on its way out through the stack, with the gateway and note its request came in
/// with.
pub(crate) struct Outbound {
    /// Boxed, as the request's head is: it moves out through every layer.
    pub(crate) resp: Box<Response>,
    pub(crate) gw: Arc<Gateway>,
    pub(crate) note: Box<Note>,
}

impl<B> Inbound<B> {
    /// `req` as the stack carries it: its head boxed, its body (a handle on the connection's
    /// stream, or an application's body) beside it.
    pub(crate) fn new(req: http::Request<B>, gw: Arc<Gateway>, note: Box<Note>) -> Inbound<B> {
        let (head, body) = req.into_parts();
        Inbound {
            head: Box::new(head),
            body,
            gw,
            note,
        }
    }

    /// The answer to this request, for a layer that answers it itself.
    pub(crate) fn answer(self, resp: Response) -> Outbound {
        Outbound {
            resp: Box::new(resp),
            gw: self.gw,
            note: self.note,
        }
    }
}

/// Who sent a request and what its headers say of it: its scope, its protocol version,
/// whether it has a session, and the client whose rules apply.
pub(super) struct Caller {
    pub(super) key: crate::catalog::ScopeKey,
    /// `MCP-Protocol-Version` and `Mcp-Session-Id` as they came: held, not copied.
    pub(super) version: Option<HeaderValue>,
    pub(super) session: Option<HeaderValue>,
    pub(super) client: Option<Client>,
}

impl Caller {
    /// Who sent the request, among the clients of a session toolgate shares between them:
    /// the authenticated name, else the client's address.
    pub(super) fn owner(&self, peer: std::net::IpAddr) -> Owner<'_> {
        match &self.client {
            Some(c) => Owner::Named(&c.name),
            None => Owner::At(peer),
        }
    }

    pub(super) fn of(
        gw: &Gateway,
        target: &Target,
        headers: &HeaderMap,
        client: Option<Client>,
    ) -> Caller {
        // One pass over the headers, the first of each name, rather than a lookup (a hash
        // of the name and a probe) for each.
        let (mut session, mut version) = (None, None);
        for (name, value) in headers {
            let slot = if name == mcp::SESSION_ID {
                &mut session
            } else if name == mcp::PROTOCOL_VERSION {
                &mut version
            } else {
                continue;
            };
            slot.get_or_insert(value);
        }
        // Read only without a session, whose id is the scope: every value of the headers a
        // credential travels in (a cookie may come in several), in the order they came. A
        // second pass over the few headers a request has costs less than a lookup of each
        // name (0.77k instructions a stateless call for the lookups).
        let credential = session.is_none().then(|| {
            (headers.iter())
                .filter(|(name, _)| CLIENT_CREDENTIALS.contains(name))
                .map(|(name, value)| (name.as_str(), value.as_bytes()))
        });
        Caller {
            client,
            key: gw.scope(
                target,
                session.map(|s| s.as_bytes()),
                credential.into_iter().flatten(),
            ),
            version: version.cloned(),
            session: session.cloned(),
        }
    }

    pub(super) fn has_session(&self) -> bool {
        self.session.is_some()
    }

    /// The protocol version the headers name, when it is text.
    pub(super) fn version(&self) -> Option<&str> {
        self.version.as_ref().and_then(|v| v.to_str().ok())
    }

    pub(super) fn era(&self, body_names_version: impl FnOnce() -> bool) -> Era {
        Era::detect(self.version(), body_names_version)
    }
}

/// The default rules in front of one upstream that is never dialed, for the layers' tests.
#[cfg(test)]
pub(crate) fn test_config() -> crate::config::Config {
    crate::config::Config {
        upstream: Some("http://127.0.0.1:9/mcp".into()),
        ..crate::config::Config::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_and_a_version_are_their_first_values_and_a_credential_all_of_them() {
        use http::header::AUTHORIZATION;
        let gw = Gateway::new(test_config()).unwrap();
        let target = &gw.targets[0];
        let mut h = HeaderMap::new();
        h.append(AUTHORIZATION, "Bearer a".parse().unwrap());
        h.append(AUTHORIZATION, "Bearer b".parse().unwrap());
        h.insert(mcp::PROTOCOL_VERSION, "2025-11-25".parse().unwrap());
        let c = Caller::of(&gw, target, &h, None);
        let both = [
            ("authorization", &b"Bearer a"[..]),
            ("authorization", b"Bearer b"),
        ];
        assert_eq!(c.key, gw.scope(target, None, both));
        assert_eq!(c.version(), Some("2025-11-25"));
        assert!(!c.has_session());
        h.append(mcp::SESSION_ID, "s1".parse().unwrap());
        h.append(mcp::SESSION_ID, "s2".parse().unwrap());
        let c = Caller::of(&gw, target, &h, None);
        assert_eq!(c.key, gw.scope(target, Some(b"s1"), []));
        assert!(c.has_session());
    }

    /// Stateless clients that differ only in a credential header other than
    /// `Authorization` (an API key, a cookie) have scopes of their own; a header that is no
    /// credential (a request id) changes nothing.
    #[test]
    fn every_header_a_credential_travels_in_tells_stateless_clients_apart() {
        use http::header::COOKIE;
        let gw = Gateway::new(test_config()).unwrap();
        let target = &gw.targets[0];
        let key = |pairs: &[(&str, &str)]| {
            let mut h = HeaderMap::new();
            for (name, value) in pairs {
                h.append(
                    http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    value.parse().unwrap(),
                );
            }
            Caller::of(&gw, target, &h, None).key
        };
        let none = key(&[]);
        assert_eq!(none, gw.scope(target, None, []));
        assert_eq!(key(&[("x-request-id", "1")]), none);
        let a = key(&[("x-api-key", "a")]);
        assert_ne!(a, none);
        assert_ne!(a, key(&[("x-api-key", "b")]));
        assert_eq!(a, key(&[("x-api-key", "a"), ("x-request-id", "2")]));
        assert_ne!(a, key(&[("api-key", "a")]), "the header is part of it");
        let cookies = key(&[(COOKIE.as_str(), "s=1"), (COOKIE.as_str(), "t=2")]);
        assert_ne!(
            cookies,
            key(&[(COOKIE.as_str(), "s=1"), (COOKIE.as_str(), "t=3")])
        );
    }
}
