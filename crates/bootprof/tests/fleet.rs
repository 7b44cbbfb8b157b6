//! The fleet view (`vmtune boot analyze --all`) recovers the truth of generated fleets
//! (`bootprof::synth::fleet`): several nodes, each a journal of several boots (in its own
//! zone and locale), its host pin trace and its pods' `kubectl describe`, with GPU counts,
//! page backing, clock offsets, cut logs and failures varying boot by boot. Checked: one row
//! per boot, on its node, with its state, GPUs and page size; each row exactly what the
//! single-boot analysis of that node's logs says; every counted phase within the truth's
//! tolerance and every phase the truth knows counted; percentiles over the counted boots
//! within the same tolerance of the percentiles of the true values; the groupings' counts.

use bootprof::fleet::{self, Fleet, FleetOptions, PHASES};
use bootprof::parse::ingest::{Ingest, Ingester, Options};
use bootprof::parse::time::parse_rfc3339;
use bootprof::synth::{
    fleet as gen_fleet, BarWording, Bind, JournalFormat, NodeRecords, Outcome, ProxyConsole,
    RamPages, Spec, Stop, Truth,
};
use proptest::prelude::*;

/// The files of one node, named as a user would give them.
fn node_files(n: &NodeRecords) -> Vec<(String, &str)> {
    let mut v = vec![(format!("{}.journal", n.host), n.journal.as_str())];
    if let Some(b) = &n.bpftrace {
        v.push((format!("{}-pins.txt", n.host), b.as_str()));
    }
    if let Some(k) = &n.kubectl {
        v.push((format!("{}-pods.txt", n.host), k.as_str()));
    }
    v
}

/// Read the nodes' files in the order `analyze --all` is given them: each journal followed
/// by its trace and its pods.
fn ingest(nodes: &[NodeRecords]) -> Ingest {
    let mut ing = Ingester::new(Options::default());
    for n in nodes {
        for (name, text) in node_files(n) {
            ing.read(&name, text.as_bytes()).unwrap();
        }
    }
    ing.finish()
}

fn analyze(nodes: &[NodeRecords]) -> Fleet {
    fleet::analyze(
        &ingest(nodes),
        &FleetOptions {
            threads: Some(3),
            ..FleetOptions::default()
        },
    )
}

/// The single-boot analysis of one boot from its node's files alone, with the node's trace
/// clock when the fleet found one.
fn single(n: &NodeRecords, sandbox: &str, trace_shift_h: Option<i64>) -> bootprof::Report {
    let mut ing = Ingester::new(Options::default());
    for (name, text) in node_files(n) {
        ing.read(&name, text.as_bytes()).unwrap();
    }
    let opts = bootprof::AnalyzeOptions {
        sandbox: Some(sandbox.to_string()),
        clocks: bootprof::analyze::clocks::ClockOptions {
            trace_shift_h,
            ..Default::default()
        },
    };
    bootprof::build_with(&ing.finish(), &opts).unwrap()
}

/// Whether the single-boot report of `sandbox` has a finding naming `gpu`'s unassigned `bar`.
fn rep_bar_finding(
    n: &NodeRecords,
    sandbox: &str,
    gpu: &str,
    bar: &str,
    shift: Option<i64>,
) -> bool {
    single(n, sandbox, shift)
        .findings
        .iter()
        .any(|f| f.phase == "pci_enumeration" && f.text.contains(gpu) && f.text.contains(bar))
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol
}

/// Tolerances of the truth checks, per phase (seconds): a line with only a prefix time, or
/// kubectl's times, are known to the second.
fn tolerance(kind: &str, spec: &Spec, t: &Truth) -> f64 {
    match kind {
        "gpu_driver_init" => 0.5 * t.gpus.max(1) as f64,
        "dma_pinning" => 0.01,
        "total" if spec.prefix_only_pct > 0 || spec.kubectl => 1.0,
        "total" => 0.1,
        _ => 0.5,
    }
}

/// The true value of a phase kind of a boot, when the truth knows it.
fn truth_of(kind: &str, spec: &Spec, t: &Truth) -> Option<f64> {
    match kind {
        // every GPU's init (a GPU whose BAR the guest could not assign has none)
        "gpu_driver_init"
            if spec.outcome != Outcome::ColdPlugFailed
                && !t.per_gpu.is_empty()
                && t.per_gpu.len() == t.gpus =>
        {
            t.per_gpu
                .iter()
                .all(|g| g.checkable)
                .then(|| t.per_gpu.iter().map(|g| g.init_s).sum())
        }
        "cdi_wait" => t.cdi_wait_s,
        // untraced, only the guest's side of it is seen: left out (`untraced`)
        "memory_hotplug" => t.memory_hotplug_s.filter(|_| spec.pin_trace),
        "dma_pinning" => t.pins_s.filter(|s| *s > 0.0),
        "total" => t.total_s,
        _ => None,
    }
}

