//! A bounded load test on loopback: 200 concurrent sessions, each mixing valid, coerced,
//! invalid and pass-through calls and an SSE stream. Every request gets exactly one correct
//! answer (nothing lost, duplicated or crossed between sessions), the catalogs empty again
//! when the sessions end, and memory stays bounded. Fixed counts; it stops by itself.

use crate::common;
use common::*;
use serde_json::json;
use toolgate::demo::Options;

fn rss_mib(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

fn gauge(metrics: &str, name: &str) -> u64 {
    metrics
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name} ")))
        .and_then(|v| v.parse().ok())
        .unwrap_or(u64::MAX)
}

#[tokio::test]
async fn two_hundred_sessions_mixed_traffic() {
    let (demo, tg, _) = demo_behind_toolgate(Options::default(), None).await;
    let url = tg.url();
    let baseline = rss_mib(tg.pid());
    let mut tasks = Vec::new();
    for n in 0..200i64 {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let s = open_session(&url).await;
            let mut answers = 0;
            for k in 0..3i64 {
                let base = 10 * k;
                let a = post(&url, Some(&s), call(base + 1, "add", json!({"a": n, "b": k}))).await.json();
                assert_eq!(a["id"], base + 1);
                assert_eq!(result_text(&a), (n + k).to_string(), "the answer for this session, not another");
                let a = post(&url, Some(&s), call(base + 2, "add", json!({"a": n.to_string(), "b": 1}))).await.json();
                assert_eq!(result_text(&a), (n + 1).to_string());
                let a = post(&url, Some(&s), call(base + 3, "book_flight", json!({"origin": "x"}))).await.json();
                assert_eq!((a["id"].clone(), a["result"]["isError"].clone()), (json!(base + 3), json!(true)));
                let a = post(&url, Some(&s), json!({"jsonrpc": "2.0", "id": base + 4, "method": "ping"}).to_string()).await.json();
                assert_eq!(a, json!({"jsonrpc": "2.0", "id": base + 4, "result": {}}));
                let sse = json!({"jsonrpc": "2.0", "id": base + 5, "method": "tools/call", "params": {"name": "countdown", "arguments": {"steps": 2, "intervalMs": 0}, "_meta": {"progressToken": n}}});
                let msgs = post(&url, Some(&s), sse.to_string()).await.messages();
                assert_eq!(msgs.len(), 3, "two progress notifications and one answer");
                assert!(msgs[..2].iter().all(|m| m["params"]["progressToken"] == n), "this session's progress only");
                assert_eq!(msgs[2]["id"], base + 5);
                answers += 5;
            }
            let r = request(http::Method::DELETE, &url, &[("mcp-session-id", &s)], "").await;
            assert_eq!(r.status, 200);
            answers
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap();
    }
    assert_eq!(total, 200 * 15, "every request answered once");
    // The upstream saw exactly the forwarded calls: valid and coerced and SSE, never the invalid.
    let calls = demo.calls();
    assert_eq!(calls.len(), 200 * 3 * 3);
    assert!(calls.iter().all(|c| c["params"]["name"] != "book_flight"));
    let m = tg.admin_get("/metrics").await.text();
    assert_eq!(
        gauge(&m, "toolgate_catalog_scopes"),
        0,
        "every session's catalog dropped at DELETE"
    );
    let grown = rss_mib(tg.pid()) - baseline;
    assert!(
        grown < 64.0,
        "memory stays bounded: grew {grown:.1} MiB over 3,000 requests"
    );
}
