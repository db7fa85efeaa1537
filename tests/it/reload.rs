//! Configuration reload: SIGHUP and a changed file both install a new configuration for the
//! next request, on connections already open; a configuration that does not load, or that
//! changes what needs a restart, is refused and the one in force stays.

use crate::common;
use bytes::Bytes;
use common::scripted::{Script, Scripted, open_tool};
use common::tempfile_lite::TempFile;
use common::{ACCEPT, Toolgate, call};
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use std::time::Duration;

/// One keep-alive HTTP/1.1 connection to toolgate, kept across reloads.
async fn connect(tg: &Toolgate) -> SendRequest<Full<Bytes>> {
    let stream = tokio::net::TcpStream::connect(tg.addr).await.unwrap();
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    sender
}

async fn send(conn: &mut SendRequest<Full<Bytes>>, body: String) -> Value {
    conn.ready().await.expect("the connection is still open");
    let req = http::Request::post("/mcp")
        .header("host", "127.0.0.1")
        .header("content-type", "application/json")
        .header("accept", ACCEPT)
        .body(Full::new(Bytes::from(body)))
        .unwrap();
    let resp = conn
        .send_request(req)
        .await
        .expect("the connection is still open");
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    serde_json::from_slice(&body).unwrap()
}

fn denied(answer: &Value) -> bool {
    answer["result"]["_meta"]["toolgate/policy"]["code"] == "tool_denied"
}

async fn wait_for_log(tg: &Toolgate, needle: &str, count: usize) {
    let logs = tg.logs_when(|l| l.matches(needle).count() >= count).await;
    assert!(
        logs.matches(needle).count() >= count,
        "no {count}x {needle:?} in the logs:\n{logs}"
    );
}

async fn start(config: &str) -> (Toolgate, TempFile, std::sync::Arc<Scripted>) {
    let (up, seen) = Scripted::new(vec![open_tool("echo"), open_tool("secret")])
        .spawn()
        .await;
    let file = TempFile::new(config);
    let mut args = vec![
        "serve".to_string(),
        "--upstream".into(),
        up,
        "--config".into(),
        file.path.display().to_string(),
    ];
    let tg = Toolgate::start(&mut args, None).await;
    (tg, file, seen)
}

fn rewrite(file: &TempFile, config: &str) {
    std::fs::write(&file.path, config).unwrap();
}

/// A configuration's one client, whose token `token` holds.
fn client_of(token: &TempFile) -> String {
    let path = token.path.display();
    format!("[[auth.tokens]]\nname = \"ci\"\nfile = \"{path}\"\n")
}

/// The status of a call to toolgate at `url` with `token`, if any.
async fn status(url: &str, token: Option<&str>) -> u16 {
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/json"), ("accept", ACCEPT)];
    headers.extend(bearer.as_deref().map(|b| ("authorization", b)));
    let body = call(1, "echo", json!({}));
    common::request(http::Method::POST, url, &headers, body)
        .await
        .status
}

