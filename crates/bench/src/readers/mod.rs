//! Readers of benchmark programs' text output: what a user's `--run NAME='cmd'` printed,
//! turned into [`Measure`]s.
//!
//! One reader per tool, each a pure function `&str -> Result<Vec<Measure>, ReadError>`:
//! - [`stream::read`]: STREAM's `Function … Rate …` table (stream.c 5.10's `Best Rate MB/s`,
//!   5.9 and earlier's `Rate (MB/s)`, stream.f's);
//! - [`sysbench::read_cpu`], [`sysbench::read_memory`]: sysbench 1.0.x `cpu` and `memory`
//!   (and the `Throughput:` wording of later builds);
//! - [`nccl::read`]: nccl-tests' `size count type … time algbw busbw #wrong` table and
//!   `Avg bus bandwidth` line, every column layout the tests have printed since 2017;
//! - [`nvbandwidth::read`]: nvbandwidth's matrices and `SUM` / `&&&& PERF` lines;
//! - [`bandwidth_test::read`]: the CUDA samples' `bandwidthTest`, readable (GB/s or MB/s)
//!   and `--csv` output;
//! - [`generic::read`]: lines `name value unit`.
//!
//! [`read_any`] recognises which tool wrote a text ([`detect`]) and reads it. Values and
//! units are kept as the tool printed them (no unit conversion), so a measure's key is
//! stable between runs of one tool version. No reader panics on any input: bad input is a
//! one-line [`ReadError`]. `docs/sources.md` ("Benchmark output readers") names where each
//! shape comes from.

pub mod bandwidth_test;
pub mod generic;
pub mod nccl;
pub mod nvbandwidth;
pub mod stream;
pub mod synth;
pub mod sysbench;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// The programs whose output is read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Tool {
    Stream,
    SysbenchCpu,
    SysbenchMemory,
    NcclTests,
    Nvbandwidth,
    BandwidthTest,
    Generic,
}

impl Tool {
    /// Every tool, in the order [`detect`] tries them.
    pub const ALL: [Tool; 7] = [
        Tool::NcclTests,
        Tool::Nvbandwidth,
        Tool::BandwidthTest,
        Tool::Stream,
        Tool::SysbenchMemory,
        Tool::SysbenchCpu,
        Tool::Generic,
    ];

    /// The tool's name as written in errors and by `Display`: `STREAM`, `sysbench cpu`, …
    pub fn name(self) -> &'static str {
        match self {
            Tool::Stream => "STREAM",
            Tool::SysbenchCpu => "sysbench cpu",
            Tool::SysbenchMemory => "sysbench memory",
            Tool::NcclTests => "nccl-tests",
            Tool::Nvbandwidth => "nvbandwidth",
            Tool::BandwidthTest => "bandwidthTest",
            Tool::Generic => "generic",
        }
    }

    /// The tool's identifier (as serialized): `stream`, `sysbench-cpu`, `nccl-tests`, …
    pub fn id(self) -> &'static str {
        match self {
            Tool::Stream => "stream",
            Tool::SysbenchCpu => "sysbench-cpu",
            Tool::SysbenchMemory => "sysbench-memory",
            Tool::NcclTests => "nccl-tests",
            Tool::Nvbandwidth => "nvbandwidth",
            Tool::BandwidthTest => "bandwidth-test",
            Tool::Generic => "generic",
        }
    }

    /// The tool whose [`Tool::id`] is `id`, if any.
    pub fn from_id(id: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.id() == id)
    }

    /// Reads `text` as this tool's output.
    pub fn read(self, text: &str) -> Result<Vec<Measure>, ReadError> {
        match self {
            Tool::Stream => stream::read(text),
            Tool::SysbenchCpu => sysbench::read_cpu(text),
            Tool::SysbenchMemory => sysbench::read_memory(text),
            Tool::NcclTests => nccl::read(text),
            Tool::Nvbandwidth => nvbandwidth::read(text),
            Tool::BandwidthTest => bandwidth_test::read(text),
            Tool::Generic => generic::read(text),
        }
    }
}

impl fmt::Display for Tool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// One number a benchmark printed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measure {
    /// The program or suite: `stream`, `sysbench-cpu`, `nccl-tests`, `nvbandwidth`,
    /// `bandwidthTest`, `generic`.
    pub benchmark: String,
    /// What was measured, snake_case: `triad`, `events_per_second`, `busbw`,
    /// `host_to_device_memcpy_ce`, `bandwidth`, or a generic line's name.
    pub metric: String,
    pub value: f64,
    /// The unit as the tool printed it: `MB/s`, `GB/s`, `MiB/s`, `us`, `ms`, `s`, `ns`, …
    pub unit: String,
    /// Message or transfer size in bytes, where the tool measures per size.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size_bytes: Option<u64>,
    /// The row's other coordinates: `direction`, `placement`, `type`, `row`, `column`, …
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub params: BTreeMap<String, String>,
}

impl Measure {
    /// A measure without size or parameters.
    pub fn new(benchmark: &str, metric: &str, value: f64, unit: &str) -> Measure {
        Measure {
            benchmark: benchmark.to_string(),
            metric: metric.to_string(),
            value,
            unit: unit.to_string(),
            size_bytes: None,
            params: BTreeMap::new(),
        }
    }

