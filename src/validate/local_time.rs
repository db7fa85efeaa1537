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

/// A `date-time` or a `time` (as `format` names them) written as RFC 3339 writes it, where
/// `s` is one with its seconds left out (`2026-11-30T10:00`, `09:30`), an offset without its
/// colon (`+0200`) or a space for the `T`: the same time, as Pydantic reads it, in the text
/// every RFC 3339 reader takes. `None` where `s` is already so written or is no such time.
pub(super) fn canonical(s: &str, format: &str) -> Option<String> {
    let (date, clock) = match format {
        "date-time" if s.len() > 11 && matches!(s.as_bytes()[10], b'T' | b't' | b' ') => {
            (Some(&s[..10]), &s[11..])
        }
        "time" => (None, s),
        _ => return None,
    };
    let hm = clock.get(..5).filter(|hm| {
        let b = hm.as_bytes();
        b[2] == b':' && two(&b[..2]).is_some() && two(&b[3..]).is_some()
    })?;
    let rest = &clock[5..];
    // Only ASCII is stepped over: every cut falls between characters.
    let (seconds, zone) = match rest.strip_prefix(':') {
        Some(after) => {
            let n = (after.bytes())
                .take_while(|c| c.is_ascii_digit() || *c == b'.')
                .count();
            rest.split_at(1 + n)
        }
        None => (":00", rest),
    };
    let zone = match zone.as_bytes() {
        [sign @ (b'+' | b'-'), h @ ..] if h.len() == 4 && h.iter().all(u8::is_ascii_digit) => {
            format!("{}{}:{}", char::from(*sign), &zone[1..3], &zone[3..])
        }
        _ => zone.to_owned(),
    };
    let written = match date {
        Some(date) => format!("{date}T{hm}{seconds}{zone}"),
        None => format!("{hm}{seconds}{zone}"),
    };
    let valid = if date.is_some() {
        date_time(&written)
    } else {
        time(&written)
    };
    (valid && written != s).then_some(written)
}

/// The instant a `date-time` with an offset names, written in UTC: `T`, then `Z`, the seconds
/// and their fraction kept. A server that takes only `Z` (zod's `datetime()`) reads it as the
/// same time. `None` for a local time, whose instant is not known, and for what is no
/// `date-time`.
pub(super) fn in_utc(s: &str) -> Option<String> {
    if !date_time(s) {
        return None;
    }
    let b = s.as_bytes();
    let fraction = b[19..]
        .iter()
        .take_while(|c| c.is_ascii_digit() || **c == b'.')
        .count();
    let zone = &b[19 + fraction..];
    if zone.is_empty() {
        return None;
    }
    let (hour, minute) = (two(&b[11..13])?, two(&b[14..16])?);
    let minutes = i32::from(hour) * 60 + i32::from(minute) - offset(zone)?;
    let (year, month, day) = full_date(&b[..10])?;
    let (year, month, day) = match minutes.div_euclid(24 * 60) {
        -1 if day > 1 => (year, month, day - 1),
        -1 if month > 1 => (year, month - 1, days_in(year, month - 1)),
        -1 => (year.checked_sub(1)?, 12, 31),
        1 if day < days_in(year, month) => (year, month, day + 1),
        1 if month < 12 => (year, month + 1, 1),
        1 => (year + 1, 1, 1),
        _ => (year, month, day),
    };
    if year > 9999 {
        return None;
    }
    let minutes = minutes.rem_euclid(24 * 60);
    let seconds = &s[17..19 + fraction];
    Some(format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{seconds}Z",
        minutes / 60,
        minutes % 60
    ))
}

/// A `full-date`: `YYYY-MM-DD`, the day within its month.
fn date(b: &[u8]) -> bool {
    full_date(b).is_some()
}

