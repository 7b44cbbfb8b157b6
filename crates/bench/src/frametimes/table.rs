//! Logs with a header line: PresentMon (1.x, 2.0–2.3, 2.4+), OCAT, CapFrameX CSV, FrameView,
//! MangoHud, any CSV with a known frame-time column; and plain lists of frame times.
//!
//! Column names and their meaning are PresentMon's (`README-ConsoleApplication.md` and
//! `PresentMon/CsvOutput.cpp` of each release; `Tests/Gold/*.csv` hold all three header
//! families), OCAT's (`PresentMon/PresentMon/PresentMon.cpp` in GPUOpen-Tools/OCAT: the
//! 1.x columns plus `MsEstimatedDriverLag`, `Width`, `Height` and system columns filled on the
//! first row only), CapFrameX's (`//key=value` info lines, then PresentMon columns),
//! FrameView's (`Application,GPU,CPU,Resolution,Runtime,...,Dropped,TimeInSeconds,
//! MsBetweenPresents,...,Render Queue Depth,...,GPU0Clk(MHz),...`) and MangoHud's
//! (`src/logging.cpp`: a system-info block, then `fps,frametime,...,elapsed` with `elapsed`
//! in ns since the log started).

use std::path::Path;

use super::cells::{self, is_missing, split, Cell, Loc};
use super::series::{self, Meta, Row, RowsAre};
use super::{Capture, Options, KNOWN_COLUMNS};
use crate::error::{BenchError, Result};

/// Columns where 0 means "no value": PresentMon 1.x writes 0 in `msBetweenDisplayChange` and
/// `msUntilDisplayed` for a present that was not displayed (and for the first displayed one).
const DISPLAY_COLUMNS: &[&str] = &[
    "MsBetweenDisplayChange",
    "MsUntilDisplayed",
    "DisplayedTime",
    "DisplayLatency",
];

struct Header {
    fields: Vec<String>,
}

impl Header {
    fn idx(&self, name: &str) -> Option<usize> {
        self.fields
            .iter()
            .position(|f| f.eq_ignore_ascii_case(name))
    }
    fn has(&self, name: &str) -> bool {
        self.idx(name).is_some()
    }
    fn name(&self, i: usize) -> String {
        self.fields.get(i).cloned().unwrap_or_default()
    }
}

/// Where a row's frame time comes from.
enum Source {
    /// A column of frame times in ms.
    Col(usize),
    /// PresentMon 2.0 has no `FrameTime`: the frame is `CPUBusy + CPUWait` (CPU start of
    /// this frame to CPU start of the next).
    Sum(usize, usize),
    /// Only a frame rate (MangoHud before it logged `frametime`): `1000 / fps`.
    Fps(usize),
}

fn classify(h: &Header, capframex_info: bool, mangohud_preamble: bool) -> &'static str {
    let pm_start = [
        "CPUStartTime",
        "CPUStartQPC",
        "CPUStartQPCTime",
        "CPUStartDateTime",
    ]
    .iter()
    .any(|c| h.has(c));
    if h.has("GPU0Clk(MHz)") || h.has("Render Queue Depth") || h.has("CPUUtil(%)") {
        "frameview"
    } else if h.has("MsEstimatedDriverLag")
        || (h.has("Motherboard") && (h.has("MsBetweenPresents") || h.has("MsBetweenAppPresents")))
    {
        // OCAT: the DXGI capture (before `MsEstimatedDriverLag`, as OCAT 1.3 wrote it in
        // 2019, only its system columns, `Motherboard` ... `Comment`, tell it from
        // PresentMon's), or a VR one (WMR, SteamVR, Oculus: MsBetweenAppPresents)
        "ocat"
    } else if capframex_info && h.has("MsBetweenPresents") {
        "capframex-csv"
    } else if h.has("MsBetweenPresents") && h.has("Dropped") {
        "presentmon-1"
    } else if h.has("MsBetweenPresents")
        && (h.has("MsBetweenAppStart")
            || h.has("MsRenderPresentLatency")
            || h.has("MsBetweenSimulationStart"))
    {
        "presentmon-2.4"
    } else if pm_start && (h.has("FrameTime") || h.has("CPUBusy")) {
        "presentmon-2"
    } else if h.has("Application") && h.has("MsBetweenPresents") {
        "presentmon-1"
    } else if h.has("fps") && (h.has("elapsed") || (mangohud_preamble && h.has("frametime"))) {
        "mangohud"
    } else {
        "csv"
    }
}

fn is_header_for(fields: &[String], column: Option<&str>) -> bool {
    let has = |n: &str| fields.iter().any(|f| f.trim().eq_ignore_ascii_case(n));
    match column {
        Some(c) => has(c),
        None => {
            KNOWN_COLUMNS.iter().any(|k| has(k)) || has("CPUBusy") || (has("fps") && has("elapsed"))
        }
    }
}

