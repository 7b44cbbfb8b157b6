//! Timestamps: every clock the boot logs use, parsed into nanoseconds since the Unix epoch
//! (UTC). No calendar crate: the formats are fixed and the arithmetic is small.

/// Nanoseconds since 1970-01-01T00:00:00Z.
pub type Nanos = i64;

pub const NS_PER_S: i64 = 1_000_000_000;

/// Days since 1970-01-01 for a proleptic Gregorian date (Howard Hinnant's algorithm).
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let m = i64::from(m);
    let d = i64::from(d);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// (year, month, day, hour, minute, second, nanosecond) of a UTC instant.
pub fn civil_from_nanos(ns: Nanos) -> (i64, u32, u32, u32, u32, u32, u32) {
    let secs = ns.div_euclid(NS_PER_S);
    let sub = ns.rem_euclid(NS_PER_S) as u32;
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = if m <= 2 { y + 1 } else { y };
    (
        y,
        m,
        d,
        (sod / 3600) as u32,
        (sod % 3600 / 60) as u32,
        (sod % 60) as u32,
        sub,
    )
}

/// RFC 3339 text of a UTC instant with microseconds: `2025-11-20T17:56:21.688170Z`.
pub fn format_rfc3339(ns: Nanos) -> String {
    let (y, mo, d, h, mi, s, sub) = civil_from_nanos(ns);
    format!(
        "{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}.{:06}Z",
        sub / 1000
    )
}

fn digits(s: &[u8]) -> Option<u32> {
    if s.is_empty() || s.len() > 9 || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut v: u32 = 0;
    for &c in s {
        v = v * 10 + u32::from(c - b'0');
    }
    Some(v)
}

/// Years accepted in log timestamps: keeps every instant, and every difference of two, far
/// inside `i64` nanoseconds.
pub const YEARS: std::ops::RangeInclusive<i64> = 1970..=2200;

fn valid_date(y: i64, mo: u32, d: u32, h: u32, mi: u32, s: u32) -> bool {
    (1..=12).contains(&mo)
        && (1..=31).contains(&d)
        && h < 24
        && mi < 60
        && s <= 60
        && YEARS.contains(&y)
}

/// A validated calendar date and time of day (`h, m, s, ns`) at `utc_offset_s` seconds east
/// of UTC → nanoseconds since the epoch; `None` if out of range.
fn instant(
    y: i64,
    mo: u32,
    d: u32,
    (h, mi, sec, ns): (u32, u32, u32, u32),
    utc_offset_s: i64,
) -> Option<Nanos> {
    if !valid_date(y, mo, d, h, mi, sec) {
        return None;
    }
    let secs = days_from_civil(y, mo, d) * 86_400
        + i64::from(h) * 3600
        + i64::from(mi) * 60
        + i64::from(sec)
        - utc_offset_s;
    secs.checked_mul(NS_PER_S)?.checked_add(i64::from(ns))
}

/// Fractional seconds after a `.`: up to 9 digits, returned as nanoseconds, plus the rest.
fn fraction(s: &[u8]) -> (u32, &[u8]) {
    let Some(rest) = s.strip_prefix(b".") else {
        return (0, s);
    };
    let n = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    let (frac, tail) = rest.split_at(n);
    let mut ns: u32 = 0;
    for i in 0..9 {
        ns = ns * 10 + frac.get(i).map_or(0, |c| u32::from(c - b'0'));
    }
    (ns, tail)
}

/// Parse RFC 3339 / ISO 8601 (`2025-11-20T16:25:32.996810781Z`, `...+01:00`, `+0100`, or a
/// space instead of `T`). A missing zone is taken as UTC.
pub fn parse_rfc3339(s: &str) -> Option<Nanos> {
    let b = s.trim().as_bytes();
    if b.len() < 19 {
        return None;
    }
    let y = digits(b.get(0..4)?)? as i64;
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    let mo = digits(b.get(5..7)?)?;
    let d = digits(b.get(8..10)?)?;
    if !matches!(b.get(10), Some(b'T' | b't' | b' ')) {
        return None;
    }
    let h = digits(b.get(11..13)?)?;
    let mi = digits(b.get(14..16)?)?;
    let sec = digits(b.get(17..19)?)?;
    if b.get(13) != Some(&b':') || b.get(16) != Some(&b':') {
        return None;
    }
    let (ns, rest) = fraction(b.get(19..)?);
    let off = parse_zone(rest)?;
    instant(y, mo, d, (h, mi, sec, ns), off)
}

