//! The benchmark output readers: values read from hand-written outputs of every tool and
//! version (tests/fixtures/readers), values recovered exactly from outputs generated from
//! known values (`readers::synth`, every style), tool detection, and errors.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bench::readers::synth::{self, NcclStyle, NvbandwidthStyle, StreamStyle, SysbenchStyle};
use bench::readers::{self, read_any, Measure, ReadError, Tool};
use proptest::prelude::*;

fn fixture(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/readers")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Reads a fixture with `read_any`, checking the tool it detects.
fn read_fixture(rel: &str, tool: Tool) -> Vec<Measure> {
    let (found, measures) = read_any(&fixture(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    assert_eq!(found, tool, "{rel}");
    assert_eq!(tool.read(&fixture(rel)).as_ref(), Ok(&measures), "{rel}");
    measures
}

/// The one measure with `metric`, `size` and every parameter of `params`.
fn one<'a>(
    ms: &'a [Measure],
    metric: &str,
    size: Option<u64>,
    params: &[(&str, &str)],
) -> &'a Measure {
    let found: Vec<&Measure> = ms
        .iter()
        .filter(|m| m.metric == metric && m.size_bytes == size)
        .filter(|m| params.iter().all(|(k, v)| m.param(k) == Some(*v)))
        .collect();
    assert_eq!(found.len(), 1, "{metric} {size:?} {params:?}: {found:#?}");
    found[0]
}

/// The value and unit of [`one`].
fn value(
    ms: &[Measure],
    metric: &str,
    size: Option<u64>,
    params: &[(&str, &str)],
) -> (f64, String) {
    let m = one(ms, metric, size, params);
    (m.value, m.unit.clone())
}

fn vu(v: f64, unit: &str) -> (f64, String) {
    (v, unit.to_string())
}

// --- fixtures -------------------------------------------------------------------------

#[test]
fn stream_fixtures() {
    let ms = read_fixture("stream/stream-5.10-omp8.txt", Tool::Stream);
    assert_eq!(ms.len(), 16);
    assert_eq!(value(&ms, "copy", None, &[]), vu(28714.3, "MB/s"));
    assert_eq!(value(&ms, "triad", None, &[]), vu(21644.0, "MB/s"));
    assert_eq!(value(&ms, "triad_min_time", None, &[]), vu(0.011089, "s"));
    assert_eq!(value(&ms, "scale_max_time", None, &[]), vu(0.008467, "s"));
    assert!(ms.iter().all(|m| m.benchmark == "stream"));

    let ms = read_fixture("stream/stream-5.9.txt", Tool::Stream);
    assert_eq!(ms.len(), 16);
    assert_eq!(value(&ms, "copy", None, &[]), vu(7412.5318, "MB/s"));
    assert_eq!(value(&ms, "add_max_time", None, &[]), vu(0.0590, "s"));

    let ms = read_fixture("stream/stream-fortran.txt", Tool::Stream);
    assert_eq!(ms.len(), 16);
    assert_eq!(value(&ms, "triad", None, &[]), vu(12880.9, "MB/s"));
    assert_eq!(value(&ms, "scale_avg_time", None, &[]), vu(0.027480, "s"));
}

#[test]
fn sysbench_cpu_fixtures() {
    let ms = read_fixture("sysbench/cpu-1.0.20.txt", Tool::SysbenchCpu);
    assert_eq!(ms.len(), 12);
    assert_eq!(
        value(&ms, "events_per_second", None, &[]),
        vu(9731.46, "events/s")
    );
    assert_eq!(value(&ms, "total_time", None, &[]), vu(10.0012, "s"));
    assert_eq!(value(&ms, "total_events", None, &[]), vu(97331.0, "events"));
    assert_eq!(value(&ms, "latency_p95", None, &[]), vu(0.86, "ms"));
    assert_eq!(value(&ms, "latency_sum", None, &[]), vu(79871.55, "ms"));
    assert_eq!(
        value(&ms, "fairness_events_avg", None, &[]),
        vu(12166.375, "events")
    );
    assert_eq!(
        value(&ms, "fairness_events_stddev", None, &[]),
        vu(41.72, "events")
    );
    assert_eq!(value(&ms, "fairness_time_avg", None, &[]), vu(9.9839, "s"));
    assert!(ms.iter().all(|m| m.benchmark == "sysbench-cpu"));

    let ms = read_fixture("sysbench/cpu-1.0.11.txt", Tool::SysbenchCpu);
    assert_eq!(
        value(&ms, "events_per_second", None, &[]),
        vu(487.09, "events/s")
    );
    assert_eq!(value(&ms, "latency_min", None, &[]), vu(2.01, "ms"));
    assert_eq!(value(&ms, "latency_p99", None, &[]), vu(2.20, "ms"));

    let ms = read_fixture("sysbench/cpu-1.1-throughput.txt", Tool::SysbenchCpu);
    assert_eq!(
        value(&ms, "events_per_second", None, &[]),
        vu(2466.38, "events/s")
    );
    let eps = value(&ms, "throughput_events_per_second", None, &[]);
    assert_eq!(eps, vu(2466.4013, "events/s"));
    assert_eq!(value(&ms, "total_time", None, &[]), vu(10.0004, "s"));
    assert!(!ms.iter().any(|m| m.metric.starts_with("latency_p")));
}

#[test]
fn sysbench_memory_fixtures() {
    let ms = read_fixture("sysbench/memory-1.0.20.txt", Tool::SysbenchMemory);
    assert_eq!(ms.len(), 15);
    assert_eq!(
        value(&ms, "total_operations", None, &[]),
        vu(71452386.0, "operations")
    );
    assert_eq!(
        value(&ms, "operations_per_second", None, &[]),
        vu(7144805.24, "ops/s")
    );
    assert_eq!(value(&ms, "transferred", None, &[]), vu(69777.72, "MiB"));
    assert_eq!(value(&ms, "transfer_rate", None, &[]), vu(6977.35, "MiB/s"));
    assert_eq!(value(&ms, "latency_max", None, &[]), vu(1.05, "ms"));
    assert!(ms.iter().all(|m| m.benchmark == "sysbench-memory"));

    let ms = read_fixture("sysbench/memory-1.0.0.txt", Tool::SysbenchMemory);
    assert_eq!(
        value(&ms, "total_operations", None, &[]),
        vu(10240.0, "operations")
    );
    assert_eq!(
        value(&ms, "operations_per_second", None, &[]),
        vu(11083.15, "ops/s")
    );
    assert_eq!(value(&ms, "transferred", None, &[]), vu(10240.0, "MiB"));
    assert_eq!(value(&ms, "total_time", None, &[]), vu(0.9224, "s"));
}

#[test]
fn nccl_fixture_2025_layout() {
    let ms = read_fixture("nccl/all_reduce_perf-2.17.txt", Tool::NcclTests);
    assert_eq!(ms.len(), 7 * 2 * 3 + 1);
    let big = Some(134217728);
    assert_eq!(
        value(&ms, "busbw", big, &[("placement", "in-place")]),
        vu(24.94, "GB/s")
    );
    assert_eq!(
        value(&ms, "time", big, &[("placement", "out-of-place")]),
        vu(5390.81, "us")
    );
    assert_eq!(
        value(&ms, "algbw", Some(8), &[("placement", "in-place")]),
        vu(0.0, "GB/s")
    );
    assert_eq!(value(&ms, "avg_busbw", None, &[]), vu(9.99067, "GB/s"));
    let m = one(&ms, "algbw", big, &[("placement", "out-of-place")]);
    assert_eq!(m.param("count"), Some("33554432"));
    assert_eq!(m.param("type"), Some("float"));
    assert_eq!(m.param("redop"), Some("sum"));
    assert_eq!(m.param("root"), None, "root -1 is left out");
    assert!(ms
        .iter()
        .all(|m| m.param("collective") == Some("all_reduce_perf")));
    assert!(ms.iter().all(|m| m.benchmark == "nccl-tests"));
}

#[test]
fn nccl_outputs_one_after_another_keep_their_collective() {
    let text = fixture("nccl/all_reduce_perf-2.17.txt");
    let both = format!(
        "{text}{}",
        text.replace("all_reduce_perf", "reduce_scatter_perf")
    );
    let (tool, ms) = read_any(&both).expect("two runs");
    assert_eq!((tool, ms.len()), (Tool::NcclTests, 2 * 43));
    let collectives: Vec<Option<&str>> = ms.iter().map(|m| m.param("collective")).collect();
    assert!(collectives[..43]
        .iter()
        .all(|c| *c == Some("all_reduce_perf")));
    assert!(collectives[43..]
        .iter()
        .all(|c| *c == Some("reduce_scatter_perf")));
}

#[test]
fn nccl_fixtures_older_layouts() {
    let ms = read_fixture("nccl/all_gather_perf-2021.txt", Tool::NcclTests);
    assert_eq!(ms.len(), 5 * 2 * 3 + 1);
    let m = one(
        &ms,
        "time",
        Some(16777216),
        &[("placement", "out-of-place")],
    );
    assert_eq!((m.value, m.unit.as_str()), (338.6, "us"));
    assert_eq!(m.param("redop"), None);
    assert_eq!(m.param("collective"), None);
    assert_eq!(value(&ms, "avg_busbw", None, &[]), vu(33.268, "GB/s"));

    let ms = read_fixture("nccl/broadcast_perf-2023-unchecked.txt", Tool::NcclTests);
    assert_eq!(ms.len(), 3 * 2 * 3 + 1);
    let m = one(&ms, "algbw", Some(4194304), &[("placement", "in-place")]);
    assert_eq!(m.value, 17.25);
    assert_eq!(m.param("root"), Some("0"));
    assert_eq!(m.param("redop"), None, "redop none is left out");

    let ms = read_fixture("nccl/all_reduce_perf-2017.txt", Tool::NcclTests);
    assert_eq!(ms.len(), 3 * 2 * 3 + 1);
    let size = Some(100000000);
    assert_eq!(
        value(&ms, "time", size, &[("placement", "out-of-place")]),
        vu(15.733, "ms")
    );
    assert_eq!(
        value(&ms, "busbw", size, &[("placement", "in-place")]),
        vu(6.37, "GB/s")
    );
    assert_eq!(
        one(&ms, "busbw", size, &[("placement", "in-place")]).param("redop"),
        Some("sum")
    );
    assert_eq!(value(&ms, "avg_busbw", None, &[]), vu(5.79167, "GB/s"));
}

#[test]
fn nvbandwidth_fixtures() {
    let ms = read_fixture("nvbandwidth/v0.8-2gpu.txt", Tool::Nvbandwidth);
    assert_eq!(ms.len(), 14 + 7);
    let cell = |metric: &str, row: &str, column: &str| {
        value(&ms, metric, None, &[("row", row), ("column", column)])
    };
    assert_eq!(
        cell("host_to_device_memcpy_ce", "cpu0", "gpu1"),
        vu(24.58, "GB/s")
    );
    assert_eq!(
        cell("device_to_host_memcpy_ce", "cpu0", "gpu0"),
        vu(26.32, "GB/s")
    );
    assert_eq!(
        cell("device_to_device_memcpy_read_ce", "gpu1", "gpu0"),
        vu(52.09, "GB/s")
    );
    let read1 = "device_to_device_bidirectional_memcpy_read_ce_read1";
    assert_eq!(cell(read1, "gpu1", "gpu0"), vu(48.66, "GB/s"));
    assert_eq!(cell("device_local_copy", "0", "gpu1"), vu(640.88, "GB/s"));
    let diagonal = |m: &&Measure| m.param("row").is_some() && m.param("row") == m.param("column");
    assert!(!ms.iter().any(|m| diagonal(&m)), "N/A cells are left out");
    let total = "device_to_device_bidirectional_memcpy_read_ce_total_sum";
    assert_eq!(value(&ms, total, None, &[]), vu(194.76, "GB/s"));

    let ms = read_fixture("nvbandwidth/v0.2-1gpu.txt", Tool::Nvbandwidth);
    assert_eq!(ms.len(), 8);
    let bidir = "host_to_device_bidirectional_memcpy_ce";
    assert_eq!(
        value(&ms, bidir, None, &[("row", "cpu0"), ("column", "gpu0")]),
        vu(10.47, "GB/s")
    );
    assert_eq!(
        value(&ms, "host_to_device_memcpy_sm_sum", None, &[]),
        vu(12.96, "GB/s")
    );

    let ms = read_fixture("nvbandwidth/v0.8-perf-formatter.txt", Tool::Nvbandwidth);
    assert_eq!(ms.len(), 6);
    let latency = "host_device_latency_sm";
    assert_eq!(
        value(&ms, latency, None, &[("row", "cpu0"), ("column", "gpu0")]),
        vu(812.44, "ns")
    );
    assert_eq!(
        value(&ms, "host_device_latency_sm_sum", None, &[]),
        vu(1622.37, "ns")
    );
    assert_eq!(
        value(&ms, "device_to_device_memcpy_write_sm_sum", None, &[]),
        vu(103.73, "GB/s")
    );
}

#[test]
fn bandwidth_test_fixtures() {
    let ms = read_fixture(
        "bandwidth_test/cuda12-quick-pinned.txt",
        Tool::BandwidthTest,
    );
    assert_eq!(ms.len(), 3);
    let h2d = one(
        &ms,
        "bandwidth",
        Some(32000000),
        &[("direction", "host_to_device")],
    );
    assert_eq!((h2d.value, h2d.unit.as_str()), (24.7, "GB/s"));
    assert_eq!(
        (h2d.param("memory"), h2d.param("devices")),
        (Some("pinned"), Some("1"))
    );
    let d2d = one(
        &ms,
        "bandwidth",
        Some(32000000),
        &[("direction", "device_to_device")],
    );
    assert_eq!((d2d.value, d2d.param("memory")), (651.2, None));

    let ms = read_fixture(
        "bandwidth_test/cuda10-quick-pageable.txt",
        Tool::BandwidthTest,
    );
    let d2h = one(
        &ms,
        "bandwidth",
        Some(33554432),
        &[("direction", "device_to_host")],
    );
    assert_eq!((d2h.value, d2h.unit.as_str()), (10112.9, "MB/s"));
    assert_eq!(d2h.param("memory"), Some("pageable"));

    let ms = read_fixture("bandwidth_test/cuda12-range-wc.txt", Tool::BandwidthTest);
    assert_eq!(ms.len(), 5);
    assert!(ms.iter().all(|m| m.param("write_combined") == Some("yes")));
    assert_eq!(value(&ms, "bandwidth", Some(1024), &[]), vu(0.9, "GB/s"));
    assert_eq!(value(&ms, "bandwidth", Some(13312), &[]), vu(7.0, "GB/s"));

    let ms = read_fixture("bandwidth_test/cuda12-range-csv.txt", Tool::BandwidthTest);
    assert_eq!(ms.len(), 9);
    let d2h = one(
        &ms,
        "bandwidth",
        Some(4194304),
        &[("direction", "device_to_host")],
    );
    assert_eq!((d2h.value, d2h.param("memory")), (25.7, Some("pinned")));
    let d2d = one(
        &ms,
        "bandwidth",
        Some(16777216),
        &[("direction", "device_to_device")],
    );
    assert_eq!((d2d.value, d2d.param("memory")), (640.3, None));
}

#[test]
fn generic_fixtures() {
    let ms = read_fixture("generic/gpu-microbench.txt", Tool::Generic);
    assert_eq!(ms.len(), 6);
    assert_eq!(value(&ms, "fp16_matmul", None, &[]), vu(187.3, "TFLOP/s"));
    assert_eq!(value(&ms, "h2d_copy", None, &[]), vu(24.6, "GB/s"));
    assert_eq!(value(&ms, "kernel_launch", None, &[]), vu(4.83, "us"));

    let ms = read_fixture("generic/windows-crlf.txt", Tool::Generic);
    assert_eq!(ms.len(), 4);
    assert_eq!(
        value(&ms, "timespy_graphics", None, &[]),
        vu(17234.0, "points")
    );
    assert_eq!(value(&ms, "cyberpunk_1pct_low", None, &[]), vu(71.8, "FPS"));
}

#[test]
fn every_fixture_detected_and_serializable() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/readers");
    let mut files: Vec<PathBuf> = Vec::new();
    for sub in std::fs::read_dir(&dir).expect("fixtures") {
        for f in std::fs::read_dir(sub.expect("entry").path()).expect("tool dir") {
            files.push(f.expect("entry").path());
        }
    }
    assert!(files.len() >= 20, "{files:?}");
    for path in files {
        let text = std::fs::read_to_string(&path).expect("fixture");
        let dir_tool = path
            .parent()
            .and_then(|p| p.file_name())
            .and_then(|n| n.to_str());
        // the guest-view files are facts, not benchmark outputs (tests/readers_study.rs)
        if dir_tool == Some("view") {
            assert!(read_any(&text).is_err(), "{}", path.display());
            continue;
        }
        let (tool, ms) = read_any(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let name = path.to_string_lossy();
        let expected = match (dir_tool, name.contains("memory")) {
            (Some("sysbench"), true) => "sysbench-memory",
            (Some("sysbench"), false) => "sysbench-cpu",
            (Some("bandwidth_test"), _) => "bandwidth-test",
            (Some("nccl"), _) => "nccl-tests",
            (Some("chase"), _) => "pointer-chase",
            (Some("pytorch"), _) if name.contains("matmul") => "pytorch-matmul",
            (Some("pytorch"), _) => "pytorch-bandwidth",
            (Some(other), _) => other,
            (None, _) => unreachable!(),
        };
        assert_eq!(Some(tool), Tool::from_id(expected), "{}", path.display());
        let json = serde_json::to_string(&ms).expect("serialize");
        let back: Vec<Measure> = serde_json::from_str(&json).expect("deserialize");
        assert_eq!(back, ms, "{}", path.display());
        // a key printed more than once is numbered: key and repeat tell every figure apart
        let keys: std::collections::BTreeSet<(String, Option<u32>)> =
            ms.iter().map(|m| (m.key(), m.repeat)).collect();
        assert_eq!(keys.len(), ms.len(), "{}: keys are unique", path.display());
    }
}

// --- errors ---------------------------------------------------------------------------

#[test]
fn errors_name_what_is_wrong() {
    assert_eq!(read_any(""), Err(ReadError::Unrecognised));
    assert_eq!(read_any("hello\nworld\n"), Err(ReadError::Unrecognised));

    let text = fixture("stream/stream-5.10-omp8.txt").replace("Triad:", "Trial:");
    let err = read_any(&text).expect_err("no Triad row").to_string();
    assert!(
        err.starts_with("STREAM: no Triad row in the table of line"),
        "{err}"
    );

    let text = fixture("stream/stream-5.9.txt").replace("8214.8830", "*********");
    let err = read_any(&text).expect_err("bad rate").to_string();
    assert!(
        err.starts_with("STREAM: line 24: expected a rate and three times: `Add:"),
        "{err}"
    );

    let mut text = fixture("nccl/all_reduce_perf-2.17.txt");
    text = text.replace(
        "  5390.81   24.90   24.90       0  5381.25   24.94   24.94       0",
        "  5390.81   24.90",
    );
    let err = read_any(&text).expect_err("truncated row").to_string();
    assert!(
        err.starts_with("nccl-tests: line 18: expected 13 columns, found 7: `134217728"),
        "{err}"
    );

    let text = "# Avg bus bandwidth    : 12.5\n";
    let err = read_any(text).expect_err("no table").to_string();
    assert_eq!(
        err,
        "nccl-tests: no `size count type … time algbw busbw` header found"
    );

    let text =
        fixture("nvbandwidth/v0.8-2gpu.txt").replace(" 0     24.61     24.58", " 0     24.61");
    let err = read_any(&text).expect_err("short row").to_string();
    assert!(
        err.starts_with("nvbandwidth: line 14: expected a row label and 2 values"),
        "{err}"
    );

    let err = readers::sysbench::read_memory("Total operations: many\n").expect_err("bad count");
    assert!(
        err.to_string().contains("expected `N (X per second)`"),
        "{err}"
    );
}

#[test]
fn errors_stay_on_one_line() {
    let text = "Function  Rate  Avg time\nCopy: 1 2 3 \u{7}\r\u{1b}[31m";
    let err = readers::stream::read(text)
        .expect_err("bad row")
        .to_string();
    assert!(!err.contains(['\n', '\r', '\u{7}', '\u{1b}']), "{err:?}");
    let long = format!("Function  Rate  Avg time\nCopy: {}", "9 ".repeat(200));
    let err = readers::stream::read(&long)
        .expect_err("long row")
        .to_string();
    assert!(err.len() < 200 && err.ends_with("…`"), "{err}");
}

#[test]
fn reader_functions_are_short() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let long: Vec<_> = testkit::layout::long_functions(&src, 150)
        .into_iter()
        .filter(|f| f.file.contains("readers"))
        .collect();
    assert!(long.is_empty(), "{long:?}");
}

