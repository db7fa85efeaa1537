//! How a stdio server's process is started: its program found as `exec` finds it, the
//! limit on open descriptors toolgate was started with given back to it, and the binary
//! found again to start what runs beside a server (this, and a group's keeper).
//!
//! Why the limit: the binary raises its own soft limit on open descriptors to the hard one
//! (every connection and pipe takes one), and a process inherits its parent's limits. A
//! server is a program of its own, written for the limit a system gives programs (1024 on
//! most Linux systems): one that waits on its descriptors with `select` cannot watch one
//! numbered past 1023, and one that closes every descriptor up to its limit before it
//! starts a program loops up to a thousand times longer (a million, where the hard limit is
//! a million). So a server starts with the soft limit toolgate was started with, as the Go
//! runtime does for the programs it starts, and raises its own if it needs more. A Rust
//! program can change nothing in a child before `exec` without `unsafe`, so the binary
//! starts the server through itself: [`RESTORE_LIMIT`] sets the limit and runs the server in
//! its place, the same process (its id, its pipes, its group).
//!
//! Caveats: one more `exec` per server started, of the binary (about a millisecond). A
//! program that cannot be run is found out before, as `exec` would find it, so that a
//! session says why as it always does; one that fails only at its `exec` (a file that is
//! no program) ends at once with exit status 127 and says why on its stderr, which
//! toolgate logs. An application that embeds the library raises no limit and starts its
//! servers directly, and so does the binary where its own file cannot be found again
//! (off Linux, or without `/proc`).

use nix::errno::Errno;
use nix::sys::resource::{Resource, getrlimit, setrlimit};
use nix::unistd::{AccessFlags, access};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// The binary's hidden command that starts a server with a soft descriptor limit:
/// `toolgate restore-limit SOFT -- PROGRAM ARGS…`.
pub const RESTORE_LIMIT: &str = "restore-limit";

/// The soft limit servers start with, once the binary has raised its own; 0 until then.
static STARTED_WITH: AtomicU64 = AtomicU64::new(0);

/// Has every stdio server started from now on start with `soft` descriptors as its soft
/// limit: called by the binary once it has raised its own from `soft`, and whose
/// [`RESTORE_LIMIT`] command calls [`restore_limit`]. A no-op where the binary cannot be
/// found again to start servers through.
pub fn servers_start_with_descriptor_limit(soft: u64) {
    if can_start_itself() {
        STARTED_WITH.store(soft, Ordering::Relaxed);
    }
}

/// [`RESTORE_LIMIT`]: sets the soft descriptor limit to `soft` (never above the hard one)
/// and runs `command` in this process's place. Returns only when it cannot run it; a limit
/// that cannot be set is said on stderr, and the server runs with the one it has.
pub fn restore_limit(soft: u64, command: &[String]) -> std::io::Error {
    let Some((program, args)) = command.split_first() else {
        return std::io::Error::other("no command to run");
    };
    let set = getrlimit(Resource::RLIMIT_NOFILE)
        .and_then(|(_, hard)| setrlimit(Resource::RLIMIT_NOFILE, soft.min(hard), hard));
    if let Err(e) = set {
        eprintln!("toolgate: cannot restore the descriptor limit of {program:?}: {e}");
    }
    std::process::Command::new(program).args(args).exec()
}

/// The command that starts `program`: through [`RESTORE_LIMIT`] once the binary has raised
/// its limit, and then only once `program` is found runnable, so that one that is not
/// fails here, as a spawn of it would.
pub(crate) fn command(program: &str) -> std::io::Result<tokio::process::Command> {
    let soft = STARTED_WITH.load(Ordering::Relaxed);
    if soft == 0 {
        return Ok(tokio::process::Command::new(program));
    }
    find(program)?;
    let mut cmd = itself();
    cmd.arg(RESTORE_LIMIT)
        .arg(soft.to_string())
        .arg("--")
        .arg(program);
    Ok(cmd)
}

