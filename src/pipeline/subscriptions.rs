//! `subscriptions/listen` (2026-07-28) served through a server of the handshake era
//! (docs/contract.md §5, "Subscriptions bridged").
//!
//! A 2026-07-28 client hears of changes only on a stream it opens with `subscriptions/listen`,
//! naming what it wants: list changes of tools, prompts or resources, and updates of given
//! resources. A handshake-era server announces them to its session: list changes unasked,
//! a resource's updates once the session sent `resources/subscribe` for it. Bridged, toolgate
//! holds the session, so each of its announcements goes to every stream whose filter holds
//! it, tagged with that stream's subscription id (the `subscriptions/listen` request's id).
//!
//! The rules are written here once; where a server's announcements are heard and how it is
//! asked to subscribe is each kind of server's (`upstream::subscribers`). A stream is
//! acknowledged first (`notifications/subscriptions/acknowledged`) with what toolgate will
//! deliver of what was asked: what the server's capabilities say it announces, less the
//! resources it refused to subscribe to. Like a 2026-07-28 server's, a stream has no replay:
//! one that ends, the client opens again and lists again.

use crate::jsonrpc::{self, footprint};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

pub const LISTEN: &str = "subscriptions/listen";
pub const TOOLS_CHANGED: &str = "notifications/tools/list_changed";
pub const PROMPTS_CHANGED: &str = "notifications/prompts/list_changed";
pub const RESOURCES_CHANGED: &str = "notifications/resources/list_changed";
pub const RESOURCE_UPDATED: &str = "notifications/resources/updated";
const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// Resources one stream may name: each is a `resources/subscribe` toolgate sends the server
/// before the stream is acknowledged.
pub const MAX_RESOURCES: usize = 256;
/// The longest resource URI a stream may name (the length most HTTP software takes a URL
/// to): a stream holds its resources while it lasts, and each session counts them.
const MAX_URI_BYTES: usize = 2 * 1024;
/// The longest announcement a stream carries: a list change is a few dozen bytes, a
/// resource's update its URI more. What a stream holds for a client that reads slowly is
/// bounded by this times the messages it holds (`upstream::subscribers`).
pub const MAX_ANNOUNCEMENT_BYTES: usize = 16 * 1024;

/// Why a handshake-era client's `resources/subscribe` or `resources/unsubscribe` is refused
/// (`-32602`), where toolgate keeps its subscriptions for it (the reverse bridge).
#[derive(Debug, thiserror::Error)]
pub enum BadResource {
    #[error("Invalid params: params.uri must be a string of at most {MAX_URI_BYTES} bytes")]
    Uri,
    #[error(
        "Invalid params: a session may subscribe to at most {MAX_RESOURCES} resources through this gateway"
    )]
    TooMany,
}

impl BadResource {
    /// The resource a subscription request (`bytes`) names, when it is one toolgate keeps.
    pub fn uri_of(bytes: &[u8]) -> Result<Box<str>, BadResource> {
        #[derive(Deserialize)]
        struct Request {
            params: UriParams,
        }
        #[derive(Deserialize)]
        struct UriParams {
            uri: String,
        }
        let uri = (serde_json::from_slice::<Request>(bytes).map_err(|_| BadResource::Uri)?)
            .params
            .uri;
        match uri.len() <= MAX_URI_BYTES {
            true => Ok(uri.into()),
            false => Err(BadResource::Uri),
        }
    }
}

/// Why a `subscriptions/listen` request is refused (`-32602`).
#[derive(Debug, thiserror::Error)]
pub enum BadFilter {
    #[error(
        "Invalid params: subscriptions/listen takes params.notifications, an object of toolsListChanged, promptsListChanged and resourcesListChanged (booleans) and resourceSubscriptions (an array of URIs)"
    )]
    Malformed,
    #[error(
        "Invalid params: a subscriptions/listen stream may name at most {MAX_RESOURCES} resources of at most {MAX_URI_BYTES} bytes each through this gateway"
    )]
    TooMany,
}