/// The kinds whose truth is known whenever it can be: known ⇒ counted.
const STRICT: [&str; 4] = ["gpu_driver_init", "cdi_wait", "memory_hotplug", "total"];

fn check(nodes: &[NodeRecords], f: &Fleet) -> Result<(), String> {
    let boots: usize = nodes.iter().map(|n| n.boots.len()).sum();
    if f.rows.len() != boots || !f.without_boot.is_empty() {
        return Err(format!(
            "{} rows and {} without a boot (truth: {boots} boots)\n{}",
            f.rows.len(),
            f.without_boot.len(),
            bootprof::render::fleet::text(f)
        ));
    }
    // (kind) → (fleet value, true value, tolerance) of every counted cell
    let mut pairs: std::collections::HashMap<&str, Vec<(f64, f64, f64)>> = Default::default();
    for n in nodes {
        for (spec, t) in &n.boots {
            let Some(r) = f.rows.iter().find(|r| {
                r.sandbox.as_deref() == Some(t.sandbox.as_str()) && r.shim_pid == Some(t.shim_pid)
            }) else {
                return Err(format!("no row for {} on {}", t.sandbox, n.host));
            };
            let ctx = || format!("\n{spec:?}\n{}", serde_json::to_string(r).unwrap());
            // a journal without host field (`-o cat`) is a node named after its file
            let node = match spec.journal_format {
                JournalFormat::Cat => format!("{}.journal", n.host),
                _ => n.host.clone(),
            };
            if r.node.as_deref() != Some(node.as_str()) {
                return Err(format!("node {:?} (truth {node}){}", r.node, ctx()));
            }
            if r.state != t.status || r.failure_step != t.failure_step {
                return Err(format!(
                    "state {} {:?} (truth {} {:?}){}",
                    r.state,
                    r.failure_step,
                    t.status,
                    t.failure_step,
                    ctx()
                ));
            }
            if let (Some(dev), Some(why)) = (&t.failure_device, &t.failure_reason) {
                let said = r.finding.as_deref().unwrap_or("");
                if !(said.contains(dev.as_str()) && said.contains(why.as_str())) {
                    return Err(format!(
                        "the finding does not name {dev} and {why:?}{}",
                        ctx()
                    ));
                }
            }
            if let Some((gpu, bar, _)) = &t.bar_unassigned {
                // the row's finding is how the boot went; the report's has the BAR
                let said =
                    rep_bar_finding(n, &t.sandbox, gpu, bar, f.trace_shift_h.get(&node).copied());
                if !said {
                    return Err(format!("no finding names {gpu}'s {bar}{}", ctx()));
                }
            }
            if r.started_late != t.started_late {
                return Err(format!(
                    "started late {} (truth {}){}",
                    r.started_late,
                    t.started_late,
                    ctx()
                ));
            }
            if spec.outcome != Outcome::ColdPlugFailed && r.gpus != Some(t.gpus) {
                return Err(format!("{:?} GPUs (truth {}){}", r.gpus, t.gpus, ctx()));
            }
            if let Some(p) = r.page_size {
                let want = match t.ram_pages {
                    RamPages::Small => "4K",
                    RamPages::Huge => "hugepages",
                };
                if p != want {
                    return Err(format!("page size {p} (truth {want}){}", ctx()));
                }
            } else if spec.pin_trace
                && t.status == "complete"
                && spec.hot_ram_gib >= 8
                && !t.started_late
            {
                return Err(format!("no page size from a traced boot{}", ctx()));
            }
            // the row is what the single-boot analysis of its node's logs says
            // the fleet puts a node's trace on one clock: the single analysis is given it
            let shift = f.trace_shift_h.get(&node).copied();
            let rep = single(n, &t.sandbox, shift);
            // what the fleet leaves out because the log starts late, the single report
            // calls a lower bound, and what it calls one the fleet does not count
            for p in &rep.phases {
                let cell = &r.phases[p.name];
                if p.at_least && cell.counted {
                    return Err(format!("{} is 'at least' but counted{}", p.name, ctx()));
                }
                if p.name != "dma_pinning"
                    && cell.excluded == Some(fleet::Excluded::StartedLate)
                    && !p.at_least
                {
                    return Err(format!(
                        "{} left out as started late, not 'at least'{}",
                        p.name,
                        ctx()
                    ));
                }
            }
            if rep.total_at_least && r.total_s.is_some() {
                return Err(format!("total 'at least' but counted{}", ctx()));
            }
            if r.started_late && rep.total_from == "timeline" && !rep.total_at_least {
                return Err(format!("started late, total not 'at least'{}", ctx()));
            }
            let mut one = fleet::row(&rep);
            if spec.journal_format == JournalFormat::Cat {
                // the single-boot report has no node to name; the fleet names the file
                one.node = Some(node.clone());
            }
            let mut mine = r.clone();
            mine.slow_phase = None;
            let (a, b) = (
                serde_json::to_value(&mine).unwrap(),
                serde_json::to_value(&one).unwrap(),
            );
            if a != b {
                return Err(format!(
                    "row differs from the single-boot analysis:\nfleet  {a}\nsingle {b}"
                ));
            }
            // counted ⇒ the truth knows it and it is within tolerance; for the strict kinds,
            // known ⇒ counted
            for kind in PHASES.iter().copied().chain(["total"]) {
                let (value, counted) = if kind == "total" {
                    (r.total_s, r.total_s.is_some())
                } else {
                    let c = &r.phases[kind];
                    (c.s, c.counted)
                };
                let truth = truth_of(kind, spec, t);
                let tol = tolerance(kind, spec, t);
                match (counted, value, truth) {
                    (true, Some(v), Some(w)) => {
                        if !close(v, w, tol) {
                            return Err(format!("{kind} {v:.3} (truth {w:.3}){}", ctx()));
                        }
                        pairs.entry(kind).or_default().push((v, w, tol));
                    }
                    (true, _, None) if STRICT.contains(&kind) || kind == "dma_pinning" => {
                        return Err(format!(
                            "{kind} counted, but the truth does not know it{}",
                            ctx()
                        ));
                    }
                    // a log that ends early leaves gpu_driver_init out unless the CDI wait
                    // resolved, even where the truth knows it
                    // pre-3.14 tries are unnumbered: a log that starts late may miss the
                    // first ones, so the wait is left out even where the truth knows it
                    (false, _, Some(_))
                        if STRICT.contains(&kind)
                            && !(kind == "gpu_driver_init"
                                && matches!(t.status, "unfinished" | "stopped"))
                            && !(kind == "cdi_wait" && spec.pre314 && t.started_late) =>
                    {
                        return Err(format!(
                            "{kind} known ({truth:?}) but left out ({:?}){}",
                            r.phases.get(kind).and_then(|c| c.excluded),
                            ctx()
                        ));
                    }
                    _ => {}
                }
            }
        }
    }
    // the fleet's percentiles are those of its counted cells, and lie within tolerance of
    // the percentiles of the true values of the same boots
    for st in f.phases.iter().chain(std::iter::once(&f.total)) {
        let cells: Vec<f64> = f
            .rows
            .iter()
            .filter_map(|r| {
                if st.phase == "total" {
                    r.total_s
                } else {
                    r.phases
                        .get(st.phase)
                        .filter(|c| c.counted)
                        .and_then(|c| c.s)
                }
            })
            .collect();
        let left: usize = st.excluded.values().sum();
        if st.n != cells.len() || st.n + left != f.rows.len() {
            return Err(format!(
                "{}: {} counted, {left} left out of {} rows ({} counted cells)",
                st.phase,
                st.n,
                f.rows.len(),
                cells.len()
            ));
        }
        let Some(v) = pairs.get(st.phase) else {
            continue;
        };
        let tol = v.iter().map(|p| p.2).fold(0.0, f64::max);
        let mut ours: Vec<f64> = v.iter().map(|p| p.0).collect();
        let mut truth: Vec<f64> = v.iter().map(|p| p.1).collect();
        ours.sort_by(f64::total_cmp);
        truth.sort_by(f64::total_cmp);
        for (p, got) in [(50, st.p50), (90, st.p90), (99, st.p99)] {
            let want = fleet::nearest_rank(&truth, p);
            let mine = fleet::nearest_rank(&ours, p);
            if got != mine || !matches!((got, want), (Some(a), Some(b)) if close(a, b, tol)) {
                return Err(format!(
                    "{} p{p}: {got:?}, from the truth {want:?} (tolerance {tol})",
                    st.phase
                ));
            }
        }
    }
    // every copy of a shim record is dropped, and only those
    let copies: u64 = nodes
        .iter()
        .flat_map(|n| n.boots.iter().map(|(_, t)| t.duplicates))
        .sum();
    if f.stats.duplicates != copies {
        return Err(format!(
            "{} duplicates dropped (truth {copies})",
            f.stats.duplicates
        ));
    }
    // groupings: boots per node as generated
    for n in nodes {
        let node = match n.boots.first().map(|b| b.0.journal_format) {
            Some(JournalFormat::Cat) => format!("{}.journal", n.host),
            _ => n.host.clone(),
        };
        let g = f
            .groups
            .iter()
            .find(|g| g.by == "node" && g.key.as_deref() == Some(node.as_str()))
            .ok_or_else(|| format!("no group for node {node}"))?;
        let complete = n
            .boots
            .iter()
            .filter(|(_, t)| t.status == "complete")
            .count();
        if g.boots != n.boots.len() || g.states.get("complete").copied().unwrap_or(0) != complete {
            return Err(format!("node group {}: {g:?}", n.host));
        }
    }
    let by_gpus: usize = f
        .groups
        .iter()
        .filter(|g| g.by == "gpus")
        .map(|g| g.boots)
        .sum();
    if by_gpus != boots {
        return Err(format!("GPU-count groups hold {by_gpus} boots of {boots}"));
    }
    // the slowest boots are complete and in order
    let totals: Vec<f64> = f
        .slowest
        .iter()
        .map(|&i| f.rows[i].total_s.ok_or("a slowest boot without a total"))
        .collect::<Result<_, _>>()?;
    if totals.windows(2).any(|w| w[0] < w[1]) {
        return Err(format!("slowest boots out of order: {totals:?}"));
    }
    // and every boot's start is its own
    for r in &f.rows {
        if r.start.as_deref().and_then(parse_rfc3339).is_none() {
            return Err(format!("row start {:?}", r.start));
        }
    }
    Ok(())
}

