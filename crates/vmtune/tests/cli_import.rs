//! `vmtune bench import DIR` on a results tree in the r/VFIO pinning study's shape
//! (`results/<gpu>/<config>/`), made at run time from REAL outputs of this machine — sysbench
//! cpu and memory, a STREAM built here with gcc (run plain and under `numactl
//! --cpunodebind/--membind`), `numactl --hardware`, `lscpu` and `/proc/meminfo` — plus the
//! GPU tools' fixtures (crates/bench/tests/fixtures/readers: PyTorch matmul and host↔device,
//! `bandwidthTest` ×5, nccl-tests `all_reduce_perf` with `NCCL_P2P_DISABLE=1`, a latency
//! curve). Checks the configs, the figures against the raw outputs, the hugepage totals
//! against /proc/meminfo, the JSON, text and HTML. A missing tool is a named skip.

mod common;
use common::{run, vmtune};

use std::path::{Path, PathBuf};
use std::process::Command;

/// A small STREAM written for this test (the four kernels of McCalpin's stream.c 5.10 over
/// three arrays, NTIMES passes, the first not counted, best rate = bytes moved / min time),
/// printing stream.c 5.10's table: `Function    Best Rate MB/s  Avg time     Min time     Max
/// time` and rows `%s%12.1f  %11.6f  %11.6f  %11.6f`.
const STREAM_C: &str = r#"
#include <stdio.h>
#include <float.h>
#include <sys/time.h>
#define N 2000000
#define NTIMES 6
static double a[N], b[N], c[N];
static double now(void) { struct timeval t; gettimeofday(&t, 0); return t.tv_sec + t.tv_usec * 1e-6; }
int main(void) {
    const char *label[4] = {"Copy:      ", "Scale:     ", "Add:       ", "Triad:     "};
    double bytes[4] = {2 * sizeof(double) * (double)N, 2 * sizeof(double) * (double)N,
                       3 * sizeof(double) * (double)N, 3 * sizeof(double) * (double)N};
    double avg[4] = {0}, min[4] = {FLT_MAX, FLT_MAX, FLT_MAX, FLT_MAX}, max[4] = {0}, t[4];
    double s = 3.0;
    long j;
    for (j = 0; j < N; j++) { a[j] = 1.0; b[j] = 2.0; c[j] = 0.0; }
    printf("-------------------------------------------------------------\n");
    printf("STREAM version $Revision: 5.10 $ (cli_import's own build)\n");
    printf("-------------------------------------------------------------\n");
    printf("Array size = %d (elements), Offset = 0 (elements)\n", N);
    printf("Each kernel will be executed %d times.\n", NTIMES);
    for (int k = 0; k < NTIMES; k++) {
        t[0] = now(); for (j = 0; j < N; j++) c[j] = a[j]; t[0] = now() - t[0];
        t[1] = now(); for (j = 0; j < N; j++) b[j] = s * c[j]; t[1] = now() - t[1];
        t[2] = now(); for (j = 0; j < N; j++) c[j] = a[j] + b[j]; t[2] = now() - t[2];
        t[3] = now(); for (j = 0; j < N; j++) a[j] = b[j] + s * c[j]; t[3] = now() - t[3];
        if (k == 0) continue;
        for (int i = 0; i < 4; i++) {
            if (t[i] < 1e-6) t[i] = 1e-6;
            avg[i] += t[i];
            if (t[i] < min[i]) min[i] = t[i];
            if (t[i] > max[i]) max[i] = t[i];
        }
    }
    printf("-------------------------------------------------------------\n");
    printf("Function    Best Rate MB/s  Avg time     Min time     Max time\n");
    for (int i = 0; i < 4; i++)
        printf("%s%12.1f  %11.6f  %11.6f  %11.6f\n", label[i], 1.0e-6 * bytes[i] / min[i],
               avg[i] / (NTIMES - 1), min[i], max[i]);
    printf("-------------------------------------------------------------\n");
    printf("Solution Validates: checksum %g\n", a[N / 2] + b[N / 3] + c[N / 4]);
    return 0;
}
"#;

