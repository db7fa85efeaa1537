//! End-to-end overhead: `tools/call` through toolgate against the same upstream called
//! directly and through a bare forwarding proxy (hyper server to hyper client, no MCP logic),
//! in one run, at concurrency 1, 8 and 64; then memory with 1, 1,000 and 10,000 sessions.
//!
//! Run with `cargo bench --bench e2e` (add `-- --quick` for a short run, `-- --only "valid
//! call" --conc 8` for one row, `-- --only memory` for the sessions alone, `-- --only
//! features` for what TLS to the upstream, tracing, shared rate limits, output validation and
//! a 2026-07-28 client bridged to the handshake cost; `--load URL CONC SECS` drives a proxy
//! started by hand, to profile it with strace or
//! perf; `--pin`
//! runs both proxies on CPU 1 alone, under `taskset`, so that with the benchmark itself on CPU 0
//! (`taskset -c 0 target/release/deps/e2e-* --bench --pin --conc 256`) each proxy has exactly
//! one core, the cell where a proxy's tail shows first); `--sessions N` sets how many sessions
//! each load worker sends in (4; 0 for none, a stateless client's load). Each process is
//! separate, so the CPU time of each proxy is read from /proc, and beside it the whole run's
//! (the proxy, the upstream and the load generator); on a 2-core machine the three share the
//! CPU, so compare ratios, not absolutes, and read throughput against the whole run's CPU.

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::server::conn::http1 as server_http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The same allocator as toolgate, so the bare forwarder is compared like for like.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BODY_VALID: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book_flight","arguments":{"origin":"LHR","destination":"JFK","departureDate":"01/02/2999","passengers":2}}}"#;
const BODY_INVALID: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book_flight","arguments":{"origin":"LHR","destination":"JFK","departureDate":"2999-02-01","passengers":12}}}"#;
const BODY_PASS: &str = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
/// The valid call as a 2026-07-28 client sends it: its envelope in `_meta`, no session. In
/// front of the demo's server, which speaks only the handshake, toolgate bridges it.
const BODY_MODERN: &str = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"book_flight","arguments":{"origin":"LHR","destination":"JFK","departureDate":"01/02/2999","passengers":2},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;

struct Proc {
    child: Child,
    url: String,
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a process that prints "listening on http://ADDR/mcp" on stderr.
fn start(mut cmd: Command) -> Proc {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("process starts");
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut tx = Some(tx);
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("listening on ").nth(1)
                && let Some(tx) = tx.take()
            {
                let _ = tx.send(rest.trim().to_string());
            }
        }
    });
    let url = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the process reports its address");
    Proc { child, url }
}

/// CPU seconds (user + system) the process has used.
fn cpu_seconds(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: f64 = f.get(11).and_then(|v| v.parse().ok()).unwrap_or(0.0)
        + f.get(12).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    ticks / 100.0
}

fn rss_mib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|k| k.parse::<f64>().ok())
        .map_or(0.0, |kb| kb / 1024.0)
}

/// The bare forwarder: every request to the upstream as it came, every answer back.
async fn forwarder(upstream: String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    eprintln!("listening on http://{}/mcp", listener.local_addr().unwrap());
    let client: Client<_, hyper::body::Incoming> =
        Client::builder(TokioExecutor::new()).build_http();
    let upstream: hyper::Uri = upstream.parse().unwrap();
    loop {
        let (stream, _) = listener.accept().await.unwrap();
        let _ = stream.set_nodelay(true);
        let (client, upstream) = (client.clone(), upstream.clone());
        tokio::spawn(async move {
            let svc = service_fn(move |mut req: hyper::Request<hyper::body::Incoming>| {
                let client = client.clone();
                *req.uri_mut() = upstream.clone();
                req.headers_mut().remove(hyper::header::HOST);
                async move { client.request(req).await }
            });
            let _ = server_http1::Builder::new()
                .serve_connection(TokioIo::new(stream), svc)
                .await;
        });
    }
}

#[derive(Clone)]
struct Run {
    requests: usize,
    secs: f64,
    p50_us: f64,
    p99_us: f64,
    cpu_us_per_req: f64,
    /// What the watched processes and this load generator took per request: in the main
    /// table, the proxy, the upstream behind it and the load generator (the features' table
    /// watches no upstream and prints only the proxy's CPU). They share the cores, and a
    /// slower proxy makes the other two slower too, so this (and throughput) moves by more
    /// than the proxy's own CPU.
    all_cpu_us_per_req: f64,
}

