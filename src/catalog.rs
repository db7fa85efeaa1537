//! The schema cache: what each scope's tools accept.
//!
//! A scope is one upstream plus one session (legacy era) or one authorization context
//! (modern era), because servers may list different tools to different sessions.
//! Schemas are compiled when `tools/list` passes by, never on the call path, and identical
//! schemas (by content) are compiled once and shared: ten thousand sessions of one server
//! hold one compiled validator per distinct schema.
//!
//! Reads clone an `Arc` under a read lock held for a hash lookup; writers build the new
//! scope catalog outside the lock and swap it in.
//!
//! Security note: compilation is offline (no `$ref` may fetch a URL or read a file), uses the
//! linear-time regex engine, and refuses schemas over a size limit.

use crate::config::{Limits, UnknownDialect, Validation};
use crate::jsonrpc::footprint::footprint;
use crate::locks::{MutexExt, RwLockExt};
use crate::validate::{
    Compiled, Doubling, Flat, InPlace, MAX_UNFOLDED, PLACE_BYTES_PER_BYTE, Shape, duration,
    local_time, place_bytes, plain_pattern, with_integer_bounds, without_unrunnable,
};
use jsonschema::json::Json;
use jsonschema::{Draft, PatternOptions, Validator};
use serde::Deserialize;
use serde_json::Value;
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::collections::HashMap;
use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};
use std::time::{Duration, Instant};

/// The catalog's maps are read on every call, by a scope key that is already a keyed hash
/// and a tool's name: a seeded fast hash, where SipHash cost about 200 instructions a lookup.
type Fast = foldhash::fast::RandomState;

/// After a full listing, a missing tool is unknown; toolgate lists again on a miss only
/// when the last full listing is older than this, which bounds refresh storms.
const RELIST_AFTER: Duration = Duration::from_secs(1);

/// A catalog's scope: an upstream (its position among the gateway's targets), and a keyed
/// hash of the session id or credentials. No token is held as it came, and the key is plain
/// data: copying it on every request writes no reference count that other threads share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ScopeKey {
    pub upstream: u32,
    pub context: u64,
}

/// One tool input schema, read once per distinct content and compiled on its first use: a
/// listing is learned for every scope and may hold thousands of tools whose patterns take
/// long to compile (a Unicode `\w{1,64}` is one of the larger), while a call needs only its
/// own tool's. Learning a listing reads each schema, checks it as clients will, and records
/// its shape; the validators wait for a call.
pub struct Schema {
    raw: Box<str>,
    pub value: Value,
    /// What `value` holds on the heap (`jsonrpc::footprint`).
    footprint: usize,
    /// Its cost, counted in the catalog's bytes while it is kept.
    charge: Option<Charge>,
    /// Why no validator can be made, when that is known without compiling (too large,
    /// unreadable, an unknown dialect).
    refused: Option<Uncompiled>,
    draft: Draft,
    validate_formats: bool,
    /// Why no client can use this schema, and where: it is not a JSON Schema of the dialect
    /// it declares, or its root is not an object schema as MCP requires. A schema that is
    /// valid but that toolgate cannot compile (an unknown format's dialect) is not invalid.
    pub invalid: Option<String>,
    /// Whether a listing has had it said invalid in the log: once per distinct schema, as a
    /// compile failure is, not again for every session that lists it.
    invalid_said: AtomicBool,
    /// What the schema declares at each place, for undeclared arguments.
    pub shape: Option<Shape>,
    built: OnceLock<Built>,
    /// Made on the first call checked in place: output schemas and operators' extra schemas
    /// never are.
    in_place: OnceLock<Option<InPlaceCheck>>,
}

/// A schema's validator, made on first use.
struct Built {
    validator: Result<Validator, Uncompiled>,
    /// Its `anyOf` and `oneOf` branches, counted as often as a value may meet them
    /// (`validate::unfolded`).
    alternatives: usize,
    /// How its checks multiply with each level of a value, for a schema whose do.
    doubling: Option<Doubling>,
    /// A `$ref` in it leads back to a schema it is within (`validate::Unfolded`).
    recursive: bool,
    /// The schema as it is checked, where that is not as it was listed: with the bounds of
    /// its integer formats (`validate::with_integer_bounds`), without the `pattern`s
    /// toolgate's engine cannot run (`validate::without_unrunnable`).
    checked: Option<Value>,
    /// Where those patterns were.
    unchecked_patterns: Vec<String>,
}

/// The check of a call's arguments read in place (`validate::InPlace`), the common path.
pub struct InPlaceCheck {
    pub validator: Validator<InPlace>,
    /// The validator is the schema's closed form: `additionalProperties: false` at every
    /// place that declares properties, where that says exactly what the undeclared-argument
    /// walk would. Then one `is_valid` answers both questions for a valid call with every
    /// argument declared, and the walk runs only for calls it refuses.
    pub closed: bool,
    /// The check of the arguments' text, for a schema of the flat shape most tools have:
    /// tried first, it decides the common valid call without reading it into parts.
    flat: Option<Flat>,
}

/// Why a schema has no validator (too large, unreadable, of an unknown dialect, or one
/// toolgate cannot compile): a sentence for the operator and the client.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct Uncompiled(pub String);

impl InPlaceCheck {
    /// The flat check of the arguments' `text`: `Some(true)` when the schema accepts them,
    /// `Some(false)` when it refuses them, `None` when the schema is not flat or the check
    /// cannot tell (the validator then decides).
    pub fn judge_flat(&self, text: &str) -> Option<bool> {
        self.flat.as_ref()?.judge(text)
    }
}

impl Schema {
    /// Whether this is the first time it is said invalid in the log (see `invalid_said`).
    pub(crate) fn first_said_invalid(&self) -> bool {
        !self.invalid_said.swap(true, Ordering::Relaxed)
    }

    /// The schema as the check reads it, with its `validator`.
    pub fn compiled<'a>(&'a self, validator: &'a Validator) -> Compiled<'a> {
        Compiled {
            value: &self.value,
            validator,
            alternatives: self.built().alternatives,
            doubling: self.built().doubling,
            recursive: self.built().recursive,
        }
    }

    /// How its checks multiply with each level of a value, for a schema that compiles and
    /// whose do.
    pub fn doubling(&self) -> Option<Doubling> {
        self.validator().ok()?;
        self.built().doubling
    }

