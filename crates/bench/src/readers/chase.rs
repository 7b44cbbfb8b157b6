//! A pointer-chase (dependent load) latency curve: one line per working-set size, the
//! nanoseconds one load took, and an optional label after `#`.
//!
//! ```text
//! # pointer chase, 64 B stride, random cycle
//! 4096 1.21 # L1
//! 32K 1.35
//! 262144 3.80 # L2
//! 64MiB 92.4 # DRAM
//! ```
//!
//! The size is bytes, or a number with a binary suffix (`K`, `KB`, `KiB`, `M`, `MB`, `MiB`,
//! `G`, `GB`, `GiB`: powers of 1024, as a working set is counted); the latency is in ns.
//! Lines starting with `#` and empty lines are comments. The shape is the r/VFIO pinning
//! study's runner's (`size ns # label`, issue 42); lmbench's `lat_mem_rd` prints sizes in MB
//! with decimals and is not this shape.

use super::{number, whole, Measure, ReadError, Tool};

const TOOL: Tool = Tool::PointerChase;
/// The benchmark name of every measure.
pub const BENCHMARK: &str = "pointer-chase";

/// A size token as bytes: `4096`, `32K`, `16KiB`, `1M`, `2GiB`.
pub fn size_bytes(token: &str) -> Option<u64> {
    let digits = token
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(token.len());
    let n = whole(&token[..digits])?;
    let shift = match token[digits..].to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        _ => return None,
    };
    n.checked_mul(1u64 << shift)
}

/// A curve point: (bytes, ns, label) of a line `size ns [# label]`.
pub fn point(line: &str) -> Option<(u64, f64, Option<&str>)> {
    let (data, label) = match line.split_once('#') {
        Some((d, l)) => (d, Some(l.trim()).filter(|l| !l.is_empty())),
        None => (line, None),
    };
    let mut words = data.split_whitespace();
    let (size, ns) = (words.next()?, words.next()?);
    if words.next().is_some() {
        return None;
    }
    let ns = number(ns).filter(|v| *v >= 0.0)?;
    Some((size_bytes(size)?, ns, label))
}

/// Whether `text` is a curve: at least two points, and every other line a comment.
pub fn looks_like(text: &str) -> bool {
    let mut points = 0;
    for line in text.lines() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        if point(t).is_none() {
            return false;
        }
        points += 1;
    }
    points >= 2
}

/// Reads every `size ns [# label]` line: metric `latency` (ns) at `size_bytes`, the label
/// as the measure's note. A line that is neither a point nor a comment is an error.
pub fn read(text: &str) -> Result<Vec<Measure>, ReadError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.is_empty() || t.starts_with('#') {
            continue;
        }
        let (bytes, ns, label) = point(t).ok_or_else(|| {
            ReadError::bad_line(TOOL, i, line, "expected `size ns` or `size ns # label`")
        })?;
        let mut m = Measure::new(BENCHMARK, "latency", ns, "ns").with_size(bytes);
        m.note = label.map(str::to_string);
        out.push(m);
    }
    if out.is_empty() {
        return Err(ReadError::missing(TOOL, "`size ns` lines"));
    }
    Ok(out)
}