/// The processes a run's CPU is read from: the proxy under test (none when the upstream is
/// called directly) and the upstream.
#[derive(Clone, Copy, Default)]
struct Watched {
    proxy: Option<u32>,
    upstream: Option<u32>,
}

impl Watched {
    /// CPU seconds so far: the proxy's, and the proxy's, the upstream's and this process's.
    fn cpu_seconds(self) -> (f64, f64) {
        let proxy = self.proxy.map_or(0.0, cpu_seconds);
        let upstream = self.upstream.map_or(0.0, cpu_seconds);
        (proxy, proxy + upstream + cpu_seconds(std::process::id()))
    }
}

/// Sessions each worker opens and sends its requests in, in turn: 4, or `--sessions N`; 0
/// sends every request without one, as a client of a server that keeps no session does.
static SESSIONS_PER_WORKER: std::sync::OnceLock<usize> = std::sync::OnceLock::new();

fn sessions_per_worker() -> usize {
    *SESSIONS_PER_WORKER.get_or_init(|| 4)
}

/// What each answer must say: the request's own id, and a result of the scenario's kind.
fn check_answer(body: &str, answer: &[u8], id: u64) {
    let v: serde_json::Value = serde_json::from_slice(answer).expect("a JSON answer");
    assert_eq!(v["id"], id, "the answer to request {id}: {v}");
    let result = v.get("result").expect("a result");
    if body == BODY_MODERN {
        assert_eq!(result["resultType"], "complete", "a 2026-07-28 result: {v}");
    }
    let refused = result.get("isError") == Some(&serde_json::Value::Bool(true));
    assert_eq!(
        refused,
        body == BODY_INVALID,
        "an invalid call is refused, a valid one answered: {v}"
    );
}

/// `concurrency` workers, each on its own keep-alive connection, for `dur`, the way clients
/// load a gateway: each worker opens [`SESSIONS_PER_WORKER`] sessions (or none) and sends in
/// each in turn, every request with a fresh id, and every answer is read and checked.
async fn load(
    url: &str,
    body: &'static str,
    concurrency: usize,
    dur: Duration,
    watched: Watched,
) -> Run {
    let uri: hyper::Uri = url.parse().unwrap();
    let addr: SocketAddr = uri.authority().unwrap().as_str().parse().unwrap();
    let mut tasks = Vec::new();
    // The sessions are opened before the clock starts.
    let ready = std::sync::Arc::new(tokio::sync::Barrier::new(concurrency + 1));
    for _ in 0..concurrency {
        let uri = uri.clone();
        let ready = ready.clone();
        tasks.push(tokio::spawn(async move {
            let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
            stream.set_nodelay(true).unwrap();
            let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .unwrap();
            tokio::spawn(conn);
            let host = uri.authority().unwrap().as_str().to_owned();
            let modern = body == BODY_MODERN;
            let request = |session: Option<&str>, text: String| {
                let mut req = hyper::Request::post(uri.clone())
                    .header("content-type", "application/json")
                    .header("accept", "application/json, text/event-stream")
                    .header("host", host.as_str());
                req = match modern {
                    true => req
                        .header("mcp-protocol-version", "2026-07-28")
                        .header("mcp-method", "tools/call")
                        .header("mcp-name", "book_flight"),
                    false => req.header("mcp-protocol-version", "2025-11-25"),
                };
                if let Some(s) = session {
                    req = req.header("mcp-session-id", s);
                }
                req.body(Full::new(Bytes::from(text))).unwrap()
            };
            let mut sessions = Vec::new();
            // A 2026-07-28 client has no session.
            let opened = if modern { 0 } else { sessions_per_worker() };
            for _ in 0..opened {
                let init = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
                let resp = send.send_request(request(None, init.into())).await.unwrap();
                let sid = resp.headers()["mcp-session-id"].to_str().unwrap().to_owned();
                resp.into_body().collect().await.unwrap();
                let done = r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#;
                let resp = send.send_request(request(Some(&sid), done.into())).await.unwrap();
                resp.into_body().collect().await.unwrap();
                sessions.push(sid);
            }
            ready.wait().await;
            let start = Instant::now();
            let mut lat = Vec::with_capacity(100_000);
            let mut id = 0u64;
            while start.elapsed() < dur {
                id += 1;
                let session = sessions.get(id as usize % sessions.len().max(1));
                let text = body.replacen("\"id\":1", &format!("\"id\":{id}"), 1);
                let t = Instant::now();
                let resp = send
                    .send_request(request(session.map(String::as_str), text))
                    .await
                    .expect("an answer");
                let status = resp.status();
                let bytes = resp.into_body().collect().await.unwrap().to_bytes();
                lat.push(t.elapsed().as_nanos() as u64);
                assert!(status.is_success(), "bad answer {status}");
                check_answer(body, &bytes, id);
            }
            lat
        }));
    }
    ready.wait().await;
    let cpu0 = watched.cpu_seconds();
    let start = Instant::now();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let secs = start.elapsed().as_secs_f64();
    let cpu1 = watched.cpu_seconds();
    let (cpu, all_cpu) = (cpu1.0 - cpu0.0, cpu1.1 - cpu0.1);
    all.sort_unstable();
    let pct = |q: f64| all[((all.len() as f64 * q) as usize).min(all.len() - 1)] as f64 / 1000.0;
    Run {
        requests: all.len(),
        secs,
        p50_us: pct(0.50),
        p99_us: pct(0.99),
        cpu_us_per_req: cpu * 1e6 / all.len() as f64,
        all_cpu_us_per_req: all_cpu * 1e6 / all.len() as f64,
    }
}