fn bind() -> impl Strategy<Value = Bind> {
    prop_oneof![Just(Bind::Before), Just(Bind::After), Just(Bind::Absent)]
}

/// One boot: the variations of `tests/truth.rs` that a boot of a fleet has (other
/// sandboxes and earlier boots of the same id are left to that test).
fn boot_spec() -> impl Strategy<Value = Spec> {
    (
        (
            any::<u64>(),
            1usize..=8,
            prop_oneof![Just(32u64), Just(80), Just(128)],
            1u64..=16,
            prop_oneof![Just(0u64), Just(16), Just(64), Just(100)],
            any::<bool>(),
            prop::bool::weighted(0.7),
            prop::collection::vec(bind(), 8),
        ),
        (
            prop_oneof![Just(0i64), Just(350), Just(8 * 3_600_000 + 40)],
            prop_oneof![Just(0u8), Just(30)],
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        ),
        (
            prop_oneof![
                6 => Just(Outcome::Complete),
                1 => Just(Outcome::CdiNeverResolved),
                1 => Just(Outcome::CreateTimeout),
                1 => Just(Outcome::ColdPlugFailed),
                1 => Just(Outcome::HotplugFailed),
            ],
            prop::option::weighted(0.15, 0.0f64..1.0),
            prop::option::weighted(0.15, 0.0f64..1.0),
            any::<bool>(),
            prop_oneof![
                8 => Just(None),
                1 => Just(Some(BarWording::Old)),
                1 => Just(Some(BarWording::New)),
            ],
            prop_oneof![
                6 => Just(None),
                1 => Just(Some(Stop::AfterStart)),
                1 => Just(Some(Stop::BeforeStart)),
            ],
        ),
    )
        .prop_map(|(sz, ck, w)| {
            let (seed, gpus, bar_gib, boot_ram_gib, hot_ram_gib, huge, pin_trace, binds) = sz;
            let (agent_offset_ms, prefix_only_pct, pre314, vga, pins) = ck;
            let (outcome, head_cut, tail_cut, kubectl, bar_unassigned, stop) = w;
            let mut s = Spec::study(seed);
            s.gpus = gpus;
            s.bar_gib = bar_gib;
            s.boot_ram_gib = boot_ram_gib;
            s.hot_ram_gib = hot_ram_gib;
            s.ram_pages = if huge {
                RamPages::Huge
            } else {
                RamPages::Small
            };
            s.pin_trace = pin_trace;
            s.binds = binds;
            s.enable_order = (0..gpus).rev().collect();
            s.agent_offset_ms = agent_offset_ms;
            s.prefix_only_pct = prefix_only_pct;
            s.pre314 = pre314;
            s.emulated_vga = vga;
            // A traced boot whose hot-plug failed shows no GPU enable to line its pins up
            // with, and beside another VM's pins it cannot tell which are its QEMU's: with
            // no boot of its node anchoring the trace's clock, a whole-hour shift that puts
            // another VM's pins just before another boot's guest kernel (where QEMU pins RAM)
            // is as well explained as none, and the truth cannot be recovered. Such a boot's
            // trace holds its own pins only (`a_failed_hotplugs_trace_keeps_its_clock` has
            // the cases the vote does decide).
            let anchorless = outcome == Outcome::HotplugFailed;
            s.foreign_pins = pins && !anchorless;
            s.concurrent_pins = pins && !anchorless && seed % 2 == 0;
            s.outcome = outcome;
            s.bar_unassigned = bar_unassigned;
            s.stop = stop;
            s.head_cut = head_cut.filter(|_| {
                outcome == Outcome::Complete
                    && tail_cut.is_none()
                    && bar_unassigned.is_none()
                    && stop != Some(Stop::BeforeStart)
            });
            s.tail_cut = tail_cut
                .filter(|_| !matches!(outcome, Outcome::ColdPlugFailed | Outcome::HotplugFailed));
            s.kubectl = kubectl;
            s
        })
}

