//! Undeclared arguments: properties a schema neither declares nor rules on.
//!
//! JSON Schema accepts any property a schema does not mention unless it says
//! `additionalProperties`, and the schemas MCP servers generate rarely say it. Their SDKs then
//! drop the unknown key (zod strips it, pydantic ignores it), so a misspelt optional argument
//! runs the tool with its default and the model never learns why. toolgate finds such
//! properties with a map of what each place of the schema declares, built once per distinct
//! schema when it is listed, and walked beside the arguments on each call.
//!
//! A place is judged only when it declares something (`properties` or `patternProperties`),
//! or is the root: a free-form `{"type": "object"}` deeper down means "any keys". A place whose
//! schema says `additionalProperties` or `unevaluatedProperties` (any value) is left to the
//! validator: the schema's word wins. Where that word is `false`, a declared name spelt
//! otherwise is still found for renaming ([`Shape::renamed`]): the schema refuses it as
//! written, as zod's strict objects and Go's structs are listed.

use super::lookup::{resolve, unescape};
use super::report::{Found, MEANT_EXAMINED, Meant, Violation, comparable};
use crate::text::edit_distance_within;
use crate::text::pointer_token;
use serde_json::Value;
use std::fmt::Write;

/// How deep the map follows nested objects and arrays; a recursive schema stops here.
const MAX_DEPTH: usize = 8;
/// References and composition branches followed from one place.
const MAX_REF_HOPS: usize = 16;
/// Schemas (places and composition branches) read for one map: a recursive schema with many
/// branches would otherwise grow it exponentially. Past it, deeper places are not checked.
const MAX_NODES: usize = 4096;
/// Undeclared properties examined for a near name in one call: a typo check is for models,
/// and a call with more undeclared keys than this is not a typo.
const MAX_EXAMINED: usize = 128;

/// What a schema declares at each place of an instance.
#[derive(Debug, Default)]
pub struct Shape {
    /// Declared names, sorted, with what each holds.
    props: Vec<Prop>,
    patterns: Vec<regex::Regex>,
    /// What the schema says here of names it does not declare.
    others: Others,
    /// This place declares something, so an undeclared key here means something.
    judged: bool,
    items: Option<Box<Shape>>,
    /// Some place judges undeclared names ([`Shape::judges`]); kept at the root.
    judges: bool,
}

/// What a place's schema says of the names it does not declare; of several branches at one
/// place, the most open one counts.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Others {
    /// Nothing: toolgate judges them ([`Judge`]).
    #[default]
    Unsaid,
    /// `false` (`additionalProperties` or `unevaluatedProperties`): the schema refuses them,
    /// and its validator says so.
    Refused,
    /// A schema they must match (`true` is one), or what toolgate could not read: they may be
    /// accepted.
    Ruled,
}

#[derive(Debug)]
struct Prop {
    name: Box<str>,
    /// The name as names are compared ([`comparable`]), once: each call's undeclared
    /// arguments are compared with every name at their place.
    compared: Option<Box<[char]>>,
    description: Option<Box<str>>,
    shape: Option<Box<Shape>>,
}

/// An undeclared argument that is a declared one spelt with other case or separators
/// (`max_results`, `MaxResults` for `maxResults`), the declared one not given beside it:
/// coercion sends it under the declared name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Renamed {
    /// The pointer of the object that holds it.
    pub at: String,
    pub from: String,
    pub to: String,
}

/// Which undeclared properties are violations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judge {
    /// Only those whose name is close to a declared one at the same place.
    Typos,
    /// Every one.
    All,
}

impl Shape {
    /// The map of `schema` (its root is always judged); `None` when no place could ever
    /// hold an undeclared property.
    pub fn of(schema: &Value) -> Option<Shape> {
        let mut s = Shape::default();
        let mut b = Builder {
            root: schema,
            nodes_left: MAX_NODES,
        };
        b.gather(schema, 0, 0, &mut s);
        s.judged |= s.others == Others::Unsaid;
        s.judges = s.judges_anywhere();
        s.walks_anything().then_some(s)
    }

