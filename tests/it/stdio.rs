//! `toolgate stdio -- CMD`: real child processes on both sides. toolgate's stdin and stdout
//! are driven line by line; the servers are a dependency-free fixture, the Python SDK server
//! and server-everything in stdio mode; the Python SDK client drives toolgate too.

use crate::common;
use common::peers::{peers, python_client, server_everything_http};
use common::scripted::{Script, Scripted, open_tool};
use common::stdio_gate::StdioGate;
use common::tempfile_lite::TempFile;
use serde_json::{Value, json};
use std::time::Duration;

use tokio::process::Command;

fn fixture(extra: &[&str]) -> Vec<String> {
    let p = peers();
    let mut v = vec![
        p.python.display().to_string(),
        p.fixtures.join("stdio_server.py").display().to_string(),
    ];
    v.extend(extra.iter().map(|s| s.to_string()));
    v
}

fn call(id: i64, tool: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": tool, "arguments": args}})
}

fn pid_alive(pid: u32) -> bool {
    std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .unwrap_or_default()
            .contains(") Z ")
}

#[tokio::test]
async fn guards_calls_and_answers_malformed_input() {
    let (mut g, _) = StdioGate::start(
        &tokio::task::spawn_blocking(|| fixture(&[])).await.unwrap(),
        None,
    );
    g.initialize().await;
    let a = g.ask(call(1, "add", json!({"a": 2, "b": "3"}))).await;
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "5"}]}}),
        "coerced, then the server's answer"
    );
    let a = g.ask(call(2, "add", json!({"a": "x"}))).await;
    assert_eq!(a["result"]["isError"], true);
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/a": "expected an integer, got string \"x\"", "/b": "is required but missing"})
    );
    let a = g.ask(call(3, "ad", json!({}))).await;
    assert_eq!(
        a["error"]["message"],
        "Unknown tool: ad. Did you mean \"add\"?"
    );
    let a = g.ask(call(4, "fail", json!({}))).await;
    assert_eq!(
        a["result"],
        json!({"content": [{"type": "text", "text": "boom"}], "isError": true, "_meta": {"toolgate/upstream_error": {"code": 0, "message": "boom"}}})
    );

    // What a stdio server would leave unanswered, toolgate answers.
    g.send("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\"")
        .await;
    let a = g.recv().await;
    assert_eq!(a["error"]["code"], -32700);
    assert_eq!(a["id"], 5, "under the id the line began with: {a}");
    g.send("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":").await;
    let a = g.recv().await;
    assert_eq!(a["error"]["code"], -32700);
    assert!(a.get("id").is_none(), "{a}");
    // A batch of no message: one error, for the first item, as JSON-RPC answers a batch.
    g.send("[1, 2]").await;
    assert_eq!(
        g.recv().await,
        json!([{"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request: item 1 of the batch: invalid type: integer `1`, expected a JSON-RPC message object at line 1 column 1"}}])
    );
    g.send(&format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"ping\",\"params\":{{\"pad\":\"{}\"}}}}",
        "x".repeat(5_000_000)
    ))
    .await;
    let a = g.recv().await;
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 6, "error": {"code": -32600, "message": "Invalid Request: the message is over the 4194304-byte limit"}}),
        "the id is read from the over-long line as it streams past"
    );
    let a = g
        .ask(json!({"jsonrpc": "2.0", "id": 7, "method": "ping"}))
        .await;
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 7, "result": {}}),
        "still serving"
    );
    assert!(!g.logs().contains("\"x\""), "no argument values in logs");
}

/// A client that leaves out the newline between messages writes several on one line: each is
/// answered as if it had a line of its own, in either stdio mode, whatever each one is; a
/// message closed early (a `}` after it) is refused whole, as on a line of its own.
#[tokio::test]
async fn messages_written_on_one_line_are_each_answered_in_either_stdio_mode() {
    let (addr, _demo) = toolgate::demo::spawn(([127, 0, 0, 1], 0).into(), Default::default())
        .await
        .unwrap();
    let mut child = vec!["stdio".to_string(), "--".into()];
    child.extend(tokio::task::spawn_blocking(|| fixture(&[])).await.unwrap());
    let over_http = vec![
        "stdio".into(),
        "--upstream".into(),
        format!("http://{addr}/mcp"),
    ];
    for args in [child, over_http] {
        let mut g = StdioGate::start_args(args.clone());
        g.initialize().await;
        let line = [
            call(1, "nope", json!({})).to_string(),
            json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}).to_string(),
            " ".into(),
            json!({"jsonrpc": "1.0", "id": 3, "method": "ping"}).to_string(),
            "\r".into(),
            json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": "t", "progress": 1}}).to_string(),
            json!({"jsonrpc": "2.0", "id": 4, "method": "ping"}).to_string(),
            "\t[]".into(),
            json!({"jsonrpc": "2.0", "id": 6, "method": "ping"}).to_string(),
            "}".into(),
        ]
        .concat();
        g.send(&line).await;
        let mut answers = Vec::new();
        for _ in 0..6 {
            answers.push(g.recv().await);
        }
        answers.sort_by_key(|a| a["id"].as_i64().unwrap_or(0));
        assert_eq!(
            answers,
            [
                json!({"jsonrpc": "2.0", "error": {"code": -32600, "message": "Invalid Request: empty batch"}}),
                json!({"jsonrpc": "2.0", "id": 1, "error": {"code": -32602, "message": "Unknown tool: nope", "data": {"tool": "nope", "suggestions": []}}}),
                json!({"jsonrpc": "2.0", "id": 2, "result": {}}),
                json!({"jsonrpc": "2.0", "id": 3, "error": {"code": -32600, "message": "Invalid Request: the \"jsonrpc\" member must be \"2.0\""}}),
                json!({"jsonrpc": "2.0", "id": 4, "result": {}}),
                json!({"jsonrpc": "2.0", "id": 6, "error": {"code": -32700, "message": "Parse error: trailing characters at line 1 column 41"}}),
            ],
            "{args:?}"
        );
        let a = g
            .ask(json!({"jsonrpc": "2.0", "id": 5, "method": "ping"}))
            .await;
        assert_eq!(
            a,
            json!({"jsonrpc": "2.0", "id": 5, "result": {}}),
            "{args:?}"
        );
    }
}

