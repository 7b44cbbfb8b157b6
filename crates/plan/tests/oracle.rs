//! The planner's choice equals the exhaustive optimum of the same cost function, its emulator
//! core follows the emulator rule, and the host's housekeeping never moves.
//!
//! The oracle scores every node set and every set of whole candidate cores with
//! `plan::cost::Scorer` (no knapsack, no pruning) and keeps the minimum of
//! (cost, Σ 2^core, node list). It then places the emulator by brute force over every free
//! core, with the rule written out here from its definition in `plan::emulator` (own L3 group,
//! the host's L3 group on the VM's nodes, then off them where the housekeeping CPUs are all
//! off them too, then the housekeeping CPUs; never another tenant's L3 group nor an unused
//! one), and checks the planner's
//! emulator against it and against the rule's properties. The planner
//! (`plan::select::best_placement`) must return the same placement on every small shared
//! topology (≤ 32 PUs) and on random synthetic hosts, also as tenants pile up one after
//! another — and every plan of such a chain keeps the first plan's housekeeping CPUs.

mod common;

use plan::context::Context;
use plan::cost::{CoreBits, Cost, Scorer};
use plan::emulator::Place;
use plan::select::{best_placement, Placement};
use plan::{Request, Tenant};
use proptest::prelude::*;
use topo::CpuSet;

/// Largest candidate-core count the oracle enumerates (2^N subsets per node set).
const MAX_ENUM: usize = 16;

type Best = (Cost, CoreBits, Vec<u32>, Vec<u32>);

/// The emulator rule's order: (place rank, off the VM's nodes, distance to them, device
/// distance, slower kind first, L2 rank, core).
type EmulatorKey = (u32, bool, u64, u64, std::cmp::Reverse<u32>, u32, u32);

fn oracle(ctx: &Context) -> Result<Option<Best>, String> {
    let nodes = &ctx.nodes;
    if nodes.len() > 8 {
        return Err(format!("{} nodes", nodes.len()));
    }
    let mut best: Option<Best> = None;
    for nmask in 1u32..(1 << nodes.len()) {
        let set: Vec<u32> = (0..nodes.len())
            .filter(|i| nmask & (1 << i) != 0)
            .map(|i| nodes[i])
            .collect();
        let Some(sc) = Scorer::new(ctx, &set) else {
            continue;
        };
        let cand = sc.allowed.clone();
        if cand.len() > MAX_ENUM {
            return Err(format!("{} candidate cores", cand.len()));
        }
        let mut cores = Vec::with_capacity(cand.len());
        for mask in 1u32..(1 << cand.len()) {
            cores.clear();
            cores.extend(
                (0..cand.len())
                    .filter(|i| mask & (1 << i) != 0)
                    .map(|i| cand[i]),
            );
            let Some(cost) = sc.score(&cores) else {
                continue;
            };
            let better = match &best {
                None => true,
                Some((c, b, n, _)) => {
                    let bits = CoreBits::from_cores(&cores);
                    (cost, &bits, &set) < (*c, b, n)
                }
            };
            if better {
                best = Some((
                    cost,
                    CoreBits::from_cores(&cores),
                    set.clone(),
                    cores.clone(),
                ));
            }
        }
    }
    Ok(best)
}

