//! A stdio server ends with the toolgate that started it, however toolgate ends.
//!
//! Why: toolgate ends its children on its way out (stdin closed, then SIGTERM, then SIGKILL),
//! and a server that follows the spec exits once its stdin closes. A toolgate that is itself
//! killed with SIGKILL (a desktop client force-quitting it, the kernel out of memory) ends
//! nothing, and a server that does not watch its stdin would run on, orphaned, holding what
//! it holds. On Linux a process can ask to be killed when its parent dies
//! (`PR_SET_PDEATHSIG`), and keeps that across `exec`; only the process itself can ask, and
//! a Rust program can run nothing of its own between a child's fork and its `exec` without
//! `unsafe`. So the binary starts each server as itself first ([`EXEC_SERVER`]): that
//! process asks, checks that its parent is still the toolgate that started it, and becomes
//! the server with `exec`, the same process (its id, group and pipes), with SIGPIPE and the
//! signal mask put back as a direct start leaves them.
//!
//! Caveats: only the process started is asked for; a launcher's own children (`npx`
//! starting the server) see their stdin close, as without this. The signal comes when the
//! thread that started the child ends, not the process: toolgate starts its children from
//! its runtime's worker threads, which last as long as it runs. Where the binary is not
//! toolgate (an application using the library), the system is not Linux or `/proc` is not
//! mounted, servers are started directly.

use std::sync::atomic::{AtomicBool, Ordering};

/// The binary's hidden command that becomes a server: `toolgate exec-server PARENT -- PROGRAM
/// ARGS…`.
pub const EXEC_SERVER: &str = "exec-server";

/// Whether children are started through the binary ([`servers_end_with_this_process`]).
static THROUGH_THE_BINARY: AtomicBool = AtomicBool::new(false);

/// Whether servers are started through the binary.
pub(crate) fn through_the_binary() -> bool {
    THROUGH_THE_BINARY.load(Ordering::Relaxed)
}

/// Has every stdio server started from now on end when this process does: called by the
/// binary, whose [`EXEC_SERVER`] command calls [`become_server`]. A no-op but on Linux, and
/// where `/proc` is not mounted (a bare chroot), which the binary is found again through.
pub fn servers_end_with_this_process() {
    let can = cfg!(target_os = "linux") && std::path::Path::new(SELF).exists();
    THROUGH_THE_BINARY.store(can, Ordering::Relaxed);
}

/// The binary as this process runs it, found again even if its file was replaced or removed
/// since (an upgrade in place).
const SELF: &str = "/proc/self/exe";

/// The command that starts `program` with `args`: through the binary where servers end with
/// it, else the program itself.
pub(crate) fn command(program: &str, args: &[String]) -> tokio::process::Command {
    if !through_the_binary() {
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args);
        return cmd;
    }
    let mut cmd = tokio::process::Command::new(SELF);
    cmd.arg(EXEC_SERVER)
        .arg(std::process::id().to_string())
        .arg("--")
        .arg(program)
        .args(args);
    cmd
}

/// Why this process could not become the server.
#[derive(Debug, thiserror::Error)]
pub enum CannotBecome {
    #[error("cannot ask to end with toolgate: {0}")]
    Ask(std::io::Error),
    #[error("the toolgate that started it has already ended")]
    Orphaned,
    #[error("cannot start {0:?}: {1}")]
    Exec(String, std::io::Error),
}

/// [`EXEC_SERVER`]: asks to be killed when `parent` ends, then becomes `command` (program
/// and arguments). Returns only when it cannot; the caller says why on stderr and exits.
#[cfg(target_os = "linux")]
pub fn become_server(parent: u32, command: &[String]) -> CannotBecome {
    use std::os::unix::process::CommandExt;
    let asked = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
    if let Err(e) = asked {
        return CannotBecome::Ask(e.into());
    }
    // Asked too late: the parent ended between the start and the asking, and this process
    // was handed to another.
    if nix::unistd::getppid().as_raw() as u32 != parent {
        return CannotBecome::Orphaned;
    }
    let Some((program, args)) = command.split_first() else {
        return CannotBecome::Exec(String::new(), std::io::ErrorKind::InvalidInput.into());
    };
    let e = std::process::Command::new(program).args(args).exec();
    CannotBecome::Exec(program.clone(), e)
}

/// [`EXEC_SERVER`] where a process cannot ask to end with its parent: never used, since
/// [`servers_end_with_this_process`] leaves servers started directly there.
#[cfg(not(target_os = "linux"))]
pub fn become_server(_: u32, command: &[String]) -> CannotBecome {
    let program = command.first().cloned().unwrap_or_default();
    CannotBecome::Exec(program, std::io::ErrorKind::Unsupported.into())
}
