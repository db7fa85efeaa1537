//! How much of a schema one value may be checked against: its subschemas counted through
//! local `$ref`s as often as they are reached, so that nested choices count as the product of
//! their branches. A value that every branch refuses is tried against every one of them, and
//! its error keeps each branch's errors: nine levels of `anyOf` of 16 branches, each a `$ref`
//! to the next, are a few hundred bytes of schema and 16⁹ subschemas for a refused call.

use serde_json::Value;
use std::collections::{HashMap, HashSet};

/// What a schema unfolds into.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unfolded {
    /// Its subschemas, each counted as often as a value may be checked against it.
    pub schemas: usize,
    /// The branches of its `anyOf`s and `oneOf`s, counted the same way: a refused value's
    /// error holds a copy of it for each.
    pub alternatives: usize,
}

impl Unfolded {
    const MAX: Unfolded = Unfolded {
        schemas: usize::MAX,
        alternatives: usize::MAX,
    };

    fn add(&mut self, other: Unfolded) {
        self.schemas = self.schemas.saturating_add(other.schemas);
        self.alternatives = self.alternatives.saturating_add(other.alternatives);
    }
}

/// Keywords whose value is a schema, an array of schemas, or (`MAPS`) a map of them.
const APPLICATORS: [&str; 18] = [
    "items",
    "prefixItems",
    "additionalItems",
    "contains",
    "additionalProperties",
    "unevaluatedProperties",
    "unevaluatedItems",
    "propertyNames",
    "properties",
    "patternProperties",
    "dependentSchemas",
    "not",
    "if",
    "then",
    "else",
    "allOf",
    "anyOf",
    "oneOf",
];

/// Keywords whose value maps names to schemas.
const MAPS: [&str; 3] = ["properties", "patternProperties", "dependentSchemas"];

/// Deeper than this, a schema is taken as unfolding without end.
const MAX_DEPTH: usize = 256;

/// What `root` unfolds into. A `$ref` back to a schema it is within counts once: the
/// validator does not check a value against a schema it is checking it against already, and
/// going round through a member or an item takes a value nested one level deeper.
pub fn unfolded(root: &Value) -> Unfolded {
    let mut walk = Walk {
        root,
        done: HashMap::new(),
        within: HashSet::from(["#"]),
    };
    walk.schema(root, 0)
}

struct Walk<'a> {
    root: &'a Value,
    /// What each `$ref` target unfolds into, by its pointer.
    done: HashMap<&'a str, Unfolded>,
    /// The `$ref` targets being unfolded.
    within: HashSet<&'a str>,
}

impl<'a> Walk<'a> {
    /// What `s`, `depth` levels into the schema, unfolds into.
    fn schema(&mut self, s: &'a Value, depth: usize) -> Unfolded {
        let Value::Object(members) = s else {
            // `true`, `false`, or what is no schema.
            return Unfolded::default();
        };
        if depth > MAX_DEPTH {
            return Unfolded::MAX;
        }
        let mut total = Unfolded {
            schemas: 1,
            alternatives: 0,
        };
        if let Some(r) = members.get("$ref").and_then(Value::as_str) {
            total.add(self.reference(r, depth));
        }
        for (keyword, v) in members {
            let keyword = keyword.as_str();
            if !APPLICATORS.contains(&keyword) {
                continue;
            }
            if matches!(keyword, "anyOf" | "oneOf") {
                let branches = v.as_array().map_or(0, Vec::len);
                total.add(Unfolded {
                    schemas: 0,
                    alternatives: branches,
                });
            }
            let children: Box<dyn Iterator<Item = &'a Value>> = match v {
                Value::Object(m) if MAPS.contains(&keyword) => Box::new(m.values()),
                Value::Array(items) => Box::new(items.iter()),
                one => Box::new(std::iter::once(one)),
            };
            for child in children {
                total.add(self.schema(child, depth + 1));
            }
        }
        total
    }

    fn reference(&mut self, r: &'a str, depth: usize) -> Unfolded {
        if self.within.contains(r) {
            return Unfolded {
                schemas: 1,
                alternatives: 0,
            };
        }
        if let Some(known) = self.done.get(r) {
            return *known;
        }
        let target = match r {
            "#" => Some(self.root),
            _ => r.strip_prefix('#').and_then(|p| self.root.pointer(p)),
        };
        let Some(target) = target else {
            return Unfolded::default();
        };
        self.within.insert(r);
        let found = self.schema(target, depth + 1);
        self.within.remove(r);
        self.done.insert(r, found);
        found
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn nested_choices_count_as_the_product_of_their_branches() {
        let mut defs = serde_json::Map::new();
        for level in 0..3 {
            let next = json!({"$ref": format!("#/$defs/d{}", level + 1)});
            defs.insert(format!("d{level}"), json!({"anyOf": vec![next; 4]}));
        }
        defs.insert("d3".into(), json!({"type": "object"}));
        let root = json!({"$defs": defs, "allOf": [{"$ref": "#/$defs/d0"}]});
        let u = unfolded(&root);
        // 4 + 16 + 64 branches; each level's schemas, and the 64 objects at the bottom.
        assert_eq!(u.alternatives, 4 + 16 + 64);
        assert_eq!(
            u.schemas,
            1 + 1 + (1 + 4 * (1 + 1 + 4 * (1 + 1 + 4 * (1 + 1))))
        );
    }

    #[test]
    fn a_plain_schema_counts_its_subschemas_and_no_values() {
        let huge_enum: Vec<Value> = (0..1000).map(Value::from).collect();
        let root = json!({"type": "object", "properties": {
            "a": {"type": "string", "enum": huge_enum},
            "b": {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": {"anyOf": []}}
        }});
        assert_eq!(
            unfolded(&root),
            Unfolded {
                schemas: 5,
                alternatives: 2
            }
        );
    }

    #[test]
    fn a_reference_to_a_schema_it_is_within_counts_once() {
        let root = json!({"type": "object", "properties": {
            "child": {"$ref": "#"},
            "list": {"type": "array", "items": {"$ref": "#"}}
        }});
        assert_eq!(unfolded(&root).schemas, 6);
        let deep = (0..1000).fold(json!({}), |s, _| json!({"not": s}));
        assert_eq!(unfolded(&deep), Unfolded::MAX);
    }
}
