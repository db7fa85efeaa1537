//! Rate-limit buckets shared by every replica, in Redis (or Valkey).
//!
//! With a HorizontalPodAutoscaler, per-replica buckets give a client N times its limit. Here
//! each (client, upstream, tool) bucket is one Redis key holding the same instant the local
//! limiter keeps (generic cell rate algorithm), updated by one script in one round trip, with
//! the server's clock, so replicas whose clocks differ still agree. Keys expire once their
//! bucket has refilled: Redis holds only buckets in use.
//!
//! The connection is made on first use and made again by itself after a failure. A call that
//! cannot reach Redis within [`WAIT`] is decided by `shared_state.on_unavailable`, and so are
//! the calls of the next [`RETRY_AFTER`], without waiting for it.

use super::clients::{Limited, Rate};
use crate::config::{ConfigError, SharedState};
use crate::locks::MutexExt;
use crate::net::tls::{TlsFiles, client_identity, roots_pem};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long a call waits for Redis before it is decided without it.
const WAIT: Duration = Duration::from_millis(250);

/// GCRA in one step. `KEYS[1]`: the bucket. ARGV: the emission interval and the burst
/// tolerance, in microseconds. Returns 0 when admitted, else how many microseconds until the
/// next call would be.
const SCRIPT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local interval = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or now)
if tat < now then tat = now end
local ahead = tat - now
if ahead > tolerance then return ahead - tolerance end
local full_at = tat + interval
redis.call('SET', KEYS[1], full_at, 'PX', math.floor((full_at - now) / 1000) + 1000)
return 0
";

fn tls_files(s: &SharedState) -> TlsFiles {
    TlsFiles::now(&[
        s.ca_file.as_deref(),
        s.client_cert_file.as_deref(),
        s.client_key_file.as_deref(),
    ])
}

/// What TLS to Redis is made with, when the settings name any of it: the roots (the system's
/// and `ca_file`'s) and the client certificate.
fn certificates(s: &SharedState) -> Result<Option<redis::TlsCertificates>, ConfigError> {
    let problem = |e: crate::net::tls::TlsError| ConfigError(e.to_string());
    let root_cert = match &s.ca_file {
        Some(path) => Some(roots_pem(path, "shared_state.ca_file").map_err(problem)?),
        None => None,
    };
    let keys = (
        "shared_state.client_cert_file",
        "shared_state.client_key_file",
    );
    let client_tls = client_identity(
        s.client_cert_file.as_deref(),
        s.client_key_file.as_deref(),
        keys,
    )
    .map_err(problem)?
    .map(|id| redis::ClientTlsConfig {
        client_cert: id.cert_pem,
        client_key: id.key_pem,
    });
    Ok(
        (root_cert.is_some() || client_tls.is_some()).then_some(redis::TlsCertificates {
            client_tls,
            root_cert,
        }),
    )
}

/// Why the shared bucket gave no verdict.
#[derive(Debug, thiserror::Error)]
pub enum Unshared {
    #[error("{0}")]
    Failed(redis::RedisError),
    #[error("no answer within {0:?}")]
    Silent(Duration),
    /// Redis failed a call moments ago: this one did not wait for it ([`RETRY_AFTER`]).
    #[error("Redis did not answer a moment ago")]
    Resting,
}

/// After Redis fails a call, how long the calls that follow are decided without asking it.
/// A Redis that drops packets would otherwise cost every call [`WAIT`]; one call asks again
/// when this has passed.
const RETRY_AFTER: Duration = Duration::from_millis(500);

pub struct SharedLimiter {
    url: String,
    /// The TLS files when the connection was set up.
    files: TlsFiles,
    conn: ConnectionManager,
    script: redis::Script,
    health: Health,
}

/// Whether Redis answers, as the calls that asked it found. Said in the log when it changes
/// (a `WARN` when Redis stops answering or fails for another reason, an `INFO` when it
/// answers again), never once per call: the calls decided without it are counted instead.
struct Health {
    epoch: std::time::Instant,
    /// Until when, in milliseconds since `epoch`, calls do not ask Redis; 0 while it answers.
    resting_until: AtomicU64,
    /// Why Redis last failed, as logged; `None` while it answers.
    failing: Mutex<Option<Reason>>,
}

/// What makes a failure worth another line: no answer in time (however it showed: toolgate's
/// wait or the connection's), or an error of another kind (a certificate refused).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reason {
    NoAnswer,
    Failed(redis::ErrorKind),
}

impl Unshared {
    fn reason(&self) -> Reason {
        match self {
            Unshared::Failed(e) if !e.is_timeout() => Reason::Failed(e.kind()),
            _ => Reason::NoAnswer,
        }
    }
}

impl Health {
    fn new() -> Health {
        Health {
            epoch: std::time::Instant::now(),
            resting_until: AtomicU64::new(0),
            failing: Mutex::new(None),
        }
    }

