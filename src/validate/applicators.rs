//! Where in a value each subschema of a schema applies: to the value itself, or one step
//! into it (a member, an item, a member's name). What a schema costs to check is read from
//! these steps.

use serde_json::{Map, Value};

/// One step from a value into a part of it that a subschema applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step<'a> {
    /// The member `properties` names.
    Member(&'a str),
    /// The members a `patternProperties` pattern matches.
    Pattern,
    /// The members no `properties` or `patternProperties` of the same schema names
    /// (`additionalProperties`, `unevaluatedProperties`).
    Other,
    /// The item at an index (`prefixItems`, draft 7's `items` as an array).
    Item(usize),
    /// The items past those (`items`, `additionalItems`, `unevaluatedItems`).
    Rest,
    /// Any item (`contains`).
    Any,
    /// A member's name (`propertyNames`): a string, with no parts of its own.
    Name,
}

impl Step<'_> {
    /// Whether one part of a value may be reached by both steps: `same` when both are
    /// keywords of one schema, which splits the members and items between them.
    pub(super) fn meets(self, other: Self, same: bool) -> bool {
        use Step::*;
        match (self, other) {
            (Member(a), Member(b)) => a == b,
            (Item(i), Item(j)) => i == j,
            (Member(_) | Pattern, Pattern) | (Pattern, Member(_)) => true,
            (Member(_) | Pattern, Other) | (Other, Member(_) | Pattern) => !same,
            (Other, Other) => true,
            (Item(_), Rest) | (Rest, Item(_)) => !same,
            (Item(_) | Rest | Any, Rest | Any) | (Any, Item(_)) => true,
            (Name, Name) => true,
            _ => false,
        }
    }
}

/// Keywords whose subschemas apply to the value itself.
const SAME_VALUE: [&str; 9] = [
    "dependentSchemas",
    // Draft 7's: each member a schema, or a list of names (no schema).
    "dependencies",
    "not",
    "if",
    "then",
    "else",
    "allOf",
    "anyOf",
    "oneOf",
];

/// Where in a keyword's value a subschema is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Part<'a> {
    /// The keyword's value itself.
    Whole,
    /// A member of it, by name.
    Member(&'a str),
    /// An item of it, by index.
    Item(usize),
}

/// The subschemas keyword `k` of a schema holds, each with the step into the value where it
/// applies: `None` for the value itself.
pub(super) fn applied<'a>(k: &'a str, v: &'a Value) -> Vec<(Option<Step<'a>>, &'a Value)> {
    (applied_at(k, v).into_iter())
        .map(|(step, _, s)| (step, s))
        .collect()
}

/// [`applied`], each subschema with where it is in the keyword's value.
pub(super) fn applied_at<'a>(
    k: &'a str,
    v: &'a Value,
) -> Vec<(Option<Step<'a>>, Part<'a>, &'a Value)> {
    let each = |step: &dyn Fn(usize, &'a str) -> Option<Step<'a>>| match v {
        Value::Object(m)
            if matches!(
                k,
                "properties" | "patternProperties" | "dependentSchemas" | "dependencies"
            ) =>
        {
            m.iter()
                .enumerate()
                .map(|(i, (name, s))| (step(i, name), Part::Member(name), s))
                .collect()
        }
        Value::Array(items) => items
            .iter()
            .enumerate()
            .map(|(i, s)| (step(i, ""), Part::Item(i), s))
            .collect(),
        one => vec![(step(0, ""), Part::Whole, one)],
    };
    match k {
        "properties" => each(&|_, name| Some(Step::Member(name))),
        "prefixItems" => each(&|i, _| Some(Step::Item(i))),
        // Draft 7's `items` as an array is a prefix, as `prefixItems` is.
        "items" if v.is_array() => each(&|i, _| Some(Step::Item(i))),
        "items" | "additionalItems" | "unevaluatedItems" => each(&|_, _| Some(Step::Rest)),
        "contains" => each(&|_, _| Some(Step::Any)),
        "propertyNames" => each(&|_, _| Some(Step::Name)),
        "patternProperties" => each(&|_, _| Some(Step::Pattern)),
        "additionalProperties" | "unevaluatedProperties" => each(&|_, _| Some(Step::Other)),
        k if SAME_VALUE.contains(&k) => each(&|_, _| None),
        _ => Vec::new(),
    }
}

/// Every schema within `schema` (itself, the subschemas its keywords apply, its definitions,
/// which are reached by reference), with its place.
pub(super) fn schemas(schema: &Value) -> Vec<(String, &Map<String, Value>)> {
    let mut all = Vec::new();
    let into = |at: &String, keyword: &str, part: Part<'_>| {
        within(&format!("{at}/{}", escaped(keyword)), part)
    };
    walk(schema, String::new(), into, |at, members| {
        all.push((at, members))
    });
    all
}