async fn post(
    client: &Client<hyper_util::client::legacy::connect::HttpConnector, Full<Bytes>>,
    url: &str,
    session: Option<&str>,
    body: String,
) -> (Option<String>, Bytes) {
    let mut req = hyper::Request::post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    if let Some(s) = session {
        req = req.header("mcp-session-id", s);
    }
    let resp = client
        .request(req.body(Full::new(Bytes::from(body))).unwrap())
        .await
        .unwrap();
    let sid = resp
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_string());
    (sid, resp.into_body().collect().await.unwrap().to_bytes())
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(i) = args.iter().position(|a| a == "--sessions") {
        let n = args.get(i + 1).and_then(|n| n.parse().ok());
        SESSIONS_PER_WORKER.get_or_init(|| n.expect("--sessions N"));
    }
    if let Some(i) = args.iter().position(|a| a == "--forwarder") {
        let rt = tokio::runtime::Runtime::new().unwrap();
        rt.block_on(forwarder(args[i + 1].clone()));
        return;
    }
    // `--load URL CONC SECS [valid|invalid|ping|bridged]` drives one proxy alone, for profiling it
    // with strace or perf.
    if let Some(i) = args.iter().position(|a| a == "--load") {
        let (url, conc, secs) = (&args[i + 1], &args[i + 2], &args[i + 3]);
        let body = match args.get(i + 4).map(String::as_str) {
            Some("invalid") => BODY_INVALID,
            Some("ping") => BODY_PASS,
            Some("bridged") => BODY_MODERN,
            _ => BODY_VALID,
        };
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let run = rt.block_on(load(
            url,
            body,
            conc.parse().unwrap(),
            Duration::from_secs(secs.parse().unwrap()),
            Watched::default(),
        ));
        println!(
            "{} requests, {:.0} req/s, p50 {:.1} µs",
            run.requests,
            run.requests as f64 / run.secs,
            run.p50_us
        );
        return;
    }
    let quick = args.iter().any(|a| a == "--quick");
    // `--only "valid call"` and `--conc 8` narrow a run while working on one number.
    let flag = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let only = flag("--only");
    let only_conc: Option<usize> = flag("--conc").and_then(|c| c.parse().ok());
    let dur = Duration::from_millis(if quick { 500 } else { 2000 });
    let toolgate = env!("CARGO_BIN_EXE_toolgate");

    let mut up_cmd = Command::new(toolgate);
    up_cmd
        .args(["demo-server", "--listen", "127.0.0.1:0"])
        .env("RUST_LOG", "warn,toolgate=info");
    let upstream = start(up_cmd);
    let pin = args.iter().any(|a| a == "--pin");
    let pinned = |program: &std::ffi::OsStr| {
        if pin {
            let mut c = Command::new("taskset");
            c.args(["-c", "1"]).arg(program);
            c
        } else {
            Command::new(program)
        }
    };
    let mut fwd_cmd = pinned(std::env::current_exe().unwrap().as_os_str());
    fwd_cmd.args(["--forwarder", &upstream.url]);
    let fwd = start(fwd_cmd);
    let mut tg_cmd = pinned(toolgate.as_ref());
    tg_cmd
        .args([
            "serve",
            "--upstream",
            &upstream.url,
            "--listen",
            "127.0.0.1:0",
        ])
        .env("RUST_LOG", "info");
    let tg = start(tg_cmd);
    std::thread::sleep(Duration::from_millis(300));
    let idle_rss = rss_mib(tg.child.id());

    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let client = Client::builder(TokioExecutor::new()).build_http();
        // Warm: toolgate learns the tools once (stateless scope).
        post(&client, &tg.url, None, r#"{"jsonrpc":"2.0","id":0,"method":"tools/list"}"#.into()).await;

        // `--rounds N`: more interleaved rounds for a median steadier than one invocation's.
        let rounds = flag("--rounds").and_then(|r| r.parse().ok()).filter(|&r| r > 0).unwrap_or(if quick { 1 } else { 5 });
        println!("toolgate end-to-end benchmark: {} s per run, medians of {rounds} interleaved rounds", dur.as_secs_f64());
        println!("machine: {} cores, {}", std::thread::available_parallelism().map_or(0, |n| n.get()), cpu_model());
        println!();
        println!("{:<12} {:<9} {:>4} {:>10} {:>9} {:>9} {:>12} {:>10}", "scenario", "via", "conc", "req/s", "p50 µs", "p99 µs", "proxy CPU µs", "all CPU µs");
        let mut summary = Vec::new();
        for (scenario, body) in [("valid call", BODY_VALID), ("invalid", BODY_INVALID), ("ping", BODY_PASS)] {
            if only.as_deref().is_some_and(|o| o != scenario) {
                continue;
            }
            // `--conc N` runs that one concurrency, also one not in the default list.
            let concs = only_conc.map_or(vec![1, 8, 64], |c| vec![c]);
            for conc in concs {
                // Interleaved rounds, medians: the machine's noise hits all three alike.
                let vias = [("direct", &upstream.url, None), ("forwarder", &fwd.url, Some(fwd.child.id())), ("toolgate", &tg.url, Some(tg.child.id()))];
                let mut runs: Vec<Vec<Run>> = vec![Vec::new(), Vec::new(), Vec::new()];
                for _ in 0..rounds {
                    for (i, (_, url, pid)) in vias.iter().enumerate() {
                        let watched = Watched { proxy: *pid, upstream: Some(upstream.child.id()) };
                        runs[i].push(load(url, body, conc, dur, watched).await);
                    }
                }
                let mut row = Vec::new();
                for (i, (via, _, pid)) in vias.iter().enumerate() {
                    let med = |f: &dyn Fn(&Run) -> f64| {
                        let mut v: Vec<f64> = runs[i].iter().map(f).collect();
                        v.sort_by(|a, b| a.total_cmp(b));
                        v[v.len() / 2]
                    };
                    let (rps, p50, p99, cpu, all) = (med(&|r| r.requests as f64 / r.secs), med(&|r| r.p50_us), med(&|r| r.p99_us), med(&|r| r.cpu_us_per_req), med(&|r| r.all_cpu_us_per_req));
                    println!("{scenario:<12} {via:<9} {conc:>4} {rps:>10.0} {p50:>9.1} {p99:>9.1} {:>12} {all:>10.1}", if pid.is_some() { format!("{cpu:.1}") } else { "-".into() });
                    row.push((rps, p50, cpu, all));
                }
                summary.push((scenario, conc, row));
            }
        }
        println!();
        println!("ratios (toolgate vs bare forwarder; added p50 vs direct):");
        for (scenario, conc, row) in &summary {
            let (d, f, t) = (row[0], row[1], row[2]);
            println!(
                "  {scenario:<11} c={conc:<3} throughput {:.2}x forwarder, {:.2}x direct; CPU/req {:.2}x forwarder (all processes {:.2}x); p50 +{:.0} µs vs direct (forwarder +{:.0} µs)",
                t.0 / f.0,
                t.0 / d.0,
                t.2 / f.2,
                t.3 / f.3,
                t.1 - d.1,
                f.1 - d.1
            );
        }

        if only.is_none() || only.as_deref() == Some("features") {
            features(&upstream.url, dur, rounds).await;
        }
        if only.as_deref().is_some_and(|o| o != "memory") || only_conc.is_some() {
            return;
        }
        println!();
        println!("memory (toolgate RSS): idle {idle_rss:.1} MiB");
        let mut done = 0;
        for target in [1usize, 1_000, 10_000] {
            let mut handles = Vec::new();
            let per = (target - done).div_ceil(16);
            for w in 0..16 {
                let (client, url) = (client.clone(), tg.url.clone());
                let n = per.min((target - done).saturating_sub(w * per));
                handles.push(tokio::spawn(async move {
                    for _ in 0..n {
                        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
                        let (sid, _) = post(&client, &url, None, init.into()).await;
                        let sid = sid.expect("a session");
                        post(&client, &url, Some(&sid), r#"{"jsonrpc":"2.0","id":2,"method":"tools/list"}"#.into()).await;
                    }
                }));
            }
            for h in handles {
                h.await.unwrap();
            }
            done = target;
            tokio::time::sleep(Duration::from_millis(200)).await;
            println!("  {target:>6} sessions with identical tool lists: {:.1} MiB", rss_mib(tg.child.id()));
        }
    });
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or_else(|| "unknown CPU".into(), |s| s.trim().to_string())
}

