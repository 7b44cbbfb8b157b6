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

/// What the first `n` digits of a fraction of a second are multiplied by to be nanoseconds.
const FRACTION_SCALE: [u32; 10] = [
    1_000_000_000,
    100_000_000,
    10_000_000,
    1_000_000,
    100_000,
    10_000,
    1_000,
    100,
    10,
    1,
];

/// Fractional seconds after a `.`: up to 9 digits, returned as nanoseconds, plus the rest.
fn fraction(s: &[u8]) -> (u32, &[u8]) {
    let Some(rest) = s.strip_prefix(b".") else {
        return (0, s);
    };
    let n = rest.iter().take_while(|c| c.is_ascii_digit()).count();
    let (frac, tail) = rest.split_at(n);
    // the first nine digits, as nanoseconds (fewer are padded with zeros)
    let ns = frac
        .iter()
        .take(9)
        .fold(0u32, |v, c| v * 10 + u32::from(c - b'0'));
    (ns * FRACTION_SCALE[n.min(9)], tail)
}

/// Parse RFC 3339 / ISO 8601 (`2025-11-20T16:25:32.996810781Z`, `...+01:00`, `+0100`, or a
/// space instead of `T`). A missing zone is taken as UTC.
pub fn parse_rfc3339(s: &str) -> Option<Nanos> {
    parse_rfc3339_zoned(s).map(|(ns, _)| ns)
}

/// Parse RFC 3339 like [`parse_rfc3339`], also returning the zone it was written in
/// (seconds east of UTC; `None` when the text names no zone).
pub fn parse_rfc3339_zoned(s: &str) -> Option<(Nanos, Option<i64>)> {
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
    let t = instant(y, mo, d, (h, mi, sec, ns), off)?;
    Some((t, (!rest.is_empty()).then_some(off)))
}

/// [`parse_rfc3339_zoned`] of `s`, knowing that `prev` reads as `prev_value`: when the
/// two texts differ only in the digits of their fractional seconds (a log's consecutive
/// stamps), the instant is `prev_value`'s with its fraction replaced, read as
/// `fraction` reads it, and nothing else is read again. `None` when that does not hold
/// (read `s` in full then). Checked against the full reading by a property test.
pub fn rfc3339_next(
    prev: &[u8],
    prev_value: (Nanos, Option<i64>),
    s: &[u8],
) -> Option<(Nanos, Option<i64>)> {
    // the same text through the `.` (`parse_rfc3339_zoned` trims: the positions hold only
    // for text that starts with the year's digits and ends in no space)
    let head = prev.get(..20)?;
    if prev.len() != s.len()
        || head != s.get(..20)?
        || !head.first().is_some_and(u8::is_ascii_digit)
        || head.last() != Some(&b'.')
        || !prev
            .last()
            .is_some_and(|c| c.is_ascii() && !c.is_ascii_whitespace())
    {
        return None;
    }
    // the fraction's digits where `prev` has its own, read as `fraction` reads them
    let mut i = 20;
    let (mut ns, mut read) = (0u32, 0usize);
    while let (Some(&a), Some(&b)) = (prev.get(i), s.get(i)) {
        if !a.is_ascii_digit() {
            break;
        }
        if !b.is_ascii_digit() {
            return None;
        }
        if read < 9 {
            ns = ns * 10 + u32::from(b - b'0');
            read += 1;
        }
        i += 1;
    }
    // and the same zone after them
    if prev.get(i..) != s.get(i..) {
        return None;
    }
    // the instant is whole seconds in ns plus the fraction (under 1 s): its remainder
    let was = prev_value.0.rem_euclid(NS_PER_S);
    let now = i64::from(ns * *FRACTION_SCALE.get(read)?);
    let t = prev_value.0.checked_sub(was)?.checked_add(now)?;
    Some((t, prev_value.1))
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
    let l = s.get(0..3)?;
    MONTHS
        .iter()
        .position(|m| m.eq_ignore_ascii_case(l))
        .map(|i| i as u32 + 1)
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

/// A UTC offset as a user writes it for `--tz`: `UTC`, `Z`, `+08:00`, `-0400`, `+8`,
/// `UTC+8`, `GMT-04:00`. Returns seconds east of UTC; `None` if it is not one.
pub fn parse_utc_offset(s: &str) -> Option<i64> {
    let t = s.trim();
    if t.is_empty() {
        return None;
    }
    let upper = t.replace('\u{2212}', "-").to_ascii_uppercase();
    let rest = upper
        .strip_prefix("UTC")
        .or_else(|| upper.strip_prefix("GMT"))
        .unwrap_or(&upper);
    if rest.is_empty() || rest == "Z" {
        return Some(0);
    }
    let (sign, digits_part) = match rest.as_bytes().first()? {
        b'+' => (1, rest.get(1..)?),
        b'-' => (-1, rest.get(1..)?),
        _ => return None,
    };
    let (h, m) = match digits_part.split_once(':') {
        Some((h, m)) => (h, m),
        None if digits_part.len() == 4 => (digits_part.get(..2)?, digits_part.get(2..)?),
        None => (digits_part, "0"),
    };
    let (h, m): (i64, i64) = (h.parse().ok()?, m.parse().ok()?);
    if !(0..=14).contains(&h) || !(0..60).contains(&m) || h.to_string().len() > 2 {
        return None;
    }
    Some(sign * (h * 3600 + m * 60))
}

/// `+08:00`, `-04:00`, `+00:00` for an offset in seconds east of UTC.
pub fn format_offset(off_s: i64) -> String {
    let sign = if off_s < 0 { '-' } else { '+' };
    let a = off_s.unsigned_abs();
    format!("{sign}{:02}:{:02}", a / 3600, a % 3600 / 60)
}

/// A month as journald's short format prints it in any locale we can read: English
/// names and abbreviations (`Nov`, `November`), CJK numerals with 月 or 월 (`1月`, `11월`),
/// or digits. Anything else is `None` (the caller then places the stamp by day alone).
pub fn month_from_token(s: &str) -> Option<u32> {
    let t = s.trim().trim_end_matches('.');
    if let Some(m) = month_from_abbr(t) {
        return Some(m);
    }
    let digits = t
        .strip_suffix('月')
        .or_else(|| t.strip_suffix('월'))
        .unwrap_or(t);
    let m: u32 = digits.trim().parse().ok()?;
    (1..=12).contains(&m).then_some(m)
}

fn days_in_month(y: i64, m: u32) -> u32 {
    match m {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        _ => 28,
    }
}

/// A journald short / short-precise prefix time (`Nov 20 16:25:32`, `1月 19 21:11:37`):
/// the host's local wall clock with no year, no zone, and in some locales a month we
/// cannot read. [`LocalStamp::resolve_near`] completes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalStamp {
    /// 1..=12, or `None` when the month token is in a locale we cannot read.
    pub month: Option<u8>,
    pub day: u8,
    /// Nanoseconds since local midnight.
    pub sod_ns: i64,
}

