//! One policy, two drivers: the simulator's host half decides with `vmtune irq boost`'s own
//! state machine. A simulated run records the events the agent's eBPF program would push on
//! the host (`vmtune sim --irq-trace`, in the JSON-lines format `vmtune irq wait --record`
//! writes) and the decisions its host half made. The recording, written out and read back, is
//! given to a `Booster` alone, driven as `vmtune irq boost` drives it: each event with its
//! time, the budget timer at the deadlines Booster names. The decisions are the same, event by
//! event, on every built-in scenario the README's vBalance-on-KVM figures come from.
//!
//! Two streams with a truth of their own: a recording checked in (`tests/data/`, one run of
//! `vbalance-shared-core` under `host-boost`, as `--irq-trace` wrote it, and the decisions
//! the simulator's host half made in that run), which the agent's policy must still decide as
//! then; and a stream written by hand whose decisions are worked out from Booster's rules.

use irqbal::wait::boost::{BoostAction, BoostConfig, Booster, LowerWhy};
use irqbal::wait::{parse_recording, Holder, VcpuState, WaitEvent};
use sim::engine::{irq_trace_tid, BoostDecision, RunStats, Sim};
use sim::{builtin, PolicyKind, Scenario, SchedulerKind};

/// The agent's policy on a recording, without the simulator.
fn replay(cfg: BoostConfig, events: &[WaitEvent], end_ns: u64) -> Vec<BoostDecision> {
    let mut b = Booster::new(cfg);
    let mut out = Vec::new();
    let mut put = |at_ns: u64, acts: Vec<BoostAction>| {
        out.extend(
            acts.into_iter()
                .map(|action| BoostDecision { at_ns, action }),
        );
    };
    for e in events {
        let now = e.ts_ns();
        // the agent's poll ends at Booster's next deadline
        while let Some(d) = b.next_deadline().filter(|&d| d <= now) {
            put(d, b.on_tick(d));
        }
        // the agent finds threads the program has not seen yet by their names
        put(
            now,
            b.on_event(e, now, |vm, vcpu| Some(irq_trace_tid(vm, vcpu))),
        );
    }
    while let Some(d) = b.next_deadline().filter(|&d| d <= end_ns) {
        put(d, b.on_tick(d));
    }
    out
}

fn scenario(name: &str, size: Option<u32>, ms: u64) -> Scenario {
    let mut sc = builtin(name).unwrap().remove(0);
    if let Some(m) = size {
        sc = sc.with_message_size(m);
    }
    sc.duration_ms = ms;
    sc.seed = 1;
    sc
}

fn traced(sc: &Scenario, policy: PolicyKind) -> RunStats {
    Sim::new(sc, SchedulerKind::Eevdf, policy)
        .unwrap()
        .trace_irq_waits()
        .run()
        .unwrap()
}

/// The recording as `vmtune sim --irq-trace` writes it, read back by the product's reader.
fn round_trip(events: &[WaitEvent]) -> Vec<WaitEvent> {
    let mut text = String::from("# vmtune sim: irq-wait events\n");
    for e in events {
        text.push_str(&serde_json::to_string(e).unwrap());
        text.push('\n');
    }
    let back = parse_recording(&text).unwrap();
    assert_eq!(back, events);
    back
}

/// The first decision where the two drivers part, in words.
fn first_difference(sim: &[BoostDecision], agent: &[BoostDecision]) -> Option<String> {
    parting(("simulator", "agent"), sim, agent)
}

/// The first decision where `a` and `b` part, in words, each side by its name.
fn parting(names: (&str, &str), a: &[BoostDecision], b: &[BoostDecision]) -> Option<String> {
    let i = a.iter().zip(b).position(|(x, y)| x != y);
    let i = i.or((a.len() != b.len()).then(|| a.len().min(b.len())))?;
    Some(format!(
        "decision {i} of {} / {}: {} {:?}, {} {:?}",
        a.len(),
        b.len(),
        names.0,
        a.get(i),
        names.1,
        b.get(i)
    ))
}

#[derive(Debug, Default)]
struct Kinds {
    raised: usize,
    halted: usize,
    budget: usize,
}

fn kinds(ds: &[BoostDecision]) -> Kinds {
    let mut k = Kinds::default();
    for d in ds {
        match d.action {
            BoostAction::Raise { .. } => k.raised += 1,
            BoostAction::Lower {
                why: LowerWhy::Halted,
                ..
            } => k.halted += 1,
            BoostAction::Lower { .. } => k.budget += 1,
        }
    }
    k
}