// --- generated outputs: every value recovered exactly ---------------------------------

/// `k / 10^decimals`: a value every printf with that many decimals writes exactly.
fn fixed(k: u64, decimals: usize) -> f64 {
    k as f64 / 10f64.powi(decimals as i32)
}

/// The decimal a `{:.d}` formatting of `v` writes, read back.
fn printed(v: f64, decimals: usize) -> f64 {
    format!("{v:.decimals$}").parse().expect("number")
}

/// Reads `text` with `read_any`, checking the tool.
fn detect_and_read(text: &str, tool: Tool) -> Vec<Measure> {
    match read_any(text) {
        Ok((found, ms)) => {
            assert_eq!(found, tool, "{text}");
            ms
        }
        Err(e) => panic!("{e}\n{text}"),
    }
}

/// metric → (value, unit), checking metrics are unique.
fn by_metric(ms: &[Measure]) -> BTreeMap<String, (f64, String)> {
    let map: BTreeMap<_, _> = ms
        .iter()
        .map(|m| (m.metric.clone(), (m.value, m.unit.clone())))
        .collect();
    assert_eq!(map.len(), ms.len(), "metrics are unique: {ms:#?}");
    map
}

fn stream_case() -> impl Strategy<Value = (StreamStyle, [[u64; 4]; 4], bool)> {
    let row = [
        1u64..100_000_000,
        1u64..10_000_000,
        1u64..10_000_000,
        1u64..10_000_000,
    ];
    (
        prop::sample::select(StreamStyle::ALL.to_vec()),
        [row.clone(), row.clone(), row.clone(), row],
        any::<bool>(),
    )
}