/// What a stream asks for, or what toolgate delivers of it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
    /// The resources whose updates it wants, each once.
    pub uris: Vec<Box<str>>,
}

impl Filter {
    /// From a `subscriptions/listen` request (`bytes`). Keys an extension adds are not
    /// delivered, so they are left out of the acknowledgment as the spec asks.
    pub fn of(bytes: &[u8]) -> Result<Filter, BadFilter> {
        #[derive(Deserialize)]
        struct Request {
            params: Params,
        }
        #[derive(Deserialize)]
        struct Params {
            notifications: Asked,
        }
        #[derive(Deserialize)]
        #[serde(rename_all = "camelCase")]
        struct Asked {
            #[serde(default)]
            tools_list_changed: Option<bool>,
            #[serde(default)]
            prompts_list_changed: Option<bool>,
            #[serde(default)]
            resources_list_changed: Option<bool>,
            #[serde(default)]
            resource_subscriptions: Option<Vec<String>>,
        }
        let asked = serde_json::from_slice::<Request>(bytes)
            .map_err(|_| BadFilter::Malformed)?
            .params
            .notifications;
        let mut uris: Vec<Box<str>> = Vec::new();
        for uri in asked.resource_subscriptions.unwrap_or_default() {
            if uri.len() > MAX_URI_BYTES || uris.len() == MAX_RESOURCES {
                return Err(BadFilter::TooMany);
            }
            if !uris.iter().any(|u| **u == *uri) {
                uris.push(uri.into());
            }
        }
        Ok(Filter {
            tools: asked.tools_list_changed == Some(true),
            prompts: asked.prompts_list_changed == Some(true),
            resources: asked.resources_list_changed == Some(true),
            uris,
        })
    }

    /// What of it a server announces, by its `capabilities`: each list's changes where they
    /// say `listChanged`, resources where they say `subscribe`.
    pub fn announced_by(mut self, capabilities: &Value) -> Filter {
        let says = |feature: &str, flag: &str| capabilities[feature][flag] == Value::Bool(true);
        self.tools &= says("tools", "listChanged");
        self.prompts &= says("prompts", "listChanged");
        self.resources &= says("resources", "listChanged");
        if !says("resources", "subscribe") {
            self.uris.clear();
        }
        self
    }

    fn holds(&self, a: &Announcement) -> bool {
        match a.method {
            TOOLS_CHANGED => self.tools,
            PROMPTS_CHANGED => self.prompts,
            RESOURCES_CHANGED => self.resources,
            _ => a
                .uri
                .as_deref()
                .is_some_and(|u| self.uris.iter().any(|h| **h == *u)),
        }
    }

    fn to_json(&self) -> Value {
        let mut f = Map::new();
        let flags = [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ];
        for (name, on) in flags {
            if on {
                f.insert(name.into(), Value::Bool(true));
            }
        }
        if !self.uris.is_empty() {
            let uris = self.uris.iter().map(|u| Value::String(u.to_string()));
            f.insert("resourceSubscriptions".into(), Value::Array(uris.collect()));
        }
        Value::Object(f)
    }
}

/// One stream a 2026-07-28 client opened: its id and what it is delivered.
#[derive(Clone, Debug)]
pub struct Subscription {
    pub id: Box<RawValue>,
    pub filter: Filter,
}

impl PartialEq for Subscription {
    fn eq(&self, other: &Subscription) -> bool {
        self.id.get() == other.id.get() && self.filter == other.filter
    }
}

impl Eq for Subscription {}

impl Subscription {
    /// The stream's first message: what toolgate delivers of what was asked.
    pub fn acknowledgment(&self) -> Vec<u8> {
        let params = json!({"notifications": self.filter.to_json()});
        self.tagged(message(ACKNOWLEDGED, params), "params")
    }

    /// The stream's last message when toolgate ends it on purpose (it shuts down): its
    /// result, which tells the client the stream was closed rather than lost.
    pub fn ended(&self) -> Vec<u8> {
        let result = json!({"resultType": "complete"});
        self.tagged(jsonrpc::result_response(&self.id, &result), "result")
    }