#[tokio::test]
async fn sighup_installs_new_rules_without_dropping_connections() {
    let (tg, file, seen) = start("[reload]\nwatch = false\n").await;
    let mut conn = connect(&tg).await;
    let before = send(&mut conn, call(1, "secret", json!({}))).await;
    assert!(!denied(&before), "{before}");

    rewrite(
        &file,
        "[reload]\nwatch = false\n[validation]\ndeny_tools = [\"secret\"]\n",
    );
    tg.hup();
    wait_for_log(&tg, "configuration reloaded (SIGHUP)", 1).await;

    let after = send(&mut conn, call(2, "secret", json!({}))).await;
    assert!(denied(&after), "{after}");
    let ok = send(&mut conn, call(3, "echo", json!({}))).await;
    assert!(ok["result"]["isError"].is_null(), "{ok}");
    // The upstream saw the first call and the echo; counters carry over the reload.
    let calls: Vec<_> = seen
        .seen
        .lock()
        .unwrap()
        .iter()
        .filter(|m| m["method"] == "tools/call")
        .map(|m| m["params"]["name"].clone())
        .collect();
    assert_eq!(calls, [json!("secret"), json!("echo")]);
    let metrics = tg.admin_get("/metrics").await.text();
    assert!(
        metrics.contains("tool=\"secret\",outcome=\"forwarded\"} 1")
            && metrics.contains("tool=\"secret\",outcome=\"denied\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn a_changed_file_reloads_and_a_bad_one_is_refused() {
    let base = "[reload]\ninterval = \"100ms\"\n";
    let (tg, file, _) = start(&format!("{base}[validation]\ndeny_tools = [\"secret\"]\n")).await;
    let mut conn = connect(&tg).await;
    assert!(denied(&send(&mut conn, call(1, "secret", json!({}))).await));

    // Not TOML: refused, the old rules stay.
    rewrite(&file, "[validation\n");
    wait_for_log(
        &tg,
        "configuration not reloaded (the configuration file changed)",
        1,
    )
    .await;
    assert!(denied(&send(&mut conn, call(2, "secret", json!({}))).await));

    // Valid TOML, invalid value: refused too.
    rewrite(
        &file,
        &format!("{base}[validation]\nmode = \"strictest\"\n"),
    );
    wait_for_log(&tg, "configuration not reloaded", 2).await;

    // A new log level needs a restart: refused, and the log says so.
    rewrite(&file, &format!("{base}[log]\nlevel = \"debug\"\n"));
    wait_for_log(&tg, "take effect only on a restart", 1).await;
    assert!(denied(&send(&mut conn, call(3, "secret", json!({}))).await));

    // A good change applies.
    rewrite(&file, base);
    wait_for_log(
        &tg,
        "configuration reloaded (the configuration file changed)",
        1,
    )
    .await;
    let after = send(&mut conn, call(4, "secret", json!({}))).await;
    assert!(!denied(&after), "{after}");
}

#[tokio::test]
async fn a_reload_reads_rotated_secrets() {
    let token = TempFile::new("first-token-aaaaaaaaaaaa");
    let config = format!("[reload]\ninterval = \"100ms\"\n{}", client_of(&token));
    let (tg, file, _) = start(&config).await;
    let url = tg.url();
    let post = |t: &'static str| status(&url, Some(t));
    assert_eq!(post("first-token-aaaaaaaaaaaa").await, 200);
    rewrite(&token, "second-token-bbbbbbbbbbb");
    // The token file is not watched; the config file is. Touch it (same content is no change,
    // so add a comment) or send SIGHUP.
    rewrite(&file, &format!("{config}# rotated\n"));
    wait_for_log(&tg, "configuration reloaded", 1).await;
    assert_eq!(post("first-token-aaaaaaaaaaaa").await, 401);
    assert_eq!(post("second-token-bbbbbbbbbbb").await, 200);
}

/// A file written in place is empty, then half-written, for a moment: a content is installed
/// once two looks in a row find it, so that a look in that moment installs nothing. Here the
/// first half alone is a configuration without authentication, and eight edits follow one
/// another, each half held for far less than the watcher's interval, then each whole as
/// briefly, the last left: the last is installed once, and nothing before it.
#[tokio::test]
async fn a_file_caught_half_written_is_not_installed() {
    use std::io::Write;
    let token = TempFile::new("token-aaaaaaaaaaaaaaaa");
    let head = "[reload]\ninterval = \"2s\"\n";
    let rest = client_of(&token);
    let (tg, file, _) = start(&format!("{head}{rest}")).await;
    for edit in 1..=8 {
        let mut written = std::fs::File::create(&file.path).unwrap();
        // Each edit's own: one edit's half is no other's.
        let head = format!("# edit {edit}\n{head}");
        written.write_all(head.as_bytes()).unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        written.write_all(rest.as_bytes()).unwrap();
        drop(written);
        tokio::time::sleep(Duration::from_millis(300)).await;
    }
    wait_for_log(&tg, "configuration reloaded", 1).await;
    tokio::time::sleep(Duration::from_millis(2500)).await;
    let logs = tg.logs();
    let reloads = logs.matches("configuration reloaded").count();
    assert_eq!(reloads, 1, "the whole file alone is installed:\n{logs}");
    assert_eq!(status(&tg.url(), None).await, 401);
}

/// A FIFO holding `text` for one reader, removed when dropped. Its writer waits for the
/// reader, writes and closes, as a shell's `<(…)` does; a second reader would wait for ever.
struct Fifo {
    dir: std::path::PathBuf,
    path: std::path::PathBuf,
}

impl Fifo {
    fn new(text: &str) -> Fifo {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("toolgate-fifo-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("toolgate.toml");
        let made = std::process::Command::new("mkfifo").arg(&path).status();
        assert!(made.unwrap().success());
        let (to, text) = (path.clone(), text.to_owned());
        std::thread::spawn(move || std::fs::write(to, text));
        Fifo { dir, path }
    }
}

impl Drop for Fifo {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A configuration given through a pipe (`--config <(…)`, `/dev/stdin`, a FIFO) is read once
/// and layered again at every load: a second read would find nothing (every default, here no
/// authentication) or wait for a writer that never comes. `serve` and `demo` start with it,
/// and SIGHUP installs it again, its token file read again.
#[tokio::test]
async fn a_configuration_given_through_a_pipe_is_read_once() {
    let token = TempFile::new("token-aaaaaaaaaaaaaaaa");
    let config = client_of(&token);
    let (up, _) = Scripted::new(vec![open_tool("echo")]).spawn().await;
    for command in [vec!["serve", "--upstream", &up], vec!["demo"]] {
        let fifo = Fifo::new(&config);
        let mut args: Vec<String> = command.iter().map(|a| a.to_string()).collect();
        args.extend(["--config".into(), fifo.path.display().to_string()]);
        args.extend(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"].map(String::from));
        let tg = Toolgate::start_raw(args).await;
        for reloaded in [false, true] {
            if reloaded {
                rewrite(&token, "token-bbbbbbbbbbbbbbbb");
                tg.hup();
                wait_for_log(&tg, "configuration reloaded (SIGHUP)", 1).await;
            }
            let (good, old) = match reloaded {
                false => ("token-aaaaaaaaaaaaaaaa", "token-bbbbbbbbbbbbbbbb"),
                true => ("token-bbbbbbbbbbbbbbbb", "token-aaaaaaaaaaaaaaaa"),
            };
            assert_eq!(status(&tg.url(), None).await, 401, "{command:?}");
            assert_eq!(status(&tg.url(), Some(old)).await, 401, "{command:?}");
            assert_eq!(status(&tg.url(), Some(good)).await, 200, "{command:?}");
        }
        rewrite(&token, "token-aaaaaaaaaaaaaaaa");
    }
}

/// SIGHUP is listened for before toolgate says it listens: one sent the moment it does
/// reloads it, and never ends it (SIGHUP's default action).
#[tokio::test]
async fn a_sighup_the_moment_toolgate_listens_reloads_it() {
    for _ in 0..10 {
        let (tg, _file, _) = start("[reload]\nwatch = false\n").await;
        tg.hup();
        wait_for_log(&tg, "configuration reloaded (SIGHUP)", 1).await;
    }
}

/// `reload.watch = false` arriving through a reload stops the watching: a later edit waits
/// for SIGHUP.
#[tokio::test]
async fn watching_the_file_can_be_turned_off_by_a_reload() {
    let (tg, file, _) = start("[reload]\ninterval = \"100ms\"\n").await;
    let mut conn = connect(&tg).await;
    rewrite(
        &file,
        "[reload]\ninterval = \"100ms\"\nwatch = false\n[validation]\ndeny_tools = [\"secret\"]\n",
    );
    wait_for_log(
        &tg,
        "configuration reloaded (the configuration file changed)",
        1,
    )
    .await;
    assert!(denied(&send(&mut conn, call(1, "secret", json!({}))).await));
    rewrite(&file, "[reload]\ninterval = \"100ms\"\nwatch = false\n");
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    assert!(
        denied(&send(&mut conn, call(2, "secret", json!({}))).await),
        "the edit is not read while watching is off"
    );
    tg.hup();
    wait_for_log(&tg, "configuration reloaded (SIGHUP)", 1).await;
    assert!(!denied(
        &send(&mut conn, call(3, "secret", json!({}))).await
    ));
}

/// A named server's own timeout is read again on a reload, as the rest of its settings are.
#[tokio::test]
async fn a_named_servers_timeout_changes_on_reload() {
    let done = json!({"content": [{"type": "text", "text": "slow done"}]});
    let (up, _) = Scripted::new(vec![open_tool("slow")])
        .script("slow", Script::Slow(Duration::from_secs(2), done.clone()))
        .spawn()
        .await;
    let config = |timeout: &str| {
        format!(
            "[reload]\nwatch = false\n\n[[upstreams]]\nname = \"slow\"\nurl = \"{up}\"\nlimits = {{ upstream_timeout = \"{timeout}\" }}\n"
        )
    };
    let file = TempFile::new(&config("1s"));
    let path = file.path.display().to_string();
    let tg = Toolgate::start(&mut vec!["serve".into(), "--config".into(), path], None).await;
    let url = format!("http://{}/slow/mcp", tg.addr);
    let a = common::post(&url, None, call(1, "slow", json!({})))
        .await
        .json();
    assert_eq!(
        a,
        json!({"jsonrpc": "2.0", "id": 1, "result": {
            "content": [{"type": "text", "text": "The tool server is unavailable: the tool server did not answer within 1s. It may still be working or overloaded; retrying later may help."}],
            "isError": true,
            "_meta": {"toolgate/upstream": {"code": "upstream_unavailable", "reason": "the tool server did not answer within 1s"}}
        }})
    );

    rewrite(&file, &config("5s"));
    tg.hup();
    wait_for_log(&tg, "configuration reloaded (SIGHUP)", 1).await;
    let a = common::post(&url, None, call(2, "slow", json!({})))
        .await
        .json();
    assert_eq!(a, json!({"jsonrpc": "2.0", "id": 2, "result": done}));
}
