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
//!
//! Per-node STREAM (the r/VFIO pinning study's local/remote runs): a table run under
//! `numactl` is told by a line before it naming the binding — the command echoed
//! (`numactl --cpunodebind=0 --membind=1 ./stream`, `numactl -N 0 -m 1 ./stream`,
//! `+ numactl …` from `set -x`) or a comment (`# cpunodebind=0 membind=1`) — or by the file's
//! name (`stream_node0_mem1.txt`, [`Binding::from_name`]). Its measures get parameters
//! `cpunodebind`, `membind` and `locality` (`local` when both name one node, else `remote`).

use super::{number, Measure, ReadError, Tool};

/// Where a STREAM run's threads and memory were bound (numactl's node lists, as written).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Binding {
    pub cpunodebind: Option<String>,
    pub membind: Option<String>,
}

impl Binding {
    /// The binding a line names: a `numactl` command with `--cpunodebind=`/`-N` and
    /// `--membind=`/`-m` (either), or `cpunodebind=N membind=M` words (`:` or `=`).
    pub fn from_line(line: &str) -> Option<Binding> {
        let t = line.trim().trim_start_matches(['#', '+', '$', ' ']);
        let words: Vec<&str> = t.split_whitespace().collect();
        let numactl = words.iter().any(|w| w.ends_with("numactl"));
        let mut b = Binding::default();
        let mut i = 0;
        while i < words.len() {
            let w = words[i].trim_end_matches(',');
            let next = words.get(i + 1).map(|n| n.trim_end_matches(','));
            let (key, value, used_next) = match w.split_once(['=', ':']) {
                Some((k, v)) if !v.is_empty() => (k, Some(v), false),
                Some((k, _)) => (k, next, true),
                None if numactl && matches!(w, "-N" | "-m" | "--cpunodebind" | "--membind") => {
                    (w, next, true)
                }
                None => (w, None, false),
            };
            let key = key.trim_start_matches('-');
            let value = value.filter(|v| is_node_list(v)).map(str::to_string);
            match key {
                "cpunodebind" | "N" | "cpubind" if numactl || key != "N" => {
                    b.cpunodebind = value.or(b.cpunodebind)
                }
                "membind" | "m" if numactl || key != "m" => b.membind = value.or(b.membind),
                _ => {}
            }
            i += if used_next { 2 } else { 1 };
        }
        (b.cpunodebind.is_some() || b.membind.is_some()).then_some(b)
    }

    /// The binding a file name names: `stream_node0_mem1`, `stream-cpu0-mem1.txt`,
    /// `stream_n0_m1`.
    pub fn from_name(name: &str) -> Option<Binding> {
        let stem = name.split('.').next().unwrap_or(name).to_ascii_lowercase();
        let mut b = Binding::default();
        for part in stem.split(['_', '-']) {
            let Some(digits) = part.find(|c: char| c.is_ascii_digit()) else {
                continue;
            };
            let (word, n) = part.split_at(digits);
            if n.is_empty() || !n.chars().all(|c| c.is_ascii_digit()) {
                continue;
            }
            match word {
                "node" | "cpu" | "n" | "cpunode" => b.cpunodebind = Some(n.to_string()),
                "mem" | "m" | "memnode" => b.membind = Some(n.to_string()),
                _ => {}
            }
        }
        (b.cpunodebind.is_some() && b.membind.is_some()).then_some(b)
    }

    /// `local` when threads and memory are bound to one and the same node, `remote` when to
    /// different single nodes; `None` otherwise.
    pub fn locality(&self) -> Option<&'static str> {
        let (c, m) = (self.cpunodebind.as_deref()?, self.membind.as_deref()?);
        let single = |s: &str| s.chars().all(|c| c.is_ascii_digit());
        if !(single(c) && single(m)) {
            return None;
        }
        Some(if c.parse::<u32>().ok() == m.parse::<u32>().ok() {
            "local"
        } else {
            "remote"
        })
    }

    /// The parameters of a measure made under this binding.
    pub fn apply(&self, m: &mut Measure) {
        if let Some(c) = &self.cpunodebind {
            m.params.insert("cpunodebind".into(), c.clone());
        }
        if let Some(n) = &self.membind {
            m.params.insert("membind".into(), n.clone());
        }
        if let Some(l) = self.locality() {
            m.params.insert("locality".into(), l.into());
        }
    }
}

/// A numactl node list: `0`, `1,3`, `0-1`.
fn is_node_list(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_digit() || c == ',' || c == '-')
}

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
/// A table must have all four rows. A table after a [`Binding`] line gets its parameters.
pub fn read(text: &str) -> Result<Vec<Measure>, ReadError> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut binding: Option<Binding> = None;
    let mut i = 0;
    while i < lines.len() {
        if is_header(lines[i].trim()) {
            let first = out.len();
            i = read_table(&lines, i + 1, &mut out)?;
            if let Some(b) = &binding {
                out[first..].iter_mut().for_each(|m| b.apply(m));
            }
        } else {
            if let Some(b) = Binding::from_line(lines[i]) {
                binding = Some(b);
            }
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
