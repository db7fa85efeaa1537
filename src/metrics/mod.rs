//! Prometheus metrics, hand-rolled: a few counter families and one histogram family.
//!
//! No global registry (tests stay isolated) and no dependency beyond `arc-swap`. An increment
//! hashes its label values, looks them up in the current map, and adds to this thread's slot
//! of the value; a new label set installs a copy of the map once. The counts every message
//! makes (its request, its tool call, its upstream's latency) skip the lookup: each upstream
//! keeps the series it has counted in ([`UpstreamSeries`]). Nothing on either path is
//! written by two threads: a read lock's count, or one shared atomic per value, would be a
//! cache line passed between the worker threads on every request.
//!
//! Each family keeps at most [`MAX_SERIES`] label sets, past which new ones count under
//! `other`: label values can come from clients (a tool name), and a scrape must not grow
//! without bound.

use crate::locks::MutexExt;
use crate::thread_slot::{SLOTS, slot};
use arc_swap::ArcSwap;
use std::collections::HashMap;
use std::fmt::Write;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

mod process;

const MAX_SERIES: usize = 5_000;

#[repr(align(64))]
#[derive(Default)]
struct Slot(AtomicU64);

/// A counter value, one slot per thread.
#[derive(Default)]
struct Spread([Slot; SLOTS]);

impl Spread {
    fn add(&self, n: u64) {
        self.0[slot()].0.fetch_add(n, Ordering::Relaxed);
    }

    fn get(&self) -> u64 {
        self.0.iter().map(|s| s.0.load(Ordering::Relaxed)).sum()
    }

    /// The sum when slots also go down (a gauge: one thread adds, another takes away, so a
    /// slot alone may read below zero).
    fn level(&self) -> i64 {
        let sum = self
            .0
            .iter()
            .fold(0u64, |acc, s| acc.wrapping_add(s.0.load(Ordering::Relaxed)));
        sum as i64
    }
}

/// Requests in service at the HTTP edge: entered when admitted, left when the answer's head
/// is out or the client went away. Per-thread slots, as the counters are: it moves on every
/// request. One count for the process (a reload keeps its metrics anyway), so that the guard
/// a request holds needs no handle to them: cloning one per request would pass its count's
/// cache line between the worker threads.
static IN_FLIGHT: std::sync::LazyLock<Spread> = std::sync::LazyLock::new(Spread::default);

/// One request in service; leaves the count when dropped.
pub struct Entered(());

impl Entered {
    pub fn enter() -> Entered {
        IN_FLIGHT.add(1);
        Entered(())
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        IN_FLIGHT.add(u64::MAX);
    }
}

/// Gauges that move rarely (a child starts, a session ends), by upstream: a lock is cheap
/// there, and the upstreams are the operator's, so the series are bounded.
pub struct Level {
    name: &'static str,
    help: &'static str,
    by_upstream: Mutex<std::collections::BTreeMap<Box<str>, i64>>,
}

impl Level {
    fn new(name: &'static str, help: &'static str) -> Level {
        Level {
            name,
            help,
            by_upstream: Mutex::default(),
        }
    }

    pub fn add(&self, upstream: &str, delta: i64) {
        *self
            .by_upstream
            .locked()
            .entry(upstream.into())
            .or_default() += delta;
    }

    pub fn set(&self, upstream: &str, value: i64) {
        self.by_upstream.locked().insert(upstream.into(), value);
    }

    fn render(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP {} {}\n# TYPE {} gauge",
            self.name, self.help, self.name
        );
        for (up, v) in self.by_upstream.locked().iter() {
            let _ = writeln!(out, "{}{{upstream=\"{up}\"}} {v}", self.name);
        }
    }
}

struct Series {
    labels: Box<[Box<str>]>,
    value: Spread,
}

/// A map read without a lock and grown by installing a copy, one writer at a time: new
/// entries are rare (a new label set), reads happen on every request.
struct Grown<K, V, S = std::hash::RandomState> {
    map: ArcSwap<HashMap<K, Arc<V>, S>>,
    writer: Mutex<()>,
}

