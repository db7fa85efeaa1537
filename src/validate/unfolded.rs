//! How much of a schema one value may be checked against: its subschemas counted through
//! local `$ref`s as often as they are reached, so that nested choices count as the product of
//! their branches. A value that every branch refuses is tried against every one of them, and
//! its error keeps each branch's errors: nine levels of `anyOf` of 16 branches, each a `$ref`
//! to the next, are a few hundred bytes of schema and 16⁹ subschemas for a refused call.

use serde_json::Value;
use std::collections::HashMap;

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

/// Keywords whose subschemas apply to the value itself.
const SAME_VALUE: [&str; 8] = [
    "dependentSchemas",
    "not",
    "if",
    "then",
    "else",
    "allOf",
    "anyOf",
    "oneOf",
];

/// Keywords whose subschemas apply to some of the value's items.
const SOME_ITEMS: [&str; 4] = ["items", "additionalItems", "contains", "unevaluatedItems"];

/// Keywords whose subschemas apply to the members no other keyword names: a member one of
/// these applies to is none that `properties` or `patternProperties` apply to.
const OTHER_MEMBERS: [&str; 2] = ["additionalProperties", "unevaluatedProperties"];

/// Deeper than this, a schema is taken as unfolding without end.
const MAX_DEPTH: usize = 256;

/// What `root` unfolds into. A `$ref` back to a schema it is within counts once: the
/// validator does not check a value against a schema it is checking it against already, and
/// going round through a member or an item takes a value nested one level deeper, which the
/// value's own size bounds. Unless two such references lead round from one place to one
/// member (two branches of a choice, each with `"x": {"$ref": "#"}`): each level of the value
/// then doubles the work, and a value six levels deep is enough to hold a core for minutes.
/// Such a schema unfolds without end.
pub fn unfolded(root: &Value) -> Unfolded {
    let mut walk = Walk {
        root,
        done: HashMap::new(),
        within: HashMap::from([("#", 0)]),
        path: Vec::new(),
        round: HashMap::new(),
        back: 0,
        visits: 0,
    };
    let found = walk.schema(root, 0);
    match walk.doubles("#").0 {
        true => Unfolded::MAX,
        false => found,
    }
}

struct Walk<'a> {
    root: &'a Value,
    /// What each `$ref` target unfolds into, by its pointer.
    done: HashMap<&'a str, Unfolded>,
    /// The `$ref` targets being unfolded, each with the length of `path` when it was entered.
    within: HashMap<&'a str, usize>,
    /// Where in the value the walk is: member names, `[i]`, `[]` (some items), `{}` (members
    /// a pattern matches), `{+}` (the other members), `<>` (the members' names).
    path: Vec<String>,
    /// For each `$ref` target being unfolded, the references back to it by where they lead
    /// round from (the path since it was entered).
    round: HashMap<&'a str, HashMap<Vec<String>, usize>>,
    /// References back found so far: what a target unfolds into is kept for its next
    /// reference only when none led round to a target outside it.
    back: usize,
    /// Schemas walked: past [`MAX_VISITS`], the schema unfolds too far to measure.
    visits: usize,
}

/// The most schemas the walk visits (what is kept is walked once; what leads round to a
/// target outside it, each time it is reached).
const MAX_VISITS: usize = 2_000_000;

impl<'a> Walk<'a> {
    /// What `s`, `depth` levels into the schema, unfolds into.
    fn schema(&mut self, s: &'a Value, depth: usize) -> Unfolded {
        let Value::Object(members) = s else {
            // `true`, `false`, or what is no schema.
            return Unfolded::default();
        };
        self.visits += 1;
        if depth > MAX_DEPTH || self.visits > MAX_VISITS {
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
            if matches!(keyword.as_str(), "anyOf" | "oneOf") {
                let branches = v.as_array().map_or(0, Vec::len);
                total.add(Unfolded {
                    schemas: 0,
                    alternatives: branches,
                });
            }
            for (place, child) in applied(keyword, v) {
                let deeper = place.is_some();
                self.path.extend(place);
                total.add(self.schema(child, depth + 1));
                if deeper {
                    self.path.pop();
                }
            }
        }
        total
    }

