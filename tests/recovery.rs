//! What real SDK peers ran into through toolgate, kept fixed: coercion that rewrote the
//! arguments it did not coerce, an upstream's refusal of the request itself hidden as a tool
//! error, and `toolgate stdio` leaving its server behind on SIGTERM.

mod common;

use common::peers::peers;
use common::scripted::{Script, Scripted, open_tool};
use common::stdio_gate::StdioGate;
use common::*;
use serde_json::json;
use std::time::Duration;

#[tokio::test]
async fn coercion_rewrites_only_the_arguments_it_coerced() {
    let tool = json!({"name": "t", "inputSchema": {"type": "object", "properties": {
        "a": {"type": "number"}, "b": {"type": "integer"}, "c": {"type": "number"}}}});
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"t","arguments":{"a":123456789012345678901234567890,"b":"1","c":1.50}}}"#;
    // serve --upstream.
    let (up, seen) = Scripted::new(vec![tool.clone()]).spawn().await;
    let tg = Toolgate::serve(&up, None).await;
    post(&tg.url(), None, body).await;
    // stdio --upstream.
    let (up2, seen2) = Scripted::new(vec![tool]).spawn().await;
    let mut g = StdioGate::start_args(vec!["stdio".into(), "--upstream".into(), up2]);
    g.initialize().await;
    g.send(body).await;
    g.recv().await;
    for seen in [&seen, &seen2] {
        let raw: Vec<String> = seen
            .seen_raw
            .lock()
            .unwrap()
            .iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .filter(|b| b.contains("tools/call"))
            .collect();
        assert_eq!(raw.len(), 1, "{raw:?}");
        assert!(
            raw[0].contains(r#""arguments":{"a":123456789012345678901234567890,"b":1,"c":1.50}"#),
            "only b changed: {}",
            raw[0]
        );
    }
}

#[tokio::test]
async fn an_upstream_refusing_the_request_itself_is_relayed_as_it_came() {
    // The TypeScript SDK's answer to a request without a valid session.
    let refusal = r#"{"jsonrpc":"2.0","error":{"code":-32000,"message":"Bad Request: No valid session ID provided"},"id":null}"#;
    let (up, _) = Scripted::new(vec![open_tool("echo")])
        .script(
            "echo",
            Script::Raw {
                status: 400,
                content_type: "application/json",
                body: refusal,
            },
        )
        .spawn()
        .await;
    let tg = Toolgate::serve(&up, None).await;
    let r = post(&tg.url(), None, call(1, "echo", json!({}))).await;
    assert_eq!(r.status, 400);
    assert_eq!(r.text(), refusal, "not turned into a tool error");
    // A 200 error that names the request is still the tool's answer, rewritten.
    let (up, _) = Scripted::new(vec![open_tool("echo")])
        .script(
            "echo",
            Script::Error(json!({"code": -32603, "message": "disk full"})),
        )
        .spawn()
        .await;
    let tg = Toolgate::serve(&up, None).await;
    let a = post(&tg.url(), None, call(2, "echo", json!({})))
        .await
        .json();
    assert_eq!(a["result"]["isError"], true, "{a}");
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "))
}

#[tokio::test]
async fn toolgate_stdio_stops_its_server_on_sigterm() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    for extra in [None, Some("--ignore-sigterm")] {
        let mut cmd = vec![
            p.python.display().to_string(),
            p.fixtures.join("stdio_server.py").display().to_string(),
        ];
        cmd.extend(extra.map(String::from));
        let (mut g, _) = StdioGate::start(&cmd, None);
        g.initialize().await;
        let logs = g.logs_when(|l| l.contains("fixture pid")).await;
        let server: u32 = logs
            .split("fixture pid ")
            .nth(1)
            .and_then(|r| r.split_whitespace().next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("{logs}"));
        assert!(alive(server));
        let toolgate = g.child.id().unwrap();
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(toolgate as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let status = tokio::time::timeout(Duration::from_secs(5), g.child.wait())
            .await
            .expect("toolgate ends within 5 s of SIGTERM")
            .unwrap();
        assert_eq!(status.code(), Some(0), "{extra:?}");
        for _ in 0..50 {
            if !alive(server) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(!alive(server), "{extra:?}: the server is gone too");
    }
}
