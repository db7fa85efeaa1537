//! toolgate: a validating gateway in front of MCP tool servers.
//!
//! It checks every `tools/call` against the schema the server advertised, answers bad calls
//! itself with an error a model can act on (SEP-1303), and passes everything else through
//! untouched. `docs/contract.md` is the contract; each module names the rule it owns.
#![forbid(unsafe_code)]

pub(crate) mod admin;
pub(crate) mod auth;
pub(crate) mod catalog;
pub mod config;
/// The example tool server, which is the binary's (`toolgate demo`); the library carries it
/// only for the tests and benchmarks that run it in process.
#[cfg(feature = "demo")]
#[path = "cli/demo.rs"]
pub mod demo;
pub(crate) mod error;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub(crate) mod gateway;
pub mod inspect;
pub(crate) mod jsonrpc;
mod kept_timer;
mod locks;
pub(crate) mod logformat;
pub(crate) mod lograte;
pub(crate) mod logwriter;
pub(crate) mod mcp;
pub(crate) mod metrics;
pub(crate) mod net;
pub(crate) mod pipeline;
pub(crate) mod policy;
mod self_wake;
pub(crate) mod tasks;
pub(crate) mod telemetry;
pub(crate) mod text;
pub(crate) mod thread_slot;
pub(crate) mod transport;
pub(crate) mod validate;

pub use admin::{router as admin_router, serve as serve_admin};
pub use gateway::{Gateway, Live};
pub use logformat::JsonLines;
pub use logwriter::{NonBlocking, drain as drain_logs};
pub use transport::edge::layer::{AppMcp, ClientName, Validate, ValidateLayer};
pub use transport::edge::{App, Edge, serve};
pub use transport::stdio::over_http::run as stdio_over_http;
pub use transport::stdio::to_child::run as stdio_to_child;

/// What keeps the binary's stdio servers from outliving it (`transport::upstream::group_keeper`)
/// and starts them with the descriptor limit it was started with (`transport::upstream::launch`).
#[doc(hidden)]
pub mod binary {
    pub use crate::transport::upstream::group_keeper::{
        KEEP_GROUP, keep_group, servers_end_with_this_process,
    };
    pub use crate::transport::upstream::launch::{
        RESTORE_LIMIT, restore_limit, servers_start_with_descriptor_limit,
    };
}

/// What the benchmarks measure of the input boundary, without the gateway around it.
#[doc(hidden)]
pub mod bench {
    pub use crate::catalog::{CompileSettings, compile};
    pub use crate::jsonrpc::arguments::Arguments;
    pub use crate::jsonrpc::parse_arguments;
    pub use crate::validate::{Judge, Verdict, check};
}
