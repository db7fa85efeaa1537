//! A stdio server's process group ends with the toolgate that started it, however toolgate
//! ends.
//!
//! Why: toolgate ends its children on its way out (stdin closed, then SIGTERM to the
//! server's process group, then SIGKILL to it). A toolgate that is itself killed with
//! SIGKILL (a desktop client force-quitting it, the kernel out of memory) ends nothing: a
//! server that does not watch its stdin runs on, orphaned, and so does whatever a launcher
//! (`npx`, `uvx`, a shell script) started, which never held toolgate's pipes at all. On
//! Linux a process can ask to be signalled when its parent dies (`PR_SET_PDEATHSIG`), but
//! only for itself, and a Rust program can run nothing of its own in a child before `exec`
//! without `unsafe`. So each server's group gets a keeper: the binary again
//! ([`KEEP_GROUP`]), started first as the leader of a new process group, which the server
//! then joins. The keeper asks for SIGHUP at toolgate's death and waits; told, it kills its
//! whole group with SIGKILL: the server, what a launcher started, and itself. The server
//! stays toolgate's child, with its own process id and pipes.
//!
//! The keeper also pins the group's id: an id is not reused while a member of its group
//! lives, so toolgate can signal the group after reaping the server (to end what the
//! server left running) without reaching a group that is not its own. That is why the
//! group is signalled only while its keeper, or the server, is known to be alive.
//!
//! Caveats: one more resident process per stdio server (docs/operations.md says what it
//! holds). The keeper ignores SIGTERM, SIGINT and SIGHUP while toolgate lives: it ends
//! with its group's SIGKILL. The signal comes when the thread that started the keeper ends,
//! not the process; the keeper then checks its parent and waits on. A process that leaves
//! the group (`setsid`, a daemon's double fork) is out of reach. Where the binary is not
//! toolgate (an application using the library), off Linux, or without `/proc`, a server
//! leads a group of its own, without a keeper, and ends with toolgate only by its stdin.

use super::launch;
use crate::locks::MutexExt;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::process::Stdio;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

/// The binary's hidden command that keeps a server's process group: `toolgate keep-group
/// PARENT`.
pub const KEEP_GROUP: &str = "keep-group";

/// Whether servers' groups are kept ([`servers_end_with_this_process`]).
static KEPT: AtomicBool = AtomicBool::new(false);

/// Has every stdio server started from now on end, with its group, when this process does:
/// called by the binary, whose [`KEEP_GROUP`] command calls [`keep_group`]. A no-op but on
/// Linux, and where `/proc` is not mounted (a bare chroot), which the binary is found again
/// through.
pub fn servers_end_with_this_process() {
    KEPT.store(launch::can_start_itself(), Ordering::Relaxed);
}

/// A stdio server's process group, which toolgate's signals to the server go to.
pub(crate) enum Group {
    /// Led by its keeper, whose process id is the group's. The keeper is taken when the
    /// group is ended: from then on the id may belong to another group.
    Kept {
        id: i32,
        keeper: Mutex<Option<tokio::process::Child>>,
    },
    /// Led by the server itself (no keeper): the id is the server's, once it has started,
    /// pinned while the server is not reaped.
    Own(Option<i32>),
}

impl Group {
    /// A new group for a server to join, its keeper started where servers end with this
    /// process. A keeper that cannot be started leaves the server to lead its own group,
    /// said once in the log.
    pub(crate) fn new() -> Group {
        let keeper = KEPT.load(Ordering::Relaxed).then(start_keeper).flatten();
        match keeper.as_ref().and_then(|k| i32::try_from(k.id()?).ok()) {
            Some(id) => Group::Kept {
                id,
                keeper: Mutex::new(keeper),
            },
            None => Group::Own(None),
        }
    }

    /// The `process_group` a server is started with: its keeper's group, or one of its own.
    pub(crate) fn to_join(&self) -> i32 {
        match self {
            Group::Kept { id, .. } => *id,
            Group::Own(_) => 0,
        }
    }

    /// The group once `server` has started: without a keeper, the server leads it.
    pub(crate) fn led_by(self, server: Option<u32>) -> Group {
        match self {
            Group::Own(_) => Group::Own(server.and_then(|p| i32::try_from(p).ok())),
            kept => kept,
        }
    }

    /// Sends `signal` to the whole group: the server and whatever it started. Nothing once
    /// a kept group has been ended. Without a keeper, the caller knows the server is not yet
    /// reaped.
    pub(crate) fn signal(&self, signal: Signal) {
        match self {
            Group::Kept { id, keeper } => {
                // Held while signalling: the keeper is not reaped under it.
                if keeper.locked().is_some() {
                    let _ = killpg(Pid::from_raw(*id), signal);
                }
            }
            Group::Own(Some(id)) => {
                let _ = killpg(Pid::from_raw(*id), signal);
            }
            Group::Own(None) => {}
        }
    }

    /// Ends a kept group once its server has exited: what the server left running in it is
    /// killed, and so is the keeper. A group without a keeper is left: its id went with the
    /// server.
    pub(crate) fn end(&self) {
        let Group::Kept { id, keeper } = self else {
            return;
        };
        let keeper = keeper.locked().take();
        if keeper.is_some() {
            let _ = killpg(Pid::from_raw(*id), Signal::SIGKILL);
        }
        // Dropped only now, the keeper is reaped by the runtime.
        drop(keeper);
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        self.end();
    }
}

/// Starts the keeper of a new group, or says once why it cannot.
fn start_keeper() -> Option<tokio::process::Child> {
    static SAID: AtomicBool = AtomicBool::new(false);
    let mut cmd = launch::itself();
    cmd.arg(KEEP_GROUP)
        .arg(std::process::id().to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .process_group(0);
    match cmd.spawn() {
        Ok(keeper) => Some(keeper),
        Err(e) => {
            if !SAID.swap(true, Ordering::Relaxed) {
                tracing::warn!(
                    "cannot start the keeper of a stdio server's process group ({e}): a server started now ends with toolgate only by its stdin"
                );
            }
            None
        }
    }
}

/// [`KEEP_GROUP`]: waits, in the group it leads, until `parent` has ended, then kills the
/// group, itself included. Returns only when it cannot wait; the caller says why and exits.
#[cfg(target_os = "linux")]
pub fn keep_group(parent: u32) -> std::io::Error {
    use nix::sys::signal::SigSet;
    let mut told = SigSet::empty();
    for signal in [Signal::SIGHUP, Signal::SIGTERM, Signal::SIGINT] {
        told.add(signal);
    }
    if let Err(e) = told.thread_block() {
        return e.into();
    }
    if let Err(e) = nix::sys::prctl::set_pdeathsig(Signal::SIGHUP) {
        return e.into();
    }
    loop {
        // Checked first too: the parent may have ended before the asking.
        if nix::unistd::getppid().as_raw().cast_unsigned() != parent {
            let killed = killpg(nix::unistd::getpgrp(), Signal::SIGKILL);
            return killed.map_or_else(Into::into, |()| std::io::Error::other("not killed"));
        }
        if let Err(e) = told.wait() {
            return e.into();
        }
    }
}

/// [`KEEP_GROUP`] where a process cannot ask to be told of its parent's end: never used,
/// since [`servers_end_with_this_process`] leaves groups unkept there.
#[cfg(not(target_os = "linux"))]
pub fn keep_group(_: u32) -> std::io::Error {
    std::io::ErrorKind::Unsupported.into()
}