fn journal_format() -> impl Strategy<Value = JournalFormat> {
    prop_oneof![
        3 => Just(JournalFormat::Short),
        1 => Just(JournalFormat::ShortPrecise),
        1 => Just(JournalFormat::ShortIso),
        1 => Just(JournalFormat::ShortIsoPrecise),
        1 => Just(JournalFormat::ShortFull),
        1 => Just(JournalFormat::Cat),
        1 => Just(JournalFormat::Json),
    ]
}

/// A node: its host's zone, locale, journal format and trace clock, whether its shim
/// lines are in its journal twice (under `kata[PID]` and `containerd[PID]`), and its boots.
fn node_spec() -> impl Strategy<Value = Vec<Spec>> {
    (
        prop_oneof![Just(0i64), Just(480), Just(-240), Just(330)],
        any::<bool>(),
        any::<bool>(),
        prop_oneof![3 => Just(0i64), 1 => Just(-8)],
        journal_format(),
        prop::bool::weighted(0.3),
        prop::bool::weighted(0.15),
        prop::collection::vec(boot_spec(), 1..=4),
    )
        .prop_map(|(zone, zh, zoned, shift, format, dup, proxy, mut boots)| {
            for b in &mut boots {
                b.zone_min = zone;
                b.zh_prefix = zh;
                b.zoned_time_field = zoned;
                b.trace_shift_h = shift;
                b.journal_format = format;
                b.dup_identifiers = dup;
                // (a node's proxy lines name their sandbox: boots share the journal)
                b.proxy_console = proxy.then_some(ProxyConsole::WithSandbox);
            }
            boots
        })
}