    /// Whether checking `value` against it is bounded: a schema whose checks multiply with
    /// each level of a value (`validate::Doubling`) checks values only so deep, and one
    /// deeper is as if the schema did not compile.
    pub fn reaches(&self, value: &Value) -> Result<(), Uncompiled> {
        let Some(doubling) = self.built().doubling else {
            return Ok(());
        };
        doubling.reaches(value).map_err(|depth| {
            Uncompiled(format!(
                "for a value {depth} levels deep: its references multiply the checks at each level of a value, and values up to {} levels deep are checked",
                doubling.levels
            ))
        })
    }

    /// Its validator, compiled the first time it is asked for.
    pub fn validator(&self) -> Result<&Validator, &Uncompiled> {
        match &self.refused {
            Some(why) => Err(why),
            None => self.built().validator.as_ref(),
        }
    }

    /// Its check of arguments read in place, where it compiles: of its closed form when it
    /// has a `shape` that judges undeclared names and closes.
    pub fn in_place(&self) -> Option<&InPlaceCheck> {
        self.validator().ok()?;
        if self.built().doubling.is_some() {
            // Each call's depth is looked at first (`reaches`), on the arguments read whole.
            return None;
        }
        let check = self.in_place.get_or_init(|| {
            let checked = self.checked();
            let mut c = checked.clone();
            let closed = self.shape.as_ref().is_some_and(Shape::judges) && close(&mut c, true);
            let schema = if closed { &c } else { checked };
            let plain = plain_pattern::plain_everywhere(schema);
            let validator = compile_for(schema, self.draft, self.validate_formats, plain).ok()?;
            let flat = Flat::of(checked);
            Some(InPlaceCheck {
                validator,
                closed,
                flat,
            })
        });
        check.as_ref()
    }

    /// The schema as it is checked (`Built::checked`).
    fn checked(&self) -> &Value {
        self.built().checked.as_ref().unwrap_or(&self.value)
    }

    /// Where its `pattern`s are that toolgate's engine cannot run, and so does not check.
    pub fn unchecked_patterns(&self) -> &[String] {
        &self.built().unchecked_patterns
    }

    /// Whether it was found not to compile, as far as it has been compiled.
    fn failed(&self) -> bool {
        self.refused.is_some() || self.built.get().is_some_and(|b| b.validator.is_err())
    }

    fn built(&self) -> &Built {
        self.built.get_or_init(|| {
            let built = build(&self.value, self.draft, self.validate_formats);
            if let Err(why) = &built.validator {
                // Once per distinct schema: the operator learns that a tool goes unchecked.
                tracing::warn!(error = %why, "a tool's schema does not compile: calls to a tool whose input schema it is follow validation.on_compile_error, and a result it is the output schema of goes unchecked");
            }
            if let at @ [_, ..] = built.unchecked_patterns.as_slice() {
                tracing::warn!(patterns = ?at, "a tool's schema has patterns toolgate's regular-expression engine cannot run (a lookaround, a backreference): they go unchecked, the server checks them, and the rest of the schema is checked");
            }
            built
        })
    }
}

/// Compiles a schema of `draft`, when checking a call against it is bounded.
fn build(value: &Value, draft: Draft, validate_formats: bool) -> Built {
    let unfolded = crate::validate::unfolded(value);
    let bounded = validate_formats
        .then(|| with_integer_bounds(value))
        .flatten();
    let mut unrunnable = None;
    let value = bounded.as_ref().unwrap_or(value);
    let validator = if unfolded.schemas > MAX_UNFOLDED {
        Err(Uncompiled(format!(
            "its references and choices unfold into more than {MAX_UNFOLDED} subschemas, too many to check a call against"
        )))
    } else {
        compile_for(value, draft, validate_formats, false).or_else(|e| {
            let runs = |p: &str| {
                let alone = serde_json::json!({ "pattern": p });
                let alone: Result<Validator, _> =
                    compile_for(&alone, draft, validate_formats, false);
                alone.is_ok()
            };
            let (without, at) = without_unrunnable(value, runs)
                .ok_or_else(|| Uncompiled(e.masked().to_string()))?;
            let validator = compile_for(&without, draft, validate_formats, false)
                .map_err(|_| Uncompiled(e.masked().to_string()))?;
            unrunnable = Some((without, at));
            Ok(validator)
        })
    };
    let (checked, unchecked_patterns) = match unrunnable {
        Some((without, at)) => (Some(without), at),
        None => (bounded, Vec::new()),
    };
    Built {
        validator,
        alternatives: unfolded.alternatives,
        doubling: unfolded.doubling,
        recursive: unfolded.recursive,
        checked,
        unchecked_patterns,
    }
}

/// With `plain_patterns`, every `pattern` is matched without the regex engine
/// (`validate::plain_pattern`): for the check in place, whose schema is judged to allow it.
fn compile_for<F: Json>(
    schema: &Value,
    draft: Draft,
    validate_formats: bool,
    plain_patterns: bool,
) -> Result<Validator<F>, jsonschema::ValidationError<'static>> {
    let options = jsonschema::options_for::<F>()
        .with_draft(draft)
        .offline()
        .should_validate_formats(validate_formats)
        .with_format("date-time", local_time::date_time)
        .with_format("time", local_time::time)
        .with_format("duration", duration::duration)
        .with_pattern_options(
            PatternOptions::regex()
                .size_limit(1 << 20)
                .dfa_size_limit(1 << 20),
        );
    if plain_patterns {
        options
            .with_keyword("pattern", plain_pattern::keyword::<F>)
            .build(schema)
    } else {
        options.build(schema)
    }
}

impl std::fmt::Debug for Schema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schema")
            .field("raw", &self.raw)
            .finish_non_exhaustive()
    }
}

/// The most bytes a schema's text may hold once read, for each byte of
/// `limits.max_schema_bytes`: schemas as servers write them hold 5 to 25 times their text
/// (the more small objects, the more), where seven-byte objects in a row hold 90 times theirs.
const FOOTPRINT_PER_BYTE: usize = 32;

/// What a kept schema is counted as, for each byte its text holds once read: the value, and
/// its validators once a call compiles them (3.7 to 4.7 times the value, measured on
/// schemas of small objects, of strings and of both).
const KEPT_PER_FOOTPRINT: usize = 5;

/// What a tool's entry in a scope is counted as, past its name's bytes: the map's slot and
/// its handles on the schemas.
const ENTRY_BYTES: usize = 64;

/// Bytes counted in the catalog's total for as long as what they stand for is kept.
struct Charge {
    bytes: usize,
    held: Arc<AtomicUsize>,
}

