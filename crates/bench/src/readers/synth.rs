//! Outputs written the way each tool writes them, from known values: the property tests'
//! inputs (a reader must give back exactly the values here, to the precision the tool
//! prints), and examples for anything that needs a tool's output without the tool.
//!
//! Each writer follows the tool's own `printf` formats (see `docs/sources.md`, "Benchmark
//! output readers"); a style picks the version or variant. Values are printed with the
//! precision noted on each field: pass values already rounded to it (`k / 10^d`) and the
//! reader returns them bit for bit.

use std::fmt::Write;

/// Joins `lines` with `\n`, or `\r\n` when `crlf` (a Windows guest's output).
fn join(lines: &[String], crlf: bool) -> String {
    let mut text = lines.join(if crlf { "\r\n" } else { "\n" });
    text.push_str(if crlf { "\r\n" } else { "\n" });
    text
}

/// `name:` padded to 11 characters, as STREAM labels its rows.
fn stream_label(name: &str) -> String {
    format!("{:<11}", format!("{name}:"))
}

/// Which STREAM wrote the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamStyle {
    /// stream.c 5.10: `Best Rate MB/s`, rate `%12.1f`, times `%11.6f`.
    C510,
    /// stream.c 5.9 and earlier: `Rate (MB/s)`, all `%11.4f`.
    C59,
    /// stream.f: `Rate (MB/s)`, rate `f10.1`, times `f10.6`.
    Fortran,
}

impl StreamStyle {
    pub const ALL: [StreamStyle; 3] = [StreamStyle::C510, StreamStyle::C59, StreamStyle::Fortran];

    /// Decimals printed for (rate, times).
    pub fn decimals(self) -> (usize, usize) {
        match self {
            StreamStyle::C510 | StreamStyle::Fortran => (1, 6),
            StreamStyle::C59 => (4, 4),
        }
    }
}

/// A STREAM run's output: `rows[k]` = best rate (MB/s), avg, min, max time (s) of kernel
/// `k` (Copy, Scale, Add, Triad).
pub fn stream(style: StreamStyle, rows: &[[f64; 4]; 4], crlf: bool) -> String {
    let hline = "-".repeat(61);
    let mut lines = vec![
        hline.clone(),
        "STREAM version $Revision: 5.10 $".to_string(),
        hline.clone(),
        "Array size = 10000000 (elements), Offset = 0 (elements)".to_string(),
        "Each kernel will be executed 10 times.".to_string(),
        hline.clone(),
    ];
    lines.push(
        match style {
            StreamStyle::C510 => "Function    Best Rate MB/s  Avg time     Min time     Max time",
            StreamStyle::C59 => "Function      Rate (MB/s)   Avg time     Min time     Max time",
            StreamStyle::Fortran => "Function     Rate (MB/s)  Avg time   Min time  Max time",
        }
        .to_string(),
    );
    for (name, r) in super::stream::KERNELS.iter().zip(rows) {
        let label = stream_label(name);
        lines.push(match style {
            StreamStyle::C510 => format!(
                "{label}{:12.1}  {:11.6}  {:11.6}  {:11.6}",
                r[0], r[1], r[2], r[3]
            ),
            StreamStyle::C59 => format!(
                "{label}{:11.4}  {:11.4}  {:11.4}  {:11.4}",
                r[0], r[1], r[2], r[3]
            ),
            StreamStyle::Fortran => format!(
                "{label}{:10.1}  {:10.6}  {:10.6}  {:10.6}  ",
                r[0], r[1], r[2], r[3]
            ),
        });
    }
    lines.push(hline.clone());
    lines.push(
        "Solution Validates: avg error less than 1.000000e-13 on all three arrays".to_string(),
    );
    lines.push(hline);
    join(&lines, crlf)
}

/// Which sysbench wrote the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SysbenchStyle {
    /// 1.0.0–1.0.4: no `events per second` for cpu, `Operations performed: N (X ops/sec)`
    /// for memory, latencies `%10.2f` after a wide gap.
    V1_0_0,
    /// 1.0.8–1.0.12: `events per second`, `Total operations: N (X per second)`.
    V1_0_8,
    /// 1.0.13–1.0.20: latencies `%39.2f`.
    V1_0_13,
    /// Later development builds: `Throughput:` with `events/s (eps)` and `time elapsed`.
    Throughput,
}

impl SysbenchStyle {
    pub const ALL: [SysbenchStyle; 4] = [
        SysbenchStyle::V1_0_0,
        SysbenchStyle::V1_0_8,
        SysbenchStyle::V1_0_13,
        SysbenchStyle::Throughput,
    ];
}