/// Boots on a node are this far apart: beyond the reach of another boot's pins, and not
/// a whole number of hours (a trace whose clock is hours off could otherwise put another
/// boot's pins on this one's GPU enables).
const SPACING_S: i64 = 4 * 3600 + 17 * 60 + 13;

fn fleet_of(nodes: Vec<Vec<Spec>>) -> Vec<NodeRecords> {
    let named: Vec<(String, Vec<Spec>)> = nodes
        .into_iter()
        .enumerate()
        .map(|(i, specs)| (format!("gpu-{:02}.dc1.example", i + 1), specs))
        .collect();
    let start = parse_rfc3339("2026-03-02T08:15:00.25Z").unwrap();
    gen_fleet(&named, start, SPACING_S)
}

proptest! {
    // PROPTEST_CASES=N runs more (a soak); 24 by default
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24)
    ))]

    #[test]
    fn fleet_recovers_rows_and_percentiles(nodes in prop::collection::vec(node_spec(), 1..=3)) {
        let nodes = fleet_of(nodes);
        let f = analyze(&nodes);
        if let Err(e) = check(&nodes, &f) {
            prop_assert!(false, "{}", e);
        }
    }
}

/// Three nodes in three zones and locales, each boot a different case, so a failure
/// names it; the counts of the fleet's exclusions are the ones these cases imply.
#[test]
fn three_nodes_every_case() {
    let mut study = Spec::study(11);
    study.kubectl = true;
    let mut huge = Spec::study(12);
    huge.ram_pages = RamPages::Huge;
    huge.gpus = 4;
    huge.enable_order = vec![3, 2, 1, 0];
    let mut cdi = Spec::study(13);
    cdi.outcome = Outcome::CdiNeverResolved;
    let mut timeout = Spec::study(14);
    timeout.outcome = Outcome::CreateTimeout;
    timeout.gpus = 2;
    timeout.enable_order = vec![0, 1];
    let mut cold = Spec::study(15);
    cold.outcome = Outcome::ColdPlugFailed;
    let mut late = Spec::study(16);
    late.head_cut = Some(0.5);
    let mut early = Spec::study(17);
    early.tail_cut = Some(0.3);
    let mut untraced = Spec::study(18);
    untraced.pin_trace = false;
    untraced.binds = vec![Bind::Absent; 8];
    let mut zh = Spec::study(19);
    zh.zone_min = 480;
    zh.zh_prefix = true;
    zh.prefix_only_pct = 100;
    zh.zoned_time_field = true;
    let mut ny = Spec::study(20);
    ny.zone_min = -240;
    ny.agent_offset_ms = 8 * 3_600_000;
    ny.trace_shift_h = -8;
    let nodes = fleet_of(vec![
        vec![study, huge, cdi],
        vec![zh, timeout, cold, late],
        vec![ny, early, untraced],
    ]);
    let f = analyze(&nodes);
    check(&nodes, &f).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f.nodes.len(), 3);
    assert_eq!(f.rows.len(), 10);
    let states = |k: &str| f.states.get(k).copied().unwrap_or(0);
    assert_eq!(
        (states("complete"), states("failed"), states("unfinished")),
        (6, 3, 1)
    );
    assert_eq!(f.started_late, 1);
    // totals: only complete boots that started inside their logs
    assert_eq!(f.total.n, 5, "{:?}", f.total);
    assert_eq!(f.total.excluded.get("not_complete"), Some(&5));
    // cdi_wait: the two failures are unresolved; the unfinished boot's wait may be whole
    let cdi = f.phases.iter().find(|s| s.phase == "cdi_wait").unwrap();
    assert!(
        cdi.excluded.get("unresolved").copied().unwrap_or(0) >= 2,
        "{cdi:?}"
    );
    // the page sizes the traced boots show
    let pages: Vec<Option<&str>> = f.rows.iter().map(|r| r.page_size).collect();
    assert!(
        pages.contains(&Some("hugepages")) && pages.contains(&Some("4K")),
        "{pages:?}"
    );
    let text = bootprof::render::fleet::text(&f);
    for host in [
        "gpu-01.dc1.example",
        "gpu-02.dc1.example",
        "gpu-03.dc1.example",
    ] {
        assert!(text.contains(host), "{text}");
    }
}

