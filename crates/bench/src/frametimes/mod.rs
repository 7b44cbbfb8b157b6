//! Frame-time captures → per-application frame times (or samples) → average FPS and lows.
//!
//! Readers, one per family of formats (each cites where its format is defined):
//! - `table`: logs with a header line — PresentMon 1.x (`Dropped`, `TimeInSeconds`,
//!   `msBetweenPresents`), PresentMon 2.0–2.3 (`CPUStartTime`, `FrameTime` or
//!   `CPUBusy`+`CPUWait`, `DisplayedTime`), PresentMon 2.4+ (`TimeInSeconds`,
//!   `MsBetweenPresents`, `MsUntilDisplayed`, `MsBetweenAppStart`), OCAT, CapFrameX CSV,
//!   FrameView, MangoHud, any CSV with a known column, plain lists;
//! - `afterburner`: MSI Afterburner `.hml` logs;
//! - `capframex`: CapFrameX JSON captures.
//!
//! Every reader yields rows; `series` groups them by application + process id + swap chain
//! (what PresentMon, OCAT and CapFrameX report separately), decides whether the rows are
//! frames or samples, and counts dropped presents, present modes and tearing as PresentMon
//! defines them. [`select`] picks what to report: by default, per file (and per CapFrameX
//! run), the series with the most frames, the others listed.
//!
//! Definitions (see `docs/bench.md`):
//! - average FPS = 1000 · frames / Σ frame time (ms) — frames over wall time, not the mean of
//!   per-frame FPS;
//! - the p% low = 1000 / (the frame time at the (100 − p)th percentile), with the percentile
//!   interpolation chosen by [`PercentileMethod`] (linear by default);
//! - the "average of the slowest p%" variant = 1000 · k / Σ (the k slowest frame times),
//!   k = ⌈p/100 · frames⌉ (at least 1).
//!
//! For samples (rows that are not presents: one row per polling interval) the same arithmetic
//! is applied to the sampled frame times and the result is labelled approximate.

mod afterburner;
mod capframex;
mod cells;
mod series;
pub mod synth;
mod table;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{BenchError, Result};
use crate::stats::{percentile_sorted, PercentileMethod};

pub use cells::{MAX_FRAME_MS, MIN_FRAME_MS};
pub use series::SAMPLED_BELOW_COVERAGE;

/// Frame-time columns recognised without `--column`, in order of preference.
pub const KNOWN_COLUMNS: &[&str] = &[
    "MsBetweenPresents",
    "FrameTime",
    "frametime_ms",
    "frame_time_ms",
    "MsBetweenAppStart",
    "MsBetweenDisplayChange",
    "MsBetweenAppPresents",
];

/// The desktop compositor: PresentMon captures it whenever anything is composed, at the
/// display's refresh rate; it is the default only when nothing else presented.
pub const COMPOSITOR: &str = "dwm.exe";

/// The lows reported by default (percent).
pub const DEFAULT_LOWS: &[f64] = &[1.0, 2.0, 5.0];

/// What the rows of a series are.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RowKind {
    /// One row per present (or frame): the lows are exact.
    #[default]
    Frames,
    /// One row per polling interval, each holding the frame time seen at that moment: the
    /// lows are approximate.
    Samples,
}

impl RowKind {
    /// `frames` / `samples`.
    pub fn noun(self) -> &'static str {
        match self {
            RowKind::Frames => "frames",
            RowKind::Samples => "samples",
        }
    }
}

/// Which application, process, swap chain (and CapFrameX run) a series belongs to; all
/// `None` for logs that name none.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct AppKey {
    pub application: Option<String>,
    pub process_id: Option<u32>,
    pub swap_chain: Option<String>,
    /// 1-based run of a CapFrameX capture.
    pub run: Option<usize>,
}

fn hex(s: &str) -> Option<u64> {
    let h = s
        .trim()
        .strip_prefix("0x")
        .or_else(|| s.trim().strip_prefix("0X"))?;
    u64::from_str_radix(h, 16).ok()
}

impl AppKey {
    /// Whether the log named no application, process, swap chain or run.
    pub fn is_empty(&self) -> bool {
        self == &AppKey::default()
    }

    /// Whether the key names an application or process (what `--app` can match).
    pub fn has_app(&self) -> bool {
        self.application.is_some() || self.process_id.is_some()
    }

