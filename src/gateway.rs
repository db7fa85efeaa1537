//! The state every transport shares: configuration, the schema catalog, the upstreams'
//! resolved policies, and the ids toolgate mints. Holds nothing another replica would need:
//! losing it loses a cache.

use crate::auth::Authenticator;
use crate::catalog::{Catalog, CompileSettings, ScopeKey};
use crate::config::{Config, ConfigError, UpstreamTransport, Validation};
use crate::metrics::Metrics;
use crate::policy::clients::{Client, ClientRules, RateLimiter};
use crate::policy::held::ByteBudget;
use crate::policy::origin::OriginPolicy;
use crate::policy::rules::ToolRules;
use arc_swap::ArcSwap;
use std::collections::HashMap;
use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// One upstream as the rules see it: its name, where it is, and its resolved policy.
pub struct Target {
    pub name: Arc<str>,
    /// Its position among the gateway's targets: the upstream part of its catalog keys.
    pub index: u32,
    /// The path clients use (`/mcp` or `/<name>/mcp`).
    pub path: String,
    /// Empty for a stdio upstream.
    pub url: String,
    /// The transport the server at `url` speaks.
    pub transport: crate::config::UpstreamTransport,
    /// The stdio server to launch, when there is no URL.
    pub command: Vec<String>,
    /// The variables of toolgate's environment that stdio server alone is given.
    pub upstream_env: Vec<String>,
    /// TLS to an `https://` URL.
    pub tls: crate::config::UpstreamTls,
    /// What it gets in place of a client's token (`auth.upstream_header` for the server on
    /// `/mcp`, each of `[[upstreams]]` its own), its secret read at load.
    pub credential: Option<crate::auth::UpstreamCredential>,
    pub validation: Validation,
    /// The `[limits]` it is held to: the global ones, with a named server's own.
    pub limits: crate::config::Limits,
    /// The `[stdio]` bounds its children are held to, likewise.
    pub stdio: crate::config::StdioLimits,
    rules: HashMap<String, ToolRules>,
    /// Its series in the metrics every message counts in, found once.
    pub series: crate::metrics::UpstreamSeries,
    /// What the log has said of its requests that got no usable answer.
    pub failures: crate::error::FailureLog,
    /// How often the log says what its server can repeat with every request or session: an
    /// answer toolgate could not read (a listing) or passed on unread (over a limit), a
    /// stdio child that exited on its own.
    pub(crate) repeats: crate::lograte::LogRate,
    /// Its server has numbered the events of a request's stream, which it may then end
    /// before the answer: its requests keep what asking for the stream again takes
    /// (`exchange::resume`).
    numbers_streams: AtomicBool,
}

impl Target {
    /// `applied`: the configuration as it applies to this server (the global one, or a named
    /// server's `NamedUpstream::applied`), whose TLS, validation and limits it keeps.
    fn new(
        name: &str,
        path: String,
        url: String,
        applied: &Config,
        catalog: &Catalog,
    ) -> Result<Target, ConfigError> {
        let mut rules = HashMap::new();
        for (tool, policy) in &applied.validation.tools {
            if let Some(r) = ToolRules::from_policy(policy, catalog)
                .map_err(|e| ConfigError(format!("upstream {name}, tool {tool}: {e}")))?
            {
                rules.insert(tool.clone(), r);
            }
        }
        let name: Arc<str> = name.into();
        Ok(Target {
            series: crate::metrics::UpstreamSeries::new(name.clone()),
            name,
            index: 0,
            path,
            url,
            transport: applied.upstream_transport,
            command: Vec::new(),
            upstream_env: Vec::new(),
            tls: applied.upstream_tls.clone(),
            credential: None,
            validation: applied.validation.clone(),
            limits: applied.limits.clone(),
            stdio: applied.stdio.clone(),
            rules,
            failures: Default::default(),
            repeats: Default::default(),
            numbers_streams: Default::default(),
        })
    }

