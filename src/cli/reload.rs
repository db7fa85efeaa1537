//! Reloading the configuration of `toolgate serve` (and `demo`): on SIGHUP, and when its
//! file's content changes.

use std::path::PathBuf;
use tokio::signal::unix::Signal;
use toolgate::Live;
use toolgate::config::{Config, Overrides};

/// Where a reload reads the configuration again: the same file, environment and flags.
pub(crate) struct Reload {
    file: Option<PathBuf>,
    /// The file is no regular file: read once ([`Reload::new`]), and not watched.
    piped: bool,
    /// Its text, as that one read found it.
    read_once: Option<Vec<u8>>,
    /// The file's content the last [`Reload::load`] read: the one in force when the watcher
    /// starts, so that an edit made since, however early, is a change.
    loaded: Option<Vec<u8>>,
    overrides: Overrides,
    /// Applied after loading, as at startup (the demo's built-in upstream).
    pub(crate) upstream: Option<String>,
}

impl Reload {
    /// A configuration file that is no regular file (a pipe: `--config <(…)`, `/dev/stdin`,
    /// a FIFO) is read here, once, and its text layered again at every load: a second read
    /// would find nothing (every default: no authentication) or wait for a writer. It is not
    /// watched; SIGHUP still reads the environment and the secrets again.
    pub(crate) fn new(file: Option<PathBuf>, overrides: Overrides) -> Reload {
        let piped =
            (file.as_ref()).is_some_and(|p| std::fs::metadata(p).is_ok_and(|m| !m.is_file()));
        let read_once = (file.as_ref().filter(|_| piped)).and_then(|p| std::fs::read(p).ok());
        Reload {
            file,
            piped,
            read_once,
            loaded: None,
            overrides,
            upstream: None,
        }
    }

    /// The configuration, its file as it is now.
    pub(crate) fn load(&mut self) -> anyhow::Result<Config> {
        let content = self.content();
        let cfg = self.load_read(content.clone())?;
        self.loaded = content;
        Ok(cfg)
    }

    /// The configuration, its file as `text` holds it where the caller read it.
    fn load_read(&self, text: Option<Vec<u8>>) -> anyhow::Result<Config> {
        let mut cfg = match (&self.file, text) {
            (Some(path), Some(text)) => Config::load_read(path, text, &self.overrides)?,
            (file, _) => Config::load(file.as_deref(), &self.overrides)?,
        };
        if let Some(u) = &self.upstream {
            cfg.upstream = Some(u.clone());
        }
        Ok(cfg)
    }

    /// The file's content now (the text read once, for a file that is no regular file);
    /// `None` where it cannot be read.
    fn content(&self) -> Option<Vec<u8>> {
        match (&self.read_once, &self.file) {
            (Some(text), _) => Some(text.clone()),
            (None, file) => std::fs::read(file.as_ref()?).ok(),
        }
    }

    /// Whether the watcher looks at the file: there is one, and it may change.
    fn watched(&self) -> bool {
        self.file.is_some() && !self.piped
    }
}

/// What the watcher has seen of the configuration file, each content `None` where the file
/// could not be read.
///
/// A new content is reloaded once two looks in a row find it: an editor or a shell's `>`
/// writes a file in place, truncating it first, and one look between the truncation and the
/// write would install the file half-written (an empty file is a valid configuration: every
/// default, no authentication).
struct Watch {
    /// The content in force.
    seen: Option<Vec<u8>>,
    /// A content the last look found new, not yet found twice.
    new: Option<Option<Vec<u8>>>,
}

impl Watch {
    fn new(seen: Option<Vec<u8>>) -> Watch {
        Watch { seen, new: None }
    }

    /// Whether `now`, what this look found, is a content to reload; it is then the one seen.
    fn changed(&mut self, now: Option<Vec<u8>>) -> bool {
        if now == self.seen {
            self.new = None;
            return false;
        }
        if self.new.as_ref() == Some(&now) {
            self.new = None;
            self.seen = now;
            return true;
        }
        self.new = Some(now);
        false
    }

    /// A content loaded apart from the watching (a SIGHUP's) is the one seen.
    fn reloaded(&mut self, now: Option<Vec<u8>>) {
        self.seen = now;
        self.new = None;
    }
}

