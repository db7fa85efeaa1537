//! The `toolgate` command: `serve` or `stdio` in front of an MCP server, `demo` with a
//! built-in one, `check` for a server's author, `config` for its file.
#![forbid(unsafe_code)]

use anyhow::Context;
use clap::{Parser, Subcommand};
use reload::Reload;
use std::io::IsTerminal;
use std::net::SocketAddr;
use std::path::PathBuf;
use toolgate::Gateway;
use toolgate::Live;
use toolgate::config::{
    Config, LogFormat, Overrides, UpstreamTransport, listen_address, names_listener,
};

mod check;
mod init;
mod reload;
mod rules;
// The example server is the binary's own: the library ships it only to tests (feature `demo`),
// and what tests read of it (the requests it saw) goes unused here.
#[allow(dead_code)]
mod demo;
use tracing_subscriber::EnvFilter;

/// Allocation is a large share of a proxy's CPU; mimalloc halves its cost here (measured
/// with the e2e benchmark, which uses it for the bare forwarder too).
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "toolgate",
    version,
    about = "A validating gateway in front of MCP tool servers"
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve a Streamable HTTP endpoint in front of an MCP server.
    Serve {
        /// The upstream MCP endpoint, e.g. http://127.0.0.1:3000/mcp.
        #[arg(long, env = "TOOLGATE_UPSTREAM")]
        upstream: Option<String>,
        /// The transport it speaks [default: streamable-http].
        #[arg(long, value_enum)]
        upstream_transport: Option<Transport>,
        #[command(flatten)]
        common: Common,
        /// Or a stdio server to launch per session: `toolgate serve -- npx -y some-server`.
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Speak MCP over stdin/stdout (for desktop clients) in front of a stdio server:
    /// `toolgate stdio -- python my_server.py`.
    Stdio {
        /// A configuration file (`toolgate config example` prints one).
        #[arg(long)]
        config: Option<PathBuf>,
        /// An HTTP upstream instead of a command.
        #[arg(long)]
        upstream: Option<String>,
        /// The transport it speaks [default: streamable-http].
        #[arg(long, value_enum)]
        upstream_transport: Option<Transport>,
        /// An admin address for /healthz, /readyz and /metrics [default: none: a desktop
        /// client may start several, and one port would be taken].
        #[arg(long)]
        admin_listen: Option<String>,
        /// The server to launch, after `--`.
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Run toolgate in front of its built-in example tool server; needs nothing else.
    Demo {
        #[command(flatten)]
        common: Common,
    },
    /// List a server's tools, compile every schema as the gateway would, report problems.
    /// Exits 1 when something would fail at runtime, 2 when a server cannot be listed.
    Check {
        /// The MCP endpoint to check.
        #[arg(long)]
        upstream: Option<String>,
        /// The transport it speaks [default: streamable-http].
        #[arg(long, value_enum)]
        upstream_transport: Option<Transport>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// A configuration file whose limits and validation settings apply; without a
        /// server on the command line, every server it names is checked with its own.
        #[arg(long)]
        config: Option<PathBuf>,
        /// Or a stdio server to launch and check, after `--`.
        #[arg(last = true)]
        command: Vec<String>,
    },

    /// The configuration file: print an annotated example, or check one.
    Config {
        #[command(subcommand)]
        what: ConfigCmd,
    },

    /// Keep a stdio server's process group: kill it when the toolgate that starts this
    /// ends (Linux).
    #[command(hide = true, name = toolgate::binary::KEEP_GROUP)]
    KeepGroup {
        /// The toolgate process that starts it.
        parent: u32,
    },

    /// Run a stdio server with the soft descriptor limit toolgate was started with.
    #[command(hide = true, name = toolgate::binary::RESTORE_LIMIT)]
    RestoreLimit {
        /// The soft limit.
        soft: u64,
        /// The server, after `--`.
        #[arg(last = true)]
        command: Vec<String>,
    },

    /// Run only the example tool server (for benchmarks and experiments).
    #[command(hide = true)]
    DemoServer {
        #[arg(long, default_value = "127.0.0.1:0")]
        listen: SocketAddr,
        #[arg(long, default_value_t = 0)]
        page_size: usize,
        #[arg(long)]
        sse: bool,
    },
}

#[derive(clap::Subcommand)]
enum ConfigCmd {
    /// Print every key with its default and one line on what it does.
    Example,
    /// Check a file as `serve` would read it, without starting anything: exit 0, or 1 with
    /// one line per problem.
    Check {
        /// The configuration file.
        file: PathBuf,
    },
}

/// An HTTP server's transport, as `upstream_transport` names it.
#[derive(Clone, Copy, clap::ValueEnum)]
enum Transport {
    StreamableHttp,
    Sse,
}

impl From<Transport> for UpstreamTransport {
    fn from(t: Transport) -> UpstreamTransport {
        match t {
            Transport::StreamableHttp => UpstreamTransport::StreamableHttp,
            Transport::Sse => UpstreamTransport::Sse,
        }
    }
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Format {
    Text,
    Json,
}

#[derive(clap::Args)]
struct Common {
    /// A TOML configuration file (`toolgate config example` prints one).
    #[arg(long)]
    config: Option<PathBuf>,
    /// Address to listen on, as IP:PORT or HOST:PORT [default: 127.0.0.1:8080].
    #[arg(long, value_parser = listen_address)]
    listen: Option<SocketAddr>,
    /// Admin address for /healthz, /readyz and /metrics, or "off" [default: 127.0.0.1:9090].
    #[arg(long)]
    admin_listen: Option<String>,
}

/// Ends the process once the queued log lines are written.
fn exit(code: i32) -> ! {
    toolgate::drain_logs();
    std::process::exit(code)
}

/// Raises the soft descriptor limit to the hard one: every client connection, upstream
/// connection and child pipe takes descriptors, and `limits.max_connections` is sized
/// against this limit. The stdio servers it starts get the soft limit it was started with.
fn raise_descriptor_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((soft, hard)) if soft < hard => match setrlimit(Resource::RLIMIT_NOFILE, hard, hard) {
            Ok(()) => toolgate::binary::servers_start_with_descriptor_limit(soft),
            Err(e) => {
                tracing::warn!(error = %e, soft, hard, "could not raise the descriptor limit")
            }
        },
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "could not read the descriptor limit"),
    }
}