impl Charge {
    fn new(held: &Arc<AtomicUsize>, bytes: usize) -> Charge {
        held.fetch_add(bytes, Ordering::Relaxed);
        Charge {
            bytes,
            held: held.clone(),
        }
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.held.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

/// A listing that would take more than `limits.max_catalog_bytes` to keep: alone, or with
/// every other scope's catalog dropped.
#[derive(Debug, thiserror::Error)]
#[error("its tools and schemas would take more than limits.max_catalog_bytes ({0} bytes) to keep")]
pub struct TooLarge(pub usize);

/// A listed tool whose input or output schema no client can use.
pub struct Invalid {
    pub name: Box<str>,
    /// Which of its schemas: `"input"` or `"output"`.
    pub which: &'static str,
    pub why: String,
    /// Its schema, which knows whether it was said invalid in the log before.
    pub schema: Arc<Schema>,
}

/// What the catalog knows of one tool.
#[derive(Clone, Debug)]
pub struct Tool {
    pub input: Arc<Schema>,
    pub output: Option<Arc<Schema>>,
}

impl Tool {
    /// Its schema that no client can use, if one is, and which: an input or output schema
    /// that is no valid object schema (MCP wants both to be one). The input schema first: it
    /// makes the whole tool unusable, where an output schema only makes the listing that
    /// holds it unreadable to a client's SDK.
    pub fn invalid(&self) -> Option<(&'static str, &Arc<Schema>)> {
        if self.input.invalid.is_some() {
            return Some(("input", &self.input));
        }
        let output = self.output.as_ref().filter(|o| o.invalid.is_some());
        output.map(|o| ("output", o))
    }
}

#[derive(Default)]
struct ScopeCatalog {
    tools: HashMap<Box<str>, Tool, Fast>,
    /// Its tools' names and entries, counted in the catalog's bytes.
    charge: Option<Charge>,
    /// The tools came from a full listing, so a name not here is unknown.
    complete: bool,
    listed_at: Option<Instant>,
    last_used: Option<Instant>,
    /// `ttlMs` from the listing (2026-07-28): past this, the entry reads as absent.
    expires_at: Option<Instant>,
}

/// The scope of listings a server marked `cacheScope: "public"`: one per upstream, read by
/// every credential. Private listings stay in their own credential's scope.
const PUBLIC: u64 = u64::MAX;

impl ScopeKey {
    pub fn public_of(&self) -> ScopeKey {
        ScopeKey {
            upstream: self.upstream,
            context: PUBLIC,
        }
    }
}

pub enum Lookup {
    Found(Tool),
    /// Not known; `relist` says whether listing again may change that.
    Missing {
        relist: bool,
    },
}

/// Which settings compile a schema; part of the dedup key so a config change recompiles.
#[derive(Clone, PartialEq)]
pub struct CompileSettings {
    pub max_schema_bytes: usize,
    pub validate_formats: bool,
    pub unknown_dialect: UnknownDialect,
}

impl CompileSettings {
    pub fn from_config(limits: &Limits, v: &Validation) -> Self {
        CompileSettings {
            max_schema_bytes: limits.max_schema_bytes,
            validate_formats: v.validate_formats,
            unknown_dialect: v.unknown_dialect,
        }
    }
}

pub struct Catalog {
    scopes: RwLock<HashMap<ScopeKey, ScopeCatalog, Fast>>,
    schemas: Mutex<HashMap<u64, Vec<Weak<Schema>>>>,
    refresh_locks: Mutex<HashMap<ScopeKey, Weak<tokio::sync::Mutex<()>>>>,
    settings: CompileSettings,
    max_scopes: usize,
    /// Bytes its scopes and schemas are counted as (`Charge`), and the most it keeps.
    held: Arc<AtomicUsize>,
    max_bytes: usize,
}

#[derive(Deserialize)]
struct ListResult<'a> {
    /// Each entry read on its own (one that is no tool must not cost the others), and one
    /// at a time (`jsonrpc::items`).
    #[serde(borrow, default)]
    tools: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "nextCursor")]
    next_cursor: Option<&'a RawValue>,
    #[serde(default, rename = "ttlMs")]
    ttl_ms: Option<u64>,
    #[serde(borrow, default, rename = "cacheScope")]
    cache_scope: Option<Cow<'a, str>>,
}

#[derive(Deserialize)]
struct ToolDef<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow, rename = "inputSchema")]
    input_schema: Option<&'a RawValue>,
    #[serde(borrow, default, rename = "outputSchema")]
    output_schema: Option<&'a RawValue>,
}

/// One tool of a listing, with its schemas as raw JSON text.
pub struct Listed {
    pub name: Box<str>,
    pub input: Box<str>,
    pub output: Option<Box<str>>,
}

impl Listed {
    /// Its name's and schemas' text.
    pub fn text_bytes(&self) -> usize {
        self.name.len() + self.input.len() + self.output.as_ref().map_or(0, |o| o.len())
    }
}

/// One page of a `tools/list` result, read for what the catalog needs.
pub struct Page {
    pub tools: Vec<Listed>,
    /// Entries that are no tool definition (no object, or no string `name`): not learned.
    pub malformed: usize,
    /// The raw `nextCursor`, when there is one (and it is not null).
    pub next_cursor: Option<Box<RawValue>>,
    /// How long the listing may be cached (`ttlMs`, 2026-07-28).
    pub ttl: Option<Duration>,
    /// `cacheScope: "public"`: the same for every credential.
    pub public: bool,
}

impl Page {
    /// One page of a `tools/list` result; `Err` when it is not one.
    pub fn parse(result: &RawValue) -> Result<Page, serde_json::Error> {
        let r: ListResult<'_> = serde_json::from_str(result.get())?;
        let (mut tools, mut malformed) = (Vec::new(), 0);
        let entries = r.tools.map_or("[]", RawValue::get);
        crate::jsonrpc::items::each(entries, |t| {
            match serde_json::from_str::<ToolDef<'_>>(t.get()) {
                Ok(t) => tools.push(Listed {
                    name: t.name.as_ref().into(),
                    input: t.input_schema.map_or("{}", RawValue::get).into(),
                    output: (t.output_schema)
                        .filter(|o| o.get() != "null")
                        .map(|o| o.get().into()),
                }),
                Err(_) => malformed += 1,
            }
        })?;
        Ok(Page {
            malformed,
            tools,
            // Under a second (`ttlMs: 0` says "do not cache") counts as one: the listing must
            // still decide the call that fetched it, and a listing per call would double the
            // upstream's load.
            ttl: r
                .ttl_ms
                .map(|ms| Duration::from_millis(ms).max(RELIST_AFTER)),
            public: r.cache_scope.as_deref() == Some("public"),
            next_cursor: r
                .next_cursor
                .filter(|c| c.get() != "null")
                .map(|c| c.to_owned()),
        })
    }
}

