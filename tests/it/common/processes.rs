//! The stdio fixture's processes, found by a marker on their command line: how a test knows
//! that no child outlives what it belongs to; and a process's peak memory.

use std::time::Duration;

/// An argument the stdio fixture ignores, unique to the test that gives it.
pub fn marker() -> String {
    format!(
        "--marker=t{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos()
    )
}

/// Live (non-zombie) processes whose command line carries the marker.
pub fn children_with(marker: &str) -> usize {
    live_processes(|cmdline| {
        // The servers, not toolgate (whose own command line names them too).
        cmdline.contains(marker)
            && cmdline
                .split('\0')
                .next()
                .is_some_and(|argv0| argv0.contains("python"))
    })
}

/// Live keepers of the process groups of the servers that the toolgate `pid` started.
pub fn keepers_of(pid: u32) -> usize {
    live_processes(|cmdline| cmdline.ends_with(&format!("\0keep-group\0{pid}\0")))
}

/// Live (non-zombie) processes whose command line (its arguments each ended by a NUL)
/// `matches`.
fn live_processes(matches: impl Fn(&str) -> bool) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter(|e| {
            let cmdline = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
            let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
            matches(&String::from_utf8_lossy(&cmdline)) && !stat.contains(") Z ")
        })
        .count()
}

/// What starts a program as the first process of a PID namespace of its own, as a
/// container's entrypoint is: `unshare` (util-linux); but for root, inside a user namespace
/// of its own, which the kernel must allow unprivileged users. Checked first, so that a
/// machine that cannot fails the test saying so.
pub fn first_in_a_pid_namespace() -> Vec<String> {
    // `--kill-child`: a test that fails and drops `unshare` ends the namespace with it.
    let mut launcher: Vec<String> = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child"]
        .map(String::from)
        .into();
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let uids = status.lines().find_map(|l| l.strip_prefix("Uid:")).unwrap();
    let effective = uids.split_whitespace().nth(1).unwrap();
    if effective != "0" {
        launcher.splice(1..1, ["--user".to_string(), "--map-root-user".into()]);
    }
    let tried = std::process::Command::new(&launcher[0])
        .args(&launcher[1..])
        .arg("true")
        .output()
        .expect("`unshare` (util-linux) is on the PATH");
    assert!(
        tried.status.success(),
        "{launcher:?} cannot start a process in a PID namespace of its own here (as a \
         user other than root, the kernel must allow unprivileged user namespaces): {}",
        String::from_utf8_lossy(&tried.stderr)
    );
    launcher
}

/// A process as `/proc` shows it.
#[derive(Debug)]
pub struct Process {
    pub pid: u32,
    pub zombie: bool,
    /// Its arguments, each ended by a NUL (none for a zombie).
    pub cmdline: String,
}

/// The children of `parent`, zombies included.
pub fn children_of(parent: u32) -> Vec<Process> {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // After the command's name, which may hold anything: its state, then its parent.
            let mut after = stat.rsplit_once(')')?.1.split_whitespace();
            let zombie = after.next()? == "Z";
            let ppid: u32 = after.next()?.parse().ok()?;
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            (ppid == parent).then(|| Process {
                pid,
                zombie,
                cmdline: String::from_utf8_lossy(&cmdline).into_owned(),
            })
        })
        .collect()
}

/// Whether `cond` holds within ten seconds.
pub async fn wait_for(cond: impl Fn() -> bool) -> bool {
    for _ in 0..100 {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    cond()
}

/// The peak resident memory of a process, in MiB.
pub fn peak_mib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .expect("VmHWM is readable on Linux");
    kib / 1024
}
