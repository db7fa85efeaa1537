//! The MCP conformance suite's server scenarios (npm `@modelcontextprotocol/conformance`,
//! both requirement sets) against real servers, directly and through toolgate: in front of the
//! server's HTTP endpoint (`serve --upstream`) and in front of the same server launched over
//! stdio (`serve -- CMD`). Every check that passes directly must pass through toolgate
//! (docs/contract.md, "Conformance").
//!
//! Two divergences are the contract's, and each is verified rather than assumed:
//! - a call to a tool the server does not list is answered by toolgate with `-32602 Unknown
//!   tool` (the spec's protocol error); some servers answer such a call with a result, which
//!   passes a few checks that only look at the result's shape;
//! - `serve -- CMD` answers a request that brings no messages before its answer as JSON,
//!   which the suite reports as "SSE not applicable" where the server directly had streamed;
//! - in front of a handshake-only server, the era bridge does not offer list-change and
//!   subscription capabilities it cannot deliver, and the suite skips the checks that need
//!   them as not applicable.

use crate::common;
use common::Toolgate;
use common::peers::{peers, server_everything_http};
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;
use tokio::process::Command;

const REQUIREMENTS: [&str; 2] = ["2025-11-25", "2026-07-28"];

/// One at a time: several checks measure the server's timing (log and progress delays),
/// which two suites sharing two cores would blur.
static ONE_SUITE: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[derive(Debug)]
struct Check {
    status: String,
    text: String,
}

/// Every check of one suite run, by (scenario, check id).
struct Run {
    checks: BTreeMap<(String, String), Check>,
    /// The tool names the server listed (from the `tools-list` check's details).
    listed: BTreeSet<String>,
}

impl Run {
    fn answered_json(&self, scenario: &str) -> bool {
        self.checks
            .iter()
            .any(|((s, _), c)| s == scenario && c.status == "INFO" && is_sse_optional(&c.text))
    }
}

fn is_sse_optional(text: &str) -> bool {
    text.contains("JSON instead of SSE") || text.contains("SSE streaming is optional")
}

fn unknown_tool(text: &str) -> Option<&str> {
    let rest = &text[text.find("Unknown tool: ")? + "Unknown tool: ".len()..];
    rest.split(|c: char| c.is_whitespace() || c == '.').next()
}

/// The scenario's name from its output folder, `server-{scenario}-{timestamp}` where the
/// timestamp is `YYYY-MM-DDTHH-MM-SS-mmmZ` (six dash-separated parts).
fn scenario_of(folder: &str) -> String {
    let parts: Vec<&str> = folder.split('-').collect();
    parts[..parts.len().saturating_sub(6)].join("-")
}