/// The year, month and day of a `full-date`, the day within its month.
fn full_date(b: &[u8]) -> Option<(u32, u8, u8)> {
    let [y1, y2, y3, y4, b'-', m1, m2, b'-', d1, d2] = *b else {
        return None;
    };
    let (hi, lo) = (two(&[y1, y2])?, two(&[y3, y4])?);
    let (month, day) = (two(&[m1, m2])?, two(&[d1, d2])?);
    let year = u32::from(hi) * 100 + u32::from(lo);
    ((1..=12).contains(&month) && (1..=days_in(year, month)).contains(&day))
        .then_some((year, month, day))
}

/// The days of a month (1 to 12) in a year.
fn days_in(year: u32, month: u8) -> u8 {
    let leap = year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400));
    match month {
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => 31,
    }
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
    fn a_date_time_with_an_offset_is_the_same_instant_in_utc() {
        for (given, utc) in [
            ("2026-11-30T10:00:00+02:00", "2026-11-30T08:00:00Z"),
            ("2026-11-30T10:00:00.250-08:00", "2026-11-30T18:00:00.250Z"),
            ("2026-11-30 23:30:00-01:00", "2026-12-01T00:30:00Z"),
            ("2026-12-31T23:59:59-00:01", "2027-01-01T00:00:59Z"),
            ("2026-03-01T01:00:00+05:30", "2026-02-28T19:30:00Z"),
            ("2024-03-01T01:00:00+05:30", "2024-02-29T19:30:00Z"),
            ("2026-01-01T00:00:00+00:01", "2025-12-31T23:59:00Z"),
            ("2026-05-01T00:00:00+01:00", "2026-04-30T23:00:00Z"),
            ("1998-12-31T15:59:60-08:00", "1998-12-31T23:59:60Z"),
            ("2026-11-30t10:00:00z", "2026-11-30T10:00:00Z"),
            ("2026-11-30T10:00:00Z", "2026-11-30T10:00:00Z"),
        ] {
            assert_eq!(in_utc(given).as_deref(), Some(utc), "{given}");
        }
        for none in [
            "2026-11-30T10:00:00",
            "2026-11-30T10:00:00+0200",
            "0000-01-01T00:00:00+01:00",
            "9999-12-31T23:00:00-01:00",
            "tomorrow",
        ] {
            assert_eq!(in_utc(none), None, "{none}");
        }
    }

    #[test]
    fn a_time_nearly_as_rfc_3339_writes_it_is_written_so() {
        for (given, format, written) in [
            ("2026-11-30T10:00", "date-time", "2026-11-30T10:00:00"),
            ("2026-11-30 10:00", "date-time", "2026-11-30T10:00:00"),
            ("2026-11-30T10:00Z", "date-time", "2026-11-30T10:00:00Z"),
            (
                "2026-11-30T10:00+02:00",
                "date-time",
                "2026-11-30T10:00:00+02:00",
            ),
            (
                "2026-11-30T10:00:00+0200",
                "date-time",
                "2026-11-30T10:00:00+02:00",
            ),
            (
                "2026-11-30t10:00:00.5-0130",
                "date-time",
                "2026-11-30T10:00:00.5-01:30",
            ),
            ("2026-11-30 10:00:00", "date-time", "2026-11-30T10:00:00"),
            ("09:30", "time", "09:30:00"),
            ("09:30+0100", "time", "09:30:00+01:00"),
        ] {
            assert_eq!(
                canonical(given, format).as_deref(),
                Some(written),
                "{given}"
            );
        }
        for (none, format) in [
            ("2026-11-30T10:00:00", "date-time"),
            ("2026-11-30T10:00:00Z", "date-time"),
            ("2026-11-30", "date-time"),
            ("2026-11-30T9:30", "date-time"),
            ("2026-11-31T10:00", "date-time"),
            ("2026-11-30T10:00:0", "date-time"),
            ("2026-11-30T10:00+2", "date-time"),
            ("2026-11-30T10:00", "date"),
            ("9:30", "time"),
            ("0930", "time"),
            ("24:00", "time"),
            ("09:30:00", "time"),
            ("é9:30", "time"),
            ("09:30:5é", "time"),
            ("09:3é", "time"),
            ("2026-11-30Té:aé", "date-time"),
            ("", "time"),
        ] {
            assert_eq!(canonical(none, format), None, "{none}");
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
