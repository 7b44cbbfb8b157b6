//! Planning 16 VMs one after another (each plan a tenant of the next) on big hosts, against
//! the baseline of loading the host's topology file in the same run.
//!
//! Hosts: the 384-PU 2x EPYC 9654, the 384-PU 24-node SGI UV and the 8-GPU servers (g4dn.metal, Supermicro with 8 MI50,
//! HPE EX235A with 8 MI250X GCDs). After criterion's own report, a summary prints
//! `plan16 / load` per host: the target is a plan (all 16) costing less than one load.

use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion};
use plan::{GuestOs, HugepagePolicy, Profile, Request, Tenant};
use topo::Host;

const FILES: &[&str] = &[
    "AMD-19h-Zen4-2xEpyc-9654.xml",
    "192em64t-24n8c2t.xml",
    "g4dnmetal.xml",
    "epyc-corona-p2.xml",
    "eas-tioga.xml",
];

fn dir() -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    [
        std::env::var_os("VMTUNE_TOPOLOGIES").map(|p| PathBuf::from(p).join("hwloc")),
        Some(root.join("testdata/topologies/hwloc")),
        Some(root.join("../shared/topologies/hwloc")),
    ]
    .into_iter()
    .flatten()
    .find(|p| p.is_dir())
    .unwrap_or_else(|| root.join("../shared/topologies/hwloc"))
}

/// 16 tenants: on GPU hosts the first 8 get a GPU each (4 vCPUs), the rest 2 vCPUs, 8 GiB each; on the
/// 384-PU hosts (no PCI in the files) 16 vCPUs each. Returns how many were placed.
fn plan16(host: &Host) -> usize {
    let gpus: Vec<String> = host.gpus().map(|g| g.bdf.clone()).collect();
    let mut tenants: Vec<Tenant> = Vec::with_capacity(16);
    for i in 0..16 {
        let gpu = gpus.get(i).cloned();
        let vcpus = match (&gpu, gpus.is_empty()) {
            (_, true) => 16,
            (Some(_), _) => 4,
            (None, _) => 2,
        };
        let req = Request {
            name: Some(format!("tenant{i}")),
            vcpus,
            memory_bytes: 8 << 30,
            devices: gpu.into_iter().collect(),
            profile: Profile::Compute,
            os: GuestOs::Linux,
            hugepages: HugepagePolicy::Auto,
            host_cpus: None,
            move_host_cpus: false,
            // sibling pairs, as the figures before --threads were measured (a core per vCPU
            // fits fewer of these tenants by design)
            threads: plan::ThreadPolicy::Pack,
        };
        match plan::plan(&req, host, &tenants) {
            Ok(p) => tenants.push(Tenant::from_plan(&p)),
            Err(_) => break,
        }
    }
    tenants.len()
}

fn load(path: &Path) -> Option<Host> {
    match topo::load_path(path) {
        Ok(h) => Some(h),
        Err(e) => {
            eprintln!("skipping {}: {e}", path.display());
            None
        }
    }
}

fn bench(c: &mut Criterion) {
    let dir = dir();
    for f in FILES {
        let path = dir.join(f);
        let Some(host) = load(&path) else { continue };
        let placed = plan16(&host);
        assert_eq!(placed, 16, "{f}: only {placed} of 16 tenants placed");
        let mut g = c.benchmark_group(*f);
        g.bench_function("load topology", |b| b.iter(|| load(black_box(&path))));
        g.bench_function("plan 16 tenants", |b| b.iter(|| plan16(black_box(&host))));
        g.finish();
    }
}

/// Mean time of `f` over at least `min` and `iters` runs.
fn mean(mut f: impl FnMut(), iters: u32, min: Duration) -> Duration {
    let start = Instant::now();
    let mut n = 0u32;
    while n < iters || start.elapsed() < min {
        f();
        n += 1;
    }
    start.elapsed() / n
}

/// Rounds of the summary: load and plan are timed back to back in each round, so a burst of
/// load on a shared machine hits both sides of one ratio; the median round is reported.
const ROUNDS: usize = 9;

fn summary() {
    let dir = dir();
    println!(
        "\nplan 16 sequential tenants vs load the topology (same run: {ROUNDS} rounds of load then plan, median round):"
    );
    for f in FILES {
        let path = dir.join(f);
        let Some(host) = load(&path) else { continue };
        let mut rounds: Vec<(f64, Duration, Duration)> = (0..ROUNDS)
            .map(|_| {
                let l = mean(
                    || drop(black_box(load(&path))),
                    5,
                    Duration::from_millis(200),
                );
                let p = mean(
                    || {
                        black_box(plan16(&host));
                    },
                    5,
                    Duration::from_millis(200),
                );
                (p.as_secs_f64() / l.as_secs_f64(), l, p)
            })
            .collect();
        rounds.sort_by(|a, b| a.0.total_cmp(&b.0));
        let (ratio, l, p) = rounds[ROUNDS / 2];
        println!(
            "  {f:<30} {} PUs: load {:>9.3} ms, plan16 {:>8.3} ms ({:>7.3} ms per plan), plan16/load = {:.3} (rounds {:.3}-{:.3})",
            host.pus.len(),
            l.as_secs_f64() * 1e3,
            p.as_secs_f64() * 1e3,
            p.as_secs_f64() * 1e3 / 16.0,
            ratio,
            rounds[0].0,
            rounds[ROUNDS - 1].0
        );
    }
}

criterion_group!(benches, bench);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    summary();
}