/// The statistics every sysbench test prints.
#[derive(Debug, Clone, PartialEq)]
pub struct SysbenchStats {
    /// Seconds, 4 decimals.
    pub total_time: f64,
    pub total_events: u64,
    /// min, avg, max, percentile, sum in ms, 2 decimals.
    pub latency: [f64; 5],
    /// The percentile reported; 0: `percentile stats: disabled`.
    pub percentile: u32,
    /// Events avg (4 decimals) / stddev (2), execution time avg (4) / stddev (2).
    pub fairness: [f64; 4],
}

/// The statistics' lines.
fn sysbench_stats(style: SysbenchStyle, s: &SysbenchStats) -> Vec<String> {
    let mut lines = Vec::new();
    if style == SysbenchStyle::Throughput {
        lines.push("Throughput:".to_string());
        let eps = s.total_events as f64 / s.total_time;
        lines.push(format!("    events/s (eps):                      {eps:.4}"));
        lines.push(format!(
            "    time elapsed:                        {:.4}s",
            s.total_time
        ));
    } else {
        lines.push("General statistics:".to_string());
        lines.push(format!(
            "    total time:                          {:.4}s",
            s.total_time
        ));
    }
    lines.push(format!(
        "    total number of events:              {}",
        s.total_events
    ));
    lines.push(String::new());
    lines.push("Latency (ms):".to_string());
    let latency = |label: &str, v: f64| match style {
        SysbenchStyle::V1_0_0 | SysbenchStyle::V1_0_8 => {
            format!("         {:<32}{v:10.2}", format!("{label}:"))
        }
        _ => format!("         {label}: {v:39.2}"),
    };
    lines.push(latency("min", s.latency[0]));
    lines.push(latency("avg", s.latency[1]));
    lines.push(latency("max", s.latency[2]));
    if s.percentile == 0 {
        lines.push("         percentile stats:               disabled".to_string());
    } else if matches!(style, SysbenchStyle::V1_0_0 | SysbenchStyle::V1_0_8) {
        lines.push(format!(
            "        {:3}th percentile:                {:10.2}",
            s.percentile, s.latency[3]
        ));
    } else {
        lines.push(format!(
            "        {:3}th percentile: {:27.2}",
            s.percentile, s.latency[3]
        ));
    }
    lines.push(latency("sum", s.latency[4]));
    lines.push(String::new());
    lines.push("Threads fairness:".to_string());
    let f = &s.fairness;
    lines.push(format!(
        "    events (avg/stddev):           {:.4}/{:3.2}",
        f[0], f[1]
    ));
    lines.push(format!(
        "    execution time (avg/stddev):   {:.4}/{:3.2}",
        f[2], f[3]
    ));
    lines.push(String::new());
    lines
}

/// The lines sysbench prints before a test's results.
fn sysbench_preamble(threads: u32) -> Vec<String> {
    vec![
        "sysbench 1.0.20 (using system LuaJIT 2.1.0-beta3)".to_string(),
        String::new(),
        "Running the test with following options:".to_string(),
        format!("Number of threads: {threads}"),
        "Initializing random number generator from current time".to_string(),
        String::new(),
    ]
}

/// A `sysbench cpu` report; `events_per_second` has 2 decimals (not printed by V1_0_0).
pub fn sysbench_cpu(style: SysbenchStyle, events_per_second: f64, stats: &SysbenchStats) -> String {
    let mut lines = sysbench_preamble(4);
    lines.extend([
        "Prime numbers limit: 10000".to_string(),
        String::new(),
        "Initializing worker threads...".to_string(),
        String::new(),
        "Threads started!".to_string(),
        String::new(),
    ]);
    if style != SysbenchStyle::V1_0_0 {
        lines.push("CPU speed:".to_string());
        lines.push(format!("    events per second: {events_per_second:8.2}"));
        lines.push(String::new());
    }
    lines.extend(sysbench_stats(style, stats));
    join(&lines, false)
}

/// What `sysbench memory` prints of its own.
#[derive(Debug, Clone, PartialEq)]
pub struct SysbenchMemory {
    pub operations: u64,
    /// 2 decimals.
    pub operations_per_second: f64,
    /// MiB, 2 decimals.
    pub transferred: f64,
    /// MiB/s, 2 decimals.
    pub rate: f64,
}

