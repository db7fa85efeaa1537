//! Which traces are recorded, as the standard `OTEL_TRACES_SAMPLER` and
//! `OTEL_TRACES_SAMPLER_ARG` say: `parentbased_always_on` unless told otherwise, so a client
//! that sampled a trace out (its `traceparent`'s flags `00`) gets no spans of toolgate's
//! either, and the server behind is told the same. A trace not recorded still carries its ids
//! onward: only the spans are not made.

/// A sampler, read once from the environment.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Sampler {
    /// A parent's decision stands, when the request brought one.
    parent_based: bool,
    root: Root,
}

/// What decides a trace toolgate starts (or every trace, not parent-based).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Root {
    On,
    Off,
    /// Recorded when the trace id's last 63 bits are under this bound: the same trace id
    /// is decided alike by every process that samples at the same ratio.
    Ratio(u64),
}

impl Sampler {
    /// From the two variables' values. One this build does not know (`jaeger_remote`,
    /// `xray`) leaves the default, with a warning: the variables are often set for every
    /// process of a deployment, whatever its language.
    pub(crate) fn from_env(name: Option<&str>, arg: Option<&str>) -> Sampler {
        let ratio = || {
            let r = arg.map(str::trim).map(str::parse::<f64>);
            match r {
                None => Root::On,
                Some(Ok(r)) if (0.0..=1.0).contains(&r) => Root::Ratio((r * 2f64.powi(63)) as u64),
                Some(_) => {
                    tracing::warn!(
                        "OTEL_TRACES_SAMPLER_ARG is not a ratio from 0 to 1: every trace is recorded"
                    );
                    Root::On
                }
            }
        };
        let (parent_based, root) = match name.map(str::trim) {
            None | Some("parentbased_always_on") => (true, Root::On),
            Some("parentbased_always_off") => (true, Root::Off),
            Some("parentbased_traceidratio") => (true, ratio()),
            Some("always_on") => (false, Root::On),
            Some("always_off") => (false, Root::Off),
            Some("traceidratio") => (false, ratio()),
            Some(other) => {
                tracing::warn!(
                    sampler = other,
                    "OTEL_TRACES_SAMPLER is not one toolgate has: parentbased_always_on is used"
                );
                (true, Root::On)
            }
        };
        Sampler { parent_based, root }
    }

    /// The trace-flags byte a span of `trace_id` carries, under a parent whose flags are
    /// `parent` when there is one: its sampled bit says whether the span is recorded.
    pub(crate) fn flags(&self, trace_id: &[u8; 16], parent: Option<u8>) -> u8 {
        let sampled = match parent {
            Some(flags) if self.parent_based => flags & 1 == 1,
            _ => match self.root {
                Root::On => true,
                Root::Off => false,
                Root::Ratio(bound) => {
                    let low = u64::from_be_bytes(trace_id[8..].try_into().expect("8 bytes"));
                    (low >> 1) < bound
                }
            },
        };
        (parent.unwrap_or(0) & !1) | u8::from(sampled)
    }
}

/// Whether a span carrying `flags` is recorded.
pub(crate) fn recorded(flags: u8) -> bool {
    flags & 1 == 1
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: [u8; 16] = [7; 16];

    #[test]
    fn by_default_a_parents_decision_stands_and_a_new_trace_is_recorded() {
        let s = Sampler::from_env(None, None);
        assert_eq!(s.flags(&ID, None), 1);
        assert_eq!(s.flags(&ID, Some(1)), 1);
        assert_eq!(s.flags(&ID, Some(0)), 0);
        // Other flag bits pass on as they came.
        assert_eq!(s.flags(&ID, Some(0x02)), 0x02);
    }

    #[test]
    fn each_standard_sampler_decides_as_named() {
        let cases = [
            ("always_on", None, [1, 1, 1]),
            ("always_off", None, [0, 0, 0]),
            ("parentbased_always_off", None, [0, 1, 0]),
            ("traceidratio", Some("0"), [0, 0, 0]),
            ("traceidratio", Some("1"), [1, 1, 1]),
            ("parentbased_traceidratio", Some("0"), [0, 1, 0]),
            ("jaeger_remote", None, [1, 1, 0]),
            ("traceidratio", Some("2"), [1, 1, 1]),
        ];
        for (name, arg, [root, sampled_parent, unsampled_parent]) in cases {
            let s = Sampler::from_env(Some(name), arg);
            let got = [
                s.flags(&ID, None),
                s.flags(&ID, Some(1)),
                s.flags(&ID, Some(0)),
            ];
            assert_eq!(
                got,
                [root, sampled_parent, unsampled_parent],
                "{name} {arg:?}"
            );
        }
    }

    #[test]
    fn a_ratio_records_about_that_share_of_traces_and_decides_one_trace_alike() {
        let s = Sampler::from_env(Some("traceidratio"), Some("0.25"));
        let mut n = 0;
        for i in 0u64..10_000 {
            let mut id = [0u8; 16];
            id[8..].copy_from_slice(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes());
            let first = s.flags(&id, None);
            assert_eq!(first, s.flags(&id, None));
            n += u32::from(recorded(first));
        }
        assert!((2_300..=2_700).contains(&n), "{n} of 10,000");
    }
}