impl<K, V, S> Default for Grown<K, V, S>
where
    S: Default,
{
    fn default() -> Self {
        Grown {
            map: ArcSwap::from_pointee(HashMap::default()),
            writer: Mutex::new(()),
        }
    }
}

impl<K: Eq + std::hash::Hash + Clone, V, S: std::hash::BuildHasher + Clone> Grown<K, V, S> {
    fn current(&self) -> arc_swap::Guard<Arc<HashMap<K, Arc<V>, S>>> {
        self.map.load()
    }

    /// Under the writers' lock, `pick` looks at the current map and names the entry to use,
    /// or the one to add.
    fn grow(
        &self,
        pick: impl FnOnce(&HashMap<K, Arc<V>, S>) -> Result<Arc<V>, (K, Arc<V>)>,
    ) -> Arc<V> {
        let _one_at_a_time = self.writer.locked();
        let map = self.map.load_full();
        match pick(&map) {
            Ok(v) => v,
            Err((k, v)) => {
                let mut grown = (*map).clone();
                grown.insert(k, v.clone());
                self.map.store(Arc::new(grown));
                v
            }
        }
    }
}

/// Counters sharing a name, one per label set.
pub struct Counter {
    name: &'static str,
    help: &'static str,
    label_names: &'static [&'static str],
    series: Grown<u64, Series, BuildHasherDefault<Prehashed>>,
}

/// A fast hash of the label values, a few short strings per increment: SipHash cost several
/// times more, and FNV, a byte at a time, twice. A collision is caught by comparing labels on
/// every hit.
fn key(labels: &[&str]) -> u64 {
    use std::hash::BuildHasher;
    foldhash::fast::FixedState::with_seed(0).hash_one(labels)
}

/// The map's keys are already hashes.
#[derive(Default)]
struct Prehashed(u64);

impl Hasher for Prehashed {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

impl Series {
    fn is(&self, labels: &[&str]) -> bool {
        self.labels.len() == labels.len() && self.labels.iter().zip(labels).all(|(a, b)| **a == **b)
    }
}

impl Counter {
    pub fn new(
        name: &'static str,
        help: &'static str,
        label_names: &'static [&'static str],
    ) -> Counter {
        Counter {
            name,
            help,
            label_names,
            series: Grown::default(),
        }
    }

    pub fn inc(&self, labels: &[&str]) {
        self.add(labels, 1);
    }

    pub fn add(&self, labels: &[&str], n: u64) {
        let k = key(labels);
        if let Some(s) = self.series.current().get(&k)
            && s.is(labels)
        {
            s.value.add(n);
            return;
        }
        self.install(k, labels).value.add(n);
    }

    /// The series of `labels` (`other`'s past the bound), to count on without finding it again.
    fn tally(&self, labels: &[&str]) -> Tally {
        let k = key(labels);
        match self.series.current().get(&k) {
            Some(s) if s.is(labels) => Tally(s.clone()),
            _ => Tally(self.install(k, labels)),
        }
    }

    /// The series of `labels`, whose key is `k`, added unless another thread did meanwhile.
    fn install(&self, k: u64, labels: &[&str]) -> Arc<Series> {
        self.series.grow(|series| {
            let collides = series.get(&k).is_some_and(|s| !s.is(labels));
            let (k, labels): (u64, Vec<&str>) =
                if collides || (series.len() >= MAX_SERIES && !series.contains_key(&k)) {
                    let other: Vec<&str> = labels.iter().map(|_| "other").collect();
                    (key(&other), other)
                } else {
                    (k, labels.to_vec())
                };
            series.get(&k).cloned().ok_or_else(|| {
                let labels = labels.iter().map(|l| Box::from(*l)).collect();
                let value = Spread::default();
                (k, Arc::new(Series { labels, value }))
            })
        })
    }

