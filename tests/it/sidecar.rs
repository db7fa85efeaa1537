//! `toolgate serve -- CMD`: HTTP clients in front of a stdio server, one child per session.
//! Real child processes; every test checks that no child outlives what it belongs to.

use crate::common;
use common::peers::peers;
use common::processes::{children_with, keepers_of, marker, wait_for};
use common::*;
use serde_json::json;
use std::time::Duration;

async fn sidecar(marker: &str, config: Option<&str>) -> Toolgate {
    let command = crate::common::peers::stdio_fixture(&[marker]).await;
    Toolgate::in_front_of(&command, config).await
}

#[tokio::test]
async fn fifty_sessions_each_with_its_own_child_and_no_cross_talk() {
    let m = marker();
    let tg = sidecar(&m, None).await;
    let url = tg.url();
    let mut tasks = Vec::new();
    for n in 0..50i64 {
        let url = url.clone();
        tasks.push(tokio::spawn(async move {
            let s = open_session(&url).await;
            let who = post(&url, Some(&s), call(1, "whoami", json!({}))).await.json();
            for k in 0..3 {
                let a = post(&url, Some(&s), call(2 + k, "add", json!({"a": n, "b": k}))).await.json();
                assert_eq!(a, json!({"jsonrpc": "2.0", "id": 2 + k, "result": {"content": [{"type": "text", "text": (n + k).to_string()}]}}));
            }
            let bad = post(&url, Some(&s), call(9, "add", json!({"a": "x", "b": 1}))).await.json();
            assert_eq!(bad["result"]["isError"], true);
            (s, result_text(&who))
        }));
    }
    let mut sessions = Vec::new();
    let mut pids = std::collections::HashSet::new();
    for t in tasks {
        let (s, pid) = t.await.unwrap();
        sessions.push(s);
        pids.insert(pid);
    }
    assert_eq!(pids.len(), 50, "one child per session");
    assert_eq!(children_with(&m), 50);
    assert_eq!(keepers_of(tg.pid()), 50, "a keeper for each child's group");
    for s in &sessions {
        let r = request(http::Method::DELETE, &url, &[("mcp-session-id", s)], "").await;
        assert_eq!(r.status, 200);
    }
    assert!(
        wait_for(|| children_with(&m) == 0 && keepers_of(tg.pid()) == 0).await,
        "every child stopped after DELETE, and its group's keeper"
    );
    let r = post(
        &url,
        Some(&sessions[0]),
        call(1, "add", json!({"a": 1, "b": 1})),
    )
    .await;
    assert_eq!(r.status, 404, "an ended session is gone");
}

#[tokio::test]
async fn a_crash_ends_one_session_and_spares_the_others() {
    let m = marker();
    let tg = sidecar(&m, None).await;
    let (a, b) = (open_session(&tg.url()).await, open_session(&tg.url()).await);
    let r = post(&tg.url(), Some(&a), call(1, "crash", json!({})))
        .await
        .json();
    assert_eq!(r["result"]["isError"], true);
    assert!(
        result_text(&r).contains("the tool server exited with exit status: 3 before answering"),
        "{r}"
    );
    let r = post(&tg.url(), Some(&b), call(2, "add", json!({"a": 1, "b": 2})))
        .await
        .json();
    assert_eq!(result_text(&r), "3");
    assert!(wait_for(|| children_with(&m) == 1 && keepers_of(tg.pid()) == 1).await);
    let r = post(&tg.url(), Some(&a), call(3, "add", json!({"a": 1, "b": 2}))).await;
    assert_eq!(
        r.status, 404,
        "the crashed session is over; the client starts a new one"
    );
    let c = open_session(&tg.url()).await;
    let r = post(&tg.url(), Some(&c), call(4, "add", json!({"a": 2, "b": 2})))
        .await
        .json();
    assert_eq!(result_text(&r), "4", "a fresh child for the next session");
}