#[tokio::test]
async fn a_crash_answers_every_pending_request_and_stops_toolgate() {
    let (mut g, _) = StdioGate::start(
        &tokio::task::spawn_blocking(|| fixture(&[])).await.unwrap(),
        None,
    );
    g.initialize().await;
    // The fixture reads one line at a time: the crash comes first, so the slow call is still
    // pending when the process dies, having been written while the crash waited.
    g.send(&call(2, "crash", json!({"after": 0.5})).to_string())
        .await;
    g.send(&call(1, "slow", json!({})).to_string()).await;
    let mut answers = [g.recv().await, g.recv().await];
    answers.sort_by_key(|a| a["id"].as_i64());
    for (a, id) in answers.iter().zip([1, 2]) {
        assert_eq!(a["id"], id);
        assert_eq!(a["result"]["isError"], true, "{a}");
        assert!(
            a["result"]["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("the tool server exited with exit status: 3"),
            "{a}"
        );
    }
    let status = tokio::time::timeout(Duration::from_secs(10), g.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(1));
    let said =
        "the tool server exited with exit status: 3 while the client was connected; toolgate stops";
    let logs = g.logs_when(|l| l.contains(said)).await;
    assert!(logs.contains(said), "{logs}");
}

/// After its server exits, toolgate answers what the client sends within a moment, and a
/// client that keeps sending (a loop that retries each error at once) does not keep it: it
/// exits within `stdio.shutdown_grace` (2 s here) of the server, while the client sends on.
#[tokio::test]
async fn a_client_that_keeps_sending_after_its_server_exits_does_not_keep_toolgate() {
    let (mut g, _) = StdioGate::start(
        &tokio::task::spawn_blocking(|| fixture(&[])).await.unwrap(),
        None,
    );
    g.initialize().await;
    g.send(&call(1, "crash", json!({"after": 0})).to_string())
        .await;
    let mut stdin = g.stdin.take().unwrap();
    // Two pings a line (a client that leaves out a newline): each is answered, after the
    // crash too.
    let sender = tokio::spawn(async move {
        use tokio::io::AsyncWriteExt;
        for id in (2..).step_by(2) {
            let ping = |id| format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"ping\"}}");
            let line = format!("{}{}\n", ping(id), ping(id + 1));
            if id > 1200 || stdin.write_all(line.as_bytes()).await.is_err() {
                return id;
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        unreachable!()
    });
    let exited = "could not reach the tool server: the tool server exited with exit status: 3";
    let crashed = format!("{exited} before answering");
    let call_failed = json!({"jsonrpc": "2.0", "id": 1, "result": {
        "content": [{"type": "text", "text": format!("The tool server is unavailable: {crashed}. Retrying in a moment may help if the server is restarting.")}],
        "isError": true,
        "_meta": {"toolgate/upstream": {"code": "upstream_unavailable", "reason": crashed}}}});
    let ping_failed = |id: i64, why: &str| {
        let message = format!("Upstream MCP server unavailable: {why}");
        json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32603, "message": message}})
    };
    let (mut answered, mut read_after) = (Vec::new(), 0);
    while let Some(line) = g.next_line().await {
        let a: Value = serde_json::from_str(&line).unwrap();
        let id = a["id"].as_i64().unwrap();
        read_after += usize::from(a == ping_failed(id, exited));
        // A ping in flight when the server died, or read after; one sent to it in the
        // moment between its input closing and its status being known is told it exited.
        let expected = [
            call_failed.clone(),
            ping_failed(id, &crashed),
            ping_failed(id, exited),
            ping_failed(
                id,
                "could not reach the tool server: the tool server exited before answering",
            ),
        ];
        assert!(expected.contains(&a), "{a}");
        answered.push(id);
    }
    let status = tokio::time::timeout(Duration::from_secs(10), g.child.wait())
        .await
        .expect("toolgate exits while the client still sends")
        .unwrap();
    assert_eq!(status.code(), Some(1));
    let sent = sender.await.unwrap();
    assert!(
        sent < 1200,
        "the client was still sending when toolgate exited"
    );
    answered.sort();
    assert_eq!(answered[0], 1, "the crashed call is answered");
    assert!(
        answered.len() > 2 && answered.windows(2).all(|w| w[1] == w[0] + 1),
        "every ping read after the crash is answered, in turn: {answered:?}"
    );
    assert!(
        read_after > 0,
        "pings read after the crash are answered: {answered:?}"
    );
}

