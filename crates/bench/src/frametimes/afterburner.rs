//! MSI Afterburner hardware monitoring logs (`.hml`): every line starts with a record type
//! and a timestamp — `00, 07-12-2024 23:49:46, Hardware monitoring log v1.6`, `01` the GPU,
//! `02` the column names, `03` one line per column (index, unit, min, max, ...), `80` one data
//! row per poll of the sensors (the "hardware polling period", 1000 ms by default). Values are
//! space-padded; `N/A` where a sensor has nothing (Framerate/Frametime with no 3D application
//! running), and RivaTuner reports 0 between frames it saw.
//!
//! Record types are also written with one digit (`0,` … `3,`). Logging that stops and resumes
//! writes a new header block (`00` …) mid-file: each such session becomes its own run, so the
//! pause is not counted as logged time nor spread over the polling interval.
//!
//! Rows are polls, never presents: they are read as samples, with the interval and duration
//! from the timestamps (1 s resolution).

use std::path::Path;

use super::cells::{self, split, Cell, Loc};
use super::series::{self, Meta, Row, RowsAre};
use super::{Capture, Options};
use crate::error::{BenchError, Result};

/// A line's record type: its first field, all digits (`00`, `0`, `02`, `2`, `80`).
fn record_type(line: &str) -> Option<u32> {
    let f = line.split(',').next()?.trim();
    if f.is_empty() || f.len() > 3 || !f.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    f.parse().ok()
}

/// Whether `text` is an Afterburner log: its first record is of type 0..=3 (written `00` or
/// `0`) and either names itself or carries a timestamp and is followed by an `80` record.
pub(super) fn looks_like(text: &str) -> bool {
    let mut lines = text.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("");
    if record_type(first).is_none_or(|t| t > 3) {
        return false;
    }
    first.contains("Hardware monitoring log")
        || (first
            .split(',')
            .nth(1)
            .is_some_and(|t| timestamp(t.trim()).is_some())
            && lines.take(4096).any(|l| record_type(l) == Some(80)))
}

/// `DD-MM-YYYY HH:MM:SS` (also `.`/`/` separators, `YYYY-MM-DD`, and `MM-DD-YYYY` where the
/// day cannot be a month) → seconds since 1970-01-01.
pub(super) fn timestamp(s: &str) -> Option<f64> {
    let mut it = s.split_whitespace();
    let (date, time) = (it.next()?, it.next()?);
    if it.next().is_some() {
        return None;
    }
    let d: Vec<&str> = date.split(['-', '.', '/']).collect();
    let num = |x: &&str| x.parse::<i64>().ok();
    let (a, b, c) = match d.as_slice() {
        [a, b, c] => (num(a)?, num(b)?, num(c)?),
        _ => return None,
    };
    let (y, m, day) = if d.first().is_some_and(|x| x.len() == 4) {
        (a, b, c)
    } else if b > 12 && a <= 12 {
        (c, a, b)
    } else {
        (c, b, a)
    };
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) || !(1..=9999).contains(&y) {
        return None;
    }
    let t: Vec<&str> = time.split(':').collect();
    let (hh, mm, ss) = match t.as_slice() {
        [h, m, s] => (
            h.parse::<u32>().ok()?,
            m.parse::<u32>().ok()?,
            s.parse::<f64>().ok()?,
        ),
        _ => return None,
    };
    if hh > 23 || mm > 59 || !(0.0..61.0).contains(&ss) {
        return None;
    }
    // days from civil (H. Hinnant's algorithm)
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days as f64 * 86_400.0 + f64::from(hh) * 3600.0 + f64::from(mm) * 60.0 + ss)
}

enum Value {
    Frametime(usize),
    Framerate(usize),
}

