//! Typed configuration, layered: built-in defaults, then a TOML file, then `TOOLGATE_*`
//! environment variables (nested keys split on `__`), then command-line flags.
//!
//! Every field has a default, so an empty file is a working configuration; unknown keys are
//! errors so that a typo never silently turns a rule off.

pub mod reference;

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Where clients connect. Loopback by default: a local MCP endpoint reachable from the
    /// network is the DNS-rebinding setup the spec warns about.
    #[serde(deserialize_with = "listen_address_of")]
    pub listen: SocketAddr,
    /// The default upstream, served on `/mcp`.
    pub upstream: Option<String>,
    /// The transport `upstream` speaks.
    pub upstream_transport: UpstreamTransport,
    /// Or: a stdio server to launch (program and arguments), the default upstream.
    pub command: Vec<String>,
    /// Further upstreams, each served on `/<name>/mcp`.
    pub upstreams: Vec<NamedUpstream>,
    /// The admin listener (`/healthz`, `/readyz`, `/metrics`), or `"off"`. Kept apart from
    /// `listen` so probes and scrapes never share the clients' port or policy.
    pub admin_listen: String,
    /// Origins allowed besides localhost ones (`http://localhost:*`, `http://127.0.0.1:*`,
    /// `http://[::1]:*`). `"*"` allows any.
    pub allowed_origins: Vec<String>,
    pub limits: Limits,
    /// TLS at the client listener; off unless given. The admin listener stays plain HTTP.
    pub tls: Option<ListenerTls>,
    /// TLS to `https://` upstreams (each `[[upstreams]]` may give its own `tls`).
    pub upstream_tls: UpstreamTls,
    /// State shared by replicas (rate limits).
    pub shared_state: SharedState,
    /// OpenTelemetry traces; off unless an endpoint is given here or in `OTEL_*`.
    pub telemetry: TelemetryConfig,
    /// Children of a stdio upstream (`toolgate serve -- CMD`).
    pub stdio: StdioLimits,
    pub validation: Validation,
    pub errors: Errors,
    pub log: Log,
    pub reload: ReloadSettings,
    /// Authentication at the edge; off unless tokens or a JWT issuer are configured.
    pub auth: Auth,
    /// Tool policy and rate limits per client identity (a token's name or a JWT claim);
    /// `"*"` applies to every client not named, including unauthenticated ones.
    pub clients: HashMap<String, ClientPolicy>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReloadSettings {
    /// Reload when the configuration file's content changes (SIGHUP always reloads).
    pub watch: bool,
    /// How often the file is read to see whether it changed.
    #[serde(with = "humantime_serde")]
    pub interval: Duration,
}