#[test]
fn the_simulator_decides_what_the_agent_decides_on_the_same_recording() {
    let cases = [
        ("vbalance-fig5", None, 10_000, PolicyKind::HostBoost),
        ("vbalance-fig5", None, 10_000, PolicyKind::Vbalance),
        ("vbalance-fig6-tcp", Some(4096), 3_000, PolicyKind::Vbalance),
        (
            "vbalance-fig6-udp",
            Some(4096),
            3_000,
            PolicyKind::HostBoost,
        ),
        ("vbalance-two-vms", None, 5_000, PolicyKind::Vbalance),
        ("vbalance-shared-core", None, 5_000, PolicyKind::Vbalance),
        ("vbalance-shared-core", None, 5_000, PolicyKind::HostBoost),
    ];
    let mut all = Kinds::default();
    let mut refused = 0;
    for (name, size, ms, policy) in cases {
        let sc = scenario(name, size, ms);
        let st = traced(&sc, policy);
        let events = round_trip(&st.irq_trace);
        let agent = replay(sc.host.boost_config(), &events, sc.duration_ms * 1_000_000);
        let at = format!("{name} {}", policy.name());
        assert!(
            first_difference(&st.boost_decisions, &agent).is_none(),
            "{at}: {}",
            first_difference(&st.boost_decisions, &agent).unwrap_or_default()
        );
        let k = kinds(&agent);
        assert!(k.raised > 0, "{at}: no raise");
        assert_eq!(k.raised as u64, st.boosts, "{at}: the run's boost count");
        // every raise is lowered, but for the boosts still raised at the end
        assert!(k.raised - (k.halted + k.budget) <= 4, "{at}: {k:?}");
        all.raised += k.raised;
        all.halted += k.halted;
        all.budget += k.budget;
        refused += st.boosts_refused;
    }
    // the recordings exercise every decision Booster makes: raises, lowers at a halt and at
    // the budget, and refusals by the VM's share
    assert!(
        all.halted > 0 && all.budget > 0 && refused > 0,
        "{all:?}, {refused} refused"
    );
}

#[test]
fn the_comparison_tells_another_policy_apart() {
    // the same recording under a shorter budget, or (where boosts are charged: vCPU0 over
    // the co-tenant) a smaller share or a grace, is decided otherwise: the equality above is
    // not one any driver would pass
    let sc = scenario("vbalance-fig6-tcp", Some(4096), 3_000);
    let st = traced(&sc, PolicyKind::Vbalance);
    let mut cfg = sc.host.boost_config();
    cfg.budget_ns /= 2;
    let other = replay(cfg, &st.irq_trace, sc.duration_ms * 1_000_000);
    assert!(first_difference(&st.boost_decisions, &other).is_some());
    let sc = scenario("vbalance-shared-core", None, 5_000);
    let st = traced(&sc, PolicyKind::HostBoost);
    for change in [
        |c: &mut BoostConfig| c.max_share /= 4.0,
        |c: &mut BoostConfig| c.grace_ns = 1_000_000,
    ] {
        let mut cfg = sc.host.boost_config();
        change(&mut cfg);
        let other = replay(cfg, &st.irq_trace, sc.duration_ms * 1_000_000);
        assert!(first_difference(&st.boost_decisions, &other).is_some());
    }
}

#[test]
fn the_bound_is_not_the_agent() {
    // host-boost-ideal tells its Booster when the guest's interrupt work ends, which the
    // program cannot push: its decisions are not those of the agent on its recording
    let sc = scenario("vbalance-fig6-tcp", Some(4096), 3_000);
    let st = traced(&sc, PolicyKind::HostBoostIdeal);
    let agent = replay(
        sc.host.boost_config(),
        &st.irq_trace,
        sc.duration_ms * 1_000_000,
    );
    assert!(first_difference(&st.boost_decisions, &agent).is_some());
    assert!(kinds(&st.boost_decisions).halted > kinds(&agent).halted);
}

/// Decisions as JSON lines, the shape of `tests/data/*.decisions.jsonl`.
fn lines(ds: &[BoostDecision]) -> Vec<String> {
    ds.iter()
        .map(|d| serde_json::to_string(d).unwrap())
        .collect()
}

#[test]
fn a_checked_in_recording_is_decided_as_it_was_when_recorded() {
    // shared-core under host-boost, seed 1, 0.5 s: raises over the co-tenant (charged), lowers
    // at a halt and at the budget, refusals by the share; the accepts of vCPUs in the guest
    // are left out of the file (Booster makes nothing of them), which leaves every decision
    // where it was
    let text = include_str!("data/shared-core-boost.jsonl");
    let events = parse_recording(text).unwrap();
    let want: Vec<&str> = include_str!("data/shared-core-boost.decisions.jsonl")
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .collect();
    let sc = scenario("vbalance-shared-core", None, 500);
    let agent = replay(sc.host.boost_config(), &events, sc.duration_ms * 1_000_000);
    assert_eq!(lines(&agent), want);
    let k = kinds(&agent);
    assert!(k.raised > 0 && k.halted > 0 && k.budget > 0, "{k:?}");
    assert!(events.iter().any(|e| matches!(
        e,
        WaitEvent::Accept {
            holder: Holder::Other,
            ..
        }
    )));
}

