//! The `toolgate` command itself: `demo` works with nothing else, and bad settings are
//! refused with a clear message.

use crate::common;
use common::scripted::{Scripted, open_tool};
use common::*;
use serde_json::json;

#[tokio::test]
async fn demo_runs_the_gateway_in_front_of_the_example_server() {
    let tg = Toolgate::start(&mut vec!["demo".to_string()], None).await;
    let s = open_session(&tg.url()).await;
    let bad = json!({"origin": "LHR", "destination": "JFK", "departureDate": "2031-08-08", "passengers": 2});
    let a = post(&tg.url(), Some(&s), call(1, "book_flight", bad))
        .await
        .json();
    assert_eq!(a["result"]["isError"], true);
    assert_eq!(
        a["result"]["_meta"]["toolgate/validation"]["parameter_errors"],
        json!({"/departureDate": "must match the pattern ^\\d{2}/\\d{2}/\\d{4}$, got \"2031-08-08\""})
    );
    let a = post(
        &tg.url(),
        Some(&s),
        call(2, "add", json!({"a": "10", "b": 2})),
    )
    .await
    .json();
    assert_eq!(result_text(&a), "12");
}

/// The walk-through `demo` prints follows the configuration in force: with `[auth]`, each of
/// its commands carries a client's token, and the commands as printed work.
#[tokio::test]
async fn the_demo_walkthrough_works_as_printed_with_auth() {
    use tokio::io::AsyncBufReadExt;
    let token = "demo-walkthrough-token-0123456789";
    let file =
        tempfile_lite::TempFile::new("[[auth.tokens]]\nname = \"bob\"\nenv = \"DEMO_BOB_TOKEN\"\n");
    let mut demo = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args([
            "demo",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "off",
            "--config",
        ])
        .arg(&file.path)
        .env("DEMO_BOB_TOKEN", token)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(demo.stdout.take().unwrap()).lines();
    let mut printed = String::new();
    while let Some(line) = lines.next_line().await.unwrap() {
        printed.push_str(&line);
        printed.push('\n');
        if line.contains("Press Ctrl-C") {
            break;
        }
    }
    assert!(
        printed.contains("This configuration has [auth]"),
        "{printed}"
    );
    let commands: Vec<String> = printed
        .split("  curl ")
        .skip(1)
        .map(|c| c.split("\n\n").next().unwrap().to_string())
        .collect();
    assert_eq!(commands.len(), 3, "{printed}");
    let mut session = String::new();
    let mut answers = Vec::new();
    for c in &commands {
        let c = c.replace("$TOKEN", token).replace("$S", &session);
        let (url, headers, body) = curl_parts(&c);
        let headers: Vec<(&str, &str)> = headers.iter().map(|(k, v)| (&**k, &**v)).collect();
        let r = request(http::Method::POST, &url, &headers, body).await;
        assert_eq!(r.status, 200, "{c}: {}", r.text());
        if let Some(s) = r.headers.get("mcp-session-id") {
            session = s.to_str().unwrap().to_string();
        }
        answers.push(r.json());
    }
    assert_eq!(
        answers[1]["result"]["_meta"],
        json!({"toolgate/validation": {"code": "invalid_arguments", "tool": "book_flight",
            "parameter_errors": {
                "/departureDate": "must match the pattern ^\\d{2}/\\d{2}/\\d{4}$, got \"2031-08-08\"",
                "/passengers": "must be at most 9, got 12"}}})
    );
    assert_eq!(
        answers[2],
        json!({"jsonrpc": "2.0", "id": 3, "result": {"content": [{"type": "text", "text": "12"}],
            "structuredContent": {"result": 12}}})
    );
}

/// A printed `curl` command's URL, its `-H` headers and its `-d` body.
fn curl_parts(command: &str) -> (String, Vec<(String, String)>, String) {
    let url = command
        .split_whitespace()
        .find(|w| w.starts_with("http"))
        .unwrap()
        .to_string();
    let quoted = |after: &str| -> Vec<String> {
        command
            .split(after)
            .skip(1)
            .map(|rest| {
                let q = rest.chars().next().unwrap();
                rest[1..].split(q).next().unwrap().to_string()
            })
            .collect()
    };
    let headers = quoted("-H ")
        .into_iter()
        .map(|h| {
            let (k, v) = h.split_once(": ").unwrap();
            (k.to_string(), v.to_string())
        })
        .collect();
    let body = quoted("-d ").pop().unwrap();
    (url, headers, body)
}

#[tokio::test]
async fn bad_configuration_is_refused_with_a_clear_message() {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args([
            "serve",
            "--upstream",
            "ftp://example.com/mcp",
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "off",
        ])
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("must look like http://host:port/mcp or https://host/mcp"),
        "{err}"
    );

    let cfg = tempfile_lite::TempFile::new("[validation]\nmood = \"enforce\"\n");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["serve", "--upstream", "http://127.0.0.1:9/mcp", "--config"])
        .arg(&cfg.path)
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("unknown key validation.mood: did you mean validation.mode?"),
        "{err}"
    );

    // `check` takes a URL no server can have as the command line's mistake (1), not as a
    // server it cannot list (2); `serve` given no server says each way to give one.
    let (code, _, err) = run_toolgate(&["check", "--upstream", "localhost/mcp"]).await;
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err,
        "toolgate: configuration: upstream URL \"localhost/mcp\" must look like http://host:port/mcp or https://host/mcp\n"
    );
    let (code, _, err) = run_toolgate(&["serve", "--listen", "127.0.0.1:0"]).await;
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err,
        "toolgate: configuration: no upstream: give --upstream URL, a command after `--` (`toolgate serve -- python server.py`), or [[upstreams]] in the config file\n"
    );
}

/// The hidden command that keeps a stdio server's process group (Linux): it outlives the
/// group's SIGTERM, and the end of the thread that started it (the kernel's signal for a
/// parent's death comes then too), and kills its group, itself included, once the toolgate
/// named is not its parent (here, at once).
#[tokio::test]
async fn the_keeper_of_a_servers_group_ignores_sigterm_and_kills_its_group_once_orphaned() {
    use nix::sys::signal::{Signal, killpg};
    use std::os::unix::process::{CommandExt, ExitStatusExt};
    let keeper = |parent: String| {
        tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(["keep-group", &parent])
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .unwrap()
    };
    let mut kept = keeper(std::process::id().to_string());
    let group = kept.id().unwrap() as i32;
    assert!(keeper_waits(group), "the keeper waits");
    let mut member = tokio::process::Command::new("sleep")
        .arg("60")
        .process_group(group)
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    killpg(nix::unistd::Pid::from_raw(group), Signal::SIGTERM).unwrap();
    let ended = member.wait().await.unwrap();
    assert_eq!(ended.signal(), Some(Signal::SIGTERM as i32));
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    assert!(
        kept.try_wait().unwrap().is_none(),
        "the keeper outlives SIGTERM"
    );
    killpg(nix::unistd::Pid::from_raw(group), Signal::SIGKILL).unwrap();
    kept.wait().await.unwrap();

    let parent = std::process::id().to_string();
    let started_by_a_thread = std::thread::spawn(move || {
        let keeper = std::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
            .args(["keep-group", &parent])
            .process_group(0)
            .spawn()
            .unwrap();
        assert!(keeper_waits(keeper.id() as i32));
        keeper
    });
    let mut outliving = started_by_a_thread.join().unwrap();
    let group = outliving.id() as i32;
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert!(
        outliving.try_wait().unwrap().is_none() && keeper_waits(group),
        "the keeper outlives the thread that started it"
    );
    killpg(nix::unistd::Pid::from_raw(group), Signal::SIGKILL).unwrap();
    outliving.wait().unwrap();

    let mut orphaned = keeper("1".into());
    let ended = orphaned.wait().await.unwrap();
    assert_eq!(ended.signal(), Some(Signal::SIGKILL as i32));
}