/// A client that closes stdin and then reads nothing of what is left for it (answers of
/// megabytes here, more than the pipe holds) does not keep toolgate: its last answers get
/// `stdio.shutdown_grace`, and toolgate exits as it would have (0), saying why.
#[tokio::test]
async fn a_client_that_stops_reading_as_it_closes_stdin_does_not_keep_toolgate() {
    let (mut g, _) = StdioGate::start(
        &tokio::task::spawn_blocking(|| fixture(&[])).await.unwrap(),
        None,
    );
    g.initialize().await;
    for id in 1..=4 {
        g.send(&call(id, "big", json!({"size": 2_000_000})).to_string())
            .await;
    }
    drop(g.stdin.take());
    let status = tokio::time::timeout(Duration::from_secs(30), g.child.wait())
        .await
        .expect("toolgate exits though its client reads nothing")
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let said = "the client read none of what was left for it within 2s; toolgate exits without it";
    let logs = g.logs_when(|l| l.contains(said)).await;
    assert!(logs.contains(said), "{logs}");
}

#[tokio::test]
async fn closing_stdin_stops_even_a_server_that_ignores_sigterm() {
    let (mut g, _) = StdioGate::start(
        &tokio::task::spawn_blocking(|| fixture(&["--ignore-sigterm"]))
            .await
            .unwrap(),
        None,
    );
    g.initialize().await;
    let pid: u32 = loop {
        let logs = g.logs();
        if let Some(p) = logs.split("fixture pid ").nth(1) {
            break p.split_whitespace().next().unwrap().parse().unwrap();
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(pid_alive(pid));
    g.stdin.take();
    let status = tokio::time::timeout(Duration::from_secs(15), g.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let said = "the tool server was killed with SIGKILL after ignoring SIGTERM";
    let logs = g.logs_when(|l| l.contains(said)).await;
    assert!(logs.contains(said), "{logs}");
    ends(pid, "no orphan left behind").await;
}

/// The process ids the fixture said it runs as, in `logs`.
fn fixture_pids(logs: &str) -> Vec<u32> {
    (logs.split("fixture pid ").skip(1))
        .filter_map(|p| p.split_whitespace().next()?.parse().ok())
        .collect()
}

/// Waits for `pid` to end; one that does not is killed, and the test fails.
async fn ends(pid: u32, what: &str) {
    for _ in 0..100 {
        if !pid_alive(pid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let _ = std::process::Command::new("kill")
        .args(["-KILL", &pid.to_string()])
        .status();
    panic!("{what}: the server (pid {pid}) outlived toolgate");
}

/// A server that runs on once its stdin closes ends all the same when toolgate is killed
/// outright (SIGKILL, so nothing of toolgate's runs to end it), under both fronts that start
/// servers, and so does one a launcher started (a shell that does not `exec` it, as `npx`
/// and `uvx` do not): the keeper of the server's process group kills the group.
#[tokio::test]
async fn a_server_ends_when_toolgate_is_killed_outright() {
    let direct = common::peers::stdio_fixture(&["--ignore-sigterm"]).await;
    let mut launched: Vec<String> = ["sh", "-c", "\"$0\" \"$@\"; true"].map(String::from).into();
    launched.extend(direct.iter().cloned());
    for command in [direct.clone(), launched] {
        let (mut g, _) = StdioGate::start(&command, None);
        g.initialize().await;
        let logs = g.logs_when(|l| !fixture_pids(l).is_empty()).await;
        let pid = fixture_pids(&logs)[0];
        assert!(pid_alive(pid));
        g.child.start_kill().unwrap();
        g.child.wait().await.unwrap();
        ends(pid, &format!("stdio -- {}", command[0])).await;

        let tg = common::Toolgate::in_front_of(&command, None).await;
        common::open_session(&tg.url()).await;
        let logs = tg.logs_when(|l| !fixture_pids(l).is_empty()).await;
        let pids = fixture_pids(&logs);
        assert!(pids.iter().all(|p| pid_alive(*p)), "{logs}");
        drop(tg);
        for pid in pids {
            ends(pid, &format!("serve -- {}", command[0])).await;
        }
    }
}

/// A server's stderr becomes toolgate's log lines, named by its program and process id, in
/// front of either front; its arguments, which may carry a secret (a database URL with its
/// password), are in no log line.
#[tokio::test]
async fn server_stderr_becomes_log_lines_without_the_servers_arguments() {
    let secret = "postgresql://app:s3cret-pw@db/app";
    let command = common::peers::stdio_fixture(&[secret]).await;
    let program = std::path::Path::new(&command[0]).file_name().unwrap();
    let server = format!("server={}", program.to_string_lossy());
    let relayed = |logs: &str| {
        logs.lines().any(|l| {
            l.contains("toolgate::upstream") && l.contains("fixture pid") && l.contains(&server)
        })
    };
    let said = |logs: &str| {
        assert!(relayed(logs), "{logs}");
        let line = logs.lines().find(|l| l.contains("fixture pid")).unwrap();
        let said_pid = line.split("fixture pid ").nth(1).unwrap();
        let pid = said_pid.split_whitespace().next().unwrap();
        assert!(line.contains(&format!("pid={pid}")), "{line}");
        assert!(
            !logs.contains("s3cret-pw"),
            "no argument in the logs: {logs}"
        );
    };

    let (mut g, _) = StdioGate::start(&command, None);
    g.initialize().await;
    said(&g.logs_when(relayed).await);

    let tg = common::Toolgate::in_front_of(&command, None).await;
    common::open_session(&tg.url()).await;
    let logs = tg.logs_when(relayed).await;
    said(&logs);
    assert!(
        logs.lines().any(|l| l.contains("started the tool server")
            && l.contains("upstream=default")
            && l.contains(&server)),
        "a session's child is tied to its server: {logs}"
    );
}

/// A line on a server's stdout that is not a JSON-RPC message (a banner) reaches no client,
/// under either front, and is said once at `WARN`, without its text.
#[tokio::test]
async fn a_line_on_stdout_that_is_no_message_is_dropped_and_said() {
    let command = common::peers::stdio_fixture(&["--banner"]).await;
    // Two lines, text then JSON: the first said at WARN, the second at DEBUG.
    const SAID: &str = "not a JSON-RPC message";
    let both = |logs: &str| logs.matches(SAID).count() >= 2;
    let said_once = |logs: &str| {
        let said: Vec<&str> = logs.lines().filter(|l| l.contains(SAID)).collect();
        assert_eq!(said.len(), 2, "{logs}");
        assert!(
            said[0].contains("WARN") && said[1].contains("DEBUG"),
            "{said:?}"
        );
        assert!(!logs.contains("stdio-fixture starting") && !logs.contains("no message either"));
    };

    // The pipe's client reads only messages (its first line is the answer to initialize).
    let (mut g, _) = StdioGate::start(&command, None);
    g.initialize().await;
    said_once(&g.logs_when(both).await);

    // An HTTP client's stream carries the server's first message, not the banner before it.
    let tg = common::Toolgate::in_front_of(&command, None).await;
    let session = common::open_session(&tg.url()).await;
    let mut stream = common::get_stream(&tg.url(), &session).await;
    let r = common::post(
        &tg.url(),
        Some(&session),
        common::call(1, "notify", json!({})),
    )
    .await;
    assert_eq!(common::result_text(&r.json()), "notified");
    let text = common::next_frame(&mut stream, Duration::from_secs(5)).await;
    assert_eq!(
        common::sse_messages(&text),
        vec![
            json!({"jsonrpc": "2.0", "method": "notifications/message", "params": {"level": "info", "data": "hello from the server"}})
        ]
    );
    said_once(&tg.logs_when(both).await);
}

/// A configuration shared with `serve` names servers the pipe does not serve: it still works,
/// and a warning names what is left out.
#[tokio::test]
async fn named_servers_of_a_shared_configuration_are_said_to_be_left_out() {
    let config = "[[upstreams]]\nname = \"billing\"\nurl = \"http://127.0.0.1:9/mcp\"\n\n[[upstreams]]\nname = \"search\"\nurl = \"http://127.0.0.1:9/b\"\n";
    let (mut g, _file) = StdioGate::start(&common::peers::stdio_fixture(&[]).await, Some(config));
    g.initialize().await;
    let a = g
        .ask(json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}))
        .await;
    assert_eq!(a, json!({"jsonrpc": "2.0", "id": 2, "result": {}}));
    let warned = |logs: &str| {
        logs.lines().any(|l| {
            l.contains("WARN")
                && l.contains("the configuration's [[upstreams]] are served by toolgate serve")
                && l.contains("upstreams=billing, search")
        })
    };
    let logs = g.logs_when(warned).await;
    assert!(warned(&logs), "{logs}");
}

#[tokio::test]
async fn server_everything_over_stdio() {
    let se = tokio::task::spawn_blocking(|| peers().server_everything.display().to_string())
        .await
        .unwrap();
    let (mut g, _) = StdioGate::start(&[se, "stdio".into()], None);
    g.initialize().await;
    g.send(&call(1, "get-sum", json!({"a": "one", "b": 2})).to_string())
        .await;
    let a = loop {
        let m = g.recv().await;
        if m["id"] == 1 {
            break m;
        }
    };
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/a": "expected a number, got string \"one\""})
    );
    // server-everything may interleave notifications; read until our answer.
    g.send(&call(2, "get-sum", json!({"a": 40, "b": 2})).to_string())
        .await;
    let a = loop {
        let m = g.recv().await;
        if m["id"] == 2 {
            break m;
        }
    };
    assert_eq!(
        a["result"]["content"][0]["text"],
        "The sum of 40 and 2 is 42."
    );
}

