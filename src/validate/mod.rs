//! The input boundary: one `tools/call`'s arguments against the tool's schema.
//!
//! The cheap path is `is_valid` alone; error details are computed only for calls that fail.
//! Coercion is guided by the validator's own type errors, so it reaches properties behind
//! `$ref`, `allOf` and nested arrays without a second schema walker.

mod applicators;
mod compiled;
mod doubling;
pub(crate) mod duration;
mod flat;
mod fractions;
mod in_place;
mod integer_formats;
pub(crate) mod literal;
pub(crate) mod local_time;
mod lookup;
pub(crate) mod plain_pattern;
mod references;
mod report;
mod spliced;
mod undeclared;
mod unfolded;
mod unrunnable;
mod written;

pub use applicators::{PLACE_BYTES_PER_BYTE, place_bytes};
pub use compiled::Compiled;
pub(crate) use flat::Flat;
pub use fractions::decimal_multiples;
pub use in_place::InPlace;
pub use integer_formats::with_integer_bounds;
pub use report::{Found, MAX_TEXT_BYTES, Report, Violation, closest, violations};
pub use spliced::spliced;
pub use undeclared::{Judge, Renamed, Shape};
pub use unfolded::{Doubling, MAX_UNFOLDED, unfolded};
pub use unrunnable::without_unrunnable;

/// Numbers below a bound, drawn from `seed` (xorshift): the randomized tests draw the same
/// cases on every run.
#[cfg(test)]
pub(crate) fn draws(seed: u64) -> impl FnMut(usize) -> usize {
    let mut state = seed;
    move |n| {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        (state % n as u64) as usize
    }
}

use crate::jsonrpc::footprint;
use crate::text;
use jsonschema::JsonType;
use jsonschema::error::{TypeKind, ValidationErrorKind};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// Rounds of coercion: a JSON-encoded array may hold strings that need converting too.
const MAX_COERCE_ROUNDS: usize = 4;

#[derive(Debug)]
pub enum Verdict {
    Valid,
    /// Valid once some strings were converted; forward the converted arguments instead.
    /// `changed`: the places (JSON pointers into the arguments) coercion wrote, none under
    /// another; everything else goes upstream as it came (`spliced`).
    Coerced {
        changed: Vec<String>,
    },
    /// Refused. `changed`: the places coercion wrote in the arguments it leaves refused (empty
    /// where it left them as they came), which a repair of them goes with too.
    Invalid {
        report: Report,
        changed: Vec<String>,
    },
}

/// Checks arguments and, with `coerce`, repairs what a model sends nearly as the schema wants
/// it (a value of another type or form, `fix_for`; a lone value for an array, a list of one
/// for its item; a `null` for a member it may leave out) and writes whole numbers where it
/// wants an integer as integers. The repair happens in place, so the caller forwards (or
/// checks further) exactly what was validated. At most `max_errors` errors are examined: a
/// hostile schema can make them grow exponentially with the instance's depth.
pub fn check(
    tool: &str,
    schema: Compiled<'_>,
    args: &mut Value,
    coerce: bool,
    max_errors: usize,
) -> Verdict {
    let mut changed: Vec<String> = Vec::new();
    if !schema.validator.is_valid(args) {
        // Repair reads the validator's errors too: not for a value too large to explain.
        if !coerce || report::explainable(schema, args).is_err() {
            let report = Report::build(tool, schema, args, max_errors);
            return Verdict::Invalid { report, changed };
        }
        if let Err(report) = repair(tool, schema, args, max_errors, &mut changed) {
            return Verdict::Invalid { report, changed };
        }
    }
    if coerce {
        whole_numbers(schema, args, max_errors, &mut changed);
    }
    if changed.is_empty() {
        Verdict::Valid
    } else {
        Verdict::Coerced { changed }
    }
}

/// Converts the values the validator's type, pattern and format errors point at, round after
/// round, until the arguments are valid; `Err` is the report on arguments that stay invalid,
/// `changed` what it leaves converted in them.
fn repair(
    tool: &str,
    schema: Compiled<'_>,
    args: &mut Value,
    max_errors: usize,
    changed: &mut Vec<String>,
) -> Result<(), Report> {
    let validator = schema.validator;
    // A refusal speaks of the arguments as they came once a lone value is put in an array (or
    // a list of one taken for its item) or a number written as text (not of a value the model
    // never wrote), and where the schema's checks multiply with each level of a value
    // (`Doubling`), so that JSON text read as a value cannot take the arguments past the
    // levels such a schema checks. A string read as a number stays read: "must be at most 10,
    // got 20" says more than its type. A repair cut short, with values left that it would
    // convert, speaks of them as they came too, not of some converted and some not. Kept once
    // a round changes them: most refused arguments have nothing to convert, and a copy of
    // them would double what they hold.
    let mut sent = None;
    let mut as_sent = schema.doubling.is_some();
    let mut cut_short = true;
    // The places a lone value was put in an array at, whose one item may list several.
    let mut wrapped = BTreeSet::new();
    for round in 0..MAX_COERCE_ROUNDS {
        let errors: Vec<_> = validator.iter_errors(args).take(max_errors).collect();
        let fixes = round_fixes(schema.value, &errors, &mut wrapped, &mut as_sent);
        if fixes.is_empty() && round == 0 {
            // Nothing to repair: these are the errors the report explains.
            return Err(Report::of_errors(tool, schema.value, &errors, max_errors));
        }
        drop(errors);
        if fixes.is_empty() {
            cut_short = false;
            break;
        }
        sent.get_or_insert_with(|| args.clone());
        for (pointer, v) in fixes {
            replace(args, &pointer, v, changed);
        }
        if schema.doubling.is_some_and(|d| d.reaches(args).is_err()) {
            break;
        }
        if validator.is_valid(args) {
            return Ok(());
        }
        // JSON text read as the value it writes may hold what no error may copy.
        if report::explainable(schema, args).is_err() {
            return Err(Report::build(tool, schema, args, max_errors));
        }
    }
    if let Some(sent) = sent.filter(|_| as_sent || cut_short) {
        *args = sent;
        changed.clear();
    }
    Err(Report::build(tool, schema, args, max_errors))
}

