//! The route to an HTTP server ([`Route`]): directly, or through the forward proxy the
//! environment names: `https_proxy` / `HTTPS_PROXY` for `https://` servers, `http_proxy` /
//! `HTTP_PROXY` for `http://` ones, and `no_proxy` / `NO_PROXY` for those reached directly
//! (the lowercase name first, as curl reads them). Requests and `/readyz` take the same one.
//!
//! An `https://` server is reached through a `CONNECT` tunnel: TLS runs end to end with the
//! server. A plain `http://` server's requests go to the proxy itself, each naming the server
//! in full (`POST http://host:port/mcp`), as curl and Go's client send them: proxies commonly
//! allow `CONNECT` only to port 443. Connections are kept and reused either way.
//!
//! Loopback servers (`localhost`, names under `.localhost`, loopback addresses) are never
//! reached through a proxy: a sidecar's server is beside it, whatever the environment says
//! of the way out. Only `http://` proxies are spoken to; credentials in the proxy's URL are
//! sent as `Proxy-Authorization: Basic`. A proxy URL that cannot be used stops toolgate with
//! a message naming the variable and never its value, which may hold a password.

use std::net::IpAddr;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The most of a proxy's answer to `CONNECT` that is read: a status line and a few headers.
const MAX_ANSWER: usize = 8 * 1024;

/// What a proxy's refusal for want of credentials (407) says to do, written to follow its
/// status.
pub(crate) const CREDENTIALS_HINT: &str =
    " (give the proxy's credentials in its URL: http://user:password@host:port)";

/// A proxy that connections to one server go through. Shown (`Display`, `Debug`) by where it
/// is only, never with its credentials.
pub(crate) struct Proxy {
    /// `host:port`, as a connect resolves it; also how messages name the proxy.
    addr: String,
    /// The `Basic` credentials of the proxy URL's user info, encoded.
    credentials: Option<String>,
}

/// Why the environment's proxy cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{var}: {why}")]
pub struct ProxyError {
    var: &'static str,
    why: &'static str,
}

/// Why a connection on a [`Route`] was not opened.
#[derive(Debug, thiserror::Error)]
pub(crate) enum ConnectError {
    #[error(transparent)]
    Direct(std::io::Error),
    #[error("the proxy {proxy}: {source}")]
    Io {
        proxy: String,
        source: std::io::Error,
    },
    #[error("the proxy {proxy} refused the tunnel: {status}{hint}")]
    Refused {
        proxy: String,
        status: String,
        hint: &'static str,
    },
    #[error("the proxy {proxy}: {why}")]
    Malformed { proxy: String, why: &'static str },
}

/// The way connections to one server go, as the environment names it.
#[derive(Debug)]
pub(crate) enum Route {
    /// Straight to the server.
    Direct,
    /// Through the proxy's `CONNECT` tunnel: an `https://` server.
    Tunnel(Proxy),
    /// To the proxy, each request naming the server in full: a plain `http://` server.
    Forward(Proxy),
}

impl Route {
    /// The route to a server at `host`:`port` as this process's environment names it.
    pub(crate) fn from_env(https: bool, host: &str, port: u16) -> Result<Route, ProxyError> {
        Ok(match Proxy::from_env(https, host, port)? {
            None => Route::Direct,
            Some(proxy) if https => Route::Tunnel(proxy),
            Some(proxy) => Route::Forward(proxy),
        })
    }

    pub(crate) fn proxy(&self) -> Option<&Proxy> {
        match self {
            Route::Direct => None,
            Route::Tunnel(proxy) | Route::Forward(proxy) => Some(proxy),
        }
    }

    /// A connection that requests to the server at `addr` (`host:port`) go on.
    pub(crate) async fn connect(&self, addr: &str) -> Result<TcpStream, ConnectError> {
        let stream = match self {
            Route::Direct => TcpStream::connect(addr)
                .await
                .map_err(ConnectError::Direct)?,
            Route::Tunnel(proxy) => proxy.tunnel(addr).await?,
            Route::Forward(proxy) => TcpStream::connect(&proxy.addr)
                .await
                .map_err(|source| proxy.failed(source))?,
        };
        let _ = stream.set_nodelay(true);
        Ok(stream)
    }
}

impl Proxy {
    /// The proxy for a server at `host`:`port` as this process's environment names it;
    /// `None` when the server is reached directly.
    fn from_env(https: bool, host: &str, port: u16) -> Result<Option<Proxy>, ProxyError> {
        Proxy::chosen(&|name| std::env::var(name).ok(), https, host, port)
    }