/// The emulator by brute force, from the rule's definition: (core or None, place).
fn oracle_emulator(
    ctx: &Context,
    tenants: &[Tenant],
    nodes: &[u32],
    guest: &[u32],
) -> (Option<u32>, Place) {
    let own: Vec<Option<u32>> = guest.iter().map(|&g| ctx.cores[g as usize].l3).collect();
    let l3_has = |l3: u32, cpus: &CpuSet| ctx.l3_cpus[&l3].intersects(cpus);
    let tenant_vcpus = tenant_vcpus(tenants);
    // the housekeeping CPUs are all off the VM's nodes: a host-L3 core off them may do
    let housekeeping_away = ctx
        .host_cpus
        .iter()
        .all(|cpu| !nodes.contains(&ctx.node_of(cpu)));
    let mut best: Option<(EmulatorKey, Place)> = None;
    for c in &ctx.cores {
        if !c.free || guest.contains(&c.id) {
            continue;
        }
        let away = !nodes.contains(&c.node);
        let any_l3 = ctx.cores.iter().any(|x| x.l3.is_some());
        let host_group = |l: u32| l3_has(l, &ctx.host_cpus) && !l3_has(l, &tenant_vcpus);
        let (rank, place) = if away {
            match c.l3 {
                Some(l) if any_l3 && housekeeping_away && host_group(l) => (1, Place::HostL3),
                _ => continue,
            }
        } else if !any_l3 {
            (0, Place::OwnL3)
        } else {
            match c.l3 {
                Some(l) if own.contains(&Some(l)) => (0, Place::OwnL3),
                Some(l) if host_group(l) => (1, Place::HostL3),
                _ => continue,
            }
        };
        let to_vm = if away {
            nodes
                .iter()
                .map(|&n| ctx.distance(c.node, n))
                .min()
                .unwrap()
        } else {
            0
        };
        let l2 = match c.l2 {
            None => 2,
            Some(l) => {
                let cpus = &ctx.l2_cpus[&l];
                if guest.iter().any(|&g| ctx.cores[g as usize].l2 == Some(l)) {
                    0
                } else if cpus.intersects(&ctx.host_cpus) {
                    1
                } else if cpus.intersects(&ctx.tenant_cpus) {
                    3
                } else {
                    2
                }
            }
        };
        let key = (
            rank,
            away,
            to_vm,
            ctx.node_device_distance(c.node),
            std::cmp::Reverse(c.kind),
            l2,
            c.id,
        );
        if best.as_ref().is_none_or(|(k, _)| key < *k) {
            best = Some((key, place));
        }
    }
    match best {
        Some(((.., id), place)) => (Some(id), place),
        None => (None, Place::HostCpus),
    }
}

/// CPUs the tenants' vCPUs run on (not their emulators).
fn tenant_vcpus(tenants: &[Tenant]) -> CpuSet {
    tenants.iter().fold(CpuSet::new(), |acc, t| {
        acc.union(&t.cpus.difference(&t.emulator_cpus))
    })
}

/// The emulator rule's properties on the planner's own placement.
fn check_emulator_rule(ctx: &Context, tenants: &[Tenant], p: &Placement) -> Result<(), String> {
    let Some(e) = p.emulator.core else {
        return Ok(());
    };
    let info = &ctx.cores[e as usize];
    if !info.free || p.cores.contains(&e) {
        return Err(format!("emulator core {e} is not a spare core"));
    }
    if !p.nodes.contains(&info.node) {
        let housekeeping_on_vm = ctx
            .host_cpus
            .iter()
            .any(|cpu| p.nodes.contains(&ctx.node_of(cpu)));
        let host_l3 = info
            .l3
            .is_some_and(|l| ctx.l3_cpus[&l].intersects(&ctx.host_cpus));
        if housekeeping_on_vm || !host_l3 {
            return Err(format!(
                "emulator core {e} is off the VM's nodes, but not a host-L3 core beside housekeeping CPUs that are all off them too"
            ));
        }
    }
    if let Some(l3) = info.l3 {
        let own = p
            .cores
            .iter()
            .any(|&g| ctx.cores[g as usize].l3 == Some(l3));
        if !own && ctx.l3_cpus[&l3].intersects(&tenant_vcpus(tenants)) {
            return Err(format!(
                "emulator core {e} sits in L3 #{l3}, where another tenant's vCPUs run and the guest's do not"
            ));
        }
        if !own && !ctx.l3_cpus[&l3].intersects(&ctx.host_cpus) {
            return Err(format!(
                "emulator core {e} sits in L3 #{l3}, neither the guest's nor the host's"
            ));
        }
    }
    // the emulator takes the lowest core of its class in the VM's footprint
    let class = |c: u32| {
        let i = &ctx.cores[c as usize];
        (i.node, i.l3, i.l2, i.kind, i.pus.len())
    };
    if let Some(g) = p.cores.iter().find(|&&g| g < e && class(g) == class(e)) {
        return Err(format!(
            "emulator core {e} is not the lowest of its class: guest core {g} is interchangeable"
        ));
    }
    Ok(())
}