/// Reloads on SIGHUP, and when the configuration file's content changes (polled, which also
/// sees a Kubernetes ConfigMap's symlink swap). A config that does not load or is refused
/// is logged and the one in force stays.
///
/// SIGHUP is listened for from this call on, which is made before toolgate says it listens:
/// a SIGHUP sent once it does reloads, even before the returned task first runs, where
/// SIGHUP's default would end the process.
pub(crate) fn reloads(live: Live, source: Reload) -> impl Future<Output = ()> {
    let hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .inspect_err(|e| tracing::warn!(error = %e, "no SIGHUP handler: reload on signal is off"))
        .ok();
    reloading(live, source, hup)
}

async fn reloading(live: Live, mut source: Reload, mut hup: Option<Signal>) {
    let mut watch = Watch::new(source.loaded.take());
    let interval = live.load().config.reload.interval;
    // Asked again before each look: a reload may turn the watching off, or on.
    let watching = |live: &Live| source.watched() && live.load().config.reload.watch;
    let mut tick = tokio::time::interval(interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let why = tokio::select! {
            () = hangup(&mut hup) => {
                watch.reloaded(source.content());
                "SIGHUP"
            }
            _ = tick.tick(), if watching(&live) => {
                if !watch.changed(source.content()) {
                    continue;
                }
                "the configuration file changed"
            }
        };
        // A load reads files and certificates and may resolve a host name to listen on:
        // blocking work, done where the worker's other tasks are handed to another thread.
        let installed = tokio::task::block_in_place(|| {
            (source.load_read(watch.seen.clone())).and_then(|c| Ok(live.reload(c)?))
        });
        match installed {
            Ok(()) => tracing::info!("configuration reloaded ({why})"),
            Err(e) => tracing::error!(
                "configuration not reloaded ({why}): {e:#}; the previous configuration stays in force"
            ),
        }
    }
}

/// The next SIGHUP; never, without a handler for it.
async fn hangup(hup: &mut Option<Signal>) {
    if let Some(h) = hup
        && h.recv().await.is_some()
    {
        return;
    }
    *hup = None;
    std::future::pending().await
}

#[cfg(test)]
mod tests {
    use super::{Reload, Watch};
    use toolgate::config::Overrides;

    fn content(s: &str) -> Option<Vec<u8>> {
        Some(s.as_bytes().to_vec())
    }

    #[test]
    fn a_content_is_reloaded_once_two_looks_in_a_row_find_it() {
        let mut watch = Watch::new(content("a = 1"));
        assert!(!watch.changed(content("a = 1")), "the content in force");
        // A file written in place, caught between its truncation and its write.
        assert!(!watch.changed(content("")));
        assert!(!watch.changed(content("a = 2")));
        assert!(watch.changed(content("a = 2")));
        assert_eq!(watch.seen, content("a = 2"));
        assert!(!watch.changed(content("a = 2")), "reloaded once");
        // Changed and changed back between two looks: nothing to reload.
        assert!(!watch.changed(content("a = 3")));
        assert!(!watch.changed(content("a = 2")));
        assert!(!watch.changed(content("a = 2")));
    }

    #[test]
    fn a_file_that_cannot_be_read_is_a_content_too() {
        let mut watch = Watch::new(content("a = 1"));
        assert!(!watch.changed(None));
        assert!(watch.changed(None), "said, as a file that does not load");
        assert!(!watch.changed(None));
        assert!(!watch.changed(content("a = 1")));
        assert!(watch.changed(content("a = 1")));
    }

    #[test]
    fn an_edit_made_after_the_load_is_a_change_however_early() {
        let dir = std::env::temp_dir().join(format!("toolgate-reload-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("toolgate.toml");
        std::fs::write(&path, "[reload]\nwatch = true\n").unwrap();
        let mut source = Reload::new(Some(path.clone()), Overrides::default());
        source.load().unwrap();
        std::fs::write(&path, "[reload]\nwatch = true\n# edited\n").unwrap();
        let mut watch = Watch::new(source.loaded.take());
        assert!(!watch.changed(source.content()));
        assert!(watch.changed(source.content()), "the edit is installed");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_sighup_sets_what_is_in_force() {
        let mut watch = Watch::new(content("a = 1"));
        assert!(!watch.changed(content("a = 2")));
        watch.reloaded(content("a = 2"));
        assert!(!watch.changed(content("a = 2")), "not reloaded again");
    }
}
