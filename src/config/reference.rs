//! The configuration's reference, kept beside the types it describes: every key with one line
//! on what it does. `toolgate config example` prints it as an annotated file whose values are
//! the defaults of [`Config::default`] (read from the value itself, so they cannot drift), and
//! a key the file names that is not here is refused with the nearest one it may mean. A test
//! fails when a field of [`Config`] has no line here.
//!
//! Paths: `a.b` is key `b` of table `[a]`; `x[]` is an array of tables (`[[x]]`); `NAME` is
//! a name the operator chooses (a client, a tool).

use super::Config;
use crate::text::edit_distance_within;
use serde_json::Value;
use std::fmt::Write;

/// One key: its path, what it does, and the value the example shows when it has no default.
struct Key {
    path: &'static str,
    doc: &'static str,
    example: &'static str,
}

const fn key(path: &'static str, doc: &'static str, example: &'static str) -> Key {
    Key { path, doc, example }
}

/// Every key, in the order the example shows them (a table's keys together, top-level keys
/// first, as TOML wants them).
#[rustfmt::skip]
const KEYS: &[Key] = &[
    key("listen", "Where clients connect (IP:PORT, or HOST:PORT). Loopback unless clients are remote; then set allowed_origins and authentication.", ""),
    key("upstream", "The HTTP MCP server served on /mcp (or --upstream URL).", "\"http://127.0.0.1:3000/mcp\""),
    key("upstream_transport", "The transport it speaks: \"streamable-http\", or \"sse\" for the HTTP+SSE transport of 2024-11-05, served as a stdio server is (--upstream-transport).", ""),
    key("command", "Or a stdio MCP server toolgate starts, as an array: program, then arguments (or `-- CMD` on the command line).", ""),
    key("admin_listen", "The admin listener (/healthz, /readyz, /metrics), or \"off\".", ""),
    key("allowed_origins", "Browser origins allowed besides localhost ones; \"*\" allows any.", ""),

    key("limits.max_body_bytes", "Largest request body accepted; larger ones get 413.", ""),
    key("limits.max_response_bytes", "Largest server answer read for the rules (larger ones pass through unread); over stdio, the longest line a server may send.", ""),
    key("limits.max_sse_event_bytes", "Largest SSE event inspected; a larger one switches its stream to raw pass-through.", ""),
    key("limits.max_schema_bytes", "Largest inputSchema compiled; a larger one counts as not compiling.", ""),
    key("limits.upstream_timeout", "How long a server may take: its response head, then the whole of a JSON answer.", ""),
    key("limits.stream_gap_timeout", "Longest silence between two events of an SSE answer to a request.", ""),
    key("limits.header_timeout", "How long a client connection may take to send a request head (the first from its accept).", ""),
    key("limits.body_timeout", "How long a request's whole body may take to arrive once its head has; 408 past it.", ""),
    key("limits.idle_timeout", "How long a client connection may stay open with no request in service.", ""),
    key("limits.send_timeout", "How long a client may take none of what waits for it (an answer, an event); then its connection is closed.", ""),
    key("limits.max_connections", "Client connections at once; past it, the oldest that has sent no request makes room, else more wait (restart to change).", ""),
    key("limits.max_scopes", "Sessions and credentials whose tool catalogs are kept.", ""),
    key("limits.max_list_pages", "Most tools/list pages fetched in one listing.", ""),
    key("limits.max_catalog_bytes", "Most bytes all tool catalogs are counted as; the least recently listed are dropped first.", ""),
    key("limits.max_request_bytes_in_flight", "Most bytes of request bodies held at once, every client's together, and apart of answers read whole; past it, 503, or answers wait.", ""),
    key("limits.shutdown_grace", "On SIGTERM or SIGINT, how long in-flight requests and streams may take.", ""),

    key("stdio.max_sessions", "serve -- CMD: sessions (one child each) at once; more get 503.", ""),
    key("stdio.max_sessions_per_client", "Of those, most one client holds (its name, or its address without auth); more get 429.", ""),
    key("stdio.idle_timeout", "A session unused this long is ended and its child stopped.", ""),
    key("stdio.shutdown_grace", "How long a child gets after its stdin closes, and again after SIGTERM.", ""),
    key("stdio.max_in_flight", "toolgate stdio: messages in flight at once; then stdin waits.", ""),

    key("validation.mode", "enforce (answer invalid calls) | audit (forward, log and count them) | off.", ""),
    key("validation.coerce", "Turn \"10\" into 10, 2.0 into 2 (and the like) where the schema wants it, then forward.", ""),
    key("validation.answer", "How an invalid call is answered: tool_error (SEP-1303, isError) | protocol_error (-32602).", ""),
    key("validation.on_compile_error", "A tool whose schema does not compile: forward its calls unvalidated | reject them.", ""),
    key("validation.unknown_dialect", "A $schema naming an unknown dialect: reject (does not compile) | draft202012.", ""),
    key("validation.validate_formats", "Check `format` (date, email, uri, ...).", ""),
    key("validation.max_errors", "Violations examined and reported for one call.", ""),
    key("validation.output", "Check structuredContent against outputSchema: off | audit | enforce.", ""),
    key("validation.undeclared_properties", "An argument the schema does not declare: reject_typos (refused when close to a declared name) | reject | allow.", ""),
    key("validation.invalid_tool_schemas", "A listed tool whose inputSchema is invalid: hide (not listed, calls answered as unknown) | forward.", ""),
    key("validation.allow_tools", "Only these tools are reachable (`*` at the end matches a prefix); empty allows all.", ""),
    key("validation.deny_tools", "These tools are not reachable, and not listed.", ""),

    key("validation.tools.NAME.mode", "This tool's own validation.mode.", "\"audit\""),
    key("validation.tools.NAME.coerce", "This tool's own validation.coerce.", "false"),
    key("validation.tools.NAME.undeclared_properties", "This tool's own validation.undeclared_properties.", "\"allow\""),
    key("validation.tools.NAME.invalid_tool_schemas", "This tool's own validation.invalid_tool_schemas.", "\"forward\""),
    key("validation.tools.NAME.extra_schema", "A JSON Schema (as JSON text) the arguments must also satisfy.", "'{\"properties\": {\"limit\": {\"maximum\": 50}}}'"),
    key("validation.tools.NAME.paths[].argument", "An argument holding a filesystem path: a top-level name or a JSON pointer.", "\"path\""),
    key("validation.tools.NAME.paths[].root", "The directory that path must stay inside after normalization.", "\"/workspace\""),

    key("errors.rewrite", "Rewrite server errors into the shapes the spec asks for.", ""),
    key("errors.mask_internal", "Replace server error text (and toolgate's own) by a reference; the text is logged under it.", ""),

    key("log.format", "human | json (to stderr).", ""),
    key("log.level", "An EnvFilter directive; RUST_LOG wins when set.", ""),
    key("log.access", "One line per request (never arguments, results or tokens).", ""),

    key("reload.watch", "Reload when this file's content changes (SIGHUP always reloads).", ""),
    key("reload.interval", "How often the file is read to see whether it changed (at least 100ms).", ""),

    key("tls.cert_file", "The client listener's certificate chain (PEM); TLS is off without [tls].", "\"/etc/toolgate/tls/tls.crt\""),
    key("tls.key_file", "Its private key (PEM).", "\"/etc/toolgate/tls/tls.key\""),
    key("tls.client_ca_file", "Clients must present a certificate from this CA (PEM).", "\"/etc/toolgate/tls/clients-ca.crt\""),

    key("upstream_tls.ca_file", "PEM CA certificates trusted for https:// servers, besides the system's roots.", "\"/etc/toolgate/upstream-ca.crt\""),
    key("upstream_tls.only_ca_file", "Trust only ca_file, not the system's roots.", ""),
    key("upstream_tls.client_cert_file", "A client certificate chain (PEM) for servers that ask for one.", "\"/etc/toolgate/client.crt\""),
    key("upstream_tls.client_key_file", "Its private key (PEM).", "\"/etc/toolgate/client.key\""),
    key("upstream_tls.server_name", "The name the server's certificate must carry, when it is not the URL's host.", "\"mcp.internal\""),

    key("shared_state.redis_url", "Redis or Valkey holding the rate-limit buckets all replicas share.", "\"redis://127.0.0.1:6379/0\""),
    key("shared_state.ca_file", "PEM CA certificates trusted for a rediss:// URL besides the system's roots (a Redis behind a private CA).", "\"/etc/toolgate/redis-ca.crt\""),
    key("shared_state.client_cert_file", "A PEM certificate chain, for a rediss:// Redis that requires client certificates.", "\"/etc/toolgate/redis-client.crt\""),
    key("shared_state.client_key_file", "Its private key (PEM).", "\"/etc/toolgate/redis-client.key\""),
    key("shared_state.on_unavailable", "When Redis does not answer: local (this replica's buckets) | deny.", ""),

    key("telemetry.otlp_endpoint", "OTLP/HTTP collector for traces; unset, OTEL_EXPORTER_OTLP_* is used, else none.", "\"http://127.0.0.1:4318\""),
    key("telemetry.tls.ca_file", "As upstream_tls.ca_file, for an https:// collector.", "\"/etc/toolgate/otel-ca.crt\""),
    key("telemetry.tls.only_ca_file", "As upstream_tls.only_ca_file.", ""),
    key("telemetry.tls.client_cert_file", "As upstream_tls.client_cert_file.", "\"/etc/toolgate/otel-client.crt\""),
    key("telemetry.tls.client_key_file", "As upstream_tls.client_key_file.", "\"/etc/toolgate/otel-client.key\""),
    key("telemetry.tls.server_name", "As upstream_tls.server_name.", "\"otel.internal\""),

    key("auth.public_url", "Where clients reach toolgate; serves RFC 9728 metadata and points WWW-Authenticate at it.", "\"https://mcp.example.com\""),
    key("auth.authorization_servers", "Authorization servers named in that metadata.", ""),
    key("auth.required_scopes", "Scopes every token must carry; else 403.", ""),
    key("auth.tokens[].name", "A static bearer token's client name, for [clients] and logs.", "\"ci-bot\""),
    key("auth.tokens[].env", "The environment variable holding the token.", "\"CI_BOT_TOKEN\""),
    key("auth.tokens[].file", "Or a regular file holding it.", "\"/run/secrets/ci-bot\""),
    key("auth.jwt.issuer", "JWT bearer tokens: the `iss` every token must carry.", "\"https://login.example.com\""),
    key("auth.jwt.jwks_url", "The issuer's keys, fetched (https, or http to loopback).", "\"https://login.example.com/.well-known/jwks.json\""),
    key("auth.jwt.jwks_file", "Or a JWKS document on disk.", "\"/etc/toolgate/jwks.json\""),
    key("auth.jwt.ca_file", "PEM CA certificates trusted for jwks_url besides the system's roots (an issuer behind a private CA).", "\"/etc/toolgate/issuer-ca.crt\""),
    key("auth.jwt.audience", "Accepted `aud` values; empty: each endpoint's URL under public_url.", "[\"https://mcp.example.com/mcp\"]"),
    key("auth.jwt.identity_claim", "The claim that names the client for [clients].", "\"sub\""),
    key("auth.jwt.refresh", "How often the JWKS is fetched again.", "\"10m\""),
    key("auth.jwt.leeway", "Clock skew tolerated on exp and nbf.", "\"30s\""),
    key("auth.upstream_header.name", "The header the server on /mcp gets in place of the client's token (each of [[upstreams]] has its own).", "\"authorization\""),
    key("auth.upstream_header.env", "The environment variable holding its value.", "\"UPSTREAM_AUTHORIZATION\""),
    key("auth.upstream_header.file", "Or a regular file holding it.", "\"/run/secrets/upstream\""),

    key("clients.NAME.allow_tools", "Per client (a token's name, a JWT claim, or \"*\" for any other): only these tools.", "[\"search*\"]"),
    key("clients.NAME.deny_tools", "These tools are not reachable for it.", "[\"delete_*\"]"),
    key("clients.NAME.rate_limit", "Calls per tool: N/second, N/minute or N/hour.", "\"60/minute\""),
    key("clients.NAME.tool_rate_limits", "Per-tool rates that replace rate_limit for those tools.", "{ search = \"10/second\" }"),
    key("clients.NAME.upstreams", "Only these servers, by name (\"default\" is the one on /mcp); empty, all (as allow_tools). Needs [auth].", "[\"default\", \"search\"]"),

    key("upstreams[].name", "Further servers, each on /<name>/mcp: its name.", "\"billing\""),
    key("upstreams[].url", "Its URL (http:// or https://).", "\"http://127.0.0.1:3001/mcp\""),
    key("upstreams[].transport", "As upstream_transport, for its url.", "\"streamable-http\""),
    key("upstreams[].command", "Or a stdio server toolgate starts for it, as command: one child per session, within [stdio]'s bounds or its own stdio.", "[\"npx\", \"-y\", \"@modelcontextprotocol/server-filesystem\", \"/srv/files\"]"),
    key("upstreams[].upstream_env", "A stdio server's own variables of toolgate's environment: it alone is given them.", "[\"GITHUB_TOKEN\"]"),
    key("upstreams[].tls.ca_file", "Its own [upstream_tls], instead of the global one.", "\"/etc/toolgate/billing-ca.crt\""),
    key("upstreams[].tls.only_ca_file", "As upstream_tls.only_ca_file.", "true"),
    key("upstreams[].tls.client_cert_file", "As upstream_tls.client_cert_file.", "\"/etc/toolgate/billing-client.crt\""),
    key("upstreams[].tls.client_key_file", "As upstream_tls.client_key_file.", "\"/etc/toolgate/billing-client.key\""),
    key("upstreams[].tls.server_name", "As upstream_tls.server_name.", "\"billing.internal\""),
    key("upstreams[].upstream_header.name", "Its own credential in place of the client's token (auth.upstream_header is the /mcp server's only).", "\"authorization\""),
    key("upstreams[].upstream_header.env", "As auth.upstream_header.env.", "\"BILLING_AUTHORIZATION\""),
    key("upstreams[].upstream_header.file", "As auth.upstream_header.file.", "\"/run/secrets/billing\""),
    key("upstreams[].limits.upstream_timeout", "Its own limits.upstream_timeout: a server whose tools run long, beside quick ones; a key left out keeps the global value.", "\"10m\""),
    key("upstreams[].limits.stream_gap_timeout", "Its own limits.stream_gap_timeout (an HTTP server).", "\"15m\""),
    key("upstreams[].stdio.max_sessions", "A stdio server's own stdio.max_sessions; a key left out keeps the global value.", "4"),
    key("upstreams[].stdio.max_sessions_per_client", "Its own stdio.max_sessions_per_client.", "2"),
    key("upstreams[].stdio.idle_timeout", "Its own stdio.idle_timeout.", "\"2m\""),
    key("upstreams[].validation.mode", "Its own validation.mode; a key left out keeps the global value.", "\"audit\""),
    key("upstreams[].validation.coerce", "Its own validation.coerce.", "false"),
    key("upstreams[].validation.answer", "Its own validation.answer.", "\"protocol_error\""),
    key("upstreams[].validation.on_compile_error", "Its own validation.on_compile_error.", "\"reject\""),
    key("upstreams[].validation.output", "Its own validation.output.", "\"enforce\""),
    key("upstreams[].validation.undeclared_properties", "Its own validation.undeclared_properties.", "\"reject\""),
    key("upstreams[].validation.invalid_tool_schemas", "Its own validation.invalid_tool_schemas.", "\"forward\""),
    key("upstreams[].validation.allow_tools", "Its own validation.allow_tools.", "[\"invoice_*\"]"),
    key("upstreams[].validation.deny_tools", "Its own validation.deny_tools.", "[\"invoice_delete\"]"),
    key("upstreams[].validation.tools.NAME.mode", "Per tool, merged over [validation.tools], as there.", "\"off\""),
    key("upstreams[].validation.tools.NAME.coerce", "As validation.tools.NAME.coerce.", "false"),
    key("upstreams[].validation.tools.NAME.undeclared_properties", "As validation.tools.NAME.undeclared_properties.", "\"allow\""),
    key("upstreams[].validation.tools.NAME.invalid_tool_schemas", "As validation.tools.NAME.invalid_tool_schemas.", "\"forward\""),
    key("upstreams[].validation.tools.NAME.extra_schema", "As validation.tools.NAME.extra_schema.", "'{\"required\": [\"account\"]}'"),
    key("upstreams[].validation.tools.NAME.paths[].argument", "As validation.tools.NAME.paths[].argument.", "\"file\""),
    key("upstreams[].validation.tools.NAME.paths[].root", "As validation.tools.NAME.paths[].root.", "\"/srv/invoices\""),
];

