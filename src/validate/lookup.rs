//! Where an instance pointer leads in a schema, for the common shapes (`properties`, `items`,
//! `prefixItems`, local `$ref`s and composition branches): a property's description and its
//! siblings' names for a report, and whether coercion may leave a member out.

use serde_json::Value;

/// The unescaped tokens of an RFC 6901 pointer.
pub(super) fn segments(pointer: &str) -> impl Iterator<Item = String> + '_ {
    pointer.split('/').skip(1).map(unescape)
}

/// One token of an RFC 6901 pointer, unescaped (`crate::text::pointer_token` escapes it).
pub(super) fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// Follows local `$ref`s (`#/...`), a bounded number of hops.
pub(super) fn resolve<'a>(root: &'a Value, mut s: &'a Value) -> &'a Value {
    for _ in 0..16 {
        match s.get("$ref").and_then(Value::as_str) {
            Some("#") => s = root,
            Some(r) if r.starts_with("#/") => match root.pointer(&r[1..]) {
                Some(next) => s = next,
                None => break,
            },
            _ => break,
        }
    }
    s
}

/// The subschema that describes the value at an instance pointer, for the common shapes:
/// `properties`, `items`, `prefixItems`, local `$ref`s and composition branches.
pub(super) fn subschema<'a>(root: &'a Value, pointer: &str) -> Option<&'a Value> {
    let mut cur = root;
    for seg in segments(pointer) {
        let mut visits = MAX_VISITS;
        cur = child(root, cur, &seg, &mut visits)?;
    }
    Some(cur)
}

/// How many schemas one step of a lookup visits at most: composition can branch at every
/// level (`anyOf` of `$ref: "#"`), and a lookup must not cost a power of the branches.
const MAX_VISITS: usize = 256;

fn child<'a>(root: &'a Value, s: &'a Value, seg: &str, visits: &mut usize) -> Option<&'a Value> {
    *visits = visits.checked_sub(1)?;
    let s = resolve(root, s);
    if let Some(p) = s.get("properties").and_then(|p| p.get(seg)) {
        return Some(p);
    }
    if let Ok(i) = seg.parse::<usize>() {
        if let Some(p) = s.get("prefixItems").and_then(|p| p.get(i)) {
            return Some(p);
        }
        if let Some(items) = s.get("items").filter(|i| i.is_object()) {
            return Some(items);
        }
    }
    branches(s).find_map(|branch| child(root, branch, seg, visits))
}

/// The composition branches of `s`.
fn branches(s: &Value) -> impl Iterator<Item = &Value> {
    ["allOf", "anyOf", "oneOf"]
        .into_iter()
        .filter_map(|k| s.get(k).and_then(Value::as_array))
        .flatten()
}

/// Whether the member at `pointer` is one its object declares and does not require (in any
/// form of the object's schema: its own, its `$ref`'s, its composition branches'), so that
/// leaving it out is as valid as any value it could take.
pub(super) fn optional_member(root: &Value, pointer: &str) -> bool {
    let Some((parent, name)) = pointer.rsplit_once('/') else {
        return false;
    };
    let name = unescape(name);
    let Some(object) = subschema(root, parent) else {
        return false;
    };
    let mut forms = Vec::new();
    forms_of(root, object, &mut forms);
    let declares = |f: &&Value| f.get("properties").and_then(|p| p.get(&name)).is_some();
    let requires = |f: &&Value| {
        (f.get("required").and_then(Value::as_array)).is_some_and(|r| r.iter().any(|n| *n == *name))
    };
    forms.iter().any(declares) && !forms.iter().any(requires)
}

/// The forms of the schema `s`: itself and, through `$ref`s, its composition branches, at
/// most [`MAX_VISITS`].
fn forms_of<'a>(root: &'a Value, s: &'a Value, out: &mut Vec<&'a Value>) {
    if out.len() == MAX_VISITS {
        return;
    }
    let s = resolve(root, s);
    out.push(s);
    for branch in branches(s) {
        forms_of(root, branch, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_member_is_optional_where_every_form_leaves_it_out() {
        let root = json!({
            "type": "object",
            "$defs": {"m": {"type": "object", "properties": {"n": {"type": "integer"}, "k": {}}, "required": ["k"]}},
            "properties": {
                "a": {"type": "integer"},
                "b": {"type": "integer"},
                "who": {"anyOf": [{"$ref": "#/$defs/m"}, {"type": "null"}]},
                "list": {"type": "array", "items": {"type": "integer"}}
            },
            "required": ["a"]
        });
        assert!(!optional_member(&root, "/a"), "required");
        assert!(optional_member(&root, "/b"));
        assert!(!optional_member(&root, "/c"), "not declared");
        assert!(
            optional_member(&root, "/who/n"),
            "through a branch and a $ref"
        );
        assert!(!optional_member(&root, "/who/k"), "required in its form");
        assert!(!optional_member(&root, "/list/0"), "an item");
        assert!(!optional_member(&root, ""), "the arguments themselves");
    }

    #[test]
    fn a_lookup_is_bounded_however_composition_branches() {
        let branches: Vec<Value> = (0..16).map(|_| json!({"$ref": "#"})).collect();
        let root = json!({"anyOf": branches, "properties": {"a": {"type": "integer"}}});
        assert!(subschema(&root, "/missing").is_none());
        assert!(!optional_member(&root, "/missing"));
        assert!(optional_member(&root, "/a"));
    }
}
