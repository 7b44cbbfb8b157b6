//! Frame-time logs → average FPS and percentile lows.
//!
//! Formats read (the column is found by its header name, case-insensitively, in this order
//! unless `column` names one):
//! - PresentMon 1.x, OCAT, CapFrameX CSV exports: `MsBetweenPresents`
//! - PresentMon 2.0–2.2: `FrameTime`; PresentMon 2.3+: `MsBetweenPresents` again
//!   (`MsBetweenDisplayChange`, `MsBetweenAppStart` can be chosen with `column`)
//! - MangoHud logs (a system-info preamble, then `fps,frametime,...`): `frametime` (ms)
//! - a plain list of frame times in milliseconds, one per line, with an optional one-word
//!   header line.
//!
//! Definitions (see `docs/bench.md`):
//! - average FPS = 1000 · frames / Σ frame time (ms) — frames over wall time, not the mean of
//!   per-frame FPS;
//! - the p% low = 1000 / (the frame time at the (100 − p)th percentile), with the percentile
//!   interpolation chosen by [`PercentileMethod`] (linear by default);
//! - the "average of the slowest p%" variant = 1000 · k / Σ (the k slowest frame times),
//!   k = ⌈p/100 · frames⌉ (at least 1).

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::stats::{percentile_sorted, PercentileMethod};

/// Frame-time columns recognised without `--column`, in order of preference.
pub const KNOWN_COLUMNS: &[&str] = &[
    "MsBetweenPresents",
    "FrameTime",
    "frametime_ms",
    "frame_time_ms",
    "MsBetweenAppStart",
    "MsBetweenDisplayChange",
];

/// The lows reported by default (percent).
pub const DEFAULT_LOWS: &[f64] = &[1.0, 2.0, 5.0];

/// A parsed frame-time log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameLog {
    /// Where it came from (file name).
    pub source: String,
    /// What it looks like: `presentmon-1` (PresentMon 1.x, OCAT, CapFrameX), `presentmon-2`,
    /// `mangohud`, `csv` (some other CSV with a known column), `plain`.
    pub format: String,
    /// The column read (`None` for a plain list).
    pub column: Option<String>,
    /// Frame times in milliseconds, in log order.
    pub frame_times_ms: Vec<f64>,
    /// Rows without a value in the column (`NA`, empty, short rows).
    pub skipped_rows: usize,
}

/// Split one CSV line (RFC 4180 quoting: `"a,b"`, `""` inside quotes).
fn split_csv(line: &str, delim: char) -> Vec<String> {
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

fn is_missing(v: &str) -> bool {
    let v = v.trim();
    v.is_empty() || v.eq_ignore_ascii_case("na") || v.eq_ignore_ascii_case("n/a")
}

fn parse_ms(v: &str, path: &Path, lineno: usize, what: &str) -> Result<f64> {
    let t = v.trim();
    let x: f64 = t.parse().map_err(|_| {
        BenchError::format(
            path,
            format!("line {lineno}: {what} value {t:?} is not a number"),
        )
    })?;
    if !x.is_finite() || x < 0.0 {
        return Err(BenchError::format(
            path,
            format!("line {lineno}: {what} value {t:?} is not a finite non-negative time"),
        ));
    }
    Ok(x)
}

fn classify(header: &[String], column: &str) -> &'static str {
    let has = |n: &str| header.iter().any(|h| h.trim().eq_ignore_ascii_case(n));
    if has("CPUStartTime") || has("CPUStartQPC") || has("CPUStartQPCTime") {
        "presentmon-2"
    } else if has("TimeInSeconds") || (has("Application") && has("MsBetweenPresents")) {
        "presentmon-1"
    } else if column.eq_ignore_ascii_case("frametime") && has("fps") {
        "mangohud"
    } else {
        "csv"
    }
}

