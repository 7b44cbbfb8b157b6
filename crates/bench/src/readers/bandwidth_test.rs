//! The CUDA samples' `bandwidthTest`: readable tables and `--csv` lines.
//!
//! ```text
//!  Host to Device Bandwidth, 1 Device(s)
//!  PINNED Memory Transfers
//!    Transfer Size (Bytes)→Bandwidth(GB/s)          (MB/s before CUDA 11)
//!    33554432→→→12.3
//! bandwidthTest-H2D-Pinned, Bandwidth = 12.3 GB/s, Time = 0.00273 s, Size = 33554432 bytes, NumDevsUsed = 1
//! ```
//!
//! (→: a tab.) With `--wc` the sample prints ` Write-Combined Memory Writes are Enabled` without a line
//! break, so the table header follows on the same line.

use super::{number, whole, Measure, ReadError, Tool};

const TOOL: Tool = Tool::BandwidthTest;
/// The benchmark name of every measure.
pub const BENCHMARK: &str = "bandwidthTest";

/// The copy directions, as the readable header and the CSV tag name them, and as the
/// `direction` parameter does.
const DIRECTIONS: [(&str, &str, &str); 3] = [
    ("Host to Device", "H2D", "host_to_device"),
    ("Device to Host", "D2H", "device_to_host"),
    ("Device to Device", "D2D", "device_to_device"),
];

/// What the lines before a table said.
#[derive(Debug, Clone, Default)]
struct Context {
    direction: Option<&'static str>,
    devices: Option<String>,
    memory: Option<String>,
    write_combined: bool,
}

impl Context {
    /// A measure of `value` `unit` at `size` in this context.
    fn measure(&self, size: u64, value: f64, unit: &str, direction: &str) -> Measure {
        let mut m = Measure::new(BENCHMARK, "bandwidth", value, unit)
            .with_size(size)
            .with_param("direction", direction);
        // Device-to-device copies involve no host memory: the mode printed is irrelevant.
        if direction != "device_to_device" {
            if let Some(memory) = &self.memory {
                m = m.with_param("memory", memory);
            }
            if self.write_combined {
                m = m.with_param("write_combined", "yes");
            }
        }
        if let Some(devices) = &self.devices {
            m = m.with_param("devices", devices);
        }
        m
    }
}

/// Whether `line` (trimmed) is a `--csv` result line: `bandwidthTest-H2D-Pinned, Bandwidth = …`.
pub fn is_csv_line(line: &str) -> bool {
    line.starts_with("bandwidthTest-") && line.contains(", Bandwidth = ")
}

/// Reads every table row and CSV line of `text`: metric `bandwidth` in the unit printed
/// (GB/s, or MB/s in older samples), `size_bytes`, parameters `direction`
/// (`host_to_device`, `device_to_host`, `device_to_device`), `memory` (`pinned`,
/// `pageable`; not for device to device), `write_combined` (`yes`, when enabled) and
/// `devices` (how many were used).
pub fn read(text: &str) -> Result<Vec<Measure>, ReadError> {
    let mut out = Vec::new();
    let mut ctx = Context::default();
    let mut unit: Option<&'static str> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim();
        if is_csv_line(t) {
            out.push(csv_line(t).ok_or_else(|| {
                ReadError::bad_line(
                    TOOL,
                    i,
                    line,
                    "expected `bandwidthTest-KIND, Bandwidth = X GB/s, …, Size = N bytes, …`",
                )
            })?);
            continue;
        }
        if let Some((direction, devices)) = kind_line(t) {
            ctx = Context {
                direction: Some(direction),
                devices: Some(devices.to_string()),
                ..Context::default()
            };
            unit = None;
            continue;
        }
        if let Some(mode) = t.strip_suffix("Memory Transfers") {
            ctx.memory = Some(mode.trim().to_ascii_lowercase());
        }
        if t.contains("Write-Combined Memory Writes are Enabled") {
            ctx.write_combined = true;
        }
        if t.contains("Transfer Size (Bytes)") {
            unit = Some(if t.contains("(MB/s)") { "MB/s" } else { "GB/s" });
            continue;
        }
        let Some(unit) = unit else { continue };
        let tokens: Vec<&str> = t.split_whitespace().collect();
        let Some(size) = tokens.first().and_then(|s| whole(s)) else {
            continue;
        };
        let bad = |why: &str| ReadError::bad_line(TOOL, i, line, why);
        let value = match tokens.as_slice() {
            [_, value] => number(value).ok_or_else(|| bad("the bandwidth is not a number"))?,
            _ => return Err(bad("expected a transfer size and a bandwidth")),
        };
        let direction = ctx
            .direction
            .ok_or_else(|| bad("a table row before any `… Bandwidth, N Device(s)` line"))?;
        out.push(ctx.measure(size, value, unit, direction));
    }
    if out.is_empty() {
        return Err(ReadError::missing(
            TOOL,
            "`Transfer Size (Bytes)` table or `bandwidthTest-…` CSV line",
        ));
    }
    Ok(out)
}

/// ` Host to Device Bandwidth, 1 Device(s)` → (`host_to_device`, `1`).
fn kind_line(line: &str) -> Option<(&'static str, &str)> {
    let (kind, rest) = line.split_once(" Bandwidth, ")?;
    let devices = rest.strip_suffix("Device(s)")?.trim();
    whole(devices)?;
    let (_, _, direction) = DIRECTIONS.iter().find(|(k, _, _)| *k == kind.trim())?;
    Some((direction, devices))
}

/// A `--csv` line: `bandwidthTest-H2D-Pinned[-WriteCombined], Bandwidth = X GB/s, Time = T
/// s, Size = N bytes, NumDevsUsed = D`.
fn csv_line(line: &str) -> Option<Measure> {
    let mut fields = line.split(',').map(str::trim);
    let config = fields.next()?.strip_prefix("bandwidthTest-")?;
    let mut tags = config.split('-');
    let tag = tags.next()?;
    let (_, _, direction) = DIRECTIONS.iter().find(|(_, t, _)| *t == tag)?;
    let mut ctx = Context::default();
    for tag in tags {
        match tag {
            "Pinned" => ctx.memory = Some("pinned".to_string()),
            "Paged" => ctx.memory = Some("pageable".to_string()),
            "WriteCombined" => ctx.write_combined = true,
            _ => return None,
        }
    }
    let (mut bandwidth, mut size) = (None, None);
    for field in fields {
        let (name, value) = field.split_once('=')?;
        let mut tokens = value.split_whitespace();
        match name.trim() {
            "Bandwidth" => bandwidth = Some((number(tokens.next()?)?, tokens.next()?)),
            "Size" => size = Some(whole(tokens.next()?)?),
            "NumDevsUsed" => ctx.devices = Some(whole(tokens.next()?)?.to_string()),
            _ => {}
        }
    }
    let ((value, unit), size) = (bandwidth?, size?);
    Some(ctx.measure(size, value, unit, direction))
}