    /// Whether its server has numbered the events of a request's stream.
    pub(crate) fn numbers_streams(&self) -> bool {
        self.numbers_streams.load(Ordering::Relaxed)
    }

    /// Its server numbered the events of a request's stream.
    pub(crate) fn numbered_a_stream(&self) {
        if !self.numbers_streams() {
            self.numbers_streams.store(true, Ordering::Relaxed);
        }
    }

    /// Operator rules for a tool beyond its advertised schema, if any.
    pub fn rules(&self, tool: &str) -> Option<&ToolRules> {
        self.rules.get(tool)
    }
}

pub struct Gateway {
    pub config: Config,
    pub catalog: Arc<Catalog>,
    pub metrics: Arc<Metrics>,
    /// With authentication, each session is bound to the identity that opened it; the key
    /// lives as long as the process.
    pub sessions: Arc<crate::policy::sessions::SessionSeal>,
    pub targets: Vec<Arc<Target>>,
    pub origins: OriginPolicy,
    /// The same rules for the admin listener: `/metrics` read through DNS rebinding would
    /// tell a foreign page every tool name and client.
    pub admin_origins: OriginPolicy,
    /// `None`: authentication is off and credentials pass through untouched.
    pub auth: Option<Authenticator>,
    /// `[clients]`, by identity; `"*"` for any other.
    clients: HashMap<String, Arc<ClientRules>>,
    /// Kept across reloads, so a reload does not refill every bucket.
    pub limiter: Arc<RateLimiter>,
    /// The tool of each task a call started, kept across reloads as the tasks are.
    pub tasks: Arc<crate::tasks::Tasks>,
    /// The bytes of request bodies held at once, and apart those of the answers read whole,
    /// kept across reloads: what requests hold stays counted when a reload changes the bound.
    /// Apart, so that an answer never waits for room that its own request's body holds.
    pub(crate) body_bytes: Arc<ByteBudget>,
    pub(crate) answer_bytes: Arc<ByteBudget>,
    /// Trace export, when an OTLP endpoint is configured; made once per process.
    pub telemetry: Option<Arc<crate::telemetry::Telemetry>>,
    /// The replicas' shared buckets, when `[shared_state]` names a Redis.
    pub shared: Option<Arc<crate::policy::shared::SharedLimiter>>,
    anonymous: Arc<str>,
    /// Keys scope hashes of credentials, so catalogs never hold a token as it came.
    hasher: RandomState,
    ids: Arc<Ids>,
}

/// An id toolgate minted: its prefix (25 bytes), a dash and up to 20 digits.
const ID_TEXT_MAX: usize = 48;

/// A minted id's text, held in place.
pub(crate) struct IdText {
    text: [u8; ID_TEXT_MAX],
    len: usize,
}

impl IdText {
    pub(crate) fn as_str(&self) -> &str {
        // Only ASCII is written into it.
        std::str::from_utf8(&self.text[..self.len]).unwrap_or_default()
    }
}

impl AsRef<[u8]> for IdText {
    fn as_ref(&self) -> &[u8] {
        &self.text[..self.len]
    }
}

/// Ids toolgate mints carry a random per-process prefix, so they cannot collide with a
/// client's; a reload keeps the sequence going.
struct Ids {
    prefix: String,
    seq: AtomicU64,
    /// Tells this sequence's blocks from another's in a thread's cache (an address could be
    /// reused after a drop).
    serial: u64,
}

/// Numbers a thread takes from [`Ids::seq`] at a time: one shared increment per block
/// rather than per request, which would pass the counter's cache line between cores.
const ID_BLOCK: u64 = 256;

impl Ids {
    fn new(prefix: String) -> Ids {
        // From 1: a thread's empty cache names serial 0.
        static SERIALS: AtomicU64 = AtomicU64::new(1);
        Ids {
            prefix,
            seq: AtomicU64::new(0),
            serial: SERIALS.fetch_add(1, Ordering::Relaxed),
        }
    }