/// Compare planner and oracle; `Ok(false)` when the case is too big to enumerate.
fn check(host: &topo::Host, req: &Request, tenants: &[Tenant]) -> Result<bool, String> {
    let mut ctx = match Context::new(req, host, tenants) {
        Ok(c) => c,
        Err(_) => return Ok(false),
    };
    // a core a vCPU (--threads spread): one slot per core, in the search and in score()
    ctx.spread = req.threads == plan::ThreadPolicy::Spread;
    let want = match oracle(&ctx) {
        Ok(w) => w,
        Err(_) => return Ok(false),
    };
    let got = best_placement(&ctx);
    match (&want, &got) {
        (None, None) => Ok(true),
        (Some((cost, _, nodes, cores)), Some(p)) => {
            // the oracle's emulator, then the same settling: lowest core of its class
            let (mut e, place) = oracle_emulator(&ctx, tenants, nodes, cores);
            let mut cores = cores.clone();
            if let Some(x) = e {
                let class = |c: u32| {
                    let i = &ctx.cores[c as usize];
                    (i.node, i.l3, i.l2, i.kind, i.pus.len())
                };
                if let Some(pos) = cores
                    .iter()
                    .enumerate()
                    .filter(|(_, &g)| g < x && class(g) == class(x))
                    .min_by_key(|(_, &g)| g)
                    .map(|(i, _)| i)
                {
                    e = Some(cores[pos]);
                    cores[pos] = x;
                    cores.sort_unstable();
                }
            }
            if p.cost != *cost || p.nodes != *nodes || p.cores != cores {
                return Err(format!(
                    "{}: {req:?}\n planner {:?} nodes {:?} cores {:?}\n oracle  {cost:?} nodes {nodes:?} cores {cores:?}",
                    host.source, p.cost, p.nodes, p.cores
                ));
            }
            if p.emulator.core != e || p.emulator.place != place {
                return Err(format!(
                    "{}: {req:?}: planner's emulator {:?} vs oracle's {e:?} {place:?}",
                    host.source, p.emulator
                ));
            }
            check_emulator_rule(&ctx, tenants, p)
                .map_err(|m| format!("{}: {req:?}: {m}", host.source))?;
            if plan::cost::score(&ctx, &p.nodes, &p.cores) != Some(p.cost) {
                return Err("planner's cost differs from score()".into());
            }
            Ok(true)
        }
        _ => Err(format!(
            "{}: {req:?}: planner {:?} vs oracle {:?}",
            host.source,
            got.map(|p| (p.cost, p.cores)),
            want.map(|w| (w.0, w.3))
        )),
    }
}

/// The planner against the oracle for a container (`Workload::Container`): no emulator core
/// (the guest's cores are not settled around one), and a clean L3 group left part-used counts
/// as shared, in the knapsack and in `Scorer` alike.
fn check_container(host: &topo::Host, req: &Request, tenants: &[Tenant]) -> Result<bool, String> {
    let Ok(mut ctx) = Context::new(req, host, tenants) else {
        return Ok(false);
    };
    ctx.workload = plan::Workload::Container;
    let Ok(want) = oracle(&ctx) else {
        return Ok(false);
    };
    let got = best_placement(&ctx);
    match (&want, &got) {
        (None, None) => Ok(true),
        (Some((cost, _, nodes, cores)), Some(p))
            if p.cost == *cost && p.nodes == *nodes && p.cores == *cores =>
        {
            if plan::cost::score(&ctx, &p.nodes, &p.cores) != Some(p.cost) {
                return Err("planner's cost differs from score()".into());
            }
            Ok(true)
        }
        _ => Err(format!(
            "{}: container {req:?}: planner {:?} vs oracle {:?}",
            host.source,
            got.map(|p| (p.cost, p.nodes, p.cores)),
            want.map(|w| (w.0, w.2, w.3))
        )),
    }
}

