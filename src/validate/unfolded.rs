//! How much of a schema one value may be checked against: its subschemas counted through
//! local `$ref`s as often as they are reached, so that nested choices count as the product of
//! their branches. A value that every branch refuses is tried against every one of them, and
//! its error keeps each branch's errors: nine levels of `anyOf` of 16 branches, each a `$ref`
//! to the next, are a few hundred bytes of schema and 16⁹ subschemas for a refused call.

use super::applicators::applied;
use super::doubling;
use super::references::References;
use serde_json::Value;
use std::collections::HashMap;

/// The most subschemas a schema may unfold into for one value: a call every branch of
/// nested choices refuses is checked against each, and a few hundred bytes of `$ref`s to
/// choices of choices unfold into billions.
pub const MAX_UNFOLDED: usize = 1_000_000;

/// What a schema unfolds into.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unfolded {
    /// Its subschemas, each counted as often as a value may be checked against it along one
    /// way (for a schema whose ways multiply with each level of a value, see `doubling`).
    pub schemas: usize,
    /// The branches of its `anyOf`s and `oneOf`s, counted the same way: a refused value's
    /// error holds a copy of it for each.
    pub alternatives: usize,
    /// For a schema whose checks multiply with each level of a value, how.
    pub doubling: Option<Doubling>,
    /// A `$ref` leads back to a schema it is within: a value nested through it meets the
    /// choices there once per level, and the error at each level keeps a copy of that level
    /// of the value (`report::explainable`).
    pub recursive: bool,
}

/// How the checks of a schema multiply with each level of a value (`doubling`): a value is
/// checked against it only as deep as they stay within [`MAX_UNFOLDED`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Doubling {
    /// The most ways one level of a value multiplies a check into.
    pub per_level: u64,
    /// The deepest a value checked against it may be, in levels.
    pub levels: usize,
}

impl Doubling {
    fn of(schemas: usize, per_level: u64) -> Self {
        let (mut levels, mut checks) = (0, schemas.max(1) as u64);
        while checks.saturating_mul(per_level) <= MAX_UNFOLDED as u64 {
            checks *= per_level;
            levels += 1;
        }
        Doubling { per_level, levels }
    }

    /// Whether `value` is within the levels a check may reach; `Err` is how deep it is.
    pub fn reaches(&self, value: &Value) -> Result<(), usize> {
        match doubling::depth(value) {
            d if d <= self.levels => Ok(()),
            d => Err(d),
        }
    }

    /// The branches a value's error may copy, `alternatives` counted once per way.
    pub fn alternatives(&self, alternatives: usize, value: &Value) -> usize {
        let depth = u32::try_from(doubling::depth(value)).unwrap_or(u32::MAX);
        let ways = self.per_level.saturating_pow(depth);
        alternatives.saturating_mul(usize::try_from(ways).unwrap_or(usize::MAX))
    }
}

impl Unfolded {
    const MAX: Unfolded = Unfolded {
        schemas: usize::MAX,
        alternatives: usize::MAX,
        doubling: None,
        recursive: false,
    };

    fn add(&mut self, other: Unfolded) {
        self.schemas = self.schemas.saturating_add(other.schemas);
        self.alternatives = self.alternatives.saturating_add(other.alternatives);
    }
}

/// Deeper than this, a schema is taken as unfolding without end.
const MAX_DEPTH: usize = 256;

/// What `root` unfolds into. A `$ref` back to a schema it is within counts once: the
/// validator does not check a value against a schema it is checking it against already, and
/// going round through a member or an item takes a value nested one level deeper, which the
/// value's own size bounds. Unless two ways lead round from one subschema to itself through
/// the same steps into the value (two forms of a union, each with `"left": {"$ref":
/// "#/$defs/Expr"}`; `doubling`): each level of the value then multiplies the checks, and a
/// refused value twenty-five levels deep holds a core for minutes. Such a schema is checked
/// only as deep as its checks stay within [`MAX_UNFOLDED`] (`Doubling`).
pub fn unfolded(root: &Value) -> Unfolded {
    let mut walk = Walk {
        refs: References::of(root),
        done: HashMap::new(),
        within: HashMap::from([(root as *const Value, 0)]),
        back: 0,
        visits: 0,
    };
    let mut found = walk.schema(root, 0);
    found.recursive = walk.back > 0;
    if found.schemas <= MAX_UNFOLDED
        && let Some(per_level) = doubling::per_level(root, &walk.refs)
    {
        found.doubling = Some(Doubling::of(found.schemas, per_level));
    }
    found
}

