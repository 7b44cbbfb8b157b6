//! Two PyTorch scripts of the r/VFIO pinning study's runner (issue 42): a matmul throughput
//! test and a host↔device copy test. PyTorch prints nothing of its own here: these are the
//! lines such scripts print with `print(f"…")`, read by their words, not their spacing.
//!
//! Matmul, one line per size and dtype (the TFLOPS figure next to its unit):
//!
//! ```text
//! matmul n=8192 dtype=torch.float16: 152.31 TFLOPS
//! matmul 4096x4096 bf16 160.2 TFLOPS
//! [matmul] size=2048 dtype=float32 TFLOPS=41.77
//! ```
//!
//! Host↔device copies, in sections per GPU (`GPU N` / `cuda:N` / `Device N`, decorated or
//! not), each line a direction and a bandwidth:
//!
//! ```text
//! Detected = 2 GPU(s)
//! === GPU 0: NVIDIA GeForce RTX 4090 ===
//! pinned   H2D: 24.61 GB/s
//! pageable Device to Host (256 MiB): 11.87 GB/s
//! ```
//!
//! Figures stay per GPU (parameter `gpu`); a prose line (`Detected = 2 GPU(s)`) is a fact
//! ([`facts`]), never a measure.

use std::collections::BTreeMap;

use super::chase::size_bytes;
use super::{number, whole, Measure, ReadError, Tool};

/// The benchmark name of matmul measures.
pub const MATMUL: &str = "pytorch-matmul";
/// The benchmark name of copy measures.
pub const BANDWIDTH: &str = "pytorch-bandwidth";

/// The dtype a token names, in PyTorch's short spelling: `fp16`, `bf16`, `fp32`, `tf32`,
/// `fp64`, `fp8_e4m3`, `fp8_e5m2`, `int8` (`torch.float16`, `dtype=half`, … accepted).
pub fn dtype(token: &str) -> Option<&'static str> {
    let t = token
        .trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '_' && c != '.' && c != '=');
    let t = t.strip_prefix("dtype=").unwrap_or(t);
    let t = t.strip_prefix("torch.").unwrap_or(t);
    Some(match t.to_ascii_lowercase().as_str() {
        "fp16" | "float16" | "half" => "fp16",
        "bf16" | "bfloat16" => "bf16",
        "fp32" | "float32" | "float" => "fp32",
        "tf32" => "tf32",
        "fp64" | "float64" | "double" => "fp64",
        "fp8" | "fp8_e4m3" | "float8_e4m3fn" | "e4m3" => "fp8_e4m3",
        "fp8_e5m2" | "float8_e5m2" | "e5m2" => "fp8_e5m2",
        "int8" => "int8",
        _ => return None,
    })
}

/// A matrix size token: `8192`, `n=8192`, `size=8192`, `N=8192`, `4096x4096`, `8192x8192x4096`
/// → the dimensions as written, `x`-joined (`8192` for a square `8192x8192`).
fn matrix_size(token: &str) -> Option<String> {
    let t = token.trim_matches(|c: char| !c.is_ascii_alphanumeric() && c != '=');
    let t = ["n=", "N=", "size=", "shape="]
        .iter()
        .find_map(|p| t.strip_prefix(p))
        .unwrap_or(t);
    let dims: Vec<u64> = t
        .split(['x', 'X', '×'])
        .map(whole)
        .collect::<Option<Vec<u64>>>()?;
    if dims.is_empty() || dims.contains(&0) {
        return None;
    }
    if dims.iter().all(|d| *d == dims[0]) && dims.len() <= 2 {
        return Some(dims[0].to_string());
    }
    Some(
        dims.iter()
            .map(u64::to_string)
            .collect::<Vec<_>>()
            .join("x"),
    )
}

/// Whether `token` is the TFLOPS unit (`TFLOPS`, `TFLOP/s`, `tflops`, with `:`/`=` after).
fn is_tflops(token: &str) -> bool {
    let t = token.trim_end_matches([':', '=', ',', ';']);
    t.eq_ignore_ascii_case("tflops") || t.eq_ignore_ascii_case("tflop/s")
}