/// Parse a frame-time log. `column` forces a column by name (case-insensitive).
pub fn parse(text: &str, path: &Path, column: Option<&str>) -> Result<FrameLog> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let source = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let lines: Vec<(usize, &str)> = text
        .lines()
        .enumerate()
        .map(|(i, l)| (i + 1, l.trim()))
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#') && !l.starts_with("//"))
        .collect();
    if lines.is_empty() {
        return Err(BenchError::format(path, "empty frame-time log"));
    }

    // Look for a header line holding a frame-time column in the first lines (MangoHud puts
    // a system-info block first).
    let wanted: Vec<&str> = match column {
        Some(c) => vec![c],
        None => {
            let mut v = KNOWN_COLUMNS.to_vec();
            v.push("frametime");
            v
        }
    };
    let mut header: Option<(usize, char, usize, Vec<String>, String)> = None;
    'search: for (pos, (_, line)) in lines.iter().enumerate().take(64) {
        for delim in [',', ';', '\t'] {
            if !line.contains(delim) && delim != ',' {
                continue;
            }
            let fields = split_csv(line, delim);
            for w in &wanted {
                if let Some(idx) = fields.iter().position(|f| f.trim().eq_ignore_ascii_case(w)) {
                    let name = fields
                        .get(idx)
                        .map(|f| f.trim().to_string())
                        .unwrap_or_default();
                    header = Some((pos, delim, idx, fields, name));
                    break 'search;
                }
            }
        }
    }

    let mut frame_times = Vec::new();
    let mut skipped = 0usize;
    let (format, col_name) = match header {
        Some((pos, delim, idx, fields, name)) => {
            for (lineno, line) in lines.iter().skip(pos + 1) {
                let row = split_csv(line, delim);
                match row.get(idx) {
                    Some(v) if !is_missing(v) => {
                        frame_times.push(parse_ms(v, path, *lineno, &name)?)
                    }
                    _ => skipped += 1,
                }
            }
            (classify(&fields, &name).to_string(), Some(name))
        }
        None => {
            if let Some(c) = column {
                return Err(BenchError::format(
                    path,
                    format!("no column named {c:?} in the first 64 lines"),
                ));
            }
            // A plain list: one number per line, optionally a one-field header first.
            let mut it = lines.iter().peekable();
            if let Some((_, first)) = it.peek() {
                let single = split_csv(first, ',').len() == 1;
                if single && first.trim().trim_matches('"').parse::<f64>().is_err() {
                    it.next();
                }
            }
            for (lineno, line) in it {
                let fields = split_csv(line, ',');
                if fields.len() != 1 {
                    return Err(BenchError::format(
                        path,
                        format!(
                            "line {lineno}: no frame-time column found (looked for {}, \
                             frametime); name one with --column",
                            KNOWN_COLUMNS.join(", ")
                        ),
                    ));
                }
                let v = fields.first().map(String::as_str).unwrap_or("");
                if is_missing(v) {
                    skipped += 1;
                } else {
                    frame_times.push(parse_ms(v.trim_matches('"'), path, *lineno, "frame time")?);
                }
            }
            ("plain".to_string(), None)
        }
    };
    if frame_times.is_empty() {
        return Err(BenchError::format(path, "no frame times in the log"));
    }
    Ok(FrameLog {
        source,
        format,
        column: col_name,
        frame_times_ms: frame_times,
        skipped_rows: skipped,
    })
}

/// Read and parse a log file.
pub fn load(path: &Path, column: Option<&str>) -> Result<FrameLog> {
    let bytes = std::fs::read(path).map_err(|e| BenchError::io(path, e))?;
    let text = String::from_utf8_lossy(&bytes);
    parse(&text, path, column)
}

/// One percentile low.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Low {
    /// p in "p% low".
    pub percent: f64,
    /// Frame time at the (100 − p)th percentile, ms.
    pub frametime_ms: f64,
    /// 1000 / `frametime_ms`: the p% low in FPS.
    pub fps: f64,
    /// Mean of the slowest ⌈p% · frames⌉ frame times, ms.
    pub avg_slowest_ms: f64,
    /// 1000 / `avg_slowest_ms`: "average of the slowest p%" FPS.
    pub avg_slowest_fps: f64,
}

/// Frame-time statistics of one log.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameStats {
    pub frames: usize,
    /// Σ frame times, seconds.
    pub duration_s: f64,
    /// 1000 · frames / Σ ms.
    pub avg_fps: f64,
    pub mean_ms: f64,
    pub median_ms: f64,
    pub min_ms: f64,
    pub max_ms: f64,
    pub method: PercentileMethod,
    pub lows: Vec<Low>,
}

