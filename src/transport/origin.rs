//! DNS-rebinding protection: a browser page on a foreign origin must not reach a local MCP
//! server through toolgate. `Origin`, when present, must be a localhost origin or one the
//! operator allowed; on a loopback listener the `Host` must name loopback too, since a
//! rebound DNS name arrives as a foreign `Host`.

use http::HeaderMap;
use http::header::{HOST, ORIGIN};

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

    /// `Err` carries the reason for the 403.
    pub fn check(&self, headers: &HeaderMap) -> Result<(), &'static str> {
        if let Some(origin) = headers.get(ORIGIN) {
            let o = origin.to_str().unwrap_or("").to_ascii_lowercase();
            let ok = self.any || self.allowed.contains(&o) || is_local_origin(&o);
            if !ok {
                return Err("Forbidden: Origin not allowed");
            }
        }
        if self.check_host
            && !self.any
            && let Some(host) = headers.get(HOST)
        {
            let h = host.to_str().unwrap_or("").to_ascii_lowercase();
            let allowed_host = self
                .allowed
                .iter()
                .any(|a| a.split_once("://").is_some_and(|(_, rest)| rest == h));
            if !is_local_host(&h) && !allowed_host {
                return Err("Forbidden: Host not allowed");
            }
        }
        Ok(())
    }
}

fn is_local_origin(origin: &str) -> bool {
    match origin.split_once("://") {
        Some(("http" | "https", rest)) => is_local_host(rest),
        _ => false,
    }
}

fn is_local_host(host_port: &str) -> bool {
    let host = if let Some(rest) = host_port.strip_prefix('[') {
        match rest.split_once(']') {
            Some((h, port)) if port.is_empty() || port.starts_with(':') => {
                return h == "::1" && valid_port(port);
            }
            _ => return false,
        }
    } else {
        match host_port.split_once(':') {
            Some((h, port)) if valid_port(&format!(":{port}")) => h,
            Some(_) => return false,
            None => host_port,
        }
    };
    host == "localhost" || host == "127.0.0.1"
}

fn valid_port(p: &str) -> bool {
    p.is_empty()
        || p.strip_prefix(':')
            .is_some_and(|d| !d.is_empty() && d.len() <= 5 && d.bytes().all(|b| b.is_ascii_digit()))
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
        ] {
            assert!(p.check(&headers(&[("origin", ok)])).is_ok(), "{ok}");
        }
        for bad in [
            "http://evil.example",
            "http://localhost.evil.example",
            "http://127.0.0.1.nip.io:80",
            "null",
        ] {
            assert!(p.check(&headers(&[("origin", bad)])).is_err(), "{bad}");
        }
        assert!(p.check(&headers(&[("host", "evil.example.com")])).is_err());
        assert!(p.check(&headers(&[("host", "127.0.0.1:8080")])).is_ok());
    }

    #[test]
    fn operators_can_allow_more() {
        let p = OriginPolicy::new(&["https://app.example.com".into()], true);
        assert!(
            p.check(&headers(&[("origin", "https://app.example.com")]))
                .is_ok()
        );
        assert!(p.check(&headers(&[("host", "app.example.com")])).is_ok());
    }
}
