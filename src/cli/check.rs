//! `toolgate check`: lists a server's tools the way the gateway would and reports what will
//! go wrong at runtime, for a server author's CI; given a gateway's configuration, each server
//! it names, with the settings the gateway applies to that server.
//!
//! Errors (exit status 1): a schema that does not compile with the gateway's settings, an
//! `inputSchema` that is not `{"type": "object"}` at its root, a tool name the spec forbids,
//! a name listed twice. Warnings: names some clients refuse (over 64 characters, or with
//! `/`), tools and properties without a description (the model reads them).

use serde::Serialize;
use serde_json::Value;
use std::collections::HashSet;
use toolgate::config::Config;
use toolgate::inspect::{self, CannotList, Entry, SchemaReading};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    Error,
    Warning,
    /// Worth knowing, not wrong: counted apart, never fails the check.
    Note,
}

#[derive(Debug, Serialize)]
pub struct Problem {
    pub tool: String,
    pub severity: Severity,
    pub kind: &'static str,
    pub message: String,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub upstream: String,
    pub tools: Vec<String>,
    pub errors: usize,
    pub warnings: usize,
    pub notes: usize,
    pub problems: Vec<Problem>,
}

/// A server `check` lists: an HTTP server's URL, or a stdio server's command and the
/// variables it alone is given (`upstream_env`).
pub enum Server {
    Http(String),
    Stdio {
        command: Vec<String>,
        own_env: Vec<String>,
    },
}

impl Server {
    /// How reports and errors name it: a stdio server by its program, its arguments elided,
    /// as the logs do (an argument may be a secret, and a report may land in a pod's log).
    pub fn label(&self) -> String {
        match self {
            Server::Http(url) => url.clone(),
            Server::Stdio { command, .. } => {
                let program = command.first().map(std::path::Path::new);
                let name = program.and_then(|p| p.file_name()).unwrap_or_default();
                let elided = if command.len() > 1 { " …" } else { "" };
                format!("{}{elided}", name.to_string_lossy())
            }
        }
    }

    /// Lists its tools as the gateway would, with `cfg`, and checks them.
    pub async fn check(&self, label: &str, cfg: &Config) -> Result<Report, CannotList> {
        let tools = match self {
            Server::Http(url) => inspect::tools_at_url(url, cfg).await?,
            Server::Stdio { command, own_env } => {
                inspect::tools_of_command(command, own_env, cfg).await?
            }
        };
        Ok(check_tools(label, &tools, cfg))
    }
}

/// A server to check: its name behind the gateway, how its report names it, and the
/// configuration the gateway applies to it.
pub struct ToCheck {
    pub name: String,
    pub label: String,
    pub server: Server,
    pub cfg: Config,
}

impl ToCheck {
    /// The server on `/mcp`, named `default`.
    pub fn on_mcp(server: Server, cfg: &Config) -> ToCheck {
        let label = server.label();
        ToCheck {
            name: "default".into(),
            label,
            server,
            cfg: cfg.clone(),
        }
    }
}

/// Every server a configuration names, each with the configuration the gateway applies to
/// it: the server on `/mcp`, then each of `[[upstreams]]`, named in its label, with its own
/// TLS, credential, validation settings and timeouts.
pub fn servers_of(cfg: &Config) -> Vec<ToCheck> {
    let mut servers = Vec::new();
    match (&cfg.upstream, cfg.command.is_empty()) {
        (Some(url), _) => servers.push(ToCheck::on_mcp(Server::Http(url.clone()), cfg)),
        (None, false) => {
            let server = Server::Stdio {
                command: cfg.command.clone(),
                own_env: Vec::new(),
            };
            servers.push(ToCheck::on_mcp(server, cfg))
        }
        (None, true) => {}
    }
    for u in &cfg.upstreams {
        let server = match &u.url {
            Some(url) => Server::Http(url.clone()),
            None => Server::Stdio {
                command: u.command.clone(),
                own_env: u.upstream_env.clone(),
            },
        };
        let label = format!("{} ({})", u.name, server.label());
        let (name, cfg) = (u.name.clone(), u.applied(cfg));
        servers.push(ToCheck {
            name,
            label,
            server,
            cfg,
        });
    }
    servers
}