fn init_logs(cfg: &Config) {
    let builder = tracing_subscriber::fmt()
        .with_env_filter(log_filter(&cfg.log.level))
        .with_writer(toolgate::NonBlocking::stderr());
    match cfg.log.format {
        LogFormat::Json => builder.event_format(toolgate::JsonLines).init(),
        LogFormat::Human => builder.with_ansi(std::io::stderr().is_terminal()).init(),
    }
    raise_descriptor_limit();
    let ignored = Config::ignored_env_keys();
    if !ignored.is_empty() {
        tracing::warn!(
            variables = ignored.join(", "),
            "ignored TOOLGATE_* environment variables that are not configuration keys"
        );
    }
}

/// `RUST_LOG` when it is set and reads, else `log.level`; either way without the h2 crate's
/// own lines below `ERROR` unless the directive names `h2`. Those are a client's doing, one
/// per frame at worst (an unasked ping's answer), so that one client could fill the log and
/// have other lines dropped; toolgate says what matters of them itself, at a rate
/// (`runtime::version::ended`).
fn log_filter(level: &str) -> EnvFilter {
    let chosen = std::env::var(EnvFilter::DEFAULT_ENV)
        .ok()
        .filter(|d| EnvFilter::try_new(d).is_ok())
        .unwrap_or_else(|| level.to_owned());
    EnvFilter::new(h2_errors_only_unless_named(chosen))
}

fn h2_errors_only_unless_named(directive: String) -> String {
    let names_h2 = directive.split(',').any(|d| {
        let target = d.split(['=', '[']).next().unwrap_or("").trim();
        target == "h2" || target.starts_with("h2::")
    });
    match names_h2 {
        true => directive,
        false => format!("{directive},h2=error"),
    }
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler installs");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
    tracing::info!("shutting down: finishing in-flight requests");
}