/// A matmul line's (size, dtype, TFLOPS token): a line with the TFLOPS unit, a dtype and a
/// size. The figure is the number before the unit (`152.3 TFLOPS`) or after it
/// (`TFLOPS: 152.3`, `TFLOPS=152.3`); `None` for the value when neither is a number.
pub fn matmul_line(line: &str) -> Option<(String, &'static str, Option<f64>)> {
    let words: Vec<&str> = line.split_whitespace().collect();
    // `TFLOPS=41.7` is one word
    let (unit_at, glued) = words.iter().enumerate().find_map(|(i, w)| {
        if is_tflops(w) {
            return Some((i, None));
        }
        let (k, v) = w.split_once(['=', ':'])?;
        is_tflops(k).then_some((i, Some(v)))
    })?;
    let dt = words.iter().find_map(|w| dtype(w))?;
    let size = words
        .iter()
        .enumerate()
        .filter(|(i, _)| *i + 1 != unit_at && *i != unit_at + 1 && *i != unit_at)
        .find_map(|(_, w)| matrix_size(w))?;
    let value = match glued {
        Some(v) if !v.is_empty() => number(v),
        _ => {
            let before = unit_at
                .checked_sub(1)
                .and_then(|i| words.get(i))
                .and_then(|w| number(w.trim_end_matches([':', ','])));
            before.or_else(|| words.get(unit_at + 1).and_then(|w| number(w)))
        }
    };
    Some((size, dt, value))
}

/// Reads every matmul line: metric `tflops` (TFLOPS), parameters `n` (the size as
/// `matrix_size` writes it) and `dtype`.
pub fn read_matmul(text: &str) -> Result<Vec<Measure>, ReadError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let Some((size, dt, value)) = matmul_line(line.trim()) else {
            continue;
        };
        let value = value.ok_or_else(|| {
            ReadError::bad_line(
                Tool::PytorchMatmul,
                i,
                line,
                "the TFLOPS figure is not a number",
            )
        })?;
        out.push(
            Measure::new(MATMUL, "tflops", value, "TFLOPS")
                .with_param("n", &size)
                .with_param("dtype", dt),
        );
    }
    if out.is_empty() {
        return Err(ReadError::missing(
            Tool::PytorchMatmul,
            "matmul lines with a size, a dtype and TFLOPS",
        ));
    }
    Ok(out)
}

/// The GPU a section header names: `=== GPU 0: name ===`, `[GPU 1]`, `GPU 0:`, `cuda:1`,
/// `Device 0 (NVIDIA …)`, `--- cuda:0 ---`. Must start the line (after decoration).
pub fn section(line: &str) -> Option<u32> {
    let t = line.trim_start_matches(|c: char| "=-#[*> ".contains(c));
    let t = t.trim_start();
    let rest = ["GPU", "gpu", "Device", "device"]
        .iter()
        .find_map(|p| t.strip_prefix(p))
        .map(|r| r.trim_start_matches([' ', '#']))
        .or_else(|| t.strip_prefix("cuda:"))?;
    let digits = rest
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(rest.len());
    let n: u32 = rest[..digits].parse().ok()?;
    let after = rest[digits..].trim_start();
    // a header ends there, or goes on with a name or decoration, never with a figure
    let ok = after.is_empty() || after.starts_with([':', ']', '(', '=', '-', ',']);
    (ok && !has_bandwidth(after)).then_some(n)
}

/// The direction words of a copy line: `host_to_device`, `device_to_host`, `device_to_device`.
fn direction(label: &str) -> Option<&'static str> {
    let l = label
        .to_ascii_lowercase()
        .replace(['-', '>', '_', ':', ',', '(', ')', '[', ']'], " ");
    let words: Vec<&str> = l.split_whitespace().collect();
    let has = |w: &str| words.contains(&w);
    let phrase = |a: &str, b: &str| {
        words
            .windows(3)
            .any(|x| x[0] == a && (x[1] == "to" || x[1] == "2") && x[2] == b)
            || words.windows(2).any(|x| x[0] == a && x[1] == b)
    };
    if has("h2d") || has("htod") || phrase("host", "device") || phrase("cpu", "gpu") {
        Some("host_to_device")
    } else if has("d2h") || has("dtoh") || phrase("device", "host") || phrase("gpu", "cpu") {
        Some("device_to_host")
    } else if has("d2d") || has("dtod") || phrase("device", "device") {
        Some("device_to_device")
    } else {
        None
    }
}

const UNITS: [&str; 4] = ["GB/s", "MB/s", "GiB/s", "MiB/s"];

fn has_bandwidth(t: &str) -> bool {
    t.split_whitespace().any(|w| UNITS.contains(&w))
}