/// Checks listed tool definitions with the gateway's settings in `cfg`.
pub fn check_tools(upstream: &str, tools: &[Entry], cfg: &Config) -> Report {
    let mut problems = Vec::new();
    let mut names = Vec::new();
    let mut seen = HashSet::new();
    for t in tools {
        let t = match t {
            Entry::Read(t) => t,
            Entry::Unread(name) => {
                let tool = name.clone().unwrap_or_default();
                problems.push(Problem {
                    tool: tool.clone(),
                    severity: Severity::Error,
                    kind: "definition",
                    message: "the tool's definition would hold more than 64 MiB once read: too costly to check (a client reading the listing pays as much)".into(),
                });
                names.push(tool);
                continue;
            }
        };
        let name = t.get("name").and_then(Value::as_str);
        let mut say = |severity, kind, message: String| {
            problems.push(Problem {
                tool: name.unwrap_or_default().to_string(),
                severity,
                kind,
                message,
            })
        };
        match name.filter(|_| t.is_object()) {
            Some(name) => check_tool(t, name, cfg, &mut seen, &mut say),
            None => say(
                Severity::Error,
                "definition",
                format!(
                    "{} is no tool definition: the gateway drops it from listings and learns the tools beside it",
                    entry(t)
                ),
            ),
        }
        names.push(name.unwrap_or_default().to_string());
    }
    let count = |s| problems.iter().filter(|p| p.severity == s).count();
    Report {
        upstream: upstream.to_string(),
        tools: names,
        errors: count(Severity::Error),
        warnings: count(Severity::Warning),
        notes: count(Severity::Note),
        problems,
    }
}

/// A listing's entry that is no tool, as a sentence names it.
fn entry(t: &Value) -> String {
    let kind = |v: &Value| match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    };
    match t.get("name") {
        _ if !t.is_object() => format!("an entry that is {}", kind(t)),
        None => "an entry without a name".into(),
        Some(n) => format!("an entry whose name is {}", kind(n)),
    }
}

/// Where a check tells what it found of one tool: its severity, its kind, and the sentence.
type Say<'a> = dyn FnMut(Severity, &'static str, String) + 'a;

/// One listed tool: its name, its description, and its schemas.
fn check_tool(t: &Value, name: &str, cfg: &Config, seen: &mut HashSet<String>, say: &mut Say<'_>) {
    if let Some(why) = name_error(name) {
        say(Severity::Error, "name", why);
    } else if name.len() > 64 || name.contains('/') {
        say(
            Severity::Warning,
            "name",
            format!(
                "tool name {name:?} is refused by some clients and the conformance suite: keep it to 64 characters from A-Z a-z 0-9 _ - ."
            ),
        );
    }
    if !seen.insert(name.to_owned()) {
        say(
            Severity::Error,
            "duplicate",
            format!("tool name {name:?} is listed more than once"),
        );
    }
    if t.get("description")
        .and_then(Value::as_str)
        .is_none_or(|d| d.trim().is_empty())
    {
        say(
            Severity::Warning,
            "description",
            "the tool has no description".into(),
        );
    }
    match t.get("inputSchema") {
        None => say(
            Severity::Error,
            "input_schema",
            "the tool has no inputSchema".into(),
        ),
        Some(schema) => check_input_schema(&inspect::read_schema(schema, cfg), schema, say),
    }
    let output = (t.get("outputSchema"))
        .filter(|o| !o.is_null())
        .map(|o| inspect::read_schema(o, cfg));
    if let Some(levels) = output.as_ref().and_then(|o| o.levels) {
        say(
            Severity::Warning,
            "output_schema",
            format!(
                "outputSchema's references multiply the checks at each level of a value (two ways lead round to one place through the same member): results are checked up to {levels} levels deep, and a deeper one goes unchecked"
            ),
        );
    }
    if let Some(o) = output.as_ref().filter(|o| !o.unchecked_patterns.is_empty()) {
        say(
            Severity::Warning,
            "output_schema",
            format!(
                "outputSchema has patterns toolgate's regular-expression engine cannot run (a lookaround, a backreference) at {}: results are checked without them",
                o.unchecked_patterns.join(", ")
            ),
        );
    }
    match output.map(|o| (o.invalid, o.uncompiled)) {
        Some((Some(why), _)) => say(
            Severity::Error,
            "invalid_schema",
            format!(
                "outputSchema is invalid: {why}; toolgate lists this tool without it (validation.invalid_tool_schemas = \"hide\")"
            ),
        ),
        Some((None, Some(why))) => say(
            Severity::Error,
            "output_schema",
            format!("outputSchema does not compile: {why}"),
        ),
        _ => {}
    }
}

