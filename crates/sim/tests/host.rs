//! The host half on KVM (EEVDF), medians over seeds 1–5, with the simulator driving the agent's
//! own `irqbal::wait::boost::Booster` (`crates/sim/tests/replay.rs`), against what issue-level
//! targets the README states:
//!
//! * fig5: the shipped `vbalance` (guest daemon + host boost) keeps the ping's p99 under
//!   0.5 ms where static placement has ~9 ms spikes;
//! * fig6 4 KiB: the agent charges a boost to its VM's share of a CPU (5 % over 100 ms) only
//!   when it displaces another tenant; fig6's boosts displace the VM's own vCPUs, are free,
//!   and TCP gains about half over static, UDP about a third — short of the paper's 2×;
//! * two-vms: the co-tenant keeps at least 90 % of the CPU time it has under static, and a
//!   smaller share (`[host] boost_max_share`) keeps more of it;
//! * under the credit scheduler (Xen) there is no host half: `vbalance` is `vbalance-guest`;
//! * `host-slice` needs HRTICK: without it a slice under the tick is the tick.

use sim::scenario::SourceSpec;
use sim::{builtin, run_one, PolicyKind, RunResult, Scenario, SchedulerKind};

const SEEDS: [u64; 5] = [1, 2, 3, 4, 5];

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn runs(sc: &Scenario, sched: SchedulerKind, policy: PolicyKind) -> Vec<RunResult> {
    SEEDS
        .iter()
        .map(|&seed| {
            let mut s = sc.clone();
            s.seed = seed;
            run_one(&s, sched, policy, None).expect("runs")
        })
        .collect()
}

fn p99(rs: &[RunResult]) -> f64 {
    median(rs.iter().map(|r| r.rtt_ms.expect("pings").p99).collect())
}

fn tput(rs: &[RunResult]) -> f64 {
    median(
        rs.iter()
            .map(|r| r.throughput_mbps.expect("a stream"))
            .collect(),
    )
}

fn fig6(kind: &str) -> Scenario {
    let sc = builtin("vbalance-fig6")
        .unwrap()
        .into_iter()
        .find(|s| s.name.ends_with(kind))
        .unwrap();
    let mut sc = sc.with_message_size(4096);
    sc.duration_ms = 5_000;
    sc
}

#[test]
fn fig5_the_shipped_default_keeps_the_ping_under_half_a_millisecond() {
    let mut sc = builtin("vbalance-fig5").unwrap().remove(0);
    sc.duration_ms = 30_000;
    let s = p99(&runs(&sc, SchedulerKind::Eevdf, PolicyKind::Static));
    let d = runs(&sc, SchedulerKind::Eevdf, PolicyKind::Vbalance);
    let v = p99(&d);
    assert!(v <= 0.5, "vbalance p99 {v} ms (static {s})");
    assert!(s > 5.0, "static p99 {s} ms");
    assert!(d.iter().all(|r| r.boosts > 0));
    // the guest half alone cannot: a KVM guest's moves land after the next interrupt
    let g = p99(&runs(&sc, SchedulerKind::Eevdf, PolicyKind::VbalanceGuest));
    assert!(g > 5.0, "vbalance-guest p99 {g} ms");
}