/// A client that crashes its server with every call it makes writes no line for each: a
/// child's exit is said at a rate, once per 10 s for each kind (a session's child, the
/// shared one), with how many went unsaid.
#[tokio::test]
async fn a_server_crashed_again_and_again_is_said_once() {
    let m = marker();
    let tg = sidecar(&m, None).await;
    let crashed = |id: i64| {
        let why = "could not reach the tool server: the tool server exited with exit status: 3 before answering";
        json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": format!("The tool server is unavailable: {why}. Retrying in a moment may help if the server is restarting.")}],
            "isError": true,
            "_meta": {"toolgate/upstream": {"code": "upstream_unavailable", "reason": why}}}})
    };
    let url = tg.url();
    for n in 0..3 {
        let s = open_session(&url).await;
        let r = post(&url, Some(&s), call(n, "crash", json!({}))).await;
        assert_eq!(r.json(), crashed(n));
        let r = post(&url, None, call(10 + n, "crash", json!({}))).await;
        assert_eq!(r.json(), crashed(10 + n));
    }
    assert!(wait_for(|| children_with(&m) == 0).await);
    let said = |what: &str| {
        let logs = tg.logs();
        logs.lines()
            .filter(|l| l.contains("WARN") && l.contains(what))
            .count()
    };
    tg.logs_when(|l| l.contains("its session ends") && l.contains("starts another"))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(said("its session ends"), 1, "{}", tg.logs());
    assert_eq!(
        said("the next request without a session starts another"),
        1,
        "{}",
        tg.logs()
    );
}

/// A server that ends before it says anything (it cannot run: a missing setting, a crash as
/// it loads) is not started again for every request: after each such end the next start
/// waits, 100 ms and then twice as long each time, and the requests meanwhile are told why at
/// once. Without the wait, each of these requests would start a process.
#[tokio::test]
async fn a_server_that_cannot_run_is_started_again_after_a_growing_wait() {
    let python = crate::common::peers::stdio_fixture(&[]).await.remove(0);
    let command = [python, "-c".into(), "import sys; sys.exit(3)".into()];
    let tg = Toolgate::in_front_of(&command, None).await;
    let url = tg.url();
    let unavailable = |id: i64, reason: &str| {
        let text = format!(
            "The tool server is unavailable: {reason}. Retrying in a moment may help if the server is restarting."
        );
        json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": text}], "isError": true,
            "_meta": {"toolgate/upstream": {"code": "upstream_unavailable", "reason": reason}}}})
    };
    let started = std::time::Instant::now();
    let mut reasons = Vec::new();
    let mut id = 0;
    while started.elapsed() < Duration::from_millis(1500) {
        id += 1;
        let a = post(&url, None, call(id, "add", json!({"a": 1, "b": 2})))
            .await
            .json();
        let reason = a["result"]["_meta"]["toolgate/upstream"]["reason"].as_str();
        let reason = reason.unwrap_or_default().to_owned();
        assert_eq!(a, unavailable(id, &reason));
        reasons.push(reason);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let starts = tg.logs().matches("started the tool server").count();
    assert!(
        (2..=6).contains(&starts) && id >= 20,
        "{starts} starts for {id} requests: {reasons:#?}"
    );
    let exited = "the tool server exited with exit status: 3";
    let first = format!(
        "could not reach the tool server: initializing the tool server: could not reach the tool server: {exited} before answering"
    );
    assert_eq!(reasons[0], first);
    let waited = format!(
        "could not reach the tool server: {exited} before it said anything (1 in a row); toolgate starts it again in "
    );
    let (wait, ms) = reasons[1].split_at(waited.len());
    assert_eq!(wait, waited);
    let ms: u64 = ms.trim_end_matches(" ms").parse().unwrap();
    assert!((1..=100).contains(&ms), "{reasons:#?}");
}