/// A tool's `inputSchema`: whether it is valid and compiles, where it is left open, and
/// which properties it does not describe.
fn check_input_schema(read: &SchemaReading, schema: &Value, say: &mut Say<'_>) {
    if let Some(why) = &read.invalid {
        say(
            Severity::Error,
            "invalid_schema",
            format!(
                "inputSchema is invalid: {why}; toolgate hides this tool from tools/list (validation.invalid_tool_schemas = \"hide\")"
            ),
        );
    } else if let Some(why) = &read.uncompiled {
        say(
            Severity::Error,
            "input_schema",
            format!(
                "inputSchema does not compile: {why}; calls to it follow validation.on_compile_error"
            ),
        );
    }
    if !read.unchecked_patterns.is_empty() {
        say(
            Severity::Warning,
            "input_schema",
            format!(
                "inputSchema has patterns toolgate's regular-expression engine cannot run (a lookaround, a backreference) at {}: toolgate does not check them, the server does, and the rest of the schema is checked",
                read.unchecked_patterns.join(", ")
            ),
        );
    }
    if let Some(levels) = read.levels {
        say(
            Severity::Warning,
            "input_schema",
            format!(
                "inputSchema's references multiply the checks at each level of a value (two ways lead round to one place through the same member): arguments are checked up to {levels} levels deep, and a deeper call follows validation.on_compile_error"
            ),
        );
    }
    if !read.open_places.is_empty() {
        say(
            Severity::Note,
            "open_properties",
            format!(
                "properties left open at {} (no \"additionalProperties\"): an argument not declared there passes the schema, and toolgate refuses it only when it looks like a misspelt one",
                read.open_places.join(", ")
            ),
        );
    }
    if !read.decimal_multiples.is_empty() {
        say(
            Severity::Note,
            "decimal_multiple",
            format!(
                "multipleOf of a decimal fraction at {}: toolgate judges it in decimal (19.99 is a multiple of 0.01), and a server that checks it with a validator dividing in binary floating point (Python's jsonschema, Ajv by default) refuses some multiples toolgate forwards",
                read.decimal_multiples.join(", ")
            ),
        );
    }
    let mut undocumented = Vec::new();
    undescribed(schema, schema, "", 0, &mut undocumented);
    for p in undocumented {
        say(
            Severity::Warning,
            "description",
            format!("property {p:?} has no description"),
        );
    }
}

/// The spec's tool-name rule (2025-11-25): 1 to 128 characters from A-Z a-z 0-9 _ - . (SEP-986
/// also allows `/`, so that is only a warning).
fn name_error(name: &str) -> Option<String> {
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | '/'));
    if name.is_empty() || name.len() > 128 || !ok_chars {
        Some(format!(
            "tool name {name:?} breaks the spec's rule: 1 to 128 characters from A-Z a-z 0-9 _ - ."
        ))
    } else {
        None
    }
}

/// Properties (at any depth, through local `$ref`s) without a `description`.
fn undescribed(root: &Value, s: &Value, at: &str, depth: usize, out: &mut Vec<String>) {
    if depth > 6 {
        return;
    }
    let s = match s
        .get("$ref")
        .and_then(Value::as_str)
        .and_then(|r| r.strip_prefix('#'))
    {
        Some(ptr) => root.pointer(ptr).unwrap_or(s),
        None => s,
    };
    if let Some(props) = s.get("properties").and_then(Value::as_object) {
        for (name, p) in props {
            let path = if at.is_empty() {
                name.clone()
            } else {
                format!("{at}.{name}")
            };
            let resolved = match p
                .get("$ref")
                .and_then(Value::as_str)
                .and_then(|r| r.strip_prefix('#'))
            {
                Some(ptr) => root.pointer(ptr).unwrap_or(p),
                None => p,
            };
            if p.get("description").is_none() && resolved.get("description").is_none() {
                out.push(path.clone());
            }
            undescribed(root, resolved, &path, depth + 1, out);
        }
    }
    if let Some(items) = s.get("items").filter(|i| i.is_object()) {
        undescribed(root, items, &format!("{at}[]"), depth + 1, out);
    }
}