/// The check fails on wrong fleets: a shifted phase, a lost boot, a wrong node, a wrong
/// percentile.
#[test]
fn the_check_catches_wrong_fleets() {
    let nodes = fleet_of(vec![
        vec![Spec::study(3), Spec::study(4)],
        vec![Spec::study(5)],
    ]);
    let good = analyze(&nodes);
    check(&nodes, &good).unwrap_or_else(|e| panic!("{e}"));
    let mut f = good.clone();
    if let Some(c) = f.rows[0].phases.get_mut("cdi_wait") {
        c.s = c.s.map(|s| s + 2.0);
    }
    assert!(check(&nodes, &f).is_err());
    let mut f = good.clone();
    f.rows.pop();
    assert!(check(&nodes, &f).is_err());
    let mut f = good.clone();
    f.rows[1].node = Some("elsewhere".into());
    assert!(check(&nodes, &f).is_err());
    let mut f = good.clone();
    f.total.p50 = f.total.p50.map(|v| v + 5.0);
    assert!(check(&nodes, &f).is_err());
    let mut f = good;
    if let Some(c) = f.rows[2].phases.get_mut("memory_hotplug") {
        c.counted = false;
    }
    assert!(check(&nodes, &f).is_err());
}

/// A node whose trace clock is 8 h off: its untraced 6-GPU boot finds, 4 h away, the pins
/// of a VM that ran before the traced boot (no enable of its own lines up with them), and
/// that lone window fit once outvoted the traced boot, whose BAR pin lines up with its
/// GPU's enable at +8 h: the untraced boot's driver init then took in six 0.5 s pins that
/// were not its own (9.7 s against a true 4.9 s). The node's clock is the aligned one.
#[test]
fn a_window_fit_does_not_outvote_pins_at_gpu_enables() {
    use Bind::{Absent, After, Before};
    let mut untraced = Spec::study(12022446212294355442);
    untraced.gpus = 6;
    untraced.bar_gib = 32;
    untraced.boot_ram_gib = 8;
    untraced.hot_ram_gib = 100;
    untraced.pin_trace = false;
    untraced.binds = vec![Before, After, Before, Before, After, Absent, After, After];
    untraced.enable_order = vec![5, 4, 3, 2, 1, 0];
    untraced.zone_min = 480;
    untraced.zh_prefix = true;
    untraced.zoned_time_field = true;
    untraced.prefix_only_pct = 30;
    untraced.trace_shift_h = -8;
    untraced.emulated_vga = true;
    untraced.kubectl = true;
    untraced.journal_format = JournalFormat::ShortFull;
    let mut traced = Spec::study(4694560001976280861);
    traced.gpus = 1;
    traced.bar_gib = 32;
    traced.boot_ram_gib = 15;
    traced.hot_ram_gib = 0;
    traced.ram_pages = RamPages::Huge;
    traced.binds = vec![Absent, Before, Absent, Absent, After, Before, After, Before];
    traced.enable_order = vec![0];
    traced.foreign_pins = true;
    traced.pre314 = true;
    traced.outcome = Outcome::CreateTimeout;
    traced.kubectl = true;
    let nodes = fleet_of(vec![vec![Spec::study(1)], vec![untraced, traced]]);
    let f = analyze(&nodes);
    check(&nodes, &f).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(f.trace_shift_h.get("gpu-02.dc1.example"), Some(&8));
    let row = f
        .rows
        .iter()
        .find(|r| r.node.as_deref() == Some("gpu-02.dc1.example") && r.gpus == Some(6))
        .unwrap();
    assert_eq!(row.phases["dma_pinning"].n, 0, "{row:?}");
}

