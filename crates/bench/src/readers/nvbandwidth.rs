//! nvbandwidth (NVIDIA/nvbandwidth): per test case, a matrix and its sum.
//!
//! ```text
//! Running host_to_device_memcpy_ce.
//! memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)
//!            0         1
//!  0     26.03     25.94
//!
//! SUM host_to_device_memcpy_ce 51.97
//! ```
//!
//! Cells may be `N/A` (v0.2 on; not read). Rows are labelled without padding before v0.5.
//! With `--perfFormatter` the sum is written `&&&& PERF <key> <sum> +GB/s` (`-ns` for
//! latencies). Bidirectional device-to-device tests print several matrices under one
//! `Running` line (`Read1`, `Read2`, `Total`), each with its own sum key.

use super::{number, Measure, ReadError, Tool};

const TOOL: Tool = Tool::Nvbandwidth;
/// The benchmark name of every measure.
pub const BENCHMARK: &str = "nvbandwidth";

/// What a matrix's description line says.
#[derive(Debug, Clone, PartialEq)]
struct Description {
    /// What the rows and columns are (`CPU`, `GPU`), if named.
    row_kind: Option<String>,
    column_kind: Option<String>,
    /// `read1`, `total`, … for tests that print several matrices.
    series: Option<String>,
    /// The unit in the last parentheses: `GB/s`, `ns`.
    unit: String,
}

/// Whether `line` (trimmed) describes a matrix: `memcpy CE CPU(row) -> GPU(column)
/// bandwidth (GB/s)`, `memory latency SM CPU(row) <-> GPU(column) (ns)`, …
pub fn is_description(line: &str) -> bool {
    description(line).is_some()
}

fn description(line: &str) -> Option<Description> {
    let (before, after) = line.split_once("(column)")?;
    let open = after.rfind('(')?;
    let unit = after[open + 1..].strip_suffix(')')?;
    if unit.is_empty() || unit.contains(char::is_whitespace) {
        return None;
    }
    let kind_before = |text: &str| {
        text.split_whitespace()
            .last()
            .filter(|k| k.chars().all(|c| c.is_ascii_alphanumeric()))
            .map(str::to_string)
    };
    let (row_kind, column_text) = match before.split_once("(row)") {
        Some((row_text, rest)) => (kind_before(row_text), rest),
        None => (None, before),
    };
    let series = after[..open]
        .split_whitespace()
        .next()
        .filter(|w| !w.eq_ignore_ascii_case("bandwidth"))
        .map(str::to_ascii_lowercase);
    Some(Description {
        row_kind,
        column_kind: kind_before(column_text),
        series,
        unit: unit.to_string(),
    })
}

/// A `SUM <key> <value>` or `&&&& PERF <key> <value> [+GB/s]` line: key, value, and the
/// unit if the line gives one.
fn sum_line(line: &str) -> Option<(&str, f64, Option<&str>)> {
    let tokens: Vec<&str> = line.split_whitespace().collect();
    match tokens.as_slice() {
        ["SUM", key, value] => Some((key, number(value)?, None)),
        ["&&&&", "PERF", key, value, rest @ ..] if rest.len() <= 1 => {
            let unit = rest.first().map(|u| u.trim_start_matches(['+', '-']));
            Some((key, number(value)?, unit))
        }
        _ => None,
    }
}

/// Reads every matrix of `text`: per cell, metric = the test's key (`host_to_device_memcpy_ce`,
/// `…_read1`), unit as described (GB/s, ns), parameters `row` and `column` (`cpu0`, `gpu3`;
/// the bare label where the description names no kind); `N/A` cells are left out. Each sum
/// is metric `<key>_sum`.
pub fn read(text: &str) -> Result<Vec<Measure>, ReadError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut running: Option<&str> = None;
    let mut last_unit = String::from("GB/s");
    let mut i = 0;
    while i < lines.len() {
        let t = lines[i].trim();
        if let Some(name) = t.strip_prefix("Running ").and_then(|r| r.strip_suffix('.')) {
            running = Some(name.trim());
        } else if let Some(d) = description(t) {
            i = read_matrix(&lines, i, &d, running, &mut out)?;
            last_unit = d.unit;
            continue;
        } else if let Some((key, value, unit)) = sum_line(t) {
            let unit = unit.unwrap_or(&last_unit);
            out.push(Measure::new(BENCHMARK, &format!("{key}_sum"), value, unit));
        }
        i += 1;
    }
    if out.is_empty() {
        return Err(ReadError::missing(
            TOOL,
            "`… (row) … (column) bandwidth (GB/s)` matrix or `SUM` line",
        ));
    }
    Ok(out)
}

/// Reads the matrix described at line `at` into `out`; returns the index of the line after
/// its last row.
fn read_matrix(
    lines: &[&str],
    at: usize,
    d: &Description,
    running: Option<&str>,
    out: &mut Vec<Measure>,
) -> Result<usize, ReadError> {
    let header_at = at + 1;
    let columns: Vec<&str> = match lines.get(header_at) {
        Some(h) if !h.trim().is_empty() => h.split_whitespace().collect(),
        _ => {
            return Err(ReadError::missing(
                TOOL,
                &format!("column labels under line {}", at + 1),
            ))
        }
    };
    let mut cells = Vec::new();
    let mut i = header_at + 1;
    while let Some(line) = lines.get(i).filter(|l| !l.trim().is_empty()) {
        let tokens: Vec<&str> = line.split_whitespace().collect();
        if tokens.len() != columns.len() + 1 {
            let why = format!("expected a row label and {} values", columns.len());
            return Err(ReadError::bad_line(TOOL, i, line, &why));
        }
        for (column, token) in columns.iter().zip(&tokens[1..]) {
            if *token == "N/A" {
                continue;
            }
            let value = number(token).ok_or_else(|| {
                ReadError::bad_line(TOOL, i, line, &format!("`{token}` is not a number"))
            })?;
            cells.push((tokens[0], *column, value));
        }
        i += 1;
    }
    let key = matrix_key(lines, i, d, running).ok_or_else(|| {
        ReadError::missing(
            TOOL,
            &format!(
                "test name (`Running <test>.` or `SUM <test>`) for the matrix of line {}",
                at + 1
            ),
        )
    })?;
    let label = |kind: &Option<String>, label: &str| match kind {
        Some(k) => format!("{}{label}", k.to_ascii_lowercase()),
        None => label.to_string(),
    };
    for (row, column, value) in cells {
        out.push(
            Measure::new(BENCHMARK, &key, value, &d.unit)
                .with_param("row", &label(&d.row_kind, row))
                .with_param("column", &label(&d.column_kind, column)),
        );
    }
    Ok(i)
}

/// The matrix's key: that of the sum line after it (blank lines between), else the running
/// test's name (with the series, `_read1`, when there is one).
fn matrix_key(
    lines: &[&str],
    after: usize,
    d: &Description,
    running: Option<&str>,
) -> Option<String> {
    let next = lines[after.min(lines.len())..]
        .iter()
        .map(|l| l.trim())
        .find(|l| !l.is_empty());
    if let Some((key, _, _)) = next.and_then(sum_line) {
        return Some(key.to_string());
    }
    let name = running?;
    Some(match &d.series {
        Some(s) => format!("{name}_{s}"),
        None => name.to_string(),
    })
}