async fn run_gateway(cfg: Config, source: Reload) -> anyhow::Result<SocketAddr> {
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .with_context(|| {
            format!(
                "cannot listen on {}; give another address with --listen (or `listen` in the configuration file)",
                cfg.listen
            )
        })?;
    let addr = listener.local_addr()?;
    let admin = match cfg.admin_addr()? {
        Some(a) => Some(
            tokio::net::TcpListener::bind(a)
                .await
                .with_context(|| {
                    format!(
                        "cannot listen on {a} (the admin listener); give another address with --admin-listen, or \"off\""
                    )
                })?,
        ),
        None => None,
    };
    let grace = cfg.limits.shutdown_grace;
    let gw = Gateway::new(cfg)?;
    if let Some(t) = gw.targets.iter().find(|t| names_listener(&t.url, addr)) {
        anyhow::bail!(toolgate::config::ConfigError(format!(
            "the server {:?} ({}) is this gateway's own listener: each request would come back to it",
            &*t.name, t.url
        )));
    }
    let live = Live::new(gw.clone());
    // Everything the configuration names is read before toolgate says it listens.
    let edge = toolgate::Edge::new(&live)?;
    let scheme = if gw.config.tls.is_some() {
        "https"
    } else {
        "http"
    };
    let reloads = reload::reloads(live.clone(), source);
    for t in &gw.targets {
        tracing::info!("listening on {scheme}://{addr}{}", t.path);
    }
    tokio::spawn(reloads);
    serve_admin(admin, live.clone())?;
    tokio::spawn(async move {
        let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(toolgate::serve(listener, edge, async move {
            shutdown_signal().await;
            let _ = stop_tx.send(());
        }));
        // In-flight requests and streams get the grace period, then the process ends anyway.
        let finished = async {
            let _ = stop_rx.await;
            tokio::time::sleep(grace).await;
            tracing::warn!("grace period of {grace:?} over: closing the remaining connections");
        };
        tokio::select! {
            r = server => {
                if let Ok(Err(e)) = r {
                    tracing::error!(error = %e, "server stopped");
                }
            }
            _ = finished => {}
        }
        exit(0);
    });
    Ok(addr)
}

/// A failure before toolgate runs (a configuration it cannot use, an address taken) is one
/// line on stderr and exit status 1, whatever `RUST_BACKTRACE` says.
fn main() {
    signals_as_a_program_starts();
    let cli = Cli::parse();
    match &cli.cmd {
        // Before any runtime: this process only waits, or becomes the server.
        Cmd::KeepGroup { parent } => keep_group(*parent),
        Cmd::RestoreLimit { soft, command } => restore_limit(*soft, command),
        _ => {}
    }
    if init::is_first_process() {
        let e = init::run_the_gateway_under_it();
        eprintln!(
            "toolgate: cannot run the gateway under an init of its own, so no process left to it is waited for: {e}"
        );
    }
    toolgate::binary::servers_end_with_this_process();
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("toolgate: cannot start its runtime: {e}");
            exit(1);
        }
    };
    if let Err(e) = runtime.block_on(run(cli)) {
        eprintln!("toolgate: {e:#}");
        exit(1);
    }
}

/// No signal blocked, whatever the parent blocked: a process inherits its parent's blocked
/// signals, and a runtime's handlers see none of those (a SIGTERM to stop, a SIGHUP to
/// reload, the SIGCHLD its children are waited for by). toolgate's own init starts the
/// gateway so (`init`), and so may any parent. Before any thread starts: each takes the
/// mask of the one that starts it.
fn signals_as_a_program_starts() {
    use nix::sys::signal::{SigSet, SigmaskHow, sigprocmask};
    if let Err(e) = sigprocmask(SigmaskHow::SIG_SETMASK, Some(&SigSet::empty()), None) {
        eprintln!("toolgate: cannot unblock the signals it was started with: {e}");
    }
}

/// Keeps this process's group until `parent` ends, or says why it cannot.
fn keep_group(parent: u32) -> ! {
    let e = toolgate::binary::keep_group(parent);
    eprintln!("toolgate: cannot keep a server's process group: {e}");
    std::process::exit(1)
}

/// Runs a stdio server in this process's place, or says why it cannot, with the exit status
/// a shell gives a command it cannot run.
fn restore_limit(soft: u64, command: &[String]) -> ! {
    let e = toolgate::binary::restore_limit(soft, command);
    let program = command.first().map_or("", String::as_str);
    eprintln!("toolgate: cannot start {program:?}: {e}");
    std::process::exit(127)
}

async fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.cmd {
        Cmd::KeepGroup { parent } => keep_group(parent),
        Cmd::RestoreLimit { soft, command } => restore_limit(soft, &command),
        Cmd::Stdio {
            config,
            upstream,
            upstream_transport,
            admin_listen,
            command,
        } => {
            let upstream = (upstream, upstream_transport.map(Into::into));
            stdio(config, upstream, admin_listen, command).await?
        }
        Cmd::Serve {
            upstream,
            upstream_transport,
            common,
            command,
        } => {
            let overrides = Overrides {
                listen: common.listen,
                upstream,
                upstream_transport: upstream_transport.map(Into::into),
                admin_listen: common.admin_listen,
                command,
            };
            let mut source = Reload::new(common.config, overrides);
            let cfg = source.load()?;
            init_logs(&cfg);
            run_gateway(cfg, source).await?;
        }
        Cmd::Demo { common } => run_demo(common).await?,
        Cmd::Check {
            upstream,
            upstream_transport,
            format,
            config,
            command,
        } => {
            let upstream = (upstream, upstream_transport.map(Into::into));
            check(upstream, format, config, command).await?
        }
        Cmd::Config { what } => config(what),
        Cmd::DemoServer {
            listen,
            page_size,
            sse,
        } => {
            init_logs(&Config::default());
            let options = demo::Options {
                page_size,
                sse,
                seen_kept: 0,
                ..Default::default()
            };
            let (addr, _) = demo::spawn(listen, options).await?;
            tracing::info!("listening on http://{addr}/mcp");
        }
    }
    std::future::pending::<()>().await;
    Ok(())
}

/// `toolgate stdio`: in front of an HTTP server (`--upstream`) or a child (`-- CMD`), until
/// the client closes its pipe.
async fn stdio(
    config: Option<PathBuf>,
    (upstream, upstream_transport): (Option<String>, Option<UpstreamTransport>),
    admin_listen: Option<String>,
    command: Vec<String>,
) -> anyhow::Result<()> {
    let overrides = Overrides {
        command,
        admin_listen: admin_listen.clone(),
        ..Default::default()
    };
    let mut cfg = Config::load(config.as_deref(), &overrides)?;
    init_logs(&cfg);
    if !cfg.upstreams.is_empty() {
        // A file shared with `serve` is usable here; what it names beyond one server is not.
        let names: Vec<&str> = cfg.upstreams.iter().map(|u| u.name.as_str()).collect();
        tracing::warn!(
            upstreams = %names.join(", "),
            "toolgate stdio serves the one server after `--` or at --upstream; the configuration's [[upstreams]] are served by toolgate serve"
        );
    }
    // Only where asked on the command line: the file's address (or its default) would be
    // taken by the second pipe a desktop client starts.
    let admin = match admin_listen.is_some().then(|| cfg.admin_addr()).transpose()? {
        Some(Some(a)) => Some(tokio::net::TcpListener::bind(a).await.with_context(|| {
            format!("cannot listen on {a} (the admin listener); give another address with --admin-listen")
        })?),
        _ => None,
    };
    // The server named on the command line, else in the file, as for `serve`.
    if let Some(url) = upstream.or_else(|| cfg.upstream.clone()) {
        if !cfg.command.is_empty() {
            anyhow::bail!(
                "toolgate stdio takes either --upstream URL or a command after `--`, not both"
            );
        }
        cfg.upstream = Some(url.clone());
        if let Some(t) = upstream_transport {
            cfg.upstream_transport = t;
        }
        let transport = cfg.upstream_transport;
        let gw = Gateway::for_pipe(cfg)?;
        serve_admin(admin, Live::new(gw.clone()))?;
        exit(match transport {
            UpstreamTransport::StreamableHttp => toolgate::stdio_over_http(gw, &url).await,
            // Served as a child is: one session, its stream.
            UpstreamTransport::Sse => toolgate::stdio_to_child(gw).await,
        });
    }
    if cfg.command.is_empty() {
        anyhow::bail!(
            "toolgate stdio needs its server: the command that launches it after `--` (`toolgate stdio -- python server.py`), or --upstream URL"
        );
    }
    if upstream_transport.is_some() {
        anyhow::bail!(
            "--upstream-transport is the transport of --upstream URL; a command after `--` speaks stdio"
        );
    }
    cfg.upstream = None;
    let gw = Gateway::new(cfg)?;
    serve_admin(admin, Live::new(gw.clone()))?;
    exit(toolgate::stdio_to_child(gw).await);
}

