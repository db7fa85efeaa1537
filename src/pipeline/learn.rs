//! What toolgate learns from answers flowing through it: each scope's tools from
//! `tools/list` (every page, JSON or SSE), and that they changed (`list_changed`).
//! With allow/deny lists, denied tools are also taken out of the listing the client sees.

use super::Pending;
use super::answer::Answer;
use crate::catalog::{Invalid, Page, ScopeKey};
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
            warn_at_rate!(target.repeats, "tools_list_unreadable", { upstream = %target.name, error = %e, },
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
    let mut no_output: Vec<Box<str>> = Vec::new();
    let learned = gw.catalog.learn_page(&pending.key, &page, first_page);
    let invalid = learned.unwrap_or_else(|too_large| {
        let target = &pending.target;
        warn_at_rate!(target.repeats, "tools_list_too_large", { upstream = %target.name, error = %too_large, },
            "a tools/list answer is not kept: it goes to the client as it came, and calls list the tools again");
        Vec::new()
    });
    for bad in invalid {
        if !v.hides_invalid(&bad.name) {
            continue;
        }
        if bad.schema.first_said_invalid() {
            say_invalid(&pending.target, &bad);
        }
        match bad.which {
            "input" => unusable.push(bad.name),
            _ => no_output.push(bad.name),
        }
    }
    // Entries that are no tool: an SDK that reads the listing whole fails on one of them.
    let hide_malformed = page.malformed > 0 && v.invalid_tool_schemas == InvalidSchemas::Hide;
    say_malformed(&pending.target, page.malformed);
    // The catalog is the scope's, shared by its clients; a client's own rules only hide.
    let client = pending.client.as_ref().filter(|c| c.rules.is_some());
    let invalid = !unusable.is_empty() || hide_malformed;
    if !globally && client.is_none() && !invalid && no_output.is_empty() {
        return None;
    }
    let visible = |name: &str| {
        v.allows(name)
            && client.is_none_or(|c| c.allows(name))
            && !unusable.iter().any(|u| &**u == name)
    };
    let rewrite = Rewrite {
        visible,
        keep_malformed: !hide_malformed,
        no_output: &no_output,
    };
    let rewritten = rewrite.listing(m.id?, result);
    if rewritten.is_some() {
        let kind = match (invalid, no_output.is_empty()) {
            (true, _) => "tools_hidden_invalid_schema",
            (false, false) => "output_schemas_left_out",
            (false, true) => "tools_hidden_by_policy",
        };
        gw.metrics.rewrites.inc(&[&pending.target.name, kind]);
    }
    rewritten
}

/// A tool whose input or output schema no client can use, said once per schema.
fn say_invalid(target: &Target, bad: &Invalid) {
    let (tool, problem) = (clipped(&bad.name, 200), clipped(&bad.why, 4096));
    match bad.which {
        "input" => tracing::warn!(upstream = %target.name, tool = %tool, problem = %problem,
            "a tool's input schema is invalid: hidden from tools/list, and calls to it are refused as unknown"),
        _ => tracing::warn!(upstream = %target.name, tool = %tool, problem = %problem,
            "a tool's output schema is invalid: the tool is listed without it, and its results are not checked against it"),
    }
}

/// Entries of a listing that are no tool definition, said at the listing failures' rate.
pub(crate) fn say_malformed(target: &Target, entries: usize) {
    if entries > 0 {
        warn_at_rate!(target.repeats, "tools_list_malformed", { upstream = %target.name, entries, },
            "a tools/list entry is no tool definition (no object, or no string name): not learned, and hidden from the listing clients see unless validation.invalid_tool_schemas is \"forward\"");
    }
}

#[derive(Deserialize)]
struct Named<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
}

/// How a listing is rewritten for the client: which tools it sees, whether entries that
/// are no tool stay, and which tools are listed without their `outputSchema`.
struct Rewrite<'a, F> {
    visible: F,
    keep_malformed: bool,
    no_output: &'a [Box<str>],
}

impl<F: Fn(&str) -> bool> Rewrite<'_, F> {
    /// The listing rewritten; every other member, of it and of each tool kept, as it came.
    /// `None` when nothing changes.
    fn listing(&self, id: &RawValue, result: &RawValue) -> Option<Answer> {
        let mut r: BTreeMap<String, Box<RawValue>> = serde_json::from_str(result.get()).ok()?;
        // The entries kept, written as they are taken (`jsonrpc::items`): no more than the
        // listing's own text is held for them.
        let mut kept = String::from("[");
        let mut changed = false;
        jsonrpc::items::each(r.get("tools")?.get(), |t| {
            let (keep, strip) = match serde_json::from_str::<Named<'_>>(t.get()) {
                Ok(n) => (
                    (self.visible)(&n.name),
                    self.no_output.iter().any(|o| **o == *n.name),
                ),
                Err(_) => (self.keep_malformed, false),
            };
            let stripped = (keep && strip).then(|| without_output(t)).flatten();
            changed |= !keep || stripped.is_some();
            if keep {
                if kept.len() > 1 {
                    kept.push(',');
                }
                kept.push_str(stripped.as_deref().unwrap_or(t).get());
            }
        })
        .ok()?;
        if !changed {
            return None;
        }
        kept.push(']');
        r.insert("tools".into(), RawValue::from_string(kept).ok()?);
        Some(Answer {
            body: jsonrpc::result_response(id, &r),
            error_code: None,
            outcome: None,
        })
    }
}

/// The tool `t` without its `outputSchema`; `None` when it has none.
fn without_output(t: &RawValue) -> Option<Box<RawValue>> {
    let mut tool: BTreeMap<String, Box<RawValue>> = serde_json::from_str(t.get()).ok()?;
    tool.remove("outputSchema")?;
    serde_json::value::to_raw_value(&tool).ok()
}