    /// `a` as this stream carries it, when its filter holds it.
    pub fn relayed(&self, a: &Announcement) -> Option<Vec<u8>> {
        if !self.filter.holds(a) {
            return None;
        }
        let mut params = a.params.clone();
        if params.get("_meta").is_some_and(|meta| !meta.is_object()) {
            params.remove("_meta");
        }
        Some(self.tagged(message(a.method, Value::Object(params)), "params"))
    }

    /// `message` (toolgate's own, an object) with this stream's id in the `_meta` of its
    /// member `holder`, as the client wrote it: an id no value holds (`1e400`) too.
    fn tagged(&self, message: Vec<u8>, holder: &str) -> Vec<u8> {
        let path = [holder, "_meta", SUBSCRIPTION_ID];
        jsonrpc::replace_at(&message, &path, &self.id).unwrap_or(message)
    }
}

fn message(method: &str, params: Value) -> Vec<u8> {
    let m = json!({"jsonrpc": "2.0", "method": method, "params": params});
    serde_json::to_vec(&m).expect("serializing a notification cannot fail")
}

/// A server's message that a stream may carry: a list change, or a resource's update.
#[derive(Debug)]
pub struct Announcement {
    method: &'static str,
    params: Map<String, Value>,
    uri: Option<String>,
}

impl Announcement {
    /// `line`, a message a handshake-era server sent its session, when it announces a change
    /// in at most [`MAX_ANNOUNCEMENT_BYTES`].
    pub fn of(line: &[u8]) -> Option<Announcement> {
        if line.len() > MAX_ANNOUNCEMENT_BYTES {
            return None;
        }
        let Ok(jsonrpc::Body::Single(m)) = jsonrpc::parse(line) else {
            return None;
        };
        if m.id.is_some() {
            return None;
        }
        let method = [
            TOOLS_CHANGED,
            PROMPTS_CHANGED,
            RESOURCES_CHANGED,
            RESOURCE_UPDATED,
        ]
        .into_iter()
        .find(|known| m.method() == Some(known))?;
        let params = match m.raw_params() {
            Some(p) if footprint::affordable(p.get()) => serde_json::from_str(p.get()).ok()?,
            Some(_) => return None,
            None => Map::new(),
        };
        let uri = (method == RESOURCE_UPDATED)
            .then(|| params.get("uri")?.as_str().map(str::to_owned))
            .flatten();
        Some(Announcement {
            method,
            params,
            uri,
        })
    }
}

/// toolgate's own `subscriptions/listen` request for `filter`, under its `id`.
pub fn listen_request(id: &str, filter: &Filter) -> Vec<u8> {
    jsonrpc::request(id, LISTEN, &json!({"notifications": filter.to_json()}))
}

/// A message of toolgate's own `subscriptions/listen` stream with a server of 2026-07-28, as
/// a handshake-era client reads what its server sends on its own: the acknowledgment and the
/// stream's end are toolgate's business (`None`), an announcement goes without the stream's
/// id, anything else as it came.
pub fn untagged(line: &[u8]) -> Option<Bytes> {
    let Ok(jsonrpc::Body::Single(m)) = jsonrpc::parse(line) else {
        return Some(Bytes::copy_from_slice(line));
    };
    if m.method.is_none() || m.method() == Some(ACKNOWLEDGED) {
        return None;
    }
    let tagged = m
        .raw_params()
        .filter(|p| crate::text::holds!(p.get(), SUBSCRIPTION_ID))
        .and_then(|p| serde_json::from_str::<Map<String, Value>>(p.get()).ok());
    let Some(mut params) = tagged else {
        return Some(Bytes::copy_from_slice(line));
    };
    if let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.remove(SUBSCRIPTION_ID);
        if meta.is_empty() {
            params.remove("_meta");
        }
    }
    let method = m.method().unwrap_or_default();
    Some(Bytes::from(message(method, Value::Object(params))))
}