    /// Whether some place of it judges undeclared names, or may rename them.
    fn walks_anything(&self) -> bool {
        (self.judged && self.others != Others::Ruled)
            || self.props.iter().any(|p| p.shape.is_some())
            || self.items.is_some()
    }

    fn judges_anywhere(&self) -> bool {
        let below = |s: &Option<Box<Shape>>| s.as_deref().is_some_and(Shape::judges_anywhere);
        (self.judged && self.others == Others::Unsaid)
            || self.props.iter().any(|p| below(&p.shape))
            || below(&self.items)
    }

    /// Whether some place of the schema judges undeclared names. A schema that refuses them
    /// wherever it declares names leaves them to its validator, and its map serves renames
    /// alone: a call it passes needs no walk.
    pub fn judges(&self) -> bool {
        self.judges
    }

    /// Undeclared properties of `args` that `judge` makes violations, at most `max` described
    /// and the rest counted. `missing` holds the pointers of required members `args` leave
    /// out, for a call refused already: an undeclared argument meant for some of them
    /// ([`Meant`]: `bb` for a missing `b`, a wrapper holding them) is said with them, which
    /// refuses no call that would otherwise pass.
    pub fn undeclared(&self, args: &Value, judge: Judge, max: usize, missing: &[String]) -> Found {
        let mut walk = Walk::new(judge, max, missing);
        walk.visit(self, args, 0);
        walk.found
    }

    /// The undeclared arguments of `args` that are declared ones spelt with other case or
    /// separators ([`Renamed`]), at places that judge undeclared names or whose schema
    /// refuses them. Where two at one place are the same name, neither is.
    pub fn renamed(&self, args: &Value) -> Vec<Renamed> {
        let mut walk = Walk::new(Judge::Typos, 0, &[]);
        walk.renamed = Some(Vec::new());
        walk.visit(self, args, 0);
        let all = walk.renamed.unwrap_or_default();
        let once = |r: &Renamed| {
            let same = |o: &&Renamed| o.at == r.at && o.to == r.to;
            all.iter().filter(same).count() == 1
        };
        all.iter().filter(|r| once(r)).cloned().collect()
    }

    /// Places of the schema that leave properties open (for `toolgate check`): the pointers,
    /// in the instance, of objects whose keys are not ruled on.
    pub fn open_places(&self) -> Vec<String> {
        let mut out = Vec::new();
        self.collect_open("", &mut out);
        out
    }

    fn collect_open(&self, at: &str, out: &mut Vec<String>) {
        if self.judged && self.others == Others::Unsaid {
            out.push(if at.is_empty() { "/".into() } else { at.into() });
        }
        for p in &self.props {
            if let Some(s) = &p.shape {
                s.collect_open(&format!("{at}/{}", p.name), out);
            }
        }
        if let Some(items) = &self.items {
            items.collect_open(&format!("{at}/*"), out);
        }
    }

    fn find(&self, name: &str) -> Option<&Prop> {
        self.props
            .binary_search_by(|p| (*p.name).cmp(name))
            .ok()
            .map(|i| &self.props[i])
    }
}

struct Walk<'m> {
    judge: Judge,
    max: usize,
    missing: &'m [String],
    examined: usize,
    /// Undeclared arguments compared with the required ones left out ([`MEANT_EXAMINED`]).
    meant_examined: usize,
    found: Found,
    path: String,
    /// Where asked, the arguments a declared name spelt otherwise ([`Shape::renamed`]).
    renamed: Option<Vec<Renamed>>,
}