/// What one round of repair writes where `errors` point: each place's new value (`None`: the
/// member is left out). `as_sent` is set where a refusal must then speak of the arguments as
/// they came; `wrapped` gains the places a lone value is put in an array at.
fn round_fixes(
    root: &Value,
    errors: &[jsonschema::ValidationError<'_>],
    wrapped: &mut BTreeSet<String>,
    as_sent: &mut bool,
) -> BTreeMap<String, Option<Value>> {
    // Two branches may want one string as two types: the first one's wins.
    let mut fixes: BTreeMap<String, Option<Value>> = BTreeMap::new();
    // A lone value is put in an array, or a list of one taken for its item, only where no
    // branch reads it as anything else.
    let mut reshapes: BTreeMap<String, Value> = BTreeMap::new();
    for leaf in errors.iter().flat_map(fixable_errors) {
        let at = leaf.instance_path().as_str();
        let fix = match fix_for(leaf) {
            Some(v) => {
                // A number read from text, and a list from an object's members, are spoken
                // of as they came.
                *as_sent |= leaf.instance().is_number() || leaf.instance().is_object();
                Some(v)
            }
            None if left_out(root, leaf) => None,
            None => {
                let reshape = listed(leaf, wrapped).or_else(|| Some((at, reshaped(leaf)?)));
                if let Some((at, v)) = reshape {
                    reshapes.entry(at.to_owned()).or_insert(v);
                }
                continue;
            }
        };
        fixes.entry(at.to_owned()).or_insert(fix);
    }
    for (at, v) in reshapes {
        // A list a branch mends item by item stays a list.
        let within = format!("{at}/");
        let mut under = fixes.range(within.clone()..);
        if under.next().is_some_and(|(k, _)| k.starts_with(&within)) {
            continue;
        }
        if v.is_array() {
            wrapped.insert(at.clone());
        }
        fixes.entry(at).or_insert_with(|| {
            *as_sent = true;
            Some(v)
        });
    }
    fixes
}

/// The values a lone string put in a list (at a place in `wrapped`) lists with commas between
/// them, where the list's items refuse it as one: `"mon, tue"` for days that are options,
/// `"1, 2"` for integers, `"a@x.org, b@y.org"` for addresses of a `format` or a `pattern`.
/// Each is what the items want as written, or converted as a lone value would be
/// ([`convert`], [`option_for`]); `None` unless every one is, and there are two to
/// [`MAX_LISTED`]. A string the items take is never split: `"Paris, France"` stays one.
fn listed<'e>(
    e: &'e jsonschema::ValidationError<'_>,
    wrapped: &BTreeSet<String>,
) -> Option<(&'e str, Value)> {
    let list =
        (e.instance_path().as_str().strip_suffix("/0")).filter(|at| wrapped.contains(*at))?;
    let Value::String(s) = e.instance().as_ref() else {
        return None;
    };
    let pieces: Vec<&str> = (s.split(',').map(str::trim))
        .filter(|p| !p.is_empty())
        .take(MAX_LISTED + 1)
        .collect();
    if !(2..=MAX_LISTED).contains(&pieces.len()) {
        return None;
    }
    let item = |piece: &str| match e.kind() {
        ValidationErrorKind::Enum { options } => {
            let options = options.as_array()?;
            let exact = options.iter().find(|o| o.as_str() == Some(piece)).cloned();
            exact.or_else(|| option_for(&Value::from(piece), options))
        }
        ValidationErrorKind::Type { kind } => convert(piece, kind),
        // Checked with the list in the next round: a list any piece leaves refused is
        // refused as sent.
        ValidationErrorKind::Format { .. } | ValidationErrorKind::Pattern { .. } => {
            Some(Value::from(piece))
        }
        _ => None,
    };
    let items: Option<Vec<Value>> = pieces.iter().map(|p| item(p)).collect();
    Some((list, Value::Array(items?)))
}

/// The most values a lone string is read as listing ([`listed`]): a model lists a few, and
/// each is compared with every option.
const MAX_LISTED: usize = 32;

/// Whether the value an error points at is a `null`, an empty string, or a null's word
/// ([`names_null`]), for a member its object may leave out: it is left out, as if not given.
/// A model sends `null` or `""` for an argument it means to leave out (a provider's strict
/// mode writes every optional parameter as required, and a model fills one it has no value
/// for), and servers refuse them where they take its absence (zod's `.optional()`, a
/// Pydantic parameter with a default that is not `None`).
fn left_out(root: &Value, e: &jsonschema::ValidationError<'_>) -> bool {
    let nothing = match e.instance().as_ref() {
        Value::Null => true,
        Value::String(s) => s.is_empty() || names_null(s),
        _ => false,
    };
    nothing && lookup::optional_member(root, e.instance_path().as_str())
}

/// What the value a type, pattern, format, enum or const error points at converts to: a
/// string that reads as the type wanted, or an integer where a string is wanted, as its
/// digits (a model writes an id or a code of digits as a number: `"order": 12345`). A
/// number with a fraction or an exponent is not: which text it stands for is not known. A
/// value its `format` refuses for how it is written (a time's seconds left out, a space in
/// a URI's query, as Pydantic and zod take them) converts to the same value as the format
/// writes it ([`written::as_written`]). A date-time with an offset a pattern refuses
/// converts to the same instant in UTC where the pattern takes that (zod's `datetime()`
/// takes only `Z`); a local time does not, as which instant it names is not known. A string
/// an `enum` or a `const` refuses converts to the option it spells otherwise or writes as
/// text, and an integer to the option that is its digits ([`option_for`]). An object named
/// by its items' places, where a list is wanted, converts to the list ([`indexed`]).
fn fix_for(e: &jsonschema::ValidationError<'_>) -> Option<Value> {
    match (e.kind(), e.instance().as_ref()) {
        (ValidationErrorKind::Pattern { .. }, _) => written::utc_taken(e).map(Value::String),
        (ValidationErrorKind::Format { format }, Value::String(s)) => {
            written::as_written(s, format).map(Value::String)
        }
        (ValidationErrorKind::Type { kind }, Value::String(s)) => convert(s, kind),
        (ValidationErrorKind::Enum { options }, v) => option_for(v, options.as_array()?),
        (ValidationErrorKind::Constant { expected_value }, v) => {
            option_for(v, std::slice::from_ref(&**expected_value))
        }
        (ValidationErrorKind::Type { kind }, Value::Number(n))
            if wants_type(kind, JsonType::String) && (n.is_i64() || n.is_u64()) =>
        {
            Some(Value::String(n.to_string()))
        }
        (ValidationErrorKind::Type { kind }, Value::Object(members))
            if wants_type(kind, JsonType::Array) =>
        {
            indexed(members)
        }
        _ => None,
    }
}

/// The list an object whose names are its items' places writes, its items in the order of
/// their places: a JavaScript client that spreads a list into an object (`{...list}`) sends
/// `{"0": "a", "1": "b"}`, and PHP's `json_encode` writes a list that lost items so
/// (`{"0": "a", "2": "c"}`). `None` unless there is one member at least and every name is a
/// place (digits, with no leading zero).
fn indexed(members: &serde_json::Map<String, Value>) -> Option<Value> {
    let place = |name: &str| {
        let digits = !name.is_empty() && name.bytes().all(|b| b.is_ascii_digit());
        let plain = name == "0" || !name.starts_with('0');
        (digits && plain)
            .then(|| name.parse::<u64>().ok())
            .flatten()
    };
    let mut items = (members.iter())
        .map(|(name, v)| Some((place(name)?, v)))
        .collect::<Option<Vec<_>>>()?;
    if items.is_empty() {
        return None;
    }
    items.sort_unstable_by_key(|(at, _)| *at);
    Some(Value::Array(
        items.into_iter().map(|(_, v)| v.clone()).collect(),
    ))
}

/// The one option of `options` that `v` stands for: a string spelt otherwise ([`respelt`]),
/// a string that writes an option that is no string (`"2"` for `2`, `"true"` for `true`), or
/// an integer whose digits are an option (`720` for `"720"`), as a model writes a number
/// where the schema lists the number as text, or the other way.
fn option_for(v: &Value, options: &[Value]) -> Option<Value> {
    if options.len() > MAX_RESPELT_OPTIONS {
        return None;
    }
    let Value::String(s) = v else {
        let digits = v
            .as_number()
            .filter(|n| n.is_i64() || n.is_u64())?
            .to_string();
        return options
            .iter()
            .find(|o| o.as_str() == Some(&digits))
            .cloned();
    };
    respelt(s, options).or_else(|| {
        let written = serde_json::from_str::<Value>(s.trim()).ok()?;
        let unlike_text = !written.is_string() && !written.is_array() && !written.is_object();
        unlike_text.then(|| options.iter().find(|o| **o == written).cloned())?
    })
}

