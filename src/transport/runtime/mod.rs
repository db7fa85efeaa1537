//! What wraps a client connection rather than a request: the HTTP version it is served in,
//! head and idle timers, polling a connection again in place, and draining at shutdown.

pub(crate) mod conn_timers;
pub(crate) mod drain;
pub(crate) mod repoll;
pub(crate) mod version;