impl<'m> Walk<'m> {
    fn new(judge: Judge, max: usize, missing: &'m [String]) -> Walk<'m> {
        Walk {
            judge,
            max,
            missing,
            examined: 0,
            meant_examined: 0,
            found: Found::default(),
            path: String::new(),
            renamed: None,
        }
    }

    fn visit(&mut self, shape: &Shape, v: &Value, depth: usize) {
        match v {
            Value::Object(map) => {
                // The arguments' keys come sorted (serde_json's map), and so are the declared
                // names: one pass over both finds each key's declaration without a search.
                let mut next = 0;
                let mut last: Option<&str> = None;
                for (k, child) in map {
                    let declared = if last.is_none_or(|l| l < k.as_str()) {
                        last = Some(k);
                        while next < shape.props.len() && *shape.props[next].name < **k {
                            next += 1;
                        }
                        shape.props.get(next).filter(|p| *p.name == **k)
                    } else {
                        shape.find(k)
                    };
                    match declared {
                        Some(p) => {
                            if let Some(s) = &p.shape
                                && depth < MAX_DEPTH
                            {
                                let len = self.path.len();
                                let _ = write!(self.path, "/{}", pointer_token(k));
                                self.visit(s, child, depth + 1);
                                self.path.truncate(len);
                            }
                        }
                        None if !shape.judged || shape.others == Others::Ruled => {}
                        None if shape.patterns.iter().any(|r| r.is_match(k)) => {}
                        None if self.renamed.is_some() => self.rename(shape, map, k),
                        None if shape.others == Others::Unsaid => self.undeclared(shape, k, child),
                        // Refused by the schema, which says so itself.
                        None => {}
                    }
                }
            }
            Value::Array(items) => {
                if let Some(s) = &shape.items
                    && depth < MAX_DEPTH
                {
                    for (i, item) in items.iter().enumerate() {
                        let len = self.path.len();
                        let _ = write!(self.path, "/{i}");
                        self.visit(s, item, depth + 1);
                        self.path.truncate(len);
                    }
                }
            }
            _ => {}
        }
    }

    fn undeclared(&mut self, shape: &Shape, name: &str, value: &Value) {
        if self.examined >= MAX_EXAMINED {
            return;
        }
        self.examined += 1;
        let (missing, names): (Vec<String>, Vec<&str>);
        let meant = match typo_of(name, &shape.props) {
            Some(p) => Some(Meant::For(&p.name)),
            None if self.meant_examined >= MEANT_EXAMINED => None,
            None => {
                self.meant_examined += 1;
                missing = self.missing_here();
                names = missing.iter().map(String::as_str).collect();
                Meant::of(name, Some(value), &names)
            }
        };
        let mut message = "is not a parameter of this tool".to_owned();
        match (meant, self.judge) {
            (Some(meant), _) => {
                message.push_str(&meant.said());
                let described = match meant {
                    Meant::For(name) => shape.find(name).map(|p| (name, &p.description)),
                    Meant::Holding(_) => None,
                };
                if let Some((name, Some(d))) = described {
                    let d: String = d.trim().chars().take(200).collect();
                    let _ = write!(message, " ({name}: {d})");
                }
            }
            (None, Judge::Typos) => return,
            (None, Judge::All) => {
                let names: Vec<&str> = shape.props.iter().map(|p| &*p.name).collect();
                if !names.is_empty() {
                    let list: String = names.join(", ").chars().take(400).collect();
                    let _ = write!(message, "; accepted: {list}");
                }
            }
        }
        if self.found.list.len() >= self.max {
            self.found.omitted += 1;
            return;
        }
        self.found.list.push(Violation {
            pointer: format!("{}/{}", self.path, pointer_token(name)),
            keyword: "undeclared".into(),
            message,
        });
    }

    /// Notes `name` as a declared name spelt otherwise, where it is one and the object does
    /// not give the declared one too.
    fn rename(&mut self, shape: &Shape, object: &serde_json::Map<String, Value>, name: &str) {
        if self.examined >= MAX_EXAMINED {
            return;
        }
        self.examined += 1;
        let Some(n) = comparable(name) else { return };
        let mut same = (shape.props.iter()).filter(|p| p.compared.as_deref() == Some(&n[..]));
        let (Some(p), None) = (same.next(), same.next()) else {
            return;
        };
        if object.contains_key(&*p.name) {
            return;
        }
        self.renamed.get_or_insert_with(Vec::new).push(Renamed {
            at: self.path.clone(),
            from: name.to_owned(),
            to: p.name.to_string(),
        });
    }

    /// The required members left out at this place.
    fn missing_here(&self) -> Vec<String> {
        let here = (self.missing.iter()).filter_map(|pointer| {
            let (at, token) = pointer.rsplit_once('/')?;
            (at == self.path).then(|| unescape(token))
        });
        here.collect()
    }
}

/// The declared property `name` is most likely a misspelling of: equal once case, `_` and `-`
/// are ignored (camel and snake spellings of one name), or within an edit distance that is
/// small for the longer name's length (none up to 2 characters, 1 up to 5, 2 beyond).
fn typo_of<'a>(name: &str, declared: &'a [Prop]) -> Option<&'a Prop> {
    let n = comparable(name)?;
    declared
        .iter()
        .filter_map(|p| {
            let d_name = p.compared.as_deref()?;
            let allowed = match n.len().max(d_name.len()) {
                0..=2 => 0,
                3..=5 => 1,
                _ => 2,
            };
            let d = edit_distance_within(&n, d_name, allowed)?;
            Some((d, p))
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, p)| p)
}