#[tokio::test]
async fn stateless_requests_share_one_child_with_ids_remapped() {
    let m = marker();
    let tg = sidecar(&m, None).await;
    let url = tg.url();
    let mut tasks = Vec::new();
    for n in 0..20i64 {
        let url = url.clone();
        // Every client uses id 1: without remapping, the answers would cross.
        tasks.push(tokio::spawn(async move {
            (
                n,
                post(&url, None, call(1, "add", json!({"a": n, "b": 100})))
                    .await
                    .json(),
            )
        }));
    }
    for t in tasks {
        let (n, a) = t.await.unwrap();
        assert_eq!(
            a,
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": (n + 100).to_string()}]}})
        );
    }
    assert_eq!(children_with(&m), 1, "one shared child");
}

/// A client may send its JSON pretty-printed, over several lines, as HTTP allows; a stdio
/// server reads one message a line. Each reaches the child as one line, in a session and in
/// the shared child alike, and is answered.
#[tokio::test]
async fn a_message_sent_over_several_lines_reaches_a_stdio_server_as_one() {
    let m = marker();
    let tg = sidecar(&m, None).await;
    let url = tg.url();
    let pretty = |v: serde_json::Value| serde_json::to_string_pretty(&v).unwrap();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let r = post(&url, None, pretty(init)).await;
    assert_eq!(r.json()["result"]["serverInfo"]["name"], "stdio-fixture");
    let s = r.headers["mcp-session-id"].to_str().unwrap().to_owned();
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(&url, Some(&s), pretty(note)).await.status, 202);
    let sum = |id: i64, text: &str| json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": text}]}});
    let add = |id, args| pretty(serde_json::from_str(&call(id, "add", args)).unwrap());
    let a = post(&url, Some(&s), add(1, json!({"a": 2, "b": 3}))).await;
    assert_eq!(a.json(), sum(1, "5"));
    let a = post(&url, Some(&s), add(2, json!({"a": "10", "b": 3}))).await;
    assert_eq!(a.json(), sum(2, "13"), "coerced, and sent as one line");
    let a = post(&url, None, add(3, json!({"a": 1, "b": 1}))).await;
    assert_eq!(a.json(), sum(3, "2"), "the shared child");
}

#[tokio::test]
async fn limits_idle_reaping_and_the_get_stream() {
    let m = marker();
    let tg = sidecar(
        &m,
        Some("[stdio]\nmax_sessions = 2\nidle_timeout = \"1500ms\"\n"),
    )
    .await;
    let a = open_session(&tg.url()).await;
    let _b = open_session(&tg.url()).await;
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let r = post(&tg.url(), None, init.to_string()).await;
    assert_eq!(r.status, 503);
    assert!(
        r.json()["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with("Too many sessions")
    );

    // What the child sends on its own arrives on the session's GET stream.
    let mut body = get_stream(&tg.url(), &a).await;
    let r = post(&tg.url(), Some(&a), call(1, "notify", json!({})))
        .await
        .json();
    assert_eq!(result_text(&r), "notified");
    let text = next_frame(&mut body, Duration::from_secs(5)).await;
    assert_eq!(
        sse_messages(&text),
        vec![
            json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hello from the server"}})
        ]
    );
    drop(body);

    // Idle sessions end and their children stop.
    assert!(
        wait_for(|| children_with(&m) == 0).await,
        "idle children reaped"
    );
    let r = post(&tg.url(), Some(&a), call(2, "add", json!({"a": 1, "b": 1}))).await;
    assert_eq!(r.status, 404);
    let logs = tg.logs_when(|l| l.contains("idle for")).await;
    assert!(logs.contains("idle for"), "{logs}");
}

#[tokio::test]
async fn server_everything_over_stdio_behind_http() {
    let se = tokio::task::spawn_blocking(|| peers().server_everything.display().to_string())
        .await
        .unwrap();
    let tg = Toolgate::start_raw(
        [
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
            "--",
            &se,
            "stdio",
        ]
        .map(String::from)
        .to_vec(),
    )
    .await;
    let s = open_session(&tg.url()).await;
    let a = post(
        &tg.url(),
        Some(&s),
        call(1, "get-sum", json!({"a": "x", "b": 2})),
    )
    .await
    .json();
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/a": "expected a number, got string \"x\""})
    );
    let a = post(
        &tg.url(),
        Some(&s),
        call(2, "get-sum", json!({"a": 2, "b": 2})),
    )
    .await
    .json();
    assert_eq!(result_text(&a), "The sum of 2 and 2 is 4.");
    let r = tg.admin_get("/readyz").await;
    assert_eq!(r.status, 200, "{}", r.text());
    // What went to the child (initialize, initialized, the valid call) is timed as it is in
    // front of an HTTP server; the call toolgate answered is not.
    let metrics = tg.admin_get("/metrics").await.text();
    assert!(
        metrics.contains("toolgate_upstream_latency_seconds_count{upstream=\"default\"} 3"),
        "{metrics}"
    );
}