/// Whether the keeper `pid` waits for the signals it blocks, within ten seconds.
fn keeper_waits(pid: i32) -> bool {
    let waiting = || {
        let wchan = std::fs::read_to_string(format!("/proc/{pid}/wchan"));
        wchan.unwrap_or_default().contains("sigtimedwait")
    };
    for _ in 0..1000 {
        if waiting() {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    false
}

/// `toolgate config` with `args`: its exit status, stdout and stderr.
async fn config(args: &[&str]) -> (Option<i32>, String, String) {
    run_toolgate(&[&["config"], args].concat()).await
}

/// `toolgate config check` of a file holding `text`: its exit status, its stderr, and the
/// file's path, which the lines name.
async fn check_text(text: &str) -> (Option<i32>, String, String) {
    let file = tempfile_lite::TempFile::new(text);
    let path = file.path.display().to_string();
    let (code, _, err) = config(&["check", &path]).await;
    (code, err, path)
}

#[tokio::test]
async fn the_configuration_example_passes_its_own_check() {
    let (code, example, err) = config(&["example"]).await;
    assert_eq!(code, Some(0), "{err}");
    for key in [
        "max_list_pages",
        "mask_internal",
        "[tls]",
        "[[upstreams]]",
        "extra_schema",
    ] {
        assert!(example.contains(key), "the example carries {key}");
    }
    let file = tempfile_lite::TempFile::new(&example);
    let path = file.path.display().to_string();
    let (code, out, err) = config(&["check", &path]).await;
    assert_eq!((code, err.as_str()), (Some(0), ""));
    assert_eq!(out, format!("{path}: ok\n"));
}

/// An operator's `extra_schema` holds whole or not at all: a pattern toolgate's engine cannot
/// run (a lookahead meant to keep `..` out of a path) is refused when the configuration is
/// read, where a tool's own schema is checked without it.
#[tokio::test]
async fn an_operators_pattern_toolgate_cannot_run_is_refused() {
    let file = tempfile_lite::TempFile::new(
        "upstream = \"http://127.0.0.1:9/mcp\"\n[validation.tools.read_file]\nextra_schema = '{\"properties\": {\"path\": {\"pattern\": \"^(?!.*\\\\.\\\\.)\"}}}'\n",
    );
    let path = file.path.display().to_string();
    let (code, _, err) = run_toolgate(&["config", "check", &path]).await;
    let why = "upstream default, tool read_file: extra_schema has patterns toolgate's regular-expression engine cannot run (a lookaround, a backreference) at /properties/path: write them without";
    assert_eq!(
        (code, err),
        (
            Some(1),
            format!("toolgate config check: configuration: {why}\n")
        )
    );
}

/// A transport is an HTTP server's: given for a command, or for no server, it is refused with
/// what it applies to, in a file and on every command line that takes it.
#[tokio::test]
async fn a_transport_given_for_no_http_server_is_refused() {
    let file = tempfile_lite::TempFile::new("command = [\"srv\"]\nupstream_transport = \"sse\"\n");
    let path = file.path.display().to_string();
    let in_file = "upstream_transport is the transport of the HTTP server on /mcp (upstream), and there is none; a stdio server (command) speaks stdio, and each of [[upstreams]] has its own transport";
    let (code, _, err) = run_toolgate(&["config", "check", &path]).await;
    assert_eq!(
        (code, err),
        (
            Some(1),
            format!("toolgate config check: configuration: {in_file}\n")
        )
    );
    let serve = [
        "serve",
        "--upstream-transport",
        "sse",
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "off",
        "--",
        "srv",
    ];
    let (code, _, err) = run_toolgate(&serve).await;
    assert_eq!(
        (code, err),
        (Some(1), format!("toolgate: configuration: {in_file}\n"))
    );
    let flag = "--upstream-transport is the transport of --upstream URL";
    for args in [
        &["stdio", "--upstream-transport", "sse", "--", "srv"][..],
        &["check", "--upstream-transport", "sse", "--", "srv"][..],
    ] {
        let (code, _, err) = run_toolgate(args).await;
        assert_eq!(code, Some(1), "{args:?}: {err}");
        assert!(
            err.starts_with(&format!("toolgate: {flag}")),
            "{args:?}: {err}"
        );
    }
}

/// A named server is an HTTP server (`url`) or a stdio server (`command`), with only what
/// applies to its kind; the configuration check says which key is wrong.
#[tokio::test]
async fn a_named_server_is_a_url_or_a_command_with_only_what_applies() {
    let cases = [
        (
            "url = \"http://127.0.0.1:9/mcp\"\ncommand = [\"srv\"]\n",
            "upstreams \"files\": give either url or command, not both",
        ),
        (
            "",
            "upstreams \"files\": give its url, or the command that starts it",
        ),
        (
            "command = [\"srv\"]\ntls = { only_ca_file = true }\n",
            "upstreams \"files\": tls is for an https:// url; a stdio server (command) has none",
        ),
        (
            "command = [\"srv\"]\nupstream_header = { env = \"HOME\" }\n",
            "upstreams \"files\": upstream_header is sent to an HTTP server; a stdio server (command) gets no headers",
        ),
        (
            "url = \"http://127.0.0.1:9/mcp\"\nupstream_env = [\"KEY\"]\n",
            "upstreams \"files\": upstream_env is given to a stdio server (command); an HTTP server gets upstream_header",
        ),
        (
            "command = [\"srv\"]\nlimits = { stream_gap_timeout = \"1m\" }\n",
            "upstreams \"files\": limits.stream_gap_timeout bounds an HTTP server's event stream; a stdio server (command) is held to upstream_timeout",
        ),
        (
            "url = \"http://127.0.0.1:9/mcp\"\nstdio = { max_sessions = 2 }\n",
            "upstreams \"files\": stdio bounds a stdio server's children (and an HTTP+SSE server's sessions); a Streamable HTTP server (url) has none",
        ),
        (
            "command = [\"srv\"]\ntransport = \"sse\"\n",
            "upstreams \"files\": transport is an HTTP server's (url); a stdio server (command) speaks stdio",
        ),
        (
            "command = [\"srv\"]\nupstream_env = [\"KEY=value\"]\n",
            "upstreams \"files\": upstream_env \"KEY=value\" is not the name of an environment variable",
        ),
    ];
    let named_default = "upstream = \"http://127.0.0.1:9/mcp\"\n[[upstreams]]\nname = \"default\"\nurl = \"http://127.0.0.1:9/b\"\n";
    let file = tempfile_lite::TempFile::new(named_default);
    let (code, _, err) = config(&["check", &file.path.display().to_string()]).await;
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err,
        "toolgate config check: configuration: upstreams \"default\": the server on /mcp has that name; give this one another\n"
    );
    for (keys, says) in cases {
        let text = format!("[[upstreams]]\nname = \"files\"\n{keys}");
        let file = tempfile_lite::TempFile::new(&text);
        let path = file.path.display().to_string();
        let (code, _, err) = config(&["check", &path]).await;
        assert_eq!(code, Some(1), "{text}");
        assert_eq!(err, format!("toolgate config check: {says}\n"), "{text}");
    }
}

/// An allowed origin is written as a browser sends `Origin`, or it would match no request:
/// one that is not an origin, has a path or names the default port is refused with what to
/// write; a trailing slash, capitals, another scheme, `"*"` and `"null"` are taken.
#[tokio::test]
async fn an_allowed_origin_is_written_as_browsers_send_it() {
    let refused = [
        (
            "app.example.com",
            "is not an origin: write it as a browser sends it, scheme://host[:port] (\"https://app.example.com\")",
        ),
        (
            "https://app.example.com/ui",
            "is not an origin: an origin has no path, query or user; write \"https://HOST[:PORT]\"",
        ),
        (
            "https://app.example.com:443",
            "names the default port, which a browser leaves out of Origin: write \"https://app.example.com\"",
        ),
        (
            "http://[::1]:80",
            "names the default port, which a browser leaves out of Origin: write \"http://[::1]\"",
        ),
    ];
    for (origin, why) in refused {
        let file = tempfile_lite::TempFile::new(&format!("allowed_origins = [\"{origin}\"]\n"));
        let (code, _, err) = config(&["check", &file.path.display().to_string()]).await;
        assert_eq!(code, Some(1), "{origin}");
        let said = format!("toolgate config check: allowed_origins \"{origin}\" {why}\n");
        assert_eq!(err, said, "{origin}");
    }
    let taken = r#"allowed_origins = ["https://app.example.com/", "HTTPS://App.Example.com", "http://localhost:5173", "chrome-extension://abcdef", "null", "*"]"#;
    let file = tempfile_lite::TempFile::new(taken);
    let (code, out, err) = config(&["check", &file.path.display().to_string()]).await;
    assert_eq!((code, err.as_str()), (Some(0), ""), "{out}");
}

/// A bound at zero would refuse every call, session or connection, or check nothing, so it is
/// refused by name, in the global tables and in a named server's own alike; a zero grace
/// (stop at once) is not a bound and stays allowed.
#[tokio::test]
async fn a_bound_at_zero_is_refused_by_name() {
    let global = [
        ("limits", "max_body_bytes", "0"),
        ("limits", "max_response_bytes", "0"),
        ("limits", "max_sse_event_bytes", "0"),
        ("limits", "max_schema_bytes", "0"),
        ("limits", "upstream_timeout", "\"0s\""),
        ("limits", "stream_gap_timeout", "\"0s\""),
        ("limits", "header_timeout", "\"0s\""),
        ("limits", "body_timeout", "\"0ms\""),
        ("limits", "idle_timeout", "\"0s\""),
        ("limits", "send_timeout", "\"0s\""),
        ("limits", "max_connections", "0"),
        ("limits", "max_scopes", "0"),
        ("limits", "max_list_pages", "0"),
        ("limits", "max_catalog_bytes", "0"),
        ("limits", "max_request_bytes_in_flight", "0"),
        ("stdio", "max_sessions", "0"),
        ("stdio", "max_sessions_per_client", "0"),
        ("stdio", "idle_timeout", "\"0s\""),
        ("stdio", "max_in_flight", "0"),
    ];
    let mut cases: Vec<(String, String)> = global
        .iter()
        .map(|(table, key, zero)| {
            (
                format!("[{table}]\n{key} = {zero}\n"),
                format!("{table}.{key}"),
            )
        })
        .collect();
    let jwt = "[auth]\npublic_url = \"https://gw.test\"\n[auth.jwt]\nissuer = \"https://issuer.test\"\njwks_file = \"/dev/null\"\n";
    cases.push((
        format!("{jwt}refresh = \"0s\"\n"),
        "auth.jwt.refresh".into(),
    ));
    let (stdio, http) = ("command = [\"srv\"]", "url = \"http://127.0.0.1:9/mcp\"");
    let named = [
        (stdio, "stdio", "max_sessions", "0"),
        (stdio, "stdio", "idle_timeout", "\"0s\""),
        (http, "limits", "upstream_timeout", "\"0s\""),
        (http, "limits", "stream_gap_timeout", "\"0s\""),
    ];
    cases.extend(named.iter().map(|(server, table, key, zero)| {
        (
            format!("[[upstreams]]\nname = \"files\"\n{server}\n{table} = {{ {key} = {zero} }}\n"),
            format!("upstreams \"files\": {table}.{key}"),
        )
    }));
    for (text, key) in cases {
        let file = tempfile_lite::TempFile::new(&text);
        let (code, _, err) = config(&["check", &file.path.display().to_string()]).await;
        assert_eq!(code, Some(1), "{text}");
        assert_eq!(
            err,
            format!("toolgate config check: {key} must be above 0\n"),
            "{text}"
        );
    }
    let grace = "[limits]\nshutdown_grace = \"0s\"\n[stdio]\nshutdown_grace = \"0s\"\n";
    let file = tempfile_lite::TempFile::new(grace);
    let (code, out, err) = config(&["check", &file.path.display().to_string()]).await;
    assert_eq!((code, err.as_str()), (Some(0), ""), "{out}");

    let zero_timeout = "[limits]\nupstream_timeout = \"0s\"\n";
    let (code, err) = serve_configured("http://127.0.0.1:9/mcp", zero_timeout).await;
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("limits.upstream_timeout must be above 0"),
        "{err}"
    );
}