fn sysbench_stats() -> impl Strategy<Value = synth::SysbenchStats> {
    (
        1u64..10_000_000,
        1u64..1_000_000_000,
        prop::array::uniform5(0u64..100_000_000),
        prop::sample::select(vec![0u32, 95, 99, 50]),
        prop::array::uniform4(0u64..100_000_000),
    )
        .prop_map(
            |(time, events, lat, percentile, fair)| synth::SysbenchStats {
                total_time: fixed(time, 4),
                total_events: events,
                latency: lat.map(|k| fixed(k, 2)),
                percentile,
                fairness: [
                    fixed(fair[0], 4),
                    fixed(fair[1], 2),
                    fixed(fair[2], 4),
                    fixed(fair[3], 2),
                ],
            },
        )
}

/// What the statistics every sysbench report prints should read as.
fn expected_stats(
    style: SysbenchStyle,
    s: &synth::SysbenchStats,
) -> BTreeMap<String, (f64, String)> {
    let mut m = BTreeMap::new();
    let mut put = |k: &str, v: f64, u: &str| m.insert(k.to_string(), (v, u.to_string()));
    put("total_time", s.total_time, "s");
    put("total_events", s.total_events as f64, "events");
    if style == SysbenchStyle::Throughput {
        put(
            "throughput_events_per_second",
            printed(s.total_events as f64 / s.total_time, 4),
            "events/s",
        );
    }
    put("latency_min", s.latency[0], "ms");
    put("latency_avg", s.latency[1], "ms");
    put("latency_max", s.latency[2], "ms");
    if s.percentile > 0 {
        put(&format!("latency_p{}", s.percentile), s.latency[3], "ms");
    }
    put("latency_sum", s.latency[4], "ms");
    put("fairness_events_avg", s.fairness[0], "events");
    put("fairness_events_stddev", s.fairness[1], "events");
    put("fairness_time_avg", s.fairness[2], "s");
    put("fairness_time_stddev", s.fairness[3], "s");
    m
}

