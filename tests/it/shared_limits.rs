//! Rate limits shared by replicas: two toolgate processes and a real `redis-server` (found on
//! the PATH, or Debian's, brought by the test itself). A client limited to 10 calls a minute
//! gets exactly 10 across both; with Redis gone, `on_unavailable` decides and every request
//! still gets an answer; Redis back, the shared limit holds again without a restart. Over
//! `rediss://`, a Redis behind a private CA is trusted through `shared_state.ca_file`, and one
//! that requires client certificates is shown `shared_state.client_cert_file`.

use crate::common;
use common::peers::redis_server;
use common::scripted::{Script, Scripted, open_tool};
use common::tempfile_lite::TempFile;
use common::tls_peer::Ca;
use common::*;
use serde_json::json;
use std::process::Stdio;
use std::time::Duration;

/// A `redis-server` on a free loopback port; killed on drop.
struct Redis {
    child: tokio::process::Child,
    port: u16,
    /// A TLS server's certificate and key files.
    _files: Vec<TempFile>,
}

impl Redis {
    async fn start(port: Option<u16>) -> Redis {
        Redis::serve(port, None).await
    }

    /// A Redis speaking only TLS, as `localhost`, with a certificate `ca` signed.
    async fn start_tls(ca: &Ca) -> Redis {
        Redis::serve(None, Some((ca, false))).await
    }

    /// [`Redis::start_tls`] that also requires clients to show a certificate `ca` signed.
    async fn start_mutual_tls(ca: &Ca) -> Redis {
        Redis::serve(None, Some((ca, true))).await
    }

