//! The r/VFIO pinning study's outputs (issue 42): the pointer-chase curve, per-node STREAM,
//! PyTorch matmul and host↔device lines, `bandwidthTest` run five times in one file,
//! nccl-tests' `NCCL_*` settings and ranks, and the guest-view files (`numactl --hardware`,
//! `lscpu`, `/proc/meminfo`). Fixtures written in the tools' shapes (tests/fixtures/readers),
//! and property tests: outputs generated from random values (`readers::synth`) read back to
//! exactly those values.

use std::collections::BTreeMap;
use std::path::Path;

use bench::readers::stream::Binding;
use bench::readers::synth::{self, CopyStyle, MatmulStyle, SizeStyle, StreamStyle};
use bench::readers::view::{self, GuestView, ViewSource};
use bench::readers::{self, read_any, Measure, RepeatRule, Tool};
use proptest::prelude::*;

fn fixture(rel: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/readers")
        .join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn read_as(text: &str, tool: Tool) -> Vec<Measure> {
    let (found, ms) = read_any(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert_eq!(found, tool, "{text}");
    ms
}

fn find<'a>(ms: &'a [Measure], metric: &str, params: &[(&str, &str)]) -> Vec<&'a Measure> {
    ms.iter()
        .filter(|m| m.metric == metric)
        .filter(|m| params.iter().all(|(k, v)| m.param(k) == Some(*v)))
        .collect()
}

/// `v` rounded to `d` decimals, as the tools print it.
fn fixed(v: f64, d: i32) -> f64 {
    format!("{v:.*}", d as usize).parse().unwrap()
}

// --- fixtures -------------------------------------------------------------------------

#[test]
fn latency_curve_is_size_to_ns() {
    let ms = read_as(&fixture("chase/latency-study.txt"), Tool::PointerChase);
    let curve: Vec<(u64, f64)> = ms
        .iter()
        .map(|m| (m.size_bytes.unwrap(), m.value))
        .collect();
    assert_eq!(
        curve,
        vec![
            (4096, 1.21),
            (16 << 10, 1.22),
            (32768, 1.24),
            (131072, 3.41),
            (1 << 20, 4.02),
            (4194304, 11.87),
            (16 << 20, 14.35),
            (64 << 20, 86.10),
            (268435456, 92.44),
            (1 << 30, 95.02),
        ]
    );
    assert!(ms.iter().all(|m| m.metric == "latency" && m.unit == "ns"));
    assert_eq!(ms[0].note.as_deref(), Some("L1"));
    assert_eq!(ms[9].note.as_deref(), Some("DRAM"));
    // the label is not part of the key: two configs' curves line up whatever they call a level
    assert_eq!(ms[0].key(), "pointer-chase.latency.size=4096");
}

#[test]
fn a_line_in_a_curve_that_is_not_a_point_is_refused() {
    let err = readers::chase::read("4096 1.2\n8K fast # L1\n").unwrap_err();
    assert_eq!(
        err.to_string(),
        "pointer-chase latency: line 2: expected `size ns` or `size ns # label`: `8K fast # L1`"
    );
    assert!(readers::chase::read("# only comments\n").is_err());
    // sizes out of range are not points
    assert!(readers::chase::point("99999999999G 1.0").is_none());
}

#[test]
fn per_node_stream_is_told_local_or_remote() {
    let ms = read_as(
        &fixture("stream/stream-numactl-local-remote.txt"),
        Tool::Stream,
    );
    assert_eq!(ms.len(), 32);
    let local = find(
        &ms,
        "triad",
        &[
            ("cpunodebind", "0"),
            ("membind", "0"),
            ("locality", "local"),
        ],
    );
    let remote = find(
        &ms,
        "triad",
        &[
            ("cpunodebind", "0"),
            ("membind", "1"),
            ("locality", "remote"),
        ],
    );
    assert_eq!((local.len(), remote.len()), (1, 1));
    assert_eq!((local[0].value, remote[0].value), (29955.1, 19078.2));
    // different bindings are different figures, not repeats
    assert!(ms.iter().all(|m| m.repeat.is_none()));
}

