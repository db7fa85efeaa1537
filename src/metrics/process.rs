//! The process metrics the Prometheus client libraries export under these names
//! (`process_*`), read from `/proc/self` at each scrape. Elsewhere than Linux there is no
//! `/proc`, and they are left out.

use std::fmt::Write;

/// `/proc` reports CPU time in clock ticks of `USER_HZ`, which Linux fixes at 100 for
/// every architecture it exposes to user space.
const TICKS_PER_SECOND: f64 = 100.0;

pub(super) fn render(out: &mut String) {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return;
    };
    // Fields after the command (which is in parentheses and may hold spaces): state is
    // field 3, utime 14, stime 15, starttime 22, vsize 23.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
    let mut gauge = |name: &str, help: &str, kind: &str, value: f64| {
        let _ = writeln!(
            out,
            "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}"
        );
    };
    if let (Some(user), Some(system)) = (field(14), field(15)) {
        let cpu = (user + system) as f64 / TICKS_PER_SECOND;
        gauge(
            "process_cpu_seconds_total",
            "Total user and system CPU time spent in seconds.",
            "counter",
            cpu,
        );
    }
    if let Some(rss) = status_kib("VmRSS:") {
        gauge(
            "process_resident_memory_bytes",
            "Resident memory size in bytes.",
            "gauge",
            (rss * 1024) as f64,
        );
    }
    if let Some(vsize) = field(23) {
        gauge(
            "process_virtual_memory_bytes",
            "Virtual memory size in bytes.",
            "gauge",
            vsize as f64,
        );
    }
    if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
        gauge(
            "process_open_fds",
            "Number of open file descriptors.",
            "gauge",
            fds.count() as f64,
        );
    }
    if let Some(max) = max_open_files() {
        gauge(
            "process_max_fds",
            "Maximum number of open file descriptors.",
            "gauge",
            max as f64,
        );
    }
    if let (Some(start), Some(boot)) = (field(22), boot_time()) {
        gauge(
            "process_start_time_seconds",
            "Start time of the process since unix epoch in seconds.",
            "gauge",
            boot as f64 + start as f64 / TICKS_PER_SECOND,
        );
    }
}

/// A `/proc/self/status` line in KiB (`VmRSS:   1234 kB`).
fn status_kib(key: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].split_whitespace().next()?.parse().ok()
}

/// The soft limit on open files.
fn max_open_files() -> Option<u64> {
    let limits = std::fs::read_to_string("/proc/self/limits").ok()?;
    let line = limits.lines().find(|l| l.starts_with("Max open files"))?;
    line["Max open files".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// When the machine booted, in seconds since the epoch.
fn boot_time() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().find(|l| l.starts_with("btime "))?;
    line["btime ".len()..].trim().parse().ok()
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    #[test]
    fn the_process_is_described_as_prometheus_clients_name_it() {
        let mut out = String::new();
        super::render(&mut out);
        for name in [
            "process_cpu_seconds_total",
            "process_resident_memory_bytes",
            "process_virtual_memory_bytes",
            "process_open_fds",
            "process_max_fds",
            "process_start_time_seconds",
        ] {
            let line = out
                .lines()
                .find(|l| l.starts_with(&format!("{name} ")))
                .unwrap_or_else(|| panic!("{name} in {out}"));
            let value: f64 = line[name.len() + 1..].parse().unwrap();
            assert!(value >= 0.0, "{line}");
        }
    }
}