#[tokio::test]
async fn python_sdk_client_and_server_through_toolgate_stdio() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let command = json!([
        env!("CARGO_BIN_EXE_toolgate"),
        "stdio",
        "--",
        p.python.display().to_string(),
        p.fixtures.join("py_server.py").display().to_string(),
        "stdio"
    ]);
    let r = python_client(
        &format!("stdio:{command}"),
        "legacy",
        &[
            ("add", json!({"a": 1, "b": 2})),
            ("book", json!({"date": "tomorrow"})),
        ],
    )
    .await;
    assert_eq!(r["tools"], json!(["add", "book", "list_files"]));
    assert_eq!(
        r["calls"][0]["content"],
        json!([{"type": "text", "text": "3"}])
    );
    assert_eq!(r["calls"][1]["isError"], true);
    assert_eq!(
        r["calls"][1]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/date": "must match the pattern ^\\d{4}-\\d{2}-\\d{2}$, got \"tomorrow\""})
    );
}

/// A desktop client's pipe to a server that wants a credential: `auth.upstream_header`
/// goes with every request toolgate sends it (the pipe's one client needs no token of its
/// own), under the header's own name, and is never logged. For a 2026-07-28 client in front
/// of a handshake-only server, that includes the era question and the bridged session.
#[tokio::test]
async fn stdio_upstream_sends_the_configured_credential_to_the_server() {
    let cases = [
        ("authorization", "Bearer s3cret-upstream", false),
        ("x-api-key", "s3cret-key", true),
    ];
    for (header, value, modern) in cases {
        let mut scripted = Scripted::new(vec![open_tool("echo")]).script(
            "echo",
            Script::Result(json!({"content": [{"type": "text", "text": "echoed"}]})),
        );
        scripted.required_header = Some((header, value));
        scripted.handshake_only = modern;
        let (url, seen) = scripted.spawn().await;
        let secret = TempFile::new(&format!("{value}\n"));
        let config = TempFile::new(&format!(
            "[auth.upstream_header]\nname = \"{header}\"\nfile = \"{}\"\n",
            secret.path.display()
        ));
        let mut g = StdioGate::start_args(vec![
            "stdio".into(),
            "--config".into(),
            config.path.display().to_string(),
            "--upstream".into(),
            url,
        ]);
        let mut call = call(1, "echo", json!({}));
        if modern {
            call["params"]["_meta"] = common::modes::modern_meta();
        } else {
            g.initialize().await;
        }
        let mut expected = json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "echoed"}]}});
        if modern {
            expected["result"]["resultType"] = json!("complete");
        }
        assert_eq!(g.ask(call).await, expected, "{header}");
        if modern {
            assert_eq!(seen.methods()[..2], ["server/discover", "initialize"]);
        }
        let seen = seen.seen_headers.lock().unwrap().clone();
        assert!(
            seen.len() >= 3,
            "initialize, initialized, the call: {seen:?}"
        );
        for h in &seen {
            assert_eq!(h[header], value, "{header}");
        }
        assert!(!g.logs().contains("s3cret"), "{}", g.logs());
    }
}