    fn next(&self) -> u64 {
        thread_local! {
            /// (whose block, next number, end of the block)
            static BLOCK: std::cell::Cell<(u64, u64, u64)> = const { std::cell::Cell::new((0, 0, 0)) };
        }
        let me = self.serial;
        BLOCK.with(|b| {
            let (owner, mut next, mut end) = b.get();
            if owner != me || next == end {
                next = self.seq.fetch_add(ID_BLOCK, Ordering::Relaxed);
                end = next + ID_BLOCK;
            }
            b.set((me, next + 1, end));
            next
        })
    }
}

impl Gateway {
    pub fn new(config: Config) -> Result<Arc<Gateway>, ConfigError> {
        Gateway::build(config, None, Identities::Authenticated)
    }

    /// The gateway behind a stdio pipe, whose one client launched toolgate: a server's
    /// credential (`auth.upstream_header`) is sent without `[auth]` in front of it, since no
    /// other client can borrow it.
    pub fn for_pipe(config: Config) -> Result<Arc<Gateway>, ConfigError> {
        Gateway::build(config, None, Identities::Launcher)
    }

    /// The gateway inside an application, whose own authentication names its clients
    /// (`ClientName`): `[clients.NAME]` rules apply without `[auth]`.
    pub(crate) fn in_process(config: Config) -> Result<Arc<Gateway>, ConfigError> {
        Gateway::build(config, None, Identities::Vouched)
    }