    fn chosen(
        env: &dyn Fn(&str) -> Option<String>,
        https: bool,
        host: &str,
        port: u16,
    ) -> Result<Option<Proxy>, ProxyError> {
        let names = if https {
            ["https_proxy", "HTTPS_PROXY"]
        } else {
            ["http_proxy", "HTTP_PROXY"]
        };
        let set = |name: &'static str| env(name).filter(|v| !v.trim().is_empty());
        let Some((var, url)) = names.into_iter().find_map(|n| set(n).map(|v| (n, v))) else {
            return Ok(None);
        };
        let host = bare(host);
        let no_proxy = set("no_proxy")
            .or_else(|| set("NO_PROXY"))
            .unwrap_or_default();
        if is_loopback(&host) || bypassed(&no_proxy, &host, port) {
            return Ok(None);
        }
        Proxy::parse(url.trim())
            .map(Some)
            .map_err(|why| ProxyError { var, why })
    }

    /// An `http://` proxy URL, or a bare `host:port` (taken as one).
    fn parse(url: &str) -> Result<Proxy, &'static str> {
        let url = if url.contains("://") {
            url.to_owned()
        } else {
            format!("http://{url}")
        };
        let uri: http::Uri = url.parse().map_err(|_| "not a URL")?;
        if uri.scheme_str() != Some("http") {
            return Err("only an http:// proxy is supported");
        }
        let authority = uri.authority().ok_or("no host in the proxy URL")?;
        let host = authority.host();
        if host.is_empty() {
            return Err("no host in the proxy URL");
        }
        let credentials = match authority.as_str().rsplit_once('@') {
            Some((user_info, _)) => Some(basic(user_info)?),
            None => None,
        };
        Ok(Proxy {
            addr: format!("{host}:{}", authority.port_u16().unwrap_or(80)),
            credentials,
        })
    }

    /// `Proxy-Authorization` for a request sent to the proxy, when its URL has credentials.
    pub(crate) fn authorization(&self) -> Option<http::HeaderValue> {
        let mut value =
            http::HeaderValue::try_from(format!("Basic {}", self.credentials.as_ref()?)).ok()?;
        value.set_sensitive(true);
        Some(value)
    }

    fn failed(&self, source: std::io::Error) -> ConnectError {
        ConnectError::Io {
            proxy: self.addr.clone(),
            source,
        }
    }

    /// A stream to `dest` (`host:port`) through the proxy, once it has agreed to `CONNECT`.
    async fn tunnel(&self, dest: &str) -> Result<TcpStream, ConnectError> {
        let io = |source| self.failed(source);
        let mut stream = TcpStream::connect(&self.addr).await.map_err(io)?;
        let mut ask = format!("CONNECT {dest} HTTP/1.1\r\nHost: {dest}\r\n");
        if let Some(c) = &self.credentials {
            ask.push_str("Proxy-Authorization: Basic ");
            ask.push_str(c);
            ask.push_str("\r\n");
        }
        ask.push_str("\r\n");
        stream.write_all(ask.as_bytes()).await.map_err(io)?;
        let head = self.answer_head(&mut stream).await?;
        self.agreed(&head)?;
        Ok(stream)
    }