/// Tables whose keys are names the operator chooses, and the name the example shows.
const NAMED: &[(&str, &str)] = &[
    ("clients", "\"*\""),
    ("validation.tools", "search"),
    ("upstreams[].validation.tools", "invoice_create"),
];

fn named(section: &str) -> Option<&'static str> {
    NAMED.iter().find(|(s, _)| *s == section).map(|(_, n)| *n)
}

/// The table a path belongs to (`""` for the top level).
fn section(path: &str) -> &str {
    path.rsplit_once('.').map_or("", |(s, _)| s)
}

fn leaf(path: &str) -> &str {
    path.rsplit_once('.').map_or(path, |(_, l)| l)
}

/// The default of `path`, when it has one: read from [`Config::default`].
fn default_of(defaults: &Value, path: &str) -> Option<String> {
    if path.contains("[]") || path.contains("NAME") {
        return None;
    }
    let v = path.split('.').try_fold(defaults, |v, k| v.get(k))?;
    match v {
        Value::Null => None,
        v => Some(toml_value(v)),
    }
}

/// A JSON value written as TOML (the defaults hold strings, numbers, booleans and arrays).
fn toml_value(v: &Value) -> String {
    match v {
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(toml_value).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(m) => {
            let items: Vec<String> = m
                .iter()
                .map(|(k, v)| format!("{k} = {}", toml_value(v)))
                .collect();
            format!("{{ {} }}", items.join(", "))
        }
        v => v.to_string(),
    }
}

