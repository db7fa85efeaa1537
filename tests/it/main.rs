//! Every black-box test, in one binary: one build and one link instead of one per file, and
//! the peers (Node, Python, the MCP servers) found or installed once per run. Each module is
//! one area; `docs/testing.md` says what each shows.

mod common;

mod auth;
mod bridge;
mod canon;
mod cli;
mod conformance;
mod deploy;
mod fuzz_replay;
mod gateway;
mod hardening;
mod hostile;
mod interop;
mod interop_table;
mod library;
mod load;
mod modern;
mod ops;
mod parity;
mod proxy;
mod recovery;
mod reload;
mod schemas;
mod shared_limits;
mod sidecar;
mod stdio;
mod telemetry;
mod tls;
