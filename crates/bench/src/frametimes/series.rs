//! Rows → one series per application, process and swap chain; frames or samples; dropped
//! presents, present modes and tearing counted the way PresentMon defines them.

use std::collections::HashMap;
use std::path::Path;

use super::cells::{Cell, Loc};
use super::{AppKey, Displayed, FrameLog, ModeCount, RowKind, Sampling};
use crate::error::{BenchError, Result};

/// One row of a log, as a reader found it.
#[derive(Debug, Clone)]
pub(super) struct Row {
    pub at: Loc,
    pub key: AppKey,
    pub cell: Cell,
    /// The row's time in seconds, from the log's time column (only read where it decides
    /// frames vs samples).
    pub time_s: Option<f64>,
    /// Whether the present was not displayed (`None`: the log cannot say).
    pub dropped: Option<bool>,
    pub mode: Option<String>,
    pub tearing: Option<bool>,
}

impl Row {
    pub fn new(at: Loc, cell: Cell) -> Row {
        Row {
            at,
            key: AppKey::default(),
            cell,
            time_s: None,
            dropped: None,
            mode: None,
            tearing: None,
        }
    }
}

/// What a format says its rows are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum RowsAre {
    /// One row per present (PresentMon, OCAT, CapFrameX, FrameView).
    Presents,
    /// One row per poll of a monitor (MSI Afterburner): samples whatever the times say.
    Polled,
    /// Decide from the time column (MangoHud logs every frame or every `log_interval` ms).
    Detect,
    /// No time column to tell by: frames unless `--as-samples`.
    Unknown,
}

/// What the reader knows about the log as a whole.
pub(super) struct Meta<'a> {
    pub path: &'a Path,
    pub source: &'a str,
    pub format: &'static str,
    pub column: Option<String>,
    pub rows: RowsAre,
    /// The column the row times came from (for the report).
    pub time_column: Option<String>,
    /// A 0 in the column means "no value" (display columns: PresentMon 1.x writes 0 for a
    /// frame that was not displayed, or the first displayed one).
    pub zero_is_missing: bool,
    /// How dropped presents are read, when the log records them.
    pub dropped_rule: Option<String>,
    pub as_samples: bool,
}

/// Below this share of the time between rows covered by the rows' frame times, rows are
/// samples. In a log with a row per frame each frame time is the gap to the previous row
/// (~100%); a MangoHud log at `log_interval=100` with 60 FPS covers ~17%; sampling close to
/// the frame rate (≥ 90%) is as good as a row per frame.
pub const SAMPLED_BELOW_COVERAGE: f64 = 0.9;

/// Group rows by application + process + swap chain (+ run), first appearance first.
pub(super) fn build(rows: Vec<Row>, meta: &Meta) -> Result<Vec<FrameLog>> {
    let mut order: Vec<(AppKey, Vec<Row>)> = Vec::new();
    let mut index: HashMap<AppKey, usize> = HashMap::new();
    for r in rows {
        match index.get(&r.key) {
            Some(&i) => {
                if let Some((_, v)) = order.get_mut(i) {
                    v.push(r);
                }
            }
            None => {
                index.insert(r.key.clone(), order.len());
                order.push((r.key.clone(), vec![r]));
            }
        }
    }
    order
        .into_iter()
        .map(|(key, rows)| one(key, &rows, meta))
        .collect()
}

fn one(key: AppKey, rows: &[Row], meta: &Meta) -> Result<FrameLog> {
    let mut notes = Vec::new();
    let (kind, coverage) = kind_of(rows, meta, &mut notes);
    let mut frame_times = Vec::with_capacity(rows.len());
    let (mut skipped, mut zero_rows) = (0usize, 0usize);
    for r in rows {
        match r.cell {
            Cell::Ms(x) => frame_times.push(x),
            Cell::Missing => skipped += 1,
            Cell::Zero if kind == RowKind::Samples || meta.zero_is_missing => {
                skipped += 1;
                zero_rows += 1;
            }
            Cell::Zero => {
                return Err(BenchError::format(
                    meta.path,
                    format!(
                        "{}: {} is 0 ms: a frame cannot take no time (if the rows of this log \
                         are not frames, --as-samples reads them as samples)",
                        r.at,
                        meta.column.as_deref().unwrap_or("frame time")
                    ),
                ))
            }
        }
    }
    let sampling = (kind == RowKind::Samples).then(|| sampling(rows, meta, coverage));
    let displayed = rows.iter().any(|r| r.dropped.is_some()).then(|| Displayed {
        dropped: rows.iter().filter(|r| r.dropped == Some(true)).count(),
        presents: rows.len(),
        rule: meta.dropped_rule.clone().unwrap_or_default(),
    });
    let mut modes: Vec<ModeCount> = Vec::new();
    for m in rows.iter().filter_map(|r| r.mode.as_deref()) {
        match modes.iter_mut().find(|x| x.mode == m) {
            Some(x) => x.presents += 1,
            None => modes.push(ModeCount {
                mode: m.to_string(),
                presents: 1,
            }),
        }
    }
    modes.sort_by_key(|m| std::cmp::Reverse(m.presents));
    let allows_tearing = rows
        .iter()
        .any(|r| r.tearing.is_some())
        .then(|| rows.iter().filter(|r| r.tearing == Some(true)).count());
    Ok(FrameLog {
        source: meta.source.to_string(),
        format: meta.format.to_string(),
        column: meta.column.clone(),
        kind,
        app: key,
        frame_times_ms: frame_times,
        presents: rows.len(),
        skipped_rows: skipped,
        zero_rows,
        displayed,
        present_modes: modes,
        allows_tearing,
        sampling,
        notes,
    })
}