fn have(tool: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {tool}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// `cmd` run through `sh -c`, its stdout (the test fails if it does).
fn sh(cmd: &str) -> String {
    let o = Command::new("sh").args(["-c", cmd]).output().unwrap();
    assert!(
        o.status.success(),
        "{cmd}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8(o.stdout).unwrap()
}

/// The number after `key` on the line that has it (the test's own reading of a raw output).
fn after(text: &str, key: &str) -> f64 {
    let line = text
        .lines()
        .find(|l| l.contains(key))
        .unwrap_or_else(|| panic!("{key} in {text}"));
    let rest = &line[line.find(key).unwrap() + key.len()..];
    rest.split_whitespace()
        .next()
        .unwrap()
        .trim_end_matches(['s', ','])
        .parse()
        .unwrap_or_else(|e| panic!("{key} in {line}: {e}"))
}

fn fixture(rel: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../bench/tests/fixtures/readers")
        .join(rel)
}

/// One config's directory: this machine's outputs, then the GPU fixtures.
fn config(dir: &Path, stream: &Path) -> std::collections::BTreeMap<&'static str, String> {
    std::fs::create_dir_all(dir).unwrap();
    let mut raw = std::collections::BTreeMap::new();
    let mut put = |name: &'static str, text: String| {
        std::fs::write(dir.join(name), &text).unwrap();
        raw.insert(name, text);
    };
    put("sysbench.txt", sh("sysbench cpu --threads=1 --time=1 run"));
    put(
        "sysbench_memory.txt",
        sh("sysbench memory --threads=1 --time=1 --memory-total-size=512M run"),
    );
    put("stream.txt", sh(&stream.display().to_string()));
    // the study's per-node run: the binding echoed before the output, and in the file's name
    let s = stream.display();
    put(
        "stream_node0_mem0.txt",
        sh(&format!(
            "echo '+ numactl --cpunodebind=0 --membind=0 {s}'; numactl --cpunodebind=0 --membind=0 {s}"
        )),
    );
    put("numactl.txt", sh("numactl --hardware"));
    put("lscpu.txt", sh("LC_ALL=C lscpu"));
    put("meminfo.txt", sh("cat /proc/meminfo"));
    for (name, rel) in [
        ("matmul.txt", "pytorch/matmul.txt"),
        ("h2d.txt", "pytorch/h2d-2gpu.txt"),
        ("bandwidthTest.txt", "bandwidth_test/cuda12-quick-x5.txt"),
        (
            "all_reduce_perf.txt",
            "nccl/all_reduce_perf-p2p-disabled.txt",
        ),
        ("latency.txt", "chase/latency-study.txt"),
    ] {
        put(name, std::fs::read_to_string(fixture(rel)).unwrap());
    }
    put("notes.md", "config written by cli_import\n".to_string());
    raw
}