/// The one string of `options` that `s` spells in other case (`"Economy"` for `"economy"`,
/// a value capitalised as in prose) or, where both are short, with other separators between
/// its words too (`"In Progress"` or `"in-progress"` for `"in_progress"`, an option written
/// as words); `None` where none is, or several are, or past [`MAX_RESPELT_OPTIONS`]
/// options, or for a string longer than any name is compared
/// ([`report::MAX_COMPARED_CHARS`] characters of up to four bytes).
fn respelt(s: &str, options: &[Value]) -> Option<Value> {
    if options.len() > MAX_RESPELT_OPTIONS || s.len() > 4 * report::MAX_COMPARED_CHARS {
        return None;
    }
    let (ascii, short) = (s.is_ascii(), s.len() <= WORDS_COMPARED);
    let spelt = |o: &&str| {
        let apart = short && o.len() <= WORDS_COMPARED;
        match (ascii && o.is_ascii(), apart) {
            (true, false) => o.eq_ignore_ascii_case(s),
            (true, true) => ascii_words(o).eq(ascii_words(s)),
            (false, apart) => folded(o, apart).eq(folded(s, apart)),
        }
    };
    let mut same = (options.iter().filter_map(Value::as_str)).filter(spelt);
    let one = same.next()?;
    same.next().is_none().then(|| Value::String(one.to_owned()))
}

/// The longest string and option (in bytes) compared with the separators between words set
/// aside: an option written as words is a few short ones, and such a comparison goes byte by
/// byte, where one in other case alone compares many bytes at once (32 refused values
/// against 1,024 options of 64 bytes that share 60: 3.5 ms against 0.25, on an AMD EPYC on
/// 2026-12-06).
const WORDS_COMPARED: usize = 32;

/// Whether `c` stands between words: `_`, `-` or a space.
fn between_words(c: char) -> bool {
    matches!(c, '_' | '-' | ' ')
}

/// The ASCII text `t` in lower case without what stands between its words.
fn ascii_words(t: &str) -> impl Iterator<Item = u8> + '_ {
    (t.bytes().filter(|b| !between_words(char::from(*b)))).map(|b| b.to_ascii_lowercase())
}

/// `t` in lower case, and without what stands between its words where `apart`, as
/// [`respelt`] compares it.
fn folded(t: &str, apart: bool) -> impl Iterator<Item = char> + '_ {
    let kept = move |c: &char| !(apart && between_words(*c));
    t.chars().filter(kept).flat_map(char::to_lowercase)
}

/// The most options a string is compared with spelt otherwise ([`respelt`]): each refused
/// value compares them all (the IANA time zones number about 600).
const MAX_RESPELT_OPTIONS: usize = 1024;

/// A lone value where the schema wants an array, as an array of it: a model sends `"a"` for
/// a list of one. A string that opens a bracket is not: it is an array's JSON text that does
/// not read (a model's cut-off list), which no array of it would mean. The other way, a list
/// of one value where the schema wants no array, as that value: a model sends `["Paris"]`
/// for a city, or `["rail"]` for one of a few options (an `enum` or a `const` that holds no
/// array), as if a parameter took several; a list of a list is not unwrapped.
fn reshaped(e: &jsonschema::ValidationError<'_>) -> Option<Value> {
    let wants_array = match e.kind() {
        ValidationErrorKind::Type { kind } => wants_type(kind, JsonType::Array),
        ValidationErrorKind::Enum { options } => options.as_array()?.iter().any(Value::is_array),
        ValidationErrorKind::Constant { expected_value } => expected_value.is_array(),
        _ => return None,
    };
    let typed = matches!(e.kind(), ValidationErrorKind::Type { .. });
    match e.instance().as_ref() {
        Value::Array(items) => match items.as_slice() {
            [item] if !item.is_array() && !wants_array => Some(item.clone()),
            _ => None,
        },
        Value::Null => None,
        Value::String(s) if s.trim_start().starts_with('[') => None,
        lone => (typed && wants_array).then(|| Value::Array(vec![lone.clone()])),
    }
}

/// The errors coercion may mend that an error stands for (of a type, a pattern, a format, an
/// enum, a const, a least length): itself, or, for a value no branch of an `anyOf` or
/// `oneOf` of a few branches takes, those of each branch, at any depth. An optional value
/// is such a choice (Pydantic writes `Optional[int]` as `anyOf: [{type:
/// integer}, {type: null}]`, and an optional object's members are checked inside its
/// branch): its values are coerced, and its whole numbers written as integers, as a plain
/// value's are.
fn fixable_errors<'a, 'b>(
    e: &'a jsonschema::ValidationError<'b>,
) -> Vec<&'a jsonschema::ValidationError<'b>> {
    match e.kind() {
        ValidationErrorKind::Type { .. }
        | ValidationErrorKind::Pattern { .. }
        | ValidationErrorKind::Format { .. } => vec![e],
        // A string spelt otherwise converts to an option ([`respelt`]); a `null` or `""` may be
        // left out ([`left_out`]).
        ValidationErrorKind::Enum { .. }
        | ValidationErrorKind::Constant { .. }
        | ValidationErrorKind::MinLength { .. } => vec![e],
        ValidationErrorKind::AnyOf { context } | ValidationErrorKind::OneOfNotValid { context }
            if context.len() <= MAX_COERCED_BRANCHES =>
        {
            context.iter().flatten().flat_map(fixable_errors).collect()
        }
        _ => Vec::new(),
    }
}

/// The most branches a choice may have for its values to be coerced: an optional value has
/// two, a union of models a few. Each round of repair reads every error of the arguments
/// again, so a choice of many branches, which only a costly schema has, is left as it came
/// (its errors cost as much as they cost without coercion).
const MAX_COERCED_BRANCHES: usize = 16;

/// Puts `v` at `pointer` (`None`: leaves the member there out) and notes the place.
fn replace(args: &mut Value, pointer: &str, v: Option<Value>, changed: &mut Vec<String>) {
    let done = match v {
        Some(v) => args.pointer_mut(pointer).map(|slot| *slot = v),
        None => pointer.rsplit_once('/').and_then(|(parent, name)| {
            let name = lookup::unescape(name);
            let members = args.pointer_mut(parent)?.as_object_mut()?;
            members.remove(&name).map(drop)
        }),
    };
    if done.is_some() {
        note(changed, pointer);
    }
}

/// Notes `pointer` among the places coercion wrote, none under another: a place under one
/// already noted is written with it, and one above places noted takes theirs (a string of
/// JSON text read as an array, then an item of it converted).
pub fn note(changed: &mut Vec<String>, pointer: &str) {
    let within = |inner: &str, outer: &str| {
        inner
            .strip_prefix(outer)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    };
    if changed.iter().any(|c| within(pointer, c)) {
        return;
    }
    changed.retain(|c| !within(c, pointer));
    changed.push(pointer.to_owned());
}