impl Catalog {
    pub fn new(settings: CompileSettings, max_scopes: usize, max_bytes: usize) -> Catalog {
        Catalog {
            scopes: RwLock::default(),
            schemas: Mutex::new(HashMap::new()),
            refresh_locks: Mutex::new(HashMap::new()),
            settings,
            max_scopes,
            held: Arc::default(),
            max_bytes,
        }
    }

    /// The bytes its scopes and schemas are counted as.
    pub fn bytes(&self) -> usize {
        self.held.load(Ordering::Relaxed)
    }

    fn over_budget(&self) -> bool {
        self.bytes() > self.max_bytes
    }

    pub fn settings(&self) -> &CompileSettings {
        &self.settings
    }

    pub fn lookup(&self, key: &ScopeKey, tool: &str) -> Lookup {
        let scopes = self.scopes.reading();
        let mut relist = true;
        // The clock is read only for a scope whose listing expires: most never do, and this
        // runs on every call.
        let mut find = |k: &ScopeKey| {
            let cat = scopes
                .get(k)
                .filter(|c| c.expires_at.is_none_or(|e| Instant::now() < e))?;
            if let Some(t) = cat.tools.get(tool) {
                return Some(t.clone());
            }
            if cat.complete && cat.listed_at.is_some_and(|t| t.elapsed() < RELIST_AFTER) {
                relist = false;
            }
            None
        };
        // The public catalog's key is built only when the scope's own has not answered:
        // this runs on every call.
        let found = find(key).or_else(|| {
            (key.context != PUBLIC)
                .then(|| find(&key.public_of()))
                .flatten()
        });
        match found {
            Some(t) => Lookup::Found(t),
            None => Lookup::Missing { relist },
        }
    }

    /// Names known in a scope, for "did you mean" suggestions.
    /// The names of the scope's tools that `keep` keeps.
    pub fn tool_names(&self, key: &ScopeKey, keep: impl Fn(&str, &Tool) -> bool) -> Vec<String> {
        let scopes = self.scopes.reading();
        [key, &key.public_of()]
            .into_iter()
            .filter_map(|k| scopes.get(k))
            .flat_map(|c| c.tools.iter())
            .filter(|(k, t)| keep(k, t))
            .map(|(k, _)| k.to_string())
            .collect()
    }

    /// Learns one page that a client listed. A first page without `nextCursor` is the
    /// whole list; otherwise pages add to what is known. Returns the page's tools whose
    /// schema no client can use.
    /// `Err` when the scope would take more than the catalog may keep: it is dropped, and
    /// its calls list their tools again.
    pub fn learn_page(
        &self,
        key: &ScopeKey,
        page: &Page,
        first_page: bool,
    ) -> Result<Vec<Invalid>, TooLarge> {
        let key = if page.public { key.public_of() } else { *key };
        let compiled = self.tools_of(&key, &page.tools)?;
        let whole = first_page && page.next_cursor.is_none();
        let expires = page.ttl.map(|t| Instant::now() + t);
        let invalid = compiled
            .iter()
            .filter_map(|(name, tool)| {
                let (which, schema) = tool.invalid()?;
                Some(Invalid {
                    name: name.clone(),
                    which,
                    why: schema.invalid.clone()?,
                    schema: schema.clone(),
                })
            })
            .collect();
        self.update(&key, |cat| {
            if whole {
                cat.tools.clear();
                cat.complete = true;
                cat.listed_at = Some(Instant::now());
            }
            cat.expires_at = expires.or(cat.expires_at);
            cat.tools.extend(compiled);
        })?;
        Ok(invalid)
    }

    /// Replaces a scope's tools with a full listing toolgate fetched itself; `Err`, and
    /// nothing learned, when it would take more than the catalog may keep.
    pub fn learn_all(
        &self,
        key: &ScopeKey,
        tools: Vec<Listed>,
        ttl: Option<Duration>,
        public: bool,
    ) -> Result<(), TooLarge> {
        let key = if public { key.public_of() } else { *key };
        let compiled = self.tools_of(&key, &tools)?;
        self.update(&key, |cat| {
            cat.tools = compiled.into_iter().collect();
            cat.complete = true;
            cat.listed_at = Some(Instant::now());
            cat.expires_at = ttl.map(|t| Instant::now() + t);
        })
    }

    pub fn listed_since(&self, key: &ScopeKey, t: Instant) -> bool {
        let scopes = self.scopes.reading();
        [key, &key.public_of()]
            .into_iter()
            .filter_map(|k| scopes.get(k))
            .filter_map(|c| c.listed_at)
            .any(|l| l >= t)
    }

    /// Drops a scope's catalog, and the upstream's public one: a change may concern both.
    pub fn forget(&self, key: &ScopeKey) {
        let mut scopes = self.scopes.writing();
        scopes.remove(key);
        scopes.remove(&key.public_of());
    }

    /// Distinct input schemas that did not compile, since start.
    pub fn compile_failures(&self) -> u64 {
        let schemas = self.schemas.locked();
        let failed = schemas
            .values()
            .flatten()
            .filter_map(Weak::upgrade)
            .filter(|s| s.failed())
            .count();
        failed as u64
    }

    pub fn scope_count(&self) -> usize {
        self.scopes.reading().len()
    }

    /// Distinct compiled schemas still in use.
    pub fn schema_count(&self) -> usize {
        let schemas = self.schemas.locked();
        schemas
            .values()
            .flatten()
            .filter(|w| w.strong_count() > 0)
            .count()
    }

    /// One lock per scope, so concurrent calls that miss wait for one listing instead of
    /// each sending their own.
    pub fn refresh_lock(&self, key: &ScopeKey) -> Arc<tokio::sync::Mutex<()>> {
        let mut locks = self.refresh_locks.locked();
        if let Some(l) = locks.get(key).and_then(Weak::upgrade) {
            return l;
        }
        locks.retain(|_, w| w.strong_count() > 0);
        let l = Arc::new(tokio::sync::Mutex::new(()));
        locks.insert(*key, Arc::downgrade(&l));
        l
    }