/// A `sysbench memory` report.
pub fn sysbench_memory(
    style: SysbenchStyle,
    mem: &SysbenchMemory,
    stats: &SysbenchStats,
) -> String {
    let mut lines = sysbench_preamble(2);
    lines.extend([
        "Running memory speed test with the following options:".to_string(),
        "  block size: 1KiB".to_string(),
        "  total size: 102400MiB".to_string(),
        "  operation: write".to_string(),
        "  scope: global".to_string(),
        String::new(),
        "Initializing worker threads...".to_string(),
        String::new(),
        "Threads started!".to_string(),
        String::new(),
    ]);
    lines.push(if style == SysbenchStyle::V1_0_0 {
        format!(
            "Operations performed: {} ({:8.2} ops/sec)",
            mem.operations, mem.operations_per_second
        )
    } else {
        format!(
            "Total operations: {} ({:8.2} per second)",
            mem.operations, mem.operations_per_second
        )
    });
    lines.push(String::new());
    lines.push(format!(
        "{:4.2} MiB transferred ({:4.2} MiB/sec)",
        mem.transferred, mem.rate
    ));
    lines.push(String::new());
    lines.push(String::new());
    lines.extend(sysbench_stats(style, stats));
    join(&lines, false)
}

/// Which nccl-tests wrote the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NcclStyle {
    /// 2017: `bytes N type op`, time in ms `%7.3f`, bandwidths `%5.2f`, `res` `N/A`.
    V2017,
    /// 2019–2022 all_reduce: `size count type redop`, `error` column.
    V2019,
    /// 2019–2022 all_gather: `size count type`.
    V2019NoRedop,
    /// 2022 on: `size count type redop root`, `#wrong` a count.
    V2022,
    /// 2022 on with `-c 0`: `#wrong` is `N/A`.
    V2022Unchecked,
    /// 2024–2025 copy overlap: a `copybw` column in each half.
    CopyBw,
    /// 2026 `-I 1`: per-iteration columns in each half.
    PerIter,
    /// `-S 1`: a timestamp after each row.
    Timestamps,
}

impl NcclStyle {
    pub const ALL: [NcclStyle; 8] = [
        NcclStyle::V2017,
        NcclStyle::V2019,
        NcclStyle::V2019NoRedop,
        NcclStyle::V2022,
        NcclStyle::V2022Unchecked,
        NcclStyle::CopyBw,
        NcclStyle::PerIter,
        NcclStyle::Timestamps,
    ];

    /// Whether rows have a `redop` (`op`) column.
    pub fn has_redop(self) -> bool {
        self != NcclStyle::V2019NoRedop
    }

    /// Whether rows have a `root` column.
    pub fn has_root(self) -> bool {
        !matches!(
            self,
            NcclStyle::V2017 | NcclStyle::V2019 | NcclStyle::V2019NoRedop
        )
    }

    /// The half's columns read as measures, in order.
    pub fn metrics(self) -> &'static [&'static str] {
        match self {
            NcclStyle::CopyBw => &["time", "algbw", "busbw", "copybw"],
            NcclStyle::PerIter => &[
                "time", "algbw", "busbw", "iter_min", "iter_max", "iter_p99", "iter_cv",
            ],
            _ => &["time", "algbw", "busbw"],
        }
    }
}

/// One row of an nccl-tests table.
#[derive(Debug, Clone, PartialEq)]
pub struct NcclRow {
    pub size: u64,
    pub count: u64,
    pub dtype: String,
    pub redop: String,
    pub root: i32,
    /// Out-of-place then in-place: the values of [`NcclStyle::metrics`], 2 decimals (time 3
    /// decimals in V2017), each below 1000.
    pub halves: [Vec<f64>; 2],
}