struct Walk<'a> {
    refs: References<'a>,
    /// What each reference's target unfolds into, by where it is.
    done: HashMap<*const Value, Unfolded>,
    /// The references' targets being unfolded, each with the references back to it so far.
    within: HashMap<*const Value, usize>,
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
            ..Unfolded::default()
        };
        for target in self.refs.from(members) {
            total.add(self.reference(target, depth));
        }
        for (keyword, v) in members {
            if matches!(keyword.as_str(), "anyOf" | "oneOf") {
                let branches = v.as_array().map_or(0, Vec::len);
                total.add(Unfolded {
                    alternatives: branches,
                    ..Unfolded::default()
                });
            }
            for (_, child) in applied(keyword, v) {
                total.add(self.schema(child, depth + 1));
            }
        }
        total
    }

    fn reference(&mut self, target: &'a Value, depth: usize) -> Unfolded {
        let r = target as *const Value;
        if let Some(to_r) = self.within.get_mut(&r) {
            *to_r += 1;
            self.back += 1;
            return Unfolded {
                schemas: 1,
                ..Unfolded::default()
            };
        }
        if let Some(known) = self.done.get(&r) {
            return *known;
        }
        self.within.insert(r, 0);
        let back = self.back;
        let found = self.schema(target, depth + 1);
        let to_r = self.within.remove(&r).unwrap_or_default();
        if self.back - back == to_r {
            self.done.insert(r, found);
        }
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
                alternatives: 2,
                doubling: None,
                recursive: false
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
        assert!(unfolded(&root).recursive);
        let deep = (0..1000).fold(json!({}), |s, _| json!({"not": s}));
        assert_eq!(unfolded(&deep), Unfolded::MAX);
    }

    #[test]
    fn two_ways_round_through_one_member_are_checked_only_so_deep() {
        let branches: Vec<Value> = (0..2)
            .map(|i| json!({"properties": {"x": {"$ref": "#"}}, "required": [format!("k{i}")]}))
            .collect();
        let two = unfolded(&json!({"anyOf": branches}));
        // Seven subschemas a way: 7 × 2¹⁷ is within a million, 7 × 2¹⁸ is not.
        assert_eq!(two.schemas, 7);
        let doubling = two.doubling.expect("it doubles");
        assert_eq!(
            doubling,
            Doubling {
                per_level: 2,
                levels: 17
            }
        );
        let deep = |levels: usize| (0..levels).fold(json!(1), |v, _| json!({"x": v}));
        assert_eq!(doubling.reaches(&deep(17)), Ok(()));
        assert_eq!(doubling.reaches(&deep(18)), Err(18));
        assert_eq!(doubling.alternatives(2, &deep(3)), 2 * 8);
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
        assert!(unfolded(&via).doubling.is_some());
        for plain in [tree, any, pair] {
            assert_eq!(unfolded(&plain).doubling, None);
        }
    }

    /// Random schemas of choices, members, items and every kind of reference, leading
    /// anywhere in the document: each is measured without panicking, and one measured as
    /// doubling is checked only so deep that its ways stay within the bound.
    #[test]
    fn any_schema_of_references_is_measured() {
        let mut below = crate::validate::draws(0x5851_f42d_4c95_7f2d);
        let mut doubled = 0;
        for _ in 0..2_000 {
            let root = random_schema(&mut below, 0);
            let u = unfolded(&root);
            if let Some(d) = u.doubling {
                doubled += 1;
                assert!(d.per_level >= 2, "{root}");
                let ways = d.per_level.saturating_pow(d.levels as u32);
                assert!(
                    (u.schemas as u64).saturating_mul(ways) <= MAX_UNFOLDED as u64,
                    "{root}"
                );
            }
        }
        assert!(doubled > 100, "the draws reach doubling schemas: {doubled}");
    }

    fn random_schema(below: &mut impl FnMut(usize) -> usize, depth: usize) -> Value {
        let targets = [
            "#",
            "#/$defs/a",
            "#/$defs/b",
            "#n",
            "urn:x",
            "#/$defs/missing",
        ];
        let mut s = serde_json::Map::new();
        if depth == 0 {
            let mut defs = serde_json::Map::new();
            defs.insert("a".into(), random_schema(below, 2));
            let mut b = random_schema(below, 2);
            b["$id"] = json!("urn:x");
            defs.insert("b".into(), b);
            s.insert("$defs".into(), Value::Object(defs));
            s.insert("$anchor".into(), json!("n"));
            s.insert("$dynamicAnchor".into(), json!("n"));
            s.insert("$recursiveAnchor".into(), json!(true));
        }
        if depth >= 4 {
            return json!({"type": "string"});
        }
        for _ in 0..1 + below(3) {
            let child = |below: &mut dyn FnMut(usize) -> usize| match below(5) {
                0 => json!({"$ref": targets[below(targets.len())]}),
                1 => json!({"$dynamicRef": "#n"}),
                2 => json!({"$recursiveRef": "#"}),
                _ => json!({"type": "integer"}),
            };
            match below(7) {
                0 => {
                    let branches: Vec<Value> = (0..1 + below(4))
                        .map(|_| random_schema(below, depth + 1))
                        .collect();
                    s.insert(
                        ["anyOf", "oneOf", "allOf"][below(3)].into(),
                        json!(branches),
                    );
                }
                1 => {
                    let name = ["x", "y"][below(2)];
                    let props = json!({ name: random_schema(below, depth + 1) });
                    s.insert("properties".into(), props);
                }
                2 => {
                    s.insert("items".into(), random_schema(below, depth + 1));
                }
                3 => {
                    s.insert("additionalProperties".into(), child(below));
                }
                4 => {
                    s.insert("patternProperties".into(), json!({"^x": child(below)}));
                }
                5 => {
                    s.insert("not".into(), child(below));
                }
                _ => {
                    let r = child(below);
                    s.extend(r.as_object().cloned().unwrap_or_default());
                }
            }
        }
        Value::Object(s)
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
        let recursive = Unfolded {
            recursive: true,
            ..Unfolded::MAX
        };
        assert_eq!(unfolded(&root), recursive);
    }
}