/// The most bytes of places ([`place_bytes`]) a schema may name to be compiled, for each byte
/// of the largest schema a listing may hold (`limits.max_schema_bytes`): a schema of that size
/// nested six levels under names of fifteen characters comes to four, one laid flat to two.
pub const PLACE_BYTES_PER_BYTE: usize = 8;

/// The bytes of the places a validator compiled from `schema` names: each keyword's JSON
/// pointer, summed. A validator keeps its keywords' places, so a schema of long names nested
/// deep costs its depth times its size to compile and to keep (sixty levels of 16 KB names,
/// a 1 MB schema: 270 MB kept), where a schema of the same size laid flat costs its size.
pub fn place_bytes(schema: &Value) -> usize {
    let mut total = 0usize;
    let into = |at: &usize, keyword: &str, part: Part<'_>| {
        let step = match part {
            Part::Whole => 0,
            Part::Member(name) => 1 + escaped_len(name),
            Part::Item(i) => 1 + i.to_string().len(),
        };
        at + 1 + escaped_len(keyword) + step
    };
    walk(schema, 0usize, into, |at, members| {
        let keywords = members.keys().map(|k| at + 1 + escaped_len(k));
        total = keywords.fold(total, usize::saturating_add);
    });
    total
}

/// Visits every schema within `schema`, as [`schemas`] lists them, each with its place as
/// `into` makes it from its parent's, a keyword, and the part of the keyword's value it is.
fn walk<'a, P>(
    schema: &'a Value,
    root: P,
    into: impl Fn(&P, &str, Part<'_>) -> P,
    mut visit: impl FnMut(P, &'a Map<String, Value>),
) {
    let mut todo = vec![(root, schema)];
    while let Some((at, s)) = todo.pop() {
        let Value::Object(members) = s else {
            continue;
        };
        for (keyword, v) in members {
            for (_, part, child) in applied_at(keyword, v) {
                todo.push((into(&at, keyword, part), child));
            }
            if let ("$defs" | "definitions", Value::Object(defs)) = (keyword.as_str(), v) {
                let named =
                    (defs.iter()).map(|(name, s)| (into(&at, keyword, Part::Member(name)), s));
                todo.extend(named);
            }
        }
        visit(at, members);
    }
}

/// The pointer to `part` of the keyword's value at `place`.
pub(super) fn within(place: &str, part: Part<'_>) -> String {
    match part {
        Part::Whole => place.to_owned(),
        Part::Member(name) => format!("{place}/{}", escaped(name)),
        Part::Item(i) => format!("{place}/{i}"),
    }
}

/// A name as a JSON pointer writes it.
fn escaped(name: &str) -> String {
    name.replace('~', "~0").replace('/', "~1")
}

/// The length of [`escaped`]`(name)`.
fn escaped_len(name: &str) -> usize {
    name.len() + name.bytes().filter(|b| matches!(b, b'~' | b'/')).count()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_places_a_validator_names_are_counted_as_it_writes_them() {
        let schema = json!({"type": "object", "properties": {"a/b": {"type": "string"}},
            "anyOf": [{"minimum": 1}], "$defs": {"d": {"type": "null"}}});
        let places = [
            "/type",
            "/properties",
            "/anyOf",
            "/$defs",
            "/properties/a~1b/type",
            "/anyOf/0/minimum",
            "/$defs/d/type",
        ];
        let bytes: usize = places.iter().map(|p| p.len()).sum();
        assert_eq!(place_bytes(&schema), bytes);
        let mut listed: Vec<String> = schemas(&schema).into_iter().map(|(at, _)| at).collect();
        listed.sort();
        assert_eq!(listed, ["", "/$defs/d", "/anyOf/0", "/properties/a~1b"]);
    }
}