/// The access log reads alike in front of a stdio server as in front of an HTTP one: the
/// tool of a call is named whether toolgate answers it (here in a session) or forwards it
/// (here to the shared child), and no argument value is logged.
#[tokio::test]
async fn the_access_log_names_the_tool_of_every_call() {
    let m = marker();
    let tg = sidecar(&m, Some("[log]\naccess = true\n")).await;
    let s = open_session(&tg.url()).await;
    let r = post(
        &tg.url(),
        Some(&s),
        call(1, "add", json!({"a": "SECRET-VALUE-7", "b": 2})),
    )
    .await
    .json();
    let problem = "expected an integer, got string \"SECRET-VALUE-7\"";
    assert_eq!(
        r,
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": format!("Invalid arguments for tool \"add\" (1 problem):\n- a: {problem} (parameter description: first)\nCorrect the arguments and call the tool again.")}],
            "isError": true,
            "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": "add",
                "parameter_errors": {"/a": problem}}}}})
    );
    let r = post(&tg.url(), None, call(2, "add", json!({"a": 1, "b": 2})))
        .await
        .json();
    assert_eq!(
        r,
        json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "3"}]}})
    );
    let logs = tg
        .logs_when(|l| l.matches("method=\"tools/call\"").count() >= 2)
        .await;
    let calls: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("method=\"tools/call\""))
        .collect();
    assert_eq!(calls.len(), 2, "{logs}");
    for (line, outcome) in calls.iter().zip(["answered", "forwarded"]) {
        for part in [
            "tool=\"add\"",
            &format!("outcome=\"{outcome}\""),
            "status=200",
        ] {
            assert!(line.contains(part), "{part} in {line}");
        }
    }
    assert!(!logs.contains("SECRET-VALUE-7"), "{logs}");
}

/// A session's request with a progress token is answered as one SSE stream: its progress,
/// then its answer, as server-everything answers it over HTTP. On the session's GET stream
/// the progress could reach the client after the answer, and a client that forgets a
/// request once answered (the TypeScript SDK's) would lose it.
#[tokio::test]
async fn a_sessions_progress_comes_before_its_answer_on_the_requests_stream() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let command = [p.server_everything.display().to_string(), "stdio".into()];
    let tg = Toolgate::in_front_of(&command, None).await;
    let s = open_session(&tg.url()).await;
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "trigger-long-running-operation", "arguments": {"duration": 1, "steps": 3},
        "_meta": {"progressToken": "p"}}});
    let r = post(&tg.url(), Some(&s), call.to_string()).await;
    assert_eq!(r.headers["content-type"], "text/event-stream");
    let progress = |n: i64| {
        json!({"jsonrpc": "2.0", "method": "notifications/progress",
               "params": {"progress": n, "total": 3, "progressToken": "p"}})
    };
    let answer = json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text",
        "text": "Long running operation completed. Duration: 1 seconds, Steps: 3."}]}});
    assert_eq!(
        r.messages(),
        vec![progress(1), progress(2), progress(3), answer]
    );
}

