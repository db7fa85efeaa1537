//! Turns validation errors into what a model can act on: every violation with its argument
//! path, what was expected, what came, and the property's own `description`; for an
//! unexpected argument, the closest allowed name. The same facts go out machine-readable as
//! `parameter_errors` (pointer → message), after the OXP `ValidationErrorResponse` shape.

use super::compiled::Compiled;
use super::lookup::{resolve, segments, subschema, unescape};
use super::written::{as_written, takes, utc_taken};
use crate::text::edit_distance_within;
use jsonschema::error::{TypeKind, ValidationError, ValidationErrorKind};
use serde_json::{Map, Value, json};
use std::fmt::Write;

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Violation {
    /// RFC 6901 pointer into `arguments`.
    pub pointer: String,
    pub keyword: String,
    pub message: String,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub tool: String,
    /// At most `max` of them: the rest are only counted in `omitted`.
    pub violations: Vec<Violation>,
    /// Property descriptions by pointer, where the schema has one.
    descriptions: Vec<Option<String>>,
    /// Violations found but not described, past `max`.
    pub omitted: usize,
    max: usize,
}

/// Every violation a call can produce, at most `max` described, the rest counted: one
/// unexpected key is one violation, so a body of a million keys must not become a million
/// messages (nor a million edit-distance searches).
#[derive(Debug, Default)]
pub struct Found {
    pub list: Vec<Violation>,
    pub omitted: usize,
}

const PREVIEW_CHARS: usize = 60;
/// The longest argument path shown: the client chooses key names, and an answer must not
/// echo a megabyte-long one.
const PATH_CHARS: usize = 120;
/// The longest parameter description shown (the server wrote it, but once per violation).
const DESCRIPTION_CHARS: usize = 400;
/// The most text one report produces, whatever the schema and the arguments: past it the
/// rest is summarised as "…and N more".
pub const MAX_TEXT_BYTES: usize = 16 * 1024;

impl Report {
    pub fn build(tool: &str, schema: Compiled<'_>, args: &Value, max: usize) -> Report {
        Report::of_found(tool, schema.value, violations(schema, args, max), max)
    }

    /// The report of `errors`, already had from the validator for an explainable value
    /// ([`explainable`]), at most `max` of them.
    pub fn of_errors(
        tool: &str,
        schema: &Value,
        errors: &[ValidationError<'_>],
        max: usize,
    ) -> Report {
        Report::of_found(tool, schema, described(schema, errors, max), max)
    }

    fn of_found(tool: &str, schema: &Value, mut found: Found, max: usize) -> Report {
        if found.list.is_empty() && found.omitted == 0 {
            // is_valid and iter_errors disagree only on engine failures; still say something.
            found.list.push(Violation {
                pointer: String::new(),
                keyword: "schema".into(),
                message: "do not satisfy the tool's input schema".into(),
            });
        }
        Report::from_violations(tool, schema, found, max)
    }

    /// Violations are listed in argument order (by path), which reads better than the
    /// order in which the validator met the keywords.
    pub fn from_violations(tool: &str, schema: &Value, found: Found, max: usize) -> Report {
        let mut r = Report {
            tool: tool.to_owned(),
            violations: Vec::new(),
            descriptions: Vec::new(),
            omitted: 0,
            max: max.max(1),
        };
        r.extend(schema, found);
        r
    }

    /// Adds violations found against another schema (an operator's extra rules), with
    /// descriptions looked up there; past `max`, they are only counted.
    pub fn extend(&mut self, schema: &Value, more: Found) {
        self.omitted += more.omitted;
        for v in more.list {
            if self.violations.len() >= self.max {
                self.omitted += 1;
                continue;
            }
            self.descriptions
                .push(subschema(schema, &v.pointer).and_then(description));
            self.violations.push(v);
        }
        let mut both: Vec<_> = self
            .violations
            .drain(..)
            .zip(self.descriptions.drain(..))
            .collect();
        both.sort_by(|a, b| a.0.pointer.cmp(&b.0.pointer));
        (self.violations, self.descriptions) = both.into_iter().unzip();
    }

    /// Arguments whose text cannot be read as one value: a key named twice (the server may
    /// read either value) or a value the parser cannot hold. One violation, at its place.
    pub fn misread(tool: &str, schema: &Value, violation: Violation, max: usize) -> Report {
        let found = Found {
            list: vec![violation],
            omitted: 0,
        };
        Report::from_violations(tool, schema, found, max)
    }

    /// The pointers of the required members the arguments leave out.
    pub fn missing(&self) -> Vec<String> {
        (self.violations.iter())
            .filter(|v| v.keyword == "required")
            .map(|v| v.pointer.clone())
            .collect()
    }

    /// Whether a member of the arguments `members` that holds `held` wraps the arguments
    /// meant (`{"arguments": {"a": 1}}`, `{"input": …}`: some agent frameworks wrap them once
    /// more): the schema declares none of `members`, and `held` holds a required name this
    /// report finds left out of the arguments' top level.
    pub fn wraps(
        &self,
        schema: &Value,
        members: &Map<String, Value>,
        held: &Map<String, Value>,
    ) -> bool {
        let top = (self.violations.iter())
            .filter(|v| v.keyword == "required")
            .filter_map(|v| v.pointer.strip_prefix('/'))
            .filter(|token| !token.contains('/'));
        let declared = allowed_names(schema, "");
        !members.keys().any(|member| declared.contains(member))
            && top.map(unescape).any(|name| held.contains_key(&name))
    }

    /// Every problem found, described or not.
    pub fn problems(&self) -> usize {
        self.violations.len() + self.omitted
    }

    /// The text block the model reads, at most [`MAX_TEXT_BYTES`] long.
    pub fn text(&self) -> String {
        let n = self.problems();
        let mut out = format!(
            "Invalid arguments for tool \"{}\" ({} problem{}):",
            cut(&self.tool, PATH_CHARS),
            n,
            if n == 1 { "" } else { "s" }
        );
        let mut shown = 0;
        for (v, d) in self.violations.iter().zip(&self.descriptions) {
            let mut line = format!("\n- {}: {}", display_path(&v.pointer), v.message);
            if let Some(d) = d {
                let _ = write!(
                    line,
                    " (parameter description: {})",
                    cut(d.trim(), DESCRIPTION_CHARS)
                );
            }
            if out.len() + line.len() > MAX_TEXT_BYTES - 200 {
                break;
            }
            out.push_str(&line);
            shown += 1;
        }
        if shown < n {
            let _ = write!(out, "\n- …and {} more", n - shown);
        }
        out.push_str("\nCorrect the arguments and call the tool again.");
        out
    }

    /// Machine-readable details, for `_meta["toolgate/validation"]` or an error's `data`;
    /// bounded like [`Report::text`], with the problems left out counted in `omitted`.
    pub fn details(&self) -> Value {
        let mut errors = Map::new();
        let (mut size, mut shown) = (0, 0);
        for v in &self.violations {
            let pointer = cut(&v.pointer, PATH_CHARS);
            size += pointer.len() + v.message.len();
            if size > MAX_TEXT_BYTES {
                break;
            }
            shown += 1;
            match errors.get_mut(pointer.as_ref()) {
                Some(Value::String(s)) => {
                    s.push_str("; ");
                    s.push_str(&v.message);
                }
                _ => {
                    errors.insert(pointer.into_owned(), Value::String(v.message.clone()));
                }
            }
        }
        let mut d = json!({
            "code": "invalid_arguments",
            "tool": cut(&self.tool, PATH_CHARS),
            "parameter_errors": errors,
        });
        let omitted = self.problems() - shown;
        if omitted > 0 {
            d["omitted"] = Value::from(omitted);
        }
        d
    }

    /// Schema keywords that failed, for logs and metrics (never the values).
    pub fn keywords(&self) -> impl Iterator<Item = &str> {
        self.violations.iter().map(|v| v.keyword.as_str())
    }
}

/// Every violation of `schema` by `args`: at most `max` validation errors examined and at most
/// `max` violations described, whatever the keyword (one `additionalProperties` error names
/// every unexpected key).
pub fn violations(schema: Compiled<'_>, args: &Value, max: usize) -> Found {
    let mut found = Found::default();
    if let Err(why) = explainable(schema, args) {
        found.list.push(Violation {
            pointer: String::new(),
            keyword: "schema".into(),
            // Said of arguments, of a result and against an operator's schema alike.
            message: format!("breaks the schema and is {why}"),
        });
        return found;
    }
    let errors: Vec<_> = schema.validator.iter_errors(args).take(max).collect();
    described(schema.value, &errors, max)
}

/// The violations `errors` stand for, at most `max` described.
fn described(schema: &Value, errors: &[ValidationError<'_>], max: usize) -> Found {
    let (mut found, mut searches) = (Found::default(), MAX_SEARCHED_PER_REPORT);
    for e in errors.iter().take(max) {
        let room = max.saturating_sub(found.list.len());
        found.omitted += describe(e, schema, room, &mut found.list, &mut searches);
    }
    drop_patterns_of_formats(&mut found.list);
    found
}

/// A value that is not of its `format` needs no word on the `pattern` beside it: schema
/// generators write a format's own expression there (zod's `datetime()` and `email()`), and
/// a model reads "must be a valid date-time" more readily than the expression.
fn drop_patterns_of_formats(list: &mut Vec<Violation>) {
    let formats: std::collections::BTreeSet<String> = (list.iter())
        .filter(|v| v.keyword == "format")
        .map(|v| v.pointer.clone())
        .collect();
    if !formats.is_empty() {
        list.retain(|v| v.keyword != "pattern" || !formats.contains(&v.pointer));
    }
}

/// The most that the errors built to explain (or repair) one value may copy: what a copy of
/// the value holds times the schema's alternatives. The validator's error for an `anyOf` or
/// `oneOf` keeps a copy of the value for each error of each branch, so 1,000 branches
/// against a 1 MB string would hold a gigabyte to say one sentence.
const MAX_EXPLAINED_BYTES: usize = 64 * 1024 * 1024;

/// A value whose errors against its schema would copy more than [`MAX_EXPLAINED_BYTES`].
#[derive(Debug, thiserror::Error)]
#[error(
    "too large to explain: its errors would copy about {copied} bytes of it ({alternatives} alternatives)"
)]
pub struct Unexplainable {
    copied: usize,
    alternatives: usize,
}