    /// The gateway a reload installs: the new rules, with the counters, ids, scope keys and
    /// (unless schema compilation changed) the learned catalogs of this one, so no session
    /// notices. What cannot change without a restart is refused, and this one stays.
    pub fn reloaded(&self, config: Config) -> Result<Arc<Gateway>, ConfigError> {
        let old = &self.config;
        let mut fixed = Vec::new();
        if old.listen != config.listen {
            fixed.push("listen");
        }
        if old.admin_listen != config.admin_listen {
            fixed.push("admin_listen");
        }
        if old.upstream != config.upstream
            || old.upstream_transport != config.upstream_transport
            || old.command != config.command
        {
            fixed.push("upstream/upstream_transport/command");
        }
        type Named<'a> = (&'a str, Option<&'a str>, &'a [String], UpstreamTransport);
        fn names(c: &Config) -> Vec<Named<'_>> {
            (c.upstreams.iter())
                .map(|u| {
                    (
                        u.name.as_str(),
                        u.url.as_deref(),
                        u.command.as_slice(),
                        u.transport,
                    )
                })
                .collect()
        }
        if names(old) != names(&config) {
            fixed.push("upstreams (names, URLs, transports and commands)");
        }
        // The files they name are read again when they change; which files, only at start.
        let tls = |c: &Config| -> Vec<Option<crate::config::UpstreamTls>> {
            c.upstreams.iter().map(|u| u.tls.clone()).collect()
        };
        if old.upstream_tls != config.upstream_tls || tls(old) != tls(&config) {
            fixed.push("upstream_tls / upstreams' tls");
        }
        if old.telemetry != config.telemetry {
            fixed.push("telemetry");
        }
        if old.tls != config.tls {
            fixed.push("tls (which files; their contents are read again when they change)");
        }
        if old.log.level != config.log.level || old.log.format != config.log.format {
            fixed.push("log.level/log.format");
        }
        if !fixed.is_empty() {
            return Err(ConfigError(format!(
                "{} changed; these take effect only on a restart",
                fixed.join(", ")
            )));
        }
        Gateway::build(config, Some(self), Identities::Authenticated)
    }

    fn build(
        config: Config,
        previous: Option<&Gateway>,
        identities: Identities,
    ) -> Result<Arc<Gateway>, ConfigError> {
        config.check()?;
        let catalog = catalog(&config, previous);
        let targets = targets(&config, &catalog)?;
        let auth = Authenticator::from_config(&config, previous.and_then(|p| p.auth.as_ref()))?;
        if auth.is_none()
            && identities != Identities::Launcher
            && let Some(key) = crate::auth::credential_keys(&config).next()
        {
            return Err(ConfigError(format!(
                "{key} replaces the client's token, so it needs auth.tokens or auth.jwt"
            )));
        }
        let named = auth.is_some() || identities == Identities::Vouched;
        let clients = clients(&config, named)?;
        servers_reached(&config, auth.is_some(), &targets)?;
        let Carried {
            hasher,
            ids,
            metrics,
            limiter,
            sessions,
            tasks,
        } = Carried::from(previous);
        let shared = shared(&config, previous)?;
        let telemetry = match previous {
            Some(p) => p.telemetry.clone(),
            None => crate::telemetry::Telemetry::start(&config.telemetry)?,
        };
        let (body_bytes, answer_bytes) = byte_budgets(&config, previous);
        Ok(Arc::new(Gateway {
            telemetry,
            shared,
            body_bytes,
            answer_bytes,
            catalog,
            metrics,
            targets,
            origins: OriginPolicy::new(&config.allowed_origins, config.listen.ip().is_loopback()),
            admin_origins: admin_origins(&config),
            auth,
            clients,
            limiter,
            tasks,
            anonymous: Arc::from("(anonymous)"),
            sessions,
            hasher,
            ids,
            config,
        }))
    }

    /// The client a request comes from, with the rules that apply to it; `None` when there
    /// is neither an identity nor a rule for anyone.
    pub fn client(&self, identity: Option<Arc<str>>) -> Option<Client> {
        let rules = self.rules_of(identity.as_deref()).cloned();
        if rules.is_none() && identity.is_none() {
            return None;
        }
        Some(Client {
            name: identity.unwrap_or_else(|| self.anonymous.clone()),
            rules,
        })
    }

    /// The `[clients]` rules of `identity`, else those of `"*"`.
    pub(crate) fn rules_of(&self, identity: Option<&str>) -> Option<&Arc<ClientRules>> {
        identity
            .and_then(|n| self.clients.get(n))
            .or_else(|| self.clients.get("*"))
    }

    /// A fresh id for a message toolgate sends or writes on its own behalf.
    pub fn next_id(&self) -> String {
        self.next_id_text().as_str().to_owned()
    }

    /// [`Self::next_id`] written in place, for an id that becomes a header value: made into
    /// `Bytes` as it is (one allocation), where a `String` would take one and its first
    /// clone as a header value another.
    pub(crate) fn next_id_text(&self) -> IdText {
        // Written by hand: `format!` costs more than the rest of minting a request id.
        let mut n = self.ids.next();
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        let mut id = IdText {
            text: [0; ID_TEXT_MAX],
            len: 0,
        };
        for part in [self.ids.prefix.as_bytes(), b"-", &digits[at..]] {
            id.text[id.len..id.len + part.len()].copy_from_slice(part);
            id.len += part.len();
        }
        id
    }

    /// The name of the upstream a catalog key belongs to, for logs.
    pub fn upstream_name(&self, key: &ScopeKey) -> &str {
        self.targets
            .get(key.upstream as usize)
            .map_or("?", |t| &t.name)
    }

    /// Which catalog a request reads: its session's, or (stateless) its credential's, given
    /// as each header a client's credential travels in and its value
    /// (`auth::CLIENT_CREDENTIALS`): two credentials never share a scope, whatever header
    /// carries them, and none is held as it came.
    pub fn scope<'a>(
        &self,
        target: &Target,
        session: Option<&[u8]>,
        credential: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> ScopeKey {
        let context = match session {
            Some(s) => self.keyed(b's', s),
            None => self.credential_keyed(credential),
        };
        ScopeKey {
            upstream: target.index,
            context,
        }
    }
}

impl Gateway {
    /// The keyed hash of `tag` and then `bytes`. Written as two pieces, not as a tuple, whose
    /// hash writes the slice's length too: the tag comes first and the slice runs to the
    /// end, so no two inputs read alike, and a call hashes about 0.1k instructions less.
    fn keyed(&self, tag: u8, bytes: &[u8]) -> u64 {
        let mut h = self.hasher.build_hasher();
        h.write_u8(tag);
        h.write(bytes);
        h.finish()
    }