fn fps(ms: f64) -> f64 {
    if ms > 0.0 {
        1000.0 / ms
    } else {
        f64::INFINITY
    }
}

/// Compute the statistics; `None` for an empty input.
pub fn stats(frame_times_ms: &[f64], lows: &[f64], method: PercentileMethod) -> Option<FrameStats> {
    let mut sorted: Vec<f64> = frame_times_ms
        .iter()
        .copied()
        .filter(|x| x.is_finite() && *x >= 0.0)
        .collect();
    if sorted.is_empty() {
        return None;
    }
    sorted.sort_by(f64::total_cmp);
    let n = sorted.len();
    let total: f64 = sorted.iter().sum();
    let lows = lows
        .iter()
        .filter(|p| (0.0..=100.0).contains(*p) && **p > 0.0)
        .filter_map(|&p| {
            let ft = percentile_sorted(&sorted, 100.0 - p, method)?;
            let k = ((p / 100.0) * n as f64).ceil().max(1.0) as usize;
            let slowest = sorted.get(n.saturating_sub(k)..)?;
            let avg = slowest.iter().sum::<f64>() / slowest.len() as f64;
            Some(Low {
                percent: p,
                frametime_ms: ft,
                fps: fps(ft),
                avg_slowest_ms: avg,
                avg_slowest_fps: fps(avg),
            })
        })
        .collect();
    Some(FrameStats {
        frames: n,
        duration_s: total / 1000.0,
        avg_fps: if total > 0.0 {
            1000.0 * n as f64 / total
        } else {
            f64::INFINITY
        },
        mean_ms: total / n as f64,
        median_ms: percentile_sorted(&sorted, 50.0, method)?,
        min_ms: *sorted.first()?,
        max_ms: *sorted.last()?,
        method,
        lows,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p() -> &'static Path {
        Path::new("log.csv")
    }

    #[test]
    fn hand_computed_small_example() {
        // 10 frames: 8 × 10 ms, 20 ms, 40 ms. Σ = 140 ms → avg FPS = 10 000 / 140 = 71.428…
        let ft = [10.0, 10.0, 40.0, 10.0, 10.0, 20.0, 10.0, 10.0, 10.0, 10.0];
        let s = stats(&ft, DEFAULT_LOWS, PercentileMethod::Linear).unwrap();
        assert_eq!(s.frames, 10);
        assert!((s.avg_fps - 1000.0 * 10.0 / 140.0).abs() < 1e-9);
        // sorted: 10×8, 20, 40. Linear P99: h = 9·0.99 = 8.91 → 20 + 0.91·20 = 38.2 ms
        let l1 = &s.lows[0];
        assert!((l1.frametime_ms - 38.2).abs() < 1e-9, "{}", l1.frametime_ms);
        assert!((l1.fps - 1000.0 / 38.2).abs() < 1e-9);
        // P98: h = 8.82 → 20 + 0.82·20 = 36.4; P95: h = 8.55 → 20 + 0.55·20 = 31.0
        assert!((s.lows[1].frametime_ms - 36.4).abs() < 1e-9);
        assert!((s.lows[2].frametime_ms - 31.0).abs() < 1e-9);
        // slowest 1%, 2%, 5% of 10 frames = the one slowest (k = ⌈0.1⌉ = 1): 40 ms → 25 FPS
        assert!((l1.avg_slowest_fps - 25.0).abs() < 1e-9);
        assert!((s.lows[2].avg_slowest_ms - 40.0).abs() < 1e-9);

        // Nearest rank: rank ⌈0.99·10⌉ = 10 → 40 ms; ⌈0.95·10⌉ = 10 → 40 ms
        let s = stats(&ft, &[1.0, 5.0, 20.0], PercentileMethod::NearestRank).unwrap();
        assert_eq!(s.lows[0].frametime_ms, 40.0);
        assert_eq!(s.lows[1].frametime_ms, 40.0);
        // P80: rank 8 → 10 ms; avg slowest 20% = (20 + 40)/2 = 30 ms
        assert_eq!(s.lows[2].frametime_ms, 10.0);
        assert!((s.lows[2].avg_slowest_ms - 30.0).abs() < 1e-9);
    }

    #[test]
    fn presentmon1_csv() {
        let text = "Application,ProcessID,SwapChainAddress,Runtime,SyncInterval,PresentFlags,AllowsTearing,PresentMode,WasBatched,DwmNotified,Dropped,TimeInSeconds,MsBetweenPresents,MsBetweenDisplayChange,MsInPresentAPI,MsUntilRenderComplete,MsUntilDisplayed\n\
SOTTR.exe,4242,0x000001D2,DXGI,0,0,1,Hardware: Independent Flip,0,0,0,0.0166,16.6,16.7,0.2,3.1,5.0\n\
SOTTR.exe,4242,0x000001D2,DXGI,0,0,1,Hardware: Independent Flip,0,0,0,0.0333,16.7,16.6,0.2,3.1,5.0\n\
SOTTR.exe,4242,0x000001D2,DXGI,0,0,1,Hardware: Independent Flip,0,0,1,0.0500,16.7,NA,0.2,3.1,NA\n";
        let log = parse(text, p(), None).unwrap();
        assert_eq!(log.format, "presentmon-1");
        assert_eq!(log.column.as_deref(), Some("MsBetweenPresents"));
        assert_eq!(log.frame_times_ms, vec![16.6, 16.7, 16.7]);
        // the display column, with its NA
        let log = parse(text, p(), Some("msbetweendisplaychange")).unwrap();
        assert_eq!(log.frame_times_ms, vec![16.7, 16.6]);
        assert_eq!(log.skipped_rows, 1);
    }

    #[test]
    fn presentmon2_and_quotes() {
        let text = "Application,ProcessID,SwapChainAddress,PresentRuntime,SyncInterval,PresentFlags,AllowsTearing,PresentMode,CPUStartTime,FrameTime,CPUBusy\r\n\
\"My, Game.exe\",1,0x1,DXGI,0,0,0,\"Composed: Flip\",0.1,8.5,4.0\r\n\
\"My, Game.exe\",1,0x1,DXGI,0,0,0,\"Composed: Flip\",0.2,9.5,4.0\r\n";
        let log = parse(text, p(), None).unwrap();
        assert_eq!(log.format, "presentmon-2");
        assert_eq!(log.frame_times_ms, vec![8.5, 9.5]);
    }

    #[test]
    fn mangohud_log() {
        let text = "os,cpu,gpu,ram,kernel,driver,cpuscheduler\n\
Debian,AMD Ryzen 7,NVIDIA GeForce RTX 3080,32G,6.1.0,NVIDIA 535,performance\n\
--------------------FRAME METRICS--------------------\n\
fps,frametime,cpu_load,gpu_load,cpu_temp,gpu_temp\n\
60.1,16.64,20,90,55,70\n\
59.8,16.72,21,91,55,70\n";
        let log = parse(text, p(), None).unwrap();
        assert_eq!(log.format, "mangohud");
        assert_eq!(log.frame_times_ms, vec![16.64, 16.72]);
    }

    #[test]
    fn plain_list() {
        let log = parse("frametime_ms_plain\n16.6\n\n# comment\n17.0\n", p(), None).unwrap();
        assert_eq!(log.format, "plain");
        assert_eq!(log.frame_times_ms, vec![16.6, 17.0]);
        let log = parse("\u{feff}16.6\n17\n", p(), None).unwrap();
        assert_eq!(log.frame_times_ms.len(), 2);
    }

    #[test]
    fn errors_name_file_and_line() {
        let e = parse("a,b\n1,2\n", p(), None).unwrap_err().to_string();
        assert!(
            e.starts_with("log.csv: line 1: no frame-time column"),
            "{e}"
        );
        let e = parse("16.6\nbanana\n", p(), None).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("banana"), "{e}");
        let e = parse("16.6\n-3\n", p(), None).unwrap_err().to_string();
        assert!(e.contains("non-negative"), "{e}");
        assert!(parse("", p(), None).is_err());
        assert!(parse("MsBetweenPresents\nNA\n", p(), None).is_err());
        let e = parse("x,y\n1,2\n", p(), Some("FrameTime"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("no column named"), "{e}");
    }

    /// A generated 10,000-frame log with a known distribution: 9,800 frames of 10 ms,
    /// 150 of 20 ms, 50 of 50 ms (shuffled deterministically).
    #[test]
    fn generated_10000_frames() {
        let mut ft = Vec::with_capacity(10_000);
        ft.extend(std::iter::repeat_n(10.0, 9_800));
        ft.extend(std::iter::repeat_n(20.0, 150));
        ft.extend(std::iter::repeat_n(50.0, 50));
        // deterministic shuffle (LCG Fisher–Yates) so order does not matter
        let mut state: u64 = 0x2545_f491_4f6c_dd1d;
        for i in (1..ft.len()).rev() {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let j = (state >> 33) as usize % (i + 1);
            ft.swap(i, j);
        }
        let mut csv = String::from("Application,TimeInSeconds,MsBetweenPresents\n");
        let mut t = 0.0;
        for x in &ft {
            t += x / 1000.0;
            csv.push_str(&format!("game.exe,{t:.4},{x}\n"));
        }
        let log = parse(&csv, p(), None).unwrap();
        assert_eq!(log.frame_times_ms.len(), 10_000);
        let s = stats(&log.frame_times_ms, DEFAULT_LOWS, PercentileMethod::Linear).unwrap();
        // Σ = 98 000 + 3 000 + 2 500 = 103 500 ms → 10 000 / 103.5 s = 96.618… FPS
        assert!((s.avg_fps - 10_000.0 / 103.5).abs() < 1e-9);
        assert!((s.duration_s - 103.5).abs() < 1e-9);
        // sorted index 9 800..9 949 = 20 ms, 9 950.. = 50 ms.
        // P99: h = 9 999·0.99 = 9 899.01 → 20 ms → 1% low = 50 FPS
        assert!((s.lows[0].fps - 50.0).abs() < 1e-9);
        // P98: h = 9 799.02 → between idx 9 799 (10) and 9 800 (20): 10 + 0.02·10 = 10.2 ms
        assert!(
            (s.lows[1].frametime_ms - 10.2).abs() < 1e-6,
            "{}",
            s.lows[1].frametime_ms
        );
        // P95: h = 9 499.05 → 10 ms → 100 FPS
        assert!((s.lows[2].fps - 100.0).abs() < 1e-9);
        // slowest 1% = 100 frames: 50 × 50 + 50 × 20 = 3 500 ms → 35 ms → 28.571… FPS
        assert!((s.lows[0].avg_slowest_ms - 35.0).abs() < 1e-9);
        // slowest 2% = 200 frames = exactly the 50 + 150 slow ones: 5 500 ms → 27.5 ms
        assert!((s.lows[1].avg_slowest_ms - 27.5).abs() < 1e-9);
        // slowest 5% = 500 frames: 2 500 + 3 000 + 300·10 = 8 500 → 17 ms
        assert!((s.lows[2].avg_slowest_ms - 17.0).abs() < 1e-9);
        assert_eq!(s.max_ms, 50.0);
        assert_eq!(s.median_ms, 10.0);
        // nearest rank: P98 rank ⌈9 800⌉ = 9 800 → idx 9 799 → 10 ms
        let s = stats(&ft, DEFAULT_LOWS, PercentileMethod::NearestRank).unwrap();
        assert_eq!(s.lows[1].frametime_ms, 10.0);
        assert_eq!(s.lows[0].frametime_ms, 20.0);
    }

    proptest::proptest! {
        #[test]
        fn parse_never_panics(s in "\\PC{0,400}") {
            let _ = parse(&s, p(), None);
            let _ = parse(&s, p(), Some("x"));
        }

        #[test]
        fn lows_are_ordered(v in proptest::collection::vec(0.1f64..200.0, 1..500)) {
            let s = stats(&v, DEFAULT_LOWS, PercentileMethod::Linear).unwrap();
            // 1% low ≤ 2% low ≤ 5% low ≤ the median's FPS; avg-of-slowest ≤ the percentile low
            proptest::prop_assert!(s.lows[0].fps <= s.lows[1].fps + 1e-9);
            proptest::prop_assert!(s.lows[1].fps <= s.lows[2].fps + 1e-9);
            for l in &s.lows {
                proptest::prop_assert!(l.avg_slowest_fps <= l.fps + 1e-9);
            }
        }
    }
}