/// Whether `value`'s errors against `schema`, of the branches it unfolds into
/// (`validate::unfolded`), can be built within [`MAX_EXPLAINED_BYTES`]. A recursive schema
/// meets its choices again at each level a value nests through it, and the error at each
/// level copies that level's part of the value, so each part is counted once for each level
/// it is nested at: 300,000 numbers sixty levels down, counted once, would copy a gigabyte.
pub fn explainable(schema: Compiled<'_>, value: &Value) -> Result<(), Unexplainable> {
    let alternatives = schema.alternatives_for(value);
    if alternatives == 0 {
        return Ok(());
    }
    // A schema whose ways multiply with each level counts them in `alternatives` already.
    let by_level = schema.recursive && schema.doubling.is_none();
    let copied = copied_bytes(value, by_level).saturating_mul(alternatives);
    match copied <= MAX_EXPLAINED_BYTES {
        true => Ok(()),
        false => Err(Unexplainable {
            copied,
            alternatives,
        }),
    }
}

/// About the bytes a copy of `value` holds: a `Value` for each of its parts, and the text of
/// its strings and keys. `by_level`: each part counted once for each level it is nested at,
/// for a copy of every level of the value held together.
fn copied_bytes(value: &Value, by_level: bool) -> usize {
    const PART: usize = std::mem::size_of::<Value>();
    let mut stack = vec![(value, 0usize)];
    let mut n = 0usize;
    while let Some((v, level)) = stack.pop() {
        let own = match v {
            Value::String(s) => s.len(),
            Value::Object(m) => {
                stack.extend(m.values().map(|v| (v, level + 1)));
                m.keys().map(String::len).sum()
            }
            Value::Array(items) => {
                stack.extend(items.iter().map(|v| (v, level + 1)));
                0
            }
            _ => 0,
        };
        let copies = match by_level {
            true => level.max(1),
            false => 1,
        };
        n = n.saturating_add((PART + own).saturating_mul(copies));
    }
    n
}

/// `s` cut to `chars` characters, marked when cut.
fn cut(s: &str, chars: usize) -> std::borrow::Cow<'_, str> {
    match s.char_indices().nth(chars) {
        None => s.into(),
        Some((i, _)) => format!("{}…", &s[..i]).into(),
    }
}

/// Describes one validation error into `out`, at most `room` violations; returns how many
/// more it holds. Its suggestions compare at most `searches` candidates, taken from it.
fn describe(
    e: &ValidationError<'_>,
    schema: &Value,
    room: usize,
    out: &mut Vec<Violation>,
    searches: &mut usize,
) -> usize {
    if let ValidationErrorKind::AdditionalProperties { unexpected }
    | ValidationErrorKind::UnevaluatedProperties { unexpected } = e.kind()
    {
        let at = e.instance_path().as_str();
        let allowed = allowed_names(schema, at);
        let missing = missing_names(schema, at, e.instance());
        let missing: Vec<&str> = missing.iter().map(String::as_str).collect();
        for (i, name) in unexpected.iter().take(room).enumerate() {
            let mut message = "is not an accepted argument".to_owned();
            let close = searched(&allowed).and_then(|all| nearest_name(name, all, searches));
            let missing: &[&str] = if i < MEANT_EXAMINED { &missing } else { &[] };
            let missed = || Meant::of(name, e.instance().get(name), missing);
            if let Some(meant) = close.map(Meant::For).or_else(missed) {
                message.push_str(&meant.said());
            } else if !allowed.is_empty() {
                let _ = write!(message, "; accepted: {}", cut(&allowed.join(", "), 400));
            }
            out.push(Violation {
                pointer: format!("{at}/{}", crate::text::pointer_token(name)),
                keyword: e.kind().keyword().to_owned(),
                message,
            });
        }
        return unexpected.len().saturating_sub(room);
    }
    if let Some(branch) = branch_meant(e) {
        let (start, mut more) = (out.len(), 0);
        for inner in branch {
            more += describe(inner, schema, room - (out.len() - start), out, searches);
        }
        return more;
    }
    if room == 0 {
        return 1;
    }
    out.push(offset_wanted(schema, e).unwrap_or_else(|| describe_one(e, schema, searches)));
    0
}

