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
    // 12 cases by default (each is a short simulation); PROPTEST_CASES=N runs more.
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(12)
    ))]

    #[test]
    fn random_scenarios_conserve_cpu_time(
        pcpus in 1u32..4,
        vms in proptest::collection::vec((1u32..5, arb_workload(), 1u32..4), 1..3),
        kind in 0u8..3,
        credit in any::<bool>(),
        pol in 0usize..PolicyKind::ALL.len(),
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
        let policy = PolicyKind::ALL[pol];
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
        // superseded events are compacted away: the queue stays small
        prop_assert!(r.peak_queue < 100_000, "peak queue {}", r.peak_queue);
        let again = run_one(&sc, sched, policy, None).unwrap();
        prop_assert_eq!(r.events, again.events);
    }
}

/// The input that once ran for ever with >13 GiB of queued events: 3 vCPUs of an I/O
/// workload on one pCPU, TCP, credit, vBalance. A pending interrupt was moved to a halted
/// vCPU (counted online), which woke into the runqueue; the next vCPU picked had nothing to
/// do, halted, and the interrupt moved again — for ever at one instant, each switch queueing
/// a 30 ms slice end. It must now finish, and quickly.
#[test]
fn regression_pending_interrupt_bouncing_between_halted_vcpus() {
    let mut sc = builtin("vbalance-fig5").unwrap().remove(0);
    sc.duration_ms = 300;
    sc.seed = 5406206780961653592;
    sc.pcpus = 1;
    sc.vbalance.variant = sim::scenario::VbalanceVariant::Extended;
    sc.vms = vec![VmSpec {
        vcpus: 3,
        pin: None,
        workload: Workload::Io {
            compute_us: 185,
            io_us: 201,
        },
        queues: 1,
        ring: 64,
    }];
    sc.sources = vec![SourceSpec::Tcp {
        vm: 0,
        queue: 0,
        message_size: 512,
        window_kb: 32,
    }];
    let r = run_one(&sc, SchedulerKind::Credit, PolicyKind::VbalanceOracle, None).unwrap();
    assert!(r.events < 2_000_000, "{} events in 300 ms", r.events);
    assert!(r.throughput_mbps.unwrap() > 0.0);
}

/// Interrupt time charged to a vCPU exceeded its run time: a packet begun on one vCPU and
/// finished on another (its pending interrupt rebound) was charged in full to the second.
#[test]
fn regression_irq_time_is_charged_to_the_vcpu_that_spent_it() {
    let mut sc = builtin("vbalance-fig5").unwrap().remove(0);
    sc.duration_ms = 300;
    sc.seed = 5302850180831049321;
    sc.pcpus = 2;
    sc.vbalance.variant = sim::scenario::VbalanceVariant::Extended;
    sc.vms = [Workload::Idle, Workload::Burn]
        .into_iter()
        .map(|w| VmSpec {
            vcpus: 2,
            pin: None,
            workload: w,
            queues: 1,
            ring: 64,
        })
        .collect();
    sc.sources = vec![SourceSpec::Tcp {
        vm: 0,
        queue: 0,
        message_size: 512,
        window_kb: 32,
    }];
    for policy in PolicyKind::ALL {
        let r = run_one(&sc, SchedulerKind::Credit, policy, None).unwrap();
        for (irq, run) in r.vcpu_irq_ms.iter().zip(&r.vcpu_runtime_ms) {
            assert!(*irq <= run + 1e-6, "{policy:?}: irq {irq} > run {run}");
        }
    }
}