    fn render(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP {} {}\n# TYPE {} counter",
            self.name, self.help, self.name
        );
        let series = self.series.current();
        let mut lines: Vec<String> = series
            .values()
            .map(|s| {
                format!(
                    "{}{{{}}} {}",
                    self.name,
                    label_text(self.label_names, &s.labels),
                    s.value.get()
                )
            })
            .collect();
        lines.sort();
        for l in lines {
            out.push_str(&l);
            out.push('\n');
        }
    }
}

fn label_text(names: &[&str], values: &[Box<str>]) -> String {
    names
        .iter()
        .zip(values)
        .map(|(n, v)| {
            format!(
                "{n}=\"{}\"",
                v.replace('\\', "\\\\")
                    .replace('"', "\\\"")
                    .replace('\n', "\\n")
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

const BUCKETS: [f64; 14] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
];

/// One thread's share of a histogram (see [`SLOTS`]).
#[repr(align(64))]
#[derive(Default)]
struct Lane {
    counts: [AtomicU64; BUCKETS.len()],
    sum_micros: AtomicU64,
    count: AtomicU64,
}

#[derive(Default)]
struct Buckets([Lane; SLOTS]);

impl Buckets {
    /// One observation, in one bucket: the cumulative counts are summed at scrape time.
    fn record(&self, d: Duration) {
        let secs = d.as_secs_f64();
        let lane = &self.0[slot()];
        if let Some(i) = BUCKETS.iter().position(|le| secs <= *le) {
            lane.counts[i].fetch_add(1, Ordering::Relaxed);
        }
        lane.sum_micros
            .fetch_add(d.as_micros() as u64, Ordering::Relaxed);
        lane.count.fetch_add(1, Ordering::Relaxed);
    }

    fn total(&self, f: impl Fn(&Lane) -> &AtomicU64) -> u64 {
        self.0.iter().map(|l| f(l).load(Ordering::Relaxed)).sum()
    }
}

/// Latency histograms, one per upstream.
pub struct Histogram {
    name: &'static str,
    help: &'static str,
    series: Grown<Box<str>, Buckets, foldhash::fast::RandomState>,
}

impl Histogram {
    pub fn new(name: &'static str, help: &'static str) -> Histogram {
        Histogram {
            name,
            help,
            series: Grown::default(),
        }
    }

    /// The buckets of `upstream`, added on its first observation.
    fn buckets(&self, upstream: &str) -> Arc<Buckets> {
        if let Some(b) = self.series.current().get(upstream) {
            return b.clone();
        }
        self.series.grow(|series| {
            series
                .get(upstream)
                .cloned()
                .ok_or_else(|| (upstream.into(), Arc::default()))
        })
    }

    fn render(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP {} {}\n# TYPE {} histogram",
            self.name, self.help, self.name
        );
        let series = self.series.current();
        let mut names: Vec<&Box<str>> = series.keys().collect();
        names.sort();
        for up in names {
            let b = &series[up];
            let mut cumulative = 0;
            for (i, le) in BUCKETS.iter().enumerate() {
                cumulative += b.total(|l| &l.counts[i]);
                let _ = writeln!(
                    out,
                    "{}_bucket{{upstream=\"{up}\",le=\"{le}\"}} {cumulative}",
                    self.name
                );
            }
            let count = b.total(|l| &l.count);
            let _ = writeln!(
                out,
                "{}_bucket{{upstream=\"{up}\",le=\"+Inf\"}} {count}",
                self.name
            );
            let _ = writeln!(
                out,
                "{}_sum{{upstream=\"{up}\"}} {}",
                self.name,
                b.total(|l| &l.sum_micros) as f64 / 1e6
            );
            let _ = writeln!(out, "{}_count{{upstream=\"{up}\"}} {count}", self.name);
        }
    }
}

/// What the tool catalogs hold, read when the metrics are rendered.
#[derive(Default)]
pub struct CatalogGauges {
    pub scopes: usize,
    pub schemas: usize,
    pub bytes: usize,
    pub compile_failures: u64,
}

/// What the requests hold together, read at scrape time (`policy::held`).
#[derive(Default)]
pub struct HeldGauges {
    /// Bytes of request bodies held.
    pub bodies: usize,
    /// Bytes of answers held until they have gone.
    pub answers: usize,
    /// Answers waiting for room among those bytes.
    pub answers_waiting: usize,
    /// Connections open to servers, every server's together, and how many may be
    /// (`net::outbound`).
    pub upstream_connections: (usize, usize),
}

/// Every metric toolgate exports.
pub struct Metrics {
    /// `{upstream, method, outcome}`; `outcome` is `forwarded`, `answered` (toolgate wrote the
    /// answer), `rejected` (a transport rejection), `upstream_error` or `gateway_busy` (refused
    /// unsent: `error::UpstreamError::outcome`).
    pub requests: Counter,
    /// `{upstream, tool, outcome}`: `forwarded`, `coerced`, `rejected_invalid`, `audited`,
    /// `unknown`, `denied`, `rewritten`, `upstream_error`, `gateway_busy`, `schema_unusable`.
    pub tool_calls: Counter,
    /// `{upstream, tool, keyword}`: schema keywords that failed, counted in enforce and audit.
    pub violations: Counter,
    /// `{upstream, kind}`: upstream answers toolgate rewrote.
    pub rewrites: Counter,
    /// `{decided}`: calls whose shared rate limit could not be read (`local` or `deny`).
    pub shared_state_unavailable: Counter,
    /// Time from sending a message to its server until the answer (or its stream) is in
    /// hand, whatever the kind of server.
    pub upstream_latency: Histogram,
    /// `{upstream}`: stdio server processes running (`serve -- CMD`), shared ones included; an
    /// HTTP+SSE server's event streams, which stand in for them.
    pub children: Level,
    /// `{upstream}`: sessions open with a stdio server (`serve -- CMD`), each with its child.
    pub sessions: Level,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            requests: Counter::new(
                "toolgate_requests_total",
                "JSON-RPC messages received, by upstream, method and outcome.",
                &["upstream", "method", "outcome"],
            ),
            tool_calls: Counter::new(
                "toolgate_tool_calls_total",
                "tools/call requests, by upstream, tool and outcome.",
                &["upstream", "tool", "outcome"],
            ),
            violations: Counter::new(
                "toolgate_violations_total",
                "Argument violations, by upstream, tool and schema keyword.",
                &["upstream", "tool", "keyword"],
            ),
            rewrites: Counter::new(
                "toolgate_rewrites_total",
                "Upstream answers rewritten, by upstream and kind.",
                &["upstream", "kind"],
            ),
            shared_state_unavailable: Counter::new(
                "toolgate_shared_state_unavailable_total",
                "Calls whose shared rate limit could not be read, by how they were decided.",
                &["decided"],
            ),
            upstream_latency: Histogram::new(
                "toolgate_upstream_latency_seconds",
                "Time from forwarding a message until its answer, or the start of its stream, is in hand.",
            ),
            children: Level::new(
                "toolgate_stdio_children",
                "stdio server processes running (an HTTP+SSE server's event streams open), by upstream.",
            ),
            sessions: Level::new(
                "toolgate_stdio_sessions",
                "Sessions open with a stdio server, each with its own process (or event stream), by upstream.",
            ),
        }
    }
}

