//! Requests of many clients in one session with a server (the shared stdio child, toolgate's
//! bridged session with a server of the handshake era): each goes under an id of toolgate's,
//! so that two clients' equal ids cannot take each other's answers, and a client's
//! cancellation is read under the id its own request went with.

use crate::jsonrpc;
use crate::locks::MutexExt;
use bytes::Bytes;
use serde_json::value::RawValue;
use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};

/// Who sends a request into a shared session: whose requests its cancellations may name.
#[derive(Clone, Copy)]
pub(crate) enum Owner<'a> {
    /// An authenticated client, by name.
    Named(&'a str),
    /// An anonymous HTTP client, by address.
    At(IpAddr),
    /// The one client of a stdio front.
    Pipe,
}

impl Owner<'_> {
    /// The owner as the table and a pool's sessions know it.
    pub(crate) fn key(self) -> Box<str> {
        match self {
            Owner::Named(name) => format!("client:{name}").into(),
            Owner::At(addr) => format!("addr:{addr}").into(),
            Owner::Pipe => "pipe".into(),
        }
    }
}

/// Who sent a request, and its own id (`jsonrpc::id_key`).
type SentKey = (Box<str>, Box<str>);

/// The requests in flight in one shared session, by who sent them and their own id: the id
/// toolgate sent each under.
#[derive(Default)]
pub(crate) struct Multiplexed(Mutex<HashMap<SentKey, Box<str>>>);

/// A request in flight under toolgate's id; leaving it ends the entry, unless a later
/// request of the same owner under the same id took it over (a client that reuses an id in
/// flight; its cancellations then name the later request).
pub(crate) struct Sent {
    table: Arc<Multiplexed>,
    key: SentKey,
    ours: Box<str>,
}

impl Drop for Sent {
    fn drop(&mut self) {
        let mut table = self.table.0.locked();
        if table.get(&self.key) == Some(&self.ours) {
            table.remove(&self.key);
        }
    }
}

/// A request on its way into the shared session.
pub(crate) struct Entered {
    /// The request under toolgate's id.
    pub(crate) body: Bytes,
    pub(crate) ours: Box<RawValue>,
    /// Its entry in the table, for as long as its answer is awaited.
    pub(crate) sent: Sent,
}

impl Multiplexed {
    /// Notes that `owner`'s request `client_id` (raw JSON) is in flight as `ours`, until the
    /// returned entry is dropped.
    fn sent(self: &Arc<Self>, owner: &str, client_id: &str, ours: &str) -> Sent {
        let key: SentKey = (owner.into(), jsonrpc::id_key(client_id).into());
        self.0.locked().insert(key.clone(), ours.into());
        Sent {
            table: self.clone(),
            key,
            ours: ours.into(),
        }
    }

    /// toolgate's id for `owner`'s request `client_id` in flight.
    pub(crate) fn ours(&self, owner: &str, client_id: &str) -> Option<Box<str>> {
        let key: SentKey = (owner.into(), jsonrpc::id_key(client_id).into());
        self.0.locked().get(&key).cloned()
    }

    /// `owner`'s request `body`, of id `client_id`, under toolgate's id `ours` (minted for
    /// it), noted in the table until the returned entry is dropped.
    pub(crate) fn enter(
        self: &Arc<Self>,
        owner: &str,
        body: Bytes,
        client_id: &RawValue,
        ours: String,
    ) -> Entered {
        let ours = own_id(ours);
        let sent = self.sent(owner, client_id.get(), ours.get());
        let body = jsonrpc::replace_at(&body, &["id"], &ours).map_or(body, Bytes::from);
        Entered { body, ours, sent }
    }
}

/// A client's `notifications/cancelled` (`body`) naming the request it cancels by `ours`,
/// the id that request went with.
pub(crate) fn cancellation(body: &[u8], ours: &str) -> Option<Bytes> {
    let ours = RawValue::from_string(ours.into()).ok()?;
    let body = jsonrpc::replace_at(body, &["params", "requestId"], &ours)?;
    Some(Bytes::from(body))
}

/// `id`, a fresh id of toolgate's, as the JSON string a request carries.
fn own_id(id: String) -> Box<RawValue> {
    RawValue::from_string(serde_json::to_string(&id).expect("a string serializes"))
        .expect("a JSON string")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_is_found_by_its_owner_and_id_until_its_entry_is_dropped() {
        let table = Arc::new(Multiplexed::default());
        let (a, pipe) = (Owner::Named("a").key(), Owner::Pipe.key());
        let sent_a = table.sent(&a, "7", r#""tg-1""#);
        let sent_pipe = table.sent(&pipe, "7", r#""tg-2""#);
        assert_eq!(table.ours(&a, "7").as_deref(), Some(r#""tg-1""#));
        assert_eq!(table.ours(&pipe, "7").as_deref(), Some(r#""tg-2""#));
        assert_eq!(table.ours(&Owner::Named("b").key(), "7"), None);
        drop(sent_a);
        assert_eq!(table.ours(&a, "7"), None);
        drop(sent_pipe);
        assert!(table.0.locked().is_empty());

        // The same id again while the first is in flight: the later one is found, and stays
        // found when the first ends.
        let first = table.sent(&a, "7", r#""tg-3""#);
        let second = table.sent(&a, "7", r#""tg-4""#);
        drop(first);
        assert_eq!(table.ours(&a, "7").as_deref(), Some(r#""tg-4""#));
        drop(second);
        assert!(table.0.locked().is_empty());
    }

    #[test]
    fn a_request_goes_under_toolgates_id_and_its_cancellation_follows_it() {
        let table = Arc::new(Multiplexed::default());
        let owner = Owner::Pipe.key();
        let request = Bytes::from_static(br#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#);
        let seven = RawValue::from_string("7".into()).unwrap();
        let entered = table.enter(&owner, request, &seven, "tg-1".into());
        assert_eq!(entered.ours.get(), r#""tg-1""#);
        let sent: serde_json::Value = serde_json::from_slice(&entered.body).unwrap();
        assert_eq!(sent["id"], "tg-1");

        let ours = table.ours(&owner, "7").unwrap();
        assert_eq!(&*ours, r#""tg-1""#);
        let cancel =
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7}}"#;
        let body = cancellation(cancel, &ours).unwrap();
        let body: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(body["params"]["requestId"], "tg-1");
        assert!(
            table
                .ours(&Owner::At([127, 0, 0, 1].into()).key(), "7")
                .is_none()
        );
        drop(entered);
        assert!(table.ours(&owner, "7").is_none());
    }
}
