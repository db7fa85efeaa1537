//! What a bridged request's answer carries, message by message, read the same by every
//! front: a question the server asks before it answers (toolgate's session with a server of
//! the handshake era, `upstream::rounds`), an answer that asks for input (a server of
//! 2026-07-28 and a handshake-era client, `pipeline::asked`), or a message for the client,
//! under the id the client knows.

use super::{asked, bridge};
use bytes::Bytes;
use serde_json::value::RawValue;

/// How a request's answer is read, for the bridges.
pub(crate) struct Carrying<'a> {
    /// The server may ask the client a question first: a 2026-07-28 client's call through
    /// toolgate's session with a handshake server.
    pub(crate) asks: bool,
    /// An answer that asks for input is held for its rounds: a handshake-era client's
    /// request to a 2026-07-28 server.
    pub(crate) holds_rounds: bool,
    /// On a round's retry: the id the server answers under, and the retry's own.
    pub(crate) renumber: Option<(&'a RawValue, &'a RawValue)>,
}

/// One message of the answer, as the client is to be given it.
pub(crate) enum Carried {
    /// The server asks the client something: the call is answered with a round.
    Question(bridge::Question),
    /// The server's answer asks for input: held, for the rounds.
    InputRequired,
    /// The answer under the client's id, where it was renumbered.
    Renumbered(Bytes),
    /// Anything else: as it came.
    AsItCame,
}

/// What `data`, one message of the answer, carries.
pub(crate) fn carried(data: &[u8], how: &Carrying<'_>) -> Carried {
    if how.asks
        && let Some(q) = bridge::question(data)
    {
        return Carried::Question(q);
    }
    if how.holds_rounds && asked::input_required(data).is_some() {
        return Carried::InputRequired;
    }
    match how
        .renumber
        .and_then(|(from, to)| bridge::renumbered(data, from, to))
    {
        Some(renumbered) => Carried::Renumbered(renumbered),
        None => Carried::AsItCame,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(s: &str) -> Box<RawValue> {
        RawValue::from_string(s.into()).unwrap()
    }

    #[test]
    fn each_bridge_reads_only_what_it_needs() {
        let question = br#"{"jsonrpc":"2.0","id":"q1","method":"roots/list"}"#;
        let asks = br#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required","inputRequests":{}}}"#;
        let answer = br#"{"jsonrpc":"2.0","id":"t-7","result":{}}"#;
        let (from, to) = (raw(r#""t-7""#), raw("3"));
        let none = Carrying {
            asks: false,
            holds_rounds: false,
            renumber: None,
        };
        for data in [&question[..], &asks[..], &answer[..]] {
            assert!(matches!(carried(data, &none), Carried::AsItCame));
        }
        let bridged = Carrying {
            asks: true,
            holds_rounds: false,
            renumber: Some((&from, &to)),
        };
        assert!(
            matches!(carried(question, &bridged), Carried::Question(q) if q.method == "roots/list")
        );
        match carried(answer, &bridged) {
            Carried::Renumbered(b) => {
                assert_eq!(&b[..], br#"{"jsonrpc":"2.0","id":3,"result":{}}"#)
            }
            _ => panic!("the answer is renumbered"),
        }
        let reverse = Carrying {
            asks: false,
            holds_rounds: true,
            renumber: None,
        };
        assert!(matches!(carried(asks, &reverse), Carried::InputRequired));
        assert!(matches!(carried(question, &reverse), Carried::AsItCame));
    }
}