/// A date-time refused by the pattern a schema writes beside `format: date-time` (zod's
/// `datetime()` takes only `Z`): said as what the pattern takes, rather than as its few
/// hundred characters. A time with another offset is said as the same instant in UTC; a local
/// time as the offset it lacks. `None` when the pattern takes neither.
fn offset_wanted(schema: &Value, e: &ValidationError<'_>) -> Option<Violation> {
    let message = match utc_taken(e) {
        Some(utc) => format!(
            "must be a date-time in UTC, as this tool takes it (such as {}, the same instant), got {}",
            preview(&Value::String(utc)),
            preview(e.instance())
        ),
        None => with_offset(schema, e)?,
    };
    Some(Violation {
        pointer: e.instance_path().as_str().to_owned(),
        keyword: "pattern".into(),
        message,
    })
}

/// A local time the pattern beside `format: date-time` refused, said as the offset it lacks.
fn with_offset(schema: &Value, e: &ValidationError<'_>) -> Option<String> {
    let ValidationErrorKind::Pattern { pattern } = e.kind() else {
        return None;
    };
    let place = subschema(schema, e.instance_path().as_str())?;
    if place.get("format")? != "date-time" {
        return None;
    }
    let local = e.instance().as_str()?;
    let with_offset = Value::String(format!("{}Z", local.replacen(' ', "T", 1)));
    takes(pattern, with_offset.as_str()?).then(|| {
        format!(
            "must be a date-time with its offset, as this tool takes it (such as {}), got {}",
            preview(&with_offset),
            preview(e.instance())
        )
    })
}

/// The errors of the one branch of an `anyOf` or `oneOf` the value was meant for, when the
/// others say it is not theirs: they refused it for its type alone or, past that, for a
/// member that names another form (`"kind": "b"` where a branch's `kind` is `"a"`, a
/// discriminated union). An optional value's own errors (`Optional[date]` given "tomorrow" is
/// not a valid date) and the named form's (its missing member) say more than "none of the
/// accepted forms".
fn branch_meant<'a>(e: &'a ValidationError<'_>) -> Option<&'a [ValidationError<'static>]> {
    let at = e.instance_path().as_str();
    let one = match untyped_branches(e).as_slice() {
        [one] => *one,
        many => {
            let mut named = many.iter().filter(|b| forms_named(b, at).next().is_none());
            let one = *named.next()?;
            if named.next().is_some() {
                return None;
            }
            one
        }
    };
    (!one.is_empty()).then_some(one)
}

/// The branches of `e` that refused the value for more than its type.
fn untyped_branches<'a>(e: &'a ValidationError<'_>) -> Vec<&'a [ValidationError<'static>]> {
    (branches(e).into_iter())
        .filter(|(_, wanted)| wanted.is_none())
        .map(|(b, _)| b)
        .collect()
}

/// The errors of a branch that say the value at `at` names another form: a `const` or `enum`
/// refused on one of its members.
fn forms_named<'a, 'e>(
    branch: &'a [ValidationError<'e>],
    at: &'a str,
) -> impl Iterator<Item = &'a ValidationError<'e>> {
    branch.iter().filter(move |b| {
        let member = b.instance_path().as_str().strip_prefix(at);
        let member = member.and_then(|m| m.strip_prefix('/'));
        matches!(
            b.kind(),
            ValidationErrorKind::Constant { .. } | ValidationErrorKind::Enum { .. }
        ) && member.is_some_and(|m| !m.is_empty() && !m.contains('/'))
    })
}

/// When every branch of `e` (but those refusing the value's type) is another form named by
/// the same member, that member's one violation: the values it may take ("kind" given "c"
/// where the forms are "a" and "b").
fn unknown_form(e: &ValidationError<'_>, searches: &mut usize) -> Option<Violation> {
    let at = e.instance_path().as_str();
    let branches = untyped_branches(e);
    let (first, rest) = branches.split_first()?;
    forms_named(first, at).find_map(|named| {
        let pointer = named.instance_path().as_str();
        let mut values = Vec::new();
        for branch in std::iter::once(first).chain(rest) {
            let same = forms_named(branch, at).find(|b| b.instance_path().as_str() == pointer)?;
            match same.kind() {
                ValidationErrorKind::Constant { expected_value } => {
                    values.push(Value::clone(expected_value));
                }
                ValidationErrorKind::Enum { options } => {
                    values.extend(options.as_array().into_iter().flatten().cloned());
                }
                _ => return None,
            }
        }
        values.dedup();
        Some(Violation {
            pointer: pointer.to_owned(),
            keyword: named.kind().keyword().to_owned(),
            message: one_of(&Value::Array(values), named.instance(), searches),
        })
    })
}

fn describe_one(e: &ValidationError<'_>, schema: &Value, searches: &mut usize) -> Violation {
    let at = e.instance_path().as_str();
    let got = preview(e.instance());
    let one = |message: String| Violation {
        pointer: at.to_owned(),
        keyword: e.kind().keyword().to_owned(),
        message,
    };
    match e.kind() {
        ValidationErrorKind::Type { kind } => one(format!(
            "expected {}, got {}",
            type_names(kind),
            what_came(e.instance())
        )),
        ValidationErrorKind::Required { property } => {
            let name = property
                .as_str()
                .map_or_else(|| property.to_string(), str::to_owned);
            Violation {
                pointer: format!("{at}/{}", crate::text::pointer_token(&name)),
                keyword: "required".into(),
                message: "is required but missing".into(),
            }
        }
        ValidationErrorKind::Pattern { pattern } => {
            one(format!("must match the pattern {pattern}, got {got}"))
        }
        ValidationErrorKind::Enum { options } => one(one_of(options, e.instance(), searches)),
        ValidationErrorKind::Constant { expected_value } => {
            one(format!("must be exactly {expected_value}, got {got}"))
        }
        ValidationErrorKind::Minimum { limit } => {
            one(format!("must be at least {limit}, got {got}"))
        }
        ValidationErrorKind::Maximum { limit } => {
            one(format!("must be at most {limit}, got {got}"))
        }
        ValidationErrorKind::ExclusiveMinimum { limit } => {
            one(format!("must be greater than {limit}, got {got}"))
        }
        ValidationErrorKind::ExclusiveMaximum { limit } => {
            one(format!("must be less than {limit}, got {got}"))
        }
        ValidationErrorKind::MultipleOf { multiple_of } => {
            one(format!("must be a multiple of {multiple_of}, got {got}"))
        }
        ValidationErrorKind::MinLength { limit } => one(format!(
            "must be at least {limit} characters long, got {got}"
        )),
        ValidationErrorKind::MaxLength { limit } => one(format!(
            "must be at most {limit} characters long, got {got}"
        )),
        ValidationErrorKind::UniqueItems => one("must not repeat items".into()),
        ValidationErrorKind::Format { format } => {
            let mut message = format!("must be a valid {format}, got {got}");
            let written = (e.instance().as_str()).and_then(|s| as_written(s, format));
            if let Some(written) = written {
                let _ = write!(message, "; did you mean {}?", Value::from(written));
            }
            one(message)
        }
        ValidationErrorKind::FalseSchema => one("is not accepted here".into()),
        ValidationErrorKind::AnyOf { .. } | ValidationErrorKind::OneOfNotValid { .. } => {
            if let Some(v) = unknown_form(e, searches) {
                return v;
            }
            one(match branch_types(e) {
                Some(types) => format!("expected {types}, got {}", what_came(e.instance())),
                None => format!("does not match any of the accepted forms, got {got}"),
            })
        }
        ValidationErrorKind::OneOfMultipleValid { .. } => one(format!(
            "matches more than one of the accepted forms, got {got}"
        )),
        ValidationErrorKind::Not { schema: refused } => {
            one(format!("must not match {}, got {got}", preview(refused)))
        }
        ValidationErrorKind::PropertyNames { error } => one(format!(
            "each property name {}",
            describe_one(error, schema, searches).message
        )),
        _ => one(counted(e, schema).unwrap_or_else(|| e.masked().to_string())),
    }
}