fn nccl_rows(style: NcclStyle) -> impl Strategy<Value = Vec<synth::NcclRow>> {
    let n = style.metrics().len();
    let time_decimals = if style == NcclStyle::V2017 { 3 } else { 2 };
    let row = (
        1u64..(1 << 40),
        1u64..(1 << 38),
        prop::sample::select(vec!["float", "half", "bfloat16", "int8"]),
        prop::sample::select(vec!["sum", "prod", "max", "none"]),
        prop::sample::select(vec![-1, 0, 3]),
        prop::collection::vec(0u64..99_999, 2 * n),
    )
        .prop_map(move |(size, count, dtype, redop, root, ks)| {
            let half = |h: usize| -> Vec<f64> {
                (0..n)
                    .map(|i| fixed(ks[h * n + i], if i == 0 { time_decimals } else { 2 }))
                    .collect()
            };
            synth::NcclRow {
                size,
                count,
                dtype: dtype.to_string(),
                redop: redop.to_string(),
                root,
                halves: [half(0), half(1)],
            }
        });
    prop::collection::vec(row, 1..6)
}

/// What an nccl-tests table of `rows` should read as.
fn expected_nccl(
    style: NcclStyle,
    collective: Option<&str>,
    rows: &[synth::NcclRow],
    avg: f64,
) -> Vec<Measure> {
    let mut out = Vec::new();
    for r in rows {
        let mut base = Measure::new("nccl-tests", "", 0.0, "")
            .with_size(r.size)
            .with_param("count", &r.count.to_string());
        base = base.with_param("type", &r.dtype);
        if style.has_redop() && r.redop != "none" {
            base = base.with_param("redop", &r.redop);
        }
        if style.has_root() && r.root != -1 {
            base = base.with_param("root", &r.root.to_string());
        }
        for (half, placement) in r.halves.iter().zip(["out-of-place", "in-place"]) {
            for (metric, v) in style.metrics().iter().zip(half) {
                let mut m = base.clone().with_param("placement", placement);
                m.metric = metric.to_string();
                m.value = *v;
                m.unit = match *metric {
                    "time" if style == NcclStyle::V2017 => "ms",
                    "time" | "iter_min" | "iter_max" | "iter_p99" => "us",
                    "iter_cv" => "%",
                    _ => "GB/s",
                }
                .to_string();
                out.push(m);
            }
        }
    }
    out.push(Measure::new("nccl-tests", "avg_busbw", avg, "GB/s"));
    if let Some(name) = collective {
        out.iter_mut().for_each(|m| {
            m.params.insert("collective".to_string(), name.to_string());
        });
    }
    out
}