/// The header lines of a table in `style`.
fn nccl_header(style: NcclStyle) -> Vec<String> {
    let lead = match style {
        NcclStyle::V2017 => format!("# {:>10}  {:>12}  {:>6}  {:>6}", "bytes", "N", "type", "op"),
        NcclStyle::V2019 => format!(
            "# {:>10}  {:>12}  {:>8}  {:>6}",
            "size", "count", "type", "redop"
        ),
        NcclStyle::V2019NoRedop => format!("# {:>10}  {:>12}  {:>8}", "size", "count", "type"),
        _ => format!(
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}",
            "size", "count", "type", "redop", "root"
        ),
    };
    let wrong = match style {
        NcclStyle::V2017 => "res",
        NcclStyle::V2019 | NcclStyle::V2019NoRedop => "error",
        _ => "#wrong",
    };
    let mut half = format!("  {:>7}  {:>6}  {:>6}", "time", "algbw", "busbw");
    if style == NcclStyle::CopyBw {
        half.push_str(&format!(" {:>6}", "copybw"));
    }
    half.push_str(&format!(" {wrong:>6}"));
    if style == NcclStyle::PerIter {
        half.push_str(&format!(
            "  {:>7}  {:>7}  {:>7}  {:>7}",
            "i_min", "i_max", "i_p99", "i_cv%"
        ));
    }
    let stamp = if style == NcclStyle::Timestamps {
        " timestamp"
    } else {
        ""
    };
    let mut lines = vec![
        format!(
            "# {:>10}  {:>12}  {:>8}           out-of-place                       in-place",
            "", "", ""
        ),
        format!("{lead}{half}{half}{stamp}"),
    ];
    // The units line came with the 2019 layout.
    if style != NcclStyle::V2017 {
        lines.push(format!(
            "# {:>10}  {:>12}  {:>8}  {:>6}  {:>6}  {:>7}  {:>6}  {:>6}",
            "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)"
        ));
    }
    lines
}

/// One result row in `style`.
fn nccl_row(style: NcclStyle, r: &NcclRow) -> String {
    let mut line = match style {
        NcclStyle::V2017 => format!(
            "{:12}  {:12}  {:>6}  {:>6}",
            r.size, r.count, r.dtype, r.redop
        ),
        NcclStyle::V2019 => format!(
            "{:12}  {:12}  {:>8}  {:>6}",
            r.size, r.count, r.dtype, r.redop
        ),
        NcclStyle::V2019NoRedop => format!("{:12}  {:12}  {:>8}", r.size, r.count, r.dtype),
        _ => format!(
            "{:12}  {:12}  {:>8}  {:>6}  {:>6}",
            r.size, r.count, r.dtype, r.redop, r.root
        ),
    };
    for half in &r.halves {
        let v = |i: usize| half.get(i).copied().unwrap_or(0.0);
        match style {
            NcclStyle::V2017 => {
                let _ = write!(line, "  {:7.3}  {:5.2}  {:5.2}  \tN/A", v(0), v(1), v(2));
            }
            NcclStyle::V2019 | NcclStyle::V2019NoRedop => {
                let _ = write!(line, "  {:7.2}  {:6.2}  {:6.2}  0e+00", v(0), v(1), v(2));
            }
            NcclStyle::V2022Unchecked => {
                let _ = write!(line, "  {:7.2}  {:6.2}  {:6.2}    N/A", v(0), v(1), v(2));
            }
            NcclStyle::CopyBw => {
                let _ = write!(
                    line,
                    "  {:7.2}  {:6.2}  {:6.2}  {:6.2}     0",
                    v(0),
                    v(1),
                    v(2),
                    v(3)
                );
            }
            NcclStyle::PerIter => {
                let _ = write!(line, "  {:7.2}  {:6.2}  {:6.2}       0", v(0), v(1), v(2));
                let _ = write!(
                    line,
                    "  {:7.2}  {:7.2}  {:7.2}  {:7.2}",
                    v(3),
                    v(4),
                    v(5),
                    v(6)
                );
            }
            NcclStyle::V2022 | NcclStyle::Timestamps => {
                let _ = write!(line, "  {:7.2}  {:6.2}  {:6.2}       0", v(0), v(1), v(2));
            }
        }
    }
    if style == NcclStyle::Timestamps {
        line.push_str("  2025-06-01 12:00:00");
    }
    line
}

/// An nccl-tests run's output: the preamble, one table of `rows`, and the footer with
/// `avg_busbw` (written with Rust's shortest form, as `%g` writes short values). The
/// `# Collective test starting:` line is written when `collective` is given.
pub fn nccl(
    style: NcclStyle,
    collective: Option<&str>,
    rows: &[NcclRow],
    avg_busbw: f64,
) -> String {
    let mut lines = Vec::new();
    if let Some(name) = collective {
        lines.push("# nccl-tests version 2.17.1 nccl-headers=22703 nccl-library=22703".to_string());
        lines.push(format!("# Collective test starting: {name}"));
    }
    lines.push("# nThread 1 nGpus 2 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 iters: 20 agg iters: 1 validation: 1 graph: 0".to_string());
    lines.push("#".to_string());
    lines.push("# Using devices".to_string());
    lines.push(
        "#  Rank  0 Group  0 Pid   4242 on      guest device  0 [0000:06:00] NVIDIA RTX A4000"
            .to_string(),
    );
    lines.push(
        "#  Rank  1 Group  0 Pid   4242 on      guest device  1 [0000:07:00] NVIDIA RTX A4000"
            .to_string(),
    );
    lines.push("#".to_string());
    lines.extend(nccl_header(style));
    lines.extend(rows.iter().map(|r| nccl_row(style, r)));
    if style == NcclStyle::V2017 {
        lines.push(" Out of bounds values : 0 OK".to_string());
        lines.push(format!(" Avg bus bandwidth    : {avg_busbw} "));
    } else {
        lines.push("# Out of bounds values : 0 OK".to_string());
        lines.push(format!("# Avg bus bandwidth    : {avg_busbw} "));
    }
    lines.push("#".to_string());
    if let Some(name) = collective {
        lines.push(format!("# Collective test concluded: {name}"));
    }
    join(&lines, false)
}