    /// The proxy's answer to `CONNECT`, up to its blank line. The server has said nothing
    /// yet (a client speaks first in HTTP and in TLS), so anything past it is a fault.
    async fn answer_head(&self, stream: &mut TcpStream) -> Result<Vec<u8>, ConnectError> {
        let malformed = |why| ConnectError::Malformed {
            proxy: self.addr.clone(),
            why,
        };
        let mut head = Vec::with_capacity(512);
        let mut chunk = [0u8; 1024];
        loop {
            let n = stream
                .read(&mut chunk)
                .await
                .map_err(|source| self.failed(source))?;
            if n == 0 {
                return Err(malformed(
                    "it closed the connection before answering CONNECT",
                ));
            }
            head.extend_from_slice(&chunk[..n]);
            if let Some(end) = head.windows(4).position(|w| w == b"\r\n\r\n") {
                if end + 4 != head.len() {
                    return Err(malformed("it sent more than its answer to CONNECT"));
                }
                return Ok(head);
            }
            if head.len() > MAX_ANSWER {
                return Err(malformed("its answer to CONNECT is over 8 KiB"));
            }
        }
    }

    /// `Ok` for a 2xx answer; otherwise its status line, as far as it is printable.
    fn agreed(&self, head: &[u8]) -> Result<(), ConnectError> {
        let line = head.split(|b| *b == b'\r').next().unwrap_or_default();
        let line = String::from_utf8_lossy(line);
        let mut words = line.splitn(3, ' ');
        let (version, code) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
        if !version.starts_with("HTTP/1.") || code.len() != 3 {
            return Err(ConnectError::Malformed {
                proxy: self.addr.clone(),
                why: "its answer to CONNECT is not HTTP/1",
            });
        }
        if code.starts_with('2') {
            return Ok(());
        }
        let status: String = line[version.len()..]
            .trim()
            .chars()
            .filter(|c| c.is_ascii_graphic() || *c == ' ')
            .take(100)
            .collect();
        let hint = if code == "407" { CREDENTIALS_HINT } else { "" };
        Err(ConnectError::Refused {
            proxy: self.addr.clone(),
            status,
            hint,
        })
    }
}

impl std::fmt::Display for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.addr)
    }
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Proxy({})", self.addr)
    }
}

/// `user:password` (percent-encoded, as in a URL) as `Basic` credentials.
fn basic(user_info: &str) -> Result<String, &'static str> {
    use base64::Engine;
    let (user, password) = user_info.split_once(':').unwrap_or((user_info, ""));
    let decode = |s: &str| {
        crate::text::percent_decode(s)
            .ok_or("the proxy URL's user info is not valid percent-encoding")
    };
    let plain = format!("{}:{}", decode(user)?, decode(password)?);
    Ok(base64::engine::general_purpose::STANDARD.encode(plain))
}

/// A host as compared: lowercase, without an IPv6 address's brackets or a final dot.
fn bare(host: &str) -> String {
    host.trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase()
}

/// `localhost`, a name under it, or a loopback address, an IPv4 one written as IPv6
/// (`::ffff:127.0.0.1`) too.
fn is_loopback(host: &str) -> bool {
    host == "localhost"
        || host.ends_with(".localhost")
        || host
            .parse::<IpAddr>()
            .is_ok_and(|ip| ip.to_canonical().is_loopback())
}

/// Whether `no_proxy` (comma-separated) names the server: `*`; a host name, which also
/// covers the names under it (`example.com` and `.example.com` both cover `a.example.com`);
/// an IP address; a CIDR range; any of them with `:port` for that port only.
fn bypassed(no_proxy: &str, host: &str, port: u16) -> bool {
    let ip = host.parse::<IpAddr>().ok();
    no_proxy
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .any(|entry| {
            if entry == "*" {
                return true;
            }
            let (name, only_port) = split_port(entry);
            if only_port.is_some_and(|p| p != port) {
                return false;
            }
            match ip {
                Some(ip) => names_ip(&name, ip),
                None => {
                    let domain = name.trim_start_matches("*.").trim_start_matches('.');
                    !domain.is_empty()
                        && (host == domain
                            || host.strip_suffix(domain).is_some_and(|h| h.ends_with('.')))
                }
            }
        })
}

/// An entry's name and the port it is limited to: `[::1]:8080`, `host:8080`, and a bare
/// IPv6 address (no port) told apart.
fn split_port(entry: &str) -> (String, Option<u16>) {
    if let Some(rest) = entry.strip_prefix('[') {
        let (addr, after) = rest.split_once(']').unwrap_or((rest, ""));
        let port = after.strip_prefix(':').and_then(|p| p.parse().ok());
        return (bare(addr), port);
    }
    match entry.split_once(':') {
        Some((name, port)) if !port.contains(':') => match port.parse() {
            Ok(p) => (bare(name), Some(p)),
            Err(_) => (bare(entry), None),
        },
        _ => (bare(entry), None),
    }
}

