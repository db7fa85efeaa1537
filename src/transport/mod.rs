//! Transports: wire traffic in, single JSON-RPC messages to the pipeline, answers out.
//!
//! - [`edge`]: the HTTP server side (routes, the request's phases, answers through the rules,
//!   origin and header rules, the in-process [`edge::layer::ValidateLayer`]);
//! - [`upstream`]: the clients of a tool server (HTTP with its connection list and TLS, and
//!   stdio child processes);
//! - [`stdio`]: the front a desktop client launches, over its pipes;
//! - [`runtime`]: the tricks around client connections, each justified by a measurement in
//!   docs/performance.md;
//! - [`sse`]: the event-stream splitter both directions use.

pub mod edge;
pub(crate) mod modern;
pub(crate) mod runtime;
pub mod sse;
pub mod stdio;
pub mod upstream;
