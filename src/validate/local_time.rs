//! The `date-time` and `time` formats as servers write and read them: RFC 3339's, and also a
//! local time, its offset left out. Pydantic (FastMCP, the Python SDK's `MCPServer`) declares
//! a naive `datetime` as `"format": "date-time"` and a `time` as `"format": "time"`, then writes
//! and reads them without an offset (`2026-11-30T10:00:00`). Held to RFC 3339 alone, a call
//! the server takes would be refused, and every such result it returns failed as invalid
//! output; told to add an offset, a model would hand the server an aware value where its code
//! compares naive ones. A space may stand for the `T`, as RFC 3339 (§5.6) allows. Everything
//! else is RFC 3339's: seconds are required, and a leap second falls on 23:59 UTC (23:59 for a
//! local time).

/// A `date-time`: `full-date`, `T` (or `t`, or a space), a time as [`time`] takes it.
pub(crate) fn date_time(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() > 10 && matches!(b[10], b'T' | b't' | b' ') && date(&b[..10]) && time(&s[11..])
}

/// A `time`: `HH:MM:SS`, a fraction, then an offset (`Z`, `+HH:MM`, `-HH:MM`) or none.
pub(crate) fn time(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 8 || b[2] != b':' || b[5] != b':' {
        return false;
    }
    let (Some(hour), Some(minute), Some(second)) = (two(&b[0..2]), two(&b[3..5]), two(&b[6..8]))
    else {
        return false;
    };
    if hour > 23 || minute > 59 || second > 60 {
        return false;
    }
    let mut rest = &b[8..];
    if let [b'.', digits @ ..] = rest {
        let n = digits.iter().take_while(|c| c.is_ascii_digit()).count();
        if n == 0 {
            return false;
        }
        rest = &digits[n..];
    }
    let Some(east) = offset(rest) else {
        return false;
    };
    // A leap second is the last second of a UTC day.
    let utc = (i32::from(hour) * 60 + i32::from(minute) - east).rem_euclid(24 * 60);
    second < 60 || utc == 23 * 60 + 59
}

/// The offset east of UTC in minutes: `Z`, `±HH:MM`, or none (a local time, taken as UTC).
fn offset(b: &[u8]) -> Option<i32> {
    match b {
        [] | [b'Z' | b'z'] => Some(0),
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let (h, m) = (two(&[*h1, *h2])?, two(&[*m1, *m2])?);
            if h > 23 || m > 59 {
                return None;
            }
            let minutes = i32::from(h) * 60 + i32::from(m);
            Some(if *sign == b'-' { -minutes } else { minutes })
        }
        _ => None,
    }
}

/// A `full-date`: `YYYY-MM-DD`, the day within its month.
fn date(b: &[u8]) -> bool {
    let [y1, y2, y3, y4, b'-', m1, m2, b'-', d1, d2] = *b else {
        return false;
    };
    let (Some(hi), Some(lo), Some(month), Some(day)) = (
        two(&[y1, y2]),
        two(&[y3, y4]),
        two(&[m1, m2]),
        two(&[d1, d2]),
    ) else {
        return false;
    };
    let year = u32::from(hi) * 100 + u32::from(lo);
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return false,
    };
    (1..=days).contains(&day)
}

fn two(b: &[u8]) -> Option<u8> {
    match b {
        [a @ b'0'..=b'9', c @ b'0'..=b'9'] => Some((a - b'0') * 10 + (c - b'0')),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc_3339_date_times_and_local_ones_pass() {
        for ok in [
            "2026-11-30T10:00:00Z",
            "2026-11-30t10:00:00z",
            "2026-11-30T10:00:00.123456+05:30",
            "2026-11-30T10:00:00-08:00",
            "2026-11-30T10:00:00",
            "2026-11-30 10:00:00.5",
            "2024-02-29T00:00:00",
            "1998-12-31T23:59:60Z",
            "1998-12-31T15:59:60-08:00",
            "1998-12-31T23:59:60",
        ] {
            assert!(date_time(ok), "{ok}");
        }
    }

    #[test]
    fn what_is_not_a_date_time_fails() {
        for bad in [
            "2026-11-30",
            "2026-11-30T10:00",
            "2026-11-30T10:00:00.",
            "2026-11-30T10:00:00+0530",
            "2026-11-30T10:00:00+24:00",
            "2026-11-30T24:00:00",
            "2026-11-31T10:00:00",
            "2023-02-29T10:00:00",
            "1900-02-29T10:00:00",
            "2026-13-01T10:00:00",
            "2026-11-30X10:00:00",
            "1998-12-31T22:59:60Z",
            "1998-12-31T23:59:60+01:00",
            "2026-11-30T10:00:00Z ",
            "1764496800",
            "٢٠٢٦-11-30T10:00:00",
            "",
        ] {
            assert!(!date_time(bad), "{bad}");
        }
    }

    #[test]
    fn a_time_may_leave_out_its_offset() {
        assert!(time("10:00:00"));
        assert!(time("10:00:00.25Z"));
        assert!(time("23:59:60"));
        assert!(!time("10:00"));
        assert!(!time("25:00:00"));
        assert!(!time("10:00:00+5:30"));
    }
}
