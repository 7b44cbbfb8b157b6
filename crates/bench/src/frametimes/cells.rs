//! The pieces every reader shares: CSV splitting, where a value came from, and what one cell
//! of a frame-time column holds.

use std::fmt;
use std::path::Path;

use crate::error::{BenchError, Result};

/// The shortest frame time accepted (1 ns): below it `1000 / ms` overflows nothing, but no
/// display pipeline presents that fast; such a value is a unit mix-up.
pub const MIN_FRAME_MS: f64 = 1e-6;
/// The longest frame time accepted (10⁹ ms, 11.6 days): sums of many stay finite.
pub const MAX_FRAME_MS: f64 = 1e9;

/// Split one CSV line (RFC 4180 quoting: `"a,b"`, `""` inside quotes).
pub(super) fn split(line: &str, delim: char) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut in_q = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        if in_q {
            if c == '"' {
                if chars.peek() == Some(&'"') {
                    cur.push('"');
                    chars.next();
                } else {
                    in_q = false;
                }
            } else {
                cur.push(c);
            }
        } else if c == '"' {
            in_q = true;
        } else if c == delim {
            out.push(std::mem::take(&mut cur));
        } else {
            cur.push(c);
        }
    }
    out.push(cur);
    out
}

/// A cell that holds no value: empty, `NA` (PresentMon), `N/A` (Afterburner).
pub(super) fn is_missing(v: &str) -> bool {
    let v = v.trim();
    v.is_empty() || v.eq_ignore_ascii_case("na") || v.eq_ignore_ascii_case("n/a")
}

/// Where a value came from, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Loc {
    /// 1-based line of a text log.
    Line(usize),
    /// 1-based run and present of a CapFrameX JSON capture.
    Present { run: usize, index: usize },
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Loc::Line(n) => write!(f, "line {n}"),
            Loc::Present { run, index } => write!(f, "run {run}, present {index}"),
        }
    }
}

/// What one cell of the frame-time column holds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum Cell {
    /// A frame time in ms, within [`MIN_FRAME_MS`, `MAX_FRAME_MS`].
    Ms(f64),
    /// No value (`NA`, `N/A`, empty, a short row).
    Missing,
    /// Exactly 0 ms: "no value" in sampled logs and display columns, an error for frames.
    Zero,
}

/// Parse a number of `what` (a column name) at `at`.
pub(super) fn number(raw: &str, path: &Path, at: Loc, what: &str) -> Result<f64> {
    let t = raw.trim().trim_matches('"').trim();
    t.parse::<f64>()
        .map_err(|_| BenchError::format(path, format!("{at}: {what} value {t:?} is not a number")))
}

/// Read one frame-time cell in ms.
pub(super) fn ms_cell(raw: &str, path: &Path, at: Loc, what: &str) -> Result<Cell> {
    if is_missing(raw) {
        return Ok(Cell::Missing);
    }
    let x = number(raw, path, at, what)?;
    ms_value(x, raw, path, at, what)
}

/// Check a parsed frame time in ms.
pub(super) fn ms_value(x: f64, raw: &str, path: &Path, at: Loc, what: &str) -> Result<Cell> {
    let t = raw.trim();
    if !x.is_finite() || x < 0.0 {
        return Err(BenchError::format(
            path,
            format!("{at}: {what} value {t:?} is not a finite non-negative time"),
        ));
    }
    if x == 0.0 {
        return Ok(Cell::Zero);
    }
    if !(MIN_FRAME_MS..=MAX_FRAME_MS).contains(&x) {
        return Err(BenchError::format(
            path,
            format!("{at}: {what} value {t:?} ms is not a plausible frame time (1 ns to 10^9 ms)"),
        ));
    }
    Ok(Cell::Ms(x))
}

/// Read a frame rate cell (FPS) as a frame time `1000 / fps` in ms.
pub(super) fn fps_cell(raw: &str, path: &Path, at: Loc, what: &str) -> Result<Cell> {
    if is_missing(raw) {
        return Ok(Cell::Missing);
    }
    let fps = number(raw, path, at, what)?;
    if !fps.is_finite() || fps < 0.0 {
        return Err(BenchError::format(
            path,
            format!(
                "{at}: {what} value {:?} is not a finite non-negative rate",
                raw.trim()
            ),
        ));
    }
    if fps == 0.0 {
        return Ok(Cell::Zero);
    }
    ms_value(1000.0 / fps, raw, path, at, what)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_quotes_and_cells() {
        assert_eq!(split("a,\"b, c\",\"d\"\"e\"", ','), ["a", "b, c", "d\"e"]);
        assert_eq!(split("1;2", ';'), ["1", "2"]);
        let p = Path::new("x.csv");
        let at = Loc::Line(3);
        assert_eq!(ms_cell(" 16.6 ", p, at, "c").unwrap(), Cell::Ms(16.6));
        assert_eq!(ms_cell("NA", p, at, "c").unwrap(), Cell::Missing);
        assert_eq!(ms_cell(" N/A ", p, at, "c").unwrap(), Cell::Missing);
        assert_eq!(ms_cell("0.000", p, at, "c").unwrap(), Cell::Zero);
        assert_eq!(fps_cell("50", p, at, "c").unwrap(), Cell::Ms(20.0));
        assert_eq!(fps_cell("0", p, at, "c").unwrap(), Cell::Zero);
        let e = ms_cell("1e-300", p, at, "c").unwrap_err().to_string();
        assert!(e.contains("line 3") && e.contains("plausible"), "{e}");
        assert!(ms_cell("inf", p, at, "c").is_err());
        assert!(ms_cell("-1", p, at, "c").is_err());
        let at = Loc::Present { run: 2, index: 7 };
        let e = ms_cell("x", p, at, "MsBetweenPresents")
            .unwrap_err()
            .to_string();
        assert!(e.contains("run 2, present 7"), "{e}");
    }
}
