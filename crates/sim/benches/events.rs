//! Simulator speed in events per second, against a baseline measured in the same run: a bare
//! `BinaryHeap` push/pop loop of the same event count (the floor any discrete-event engine
//! pays for its queue).

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sim::{builtin, PolicyKind, SchedulerKind, Sim};

fn bench(c: &mut Criterion) {
    let Ok(mut scs) = builtin("vbalance-fig6-udp") else {
        return;
    };
    let Some(mut sc) = scs.pop() else { return };
    sc.duration_ms = 1000;
    let sc = sc.with_message_size(1024);
    // count the events of one run first, so throughput is in events
    let Ok(sim) = Sim::new(&sc, SchedulerKind::Credit, PolicyKind::Vbalance) else {
        return;
    };
    let Ok(st) = sim.run() else { return };
    let events = st.events;
    let mut g = c.benchmark_group("sim");
    g.throughput(Throughput::Elements(events));
    for (name, sched) in [
        ("udp-1s-credit-vbalance", SchedulerKind::Credit),
        ("udp-1s-eevdf-vbalance", SchedulerKind::Eevdf),
    ] {
        g.bench_function(name, |b| {
            b.iter(|| {
                let Ok(sim) = Sim::new(&sc, sched, PolicyKind::Vbalance) else {
                    return 0;
                };
                sim.run().map_or(0, |st| st.events)
            })
        });
    }
    g.bench_function("baseline-heap-only", |b| {
        b.iter(|| {
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
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