/// Which nvbandwidth wrote the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NvbandwidthStyle {
    /// v0.1: row labels unpadded (until v0.4), no `N/A` (missing cells written as 0.00).
    V0_1,
    /// v0.5 on: row labels `setw(2)`, missing cells `N/A`.
    V0_8,
    /// v0.8 with `--perfFormatter`: `&&&& PERF <key> <sum> +GB/s`.
    Perf,
}

impl NvbandwidthStyle {
    pub const ALL: [NvbandwidthStyle; 3] = [
        NvbandwidthStyle::V0_1,
        NvbandwidthStyle::V0_8,
        NvbandwidthStyle::Perf,
    ];
}

/// One nvbandwidth matrix.
#[derive(Debug, Clone, PartialEq)]
pub struct NvMatrix {
    /// The test case (`Running <test>.`).
    pub test: String,
    /// The description line, e.g. `memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)`.
    pub description: String,
    /// Rows of cells, 2 decimals; `None` = no value (`N/A`, or 0.00 in V0_1).
    pub cells: Vec<Vec<Option<f64>>>,
}

impl NvMatrix {
    /// The sum nvbandwidth prints under the matrix.
    pub fn sum(&self) -> f64 {
        self.cells.iter().flatten().flatten().sum()
    }
}

/// An nvbandwidth run's output with `matrices`, one test each.
pub fn nvbandwidth(style: NvbandwidthStyle, matrices: &[NvMatrix]) -> String {
    let mut lines = vec![
        "nvbandwidth Version: v0.8".to_string(),
        "Built from Git version: v0.8".to_string(),
        String::new(),
        "CUDA Runtime Version: 12080".to_string(),
        "CUDA Driver Version: 12080".to_string(),
        "Driver Version: 570.124.06".to_string(),
        String::new(),
        "Device 0: NVIDIA RTX A4000 (00000000:06:00)".to_string(),
        String::new(),
    ];
    for m in matrices {
        lines.push(format!("Running {}.", m.test));
        lines.push(m.description.clone());
        let columns = m.cells.first().map_or(0, Vec::len);
        let pad = if style == NvbandwidthStyle::V0_1 {
            " "
        } else {
            "  "
        };
        let header: String = (0..columns).map(|c| format!("{c:>10}")).collect();
        lines.push(format!("{pad}{header}"));
        for (r, row) in m.cells.iter().enumerate() {
            let mut line = if style == NvbandwidthStyle::V0_1 {
                format!("{r}")
            } else {
                format!("{r:>2}")
            };
            for cell in row {
                match (cell, style) {
                    (Some(v), _) => line.push_str(&format!("{v:>10.2}")),
                    (None, NvbandwidthStyle::V0_1) => line.push_str(&format!("{:>10.2}", 0.0)),
                    (None, _) => line.push_str(&format!("{:>10}", "N/A")),
                }
            }
            lines.push(line);
        }
        lines.push(String::new());
        if style == NvbandwidthStyle::Perf {
            let unit = if m.description.ends_with("(ns)") {
                "-ns"
            } else {
                "+GB/s"
            };
            lines.push(format!("&&&& PERF {} {:.2} {unit}", m.test, m.sum()));
        } else {
            lines.push(format!("SUM {} {:.2}", m.test, m.sum()));
        }
        lines.push(String::new());
    }
    lines.push(
        "NOTE: The reported results may not reflect the full capabilities of the platform."
            .to_string(),
    );
    join(&lines, false)
}

/// Which `bandwidthTest` output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BandwidthTestStyle {
    /// CUDA 11 on: `Bandwidth(GB/s)`.
    ReadableGb,
    /// Before CUDA 11: `Bandwidth(MB/s)`.
    ReadableMb,
    /// `--csv`.
    Csv,
}

