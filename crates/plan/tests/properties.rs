//! Planner invariants on every shared real topology and on random synthetic hosts, with
//! random requests and tenants:
//! - the vCPU count is exact, vCPUs are numbered 0..n and pinned to distinct host PUs;
//! - no core is split between the guest and the host or emulator/iothreads;
//! - nothing overlaps a tenant's pinned CPUs;
//! - the devices' node is chosen when it has room (free whole cores and memory);
//! - the guest topology's product is the vCPU count, and with threads > 1 each group of
//!   vCPUs sits on the siblings of one core;
//! - guest NUMA cells cover every vCPU once and add up to the memory.

mod common;

use plan::{Plan, Request, Tenant};
use proptest::prelude::*;
use topo::{CpuSet, Host};

fn core_of(host: &Host, cpu: u32) -> Option<u32> {
    host.pu(cpu).map(|p| p.core)
}

/// Check every invariant of one plan; `Err` names the broken one.
fn check_plan(host: &Host, req: &Request, tenants: &[Tenant], p: &Plan) -> Result<(), String> {
    let n = req.vcpus as usize;
    if p.vcpus.len() != n {
        return Err(format!("{} vCPUs pinned for {n}", p.vcpus.len()));
    }
    for (i, v) in p.vcpus.iter().enumerate() {
        if v.vcpu != i as u32 {
            return Err(format!("vCPU {i} numbered {}", v.vcpu));
        }
        if host.pu(v.cpu).is_none() {
            return Err(format!(
                "vCPU {i} on CPU {} which the host does not have",
                v.cpu
            ));
        }
    }
    let guest = p.guest_cpus();
    if guest.len() != n {
        return Err(format!("two vCPUs share a host CPU: {:?}", p.vcpus));
    }
    // no split core
    let host_side = p.host_cpus.union(&p.emulator_cpus).union(&p.iothread_cpus);
    for cpu in guest.iter() {
        let core = core_of(host, cpu).ok_or("guest CPU without core")?;
        let sibs = &host.cores[core as usize].pus;
        if sibs.intersects(&host_side) {
            return Err(format!(
                "core {core} ({sibs}) split: guest CPU {cpu}, host side {}",
                sibs.intersection(&host_side)
            ));
        }
    }
    if guest.intersects(&host_side) {
        return Err("guest and host side overlap".into());
    }
    // tenants
    let taken = plan::taken_cpus(tenants);
    if guest.intersects(&taken) {
        return Err(format!(
            "guest CPUs {} taken by tenants",
            guest.intersection(&taken)
        ));
    }
    if p.emulator_cpus != p.host_cpus && p.emulator_cpus.intersects(&taken) {
        return Err("emulator on tenant CPUs".into());
    }
    for t in tenants {
        for d in &p.devices {
            if t.devices.contains(&d.bdf) {
                return Err(format!("device {} of tenant {} reused", d.bdf, t.name));
            }
        }
    }
    // topology
    let t = p.guest_topology;
    if t.sockets * t.dies * t.cores * t.threads != req.vcpus {
        return Err(format!("guest topology {t:?} is not {} vCPUs", req.vcpus));
    }
    if t.threads > 1 {
        for group in p.vcpus.chunks(t.threads as usize) {
            let cores: Vec<Option<u32>> = group.iter().map(|v| core_of(host, v.cpu)).collect();
            if cores.iter().any(|c| *c != cores[0]) {
                return Err(format!("vCPUs {group:?} reported as siblings are not"));
            }
        }
    }
    // threads: one vCPU per core under spread, its other threads idle and nobody's
    let cores_used: std::collections::BTreeSet<Option<u32>> =
        guest.iter().map(|c| core_of(host, c)).collect();
    let all_threads: CpuSet = cores_used
        .iter()
        .flatten()
        .flat_map(|&c| host.cores[c as usize].pus.iter())
        .collect();
    if p.idle_cpus != all_threads.difference(&guest) {
        return Err(format!(
            "idle CPUs {} are not the unused threads {} of the guest's cores",
            p.idle_cpus,
            all_threads.difference(&guest)
        ));
    }
    if p.threads == plan::Threads::Spread {
        if cores_used.len() != n {
            return Err(format!(
                "spread, but {n} vCPUs on {} cores",
                cores_used.len()
            ));
        }
        if t.threads != 1 {
            return Err(format!("spread, but the guest sees {} threads", t.threads));
        }
    }
    if req.threads == plan::ThreadPolicy::Pack && p.threads != plan::Threads::Pack {
        return Err("--threads pack not followed".into());
    }
    if req.threads == plan::ThreadPolicy::Spread && cores_used.len() != n {
        return Err(format!(
            "--threads spread, but {n} vCPUs share {} cores",
            cores_used.len()
        ));
    }
    // guest NUMA
    let mut seen = CpuSet::new();
    for c in &p.guest_numa {
        if c.vcpus.is_empty() {
            return Err(format!("guest cell {} has no vCPUs", c.cell));
        }
        if c.vcpus.intersects(&seen) {
            return Err("a vCPU in two guest NUMA cells".into());
        }
        seen = seen.union(&c.vcpus);
    }
    if seen != (0..req.vcpus).collect::<CpuSet>() {
        return Err(format!("guest NUMA cells cover {seen}, not every vCPU"));
    }
    let cell_mem: u64 = p.guest_numa.iter().map(|c| c.memory_bytes).sum();
    if cell_mem < req.memory_bytes {
        return Err(format!(
            "guest cells hold {cell_mem} < {}",
            req.memory_bytes
        ));
    }
    if p.memory.hugepage_size_kb > 4
        && p.memory.pages * p.memory.hugepage_size_kb * 1024 < req.memory_bytes
    {
        return Err("too few pages".into());
    }
    // the devices' node when it has room
    let dev_nodes: Vec<Vec<u32>> = p.devices.iter().filter_map(|d| d.numa.clone()).collect();
    if let Some(first) = dev_nodes.first() {
        if first.len() == 1 && dev_nodes.iter().all(|d| d == first) && !host.numa_nodes.is_empty() {
            let node = first[0];
            let spread = p.threads == plan::Threads::Spread;
            if device_node_has_room(host, req, tenants, &p.host_cpus, node, spread) {
                let off: Vec<u32> = guest
                    .iter()
                    .filter(|&c| host.pu(c).and_then(|p| p.numa) != Some(node))
                    .collect();
                if !off.is_empty() || p.memory.host_nodes != vec![node] {
                    return Err(format!(
                        "device node {node} has room but guest CPUs {off:?} / memory {:?} are elsewhere",
                        p.memory.host_nodes
                    ));
                }
            }
        }
    }
    if p.rationale.is_empty() {
        return Err("no rationale".into());
    }
    check_kinds(host, req, tenants, p)?;
    check_emulator(host, tenants, p)
}