fn request(vcpus: u32, mem: u64, devices: Vec<String>, hp: plan::HugepagePolicy) -> Request {
    Request {
        name: None,
        vcpus,
        memory_bytes: mem,
        devices,
        profile: plan::Profile::Gaming,
        os: plan::GuestOs::Linux,
        hugepages: hp,
        host_cpus: None,
        move_host_cpus: false,
        threads: plan::ThreadPolicy::Auto,
    }
}

/// Plan VMs of the given sizes one after another on `host`, each a tenant of the next,
/// checking each against the oracle and that every plan keeps the first plan's housekeeping
/// CPUs. Returns (plans made, cases compared).
fn chain(host: &topo::Host, sizes: &[u32], gpus: &[String]) -> Result<(usize, usize), String> {
    let mut tenants: Vec<Tenant> = Vec::new();
    let mut housekeeping: Option<CpuSet> = None;
    let mut compared = 0;
    for (i, &vcpus) in sizes.iter().enumerate() {
        let devices: Vec<String> = gpus.get(i).cloned().into_iter().collect();
        let req = request(vcpus, 2 * common::GIB, devices, plan::HugepagePolicy::Auto);
        if check(host, &req, &tenants)? {
            compared += 1;
        }
        let Ok(p) = plan::plan(&req, host, &tenants) else {
            break;
        };
        match &housekeeping {
            None => housekeeping = Some(p.host_cpus.clone()),
            Some(h) if *h != p.host_cpus => {
                return Err(format!(
                    "{}: plan {i} moved the housekeeping from {h} to {}",
                    host.source, p.host_cpus
                ))
            }
            Some(_) => {}
        }
        // an emulator on the housekeeping CPUs never makes them the tenant's
        let t = Tenant::from_plan(&p);
        let probe = request(1, common::GIB, vec![], plan::HugepagePolicy::None);
        let ctx =
            Context::new(&probe, host, std::slice::from_ref(&t)).map_err(|e| e.to_string())?;
        if ctx.tenant_cpus.intersects(&p.host_cpus) {
            return Err(format!(
                "{}: tenant {i} holds housekeeping CPUs {}",
                host.source,
                ctx.tenant_cpus.intersection(&p.host_cpus)
            ));
        }
        tenants.push(t);
    }
    Ok((tenants.len(), compared))
}

#[test]
fn planner_is_optimal_on_small_shared_topologies() {
    let hosts: Vec<_> = common::shared_hosts()
        .into_iter()
        .filter(|(_, h)| h.pus.len() <= 32)
        .collect();
    // 6 of the shared topologies have at most 32 PUs; all must be compared
    assert!(
        hosts.len() >= 6,
        "only {} small shared topologies loaded",
        hosts.len()
    );
    let mut compared = 0;
    for (name, host) in &hosts {
        let gpus: Vec<String> = host.gpus().map(|g| g.bdf.clone()).collect();
        let device_choices: Vec<Vec<String>> = std::iter::once(vec![])
            .chain(gpus.iter().take(3).map(|g| vec![g.clone()]))
            .collect();
        for tenants in [vec![], common::tenants_for(host, 2, 2)] {
            for vcpus in [1u32, 2, 3, 4, 5, 7, 8, 12, 16, 24, 31] {
                for devices in &device_choices {
                    for (mem, hp) in [
                        (4 * common::GIB, plan::HugepagePolicy::Auto),
                        (16 * common::GIB, plan::HugepagePolicy::None),
                    ] {
                        let req = request(vcpus, mem, devices.clone(), hp);
                        // and a core per vCPU with guest cells mirroring the nodes: the
                        // balance term and one slot per core
                        let spread = Request {
                            profile: plan::Profile::Membw,
                            threads: plan::ThreadPolicy::Spread,
                            ..req.clone()
                        };
                        for req in [req, spread] {
                            match check(host, &req, &tenants) {
                                Ok(true) => compared += 1,
                                Ok(false) => {}
                                Err(e) => panic!("{name}: {e}"),
                            }
                        }
                    }
                }
            }
        }
        eprintln!("{name}: planner = oracle");
    }
    eprintln!("{compared} cases compared on {} shared hosts", hosts.len());
}