/// The sessions and children gauges follow what is open, as an operator watches them.
#[tokio::test]
async fn sessions_and_children_are_gauged() {
    let tg = sidecar("gauged", None).await;
    let url = tg.url();
    let a = open_session(&url).await;
    let _b = open_session(&url).await;
    let line = |text: &str, name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{name}{{upstream=\"default\"}} ")))
            .map(str::to_owned)
    };
    let text = tg.admin_get("/metrics").await.text();
    assert_eq!(
        line(&text, "toolgate_stdio_sessions").as_deref(),
        Some("toolgate_stdio_sessions{upstream=\"default\"} 2"),
        "{text}"
    );
    assert_eq!(
        line(&text, "toolgate_stdio_children").as_deref(),
        Some("toolgate_stdio_children{upstream=\"default\"} 2"),
        "{text}"
    );
    let r = request(http::Method::DELETE, &url, &[("mcp-session-id", &a)], "").await;
    assert_eq!(r.status, 200);
    let mut text = String::new();
    for _ in 0..100 {
        text = tg.admin_get("/metrics").await.text();
        if line(&text, "toolgate_stdio_children").as_deref()
            == Some("toolgate_stdio_children{upstream=\"default\"} 1")
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        line(&text, "toolgate_stdio_sessions").as_deref(),
        Some("toolgate_stdio_sessions{upstream=\"default\"} 1"),
        "{text}"
    );
    assert_eq!(
        line(&text, "toolgate_stdio_children").as_deref(),
        Some("toolgate_stdio_children{upstream=\"default\"} 1"),
        "{text}"
    );
}

/// A session whose client never opens a GET stream (many only POST): what its child sends on
/// its own is kept for one, up to 256 messages, the oldest dropped past that. The log says
/// so once, not once per message, and says how many when a stream opens at last; that stream
/// gets the newest 256.
#[tokio::test]
async fn a_session_without_a_get_stream_keeps_the_newest_and_says_so_once() {
    const KEPT: usize = 256;
    const SENT: usize = KEPT + 44;
    let m = marker();
    let tg = sidecar(&m, None).await;
    let s = open_session(&tg.url()).await;
    for id in 0..SENT as i64 {
        let r = post(&tg.url(), Some(&s), call(id, "notify", json!({}))).await;
        assert_eq!(
            r.json(),
            json!({"jsonrpc": "2.0", "id": id, "result": {"content": [{"type": "text", "text": "notified"}]}})
        );
    }
    let dropping = "no GET stream has taken the tool server's last 256 messages";
    let logs = tg.logs_when(|l| l.contains(dropping)).await;
    assert_eq!(logs.matches(dropping).count(), 1, "{logs}");

    let mut body = get_stream(&tg.url(), &s).await;
    let mut text = String::new();
    while !(text.ends_with("\n\n") && sse_messages(&text).len() >= KEPT) {
        text += &next_frame(&mut body, Duration::from_secs(5)).await;
    }
    let hello = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hello from the server"}});
    assert_eq!(sse_messages(&text), vec![hello; KEPT]);
    let logs = tg.logs_when(|l| l.contains("a GET stream opened")).await;
    let line = logs
        .lines()
        .find(|l| l.contains("a GET stream opened"))
        .unwrap_or_else(|| panic!("{logs}"));
    assert!(line.contains(&format!("dropped={}", SENT - KEPT)), "{line}");
    assert_eq!(logs.matches(dropping).count(), 1, "{logs}");
}

