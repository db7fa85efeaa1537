//! Per-client rules: which tools a client may see and call, and how often (`[clients]`).
//!
//! The client is who authentication says it is (a static token's name, a JWT claim); without
//! authentication every caller is the same anonymous client, ruled by `"*"`. The rules sit on
//! top of `[validation]`'s allow and deny lists, never loosen them.

use crate::config::{ClientPolicy, ConfigError};
use crate::locks::MutexExt;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Who is calling, and what applies to them.
#[derive(Clone)]
pub struct Client {
    /// The identity, or `(anonymous)`; rate limits are kept per name.
    pub name: Arc<str>,
    pub rules: Option<Arc<ClientRules>>,
}

impl Client {
    pub fn allows(&self, tool: &str) -> bool {
        self.rules.as_ref().is_none_or(|r| r.allows(tool))
    }
}

pub struct ClientRules {
    allow: Vec<String>,
    deny: Vec<String>,
    rate: Option<Rate>,
    tool_rates: HashMap<String, Rate>,
    /// The servers it may reach by name; empty, all.
    upstreams: Vec<String>,
}

impl ClientRules {
    pub fn from_policy(client: &str, p: &ClientPolicy) -> Result<ClientRules, ConfigError> {
        let parse = |s: &str| {
            Rate::parse(s).map_err(|e| ConfigError(format!("clients.{client}: rate {s:?}: {e}")))
        };
        Ok(ClientRules {
            allow: p.allow_tools.clone(),
            deny: p.deny_tools.clone(),
            rate: p.rate_limit.as_deref().map(parse).transpose()?,
            tool_rates: p
                .tool_rate_limits
                .iter()
                .map(|(t, r)| Ok((t.clone(), parse(r)?)))
                .collect::<Result<_, ConfigError>>()?,
            upstreams: p.upstreams.clone(),
        })
    }

    /// Whether it may reach the server named `upstream`.
    pub fn reaches(&self, upstream: &str) -> bool {
        self.upstreams.is_empty() || self.upstreams.iter().any(|u| u == upstream)
    }

    pub fn allows(&self, tool: &str) -> bool {
        crate::config::allows(&self.allow, &self.deny, tool)
    }

    pub fn rate_for(&self, tool: &str) -> Option<Rate> {
        self.tool_rates.get(tool).copied().or(self.rate)
    }
}

/// `count` calls per `per`, in bursts of up to `count`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rate {
    pub count: u32,
    pub per: Duration,
}

impl Rate {
    /// `N/second`, `N/minute`, `N/hour` (or `N/s`, `N/m`, `N/h`).
    pub fn parse(s: &str) -> Result<Rate, String> {
        let (n, unit) = s
            .split_once('/')
            .ok_or("write it as N/second, N/minute or N/hour")?;
        let count: u32 = n
            .trim()
            .parse()
            .map_err(|_| format!("{n:?} is not a count"))?;
        if count == 0 {
            return Err("the count must be at least 1 (deny the tool instead)".into());
        }
        let per = match unit.trim() {
            "s" | "sec" | "second" => Duration::from_secs(1),
            "m" | "min" | "minute" => Duration::from_secs(60),
            "h" | "hour" => Duration::from_secs(3600),
            other => {
                return Err(format!(
                    "unknown unit {other:?}: use second, minute or hour"
                ));
            }
        };
        Ok(Rate { count, per })
    }

    pub(crate) fn describe(&self) -> String {
        let unit = match self.per.as_secs() {
            1 => "second",
            60 => "minute",
            _ => "hour",
        };
        let times = if self.count == 1 { "time" } else { "times" };
        format!("{} {times} per {unit}", self.count)
    }
}

/// Most (client, upstream, tool) buckets kept; past it, buckets that have refilled (and so
/// hold nothing) are dropped first.
const MAX_BUCKETS: usize = 100_000;

type BucketKey = (Arc<str>, Arc<str>, Box<str>);

/// Generic cell rate algorithm: one instant per bucket, the time at which the bucket would be
/// full again. It survives reloads; the rate itself is read from the rules in force.
#[derive(Default)]
pub struct RateLimiter {
    buckets: Mutex<HashMap<BucketKey, Instant>>,
}

/// A call over its client's rate.
pub struct Limited {
    pub retry_after: Duration,
    pub rate: String,
}

impl RateLimiter {
    pub fn admit(
        &self,
        client: &Arc<str>,
        upstream: &Arc<str>,
        tool: &str,
        rate: Rate,
    ) -> Result<(), Limited> {
        self.admit_at(client, upstream, tool, rate, Instant::now())
    }

    fn admit_at(
        &self,
        client: &Arc<str>,
        upstream: &Arc<str>,
        tool: &str,
        rate: Rate,
        now: Instant,
    ) -> Result<(), Limited> {
        let interval = rate.per / rate.count;
        let tolerance = rate.per - interval;
        let mut buckets = self.buckets.locked();
        if buckets.len() >= MAX_BUCKETS {
            buckets.retain(|_, full_at| *full_at > now);
        }
        let key = (client.clone(), upstream.clone(), Box::from(tool));
        let tat = buckets.get(&key).copied().unwrap_or(now).max(now);
        // Compared as durations ahead of now: `Instant` minus an hour can underflow on a
        // machine booted less than an hour ago.
        let ahead = tat - now;
        if ahead > tolerance {
            return Err(Limited {
                retry_after: ahead - tolerance,
                rate: rate.describe(),
            });
        }
        buckets.insert(key, tat + interval);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_and_refuse_nonsense() {
        assert_eq!(
            Rate::parse("5/minute").unwrap(),
            Rate {
                count: 5,
                per: Duration::from_secs(60)
            }
        );
        assert_eq!(Rate::parse("2/s").unwrap().per, Duration::from_secs(1));
        assert!(Rate::parse("0/s").is_err());
        assert!(Rate::parse("5").is_err());
        assert!(Rate::parse("5/fortnight").is_err());
    }

    #[test]
    fn a_burst_then_one_call_per_interval() {
        let l = RateLimiter::default();
        let (c, u): (Arc<str>, Arc<str>) = ("bot".into(), "up".into());
        let rate = Rate::parse("3/minute").unwrap();
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(l.admit_at(&c, &u, "search", rate, t0).is_ok());
        }
        let refused = l.admit_at(&c, &u, "search", rate, t0).err().unwrap();
        assert_eq!(refused.retry_after, Duration::from_secs(20));
        assert_eq!(refused.rate, "3 times per minute");
        // Another tool, another client: their own buckets.
        assert!(l.admit_at(&c, &u, "other", rate, t0).is_ok());
        assert!(l.admit_at(&"ci".into(), &u, "search", rate, t0).is_ok());
        // An hourly rate right after boot (an `Instant` near its origin) still limits.
        let hourly = Rate::parse("1/hour").unwrap();
        assert!(l.admit_at(&c, &u, "rare", hourly, t0).is_ok());
        assert!(l.admit_at(&c, &u, "rare", hourly, t0).is_err());
        // One interval later, exactly one more.
        let t1 = t0 + Duration::from_secs(20);
        assert!(l.admit_at(&c, &u, "search", rate, t1).is_ok());
        assert!(l.admit_at(&c, &u, "search", rate, t1).is_err());
    }
}