/// The binary as this process runs it, found again even if its file was replaced or removed
/// since (an upgrade in place).
const SELF: &str = "/proc/self/exe";

/// Whether this process can start its own binary again ([`itself`]): servers through
/// [`RESTORE_LIMIT`], and their groups' keepers (`group_keeper`).
pub(crate) fn can_start_itself() -> bool {
    cfg!(target_os = "linux") && std::path::Path::new(SELF).exists()
}

/// A command that runs this process's binary again, named in the process list as the
/// binary is, not as the path it is found by.
pub(crate) fn itself() -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(SELF);
    cmd.arg0("toolgate");
    cmd
}

/// Why a stdio server's program cannot be started, known before any session asks.
#[derive(Debug, thiserror::Error)]
pub(crate) enum NotStartable {
    #[error("no command")]
    NoCommand,
    #[error("cannot find the program {0:?}")]
    NotFound(String),
    #[error("cannot run the program {0:?}: {1}")]
    NotRunnable(String, std::io::Error),
}

/// Whether `command`'s program can be run, found the way `exec` finds it, so that `/readyz`
/// and the line at start say it before a session needs it.
pub(crate) fn find_program(command: &[String]) -> Result<(), NotStartable> {
    let program = command.first().ok_or(NotStartable::NoCommand)?;
    find(program).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => NotStartable::NotFound(program.clone()),
        _ => NotStartable::NotRunnable(program.clone(), e),
    })
}

/// `program` as `exec` finds it: a path as it is; a name in each directory of `PATH` in
/// turn (the C library's `/bin:/usr/bin` where there is no `PATH`), the first that holds it
/// runnable, and "permission denied" where some held it but none runnable.
fn find(program: &str) -> std::io::Result<()> {
    if program.contains('/') {
        return runnable(Path::new(program));
    }
    let paths = std::env::var_os("PATH").unwrap_or_else(|| "/bin:/usr/bin".into());
    let mut denied = None;
    for dir in std::env::split_paths(&paths) {
        match runnable(&dir.join(program)) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => denied = Some(e),
            Err(_) => {}
        }
    }
    Err(denied.unwrap_or_else(|| Errno::ENOENT.into()))
}

/// Whether `path` is a file this process may run: `exec` refuses a directory with
/// "permission denied" too.
fn runnable(path: &Path) -> std::io::Result<()> {
    let meta = std::fs::metadata(path)?;
    if !meta.is_file() {
        return Err(Errno::EACCES.into());
    }
    Ok(access(path, AccessFlags::X_OK)?)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn kind(program: &str) -> Option<std::io::ErrorKind> {
        find(program).err().map(|e| e.kind())
    }

    #[test]
    fn a_program_is_found_as_exec_finds_it() {
        let dir = std::env::temp_dir().join(format!("toolgate-launch-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, mode: u32| {
            let path = dir.join(name);
            std::fs::write(&path, "#!/bin/sh\n").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
            path.to_str().unwrap().to_string()
        };
        assert_eq!(kind(&file("runs", 0o755)), None);
        assert_eq!(
            kind(&file("plain", 0o644)),
            Some(std::io::ErrorKind::PermissionDenied)
        );
        let dir_path = dir.to_str().unwrap();
        assert_eq!(kind(dir_path), Some(std::io::ErrorKind::PermissionDenied));
        assert_eq!(
            kind(&format!("{dir_path}/none")),
            Some(std::io::ErrorKind::NotFound)
        );
        assert_eq!(kind("sh"), None, "a name found on PATH");
        assert_eq!(
            kind("toolgate-no-such-program"),
            Some(std::io::ErrorKind::NotFound)
        );
        let e = find(&format!("{dir_path}/none")).unwrap_err().to_string();
        assert_eq!(
            e, "No such file or directory (os error 2)",
            "as a spawn says it"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
