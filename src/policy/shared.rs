//! Rate-limit buckets shared by every replica, in Redis (or Valkey).
//!
//! With a HorizontalPodAutoscaler, per-replica buckets give a client N times its limit. Here
//! each (client, upstream, tool) bucket is one Redis key holding the same instant the local
//! limiter keeps (generic cell rate algorithm), updated by one script in one round trip, with
//! the server's clock, so replicas whose clocks differ still agree. Keys expire once their
//! bucket has refilled: Redis holds only buckets in use.
//!
//! The connection is made on first use and made again by itself after a failure. A call that
//! cannot reach Redis within [`WAIT`] is decided by `shared_state.on_unavailable`.

use super::clients::{Limited, Rate};
use crate::config::{ConfigError, SharedState};
use crate::net::tls::{TlsFiles, client_identity, roots_pem};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
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
}

pub struct SharedLimiter {
    url: String,
    /// The TLS files when the connection was set up.
    files: TlsFiles,
    conn: ConnectionManager,
    script: redis::Script,
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
        })
    }

    /// Whether this limiter is the one `url` and `s`'s files (as they are now) would make.
    pub fn same(&self, url: &str, s: &SharedState) -> bool {
        self.url == url && self.files == tls_files(s)
    }

    /// The shared bucket's verdict; `Err` when Redis did not answer in time.
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
        let call = invocation.invoke_async::<u64>(&mut conn);
        match tokio::time::timeout(WAIT, call).await {
            Ok(Ok(0)) => Ok(Ok(())),
            Ok(Ok(wait_us)) => Ok(Err(Limited {
                retry_after: Duration::from_micros(wait_us),
                rate: rate.describe(),
            })),
            Ok(Err(e)) => Err(Unshared::Failed(e)),
            Err(_) => Err(Unshared::Silent(WAIT)),
        }
    }
}