/// Every problem on a line of its own, exit status 1, whatever `RUST_BACKTRACE` says (a
/// table written as a value is named for its shape); and what `serve` would read beyond the
/// file (a certificate) is read too.
#[tokio::test]
async fn a_configuration_check_says_each_problem_on_one_line() {
    let typos = "[validation]\nmod = \"audit\"\n[limits]\nmax_body_byte = 3\n[clients.bob]\nrate = \"1/second\"\n[auth]\ntokens = [\"x\"]\n";
    let file = tempfile_lite::TempFile::new(typos);
    let path = file.path.display().to_string();
    let (code, out, err) = config(&["check", &path]).await;
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(out, "");
    let mut lines: Vec<&str> = err.lines().collect();
    lines.sort_unstable();
    assert_eq!(
        lines,
        [
            format!(
                "toolgate config check: {path}: auth.tokens must be a list of tables, written [[auth.tokens]], not a list holding a string"
            ),
            format!(
                "toolgate config check: {path}: unknown key clients.bob.rate: did you mean clients.bob.rate_limit?"
            ),
            format!(
                "toolgate config check: {path}: unknown key limits.max_body_byte: did you mean limits.max_body_bytes?"
            ),
            format!(
                "toolgate config check: {path}: unknown key validation.mod: did you mean validation.mode?"
            ),
        ]
    );

    let tls = "[tls]\ncert_file = \"/nonexistent/cert.pem\"\nkey_file = \"/nonexistent/key.pem\"\n";
    let file = tempfile_lite::TempFile::new(tls);
    let (code, _, err) = config(&["check", &file.path.display().to_string()]).await;
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("tls.cert_file /nonexistent/cert.pem"), "{err}");

    let jwt = "[auth]\npublic_url = \"https://gw.test\"\n[auth.jwt]\nissuer = \"https://issuer.test\"\njwks_url = \"https://issuer.test/jwks\"\nca_file = \"/nonexistent/ca.pem\"\n";
    let file = tempfile_lite::TempFile::new(jwt);
    let (code, _, err) = config(&["check", &file.path.display().to_string()]).await;
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("auth.jwt.ca_file /nonexistent/ca.pem"),
        "{err}"
    );

    // A token stands for one client; two tokens for one client (a rotation) are fine.
    let (one, two) = (
        tempfile_lite::TempFile::new("a-token-of-32-characters-or-so-1"),
        tempfile_lite::TempFile::new("a-token-of-32-characters-or-so-2"),
    );
    let token = |name: &str, file: &tempfile_lite::TempFile| {
        format!(
            "[[auth.tokens]]\nname = \"{name}\"\nfile = \"{}\"\n",
            file.path.display()
        )
    };
    let shared = [token("bob", &one), token("al", &one)].concat();
    let file = tempfile_lite::TempFile::new(&shared);
    let (code, _, err) = config(&["check", &file.path.display().to_string()]).await;
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err,
        "toolgate config check: configuration: auth tokens \"bob\" and \"al\" hold the same token: each client needs its own\n"
    );
    let rotation = [token("bob", &one), token("bob", &two)].concat();
    let file = tempfile_lite::TempFile::new(&rotation);
    let (code, _, err) = config(&["check", &file.path.display().to_string()]).await;
    assert_eq!((code, err.as_str()), (Some(0), ""));

    let redis =
        "[shared_state]\nredis_url = \"redis://127.0.0.1:9/0\"\nca_file = \"/etc/hostname\"\n";
    let file = tempfile_lite::TempFile::new(redis);
    let (code, _, err) = config(&["check", &file.path.display().to_string()]).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("shared_state.ca_file is for a rediss:// redis_url"),
        "{err}"
    );
    let ca = common::tls_peer::Ca::new("a CA");
    let (chain, _) = ca.leaf(&["toolgate"]);
    let (_, other_key) = ca.leaf(&["toolgate"]);
    let (chain, other_key) = (
        tempfile_lite::TempFile::new(&chain),
        tempfile_lite::TempFile::new(&other_key),
    );
    let (cert, key) = (chain.path.display(), other_key.path.display());
    for (url, keys, expected) in [
        (
            "redis",
            format!("client_cert_file = \"{cert}\""),
            "shared_state.client_cert_file is for a rediss:// redis_url".to_owned(),
        ),
        (
            "rediss",
            format!("client_key_file = \"{key}\""),
            "give both shared_state.client_cert_file and client_key_file".to_owned(),
        ),
        (
            "rediss",
            format!("client_cert_file = \"{cert}\"\nclient_key_file = \"{key}\""),
            format!(
                "shared_state.client_cert_file {cert}: the client certificate and key do not go together"
            ),
        ),
    ] {
        let redis = format!("[shared_state]\nredis_url = \"{url}://redis.corp.test/0\"\n{keys}\n");
        let file = tempfile_lite::TempFile::new(&redis);
        let (code, _, err) = config(&["check", &file.path.display().to_string()]).await;
        assert_eq!(code, Some(1), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(&expected), "{err}");
    }

    // A log level that is no level would be read as a target, leaving out every other line.
    for (level, directive) in [
        ("verbose", "verbose"),
        ("info,toolgate=loud", "toolgate=loud"),
    ] {
        let file = tempfile_lite::TempFile::new(&format!("[log]\nlevel = \"{level}\"\n"));
        let (code, _, err) = config(&["check", &file.path.display().to_string()]).await;
        assert_eq!(code, Some(1), "{err}");
        assert_eq!(
            err,
            format!(
                "toolgate config check: log.level \"{level}\": \"{directive}\" is neither a level (trace, debug, info, warn, error, off) nor target=level (\"info,toolgate=debug\")\n"
            )
        );
    }
    let file =
        tempfile_lite::TempFile::new("[log]\nlevel = \"WARN,toolgate=debug,hyper[conn]=off\"\n");
    let (code, _, err) = config(&["check", &file.path.display().to_string()]).await;
    assert_eq!((code, err.as_str()), (Some(0), ""));

    let file = tempfile_lite::TempFile::new("[limits]\nidle_timeout = 5\n");
    let (code, _, err) = config(&["check", &file.path.display().to_string()]).await;
    assert_eq!(code, Some(1), "{err}");
    assert!(
        err.contains("expected a duration for key \"limits.idle_timeout\""),
        "the key as the file names it: {err}"
    );
}