    /// `--app` matches the application name (case-insensitive, `.exe` optional), the process
    /// id, or the swap chain address.
    pub fn matches(&self, query: &str) -> bool {
        let q = query.trim();
        if q.is_empty() {
            return false;
        }
        let bare = |s: &str| {
            let l = s.to_ascii_lowercase();
            l.strip_suffix(".exe").map(str::to_string).unwrap_or(l)
        };
        let by_name = self
            .application
            .as_deref()
            .is_some_and(|a| bare(a) == bare(q));
        let by_pid = q.parse::<u32>().is_ok_and(|p| self.process_id == Some(p));
        let by_swap = match (hex(q), self.swap_chain.as_deref().and_then(hex)) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        };
        by_name || by_pid || by_swap
    }

    /// `PresentBench.exe (pid 24892, swap chain 0x2A70D2CAC00)`, `run 2`; empty for none.
    pub fn label(&self) -> String {
        let mut parts = Vec::new();
        if let Some(p) = self.process_id {
            parts.push(format!("pid {p}"));
        }
        if let Some(s) = &self.swap_chain {
            parts.push(format!("swap chain {s}"));
        }
        if let Some(r) = self.run {
            parts.push(format!("run {r}"));
        }
        match (&self.application, parts.is_empty()) {
            (Some(a), true) => a.clone(),
            (Some(a), false) => format!("{a} ({})", parts.join(", ")),
            (None, _) => parts.join(", "),
        }
    }
}

/// Presents that were not displayed, as the log's columns define it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Displayed {
    /// Presents not displayed.
    pub dropped: usize,
    /// Presents of the series (rows, with or without a frame time).
    pub presents: usize,
    /// Which column said so (`Dropped = 1`, `MsUntilDisplayed = NA`, ...).
    pub rule: String,
}

/// How many presents used one present mode.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModeCount {
    pub mode: String,
    pub presents: usize,
}

/// Where the samples of a sampled series came from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Sampling {
    /// The time column (`elapsed`, Afterburner's timestamps); `None` without one.
    pub time_column: Option<String>,
    /// Mean time between rows, ms (`span / (rows − 1)`); `None` without a time column.
    pub interval_ms: Option<f64>,
    /// The time the rows cover: span of the time column + one interval, seconds.
    pub duration_s: Option<f64>,
    /// Σ frame times / span of the time column: ~1 when every frame has a row.
    pub coverage: Option<f64>,
    /// Why the rows are samples.
    pub reason: String,
}

/// One series of a log: the frame times of one application / process / swap chain (or of the
/// whole log when it names none).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FrameLog {
    /// Where it came from (file name).
    pub source: String,
    /// `presentmon-1`, `presentmon-2`, `presentmon-2.4`, `ocat`, `capframex-csv`,
    /// `capframex-json`, `frameview`, `mangohud`, `afterburner`, `csv`, `plain`.
    pub format: String,
    /// The column read (`None` for a plain list).
    pub column: Option<String>,
    pub kind: RowKind,
    pub app: AppKey,
    /// Frame times (or sampled frame times) in milliseconds, in log order.
    pub frame_times_ms: Vec<f64>,
    /// Rows of the series (presents, or sampling rows), with or without a value.
    pub presents: usize,
    /// Rows without a value in the column (`NA`, `N/A`, empty, short rows, and `zero_rows`).
    pub skipped_rows: usize,
    /// Of `skipped_rows`, those holding 0 (samples, display columns).
    pub zero_rows: usize,
    pub displayed: Option<Displayed>,
    /// Present modes, most used first.
    pub present_modes: Vec<ModeCount>,
    /// Presents with `AllowsTearing = 1` (`None`: the log does not say).
    pub allows_tearing: Option<usize>,
    /// For samples: interval and duration from the time column.
    pub sampling: Option<Sampling>,
    pub notes: Vec<String>,
}

/// A parsed file: every series in it.
#[derive(Debug, Clone, PartialEq)]
pub struct Capture {
    pub path: PathBuf,
    pub source: String,
    pub format: String,
    pub column: Option<String>,
    pub series: Vec<FrameLog>,
}

/// How to read a log.
#[derive(Debug, Clone, Copy, Default)]
pub struct Options<'a> {
    /// Read this column (case-insensitive) instead of the format's frame-time column.
    pub column: Option<&'a str>,
    /// Take the rows as samples whatever the log looks like.
    pub as_samples: bool,
}

/// Parse a log of any supported format.
pub fn parse(text: &str, path: &Path, opts: &Options) -> Result<Capture> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    if let Some(what) = summary_of(path, text) {
        return Err(BenchError::format(
            path,
            format!("{what}, not a capture: read the log it summarises"),
        ));
    }
    let source = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| path.display().to_string());
    let capture = if text.trim_start().starts_with('{') {
        capframex::parse(text, path, &source, opts)?
    } else if afterburner::looks_like(text) {
        afterburner::parse(text, path, &source, opts)?
    } else {
        table::parse(text, path, &source, opts)?
    };
    if capture.series.iter().all(|s| s.frame_times_ms.is_empty()) {
        let rows: usize = capture.series.iter().map(|s| s.presents).sum();
        return Err(BenchError::format(
            path,
            format!(
                "no frame times in the log ({rows} rows, none with a value in {})",
                capture.column.as_deref().unwrap_or("it")
            ),
        ));
    }
    Ok(capture)
}