    /// The keyed hash of a credential's headers, each name and value with its length; 0
    /// (the public scope) for none.
    fn credential_keyed<'a>(
        &self,
        credential: impl IntoIterator<Item = (&'a str, &'a [u8])>,
    ) -> u64 {
        let mut credential = credential.into_iter().peekable();
        if credential.peek().is_none() {
            return 0;
        }
        let mut h = self.hasher.build_hasher();
        h.write_u8(b'c');
        for (name, value) in credential {
            h.write_usize(name.len());
            h.write(name.as_bytes());
            h.write_usize(value.len());
            h.write(value);
        }
        h.finish()
    }

    /// A scope within `key`'s, for what `extra` distinguishes there (a 2026-07-28 client's
    /// capabilities, which decide what a server of the handshake era lists for it).
    pub(crate) fn narrower(&self, key: ScopeKey, extra: &[u8]) -> ScopeKey {
        ScopeKey {
            upstream: key.upstream,
            context: self.hasher.hash_one((key.context, extra)),
        }
    }
}

/// The gateway's targets, in their stable positions: the one `upstream` (or `command`) and
/// each of `[[upstreams]]`.
fn targets(config: &Config, catalog: &Arc<Catalog>) -> Result<Vec<Arc<Target>>, ConfigError> {
    let mut targets = Vec::new();
    if let Some(url) = &config.upstream {
        let mut t = Target::new("default", "/mcp".into(), url.clone(), config, catalog)?;
        t.credential = crate::auth::upstream_credential(&config.auth)?;
        targets.push(t);
    } else if config.auth.upstream_header.is_some() {
        return Err(ConfigError(
            "auth.upstream_header is the credential of the HTTP server on /mcp (upstream), and there is none; give each of [[upstreams]] its own upstream_header".into(),
        ));
    } else if config.upstream_transport != UpstreamTransport::default() {
        return Err(ConfigError(
            "upstream_transport is the transport of the HTTP server on /mcp (upstream), and there is none; a stdio server (command) speaks stdio, and each of [[upstreams]] has its own transport".into(),
        ));
    }
    let has_default = config.upstream.is_some() || !config.command.is_empty();
    for u in &config.upstreams {
        if has_default && u.name == "default" {
            // Metrics, logs and `/readyz` name the server on `/mcp` so.
            return Err(ConfigError(
                "upstreams \"default\": the server on /mcp has that name; give this one another"
                    .into(),
            ));
        }
        let (url, own) = (u.url.clone().unwrap_or_default(), u.applied(config));
        let mut t = Target::new(&u.name, format!("/{}/mcp", u.name), url, &own, catalog)?;
        t.command = u.command.clone();
        t.upstream_env = u.upstream_env.clone();
        if let Some(h) = &u.upstream_header {
            let key = format!("upstreams {:?}: upstream_header", u.name);
            t.credential = Some(crate::auth::credential(&key, h)?);
        }
        targets.push(t);
    }
    if config.upstream.is_none() && !config.command.is_empty() {
        let mut t = Target::new("default", "/mcp".into(), String::new(), config, catalog)?;
        t.command = config.command.clone();
        targets.insert(0, t);
    }
    // Positions are stable across reloads (the set of upstreams cannot change without a
    // restart), so a position names an upstream in catalog keys.
    let targets: Vec<Arc<Target>> = targets
        .into_iter()
        .enumerate()
        .map(|(i, mut t)| {
            t.index = i as u32;
            Arc::new(t)
        })
        .collect();
    if targets.is_empty() {
        return Err(ConfigError(
            "no upstream: give --upstream URL, a command after `--` (`toolgate serve -- python server.py`), or [[upstreams]] in the config file".into(),
        ));
    }
    Ok(targets)
}

