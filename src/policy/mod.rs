//! What the operator allows, independent of any message's path: which clients may see and call
//! which tools and how often ([`clients`], with the buckets [`shared`] by every replica), the
//! rules on arguments beyond the advertised schema ([`rules`]), which origins and hosts may
//! reach the listener at all ([`origin`]), whose a session is ([`sessions`]), and how many
//! bytes of requests the HTTP front holds at once ([`held`]). The gateway holds them per
//! configuration; the pipeline and the edge apply them.

pub mod clients;
pub(crate) mod held;
pub mod origin;
pub mod rules;
pub mod sessions;
pub mod shared;