#[test]
fn numactl_bindings_in_every_spelling() {
    let b = |c: &str, m: &str| Binding {
        cpunodebind: Some(c.into()),
        membind: Some(m.into()),
    };
    for (line, want) in [
        ("numactl --cpunodebind=0 --membind=1 ./stream", b("0", "1")),
        ("+ numactl -N 1 -m 0 /opt/stream", b("1", "0")),
        (
            "$ /usr/bin/numactl --cpunodebind 1 --membind 1 stream_c.exe",
            b("1", "1"),
        ),
        ("# cpunodebind=0 membind=0,1", b("0", "0,1")),
        ("cpunodebind: 1 membind: 0", b("1", "0")),
    ] {
        assert_eq!(Binding::from_line(line), Some(want), "{line}");
    }
    assert_eq!(Binding::from_line("Number of Threads requested = 8"), None);
    assert_eq!(Binding::from_line("taskset -N 1 -m 0 ./stream"), None);
    assert_eq!(
        Binding::from_name("stream_node0_mem1.txt"),
        Some(b("0", "1"))
    );
    assert_eq!(
        Binding::from_name("stream-cpu1-mem1.log"),
        Some(b("1", "1"))
    );
    assert_eq!(Binding::from_name("stream.txt"), None);
    assert_eq!(b("0", "1").locality(), Some("remote"));
    assert_eq!(b("1", "1").locality(), Some("local"));
    assert_eq!(b("0", "0,1").locality(), None);
}

#[test]
fn matmul_lines_per_size_and_dtype() {
    let ms = read_as(&fixture("pytorch/matmul.txt"), Tool::PytorchMatmul);
    // the `peak observed` line has no size and dtype: not a figure
    assert_eq!(ms.len(), 7);
    let one = find(&ms, "tflops", &[("n", "8192"), ("dtype", "bf16")]);
    assert_eq!(one.len(), 1);
    assert_eq!((one[0].value, one[0].unit.as_str()), (160.02, "TFLOPS"));
    assert_eq!(find(&ms, "tflops", &[("dtype", "fp16")]).len(), 3);
}

#[test]
fn copy_test_keeps_each_gpu_and_no_prose_metric() {
    let text = fixture("pytorch/h2d-2gpu.txt");
    let ms = read_as(&text, Tool::PytorchBandwidth);
    assert_eq!(ms.len(), 8);
    let v = |gpu: &str, dir: &str, mem: &str| {
        let f = find(
            &ms,
            "bandwidth",
            &[("gpu", gpu), ("direction", dir), ("memory", mem)],
        );
        assert_eq!(f.len(), 1, "{gpu} {dir} {mem}");
        f[0].value
    };
    assert_eq!(v("0", "host_to_device", "pinned"), 24.61);
    assert_eq!(v("1", "host_to_device", "pinned"), 13.20);
    assert_eq!(v("1", "device_to_host", "pageable"), 9.02);
    // metric names carry the GPU index; no measure from `Detected = 2 GPU(s)`
    assert!(ms.iter().all(|m| m.key().contains(".gpu=")));
    assert!(ms
        .iter()
        .all(|m| m.metric == "bandwidth" && m.unit == "GB/s"));
    let facts = readers::facts(Tool::PytorchBandwidth, &text, &ms);
    assert_eq!(facts.get("gpus").map(String::as_str), Some("2"));
}

#[test]
fn five_bandwidth_tests_in_one_file_are_repeats_of_one_run() {
    let text = fixture("bandwidth_test/cuda12-quick-x5.txt");
    let ms = read_as(&text, Tool::BandwidthTest);
    assert_eq!(ms.len(), 15);
    let h2d = find(&ms, "bandwidth", &[("direction", "host_to_device")]);
    let repeats: Vec<Option<u32>> = h2d.iter().map(|m| m.repeat).collect();
    assert_eq!(repeats, (1..=5).map(Some).collect::<Vec<_>>());
    // one figure per run: the median of the five, said in the note
    let one = readers::collapse(&ms, Tool::BandwidthTest.repeat_rule());
    assert_eq!(one.len(), 3);
    let h2d = find(&one, "bandwidth", &[("direction", "host_to_device")]);
    assert_eq!(h2d[0].value, 24.6);
    assert_eq!(
        h2d[0].note.as_deref(),
        Some("median of 5 repeats in one output")
    );
    let d2d = find(&one, "bandwidth", &[("direction", "device_to_device")]);
    assert_eq!(d2d[0].value, 3386.0);
    assert_eq!(
        readers::facts(Tool::BandwidthTest, &text, &ms)
            .get("repeats")
            .map(String::as_str),
        Some("5")
    );
}