const NV_DESCRIPTIONS: [(&str, Option<&str>, &str, &str); 4] = [
    (
        "memcpy CE CPU(row) -> GPU(column) bandwidth (GB/s)",
        Some("cpu"),
        "gpu",
        "GB/s",
    ),
    (
        "memcpy SM GPU(row) <- GPU(column) bandwidth (GB/s)",
        Some("gpu"),
        "gpu",
        "GB/s",
    ),
    (
        "memory latency SM CPU(row) <-> GPU(column) (ns)",
        Some("cpu"),
        "gpu",
        "ns",
    ),
    (
        "memcpy local GPU(column) bandwidth (GB/s)",
        None,
        "gpu",
        "GB/s",
    ),
];

fn nv_matrices() -> impl Strategy<Value = Vec<(usize, synth::NvMatrix)>> {
    let cell = prop::option::weighted(0.8, 0u64..10_000_000);
    let matrix =
        (0..NV_DESCRIPTIONS.len(), 1usize..4, 1usize..5).prop_flat_map(move |(d, rows, cols)| {
            let cells = prop::collection::vec(prop::collection::vec(cell.clone(), cols), rows);
            (Just(d), cells)
        });
    prop::collection::vec(matrix, 1..4).prop_map(|ms| {
        ms.into_iter()
            .enumerate()
            .map(|(i, (d, cells))| {
                let m = synth::NvMatrix {
                    test: format!("test_case_{i}_ce"),
                    description: NV_DESCRIPTIONS[d].0.to_string(),
                    cells: cells
                        .into_iter()
                        .map(|r| r.into_iter().map(|c| c.map(|k| fixed(k, 2))).collect())
                        .collect(),
                };
                (d, m)
            })
            .collect()
    })
}