/// A table's header as the example writes it: `[a.b]`, `[[x]]`, with names filled in.
fn header(section: &str) -> String {
    let mut parts = Vec::new();
    let mut walked = String::new();
    for part in section.split('.') {
        let name = match part {
            "NAME" => named(&walked).unwrap_or("name").to_string(),
            p => p.trim_end_matches("[]").to_string(),
        };
        parts.push(name);
        if !walked.is_empty() {
            walked.push('.');
        }
        walked.push_str(part);
    }
    match section.ends_with("[]") {
        true => format!("[[{}]]", parts.join(".")),
        false => format!("[{}]", parts.join(".")),
    }
}

/// The annotated configuration `toolgate config example` prints: every key, its default
/// set, or an example commented out where it has none.
pub fn example() -> String {
    let defaults = serde_json::to_value(Config::default()).expect("the defaults serialize");
    let mut out = String::from(
        "# toolgate configuration: every key, with its default (`toolgate config example`).\n\
         # Keys shown commented out have no default; each is an example of its value.\n\
         # Layers: these defaults < this file < TOOLGATE_* environment variables (nested keys\n\
         # joined with \"__\", e.g. TOOLGATE_VALIDATION__MODE=audit) < command-line flags.\n\
         # Check a file with `toolgate config check FILE`.\n\
         # A forward proxy to servers is not set here: HTTPS_PROXY, HTTP_PROXY and NO_PROXY are\n\
         # read from the environment (docs/configuration.md).\n",
    );
    let mut current = None;
    for k in KEYS {
        let sec = section(k.path);
        if current != Some(sec) {
            current = Some(sec);
            out.push('\n');
            if !sec.is_empty() {
                let set = KEYS
                    .iter()
                    .any(|o| section(o.path) == sec && default_of(&defaults, o.path).is_some());
                let mark = if set { "" } else { "# " };
                let _ = writeln!(out, "{mark}{}", header(sec));
            }
        }
        let _ = writeln!(out, "# {}", k.doc);
        match default_of(&defaults, k.path) {
            Some(v) => {
                let _ = writeln!(out, "{} = {v}", leaf(k.path));
            }
            None => {
                let _ = writeln!(out, "# {} = {}", leaf(k.path), k.example);
            }
        }
    }
    out
}