/// Rank of a PU's kind on a hybrid part (0 = fastest), from the host model alone.
fn kind_rank(host: &Host, cpu: u32) -> usize {
    let label = host.pu(cpu).and_then(|p| p.kind.clone());
    host.cpu_kinds
        .iter()
        .position(|k| Some(&k.label) == label.as_ref())
        .unwrap_or(0)
}

/// Hybrid parts and L3-less cores (requests without devices, within the plan's nodes): a core
/// without an L3 only when the cores with one cannot hold the VM; one kind whenever one
/// kind's cores can hold it; the fastest kind whenever it alone can.
fn check_kinds(host: &Host, req: &Request, tenants: &[Tenant], p: &Plan) -> Result<(), String> {
    if !req.devices.is_empty() {
        return Ok(());
    }
    let busy = plan::housekeeping::taken(tenants, &p.host_cpus).union(&p.host_cpus);
    // a core offers one vCPU under spread
    let spread = p.threads == plan::Threads::Spread;
    let slots = |n: &usize| if spread { 1 } else { *n };
    let on_nodes = |cpu: u32| {
        p.memory.host_nodes.is_empty()
            || host
                .pu(cpu)
                .and_then(|x| x.numa)
                .is_some_and(|n| p.memory.host_nodes.contains(&n))
    };
    let has_l3 = host.pus.iter().any(|x| x.l3.is_some());
    let l3_of = |cpu: u32| host.pu(cpu).and_then(|x| x.l3);
    // free cores on the plan's nodes: (first PU, PUs)
    let free: Vec<(u32, usize)> = host
        .cores
        .iter()
        .filter_map(|c| c.pus.first().map(|f| (f, c.pus.len())))
        .filter(|&(f, _)| on_nodes(f))
        .filter(|&(f, _)| {
            core_of(host, f).is_some_and(|c| !host.cores[c as usize].pus.intersects(&busy))
        })
        .collect();
    let guest_firsts: Vec<u32> = p
        .guest_cpus()
        .iter()
        .filter_map(|c| core_of(host, c))
        .filter_map(|c| host.cores[c as usize].pus.first())
        .collect();
    let uses_no_l3 = has_l3 && guest_firsts.iter().any(|&f| l3_of(f).is_none());
    let with_l3: usize = free
        .iter()
        .filter(|(f, _)| !has_l3 || l3_of(*f).is_some())
        .map(|(_, n)| slots(n))
        .sum();
    let n = req.vcpus as usize;
    if uses_no_l3 {
        if with_l3 >= n {
            return Err(format!(
                "guest uses cores without an L3 although cores with one hold {with_l3} free CPUs for {n} vCPUs"
            ));
        }
        return Ok(());
    }
    if host.cpu_kinds.is_empty() {
        return Ok(());
    }
    let mut used: Vec<usize> = guest_firsts.iter().map(|&f| kind_rank(host, f)).collect();
    used.sort_unstable();
    used.dedup();
    let room = |k: usize| -> usize {
        free.iter()
            .filter(|(f, _)| (!has_l3 || l3_of(*f).is_some()) && kind_rank(host, *f) == k)
            .map(|(_, n)| slots(n))
            .sum()
    };
    let fits: Vec<usize> = (0..host.cpu_kinds.len())
        .filter(|&k| room(k) >= n)
        .collect();
    if used.len() > 1 && !fits.is_empty() {
        return Err(format!(
            "guest mixes kinds {used:?} although kind {} alone holds {n} vCPUs",
            fits[0]
        ));
    }
    if let (1, Some(&k), Some(&fastest)) = (used.len(), used.first(), fits.first()) {
        if fastest < k {
            return Err(format!(
                "guest on kind {k} although the faster kind {fastest} holds {n} vCPUs"
            ));
        }
    }
    Ok(())
}

