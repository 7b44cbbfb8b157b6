//! `analyze --all` per boot as a node's boots grow: one node of generated boots (the Kata
//! GPU boot study's, with the host pin trace and `kubectl describe` of every boot), its
//! lines read once, then every boot analyzed. Each boot's analysis looks up the trace's
//! calls near its own time window, so the time per boot stays flat from 20 to 160 boots:
//! measured 0.24 and 0.21 ms per boot (4.75 and 33.6 ms), where reading the whole trace
//! for every boot took 0.33 and 1.29 ms per boot (6.67 and 207 ms). The baseline is the
//! 20-boot node in the same run.

use bootprof::fleet::{self, FleetOptions};
use bootprof::parse::ingest::{Ingest, Ingester, Options};
use bootprof::synth::{fleet as gen_fleet, Spec};
use criterion::{criterion_group, criterion_main, Criterion, Throughput};

fn node(boots: usize) -> Ingest {
    let specs: Vec<Spec> = (0..boots)
        .map(|i| {
            let mut s = Spec::study(100 + i as u64);
            s.kubectl = true;
            s
        })
        .collect();
    let start = bootprof::parse::time::parse_rfc3339("2026-03-02T08:15:00.25Z").expect("start");
    let nodes = gen_fleet(
        &[("gpu-01".to_string(), specs)],
        start,
        4 * 3600 + 17 * 60 + 13,
    );
    let mut ing = Ingester::new(Options::default());
    for n in &nodes {
        ing.read("journal", n.journal.as_bytes()).expect("journal");
        if let Some(b) = &n.bpftrace {
            ing.read("pins", b.as_bytes()).expect("trace");
        }
        if let Some(k) = &n.kubectl {
            ing.read("pods", k.as_bytes()).expect("kubectl");
        }
    }
    ing.finish()
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("fleet_one_traced_node");
    g.sample_size(10);
    for boots in [20usize, 160] {
        let ing = node(boots);
        g.throughput(Throughput::Elements(boots as u64));
        g.bench_function(format!("{boots}_boots"), |b| {
            b.iter(|| {
                let f = fleet::analyze(
                    &ing,
                    &FleetOptions {
                        threads: Some(1),
                        ..FleetOptions::default()
                    },
                );
                assert_eq!(f.rows.len(), boots);
                f
            })
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