/// What a keyword that counts (an array's items, an object's properties) wants, with how
/// many came; `None` for any other keyword.
fn counted(e: &ValidationError<'_>, schema: &Value) -> Option<String> {
    let items = |n: u64| if n == 1 { "item" } else { "items" };
    let properties = |n: u64| if n == 1 { "property" } else { "properties" };
    let came = match e.instance().as_ref() {
        Value::Array(a) => a.len(),
        Value::Object(o) => o.len(),
        _ => 0,
    };
    Some(match e.kind() {
        ValidationErrorKind::MinItems { limit } => {
            format!("must have at least {limit} {}, got {came}", items(*limit))
        }
        ValidationErrorKind::MaxItems { limit } => {
            format!("must have at most {limit} {}, got {came}", items(*limit))
        }
        ValidationErrorKind::AdditionalItems { limit } => {
            format!(
                "must have at most {limit} {}, got {came}",
                items(*limit as u64)
            )
        }
        ValidationErrorKind::MinProperties { limit } => {
            format!(
                "must have at least {limit} {}, got {came}",
                properties(*limit)
            )
        }
        ValidationErrorKind::MaxProperties { limit } => {
            format!(
                "must have at most {limit} {}, got {came}",
                properties(*limit)
            )
        }
        ValidationErrorKind::UnevaluatedItems { unexpected } => {
            let n = unexpected.len() as u64;
            format!("has {n} {} more than the schema describes", items(n))
        }
        ValidationErrorKind::Contains => contains_wanted(e, schema),
        _ => return None,
    })
}

/// What `contains`, with its `minContains` or `maxContains`, wants of an array: the
/// validator's error names neither the kind of item nor how many, so both are read from the
/// schema at the keyword's place.
fn contains_wanted(e: &ValidationError<'_>, schema: &Value) -> String {
    let keyword = e.schema_path().as_str();
    let place = keyword
        .rsplit_once('/')
        .and_then(|(at, _)| schema.pointer(at));
    let Some(kind) = place.and_then(|p| p.get("contains")) else {
        return "must contain an item of the kind the schema names".into();
    };
    let bound = |name| place.and_then(|p| p.get(name)).and_then(Value::as_u64);
    let (how, n) = match bound("maxContains") {
        Some(max) if keyword.ends_with("/maxContains") => ("at most", max),
        _ => ("at least", bound("minContains").unwrap_or(1)),
    };
    let (item, match_) = if n == 1 {
        ("item", "matches")
    } else {
        ("items", "match")
    };
    format!(
        "must contain {how} {n} {item} that {match_} {}",
        preview(kind)
    )
}

/// The branches of `e`, when it is an `anyOf` or `oneOf` no branch of which takes the value,
/// each with the type it wants at `e`'s place if it refused the value for its type there.
fn branches<'a>(
    e: &'a ValidationError<'_>,
) -> Vec<(&'a [ValidationError<'static>], Option<&'a TypeKind>)> {
    let (ValidationErrorKind::AnyOf { context } | ValidationErrorKind::OneOfNotValid { context }) =
        e.kind()
    else {
        return Vec::new();
    };
    let wanted = |b: &'a ValidationError<'static>| match b.kind() {
        ValidationErrorKind::Type { kind } if b.instance_path() == e.instance_path() => Some(kind),
        _ => None,
    };
    (context.iter())
        .map(|branch| (branch.as_slice(), branch.iter().find_map(wanted)))
        .collect()
}

/// The types the branches of `e` want, when each refused the value for its type: "expected
/// an integer or null" tells a model more than "any of the forms".
fn branch_types(e: &ValidationError<'_>) -> Option<String> {
    let mut types: Vec<jsonschema::JsonType> = Vec::new();
    for (_, wanted) in branches(e) {
        let each: Vec<jsonschema::JsonType> = match wanted? {
            TypeKind::Single(t) => vec![*t],
            TypeKind::Multiple(set) => set.iter().collect(),
        };
        for t in each {
            if !types.contains(&t) {
                types.push(t);
            }
        }
    }
    let names: Vec<String> = types.into_iter().map(with_article).collect();
    (!names.is_empty()).then(|| names.join(" or "))
}

/// A value none of `options` is, said with the options and, where one of them is a string
/// near enough to be a likely slip (`"Europe/Pari"`, `"HIGH"` for `"high"`), that one: past
/// the dozen options a refusal shows, the one meant may be among those it does not. Nearer
/// than a name must be to be told its parameter: options are often short words, and `"boat"`
/// is no slip for `"road"`.
fn one_of(options: &Value, given: &Value, searches: &mut usize) -> String {
    let mut message = format!(
        "must be one of {}, got {}",
        options_preview(options),
        preview(given)
    );
    let options = options.as_array().filter(|all| all.len() <= MAX_SEARCHED);
    let strings = options.into_iter().flatten().filter_map(Value::as_str);
    let slip = |g| closest_within(g, strings, |len| (len / 6).max(1), searches);
    if let Some(close) = given.as_str().and_then(slip) {
        let _ = write!(message, "; did you mean {}?", Value::from(close));
    }
    message
}

/// The allowed values, cut after a few: a huge `enum` must not become a huge answer.
fn options_preview(options: &Value) -> String {
    const SHOWN: usize = 12;
    match options.as_array() {
        Some(all) if all.len() > SHOWN => {
            let head: Vec<String> = all.iter().take(SHOWN).map(Value::to_string).collect();
            format!("[{}, … ({} more)]", head.join(","), all.len() - SHOWN)
        }
        _ => options.to_string(),
    }
}

fn with_article(t: jsonschema::JsonType) -> String {
    let n = t.as_str();
    match n {
        "integer" | "array" | "object" => format!("an {n}"),
        "null" => n.to_owned(),
        _ => format!("a {n}"),
    }
}

fn type_names(kind: &TypeKind) -> String {
    match kind {
        TypeKind::Single(t) => with_article(*t),
        TypeKind::Multiple(set) => set
            .iter()
            .map(with_article)
            .collect::<Vec<_>>()
            .join(" or "),
    }
}

/// The type of what came and a preview of it: `string "x"`; `null` alone.
fn what_came(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        v => format!("{} {}", type_of(v), preview(v)),
    }
}

fn type_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_f64() => "number",
        Value::Number(_) => "integer",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// A short rendering of what came, so the model sees its mistake. Cut at a fixed length:
/// the point is recognition, not an echo of a large value. Only what is shown is written: a
/// megabyte string refused by forty keywords would otherwise be written out forty times.
fn preview(v: &Value) -> String {
    let mut shown = Shown(Vec::with_capacity(64));
    let whole = serde_json::to_writer(&mut shown, v).is_ok();
    let text = match std::str::from_utf8(&shown.0) {
        Ok(text) => text,
        Err(cut) => std::str::from_utf8(&shown.0[..cut.valid_up_to()]).unwrap_or_default(),
    };
    match text.char_indices().nth(PREVIEW_CHARS) {
        None if whole => text.to_owned(),
        None => format!("{text}…"),
        Some((end, _)) => format!("{}…", &text[..end]),
    }
}

/// Room for [`PREVIEW_CHARS`] characters and one more; writing past it fails, which ends
/// the value's writing there.
struct Shown(Vec<u8>);

impl std::io::Write for Shown {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let room = (PREVIEW_CHARS + 1) * 4 - self.0.len();
        if room == 0 {
            return Err(std::io::ErrorKind::WriteZero.into());
        }
        let n = buf.len().min(room);
        self.0.extend_from_slice(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `/passengers/0/name` → `passengers[0].name`; the root is "arguments".
fn display_path(pointer: &str) -> String {
    let pointer = cut(pointer, PATH_CHARS);
    let pointer = pointer.as_ref();
    let mut out = String::new();
    for seg in segments(pointer) {
        if !seg.is_empty() && seg.bytes().all(|b| b.is_ascii_digit()) && !out.is_empty() {
            let _ = write!(out, "[{seg}]");
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(&seg);
        }
    }
    if out.is_empty() {
        "arguments".into()
    } else {
        out
    }
}

fn description(s: &Value) -> Option<String> {
    s.get("description")
        .and_then(Value::as_str)
        .map(str::to_owned)
}

fn allowed_names(root: &Value, at: &str) -> Vec<String> {
    let Some(s) = subschema(root, at).map(|s| resolve(root, s)) else {
        return Vec::new();
    };
    s.get("properties")
        .and_then(Value::as_object)
        .map(|p| p.keys().cloned().collect())
        .unwrap_or_default()
}

/// The names the object `instance` at `at` leaves out of those its schema requires.
fn missing_names(root: &Value, at: &str, instance: &Value) -> Vec<String> {
    let Some(s) = subschema(root, at).map(|s| resolve(root, s)) else {
        return Vec::new();
    };
    let required = s.get("required").and_then(Value::as_array);
    (required.into_iter().flatten())
        .filter_map(Value::as_str)
        .filter(|name| instance.get(name).is_none())
        .take(MEANT_AMONG)
        .map(str::to_owned)
        .collect()
}

/// What an argument a schema does not take was most likely meant as, on a call refused
/// already for leaving out required ones: one of them under a near name, or a wrapper
/// around them (`{"arguments": {"a": 1}}`, `{"input": {…}}`, the arguments put under
/// `properties` as the schema writes them).
pub(super) enum Meant<'a> {
    /// The name it was meant for: [`meant_for`], or a declared one it is a typo of.
    For(&'a str),
    /// The required names left out that it holds.
    Holding(Vec<&'a str>),
}

impl<'a> Meant<'a> {
    /// What the argument `name`, holding `value`, was meant as, of the required names
    /// `missing` left out beside it.
    pub(super) fn of(name: &str, value: Option<&Value>, missing: &[&'a str]) -> Option<Meant<'a>> {
        let held = value.and_then(Value::as_object).map(|members| {
            let held = missing.iter().filter(|m| members.contains_key(**m));
            held.copied().collect::<Vec<_>>()
        });
        match held {
            Some(held) if !held.is_empty() => Some(Meant::Holding(held)),
            _ => meant_for(name, missing.iter().copied()).map(Meant::For),
        }
    }

    /// What follows "is not a parameter of this tool" for it.
    pub(super) fn said(&self) -> String {
        match self {
            Meant::For(name) => format!("; did you mean \"{name}\"?"),
            Meant::Holding(names) => format!(
                "; send the members it holds ({}) in its place",
                cut(&names.join(", "), 400)
            ),
        }
    }
}

/// The required name left out (of `missing`) that `name` was most likely meant for, on a
/// call refused for leaving it out already, so by a looser measure than a typo's: within
/// half the longer name's length in edits (at least one, at most [`MEANT_EDITS`]), compared
/// as [`comparable`], with a character in common ("c" is meant for no "b", "bb" is for "b").
/// Bounded for a refusal's many undeclared names: names past [`MEANT_CHARS`] and missing
/// names past the first [`MEANT_AMONG`] are not compared.
pub(super) fn meant_for<'a>(
    name: &str,
    missing: impl IntoIterator<Item = &'a str>,
) -> Option<&'a str> {
    let within = |n: Vec<char>| (n.len() <= MEANT_CHARS).then_some(n);
    let n = comparable(name).and_then(within)?;
    (missing.into_iter().take(MEANT_AMONG))
        .filter_map(|meant| {
            let m = comparable(meant).and_then(within)?;
            let allowed = (n.len().max(m.len()) / 2).clamp(1, MEANT_EDITS);
            let d = edit_distance_within(&n, &m, allowed)?;
            n.iter().any(|c| m.contains(c)).then_some((d, meant))
        })
        .min_by_key(|(d, _)| *d)
        .map(|(_, meant)| meant)
}

/// The longest name [`meant_for`] compares, and the most edits it allows: a name meant for
/// another is short and near it, and each comparison costs their product.
const MEANT_CHARS: usize = 64;
const MEANT_EDITS: usize = 4;
/// The most required names left out at one place that an argument is compared with, and
/// the most arguments of one call compared with them.
const MEANT_AMONG: usize = 64;
pub(super) const MEANT_EXAMINED: usize = 16;

/// `name` as argument names are compared: lower case, without `_` and `-` (camel and snake
/// spellings of one name are one); `None` past [`MAX_COMPARED_CHARS`].
pub(super) fn comparable(name: &str) -> Option<Vec<char>> {
    if name.chars().nth(MAX_COMPARED_CHARS).is_some() {
        return None;
    }
    let kept = name.chars().filter(|c| *c != '_' && *c != '-');
    Some(kept.flat_map(char::to_lowercase).collect())
}

/// The most names or options one violation's suggestion is searched among: each of a
/// refusal's violations searches them all, so a schema of tens of thousands of options would
/// make a refused call cost many times a valid one (20,000 options, 32 violations: 0.11 s of
/// CPU against 0.014 s without the search). Real enums and objects stay far below it (the
/// IANA time zones number about 600).
const MAX_SEARCHED: usize = 1024;

/// The most candidates one refusal compares for all its suggestions together: four
/// violations' worth of [`MAX_SEARCHED`]. A refusal of 32 values, each against 1,024 options
/// of 200 characters, would otherwise cost two hundred times the valid call.
const MAX_SEARCHED_PER_REPORT: usize = 4 * MAX_SEARCHED;

/// `candidates`, where few enough to search.
fn searched(candidates: &[String]) -> Option<&[String]> {
    (candidates.len() <= MAX_SEARCHED).then_some(candidates)
}

/// Names longer than this are never compared: a typo of a name that long is not what a
/// suggestion helps with, and comparing costs the product of the two lengths.
pub const MAX_COMPARED_CHARS: usize = 256;

/// The allowed name nearest to what came, when it is near enough to be a likely typo.
///
/// Bounded whatever the input: a name or candidate over [`MAX_COMPARED_CHARS`] is not
/// compared, a candidate whose length alone puts it out of reach is skipped, and the distance
/// is computed only within the band it may take (`edit_distance_within`).
pub fn closest<'a>(name: &str, candidates: &'a [String]) -> Option<&'a str> {
    let mut searches = MAX_SEARCHED;
    nearest_name(name, candidates, &mut searches)
}

/// [`closest`], comparing at most `searches` candidates, taken from it.
fn nearest_name<'a>(name: &str, candidates: &'a [String], searches: &mut usize) -> Option<&'a str> {
    let edits = |len: usize| (len / 3).max(2);
    closest_within(name, candidates.iter().map(String::as_str), edits, searches)
}