/// What a summary file is, when `text` (at `path`) is one: the tools write one beside each
/// log — MangoHud `NAME_summary.csv` (`0.1% Min FPS,1% Min FPS,...`, `src/logging.cpp`
/// `writeSummary`), FrameView `FrameView-EXE_Summary.csv`, OCAT `perf_summary.csv` — so a
/// glob over their folder picks them up. A file named so that holds a frame-time column is
/// not one.
pub fn summary_of(path: &Path, text: &str) -> Option<&'static str> {
    let header = text
        .trim_start_matches('\u{feff}')
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    if header.starts_with("0.1% Min FPS,") {
        return Some("a MangoHud summary");
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_ascii_lowercase())
        .unwrap_or_default();
    let has_column = |l: &str| {
        l.split([',', ';', '\t']).any(|c| {
            KNOWN_COLUMNS
                .iter()
                .any(|k| c.trim().trim_matches('"').eq_ignore_ascii_case(k))
        })
    };
    let columns = text.lines().take(64).any(has_column);
    (name.ends_with("summary.csv") && !columns)
        .then_some("a summary file (the name ends in summary.csv and it has no frame-time column)")
}

/// Text of a log file: UTF-8 (invalid bytes replaced: Afterburner writes its units in the
/// ANSI code page), or UTF-16 with a byte-order mark (what Windows PowerShell 5 writes for
/// `PresentMon --output_stdout > capture.csv`).
pub fn decode(bytes: &[u8]) -> String {
    let utf16 = |rest: &[u8], le: bool| -> String {
        let units = rest.chunks_exact(2).map(|c| match c {
            [a, b] if le => u16::from_le_bytes([*a, *b]),
            [a, b] => u16::from_be_bytes([*a, *b]),
            _ => 0xfffd,
        });
        char::decode_utf16(units)
            .map(|c| c.unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect()
    };
    match bytes {
        [0xff, 0xfe, rest @ ..] => utf16(rest, true),
        [0xfe, 0xff, rest @ ..] => utf16(rest, false),
        _ => String::from_utf8_lossy(bytes).into_owned(),
    }
}

/// Read and parse a log file.
pub fn load(path: &Path, opts: &Options) -> Result<Capture> {
    let bytes = std::fs::read(path).map_err(|e| BenchError::io(path, e))?;
    parse(&decode(&bytes), path, opts)
}

/// Which series to report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick<'a> {
    /// Per run, the series with the most frames (what CapFrameX and OCAT report), passing
    /// over the desktop compositor ([`COMPOSITOR`]) when anything else has frames.
    Busiest,
    /// The series of this application name, process id or swap chain (the busiest if several).
    App(&'a str),
    /// Every series.
    All,
}

/// A series not reported, for the list of what else the file holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeriesSummary {
    pub app: AppKey,
    /// Rows (presents) of the series.
    pub presents: usize,
    /// Of them, rows with a frame time.
    pub frames: usize,
}

impl SeriesSummary {
    fn of(s: &FrameLog) -> SeriesSummary {
        SeriesSummary {
            app: s.app.clone(),
            presents: s.presents,
            frames: s.frame_times_ms.len(),
        }
    }
}

/// What [`select`] picked.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// The series to report (one per run, or all).
    pub logs: Vec<FrameLog>,
    /// The others in the file, most presents first.
    pub others: Vec<SeriesSummary>,
}

fn busiest(v: &[&FrameLog]) -> Option<usize> {
    (0..v.len()).max_by(|&a, &b| {
        let key = |i: usize| v.get(i).map(|s| (s.frame_times_ms.len(), s.presents));
        key(a).cmp(&key(b)).then(b.cmp(&a))
    })
}

/// When other series have as many frames and presents as the busiest one (`refs[b]`), say
/// which were passed over and how to pick one of them.
fn tie_note(refs: &[&FrameLog], b: usize) -> Option<String> {
    let best = refs.get(b)?;
    let key = |s: &FrameLog| (s.frame_times_ms.len(), s.presents);
    let tied: Vec<String> = refs
        .iter()
        .enumerate()
        .filter(|&(i, s)| i != b && key(s) == key(best))
        .map(|(_, s)| s.app.label())
        .collect();
    if tied.is_empty() {
        return None;
    }
    Some(format!(
        "{} tie{} with it at {} frames ({} presents): the first in the file is reported; \
         --app NAME|PID|SWAPCHAIN picks another, --all-apps reports each",
        tied.join(", "),
        if tied.len() == 1 { "s" } else { "" },
        best.frame_times_ms.len(),
        best.presents
    ))
}