/// A value none of a setting's names, and a key set from the environment that is none of its
/// table's, are each said with the names it could be, quoted once, and the nearest.
#[tokio::test]
async fn a_misspelt_name_is_said_with_the_nearest() {
    let (code, err, path) = check_text("[validation]\nmode = \"enforc\"\n").await;
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err,
        format!(
            "toolgate config check: unknown value `enforc`, expected one of `enforce`, `audit`, `off` for key \"validation.mode\" in {path}: did you mean `enforce`?\n"
        )
    );
    let file = tempfile_lite::TempFile::new("");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["config", "check", &file.path.display().to_string()])
        .env("TOOLGATE_ERRORS__MASK_INTERNALS", "true")
        .output()
        .await
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        "toolgate config check: unknown key `mask_internals`, expected one of `rewrite`, `mask_internal` for key \"ERRORS.MASK_INTERNALS\" in `TOOLGATE_` environment variable(s): did you mean `mask_internal`?\n"
    );
}

/// A value of the wrong type is said with what the key takes in an operator's words, not as
/// the Rust type behind it (`usize`, `struct Validation`).
#[tokio::test]
async fn a_wrong_type_is_said_in_words() {
    for (text, key, found, expected) in [
        (
            "[limits]\nmax_body_bytes = \"4MB\"\n",
            "limits.max_body_bytes",
            "type: found string \"4MB\"",
            "a whole number (0 or more)",
        ),
        (
            "[auth]\nrequired_scopes = \"mcp\"\n",
            "auth.required_scopes",
            "type: found string \"mcp\"",
            "a list",
        ),
    ] {
        let (code, err, path) = check_text(text).await;
        assert_eq!(code, Some(1), "{err}");
        assert_eq!(
            err,
            format!(
                "toolgate config check: invalid {found}, expected {expected} for key \"{key}\" in {path}\n"
            )
        );
    }
}