#[test]
fn stream_repeats_keep_its_best() {
    let rows = |r: f64, t: f64| [[r, t, t, t]; 4];
    let text = format!(
        "{}{}",
        synth::stream(StreamStyle::C510, &rows(100.0, 0.5), false),
        synth::stream(StreamStyle::C510, &rows(120.0, 0.4), false)
    );
    let ms = read_as(&text, Tool::Stream);
    let best = readers::collapse(&ms, RepeatRule::Best);
    assert_eq!(find(&best, "triad", &[])[0].value, 120.0);
    assert_eq!(find(&best, "triad_min_time", &[])[0].value, 0.4);
    assert_eq!(
        find(&best, "triad", &[])[0].note.as_deref(),
        Some("best of 2 repeats in one output")
    );
}

#[test]
fn nccl_sweep_settings_and_ranks() {
    let text = fixture("nccl/all_reduce_perf-p2p-disabled.txt");
    let ms = read_as(&text, Tool::NcclTests);
    let busbw = find(&ms, "busbw", &[("placement", "out-of-place")]);
    // the sweep stays a curve: one busbw per size, sizes 8 B … 128 MiB
    let sizes: Vec<u64> = busbw.iter().map(|m| m.size_bytes.unwrap()).collect();
    assert_eq!(
        sizes,
        (0..25).step_by(2).map(|i| 8u64 << i).collect::<Vec<_>>()
    );
    assert_eq!(busbw.last().unwrap().value, 10.99);
    let facts = readers::facts(Tool::NcclTests, &text, &ms);
    assert_eq!(facts.get("NCCL_P2P_DISABLE").map(String::as_str), Some("1"));
    assert_eq!(facts.get("NCCL_DEBUG").map(String::as_str), Some("INFO"));
    assert_eq!(facts.get("ranks").map(String::as_str), Some("2"));
    assert_eq!(facts.get("gpus").map(String::as_str), Some("2"));
    assert_eq!(facts.get("nthread").map(String::as_str), Some("1"));
    assert!(!facts
        .keys()
        .any(|k| k.starts_with("NCCL_") && k.contains(' ')));
}

#[test]
fn guest_view_from_the_three_files() {
    let numa = view::numactl_hardware(&fixture("view/numactl-2node.txt")).unwrap();
    let cpu = view::lscpu(&fixture("view/lscpu-2node.txt")).unwrap();
    let mem = view::meminfo(&fixture("view/meminfo-1g.txt")).unwrap();
    let v = numa.merge(cpu).merge(mem);
    assert_eq!(v.cpus, Some(16));
    assert_eq!(
        (v.sockets, v.cores_per_socket, v.threads_per_core),
        (Some(2), Some(4), Some(2))
    );
    let nodes = v.nodes.as_ref().unwrap();
    assert_eq!(nodes.len(), 2);
    assert_eq!(nodes[1].cpus.as_ref().unwrap().to_list_string(), "8-15");
    assert_eq!(
        (nodes[0].memory_mib, nodes[1].free_mib),
        (Some(15951), Some(15702))
    );
    assert_eq!(v.distances, Some(vec![vec![10, 20], vec![20, 10]]));
    assert_eq!(
        (
            v.hugepages_total,
            v.hugepages_free,
            v.hugepages_rsvd,
            v.hugepages_surp
        ),
        (Some(30), Some(2), Some(1), Some(0))
    );
    assert_eq!(
        (v.hugepage_size_kib, v.hugetlb_kib),
        (Some(1048576), Some(31457280))
    );
    assert_eq!(
        v.summary(),
        "16 CPUs (2 sockets × 4 cores × 2 threads); 2 NUMA nodes (0: CPUs 0-7 15951 MiB; 1: CPUs 8-15 16125 MiB); hugepages 30 × 1048576 kB, 2 free"
    );
    for (rel, source) in [
        ("view/numactl-2node.txt", ViewSource::NumactlHardware),
        ("view/numactl-nonuma.txt", ViewSource::NumactlHardware),
        ("view/lscpu-2node.txt", ViewSource::Lscpu),
        ("view/meminfo-1g.txt", ViewSource::Meminfo),
    ] {
        assert_eq!(view::detect(&fixture(rel)), Some(source), "{rel}");
        // a view file is a fact, never a benchmark output
        assert!(read_any(&fixture(rel)).is_err(), "{rel}");
    }
    let none = view::numactl_hardware(&fixture("view/numactl-nonuma.txt")).unwrap();
    assert_eq!(none.nodes, Some(vec![]));
}

