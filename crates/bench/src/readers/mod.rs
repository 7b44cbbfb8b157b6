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
//! - [`chase::read`]: a pointer-chase latency curve, lines `size ns # label`;
//! - [`pytorch::read_matmul`]: PyTorch matmul lines (TFLOPS per size and dtype);
//! - [`pytorch::read_bandwidth`]: a PyTorch host↔device copy test, per-GPU sections;
//! - [`generic::read`]: lines `name value unit`.
//!
//! [`view`] reads what is not a benchmark but a fact of the guest: `numactl --hardware`,
//! `lscpu` and `/proc/meminfo` into a [`view::GuestView`].
//!
//! A figure an output prints more than once (five `bandwidthTest` runs in one file, two STREAM
//! tables) is marked with its [`Measure::repeat`]: repeats of one run, which [`collapse`]
//! turns into the run's figure by the tool's own rule ([`Tool::repeat_rule`]: STREAM's
//! best-of, the median for the others). [`facts`] keeps what an output says about how it ran
//! (`NCCL_*` settings, ranks, GPUs) apart from its measures.
//!
//! [`read_any`] recognises which tool wrote a text ([`detect`]) and reads it. Values and
//! units are kept as the tool printed them (no unit conversion), so a measure's key is
//! stable between runs of one tool version. No reader panics on any input: bad input is a
//! one-line [`ReadError`]. `docs/sources.md` ("Benchmark output readers") names where each
//! shape comes from.

pub mod bandwidth_test;
pub mod chase;
pub mod generic;
pub mod nccl;
pub mod nvbandwidth;
pub mod pytorch;
pub mod stream;
pub mod synth;
pub mod sysbench;
pub mod view;

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
    PointerChase,
    PytorchMatmul,
    PytorchBandwidth,
    Generic,
}

impl Tool {
    /// Every tool, in the order [`detect`] tries them.
    pub const ALL: [Tool; 10] = [
        Tool::NcclTests,
        Tool::Nvbandwidth,
        Tool::BandwidthTest,
        Tool::Stream,
        Tool::SysbenchMemory,
        Tool::SysbenchCpu,
        Tool::PytorchMatmul,
        Tool::PytorchBandwidth,
        Tool::PointerChase,
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
            Tool::PointerChase => "pointer-chase latency",
            Tool::PytorchMatmul => "PyTorch matmul",
            Tool::PytorchBandwidth => "PyTorch host↔device copy",
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
            Tool::PointerChase => "pointer-chase",
            Tool::PytorchMatmul => "pytorch-matmul",
            Tool::PytorchBandwidth => "pytorch-bandwidth",
            Tool::Generic => "generic",
        }
    }

    /// The tool whose [`Tool::id`] is `id`, if any.
    pub fn from_id(id: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.id() == id)
    }

    /// Reads `text` as this tool's output; a figure printed more than once is marked with
    /// its [`Measure::repeat`].
    pub fn read(self, text: &str) -> Result<Vec<Measure>, ReadError> {
        let mut out = match self {
            Tool::Stream => stream::read(text),
            Tool::SysbenchCpu => sysbench::read_cpu(text),
            Tool::SysbenchMemory => sysbench::read_memory(text),
            Tool::NcclTests => nccl::read(text),
            Tool::Nvbandwidth => nvbandwidth::read(text),
            Tool::BandwidthTest => bandwidth_test::read(text),
            Tool::PointerChase => chase::read(text),
            Tool::PytorchMatmul => pytorch::read_matmul(text),
            Tool::PytorchBandwidth => pytorch::read_bandwidth(text),
            Tool::Generic => generic::read(text),
        }?;
        mark_repeats(&mut out);
        Ok(out)
    }

    /// How repeats of one figure in one output make the run's figure: STREAM's own rule is
    /// best-of (its table is the best of NTIMES passes, so several tables keep the best rate
    /// and the least time); every other tool's is the median.
    pub fn repeat_rule(self) -> RepeatRule {
        match self {
            Tool::Stream => RepeatRule::Best,
            _ => RepeatRule::Median,
        }
    }
}

/// How the repeats of one figure in one output are made one figure (see [`collapse`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum RepeatRule {
    /// The highest rate, the lowest time.
    Best,
    Median,
}

impl RepeatRule {
    pub fn name(self) -> &'static str {
        match self {
            RepeatRule::Best => "best",
            RepeatRule::Median => "median",
        }
    }
}