/// Whole numbers written as floats (`2.0`, `1e2`) where the schema wants an integer, written
/// as integers. JSON Schema counts `2.0` as an integer, so the arguments are valid either
/// way; but a server that reads the argument into an integer type refuses it (Rust's
/// `serde`, Go's `encoding/json`), and a model whose provider carries numbers as doubles
/// sends it so. Each such number is probed with a string in its place: where the schema
/// wants an integer and no other number, the validator says so with a type error there. Costs nothing for
/// arguments without such a number; at most [`MAX_WHOLE_NUMBERS`] are probed.
fn whole_numbers(
    schema: Compiled<'_>,
    args: &mut Value,
    max_errors: usize,
    changed: &mut Vec<String>,
) {
    let mut found = Vec::new();
    whole_floats(args, &mut String::new(), &mut found);
    // The probe reads the validator's errors, as repair does: not for a value too large to
    // explain.
    if found.is_empty() || report::explainable(schema, args).is_err() {
        return;
    }
    let originals: Vec<Value> = found
        .iter()
        .map(|(pointer, _)| match args.pointer_mut(pointer) {
            Some(slot) => std::mem::replace(slot, Value::String(String::new())),
            None => Value::Null,
        })
        .collect();
    // Each probe makes one type error where a number is wanted (in each branch of a choice
    // that wants one); the numbers' own keywords (bounds, `multipleOf`) do not apply to it,
    // and few others do. Kept: where some branch wants an integer and none another number.
    let (mut integers, mut numbers) = (BTreeSet::new(), BTreeSet::new());
    for e in (schema.validator)
        .iter_errors(args)
        .take(2 * found.len() + max_errors)
    {
        for t in fixable_errors(&e) {
            if let ValidationErrorKind::Type { kind } = t.kind() {
                let at = t.instance_path().as_str();
                if wants_type(kind, JsonType::Number) {
                    numbers.insert(at.to_owned());
                } else if only_integer(kind) {
                    integers.insert(at.to_owned());
                }
            }
        }
    }
    for ((pointer, whole), original) in found.into_iter().zip(originals) {
        if integers.contains(&pointer) && !numbers.contains(&pointer) {
            replace(args, &pointer, Some(Value::from(whole)), changed);
        } else if let Some(slot) = args.pointer_mut(&pointer) {
            *slot = original;
        }
    }
}

/// Whole numbers written as floats that one call may have written as integers: a bound on
/// the probe's work, far past what a tool's arguments hold.
const MAX_WHOLE_NUMBERS: usize = 1024;

/// The places (JSON pointers) of whole numbers written as floats within `v`, and their
/// values as integers: the first [`MAX_WHOLE_NUMBERS`].
fn whole_floats(v: &Value, at: &mut String, found: &mut Vec<(String, i64)>) {
    let len = at.len();
    match v {
        _ if found.len() == MAX_WHOLE_NUMBERS => {}
        Value::Number(n) => {
            if let Some(whole) = crate::jsonrpc::arguments::whole_float(n) {
                found.push((at.clone(), whole));
            }
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                at.push('/');
                at.push_str(&i.to_string());
                whole_floats(item, at, found);
                at.truncate(len);
            }
        }
        Value::Object(members) => {
            for (key, member) in members {
                at.push('/');
                at.push_str(&key.replace('~', "~0").replace('/', "~1"));
                whole_floats(member, at, found);
                at.truncate(len);
            }
        }
        _ => {}
    }
}

fn wants_type(kind: &TypeKind, t: JsonType) -> bool {
    match kind {
        TypeKind::Single(k) => *k == t,
        TypeKind::Multiple(set) => set.contains(t),
    }
}

/// A type that an integer meets and a fraction does not.
fn only_integer(kind: &TypeKind) -> bool {
    match kind {
        TypeKind::Single(k) => *k == JsonType::Integer,
        TypeKind::Multiple(set) => {
            set.contains(JsonType::Integer) && !set.contains(JsonType::Number)
        }
    }
}

/// Converts a string to a value of one of the wanted types, when it reads as one exactly:
/// as JSON writes it, and as Pydantic's lax mode reads it where no other type could be meant
/// (`"10.0"` for an integer, `"True"`, `"yes"` and `"on"` for a boolean). Digits alone for a boolean
/// are not: a `"1"` may be a count.
fn convert(s: &str, kind: &TypeKind) -> Option<Value> {
    let wants = |t: JsonType| wants_type(kind, t);
    let t = s.trim();
    if wants(JsonType::Integer) || wants(JsonType::Number) {
        if let Ok(i) = t.parse::<i64>() {
            return Some(Value::from(i));
        }
        if let Ok(u) = t.parse::<u64>() {
            return Some(Value::from(u));
        }
    }
    if only_integer(kind)
        && let Some(i) = whole_text(t)
    {
        return Some(Value::from(i));
    }
    if wants(JsonType::Number)
        && let Some(n) = t.parse::<f64>().ok().and_then(serde_json::Number::from_f64)
    {
        return Some(Value::Number(n));
    }
    if wants(JsonType::Null) && names_null(t) {
        return Some(Value::Null);
    }
    if wants(JsonType::Boolean) {
        let is = |word: &str| t.eq_ignore_ascii_case(word);
        if is("true") || is("yes") || is("on") {
            return Some(Value::Bool(true));
        }
        if is("false") || is("no") || is("off") {
            return Some(Value::Bool(false));
        }
    }
    if wants(JsonType::Array) || wants(JsonType::Object) {
        let read = |t: &str| match footprint::affordable(t) {
            true => serde_json::from_str::<Value>(t).ok(),
            false => None,
        };
        // JSON text, or a Python or JavaScript literal's (`"['a', 'b']"`, `"{ a: 1 }"`), as a
        // model writing either sends it; in a Markdown code block, as a model writes it for a
        // reader.
        let t = text::unfenced(t).unwrap_or(t);
        match read(t).or_else(|| read(&literal::as_json(t)?)) {
            Some(v @ Value::Array(_)) if wants(JsonType::Array) => return Some(v),
            Some(v @ Value::Object(_)) if wants(JsonType::Object) => return Some(v),
            _ => {}
        }
    }
    None
}

/// Whether `t` is the word for no value in JSON or Python (`"null"`, `"None"`), as a model
/// writes one into a string: where the schema takes no such string, it means a null.
fn names_null(t: &str) -> bool {
    matches!(t.trim(), "null" | "None")
}

