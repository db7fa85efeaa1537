//! Transports: wire traffic in, single JSON-RPC messages to the pipeline, answers out.
//!
//! - [`edge`]: the HTTP server side, a Tower stack of one-job layers around the gate (the MCP
//!   rules for one endpoint), and the in-process [`edge::layer::ValidateLayer`];
//! - [`exchange`]: one message's exchange with a server in HTTP form, shared by both fronts:
//!   the way to an HTTP server or to a stdio server's child, the answer rules on what comes
//!   back, the rounds, toolgate's own answers;
//! - [`upstream`]: the clients of a tool server (HTTP with its connection list and TLS, and
//!   stdio child processes);
//! - [`stdio`]: the front a desktop client launches, over its pipes;
//! - [`runtime`]: the tricks around client connections, each justified by a measurement in
//!   docs/performance.md;
//! - [`sse`]: the event-stream splitter both directions use.

pub mod edge;
pub(crate) mod exchange;
pub(crate) mod modern;
pub(crate) mod runtime;
pub mod sse;
pub mod stdio;
pub mod upstream;