/// The server may be named in the configuration file, as for `serve`: its `upstream` or its
/// `command`.
#[tokio::test]
async fn the_server_may_come_from_the_configuration_file() {
    let (addr, _demo) = toolgate::demo::spawn(([127, 0, 0, 1], 0).into(), Default::default())
        .await
        .unwrap();
    let fixture = json!(common::peers::stdio_fixture(&[]).await);
    let text = json!([{"type": "text", "text": "42"}]);
    for (config, result) in [
        (
            format!("upstream = \"http://{addr}/mcp\"\n"),
            json!({"content": text, "structuredContent": {"result": 42}}),
        ),
        (format!("command = {fixture}\n"), json!({"content": text})),
    ] {
        let file = TempFile::new(&config);
        let path = file.path.display().to_string();
        let mut g = StdioGate::start_args(vec!["stdio".into(), "--config".into(), path]);
        g.initialize().await;
        let a = g.ask(call(1, "add", json!({"a": "40", "b": 2}))).await;
        assert_eq!(
            a,
            json!({"jsonrpc": "2.0", "id": 1, "result": result}),
            "{config}"
        );
    }
}

#[tokio::test]
async fn stdio_client_in_front_of_an_http_server() {
    let (addr, demo) = toolgate::demo::spawn(([127, 0, 0, 1], 0).into(), Default::default())
        .await
        .unwrap();
    let mut g = StdioGate::start_args(vec![
        "stdio".into(),
        "--upstream".into(),
        format!("http://{addr}/mcp"),
    ]);
    g.initialize().await;
    let a = g.ask(call(1, "add", json!({"a": "40", "b": 2}))).await;
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "42"}], "structuredContent": {"result": 42}}})
    );
    let a = g
        .ask(call(2, "book_flight", json!({"origin": "LHR"})))
        .await;
    assert_eq!(a["result"]["isError"], true);
    assert_eq!(
        demo.calls().len(),
        1,
        "only the valid call reached the server"
    );
    // An SSE answer streams out line by line: progress first, then the answer.
    g.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "countdown", "arguments": {"steps": 2, "intervalMs": 10}, "_meta": {"progressToken": "p"}}}).to_string()).await;
    let (p1, p2, done) = (g.recv().await, g.recv().await, g.recv().await);
    assert_eq!(
        (p1["method"].as_str(), p2["method"].as_str()),
        (
            Some("notifications/progress"),
            Some("notifications/progress")
        )
    );
    assert_eq!(done["result"]["content"][0]["text"], "Lift-off!");
    // The session toolgate holds is the one the server gave.
    let sessions: std::collections::HashSet<_> = demo
        .seen()
        .iter()
        .filter_map(|x| x.session.clone())
        .collect();
    assert_eq!(sessions.len(), 1);
    g.stdin.take();
    let status = tokio::time::timeout(Duration::from_secs(10), g.child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    assert!(
        demo.seen().iter().any(|x| x.http_method == "DELETE"),
        "the session is ended when the client leaves"
    );
}