/// [`closest`], with at most `edits(len)` edits from a candidate of `len` characters, and
/// never more than [`MAX_SLIP_EDITS`]; at most `searches` candidates compared, each taken
/// from it.
fn closest_within<'a>(
    name: &str,
    candidates: impl IntoIterator<Item = &'a str>,
    edits: impl Fn(usize) -> usize,
    searches: &mut usize,
) -> Option<&'a str> {
    let name: Vec<char> = name.chars().take(MAX_COMPARED_CHARS + 1).collect();
    if name.len() > MAX_COMPARED_CHARS {
        return None;
    }
    let name: Vec<char> = name.iter().flat_map(|c| c.to_lowercase()).collect();
    let (mut best, mut lower) = (None::<(usize, &str)>, Vec::new());
    for c in candidates {
        let Some(left) = searches.checked_sub(1) else {
            break;
        };
        *searches = left;
        let ascii = c.is_ascii();
        let len = match ascii {
            true => c.len(),
            false => c.chars().take(MAX_COMPARED_CHARS + 1).count(),
        };
        // A name is near one it shares a character with at least: "c" is no typo of "b".
        let allowed = (edits(len).min(MAX_SLIP_EDITS)).min(len.min(name.len()).saturating_sub(1));
        if len > MAX_COMPARED_CHARS || len.abs_diff(name.len()) > allowed {
            continue;
        }
        lower.clear();
        match ascii {
            true => lower.extend(c.bytes().map(|b| char::from(b.to_ascii_lowercase()))),
            false => lower.extend(c.chars().flat_map(char::to_lowercase)),
        }
        if let Some(d) = edit_distance_within(&name, &lower, allowed)
            && best.is_none_or(|(nearest, _)| d < nearest)
        {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| c)
}