/// The admin listener (`/healthz`, `/readyz`, `/metrics`), when there is one.
fn serve_admin(admin: Option<tokio::net::TcpListener>, live: Live) -> anyhow::Result<()> {
    let Some(admin) = admin else { return Ok(()) };
    tracing::info!("admin listening on http://{}", admin.local_addr()?);
    tokio::spawn(toolgate::serve_admin(admin, live));
    Ok(())
}

/// `toolgate config example` and `toolgate config check FILE`.
fn config(what: ConfigCmd) -> ! {
    let file = match what {
        ConfigCmd::Example => {
            print!("{}", toolgate::config::reference::example());
            exit(0);
        }
        ConfigCmd::Check { file } => file,
    };
    let problems = match Config::checked(&file) {
        Ok(cfg) => usable(cfg).err().into_iter().collect(),
        Err(problems) => problems,
    };
    for p in &problems {
        eprintln!("toolgate config check: {p}");
    }
    if !problems.is_empty() {
        exit(1);
    }
    println!("{}: ok", file.display());
    exit(0);
}

/// What `serve` does with a configuration before it listens, short of listening: its rules
/// compiled, its secrets and certificates read. A file that names no server is checked as if
/// `--upstream` gave one.
fn usable(mut cfg: Config) -> Result<(), String> {
    if cfg.upstream.is_none() && cfg.command.is_empty() && cfg.upstreams.is_empty() {
        cfg.upstream = Some("http://127.0.0.1:9/mcp".into());
    }
    let gw = Gateway::new(cfg).map_err(|e| e.to_string())?;
    toolgate::Edge::new(&Live::new(gw)).map_err(|e| format!("{e:#}"))?;
    Ok(())
}

/// `toolgate demo`: the gateway in front of the example tool server, both in this process.
async fn run_demo(common: Common) -> anyhow::Result<()> {
    let overrides = Overrides {
        listen: common.listen,
        admin_listen: common.admin_listen,
        ..Default::default()
    };
    let mut source = Reload::new(common.config, overrides);
    let cfg = source.load()?;
    init_logs(&cfg);
    let options = demo::Options {
        seen_kept: 0,
        ..Default::default()
    };
    let (up, _) = demo::spawn(SocketAddr::from(([127, 0, 0, 1], 0)), options).await?;
    source.upstream = Some(format!("http://{up}/mcp"));
    tracing::info!("example tool server on http://{up}/mcp");
    let cfg = source.load()?;
    let help = (cfg.tls.is_some(), cfg.auth.enabled());
    let addr = run_gateway(cfg, source).await?;
    print_demo_help(addr, help);
    Ok(())
}