struct Builder<'a> {
    root: &'a Value,
    nodes_left: usize,
}

impl Builder<'_> {
    /// Adds what `s` declares, through `$ref`s and composition, into `into`. `depth` counts
    /// places (properties, items), `hops` the references and branches taken to reach `s`.
    fn gather(&mut self, s: &Value, depth: usize, hops: usize, into: &mut Shape) {
        if self.nodes_left == 0 || hops > MAX_REF_HOPS {
            // Not read: whatever it declares, nothing here is judged undeclared.
            into.others = Others::Ruled;
            return;
        }
        self.nodes_left -= 1;
        // 2020-12 lets `$ref` stand beside other keywords: both count.
        if s.get("$ref").is_some() {
            let target = resolve(self.root, s);
            if !std::ptr::eq(target, s) {
                self.gather(target, depth, hops + 1, into);
            }
        }
        let Some(obj) = s.as_object() else { return };
        for key in ["additionalProperties", "unevaluatedProperties"] {
            let said = match obj.get(key) {
                None => continue,
                Some(Value::Bool(false)) => Others::Refused,
                Some(_) => Others::Ruled,
            };
            into.others = into.others.max(said);
        }
        if let Some(props) = obj.get("properties").and_then(Value::as_object) {
            into.judged = true;
            for (name, sub) in props {
                let child = self.child_shape(sub, depth + 1);
                let description = resolve(self.root, sub)
                    .get("description")
                    .and_then(Value::as_str)
                    .map(Box::from);
                add_prop(into, name, description, child);
            }
        }
        if let Some(patterns) = obj.get("patternProperties").and_then(Value::as_object) {
            into.judged = true;
            for p in patterns.keys() {
                match regex::RegexBuilder::new(p).size_limit(1 << 20).build() {
                    Ok(r) => into.patterns.push(r),
                    // A pattern toolgate cannot read: every key might match it.
                    Err(_) => into.others = Others::Ruled,
                }
            }
        }
        let mut items: Vec<&Value> = Vec::new();
        for key in ["items", "additionalItems", "prefixItems"] {
            match obj.get(key) {
                Some(i @ Value::Object(_)) => items.push(i),
                Some(Value::Array(list)) => items.extend(list),
                _ => {}
            }
        }
        for i in items {
            if let Some(s) = self.child_shape(i, depth + 1) {
                match &mut into.items {
                    Some(existing) => merge(existing, *s),
                    None => into.items = Some(s),
                }
            }
        }
        for key in ["allOf", "anyOf", "oneOf"] {
            if let Some(Value::Array(branches)) = obj.get(key) {
                for b in branches {
                    self.gather(b, depth, hops + 1, into);
                }
            }
        }
        for key in ["then", "else"] {
            if let Some(b) = obj.get(key) {
                self.gather(b, depth, hops + 1, into);
            }
        }
    }

    /// The map of a property's or an item's schema, when it has anything to check.
    fn child_shape(&mut self, s: &Value, depth: usize) -> Option<Box<Shape>> {
        if depth > MAX_DEPTH {
            return None;
        }
        let mut shape = Shape::default();
        self.gather(s, depth, 0, &mut shape);
        shape.walks_anything().then(|| Box::new(shape))
    }
}

