//! STREAM (McCalpin's stream.c / stream.f): the summary table.
//!
//! ```text
//! Function    Best Rate MB/s  Avg time     Min time     Max time     (stream.c 5.10)
//! Copy:           21453.2     0.007512     0.007458     0.007601
//! Function      Rate (MB/s)   Avg time     Min time     Max time     (5.9 and earlier)
//! Copy:        21453.2048       0.0075       0.0075       0.0076
//! ```
//!
//! Each of the four rows (Copy, Scale, Add, Triad) gives the best rate in MB/s (10⁶ bytes/s)
//! and the average, minimum and maximum time of one pass in seconds.

use super::{number, Measure, ReadError, Tool};

const TOOL: Tool = Tool::Stream;
/// The benchmark name of every measure.
pub const BENCHMARK: &str = "stream";
/// The rows, as STREAM labels them, in order.
pub const KERNELS: [&str; 4] = ["Copy", "Scale", "Add", "Triad"];

/// Whether `line` (trimmed) is the table's header, in any STREAM version's wording.
pub fn is_header(line: &str) -> bool {
    line.starts_with("Function") && line.contains("Rate") && line.contains("Avg time")
}

/// Reads every STREAM table of `text`: per kernel, metric `copy` (best rate, MB/s) and
/// `copy_avg_time`, `copy_min_time`, `copy_max_time` (s), and so on for scale, add, triad.
/// A table must have all four rows.
pub fn read(text: &str) -> Result<Vec<Measure>, ReadError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        if is_header(lines[i].trim()) {
            i = read_table(&lines, i + 1, &mut out)?;
        } else {
            i += 1;
        }
    }
    if out.is_empty() {
        return Err(ReadError::missing(
            TOOL,
            "`Function … Rate … Avg time` table",
        ));
    }
    Ok(out)
}

/// Reads the kernel rows starting at `start` (the line after a header) into `out`; returns
/// the index of the first line after them.
fn read_table(lines: &[&str], start: usize, out: &mut Vec<Measure>) -> Result<usize, ReadError> {
    let mut found = [false; 4];
    let mut i = start;
    while i < lines.len() {
        let line = lines[i].trim();
        // Some ports print an empty line after the header.
        if line.is_empty() && i == start {
            i += 1;
            continue;
        }
        let Some((k, rest)) = kernel_row(line) else {
            break;
        };
        let values: Vec<f64> = rest.split_whitespace().filter_map(number).collect();
        if values.len() != 4 || rest.split_whitespace().count() != 4 {
            return Err(ReadError::bad_line(
                TOOL,
                i,
                lines[i],
                "expected a rate and three times",
            ));
        }
        let name = KERNELS[k].to_ascii_lowercase();
        out.push(Measure::new(BENCHMARK, &name, values[0], "MB/s"));
        for (suffix, value) in ["avg_time", "min_time", "max_time"]
            .iter()
            .zip(&values[1..])
        {
            out.push(Measure::new(
                BENCHMARK,
                &format!("{name}_{suffix}"),
                *value,
                "s",
            ));
        }
        found[k] = true;
        i += 1;
    }
    if let Some(k) = found.iter().position(|f| !f) {
        // `start` is the header's index + 1: its 1-based line number.
        return Err(ReadError::missing(
            TOOL,
            &format!("{} row in the table of line {start}", KERNELS[k]),
        ));
    }
    Ok(i)
}

/// The kernel a row is about (its index in [`KERNELS`]) and the text after its `Name:` label.
fn kernel_row(line: &str) -> Option<(usize, &str)> {
    KERNELS.iter().enumerate().find_map(|(k, name)| {
        line.strip_prefix(name)
            .and_then(|rest| rest.strip_prefix(':'))
            .map(|rest| (k, rest))
    })
}
