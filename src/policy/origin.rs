//! DNS-rebinding protection: a browser page on a foreign origin must not reach a local MCP
//! server through toolgate. `Origin`, when present, must be a localhost origin or one the
//! operator allowed; on a loopback listener the `Host` must name loopback too, since a
//! rebound DNS name arrives as a foreign `Host`.
//!
//! Runs on every request, so it compares in place and allocates nothing.

use http::header::{HOST, ORIGIN};
use http::{HeaderMap, HeaderValue};

pub struct OriginPolicy {
    allowed: Vec<String>,
    any: bool,
    check_host: bool,
}

impl OriginPolicy {
    pub fn new(allowed: &[String], loopback_listener: bool) -> OriginPolicy {
        OriginPolicy {
            any: allowed.iter().any(|o| o == "*"),
            allowed: allowed
                .iter()
                .map(|o| o.trim_end_matches('/').to_ascii_lowercase())
                .collect(),
            check_host: loopback_listener,
        }
    }

    /// `Err` carries the reason for the 403. `Ok` carries the origin a page may read the
    /// answers from (CORS): one the operator listed, or any under `"*"`; a localhost origin
    /// passes but is not shared with unless listed. `authority` is the request target's:
    /// over HTTP/2 it is the `:authority` every client sends, and usually the only name of
    /// the host, so it is held to the same rule as `Host` (both, when both came).
    pub fn check(
        &self,
        headers: &HeaderMap,
        authority: Option<&http::uri::Authority>,
    ) -> Result<Option<HeaderValue>, &'static str> {
        if self.any {
            return Ok(headers.get(ORIGIN).cloned());
        }
        // One pass over the headers, the first of each name, rather than a lookup (a hash of
        // the name and a probe) for each of the two.
        let (mut origin, mut host) = (None, None);
        for (name, value) in headers {
            if name == ORIGIN {
                origin.get_or_insert(value);
            } else if name == HOST {
                host.get_or_insert(value);
            }
        }
        let mut shared = None;
        if let Some(origin) = origin {
            let o = origin.to_str().unwrap_or("");
            let listed = self.allowed.iter().any(|a| a.eq_ignore_ascii_case(o));
            if !listed && !is_local_origin(o) {
                return Err("Forbidden: Origin not allowed");
            }
            shared = listed.then(|| origin.clone());
        }
        if !self.check_host {
            return Ok(shared);
        }
        // Compared as bytes: a name that is not text is no allowed one either, and checking
        // that it is text first cost more than the comparisons.
        let host = host.map(http::HeaderValue::as_bytes);
        // A request in absolute form names its host twice, nearly always alike: once is
        // enough to check.
        let authority = authority
            .map(|a| a.as_str().as_bytes())
            .filter(|a| host.is_none_or(|h| h != *a));
        let named = host.into_iter().chain(authority);
        for h in named {
            let allowed_host = || {
                self.allowed.iter().any(|a| {
                    a.split_once("://")
                        .is_some_and(|(_, rest)| rest.as_bytes().eq_ignore_ascii_case(h))
                })
            };
            if !is_local_host(h) && !allowed_host() {
                return Err("Forbidden: Host not allowed");
            }
        }
        Ok(shared)
    }
}

fn is_local_origin(origin: &str) -> bool {
    match origin.split_once("://") {
        Some((scheme, rest))
            if scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https") =>
        {
            is_local_host(rest.as_bytes())
        }
        _ => false,
    }
}