impl Default for ReloadSettings {
    fn default() -> Self {
        ReloadSettings {
            watch: true,
            interval: Duration::from_secs(2),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Auth {
    /// Static bearer tokens, each named for policy and logs.
    pub tokens: Vec<StaticToken>,
    pub jwt: Option<Jwt>,
    /// Where clients reach toolgate (`https://mcp.example.com`). With it, toolgate serves
    /// RFC 9728 metadata for each endpoint and points `WWW-Authenticate` at it.
    pub public_url: Option<String>,
    /// Authorization servers named in the metadata.
    pub authorization_servers: Vec<String>,
    /// Scopes every token must carry (`scope` or `scp` claim of a JWT); else 403.
    pub required_scopes: Vec<String>,
    /// The credential the upstream gets in place of the client's token.
    pub upstream_header: Option<UpstreamHeader>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StaticToken {
    /// The client identity this token stands for.
    pub name: String,
    /// The environment variable holding the token.
    pub env: Option<String>,
    /// Or a file holding it (surrounding whitespace ignored).
    pub file: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Jwt {
    /// A JWKS document on disk, re-read on reload.
    pub jwks_file: Option<String>,
    /// Or fetched (https, or http to loopback), refreshed every `refresh` and when a token
    /// names a key id it does not hold.
    pub jwks_url: Option<String>,
    /// PEM CA certificates to trust for `jwks_url`, besides the system's roots: an issuer
    /// behind a private CA. Read again on reload when it changed.
    pub ca_file: Option<String>,
    /// The `iss` every token must carry.
    pub issuer: String,
    /// Accepted `aud` values. Empty: each endpoint's own URL under `public_url`.
    #[serde(default)]
    pub audience: Vec<String>,
    /// The claim that names the client for `[clients]` policy.
    #[serde(default = "default_identity_claim")]
    pub identity_claim: String,
    #[serde(default = "default_jwks_refresh", with = "humantime_serde")]
    pub refresh: Duration,
    /// Clock skew tolerated on `exp` and `nbf`.
    #[serde(default = "default_leeway", with = "humantime_serde")]
    pub leeway: Duration,
}

fn default_identity_claim() -> String {
    "sub".into()
}
fn default_jwks_refresh() -> Duration {
    Duration::from_secs(600)
}
fn default_leeway() -> Duration {
    Duration::from_secs(30)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UpstreamHeader {
    #[serde(default = "default_upstream_header")]
    pub name: String,
    /// The environment variable holding the value (e.g. `Bearer abc`).
    pub env: Option<String>,
    /// Or a file holding it.
    pub file: Option<String>,
}

fn default_upstream_header() -> String {
    "authorization".into()
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ClientPolicy {
    /// Only these tools (`*` at the end matches a prefix); empty allows all. Applies on top
    /// of `[validation]`'s lists.
    pub allow_tools: Vec<String>,
    pub deny_tools: Vec<String>,
    /// Calls per tool this client may make, as `N/second`, `N/minute` or `N/hour`.
    pub rate_limit: Option<String>,
    /// Per-tool rates that replace `rate_limit` for those tools.
    pub tool_rate_limits: HashMap<String, String>,
    /// Only these servers, by name (`default` is the one on `/mcp`); empty reaches all. A
    /// server behind the gateway may belong to another party than the others.
    pub upstreams: Vec<String>,
}

impl Auth {
    pub fn enabled(&self) -> bool {
        !self.tokens.is_empty() || self.jwt.is_some()
    }
}

/// Where toolgate's own configuration comes from in the environment (`TOOLGATE_LOG__LEVEL`).
pub const ENV_PREFIX: &str = "TOOLGATE_";

/// The value of a secret from an environment variable or a file, named in errors by where
/// it was looked for, never by what it holds.
pub fn secret(what: &str, env: Option<&str>, file: Option<&str>) -> Result<String, ConfigError> {
    let value = match (env, file) {
        (Some(var), None) => std::env::var(var)
            .map_err(|_| ConfigError(format!("{what}: environment variable {var} is not set")))?,
        (None, Some(path)) => {
            // Only a regular file: reading a FIFO or a device could block the reload (and
            // with it every listener) for ever.
            let meta = std::fs::metadata(path)
                .map_err(|e| ConfigError(format!("{what}: cannot read {path}: {e}")))?;
            if !meta.is_file() {
                return Err(ConfigError(format!("{what}: {path} is not a regular file")));
            }
            std::fs::read_to_string(path)
                .map_err(|e| ConfigError(format!("{what}: cannot read {path}: {e}")))?
        }
        _ => {
            return Err(ConfigError(format!(
                "{what}: give exactly one of env or file"
            )));
        }
    };
    let value = value.trim().to_string();
    if value.is_empty() {
        return Err(ConfigError(format!("{what} is empty")));
    }
    Ok(value)
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamedUpstream {
    pub name: String,
    /// An HTTP server's URL, or:
    #[serde(default)]
    pub url: Option<String>,
    /// The transport an HTTP server speaks.
    #[serde(default)]
    pub transport: UpstreamTransport,
    /// A stdio server toolgate starts for it, as the top-level `command`.
    #[serde(default)]
    pub command: Vec<String>,
    /// TLS to this upstream, instead of the global `[upstream_tls]`.
    #[serde(default)]
    pub tls: Option<UpstreamTls>,
    /// The credential this upstream gets in place of a client's token. Its own: the one of
    /// `auth.upstream_header` goes to the server on `/mcp` only.
    #[serde(default)]
    pub upstream_header: Option<UpstreamHeader>,
    /// For a stdio server: the variables of toolgate's environment that it alone is given
    /// (its own credentials); every other server toolgate starts goes without them.
    #[serde(default)]
    pub upstream_env: Vec<String>,
    /// Overrides of the global `[validation]` for this upstream only.
    #[serde(default)]
    pub validation: ValidationOverride,
    /// Overrides of the global `[limits]` that apply to one server: a server whose tools run
    /// for minutes beside servers that answer at once.
    #[serde(default)]
    pub limits: LimitsOverride,
    /// Overrides of the global `[stdio]` bounds, for a stdio server: fewer children of a
    /// server that each start a browser.
    #[serde(default)]
    pub stdio: StdioOverride,
}

/// A named server's own `[limits]`: any key left out keeps the global value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LimitsOverride {
    #[serde(with = "humantime_serde")]
    pub upstream_timeout: Option<Duration>,
    #[serde(with = "humantime_serde")]
    pub stream_gap_timeout: Option<Duration>,
}

/// A named stdio server's own `[stdio]` bounds: any key left out keeps the global value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StdioOverride {
    pub max_sessions: Option<usize>,
    pub max_sessions_per_client: Option<usize>,
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Option<Duration>,
}

impl NamedUpstream {
    /// The configuration as it applies to this server, for the gateway and `check` alike:
    /// the global one with its own `tls`, credential, `validation`, `limits` and `stdio`. The
    /// one place that says which settings a named server may have of its own.
    pub fn applied(&self, cfg: &Config) -> Config {
        let (limits, stdio) = (&self.limits, &self.stdio);
        let mut own = cfg.clone();
        own.upstream_tls = self.tls.clone().unwrap_or_else(|| cfg.upstream_tls.clone());
        own.upstream_transport = self.transport;
        own.auth.upstream_header = self.upstream_header.clone();
        own.validation = cfg.validation.with(&self.validation);
        let global = &cfg.limits;
        own.limits.upstream_timeout = limits.upstream_timeout.unwrap_or(global.upstream_timeout);
        own.limits.stream_gap_timeout =
            (limits.stream_gap_timeout).unwrap_or(global.stream_gap_timeout);
        let global = &cfg.stdio;
        own.stdio.max_sessions = stdio.max_sessions.unwrap_or(global.max_sessions);
        own.stdio.max_sessions_per_client =
            (stdio.max_sessions_per_client).unwrap_or(global.max_sessions_per_client);
        own.stdio.idle_timeout = stdio.idle_timeout.unwrap_or(global.idle_timeout);
        own
    }

    /// An HTTP server with a URL that parses, or a stdio server, with only what applies to
    /// its kind.
    fn check(&self) -> Result<(), ConfigError> {
        let name = &self.name;
        match (&self.url, self.command.is_empty()) {
            (None, false) if self.tls.is_some() => Err(ConfigError(format!(
                "upstreams {name:?}: tls is for an https:// url; a stdio server (command) has none"
            ))),
            (None, false) if self.upstream_header.is_some() => Err(ConfigError(format!(
                "upstreams {name:?}: upstream_header is sent to an HTTP server; a stdio server (command) gets no headers"
            ))),
            (None, false) if self.transport != UpstreamTransport::default() => {
                Err(ConfigError(format!(
                    "upstreams {name:?}: transport is an HTTP server's (url); a stdio server (command) speaks stdio"
                )))
            }
            (None, false) if self.limits.stream_gap_timeout.is_some() => Err(ConfigError(format!(
                "upstreams {name:?}: limits.stream_gap_timeout bounds an HTTP server's event stream; a stdio server (command) is held to upstream_timeout"
            ))),
            (None, false) => match self
                .upstream_env
                .iter()
                .find(|v| v.is_empty() || v.contains(['=', '\0']))
            {
                Some(v) => Err(ConfigError(format!(
                    "upstreams {name:?}: upstream_env {v:?} is not the name of an environment variable"
                ))),
                None => Ok(()),
            },
            (Some(_), true)
                if self.stdio != StdioOverride::default()
                    && self.transport == UpstreamTransport::StreamableHttp =>
            {
                Err(ConfigError(format!(
                    "upstreams {name:?}: stdio bounds a stdio server's children (and an HTTP+SSE server's sessions); a Streamable HTTP server (url) has none"
                )))
            }
            (Some(_), true) if !self.upstream_env.is_empty() => Err(ConfigError(format!(
                "upstreams {name:?}: upstream_env is given to a stdio server (command); an HTTP server gets upstream_header"
            ))),
            (Some(url), true) => parse_upstream_url(url).map(drop),
            (Some(_), false) => Err(ConfigError(format!(
                "upstreams {name:?}: give either url or command, not both"
            ))),
            (None, true) => Err(ConfigError(format!(
                "upstreams {name:?}: give its url, or the command that starts it"
            ))),
        }
    }
}

/// Trace export over OTLP/HTTP (protobuf).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetryConfig {
    /// The collector's base URL (`/v1/traces` is added) or its traces URL. Unset, the
    /// standard `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` or `OTEL_EXPORTER_OTLP_ENDPOINT` is used.
    pub otlp_endpoint: Option<String>,
    /// TLS to an `https://` collector.
    pub tls: UpstreamTls,
}

/// Rate-limit buckets in Redis (or Valkey), so that replicas together enforce each limit.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SharedState {
    /// `redis://HOST:PORT/DB` or `rediss://…`; unset, each replica keeps its own buckets.
    pub redis_url: Option<String>,
    /// PEM CA certificates to trust for a `rediss://` URL, besides the system's roots: a
    /// Redis behind a private CA. Read again on reload when it changed.
    pub ca_file: Option<String>,
    /// A PEM certificate chain and its key, for a `rediss://` Redis that requires client
    /// certificates (`tls-auth-clients yes`). Read again on reload when they changed.
    pub client_cert_file: Option<String>,
    pub client_key_file: Option<String>,
    pub on_unavailable: OnUnavailable,
}

impl SharedState {
    /// The first of the TLS keys that is set, for the messages that say it needs a
    /// `rediss://` URL.
    pub fn tls_key_set(&self) -> Option<&'static str> {
        [
            ("ca_file", &self.ca_file),
            ("client_cert_file", &self.client_cert_file),
            ("client_key_file", &self.client_key_file),
        ]
        .into_iter()
        .find_map(|(key, v)| v.is_some().then_some(key))
    }
}

/// The transport of an HTTP server.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UpstreamTransport {
    /// Streamable HTTP (2025-03-26 and after): each message a POST to the URL.
    #[default]
    StreamableHttp,
    /// HTTP+SSE (2024-11-05): an event stream at the URL names where messages are posted.
    Sse,
}

/// What a call is decided by when Redis does not answer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnUnavailable {
    /// This replica's own buckets (logged and counted).
    #[default]
    Local,
    /// Refused, as over the limit would be.
    Deny,
}

/// The client listener's certificate (PEM), read again when the files change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ListenerTls {
    pub cert_file: String,
    pub key_file: String,
    /// Clients must present a certificate from this CA (PEM).
    #[serde(default)]
    pub client_ca_file: Option<String>,
}