/// One counter series, found once.
struct Tally(Arc<Series>);

impl Tally {
    fn inc(&self) {
        self.0.value.add(1);
    }
}

/// Entries an upstream keeps of the request counts it has seen: the kinds of message and
/// outcome in use. Past them, a count finds its series by its labels.
const KEPT_REQUEST_SERIES: usize = 32;

/// Entries an upstream keeps of its tools' call counts, each tool's and outcome's in the
/// entry its name picks, the first to come keeping it; a count whose entry another holds
/// finds its series by its labels.
const KEPT_TOOL_SERIES: usize = 64;

/// One upstream's series in the families every message it carries counts in, each found
/// the first time and kept: a message then neither hashes its labels nor reads the family's
/// map (about 0.5k instructions a message; docs/performance.md). A series appears with its
/// first count, as before.
///
/// A request count is labelled by the upstream and two static texts, a method's label and
/// an outcome, and kept by where those texts lie: a static text never moves and is never
/// freed, so where it lies names it. Alike texts at two places take two entries of one
/// series.
///
/// Caveat: the series are those of the [`Metrics`] they are counted in first: an upstream
/// is counted in its own gateway's, which a reload keeps.
pub struct UpstreamSeries {
    upstream: Arc<str>,
    requests: [OnceLock<(&'static str, &'static str, Tally)>; KEPT_REQUEST_SERIES],
    tool_calls: [OnceLock<(Box<str>, &'static str, Tally)>; KEPT_TOOL_SERIES],
    latency: OnceLock<Arc<Buckets>>,
}

impl UpstreamSeries {
    /// The series of the upstream named `upstream`, none found yet.
    pub fn new(upstream: Arc<str>) -> UpstreamSeries {
        UpstreamSeries {
            upstream,
            requests: std::array::from_fn(|_| OnceLock::new()),
            tool_calls: std::array::from_fn(|_| OnceLock::new()),
            latency: OnceLock::new(),
        }
    }

    /// Counts a message in `requests`, by its method's label and outcome.
    pub fn request(&self, metrics: &Metrics, method: &'static str, outcome: &'static str) {
        let labels = [&*self.upstream, method, outcome];
        for kept in &self.requests {
            let (m, o, tally) =
                kept.get_or_init(|| (method, outcome, metrics.requests.tally(&labels)));
            if std::ptr::eq(*m, method) && std::ptr::eq(*o, outcome) {
                return tally.inc();
            }
        }
        metrics.requests.inc(&labels);
    }

    /// Counts a call of `tool` in `tool_calls`, by its outcome.
    pub fn tool_call(&self, metrics: &Metrics, tool: &str, outcome: &'static str) {
        let labels = [&*self.upstream, tool, outcome];
        // The entry a call picks: from its name's length, first and last bytes, which tell
        // most of a server's tools apart and cost nothing to read, and its outcome's length.
        let bytes = tool.as_bytes();
        let ends = [bytes.first(), bytes.last()].map(|b| usize::from(*b.unwrap_or(&0)));
        let pick = bytes.len() * 31 + ends[0] * 7 + ends[1] + outcome.len() * 13;
        let kept = &self.tool_calls[pick % KEPT_TOOL_SERIES];
        let (t, o, tally) =
            kept.get_or_init(|| (tool.into(), outcome, metrics.tool_calls.tally(&labels)));
        if std::ptr::eq(*o, outcome) && **t == *tool {
            return tally.inc();
        }
        metrics.tool_calls.inc(&labels);
    }

    /// Records how long the upstream took to answer, in `upstream_latency`.
    pub fn latency(&self, metrics: &Metrics, took: Duration) {
        let latency = &metrics.upstream_latency;
        let buckets = (self.latency).get_or_init(|| latency.buckets(&self.upstream));
        buckets.record(took);
    }
}

/// Method names as metric labels: the MCP ones as they are, anything else as `other`, so a
/// client cannot mint series.
pub fn method_label(method: Option<&str>) -> &'static str {
    const KNOWN: &[&str] = &[
        "initialize",
        "ping",
        "tools/list",
        "tools/call",
        "resources/list",
        "resources/read",
        "resources/templates/list",
        "resources/subscribe",
        "resources/unsubscribe",
        "prompts/list",
        "prompts/get",
        "completion/complete",
        "logging/setLevel",
        "server/discover",
        "subscriptions/listen",
        "tasks/get",
        "tasks/result",
        "tasks/list",
        "tasks/cancel",
        "tasks/update",
        "notifications/initialized",
        "notifications/cancelled",
        "notifications/progress",
        "notifications/roots/list_changed",
    ];
    match method {
        None => "(response)",
        Some(m) => KNOWN.iter().find(|k| **k == m).copied().unwrap_or("other"),
    }
}

/// Spans that never reached the trace collector, by why (read at scrape time).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SpansLost {
    /// The export queue was full.
    pub queue_full: u64,
    /// The collector could not be reached, or did not answer in time.
    pub unreachable: u64,
    /// The collector answered with an error status.
    pub refused: u64,
}