/// What nvbandwidth matrices should read as.
fn expected_nv(style: NvbandwidthStyle, matrices: &[(usize, synth::NvMatrix)]) -> Vec<Measure> {
    let mut out = Vec::new();
    for (d, m) in matrices {
        let (_, row_kind, column_kind, unit) = NV_DESCRIPTIONS[*d];
        for (r, row) in m.cells.iter().enumerate() {
            for (c, cell) in row.iter().enumerate() {
                let value = match (cell, style) {
                    (Some(v), _) => *v,
                    (None, NvbandwidthStyle::V0_1) => 0.0,
                    (None, _) => continue,
                };
                let row_label = format!("{}{r}", row_kind.unwrap_or(""));
                out.push(
                    Measure::new("nvbandwidth", &m.test, value, unit)
                        .with_param("row", &row_label)
                        .with_param("column", &format!("{column_kind}{c}")),
                );
            }
        }
        out.push(Measure::new(
            "nvbandwidth",
            &format!("{}_sum", m.test),
            printed(m.sum(), 2),
            unit,
        ));
    }
    out
}

fn bandwidth_tables() -> impl Strategy<Value = Vec<synth::BandwidthTable>> {
    let table = (
        0usize..3,
        any::<bool>(),
        any::<bool>(),
        1u32..5,
        prop::collection::vec((1u32..u32::MAX, 0u64..100_000_000), 1..6),
    )
        .prop_map(
            |(direction, pinned, wc, devices, rows)| synth::BandwidthTable {
                direction,
                pinned,
                write_combined: pinned && wc,
                devices,
                rows: rows.into_iter().map(|(s, k)| (s, fixed(k, 1))).collect(),
            },
        );
    prop::collection::vec(table, 1..4)
}