/// The emulator core sits in one of the guest's L3 groups or the host's, never in one
/// where another tenant's vCPUs run unless the guest's own vCPUs share that group.
fn check_emulator(host: &Host, tenants: &[Tenant], p: &Plan) -> Result<(), String> {
    if p.emulator_cpus == p.host_cpus {
        return Ok(());
    }
    let tenant_cpus = tenants.iter().fold(CpuSet::new(), |acc, t| {
        acc.union(&t.cpus.difference(&t.emulator_cpus))
    });
    let guest_l3: Vec<Option<u32>> = p
        .guest_cpus()
        .iter()
        .map(|c| host.pu(c).and_then(|x| x.l3))
        .collect();
    // off the VM's nodes only beside housekeeping CPUs that are all off them too
    let node = |cpu: u32| host.pu(cpu).and_then(|x| x.numa);
    let vm_nodes: Vec<Option<u32>> = p.guest_cpus().iter().map(node).collect();
    if p.emulator_cpus.iter().any(|c| !vm_nodes.contains(&node(c)))
        && p.host_cpus.iter().any(|c| vm_nodes.contains(&node(c)))
    {
        return Err(format!(
            "emulator CPUs {} are off the VM's nodes though housekeeping CPUs are on them",
            p.emulator_cpus
        ));
    }
    for cpu in p.emulator_cpus.iter() {
        let Some(l3) = host.pu(cpu).and_then(|x| x.l3) else {
            continue;
        };
        let group: CpuSet = host
            .pus
            .iter()
            .filter(|x| x.l3 == Some(l3))
            .map(|x| x.os_index)
            .collect();
        if guest_l3.contains(&Some(l3)) {
            continue;
        }
        if group.intersects(&tenant_cpus) {
            return Err(format!(
                "emulator CPU {cpu} sits in an L3 group with tenant vCPUs {} that the guest does not use",
                group.intersection(&tenant_cpus)
            ));
        }
        if !group.intersects(&p.host_cpus) {
            return Err(format!(
                "emulator CPU {cpu} sits in an L3 group neither the guest nor the host uses"
            ));
        }
    }
    Ok(())
}

/// Independent of the planner: free PUs on whole free cores of `node` (free cores, one vCPU
/// each, under spread) and its memory, less the host's reserve.
fn device_node_has_room(
    host: &Host,
    req: &Request,
    tenants: &[Tenant],
    host_cpus: &CpuSet,
    node: u32,
    spread: bool,
) -> bool {
    let taken = plan::taken_cpus(tenants).union(host_cpus);
    let free: usize = host
        .cores
        .iter()
        .filter(|c| c.pus.first().and_then(|p| host.pu(p)).and_then(|p| p.numa) == Some(node))
        .filter(|c| !c.pus.intersects(&taken))
        .map(|c| if spread { 1 } else { c.pus.len() })
        .sum();
    let held: u64 = tenants
        .iter()
        .flat_map(|t| &t.hugepages)
        .filter(|h| h.node.is_none_or(|n| n == node))
        .map(|h| h.pages * h.size_kb * 1024)
        .sum();
    let mem_ok = host
        .numa_node(node)
        .and_then(|n| n.memory_bytes)
        // the host keeps max(2 GiB, 5 %) of the node
        .is_none_or(|m| m.saturating_sub(held) >= req.memory_bytes + (2 * common::GIB).max(m / 20));
    free >= req.vcpus as usize && mem_ok
}

