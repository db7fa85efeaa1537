//! Clients of a tool server: Streamable HTTP (with its kept connections and TLS) and stdio
//! child processes, one per session or shared.

pub(crate) mod announced;
pub mod child;
pub(crate) mod child_questions;
pub mod children;
pub mod event_stream;
pub(crate) mod group_keeper;
pub mod http_bridge;
pub mod http_client;
pub(crate) mod input;
pub(crate) mod launch;
pub(crate) mod multiplex;
pub(crate) mod numbered;
pub(crate) mod owing;
pub(crate) mod own;
pub(crate) mod paced;
pub(crate) mod restarts;
pub(crate) mod rounds;
pub(crate) mod session_stream;
pub(crate) mod subscribers;