/// Where in the reference a table or key of a file is.
enum Found {
    Key,
    Table(String),
    Tables(String),
    Unknown,
}

fn find(schema: &str, value: &toml::Value) -> Found {
    if KEYS.iter().any(|k| k.path == schema) {
        return Found::Key;
    }
    let under = |s: &str| KEYS.iter().any(|k| k.path.starts_with(&format!("{s}.")));
    match value {
        toml::Value::Table(_) if under(schema) => Found::Table(schema.to_string()),
        toml::Value::Array(items)
            if under(&format!("{schema}[]")) && items.iter().all(toml::Value::is_table) =>
        {
            Found::Tables(format!("{schema}[]"))
        }
        _ => Found::Unknown,
    }
}

/// Every key of a configuration file that toolgate does not know, one line each, with the
/// nearest known key of the same table when one is close.
pub fn unknown_keys(file: &toml::Table) -> Vec<String> {
    let mut problems = Vec::new();
    walk(file, "", "", &mut problems);
    problems
}

fn walk(table: &toml::Table, schema: &str, shown: &str, problems: &mut Vec<String>) {
    for (name, value) in table {
        let child = match (named(schema), schema.is_empty()) {
            (Some(_), _) => format!("{schema}.NAME"),
            (None, true) => name.clone(),
            (None, false) => format!("{schema}.{name}"),
        };
        let here = match shown.is_empty() {
            true => name.clone(),
            false => format!("{shown}.{name}"),
        };
        match (find(&child, value), value) {
            (Found::Key, _) => {}
            (Found::Table(s), toml::Value::Table(t)) => walk(t, &s, &here, problems),
            (Found::Tables(s), toml::Value::Array(items)) => {
                for (i, t) in items.iter().filter_map(toml::Value::as_table).enumerate() {
                    walk(t, &s, &format!("{here}[{i}]"), problems);
                }
            }
            _ => problems.push(
                misshapen(&child, value, &here).unwrap_or_else(|| unknown(schema, name, &here)),
            ),
        }
    }
}

