//! Invariants over random small scenarios: no panic, conservation of CPU time, determinism.

use proptest::prelude::*;
use sim::scenario::{SourceSpec, VmSpec, Workload};
use sim::{builtin, run_one, PolicyKind, SchedulerKind};

fn arb_workload() -> impl Strategy<Value = Workload> {
    prop_oneof![
        Just(Workload::Burn),
        Just(Workload::Idle),
        (1u64..3000, 1u64..5000).prop_map(|(c, i)| Workload::Io {
            compute_us: c,
            io_us: i
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 12, ..ProptestConfig::default() })]

    #[test]
    fn random_scenarios_conserve_cpu_time(
        pcpus in 1u32..4,
        vms in proptest::collection::vec((1u32..5, arb_workload(), 1u32..4), 1..3),
        kind in 0u8..3,
        credit in any::<bool>(),
        pol in 0u8..3,
        seed in any::<u64>(),
    ) {
        let mut sc = builtin("vbalance-fig5").unwrap().remove(0);
        sc.duration_ms = 300;
        sc.seed = seed;
        sc.pcpus = pcpus;
        sc.vbalance.variant = sim::scenario::VbalanceVariant::Extended;
        sc.vms = vms.iter().map(|&(v, w, q)| VmSpec { vcpus: v, pin: None, workload: w, queues: q, ring: 64 }).collect();
        let q = vms[0].2 - 1;
        sc.sources = vec![match kind {
            0 => SourceSpec::Ping { vm: 0, queue: q, interval_ms: 10, size: 64 },
            1 => SourceSpec::Tcp { vm: 0, queue: q, message_size: 512, window_kb: 32 },
            _ => SourceSpec::Udp { vm: 0, queue: q, message_size: 1000 },
        }];
        let sched = if credit { SchedulerKind::Credit } else { SchedulerKind::Eevdf };
        let policy = [PolicyKind::Static, PolicyKind::Irqbalance, PolicyKind::Vbalance][pol as usize];
        let r = run_one(&sc, sched, policy, None).unwrap();
        // the vCPUs of a pCPU never run more than the pCPU has time
        let total: f64 = r.vcpu_runtime_ms.iter().sum();
        prop_assert!(total <= pcpus as f64 * 300.0 + 1e-6, "{total}");
        for (irq, run) in r.vcpu_irq_ms.iter().zip(&r.vcpu_runtime_ms) {
            prop_assert!(*irq <= run + 1e-6, "irq {irq} > run {run}");
        }
        if let Some(t) = r.throughput_mbps {
            prop_assert!(t <= 1000.0 + 1e-6);
        }
        let again = run_one(&sc, sched, policy, None).unwrap();
        prop_assert_eq!(r.events, again.events);
    }
}
