//! HTTP as a client speaks it, with no MCP in it: one endpoint's kept connections ([`pool`])
//! over TLS where asked ([`tls`]) and through a proxy where the environment names one
//! ([`proxy`]), requests with deadlines ([`client`]), and bodies read
//! under a limit ([`body`]), what to do when a client gives up on an exchange
//! ([`abandon`]), and how many connections every server's together may take
//! ([`outbound`]). The tool servers' transport and the telemetry export both use it.

pub(crate) mod abandon;
pub mod body;
pub mod client;
pub(crate) mod outbound;
mod pool;
pub mod proxy;
pub mod tls;

/// Where a URL's server is: whether it is `https://`, its host (an IPv6 address in brackets),
/// and its port, the scheme's own when none is written.
pub(crate) struct Server<'a> {
    pub(crate) https: bool,
    pub(crate) host: &'a str,
    pub(crate) port: u16,
}

impl Server<'_> {
    pub(crate) fn of(uri: &http::Uri) -> Server<'_> {
        let https = uri.scheme_str() == Some("https");
        Server {
            https,
            host: uri.host().unwrap_or("localhost"),
            port: uri.port_u16().unwrap_or(if https { 443 } else { 80 }),
        }
    }
}
