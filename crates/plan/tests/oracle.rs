//! The planner's choice equals the exhaustive optimum of the same cost function.
//!
//! The oracle scores every node set and every set of whole candidate cores with
//! `plan::cost::Scorer` (no knapsack, no pruning) and keeps the minimum of
//! (cost, Σ 2^core, node list). The planner (`plan::select::best_placement`) must return the
//! same placement on every small shared topology (≤ 32 PUs) and on random synthetic hosts.

mod common;

use plan::cost::{Context, CoreBits, Cost, Scorer};
use plan::select::best_placement;
use plan::{Request, Tenant};
use proptest::prelude::*;

/// Largest candidate-core count the oracle enumerates (2^N subsets per node set).
const MAX_ENUM: usize = 16;

type Best = (Cost, CoreBits, Vec<u32>, Vec<u32>);

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

/// Compare planner and oracle; `Ok(false)` when the case is too big to enumerate.
fn check(host: &topo::Host, req: &Request, tenants: &[Tenant]) -> Result<bool, String> {
    let ctx = match Context::new(req, host, tenants) {
        Ok(c) => c,
        Err(_) => return Ok(false),
    };
    let want = match oracle(&ctx) {
        Ok(w) => w,
        Err(_) => return Ok(false),
    };
    let got = best_placement(&ctx);
    match (&want, &got) {
        (None, None) => Ok(true),
        (Some((cost, _, nodes, cores)), Some(p)) => {
            if p.cost != *cost || p.nodes != *nodes || p.cores != *cores {
                return Err(format!(
                    "{}: {req:?}\n planner {:?} nodes {:?} cores {:?}\n oracle  {cost:?} nodes {nodes:?} cores {cores:?}",
                    host.source, p.cost, p.nodes, p.cores
                ));
            }
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
                        let req = Request {
                            name: None,
                            vcpus,
                            memory_bytes: mem,
                            devices: devices.clone(),
                            profile: plan::Profile::Gaming,
                            os: plan::GuestOs::Linux,
                            hugepages: hp,
                            host_cpus: None,
                        };
                        match check(host, &req, &tenants) {
                            Ok(true) => compared += 1,
                            Ok(false) => {}
                            Err(e) => panic!("{name}: {e}"),
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
fn planner_is_optimal_on_the_builtin_host() {
    let host = topo::builtin::default_host();
    for vcpus in 1..=15 {
        for devices in [vec![], vec!["01:00.0".to_string()]] {
            let req = Request {
                name: None,
                vcpus,
                memory_bytes: 8 * common::GIB,
                devices,
                profile: plan::Profile::Gaming,
                os: plan::GuestOs::Windows,
                hugepages: plan::HugepagePolicy::Auto,
                host_cpus: None,
            };
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
}