pub(super) fn parse(text: &str, path: &Path, source: &str, opts: &Options) -> Result<Capture> {
    let mut value: Option<(Value, String)> = None;
    let mut rows: Vec<Row> = Vec::new();
    // a header record after data starts a new logging session: (its line, the rows before it)
    let mut sessions: Vec<(usize, usize)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let lineno = i + 1;
        let at = Loc::Line(lineno);
        let f: Vec<String> = split(line, ',')
            .iter()
            .map(|x| x.trim().to_string())
            .collect();
        let kind = f.first().and_then(|x| record_type(x));
        if kind == Some(0) && sessions.last().map_or(0, |&(_, n)| n) < rows.len() {
            sessions.push((lineno, rows.len()));
        }
        match kind {
            Some(2) => {
                let names = f.get(2..).unwrap_or_default();
                let find = |n: &str| names.iter().position(|x| x.eq_ignore_ascii_case(n));
                value = match opts.column {
                    Some(c) => find(c).map(|i| (Value::Frametime(i), c.to_string())),
                    None => find("Frametime")
                        .map(|i| (Value::Frametime(i), "Frametime".to_string()))
                        .or_else(|| {
                            find("Framerate")
                                .map(|i| (Value::Framerate(i), "Framerate (as 1000/fps)".into()))
                        }),
                };
                if value.is_none() {
                    return Err(BenchError::format(
                        path,
                        match opts.column {
                            Some(c) => {
                                format!("{at}: no column named {c:?} in the Afterburner log")
                            }
                            None => format!(
                                "{at}: the Afterburner log has no Frametime or Framerate column \
                                 (enable them in Afterburner's Monitoring settings, with \
                                 RivaTuner Statistics Server running)"
                            ),
                        },
                    ));
                }
            }
            Some(80) => {
                let Some((v, name)) = &value else {
                    return Err(BenchError::format(
                        path,
                        format!("{at}: data record before the column names (the 02 record)"),
                    ));
                };
                let stamp = f.get(1).map(String::as_str).unwrap_or("");
                let t = timestamp(stamp).ok_or_else(|| {
                    BenchError::format(
                        path,
                        format!("{at}: timestamp {stamp:?} is not DD-MM-YYYY HH:MM:SS"),
                    )
                })?;
                let cell = match v {
                    Value::Frametime(i) => match f.get(2 + i) {
                        Some(x) => cells::ms_cell(x, path, at, name)?,
                        None => Cell::Missing,
                    },
                    Value::Framerate(i) => match f.get(2 + i) {
                        Some(x) => cells::fps_cell(x, path, at, name)?,
                        None => Cell::Missing,
                    },
                };
                let mut r = Row::new(at, cell);
                r.time_s = Some(t);
                rows.push(r);
            }
            // 00 (version), 01 (GPU), 03 (column units) and other records carry no samples
            _ => {}
        }
    }
    // several sessions: each its own run, so that no pause is counted as logged time and
    // the polling interval is each session's own
    let session_notes = number_sessions(&mut rows, &sessions);
    let column = value.map(|(_, n)| n);
    if column.is_none() {
        return Err(BenchError::format(
            path,
            "Afterburner log without column names (no 02 record)",
        ));
    }
    let meta = Meta {
        path,
        source,
        format: "afterburner",
        column: column.clone(),
        rows: RowsAre::Polled,
        time_column: Some("timestamps, 1 s resolution".into()),
        zero_is_missing: false,
        dropped_rule: None,
        as_samples: opts.as_samples,
    };
    let mut series = series::build(rows, &meta)?;
    for s in &mut series {
        s.notes.extend(session_notes.iter().cloned());
    }
    Ok(Capture {
        path: path.to_path_buf(),
        source: source.to_string(),
        format: "afterburner".into(),
        column,
        series,
    })
}

/// Give each row its session's run number where the log holds more than one session
/// (`sessions`: each later session's header line and the rows before it); the notes say where
/// each began and how long logging paused.
fn number_sessions(rows: &mut [Row], sessions: &[(usize, usize)]) -> Vec<String> {
    // the first header starts session 1; only headers after data start more
    let starts: Vec<(usize, usize)> = sessions.iter().copied().filter(|&(_, n)| n > 0).collect();
    if starts.is_empty() {
        return Vec::new();
    }
    let mut notes = Vec::new();
    for (k, &(line, first)) in starts.iter().enumerate() {
        let gap = rows
            .get(first)
            .and_then(|r| r.time_s)
            .zip(
                first
                    .checked_sub(1)
                    .and_then(|i| rows.get(i))
                    .and_then(|r| r.time_s),
            )
            .map(|(b, a)| b - a);
        notes.push(format!(
            "logging session {} starts at line {line}{}: each session is its own run",
            k + 2,
            gap.map_or(String::new(), |g| format!(" after a pause of {g:.0} s"))
        ));
    }
    let mut run = 1;
    let mut next = starts.iter().map(|&(_, n)| n).peekable();
    for (i, r) in rows.iter_mut().enumerate() {
        while next.peek().is_some_and(|&n| n <= i) {
            next.next();
            run += 1;
        }
        r.key.run = Some(run);
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps() {
        let t0 = timestamp("31-12-2024 23:59:59").unwrap();
        assert_eq!(timestamp("01-01-2025 00:00:01").unwrap() - t0, 2.0);
        assert_eq!(timestamp("2024-12-31 23:59:59").unwrap(), t0);
        assert_eq!(timestamp("31.12.2024 23:59:59").unwrap(), t0);
        assert_eq!(timestamp("12/31/2024 23:59:59").unwrap(), t0);
        // 1970-01-01 is day 0; 2000-03-01 is day 11017
        assert_eq!(timestamp("01-01-1970 00:00:00").unwrap(), 0.0);
        assert_eq!(
            timestamp("01-03-2000 00:00:00").unwrap(),
            11_017.0 * 86_400.0
        );
        for bad in [
            "",
            "31-12-2024",
            "32-01-2024 00:00:00",
            "01-13-2024 00:00:00 x",
            "a-b-c 1:2:3",
        ] {
            assert!(timestamp(bad).is_none(), "{bad}");
        }
    }
}