/// A node of two boots: an untraced one, then a traced one (its log ends at the first CDI
/// try, so no GPU enable lines its pins up) whose trace also holds another VM's pins from
/// 17 min before it. A whole-hour shift puts those pins inside the untraced boot (two 80 GiB
/// RAM pins, six 4 GiB ones: one fits its guest RAM, seven fit nothing), the true shift
/// puts the traced boot's one RAM pin inside its VM creation. The node's clock is the true
/// one — with the stamps as they are, 8 h off, and 8 h off in a zone whose undoing is the
/// wrong +4 h — and the untraced boot counts no pins.
#[test]
fn another_vms_pins_do_not_set_the_nodes_trace_clock() {
    for (zone_min, trace_shift_h) in [(0, 0), (0, -8), (-240, -8)] {
        let mut untraced = Spec::study(116131);
        untraced.gpus = 1;
        untraced.bar_gib = 32;
        untraced.boot_ram_gib = 1;
        untraced.hot_ram_gib = 0;
        untraced.pin_trace = false;
        untraced.binds = vec![Bind::Before; 8];
        untraced.enable_order = vec![0];
        untraced.zone_min = zone_min;
        untraced.trace_shift_h = trace_shift_h;
        let mut traced = untraced.clone();
        traced.seed = 10215036103175366513;
        traced.gpus = 2;
        traced.bar_gib = 80;
        traced.pin_trace = true;
        traced.enable_order = vec![1, 0];
        traced.foreign_pins = true;
        traced.tail_cut = Some(0.0);
        let nodes = fleet_of(vec![vec![untraced, traced]]);
        let f = analyze(&nodes);
        let ctx = format!("zone {zone_min} min, trace {trace_shift_h} h");
        check(&nodes, &f).unwrap_or_else(|e| panic!("{ctx}: {e}"));
        assert_eq!(
            f.trace_shift_h
                .get("gpu-01.dc1.example")
                .copied()
                .unwrap_or(0),
            -trace_shift_h,
            "{ctx}"
        );
        let row = f.rows.iter().find(|r| r.gpus == Some(1)).unwrap();
        assert_eq!(row.phases["dma_pinning"].n, 0, "{ctx}: {row:?}");
    }
}

/// Two boots of one node 200 s apart, only the first traced: the second's window (which
/// looks 120 s before its first line, for logs that start after QEMU pinned its RAM) holds
/// the first VM's last RAM pins. They are the first boot's alone.
#[test]
fn an_untraced_boot_does_not_take_the_pins_of_the_boot_before_it() {
    let mut first = Spec::study(7);
    first.gpus = 2;
    first.pin_trace = true;
    let mut second = Spec::study(8);
    second.gpus = 2;
    second.pin_trace = false;
    let start = parse_rfc3339("2026-03-02T08:15:00.25Z").unwrap();
    let nodes = gen_fleet(&[("gpu-01".to_string(), vec![first, second])], start, 200);
    let f = analyze(&nodes);
    assert_eq!(f.rows.len(), 2, "{:?}", f.rows);
    let (a, b) = (&f.rows[0], &f.rows[1]);
    assert!(a.phases["dma_pinning"].n > 0, "{a:?}");
    assert_eq!(b.phases["dma_pinning"].n, 0, "{b:?}");
    assert_eq!(b.page_size, None, "{b:?}");
}

/// A return without its call line between two traced boots of one node, inside both of
/// their windows (120 s before the second's first line, 60 s after the first's last):
/// counted by one boot at most — it was counted by both.
#[test]
fn a_return_without_its_call_between_two_boots_is_counted_once_at_most() {
    let mut first = Spec::study(7);
    first.gpus = 2;
    first.pin_trace = true;
    let mut second = Spec::study(8);
    second.gpus = 2;
    second.pin_trace = true;
    let start = parse_rfc3339("2026-03-02T08:15:00.25Z").unwrap();
    let mut nodes = gen_fleet(&[("gpu-01".to_string(), vec![first, second])], start, 200);
    let pin_phases =
        |f: &Fleet| -> usize { f.rows.iter().map(|r| r.phases["dma_pinning"].n).sum() };
    let before = pin_phases(&analyze(&nodes));
    let trace = nodes[0].bpftrace.clone().expect("both boots traced");
    let stamp = "2026-03-02T08:18:00.250000000Z";
    let at = trace
        .lines()
        .position(|l| {
            l.get(..stamp.len())
                .is_some_and(|t| t.as_bytes()[0].is_ascii_digit() && t > stamp)
        })
        .expect("calls after the stamp");
    let mut lines: Vec<&str> = trace.lines().collect();
    let ret = format!("{stamp}: vfio_pin_pages_remote took 700 ms");
    lines.insert(at, &ret);
    nodes[0].bpftrace = Some(lines.join("\n") + "\n");
    let after = pin_phases(&analyze(&nodes));
    assert!(after <= before + 1, "pin phases {before} → {after}");
}