/// TLS to `https://` upstreams. The files are read again when they change, so a rotated
/// certificate takes effect on the next connection without a restart.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UpstreamTls {
    /// PEM CA certificates to trust, besides the system's roots.
    pub ca_file: Option<String>,
    /// Trust only `ca_file`, not the system's roots.
    pub only_ca_file: bool,
    /// A PEM certificate chain and its key, for upstreams that require client certificates.
    pub client_cert_file: Option<String>,
    pub client_key_file: Option<String>,
    /// The name the upstream's certificate must carry, when it is not the URL's host.
    pub server_name: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest request body accepted (413 above).
    pub max_body_bytes: usize,
    /// Largest JSON response toolgate reads whole to learn from it; larger ones pass through
    /// unread.
    pub max_response_bytes: usize,
    /// Largest single SSE event inspected; a larger one switches that stream to raw
    /// pass-through.
    pub max_sse_event_bytes: usize,
    /// Largest `inputSchema` toolgate compiles; larger ones count as not compiling.
    pub max_schema_bytes: usize,
    /// How long an upstream may take to answer: its response headers, and then the whole of
    /// a JSON answer.
    #[serde(with = "humantime_serde")]
    pub upstream_timeout: Duration,
    /// The longest silence between two events of an upstream's SSE answer to a request (the
    /// stream a client opens with GET is not bounded: it may be quiet for hours).
    #[serde(with = "humantime_serde")]
    pub stream_gap_timeout: Duration,
    /// How long a client connection may take to send a request's head: from its accept, and
    /// from the first byte of each later head.
    #[serde(with = "humantime_serde")]
    pub header_timeout: Duration,
    /// How long a request's whole body may take to arrive, once its head has (408 past it).
    #[serde(with = "humantime_serde")]
    pub body_timeout: Duration,
    /// How long a client connection may stay open with no request in progress.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// How long a client may take none of what is waiting for it (an answer, a stream's
    /// event) before its connection is closed: an answer held for a client that reads
    /// nothing counts against `max_request_bytes_in_flight`, so it must not be held forever.
    #[serde(with = "humantime_serde")]
    pub send_timeout: Duration,
    /// Most client connections open at once; past it, a new one takes the place of the
    /// oldest that has sent no request, else further ones wait in the listen queue. Kept
    /// well under the descriptor limit (which toolgate raises to its hard limit at start), so
    /// that upstream connections, children and the admin listener always find descriptors.
    pub max_connections: usize,
    /// Most scopes (sessions, authorization contexts) whose catalogs are kept.
    pub max_scopes: usize,
    /// Most `tools/list` pages toolgate fetches in one refresh.
    pub max_list_pages: usize,
    /// Most bytes the tool catalogs are counted as, every scope's together: the tools'
    /// names, and each distinct schema's text and what it holds read and compiled.
    pub max_catalog_bytes: usize,
    /// Most bytes the HTTP front holds for requests at once, every client's together: of their
    /// bodies, and apart of the answers read whole for the rules. Past it, a request is
    /// refused with 503 before its body is read, or an answer waits for room. Never less than
    /// `max_body_bytes` or `max_response_bytes`, so that one of the largest size always fits.
    pub max_request_bytes_in_flight: usize,
    /// On SIGTERM/SIGINT, how long in-flight requests and streams may take to finish.
    #[serde(with = "humantime_serde")]
    pub shutdown_grace: Duration,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StdioLimits {
    /// Most sessions (each with its own child) at once; more get HTTP 503.
    pub max_sessions: usize,
    /// Most of those one client may hold (its authenticated name, or its address without
    /// authentication), so that one client cannot take every slot.
    pub max_sessions_per_client: usize,
    /// A session unused this long is ended and its child stopped.
    #[serde(with = "humantime_serde")]
    pub idle_timeout: Duration,
    /// How long a child gets after its stdin closes, and again after SIGTERM; under
    /// `toolgate stdio`, also how long what is in flight gets for its answers once the
    /// client has closed stdin.
    #[serde(with = "humantime_serde")]
    pub shutdown_grace: Duration,
    /// Under `toolgate stdio`, most messages in flight at once; the client's next line is
    /// read when one finishes (a pipe's backpressure).
    pub max_in_flight: usize,
}

