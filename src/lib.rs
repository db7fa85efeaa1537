//! toolgate: a validating gateway in front of MCP tool servers.
//!
//! It checks every `tools/call` against the schema the server advertised, answers bad calls
//! itself with an error a model can act on (SEP-1303), and passes everything else through
//! untouched. `docs/contract.md` is the contract; each module names the rule it owns.
#![forbid(unsafe_code)]

pub mod admin;
pub mod auth;
pub mod catalog;
pub mod check;
pub mod config;
#[cfg(feature = "demo")]
pub mod demo;
pub mod error;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
pub mod gateway;
pub mod jsonrpc;
mod locks;
pub mod logwriter;
pub mod mcp;
pub mod metrics;
pub mod net;
pub mod pipeline;
pub mod policy;
pub mod telemetry;
pub mod text;
pub(crate) mod thread_slot;
pub mod transport;
pub mod validate;

pub use gateway::Gateway;
pub use transport::edge::layer::{ClientName, Validate, ValidateLayer};
pub use transport::edge::{App, serve};