/// The columns a row is read from, found in the header.
struct Columns {
    src: Source,
    /// The frame-time column's name, as the capture reports it.
    column: String,
    app: Option<usize>,
    pid: Option<usize>,
    swap: Option<usize>,
    /// A time column and its scale to seconds.
    time: Option<(usize, f64)>,
    dropped: Option<(usize, Drop, &'static str)>,
    mode: Option<usize>,
    tearing: Option<usize>,
}

pub(super) fn parse(text: &str, path: &Path, source: &str, opts: &Options) -> Result<Capture> {
    let (lines, capframex_info) = content_lines(text);
    if lines.is_empty() {
        return Err(BenchError::format(path, "empty frame-time log"));
    }
    let header = find_header(&lines, opts);
    // MangoHud before 0.5 named no columns: read its rows as the columns it wrote
    let unlabelled = header
        .is_none()
        .then(|| mangohud_unlabelled(&lines))
        .flatten();
    let header = header.or_else(|| {
        unlabelled
            .clone()
            .filter(|(_, _, f)| is_header_for(f, opts.column))
    });
    let Some((pos, delim, fields)) = header else {
        if let Some(c) = opts.column {
            return Err(BenchError::format(
                path,
                format!("no column named {c:?} in the first 64 lines"),
            ));
        }
        return plain(&lines, path, source, opts);
    };
    let h = Header {
        fields: fields.iter().map(|f| f.trim().to_string()).collect(),
    };
    let mangohud_preamble = lines
        .iter()
        .take(pos)
        .any(|(_, l)| l.contains("cpuscheduler") || l.starts_with("os,cpu,gpu"));
    let format = classify(&h, capframex_info, mangohud_preamble);
    let header_line = lines.get(pos).map_or(0, |(n, _)| *n);
    let (src, column) = frame_source(&h, opts, path, header_line)?;
    let zero_is_missing = DISPLAY_COLUMNS
        .iter()
        .any(|d| column.eq_ignore_ascii_case(d));

    // Times only where they decide frames vs samples; PresentMon-family rows are presents.
    let presents = !matches!(format, "mangohud" | "csv");
    let time = if presents { None } else { time_column(&h) };
    let rows_are = if presents {
        RowsAre::Presents
    } else if time.is_some() {
        RowsAre::Detect
    } else {
        RowsAre::Unknown
    };
    let cols = Columns {
        src,
        column,
        app: h.idx("Application"),
        pid: h.idx("ProcessID"),
        swap: h.idx("SwapChainAddress"),
        time,
        dropped: dropped_column(&h),
        mode: h.idx("PresentMode"),
        tearing: h.idx("AllowsTearing"),
    };

    let mut rows = Vec::with_capacity(lines.len().saturating_sub(pos + 1));
    for &(lineno, line) in lines.iter().skip(pos + 1) {
        let f = split(line, delim);
        // a log re-saved by a spreadsheet in a comma-decimal locale: `;` between cells and
        // `16,667` in them
        let f = if delim == ';' {
            f.into_iter().map(decimal_point).collect()
        } else {
            f
        };
        if let Some(r) = read_row(&f, &cols, &h, path, Loc::Line(lineno))? {
            rows.push(r);
        }
    }
    let Columns {
        column, dropped, ..
    } = cols;
    let meta = Meta {
        path,
        source,
        format,
        column: Some(column.clone()),
        rows: rows_are,
        time_column: time.map(|(i, _)| h.name(i)),
        zero_is_missing,
        dropped_rule: dropped.map(|(_, _, rule)| rule.to_string()),
        as_samples: opts.as_samples,
    };
    let mut series = series::build(rows, &meta)?;
    if unlabelled.is_some() {
        for s in &mut series {
            s.notes.push(
                "MangoHud before 0.5 wrote no column names: its rows read as fps, cpu_load, \
                 gpu_load, elapsed (µs), as src/logging.cpp wrote them"
                    .to_string(),
            );
        }
    }
    Ok(Capture {
        path: path.to_path_buf(),
        source: source.to_string(),
        format: format.to_string(),
        column: Some(column),
        series,
    })
}

/// The lines that carry data or a header, numbered from 1 (blank lines, `#` comments and
/// CapFrameX's `//` info lines left out), and whether CapFrameX `//key=value` lines came.
fn content_lines(text: &str) -> (Vec<(usize, &str)>, bool) {
    let mut capframex_info = false;
    let mut lines: Vec<(usize, &str)> = Vec::new();
    for (i, l) in text.lines().enumerate() {
        let l = l.trim();
        if let Some(rest) = l.strip_prefix("//") {
            capframex_info |= rest.contains('=');
            continue;
        }
        if !l.is_empty() && !l.starts_with('#') {
            lines.push((i + 1, l));
        }
    }
    (lines, capframex_info)
}

/// The header among the first 64 lines: its position, delimiter and fields.
fn find_header(lines: &[(usize, &str)], opts: &Options) -> Option<(usize, char, Vec<String>)> {
    for (pos, (_, line)) in lines.iter().enumerate().take(64) {
        for delim in [',', ';', '\t'] {
            if delim != ',' && !line.contains(delim) {
                continue;
            }
            let fields = split(line, delim);
            if is_header_for(&fields, opts.column) {
                return Some((pos, delim, fields));
            }
        }
    }
    None
}

/// Where the frame times come from (--column, else the known columns, CPUBusy + CPUWait, or
/// fps) and the name the capture reports for it.
fn frame_source(
    h: &Header,
    opts: &Options,
    path: &Path,
    header_line: usize,
) -> Result<(Source, String)> {
    Ok(match opts.column {
        Some(c) => {
            let i = h.idx(c).unwrap_or_default();
            (Source::Col(i), h.name(i))
        }
        None => {
            if let Some(i) = KNOWN_COLUMNS.iter().find_map(|k| h.idx(k)) {
                (Source::Col(i), h.name(i))
            } else if let (Some(b), Some(w)) = (h.idx("CPUBusy"), h.idx("CPUWait")) {
                (Source::Sum(b, w), format!("{}+{}", h.name(b), h.name(w)))
            } else if let Some(i) = h.idx("fps") {
                (Source::Fps(i), format!("{} (as 1000/fps)", h.name(i)))
            } else {
                return Err(BenchError::format(
                    path,
                    format!(
                        "line {header_line}: no frame-time column (looked for {}); name one \
                         with --column",
                        KNOWN_COLUMNS.join(", ")
                    ),
                ));
            }
        }
    })
}

/// A time column of a log whose rows may be samples rather than frames, and its scale to s.
fn time_column(h: &Header) -> Option<(usize, f64)> {
    if let Some(i) = h.idx("elapsed") {
        // MangoHud: ns since logging began (µs before it logged frametime, 2020-09).
        let scale = if h.has("frametime") { 1e-9 } else { 1e-6 };
        Some((i, scale))
    } else if let Some(i) = h.idx("TimeInSeconds") {
        Some((i, 1.0))
    } else {
        h.idx("TimeInMs").map(|i| (i, 1e-3))
    }
}

/// The column that says a present was not displayed, how it says so, and the rule's words.
fn dropped_column(h: &Header) -> Option<(usize, Drop, &'static str)> {
    if let Some(i) = h.idx("Dropped") {
        Some((i, Drop::Flag, "Dropped = 1, PresentMon 1.x columns"))
    } else if let Some(i) = h.idx("MsUntilDisplayed") {
        Some((i, Drop::Na, "MsUntilDisplayed = NA, PresentMon 2.4+"))
    } else {
        h.idx("DisplayedTime")
            .map(|i| (i, Drop::NaOrZero, "DisplayedTime = NA or 0, PresentMon 2.x"))
    }
}

/// One row's cells read; `None` for a header repeated further down (captures appended to
/// one file).
fn read_row(f: &[String], cols: &Columns, h: &Header, path: &Path, at: Loc) -> Result<Option<Row>> {
    let column = &cols.column;
    let pick = |i: Option<usize>| -> Option<String> {
        let v = f.get(i?)?.trim();
        (!is_missing(v)).then(|| v.to_string())
    };
    let first = match cols.src {
        Source::Col(i) | Source::Sum(i, _) | Source::Fps(i) => i,
    };
    if f.get(first)
        .is_some_and(|v| v.trim().eq_ignore_ascii_case(&h.name(first)))
    {
        return Ok(None);
    }
    let cell = match cols.src {
        Source::Col(i) => match f.get(i) {
            Some(v) => cells::ms_cell(v, path, at, column)?,
            None => Cell::Missing,
        },
        Source::Sum(b, w) => match (f.get(b), f.get(w)) {
            (Some(b), Some(w)) if !is_missing(b) && !is_missing(w) => {
                let x =
                    cells::number(b, path, at, "CPUBusy")? + cells::number(w, path, at, "CPUWait")?;
                cells::ms_value(x, &format!("{} + {}", b.trim(), w.trim()), path, at, column)?
            }
            _ => Cell::Missing,
        },
        Source::Fps(i) => match f.get(i) {
            Some(v) => cells::fps_cell(v, path, at, column)?,
            None => Cell::Missing,
        },
    };
    let mut r = Row::new(at, cell);
    r.key.application = pick(cols.app);
    if let Some(p) = pick(cols.pid) {
        let n = cells::number(&p, path, at, "ProcessID")?;
        if n.fract() != 0.0 || !(0.0..=u32::MAX as f64).contains(&n) {
            return Err(BenchError::format(
                path,
                format!("{at}: ProcessID value {p:?} is not a process id"),
            ));
        }
        r.key.process_id = Some(n as u32);
    }
    r.key.swap_chain = pick(cols.swap);
    if let Some((i, scale)) = cols.time {
        if let Some(v) = f.get(i).filter(|v| !is_missing(v)) {
            let t = cells::number(v, path, at, &h.name(i))? * scale;
            r.time_s = t.is_finite().then_some(t);
        }
    }
    if let Some((i, how, _)) = &cols.dropped {
        r.dropped = f.get(*i).and_then(|v| how.read(v));
    }
    r.mode = pick(cols.mode);
    r.tearing = match f.get(cols.tearing.unwrap_or(usize::MAX)).map(|v| v.trim()) {
        Some("1") => Some(true),
        Some("0") => Some(false),
        _ => None,
    };
    Ok(Some(r))
}

/// MangoHud before 0.5 (`src/logging.cpp` until 2020-06-20, and the overlay before it) wrote
/// `os,cpu,gpu,ram,kernel,driver`, the machine's line, then rows `fps,cpu_load,gpu_load,elapsed`
/// (`elapsed` in µs since logging began) without column names: when a log starts so and its
/// third line is four numbers, the column names it would have had, as if on its second line.
fn mangohud_unlabelled(lines: &[(usize, &str)]) -> Option<(usize, char, Vec<String>)> {
    let (_, first) = lines.first()?;
    if !first
        .replace(' ', "")
        .starts_with("os,cpu,gpu,ram,kernel,driver")
    {
        return None;
    }
    let (_, row) = lines.get(2)?;
    let cells = split(row, ',');
    let numbers = cells.len() == 4 && cells.iter().all(|c| c.trim().parse::<f64>().is_ok());
    numbers.then(|| {
        let names = ["fps", "cpu_load", "gpu_load", "elapsed"];
        (1, ',', names.iter().map(|n| n.to_string()).collect())
    })
}

/// `16,667` → `16.667` (a number with one decimal comma); anything else as it is.
fn decimal_point(cell: String) -> String {
    let t = cell.trim();
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match t.trim_start_matches(['-', '+']).split_once(',') {
        Some((a, b)) if digits(a) && digits(b) => t.replacen(',', ".", 1),
        _ => cell,
    }
}

/// How a column says "not displayed".
enum Drop {
    /// `Dropped`: `0` displayed, `1` (or OCAT's `Error`) not.
    Flag,
    /// `MsUntilDisplayed`: `NA` when not displayed.
    Na,
    /// `DisplayedTime`: `NA` (2.3) or `0` (2.0) when not displayed.
    NaOrZero,
}

impl Drop {
    fn read(&self, v: &str) -> Option<bool> {
        let v = v.trim();
        match self {
            Drop::Flag => (!is_missing(v)).then(|| v != "0"),
            Drop::Na => Some(is_missing(v)),
            Drop::NaOrZero => Some(is_missing(v) || v.parse::<f64>().is_ok_and(|x| x == 0.0)),
        }
    }
}

/// A plain list: one frame time in ms per line, optionally a one-word header first.
fn plain(lines: &[(usize, &str)], path: &Path, source: &str, opts: &Options) -> Result<Capture> {
    let mut it = lines.iter().peekable();
    if let Some((_, first)) = it.peek() {
        let single = split(first, ',').len() == 1;
        if single && first.trim().trim_matches('"').parse::<f64>().is_err() {
            it.next();
        }
    }
    let mut rows = Vec::new();
    for &(lineno, line) in it {
        let fields = split(line, ',');
        if fields.len() != 1 {
            return Err(BenchError::format(
                path,
                format!(
                    "line {lineno}: no frame-time column found (looked for {}, frametime); \
                     name one with --column",
                    KNOWN_COLUMNS.join(", ")
                ),
            ));
        }
        let v = fields.first().map(String::as_str).unwrap_or("");
        let cell = cells::ms_cell(
            v.trim().trim_matches('"'),
            path,
            Loc::Line(lineno),
            "frame time",
        )?;
        rows.push(Row::new(Loc::Line(lineno), cell));
    }
    let meta = Meta {
        path,
        source,
        format: "plain",
        column: None,
        rows: RowsAre::Unknown,
        time_column: None,
        zero_is_missing: false,
        dropped_rule: None,
        as_samples: opts.as_samples,
    };
    Ok(Capture {
        path: path.to_path_buf(),
        source: source.to_string(),
        format: "plain".into(),
        column: None,
        series: series::build(rows, &meta)?,
    })
}