/// What `bandwidthTest` tables should read as.
fn expected_bandwidth(unit: &str, tables: &[synth::BandwidthTable]) -> Vec<Measure> {
    const DIRECTIONS: [&str; 3] = ["host_to_device", "device_to_host", "device_to_device"];
    let mut out = Vec::new();
    for t in tables {
        for (size, bw) in &t.rows {
            let mut m = Measure::new("bandwidthTest", "bandwidth", *bw, unit)
                .with_size(u64::from(*size))
                .with_param("direction", DIRECTIONS[t.direction])
                .with_param("devices", &t.devices.to_string());
            if t.direction != 2 {
                m = m.with_param("memory", if t.pinned { "pinned" } else { "pageable" });
                if t.write_combined {
                    m = m.with_param("write_combined", "yes");
                }
            }
            out.push(m);
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn stream_values_recovered((style, ks, crlf) in stream_case()) {
        let (rate_d, time_d) = style.decimals();
        let rows = ks.map(|r| [fixed(r[0], rate_d), fixed(r[1], time_d), fixed(r[2], time_d), fixed(r[3], time_d)]);
        let text = synth::stream(style, &rows, crlf);
        let ms = detect_and_read(&text, Tool::Stream);
        let mut expected = Vec::new();
        for (name, r) in ["copy", "scale", "add", "triad"].iter().zip(&rows) {
            expected.push(Measure::new("stream", name, r[0], "MB/s"));
            for (suffix, v) in ["avg_time", "min_time", "max_time"].iter().zip(&r[1..]) {
                expected.push(Measure::new("stream", &format!("{name}_{suffix}"), *v, "s"));
            }
        }
        prop_assert_eq!(ms, expected);
    }

    #[test]
    fn sysbench_cpu_values_recovered(
        style in prop::sample::select(SysbenchStyle::ALL.to_vec()),
        eps in 1u64..1_000_000_000,
        stats in sysbench_stats(),
    ) {
        let text = synth::sysbench_cpu(style, fixed(eps, 2), &stats);
        let ms = detect_and_read(&text, Tool::SysbenchCpu);
        let mut expected = expected_stats(style, &stats);
        if style != SysbenchStyle::V1_0_0 {
            expected.insert("events_per_second".to_string(), (fixed(eps, 2), "events/s".to_string()));
        }
        prop_assert_eq!(by_metric(&ms), expected);
    }

    #[test]
    fn sysbench_memory_values_recovered(
        style in prop::sample::select(SysbenchStyle::ALL.to_vec()),
        mem in (1u64..(1 << 40), 1u64..(1 << 40), 1u64..(1 << 40), 1u64..(1 << 40)),
        stats in sysbench_stats(),
    ) {
        let mem = synth::SysbenchMemory {
            operations: mem.0,
            operations_per_second: fixed(mem.1, 2),
            transferred: fixed(mem.2, 2),
            rate: fixed(mem.3, 2),
        };
        let text = synth::sysbench_memory(style, &mem, &stats);
        let ms = detect_and_read(&text, Tool::SysbenchMemory);
        let mut expected = expected_stats(style, &stats);
        let mut put = |k: &str, v: f64, u: &str| expected.insert(k.to_string(), (v, u.to_string()));
        put("total_operations", mem.operations as f64, "operations");
        put("operations_per_second", mem.operations_per_second, "ops/s");
        put("transferred", mem.transferred, "MiB");
        put("transfer_rate", mem.rate, "MiB/s");
        prop_assert_eq!(by_metric(&ms), expected);
    }

    #[test]
    fn nccl_values_recovered(
        (style, rows) in prop::sample::select(NcclStyle::ALL.to_vec()).prop_flat_map(|s| (Just(s), nccl_rows(s))),
        collective in prop::option::of(prop::sample::select(vec!["all_reduce_perf", "reduce_scatter_perf", "sendrecv_perf"])),
        avg in 0u64..100_000_000,
    ) {
        let avg = fixed(avg, 4);
        let text = synth::nccl(style, collective, &rows, avg);
        let ms = detect_and_read(&text, Tool::NcclTests);
        prop_assert_eq!(ms, expected_nccl(style, collective, &rows, avg));
    }

    #[test]
    fn nvbandwidth_values_recovered(
        style in prop::sample::select(NvbandwidthStyle::ALL.to_vec()),
        matrices in nv_matrices(),
    ) {
        let plain: Vec<synth::NvMatrix> = matrices.iter().map(|(_, m)| m.clone()).collect();
        let text = synth::nvbandwidth(style, &plain);
        let ms = detect_and_read(&text, Tool::Nvbandwidth);
        prop_assert_eq!(ms, expected_nv(style, &matrices));
    }

    #[test]
    fn bandwidth_test_values_recovered(
        style in prop::sample::select(synth::BandwidthTestStyle::ALL.to_vec()),
        tables in bandwidth_tables(),
    ) {
        let text = synth::bandwidth_test(style, &tables);
        let ms = detect_and_read(&text, Tool::BandwidthTest);
        prop_assert_eq!(ms, expected_bandwidth(style.unit(), &tables));
    }

    #[test]
    fn generic_values_recovered(
        results in prop::collection::vec(("[a-z_][a-z0-9_]{0,12}", -10_000_000i64..10_000_000, "[A-Za-z%/]{1,7}"), 1..8),
        gap in prop::sample::select(vec![" ", "\t", "   ", " \t "]),
    ) {
        let results: Vec<(String, f64, String)> = results
            .into_iter()
            .map(|(n, k, u)| (n, k as f64 / 1000.0, u))
            .collect();
        let text = synth::generic(&results, gap);
        let ms = detect_and_read(&text, Tool::Generic);
        let mut expected: Vec<Measure> = results.iter().map(|(n, v, u)| Measure::new("generic", n, *v, u)).collect();
        // a name printed twice is a repeat of one figure
        readers::mark_repeats(&mut expected);
        prop_assert_eq!(ms, expected);
    }

    #[test]
    fn any_text_reads_without_panic(text in "(?s).{0,400}") {
        if let Err(e) = read_any(&text) {
            prop_assert!(!e.to_string().contains('\n'));
        }
    }

    #[test]
    fn damaged_outputs_read_without_panic(
        which in 0usize..6,
        cut in any::<prop::sample::Index>(),
        drop_line in any::<prop::sample::Index>(),
    ) {
        let rels = [
            "stream/stream-5.10-omp8.txt",
            "sysbench/memory-1.0.20.txt",
            "nccl/all_reduce_perf-2.17.txt",
            "nvbandwidth/v0.8-2gpu.txt",
            "bandwidth_test/cuda12-range-wc.txt",
            "generic/windows-crlf.txt",
        ];
        let text = fixture(rels[which]);
        let lines: Vec<&str> = text.lines().collect();
        let skip = drop_line.index(lines.len());
        let dropped: String = lines.iter().enumerate().filter(|(i, _)| *i != skip).map(|(_, l)| format!("{l}\n")).collect();
        let at = cut.index(text.len() + 1);
        let truncated: String = text.char_indices().take_while(|(i, _)| *i < at).map(|(_, c)| c).collect();
        for t in [dropped, truncated] {
            if let Err(e) = read_any(&t) {
                prop_assert!(!e.to_string().contains('\n'));
            }
        }
    }
}
