//! `toolgate check`: the rules of a configuration that name tools (allow and deny lists,
//! per-tool settings, per-client rates), each held against the tools of the servers it
//! applies to. A rule that matches none of them is most often a misspelling, and a
//! misspelt deny list leaves the tool it meant reachable.

use std::collections::BTreeMap;
use toolgate::config::{Config, allows};

/// One server as `check` found it: its name behind the gateway (`default` for the one on
/// `/mcp`), and the names of its tools when it could be listed.
pub struct Found<'a> {
    pub name: &'a str,
    pub tools: Option<&'a [String]>,
}

/// A line for each pattern that matches no tool of the servers its rule applies to. A rule
/// that applies to a server that could not be listed is not judged.
pub fn unmatched(cfg: &Config, servers: &[Found<'_>]) -> Vec<String> {
    // Where a rule is written and its pattern: whether it matched a tool so far, `None`
    // once a server it applies to could not be listed.
    let mut rules: BTreeMap<(String, String), Option<bool>> = BTreeMap::new();
    for s in servers {
        for (key, pattern) in rules_for(cfg, s.name) {
            let hit = (s.tools).map(|tools| tools.iter().any(|t| matches(&pattern, t)));
            let seen = rules.entry((key, pattern)).or_insert(Some(false));
            *seen = seen.zip(hit).map(|(before, now)| before || now);
        }
    }
    rules
        .into_iter()
        .filter(|(_, matched)| *matched == Some(false))
        .map(|((key, pattern), _)| {
            format!("{key} {pattern:?} matches no tool that its servers list: misspelt?")
        })
        .collect()
}

fn matches(pattern: &str, tool: &str) -> bool {
    allows(&[pattern.to_owned()], &[], tool)
}

/// The patterns of the rules that apply to the server `server`, each with the key it is
/// written at: its own where it has one, else the global one.
fn rules_for(cfg: &Config, server: &str) -> Vec<(String, String)> {
    let own = cfg.upstreams.iter().find(|u| u.name == server);
    let own_key = |key: &str| format!("upstreams {server:?} {key}");
    let mut rules = Vec::new();
    let mut list = |key: String, patterns: &[String]| {
        rules.extend(patterns.iter().map(|p| (key.clone(), p.clone())));
    };
    let (v, ov) = (&cfg.validation, own.map(|u| &u.validation));
    match ov.and_then(|o| o.allow_tools.as_ref()) {
        Some(patterns) => list(own_key("validation.allow_tools"), patterns),
        None => list("validation.allow_tools".into(), &v.allow_tools),
    }
    match ov.and_then(|o| o.deny_tools.as_ref()) {
        Some(patterns) => list(own_key("validation.deny_tools"), patterns),
        None => list("validation.deny_tools".into(), &v.deny_tools),
    }
    let overridden = |tool: &String| ov.is_some_and(|o| o.tools.contains_key(tool));
    let global: Vec<String> = v.tools.keys().filter(|t| !overridden(t)).cloned().collect();
    list("validation.tools".into(), &global);
    if let Some(o) = ov {
        let tools: Vec<String> = o.tools.keys().cloned().collect();
        list(own_key("validation.tools"), &tools);
    }
    for (client, p) in &cfg.clients {
        if !p.upstreams.is_empty() && !p.upstreams.iter().any(|u| u == server) {
            continue;
        }
        list(format!("clients.{client:?}.allow_tools"), &p.allow_tools);
        list(format!("clients.{client:?}.deny_tools"), &p.deny_tools);
        let rated: Vec<String> = p.tool_rate_limits.keys().cloned().collect();
        list(format!("clients.{client:?}.tool_rate_limits"), &rated);
    }
    rules
}
