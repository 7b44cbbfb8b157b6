//! CapFrameX captures (`CapFrameX-<process>.exe-<date>.json`): a session
//! `{"Hash", "Info": {"ProcessName", "GameName", ...}, "Runs": [{"CaptureData": {...}}]}`
//! where `CaptureData` holds one array per PresentMon column over the run's presents:
//! `TimeInSeconds`, `MsBetweenPresents`, `MsBetweenDisplayChange`, `MsUntilDisplayed`,
//! `Dropped` (booleans), `PresentMode` (CapFrameX's `EPresentMode` numbers),
//! `AllowsTearing` (0/1), ... (`source/CapFrameX.Data.Session/Classes/*.cs` in
//! CXWorld/CapFrameX). Json.NET writes it with a UTF-8 BOM and writes NaN as the string
//! `"NaN"`. Each run is one repeat of the capture.

use std::path::Path;

use serde_json::Value;

use super::cells::{self, Cell, Loc};
use super::series::{self, Meta, Row, RowsAre};
use super::{Capture, Options};
use crate::error::{BenchError, Result};

/// CapFrameX's `EPresentMode` values, as PresentMon names them.
const PRESENT_MODES: &[&str] = &[
    "Unknown",
    "Hardware: Legacy Flip",
    "Hardware: Legacy Copy to front buffer",
    "Hardware: Independent Flip",
    "Composed: Flip",
    "Composed: Copy with GPU GDI",
    "Composed: Copy with CPU GDI",
    "Composed: Composition Atlas",
    "Hardware Composed: Independent Flip",
    "Other",
];

/// Find a key case-insensitively.
fn get<'a>(v: &'a Value, key: &str) -> Option<&'a Value> {
    let o = v.as_object()?;
    o.get(key).or_else(|| {
        o.iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(_, x)| x)
    })
}

pub(super) fn parse(text: &str, path: &Path, source: &str, opts: &Options) -> Result<Capture> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| BenchError::format(path, format!("not JSON: {e}")))?;
    if v.get("schema").is_some() {
        return Err(BenchError::format(
            path,
            "this is a vmtune bench result, not a capture: read it with `vmtune bench compare` \
             or `vmtune bench report`",
        ));
    }
    let Some(runs) = get(&v, "Runs").and_then(Value::as_array) else {
        return Err(BenchError::format(
            path,
            "JSON without \"Runs\": not a CapFrameX capture",
        ));
    };
    let info = get(&v, "Info");
    let process = info
        .and_then(|i| get(i, "ProcessName"))
        .and_then(Value::as_str)
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().to_string());
    let column = opts.column.unwrap_or("MsBetweenPresents").to_string();
    let zero_is_missing = ["MsBetweenDisplayChange", "MsUntilDisplayed"]
        .iter()
        .any(|d| column.eq_ignore_ascii_case(d));
    let mut rows = Vec::new();
    for (r, run) in runs.iter().enumerate() {
        let run_no = r + 1;
        let data = get(run, "CaptureData")
            .ok_or_else(|| BenchError::format(path, format!("run {run_no} has no CaptureData")))?;
        let values = get(data, &column)
            .and_then(Value::as_array)
            .ok_or_else(|| {
                BenchError::format(
                    path,
                    format!("run {run_no}: no {column:?} array in CaptureData"),
                )
            })?;
        let array = |k: &str| get(data, k).and_then(Value::as_array);
        let (dropped, modes, tearing) = (
            array("Dropped"),
            array("PresentMode"),
            array("AllowsTearing"),
        );
        for (i, x) in values.iter().enumerate() {
            let at = Loc::Present {
                run: run_no,
                index: i + 1,
            };
            let cell = match x {
                Value::Number(n) => match n.as_f64() {
                    Some(f) => cells::ms_value(f, &n.to_string(), path, at, &column)?,
                    None => Cell::Missing,
                },
                Value::String(s) if s.eq_ignore_ascii_case("nan") => Cell::Missing,
                Value::String(s) => cells::ms_cell(s, path, at, &column)?,
                Value::Null => Cell::Missing,
                other => {
                    return Err(BenchError::format(
                        path,
                        format!("{at}: {column} value {other} is not a number"),
                    ))
                }
            };
            let mut row = Row::new(at, cell);
            row.key.application = process.clone();
            row.key.run = Some(run_no);
            row.dropped = dropped.and_then(|d| d.get(i)).and_then(Value::as_bool);
            row.mode = modes
                .and_then(|m| m.get(i))
                .and_then(Value::as_u64)
                .map(|m| {
                    PRESENT_MODES
                        .get(m as usize)
                        .map_or_else(|| format!("mode {m}"), |s| s.to_string())
                });
            row.tearing = tearing
                .and_then(|t| t.get(i))
                .and_then(Value::as_u64)
                .map(|t| t != 0);
            rows.push(row);
        }
    }
    let meta = Meta {
        path,
        source,
        format: "capframex-json",
        column: Some(column.clone()),
        rows: RowsAre::Presents,
        time_column: None,
        zero_is_missing,
        dropped_rule: Some("Dropped = true, CapFrameX".into()),
        as_samples: opts.as_samples,
    };
    Ok(Capture {
        path: path.to_path_buf(),
        source: source.to_string(),
        format: "capframex-json".into(),
        column: Some(column),
        series: series::build(rows, &meta)?,
    })
}