    /// Changes a scope's catalog, then keeps the catalog within its bounds: the scope is
    /// dropped, and `Err` returned, when it alone takes more bytes than the catalog may keep.
    fn update(&self, key: &ScopeKey, f: impl FnOnce(&mut ScopeCatalog)) -> Result<(), TooLarge> {
        let mut scopes = self.scopes.writing();
        if !scopes.contains_key(key) && scopes.len() >= self.max_scopes {
            evict_least_recent(&mut scopes);
        }
        let cat = scopes.entry(*key).or_default();
        cat.last_used = Some(Instant::now());
        f(cat);
        let names = (cat.tools.keys()).fold(0usize, |n, k| n.saturating_add(k.len() + ENTRY_BYTES));
        // The old charge given back before the new one is taken, so as not to count both.
        cat.charge = None;
        cat.charge = Some(Charge::new(&self.held, names));
        let room = self.room_in(&mut scopes, key);
        if room.is_err() {
            scopes.remove(key);
        }
        room
    }

    /// The tools of a listing for scope `key`, their schemas compiled (or shared), with room
    /// made for them; `Err`, before any other scope is dropped, when the listing alone counts
    /// more than the catalog may keep. Then the scope's own catalog is dropped too: what it
    /// held is no longer the server's listing.
    fn tools_of(
        &self,
        key: &ScopeKey,
        listed: &[Listed],
    ) -> Result<Vec<(Box<str>, Tool)>, TooLarge> {
        self.listed_tools(key, listed).inspect_err(|_| {
            self.scopes.writing().remove(key);
        })
    }

    fn listed_tools(
        &self,
        key: &ScopeKey,
        listed: &[Listed],
    ) -> Result<Vec<(Box<str>, Tool)>, TooLarge> {
        let mut own = 0usize;
        let mut counted = std::collections::HashSet::new();
        let mut tools = Vec::with_capacity(listed.len());
        for t in listed {
            let tool = self.tool(t);
            own = own.saturating_add(t.name.len() + ENTRY_BYTES);
            for schema in std::iter::once(&tool.input).chain(&tool.output) {
                if counted.insert(Arc::as_ptr(schema)) {
                    own = own.saturating_add(schema.charge.as_ref().map_or(0, |c| c.bytes));
                }
            }
            if own > self.max_bytes {
                return Err(TooLarge(self.max_bytes));
            }
            tools.push((t.name.clone(), tool));
            self.make_room(key)?;
        }
        Ok(tools)
    }

    /// Drops the least recently listed scopes other than `keep` while the catalog holds
    /// more than it may, down to nine tenths of it, so that a listing learned tool by tool
    /// does not sort the scopes again for each; `Err` when that is not enough.
    fn make_room(&self, keep: &ScopeKey) -> Result<(), TooLarge> {
        if !self.over_budget() {
            return Ok(());
        }
        self.room_in(&mut self.scopes.writing(), keep)
    }

    fn room_in(
        &self,
        scopes: &mut HashMap<ScopeKey, ScopeCatalog, Fast>,
        keep: &ScopeKey,
    ) -> Result<(), TooLarge> {
        if !self.over_budget() {
            return Ok(());
        }
        let mut ages: Vec<_> = (scopes.iter())
            .filter(|(k, _)| *k != keep)
            .map(|(k, c)| (c.last_used, *k))
            .collect();
        ages.sort_by_key(|a| a.0);
        let room = self.max_bytes - self.max_bytes / 10;
        for (_, k) in ages {
            if self.bytes() <= room {
                break;
            }
            scopes.remove(&k);
        }
        match self.over_budget() {
            true => Err(TooLarge(self.max_bytes)),
            false => Ok(()),
        }
    }

    fn tool(&self, t: &Listed) -> Tool {
        let (input, fresh) = self.shared(&t.input);
        if fresh && let Some(why) = &input.refused {
            // Once per distinct schema: the operator learns which tools go unchecked.
            let tool = crate::text::clipped(&t.name, 200);
            tracing::warn!(tool = %tool, error = %why, "a tool's input schema does not compile; calls to it follow validation.on_compile_error");
        }
        Tool {
            input,
            output: t.output.as_deref().map(|o| self.shared(o).0),
        }
    }

    /// The compiled schema for these bytes, shared with every scope that listed the same.
    pub fn schema(&self, raw: &str) -> Arc<Schema> {
        self.shared(raw).0
    }

    /// Like [`Catalog::schema`]; also says whether this call compiled it.
    fn shared(&self, raw: &str) -> (Arc<Schema>, bool) {
        let mut h = DefaultHasher::new();
        raw.hash(&mut h);
        let hash = h.finish();
        {
            let schemas = self.schemas.locked();
            if let Some(found) = schemas
                .get(&hash)
                .into_iter()
                .flatten()
                .filter_map(Weak::upgrade)
                .find(|s| &*s.raw == raw)
            {
                return (found, false);
            }
        }
        // Compiled outside the lock: a slow schema must not stall other scopes' learning.
        let mut compiled = compile(raw, &self.settings);
        let cost = compiled.raw.len() + compiled.footprint.saturating_mul(KEPT_PER_FOOTPRINT);
        compiled.charge = Some(Charge::new(&self.held, cost));
        let compiled = Arc::new(compiled);
        let mut schemas = self.schemas.locked();
        let slot = schemas.entry(hash).or_default();
        slot.retain(|w| w.strong_count() > 0);
        slot.push(Arc::downgrade(&compiled));
        if schemas.len() > 1024 && schemas.len().is_power_of_two() {
            schemas.retain(|_, v| {
                v.retain(|w| w.strong_count() > 0);
                !v.is_empty()
            });
        }
        (compiled, true)
    }
}

/// A catalog is a cache: dropping the least recently used tenth costs at most a re-listing.
fn evict_least_recent(scopes: &mut HashMap<ScopeKey, ScopeCatalog, Fast>) {
    let mut ages: Vec<_> = scopes.iter().map(|(k, c)| (c.last_used, *k)).collect();
    ages.sort_by_key(|a| a.0);
    for (_, k) in ages.into_iter().take(scopes.len() / 10 + 1) {
        scopes.remove(&k);
    }
}

/// The dialect a schema's `$schema` names, when toolgate knows it. Absent means 2020-12
/// (MCP 2025-11-25, SEP-1613).
fn dialect(schema: &Value) -> Result<Draft, Option<String>> {
    let Some(uri) = schema.get("$schema") else {
        return Ok(Draft::Draft202012);
    };
    let Some(uri) = uri.as_str() else {
        return Err(Some("`$schema` is not a string".into()));
    };
    let norm = uri
        .trim_end_matches('#')
        .trim_start_matches("https://")
        .trim_start_matches("http://");
    match norm {
        "json-schema.org/draft-04/schema" => Ok(Draft::Draft4),
        "json-schema.org/draft-06/schema" => Ok(Draft::Draft6),
        "json-schema.org/draft-07/schema" => Ok(Draft::Draft7),
        "json-schema.org/draft/2019-09/schema" => Ok(Draft::Draft201909),
        "json-schema.org/draft/2020-12/schema" => Ok(Draft::Draft202012),
        _ => Err(Some(format!("unknown JSON Schema dialect {uri:?}"))),
    }
}

