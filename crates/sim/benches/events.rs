//! Simulator speed in events per second, against a baseline measured in the same run: a bare
//! `BinaryHeap` push/pop loop of the same event count (the floor any discrete-event engine
//! pays for its queue). Each scheduler's run is counted on its own (EEVDF switches ten times
//! as often as credit, so the two runs handle different numbers of events).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sim::{builtin, PolicyKind, SchedulerKind, Sim};

fn heap_only(events: u64) -> u64 {
    let mut h = std::collections::BinaryHeap::new();
    let mut t = 0u64;
    for i in 0..64u64 {
        h.push(std::cmp::Reverse((i * 1000, i)));
    }
    let mut n = 0u64;
    while n < events {
        if let Some(std::cmp::Reverse((tt, seq))) = h.pop() {
            t = tt;
            h.push(std::cmp::Reverse((t + 1000 + (seq % 7) * 100, seq + 64)));
        }
        n += 1;
    }
    t
}

fn bench(c: &mut Criterion) {
    let Ok(mut scs) = builtin("vbalance-fig6-udp") else {
        return;
    };
    let Some(mut sc) = scs.pop() else { return };
    sc.duration_ms = 1000;
    let sc = sc.with_message_size(1024);
    let mut g = c.benchmark_group("sim");
    for (name, sched, policy) in [
        (
            "udp-1s-credit-vbalance",
            SchedulerKind::Credit,
            PolicyKind::Vbalance,
        ),
        (
            "udp-1s-eevdf-vbalance",
            SchedulerKind::Eevdf,
            PolicyKind::Vbalance,
        ),
        (
            "udp-1s-credit-oracle",
            SchedulerKind::Credit,
            PolicyKind::VbalanceOracle,
        ),
    ] {
        // this run's own event count, so that throughput is in its events
        let Ok(sim) = Sim::new(&sc, sched, policy) else {
            return;
        };
        let Ok(st) = sim.run() else { return };
        let events = st.events;
        g.throughput(Throughput::Elements(events));
        g.bench_function(name, |b| {
            b.iter(|| {
                let Ok(sim) = Sim::new(&sc, sched, policy) else {
                    return 0;
                };
                sim.run().map_or(0, |st| st.events)
            })
        });
        g.bench_function(format!("{name}-baseline-heap-only"), |b| {
            b.iter(|| heap_only(events))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