impl BandwidthTestStyle {
    pub const ALL: [BandwidthTestStyle; 3] = [
        BandwidthTestStyle::ReadableGb,
        BandwidthTestStyle::ReadableMb,
        BandwidthTestStyle::Csv,
    ];

    /// The bandwidth unit written.
    pub fn unit(self) -> &'static str {
        if self == BandwidthTestStyle::ReadableMb {
            "MB/s"
        } else {
            "GB/s"
        }
    }
}

/// One direction's results.
#[derive(Debug, Clone, PartialEq)]
pub struct BandwidthTable {
    /// 0: host to device, 1: device to host, 2: device to device.
    pub direction: usize,
    pub pinned: bool,
    pub write_combined: bool,
    pub devices: u32,
    /// (transfer size in bytes, bandwidth with 1 decimal).
    pub rows: Vec<(u32, f64)>,
}

/// A `bandwidthTest` run's output with `tables`.
pub fn bandwidth_test(style: BandwidthTestStyle, tables: &[BandwidthTable]) -> String {
    const KINDS: [(&str, &str); 3] = [
        ("Host to Device", "H2D"),
        ("Device to Host", "D2H"),
        ("Device to Device", "D2D"),
    ];
    let mut out = String::from("[CUDA Bandwidth Test] - Starting...\nRunning on...\n\n Device 0: NVIDIA RTX A4000\n Range Mode\n\n");
    for t in tables {
        let (kind, tag) = KINDS[t.direction.min(2)];
        if style == BandwidthTestStyle::Csv {
            let mut config = tag.to_string();
            if t.direction != 2 {
                config.push_str(if t.pinned { "-Pinned" } else { "-Paged" });
                if t.pinned && t.write_combined {
                    config.push_str("-WriteCombined");
                }
            }
            for (size, bw) in &t.rows {
                let seconds = f64::from(*size) / (bw * 1e9);
                let _ = writeln!(out, "bandwidthTest-{config}, Bandwidth = {bw:.1} GB/s, Time = {seconds:.5} s, Size = {size} bytes, NumDevsUsed = {}", t.devices);
            }
            continue;
        }
        let _ = writeln!(out, " {kind} Bandwidth, {} Device(s)", t.devices);
        let _ = writeln!(
            out,
            " {} Memory Transfers",
            if t.pinned { "PINNED" } else { "PAGEABLE" }
        );
        if t.write_combined {
            out.push_str(" Write-Combined Memory Writes are Enabled");
        }
        let _ = writeln!(out, "   Transfer Size (Bytes)\tBandwidth({})", style.unit());
        for (size, bw) in &t.rows {
            let tab = if *size < 10000 { "\t" } else { "" };
            let _ = writeln!(out, "   {size}\t\t\t{tab}{bw:.1}");
        }
        out.push('\n');
    }
    out.push_str("Result = PASS\n");
    out
}

/// `name value unit` lines, each with `gap` between the words (spaces or tabs), among
/// other lines that are not results.
pub fn generic(results: &[(String, f64, String)], gap: &str) -> String {
    let mut out = String::from("== model benchmark ==\nwarming up (3 iterations)\n");
    for (name, value, unit) in results {
        let _ = writeln!(out, "{name}{gap}{value}{gap}{unit}");
        out.push_str("# done\n");
    }
    out.push_str("all done in 12.5 s total\n");
    out
}

/// How a pointer-chase curve writes its sizes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeStyle {
    /// `4096`.
    Bytes,
    /// `4K`, `1M`, `2G` (the largest unit that divides the size; bytes otherwise).
    Short,
    /// `4KiB`, `1MiB`.
    Iec,
}

impl SizeStyle {
    pub const ALL: [SizeStyle; 3] = [SizeStyle::Bytes, SizeStyle::Short, SizeStyle::Iec];

    /// `bytes` written in this style.
    pub fn write(self, bytes: u64) -> String {
        const UNITS: [(u32, &str, &str); 3] =
            [(30, "G", "GiB"), (20, "M", "MiB"), (10, "K", "KiB")];
        if self != SizeStyle::Bytes {
            for (shift, short, iec) in UNITS {
                if bytes > 0 && bytes.is_multiple_of(1u64 << shift) {
                    let unit = if self == SizeStyle::Short { short } else { iec };
                    return format!("{}{unit}", bytes >> shift);
                }
            }
        }
        bytes.to_string()
    }
}

