//! HTTP as a client speaks it, with no MCP in it: one endpoint's kept connections ([`pool`])
//! over TLS where asked ([`tls`]) and through a proxy where the environment names one
//! ([`proxy`]), requests with deadlines ([`client`]), and bodies read
//! under a limit ([`body`]), and what to do when a client gives up on an exchange
//! ([`abandon`]). The tool servers' transport and the telemetry export both use it.

pub(crate) mod abandon;
pub mod body;
pub mod client;
mod pool;
pub mod proxy;
pub mod tls;