/// A server that writes faster than toolgate passes its messages on loses none of them to a
/// client that reads: 3,000 messages written at once reach the session's GET stream (its
/// log), the session's request stream (its progress) and, without a session, the shared
/// child's request stream, each in full and in order, the answer last.
#[tokio::test]
async fn a_client_that_reads_gets_all_a_fast_server_sends() {
    const COUNT: i64 = 3000;
    let m = marker();
    let command = crate::common::peers::stdio_fixture(&["--flood", &m]).await;
    let tg = Toolgate::in_front_of(&command, None).await;
    let (url, s) = (tg.url(), open_session(&tg.url()).await);
    let flood = |token: Option<&str>| {
        let mut params = json!({"name": "flood", "arguments": {"count": COUNT, "size": 100}});
        if let Some(t) = token {
            params["_meta"] = json!({"progressToken": t});
        }
        json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}).to_string()
    };
    let answer = json!({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "flooded"}]}});
    let data = "x".repeat(100);

    // The session's log, on its GET stream.
    let mut body = get_stream(&url, &s).await;
    assert_eq!(post(&url, Some(&s), flood(None)).await.json(), answer);
    let log = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": data}});
    assert_eq!(
        events(&mut body, COUNT as usize).await,
        vec![log; COUNT as usize]
    );

    // Progress, on the request's own stream: in a session, and without one.
    let progress = |t: &str| {
        let mut all: Vec<_> = (0..COUNT)
            .map(|n| json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": t, "progress": n, "total": COUNT, "message": data}}))
            .collect();
        all.push(answer.clone());
        all
    };
    let in_session = post(&url, Some(&s), flood(Some("p"))).await;
    assert_eq!(in_session.messages(), progress("p"));
    let shared = request(http::Method::POST, &url, &SESSIONLESS, flood(Some("q"))).await;
    assert_eq!(shared.messages(), progress("q"));
    let logs = tg.logs();
    assert!(!logs.contains("read nothing"), "{logs}");
    drop(tg);
    assert!(wait_for(|| children_with(&m) == 0).await);
}

/// The headers of a request without a session.
const SESSIONLESS: [(&str, &str); 3] = [
    ("content-type", "application/json"),
    ("accept", "application/json, text/event-stream"),
    ("mcp-protocol-version", "2025-11-25"),
];

/// A client that sends a request over a connection it never reads from, with a receive
/// buffer of 4 KiB: its stream fills at once.
async fn never_reading(url: &str, headers: &[(&str, &str)], body: &str) -> tokio::net::TcpStream {
    use tokio::io::AsyncWriteExt;
    let authority = url.trim_start_matches("http://").split('/').next().unwrap();
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.set_recv_buffer_size(4096).unwrap();
    let mut stream = socket.connect(authority.parse().unwrap()).await.unwrap();
    let method = if body.is_empty() { "GET" } else { "POST" };
    let mut head = format!(
        "{method} /mcp HTTP/1.1\r\nhost: {authority}\r\ncontent-length: {}\r\n",
        body.len()
    );
    for (name, value) in headers {
        head += &format!("{name}: {value}\r\n");
    }
    stream
        .write_all(format!("{head}\r\n{body}").as_bytes())
        .await
        .unwrap();
    stream
}

/// A client that reads nothing of what it asked for holds the others back for a moment
/// only, and loses only its own messages: without a session, its request's stream is given
/// up after 250 ms, and the next client's call is answered; in a session, a GET stream that
/// takes nothing for 5 s is closed, and what comes after is kept for the next one, which
/// gets the newest 256. Each is said in the log.
#[tokio::test]
async fn a_client_that_reads_nothing_holds_the_others_back_for_a_moment_only() {
    let m = marker();
    let command = crate::common::peers::stdio_fixture(&["--flood", &m]).await;
    let tg = Toolgate::in_front_of(&command, None).await;
    let url = tg.url();
    let flood = |token: bool| {
        let mut params = json!({"name": "flood", "arguments": {"count": 2000, "size": 10000}});
        if token {
            params["_meta"] = json!({"progressToken": "p"});
        }
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).to_string()
    };
    let sum =
        json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "5"}]}});

    let _stuck = never_reading(&url, &SESSIONLESS, &flood(true)).await;
    let next = request(
        http::Method::POST,
        &url,
        &SESSIONLESS,
        call(2, "add", json!({"a": 2, "b": 3})),
    );
    assert_eq!(next.await.json(), sum);
    let logs = tg.logs_when(|l| l.contains("for 250ms")).await;
    assert!(
        logs.contains("a client has read nothing of its request's stream for 250ms"),
        "{logs}"
    );

    let s = open_session(&url).await;
    let session = [
        ("accept", "text/event-stream"),
        ("mcp-session-id", s.as_str()),
    ];
    let _stuck_get = never_reading(&url, &session, "").await;
    let flooded = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "flooded"}]}});
    assert_eq!(post(&url, Some(&s), flood(false)).await.json(), flooded);
    let closed = "a client has read nothing of its session's GET stream for 5s";
    assert!(tg.logs_when(|l| l.contains(closed)).await.contains(closed));
    let mut body = get_stream(&url, &s).await;
    assert_eq!(events(&mut body, 256).await.len(), 256);
    drop(tg);
    assert!(wait_for(|| children_with(&m) == 0).await);
}