/// A pointer-chase curve (the r/VFIO pinning study runner's `size ns # label` lines): one
/// line per point, ns with 2 decimals, the label after `#` when given.
pub fn chase(style: SizeStyle, points: &[(u64, f64, Option<String>)]) -> String {
    let mut out = String::from(
        "# pointer chase: dependent loads, 64 B stride, random cycle\n# size ns # level\n",
    );
    for (bytes, ns, label) in points {
        let _ = write!(out, "{} {ns:.2}", style.write(*bytes));
        if let Some(l) = label {
            let _ = write!(out, " # {l}");
        }
        out.push('\n');
    }
    out
}

/// How a PyTorch matmul script prints its lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatmulStyle {
    /// `matmul n=8192 dtype=torch.float16: 152.31 TFLOPS`
    KeyValue,
    /// `matmul 8192x8192 bf16 152.31 TFLOPS`
    Dims,
    /// `[matmul] size=8192 dtype=float16 TFLOPS=152.31`
    Trailing,
}

impl MatmulStyle {
    pub const ALL: [MatmulStyle; 3] = [
        MatmulStyle::KeyValue,
        MatmulStyle::Dims,
        MatmulStyle::Trailing,
    ];
}

/// The dtypes [`matmul`] writes, as (PyTorch's name, the short name the reader gives).
pub const MATMUL_DTYPES: [(&str, &str); 4] = [
    ("float16", "fp16"),
    ("bfloat16", "bf16"),
    ("float32", "fp32"),
    ("float64", "fp64"),
];

/// A matmul script's output: `rows` = (n, index into [`MATMUL_DTYPES`], TFLOPS with 2
/// decimals).
pub fn matmul(style: MatmulStyle, rows: &[(u64, usize, f64)]) -> String {
    let mut out = String::from("torch 2.5.1+cu124, CUDA 12.4, device NVIDIA GeForce RTX 4090\nwarmup: 10 iterations, timed: 50\n");
    for (n, d, tflops) in rows {
        let (name, short) = MATMUL_DTYPES[d % MATMUL_DTYPES.len()];
        let _ = match style {
            MatmulStyle::KeyValue => {
                writeln!(out, "matmul n={n} dtype=torch.{name}: {tflops:.2} TFLOPS")
            }
            MatmulStyle::Dims => writeln!(out, "matmul {n}x{n} {short} {tflops:.2} TFLOPS"),
            MatmulStyle::Trailing => {
                writeln!(out, "[matmul] size={n} dtype={name} TFLOPS={tflops:.2}")
            }
        };
    }
    out
}

/// How a PyTorch copy test heads its GPU sections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyStyle {
    /// `=== GPU 0: NVIDIA … ===`, lines `pinned   H2D: 24.61 GB/s`.
    Banner,
    /// `GPU 1:`, lines `  Host to Device (pinned, 256 MiB): 24.61 GB/s`.
    Plain,
    /// `[cuda:0] NVIDIA …`, lines `pageable D2H 11.87 GB/s`.
    Cuda,
}

impl CopyStyle {
    pub const ALL: [CopyStyle; 3] = [CopyStyle::Banner, CopyStyle::Plain, CopyStyle::Cuda];
}

/// One copy figure: direction (0 host to device, 1 device to host), pinned, GB/s (2
/// decimals).
pub type Copy = (usize, bool, f64);

/// A copy test's output: `Detected = N GPU(s)`, then per GPU its section and `copies`.
pub fn pytorch_copies(style: CopyStyle, gpus: &[Vec<Copy>]) -> String {
    let mut out = format!(
        "torch 2.5.1+cu124\nDetected = {} GPU(s)\ntransfer size 256 MiB, 20 iterations\n",
        gpus.len()
    );
    for (g, copies) in gpus.iter().enumerate() {
        let _ = match style {
            CopyStyle::Banner => writeln!(out, "=== GPU {g}: NVIDIA GeForce RTX 4090 ==="),
            CopyStyle::Plain => writeln!(out, "GPU {g}:"),
            CopyStyle::Cuda => writeln!(out, "[cuda:{g}] NVIDIA GeForce RTX 4090"),
        };
        for (dir, pinned, gbps) in copies {
            let mem = if *pinned { "pinned" } else { "pageable" };
            let _ = match style {
                CopyStyle::Banner => {
                    writeln!(out, "{mem:<8} {}: {gbps:.2} GB/s", ["H2D", "D2H"][dir % 2])
                }
                CopyStyle::Plain => writeln!(
                    out,
                    "  {} ({mem}, 256 MiB): {gbps:.2} GB/s",
                    ["Host to Device", "Device to Host"][dir % 2]
                ),
                CopyStyle::Cuda => {
                    writeln!(out, "{mem} {} {gbps:.2} GB/s", ["H2D", "D2H"][dir % 2])
                }
            };
        }
    }
    out
}

