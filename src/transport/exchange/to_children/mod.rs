//! How a message reaches a stdio server's children and is answered in HTTP form (`toolgate
//! serve -- CMD`, the sidecar case).
//!
//! Sessions are toolgate's: `initialize` without a session starts a child and mints the id,
//! and the session's requests are answered as one JSON message each, through the same
//! pipeline as any other; a session's GET is an SSE stream of what its child sends on its own.
//! Requests without a session (every 2026-07-28 request) go to a shared child per era with
//! their ids and progress tokens remapped, so concurrent clients cannot collide. A request
//! that will hear from the child before its answer (a progress token, `subscriptions/listen`
//! on the shared child) is answered, in a session or not, as an SSE stream of those messages,
//! then the answer (docs/contract.md, section 7). The stdio front's one child is reached the
//! same way ([`ChildWay::pipe`]).

mod session_stream;
mod streamed;
mod way;
mod written;

pub(crate) use session_stream::bodiless;
pub(crate) use way::{ChildWay, ToChildren};
pub(crate) use written::ChildReply;