/// Pick the series to report from a capture.
pub fn select(capture: Capture, pick: Pick) -> Result<Selection> {
    let path = capture.path.clone();
    let describe = |series: &[FrameLog]| -> String {
        let mut v: Vec<&FrameLog> = series.iter().collect();
        v.sort_by_key(|s| std::cmp::Reverse(s.presents));
        v.iter()
            .map(|s| format!("{} {} presents", s.app.label(), s.presents))
            .collect::<Vec<_>>()
            .join("; ")
    };
    if let Pick::App(q) = pick {
        if !capture.series.iter().any(|s| s.app.has_app()) {
            return Err(BenchError::format(
                &path,
                format!(
                    "--app {q}: this {} log names no applications (only PresentMon, OCAT,                      CapFrameX and FrameView captures do)",
                    capture.format
                ),
            ));
        }
        if !capture.series.iter().any(|s| s.app.matches(q)) {
            return Err(BenchError::format(
                &path,
                format!(
                    "--app {q}: no such application, process id or swap chain; the capture                      holds {}",
                    describe(&capture.series)
                ),
            ));
        }
    }
    let mut runs: Vec<Option<usize>> = capture.series.iter().map(|s| s.app.run).collect();
    runs.dedup();
    runs.sort();
    runs.dedup();
    let mut chosen: Vec<usize> = Vec::new();
    let mut tie_notes: Vec<(usize, String)> = Vec::new();
    for run in runs {
        let idx: Vec<usize> = (0..capture.series.len())
            .filter(|&i| capture.series.get(i).is_some_and(|s| s.app.run == run))
            .collect();
        let candidates: Vec<usize> = match pick {
            Pick::All => {
                let mut all = idx;
                all.sort_by_key(|&i| {
                    std::cmp::Reverse(capture.series.get(i).map_or(0, |s| s.presents))
                });
                chosen.extend(all);
                continue;
            }
            Pick::Busiest => {
                let is_compositor = |i: &usize| {
                    capture.series.get(*i).is_some_and(|s| {
                        s.app
                            .application
                            .as_deref()
                            .is_some_and(|a| a.eq_ignore_ascii_case(COMPOSITOR))
                    })
                };
                let apps: Vec<usize> = idx
                    .iter()
                    .copied()
                    .filter(|i| !is_compositor(i))
                    .filter(|&i| {
                        capture
                            .series
                            .get(i)
                            .is_some_and(|s| !s.frame_times_ms.is_empty())
                    })
                    .collect();
                if apps.is_empty() {
                    idx
                } else {
                    apps
                }
            }
            Pick::App(q) => idx
                .into_iter()
                .filter(|&i| capture.series.get(i).is_some_and(|s| s.app.matches(q)))
                .collect(),
        };
        let refs: Vec<&FrameLog> = candidates
            .iter()
            .filter_map(|&i| capture.series.get(i))
            .collect();
        if let Some(bi) = busiest(&refs) {
            if let Some(&b) = candidates.get(bi) {
                chosen.push(b);
                if let Some(n) = tie_note(&refs, bi) {
                    tie_notes.push((b, n));
                }
            }
        }
    }
    let mut logs = Vec::new();
    let mut others = Vec::new();
    let mut series: Vec<Option<FrameLog>> = capture.series.into_iter().map(Some).collect();
    for &i in &chosen {
        if let Some(mut s) = series.get_mut(i).and_then(Option::take) {
            s.notes.extend(
                tie_notes
                    .iter()
                    .filter(|(j, _)| *j == i)
                    .map(|(_, n)| n.clone()),
            );
            if s.frame_times_ms.is_empty() && pick == Pick::All {
                // nothing to report of this one: listed with the others
                others.push(SeriesSummary::of(&s));
                continue;
            }
            if s.frame_times_ms.is_empty() {
                return Err(BenchError::format(
                    &path,
                    format!(
                        "{}: no frame times in column {} ({} rows without a value)",
                        if s.app.is_empty() {
                            "the log".to_string()
                        } else {
                            s.app.label()
                        },
                        s.column.as_deref().unwrap_or("-"),
                        s.skipped_rows
                    ),
                ));
            }
            logs.push(s);
        }
    }
    others.extend(series.iter().flatten().map(SeriesSummary::of));
    others.sort_by_key(|s| std::cmp::Reverse(s.presents));
    Ok(Selection { logs, others })
}

/// All frame times of several series, in order (splitting a capture and merging the parts
/// gives the same statistics as the rows of the whole capture).
pub fn merge(logs: &[FrameLog]) -> Vec<f64> {
    logs.iter()
        .flat_map(|l| l.frame_times_ms.iter().copied())
        .collect()
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
mod tests;