/// The lines nccl-tests and NCCL print before a table when `NCCL_*` variables are set and
/// `NCCL_DEBUG=INFO`: the runner's echo of each (`NCCL_P2P_DISABLE=1`) and NCCL's own `…
/// NCCL INFO NCCL_P2P_DISABLE set by environment to 1.`; put before [`nccl`]'s output.
pub fn nccl_env(env: &[(String, String)]) -> String {
    let mut out = String::new();
    for (k, v) in env {
        let _ = writeln!(out, "{k}={v}");
    }
    for (k, v) in env {
        let _ = writeln!(
            out,
            "guest:4242:4242 [0] NCCL INFO {k} set by environment to {v}."
        );
    }
    out
}

/// `numactl --hardware` (numactl 2.0.x): `nodes` = (CPUs, size MiB, free MiB), distances 10
/// on the diagonal, 20 elsewhere.
pub fn numactl_hardware(nodes: &[(Vec<u32>, u64, u64)]) -> String {
    let n = nodes.len();
    let mut out = if n == 1 {
        "available: 1 nodes (0)\n".to_string()
    } else {
        format!("available: {n} nodes (0-{})\n", n - 1)
    };
    for (i, (cpus, size, free)) in nodes.iter().enumerate() {
        let list: Vec<String> = cpus.iter().map(u32::to_string).collect();
        let _ = writeln!(out, "node {i} cpus: {}", list.join(" "));
        let _ = writeln!(out, "node {i} size: {size} MB");
        let _ = writeln!(out, "node {i} free: {free} MB");
    }
    out.push_str("node distances:\nnode ");
    for i in 0..n {
        let _ = write!(out, "{i:>3} ");
    }
    out.push('\n');
    for i in 0..n {
        let _ = write!(out, "{i:>3}: ");
        for j in 0..n {
            let _ = write!(out, "{:>3} ", if i == j { 10 } else { 20 });
        }
        out.push('\n');
    }
    out
}

/// `lscpu` (util-linux 2.38's layout, 41-column keys): the counts and each node's CPUs.
pub fn lscpu(sockets: u32, cores: u32, threads: u32, nodes: &[Vec<u32>]) -> String {
    let cpus = sockets * cores * threads;
    let field = |k: &str, v: &str| format!("{:<41}{v}\n", format!("{k}:"));
    let mut out = field("Architecture", "x86_64");
    out += &field("CPU op-mode(s)", "32-bit, 64-bit");
    out += &field("CPU(s)", &cpus.to_string());
    out += &field(
        "On-line CPU(s) list",
        &format!("0-{}", cpus.saturating_sub(1)),
    );
    out += &field("Vendor ID", "GenuineIntel");
    out += &field("Model name", "Intel(R) Xeon(R) Gold 6338 CPU @ 2.00GHz");
    out += &field("Thread(s) per core", &threads.to_string());
    out += &field("Core(s) per socket", &cores.to_string());
    out += &field("Socket(s)", &sockets.to_string());
    out += &field("Flags", "fpu vme de pse tsc msr pae mce");
    out += &field("NUMA node(s)", &nodes.len().to_string());
    for (i, cpus) in nodes.iter().enumerate() {
        let mut set = topo::CpuSet::new();
        cpus.iter().for_each(|c| set.insert(*c));
        out += &field(&format!("NUMA node{i} CPU(s)"), &set.to_list_string());
    }
    out
}

/// `/proc/meminfo` (Linux 6.x) with the hugepage lines: total, free, rsvd, surp (counts),
/// the page size (kB); `Hugetlb` = total × size.
pub fn meminfo(total: u64, free: u64, rsvd: u64, surp: u64, size_kib: u64) -> String {
    format!(
        "MemTotal:       32817152 kB\nMemFree:        12345678 kB\nMemAvailable:   20000000 kB\nAnonHugePages:         0 kB\nShmemHugePages:        0 kB\nFileHugePages:         0 kB\nHugePages_Total:   {total:>5}\nHugePages_Free:    {free:>5}\nHugePages_Rsvd:    {rsvd:>5}\nHugePages_Surp:    {surp:>5}\nHugepagesize:   {size_kib:>8} kB\nHugetlb:        {:>8} kB\nDirectMap4k:      234560 kB\n",
        total.saturating_mul(size_kib)
    )
}