async fn suite(url: &str, requirements: &str) -> Run {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let out = scratch_dir(&format!("conformance-{requirements}"));
    let path = format!(
        "{}:{}",
        p.node_22.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let mut suite = Command::new(p.node_22.join("node"))
        .arg(&p.conformance)
        .args(["server", "--url", url, "--requirements", requirements])
        .arg("-o")
        .arg(&out)
        .env("PATH", path)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("the conformance suite starts");
    tokio::time::timeout(Duration::from_secs(300), suite.wait())
        .await
        .expect("the suite finishes within 5 minutes")
        .unwrap();
    let mut checks = BTreeMap::new();
    let mut listed = BTreeSet::new();
    for entry in std::fs::read_dir(&out).unwrap() {
        let entry = entry.unwrap();
        let folder = entry.file_name().to_string_lossy().into_owned();
        let Ok(text) = std::fs::read_to_string(entry.path().join("checks.json")) else {
            continue;
        };
        let scenario = scenario_of(&folder);
        for c in serde_json::from_str::<Vec<Value>>(&text).unwrap() {
            let id = c["id"].as_str().unwrap().to_string();
            if id == "tools-list"
                && let Some(names) = c["details"]["tools"].as_array()
            {
                listed.extend(names.iter().filter_map(|n| n.as_str().map(String::from)));
            }
            let text = format!(
                "{} {}",
                c["errorMessage"].as_str().unwrap_or(""),
                c["details"]
            );
            let status = c["status"].as_str().unwrap().to_string();
            checks.insert((scenario.clone(), id), Check { status, text });
        }
    }
    let _ = std::fs::remove_dir_all(&out);
    assert!(
        checks.len() > 40,
        "the suite against {url} ({requirements}) reported only {} checks",
        checks.len()
    );
    Run { checks, listed }
}

/// What passed directly and does not pass through toolgate, beyond the two divergences the
/// contract names (each confirmed here).
fn lost(direct: &Run, through: &Run) -> Vec<String> {
    let mut lost = Vec::new();
    for (key, d) in &direct.checks {
        if d.status != "SUCCESS" {
            continue;
        }
        let fine = match through.checks.get(key) {
            Some(t) if t.status == "SUCCESS" => true,
            Some(t) if unknown_tool(&t.text).is_some_and(|n| !direct.listed.contains(n)) => true,
            Some(t) if t.status == "INFO" => is_sse_optional(&t.text),
            // The bridge offers no capability it cannot deliver, and the suite then finds the
            // check not applicable (docs/contract.md §5, "Eras bridged").
            Some(t) => t.status == "SKIPPED" && t.text.contains("is not applicable"),
            None => through.answered_json(&key.0),
        };
        if !fine {
            let t = through.checks.get(key);
            lost.push(format!(
                "{} / {}: {} {}",
                key.0,
                key.1,
                t.map_or("missing", |t| t.status.as_str()),
                t.map_or("", |t| t.text.as_str())
                    .chars()
                    .take(300)
                    .collect::<String>()
            ));
        }
    }
    lost
}

fn passed(run: &Run) -> usize {
    run.checks
        .values()
        .filter(|c| c.status == "SUCCESS")
        .count()
}

/// Runs every requirement set against `direct_url`, then through both toolgates, and fails
/// with every lost check at once.
async fn compare(name: &str, direct_url: &str, upstream: &Toolgate, command: &Toolgate) {
    let _one = ONE_SUITE.lock().await;
    let mut report = Vec::new();
    for requirements in REQUIREMENTS {
        let direct = suite(direct_url, requirements).await;
        for (mode, tg) in [("serve --upstream", upstream), ("serve -- CMD", command)] {
            let through = suite(&tg.url(), requirements).await;
            eprintln!(
                "{name} {requirements}: {} checks pass directly, {} through {mode}",
                passed(&direct),
                passed(&through)
            );
            for l in lost(&direct, &through) {
                report.push(format!("{requirements} through {mode}: {l}"));
            }
        }
    }
    assert!(
        report.is_empty(),
        "{name}: checks that pass directly and not through toolgate:\n{}",
        report.join("\n")
    );
}

fn scratch_dir(what: &str) -> PathBuf {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "toolgate-{what}-{}-{}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn fixture(p: &Path) -> String {
    p.join("conformance_server.py").display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_server_passes_through_toolgate_as_it_passes_directly() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let server = common::peers::python_http("conformance_server.py", &["http"]).await;
    let url = server.url.clone();
    let upstream = Toolgate::serve(&url, None).await;
    let command = [
        p.python.display().to_string(),
        fixture(&p.fixtures),
        "stdio".into(),
    ];
    let in_front = Toolgate::in_front_of(&command, None).await;
    compare("the Python SDK 2.3 fixture", &url, &upstream, &in_front).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_passes_through_toolgate_as_it_passes_directly() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let server = server_everything_http().await;
    let url = server.url.clone();
    let upstream = Toolgate::serve(&url, None).await;
    let command = [p.server_everything.display().to_string(), "stdio".into()];
    let in_front = Toolgate::in_front_of(&command, None).await;
    compare("server-everything", &url, &upstream, &in_front).await;
}

#[test]
fn scenario_names_lose_only_their_timestamp() {
    assert_eq!(
        scenario_of("server-tools-call-simple-text-2026-11-22T15-15-03-441Z"),
        "server-tools-call-simple-text"
    );
    assert_eq!(
        unknown_tool("Failed: Unknown tool: greet. Did"),
        Some("greet")
    );
    assert_eq!(unknown_tool("no such thing"), None);
}