/// What a stream holds for a client that reads nothing is bounded in bytes, not only in
/// messages: 64 progress notifications of 1 MiB held for a stuck client raise toolgate's
/// peak memory by a few MiB over what the same flood read by a client took.
#[tokio::test]
async fn what_a_stream_holds_for_a_stuck_client_is_bounded_in_bytes() {
    let m = marker();
    let command = crate::common::peers::stdio_fixture(&["--flood", &m]).await;
    let tg = Toolgate::in_front_of(&command, None).await;
    let url = tg.url();
    let flood = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "flood", "arguments": {"count": 64, "size": 1 << 20},
        "_meta": {"progressToken": "p"}}})
    .to_string();
    let data = "x".repeat(1 << 20);
    let mut flooded: Vec<_> = (0..64)
        .map(|n| {
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
            "progressToken": "p", "progress": n, "total": 64, "message": data}})
        })
        .collect();
    flooded.push(json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "flooded"}]}}));
    let read = request(http::Method::POST, &url, &SESSIONLESS, flood.clone()).await;
    assert!(
        read.messages() == flooded,
        "every progress message, then the answer"
    );
    let after_read = common::processes::peak_mib(tg.pid());

    let _stuck = never_reading(&url, &SESSIONLESS, &flood).await;
    // Answered once the child has written the whole flood.
    let next = request(
        http::Method::POST,
        &url,
        &SESSIONLESS,
        call(2, "add", json!({"a": 2, "b": 3})),
    );
    let sum =
        json!({"jsonrpc": "2.0", "id": 2, "result": {"content": [{"type": "text", "text": "5"}]}});
    assert_eq!(next.await.json(), sum);
    let after_stuck = common::processes::peak_mib(tg.pid());
    assert!(
        after_stuck < after_read + 16,
        "peak {after_stuck} MiB held for a stuck client, {after_read} MiB for one that read"
    );
    drop(tg);
    assert!(wait_for(|| children_with(&m) == 0).await);
}

/// The messages of a stream's next `n` events.
async fn events(body: &mut hyper::body::Incoming, n: usize) -> Vec<serde_json::Value> {
    let (mut text, mut seen) = (String::new(), 0);
    while seen < n {
        // An event's end may fall between two frames.
        let from = text.len().saturating_sub(1);
        text += &next_frame(body, Duration::from_secs(10)).await;
        seen += text[from..].matches("\n\n").count();
    }
    sse_messages(&text)
}

