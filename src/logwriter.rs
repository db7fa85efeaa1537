//! A non-blocking log writer: request threads hand formatted lines to a channel, one thread
//! writes them to stderr in batches. An access line per request would otherwise cost a write
//! system call on the request path. If the writer falls 10,000 lines behind, further lines are
//! dropped and counted rather than stall requests; the count is logged when it catches up.
//!
//! One event is one line. A value logged as text can carry a line break of its own (an
//! upstream's error text under `errors.mask_internal`, a child's stderr line with a carriage
//! return, a schema's compile error quoting the schema): written as it is, it would start a
//! line that reads as toolgate's own. So a line feed or carriage return inside an event is
//! written as `\n` or `\r`, here, where every event passes, whatever its fields. The JSON
//! format escapes them already.

use std::io::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError, sync_channel};
use std::sync::{Arc, Mutex, OnceLock};
use tracing_subscriber::fmt::MakeWriter;

#[derive(Clone)]
pub struct NonBlocking {
    tx: SyncSender<Vec<u8>>,
    dropped: Arc<AtomicU64>,
}

static WRITER_THREAD: OnceLock<Mutex<Option<std::thread::JoinHandle<()>>>> = OnceLock::new();
/// Lines handed over and not yet written.
static QUEUED: AtomicU64 = AtomicU64::new(0);

/// Waits (at most half a second) until every queued line is written: call before exiting.
pub fn drain() {
    for _ in 0..500 {
        if QUEUED.load(Ordering::Acquire) == 0 {
            return;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

impl NonBlocking {
    pub fn stderr() -> NonBlocking {
        let (tx, rx) = sync_channel::<Vec<u8>>(10_000);
        let dropped = Arc::new(AtomicU64::new(0));
        let d = dropped.clone();
        let handle = std::thread::Builder::new()
            .name("toolgate-log".into())
            .spawn(move || write_all(rx, d))
            .expect("the log thread starts");
        let _ = WRITER_THREAD.set(Mutex::new(Some(handle)));
        NonBlocking { tx, dropped }
    }
}

fn write_all(rx: Receiver<Vec<u8>>, dropped: Arc<AtomicU64>) {
    let mut err = std::io::BufWriter::with_capacity(64 * 1024, std::io::stderr());
    while let Ok(line) = rx.recv() {
        let _ = write_event(&mut err, &line);
        let mut written = 1;
        // Drain what queued meanwhile, then one flush for the batch.
        while let Ok(more) = rx.try_recv() {
            let _ = write_event(&mut err, &more);
            written += 1;
        }
        let lost = dropped.swap(0, Ordering::Relaxed);
        if lost > 0 {
            let _ = writeln!(
                err,
                "toolgate: {lost} log lines dropped while the log writer was behind"
            );
        }
        let _ = err.flush();
        QUEUED.fetch_sub(written, Ordering::AcqRel);
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
        if self.buf.is_empty() {
            return;
        }
        QUEUED.fetch_add(1, Ordering::AcqRel);
        match self.w.tx.try_send(std::mem::take(&mut self.buf)) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => {
                QUEUED.fetch_sub(1, Ordering::AcqRel);
                self.w.dropped.fetch_add(1, Ordering::Relaxed);
            }
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
    use super::write_event;

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
}