impl LocalStamp {
    /// From the prefix's month token, day and `HH:MM:SS[.frac]`.
    pub fn parse(month: &str, day: &str, hms: &str) -> Option<Self> {
        let d: u32 = day.parse().ok()?;
        if !(1..=31).contains(&d) {
            return None;
        }
        let (h, m, s, ns) = parse_hms(hms)?;
        Some(LocalStamp {
            month: month_from_token(month).map(|m| m as u8),
            day: d as u8,
            sod_ns: (i64::from(h) * 3600 + i64::from(m) * 60 + i64::from(s)) * NS_PER_S
                + i64::from(ns),
        })
    }

    /// The instant this stamp names at `utc_offset_s`, in the year (and, if the month is
    /// unreadable, the month) that puts it nearest to `reference`: a journal that crosses
    /// New Year, or one whose full timestamps are all from another line, resolves right.
    pub fn resolve_near(&self, reference: Nanos, utc_offset_s: i64) -> Option<Nanos> {
        let local_ref = reference.checked_add(utc_offset_s.checked_mul(NS_PER_S)?)?;
        let (ry, rm, ..) = civil_from_nanos(local_ref);
        let mut candidates: Vec<(i64, u32)> = Vec::with_capacity(3);
        match self.month {
            Some(m) => {
                for y in [ry - 1, ry, ry + 1] {
                    candidates.push((y, u32::from(m)));
                }
            }
            None => {
                for k in [-1i64, 0, 1] {
                    let idx = ry * 12 + i64::from(rm) - 1 + k;
                    candidates.push((idx.div_euclid(12), (idx.rem_euclid(12) + 1) as u32));
                }
            }
        }
        candidates
            .into_iter()
            .filter(|(y, m)| u32::from(self.day) <= days_in_month(*y, *m) && YEARS.contains(y))
            .map(|(y, m)| {
                days_from_civil(y, m, u32::from(self.day)) * 86_400 * NS_PER_S + self.sod_ns
                    - utc_offset_s * NS_PER_S
            })
            .min_by_key(|t| (i128::from(*t) - i128::from(reference)).abs())
    }

    /// The zone this stamp was printed in, if `utc` is the same moment (the line's own
    /// `time=`): local − UTC time of day, seconds east of UTC in (−12 h, +14 h], rounded
    /// to a quarter hour; `None` when the two are more than 2 minutes off any quarter.
    pub fn zone_against(&self, utc: Nanos) -> Option<i64> {
        let utc_sod = utc.rem_euclid(86_400 * NS_PER_S);
        let mut d = (self.sod_ns - utc_sod).div_euclid(NS_PER_S);
        d = d.rem_euclid(86_400);
        if d > 14 * 3600 {
            d -= 86_400;
        }
        let q = (d as f64 / 900.0).round() as i64 * 900;
        ((d - q).abs() <= 120).then_some(q)
    }
}

#[cfg(test)]
mod tests {

    use proptest::prelude::*;