/// What a session's child sends while no GET stream is open is kept up to 16 MiB as well as
/// up to 256 messages: a server that logs forty messages of 1 MiB each before the client
/// opens its stream leaves the newest that fit, then what comes live.
#[tokio::test]
async fn what_waits_for_a_get_stream_is_bounded_in_bytes() {
    let m = marker();
    let command = crate::common::peers::stdio_fixture(&["--flood", &m]).await;
    let tg = Toolgate::in_front_of(&command, None).await;
    let (url, s) = (tg.url(), open_session(&tg.url()).await);
    let size = 1 << 20;
    let flood = call(1, "flood", json!({"count": 40, "size": size}));
    let flooded = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "flooded"}]}});
    assert_eq!(post(&url, Some(&s), flood).await.json(), flooded);
    let data = "x".repeat(size);
    let log = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": data}});
    // As the fixture writes it (Python's separators).
    let written = format!(
        r#"{{"jsonrpc": "2.0", "method": "notifications/message", "params": {{"level": "info", "data": "{data}"}}}}"#
    );
    let kept = (16 << 20) / written.len();

    let mut body = get_stream(&url, &s).await;
    assert_eq!(
        post(&url, Some(&s), call(2, "notify", json!({})))
            .await
            .json()["id"],
        2
    );
    let hello = json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hello from the server"}});
    let mut expected = vec![log; kept];
    expected.push(hello);
    assert_eq!(events(&mut body, kept + 1).await, expected);
    drop(tg);
    assert!(wait_for(|| children_with(&m) == 0).await);
}

/// An answer the child writes after its request was answered without it (its time ran out)
/// goes to no client: it is never put on the session's stream, where a client reads no
/// answer but to a stream it resumes, and no other request takes it. Until it comes, the id
/// stays in flight (a request under it is refused, as MCP asks a client never to use an id
/// twice in a session); then it is free. The request's progress meanwhile goes to no one
/// either (its client has its answer). Alike behind the stdio front.
#[tokio::test]
async fn an_answer_after_its_request_timed_out_reaches_no_client() {
    let config = "[limits]\nupstream_timeout = \"1s\"\n";
    let command = crate::common::peers::stdio_fixture(&["--list-changes"]).await;
    let slow = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "slow", "arguments": {}, "_meta": {"progressToken": "late"}}});
    let add = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": "add", "arguments": {"a": 1, "b": 2}}});
    let reason = "the tool server did not answer within 1s";
    let timed_out = json!({"jsonrpc": "2.0", "id": 5, "result": {
        "_meta": {"toolgate/upstream": {"code": "upstream_unavailable", "reason": reason}},
        "content": [{"type": "text", "text": format!("The tool server is unavailable: {reason}. It may still be working or overloaded; retrying later may help.")}],
        "isError": true}});
    let in_flight = json!({"jsonrpc": "2.0", "id": 5, "error": {"code": -32600,
        "message": "Invalid Request: a request with this id is still in flight in this session; send each request with an id of its own"}});
    let added =
        json!({"jsonrpc": "2.0", "id": 5, "result": {"content": [{"type": "text", "text": "3"}]}});

    let tg = Toolgate::in_front_of(&command, Some(config)).await;
    let url = tg.url();
    let session = open_session(&url).await;
    let mut stream = get_stream(&url, &session).await;
    let a = post(&url, Some(&session), slow.to_string()).await.answer();
    assert_eq!(a, timed_out);
    let a = post(&url, Some(&session), add.to_string()).await.json();
    assert_eq!(a, in_flight, "the child still owes the first call's answer");
    // The child says the call's progress, then answers, two seconds after the call.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let a = post(&url, Some(&session), call(6, "enable_extra", json!({})))
        .await
        .json();
    assert_eq!(a["id"], 6);
    let next = next_frame(&mut stream, Duration::from_secs(10)).await;
    assert!(next.contains("notifications/tools/list_changed"), "{next}");
    let a = post(&url, Some(&session), add.to_string()).await.json();
    assert_eq!(
        a, added,
        "the id is free once its answer came, and that answer was not this one's"
    );

    let (mut g, _file) = common::stdio_gate::StdioGate::start(&command, Some(config));
    g.initialize().await;
    let a = g.ask(slow).await;
    assert_eq!(a, timed_out);
    assert_eq!(g.ask(add.clone()).await, in_flight);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    g.send(&json!({"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": "enable_extra", "arguments": {}}}).to_string()).await;
    let note = g.recv().await;
    assert_eq!(note["method"], "notifications/tools/list_changed", "{note}");
    assert_eq!(g.recv().await["id"], 6);
    assert_eq!(g.ask(add).await, added);
}