/// Reads a schema for the catalog (see `Schema`: its validators are made on first use).
pub fn compile(raw: &str, settings: &CompileSettings) -> Schema {
    let fail = |value, why: String| Schema {
        raw: raw.into(),
        value,
        footprint: 0,
        charge: None,
        refused: Some(Uncompiled(why)),
        draft: Draft::Draft202012,
        validate_formats: settings.validate_formats,
        invalid: None,
        invalid_said: AtomicBool::new(false),
        shape: None,
        built: OnceLock::new(),
        in_place: OnceLock::new(),
    };
    if raw.len() > settings.max_schema_bytes {
        return fail(
            Value::Null,
            format!(
                "schema is {} bytes, over the {} byte limit",
                raw.len(),
                settings.max_schema_bytes
            ),
        );
    }
    // Measured before it is read: reading is what would cost it.
    let footprint = footprint(raw).unwrap_or(0);
    let most = settings.max_schema_bytes.saturating_mul(FOOTPRINT_PER_BYTE);
    if footprint > most {
        let why = format!(
            "its {} bytes of text would hold more than {most} bytes of memory once read, too costly to compile and keep",
            raw.len()
        );
        return fail(Value::Null, why);
    }
    let value: Value = match serde_json::from_str(raw) {
        Ok(v) => v,
        // The text came out of a parsed listing, so it is JSON: what fails here is toolgate's
        // own nesting limit or a number past f64 (`1e400`), which say nothing of the
        // schema's validity for clients.
        Err(e) => return fail(Value::Null, format!("schema is not readable JSON: {e}")),
    };
    let draft = match dialect(&value) {
        Ok(d) => d,
        Err(why) if settings.unknown_dialect == UnknownDialect::Draft202012 && why.is_some() => {
            Draft::Draft202012
        }
        Err(why) => return fail(value, why.unwrap_or_default()),
    };
    let most = settings
        .max_schema_bytes
        .saturating_mul(PLACE_BYTES_PER_BYTE);
    if place_bytes(&value) > most {
        let why = format!(
            "its subschemas are nested so deep under names so long that their places come to more than {most} bytes, too costly to compile and keep"
        );
        return fail(value, why);
    }
    Schema {
        raw: raw.into(),
        footprint,
        charge: None,
        invalid: invalid_for_clients(&value, draft),
        invalid_said: AtomicBool::new(false),
        shape: Shape::of(&value),
        value,
        refused: None,
        draft,
        validate_formats: settings.validate_formats,
        built: OnceLock::new(),
        in_place: OnceLock::new(),
    }
}

/// Adds `additionalProperties: false` where the undeclared-argument walk judges (the root, and
/// each place reached through `properties` or `items` that declares properties) and the
/// schema says nothing. `false` when any such place is composed (`$ref`, `allOf`, …): there,
/// `additionalProperties` would not see the names the other schemas declare, so only the
/// walk is exact.
fn close(s: &mut Value, root: bool) -> bool {
    const COMPOSED: [&str; 9] = [
        "$ref",
        "allOf",
        "anyOf",
        "oneOf",
        "if",
        "then",
        "else",
        "dependentSchemas",
        "dependencies",
    ];
    let Some(obj) = s.as_object_mut() else {
        return true;
    };
    let mut exact = true;
    if let Some(Value::Object(props)) = obj.get_mut("properties") {
        for sub in props.values_mut() {
            exact &= close(sub, false);
        }
    }
    for key in ["items", "additionalItems", "prefixItems"] {
        match obj.get_mut(key) {
            Some(items @ Value::Object(_)) => exact &= close(items, false),
            Some(Value::Array(list)) => {
                for items in list {
                    exact &= close(items, false);
                }
            }
            _ => {}
        }
    }
    if COMPOSED.iter().any(|k| obj.contains_key(*k)) {
        return false;
    }
    let judged = root || obj.contains_key("properties") || obj.contains_key("patternProperties");
    let ruled =
        obj.contains_key("additionalProperties") || obj.contains_key("unevaluatedProperties");
    if judged && !ruled {
        obj.insert("additionalProperties".into(), Value::Bool(false));
    }
    exact
}

/// Why a listed `inputSchema` is one no client can use, with where in the schema: model APIs
/// refuse a whole request whose tool list holds one (docs/contract.md §5).
fn invalid_for_clients(value: &Value, draft: Draft) -> Option<String> {
    let object_root = match value.get("type") {
        Some(Value::String(t)) => t == "object",
        Some(Value::Array(ts)) => !ts.is_empty() && ts.iter().all(|t| t == "object"),
        _ => false,
    };
    if !object_root {
        return Some(
            "its root is not an object schema (\"type\": \"object\"), as MCP requires".into(),
        );
    }
    let meta = match draft {
        Draft::Draft4 => jsonschema::draft4::meta::validator(),
        Draft::Draft6 => jsonschema::draft6::meta::validator(),
        Draft::Draft7 => jsonschema::draft7::meta::validator(),
        Draft::Draft201909 => jsonschema::draft201909::meta::validator(),
        _ => jsonschema::draft202012::meta::validator(),
    };
    if let Some(e) = meta.iter_errors(value).next() {
        return Some(format!(
            "at {}: {}",
            location(e.instance_path().as_str()),
            e.masked()
        ));
    }
    bad_pattern(value, String::new(), 0).map(|(at, p)| {
        format!(
            "at {}: the pattern {p:?} is not a regular expression",
            location(&at)
        )
    })
}

fn location(pointer: &str) -> String {
    if pointer.is_empty() {
        "the root".into()
    } else {
        format!("#{pointer}")
    }
}