    proptest! {
        /// The fraction is its first nine digits, padded with zeros, as nanoseconds.
        #[test]
        fn fraction_is_nine_digits_padded(digits in "[0-9]{0,14}", tail in "([Z+:][Z+0-9:]{0,5})?") {
            let text = format!(".{digits}{tail}");
            let want: u32 = format!("{:0<9}", &digits[..digits.len().min(9)]).parse().unwrap();
            let (ns, rest) = fraction(text.as_bytes());
            prop_assert_eq!(ns, want);
            let all = text.trim_start_matches('.').trim_start_matches(|c: char| c.is_ascii_digit());
            prop_assert_eq!(rest, all.as_bytes());
        }

        /// Reading a stamp from the one before it gives what reading it in full gives,
        /// and is taken whenever only the fraction's digits differ.
        #[test]
        fn rfc3339_next_reads_as_the_full_parse(
            secs in 0i64..4_000_000_000,
            digits in 0usize..12,
            a in prop::collection::vec(0u8..10, 12),
            b in prop::collection::vec(0u8..10, 12),
            zone in prop_oneof![Just(""), Just("Z"), Just("+08:00"), Just("-0400"), Just(" ")],
            edit in prop::option::of((0usize..40, any::<u8>())),
        ) {
            let (y, mo, d, h, mi, sec, _) = civil_from_nanos(secs * NS_PER_S);
            let text = |f: &[u8]| {
                let frac: String = f.iter().take(digits).map(|c| char::from(b'0' + c)).collect();
                format!("{y:04}-{mo:02}-{d:02}T{h:02}:{mi:02}:{sec:02}.{frac}{zone}")
            };
            let prev = text(&a);
            let mut next = text(&b).into_bytes();
            if let Some((at, c)) = edit {
                let n = next.len();
                next[at % n] = c;
            }
            let Some(pv) = parse_rfc3339_zoned(&prev) else { return Ok(()) };
            let full = std::str::from_utf8(&next).ok().and_then(parse_rfc3339_zoned);
            match rfc3339_next(prev.as_bytes(), pv, &next) {
                Some(v) => prop_assert_eq!(Some(v), full),
                None => prop_assert!(edit.is_some() || zone == " ", "not taken: {prev:?} {next:?}"),
            }
        }
    }
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

    #[test]
    fn zones_and_offsets() {
        let (ns, z) = parse_rfc3339_zoned("2025-02-17T13:44:29.659236575+08:00").unwrap();
        assert_eq!(z, Some(8 * 3600));
        assert_eq!(format_rfc3339(ns), "2025-02-17T05:44:29.659236Z");
        assert_eq!(
            parse_rfc3339_zoned("2025-02-17T05:44:29Z").unwrap().1,
            Some(0)
        );
        assert_eq!(parse_rfc3339_zoned("2025-02-17T05:44:29").unwrap().1, None);
        for (s, v) in [
            ("UTC", 0),
            ("Z", 0),
            ("+08:00", 8 * 3600),
            ("-0400", -4 * 3600),
            ("+1", 3600),
            ("UTC+5:30", 5 * 3600 + 1800),
            ("gmt-04:00", -4 * 3600),
            ("\u{2212}04:00", -4 * 3600),
        ] {
            assert_eq!(parse_utc_offset(s), Some(v), "{s}");
        }
        for s in ["Asia/Shanghai", "+25", "+08:61", "", "8"] {
            assert_eq!(parse_utc_offset(s), None, "{s}");
        }
        assert_eq!(format_offset(-4 * 3600), "-04:00");
        assert_eq!(format_offset(5 * 3600 + 1800), "+05:30");
    }

    #[test]
    fn local_stamps_in_any_locale() {
        assert_eq!(month_from_token("1月"), Some(1));
        assert_eq!(month_from_token("11월"), Some(11));
        assert_eq!(month_from_token("Nov"), Some(11));
        assert_eq!(month_from_token("ноя"), None);
        let reference = parse_rfc3339("2022-01-19T13:11:37.9Z").unwrap();
        let zh = LocalStamp::parse("1月", "19", "21:11:37").unwrap();
        let t = zh.resolve_near(reference, 8 * 3600).unwrap();
        assert_eq!(format_rfc3339(t), "2022-01-19T13:11:37.000000Z");
        // an unreadable month is placed by the day nearest the reference
        let ru = LocalStamp::parse("янв", "19", "21:11:37").unwrap();
        assert_eq!(ru.resolve_near(reference, 8 * 3600), Some(t));
        // across New Year: a Dec 31 line next to a Jan 1 timestamp is last year's
        let dec = LocalStamp::parse("Dec", "31", "23:59:59").unwrap();
        let jan = parse_rfc3339("2026-01-01T00:00:05Z").unwrap();
        assert_eq!(
            format_rfc3339(dec.resolve_near(jan, 0).unwrap()),
            "2025-12-31T23:59:59.000000Z"
        );
        assert_eq!(zh.zone_against(reference), Some(8 * 3600));
        let west = LocalStamp::parse("Aug", "11", "21:53:16").unwrap();
        let utc = parse_rfc3339("2025-08-12T01:53:16.078Z").unwrap();
        assert_eq!(west.zone_against(utc), Some(-4 * 3600));
        let odd = LocalStamp::parse("Aug", "11", "21:30:00").unwrap();
        assert_eq!(odd.zone_against(utc), None);
        assert!(LocalStamp::parse("Nov", "32", "10:00:00").is_none());
    }
}
