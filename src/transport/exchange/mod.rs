//! One message's exchange with a server in HTTP form, whichever front it came in by: how it
//! reaches an HTTP server ([`to_http`]) or a stdio server's children ([`to_children`]), how
//! the answer comes back through the answer rules ([`answers`]), the rounds a server of
//! 2026-07-28 asks a handshake-era client ([`asking`]), and toolgate's own answers as
//! responses ([`reply`]). The HTTP edge serves what comes back as it is; the stdio front
//! writes it as lines.

pub(crate) mod answers;
pub(crate) mod asking;
mod note;
mod relayed;
pub(crate) mod reply;
mod resume;
pub(crate) mod subscription;
pub(crate) mod to_children;
pub(crate) mod to_http;

pub(crate) use note::{Note, Said, StreamOutcome};
