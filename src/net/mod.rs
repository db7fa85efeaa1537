//! HTTP as a client speaks it, with no MCP in it: one endpoint's kept connections ([`pool`])
//! over TLS where asked ([`tls`]), requests with deadlines ([`client`]), and bodies read
//! under a limit ([`body`]). The tool servers' transport and the telemetry export both use it.

pub mod body;
pub mod client;
mod pool;
pub mod tls;