impl SpansLost {
    fn render(&self, out: &mut String) {
        let _ = writeln!(
            out,
            "# HELP toolgate_spans_lost_total Trace spans that never reached the collector, by reason.\n# TYPE toolgate_spans_lost_total counter"
        );
        for (reason, n) in [
            ("queue_full", self.queue_full),
            ("unreachable", self.unreachable),
            ("refused", self.refused),
        ] {
            let _ = writeln!(out, "toolgate_spans_lost_total{{reason=\"{reason}\"}} {n}");
        }
    }
}

impl Metrics {
    /// The Prometheus text exposition, with the catalog gauges and the bytes of requests
    /// held read at scrape time, and the spans lost when traces are exported.
    pub fn render(
        &self,
        catalog: CatalogGauges,
        held: HeldGauges,
        spans_lost: Option<SpansLost>,
    ) -> String {
        let CatalogGauges {
            scopes,
            schemas,
            bytes,
            compile_failures,
        } = catalog;
        let mut out = String::new();
        for c in [
            &self.requests,
            &self.tool_calls,
            &self.violations,
            &self.rewrites,
            &self.shared_state_unavailable,
        ] {
            c.render(&mut out);
        }
        self.upstream_latency.render(&mut out);
        self.children.render(&mut out);
        self.sessions.render(&mut out);
        let _ = writeln!(
            out,
            "# HELP toolgate_requests_in_flight HTTP requests in service.\n# TYPE toolgate_requests_in_flight gauge\ntoolgate_requests_in_flight {}",
            IN_FLIGHT.level()
        );
        let _ = writeln!(
            out,
            "# HELP toolgate_request_bytes_held Bytes held for requests at once: their bodies, and apart their answers until they have gone (each up to limits.max_request_bytes_in_flight).\n# TYPE toolgate_request_bytes_held gauge\ntoolgate_request_bytes_held{{part=\"body\"}} {}\ntoolgate_request_bytes_held{{part=\"answer\"}} {}",
            held.bodies, held.answers
        );
        let _ = writeln!(
            out,
            "# HELP toolgate_answers_waiting_for_room Servers' answers waiting for room among the bytes held for requests (limits.max_request_bytes_in_flight).\n# TYPE toolgate_answers_waiting_for_room gauge\ntoolgate_answers_waiting_for_room {}",
            held.answers_waiting
        );
        let (open, max) = held.upstream_connections;
        let _ = writeln!(
            out,
            "# HELP toolgate_upstream_connections Connections open to servers, every server's together, kept ones included.\n# TYPE toolgate_upstream_connections gauge\ntoolgate_upstream_connections {open}\n# HELP toolgate_upstream_connections_max Connections to servers that may be open at once: a quarter of the descriptor limit.\n# TYPE toolgate_upstream_connections_max gauge\ntoolgate_upstream_connections_max {max}"
        );
        let _ = writeln!(
            out,
            "# HELP toolgate_build_info The running build: its version.\n# TYPE toolgate_build_info gauge\ntoolgate_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        process::render(&mut out);
        if let Some(lost) = spans_lost {
            lost.render(&mut out);
        }
        let _ = writeln!(
            out,
            "# HELP toolgate_catalog_scopes Sessions and credentials whose tool catalogs are cached.\n# TYPE toolgate_catalog_scopes gauge\ntoolgate_catalog_scopes {scopes}"
        );
        let _ = writeln!(
            out,
            "# HELP toolgate_schema_compile_failures_total Distinct tool schemas that did not compile.\n# TYPE toolgate_schema_compile_failures_total counter\ntoolgate_schema_compile_failures_total {compile_failures}"
        );
        let _ = writeln!(
            out,
            "# HELP toolgate_catalog_schemas Distinct compiled schemas in use.\n# TYPE toolgate_catalog_schemas gauge\ntoolgate_catalog_schemas {schemas}"
        );
        let _ = writeln!(
            out,
            "# HELP toolgate_catalog_bytes Bytes the tool catalogs are counted as (limits.max_catalog_bytes).\n# TYPE toolgate_catalog_bytes gauge\ntoolgate_catalog_bytes {bytes}"
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_render_and_cap_their_series() {
        let c = Counter::new("t_total", "help", &["a", "b"]);
        c.inc(&["x", "y\"z"]);
        c.inc(&["x", "y\"z"]);
        for i in 0..MAX_SERIES + 10 {
            c.inc(&["n", &i.to_string()]);
        }
        let mut out = String::new();
        c.render(&mut out);
        assert!(out.contains("t_total{a=\"x\",b=\"y\\\"z\"} 2\n"), "{out}");
        assert!(
            out.contains("t_total{a=\"other\",b=\"other\"} 11\n"),
            "{out}"
        );
    }

    #[test]
    fn an_upstreams_kept_series_count_as_their_labels_say() {
        let (m, up) = (Metrics::default(), UpstreamSeries::new("u".into()));
        // More kinds of message than the upstream keeps, each counted twice.
        let outcomes: Vec<&'static str> = (0..KEPT_REQUEST_SERIES + 5)
            .map(|i| &*Box::leak(format!("o{i}").into_boxed_str()))
            .collect();
        for o in outcomes.iter().chain(&outcomes) {
            up.request(&m, "ping", o);
        }
        // Two tools whose calls pick the same entry, and two outcomes of one tool.
        for (tool, outcome) in [
            ("a1b", "forwarded"),
            ("a2b", "forwarded"),
            ("a1b", "denied"),
        ] {
            up.tool_call(&m, tool, outcome);
            up.tool_call(&m, tool, outcome);
        }
        up.latency(&m, Duration::from_millis(3));
        up.latency(&m, Duration::from_millis(30));
        let out = m.render(CatalogGauges::default(), HeldGauges::default(), None);
        for o in &outcomes {
            let line = format!(
                "toolgate_requests_total{{upstream=\"u\",method=\"ping\",outcome=\"{o}\"}} 2\n"
            );
            assert!(out.contains(&line), "{line} in {out}");
        }
        for (tool, outcome) in [
            ("a1b", "forwarded"),
            ("a2b", "forwarded"),
            ("a1b", "denied"),
        ] {
            let line = format!(
                "toolgate_tool_calls_total{{upstream=\"u\",tool=\"{tool}\",outcome=\"{outcome}\"}} 2\n"
            );
            assert!(out.contains(&line), "{line} in {out}");
        }
        assert!(
            out.contains("toolgate_upstream_latency_seconds_count{upstream=\"u\"} 2\n"),
            "{out}"
        );
    }

    #[test]
    fn histograms_are_cumulative() {
        let h = Histogram::new("lat", "help");
        h.buckets("u").record(Duration::from_millis(3));
        h.buckets("u").record(Duration::from_secs(2));
        let mut out = String::new();
        h.render(&mut out);
        assert!(
            out.contains("lat_bucket{upstream=\"u\",le=\"0.005\"} 1\n"),
            "{out}"
        );
        assert!(
            out.contains("lat_bucket{upstream=\"u\",le=\"2.5\"} 2\n"),
            "{out}"
        );
        assert!(out.contains("lat_count{upstream=\"u\"} 2\n"), "{out}");
    }
}