/// Σ frame times ÷ Σ time between rows, over consecutive rows that both have a value and a
/// time: ~1 for a log with a row per frame.
fn coverage(rows: &[Row]) -> Option<f64> {
    let (mut covered, mut elapsed, mut pairs) = (0.0, 0.0, 0usize);
    let mut prev: Option<f64> = None;
    for r in rows {
        match (r.cell, r.time_s) {
            (Cell::Ms(x), Some(t)) => {
                if let Some(p) = prev {
                    covered += x;
                    elapsed += (t - p) * 1000.0;
                    pairs += 1;
                }
                prev = Some(t);
            }
            _ => prev = None,
        }
    }
    let c = covered / elapsed;
    (pairs >= 2 && elapsed.is_finite() && elapsed > 0.0 && c.is_finite()).then_some(c)
}

fn kind_of(rows: &[Row], meta: &Meta, notes: &mut Vec<String>) -> (RowKind, Option<f64>) {
    let cov = coverage(rows);
    if meta.as_samples {
        return (RowKind::Samples, cov);
    }
    match meta.rows {
        RowsAre::Presents => (RowKind::Frames, cov),
        RowsAre::Polled => (RowKind::Samples, cov),
        RowsAre::Unknown => (RowKind::Frames, cov),
        RowsAre::Detect => match cov {
            Some(c) if c < SAMPLED_BELOW_COVERAGE => (RowKind::Samples, cov),
            Some(c) => {
                if c > 1.5 {
                    notes.push(format!(
                        "the frame times add up to {c:.1}× the time {} says passed: is its unit \
                         what the format says?",
                        meta.time_column.as_deref().unwrap_or("the time column")
                    ));
                }
                (RowKind::Frames, cov)
            }
            None => {
                notes.push(format!(
                    "too few timed rows in {} to tell frames from samples; read as frames \
                     (--as-samples if they are samples)",
                    meta.time_column.as_deref().unwrap_or("the time column")
                ));
                (RowKind::Frames, cov)
            }
        },
    }
}

/// Interval and duration of a sampled series from its time column (every row with a time
/// counts, valued or not: the log covered that time).
fn sampling(rows: &[Row], meta: &Meta, coverage: Option<f64>) -> Sampling {
    let times: Vec<f64> = rows.iter().filter_map(|r| r.time_s).collect();
    let (lo, hi) = times
        .iter()
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &t| {
            (a.min(t), b.max(t))
        });
    let span = hi - lo;
    let (interval_ms, duration_s) = if times.len() >= 2 && span > 0.0 && span.is_finite() {
        let interval = span / (times.len() - 1) as f64;
        (Some(interval * 1000.0), Some(span + interval))
    } else {
        (None, None)
    };
    let reason = if meta.as_samples {
        "--as-samples".to_string()
    } else {
        match meta.rows {
            RowsAre::Polled => "one row per poll of the sensors, every polling period".to_string(),
            _ => match (coverage, interval_ms) {
                (Some(c), Some(i)) => format!(
                    "rows are ~{i:.0} ms apart in {} and their frame times fill only {:.0}% of \
                     that time",
                    meta.time_column.as_deref().unwrap_or("the time column"),
                    c * 100.0
                ),
                _ => "one row per interval".to_string(),
            },
        }
    };
    Sampling {
        time_column: if times.is_empty() {
            None
        } else {
            meta.time_column.clone()
        },
        interval_ms,
        duration_s,
        coverage,
        reason,
    }
}
