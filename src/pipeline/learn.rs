//! What toolgate learns from answers flowing through it: each scope's tools from
//! `tools/list` (every page, JSON or SSE), and that they changed (`list_changed`).
//! With allow/deny lists, denied tools are also taken out of the listing the client sees.

use super::Pending;
use super::answer::Answer;
use crate::catalog::{Page, ScopeKey};
use crate::config::InvalidSchemas;
use crate::gateway::{Gateway, Target};
use crate::jsonrpc::{self, Message};
use crate::lograte::warn_at_rate;
use crate::text::clipped;
use serde::Deserialize;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::BTreeMap;

pub fn list_changed(gw: &Gateway, key: &ScopeKey) {
    tracing::debug!(
        upstream = gw.upstream_name(key),
        "tools/list_changed: catalog dropped"
    );
    gw.catalog.forget(key);
}

/// Learns one `tools/list` answer; returns a replacement when policy hides some tools.
pub fn list_answer(
    gw: &Gateway,
    pending: &Pending,
    first_page: bool,
    m: &Message<'_>,
) -> Option<Answer> {
    let result = m.result?;
    let mut page = match Page::parse(result) {
        Ok(p) => p,
        Err(e) => {
            let target = &pending.target;
            warn_at_rate!(target.answers, "tools_list_unreadable", { upstream = %target.name, error = %e, },
                "could not read a tools/list answer; it goes to the client as it came");
            return None;
        }
    };
    let v = &pending.target.validation;
    let globally = !v.allow_tools.is_empty() || !v.deny_tools.is_empty();
    if globally {
        page.tools.retain(|t| v.allows(&t.name));
    }
    let mut unusable: Vec<Box<str>> = Vec::new();
    for bad in gw.catalog.learn_page(&pending.key, &page, first_page) {
        if !v.hides_invalid(&bad.name) {
            continue;
        }
        if bad.schema.first_said_invalid() {
            let (tool, problem) = (clipped(&bad.name, 200), clipped(&bad.why, 4096));
            tracing::warn!(upstream = %pending.target.name, tool = %tool, problem = %problem, "a tool's input schema is invalid: hidden from tools/list, and calls to it are refused as unknown");
        }
        unusable.push(bad.name);
    }
    // Entries that are no tool: an SDK that reads the listing whole fails on one of them.
    let hide_malformed = page.malformed > 0 && v.invalid_tool_schemas == InvalidSchemas::Hide;
    say_malformed(&pending.target, page.malformed);
    // The catalog is the scope's, shared by its clients; a client's own rules only hide.
    let client = pending.client.as_ref().filter(|c| c.rules.is_some());
    if !globally && client.is_none() && unusable.is_empty() && !hide_malformed {
        return None;
    }
    let visible = |name: &str| {
        v.allows(name)
            && client.is_none_or(|c| c.allows(name))
            && !unusable.iter().any(|u| &**u == name)
    };
    let hidden = without_denied(m.id?, result, visible, !hide_malformed);
    if hidden.is_some() {
        let kind = if unusable.is_empty() && !hide_malformed {
            "tools_hidden_by_policy"
        } else {
            "tools_hidden_invalid_schema"
        };
        gw.metrics.rewrites.inc(&[&pending.target.name, kind]);
    }
    hidden
}

/// Entries of a listing that are no tool definition, said at the listing failures' rate.
pub(crate) fn say_malformed(target: &Target, entries: usize) {
    if entries > 0 {
        warn_at_rate!(target.answers, "tools_list_malformed", { upstream = %target.name, entries, },
            "a tools/list entry is no tool definition (no object, or no string name): not learned, and hidden from the listing clients see unless validation.invalid_tool_schemas is \"forward\"");
    }
}

#[derive(Deserialize)]
struct Named<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
}

/// The listing without denied tools, and without the entries that are no tool unless
/// `keep_malformed`; every other member kept as it came.
fn without_denied(
    id: &RawValue,
    result: &RawValue,
    visible: impl Fn(&str) -> bool,
    keep_malformed: bool,
) -> Option<Answer> {
    let mut r: BTreeMap<String, Box<RawValue>> = serde_json::from_str(result.get()).ok()?;
    let tools: Vec<Box<RawValue>> = serde_json::from_str(r.get("tools")?.get()).ok()?;
    let before = tools.len();
    let kept: Vec<_> = tools
        .into_iter()
        .filter(|t| match serde_json::from_str::<Named<'_>>(t.get()) {
            Ok(n) => visible(&n.name),
            Err(_) => keep_malformed,
        })
        .collect();
    if kept.len() == before {
        return None;
    }
    r.insert("tools".into(), serde_json::value::to_raw_value(&kept).ok()?);
    Some(Answer {
        body: jsonrpc::result_response(id, &r),
        error_code: None,
        outcome: None,
    })
}