#[test]
fn bad_view_files_are_one_line_errors() {
    let e = view::meminfo("HugePages_Total: many\n").unwrap_err();
    assert_eq!(
        e.to_string(),
        "/proc/meminfo: line 1: expected a count: `HugePages_Total: many`"
    );
    let e = view::meminfo("Hugepagesize: 2048\nHugePages_Total: 1\n").unwrap_err();
    assert!(e.to_string().contains("expected `N kB`"), "{e}");
    let e = view::numactl_hardware("available: 1 nodes (0)\nnode 0 size: lots MB\n").unwrap_err();
    assert!(
        e.to_string().starts_with("numactl --hardware: line 2:"),
        "{e}"
    );
    assert!(view::lscpu("hello\n").is_err());
    assert!(
        view::meminfo("MemTotal: 1 kB\n").is_err(),
        "no hugepage lines"
    );
}

#[test]
fn generic_lines_stay_generic() {
    // the existing `name value unit` shape is not taken for the new readers
    let text = "fp16_matmul 187.3 TFLOP/s\nh2d_copy: 24.6 GB/s\n";
    assert_eq!(read_any(text).unwrap().0, Tool::Generic);
}

// --- property tests --------------------------------------------------------------------

fn sizes() -> impl Strategy<Value = Vec<u64>> {
    prop::collection::btree_set(
        prop_oneof![
            1u64..(1 << 40),
            (0u32..31).prop_map(|s| 1u64 << s),
            (1u64..4096).prop_map(|k| k << 10)
        ],
        2..24,
    )
    .prop_map(|s| s.into_iter().collect())
}

fn label() -> impl Strategy<Value = Option<String>> {
    prop::option::of(
        prop::sample::select(vec!["L1", "L2", "L3", "DRAM", "remote DRAM", "hit #2"])
            .prop_map(String::from),
    )
}