impl Report {
    pub fn text(&self) -> String {
        let plural = |n: usize| if n == 1 { "" } else { "s" };
        let mut out = format!(
            "toolgate check {}: {} tools, {} error{}, {} warning{}",
            self.upstream,
            self.tools.len(),
            self.errors,
            plural(self.errors),
            self.warnings,
            plural(self.warnings),
        );
        if self.notes > 0 {
            out.push_str(&format!(", {} note{}", self.notes, plural(self.notes)));
        }
        out.push('\n');
        for p in &self.problems {
            let sev = match p.severity {
                Severity::Error => "error  ",
                Severity::Warning => "warning",
                Severity::Note => "note   ",
            };
            out.push_str(&format!("{sev}  {}: {}\n", p.tool, p.message));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn problems_are_found_and_graded() {
        let settings = Config::default();
        let tools = vec![
            json!({"name": "good", "description": "d", "inputSchema": {"type": "object", "properties": {"x": {"type": "string", "description": "x"}}, "additionalProperties": false}}),
            json!({"name": "bad name", "description": "d", "inputSchema": {"type": "object"}}),
            json!({"name": "arr", "description": "d", "inputSchema": {"type": "array"}}),
            json!({"name": "remote", "description": "d", "inputSchema": {"type": "object", "properties": {"x": {"$ref": "https://example.com/s.json", "description": "x"}}}}),
            json!({"name": "good", "inputSchema": {"type": "object", "properties": {"y": {"type": "string"}}}}),
            json!({"name": "typo", "description": "d", "inputSchema": {"type": "object", "properties": {"x": {"type": "strin", "description": "x"}}, "additionalProperties": false}}),
            json!({"name": "lookbehind", "description": "d", "inputSchema": {"type": "object", "properties": {"x": {"type": "string", "description": "x", "pattern": "(?<=a)b"}}, "additionalProperties": false}, "outputSchema": {"type": "object", "properties": {"y": {"type": "string", "pattern": "(?!a)"}}}}),
            json!("not a tool"),
            json!({"name": 5, "inputSchema": {"type": "object"}}),
            json!({"name": "shapeless", "description": "d", "inputSchema": {"type": "object", "additionalProperties": false}, "outputSchema": {"type": "array"}}),
            json!({"name": "priced", "description": "d", "inputSchema": {"type": "object", "properties": {"p": {"type": "number", "multipleOf": 0.01, "description": "p"}, "q": {"type": "number", "multipleOf": 0.5, "description": "q"}}, "additionalProperties": false}}),
        ];
        let tools: Vec<Entry> = tools.into_iter().map(Entry::Read).collect();
        let r = check_tools("u", &tools, &settings);
        let kinds: Vec<_> = r
            .problems
            .iter()
            .map(|p| (p.tool.as_str(), p.severity, p.kind))
            .collect();
        assert_eq!(
            kinds,
            vec![
                ("bad name", Severity::Error, "name"),
                ("bad name", Severity::Note, "open_properties"),
                ("arr", Severity::Error, "invalid_schema"),
                ("remote", Severity::Error, "input_schema"),
                ("remote", Severity::Note, "open_properties"),
                ("good", Severity::Error, "duplicate"),
                ("good", Severity::Warning, "description"),
                ("good", Severity::Note, "open_properties"),
                ("good", Severity::Warning, "description"),
                ("typo", Severity::Error, "invalid_schema"),
                ("lookbehind", Severity::Warning, "input_schema"),
                ("lookbehind", Severity::Warning, "output_schema"),
                ("", Severity::Error, "definition"),
                ("", Severity::Error, "definition"),
                ("shapeless", Severity::Error, "invalid_schema"),
                ("priced", Severity::Note, "decimal_multiple"),
            ]
        );
        assert_eq!((r.errors, r.warnings, r.notes), (8, 4, 4));
        assert!(
            r.problems[r.problems.len() - 1]
                .message
                .starts_with("multipleOf of a decimal fraction at /properties/p (0.01): "),
            "{}",
            r.problems[r.problems.len() - 1].message
        );
        assert_eq!(
            r.problems[r.problems.len() - 3].message,
            "an entry whose name is a number is no tool definition: the gateway drops it from listings and learns the tools beside it"
        );
    }
}