/// The line for a known table or list of tables written as something else (`tokens = ["x"]`
/// for `[[auth.tokens]]`): the name is right, so no other name is offered.
fn misshapen(child: &str, value: &toml::Value, here: &str) -> Option<String> {
    let holds = |prefix: String| KEYS.iter().any(|k| k.path.starts_with(&prefix));
    let (shape, header) = if holds(format!("{child}[].")) {
        ("a list of tables", format!("[[{here}]]"))
    } else if holds(format!("{child}.")) {
        ("a table", format!("[{here}]"))
    } else {
        return None;
    };
    let found = match value {
        toml::Value::Array(items) => match items.iter().find(|i| !i.is_table()) {
            Some(item) => format!("a list holding {}", a(item.type_str())),
            None => "a list".to_string(),
        },
        v => a(v.type_str()),
    };
    // A path through a list of tables (`upstreams[0].limits`), or with a name TOML must
    // quote, is shown with no header: it would not be written as shown.
    let bare = |c: char| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.');
    let written = match here.chars().all(bare) {
        true => format!(", written {header}"),
        false => String::new(),
    };
    Some(format!("{here} must be {shape}{written}, not {found}"))
}

/// A TOML type's name with its article.
fn a(type_name: &str) -> String {
    match type_name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        true => format!("an {type_name}"),
        false => format!("a {type_name}"),
    }
}

