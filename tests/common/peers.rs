//! Real MCP peers for the interop tests, installed on first use by the test run itself
//! (npm and pip into `.cache/peers`, or `$TOOLGATE_PEERS_DIR`), so that `cargo test` alone
//! brings what it needs on a fresh machine. A failed install fails the tests: nothing is
//! skipped silently.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime};

pub const SERVER_EVERYTHING: &str = "@modelcontextprotocol/server-everything@2026.8.31";
pub const PYTHON_MCP: &str = "mcp==2.3.0";

pub struct Peers {
    /// The `mcp-server-everything` launcher (a node script).
    pub server_everything: PathBuf,
    /// A Python with the MCP SDK.
    pub python: PathBuf,
    pub fixtures: PathBuf,
}

pub fn peers() -> &'static Peers {
    static PEERS: OnceLock<Peers> = OnceLock::new();
    PEERS.get_or_init(install)
}

fn run(what: &str, cmd: &mut Command) {
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{what}: cannot start ({e}); is it installed?"));
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

fn install() -> Peers {
    let dir = std::env::var_os("TOOLGATE_PEERS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join(".cache/peers"));
    std::fs::create_dir_all(&dir).expect("the peers directory can be created");
    let _lock = DirLock::take(&dir);

    let node = dir.join("node");
    let stamp = node.join(".installed");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(SERVER_EVERYTHING) {
        std::fs::create_dir_all(&node).unwrap();
        run(
            "npm install server-everything",
            Command::new("npm")
                .args([
                    "install",
                    "--no-audit",
                    "--no-fund",
                    "--loglevel=error",
                    "--prefix",
                ])
                .arg(&node)
                .arg(SERVER_EVERYTHING),
        );
        std::fs::write(&stamp, SERVER_EVERYTHING).unwrap();
    }

    let venv = dir.join("venv");
    let python = venv.join("bin/python");
    let stamp = venv.join(".installed");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(PYTHON_MCP) {
        if !python.exists() {
            run(
                "python3 -m venv",
                Command::new("python3").args(["-m", "venv"]).arg(&venv),
            );
        }
        run(
            "pip install mcp",
            Command::new(&python).args([
                "-m",
                "pip",
                "install",
                "--quiet",
                "--disable-pip-version-check",
                PYTHON_MCP,
            ]),
        );
        std::fs::write(&stamp, PYTHON_MCP).unwrap();
    }
    Peers {
        server_everything: node.join("node_modules/.bin/mcp-server-everything"),
        python,
        fixtures: Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures"),
    }
}