/// A configuration piped in (`/dev/stdin`, a process substitution) is read once, and checked
/// as written: a pipe has nothing left for a second read, which would pass an empty file.
#[tokio::test]
async fn a_piped_configuration_is_checked_as_written() {
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["config", "check", "/dev/stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stdin, b"[limits]\nidle_timeout = 5\n")
        .await
        .unwrap();
    drop(stdin);
    let out = child.wait_with_output().await.unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(
        err,
        "toolgate config check: invalid type: found signed int `5`, expected a duration for key \"limits.idle_timeout\" in /dev/stdin\n"
    );
}

async fn check(url: &str, format: &str) -> (i32, String, String) {
    let (code, out, err) = run_toolgate(&["check", "--upstream", url, "--format", format]).await;
    (code.unwrap_or(-1), out, err)
}

/// A server that wants a credential: without one, `check` says where to give it; with
/// `auth.upstream_header` in `--config`, it lists as the gateway would.
#[tokio::test]
async fn check_lists_with_the_configured_upstream_credential() {
    let mut scripted = Scripted::new(vec![open_tool("echo")]);
    scripted.required_header = Some(("authorization", "Bearer s3cret-upstream"));
    let (url, seen) = scripted.spawn().await;
    let (code, _, err) = check(&url, "text").await;
    assert_eq!(code, 2, "{err}");
    assert_eq!(
        err,
        format!(
            "toolgate check: cannot list the tools of {url}: initialize: the server answered HTTP 401: it wants credentials; give toolgate's in auth.upstream_header of a --config file\n"
        )
    );
    let secret = tempfile_lite::TempFile::new("Bearer s3cret-upstream");
    let file = tempfile_lite::TempFile::new(&format!(
        "upstream = \"{url}\"\n[auth.upstream_header]\nfile = \"{}\"\n",
        secret.path.display()
    ));
    let (code, out, err) =
        run_toolgate(&["check", "--config", &file.path.display().to_string()]).await;
    assert_eq!(code, Some(0), "{err}");
    assert!(
        out.starts_with(&format!("toolgate check {url}: 1 tools")),
        "{out}"
    );
    let last = seen.seen_headers.lock().unwrap().last().cloned().unwrap();
    assert_eq!(last["authorization"], "Bearer s3cret-upstream");
}

/// `toolgate check --config FILE` lists the server the file names.
#[tokio::test]
async fn check_reads_the_server_from_its_configuration() {
    let (addr, _) = toolgate::demo::spawn(([127, 0, 0, 1], 0).into(), Default::default())
        .await
        .unwrap();
    let file = tempfile_lite::TempFile::new(&format!("upstream = \"http://{addr}/mcp\"\n"));
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_toolgate"))
        .args(["check", "--config"])
        .arg(&file.path)
        .output()
        .await
        .unwrap();
    let out = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.starts_with(&format!("toolgate check http://{addr}/mcp: 6 tools")),
        "{out}"
    );
}