/// Whether an entry (an address, or a CIDR range) holds `ip`.
fn names_ip(entry: &str, ip: IpAddr) -> bool {
    let (addr, prefix) = match entry.split_once('/') {
        Some((a, p)) => match p.parse::<u32>() {
            Ok(p) => (a, Some(p)),
            Err(_) => return false,
        },
        None => (entry, None),
    };
    let Ok(net) = addr.parse::<IpAddr>() else {
        return false;
    };
    match (net, ip) {
        (IpAddr::V4(n), IpAddr::V4(i)) => within(
            u32::from(n).into(),
            u32::from(i).into(),
            prefix.unwrap_or(32),
            32,
        ),
        (IpAddr::V6(n), IpAddr::V6(i)) => {
            within(u128::from(n), u128::from(i), prefix.unwrap_or(128), 128)
        }
        _ => false,
    }
}

/// Whether `ip` shares the first `prefix` of `bits` bits with `net`.
fn within(net: u128, ip: u128, prefix: u32, bits: u32) -> bool {
    if prefix > bits {
        return false;
    }
    let shift = bits - prefix;
    shift >= bits || (net >> shift) == (ip >> shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chosen(vars: &[(&str, &str)], https: bool, host: &str, port: u16) -> Option<String> {
        let env = |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        };
        Proxy::chosen(&env, https, host, port)
            .unwrap()
            .map(|p| p.addr)
    }

    #[test]
    fn the_scheme_chooses_the_variable_and_lowercase_comes_first() {
        let vars = [
            ("https_proxy", "http://low:3128"),
            ("HTTPS_PROXY", "http://up:3128"),
            ("HTTP_PROXY", "plain:8080"),
        ];
        assert_eq!(
            chosen(&vars, true, "api.example.com", 443).as_deref(),
            Some("low:3128")
        );
        assert_eq!(
            chosen(&vars[1..], true, "api.example.com", 443).as_deref(),
            Some("up:3128")
        );
        assert_eq!(
            chosen(&vars, false, "api.example.com", 80).as_deref(),
            Some("plain:8080")
        );
        assert_eq!(chosen(&[], true, "api.example.com", 443), None);
        assert_eq!(
            chosen(&[("HTTPS_PROXY", " ")], true, "x.example", 443),
            None
        );
    }

    #[test]
    fn loopback_servers_are_reached_directly() {
        let vars = [
            ("HTTPS_PROXY", "http://proxy:3128"),
            ("HTTP_PROXY", "proxy:3128"),
        ];
        for host in [
            "localhost",
            "LOCALHOST.",
            "mcp.localhost",
            "127.0.0.1",
            "127.8.9.1",
            "[::1]",
            "[::ffff:127.0.0.1]",
        ] {
            assert_eq!(chosen(&vars, true, host, 443), None, "{host}");
            assert_eq!(chosen(&vars, false, host, 80), None, "{host}");
        }
        assert!(chosen(&vars, true, "localhost.example.com", 443).is_some());
    }

    #[test]
    fn no_proxy_names_hosts_domains_addresses_ranges_and_ports() {
        let proxied = |no_proxy: &str, host: &str, port: u16| {
            let vars = [("HTTPS_PROXY", "http://proxy:3128"), ("NO_PROXY", no_proxy)];
            chosen(&vars, true, host, port).is_some()
        };
        assert!(!proxied("*", "api.example.com", 443));
        assert!(!proxied("example.com", "example.com", 443));
        assert!(!proxied("example.com", "a.b.Example.COM", 443));
        assert!(!proxied(".example.com", "a.example.com", 443));
        assert!(!proxied("*.example.com", "a.example.com", 443));
        assert!(proxied("example.com", "notexample.com", 443));
        assert!(proxied("a.example.com", "example.com", 443));
        assert!(!proxied(" other.org , example.com ", "example.com", 443));
        assert!(!proxied("example.com:8443", "example.com", 8443));
        assert!(proxied("example.com:8443", "example.com", 443));
        assert!(!proxied("10.1.2.3", "10.1.2.3", 443));
        assert!(proxied("10.1.2.3", "10.1.2.4", 443));
        assert!(!proxied("10.0.0.0/8", "10.200.3.4", 443));
        assert!(proxied("10.0.0.0/8", "11.0.0.1", 443));
        assert!(!proxied("0.0.0.0/0", "192.0.2.1", 443));
        assert!(proxied("10.0.0.0/33", "10.0.0.1", 443));
        assert!(!proxied("2001:db8::/32", "[2001:db8::7]", 443));
        assert!(!proxied("[2001:db8::7]:443", "[2001:db8::7]", 443));
        assert!(proxied("2001:db8::/32", "[2001:db9::7]", 443));
        assert!(proxied("10.0.0.0/8", "ten.example", 443));
        assert!(proxied(",,", "example.com", 443));
    }

    #[test]
    fn a_proxy_url_gives_its_address_and_credentials_and_shows_only_the_address() {
        let p = Proxy::parse("http://user%40corp:p%3Ass@proxy.corp:3128/").unwrap();
        assert_eq!(p.addr, "proxy.corp:3128");
        let route = Route::Tunnel(Proxy::parse("http://u:pw@proxy.corp:3128").unwrap());
        assert_eq!(format!("{route:?}"), "Tunnel(Proxy(proxy.corp:3128))");
        assert_eq!(format!("{}", route.proxy().unwrap()), "proxy.corp:3128");
        use base64::Engine;
        let plain = base64::engine::general_purpose::STANDARD
            .decode(p.credentials.unwrap())
            .unwrap();
        assert_eq!(plain, b"user@corp:p:ss");
        assert_eq!(Proxy::parse("proxy.corp").unwrap().addr, "proxy.corp:80");
        assert_eq!(
            Proxy::parse("http://[::1]:3128").unwrap().addr,
            "[::1]:3128"
        );
        assert!(
            Proxy::parse("http://proxy:3128")
                .unwrap()
                .credentials
                .is_none()
        );
    }

    #[test]
    fn an_unusable_proxy_url_names_the_variable_and_not_its_value() {
        for (url, why) in [
            ("socks5://user:secret@proxy:1080", "only an http:// proxy"),
            ("https://user:secret@proxy:443", "only an http:// proxy"),
            ("http://user:secret@proxy:3128:99", "not a URL"),
            ("http://user:%zz@proxy:3128", "percent-encoding"),
        ] {
            let env = |name: &str| (name == "HTTPS_PROXY").then(|| url.to_owned());
            let e = Proxy::chosen(&env, true, "api.example.com", 443)
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("HTTPS_PROXY: ") && e.contains(why),
                "{url}: {e}"
            );
            assert!(!e.contains("secret"), "{e}");
        }
        // Not used, not read: a server reached directly does not stop on it.
        let env = |name: &str| (name == "HTTPS_PROXY").then(|| "socks5://p:1080".to_owned());
        assert!(
            Proxy::chosen(&env, true, "127.0.0.1", 443)
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn an_answer_other_than_2xx_is_a_refusal_with_its_status() {
        let p = Proxy::parse("proxy:3128").unwrap();
        assert!(
            p.agreed(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .is_ok()
        );
        assert!(p.agreed(b"HTTP/1.0 200\r\n\r\n").is_ok());
        let refused = p
            .agreed(
                b"HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n",
            )
            .unwrap_err()
            .to_string();
        assert_eq!(
            refused,
            "the proxy proxy:3128 refused the tunnel: 407 Proxy Authentication Required (give \
             the proxy's credentials in its URL: http://user:password@host:port)"
        );
        let refused = p
            .agreed(b"HTTP/1.1 403 Forbidden\x1b[31m\r\n\r\n")
            .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "the proxy proxy:3128 refused the tunnel: 403 Forbidden[31m"
        );
        assert!(matches!(
            p.agreed(b"SSH-2.0-OpenSSH\r\n\r\n"),
            Err(ConnectError::Malformed { .. })
        ));
    }
}