#[tokio::test]
async fn python_sdk_client_through_toolgate_stdio_to_server_everything_over_http() {
    let se = server_everything_http().await;
    let command = json!([
        env!("CARGO_BIN_EXE_toolgate"),
        "stdio",
        "--upstream",
        se.url
    ]);
    let r = python_client(
        &format!("stdio:{command}"),
        "legacy",
        &[
            ("get-sum", json!({"a": 1, "b": 2})),
            ("get-sum", json!({"a": "one", "b": 2})),
        ],
    )
    .await;
    assert!(
        r["tools"].as_array().unwrap().contains(&json!("get-sum")),
        "{r}"
    );
    assert_eq!(
        r["calls"][0]["content"][0]["text"],
        "The sum of 1 and 2 is 3."
    );
    assert_eq!(
        r["calls"][1]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/a": "expected a number, got string \"one\""})
    );
}

#[tokio::test]
async fn check_a_stdio_server() {
    let cmd = tokio::task::spawn_blocking(|| fixture(&[])).await.unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .arg("check")
        .arg("--")
        .args(&cmd)
        .output()
        .await
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (summary, problems, open) = common::check_output(&String::from_utf8_lossy(&out.stdout));
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(open.len(), 11);
    // Named by its program, its arguments elided (one may be a secret).
    let program = std::path::Path::new(&cmd[0]).file_name().unwrap();
    assert_eq!(
        summary,
        format!(
            "toolgate check {} …: 11 tools, 0 errors, 0 warnings, 11 notes",
            program.to_string_lossy()
        )
    );
}

#[tokio::test]
async fn python_sdk_client_through_toolgate_stdio_to_server_everything_over_stdio() {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let command = json!([
        env!("CARGO_BIN_EXE_toolgate"),
        "stdio",
        "--",
        p.server_everything.display().to_string(),
        "stdio"
    ]);
    let r = python_client(
        &format!("stdio:{command}"),
        "legacy",
        &[
            ("get-sum", json!({"a": 20, "b": 22})),
            ("get-sum", json!({"a": [1, 2], "b": 2})),
        ],
    )
    .await;
    assert!(
        r["tools"].as_array().unwrap().contains(&json!("get-sum")),
        "{r}"
    );
    assert_eq!(
        r["calls"][0]["content"][0]["text"],
        "The sum of 20 and 22 is 42."
    );
    assert_eq!(r["calls"][1]["isError"], true);
    assert_eq!(
        r["calls"][1]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/a": "expected a number, got array [1,2]"})
    );
}

/// The rules about an exchange are the stdio front's, whichever server is behind it: a
/// request waits `limits.upstream_timeout` for its answer, and a request the client cancelled
/// is no longer answered, not even when the server answers it all the same.
#[tokio::test]
async fn timeouts_and_cancellations_hold_in_front_of_either_server() {
    let config = "[limits]\nupstream_timeout = \"1s\"\n";
    let file = common::tempfile_lite::TempFile::new(config);
    let slow = json!({"content": [{"type": "text", "text": "slow done"}]});
    let (url, scripted) = Scripted::new(vec![open_tool("slow")])
        .script("slow", Script::Slow(Duration::from_secs(2), slow))
        .spawn()
        .await;
    let command = tokio::task::spawn_blocking(|| fixture(&[])).await.unwrap();
    let config_args = vec!["--config".to_string(), file.path.display().to_string()];
    let modes = [
        (
            "stdio -- CMD",
            [
                vec!["stdio".to_string()],
                config_args.clone(),
                vec!["--".into()],
                command,
            ]
            .concat(),
        ),
        (
            "stdio --upstream",
            [
                vec!["stdio".to_string()],
                config_args,
                vec!["--upstream".into(), url],
            ]
            .concat(),
        ),
    ];
    for (mode, args) in modes {
        let mut g = StdioGate::start_args(args);
        g.initialize().await;
        let a = g.ask(call(1, "slow", json!({}))).await;
        assert_eq!(
            a,
            json!({"jsonrpc": "2.0", "id": 1, "result": {
                "content": [{"type": "text", "text": "The tool server is unavailable: the tool server did not answer within 1s. It may still be working or overloaded; retrying later may help."}],
                "isError": true,
                "_meta": {"toolgate/upstream": {"code": "upstream_unavailable", "reason": "the tool server did not answer within 1s"}}
            }}),
            "{mode}"
        );
        g.send(&call(2, "slow", json!({})).to_string()).await;
        g.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2, "reason": "the user stopped it"}}).to_string()).await;
        // Past the moment the server answers the cancelled call.
        tokio::time::sleep(Duration::from_millis(2500)).await;
        let a = g
            .ask(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}))
            .await;
        assert_eq!(
            a["id"], 3,
            "{mode}: nothing for the cancelled request comes first: {a}"
        );
        if mode == "stdio -- CMD" {
            let seen = g.ask(call(4, "seen", json!({}))).await;
            assert!(
                seen.to_string().contains("notifications/cancelled"),
                "the cancellation reached the child: {seen}"
            );
        }
        g.stdin.take();
        let rest = tokio::time::timeout(Duration::from_secs(10), g.next_line())
            .await
            .unwrap();
        assert_eq!(
            rest, None,
            "{mode}: nothing more is written, and nothing for the cancelled request"
        );
        let status = tokio::time::timeout(Duration::from_secs(10), g.child.wait())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(status.code(), Some(0), "{mode}");
    }
    assert!(
        scripted
            .methods()
            .iter()
            .any(|m| m == "notifications/cancelled"),
        "the cancellation reached the HTTP server: {:?}",
        scripted.methods()
    );
}