/// Plan, check, and if refused check that the refusal is one line.
fn run_case(host: &Host, req: &Request, tenants: &[Tenant]) -> Result<Option<Plan>, String> {
    match plan::plan(req, host, tenants) {
        Ok(p) => {
            check_plan(host, req, tenants, &p)
                .map_err(|e| format!("{}: {req:?}: {e}", host.source))?;
            Ok(Some(p))
        }
        Err(e) => {
            let msg = e.to_string();
            if msg.is_empty() || msg.contains('\n') {
                return Err(format!("refusal is not one line: {msg:?}"));
            }
            Ok(None)
        }
    }
}

#[test]
fn invariants_on_every_shared_topology() {
    let hosts = common::shared_hosts();
    // the topologies are in the repository (testdata/): every one of them must load and be
    // checked, so this test cannot pass on an empty or half-loaded set
    let files = std::fs::read_dir(common::topology_dir())
        .expect("testdata/topologies/hwloc")
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.path().extension().is_some_and(|x| x == "xml"))
        })
        .count();
    assert!(files >= 21, "only {files} hwloc files found");
    assert_eq!(hosts.len(), files, "some shared topologies did not load");
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 16,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    for (name, host) in &hosts {
        let r = runner.run(
            &(common::request_seed(), 0usize..6, 1u32..9),
            |(seed, tenant_count, tenant_vcpus)| {
                let tenants = common::tenants_for(host, tenant_count, tenant_vcpus);
                let req = common::request_for(host, seed);
                run_case(host, &req, &tenants).map_err(TestCaseError::fail)?;
                Ok(())
            },
        );
        if let Err(e) = r {
            panic!("{name}: {e}");
        }
        eprintln!("{name}: {} PUs, invariants hold", host.pus.len());
    }
}

#[test]
fn sequential_tenants_never_overlap_on_shared_topologies() {
    for (name, host) in common::shared_hosts() {
        let mut tenants: Vec<Tenant> = Vec::new();
        let mut housekeeping: Option<CpuSet> = None;
        let gpus: Vec<String> = host.gpus().map(|g| g.bdf.clone()).collect();
        for i in 0..16 {
            let req = Request {
                name: Some(format!("t{i}")),
                vcpus: 2 + (i as u32 % 3) * 2,
                memory_bytes: 4 * common::GIB,
                devices: gpus.get(i).cloned().into_iter().collect(),
                profile: plan::Profile::Compute,
                os: plan::GuestOs::Linux,
                hugepages: plan::HugepagePolicy::Auto,
                host_cpus: None,
                move_host_cpus: false,
                threads: plan::ThreadPolicy::Auto,
            };
            match run_case(&host, &req, &tenants) {
                Ok(Some(p)) => {
                    let first = housekeeping.get_or_insert_with(|| p.host_cpus.clone());
                    assert_eq!(
                        *first, p.host_cpus,
                        "{name}: tenant {i} moved the host housekeeping"
                    );
                    let t = Tenant::from_plan(&p);
                    // what each holds apart from emulators sharing the housekeeping CPUs
                    let own = |t: &Tenant| {
                        plan::housekeeping::taken(std::slice::from_ref(t), &p.host_cpus)
                    };
                    for other in &tenants {
                        assert!(
                            !own(&t).intersects(&own(other)),
                            "{name}: tenant {i} overlaps {}",
                            other.name
                        );
                    }
                    tenants.push(t);
                }
                Ok(None) => break,
                Err(e) => panic!("{name}: {e}"),
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 192,
        failure_persistence: Some(Box::new(prop::test_runner::FileFailurePersistence::WithSource("regressions"))),
        ..ProptestConfig::default()
    })]

    #[test]
    fn invariants_on_random_hosts(
        shape in common::shape(256),
        seed in common::request_seed(),
        tenant_count in 0usize..5,
        tenant_vcpus in 1u32..6,
    ) {
        let host = common::synthetic(&shape);
        let tenants = common::tenants_for(&host, tenant_count, tenant_vcpus);
        let req = common::request_for(&host, seed);
        run_case(&host, &req, &tenants).map_err(TestCaseError::fail)?;
    }

    #[test]
    fn refuses_exactly_when_too_big(shape in common::shape(64), extra in 1u32..8) {
        let host = common::synthetic(&shape);
        // more vCPUs than the host has PUs never fits; the message says how many do
        let req = common::request_for(&host, (0, 2, 0, 0, 0, 0, 0));
        let req = Request { vcpus: host.pus.len() as u32 + extra, ..req };
        let err = plan::plan(&req, &host, &[]).unwrap_err().to_string();
        prop_assert!(err.contains("at most"), "{}", err);
    }
}