/// A copy line: (direction, memory, size, value, unit) of `LABEL[:] VALUE UNIT`, the
/// label naming a direction; `None` for the value when it is not a number.
#[allow(clippy::type_complexity)]
fn copy_line(
    line: &str,
) -> Option<(
    &'static str,
    Option<&'static str>,
    Option<u64>,
    Option<f64>,
    &'static str,
)> {
    let words: Vec<&str> = line.split_whitespace().collect();
    let [label @ .., value, unit] = words.as_slice() else {
        return None;
    };
    let unit = UNITS.iter().find(|u| *u == unit)?;
    let label = label.join(" ");
    let dir = direction(&label)?;
    let lower = label.to_ascii_lowercase();
    let memory = if lower.contains("pinned") {
        Some("pinned")
    } else if lower.contains("pageable") || lower.contains("paged") {
        Some("pageable")
    } else {
        None
    };
    // a size in the label: `(256 MiB)`, `256MB`, `268435456 bytes`
    let tokens: Vec<&str> = label
        .split(|c: char| c.is_whitespace() || "(),=:".contains(c))
        .filter(|t| !t.is_empty())
        .collect();
    let size = tokens.iter().enumerate().find_map(|(i, t)| {
        if t.starts_with(|c: char| c.is_ascii_digit())
            && t.ends_with(|c: char| c.is_ascii_alphabetic())
        {
            return size_bytes(t).filter(|b| *b > 0);
        }
        let n = whole(t)?;
        let unit = tokens.get(i + 1)?;
        let unit = if unit.eq_ignore_ascii_case("bytes") {
            "B"
        } else {
            unit
        };
        size_bytes(&format!("{n}{unit}")).filter(|b| *b > 0 && unit.len() <= 3)
    });
    Some((dir, memory, size, number(value.trim_end_matches(',')), unit))
}

/// A GPU named on a copy line itself: `GPU0 H2D: …`, `cuda:1 D2H: …`.
fn label_gpu(line: &str) -> Option<u32> {
    line.split_whitespace().find_map(|w| {
        let w = w.trim_end_matches([':', ',']);
        let lower = w.to_ascii_lowercase();
        let n = lower
            .strip_prefix("gpu")
            .or_else(|| lower.strip_prefix("cuda:"))?;
        n.parse().ok()
    })
}

/// Whether `text` is a copy test's output: a GPU section header or a `Detected … GPU(s)`
/// line, and a copy line.
pub fn looks_like_bandwidth(text: &str) -> bool {
    let mut header = false;
    let mut copy = false;
    for line in text.lines() {
        let t = line.trim();
        header |= section(t).is_some() || detected_gpus(t).is_some();
        copy |= copy_line(t).is_some();
    }
    header && copy
}

/// `Detected = 2 GPU(s)`, `Detected 2 CUDA Capable device(s)`, `Found 2 GPUs` → 2.
pub fn detected_gpus(line: &str) -> Option<u32> {
    let lower = line.to_ascii_lowercase();
    if !(lower.starts_with("detected") || lower.starts_with("found")) {
        return None;
    }
    if !(lower.contains("gpu") || lower.contains("device")) {
        return None;
    }
    lower
        .split(|c: char| !c.is_ascii_digit())
        .find(|t| !t.is_empty())?
        .parse()
        .ok()
}

/// Reads every copy line: metric `bandwidth` in the unit printed, parameters `gpu` (the
/// section's; none before any section), `direction`, `memory` (`pinned`, `pageable`, when
/// said) and `size_bytes` when the label gives one.
pub fn read_bandwidth(text: &str) -> Result<Vec<Measure>, ReadError> {
    const TOOL: Tool = Tool::PytorchBandwidth;
    let mut out = Vec::new();
    let mut gpu: Option<u32> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if let Some(n) = section(t) {
            gpu = Some(n);
            continue;
        }
        let Some((dir, memory, size, value, unit)) = copy_line(t) else {
            continue;
        };
        let value = value
            .ok_or_else(|| ReadError::bad_line(TOOL, i, line, "the bandwidth is not a number"))?;
        let mut m = Measure::new(BANDWIDTH, "bandwidth", value, unit).with_param("direction", dir);
        if let Some(g) = label_gpu(t).or(gpu) {
            m = m.with_param("gpu", &g.to_string());
        }
        if let Some(mem) = memory {
            m = m.with_param("memory", mem);
        }
        m.size_bytes = size;
        out.push(m);
    }
    if out.is_empty() {
        return Err(ReadError::missing(
            TOOL,
            "host↔device lines (`H2D: X GB/s`, `Device to Host: X GB/s`)",
        ));
    }
    Ok(out)
}

/// The copy test's facts: `gpus` (from `Detected … GPU(s)`, else the sections counted).
pub fn facts(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut sections: Vec<u32> = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if let Some(n) = detected_gpus(t) {
            out.insert("gpus".to_string(), n.to_string());
        } else if let Some(n) = section(t) {
            if !sections.contains(&n) {
                sections.push(n);
            }
        }
    }
    if !out.contains_key("gpus") && !sections.is_empty() {
        out.insert("gpus".to_string(), sections.len().to_string());
    }
    out
}