/// A scratch directory for this run's configuration files.
fn scratch() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("toolgate-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// toolgate with a configuration file, in front of `upstream`.
fn toolgate_with(upstream: &str, name: &str, config: &str) -> Proc {
    let path = scratch().join(format!("{name}.toml"));
    std::fs::write(&path, config).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_toolgate"));
    cmd.args([
        "serve",
        "--upstream",
        upstream,
        "--listen",
        "127.0.0.1:0",
        "--admin-listen",
        "off",
    ])
    .arg("--config")
    .arg(&path)
    .env("RUST_LOG", "info");
    let mut p = start(cmd);
    // The TLS listener's address is reached by the name on its certificate.
    p.url = p.url.replace("https://127.0.0.1", "https://localhost");
    p
}

/// A `redis-server`: on the PATH, or the one the tests unpack into `.cache/peers/redis`.
fn redis() -> Option<(Proc, String)> {
    let cached = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/peers/redis");
    let (program, libs) = match std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("redis-server"))
            .find(|p| p.is_file())
    }) {
        Some(p) => (p, None),
        None if cached.join("redis-server").is_file() => (
            cached.join("redis-server"),
            Some(cached.join("root/usr/lib/x86_64-linux-gnu")),
        ),
        None => return None,
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .ok()?
        .local_addr()
        .ok()?
        .port();
    let mut cmd = Command::new(program);
    cmd.args([
        "--bind",
        "127.0.0.1",
        "--port",
        &port.to_string(),
        "--save",
        "",
        "--appendonly",
        "no",
    ])
    .stdin(Stdio::null())
    .stdout(Stdio::null())
    .stderr(Stdio::null());
    if let Some(l) = libs {
        cmd.env("LD_LIBRARY_PATH", l);
    }
    let child = cmd.spawn().ok()?;
    for _ in 0..100 {
        if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
            return Some((
                Proc {
                    child,
                    url: String::new(),
                },
                format!("redis://127.0.0.1:{port}/0"),
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// A collector that takes every batch and answers 200, on this benchmark's runtime.
async fn collector() -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((s, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let svc = service_fn(|req: hyper::Request<hyper::body::Incoming>| async move {
                    let _ = req.into_body().collect().await;
                    Ok::<_, std::convert::Infallible>(hyper::Response::new(Full::new(Bytes::new())))
                });
                let _ = server_http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    format!("http://{addr}")
}

/// What optional features cost per validated call at c=8, each against plain toolgate in the
/// same interleaved rounds: TLS to the upstream (through a TLS-terminating toolgate in front of
/// the same server), trace export to a collector, rate limits in Redis against the same
/// limits kept locally, and output validation on (for a tool without an `outputSchema`).
async fn features(upstream: &str, dur: Duration, rounds: usize) {
    let dir = scratch();
    // A CA and a certificate for the TLS hop.
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca_params, ca_key);
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &issuer)
        .unwrap();
    for (name, text) in [
        ("ca.pem", ca_cert.pem()),
        ("cert.pem", leaf.pem()),
        ("key.pem", leaf_key.serialize_pem()),
    ] {
        std::fs::write(dir.join(name), text).unwrap();
    }
    let d = dir.display();
    let limits = "[clients.\"*\"]\nrate_limit = \"1000000/second\"\n";
    let terminator = toolgate_with(
        upstream,
        "terminator",
        &format!(
            "[tls]\ncert_file = \"{d}/cert.pem\"\nkey_file = \"{d}/key.pem\"\n[validation]\nmode = \"off\"\n"
        ),
    );
    let plain = toolgate_with(upstream, "plain", "");
    let over_tls = toolgate_with(
        &terminator.url,
        "over-tls",
        &format!("[upstream_tls]\nca_file = \"{d}/ca.pem\"\n"),
    );
    let sink = collector().await;
    let traced = toolgate_with(
        upstream,
        "traced",
        &format!("[telemetry]\notlp_endpoint = \"{sink}\"\n"),
    );
    let local = toolgate_with(upstream, "local-limits", limits);
    // The demo's `book_flight` declares no `outputSchema`: what output validation costs a
    // call it does not apply to.
    let output = toolgate_with(upstream, "output", "[validation]\noutput = \"enforce\"\n");
    let redis = redis();
    let shared = redis.as_ref().map(|(_, url)| {
        toolgate_with(
            upstream,
            "shared-limits",
            &format!("[shared_state]\nredis_url = \"{url}\"\n{limits}"),
        )
    });
    let mut vias: Vec<(&str, &Proc, &'static str)> = vec![
        ("plain", &plain, BODY_VALID),
        ("upstream over TLS", &over_tls, BODY_VALID),
        ("traces exported", &traced, BODY_VALID),
        ("local limits", &local, BODY_VALID),
        ("output validation", &output, BODY_VALID),
        ("2026-07-28, bridged", &plain, BODY_MODERN),
    ];
    if let Some(s) = &shared {
        vias.push(("shared limits", s, BODY_VALID));
    }
    let client = Client::builder(TokioExecutor::new()).build_http();
    for (_, p, _) in &vias {
        post(
            &client,
            &p.url,
            None,
            r#"{"jsonrpc":"2.0","id":0,"method":"tools/list"}"#.into(),
        )
        .await;
    }
    let mut runs: Vec<Vec<Run>> = vec![Vec::new(); vias.len()];
    for _ in 0..rounds {
        for (i, (_, p, body)) in vias.iter().enumerate() {
            let watched = Watched {
                proxy: Some(p.child.id()),
                upstream: None,
            };
            runs[i].push(load(&p.url, body, 8, dur, watched).await);
        }
    }
    println!();
    println!("features (validated calls, c=8, medians of {rounds} interleaved rounds):");
    let med = |i: usize, f: &dyn Fn(&Run) -> f64| {
        let mut v: Vec<f64> = runs[i].iter().map(f).collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let base = (
        med(0, &|r| r.requests as f64 / r.secs),
        med(0, &|r| r.cpu_us_per_req),
    );
    let local_cpu = med(3, &|r| r.cpu_us_per_req);
    for (i, (name, _, _)) in vias.iter().enumerate() {
        let (rps, cpu, p50) = (
            med(i, &|r| r.requests as f64 / r.secs),
            med(i, &|r| r.cpu_us_per_req),
            med(i, &|r| r.p50_us),
        );
        let against = if *name == "shared limits" {
            format!(", {:.2}x local limits", cpu / local_cpu)
        } else {
            String::new()
        };
        println!(
            "  {name:<18} {rps:>8.0} req/s  p50 {p50:>7.1} µs  CPU {cpu:>5.1} µs/req  ({:.2}x plain CPU, {:.2}x plain throughput{against})",
            cpu / base.1,
            rps / base.0
        );
    }
    if shared.is_none() {
        println!(
            "  shared limits: not measured, no redis-server (run the tests once: they fetch one)"
        );
    }
    drop(redis);
    let _ = std::fs::remove_dir_all(&dir);
}