#[test]
fn chains_keep_the_housekeeping_and_match_the_oracle_on_small_shared_topologies() {
    let mut compared = 0;
    let mut hosts = 0;
    for (name, host) in common::shared_hosts()
        .into_iter()
        .filter(|(_, h)| h.pus.len() <= 32)
    {
        let gpus: Vec<String> = host.gpus().map(|g| g.bdf.clone()).collect();
        let mut placed = 0;
        for sizes in [
            vec![2u32; 16],
            vec![4; 16],
            vec![1, 3, 2, 5, 2, 1, 4, 2, 3, 1],
        ] {
            let (p, n) = chain(&host, &sizes, &gpus).unwrap_or_else(|e| panic!("{e}"));
            placed += p;
            compared += n;
        }
        assert!(placed >= 1, "{name}: no VM placed in three chains");
        hosts += 1;
    }
    assert!(hosts >= 6, "only {hosts} small shared topologies");
    assert!(compared >= 60, "only {compared} chained cases compared");
    eprintln!("{compared} chained cases compared on {hosts} shared hosts");
}

#[test]
fn containers_are_optimal_on_small_shared_topologies() {
    let mut compared = 0;
    for (name, host) in common::shared_hosts()
        .into_iter()
        .filter(|(_, h)| h.pus.len() <= 32)
    {
        for tenants in [
            vec![],
            common::tenants_for(&host, 2, 2),
            common::tenants_for(&host, 3, 3),
        ] {
            for vcpus in [1u32, 2, 3, 4, 6, 8, 12] {
                let req = request(vcpus, 2 * common::GIB, vec![], plan::HugepagePolicy::None);
                match check_container(&host, &req, &tenants) {
                    Ok(true) => compared += 1,
                    Ok(false) => {}
                    Err(e) => panic!("{name}: {e}"),
                }
            }
        }
    }
    assert!(compared >= 60, "only {compared} container cases compared");
    eprintln!("{compared} container cases: planner = oracle");
}

#[test]
fn planner_is_optimal_on_the_builtin_host() {
    let host = topo::builtin::default_host();
    for vcpus in 1..=15 {
        for devices in [vec![], vec!["01:00.0".to_string()]] {
            let mut req = request(vcpus, 8 * common::GIB, devices, plan::HugepagePolicy::Auto);
            req.os = plan::GuestOs::Windows;
            assert!(check(&host, &req, &[]).unwrap(), "not compared: {req:?}");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 96,
        failure_persistence: Some(Box::new(prop::test_runner::FileFailurePersistence::WithSource("regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn planner_is_optimal_on_random_small_hosts(
        shape in common::shape(18),
        seed in common::request_seed(),
        tenant_count in 0usize..3,
        tenant_vcpus in 1u32..4,
    ) {
        let host = common::synthetic(&shape);
        let tenants = common::tenants_for(&host, tenant_count, tenant_vcpus);
        let req = common::request_for(&host, seed);
        if let Err(e) = check(&host, &req, &tenants) {
            return Err(TestCaseError::fail(e));
        }
    }

    #[test]
    fn containers_are_optimal_on_random_small_hosts(
        shape in common::shape(18),
        seed in common::request_seed(),
        tenant_count in 0usize..4,
        tenant_vcpus in 1u32..4,
    ) {
        let host = common::synthetic(&shape);
        let tenants = common::tenants_for(&host, tenant_count, tenant_vcpus);
        let req = common::request_for(&host, seed);
        if let Err(e) = check_container(&host, &req, &tenants) {
            return Err(TestCaseError::fail(e));
        }
    }

    #[test]
    fn chains_on_random_small_hosts_keep_the_housekeeping(
        shape in common::shape(18),
        sizes in prop::collection::vec(1u32..6, 1..10),
    ) {
        let host = common::synthetic(&shape);
        let gpus: Vec<String> = host.gpus().map(|g| g.bdf.clone()).collect();
        if let Err(e) = chain(&host, &sizes, &gpus) {
            return Err(TestCaseError::fail(e));
        }
    }
}