#[test]
fn fig6_boosts_over_the_vms_own_vcpus_are_not_charged() {
    // fig6's four vCPUs share one core and no other tenant: every boost displaces only the
    // VM's own vCPUs, so none is charged to its share and none refused. Seeds 1-5, 5 s: TCP
    // about 1.5x static (1.12x while every boost was charged), UDP about 1.3x (1.07x)
    for (kind, shipped) in [("tcp", 1.35), ("udp", 1.2)] {
        let sc = fig6(kind);
        let s = tput(&runs(&sc, SchedulerKind::Eevdf, PolicyKind::Static));
        let dr = runs(&sc, SchedulerKind::Eevdf, PolicyKind::Vbalance);
        let d = tput(&dr);
        let i = tput(&runs(&sc, SchedulerKind::Eevdf, PolicyKind::HostBoostIdeal));
        println!("{kind}: static {s:.0} vbalance {d:.0} bound {i:.0} Mbit/s");
        assert!(
            d >= shipped * s,
            "{kind}: vbalance {d:.0} Mbit/s against static {s:.0}"
        );
        assert!(
            i >= s,
            "{kind}: host-boost-ideal {i:.0} Mbit/s against static {s:.0}"
        );
        let share_ms = sc.host.boost_max_share * sc.duration_ms as f64;
        for r in &dr {
            assert_eq!(r.boosts_refused, 0, "{kind}: boosts refused");
            assert!(
                r.boost_ms > share_ms,
                "{kind}: boosted {:.1} ms",
                r.boost_ms
            );
        }
    }
}

/// CPU time of every vCPU of VM 1 (the co-tenant) in `vbalance-two-vms`, ms.
fn cotenant(rs: &[RunResult]) -> f64 {
    median(
        rs.iter()
            .map(|r| r.vcpu_runtime_ms[4..].iter().sum())
            .collect(),
    )
}

#[test]
fn two_vms_the_cotenant_keeps_its_cpu_time() {
    let mut sc = builtin("vbalance-two-vms").unwrap().remove(0);
    sc.duration_ms = 10_000;
    let s = runs(&sc, SchedulerKind::Eevdf, PolicyKind::Static);
    let d = runs(&sc, SchedulerKind::Eevdf, PolicyKind::Vbalance);
    let kept = cotenant(&d) / cotenant(&s);
    assert!(kept >= 0.9, "the co-tenant keeps {:.1} %", kept * 100.0);
    assert!(
        p99(&d) < p99(&s),
        "ping p99 {} vs static {}",
        p99(&d),
        p99(&s)
    );
    // a smaller share leaves it more; boosting without a limit takes more
    let mut small = sc.clone();
    small.host.boost_max_share = 0.01;
    let mut big = sc.clone();
    big.host.boost_max_share = 1.0;
    let ks = cotenant(&runs(&small, SchedulerKind::Eevdf, PolicyKind::HostBoost)) / cotenant(&s);
    let kb = cotenant(&runs(&big, SchedulerKind::Eevdf, PolicyKind::HostBoost)) / cotenant(&s);
    assert!(
        ks > kept.min(0.99) - 0.01 && kb < ks,
        "share 1 %: {ks:.3}, share 100 %: {kb:.3}"
    );
}

#[test]
fn credit_has_no_host_half() {
    let mut sc = builtin("vbalance-fig5").unwrap().remove(0);
    sc.duration_ms = 5_000;
    let d = run_one(&sc, SchedulerKind::Credit, PolicyKind::Vbalance, None).unwrap();
    let g = run_one(&sc, SchedulerKind::Credit, PolicyKind::VbalanceGuest, None).unwrap();
    assert_eq!(d.boosts, 0);
    assert_eq!(d.rtt_series, g.rtt_series);
}

#[test]
fn a_slice_under_the_tick_needs_hrtick() {
    let mut sc = builtin("vbalance-fig5").unwrap().remove(0);
    sc.duration_ms = 20_000;
    sc.sources = vec![SourceSpec::Ping {
        vm: 0,
        queue: 0,
        interval_ms: 100,
        size: 64,
    }];
    let s = p99(&runs(&sc, SchedulerKind::Eevdf, PolicyKind::Static));
    sc.host.hrtick = true;
    let with = p99(&runs(&sc, SchedulerKind::Eevdf, PolicyKind::HostSlice));
    sc.host.hrtick = false;
    let without = p99(&runs(&sc, SchedulerKind::Eevdf, PolicyKind::HostSlice));
    assert!(
        with < 0.5 * s,
        "300 µs slices with HRTICK: p99 {with} vs static {s}"
    );
    assert!(
        without >= s,
        "without HRTICK the slice is the 4 ms tick: p99 {without} vs {s}"
    );
}