fn add_prop(
    into: &mut Shape,
    name: &str,
    description: Option<Box<str>>,
    shape: Option<Box<Shape>>,
) {
    match into.props.binary_search_by(|p| (*p.name).cmp(name)) {
        Ok(i) => {
            let p = &mut into.props[i];
            p.description = p.description.take().or(description);
            match (&mut p.shape, shape) {
                (Some(a), Some(b)) => merge(a, *b),
                (slot @ None, b) => *slot = b,
                (Some(_), None) => {}
            }
        }
        Err(i) => into.props.insert(
            i,
            Prop {
                name: name.into(),
                compared: comparable(name).map(Vec::into_boxed_slice),
                description,
                shape,
            },
        ),
    }
}

/// One place declared by several branches: what any of them declares is declared.
fn merge(a: &mut Shape, b: Shape) {
    a.others = a.others.max(b.others);
    a.judged |= b.judged;
    a.patterns.extend(b.patterns);
    for p in b.props {
        add_prop(a, &p.name, p.description, p.shape);
    }
    match (&mut a.items, b.items) {
        (Some(x), Some(y)) => merge(x, *y),
        (slot @ None, y) => *slot = y,
        (Some(_), None) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn names(found: &Found) -> Vec<(&str, &str)> {
        found
            .list
            .iter()
            .map(|v| (v.pointer.as_str(), v.message.as_str()))
            .collect()
    }

    #[test]
    fn misspelt_names_are_found_at_every_depth_and_through_refs() {
        let schema = json!({
            "type": "object",
            "$defs": {"opts": {"type": "object", "properties": {"recursive": {"type": "boolean", "description": "Descend into folders"}}}},
            "properties": {
                "path": {"type": "string"},
                "options": {"$ref": "#/$defs/opts"},
                "filters": {"type": "array", "items": {"type": "object", "properties": {"glob": {"type": "string"}}}}
            },
            "allOf": [{"properties": {"maxDepth": {"type": "integer"}}}]
        });
        let shape = Shape::of(&schema).unwrap();
        let args = json!({"path": "/n", "max_depth": 2, "options": {"recursiv": true},
                          "filters": [{"glob": "*"}, {"globb": "*"}], "colour": "red"});
        let found = shape.undeclared(&args, Judge::Typos, 32, &[]);
        assert_eq!(
            names(&found),
            [
                (
                    "/filters/1/globb",
                    "is not a parameter of this tool; did you mean \"glob\"?"
                ),
                (
                    "/max_depth",
                    "is not a parameter of this tool; did you mean \"maxDepth\"?"
                ),
                (
                    "/options/recursiv",
                    "is not a parameter of this tool; did you mean \"recursive\"? (recursive: Descend into folders)"
                ),
            ]
        );
        let all = shape.undeclared(&args, Judge::All, 32, &[]);
        assert_eq!(all.list.len(), 4, "{:?}", names(&all));
        assert!(
            all.list[0]
                .message
                .contains("accepted: filters, maxDepth, options, path")
        );
    }

    #[test]
    fn a_declared_name_spelt_otherwise_is_renamed_where_it_is_one_name() {
        let schema = json!({
            "type": "object",
            "properties": {
                "maxResults": {"type": "integer"},
                "path": {"type": "string"},
                "opts": {"type": "object", "properties": {"follow_links": {"type": "boolean"}},
                    "additionalProperties": false},
                "free": {"type": "object", "properties": {"x": {}}, "additionalProperties": true},
                "typed": {"type": "object", "properties": {"x": {}},
                    "unevaluatedProperties": {"type": "string"}},
                "twin_name": {}, "twinName": {}
            }
        });
        let shape = Shape::of(&schema).unwrap();
        let renamed = |args: Value| -> Vec<(String, String, String)> {
            (shape.renamed(&args).into_iter())
                .map(|r| (r.at, r.from, r.to))
                .collect()
        };
        let one = |at: &str, from: &str, to: &str| (at.to_owned(), from.to_owned(), to.to_owned());
        assert_eq!(
            renamed(json!({"max_results": 5, "Path": "/n", "opts": {"followLinks": true}})),
            [
                one("", "Path", "path"),
                one("", "max_results", "maxResults"),
                one("/opts", "followLinks", "follow_links")
            ]
        );
        // Not where the declared name is given too, or two spell it, or two declared names
        // are spelt alike, or the name is only near (a typo, said and not renamed), or the
        // place may take other names.
        for args in [
            json!({"maxResults": 5, "max_results": 6}),
            json!({"max_results": 5, "MaxResults": 6}),
            json!({"twinname": 1}),
            json!({"maxResult": 5, "pth": "/n"}),
            json!({"free": {"X": 1}}),
            json!({"typed": {"X": "1"}}),
        ] {
            assert_eq!(renamed(args.clone()), [], "{args}");
        }
    }

    #[test]
    fn a_schema_closed_everywhere_judges_nothing_and_renames() {
        let schema = json!({"type": "object", "additionalProperties": false,
            "properties": {"orderId": {}, "address": {"type": "object",
                "properties": {"streetName": {}}, "additionalProperties": false}}});
        let shape = Shape::of(&schema).unwrap();
        assert!(!shape.judges());
        let args = json!({"order_id": 1, "address": {"street_name": "x", "c": 1}});
        assert_eq!(shape.undeclared(&args, Judge::All, 32, &[]).list.len(), 0);
        let renamed: Vec<_> = (shape.renamed(&args).into_iter())
            .map(|r| (r.at, r.from, r.to))
            .collect();
        let one = |at: &str, from: &str, to: &str| (at.to_owned(), from.to_owned(), to.to_owned());
        assert_eq!(
            renamed,
            [
                one("/address", "street_name", "streetName"),
                one("", "order_id", "orderId")
            ]
        );
        // Open at one place only: judged there.
        let open = json!({"type": "object", "additionalProperties": false,
            "properties": {"address": {"type": "object", "properties": {"streetName": {}}}}});
        assert!(Shape::of(&open).unwrap().judges());
    }

    #[test]
    fn a_name_near_a_missing_required_one_is_said_with_it() {
        let schema = json!({"type": "object", "required": ["a", "b", "path"],
            "properties": {"a": {}, "b": {"description": "Second"}, "path": {},
                "opts": {"type": "object", "properties": {"n": {}}, "required": ["n"]}}});
        let s = Shape::of(&schema).unwrap();
        let missing = ["/b".to_owned(), "/path".to_owned(), "/opts/n".to_owned()];
        let args = json!({"a": 1, "bb": 2, "filepath": "/", "c": 3, "opts": {"nn": 1, "x": 2}});
        assert_eq!(
            names(&s.undeclared(&args, Judge::Typos, 32, &missing)),
            [
                (
                    "/bb",
                    "is not a parameter of this tool; did you mean \"b\"? (b: Second)"
                ),
                (
                    "/filepath",
                    "is not a parameter of this tool; did you mean \"path\"?"
                ),
                (
                    "/opts/nn",
                    "is not a parameter of this tool; did you mean \"n\"?"
                ),
            ]
        );
        // A call refused for nothing left out is judged as a typo is: "bb" is no typo of "b".
        assert!(s.undeclared(&args, Judge::Typos, 32, &[]).list.is_empty());
        // Nothing in common ("c", "x"), or too far, is no slip; nor is a name for a member
        // left out somewhere else.
        let far = json!({"a": 1, "pathology_of": 1, "opts": {"b": 1}});
        assert!(
            s.undeclared(&far, Judge::Typos, 32, &missing)
                .list
                .is_empty()
        );
        // The arguments wrapped, once more or as the schema writes them: said where they go.
        let wrapped =
            json!({"arguments": {"a": 1, "b": 2, "path": "/"}, "opts": {"properties": {"n": 1}}});
        let missing = ["/a", "/b", "/path", "/opts/n"].map(str::to_owned);
        assert_eq!(
            names(&s.undeclared(&wrapped, Judge::Typos, 32, &missing)),
            [
                (
                    "/arguments",
                    "is not a parameter of this tool; send the members it holds (a, b, path) in its place"
                ),
                (
                    "/opts/properties",
                    "is not a parameter of this tool; send the members it holds (n) in its place"
                ),
            ]
        );
    }

    #[test]
    fn the_schema_s_own_word_wins() {
        for schema in [
            json!({"type": "object", "properties": {"a": {}}, "additionalProperties": true}),
            json!({"type": "object", "properties": {"a": {}}, "additionalProperties": false}),
            json!({"type": "object", "properties": {"a": {}}, "unevaluatedProperties": {"type": "string"}}),
            json!({"type": "object", "patternProperties": {"^x-": {}}, "additionalProperties": {}}),
        ] {
            let found = Shape::of(&schema)
                .map(|s| s.undeclared(&json!({"b": 1, "aa": 2}), Judge::All, 32, &[]))
                .unwrap_or_default();
            assert!(found.list.is_empty(), "{schema}: {:?}", names(&found));
        }
        let s =
            Shape::of(&json!({"properties": {"a": {}}, "patternProperties": {"^x-": {}}})).unwrap();
        assert_eq!(
            s.undeclared(&json!({"x-trace": 1, "b": 2}), Judge::All, 32, &[])
                .list
                .len(),
            1
        );
        // A free-form object deeper down is not judged; the root always is.
        let s = Shape::of(&json!({"properties": {"meta": {"type": "object"}}})).unwrap();
        assert!(
            s.undeclared(&json!({"meta": {"anything": 1}}), Judge::All, 32, &[])
                .list
                .is_empty()
        );
        let s = Shape::of(&json!({"type": "object"})).unwrap();
        assert_eq!(
            s.undeclared(&json!({"x": 1}), Judge::All, 32, &[])
                .list
                .len(),
            1
        );
    }

    #[test]
    fn far_names_are_not_typos_and_the_work_is_bounded() {
        let s = Shape::of(&json!({"properties": {"path": {}, "recursive": {}, "id": {}}})).unwrap();
        for far in ["verbose", "pathology", "x", "ids2", "xyz"] {
            assert!(
                s.undeclared(&json!({far: 1}), Judge::Typos, 32, &[])
                    .list
                    .is_empty(),
                "{far}"
            );
        }
        for near in ["Path", "recurse", "RECURSIVE", "pth", "ID"] {
            assert_eq!(
                s.undeclared(&json!({near: 1}), Judge::Typos, 32, &[])
                    .list
                    .len(),
                1,
                "{near}"
            );
        }
        let many: serde_json::Map<String, Value> = (0..100_000)
            .map(|i| (format!("pathx{i}"), json!(1)))
            .collect();
        let found = s.undeclared(&Value::Object(many), Judge::All, 32, &[]);
        assert_eq!(found.list.len(), 32);
        assert_eq!(found.list.len() + found.omitted, MAX_EXAMINED);
    }

    #[test]
    fn recursive_schemas_end() {
        let schema = json!({"$defs": {"node": {"type": "object", "properties": {"next": {"$ref": "#/$defs/node"}, "v": {}}}},
                            "$ref": "#/$defs/node"});
        let s = Shape::of(&schema).unwrap();
        let args = json!({"next": {"next": {"nxet": 1, "next": {"v": 2}}}});
        let found = s.undeclared(&args, Judge::Typos, 32, &[]);
        assert_eq!(
            names(&found),
            [(
                "/next/next/nxet",
                "is not a parameter of this tool; did you mean \"next\"?"
            )]
        );
    }
}
