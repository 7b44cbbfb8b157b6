//! The irq-wait accounting against generated event sequences with known waits: several VMs
//! and vCPUs interleaved in time, wait episodes of one to four interrupts ending at the vCPU's
//! guest entry, interrupts delivered in the guest, and a last episode that may still be open
//! when the recording ends. The book recovers every count exactly and each state's median and
//! maximum within the histogram's 1 % precision.

use std::collections::BTreeMap;

use irqbal::wait::{VcpuState, WaitBook, WaitEvent};
use proptest::prelude::*;

#[derive(Debug, Clone)]
struct Episode {
    gap: u64,
    state: VcpuState,
    /// Offsets of the accepts from the episode start, ns.
    accepts: Vec<u64>,
    /// Entry this long after the last accept (`None` for a guest-mode episode).
    entry_after: u64,
}

fn episode() -> impl Strategy<Value = Episode> {
    (
        1u64..5_000_000,
        prop_oneof![
            Just(VcpuState::Preempted),
            Just(VcpuState::Blocked),
            Just(VcpuState::Host),
            Just(VcpuState::Guest),
            Just(VcpuState::Unknown),
        ],
        prop::collection::vec(0u64..200_000, 1..5),
        1u64..20_000_000,
    )
        .prop_map(|(gap, state, mut accepts, entry_after)| {
            accepts.sort_unstable();
            Episode {
                gap,
                state,
                accepts,
                entry_after,
            }
        })
}

type Key = (u32, u32, VcpuState);

#[derive(Default, Debug)]
struct Truth {
    waits: BTreeMap<Key, Vec<u64>>,
    in_guest: BTreeMap<(u32, u32), u64>,
    still: BTreeMap<(u32, u32), u64>,
}

/// One vCPU's events and what they must account to.
fn timeline(vm: u32, vcpu: u32, eps: &[Episode], open_last: bool, t: &mut Truth) -> Vec<WaitEvent> {
    let mut out = Vec::new();
    let mut now = 0u64;
    for (i, ep) in eps.iter().enumerate() {
        now += ep.gap;
        let start = now;
        for &o in &ep.accepts {
            out.push(WaitEvent::accept(start + o, vm, vcpu, ep.state, None));
        }
        let last = start + ep.accepts.last().copied().unwrap_or(0);
        if ep.state == VcpuState::Guest {
            *t.in_guest.entry((vm, vcpu)).or_default() += ep.accepts.len() as u64;
            now = last + 1;
            continue;
        }
        if open_last && i + 1 == eps.len() {
            *t.still.entry((vm, vcpu)).or_default() += ep.accepts.len() as u64;
            break;
        }
        let entry = last + ep.entry_after;
        out.push(WaitEvent::Entry {
            ts_ns: entry,
            vm,
            vcpu,
        });
        let w = t.waits.entry((vm, vcpu, ep.state)).or_default();
        w.extend(ep.accepts.iter().map(|&o| entry - (start + o)));
        now = entry + 1;
    }
    out
}

fn close(a: f64, b_ns: u64) -> bool {
    let b = b_ns as f64 / 1000.0;
    (a - b).abs() <= b * 0.011 + 0.002
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn the_book_recovers_generated_waits(
        vcpus in prop::collection::vec(
            (1u32..4, 0u32..6, prop::collection::vec(episode(), 1..12), any::<bool>()),
            1..8,
        ),
    ) {
        let mut truth = Truth::default();
        let mut events = Vec::new();
        let mut used = std::collections::BTreeSet::new();
        for (vm, vcpu, eps, open_last) in &vcpus {
            if !used.insert((*vm, *vcpu)) {
                continue;
            }
            events.extend(timeline(1000 + vm, *vcpu, eps, *open_last, &mut truth));
        }
        // the ring buffer delivers events in time order across vCPUs
        events.sort_by_key(|e| e.ts_ns());
        let mut book = WaitBook::new();
        for e in &events {
            book.push(e);
        }
        let r = book.report(None, &[]);
        prop_assert_eq!(r.unmatched_entries, 0);
        let mut seen = 0;
        for vm in &r.vms {
            for v in &vm.vcpus {
                let k = (vm.pid, v.vcpu);
                prop_assert_eq!(v.in_guest, truth.in_guest.get(&k).copied().unwrap_or(0));
                prop_assert_eq!(
                    v.still_waiting.as_ref().map_or(0, |s| s.count),
                    truth.still.get(&k).copied().unwrap_or(0)
                );
                for s in &v.states {
                    let mut w = truth.waits[&(vm.pid, v.vcpu, s.state)].clone();
                    w.sort_unstable();
                    prop_assert_eq!(s.count, w.len() as u64);
                    let max = *w.last().unwrap();
                    prop_assert!(close(s.max_us, max), "max {} vs {}", s.max_us, max);
                    let median = w[w.len().div_ceil(2) - 1];
                    prop_assert!(close(s.p50_us, median), "p50 {} vs {}", s.p50_us, median);
                    seen += 1;
                }
            }
        }
        prop_assert_eq!(seen, truth.waits.len());
    }
}
