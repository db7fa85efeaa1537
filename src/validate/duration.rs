//! The `duration` format as servers write and read it: ISO 8601's, of which RFC 3339's
//! grammar (Appendix A, what JSON Schema names) is a part. Pydantic writes a `timedelta`
//! with a fraction of a second (`P1DT5.000003S`) and a negative one with a leading sign
//! (`-PT1S`), and reads both; zod's `duration()` takes a fraction too. Held to RFC 3339's
//! whole numbers alone, such a result would fail as invalid output and such an argument be
//! refused where the server takes it. The rest of the grammar holds: `P`, then weeks alone or
//! years, months and days in that order, then `T` and hours, minutes and seconds in that
//! order, each at most once, at least one in all and one after a `T`; only the last may have
//! a fraction (`.` or `,`, as ISO 8601 writes it).

/// A `duration`: `[+-]P…`, as above.
pub(crate) fn duration(s: &str) -> bool {
    let b = s.as_bytes();
    let b = b
        .strip_prefix(b"-")
        .or_else(|| b.strip_prefix(b"+"))
        .unwrap_or(b);
    let Some(rest) = b.strip_prefix(b"P") else {
        return false;
    };
    let (date, time) = match rest.iter().position(|&c| c == b'T') {
        Some(t) => (&rest[..t], Some(&rest[t + 1..])),
        None => (rest, None),
    };
    let weeks = date.last() == Some(&b'W');
    let date_units: &[u8] = if weeks { b"W" } else { b"YMD" };
    let (Some(date_parts), time_parts) = (
        components(date, date_units),
        time.map(|t| components(t, b"HMS")),
    ) else {
        return false;
    };
    let time_parts = match time_parts {
        None => 0,
        Some(None | Some(0)) => return false,
        Some(Some(_)) if weeks => return false,
        Some(Some(n)) => n,
    };
    date_parts + time_parts > 0 && fraction_last(rest)
}

/// How many components `part` holds, each a number and then one of `units`, in their order,
/// each at most once; `None` when it holds anything else.
fn components(mut part: &[u8], units: &[u8]) -> Option<usize> {
    let (mut count, mut next) = (0, 0);
    while !part.is_empty() {
        let digits = part.iter().take_while(|c| c.is_ascii_digit()).count();
        let fraction = match part.get(digits) {
            Some(b'.' | b',') => {
                1 + part[digits + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .count()
            }
            _ => 0,
        };
        let number = digits + fraction;
        if digits == 0 || fraction == 1 {
            return None;
        }
        let unit = *part.get(number)?;
        let at = units[next..].iter().position(|&u| u == unit)?;
        next += at + 1;
        count += 1;
        part = &part[number + 1..];
    }
    Some(count)
}

/// Whether a fraction, if any, is on the last component.
fn fraction_last(rest: &[u8]) -> bool {
    match rest.iter().position(|&c| c == b'.' || c == b',') {
        None => true,
        Some(at) => {
            let after = &rest[at + 1..];
            let digits = after.iter().take_while(|c| c.is_ascii_digit()).count();
            after.len() == digits + 1
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_as_servers_write_them_pass() {
        for ok in [
            "P1D",
            "PT0S",
            "P14D",
            "P2W",
            "PT1H30M",
            "P1Y35DT3H0.000005S",
            "P1DT5.000003S",
            "-PT1S",
            "-PT23H59M55S",
            "+PT1S",
            "PT1,5S",
            "PT1.5H",
            "P1Y2M3DT4H5M6S",
        ] {
            assert!(duration(ok), "{ok}");
        }
    }

    #[test]
    fn what_is_no_duration_fails() {
        for bad in [
            "",
            "P",
            "PT",
            "P1DT",
            "1D",
            "P1",
            "PT1",
            "P1S",
            "PT1D",
            "P1D1Y",
            "P1D1D",
            "PT1S1M",
            "P1W1D",
            "P1WT1H",
            "P1.5DT1H",
            "PT1.5H30M",
            "PT1.S",
            "PT.5S",
            "P-1D",
            "--PT1S",
            "P1DT1HT1M",
            "PT1H ",
            "pt1h",
            "P١D",
        ] {
            assert!(!duration(bad), "{bad}");
        }
    }
}