/// The first `pattern` (or `patternProperties` name) that no regular-expression dialect
/// reads. Patterns that need backtracking still parse here: those are valid, only not
/// compiled by toolgate's linear-time engine.
fn bad_pattern(s: &Value, at: String, depth: usize) -> Option<(String, String)> {
    if depth > 64 {
        return None;
    }
    match s {
        Value::Object(m) => {
            for (k, v) in m {
                // Data, not schemas: a "pattern" member there is a value.
                if matches!(k.as_str(), "enum" | "const" | "default" | "examples") {
                    continue;
                }
                let here = format!("{at}/{}", crate::text::pointer_token(k));
                if k == "pattern"
                    && let Value::String(p) = v
                    && fancy_regex::Regex::new(p).is_err()
                {
                    return Some((here, p.clone()));
                }
                if k == "patternProperties"
                    && let Value::Object(ps) = v
                    && let Some(p) = ps.keys().find(|p| fancy_regex::Regex::new(p).is_err())
                {
                    return Some((here, p.clone()));
                }
                if let Some(found) = bad_pattern(v, here, depth + 1) {
                    return Some(found);
                }
            }
            None
        }
        Value::Array(a) => a
            .iter()
            .enumerate()
            .find_map(|(i, v)| bad_pattern(v, format!("{at}/{i}"), depth + 1)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> CompileSettings {
        CompileSettings {
            max_schema_bytes: 1 << 20,
            validate_formats: true,
            unknown_dialect: UnknownDialect::Reject,
        }
    }

    fn key(s: &str) -> ScopeKey {
        use std::hash::BuildHasher;
        ScopeKey {
            upstream: 0,
            context: std::hash::BuildHasherDefault::<DefaultHasher>::default().hash_one(s),
        }
    }

    fn listed(name: &str, input: &str) -> Listed {
        Listed {
            name: name.into(),
            input: input.into(),
            output: None,
        }
    }

    const ADD: &str = r#"{"type":"object","properties":{"a":{"type":"integer"}}}"#;

    #[test]
    fn identical_schemas_compile_once() {
        let cat = Catalog::new(settings(), 100, usize::MAX);
        for i in 0..50 {
            let page = Page {
                tools: vec![listed("add", ADD)],
                malformed: 0,
                next_cursor: None,
                ttl: None,
                public: false,
            };
            cat.learn_page(&key(&i.to_string()), &page, true).unwrap();
        }
        assert_eq!(cat.scope_count(), 50);
        assert_eq!(cat.schema_count(), 1);
        let one = ADD.len() + footprint(ADD).unwrap() * KEPT_PER_FOOTPRINT;
        assert_eq!(
            cat.bytes(),
            one + 50 * ("add".len() + ENTRY_BYTES),
            "the schema counted once"
        );
    }

    #[test]
    fn remote_and_file_refs_never_compile() {
        for schema in [
            r#"{"$ref":"http://127.0.0.1:9/x.json"}"#,
            r#"{"$ref":"file:///etc/passwd"}"#,
            r#"{"$schema":"https://example.com/my-dialect","type":"object"}"#,
        ] {
            assert!(
                compile(schema, &settings()).validator().is_err(),
                "{schema}"
            );
        }
        assert!(
            compile(
                r##"{"$defs":{"a":{"type":"string"}},"properties":{"x":{"$ref":"#/$defs/a"}}}"##,
                &settings()
            )
            .validator()
            .is_ok()
        );
    }

    #[test]
    fn backtracking_patterns_are_left_out_and_the_rest_checked() {
        // Lookaround needs a backtracking engine, which toolgate does not run on a client's
        // text: the pattern goes unchecked, the rest of the schema does not.
        let s = compile(
            r#"{"properties":{"x":{"type":"string","pattern":"^(?=a)a$"},"y":{"type":"integer"}}}"#,
            &settings(),
        );
        let validator = s.validator().expect("compiled without the pattern");
        assert_eq!(s.unchecked_patterns(), ["/properties/x"]);
        assert!(validator.is_valid(&serde_json::json!({"x": "b", "y": 1})));
        assert!(!validator.is_valid(&serde_json::json!({"y": "1"})));
        assert!(
            s.in_place().is_some(),
            "the check in place is of the same schema"
        );
    }

    #[test]
    fn the_closed_form_is_kept_only_where_it_says_what_the_walk_says() {
        let flat = compile(
            r#"{"type":"object","properties":{"a":{"type":"object","properties":{"b":{}}}}}"#,
            &settings(),
        );
        let check = flat.in_place().expect("a flat schema compiles");
        assert!(check.closed, "a flat schema has a closed form");
        let valid = |text| {
            let args = crate::jsonrpc::arguments::Arguments::read(text).unwrap();
            check.validator.is_valid(args.root())
        };
        assert!(valid(r#"{"a": {"b": 1}}"#));
        assert!(!valid(r#"{"a": {"c": 1}}"#));
        assert!(!valid(r#"{"x": 1}"#));
        for composed in [
            r##"{"type":"object","$defs":{"t":{"type":"object","properties":{"n":{}}}},"properties":{"l":{"type":"array","items":{"$ref":"#/$defs/t"}}}}"##,
            r#"{"type":"object","allOf":[{"properties":{"a":{}}},{"properties":{"b":{}}}]}"#,
        ] {
            assert!(
                !compile(composed, &settings()).in_place().unwrap().closed,
                "{composed}"
            );
        }
    }

    /// The check in place, with its patterns matched plainly or by the engine, answers as
    /// the check by value, which keeps the engine's own.
    #[test]
    fn patterns_in_place_answer_as_by_value() {
        let plain = r#"{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{3}$"},"any":{"pattern":"^\\d+$"},"tags":{"type":"array","items":{"pattern":"^[a-z_-]+$"}}}}"#;
        let engine = r#"{"type":"object","properties":{"code":{"type":"string","pattern":"^(LHR|JFK)$"},"any":{"pattern":"^\\d+$"},"tags":{"type":"array","items":{"pattern":"^[a-z_-]+$"}}}}"#;
        for schema in [plain, engine] {
            let schema = compile(schema, &settings());
            let check = schema.in_place().expect("it compiles");
            let by_value = schema.validator().unwrap();
            for args in [
                r#"{"code":"LHR"}"#,
                r#"{"code":"LH"}"#,
                r#"{"code":"LHRX"}"#,
                r#"{"code":"lhr"}"#,
                r#"{"code":"JFK","any":"123","tags":["a-b","c_d"]}"#,
                r#"{"any":12}"#,
                r#"{"any":"12a"}"#,
                r#"{"any":"١٢"}"#,
                r#"{"tags":["ok","Not"]}"#,
                r#"{"tags":[1,"x"]}"#,
            ] {
                let in_place = crate::jsonrpc::arguments::Arguments::read(args).unwrap();
                let value: Value = serde_json::from_str(args).unwrap();
                assert_eq!(
                    check.validator.is_valid(in_place.root()),
                    by_value.is_valid(&value),
                    "{args}"
                );
            }
        }
    }

    #[test]
    fn invalid_schemas_say_what_and_where() {
        for (schema, why) in [
            (r#"{"type":"array"}"#, "its root is not an object schema"),
            (r#"{"properties":{}}"#, "its root is not an object schema"),
            (
                r#"{"type":"object","properties":{"x":{"type":"strin"}}}"#,
                "at #/properties/x/type",
            ),
            (
                r#"{"type":"object","properties":{"x":{"type":"string","pattern":"(a"}}}"#,
                "at #/properties/x/pattern: the pattern",
            ),
        ] {
            let got = compile(schema, &settings()).invalid.unwrap_or_default();
            assert!(got.contains(why), "{schema}: {got}");
        }
        // Valid, though toolgate's engine cannot run the pattern: not invalid for clients,
        // and checked without it.
        let lookbehind = compile(
            r#"{"type":"object","properties":{"x":{"type":"string","pattern":"(?<=a)b"}}}"#,
            &settings(),
        );
        assert!(lookbehind.invalid.is_none());
        let validator = lookbehind.validator().expect("checked without the pattern");
        assert_eq!(lookbehind.unchecked_patterns(), ["/properties/x"]);
        assert!(validator.is_valid(&serde_json::json!({"x": "c"})));
        assert!(!validator.is_valid(&serde_json::json!({"x": 1})));
    }

    #[test]
    fn oversized_schema_is_refused() {
        let mut s = settings();
        s.max_schema_bytes = 10;
        assert!(
            compile(ADD, &s)
                .validator()
                .unwrap_err()
                .0
                .contains("limit")
        );
    }

    #[test]
    fn missing_tool_relists_only_when_stale() {
        let cat = Catalog::new(settings(), 100, usize::MAX);
        assert!(matches!(
            cat.lookup(&key("s"), "x"),
            Lookup::Missing { relist: true }
        ));
        cat.learn_all(&key("s"), vec![listed("add", ADD)], None, false)
            .unwrap();
        assert!(matches!(cat.lookup(&key("s"), "add"), Lookup::Found(_)));
        assert!(matches!(
            cat.lookup(&key("s"), "x"),
            Lookup::Missing { relist: false }
        ));
    }

    #[test]
    fn scopes_are_bounded() {
        let cat = Catalog::new(settings(), 10, usize::MAX);
        for i in 0..100 {
            cat.learn_all(&key(&i.to_string()), vec![listed("add", ADD)], None, false)
                .unwrap();
        }
        assert!(cat.scope_count() <= 10);
    }

    /// A schema of its own for each scope: `n` properties, its name among them.
    fn own_listing(scope: &str, n: usize) -> Vec<Listed> {
        let properties: Vec<String> = (0..n).map(|i| format!(r#""{scope}{i}":{{}}"#)).collect();
        let schema = format!(
            r#"{{"type":"object","properties":{{{}}}}}"#,
            properties.join(",")
        );
        vec![listed("t", &schema)]
    }

    #[test]
    fn what_scopes_hold_is_bounded_in_bytes_the_least_recently_listed_dropped_first() {
        let one = {
            let cat = Catalog::new(settings(), 100, usize::MAX);
            cat.learn_all(&key("x"), own_listing("x", 100), None, false)
                .unwrap();
            cat.bytes()
        };
        let cat = Catalog::new(settings(), 100, 3 * one + one / 2);
        for i in 0..10 {
            let k = key(&i.to_string());
            cat.learn_all(&k, own_listing(&i.to_string(), 100), None, false)
                .unwrap();
            assert!(cat.bytes() <= 3 * one + one / 2, "{} bytes", cat.bytes());
        }
        assert_eq!((cat.scope_count(), cat.bytes()), (3, 3 * one));
        let kept = |i: usize| matches!(cat.lookup(&key(&i.to_string()), "t"), Lookup::Found(_));
        assert!((7..10).all(kept) && !(0..7).any(kept));
        cat.forget(&key("9"));
        assert_eq!(cat.bytes(), 2 * one, "given back when a scope goes");
    }

    #[test]
    fn a_listing_larger_than_the_catalog_may_keep_is_not_learned() {
        let cat = Catalog::new(settings(), 100, 100_000);
        cat.learn_all(&key("small"), vec![listed("add", ADD)], None, false)
            .unwrap();
        let small = cat.bytes();
        cat.learn_all(&key("large"), vec![listed("add", ADD)], None, false)
            .unwrap();
        let large = own_listing("l", 2_000);
        let err = cat
            .learn_all(&key("large"), large, None, false)
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "its tools and schemas would take more than limits.max_catalog_bytes (100000 bytes) to keep"
        );
        assert_eq!(
            (cat.scope_count(), cat.bytes()),
            (1, small),
            "its own scope's listing dropped, no other"
        );
        assert!(matches!(cat.lookup(&key("small"), "add"), Lookup::Found(_)));
        let page = |n: usize| Page {
            tools: (own_listing(&n.to_string(), 100).into_iter())
                .map(|t| Listed {
                    name: format!("t{n}").into(),
                    ..t
                })
                .collect(),
            malformed: 0,
            next_cursor: Some(RawValue::from_string("\"next\"".into()).unwrap()),
            ttl: None,
            public: false,
        };
        let one_page = {
            let cat = Catalog::new(settings(), 100, usize::MAX);
            cat.learn_page(&key("x"), &page(0), true).unwrap();
            cat.bytes()
        };
        let cat = Catalog::new(settings(), 100, 2 * one_page + one_page / 2);
        for n in 0..3 {
            let learned = cat.learn_page(&key("pages"), &page(n), n == 0);
            assert_eq!(learned.is_ok(), n < 2, "page {n}");
        }
        assert_eq!(
            (cat.scope_count(), cat.bytes()),
            (0, 0),
            "a scope its pages made too large is dropped"
        );
    }

    #[test]
    fn a_schema_that_would_hold_too_much_once_read_is_not_read() {
        let objects = format!(r#"{{"enum":[{}]}}"#, vec![r#"{"":0}"#; 5_000].join(","));
        let mut s = settings();
        s.max_schema_bytes = objects.len();
        let refused = compile(&objects, &s);
        let why = refused.validator().unwrap_err().0.clone();
        assert_eq!(
            why,
            format!(
                "its {} bytes of text would hold more than {} bytes of memory once read, too costly to compile and keep",
                objects.len(),
                objects.len() * FOOTPRINT_PER_BYTE
            )
        );
        assert_eq!(refused.value, Value::Null, "not read");
        let strings = format!(r#"{{"enum":[{}]}}"#, vec![r#""abcd""#; 4_000].join(","));
        assert!(compile(&strings, &s).validator().is_ok());
    }
}