/// The most edits a suggestion is from what came: more is no slip, however long the names,
/// and each edit allowed widens the band every comparison costs.
const MAX_SLIP_EDITS: usize = 8;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_too_large_for_its_alternatives_is_refused_without_building_their_errors() {
        let branches: Vec<Value> = (0..1000).map(|i| json!({"const": i})).collect();
        let schema = json!({"type": "object", "properties": {"x": {"anyOf": branches}}});
        let s = compile(&schema.to_string(), &settings());
        let compiled = s.compiled(s.validator().unwrap());
        let big = json!({"x": "a".repeat(1_000_000)});
        let found = violations(compiled, &big, 32);
        assert_eq!(found.list.len(), 1);
        assert!(
            found.list[0]
                .message
                .contains("too large to explain: its errors would copy about 1000065000 bytes of it (1000 alternatives)"),
            "{:?}",
            found.list
        );
        let small = json!({"x": "a"});
        let found = violations(compiled, &small, 32);
        assert_eq!(found.list[0].keyword, "anyOf");
    }

    #[test]
    fn a_recursive_schema_counts_a_copy_for_each_level_a_value_nests_through_it() {
        let recursive = json!({"type": "object", "properties": {"v": {"$ref": "#/$defs/n"}},
            "$defs": {"n": {"type": "array", "items": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "integer"}]}}}});
        let flat = json!({"type": "object", "properties": {"v": {"anyOf": [{"type": "array"}, {"type": "integer"}]}}});
        let nested = |levels: usize| {
            let bulk = Value::Array(vec![json!(1); 100_000]);
            json!({"v": (0..levels).fold(bulk, |v, _| json!([v]))})
        };
        let (recursive, flat) = (
            compile(&recursive.to_string(), &settings()),
            compile(&flat.to_string(), &settings()),
        );
        let recursive = recursive.compiled(recursive.validator().unwrap());
        assert!(recursive.recursive);
        assert!(explainable(recursive, &nested(2)).is_ok());
        let why = explainable(recursive, &nested(60)).unwrap_err().to_string();
        assert!(
            why.starts_with("too large to explain: its errors would copy about "),
            "{why}"
        );
        // Without a loop, each choice copies the value once, however deep it is.
        let flat = flat.compiled(flat.validator().unwrap());
        assert!(!flat.recursive);
        assert!(explainable(flat, &nested(60)).is_ok());
    }
    use crate::catalog::{CompileSettings, compile};
    use crate::config::UnknownDialect;

    fn settings() -> CompileSettings {
        CompileSettings {
            max_schema_bytes: 1 << 20,
            validate_formats: true,
            unknown_dialect: UnknownDialect::Reject,
        }
    }

    fn report(schema: Value, args: Value) -> Report {
        let s = compile(&schema.to_string(), &settings());
        Report::build("t", s.compiled(s.validator().unwrap()), &args, 32)
    }

    /// Keywords the validator's own words would say of "value" or not at all, each said as
    /// what the argument must be, with what came.
    #[test]
    fn counting_and_negating_keywords_say_what_they_want() {
        let cases = [
            (
                json!({"type": "array", "contains": {"type": "integer"}}),
                json!(["a"]),
                "must contain at least 1 item that matches {\"type\":\"integer\"}",
            ),
            (
                json!({"contains": {"type": "integer"}, "minContains": 2}),
                json!([1, "a"]),
                "must contain at least 2 items that match {\"type\":\"integer\"}",
            ),
            (
                json!({"contains": {"type": "integer"}, "maxContains": 1}),
                json!([1, 2]),
                "must contain at most 1 item that matches {\"type\":\"integer\"}",
            ),
            (
                json!({"$ref": "#/$defs/ints"}),
                json!([]),
                "must contain at least 1 item that matches {\"minimum\":0}",
            ),
            (
                json!({"type": "object", "minProperties": 2}),
                json!({"a": 1}),
                "must have at least 2 properties, got 1",
            ),
            (
                json!({"type": "object", "maxProperties": 1}),
                json!({"a": 1, "b": 2}),
                "must have at most 1 property, got 2",
            ),
            (
                json!({"type": "array", "minItems": 2}),
                json!([1]),
                "must have at least 2 items, got 1",
            ),
            (
                json!({"type": "array", "maxItems": 1}),
                json!([1, 2, 3]),
                "must have at most 1 item, got 3",
            ),
            (
                json!({"not": {"type": "string"}}),
                json!("x"),
                "must not match {\"type\":\"string\"}, got \"x\"",
            ),
            (
                json!({"propertyNames": {"maxLength": 3}}),
                json!({"abcdef": 1}),
                "each property name must be at most 3 characters long, got \"abcdef\"",
            ),
            (
                json!({"prefixItems": [{"type": "integer"}], "unevaluatedItems": false}),
                json!([1, 2]),
                "has 1 item more than the schema describes",
            ),
        ];
        for (at_v, v, want) in cases {
            let schema = json!({
                "type": "object",
                "properties": {"v": at_v},
                "$defs": {"ints": {"type": "array", "contains": {"minimum": 0}}}
            });
            let r = report(schema.clone(), json!({"v": v}));
            let got: Vec<&str> = r.violations.iter().map(|v| v.message.as_str()).collect();
            assert_eq!(got, [want], "{schema}");
        }
    }

    /// A preview is the first characters of the value's JSON, whole when it is short, cut
    /// with a mark when it is not, whatever the characters' width.
    #[test]
    fn a_preview_shows_the_values_beginning_only() {
        assert_eq!(preview(&json!({"a": [1, 2]})), r#"{"a":[1,2]}"#);
        let exact = "x".repeat(PREVIEW_CHARS - 2);
        assert_eq!(preview(&json!(exact)), format!("\"{exact}\""));
        let long = "é".repeat(1_000_000);
        let shown = preview(&json!(long));
        assert_eq!(shown.chars().count(), PREVIEW_CHARS + 1, "{shown}");
        assert!(
            shown.starts_with("\"éé") && shown.ends_with("é…"),
            "{shown}"
        );
        let wide = "😀".repeat(PREVIEW_CHARS);
        assert_eq!(
            preview(&json!(wide)),
            format!("\"{}…", "😀".repeat(PREVIEW_CHARS - 1))
        );
        let one_more = "x".repeat(PREVIEW_CHARS - 1);
        assert_eq!(
            preview(&json!(one_more)),
            format!("\"{}…", "x".repeat(PREVIEW_CHARS - 1))
        );
    }

    #[test]
    fn every_violation_is_listed_with_its_description() {
        let r = report(
            json!({
                "type": "object",
                "properties": {
                    "departureDate": {"type": "string", "pattern": "^\\d{2}/\\d{2}/\\d{4}$", "description": "Date in dd/mm/yyyy"},
                    "passengers": {"type": "integer", "minimum": 1, "maximum": 9}
                },
                "required": ["departureDate", "origin"],
                "additionalProperties": false
            }),
            json!({"departureDate": "2025-08-08", "passengers": 12, "pasengers": 1}),
        );
        let text = r.text();
        assert!(text.contains("- departureDate: must match the pattern ^\\d{2}/\\d{2}/\\d{4}$, got \"2025-08-08\" (parameter description: Date in dd/mm/yyyy)"), "{text}");
        assert!(
            text.contains("- passengers: must be at most 9, got 12"),
            "{text}"
        );
        assert!(text.contains("- origin: is required but missing"), "{text}");
        assert!(
            text.contains("- pasengers: is not an accepted argument; did you mean \"passengers\"?"),
            "{text}"
        );
        let d = r.details();
        assert_eq!(
            d["parameter_errors"]["/passengers"],
            "must be at most 9, got 12"
        );
        assert_eq!(d["code"], "invalid_arguments");
    }

    #[test]
    fn an_option_near_the_value_an_enum_refused_is_named() {
        let zones: Vec<String> = (0..40).map(|i| format!("Zone/{i:02}")).collect();
        let mut zones = json!(zones);
        zones.as_array_mut().unwrap().push(json!("Europe/Paris"));
        let r = report(
            json!({"type": "object", "properties": {
                "zone": {"enum": zones},
                "level": {"enum": ["low", "high", 3]},
                "kind": {"enum": ["box", "letter"]},
                "mode": {"enum": ["air", "rail", "road"]}
            }}),
            json!({"zone": "Europe/Pari", "level": "HIGH", "kind": "parcel", "mode": "boat"}),
        );
        let d = r.details();
        let said = |at: &str| d["parameter_errors"][at].as_str().unwrap().to_owned();
        assert!(
            said("/zone")
                .ends_with(", … (29 more)], got \"Europe/Pari\"; did you mean \"Europe/Paris\"?"),
            "{}",
            said("/zone")
        );
        assert_eq!(
            said("/level"),
            "must be one of [\"low\",\"high\",3], got \"HIGH\"; did you mean \"high\"?"
        );
        assert_eq!(
            said("/kind"),
            "must be one of [\"box\",\"letter\"], got \"parcel\""
        );
        assert_eq!(
            said("/mode"),
            "must be one of [\"air\",\"rail\",\"road\"], got \"boat\""
        );
        // Past the options a suggestion is searched among, none is.
        let many: Vec<String> = (0..=MAX_SEARCHED).map(|i| format!("z{i:04}")).collect();
        let r = report(
            json!({"type": "object", "properties": {"z": {"enum": many}}}),
            json!({"z": "z0001x"}),
        );
        let said = r.details()["parameter_errors"]["/z"].to_string();
        assert!(!said.contains("did you mean"), "{said}");
    }

    #[test]
    fn a_choice_of_types_says_the_types() {
        let schema = json!({"type": "object", "properties": {
            "tags": {"anyOf": [{"type": "array"}, {"type": "null"}]},
            "n": {"oneOf": [{"type": "integer"}, {"type": ["integer", "string"], "minLength": 3}]},
            "at": {"anyOf": [{"type": "string", "pattern": "^a"}, {"type": "integer"}]}
        }});
        let r = report(schema, json!({"tags": "x", "n": true, "at": "b"}));
        let d = r.details();
        assert_eq!(
            d["parameter_errors"]["/tags"],
            "expected an array or null, got string \"x\""
        );
        assert_eq!(
            d["parameter_errors"]["/n"],
            "expected an integer or a string, got boolean true"
        );
        // One branch refused it for more than its type: that branch's errors, as an
        // optional value's own; several: the forms.
        assert_eq!(
            d["parameter_errors"]["/at"],
            "must match the pattern ^a, got \"b\""
        );
        let schema = json!({"type": "object", "properties": {
            "day": {"anyOf": [{"type": "string", "format": "date"}, {"type": "null"}]},
            "who": {"anyOf": [{"type": "object", "properties": {"n": {"type": "integer", "maximum": 3}}, "required": ["name"]}, {"type": "null"}]},
            "at": {"anyOf": [{"type": "string", "pattern": "^a"}, {"type": "string", "minLength": 3}]}
        }});
        let r = report(
            schema,
            json!({"day": "tomorrow", "who": {"n": 4}, "at": "b"}),
        );
        assert_eq!(
            r.details()["parameter_errors"],
            json!({
                "/day": "must be a valid date, got \"tomorrow\"",
                "/who/n": "must be at most 3, got 4",
                "/who/name": "is required but missing",
                "/at": "does not match any of the accepted forms, got \"b\""
            })
        );
    }

    #[test]
    fn a_discriminated_union_says_the_named_forms_errors() {
        let form = |kind: &str, member: &str, t: &str| json!({"type": "object", "properties": {"kind": {"type": "string", "const": kind}, member: {"type": t}}, "required": ["kind", member]});
        let schema = json!({"type": "object", "properties": {
            "du": {"oneOf": [form("a", "x", "number"), form("b", "y", "string"), {"type": "null"}]},
            "other": {"anyOf": [form("a", "x", "number"), {"type": "object", "properties": {"kind": {"enum": ["b", "c"]}}, "required": ["kind"]}]},
        }});
        let r = report(
            schema.clone(),
            json!({"du": {"kind": "b", "x": 2}, "other": {"kind": "d"}}),
        );
        assert_eq!(
            r.details()["parameter_errors"],
            json!({
                "/du/y": "is required but missing",
                "/other/kind": "must be one of [\"a\",\"b\",\"c\"], got \"d\""
            })
        );
        // The form the value names is the one described, whatever else it carries.
        let r = report(schema, json!({"du": {"kind": "a", "y": 2, "x": "1"}}));
        assert_eq!(
            r.details()["parameter_errors"],
            json!({"/du/x": "expected a number, got string \"1\""})
        );
    }

    #[test]
    fn a_null_is_said_once() {
        let schema = json!({"type": "object", "properties": {"n": {"type": "integer"}}});
        let r = report(schema, json!({"n": null}));
        let d = r.details();
        assert_eq!(d["parameter_errors"]["/n"], "expected an integer, got null");
    }

    #[test]
    fn a_value_not_of_its_format_is_not_told_the_formats_pattern() {
        let schema = json!({"type": "object", "properties": {
            "when": {"type": "string", "format": "date-time", "pattern": "^\\d{4}-\\d\\d-\\d\\dT"},
            "day": {"type": "string", "format": "date", "pattern": "^2"},
        }});
        let r = report(schema, json!({"when": "2026-11-30", "day": "1999-01-01"}));
        assert_eq!(
            r.details()["parameter_errors"],
            json!({
                "/when": "must be a valid date-time, got \"2026-11-30\"",
                "/day": "must match the pattern ^2, got \"1999-01-01\""
            })
        );
    }

    #[test]
    fn nested_paths_read_naturally_and_follow_refs() {
        let r = report(
            json!({
                "type": "object",
                "$defs": {"t": {"type": "object", "properties": {"age": {"type": "integer", "description": "Age in years"}}}},
                "properties": {"travellers": {"type": "array", "items": {"$ref": "#/$defs/t"}}}
            }),
            json!({"travellers": [{"age": 3}, {"age": "old"}]}),
        );
        assert!(r.text().contains("- travellers[1].age: expected an integer, got string \"old\" (parameter description: Age in years)"), "{}", r.text());
    }

    #[test]
    fn the_banded_distance_is_the_edit_distance_within_its_band() {
        let d = |a: &str, b: &str, k| {
            let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
            edit_distance_within(&a, &b, k)
        };
        assert_eq!(d("kitten", "sitting", 3), Some(3));
        assert_eq!(d("kitten", "sitting", 2), None);
        assert_eq!(d("origin", "oirgin", 2), Some(1), "a swap is one edit");
        assert_eq!(d("", "ab", 2), Some(2));
        assert_eq!(d("abc", "abc", 0), Some(0));
        assert_eq!(d("abc", "abd", 0), None);
        // Two names of 12,000 characters cost their length times the band, not its square.
        let long = "p".repeat(12_000);
        assert_eq!(d(&long, &format!("{long}q"), 2), Some(1));
    }

    #[test]
    fn a_name_the_schema_refuses_near_a_missing_required_one_is_said_with_it() {
        let r = report(
            json!({"type": "object", "additionalProperties": false,
                "properties": {"a": {}, "b": {}, "path": {}, "opts": {"type": "object",
                    "properties": {"n": {}}, "required": ["n"], "additionalProperties": false}},
                "required": ["a", "b", "path", "opts"]}),
            json!({"a": 1, "bb": 2, "file_path": "/", "c": 3, "opts": {"nn": 1, "x": 2}}),
        );
        let d = r.details();
        assert_eq!(
            d["parameter_errors"],
            json!({
                "/b": "is required but missing",
                "/bb": "is not an accepted argument; did you mean \"b\"?",
                "/c": "is not an accepted argument; accepted: a, b, opts, path",
                "/file_path": "is not an accepted argument; did you mean \"path\"?",
                "/path": "is required but missing",
                "/opts/n": "is required but missing",
                "/opts/nn": "is not an accepted argument; did you mean \"n\"?",
                "/opts/x": "is not an accepted argument; accepted: n",
            })
        );
        let r = report(
            json!({"type": "object", "additionalProperties": false,
                "properties": {"a": {}, "b": {}}, "required": ["a", "b"]}),
            json!({"input": {"a": 1, "b": 2}}),
        );
        assert_eq!(
            r.details()["parameter_errors"]["/input"],
            "is not an accepted argument; send the members it holds (a, b) in its place"
        );
        let schema = json!({"type": "object", "$ref": "#/$defs/call", "$defs": {"call": {
            "properties": {"name": {}, "config": {}, "a/b": {}}, "required": ["name", "a/b"]}}});
        let r = report(schema.clone(), json!({"config": {"name": "x"}}));
        let held = |v: Value| v.as_object().unwrap().clone();
        let wraps = |members: Value, within: Value| r.wraps(&schema, &held(members), &held(within));
        assert!(
            !wraps(json!({"config": {}}), json!({"name": "x"})),
            "a declared member holds a value of its own"
        );
        assert!(wraps(json!({"input": {}}), json!({"name": "x"})));
        assert!(wraps(json!({"input": {}}), json!({"a/b": 1})));
        assert!(
            !wraps(json!({"input": {}}), json!({"other": 1})),
            "it holds none of the names left out"
        );
        assert!(
            !wraps(json!({"input": {}, "config": 1}), json!({"name": "x"})),
            "a declared member beside it"
        );
        assert_eq!(meant_for("x", ["b"]), None, "nothing in common");
        assert_eq!(meant_for("pathology_of", ["path"]), None, "too far");
        assert_eq!(meant_for("bb", ["a", "b"]), Some("b"));
    }

    #[test]
    fn a_refusal_compares_a_bounded_number_of_options_for_all_its_suggestions() {
        let options: Vec<String> = (0..MAX_SEARCHED).map(|i| format!("option{i:04}")).collect();
        let names: Vec<String> = (0..8).map(|i| format!("p{i}")).collect();
        let schema = json!({"type": "object", "$defs": {"o": {"enum": options}},
            "properties": names.iter().map(|n| (n.clone(), json!({"$ref": "#/$defs/o"}))).collect::<Map<_, _>>()});
        let args: Map<String, Value> = names
            .iter()
            .map(|n| (n.clone(), json!("option0001x")))
            .collect();
        let r = report(schema, Value::Object(args));
        let told = r
            .violations
            .iter()
            .filter(|v| v.message.contains("did you mean \"option0001\""))
            .count();
        assert_eq!(
            (r.violations.len(), told),
            (8, MAX_SEARCHED_PER_REPORT / MAX_SEARCHED)
        );
    }

    #[test]
    fn closest_name_only_when_near() {
        let c = vec!["departureDate".to_string(), "origin".to_string()];
        assert_eq!(closest("departure_date", &c), Some("departureDate"));
        assert_eq!(closest("zzz", &c), None);
        let short = vec!["b".to_string(), "ab".to_string(), "name".to_string()];
        assert_eq!(closest("c", &short), None, "nothing in common");
        assert_eq!(closest("ba", &short), Some("ab"), "a swap");
        assert_eq!(closest("nme", &short), Some("name"));
        assert_eq!(closest("x", &short), None);
        // Bounded: a huge name is not compared, and a huge candidate is skipped.
        let huge = "a".repeat(4 << 20);
        assert_eq!(closest(&huge, &c), None);
        let mut with_huge = c.clone();
        with_huge.push("x".repeat(12_000));
        assert_eq!(closest("departure_date", &with_huge), Some("departureDate"));
    }
}