/// What is in flight is bounded: with room for one message, the next line waits for the slow
/// call's answer, where it would otherwise overtake it.
#[tokio::test]
async fn a_full_pipe_waits_for_room_in_flight() {
    let slow = json!({"content": [{"type": "text", "text": "slow done"}]});
    let (url, _scripted) = Scripted::new(vec![open_tool("slow")])
        .script("slow", Script::Slow(Duration::from_millis(800), slow))
        .spawn()
        .await;
    for (max, first) in [(1, 1), (8, 2)] {
        let file =
            common::tempfile_lite::TempFile::new(&format!("[stdio]\nmax_in_flight = {max}\n"));
        let mut g = StdioGate::start_args(vec![
            "stdio".into(),
            "--config".into(),
            file.path.display().to_string(),
            "--upstream".into(),
            url.clone(),
        ]);
        g.initialize().await;
        g.send(&call(1, "slow", json!({})).to_string()).await;
        g.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}).to_string())
            .await;
        let (a, b) = (g.recv().await, g.recv().await);
        assert_eq!(a["id"], first, "max_in_flight = {max}: {a}");
        let slow = if first == 1 { &a } else { &b };
        assert_eq!(
            *slow,
            json!({"jsonrpc": "2.0", "id": 1, "result": {"content": [{"type": "text", "text": "slow done"}]}}),
            "max_in_flight = {max}"
        );
        let list = if first == 1 { &b } else { &a };
        assert_eq!(list["id"], 2, "max_in_flight = {max}: {list}");
        assert_eq!(list["result"]["tools"][0]["name"], "slow", "{list}");
    }
}

/// A server's `notifications/tools/list_changed`, sent on its own, drops the listing toolgate
/// keeps, in front of a stdio server over stdio and over HTTP, and in front of an HTTP server
/// over stdio (`gateway::list_changed_drops_the_catalog` covers `serve --upstream`): the tool
/// it adds is checked against its schema, not called unknown.
#[tokio::test]
async fn a_servers_list_changed_drops_the_listing_in_every_mode() {
    let command = tokio::task::spawn_blocking(|| fixture(&["--list-changes"]))
        .await
        .unwrap();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    // toolgate's own answer, which it can give only once it has listed extra_tool (the
    // fixture's schema for it is the example server's).
    let expected = json!({"jsonrpc": "2.0", "id": 3, "result": {
        "content": [{"type": "text", "text": "Invalid arguments for tool \"extra_tool\" (1 problem):\n- level: must be at most 3, got 9 (parameter description: How loud, 0 to 3)\nCorrect the arguments and call the tool again."}],
        "isError": true,
        "_meta": {"toolgate/validation": {"code": "invalid_arguments", "tool": "extra_tool",
            "parameter_errors": {"/level": "must be at most 3, got 9"}}}
    }});

    // stdio -- CMD.
    let (mut g, _) = StdioGate::start(&command, None);
    g.initialize().await;
    g.ask(list.clone()).await;
    g.ask_past_notifications(call(2, "enable_extra", json!({})))
        .await;
    let a = g.ask(call(3, "extra_tool", json!({"level": 9}))).await;
    assert_eq!(a, expected, "stdio -- CMD");

    // serve -- CMD: the notification reaches the session's GET stream.
    let tg = common::Toolgate::in_front_of(&command, None).await;
    let (url, session) = (tg.url(), common::open_session(&tg.url()).await);
    common::post(&url, Some(&session), list.to_string()).await;
    common::post(
        &url,
        Some(&session),
        call(2, "enable_extra", json!({})).to_string(),
    )
    .await;
    // Read from the child before its answer is, so it has been learned by then.
    let a = common::post(
        &url,
        Some(&session),
        call(3, "extra_tool", json!({"level": 9})).to_string(),
    )
    .await
    .answer();
    assert_eq!(a, expected, "serve -- CMD");

    // stdio --upstream, in front of the example server.
    let (addr, _demo) = toolgate::demo::spawn(([127, 0, 0, 1], 0).into(), Default::default())
        .await
        .unwrap();
    let mut g = StdioGate::start_args(vec![
        "stdio".into(),
        "--upstream".into(),
        format!("http://{addr}/mcp"),
    ]);
    g.initialize().await;
    g.ask(list).await;
    g.ask_past_notifications(call(2, "enable_extra", json!({})))
        .await;
    let a = g.ask(call(3, "extra_tool", json!({"level": 9}))).await;
    assert_eq!(a, expected, "stdio --upstream");
}

/// A server that takes a notification more slowly than a request, as one whose handlers run
/// in order may: it records each method as it finishes with it.
async fn slow_notifications_server() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use axum::body::Bytes;
    use axum::response::IntoResponse;
    let order = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = order.clone();
    let app = axum::Router::new().route(
        "/mcp",
        axum::routing::post(move |body: Bytes| {
            let seen = seen.clone();
            async move {
                let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                let method = msg["method"].as_str().unwrap_or("").to_owned();
                let Some(id) = msg.get("id").cloned() else {
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    seen.lock().unwrap().push(method);
                    return axum::http::StatusCode::ACCEPTED.into_response();
                };
                seen.lock().unwrap().push(method.clone());
                let result = match method.as_str() {
                    "initialize" => json!({"protocolVersion": "2025-11-25",
                        "capabilities": {"tools": {}}, "serverInfo": {"name": "s", "version": "1"}}),
                    "tools/list" => json!({"tools": []}),
                    _ => json!({}),
                };
                let mut resp =
                    axum::Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response();
                if method == "initialize" {
                    resp.headers_mut()
                        .insert("mcp-session-id", "s1".parse().unwrap());
                }
                resp
            }
        }),
    );
    let url = format!("http://{}/mcp", common::serve_on_loopback(app).await);
    (url, order)
}