/// `toolgate check`: lists the tools of the server the command line names, or of every server
/// the configuration names, and reports what their schemas would do to clients.
async fn check(
    (upstream, upstream_transport): (Option<String>, Option<UpstreamTransport>),
    format: Format,
    config: Option<PathBuf>,
    command: Vec<String>,
) -> anyhow::Result<()> {
    let mut cfg = Config::load(config.as_deref(), &Overrides::default())?;
    if let Some(t) = upstream_transport {
        anyhow::ensure!(
            upstream.is_some(),
            "--upstream-transport is the transport of --upstream URL; a command after `--`, or a --config file's servers, say their own"
        );
        cfg.upstream_transport = t;
    }
    // The server the command line names, else every one the file names.
    let servers = match (upstream, command.is_empty()) {
        (Some(url), true) => {
            // A URL no server can have is the command line's mistake, not a server's.
            toolgate::config::parse_upstream_url(&url)?;
            vec![check::ToCheck::on_mcp(check::Server::Http(url), &cfg)]
        }
        (None, false) => {
            let server = check::Server::Stdio {
                command,
                own_env: Vec::new(),
            };
            vec![check::ToCheck::on_mcp(server, &cfg)]
        }
        (None, true) => check::servers_of(&cfg),
        (Some(_), false) => {
            anyhow::bail!("toolgate check takes --upstream URL or a command after `--`, not both")
        }
    };
    if servers.is_empty() {
        anyhow::bail!(
            "toolgate check takes --upstream URL, a command after `--`, or a --config file that names servers"
        );
    }
    let (mut reports, mut listed) = (Vec::new(), Vec::new());
    for s in &servers {
        match s.server.check(&s.label, &s.cfg).await {
            Ok(report) => {
                listed.push(Some(report.tools.clone()));
                reports.push(report);
            }
            Err(e) => {
                eprintln!("toolgate check: cannot list the tools of {}: {e}", s.label);
                listed.push(None);
            }
        }
    }
    let found: Vec<rules::Found<'_>> = (servers.iter().zip(&listed))
        .map(|(s, tools)| rules::Found {
            name: &s.name,
            tools: tools.as_deref(),
        })
        .collect();
    for line in rules::unmatched(&cfg, &found) {
        eprintln!("toolgate check: {line}");
    }
    let unlisted = listed.iter().any(Option::is_none);
    match (format, &reports[..]) {
        (Format::Text, _) => reports.iter().for_each(|r| print!("{}", r.text())),
        // One server, one object; several, an array of them in the file's order.
        (Format::Json, [one]) if servers.len() == 1 => {
            println!("{}", serde_json::to_string_pretty(one)?)
        }
        (Format::Json, _) if servers.len() == 1 => {}
        (Format::Json, _) => println!("{}", serde_json::to_string_pretty(&reports)?),
    }
    let failed = reports.iter().any(|r| r.errors > 0);
    exit(match (unlisted, failed) {
        (true, _) => 2,
        (false, true) => 1,
        (false, false) => 0,
    });
}

/// The demo's walk-through, written for the configuration in force: a file with `[tls]` is
/// served over https, and one with `[auth]` needs a client's token on each command.
fn print_demo_help(addr: SocketAddr, (tls, auth): (bool, bool)) {
    let scheme = if tls { "https" } else { "http" };
    let url = format!("{scheme}://{addr}/mcp");
    let mut notes = String::new();
    if tls {
        notes.push_str("  This configuration has [tls]: give curl its CA with --cacert FILE.\n");
    }
    let token = if auth {
        notes.push_str(
            "  This configuration has [auth]: set TOKEN to one of its clients' tokens.\n",
        );
        r#" -H "authorization: Bearer $TOKEN""#
    } else {
        ""
    };
    if !notes.is_empty() {
        notes.insert(0, '\n');
    }
    let headers = format!(
        "-H 'content-type: application/json' -H 'accept: application/json, text/event-stream'{token}"
    );
    println!(
        r#"
toolgate demo: the gateway is on {url}, in front of an example tool server.
{notes}
Try it (another terminal):

  # 1. open a session
  curl -si {url} {headers} \
    -d '{{"jsonrpc":"2.0","id":1,"method":"initialize","params":{{"protocolVersion":"2025-11-25","capabilities":{{}},"clientInfo":{{"name":"curl","version":"1"}}}}}}' \
    | grep -i mcp-session-id
  S=<the session id printed above>

  # 2. a call with the date in the wrong format: toolgate answers, the server never sees it
  curl -s {url} -H "mcp-session-id: $S" {headers} \
    -d '{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"book_flight","arguments":{{"origin":"LHR","destination":"JFK","departureDate":"2031-08-08","passengers":12}}}}}}'

  # 3. "10" for an integer: coerced to 10 and forwarded
  curl -s {url} -H "mcp-session-id: $S" {headers} \
    -d '{{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{{"name":"add","arguments":{{"a":"10","b":2}}}}}}'

Press Ctrl-C to stop."#
    );
}

#[cfg(test)]
mod tests {
    use super::h2_errors_only_unless_named as filtered;

    #[test]
    fn h2_is_heard_below_errors_only_when_named() {
        assert_eq!(filtered("info".into()), "info,h2=error");
        assert_eq!(filtered("warn,h2o=debug".into()), "warn,h2o=debug,h2=error");
        for named in ["info,h2=debug", "h2::proto=trace", "debug, h2[recv]=warn"] {
            assert_eq!(filtered(named.into()), named);
        }
    }
}