impl Default for StdioLimits {
    fn default() -> Self {
        StdioLimits {
            max_sessions: 100,
            max_sessions_per_client: 50,
            idle_timeout: Duration::from_secs(600),
            shutdown_grace: Duration::from_secs(2),
            max_in_flight: 256,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Answer invalid calls; never forward them.
    Enforce,
    /// Forward invalid calls, but log and count them.
    Audit,
    /// No validation.
    Off,
}

/// What a property the schema neither declares nor rules on (no `additionalProperties`) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Undeclared {
    /// A violation when its name is close to a declared one at the same place: a misspelt
    /// argument the server would ignore, running the tool with its default.
    RejectTypos,
    /// Always a violation.
    Reject,
    /// Plain JSON Schema: accepted.
    Allow,
}

/// What becomes of a listed tool whose `inputSchema` is not a valid JSON Schema (or whose
/// root is not an object schema).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InvalidSchemas {
    /// Removed from `tools/list`; a call to it is answered as for an unknown tool. Model APIs
    /// refuse a whole request whose tool list holds one invalid schema, so one broken tool
    /// would take every tool away from the model.
    Hide,
    /// Listed as the server listed it.
    Forward,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnCompileError {
    /// Forward calls to a tool whose schema does not compile, unvalidated.
    Forward,
    /// Answer them with a tool error.
    Reject,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UnknownDialect {
    /// A schema whose `$schema` names a dialect toolgate does not know does not compile.
    Reject,
    /// Validate it as JSON Schema 2020-12 anyway.
    Draft202012,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AnswerShape {
    /// SEP-1303: an `isError` result the model reads and acts on.
    ToolError,
    /// `-32602` with the violations in `data`, for clients built on the older behaviour.
    ProtocolError,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    Off,
    /// Log and count `structuredContent` that breaks `outputSchema`.
    Audit,
    /// Replace it by an `isError` result that says what is wrong.
    Enforce,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Validation {
    pub mode: Mode,
    /// Convert `"10"` to `10` (and the like) where the schema wants it, then forward.
    pub coerce: bool,
    /// How an invalid call is answered.
    pub answer: AnswerShape,
    pub on_compile_error: OnCompileError,
    pub unknown_dialect: UnknownDialect,
    /// Check `format` (date, email, uri, ...). Tool authors write it expecting enforcement.
    pub validate_formats: bool,
    /// Most validation errors examined and reported for one call: a bound on the cost of
    /// a hostile schema whose errors multiply.
    pub max_errors: usize,
    /// Check `structuredContent` against the tool's `outputSchema`.
    pub output: OutputMode,
    /// Arguments the schema does not declare (see [`Undeclared`]).
    pub undeclared_properties: Undeclared,
    /// Tools whose input schema is invalid (see [`InvalidSchemas`]).
    pub invalid_tool_schemas: InvalidSchemas,
    /// Only these tools are reachable (`*` at the end matches a prefix); empty allows all.
    pub allow_tools: Vec<String>,
    /// These tools are not reachable, and not listed.
    pub deny_tools: Vec<String>,
    /// Per-tool settings, by tool name.
    pub tools: HashMap<String, ToolPolicy>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolPolicy {
    pub mode: Option<Mode>,
    pub coerce: Option<bool>,
    pub undeclared_properties: Option<Undeclared>,
    pub invalid_tool_schemas: Option<InvalidSchemas>,
    /// A JSON Schema (as JSON text) the arguments must also satisfy, beyond the advertised one.
    pub extra_schema: Option<String>,
    /// Arguments holding filesystem paths that must stay inside a root after normalization.
    pub paths: Vec<PathRule>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PathRule {
    /// The argument: a top-level name (`path`) or a JSON pointer (`/options/dir`). An array
    /// of strings there is checked item by item.
    pub argument: String,
    /// The directory the path must stay inside. Relative paths are taken relative to it.
    pub root: String,
}

/// Per-upstream overrides: any key left out keeps the global value.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ValidationOverride {
    pub mode: Option<Mode>,
    pub coerce: Option<bool>,
    pub answer: Option<AnswerShape>,
    pub on_compile_error: Option<OnCompileError>,
    pub output: Option<OutputMode>,
    pub undeclared_properties: Option<Undeclared>,
    pub invalid_tool_schemas: Option<InvalidSchemas>,
    pub allow_tools: Option<Vec<String>>,
    pub deny_tools: Option<Vec<String>>,
    /// Merged over the global per-tool settings, tool by tool.
    pub tools: HashMap<String, ToolPolicy>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Errors {
    /// Rewrite upstream errors into the shapes the current spec asks for (docs/contract.md §3).
    pub rewrite: bool,
    /// Replace upstream error text that is not a validation message by a generic message
    /// with a correlation id; the original is logged under that id.
    pub mask_internal: bool,
}

impl Default for Errors {
    fn default() -> Self {
        Errors {
            rewrite: true,
            mask_internal: false,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    Human,
    Json,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Log {
    pub format: LogFormat,
    /// An `EnvFilter` directive; `RUST_LOG` wins when set.
    pub level: String,
    /// One line per request (request id, upstream, method, tool, outcome, status, latency),
    /// at info level. Never argument values, tokens or cookies. Off by default: measured, it
    /// costs about a third of a forwarded call's CPU; the metrics count every request anyway.
    pub access: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            upstream: None,
            upstream_transport: UpstreamTransport::default(),
            command: Vec::new(),
            upstreams: Vec::new(),
            admin_listen: "127.0.0.1:9090".into(),
            allowed_origins: Vec::new(),
            limits: Limits::default(),
            tls: None,
            upstream_tls: UpstreamTls::default(),
            shared_state: SharedState::default(),
            telemetry: TelemetryConfig::default(),
            stdio: StdioLimits::default(),
            validation: Validation::default(),
            errors: Errors::default(),
            log: Log::default(),
            reload: ReloadSettings::default(),
            auth: Auth::default(),
            clients: HashMap::new(),
        }
    }
}

impl Limits {
    /// `max_request_bytes_in_flight` as applied: never less than one request body or one
    /// answer read whole of the largest size.
    pub(crate) fn request_bytes_budget(&self) -> usize {
        (self.max_request_bytes_in_flight)
            .max(self.max_body_bytes)
            .max(self.max_response_bytes)
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_body_bytes: 4 * 1024 * 1024,
            max_response_bytes: 16 * 1024 * 1024,
            max_sse_event_bytes: 16 * 1024 * 1024,
            max_schema_bytes: 1024 * 1024,
            upstream_timeout: Duration::from_secs(120),
            stream_gap_timeout: Duration::from_secs(300),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            idle_timeout: Duration::from_secs(60),
            send_timeout: Duration::from_secs(60),
            max_connections: 4096,
            max_scopes: 10_000,
            max_list_pages: 100,
            max_catalog_bytes: 256 * 1024 * 1024,
            max_request_bytes_in_flight: 64 * 1024 * 1024,
            shutdown_grace: Duration::from_secs(30),
        }
    }
}

impl Default for Validation {
    fn default() -> Self {
        Validation {
            mode: Mode::Enforce,
            coerce: true,
            answer: AnswerShape::ToolError,
            on_compile_error: OnCompileError::Forward,
            unknown_dialect: UnknownDialect::Reject,
            validate_formats: true,
            max_errors: 32,
            output: OutputMode::Off,
            undeclared_properties: Undeclared::RejectTypos,
            invalid_tool_schemas: InvalidSchemas::Hide,
            allow_tools: Vec::new(),
            deny_tools: Vec::new(),
            tools: HashMap::new(),
        }
    }
}

impl Default for Log {
    fn default() -> Self {
        Log {
            format: LogFormat::Human,
            level: "info".into(),
            access: false,
        }
    }
}

/// Allow and deny lists: a name must match `allow` (when it is not empty) and not `deny`;
/// `*` at the end of a pattern matches a prefix.
pub fn allows(allow: &[String], deny: &[String], tool: &str) -> bool {
    let hit = |pats: &[String]| {
        pats.iter().any(|p| match p.strip_suffix('*') {
            Some(prefix) => tool.starts_with(prefix),
            None => p == tool,
        })
    };
    (allow.is_empty() || hit(allow)) && !hit(deny)
}

/// What applies to one tool's calls: the global (or upstream's) settings with the tool's own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolSettings {
    pub mode: Mode,
    pub coerce: bool,
    pub undeclared: Undeclared,
}

impl Validation {
    /// What applies to one tool's calls (one map lookup, on every call).
    pub fn policy_for(&self, tool: &str) -> ToolSettings {
        let mut s = ToolSettings {
            mode: self.mode,
            coerce: self.coerce,
            undeclared: self.undeclared_properties,
        };
        if let Some(p) = self.tools.get(tool) {
            s.mode = p.mode.unwrap_or(s.mode);
            s.coerce = p.coerce.unwrap_or(s.coerce);
            s.undeclared = p.undeclared_properties.unwrap_or(s.undeclared);
        }
        s
    }

    /// Whether a listed tool with an invalid input schema is hidden.
    pub fn hides_invalid(&self, tool: &str) -> bool {
        let policy = self
            .tools
            .get(tool)
            .and_then(|p| p.invalid_tool_schemas)
            .unwrap_or(self.invalid_tool_schemas);
        policy == InvalidSchemas::Hide
    }

    /// This validation with an upstream's overrides applied.
    pub fn with(&self, o: &ValidationOverride) -> Validation {
        let mut v = self.clone();
        v.mode = o.mode.unwrap_or(v.mode);
        v.coerce = o.coerce.unwrap_or(v.coerce);
        v.answer = o.answer.unwrap_or(v.answer);
        v.on_compile_error = o.on_compile_error.unwrap_or(v.on_compile_error);
        v.output = o.output.unwrap_or(v.output);
        v.undeclared_properties = o.undeclared_properties.unwrap_or(v.undeclared_properties);
        v.invalid_tool_schemas = o.invalid_tool_schemas.unwrap_or(v.invalid_tool_schemas);
        if let Some(a) = &o.allow_tools {
            v.allow_tools = a.clone();
        }
        if let Some(d) = &o.deny_tools {
            v.deny_tools = d.clone();
        }
        for (name, p) in &o.tools {
            v.tools.insert(name.clone(), p.clone());
        }
        v
    }

    /// Whether policy lets a tool be listed and called.
    pub fn allows(&self, tool: &str) -> bool {
        allows(&self.allow_tools, &self.deny_tools, tool)
    }
}

/// Settings given on the command line; they win over every other layer.
#[derive(Debug, Default, Clone)]
pub struct Overrides {
    pub listen: Option<SocketAddr>,
    pub upstream: Option<String>,
    pub upstream_transport: Option<UpstreamTransport>,
    pub admin_listen: Option<String>,
    pub command: Vec<String>,
}

/// Each of figment's errors as a line a person reads: the key as the file names it (figment
/// files everything under its internal `default.` profile).
fn figment_problems(e: figment::Error, file: Option<&str>) -> Vec<String> {
    e.into_iter()
        .map(|e| {
            let mut text = e.to_string().replace("key \"default.", "key \"");
            use figment::error::Kind;
            if let Kind::UnknownVariant(found, names) | Kind::UnknownField(found, names) = &e.kind {
                let what = match e.kind {
                    Kind::UnknownField(..) => "key",
                    _ => "value",
                };
                text = none_of(text, &e.kind.to_string(), (what, found), names);
            }
            if let Kind::InvalidType(_, expected) | Kind::InvalidValue(_, expected) = &e.kind
                && let Some(said) = in_words(expected)
            {
                let (rust, words) = (format!("expected {expected}"), format!("expected {said}"));
                text = text.replacen(&rust, &words, 1);
            }
            match file {
                Some(f) => text.replace(" in TOML source string", &format!(" in {f}")),
                None => text,
            }
        })
        .collect()
}

/// A value that is none of a setting's names (`mode = "enforc"`), or a key of a table set
/// from the environment that is none of its keys, said with the nearest name. figment's own
/// words (`said`) quote the list twice: "expected `one of `enforce`, …``".
fn none_of(line: String, said: &str, (what, found): (&str, &str), names: &[&str]) -> String {
    let quoted: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
    let words = format!(
        "unknown {what} `{found}`, expected one of {}",
        quoted.join(", ")
    );
    let line = line.replacen(said, &words, 1);
    match reference::nearest(found, names) {
        Some(name) => format!("{line}: did you mean `{name}`?"),
        None => line,
    }
}

/// What serde expected, in an operator's words where it names a Rust type (`usize`,
/// `struct Validation`).
fn in_words(expected: &str) -> Option<&'static str> {
    match expected {
        "usize" | "u64" | "u32" | "u16" | "u8" => Some("a whole number (0 or more)"),
        "isize" | "i64" | "i32" | "i16" | "i8" => Some("a whole number"),
        "f64" | "f32" => Some("a number"),
        "a sequence" => Some("a list"),
        "a map" => Some("a table"),
        e if e.starts_with("struct ") => Some("a table"),
        _ => None,
    }
}

/// Variables the command line reads itself (`clap`'s `env`), not configuration keys.
const FLAG_VARIABLES: &[&str] = &["TOOLGATE_UPSTREAM"];

fn env() -> Env {
    Env::prefixed(ENV_PREFIX).split("__")
}

/// Whether `key` (`limits.max_body_bytes`, or only its first part) starts with a top-level key
/// of [`Config`].
fn is_config_key(key: &str) -> bool {
    static KEYS: std::sync::LazyLock<Vec<String>> =
        std::sync::LazyLock::new(|| match serde_json::to_value(Config::default()) {
            Ok(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
            _ => Vec::new(),
        });
    let top = key.split('.').next().unwrap_or_default();
    KEYS.iter().any(|k| k.eq_ignore_ascii_case(top))
}

impl Config {
    /// The environment variables a server toolgate starts is not given: those this
    /// configuration reads toolgate's own secrets from (its clients' tokens, each HTTP
    /// server's credential), toolgate's own configuration (`TOOLGATE_*`, which may carry a
    /// Redis password), and those another stdio server alone is given (`upstream_env`; the
    /// server's `own` it keeps). A stdio server is often another party's code, beside
    /// servers whose credentials are not its own; the rest of the environment, which whoever
    /// launched toolgate set for the server too, it gets.
    pub fn withheld_from_servers(&self, own: &[String]) -> Vec<std::ffi::OsString> {
        let others = (self.upstreams.iter())
            .flat_map(|u| &u.upstream_env)
            .filter(|v| !own.contains(v))
            .map(std::ffi::OsString::from);
        let credentials = (self.auth.tokens.iter().map(|t| &t.env))
            .chain(self.auth.upstream_header.iter().map(|h| &h.env))
            .chain(
                (self.upstreams.iter()).filter_map(|u| u.upstream_header.as_ref().map(|h| &h.env)),
            )
            .flatten()
            .map(std::ffi::OsString::from);
        let config = std::env::vars_os()
            .map(|(name, _)| name)
            .filter(|name| name.as_encoded_bytes().starts_with(ENV_PREFIX.as_bytes()));
        credentials.chain(config).chain(others).collect()
    }

    pub fn load(file: Option<&Path>, overrides: &Overrides) -> Result<Config, ConfigError> {
        // Read once: a pipe (`/dev/stdin`, `<(…)`) has nothing left for a second read.
        let read = file.map(|path| (path, std::fs::read(path)));
        Config::layered(read, overrides).map_err(|problems| ConfigError(problems.join("; ")))
    }

    /// [`Config::load`] of a file as the caller read it: a watcher loads the content it saw
    /// settle, not whatever a read of its own would find a moment later.
    pub fn load_read(
        path: &Path,
        text: Vec<u8>,
        overrides: &Overrides,
    ) -> Result<Config, ConfigError> {
        Config::layered(Some((path, Ok(text))), overrides)
            .map_err(|problems| ConfigError(problems.join("; ")))
    }

    /// [`Config::load`], with every problem found on a line of its own.
    fn layered(
        file: Option<(&Path, std::io::Result<Vec<u8>>)>,
        overrides: &Overrides,
    ) -> Result<Config, Vec<String>> {
        let mut fig = Figment::from(Serialized::defaults(Config::default()));
        let named = file.as_ref().map(|(p, _)| p.display().to_string());
        if let Some((path, read)) = file {
            let text = Config::file_text(path, read)?;
            fig = fig.merge(Toml::string(&text));
        }
        fig = fig.merge(env().filter(|k| is_config_key(k.as_str())));
        let mut cfg: Config = fig
            .extract()
            .map_err(|e| figment_problems(e, named.as_deref()))?;
        if let Some(l) = overrides.listen {
            cfg.listen = l;
        }
        if let Some(u) = &overrides.upstream {
            cfg.upstream = Some(u.clone());
        }
        if let Some(t) = overrides.upstream_transport {
            cfg.upstream_transport = t;
        }
        if !overrides.command.is_empty() {
            cfg.command = overrides.command.clone();
        }
        if let Some(a) = &overrides.admin_listen {
            cfg.admin_listen = a.clone();
        }
        cfg.check().map_err(|e| vec![e.0])?;
        Ok(cfg)
    }

    /// A configuration file's text from what was read of it, or what is wrong with it before
    /// its values are read: it is missing, it is not UTF-8 or not TOML, or it names keys
    /// toolgate does not know (each with the nearest known one: [`reference::unknown_keys`]).
    /// One line per problem.
    fn file_text(path: &Path, read: std::io::Result<Vec<u8>>) -> Result<String, Vec<String>> {
        let shown = path.display();
        let text = match read {
            Ok(bytes) => String::from_utf8(bytes)
                .map_err(|e| vec![format!("config file {shown} is not UTF-8 text: {e}")])?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(vec![format!("config file {shown} does not exist")]);
            }
            Err(e) => return Err(vec![format!("config file {shown}: {e}")]),
        };
        let problems: Vec<String> = match toml::from_str::<toml::Table>(&text) {
            Ok(table) => reference::unknown_keys(&table)
                .into_iter()
                .map(|p| format!("{shown}: {p}"))
                .collect(),
            Err(e) => {
                let why = e.message().trim().replace('\n', ": ");
                let at = e.span().map(|s| text[..s.start].lines().count().max(1));
                match at {
                    Some(line) => vec![format!("{shown}, line {line}: {why}")],
                    None => vec![format!("{shown}: {why}")],
                }
            }
        };
        if problems.is_empty() {
            Ok(text)
        } else {
            Err(problems)
        }
    }

    /// The configuration in `path` (with the environment's `TOOLGATE_*` variables over it),
    /// or every problem it has, one line each, for `toolgate config check`. Nothing is read
    /// besides the file.
    pub fn checked(path: &Path) -> Result<Config, Vec<String>> {
        Config::layered(Some((path, std::fs::read(path))), &Overrides::default())
    }

    /// `TOOLGATE_*` variables that are not configuration, for a warning. They are skipped, not
    /// refused: Kubernetes gives every pod `TOOLGATE_SERVICE_HOST`, `TOOLGATE_PORT` and the
    /// like when a Service named `toolgate` exists, and a gateway must not crash-loop on
    /// them. Keys in a file stay strict: a typo there is the operator's own.
    pub fn ignored_env_keys() -> Vec<String> {
        let mut keys: Vec<String> = std::env::vars_os()
            .filter_map(|(k, _)| k.into_string().ok())
            .filter(|k| {
                k.strip_prefix(ENV_PREFIX).is_some_and(|rest| {
                    let top = rest.split("__").next().unwrap_or_default();
                    !is_config_key(&top.to_ascii_lowercase())
                        && !FLAG_VARIABLES.contains(&k.as_str())
                })
            })
            .collect();
        keys.sort();
        keys
    }

    /// Checks what serde cannot: URLs that parse, names that can be a path segment.
    pub fn check(&self) -> Result<(), ConfigError> {
        let mut seen = std::collections::HashSet::new();
        for u in &self.upstreams {
            if u.name.is_empty()
                || !u
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(ConfigError(format!(
                    "upstream name {:?} must be non-empty and use only A-Z a-z 0-9 - _",
                    u.name
                )));
            }
            if !seen.insert(u.name.as_str()) {
                return Err(ConfigError(format!(
                    "upstream name {:?} is used twice",
                    u.name
                )));
            }
            u.check()?;
        }
        if let Some(u) = &self.upstream {
            parse_upstream_url(u)?;
            if !self.command.is_empty() {
                return Err(ConfigError(
                    "give either an upstream URL or a command (-- CMD), not both".into(),
                ));
            }
        }
        self.admin_addr()?;
        self.allowed_origins
            .iter()
            .try_for_each(|o| check_origin(o))?;
        check_log_level(&self.log.level)?;
        if self.reload.interval < Duration::from_millis(100) {
            return Err(ConfigError(format!(
                "reload.interval {:?} is too short: give at least 100ms",
                self.reload.interval
            )));
        }
        if let Some(key) = self.bound_at_zero() {
            return Err(ConfigError(format!("{key} must be above 0")));
        }
        for u in &self.upstreams {
            if let Some(key) = u.applied(self).bound_at_zero() {
                return Err(ConfigError(format!(
                    "upstreams {:?}: {key} must be above 0",
                    u.name
                )));
            }
        }
        Ok(())
    }

    /// The first bound set to zero. At zero each would refuse every call, every session or
    /// every connection, or silently check nothing (a schema or an answer too large to read
    /// at any size), so none is taken as "off". `shutdown_grace` may be zero: stop at once.
    fn bound_at_zero(&self) -> Option<&'static str> {
        let (l, s) = (&self.limits, &self.stdio);
        let jwt_refresh = self.auth.jwt.as_ref().map(|j| j.refresh);
        [
            ("limits.max_body_bytes", l.max_body_bytes == 0),
            ("limits.max_response_bytes", l.max_response_bytes == 0),
            ("limits.max_sse_event_bytes", l.max_sse_event_bytes == 0),
            ("limits.max_schema_bytes", l.max_schema_bytes == 0),
            ("limits.upstream_timeout", l.upstream_timeout.is_zero()),
            ("limits.stream_gap_timeout", l.stream_gap_timeout.is_zero()),
            ("limits.header_timeout", l.header_timeout.is_zero()),
            ("limits.body_timeout", l.body_timeout.is_zero()),
            ("limits.idle_timeout", l.idle_timeout.is_zero()),
            ("limits.send_timeout", l.send_timeout.is_zero()),
            ("limits.max_connections", l.max_connections == 0),
            ("limits.max_scopes", l.max_scopes == 0),
            ("limits.max_list_pages", l.max_list_pages == 0),
            ("limits.max_catalog_bytes", l.max_catalog_bytes == 0),
            (
                "limits.max_request_bytes_in_flight",
                l.max_request_bytes_in_flight == 0,
            ),
            ("stdio.max_sessions", s.max_sessions == 0),
            (
                "stdio.max_sessions_per_client",
                s.max_sessions_per_client == 0,
            ),
            ("stdio.idle_timeout", s.idle_timeout.is_zero()),
            ("stdio.max_in_flight", s.max_in_flight == 0),
            ("auth.jwt.refresh", jwt_refresh.is_some_and(|r| r.is_zero())),
        ]
        .into_iter()
        .find_map(|(key, zero)| zero.then_some(key))
    }
}

impl Config {
    /// The admin address, or `None` when it is `"off"`.
    pub fn admin_addr(&self) -> Result<Option<SocketAddr>, ConfigError> {
        match self.admin_listen.as_str() {
            "off" | "" => Ok(None),
            a => listen_address(a)
                .map(Some)
                .map_err(|e| ConfigError(format!("admin_listen: {e}, or \"off\""))),
        }
    }
}

/// An address to listen on: an IP address with a port, or a host name with one
/// (`localhost:8080`), resolved once, to the first address it names. The same for `listen`,
/// `admin_listen` and `--listen`, so that what one takes the others take.
pub fn listen_address(s: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs;
    if let Ok(a) = s.parse() {
        return Ok(a);
    }
    let hint = "give IP:PORT or HOST:PORT, e.g. 127.0.0.1:8080 or localhost:8080";
    match s.to_socket_addrs() {
        Ok(mut addrs) => addrs
            .next()
            .ok_or_else(|| format!("{s:?} names no address; {hint}")),
        Err(e) => Err(format!(
            "{s:?} is not an address to listen on ({e}); {hint}"
        )),
    }
}

fn listen_address_of<'de, D: serde::Deserializer<'de>>(d: D) -> Result<SocketAddr, D::Error> {
    let text = String::deserialize(d)?;
    listen_address(&text).map_err(serde::de::Error::custom)
}

/// `log.level` is read as a tracing filter, whose every directive must name a level: `info`,
/// or `target=level`. A word that is no level (`verbose`) would be read as a target to log
/// alone, and every other line, errors included, would be left out.
fn check_log_level(filter: &str) -> Result<(), ConfigError> {
    const LEVELS: [&str; 6] = ["trace", "debug", "info", "warn", "error", "off"];
    let is_level = |w: &str| LEVELS.iter().any(|l| l.eq_ignore_ascii_case(w.trim()));
    let bad = filter
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .find(|d| match d.rsplit_once('=') {
            Some((target, level)) => target.trim().is_empty() || !is_level(level),
            None => !is_level(d),
        });
    match bad {
        Some(d) => Err(ConfigError(format!(
            "log.level {filter:?}: {d:?} is neither a level (trace, debug, info, warn, error, off) nor target=level (\"info,toolgate=debug\")"
        ))),
        None => Ok(()),
    }
}

/// An `allowed_origins` entry must be written as a browser sends `Origin`: `scheme://host`
/// with its port only when it is not the scheme's default, and no path. Written otherwise
/// (`app.example.com`, `https://app.example.com:443/ui`) it would match no request, and the
/// page would be refused with nothing to say why. `"*"` and `"null"` are taken as written.
fn check_origin(origin: &str) -> Result<(), ConfigError> {
    let not = |why: String| Err(ConfigError(format!("allowed_origins {origin:?} {why}")));
    if matches!(origin, "*" | "null") {
        return Ok(());
    }
    let Some((scheme, rest)) = origin.split_once("://") else {
        return not("is not an origin: write it as a browser sends it, scheme://host[:port] (\"https://app.example.com\")".into());
    };
    let host = rest.strip_suffix('/').unwrap_or(rest);
    if scheme.is_empty() || host.is_empty() || host.contains(['/', '?', '#', '@']) {
        return not(format!(
            "is not an origin: an origin has no path, query or user; write \"{scheme}://HOST[:PORT]\""
        ));
    }
    let default_port = match scheme.to_ascii_lowercase().as_str() {
        "https" => ":443",
        "http" => ":80",
        _ => return Ok(()),
    };
    match host.strip_suffix(default_port) {
        Some(bare) => not(format!(
            "names the default port, which a browser leaves out of Origin: write \"{scheme}://{bare}\""
        )),
        None => Ok(()),
    }
}

/// Whether a server URL names the listener at `listen` (an address, or `localhost` for a
/// loopback listener; an unspecified listener takes every loopback address): a gateway in
/// front of itself would send each request back to itself, and on again, until connections
/// and memory ran out.
pub fn names_listener(url: &str, listen: SocketAddr) -> bool {
    let Ok(uri) = parse_upstream_url(url) else {
        return false;
    };
    let default_port = if uri.scheme_str() == Some("https") {
        443
    } else {
        80
    };
    if uri.port_u16().unwrap_or(default_port) != listen.port() {
        return false;
    }
    let host = uri.host().unwrap_or_default();
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let at = listen.ip();
    match host.parse::<std::net::IpAddr>() {
        Ok(ip) => ip == at || (ip.is_loopback() && at.is_unspecified()),
        Err(_) => {
            host.eq_ignore_ascii_case("localhost") && (at.is_loopback() || at.is_unspecified())
        }
    }
}

/// An upstream URL must be absolute `http://` or `https://`: saying so at the start beats
/// failing on the first request.
/// One that does not parse (`localhost/mcp`, a scheme left out) is told the same way.
pub fn parse_upstream_url(url: &str) -> Result<http::Uri, ConfigError> {
    let uri = url.parse::<http::Uri>().ok();
    match uri {
        Some(uri)
            if matches!(uri.scheme_str(), Some("http" | "https")) && uri.authority().is_some() =>
        {
            Ok(uri)
        }
        _ => Err(ConfigError(format!(
            "upstream URL {url:?} must look like http://host:port/mcp or https://host/mcp"
        ))),
    }
}

#[derive(Debug, thiserror::Error)]
#[error("configuration: {0}")]
pub struct ConfigError(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_url_that_names_the_listener_is_told_apart() {
        let at = |a: &str| a.parse::<SocketAddr>().unwrap();
        for (url, listen) in [
            ("http://127.0.0.1:8080/mcp", "127.0.0.1:8080"),
            ("http://LOCALHOST:8080/mcp", "127.0.0.1:8080"),
            ("http://127.0.0.1:8080/mcp", "0.0.0.0:8080"),
            ("http://[::1]:8080/mcp", "[::1]:8080"),
            ("http://localhost:8080/mcp", "[::]:8080"),
            ("https://10.0.0.5/mcp", "10.0.0.5:443"),
        ] {
            assert!(names_listener(url, at(listen)), "{url} at {listen}");
        }
        for (url, listen) in [
            ("http://127.0.0.1:8081/mcp", "127.0.0.1:8080"),
            ("http://127.0.0.2:8080/mcp", "127.0.0.1:8080"),
            ("http://10.0.0.5:8080/mcp", "0.0.0.0:8080"),
            ("http://mcp.internal:8080/mcp", "0.0.0.0:8080"),
            ("https://10.0.0.5/mcp", "10.0.0.5:80"),
        ] {
            assert!(!names_listener(url, at(listen)), "{url} at {listen}");
        }
    }

    #[test]
    fn a_secret_is_read_only_from_a_regular_file() {
        let dir = std::env::temp_dir().join(format!("toolgate-fifo-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("token");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let path = fifo.display().to_string();
        let e = secret("auth.tokens[0]", None, Some(&path)).unwrap_err();
        assert!(e.0.contains("is not a regular file"), "{e}");
        let e = secret("auth.tokens[0]", None, Some(&dir.display().to_string())).unwrap_err();
        assert!(e.0.contains("is not a regular file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn defaults_are_safe() {
        let c = Config::default();
        assert!(c.listen.ip().is_loopback());
        assert_eq!(c.validation.mode, Mode::Enforce);
        assert!(c.validation.coerce);
        assert_eq!(c.limits.max_body_bytes, 4 * 1024 * 1024);
    }

    #[test]
    fn tool_overrides_fall_back_to_global() {
        let mut v = Validation::default();
        v.tools.insert(
            "x".into(),
            ToolPolicy {
                mode: Some(Mode::Audit),
                coerce: None,
                ..Default::default()
            },
        );
        assert_eq!(
            (v.policy_for("x").mode, v.policy_for("x").coerce),
            (Mode::Audit, true)
        );
        assert_eq!(
            (v.policy_for("y").mode, v.policy_for("y").coerce),
            (Mode::Enforce, true)
        );
    }

    #[test]
    fn upstream_overrides_merge_over_global() {
        let mut g = Validation::default();
        g.tools.insert(
            "a".into(),
            ToolPolicy {
                mode: Some(Mode::Off),
                ..Default::default()
            },
        );
        let mut o = ValidationOverride {
            mode: Some(Mode::Audit),
            ..Default::default()
        };
        o.tools.insert(
            "b".into(),
            ToolPolicy {
                coerce: Some(false),
                ..Default::default()
            },
        );
        let v = g.with(&o);
        assert_eq!(
            (v.policy_for("a").mode, v.policy_for("a").coerce),
            (Mode::Off, true)
        );
        assert_eq!(
            (v.policy_for("b").mode, v.policy_for("b").coerce),
            (Mode::Audit, false)
        );
        assert_eq!(
            (v.policy_for("c").mode, v.policy_for("c").coerce),
            (Mode::Audit, true)
        );
    }

    #[test]
    fn allow_and_deny_lists() {
        let v = Validation {
            allow_tools: vec!["fs_*".into(), "add".into()],
            deny_tools: vec!["fs_delete".into()],
            ..Default::default()
        };
        assert!(v.allows("add") && v.allows("fs_read"));
        assert!(!v.allows("fs_delete") && !v.allows("book"));
        assert!(Validation::default().allows("anything"));
    }

    #[test]
    fn bad_urls_are_explained() {
        assert!(parse_upstream_url("https://x/mcp").is_ok());
        assert!(
            parse_upstream_url("ftp://x/mcp")
                .unwrap_err()
                .0
                .contains("https://host/mcp")
        );
        assert!(parse_upstream_url("localhost:3000").is_err());
        assert!(parse_upstream_url("http://127.0.0.1:3000/mcp").is_ok());
    }

    #[test]
    fn the_example_file_is_the_reference() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/toolgate.toml");
        let file = std::fs::read_to_string(&path).unwrap();
        assert!(
            file == reference::example(),
            "config/toolgate.toml is not `toolgate config example`'s output: run it again"
        );
        let c = Config::load(Some(&path), &Overrides::default()).unwrap();
        assert_eq!(c.validation.mode, Mode::Enforce);
    }
}