/// Numbers each measure whose [`Measure::key`] occurs more than once in `measures` with
/// its 1-based [`Measure::repeat`], in order; a key printed once keeps `None`.
pub fn mark_repeats(measures: &mut [Measure]) {
    let mut counts: BTreeMap<String, u32> = BTreeMap::new();
    for m in measures.iter() {
        *counts.entry(m.key()).or_default() += 1;
    }
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    for m in measures.iter_mut() {
        let key = m.key();
        if counts.get(&key).copied().unwrap_or(0) > 1 {
            let n = seen.entry(key).or_default();
            *n += 1;
            m.repeat = Some(*n);
        } else {
            m.repeat = None;
        }
    }
}

/// One measure per key, in first-seen order: a repeated figure (several measures with one
/// key) becomes one by `rule` — the median, or the best (the highest rate; the lowest value
/// for a time unit) — with `repeat` cleared and a note saying how many and which rule.
pub fn collapse(measures: &[Measure], rule: RepeatRule) -> Vec<Measure> {
    let mut order: Vec<String> = Vec::new();
    let mut groups: BTreeMap<String, Vec<&Measure>> = BTreeMap::new();
    for m in measures {
        let key = m.key();
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push(m);
    }
    order
        .iter()
        .filter_map(|key| {
            let group = groups.get(key)?;
            let first = (*group.first()?).clone();
            if group.len() == 1 {
                return Some(first);
            }
            let values: Vec<f64> = group.iter().map(|m| m.value).collect();
            let lower = crate::stats::is_time_unit(&first.unit);
            let value = match rule {
                RepeatRule::Median => crate::stats::Summary::of(&values)?.median,
                RepeatRule::Best if lower => values.iter().copied().fold(f64::INFINITY, f64::min),
                RepeatRule::Best => values.iter().copied().fold(f64::NEG_INFINITY, f64::max),
            };
            let mut one = first;
            one.value = value;
            one.repeat = None;
            one.note = Some(format!(
                "{} of {} repeats in one output",
                rule.name(),
                group.len()
            ));
            Some(one)
        })
        .collect()
}

/// What an output says about how it ran, apart from its measures: nccl-tests' `NCCL_*`
/// settings, its rank and GPU counts; a PyTorch copy test's GPU count; how many times a
/// figure was repeated. Keys are `NCCL_…` or lower-case words; empty when there is nothing.
pub fn facts(tool: Tool, text: &str, measures: &[Measure]) -> BTreeMap<String, String> {
    let mut out = match tool {
        Tool::NcclTests => nccl::facts(text),
        Tool::PytorchBandwidth => pytorch::facts(text),
        _ => BTreeMap::new(),
    };
    if let Some(n) = measures.iter().filter_map(|m| m.repeat).max() {
        out.insert("repeats".to_string(), n.to_string());
    }
    out
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
    /// The figure's place among the repeats of one output (1-based) when the output printed
    /// it more than once (five `bandwidthTest` runs in one file); not part of the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repeat: Option<u32>,
    /// What the output said about the figure that is not a coordinate (a latency curve
    /// point's `# label`), or how repeats were made one figure; not part of the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
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
            repeat: None,
            note: None,
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
         bandwidthTest table, PyTorch matmul or copy lines, a `size ns` latency curve, or \
         `name value unit` lines"
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
pub(crate) fn excerpt(line: &str) -> String {
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
/// recognised but `name value unit` lines are there (and the text is not a guest-view file,
/// [`view::detect`]); `None` otherwise.
pub fn detect(text: &str) -> Option<Tool> {
    let mut seen = [false; Tool::ALL.len()];
    for line in text.lines() {
        for (i, tool) in Tool::ALL.into_iter().enumerate() {
            if !seen[i] && signature(tool, line) {
                seen[i] = true;
            }
        }
    }
    // shapes without a line of their own: the whole text tells
    for (i, tool) in Tool::ALL.into_iter().enumerate() {
        seen[i] |= match tool {
            Tool::PytorchBandwidth => pytorch::looks_like_bandwidth(text),
            Tool::PointerChase => chase::looks_like(text),
            _ => false,
        };
    }
    if let Some(i) = seen.iter().position(|&s| s) {
        return Some(Tool::ALL[i]);
    }
    // `/proc/meminfo`'s `Name: N kB` lines are facts of the guest (`view`), not figures
    if view::detect(text).is_some() {
        return None;
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
        Tool::PytorchMatmul => pytorch::matmul_line(t).is_some(),
        Tool::PytorchBandwidth | Tool::PointerChase | Tool::Generic => false,
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