/// Who tells clients apart: toolgate's own `[auth]`, an application that vouches for the
/// names it hands the in-process layer, or nobody, since the one client launched toolgate
/// (a stdio pipe).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Identities {
    Authenticated,
    Launcher,
    Vouched,
}

/// Each `[clients]` entry's rules; a name other than `"*"` needs something to tell it.
fn clients(
    config: &Config,
    authenticated: bool,
) -> Result<HashMap<String, Arc<ClientRules>>, ConfigError> {
    let mut clients = HashMap::new();
    for (name, policy) in &config.clients {
        if !authenticated && name != "*" {
            return Err(ConfigError(format!(
                "clients.{name:?} names a client, but no authentication is configured to tell clients apart; only \"*\" applies without it"
            )));
        }
        clients.insert(
            name.clone(),
            Arc::new(ClientRules::from_policy(name, policy)?),
        );
    }
    Ok(clients)
}

/// Each client's `upstreams` names servers of this gateway, and is decided where the client
/// is authenticated: without authentication there is no one to tell apart.
fn servers_reached(
    config: &Config,
    authenticated: bool,
    targets: &[Arc<Target>],
) -> Result<(), ConfigError> {
    for (client, policy) in &config.clients {
        if !policy.upstreams.is_empty() && !authenticated {
            return Err(ConfigError(format!(
                "clients.{client:?}.upstreams needs auth.tokens or auth.jwt: which servers a client reaches is decided where it is authenticated"
            )));
        }
        let named = |name: &String| targets.iter().any(|t| *t.name == **name);
        if let Some(unknown) = policy.upstreams.iter().find(|name| !named(name)) {
            let known: Vec<&str> = targets.iter().map(|t| &*t.name).collect();
            return Err(ConfigError(format!(
                "clients.{client:?}.upstreams: no server is named {unknown:?} (the servers: {})",
                known.join(", ")
            )));
        }
    }
    Ok(())
}

/// The previous gateway's catalog while the settings it compiles with and its bounds stay
/// (what was listed stays listed across a reload), else a new one.
fn catalog(config: &Config, previous: Option<&Gateway>) -> Arc<Catalog> {
    let settings = CompileSettings::from_config(&config.limits, &config.validation);
    let limits = &config.limits;
    match previous {
        Some(p)
            if p.catalog.settings() == &settings
                && p.config.limits.max_scopes == limits.max_scopes
                && p.config.limits.max_catalog_bytes == limits.max_catalog_bytes =>
        {
            p.catalog.clone()
        }
        _ => Arc::new(Catalog::new(
            settings,
            limits.max_scopes,
            limits.max_catalog_bytes,
        )),
    }
}

/// What a gateway carries across reloads, as the process's own: made with the first.
struct Carried {
    hasher: RandomState,
    ids: Arc<Ids>,
    metrics: Arc<Metrics>,
    limiter: Arc<RateLimiter>,
    sessions: Arc<crate::policy::sessions::SessionSeal>,
    tasks: Arc<crate::tasks::Tasks>,
}

impl From<Option<&Gateway>> for Carried {
    fn from(previous: Option<&Gateway>) -> Carried {
        let Some(p) = previous else {
            let hasher = RandomState::new();
            let prefix = format!("toolgate-{:016x}", hasher.hash_one(std::process::id()));
            return Carried {
                hasher,
                ids: Arc::new(Ids::new(prefix)),
                metrics: Arc::default(),
                limiter: Arc::default(),
                sessions: Arc::default(),
                tasks: Arc::default(),
            };
        };
        Carried {
            hasher: p.hasher.clone(),
            ids: p.ids.clone(),
            metrics: p.metrics.clone(),
            limiter: p.limiter.clone(),
            sessions: p.sessions.clone(),
            tasks: p.tasks.clone(),
        }
    }
}