/// `toolgate check --config FILE` for a gateway of several servers: each one it names, in
/// its order, with the settings the gateway gives that server (here a credential of its own,
/// under its own header's name), an HTTP one or a stdio one; a server that cannot be listed
/// is said on stderr, the others are still reported, and the status is 2.
/// A rule that names tools and matches none of the servers it applies to is said, where it
/// is written (a misspelt deny list leaves its tool reachable); one that matches a tool of
/// any of its servers, or applies to a server that could not be listed, is not.
#[tokio::test]
async fn check_says_which_rules_match_no_listed_tool() {
    let (files, _) = Scripted::new(vec![open_tool("read_file"), open_tool("delete_file")])
        .spawn()
        .await;
    let (billing, _) = Scripted::new(vec![open_tool("invoice")]).spawn().await;
    let gone = format!("http://127.0.0.1:{}/mcp", closed_port());
    let token = tempfile_lite::TempFile::new("a-token-of-32-characters-or-so-1");
    let config = format!(
        r#"upstream = "{files}"

[validation]
deny_tools = ["delete_fle", "delete_*"]
[validation.tools.read_fil]
mode = "audit"

[[upstreams]]
name = "billing"
url = "{billing}"
validation = {{ allow_tools = ["invoice", "refund"], tools = {{ invoic = {{ mode = "audit" }} }} }}

[[upstreams]]
name = "gone"
url = "{gone}"
validation = {{ deny_tools = ["anything"] }}

[[auth.tokens]]
name = "bot"
file = "{}"

[clients.bot]
upstreams = ["default", "billing"]
deny_tools = ["read_file"]
tool_rate_limits = {{ invoic = "1/second" }}

[clients."*"]
deny_tools = ["refnd"]
"#,
        token.path.display()
    );
    let file = tempfile_lite::TempFile::new(&config);
    let (code, _, err) =
        run_toolgate(&["check", "--config", &file.path.display().to_string()]).await;
    assert_eq!(code, Some(2), "one server cannot be listed: {err}");
    let said: Vec<&str> = err.lines().filter(|l| !l.contains("cannot list")).collect();
    let misspelt = |rule: &str| {
        format!("toolgate check: {rule} matches no tool that its servers list: misspelt?")
    };
    // Not said: what matches on one of its servers (`delete_*`, `read_file`, `invoice`),
    // and what applies to the server that could not be listed (`anything`, the global
    // `read_fil`, every client's `refnd`).
    assert_eq!(
        said,
        [
            misspelt(r#"clients."bot".tool_rate_limits "invoic""#),
            misspelt(r#"upstreams "billing" validation.allow_tools "refund""#),
            misspelt(r#"upstreams "billing" validation.tools "invoic""#),
            misspelt(r#"validation.deny_tools "delete_fle""#),
        ],
        "{err}"
    );
}

#[tokio::test]
async fn check_lists_every_server_a_configuration_names_with_its_own_settings() {
    let (addr, _) = toolgate::demo::spawn(([127, 0, 0, 1], 0).into(), Default::default())
        .await
        .unwrap();
    let mut billing = Scripted::new(vec![open_tool("invoice")]);
    billing.required_header = Some(("x-api-key", "billing-key"));
    let (billing, _) = billing.spawn().await;
    let p = tokio::task::spawn_blocking(common::peers::peers)
        .await
        .unwrap();
    let fixture = p.fixtures.join("stdio_server.py").display().to_string();
    let python = p.python.display().to_string();
    // Named by its program, its arguments elided (one may be a secret).
    let program = p.python.file_name().unwrap().to_string_lossy();
    let key = tempfile_lite::TempFile::new("billing-key");
    let servers = format!(
        "upstream = \"http://{addr}/mcp\"\n\n[[upstreams]]\nname = \"billing\"\nurl = \"{billing}\"\nupstream_header = {{ name = \"x-api-key\", file = \"{}\" }}\n\n[[upstreams]]\nname = \"files\"\ncommand = {}\n",
        key.path.display(),
        json!([python, fixture]),
    );
    let file = tempfile_lite::TempFile::new(&servers);
    let path = file.path.display().to_string();
    let (code, out, err) = run_toolgate(&["check", "--config", &path]).await;
    assert_eq!(code, Some(0), "{err}{out}");
    let summaries: Vec<&str> = (out.lines())
        .filter(|l| l.starts_with("toolgate check "))
        .collect();
    assert_eq!(summaries.len(), 3, "{out}");
    assert!(
        summaries[0].starts_with(&format!("toolgate check http://{addr}/mcp: 6 tools")),
        "{out}"
    );
    assert!(
        summaries[1].starts_with(&format!("toolgate check billing ({billing}): 1 tools")),
        "{out}"
    );
    assert!(
        summaries[2].starts_with(&format!("toolgate check files ({program} …): ")),
        "{out}"
    );
    let (_, out, _) = run_toolgate(&["check", "--config", &path, "--format", "json"]).await;
    let reports: serde_json::Value = serde_json::from_str(&out).unwrap();
    let labels: Vec<&str> = (reports.as_array().unwrap().iter())
        .map(|r| r["upstream"].as_str().unwrap())
        .collect();
    assert_eq!(
        labels,
        [
            format!("http://{addr}/mcp"),
            format!("billing ({billing})"),
            format!("files ({program} …)")
        ]
    );

    let port = closed_port();
    let gone = format!(
        "{servers}\n[[upstreams]]\nname = \"gone\"\nurl = \"http://127.0.0.1:{port}/mcp\"\n"
    );
    let file = tempfile_lite::TempFile::new(&gone);
    let (code, out, err) =
        run_toolgate(&["check", "--config", &file.path.display().to_string()]).await;
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.starts_with(&format!(
            "toolgate check: cannot list the tools of gone (http://127.0.0.1:{port}/mcp): "
        )),
        "{err}"
    );
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with("toolgate check "))
            .count(),
        3,
        "{out}"
    );
}

#[tokio::test]
async fn check_passes_a_clean_server() {
    let (addr, _) = toolgate::demo::spawn(
        ([127, 0, 0, 1], 0).into(),
        toolgate::demo::Options {
            page_size: 2,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let (code, out, _) = check(&format!("http://{addr}/mcp"), "text").await;
    assert_eq!(code, 0, "{out}");
    let (summary, problems, open) = check_output(&out);
    assert_eq!(
        summary,
        format!("toolgate check http://{addr}/mcp: 6 tools, 0 errors, 0 warnings, 4 notes")
    );
    assert!(problems.is_empty(), "{out}");
    assert_eq!(open, ["add", "plan_trip", "lookup_order", "countdown"]);
}

#[tokio::test]
async fn check_reports_what_would_fail_at_runtime() {
    let extra = vec![
        json!({"name": "bad name", "description": "d", "inputSchema": {"type": "object"}}),
        json!({"name": "remote", "description": "d", "inputSchema": {"type": "object", "properties": {"x": {"$ref": "https://example.com/s.json", "description": "x"}}}}),
        json!({"name": "listy", "description": "d", "inputSchema": {"type": "array"}}),
        json!({"name": "quiet", "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}}),
        json!({"name": "round", "description": "d", "inputSchema": {"type": "object", "additionalProperties": false, "anyOf": [
            {"properties": {"x": {"$ref": "#", "description": "x"}}, "required": ["a"]},
            {"properties": {"x": {"$ref": "#", "description": "x"}}, "required": ["b"]}]}}),
        json!({"name": "ahead", "description": "d", "inputSchema": {"type": "object", "additionalProperties": false,
            "properties": {"every": {"type": "string", "pattern": "^P(?!.*W)", "description": "how often"}}}}),
        json!({"name": "priced", "description": "d", "inputSchema": {"type": "object", "additionalProperties": false,
            "properties": {"price": {"type": "number", "multipleOf": 0.01, "description": "in euros"}}}}),
    ];
    let (addr, _) = toolgate::demo::spawn(
        ([127, 0, 0, 1], 0).into(),
        toolgate::demo::Options {
            extra_tools: extra,
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let url = format!("http://{addr}/mcp");
    let (code, out, _) = check(&url, "json").await;
    assert_eq!(code, 1, "{out}");
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["errors"], 3);
    assert_eq!(r["warnings"], 4);
    assert_eq!(
        r["notes"], 8,
        "the demo's four open tools and four of these"
    );
    let problems: Vec<(String, String, String)> = r["problems"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| {
            !["add", "plan_trip", "lookup_order", "countdown"]
                .contains(&p["tool"].as_str().unwrap())
        })
        .map(|p| {
            (
                p["tool"].as_str().unwrap().into(),
                p["severity"].as_str().unwrap().into(),
                p["kind"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expected = [
        ("bad name", "error", "name"),
        ("bad name", "note", "open_properties"),
        ("remote", "error", "input_schema"),
        ("remote", "note", "open_properties"),
        ("listy", "error", "invalid_schema"),
        ("quiet", "warning", "description"),
        ("quiet", "note", "open_properties"),
        ("quiet", "warning", "description"),
        ("round", "warning", "input_schema"),
        ("ahead", "warning", "input_schema"),
        ("priced", "note", "decimal_multiple"),
    ];
    assert_eq!(
        problems,
        expected
            .iter()
            .map(|(a, b, c)| (a.to_string(), b.to_string(), c.to_string()))
            .collect::<Vec<_>>()
    );
    assert!(
        r["problems"][6]["message"]
            .as_str()
            .unwrap()
            .starts_with("inputSchema does not compile"),
        "{r}"
    );
    assert_eq!(
        r["problems"][8]["message"],
        "inputSchema is invalid: its root is not an object schema (\"type\": \"object\"), as MCP requires; toolgate hides this tool from tools/list (validation.invalid_tool_schemas = \"hide\")"
    );
    assert_eq!(
        r["problems"][12]["message"],
        "inputSchema's references multiply the checks at each level of a value (two ways lead round to one place through the same member): arguments are checked up to 17 levels deep, and a deeper call follows validation.on_compile_error"
    );
    assert_eq!(
        r["problems"][13]["message"],
        "inputSchema has patterns toolgate's regular-expression engine cannot run (a lookaround, a backreference) at /properties/every: toolgate does not check them, the server does, and the rest of the schema is checked"
    );
    assert_eq!(
        r["problems"][14]["message"],
        "multipleOf of a decimal fraction at /properties/price (0.01): toolgate judges it in decimal (19.99 is a multiple of 0.01), and a server that checks it with a validator dividing in binary floating point (Python's jsonschema, Ajv by default) refuses some multiples toolgate forwards"
    );
    let nowhere = format!("http://127.0.0.1:{}/mcp", common::closed_port());
    let (code, _, err) = check(&nowhere, "text").await;
    assert_eq!(code, 2);
    assert!(
        err.contains(&format!("cannot list the tools of {nowhere}")),
        "{err}"
    );
}

/// `toolgate serve` with `args` and `RUST_BACKTRACE=1`, as many Rust users run everything:
/// its exit status and stderr.
async fn serve_fails(args: &[&str]) -> (Option<i32>, String) {
    let (code, _, err) = run_toolgate(&[&["serve"], args].concat()).await;
    (code, err)
}

/// `toolgate serve --upstream URL` with a configuration file of `config`: see [`serve_fails`].
async fn serve_configured(url: &str, config: &str) -> (Option<i32>, String) {
    let file = tempfile_lite::TempFile::new(config);
    let path = file.path.display().to_string();
    let args = [
        "--upstream",
        url,
        "--admin-listen",
        "off",
        "--listen",
        "127.0.0.1:0",
        "--config",
        &path,
    ];
    serve_fails(&args).await
}

/// A server at the gateway's own listener would send each request back to it, and on again:
/// refused at start, whether the URL names the address or `localhost`.
#[tokio::test]
async fn a_server_at_the_gateways_own_listener_is_refused_at_start() {
    let port = closed_port();
    let listen = format!("127.0.0.1:{port}");
    for host in ["127.0.0.1", "localhost"] {
        let upstream = format!("http://{host}:{port}/mcp");
        let args = [
            "--listen",
            &listen,
            "--admin-listen",
            "off",
            "--upstream",
            &upstream,
        ];
        let (code, err) = serve_fails(&args).await;
        assert_eq!(code, Some(1), "{err}");
        assert_eq!(
            err,
            format!(
                "toolgate: configuration: the server \"default\" ({upstream}) is this gateway's own listener: each request would come back to it\n"
            )
        );
    }
}

/// What the configuration names and cannot be used stops toolgate before anything listens:
/// exit status 1 and one line that says what, whatever `RUST_BACKTRACE` says.
#[tokio::test]
async fn unusable_files_and_addresses_stop_toolgate_with_one_line() {
    let plain = "http://127.0.0.1:9/mcp";
    let tls = "[tls]\ncert_file = \"/nonexistent/cert.pem\"\nkey_file = \"/nonexistent/key.pem\"\n";
    let (code, err) = serve_configured(plain, tls).await;
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("tls.cert_file /nonexistent/cert.pem"), "{err}");
    assert!(!err.contains("listening"), "{err}");

    let ca = "[upstream_tls]\nca_file = \"/nonexistent/ca.pem\"\n";
    let (code, err) = serve_configured("https://127.0.0.1:9/mcp", ca).await;
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("upstream_tls.ca_file /nonexistent/ca.pem"),
        "{err}"
    );

    let jwt = "[auth]\npublic_url = \"https://gw.test\"\n[auth.jwt]\nissuer = \"https://issuer.test\"\njwks_file = \"/dev/null\"\nca_file = \"/nonexistent/ca.pem\"\n";
    let (code, err) = serve_configured(plain, jwt).await;
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("auth.jwt.ca_file is for jwks_url"), "{err}");

    let (code, err) = serve_configured(plain, "[reload]\ninterval = \"0s\"\n").await;
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("reload.interval"), "{err}");

    let upstream = ["--upstream", plain, "--admin-listen", "off"];
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let (code, err) = serve_fails(&[&upstream[..], &["--listen", &addr]].concat()).await;
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("--listen"), "the way out is named: {err}");

    // A host name is an address too.
    let tg = Toolgate::start_raw(
        [
            "serve",
            "--upstream",
            "http://127.0.0.1:9/mcp",
            "--listen",
            "localhost:0",
            "--admin-listen",
            "127.0.0.1:0",
        ]
        .map(String::from)
        .to_vec(),
    )
    .await;
    assert!(tg.addr.ip().is_loopback());
    // And in a file, where both addresses are read as `--listen` reads one.
    let file = tempfile_lite::TempFile::new(&format!(
        "listen = \"localhost:0\"\nadmin_listen = \"localhost:0\"\nupstream = \"http://127.0.0.1:{}/mcp\"\n",
        closed_port()
    ));
    let path = file.path.display().to_string();
    let tg = Toolgate::start_raw(["serve", "--config", &path].map(String::from).to_vec()).await;
    assert!(tg.addr.ip().is_loopback());
    assert_eq!(tg.admin_get("/healthz").await.status, 200);
    let file = tempfile_lite::TempFile::new("admin_listen = \"9090\"\n");
    let (code, _, err) = config(&["check", &file.path.display().to_string()]).await;
    assert_eq!(code, Some(1), "{err}");
    assert_eq!(
        err,
        "toolgate config check: admin_listen: \"9090\" is not an address to listen on (invalid socket address); give IP:PORT or HOST:PORT, e.g. 127.0.0.1:8080 or localhost:8080, or \"off\"\n"
    );
}

/// As a container's first process (the first of its PID namespace), toolgate runs the
/// gateway as its child and waits for every process handed to it: what a server leaves
/// behind does not stay a zombie once its session ends, the signals meant for the gateway
/// reach it, and it exits as the gateway did, under `serve -- CMD` and `stdio -- CMD`.
#[tokio::test]
async fn as_a_containers_first_process_it_waits_for_every_orphan_and_passes_signals_on() {
    use common::processes::{children_of, first_in_a_pid_namespace, wait_for};
    use common::stdio_gate::StdioGate;
    use nix::sys::signal::{Signal, kill};
    let signal = |pid: u32, s: Signal| kill(nix::unistd::Pid::from_raw(pid as i32), s).unwrap();
    let launcher = first_in_a_pid_namespace();
    // A launcher that leaves a process behind: its subshell ends at once, orphaning `sleep`.
    let mut command: Vec<String> = ["sh", "-c", "(sleep 300 &); exec \"$0\" \"$@\""]
        .map(String::from)
        .into();
    command.extend(common::peers::stdio_fixture(&[]).await);
    // toolgate as the namespace's first process, and the gateway it runs.
    let init_and_gateway = |launched: u32, front: &str| {
        let init = children_of(launched)
            .pop()
            .expect("unshare runs toolgate")
            .pid;
        let gateway = children_of(init)
            .into_iter()
            .find(|p| p.cmdline.contains(&format!("\0{front}\0")))
            .expect("the gateway is the first process's child");
        (init, gateway.pid)
    };
    let orphans = |init: u32, gateway: u32| {
        let others = children_of(init).into_iter().filter(|p| p.pid != gateway);
        others.map(|p| (p.zombie, p.cmdline)).collect::<Vec<_>>()
    };

    let mut tg = Toolgate::in_front_of_through(&launcher, &command, None, &[]).await;
    let (init, gateway) = init_and_gateway(tg.pid(), "serve");
    for _ in 0..3 {
        let s = open_session(&tg.url()).await;
        assert!(
            wait_for(|| orphans(init, gateway) == [(false, "sleep\u{0}300\u{0}".to_string())])
                .await,
            "the session's orphan is the first process's: {:?}",
            orphans(init, gateway)
        );
        let r = request(
            http::Method::DELETE,
            &tg.url(),
            &[("mcp-session-id", &s)],
            "",
        )
        .await;
        assert_eq!(r.status, 200);
        let settled =
            || orphans(init, gateway).is_empty() && children_of(gateway).iter().all(|p| !p.zombie);
        assert!(
            wait_for(settled).await,
            "the orphan ended with its session's group and was waited for, and so was the \
             group's keeper: {:?} {:?}",
            orphans(init, gateway),
            children_of(gateway)
        );
    }
    signal(init, Signal::SIGHUP);
    tg.logs_when(|l| l.contains("configuration reloaded (SIGHUP)"))
        .await;
    signal(init, Signal::SIGTERM);
    let status = in_time(tg.wait()).await;
    assert!(status.success(), "{status:?}: {}", tg.logs());
    // Its last lines may still be on their way from the pipe when it has been waited for.
    let said = "shutting down: finishing in-flight requests";
    let logs = tg.logs_when(|l| l.contains(said)).await;
    assert!(logs.contains(said), "{logs}");

    let mut args = vec!["stdio".to_string(), "--".into()];
    args.extend(command.iter().cloned());
    let mut g = StdioGate::start_through(&launcher, args, &[]);
    g.initialize().await;
    let (init, gateway) = init_and_gateway(g.child.id().unwrap(), "stdio");
    assert!(wait_for(|| orphans(init, gateway).len() == 1).await);
    drop(g.stdin.take());
    let status = in_time(g.child.wait()).await.unwrap();
    assert!(status.success(), "{status:?}: {}", g.logs());

    let program = ["stdio", "--", "/no/such/program"].map(String::from).into();
    let mut g = StdioGate::start_through(&launcher, program, &[]);
    let status = in_time(g.child.wait()).await.unwrap();
    assert_eq!(
        status.code(),
        Some(1),
        "the gateway's own exit status: {}",
        g.logs()
    );

    // A gateway a signal ends: 128 and the signal's number, as a shell reports it.
    let mut args = vec!["stdio".to_string(), "--".into()];
    args.extend(command.iter().cloned());
    let mut g = StdioGate::start_through(&launcher, args, &[]);
    g.initialize().await;
    let (_, gateway) = init_and_gateway(g.child.id().unwrap(), "stdio");
    signal(gateway, Signal::SIGKILL);
    let status = in_time(g.child.wait()).await.unwrap();
    assert_eq!(status.code(), Some(128 + 9), "{}", g.logs());
}

/// What `ended` gives, within 20 s.
async fn in_time<T>(ended: impl std::future::Future<Output = T>) -> T {
    let within = tokio::time::timeout(std::time::Duration::from_secs(20), ended);
    within.await.expect("ended within 20 s")
}

/// The stdio servers toolgate runs are held to what its descriptor limit leaves them: at a
/// limit of 256, six (each holds five descriptors, of the last quarter less 32), whatever
/// `stdio.max_sessions` allows. The next session is refused unstarted, as busy, the probes
/// still answer, and a session ended gives its place back.
#[tokio::test]
async fn its_stdio_servers_are_held_to_what_its_descriptor_limit_leaves_them() {
    let launcher: Vec<String> = ["sh", "-c", "ulimit -n 256 && exec \"$0\" \"$@\""]
        .map(String::from)
        .into();
    let command = common::peers::stdio_fixture(&[]).await;
    let config = "[stdio]\nmax_sessions_per_client = 100\n";
    let tg = Toolgate::in_front_of_through(&launcher, &command, Some(config), &[]).await;
    let mut sessions = Vec::new();
    for _ in 0..6 {
        sessions.push(open_session(&tg.url()).await);
    }
    let init = json!({"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let r = post(&tg.url(), None, init.to_string()).await;
    assert_eq!(
        r.json(),
        json!({"jsonrpc": "2.0", "id": 7, "error": {"code": -32603,
            "message": "Server busy: the gateway runs 6 stdio servers' processes, as many as its descriptor limit leaves them; the session was not started"}}),
        "{}",
        tg.logs()
    );
    assert!(r.headers.get("mcp-session-id").is_none());
    assert_eq!(tg.admin_get("/readyz").await.status, 200);
    let r = request(
        http::Method::DELETE,
        &tg.url(),
        &[("mcp-session-id", &sessions[0])],
        "",
    )
    .await;
    assert_eq!(r.status, 200);
    // Its place comes back once its server has ended.
    for attempt in 0.. {
        let r = post(&tg.url(), None, init.to_string()).await;
        if r.headers.get("mcp-session-id").is_some() {
            break;
        }
        assert!(attempt < 100, "{}", r.text());
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The stdio servers toolgate starts get the soft descriptor limit toolgate was started
/// with, not the one it raises its own to, so that a server written for the usual limit
/// (`select`, a loop over every descriptor) runs as it would without toolgate: under
/// `serve -- CMD` (a session's server) and `stdio -- CMD`.
#[tokio::test]
async fn its_servers_start_with_the_descriptor_limit_it_was_started_with() {
    use common::processes::{Process, children_of, wait_for};
    use common::stdio_gate::StdioGate;
    let (_, hard) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
        .expect("the test's own descriptor limit");
    assert!(
        hard > 512,
        "a hard descriptor limit above 512 to start toolgate below it"
    );
    let launcher: Vec<String> = ["sh", "-c", "ulimit -Sn 512 && exec \"$0\" \"$@\""]
        .map(String::from)
        .into();
    let command = common::peers::stdio_fixture(&[]).await;
    // (soft, hard) as /proc says them: "Max open files  512  20000  files".
    let limits = |pid: u32| -> (u64, u64) {
        let all = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
        let line = all
            .lines()
            .find(|l| l.starts_with("Max open files"))
            .unwrap();
        let mut n = line.split_whitespace().filter_map(|w| w.parse().ok());
        (n.next().unwrap(), n.next().unwrap())
    };
    let server = |gateway: u32| -> Option<Process> {
        let mut children = children_of(gateway).into_iter();
        children.find(|p| !p.cmdline.contains("keep-group") && !p.zombie)
    };

    let tg = Toolgate::in_front_of_through(&launcher, &command, None, &[]).await;
    assert_eq!(limits(tg.pid()), (hard, hard), "toolgate raised its own");
    open_session(&tg.url()).await;
    assert!(wait_for(|| server(tg.pid()).is_some()).await);
    let started = server(tg.pid()).unwrap();
    assert_eq!(limits(started.pid), (512, hard), "{}", started.cmdline);

    let mut args = vec!["stdio".to_string(), "--".into()];
    args.extend(command.iter().cloned());
    let mut g = StdioGate::start_through(&launcher, args, &[]);
    g.initialize().await;
    let gateway = g.child.id().unwrap();
    assert_eq!(limits(gateway), (hard, hard));
    let started = server(gateway).expect("the server it started");
    assert_eq!(limits(started.pid), (512, hard), "{}", started.cmdline);
    drop(g.stdin.take());
    let status = in_time(g.child.wait()).await.unwrap();
    assert!(status.success(), "{status:?}: {}", g.logs());
}