    /// The same measure at `bytes`.
    pub fn with_size(mut self, bytes: u64) -> Measure {
        self.size_bytes = Some(bytes);
        self
    }

    /// The same measure with parameter `key` set to `value`.
    pub fn with_param(mut self, key: &str, value: &str) -> Measure {
        self.params.insert(key.to_string(), value.to_string());
        self
    }

    /// The value of parameter `key`, if set.
    pub fn param(&self, key: &str) -> Option<&str> {
        self.params.get(key).map(String::as_str)
    }

    /// A name that tells this measure from every other of the same run: the benchmark, the
    /// metric, the size and the parameters, dotted — `nccl-tests.busbw.size=1048576.placement=in-place`.
    pub fn key(&self) -> String {
        let mut key = format!("{}.{}", self.benchmark, self.metric);
        if let Some(bytes) = self.size_bytes {
            key.push_str(&format!(".size={bytes}"));
        }
        for (k, v) in &self.params {
            key.push_str(&format!(".{k}={v}"));
        }
        key
    }
}

/// Why a text could not be read. Always one line.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ReadError {
    #[error(
        "no known benchmark output: expected a STREAM, sysbench, nccl-tests, nvbandwidth or \
         bandwidthTest table, or `name value unit` lines"
    )]
    Unrecognised,
    #[error("{tool}: no {what} found")]
    Missing { tool: Tool, what: String },
    #[error("{tool}: line {line}: {why}: `{text}`")]
    BadLine {
        tool: Tool,
        /// 1-based line number in the text.
        line: usize,
        why: String,
        /// The line, shortened and with control characters escaped.
        text: String,
    },
}

impl ReadError {
    pub(crate) fn missing(tool: Tool, what: &str) -> ReadError {
        ReadError::Missing {
            tool,
            what: what.to_string(),
        }
    }

    /// `why` about line `index` (0-based) whose text is `line`.
    pub(crate) fn bad_line(tool: Tool, index: usize, line: &str, why: &str) -> ReadError {
        ReadError::BadLine {
            tool,
            line: index + 1,
            why: why.to_string(),
            text: excerpt(line),
        }
    }
}

/// At most 80 characters of `line`, trimmed, control characters escaped (so an error stays
/// one line whatever the input held).
fn excerpt(line: &str) -> String {
    const MAX: usize = 80;
    let trimmed = line.trim();
    let mut out: String = trimmed
        .chars()
        .take(MAX)
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect();
    if trimmed.chars().nth(MAX).is_some() {
        out.push('…');
    }
    out
}

/// Which tool wrote `text`, by the lines only that tool prints; `Generic` when none is
/// recognised but `name value unit` lines are there; `None` otherwise.
pub fn detect(text: &str) -> Option<Tool> {
    let mut seen = [false; 7];
    for line in text.lines() {
        for (i, tool) in Tool::ALL.into_iter().enumerate() {
            if !seen[i] && signature(tool, line) {
                seen[i] = true;
            }
        }
    }
    if let Some(i) = seen.iter().position(|&s| s) {
        return Some(Tool::ALL[i]);
    }
    generic::read(text).ok().map(|_| Tool::Generic)
}

/// Whether `line` is one only `tool` prints (`Generic` has none).
fn signature(tool: Tool, line: &str) -> bool {
    let t = line.trim();
    match tool {
        Tool::NcclTests => nccl::is_header(t) || nccl::avg_busbw(t).is_some(),
        Tool::Nvbandwidth => t.starts_with("nvbandwidth Version") || nvbandwidth::is_description(t),
        Tool::BandwidthTest => {
            t.contains("Transfer Size (Bytes)")
                || t.starts_with("[CUDA Bandwidth Test]")
                || bandwidth_test::is_csv_line(t)
        }
        Tool::Stream => stream::is_header(t) || t.starts_with("STREAM version"),
        Tool::SysbenchMemory => {
            t.starts_with("Running memory speed test")
                || t.starts_with("Total operations:")
                || t.starts_with("Operations performed:")
                || (t.contains(" transferred (") && t.ends_with("/sec)"))
        }
        Tool::SysbenchCpu => {
            t.starts_with("events per second:")
                || t.starts_with("Prime numbers limit:")
                || t == "CPU speed:"
        }
        Tool::Generic => false,
    }
}

/// Recognises which tool wrote `text` and reads it: the tool and its measures. A text
/// recognised as a tool's but not readable as it gives that tool's error.
pub fn read_any(text: &str) -> Result<(Tool, Vec<Measure>), ReadError> {
    let tool = detect(text).ok_or(ReadError::Unrecognised)?;
    tool.read(text).map(|measures| (tool, measures))
}

/// `token` as a finite number (`inf`, `NaN` and friends are not numbers here).
pub(crate) fn number(token: &str) -> Option<f64> {
    token.parse::<f64>().ok().filter(|v| v.is_finite())
}

/// `token` as a whole number of bytes, elements, …
pub(crate) fn whole(token: &str) -> Option<u64> {
    token.parse::<u64>().ok()
}