/// The same origin rules for the admin listener, its `Host` checked where it listens on a
/// loopback address: `/metrics` read through DNS rebinding would tell a foreign page every
/// tool name and client.
fn admin_origins(config: &Config) -> OriginPolicy {
    let admin = config.admin_addr().ok().flatten();
    OriginPolicy::new(
        &config.allowed_origins,
        admin.is_some_and(|a| a.ip().is_loopback()),
    )
}

/// The counts of bytes held for requests' bodies and for their answers: the previous
/// gateway's, bounded anew, so that what requests hold stays counted across a reload.
fn byte_budgets(config: &Config, previous: Option<&Gateway>) -> (Arc<ByteBudget>, Arc<ByteBudget>) {
    let max = config.limits.request_bytes_budget();
    match previous {
        Some(p) => {
            p.body_bytes.set_max(max);
            p.answer_bytes.set_max(max);
            (p.body_bytes.clone(), p.answer_bytes.clone())
        }
        None => (
            Arc::new(ByteBudget::new(max)),
            Arc::new(ByteBudget::new(max)),
        ),
    }
}

/// The Redis limiter of `shared_state`, kept across reloads while the URL and the CA file
/// stay: its connection lives on.
fn shared(
    config: &Config,
    previous: Option<&Gateway>,
) -> Result<Option<Arc<crate::policy::shared::SharedLimiter>>, ConfigError> {
    let s = &config.shared_state;
    let Some(url) = &s.redis_url else {
        if let Some(key) = s.tls_key_set() {
            return Err(ConfigError(format!(
                "shared_state.{key} is set without a redis_url"
            )));
        }
        return Ok(None);
    };
    Ok(Some(
        match previous
            .and_then(|p| p.shared.clone())
            .filter(|l| l.same(url, s))
        {
            Some(l) => l,
            None => Arc::new(crate::policy::shared::SharedLimiter::new(url, s)?),
        },
    ))
}

/// The gateway in force. A reload swaps it whole; a request keeps the one it started with,
/// so a change never applies to half a request and nothing in flight is dropped.
#[derive(Clone)]
pub struct Live(Arc<ArcSwap<Gateway>>);

impl Live {
    pub fn new(gw: Arc<Gateway>) -> Live {
        Live(Arc::new(ArcSwap::new(gw)))
    }

    pub fn load(&self) -> Arc<Gateway> {
        self.0.load_full()
    }

    /// Installs `config` if it is valid and changes nothing that needs a restart; otherwise
    /// the gateway in force stays and the error says why.
    pub fn reload(&self, config: Config) -> Result<(), ConfigError> {
        let next = self.load().reloaded(config)?;
        self.0.store(next);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_across_threads_and_gateways() {
        let ids = Arc::new(Ids::new("p".into()));
        let other = Ids::new("q".into());
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let ids = ids.clone();
                std::thread::spawn(move || (0..1_000).map(|_| ids.next()).collect::<Vec<_>>())
            })
            .collect();
        let mut seen = std::collections::HashSet::new();
        for t in threads {
            for n in t.join().unwrap() {
                assert!(seen.insert(n), "{n} minted twice");
            }
        }
        // Interleaving two sequences on one thread keeps each one's numbers apart.
        let (a, b, c) = (ids.next(), other.next(), ids.next());
        assert!(seen.insert(a) && seen.insert(c) && a != c);
        assert_eq!(b, 0);
    }

    #[test]
    fn a_minted_id_is_its_prefix_a_dash_and_its_number() {
        let gw = Gateway::new(crate::config::Config {
            upstream: Some("http://127.0.0.1:9/mcp".into()),
            ..crate::config::Config::default()
        })
        .unwrap();
        let id = gw.next_id();
        let (prefix, n) = id.rsplit_once('-').unwrap();
        assert_eq!(prefix, gw.ids.prefix);
        assert!(n.parse::<u64>().is_ok(), "{id}");
        // The longest number still fits in place.
        assert!(gw.ids.prefix.len() + 1 + u64::MAX.to_string().len() <= ID_TEXT_MAX);
        let text = gw.next_id_text();
        assert_eq!(text.as_ref(), text.as_str().as_bytes());
    }
}