/// The median of `name`'s samples in `layout`'s figures of the report.
fn figure(report: &serde_json::Value, layout: usize, name: &str) -> (f64, usize) {
    let metrics = report["per_layout"][layout]["metrics"].as_array().unwrap();
    let m = metrics
        .iter()
        .find(|m| m["name"] == name)
        .unwrap_or_else(|| {
            panic!(
                "{name} not among {:?}",
                metrics.iter().map(|m| &m["name"]).collect::<Vec<_>>()
            )
        });
    let s: Vec<f64> = m["samples"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    let mut sorted = s.clone();
    sorted.sort_by(f64::total_cmp);
    (sorted[sorted.len() / 2], s.len())
}

#[test]
fn import_reads_a_study_tree_of_real_outputs() {
    for tool in ["sysbench", "numactl", "lscpu", "gcc"] {
        if !have(tool) {
            eprintln!("skipped: {tool} not installed (apt-get install sysbench numactl gcc)");
            return;
        }
    }
    if sh("numactl --hardware").contains("No NUMA available") {
        eprintln!("skipped: numactl finds no NUMA here (the per-node STREAM cannot bind)");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let src = tmp.path().join("stream.c");
    let bin = tmp.path().join("stream");
    std::fs::write(&src, STREAM_C).unwrap();
    sh(&format!("gcc -O2 -o {} {}", bin.display(), src.display()));
    let results = tmp.path().join("results");
    let gpu = results.join("rtx4090");
    // B before A on disk order does not matter: configs are in name order
    let raw_b = config(&gpu.join("B"), &bin);
    let raw_a = config(&gpu.join("A"), &bin);
    let out = tmp.path().join("out");
    let o = run(&[
        "bench",
        "import",
        results.to_str().unwrap(),
        "--json",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let sets = v["sets"].as_array().unwrap();
    assert_eq!(sets.len(), 1);
    assert_eq!(sets[0]["gpu"], "rtx4090");
    let report = &sets[0]["report"];
    let configs: Vec<&str> = report["layouts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["name"].as_str().unwrap())
        .collect();
    assert_eq!(configs, ["A", "B"]);
    assert_eq!(
        report["comparison"]["configs"],
        serde_json::json!(["A", "B"])
    );

    // every file read by the reader it is, the notes file listed as not read
    let files = sets[0]["files"].as_array().unwrap();
    let read_as = |config: &str, file: &str| {
        files
            .iter()
            .find(|f| f["config"] == config && f["file"] == file)
            .map(|f| f["read_as"].as_str().unwrap_or("-").to_string())
            .unwrap()
    };
    for (file, tool) in [
        ("sysbench.txt", "sysbench-cpu"),
        ("sysbench_memory.txt", "sysbench-memory"),
        ("stream.txt", "stream"),
        ("stream_node0_mem0.txt", "stream"),
        ("numactl.txt", "numactl-hardware"),
        ("lscpu.txt", "lscpu"),
        ("meminfo.txt", "meminfo"),
        ("matmul.txt", "pytorch-matmul"),
        ("h2d.txt", "pytorch-bandwidth"),
        ("bandwidthTest.txt", "bandwidth-test"),
        ("all_reduce_perf.txt", "nccl-tests"),
        ("latency.txt", "pointer-chase"),
        ("notes.md", "-"),
    ] {
        assert_eq!(read_as("A", file), tool, "{file}");
    }

    // the figures are the raw outputs' own
    for (i, raw) in [&raw_a, &raw_b].into_iter().enumerate() {
        let eps = after(&raw["sysbench.txt"], "events per second:");
        assert_eq!(
            figure(report, i, "sysbench.sysbench-cpu.events_per_second"),
            (eps, 1)
        );
        let rate = after(&raw["sysbench_memory.txt"], "transferred (");
        assert_eq!(
            figure(report, i, "sysbench_memory.sysbench-memory.transfer_rate"),
            (rate, 1)
        );
        let triad = after(&raw["stream.txt"], "Triad:");
        assert_eq!(figure(report, i, "stream.stream.triad"), (triad, 1));
        let local = after(&raw["stream_node0_mem0.txt"], "Triad:");
        assert_eq!(
            figure(
                report,
                i,
                "stream_node0_mem0.stream.triad.cpunodebind=0.locality=local.membind=0"
            ),
            (local, 1)
        );
    }
    // five bandwidthTest runs in one file: five repeats of A's figure (median 24.6)
    assert_eq!(
        figure(report, 0, "bandwidthTest.bandwidthTest.bandwidth.size=32000000.devices=1.direction=host_to_device.memory=pinned"),
        (24.6, 5)
    );
    // per-GPU copies, the NCCL curve, the matmul and the latency curve
    assert_eq!(
        figure(
            report,
            0,
            "h2d.pytorch-bandwidth.bandwidth.direction=host_to_device.gpu=1.memory=pinned"
        )
        .0,
        13.2
    );
    assert_eq!(
        figure(report, 1, "all_reduce_perf.nccl-tests.busbw.size=134217728.collective=all_reduce_perf.count=33554432.placement=out-of-place.redop=sum.type=float").0,
        10.99
    );
    assert_eq!(
        figure(report, 0, "matmul.pytorch-matmul.tflops.dtype=bf16.n=8192").0,
        160.02
    );
    assert_eq!(
        figure(report, 1, "latency.pointer-chase.latency.size=67108864").0,
        86.1
    );
    let names: Vec<&str> = report["per_layout"][0]["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert!(!names.iter().any(|n| n.contains("Detected")), "{names:?}");

    // the guest views: CPUs and nodes from numactl/lscpu, hugepages from /proc/meminfo
    let meminfo = &raw_a["meminfo.txt"];
    let total = after(meminfo, "HugePages_Total:") as u64;
    let free = after(meminfo, "HugePages_Free:") as u64;
    let size = after(meminfo, "Hugepagesize:") as u64;
    let cpus = after(&raw_a["lscpu.txt"], "CPU(s):") as u64;
    let nodes = raw_a["numactl.txt"]
        .lines()
        .filter(|l| l.contains(" cpus:"))
        .count();
    for c in ["A", "B"] {
        let view = &report["views"][c];
        assert_eq!(view["hugepages_total"], total, "{c}");
        assert_eq!(view["hugepage_size_kib"], size, "{c}");
        assert!(view["hugepages_free"].as_u64().unwrap() <= total.max(free));
        assert_eq!(view["cpus"], cpus, "{c}");
        assert_eq!(view["nodes"].as_array().unwrap().len(), nodes, "{c}");
    }
    let guest = report["layouts"][0]["guest"].as_str().unwrap();
    assert!(guest.starts_with(&format!("{cpus} CPUs")), "{guest}");
    assert!(
        guest.contains(&format!("hugepages {total} × {size} kB")),
        "{guest}"
    );

    // settings and repeats said; nothing to check against a planner
    let notes: Vec<&str> = report["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("A/bandwidthTest: 5 repeats")),
        "{notes:?}"
    );
    assert!(
        notes.contains(&"all_reduce_perf: NCCL_P2P_DISABLE = 1 in every layout"),
        "{notes:?}"
    );
    assert!(
        notes.contains(&"all_reduce_perf: ranks = 2 in every layout"),
        "{notes:?}"
    );
    assert!(
        notes.contains(&"h2d: gpus = 2 in every layout"),
        "{notes:?}"
    );
    assert_eq!(report["partial"], false);
    assert_eq!(
        report["verdict"][0],
        "imported results: no choice to check."
    );

    // the files written: the same report, and a self-contained HTML with the charts
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("rtx4090/matrix.json")).unwrap())
            .unwrap();
    assert_eq!(&json, report);
    let html = std::fs::read_to_string(out.join("rtx4090/matrix.html")).unwrap();
    // self-contained: no scripts, nothing loaded from elsewhere
    assert!(!html.contains("<script"));
    assert!(!html.contains("src=\"") && !html.contains("href=\"http"));
    for title in [
        "all_reduce_perf: nccl-tests busbw",
        "latency: pointer-chase latency",
        "stream_node0_mem0: stream",
        "h2d: pytorch-bandwidth",
        "bandwidthTest: bandwidthTest",
        "matmul: pytorch-matmul",
    ] {
        assert!(html.contains(&format!("aria-label=\"{title}")), "{title}");
    }
    assert!(html.contains("class=\"chart curve\""));

    // the text answer
    let o = run(&["bench", "import", results.to_str().unwrap()]);
    assert!(o.status.success());
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(text.contains("== rtx4090 ("), "{text}");
    assert!(text.contains(&format!("guest (A): {cpus} CPUs")), "{text}");
    assert!(
        text.contains("not read: A/notes.md: no known benchmark output"),
        "{text}"
    );
}

#[test]
fn import_takes_configs_without_a_gpu_level_and_baseline_first() {
    let tmp = tempfile::tempdir().unwrap();
    for (c, rate) in [("pin", 21000.0), ("baseline", 18000.0)] {
        let d = tmp.path().join(c);
        std::fs::create_dir_all(&d).unwrap();
        let table: String = ["Copy", "Scale", "Add", "Triad"]
            .iter()
            .map(|k| {
                format!(
                    "{:<11}{rate:12.1}  {:11.6}  {:11.6}  {:11.6}\n",
                    format!("{k}:"),
                    0.01,
                    0.009,
                    0.011
                )
            })
            .collect();
        std::fs::write(
            d.join("stream.txt"),
            format!("Function    Best Rate MB/s  Avg time     Min time     Max time\n{table}"),
        )
        .unwrap();
    }
    let html = tmp.path().join("r.html");
    let o = run(&[
        "bench",
        "import",
        tmp.path().to_str().unwrap(),
        "--json",
        "--html",
        html.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let set = &v["sets"][0];
    assert!(set["gpu"].is_null());
    assert_eq!(
        set["report"]["comparison"]["configs"],
        serde_json::json!(["baseline", "pin"])
    );
    let row = set["report"]["comparison"]["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "stream.stream.triad")
        .unwrap();
    let pct = row["changes"][1]["pct"].as_f64().unwrap();
    assert!(
        (pct - (21000.0 / 18000.0 - 1.0) * 100.0).abs() < 1e-9,
        "{pct}"
    );
    assert!(std::fs::read_to_string(&html).unwrap().contains("<svg"));
}

#[test]
fn a_tree_without_configs_is_a_one_line_error() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        vec![tmp.path().to_str().unwrap().to_string()],
        vec![tmp.path().join("missing").display().to_string()],
    ] {
        let mut cmd = vmtune();
        cmd.args(["bench", "import"]).args(&args);
        let o = cmd.output().unwrap();
        assert!(!o.status.success());
        let err = String::from_utf8(o.stderr).unwrap();
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("results/<gpu>/<config>/"), "{err}");
    }
}

#[test]
fn a_config_without_benchmark_output_is_a_failed_run() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    let a = results.join("A");
    let b = results.join("B");
    std::fs::create_dir_all(&a).unwrap();
    std::fs::create_dir_all(&b).unwrap();
    std::fs::copy(fixture("chase/latency-study.txt"), a.join("latency.txt")).unwrap();
    std::fs::copy(fixture("view/meminfo-1g.txt"), b.join("meminfo.txt")).unwrap();
    std::fs::write(b.join("run.log"), "starting\nsegfault\n").unwrap();
    let out = tmp.path().join("out");
    let o = run(&[
        "bench",
        "import",
        results.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    let text = String::from_utf8(o.stdout).unwrap();
    assert!(
        text.starts_with("PARTIAL: 1 of 2 runs measured (1 failed)."),
        "{text}"
    );
    assert!(
        text.contains("no benchmark output among its files (guest-view files only)"),
        "{text}"
    );
    assert!(
        text.contains("not read: B/run.log: no known benchmark output"),
        "{text}"
    );
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("the import is partial"), "{err}");
    // the reports are written all the same, B's guest view in them
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("matrix.json")).unwrap()).unwrap();
    assert_eq!(json["partial"], true);
    assert_eq!(json["views"]["B"]["hugepages_total"], 30);
    assert!(json["views"].get("A").is_none());
}