/// The line for an unknown key `name`, shown as `here`, in table `schema`.
fn unknown(schema: &str, name: &str, here: &str) -> String {
    let mut siblings: Vec<&str> = KEYS
        .iter()
        .filter_map(|k| {
            let rest = match schema.is_empty() {
                true => k.path,
                false => k.path.strip_prefix(schema)?.strip_prefix('.')?,
            };
            rest.split('.').next().map(|s| s.trim_end_matches("[]"))
        })
        .collect();
    siblings.dedup();
    let place = match here.rsplit_once('.') {
        Some((table, _)) => format!("{table}."),
        None => String::new(),
    };
    match nearest(name, &siblings) {
        Some(s) => format!("unknown key {here}: did you mean {place}{s}?"),
        None => format!("unknown key {here}"),
    }
}

/// The one of `known` nearest what was `typed`, case aside: within a third of its length in
/// edits (two or three), else one it begins (`rate` for `rate_limit`).
pub(crate) fn nearest<'k>(typed: &str, known: &[&'k str]) -> Option<&'k str> {
    let lower = typed.to_lowercase();
    let chars: Vec<char> = lower.chars().collect();
    let allowed = (chars.len() / 3).clamp(2, 3);
    let by_edits = known.iter().filter_map(|k| {
        let c: Vec<char> = k.chars().collect();
        edit_distance_within(&chars, &c, allowed).map(|d| (d, *k))
    });
    match by_edits.min_by_key(|(d, _)| *d) {
        Some((_, k)) => Some(k),
        None => (known.iter())
            .find(|k| lower.len() >= 3 && k.starts_with(&lower))
            .copied(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A configuration with every optional table present and one element in every list of
    /// tables, so that serializing it names every field of [`Config`].
    fn every_field() -> Config {
        let text = uncommented(&example());
        let table: toml::Table = toml::from_str(&text).expect("the uncommented example parses");
        let mut config: Config = table.try_into().expect("the uncommented example is typed");
        config.upstream = Some("http://127.0.0.1:3000/mcp".into());
        config
    }

    /// The example with every commented-out key and table set.
    fn uncommented(example: &str) -> String {
        example
            .lines()
            .map(|l| match l.strip_prefix("# ") {
                Some(rest)
                    if rest.starts_with('[')
                        || rest.split_once(" = ").is_some_and(|(k, _)| {
                            k.chars().all(|c| c.is_ascii_lowercase() || c == '_')
                        }) =>
                {
                    rest
                }
                _ => l,
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// The reference's paths of every field in `v`.
    fn paths(v: &Value, at: &str, out: &mut Vec<String>) {
        let Value::Object(m) = v else {
            out.push(at.to_string());
            return;
        };
        if KEYS.iter().any(|k| k.path == at) {
            out.push(at.to_string());
            return;
        }
        for (k, v) in m {
            let name = if named(at).is_some() { "NAME" } else { k };
            let child = if at.is_empty() {
                name.to_string()
            } else {
                format!("{at}.{name}")
            };
            match v {
                Value::Array(items) if items.first().is_some_and(Value::is_object) => {
                    paths(&items[0], &format!("{child}[]"), out)
                }
                v => paths(v, &child, out),
            }
        }
    }

    #[test]
    fn every_field_of_the_configuration_is_in_the_reference() {
        let all = serde_json::to_value(every_field()).unwrap();
        let mut found = Vec::new();
        paths(&all, "", &mut found);
        let missing: Vec<_> = found
            .iter()
            .filter(|p| !KEYS.iter().any(|k| k.path == p.as_str()))
            .collect();
        assert!(missing.is_empty(), "not in the reference: {missing:?}");
        let stale: Vec<_> = KEYS
            .iter()
            .filter(|k| !found.iter().any(|p| p == k.path))
            .map(|k| k.path)
            .collect();
        assert!(stale.is_empty(), "in the reference, not a field: {stale:?}");
    }

    #[test]
    fn the_example_sets_the_defaults() {
        let table: toml::Table = toml::from_str(&example()).unwrap();
        assert!(unknown_keys(&table).is_empty());
        let config: Config = table.try_into().unwrap();
        assert_eq!(
            serde_json::to_value(config).unwrap(),
            serde_json::to_value(Config::default()).unwrap()
        );
    }

    #[test]
    fn an_unknown_key_names_the_nearest_known_one() {
        let file: toml::Table = toml::from_str(
            "listn = \"127.0.0.1:1\"\n[validation]\nmod = \"audit\"\n[validation.tools.x]\ncoerse = true\n\
             [[upstreams]]\nname = \"a\"\nurl = \"http://127.0.0.1:1/mcp\"\nvalidaton = {}\n[clients.bob]\nzzzzzz = 1\n",
        )
        .unwrap();
        let mut found = unknown_keys(&file);
        found.sort();
        assert_eq!(
            found,
            [
                "unknown key clients.bob.zzzzzz",
                "unknown key listn: did you mean listen?",
                "unknown key upstreams[0].validaton: did you mean upstreams[0].validation?",
                "unknown key validation.mod: did you mean validation.mode?",
                "unknown key validation.tools.x.coerse: did you mean validation.tools.x.coerce?",
            ]
        );
    }

    #[test]
    fn a_table_written_as_a_value_is_named_for_its_shape() {
        let file: toml::Table = toml::from_str(
            "upstreams = 5\n[auth]\ntokens = [\"x\"]\n[clients]\nbob = \"admin\"\n\
             [validation]\ntools = []\n",
        )
        .unwrap();
        let mut found = unknown_keys(&file);
        found.sort();
        assert_eq!(
            found,
            [
                "auth.tokens must be a list of tables, written [[auth.tokens]], not a list holding a string",
                "clients.bob must be a table, written [clients.bob], not a string",
                "upstreams must be a list of tables, written [[upstreams]], not an integer",
                "validation.tools must be a table, written [validation.tools], not a list",
            ]
        );
        // Shown with no header: none is written as shown.
        let nested: toml::Table = toml::from_str(
            "[[upstreams]]\nname = \"a\"\nlimits = 5\n[validation.tools]\n\"a b\" = true\n",
        )
        .unwrap();
        let mut found = unknown_keys(&nested);
        found.sort();
        assert_eq!(
            found,
            [
                "upstreams[0].limits must be a table, not an integer",
                "validation.tools.a b must be a table, not a boolean",
            ]
        );
    }
}
