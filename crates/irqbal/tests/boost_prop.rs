//! The booster against random streams of accepts and sleeps from several VMs: a vCPU is never
//! raised twice without being lowered between, no boost outlasts the budget, every raise is
//! lowered by the end, and each VM's boosted time stays within its share of a CPU (the bucket
//! plus what refilled over the stream) — so a co-tenant keeps at least `1 - max_share` of a
//! CPU whatever the boosted VM does.

use std::collections::BTreeMap;

use irqbal::wait::boost::{BoostAction, BoostConfig, BoostOn, Booster};
use irqbal::wait::{VcpuState, WaitEvent};
use proptest::prelude::*;

fn event() -> impl Strategy<Value = (u64, u32, u32, u8)> {
    (1u64..3_000_000, 1u32..4, 0u32..3, 0u8..6)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    #[test]
    fn boosts_respect_budget_share_and_pairing(
        evs in prop::collection::vec(event(), 1..300),
        budget_us in 50u64..5_000,
        share_pct in 1u32..50,
    ) {
        let cfg = BoostConfig {
            budget_ns: budget_us * 1000,
            max_share: f64::from(share_pct) / 100.0,
            window_ns: 100_000_000,
            on: BoostOn::Waiting,
            grace_ns: 0,
        };
        let mut b = Booster::new(cfg);
        let mut now = 0u64;
        let mut raised: BTreeMap<(u32, u32), u64> = BTreeMap::new();
        let mut boosted: BTreeMap<u32, u64> = BTreeMap::new();
        let mut check = |acts: Vec<BoostAction>, now: u64| -> Result<(), TestCaseError> {
            for a in acts {
                match a {
                    BoostAction::Raise { vm, vcpu, tid } => {
                        prop_assert_eq!(tid, vm * 100 + vcpu);
                        prop_assert!(raised.insert((vm, vcpu), now).is_none(), "raised twice");
                    }
                    BoostAction::Lower { vm, vcpu, .. } => {
                        let since = raised.remove(&(vm, vcpu));
                        prop_assert!(since.is_some(), "lowered without a raise");
                        let d = now - since.unwrap_or(now);
                        prop_assert!(d <= cfg.budget_ns, "boost of {} ns", d);
                        *boosted.entry(vm).or_default() += d;
                    }
                }
            }
            Ok(())
        };
        for (gap, vm, vcpu, kind) in evs {
            // budget expiries happen between events, on time
            while let Some(d) = b.next_deadline().filter(|&d| d <= now + gap) {
                let acts = b.on_tick(d);
                check(acts, d)?;
            }
            now += gap;
            let tid = vm * 100 + vcpu;
            let e = match kind {
                0 => WaitEvent::Blocked { ts_ns: now, vm, vcpu, tid },
                k => WaitEvent::accept(
                    now,
                    vm,
                    vcpu,
                    [VcpuState::Preempted, VcpuState::Blocked, VcpuState::Guest,
                     VcpuState::Host, VcpuState::Preempted][usize::from(k) - 1],
                    (k != 5).then_some(tid),
                ),
            };
            let acts = b.on_event(&e, now, |v, c| Some(v * 100 + c));
            check(acts, now)?;
        }
        let acts = b.lower_all(now);
        check(acts, now)?;
        prop_assert!(raised.is_empty());
        for (vm, ns) in boosted {
            let cap = cfg.max_share * cfg.window_ns as f64 + cfg.max_share * now as f64;
            prop_assert!(ns as f64 <= cap + 1.0, "VM {vm}: {ns} ns boosted, cap {cap}");
            prop_assert_eq!(Some(&ns), b.stats().boosted_ns.get(&vm));
        }
    }
}