fn is_local_host(host_port: &[u8]) -> bool {
    let (host, port) = if let Some(rest) = host_port.strip_prefix(b"[") {
        match rest.iter().position(|b| *b == b']') {
            Some(i) => (&rest[..i], &rest[i + 1..]),
            None => return false,
        }
    } else {
        // From the end: a port is a few digits.
        match host_port.iter().rposition(|b| *b == b':') {
            Some(i) => (&host_port[..i], &host_port[i..]),
            None => (host_port, &[][..]),
        }
    };
    let port_ok = port.is_empty()
        || port
            .strip_prefix(b":")
            .is_some_and(|d| !d.is_empty() && d.len() <= 5 && d.iter().all(u8::is_ascii_digit));
    port_ok && (host.eq_ignore_ascii_case(b"localhost") || host == b"127.0.0.1" || host == b"::1")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                v.parse().unwrap(),
            );
        }
        h
    }

    #[test]
    fn localhost_origins_pass_and_foreign_ones_do_not() {
        let p = OriginPolicy::new(&[], true);
        for ok in [
            "http://localhost:3000",
            "http://127.0.0.1",
            "https://[::1]:8443",
            "HTTP://LOCALHOST:1",
        ] {
            assert!(p.check(&headers(&[("origin", ok)]), None).is_ok(), "{ok}");
        }
        for bad in [
            "http://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.nip.io:80",
            "null",
            "http://127.0.0.1:80:80",
            "http://[::1]x",
        ] {
            assert!(
                p.check(&headers(&[("origin", bad)]), None).is_err(),
                "{bad}"
            );
        }
        assert!(
            p.check(&headers(&[("host", "evil.example.com")]), None)
                .is_err()
        );
        assert!(
            p.check(&headers(&[("host", "127.0.0.1:8080")]), None)
                .is_ok()
        );
        assert!(p.check(&headers(&[("host", "localhost")]), None).is_ok());
        assert!(p.check(&headers(&[("host", "[::1]:8080")]), None).is_ok());
        // A name that is not text is no local one, nor one an operator allowed.
        let mut not_text = HeaderMap::new();
        let value = http::HeaderValue::from_bytes(b"localhost\xff").unwrap();
        not_text.insert(http::header::HOST, value);
        assert!(p.check(&not_text, None).is_err());
        let empty_allowed = OriginPolicy::new(&["http://".into()], true);
        assert!(empty_allowed.check(&not_text, None).is_err());
        // HTTP/2: the host is named by `:authority`, with or without `Host`.
        let evil: http::uri::Authority = "evil.example".parse().unwrap();
        let local: http::uri::Authority = "127.0.0.1:8080".parse().unwrap();
        assert!(p.check(&HeaderMap::new(), Some(&evil)).is_err());
        assert!(p.check(&HeaderMap::new(), Some(&local)).is_ok());
        assert!(
            p.check(&headers(&[("host", "127.0.0.1")]), Some(&evil))
                .is_err()
        );
        // Absolute form over HTTP/1: both name the host, alike or not.
        let same = |h: &str, a: &http::uri::Authority| p.check(&headers(&[("host", h)]), Some(a));
        assert!(same("127.0.0.1:8080", &local).is_ok());
        assert!(same("evil.example", &evil).is_err());
        assert!(same("evil.example", &local).is_err());
    }

    #[test]
    fn operators_can_allow_more() {
        let p = OriginPolicy::new(&["https://app.example.com".into()], true);
        assert!(
            p.check(&headers(&[("origin", "https://app.example.com")]), None)
                .is_ok()
        );
        assert!(
            p.check(&headers(&[("host", "app.example.com")]), None)
                .is_ok()
        );
        assert!(
            OriginPolicy::new(&["*".into()], true)
                .check(&headers(&[("origin", "http://x"), ("host", "x")]), None)
                .is_ok()
        );
    }

    /// CORS goes to the origins listed (or any, under `"*"`), not to every local one.
    #[test]
    fn only_listed_origins_are_shared_with() {
        let listed = OriginPolicy::new(&["https://app.example.com".into()], true);
        let any = OriginPolicy::new(&["*".into()], true);
        let shared = |p: &OriginPolicy, origin: &str| {
            p.check(&headers(&[("origin", origin), ("host", "127.0.0.1")]), None)
                .unwrap()
                .map(|o| o.to_str().unwrap().to_owned())
        };
        let app = "https://app.example.com";
        assert_eq!(shared(&listed, app).as_deref(), Some(app));
        assert_eq!(shared(&listed, "http://localhost:3000"), None);
        assert_eq!(shared(&any, "http://x").as_deref(), Some("http://x"));
        assert_eq!(
            listed.check(&headers(&[("host", "127.0.0.1")]), None),
            Ok(None)
        );
    }
}
