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