/// toolgate's `resources/subscribe` or `resources/unsubscribe` of `uri`, under its own `id`.
pub fn resource_request(subscribe: bool, uri: &str, id: &str) -> Vec<u8> {
    let method = match subscribe {
        true => "resources/subscribe",
        false => "resources/unsubscribe",
    };
    jsonrpc::request(id, method, &json!({"uri": uri}))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(v: Value) -> Box<RawValue> {
        serde_json::value::to_raw_value(&v).unwrap()
    }

    fn listen(notifications: Value) -> Vec<u8> {
        serde_json::to_vec(&json!({"jsonrpc": "2.0", "id": 7, "method": LISTEN,
            "params": {"notifications": notifications}}))
        .unwrap()
    }

    #[test]
    fn a_filter_keeps_what_was_asked_each_resource_once() {
        let f = Filter::of(&listen(
            json!({"toolsListChanged": true, "promptsListChanged": false,
            "resourceSubscriptions": ["a://1", "a://1", "a://2"], "taskIds": ["t"]}),
        ))
        .unwrap();
        assert_eq!(
            f,
            Filter {
                tools: true,
                prompts: false,
                resources: false,
                uris: vec!["a://1".into(), "a://2".into()],
            }
        );
    }

    #[test]
    fn a_followed_streams_messages_reach_a_handshake_client_untagged() {
        let untagged = |line: &str| {
            untagged(line.as_bytes()).map(|b| serde_json::from_slice::<Value>(&b).unwrap())
        };
        let ack = r#"{"jsonrpc":"2.0","method":"notifications/subscriptions/acknowledged","params":{"notifications":{}}}"#;
        assert_eq!(untagged(ack), None);
        assert_eq!(
            untagged(r#"{"jsonrpc":"2.0","id":"t-1","result":{}}"#),
            None
        );
        assert_eq!(
            untagged(
                r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":{"io.modelcontextprotocol/subscriptionId":"t-1"}}}"#
            ),
            Some(json!({"jsonrpc": "2.0", "method": TOOLS_CHANGED, "params": {}}))
        );
        assert_eq!(
            untagged(
                r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"a://1","_meta":{"k":1,"io.modelcontextprotocol/subscriptionId":"t-1"}}}"#
            ),
            Some(json!({"jsonrpc": "2.0", "method": RESOURCE_UPDATED,
                "params": {"uri": "a://1", "_meta": {"k": 1}}}))
        );
        let other =
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}"#;
        assert_eq!(untagged(other), serde_json::from_str(other).ok());
    }

    #[test]
    fn a_filter_that_is_not_one_is_refused() {
        for bad in [
            json!("all"),
            json!({"toolsListChanged": "yes"}),
            json!({"resourceSubscriptions": "a://1"}),
        ] {
            assert!(matches!(
                Filter::of(&listen(bad)),
                Err(BadFilter::Malformed)
            ));
        }
        let no_params = br#"{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen"}"#;
        assert!(matches!(Filter::of(no_params), Err(BadFilter::Malformed)));
        let many: Vec<String> = (0..=MAX_RESOURCES).map(|i| format!("a://{i}")).collect();
        let too_many = listen(json!({ "resourceSubscriptions": many }));
        assert!(matches!(Filter::of(&too_many), Err(BadFilter::TooMany)));
        let long = listen(json!({ "resourceSubscriptions": ["a".repeat(MAX_URI_BYTES + 1)] }));
        assert!(matches!(Filter::of(&long), Err(BadFilter::TooMany)));
    }

    #[test]
    fn what_is_delivered_is_what_the_server_announces() {
        let asked = Filter {
            tools: true,
            prompts: true,
            resources: true,
            uris: vec!["a://1".into()],
        };
        let caps = json!({"tools": {"listChanged": true}, "prompts": {},
            "resources": {"listChanged": true}});
        let delivered = asked.clone().announced_by(&caps);
        assert_eq!(
            delivered,
            Filter {
                tools: true,
                prompts: false,
                resources: true,
                uris: vec![],
            }
        );
        let subscribes = json!({"resources": {"subscribe": true}});
        assert_eq!(
            asked.announced_by(&subscribes).uris,
            vec![Box::<str>::from("a://1")]
        );
    }

    #[test]
    fn a_stream_is_acknowledged_then_carries_what_its_filter_holds_tagged() {
        let s = Subscription {
            id: raw(json!("l-1")),
            filter: Filter {
                tools: true,
                uris: vec!["a://1".into()],
                ..Filter::default()
            },
        };
        let ack: Value = serde_json::from_slice(&s.acknowledgment()).unwrap();
        assert_eq!(
            ack,
            json!({"jsonrpc": "2.0", "method": ACKNOWLEDGED, "params": {
                "notifications": {"toolsListChanged": true, "resourceSubscriptions": ["a://1"]},
                "_meta": {SUBSCRIPTION_ID: "l-1"}}})
        );
        assert_eq!(
            serde_json::from_slice::<Value>(&s.ended()).unwrap(),
            json!({"jsonrpc": "2.0", "id": "l-1",
                "result": {"_meta": {SUBSCRIPTION_ID: "l-1"}, "resultType": "complete"}})
        );
        let relayed = |line: &str| {
            let a = Announcement::of(line.as_bytes())?;
            serde_json::from_slice::<Value>(&s.relayed(&a)?).ok()
        };
        assert_eq!(
            relayed(r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#),
            Some(json!({"jsonrpc": "2.0", "method": TOOLS_CHANGED,
                "params": {"_meta": {SUBSCRIPTION_ID: "l-1"}}}))
        );
        assert_eq!(
            relayed(
                r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"a://1","_meta":{"k":1}}}"#
            ),
            Some(json!({"jsonrpc": "2.0", "method": RESOURCE_UPDATED,
                "params": {"uri": "a://1", "_meta": {"k": 1, SUBSCRIPTION_ID: "l-1"}}}))
        );
        // The server's own tag is the stream's, and a `_meta` that is no object gives way.
        assert_eq!(
            relayed(
                r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"a://1","_meta":{"io.modelcontextprotocol/subscriptionId":"s-9"}}}"#
            ),
            Some(json!({"jsonrpc": "2.0", "method": RESOURCE_UPDATED,
                "params": {"uri": "a://1", "_meta": {SUBSCRIPTION_ID: "l-1"}}}))
        );
        assert_eq!(
            relayed(
                r#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed","params":{"_meta":5}}"#
            ),
            Some(json!({"jsonrpc": "2.0", "method": TOOLS_CHANGED,
                "params": {"_meta": {SUBSCRIPTION_ID: "l-1"}}}))
        );
        // An id as its client wrote it, one no value holds too.
        let past = Subscription {
            id: RawValue::from_string("1e400".into()).unwrap(),
            filter: Filter::default(),
        };
        let ended = String::from_utf8(past.ended()).unwrap();
        assert_eq!(
            ended,
            r#"{"jsonrpc":"2.0","id":1e400,"result":{"_meta":{"io.modelcontextprotocol/subscriptionId":1e400},"resultType":"complete"}}"#
        );
        assert!(
            String::from_utf8(past.acknowledgment())
                .unwrap()
                .contains(r#"{"io.modelcontextprotocol/subscriptionId":1e400}"#)
        );
        let long = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{{"uri":"a://1","x":"{}"}}}}"#,
            "x".repeat(MAX_ANNOUNCEMENT_BYTES)
        );
        for not_held in [
            long.as_str(),
            r#"{"jsonrpc":"2.0","method":"notifications/resources/updated","params":{"uri":"a://2"}}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/prompts/list_changed"}"#,
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info"}}"#,
            r#"{"jsonrpc":"2.0","id":1,"method":"notifications/tools/list_changed"}"#,
        ] {
            assert_eq!(relayed(not_held), None, "{not_held}");
        }
    }
}