    async fn serve(port: Option<u16>, tls: Option<(&Ca, bool)>) -> Redis {
        let (program, libs) = tokio::task::spawn_blocking(redis_server).await.unwrap();
        let port = port.unwrap_or_else(|| {
            std::net::TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port()
        });
        let mut cmd = tokio::process::Command::new(program);
        let mut files = Vec::new();
        match tls {
            None => cmd.args(["--bind", "127.0.0.1", "--port", &port.to_string()]),
            Some((ca, auth_clients)) => {
                let (chain, key) = ca.leaf(&["localhost"]);
                files = vec![
                    TempFile::new(&chain),
                    TempFile::new(&key),
                    TempFile::new(&ca.cert_pem),
                ];
                let [chain, key, ca] = [0, 1, 2].map(|i| files[i].path.display().to_string());
                cmd.args([
                    "--bind",
                    "127.0.0.1",
                    "--port",
                    "0",
                    "--tls-port",
                    &port.to_string(),
                ])
                .args(["--tls-cert-file", &chain, "--tls-key-file", &key])
                .args(["--tls-ca-cert-file", &ca, "--tls-auth-clients"])
                .arg(if auth_clients { "yes" } else { "no" })
            }
        };
        cmd.args(["--save", "", "--appendonly", "no", "--protected-mode", "no"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        if let Some(libs) = libs {
            cmd.env("LD_LIBRARY_PATH", libs);
        }
        let child = cmd.spawn().expect("redis-server starts");
        for _ in 0..100 {
            if tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .is_ok()
            {
                return Redis {
                    child,
                    port,
                    _files: files,
                };
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        panic!("redis-server did not listen on {port}");
    }

    async fn stop(mut self) -> u16 {
        let _ = self.child.kill().await;
        let _ = self.child.wait().await;
        self.port
    }
}

async fn two_replicas(up: &str, redis_port: u16, on_unavailable: &str) -> (Toolgate, Toolgate) {
    let redis_url = format!("redis://127.0.0.1:{redis_port}/0");
    replicas_of(
        up,
        &redis_url,
        &format!("on_unavailable = \"{on_unavailable}\""),
    )
    .await
}

/// Two replicas sharing the Redis at `redis_url`, with more of `[shared_state]`.
async fn replicas_of(up: &str, redis_url: &str, shared: &str) -> (Toolgate, Toolgate) {
    let config = format!(
        r#"
[shared_state]
redis_url = "{redis_url}"
{shared}

[clients."*"]
rate_limit = "10/minute"
"#
    );
    (
        Toolgate::serve(up, Some(&config)).await,
        Toolgate::serve(up, Some(&config)).await,
    )
}

/// Calls while Redis refuses the connection: each answered, decided by the replica's own
/// buckets and counted, until one is logged with `why` (a call on a busy machine may give
/// up at 250 ms before the handshake fails, and is logged as silent).
async fn decided_locally(a: &Toolgate, b: &Toolgate, why: &str) {
    let (forwarded, _) = calls([a, b], 2).await;
    assert_eq!(forwarded, 2);
    let said = |tg: &Toolgate| {
        tg.logs()
            .lines()
            .any(|l| l.contains("shared rate limits unavailable") && l.contains(why))
    };
    for id in 100..108 {
        if said(a) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        let answer = post(&a.url(), None, call(id, "echo", json!({})))
            .await
            .answer();
        assert!(answer.get("result").is_some(), "{answer}");
    }
    assert!(said(a), "{}", a.logs());
    let m = a.admin_get("/metrics").await.text();
    let series = r#"toolgate_shared_state_unavailable_total{decided="local"} "#;
    let local: u64 = m
        .lines()
        .find_map(|l| l.strip_prefix(series))
        .map_or(0, |n| n.parse().unwrap());
    assert!(local >= 1, "{m}");
}

/// 16 calls across both replicas, limited to 10 a minute: exactly 10 forwarded. Each
/// replica's connection is opened first by a call to another tool: a busy machine may take
/// longer than the 250 ms a call waits for a TLS handshake.
async fn shared_limit_holds(a: &Toolgate, b: &Toolgate) {
    for tg in [a, b] {
        post(&tg.url(), None, call(0, "warm", json!({}))).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let (forwarded, refused) = calls([a, b], 16).await;
    assert_eq!(forwarded, 10, "10 a minute across both replicas");
    assert_eq!(refused, vec!["rate_limited".to_string(); 6]);
}

/// Calls `echo` through each replica in turn; returns how many were forwarded and the
/// refusals' codes.
async fn calls(replicas: [&Toolgate; 2], n: usize) -> (usize, Vec<String>) {
    let mut forwarded = 0;
    let mut refused = Vec::new();
    for i in 0..n {
        let tg = replicas[i % 2];
        let a = post(&tg.url(), None, call(i as i64, "echo", json!({})))
            .await
            .answer();
        match a["result"]["_meta"].get("toolgate/rate_limit") {
            Some(r) => refused.push(r["code"].as_str().unwrap().to_string()),
            None => {
                assert_eq!(result_text(&a), "echoed", "{a}");
                forwarded += 1;
            }
        }
    }
    (forwarded, refused)
}

/// `echo`, the tool whose limit is shared, and `warm`, whose calls open a replica's
/// connection to Redis without taking from `echo`'s bucket.
fn upstream() -> Scripted {
    Scripted::new(vec![open_tool("echo"), open_tool("warm")]).script(
        "echo",
        Script::Result(json!({"content": [{"type": "text", "text": "echoed"}]})),
    )
}

#[tokio::test]
async fn two_replicas_enforce_one_limit_and_survive_redis_going_away() {
    let redis = Redis::start(None).await;
    let (up, seen) = upstream().spawn().await;
    let (a, b) = two_replicas(&up, redis.port, "local").await;
    let (forwarded, refused) = calls([&a, &b], 16).await;
    assert_eq!(forwarded, 10, "10 a minute across both replicas");
    assert_eq!(refused, vec!["rate_limited".to_string(); 6]);
    assert_eq!(seen.tool_calls().len(), 10);

    // Redis goes away: each replica decides with its own buckets, and says so.
    let port = redis.stop().await;
    let (forwarded, _) = calls([&a, &b], 4).await;
    assert_eq!(forwarded, 4, "local buckets, fresh on each replica");
    let m = a.admin_get("/metrics").await.text();
    assert!(
        m.contains(r#"toolgate_shared_state_unavailable_total{decided="local"} 2"#),
        "{m}"
    );
    let logs = a
        .logs_when(|l| l.contains("shared rate limits unavailable"))
        .await;
    assert!(logs.contains("shared rate limits unavailable"), "{logs}");

    // Back on the same port, empty: shared again, without a restart.
    let redis = Redis::start(Some(port)).await;
    let mut forwarded = 0;
    for _ in 0..40 {
        let (f, refused) = calls([&a, &b], 2).await;
        forwarded += f;
        if refused.iter().any(|r| r == "rate_limited") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(forwarded >= 10, "Redis was read again: {forwarded}");
    let back = |l: &str| l.contains("shared rate limits available again");
    assert!(a.logs_when(back).await.lines().any(back), "{}", a.logs());
    drop(redis);
}

/// A Redis that takes connections and never answers (a partition that drops packets): every
/// call is still answered and counted as decided without it, and the log says so once, not
/// once per call.
#[tokio::test]
async fn a_silent_redis_is_said_once_not_once_per_call() {
    let silent = common::SilentPeer::start().await;
    let (up, _) = upstream().spawn().await;
    let redis_url = format!("redis://{}/0", silent.addr);
    let (a, _b) = replicas_of(&up, &redis_url, "on_unavailable = \"local\"").await;
    // Fewer than the limit (10 a minute), which the replica's own bucket still holds.
    for id in 0..8 {
        let answer = post(&a.url(), None, call(id, "echo", json!({})))
            .await
            .answer();
        assert_eq!(result_text(&answer), "echoed", "{answer}");
    }
    let m = a.admin_get("/metrics").await.text();
    let series = r#"toolgate_shared_state_unavailable_total{decided="local"} 8"#;
    assert!(m.contains(series), "{series} in\n{m}");
    let said: Vec<String> = (a.logs().lines())
        .filter(|l| l.contains("shared rate limits unavailable"))
        .map(str::to_owned)
        .collect();
    assert_eq!(said.len(), 1, "one line for 8 calls: {said:#?}");
    assert!(said[0].contains("WARN"), "{said:?}");
}

#[tokio::test]
async fn deny_refuses_calls_while_redis_is_away_but_still_answers_them() {
    let redis = Redis::start(None).await;
    let (up, seen) = upstream().spawn().await;
    let (a, b) = two_replicas(&up, redis.port, "deny").await;
    let (forwarded, _) = calls([&a, &b], 2).await;
    assert_eq!(forwarded, 2);
    redis.stop().await;
    let (forwarded, refused) = calls([&a, &b], 4).await;
    assert_eq!(forwarded, 0);
    assert_eq!(refused, vec!["rate_limit_unavailable".to_string(); 4]);
    assert_eq!(seen.tool_calls().len(), 2);
    let m = b.admin_get("/metrics").await.text();
    assert!(
        m.contains(r#"toolgate_shared_state_unavailable_total{decided="deny"} 2"#),
        "{m}"
    );
}

/// `rediss://` to a Redis behind a private CA: while `shared_state.ca_file` holds another
/// CA, the handshake fails and each call is decided by the replica's own buckets, counted
/// and logged with why; a reload that puts the Redis's CA in the file makes the limit shared.
#[tokio::test]
async fn a_redis_behind_a_private_ca_is_trusted_through_its_ca_file() {
    let (ca, other) = (Ca::new("the Redis's private CA"), Ca::new("another CA"));
    let redis = Redis::start_tls(&ca).await;
    let (up, _) = upstream().spawn().await;
    let ca_file = TempFile::new(&other.cert_pem);
    let redis_url = format!("rediss://localhost:{}/0", redis.port);
    let shared = format!("ca_file = \"{}\"", ca_file.path.display());
    let (a, b) = replicas_of(&up, &redis_url, &shared).await;
    decided_locally(&a, &b, "UnknownIssuer").await;

    std::fs::write(&ca_file.path, &ca.cert_pem).unwrap();
    for tg in [&a, &b] {
        tg.hup();
        tg.logs_when(|l| l.contains("configuration reloaded")).await;
    }
    shared_limit_holds(&a, &b).await;
}

/// A Redis that requires client certificates: without one, the replicas cannot use it and
/// decide locally (counted, and logged with the server's refusal); shown one its CA signed,
/// they share the limit.
#[tokio::test]
async fn a_redis_that_requires_client_certificates_is_shown_one() {
    let ca = Ca::new("the Redis's private CA");
    let redis = Redis::start_mutual_tls(&ca).await;
    let (up, _) = upstream().spawn().await;
    let ca_file = TempFile::new(&ca.cert_pem);
    let redis_url = format!("rediss://localhost:{}/0", redis.port);
    let trust = format!("ca_file = \"{}\"", ca_file.path.display());
    let (a, b) = replicas_of(&up, &redis_url, &trust).await;
    decided_locally(&a, &b, "CertificateRequired").await;
    drop((a, b));

    let (chain, key) = ca.leaf(&["toolgate"]);
    let (chain, key) = (TempFile::new(&chain), TempFile::new(&key));
    let shown = format!(
        "{trust}\nclient_cert_file = \"{}\"\nclient_key_file = \"{}\"",
        chain.path.display(),
        key.path.display()
    );
    let (a, b) = replicas_of(&up, &redis_url, &shown).await;
    shared_limit_holds(&a, &b).await;
}