/// Zone suffix → offset in seconds east of UTC. Empty or `Z` = 0.
fn parse_zone(z: &[u8]) -> Option<i64> {
    match z {
        b"" | b"Z" | b"z" => Some(0),
        _ => {
            let sign = match z.first()? {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let rest = z.get(1..)?;
            let (hh, mm) = match rest.len() {
                5 if rest.get(2) == Some(&b':') => (rest.get(0..2)?, rest.get(3..5)?),
                4 => (rest.get(0..2)?, rest.get(2..4)?),
                2 => (rest, &b"00"[..]),
                _ => return None,
            };
            let h = digits(hh)?;
            let m = digits(mm)?;
            if h > 23 || m > 59 {
                return None;
            }
            Some(sign * (i64::from(h) * 3600 + i64::from(m) * 60))
        }
    }
}

const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// Month abbreviation (`Nov`) → 1..=12.
pub fn month_from_abbr(s: &str) -> Option<u32> {
    let l = s.get(0..3)?.to_ascii_lowercase();
    MONTHS.iter().position(|m| *m == l).map(|i| i as u32 + 1)
}

/// `HH:MM:SS[.frac]` → (h, m, s, ns).
fn parse_hms(s: &str) -> Option<(u32, u32, u32, u32)> {
    let b = s.as_bytes();
    let h = digits(b.get(0..2)?)?;
    let m = digits(b.get(3..5)?)?;
    let sec = digits(b.get(6..8)?)?;
    if b.get(2) != Some(&b':') || b.get(5) != Some(&b':') || h > 23 || m > 59 || sec > 60 {
        return None;
    }
    let (ns, rest) = fraction(b.get(8..)?);
    if !rest.is_empty() {
        return None;
    }
    Some((h, m, sec, ns))
}

/// `kubectl describe` time: RFC 1123 with numeric zone, `Mon, 24 Nov 2025 21:21:09 +0000`.
pub fn parse_rfc1123(s: &str) -> Option<Nanos> {
    let mut it = s.split_whitespace();
    let mut first = it.next()?;
    if first.ends_with(',') {
        first = it.next()?;
    }
    let d: u32 = first.parse().ok()?;
    let mo = month_from_abbr(it.next()?)?;
    let y: i64 = it.next()?.parse().ok()?;
    let hms = parse_hms(it.next()?)?;
    let off = match it.next() {
        None | Some("UTC") | Some("GMT") => 0,
        Some(z) => parse_zone(z.as_bytes())?,
    };
    instant(y, mo, d, hms, off)
}

/// journald short-format prefix time `Nov 20 16:25:32` (no year, local time): returns
/// seconds-of-year parts for the caller to complete with a year and zone.
pub fn parse_syslog_stamp(
    month: &str,
    day: &str,
    hms: &str,
    year: i64,
    utc_offset_s: i64,
) -> Option<Nanos> {
    let mo = month_from_abbr(month)?;
    let d: u32 = day.parse().ok()?;
    let hms = parse_hms(hms)?;
    instant(year, mo, d, hms, utc_offset_s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_round_trip() {
        let ns = parse_rfc3339("2025-11-20T16:25:32.996810781Z").unwrap();
        assert_eq!(ns % NS_PER_S, 996_810_781);
        assert_eq!(format_rfc3339(ns), "2025-11-20T16:25:32.996810Z");
        // 1 s of precision digits short still parses
        let a = parse_rfc3339("2025-11-20T16:05:09.3596694Z").unwrap();
        assert_eq!(a % NS_PER_S, 359_669_400);
        let z = parse_rfc3339("2025-11-20T17:25:32.996810781+01:00").unwrap();
        assert_eq!(z, ns);
        assert!(parse_rfc3339("025-11-20T17:58:12.678281961Z").is_none());
        assert!(parse_rfc3339("2025-13-20T17:58:12Z").is_none());
        assert!(parse_rfc3339("2025-11-20T17:58:12+9").is_none());
    }

    #[test]
    fn rfc1123() {
        let a = parse_rfc1123("Mon, 24 Nov 2025 21:21:09 +0000").unwrap();
        let b = parse_rfc1123("Mon, 24 Nov 2025 21:24:12 +0000").unwrap();
        assert_eq!((b - a) / NS_PER_S, 183);
        let c = parse_rfc1123("Mon, 24 Nov 2025 22:24:12 +0100").unwrap();
        assert_eq!(c, b);
        assert_eq!(format_rfc3339(a), "2025-11-24T21:21:09.000000Z");
    }

    #[test]
    fn epoch_and_leap() {
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
        let ns = parse_rfc3339("2024-02-29T00:00:00Z").unwrap();
        assert_eq!(civil_from_nanos(ns).2, 29);
    }
}
