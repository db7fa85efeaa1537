//! Where a schema's references lead, as the validator resolves them within one document:
//! JSON pointers, `$anchor`s, the `$id`s of resources embedded in it, `$dynamicRef`'s
//! `$dynamicAnchor`s and `$recursiveRef`'s `$recursiveAnchor`s. What a schema costs to check
//! is measured through them (`unfolded`, `doubling`): a loop of references the measure did
//! not follow would be a loop it did not count. Where the validator's choice depends on the
//! path a check took (a dynamic reference) or on a base it reads from `$id`s, every schema
//! it may choose is a target; a reference read no other way leads to the root.

use serde_json::{Map, Value};
use std::collections::HashMap;

/// The places in one document that references name.
pub(super) struct References<'a> {
    root: &'a Value,
    /// Subschemas by their `$anchor` or `$dynamicAnchor`.
    anchors: HashMap<&'a str, Vec<&'a Value>>,
    /// Subschemas by their `$dynamicAnchor` alone.
    dynamic: HashMap<&'a str, Vec<&'a Value>>,
    /// Embedded resources by their `$id`, as written.
    ids: Vec<(&'a str, &'a Value)>,
    /// Schemas with `"$recursiveAnchor": true`.
    recursive: Vec<&'a Value>,
}

impl<'a> References<'a> {
    pub(super) fn of(root: &'a Value) -> Self {
        let mut refs = References {
            root,
            anchors: HashMap::new(),
            dynamic: HashMap::new(),
            ids: Vec::new(),
            recursive: Vec::new(),
        };
        let mut todo = vec![root];
        while let Some(v) = todo.pop() {
            match v {
                Value::Object(members) => {
                    refs.note(v, members);
                    todo.extend(members.values());
                }
                Value::Array(items) => todo.extend(items),
                _ => {}
            }
        }
        refs
    }

    fn note(&mut self, v: &'a Value, members: &'a Map<String, Value>) {
        let named = |k: &str| members.get(k).and_then(Value::as_str);
        if let Some(name) = named("$anchor") {
            self.anchors.entry(name).or_default().push(v);
        }
        if let Some(name) = named("$dynamicAnchor") {
            self.anchors.entry(name).or_default().push(v);
            self.dynamic.entry(name).or_default().push(v);
        }
        if let Some(id) = named("$id").or_else(|| named("id")) {
            self.ids.push((id, v));
        }
        if members.get("$recursiveAnchor") == Some(&Value::Bool(true)) {
            self.recursive.push(v);
        }
    }

    /// The subschemas the references of a schema with `members` lead to.
    pub(super) fn from(&self, members: &'a Map<String, Value>) -> Vec<&'a Value> {
        let mut to = Vec::new();
        if let Some(r) = members.get("$ref").and_then(Value::as_str) {
            to.extend(self.resolve(r, false));
        }
        if let Some(r) = members.get("$dynamicRef").and_then(Value::as_str) {
            to.extend(self.resolve(r, true));
        }
        if members.contains_key("$recursiveRef") {
            to.push(self.root);
            to.extend(&self.recursive);
        }
        // One way to each: a schema named twice is checked once.
        let mut seen = std::collections::HashSet::new();
        to.retain(|v| seen.insert(*v as *const Value));
        to
    }

    /// Where reference `r` may lead: a pointer or an anchor within the document or within
    /// a resource embedded in it; with `dynamic`, any schema of the anchor's name too.
    fn resolve(&self, r: &str, dynamic: bool) -> Vec<&'a Value> {
        let (base, fragment) = r.split_once('#').unwrap_or((r, ""));
        let resources: Vec<&'a Value> = match base {
            // The resource the reference is within: the document or an embedded one.
            "" => std::iter::once(self.root)
                .chain(self.ids.iter().map(|&(_, v)| v))
                .collect(),
            base => (self.ids.iter())
                .filter(|(id, _)| *id == base || id.ends_with(&format!("/{base}")))
                .map(|&(_, v)| v)
                .collect(),
        };
        let mut to: Vec<&'a Value> = match fragment {
            "" => resources,
            f if f.starts_with('/') => resources.iter().filter_map(|v| v.pointer(f)).collect(),
            name => self.anchors.get(name).cloned().unwrap_or_default(),
        };
        if dynamic && let Some(named) = self.dynamic.get(fragment) {
            to.extend(named);
        }
        if to.is_empty() {
            to.push(self.root);
        }
        to
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn targets<'a>(refs: &References<'a>, schema: &'a Value) -> Vec<&'a Value> {
        refs.from(schema.as_object().expect("an object schema"))
    }

    #[test]
    fn pointers_anchors_and_embedded_resources_are_found() {
        let root = json!({
            "$id": "https://example.com/root.json",
            "$defs": {
                "a": {"$anchor": "here", "type": "string"},
                "n": {"$id": "node.json", "$defs": {"leaf": {"type": "integer"}}}
            },
            "properties": {
                "p": {"$ref": "#/$defs/a"},
                "q": {"$ref": "#here"},
                "r": {"$ref": "node.json#/$defs/leaf"},
                "s": {"$ref": "https://example.com/root.json#/$defs/a"},
                "t": {"$ref": "#/$defs/missing"}
            }
        });
        let refs = References::of(&root);
        let a = &root["$defs"]["a"];
        let at = |p: &str| targets(&refs, &root["properties"][p]);
        assert!(at("p").iter().any(|v| std::ptr::eq(*v, a)));
        assert!(at("q").iter().all(|v| std::ptr::eq(*v, a)));
        assert!(
            at("r")
                .iter()
                .all(|v| std::ptr::eq(*v, &root["$defs"]["n"]["$defs"]["leaf"]))
        );
        assert!(at("s").iter().all(|v| std::ptr::eq(*v, a)));
        // Read no other way, a reference is taken to lead to the root.
        assert!(at("t").iter().all(|v| std::ptr::eq(*v, &root)));
    }

    #[test]
    fn dynamic_and_recursive_references_lead_to_every_schema_they_may_choose() {
        let root = json!({
            "$dynamicAnchor": "node", "$recursiveAnchor": true,
            "$defs": {"other": {"$dynamicAnchor": "node", "$recursiveAnchor": true}},
            "properties": {"d": {"$dynamicRef": "#node"}, "r": {"$recursiveRef": "#"}}
        });
        let refs = References::of(&root);
        for p in ["d", "r"] {
            let to = targets(&refs, &root["properties"][p]);
            assert!(to.iter().any(|v| std::ptr::eq(*v, &root)), "{p}");
            assert!(
                to.iter().any(|v| std::ptr::eq(*v, &root["$defs"]["other"])),
                "{p}"
            );
        }
    }
}