/// A stream written by hand with the decisions it must give, worked out from Booster's rules
/// (`crates/irqbal/src/wait/boost.rs`) with the default configuration: a 2 ms budget, 5 % of a
/// CPU over 100 ms (a 5 ms bucket refilled at 50 us per ms), boosts over another tenant
/// charged, at once.
#[test]
fn a_generated_stream_gives_the_decisions_its_truth_says() {
    const MS: u64 = 1_000_000;
    let tid = |vm, vcpu| irq_trace_tid(vm, vcpu);
    let acc = |t, vm, vcpu, state, h| {
        WaitEvent::accept(t, vm, vcpu, state, Some(tid(vm, vcpu))).with_holder(h)
    };
    let blocked = |t, vm, vcpu| WaitEvent::Blocked {
        ts_ns: t,
        vm,
        vcpu,
        tid: tid(vm, vcpu),
    };
    let (a, b) = (1000, 1001);
    let mut events = vec![
        // VM a over its own vCPU: raised at once, free, lowered when it halts
        acc(MS, a, 0, VcpuState::Preempted, Holder::Own),
        acc(MS + 200_000, a, 0, VcpuState::Preempted, Holder::Own),
        blocked(MS + 500_000, a, 0),
        // over an idle CPU: free, and it never halts: lowered at the budget's end
        acc(2 * MS, a, 1, VcpuState::Preempted, Holder::Idle),
        // in the guest, woken from halt (not preempted), an NMI: nothing
        acc(5 * MS, a, 0, VcpuState::Guest, Holder::Unknown),
        acc(5 * MS, a, 0, VcpuState::Blocked, Holder::Other),
        WaitEvent::Entry {
            ts_ns: 5 * MS + 1,
            vm: a,
            vcpu: 0,
        },
    ];
    let mut nmi = acc(6 * MS, a, 0, VcpuState::Preempted, Holder::Own);
    if let WaitEvent::Accept { dm, .. } = &mut nmi {
        *dm = 0x400;
    }
    events.push(nmi);
    // VM b over another tenant, never halting: each boost is charged its whole grant. 10 ms:
    // 2 ms of the 5 (3 left); 12 ms: 3 + 0.1 refilled, 2 granted (1.1 left); 14 ms: 1.1 + 0.1,
    // a 1.2 ms grant; 15.3 ms: 0.005 refilled, under a tenth of a budget: refused
    events.extend([
        acc(10 * MS, b, 0, VcpuState::Preempted, Holder::Other),
        acc(12 * MS, b, 0, VcpuState::Preempted, Holder::Other),
        acc(14 * MS, b, 0, VcpuState::Preempted, Holder::Other),
        acc(
            15 * MS + 300_000,
            b,
            0,
            VcpuState::Preempted,
            Holder::Unknown,
        ),
    ]);
    let raise = |at_ns, vm, vcpu| BoostDecision {
        at_ns,
        action: BoostAction::Raise {
            vm,
            vcpu,
            tid: tid(vm, vcpu),
        },
    };
    let lower = |at_ns, vm, vcpu, why| BoostDecision {
        at_ns,
        action: BoostAction::Lower {
            vm,
            vcpu,
            tid: tid(vm, vcpu),
            why,
        },
    };
    let truth = vec![
        raise(MS, a, 0),
        lower(MS + 500_000, a, 0, LowerWhy::Halted),
        raise(2 * MS, a, 1),
        lower(4 * MS, a, 1, LowerWhy::Budget),
        raise(10 * MS, b, 0),
        // the budget ends exactly as the next accept comes: lowered, then raised again
        lower(12 * MS, b, 0, LowerWhy::Budget),
        raise(12 * MS, b, 0),
        lower(14 * MS, b, 0, LowerWhy::Budget),
        raise(14 * MS, b, 0),
        lower(15 * MS + 200_000, b, 0, LowerWhy::Budget),
    ];
    let events = round_trip(&events);
    let agent = replay(BoostConfig::default(), &events, 20 * MS);
    let part = parting(("agent", "truth"), &agent, &truth);
    assert!(part.is_none(), "{}", part.unwrap_or_default());
}
