//! A non-blocking log writer: request threads hand formatted lines to a channel, one thread
//! writes them to stderr in batches. An access line per request would otherwise cost a write
//! system call on the request path. If the writer falls 10,000 lines or 16 MiB behind (stderr
//! blocked: a full pipe, a stalled log collector), further lines are dropped and counted rather
//! than stall requests or grow memory; the count is logged when it catches up. Bytes as well as
//! lines: a line may carry a server's text (a stdio server's stderr line is up to 16 KiB).
//!
//! One event is one line. A value logged as text can carry a line break of its own (an
//! upstream's error text under `errors.mask_internal`, a child's stderr line with a carriage
//! return, a schema's compile error quoting the schema): written as it is, it would start a
//! line that reads as toolgate's own. So a line feed or carriage return inside an event is
//! written as `\n` or `\r`, here, where every event passes, whatever its fields. The JSON
//! format escapes them already.

use std::io::Write;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, OnceLock};
use tracing_subscriber::fmt::MakeWriter;

#[derive(Clone)]
pub struct NonBlocking {
    tx: SyncSender<Vec<u8>>,
    dropped: Arc<AtomicU64>,
    /// The bytes of the lines handed over and not yet written.
    queued_bytes: Arc<AtomicUsize>,
}

/// Lines queued at most, and their bytes at most (see the module documentation).
const MAX_QUEUED_LINES: usize = 10_000;
const MAX_QUEUED_BYTES: usize = 16 * 1024 * 1024;

/// The stderr writer's queued bytes, for [`drain`]: nothing is queued when they are 0 (no
/// line is empty).
static STDERR_QUEUED: OnceLock<Arc<AtomicUsize>> = OnceLock::new();

/// Waits (at most half a second) until every queued line is written: call before exiting.
pub fn drain() {
    let Some(queued) = STDERR_QUEUED.get() else {
        return;
    };
    for _ in 0..500 {
        if queued.load(Ordering::Acquire) == 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

impl NonBlocking {
    pub fn stderr() -> NonBlocking {
        let (w, rx) = NonBlocking::new();
        let (dropped, bytes) = (w.dropped.clone(), w.queued_bytes.clone());
        let _ = STDERR_QUEUED.set(bytes.clone());
        std::thread::Builder::new()
            .name("toolgate-log".into())
            .spawn(move || write_all(rx, dropped, bytes))
            .expect("the log thread starts");
        w
    }

    fn new() -> (NonBlocking, Receiver<Vec<u8>>) {
        let (tx, rx) = sync_channel::<Vec<u8>>(MAX_QUEUED_LINES);
        let w = NonBlocking {
            tx,
            dropped: Arc::default(),
            queued_bytes: Arc::default(),
        };
        (w, rx)
    }

    /// Queues one line, unless the writer is too far behind.
    fn queue(&self, line: Vec<u8>) {
        let len = line.len();
        let fits = self.queued_bytes.fetch_add(len, Ordering::AcqRel) + len <= MAX_QUEUED_BYTES;
        if !fits || self.tx.try_send(line).is_err() {
            self.queued_bytes.fetch_sub(len, Ordering::AcqRel);
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }
}

fn write_all(rx: Receiver<Vec<u8>>, dropped: Arc<AtomicU64>, queued_bytes: Arc<AtomicUsize>) {
    let mut err = std::io::BufWriter::with_capacity(64 * 1024, std::io::stderr());
    while let Ok(line) = rx.recv() {
        let _ = write_event(&mut err, &line);
        let mut bytes = line.len();
        // Drain what queued meanwhile, then one flush for the batch.
        while let Ok(more) = rx.try_recv() {
            let _ = write_event(&mut err, &more);
            bytes += more.len();
        }
        let lost = dropped.swap(0, Ordering::Relaxed);
        if lost > 0 {
            let _ = writeln!(
                err,
                "toolgate: {lost} log lines dropped while the log writer was behind"
            );
        }
        let _ = err.flush();
        queued_bytes.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// One event's text, its line breaks but the last escaped (see the module documentation).
fn write_event(out: &mut impl Write, event: &[u8]) -> std::io::Result<()> {
    let (mut rest, end): (&[u8], &[u8]) = match event.split_last() {
        Some((b'\n', body)) => (body, b"\n"),
        _ => (event, b""),
    };
    while let Some(at) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
        out.write_all(&rest[..at])?;
        out.write_all(if rest[at] == b'\n' { b"\\n" } else { b"\\r" })?;
        rest = &rest[at + 1..];
    }
    out.write_all(rest)?;
    out.write_all(end)
}

pub struct Line {
    buf: Vec<u8>,
    w: NonBlocking,
}

impl Write for Line {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Drop for Line {
    fn drop(&mut self) {
        if !self.buf.is_empty() {
            self.w.queue(std::mem::take(&mut self.buf));
        }
    }
}

impl<'a> MakeWriter<'a> for NonBlocking {
    type Writer = Line;
    fn make_writer(&'a self) -> Line {
        Line {
            buf: Vec::with_capacity(256),
            w: self.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn written(event: &str) -> String {
        let mut out = Vec::new();
        write_event(&mut out, event.as_bytes()).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn an_event_stays_one_line() {
        assert_eq!(written("WARN plain\n"), "WARN plain\n");
        assert_eq!(
            written("WARN upstream_message=boom\nERROR forged\r\n"),
            "WARN upstream_message=boom\\nERROR forged\\r\n"
        );
        assert_eq!(written("no end\rx"), "no end\\rx");
        assert_eq!(written(""), "");
    }

    /// A writer that writes nothing (stderr blocked) holds at most 16 MiB of lines, however
    /// long they are; the rest are dropped and counted.
    #[test]
    fn a_blocked_writer_holds_a_bounded_queue() {
        let (w, _rx) = NonBlocking::new();
        let line = vec![b'x'; 16 * 1024];
        for _ in 0..2_000 {
            w.queue(line.clone());
        }
        let held = MAX_QUEUED_BYTES / line.len();
        assert_eq!(w.queued_bytes.load(Ordering::Relaxed), held * line.len());
        assert_eq!(w.dropped.load(Ordering::Relaxed), 2_000 - held as u64);
    }
}