/// An integer written with a fraction of zeros (`"10.0"`), as Pydantic reads it for an `int`.
fn whole_text(t: &str) -> Option<i64> {
    let (whole, zeros) = t.split_once('.')?;
    let zeros_only = !zeros.is_empty() && zeros.bytes().all(|b| b == b'0');
    zeros_only.then(|| whole.parse().ok()).flatten()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{CompileSettings, Schema, compile};
    use crate::config::UnknownDialect;
    use serde_json::json;

    fn schema(v: Value) -> Schema {
        compile(
            &v.to_string(),
            &CompileSettings {
                max_schema_bytes: 1 << 20,
                validate_formats: true,
                unknown_dialect: UnknownDialect::Reject,
            },
        )
    }

    fn run(s: &Schema, mut args: Value, coerce: bool) -> (Verdict, Value) {
        let v = check(
            "t",
            s.compiled(s.validator().unwrap()),
            &mut args,
            coerce,
            32,
        );
        (v, args)
    }

    #[test]
    fn an_object_named_by_its_items_places_is_the_list_of_them() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "tags": {"type": "array", "items": {"type": "integer"}},
                "filter": {"type": "object"}
            }
        }));
        let (v, args) = run(
            &s,
            json!({"tags": {"2": "7", "0": 1, "10": 3}, "filter": {"0": 1}}),
            true,
        );
        assert!(matches!(v, Verdict::Coerced { .. }), "{v:?}");
        assert_eq!(args, json!({"tags": [1, 7, 3], "filter": {"0": 1}}));
        for not in [
            json!({"tags": {}}),
            json!({"tags": {"0": 1, "a": 2}}),
            json!({"tags": {"01": 1}}),
            json!({"tags": {"-1": 1}}),
        ] {
            let (v, args) = run(&s, not.clone(), true);
            assert!(matches!(v, Verdict::Invalid { .. }), "{not}: {v:?}");
            assert_eq!(args, not, "refused as sent");
        }
        let (v, args) = run(&s, json!({"tags": {"0": "x"}}), true);
        assert!(matches!(v, Verdict::Invalid { .. }), "{v:?}");
        assert_eq!(
            args,
            json!({"tags": {"0": "x"}}),
            "its items refused: as sent"
        );
        let (v, _) = run(&s, json!({"tags": {"0": 1}}), false);
        assert!(matches!(v, Verdict::Invalid { .. }), "strict: {v:?}");
    }

    #[test]
    fn strings_become_what_the_schema_wants() {
        let s = schema(json!({
            "type": "object",
            "$defs": {"n": {"type": "integer"}},
            "properties": {
                "a": {"$ref": "#/$defs/n"},
                "flag": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "integer"}},
                "ratio": {"type": "number"}
            }
        }));
        let (v, args) = run(
            &s,
            json!({"a": "10", "flag": "true", "tags": "[\"1\", 2]", "ratio": "0.5"}),
            true,
        );
        assert!(matches!(v, Verdict::Coerced { .. }), "{v:?}");
        assert_eq!(
            args,
            json!({"a": 10, "flag": true, "tags": [1, 2], "ratio": 0.5})
        );
        // As Pydantic's lax mode reads them.
        let (v, args) = run(
            &s,
            json!({"a": "10.00", "flag": "No", "tags": ["-3.0", "7"], "ratio": "2.0"}),
            true,
        );
        assert!(matches!(v, Verdict::Coerced { .. }), "{v:?}");
        assert_eq!(
            args,
            json!({"a": 10, "flag": false, "tags": [-3, 7], "ratio": 2.0})
        );
        // JSON text or a Python literal's in a Markdown code block.
        for tags in ["```json\n[1, \"2\"]\n```", "```python\n[1, '2']\n```"] {
            let (v, args) = run(&s, json!({"tags": tags}), true);
            assert!(matches!(v, Verdict::Coerced { .. }), "{tags}: {v:?}");
            assert_eq!(args, json!({"tags": [1, 2]}), "{tags}");
        }
        for (word, flag) in [("On", true), ("off", false)] {
            let (v, args) = run(&s, json!({"flag": word}), true);
            assert!(matches!(v, Verdict::Coerced { .. }), "{word}: {v:?}");
            assert_eq!(args, json!({"flag": flag}), "{word}");
        }
        for (a, flag) in [
            ("10.5", "true"),
            ("1e3", "true"),
            ("10.", "true"),
            ("1", "1"),
            ("1", "y"),
        ] {
            let (v, _) = run(&s, json!({"a": a, "flag": flag}), true);
            assert!(matches!(v, Verdict::Invalid { .. }), "{a}, {flag}: {v:?}");
        }
    }

    #[test]
    fn an_integer_where_a_string_is_wanted_is_its_digits() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "id": {"type": "string"},
                "codes": {"type": "array", "items": {"type": "string"}},
                "either": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
                "ratio": {"type": "string"}
            }
        }));
        let (v, args) = run(
            &s,
            json!({"id": 12345, "codes": [7, "x"], "either": 3}),
            true,
        );
        assert!(matches!(v, Verdict::Coerced { .. }), "{v:?}");
        assert_eq!(
            args,
            json!({"id": "12345", "codes": ["7", "x"], "either": 3})
        );
        // A fraction, an exponent or a float is no string of digits.
        for ratio in [json!(0.5), json!(2.0), json!(1e3)] {
            let (v, _) = run(&s, json!({"ratio": ratio}), true);
            assert!(matches!(v, Verdict::Invalid { .. }), "{ratio}: {v:?}");
        }
        let (v, _) = run(&s, json!({"id": 12345}), false);
        assert!(matches!(v, Verdict::Invalid { .. }), "strict mode: {v:?}");
    }

    #[test]
    fn a_date_time_a_pattern_takes_only_in_utc_is_that_instant_in_utc() {
        let utc_only = json!({"type": "string", "format": "date-time",
            "pattern": "^\\d{4}-\\d{2}-\\d{2}T\\d{2}:\\d{2}:\\d{2}(?:\\.\\d+)?Z$"});
        let s = schema(json!({
            "type": "object",
            "properties": {
                "when": utc_only,
                "until": {"anyOf": [utc_only, {"type": "null"}]},
                "code": {"type": "string", "pattern": "^[A-Z]{3}$"}
            }
        }));
        let given =
            json!({"when": "2026-11-30T10:00:00+02:00", "until": "2026-12-31T23:30:00.5-01:00"});
        let (v, args) = run(&s, given.clone(), true);
        assert!(matches!(v, Verdict::Coerced { .. }), "{v:?}");
        assert_eq!(
            args,
            json!({"when": "2026-11-30T08:00:00Z", "until": "2027-01-01T00:30:00.5Z"})
        );
        let messages = |v: Verdict| match v {
            Verdict::Invalid { report: r, .. } => {
                r.violations.into_iter().map(|v| v.message).collect()
            }
            v => panic!("{v:?}"),
        };
        let (v, args) = run(&s, given.clone(), false);
        assert_eq!(args, given, "strict mode");
        let said: Vec<String> = messages(v);
        assert_eq!(
            said,
            [
                "must be a date-time in UTC, as this tool takes it (such as \"2027-01-01T00:30:00.5Z\", the same instant), got \"2026-12-31T23:30:00.5-01:00\"",
                "must be a date-time in UTC, as this tool takes it (such as \"2026-11-30T08:00:00Z\", the same instant), got \"2026-11-30T10:00:00+02:00\"",
            ]
        );
        // A local time names no known instant; a pattern that is not of a date-time is left
        // to say what it wants.
        let local = json!({"when": "2026-11-30T10:00:00", "code": "2026-11-30T10:00:00+02:00"});
        let (v, args) = run(&s, local.clone(), true);
        assert_eq!(args, local);
        let said: Vec<String> = messages(v);
        assert_eq!(
            said,
            [
                "must match the pattern ^[A-Z]{3}$, got \"2026-11-30T10:00:00+02:00\"",
                "must be a date-time with its offset, as this tool takes it (such as \"2026-11-30T10:00:00Z\"), got \"2026-11-30T10:00:00\"",
            ]
        );
    }

    #[test]
    fn a_time_nearly_as_rfc_3339_writes_it_goes_so_and_a_number_is_refused_as_sent() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "when": {"type": "string", "format": "date-time"},
                "at": {"anyOf": [{"type": "string", "format": "time"}, {"type": "null"}]},
                "span": {"type": "string", "format": "duration"}
            }
        }));
        let (v, args) = run(
            &s,
            json!({"when": "2026-11-30 10:00+0100", "at": "09:30"}),
            true,
        );
        assert!(matches!(v, Verdict::Coerced { .. }), "{v:?}");
        assert_eq!(
            args,
            json!({"when": "2026-11-30T10:00:00+01:00", "at": "09:30:00"})
        );
        let said = |v: Verdict| match v {
            Verdict::Invalid { report: r, .. } => (r.violations.into_iter())
                .map(|v| format!("{}: {}", v.pointer, v.message))
                .collect::<Vec<_>>(),
            v => panic!("{v:?}"),
        };
        let (v, _) = run(&s, json!({"when": "2026-11-30T10:00"}), false);
        assert_eq!(
            said(v),
            [
                "/when: must be a valid date-time, got \"2026-11-30T10:00\"; did you mean \"2026-11-30T10:00:00\"?"
            ]
        );
        // Digits a format does not take: refused as the number sent.
        let (v, args) = run(&s, json!({"span": 3600, "when": 1764496800}), true);
        assert_eq!(args, json!({"span": 3600, "when": 1764496800}));
        assert_eq!(
            said(v),
            [
                "/span: expected a string, got integer 3600",
                "/when: expected a string, got integer 1764496800"
            ]
        );
    }

    #[test]
    fn a_repair_cut_short_speaks_of_the_arguments_as_sent() {
        let s = schema(json!({"type": "object",
            "properties": {"xs": {"type": "array", "items": {"type": "integer"}}}}));
        // 32 values a round, four rounds: 128 are converted.
        let (v, args) = run(&s, json!({"xs": vec!["7"; 128]}), true);
        assert!(matches!(v, Verdict::Coerced { .. }), "{v:?}");
        assert_eq!(args, json!({"xs": vec![7; 128]}));
        let sent = json!({"xs": vec!["7"; 129]});
        let (v, args) = run(&s, sent.clone(), true);
        assert_eq!(args, sent);
        let Verdict::Invalid { report: r, .. } = v else {
            panic!("{v:?}")
        };
        assert_eq!(
            r.violations[0].message,
            "expected an integer, got string \"7\""
        );
        assert_eq!(r.violations.len(), 32);
    }

    #[test]
    fn a_refused_call_says_what_it_leaves_converted() {
        let s = schema(json!({"type": "object", "required": ["a", "b", "c"],
            "properties": {"a": {"type": "integer"}, "b": {"type": "string"}}}));
        let (v, args) = run(&s, json!({"a": "10", "b": "x"}), true);
        let Verdict::Invalid { changed, .. } = v else {
            panic!("{v:?}")
        };
        assert_eq!(
            (changed, args),
            (vec!["/a".to_owned()], json!({"a": 10, "b": "x"}))
        );
        // A refusal that speaks of the arguments as sent leaves them so, and says none.
        let (v, args) = run(&s, json!({"a": 1, "b": 12345}), true);
        let Verdict::Invalid { changed, .. } = v else {
            panic!("{v:?}")
        };
        assert_eq!((changed, args), (vec![], json!({"a": 1, "b": 12345})));
    }

    #[test]
    fn a_lone_value_where_an_array_is_wanted_is_an_array_of_it() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "names": {"type": "array", "items": {"type": "string"}},
                "ids": {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]},
                "rows": {"type": "array", "items": {"type": "object"}},
                "either": {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "integer"}]}
            }
        }));
        let (v, args) = run(
            &s,
            json!({"names": "a", "ids": "7", "rows": {"k": 1}, "either": "5"}),
            true,
        );
        assert!(matches!(v, Verdict::Coerced { .. }), "{v:?}");
        assert_eq!(
            args,
            json!({"names": ["a"], "ids": [7], "rows": [{"k": 1}], "either": 5}),
            "a branch that reads the value as it is wins over an array of it"
        );
        // An array's text cut off is not a list of one; a refusal speaks of what was sent.
        for (sent, why) in [
            (
                json!({"names": "[\"a\", \"b"}),
                "names: expected an array, got string",
            ),
            (
                json!({"ids": "x", "names": 1}),
                "names: expected an array, got integer 1",
            ),
        ] {
            let (v, args) = run(&s, sent.clone(), true);
            let Verdict::Invalid { report, .. } = v else {
                panic!("{sent}: {v:?}")
            };
            assert_eq!(args, sent);
            assert!(report.text().contains(why), "{}", report.text());
        }
        let (v, _) = run(&s, json!({"names": "a"}), false);
        assert!(matches!(v, Verdict::Invalid { .. }), "strict mode: {v:?}");
    }

    #[test]
    fn values_listed_with_commas_in_a_lone_string_are_the_list_of_them() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "days": {"type": "array", "items": {"enum": ["mon", "tue", "wed"]}},
                "ids": {"type": "array", "items": {"type": "integer"}},
                "names": {"type": "array", "items": {"type": "string"}},
                "status": {"type": "array", "items": {"type": "string", "enum": ["in_progress", "done"]}},
                "levels": {"type": "array", "items": {"enum": [1, 2, 3]}},
                "to": {"type": "array", "items": {"type": "string", "format": "email"}},
                "codes": {"type": "array", "items": {"type": "string", "pattern": "^[A-Z]{3}$"}}
            }
        }));
        let sent = json!({"days": "Mon, tue,", "ids": "1, 2,3", "names": "Paris, France",
            "status": "In Progress, done", "levels": "3,1", "to": "a@x.org, b@y.org",
            "codes": "LHR,JFK"});
        let (v, args) = run(&s, sent, true);
        assert!(matches!(v, Verdict::Coerced { .. }), "{v:?}");
        let lists = json!({"days": ["mon", "tue"], "ids": [1, 2, 3], "names": ["Paris, France"],
            "status": ["in_progress", "done"], "levels": [3, 1], "to": ["a@x.org", "b@y.org"],
            "codes": ["LHR", "JFK"]});
        assert_eq!(args, lists, "a string the items take is one item");
        // A piece that is none of what the items want, or no comma between them: as sent.
        for sent in [
            json!({"days": "mon, fri"}),
            json!({"ids": "1, two"}),
            json!({"days": "mon; tue"}),
            json!({"days": ",mon,"}),
            json!({"to": "a@x.org, nobody"}),
            json!({"codes": "LHR, jfk"}),
            json!({"ids": vec!["1"; MAX_LISTED + 1].join(",")}),
            json!({"ids": vec!["1"; MAX_LISTED + 1].join(",")}),
        ] {
            let (v, args) = run(&s, sent.clone(), true);
            assert!(matches!(v, Verdict::Invalid { .. }), "{sent}: {v:?}");
            assert_eq!(args, sent);
        }
    }

    #[test]
    fn a_list_of_one_where_no_array_is_wanted_is_its_item() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "n": {"type": "integer"},
                "filter": {"type": "object", "properties": {"k": {"type": "integer"}}},
                "either": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "integer"}]},
                "mode": {"enum": ["air", "rail"]},
                "kind": {"const": "x"},
                "pair": {"enum": [["a"], "b"]}
            }
        }));
        let sent = json!({"city": ["Paris"], "n": ["7"], "filter": [{"k": "1"}], "either": [5],
            "mode": ["Rail"], "kind": ["x"]});
        let (v, args) = run(&s, sent, true);
        let Verdict::Coerced { changed } = v else {
            panic!("{v:?}")
        };
        let places = ["/city", "/either/0", "/filter", "/kind", "/mode", "/n"];
        assert_eq!(changed, places);
        let items = json!({"city": "Paris", "n": 7, "filter": {"k": 1}, "either": ["5"],
            "mode": "rail", "kind": "x"});
        assert_eq!(
            args, items,
            "a list a branch mends item by item stays a list"
        );
        // Several items, a list of a list, or an empty list mean no one value; a refusal
        // speaks of what was sent.
        for sent in [
            json!({"city": ["Paris", "Rome"]}),
            json!({"city": [["Paris"]]}),
            json!({"city": []}),
            json!({"city": ["Paris"], "n": "many"}),
            json!({"pair": ["b"]}),
        ] {
            let (v, args) = run(&s, sent.clone(), true);
            assert!(matches!(v, Verdict::Invalid { .. }), "{sent}: {v:?}");
            assert_eq!(args, sent);
        }
        let (v, _) = run(&s, json!({"city": ["Paris"]}), false);
        assert!(matches!(v, Verdict::Invalid { .. }), "strict mode: {v:?}");
    }

    #[test]
    fn text_read_as_a_value_stays_within_the_levels_a_doubling_schema_checks() {
        let branches: Vec<Value> = (0..2)
            .map(|i| json!({"properties": {"x": {"$ref": "#"}}, "required": [format!("k{i}")]}))
            .collect();
        let s = schema(json!({"type": "object", "anyOf": branches}));
        // Forty levels as text: read as a value, each would double the checks.
        let deep = (0..40).fold(json!({}), |v, _| json!({"x": v}));
        let sent = json!({"x": deep["x"].to_string(), "k0": 1});
        let (v, args) = run(&s, sent.clone(), true);
        assert!(matches!(v, Verdict::Invalid { .. }), "{v:?}");
        assert_eq!(args, sent, "refused as it was sent");
        // Within them, text is read as a value as for any schema.
        let shallow = json!({"x": "{\"k1\": 2}", "k0": 1});
        let (v, args) = run(&s, shallow, true);
        assert!(matches!(v, Verdict::Coerced { .. }), "{v:?}");
        assert_eq!(args, json!({"x": {"k1": 2}, "k0": 1}));
    }

    #[test]
    fn the_places_coercion_wrote_are_none_under_another() {
        let mut changed = Vec::new();
        for p in ["/a/0", "/a/1", "/ab", "/a", "/a/2", "/b/c", "/b"] {
            note(&mut changed, p);
        }
        assert_eq!(changed, ["/ab", "/a", "/b"]);
    }

    #[test]
    fn a_null_for_an_argument_that_may_be_left_out_is_left_out() {
        let s = schema(json!({
            "type": "object",
            "$defs": {"who": {"type": "object", "properties": {"n": {"type": "integer"}, "k": {"type": "string"}}, "required": ["k"]}},
            "properties": {
                "a": {"type": "integer"},
                "b": {"type": "integer", "minimum": 1},
                "who": {"$ref": "#/$defs/who"},
                "list": {"type": "array", "items": {"type": "integer"}},
                "any": {"type": ["string", "null"]},
                "sort": {"enum": ["asc", "desc"]},
                "named": {"type": "string", "minLength": 1}
            },
            "required": ["a"]
        }));
        let sent =
            json!({"a": 1, "b": null, "who": {"n": null, "k": "x"}, "any": null, "sort": null});
        let (v, args) = run(&s, sent, true);
        let Verdict::Coerced { mut changed } = v else {
            panic!("{v:?}")
        };
        changed.sort();
        assert_eq!(changed, ["/b", "/sort", "/who/n"]);
        assert_eq!(args, json!({"a": 1, "who": {"k": "x"}, "any": null}));
        // An empty string for one, as a model fills an argument it has no value for: the
        // same, where the schema does not take it (`any` does).
        let sent = json!({"a": 1, "b": "", "who": {"n": "", "k": ""}, "list": "", "any": "",
            "sort": "", "named": ""});
        let (v, args) = run(&s, sent, true);
        let Verdict::Coerced { mut changed } = v else {
            panic!("{v:?}")
        };
        changed.sort();
        assert_eq!(changed, ["/b", "/list", "/named", "/sort", "/who/n"]);
        assert_eq!(args, json!({"a": 1, "who": {"k": ""}, "any": ""}));
        // A null's word in a string (JSON's or Python's): a null where the schema takes one,
        // left out where it takes neither but may do without; a string where it takes one.
        let sent = json!({"a": 1, "b": "null", "who": {"n": "None", "k": "null"}, "list": "None",
            "any": "None", "sort": "null"});
        let (v, args) = run(&s, sent, true);
        let Verdict::Coerced { mut changed } = v else {
            panic!("{v:?}")
        };
        changed.sort();
        assert_eq!(changed, ["/b", "/list", "/sort", "/who/n"]);
        assert_eq!(args, json!({"a": 1, "who": {"k": "null"}, "any": "None"}));
        let nullable = schema(json!({"type": "object", "properties": {
            "n": {"anyOf": [{"type": "integer"}, {"type": "null"}]}, "m": {"type": ["array", "null"]}},
            "required": ["n", "m"]}));
        let (v, args) = run(&nullable, json!({"n": "None", "m": " null "}), true);
        assert!(matches!(v, Verdict::Coerced { .. }), "{v:?}");
        assert_eq!(args, json!({"n": null, "m": null}));
        // What must be there, an item, or a null under strict mode: a violation.
        for (sent, coerce) in [
            (json!({"a": null}), true),
            (json!({"a": ""}), true),
            (json!({"a": 1, "who": {"k": null}}), true),
            (json!({"a": 1, "list": [""]}), true),
            (json!({"a": 1, "b": ""}), false),
            (json!({"a": 1, "sort": "up"}), true),
            (json!({"a": 1, "named": ""}), false),
            (json!({"a": 1, "list": [null]}), true),
            (json!({"a": 1, "list": ["null"]}), true),
            (json!({"a": "null"}), true),
            (json!({"a": 1, "b": "None"}), false),
            (json!({"a": 1, "b": null}), false),
        ] {
            let verdict = run(&s, sent.clone(), coerce).0;
            assert!(matches!(verdict, Verdict::Invalid { .. }), "{sent}");
        }
    }

    #[test]
    fn an_option_written_as_text_or_as_digits_is_the_option() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "quality": {"enum": ["480", "720", "1080"]},
                "level": {"enum": [1, 2, 3]},
                "on": {"const": true},
                "none": {"enum": [null, "auto"]},
                "list": {"enum": [[1], "x"]}
            }
        }));
        let sent = json!({"quality": 720, "level": " 2", "on": "true", "none": "null"});
        let (v, args) = run(&s, sent, true);
        assert!(matches!(v, Verdict::Coerced { .. }), "{v:?}");
        let options = json!({"quality": "720", "level": 2, "on": true, "none": null});
        assert_eq!(args, options);
        // No such option, a fraction, or JSON text of a list: as sent.
        for sent in [
            json!({"quality": 360}),
            json!({"quality": 720.5}),
            json!({"level": "2.0"}),
            json!({"list": "[1]"}),
        ] {
            let (v, args) = run(&s, sent.clone(), true);
            assert!(matches!(v, Verdict::Invalid { .. }), "{sent}: {v:?}");
            assert_eq!(args, sent);
        }
        let (v, _) = run(&s, json!({"quality": 720}), false);
        assert!(matches!(v, Verdict::Invalid { .. }), "strict mode: {v:?}");
    }

    #[test]
    fn an_option_in_other_case_is_the_option() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "cabin": {"enum": ["economy", "business", 1]},
                "city": {"enum": ["Paris", "PARIS"]},
                "kind": {"oneOf": [
                    {"type": "object", "properties": {"kind": {"const": "box"}, "weight": {"type": "number"}}, "required": ["kind", "weight"]},
                    {"type": "object", "properties": {"kind": {"const": "letter"}, "pages": {"type": "integer"}}, "required": ["kind", "pages"]}
                ]},
                "tz": {"enum": ["Europe/Zürich"]},
                "status": {"enum": ["in_progress", "on-hold", "done"]},
                "twin": {"enum": ["a-b", "ab"]},
                "long": {"enum": ["waiting_for_the_customer_to_answer"]},
                "drink": {"enum": ["café_au_lait"]}
            }
        }));
        let sent = json!({"cabin": "Economy", "kind": {"kind": "LETTER", "pages": "3"}, "tz": "EUROPE/ZÜRICH"});
        let (v, args) = run(&s, sent, true);
        assert!(matches!(v, Verdict::Coerced { .. }), "{v:?}");
        assert_eq!(
            args,
            json!({"cabin": "economy", "kind": {"kind": "letter", "pages": 3}, "tz": "Europe/Zürich"})
        );
        // An option written as words, or with the other separator: the option.
        for (sent, option) in [
            ("In Progress", "in_progress"),
            ("in-progress", "in_progress"),
            ("ON_HOLD", "on-hold"),
            ("on hold", "on-hold"),
        ] {
            let (v, args) = run(&s, json!({"status": sent}), true);
            assert!(matches!(v, Verdict::Coerced { .. }), "{sent}: {v:?}");
            assert_eq!(args, json!({"status": option}), "{sent}");
        }
        let (v, args) = run(&s, json!({"drink": "Café Au Lait"}), true);
        assert!(matches!(v, Verdict::Coerced { .. }), "{v:?}");
        assert_eq!(args, json!({"drink": "café_au_lait"}));
        // Two options spelt alike, none, or strict mode: refused as sent.
        for (sent, coerce) in [
            (json!({"city": "paris"}), true),
            (json!({"twin": "A B"}), true),
            (json!({"cabin": "econ"}), true),
            (json!({"status": "inprogres"}), true),
            // Past 32 bytes, in other case only.
            (json!({"long": "waiting for the customer to answer"}), true),
            (json!({"cabin": "Economy"}), false),
        ] {
            let (verdict, args) = run(&s, sent.clone(), coerce);
            assert!(matches!(verdict, Verdict::Invalid { .. }), "{sent}");
            assert_eq!(args, sent);
        }
    }

    #[test]
    fn an_optional_value_is_coerced_as_a_plain_one_is() {
        let optional = |t: &str| json!({"anyOf": [{"type": t}, {"type": "null"}]});
        let s = schema(json!({
            "type": "object",
            "$defs": {"Zip": {"type": "integer", "minimum": 10000}},
            "properties": {
                "age": optional("integer"),
                "tags": optional("array"),
                "zip": {"oneOf": [{"$ref": "#/$defs/Zip"}, {"type": "null"}]},
                "ratio": {"anyOf": [{"type": "integer"}, {"type": "number"}]},
                "name": optional("string")
            }
        }));
        let sent =
            json!({"age": "36", "tags": "[\"a\"]", "zip": "12345", "ratio": 2.0, "name": "7"});
        let (v, args) = run(&s, sent, true);
        assert!(matches!(v, Verdict::Coerced { .. }), "{v:?}");
        let coerced = json!({"age": 36, "tags": ["a"], "zip": 12345, "ratio": 2.0, "name": "7"});
        assert_eq!(args, coerced);
        // A whole number written as a float, where the optional value is an integer.
        let (_, args) = run(&s, json!({"age": 36.0}), true);
        assert_eq!(args, json!({"age": 36}));
        // What reads as none of the wanted types stays a violation, as does one under a
        // bound, and strict mode converts nothing.
        let refused = [
            ("age", "x", true),
            ("zip", "123", true),
            ("age", "36", false),
        ];
        for (name, sent, coerce) in refused {
            let verdict = run(&s, json!({ name: sent }), coerce).0;
            assert!(matches!(verdict, Verdict::Invalid { .. }), "{name}: {sent}");
        }
        // Within an optional object or array, as within a plain one.
        let s = schema(json!({
            "type": "object",
            "$defs": {"P": {"type": "object", "properties": {"n": {"type": "integer"}}}},
            "properties": {
                "who": {"anyOf": [{"$ref": "#/$defs/P"}, {"type": "null"}]},
                "ids": {"anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}]}
            }
        }));
        let sent = json!({"who": "{\"n\": \"3\"}", "ids": ["1", 2.0]});
        let (v, args) = run(&s, sent, true);
        assert!(matches!(v, Verdict::Coerced { .. }), "{v:?}");
        assert_eq!(args, json!({"who": {"n": 3}, "ids": [1, 2]}));
    }

    #[test]
    fn strict_mode_and_unconvertible_values_are_violations() {
        let s = schema(json!({"type": "object", "properties": {"a": {"type": "integer"}}}));
        assert!(matches!(
            run(&s, json!({"a": "10"}), false).0,
            Verdict::Invalid { .. }
        ));
        assert!(matches!(
            run(&s, json!({"a": "abc"}), true).0,
            Verdict::Invalid { .. }
        ));
        assert!(matches!(
            run(&s, json!({"a": "1.5"}), true).0,
            Verdict::Invalid { .. }
        ));
        assert!(matches!(run(&s, json!({"a": 3}), true).0, Verdict::Valid));
    }

    #[test]
    fn whole_numbers_become_integers_where_the_schema_wants_one() {
        let s = schema(json!({
            "type": "object",
            "$defs": {"n": {"type": ["integer", "null"]}},
            "properties": {
                "a": {"type": "integer"},
                "b": {"type": "number"},
                "c": {"type": "array", "items": {"$ref": "#/$defs/n"}},
                "d~/": {"type": "integer", "minimum": 1},
                "e": {}
            }
        }));
        let args: Value = serde_json::from_str(
            r#"{"a": 2.0, "b": 2.0, "c": [1e2, -3.0, null], "d~/": 4.0, "e": 5.0}"#,
        )
        .unwrap();
        let (v, args) = run(&s, args, true);
        let Verdict::Coerced { mut changed } = v else {
            panic!("{v:?}")
        };
        changed.sort();
        assert_eq!(changed, ["/a", "/c/0", "/c/1", "/d~0~1"]);
        assert_eq!(
            args.to_string(),
            r#"{"a":2,"b":2.0,"c":[100,-3,null],"d~/":4,"e":5.0}"#
        );
        // Strict mode forwards them as they came; a fraction or a float past an integer's
        // range stays what it is.
        let args: Value = serde_json::from_str(r#"{"a": 2.0}"#).unwrap();
        assert!(matches!(run(&s, args, false).0, Verdict::Valid));
        let args: Value = serde_json::from_str(r#"{"a": 1e19, "b": 2.5}"#).unwrap();
        assert!(matches!(run(&s, args, true).0, Verdict::Valid));
        // More than `max_errors` of them, each with a second error on the probe's fraction.
        let s2 = schema(
            json!({"type": "object", "properties": {"c": {"type": "array",
            "items": {"type": "integer", "minimum": 1}}}}),
        );
        let floats: Vec<String> = (1..=100).map(|i| format!("{i}.0")).collect();
        let args: Value =
            serde_json::from_str(&format!(r#"{{"c": [{}]}}"#, floats.join(","))).unwrap();
        let (v, args) = run(&s2, args, true);
        assert!(matches!(v, Verdict::Coerced { .. }), "{v:?}");
        assert_eq!(args["c"], json!((1..=100).collect::<Vec<i64>>()));
        // With a string coerced in the same call.
        let args: Value = serde_json::from_str(r#"{"a": "7", "c": [2.0]}"#).unwrap();
        let (v, args) = run(&s, args, true);
        assert!(matches!(v, Verdict::Coerced { .. }), "{v:?}");
        assert_eq!(args.to_string(), r#"{"a":7,"c":[2]}"#);
    }
}