    /// Milliseconds since `epoch`, from 1 (0 means "answers").
    fn now(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).map_or(u64::MAX, |ms| ms.saturating_add(1))
    }

    /// When the calls after one that failed now ask Redis again.
    fn next_try(&self) -> u64 {
        self.now().saturating_add(RETRY_AFTER.as_millis() as u64)
    }

    /// Whether this call asks Redis: always while it answers; once it failed, only one call
    /// each [`RETRY_AFTER`].
    fn ask(&self) -> bool {
        let until = self.resting_until.load(Ordering::Relaxed);
        if until == 0 {
            return true;
        }
        self.now() >= until
            && (self.resting_until)
                .compare_exchange(until, self.next_try(), Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
    }

    fn failed(&self, why: &Unshared) {
        self.resting_until.store(self.next_try(), Ordering::Relaxed);
        let reason = Some(why.reason());
        let mut failing = self.failing.locked();
        if *failing != reason {
            tracing::warn!(error = %why, "shared rate limits unavailable: calls are decided by shared_state.on_unavailable until Redis answers");
            *failing = reason;
        }
    }

    /// Most calls find Redis answering: one read, no write.
    fn answered(&self) {
        let resting = self.resting_until.load(Ordering::Relaxed) != 0;
        if resting
            && self.resting_until.swap(0, Ordering::Relaxed) != 0
            && self.failing.locked().take().is_some()
        {
            tracing::info!("shared rate limits available again: Redis answers");
        }
    }
}

impl SharedLimiter {
    /// A limiter on the Redis at `url` (`redis://`, or `rediss://`, whose certificate is
    /// checked against the system's roots and `ca_file`'s, and which is shown the client
    /// certificate when one is given); nothing is sent yet.
    pub fn new(url: &str, s: &SharedState) -> Result<SharedLimiter, ConfigError> {
        let unusable = |e: redis::RedisError| ConfigError(format!("shared_state.redis_url: {e}"));
        if let Some(key) = s.tls_key_set()
            && !url.starts_with("rediss://")
        {
            return Err(ConfigError(format!(
                "shared_state.{key} is for a rediss:// redis_url"
            )));
        }
        let client = match certificates(s)? {
            None => redis::Client::open(url),
            Some(certificates) => redis::Client::build_with_tls(url, certificates),
        }
        .map_err(unusable)?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(WAIT))
            .set_response_timeout(Some(WAIT))
            .set_number_of_retries(1)
            .set_max_delay(Duration::from_secs(2));
        let conn = ConnectionManager::new_lazy_with_config(client, config).map_err(unusable)?;
        Ok(SharedLimiter {
            url: url.to_owned(),
            files: tls_files(s),
            conn,
            script: redis::Script::new(SCRIPT),
            health: Health::new(),
        })
    }

    /// Whether this limiter is the one `url` and `s`'s files (as they are now) would make.
    pub fn same(&self, url: &str, s: &SharedState) -> bool {
        self.url == url && self.files == tls_files(s)
    }

    /// The shared bucket's verdict; `Err` when Redis did not answer in time, or failed a
    /// call a moment ago.
    pub async fn admit(
        &self,
        client: &str,
        upstream: &str,
        tool: &str,
        rate: Rate,
    ) -> Result<Result<(), Limited>, Unshared> {
        let interval = rate.per / rate.count;
        let tolerance = rate.per - interval;
        // Length-prefixed parts: no name can make two buckets share a key.
        let key = format!(
            "toolgate:rl:{}:{client}:{}:{upstream}:{tool}",
            client.len(),
            upstream.len()
        );
        let mut conn = self.conn.clone();
        let mut invocation = self.script.key(key);
        invocation
            .arg(interval.as_micros() as u64)
            .arg(tolerance.as_micros() as u64);
        if !self.health.ask() {
            return Err(Unshared::Resting);
        }
        let call = invocation.invoke_async::<u64>(&mut conn);
        let verdict = match tokio::time::timeout(WAIT, call).await {
            Ok(Ok(0)) => Ok(Ok(())),
            Ok(Ok(wait_us)) => Ok(Err(Limited {
                retry_after: Duration::from_micros(wait_us),
                rate: rate.describe(),
            })),
            Ok(Err(e)) => Err(Unshared::Failed(e)),
            Err(_) => Err(Unshared::Silent(WAIT)),
        };
        match &verdict {
            Ok(_) => self.health.answered(),
            Err(why) => self.health.failed(why),
        }
        verdict
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// After a failure the calls do not ask; once the rest is over exactly one asks, and an
    /// answer lets every call ask again.
    #[test]
    fn after_a_failure_one_call_asks_again() {
        let health = Health::new();
        assert!(
            health.ask() && health.ask(),
            "while Redis answers, every call asks"
        );
        health.failed(&Unshared::Silent(WAIT));
        assert!(!health.ask(), "a call just after a failure does not ask");
        // The rest is over.
        health.resting_until.store(1, Ordering::Relaxed);
        assert!(health.ask(), "one call asks again");
        assert!(!health.ask(), "and only one");
        health.answered();
        assert!(health.ask() && health.ask(), "an answer ends the rest");
        assert!(
            health.failing.locked().is_none(),
            "the failure is forgotten"
        );
    }
}
