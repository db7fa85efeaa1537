//! Transports: wire traffic in, single JSON-RPC messages to the pipeline, answers out.

pub mod child;
pub mod conn_timers;
mod drain;
pub mod http;
mod http_answers;
mod http_request;
mod http_stdio;
pub mod http_upstream;
pub mod layer;
pub mod listener_tls;
pub(crate) mod modern;
pub(crate) mod origin;
mod reply;
mod repoll;
pub mod sse;
pub mod stdio;
pub mod stdio_http;
pub mod stdio_pool;
mod upstream_pool;
pub mod upstream_tls;
mod well_known;
