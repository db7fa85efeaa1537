//! Sessions bound to the identity that opened them. With authentication, the session id a
//! client is given is the server's (or toolgate's) id sealed with the client's name: the id,
//! a dot, and an HMAC-SHA256 of both under a key of this process. A request naming a session
//! another identity opened, or a sealed id altered, does not open, and the client is told the
//! session is not found, as for an id no server knows. Nothing is stored per session, so
//! nothing grows with the sessions clients open, and nothing can be evicted to unbind one.
//!
//! Caveats: the key lives as long as the process (reloads keep it), so a restart ends every
//! bound session (clients open new ones, as after a server restart); replicas behind one
//! address need sticky sessions anyway, since each server holds its own sessions.

use ring::hmac;

/// The key sessions are sealed with.
pub struct SessionSeal(hmac::Key);

impl SessionSeal {
    pub fn new() -> SessionSeal {
        let rng = ring::rand::SystemRandom::new();
        let key = hmac::Key::generate(hmac::HMAC_SHA256, &rng).expect("the system's randomness");
        SessionSeal(key)
    }

    /// The id `client` is given for the session `id`.
    pub fn seal(&self, client: &str, id: &str) -> String {
        let tag = hmac::sign(&self.0, &Self::message(client, id));
        let mut sealed = String::with_capacity(id.len() + 65);
        sealed.push_str(id);
        sealed.push('.');
        for b in tag.as_ref() {
            sealed.push_str(&format!("{b:02x}"));
        }
        sealed
    }

    /// The session id inside `sealed`, when `client` is who it was sealed for.
    pub fn open<'a>(&self, client: &str, sealed: &'a str) -> Option<&'a str> {
        let (id, tag) = sealed.rsplit_once('.')?;
        let tag = decode_hex(tag)?;
        hmac::verify(&self.0, &Self::message(client, id), &tag).ok()?;
        Some(id)
    }

    /// The name and the id, apart: a name cannot hold a NUL, so no pair reads as another.
    fn message(client: &str, id: &str) -> Vec<u8> {
        [client.as_bytes(), &[0], id.as_bytes()].concat()
    }
}

impl Default for SessionSeal {
    fn default() -> Self {
        SessionSeal::new()
    }
}

fn decode_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() != 64 || !s.is_ascii() {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_opens_only_for_the_identity_it_was_sealed_for() {
        let seal = SessionSeal::new();
        let sealed = seal.seal("alice", "s.1");
        assert_eq!(seal.open("alice", &sealed), Some("s.1"));
        assert_eq!(seal.open("bob", &sealed), None);
        assert_eq!(seal.open("alice", "s.1"), None);
        let mut altered = sealed.clone();
        altered.replace_range(0..1, "t");
        assert_eq!(seal.open("alice", &altered), None);
        assert_eq!(SessionSeal::new().open("alice", &sealed), None);
    }
}