/// `stdio --upstream`: a notification reaches the HTTP server before what the client wrote
/// after it, however quickly the client writes; requests go concurrently among themselves.
#[tokio::test]
async fn a_pipes_notifications_reach_an_http_server_in_the_order_written() {
    for run in 0..10 {
        let (url, order) = slow_notifications_server().await;
        let mut g = StdioGate::start_args(vec!["stdio".into(), "--upstream".into(), url]);
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}});
        g.send(&init.to_string()).await;
        g.send(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#)
            .await;
        g.send(r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#)
            .await;
        assert_eq!(g.recv().await["id"], 1, "run {run}");
        assert_eq!(g.recv().await["id"], 2, "run {run}");
        let seen = order.lock().unwrap().clone();
        assert_eq!(
            seen,
            ["initialize", "notifications/initialized", "tools/list"],
            "run {run}"
        );
    }
}

/// A stdio server gets the environment toolgate was started with (what whoever launched
/// toolgate set for the server), less toolgate's own: the variables its clients' tokens and
/// its HTTP servers' credentials are read from, its configuration (`TOOLGATE_*`), and what
/// another stdio server alone is given (`upstream_env`). In `serve -- CMD` beside an HTTP
/// server with a credential of its own and a second stdio server with a variable of its own,
/// in that second server, and in `stdio -- CMD`.
#[tokio::test]
async fn a_stdio_server_is_not_given_toolgates_own_secrets() {
    let server = crate::common::peers::stdio_fixture(&["--environ"]).await;
    const TOKEN: &str = "ci-bot-secret-token-0123456789";
    let env = [
        ("CI_BOT_TOKEN", TOKEN),
        ("BILLING_KEY", "billing-key"),
        ("GITHUB_TOKEN", "github-token"),
        ("SERVER_API_KEY", "the server's own"),
        ("TOOLGATE_LOG__FORMAT", "human"),
    ];
    let names = |a: &Value| -> Vec<String> {
        serde_json::from_str(&common::result_text(a)).unwrap_or_else(|_| panic!("{a}"))
    };

    let config = format!(
        "[[auth.tokens]]\nname = \"ci-bot\"\nenv = \"CI_BOT_TOKEN\"\n\n[[upstreams]]\nname = \"billing\"\nurl = \"http://127.0.0.1:9/mcp\"\nupstream_header = {{ env = \"BILLING_KEY\" }}\n\n[[upstreams]]\nname = \"github\"\ncommand = {}\nupstream_env = [\"GITHUB_TOKEN\"]\n",
        json!(server)
    );
    let tg = common::Toolgate::in_front_of_env(&server, Some(&config), &env).await;
    let bearer = format!("Bearer {TOKEN}");
    let environ = |path: &'static str| {
        let (url, bearer) = (format!("http://{}{path}", tg.addr), bearer.clone());
        async move {
            let mut headers = vec![
                ("content-type", "application/json"),
                ("accept", common::ACCEPT),
                ("authorization", bearer.as_str()),
            ];
            let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
            let r = common::request(http::Method::POST, &url, &headers, init.to_string()).await;
            let session = r.headers["mcp-session-id"].to_str().unwrap().to_string();
            headers.push(("mcp-session-id", &session));
            let body = call(1, "environ", json!({})).to_string();
            common::request(http::Method::POST, &url, &headers, body)
                .await
                .answer()
        }
    };
    let served = names(&environ("/mcp").await);
    let beside = names(&environ("/github/mcp").await);

    let mut g =
        StdioGate::start_args_env([vec!["stdio".into(), "--".into()], server].concat(), &env);
    g.initialize().await;
    let piped = names(&g.ask(call(1, "environ", json!({}))).await);

    // The pipe's configuration names no secret: only toolgate's own configuration goes.
    let withheld = ["CI_BOT_TOKEN", "BILLING_KEY", "TOOLGATE_LOG__FORMAT"];
    let cases = [
        (
            "serve -- CMD",
            served,
            &[&withheld[..], &["GITHUB_TOKEN"]].concat(),
            None,
        ),
        (
            "its own variable",
            beside,
            &withheld.to_vec(),
            Some("GITHUB_TOKEN"),
        ),
        ("stdio -- CMD", piped, &vec!["TOOLGATE_LOG__FORMAT"], None),
    ];
    for (mode, names, withheld, own) in cases {
        for given in ["SERVER_API_KEY", "PATH"].into_iter().chain(own) {
            assert!(
                names.contains(&given.to_string()),
                "{mode}: {given} not in {names:?}"
            );
        }
        for name in withheld {
            assert!(
                !names.contains(&name.to_string()),
                "{mode}: {name} in {names:?}"
            );
        }
    }
}
