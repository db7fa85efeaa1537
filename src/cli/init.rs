//! toolgate as a container's first process (PID 1): an init in front of the gateway.
//!
//! Why: a process whose parent ends is handed to the first process of its PID namespace,
//! which must wait for it once it ends, or it stays a zombie and keeps its process id.
//! Stdio servers leave such processes: what a launcher (`npx`, `uvx`, a shell script)
//! starts, a server's own helpers (a browser's processes, a command run in the
//! background), and every member of a server's group the stop's SIGKILL reaches after its
//! parent. In a container whose entrypoint is toolgate (the images of `deploy/`), that
//! first process is toolgate, whose runtime waits only for the children it started: every
//! such process would stay a zombie, one per session or more, until the container's limit
//! of process ids refused every new server. The kernel also gives the first process no
//! default action for a signal it has no handler for.
//!
//! So as PID 1, toolgate runs itself again as its only child, the gateway, with the same
//! arguments, and does an init's work and nothing else: passes on to the gateway the
//! signals meant for it, waits for every process that ends, and exits as the gateway did
//! once it has. Caveat: one more toolgate in the process list, which holds about a
//! megabyte (docs/operations.md). Under another init (`docker run --init`, `tini`, a
//! pod's shared process namespace) toolgate is not PID 1 and this does nothing.

use nix::errno::Errno;
use nix::sys::signal::{SigSet, Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::Pid;
use std::os::unix::process::CommandExt;

/// The signals passed on to the gateway: those an operator or a container runtime sends to
/// stop it, reload it, or tell it of a terminal's size.
const PASSED_ON: [Signal; 7] = [
    Signal::SIGHUP,
    Signal::SIGINT,
    Signal::SIGQUIT,
    Signal::SIGTERM,
    Signal::SIGUSR1,
    Signal::SIGUSR2,
    Signal::SIGWINCH,
];

/// Whether this process is the first of its PID namespace (Linux).
pub(crate) fn is_first_process() -> bool {
    cfg!(target_os = "linux") && std::process::id() == 1
}

/// Runs the gateway as this process's child and exits as it does. Returns only when the
/// gateway cannot be started (the binary is found through `/proc`, which a container may
/// lack), with every signal as it was: the caller runs the gateway here instead.
pub(crate) fn run_the_gateway_under_it() -> std::io::Error {
    let mut waited = SigSet::empty();
    for signal in PASSED_ON {
        waited.add(signal);
    }
    waited.add(Signal::SIGCHLD);
    // Before the gateway starts, so that a signal meanwhile waits and is then passed on.
    // The gateway inherits the mask, and clears it first thing (`main`).
    if let Err(e) = waited.thread_block() {
        return e.into();
    }
    let gateway = match start_gateway() {
        Ok(gateway) => gateway,
        Err(e) => {
            let _ = waited.thread_unblock();
            return e;
        }
    };
    match serve_as_init(gateway, &waited) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("toolgate: stopped waiting for the gateway's processes: {e}");
            let _ = kill(gateway, Signal::SIGKILL);
            std::process::exit(1)
        }
    }
}

/// The binary again, with this process's arguments, as it was named. Started by its path,
/// not as `/proc/self/exe`, so that the process's name is the binary's (`pgrep toolgate`
/// finds it).
fn start_gateway() -> std::io::Result<Pid> {
    let mut args = std::env::args_os();
    let name = args.next().unwrap_or_else(|| "toolgate".into());
    let child = std::process::Command::new(std::env::current_exe()?)
        .arg0(name)
        .args(args)
        .spawn()?;
    let pid = i32::try_from(child.id()).map_err(std::io::Error::other)?;
    // Dropping the handle leaves the process running; it is waited for below, with the rest.
    Ok(Pid::from_raw(pid))
}

/// Passes signals on and waits for whatever ends until the gateway has: its exit code, or
/// 128 and the signal that ended it, as a shell reports one.
fn serve_as_init(gateway: Pid, waited: &SigSet) -> nix::Result<i32> {
    loop {
        match waited.wait()? {
            Signal::SIGCHLD => {
                if let Some(code) = wait_for_the_ended(gateway)? {
                    return Ok(code);
                }
            }
            // A gateway that has ended takes it as it waits to be waited for, and nothing
            // comes of it.
            signal => {
                let _ = kill(gateway, signal);
            }
        }
    }
}

/// Waits for every process that has ended (one SIGCHLD may stand for several); the
/// gateway's exit code if it is among them.
fn wait_for_the_ended(gateway: Pid) -> nix::Result<Option<i32>> {
    let mut gateway_ended = None;
    loop {
        match waitpid(None, Some(WaitPidFlag::WNOHANG)) {
            Ok(WaitStatus::StillAlive) | Err(Errno::ECHILD) => return Ok(gateway_ended),
            Ok(WaitStatus::Exited(pid, code)) if pid == gateway => gateway_ended = Some(code),
            Ok(WaitStatus::Signaled(pid, signal, _)) if pid == gateway => {
                gateway_ended = Some(128 + signal as i32);
            }
            Ok(_) | Err(Errno::EINTR) => {}
            Err(e) => return Err(e),
        }
    }
}