    fn reference(&mut self, r: &'a str, depth: usize) -> Unfolded {
        if let Some(&entered) = self.within.get(r) {
            let from = self.path[entered..].to_vec();
            *self.round.entry(r).or_default().entry(from).or_default() += 1;
            self.back += 1;
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
        self.within.insert(r, self.path.len());
        let back = self.back;
        let mut found = self.schema(target, depth + 1);
        self.within.remove(r);
        let (doubles, to_r) = self.doubles(r);
        if doubles {
            found = Unfolded::MAX;
        }
        if self.back - back == to_r {
            self.done.insert(r, found);
        }
        found
    }

    /// Whether two references back to `r` lead round from one place to one member, and how
    /// many references back to `r` there were.
    fn doubles(&mut self, r: &str) -> (bool, usize) {
        let round = self.round.remove(r).unwrap_or_default();
        let to_r = round.values().sum();
        let doubles = round.into_iter().any(|(from, n)| n > 1 && !from.is_empty());
        (doubles, to_r)
    }
}

/// The subschemas keyword `k` of a schema holds, each with where it applies in the value:
/// `None` for the value itself.
fn applied<'a>(k: &'a str, v: &'a Value) -> Vec<(Option<String>, &'a Value)> {
    let each = |place: &dyn Fn(usize, &str) -> Option<String>| match v {
        Value::Object(m)
            if matches!(k, "properties" | "patternProperties" | "dependentSchemas") =>
        {
            m.iter()
                .enumerate()
                .map(|(i, (name, s))| (place(i, name), s))
                .collect()
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, s)| (place(i, ""), s))
            .collect(),
        one => vec![(place(0, ""), one)],
    };
    match k {
        "properties" => each(&|_, name| Some(name.to_owned())),
        "prefixItems" => each(&|i, _| Some(format!("[{i}]"))),
        // Draft 7's `items` as an array is a prefix, as `prefixItems` is.
        "items" if v.is_array() => each(&|i, _| Some(format!("[{i}]"))),
        "propertyNames" => each(&|_, _| Some("<>".into())),
        k if SOME_ITEMS.contains(&k) => each(&|_, _| Some("[]".into())),
        // Two patterns may match one name.
        "patternProperties" => each(&|_, _| Some("{}".into())),
        k if OTHER_MEMBERS.contains(&k) => each(&|_, _| Some("{+}".into())),
        k if SAME_VALUE.contains(&k) => each(&|_, _| None),
        _ => Vec::new(),
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

    #[test]
    fn two_references_back_from_one_place_to_one_member_unfold_without_end() {
        let branches: Vec<Value> = (0..2)
            .map(|i| json!({"properties": {"x": {"$ref": "#"}}, "required": [format!("k{i}")]}))
            .collect();
        assert_eq!(unfolded(&json!({"anyOf": branches})), Unfolded::MAX);
        // A tree, and a value of any JSON: each member or item is checked once per level.
        let tree = json!({"$defs": {"n": {"type": "object", "properties": {
            "left": {"$ref": "#/$defs/n"}, "right": {"$ref": "#/$defs/n"},
            "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}}}}},
            "properties": {"root": {"$ref": "#/$defs/n"}}});
        assert!(unfolded(&tree).schemas < 20, "{:?}", unfolded(&tree));
        let any = json!({"anyOf": [{"type": "string"}, {"type": "array", "items": {"$ref": "#"}},
            {"type": "object", "additionalProperties": {"$ref": "#"},
                "patternProperties": {"^x": {"$ref": "#"}}}]});
        assert!(unfolded(&any).schemas < 20, "{:?}", unfolded(&any));
        let pair = json!({"type": "array", "prefixItems": [{"$ref": "#"}, {"$ref": "#"}]});
        assert!(unfolded(&pair).schemas < 20, "{:?}", unfolded(&pair));
        // Through a target of its own, reached from both branches.
        let via = json!({"$defs": {"n": {"$ref": "#"}}, "anyOf": [
            {"properties": {"x": {"$ref": "#/$defs/n"}}, "required": ["a"]},
            {"properties": {"x": {"$ref": "#/$defs/n"}}, "required": ["b"]}]});
        assert_eq!(unfolded(&via), Unfolded::MAX);
    }

    #[test]
    fn what_cannot_be_kept_is_walked_within_a_bound() {
        // Each level refers twice to the next, and the last leads round to the root: nothing
        // below it is kept, and walking every path would take 2⁴⁰ steps.
        let mut defs = serde_json::Map::new();
        for level in 0..40 {
            let next = json!({"$ref": format!("#/$defs/d{}", level + 1)});
            defs.insert(format!("d{level}"), json!({"allOf": [next.clone(), next]}));
        }
        defs.insert("d40".into(), json!({"properties": {"x": {"$ref": "#"}}}));
        let root = json!({"$defs": defs, "properties": {"y": {"$ref": "#/$defs/d0"}}});
        assert_eq!(unfolded(&root), Unfolded::MAX);
    }
}