/// A node of four boots, boots 4 h 17 min apart, the trace on the journal's clock: two
/// untraced (4 and 6 GPUs, the 6-GPU one a create timeout, its window long), two traced
/// (1 and 2 GPUs). A −4 h shift puts the next VM's BAR pins inside the 6-GPU boot's
/// window, four of them within a second or two of its enables — one more heavy pin lined
/// up than the traced boots' own three at no shift — and that boot's alignment once set
/// the node's clock: the 1-GPU traced boot lost its pins ("no page size from a traced
/// boot"). Read with each shift, all four boots together: 27 calls explained and none
/// unexplained at no shift, 5 and 3 at −4 h. The node's clock is the true one.
#[test]
fn one_boots_lucky_alignment_does_not_set_the_nodes_trace_clock() {
    use Bind::{Absent, After, Before};
    let mut four = Spec::study(12607138543850497559);
    four.gpus = 4;
    four.boot_ram_gib = 14;
    four.hot_ram_gib = 64;
    four.pin_trace = false;
    four.binds = vec![
        Before, Absent, Before, Before, Absent, Absent, After, Absent,
    ];
    four.enable_order = vec![3, 2, 1, 0];
    four.agent_offset_ms = 350;
    four.foreign_pins = true;
    four.pre314 = true;
    four.tail_cut = Some(0.21303740105846447);
    let mut one = Spec::study(13672771741732134357);
    one.gpus = 1;
    one.bar_gib = 80;
    one.boot_ram_gib = 4;
    one.hot_ram_gib = 64;
    one.ram_pages = RamPages::Huge;
    one.binds = vec![Before, After, Absent, After, Before, After, Absent, Before];
    one.enable_order = vec![0];
    one.prefix_only_pct = 30;
    one.agent_offset_ms = 350;
    one.emulated_vga = true;
    one.kubectl = true;
    let mut six = Spec::study(2514099515606329058);
    six.gpus = 6;
    six.hot_ram_gib = 0;
    six.pin_trace = false;
    six.binds = vec![After, After, After, Before, Before, After, Before, After];
    six.enable_order = vec![5, 4, 3, 2, 1, 0];
    six.agent_offset_ms = 28800040;
    six.foreign_pins = true;
    six.concurrent_pins = true;
    six.pre314 = true;
    six.outcome = Outcome::CreateTimeout;
    let mut two = Spec::study(10701046998399241342);
    two.gpus = 2;
    two.bar_gib = 32;
    two.boot_ram_gib = 16;
    two.hot_ram_gib = 0;
    two.ram_pages = RamPages::Huge;
    two.binds = vec![After, After, Before, Before, Before, After, Before, Before];
    two.enable_order = vec![1, 0];
    two.prefix_only_pct = 30;
    two.agent_offset_ms = 28800040;
    two.foreign_pins = true;
    two.concurrent_pins = true;
    two.outcome = Outcome::CreateTimeout;
    let nodes = fleet_of(vec![vec![Spec::study(0)], vec![four, one, six, two]]);
    let f = analyze(&nodes);
    check(&nodes, &f).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        f.trace_shift_h
            .get("gpu-02.dc1.example")
            .copied()
            .unwrap_or(0),
        0
    );
    let row = f
        .rows
        .iter()
        .find(|r| r.gpus == Some(1) && r.node.as_deref() == Some("gpu-02.dc1.example"))
        .unwrap();
    assert!(row.page_size.is_some(), "{row:?}");
}

/// A node whose traced boot failed before any GPU arrived (the hypervisor refused the
/// VFIO hot-plug: no enable lines its pins up) and whose trace holds an earlier VM's pins
/// 10–50 min before it, then an untraced 6-GPU boot 4 h 17 min later. A +5 h shift puts
/// the earlier VM's six 4 GiB RAM pins on the untraced boot's six GPU enables: as BAR pins
/// (4 GiB is no VRAM BAR of a 128 GiB-BAR GPU) they explain nothing, and the node keeps the
/// trace's own clock — with the traced boot's one RAM pin at its VM creation (first seed),
/// and with it taken for another QEMU's, a concurrent VM pinning beside it (second seed).
#[test]
fn a_failed_hotplugs_trace_keeps_its_clock() {
    for seed in [11083178013056746127, 11083178013056748752] {
        let mut failed = Spec::study(seed);
        failed.gpus = 1;
        failed.bar_gib = 32;
        failed.boot_ram_gib = 1;
        failed.hot_ram_gib = 0;
        failed.agent_offset_ms = 350;
        failed.foreign_pins = true;
        failed.concurrent_pins = seed % 2 == 0;
        failed.pre314 = true;
        failed.outcome = Outcome::HotplugFailed;
        let mut six = Spec::study(9598948311867052938);
        six.gpus = 6;
        six.boot_ram_gib = 11;
        six.hot_ram_gib = 64;
        six.pin_trace = false;
        six.enable_order = vec![5, 4, 3, 2, 1, 0];
        six.prefix_only_pct = 30;
        six.foreign_pins = true;
        six.concurrent_pins = true;
        six.emulated_vga = true;
        six.kubectl = true;
        let nodes = fleet_of(vec![vec![failed, six]]);
        let f = analyze(&nodes);
        check(&nodes, &f).unwrap_or_else(|e| panic!("seed {seed}: {e}"));
        let shift = f.trace_shift_h.get("gpu-01.dc1.example").copied();
        assert_eq!(shift.unwrap_or(0), 0, "seed {seed}");
        assert_eq!(f.rows[1].phases["dma_pinning"].n, 0, "seed {seed}");
    }
}