fn gpu_copies() -> impl Strategy<Value = Vec<Vec<synth::Copy>>> {
    prop::collection::vec(
        prop::collection::btree_map((0usize..2, any::<bool>()), 1u64..100_000, 1..4).prop_map(
            |m| {
                m.into_iter()
                    .map(|((d, p), v)| (d, p, v as f64 / 100.0))
                    .collect()
            },
        ),
        1..5,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn chase_curve_recovered(
        style in prop::sample::select(SizeStyle::ALL.to_vec()),
        sizes in sizes(),
        ns in prop::collection::vec(0u64..10_000_000, 24),
        labels in prop::collection::vec(label(), 24),
    ) {
        let points: Vec<(u64, f64, Option<String>)> = sizes
            .iter()
            .zip(&ns)
            .zip(&labels)
            .map(|((s, n), l)| (*s, *n as f64 / 100.0, l.clone()))
            .collect();
        let text = synth::chase(style, &points);
        let ms = read_as(&text, Tool::PointerChase);
        prop_assert_eq!(ms.len(), points.len());
        for (m, (s, n, l)) in ms.iter().zip(&points) {
            prop_assert_eq!(m.size_bytes, Some(*s));
            prop_assert_eq!(m.value, fixed(*n, 2));
            // a label with `#` in it keeps what follows the first `#`
            prop_assert_eq!(m.note.clone(), l.clone());
        }
    }

    #[test]
    fn matmul_recovered(
        style in prop::sample::select(MatmulStyle::ALL.to_vec()),
        rows in prop::collection::btree_map((1u64..65536, 0usize..4), 0u64..10_000_000, 1..12),
    ) {
        let rows: Vec<(u64, usize, f64)> = rows.into_iter().map(|((n, d), t)| (n, d, t as f64 / 100.0)).collect();
        let text = synth::matmul(style, &rows);
        let ms = read_as(&text, Tool::PytorchMatmul);
        prop_assert_eq!(ms.len(), rows.len());
        for (m, (n, d, t)) in ms.iter().zip(&rows) {
            prop_assert_eq!(m.param("n").map(str::to_string), Some(n.to_string()));
            prop_assert_eq!(m.param("dtype"), Some(synth::MATMUL_DTYPES[*d].1));
            prop_assert_eq!(m.value, *t);
        }
    }

    #[test]
    fn copies_recovered_per_gpu(style in prop::sample::select(CopyStyle::ALL.to_vec()), gpus in gpu_copies()) {
        let text = synth::pytorch_copies(style, &gpus);
        let ms = read_as(&text, Tool::PytorchBandwidth);
        let expected: Vec<(String, String, String, f64)> = gpus
            .iter()
            .enumerate()
            .flat_map(|(g, cs)| cs.iter().map(move |(d, p, v)| (
                g.to_string(),
                ["host_to_device", "device_to_host"][*d].to_string(),
                if *p { "pinned" } else { "pageable" }.to_string(),
                *v,
            )))
            .collect();
        let got: Vec<(String, String, String, f64)> = ms
            .iter()
            .map(|m| (
                m.param("gpu").unwrap_or("-").to_string(),
                m.param("direction").unwrap_or("-").to_string(),
                m.param("memory").unwrap_or("-").to_string(),
                m.value,
            ))
            .collect();
        prop_assert_eq!(got, expected);
        let facts = readers::facts(Tool::PytorchBandwidth, &text, &ms);
        prop_assert_eq!(facts.get("gpus").cloned(), Some(gpus.len().to_string()));
    }

    #[test]
    fn bandwidth_test_repeats_become_their_median(
        runs in prop::collection::vec(prop::collection::vec(1u64..100_000, 3), 1..8),
    ) {
        let tables = |r: &Vec<u64>| -> Vec<synth::BandwidthTable> {
            (0..3).map(|d| synth::BandwidthTable {
                direction: d,
                pinned: true,
                write_combined: false,
                devices: 1,
                rows: vec![(32_000_000, r[d] as f64 / 10.0)],
            }).collect()
        };
        let text: String = runs
            .iter()
            .map(|r| synth::bandwidth_test(synth::BandwidthTestStyle::ReadableGb, &tables(r)))
            .collect();
        let ms = read_as(&text, Tool::BandwidthTest);
        prop_assert_eq!(ms.len(), 3 * runs.len());
        let one = readers::collapse(&ms, Tool::BandwidthTest.repeat_rule());
        prop_assert_eq!(one.len(), 3);
        for (d, m) in one.iter().enumerate() {
            let vals: Vec<f64> = runs.iter().map(|r| r[d] as f64 / 10.0).collect();
            let median = bench::stats::Summary::of(&vals).unwrap().median;
            prop_assert_eq!(m.value, median);
            prop_assert_eq!(m.repeat, None);
        }
    }

    #[test]
    fn stream_under_a_binding_line_gets_it(
        c in 0u32..8, mem in 0u32..8, rate in 1u64..10_000_000,
        spelling in 0usize..3,
    ) {
        let line = match spelling {
            0 => format!("numactl --cpunodebind={c} --membind={mem} ./stream"),
            1 => format!("+ numactl -N {c} -m {mem} ./stream"),
            _ => format!("# cpunodebind={c} membind={mem}"),
        };
        let r = rate as f64 / 10.0;
        let text = format!("{line}\n{}", synth::stream(StreamStyle::C510, &[[r, 0.1, 0.1, 0.1]; 4], false));
        let ms = read_as(&text, Tool::Stream);
        let want_locality = if c == mem { "local" } else { "remote" };
        for m in &ms {
            prop_assert_eq!(m.param("cpunodebind").map(str::to_string), Some(c.to_string()));
            prop_assert_eq!(m.param("membind").map(str::to_string), Some(mem.to_string()));
            prop_assert_eq!(m.param("locality"), Some(want_locality));
        }
        prop_assert_eq!(find(&ms, "triad", &[])[0].value, r);
    }

    #[test]
    fn nccl_env_and_ranks_recovered(
        env in prop::collection::btree_map("NCCL_[A-Z][A-Z_]{2,12}", "[0-9A-Za-z]{1,6}", 0..5),
    ) {
        let env: Vec<(String, String)> = env.into_iter().collect();
        let rows = [synth::NcclRow {
            size: 1048576,
            count: 262144,
            dtype: "float".into(),
            redop: "sum".into(),
            root: -1,
            halves: [vec![28.15, 37.25, 65.19], vec![27.52, 38.1, 66.67]],
        }];
        let text = format!(
            "{}{}",
            synth::nccl_env(&env),
            synth::nccl(synth::NcclStyle::V2022, Some("all_reduce_perf"), &rows, 65.93)
        );
        let ms = read_as(&text, Tool::NcclTests);
        let facts = readers::facts(Tool::NcclTests, &text, &ms);
        let mut want: BTreeMap<String, String> = env.iter().cloned().collect();
        want.insert("ranks".into(), "2".into());
        want.insert("gpus".into(), "2".into());
        want.insert("nthread".into(), "1".into());
        prop_assert_eq!(facts, want);
    }

    #[test]
    fn guest_view_recovered(
        sockets in 1u32..4, cores in 1u32..9, threads in 1u32..3,
        split in 1usize..5,
        mib in prop::collection::vec(1u64..1_000_000, 4),
        huge in (0u64..100_000, 0u64..100_000, 0u64..100, 0u64..100),
        size_kib in prop::sample::select(vec![2048u64, 1048576]),
    ) {
        let cpus = sockets * cores * threads;
        let per = cpus.div_ceil(split as u32);
        let nodes: Vec<Vec<u32>> = (0..cpus).collect::<Vec<_>>().chunks(per as usize).map(<[u32]>::to_vec).collect();
        let numa: Vec<(Vec<u32>, u64, u64)> = nodes.iter().enumerate().map(|(i, c)| (c.clone(), mib[i % 4], mib[i % 4] / 2)).collect();
        let (total, free, rsvd, surp) = huge;
        let free = free.min(total);
        let texts = [
            synth::numactl_hardware(&numa),
            synth::lscpu(sockets, cores, threads, &nodes),
            synth::meminfo(total, free, rsvd, surp, size_kib),
        ];
        let mut v = GuestView::default();
        for t in &texts {
            let (_, got) = view::read_any(t).expect("detected").expect("read");
            v = v.merge(got);
        }
        prop_assert_eq!(v.cpus, Some(cpus));
        prop_assert_eq!((v.sockets, v.cores_per_socket, v.threads_per_core), (Some(sockets), Some(cores), Some(threads)));
        let got_nodes = v.nodes.clone().unwrap();
        prop_assert_eq!(got_nodes.len(), nodes.len());
        for (i, n) in got_nodes.iter().enumerate() {
            prop_assert_eq!(n.id as usize, i);
            prop_assert_eq!(n.cpus.as_ref().unwrap().iter().collect::<Vec<u32>>(), nodes[i].clone());
            prop_assert_eq!(n.memory_mib, Some(mib[i % 4]));
            prop_assert_eq!(n.free_mib, Some(mib[i % 4] / 2));
        }
        prop_assert_eq!((v.hugepages_total, v.hugepages_free, v.hugepages_rsvd, v.hugepages_surp), (Some(total), Some(free), Some(rsvd), Some(surp)));
        prop_assert_eq!((v.hugepage_size_kib, v.hugetlb_kib), (Some(size_kib), Some(total * size_kib)));
    }

    /// No reader or view parser panics, and every error is one line.
    #[test]
    fn new_parsers_never_panic(text in "(\\PC{0,40}\n){0,12}") {
        for tool in [Tool::PointerChase, Tool::PytorchMatmul, Tool::PytorchBandwidth, Tool::Stream, Tool::NcclTests] {
            if let Err(e) = tool.read(&text) {
                prop_assert!(!e.to_string().contains('\n'));
            }
        }
        for source in ViewSource::ALL {
            if let Err(e) = source.read(&text) {
                prop_assert!(!e.to_string().contains('\n'));
            }
        }
        let _ = readers::nccl::facts(&text);
        let _ = readers::pytorch::facts(&text);
    }
}
